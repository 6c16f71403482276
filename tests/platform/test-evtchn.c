/*
 * test-evtchn: interdomain event channels.
 * - Across two processes: alloc unbound, bind, notify each way, the
 *   handle's fd becomes readable for poll and epoll.
 * - Xen's pending/mask rules: the binder's port starts pending; a
 *   delivered port stays masked; notifications while masked coalesce into
 *   one delivery at unmask; nothing is delivered twice or lost.
 * - Several ports on one handle are each delivered once, with the fd
 *   readable until all are read.
 * - Errors: binding a domain that does not exist (-ESRCH), a port not
 *   offered to us or out of range (-EINVAL); notify/unbind/unmask of a
 *   port this handle does not hold (-ENOTCONN).
 * - When the peer unbinds, or its domain is destroyed, notify is dropped
 *   (returns 0, nothing arrives); the peer's domain may bind again.
 * - A process that dies without closing its handle leaves nothing bound,
 *   as Linux's evtchn release closes its ports: a restarted backend binds
 *   the guest's port again and its notifications arrive; a domain whose
 *   dead processes left every port allocated can allocate again.
 */
#include "config.h"

#include <poll.h>
#include <sys/epoll.h>

#include "tests/platform/ptest.h"

static bool readable(struct xbd_evtchn *e, int ms)
{
	struct pollfd pfd = { .fd = xbd_evtchn_fd(e), .events = POLLIN };

	return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLIN);
}

/* The next delivered port, waiting up to ms for the fd. */
static int next_port(struct xbd_evtchn *e, int ms)
{
	int r = xbd_evtchn_pending(e);

	if (r != -EAGAIN)
		return r;
	if (!readable(e, ms))
		return -ETIMEDOUT;
	return xbd_evtchn_pending(e);
}

static void two_processes(void)
{
	int to_child[2], to_parent[2];
	int port, lport;
	char cmd;
	pid_t pid;

	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0, "pipe");
	pid = ptest_fork();
	if (pid == 0) {
		struct xbd_platform *p = ptest_open(1);
		struct xbd_evtchn *e;
		struct epoll_event ev = { .events = EPOLLIN }, got;
		int ep = epoll_create1(0);

		CHECK(xbd_evtchn_open(p, &e) == 0, "open");
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, xbd_evtchn_fd(e), &ev) == 0, "epoll_ctl");
		ptest_recv(to_child[0], &port, sizeof(port));
		lport = xbd_evtchn_bind_interdomain(e, 0, (uint32_t)port);
		CHECK(lport > 0, "bind: %d", lport);
		/* Xen leaves the binder's port pending. */
		CHECK(epoll_wait(ep, &got, 1, 5000) == 1, "no initial event");
		CHECK(xbd_evtchn_pending(e) == lport, "initial pending");
		CHECK(xbd_evtchn_unmask(e, (uint32_t)lport) == 0, "unmask");
		CHECK(xbd_evtchn_pending(e) == -EAGAIN, "spurious port");
		ptest_send(to_parent[1], &lport, sizeof(lport));
		CHECK(xbd_evtchn_notify(e, (uint32_t)lport) == 0, "notify");
		/* And the parent's notification comes back through epoll. */
		CHECK(epoll_wait(ep, &got, 1, 5000) == 1, "no event from dom0");
		CHECK(xbd_evtchn_pending(e) == lport, "pending");
		CHECK(xbd_evtchn_unmask(e, (uint32_t)lport) == 0, "unmask");
		ptest_recv(to_child[0], &cmd, 1);
		xbd_evtchn_close(e);
		xbd_platform_close(p);
		close(ep);
		_exit(0);
	}

	struct xbd_platform *p = ptest_open(0);
	struct xbd_evtchn *e;

	CHECK(xbd_evtchn_open(p, &e) == 0, "open");
	port = xbd_evtchn_alloc_unbound(e, 1);
	CHECK(port > 0, "alloc unbound: %d", port);
	ptest_send(to_child[1], &port, sizeof(port));
	ptest_recv(to_parent[0], &lport, sizeof(lport));
	CHECK(next_port(e, 5000) == port, "notify from dom1 not delivered");
	CHECK(xbd_evtchn_unmask(e, (uint32_t)port) == 0, "unmask");
	CHECK(xbd_evtchn_notify(e, (uint32_t)port) == 0, "notify dom1");
	ptest_send(to_child[1], "q", 1);
	CHECK(ptest_wait(pid) == 0, "child failed");
	/* The child closed its end: ours is unbound, notify drops. */
	CHECK(xbd_evtchn_notify(e, (uint32_t)port) == 0, "notify after peer closed");
	xbd_evtchn_close(e);
	xbd_platform_close(p);
	close(to_child[0]);
	close(to_child[1]);
	close(to_parent[0]);
	close(to_parent[1]);
}

