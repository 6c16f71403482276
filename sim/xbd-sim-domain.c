/*
 * xbd-sim-domain.c: `xbd-sim domain create|destroy|list`.  A domain is
 * created in the simulated hypervisor (sim/simhost.h) and given the
 * xenstore home libxl 4.17 gives a new guest (libxl__domain_make and
 * libxl__build_post), then introduced to xenstored (@introduceDomain).
 * Destroying it removes what libxl removes (the domain's home, /libxl/N,
 * /vm/UUID), kills it in the hypervisor and releases it in xenstored
 * (@releaseDomain); backends clean up after themselves on that event.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "sim/simhost.h"
#include "sim/xbd-sim.h"

/* What xs_introduce_domain() hands xenstored for the domain's ring; the
 * simulator's xenstored serves a socket per domain instead of a ring page. */
#define SIM_STORE_MFN 1u
#define SIM_STORE_PORT 1u

#define NAME_MAX_LEN 64

struct create_args {
	uint32_t domid;
	uint64_t mem_bytes;
	const char *name;
	char uuid[37];
};

/* A random (version 4) UUID, as xl makes for each new domain. */
static int make_uuid(char out[37])
{
	uint8_t b[16];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -errno;
	b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
	b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
	return 0;
}

/* libxl__xs_mknod: an empty node with the given permissions. */
static int mknod_perms(struct xbd_xs *xs, xs_transaction_t t, const char *path,
		       const struct xs_permissions *perms, unsigned int n)
{
	int ret = xbd_xs_write_str(xs, t, path, "");

	return ret ? ret : xbd_xs_set_perms(xs, t, path, perms, n);
}

