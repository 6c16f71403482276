/*
 * options.c: xbd-back's settings.  One table names every setting once,
 * with its scope (daemon or disk), type, range or allowed words, help and
 * whether xbdctl set may change it at run time; the command line, --help
 * and --check-config (command-line.c), the configuration file (config.c
 * reads it, each line is taken here), [disk] rules and xbdctl set
 * (control.c) are all driven by it.  Defaults, then the
 * configuration file, then the command line, which overrides it.  Every
 * value is checked here, and a bad one produces exactly one line naming
 * the option or key, the value and what is allowed.
 */
#include "config.h"

#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blkback/settings/options.h"
#include "blkback/settings/table.h"
#include "common/size.h"
#include "ring/ring.h"
#include <xen/xen.h>

static const char *const w_cache[] = { "writeback", "writethrough", "unsafe", NULL };
static const char *const w_grants[] = { "auto", "map", "copy", NULL };
static const char *const w_fua[] = { "dsync", "fdatasync", NULL };
static const char *const w_platform[] = { "auto", "xen", "sim", NULL };
static const char *const w_pin[] = { "auto", "0", "1", NULL };
static const char *const w_log[] = { "auto", "stderr", "syslog", NULL };
static const char *const w_level[] = { "info", "verbose", "debug", NULL };
static const char *const known_types[] = { "vbd", "vbd3" };

static int parse_types(void *field, const char *val, char *allowed, size_t len);
static bool format_types(const void *field, char *buf, size_t len);
static int parse_level(void *field, const char *val, char *allowed, size_t len);
static bool format_level(const void *field, char *buf, size_t len);
static int parse_control(void *field, const char *val, char *allowed, size_t len);
static bool format_control(const void *field, char *buf, size_t len);
static int parse_indirect(void *field, const char *val, char *allowed, size_t len);
static int parse_grant_copy(void *field, const char *val, char *allowed, size_t len);
static int parse_engine(void *field, const char *val, char *allowed, size_t len);
static int parse_group(void *field, const char *val, char *allowed, size_t len);
static bool format_group(const void *field, char *buf, size_t len);
static bool format_engine(const void *field, char *buf, size_t len);
static int parse_cbt_dir(void *field, const char *val, char *allowed, size_t len);
static bool format_cbt_dir(const void *field, char *buf, size_t len);
static int parse_granularity(void *field, const char *val, char *allowed, size_t len);

#define DAEMON(f) .scope = XBD_SETTING_DAEMON, .off = offsetof(struct xbd_back_opts, f), \
	.size = sizeof(((struct xbd_back_opts *)0)->f)
#define DISK(f) .scope = XBD_SETTING_DISK, .off = offsetof(struct xbd_disk_opts, f), \
	.size = sizeof(((struct xbd_disk_opts *)0)->f)

/*
 * Every setting.  The order is the order of --help, --check-config and
 * xbdctl's output; xbdctl set reports the run-time ones in this order.
 */
