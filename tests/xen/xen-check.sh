#!/bin/bash
# xen-check.sh: `make check-xen`.  Boots real Xen with a Debian PV dom0
# inside QEMU (TCG) and, in that one boot, runs xbd-back against stock
# Linux xen-blkfront guests created from xl configs, the same fio jobs
# against kernel xen-blkback and QEMU qdisk, xbd-front against kernel
# blkback, a pvgrub2 guest and the guest lifecycle (dom0-init.sh runs the
# steps, one file each in steps/, with the libraries in lib/).  Three
# configurations by default, each its own boot:
#   deb12  Debian 12: Xen 4.17, Linux 6.1 (xbd as built here, on Debian 12)
#   deb13  Debian 13: Xen 4.20, Linux 6.12 (xbd built in a Debian 13 chroot:
#          libxenctrl's soname changes with each Xen release)
#   arm64  Debian 12's Xen 4.17 on Arm64 in qemu-system-aarch64 (arm64.sh;
#          arm64-deb13, Xen 4.20 there, is make check-xen-long's)
# Prints a results table per configuration; exits 0 when every step of
# every configuration passed, 1 when one failed, 77 when QEMU cannot run.
#
# Adapted from the team's recipe ../shared/xen-in-qemu/xen-in-qemu.sh: the
# same cached stages, in $WORK for deb12 (the recipe's layout) and in
# $WORK/deb13 for deb13: kernel + hypervisor .debs, a debootstrap'd dom0
# rootfs with xen-utils, fio, qemu-system-xen, grub-xen-host and nbdkit.
# Its own files go to .../xbd-check: a dom0 image made from the rootfs, a
# second "payload" disk (our binaries, the hotplug script, kernel modules,
# the guest kernel + initramfs, the pvgrub2 boot disk, dom0-init.sh; dom0
# writes its logs back to it), and the stage-1 initramfs that mounts both.
#
# Env: WORK (/var/tmp/xen-in-qemu)  BUILDDIR (the build tree with xbd-back)
#      XEN_CONFIG ("deb12 deb12-count deb13 arm64", without deb12-count when STEPS is set: the
#             configurations to run, any of deb12, deb12-count (Debian 12's, with only CI's short
#             count: step count, COUNT=1, in .../xbd-check-count), deb13, arm64, arm64-deb13)
#      STEPS ("xbd mq hotplug workers kill9 destroy pvgrub lifecycle vbd3 nbd blkback front";
#             the comparison and variant runs "pcache qdisk nopoll nopin single uring again mqsingle
#             bbmq profile loop phy timeline" are make check-xen-cost's and check-xen-timeline's;
#             "all" for both; "pvgrub-loop" is the long target's)
#      DEB12_STEPS (deb12's default when STEPS is not set: STEPS's without lifecycle,
#             whose PV guest make check-xen-long runs, vbd3 (4.19+) and blkback (kernel
#             blkback's jobs, the long target's); "all" for every step)
#      DEB13_STEPS (deb13's default when STEPS is not set: "xbd kill9 hotplug lifecycle";
#             "all" for every step)
#      XBD_ARGS (options for every start of xbd-back, e.g. "--workers 0")
#      XEN_ARGS (more options on Xen's command line, after ours: "bootscrub=idle" is Xen's default)
#      FIO_RUNTIME (10; make check-xen: 5)  QEMU_TIMEOUT (2700 s a boot)  VM_MEM (3072)  VM_CPUS (2; 3 with COUNT)
#      COUNT (1 when step count is asked for, else 0; 1: count instructions: QEMU runs tests/xen/count/xbd-count.so, dom0's
#             two vCPUs are pinned to CPUs 0-1 and the guests to the others, step
#             count's guests cut the counts at their jobs, and the counted table is
#             printed (tests/xen/cost-table.py); make check-xen-cost)
#      COUNT_BACKENDS ("xbd qdisk blkback")  COUNT_PERS ("1 0": persistent grants on, off)
#      COUNT_JOBS (verify+idle+rand4k32+seq128k+qd1)  COUNT_IOS (2000 I/Os a timed job, a
#             quarter below a queue depth of 16)  COUNT_ROUNDS (2)  COUNT_TRACE (1: a traced
#             round for the transitions)  COUNT_AB ("": the A/B rows, of batch1 nopoll wt wtfd uring copy copyur)
#      COUNT_HOT (unset; 1: the plugin also writes where Xen's instructions went, a line a
#             block of Xen's code with its count per CPU, to .../xen-hot.txt)
#      COUNT_PROF (unset; 1: the plugin also writes, at each cut, what each block of Xen's and
#             the kernels' code ran since the last, to .../prof.txt, dom0 saves its
#             /proc/kallsyms, and tests/xen/kprof.py prints dom0's kernel instructions per
#             I/O by function, per backend and job, to .../prof-table.txt)
#      COUNT_BOUND (the table fails when xbd-back's dom0 instructions per I/O pass it:
#             "rand4k32=N qd1=N ..."; cost-table.py --bound)
#      DOM0_MEM (1024M)  DOMU_MEM (512)
#      CPU (qemu64,-svm when nothing asked for needs Xen's HVM support: PV guests on a PV
#             dom0, the boots CI runs; qemu64,+npt, AMD SVM with nested paging under TCG,
#             when a PVH or HVM guest, a PVH dom0 or a step that declares "needs: hvm" is
#             asked for: QEMU 7.2's SVM emulation kills such guests, and now and then Xen,
#             so CI's boots never stand on it (tests/xen/README.md))
#      GUEST_TYPE (the xl type of the guests the steps create: pv)
#      LC_TYPE (the lifecycle guest's: GUEST_TYPE; make check-xen-long runs a PVH one on deb13)
#      LC_BUDGET (900 s for the lifecycle step: then the sub-steps not yet begun,
#             and the retries of a guest the emulator killed, SKIP; 0: no budget)
#      DOM0_TYPE (pv; pvh: Xen 4.20 only, dom0=pvh iommu=no-sharept, QEMU's q35 with
#             an emulated Intel IOMMU and dom0's disks on virtio-blk-pci behind it)
#      PVGRUB_N (20 boots per backend)  PVGRUB_BOUND (300 s for Linux to start)
#      PVGRUB_BACKENDS ("xbd blkback": the backends the loop takes turns with)
#      PVGRUB_TYPE (pv: the loop boots pvgrub2 in PV guests; pvh: GRUB's PVH image in PVH ones)
#      ICOUNT (unset; N: QEMU's -icount shift=N, time follows instructions, one TCG thread)
#      TCG_THREAD (multi; single: one host thread for all vCPUs)  BOOTLOOP_N (8: the bootloop step's boots)
#      ILV_ROUNDS (3: rounds of the side-by-side runs)  ILV_QDISK (1: qdisk in them too; 0: not)
#      BOOT (1; 0: build the stages and the images only; stages: the cached stages only
#             (debootstraps, the kernel and hypervisor, xbd built in a chroot for another
#             release): what needs no build tree, so that scripts/test.sh runs it beside
#             make check; plan: print each configuration's
#             plan, one line "XEN-PLAN config=.. cpu=.. dom0=.. guests=.. lifecycle=.. steps=..
#             svm=..", and nothing else: no root needed, nothing built or booted)
# The whole script is one function, read before it runs: editing this file
# during a run (which takes minutes) cannot change what the run does.
main() {
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# the host side's shared functions: packages, modules, the boot followed
# on its console, the results tables
. "$HERE/host.sh"
SRC=$(cd "$HERE/../.." && pwd)
WORK=${WORK:-/var/tmp/xen-in-qemu}
BUILDDIR=${BUILDDIR:-${top_builddir:-$PWD}}
# (CI's short count, deb12-count, only when no STEPS were asked for: with
# them it would be deb12's boot again)
[ -n "${XEN_CONFIG:-}" ] || [ -n "${STEPS:-}" ] || XEN_CONFIG="deb12 deb12-count deb13 arm64"
XEN_CONFIG=${XEN_CONFIG:-deb12 deb13 arm64}
STEPS_DEFAULT="xbd mq hotplug workers kill9 destroy pvgrub lifecycle vbd3 nbd blkback front"
# the runs that only compare backends (pcache, qdisk) and the variant runs
# that measure what an option costs (make check-xen-cost, check-xen-timeline):
# out of CI's boots, which have to stay within its time
STEPS_VARIANTS="pcache qdisk nopoll nopin single uring again mqsingle bbmq profile loop phy timeline lckill9 count"
STEPS_ALL="$STEPS_DEFAULT $STEPS_VARIANTS"
USER_STEPS=${STEPS:-}
[ "$USER_STEPS" != all ] || USER_STEPS=$STEPS_ALL
STEPS=${USER_STEPS:-$STEPS_DEFAULT}
# deb13 by default runs what Xen 4.20 and Linux 6.12 change for a
# backend (the vbd3 slot that backendtype=tap writes, with its hotplug;
# the crash journal's resume; the guest lifecycle) and leaves to deb12
# what only repeats there: multi-queue, the userspace-only runs (nbd,
# front) and workers, destroy and pvgrub (the arm64 boot runs workers
# too), to keep CI's boots in its 40 minutes; make check-xen-long's
# second boot runs those on 4.20, with vbd3 (a guest with a disk on
# kernel blkback and one on xbd-back: 3 of CI's minutes, and its ilv step
# has such a guest too); DEB13_STEPS=all runs everything there too
DEB13_STEPS=${DEB13_STEPS:-xbd kill9 hotplug lifecycle}
[ "$DEB13_STEPS" != all ] || DEB13_STEPS=$STEPS_ALL
# deb12 by default leaves the guest lifecycle to deb13's PV guest
# (about 8 of deb12's 18 minutes were its own PV guest's lifecycle, which
# make check-xen-long runs), and kernel blkback's jobs (80 s, whose wall
# time under TCG is the host's load's more than a cost: make
# check-xen-cost counts both backends), the NBD engine's step (a minute;
# the engine has its own tests on the simulator) and pvgrub (a minute;
# make check-xen-pvgrub-loop and the long target's Debian 13 boot run it)
# to the long target too, and runs the backup round trip (issue 49: about
# two minutes) in their place; front still has kernel blkback serve dom0
# the disk xbd-front opens
DEB12_STEPS=${DEB12_STEPS:-xbd mq hotplug workers kill9 destroy backup front}
# CI's bound on xbd-back's dom0 instructions per I/O in its short count (below)
CI_COUNT_BOUND="rand4k32=80000 qd1=300000"
[ "$DEB12_STEPS" != all ] || DEB12_STEPS=$STEPS_ALL
FIO_RUNTIME=${FIO_RUNTIME:-10}
# options every start of xbd-back gets first (e.g. "--workers 0"; on the kernel's command line)
XBD_ARGS=${XBD_ARGS:-}
case $XBD_ARGS in *[,+\"\']*) echo "XBD_ARGS: no commas, plus signs or quotes" >&2; exit 2 ;; esac
case " $STEPS " in
*" pvgrub-loop "*)  # a round takes 1-2 minutes a backend; a hung boot BOUND + 2 minutes
	QEMU_TIMEOUT=${QEMU_TIMEOUT:-$(( 900 + ${PVGRUB_N:-20} * $(echo ${PVGRUB_BACKENDS:-xbd blkback} | wc -w) * (${PVGRUB_BOUND:-300} + 120) ))} ;;
esac
QEMU_TIMEOUT=${QEMU_TIMEOUT:-2700}
VM_MEM=${VM_MEM:-3072}
DOM0_MEM=${DOM0_MEM:-1024M}
DOMU_MEM=${DOMU_MEM:-512}
PVGRUB_N=${PVGRUB_N:-20}
PVGRUB_BOUND=${PVGRUB_BOUND:-300}
PVGRUB_BACKENDS=${PVGRUB_BACKENDS:-xbd blkback}
PVGRUB_TYPE=${PVGRUB_TYPE:-pv}
case $PVGRUB_TYPE in pv|pvh) ;; *) echo "PVGRUB_TYPE: pv or pvh, not '$PVGRUB_TYPE'" >&2; exit 2 ;; esac
LC_BUDGET=${LC_BUDGET:-900}
case $LC_BUDGET in ''|*[!0-9]*) echo "LC_BUDGET: seconds (0: no budget), not '$LC_BUDGET'" >&2; exit 2 ;; esac

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
skip() { log "SKIP: $*"; exit 77; }
# TCG_THREAD=single: one host thread for all vCPUs (the bootloop step's
# comparison; ICOUNT needs it), multi by default: one each
case ${TCG_THREAD:=multi} in single | multi) ;; *) die "TCG_THREAD=$TCG_THREAD: single or multi" ;; esac
[ -z "${ICOUNT:-}" ] || TCG_THREAD=single
host_mirror() {
	{ sed -n 's/^URIs: *\([^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null
	  awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2 }' /etc/apt/sources.list 2>/dev/null; } | head -1
}

