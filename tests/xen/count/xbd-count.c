/*
 * tests/xen/count/xbd-count.c: a QEMU TCG plugin that counts the
 * instructions each emulated CPU executes, and writes every CPU's count
 * when a mark (common/mark.h) runs: make check-xen's counted cost table.
 *
 *   qemu-system-x86_64 -plugin ./xbd-count.so,out=FILE ...
 *
 * Counting: at translation each block gets an execution callback that adds
 * its instruction count to its CPU's counter (a CPU that halts executes
 * nothing, and its counter stands still).  A mark found in a block gets an
 * instruction callback as well, which fires just before the mark executes;
 * since the block's whole count was added on entry, the callback takes
 * back the instructions from the mark to the block's end, and the count
 * it writes for its own CPU is exactly the instructions that CPU executed
 * before the mark.  A block left early by an exception (a page fault in
 * its middle) was counted whole and runs again: that many instructions too
 * many, per such exception.  The other CPUs' counts in a cut are read as
 * they stand (to their current block), at the same moment of the host.
 *
 * Each block is also counted by where its code lies, which says who runs
 * it.  On x86-64: Xen (0xffff800000000000 up to 0xffff880000000000, the
 * hypervisor's own range in a PV layout), a guest's kernel (above it) or
 * user space (below the canonical hole; also any 32-bit code).  On arm64
 * Xen runs at EL2 in a translation regime of its own, at an address that
 * moves between releases (Debian's images: 0x200000 in 4.17, 0xa0000200000
 * in 4.20), so the range of its image is an argument, xen=START-END
 * (tests/xen/arm64.sh reads it from the image it boots): code there is
 * Xen's, else a kernel's (the top bit set: TTBR1's half) or user space's.
 * A process of a guest could put code in Xen's range only on purpose: on
 * 4.17 it lies below 4 MB, where non-PIE programs begin, on 4.20 at 10 TB,
 * far below where mmap places anything.
 *
 * A block that holds a spin-wait hint (x86's pause, arm64's yield and wfe)
 * is part of a loop that waits for another CPU or for time to pass (a
 * spinlock, a rendezvous, udelay, a backend's polling): its instructions,
 * and those of the block its CPU runs next (TCG ends a block at the hint,
 * so the loop's test is the next block), are counted apart too, as
 * spinning, since how many run follows the host's load (a CPU waits longer
 * for another whose host thread was descheduled), not the work asked of
 * it.  On arm64 both Xen's spinlocks and Linux's (and its smp_cond_load
 * waits) wait with wfe, which TCG does not halt on: it yields the host
 * thread and runs on, so such a wait spins as long as the holder's thread
 * is off the host's CPUs.
 *
 * Lines of FILE (one per event, flushed at once):
 *   cut MARK CPU HOST_NS N F  then F counts for each of the N CPUs
 *   end HOST_NS N F  the same  unmatched=U
 * with F = 10 counts a CPU: instructions executed so far; of them, those
 * between a poll-begin and a poll-end mark on it; how often it went idle
 * (halted); its instructions in Xen's, in a kernel's and in user space's
 * code; those in spinning blocks; and of those, the ones in Xen's, in a
 * kernel's and in user space's code (where spinning lies: on arm64 Xen's
 * lock waits and Linux's are most of a job's count).  U: poll-end marks
 * with no poll-begin open on their CPU.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/mark.h"
#include "qemu-plugin-api.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MAX_CPUS 64

enum { WHERE_XEN, WHERE_KERNEL, WHERE_USER, WHERES };
#define FIELDS (4 + 2 * WHERES)

/* One emulated CPU's counters, written by its own thread only. */
struct cpu_count {
	uint64_t insns;      /* instructions executed */
	uint64_t where[WHERES]; /* of them, by where their code lies */
	uint64_t spin;       /* of them, in blocks that hold a spin-wait hint, and the next */
	uint64_t spin_where[WHERES]; /* of those, by where their code lies */
	int after_hint;      /* the block it ran last held one */
	uint64_t poll;       /* of them, between poll marks */
	uint64_t poll_from;  /* insns at the open poll-begin mark */
	uint64_t idle;       /* times it went idle */
	int poll_open;
} __attribute__((aligned(64)));

static struct cpu_count cpus[MAX_CPUS];
static unsigned int n_cpus;
static uint64_t unmatched;
static FILE *out;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static enum { ARCH_X86, ARCH_ARM64 } arch;
static uint64_t xen_start, xen_end;  /* arm64: Xen's code, [start, end) */

