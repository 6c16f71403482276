#!/bin/sh
# A disk's params as xbdctl shows them: the toolstack's string, shown as
# data.  A secret in it (key=, password=, secret=: refused by the engines,
# since xenstore is no place for one) is hidden as the log hides it, in the
# table, stats, the JSON and the Prometheus labels alike; a byte that is not
# printable text (a newline, an escape sequence) is escaped in the tables,
# so that a disk stays one line of the list and cannot drive the terminal.
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"

A=$(new_domain --name web1)
new_disk "$WORK/a.img" 4M
a=$(add_disk "$A" xvdb "$WORK/a.img")
b=$(add_disk "$A" xvdc "rbd:rbd/img:key=AQBsecretsecret==")
c=$(add_disk "$A" xvdd "$WORK/a.img")
# What a toolstack could write: a newline and an escape sequence (ESC [2J
# clears a terminal) in a path that does not exist.
esc=$(printf '\033')
cparams=$(printf '%s/x\nnew%s[2Jcls' "$WORK" "$esc")
xs write "/local/domain/0/backend/vbd/$A/$c/params" "$cparams"
start_back_ctl --types vbd
wait_state "$A" "$a" 2
both_failed() {
	[ "$(ctl list | grep -c "^vbd/$A/[0-9]*: \(refused\|its storage did not open\)")" -ge 2 ]
}
sim_wait_for 20 both_failed || { ctl list; bk_fail "the two bad params did not fail to open"; }

for what in "list" "stats" "list --json" "stats --json" "stats --format prometheus"; do
	ctl $what >"$WORK/out" || bk_fail "xbdctl $what failed"
	if grep -q "AQBsecret" "$WORK/out"; then
		grep "AQBsecret" "$WORK/out"
		bk_fail "xbdctl $what shows the secret in params"
	fi
	# (Prometheus's text format is read by machines and keeps every UTF-8
	# byte of a label but the newline, which domain-name.sh checks.)
	case $what in
	*prometheus) echo "xbdctl $what: no secret"; continue ;;
	esac
	if grep -q "$esc" "$WORK/out"; then
		bk_fail "xbdctl $what writes params' escape byte to the terminal"
	fi
	echo "xbdctl $what: no secret, no escape byte"
done

ctl list >"$WORK/list" || bk_fail "xbdctl list"
cat "$WORK/list"
[ "$(wc -l <"$WORK/list")" -ge 4 ] || bk_fail "the table lost a disk"
grep -q "^vbd/$A/$a .* $WORK/a.img\$" "$WORK/list" || bk_fail "a plain path is not shown as it is"
grep -q "^vbd/$A/$b .* rbd:rbd/img:key=\*\*\*\$" "$WORK/list" || bk_fail "the secret is not shown as ***"
grep -qF "vbd/$A/$c " "$WORK/list" || bk_fail "vbd/$A/$c is not listed"
grep -F "vbd/$A/$c " "$WORK/list" | grep -qF '/x\x0anew\x1b[2Jcls' ||
	bk_fail "the newline and escape byte are not shown escaped"
lines=$(grep -c "^vbd/$A/[0-9]* " "$WORK/list")
[ "$lines" = 3 ] || bk_fail "$lines lines for 3 disks: a params broke the table"
echo "list: one line a disk, the secret as ***, the control bytes as \\xNN"

[ "$(ctl list --json "$A/$a" | jq -r '.devices[0].params')" = "$WORK/a.img" ] ||
	bk_fail "JSON: a plain params does not read back"
[ "$(ctl list --json "$A/$c" | jq -r '.devices[0].params')" = "$cparams" ] ||
	bk_fail "JSON: params with a newline does not read back as written"
[ "$(ctl list --json "$A/$b" | jq -r '.devices[0].params')" = "rbd:rbd/img:key=***" ] ||
	bk_fail "JSON: the secret is not hidden"
echo "JSON: params as written, but for the secret"
bk_done
