# tests/xen/lib/measure.sh: sourced by dom0-init.sh.  Everything the harness
# measures and nothing it judges: CPU time per task (snap, bdelta, top_cpu),
# dom0's CPU by its own ticks and by Xen's account (dticks, xticks),
# context switches, interrupts and page faults (evsnap, evdelta, on_cpu),
# xbd-back's system calls (sc_*), the profilers of the profile and
# timeline steps (prof_*, ftrace_*), xbd-back's own latency histograms
# (bklat).  follow (lib/guests.sh) calls them at each job's begin and end.
# Definitions only: dom0-init.sh calls sc_setup once when dom0 starts.
# bdelta BACKEND BEFORE AFTER: CPU ticks the backend's tasks ran between
# two snapshots (snap), thread by thread, so that a kworker that changed
# its name or a thread that came or went does not skew the sum.  A task
# counts when its own name or its process's is the backend's.
# (xbdrN: the name a thread of xbd-back's has while it opens a ring's event
# channel, which Linux gives the interrupt.)
# Kernel blkback's ring kthreads are named DOMID.VDEV-QUEUE (6.xvdb-0); the
# loop device's work runs in kworkers whose name ends in -loopN (either
# backend's, on a loop device: nothing else uses one during its jobs).
bdelta() {
	awk -v be=$1 '
	function ours(c) {
		if (be == "xbd") return c ~ /^\(xbd-back(\.real)?\)$|^\(xbd-worker\)$|^\(xbdr[0-9]+\)$|[-+]loop[0-9]+\)$/
		if (be == "blkback") return c ~ /^\([0-9]+\.xvd[a-z]+-[0-9]+\)$|[-+]loop[0-9]+\)$/
		if (be == "qdisk") return c ~ /qemu/
		return 0
	}
	NR == FNR { b[$1] = $4; next }
	ours($2) || ours($3) { d = $4 - b[$1]; if (d > 0) s += d }
	END { printf "%.2f\n", s }' "$2" "$3"
}
# snap FILE: every dom0 thread's time on a CPU so far, in ticks
# (1/CLK_TCK s): "TID (COMM) (PROCESS'S COMM) TICKS".  From schedstat's
# run time, which the scheduler keeps to the nanosecond: the utime and
# stime of /proc/PID/stat are tick samples scaled to it, kept from going
# back, and under TCG a worker's came out 0 for a whole job and 30 s for
# the next one (Debian 13's PV dom0, a loaded host).
snap() {
	grep -s -H . /proc/[0-9]*/task/[0-9]*/comm /proc/[0-9]*/task/[0-9]*/schedstat |
	awk -F: -v tck=$TCK '
	{ n = split($1, p, "/"); v = substr($0, length($1) + 2) }
	p[n] == "comm" { gsub(/[ ()]/, "_", v); c[p[5]] = "(" v ")"; next }
	{ split(v, a, " "); ns[p[5]] = a[1]; pid[p[5]] = p[3] }
	END { for (t in ns) if (t in c) printf "%s %s %s %.2f\n", t, c[t], (pid[t] in c) ? c[pid[t]] : c[t], ns[t] * tck / 1e9 }' >"$1"
}
top_cpu() {  # BEFORE AFTER: "comm=ticks" of the 6 busiest processes in between
	awk 'NR == FNR { b[$1] = $4; next } { d = $4 - b[$1]; if (d > 0) t[$3] += d }
	     END { for (c in t) printf "%.0f %s\n", t[c], c }' "$1" "$2" | sort -rn | head -6 |
		awk '{ gsub(/[()]/, "", $2); printf "%s=%s ", $2, $1 }'
}
dticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }  # dom0 busy, no steal
# dom0's CPU time as Xen accounts it (its vCPUs' running time, ms; xl prints
# tenths of a second): unlike dom0's own tick-based /proc/stat, it includes
# the hypervisor's work for dom0 and every wake-up from idle
xticks() { xl vcpu-list Domain-0 2>/dev/null | awk 'NR > 1 { s += $6 } END { printf "%d", s * 1000 }'; }
# dom0's context switches, interrupts and each interrupt line by CPU (the
# ring's event channel, the disk's, the IPIs) and xbd-back's page faults,
# to count them per guest I/O
evsnap() {
	awk 'FILENAME ~ /stat/ { if ($1 == "ctxt" || $1 == "intr") print $1, $2; next }
	     FNR == 1 { ncpu = NF; next }
	     { s = ""; for (i = 2; i <= ncpu + 1; i++) s = s " " ($i + 0); print $1 $NF s }' \
		/proc/stat /proc/interrupts 2>/dev/null >"$1"
	# xbd-back's page faults (minor + major, its workers' too)
	awk '$2 ~ /^\((xbd-back(\.real)?|xbd-worker)\)$/ { f += $10 + $12 } END { print "xbd-faults", f + 0 }' \
		/proc/[0-9]*/stat 2>/dev/null >>"$1"
}
on_cpu() {  # the CPU each backend thread last ran on: "comm:cpu,..."
	awk '$2 ~ /^\((xbd-back(\.real)?|xbd-worker|[0-9]+\.xvd[a-z]+-[0-9]+)\)$/ { gsub(/[()]/, "", $2); printf "%s%s:%s", n++ ? "," : "", $2, $39 }' \
		/proc/[0-9]*/task/[0-9]*/stat 2>/dev/null
}
# sc_start BACKEND / sc_stop: the system calls xbd-back makes during a
# job (every thread of it and of its workers), from a histogram trigger
# on the raw_syscalls tracepoint keyed by thread, for tasks named xbd*,
# set once at start and read at each job's begin and end (no record, no
# process of ours counting meanwhile; a tracepoint switched on and off
# per job patches the kernel's text each time, which under TCG has
# stalled dom0).  Kernel blkback makes none; qdisk's are not counted (its
# QEMU's threads come and go).  sc_stop leaves the count in
# SC_COUNT (empty: none counted).  Only in the boots that measure costs
# (make check-xen-cost, check-xen-timeline: steps profile, phy, timeline):
# with the trigger set every system call of dom0 takes the traced path,
# which CI's boots, timed and compared with blkback, should not pay.
SC_TRIGGER=
sc_setup() {  # set the trigger, once, when dom0 starts
	if want profile || want phy || want timeline; then
		SC_TRIGGER=$TR/events/raw_syscalls/sys_enter/trigger
		echo 'hist:keys=common_pid:vals=hitcount:size=4096 if comm ~ "xbd*"' \
			>$SC_TRIGGER 2>/dev/null || SC_TRIGGER=
	fi
}
SC_TIDS= SC_COUNT=
sc_hist() {  # the counts now: "TID ID COUNT" lines (ID: the call's number, - when not keyed by it)
	awk '/^\{ common_pid:/ { gsub(/[{},]/, " "); t = ""; id = "-"; n = 0
		for (i = 1; i < NF; i++) { if ($i == "common_pid:") t = $(i + 1); if ($i == "id:") id = $(i + 1)
			if ($i == "hitcount:") n = $(i + 1) }
		print t, id, n }' $TR/events/raw_syscalls/sys_enter/hist 2>/dev/null
}
sc_start() {
	local p
	SC_TIDS= SC_COUNT=
	[ -n "$SC_TRIGGER" ] || return 0
	case $1 in
	xbd) xbd_alive && for p in $XBD_PID $(pgrep -P $XBD_PID); do SC_TIDS="$SC_TIDS $(ls /proc/$p/task)"; done ;;
	esac
	[ -z "$SC_TIDS" ] || sc_hist >/tmp/sc0
}
# sc_stop: SC_COUNT, xbd-back's calls over the job, and SC_BYID, the same by
# the call's number ("ID:COUNT+..."; empty when the trigger is not keyed by it)
SC_BYID=
sc_stop() {
	SC_BYID=
	[ -n "$SC_TIDS" ] || return 0
	sc_hist | awk -v tids="$SC_TIDS" '
		BEGIN { n = split(tids, t, " "); for (i = 1; i <= n; i++) ours[t[i]] = 1 }
		FILENAME == "/tmp/sc0" { a[$1 " " $2] = $3; next }
		$1 in ours { d = $3 - a[$1 " " $2]; s += d; if ($2 != "-") by[$2] += d }
		END { printf "%d ", s; for (i in by) if (by[i]) printf "%s%s:%d", sep++ ? "+" : "", i, by[i]; print "" }' /tmp/sc0 - >/tmp/sc1
	read -r SC_COUNT SC_BYID </tmp/sc1
	SC_TIDS=
}
job_ios() {  # DOMU-JOB-RESULT line: the guest I/Os of the job
	echo "$1" | awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } }
		END { printf "%d", (f["rkb"] + f["wkb"]) * 1024 / (f["bs"] ? f["bs"] : 4096) }'
}
evdelta() {  # BEFORE AFTER IOS: the busiest, per I/O ("name=cpu0+cpu1")
	awk -v ios=$3 'NR == FNR { for (i = 2; i <= NF; i++) a[$1, i] = $i; next }
	     { t = 0; s = ""; for (i = 2; i <= NF; i++) { d = $i - a[$1, i]; t += d; s = s (i > 2 ? "+" : "") sprintf("%.2f", d / ios) }
	       if (t > 0 && ios > 0) print t, $1 "=" s }' "$1" "$2" | sort -rn | head -9 |
		awk '{ printf "%s ", $2 }'
}

