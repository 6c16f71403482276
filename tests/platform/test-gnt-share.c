/*
 * test-gnt-share: granting our own pages.  Pages come zeroed even when
 * reused; references are distinct and never the reserved ones, also when
 * two processes grant as the same domain at once; ending access is all or
 * nothing: while any page is mapped it fails with -EBUSY and every grant
 * still maps, afterwards it succeeds and the references map no more;
 * a mapping process killed with its pages mapped maps them no more (the
 * kernel's gntdev unmaps a process's grants when it exits), while the same
 * page mapped by a live process still holds; running out of guest memory is -ENOMEM; bad arguments are -EINVAL.
 */
#include "config.h"

#include "tests/platform/ptest.h"

#define PER_PROC 100

static void zeroed_and_reused(void)
{
	struct xbd_platform *front = ptest_open(1);
	uint32_t refs[8];
	unsigned char *a = xbd_gnt_share(front, 0, 8, true, refs);

	CHECK(a, "share: %s", strerror(errno));
	memset(a, 0xff, 8 * 4096);
	CHECK(xbd_gnt_unshare(front, a, 8) == 0, "unshare");
	a = xbd_gnt_share(front, 0, 8, true, refs);
	CHECK(a, "share again");
	for (int i = 0; i < 8 * 4096; i++)
		CHECK(a[i] == 0, "byte %d of a new share is %#x", i, a[i]);
	CHECK(xbd_gnt_unshare(front, a, 7) == -EINVAL, "wrong count accepted");
	CHECK(xbd_gnt_unshare(front, a + 4096, 7) == -EINVAL, "unknown address accepted");
	CHECK(xbd_gnt_unshare(front, a, 8) == 0, "unshare");
	CHECK(!xbd_gnt_share(front, 0, 0, true, refs) && errno == EINVAL, "zero pages");
	CHECK(!xbd_gnt_share(front, DOMID_FIRST_RESERVED, 1, true, refs) && errno == EINVAL,
	      "reserved domid");
	xbd_platform_close(front);
}

static void all_or_nothing(void)
{
	struct xbd_platform *back = ptest_open(0), *front = ptest_open(1);
	uint32_t refs[4];
	int16_t st[4];
	unsigned char *a = xbd_gnt_share(front, 0, 4, true, refs), *m, *m0;

	CHECK(a, "share");
	m = xbd_gnt_map(back, 1, 1, &refs[3], true, st);
	CHECK(m, "map the last page");
	CHECK(xbd_gnt_unshare(front, a, 4) == -EBUSY, "ended access under a mapping");
	/* The pages before the busy one were granted again, not left ended. */
	m0 = xbd_gnt_map(back, 1, 3, refs, true, st);
	CHECK(m0, "pages of a refused unshare no longer map: %d %d %d", st[0], st[1], st[2]);
	m0[0] = 1;
	CHECK(a[0] == 1, "same memory");
	CHECK(xbd_gnt_unmap(back, m0, 3) == 0 && xbd_gnt_unmap(back, m, 1) == 0, "unmap");
	CHECK(xbd_gnt_unshare(front, a, 4) == 0, "unshare once unmapped");
	CHECK(!xbd_gnt_map(back, 1, 4, refs, false, st), "ended grants still map");
	for (int i = 0; i < 4; i++)
		CHECK(st[i] == GNTST_general_error, "status %d of an ended grant: %d", i, st[i]);
	xbd_platform_close(front);
	xbd_platform_close(back);
}

