#!/bin/bash
# xen-check.sh: `make check-xen`.  Boots real Xen with a Debian PV dom0
# inside QEMU (TCG) and, in that one boot, runs xbd-back against stock
# Linux xen-blkfront guests created from xl configs, the same fio jobs
# against kernel xen-blkback and QEMU qdisk, xbd-front against kernel
# blkback, a pvgrub2 guest and the guest lifecycle (dom0-init.sh runs the
# steps, one file each in steps/, with the libraries in lib/).  Two
# configurations, each its own boot:
#   deb12  Debian 12: Xen 4.17, Linux 6.1 (xbd as built here, on Debian 12)
#   deb13  Debian 13: Xen 4.20, Linux 6.12 (xbd built in a Debian 13 chroot:
#          libxenctrl's soname changes with each Xen release)
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
#      XEN_CONFIG ("deb12 deb13": the configurations to run, one or both)
#      STEPS ("xbd mq hotplug workers kill9 destroy pvgrub lifecycle vbd3 nbd blkback front";
#             the comparison and variant runs "pcache qdisk nopoll nopin single uring again mqsingle
#             bbmq profile loop phy timeline" are make check-xen-cost's and check-xen-timeline's;
#             "all" for both; "pvgrub-loop" is the long target's)
#      DEB12_STEPS (deb12's default when STEPS is not set: STEPS's without lifecycle,
#             whose PV guest make check-xen-long runs; "all" for every step)
#      DEB13_STEPS (deb13's default when STEPS is not set: "xbd workers kill9 hotplug
#             destroy pvgrub lifecycle vbd3"; "all" for every step)
#      XBD_ARGS (options for every start of xbd-back, e.g. "--workers 0")
#      XEN_ARGS (more options on Xen's command line, after ours: "bootscrub=idle" is Xen's default)
#      FIO_RUNTIME (10)  QEMU_TIMEOUT (2700 s a boot)  VM_MEM (3072)  VM_CPUS (2; 3 with COUNT)
#      COUNT (1 when step count is asked for, else 0; 1: count instructions: QEMU runs tests/xen/count/xbd-count.so, dom0's
#             two vCPUs are pinned to CPUs 0-1 and the guests to the others, step
#             count's guests cut the counts at their jobs, and the counted table is
#             printed (tests/xen/cost-table.py); make check-xen-cost)
#      COUNT_BACKENDS ("xbd qdisk blkback")  COUNT_PERS ("1 0": persistent grants on, off)
#      COUNT_JOBS (verify+idle+rand4k32+seq128k+qd1)  COUNT_IOS (2000 I/Os a timed job, a
#             quarter below a queue depth of 16)  COUNT_ROUNDS (2)  COUNT_TRACE (1: a traced
#             round for the transitions)  COUNT_AB ("": the A/B rows, of batch1 nopoll wt wtfd)
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
SRC=$(cd "$HERE/../.." && pwd)
WORK=${WORK:-/var/tmp/xen-in-qemu}
BUILDDIR=${BUILDDIR:-${top_builddir:-$PWD}}
XEN_CONFIG=${XEN_CONFIG:-deb12 deb13}
STEPS_DEFAULT="xbd mq hotplug workers kill9 destroy pvgrub lifecycle vbd3 nbd blkback front"
# the runs that only compare backends (pcache, qdisk) and the variant runs
# that measure what an option costs (make check-xen-cost, check-xen-timeline):
# out of CI's boots, which have to stay within its time
STEPS_VARIANTS="pcache qdisk nopoll nopin single uring again mqsingle bbmq profile loop phy timeline lckill9 count"
STEPS_ALL="$STEPS_DEFAULT $STEPS_VARIANTS"
USER_STEPS=${STEPS:-}
[ "$USER_STEPS" != all ] || USER_STEPS=$STEPS_ALL
STEPS=${USER_STEPS:-$STEPS_DEFAULT}
# deb13 by default leaves out the runs that only compare costs (mq,
# blkback: deb12's table has them) and the userspace-only ones deb12 has
# (nbd: the NBD engine and qemu-storage-daemon; front: xbd-front against
# kernel blkback), to keep the two boots in CI's time; DEB13_STEPS=all
# runs everything there too
DEB13_STEPS=${DEB13_STEPS:-xbd workers kill9 hotplug destroy pvgrub lifecycle vbd3}
[ "$DEB13_STEPS" != all ] || DEB13_STEPS=$STEPS_ALL
# deb12 by default leaves the lifecycle to deb13's PVH guest (the guest
# type Linux and Xen go to; about 8 of deb12's 18 minutes were the PV
# guest's lifecycle): make check-xen-long runs the PV one
DEB12_STEPS=${DEB12_STEPS:-xbd mq hotplug workers kill9 destroy pvgrub vbd3 nbd count blkback front}
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
case $XEN_CONFIG in
deb12) SUITE=bookworm XENVER=4.17 C=$WORK AIO=libaio1 GTYPE=${GUEST_TYPE:-pv} LCTYPE=${LC_TYPE:-${GUEST_TYPE:-pv}} ;;
deb13) SUITE=trixie XENVER=4.20 C=$WORK/deb13 AIO=libaio1t64 GTYPE=${GUEST_TYPE:-pv} LCTYPE=${LC_TYPE:-${GUEST_TYPE:-pv}} ;;
*) die "XEN_CONFIG=$XEN_CONFIG: deb12 (Debian 12, Xen 4.17) or deb13 (Debian 13, Xen 4.20)" ;;
esac
[ -n "$USER_STEPS" ] || [ $XEN_CONFIG != deb13 ] || STEPS=$DEB13_STEPS
[ -n "$USER_STEPS" ] || [ $XEN_CONFIG != deb12 ] || STEPS=$DEB12_STEPS
# CI's short form of the counted table (issue 47): deb12's default boot
# counts xbd-back's rand4k32 and qd1 (one round of 1000 and 250 I/Os, no
# trace) after its xbd-back steps, and fails on a count of 0 for work done
# or on xbd-back's dom0 instructions per I/O (spin-waits left out) past
# COUNT_BOUND: 2x what the counted boots read (tests/xen/README.md)
if [ -z "$USER_STEPS" ] && [ $XEN_CONFIG = deb12 ]; then
	: "${COUNT_BACKENDS:=xbd}" "${COUNT_PERS:=1}" "${COUNT_JOBS:=rand4k32+qd1}" "${COUNT_ROUNDS:=1}"
	: "${COUNT_TRACE:=0}" "${COUNT_IOS:=1000}" "${COUNT_BOUND:=$CI_COUNT_BOUND}"
