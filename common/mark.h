/*
 * common/mark.h: marks in the instruction stream for make check-xen's
 * instruction counter (tests/xen/count/xbd-count.c, a QEMU TCG plugin).
 * A mark is an instruction that does nothing on any CPU: on x86-64 a NOP
 * with a 32-bit displacement (0f 1f 80 d32, nopl d32(%rax)) whose high
 * half is 0x5842 ("XB") and low half the mark; on arm64 two writes to the
 * zero register (movk xzr, #0x5842, lsl #48; movk xzr, #MARK).  No
 * compiler pads with either (its NOPs have displacement 0), so the plugin
 * finds them by their bytes when it translates a block, and acts when one
 * runs, exactly there in that CPU's instruction stream.  On real hardware
 * a mark costs one NOP.
 *
 * The marks:
 *   1 .. XBD_MARK_CUT_MAX  a cut: the plugin writes every CPU's count
 *                          (tests/xen/count/xbd-mark makes these)
 *   XBD_MARK_POLL_BEGIN / XBD_MARK_POLL_END  the instructions between
 *                          them on one CPU are counted apart as polling
 */
#ifndef XBD_COMMON_MARK_H
#define XBD_COMMON_MARK_H

#define XBD_MARK_MAGIC 0x5842u
#define XBD_MARK_CUT_MAX 0xffefu
#define XBD_MARK_POLL_BEGIN 0xfff0u
#define XBD_MARK_POLL_END 0xfff1u

#if defined(__x86_64__) || defined(__i386__)
#define XBD_MARK(m) __asm__ volatile(".byte 0x0f, 0x1f, 0x80; .long %c0" :: "i"((XBD_MARK_MAGIC << 16) | (m)))
#elif defined(__aarch64__)
#define XBD_MARK(m) __asm__ volatile("movk xzr, #0x5842, lsl #48\n\tmovk xzr, #%0" :: "i"(m))
#else
#define XBD_MARK(m) ((void)0)
#endif

#endif
