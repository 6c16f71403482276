#!/usr/bin/env python3
"""ctl-answer.py SOCKET SECS: how long xbd-back's control socket takes to
answer `list`, sampled every 50 ms for SECS seconds (a sample that gets no
answer counts from its start until the end).  Prints one line:
"samples N p50 MS p90 MS max MS".  Timed here, not with xbdctl, so that a
client's own start (a sanitizer build's runtime) is not counted."""
import socket
import sys
import time


def one(path, limit):
    t0 = time.monotonic()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(limit)
    try:
        s.connect(path)
        s.sendall(b"list\n")
        while s.recv(65536):
            pass
    except OSError:
        pass
    finally:
        s.close()
    return (time.monotonic() - t0) * 1000.0


def main():
    path, secs = sys.argv[1], float(sys.argv[2])
    end = time.monotonic() + secs
    times = []
    while time.monotonic() < end:
        times.append(one(path, max(end - time.monotonic(), 0.1) + 5))
        time.sleep(0.05)
    times.sort()
    n = len(times)
    print("samples %d p50 %d p90 %d max %d" % (n, times[n // 2], times[(n * 9) // 10], times[-1]))


main()
