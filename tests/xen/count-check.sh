#!/bin/sh
# tests/xen/count-check.sh: make check-xen's instruction counter
# (tests/xen/count/xbd-count.so, a QEMU TCG plugin) counts to the
# instruction.  QEMU boots a bare-metal kernel made here
# (tests/xen/count/payload.S) that runs marks around loops of known
# length: the counts between two cut marks, the instructions counted as
# polling between a poll-begin and a poll-end mark, the poll-end with no
# begin, and the second CPU, which never leaves its halt, must be what
# the kernel's code says, exactly.
. "$top_srcdir/tests/lib/sim.sh"

PLUGIN=$top_builddir/tests/xen/count/.libs/xbd-count.so
MARK=$top_builddir/tests/xen/count/xbd-mark
command -v qemu-system-x86_64 >/dev/null || skip "no qemu-system-x86_64 (scripts/install-deps.sh installs it)"
[ -f "$PLUGIN" ] || fail "no $PLUGIN: the build makes it"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-count.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$WORK"' EXIT
cc -m32 -c -o "$WORK/payload.o" "$top_srcdir/tests/xen/count/payload.S" &&
	ld -m elf_i386 -Ttext 0x100000 -e _start -o "$WORK/payload.elf" "$WORK/payload.o" ||
	fail "cannot build the bare-metal payload"
count() {  # OUT: boot the payload with the plugin writing OUT; QEMU's exit status 1 is the payload's
	timeout 120 qemu-system-x86_64 -accel tcg -smp 2 -m 64 -display none -monitor none \
		-serial none -no-reboot -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
		-kernel "$WORK/payload.elf" -plugin "$PLUGIN,out=$1" >"$WORK/qemu.log" 2>&1
}
count "$WORK/out"; rc=$?
[ $rc = 1 ] || fail "QEMU exited $rc, not the payload's 1: $(cat "$WORK/qemu.log")"
cat "$WORK/out"
# cut MARK CPU HOST_NS N INSNS0 POLL0 IDLE0 INSNS1 POLL1 IDLE1
get() { awk -v m="$1" -v f="$2" '$1 == "cut" && $2 == m { print $f }' "$WORK/out"; }
c1=$(get 1 6) c2=$(get 2 6) c3=$(get 3 6)
[ -n "$c1" ] && [ -n "$c2" ] && [ -n "$c3" ] || fail "a cut is missing"
[ $((c2 - c1)) = 2000002 ] || fail "mark 1 to mark 2: $((c2 - c1)) instructions, not 2000002"
[ $((c3 - c2)) = 2005 ] || fail "mark 2 to mark 3: $((c3 - c2)) instructions, not 2005"
[ "$(get 3 7)" = 2002 ] || fail "polling: $(get 3 7) instructions, not 2002"
[ "$(get 1 7)" = 0 ] || fail "polling counted before any poll mark: $(get 1 7)"
[ "$(get 3 3)" = 0 ] && [ "$(get 3 5)" = 2 ] || fail "not CPU 0 of 2: $(grep '^cut 3' "$WORK/out")"
# the second CPU stays halted after the firmware's start: its count does not move
[ "$(get 1 9)" = "$(get 3 9)" ] || fail "CPU 1 counted while halted: $(get 1 9) then $(get 3 9)"
grep -q '^end .* unmatched=1$' "$WORK/out" || fail "the poll end with no begin is not counted: $(tail -1 "$WORK/out")"
# the plugin refuses what it does not know, and a run without out=
timeout 60 qemu-system-x86_64 -accel tcg -display none -monitor none -serial none -no-reboot \
	-kernel "$WORK/payload.elf" -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
	-plugin "$PLUGIN" >"$WORK/q2.log" 2>&1
grep -q 'qemu_plugin_install returned error' "$WORK/q2.log" || fail "a plugin without out= was loaded: $(cat "$WORK/q2.log")"
# xbd-mark runs its mark natively too (a NOP on real hardware), and checks its argument
if [ -x "$MARK" ]; then
	"$MARK" 7 || fail "xbd-mark 7 failed"
	"$MARK" 0 2>/dev/null && fail "xbd-mark 0 (not a cut mark) passed"
	"$MARK" 65520 2>/dev/null && fail "xbd-mark 65520 (the poll marks' range) passed"
fi
exit 0
