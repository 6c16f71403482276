# tests/xen/host.sh: sourced by xen-check.sh (and by arm64.sh through
# it).  The host side's functions both machine types use: the host's
# packages (host_packages), a kernel's modules for an initramfs
# (copy_mods, mkcpio) and for dom0 (payload_modules), dom0's disk images
# (dom0_images) and the serial log (serial_fresh); then, once QEMU
# runs, xen_watch follows the serial console (each XBDT-STEP line as it
# comes, into events.txt; the end of the steps or a panic ends it), stops
# QEMU and copies dom0's logs back from the payload disk, and xen_report
# prints the results tables and returns 0 when every step passed, 1
# otherwise.  They read the caller's variables (C, KV, OUT, SERIAL, QPID,
# t0, XEN_CONFIG, XENVER, D0TYPE, GTYPE, LCTYPE, FIO_RUNTIME,
# PVGRUB_BOUND, COUNT_BOUND, HERE; xen_watch sets secs).  Definitions only: sourcing
# it runs nothing.
# host_packages PKG...: the Debian packages the host lacks, installed
host_packages() {
	local p need=
	for p in "$@"; do
		dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q 'install ok installed' || need="$need $p"
	done
	[ -n "$need" ] || return 0
	log "installing host packages:$need"
	{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		-o DPkg::Lock::Timeout=600 --no-install-recommends $need; } >/dev/null 2>&1
}
# copy_mods DST MODULE...: modules + dependencies in load order, names in
# DST/order; compressed ones (Debian 13's .ko.xz) uncompressed, for insmod
copy_mods() {
	local dst=$1 m f b; shift
	mkdir -p "$dst"
	for m in "$@"; do
		modprobe -d "$C/x/kernel" -S "$KV" --show-depends "$m" | awk '$1 == "insmod" { print $2 }' |
		while read -r f; do
			b=$(basename "$f"); b=${b%.xz}; b=${b%.zst}
			grep -qx "$b" "$dst/order" 2>/dev/null && continue
			case $f in
			*.xz) xz -dc "$f" >"$dst/$b" ;;
			*.zst) zstd -qdc "$f" >"$dst/$b" ;;
			*) cp "$f" "$dst/" ;;
			esac
			echo "$b" >>"$dst/order"
		done
	done
}
mkcpio() { (cd "$1" && find . | cpio -o -H newc --quiet | gzip -1) >"$2"; }
# payload_modules DIR: the kernel's modules dom0 loads (Xen's, the block
# and file-system ones) as DIR/lib/modules/KV, with their index
payload_modules() {
	local sub m=$C/x/kernel/lib/modules/$KV
	mkdir -p "$1/lib/modules/$KV/kernel"
	for sub in arch crypto lib fs block drivers/block drivers/xen drivers/virtio drivers/md drivers/char; do
		[ -d "$m/kernel/$sub" ] || continue
		mkdir -p "$1/lib/modules/$KV/kernel/$(dirname $sub)"
		cp -a "$m/kernel/$sub" "$1/lib/modules/$KV/kernel/$sub"
	done
	cp "$m"/modules.{order,builtin,builtin.modinfo} "$1/lib/modules/$KV/" 2>/dev/null
	depmod -b "$1" "$KV" || die "depmod failed"
}
# dom0_images: OUT/dom0.img, the cached rootfs (C/rootfs, label dom0) with
# room for the guests' disks, and OUT/phy.img, dom0's /dev/vdc: a disk of
# its own for the phy runs (both backends' direct path)
dom0_images() {
	rm -f "$OUT/dom0.img"
	truncate -s $(( $(du -sm "$C/rootfs" | cut -f1) + 1200 ))M "$OUT/dom0.img"
	mkfs.ext4 -q -F -L dom0 -d "$C/rootfs" "$OUT/dom0.img" || die "mkfs.ext4 of the dom0 image failed"
	rm -f "$OUT/phy.img"; truncate -s 256M "$OUT/phy.img"
}
# serial_fresh: SERIAL, an empty serial log for the boot (the last one kept
# as serial.prev.log), and no events.txt of an earlier boot
serial_fresh() {
	SERIAL=$OUT/serial.log
	rm -f "$OUT/events.txt"
	[ ! -s "$SERIAL" ] || mv "$SERIAL" "$OUT/serial.prev.log"
	: >"$SERIAL"
}
xen_watch() {
	trap 'kill $QPID 2>/dev/null' EXIT INT TERM
	# the host's load through the run: TCG's pace follows it (tests/xen/README.md)
	( while kill -0 $QPID 2>/dev/null; do echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 10; done ) \
		>"$OUT/hostload.txt" 2>/dev/null &
	seen=
	while kill -0 $QPID 2>/dev/null; do
		new=$(tr -d '\r' <"$SERIAL" | grep -a -E '^XBDT-(STEP|PVGRUB|HANG|LC)' | sed -n "$(( $(echo "$seen" | grep -c .) + 1 )),\$p")
		[ -n "$new" ] && { echo "$new" | sed "s/^/[$(date +%T)] /" | tee -a "$OUT/events.txt" >&2; seen=$(printf '%s\n%s' "$seen" "$new"); }
		grep -qa 'XBDT-DONE' "$SERIAL" && { sleep 5; break; }
		# (Xen's and dom0's own lines: a step's line or a guest's console
		# quoted by dom0, "  [NAME] ...", may hold a guest's panic)
		if tr -d '\r' <"$SERIAL" | grep -a -v -E '^(XBDT|  \[)' |
			grep -qa -E 'Kernel panic|Panic on CPU|FATAL TRAP|STAGE1: cannot|Dom0 crashed'; then
			log "panic or boot failure on the serial console"; sleep 3; break
		fi
		sleep 2
	done
	kill $QPID 2>/dev/null; wait $QPID 2>/dev/null
	trap - EXIT INT TERM
	secs=$(( $(date +%s) - t0 ))
	rm -rf "$OUT/logs"
	debugfs -R "rdump /logs $OUT" "$OUT/payload.img" >/dev/null 2>&1
}

