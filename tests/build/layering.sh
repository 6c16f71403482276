#!/bin/sh
# tests/build/layering.sh: the layers of xbd-back's tree, read from the
# #include lines (blkback/README.md says what each folder is).  Below
# the daemon's control plane (control/) and its worker processes
# (workers/) sit the data path (datapath/), the storage engines
# (engines/) and the settings (settings/); log/ is what every layer
# shares; export/ is the nbdkit plugin that exports a point-in-time view,
# a program of its own above the engines and the data path's file
# format (datapath/cbt-format.h).  A lower layer never includes a higher one; the control plane
# sees a ring only through datapath/dataplane.h (ring-impl.h is what the
# ways of serving a ring share, ring-thread.h private to datapath/) and
# the workers only through workers/workers.h, and workers/ reports back
# through what it was handed, never including control/.  Every C file of
# blkback/ is in a layer's folder; xbdctl/ (the control socket's client)
# includes nothing of xbd-back's (the control protocol's header is the
# top-level common/'s, which both programs include); the libraries
# include no program; and nothing of the product reaches into the
# simulator (sim/) but platform/, through the header made for it
# (sim/hypervisor.h).  Each broken rule is one line naming the file, the
# line, what it includes and the rule.
#
# The checker first runs on a made-up tree that breaks every rule once,
# each by one include, and holds each include a rule lets through: it
# must name every broken rule and none of those.  A checker that finds
# nothing there could not fail.
: "${top_srcdir:?}"

# RULES: "WHO INCLUDES-NOTHING-OF why", both shell patterns on paths from the top.
RULES='
blkback/datapath/* blkback/control/* the data path does not reach into the control plane
blkback/datapath/* blkback/workers/* the data path does not know whether a worker serves it
blkback/engines/* blkback/control/* an engine knows a disk and its settings, not the control plane
blkback/engines/* blkback/workers/* an engine knows a disk and its settings, not the process model
blkback/engines/* blkback/datapath/* an engine sits below the data path that calls it
blkback/workers/* blkback/control/* the workers report back through what they were handed, they see no device of the control plane
blkback/workers/* blkback/datapath/ring-thread.h the ring proxy is one way of serving a ring (ring-impl.h), the thread here another
blkback/control/* blkback/datapath/ring-impl.h the control plane sees a ring only as dataplane.h shows it
blkback/control/* blkback/datapath/ring-thread.h the control plane sees a ring only as dataplane.h shows it
blkback/control/* blkback/workers/* the control plane reaches the workers through workers.h only
blkback/export/* blkback/control/* the export is a program of its own: it reads the view files and the disk, not the daemon
blkback/export/* blkback/workers/* the export is a program of its own: it reads the view files and the disk, not the daemon
blkback/export/* blkback/datapath/ring-*.h the export reads the files the data path writes, never a ring
blkback/control/* blkback/export/* nothing of the daemon includes the export plugin
blkback/datapath/* blkback/export/* nothing of the daemon includes the export plugin
blkback/settings/* blkback/control/* the settings are read by the control plane, not the reverse
blkback/settings/* blkback/workers/* the settings do not know the process model
blkback/settings/* blkback/engines/* the settings do not know the engines
blkback/settings/* blkback/datapath/* the settings sit below the data path that reads them
blkback/log/* blkback/control/* what every layer shares includes no higher layer
blkback/log/* blkback/workers/* what every layer shares includes no higher layer
blkback/log/* blkback/datapath/* what every layer shares includes no higher layer
blkback/log/* blkback/engines/* what every layer shares includes no higher layer
blkback/log/* blkback/settings/* what every layer shares includes no higher layer
blkback/* xbdctl/* xbd-back does not include its client
blkback/* blkfront/* xbd-back and the frontend share only the libraries
blkfront/* blkback/* xbd-back and the frontend share only the libraries
xbdctl/* blkback/* xbdctl shares with xbd-back only common/control-protocol.h
ring/* blkback/* a library includes no program
ring/* xbdctl/* a library includes no program
ring/* blkfront/* a library includes no program
platform/* blkback/* a library includes no program
platform/* xbdctl/* a library includes no program
platform/* blkfront/* a library includes no program
xenstore/* blkback/* a library includes no program
xenstore/* xbdctl/* a library includes no program
xenstore/* blkfront/* a library includes no program
blkback/* sim/* the product reaches the simulator only through platform/
blkfront/* sim/* the product reaches the simulator only through platform/
xbdctl/* sim/* the product reaches the simulator only through platform/
ring/* sim/* the product reaches the simulator only through platform/
xenstore/* sim/* the product reaches the simulator only through platform/
platform/* sim/* platform/ reaches the simulator through sim/hypervisor.h, the header made for it
'
# Includes a rule lets through: "WHO INCLUDED".
ALLOWED='
blkback/control/* blkback/workers/workers.h
platform/* sim/hypervisor.h
'
# The folders a C file of blkback/ may be in.
LAYERS='log settings control datapath engines workers export'

# check ROOT: prints one line per broken rule; exits 1 when there is one.
check() {
	root=$1
	bad=0
	files=$(cd "$root" && find blkback blkfront xbdctl ring platform xenstore \
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

# instance PATTERN SUFFIX: a path the pattern matches, its '*' made "made-up" SUFFIX.
instance() {
	case $1 in
	*'*'*) printf '%s\n' "$1" | sed "s/\*/made-up$2/" ;;
	*) printf '%s\n' "$1" ;;
	esac
}

# made_up TABLE: into the made-up tree, for each line "WHO INCLUDED ...",
# a file WHO matches that includes a file INCLUDED matches.
made_up() {
	echo "$1" | while read -r who what why; do
		[ -n "$who" ] || continue
		f=$(instance "$who" .c)
		mkdir -p "$tmp/bad/$(dirname "$f")"
		printf '#include "%s"\n' "$(instance "$what" .h)" >>"$tmp/bad/$f"
	done
}

# The made-up tree: every rule broken once, every include a rule lets through.
made_up "$RULES"
made_up "$ALLOWED"
if check "$tmp/bad" >"$tmp/bad.out"; then
	echo "FAIL: the checker found nothing in a tree that breaks every rule"
	exit 1
fi
missed=$(echo "$RULES" | while read -r who what why; do
	[ -n "$who" ] || continue
	f=$(instance "$who" .c)
	grep -F -- "$f:" "$tmp/bad.out" | grep -F -q -- ": includes $(instance "$what" .h): $why" ||
		echo "  $who including $what: $why"
done)
if [ -n "$missed" ]; then
	echo "FAIL: the checker did not name these broken rules:"; echo "$missed"
	echo "what it said:"; cat "$tmp/bad.out"; exit 1
fi
refused=$(echo "$ALLOWED" | while read -r who what; do
	[ -n "$who" ] || continue
	grep -F -- "$(instance "$who" .c):" "$tmp/bad.out" | grep -F -- ": includes $what:"
done)
if [ -n "$refused" ]; then
	echo "FAIL: the checker refused an include the rules allow:"; echo "$refused"; exit 1
fi
nrules=$(echo "$RULES" | grep -c .)

if ! check "$top_srcdir" >"$tmp/real.out"; then
	echo "FAIL: includes across the layers:"
	cat "$tmp/real.out"
	exit 1
fi
n=$(cd "$top_srcdir" && find blkback blkfront xbdctl ring platform xenstore -name '*.[ch]' | wc -l)
echo "layering: $nrules rules, each seen broken on a made-up tree; $n C files of the product, no include across them"
exit 0
