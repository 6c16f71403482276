/*
 * options.c: xbd-back's settings.  Defaults, then the configuration file
 * (config.c), then the command line, which overrides it.  Every value is
 * checked here, and a bad one produces exactly one line naming the option
 * or key, the value and what is allowed.
 */
#include "config.h"

#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blkback/options.h"
#include "ring/ring.h"

const char xbd_disk_opt_names[] =
	"max-batch, cache, fua-mode, persistent, grants, grant-copy, barrier, max-ring-order, "
	"max-queues, max-indirect-segs, poll-max-ns, poll-grow, poll-shrink";
const char xbd_back_opt_names[] = "types, platform, log-level, log, control";

/* Linux blkback's default xenblk_max_queues is the number of online CPUs. */
static unsigned int default_queues(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > 16 ? 16 : (unsigned int)n;
}

static void defaults(struct xbd_back_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->platform = XBD_PLATFORM_AUTO;
	o->foreground = true;
	o->types[0] = "vbd";
	o->types[1] = "vbd3";
	o->nr_types = 2;
	o->disk.max_batch = 32; /* QEMU's measured default */
	o->disk.cache = XBD_CACHE_WRITEBACK;
	o->disk.persistent = true;
	o->disk.max_ring_order = XBD_RING_MAX_ORDER;
	o->disk.max_queues = default_queues();
	o->disk.max_indirect_segs = XBD_MAX_INDIRECT_SEGS;
	o->disk.poll_max_ns = 32000; /* QEMU/NVMe measurements: 16-32 us */
}

const char *xbd_grant_mode_name(enum xbd_grant_mode m)
{
	return m == XBD_GRANTS_MAP ? "map" : m == XBD_GRANTS_COPY ? "copy" : "auto";
}

const char *xbd_fua_mode_name(enum xbd_fua_mode m)
{
	return m == XBD_FUA_FDATASYNC ? "fdatasync" : "dsync";
}

const char *xbd_cache_mode_name(enum xbd_cache_mode m)
{
	switch (m) {
	case XBD_CACHE_WRITEBACK: return "writeback";
	case XBD_CACHE_WRITETHROUGH: return "writethrough";
	case XBD_CACHE_UNSAFE: return "unsafe";
	}
	return "?";
}

static int bad(char *err, size_t errlen, const char *dash, const char *opt, const char *val,
	       const char *allowed)
{
	snprintf(err, errlen, "invalid value '%s' for %s%s: %s", val, dash, opt, allowed);
	return -EINVAL;
}

/* A decimal number in [min, max], nothing else. */
static int parse_num(char *err, size_t errlen, const char *dash, const char *opt,
		     const char *val, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	char allowed[96];
	unsigned long long v;

	snprintf(allowed, sizeof(allowed), "an integer from %" PRIu64 " to %" PRIu64, min, max);
	if (!*val || *val == '-' || *val == '+' || *val == ' ')
		return bad(err, errlen, dash, opt, val, allowed);
	errno = 0;
	v = strtoull(val, &end, 10);
	if (errno || *end || v < min || v > max)
		return bad(err, errlen, dash, opt, val, allowed);
	*out = v;
	return 0;
}

static int parse_types(struct xbd_back_opts *o, const char *dash, const char *val, char *err,
		       size_t errlen)
{
	static const char *const known[] = { "vbd", "vbd3" };
	const char *p = val;

	o->nr_types = 0;
	while (*p) {
		size_t len = strcspn(p, ",");
		unsigned int i;
		bool found = false;

		for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
			if (strlen(known[i]) == len && !strncmp(p, known[i], len)) {
				unsigned int j;

				found = true;
				for (j = 0; j < o->nr_types; j++)
					if (o->types[j] == known[i])
						break;
				if (j == o->nr_types && o->nr_types < XBD_BACK_MAX_TYPES)
					o->types[o->nr_types++] = known[i];
			}
		}
		if (!found)
			break;
		p += len;
		if (*p == ',')
			p++;
	}
	if (*p || !o->nr_types)
		return bad(err, errlen, dash, "types", val, "a comma-separated list of vbd, vbd3");
	return 0;
}