xen_report() {
	S=$(tr -d '\r' <"$SERIAL")
	echo
	echo "==== make check-xen ($XEN_CONFIG): Xen $XENVER in QEMU/TCG, $D0TYPE dom0, $GTYPE guests, ${secs}s; serial log $SERIAL, dom0 logs $OUT/logs ===="
	# name, result, the guest type and dom0 type the step covered ("-": dom0 alone), note
	printf '%-24s %-4s %-8s %s\n' step result guest/d0 note
	echo "$S" | grep -a '^XBDT-STEP' | awk '{ $1 = ""; sub(/^ /, ""); n = $1; s = $2; t = $3; $1 = $2 = $3 = ""; sub(/^ +/, ""); printf "%-24s %-4s %-8s %s\n", n, s, t, $0 }'
	echo
	echo "fio in the guest (/dev/xvdb, libaio, direct=1; ${FIO_RUNTIME}s per time-based job; verify = 64 MiB written"
	echo "at QD8 in 64k blocks, then read back and checked with crc32c).  CPU = dom0 CPU seconds (user+sys) from"
	echo "the job's start to its end: be = the backend's own tasks (xbd-back; blkback.* kthreads + loop workers;"
	echo "QEMU), dom0 = all of dom0 (/proc/stat without steal).  us/IO = CPU microseconds per guest I/O;"
	echo "'vs bb' = dom0 us/IO relative to kernel blkback in the same run and job.  xen-us/IO = dom0's CPU per"
	echo "I/O as Xen accounts it (its vCPUs' running time, xl vcpu-list: the hypervisor's work for dom0 and its"
	echo "wake-ups from idle included, which dom0's tick-based /proc/stat misses), 'xen vs bb' the same ratio by it."
	echo "sys/IO = xbd-back's system calls per guest I/O (its threads and its workers', counted at the raw_syscalls"
	echo "tracepoint, in make check-xen-cost and check-xen-timeline only; kernel blkback makes none)."
	printf '%-8s %-6s %-10s %6s %7s %-6s %6s %6s %7s %8s %6s %8s %6s %6s\n' backend run job IOPS 'MiB/s' verify be-s dom0-s be-us/IO dom0-us/IO 'vs bb' xen-us/IO 'xen vs bb' sys/IO
	echo "$S" | grep -a '^XBDT-RESULT' | grep -v -E ' run=(ilv|c-[^ ]*) ' | awk '
	BEGIN { n = split("std pcache nopoll single uring nopin again mq mqsg phy loop nbd timeline tpcache tphy", o, " ")
		for (i = 1; i <= n; i++) rank[o[i]] = i }
	{ delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	  r = (f["run"] in rank) ? rank[f["run"]] : 20
	  j = f["job"] == "verify" ? 1 : f["job"] == "rand4k" ? 2 : f["job"] == "seq128k" ? 3 : f["job"] == "qd1" ? 4 : 5
	  b = f["backend"] == "xbd" ? 1 : f["backend"] == "blkback" ? 2 : 3
	  run = f["run"] ~ /^(nopoll|uring|single|nopin|again|pcache)$/ ? "std" : f["run"] == "mqsg" ? "mq" : f["run"] == "tpcache" ? "timeline" : f["run"]
	  line[NR] = sprintf("%02d%d%d %s %s %s %s %s %s %s %s %s %s %s %s %s %s", r, j, b, f["backend"] (f["run"] == "nopoll" ? "*" : ""),
	    f["run"], f["job"], f["iops"], f["bw_kib"] / 1024, f["verify"], f["bcpu"], f["dcpu"], f["bus"], f["dus"], run "/" f["job"], f["rc"],
	    f["xus"] == "" ? "-" : f["xus"], f["sys"] == "" ? "-" : f["sys"])
}
END { for (i in line) print line[i] }' | sort | awk -v bbs="$(echo "$S" | grep -a '^XBDT-RESULT backend=blkback' | grep -v -E ' run=(ilv|c-[^ ]*) ' | awk '
	{ delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	  printf "%s/%s=%s,%s ", f["run"], f["job"], f["dus"], f["xus"] == "" ? 0 : f["xus"] }')" '
BEGIN { n = split(bbs, a, " "); for (i = 1; i <= n; i++) { split(a[i], kv, "="); split(kv[2], v, ","); bb[kv[1]] = v[1]; bx[kv[1]] = v[2] } }
{ rel = ($12 in bb) && bb[$12] > 0 && $3 != "front" ? sprintf("%.2f", $11 / bb[$12]) : "-"
  xrel = ($12 in bx) && bx[$12] > 0 && $14 != "-" && $3 != "front" ? sprintf("%.2f", $14 / bx[$12]) : "-"
  printf "%-8s %-6s %-10s %6s %7.1f %-6s %6s %6s %7s %8s %6s %8s %6s %6s%s\n", $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, rel, $14, xrel, $15, $13 == 0 ? "" : "  rc=" $13 }'
echo "(xbd* = xbd-back restarted with --poll-max-ns 0; run single = restarted with --workers 0 (the disk in xbd-back's main process, not in its guest's confined worker); run uring = restarted with --engine uring (io_uring instead of libaio); run nopin = restarted with --pin-rings 0 (threads and interrupts where the kernel puts them); run again = std's run again, on its disk, after the other variants; run mq = 2 vCPUs, 2 queues, 16-page rings, 256 indirect segments; mqsg = mq with --workers 0;"
echo " run pcache = restarted with --direct 0 (std's disk through dom0's page cache, as kernel blkback's std disk: its 'vs bb' is against blkback std);"
echo " run phy = both backends on a disk of dom0's own (/dev/vdc: xbd-back O_DIRECT, kernel blkback's bios); timeline, tphy, tpcache = qd1 under ftrace;"
echo " run nbd = a qcow2 image served by qemu-storage-daemon in dom0, xbd-back's NBD engine; qd1 = 4k random reads, one at a time)"
echo
if echo "$S" | grep -a '^XBDT-RESULT .* job=qd1 ' | grep -qvE ' run=(ilv|c-[^ ]*) '; then
	echo "single-request latency (job qd1: 4k random reads at QD1, fio's completion latency in the guest, us;"
	echo "'vs bb' = p50 relative to kernel blkback's in the same run kind and boot):"
	printf '%-8s %-6s %6s %8s %8s %6s\n' backend run IOPS p50-us p99-us 'vs bb'
	echo "$S" | grep -a '^XBDT-RESULT .* job=qd1 ' | grep -v -E ' run=(ilv|c-[^ ]*) ' | awk '
	{ delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	  run = f["run"] ~ /^(nopoll|uring|single|nopin|again|pcache)$/ ? "std" : f["run"] == "mqsg" ? "mq" : f["run"] == "tpcache" ? "timeline" : f["run"]
	  n++; be[n] = f["backend"] (f["run"] == "nopoll" ? "*" : ""); rn[n] = f["run"]; io[n] = f["iops"]; p5[n] = f["p50"]; p9[n] = f["p99"]; k[n] = run
	  if (f["backend"] == "blkback") bb[run] = f["p50"] }
	END { for (i = 1; i <= n; i++) {
		rel = (k[i] in bb) && bb[k[i]] > 0 ? sprintf("%.2f", p5[i] / bb[k[i]]) : "-"
		printf "%-8s %-6s %6s %8s %8s %6s\n", be[i], rn[i], io[i], p5[i], p9[i], rel } }'
	echo
fi
# the side-by-side runs (step ilv): medians over the rounds, ratios per round
ilv_bad=0
if grep -qa '^XBDT-RESULT .* run=ilv ' <<<"$S"; then
	python3 "$HERE/ilv-table.py" "$SERIAL" || ilv_bad=1
	echo
fi
# the counted table (step count, COUNT=1): instructions and transitions per I/O
count_bad=0
if grep -qa '^XBDT-COUNTING' <<<"$S"; then
	python3 "$HERE/cost-table.py" "$SERIAL" "$OUT/counts.txt" "$OUT/logs" --json "$OUT/cost.json" \
		${COUNT_BOUND:+--bound "$COUNT_BOUND"} || count_bad=1
	echo "  (the plugin's counts: $OUT/counts.txt; the cells: $OUT/cost.json, for cost-table.py --compare)"
	echo
	# COUNT_PROF=1: dom0's kernel by function (a diagnostic: it fails nothing)
	if [ -s "$OUT/prof.txt" ]; then
		python3 "$HERE/kprof.py" "$SERIAL" "$OUT/prof.txt" "$OUT/logs/kallsyms.txt" --counts "$OUT/counts.txt" \
			>"$OUT/prof-table.txt" 2>&1
		head -n 60 "$OUT/prof-table.txt"
		echo "  (the whole profile: $OUT/prof-table.txt)"
		echo
	fi
fi
if grep -qa '^XBDT-BKLAT' <<<"$S"; then
	echo "xbd-back's own latency per job (its histograms: from taking a request off the ring to pushing"
	echo "its answer, the bucket bound at or above the quantile, us; fio's in the guest adds the notifications"
	echo "and the guest's side):"
	echo "$S" | grep -a '^XBDT-BKLAT' | sed 's/^XBDT-BKLAT /  /'
	echo
fi
if grep -qa '^XBDT-SYSCALLS' <<<"$S"; then
	echo "xbd-back's system calls per guest I/O (strace -c -f on every thread during each job, run strace;"
	echo "the busiest calls, per I/O):"
	echo "$S" | grep -a '^XBDT-SYSCALLS' | sed 's/^XBDT-SYSCALLS /  /'
	echo "$S" | grep -a '^XBDT-SYSCOST' | sed 's/^XBDT-SYSCOST /  one system call in dom0 (perf bench syscall basic), and a clock read as xbd-back measured it: /'
	echo
fi
if ls "$OUT"/logs/xentrace-*.bin >/dev/null 2>&1; then
	echo "what dom0 asked of Xen per guest I/O (xentrace of the scheduler and PV entry records during each"
	echo "job, run xentrace: hypercalls, the busiest by name; traps, page faults, emulated privileged"
	echo "instructions, FPU restores; dom0 vCPUs switched in and blocked):"
	for f in "$OUT"/logs/xentrace-*.bin; do
		b=${f%.bin}
		printf '  %-18s %s\n' "$(basename "$b" | sed 's/^xentrace-//; s/-/ /')" \
			"$(python3 "$HERE/xentrace-sum.py" "$f" "$(cat "$b.ios" 2>/dev/null)" 0 2>&1 |
				sed '2,$s/^/                     /')"
	done
	echo
