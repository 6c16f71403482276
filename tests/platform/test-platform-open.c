/*
 * test-platform-open: choosing a platform.  "auto" picks the simulator
 * when XBD_SIM_DIR is set and real Xen when /dev/xen exists, and says
 * -ENODEV when neither; asking for Xen without /dev/xen is -ENODEV; the
 * simulator acts as XBD_SIM_DOMID and refuses a bad or missing domain.
 */
#include "config.h"

#include "tests/platform/ptest.h"

int main(void)
{
	enum xbd_platform_kind k;
	struct xbd_platform *p;
	const char *dir;
	bool have_xen = access("/dev/xen", F_OK) == 0;
	int r;

	CHECK(xbd_platform_kind_from_string("auto", &k) == 0 && k == XBD_PLATFORM_AUTO, "auto");
	CHECK(xbd_platform_kind_from_string("xen", &k) == 0 && k == XBD_PLATFORM_XEN, "xen");
	CHECK(xbd_platform_kind_from_string("sim", &k) == 0 && k == XBD_PLATFORM_SIM, "sim");
	CHECK(xbd_platform_kind_from_string("kvm", &k) == -EINVAL, "kvm accepted");
	CHECK(xbd_platform_kind_from_string(NULL, &k) == -EINVAL, "NULL accepted");

	unsetenv("XBD_SIM_DIR");
	unsetenv("XBD_SIM_DOMID");
	if (!have_xen) {
		r = xbd_platform_open(XBD_PLATFORM_AUTO, &p);
		CHECK(r == -ENODEV, "auto without sim or xen: %d", r);
		r = xbd_platform_open(XBD_PLATFORM_XEN, &p);
		CHECK(r == -ENODEV, "xen without /dev/xen: %d", r);
	} else {
		fprintf(stderr, "note: /dev/xen exists, -ENODEV checks skipped\n");
	}
	r = xbd_platform_open(XBD_PLATFORM_SIM, &p);
	CHECK(r == -ENODEV, "sim without XBD_SIM_DIR: %d", r);

	dir = ptest_host(1, 30);
	CHECK(xbd_sim_host_init(dir) == -EEXIST, "second host init in the same dir");
	CHECK(xbd_sim_domain_create(dir, 3, 1 << 20) == 0, "create dom3");

	setenv("XBD_SIM_DIR", dir, 1);
	setenv("XBD_SIM_DOMID", "3", 1);
	r = xbd_platform_open(XBD_PLATFORM_AUTO, &p);
	CHECK(r == 0, "auto with XBD_SIM_DIR: %s", strerror(-r));
	CHECK(strcmp(xbd_platform_name(p), "sim") == 0, "name %s", xbd_platform_name(p));
	CHECK(xbd_platform_domid(p) == 3, "domid %u", xbd_platform_domid(p));
	xbd_platform_close(p);

	unsetenv("XBD_SIM_DOMID");
	r = xbd_platform_open(XBD_PLATFORM_SIM, &p);
	CHECK(r == 0, "default domid 0: %s", strerror(-r));
	CHECK(xbd_platform_domid(p) == 0, "domid %u", xbd_platform_domid(p));
	xbd_platform_close(p);

	setenv("XBD_SIM_DOMID", "x3", 1);
	CHECK(xbd_platform_open(XBD_PLATFORM_SIM, &p) == -EINVAL, "bad XBD_SIM_DOMID accepted");
	setenv("XBD_SIM_DOMID", "99999", 1);
	CHECK(xbd_platform_open(XBD_PLATFORM_SIM, &p) == -EINVAL, "domid beyond range accepted");
	setenv("XBD_SIM_DOMID", "7", 1);
	r = xbd_platform_open(XBD_PLATFORM_SIM, &p);
	CHECK(r == -ESRCH, "acting as a domain that does not exist: %d", r);

	setenv("XBD_SIM_DIR", "/nonexistent-xbd-dir", 1);
	setenv("XBD_SIM_DOMID", "0", 1);
	r = xbd_platform_open(XBD_PLATFORM_AUTO, &p);
	CHECK(r == -ENOENT, "no host in XBD_SIM_DIR: %d", r);

	r = xbd_platform_open_sim(dir, 3, &p);
	CHECK(r == 0, "open_sim: %s", strerror(-r));
	CHECK(xbd_platform_domid(p) == 3, "domid %u", xbd_platform_domid(p));
	xbd_platform_close(p);
	return 0;
}
