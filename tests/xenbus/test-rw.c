/*
 * test-rw.c: typed reads and writes against a real xbd-xenstored: values
 * written come back, strings that are not plain numbers or booleans are
 * refused with -EINVAL, values out of range with -ERANGE, missing nodes
 * with -ENOENT, nodes another domain may not read with -EACCES.
 */
#include "config.h"

#include <errno.h>

#include "tests/xenbus/harness.h"

#define D "/local/domain/0/xbd-test"

static void test_uint(struct xbd_xs *xs)
{
	uint64_t v;

	CHECK_RET(xbd_xs_write_uint(xs, XBT_NULL, D "/n", 18446744073709551615ull), 0);
	CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/n", 0, UINT64_MAX, &v), 0);
	CHECK(v == UINT64_MAX);
	CHECK_RET(xbd_xs_write_uint(xs, XBT_NULL, D "/n", 4096), 0);
	CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/n", 512, 4096, &v), 0);
	CHECK(v == 4096);
	CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/n", 0, 4095, &v), -ERANGE);
	CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/n", 4097, 8192, &v), -ERANGE);

	/* What a careless or hostile writer might leave. */
	static const char *const bad[] = { "", "-1", " 1", "1 ", "0x10", "1e3", "12abc", "+5" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, D "/n", bad[i]), 0);
		v = 77;
		CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/n", 0, UINT64_MAX, &v), -EINVAL);
		CHECK(v == 77);
	}
	/* An embedded NUL is not a number either (xs_write takes a length). */
	CHECK(xs_write(xbd_xs_handle(xs), XBT_NULL, D "/n", "12\0" "3", 4));
	CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/n", 0, UINT64_MAX, &v), -EINVAL);
	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, D "/n", "18446744073709551616"), 0);
	CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/n", 0, UINT64_MAX, &v), -ERANGE);

	CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/missing", 0, 10, &v), -ENOENT);
	CHECK_RET(xbd_xs_read_uint_default(xs, XBT_NULL, D "/missing", 0, 10, 7, &v), 0);
	CHECK(v == 7);
	/* A default never hides a malformed value. */
	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, D "/n", "x"), 0);
	CHECK_RET(xbd_xs_read_uint_default(xs, XBT_NULL, D "/n", 0, 10, 7, &v), -EINVAL);
}

static void test_bool_str(struct xbd_xs *xs)
{
	bool b;
	char *s;

	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, D "/b", "1"), 0);
	CHECK_RET(xbd_xs_read_bool(xs, XBT_NULL, D "/b", &b), 0);
	CHECK(b);
	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, D "/b", "0"), 0);
	CHECK_RET(xbd_xs_read_bool(xs, XBT_NULL, D "/b", &b), 0);
	CHECK(!b);
	static const char *const bad[] = { "2", "yes", "true", "01", "", " 1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, D "/b", bad[i]), 0);
		CHECK_RET(xbd_xs_read_bool(xs, XBT_NULL, D "/b", &b), -EINVAL);
	}
	CHECK_RET(xbd_xs_read_bool_default(xs, XBT_NULL, D "/nob", true, &b), 0);
	CHECK(b);

	CHECK_RET(xbd_xs_printf(xs, XBT_NULL, D "/s", "%s-%d", "x86_64-abi", 3), 0);
	CHECK_RET(xbd_xs_read_str(xs, XBT_NULL, D "/s", &s), 0);
	CHECK(!strcmp(s, "x86_64-abi-3"));
	free(s);
	CHECK_RET(xbd_xs_read_str(xs, XBT_NULL, D "/nos", &s), -ENOENT);
}

