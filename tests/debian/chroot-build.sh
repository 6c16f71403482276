#!/bin/sh
# tests/debian/chroot-build.sh SUITE...: the packages build in a clean
# Debian chroot (bookworm = Debian 12, trixie = Debian 13) that has only
# build-essential and what debian/control's Build-Depends name (apt-get
# build-dep on the source, with the nocheck profile as a package build on
# a buildd would have without tests), so that a missing build dependency
# fails here.  The chroot (debootstrap --variant=buildd from the Debian
# archive) is cached as /var/tmp/xbd-chroot-SUITE.tar.gz and unpacked
# fresh for every build; XBD_DEBIAN_MIRROR overrides the mirror.  Needs
# root and the network; `make check-packages` runs it for both suites.
. "$top_srcdir/tests/lib/sim.sh"

[ "$(id -u)" = 0 ] || skip "a chroot needs root"
command -v debootstrap >/dev/null 2>&1 || skip "debootstrap not installed (scripts/install-deps.sh)"
[ $# -gt 0 ] || set -- bookworm
MIRROR=${XBD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
WORK=$(mktemp -d /var/tmp/xbd-chroot.XXXXXXXX) || fail "mktemp failed"
# Never remove a tree with /dev bound into it: unmount first, and remove
# only what is on this file system.
sim_on_exit "umount -R '$WORK/root' 2>/dev/null; rm -rf --one-file-system '$WORK'"
# No simulated host here, so sim_start did not set the trap that runs that.
trap _sim_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The source as git sees it, or a release tarball's whole tree, as
# tests/debian/package.sh copies it.
mkdir "$WORK/src"
if git -C "$top_srcdir" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$top_srcdir" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) |
		tar -xf - -C "$WORK/src" || fail "cannot copy the source"
else
	(cd "$top_srcdir" && tar --exclude=./_build -cf - .) | tar -xf - -C "$WORK/src" ||
		fail "cannot copy the source"
fi

for suite in "$@"; do
	cache=/var/tmp/xbd-chroot-$suite.tar.gz
	if [ ! -s "$cache" ]; then
		echo "debootstrap $suite (once; cached as $cache)"
		rm -rf --one-file-system "$WORK/boot"
		debootstrap --variant=buildd "$suite" "$WORK/boot" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
			{ tail -20 "$WORK/debootstrap.log"; fail "debootstrap $suite failed"; }
		printf 'deb %s %s main\ndeb-src %s %s main\n' "$MIRROR" "$suite" "$MIRROR" "$suite" \
			>"$WORK/boot/etc/apt/sources.list"
		tar -C "$WORK/boot" -czf "$cache.tmp" . && mv "$cache.tmp" "$cache" || fail "cannot cache $cache"
		rm -rf --one-file-system "$WORK/boot"
	fi
	rm -rf --one-file-system "$WORK/root"
	mkdir "$WORK/root"
	tar -C "$WORK/root" -xzf "$cache" || fail "cannot unpack $cache"
	cp /etc/resolv.conf "$WORK/root/etc/resolv.conf"
	mount -t proc proc "$WORK/root/proc" && mount --bind /dev "$WORK/root/dev" &&
		mount --bind /dev/pts "$WORK/root/dev/pts" || fail "cannot mount /proc and /dev in the chroot"
	mkdir -p "$WORK/root/build"
	cp -a "$WORK/src" "$WORK/root/build/xbd"
	t0=$(date +%s)
	# Only what Build-Depends names (the nocheck profile: no test tools),
	# then the build with its short check skipped as nocheck says.
	chroot "$WORK/root" sh -ec '
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		cd /build/xbd
		apt-get build-dep -y -qq -P nocheck --no-install-recommends ./ >/dev/null
		DEB_BUILD_OPTIONS="nocheck parallel=2" DEB_BUILD_PROFILES=nocheck dpkg-buildpackage -us -uc -b
	' >"$WORK/build-$suite.log" 2>&1
	rc=$?
	umount "$WORK/root/dev/pts" "$WORK/root/dev" "$WORK/root/proc" ||
		fail "cannot unmount the chroot's /proc and /dev"
	if [ $rc != 0 ]; then
		tail -30 "$WORK/build-$suite.log"
		grep -h "^configure: error" "$WORK/root/build/xbd/_build/deb/config.log" 2>/dev/null
		fail "the packages do not build in a clean $suite chroot"
	fi
	echo "$suite: built in a clean chroot in $(($(date +%s) - t0)) s: $(cd "$WORK/root/build" && ls *.deb | tr '\n' ' ')"
done
exit 0
