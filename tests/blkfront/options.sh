#!/bin/sh
# xbd-front and the nbdkit plugin take the same device options with the
# same ranges and the same error messages (one table, blkfront/device-options.c,
# printed by tests/blkfront/front-options): every number is refused below
# its minimum, above its maximum and when not a number (or empty), by both, with
# "NAME: bad value 'V' (MIN..MAX)", and both take its minimum and maximum;
# a bad word for a choice gets the same allowed list from both; flags are
# --NAME to xbd-front and NAME=BOOL to the plugin.  And the help of each
# program lists exactly the table's options, and its man page each.
# Nothing attaches: each run ends with an unknown option after the ones
# under test, which both programs refuse only once they took the others.
. "$top_srcdir/tests/lib/xbd.sh"
[ -x "$XBD_FRONT" ] || skip "xbd-front is not built"
need_nbdkit
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-opt.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$WORK"' EXIT
"$top_builddir/tests/blkfront/front-options" >"$WORK/table" || fail "front-options failed"
[ -s "$WORK/table" ] || fail "the options table is empty"

# front ARGS: xbd-front info with ARGS, then an unknown option; its output
# in $WORK/out, its status in rc; end=the message of that unknown option
front() {
	rc=0
	end="unknown option --xbd-test-end"
	"$XBD_FRONT" info "$@" --xbd-test-end >"$WORK/out" 2>&1 || rc=$?
}
# plugin KEY=VALUE...: the same for nbdkit with the plugin
plugin() {
	rc=0
	end="unknown parameter 'xbd-test-end'"
	# shellcheck disable=SC2086 # NBDKIT_PRELOAD is a list of assignments
	env $NBDKIT_PRELOAD nbdkit -f -U - "$PLUGIN" "$@" xbd-test-end=1 \
		--run true >"$WORK/out" 2>&1 || rc=$?
}
says() {
	grep -qF -- "$1" "$WORK/out"
}
refused() { # WHO WHAT MESSAGE
	[ "$rc" -ne 0 ] && says "$3" || fail "$1 $2: not refused with '$3' (exit $rc): $(cat "$WORK/out")"
}
taken() { # WHO WHAT: it went on to the unknown option at the end
	says "$end" || fail "$1 $2 was refused: $(cat "$WORK/out")"
}

n=0
while read -r name kind min max where; do
	n=$((n + 1))
	case $kind in
	number)
		# an empty value is no number (strtol would read it as 0)
		for v in $((min - 1)) $((max + 1)) x ''; do
			front "--$name" "$v"
			[ "$rc" -eq 2 ] || fail "xbd-front --$name $v: exit $rc, not 2"
			refused xbd-front "--$name $v" "xbd-front: --$name: bad value '$v' ($min..$max)"
			plugin "$name=$v"
			refused plugin "$name=$v" "$name: bad value '$v' ($min..$max)"
		done
		for v in "$min" "$max"; do
			front "--$name" "$v"
			taken xbd-front "--$name $v"
			plugin "$name=$v"
			taken plugin "$name=$v"
		done
		;;
	choice)
		front "--$name" bogus
		[ "$rc" -eq 2 ] || fail "xbd-front --$name bogus: exit $rc, not 2"
		allowed=$(sed -n "s/^xbd-front: --$name: //p" "$WORK/out")
		[ -n "$allowed" ] || fail "xbd-front --$name bogus: no allowed list: $(cat "$WORK/out")"
		plugin "$name=bogus"
		refused plugin "$name=bogus" "$name: $allowed"
		;;
	string)
		front "--$name" xvdc
		taken xbd-front "--$name xvdc"
		plugin "$name=xvdc"
		taken plugin "$name=xvdc"
		;;
	flag)
		front "--$name"
		taken xbd-front "--$name"
		if [ "$where" = cli ]; then
			plugin "$name=true"
			refused plugin "$name=true" "unknown parameter '$name'"
		else
			plugin "$name=true"
			taken plugin "$name=true"
			plugin "$name=maybe"
			[ "$rc" -ne 0 ] || fail "plugin $name=maybe was taken"
		fi
		;;
	*) fail "unknown kind '$kind' of $name" ;;
	esac
	range=
	[ "$kind" = number ] && range=" $min..$max"
	echo "ok: $name ($kind$range, $where)"
done <"$WORK/table"
[ "$n" -ge 12 ] || fail "only $n options in the table"

# The help of each lists the table's options, no more, no fewer.
"$XBD_FRONT" --help | sed -n 's/^  --\([a-z-]*\).*/\1/p' | sort >"$WORK/help-front"
cut -d' ' -f1 "$WORK/table" | sort >"$WORK/want-front"
diff "$WORK/want-front" "$WORK/help-front" >&2 || fail "xbd-front --help lists other options than the table"
# shellcheck disable=SC2086
env $NBDKIT_PRELOAD nbdkit "$PLUGIN" --help 2>&1 | sed -n '/^vdev=/,$p' |
	grep -o '[a-z-]*=' | tr -d = | sort -u >"$WORK/help-plugin"
awk '$5 == "both" { print $1 }' "$WORK/table" | sort >"$WORK/want-plugin"
diff "$WORK/want-plugin" "$WORK/help-plugin" >&2 || fail "nbdkit xbd --help lists other keys than the table"
# and each man page documents each of its options
while read -r name kind min max where; do
	man=$(echo "$name" | sed 's/-/\\-/g')
	grep -qF -- "\\-\\-$man" "$top_srcdir/blkfront/xbd-front.1" ||
		fail "xbd-front.1 does not document --$name"
	[ "$where" = cli ] || grep -qF -- "$man=" "$top_srcdir/blkfront/nbdkit-xbd-plugin.1" ||
		fail "nbdkit-xbd-plugin.1 does not document $name="
done <"$WORK/table"
echo "ok: both programs' help and man page list the table's options"
exit 0
