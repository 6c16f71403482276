/*
 * xbd-sim-disk.c: `xbd-sim disk add|remove`, the toolstack half of a vbd.
 * add writes the backend and frontend directories and libxl's private
 * copy exactly as libxl 4.17 does for `xl block-attach` with a script=
 * disk (device_disk_add + libxl__device_generic_add), states 1 and 1.
 * remove follows libxl's detach (libxl__initiate_device_generic_remove):
 * online=0 and state=5 (Closing) on the backend, a bounded wait for 6
 * (Closed), then libxl__device_destroy's cleanup of all three directories.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/simhost.h"
#include "sim/xbd-sim.h"

/* libxl: LIBXL_DESTROY_TIMEOUT, how long detach waits for the backend to close. */
#define DEFAULT_REMOVE_TIMEOUT_S 10
/* libxl__xen_script_dir_path() on Debian. */
#define XEN_SCRIPT_DIR "/etc/xen/scripts"

/* Letters a..z, aa.. as a 0-based disk index (libxl's "bijective base 26"). */
static const char *parse_disk_letters(const char *s, uint32_t *disk)
{
	uint64_t v = 0;
	const char *p = s;

	while (*p >= 'a' && *p <= 'z') {
		v = v * 26 + (uint64_t)(*p - 'a' + 1);
		if (v > (1u << 20))
			return NULL;
		p++;
	}
	if (p == s)
		return NULL;
	*disk = (uint32_t)(v - 1);
	return p;
}

/* Optional trailing partition number; none means 0 (the whole disk). */
static int parse_partition(const char *s, uint32_t *part)
{
	uint64_t v;

	if (!*s) {
		*part = 0;
		return 0;
	}
	if (xbd_xs_parse_uint(s, 0, 255, &v))
		return -EINVAL;
	*part = (uint32_t)v;
	return 0;
}

/* The Xen PV encoding (docs/misc/vbd-interface.txt), as libxl__device_disk_dev_number. */
static int xvd_devid(uint32_t disk, uint32_t part, uint32_t *devid)
{
	if (disk < 16 && part < 16) {
		*devid = (202u << 8) | (disk << 4) | part;
		return 0;
	}
	if (disk < (1u << 20) && part < 256) {
		*devid = (1u << 28) | (disk << 8) | part;
		return 0;
	}
	return -EINVAL;
}

int sim_vdev_to_devid(const char *vdev, uint32_t *devid)
{
	uint32_t disk, part;
	uint64_t v;
	const char *p;

	if (!vdev || !*vdev)
		return -EINVAL;
	if (vdev[0] >= '0' && vdev[0] <= '9') {
		/* Already a devid. */
		if (xbd_xs_parse_uint(vdev, 1, INT32_MAX, &v))
			return -EINVAL;
		*devid = (uint32_t)v;
		return 0;
	}
	if (!strncmp(vdev, "xvd", 3)) {
		p = parse_disk_letters(vdev + 3, &disk);
		if (!p || parse_partition(p, &part))
			return -EINVAL;
		return xvd_devid(disk, part, devid);
	}
	if (!strncmp(vdev, "sd", 2)) {
		p = parse_disk_letters(vdev + 2, &disk);
		if (!p || parse_partition(p, &part) || disk >= 16 || part >= 16)
			return -EINVAL;
		*devid = (8u << 8) | (disk << 4) | part;
		return 0;
	}
	if (!strncmp(vdev, "hd", 2)) {
		static const uint32_t major[4] = { 3, 3, 22, 22 };

		p = parse_disk_letters(vdev + 2, &disk);
		if (!p || parse_partition(p, &part) || disk >= 4 || part >= 64)
			return -EINVAL;
		*devid = (major[disk] << 8) | ((disk & 1) << 6) | part;
		return 0;
	}
	if (vdev[0] == 'd') {
		/* dNpM: disk N, partition M, in the xvd encoding. */
		char num[16];
		const char *pp = strchr(vdev, 'p');
		size_t n = pp ? (size_t)(pp - vdev - 1) : strlen(vdev + 1);

		if (n == 0 || n >= sizeof(num))
			return -EINVAL;
		memcpy(num, vdev + 1, n);
		num[n] = '\0';
		if (xbd_xs_parse_uint(num, 0, (1u << 20) - 1, &v))
			return -EINVAL;
		disk = (uint32_t)v;
		part = 0;
		if (pp && (!pp[1] || parse_partition(pp + 1, &part)))
			return -EINVAL;
		return xvd_devid(disk, part, devid);
	}
	return -EINVAL;
}

