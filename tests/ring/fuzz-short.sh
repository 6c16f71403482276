#!/bin/sh
# fuzz-short.sh: a short libFuzzer pass over the ring library (hostile ring
# contents, limits and ABI), as part of `make check`.  `make fuzz` runs the
# same target for longer.  Skips (77) where configure found no clang.
# FUZZ_SHORT_SECONDS overrides the time budget (default 10).

set -u
fuzzer="${top_builddir:?}/tests/ring/fuzz-ring"
seconds="${FUZZ_SHORT_SECONDS:-10}"

case "${CLANG:-no}" in
no | "")
	echo "SKIP: clang not found at configure time; no libFuzzer target"
	exit 77
	;;
esac
if [ ! -x "$fuzzer" ]; then
	echo "FAIL: $fuzzer was not built"
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/xbd-fuzz-ring.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/corpus"

# libFuzzer writes crash-* artifacts; keep them in the temp dir and show
# them in the log, since the directory goes away.
"$fuzzer" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
	-rss_limit_mb=1024 -print_final_stats=1 \
	-artifact_prefix="$tmp/" "$tmp/corpus" >"$tmp/out" 2>&1
rc=$?
tail -n 40 "$tmp/out"
if [ "$rc" -ne 0 ]; then
	for f in "$tmp"/crash-* "$tmp"/leak-* "$tmp"/timeout-* "$tmp"/oom-*; do
		[ -f "$f" ] || continue
		echo "artifact $(basename "$f") (hex):"
		od -An -tx1 -v "$f" | head -n 300
	done
	echo "FAIL: fuzz-ring exited with $rc"
	exit 1
fi
if ! grep -q 'Done [0-9]* runs' "$tmp/out"; then
	echo "FAIL: fuzz-ring did not report its runs"
	exit 1
fi
echo "PASS: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$tmp/out")"
exit 0