static int domain_make_txn(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	const struct create_args *a = arg;
	/* libxl__domain_make: the guest reads its home; some leaves it may write. */
	const struct xs_permissions roperm[2] = {
		{ .id = 0, .perms = XS_PERM_NONE },
		{ .id = a->domid, .perms = XS_PERM_READ },
	};
	const struct xs_permissions rwperm[1] = { { .id = a->domid, .perms = XS_PERM_NONE } };
	const struct xs_permissions noperm[1] = { { .id = 0, .perms = XS_PERM_NONE } };
	static const char *const ro_dirs[] = { "cpu", "memory", "device", "control" };
	static const char *const rw_nodes[] = {
		"device/suspend/event-channel", "control/shutdown", "control/feature-poweroff",
		"control/feature-reboot", "control/feature-suspend", "control/sysrq",
		"data", "drivers", "feature", "attr", "error",
	};
	char dom[XBD_XS_PATH_MAX], vm[XBD_XS_PATH_MAX], lx[XBD_XS_PATH_MAX], p[XBD_XS_PATH_MAX];
	char num[32];
	int ret;

	if ((ret = xbd_xs_domain_dir(dom, sizeof(dom), a->domid)) ||
	    (ret = xbd_xs_pathf(vm, sizeof(vm), "/vm/%s", a->uuid)) ||
	    (ret = xbd_xs_pathf(lx, sizeof(lx), "/libxl/%u", a->domid)))
		return ret;

#define TRY(expr)                     \
	do {                          \
		ret = (expr);         \
		if (ret)              \
			return ret;   \
	} while (0)

	TRY(xbd_xs_rm(xs, t, dom));
	TRY(mknod_perms(xs, t, dom, roperm, 2));
	TRY(xbd_xs_rm(xs, t, vm));
	TRY(mknod_perms(xs, t, vm, roperm, 2));
	TRY(xbd_xs_rm(xs, t, lx));
	TRY(mknod_perms(xs, t, lx, noperm, 1));
	TRY(xbd_xs_join(p, sizeof(p), lx, "device"));
	TRY(mknod_perms(xs, t, p, noperm, 1));

	TRY(xbd_xs_join(p, sizeof(p), dom, "vm"));
	TRY(xbd_xs_write_str(xs, t, p, vm));
	TRY(xbd_xs_join(p, sizeof(p), dom, "name"));
	TRY(xbd_xs_write_str(xs, t, p, a->name));
	TRY(xbd_xs_join(p, sizeof(p), vm, "name"));
	TRY(xbd_xs_write_str(xs, t, p, a->name));
	TRY(xbd_xs_join(p, sizeof(p), vm, "uuid"));
	TRY(xbd_xs_write_str(xs, t, p, a->uuid));

	for (size_t i = 0; i < sizeof(ro_dirs) / sizeof(ro_dirs[0]); i++) {
		TRY(xbd_xs_join(p, sizeof(p), dom, ro_dirs[i]));
		TRY(mknod_perms(xs, t, p, roperm, 2));
	}
	for (size_t i = 0; i < sizeof(rw_nodes) / sizeof(rw_nodes[0]); i++) {
		TRY(xbd_xs_join(p, sizeof(p), dom, rw_nodes[i]));
		TRY(mknod_perms(xs, t, p, rwperm, 1));
	}
	TRY(xbd_xs_join(p, sizeof(p), dom, "control/platform-feature-multiprocessor-suspend"));
	TRY(xbd_xs_write_str(xs, t, p, "1"));
	TRY(xbd_xs_join(p, sizeof(p), dom, "control/platform-feature-xs_reset_watches"));
	TRY(xbd_xs_write_str(xs, t, p, "1"));
	TRY(xbd_xs_join(p, sizeof(p), lx, "type"));
	TRY(xbd_xs_write_str(xs, t, p, "pv"));

	/* libxl__build_post, once the domain is built. */
	snprintf(num, sizeof(num), "%" PRIu64, a->mem_bytes >> 10);
	TRY(xbd_xs_join(p, sizeof(p), dom, "memory/static-max"));
	TRY(xbd_xs_write_str(xs, t, p, num));
	TRY(xbd_xs_join(p, sizeof(p), dom, "memory/target"));
	TRY(xbd_xs_write_str(xs, t, p, num));
	TRY(xbd_xs_join(p, sizeof(p), dom, "domid"));
	TRY(xbd_xs_write_uint(xs, t, p, a->domid));
	TRY(xbd_xs_join(p, sizeof(p), dom, "store/port"));
	TRY(xbd_xs_write_uint(xs, t, p, SIM_STORE_PORT));
	TRY(xbd_xs_join(p, sizeof(p), dom, "store/ring-ref"));
	TRY(xbd_xs_write_uint(xs, t, p, SIM_STORE_MFN));
#undef TRY
	return 0;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NAME_MAX_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

/* 1 if some domain's home already carries this name (libxl refuses duplicates). */
static int name_taken(struct xbd_xs *xs, const char *name)
{
	char **doms;
	unsigned int n;
	int ret, taken = 0;

	ret = xbd_xs_directory(xs, XBT_NULL, "/local/domain", &doms, &n);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	for (unsigned int i = 0; i < n && !taken; i++) {
		char p[XBD_XS_PATH_MAX], *v;

		if (xbd_xs_pathf(p, sizeof(p), "/local/domain/%s/name", doms[i]))
			continue;
		if (xbd_xs_read_str(xs, XBT_NULL, p, &v))
			continue;
		taken = !strcmp(v, name);
		free(v);
	}
	free(doms);
	return taken;
}

enum { OPT_MEM = 1, OPT_NAME };

static const struct option create_opts[] = {
	{ "mem", required_argument, NULL, OPT_MEM },
	{ "name", required_argument, NULL, OPT_NAME },
	{ NULL, 0, NULL, 0 },
};

static int cmd_create(int argc, char **argv)
{
	struct create_args a = { .mem_bytes = XBD_SIM_DEFAULT_MEM_BYTES };
	const char *pos[2];
	char namebuf[32];
	struct sim_host h;
	bool auto_id;
	int npos = 0, c, ret;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":", create_opts, NULL)) != -1) {
		switch (c) {
		case OPT_MEM:
			a.mem_bytes = sim_parse_num("--mem", optarg, 1, 1u << 20) << 20;
			break;
		case OPT_NAME:
			if (!valid_name(optarg))
				sim_die(SIM_EXIT_USAGE,
					"--name '%s' must be 1-%d characters of A-Z a-z 0-9 . _ -",
					optarg, NAME_MAX_LEN);
			a.name = optarg;
			break;
		case ':':
			sim_die(SIM_EXIT_USAGE, "option '%s' needs a value", argv[optind - 1]);
		default:
			sim_die(SIM_EXIT_USAGE, "unknown option '%s' for domain create",
				argv[optind - 1]);
		}
	}
	for (; optind < argc; optind++) {
		if (npos == 2)
			sim_die(SIM_EXIT_USAGE,
				"usage: xbd-sim domain create DIR [DOMID] [--mem MiB] [--name NAME]");
		pos[npos++] = argv[optind];
	}
	if (npos < 1)
		sim_die(SIM_EXIT_USAGE,
			"usage: xbd-sim domain create DIR [DOMID] [--mem MiB] [--name NAME]");
	auto_id = npos < 2;
	if (!auto_id)
		a.domid = sim_parse_domid("DOMID", pos[1], 1);

	sim_host_paths(&h, pos[0]);
	sim_connect(&h);
	if (a.name) {
		ret = name_taken(h.xs, a.name);
		if (ret < 0)
			sim_die(SIM_EXIT_FAIL, "cannot read domain names: %s", strerror(-ret));
		if (ret)
			sim_die(SIM_EXIT_FAIL, "a domain named '%s' already exists", a.name);
	}
	/* With no DOMID, another xbd-sim may take the one we picked: pick again. */
	for (int tries = 0;; tries++) {
		if (auto_id) {
			ret = xbd_sim_domain_free_id(h.dir);
			if (ret < 0)
				sim_die(SIM_EXIT_FAIL, "no free domid: %s", strerror(-ret));
			a.domid = (uint32_t)ret;
		}
		ret = xbd_sim_domain_create(h.dir, a.domid, a.mem_bytes);
		if (ret == -EEXIST && auto_id && tries < 16)
			continue;
		if (ret == -EEXIST)
			sim_die(SIM_EXIT_FAIL, "domain %u already exists", a.domid);
		if (ret)
			sim_die(SIM_EXIT_FAIL, "cannot create domain %u: %s", a.domid,
				strerror(-ret));
		break;
	}
	if (!a.name) {
		snprintf(namebuf, sizeof(namebuf), "domU-%u", a.domid);
		a.name = namebuf;
	}
	ret = make_uuid(a.uuid);
	if (!ret)
		ret = xbd_xs_transact(h.xs, domain_make_txn, &a);
	if (ret) {
		sim_err("cannot write the xenstore home of domain %u: %s", a.domid, strerror(-ret));
		goto undo;
	}
	if (!xs_introduce_domain(xbd_xs_handle(h.xs), a.domid, SIM_STORE_MFN, SIM_STORE_PORT)) {
		ret = errno;
		sim_err("xenstored refused to introduce domain %u: %s", a.domid, strerror(ret));
		goto undo;
	}
	sim_disconnect(&h);
	printf("%u\n", a.domid);
	return fflush(stdout) ? SIM_EXIT_FAIL : 0;

