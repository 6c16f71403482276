/*
 * test-limits.c: xbd-xenstored's per-domain limits, with Xen's errors:
 * nodes per domain and node size (ENOSPC), watches (E2BIG), transactions
 * (ENOSPC), permissions per node (ENOSPC); dom0 is exempt.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/xenstored/harness.h"

int main(void)
{
	struct daemon d;
	struct xs_handle *h0, *h5;
	struct xs_permissions p[5];
	xs_transaction_t t[3];
	char path[64], token[16], big[4000];
	unsigned int i, made = 0;
	int err = 0;

	/* Small limits keep the test quick; the default entry size (2048,
	 * Xen's) is left alone. */
	daemon_start(&d, "--entry-nb", "20", "--watch-nb", "4",
		     "--transaction", "2", "--perm-nb", "3", NULL);
	h0 = xs_as(&d, 0);
	if (!h0) {
		daemon_stop(&d);
		return 1;
	}
	make_domain(h0, 5);
	h5 = xs_as(&d, 5);
	CHECK(h5 != NULL, "open as 5");
	if (!h5) {
		daemon_stop(&d);
		return 1;
	}

	/* Nodes: the guest owns data/, control/, device/ already (3). */
	for (i = 0; i < 40; i++) {
		snprintf(path, sizeof(path), "data/n%u", i);
		if (!xs_write(h5, XBT_NULL, path, "x", 1)) {
			err = errno;
			break;
		}
		made++;
	}
	CHECK(err == ENOSPC, "node quota error: %s", strerror(err));
	CHECK(made == 17, "guest made %u nodes beside its 3 (limit 20)", made);
	CHECK(xs_write(h5, XBT_NULL, "data/n0", "rewrite", 7),
	      "rewriting an existing node is not a new node");
	CHECK(xs_rm(h5, XBT_NULL, "data/n0") &&
	      xs_write(h5, XBT_NULL, "data/again", "x", 1),
	      "removing frees quota");
	t[0] = xs_transaction_start(h5);
	CHECK(!xs_write(h5, t[0], "data/intx", "x", 1) && errno == ENOSPC,
	      "quota inside a transaction");
	xs_transaction_end(h5, t[0], true);
	for (i = 0; i < 40; i++) {
		snprintf(path, sizeof(path), "/dom0/n%u", i);
		if (!xs_write(h0, XBT_NULL, path, "x", 1))
			break;
	}
	CHECK(i == 40, "dom0 has no node quota");
	for (i = 1; i < 17; i++) {
		snprintf(path, sizeof(path), "data/n%u", i);
		xs_rm(h5, XBT_NULL, path);
	}

	/* Node size: Xen accounts 2048 bytes per node record. */
	memset(big, 'v', sizeof(big));
	CHECK(xs_write(h5, XBT_NULL, "data/small", big, 1000),
	      "1000-byte value");
	CHECK(!xs_write(h5, XBT_NULL, "data/large", big, 3000) &&
	      errno == ENOSPC, "3000-byte value from a guest: %s",
	      strerror(errno));
	CHECK(!xs_write(h5, XBT_NULL, "data/small", big, 2040) &&
	      errno == ENOSPC, "growing a node past the limit");
	CHECK(xs_write(h0, XBT_NULL, "/dom0/large", big, 4000),
	      "dom0 writes 4000 bytes");

	/* Watches: 4 for the guest, then E2BIG; dom0 is unlimited. */
	for (i = 0; i < 4; i++) {
		snprintf(token, sizeof(token), "t%u", i);
		CHECK(xs_watch(h5, "data", token), "watch %u", i);
	}
	CHECK(!xs_watch(h5, "data", "t4") && errno == E2BIG,
	      "fifth watch: %s", strerror(errno));
	CHECK(xs_unwatch(h5, "data", "t0") && xs_watch(h5, "data", "t4"),
	      "unwatch frees a slot");
	for (i = 0; i < 200; i++) {
		snprintf(token, sizeof(token), "d%u", i);
		if (!xs_watch(h0, "/dom0", token))
			break;
	}
	CHECK(i == 200, "dom0 set %u watches", i);

	/* Transactions: 2 open at a time for the guest. */
	t[0] = xs_transaction_start(h5);
	t[1] = xs_transaction_start(h5);
	CHECK(t[0] != XBT_NULL && t[1] != XBT_NULL, "two transactions");
	t[2] = xs_transaction_start(h5);
	CHECK(t[2] == XBT_NULL && errno == ENOSPC, "third transaction: %s",
	      strerror(errno));
	CHECK(xs_transaction_end(h5, t[0], true), "end one");
	t[2] = xs_transaction_start(h5);
	CHECK(t[2] != XBT_NULL, "then another may start");
	xs_transaction_end(h5, t[1], true);
	xs_transaction_end(h5, t[2], true);

	/* Permissions per node: 3 for a guest. */
	for (i = 0; i < 5; i++) {
		p[i].id = i ? i : 5;
		p[i].perms = XS_PERM_READ;
	}
	CHECK(xs_set_permissions(h5, XBT_NULL, "data/small", p, 3),
	      "3 permissions");
	CHECK(!xs_set_permissions(h5, XBT_NULL, "data/small", p, 4) &&
	      errno == ENOSPC, "4 permissions: %s", strerror(errno));
	p[0].id = 0;
	CHECK(xs_set_permissions(h0, XBT_NULL, "/dom0/large", p, 5),
	      "dom0 sets 5 permissions");

	xs_close(h5);
	xs_close(h0);
	CHECK(daemon_alive(&d), "daemon running");
	daemon_stop(&d);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
