/*
 * test-txn.c: xbd_xs_transact against a real xbd-xenstored: several
 * writes appear together, a conflicting change made by another
 * connection while the transaction runs makes the commit fail with
 * EAGAIN and the function run again on fresh data, an error from the
 * function discards its writes, and endless conflicts end in -EAGAIN.
 */
#include "config.h"

#include <errno.h>

#include "tests/xenbus/harness.h"

#define D "/local/domain/0/xbd-txn"

struct counter {
	struct xbd_xs *other;   /* the conflicting writer */
	int attempts;
	int conflicts;          /* how many attempts to disturb */
	uint64_t seen;
};

/* Read-modify-write of D/count plus a second node, disturbed by `other`. */
static int bump(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	struct counter *c = arg;
	uint64_t v;
	int ret;

	c->attempts++;
	ret = xbd_xs_read_uint(xs, t, D "/count", 0, UINT64_MAX, &v);
	if (ret)
		return ret;
	c->seen = v;
	if (c->attempts <= c->conflicts) {
		/* Someone else bumps the counter behind our back. */
		CHECK_RET(xbd_xs_write_uint(c->other, XBT_NULL, D "/count", v + 100), 0);
	}
	ret = xbd_xs_write_uint(xs, t, D "/count", v + 1);
	if (ret)
		return ret;
	return xbd_xs_write_str(xs, t, D "/by", "bump");
}

static int fail_after_write(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	int *attempts = arg;

	(*attempts)++;
	CHECK_RET(xbd_xs_write_str(xs, t, D "/ghost", "boo"), 0);
	return -EPERM;
}

int main(void)
{
	struct counter c = { 0 };
	struct xbd_xs *xs;
	uint64_t v;
	char *s;
	int attempts = 0;

	xt_start();
	CHECK_RET(xbd_xs_open(&xs), 0);
	c.other = xt_open_as(0);

	/* No conflict: one attempt. */
	CHECK_RET(xbd_xs_write_uint(xs, XBT_NULL, D "/count", 1), 0);
	CHECK_RET(xbd_xs_transact(xs, bump, &c), 0);
	CHECK(c.attempts == 1);
	CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/count", 0, UINT64_MAX, &v), 0);
	CHECK(v == 2);

	/* One conflict: the commit fails with EAGAIN, the retry sees the other write. */
	c.attempts = 0;
	c.conflicts = 1;
	CHECK_RET(xbd_xs_transact(xs, bump, &c), 0);
	CHECK(c.attempts == 2);
	CHECK(c.seen == 102);
	CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/count", 0, UINT64_MAX, &v), 0);
	CHECK(v == 103);
	CHECK_RET(xbd_xs_read_str(xs, XBT_NULL, D "/by", &s), 0);
	CHECK(!strcmp(s, "bump"));
	free(s);

	/* The function's error aborts: nothing it wrote is visible, no retry. */
	CHECK_RET(xbd_xs_transact(xs, fail_after_write, &attempts), -EPERM);
	CHECK(attempts == 1);
	CHECK(!xbd_xs_exists(xs, XBT_NULL, D "/ghost"));

	/* Conflicts every time: bounded, then -EAGAIN, and the counter shows only theirs. */
	c.attempts = 0;
	c.conflicts = 1000;
	CHECK_RET(xbd_xs_write_uint(xs, XBT_NULL, D "/count", 0), 0);
	CHECK_RET(xbd_xs_transact(xs, bump, &c), -EAGAIN);
	CHECK(c.attempts == XBD_XS_TXN_RETRIES);
	CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/count", 0, UINT64_MAX, &v), 0);
	CHECK(v == 100ull * XBD_XS_TXN_RETRIES);

	xbd_xs_close(c.other);
	xbd_xs_close(xs);
	printf("PASS: transactions with EAGAIN retry\n");
	return 0;
}
