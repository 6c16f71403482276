#!/bin/sh
# What an operator meets first: every installed program answers --version
# and --help (exit 0, on stdout); xbdctl's usage errors exit 2 as
# xbdctl(8) says; xbd-back refuses a --config that names a directory,
# warns about a key given twice in one section naming both lines, and
# says off Xen what is missing and what to do; the man pages render
# without warnings, xbd-back(8)'s first paragraph with its words apart.
: "${top_builddir:?}" "${top_srcdir:?}"
B=$top_builddir
[ -x "$B/blkback/xbd-back" ] || { echo "SKIP: xbd-back not built" >&2; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/xbd-cli.XXXXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
unset XBD_BACK_CONFIG
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
version=$(sed -n 's/^PACKAGE_VERSION = //p' "$B/Makefile")
[ -n "$version" ] || fail "no PACKAGE_VERSION in the Makefile"

for p in blkback/xbd-back xbdctl/xbdctl blkfront/xbd-front sim/xbd-sim xenstore/xbd-xenstored; do
	[ -x "$B/$p" ] || continue
	n=${p##*/}
	"$B/$p" --version >"$dir/out" 2>"$dir/err" || fail "$n --version exits $?: $(cat "$dir/err")"
	[ "$(cat "$dir/out")" = "$n $version" ] || fail "$n --version printed '$(cat "$dir/out")'"
	"$B/$p" --help >"$dir/out" 2>"$dir/err" || fail "$n --help exits $?: $(cat "$dir/err")"
	grep -qi "usage" "$dir/out" || fail "$n --help printed no usage on stdout"
done

# xbdctl(8): 2 for a usage error (before any daemon is asked).
for args in "stats --format yaml" "--format yaml stats" "list --format prometheus" "frobnicate"; do
	# shellcheck disable=SC2086
	"$B/xbdctl/xbdctl" --socket "$dir/none.sock" $args >/dev/null 2>"$dir/err"
	rc=$?
	[ $rc = 2 ] || fail "xbdctl $args exits $rc, not 2: $(cat "$dir/err")"
done
grep -q "unknown format 'yaml'" "$dir/err" 2>/dev/null ||
	"$B/xbdctl/xbdctl" stats --format yaml 2>&1 | grep -q "unknown format 'yaml' (table, json, prometheus)" ||
	fail "xbdctl names no allowed formats"

# --config DIR: an error, exit 2, one line.
"$B/blkback/xbd-back" --config "$dir" --check-config >"$dir/out" 2>"$dir/err"
rc=$?
[ $rc = 2 ] || fail "--config naming a directory exits $rc (printed: $(head -2 "$dir/out"))"
[ "$(cat "$dir/err")" = "xbd-back: cannot read $dir: Is a directory" ] || fail "--config DIR says: $(cat "$dir/err")"

# A key given twice in one section: a warning naming both lines, the later value counts.
printf 'cache = unsafe\n\ncache = writethrough\n[disk /srv/a.img]\ndirect = 0\n# x\ndirect = 1\n[disk /srv/b.img]\ndirect = 0\n' >"$dir/twice.conf"
"$B/blkback/xbd-back" --config "$dir/twice.conf" --check-config >"$dir/out" 2>"$dir/err" ||
	fail "a key given twice is refused: $(cat "$dir/err")"
grep -qx "xbd-back: $dir/twice.conf:3: warning: 'cache' given again in the top section (first at line 1): the value of line 3 counts" "$dir/err" ||
	fail "no warning for cache given twice: $(cat "$dir/err")"
grep -qx "xbd-back: $dir/twice.conf:7: warning: 'direct' given again in \[disk /srv/a.img\] (first at line 5): the value of line 7 counts" "$dir/err" ||
	fail "no warning for direct given twice in [disk]: $(cat "$dir/err")"
[ "$(wc -l <"$dir/err")" = 2 ] || fail "other warnings: $(cat "$dir/err")"
grep -qx "cache = writethrough" "$dir/out" || fail "the later value did not count"

# Off Xen, without a simulator: what is missing and what to do.
if [ ! -e /dev/xen ]; then
	env -u XBD_SIM_DIR "$B/blkback/xbd-back" --config /dev/null --control none >/dev/null 2>"$dir/err"
	rc=$?
	[ $rc = 1 ] || fail "xbd-back off Xen exits $rc"
	grep -q "Sanitizer" "$dir/err" && fail "off Xen: $(grep -A3 Sanitizer "$dir/err")"
	grep -q "this is not a Xen domain (no /dev/xen) and XBD_SIM_DIR names no simulated host: run xbd-back in dom0" "$dir/err" ||
		fail "off Xen it says: $(cat "$dir/err")"
	env -u XBD_SIM_DIR "$B/blkback/xbd-back" --config /dev/null --control none --platform sim >/dev/null 2>"$dir/err"
	grep -q "platform sim needs XBD_SIM_DIR" "$dir/err" || fail "--platform sim without XBD_SIM_DIR says: $(cat "$dir/err")"
fi

# The man pages: no groff warnings; xbd-back(8) keeps its words apart.
if command -v man >/dev/null 2>&1 && command -v groff >/dev/null 2>&1; then
	for m in blkback/installed/xbd-back.8 xbdctl/xbdctl.8 blkback/installed/xbd-back.conf.5 blkfront/xbd-front.1 \
		blkfront/nbdkit-xbd-plugin.1 blkback/export/nbdkit-xbdview-plugin.1; do
		[ -f "$top_srcdir/$m" ] || fail "no man page $m"
		MANWIDTH=80 man --warnings -l "$top_srcdir/$m" >"$dir/page" 2>"$dir/warn"
		[ ! -s "$dir/warn" ] || fail "$m: $(head -3 "$dir/warn")"
	done
	MANWIDTH=200 man -l "$top_srcdir/blkback/installed/xbd-back.8" 2>/dev/null | tr -s ' \n' ' ' >"$dir/page"
	grep -q "xbd-back.conf(5)), advertises the blkif features" "$dir/page" ||
		fail "xbd-back(8)'s first paragraph runs words together: $(grep -o 'conf(5)),[^ ]* [^ ]*' "$dir/page")"
fi
exit 0
