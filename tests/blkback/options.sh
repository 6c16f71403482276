#!/bin/sh
# xbd-back: every bad option value is refused with exit status 2 and one
# line naming the option, the value and what is allowed.
: "${top_builddir:?}"
XBD_BACK="$top_builddir/blkback/xbd-back"
[ -x "$XBD_BACK" ] || { echo "SKIP: xbd-back not built" >&2; exit 77; }
out=$(mktemp "${TMPDIR:-/tmp}/xbd-bk-opt.XXXXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
# bad TEXT ARGS...: xbd-back ARGS must exit 2 with one line containing TEXT.
bad() {
	_text=$1
	shift
	"$XBD_BACK" "$@" 2>"$out" && { echo "FAIL: xbd-back $* accepted" >&2; exit 1; }
	rc=$?
	[ $rc = 2 ] || { echo "FAIL: xbd-back $* exited $rc, not 2" >&2; exit 1; }
	[ "$(wc -l <"$out")" = 1 ] || { echo "FAIL: xbd-back $* printed:" >&2; cat "$out" >&2; exit 1; }
	grep -q -- "$_text" "$out" || { echo "FAIL: xbd-back $* did not say '$_text':" >&2; cat "$out" >&2; exit 1; }
	cat "$out"
}
bad "'-1' for --max-batch: an integer from 0 to 4096" --max-batch -1
bad "'12x' for --max-batch" --max-batch 12x
bad "'fast' for --cache: writeback, writethrough or unsafe" --cache fast
bad "'vbd,qdisk' for --types" --types vbd,qdisk
bad "'kvm' for --platform: auto, xen or sim" --platform kvm
bad "'2' for --persistent: 0 or 1" --persistent 2
bad "'5' for --max-ring-order: an integer from 0 to 4" --max-ring-order 5
bad "'0' for --max-queues" --max-queues 0
bad "'8' for --max-indirect-segs" --max-indirect-segs 8
bad "'abc' for --poll-max-ns" --poll-max-ns abc
bad "'/srv/a.img' for --disk" --disk /srv/a.img
bad "'fast' for --cache" --disk /srv/a.img:cache=fast
bad "unknown disk setting 'colour'" --disk /srv/a.img:colour=blue
"$XBD_BACK" --help | grep -q -- "--max-batch" || { echo "FAIL: --help" >&2; exit 1; }
exit 0
