/*
 * test-ring-threads: a frontend thread and a backend thread on one shared
 * ring, each sleeping on an eventfd (standing in for the event channel)
 * whenever the final check finds no work.  A missing barrier or a wrong
 * notification rule shows up as a lost wake-up (the test times out with a
 * message) or as a request read before it was fully written (content
 * mismatch).  Prints how many notifications suppression saved.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tests/ring/ring-test.h"

#define TOTAL 30000u
#define WAIT_MS 5000

struct shared_test {
	struct xring front, back;
	int kick_back, kick_front; /* eventfds: "notify the backend/frontend" */
	unsigned long notify_back, notify_front;
	bool failed; /* set by either thread: use fail()/failed() */
};

static void fail(struct shared_test *t)
{
	__atomic_store_n(&t->failed, true, __ATOMIC_RELAXED);
}

static bool failed(struct shared_test *t)
{
	return __atomic_load_n(&t->failed, __ATOMIC_RELAXED);
}

static void kick(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) != sizeof(one))
		abort();
}

/* Sleep until kicked; false if nobody kicked within WAIT_MS (a lost wake-up). */
static bool wait_kick(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t v;

	if (poll(&p, 1, WAIT_MS) != 1)
		return false;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		abort();
	return true;
}

static void *backend(void *arg)
{
	struct shared_test *t = arg;
	static struct xbd_request q[32];
	uint64_t expect = 0;
	int n, i;

	while (expect < TOTAL && !failed(t)) {
		n = xring_back_consume(&t->back, q, 32);
		if (n < 0) {
			fprintf(stderr, "backend: consume: %d\n", n);
			fail(t);
			break;
		}
		for (i = 0; i < n; i++) {
			if (q[i].id != expect || q[i].sector_number != expect * 8 ||
			    q[i].nr_segments != 1 || q[i].seg[0].gref != (uint32_t)~expect) {
				fprintf(stderr, "backend: request %llu arrived garbled\n",
					(unsigned long long)expect);
				fail(t);
			}
			expect++;
			xring_back_put_response(&t->back, q[i].id, q[i].raw_operation,
						BLKIF_RSP_OKAY);
		}
		if (n > 0 && xring_back_push(&t->back)) {
			t->notify_front++;
			kick(t->kick_front);
		}
		if (n == 0 && !xring_back_final_check(&t->back) && !wait_kick(t->kick_back)) {
			fprintf(stderr, "backend: lost wake-up after %llu requests\n",
				(unsigned long long)expect);
			fail(t);
		}
	}
	return NULL;
}

static void frontend(struct shared_test *t)
{
	struct xbd_request q;
	struct xbd_response rsp[32];
	uint64_t sent = 0, done = 0;
	int n, i;

	memset(&q, 0, sizeof(q));
	q.operation = BLKIF_OP_WRITE;
	q.nr_segments = 1;
	q.seg[0].last_sect = 7;
	while (done < TOTAL && !failed(t)) {
		bool wrote = false;

		/*
		 * Alternate strict ping-pong (one request in flight: every
		 * single notification matters), small windows, and a full ring.
		 */
		static const uint64_t windows[] = { 1, 3, UINT64_MAX };
		uint64_t window = windows[(sent / 500) % 3];

		while (sent < TOTAL && sent - done < window && xring_front_free(&t->front) > 0) {
			q.id = sent;
			q.sector_number = sent * 8;
			q.seg[0].gref = (uint32_t)~sent;
			CHECK_EQ(xring_front_put_request(&t->front, &q), 0);
			sent++;
			wrote = true;
		}
		if (wrote && xring_front_push(&t->front)) {
			t->notify_back++;
			kick(t->kick_back);
		}
		n = xring_front_consume(&t->front, rsp, 32);
		if (n < 0) {
			fprintf(stderr, "frontend: consume: %d\n", n);
			fail(t);
			break;
		}
		for (i = 0; i < n; i++) {
			if (rsp[i].id != done || rsp[i].status != BLKIF_RSP_OKAY)
				fail(t);
			done++;
		}
		if (n == 0 && !xring_front_final_check(&t->front) && !wait_kick(t->kick_front)) {
			fprintf(stderr, "frontend: lost wake-up after %llu responses\n",
				(unsigned long long)done);
			fail(t);
		}
	}
}

static void run(enum xbd_abi abi, unsigned int nr_pages)
{
	struct shared_test t;
	void *sring = test_pages(nr_pages);
	pthread_t th;

	memset(&t, 0, sizeof(t));
	xring_init_shared(sring, nr_pages);
	CHECK_EQ(xring_attach(&t.front, sring, nr_pages, abi, XRING_FRONT), 0);
	CHECK_EQ(xring_attach(&t.back, sring, nr_pages, abi, XRING_BACK), 0);
	t.kick_back = eventfd(0, 0);
	t.kick_front = eventfd(0, 0);
	if (t.kick_back < 0 || t.kick_front < 0) {
		perror("eventfd");
		exit(99);
	}
	if (pthread_create(&th, NULL, backend, &t) != 0)
		exit(99);
	frontend(&t);
	if (failed(&t)) {
		/* Wake the backend so that it sees the failure and exits. */
		kick(t.kick_back);
	}
	pthread_join(th, NULL);
	CHECK(!failed(&t));
	/*
	 * Never more kicks than requests (how many fewer depends on thread
	 * timing; test-ring-notify pins the exact rules down).
	 */
	CHECK(t.notify_back <= TOTAL);
	CHECK(t.notify_front <= TOTAL);
	printf("%s, %u page(s): %u requests, %lu kicks to the backend, %lu to the frontend\n",
	       test_abi_names[abi], nr_pages, TOTAL, t.notify_back, t.notify_front);
	close(t.kick_back);
	close(t.kick_front);
	free(sring);
}

int main(void)
{
	run(XBD_ABI_NATIVE, 1);
	run(XBD_ABI_X86_32, 4);
	return test_result("test-ring-threads");
}