fi
if ls "$OUT"/logs/ftrace-*.txt >/dev/null 2>&1; then
	echo "single requests (qd1) as dom0's kernel saw them (ftrace, run timeline; tests/xen/qd1-timeline.py: the"
	echo "stages' medians and 90th percentiles, us, from the ring's interrupt to the response's notification):"
	for f in "$OUT"/logs/ftrace-*.txt; do
		python3 "$HERE/qd1-timeline.py" "$f" 2>&1 | sed "s|^$OUT/logs/ftrace-|  |; s/\.txt:/:/"
	done
	echo
fi
if grep -qa '^XBDT-EVENTS' <<<"$S"; then
	echo "dom0's context switches, interrupts and busiest interrupt lines per guest I/O (by CPU: cpu0+cpu1):"
	echo "$S" | grep -a '^XBDT-EVENTS' | sed 's/^XBDT-EVENTS /  /'
	echo
fi
if ls "$OUT"/logs/perfc-*-qd1.txt >/dev/null 2>&1; then
	echo "under which paths dom0's time went at QD1 (perf report --children: inclusive, by symbol;"
	echo "the whole reports are in $OUT/logs/perfc-BACKEND-JOB.txt):"
	for f in "$OUT"/logs/perfc-*-qd1.txt; do
		echo "  $(basename "$f" .txt | sed 's/^perfc-//; s/-/ /')"
		head -24 "$f" | sed 's/^ */    /'
	done
	echo
