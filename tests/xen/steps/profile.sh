# step profile: xbd-back's half: perf of all of dom0, strace -c and xentrace of xbd-back, per guest I/O
# needs: xbd-back cmd:perf cmd:strace
# lines: xbd-profile xbd-perf-

# where xbd-back's dom0 CPU goes: a profile of all of dom0 and a count of
# xbd-back's system calls per guest I/O, each on a guest of its own
# what one system call costs dom0 (getppid: the cheapest), and
# xbd-back's own measure of a clock read (a system call without vDSO)
c=$(perf bench syscall basic --loop 20000 2>/dev/null | awk '/usecs\/op/ { print $1 }')
k=$(grep -a -o 'a clock read costs [0-9]* ns' $L/xbd-back.log | head -1 | awk '{ print $5 }')
# a round trip between two processes over pipes: 2 context switches, 4 system calls
pp=$(perf bench sched pipe -l 2000 2>/dev/null | awk '/usecs\/op/ { print $1 }')
echo "XBDT-SYSCOST getppid_us=${c:--} clock_read_ns=${k:--} pipe_roundtrip_us=${pp:--}" | tee -a $L/results.txt
for PROF in perf strace xentrace; do
	j=; [ $PROF != xentrace ] || j=$TRACE_JOBS
	mkcfg xbd$PROF 1 none "$j" "${XBD_DISK/guest.img/guest2.img}"
	guest_jobs xbd$PROF xbd $PROF
	xl destroy xbd$PROF >/dev/null 2>&1
done
PROF=
xbd_crashed "the profile runs"
