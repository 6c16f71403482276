#!/bin/sh
# Sizes and byte rates as people write them: 100M, 4k, 1G, 900G (powers of
# 1024, either case) wherever one is set: the configuration file's top and
# [disk] sections, --disk, the command line and xbdctl set, read back as
# bytes by --check-config and xbdctl; and the one line each for what is
# not a size (100MB, 1.5G, -1K, K, a suffix past the range).
. "$top_srcdir/tests/blkback/common.sh"

expect() {
	grep -qxF -- "$2" "$1" || { cat "$1"; bk_fail "expected the line: $2"; }
}
cat >"$WORK/a.conf" <<EOC
bps-total = 100M
iops-size = 4k

[disk /srv/*]
bps-read = 1M
bps-read-max = 1G
EOC
"$XBD_BACK" --config "$WORK/a.conf" --bps-write 900G --disk "/srv/b.img:bps-write=1K,bps-write-max=20m" \
	--check-config >"$WORK/check" 2>"$WORK/err" || { cat "$WORK/err"; bk_fail "suffixes refused"; }
expect "$WORK/check" "bps-total = 104857600"
expect "$WORK/check" "iops-size = 4096"
expect "$WORK/check" "bps-write = 966367641600"
expect "$WORK/check" "bps-read = 1048576"
expect "$WORK/check" "bps-read-max = 1073741824"
expect "$WORK/check" "bps-write = 1024"
expect "$WORK/check" "bps-write-max = 20971520"
echo "file, [disk], --disk and the command line take K, M, G, T"

for v in 100MB 1.5G -1K K 1000T 12Q 0x10 "5 M"; do
	printf 'bps-total = %s\n' "$v" >"$WORK/bad.conf"
	"$XBD_BACK" --config "$WORK/bad.conf" --check-config >/dev/null 2>"$WORK/err" &&
		bk_fail "bps-total = '$v' was accepted"
	[ "$(wc -l <"$WORK/err")" = 1 ] || { cat "$WORK/err"; bk_fail "'$v': not one line"; }
	grep -q "invalid value '$v' for bps-total: .*K, M, G or T" "$WORK/err" ||
		{ cat "$WORK/err"; bk_fail "'$v': the line does not say what a size is"; }
done
echo "what is not a size: one line each"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
start_back_ctl
wait_state "$dom" "$a" 2
ctl set "vbd/$dom/$a" bps-total=100M bps-read=512K >"$WORK/set" 2>&1 ||
	{ cat "$WORK/set"; bk_fail "xbdctl set bps-total=100M refused"; }
grep -q "bps-total=104857600" "$WORK/set" || { cat "$WORK/set"; bk_fail "xbdctl set: not 104857600"; }
grep -q "bps-read=524288" "$WORK/set" || { cat "$WORK/set"; bk_fail "xbdctl set: not 524288"; }
ctl set "vbd/$dom/$a" bps-total=100MB >"$WORK/set" 2>&1 && bk_fail "xbdctl set bps-total=100MB accepted"
grep -q "invalid value '100MB' for bps-total" "$WORK/set" || { cat "$WORK/set"; bk_fail "xbdctl set 100MB: no reason"; }
echo "xbdctl set takes them too"
bk_done
