/*
 * test-ops.c: every xenstore wire operation of xbd-xenstored through the
 * real libxenstore, as dom0 and as guests: node operations, permissions and
 * their denials, watches (initial, subtree, relative, special), transactions
 * (isolation, EAGAIN on conflict), domain introduction and release.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/xenstored/harness.h"

static struct daemon d;
static struct xs_handle *h0, *h5;

/* errno of a read, 0 if it succeeded with value want (or any if NULL). */
static int read_err(struct xs_handle *h, xs_transaction_t t, const char *p,
		    const char *want)
{
	unsigned int len;
	char *v = xs_read(h, t, p, &len);
	int ok;

	if (!v)
		return errno;
	ok = !want || (len == strlen(want) && memcmp(v, want, len) == 0);
	free(v);
	return ok ? 0 : -1;
}

static int write_err(struct xs_handle *h, xs_transaction_t t, const char *p,
		     const char *v)
{
	return xs_write(h, t, p, v, strlen(v)) ? 0 : errno;
}

/* "n0,r5" style rendering of a node's permissions, or "" on error. */
static const char *perms_of(struct xs_handle *h, const char *p)
{
	static char buf[256];
	static const char letter[] = "nrwb";
	struct xs_permissions *perms;
	unsigned int n, i;
	size_t off = 0;

	buf[0] = '\0';
	perms = xs_get_permissions(h, XBT_NULL, p, &n);
	if (!perms)
		return buf;
	for (i = 0; i < n; i++)
		off += snprintf(buf + off, sizeof(buf) - off, "%s%c%u",
				i ? "," : "", letter[perms[i].perms & 3],
				perms[i].id);
	free(perms);
	return buf;
}

static bool expect_event(struct xs_handle *h, const char *path,
			 const char *token)
{
	char p[512], t[256];

	if (!next_event(h, 2000, p, sizeof(p), t, sizeof(t))) {
		fprintf(stderr, "  no event (wanted %s %s)\n", path, token);
		return false;
	}
	if (strcmp(p, path) || strcmp(t, token)) {
		fprintf(stderr, "  event %s %s (wanted %s %s)\n", p, t, path,
			token);
		return false;
	}
	return true;
}