# The profile step: PROF=perf records all of dom0 (cpu-clock samples: a PV
# dom0 has no PMU) and PROF=strace counts xbd-back's system calls (every
# thread of it and of its workers), from each job's begin to its result
# (either slows the job: its figures only count for what they profile)
PROF= PROF_PID=
prof_start() {
	case $PROF in
	perf) perf record -q -e cpu-clock -F 499 -a -g -o /tmp/prof.data >/dev/null 2>&1 & ;;
	xentrace | xtcount)  # what dom0 asks of Xen: the scheduler's and the PV entry records
		rm -f /tmp/prof.bin
		xentrace -D -S 256 -e 0x0022f000 /tmp/prof.bin >/dev/null 2>&1 & ;;
	strace)  # xbd-back and its workers (its children), every thread of each
		# shellcheck disable=SC2046
		strace -c -f -qq -o /tmp/prof.txt -p $XBD_PID $(pgrep -P $XBD_PID | sed 's/^/-p /') \
			>/dev/null 2>&1 & ;;
	ftrace) ftrace_on; PROF_PID=ftrace; return ;;
	esac
	PROF_PID=$!
	sleep 1   # attached before fio starts (the guest waits 2 s)
}
prof_stop() {  # BACKEND RUN RESULT-LINE
	local job ios calls
	[ -n "$PROF_PID" ] || return 0
	[ $PROF_PID = ftrace ] || { kill -INT $PROF_PID 2>/dev/null; wait $PROF_PID 2>/dev/null; }
	PROF_PID=
	job=$(echo "$3" | sed -n 's/.* job=\([^ ]*\).*/\1/p')
	ios=$(job_ios "$3")
	case $PROF in
	ftrace)  # the timeline, read on the host (tests/xen/qd1-timeline.py)
		ftrace_off $L/ftrace-$1-$2-$job.txt
		echo "XBDT-FTRACE backend=$1 run=$2 job=$job ios=$ios lines=$(wc -l <$L/ftrace-$1-$2-$job.txt)" ;;
	xtcount)  # the counted table's traced round: summed on the host (tests/xen/cost-table.py)
		mv /tmp/prof.bin $L/xtc-$1-$2-$job.bin 2>/dev/null && echo $ios >$L/xtc-$1-$2-$job.ios ;;
	xentrace)  # summed on the host (tests/xen/xentrace-sum.py): the raw file and its I/O count
		mv /tmp/prof.bin $L/xentrace-$1-$job.bin 2>/dev/null && echo $ios >$L/xentrace-$1-$job.ios
		echo "XBDT-XENTRACE backend=$1 job=$job ios=$ios bytes=$(stat -c %s $L/xentrace-$1-$job.bin 2>/dev/null)" ;;
	perf)
		perf report -i /tmp/prof.data --stdio --no-children --sort comm,dso,sym \
			--percent-limit 0.7 -g none 2>/dev/null | grep -v '^#' | grep -v '^$' |
			head -40 >$L/perf-$1-$job.txt
		# inclusive (children): which system call, interrupt or idle path the time went under
		perf report -i /tmp/prof.data --stdio --children --sort sym --percent-limit 1.5 \
			-g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -45 >$L/perfc-$1-$job.txt
		echo "XBDT-PERF backend=$1 job=$job lines=$(wc -l <$L/perf-$1-$job.txt)" ;;
	strace)
		cp /tmp/prof.txt $L/strace-$1-$job.txt
		# strace -c: "% time seconds usecs/call calls [errors] syscall", then "total"
		awk -v ios=$ios -v be=$1 -v job=$job '
			$NF == "total" { total = $4 }
			$1 ~ /^[0-9.]+$/ && $NF != "total" { c[$NF] = $4 }
			END { if (!ios) exit
				line = sprintf("XBDT-SYSCALLS backend=%s job=%s ios=%d per_io=%.2f", be, job, ios, total / ios)
				n = 0; for (k in c) { s[++n] = k }
				for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (c[s[j]] > c[s[i]]) { t = s[i]; s[i] = s[j]; s[j] = t }
				for (i = 1; i <= n && i <= 8; i++) line = line sprintf(" %s=%.2f", s[i], c[s[i]] / ios)
				print line }' /tmp/prof.txt | tee -a $L/results.txt
		grep -q -w -e io_submit -e io_uring_enter /tmp/prof.txt ||
			step xbd-strace-$job FAIL "strace saw no submission of xbd-back's: its ring threads were not traced" ;;
	esac
	rm -f /tmp/prof.data /tmp/prof.txt /tmp/prof.bin
}

