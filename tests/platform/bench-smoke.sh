#!/bin/sh
# bench-smoke: the platform micro-benchmark runs and prints its figures
# (a few iterations only: this checks that it works, not how fast).
bench="$top_builddir/tests/platform/bench-platform"
[ -x "$bench" ] || { echo "bench-platform not built" >&2; exit 99; }
out=$("$bench" -n 50) || { echo "$out"; echo "bench-platform failed" >&2; exit 1; }
echo "$out"
for what in "map+unmap 32 refs" "grant copy 32" "notify, peer idle"; do
	echo "$out" | grep -q "$what.* ns" || { echo "missing figure: $what" >&2; exit 1; }
done
exit 0
