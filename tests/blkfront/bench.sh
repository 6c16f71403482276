#!/bin/sh
# xbd-front bench smoke: 2 s of verified random read/write through the
# library reports IOPS, bandwidth, latency percentiles and CPU time, as
# text and as JSON, without errors or verify mismatches; --fua writes go
# out as write + FLUSH_DISKCACHE on a flush-cache backend.
. "$top_srcdir/tests/blkfront/front-lib.sh"
front_setup

out=$("$ASDOM" "$DOMU" "$XBD_FRONT" bench --vdev xvdb --rw randrw --bs 4k --iodepth 8 --runtime 1 --verify 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || bk_fail "bench (text) exited $rc"
for k in 'iops:' 'lat (us): p50' 'p99.9' 'cpu:' 'verify: 0 mismatches' 'errors: 0'; do
	echo "$out" | grep -qF "$k" || bk_fail "text output lacks '$k'"
done

json=$("$ASDOM" "$DOMU" "$XBD_FRONT" bench --vdev xvdb --rw randread --bs 64k --iodepth 4 --runtime 1 --json 2>&1)
rc=$?
echo "$json"
[ $rc -eq 0 ] || bk_fail "bench (json) exited $rc"
echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["rw"] == "randread" and r["bs"] == 65536, r
assert r["iops"] > 0 and r["read_bw_mib_s"] > 0 and r["errors"] == 0, r
assert 0 < r["lat_us"]["p50"] <= r["lat_us"]["p99"] <= r["lat_us"]["p99.9"], r
assert r["cpu_s"] >= 0
' || bk_fail "JSON output is wrong"

# FUA writes on a flush-cache backend: each is a write followed by a flush
json=$("$ASDOM" "$DOMU" "$XBD_FRONT" bench --vdev xvdb --rw randwrite --bs 4k --iodepth 4 --runtime 0.5 \
	--fua --verify --json 2>&1)
rc=$?
echo "$json"
[ $rc -eq 0 ] || bk_fail "bench --fua exited $rc"
echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["fua"] and r["writes"] > 0 and r["errors"] == 0, r
assert r["ring_requests"] == 2 * r["writes"], r
' || bk_fail "FUA writes did not go out as write + flush"
exit 0