struct disk {
	uint32_t domid, backend_domid, devid;
	const char *vdev, *target, *mode, *type, *device_type, *discard;
	char script[4096];
	char params[4096];
	char fe[XBD_XS_PATH_MAX], be[XBD_XS_PATH_MAX], lx[XBD_XS_PATH_MAX];
};

static int disk_add_txn(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	const struct disk *d = arg;
	/* libxl__device_generic_add: each end owns its directory, the other end reads it. */
	const struct xs_permissions fe_perms[2] = {
		{ .id = d->domid, .perms = XS_PERM_NONE },
		{ .id = d->backend_domid, .perms = XS_PERM_READ },
	};
	const struct xs_permissions be_perms[2] = {
		{ .id = d->backend_domid, .perms = XS_PERM_NONE },
		{ .id = d->domid, .perms = XS_PERM_READ },
	};
	char frontend_id[16], backend_id[16], devid[16], p[XBD_XS_PATH_MAX];
	const struct xbd_xs_kv back[] = {
		{ "params", d->params },
		{ "script", d->script },
		{ "frontend-id", frontend_id },
		{ "online", "1" },
		{ "removable", strcmp(d->device_type, "cdrom") ? "0" : "1" },
		{ "bootable", "1" },
		{ "state", "1" },
		{ "dev", d->vdev },
		{ "type", strcmp(d->type, "vbd3") ? "phy" : "vbd3" },
		{ "mode", d->mode },
		{ "device-type", d->device_type },
		{ "discard-enable", d->discard },
		{ "specification", "xen" },
	};
	const struct xbd_xs_kv front[] = {
		{ "backend-id", backend_id },
		{ "state", "1" },
		{ "virtual-device", devid },
		{ "device-type", d->device_type },
		{ "trusted", "1" },
		/* libxl writes the guest's native protocol for PV guests (xc_domain_get_native_protocol). */
		{ "protocol", "x86_64-abi" },
	};
	int ret;

	snprintf(frontend_id, sizeof(frontend_id), "%u", d->domid);
	snprintf(backend_id, sizeof(backend_id), "%u", d->backend_domid);
	snprintf(devid, sizeof(devid), "%u", d->devid);

	/* libxl__device_exists looks at its private copy. */
	if (xbd_xs_exists(xs, t, d->lx))
		return -EEXIST;
	/* A dying domain has lost its home; writing below it would bring it back. */
	if (xbd_xs_domain_dir(p, sizeof(p), d->domid) || !xbd_xs_exists(xs, t, p) ||
	    xbd_xs_domain_dir(p, sizeof(p), d->backend_domid) || !xbd_xs_exists(xs, t, p))
		return -ESRCH;

#define TRY(expr)                     \
	do {                          \
		ret = (expr);         \
		if (ret)              \
			return ret;   \
	} while (0)
	TRY(xbd_xs_rm(xs, t, d->lx));
	TRY(xbd_xs_join(p, sizeof(p), d->lx, "frontend"));
	TRY(xbd_xs_write_str(xs, t, p, d->fe));
	TRY(xbd_xs_join(p, sizeof(p), d->lx, "backend"));
	TRY(xbd_xs_write_str(xs, t, p, d->be));

	TRY(xbd_xs_rm(xs, t, d->fe));
	TRY(xbd_xs_mkdir(xs, t, d->fe));
	TRY(xbd_xs_set_perms(xs, t, d->fe, fe_perms, 2));
	TRY(xbd_xs_join(p, sizeof(p), d->fe, "backend"));
	TRY(xbd_xs_write_str(xs, t, p, d->be));
	TRY(xbd_xs_write_kvs(xs, t, d->fe, front, sizeof(front) / sizeof(front[0])));

	TRY(xbd_xs_rm(xs, t, d->be));
	TRY(xbd_xs_mkdir(xs, t, d->be));
	TRY(xbd_xs_set_perms(xs, t, d->be, be_perms, 2));
	TRY(xbd_xs_join(p, sizeof(p), d->be, "frontend"));
	TRY(xbd_xs_write_str(xs, t, p, d->fe));
	TRY(xbd_xs_write_kvs(xs, t, d->be, back, sizeof(back) / sizeof(back[0])));

	/* libxl's private copy of the backend keys, so it need not trust the backend. */
	TRY(xbd_xs_write_kvs(xs, t, d->lx, back, sizeof(back) / sizeof(back[0])));
#undef TRY
	return 0;
}

