# tests/xen/arm64.sh: sourced by xen-check.sh (inside its main) for the
# Arm64 configurations:
#   arm64        Debian 12: Xen 4.17, Linux 6.1
#   arm64-deb13  Debian 13: Xen 4.20, Linux 6.12
# Xen on Arm boots under qemu-system-aarch64's TCG (virt, virtualization=on,
# cortex-a57) as Xen's own CI boots it, with the hypervisor as QEMU's
# -kernel and dom0's kernel and initramfs handed over by QEMU's
# guest-loader devices.  Everything is made from Debian's arm64 packages
# without running arm64 code on the host: debootstrap --foreign resolves
# and fetches dom0's packages, which are unpacked with dpkg-deb (no
# maintainer script runs; the few things their scripts would do that the
# harness needs are done here), and xbd is cross-built against
# scripts/sysroot-arm64.sh's sysroot of the same release.  dom0 then runs
# the same runner (dom0-init.sh), libraries and step files as x86.
#
# What differs on Arm: one guest type (xl's "pvh", the only one there),
# no pvgrub (a guest boots from kernel=, or U-Boot/EFI inside it), dom0
# is auto-translated (a system call never enters Xen), and its devices
# are virtio-mmio, found by their filesystem labels.
#
# Env (besides xen-check.sh's): ARM64_STEPS (the default steps: "xbd
# workers kill9", CI's: the fio jobs with verify on xbd-back in a confined
# worker, the workers' confinement and a worker killed under I/O, kill -9 of
# xbd-back under I/O; make check-xen-long runs "xbd mq workers kill9
# blkback ilv" on Xen 4.17 and, with vbd3, on 4.20; STEPS overrides),
# ARM_CPU (cortex-a57),
# ARM64_BUILDDIR (a cross build tree to take xbd from instead of building
# one in $WORK/CONFIG/build).
#
# Counting (COUNT=1, step count: make check-xen-cost) works as on x86
# (xen-check.sh's count_plan, count_tools, count_boot): three CPUs, dom0 on
# two pinned vCPUs, step count's guests on the third, the cross-built
# xbd-mark in the guests and dom0, and the plugin told where Xen's code
# lies at EL2 (xen=, read from the image booted: xen_range below).

# ---- the configuration -------------------------------------------------------
case $XEN_CONFIG in
# (the Debian 12 sysroot is the one scripts/install-deps.sh makes, from the host's sources)
arm64) SUITE=bookworm XENVER=4.17 AIO=libaio1 MERGED=--no-merged-usr SYSROOT=/opt/xbd-sysroot-arm64 SRSUITE= ;;
arm64-deb13) SUITE=trixie XENVER=4.20 AIO=libaio1t64 MERGED=--merged-usr SYSROOT=/opt/xbd-sysroot-arm64-trixie SRSUITE=trixie ;;
esac
C=$WORK/$XEN_CONFIG
OUT=$C/xbd-check
# xl's type on Arm is "pvh" whatever the kernel (libxl has no other there);
# dom0's lines say "arm"
GTYPE=pvh LCTYPE=pvh D0TYPE=arm
[ -n "$USER_STEPS" ] || STEPS=${ARM64_STEPS:-xbd workers kill9}
ARM_CPU=${ARM_CPU:-cortex-a57}
# QEMU's CPUs and dom0's vCPUs: 2 and 2, or 3 and 2 when counting; the
# count step's backends without qdisk (Debian has no arm64 qemu-system-xen)
count_plan
[ $COUNT = 0 ] || : "${COUNT_BACKENDS:=xbd blkback}"
for s in $STEPS; do
	[ -f "$HERE/steps/$s.sh" ] || die "STEPS: no step '$s' (tests/xen/README.md lists them)"
done
# BOOT=plan: the plan alone (no root, nothing built); no SVM here, an Arm
# CPU emulated, and guests of the one kind Xen on Arm has
if [ "${BOOT:-1}" = plan ]; then
	echo "XEN-PLAN config=$XEN_CONFIG cpu=$ARM_CPU dom0=$D0TYPE guests=$GTYPE lifecycle=$LCTYPE steps=$(echo $STEPS | tr ' ' +) svm=none cpus=$VM_CPUS count=$COUNT bound=$(echo ${COUNT_BOUND:-none} | tr ' ' +)"
	exit 0
fi
[ "$(id -u)" = 0 ] || die "run as root (debootstrap and mkfs of the dom0 image)"
log "configuration $XEN_CONFIG: Debian $SUITE arm64, Xen $XENVER on Arm, guests of xl type pvh; steps: $STEPS"

