#!/bin/sh
# The settings table is the one place a setting is named: every setting
# --help lists is a key --check-config prints and accepts back, is
# described in xbd-back.conf(5) and xbd-back(8), appears in the shipped
# xbd-back.conf, and (disk settings) in blkback/README.md's key list; the
# run-time ones (*) are exactly what xbdctl set is said to change, by the
# man pages and by xbdctl --help.  And a
# [disk] rule keeps the values it set, in order, whichever spelling.
: "${top_builddir:?}" "${top_srcdir:?}"
XBD_BACK="$top_builddir/blkback/xbd-back"
[ -x "$XBD_BACK" ] || { echo "SKIP: xbd-back not built" >&2; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/xbd-bk-table.XXXXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
unset XBD_BACK_CONFIG
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

"$XBD_BACK" --help >"$dir/help" || fail "--help"
# The settings section: from its heading to the blank line before "Other options".
sed -n '/^Settings/,/^$/p' "$dir/help" | grep -o '^  --[a-z-]*' | sed 's/^  --//' >"$dir/keys"
[ "$(wc -l <"$dir/keys")" -ge 15 ] || { cat "$dir/help"; fail "too few settings in --help"; }
for k in types cache fua-mode max-batch poll-max-ns grants barrier max-indirect-segs; do
	grep -qx "$k" "$dir/keys" || fail "--help does not list --$k"
done
"$XBD_BACK" --config /dev/null --check-config >"$dir/check" || fail "--check-config"
man5="$top_srcdir/blkback/installed/xbd-back.conf.5"
man8="$top_srcdir/blkback/installed/xbd-back.8"
conf="$top_srcdir/blkback/installed/xbd-back.conf"
readme="$top_srcdir/blkback/README.md"
while read -r k; do
	# An alias (grant-copy) is printed as the setting it spells.
	alias=$(grep -- "^  --$k " "$dir/help" | grep -o 'the same as --[a-z-]*' | sed 's/.*--//')
	shown=${alias:-$k}
	grep -q "^#\{0,1\}$shown = " "$dir/check" || fail "--check-config does not print '$shown'"
	# The man pages spell '-' as '\-' in places.
	pat=$(printf '%s' "$k" | sed 's/-/\\\\\\{0,1\\}-/g')
	grep -q "^\.B[IR]\{0,1\} $pat\b\|^\.BR .*$pat\|^\.B[IR]\{0,1\} \\\\-\\\\-$pat\b" "$man5" ||
		fail "xbd-back.conf(5) does not describe '$k'"
	grep -q "$pat" "$man8" || fail "xbd-back(8) does not mention --$k"
	grep -q "^#\{0,1\}$shown = " "$conf" || fail "the shipped xbd-back.conf has no '$shown'"
done <"$dir/keys"
# Disk settings: the README's list of per-disk keys has every one.
disk_keys=$(sed -n '/^Per-disk settings/,/^$/p' "$readme" | tr '\n' ' ')
[ -n "$disk_keys" ] || fail "no 'Per-disk settings' paragraph in blkback/README.md"
for k in cache fua-mode max-batch poll-max-ns poll-grow poll-shrink persistent grants \
	grant-copy barrier max-ring-order max-queues max-indirect-segs; do
	grep -qx "$k" "$dir/keys" || fail "--help lost disk setting --$k"
	printf '%s' "$disk_keys" | grep -q "[ (]$k[,)]" || fail "blkback/README.md does not list '$k'"
done

# What --check-config prints reads back as the same settings.
cat >"$dir/a.conf" <<EOC
types = vbd3
log-level = debug
max-batch = 7
fua-mode = fdatasync

[disk /srv/one.img]
grant-copy = 1
cache = unsafe
grants = map

[disk null:*]
poll-max-ns = 0
grant-copy = 1
EOC
"$XBD_BACK" --config "$dir/a.conf" --check-config >"$dir/round1" || fail "a.conf refused"
"$XBD_BACK" --config "$dir/round1" --check-config | sed 1d >"$dir/round2" ||
	fail "--check-config's output refused as a file"
sed 1d "$dir/round1" | cmp -s - "$dir/round2" || {
	diff "$dir/round1" "$dir/round2"
	fail "--check-config does not round-trip"
}
# A rule keeps what it set, the last spelling winning: grants = map after grant-copy = 1.
sed -n '/^\[disk \/srv\/one.img\]/,/^$/p' "$dir/round1" >"$dir/one"
grep -qx "grants = map" "$dir/one" || { cat "$dir/one"; fail "grants = map lost"; }
grep -qx "cache = unsafe" "$dir/one" || fail "cache = unsafe lost"
[ "$(grep -c ' = ' "$dir/one")" = 2 ] || { cat "$dir/one"; fail "rule shows settings it did not set"; }
sed -n '/^\[disk null:\*\]/,/^$/p' "$dir/round1" >"$dir/null"
grep -qx "grants = copy" "$dir/null" || { cat "$dir/null"; fail "grant-copy = 1 not shown as grants = copy"; }

# The run-time settings (*) are the ones xbd-back(8)/xbdctl(8) say set changes.
# An option whose help starts on the next line (a long name) is joined with it.
sed -n '/^Settings/,/^$/p' "$dir/help" | awk '
	/^  --/ { if (opt != "") print opt, txt; opt = $1; txt = $0; next }
	/^    / { txt = txt " " $0; next }
	END { if (opt != "") print opt, txt }' |
	grep '(\*)' | awk '{ sub(/^--/, "", $1); print $1 }' | sort >"$dir/runtime"
limits="bps-read bps-read-max bps-read-max-length bps-total bps-total-max bps-total-max-length"
limits="$limits bps-write bps-write-max bps-write-max-length iops-read iops-read-max"
limits="$limits iops-read-max-length iops-size iops-total iops-total-max iops-total-max-length"
limits="$limits iops-write iops-write-max iops-write-max-length"
want=$(printf '%s\n' $limits cbt cpu-weight io-weight max-batch poll-grow poll-max-ns poll-shrink | sort |
	tr '\n' ' ')
[ "$(tr '\n' ' ' <"$dir/runtime")" = "$want" ] ||
	fail "run-time settings: $(tr '\n' ' ' <"$dir/runtime")"
while read -r k; do
	grep -q "$k" "$top_srcdir/xbdctl/xbdctl.8" || fail "xbdctl(8) does not name $k"
done <"$dir/runtime"
# xbdctl --help's set names exactly those keys (made from the table at build time).
XBDCTL="$top_builddir/xbdctl/xbdctl"
if [ -x "$XBDCTL" ]; then
	"$XBDCTL" --help >"$dir/ctlhelp" || fail "xbdctl --help"
	sed -n '/^  set /,/^  version /p' "$dir/ctlhelp" | sed '$d' | tr '\n' ' ' | tr -s ' ' |
		sed 's/.*KEY is one of: *//' | tr ' ' '\n' | grep . | sort >"$dir/ctlkeys"
	cmp -s "$dir/runtime" "$dir/ctlkeys" || {
		diff "$dir/runtime" "$dir/ctlkeys"
		fail "xbdctl --help's set keys are not the table's run-time settings (diff above: < table, > help)"
	}
fi
echo "settings table: $(wc -l <"$dir/keys") settings, each in --help, --check-config, the man pages and xbd-back.conf"
exit 0