fi
# a boot with step count counts (COUNT=1): QEMU runs the plugin, dom0's two
# vCPUs are pinned to CPUs 0 and 1, step count's guests to the rest
case " $STEPS " in *" count "*) COUNT=${COUNT:-1} ;; esac
COUNT=${COUNT:-0}
case $COUNT in 0 | 1) ;; *) die "COUNT: 0 or 1, not '$COUNT'" ;; esac
if [ $COUNT = 1 ]; then VM_CPUS=${VM_CPUS:-3}; DOM0_VCPUS=2; else VM_CPUS=${VM_CPUS:-2}; DOM0_VCPUS=$VM_CPUS; fi
[ $DOM0_VCPUS -lt $VM_CPUS ] || [ $COUNT = 0 ] || die "COUNT=1 needs VM_CPUS of 3 or more (the guests' own)"
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
	echo "XEN-PLAN config=$XEN_CONFIG cpu=$CPU dom0=$D0TYPE guests=$GTYPE lifecycle=$LCTYPE steps=$(echo $STEPS | tr ' ' +) svm=$(echo ${svm_why:-none} | tr ' ' +) count=$COUNT"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot and mkfs of the dom0 image)"

# ---- host packages -----------------------------------------------------------
HOSTPKGS="qemu-system-x86 qemu-utils busybox-static debootstrap e2fsprogs cpio kmod file xz-utils zstd"
need=
for p in $HOSTPKGS; do
	dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q 'install ok installed' || need="$need $p"
done
if [ -n "$need" ]; then
	log "installing host packages:$need"
	{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		-o DPkg::Lock::Timeout=600 --no-install-recommends $need; } >/dev/null 2>&1
fi
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 is not installed and could not be"
qemu-system-x86_64 -accel help 2>/dev/null | grep -qw tcg || skip "this QEMU has no TCG accelerator"

