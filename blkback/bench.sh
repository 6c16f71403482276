#!/bin/sh
# blkback/bench.sh: xbd-back protocol and storage benchmark on the
# simulator (see blkback/BENCHMARKING.md).  rawfront reads 4 KiB blocks at
# random at queue depth 1 and 32 from the null engine and from a file in
# /dev/shm, with max-batch 32 and 1 and polling on and off, and prints
# IOPS, the mean io_submit batch and notifications per request next to
# fio --ioengine=libaio on the same file in the same run.
#
#   blkback/bench.sh [BUILDDIR] [SECONDS]
top_builddir=$(cd "${1:-.}" && pwd)
top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
SECS=${2:-3}
export top_builddir top_srcdir
. "$top_srcdir/tests/lib/sim.sh"
sim_need sim/xbd-sim xenstore/xbd-xenstored blkback/xbd-back tests/blkback/rawfront
sim_start
SHM=$(mktemp /dev/shm/xbd-bench.XXXXXXXX) || fail "mktemp in /dev/shm"
WORK=$(mktemp -d) || fail "mktemp"
sim_on_exit "rm -rf '$SHM' '$WORK'"
dd if=/dev/urandom of="$SHM" bs=1M count=256 status=none || fail "cannot fill $SHM"

dom=$("$XBD_SIM" domain create "$SIMDIR") || fail "domain create"
null=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdb null:256M) || fail "disk add"
shm=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdc "$SHM") || fail "disk add"
cat >"$WORK/asdom" <<EOS
#!/bin/sh
d=\$1; shift
eval "\$('$XBD_SIM' env '$SIMDIR' "\$d")" || exit 1
exec "\$@"
EOS
chmod +x "$WORK/asdom"

printf "%-6s %3s %6s %6s %10s %10s %12s %12s\n" target qd batch poll iops mean_batch ntf_in/req ntf_out/req
for t in null shm; do
	dev=$null
	[ $t = shm ] && dev=$shm
	for qd in 1 32; do
		for batch in 32 1; do
			for poll in 32000 0; do
				(sim_env 0 && exec "$top_builddir/blkback/xbd-back" -v -v --max-batch $batch \
					--poll-max-ns $poll --run "'$WORK/asdom' $dom \
					'$top_builddir/tests/blkback/rawfront' --dev $dev --qd $qd --secs $SECS bench") \
					>"$WORK/out" 2>"$WORK/log" || { cat "$WORK/out" "$WORK/log"; fail "run failed"; }
				iops=$(sed -n 's/^bench: .* iops=\([0-9]*\) .*/\1/p' "$WORK/out")
				sub=$(sed -n 's/.* io_submit=\([0-9]*\) submitted=\([0-9]*\).*/\1 \2/p' "$WORK/log" | tail -1)
				ntf=$(sed -n 's/.* notify_sent=\([0-9]*\) notify_recv=\([0-9]*\).*/\1 \2/p' "$WORK/log" | tail -1)
				req=$(sed -n 's/.* rd_req=\([0-9]*\) .*/\1/p' "$WORK/log" | tail -1)
				echo "$t $qd $batch $poll $iops $sub $ntf $req" | awk '{
					printf "%-6s %3s %6s %6s %10s %10.2f %12.3f %12.3f\n", $1, $2, $3, $4, $5,
						$6 ? $7 / $6 : 0, $10 ? $9 / $10 : 0, $10 ? $8 / $10 : 0 }'
			done
		done
	done
done
if command -v fio >/dev/null 2>&1; then
	# Linux 6.6+ tmpfs takes O_DIRECT; before, xbd-back falls back to the page cache.
	direct=0
	dd if="$SHM" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null && direct=1
	for qd in 1 32; do
		iops=$(fio --name=bench --filename="$SHM" --ioengine=libaio --direct=$direct --rw=randread \
			--bs=4k --iodepth=$qd --runtime="$SECS" --time_based --output-format=json 2>/dev/null |
			python3 -c 'import json,sys; print(int(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))')
		printf "%-6s %3s %6s %6s %10s   (fio --ioengine=libaio --direct=%s on the same file)\n" \
			fio $qd - - "$iops" $direct
	done
fi