/*
 * hot=FILE and prof=FILE, diagnostics: where the instructions go.  Each
 * block translated in Xen's range (hot=) or in Xen's or a kernel's (prof=)
 * gets a second callback, which adds its instructions to a record of its
 * own, per CPU (the first HOT_CPUS).  hot=: at exit FILE gets a line a
 * record of Xen's (a block translated twice has two):
 *   VADDR INSNS SPIN C0 C1 C2 C3
 * prof=: at each cut mark, after its line in out=, FILE gets
 *   cut MARK
 * and a line a record whose count moved since the previous cut, what it
 * moved by (W: x for Xen's code, k for a kernel's), so that the lines
 * between a job's two cuts are its profile (tests/xen/kprof.py names the
 * kernel's functions from dom0's /proc/kallsyms):
 *   VADDR W INSNS SPIN D0 D1 D2 D3
 * Off, the counting above is all there is.
 */
#define HOT_CPUS 4
struct hot {
	uint64_t vaddr;
	unsigned int n, spin, where;
	uint64_t count[HOT_CPUS];
	uint64_t cut[HOT_CPUS]; /* count at prof='s last cut (written under out_lock) */
	struct hot *next;
};
static const char *hot_path;
static FILE *prof;
static struct hot *hots;
static pthread_mutex_t hot_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t load(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void add(uint64_t *p, uint64_t n)
{
	__atomic_store_n(p, *p + n, __ATOMIC_RELAXED);
}

static uint64_t host_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Every CPU's counters as " N I0 P0 D0 ...", CPU `self` at `self_insns`. */
static void write_counts(unsigned int self, uint64_t self_insns)
{
	unsigned int n = __atomic_load_n(&n_cpus, __ATOMIC_RELAXED);

	fprintf(out, " %u %u", n, FIELDS);
	for (unsigned int i = 0; i < n; i++) {
		fprintf(out, " %" PRIu64 " %" PRIu64 " %" PRIu64,
			i == self ? self_insns : load(&cpus[i].insns), load(&cpus[i].poll),
			load(&cpus[i].idle));
		for (unsigned int w = 0; w < WHERES; w++)
			fprintf(out, " %" PRIu64, load(&cpus[i].where[w]));
		fprintf(out, " %" PRIu64, load(&cpus[i].spin));
		for (unsigned int w = 0; w < WHERES; w++)
			fprintf(out, " %" PRIu64, load(&cpus[i].spin_where[w]));
	}
}

/* udata: the block's instruction count shifted left 3, whether it spins (bit 2), where it lies */
static void tb_exec(unsigned int cpu, void *udata)
{
	uintptr_t u = (uintptr_t)udata;

	struct cpu_count *c = &cpus[cpu];

	add(&c->insns, u >> 3);
	add(&c->where[u & 3], u >> 3);
	if ((u & 4) || c->after_hint) {
		add(&c->spin, u >> 3);
		add(&c->spin_where[u & 3], u >> 3);
	}
	c->after_hint = (u & 4) != 0;
}

static unsigned int where(uint64_t vaddr)
{
	if (arch == ARCH_X86) {
		if (vaddr >= 0xffff800000000000ull && vaddr < 0xffff880000000000ull)
			return WHERE_XEN;
		return vaddr >= 0xffff880000000000ull ? WHERE_KERNEL : WHERE_USER;
	}
	if (vaddr >= xen_start && vaddr < xen_end)
		return WHERE_XEN;
	return vaddr >> 63 ? WHERE_KERNEL : WHERE_USER;
}

/* prof=: what each record ran since the last cut (called under out_lock) */
static void prof_cut(unsigned int mark)
{
	fprintf(prof, "cut %u\n", mark);
	pthread_mutex_lock(&hot_lock);
	for (struct hot *h = hots; h; h = h->next) {
		uint64_t d[HOT_CPUS], any = 0;

		for (unsigned int c = 0; c < HOT_CPUS; c++) {
			uint64_t now = load(&h->count[c]);

			d[c] = now - h->cut[c];
			h->cut[c] = now;
			any |= d[c];
		}
		if (any)
			fprintf(prof, "%#" PRIx64 " %c %u %u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
				h->vaddr, h->where == WHERE_XEN ? 'x' : 'k', h->n, h->spin, d[0], d[1], d[2], d[3]);
	}
	pthread_mutex_unlock(&hot_lock);
	fflush(prof);
}

/* udata: the mark in the low 16 bits, the instructions of its block from it to the end above */
static void mark_exec(unsigned int cpu, void *udata)
{
	struct cpu_count *c = &cpus[cpu];
	unsigned int mark = (uintptr_t)udata & 0xffff;
	uint64_t before = c->insns - ((uintptr_t)udata >> 16);

	if (mark == XBD_MARK_POLL_BEGIN) {
		c->poll_from = before;
		c->poll_open = 1;
		return;
	}
	if (mark == XBD_MARK_POLL_END) {
		if (c->poll_open)
			add(&c->poll, before - c->poll_from);
		else
			__atomic_fetch_add(&unmatched, 1, __ATOMIC_RELAXED);
		c->poll_open = 0;
		return;
	}
	pthread_mutex_lock(&out_lock);
	if (out) {  /* (not after the exit callback closed it) */
		fprintf(out, "cut %u %u %" PRIu64, mark, cpu, host_ns());
		write_counts(cpu, before);
		fputc('\n', out);
		fflush(out);
		if (prof)
			prof_cut(mark);
	}
	pthread_mutex_unlock(&out_lock);
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int cpu)
{
	(void)id;
	if (cpu < MAX_CPUS && cpu + 1 > __atomic_load_n(&n_cpus, __ATOMIC_RELAXED))
		__atomic_store_n(&n_cpus, cpu + 1, __ATOMIC_RELAXED);
}

static void vcpu_idle(qemu_plugin_id_t id, unsigned int cpu)
{
	(void)id;
	if (cpu < MAX_CPUS)
		add(&cpus[cpu].idle, 1);
}

static uint32_t le32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Whether instruction i of tb is a spin-wait hint: pause (f3 90), yield (0xd503203f), wfe (0xd503205f). */
static int spins(const struct qemu_plugin_tb *tb, size_t i)
{
	const struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
	const uint8_t *b = qemu_plugin_insn_data(insn);
	size_t len = qemu_plugin_insn_size(insn);

	if (arch == ARCH_X86)
		return len == 2 && b[0] == 0xf3 && b[1] == 0x90;
	return len == 4 && (le32(b) == 0xd503203fu || le32(b) == 0xd503205fu);
}

/* The mark instruction i of tb carries, or -1 (common/mark.h: the encodings). */
static int mark_at(const struct qemu_plugin_tb *tb, size_t i, size_t n)
{
	const struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
	const uint8_t *b = qemu_plugin_insn_data(insn);
	size_t len = qemu_plugin_insn_size(insn);

	if (arch == ARCH_X86) {
		/* nopl d32(%rax), d32 = 0x5842MMMM */
		if (len == 7 && b[0] == 0x0f && b[1] == 0x1f && b[2] == 0x80 &&
		    le32(b + 3) >> 16 == XBD_MARK_MAGIC)
			return (int)(le32(b + 3) & 0xffff);
		return -1;
	}
	/* movk xzr, #0x5842, lsl #48 (0xf2e00000 | imm16 << 5 | 31), then movk xzr, #MARK */
	if (len == 4 && le32(b) == (0xf2e00000u | XBD_MARK_MAGIC << 5 | 31) && i + 1 < n) {
		const struct qemu_plugin_insn *next = qemu_plugin_tb_get_insn(tb, i + 1);
		uint32_t w;

		if (qemu_plugin_insn_size(next) != 4)
			return -1;
		w = le32(qemu_plugin_insn_data(next));
		if ((w & 0xffe0001fu) == (0xf2800000u | 31))
			return (int)((w >> 5) & 0xffff);
	}
	return -1;
}

static void hot_exec(unsigned int cpu, void *udata)
{
	struct hot *h = udata;

	if (cpu < HOT_CPUS)
		__atomic_fetch_add(&h->count[cpu], h->n, __ATOMIC_RELAXED);
}

/* A record for block tb (Xen's or a kernel's code), and its callback; none without memory. */
static void hot_add(struct qemu_plugin_tb *tb, size_t n, unsigned int spin, unsigned int w)
{
	struct hot *h = calloc(1, sizeof(*h));

	if (!h)
		return;
	h->vaddr = qemu_plugin_tb_vaddr(tb);
	h->n = (unsigned int)n;
	h->spin = spin;
	h->where = w;
	pthread_mutex_lock(&hot_lock);
	h->next = hots;
	hots = h;
	pthread_mutex_unlock(&hot_lock);
	qemu_plugin_register_vcpu_tb_exec_cb(tb, hot_exec, QEMU_PLUGIN_CB_NO_REGS, h);
}

static void hot_write(void)
{
	FILE *f = fopen(hot_path, "w");

	if (!f) {
		fprintf(stderr, "xbd-count: %s: %s\n", hot_path, strerror(errno));
		return;
	}
	pthread_mutex_lock(&hot_lock);
	for (struct hot *h = hots; h; h = h->next) {
		if (h->where != WHERE_XEN)
			continue;
		fprintf(f, "%#" PRIx64 " %u %u", h->vaddr, h->n, h->spin);
		for (unsigned int c = 0; c < HOT_CPUS; c++)
			fprintf(f, " %" PRIu64, load(&h->count[c]));
		fputc('\n', f);
	}
	pthread_mutex_unlock(&hot_lock);
	fclose(f);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	uintptr_t spin = 0;
	unsigned int w = where(qemu_plugin_tb_vaddr(tb));

	(void)id;
	for (size_t i = 0; i < n && !spin; i++)
		spin = spins(tb, i);
	qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS,
					     (void *)(uintptr_t)(n << 3 | spin << 2 | w));
	if ((hot_path && w == WHERE_XEN) || (prof && w != WHERE_USER))
		hot_add(tb, n, (unsigned int)spin, w);
	for (size_t i = 0; i < n; i++) {
		int m = mark_at(tb, i, n);

		if (m > 0)
			qemu_plugin_register_vcpu_insn_exec_cb(qemu_plugin_tb_get_insn(tb, i), mark_exec,
							       QEMU_PLUGIN_CB_NO_REGS,
							       (void *)(((uintptr_t)(n - i) << 16) | (unsigned int)m));
	}
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
	(void)id;
	(void)udata;
	pthread_mutex_lock(&out_lock);
	fprintf(out, "end %" PRIu64, host_ns());
	write_counts(MAX_CPUS, 0);
	fprintf(out, " unmatched=%" PRIu64 "\n", load(&unmatched));
	fclose(out);
	out = NULL;
	if (prof)
		fclose(prof);
	prof = NULL;
	pthread_mutex_unlock(&out_lock);
	if (hot_path)
		hot_write();
}

