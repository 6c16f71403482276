/*
 * tests/xen/count/xbd-mark.c: runs one cut mark (common/mark.h) whose
 * value is given at run time, for make check-xen's instruction counter
 * (xbd-count.c, a QEMU TCG plugin): the guests run it just before and
 * just after each fio job, and the plugin writes every CPU's count then.
 *   xbd-mark MARK     (1 .. 65519)
 *   xbd-mark MARK syscalls N   mark MARK, N getppid system calls, mark
 *                     MARK+1: what one system call costs (dom0's, through
 *                     Xen in a PV dom0) is the count between them over N
 * A mark's value is in its instruction's bytes, and the plugin reads it
 * when it translates them: this program writes the instruction, with the
 * value asked for, into a page of its own and calls it.  Built static, so
 * that it runs in any guest of the architecture.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/mark.h"

/* Run the mark written at page (with the value m). */
static void run_mark(uint8_t *page, unsigned long m);

int main(int argc, char **argv)
{
	unsigned long m, calls = 0;
	char *end;
	uint8_t *page;

	if (argc != 2 && !(argc == 4 && !strcmp(argv[2], "syscalls"))) {
		fprintf(stderr, "usage: xbd-mark MARK [syscalls N] (MARK 1..%u)\n", XBD_MARK_CUT_MAX);
		return 2;
	}
	errno = 0;
	m = strtoul(argv[1], &end, 0);
	if (errno || *end || m < 1 || m > XBD_MARK_CUT_MAX - (argc == 4)) {
		fprintf(stderr, "xbd-mark: '%s' is not a mark (1..%u)\n", argv[1], XBD_MARK_CUT_MAX);
		return 2;
	}
	if (argc == 4) {
		calls = strtoul(argv[3], &end, 0);
		if (*end || !calls) {
			fprintf(stderr, "xbd-mark: '%s' is not a number of system calls\n", argv[3]);
			return 2;
		}
	}
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED) {
		fprintf(stderr, "xbd-mark: mmap of an executable page: %s\n", strerror(errno));
		return 1;
	}
	run_mark(page, m);
	if (!calls)
		return 0;
	for (unsigned long i = 0; i < calls; i++)
		syscall(SYS_getppid);
	run_mark(page, m + 1);
	return 0;
}

static void run_mark(uint8_t *page, unsigned long m)
{
	size_t n = 0;

#if defined(__x86_64__) || defined(__i386__)
	{
		uint32_t d = XBD_MARK_MAGIC << 16 | (uint32_t)m;

		page[n++] = 0x0f; page[n++] = 0x1f; page[n++] = 0x80;
		memcpy(page + n, &d, 4);
		n += 4;
		page[n++] = 0xc3;  /* ret */
	}
#elif defined(__aarch64__)
	{
		uint32_t w[3] = {
			0xf2e00000u | XBD_MARK_MAGIC << 5 | 31,  /* movk xzr, #0x5842, lsl #48 */
			0xf2800000u | (uint32_t)m << 5 | 31,     /* movk xzr, #MARK */
			0xd65f03c0u,                             /* ret */
		};

		memcpy(page, w, sizeof(w));
		n = sizeof(w);
		__builtin___clear_cache((char *)page, (char *)page + n);
	}
#else
#error "xbd-mark: no mark instruction for this architecture (common/mark.h)"
#endif
	((void (*)(void))page)();
}
