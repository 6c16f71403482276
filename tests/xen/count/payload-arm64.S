/*
 * tests/xen/count/payload-arm64.S: count-check.sh's bare-metal kernel for
 * qemu-system-aarch64 (virt, EL1, MMU off: an address is where the code
 * lies): the loops of payload.S between the same marks, in arm64's
 * encoding (common/mark.h), a wfe loop (arm64's other spin-wait), then a
 * loop in a page of its own that the plugin is told is Xen's (xen=), then
 * PSCI SYSTEM_OFF, which makes QEMU exit with status 0.
 */
#define MARK(m) movk xzr, #0x5842, lsl #48; movk xzr, #(m)

	.text
	.globl _start
_start:
	MARK(1)
	ldr x1, =1000000		/* 2 x 1000000 + 3 instructions from mark 1 to mark 2 */
1:	subs x1, x1, #1
	b.ne 1b
	MARK(2)
	MARK(0xfff0)			/* poll begin: 2 x 1000 + 3 counted as polling */
	mov x1, #1000
2:	subs x1, x1, #1
	b.ne 2b
	MARK(0xfff1)			/* poll end */
	MARK(0xfff1)			/* an end with no begin open: unmatched=1 */
	MARK(3)				/* 2 x 1000 + 9 after mark 2 */
	mov x1, #1000			/* a spin-wait: 3 x 1000 counted as spinning, and the */
	b 4f				/* block after it (TCG runs a yield on as a NOP when */
4:	yield				/* threaded: the branch keeps the marks out of its block) */
	subs x1, x1, #1
	b.ne 4b
	MARK(4)
	mov x1, #1000			/* a wait for an event: 3 x 1000 more as spinning (TCG */
	b 6f				/* does not halt at wfe, it runs on) */
6:	wfe
	subs x1, x1, #1
	b.ne 6b
	MARK(5)
	bl xen_loop			/* 2 x 1000 + 2 in "Xen's" page, 2 x 1000 + 5 after mark 5 */
	MARK(6)
	ldr x0, =0x84000008		/* PSCI SYSTEM_OFF, by hvc as QEMU's virt has it at EL1 */
	hvc #0
3:	wfi
	b 3b
	.ltorg

	.balign 4096
	.globl xen_loop
xen_loop:
	mov x1, #1000
5:	subs x1, x1, #1
	b.ne 5b
	ret
	.balign 4096
