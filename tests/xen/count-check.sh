#!/bin/sh
# tests/xen/count-check.sh: make check-xen's instruction counter
# (tests/xen/count/xbd-count.so, a QEMU TCG plugin) counts to the
# instruction.  QEMU boots a bare-metal kernel made here
# (tests/xen/count/payload.S) that runs marks around loops of known
# length: the counts between two cut marks, the instructions counted as
# polling between a poll-begin and a poll-end mark, the poll-end with no
# begin, and the second CPU, which never leaves its halt, must be what
# the kernel's code says, exactly.  Then the same on arm64
# (payload-arm64.S in qemu-system-aarch64, when it and a cross assembler
# are there), with a page the plugin is told is Xen's (xen=START-END):
# its loop must count as Xen's and nothing else.
. "$top_srcdir/tests/lib/sim.sh"

PLUGIN=$top_builddir/tests/xen/count/.libs/xbd-count.so
MARK=$top_builddir/tests/xen/count/xbd-mark
command -v qemu-system-x86_64 >/dev/null || skip "no qemu-system-x86_64 (scripts/install-deps.sh installs it)"
if [ ! -f "$PLUGIN" ]; then
	# a --disable-shared build makes no plugin (QEMU loads only shared objects)
	[ -f "$top_builddir/tests/xen/count/xbd-count.la" ] || skip "no $PLUGIN: a build without shared libraries makes none"
	fail "no $PLUGIN: the build makes it"
fi
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
# cut MARK CPU HOST_NS N F, then F counts a CPU: insns poll halts xen kernel user spin,
# and the spinning ones by where: xen kernel user
val() {  # MARK CPU INDEX: that count of that CPU at that cut
	awk -v m="$1" -v c="$2" -v k="$3" '$1 == "cut" && $2 == m { print $(7 + c * $6 + k) }' "$WORK/out"
}
c1=$(val 1 0 0) c2=$(val 2 0 0) c3=$(val 3 0 0)
[ -n "$c1" ] && [ -n "$c2" ] && [ -n "$c3" ] || fail "a cut is missing"
grep -q '^cut 1 0 [0-9]* 2 10 ' "$WORK/out" || fail "not CPU 0 of 2 with 10 counts each: $(grep '^cut 1' "$WORK/out")"
[ $((c2 - c1)) = 2000002 ] || fail "mark 1 to mark 2: $((c2 - c1)) instructions, not 2000002"
[ $((c3 - c2)) = 2005 ] || fail "mark 2 to mark 3: $((c3 - c2)) instructions, not 2005"
[ "$(val 3 0 1)" = 2002 ] || fail "polling: $(val 3 0 1) instructions, not 2002"
[ "$(val 1 0 1)" = 0 ] || fail "polling counted before any poll mark: $(val 1 0 1)"
# where the code lies: this kernel is 32-bit code, below x86-64's canonical hole, so user space's
u=$(( $(val 2 0 5) - $(val 1 0 5) ))
[ "$(val 3 0 3)" = 0 ] && [ "$(val 3 0 4)" = 0 ] || fail "32-bit code counted as Xen's or a kernel's: $(grep '^cut 3' "$WORK/out")"
[ $u -ge 2000002 ] && [ $u -le 2000100 ] || fail "user space's count from mark 1 to mark 2: $u, not about 2000002"
# the spin-wait loop after mark 3 (pause; dec; jnz: TCG ends a block at the pause, so the
# loop's test is the next block): its 3000 instructions counted as spinning, give or take
# the block around its first pause; the loops without a pause before it, nothing (but for the
# block the firmware's last spin hands over)
sp=$(( $(val 4 0 6) - $(val 3 0 6) ))
[ $(( $(val 3 0 6) - $(val 1 0 6) )) -le 8 ] || fail "loops without a pause counted as spinning: $(val 1 0 6) then $(val 3 0 6)"
[ $sp -ge 2998 ] && [ $sp -le 3002 ] || fail "the spin loop: $sp instructions counted as spinning, not about 3000"
[ $(( $(val 4 0 9) - $(val 3 0 9) )) = $sp ] && [ "$(val 4 0 7)" = 0 ] && [ "$(val 4 0 8)" = 0 ] ||
	fail "the spin loop is not all user space's spinning: $(grep '^cut 4' "$WORK/out")"