case ${BOOT:-1} in 0 | 1 | stages | plan) ;; *) die "BOOT=$BOOT: 1, 0, stages or plan" ;; esac

# ---- more than one configuration: one run of this script each, then the verdict ----
if [ $(echo $XEN_CONFIG | wc -w) -gt 1 ]; then
	if [ "${BOOT:-1}" = plan ] || [ "${BOOT:-1}" = stages ]; then
		for c in $XEN_CONFIG; do XEN_CONFIG=$c bash "$0" || exit 1; done
		exit 0
	fi
	verdict= fails=0 passes=0
	for c in $XEN_CONFIG; do
		t0=$(date +%s)
		XEN_CONFIG=$c bash "$0"; rc=$?
		t=$(( $(date +%s) - t0 ))
		case $rc in 0) r=PASS; passes=$((passes + 1)) ;; 77) r=SKIP ;; *) r=FAIL; fails=$((fails + 1)) ;; esac
		verdict="$verdict  $c: $r ($((t / 60)) min $((t % 60)) s)"
	done
	echo "==== make check-xen:$verdict"
	[ $fails = 0 ] || exit 1
	[ $passes -gt 0 ] || exit 77
	exit 0
fi
# ---- counting instructions (COUNT): the same for x86 and arm64.sh --------------
# count_plan, once STEPS is known: a boot with step count counts (COUNT=1):
# QEMU runs the plugin, dom0's two vCPUs are pinned to CPUs 0 and 1, step
# count's guests to the rest
count_plan() {
	case " $STEPS " in *" count "*) COUNT=${COUNT:-1} ;; esac
	COUNT=${COUNT:-0}
	case $COUNT in 0 | 1) ;; *) die "COUNT: 0 or 1, not '$COUNT'" ;; esac
	if [ $COUNT = 1 ]; then VM_CPUS=${VM_CPUS:-3}; DOM0_VCPUS=2; else VM_CPUS=${VM_CPUS:-2}; DOM0_VCPUS=$VM_CPUS; fi
	[ $DOM0_VCPUS -lt $VM_CPUS ] || [ $COUNT = 0 ] || die "COUNT=1 needs VM_CPUS of 3 or more (the guests' own)"
}
# count_tools MARK: the plugin QEMU loads (the host's build) and MARK, the
# cut-mark program the guests and dom0 run, built for their architecture
count_tools() {
	COUNT_PLUGIN=$BUILDDIR/tests/xen/count/.libs/xbd-count.so
	XBD_MARK=$1
	if [ $COUNT = 1 ] && { [ ! -f "$COUNT_PLUGIN" ] || [ ! -x "$XBD_MARK" ]; }; then
		die "COUNT=1: no $COUNT_PLUGIN or $XBD_MARK: make them first (make check-xen-cost does)"
	fi
}
# count_boot [PLUGIN-ARGS]: with COUNT=1, Xen's command line (xenargs) pins
# dom0's vCPUs, dom0's (dom0args) says where everyone runs and step
# count's settings (COUNT_*), and plugin=() loads the counter writing
# $OUT/counts.txt, with PLUGIN-ARGS (",xen=..." on arm64); COUNT_HOT=1:
# and Xen's blocks by their instructions per CPU in $OUT/xen-hot.txt;
# COUNT_PROF=1: and Xen's and the kernels' blocks at each cut in $OUT/prof.txt
count_boot() {
	local v x
	plugin=()
	case ${COUNT_PROF:-} in "" | 1) ;; *) die "COUNT_PROF: 1 or unset, not '$COUNT_PROF'" ;; esac
	[ $COUNT = 1 ] || return 0
	xenargs="$xenargs dom0_vcpus_pin"
	dom0args="$dom0args xbdt.count=1 xbdt.dom0-cpus=0-$((DOM0_VCPUS - 1)) xbdt.guest-cpus=$DOM0_VCPUS-$((VM_CPUS - 1))"
	for v in BACKENDS PERS JOBS ROUNDS TRACE AB IOS PROF; do
		eval "x=\${COUNT_$v:-}"
		# shellcheck disable=SC2154
		[ -z "$x" ] || dom0args="$dom0args xbdt.count-$(echo $v | tr A-Z a-z)=${x// /+}"
	done
	rm -f "$OUT/counts.txt" "$OUT/xen-hot.txt" "$OUT/prof.txt" "$OUT/prof-table.txt"
	plugin=(-plugin "$COUNT_PLUGIN,out=$OUT/counts.txt${1:-}${COUNT_HOT:+,hot=$OUT/xen-hot.txt}${COUNT_PROF:+,prof=$OUT/prof.txt}")
}
# the Arm64 configurations (Xen on Arm in qemu-system-aarch64): arm64.sh
case $XEN_CONFIG in arm64 | arm64-deb13) . "$HERE/arm64.sh"; exit $? ;; esac
case $XEN_CONFIG in
deb12 | deb12-count) SUITE=bookworm XENVER=4.17 C=$WORK AIO=libaio1 GTYPE=${GUEST_TYPE:-pv} LCTYPE=${LC_TYPE:-${GUEST_TYPE:-pv}} ;;
deb13) SUITE=trixie XENVER=4.20 C=$WORK/deb13 AIO=libaio1t64 GTYPE=${GUEST_TYPE:-pv} LCTYPE=${LC_TYPE:-${GUEST_TYPE:-pv}} ;;
*) die "XEN_CONFIG=$XEN_CONFIG: deb12 (Debian 12, Xen 4.17), deb12-count (the same, CI's short count), deb13 (Debian 13, Xen 4.20), arm64 or arm64-deb13 (the same on Arm64)" ;;
esac
[ -n "$USER_STEPS" ] || [ $XEN_CONFIG != deb13 ] || STEPS=$DEB13_STEPS
[ -n "$USER_STEPS" ] || [ $XEN_CONFIG != deb12 ] || STEPS=$DEB12_STEPS
# CI's short form of the counted table (issue 47): a boot of its own,
# deb12-count, Debian 12's with step count alone, counting xbd-back's
# rand4k32 and qd1 (one round of 1000 and 250 I/Os, no trace); it fails on
# a count of 0 for work done or on xbd-back's dom0 instructions per I/O
# (spin-waits left out) past COUNT_BOUND: 2x what the counted boots read
# (tests/xen/README.md).  Not a step of deb12's boot: the plugin counts
# every block QEMU runs, and a counting boot ran 4-7x slower than one
# without (dom0 ready in 102-133 s against 28 s at a host load of 2-3)
[ -n "$USER_STEPS" ] || [ $XEN_CONFIG != deb12-count ] || STEPS=count
if [ -z "$USER_STEPS" ] && [ $XEN_CONFIG = deb12-count ]; then
	: "${COUNT_BACKENDS:=xbd}" "${COUNT_PERS:=1}" "${COUNT_JOBS:=rand4k32+qd1}" "${COUNT_ROUNDS:=1}"
	: "${COUNT_TRACE:=0}" "${COUNT_IOS:=1000}" "${COUNT_BOUND=$CI_COUNT_BOUND}"