static void test_dom0_nodes(void)
{
	char **dir, name[64], *v;
	unsigned int n, i, len;
	bool all;

	CHECK(write_err(h0, XBT_NULL, "/t/a/b", "v1") == 0, "write");
	CHECK(read_err(h0, XBT_NULL, "/t/a/b", "v1") == 0, "read back");
	CHECK(read_err(h0, XBT_NULL, "/t/a", "") == 0, "parent created empty");
	dir = xs_directory(h0, XBT_NULL, "/t", &n);
	CHECK(dir && n == 1 && strcmp(dir[0], "a") == 0, "directory /t");
	free(dir);
	CHECK(xs_mkdir(h0, XBT_NULL, "/t/m"), "mkdir");
	CHECK(write_err(h0, XBT_NULL, "/t/m", "keep") == 0, "write");
	CHECK(xs_mkdir(h0, XBT_NULL, "/t/m"), "mkdir of existing node");
	CHECK(read_err(h0, XBT_NULL, "/t/m", "keep") == 0,
	      "mkdir keeps the value");
	CHECK(xs_rm(h0, XBT_NULL, "/t/a"), "rm subtree");
	CHECK(read_err(h0, XBT_NULL, "/t/a/b", NULL) == ENOENT, "rm'd child");
	CHECK(read_err(h0, XBT_NULL, "/t/a", NULL) == ENOENT, "rm'd node");
	dir = xs_directory(h0, XBT_NULL, "/t", &n);
	CHECK(dir && n == 1 && strcmp(dir[0], "m") == 0, "directory after rm");
	free(dir);
	CHECK(xs_rm(h0, XBT_NULL, "/t/absent"), "rm of absent node");
	CHECK(!xs_rm(h0, XBT_NULL, "/t/absent/deeper") && errno == ENOENT,
	      "rm with absent parent: %s", strerror(errno));
	CHECK(!xs_rm(h0, XBT_NULL, "/") && errno == EINVAL, "rm /");
	CHECK(read_err(h0, XBT_NULL, "/nope", NULL) == ENOENT, "read absent");

	/* Values are binary. */
	CHECK(xs_write(h0, XBT_NULL, "/t/bin", "a\0b\0c", 5), "binary write");
	v = xs_read(h0, XBT_NULL, "/t/bin", &len);
	CHECK(v && len == 5 && memcmp(v, "a\0b\0c", 5) == 0, "binary read");
	free(v);
	CHECK(write_err(h0, XBT_NULL, "/t/empty", "") == 0 &&
	      read_err(h0, XBT_NULL, "/t/empty", "") == 0, "empty value");

	/* Path syntax. */
	CHECK(read_err(h0, XBT_NULL, "/t//m", NULL) == EINVAL, "double /");
	CHECK(read_err(h0, XBT_NULL, "/t/m/", NULL) == EINVAL, "trailing /");
	CHECK(write_err(h0, XBT_NULL, "/t/a b", "x") == EINVAL, "space");
	CHECK(write_err(h0, XBT_NULL, "/t/a:b", "x") == EINVAL, "colon");

	/* Relative paths of dom0 are below /local/domain/0. */
	CHECK(write_err(h0, XBT_NULL, "rel/x", "r") == 0, "relative write");
	CHECK(read_err(h0, XBT_NULL, "/local/domain/0/rel/x", "r") == 0,
	      "relative path resolved");

	/* Permissions: new nodes inherit, first entry is owner+default. */
	CHECK(strcmp(perms_of(h0, "/t/m"), "n0") == 0, "default perms %s",
	      perms_of(h0, "/t/m"));
	{
		struct xs_permissions p[4] = {
			{ 0, XS_PERM_READ | XS_PERM_WRITE },
			{ 3, XS_PERM_READ }, { 4, XS_PERM_WRITE },
			{ 5, XS_PERM_NONE },
		};

		CHECK(xs_set_permissions(h0, XBT_NULL, "/t/m", p, 4),
		      "set_perms");
	}
	CHECK(strcmp(perms_of(h0, "/t/m"), "b0,r3,w4,n5") == 0, "perms %s",
	      perms_of(h0, "/t/m"));
	CHECK(write_err(h0, XBT_NULL, "/t/m/kid", "k") == 0, "write kid");
	CHECK(strcmp(perms_of(h0, "/t/m/kid"), "b0,r3,w4,n5") == 0,
	      "kid inherits %s", perms_of(h0, "/t/m/kid"));

	/* Domain queries. */
	v = xs_get_domain_path(h0, 7);
	CHECK(v && strcmp(v, "/local/domain/7") == 0, "domain path %s", v);
	free(v);
	CHECK(xs_is_domain_introduced(h0, 0), "dom0 is introduced");
	CHECK(!xs_is_domain_introduced(h0, 9), "dom9 is not");

	/* A directory longer than one message: libxenstore gets E2BIG for
	 * DIRECTORY and falls back to DIRECTORY_PART. */
	for (i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "/big/child-with-a-long-name-%04u",
			 i);
		if (write_err(h0, XBT_NULL, name, "") != 0)
			break;
	}
	dir = xs_directory(h0, XBT_NULL, "/big", &n);
	CHECK(dir && n == 400, "big directory: %u entries (%s)", dir ? n : 0,
	      dir ? "" : strerror(errno));
	all = dir != NULL;
	for (i = 0; dir && i < n; i++) {
		snprintf(name, sizeof(name), "child-with-a-long-name-%04u", i);
		all = all && strcmp(dir[i], name) == 0;
	}
	CHECK(all, "big directory in creation order");
	free(dir);
}