/* "START-END", two addresses (0x for hex), START below END; 0 when it parses. */
static int parse_range(const char *s, uint64_t *start, uint64_t *end)
{
	char *e;

	errno = 0;
	*start = strtoull(s, &e, 0);
	if (errno || e == s || *e != '-')
		return -1;
	s = e + 1;
	*end = strtoull(s, &e, 0);
	if (errno || e == s || *e || *start >= *end)
		return -1;
	return 0;
}

/*
 * Why the plugin will not load: on QEMU's stderr, since qemu_plugin_outs()
 * writes only to a log enabled with -d plugin, and QEMU itself says no
 * more than "qemu_plugin_install returned error".
 */
__attribute__((format(printf, 1, 2))) static int refuse(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "xbd-count: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return -1;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	const char *path = NULL, *xen = NULL, *prof_path = NULL;

	for (int i = 0; i < argc; i++) {
		if (strncmp(argv[i], "out=", 4) == 0)
			path = argv[i] + 4;
		else if (strncmp(argv[i], "xen=", 4) == 0)
			xen = argv[i] + 4;
		else if (strncmp(argv[i], "hot=", 4) == 0)
			hot_path = argv[i] + 4;
		else if (strncmp(argv[i], "prof=", 5) == 0)
			prof_path = argv[i] + 5;
		else
			return refuse("unknown argument '%s' (out=FILE, xen=START-END, hot=FILE, prof=FILE)", argv[i]);
	}
	if (!path)
		return refuse("out=FILE is needed");
	if (strcmp(info->target_name, "x86_64") == 0 || strcmp(info->target_name, "i386") == 0)
		arch = ARCH_X86;
	else if (strcmp(info->target_name, "aarch64") == 0)
		arch = ARCH_ARM64;
	else
		return refuse("target %s has no marks", info->target_name);
	if (arch == ARCH_X86 && xen)
		return refuse("xen=%s: xen= is for arm64 (on x86-64 the PV layout fixes Xen's range)", xen);
	if (arch == ARCH_ARM64 && !xen)
		return refuse("on aarch64 xen=START-END is needed, the virtual addresses of Xen's image at EL2"
			      " (tests/xen/arm64.sh reads them from the image it boots)");
	if (xen && parse_range(xen, &xen_start, &xen_end) < 0)
		return refuse("xen=%s is not START-END with START below END", xen);
	if (prof_path) {
		prof = fopen(prof_path, "w");
		if (!prof)
			return refuse("%s: %s", prof_path, strerror(errno));
	}
	out = fopen(path, "w");
	if (!out) {
		if (prof)
			fclose(prof);
		return refuse("%s: %s", path, strerror(errno));
	}
	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
	qemu_plugin_register_vcpu_idle_cb(id, vcpu_idle);
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
