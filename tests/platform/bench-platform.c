/*
 * bench-platform: what the simulator costs the data path, per operation a
 * backend does per batch: map and unmap 32 grant references, grant-copy
 * 32 segments, notify.  Run by `make bench-platform`; `-n N` scales the
 * iterations (check runs it tiny, only to see that it works).
 *
 *   usage: bench-platform [-n ITERATIONS]
 */
#include "config.h"

#include <fcntl.h>
#include <getopt.h>
#include <sys/mman.h>
#include <time.h>

#include "common/clock.h"
#include "tests/platform/ptest.h"

#define BATCH 32

static double bench_map(struct xbd_platform *back, const uint32_t *refs, unsigned int iters,
			bool touch)
{
	int16_t st[BATCH];
	uint64_t t0 = xbd_mono_ns();

	for (unsigned int i = 0; i < iters; i++) {
		volatile unsigned char *m = xbd_gnt_map(back, 1, BATCH, refs, true, st);

		CHECK(m, "map: %s", strerror(errno));
		if (touch)
			for (int k = 0; k < BATCH; k++)
				m[k * 4096] = (unsigned char)i;
		CHECK(xbd_gnt_unmap(back, (void *)m, BATCH) == 0, "unmap");
	}
	return (double)(xbd_mono_ns() - t0) / iters;
}

/*
 * Baseline for a map: the same mmap work done directly on a tmpfs file
 * (reserve, one MAP_FIXED mmap per run of adjacent pages, munmap), which
 * is the floor of any mapping scheme.
 */
