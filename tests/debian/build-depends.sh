#!/bin/sh
# tests/debian/build-depends.sh: debian/control's Build-Depends name
# every Debian package configure.ac requires ("install the Debian package
# X", and XBD_NEED_PKG's third argument), outside build profiles (a clean build chroot installs only those:
# make check-packages builds there), and the optional libraries the
# packages are meant to have (liburing, libsystemd, nbdkit's plugin API);
# xbd-back Suggests librbd1, which it loads for RBD disks.  Quick: it
# reads the two files (the clean-chroot build is make check-packages).
: "${top_srcdir:?}"
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
control=$top_srcdir/debian/control
[ -f "$control" ] || fail "no debian/control"
# The Build-Depends field, one package a line, without versions, without
# alternatives' second halves, without those limited to a build profile.
sed -n '/^Build-Depends:/,/^[A-Z][A-Za-z-]*:/p' "$control" | sed '$d' |
	sed 's/^Build-Depends://' | tr ',' '\n' | grep -v '<' |
	sed 's/(.*)//; s/|.*//; s/^[[:space:]]*//; s/[[:space:]]*$//' | grep . | sort -u >"${TMPDIR:-/tmp}/bd.$$"
trap 'rm -f "${TMPDIR:-/tmp}/bd.$$"' EXIT
need=$( (grep -o 'install the Debian package [a-z0-9.+-]*' "$top_srcdir/configure.ac" |
	sed 's/.* //'
	sed -n 's/^XBD_NEED_PKG(\[[^]]*\], *\[[^]]*\], *\[\([a-z0-9.+-]*\)\]).*/\1/p' \
		"$top_srcdir/configure.ac") | sort -u)
[ -n "$need" ] || fail "configure.ac names no Debian package"
for p in $need liburing-dev libsystemd-dev nbdkit-plugin-dev debhelper-compat; do
	grep -qx "$p" "${TMPDIR:-/tmp}/bd.$$" ||
		fail "debian/control's Build-Depends lack $p (configure needs it; a clean chroot would not build)"
done
echo "Build-Depends has every package configure requires: $(echo $need)"
sed -n '/^Package: xbd-back$/,/^$/p' "$control" | grep -q '^Suggests:.*\blibrbd1\b' ||
	fail "xbd-back does not Suggest librbd1 (loaded at run time for rbd: disks)"
exit 0
