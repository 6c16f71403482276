#!/usr/bin/env python3
"""disk-quiet.py: whether a disk that xbd-back serves is quiet.

Reads `xbdctl stats --json DEVICE` on standard input and exits 0 when
every ring of the device is asleep with all that its guest produced
taken (req_cons = req_prod) and none of what it took still in flight,
1 otherwise (also when the device has no ring, or the input is not
xbdctl's answer).  A stopped guest's last requests can sit in its ring,
not yet taken and so not counted in flight: a disk hashed then could
still change.  The backup tests (tests/backup/lib.sh, readme-backup.sh,
make check-xen's step backup) hash a paused guest's disk only once this
says so.
"""
import json
import sys

try:
    rings = [r.get("ring") for r in json.load(sys.stdin)["devices"][0]["rings"]]
except (ValueError, KeyError, IndexError, TypeError, AttributeError):
    sys.exit(1)
sys.exit(0 if rings and all(r and r.get("asleep_ms") is not None and
                            r["req_cons"] == r["req_prod"] and
                            not r.get("inflight") for r in rings) else 1)
