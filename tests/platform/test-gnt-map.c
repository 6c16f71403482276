/*
 * test-gnt-map: mapping a batch of another domain's grants.
 * - Two processes as two domains: the backend (dom0) maps 32 pages the
 *   frontend (dom1) granted, and each sees the other's writes at once
 *   (same memory, not a copy); the frontend cannot end access while the
 *   pages are mapped, and can afterwards.
 * - Each failure gets Xen's status per reference: reference beyond the
 *   table (GNTST_bad_gntref), never granted, granted to another domain or
 *   read-only mapped for writing (GNTST_general_error), frame beyond the
 *   guest's memory (GNTST_bad_page), domain gone (GNTST_bad_domain); and a
 *   failed batch leaves nothing mapped or marked in use.
 * - Mapping sets GTF_reading/GTF_writing in the guest's entry, unmapping
 *   clears them; a read-only mapping really is read-only.
 * - Four threads of one backend map, unmap and copy at once.
 * - A guest scribbling its grant table while we map makes maps fail,
 *   never crash.
 */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/mman.h>

#include "sim/layout.h"
#include "tests/platform/ptest.h"

#define N 32

/* The guest's grant table, as the guest itself sees it (kept mapped). */
static grant_entry_v1_t *guest_table(const char *dir, uint32_t domid)
{
	struct sim_hostmap *h;
	struct sim_dom *d;
	void *m;

	CHECK(sim_host_open(dir, &h) == 0, "host open");
	CHECK(sim_dom_open(h, domid, &d) == 0, "open dom%u", domid);
	m = d->gnt;
	/* The test keeps this view for its whole life. */
	d->gnt = NULL;
	sim_dom_close(d);
	sim_host_close(h);
	return m;
}

static void two_processes(void)
{
	int to_back[2], to_front[2];
	uint32_t refs[N];
	char cmd;
	pid_t pid;

	CHECK(pipe(to_back) == 0 && pipe(to_front) == 0, "pipe");
	pid = ptest_fork();
	if (pid == 0) {
		struct xbd_platform *p = ptest_open(1);
		unsigned char *pages = xbd_gnt_share(p, 0, N, true, refs);

		CHECK(pages, "share: %s", strerror(errno));
		for (int i = 0; i < N; i++)
			memset(pages + i * 4096, 0x40 + i, 4096);
		ptest_send(to_back[1], refs, sizeof(refs));
		ptest_recv(to_front[0], &cmd, 1);
		/* The backend wrote through its mapping: we see it in our pages. */
		for (int i = 0; i < N; i++)
			CHECK(pages[i * 4096 + 100] == (unsigned char)(0x80 + i), "page %d: %#x", i,
			      pages[i * 4096 + 100]);
		CHECK(xbd_gnt_unshare(p, pages, N) == -EBUSY, "ended access under a mapping");
		pages[5 * 4096 + 7] = 0x5a;
		ptest_send(to_back[1], "w", 1);
		ptest_recv(to_front[0], &cmd, 1);
		CHECK(xbd_gnt_unshare(p, pages, N) == 0, "end access after unmap");
		xbd_platform_close(p);
		_exit(0);
	}

	struct xbd_platform *p = ptest_open(0);
	int16_t st[N];
	unsigned char *m;

	ptest_recv(to_back[0], refs, sizeof(refs));
	m = xbd_gnt_map(p, 1, N, refs, true, st);
	CHECK(m, "map 32 refs: %s", strerror(errno));
	for (int i = 0; i < N; i++) {
		CHECK(st[i] == GNTST_okay, "status[%d] = %d", i, st[i]);
		CHECK(m[i * 4096] == 0x40 + i && m[i * 4096 + 4095] == 0x40 + i,
		      "page %d holds %#x", i, m[i * 4096]);
		m[i * 4096 + 100] = (unsigned char)(0x80 + i);
	}
	ptest_send(to_front[1], "c", 1);
	ptest_recv(to_back[0], &cmd, 1);
	CHECK(m[5 * 4096 + 7] == 0x5a, "guest's later write not visible: %#x", m[5 * 4096 + 7]);
	CHECK(xbd_gnt_unmap(p, m, N) == 0, "unmap");
	ptest_send(to_front[1], "u", 1);
	CHECK(ptest_wait(pid) == 0, "frontend process failed");
	xbd_platform_close(p);
	close(to_back[0]);
	close(to_back[1]);
	close(to_front[0]);
	close(to_front[1]);
}

