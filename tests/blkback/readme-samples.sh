#!/bin/sh
# README.md's sample outputs are what the programs print: its scenario
# ("Check that xbd-back serves it": guest "guest", domain 5, xvdb of 8 GiB
# read-write at /srv/guest.img, connected with two rings and persistent
# grants) run on the simulator, and each sample compared with the real
# output: `xbdctl list`'s table line for line (the image's path the only
# difference allowed), the backend's state in xenstore, and the log line
# that names the device.  A sample edited by hand, or a program changed
# without its sample, fails here: rerun, and paste what it prints.
. "$top_srcdir/tests/lib/xbd.sh"
bk_setup blkback/xbd-back blkfront/xbd-front xbdctl/xbdctl
README=$top_srcdir/README.md

# sample CMD: the lines README.md shows under "    # CMD", up to the next "    # " line.
sample() {
	awk -v cmd="    # $1" '$0 == cmd { on = 1; next } on && /^    # / { exit } on { print }' "$README" |
		sed 's/^    //'
}

# compare WHAT EXPECTED-FILE REAL-FILE
compare() {
	if ! diff -u "$2" "$3" >"$WORK/diff"; then
		cat "$WORK/diff"
		bk_fail "README.md's sample of $1 is not what it prints (- README, + real): update README.md"
	fi
	echo "README.md's $1: as printed"
}

list_cmd='xbdctl list'
sample "$list_cmd" >"$WORK/list.readme"
[ -s "$WORK/list.readme" ] || bk_fail "README.md has no sample under '# $list_cmd'"

dom=5
"$XBD_SIM" domain create "$SIMDIR" $dom --name guest >/dev/null || fail "xbd-sim domain create $dom"
new_disk "$WORK/guest.img" 8G
devid=$(add_disk $dom xvdb "$WORK/guest.img")
start_back_ctl --types vbd
wait_state $dom "$devid" 2
"$ASDOM" $dom "$XBD_FRONT" bench --vdev xvdb --queues 2 --rw randread --iodepth 1 --runtime 5 \
	>"$WORK/bench.out" 2>&1 &
bench=$!
sim_on_exit "kill $bench"
wait_state $dom "$devid" 4

ctl list | sed "s|$WORK/guest.img|/srv/guest.img|" >"$WORK/list.real" || bk_fail "$list_cmd failed"
compare "$list_cmd" "$WORK/list.readme" "$WORK/list.real"

# The xenstore sample, less its notes in parentheses and the hotplug
# script's node (no hotplug script runs on the simulator).
xs_cmd=$(grep -o '# xenstore-ls -f /local/domain/0/backend/vbd/5/51728 .*' "$README" | sed 's/^# //')
[ -n "$xs_cmd" ] || bk_fail "README.md has no xenstore-ls sample"
sample "$xs_cmd" | grep -v hotplug-status | sed 's/  *(.*)$//' >"$WORK/xs.readme"
[ -s "$WORK/xs.readme" ] || bk_fail "README.md has no sample under '# $xs_cmd'"
xs ls -f "/local/domain/0/backend/vbd/$dom/$devid" |
	grep -E '/(state|hotplug-status|feature-persistent) ' |
	sed 's|^/local/domain/0/backend/vbd/5/51728/|.../|' >"$WORK/xs.real"
grep -v '^\.\.\./feature-persistent ' "$WORK/xs.real" >"$WORK/xs.shown"
compare "xenstore-ls" "$WORK/xs.readme" "$WORK/xs.shown"

# The log line quoted under journalctl: its text up to the "...".
line=$(sed -n 's/.*# journalctl -u xbd-back  *(every line names the device: "\(.*\)\.\.\.").*/\1/p' "$README")
[ -n "$line" ] || bk_fail "README.md quotes no log line under journalctl -u xbd-back"
grep -qF "$line" "$LOG" || bk_fail "README.md's log line '$line...' is not in xbd-back's log"
echo "README.md's log line: '$line...' is in the log"

wait $bench || { cat "$WORK/bench.out"; bk_fail "xbd-front bench failed"; }
exit 0
