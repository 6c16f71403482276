/*
 * options.h: every xbd-back setting in one struct, filled from the
 * configuration file (config.c, xbd-back.conf(5)) and then the command
 * line, which overrides it; and the per-disk subset that each device
 * copies from the daemon's defaults and the matching [disk] sections.
 */
#ifndef XBD_BACK_OPTIONS_H
#define XBD_BACK_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/control-protocol.h"
#include "blkback/settings/iolimits.h"
#include "platform/platform.h"

enum xbd_cache_mode {
	XBD_CACHE_WRITEBACK = 0, /* honour flushes (default) */
	XBD_CACHE_WRITETHROUGH,  /* every write durable on completion (RWF_DSYNC) */
	XBD_CACHE_UNSAFE,        /* flushes succeed at once, FUA dropped */
};

/* How the data pages of requests reach the backend. */
enum xbd_grant_mode {
	XBD_GRANTS_AUTO = 0, /* map persistent grants, copy the others (default) */
	XBD_GRANTS_MAP,      /* map every grant */
	XBD_GRANTS_COPY,     /* copy every grant, offer no persistent grants */
};

/* How a write that must be durable on completion (barrier, writethrough) is made so. */
enum xbd_fua_mode {
	XBD_FUA_DSYNC = 0,   /* the write itself with RWF_DSYNC (default) */
	XBD_FUA_FDATASYNC,   /* the write, then an fdatasync */
};

/* The engine of a disk whose params is a plain path (a file or block device). */
enum xbd_file_engine {
	XBD_FILE_ENGINE_AIO = 0, /* libaio (default) */
	XBD_FILE_ENGINE_URING,   /* io_uring (engine-uring.c), aio where the host has none */
};

/* A throttle group's name: 1 to 31 of [A-Za-z0-9_.-]. */
#define XBD_THROTTLE_GROUP_MAX 32

/* What one disk does; initialised from the daemon defaults. */
struct xbd_disk_opts {
	enum xbd_file_engine engine;
	unsigned int max_batch;     /* iocbs per io_submit; 0 = engine default, 1 = no batching */
	enum xbd_cache_mode cache;
	bool direct;                /* O_DIRECT; false: through dom0's page cache */
	bool format_check;          /* refuse a file that starts with a disk image's header */
	bool shared_write;          /* read-write beside other guests' (a cluster filesystem) */
	bool persistent;            /* offer feature-persistent */
	enum xbd_grant_mode grants;
	enum xbd_fua_mode fua_mode;
	bool barrier;               /* offer feature-barrier instead of flush-cache */
	unsigned int max_ring_order;
	unsigned int max_queues;
	unsigned int max_indirect_segs;
	uint64_t poll_max_ns;       /* 0 = no polling */
	unsigned int poll_grow;     /* multiplier on success; 0 = double */
	unsigned int poll_shrink;   /* divisor on a long wait; 0 = drop to 0 */
	/* Engine settings (engine-nbd.c). */
	unsigned int nbd_connect_timeout_ms; /* a connect to the server takes at most this */
	unsigned int nbd_retry_ms;  /* after a failed connect, requests fail this long */
	unsigned int nbd_request_timeout_ms; /* a command unanswered this long fails (0: never) */
	/*
	 * I/O limits (iolimits.h), indexed by enum xbd_iolimit_kind (iops then
	 * bps; total, read, write): per second, 0 = none; a burst's rate
	 * (0 = none) and its length in seconds.
	 */
	uint64_t limit[XBD_IOLIMIT_KINDS];
	uint64_t limit_max[XBD_IOLIMIT_KINDS];
	unsigned int limit_max_length[XBD_IOLIMIT_KINDS];
	uint64_t iops_size;         /* bytes one operation stands for (0: a request is one) */
	char throttle_group[XBD_THROTTLE_GROUP_MAX]; /* "": limits of its own */
	/* Shares between guests (cgroup.h): the worker's cgroup v2 weights; 0 = the default. */
	unsigned int io_weight;
	unsigned int cpu_weight;
	/* Changed-block tracking (datapath/cbt-format.h, control/tracking.c). */
	bool cbt;                   /* track the blocks written, for checkpoints and backups */
	uint64_t cbt_granularity;   /* bytes per block, a power of two */
	unsigned int cbt_max_checkpoints;
	uint64_t cbt_max_memory;    /* bytes of bitmaps a disk may hold */
	uint64_t cbt_scratch;       /* bytes a point-in-time view may copy aside */
};

#define XBD_BACK_MAX_TYPES 4
#define XBD_BACK_MAX_DISK_RULES 64

