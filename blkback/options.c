/*
 * options.c: xbd-back's command line.  Every value is checked here, and a
 * bad one produces exactly one line naming the option, the value and what
 * is allowed.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blkback/options.h"
#include "ring/ring.h"

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
	o->disk.max_batch = 32; /* QEMU's measured default */
	o->disk.cache = XBD_CACHE_WRITEBACK;
	o->disk.persistent = true;
	o->disk.max_ring_order = XBD_RING_MAX_ORDER;
	o->disk.max_queues = default_queues();
	o->disk.max_indirect_segs = XBD_MAX_INDIRECT_SEGS;
	o->disk.poll_max_ns = 32000; /* QEMU/NVMe measurements: 16-32 us */
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

static int bad(const char *opt, const char *val, const char *allowed)
{
	fprintf(stderr, "xbd-back: invalid value '%s' for --%s: %s\n", val, opt, allowed);
	return -EINVAL;
}

/* A decimal number in [min, max], nothing else. */
static int parse_num(const char *opt, const char *val, uint64_t min, uint64_t max,
		     uint64_t *out)
{
	char *end;
	char allowed[96];
	unsigned long long v;

	snprintf(allowed, sizeof(allowed), "an integer from %" PRIu64 " to %" PRIu64, min, max);
	if (!*val || *val == '-' || *val == '+')
		return bad(opt, val, allowed);
	errno = 0;
	v = strtoull(val, &end, 10);
	if (errno || *end || v < min || v > max)
		return bad(opt, val, allowed);
	*out = v;
	return 0;
}

static int parse_types(const char *val, struct xbd_back_opts *o)
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
			return bad("types", val, "a comma-separated list of vbd, vbd3");
		p += len;
		if (*p == ',')
			p++;
	}
	if (!o->nr_types)
		return bad("types", val, "a comma-separated list of vbd, vbd3");
	return 0;
}

static void usage(void)
{
	printf("Usage: xbd-back [OPTION]...\n"
	       "Serve Xen PV block devices (blkif) from userspace.\n\n"
	       "  --types LIST            backend types to serve: vbd,vbd3 (default vbd,vbd3)\n"
	       "  --platform KIND         auto, xen or sim (default auto)\n"
	       "  --max-batch N           iocbs per io_submit, 0 = engine default, 1 = off (32)\n"
	       "  --poll-max-ns NS        adaptive polling cap per ring, 0 = off (32000)\n"
	       "  --poll-grow N           window multiplier on success, 0 = double (0)\n"
	       "  --poll-shrink N         window divisor on a long wait, 0 = reset (0)\n"
	       "  --cache MODE            writeback, writethrough or unsafe (writeback)\n"
	       "  --persistent 0|1        offer persistent grants (1)\n"
	       "  --grant-copy            copy grants instead of mapping them\n"
	       "  --max-ring-order N      0..%u (%u)\n"
	       "  --max-queues N          1..16 (online CPUs)\n"
	       "  --max-indirect-segs N   0 or 11..%u (%u)\n"
	       "  --barrier               offer feature-barrier instead of feature-flush-cache\n"
	       "  --disk PARAMS:SETTINGS  settings for the disk whose params is PARAMS, e.g.\n"
	       "                          /srv/a.img:cache=unsafe,max-batch=1,barrier=1\n"
	       "  -v, --verbose           more log lines (repeat for debug)\n"
	       "  --run COMMAND           serve, run COMMAND with /bin/sh, exit with its status\n"
	       "  --foreground            stay in the foreground (the default)\n"
	       "  -h, --help              this text\n",
	       XBD_RING_MAX_ORDER, XBD_RING_MAX_ORDER, XBD_MAX_INDIRECT_SEGS,
	       XBD_MAX_INDIRECT_SEGS);
}