fi
count_plan
case $GTYPE in pv | pvh | hvm) ;; *) die "GUEST_TYPE=$GTYPE: pv, pvh or hvm" ;; esac
case $LCTYPE in pv | pvh | hvm) ;; *) die "LC_TYPE=$LCTYPE: pv, pvh or hvm" ;; esac
D0TYPE=${DOM0_TYPE:-pv}
case $D0TYPE in
pv) ;;
pvh) [ $XENVER != 4.17 ] || die "DOM0_TYPE=pvh: Xen 4.20 (XEN_CONFIG=deb13); 4.17's PVH dom0 is experimental" ;;
*) die "DOM0_TYPE=$D0TYPE: pv or pvh" ;;
esac
# ---- QEMU's CPU: SVM only where something asked for needs it ---------------------
# PVH and HVM guests and a PVH dom0 stand on QEMU 7.2's TCG emulation of
# AMD SVM, which kills them now and then, and once in a while Xen itself
# (tests/xen/README.md); PV guests on a PV dom0 never enter it.  So the
# CPU has SVM (with nested paging: HAP) only when a guest type, the dom0
# type or a step that declares "needs: hvm" asks for it, and CI's boots,
# which ask for none of them, run on a CPU without it
# (tests/xen/ci-plan-check.sh holds them to that).
svm_why=
[ $GTYPE = pv ] || svm_why="$svm_why guests:$GTYPE"
case " $STEPS " in *" lifecycle "*) [ $LCTYPE = pv ] || svm_why="$svm_why lifecycle:$LCTYPE" ;; esac
[ $D0TYPE = pv ] || svm_why="$svm_why dom0:$D0TYPE"
case " $STEPS " in *" pvgrub-loop "*) [ "$PVGRUB_TYPE" = pv ] || svm_why="$svm_why pvgrub-loop:$PVGRUB_TYPE" ;; esac
for s in $STEPS; do
	[ -f "$HERE/steps/$s.sh" ] || die "STEPS: no step '$s' (tests/xen/README.md lists them)"
	sed -n 2p "$HERE/steps/$s.sh" | grep -q -w hvm && svm_why="$svm_why step:$s"