undo:
	sim_domain_destroy(&h, a.domid);
	sim_disconnect(&h);
	return SIM_EXIT_FAIL;
}

struct destroy_args {
	uint32_t domid;
	const char *vm;
};

static int domain_rm_txn(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	const struct destroy_args *a = arg;
	char p[XBD_XS_PATH_MAX];
	int ret;

	ret = xbd_xs_pathf(p, sizeof(p), "/libxl/%u", a->domid);
	if (!ret)
		ret = xbd_xs_rm(xs, t, p);
	if (!ret)
		ret = xbd_xs_domain_dir(p, sizeof(p), a->domid);
	if (!ret)
		ret = sim_path_cleanup(xs, t, p);
	/* Only a /vm/ path we can vouch for: the guest could not write "vm", but be sure. */
	if (!ret && a->vm && !strncmp(a->vm, "/vm/", 4) && !strchr(a->vm + 4, '/'))
		ret = xbd_xs_rm(xs, t, a->vm);
	return ret;
}

int sim_domain_destroy(struct sim_host *h, uint32_t domid)
{
	struct destroy_args a = { .domid = domid };
	char p[XBD_XS_PATH_MAX];
	char *vm = NULL;
	int ret, rc = 0;

	/* libxl's order: the xenstore side goes first, then the domain, then xenstored lets go. */
	if (!xbd_xs_pathf(p, sizeof(p), "/local/domain/%u/vm", domid) &&
	    !xbd_xs_read_str(h->xs, XBT_NULL, p, &vm))
		a.vm = vm;
	ret = xbd_xs_transact(h->xs, domain_rm_txn, &a);
	free(vm);
	if (ret) {
		sim_err("domain %u: cannot remove its xenstore nodes: %s", domid, strerror(-ret));
		rc = ret;
	}
	ret = xbd_sim_domain_destroy(h->dir, domid);
	if (ret && ret != -ENOENT) {
		sim_err("domain %u: cannot destroy it: %s", domid, strerror(-ret));
		rc = rc ? rc : ret;
	}
	if (!xs_release_domain(xbd_xs_handle(h->xs), domid)) {
		ret = errno ? errno : EIO;
		sim_err("domain %u: xenstored refused to release it: %s", domid, strerror(ret));
		rc = rc ? rc : -ret;
	}
	return rc;
}

