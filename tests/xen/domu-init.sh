#!/bin/busybox sh
# domu-init.sh: /init of the PV guest that make check-xen boots (busybox, fio
# and xen-blkfront in an initramfs).  It runs the fio jobs on /dev/xvdb and
# prints one parseable DOMU-* line per event on hvc0; dom0 (dom0-init.sh)
# reads them from xenconsoled's log and times its CPU samples by them.
# Kernel command line:
#   xbdt.rt=S         seconds for the time-based jobs
#   xbdt.qd1=0        leave out the QD1 latency job
#   xbdt.jobs=a+b     only these of the results table's jobs (verify, rand4k,
#                     seq128k, qd1; default: all four)
#   xbdt.settle=S     wait S seconds after the disk appeared before the jobs
#                     (dom0 inspects xenstore meanwhile; not during a job)
#   xbdt.mode=M       what to do after the jobs:
#       none     power off
#       hotplug  wait until dom0 detaches xvdb, then until it attaches xvdc;
#                verify xvdc, then keep I/O running on it (dom0 destroys us)
#       rounds   no jobs: repeat a short write+verify job until the disk goes away
#       backup   no jobs: job A (4k random writes with verify over xvdb's
#                8 MiB from 16 MiB), then rounds of the same over one of
#                the first four 2 MiB regions each, in turn (round n: region
#                (n-1) mod 4, seed 1000+n: new data each time, its blocks
#                holding n's seed and their offsets), at 200
#                writes a second, until the disk goes away (step backup)
#       bkverify no jobs: fio's verify_only of job A and of round
#                xbdt.bkround's writes on xvdb (a restored backup), then
#                power off
#       twodisks the verify job on xvdb and on xvdc at the same time (two
#                backends, one guest), then power off
#       count    the counted cost table's guest (make check-xen's count
#                step): verify and idle once, then xbdt.rounds=R rounds of
#                the timed jobs, then with xbdt.trace=1 one more round
#                (round=t) that dom0 traces; then power off
#       interleave  the disks of xbdt.devs=xvdb+xvdc+... (each served by
#                another backend) take turns: the verify job on each, then
#                for each of the jobs, xbdt.rounds=R rounds of it on every
#                disk in turn (A B A B ...), so that a change of the host's
#                pace falls on every backend alike; then power off
#       pvgrub   booted by pvgrub2 from xvda: print xvda's md5sum (dom0
#                compares it with the image's), power off; no fio here
#       lifecycle  our root filesystem is ext4 on xvda (the rootfs guest's
#                initramfs mounted it): a line in /data/marker per boot, a
#                heartbeat line a second, and rounds of fio (4 MiB of 16 KiB
#                random writes at 50/s, then verified) on xvdb until the disk
#                goes away; dom0 pauses, saves, migrates, reboots, shuts us down
#   xbdt.mark=M       run the cut marks M and M+1 (xbd-mark, the counter's:
#                     tests/xen/count/) just before and just after each
#                     job's fio, the next job M+2 and M+3, and so on; the
#                     result line names them (m0=, m1=) with the blkif
#                     interrupts this guest took in between (girq=)
#   xbdt.ios=N        timed jobs run N I/Os (N/4 at queue depths below 16)
#                     instead of xbdt.rt seconds
#   xbdt.jobwait=S    seconds between a job's begin line and its fio (2):
#                     dom0 takes its samples meanwhile
#   xen_blkfront.P=V  passed to insmod: a loadable module does not see
#                     kernel-command-line parameters without modprobe
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^$1=//p" | tail -1; }
say() { echo "DOMU-$*"; }
RT=$(arg xbdt.rt); RT=${RT:-10}
MARK=$(arg xbdt.mark)
JOBWAIT=$(arg xbdt.jobwait); JOBWAIT=${JOBWAIT:-2}
MODE=$(arg xbdt.mode); MODE=${MODE:-none}
SETTLE=$(arg xbdt.settle); SETTLE=${SETTLE:-0}
QD1=$(arg xbdt.qd1)   # 0: no qd1 job (the mq runs: their queues do not change QD1)
JOBS=$(arg xbdt.jobs | tr + ' '); JOBS=${JOBS:-verify rand4k seq128k qd1}
[ "$QD1" != 0 ] || JOBS=$(echo $JOBS | sed 's/qd1//')
FRONT=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^xen_blkfront\.//p' | tr '\n' ' ')
say "INIT uptime=$(cut -d' ' -f1 /proc/uptime) vcpus=$(grep -c ^processor /proc/cpuinfo) mode=$MODE blkfront-params=[$FRONT]"
# in the background: insmod of xen-blkfront blocks in xenbus
# wait_for_devices() for as long as a backend does not connect
( for m in $(cat /lib/mods/order); do
	if [ "$m" = xen-blkfront.ko ]; then insmod /lib/mods/$m $FRONT; else insmod /lib/mods/$m; fi
  done ) &

