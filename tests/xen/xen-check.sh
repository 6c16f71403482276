#!/bin/bash
# xen-check.sh: `make check-xen`.  Boots real Xen 4.17 with a Debian 12 PV
# dom0 inside QEMU (TCG) and, in that one boot, runs xbd-back against stock
# Linux xen-blkfront guests created from xl configs, the same fio jobs
# against kernel xen-blkback and QEMU qdisk, and xbd-front against kernel
# blkback (the steps are in dom0-init.sh).  Prints a results table; exits 0
# when every step passed, 1 when one failed, 77 when QEMU cannot run here.
#
# Adapted from the team's recipe ../shared/xen-in-qemu/xen-in-qemu.sh: the
# same cached stages in $WORK (kernel + hypervisor .debs, debootstrap'd dom0
# rootfs with xen-utils, fio and qemu-system-xen), which this script only
# reads.  Its own files go to $WORK/xbd-check: a dom0 image made from the
# rootfs, a second "payload" disk (our binaries, the hotplug script, kernel
# modules, the guest kernel + initramfs, dom0-init.sh; dom0 writes its logs
# back to it), and the stage-1 initramfs that mounts both.
#
# Env: WORK (/var/tmp/xen-in-qemu)  BUILDDIR (the build tree with xbd-back)
#      STEPS ("xbd mq nopoll hotplug destroy qdisk blkback front")
#      FIO_RUNTIME (10)  QEMU_TIMEOUT (1800)  VM_MEM (3072)  VM_CPUS (2)
#      DOM0_MEM (1024M)  DOMU_MEM (512)  CPU (qemu64)
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${WORK:-/var/tmp/xen-in-qemu}
OUT=$WORK/xbd-check
BUILDDIR=${BUILDDIR:-${top_builddir:-$PWD}}
STEPS=${STEPS:-xbd mq nopoll hotplug destroy qdisk blkback front}
FIO_RUNTIME=${FIO_RUNTIME:-10}
QEMU_TIMEOUT=${QEMU_TIMEOUT:-1800}
VM_MEM=${VM_MEM:-3072}
VM_CPUS=${VM_CPUS:-2}
DOM0_MEM=${DOM0_MEM:-1024M}
DOMU_MEM=${DOMU_MEM:-512}
CPU=${CPU:-qemu64}
XENVER=4.17

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
skip() { log "SKIP: $*"; exit 77; }
host_mirror() {
	{ sed -n 's/^URIs: *\([^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null
	  awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2 }' /etc/apt/sources.list 2>/dev/null; } | head -1
}

[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot and mkfs of the dom0 image)"

# ---- host packages -----------------------------------------------------------
HOSTPKGS="qemu-system-x86 busybox-static debootstrap e2fsprogs cpio kmod file"
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

XBD_BACK=$BUILDDIR/blkback/xbd-back
XBD_FRONT=$BUILDDIR/blkfront/xbd-front
PLUGIN=$BUILDDIR/blkfront/.libs/nbdkit-xbd-plugin.so
HOTPLUG=$HERE/../../blkback/xbd-hotplug
[ -x "$XBD_BACK" ] || die "no $XBD_BACK: build it first (make blkback/xbd-back), or set BUILDDIR"
[ -f "$HOTPLUG" ] || die "no $HOTPLUG"