static void test_guest_permissions(void)
{
	struct xs_permissions back[2] = {
		{ 0, XS_PERM_NONE }, { 5, XS_PERM_READ },
	};
	struct xs_permissions priv[1] = { { 0, XS_PERM_NONE } };
	struct xs_permissions mine[2] = {
		{ 5, XS_PERM_NONE }, { 0, XS_PERM_READ },
	};
	struct xs_permissions steal[1] = { { 0, XS_PERM_NONE } };
	const char *bk = "/local/domain/0/backend/vbd/5/51712";
	char path[128], **dir, *v;
	unsigned int n;

	/* Relative paths are below the guest's home; it owns what it
	 * creates, with the rest of the permissions inherited. */
	CHECK(write_err(h5, XBT_NULL, "data/x", "1") == 0, "guest write");
	CHECK(read_err(h0, XBT_NULL, "/local/domain/5/data/x", "1") == 0,
	      "dom0 sees guest's relative write");
	CHECK(read_err(h5, XBT_NULL, "data/x", "1") == 0, "relative read");
	CHECK(strcmp(perms_of(h0, "/local/domain/5/data/x"), "n5") == 0,
	      "guest owns its node: %s",
	      perms_of(h0, "/local/domain/5/data/x"));
	CHECK(read_err(h5, XBT_NULL, "/local/domain/5/domid", "5") == 0,
	      "guest reads its home (r5)");
	CHECK(write_err(h5, XBT_NULL, "/local/domain/5/domid", "6") == EACCES,
	      "guest cannot write a read-only node");
	CHECK(write_err(h5, XBT_NULL, "/local/domain/5/new", "x") == EACCES,
	      "guest cannot create below a read-only node");
	CHECK(!xs_mkdir(h5, XBT_NULL, "/local/domain/5/newdir") &&
	      errno == EACCES, "guest mkdir denied");
	CHECK(!xs_rm(h5, XBT_NULL, "/local/domain/5/domid") && errno == EACCES,
	      "guest rm denied");

	/* Other domains and dom0 are out of reach, and absent nodes there
	 * do not even reveal their absence. */
	CHECK(write_err(h0, XBT_NULL, "/local/domain/0/name", "Domain-0") == 0,
	      "dom0 name");
	CHECK(read_err(h5, XBT_NULL, "/local/domain/0/name", NULL) == EACCES,
	      "guest reads dom0's node");
	CHECK(read_err(h5, XBT_NULL, "/local/domain/0/absent", NULL) == EACCES,
	      "absent node below unreadable dir reports EACCES");
	CHECK(read_err(h5, XBT_NULL, "data/absent", NULL) == ENOENT,
	      "absent node below own dir reports ENOENT");
	CHECK(read_err(h5, XBT_NULL, "/local/domain/6/domid", NULL) == EACCES,
	      "guest reads another guest's home");
	CHECK(write_err(h5, XBT_NULL, "/local/domain/6/data/x", "x") == EACCES,
	      "guest writes another guest's data");
	CHECK(read_err(h5, XBT_NULL, "/tool/xenstored", NULL) == EACCES,
	      "guest reads /tool");
	dir = xs_directory(h5, XBT_NULL, "/local/domain/0", &n);
	CHECK(!dir && errno == EACCES, "guest lists dom0's home");
	free(dir);
	CHECK(!xs_get_permissions(h5, XBT_NULL, "/local/domain/0/name", &n) &&
	      errno == EACCES, "guest reads dom0's permissions");

	/* The backend's directory is readable by the frontend as libxl sets
	 * it, but its private nodes are not, and nothing there is
	 * writable. */
	CHECK(xs_mkdir(h0, XBT_NULL, bk) &&
	      xs_set_permissions(h0, XBT_NULL, bk, back, 2), "backend dir");
	snprintf(path, sizeof(path), "%s/state", bk);
	CHECK(write_err(h0, XBT_NULL, path, "2") == 0, "backend state");
	CHECK(read_err(h5, XBT_NULL, path, "2") == 0, "frontend reads state");
	CHECK(write_err(h5, XBT_NULL, path, "5") == EACCES,
	      "frontend writes backend state");
	snprintf(path, sizeof(path), "%s/private", bk);
	CHECK(write_err(h0, XBT_NULL, path, "secret") == 0 &&
	      xs_set_permissions(h0, XBT_NULL, path, priv, 1), "private node");
	CHECK(read_err(h5, XBT_NULL, path, NULL) == EACCES,
	      "frontend reads backend's private node");
	CHECK(!xs_rm(h5, XBT_NULL, bk) && errno == EACCES,
	      "frontend removes the backend dir");

	/* Nodes dom0 creates below a guest's directory keep its owner. */
	CHECK(write_err(h0, XBT_NULL, "/local/domain/5/data/fromdom0", "y")
	      == 0, "dom0 writes into guest dir");
	CHECK(strcmp(perms_of(h0, "/local/domain/5/data/fromdom0"), "n5") == 0,
	      "owner inherited: %s",
	      perms_of(h0, "/local/domain/5/data/fromdom0"));

	/* Only the owner changes permissions, and never the owner. */
	CHECK(xs_set_permissions(h5, XBT_NULL, "data/x", mine, 2),
	      "owner sets perms: %s", strerror(errno));
	CHECK(strcmp(perms_of(h0, "/local/domain/5/data/x"), "n5,r0") == 0,
	      "perms %s", perms_of(h0, "/local/domain/5/data/x"));
	CHECK(!xs_set_permissions(h5, XBT_NULL, "data/x", steal, 1) &&
	      errno == EPERM, "guest gives its node away: %s",
	      strerror(errno));
	CHECK(!xs_set_permissions(h5, XBT_NULL, "/local/domain/5/domid", mine,
				  2) && errno == EACCES,
	      "guest changes perms of a node it does not own");

	/* Subtrees of its own. */
	CHECK(write_err(h5, XBT_NULL, "data/sub/a", "a") == 0 &&
	      write_err(h5, XBT_NULL, "data/sub/b", "b") == 0, "guest subtree");
	CHECK(xs_rm(h5, XBT_NULL, "data/sub") &&
	      read_err(h5, XBT_NULL, "data/sub/a", NULL) == ENOENT,
	      "guest rm subtree");

	/* Domain management is dom0's. */
	CHECK(!xs_introduce_domain(h5, 9, 1, 1) && errno == EACCES,
	      "guest introduces a domain");
	CHECK(!xs_release_domain(h5, 6) && errno == EACCES,
	      "guest releases a domain");
	v = xs_get_domain_path(h5, 5);
	CHECK(v && strcmp(v, "/local/domain/5") == 0, "guest domain path");
	free(v);
}