fi
if ls "$OUT"/logs/perf-*.txt >/dev/null 2>&1; then
	echo "where dom0's CPU went (perf record -a -e cpu-clock during each job, run perf; overhead, comm, dso,"
	echo "symbol; the whole reports are in $OUT/logs/perf-BACKEND-JOB.txt):"
	for f in "$OUT"/logs/perf-*.txt; do
		echo "  $(basename "$f" .txt | sed 's/^perf-//; s/-/ /')"
		head -10 "$f" | sed 's/^ */    /'
	done
	echo
fi
if grep -qa '^XBDT-PVGRUB' <<<"$S"; then
	echo "pvgrub2 boots (seconds since xl create began: GRUB read grub.cfg, had loaded kernel and initramfs;"
	echo "Linux started; the guest read its boot disk back; c-req, reqs: the backend's requests until grub.cfg was found, until the initramfs was"
	echo "loaded, ms/req: GRUB's pace, load: the host's 1-minute load average as the boot ended;"
	echo "rc 0 ok, 2 stuck (no progress for 40 s), 5 Linux not started in ${PVGRUB_BOUND}s, 6 GRUB at its prompt):"
	printf '%-8s %-4s %4s %3s %7s %7s %7s %7s %7s %-3s %5s %5s %6s %5s\n' backend run n rc create cfg initrd linux done md5 c-req reqs ms/req load
	# the host's 1-minute load average when the line came (TCG's pace follows it)
	grep -a 'XBDT-PVGRUB' "$OUT/events.txt" 2>/dev/null | awk -v lf="$OUT/hostload.txt" '
	BEGIN { while ((getline l < lf) > 0) { split(l, a, " "); n++; lt[n] = a[1]; lv[n] = a[2] } }
	{ t = substr($1, 2, 8); v = "-"; for (i = 1; i <= n; i++) if (lt[i] <= t) v = lv[i]; print v }' >"$OUT/pvgrub-load.txt"
	echo "$S" | grep -a '^XBDT-PVGRUB' | awk -v lf="$OUT/pvgrub-load.txt" '
	{ delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	  if ((getline ld < lf) <= 0) ld = "-"
	  printf "%-8s %-4s %4s %3s %7s %7s %7s %7s %7s %-3s %5s %5s %6s %5s\n", f["backend"], f["run"], f["n"], f["rc"], f["create"], f["cfg"],
	    f["initrd"], f["linux"], f["done"], f["md5"], f["cfg-reqs"], f["grub-reqs"], f["ms-per-req"], ld }'
	echo "$S" | grep -a '^XBDT-HANG' | sed 's/^/  /'
	echo