# ftrace_on / ftrace_off FILE: the timeline step's trace of dom0's kernel
# during one job: every interrupt handler's entry (the ring's event
# channel, the disk's completion), the scheduler's wake-ups and switches,
# the disk's requests issued and completed, xbd-back's system calls (its
# threads and its workers': its notification is an ioctl) and, by a
# kprobe, kernel blkback's notification (notify_remote_via_irq); the first
# 8 MiB a CPU of it (overwrite off: the job's first requests), for
# tests/xen/qd1-timeline.py to cut into the stages of each request.  The
# events are switched on once, at the first run, and stay on: a run only
# starts and stops the recording.  Switching a tracepoint patches the
# kernel's text, which under TCG has stalled dom0 for tens of seconds
# (and the function tracer, which patches every function, more so).
FTRACE_ON=
ftrace_on() {
	local t filt=
	echo 0 >$TR/tracing_on; echo >$TR/trace
	if [ -z "$FTRACE_ON" ]; then
		FTRACE_ON=1
		echo 8192 >$TR/buffer_size_kb; echo 0 >$TR/options/overwrite
		for t in irq:irq_handler_entry sched:sched_switch sched:sched_wakeup block:block_rq_issue \
			block:block_rq_complete raw_syscalls:sys_enter raw_syscalls:sys_exit; do
			echo $t >>$TR/set_event 2>/dev/null
		done
		echo 'p:xbdt_notify notify_remote_via_irq' >>$TR/kprobe_events 2>/dev/null &&
			echo 1 >$TR/events/kprobes/xbdt_notify/enable
	fi
	# xbd-back's system calls only (none while it is not running)
	if xbd_alive; then
		for t in $(for p in $XBD_PID $(pgrep -P $XBD_PID); do ls /proc/$p/task; done); do
			filt="${filt:+$filt || }common_pid == $t"
		done
	fi
	echo "${filt:-common_pid == 0}" >$TR/events/raw_syscalls/filter
	echo 1 >$TR/tracing_on
}
ftrace_off() {
	echo 0 >$TR/tracing_on
	cat $TR/trace >$1 2>/dev/null
	echo >$TR/trace
}
# ftrace_quiet: the events off again, once the timeline runs of a backend
# are done and no guest runs, so that the other backend's untraced runs
# that follow do not pay for them (an enabled event costs a call even
# with tracing_on at 0); the next ftrace_on switches them on again
ftrace_quiet() {
	[ -n "$FTRACE_ON" ] || return 0
	FTRACE_ON=
	echo >$TR/set_event
	echo 0 >$TR/events/kprobes/xbdt_notify/enable 2>/dev/null
	echo '-:xbdt_notify' >>$TR/kprobe_events 2>/dev/null
}

