# step timeline: xbd-back's half: the qd1 job under ftrace, on a file, on /dev/vdc and through the page cache
# needs: xbd-back
# lines: xbd-timeline-

# single requests (QD1) as dom0's kernel sees them (ftrace: the ring's
# interrupt, the wake-ups, the disk's request, the notification), xbd-back
# on a file, on dom0's disk and through the page cache; kernel blkback's
# come in its section, and tests/xen/qd1-timeline.py cuts both into stages
PROF=ftrace
mkcfg xbdtl 1 none xbdt.jobs=qd1 "${XBD_DISK/guest.img/guest2.img}"
guest_jobs xbdtl xbd timeline
xl destroy xbdtl >/dev/null 2>&1
phy_run xbd xbdtlp tphy xbdt.jobs=qd1
VARIANT_JOBS=xbdt.jobs=qd1 VARIANT_DISK=$XBD_DISK variant tpcache xbdtlpc \
	"the page-cache timeline run" --direct 0
PROF=
ftrace_quiet
xbd_crashed "the timeline runs"