done
if [ -n "$svm_why" ]; then CPU=${CPU:-qemu64,+npt}; else CPU=${CPU:-qemu64,-svm}; fi
if [ "${BOOT:-1}" = plan ]; then
	echo "XEN-PLAN config=$XEN_CONFIG cpu=$CPU dom0=$D0TYPE guests=$GTYPE lifecycle=$LCTYPE steps=$(echo $STEPS | tr ' ' +) svm=$(echo ${svm_why:-none} | tr ' ' +) cpus=$VM_CPUS count=$COUNT bound=$(echo ${COUNT_BOUND:-none} | tr ' ' +)"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot and mkfs of the dom0 image)"

# ---- host packages -----------------------------------------------------------
host_packages qemu-system-x86 qemu-utils busybox-static debootstrap e2fsprogs cpio kmod file xz-utils zstd
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 is not installed and could not be"
qemu-system-x86_64 -accel help 2>/dev/null | grep -qw tcg || skip "this QEMU has no TCG accelerator"

# a PVH dom0's boot keeps its images and logs apart from the PV dom0's
OUT=$C/xbd-check; [ $D0TYPE = pv ] || OUT=$C/xbd-check-$D0TYPE
# (CI's short count keeps deb12's boot's logs beside its own)
[ $XEN_CONFIG != deb12-count ] || OUT=$OUT-count
log "configuration $XEN_CONFIG: Debian $SUITE, Xen $XENVER, $D0TYPE dom0, $GTYPE guests ($LCTYPE lifecycle guest), -cpu $CPU"

HOTPLUG=$SRC/blkback/installed/xbd-hotplug
[ -f "$HOTPLUG" ] || die "no $HOTPLUG"

