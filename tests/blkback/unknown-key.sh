#!/bin/sh
# A misspelt key is called unknown and the nearest key is named, wherever
# a key is written: xbdctl set (where a known key that cannot change at
# run time is still said to be one), the configuration file's top and its
# [disk] sections, and --disk.  A name far from every key gets the list.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
start_back_ctl
wait_state "$dom" "$a" 2

# expect OUT TEXT: OUT (a file) holds TEXT, or fail naming both
expect() {
	grep -qF -- "$2" "$1" || { cat "$1"; bk_fail "expected: $2"; }
}
ctl set "vbd/$dom/$a" iops-totl=5 >"$WORK/o" 2>&1 && bk_fail "xbdctl set iops-totl=5 succeeded"
expect "$WORK/o" "unknown key 'iops-totl' (did you mean iops-total?)"
ctl set "vbd/$dom/$a" cache=unsafe >"$WORK/o" 2>&1 && bk_fail "xbdctl set cache=unsafe succeeded"
expect "$WORK/o" "'cache' cannot be changed at run time"
ctl set "vbd/$dom/$a" pollmaxns=0 >"$WORK/o" 2>&1 && bk_fail "xbdctl set pollmaxns=0 succeeded"
expect "$WORK/o" "unknown key 'pollmaxns' (did you mean poll-max-ns?)"
ctl set "vbd/$dom/$a" zzzzzz=1 >"$WORK/o" 2>&1 && bk_fail "xbdctl set zzzzzz=1 succeeded"
expect "$WORK/o" "unknown key 'zzzzzz' (allowed: max-batch,"
echo "xbdctl set: unknown keys named with the nearest one"

printf 'max-bach = 4\n' >"$WORK/top.conf"
"$XBD_BACK" --config "$WORK/top.conf" --check-config >/dev/null 2>"$WORK/o" && bk_fail "max-bach accepted"
expect "$WORK/o" "top.conf:1: unknown key 'max-bach' (did you mean max-batch?)"
printf '[disk /srv/*]\nbps-totl = 1\n' >"$WORK/disk.conf"
"$XBD_BACK" --config "$WORK/disk.conf" --check-config >/dev/null 2>"$WORK/o" && bk_fail "bps-totl accepted"
expect "$WORK/o" "disk.conf:2: unknown key 'bps-totl' in [disk /srv/*] (did you mean bps-total?)"
# A daemon setting in a [disk] section is a daemon setting, not an unknown key.
printf '[disk /srv/*]\nworkers = 0\n' >"$WORK/daemon.conf"
"$XBD_BACK" --config "$WORK/daemon.conf" --check-config >/dev/null 2>"$WORK/o" && bk_fail "workers in [disk] accepted"
expect "$WORK/o" "'workers' is a daemon setting, not allowed in [disk /srv/*]"
"$XBD_BACK" --config /dev/null --disk "/srv/a.img:cahce=unsafe" --check-config >/dev/null 2>"$WORK/o" &&
	bk_fail "--disk cahce=unsafe accepted"
expect "$WORK/o" "unknown disk setting 'cahce' (did you mean cache?)"
echo "configuration file and --disk: the same"
bk_done
