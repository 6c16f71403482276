#!/bin/sh
# tests/sim/start-stop.sh: `xbd-sim start` brings up a host whose xenstore
# dom0 can use (with the Domain-0 basics xen-init-dom0 writes), `env`
# prints the variables that make a process act as a domain, and `stop`
# takes the daemon and every file down again.
. "$top_srcdir/tests/lib/sim.sh"

sim_start
dir=$SIMDIR
tmp=$(mktemp -d) || fail "mktemp"
sim_on_exit "rm -rf '$tmp'"

[ -S "$dir/xenstore/socket" ] || fail "no dom0 socket $dir/xenstore/socket"
pid=$(cat "$dir/xenstore/xenstored.pid") || fail "no pid file"
kill -0 "$pid" || fail "xbd-xenstored (pid $pid) is not running"

sim_env 0
[ "$XBD_SIM_DIR" = "$dir" ] || fail "XBD_SIM_DIR=$XBD_SIM_DIR, want $dir"
[ "$XBD_SIM_DOMID" = 0 ] || fail "XBD_SIM_DOMID=$XBD_SIM_DOMID, want 0"
[ "$XENSTORED_PATH" = "$dir/xenstore/socket" ] || fail "XENSTORED_PATH=$XENSTORED_PATH"
[ "$(xenstore-read /local/domain/0/name)" = Domain-0 ] || fail "dom0 name"
[ "$(xenstore-read /local/domain/0/domid)" = 0 ] || fail "dom0 domid"

# env output is shell that survives odd characters (it is eval'ed).
"$XBD_SIM" env "$dir" 0 >"$tmp/env" || fail "env failed"
[ "$(grep -c '^export ' "$tmp/env")" = 3 ] || fail "env: want 3 export lines: $(cat "$tmp/env")"

# A relative DIR is made absolute.
(cd "$(dirname "$dir")" && "$XBD_SIM" env "$(basename "$dir")" 0) >"$tmp/env2" ||
	fail "env with a relative DIR failed"
cmp -s "$tmp/env" "$tmp/env2" || fail "env differs for a relative DIR"

# A domU's env points at its own socket.
domid=$("$XBD_SIM" domain create "$dir") || fail "domain create"
sim_env "$domid"
[ "$XENSTORED_PATH" = "$dir/xenstore/domain/$domid.sock" ] ||
	fail "XENSTORED_PATH=$XENSTORED_PATH for domain $domid"
[ "$(xenstore-read domid)" = "$domid" ] || fail "domain $domid does not see its own home"
sim_env 0

# The directory is taken now.
if "$XBD_SIM" start "$dir" 2>"$tmp/err"; then fail "second start on $dir succeeded"; fi
grep -q "not empty" "$tmp/err" || fail "second start: $(cat "$tmp/err")"

"$XBD_SIM" stop "$dir" || fail "stop failed"
# Gone, or a zombie waiting for init to reap it (xbd-sim never was its parent).
sim_wait_for 5 sh -c "! kill -0 $pid 2>/dev/null || grep -q '^State:.*Z' /proc/$pid/status" ||
	fail "xbd-xenstored $pid still running"
[ ! -e "$dir" ] || fail "$dir left behind: $(ls -R "$dir")"
SIMDIR=

# Nothing to stop any more.
if "$XBD_SIM" stop "$dir" 2>"$tmp/err"; then fail "stop of a stopped host succeeded"; fi
grep -q "no simulated host" "$tmp/err" || fail "stop again: $(cat "$tmp/err")"
exit 0
