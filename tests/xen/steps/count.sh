# step count: the counted cost table: instructions per I/O on dom0's CPUs and the guest's, and the transitions, per backend, job and persistent grants
# needs: none
# lines: count-

# In a boot that counts (xen-check.sh's COUNT=1, make check-xen-cost),
# QEMU's plugin counts each CPU's instructions, dom0's vCPUs pinned to the
# first CPUs and the guests' to the others.  One guest a backend and a
# persistent-grant setting, its disk dom0's own /dev/vdc (xbd-back opens it
# O_DIRECT, kernel blkback sends it bios, qdisk opens it as QEMU does: the
# storage's work is the same for each, so that the counts compare the
# backends), runs verify and an idle job (what dom0 and Xen do in that
# time on their own) once, then COUNT_ROUNDS rounds of the timed jobs
# (each COUNT_IOS I/Os, a quarter of that below a queue depth of 16),
# then a traced round (xentrace, xbd-back's system calls) for the
# transitions; then xbd-back restarted with each A/B option of the seeds'
# claims.  Each guest runs the counter's cut marks around its jobs
# (domu-init.sh's xbdt.mark); the host cuts the counts into the table
# (tests/xen/cost-table.py).  Kernel blkback's runs come last (on Xen 4.17
# it wants backend/vbd, xbd-back's slot): xbd-back is stopped for them,
# and after them the module is removed and xbd-back started again, as the
# later steps expect.
if [ -z "$COUNTING" ]; then
	STEP_G=- step count-boot SKIP "this boot does not count instructions (xen-check.sh's COUNT=1; make check-xen-cost)"
