#!/bin/sh
# tests/ring/arm64-barriers.sh: on arm64, the shared ring's code has the
# barriers a weakly ordered CPU needs (issue 46).  x86 keeps stores in
# order and loads in order, so there a missing barrier never shows; an
# emulator running on x86 (qemu-user, QEMU's TCG) inherits that order
# and cannot show it either.  What Arm needs is read from the code that
# runs there: ring/ cross-compiled with Debian's aarch64-linux-gnu-gcc at
# -O2, disassembled, and each function that touches a shared index
# checked for the instruction that orders it (ldar/ldapr: an acquire
# load; stlr: a release store; dmb ish: a full fence):
#   a consumer's producer-index load is an acquire, so that the entries
#     are read after it (xen/io/ring.h's rmb; backend: req_prod, frontend:
#     rsp_prod, and both when a side attaches);
#   a producer's index store is a release, so that the entries are
#     written before it (wmb), followed by a full fence before the peer's
#     event index is read (mb: else both ends can miss a notification);
#   a final check stores its event index, then a full fence, then loads
#     the producer index again (RING_FINAL_CHECK_FOR_*).
# Skips without the cross compiler.
. "$top_srcdir/tests/lib/sim.sh"

command -v aarch64-linux-gnu-gcc >/dev/null || skip "no aarch64-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu)"
command -v aarch64-linux-gnu-objdump >/dev/null || skip "no aarch64-linux-gnu-objdump (Debian: binutils-aarch64-linux-gnu)"
[ -f /usr/include/xen/io/blkif.h ] || skip "no /usr/include/xen (Debian: libxen-dev)"

dir=$(mktemp -d "${TMPDIR:-/tmp}/xbd-arm64b.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/inc" && ln -s /usr/include/xen "$dir/inc/xen"
for f in ring back front; do
	aarch64-linux-gnu-gcc -O2 -g0 -std=gnu11 -D_GNU_SOURCE -I"$top_srcdir" -I"$top_builddir" -I"$dir/inc" \
		-c -o "$dir/$f.o" "$top_srcdir/ring/$f.c" 2>"$dir/cc.log" ||
		fail "cross-compiling ring/$f.c: $(head -5 "$dir/cc.log")"
	aarch64-linux-gnu-objdump -d --no-show-raw-insn "$dir/$f.o" >>"$dir/dis.txt" ||
		fail "objdump of ring/$f.o failed"
done

# the instructions of function NAME, one mnemonic a line
body() {
	awk -v f="<$1>:" '$2 == f { on = 1; next } /^[0-9a-f]+ <.*>:$/ { on = 0 } on && NF >= 2 { print $2 "_" $3 "_" $4 }' "$dir/dis.txt"
}
bad=
# need FUNCTION WHAT PATTERN...: the patterns (extended regexps on
# "mnemonic operands") appear in the function's body in this order
need() {
	fn=$1 what=$2; shift 2
	body "$fn" >"$dir/fn.txt"
	[ -s "$dir/fn.txt" ] || { bad="$bad; $fn: not in the disassembly"; return; }
	left=$(awk -v pats="$*" 'BEGIN { n = split(pats, p, " "); i = 1 }
		i <= n && $0 ~ p[i] { i++ } END { for (; i <= n; i++) printf "%s ", p[i] }' "$dir/fn.txt")
	if [ -n "$left" ]; then
		bad="$bad; $fn: no $what (missing, in order: $left)"
	else
		echo "ok: $fn: $what"
	fi
}
acq='^(ldar|ldapr)'
need xring_back_pending "acquire load of req_prod" "$acq"
need xring_back_consume "acquire load of req_prod before the entries are read" "$acq" '^ldr'
need xring_back_req_prod "acquire load of req_prod" "$acq"
need xring_back_push "release store of rsp_prod, then a full fence before rsp_event is read" '^stlr' '^dmb_ish' '^ldr'
need xring_back_final_check "req_event stored, a full fence, req_prod loaded again with acquire" '^str' '^dmb_ish' "$acq"
need xring_front_push "release store of req_prod, then a full fence before req_event is read" '^stlr' '^dmb_ish' '^ldr'
need xring_front_consume "acquire load of rsp_prod before the responses are read" "$acq" '^ldr'
need xring_front_final_check "rsp_event stored, a full fence, rsp_prod loaded again with acquire" '^str' '^dmb_ish' "$acq"
need xring_attach "acquire load of the producer index it resumes from" "$acq"
[ -z "$bad" ] || fail "ring/ on arm64 lacks barriers${bad}"
echo "ok: every shared-index access of ring/ has its barrier on arm64"