# a PVH dom0's boot keeps its images and logs apart from the PV dom0's
OUT=$C/xbd-check; [ $D0TYPE = pv ] || OUT=$C/xbd-check-$D0TYPE
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
# the instruction counter (COUNT=1): the plugin QEMU loads, the cut-mark
# program the guests and dom0 run (static: it runs in either Debian)
COUNT_PLUGIN=$BUILDDIR/tests/xen/count/.libs/xbd-count.so
XBD_MARK=$BUILDDIR/tests/xen/count/xbd-mark
if [ $COUNT = 1 ] && { [ ! -f "$COUNT_PLUGIN" ] || [ ! -x "$XBD_MARK" ]; }; then
	die "COUNT=1: no $COUNT_PLUGIN or $XBD_MARK: make them first (make check-xen-cost does)"
fi
PLUGIN=$B/blkfront/.libs/nbdkit-xbd-plugin.so
[ -x "$XBD_BACK" ] || die "no $XBD_BACK: build it first (make blkback/xbd-back), or set BUILDDIR"

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
for sub in arch crypto lib fs block drivers/block drivers/xen drivers/virtio drivers/md drivers/char; do
	[ -d "$C/x/kernel/lib/modules/$KV/kernel/$sub" ] || continue
	mkdir -p "$P/modroot/lib/modules/$KV/kernel/$(dirname $sub)"
	cp -a "$C/x/kernel/lib/modules/$KV/kernel/$sub" "$P/modroot/lib/modules/$KV/kernel/$sub"