int xbd_disk_opt_set(struct xbd_disk_opts *d, const char *dash, const char *name,
		     const char *val, char *err, size_t errlen)
{
	uint64_t v;

	if (!strcmp(name, "max-batch")) {
		if (parse_num(err, errlen, dash, name, val, 0, 4096, &v))
			return -EINVAL;
		d->max_batch = v;
	} else if (!strcmp(name, "poll-max-ns")) {
		if (parse_num(err, errlen, dash, name, val, 0, 1000000000, &v))
			return -EINVAL;
		d->poll_max_ns = v;
	} else if (!strcmp(name, "poll-grow")) {
		if (parse_num(err, errlen, dash, name, val, 0, 64, &v))
			return -EINVAL;
		d->poll_grow = v;
	} else if (!strcmp(name, "poll-shrink")) {
		if (parse_num(err, errlen, dash, name, val, 0, 64, &v))
			return -EINVAL;
		d->poll_shrink = v;
	} else if (!strcmp(name, "cache")) {
		if (!strcmp(val, "writeback"))
			d->cache = XBD_CACHE_WRITEBACK;
		else if (!strcmp(val, "writethrough"))
			d->cache = XBD_CACHE_WRITETHROUGH;
		else if (!strcmp(val, "unsafe"))
			d->cache = XBD_CACHE_UNSAFE;
		else
			return bad(err, errlen, dash, name, val, "writeback, writethrough or unsafe");
	} else if (!strcmp(name, "fua-mode")) {
		if (!strcmp(val, "dsync"))
			d->fua_mode = XBD_FUA_DSYNC;
		else if (!strcmp(val, "fdatasync"))
			d->fua_mode = XBD_FUA_FDATASYNC;
		else
			return bad(err, errlen, dash, name, val, "dsync or fdatasync");
	} else if (!strcmp(name, "grants")) {
		if (!strcmp(val, "auto"))
			d->grants = XBD_GRANTS_AUTO;
		else if (!strcmp(val, "map"))
			d->grants = XBD_GRANTS_MAP;
		else if (!strcmp(val, "copy"))
			d->grants = XBD_GRANTS_COPY;
		else
			return bad(err, errlen, dash, name, val, "auto, map or copy");
	} else if (!strcmp(name, "persistent") || !strcmp(name, "grant-copy") ||
		   !strcmp(name, "barrier")) {
		bool b;

		if (strcmp(val, "0") && strcmp(val, "1"))
			return bad(err, errlen, dash, name, val, "0 or 1");
		b = val[0] == '1';
		if (name[0] == 'p')
			d->persistent = b;
		else if (name[0] == 'g')
			d->grants = b ? XBD_GRANTS_COPY : XBD_GRANTS_AUTO;
		else
			d->barrier = b;
	} else if (!strcmp(name, "max-ring-order")) {
		if (parse_num(err, errlen, dash, name, val, 0, XBD_RING_MAX_ORDER, &v))
			return -EINVAL;
		d->max_ring_order = v;
	} else if (!strcmp(name, "max-queues")) {
		if (parse_num(err, errlen, dash, name, val, 1, 16, &v))
			return -EINVAL;
		d->max_queues = v;
	} else if (!strcmp(name, "max-indirect-segs")) {
		char allowed[64];

		snprintf(allowed, sizeof(allowed), "0 (off) or an integer from %u to %u",
			 BLKIF_MAX_SEGMENTS_PER_REQUEST + 1, XBD_MAX_INDIRECT_SEGS);
		if (parse_num(err, errlen, dash, name, val, 0, XBD_MAX_INDIRECT_SEGS, &v) ||
		    (v && v <= BLKIF_MAX_SEGMENTS_PER_REQUEST))
			return bad(err, errlen, dash, name, val, allowed);
		d->max_indirect_segs = v;
	} else {
		return -ENOENT;
	}
	return 0;
}

