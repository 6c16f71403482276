/*
 * tests/xen/count/payload.S: a bare-metal multiboot kernel for
 * count-check.sh: runs marks around loops of known length, so that the
 * instruction counts xbd-count.so writes can be checked to the
 * instruction, then makes QEMU exit (isa-debug-exit at port 0xf4).
 * 32-bit protected mode, as a multiboot loader starts it.
 */
#define MARK(m) .byte 0x0f, 0x1f, 0x80; .long (0x5842 << 16) | (m)

	.text				/* the header first: a loader looks in the first 8 KiB */
	.align 4
	.long 0x1badb002		/* multiboot magic */
	.long 0				/* flags: nothing asked of the loader */
	.long -0x1badb002		/* checksum */
	.globl _start
_start:
	cli
	MARK(1)
	mov $1000000, %ecx		/* 2 x 1000000 + 2 instructions from mark 1 to mark 2 */
1:	dec %ecx
	jnz 1b
	MARK(2)
	MARK(0xfff0)			/* poll begin: 2 x 1000 + 2 counted as polling */
	mov $1000, %ecx
2:	dec %ecx
	jnz 2b
	MARK(0xfff1)			/* poll end */
	MARK(0xfff1)			/* an end with no begin open: unmatched=1 */
	MARK(3)				/* 2 x 1000 + 5 after mark 2 */
	mov $1000, %ecx			/* a spin-wait: 3 x 1000 + 1 counted as spinning */
4:	pause
	dec %ecx
	jnz 4b
	MARK(4)
	mov $0, %al
	out %al, $0xf4			/* isa-debug-exit: QEMU exits with status 1 */
3:	hlt
	jmp 3b
