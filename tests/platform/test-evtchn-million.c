/*
 * test-evtchn-million: a million notifications to a slow consumer in
 * another process.  The producer bumps a shared counter before each
 * notify; the consumer, woken through epoll, reads the counter only after
 * taking the event and dawdles before unmasking.  If any notification
 * were lost, the consumer would miss the last counter value and wait
 * forever (we fail after 10 s instead).  Notifications must coalesce
 * (far fewer deliveries than notifications).  Then 20000 strict
 * ping-pong round trips, where every single notification must arrive.
 */
#include "config.h"

#include <sys/epoll.h>
#include <sys/mman.h>

#include "common/clock.h"
#include "tests/platform/ptest.h"

#define NOTIFIES 1000000u
#define ROUND_TRIPS 20000u

struct shared {
	uint32_t counter;
	int port0;   /* dom0's port */
	int port1;   /* dom1's port */
};

static void dawdle(uint64_t ns)
{
	uint64_t end = xbd_mono_ns() + ns;

	while (xbd_mono_ns() < end)
		;
}

/* Wait for the next event on e; fail if none comes in 10 s. */
static int wait_event(int ep, struct xbd_evtchn *e, const char *what, uint32_t at)
{
	for (;;) {
		struct epoll_event got;
		int port = xbd_evtchn_pending(e);

		if (port != -EAGAIN)
			return port;
		CHECK(epoll_wait(ep, &got, 1, 10000) == 1, "%s: lost notification at %u", what, at);
	}
}

static int epoll_for(struct xbd_evtchn *e)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(0);

	CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, xbd_evtchn_fd(e), &ev) == 0, "epoll");
	return ep;
}

int main(void)
{
	struct shared *sh;
	int go[2], done[2];
	char c;
	pid_t pid;

	ptest_host(2, 60);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED, "mmap");
	CHECK(pipe(go) == 0 && pipe(done) == 0, "pipe");

	struct xbd_platform *p0 = ptest_open(0);
	struct xbd_evtchn *e0;

	CHECK(xbd_evtchn_open(p0, &e0) == 0, "open");
	sh->port0 = xbd_evtchn_alloc_unbound(e0, 1);
	CHECK(sh->port0 > 0, "alloc");

	pid = ptest_fork();
	if (pid == 0) {
		struct xbd_platform *p1 = ptest_open(1);
		struct xbd_evtchn *e1;
		int ep;

		CHECK(xbd_evtchn_open(p1, &e1) == 0, "open");
		ep = epoll_for(e1);
		sh->port1 = xbd_evtchn_bind_interdomain(e1, 0, (uint32_t)sh->port0);
		CHECK(sh->port1 > 0, "bind");
		CHECK(wait_event(ep, e1, "initial", 0) == sh->port1, "initial event");
		CHECK(xbd_evtchn_unmask(e1, (uint32_t)sh->port1) == 0, "unmask");
		ptest_send(done[1], "b", 1);
		for (int round = 0; round < 2; round++) {
			ptest_recv(go[0], &c, 1);
			for (uint32_t i = 1; i <= NOTIFIES; i++) {
				__atomic_store_n(&sh->counter, round * NOTIFIES + i, __ATOMIC_SEQ_CST);
				CHECK(xbd_evtchn_notify(e1, (uint32_t)sh->port1) == 0, "notify %u", i);
			}
		}
		/* Echo every notification back, one at a time. */
		for (uint32_t i = 0; i < ROUND_TRIPS; i++) {
			CHECK(wait_event(ep, e1, "ping", i) == sh->port1, "ping port");
			CHECK(xbd_evtchn_unmask(e1, (uint32_t)sh->port1) == 0, "unmask");
			CHECK(xbd_evtchn_notify(e1, (uint32_t)sh->port1) == 0, "pong");
		}
		ptest_recv(go[0], &c, 1);
		xbd_evtchn_close(e1);
		xbd_platform_close(p1);
		_exit(0);
	}

	int ep = epoll_for(e0);
	uint64_t t0, t1 = 0, t2;

	ptest_recv(done[0], &c, 1);
	/* A slow consumer, then one that keeps up as well as it can. */
	for (uint32_t round = 0; round < 2; round++) {
		uint32_t seen = 0, deliveries = 0, last = (round + 1) * NOTIFIES;

		ptest_send(go[1], "g", 1);
		t0 = xbd_mono_ns();
		while (seen < last) {
			int port = wait_event(ep, e0, "million", seen);

			CHECK(port == sh->port0, "port %d", port);
			deliveries++;
			seen = __atomic_load_n(&sh->counter, __ATOMIC_SEQ_CST);
			if (round == 0)
				dawdle(2000);
			CHECK(xbd_evtchn_unmask(e0, (uint32_t)port) == 0, "unmask");
		}
		t1 = xbd_mono_ns();
		/* The producer is done: one last delivery at most, then silence. */
		if (xbd_evtchn_pending(e0) == sh->port0)
			CHECK(xbd_evtchn_unmask(e0, (uint32_t)sh->port0) == 0, "unmask");
		CHECK(xbd_evtchn_pending(e0) == -EAGAIN, "events after the last");
		printf("%u notifications, %u deliveries to a %s consumer, %.2f s\n", NOTIFIES,
		       deliveries, round ? "fast" : "slow", (double)(t1 - t0) / 1e9);
		CHECK(deliveries >= 1 && deliveries <= NOTIFIES, "%u deliveries", deliveries);
		if (round == 0)
			CHECK(deliveries < NOTIFIES / 4, "no coalescing: %u deliveries", deliveries);
	}

	for (uint32_t i = 0; i < ROUND_TRIPS; i++) {
		CHECK(xbd_evtchn_notify(e0, (uint32_t)sh->port0) == 0, "ping");
		CHECK(wait_event(ep, e0, "pong", i) == sh->port0, "pong port");
		CHECK(xbd_evtchn_unmask(e0, (uint32_t)sh->port0) == 0, "unmask");
	}
	t2 = xbd_mono_ns();
	printf("%u round trips between processes, %.1f us each\n", ROUND_TRIPS,
	       (double)(t2 - t1) / ROUND_TRIPS / 1e3);
	ptest_send(go[1], "q", 1);
	CHECK(ptest_wait(pid) == 0, "producer failed");
	close(ep);
	xbd_evtchn_close(e0);
	xbd_platform_close(p0);
	return 0;
}