enum { OPT_MODE = 1, OPT_TYPE, OPT_DEVTYPE, OPT_BACKEND, OPT_DISCARD, OPT_SCRIPT, OPT_TIMEOUT };

static const struct option add_opts[] = {
	{ "mode", required_argument, NULL, OPT_MODE },
	{ "type", required_argument, NULL, OPT_TYPE },
	{ "device-type", required_argument, NULL, OPT_DEVTYPE },
	{ "backend-domid", required_argument, NULL, OPT_BACKEND },
	{ "discard-enable", required_argument, NULL, OPT_DISCARD },
	{ "script", required_argument, NULL, OPT_SCRIPT },
	{ NULL, 0, NULL, 0 },
};

static const char add_usage[] =
	"usage: xbd-sim disk add DIR DOMID VDEV TARGET [--mode w|r|w!] [--type vbd|vbd3] "
	"[--device-type disk|cdrom] [--backend-domid N] [--discard-enable 0|1] [--script PATH]";

static void need_domain(const struct sim_host *h, uint32_t domid, const char *what)
{
	int r = xbd_sim_domain_exists(h->dir, domid);

	if (r < 0)
		sim_die(SIM_EXIT_FAIL, "cannot look up %s %u: %s", what, domid, strerror(-r));
	if (!r)
		sim_die(SIM_EXIT_FAIL, "no %s %u on %s", what, domid, h->dir);
}

static int cmd_add(int argc, char **argv)
{
	struct disk d = { .type = "vbd", .device_type = "disk", .discard = "1" };
	const char *pos[4], *script = NULL;
	struct sim_host h;
	int npos = 0, c, ret;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":", add_opts, NULL)) != -1) {
		switch (c) {
		case OPT_MODE:
			/* w!: Xen's block script's forced (shared) mode, which xl never writes. */
			if (strcmp(optarg, "w") && strcmp(optarg, "r") && strcmp(optarg, "w!"))
				sim_die(SIM_EXIT_USAGE, "--mode must be w, r or w!, not '%s'", optarg);
			d.mode = optarg;
			break;
		case OPT_TYPE:
			if (strcmp(optarg, "vbd") && strcmp(optarg, "vbd3"))
				sim_die(SIM_EXIT_USAGE, "--type must be vbd or vbd3, not '%s'", optarg);
			d.type = optarg;
			break;
		case OPT_DEVTYPE:
			if (strcmp(optarg, "disk") && strcmp(optarg, "cdrom"))
				sim_die(SIM_EXIT_USAGE, "--device-type must be disk or cdrom, not '%s'",
					optarg);
			d.device_type = optarg;
			break;
		case OPT_BACKEND:
			d.backend_domid = sim_parse_domid("--backend-domid", optarg, 0);
			break;
		case OPT_DISCARD:
			if (strcmp(optarg, "0") && strcmp(optarg, "1"))
				sim_die(SIM_EXIT_USAGE, "--discard-enable must be 0 or 1, not '%s'",
					optarg);
			d.discard = optarg;
			break;
		case OPT_SCRIPT:
			if (!*optarg)
				sim_die(SIM_EXIT_USAGE, "--script must not be empty");
			script = optarg;
			break;
		case ':':
			sim_die(SIM_EXIT_USAGE, "option '%s' needs a value", argv[optind - 1]);
		default:
			sim_die(SIM_EXIT_USAGE, "unknown option '%s' for disk add", argv[optind - 1]);
		}
	}
	for (; optind < argc; optind++) {
		if (npos == 4)
			sim_die(SIM_EXIT_USAGE, "%s", add_usage);
		pos[npos++] = argv[optind];
	}
	if (npos != 4)
		sim_die(SIM_EXIT_USAGE, "%s", add_usage);
	d.domid = sim_parse_domid("DOMID", pos[1], 1);
	d.vdev = pos[2];
	if (sim_vdev_to_devid(d.vdev, &d.devid))
		sim_die(SIM_EXIT_USAGE,
			"VDEV '%s' is not a virtual disk name (xvdb, xvdb1, sda, hdc, d1p2) or a devid",
			d.vdev);
	d.target = pos[3];
	if (!*d.target)
		sim_die(SIM_EXIT_USAGE, "TARGET must not be empty");
	if (d.backend_domid == d.domid)
		sim_die(SIM_EXIT_USAGE, "domain %u cannot be its own backend", d.domid);
	/* xl: a cdrom is read-only unless said otherwise. */
	if (!d.mode)
		d.mode = strcmp(d.device_type, "cdrom") ? "w" : "r";
	/* libxl__abs_path: a relative script lives in the Xen script directory. */
	if (!script)
		script = strcmp(d.type, "vbd3") ? "block" : "block-tap";
	if ((size_t)snprintf(d.script, sizeof(d.script), "%s%s%s",
			     script[0] == '/' ? "" : XEN_SCRIPT_DIR,
			     script[0] == '/' ? "" : "/", script) >= sizeof(d.script))
		sim_die(SIM_EXIT_USAGE, "--script is too long");
	/* The tap slot carries the format in params ("aio:" for raw). */
	if ((size_t)snprintf(d.params, sizeof(d.params), "%s%s",
			     strcmp(d.type, "vbd3") ? "" : "aio:", d.target) >= sizeof(d.params))
		sim_die(SIM_EXIT_USAGE, "TARGET is too long");

	if (xbd_xs_frontend_dir(d.fe, sizeof(d.fe), d.domid, "vbd", d.devid) ||
	    xbd_xs_backend_dir(d.be, sizeof(d.be), d.backend_domid, d.type, d.domid, d.devid) ||
	    xbd_xs_pathf(d.lx, sizeof(d.lx), "/libxl/%u/device/vbd/%u", d.domid, d.devid))
		sim_die(SIM_EXIT_USAGE, "xenstore path too long");

	sim_host_paths(&h, pos[0]);
	sim_connect(&h);
	need_domain(&h, d.domid, "domain");
	need_domain(&h, d.backend_domid, "backend domain");
	ret = xbd_xs_transact(h.xs, disk_add_txn, &d);
	if (ret == -EEXIST)
		sim_die(SIM_EXIT_FAIL, "domain %u already has a vbd %u (%s)", d.domid, d.devid, d.lx);
	if (ret == -ESRCH)
		sim_die(SIM_EXIT_FAIL, "domain %u or %u has no /local/domain home (dying?)", d.domid,
			d.backend_domid);
	if (ret)
		sim_die(SIM_EXIT_FAIL, "cannot add vbd %u/%u: %s", d.domid, d.devid, strerror(-ret));
	sim_disconnect(&h);
	printf("%u\n", d.devid);
	return fflush(stdout) ? SIM_EXIT_FAIL : 0;
}