# the second CPU stays halted after the firmware's start: its count does not move
[ "$(val 1 1 0)" = "$(val 3 1 0)" ] || fail "CPU 1 counted while halted: $(val 1 1 0) then $(val 3 1 0)"
grep -q '^end .* unmatched=1$' "$WORK/out" || fail "the poll end with no begin is not counted: $(tail -1 "$WORK/out")"
# the plugin refuses what it does not know, and a run without out=
timeout 60 qemu-system-x86_64 -accel tcg -display none -monitor none -serial none -no-reboot \
	-kernel "$WORK/payload.elf" -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
	-plugin "$PLUGIN" >"$WORK/q2.log" 2>&1
grep -q 'qemu_plugin_install returned error' "$WORK/q2.log" || fail "a plugin without out= was loaded: $(cat "$WORK/q2.log")"
# xen= is arm64's: x86-64's range is fixed
timeout 60 qemu-system-x86_64 -accel tcg -display none -monitor none -serial none -no-reboot \
	-kernel "$WORK/payload.elf" -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
	-plugin "$PLUGIN,out=$WORK/out3,xen=0x1000-0x2000" >"$WORK/q3.log" 2>&1
grep -q 'xen= is for arm64' "$WORK/q3.log" || fail "x86-64's plugin took xen=: $(cat "$WORK/q3.log")"
# ---- arm64: payload-arm64.S at 0x40100000 (virt's RAM, the MMU off), its Xen page at 0x40101000 ----
if ! command -v qemu-system-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
	echo "arm64's half not run: no qemu-system-aarch64 or aarch64-linux-gnu-gcc (scripts/install-deps.sh installs both)"