/* A channel between dom0 handle a and dom1 handle b, b's initial event eaten. */
static void connect_pair(struct xbd_evtchn *a, struct xbd_evtchn *b, int *pa, int *pb)
{
	*pa = xbd_evtchn_alloc_unbound(a, 1);
	CHECK(*pa > 0, "alloc: %d", *pa);
	*pb = xbd_evtchn_bind_interdomain(b, 0, (uint32_t)*pa);
	CHECK(*pb > 0, "bind: %d", *pb);
	CHECK(next_port(b, 1000) == *pb, "initial event");
	CHECK(xbd_evtchn_unmask(b, (uint32_t)*pb) == 0, "unmask");
}

static void pending_and_mask(void)
{
	struct xbd_platform *p0 = ptest_open(0), *p1 = ptest_open(1);
	struct xbd_evtchn *a, *b;
	int pa, pb;

	CHECK(xbd_evtchn_open(p0, &a) == 0 && xbd_evtchn_open(p1, &b) == 0, "open");
	connect_pair(a, b, &pa, &pb);
	CHECK(!readable(a, 0) && xbd_evtchn_pending(a) == -EAGAIN, "dom0 woken for nothing");

	/* Many notifications, one delivery. */
	for (int i = 0; i < 100; i++)
		CHECK(xbd_evtchn_notify(b, (uint32_t)pb) == 0, "notify");
	CHECK(readable(a, 1000), "fd not readable");
	CHECK(xbd_evtchn_pending(a) == pa, "pending");
	CHECK(xbd_evtchn_pending(a) == -EAGAIN, "coalesced notifications delivered twice");
	/* Masked now: notifications only mark it pending. */
	for (int i = 0; i < 100; i++)
		CHECK(xbd_evtchn_notify(b, (uint32_t)pb) == 0, "notify");
	CHECK(!readable(a, 50) && xbd_evtchn_pending(a) == -EAGAIN, "delivered while masked");
	/* Unmask re-delivers what arrived meanwhile, once. */
	CHECK(xbd_evtchn_unmask(a, (uint32_t)pa) == 0, "unmask");
	CHECK(readable(a, 1000), "not re-delivered at unmask");
	CHECK(xbd_evtchn_pending(a) == pa, "pending after unmask");
	CHECK(xbd_evtchn_pending(a) == -EAGAIN, "twice");
	/* Unmask with nothing new: nothing is delivered. */
	CHECK(xbd_evtchn_unmask(a, (uint32_t)pa) == 0, "unmask");
	CHECK(!readable(a, 50) && xbd_evtchn_pending(a) == -EAGAIN, "delivered from nothing");
	/* And the other way round. */
	CHECK(xbd_evtchn_notify(a, (uint32_t)pa) == 0, "notify back");
	CHECK(next_port(b, 1000) == pb, "dom1 not notified");
	CHECK(xbd_evtchn_unmask(b, (uint32_t)pb) == 0, "unmask");

	/* Three ports on one handle: each delivered once, fd readable until read. */
	int qa[3], qb[3], seen = 0;

	for (int i = 0; i < 3; i++)
		connect_pair(a, b, &qa[i], &qb[i]);
	for (int i = 0; i < 3; i++)
		CHECK(xbd_evtchn_notify(b, (uint32_t)qb[i]) == 0, "notify");
	for (int n = 0; n < 3; n++) {
		int port;

		CHECK(readable(a, 1000), "fd not readable with %d ports left", 3 - n);
		port = xbd_evtchn_pending(a);
		for (int i = 0; i < 3; i++)
			if (port == qa[i]) {
				CHECK(!(seen & (1 << i)), "port %d delivered twice", port);
				seen |= 1 << i;
			}
	}
	CHECK(seen == 7, "ports delivered: %#x", seen);
	CHECK(xbd_evtchn_pending(a) == -EAGAIN, "extra port");
	for (int i = 0; i < 3; i++) {
		CHECK(xbd_evtchn_unbind(a, (uint32_t)qa[i]) == 0, "unbind");
		CHECK(xbd_evtchn_unbind(b, (uint32_t)qb[i]) == 0, "unbind");
	}

	/* Peer unbinds: notify is dropped, the port may be bound again by dom1. */
	CHECK(xbd_evtchn_unbind(b, (uint32_t)pb) == 0, "unbind");
	CHECK(xbd_evtchn_notify(b, (uint32_t)pb) == -ENOTCONN, "notify on an unbound port");
	CHECK(xbd_evtchn_unmask(b, (uint32_t)pb) == -ENOTCONN, "unmask on an unbound port");
	CHECK(xbd_evtchn_unbind(b, (uint32_t)pb) == -ENOTCONN, "unbind twice");
	CHECK(xbd_evtchn_notify(a, (uint32_t)pa) == 0, "notify towards a closed port");
	CHECK(!readable(b, 50), "closed port delivered");
	pb = xbd_evtchn_bind_interdomain(b, 0, (uint32_t)pa);
	CHECK(pb > 0, "bind again: %d", pb);
	CHECK(next_port(b, 1000) == pb, "initial event");
	CHECK(xbd_evtchn_unmask(b, (uint32_t)pb) == 0, "unmask");
	CHECK(xbd_evtchn_notify(a, (uint32_t)pa) == 0, "notify");
	CHECK(next_port(b, 1000) == pb, "rebound port not notified");
	CHECK(xbd_evtchn_unmask(b, (uint32_t)pb) == 0, "unmask");

	xbd_evtchn_close(a);
	xbd_evtchn_close(b);
	xbd_platform_close(p0);
	xbd_platform_close(p1);
}