struct remove {
	char be[XBD_XS_PATH_MAX], fe[XBD_XS_PATH_MAX], lx[XBD_XS_PATH_MAX];
	bool backend_gone;
	bool own_backend;   /* the backend lives in dom0, whose nodes we clean up */
};

static int disk_close_txn(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	struct remove *r = arg;
	char p[XBD_XS_PATH_MAX];
	uint64_t state;
	int ret;

	ret = xbd_xs_join(p, sizeof(p), r->be, "state");
	if (ret)
		return ret;
	ret = xbd_xs_read_uint(xs, t, p, 0, UINT32_MAX, &state);
	if (ret == -ENOENT) {
		/* libxl: the backend is gone already; only the frontend is left to clean. */
		r->backend_gone = true;
		return 0;
	}
	if (ret == -EINVAL || ret == -ERANGE)
		state = XenbusStateUnknown;
	else if (ret)
		return ret;
	r->backend_gone = false;
	ret = xbd_xs_join(p, sizeof(p), r->be, "online");
	if (!ret)
		ret = xbd_xs_write_str(xs, t, p, "0");
	/* A backend already Closed stays so (libxl does not write Closing over it). */
	if (!ret && state != XenbusStateClosed) {
		ret = xbd_xs_join(p, sizeof(p), r->be, "state");
		if (!ret)
			ret = xbd_xs_write_uint(xs, t, p, XenbusStateClosing);
	}
	return ret;
}

static int disk_destroy_txn(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	const struct remove *r = arg;
	int ret;

	/* libxl__device_destroy: frontend, backend (when it is ours), private copy. */
	ret = sim_path_cleanup(xs, t, r->fe);
	if (!ret && r->own_backend)
		ret = sim_path_cleanup(xs, t, r->be);
	if (!ret)
		ret = sim_path_cleanup(xs, t, r->lx);
	return ret;
}

static const struct option remove_opts[] = {
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ NULL, 0, NULL, 0 },
};

static const char remove_usage[] = "usage: xbd-sim disk remove DIR DOMID DEVID [--timeout S]";