static void test_watches(void)
{
	struct xs_permissions rel[2] = { { 0, XS_PERM_NONE },
					 { 5, XS_PERM_READ } };
	struct xs_handle *h6;

	/* Fires once when set, even for an absent node. */
	CHECK(xs_watch(h0, "/w", "tk"), "watch");
	CHECK(expect_event(h0, "/w", "tk"), "initial event");
	CHECK(write_err(h0, XBT_NULL, "/w/a/b", "1") == 0, "write below");
	CHECK(expect_event(h0, "/w/a/b", "tk"), "subtree event");
	CHECK(write_err(h0, XBT_NULL, "/wother", "1") == 0, "unrelated");
	CHECK(write_err(h0, XBT_NULL, "/w/a", "2") == 0, "write child");
	CHECK(expect_event(h0, "/w/a", "tk"), "no event for /wother");
	CHECK(xs_rm(h0, XBT_NULL, "/w"), "rm");
	CHECK(expect_event(h0, "/w", "tk"), "rm event");
	CHECK(no_event(h0, 100), "one event for the rm");
	CHECK(!xs_watch(h0, "/w", "tk") && errno == EEXIST, "duplicate watch");
	CHECK(xs_watch(h0, "/w", "tk2"), "same path, other token");
	CHECK(expect_event(h0, "/w", "tk2"), "initial event tk2");
	CHECK(xs_unwatch(h0, "/w", "tk") && xs_unwatch(h0, "/w", "tk2"),
	      "unwatch");
	CHECK(write_err(h0, XBT_NULL, "/w/x", "1") == 0 && no_event(h0, 100),
	      "no event after unwatch");
	CHECK(!xs_unwatch(h0, "/w", "tk") && errno == ENOENT,
	      "unwatch unknown watch");

	/* Removing a parent reaches watches on the removed children. */
	CHECK(write_err(h0, XBT_NULL, "/w2/sub/x", "1") == 0, "w2");
	CHECK(xs_watch(h0, "/w2/sub", "deep") &&
	      expect_event(h0, "/w2/sub", "deep"), "watch /w2/sub");
	CHECK(xs_rm(h0, XBT_NULL, "/w2"), "rm /w2");
	CHECK(expect_event(h0, "/w2/sub", "deep"), "event of removed child");
	CHECK(xs_unwatch(h0, "/w2/sub", "deep"), "unwatch");
	CHECK(no_event(h0, 50), "drained");

	/* SET_PERMS is a change too. */
	CHECK(write_err(h0, XBT_NULL, "/p", "1") == 0 &&
	      xs_watch(h0, "/p", "perm") && expect_event(h0, "/p", "perm"),
	      "watch /p");
	CHECK(xs_set_permissions(h0, XBT_NULL, "/p", rel, 2) &&
	      expect_event(h0, "/p", "perm"), "set_perms event");
	CHECK(xs_unwatch(h0, "/p", "perm"), "unwatch /p");

	/* A guest's relative watch reports relative paths. */
	CHECK(xs_watch(h5, "data", "rel"), "relative watch");
	CHECK(expect_event(h5, "data", "rel"), "initial relative event");
	CHECK(write_err(h0, XBT_NULL, "/local/domain/5/data/k", "1") == 0,
	      "dom0 writes guest data");
	CHECK(expect_event(h5, "data/k", "rel"), "relative event path");
	CHECK(xs_unwatch(h5, "data", "rel"), "relative unwatch");

	/* Events stop at the permission boundary. */
	CHECK(xs_watch(h5, "/local/domain/0", "spy") &&
	      expect_event(h5, "/local/domain/0", "spy"), "guest watches dom0");
	CHECK(write_err(h0, XBT_NULL, "/local/domain/0/secret", "s") == 0,
	      "dom0 private write");
	CHECK(no_event(h5, 200), "guest hears of dom0's private node");
	CHECK(xs_unwatch(h5, "/local/domain/0", "spy"), "unwatch spy");
	CHECK(xs_watch(h5, "/local/domain/5", "home") &&
	      expect_event(h5, "/local/domain/5", "home"), "watch home");
	CHECK(write_err(h0, XBT_NULL, "/local/domain/5/name", "guest5") == 0,
	      "dom0 names the guest");
	CHECK(expect_event(h5, "/local/domain/5/name", "home"),
	      "guest hears about its readable node");
	CHECK(xs_unwatch(h5, "/local/domain/5", "home"), "unwatch home");

	/* @introduceDomain and @releaseDomain: dom0 only, unless dom0 opens
	 * them up. */
	CHECK(xs_watch(h0, "@introduceDomain", "in") &&
	      expect_event(h0, "@introduceDomain", "in"), "watch intro");
	CHECK(xs_watch(h0, "@releaseDomain", "out") &&
	      expect_event(h0, "@releaseDomain", "out"), "watch release");
	CHECK(xs_watch(h5, "@introduceDomain", "gin") &&
	      expect_event(h5, "@introduceDomain", "gin"), "guest watch intro");
	CHECK(xs_watch(h5, "@releaseDomain", "gout") &&
	      expect_event(h5, "@releaseDomain", "gout"),
	      "guest watch release");
	make_domain(h0, 7);
	CHECK(expect_event(h0, "@introduceDomain", "in"), "introduce event");
	CHECK(no_event(h5, 200), "guest hears @introduceDomain");
	CHECK(xs_is_domain_introduced(h0, 7), "domain 7 introduced");
	CHECK(xs_release_domain(h0, 7), "release 7");
	CHECK(expect_event(h0, "@releaseDomain", "out"), "release event");
	CHECK(no_event(h5, 200), "guest hears @releaseDomain");
	CHECK(!xs_is_domain_introduced(h0, 7), "domain 7 released");
	CHECK(xs_set_permissions(h0, XBT_NULL, "@releaseDomain", rel, 2),
	      "open @releaseDomain to domain 5");
	CHECK(!xs_set_permissions(h5, XBT_NULL, "@releaseDomain", rel, 2) &&
	      errno == EACCES, "guest sets special perms");
	make_domain(h0, 8);
	CHECK(expect_event(h0, "@introduceDomain", "in"), "introduce 8");
	h6 = xs_as(&d, 8);
	CHECK(h6 != NULL, "open as domain 8");
	CHECK(xs_release_domain(h0, 8), "release 8");
	CHECK(expect_event(h0, "@releaseDomain", "out"), "release 8 event");
	CHECK(expect_event(h5, "@releaseDomain", "gout"),
	      "permitted guest hears @releaseDomain");
	if (h6) {
		CHECK(read_err(h6, XBT_NULL, "domid", NULL) != 0,
		      "released domain's connection is closed");
		xs_close(h6);
	}
	xs_unwatch(h5, "@introduceDomain", "gin");
	xs_unwatch(h5, "@releaseDomain", "gout");
	xs_unwatch(h0, "@introduceDomain", "in");
	xs_unwatch(h0, "@releaseDomain", "out");
}

