/*
 * options.h: every xbd-back setting in one struct, so that the command
 * line now and a configuration file later fill the same thing, and the
 * per-disk subset that each device copies from the daemon's defaults.
 */
#ifndef XBD_BACK_OPTIONS_H
#define XBD_BACK_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "platform/platform.h"

enum xbd_cache_mode {
	XBD_CACHE_WRITEBACK = 0, /* honour flushes (default) */
	XBD_CACHE_WRITETHROUGH,  /* every write durable on completion (RWF_DSYNC) */
	XBD_CACHE_UNSAFE,        /* flushes succeed at once, FUA dropped */
};

/* What one disk does; initialised from the daemon defaults. */
struct xbd_disk_opts {
	unsigned int max_batch;     /* iocbs per io_submit; 0 = engine default, 1 = no batching */
	enum xbd_cache_mode cache;
	bool persistent;            /* offer feature-persistent */
	bool grant_copy;            /* copy grants instead of mapping them */
	bool barrier;               /* offer feature-barrier instead of flush-cache */
	unsigned int max_ring_order;
	unsigned int max_queues;
	unsigned int max_indirect_segs;
	uint64_t poll_max_ns;       /* 0 = no polling */
	unsigned int poll_grow;     /* multiplier on success; 0 = double */
	unsigned int poll_shrink;   /* divisor on a long wait; 0 = drop to 0 */
};

#define XBD_BACK_MAX_TYPES 4
#define XBD_BACK_MAX_DISK_RULES 32

/* Settings for the disk whose params equals target ("--disk TARGET:SPEC"). */
struct xbd_disk_rule {
	char *target;
	char *spec;
};

struct xbd_back_opts {
	const char *types[XBD_BACK_MAX_TYPES]; /* backend types served: vbd, vbd3 */
	unsigned int nr_types;
	enum xbd_platform_kind platform;
	int verbose;                /* 0: events, 1: more, 2: debug */
	const char *run;            /* --run COMMAND */
	bool foreground;
	struct xbd_disk_opts disk;  /* defaults for every disk */
	struct xbd_disk_rule rules[XBD_BACK_MAX_DISK_RULES];
	unsigned int nr_rules;
};

/*
 * Fill opts from argv.  Returns 0, 1 when the program should exit 0 at once
 * (--help), or -EINVAL after printing one line naming the bad option.
 */
int xbd_back_parse_options(int argc, char **argv, struct xbd_back_opts *opts);

const char *xbd_cache_mode_name(enum xbd_cache_mode m);

/*
 * Apply a per-disk spec "key=value,key=value" (keys: max-batch, cache,
 * persistent, grant-copy, barrier, max-ring-order, max-queues,
 * max-indirect-segs, poll-max-ns) to o.  -EINVAL after one line naming
 * the bad key or value.
 */
int xbd_disk_opts_apply(struct xbd_disk_opts *o, const char *spec);

/* The settings for a disk with this params: the defaults, then its rule. */
void xbd_disk_opts_for(const struct xbd_back_opts *opts, const char *params,
		       struct xbd_disk_opts *out);

/* Free what parsing allocated. */
void xbd_back_free_options(struct xbd_back_opts *opts);

#endif /* XBD_BACK_OPTIONS_H */