static int parse_log_level(const char *val, int *out)
{
	static const char *const names[] = { "info", "verbose", "debug" };
	int i;

	for (i = 0; i < 3; i++) {
		if (!strcmp(val, names[i]) || (val[0] == '0' + i && !val[1])) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

int xbd_back_opt_set(struct xbd_back_opts *o, const char *dash, const char *name,
		     const char *val, char *err, size_t errlen)
{
	if (!strcmp(name, "types"))
		return parse_types(o, dash, val, err, errlen);
	if (!strcmp(name, "platform")) {
		if (xbd_platform_kind_from_string(val, &o->platform))
			return bad(err, errlen, dash, name, val, "auto, xen or sim");
		return 0;
	}
	if (!strcmp(name, "log-level")) {
		if (parse_log_level(val, &o->verbose))
			return bad(err, errlen, dash, name, val, "info, verbose or debug");
		return 0;
	}
	if (!strcmp(name, "log")) {
		if (!strcmp(val, "auto"))
			o->log_target = XBD_LOG_TO_AUTO;
		else if (!strcmp(val, "stderr"))
			o->log_target = XBD_LOG_TO_STDERR;
		else if (!strcmp(val, "syslog"))
			o->log_target = XBD_LOG_TO_SYSLOG;
		else
			return bad(err, errlen, dash, name, val, "auto, stderr or syslog");
		return 0;
	}
	if (!strcmp(name, "control")) {
		char *c;

		if (val[0] && val[0] != '/' && strcmp(val, "none"))
			return bad(err, errlen, dash, name, val,
				   "an absolute path of a unix socket, or none");
		if (strlen(val) >= 108)
			return bad(err, errlen, dash, name, val,
				   "a path shorter than 108 bytes (a unix socket's limit)");
		c = strdup(strcmp(val, "none") ? val : "");
		if (!c)
			return -ENOMEM;
		free(o->control);
		o->control = c;
		return 0;
	}
	return xbd_disk_opt_set(&o->disk, dash, name, val, err, errlen);
}

static void usage(void)
{
	printf("Usage: xbd-back [OPTION]...\n"
	       "Serve Xen PV block devices (blkif) from userspace.\n\n"
	       "  --config FILE           configuration file (default %s if it exists)\n"
	       "  --check-config          check the configuration, print the settings, exit\n"
	       "  --control PATH|none     control socket for xbdctl (default %s)\n"
	       "  --types LIST            backend types to serve: vbd,vbd3 (default vbd,vbd3)\n"
	       "  --platform KIND         auto, xen or sim (default auto)\n"
	       "  --max-batch N           iocbs per io_submit, 0 = engine default, 1 = off (32)\n"
	       "  --poll-max-ns NS        adaptive polling cap per ring, 0 = off (32000)\n"
	       "  --poll-grow N           window multiplier on success, 0 = double (0)\n"
	       "  --poll-shrink N         window divisor on a long wait, 0 = reset (0)\n"
	       "  --cache MODE            writeback, writethrough or unsafe (writeback)\n"
	       "  --fua-mode MODE         durable writes: dsync (RWF_DSYNC) or fdatasync (dsync)\n"
	       "  --persistent 0|1        offer persistent grants (1)\n"
	       "  --grants auto|map|copy  map guest pages or copy them; auto maps persistent\n"
	       "                          grants and copies the others (auto)\n"
	       "  --grant-copy            the same as --grants copy\n"
	       "  --max-ring-order N      0..%u (%u)\n"
	       "  --max-queues N          1..16 (online CPUs)\n"
	       "  --max-indirect-segs N   0 or 12..%u (%u)\n"
	       "  --barrier               offer feature-barrier instead of feature-flush-cache\n"
	       "  --disk PARAMS:SETTINGS  settings for the disks whose params matches PARAMS,\n"
	       "                          e.g. /srv/a.img:cache=unsafe,max-batch=1,barrier=1\n"
	       "  --log-level LEVEL       info, verbose or debug (info)\n"
	       "  --log auto|stderr|syslog  where log lines go (auto: stderr, journal-aware)\n"
	       "  -v, --verbose           one log level more (repeatable)\n"
	       "  --run COMMAND           serve, run COMMAND with /bin/sh, exit with its status\n"
	       "  --foreground            stay in the foreground (the default)\n"
	       "  -h, --help              this text\n"
	       "  --version               print the version and exit\n"
	       "See xbd-back(8) and xbd-back.conf(5).\n",
	       XBD_DEFAULT_CONFIG, XBD_DEFAULT_CONTROL, XBD_RING_MAX_ORDER, XBD_RING_MAX_ORDER,
	       XBD_MAX_INDIRECT_SEGS, XBD_MAX_INDIRECT_SEGS);
}

enum {
	OPT_TYPES = 256, OPT_PLATFORM, OPT_MAX_BATCH, OPT_POLL_MAX, OPT_POLL_GROW,
	OPT_POLL_SHRINK, OPT_CACHE, OPT_PERSISTENT, OPT_GRANT_COPY, OPT_RING_ORDER,
	OPT_QUEUES, OPT_INDIRECT, OPT_BARRIER, OPT_RUN, OPT_FOREGROUND, OPT_DISK,
	OPT_CONFIG, OPT_CHECK, OPT_CONTROL, OPT_LOG_LEVEL, OPT_LOG, OPT_GRANTS, OPT_FUA_MODE,
};

int xbd_disk_opts_apply(struct xbd_disk_opts *o, const char *spec)
{
	char *copy = strdup(spec), *save = NULL, *item;
	char err[XBD_OPT_ERR_MAX];
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (!eq) {
			fprintf(stderr, "xbd-back: disk setting '%s' is not key=value\n", item);
			ret = -EINVAL;
			break;
		}
		*eq = '\0';
		ret = xbd_disk_opt_set(o, "--", item, eq + 1, err, sizeof(err));
		if (ret == -ENOENT)
			fprintf(stderr, "xbd-back: unknown disk setting '%s' (allowed: %s)\n", item,
				xbd_disk_opt_names);
		else if (ret)
			fprintf(stderr, "xbd-back: %s\n", err);
		if (ret) {
			ret = -EINVAL;
			break;
		}
	}
	free(copy);
	return ret;
}

void xbd_disk_opts_for(const struct xbd_back_opts *opts, const char *params,
		       struct xbd_disk_opts *out)
{
	unsigned int i;

	*out = opts->disk;
	for (i = 0; i < opts->nr_rules; i++)
		if (!strcmp(opts->rules[i].target, params) ||
		    !fnmatch(opts->rules[i].target, params, 0))
			xbd_disk_opts_apply(out, opts->rules[i].spec); /* checked already */
}

void xbd_back_free_options(struct xbd_back_opts *opts)
{
	unsigned int i;

	for (i = 0; i < opts->nr_rules; i++) {
		free(opts->rules[i].target);
		free(opts->rules[i].spec);
	}
	opts->nr_rules = 0;
	free(opts->config);
	opts->config = NULL;
	free(opts->control);
	opts->control = NULL;
}

int xbd_back_add_rule(struct xbd_back_opts *o, const char *target, const char *spec)
{
	char *t, *s;

	if (o->nr_rules >= XBD_BACK_MAX_DISK_RULES)
		return -E2BIG;
	t = strdup(target);
	s = strdup(spec);
	if (!t || !s) {
		free(t);
		free(s);
		return -ENOMEM;
	}
	o->rules[o->nr_rules].target = t;
	o->rules[o->nr_rules].spec = s;
	o->nr_rules++;
	return 0;
}

/* --disk TARGET:SPEC, split at the last colon (params may hold one: null:1G). */
static int add_cmdline_rule(struct xbd_back_opts *o, const char *arg)
{
	const char *colon = strrchr(arg, ':');
	struct xbd_disk_opts scratch = o->disk;
	char *t;
	int err;

	if (!colon || colon == arg || !colon[1]) {
		fprintf(stderr, "xbd-back: invalid value '%s' for --disk: "
			"PARAMS:key=value[,key=value...]\n", arg);
		return -EINVAL;
	}
	if (xbd_disk_opts_apply(&scratch, colon + 1))
		return -EINVAL;
	t = strndup(arg, colon - arg);
	if (!t)
		return -ENOMEM;
	err = xbd_back_add_rule(o, t, colon + 1);
	free(t);
	if (err == -E2BIG)
		fprintf(stderr, "xbd-back: invalid value '%s' for --disk: at most %d disk rules\n",
			arg, XBD_BACK_MAX_DISK_RULES);
	return err ? -EINVAL : 0;
}

static const struct option longopts[] = {
	{ "types", required_argument, NULL, OPT_TYPES },
	{ "platform", required_argument, NULL, OPT_PLATFORM },
	{ "max-batch", required_argument, NULL, OPT_MAX_BATCH },
	{ "poll-max-ns", required_argument, NULL, OPT_POLL_MAX },
	{ "poll-grow", required_argument, NULL, OPT_POLL_GROW },
	{ "poll-shrink", required_argument, NULL, OPT_POLL_SHRINK },
	{ "cache", required_argument, NULL, OPT_CACHE },
	{ "fua-mode", required_argument, NULL, OPT_FUA_MODE },
	{ "persistent", required_argument, NULL, OPT_PERSISTENT },
	{ "grant-copy", no_argument, NULL, OPT_GRANT_COPY },
	{ "grants", required_argument, NULL, OPT_GRANTS },
	{ "max-ring-order", required_argument, NULL, OPT_RING_ORDER },
	{ "max-queues", required_argument, NULL, OPT_QUEUES },
	{ "max-indirect-segs", required_argument, NULL, OPT_INDIRECT },
	{ "barrier", no_argument, NULL, OPT_BARRIER },
	{ "verbose", no_argument, NULL, 'v' },
	{ "run", required_argument, NULL, OPT_RUN },
	{ "foreground", no_argument, NULL, OPT_FOREGROUND },
	{ "disk", required_argument, NULL, OPT_DISK },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "check-config", no_argument, NULL, OPT_CHECK },
	{ "control", required_argument, NULL, OPT_CONTROL },
	{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
	{ "log", required_argument, NULL, OPT_LOG },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

/* One command-line option, kept until the configuration file has been read. */
struct cmdopt {
	int c;
	const char *name;
	const char *arg;
};

int xbd_back_parse_options(int argc, char **argv, struct xbd_back_opts *o)
{
	struct cmdopt *cmd;
	const char *config = NULL;
	bool config_given = false;
	unsigned int ncmd = 0, i, verbose = 0;
	char err[XBD_OPT_ERR_MAX];
	int c, idx = 0, ret = 0;

	defaults(o);
	cmd = calloc(argc + 1, sizeof(*cmd));
	if (!cmd)
		return -ENOMEM;
	/* First pass: collect, so that the command line can override the file. */
	optind = 0; /* glibc: start afresh (SIGHUP parses the same argv again) */
	while ((c = getopt_long(argc, argv, "vh", longopts, &idx)) != -1) {
		switch (c) {
		case 'h':
			usage();
			free(cmd);
			return 1;
		case 'V':
			printf("xbd-back %s\n", PACKAGE_VERSION);
			free(cmd);
			return 1;
		case '?':
			fprintf(stderr, "xbd-back: try --help\n");
			free(cmd);
			return -EINVAL;
		case 'v':
			verbose++;
			break;
		case OPT_CONFIG:
			config = optarg;
			config_given = true;
			break;
		default:
			cmd[ncmd].c = c;
			cmd[ncmd].name = longopts[idx].name;
			cmd[ncmd].arg = optarg;
			ncmd++;
			break;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "xbd-back: unexpected argument '%s'\n", argv[optind]);
		free(cmd);
		return -EINVAL;
	}
	if (!config_given && getenv("XBD_BACK_CONFIG")) {
		config = getenv("XBD_BACK_CONFIG");
		config_given = true;
	}
	if (!config)
		config = XBD_DEFAULT_CONFIG;
	ret = xbd_config_load(config, o);
	if (ret == -ENOENT && !config_given) {
		ret = 0; /* no file at the default place: the defaults it is */
	} else if (ret == -ENOENT) {
		fprintf(stderr, "xbd-back: invalid value '%s' for --config: "
			"an existing configuration file\n", config);
		ret = -EINVAL;
	} else if (!ret) {
		o->config = strdup(config);
	}
	for (i = 0; !ret && i < ncmd; i++) {
		const char *arg = cmd[i].arg;

		switch (cmd[i].c) {
		case OPT_GRANT_COPY:
			o->disk.grants = XBD_GRANTS_COPY;
			break;
		case OPT_BARRIER:
			o->disk.barrier = true;
			break;
		case OPT_DISK:
			ret = add_cmdline_rule(o, arg);
			break;
		case OPT_RUN:
			o->run = arg;
			break;
		case OPT_FOREGROUND:
			o->foreground = true;
			break;
		case OPT_CHECK:
			o->check_config = true;
			break;
		default:
			ret = xbd_back_opt_set(o, "--", cmd[i].name, arg, err, sizeof(err));
			if (ret)
				fprintf(stderr, "xbd-back: %s\n", err);
			break;
		}
	}
	free(cmd);
	if (ret)
		return -EINVAL;
	o->verbose += verbose;
	if (o->verbose > 2)
		o->verbose = 2;
	return 0;
}

void xbd_back_print_options(FILE *f, const struct xbd_back_opts *o)
{
	static const char *const levels[] = { "info", "verbose", "debug" };
	static const char *const targets[] = { "auto", "stderr", "syslog" };
	const struct xbd_disk_opts *d = &o->disk;
	unsigned int i;

	fprintf(f, "# xbd-back settings (configuration file: %s)\n",
		o->config ? o->config : "none");
	fprintf(f, "types = ");
	for (i = 0; i < o->nr_types; i++)
		fprintf(f, "%s%s", i ? "," : "", o->types[i]);
	fprintf(f, "\nplatform = %s\n",
		o->platform == XBD_PLATFORM_XEN ? "xen" :
		o->platform == XBD_PLATFORM_SIM ? "sim" : "auto");
	fprintf(f, "log-level = %s\nlog = %s\n", levels[o->verbose], targets[o->log_target]);
	if (!o->control)
		fprintf(f, "#control = %s (the default; the simulator's is in its directory)\n",
			XBD_DEFAULT_CONTROL);
	else
		fprintf(f, "control = %s\n", o->control[0] ? o->control : "none");
	fprintf(f, "max-batch = %u\ncache = %s\nfua-mode = %s\npersistent = %d\ngrants = %s\n"
		"barrier = %d\n", d->max_batch, xbd_cache_mode_name(d->cache),
		xbd_fua_mode_name(d->fua_mode), d->persistent, xbd_grant_mode_name(d->grants),
		d->barrier);
	fprintf(f, "max-ring-order = %u\nmax-queues = %u\nmax-indirect-segs = %u\n",
		d->max_ring_order, d->max_queues, d->max_indirect_segs);
	fprintf(f, "poll-max-ns = %" PRIu64 "\npoll-grow = %u\npoll-shrink = %u\n",
		d->poll_max_ns, d->poll_grow, d->poll_shrink);
	for (i = 0; i < o->nr_rules; i++) {
		char *spec = strdup(o->rules[i].spec), *save = NULL, *item;

		fprintf(f, "\n[disk %s]\n", o->rules[i].target);
		if (!spec)
			continue;
		for (item = strtok_r(spec, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(item, '=');

			if (eq) {
				*eq = '\0';
				fprintf(f, "%s = %s\n", item, eq + 1);
			}
		}
		free(spec);
	}
}