# bklat BACKEND RUN JOB BEFORE AFTER: xbd-back's own latency of the job's
# reads and writes (its histograms, xbdctl stats --json, the difference
# between two snapshots), from taking a request off the ring to pushing its
# answer: beside fio's in the guest, what the notifications and the
# guest's side add
bklat() {
	python3 - "$@" <<'PY' 2>/dev/null
import json, sys
be, run, job, a, b = sys.argv[1:6]
def hist(path):
    h = {}
    for d in json.load(open(path)).get("devices", []):
        for op in ("read", "write"):
            for k, v in (((d.get("stats") or {}).get("latency") or {}).get(op) or {}).get("buckets", {}).items():
                h[(op, k)] = h.get((op, k), 0) + v
    return h
h0, h1 = hist(a), hist(b)
out = []
for op in ("read", "write"):
    bs = sorted(((float("inf") if k == "+Inf" else int(k)), h1[(o, k)] - h0.get((o, k), 0))
                for (o, k) in h1 if o == op)
    n = sum(c for _, c in bs)
    if not n:
        continue
    q = {}
    for p in (0.5, 0.99):
        acc = 0
        for bound, c in bs:
            acc += c
            if acc >= p * n:
                q[p] = bound / 1000
                break
    out.append("%s_n=%d %s_p50_le_us=%.0f %s_p99_le_us=%.0f" % (op, n, op, q[0.5], op, q[0.99]))
if out:
    print("XBDT-BKLAT backend=%s run=%s job=%s %s" % (be, run, job, " ".join(out)))
PY
}