const struct setting xbd_settings[] = {
	{ .name = "types", DAEMON(types), .type = T_CUSTOM, .arg = "LIST",
	  .help = "backend types to serve, comma-separated: vbd, vbd3",
	  .parse = parse_types, .format = format_types },
	{ .name = "platform", DAEMON(platform), .type = T_WORD, .words = w_platform, .arg = "KIND",
	  .help = "real Xen or the simulator (auto: sim when XBD_SIM_DIR is set)" },
	{ .name = "log-level", DAEMON(verbose), .type = T_CUSTOM, .arg = "LEVEL",
	  .help = "info, verbose or debug", .parse = parse_level, .format = format_level },
	{ .name = "log", DAEMON(log_target), .type = T_WORD, .words = w_log, .arg = "WHERE",
	  .help = "where log lines go (auto: stderr, journal-aware)" },
	{ .name = "control", DAEMON(control), .type = T_CUSTOM, .arg = "PATH|none",
	  .help = "control socket for xbdctl", .dflt = XBD_DEFAULT_CONTROL,
	  .parse = parse_control, .format = format_control },
	{ .name = "journal", DAEMON(journal), .type = T_BOOL, .arg = "0|1",
	  .help = "keep every ring's crash journal, so that a restart after a crash takes the "
		  "rings over (0: such a restart closes the devices; for measurements)" },
	{ .name = "workers", DAEMON(workers), .type = T_BOOL, .arg = "0|1",
	  .help = "serve each domain's disks in a confined worker process of its own (0: every "
		  "disk in this process)" },
	{ .name = "worker-uid-base", DAEMON(worker_uid_base), .type = T_UINT, .min = 1,
	  .max = UINT32_MAX - 1 - DOMID_FIRST_RESERVED, .arg = "UID",
	  .help = "a worker runs as uid and gid UID + its domain's id" },
	{ .name = "worker-restarts", DAEMON(worker_restarts), .type = T_UINT, .min = 1, .max = 64,
	  .arg = "N", .help = "a worker that dies N times within a minute is not started again: "
			      "its domain's disks are closed" },
	{ .name = "pin-rings", DAEMON(pin_rings), .type = T_WORD, .words = w_pin, .arg = "auto|0|1",
	  .help = "run each ring's thread and its event channel's interrupt on one CPU, the rings "
		  "spread over the CPUs (auto: on real Xen; 1 on the simulator pins the threads)" },
	{ .name = "cgroups", DAEMON(cgroups), .type = T_WORD, .words = w_pin, .arg = "auto|0|1",
	  .help = "each guest's worker in a cgroup v2 of its own below the service's, with the "
		  "io-weight and cpu-weight of its disks (auto: where the service's cgroup is "
		  "delegated to it, systemd's Delegate=, and offers io or cpu; 1: a start that "
		  "cannot fails)" },
	{ .name = "engine", DISK(engine), .type = T_CUSTOM, .arg = "ENGINE",
	  .help = "files and block devices: aio (libaio) or uring (io_uring; aio where the host "
		  "has no io_uring)", .parse = parse_engine, .format = format_engine },
	{ .name = "cache", DISK(cache), .type = T_WORD, .words = w_cache, .arg = "MODE",
	  .help = "honour flushes, make every write durable, or drop flushes" },
	{ .name = "direct", DISK(direct), .type = T_BOOL, .arg = "0|1",
	  .help = "files and block devices: O_DIRECT (0: through dom0's page cache, as kernel "
		  "blkback's loop device without direct I/O)" },
	{ .name = "format-check", DISK(format_check), .type = T_BOOL, .arg = "0|1",
	  .help = "files and block devices: refuse one that starts with the header of a disk "
		  "image format (qcow2, VHD, VHDX, VMDK, QED, VDI), whose metadata the guest "
		  "would see and could overwrite (0: serve it raw all the same)" },
	{ .name = "shared-write", DISK(shared_write), .type = T_BOOL, .arg = "0|1",
	  .help = "serve the disk read-write even where other guests have the same image "
		  "(for a cluster filesystem in the guests), as the toolstack's mode w! asks; 0: "
		  "an image one guest has read-write is refused to every other, and one others "
		  "have is refused read-write" },
	{ .name = "fua-mode", DISK(fua_mode), .type = T_WORD, .words = w_fua, .arg = "MODE",
	  .help = "durable writes with RWF_DSYNC, or as write + fdatasync" },
	{ .name = "max-batch", DISK(max_batch), .type = T_UINT, .min = 0, .max = 4096, .arg = "N",
	  .help = "iocbs per io_submit, 0 = engine default, 1 = no batching", .runtime = true },
	{ .name = "poll-max-ns", DISK(poll_max_ns), .type = T_UINT, .min = 0, .max = 1000000000, .arg = "NS",
	  .help = "adaptive polling cap per ring, 0 = off", .runtime = true },
	{ .name = "poll-grow", DISK(poll_grow), .type = T_UINT, .min = 0, .max = 64, .arg = "N",
	  .help = "polling window multiplier on success, 0 = double", .runtime = true },
	{ .name = "poll-shrink", DISK(poll_shrink), .type = T_UINT, .min = 0, .max = 64, .arg = "N",
	  .help = "polling window divisor on a long wait, 0 = reset", .runtime = true },
	{ .name = "persistent", DISK(persistent), .type = T_BOOL, .arg = "0|1",
	  .help = "offer persistent grants" },
	{ .name = "grants", DISK(grants), .type = T_WORD, .words = w_grants, .arg = "MODE",
	  .help = "map guest pages or copy them; auto maps persistent grants and copies "
		  "the others" },
	{ .name = "grant-copy", DISK(grants), .type = T_CUSTOM, .arg = "0|1", .flag = "1", .alias = "grants",
	  .help = "the same as --grants copy (grant-copy = 0: grants = auto)",
	  .parse = parse_grant_copy },
	{ .name = "barrier", DISK(barrier), .type = T_BOOL, .arg = "0|1", .flag = "1",
	  .help = "offer feature-barrier instead of feature-flush-cache" },
	{ .name = "max-ring-order", DISK(max_ring_order), .type = T_UINT, .min = 0, .max = XBD_RING_MAX_ORDER,
	  .arg = "N", .help = "largest shared ring, as a power of two pages" },
	{ .name = "max-queues", DISK(max_queues), .type = T_UINT, .min = 1, .max = 16, .arg = "N",
	  .help = "most rings (queues) per disk", .dflt = "online CPUs" },
	{ .name = "max-indirect-segs", DISK(max_indirect_segs), .type = T_CUSTOM, .arg = "N",
	  .help = "segments per indirect request: 0 (off) or 12 and more",
	  .parse = parse_indirect },
	{ .name = "iops-total", DISK(limit[0]), .type = T_UINT, .min = 0, .max = 1000000000, .arg = "N",
	  .help = "limit: operations per second, reads and writes together; requests beyond it wait (0: no limit)", .runtime = true, .limit = true },
	{ .name = "iops-read", DISK(limit[1]), .type = T_UINT, .min = 0, .max = 1000000000, .arg = "N",
	  .help = "limit: read operations per second; requests beyond it wait (0: no limit)", .runtime = true, .limit = true },
	{ .name = "iops-write", DISK(limit[2]), .type = T_UINT, .min = 0, .max = 1000000000, .arg = "N",
	  .help = "limit: write operations per second (flushes and discards count as one each); requests beyond it wait (0: no limit)", .runtime = true, .limit = true },
	{ .name = "bps-total", DISK(limit[3]), .type = T_UINT, .min = 0, .max = 1000000000000, .arg = "BYTES", .bytes = true,
	  .help = "limit: bytes per second, read and written together; requests beyond it wait (0: no limit)", .runtime = true, .limit = true },
	{ .name = "bps-read", DISK(limit[4]), .type = T_UINT, .min = 0, .max = 1000000000000, .arg = "BYTES", .bytes = true,
	  .help = "limit: bytes read per second; requests beyond it wait (0: no limit)", .runtime = true, .limit = true },
	{ .name = "bps-write", DISK(limit[5]), .type = T_UINT, .min = 0, .max = 1000000000000, .arg = "BYTES", .bytes = true,
	  .help = "limit: bytes written per second; requests beyond it wait (0: no limit)", .runtime = true, .limit = true },
	{ .name = "iops-total-max", DISK(limit_max[0]), .type = T_UINT, .min = 0, .max = 1000000000, .arg = "N",
	  .help = "a burst above iops-total: this rate, for iops-total-max-length seconds once the disk was "
		  "idle long enough to save it up (0: no burst)", .runtime = true, .limit = true },
	{ .name = "iops-read-max", DISK(limit_max[1]), .type = T_UINT, .min = 0, .max = 1000000000, .arg = "N",
	  .help = "a burst above iops-read: this rate, for iops-read-max-length seconds once the disk was "
		  "idle long enough to save it up (0: no burst)", .runtime = true, .limit = true },
	{ .name = "iops-write-max", DISK(limit_max[2]), .type = T_UINT, .min = 0, .max = 1000000000, .arg = "N",
	  .help = "a burst above iops-write: this rate, for iops-write-max-length seconds once the disk was "
		  "idle long enough to save it up (0: no burst)", .runtime = true, .limit = true },
	{ .name = "bps-total-max", DISK(limit_max[3]), .type = T_UINT, .min = 0, .max = 1000000000000, .arg = "BYTES", .bytes = true,
	  .help = "a burst above bps-total: this rate, for bps-total-max-length seconds once the disk was "
		  "idle long enough to save it up (0: no burst)", .runtime = true, .limit = true },
	{ .name = "bps-read-max", DISK(limit_max[4]), .type = T_UINT, .min = 0, .max = 1000000000000, .arg = "BYTES", .bytes = true,
	  .help = "a burst above bps-read: this rate, for bps-read-max-length seconds once the disk was "
		  "idle long enough to save it up (0: no burst)", .runtime = true, .limit = true },
	{ .name = "bps-write-max", DISK(limit_max[5]), .type = T_UINT, .min = 0, .max = 1000000000000, .arg = "BYTES", .bytes = true,
	  .help = "a burst above bps-write: this rate, for bps-write-max-length seconds once the disk was "
		  "idle long enough to save it up (0: no burst)", .runtime = true, .limit = true },
	{ .name = "iops-total-max-length", DISK(limit_max_length[0]), .type = T_UINT, .min = 1,
	  .max = 86400, .arg = "S", .help = "how long a burst of iops-total-max lasts", .runtime = true,
	  .limit = true },
	{ .name = "iops-read-max-length", DISK(limit_max_length[1]), .type = T_UINT, .min = 1,
	  .max = 86400, .arg = "S", .help = "how long a burst of iops-read-max lasts", .runtime = true,
	  .limit = true },
	{ .name = "iops-write-max-length", DISK(limit_max_length[2]), .type = T_UINT, .min = 1,
	  .max = 86400, .arg = "S", .help = "how long a burst of iops-write-max lasts", .runtime = true,
	  .limit = true },
	{ .name = "bps-total-max-length", DISK(limit_max_length[3]), .type = T_UINT, .min = 1,
	  .max = 86400, .arg = "S", .help = "how long a burst of bps-total-max lasts", .runtime = true,
	  .limit = true },
	{ .name = "bps-read-max-length", DISK(limit_max_length[4]), .type = T_UINT, .min = 1,
	  .max = 86400, .arg = "S", .help = "how long a burst of bps-read-max lasts", .runtime = true,
	  .limit = true },
	{ .name = "bps-write-max-length", DISK(limit_max_length[5]), .type = T_UINT, .min = 1,
	  .max = 86400, .arg = "S", .help = "how long a burst of bps-write-max lasts", .runtime = true,
	  .limit = true },
	{ .name = "iops-size", DISK(iops_size), .type = T_UINT, .min = 0, .max = 1073741824,
	  .arg = "BYTES", .bytes = true,
	  .help = "the iops limits count a request larger than this as one operation "
	  "per BYTES (0: every request is one)", .runtime = true, .limit = true },
	{ .name = "throttle-group", DISK(throttle_group), .type = T_CUSTOM, .arg = "NAME",
	  .help = "disks of one domain with the same group share one set of limits (those of "
		  "the disk that connected, or was set by xbdctl set, last)", .parse = parse_group,
	  .format = format_group },
	{ .name = "io-weight", DISK(io_weight), .type = T_UINT, .min = 0, .max = 10000, .arg = "N",
	  .help = "the guest's share of the disks' time against other guests: its worker's "
		  "cgroup io.weight, 1 to 10000 (0: the cgroup default, 100); a guest's disks "
		  "that disagree get the largest; needs io.cost or BFQ on the host's disk",
	  .runtime = true },
	{ .name = "cpu-weight", DISK(cpu_weight), .type = T_UINT, .min = 0, .max = 10000,
	  .arg = "N", .help = "the guest's share of the CPU against other guests: its worker's "
			      "cgroup cpu.weight, 1 to 10000 (0: the cgroup default, 100)",
	  .runtime = true },
	{ .name = "cbt-dir", DAEMON(cbt_dir), .type = T_CUSTOM, .arg = "DIR",
	  .help = "where each disk's changed-block tracking and its views' copies are kept (a "
		  "file system that survives a reboot)", .dflt = XBD_DEFAULT_CBT_DIR,
	  .parse = parse_cbt_dir, .format = format_cbt_dir },
	{ .name = "cbt", DISK(cbt), .type = T_BOOL, .arg = "0|1", .runtime = true,
	  .help = "changed-block tracking: the blocks written since each checkpoint (xbdctl "
		  "checkpoint), for incremental backups of the running guest" },
	{ .name = "cbt-granularity", DISK(cbt_granularity), .type = T_CUSTOM, .arg = "BYTES",
	  .help = "the tracking's block, a power of two from 4096 to 16777216 (a new value starts "
		  "the tracking anew: its checkpoints are gone)", .parse = parse_granularity },
	{ .name = "cbt-max-checkpoints", DISK(cbt_max_checkpoints), .type = T_UINT, .min = 1,
	  .max = 64, .arg = "N", .help = "checkpoints a disk keeps at most (one bitmap each)" },
	{ .name = "cbt-max-memory", DISK(cbt_max_memory), .type = T_UINT, .min = 4096,
	  .max = 1ull << 40, .arg = "BYTES",
	  .help = "the bitmaps a disk may hold: its size / cbt-granularity / 8 bytes per "
		  "checkpoint; fewer checkpoints fit when they are larger" },
	{ .name = "cbt-scratch", DISK(cbt_scratch), .type = T_UINT, .min = 0, .max = 1ull << 44,
	  .arg = "BYTES", .help = "what a point-in-time view may copy aside before the guest "
		  "overwrites it; a view that needs more fails (the guest does not); 0: no views" },
	{ .name = "nbd-connect-timeout-ms", DISK(nbd_connect_timeout_ms), .type = T_UINT,
	  .min = 100, .max = 600000, .arg = "MS",
	  .help = "NBD disks: how long a connect (or reconnect) to the server may take" },
	{ .name = "nbd-retry-ms", DISK(nbd_retry_ms), .type = T_UINT, .min = 0, .max = 3600000,
	  .arg = "MS", .help = "NBD disks: after a failed reconnect, requests fail at once for "
			       "this long before the next attempt" },
	{ .name = "nbd-request-timeout-ms", DISK(nbd_request_timeout_ms), .type = T_UINT, .min = 0,
	  .max = 3600000, .arg = "MS", .help = "NBD disks: a request the server has not answered "
	  "this long fails (an I/O error) and the connection is made again; 0: never" },
};