static int cmd_remove(int argc, char **argv)
{
	struct remove r = { 0 };
	uint64_t timeout_s = DEFAULT_REMOVE_TIMEOUT_S;
	const char *pos[3];
	struct sim_host h;
	uint32_t domid, devid, be_domid, be_fe_domid, be_devid;
	char type[16], lxbe[XBD_XS_PATH_MAX], *v;
	enum xenbus_state seen;
	int npos = 0, c, ret, rc = 0;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":", remove_opts, NULL)) != -1) {
		switch (c) {
		case OPT_TIMEOUT:
			timeout_s = sim_parse_num("--timeout", optarg, 0, 3600);
			break;
		case ':':
			sim_die(SIM_EXIT_USAGE, "option '%s' needs a value", argv[optind - 1]);
		default:
			sim_die(SIM_EXIT_USAGE, "unknown option '%s' for disk remove",
				argv[optind - 1]);
		}
	}
	for (; optind < argc; optind++) {
		if (npos == 3)
			sim_die(SIM_EXIT_USAGE, "%s", remove_usage);
		pos[npos++] = argv[optind];
	}
	if (npos != 3)
		sim_die(SIM_EXIT_USAGE, "%s", remove_usage);
	domid = sim_parse_domid("DOMID", pos[1], 1);
	if (sim_vdev_to_devid(pos[2], &devid))
		sim_die(SIM_EXIT_USAGE, "DEVID '%s' is not a devid or a virtual disk name", pos[2]);

	sim_host_paths(&h, pos[0]);
	sim_connect(&h);
	/* The private copy says where the backend is, as it does for libxl. */
	if (xbd_xs_pathf(r.lx, sizeof(r.lx), "/libxl/%u/device/vbd/%u", domid, devid) ||
	    xbd_xs_frontend_dir(r.fe, sizeof(r.fe), domid, "vbd", devid) ||
	    xbd_xs_join(lxbe, sizeof(lxbe), r.lx, "backend"))
		sim_die(SIM_EXIT_USAGE, "xenstore path too long");
	ret = xbd_xs_read_str(h.xs, XBT_NULL, lxbe, &v);
	if (ret == -ENOENT)
		sim_die(SIM_EXIT_FAIL, "domain %u has no vbd %u", domid, devid);
	if (ret)
		sim_die(SIM_EXIT_FAIL, "cannot read %s: %s", lxbe, strerror(-ret));
	if (xbd_xs_parse_backend_dir(v, &be_domid, type, sizeof(type), &be_fe_domid, &be_devid) ||
	    be_fe_domid != domid || be_devid != devid) {
		free(v);
		sim_die(SIM_EXIT_FAIL, "%s does not name a backend of vbd %u/%u", lxbe, domid, devid);
	}
	snprintf(r.be, sizeof(r.be), "%s", v);
	free(v);
	r.own_backend = be_domid == 0;

	ret = xbd_xs_transact(h.xs, disk_close_txn, &r);
	if (ret) {
		sim_err("vbd %u/%u: cannot ask the backend to close: %s", domid, devid, strerror(-ret));
		rc = SIM_EXIT_FAIL;
	} else if (!r.backend_gone) {
		ret = xbd_xenbus_wait_state(h.xs, r.be, 1u << XenbusStateClosed,
					    (int)(timeout_s * 1000), &seen);
		/* A backend that removed its own directory has closed too. */
		if (ret == -ETIMEDOUT) {
			sim_err("vbd %u/%u: backend %s did not reach Closed within %u s (state %s); "
				"removed anyway", domid, devid, r.be, (unsigned int)timeout_s,
				xbd_xenbus_state_name(xbd_xenbus_read_state(h.xs, r.be)));
			rc = SIM_EXIT_FAIL;
		} else if (ret && ret != -ENOENT) {
			sim_err("vbd %u/%u: waiting for the backend: %s", domid, devid,
				strerror(-ret));
			rc = SIM_EXIT_FAIL;
		}
	}
	ret = xbd_xs_transact(h.xs, disk_destroy_txn, &r);
	if (ret) {
		sim_err("vbd %u/%u: cannot remove its xenstore directories: %s", domid, devid,
			strerror(-ret));
		rc = SIM_EXIT_FAIL;
	}
	sim_disconnect(&h);
	return rc;
}

int sim_cmd_disk(int argc, char **argv)
{
	if (argc < 2)
		sim_die(SIM_EXIT_USAGE, "usage: xbd-sim disk add|remove DIR ...");
	if (!strcmp(argv[1], "add"))
		return cmd_add(argc - 1, argv + 1);
	if (!strcmp(argv[1], "remove"))
		return cmd_remove(argc - 1, argv + 1);
	sim_die(SIM_EXIT_USAGE, "unknown disk command '%s' (add, remove)", argv[1]);
}
