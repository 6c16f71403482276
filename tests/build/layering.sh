#!/bin/sh
# tests/build/layering.sh: the layers of xbd-back's tree, read from the
# #include lines (blkback/README.md says what each folder is).  Below
# the daemon's control plane (control/) and its worker processes
# (workers/) sit the data path (datapath/), the storage engines
# (engines/) and the settings (settings/); log/ is what every layer
# shares.  A lower layer never includes a higher one (the worker process,
# workers/worker.*, is served by the data path and includes nothing of the
# control plane either), every C file of
# blkback/ is in a layer's folder, xbdctl/ (the control socket's client)
# includes nothing of xbd-back's (the control protocol's header is the
# top-level common/'s, which both programs include), and the
# libraries include neither program.  Each broken rule is one line
# naming the file, the line, what it includes and the rule.
#
# The checker first runs on a small made-up tree that breaks one rule,
# and must find it: a checker that finds nothing there could not fail.
: "${top_srcdir:?}"

# RULES: "WHO INCLUDES-NOTHING-OF why", both shell patterns on paths from the top.
RULES='
blkback/datapath/* blkback/control/* the data path does not reach into the control plane
blkback/datapath/* blkback/workers/* the data path does not know whether a worker serves it
blkback/engines/* blkback/control/* an engine knows a disk and its settings, not the control plane
blkback/engines/* blkback/workers/* an engine knows a disk and its settings, not the process model
blkback/engines/* blkback/datapath/* an engine sits below the data path that calls it
blkback/workers/worker.* blkback/control/* a worker serves the disks its messages describe, it sees no device of the control plane
blkback/settings/* blkback/control/* the settings are read by the control plane, not the reverse
blkback/settings/* blkback/workers/* the settings do not know the process model
blkback/settings/* blkback/engines/* the settings do not know the engines
blkback/log/* blkback/control/* what every layer shares includes no higher layer
blkback/log/* blkback/workers/* what every layer shares includes no higher layer
blkback/* xbdctl/* xbd-back does not include its client
xbdctl/* blkback/* xbdctl shares with xbd-back only common/control-protocol.h
ring/* blkback/* a library includes no program
ring/* xbdctl/* a library includes no program
platform/* blkback/* a library includes no program
platform/* xbdctl/* a library includes no program
xenstore/* blkback/* a library includes no program
xenstore/* xbdctl/* a library includes no program
'
# Includes a rule lets through: "WHO INCLUDED".
ALLOWED='
'
# The folders a C file of blkback/ may be in.
LAYERS='log settings control datapath engines workers'

# check ROOT: prints one line per broken rule; exits 1 when there is one.
check() {
	root=$1
	bad=0
	files=$(cd "$root" && find blkback xbdctl ring platform xenstore \
		\( -name '*.c' -o -name '*.h' \) 2>/dev/null | LC_ALL=C sort)
	[ -n "$files" ] || { echo "no C files under $root"; return 1; }
	for f in $files; do
		case $f in
		blkback/*/*) layer=${f#blkback/}; layer=${layer%%/*}
			case " $LAYERS " in
			*" $layer "*) ;;
			*) echo "$f: blkback/$layer/ is not a layer ($LAYERS)"; bad=1 ;;
			esac ;;
		blkback/*) echo "$f: a C file of blkback/ belongs in a layer's folder ($LAYERS)"; bad=1 ;;
		esac
		# "LINE PATH" for every #include "PATH"; a path without a folder is the file's own folder's
		incs=$(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$root/$f" |
			sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/')
		[ -n "$incs" ] || continue
		echo "$incs" | while read -r line inc; do
			case $inc in
			*/*) ;;
			*) [ -f "$root/$(dirname "$f")/$inc" ] && inc=$(dirname "$f")/$inc ;;
			esac
			allowed=no
			echo "$ALLOWED" | { while read -r who what; do
				[ -n "$who" ] || continue
				# shellcheck disable=SC2254
				case $f in $who) case $inc in $what) exit 0 ;; esac ;; esac
			done; exit 1; } && allowed=yes
			[ $allowed = no ] || continue
			echo "$RULES" | while read -r who what why; do
				[ -n "$who" ] || continue
				# shellcheck disable=SC2254
				case $f in $who)
					case $inc in $what) echo "$f:$line: includes $inc: $why" ;; esac ;;
				esac
			done
		done
	done >"$out" 2>&1
	cat "$out"
	[ $bad = 0 ] && [ ! -s "$out" ]
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/xbd-layering.XXXXXXXX") || { echo "FAIL: mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out

# The made-up tree: one include the rules forbid, one they allow.
mkdir -p "$tmp/bad/blkback/datapath" "$tmp/bad/blkback/control" "$tmp/bad/xbdctl"
printf '#include "blkback/control/main.h"\n' >"$tmp/bad/blkback/datapath/ring.c"
printf '/* nothing */\n' >"$tmp/bad/blkback/control/main.h"
printf '#include "common/control-protocol.h"\n' >"$tmp/bad/xbdctl/ctl.c"
if check "$tmp/bad" >"$tmp/bad.out"; then
	echo "FAIL: the checker found nothing in a tree whose data path includes the control plane"
	exit 1
fi
grep -q '^blkback/datapath/ring.c:1: includes blkback/control/main.h: ' "$tmp/bad.out" || {
	echo "FAIL: the checker did not name the bad include:"; cat "$tmp/bad.out"; exit 1; }
if grep -q '^xbdctl/ctl.c' "$tmp/bad.out"; then
	echo "FAIL: the checker refused an include the rules allow:"; cat "$tmp/bad.out"; exit 1
fi

if ! check "$top_srcdir" >"$tmp/real.out"; then
	echo "FAIL: includes across the layers:"
	cat "$tmp/real.out"
	exit 1
fi
n=$(cd "$top_srcdir" && find blkback xbdctl -name '*.[ch]' | wc -l)
echo "layering: $n C files of blkback/ and xbdctl/ in their layers, no include across them"
exit 0