wait_dev() {  # NAME SECONDS: wait until /dev/NAME exists
	i=0
	while [ ! -b /dev/$1 ] && [ $i -lt $(($2 * 5)) ]; do sleep 0.2; i=$((i + 1)); done
	[ -b /dev/$1 ]
}
wait_gone() {  # NAME SECONDS
	i=0
	while [ -b /dev/$1 ] && [ $i -lt $(($2 * 5)) ]; do sleep 0.2; i=$((i + 1)); done
	[ ! -b /dev/$1 ]
}
describe() {  # what blkfront negotiated, as the guest sees it
	d=/sys/block/$1
	echo "dev=$1 sectors=$(cat $d/size) max_segments=$(cat $d/queue/max_segments)" \
		"max_hw_sectors_kb=$(cat $d/queue/max_hw_sectors_kb)" \
		"hw_queues=$(ls $d/mq 2>/dev/null | wc -l) nr_requests=$(cat $d/queue/nr_requests)"
}

# job NAME DEV fio-args...: one fio run (DEV: xvdb, or a file's path), one DOMU-JOB-RESULT line.  The
# sleeps after BEGIN and after the result let dom0 take its CPU samples
# while nothing else runs.
# the blkif interrupts this guest has taken (its disks' answers' notifications)
blkif_irqs() { awk '/blkif/ { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i } END { print s + 0 }' /proc/interrupts; }
job() {
	name=$1; dev=$2; shift 2
	say "JOB-BEGIN job=$name dev=$dev${ROUND:+ round=$ROUND}"
	sleep $JOBWAIT
	case $dev in /*) f=$dev ;; *) f=/dev/$dev ;; esac
	marks=
	if [ -n "$MARK" ]; then
		i0=$(blkif_irqs)
		xbd-mark $MARK
	fi
	if [ $name = idle ]; then
		# nothing at all: what dom0 and Xen do on their own in that time
		sleep $RT; rc=0
		echo ";;;;0;0;0;0" >/tmp/fio-$name.out
	else
		fio --name=$name --filename=$f --ioengine=libaio --direct=1 \
			--minimal "$@" >/tmp/fio-$name.out 2>/tmp/fio-$name.err
		rc=$?
	fi
	if [ -n "$MARK" ]; then
		xbd-mark $((MARK + 1))
		marks=" m0=$MARK m1=$((MARK + 1)) girq=$(( $(blkif_irqs) - i0 ))"
		MARK=$((MARK + 2))
	fi
	v=-
	case "$*" in *verify=*) if [ $rc = 0 ]; then v=ok; else v=FAIL; fi ;; esac
	bs=$(echo "$*" | tr ' ' '\n' | sed -n 's/^--bs=//p')
	case $bs in *k) bs=$((${bs%k} * 1024)) ;; esac
	tail -1 /tmp/fio-$name.out | awk -F';' -v n=$name -v d=$dev -v r=${ROUND:--} -v rc=$rc -v v=$v -v bs=$bs -v m="$marks" '
		{ p50 = p99 = "-"   # the reads completion latency percentiles (fields 18-37, "P%=USEC")
		  for (i = 18; i <= 37; i++) { split($i, kv, "="); if (kv[1] == "50.000000%") p50 = kv[2]; if (kv[1] == "99.000000%") p99 = kv[2] }
		  printf "DOMU-JOB-RESULT job=%s dev=%s round=%s rc=%s err=%s rkb=%s wkb=%s riops=%s wiops=%s rbw=%s wbw=%s bs=%s verify=%s p50=%s p99=%s%s\n",
		  n, d, r, rc, $5, $6, $47, $8, $49, $7, $48, bs, v, p50, p99, m }'
	# a fio that printed no result (it did not start: a library missing)
	# still ends its job with a result line, a failed one: dom0 counts
	# the job and fails the step
	if [ ! -s /tmp/fio-$name.out ]; then
		[ $rc != 0 ] || rc=1
		[ $v = - ] || v=FAIL
		echo "DOMU-JOB-RESULT job=$name dev=$dev round=${ROUND:--} rc=$rc err=- rkb=0 wkb=0 riops=0 wiops=0 rbw=0 wbw=0 bs=$bs verify=$v p50=- p99=-$marks"
	fi
	if [ $rc != 0 ]; then sed 's/^/DOMU-FIO-ERR /' /tmp/fio-$name.err | head -20; fi
	sleep 2   # dom0 samples the backend's CPU time before anything else runs
	return $rc
}

verify_job() {  # NAME DEV: 64 MiB written and read back with crc32c
	job $1 $2 --rw=write --bs=64k --iodepth=8 --size=64M --verify=crc32c --do_verify=1 --verify_fatal=1
}
# how long a timed job runs: RT seconds, or with xbdt.ios=N (the count
# step's) N I/Os at a queue depth of 16 or more and N/4 below: a count
# per I/O then amortises the same fixed costs (fio's start) whatever the
# host's pace, which a time-based job's I/O count follows
IOS=$(arg xbdt.ios)
lim() {  # QUEUE-DEPTH
	if [ -z "$IOS" ]; then echo "--runtime=$RT --time_based"
	elif [ $1 -ge 16 ]; then echo "--number_ios=$IOS --runtime=900"
	else echo "--number_ios=$((IOS / 4)) --runtime=900"; fi
}
one_job() {  # JOB DEV: one of the results table's jobs
	case $1 in
	verify) verify_job verify $2 ;;
	rand4k) job rand4k $2 --rw=randrw --rwmixread=50 --bs=4k --iodepth=16 $(lim 16) ;;
	seq128k) job seq128k $2 --rw=read --bs=128k --iodepth=4 $(lim 4) ;;
	qd1) job qd1 $2 --rw=randread --bs=4k --iodepth=1 $(lim 1) ;;
	# the counted table's: a full ring of 4k random I/O, durable writes one at a time, nothing
	rand4k32) job rand4k32 $2 --rw=randrw --rwmixread=50 --bs=4k --iodepth=32 $(lim 32) ;;
	wr4k1) job wr4k1 $2 --rw=randwrite --bs=4k --iodepth=1 $(lim 1) ;;
	idle) job idle $2 --bs=4k ;;
	*) say "UNKNOWN-JOB $1" ;;
	esac
}
std_jobs() {  # DEV: the jobs of the results table (JOBS)
	for j in $JOBS; do one_job $j $1; done
}

if [ $MODE = pvgrub ]; then
	# GRUB's blkfront read the kernel and this initramfs from xvda and
	# handed the device back (state Initialising); Linux's must reconnect
	if wait_dev xvda 120; then
		say "XVDA-PRESENT $(describe xvda)"
		say "XVDA-MD5 $(md5sum </dev/xvda | cut -d' ' -f1) uptime=$(cut -d' ' -f1 /proc/uptime)"
	else
		say "NO-XVDA after 120s"
	fi
	sleep 1; poweroff -f
fi
if ! wait_dev xvdb 120; then
	say "NO-XVDB after 120s (blkfront waiting for a backend)"
	sleep 1; poweroff -f
fi
say "XVDB-PRESENT $(describe xvdb)"
# every disk the guest has (an HVM guest's emulated twins must be unplugged)
say "BLOCKDEVS $(ls /sys/block | grep -v -E '^(loop|ram)' | tr '\n' ' ')"
dmesg | grep -E 'blkfront|xvd' | sed 's/^/DOMU-DMESG /'
if [ $MODE = twodisks ]; then
	if wait_dev xvdc 120; then
		say "XVDC-PRESENT $(describe xvdc)"
		verify_job verify-b xvdb & pb=$!
		verify_job verify-c xvdc; rc=$?
		wait $pb && [ $rc = 0 ] && say "TWODISKS-DONE rc=0" || say "TWODISKS-DONE rc=1"
	else
		say "NO-XVDC after 120s"
	fi
	sync; sleep 1; poweroff -f
fi
if [ $MODE = count ]; then
	ROUNDS=$(arg xbdt.rounds); ROUNDS=${ROUNDS:-2}
	sleep $SETTLE
	for j in $JOBS; do case $j in verify | idle) one_job $j xvdb ;; esac; done
	timed=$(for j in $JOBS; do case $j in verify | idle) ;; *) echo $j ;; esac; done)
	R=$(seq $ROUNDS); [ "$(arg xbdt.trace)" != 1 ] || R="$R t"
	for ROUND in $R; do
		for j in $timed; do one_job $j xvdb; done
	done
	ROUND=
	# dom0 reads the backend's counters after the last job: the disk stays a while
	sleep 20
	say "JOBS-DONE"
	sync; sleep 1; poweroff -f
fi
if [ $MODE = interleave ]; then
	DEVS=$(arg xbdt.devs | tr + ' '); ROUNDS=$(arg xbdt.rounds); ROUNDS=${ROUNDS:-3}
	for d in $DEVS; do
		wait_dev $d 120 && say "$(echo $d | tr a-z A-Z)-PRESENT $(describe $d)" || say "NO-$(echo $d | tr a-z A-Z) after 120s"
	done
	sleep $SETTLE
	for j in $JOBS; do
		if [ $j = verify ]; then
			for d in $DEVS; do [ -b /dev/$d ] && verify_job verify $d; done
			continue
		fi
		ROUND=1
		while [ $ROUND -le $ROUNDS ]; do
			for d in $DEVS; do [ -b /dev/$d ] && one_job $j $d; done
			ROUND=$((ROUND + 1))
		done
		ROUND=
	done
	say "JOBS-DONE"
	sync; sleep 1; poweroff -f
fi
if [ $MODE != rounds ] && [ $MODE != backup ] && [ $MODE != bkverify ] && [ $MODE != lifecycle ]; then
	sleep $SETTLE
	std_jobs xvdb
	say "JOBS-DONE"
fi

case $MODE in
hotplug)
	if wait_gone xvdb 600; then say "XVDB-GONE"; else say "XVDB-STILL-THERE"; fi
	if wait_dev xvdc 600; then
		say "XVDC-PRESENT $(describe xvdc)"
		job verify-c xvdc --rw=write --bs=64k --iodepth=8 --size=16M --verify=crc32c --do_verify=1 --verify_fatal=1
		say "XVDC-DONE"
		say "IOLOOP-START"
		fio --name=loop --filename=/dev/xvdc --ioengine=libaio --direct=1 --rw=randrw \
			--bs=4k --iodepth=16 --runtime=900 --time_based --minimal >/dev/null 2>&1
		say "IOLOOP-END rc=$?"
	else
		say "NO-XVDC"
	fi
	;;
lifecycle)
	root=$(awk '$2 == "/" && $1 != "rootfs" { print $1 " " $3 }' /proc/mounts | tail -1)
	say "ROOTFS-MOUNTED $root"
	mkdir -p /data
	echo "boot at uptime $(cut -d' ' -f1 /proc/uptime), root $root" >>/data/marker
	sync
	# the guest's own clock: the pause it saw is the gap between two of these
	( while :; do echo "DOMU-HB $(cut -d' ' -f1 /proc/uptime)"; sleep 1; done ) &
	i=1
	# /sbin/poweroff (what Linux runs on xl shutdown) creates /tmp/stop
	while [ -b /dev/xvdb ] && [ ! -e /tmp/stop ]; do
		say "LC-ROUND-BEGIN n=$i"
		fio --name=lc --filename=/dev/xvdb --ioengine=libaio --direct=1 --rw=randwrite \
			--bs=16k --iodepth=8 --size=4M --rate_iops=,50 --verify=crc32c --do_verify=1 \
			--verify_fatal=1 --minimal >/tmp/lc.out 2>/tmp/lc.err
		rc=$?
		# fio's longest write and read (verify) latencies, as the guest's clock saw them
		say "LC-ROUND-END n=$i rc=$rc $(tail -1 /tmp/lc.out | awk -F';' '{ printf "wlat_max_ms=%.0f rlat_max_ms=%.0f", $80 / 1000, $39 / 1000 }')"
		[ $rc = 0 ] || sed 's/^/DOMU-FIO-ERR /' /tmp/lc.err | head -5
		i=$((i + 1))
	done
	;;
backup | bkverify)
	# bk_job NAME OFFSET SIZE SEED [fio args]: 4k random writes with a
	# verify, each block once, in the order SEED gives; each block holds
	# SEED and its own offset (fio's pattern verify: a block of another
	# round or from another place fails it, which a checksum verify,
	# true to any block fio wrote, would pass); fio's verify_only with
	# the same arguments checks them again later (bkverify, on a
	# restored backup of this disk)
	bk_job() {
		local n=$1 o=$2 z=$3 seed=$4; shift 4
		fio --name=$n --filename=/dev/xvdb --ioengine=libaio --direct=1 --rw=randwrite \
			--bs=4k --iodepth=4 --offset=$o --size=$z --randseed=$seed --verify=pattern \
			--verify_pattern=0x$(printf %08x $seed)%o --do_verify=1 --verify_fatal=1 \
			--minimal "$@" >/dev/null 2>/tmp/$n.err
	}
	bk_round() {  # N [fio args]: round N
		local n=$1; shift
		bk_job round$n $(( (n - 1) % 4 * 2 ))M 2M $((1000 + n)) "$@"
	}
	if [ $MODE = bkverify ]; then
		r=$(arg xbdt.bkround)
		bk_job a 16M 8M 1 --verify_only; say "BKV-A rc=$?"
		bk_round $r --verify_only; say "BKV-ROUND n=$r rc=$?"
		sync; sleep 1; poweroff -f
	fi
	bk_job a 16M 8M 1; say "BK-A rc=$?"
	i=1
	while [ -b /dev/xvdb ] && [ $i -le 2000 ]; do
		bk_round $i --rate_iops=200
		say "BK-ROUND n=$i rc=$? uptime=$(cut -d' ' -f1 /proc/uptime)"
		i=$((i + 1))
	done
	;;
rounds)
	i=1
	while [ -b /dev/xvdb ] && [ $i -le 500 ]; do
		fio --name=round --filename=/dev/xvdb --ioengine=libaio --direct=1 --rw=randwrite \
			--bs=4k --iodepth=4 --size=4M --verify=crc32c --do_verify=1 --verify_fatal=1 \
			--minimal >/dev/null 2>/tmp/round.err
		say "ROUND n=$i rc=$? uptime=$(cut -d' ' -f1 /proc/uptime)"
		i=$((i + 1))
	done
	;;
esac
sync; sleep 1
poweroff -f