static double baseline_map(unsigned int iters, bool scattered, bool touch)
{
	int fd = memfd_create("bench", MFD_CLOEXEC);
	uint64_t t0;

	CHECK(fd >= 0 && ftruncate(fd, 2 * BATCH * 4096) == 0, "memfd");
	t0 = xbd_mono_ns();
	for (unsigned int i = 0; i < iters; i++) {
		char *base = mmap(NULL, BATCH * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		CHECK(base != MAP_FAILED, "mmap");
		if (scattered) {
			for (int k = 0; k < BATCH; k++)
				CHECK(mmap(base + k * 4096, 4096, PROT_READ | PROT_WRITE,
					   MAP_SHARED | MAP_FIXED, fd, (off_t)k * 2 * 4096) != MAP_FAILED,
				      "mmap");
		} else {
			CHECK(mmap(base, BATCH * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
				   fd, 0) != MAP_FAILED, "mmap");
		}
		if (touch)
			for (int k = 0; k < BATCH; k++)
				((volatile char *)base)[k * 4096] = (char)i;
		munmap(base, BATCH * 4096);
	}
	close(fd);
	return (double)(xbd_mono_ns() - t0) / iters;
}

/* Baseline for a copy: memcpy of the same bytes between the same buffers. */
static double baseline_copy(unsigned int iters, unsigned char *dst, const unsigned char *src)
{
	uint64_t t0 = xbd_mono_ns();

	for (unsigned int i = 0; i < iters; i++) {
		for (int k = 0; k < BATCH; k++)
			memcpy(dst + k * 4096, src + k * 4096, 4096);
		__asm__ volatile("" ::: "memory");
	}
	return (double)(xbd_mono_ns() - t0) / iters;
}

/* Baseline for a wake-up: one byte written into a FIFO, read back. */
static double baseline_wake(unsigned int iters, bool read_back)
{
	int fds[2];
	char b;
	uint64_t t0;

	CHECK(pipe2(fds, O_NONBLOCK) == 0, "pipe");
	t0 = xbd_mono_ns();
	for (unsigned int i = 0; i < iters; i++) {
		CHECK(write(fds[1], "", 1) == 1, "write");
		if (read_back)
			CHECK(read(fds[0], &b, 1) == 1, "read");
		else if ((i & 1023) == 1023)
			while (read(fds[0], &b, 1) == 1)
				;
	}
	close(fds[0]);
	close(fds[1]);
	return (double)(xbd_mono_ns() - t0) / iters;
}

static double bench_copy(struct xbd_platform *back, const uint32_t *refs, unsigned int iters,
			 bool to_guest, unsigned char *buf)
{
	struct xbd_gnt_copy_seg segs[BATCH];
	uint64_t t0 = xbd_mono_ns();

	for (unsigned int i = 0; i < iters; i++) {
		for (int k = 0; k < BATCH; k++)
			segs[k] = (struct xbd_gnt_copy_seg){ .local = buf + k * 4096, .domid = 1,
							     .ref = refs[k], .offset = 0,
							     .len = 4096, .to_guest = to_guest };
		CHECK(xbd_gnt_copy(back, BATCH, segs) == 0, "copy");
		for (int k = 0; k < BATCH; k++)
			CHECK(segs[k].status == GNTST_okay, "segment %d: %d", k, segs[k].status);
	}
	return (double)(xbd_mono_ns() - t0) / iters;
}

int main(int argc, char **argv)
{
	unsigned int iters = 10000, c;
	struct xbd_platform *back, *front;
	uint32_t refs[2 * BATCH], adjacent[BATCH], scattered[BATCH];
	unsigned char *pages, *buf;

	while ((c = (unsigned int)getopt(argc, argv, "n:")) != (unsigned int)-1) {
		if (c != 'n') {
			fprintf(stderr, "usage: bench-platform [-n ITERATIONS]\n");
			return 2;
		}
		iters = (unsigned int)strtoul(optarg, NULL, 0);
		if (!iters)
			iters = 1;
	}
	ptest_host(2, 600);
	back = ptest_open(0);
	front = ptest_open(1);
	pages = xbd_gnt_share(front, 0, 2 * BATCH, true, refs);
	CHECK(pages, "share");
	for (int k = 0; k < BATCH; k++) {
		adjacent[k] = refs[k];
		/* Every other page: no two frames adjacent, one mmap each. */
		scattered[k] = refs[2 * k];
	}
	buf = aligned_alloc(4096, BATCH * 4096);
	CHECK(buf, "alloc");
	memset(buf, 1, BATCH * 4096);

	printf("xbd platform micro-benchmark: simulator, %u iterations\n", iters);
	printf("  %-40s %10s %12s  %s\n", "operation", "sim", "baseline", "(baseline is)");
	printf("  %-40s %7.0f ns %9.0f ns  (mmap+munmap of a tmpfs file)\n",
	       "map+unmap 32 refs, adjacent frames", bench_map(back, adjacent, iters, false),
	       baseline_map(iters, false, false));
	printf("  %-40s %7.0f ns %9.0f ns  (32 mmaps+munmap of a tmpfs file)\n",
	       "map+unmap 32 refs, scattered frames", bench_map(back, scattered, iters, false),
	       baseline_map(iters, true, false));
	printf("  %-40s %7.0f ns %9.0f ns  (the same, touching each page)\n",
	       "map+touch+unmap 32 refs, scattered", bench_map(back, scattered, iters, true),
	       baseline_map(iters, true, true));
	printf("  %-40s %7.0f ns %9.0f ns  (memcpy of the same 128 KiB)\n",
	       "grant copy 32 x 4 KiB from guest", bench_copy(back, adjacent, iters, false, buf),
	       baseline_copy(iters, buf, pages));
	printf("  %-40s %7.0f ns %9.0f ns  (memcpy of the same 128 KiB)\n",
	       "grant copy 32 x 4 KiB to guest", bench_copy(back, adjacent, iters, true, buf),
	       baseline_copy(iters, pages, buf));

	/* Notify: a backend -> frontend channel inside this process. */
	struct xbd_evtchn *eb, *ef;
	int pb, pf;
	unsigned int n_notify = iters * 50;
	uint64_t t0;

	CHECK(xbd_evtchn_open(back, &eb) == 0 && xbd_evtchn_open(front, &ef) == 0, "open");
	pb = xbd_evtchn_alloc_unbound(eb, 1);
	pf = xbd_evtchn_bind_interdomain(ef, 0, (uint32_t)pb);
	CHECK(pb > 0 && pf > 0, "bind");
	while (xbd_evtchn_pending(ef) != pf)
		;
	/* Peer busy (port masked): the notification only marks it pending. */
	CHECK(xbd_evtchn_notify(eb, (uint32_t)pb) == 0, "notify");
	t0 = xbd_mono_ns();
	for (unsigned int i = 0; i < n_notify; i++)
		xbd_evtchn_notify(eb, (uint32_t)pb);
	printf("  %-40s %7.1f ns %9s     (no system call at all)\n", "notify, peer busy (coalesced)",
	       (double)(xbd_mono_ns() - t0) / n_notify, "-");
	/*
	 * Peer idle: each notification wakes it (one sendto); the peer reads
	 * it and unmasks.  Timed as a whole, and the notify call alone.
	 */
	CHECK(xbd_evtchn_unmask(ef, (uint32_t)pf) == 0, "unmask");
	while (xbd_evtchn_pending(ef) == pf)
		xbd_evtchn_unmask(ef, (uint32_t)pf);
	uint64_t alone = 0, clock_cost;

	t0 = xbd_mono_ns();
	for (unsigned int i = 0; i < iters; i++)
		xbd_mono_ns();
	clock_cost = (xbd_mono_ns() - t0) / iters;
	t0 = xbd_mono_ns();
	for (unsigned int i = 0; i < iters; i++) {
		uint64_t t = xbd_mono_ns();

		xbd_evtchn_notify(eb, (uint32_t)pb);
		alone += xbd_mono_ns() - t - clock_cost;
		CHECK(xbd_evtchn_pending(ef) == pf, "not delivered");
		CHECK(xbd_evtchn_unmask(ef, (uint32_t)pf) == 0, "unmask");
	}
	double total = (double)(xbd_mono_ns() - t0) / iters;

	printf("  %-40s %7.0f ns %9.0f ns  (write of one byte into a pipe)\n",
	       "notify, peer idle (wakes it)", (double)alone / iters, baseline_wake(iters, false));
	printf("  %-40s %7.0f ns %9.0f ns  (pipe write + read)\n",
	       "notify+pending+unmask, peer idle", total, baseline_wake(iters, true));
	xbd_evtchn_close(eb);
	xbd_evtchn_close(ef);
	free(buf);
	CHECK(xbd_gnt_unshare(front, pages, 2 * BATCH) == 0, "unshare");
	xbd_platform_close(front);
	xbd_platform_close(back);
	return 0;
}