done
cp "$C"/x/kernel/lib/modules/"$KV"/modules.{order,builtin,builtin.modinfo} "$P/modroot/lib/modules/$KV/" 2>/dev/null
depmod -b "$P/modroot" "$KV" || die "depmod failed"
install -m 0755 "$HERE/dom0-init.sh" "$P/init"
# the runner's libraries and step files (dom0-init.sh: $X/harness)
mkdir -p "$P/harness/lib" "$P/harness/steps"
install -m 0644 "$HERE"/lib/*.sh "$P/harness/lib/"
install -m 0644 "$HERE"/steps/*.sh "$P/harness/steps/"
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
# dom0's own nbdkit loads the plugin (built against the same nbdkit release)
if [ -f "$PLUGIN" ]; then
	cp -L "$PLUGIN" "$P/nbdkit-xbd-plugin.so"
	host_libs "$P/lib" "$PLUGIN"
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

# ---- dom0 image: the cached rootfs, plus room for the guests' disks ---------------
rm -f "$OUT/dom0.img"
truncate -s $(( $(du -sm "$C/rootfs" | cut -f1) + 1200 ))M "$OUT/dom0.img"
mkfs.ext4 -q -F -L dom0 -d "$C/rootfs" "$OUT/dom0.img" || die "mkfs.ext4 of the dom0 image failed"

# dom0's /dev/vdc: a disk of its own for the phy runs (both backends' direct path)
rm -f "$OUT/phy.img"; truncate -s 256M "$OUT/phy.img"

[ "${BOOT:-1}" != 0 ] || { log "BOOT=0: images built in $OUT, not booting"; exit 0; }

# ---- boot ------------------------------------------------------------------------
SERIAL=$OUT/serial.log
rm -f "$OUT/events.txt"
[ -s "$SERIAL" ] && mv "$SERIAL" "$OUT/serial.prev.log"
: >"$SERIAL"
# bootscrub=0: Xen's default scrubs the free RAM in the background, in its
# idle loop, for minutes under TCG, and every wake-up from idle waits on it:
# the first run's QD1 figures came out 2-4x slower than a repeat of that run
# later in the boot (4 boots); with bootscrub=0 the two agree.  QEMU's RAM
# is zero already.  Memory a destroyed guest frees is still scrubbed.
xenargs="console=com1 com1=115200,8n1 dom0_mem=$DOM0_MEM,max:$DOM0_MEM dom0_max_vcpus=$DOM0_VCPUS loglvl=all guest_loglvl=all bootscrub=0${XEN_ARGS:+ $XEN_ARGS}"
dom0args="console=hvc0 earlyprintk=xen root=/dev/vda rw xbdt.steps=${STEPS// /+} xbdt.rt=$FIO_RUNTIME xbdt.mem=$DOMU_MEM"
[ -z "$XBD_ARGS" ] || dom0args="$dom0args xbdt.xbdargs=${XBD_ARGS// /+}"
dom0args="$dom0args xbdt.ilv-rounds=${ILV_ROUNDS:-3} xbdt.ilv-qdisk=${ILV_QDISK:-1}"
if [ $COUNT = 1 ]; then
	xenargs="$xenargs dom0_vcpus_pin"
	dom0args="$dom0args xbdt.count=1 xbdt.dom0-cpus=0-$((DOM0_VCPUS - 1)) xbdt.guest-cpus=$DOM0_VCPUS-$((VM_CPUS - 1))"
	for v in BACKENDS PERS JOBS ROUNDS TRACE AB IOS; do
		eval "x=\${COUNT_$v:-}"
		# shellcheck disable=SC2154
		[ -z "$x" ] || dom0args="$dom0args xbdt.count-$(echo $v | tr A-Z a-z)=${x// /+}"
	done
fi
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
plugin=()
[ $COUNT = 0 ] || { rm -f "$OUT/counts.txt"; plugin=(-plugin "$COUNT_PLUGIN,out=$OUT/counts.txt"); }
timeout "$QEMU_TIMEOUT" qemu-system-x86_64 -accel $accel "${icount[@]}" "${plugin[@]}" -cpu "$CPU" -machine $machine \
	-m "$VM_MEM" -smp "$VM_CPUS" -no-reboot \
	-kernel "$C/x/xen.elf" -append "$xenargs" \
	-initrd "$C/x/vmlinuz $dom0args,$OUT/boot-initrd.gz" \
	"${disks[@]}" \
	-nic none -display none -monitor none -serial "file:$SERIAL" &
QPID=$!
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

# ---- report ----------------------------------------------------------------------
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
if echo "$S" | grep -a '^XBDT-RESULT .* job=qd1 ' | grep -qv ' run=ilv '; then
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
if echo "$S" | grep -qa '^XBDT-RESULT .* run=ilv '; then
	python3 "$HERE/ilv-table.py" "$SERIAL" || ilv_bad=1
	echo
fi
# the counted table (step count, COUNT=1): instructions and transitions per I/O
count_bad=0
if echo "$S" | grep -qa '^XBDT-COUNTING'; then
	python3 "$HERE/cost-table.py" "$SERIAL" "$OUT/counts.txt" "$OUT/logs" --json "$OUT/cost.json" \
		${COUNT_BOUND:+--bound "$COUNT_BOUND"} || count_bad=1
	echo "  (the plugin's counts: $OUT/counts.txt; the cells: $OUT/cost.json, for cost-table.py --compare)"
	echo
fi
if echo "$S" | grep -qa '^XBDT-BKLAT'; then
	echo "xbd-back's own latency per job (its histograms: from taking a request off the ring to pushing"
	echo "its answer, the bucket bound at or above the quantile, us; fio's in the guest adds the notifications"
	echo "and the guest's side):"
	echo "$S" | grep -a '^XBDT-BKLAT' | sed 's/^XBDT-BKLAT /  /'
	echo
fi
if echo "$S" | grep -qa '^XBDT-SYSCALLS'; then
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
if echo "$S" | grep -qa '^XBDT-EVENTS'; then
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
if echo "$S" | grep -qa '^XBDT-PVGRUB'; then
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
if echo "$S" | grep -qa '^XBDT-LC'; then
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
if ! echo "$S" | grep -qa '^XBDT-DONE'; then
	echo "FAIL: dom0 did not finish the steps (QEMU exited or timed out after ${secs}s); serial tail:"
	echo "$S" | tail -25
	exit 1
fi
[ "$fails" = 0 ] || { echo "FAIL: $fails step(s) failed"; exit 1; }
[ $ilv_bad = 0 ] || { echo "FAIL: a side-by-side cost read 0 for work that was done (above)"; exit 1; }
[ $count_bad = 0 ] || { echo "FAIL: the counted table: a cost read 0 for work that was done, a job was not counted, or a bound was passed (above)"; exit 1; }
echo "PASS"
exit 0
}
main "$@"
exit $?
