#!/bin/sh
# The README's first command: on a fresh Debian 12 machine (as root) it
# installs what xbd needs (scripts/install-deps.sh), builds xbd in
# _build/demo (no sanitizers), and runs the demo (`make demo`,
# tests/e2e/demo.sh): a simulated Xen host, xbd-back serving a disk image
# to a guest, the guest's disk exported over NBD by `nbdkit xbd`, fio on it,
# fio's figures next to xbd-back's counters, and everything stopped.
#
# BUILD_DIR (default: _build/demo) may be set.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/_build/demo}
jobs=$(nproc 2>/dev/null || echo 2)

"$top/scripts/install-deps.sh" || exit 1

echo "demo: building xbd in $build (log: $build/build.log)"
mkdir -p "$build" || exit 1
log="$build/build.log"
: >"$log"
build_failed() {
	echo "demo: the build failed; the end of $log:" >&2
	tail -n 30 "$log" >&2
	exit 1
}
if [ ! -x "$top/configure" ]; then
	(cd "$top" && ./autogen.sh) >>"$log" 2>&1 || build_failed
fi
cd "$build" || exit 1
if [ ! -f Makefile ]; then
	"$top/configure" -q >>"$log" 2>&1 || build_failed
fi
t0=$(date +%s)
make -j"$jobs" >>"$log" 2>&1 || build_failed
echo "demo: built in $(( $(date +%s) - t0 )) s"
echo
exec make -s demo