# ---- cached stages shared with xen-in-qemu.sh (its layout, in $C) -------------
mkdir -p "$C" "$OUT"
in_root() { chroot "$C/rootfs" "$@"; }
if [ ! -e "$C/rootfs/.done" ]; then
	log "debootstrap $SUITE (minbase + xen-utils + fio), about a minute"
	rm -rf "$C/rootfs"
	debootstrap --variant=minbase \
		--include=xen-utils-$XENVER,xen-utils-common,xenstore-utils,fio,kmod,util-linux,iproute2,procps,$AIO \
		$SUITE "$C/rootfs" "$(host_mirror)" >"$C/debootstrap.log" 2>&1 ||
		die "debootstrap failed, see $C/debootstrap.log"
	rm -f "$C"/rootfs/var/cache/apt/archives/*.deb
	touch "$C/rootfs/.done"
fi
# qemu-system-xen: the qdisk backend; grub-xen-host: pvgrub2 (the pvgrub
# steps); nbdkit: the front step serves xbd-front's plugin with it;
# qemu-storage-daemon, the NBD step's qcow2 server: in qemu-system-common
# on Debian 12, in qemu-utils on Debian 13;
# e2fsprogs: the rootfs step's e2fsck (not in Debian 13's minbase);
# linux-perf, strace: the profile step
DOM0_EXTRA="qemu-system-xen qemu-system-common qemu-utils grub-xen-host nbdkit e2fsprogs linux-perf strace"
if [ "$(cat "$C/rootfs/.extra" 2>/dev/null)" != "$DOM0_EXTRA" ]; then
	log "installing $DOM0_EXTRA into the dom0 rootfs"
	cp /etc/resolv.conf "$C/rootfs/etc/resolv.conf" 2>/dev/null
	in_root apt-get update -q >/dev/null 2>&1
	DEBIAN_FRONTEND=noninteractive in_root apt-get install -y -q \
		--no-install-recommends $DOM0_EXTRA >"$C/extra-install.log" 2>&1 ||
		die "installing $DOM0_EXTRA failed, see $C/extra-install.log"
	in_root apt-get clean
	echo "$DOM0_EXTRA" >"$C/rootfs/.extra"
fi
# the kernel and the hypervisor of that release: downloaded and unpacked, not installed
if [ ! -e "$C/x/.done" ]; then
	log "downloading the kernel and hypervisor packages of $SUITE"
	rm -rf "$C/debs" "$C/x" "$C/rootfs/tmp/debs"; mkdir -p "$C/x/kernel" "$C/x/xen" "$C/rootfs/tmp/debs"
	cp /etc/resolv.conf "$C/rootfs/etc/resolv.conf" 2>/dev/null
	in_root apt-get update -q >/dev/null 2>&1
	kpkg=$(in_root apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	[ -n "$kpkg" ] || die "cannot resolve linux-image-amd64 in $SUITE"
	in_root sh -c "cd /tmp/debs && apt-get download -q $kpkg xen-hypervisor-$XENVER-amd64" >/dev/null 2>&1 ||
		die "apt-get download $kpkg xen-hypervisor-$XENVER-amd64 failed"
	mv "$C/rootfs/tmp/debs" "$C/debs"
	dpkg-deb -x "$C"/debs/linux-image-*.deb "$C/x/kernel"
	dpkg-deb -x "$C"/debs/xen-hypervisor-*.deb "$C/x/xen"
	# Debian 13 ships the modules in /usr/lib/modules (merged /usr)
	[ -d "$C/x/kernel/lib" ] || ln -s usr/lib "$C/x/kernel/lib"
	gunzip -c "$C/x/xen/boot/xen-$XENVER-amd64.gz" >"$C/x/xen.elf" || die "no xen-$XENVER-amd64.gz in the package"
	cp "$C"/x/kernel/boot/vmlinuz-* "$C/x/vmlinuz"
	basename "$C"/x/kernel/lib/modules/* >"$C/x/kver"
	depmod -b "$C/x/kernel" "$(cat "$C/x/kver")" || die "depmod of the $SUITE kernel's modules failed"
	touch "$C/x/.done"
fi
KV=$(cat "$C/x/kver")

# ---- xbd, built for this dom0 -----------------------------------------------------
# The host's build if it links the Xen libraries this dom0 has (the same
# Debian release); otherwise a build in a chroot of that release.
LDD_ROOT=
# BOOT=stages, before the build tree is made: the host's own release
# will use it, any other has its chroot build done now
host_suite=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
if [ "${BOOT:-1}" = stages ] && [ "$SUITE" = "$host_suite" ]; then
	log "BOOT=stages: $XEN_CONFIG's cached stages are ready (xbd: the host's own build)"
	exit 0
fi
xenctrl_so() { ldd "$1" 2>/dev/null | awk '$1 ~ /^libxenctrl\.so/ { print $1 }'; }
if [ -x "$BUILDDIR/blkback/xbd-back" ] && so=$(xenctrl_so "$BUILDDIR/blkback/xbd-back") && [ -n "$so" ] &&
	in_root sh -c "ldconfig -p | grep -q '$so '"; then
	B=$BUILDDIR
else
	BR=$WORK/build-$SUITE
	[ ! -f "$SRC/config.status" ] || die "$SRC is configured in place: cannot build it for $SUITE in a chroot"
	BRPKGS=build-essential,autoconf,automake,libtool,pkg-config,libxen-dev,libaio-dev,libsystemd-dev,nbdkit-plugin-dev,libnbd-dev,liburing-dev,librbd-dev,libseccomp-dev
	if [ "$(cat "$BR/.done" 2>/dev/null)" != "$BRPKGS" ]; then
		log "debootstrap $SUITE with xbd's build dependencies (the $XEN_CONFIG build), a few minutes"
		rm -rf "$BR"
		debootstrap --variant=minbase \
			--include=$BRPKGS \
			$SUITE "$BR" "$(host_mirror)" >"$WORK/build-$SUITE.log" 2>&1 ||
			die "debootstrap of the build chroot failed, see $WORK/build-$SUITE.log"
		rm -f "$BR"/var/cache/apt/archives/*.deb
		echo "$BRPKGS" >"$BR/.done"
	fi
	log "building xbd in the $SUITE chroot ($BR/build)"
	# the tree as it is (generated files included, timestamps kept: make
	# rebuilds only what changed, and the chroot's autotools are never needed)
	mkdir -p "$BR/src"
	tar -C "$SRC" --exclude=./_build --exclude=./.git -cf - . | tar -C "$BR/src" -xf - ||
		die "copying the source tree into $BR/src failed"
	chroot "$BR" sh -c 'mkdir -p /build && cd /build && { [ -f Makefile ] || /src/configure -q; } && make -s -j"$(nproc)"' \
		>"$OUT/build.log" 2>&1 || die "the build in the $SUITE chroot failed: $(tail -5 "$OUT/build.log")"
	B=$BR/build LDD_ROOT=$BR
fi
[ "${BOOT:-1}" != stages ] || { log "BOOT=stages: $XEN_CONFIG's cached stages are ready (xbd built in $B)"; exit 0; }
XBD_BACK=$B/blkback/xbd-back
XBD_FRONT=$B/blkfront/xbd-front
# the instruction counter (COUNT=1): the host's cut-mark program (its
# libc is the only library it needs, and either Debian's dom0 has one as new)
count_tools "$BUILDDIR/tests/xen/count/xbd-mark"
PLUGIN=$B/blkfront/.libs/nbdkit-xbd-plugin.so
VIEW_PLUGIN=$B/blkback/.libs/nbdkit-xbdview-plugin.so
[ -x "$XBD_BACK" ] || die "no $XBD_BACK: build it first (make blkback/xbd-back), or set BUILDDIR"

# host_libs DSTLIB BIN: the shared libraries BIN needs that dom0's rootfs
# lacks (BIN was built on the host, or in the chroot $LDD_ROOT)
host_libs() {
	local dst=$1 l
	mkdir -p "$dst"
	if [ -n "$LDD_ROOT" ]; then chroot "$LDD_ROOT" ldd "${2#$LDD_ROOT}"; else ldd "$2"; fi 2>/dev/null |
	awk '/=> \// { print $3 }' | sort -u | while read -r l; do
		[ -e "$C/rootfs$l" ] || [ -e "$C/rootfs/usr$l" ] || cp -L "$LDD_ROOT$l" "$dst/"
	done
}

# ---- guest initramfs: busybox + fio + xen-blkfront + domu-init.sh ----------------
log "building the guest initramfs, the payload disk and the dom0 image"
G=$OUT/domu-initrd
rm -rf "$G"; mkdir -p "$G"/{bin,proc,sys,dev,tmp,lib/mods}
cp /bin/busybox "$G/bin/busybox"
[ ! -x "$XBD_MARK" ] || cp "$XBD_MARK" "$G/bin/xbd-mark"
copy_mods "$G/lib/mods" xen-blkfront
mkdir -p "$G/usr/bin"; cp -L "$C/rootfs/usr/bin/fio" "$G/usr/bin/fio"
in_root ldd /usr/bin/fio | awk '/=>/ { print $3 } /^[ \t]*\/lib64/ { print $1 }' |
while read -r l; do
	[ -n "$l" ] || continue
	mkdir -p "$G/$(dirname "$l")"; cp -L "$C/rootfs$l" "$G$l"
done
install -m 0755 "$HERE/domu-init.sh" "$G/init"

# ---- payload disk (/opt/xbd in dom0) ----------------------------------------------
P=$OUT/payload
rm -rf "$P"; mkdir -p "$P"/{bin,lib,domu,logs,modroot/lib/modules/$KV/kernel}
mkcpio "$G" "$P/domu/initrd.gz"

# ---- the pvgrub2 guest's boot disk: ext2 with grub.cfg, the kernel, a small initramfs ----
# (busybox + xen-blkfront + domu-init.sh, no fio: GRUB reads it 4 KiB at a time)
V=$OUT/pvgrub-root T=$OUT/pvgrub-initrd
rm -rf "$V" "$T"; mkdir -p "$V/boot/grub" "$T"/{bin,proc,sys,dev,tmp,lib}
cp /bin/busybox "$T/bin/busybox"; cp -a "$G/lib/mods" "$T/lib/mods"
install -m 0755 "$HERE/domu-init.sh" "$T/init"
mkcpio "$T" "$V/boot/initrd.gz"
# GRUB's Xen loader takes an ELF, or a bzImage whose payload its
# decompression filters know (gzip, xz: Debian 12's kernel).  Debian 13's
# vmlinuz is zstd inside, which GRUB cannot read ("error: not xen image",
# then the grub> prompt): for it the ELF is unpacked and gzipped.
kboot=vmlinuz
so=$(( ($(od -An -tu1 -j $((0x1f1)) -N1 "$C/x/vmlinuz") + 1) * 512 ))
po=$(od -An -tu4 -j $((0x248)) -N4 "$C/x/vmlinuz"); pl=$(od -An -tu4 -j $((0x24c)) -N4 "$C/x/vmlinuz")
if [ "$(od -An -tx1 -j $((so + po)) -N4 "$C/x/vmlinuz" | tr -d ' ')" = 28b52ffd ]; then
	kboot=vmlinux.gz
	# (zstd complains about the size word the kernel's build appends)
	tail -c +$((so + po + 1)) "$C/x/vmlinuz" | head -c $pl | zstd -qdc 2>/dev/null >"$OUT/vmlinux"
	[ "$(od -An -c -N4 "$OUT/vmlinux" | tr -d ' ')" = '177ELF' ] || die "cannot unpack the zstd kernel for pvgrub2"
	gzip -6c "$OUT/vmlinux" >"$V/boot/$kboot"; rm -f "$OUT/vmlinux"
else
	cp "$C/x/vmlinuz" "$V/boot/$kboot"
fi
echo "$kboot" >"$P/pvgrub-kernel"
# GRUB's PVH image (grub-i386-xen_pvh.bin, the pvhgrub step) loads a
# bzImage by Linux's x86 boot protocol, whatever its compression (Linux
# unpacks itself, and takes the Xen PVH path by the boot header's subarch)
[ "$kboot" = vmlinuz ] || cp "$C/x/vmlinuz" "$V/boot/vmlinuz"
# the embedded config of grub-x86_64-xen.bin (and of the PVH image) finds
# this file and prints "Reading (xen/xvda)/boot/grub/grub.cfg"; the echos
# time the next stages
cat >"$V/boot/grub/grub.cfg" <<CFG
echo "XBDG-CFG"
if [ "\$grub_platform" = xen_pvh ]; then
	linux /boot/vmlinuz console=hvc0 xbdt.mode=pvgrub
else
	linux /boot/$kboot console=hvc0 earlyprintk=xen xbdt.mode=pvgrub
fi
echo "XBDG-KERNEL"
initrd /boot/initrd.gz
echo "XBDG-INITRD"
boot
CFG
truncate -s $(( $(du -sm "$V" | cut -f1) + 8 ))M "$P/pvgrub.img"
mkfs.ext2 -q -F -L pvgrub -d "$V" "$P/pvgrub.img" || die "mkfs.ext2 of the pvgrub boot disk failed"
# ---- the lifecycle guest's root filesystem, ext4 on a disk xbd-back serves ----
# (the fio guest's tree with domu-init.sh as /init), and the initramfs that
# mounts it: busybox, xen-blkfront and ext4, /dev/xvda on /, switch_root
R=$OUT/rootfs-tree
rm -rf "$R"; cp -a "$G" "$R"; mkdir -p "$R/data" "$R/newroot" "$R/sbin"
# Linux runs /sbin/poweroff on xl shutdown: stop the fio rounds, leave the
# root filesystem clean, power off
cat >"$R/sbin/poweroff" <<'OFF'
#!/bin/busybox sh
/bin/busybox touch /tmp/stop; /bin/busybox killall fio; /bin/busybox sleep 2
/bin/busybox sync; /bin/busybox mount -o remount,ro /; /bin/busybox poweroff -f
OFF
chmod +x "$R/sbin/poweroff"
truncate -s $(( $(du -sm "$R" | cut -f1) + 64 ))M "$P/rootfs.img"
mkfs.ext4 -q -F -L guestroot -d "$R" "$P/rootfs.img" || die "mkfs.ext4 of the rootfs guest's disk failed"
T=$OUT/rootfs-initrd
rm -rf "$T"; mkdir -p "$T"/{bin,proc,sys,dev,newroot,mods}
cp /bin/busybox "$T/bin/busybox"
copy_mods "$T/mods" ext4 xen-blkfront
cat >"$T/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
echo "DOMU-STAGE1 of the rootfs guest, uptime $(cut -d' ' -f1 /proc/uptime)"
for m in $(cat /mods/order); do insmod /mods/$m; done
i=0; while [ ! -b /dev/xvda ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
mount -t ext4 -o rw /dev/xvda /newroot || { echo "DOMU-NO-ROOT: cannot mount /dev/xvda"; poweroff -f; }
umount /proc /sys; umount /dev
exec switch_root /newroot /init
INIT
chmod +x "$T/init"
mkcpio "$T" "$P/domu/rootfs-initrd.gz"
cp "$C/x/vmlinuz" "$P/domu/vmlinuz"
cp "$C/x/xen/boot/xen-$XENVER-amd64.config" "$P/xen.config" 2>/dev/null
# 64 bytes of the host's randomness that dom0 credits to its pool at once
# (dom0-init.sh: why)
head -c 64 /dev/urandom >"$P/entropy"
payload_modules "$P/modroot"
install -m 0755 "$HERE/dom0-init.sh" "$P/init"
# the runner's libraries and step files (dom0-init.sh: $X/harness)
mkdir -p "$P/harness/lib" "$P/harness/steps"
install -m 0644 "$HERE"/lib/*.sh "$P/harness/lib/"
install -m 0644 "$HERE"/steps/*.sh "$P/harness/steps/"
install -m 0644 "$HERE"/../backup/disk-quiet.py "$P/harness/"   # step backup's quiet disk
# the NBD step's disk: a qcow2 image, served in dom0 by qemu-storage-daemon
qemu-img create -q -f qcow2 "$P/guest.qcow2" 256M || die "qemu-img create of the NBD step's qcow2 failed"
install -m 0755 "$HOTPLUG" "$P/xbd-hotplug"
# our programs run with the payload's libraries first (only those dom0 lacks)
wrap() {  # NAME REAL
	cp -L "$2" "$P/lib/$1.real"
	printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/xbd/lib exec /opt/xbd/lib/%s.real "$@"\n' "$1" >"$P/bin/$1"
	chmod +x "$P/bin/$1"
	host_libs "$P/lib" "$2"
}
if nm -D "$XBD_BACK" 2>/dev/null | grep -q __asan_init; then
	die "$XBD_BACK is built with sanitizers: configure a build without --enable-sanitizers for dom0"
fi
wrap xbd-back "$XBD_BACK"
[ -x "$XBD_FRONT" ] && wrap xbd-front "$XBD_FRONT"
for c in "$BUILDDIR/blkback/xbdctl" "$BUILDDIR/tools/xbdctl" "$BUILDDIR/xbdctl/xbdctl"; do
	[ -x "$c" ] && wrap xbdctl "$c" && break
done
# dom0's own nbdkit loads the plugins (built against the same nbdkit
# release): xbd-front's, and xbdview (the backup step's exports)
if [ -f "$PLUGIN" ]; then
	cp -L "$PLUGIN" "$P/nbdkit-xbd-plugin.so"
	host_libs "$P/lib" "$PLUGIN"
fi
if [ -f "$VIEW_PLUGIN" ]; then
	cp -L "$VIEW_PLUGIN" "$P/nbdkit-xbdview-plugin.so"
	host_libs "$P/lib" "$VIEW_PLUGIN"
fi
rm -f "$OUT/payload.img"
# room for dom0's logs (the profile step's xentrace files: about 20 MB a job)
# (COUNT: the count step's traces, one round a guest: 1.2 GB more)
[ ! -x "$XBD_MARK" ] || cp "$XBD_MARK" "$P/bin/xbd-mark"
truncate -s $(( $(du -sm "$P" | cut -f1) + 400 + COUNT * 1200 ))M "$OUT/payload.img"
mkfs.ext4 -q -F -L xbd -d "$P" "$OUT/payload.img" || die "mkfs.ext4 of the payload failed"

# ---- stage-1 initramfs: virtio + ext4, mount root and payload, switch_root ----------
S=$OUT/boot-initrd
rm -rf "$S"; mkdir -p "$S"/{bin,proc,sys,dev,newroot,mods}
cp /bin/busybox "$S/bin/busybox"
copy_mods "$S/mods" virtio_pci virtio_blk ext4
cat >"$S/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
for m in $(cat /mods/order); do insmod /mods/$m; done
i=0; while [ ! -b /dev/vdb ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
mount -t ext4 /dev/vda /newroot || { echo "STAGE1: cannot mount /dev/vda"; exec sh; }
mkdir -p /newroot/opt/xbd
mount -t ext4 /dev/vdb /newroot/opt/xbd || { echo "STAGE1: cannot mount /dev/vdb"; exec sh; }
umount /proc /sys; umount /dev
exec switch_root /newroot /opt/xbd/init
INIT
chmod +x "$S/init"
mkcpio "$S" "$OUT/boot-initrd.gz"

# ---- dom0's images: the cached rootfs with room for the guests' disks, phy.img ----
dom0_images

[ "${BOOT:-1}" != 0 ] || { log "BOOT=0: images built in $OUT, not booting"; exit 0; }

# ---- boot ------------------------------------------------------------------------
serial_fresh
# bootscrub=0: Xen's default scrubs the free RAM in the background, in its
# idle loop, for minutes under TCG, and every wake-up from idle waits on it:
# the first run's QD1 figures came out 2-4x slower than a repeat of that run
# later in the boot (4 boots); with bootscrub=0 the two agree.  QEMU's RAM
# is zero already.  Memory a destroyed guest frees is still scrubbed.
xenargs="console=com1 com1=115200,8n1 dom0_mem=$DOM0_MEM,max:$DOM0_MEM dom0_max_vcpus=$DOM0_VCPUS loglvl=all guest_loglvl=all bootscrub=0${XEN_ARGS:+ $XEN_ARGS}"
dom0args="console=hvc0 earlyprintk=xen root=/dev/vda rw xbdt.steps=${STEPS// /+} xbdt.rt=$FIO_RUNTIME xbdt.mem=$DOMU_MEM"
[ -z "$XBD_ARGS" ] || dom0args="$dom0args xbdt.xbdargs=${XBD_ARGS// /+}"
dom0args="$dom0args xbdt.ilv-rounds=${ILV_ROUNDS:-3} xbdt.ilv-qdisk=${ILV_QDISK:-1}"
count_boot
dom0args="$dom0args xbdt.xenver=$XENVER xbdt.config=$XEN_CONFIG xbdt.gtype=$GTYPE xbdt.lctype=$LCTYPE xbdt.pvgrub-n=$PVGRUB_N xbdt.pvgrub-bound=$PVGRUB_BOUND xbdt.pvgrub-backends=${PVGRUB_BACKENDS// /+} xbdt.pvgrub-type=$PVGRUB_TYPE xbdt.lc-budget=$LC_BUDGET xbdt.bootloop-n=${BOOTLOOP_N:-8} xbdt.tcg-thread=$TCG_THREAD"
# dom0's three disks (vda root, vdb payload, vdc the phy runs'); a PVH
# dom0 needs an IOMMU for the devices it drives (Xen refuses to build it
# without one): QEMU's q35 with its Intel IOMMU, the disks as modern-only
# virtio-blk-pci devices that honour it, and iommu=no-sharept (Xen hung
# with the page tables shared between the IOMMU and nested paging)
machine=pc disks=() n=0
for img in "$OUT/dom0.img" "$OUT/payload.img" "$OUT/phy.img"; do
	if [ $D0TYPE = pvh ]; then
		disks+=(-drive "file=$img,format=raw,if=none,id=d$n,cache=unsafe"
			-device "virtio-blk-pci,drive=d$n,iommu_platform=on,disable-legacy=on")
	else
		disks+=(-drive "file=$img,format=raw,if=virtio,cache=unsafe")
	fi
	n=$((n + 1))
done
if [ $D0TYPE = pvh ]; then
	machine=q35 disks=(-device intel-iommu "${disks[@]}")
	xenargs="$xenargs dom0=pvh iommu=no-sharept"
fi
log "booting Xen in QEMU (TCG, -cpu $CPU, $D0TYPE dom0, $GTYPE guests), steps: $STEPS; serial log: $SERIAL"
t0=$(date +%s)
# ICOUNT=N: QEMU's virtual clock follows the instructions run (2^N ns
# each), not the host's clock, so that the host's load cannot move a
# figure measured in the boot's time (icount needs one TCG thread for all
# vCPUs: the boot is slower)
accel=tcg,thread=$TCG_THREAD icount=()
if [ -n "${ICOUNT:-}" ]; then
	accel=tcg,thread=single icount=(-icount "shift=$ICOUNT,sleep=on")
fi
timeout "$QEMU_TIMEOUT" qemu-system-x86_64 -accel $accel "${icount[@]}" "${plugin[@]}" -cpu "$CPU" -machine $machine \
	-m "$VM_MEM" -smp "$VM_CPUS" -no-reboot \
	-kernel "$C/x/xen.elf" -append "$xenargs" \
	-initrd "$C/x/vmlinuz $dom0args,$OUT/boot-initrd.gz" \
	"${disks[@]}" \
	-nic none -display none -monitor none -serial "file:$SERIAL" &
QPID=$!
xen_watch

# ---- report ----------------------------------------------------------------------
xen_report
}
main "$@"
exit $?