#define NR_SETTINGS (sizeof(xbd_settings) / sizeof(xbd_settings[0]))
_Static_assert(NR_SETTINGS <= 64, "a [disk] rule's mask has 64 bits");
const unsigned int xbd_nr_settings = NR_SETTINGS;

/* ---- names ---- */

const char *xbd_grant_mode_name(enum xbd_grant_mode m)
{
	return (unsigned int)m < 3 ? w_grants[m] : "?";
}

const char *xbd_fua_mode_name(enum xbd_fua_mode m)
{
	return (unsigned int)m < 2 ? w_fua[m] : "?";
}

const char *xbd_cache_mode_name(enum xbd_cache_mode m)
{
	return (unsigned int)m < 3 ? w_cache[m] : "?";
}

/* Linux blkback's default xenblk_max_queues is the number of online CPUs. */
static unsigned int default_queues(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > 16 ? 16 : (unsigned int)n;
}

void settings_defaults(struct xbd_back_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->platform = XBD_PLATFORM_AUTO;
	o->foreground = true;
	o->journal = true;
	o->workers = true;
	o->worker_uid_base = XBD_DEFAULT_WORKER_UID_BASE;
	o->worker_restarts = 5;
	o->types[0] = "vbd";
	o->types[1] = "vbd3";
	o->nr_types = 2;
	o->disk.max_batch = 32; /* QEMU's measured default */
	o->disk.cache = XBD_CACHE_WRITEBACK;
	o->disk.direct = true;
	o->disk.format_check = true;
	o->disk.persistent = true;
	o->disk.max_ring_order = XBD_RING_MAX_ORDER;
	o->disk.max_queues = default_queues();
	o->disk.max_indirect_segs = XBD_MAX_INDIRECT_SEGS;
	o->disk.poll_max_ns = 32000; /* QEMU/NVMe measurements: 16-32 us */
	o->disk.nbd_connect_timeout_ms = 5000;
	o->disk.nbd_retry_ms = 1000;
	/* The block layer's default request timeout, which the kernel's nbd driver keeps. */
	o->disk.nbd_request_timeout_ms = 30000;
	for (unsigned int k = 0; k < XBD_IOLIMIT_KINDS; k++)
		o->disk.limit_max_length[k] = 1; /* QEMU's default burst length */
	/* tapdisk's and XAPI's block: backup tools that read XAPI's bitmap expect it. */
	o->disk.cbt_granularity = 65536;
	o->disk.cbt_max_checkpoints = 16;
	/* 16 checkpoints of a 2 TiB disk's 4 MiB bitmap, and room to spare. */
	o->disk.cbt_max_memory = 256ull << 20;
	o->disk.cbt_scratch = 1ull << 30;
}