/* A killed mapper's pins go with it; a live mapper's of the same page stay. */
static void killed_mapper(void)
{
	struct xbd_platform *front = ptest_open(1), *back;
	uint32_t refs[4];
	int16_t st[4];
	unsigned char *a = xbd_gnt_share(front, 0, 4, true, refs), *m;
	int fds[2];
	char ok;
	pid_t pid;

	CHECK(a, "share");
	CHECK(pipe(fds) == 0, "pipe");
	pid = ptest_fork();
	if (pid == 0) {
		back = ptest_open(0);
		/* Writable and read-only, one page of them twice. */
		CHECK(xbd_gnt_map(back, 1, 3, refs, true, st), "child: map 3 writable");
		CHECK(xbd_gnt_map(back, 1, 2, &refs[2], false, st), "child: map 2 read-only");
		ok = 1;
		ptest_send(fds[1], &ok, 1);
		pause();
		_exit(0);
	}
	ptest_recv(fds[0], &ok, 1);
	back = ptest_open(0);
	m = xbd_gnt_map(back, 1, 1, &refs[3], false, st);
	CHECK(m, "map the last page in the parent too");
	CHECK(xbd_gnt_unshare(front, a, 4) == -EBUSY, "ended access under live mappings");
	kill(pid, SIGKILL);
	CHECK(ptest_wait(pid) == 128 + SIGKILL, "child killed");
	CHECK(xbd_gnt_unshare(front, a, 4) == -EBUSY, "ended access under the parent's mapping");
	CHECK(xbd_gnt_unmap(back, m, 1) == 0, "unmap");
	CHECK(xbd_gnt_unshare(front, a, 4) == 0,
	      "the killed mapper's pages stay mapped after it died");
	xbd_platform_close(back);
	xbd_platform_close(front);
	close(fds[0]);
	close(fds[1]);
}

static void out_of_memory(const char *dir)
{
	struct xbd_platform *small;
	uint32_t refs[300];
	unsigned char *a;

	CHECK(xbd_sim_domain_create(dir, 5, 1 << 20) == 0, "create a 1 MiB domain");
	small = ptest_open(5);
	CHECK(!xbd_gnt_share(small, 0, 257, true, refs) && errno == ENOMEM, "257 pages of 256");
	a = xbd_gnt_share(small, 0, 256, true, refs);
	CHECK(a, "all 256 pages: %s", strerror(errno));
	CHECK(!xbd_gnt_share(small, 0, 1, true, refs) && errno == ENOMEM, "one more page");
	CHECK(xbd_gnt_unshare(small, a, 256) == 0, "unshare");
	a = xbd_gnt_share(small, 0, 1, true, refs);
	CHECK(a, "pages come back after unshare");
	xbd_platform_close(small);
}

/* Two processes as dom1 grant at the same time: no reference or page twice. */
static void two_processes_one_domain(void)
{
	int fds[2];
	uint32_t mine[PER_PROC], theirs[PER_PROC];
	pid_t pid;

	CHECK(pipe(fds) == 0, "pipe");
	pid = ptest_fork();
	struct xbd_platform *front = ptest_open(1);
	unsigned char *a = xbd_gnt_share(front, 0, PER_PROC, true, mine);

	CHECK(a, "share in %s", pid ? "parent" : "child");
	for (int i = 0; i < PER_PROC; i++)
		memset(a + i * 4096, pid ? 0xa0 : 0x0b, 4096);
	if (pid == 0) {
		ptest_send(fds[1], mine, sizeof(mine));
		/* Exit with the pages still granted: the parent maps them. */
		_exit(0);
	}
	ptest_recv(fds[0], theirs, sizeof(theirs));
	CHECK(ptest_wait(pid) == 0, "child");

	struct xbd_platform *back = ptest_open(0);
	int16_t st[PER_PROC];
	unsigned char *m1 = xbd_gnt_map(back, 1, PER_PROC, mine, false, st);
	unsigned char *m2 = xbd_gnt_map(back, 1, PER_PROC, theirs, false, st);

	CHECK(m1 && m2, "map both sets");
	for (int i = 0; i < PER_PROC; i++) {
		for (int k = 0; k < PER_PROC; k++)
			CHECK(mine[i] != theirs[k], "reference %u handed out twice", mine[i]);
		CHECK(m1[i * 4096] == 0xa0 && m1[i * 4096 + 4095] == 0xa0, "parent page %d", i);
		CHECK(m2[i * 4096] == 0x0b && m2[i * 4096 + 4095] == 0x0b, "child page %d", i);
	}
	xbd_gnt_unmap(back, m1, PER_PROC);
	xbd_gnt_unmap(back, m2, PER_PROC);
	xbd_platform_close(back);
	xbd_platform_close(front);
	close(fds[0]);
	close(fds[1]);
}

int main(void)
{
	const char *dir = ptest_host(2, 60);

	zeroed_and_reused();
	all_or_nothing();
	killed_mapper();
	out_of_memory(dir);
	two_processes_one_domain();
	return 0;
}