static void errors(const char *dir)
{
	struct xbd_platform *p0 = ptest_open(0), *p1 = ptest_open(1), *p2 = ptest_open(2);
	struct xbd_evtchn *a, *a2, *b, *c;
	int pa, pb, port;

	CHECK(xbd_evtchn_open(p0, &a) == 0 && xbd_evtchn_open(p0, &a2) == 0 &&
	      xbd_evtchn_open(p1, &b) == 0 && xbd_evtchn_open(p2, &c) == 0, "open");
	CHECK(xbd_evtchn_bind_interdomain(b, 9, 1) == -ESRCH, "bind to no domain");
	pa = xbd_evtchn_alloc_unbound(a, 2);
	CHECK(pa > 0, "alloc for dom2");
	CHECK(xbd_evtchn_bind_interdomain(b, 0, (uint32_t)pa) == -EINVAL, "bound a port for dom2");
	CHECK(xbd_evtchn_bind_interdomain(b, 0, 0) == -EINVAL, "port 0");
	CHECK(xbd_evtchn_bind_interdomain(b, 0, 5000) == -EINVAL, "port beyond range");
	CHECK(xbd_evtchn_bind_interdomain(b, 0, 4000) == -EINVAL, "free port");
	/* Another handle of the same domain does not hold the port. */
	CHECK(xbd_evtchn_notify(a2, (uint32_t)pa) == -ENOTCONN, "notify on another handle's port");
	CHECK(xbd_evtchn_unbind(a2, (uint32_t)pa) == -ENOTCONN, "unbind another handle's port");
	CHECK(xbd_evtchn_notify(a, 100000) == -EINVAL, "port beyond range");
	/* Not yet bound: the notification is dropped. */
	CHECK(xbd_evtchn_notify(a, (uint32_t)pa) == 0, "notify on an unbound port");
	port = xbd_evtchn_bind_interdomain(c, 0, (uint32_t)pa);
	CHECK(port > 0, "dom2 binds: %d", port);
	CHECK(xbd_evtchn_bind_interdomain(c, 0, (uint32_t)pa) == -EINVAL, "bound twice");

	/* Loopback inside one domain. */
	int l1 = xbd_evtchn_alloc_unbound(a, 0);
	int l2 = xbd_evtchn_bind_interdomain(a2, 0, (uint32_t)l1);

	CHECK(l1 > 0 && l2 > 0 && l1 != l2, "loopback %d %d", l1, l2);
	CHECK(next_port(a2, 1000) == l2, "initial");
	CHECK(xbd_evtchn_notify(a2, (uint32_t)l2) == 0, "notify");
	CHECK(next_port(a, 1000) == l1, "loopback notify");

	/* Destroying dom1 closes its channels: ours become unbound. */
	pa = xbd_evtchn_alloc_unbound(a, 1);
	pb = xbd_evtchn_bind_interdomain(b, 0, (uint32_t)pa);
	CHECK(pb > 0, "bind");
	CHECK(next_port(b, 1000) == pb, "initial");
	CHECK(xbd_evtchn_unmask(b, (uint32_t)pb) == 0, "unmask");
	CHECK(xbd_sim_domain_destroy(dir, 1) == 0, "destroy dom1");
	CHECK(xbd_evtchn_notify(a, (uint32_t)pa) == 0, "notify to a dead domain");
	CHECK(!readable(b, 50), "dead domain notified");
	CHECK(xbd_evtchn_notify(b, (uint32_t)pb) == -ENOTCONN, "dead domain still notifies");
	CHECK(xbd_evtchn_bind_interdomain(a, 1, 1) == -ESRCH, "bind to a dead domain");
	CHECK(xbd_evtchn_alloc_unbound(b, 0) == -ESRCH, "a dead domain allocates ports");

	xbd_evtchn_close(a);
	xbd_evtchn_close(a2);
	xbd_evtchn_close(b);
	xbd_evtchn_close(c);
	xbd_platform_close(p0);
	xbd_platform_close(p1);
	xbd_platform_close(p2);
}