/* ---- fields ---- */

void *setting_field(const struct setting *s, void *daemon, void *disk)
{
	return (char *)(s->scope == XBD_SETTING_DAEMON ? daemon : disk) + s->off;
}

static uint64_t get_uint(const struct setting *s, const void *f)
{
	switch (s->size) {
	case 1: return *(const bool *)f;
	case 4: return *(const unsigned int *)f;
	default: return *(const uint64_t *)f;
	}
}

static void set_uint(const struct setting *s, void *f, uint64_t v)
{
	switch (s->size) {
	case 1: *(bool *)f = v != 0; break;
	case 4: *(unsigned int *)f = (unsigned int)v; break;
	default: *(uint64_t *)f = v; break;
	}
}

static const struct setting *find(const char *name)
{
	unsigned int i;

	for (i = 0; i < NR_SETTINGS; i++)
		if (!strcmp(xbd_settings[i].name, name))
			return &xbd_settings[i];
	return NULL;
}

/* The bit of a setting in a rule's mask: an alias sets its setting's. */
static uint64_t bit_of(const struct setting *s)
{
	if (s->alias)
		s = find(s->alias);
	return 1ull << (s - xbd_settings);
}

/* "a, b or c" */
void setting_words(const char *const *w, char *buf, size_t len)
{
	size_t n = 0;
	unsigned int i;

	buf[0] = '\0';
	for (i = 0; w[i] && n < len; i++)
		n += snprintf(buf + n, len - n, "%s%s", i == 0 ? "" : w[i + 1] ? ", " : " or ",
			      w[i]);
}