/*
 * Settings for the disks whose params matches target, a fnmatch(3)
 * pattern ("--disk TARGET:SPEC" or a "[disk TARGET]" section): the values
 * parsed once when the rule was made, and which of them it set (one bit
 * per entry of the settings table).
 */
struct xbd_disk_rule {
	char *target;
	struct xbd_disk_opts vals;
	uint64_t mask;
};

/* pin-rings: auto pins on real Xen only (the simulator has no interrupts to move). */
enum xbd_pin_rings { XBD_PIN_RINGS_AUTO = 0, XBD_PIN_RINGS_OFF, XBD_PIN_RINGS_ON };

/* cgroups: auto uses them where the service's own cgroup v2 is delegated to it. */
enum xbd_cgroups { XBD_CGROUPS_AUTO = 0, XBD_CGROUPS_OFF, XBD_CGROUPS_ON };

/* Where log lines go: stderr (with journal priorities under systemd) or syslog. */
enum xbd_log_target { XBD_LOG_TO_AUTO = 0, XBD_LOG_TO_STDERR, XBD_LOG_TO_SYSLOG };

/* The default configuration file, $(sysconfdir)/xbd/xbd-back.conf. */
#ifndef XBD_DEFAULT_CONFIG
#define XBD_DEFAULT_CONFIG "/etc/xbd/xbd-back.conf"
#endif
/* The run-time directory and the default control socket: control-protocol.h. */
/* One daemon per host: the lock it holds while it runs (xbd-back.c). */
#define XBD_DEFAULT_LOCK XBD_DEFAULT_RUN_DIR "/xbd-back.lock"
/* The disks' changed-block tracking (persistent; the simulator's are in its directory). */
#define XBD_DEFAULT_CBT_DIR "/var/lib/xbd/cbt"
/* The rings' crash journals (tmpfs; the simulator's are in its directory). */
#define XBD_DEFAULT_JOURNAL_DIR XBD_DEFAULT_RUN_DIR "/journal"
/*
 * Workers run as uid = gid = this + their domain's id: 0x70000000, the
 * first of the range systemd leaves unused (UIDS-GIDS.md: above its
 * container ranges, below 2^31), far from any account useradd, systemd or
 * /etc/subuid hands out.
 */
#define XBD_DEFAULT_WORKER_UID_BASE 1879048192u

/* Room for one error line about an option (without the "xbd-back: " prefix). */
#define XBD_OPT_ERR_MAX 320

struct xbd_back_opts {
	const char *types[XBD_BACK_MAX_TYPES]; /* backend types served: vbd, vbd3 */
	unsigned int nr_types;
	enum xbd_platform_kind platform;
	int verbose;                /* 0: events, 1: more, 2: debug */
	enum xbd_log_target log_target;
	const char *run;            /* --run COMMAND */
	bool foreground;
	bool check_config;          /* --check-config: print the settings and exit */
	char *config;               /* the configuration file read, or NULL */
	char *control;              /* control socket; NULL = default, "" = none */
	bool journal;               /* keep the rings' crash journals (journal.h) */
	bool workers;               /* serve each domain's disks in a worker of its own (worker.h) */
	unsigned int worker_uid_base; /* a worker's uid and gid: this + its domain's id */
	unsigned int worker_restarts; /* deaths within a minute after which a worker stays dead */
	enum xbd_pin_rings pin_rings; /* each ring and its interrupt on a CPU (ringcpu.h) */
	enum xbd_cgroups cgroups;   /* each worker in a cgroup of its own (cgroup.h) */
	char *cbt_dir;              /* the disks' tracking files; NULL: the default */
	struct xbd_disk_opts disk;  /* defaults for every disk */
	struct xbd_disk_rule rules[XBD_BACK_MAX_DISK_RULES];
	unsigned int nr_rules;
};

/*
 * The settings table (options.c) is the one place a setting is named: its
 * scope, type, range or words, default shown in --help, help text and
 * whether xbdctl set may change it.  The command-line options, --help,
 * the configuration file, [disk] rules, --check-config, the settings in
 * xbdctl's JSON and the keys of xbdctl set are all made from it.
 */
enum xbd_setting_scope {
	XBD_SETTING_DAEMON, /* xbd_back_opts: top of the file and the command line only */
	XBD_SETTING_DISK,   /* xbd_disk_opts: also [disk] sections and --disk */
};

/*
 * Fill opts: defaults, then the configuration file (--config FILE, else
 * XBD_BACK_CONFIG from the environment, else XBD_DEFAULT_CONFIG if it
 * exists), then argv.  Returns 0, 1 when the program should exit 0 at
 * once (--help), or -EINVAL after printing one line naming the bad
 * option or key, its value and what is allowed.
 */
