/*
 * test-watch.c: watches against a real xbd-xenstored: each registration
 * fires once at once; a change reaches the callback of the watch that
 * covers it (with the changed path, also for nodes below), and only that
 * one; the fd becomes readable when events wait; a callback may remove
 * its own watch or another one, after which they get nothing more.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>

#include "tests/xenbus/harness.h"

#define A "/local/domain/0/xbd-watch/a"
#define B "/local/domain/0/xbd-watch/b"

struct rec {
	const char *name;
	int calls;
	char last[XBD_XS_PATH_MAX];
	/* Unwatch this watch (self or other) from inside the callback on the next call. */
	struct xbd_xs_watch **unwatch_on_call;
	bool done;
};

static void record(struct xbd_xs *xs, const char *path, void *arg)
{
	struct rec *r = arg;

	r->calls++;
	snprintf(r->last, sizeof(r->last), "%s", path);
	r->done = true;
	if (r->unwatch_on_call && *r->unwatch_on_call) {
		xbd_xs_unwatch(xs, *r->unwatch_on_call);
		*r->unwatch_on_call = NULL;
	}
}

/* Dispatch until r has at least want calls or 2 s pass. */
static void pump_until(struct xbd_xs *xs, struct rec *r, int want)
{
	uint64_t end = xbd_mono_ms() + 2000;

	while (r->calls < want && xbd_mono_ms() < end)
		xt_pump(xs, 50, NULL);
}

/* Dispatch for a while and make sure nothing more arrives. */
static void settle(struct xbd_xs *xs)
{
	xt_pump(xs, 200, NULL);
}

int main(void)
{
	struct rec ra = { .name = "a" }, rb = { .name = "b" };
	struct xbd_xs_watch *wa = NULL, *wb = NULL;
	struct pollfd pfd;
	struct xbd_xs *xs;

	xt_start();
	CHECK_RET(xbd_xs_open(&xs), 0);
	CHECK_RET(xbd_xs_watch(xs, "", record, &ra, &wa), -EINVAL);

	CHECK_RET(xbd_xs_watch(xs, A, record, &ra, &wa), 0);
	CHECK_RET(xbd_xs_watch(xs, B, record, &rb, &wb), 0);

	/* The initial event of each watch, for the watched path itself, even if it does not exist. */
	pfd = (struct pollfd){ .fd = xbd_xs_fd(xs), .events = POLLIN };
	CHECK(poll(&pfd, 1, 2000) == 1);
	pump_until(xs, &ra, 1);
	pump_until(xs, &rb, 1);
	settle(xs);
	CHECK(ra.calls == 1 && !strcmp(ra.last, A));
	CHECK(rb.calls == 1 && !strcmp(rb.last, B));

	/* A change below a reaches a, and not b. */
	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, A "/state", "4"), 0);
	pump_until(xs, &ra, 2);
	settle(xs);
	CHECK(ra.calls == 2 && !strcmp(ra.last, A "/state"));
	CHECK(rb.calls == 1);

	/* A change by another connection reaches us too. */
	{
		struct xbd_xs *other = xt_open_as(0);

		CHECK_RET(xbd_xs_write_str(other, XBT_NULL, B, "x"), 0);
		xbd_xs_close(other);
	}
	pump_until(xs, &rb, 2);
	settle(xs);
	CHECK(rb.calls == 2 && !strcmp(rb.last, B));
	CHECK(ra.calls == 2);

	/* No events waiting: dispatch delivers none and the fd is quiet. */
	CHECK(xbd_xs_dispatch(xs) == 0);
	pfd.revents = 0;
	CHECK(poll(&pfd, 1, 100) == 0);

	/* a removes itself from inside its callback; a second queued event for it is dropped. */
	ra.unwatch_on_call = &wa;
	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, A, "1"), 0);
	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, A, "2"), 0);
	pump_until(xs, &ra, 3);
	settle(xs);
	CHECK(ra.calls == 3);
	CHECK(wa == NULL);
	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, A, "3"), 0);
	settle(xs);
	CHECK(ra.calls == 3);

	/* b's callback removes a newly registered watch c whose event is queued behind it. */
	{
		struct rec rc = { .name = "c" };
		struct xbd_xs_watch *wc = NULL;

		CHECK_RET(xbd_xs_watch(xs, A, record, &rc, &wc), 0);
		pump_until(xs, &rc, 1); /* its initial event */
		CHECK(rc.calls == 1);
		rb.unwatch_on_call = &wc;
		CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, B, "y"), 0);
		/* Let both events queue before dispatching. */
		pfd.revents = 0;
		CHECK(poll(&pfd, 1, 2000) == 1);
		CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, A, "4"), 0);
		pump_until(xs, &rb, 3);
		settle(xs);
		CHECK(rb.calls == 3);
		CHECK(wc == NULL);
		CHECK(rc.calls == 1);
	}

	/* Unwatch outside a callback; close with a live watch (b) frees it. */
	rb.unwatch_on_call = NULL;
	xbd_xs_close(xs);
	printf("PASS: watches\n");
	return 0;
}
