#!/bin/sh
# tools.sh: Debian's xenstore-* tools (xenstore-utils) against xbd-xenstored,
# as dom0 and as a guest: write, read, ls, list, rm, exists, chmod, watch;
# permission denials; @releaseDomain; the guest's socket going away.
set -u
. "${top_srcdir:-.}/tests/xenstored/lib.sh"

for t in xenstore-read xenstore-write xenstore-ls xenstore-list xenstore-rm \
	 xenstore-exists xenstore-chmod xenstore-watch; do
	command -v "$t" >/dev/null 2>&1 || skip "$t not installed (xenstore-utils)"
done
[ -x "$XSD_CTL" ] || skip "xsd-ctl not built"

xsd_start

# wait_for FILE LINES: until FILE has LINES lines (2 s at most).
wait_for() {
	i=0
	while [ "$(wc -l < "$1" 2>/dev/null || echo 0)" -lt "$2" ] &&
	      [ $i -lt 40 ]; do
		sleep 0.05; i=$((i + 1))
	done
}

# watch_start OUT ARGS...: xenstore-watch in the background, once its first
# (initial) event is out.
watch_start() {
	out=$1; shift
	: > "$out"
	xenstore-watch "$@" > "$out" &
	WATCH_PID=$!
	wait_for "$out" 1
}

# watch_end: the watcher must exit by itself (-n count reached).
watch_end() {
	i=0
	while kill -0 "$WATCH_PID" 2>/dev/null && [ $i -lt 40 ]; do
		sleep 0.05; i=$((i + 1))
	done
	if kill -0 "$WATCH_PID" 2>/dev/null; then
		kill "$WATCH_PID"
		echo "FAIL: xenstore-watch did not see all its events" >&2
		XSD_FAILED=$((XSD_FAILED + 1))
	fi
	wait "$WATCH_PID" 2>/dev/null
}

# ---- dom0 ----
as_dom 0
check "write two pairs" xenstore-write /a/b v1 /a/c "value two"
expect_eq "read" "$(xenstore-read /a/b)" "v1"
expect_eq "read two paths" "$(xenstore-read /a/b /a/c)" "v1
value two"
expect_eq "list" "$(xenstore-list /a)" "b
c"
expect_eq "ls" "$(xenstore-ls /a)" 'b = "v1"
c = "value two"'
check "exists" xenstore-exists /a/b
check "exists fails for an absent node" sh -c '! xenstore-exists /a/zz'
check "read fails for an absent node" sh -c '! xenstore-read /a/zz 2>/dev/null'
check "rm" xenstore-rm /a/b
check "rm'd node is gone" sh -c '! xenstore-exists /a/b'
check "chmod" xenstore-chmod /a/c b0 r5
check "ls -p shows the permissions" sh -c 'xenstore-ls -p /a | grep -q "(b0,r5)"'
check "chmod -r" xenstore-chmod -r /a n0
check "recursive chmod applied" sh -c 'xenstore-ls -p /a | grep -q "(n0)"'
check "rm subtree" xenstore-rm /a
check "subtree gone" sh -c '! xenstore-exists /a/c'
check "rm -t tidies empty parents" sh -c \
	'xenstore-write /tidy/x/y 1 && xenstore-rm -t /tidy/x/y && ! xenstore-exists /tidy'
check "ls /" sh -c 'xenstore-ls / | grep -q "^tool = "'

# Watches: the initial event, then a change below.
watch_start "$XSD_TMP/w1" -n 2 /w
check "write below watch" xenstore-write /w/x 1
watch_end
expect_eq "watch events" "$(cat "$XSD_TMP/w1")" "/w
/w/x"

# ---- a guest, domain 5 ----
check "make domain 5" "$XSD_CTL" mkdomain 5
check "domain socket" test -S "$XSDIR/domain/5.sock"
check "dom0 name" xenstore-write /local/domain/0/name Domain-0
as_dom 5
check "guest relative write" xenstore-write data/x 1
expect_eq "guest relative read" "$(xenstore-read data/x)" "1"
expect_eq "guest reads its domid" "$(xenstore-read /local/domain/5/domid)" "5"
expect_eq "guest ls of its home" "$(xenstore-ls /local/domain/5/data)" 'x = "1"'
check "guest cannot read dom0's nodes" sh -c '! xenstore-read /local/domain/0/name 2>/dev/null'
check "guest cannot write dom0's nodes" sh -c '! xenstore-write /local/domain/0/x 1 2>/dev/null'
check "guest cannot write its read-only home" sh -c '! xenstore-write /local/domain/5/domid 9 2>/dev/null'
check "guest cannot list /local/domain/0" sh -c '! xenstore-list /local/domain/0 >/dev/null 2>&1'
check "guest cannot rm dom0's nodes" sh -c '! xenstore-rm /local/domain/0/name 2>/dev/null'
check "guest chmod of its node" xenstore-chmod data/x n5 r0
as_dom 0
check "dom0 sees guest's write" sh -c '[ "$(xenstore-read /local/domain/5/data/x)" = 1 ]'
check "guest owns its node" sh -c 'xenstore-ls -p /local/domain/5/data | grep -q "(n5,r0)"'

# A guest's relative watch reports relative paths.
as_dom 5
watch_start "$XSD_TMP/w2" -n 2 data
as_dom 0
check "dom0 writes into guest data" xenstore-write /local/domain/5/data/y 2
watch_end
expect_eq "relative watch events" "$(cat "$XSD_TMP/w2")" "data
data/y"
as_dom 5
check "guest rm" xenstore-rm data/x
check "guest's node gone" sh -c '! xenstore-exists data/x'

# @releaseDomain reaches dom0; the guest's socket goes away.
as_dom 0
watch_start "$XSD_TMP/w3" -n 2 @releaseDomain
check "release 5" "$XSD_CTL" release 5
watch_end
expect_eq "@releaseDomain events" "$(cat "$XSD_TMP/w3")" "@releaseDomain
@releaseDomain"
check "domain socket removed" test ! -e "$XSDIR/domain/5.sock"
as_dom 5
check "released guest cannot talk" sh -c '! xenstore-read domid 2>/dev/null'

as_dom 0
check "daemon still answers" xenstore-exists /local/domain/5
xsd_finish
