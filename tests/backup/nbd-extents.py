#!/usr/bin/env python3
"""tests/backup/nbd-extents.py: what a backup tool does with changed-block
tracking, as a test needs it: read the extents xbdctl lists from an NBD
export and write them at the same offsets into an image.

    nbd-extents.py SOCKET CHANGES IMAGE

SOCKET is the export's unix socket (nbdkit -U), CHANGES a file with the
output of `xbdctl changes --json` or `--xapi` (XAPI's base64 bitmap of
64 KiB blocks, the first in the top bit of the first byte), IMAGE the
image to patch (a copy of the full backup).  Prints "EXTENTS BYTES".
A minimal NBD client (fixed newstyle, NBD_OPT_GO, simple replies): the
tests need no libnbd binding.
"""

import base64
import json
import socket
import struct
import sys

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPLYMAGIC = 0x3E889045565A9
OPT_GO = 7
REP_ACK = 1
REQ_MAGIC = 0x25609513
SIMPLE_MAGIC = 0x67446698
CMD_READ = 0
CMD_DISC = 2
XAPI_BLOCK = 65536


def recv(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            sys.exit("nbd-extents: the server closed the connection")
        b += c
    return b


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    magic, opt, flags = struct.unpack(">QQH", recv(s, 18))
    if magic != NBDMAGIC or opt != IHAVEOPT:
        sys.exit("nbd-extents: not a newstyle NBD server")
    s.sendall(struct.pack(">I", 3))  # fixed newstyle, no zeroes
    name = b""
    s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, 4 + len(name) + 2) +
              struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
    size = None
    while True:
        m, o, t, ln = struct.unpack(">QIII", recv(s, 20))
        data = recv(s, ln)
        if m != REPLYMAGIC:
            sys.exit("nbd-extents: bad option reply")
        if t == REP_ACK:
            break
        if t & 0x80000000:
            sys.exit("nbd-extents: NBD_OPT_GO refused: %r" % data)
        if t == 3 and len(data) >= 12 and struct.unpack(">H", data[:2])[0] == 0:
            size = struct.unpack(">Q", data[2:10])[0]  # NBD_INFO_EXPORT
    return s, size


def read(s, off, length, handle):
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_READ, handle, off, length))
    m, err, h = struct.unpack(">IIQ", recv(s, 16))
    if m != SIMPLE_MAGIC or h != handle:
        sys.exit("nbd-extents: bad reply")
    if err:
        sys.exit("nbd-extents: read of %d bytes at %d failed: error %d" % (length, off, err))
    return recv(s, length)


def extents(text, size):
    text = text.strip()
    if text.startswith("{"):
        return [(e["offset"], e["length"]) for e in json.loads(text)["extents"]]
    bits = base64.b64decode(text)
    out = []
    for i in range(len(bits) * 8):
        if bits[i // 8] & (0x80 >> (i % 8)):
            off = i * XAPI_BLOCK
            if off >= size:
                break
            ln = min(XAPI_BLOCK, size - off)
            if out and out[-1][0] + out[-1][1] == off:
                out[-1] = (out[-1][0], out[-1][1] + ln)
            else:
                out.append((off, ln))
    return out


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    s, size = connect(sys.argv[1])
    ex = extents(open(sys.argv[2]).read(), size)
    total, h = 0, 1
    with open(sys.argv[3], "r+b") as img:
        for off, ln in ex:
            pos = off
            while pos < off + ln:
                n = min(1 << 20, off + ln - pos)
                img.seek(pos)
                img.write(read(s, pos, n, h))
                h += 1
                pos += n
            total += ln
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_DISC, 0, 0, 0))
    print(len(ex), total)


main()