else
	cbe=$(arg xbdt.count-backends | tr + ' '); cbe=${cbe:-xbd qdisk blkback}
	cpers=$(arg xbdt.count-pers | tr + ' '); cpers=${cpers:-1 0}
	cjobs=$(arg xbdt.count-jobs); cjobs=${cjobs:-verify+idle+rand4k32+seq128k+qd1}
	crounds=$(arg xbdt.count-rounds); crounds=${crounds:-2}
	ctrace=$(arg xbdt.count-trace); ctrace=${ctrace:-1}
	cios=$(arg xbdt.count-ios); cios=${cios:-2000}
	cab=$(arg xbdt.count-ab | tr + ' ')
	cprof=$(arg xbdt.count-prof)
	# COUNT_PROF=1: the kernel's and its modules' text symbols, for the profile's
	# functions (tests/xen/kprof.py); once kernel blkback's module is in (it leaves after)
	count_syms() {
		[ "$cprof" = 1 ] && [ ! -s $L/kallsyms.txt ] || return 0
		awk '$2 ~ /^[tTwW]$/' /proc/kallsyms >$L/kallsyms.txt
	}
	# (arch: the table names system calls by their numbers on dom0's architecture)
	echo "XBDT-COUNTING dom0_cpus=$DOM0_CPUS guest_cpus=$COUNT_GUEST_CPUS rounds=$crounds trace=$ctrace arch=$(uname -m)" | tee -a $L/results.txt
	# count_guest GUEST BACKEND RUN PERSISTENT JOBS 'DISK': one guest's jobs, counted
	count_guest() {
		local np= n
		[ $4 = 1 ] || np=" xen_blkfront.feature_persistent=0"
		n=$(echo $5 | tr + ' ' | wc -w)
		GUEST_CPUS=$COUNT_GUEST_CPUS COUNT_FOLLOW=1
		mkcfg $1 1 count "xbdt.mark=$COUNT_NEXT xbdt.jobwait=8 xbdt.ios=$cios xbdt.jobs=$5 xbdt.rounds=$crounds xbdt.trace=$ctrace$np" "$6"
		COUNT_NEXT=$((COUNT_NEXT + 256))
		FOLLOW_FOR=$((900 + n * (crounds + 1) * 300)) guest_jobs $1 $2 $3
		sc_off
		GUEST_CPUS= COUNT_FOLLOW=
		xl destroy $1 >/dev/null 2>&1
		# whose records of the traces are the guest's (the table sums its hypercalls too)
		echo "$2 $3 $LAST_DOMID" >>$L/count-guests.txt
		COUNT_GUESTS=$((COUNT_GUESTS + 1))
	}
	COUNT_NEXT=1 COUNT_GUESTS=0
	# what one system call costs dom0 (getppid, through Xen in a PV dom0): the
	# unit of xbd-back's cost that kernel blkback does not pay
	xbd-mark $COUNT_MARK_SYSCALLS syscalls $COUNT_SYSCALLS 2>/dev/null ||
		STEP_G=- step count-syscall-cost FAIL "xbd-mark $COUNT_MARK_SYSCALLS syscalls $COUNT_SYSCALLS failed"
	echo "XBDT-SYSCOUNT mark=$COUNT_MARK_SYSCALLS calls=$COUNT_SYSCALLS"
	phy_dev
	[ -b $PHY_DEV ] || STEP_G=- step count-disk FAIL "no $PHY_DEV in dom0 (QEMU's third disk)"
	was_xbd=; xbd_alive && was_xbd=1
	for be in $cbe; do
		case $be in
		xbd)
			xbd_alive || xbd_start || STEP_G=- step count-xbd-start FAIL "xbd-back exited: $(tail -3 $L/xbd-back.log)"
			for p in $cpers; do
				count_guest cxbd$p xbd c-pers$p $p $cjobs "$(xbd_disk xvdb $PHY_DEV)"
			done
			# the seeds' claims, each an A/B against the default (writethrough's pair against each other)
			for ab in $cab; do
				case $ab in
				batch1) o="--max-batch 1" j=rand4k32+seq128k ;;
				nopoll) o="--poll-max-ns 0" j=rand4k32+qd1 ;;
				wt) o="--cache writethrough" j=rand4k32+wr4k1 ;;
				wtfd) o="--cache writethrough --fua-mode fdatasync" j=rand4k32+wr4k1 ;;
				uring) o="--engine uring" j=rand4k32+qd1 ;;
				copy) o="--grants copy" j=rand4k32+qd1 ;;
				copyur) o="--grants copy --engine uring" j=rand4k32+qd1 ;;
				*) STEP_G=- step count-ab-$ab FAIL "no such A/B row (batch1, nopoll, wt, wtfd, uring, copy, copyur)"; continue ;;
				esac
				kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null
				echo "---- restarted with $o" >>$L/xbd-back.log
				# shellcheck disable=SC2086
				xbd_start $o
				count_guest cab$ab xbd c-$ab 1 $j "$(xbd_disk xvdb $PHY_DEV)"
				# (a row is what it says: a disk the uring engine handed to aio, or a
				# bounce pool io_uring did not register, is not its row)
				since=$(sed -n "/^---- restarted with $o\$/,\$p" $L/xbd-back.log)
				case $o in *"--engine uring"*)
					echo "$since" | grep -a -q "opened $PHY_DEV (uring engine" ||
						STEP_G=- step count-ab-$ab FAIL "xbd-back did not serve $PHY_DEV with io_uring: $(echo "$since" | grep -a "opened $PHY_DEV" | tail -1)"
				esac
				case $o in *"--grants copy"*"--engine uring"*)
					! echo "$since" | grep -a -q "cannot register the bounce buffers" ||
						STEP_G=- step count-ab-$ab FAIL "the bounce pool was not io_uring's registered buffer (no READ_FIXED/WRITE_FIXED)"
				esac
				xbd_crashed "the count step's $ab row"
				kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null
				xbd_start || STEP_G=- step count-xbd-restart FAIL "xbd-back did not come back"
			done
			xbd_crashed "the count step's xbd-back runs" ;;
		qdisk)
			count_guest cqd qdisk c-pers1 1 $cjobs "format=raw, vdev=xvdb, access=rw, backendtype=qdisk, target=$PHY_DEV"
			cp /var/log/xen/qemu-dm-cqd.log $L/ 2>/dev/null ;;
		blkback)
			# xbd-back away (its slot on 4.17, and its idle work on dom0's CPUs)
			if xbd_alive; then kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null; XBD_PID=; fi
			rm -f /etc/modprobe.d/xbd-check.conf
			loaded=; [ -d /sys/module/xen_blkback ] && loaded=1
			[ -n "$loaded" ] || modprobe xen-blkback || STEP_G=- step count-blkback-load FAIL "modprobe xen-blkback"
			for p in $cpers; do
				count_guest cbb$p blkback c-pers$p $p $cjobs "format=raw, vdev=xvdb, access=rw, target=$PHY_DEV"
			done
			count_syms
			# as it was: the module out again (xbd-back's slot on 4.17), xbd-back back
			if [ -z "$loaded" ]; then
				sleep 2; rmmod xen-blkback 2>/dev/null || say "rmmod xen-blkback failed"
				echo "install xen-blkback /bin/false" >/etc/modprobe.d/xbd-check.conf
			fi ;;
		*) STEP_G=- step count-backend-$be FAIL "no such backend (xbd, qdisk, blkback)" ;;
		esac
	done
	[ -z "$was_xbd" ] || xbd_alive || xbd_start
	count_syms
	STEP_G=- step count-runs PASS "$COUNT_GUESTS guests counted (backends: $cbe; persistent grants: $cpers; A/B: ${cab:-none}; jobs $cjobs, $crounds rounds$([ "$ctrace" != 1 ] || echo ' and a traced one'))"
	kernel_clean count
fi