static int cmd_destroy(int argc, char **argv)
{
	struct sim_host h;
	uint32_t domid;
	int r;

	if (argc != 3)
		sim_die(SIM_EXIT_USAGE, "usage: xbd-sim domain destroy DIR DOMID");
	domid = sim_parse_domid("DOMID", argv[2], 0);
	if (domid == 0)
		sim_die(SIM_EXIT_USAGE, "domain 0 cannot be destroyed (use xbd-sim stop)");
	sim_host_paths(&h, argv[1]);
	sim_connect(&h);
	r = xbd_sim_domain_exists(h.dir, domid);
	if (r < 0)
		sim_die(SIM_EXIT_FAIL, "cannot look up domain %u: %s", domid, strerror(-r));
	if (!r)
		sim_die(SIM_EXIT_FAIL, "no domain %u on %s", domid, h.dir);
	r = sim_domain_destroy(&h, domid);
	sim_disconnect(&h);
	return r ? SIM_EXIT_FAIL : 0;
}

static int cmd_list(int argc, char **argv)
{
	struct sim_host h;
	uint32_t *ids;
	unsigned int n;
	int ret;

	if (argc != 2)
		sim_die(SIM_EXIT_USAGE, "usage: xbd-sim domain list DIR");
	sim_host_paths(&h, argv[1]);
	sim_connect(&h);
	ret = sim_list_domains(&h, &ids, &n);
	if (ret)
		sim_die(SIM_EXIT_FAIL, "cannot list domains: %s", strerror(-ret));
	for (unsigned int i = 0; i < n; i++) {
		char p[XBD_XS_PATH_MAX], *name = NULL;

		if (!xbd_xs_pathf(p, sizeof(p), "/local/domain/%u/name", ids[i]))
			xbd_xs_read_str(h.xs, XBT_NULL, p, &name);
		printf("%u %s\n", ids[i], name ? name : "-");
		free(name);
	}
	free(ids);
	sim_disconnect(&h);
	return fflush(stdout) ? SIM_EXIT_FAIL : 0;
}

int sim_cmd_domain(int argc, char **argv)
{
	if (argc < 2)
		sim_die(SIM_EXIT_USAGE, "usage: xbd-sim domain create|destroy|list DIR ...");
	if (!strcmp(argv[1], "create"))
		return cmd_create(argc - 1, argv + 1);
	if (!strcmp(argv[1], "destroy"))
		return cmd_destroy(argc - 1, argv + 1);
	if (!strcmp(argv[1], "list"))
		return cmd_list(argc - 1, argv + 1);
	sim_die(SIM_EXIT_USAGE, "unknown domain command '%s' (create, destroy, list)", argv[1]);
}
