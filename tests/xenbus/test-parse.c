/*
 * test-parse.c: the parts of libxbdxenbus that need no xenstore: strict
 * number parsing, path building and splitting, state names, and the
 * blkif.h state machine decisions for both ends.
 */
#include "config.h"

#include <errno.h>

#include "tests/xenbus/harness.h"

static void test_parse_uint(void)
{
	uint64_t v = 0;

	CHECK_RET(xbd_xs_parse_uint("0", 0, 10, &v), 0);
	CHECK(v == 0);
	CHECK_RET(xbd_xs_parse_uint("512", 0, 4096, &v), 0);
	CHECK(v == 512);
	CHECK_RET(xbd_xs_parse_uint("007", 0, 10, &v), 0);
	CHECK(v == 7);
	CHECK_RET(xbd_xs_parse_uint("18446744073709551615", 0, UINT64_MAX, &v), 0);
	CHECK(v == UINT64_MAX);

	/* Syntax: everything that is not plain digits. */
	v = 42;
	CHECK_RET(xbd_xs_parse_uint("", 0, 10, &v), -EINVAL);
	CHECK_RET(xbd_xs_parse_uint("-1", 0, 10, &v), -EINVAL);
	CHECK_RET(xbd_xs_parse_uint("+1", 0, 10, &v), -EINVAL);
	CHECK_RET(xbd_xs_parse_uint(" 1", 0, 10, &v), -EINVAL);
	CHECK_RET(xbd_xs_parse_uint("1 ", 0, 10, &v), -EINVAL);
	CHECK_RET(xbd_xs_parse_uint("1\n", 0, 10, &v), -EINVAL);
	CHECK_RET(xbd_xs_parse_uint("0x10", 0, 100, &v), -EINVAL);
	CHECK_RET(xbd_xs_parse_uint("12a", 0, 100, &v), -EINVAL);
	CHECK_RET(xbd_xs_parse_uint("1.5", 0, 100, &v), -EINVAL);
	CHECK_RET(xbd_xs_parse_uint("99999999999999999999x", 0, UINT64_MAX, &v), -EINVAL);
	CHECK(v == 42); /* untouched on error */

	/* Range. */
	CHECK_RET(xbd_xs_parse_uint("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	CHECK_RET(xbd_xs_parse_uint("99999999999999999999999", 0, UINT64_MAX, &v), -ERANGE);
	CHECK_RET(xbd_xs_parse_uint("11", 0, 10, &v), -ERANGE);
	CHECK_RET(xbd_xs_parse_uint("4", 5, 10, &v), -ERANGE);
	CHECK(v == 42);
}

static void test_paths(void)
{
	char buf[XBD_XS_PATH_MAX], small[16], type[8];
	uint32_t b, d, dev;

	CHECK_RET(xbd_xs_backend_dir(buf, sizeof(buf), 0, "vbd", 1, 51728), 0);
	CHECK(!strcmp(buf, "/local/domain/0/backend/vbd/1/51728"));
	CHECK_RET(xbd_xs_frontend_dir(buf, sizeof(buf), 1, "vbd", 51728), 0);
	CHECK(!strcmp(buf, "/local/domain/1/device/vbd/51728"));
	CHECK_RET(xbd_xs_domain_dir(buf, sizeof(buf), 7), 0);
	CHECK(!strcmp(buf, "/local/domain/7"));
	CHECK_RET(xbd_xs_join(buf, sizeof(buf), "/a/b", "state"), 0);
	CHECK(!strcmp(buf, "/a/b/state"));
	CHECK_RET(xbd_xs_join(buf, sizeof(buf), "/a/b", ""), -EINVAL);
	CHECK_RET(xbd_xs_backend_dir(buf, sizeof(buf), 0, "v/bd", 1, 2), -EINVAL);
	CHECK_RET(xbd_xs_backend_dir(small, sizeof(small), 0, "vbd", 1, 51728), -ENAMETOOLONG);
	CHECK_RET(xbd_xs_pathf(small, sizeof(small), "%s", "0123456789abcdef"), -ENAMETOOLONG);
	CHECK_RET(xbd_xs_pathf(small, sizeof(small), "%s", "0123456789abcde"), 0);

	CHECK_RET(xbd_xs_parse_backend_dir("/local/domain/0/backend/vbd3/12/768", &b, type,
					   sizeof(type), &d, &dev), 0);
	CHECK(b == 0 && d == 12 && dev == 768 && !strcmp(type, "vbd3"));
	CHECK_RET(xbd_xs_parse_backend_dir("/local/domain/5/backend/vbd/1/51728/", &b, type,
					   sizeof(type), &d, &dev), -EINVAL);
	CHECK_RET(xbd_xs_parse_backend_dir("/local/domain/0/backend/vbd/1/51728/state", &b, type,
					   sizeof(type), &d, &dev), -EINVAL);
	CHECK_RET(xbd_xs_parse_backend_dir("/local/domain/0/backend/vbd/-1/51728", &b, type,
					   sizeof(type), &d, &dev), -EINVAL);
	CHECK_RET(xbd_xs_parse_backend_dir("/local/domain/0/backend/vbd/1/0x10", &b, type,
					   sizeof(type), &d, &dev), -EINVAL);
	CHECK_RET(xbd_xs_parse_backend_dir("/local/domain/0/backend/toolongtype/1/2", &b, type,
					   sizeof(type), &d, &dev), -EINVAL);
	CHECK_RET(xbd_xs_parse_backend_dir("/local/domain/0/device/vbd/1/2", &b, type,
					   sizeof(type), &d, &dev), -EINVAL);
	CHECK_RET(xbd_xs_parse_backend_dir("/local/domain/4294967296/backend/vbd/1/2", &b, type,
					   sizeof(type), &d, &dev), -EINVAL);
}

static void test_names(void)
{
	CHECK(!strcmp(xbd_xenbus_state_name(XenbusStateInitWait), "InitWait"));
	CHECK(!strcmp(xbd_xenbus_state_name(XenbusStateClosed), "Closed"));
	CHECK(!strcmp(xbd_xenbus_state_name(42), "Unknown"));
	CHECK(!strcmp(xbd_xenbus_state_name(-1), "Unknown"));
	CHECK(!strcmp(xbd_xenbus_step_name(XBD_XENBUS_STEP_CONNECT), "connect"));
}

#define BE(self, peer) xbd_xenbus_next_step(XBD_XENBUS_BACKEND, XenbusState##self, XenbusState##peer)
#define FE(self, peer) xbd_xenbus_next_step(XBD_XENBUS_FRONTEND, XenbusState##self, XenbusState##peer)

static void test_steps(void)
{
	/* Startup, blkif.h's diagram, in order. */
	CHECK(BE(Initialising, Initialising) == XBD_XENBUS_STEP_INITWAIT);
	CHECK(FE(Initialising, Initialising) == XBD_XENBUS_STEP_NONE);
	CHECK(FE(Initialising, InitWait) == XBD_XENBUS_STEP_INITIALISE);
	CHECK(BE(InitWait, Initialising) == XBD_XENBUS_STEP_NONE);
	CHECK(BE(InitWait, Initialised) == XBD_XENBUS_STEP_CONNECT);
	CHECK(FE(Initialised, InitWait) == XBD_XENBUS_STEP_NONE);
	CHECK(FE(Initialised, Connected) == XBD_XENBUS_STEP_CONNECT);
	CHECK(BE(Connected, Connected) == XBD_XENBUS_STEP_NONE);
	CHECK(FE(Connected, Connected) == XBD_XENBUS_STEP_REREAD);

	/* Skipped states: do the skipped work first. */
	CHECK(BE(Initialising, Initialised) == XBD_XENBUS_STEP_INITWAIT);
	CHECK(BE(InitWait, Connected) == XBD_XENBUS_STEP_CONNECT);
	CHECK(FE(Initialising, Connected) == XBD_XENBUS_STEP_INITIALISE);

	/* Shutdown. */
	CHECK(BE(Connected, Closing) == XBD_XENBUS_STEP_CLOSING);
	CHECK(BE(Closing, Closing) == XBD_XENBUS_STEP_NONE);
	CHECK(BE(Closing, Closed) == XBD_XENBUS_STEP_CLOSED);
	CHECK(BE(Connected, Closed) == XBD_XENBUS_STEP_CLOSED);
	CHECK(BE(Closed, Closed) == XBD_XENBUS_STEP_NONE);
	CHECK(FE(Connected, Closing) == XBD_XENBUS_STEP_CLOSED);
	CHECK(FE(Closed, Closing) == XBD_XENBUS_STEP_NONE);
	/* A backend that closed waits for a connected frontend to close first. */
	CHECK(BE(Closing, Connected) == XBD_XENBUS_STEP_NONE);
	CHECK(BE(Closing, Initialised) == XBD_XENBUS_STEP_NONE);
	CHECK(FE(Closed, Closing) == XBD_XENBUS_STEP_NONE);

	/* The other end vanished (Unknown). */
	CHECK(BE(Connected, Unknown) == XBD_XENBUS_STEP_CLOSED);
	CHECK(FE(Connected, Unknown) == XBD_XENBUS_STEP_CLOSED);

	/* Reconnect after a close. */
	CHECK(BE(Closed, Initialising) == XBD_XENBUS_STEP_INITWAIT);
	CHECK(FE(Closed, InitWait) == XBD_XENBUS_STEP_INITIALISE);
	CHECK(FE(Closed, Closed) == XBD_XENBUS_STEP_RESTART);
	/* ... skipping Closed (from Closing) or Initialising (Closed to Initialised). */
	CHECK(BE(Closing, Initialising) == XBD_XENBUS_STEP_INITWAIT);
	CHECK(BE(Closed, Initialised) == XBD_XENBUS_STEP_INITWAIT);
	CHECK(BE(Closed, Connected) == XBD_XENBUS_STEP_INITWAIT);
	/* A frontend that reset while connected; a backend that started over. */
	CHECK(BE(Connected, Initialising) == XBD_XENBUS_STEP_INITWAIT);
	CHECK(FE(Connected, InitWait) == XBD_XENBUS_STEP_RESTART);
	CHECK(FE(Connected, Initialising) == XBD_XENBUS_STEP_RESTART);
	/* Our Initialised is on its way to a backend in InitWait: wait. */
	CHECK(FE(Initialised, InitWait) == XBD_XENBUS_STEP_NONE);
	CHECK(FE(Initialised, Initialising) == XBD_XENBUS_STEP_NONE);
	/* A Closed backend with a Connected frontend is a close on its way. */
	CHECK(FE(Connected, Closed) == XBD_XENBUS_STEP_CLOSED);
	CHECK(!strcmp(xbd_xenbus_step_name(XBD_XENBUS_STEP_RESTART), "restart"));
	CHECK(!strcmp(xbd_xenbus_step_name(99), "invalid"));

	/* Not part of blkif. */
	CHECK(BE(Connected, Reconfiguring) == XBD_XENBUS_STEP_NONE);
}

int main(void)
{
	test_parse_uint();
	test_paths();
	test_names();
	test_steps();
	printf("PASS: parse, paths, names, state steps\n");
	return 0;
}