fi
if grep -qa '^XBDT-LC' <<<"$S"; then
	echo "guest lifecycle on Xen $XENVER ($XEN_CONFIG, a $LCTYPE guest on a $D0TYPE dom0): root filesystem and fio disk on"
	echo "xbd-back, fio verify in flight; pause = the longest gap between the guest's once-a-second heartbeats, by the"
	echo "guest's clock / as dom0 got them (s):"
	printf '%-8s %-5s %-5s %11s  %s\n' step type result pause note
	echo "$S" | grep -a '^XBDT-LC' | sed 's/^XBDT-LC xen=[^ ]* type=\([^ ]*\) step=\([^ ]*\) result=\([^ ]*\) pause=\([^ ]*\) note=/\2 \1 \3 \4 /' |
		while read -r st ty r pa note; do printf '%-8s %-5s %-5s %11s  %s\n' "$st" "$ty" "$r" "$pa" "$note"; done
	echo
fi
echo "busiest dom0 tasks per job (CPU ticks of 1/100 s):"
echo "$S" | grep -a '^XBDT-CPUTOP' | cut -d' ' -f2- | sed 's/^/  /'
echo
fails=$(echo "$S" | grep -a -c '^XBDT-STEP [^ ]* FAIL')
if ! grep -qa '^XBDT-DONE' <<<"$S"; then
	echo "FAIL: dom0 did not finish the steps (QEMU exited or timed out after ${secs}s); serial tail:"
	echo "$S" | tail -25
	return 1
fi
[ "$fails" = 0 ] || { echo "FAIL: $fails step(s) failed"; return 1; }
[ $ilv_bad = 0 ] || { echo "FAIL: a side-by-side cost read 0 for work that was done (above)"; return 1; }
[ $count_bad = 0 ] || { echo "FAIL: the counted table: a cost read 0 for work that was done, a job was not counted, or a bound was passed (above)"; return 1; }
echo "PASS"
return 0
}
