# lib.sh: shell helpers for the xbd-xenstored tests (sourced).
#   xsd_start [daemon options]   private daemon in a mktemp folder; cleaned
#                                up at exit.  Sets XSDIR.
#   as_dom N                     talk to the daemon as domain N
#   fail MSG / skip MSG / check DESC CMD...

XSD_BIN="${top_builddir:-.}/xenstore/xbd-xenstored"
XSD_CTL="${top_builddir:-.}/tests/xenstored/xsd-ctl"
XSD_TMP=
XSD_FAILED=0

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }

xsd_cleanup() {
	if [ -n "$XSD_TMP" ]; then
		pid=$(cat "$XSD_TMP/pid" 2>/dev/null)
		if [ -n "$pid" ]; then
			kill "$pid" 2>/dev/null
			# Wait for it to go, so no process outlives the test.
			i=0
			while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
				sleep 0.1; i=$((i + 1))
			done
		fi
		rm -rf "$XSD_TMP"
	fi
}

xsd_start() {
	XSD_TMP=$(mktemp -d /tmp/xsd-sh.XXXXXX) || fail "mktemp"
	trap 'xsd_cleanup' EXIT
	trap 'exit 1' INT TERM
	XSDIR="$XSD_TMP/xs"
	"$XSD_BIN" --dir "$XSDIR" --daemon --pid-file "$XSD_TMP/pid" \
		--log "$XSD_TMP/log" "$@" || fail "cannot start $XSD_BIN"
}

as_dom() {
	if [ "$1" = 0 ]; then
		XENSTORED_PATH="$XSDIR/socket"
	else
		XENSTORED_PATH="$XSDIR/domain/$1.sock"
	fi
	export XENSTORED_PATH
}

# check DESC CMD...: runs CMD, counts a failure if it fails.
check() {
	desc=$1; shift
	if ! "$@"; then
		echo "FAIL: $desc" >&2
		XSD_FAILED=$((XSD_FAILED + 1))
	fi
}

# expect_eq DESC GOT WANT
expect_eq() {
	if [ "$2" != "$3" ]; then
		printf 'FAIL: %s\n  got:  %s\n  want: %s\n' "$1" "$2" "$3" >&2
		XSD_FAILED=$((XSD_FAILED + 1))
	fi
}

xsd_finish() {
	[ "$XSD_FAILED" -eq 0 ] || fail "$XSD_FAILED check(s) failed"
	exit 0
}