# ---- host packages -----------------------------------------------------------
host_packages qemu-system-arm qemu-utils debootstrap e2fsprogs cpio kmod file xz-utils zstd binutils gcc-aarch64-linux-gnu
command -v qemu-system-aarch64 >/dev/null || skip "qemu-system-aarch64 is not installed and could not be"
qemu-system-aarch64 -accel help 2>/dev/null | grep -qw tcg || skip "this QEMU has no TCG accelerator"
command -v aarch64-linux-gnu-gcc >/dev/null || skip "no aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu) to build xbd for arm64"
HOTPLUG=$SRC/blkback/installed/xbd-hotplug
[ -f "$HOTPLUG" ] || die "no $HOTPLUG"
mkdir -p "$C" "$OUT"

# ---- dom0's root: Debian's arm64 packages, unpacked ----------------------------
# The kernel and the hypervisor come with it and are moved out (the
# modules go to the payload disk, as on x86).  linux-image-arm64 has
# xen-blkback, xen-blkfront, gntdev, evtchn, privcmd and xenfs as modules.
A64_PKGS="xen-utils-$XENVER,xen-utils-common,xenstore-utils,xen-hypervisor-$XENVER-arm64,linux-image-arm64"
A64_PKGS="$A64_PKGS,fio,kmod,util-linux,iproute2,procps,$AIO,python3-minimal,busybox-static,e2fsprogs"
# what xbd-back, xbdctl and xbd-front link besides Xen's and libaio
A64_PKGS="$A64_PKGS,liburing2,libnbd0,libseccomp2,libsystemd0"
if [ "$(cat "$C/rootfs/.done" 2>/dev/null)" != "$A64_PKGS" ]; then
	log "debootstrap --foreign $SUITE arm64 and unpacking its packages (no arm64 code runs), a minute or two"
	rm -rf "$C/rootfs" "$C/x"
	debootstrap --foreign --arch=arm64 --variant=minbase $MERGED --include="$A64_PKGS" \
		$SUITE "$C/rootfs" "$(host_mirror)" >"$C/debootstrap.log" 2>&1 ||
		die "debootstrap --foreign failed, see $C/debootstrap.log"
	# debootstrap unpacked only the required packages: every one, over
	# the top (a directory symlink of a merged /usr stays one)
	for d in "$C"/rootfs/var/cache/apt/archives/*.deb; do
		dpkg-deb --fsys-tarfile "$d" | tar -x --keep-directory-symlink -C "$C/rootfs" ||
			die "unpacking $d failed"
	done
	# what the packages' maintainer scripts would have done that dom0 needs:
	# the alternatives the harness calls by name, and the users
	R=$C/rootfs
	# (debootstrap's first stage leaves /proc a symbolic link to the host's)
	[ ! -L "$R/proc" ] || { rm "$R/proc"; mkdir "$R/proc"; }
	# base-files makes /var/run and /var/lock links into /run (libxl
	# keeps its locks in /var/run/xen: without the link xl destroy failed)
	rm -rf "$R/var/run" "$R/var/lock"
	ln -s /run "$R/var/run"; ln -s /run/lock "$R/var/lock"
	ln -sf mawk "$R/usr/bin/awk"
	ln -sf which.debianutils "$R/usr/bin/which"
	[ -e "$R/etc/passwd" ] || cp "$R/usr/share/base-passwd/passwd.master" "$R/etc/passwd"
	[ -e "$R/etc/group" ] || cp "$R/usr/share/base-passwd/group.master" "$R/etc/group"
	# the kernel, its modules and the hypervisor: out of dom0's root
	mkdir -p "$C/x/kernel/lib"
	mv "$R"/lib/modules "$C/x/kernel/lib/modules" 2>/dev/null ||
		mv "$R"/usr/lib/modules "$C/x/kernel/lib/modules" || die "no kernel modules in the $SUITE arm64 packages"
	mkdir -p "$R/lib/modules"
	basename "$C"/x/kernel/lib/modules/* >"$C/x/kver"
	KV=$(cat "$C/x/kver")
	# the Image, uncompressed for Xen's loader and the guests' (gzip here:
	# a 12 MB file that unpacks to about 30 MB)
	k=$(ls "$R"/boot/vmlinuz-* | head -1)
	[ -f "$k" ] || die "no vmlinuz in the $SUITE arm64 kernel package"
	if [ "$(od -An -tx1 -N2 "$k" | tr -d ' ')" = 1f8b ]; then gunzip -c "$k" >"$C/x/Image"; else cp "$k" "$C/x/Image"; fi
	x=$(ls "$R"/boot/xen-$XENVER-arm64* 2>/dev/null | grep -v '\.config$\|\.efi$' | head -1)
	[ -f "$x" ] || die "no xen-$XENVER-arm64 in the hypervisor package"
	cp "$x" "$C/x/xen"
	cp "$R"/boot/xen-$XENVER-arm64.config "$C/x/xen.config" 2>/dev/null
	rm -rf "$R"/boot/* "$R/debootstrap" "$R"/var/cache/apt/archives/*.deb
	depmod -b "$C/x/kernel" "$KV" || die "depmod of the $SUITE arm64 kernel's modules failed"
	echo "$A64_PKGS" >"$R/.done"
fi
KV=$(cat "$C/x/kver")

# ---- xbd, cross-built for this release's arm64 libraries -----------------------
if [ -n "${ARM64_BUILDDIR:-}" ]; then
	B=$ARM64_BUILDDIR
else
	B=$C/build
	[ ! -f "$SRC/config.status" ] || die "$SRC is configured in place: cannot cross-build it in $B (or set ARM64_BUILDDIR)"
	sh "$SRC/scripts/sysroot-arm64.sh" ${SRSUITE:+--suite $SRSUITE} "$SYSROOT" >"$C/sysroot.log" 2>&1 ||
		die "the arm64 sysroot failed: $(tail -3 "$C/sysroot.log")"
	log "cross-building xbd for $SUITE arm64 ($B)"
	mkdir -p "$B"
	( cd "$B" && { [ -f Makefile ] || sh "$SRC/scripts/configure-arm64.sh" --sysroot "$SYSROOT" -q; } &&
		make -s -j"$(nproc)" ) >"$C/build.log" 2>&1 || die "the arm64 build failed: $(tail -5 "$C/build.log")"
fi
for p in blkback/xbd-back xbdctl/xbdctl blkfront/xbd-front; do
	file -L "$B/$p" 2>/dev/null | grep -q 'ARM aarch64' || die "$B/$p is not an arm64 program"
done
# the instruction counter (COUNT=1): the cross-built cut-mark program
count_tools "$B/tests/xen/count/xbd-mark"
[ $COUNT = 0 ] || file -L "$XBD_MARK" | grep -q 'ARM aarch64' || die "$XBD_MARK is not an arm64 program"
[ "${BOOT:-1}" != stages ] || { log "BOOT=stages: $XEN_CONFIG's cached stages are ready (xbd cross-built in $B)"; exit 0; }

# ---- the libraries of a program ------------------------------------------------
# a64_libs ROOT DST ELF...: the shared libraries the programs need, from
# ROOT, by their DT_NEEDED entries, looked for where the loader looks (the
# multiarch directories, and a library's own RUNPATH: librados's names
# /usr/lib/aarch64-linux-gnu/ceph); readelf, as there is no arm64 ldd to run
a64_libs() {
	local root=$1 dst=$2 todo seen= f n l d dirs; shift 2
	todo="$*"
	while [ -n "$todo" ]; do
		set -- $todo; f=$1; shift; todo="$*"
		dirs="lib/aarch64-linux-gnu usr/lib/aarch64-linux-gnu $(readelf -d "$f" 2>/dev/null |
			sed -n 's/.*(R.*PATH).*\[\(.*\)\]/\1/p' | tr ':' ' ' | sed 's|^/||; s| /| |g')"
		for n in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
			case " $seen " in *" $n "*) continue ;; esac
			seen="$seen $n"
			for d in $dirs; do
				l=$root/$d/$n
				[ -e "$l" ] || continue
				mkdir -p "$dst/$d"; cp -L "$l" "$dst/$d/"
				todo="$todo $l"
				break
			done
			[ -e "$l" ] || die "$n, which $f needs, is not in $root"
		done
	done
	mkdir -p "$dst/lib"; cp -L "$root/lib/ld-linux-aarch64.so.1" "$dst/lib/"
}

# ---- the guests' initramfs: busybox, fio, xen-blkfront, domu-init.sh --------------
log "building the guest initramfs, the payload disk and the dom0 image"
G=$OUT/domu-initrd
rm -rf "$G"; mkdir -p "$G"/{bin,proc,sys,dev,tmp,usr/bin}
cp "$C/rootfs/bin/busybox" "$G/bin/busybox"
copy_mods "$G/lib/mods" xen-blkfront
cp -L "$C/rootfs/usr/bin/fio" "$G/usr/bin/fio"
[ $COUNT = 0 ] || cp "$XBD_MARK" "$G/bin/xbd-mark"
a64_libs "$C/rootfs" "$G" "$G/usr/bin/fio" $([ $COUNT = 0 ] || echo "$G/bin/xbd-mark")
install -m 0755 "$HERE/domu-init.sh" "$G/init"

# ---- payload disk (/opt/xbd in dom0) ----------------------------------------------
P=$OUT/payload
rm -rf "$P"; mkdir -p "$P"/{bin,domu,logs,harness/lib,harness/steps}
mkcpio "$G" "$P/domu/initrd.gz"
cp "$C/x/Image" "$P/domu/vmlinuz"
cp "$C/x/xen.config" "$P/xen.config" 2>/dev/null
head -c 64 /dev/urandom >"$P/entropy"
payload_modules "$P/modroot"
install -m 0755 "$HERE/dom0-init.sh" "$P/init"
install -m 0644 "$HERE"/lib/*.sh "$P/harness/lib/"
install -m 0644 "$HERE"/steps/*.sh "$P/harness/steps/"
install -m 0644 "$HERE"/../backup/disk-quiet.py "$P/harness/"   # step backup's quiet disk
install -m 0755 "$HOTPLUG" "$P/xbd-hotplug"
# the programs link only libraries dom0's root has (A64_PKGS)
install -m 0755 "$B/blkback/xbd-back" "$B/xbdctl/xbdctl" "$B/blkfront/xbd-front" "$P/bin/"
[ $COUNT = 0 ] || install -m 0755 "$XBD_MARK" "$P/bin/xbd-mark"
rm -f "$OUT/payload.img"
truncate -s $(( $(du -sm "$P" | cut -f1) + 200 ))M "$OUT/payload.img"
mkfs.ext4 -q -F -L xbd -d "$P" "$OUT/payload.img" || die "mkfs.ext4 of the payload failed"

# ---- stage-1 initramfs: virtio and ext4, the root and the payload by label -------
S=$OUT/boot-initrd
rm -rf "$S"; mkdir -p "$S"/{bin,proc,sys,dev,newroot}
cp "$C/rootfs/bin/busybox" "$S/bin/busybox"
copy_mods "$S/mods" virtio_mmio virtio_blk ext4
cat >"$S/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
for m in $(cat /mods/order); do insmod /mods/$m; done
# virtio-mmio disks come in no fixed order: each by its filesystem's label
i=0; while ! findfs LABEL=xbd >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
mount -t ext4 "$(findfs LABEL=dom0)" /newroot || { echo "STAGE1: cannot mount the disk labelled dom0"; exec sh; }
mkdir -p /newroot/opt/xbd
mount -t ext4 "$(findfs LABEL=xbd)" /newroot/opt/xbd || { echo "STAGE1: cannot mount the disk labelled xbd"; exec sh; }
umount /proc /sys; umount /dev
exec switch_root /newroot /opt/xbd/init
INIT
chmod +x "$S/init"
# uncompressed: the kernel unpacks it at once under TCG
(cd "$S" && find . | cpio -o -H newc --quiet) >"$OUT/boot-initrd.cpio"

# ---- dom0's images ------------------------------------------------------------------
dom0_images

[ "${BOOT:-1}" != 0 ] || { log "BOOT=0: images built in $OUT, not booting"; exit 0; }

# ---- where Xen's code lies, for the counter ----------------------------------------------
# xen_range IMAGE: "START-END", the virtual addresses of the Xen image at
# EL2.  Xen links its image at XEN_VIRT_START, which moves between
# releases (xen/arch/arm/include/asm/config.h, later asm/mmu/layout.h:
# 0x200000 in Debian's 4.17, 0xa0000200000 (L0 slot 20) in its 4.20, slot
# 4's 0x20000200000 in the newest sources), and its arm64 Image header
# holds the image's size (text to bss, at byte 16).  Of the known starts, the one
# that the image's own absolute pointers (function tables, strings: a few
# thousand 8-byte words) point into; fewer than 1000 there means none fits.
xen_range() {
	python3 - "$1" <<'PY'
import struct, sys
img = open(sys.argv[1], "rb").read()
if img[56:60] != b"ARM\x64":
    sys.exit(1)
size = struct.unpack_from("<Q", img, 16)[0]
words = struct.unpack_from("<%dQ" % (len(img) // 8), img)
hits = {s: sum(s <= w < s + size for w in words) for s in (0x200000, 0xa0000200000, 0x20000200000)}
start = max(hits, key=hits.get)
if not size or hits[start] < 1000:
    sys.exit(1)
print("%#x-%#x" % (start, start + size))
PY
}

# ---- boot ----------------------------------------------------------------------------
serial_fresh
xenargs="console=dtuart dom0_mem=$DOM0_MEM,max:$DOM0_MEM dom0_max_vcpus=$DOM0_VCPUS loglvl=all guest_loglvl=all bootscrub=0${XEN_ARGS:+ $XEN_ARGS}"
dom0args="console=hvc0 earlycon=xenboot rw xbdt.steps=${STEPS// /+} xbdt.rt=$FIO_RUNTIME xbdt.mem=$DOMU_MEM"
[ -z "$XBD_ARGS" ] || dom0args="$dom0args xbdt.xbdargs=${XBD_ARGS// /+}"
dom0args="$dom0args xbdt.ilv-rounds=${ILV_ROUNDS:-3} xbdt.ilv-qdisk=${ILV_QDISK:-0} xbdt.xenver=$XENVER xbdt.config=$XEN_CONFIG"
if [ $COUNT = 1 ]; then
	XEN_RANGE=$(xen_range "$C/x/xen") || die "cannot tell where Xen's code lies in $C/x/xen (xen_range: no known XEN_VIRT_START fits its pointers)"
	log "counting instructions: Xen's code at $XEN_RANGE (EL2), dom0 on CPUs 0-$((DOM0_VCPUS - 1)), step count's guests on the rest"
fi
count_boot ${XEN_RANGE:+,xen=$XEN_RANGE}
dom0args="$dom0args xbdt.gtype=$GTYPE xbdt.lctype=$LCTYPE xbdt.lc-budget=$LC_BUDGET"
disks=() n=0
for img in "$OUT/dom0.img" "$OUT/payload.img" "$OUT/phy.img"; do
	disks+=(-drive "file=$img,format=raw,if=none,id=d$n,cache=unsafe" -device "virtio-blk-device,drive=d$n")
	n=$((n + 1))
done
log "booting Xen $XENVER in qemu-system-aarch64 (TCG, $ARM_CPU, $VM_CPUS CPUs), steps: $STEPS; serial log: $SERIAL"
t0=$(date +%s)
# guest-loader: dom0's kernel at 0x49000000 (at 0x47000000 a 32 MB Image
# overlaps the device tree QEMU puts below it, and Xen hits a BUG in
# page_alloc.c), its initramfs at 0x4c000000
timeout "$QEMU_TIMEOUT" qemu-system-aarch64 -accel tcg,thread=$TCG_THREAD "${plugin[@]}" \
	-machine virt,virtualization=on,gic-version=${ARM_GIC:-3} -cpu "$ARM_CPU" -m "$VM_MEM" -smp "$VM_CPUS" -no-reboot \
	-kernel "$C/x/xen" -append "$xenargs" \
	-device "guest-loader,addr=0x49000000,kernel=$C/x/Image,bootargs=$dom0args" \
	-device "guest-loader,addr=0x4c000000,initrd=$OUT/boot-initrd.cpio" \
	"${disks[@]}" \
	-nic none -display none -monitor none -serial "file:$SERIAL" &
QPID=$!
# the boot's stages as the host saw them (seconds from QEMU's start), for
# the report: Xen's banner, dom0's kernel, its stage-1 init, the runner,
# dom0 ready, the first guest created
( seen=
  while kill -0 $QPID 2>/dev/null; do
	for m in "Xen version:(XEN) Xen version" "dom0-kernel:Booting Linux on physical CPU" "dom0-init:Run /init as init process" \
		"runner:dom0 userspace up" "dom0-ready:XBDT-STEP dom0-ready" "guest-created:XBDT-STEP [a-z0-9-]*-create PASS"; do
		n=${m%%:*}
		case " $seen " in *" $n "*) continue ;; esac
		grep -aq "${m#*:}" "$SERIAL" && { echo "$n $(( $(date +%s) - t0 ))"; seen="$seen $n"; }
	done
	sleep 1
  done ) >"$OUT/stages.txt" 2>/dev/null &
xen_watch
echo "boot stages (s from QEMU's start): $(tr '\n' ' ' <"$OUT/stages.txt")"
xen_report