# ---- cached stages shared with xen-in-qemu.sh (same layout in $WORK) ---------
mkdir -p "$WORK" "$OUT"
if [ ! -e "$WORK/x/.done" ]; then
	log "downloading the kernel and hypervisor packages"
	rm -rf "$WORK/debs" "$WORK/x"; mkdir -p "$WORK/debs" "$WORK/x/kernel" "$WORK/x/xen"
	apt-get update -q >/dev/null
	kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	[ -n "$kpkg" ] || die "cannot resolve linux-image-amd64"
	(cd "$WORK/debs" && apt-get download -q "$kpkg" xen-hypervisor-$XENVER-amd64 >/dev/null 2>&1) ||
		die "apt-get download failed"
	dpkg-deb -x "$WORK"/debs/linux-image-*.deb "$WORK/x/kernel"
	dpkg-deb -x "$WORK"/debs/xen-hypervisor-*.deb "$WORK/x/xen"
	gunzip -c "$WORK/x/xen/boot/xen-$XENVER-amd64.gz" >"$WORK/x/xen.elf"
	cp "$WORK"/x/kernel/boot/vmlinuz-* "$WORK/x/vmlinuz"
	basename "$WORK"/x/kernel/lib/modules/* >"$WORK/x/kver"
	depmod -b "$WORK/x/kernel" "$(cat "$WORK/x/kver")"
	touch "$WORK/x/.done"
fi
KV=$(cat "$WORK/x/kver")
if [ ! -e "$WORK/rootfs/.done" ]; then
	log "debootstrap bookworm (minbase + xen-utils + fio), about a minute"
	rm -rf "$WORK/rootfs"
	debootstrap --variant=minbase \
		--include=xen-utils-$XENVER,xen-utils-common,xenstore-utils,fio,kmod,util-linux,iproute2,procps,libaio1 \
		bookworm "$WORK/rootfs" "$(host_mirror)" >"$WORK/debootstrap.log" 2>&1 ||
		die "debootstrap failed, see $WORK/debootstrap.log"
	rm -f "$WORK"/rootfs/var/cache/apt/archives/*.deb
	touch "$WORK/rootfs/.done"
fi
if [ ! -e "$WORK/rootfs/.qdisk" ]; then
	log "installing qemu-system-xen (the qdisk backend) into the dom0 rootfs"
	cp /etc/resolv.conf "$WORK/rootfs/etc/resolv.conf" 2>/dev/null
	chroot "$WORK/rootfs" apt-get update -q >/dev/null 2>&1
	DEBIAN_FRONTEND=noninteractive chroot "$WORK/rootfs" apt-get install -y -q \
		--no-install-recommends qemu-system-xen >"$WORK/qdisk-install.log" 2>&1 ||
		die "qemu-system-xen install failed, see $WORK/qdisk-install.log"
	chroot "$WORK/rootfs" apt-get clean
	touch "$WORK/rootfs/.qdisk"
fi

copy_mods() {  # DST MODULE...: modules + dependencies in load order, names in DST/order
	local dst=$1 m f; shift
	mkdir -p "$dst"
	for m in "$@"; do
		modprobe -d "$WORK/x/kernel" -S "$KV" --show-depends "$m" | awk '$1 == "insmod" { print $2 }' |
		while read -r f; do
			grep -qx "$(basename "$f")" "$dst/order" 2>/dev/null && continue
			cp "$f" "$dst/"; basename "$f" >>"$dst/order"
		done
	done
}
mkcpio() { (cd "$1" && find . | cpio -o -H newc --quiet | gzip -1) >"$2"; }
# host_libs DSTLIB BIN...: the shared libraries BIN needs that dom0's rootfs lacks
host_libs() {
	local dst=$1 l; shift
	mkdir -p "$dst"
	ldd "$@" 2>/dev/null | awk '/=> \// { print $3 }' | sort -u | while read -r l; do
		[ -e "$WORK/rootfs$l" ] || [ -e "$WORK/rootfs/usr$l" ] || cp -L "$l" "$dst/"
	done
}

# ---- guest initramfs: busybox + fio + xen-blkfront + domu-init.sh ----------------
log "building the guest initramfs, the payload disk and the dom0 image"
G=$OUT/domu-initrd
rm -rf "$G"; mkdir -p "$G"/{bin,proc,sys,dev,tmp,lib/mods}
cp /bin/busybox "$G/bin/busybox"
copy_mods "$G/lib/mods" xen-blkfront
mkdir -p "$G/usr/bin"; cp -L "$WORK/rootfs/usr/bin/fio" "$G/usr/bin/fio"
chroot "$WORK/rootfs" ldd /usr/bin/fio | awk '/=>/ { print $3 } /^[ \t]*\/lib64/ { print $1 }' |
while read -r l; do
	[ -n "$l" ] || continue
	mkdir -p "$G/$(dirname "$l")"; cp -L "$WORK/rootfs$l" "$G$l"
done
install -m 0755 "$HERE/domu-init.sh" "$G/init"

# ---- payload disk (/opt/xbd in dom0) ----------------------------------------------
P=$OUT/payload
rm -rf "$P"; mkdir -p "$P"/{bin,lib,domu,logs,modroot/lib/modules/$KV/kernel}
mkcpio "$G" "$P/domu/initrd.gz"
cp "$WORK/x/vmlinuz" "$P/domu/vmlinuz"
for sub in arch crypto lib fs block drivers/block drivers/xen drivers/virtio drivers/md drivers/char; do
	[ -d "$WORK/x/kernel/lib/modules/$KV/kernel/$sub" ] || continue
	mkdir -p "$P/modroot/lib/modules/$KV/kernel/$(dirname $sub)"
	cp -a "$WORK/x/kernel/lib/modules/$KV/kernel/$sub" "$P/modroot/lib/modules/$KV/kernel/$sub"
done
cp "$WORK"/x/kernel/lib/modules/"$KV"/modules.{order,builtin,builtin.modinfo} "$P/modroot/lib/modules/$KV/" 2>/dev/null
depmod -b "$P/modroot" "$KV" || die "depmod failed"
install -m 0755 "$HERE/dom0-init.sh" "$P/init"
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
if [ -f "$PLUGIN" ] && command -v nbdkit >/dev/null; then
	wrap nbdkit "$(command -v nbdkit)"
	cp -L "$PLUGIN" "$P/nbdkit-xbd-plugin.so"
	host_libs "$P/lib" "$PLUGIN"
fi
rm -f "$OUT/payload.img"
truncate -s $(( $(du -sm "$P" | cut -f1) + 200 ))M "$OUT/payload.img"
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
truncate -s $(( $(du -sm "$WORK/rootfs" | cut -f1) + 1200 ))M "$OUT/dom0.img"
mkfs.ext4 -q -F -L dom0 -d "$WORK/rootfs" "$OUT/dom0.img" || die "mkfs.ext4 of the dom0 image failed"

# ---- boot ------------------------------------------------------------------------
SERIAL=$OUT/serial.log
[ -s "$SERIAL" ] && mv "$SERIAL" "$OUT/serial.prev.log"
: >"$SERIAL"
xenargs="console=com1 com1=115200,8n1 dom0_mem=$DOM0_MEM,max:$DOM0_MEM dom0_max_vcpus=$VM_CPUS loglvl=all guest_loglvl=all"
dom0args="console=hvc0 earlyprintk=xen root=/dev/vda rw xbdt.steps=${STEPS// /+} xbdt.rt=$FIO_RUNTIME xbdt.mem=$DOMU_MEM"
log "booting Xen in QEMU (TCG), steps: $STEPS; serial log: $SERIAL"
t0=$(date +%s)
timeout "$QEMU_TIMEOUT" qemu-system-x86_64 -accel tcg,thread=multi -cpu "$CPU" -machine pc \
	-m "$VM_MEM" -smp "$VM_CPUS" -no-reboot \
	-kernel "$WORK/x/xen.elf" -append "$xenargs" \
	-initrd "$WORK/x/vmlinuz $dom0args,$OUT/boot-initrd.gz" \
	-drive "file=$OUT/dom0.img,format=raw,if=virtio,cache=unsafe" \
	-drive "file=$OUT/payload.img,format=raw,if=virtio,cache=unsafe" \
	-nic none -display none -monitor none -serial "file:$SERIAL" &
QPID=$!
trap 'kill $QPID 2>/dev/null' EXIT INT TERM
seen=
while kill -0 $QPID 2>/dev/null; do
	new=$(tr -d '\r' <"$SERIAL" | grep -a -E '^XBDT-STEP' | sed -n "$(( $(echo "$seen" | grep -c .) + 1 )),\$p")
	[ -n "$new" ] && { echo "$new" | sed "s/^/[$(date +%T)] /" >&2; seen=$(printf '%s\n%s' "$seen" "$new"); }
	grep -qa 'XBDT-DONE' "$SERIAL" && { sleep 5; break; }
	if grep -qa -E 'Kernel panic|Panic on CPU|FATAL TRAP|STAGE1: cannot|Dom0 crashed' "$SERIAL"; then
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
echo "==== make check-xen: Xen $XENVER in QEMU/TCG, ${secs}s; serial log $SERIAL, dom0 logs $OUT/logs ===="
echo "$S" | grep -a '^XBDT-STEP' | awk '{ $1 = ""; sub(/^ /, ""); n = $1; s = $2; $1 = $2 = ""; sub(/^ +/, ""); printf "%-24s %-4s %s\n", n, s, $0 }'
echo
echo "fio in the guest (/dev/xvdb, libaio, direct=1; ${FIO_RUNTIME}s per time-based job; verify = 64 MiB written"
echo "at QD8 in 64k blocks, then read back and checked with crc32c).  CPU = dom0 CPU seconds (user+sys) from"
echo "the job's start to its end: be = the backend's own tasks (xbd-back; blkback.* kthreads + loop workers;"
echo "QEMU), dom0 = all of dom0 (/proc/stat without steal).  us/IO = CPU microseconds per guest I/O;"
echo "'vs bb' = dom0 us/IO relative to kernel blkback in the same run and job."
printf '%-8s %-6s %-10s %6s %7s %-6s %6s %6s %7s %8s %6s\n' backend run job IOPS 'MiB/s' verify be-s dom0-s be-us/IO dom0-us/IO 'vs bb'
echo "$S" | grep -a '^XBDT-RESULT' | awk '
{ delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
  r = f["run"] == "std" ? 1 : f["run"] == "nopoll" ? 2 : f["run"] == "mq" ? 3 : 4
  j = f["job"] == "verify" ? 1 : f["job"] == "rand4k" ? 2 : f["job"] == "seq128k" ? 3 : 4
  b = f["backend"] == "xbd" ? 1 : f["backend"] == "blkback" ? 2 : 3
  run = f["run"] == "nopoll" ? "std" : f["run"]
  if (f["backend"] == "blkback") bb[run "/" f["job"]] = f["dus"]
  line[NR] = sprintf("%d%d%d %s %s %s %s %s %s %s %s %s %s %s %s", r, j, b, f["backend"] (f["run"] == "nopoll" ? "*" : ""),
    f["run"], f["job"], f["iops"], f["bw_kib"] / 1024, f["verify"], f["bcpu"], f["dcpu"], f["bus"], f["dus"], run "/" f["job"], f["rc"])
}
END { for (i in line) print line[i] }' | sort | awk -v bbs="$(echo "$S" | grep -a '^XBDT-RESULT backend=blkback' | sed 's/.* run=\([^ ]*\) job=\([^ ]*\) .* dus=\([0-9]*\).*/\1\/\2=\3/' | tr '\n' ' ')" '
BEGIN { n = split(bbs, a, " "); for (i = 1; i <= n; i++) { split(a[i], kv, "="); bb[kv[1]] = kv[2] } }
{ rel = ($12 in bb) && bb[$12] > 0 && $3 != "front" ? sprintf("%.2f", $11 / bb[$12]) : "-"
  printf "%-8s %-6s %-10s %6s %7.1f %-6s %6s %6s %7s %8s %6s%s\n", $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, rel, $13 == 0 ? "" : "  rc=" $13 }'
echo "(xbd* = xbd-back restarted with --poll-max-ns 0; run mq = 2 vCPUs, 2 queues, 16-page rings, 256 indirect segments)"
echo
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
echo "PASS"
exit 0