# ---- the counted cost table (step count; xen-check.sh's COUNT) --------------
# In a boot that counts, QEMU runs tests/xen/count/xbd-count.so, which
# writes every emulated CPU's instruction count at each cut mark; the
# count guests run one just before and one just after each job's fio
# (domu-init.sh's xbdt.mark).  Between the two, dom0 must do none of the
# harness's own work, so that what dom0's CPUs count is the backend's, the
# kernel's and Xen's for the guest's I/O: at a job's begin dom0 takes a few
# cheap samples (count_begin) and says it is done with a mark of its own,
# COUNT_MARK_READY; at its result, after the guest's closing mark, it
# starts with COUNT_MARK_RESULT (count_result).  The host
# (tests/xen/cost-table.py) flags a job whose window holds either.
# The traced round (round=t) runs xentrace and xbd-back's system-call
# count, which both cost instructions: its transitions are the table's,
# its instructions are not.
COUNTING= COUNT_FOLLOW= COUNT_MARK_READY=65500 COUNT_MARK_RESULT=65501
# step count's measure of one system call: N getppid calls between 65510 and 65511
COUNT_MARK_SYSCALLS=65510 COUNT_SYSCALLS=100000
# tsnap FILE: the last PID dom0 gave (forks between two snapshots), its
# busy ticks (as dticks), context switches, page faults
# and the backends' event-channel interrupts (kernel blkback's ring,
# xbd-back's and QEMU's ports through /dev/xen/evtchn: the guest's
# notifications) so far; one process, as little work as can be between jobs
tsnap() {
	awk 'FILENAME == "/proc/loadavg" { print "pid", $5; nextfile }
	     FILENAME == "/proc/stat" && $1 == "cpu" { print "busy", $2 + $3 + $4 + $7 + $8 }
	     FILENAME == "/proc/stat" && $1 == "ctxt" { print "ctxt", $2 }
	     FILENAME == "/proc/vmstat" && $1 == "pgfault" { print "pgf", $2 }
	     FILENAME == "/proc/interrupts" { c = "" }
	     FILENAME == "/proc/interrupts" && /blkif-backend/ { c = "blkback" }
	     FILENAME == "/proc/interrupts" && /evtchn:xbd/ { c = "xbd" }
	     FILENAME == "/proc/interrupts" && /evtchn:qemu/ { c = "qdisk" }
	     c != "" { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n[c] += $i }
	     END { print "irq-blkback", n["blkback"] + 0; print "irq-xbd", n["xbd"] + 0; print "irq-qdisk", n["qdisk"] + 0 }' \
		/proc/loadavg /proc/stat /proc/vmstat /proc/interrupts >"$1" 2>/dev/null
}
# sc_on / sc_off: xbd-back's system-call count (the trigger of sc_setup)
# for the traced round only: with it set, every system call of dom0 takes
# the traced path, which the counted rounds must not pay
SC_ON=
sc_on() {
	[ -z "$SC_TRIGGER" ] || return 0
	SC_TRIGGER=$TR/events/raw_syscalls/sys_enter/trigger
	echo 'hist:keys=common_pid,id:vals=hitcount:size=4096 if comm ~ "xbd*"' >$SC_TRIGGER 2>/dev/null &&
		SC_ON=1 || SC_TRIGGER=
}
sc_off() {
	[ -n "$SC_ON" ] || return 0
	echo '!hist:keys=common_pid,id:vals=hitcount:size=4096 if comm ~ "xbd*"' >$SC_TRIGGER 2>/dev/null
	SC_ON= SC_TRIGGER=
}
count_begin() {  # BACKEND JOB-BEGIN-LINE
	case $2 in *" round=t"*) PROF=xtcount; sc_on ;; *) PROF= ;; esac
	# (Xen on Arm traces no hypercall: there the traced round counts xbd-back's system calls only)
	[ "$D0TYPE" != arm ] || PROF=
	[ "$1" != xbd ] || xbdctl stats --json >/tmp/xj0.json 2>/dev/null
	sc_start $1; tsnap /tmp/ts0
	[ -z "$PROF" ] || prof_start
	xbd-mark $COUNT_MARK_READY
}
# count_result BACKEND RUN JOB-RESULT-LINE: its XBDT-RESULT line; 1 if the
# job failed.  xbd-back's counters before and after go to the logs as
# xj-M0.json and xj-M1.json (M0, M1: the job's marks), for the host to
# subtract (tests/xen/cost-table.py): no interpreter starts between jobs.
count_result() {
	local m0=${3##* m0=} m1=${3##* m1=}
	m0=${m0%% *} m1=${m1%% *}
	xbd-mark $COUNT_MARK_RESULT
	tsnap /tmp/ts1; sc_stop
	[ -z "$PROF" ] || prof_stop $1 $2 "$3"
	PROF=
	if [ "$1" = xbd ] && [ "$m1" != "$3" ]; then
		mv /tmp/xj0.json $L/xj-$m0.json 2>/dev/null
		xbdctl stats --json >$L/xj-$m1.json 2>/dev/null
	fi
	echo "$3" | awk -v be=$1 -v run=$2 -v tck=$TCK -v sc="$SC_COUNT" -v scid="$SC_BYID" -v out=$L/results.txt '
	FILENAME == "/tmp/ts0" { a[$1] = $2; next }
	FILENAME == "/tmp/ts1" { d[$1] = $2 - a[$1]; next }
	{ for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } }
	END {
		ios = (f["rkb"] + f["wkb"]) * 1024 / (f["bs"] ? f["bs"] : 4096); dc = d["busy"] / tck
		l = sprintf("XBDT-RESULT backend=%s run=%s job=%s round=%s rc=%s iops=%.0f bw_kib=%d ios=%d verify=%s dcpu=%.2f dus=%.0f p50=%s p99=%s sys=%s m0=%s m1=%s girq=%s ctxt=%d pgf=%d bntf=%d forks=%d",
		  be, run, f["job"], f["round"] == "" ? "-" : f["round"], f["rc"], f["riops"] + f["wiops"], f["rbw"] + f["wbw"], ios,
		  f["verify"], dc, ios ? dc * 1e6 / ios : 0, f["p50"], f["p99"], sc != "" ? sc : "-",
		  f["m0"] == "" ? "-" : f["m0"], f["m1"] == "" ? "-" : f["m1"], f["girq"] == "" ? "-" : f["girq"],
		  d["ctxt"], d["pgf"], d["irq-" be], d["pid"])
		if (scid != "") l = l " scid=" scid
		print l; print l >>out
	}' /tmp/ts0 /tmp/ts1 -
	case $3 in *" rc=0 "*) ;; *) return 1 ;; esac
	case $3 in *verify=FAIL*) return 1 ;; esac
	return 0
}