static void test_dir_rm_kvs(struct xbd_xs *xs)
{
	static const struct xbd_xs_kv kvs[] = {
		{ "feature-flush-cache", "1" },
		{ "sectors", "524288" },
		{ "sub/leaf", "v" },
	};
	char **names;
	unsigned int n;
	uint64_t v;
	bool seen_flush = false, seen_sub = false;

	CHECK_RET(xbd_xs_write_kvs(xs, XBT_NULL, D "/kv", kvs, 3), 0);
	CHECK_RET(xbd_xs_read_uint(xs, XBT_NULL, D "/kv/sectors", 0, UINT64_MAX, &v), 0);
	CHECK(v == 524288);
	CHECK_RET(xbd_xs_directory(xs, XBT_NULL, D "/kv", &names, &n), 0);
	CHECK(n == 3);
	for (unsigned int i = 0; i < n; i++) {
		seen_flush |= !strcmp(names[i], "feature-flush-cache");
		seen_sub |= !strcmp(names[i], "sub");
	}
	free(names);
	CHECK(seen_flush && seen_sub);
	CHECK(xbd_xs_exists(xs, XBT_NULL, D "/kv/sub/leaf"));
	CHECK_RET(xbd_xs_rm(xs, XBT_NULL, D "/kv"), 0);
	CHECK(!xbd_xs_exists(xs, XBT_NULL, D "/kv/sub/leaf"));
	CHECK(!xbd_xs_exists(xs, XBT_NULL, D "/kv"));
	/* Removing what is gone is fine. */
	CHECK_RET(xbd_xs_rm(xs, XBT_NULL, D "/kv"), 0);
	CHECK_RET(xbd_xs_rm(xs, XBT_NULL, D "/nothing/below"), 0);
	CHECK_RET(xbd_xs_directory(xs, XBT_NULL, D "/kv", &names, &n), -ENOENT);
}

static void test_perms(struct xbd_xs *xs)
{
	const struct xs_permissions owner_only[1] = { { .id = 0, .perms = XS_PERM_NONE } };
	const struct xs_permissions guest_reads[2] = {
		{ .id = 0, .perms = XS_PERM_NONE },
		{ .id = 0, .perms = XS_PERM_READ },
	};
	struct xs_permissions gr[2];
	struct xbd_xs *guest;
	unsigned long domid;
	uint64_t v;
	char *s;

	domid = xt_sim_num("domain create", "");
	CHECK(domid >= 1);
	memcpy(gr, guest_reads, sizeof(gr));
	gr[1].id = (unsigned int)domid;

	CHECK_RET(xbd_xs_write_uint(xs, XBT_NULL, D "/secret", 5), 0);
	CHECK_RET(xbd_xs_set_perms(xs, XBT_NULL, D "/secret", owner_only, 1), 0);
	CHECK_RET(xbd_xs_write_uint(xs, XBT_NULL, D "/shared", 6), 0);
	CHECK_RET(xbd_xs_set_perms(xs, XBT_NULL, D "/shared", gr, 2), 0);

	guest = xt_open_as((uint32_t)domid);
	CHECK_RET(xbd_xs_read_uint(guest, XBT_NULL, D "/secret", 0, 10, &v), -EACCES);
	CHECK_RET(xbd_xs_read_str(guest, XBT_NULL, D "/secret", &s), -EACCES);
	CHECK(!xbd_xs_exists(guest, XBT_NULL, D "/secret"));
	CHECK_RET(xbd_xs_read_uint(guest, XBT_NULL, D "/shared", 0, 10, &v), 0);
	CHECK(v == 6);
	CHECK_RET(xbd_xs_write_uint(guest, XBT_NULL, D "/shared", 7), -EACCES);
	xbd_xs_close(guest);
}

int main(void)
{
	struct xbd_xs *xs;

	xt_start();
	CHECK_RET(xbd_xs_open(&xs), 0);
	CHECK(xbd_xs_fd(xs) >= 0);
	CHECK(xbd_xs_handle(xs) != NULL);
	test_uint(xs);
	test_bool_str(xs);
	test_dir_rm_kvs(xs);
	test_perms(xs);
	xbd_xs_close(xs);
	printf("PASS: typed reads and writes\n");
	return 0;
}