static void statuses(const char *dir)
{
	struct xbd_platform *back = ptest_open(0), *front = ptest_open(1), *other = ptest_open(2);
	grant_entry_v1_t *gt = guest_table(dir, 1);
	uint32_t rw[4], ro[2], to2[1], refs[8];
	unsigned char *prw, *pro, *p2, *m;
	int16_t st[8];

	prw = xbd_gnt_share(front, 0, 4, true, rw);
	pro = xbd_gnt_share(front, 0, 2, false, ro);
	p2 = xbd_gnt_share(front, 2, 1, true, to2);
	CHECK(prw && pro && p2, "share: %s", strerror(errno));
	for (int i = 0; i < 4; i++)
		CHECK(rw[i] >= GNTTAB_NR_RESERVED_ENTRIES, "reserved ref %u handed out", rw[i]);
	pro[0] = 0x77;

	/* One batch, one status each: good, beyond the table, never granted, good. */
	refs[0] = rw[0];
	refs[1] = SIM_NR_GRANTS;
	refs[2] = rw[3] + 1000;
	refs[3] = rw[1];
	errno = 0;
	m = xbd_gnt_map(back, 1, 4, refs, true, st);
	CHECK(!m && errno == EINVAL, "bad batch mapped (errno %d)", errno);
	CHECK(st[0] == GNTST_okay && st[3] == GNTST_okay, "good refs: %d %d", st[0], st[3]);
	CHECK(st[1] == GNTST_bad_gntref, "ref beyond table: %d", st[1]);
	CHECK(st[2] == GNTST_general_error, "ungranted ref: %d", st[2]);
	/* Nothing stays pinned from the failed batch. */
	CHECK(gt[rw[0]].flags == GTF_permit_access, "flags left %#x", gt[rw[0]].flags);
	refs[0] = UINT32_MAX;
	CHECK(!xbd_gnt_map(back, 1, 1, refs, false, st) && st[0] == GNTST_bad_gntref,
	      "ref 0xffffffff: %d", st[0]);

	/* Granted to dom2, not to us. */
	CHECK(!xbd_gnt_map(back, 1, 1, to2, false, st) && st[0] == GNTST_general_error,
	      "wrong domid: %d", st[0]);
	m = xbd_gnt_map(other, 1, 1, to2, true, st);
	CHECK(m && st[0] == GNTST_okay, "dom2 maps its grant: %d", st[0]);
	CHECK(xbd_gnt_unmap(other, m, 1) == 0, "unmap");

	/* Read-only grant: mapping for write fails, for read works and is read-only. */
	CHECK(!xbd_gnt_map(back, 1, 2, ro, true, st) && st[0] == GNTST_general_error &&
	      st[1] == GNTST_general_error, "ro mapped for write: %d %d", st[0], st[1]);
	m = xbd_gnt_map(back, 1, 2, ro, false, st);
	CHECK(m && st[0] == GNTST_okay && m[0] == 0x77, "ro map");
	CHECK(gt[ro[0]].flags == (GTF_permit_access | GTF_readonly | GTF_reading),
	      "ro mapped flags %#x", gt[ro[0]].flags);
	pid_t pid = ptest_fork();
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		((volatile unsigned char *)m)[0] = 1;
		_exit(0);
	}
	CHECK(ptest_wait(pid) == 128 + SIGSEGV, "writing a read-only mapping did not fault");
	CHECK(xbd_gnt_unmap(back, m, 2) == 0, "unmap ro");
	CHECK(gt[ro[0]].flags == (GTF_permit_access | GTF_readonly), "flags after unmap %#x",
	      gt[ro[0]].flags);

	/* In-use flags follow the mappings, per kind. */
	m = xbd_gnt_map(back, 1, 1, rw, true, st);
	CHECK(m, "rw map");
	CHECK(gt[rw[0]].flags == (GTF_permit_access | GTF_reading | GTF_writing), "rw flags %#x",
	      gt[rw[0]].flags);
	unsigned char *m2 = xbd_gnt_map(back, 1, 1, rw, false, st);
	CHECK(m2, "second, read-only map of the same ref");
	CHECK(xbd_gnt_unmap(back, m, 1) == 0, "unmap");
	CHECK(gt[rw[0]].flags == (GTF_permit_access | GTF_reading), "flags with a reader left %#x",
	      gt[rw[0]].flags);
	CHECK(xbd_gnt_unshare(front, prw, 4) == -EBUSY, "ended access under a read mapping");
	CHECK(xbd_gnt_unmap(back, m2, 1) == 0, "unmap");
	CHECK(xbd_gnt_unmap(back, m2, 1) == -EINVAL, "double unmap accepted");

	/* A frame beyond the guest's memory, and odd entry types. */
	gt[rw[2]].frame = 0x7fffffff;
	CHECK(!xbd_gnt_map(back, 1, 1, &rw[2], false, st) && st[0] == GNTST_bad_page,
	      "bad frame: %d", st[0]);
	CHECK(gt[rw[2]].flags == GTF_permit_access, "flags after bad page %#x", gt[rw[2]].flags);
	gt[rw[2]].flags = GTF_permit_access | GTF_sub_page;
	CHECK(!xbd_gnt_map(back, 1, 1, &rw[2], false, st) && st[0] == GNTST_general_error,
	      "sub-page entry: %d", st[0]);
	gt[rw[2]].flags = GTF_transitive;
	CHECK(!xbd_gnt_map(back, 1, 1, &rw[2], false, st) && st[0] == GNTST_general_error,
	      "transitive entry: %d", st[0]);
	gt[rw[2]].flags = GTF_invalid;

	/* Unknown domain. */
	CHECK(!xbd_gnt_map(back, 9, 1, rw, false, st) && st[0] == GNTST_bad_domain,
	      "no such domain: %d", st[0]);
	CHECK(!xbd_gnt_map(back, 0x7ff0, 1, rw, false, st) && st[0] == GNTST_bad_domain,
	      "reserved domid: %d", st[0]);
	CHECK(!xbd_gnt_map(back, 1, 0, rw, false, st) && errno == EINVAL, "zero count");

	CHECK(xbd_gnt_unshare(front, pro, 2) == 0, "unshare ro");
	CHECK(xbd_gnt_unshare(front, p2, 1) == 0, "unshare to2");
	munmap(gt, sizeof(grant_entry_v1_t) * SIM_NR_GRANTS);
	xbd_platform_close(other);
	xbd_platform_close(front);
	xbd_platform_close(back);
}

