#!/usr/bin/env python3
"""nbd-stall.py SOCKET MODE: an NBD server on a unix socket that stalls.
  silent   accepts every connection and never says a word (no handshake)
  noreply  completes the fixed-newstyle handshake for a 64 MiB export
           (NBD_OPT_GO, every other option refused), then reads commands
           and answers none of them
Runs until killed."""
import os
import socket
import struct
import sys
import threading

SIZE = 64 << 20
OPT_MAGIC = 0x49484156454F5054  # IHAVEOPT
REP_MAGIC = 0x3E889045565A9
NBD_OPT_EXPORT_NAME, NBD_OPT_ABORT, NBD_OPT_GO, NBD_OPT_INFO = 1, 2, 7, 6
NBD_REP_ACK, NBD_REP_INFO = 1, 3
NBD_REP_ERR_UNSUP = (1 << 31) + 1


def recv_all(c, n):
    b = b""
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d:
            raise EOFError
        b += d
    return b


def reply(c, opt, typ, data=b""):
    c.sendall(struct.pack(">QIII", REP_MAGIC, opt, typ, len(data)) + data)


def noreply(c):
    c.sendall(b"NBDMAGIC" + struct.pack(">QH", OPT_MAGIC, 3))
    recv_all(c, 4)  # the client's flags
    while True:
        magic, opt, length = struct.unpack(">QII", recv_all(c, 16))
        data = recv_all(c, length)
        if opt in (NBD_OPT_GO, NBD_OPT_INFO):
            # export size and flags (HAS_FLAGS | SEND_FLUSH | SEND_FUA)
            reply(c, opt, NBD_REP_INFO, struct.pack(">HQH", 0, SIZE, 1 | 4 | 8))
            reply(c, opt, NBD_REP_ACK)
            if opt == NBD_OPT_GO:
                break
        elif opt == NBD_OPT_ABORT:
            reply(c, opt, NBD_REP_ACK)
            return
        else:
            reply(c, opt, NBD_REP_ERR_UNSUP)
    # The transmission phase: read requests, answer none.
    while c.recv(65536):
        pass


def serve(c, mode):
    try:
        if mode == "noreply":
            noreply(c)
        else:
            while c.recv(65536):
                pass
    except (EOFError, OSError):
        pass
    finally:
        c.close()


def main():
    path, mode = sys.argv[1], sys.argv[2]
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(64)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c, mode), daemon=True).start()


main()