/* A decimal number in [min, max], nothing else. */
static int parse_num(const char *val, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*val || *val == '-' || *val == '+' || *val == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(val, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_field(const struct setting *s, void *f, const char *dash, const char *val,
		       char *err, size_t errlen)
{
	char allowed[160] = "";
	uint64_t v;
	int ret = 0;

	switch (s->type) {
	case T_UINT:
		if (s->bytes) {
			ret = xbd_parse_size(val, &v) || v < s->min || v > s->max ? -EINVAL : 0;
			if (ret)
				snprintf(allowed, sizeof(allowed), "bytes from %" PRIu64 " to %" PRIu64
					 ", the number alone or with " XBD_SIZE_SUFFIXES " (100M)",
					 s->min, s->max);
			break;
		}
		ret = parse_num(val, s->min, s->max, &v);
		if (ret)
			snprintf(allowed, sizeof(allowed), "an integer from %" PRIu64 " to %" PRIu64,
				 s->min, s->max);
		break;
	case T_BOOL:
		ret = strcmp(val, "0") && strcmp(val, "1") ? -EINVAL : 0;
		v = val[0] == '1';
		if (ret)
			snprintf(allowed, sizeof(allowed), "0 or 1");
		break;
	case T_WORD:
		ret = -EINVAL;
		for (v = 0; s->words[v]; v++)
			if (!strcmp(s->words[v], val)) {
				ret = 0;
				break;
			}
		if (ret)
			setting_words(s->words, allowed, sizeof(allowed));
		break;
	case T_CUSTOM:
		ret = s->parse(f, val, allowed, sizeof(allowed));
		if (ret && ret != -EINVAL)
			return ret;
		break;
	}
	if (ret) {
		snprintf(err, errlen, "invalid value '%s' for %s%s: %s", val, dash, s->name, allowed);
		return -EINVAL;
	}
	if (s->type != T_CUSTOM)
		set_uint(s, f, v);
	return 0;
}

/* The value as the file spells it; false if it is to be printed commented out. */
bool setting_format(const struct setting *s, const void *f, char *buf, size_t len)
{
	switch (s->type) {
	case T_UINT:
	case T_BOOL:
		snprintf(buf, len, "%" PRIu64, get_uint(s, f));
		return true;
	case T_WORD: {
		uint64_t v = get_uint(s, f), n;

		for (n = 0; s->words[n]; n++)
			;
		snprintf(buf, len, "%s", v < n ? s->words[v] : "?");
		return true;
	}
	case T_CUSTOM:
		if (s->format)
			return s->format(f, buf, len);
		snprintf(buf, len, "%" PRIu64, get_uint(s, f));
		return true;
	}
	return true;
}

/* ---- the settings that are not a plain number or word ---- */

static int parse_types(void *field, const char *val, char *allowed, size_t len)
{
	const char **types = field;
	/* nr_types follows types[] in struct xbd_back_opts. */
	unsigned int *nr = (unsigned int *)((char *)field + offsetof(struct xbd_back_opts, nr_types) -
					    offsetof(struct xbd_back_opts, types));
	const char *got[XBD_BACK_MAX_TYPES];
	unsigned int n = 0, i, j;
	const char *p = val;

	while (*p) {
		size_t l = strcspn(p, ",");
		bool found = false;

		for (i = 0; i < sizeof(known_types) / sizeof(known_types[0]); i++) {
			if (strlen(known_types[i]) != l || strncmp(p, known_types[i], l))
				continue;
			found = true;
			for (j = 0; j < n && got[j] != known_types[i]; j++)
				;
			if (j == n && n < XBD_BACK_MAX_TYPES)
				got[n++] = known_types[i];
		}
		if (!found)
			break;
		p += l;
		if (*p == ',')
			p++;
	}
	if (*p || !n) {
		snprintf(allowed, len, "a comma-separated list of vbd, vbd3");
		return -EINVAL;
	}
	memcpy(types, got, n * sizeof(got[0]));
	*nr = n;
	return 0;
}

static bool format_types(const void *field, char *buf, size_t len)
{
	const char *const *types = field;
	unsigned int nr = *(const unsigned int *)((const char *)field +
						  offsetof(struct xbd_back_opts, nr_types) -
						  offsetof(struct xbd_back_opts, types));
	size_t n = 0;
	unsigned int i;

	buf[0] = '\0';
	for (i = 0; i < nr && n < len; i++)
		n += snprintf(buf + n, len - n, "%s%s", i ? "," : "", types[i]);
	return true;
}

/* info, verbose, debug, or their numbers 0, 1, 2. */
static int parse_level(void *field, const char *val, char *allowed, size_t len)
{
	int i;

	for (i = 0; w_level[i]; i++) {
		if (!strcmp(val, w_level[i]) || (val[0] == '0' + i && !val[1])) {
			*(int *)field = i;
			return 0;
		}
	}
	snprintf(allowed, len, "info, verbose or debug");
	return -EINVAL;
}

static bool format_level(const void *field, char *buf, size_t len)
{
	int v = *(const int *)field;

	snprintf(buf, len, "%s", w_level[v >= 0 && v <= 2 ? v : 0]);
	return true;
}

static int parse_control(void *field, const char *val, char *allowed, size_t len)
{
	char **control = field, *c;

	if (val[0] && val[0] != '/' && strcmp(val, "none")) {
		snprintf(allowed, len, "an absolute path of a unix socket, or none");
		return -EINVAL;
	}
	if (strlen(val) >= 108) {
		snprintf(allowed, len, "a path shorter than 108 bytes (a unix socket's limit)");
		return -EINVAL;
	}
	c = strdup(strcmp(val, "none") ? val : "");
	if (!c)
		return -ENOMEM;
	free(*control);
	*control = c;
	return 0;
}

/* Unset: the default, printed as a comment (the simulator's is elsewhere). */
static bool format_control(const void *field, char *buf, size_t len)
{
	const char *c = *(char *const *)field;

	if (!c) {
		snprintf(buf, len, "%s (the default; the simulator's is in its directory)",
			 XBD_DEFAULT_CONTROL);
		return false;
	}
	snprintf(buf, len, "%s", c[0] ? c : "none");
	return true;
}

static int parse_cbt_dir(void *field, const char *val, char *allowed, size_t len)
{
	char **dir = field, *c;

	if (val[0] != '/' || strlen(val) > 200) {
		snprintf(allowed, len, "an absolute path of a directory, at most 200 bytes");
		return -EINVAL;
	}
	c = strdup(val);
	if (!c)
		return -ENOMEM;
	free(*dir);
	*dir = c;
	return 0;
}

/* Unset: the default, printed as a comment (the simulator's is in its directory). */
static bool format_cbt_dir(const void *field, char *buf, size_t len)
{
	const char *c = *(char *const *)field;

	if (!c) {
		snprintf(buf, len, "%s (the default; the simulator's is in its directory)",
			 XBD_DEFAULT_CBT_DIR);
		return false;
	}
	snprintf(buf, len, "%s", c);
	return true;
}

static int parse_granularity(void *field, const char *val, char *allowed, size_t len)
{
	uint64_t v;

	if (parse_num(val, 4096, 16777216, &v) || (v & (v - 1))) {
		snprintf(allowed, len, "a power of two from 4096 to 16777216");
		return -EINVAL;
	}
	*(uint64_t *)field = v;
	return 0;
}

static int parse_indirect(void *field, const char *val, char *allowed, size_t len)
{
	uint64_t v;

	if (parse_num(val, 0, XBD_MAX_INDIRECT_SEGS, &v) ||
	    (v && v <= BLKIF_MAX_SEGMENTS_PER_REQUEST)) {
		snprintf(allowed, len, "0 (off) or an integer from %u to %u",
			 BLKIF_MAX_SEGMENTS_PER_REQUEST + 1, XBD_MAX_INDIRECT_SEGS);
		return -EINVAL;
	}
	*(unsigned int *)field = (unsigned int)v;
	return 0;
}

static const char *const w_engine[] = { "aio", "uring", NULL };

const char *xbd_file_engine_name(enum xbd_file_engine e)
{
	return (unsigned int)e < 2 ? w_engine[e] : "?";
}

/* A word of w_engine, uring only in a build with liburing (configure). */
static int parse_engine(void *field, const char *val, char *allowed, size_t len)
{
	if (!strcmp(val, "aio")) {
		*(enum xbd_file_engine *)field = XBD_FILE_ENGINE_AIO;
		return 0;
	}
#ifdef HAVE_LIBURING
	if (!strcmp(val, "uring")) {
		*(enum xbd_file_engine *)field = XBD_FILE_ENGINE_URING;
		return 0;
	}
	snprintf(allowed, len, "aio or uring");
#else
	if (!strcmp(val, "uring"))
		snprintf(allowed, len, "aio (this xbd-back was built without liburing, so it has "
			 "no uring engine)");
	else
		snprintf(allowed, len, "aio or uring");
#endif
	return -EINVAL;
}

static bool format_engine(const void *field, char *buf, size_t len)
{
	snprintf(buf, len, "%s", xbd_file_engine_name(*(const enum xbd_file_engine *)field));
	return true;
}

/* 1 to 31 of [A-Za-z0-9_.-]: it is printed in logs, JSON and labels unescaped. */
static int parse_group(void *field, const char *val, char *allowed, size_t len)
{
	size_t n = strlen(val);

	if (n >= XBD_THROTTLE_GROUP_MAX || strspn(val, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
						"OPQRSTUVWXYZ0123456789_.-") != n) {
		snprintf(allowed, len, "a name of up to %d letters, digits, '_', '.' and '-' "
			 "(empty: limits of its own)", XBD_THROTTLE_GROUP_MAX - 1);
		return -EINVAL;
	}
	memcpy(field, val, n + 1);
	return 0;
}

/* No group: printed commented out (and null in JSON). */
static bool format_group(const void *field, char *buf, size_t len)
{
	snprintf(buf, len, "%s", (const char *)field);
	return ((const char *)field)[0] != '\0';
}

static int parse_grant_copy(void *field, const char *val, char *allowed, size_t len)
{
	if (strcmp(val, "0") && strcmp(val, "1")) {
		snprintf(allowed, len, "0 or 1");
		return -EINVAL;
	}
	*(enum xbd_grant_mode *)field = val[0] == '1' ? XBD_GRANTS_COPY : XBD_GRANTS_AUTO;
	return 0;
}

/* ---- setting by name ---- */

int xbd_disk_opt_set(struct xbd_disk_opts *d, uint64_t *mask, const char *dash,
		     const char *name, const char *val, char *err, size_t errlen)
{
	const struct setting *s = find(name);
	int ret;

	if (!s)
		return -ENOENT;
	if (s->scope != XBD_SETTING_DISK)
		return -EPERM;
	ret = parse_field(s, (char *)d + s->off, dash, val, err, errlen);
	if (!ret && mask)
		*mask |= bit_of(s);
	return ret;
}

int xbd_back_opt_set(struct xbd_back_opts *o, const char *dash, const char *name,
		     const char *val, char *err, size_t errlen)
{
	const struct setting *s = find(name);

	if (!s)
		return -ENOENT;
	return parse_field(s, setting_field(s, o, &o->disk), dash, val, err, errlen);
}

const char *xbd_setting_names(enum xbd_setting_scope scope, bool runtime)
{
	static char names[2][2][2048];
	char *buf = names[scope == XBD_SETTING_DISK][runtime];
	size_t n = 0;
	unsigned int i;

	if (buf[0])
		return buf;
	for (i = 0; i < NR_SETTINGS; i++) {
		if (xbd_settings[i].scope != scope || (runtime && !xbd_settings[i].runtime))
			continue;
		n += snprintf(buf + n, sizeof(names[0][0]) - n, "%s%s", n ? ", " : "", xbd_settings[i].name);
		if (n >= sizeof(names[0][0]))
			break;
	}
	return buf;
}

bool xbd_setting_in_mask(const char *name, uint64_t mask)
{
	const struct setting *s = find(name);

	return s && (mask & bit_of(s));
}

bool xbd_setting_is_runtime(const char *name)
{
	const struct setting *s = find(name);

	return s && s->runtime;
}

bool xbd_setting_exists(const char *name)
{
	return find(name) != NULL;
}

/* Longest name compared for a suggestion: every setting's is far shorter. */
#define NEAREST_MAX 48

/*
 * The edit distance of a and b (optimal string alignment: insertions,
 * deletions, substitutions and swaps of neighbours), both at most
 * NEAREST_MAX long.
 */
static unsigned int edit_distance(const char *a, const char *b)
{
	unsigned int d[NEAREST_MAX + 1][NEAREST_MAX + 1];
	size_t la = strlen(a), lb = strlen(b), i, j;

	for (i = 0; i <= la; i++)
		d[i][0] = (unsigned int)i;
	for (j = 0; j <= lb; j++)
		d[0][j] = (unsigned int)j;
	for (i = 1; i <= la; i++) {
		for (j = 1; j <= lb; j++) {
			unsigned int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);

			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

const char *xbd_setting_nearest(const char *name, bool disk_only, bool runtime)
{
	size_t len = strlen(name);
	unsigned int best = 3, limit = len / 3 > 2 ? 2 : (unsigned int)(len / 3);
	const char *found = NULL;

	if (len > NEAREST_MAX || !limit)
		return NULL;
	for (unsigned int i = 0; i < NR_SETTINGS; i++) {
		const struct setting *s = &xbd_settings[i];
		unsigned int d;

		if ((disk_only && s->scope != XBD_SETTING_DISK) || (runtime && !s->runtime) ||
		    strlen(s->name) > NEAREST_MAX)
			continue;
		d = edit_distance(name, s->name);
		if (d && d <= limit && d < best) {
			best = d;
			found = s->name;
		}
	}
	return found;
}

void xbd_disk_opts_store(struct xbd_disk_opts *dst, const struct xbd_disk_opts *src,
			 uint64_t mask)
{
	unsigned int i;

	for (i = 0; i < NR_SETTINGS; i++) {
		const struct setting *s = &xbd_settings[i];
		char *to = (char *)dst + s->off;
		const char *from = (const char *)src + s->off;

		if (s->scope != XBD_SETTING_DISK || s->alias || !(mask & (1ull << i)))
			continue;
		switch (s->size) {
		case 1: __atomic_store_n((bool *)to, *(const bool *)from, __ATOMIC_RELAXED); break;
		case 8:
			__atomic_store_n((uint64_t *)to, *(const uint64_t *)from, __ATOMIC_RELAXED);
			break;
		case 4:
			__atomic_store_n((unsigned int *)to, *(const unsigned int *)from,
					 __ATOMIC_RELAXED);
			break;
		default: /* a name (throttle-group), which is not changed at run time */
			memcpy(to, from, s->size);
			break;
		}
	}
}

void xbd_disk_opts_print_runtime(FILE *f, const struct xbd_disk_opts *d)
{
	struct xbd_back_opts dflt;
	unsigned int i;
	bool first = true;
	char v[128];

	settings_defaults(&dflt);
	for (i = 0; i < NR_SETTINGS; i++) {
		const struct setting *s = &xbd_settings[i];

		if (!s->runtime)
			continue;
		/* The limits only where set: 19 settings a disk rarely has. */
		if (s->limit && !memcmp((const char *)d + s->off, (const char *)&dflt.disk + s->off,
					s->size))
			continue;
		setting_format(&xbd_settings[i], (const char *)d + xbd_settings[i].off, v, sizeof(v));
		fprintf(f, "%s%s=%s", first ? "" : " ", xbd_settings[i].name, v);
		first = false;
	}
}

void xbd_disk_opts_json(FILE *f, const struct xbd_disk_opts *d)
{
	unsigned int i;
	bool first = true;
	char v[128];

	fputc('{', f);
	for (i = 0; i < NR_SETTINGS; i++) {
		const struct setting *s = &xbd_settings[i];
		const char *p;

		if (s->scope != XBD_SETTING_DISK || s->alias)
			continue;
		setting_format(s, (const char *)d + s->off, v, sizeof(v));
		fprintf(f, "%s\"", first ? "" : ",");
		for (p = s->name; *p; p++)
			fputc(*p == '-' ? '_' : *p, f);
		fputs("\":", f);
		if (s->type == T_CUSTOM && s->format && !s->format((const char *)d + s->off, v,
								   sizeof(v)))
			fputs("null", f); /* not set (throttle-group) */
		else if (s->type == T_WORD || (s->type == T_CUSTOM && s->format))
			fprintf(f, "\"%s\"", v); /* our own words: nothing to escape */
		else if (s->type == T_BOOL)
			fputs(v[0] == '1' ? "true" : "false", f);
		else
			fputs(v, f);
		first = false;
	}
	fputc('}', f);
}

/* ---- [disk] rules ---- */

int xbd_back_add_rule(struct xbd_back_opts *o, const char *target,
		      const struct xbd_disk_opts *vals, uint64_t mask)
{
	char *t;

	if (o->nr_rules >= XBD_BACK_MAX_DISK_RULES)
		return -E2BIG;
	t = strdup(target);
	if (!t)
		return -ENOMEM;
	o->rules[o->nr_rules].target = t;
	o->rules[o->nr_rules].vals = *vals;
	o->rules[o->nr_rules].mask = mask;
	o->nr_rules++;
	return 0;
}

static void free_rules(struct xbd_back_opts *o)
{
	unsigned int i;

	for (i = 0; i < o->nr_rules; i++)
		free(o->rules[i].target);
	o->nr_rules = 0;
}

void xbd_back_take_rules(struct xbd_back_opts *o, struct xbd_back_opts *src)
{
	free_rules(o);
	memcpy(o->rules, src->rules, sizeof(src->rules[0]) * src->nr_rules);
	o->nr_rules = src->nr_rules;
	src->nr_rules = 0;
}

/* The fields a rule set, copied over out. */
static void rule_apply(const struct xbd_disk_rule *r, struct xbd_disk_opts *out)
{
	unsigned int i;

	for (i = 0; i < NR_SETTINGS; i++)
		if (xbd_settings[i].scope == XBD_SETTING_DISK && (r->mask & (1ull << i)))
			memcpy((char *)out + xbd_settings[i].off, (const char *)&r->vals + xbd_settings[i].off,
			       xbd_settings[i].size);
}

void xbd_disk_opts_for(const struct xbd_back_opts *opts, const char *params,
		       struct xbd_disk_opts *out)
{
	unsigned int i;

	*out = opts->disk;
	for (i = 0; i < opts->nr_rules; i++)
		if (!strcmp(opts->rules[i].target, params) ||
		    !fnmatch(opts->rules[i].target, params, 0))
			rule_apply(&opts->rules[i], out);
}

void xbd_back_free_options(struct xbd_back_opts *opts)
{
	free_rules(opts);
	free(opts->config);
	opts->config = NULL;
	free(opts->control);
	opts->control = NULL;
	free(opts->cbt_dir);
	opts->cbt_dir = NULL;
}

/* ---- the configuration file's lines (config.c reads the file) ---- */

/* What the file made so far: the section being read, its pattern and settings. */
struct file_rule {
	struct xbd_back_opts *o;
	char *target;            /* NULL: the top of the file */
	struct xbd_disk_opts vals;
	uint64_t mask;
};

static int file_key(void *ctx, const char *where, const char *k, const char *v)
{
	struct file_rule *fr = ctx;
	char err[XBD_OPT_ERR_MAX];
	int ret;

	if (fr->target) {
		ret = xbd_disk_opt_set(&fr->vals, &fr->mask, "", k, v, err, sizeof(err));
		if (ret == -EPERM)
			fprintf(stderr, "xbd-back: %s: '%s' is a daemon setting, not allowed "
				"in [disk %s] (allowed there: %s)\n", where, k, fr->target,
				xbd_setting_names(XBD_SETTING_DISK, false));
		else if (ret == -ENOENT && xbd_setting_nearest(k, true, false))
			fprintf(stderr, "xbd-back: %s: unknown key '%s' in [disk %s] (did you "
				"mean %s?)\n", where, k, fr->target, xbd_setting_nearest(k, true, false));
		else if (ret == -ENOENT)
			fprintf(stderr, "xbd-back: %s: unknown key '%s' in [disk %s] "
				"(allowed: %s)\n", where, k, fr->target,
				xbd_setting_names(XBD_SETTING_DISK, false));
		else if (ret)
			fprintf(stderr, "xbd-back: %s: %s\n", where, err);
	} else {
		ret = xbd_back_opt_set(fr->o, "", k, v, err, sizeof(err));
		if (ret == -ENOENT && xbd_setting_nearest(k, false, false))
			fprintf(stderr, "xbd-back: %s: unknown key '%s' (did you mean %s?)\n", where,
				k, xbd_setting_nearest(k, false, false));
		else if (ret == -ENOENT)
			fprintf(stderr, "xbd-back: %s: unknown key '%s' (allowed: %s, %s)\n",
				where, k, xbd_setting_names(XBD_SETTING_DAEMON, false),
				xbd_setting_names(XBD_SETTING_DISK, false));
		else if (ret)
			fprintf(stderr, "xbd-back: %s: %s\n", where, err);
	}
	return ret;
}

/* The section before becomes a [disk] rule; a new one starts from the file's disk defaults. */
static int file_section(void *ctx, const char *where, const char *pattern)
{
	struct file_rule *fr = ctx;
	int err = 0;

	if (fr->target)
		err = xbd_back_add_rule(fr->o, fr->target, &fr->vals, fr->mask);
	if (err == -E2BIG)
		fprintf(stderr, "xbd-back: %s: too many [disk] sections (at most %d)\n", where,
			XBD_BACK_MAX_DISK_RULES);
	free(fr->target);
	fr->target = NULL;
	fr->mask = 0;
	if (err)
		return -EINVAL;
	if (!pattern)
		return 0;
	fr->target = strdup(pattern);
	fr->vals = fr->o->disk;
	return fr->target ? 0 : -ENOMEM;
}

/* Read the configuration file into o: 0, -ENOENT if there is none, or -EINVAL (said why). */
int settings_config_load(const char *path, struct xbd_back_opts *o)
{
	static const struct xbd_config_reader reader = { file_key, file_section };
	struct file_rule fr = { .o = o };
	int ret = xbd_config_read(path, &reader, &fr);

	free(fr.target);
	return ret;
}