/* A guest rewriting its entries at random while the backend maps them. */
static void hostile(const char *dir)
{
	struct xbd_platform *back = ptest_open(0), *front = ptest_open(1);
	grant_entry_v1_t *gt = guest_table(dir, 1);
	uint32_t refs[N];
	unsigned char *pages = xbd_gnt_share(front, 0, N, true, refs);
	unsigned int okay = 0, failed = 0;
	volatile int *stop;
	pid_t pid;

	CHECK(pages, "share");
	stop = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(stop != MAP_FAILED, "mmap");
	*stop = 0;
	pid = ptest_fork();
	if (pid == 0) {
		uint64_t x = 88172645463325252ull;

		while (!*stop) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			grant_entry_v1_t *e = &gt[refs[x % N]];

			switch ((x >> 8) % 6) {
			case 0: e->flags = (uint16_t)(x >> 16); break;
			case 1: e->domid = (uint16_t)(x >> 32) & 3; break;
			case 2: e->frame = (uint32_t)(x >> 24); break;
			case 3: e->frame = (uint32_t)(x >> 40) & 0xffff; break;
			default: e->flags = GTF_permit_access; e->domid = 0; break;
			}
		}
		_exit(0);
	}
	for (int i = 0; i < 20000; i++) {
		int16_t st[4];
		uint32_t batch[4] = { refs[i % N], refs[(i * 7) % N], refs[(i * 13) % N], refs[3] };
		unsigned char *m = xbd_gnt_map(back, 1, 4, batch, i & 1, st);

		for (int k = 0; k < 4; k++)
			CHECK(st[k] == GNTST_okay || st[k] == GNTST_general_error ||
			      st[k] == GNTST_bad_page, "status %d", st[k]);
		if (m) {
			volatile unsigned char c = m[0] + m[3 * 4096 + 4095];

			(void)c;
			if (i & 1)
				m[4096] = 1;
			CHECK(xbd_gnt_unmap(back, m, 4) == 0, "unmap");
			okay++;
		} else {
			failed++;
		}
	}
	*stop = 1;
	CHECK(ptest_wait(pid) == 0, "scribbler");
	printf("hostile guest: %u batches mapped, %u refused, no crash\n", okay, failed);
	CHECK(okay > 0 && failed > 0, "the scribbling did not show");
	munmap((void *)stop, 4096);
	munmap(gt, sizeof(grant_entry_v1_t) * SIM_NR_GRANTS);
	xbd_platform_close(front);
	xbd_platform_close(back);
}