int xbd_back_parse_options(int argc, char **argv, struct xbd_back_opts *opts);

/* Print the effective settings in configuration-file syntax (--check-config). */
void xbd_back_print_options(FILE *f, const struct xbd_back_opts *opts);

/*
 * Reading a configuration file (config.c) for a reader that says what
 * its lines mean (options.c).  where is "FILE:LINE" for messages; each
 * callback returns 0, or a negative errno after printing one line
 * "xbd-back: FILE:LINE: ..." naming the key, the value and what is
 * allowed, which stops the reading.
 */
struct xbd_config_reader {
	/* key = value, in the section the last call of section began (none yet: the top). */
	int (*key)(void *ctx, const char *where, const char *key, const char *value);
	/*
	 * A [disk PATTERN] section begins, or (pattern NULL) the file ends:
	 * the section before it is complete.
	 */
	int (*section)(void *ctx, const char *where, const char *pattern);
};
/* Returns 0, -ENOENT if path does not exist, or -EINVAL after one line saying why. */
int xbd_config_read(const char *path, const struct xbd_config_reader *r, void *ctx);

/*
 * Set one disk setting by its configuration-file name, and its bit in
 * *mask (mask may be NULL).  dash is "--" for the command line and ""
 * otherwise, so the message names the option as the user spelt it.
 * Returns 0; -EINVAL with one line in err (no prefix); -EPERM (nothing in
 * err) for a daemon setting; -ENOENT (nothing in err) for a name that is
 * no setting.
 */
int xbd_disk_opt_set(struct xbd_disk_opts *d, uint64_t *mask, const char *dash,
		     const char *name, const char *val, char *err, size_t errlen);
/* The same for any setting: a daemon one in o, a disk one in o->disk. */
int xbd_back_opt_set(struct xbd_back_opts *o, const char *dash, const char *name,
		     const char *val, char *err, size_t errlen);
/*
 * The names of the settings of a scope (run-time changeable ones only if
 * runtime), comma-separated, for messages.  Static storage.
 */
const char *xbd_setting_names(enum xbd_setting_scope scope, bool runtime);
/* Whether name is a setting xbdctl set may change. */
bool xbd_setting_is_runtime(const char *name);
/* Whether mask (a rule's, or xbdctl set's) holds the setting called name. */
bool xbd_setting_in_mask(const char *name, uint64_t mask);
/* Whether name is a setting at all (of any scope, an alias too). */
bool xbd_setting_exists(const char *name);
/*
 * The setting a misspelt name most likely meant (for "did you mean ...?"):
 * the nearest within two edits (a letter added, dropped, changed, or two
 * neighbours swapped) and within a third of the name's length, among the
 * disk settings only if disk_only and the run-time ones only if runtime;
 * the first in the table on a tie.  NULL if none is that near.
 */
const char *xbd_setting_nearest(const char *name, bool disk_only, bool runtime);

/*
 * Copy the settings in mask from src to dst with relaxed atomic stores
 * (dst belongs to a running device whose ring threads load them).
 */
void xbd_disk_opts_store(struct xbd_disk_opts *dst, const struct xbd_disk_opts *src,
			 uint64_t mask);
/* "key=value key=value" of the run-time settings, as xbdctl set reports them. */
void xbd_disk_opts_print_runtime(FILE *f, const struct xbd_disk_opts *d);
/* The disk settings as a JSON object, keys with '_' for '-' (xbdctl(8)). */
void xbd_disk_opts_json(FILE *f, const struct xbd_disk_opts *d);

/* Add a [disk TARGET] rule; -E2BIG when there are too many. */
int xbd_back_add_rule(struct xbd_back_opts *o, const char *target,
		      const struct xbd_disk_opts *vals, uint64_t mask);
/* Free o's rules and move src's into it (SIGHUP). */
void xbd_back_take_rules(struct xbd_back_opts *o, struct xbd_back_opts *src);

const char *xbd_cache_mode_name(enum xbd_cache_mode m);
const char *xbd_grant_mode_name(enum xbd_grant_mode m);
const char *xbd_fua_mode_name(enum xbd_fua_mode m);
const char *xbd_file_engine_name(enum xbd_file_engine e);

/* The settings for a disk with this params: the defaults, then every matching rule. */
void xbd_disk_opts_for(const struct xbd_back_opts *opts, const char *params,
		       struct xbd_disk_opts *out);

/* Free what parsing allocated. */
void xbd_back_free_options(struct xbd_back_opts *opts);

#endif /* XBD_BACK_OPTIONS_H */