enum {
	OPT_TYPES = 256, OPT_PLATFORM, OPT_MAX_BATCH, OPT_POLL_MAX, OPT_POLL_GROW,
	OPT_POLL_SHRINK, OPT_CACHE, OPT_PERSISTENT, OPT_GRANT_COPY, OPT_RING_ORDER,
	OPT_QUEUES, OPT_INDIRECT, OPT_BARRIER, OPT_RUN, OPT_FOREGROUND, OPT_DISK,
};

/* One per-disk (or daemon-wide) setting by name; -EINVAL after one line. */
static int set_disk_opt(struct xbd_disk_opts *d, const char *name, const char *val)
{
	uint64_t v;

	if (!strcmp(name, "max-batch")) {
		if (parse_num(name, val, 0, 4096, &v))
			return -EINVAL;
		d->max_batch = v;
	} else if (!strcmp(name, "poll-max-ns")) {
		if (parse_num(name, val, 0, 1000000000, &v))
			return -EINVAL;
		d->poll_max_ns = v;
	} else if (!strcmp(name, "poll-grow")) {
		if (parse_num(name, val, 0, 64, &v))
			return -EINVAL;
		d->poll_grow = v;
	} else if (!strcmp(name, "poll-shrink")) {
		if (parse_num(name, val, 0, 64, &v))
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
			return bad(name, val, "writeback, writethrough or unsafe");
	} else if (!strcmp(name, "persistent") || !strcmp(name, "grant-copy") ||
		   !strcmp(name, "barrier")) {
		bool b;

		if (strcmp(val, "0") && strcmp(val, "1"))
			return bad(name, val, "0 or 1");
		b = val[0] == '1';
		if (name[0] == 'p')
			d->persistent = b;
		else if (name[0] == 'g')
			d->grant_copy = b;
		else
			d->barrier = b;
	} else if (!strcmp(name, "max-ring-order")) {
		if (parse_num(name, val, 0, XBD_RING_MAX_ORDER, &v))
			return -EINVAL;
		d->max_ring_order = v;
	} else if (!strcmp(name, "max-queues")) {
		if (parse_num(name, val, 1, 16, &v))
			return -EINVAL;
		d->max_queues = v;
	} else if (!strcmp(name, "max-indirect-segs")) {
		if (parse_num(name, val, 0, XBD_MAX_INDIRECT_SEGS, &v))
			return -EINVAL;
		if (v && v <= BLKIF_MAX_SEGMENTS_PER_REQUEST)
			return bad(name, val, "0 (off) or an integer from 12 to 256");
		d->max_indirect_segs = v;
	} else {
		fprintf(stderr, "xbd-back: unknown disk setting '%s' (allowed: max-batch, cache, "
			"persistent, grant-copy, barrier, max-ring-order, max-queues, "
			"max-indirect-segs, poll-max-ns, poll-grow, poll-shrink)\n", name);
		return -EINVAL;
	}
	return 0;
}

int xbd_disk_opts_apply(struct xbd_disk_opts *o, const char *spec)
{
	char *copy = strdup(spec), *save = NULL, *item;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (item = strtok_r(copy, ",", &save); item && !err; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (!eq) {
			fprintf(stderr, "xbd-back: disk setting '%s' is not key=value\n", item);
			err = -EINVAL;
			break;
		}
		*eq = '\0';
		err = set_disk_opt(o, item, eq + 1);
	}
	free(copy);
	return err;
}

void xbd_disk_opts_for(const struct xbd_back_opts *opts, const char *params,
		       struct xbd_disk_opts *out)
{
	unsigned int i;

	*out = opts->disk;
	for (i = 0; i < opts->nr_rules; i++)
		if (!strcmp(opts->rules[i].target, params))
			xbd_disk_opts_apply(out, opts->rules[i].spec); /* checked at start-up */
}

void xbd_back_free_options(struct xbd_back_opts *opts)
{
	unsigned int i;

	for (i = 0; i < opts->nr_rules; i++)
		free(opts->rules[i].target);
	opts->nr_rules = 0;
}