static void domain_gone(const char *dir)
{
	struct xbd_platform *back = ptest_open(0), *front = ptest_open(1);
	uint32_t refs[2];
	int16_t st[2];
	unsigned char *pages = xbd_gnt_share(front, 0, 2, true, refs);

	CHECK(pages, "share");
	CHECK(xbd_sim_domain_destroy(dir, 1) == 0, "destroy dom1");
	CHECK(!xbd_gnt_map(back, 1, 2, refs, false, st), "mapped a dead domain's grant");
	CHECK(st[0] == GNTST_bad_domain && st[1] == GNTST_bad_domain, "statuses %d %d", st[0],
	      st[1]);
	CHECK(xbd_domain_state(back, 1) == XBD_DOMAIN_GONE, "state %d", xbd_domain_state(back, 1));
	xbd_platform_close(front);
	xbd_platform_close(back);
}

/* Grant operations from several threads of one platform at once. */
#define THREADS 4
#define PER_THREAD 16

struct worker {
	pthread_t tid;
	struct xbd_platform *back;
	const uint32_t *refs;
	int index;
	int failures;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	const uint32_t *refs = w->refs + w->index * PER_THREAD;
	unsigned char buf[PER_THREAD][64];

	for (int i = 0; i < 1000; i++) {
		struct xbd_gnt_copy_seg segs[PER_THREAD];
		int16_t st[PER_THREAD];
		unsigned char *m = xbd_gnt_map(w->back, 1, PER_THREAD, refs, true, st);

		if (!m) {
			w->failures++;
			continue;
		}
		for (int k = 0; k < PER_THREAD; k++) {
			if (m[k * 4096] != (unsigned char)(w->index * PER_THREAD + k))
				w->failures++;
			m[k * 4096 + 1] = (unsigned char)i;
		}
		if (xbd_gnt_unmap(w->back, m, PER_THREAD))
			w->failures++;
		for (int k = 0; k < PER_THREAD; k++)
			segs[k] = (struct xbd_gnt_copy_seg){ .local = buf[k], .domid = 1,
							     .ref = refs[k], .len = 2 };
		if (xbd_gnt_copy(w->back, PER_THREAD, segs))
			w->failures++;
		for (int k = 0; k < PER_THREAD; k++)
			if (segs[k].status != GNTST_okay || buf[k][1] != (unsigned char)i)
				w->failures++;
	}
	return NULL;
}

static void threads(void)
{
	struct xbd_platform *back = ptest_open(0), *front = ptest_open(1);
	uint32_t refs[THREADS * PER_THREAD];
	unsigned char *pages = xbd_gnt_share(front, 0, THREADS * PER_THREAD, true, refs);
	struct worker w[THREADS];

	CHECK(pages, "share");
	for (int i = 0; i < THREADS * PER_THREAD; i++)
		pages[i * 4096] = (unsigned char)i;
	for (int t = 0; t < THREADS; t++) {
		w[t] = (struct worker){ .back = back, .refs = refs, .index = t };
		CHECK(pthread_create(&w[t].tid, NULL, work, &w[t]) == 0, "pthread_create");
	}
	for (int t = 0; t < THREADS; t++) {
		pthread_join(w[t].tid, NULL);
		CHECK(w[t].failures == 0, "thread %d: %d failures", t, w[t].failures);
	}
	CHECK(xbd_gnt_unshare(front, pages, THREADS * PER_THREAD) == 0, "pins left behind");
	xbd_platform_close(front);
	xbd_platform_close(back);
}

int main(void)
{
	const char *dir = ptest_host(3, 60);

	two_processes();
	threads();
	statuses(dir);
	hostile(dir);
	domain_gone(dir);
	return 0;
}