static void test_transactions(void)
{
	xs_transaction_t t1, t2;
	struct xs_handle *hx;

	CHECK(write_err(h0, XBT_NULL, "/tx/c", "0") == 0 &&
	      write_err(h0, XBT_NULL, "/tx/d", "0") == 0 &&
	      write_err(h0, XBT_NULL, "/tx/g1", "0") == 0 &&
	      write_err(h0, XBT_NULL, "/tx/g2", "0") == 0, "tx setup");

	/* Isolation, then commit. */
	t1 = xs_transaction_start(h0);
	CHECK(t1 != XBT_NULL, "start");
	CHECK(write_err(h0, t1, "/tx/a", "1") == 0, "write in tx");
	CHECK(read_err(h0, XBT_NULL, "/tx/a", NULL) == ENOENT,
	      "invisible outside");
	CHECK(read_err(h0, t1, "/tx/a", "1") == 0, "visible inside");
	CHECK(xs_transaction_end(h0, t1, false), "commit");
	CHECK(read_err(h0, XBT_NULL, "/tx/a", "1") == 0, "visible after");

	/* Abort. */
	t1 = xs_transaction_start(h0);
	CHECK(write_err(h0, t1, "/tx/b", "1") == 0 &&
	      xs_rm(h0, t1, "/tx/a"), "changes in tx");
	CHECK(xs_transaction_end(h0, t1, true), "abort");
	CHECK(read_err(h0, XBT_NULL, "/tx/b", NULL) == ENOENT &&
	      read_err(h0, XBT_NULL, "/tx/a", "1") == 0, "abort discards");

	/* Two transactions on the same node: the second commit fails. */
	t1 = xs_transaction_start(h0);
	t2 = xs_transaction_start(h0);
	CHECK(read_err(h0, t1, "/tx/c", "0") == 0 &&
	      read_err(h0, t2, "/tx/c", "0") == 0, "both read");
	CHECK(write_err(h0, t1, "/tx/c", "1") == 0 &&
	      write_err(h0, t2, "/tx/c", "2") == 0, "both write");
	CHECK(xs_transaction_end(h0, t1, false), "first commit");
	CHECK(!xs_transaction_end(h0, t2, false) && errno == EAGAIN,
	      "second commit: %s", strerror(errno));
	CHECK(read_err(h0, XBT_NULL, "/tx/c", "1") == 0, "first one won");

	/* A plain write to a node the transaction read conflicts too. */
	t1 = xs_transaction_start(h0);
	CHECK(read_err(h0, t1, "/tx/d", "0") == 0, "tx reads d");
	CHECK(write_err(h0, XBT_NULL, "/tx/d", "x") == 0, "outside write");
	CHECK(write_err(h0, t1, "/tx/g1", "t") == 0, "tx writes g1");
	CHECK(!xs_transaction_end(h0, t1, false) && errno == EAGAIN,
	      "conflict with plain write: %s", strerror(errno));
	CHECK(read_err(h0, XBT_NULL, "/tx/g1", "0") == 0, "nothing applied");

	/* Disjoint transactions both commit. */
	t1 = xs_transaction_start(h0);
	t2 = xs_transaction_start(h0);
	CHECK(write_err(h0, t1, "/tx/g1", "1") == 0 &&
	      write_err(h0, t2, "/tx/g2", "2") == 0, "disjoint writes");
	CHECK(xs_transaction_end(h0, t1, false) &&
	      xs_transaction_end(h0, t2, false), "both commit");

	/* Watches fire at commit, not before. */
	CHECK(xs_watch(h0, "/tx/h", "txw") && expect_event(h0, "/tx/h", "txw"),
	      "watch");
	t1 = xs_transaction_start(h0);
	CHECK(write_err(h0, t1, "/tx/h", "1") == 0, "tx write");
	CHECK(no_event(h0, 100), "no event before commit");
	CHECK(xs_transaction_end(h0, t1, false), "commit");
	CHECK(expect_event(h0, "/tx/h", "txw"), "event at commit");
	t1 = xs_transaction_start(h0);
	CHECK(write_err(h0, t1, "/tx/h", "2") == 0, "tx write");
	CHECK(xs_transaction_end(h0, t1, true) && no_event(h0, 100),
	      "no event for an aborted transaction");
	xs_unwatch(h0, "/tx/h", "txw");

	/* Unknown transaction ids. */
	CHECK(read_err(h0, 4242, "/tx/c", NULL) == ENOENT, "unknown tx id");
	CHECK(!xs_transaction_end(h0, 4242, false) && errno == ENOENT,
	      "end of unknown tx");

	/* Guests have transactions too. */
	t1 = xs_transaction_start(h5);
	CHECK(t1 != XBT_NULL && write_err(h5, t1, "data/tx", "g") == 0 &&
	      xs_transaction_end(h5, t1, false) &&
	      read_err(h0, XBT_NULL, "/local/domain/5/data/tx", "g") == 0,
	      "guest transaction");

	/* A client that leaves mid-transaction leaves nothing behind. */
	hx = xs_as(&d, 0);
	t1 = xs_transaction_start(hx);
	CHECK(write_err(hx, t1, "/tx/lost", "1") == 0, "write then vanish");
	xs_close(hx);
	CHECK(read_err(h0, XBT_NULL, "/tx/lost", NULL) == ENOENT &&
	      read_err(h0, XBT_NULL, "/tx/c", "1") == 0,
	      "daemon fine after disconnect mid-transaction");
}