/* --disk TARGET:SPEC, split at the last colon (params may hold one: null:1G). */
static int add_rule(struct xbd_back_opts *o, const char *arg)
{
	const char *colon = strrchr(arg, ':');
	struct xbd_disk_opts scratch = o->disk;
	char *t;

	if (!colon || colon == arg || !colon[1])
		return bad("disk", arg, "PARAMS:key=value[,key=value...]");
	if (o->nr_rules >= XBD_BACK_MAX_DISK_RULES)
		return bad("disk", arg, "at most 32 --disk options");
	if (xbd_disk_opts_apply(&scratch, colon + 1))
		return -EINVAL;
	t = strdup(arg);
	if (!t)
		return -ENOMEM;
	t[colon - arg] = '\0';
	o->rules[o->nr_rules].target = t;
	o->rules[o->nr_rules].spec = t + (colon - arg) + 1;
	o->nr_rules++;
	return 0;
}

int xbd_back_parse_options(int argc, char **argv, struct xbd_back_opts *o)
{
	static const struct option longopts[] = {
		{ "types", required_argument, NULL, OPT_TYPES },
		{ "platform", required_argument, NULL, OPT_PLATFORM },
		{ "max-batch", required_argument, NULL, OPT_MAX_BATCH },
		{ "poll-max-ns", required_argument, NULL, OPT_POLL_MAX },
		{ "poll-grow", required_argument, NULL, OPT_POLL_GROW },
		{ "poll-shrink", required_argument, NULL, OPT_POLL_SHRINK },
		{ "cache", required_argument, NULL, OPT_CACHE },
		{ "persistent", required_argument, NULL, OPT_PERSISTENT },
		{ "grant-copy", no_argument, NULL, OPT_GRANT_COPY },
		{ "max-ring-order", required_argument, NULL, OPT_RING_ORDER },
		{ "max-queues", required_argument, NULL, OPT_QUEUES },
		{ "max-indirect-segs", required_argument, NULL, OPT_INDIRECT },
		{ "barrier", no_argument, NULL, OPT_BARRIER },
		{ "verbose", no_argument, NULL, 'v' },
		{ "run", required_argument, NULL, OPT_RUN },
		{ "foreground", no_argument, NULL, OPT_FOREGROUND },
		{ "disk", required_argument, NULL, OPT_DISK },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, idx = 0;

	defaults(o);
	o->types[0] = "vbd";
	o->types[1] = "vbd3";
	o->nr_types = 2;
	optind = 1;
	while ((c = getopt_long(argc, argv, "vh", longopts, &idx)) != -1) {
		switch (c) {
		case OPT_TYPES:
			if (parse_types(optarg, o))
				return -EINVAL;
			break;
		case OPT_PLATFORM:
			if (xbd_platform_kind_from_string(optarg, &o->platform))
				return bad("platform", optarg, "auto, xen or sim");
			break;
		case OPT_MAX_BATCH:
		case OPT_POLL_MAX:
		case OPT_POLL_GROW:
		case OPT_POLL_SHRINK:
		case OPT_CACHE:
		case OPT_PERSISTENT:
		case OPT_RING_ORDER:
		case OPT_QUEUES:
		case OPT_INDIRECT:
			if (set_disk_opt(&o->disk, longopts[idx].name, optarg))
				return -EINVAL;
			break;
		case OPT_GRANT_COPY:
			o->disk.grant_copy = true;
			break;
		case OPT_BARRIER:
			o->disk.barrier = true;
			break;
		case OPT_DISK:
			if (add_rule(o, optarg))
				return -EINVAL;
			break;
		case 'v':
			o->verbose++;
			break;
		case OPT_RUN:
			o->run = optarg;
			break;
		case OPT_FOREGROUND:
			o->foreground = true;
			break;
		case 'h':
			usage();
			return 1;
		default:
			fprintf(stderr, "xbd-back: try --help\n");
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "xbd-back: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}
