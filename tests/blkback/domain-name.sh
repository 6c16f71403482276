#!/bin/sh
# A disk's domain by name, not only by id (the id changes at every reboot
# and migration; the name is what xl list shows): xbdctl list's DOMAIN
# column, the JSON's domain_name and a domain_name label on every series
# of stats --format prometheus, with the id kept beside it.  A name that
# is not plain text (a quote, a backslash, a newline: the toolstack's to
# write, but shown as data) is escaped in each, the table's line stays one
# line, and a domain without a name shows "-" (null, "").
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"

A=$(new_domain --name web1)
B=$(new_domain)
C=$(new_domain --name placeholder)
# What a toolstack could write (xbd-sim's --name is plainer): db"2\, a
# newline, x (xenstore-write reads \\ as one backslash).
xs write "/local/domain/$C/name" "$(printf 'db"2\\\\\nx')"
xs rm "/local/domain/$B/name"
for d in a b c; do
	new_disk "$WORK/$d.img" 4M
done
a=$(add_disk "$A" xvdb "$WORK/a.img")
b=$(add_disk "$B" xvdb "$WORK/b.img")
c=$(add_disk "$C" xvdb "$WORK/c.img")
start_back_ctl --types vbd
for d in "$A $a" "$B $b" "$C $c"; do
	wait_state $d 2
done

ctl list >"$WORK/list" || bk_fail "xbdctl list"
cat "$WORK/list"
head -1 "$WORK/list" | grep -q "^DEVICE  *DOMAIN  *STATE " || bk_fail "no DOMAIN column after DEVICE"
grep -q "^vbd/$A/$a  *web1  *InitWait " "$WORK/list" || bk_fail "vbd/$A/$a: not shown as web1's"
grep -q "^vbd/$B/$b  *-  *InitWait " "$WORK/list" || bk_fail "vbd/$B/$b: a domain without a name is not '-'"
grep "^vbd/$C/$c " "$WORK/list" | grep -qF ' db"2\x5c\x0ax ' || bk_fail "vbd/$C/$c: the name is not escaped"
[ "$(wc -l <"$WORK/list")" = 4 ] || bk_fail "the table is not one line a disk"
echo "xbdctl list: a DOMAIN column, '-' without a name, escaped"

json() {
	ctl list --json "$1/$2" | jq -r '.devices[0] | "\(.domid) \(.domain_name)"'
}
[ "$(json "$A" "$a")" = "$A web1" ] || bk_fail "JSON: $(json "$A" "$a")"
[ "$(json "$B" "$b")" = "$B null" ] || bk_fail "JSON without a name: $(json "$B" "$b")"
[ "$(ctl list --json "$C/$c" | jq -r '.devices[0].domain_name')" = "$(printf 'db"2\\\nx')" ] ||
	bk_fail "JSON: the name does not read back"
echo "JSON: domain_name, null without a name, read back as written"

ctl stats --format prometheus >"$WORK/prom" || bk_fail "xbdctl stats --format prometheus"
for m in xbd_device_info xbd_device_size_bytes xbd_device_rings; do
	grep -q "^$m{domain=\"$A\",domain_name=\"web1\",device=\"vbd/$A/$a\"" "$WORK/prom" ||
		{ grep "^$m" "$WORK/prom"; bk_fail "$m: no domain_name label for web1"; }
	grep -q "^$m{domain=\"$B\",domain_name=\"\",device=\"vbd/$B/$b\"" "$WORK/prom" ||
		bk_fail "$m: the label is not empty without a name"
	grep -qF "$m{domain=\"$C\",domain_name=\"db\\\"2\\\\\\nx\",device=\"vbd/$C/$c\"" "$WORK/prom" ||
		{ grep "^$m" "$WORK/prom"; bk_fail "$m: the name is not escaped as the text format says"; }
done
if command -v promtool >/dev/null 2>&1; then
	promtool check metrics <"$WORK/prom" >"$WORK/promtool.out" 2>&1 ||
		{ cat "$WORK/promtool.out"; bk_fail "promtool rejects the output"; }
fi
echo "Prometheus: a domain_name label beside domain, escaped"

# Connected: the ring's series carry it too.
front_ok "$A" "$a" rw
ctl stats --format prometheus >"$WORK/prom" || bk_fail "xbdctl stats --format prometheus"
grep -q "^xbd_requests_total{domain=\"$A\",domain_name=\"web1\",device=\"vbd/$A/$a\",ring=\"0\"" "$WORK/prom" ||
	{ grep "^xbd_requests_total" "$WORK/prom"; bk_fail "a ring's series without domain_name"; }
ctl stats --by device --format prometheus >"$WORK/prom" || bk_fail "stats --by device"
grep -q "^xbd_requests_total{domain=\"$A\",domain_name=\"web1\",device=\"vbd/$A/$a\"[,}]" "$WORK/prom" ||
	bk_fail "a device's series without domain_name"
echo "the counters' series too, per ring and per device"
bk_done