static void test_release(void)
{
	struct xs_handle *again;
	char path[256];

	daemon_socket(&d, 5, path, sizeof(path));
	CHECK(access(path, F_OK) == 0, "domain socket exists");
	CHECK(xs_release_domain(h0, 5), "release 5");
	CHECK(read_err(h5, XBT_NULL, "data/x", NULL) != 0,
	      "released guest's connection is closed");
	CHECK(access(path, F_OK) != 0, "domain socket removed");
	CHECK(raw_as(&d, 5) < 0, "cannot connect as a released domain");
	CHECK(!xs_is_domain_introduced(h0, 5), "not introduced");
	CHECK(!xs_release_domain(h0, 5) && errno == ENOENT, "double release");
	/* Its nodes stay, but nothing refers to the old domain 5 any more,
	 * so a new domain 5 inherits no rights. */
	CHECK(strcmp(perms_of(h0, "/local/domain/5/data/x"), "n0,r0") == 0,
	      "owner reset: %s", perms_of(h0, "/local/domain/5/data/x"));
	CHECK(strcmp(perms_of(h0, "/local/domain/0/backend/vbd/5/51712"),
		     "n0") == 0, "entry dropped: %s",
	      perms_of(h0, "/local/domain/0/backend/vbd/5/51712"));
	CHECK(xs_introduce_domain(h0, 5, 1, 1), "re-introduce 5");
	again = xs_as(&d, 5);
	CHECK(again && read_err(again, XBT_NULL,
				"/local/domain/0/backend/vbd/5/51712/state",
				NULL) == EACCES, "new domain 5 gains nothing");
	if (again)
		xs_close(again);
	xs_close(h5);
	h5 = NULL;
}

int main(void)
{
	struct xs_handle *h6;

	daemon_start(&d, NULL);
	h0 = xs_as(&d, 0);
	if (!h0) {
		perror("xs_open as dom0");
		daemon_stop(&d);
		return 1;
	}
	make_domain(h0, 5);
	make_domain(h0, 6);
	h5 = xs_as(&d, 5);
	h6 = xs_as(&d, 6);
	CHECK(h5 && h6, "open as guests");
	if (!h5 || !h6) {
		daemon_stop(&d);
		return 1;
	}

	test_dom0_nodes();
	test_guest_permissions();
	test_watches();
	test_transactions();
	test_release();

	xs_close(h6);
	xs_close(h0);
	CHECK(daemon_alive(&d), "daemon still running");
	daemon_stop(&d);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
