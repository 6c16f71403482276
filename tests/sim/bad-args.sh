#!/bin/sh
# tests/sim/bad-args.sh: every xbd-sim command refuses bad input with one
# clear error line: exit 2 for usage errors (checked before touching the
# host), exit 1 for operations that fail; and nothing is changed.
. "$top_srcdir/tests/lib/sim.sh"

sim_start
sim_env 0
tmp=$(mktemp -d) || fail "mktemp"
sim_on_exit "rm -rf '$tmp'"
[ "$("$XBD_SIM" domain create "$SIMDIR")" = 1 ] || fail "domain create"
S=$SIMDIR
nohost=$tmp/nohost

# expect RC PATTERN ARGS...: run xbd-sim ARGS, want exit RC and one stderr line matching PATTERN.
expect() {
	_rc=$1 _pat=$2
	shift 2
	"$XBD_SIM" "$@" >"$tmp/out" 2>"$tmp/err"
	_got=$?
	[ "$_got" = "$_rc" ] || fail "xbd-sim $*: exit $_got, want $_rc ($(cat "$tmp/err"))"
	[ "$(wc -l <"$tmp/err")" = 1 ] || fail "xbd-sim $*: want one error line, got: $(cat "$tmp/err")"
	grep -q "^xbd-sim: .*$_pat" "$tmp/err" || fail "xbd-sim $*: '$(cat "$tmp/err")' lacks '$_pat'"
	[ ! -s "$tmp/out" ] || fail "xbd-sim $*: printed '$(cat "$tmp/out")' on stdout"
}

expect 2 "missing command"
expect 2 "unknown command" frobnicate
expect 2 "usage" start
expect 2 "usage" start "$S" extra
expect 2 "usage" stop
expect 2 "usage" env "$S"
expect 2 "DOMID 'x'" env "$S" x
expect 2 "DOMID '99999' out of range" env "$S" 99999
expect 2 "DOMID ' 1'" env "$S" " 1"
expect 2 "must not be empty" env "" 0
expect 1 "no domain 5" env "$S" 5
expect 1 "no simulated host" env "$nohost" 0

expect 2 "usage" domain
expect 2 "unknown domain command" domain explode "$S"
expect 2 "usage" domain create
expect 2 "DOMID '0' out of range" domain create "$S" 0
expect 2 "DOMID '0x5'" domain create "$S" 0x5
expect 2 "unknown option '--memory'" domain create "$S" --memory 5
expect 2 "needs a value" domain create "$S" --mem
expect 2 "--mem '0' out of range" domain create "$S" --mem 0
expect 2 "--mem 'lots'" domain create "$S" --mem lots
expect 2 "--name 'a/b'" domain create "$S" --name a/b
expect 2 "--name ''" domain create "$S" --name ""
expect 2 "usage" domain create "$S" 3 4
expect 1 "no simulated host" domain create "$nohost"
expect 2 "cannot be destroyed" domain destroy "$S" 0
expect 2 "usage" domain destroy "$S"
expect 1 "no domain 9" domain destroy "$S" 9
expect 2 "usage" domain list

expect 2 "usage" disk
expect 2 "unknown disk command" disk attach "$S"
expect 2 "usage" disk add "$S" 1 xvdb
expect 2 "VDEV 'xvd'" disk add "$S" 1 xvd /x
expect 2 "VDEV 'xvdb-1'" disk add "$S" 1 xvdb-1 /x
expect 2 "VDEV 'sdq'" disk add "$S" 1 sdq /x
expect 2 "VDEV '0'" disk add "$S" 1 0 /x
expect 2 "TARGET must not be empty" disk add "$S" 1 xvdb ""
expect 2 "--mode must be w, r or w!" disk add "$S" 1 xvdb /x --mode rw
expect 2 "--type must be vbd or vbd3" disk add "$S" 1 xvdb /x --type qdisk
expect 2 "--device-type must be disk or cdrom" disk add "$S" 1 xvdb /x --device-type floppy
expect 2 "--discard-enable must be 0 or 1" disk add "$S" 1 xvdb /x --discard-enable yes
expect 2 "--backend-domid 'dom0'" disk add "$S" 1 xvdb /x --backend-domid dom0
expect 2 "its own backend" disk add "$S" 1 xvdb /x --backend-domid 1
expect 2 "DOMID '0' out of range" disk add "$S" 0 xvdb /x
expect 1 "no domain 4" disk add "$S" 4 xvdb /x
expect 1 "no backend domain 3" disk add "$S" 1 xvdb /x --backend-domid 3
expect 2 "usage" disk remove "$S" 1
expect 2 "--timeout '-1'" disk remove "$S" 1 xvdb --timeout=-1
expect 2 "--timeout '5s'" disk remove "$S" 1 xvdb --timeout 5s
expect 2 "DEVID 'b'" disk remove "$S" 1 b
expect 1 "has no vbd 51728" disk remove "$S" 1 xvdb

# None of that left a disk or a domain behind.
if xenstore-read /local/domain/0/backend >/dev/null 2>&1; then fail "a backend was written"; fi
[ "$("$XBD_SIM" domain list "$S")" = "0 Domain-0
1 domU-1" ] || fail "domains changed: $("$XBD_SIM" domain list "$S")"

"$XBD_SIM" --help >"$tmp/out" || fail "--help failed"
grep -q "disk remove DIR DOMID DEVID" "$tmp/out" || fail "--help lacks disk remove"
exit 0
