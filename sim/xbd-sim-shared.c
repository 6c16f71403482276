/*
 * xbd-sim-shared.c: what the files of the `xbd-sim` command share
 * (xbd-sim.h): its error lines and exits, its strict numbers, the
 * simulated host's paths and its xenstore connection as dom0, the domains
 * it has, and a node removed with its emptied parents.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/simhost.h"
#include "sim/xbd-sim.h"

/* "xbd-sim: MSG" on stderr. */
static void say(const char *fmt, va_list ap)
{
	fputs("xbd-sim: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void sim_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
}

void sim_die(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
	exit(code);
}

uint64_t sim_parse_num(const char *what, const char *s, uint64_t min, uint64_t max)
{
	uint64_t v;
	int ret = xbd_xs_parse_uint(s, min, max, &v);

	if (ret == -ERANGE)
		sim_die(SIM_EXIT_USAGE, "%s '%s' out of range (%llu..%llu)", what, s,
			(unsigned long long)min, (unsigned long long)max);
	if (ret)
		sim_die(SIM_EXIT_USAGE, "%s '%s' is not a decimal number", what, s);
	return v;
}

uint32_t sim_parse_domid(const char *what, const char *s, uint32_t min)
{
	return (uint32_t)sim_parse_num(what, s, min, XBD_SIM_MAX_DOMID);
}

static void set_path(char *buf, size_t len, const char *a, const char *b)
{
	if ((size_t)snprintf(buf, len, "%s%s", a, b) >= len)
		sim_die(SIM_EXIT_USAGE, "DIR '%s' is too long", a);
}

void sim_host_paths(struct sim_host *h, const char *dir)
{
	char cwd[PATH_MAX];

	memset(h, 0, sizeof(*h));
	if (!dir || !*dir)
		sim_die(SIM_EXIT_USAGE, "DIR must not be empty");
	if (dir[0] == '/') {
		set_path(h->dir, sizeof(h->dir), dir, "");
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			sim_die(SIM_EXIT_FAIL, "cannot get the current directory: %s", strerror(errno));
		if ((size_t)snprintf(h->dir, sizeof(h->dir), "%s/%s", cwd, dir) >= sizeof(h->dir))
			sim_die(SIM_EXIT_USAGE, "DIR '%s' is too long", dir);
	}
	/* Trailing slashes would double up in every path below. */
	for (size_t n = strlen(h->dir); n > 1 && h->dir[n - 1] == '/'; n--)
		h->dir[n - 1] = '\0';
	set_path(h->xsdir, sizeof(h->xsdir), h->dir, "/xenstore");
	set_path(h->socket, sizeof(h->socket), h->dir, "/xenstore/socket");
	set_path(h->pidfile, sizeof(h->pidfile), h->dir, "/xenstore/xenstored.pid");
	set_path(h->rundir, sizeof(h->rundir), h->dir, "/run");
	/* A unix socket path has to fit sun_path (108 bytes with the domain sockets' suffix). */
	if (strlen(h->dir) + sizeof("/xenstore/domain/32751.sock") > 108)
		sim_die(SIM_EXIT_USAGE, "DIR '%s' is too long for unix socket paths", h->dir);
}

void sim_connect(struct sim_host *h)
{
	struct stat st;
	int ret;

	if (stat(h->socket, &st) || !S_ISSOCK(st.st_mode))
		sim_die(SIM_EXIT_FAIL, "no simulated host at %s (no %s; run xbd-sim start)", h->dir,
			h->socket);
	ret = sim_try_connect(h);
	if (ret)
		sim_die(SIM_EXIT_FAIL, "cannot connect to xenstore at %s: %s", h->socket,
			strerror(-ret));
}

int sim_try_connect(struct sim_host *h)
{
	/* libxenstore's xs_open() connects wherever XENSTORED_PATH says. */
	if (setenv("XENSTORED_PATH", h->socket, 1))
		return -errno;
	return xbd_xs_open(&h->xs);
}

void sim_disconnect(struct sim_host *h)
{
	xbd_xs_close(h->xs);
	h->xs = NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

int sim_list_domains(struct sim_host *h, uint32_t **ids, unsigned int *count)
{
	char **names = NULL;
	unsigned int n = 0, found = 0;
	uint32_t *v;
	int ret;

	/*
	 * The domains with a home in xenstore that the hypervisor still runs,
	 * as `xl list` shows them.  (simhost.h has no enumeration, and
	 * probing all 32k domids costs most of a second.)
	 */
	ret = xbd_xs_directory(h->xs, XBT_NULL, "/local/domain", &names, &n);
	if (ret && ret != -ENOENT)
		return ret;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		free(names);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < n; i++) {
		uint64_t d;
		int r;

		if (xbd_xs_parse_uint(names[i], 0, XBD_SIM_MAX_DOMID, &d))
			continue;
		r = xbd_sim_domain_exists(h->dir, (uint32_t)d);
		if (r < 0) {
			free(names);
			free(v);
			return r;
		}
		if (r)
			v[found++] = (uint32_t)d;
	}
	free(names);
	qsort(v, found, sizeof(*v), cmp_u32);
	*ids = v;
	*count = found;
	return 0;
}

int sim_path_cleanup(struct xbd_xs *xs, xs_transaction_t t, const char *path)
{
	char p[XBD_XS_PATH_MAX];
	char *slash;
	int ret;

	if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	ret = xbd_xs_rm(xs, t, p);
	if (ret)
		return ret;
	/* Parents that held nothing but this node go too, as libxl leaves no empty husks. */
	while ((slash = strrchr(p, '/')) && slash != p) {
		char *val, **children;
		unsigned int n;
		bool empty;

		*slash = '\0';
		if (xbd_xs_read_str(xs, t, p, &val))
			break;
		empty = !*val;
		free(val);
		if (!empty || xbd_xs_directory(xs, t, p, &children, &n))
			break;
		free(children);
		if (n)
			break;
		ret = xbd_xs_rm(xs, t, p);
		if (ret)
			return ret;
	}
	return 0;
}