/* Run fn(arg) in a child that dies by SIGKILL, its handles left open. */
static void in_killed_child(void (*fn)(int *), int *arg)
{
	int to_parent[2];
	pid_t pid;

	CHECK(pipe(to_parent) == 0, "pipe");
	pid = ptest_fork();
	if (pid == 0) {
		fn(arg);
		ptest_send(to_parent[1], arg, sizeof(*arg));
		raise(SIGKILL);
	}
	ptest_recv(to_parent[0], arg, sizeof(*arg));
	CHECK(ptest_wait(pid) == 128 + SIGKILL, "child did not die by SIGKILL");
	close(to_parent[0]);
	close(to_parent[1]);
}

static void bind_as_dom0(int *port)
{
	struct xbd_evtchn *e;

	CHECK(xbd_evtchn_open(ptest_open(0), &e) == 0, "open");
	*port = xbd_evtchn_bind_interdomain(e, 1, (uint32_t)*port);
	CHECK(*port > 0, "first bind: %d", *port);
}

static void use_up_ports(int *count)
{
	struct xbd_evtchn *e;
	int r;

	CHECK(xbd_evtchn_open(ptest_open(2), &e) == 0, "open");
	*count = 0;
	while ((r = xbd_evtchn_alloc_unbound(e, 0)) > 0)
		(*count)++;
	CHECK(*count > 1000, "only %d ports: %d", *count, r);
}

static void dead_owner(void)
{
	struct xbd_platform *p0 = ptest_open(0), *p1 = ptest_open(1), *p2 = ptest_open(2);
	struct xbd_evtchn *g, *b, *g2;
	int gport, arg, bport, n;

	CHECK(xbd_evtchn_open(p1, &g) == 0 && xbd_evtchn_open(p0, &b) == 0, "open");
	gport = xbd_evtchn_alloc_unbound(g, 0);
	CHECK(gport > 0, "alloc: %d", gport);
	arg = gport;
	in_killed_child(bind_as_dom0, &arg);
	/* The restarted backend: the dead one's binding must not be in the way. */
	bport = xbd_evtchn_bind_interdomain(b, 1, (uint32_t)gport);
	CHECK(bport > 0, "binding again after the binder was killed: %d (%s)", bport,
	      strerror(bport < 0 ? -bport : 0));
	CHECK(next_port(b, 1000) == bport, "initial event");
	CHECK(xbd_evtchn_unmask(b, (uint32_t)bport) == 0, "unmask");
	CHECK(xbd_evtchn_notify(g, (uint32_t)gport) == 0, "notify");
	CHECK(next_port(b, 1000) == bport, "the guest's notification did not reach the new binder");
	/* A live binder is not displaced. */
	CHECK(xbd_evtchn_bind_interdomain(b, 1, (uint32_t)gport) == -EINVAL,
	      "a port bound by a live process was bound again");

	in_killed_child(use_up_ports, &n);
	CHECK(xbd_evtchn_open(p2, &g2) == 0, "open");
	CHECK(xbd_evtchn_alloc_unbound(g2, 0) > 0,
	      "no port after a killed process left %d unbound ones", n);
	xbd_evtchn_close(g2);
	xbd_evtchn_close(b);
	xbd_evtchn_close(g);
	xbd_platform_close(p2);
	xbd_platform_close(p1);
	xbd_platform_close(p0);
}

int main(void)
{
	const char *dir = ptest_host(3, 60);

	two_processes();
	pending_and_mask();
	dead_owner();
	errors(dir);
	return 0;
}