else
	aarch64-linux-gnu-gcc -c -o "$WORK/pa.o" "$top_srcdir/tests/xen/count/payload-arm64.S" &&
		aarch64-linux-gnu-ld -Ttext 0x40100000 -e _start -o "$WORK/pa.elf" "$WORK/pa.o" ||
		fail "cannot build the arm64 bare-metal payload"
	[ "$(aarch64-linux-gnu-nm "$WORK/pa.elf" | awk '$3 == "xen_loop" { print $1 }')" = 0000000040101000 ] ||
		fail "the payload's Xen page is not at 0x40101000: $(aarch64-linux-gnu-nm "$WORK/pa.elf")"
	a64() {  # OUT [PLUGIN-ARGS]: boot it, multi-threaded as the Arm64 boots run; PSCI SYSTEM_OFF exits 0
		timeout 120 qemu-system-aarch64 -accel tcg,thread=multi -M virt -cpu cortex-a57 -smp 2 -m 64 \
			-display none -monitor none -serial none -no-reboot -kernel "$WORK/pa.elf" \
			-plugin "$PLUGIN,out=$1${2:-}" >"$WORK/qa.log" 2>&1
	}
	a64 "$WORK/out" ,xen=0x40101000-0x40102000,hot="$WORK/hot",prof="$WORK/prof" || fail "qemu-system-aarch64 exited $?: $(cat "$WORK/qa.log")"
	cat "$WORK/out" "$WORK/hot" "$WORK/prof"
	# prof=: what each block of Xen's (x) or a kernel's (k) ran since the cut before, at each
	# cut: the Xen page's 2002 instructions on CPU 0 all under cut 6 (its loop runs between
	# marks 5 and 6), nothing of it under an earlier cut, no kernel's code (the MMU is off)
	[ "$(awk '$1 == "cut" { m = $2; next } $2 == "x" { if (m == 6) s += $5; else e += $5; o += $6 + $7 + $8 }
		$2 == "k" { k += $5 + $6 + $7 + $8 } END { print s + 0, e + 0, k + 0, o + 0 }' "$WORK/prof")" = "2002 0 0 0" ] ||
		fail "arm64: prof= did not put the Xen page's 2002 instructions on CPU 0 under cut 6 alone: $(cat "$WORK/prof")"
	[ "$(grep -c '^cut ' "$WORK/prof")" = "$(grep -c '^cut ' "$WORK/out")" ] ||
		fail "arm64: prof= has not a cut for each of out='s: $(grep '^cut' "$WORK/prof" | tr '\n' ' ')"
	# hot=: the Xen page's blocks (VADDR INSNS SPIN C0..C3), 2002 on CPU 0, none elsewhere
	[ "$(awk '{ n += $4; o += $5 + $6 + $7 } END { print n + 0, o + 0 }' "$WORK/hot")" = "2002 0" ] ||
		fail "arm64: hot= did not write the Xen page's 2002 instructions on CPU 0: $(cat "$WORK/hot")"
	awk '$1 !~ /^0x4010100/ { exit 1 }' "$WORK/hot" || fail "arm64: hot= has a block outside Xen's page: $(cat "$WORK/hot")"
	c1=$(val 1 0 0) c2=$(val 2 0 0) c3=$(val 3 0 0) c5=$(val 5 0 0) c6=$(val 6 0 0)
	[ -n "$c1" ] && [ -n "$c6" ] || fail "arm64: a cut is missing"
	grep -q '^cut 1 0 [0-9]* 2 10 ' "$WORK/out" || fail "arm64: not CPU 0 of 2 with 10 counts each: $(grep '^cut 1' "$WORK/out")"
	# a mark is two instructions here (movk xzr twice)
	[ $((c2 - c1)) = 2000003 ] || fail "arm64: mark 1 to mark 2: $((c2 - c1)) instructions, not 2000003"
	[ $((c3 - c2)) = 2009 ] || fail "arm64: mark 2 to mark 3: $((c3 - c2)) instructions, not 2009"
	[ "$(val 3 0 1)" = 2003 ] && [ "$(val 1 0 1)" = 0 ] || fail "arm64: polling: $(val 1 0 1) then $(val 3 0 1) instructions, not 0 then 2003"
	# "Xen's" page: its loop (mov, 1000 x subs and b.ne, ret) and nothing else; no kernel
	# code (none has the top bit set: the MMU is off); the rest user space's
	[ $((c6 - c5)) = 2005 ] || fail "arm64: mark 5 to mark 6: $((c6 - c5)) instructions, not 2005"
	[ "$(val 5 0 3)" = 0 ] && [ "$(val 6 0 3)" = 2002 ] ||
		fail "arm64: Xen's code counted $(val 5 0 3) before its page and $(val 6 0 3) after, not 0 and 2002"
	[ "$(val 6 0 4)" = 0 ] || fail "arm64: $(val 6 0 4) instructions counted as a kernel's"
	u=$(( $(val 2 0 5) - $(val 1 0 5) ))
	[ $u -ge 2000003 ] && [ $u -le 2000100 ] || fail "arm64: user space's count from mark 1 to mark 2: $u, not about 2000003"
	# the yield loop and the wfe loop: each its 3000, and the 3 or 4 of the block
	# after it (with the threads neither hint ends a block: the loop is one block)
	[ "$(val 3 0 6)" = 0 ] || fail "arm64: loops without a yield counted as spinning: $(val 3 0 6)"
	sp=$(( $(val 4 0 6) - $(val 3 0 6) ))
	[ $sp -ge 3000 ] && [ $sp -le 3004 ] || fail "arm64: the yield loop: $sp instructions counted as spinning, not 3000-3004"
	sp=$(( $(val 5 0 6) - $(val 4 0 6) ))
	[ $sp -ge 3000 ] && [ $sp -le 3004 ] || fail "arm64: the wfe loop: $sp instructions counted as spinning, not 3000-3004"
	[ "$(val 6 0 6)" = "$(val 5 0 6)" ] || fail "arm64: the Xen page's loop counted as spinning: $(val 5 0 6) then $(val 6 0 6)"
	[ "$(val 6 0 9)" = "$(val 6 0 6)" ] && [ "$(val 6 0 7)" = 0 ] && [ "$(val 6 0 8)" = 0 ] ||
		fail "arm64: the spinning is not all user space's: $(grep '^cut 6' "$WORK/out")"
	[ "$(val 1 1 0)" = "$(val 6 1 0)" ] || fail "arm64: CPU 1 counted while off: $(val 1 1 0) then $(val 6 1 0)"
	grep -q '^end .* unmatched=1$' "$WORK/out" || fail "arm64: the poll end with no begin is not counted: $(tail -1 "$WORK/out")"
	# without xen= the plugin does not load on arm64 (its Xen code would count as user
	# space's), nor with a range that is not one
	a64 "$WORK/out4"
	grep -q 'xen=START-END is needed' "$WORK/qa.log" || fail "arm64: the plugin loaded without xen=: $(cat "$WORK/qa.log")"
	a64 "$WORK/out4" ,xen=0x2000-0x1000
	grep -q 'is not START-END' "$WORK/qa.log" || fail "arm64: the plugin took xen=0x2000-0x1000: $(cat "$WORK/qa.log")"
fi
# xbd-mark runs its mark natively too (a NOP on real hardware), and checks its argument
if [ -x "$MARK" ]; then
	"$MARK" 7 || fail "xbd-mark 7 failed"
	"$MARK" 0 2>/dev/null && fail "xbd-mark 0 (not a cut mark) passed"
	"$MARK" 65520 2>/dev/null && fail "xbd-mark 65520 (the poll marks' range) passed"
fi
exit 0
