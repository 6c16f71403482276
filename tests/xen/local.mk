# tests/xen/local.mk: make check-xen, real Xen booted in QEMU.
# Not part of `make check`: it needs root, about 4 GB in $(WORK) and
# both cores for one boot per configuration (QEMU without hardware
# virtualisation): Debian 12's and 13's on x86, Debian 12's again with
# only the counted table's short form (deb12-count), Debian 12's on Arm64
# (tests/xen/README.md has each one's time).
# Run it as root from a build tree configured WITHOUT --enable-sanitizers
# (the binaries are copied into the emulated dom0):
#     make check-xen [WORK=/var/tmp/xen-in-qemu] [STEPS='xbd mq ...' | STEPS=all]
XEN_CHECK_PROGS = blkback/xbd-back$(EXEEXT) xbdctl/xbdctl$(EXEEXT) blkfront/xbd-front$(EXEEXT) \
	tests/xen/count/xbd-mark$(EXEEXT)
if BUILD_SHARED
XEN_CHECK_PROGS += tests/xen/count/xbd-count.la
endif
if BUILD_NBDKIT_PLUGIN
XEN_CHECK_PROGS += blkfront/nbdkit-xbd-plugin.la blkback/nbdkit-xbdview-plugin.la
endif
# CI's boots run their timed jobs 5 s each instead of 10: their wall-time
# figures follow the host's load under TCG whatever their length (the
# counted table, deb12-count, runs a number of I/Os instead), and that
# keeps about a minute of CI's 40 for the steps (issue 45)
check-xen: $(XEN_CHECK_PROGS)
	FIO_RUNTIME=$${FIO_RUNTIME:-5} BUILDDIR=$(abs_top_builddir) $(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
# The long target (issue 22): N pvgrub2 boots from a disk xbd-back serves,
# each followed by one from kernel blkback (the control), in one boot of
# Xen; a boot that has not reached Linux after PVGRUB_BOUND seconds has
# both ends' state dumped (tests/xen/README.md).  About 1.5 min a round.
N = 20
check-xen-pvgrub-loop: $(XEN_CHECK_PROGS)
	STEPS=pvgrub-loop PVGRUB_N=$(N) BUILDDIR=$(abs_top_builddir) \
		$(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
# The counted cost table (issue 47): Debian 12 and 13, and Debian 12 on
# Arm64 (arm64: Xen 4.17, the plugin told where Xen's EL2 code lies by
# arm64.sh; COST_CONFIG="... arm64-deb13" adds Xen 4.20 there), each one
# boot that counts instructions (COUNT=1: QEMU's plugin tests/xen/count/xbd-count.so,
# dom0 pinned to CPUs 0-1 and the guests to CPU 2) and runs step count:
# xbd-back, qdisk and kernel blkback on dom0's own disk, persistent grants
# on and off, verify, idle, rand4k32, seq128k and qd1 in two counted rounds
# and a traced one, and xbd-back's A/B rows (--max-batch 1, --poll-max-ns
# 0, --cache writethrough with RWF_DSYNC and with fdatasync, --engine
# uring); about 40
# minutes a boot on a quiet host.  Prints the table per boot
# (tests/xen/cost-table.py); compare two boots' cells with
#   tests/xen/cost-table.py --compare WORK/xbd-check/cost.json OTHER/cost.json
COST_CONFIG = deb12 deb13 arm64
check-xen-cost: $(XEN_CHECK_PROGS)
	COUNT=1 STEPS=count COUNT_AB="$${COUNT_AB-batch1 nopoll wt wtfd uring}" XEN_CONFIG="$(COST_CONFIG)" \
		QEMU_TIMEOUT=$${QEMU_TIMEOUT:-5400} BUILDDIR=$(abs_top_builddir) $(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
# What an option costs in wall time, beside kernel blkback and qdisk in the
# same boot (Debian 12, about 25 minutes): xbd-back restarted with
# --poll-max-ns 0, --workers 0 (also the multi-queue guest),
# --engine uring, --pin-rings 0, --direct 0, std's options again last (the table's nopoll, single, uring, nopin, pcache, again and mqsg
# rows), the multi-queue guest on kernel blkback too (bbmq: the mq rows'
# 'vs bb'), both backends on a disk of dom0's own (phy), the NBD step's whole set of jobs, and a profile: perf of all
# of dom0 under xbd-back and under kernel blkback, strace -c of xbd-back
# (its system calls per guest I/O).  (Its figures are time, which follows
# the host's load under TCG: make check-xen-cost counts instead.)
check-xen-variants: $(XEN_CHECK_PROGS)
	XEN_CONFIG=deb12 STEPS="xbd pcache mq nopoll nopin single uring again mqsingle profile nbd qdisk blkback loop phy bbmq" \
		BUILDDIR=$(abs_top_builddir) $(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
# Where a single request's time goes in dom0 (Debian 12, about 25 minutes):
# the qd1 job under ftrace for both backends on a file, on a disk of
# dom0's own and through the page cache, cut into stages by
# tests/xen/qd1-timeline.py, beside the pcache and phy rows untraced.
check-xen-timeline: $(XEN_CHECK_PROGS)
	XEN_CONFIG=deb12 STEPS="xbd pcache phy timeline blkback" \
		BUILDDIR=$(abs_top_builddir) $(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
# What CI's boots leave out, because it stands on QEMU 7.2's TCG emulation
# of AMD SVM, which kills PVH and HVM guests now and then and once in a
# while Xen itself (tests/xen/README.md: CI's boots run PV guests on a PV
# dom0, on a CPU without SVM; tests/xen/ci-plan-check.sh holds them to it).
# About 90 minutes on a quiet host, one boot after another, each on
# `-cpu qemu64,+npt` (xen-check.sh picks it for what they ask): on Xen 4.20
# (Debian 13) a PVH dom0 (DOM0_TYPE=pvh: QEMU's q35 with an emulated IOMMU,
# one vCPU) serving PVH guests, with the backends' costs side by side (ilv:
# one guest, a disk on kernel blkback, on xbd-back and on qdisk, each job
# on each in turn) and the kill -9 of xbd-back under I/O; then a PV dom0's
# boot with the steps CI's deb13 boot leaves to deb12 (workers, destroy,
# pvgrub), the same side-by-side runs and an HVM guest with PV
# drivers on xbd-back (slow under TCG: SeaBIOS loads its kernel through
# port I/O); the lifecycle of a PVH guest (live migration with HAP
# log-dirty, which Debian's Xen has for PVH and HVM guests but not for PV
# ones: it is built without shadow paging) with the kill -9 of xbd-back
# under its rounds (lckill9); on Xen 4.17 (Debian 12) the lifecycle of a
# PV guest with lckill9 (CI runs a PV lifecycle on 4.20); and on Arm64
# (qemu-system-aarch64, no SVM involved) the steps CI's Arm64 boot leaves
# out: multi-queue, kernel blkback's jobs and the side-by-side costs on
# Xen 4.17, the same with vbd3 beside kernel blkback on Xen 4.20.
check-xen-long: $(XEN_CHECK_PROGS)
	XEN_CONFIG=deb13 DOM0_TYPE=pvh GUEST_TYPE=pvh DOMU_MEM=256 VM_CPUS=1 QEMU_TIMEOUT=5400 STEPS="xbd ilv kill9 lifecycle lckill9 backup" \
		BUILDDIR=$(abs_top_builddir) $(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
	XEN_CONFIG=deb13 STEPS="xbd workers hotplug destroy pvgrub vbd3 ilv hvm" \
		BUILDDIR=$(abs_top_builddir) $(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
	XEN_CONFIG=deb13 LC_TYPE=pvh STEPS="lifecycle lckill9" \
		BUILDDIR=$(abs_top_builddir) $(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
	XEN_CONFIG=deb12 STEPS="blkback lifecycle lckill9 nbd pvgrub" \
		BUILDDIR=$(abs_top_builddir) $(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
	XEN_CONFIG=arm64 STEPS="xbd mq workers kill9 blkback ilv" \
		BUILDDIR=$(abs_top_builddir) $(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
	XEN_CONFIG=arm64-deb13 STEPS="xbd mq workers kill9 vbd3 blkback ilv" \
		BUILDDIR=$(abs_top_builddir) $(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
.PHONY: check-xen check-xen-pvgrub-loop check-xen-cost check-xen-variants check-xen-timeline check-xen-long
# The instruction counter of the counted cost table (tests/xen/count/): a
# QEMU TCG plugin that counts each emulated CPU's instructions and writes
# them at the marks of common/mark.h, and the program that runs a cut mark
# in the guests.  Both without the sanitizers: QEMU dlopen()s the one, the
# other runs static in the guests.  -rpath makes libtool build the module
# shared though it is installed nowhere.  QEMU loads it only as a shared
# object: with --disable-shared it is left out (count-check.sh skips).
if BUILD_SHARED
noinst_LTLIBRARIES += tests/xen/count/xbd-count.la
endif
tests_xen_count_xbd_count_la_SOURCES = tests/xen/count/xbd-count.c tests/xen/count/qemu-plugin-api.h
tests_xen_count_xbd_count_la_CFLAGS = $(WARN_CFLAGS) -fvisibility=hidden -pthread
tests_xen_count_xbd_count_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir) -pthread
noinst_PROGRAMS += tests/xen/count/xbd-mark
tests_xen_count_xbd_mark_SOURCES = tests/xen/count/xbd-mark.c
tests_xen_count_xbd_mark_CFLAGS = $(WARN_CFLAGS)
tests_xen_count_xbd_mark_LDFLAGS = -static
noinst_HEADERS += common/mark.h
# In make check: the host-side summary of the profile step's xentrace files.
XEN_HOST_TESTS = tests/xen/count-check.sh tests/xen/cost-table-check.sh tests/xen/kprof-check.sh tests/xen/xentrace-sum-check.sh tests/xen/qd1-timeline-check.sh tests/xen/ilv-table-check.sh \
	tests/xen/lifecycle-check.sh tests/xen/steps-check.sh tests/xen/ci-plan-check.sh
dist_check_SCRIPTS += $(XEN_HOST_TESTS)
TESTS += $(XEN_HOST_TESTS)
# with dom0-init.sh, its libraries and step files (tests/xen/steps-check.sh
# fails when one is not listed here)
EXTRA_DIST += tests/xen/xen-check.sh tests/xen/host.sh tests/xen/arm64.sh \
	tests/xen/dom0-init.sh tests/xen/domu-init.sh tests/xen/count/payload.S tests/xen/count/payload-arm64.S \
	tests/xen/xentrace-sum.py tests/xen/qd1-timeline.py tests/xen/ilv-table.py tests/xen/cost-table.py tests/xen/kprof.py \
	tests/xen/lib/base.sh tests/xen/lib/guests.sh tests/xen/lib/lifecycle.sh \
	tests/xen/lib/measure.sh tests/xen/lib/pvgrub.sh tests/xen/lib/runs.sh \
	tests/xen/lib/steps.sh tests/xen/lib/xbd.sh \
	tests/xen/steps/again.sh tests/xen/steps/backup.sh tests/xen/steps/bbmq.sh \
	tests/xen/steps/blkback.sh tests/xen/steps/destroy.sh \
	tests/xen/steps/bootloop.sh tests/xen/steps/count.sh tests/xen/steps/front.sh tests/xen/steps/hotplug.sh tests/xen/steps/hvm.sh \
	tests/xen/steps/ilv.sh tests/xen/steps/kill9.sh tests/xen/steps/lckill9.sh \
	tests/xen/steps/lifecycle.sh tests/xen/steps/loop.blkback.sh \
	tests/xen/steps/loop.sh tests/xen/steps/mq.sh tests/xen/steps/mqsingle.sh \
	tests/xen/steps/nbd.sh tests/xen/steps/nopin.sh tests/xen/steps/nopoll.sh \
	tests/xen/steps/pcache.sh tests/xen/steps/phy.blkback.sh \
	tests/xen/steps/phy.sh tests/xen/steps/profile.blkback.sh \
	tests/xen/steps/profile.sh tests/xen/steps/pvgrub-loop.sh \
	tests/xen/steps/pvgrub.sh tests/xen/steps/pvhgrub.sh \
	tests/xen/steps/qdisk.sh tests/xen/steps/single.sh \
	tests/xen/steps/timeline.blkback.sh tests/xen/steps/timeline.sh \
	tests/xen/steps/uring.sh tests/xen/steps/vbd3.sh \
	tests/xen/steps/workers.sh tests/xen/steps/xbd.sh \
	tests/xen/README.md
