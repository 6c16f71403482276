/*
 * cbt-format.h: the files of a disk's changed-block tracking, as the data
 * path (cbt.c, cbw.c), the control plane (control/tracking.c,
 * control/checkpoint.c) and the export (export/, the nbdkit plugin) read
 * and write them.  Pure layout and arithmetic: no I/O, no daemon.
 *
 * A disk's tracking lives in two files in cbt-dir (/var/lib/xbd/cbt),
 * named after its params (one tracking per image, whatever domain or
 * device serves it: a guest's reboot, a reconnect or a restart of
 * xbd-back finds it again):
 *
 *   NAME.cbt   the tracking: two copies of the metadata (the checkpoints,
 *              the trust), the run page both processes coordinate on,
 *              the zone intents, and one bitmap slot per checkpoint:
 *
 *     0      meta copy A   (8 KiB)      the copy with the higher valid
 *     8 KiB  meta copy B   (8 KiB)      seqno is the truth; a commit writes
 *                                       the other one, then fdatasync
 *     16 KiB run page      (4 KiB)      volatile: reset at every open
 *     20 KiB zone intents  (4 KiB)      Z[0], Z[1]: 1 bit per zone
 *     24 KiB slot 0 .. slot nslots-1    1 bit per block, bitmap_bytes each
 *
 *   NAME.view  a point-in-time view (copy-before-write): its header, the
 *              table of the blocks copied aside, and the copies.
 *
 * Checkpoint k (in the order they were made) owns slot cp[k].slot: the
 * blocks written from checkpoint k until checkpoint k+1; the latest
 * checkpoint's slot is the live one, where the data path marks.  Before
 * the first checkpoint nothing is marked (nothing to compare with).
 *
 * Why two kinds of bits (the power-loss argument, cbt.c has the rest):
 * a block's bit is set in the live slot before its write is handed to the
 * storage, in a MAP_SHARED mapping: whatever dies after that (the worker,
 * xbd-back), the bit is in the page cache.  A host that loses power loses
 * the page cache too, so the write must not reach the storage before a
 * bit that covers it is on stable storage.  A per-write fdatasync would
 * cost a sync per new block; the zone intents cost one per zone and
 * period instead: the zone's intent bit is made durable before the write
 * is submitted, and a period's intents are cleared only after a
 * fdatasync has made its blocks' bits durable.  After a power loss every
 * block of every zone with an intent is counted changed: the
 * over-report, at most the zones written in the last two periods.
 */
#ifndef XBD_BACK_CBT_FORMAT_H
#define XBD_BACK_CBT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define XBD_CBT_MAGIC 0x3130544243444258ull      /* "XBDCBT01" */
#define XBD_CBT_VIEW_MAGIC 0x3157454956444258ull /* "XBDVIEW1" */
#define XBD_CBT_VERSION 1

#define XBD_CBT_MAX_CKPT 64      /* checkpoints a disk may keep (cbt-max-checkpoints' top) */
#define XBD_CBT_NAME_MAX 48      /* a checkpoint's name, with its NUL */
#define XBD_CBT_MAX_RINGS 16     /* a disk's rings (max-queues' top) */
#define XBD_CBT_PARAMS_MAX 256
#define XBD_CBT_WHY_MAX 160
#define XBD_CBT_NONE 0xffffffffu /* no slot */

#define XBD_CBT_META_SIZE 8192
#define XBD_CBT_RUN_OFF 16384
#define XBD_CBT_ZONES_OFF 20480
#define XBD_CBT_ZONE_BYTES 2048  /* each of Z[0], Z[1]: up to 16384 zones */
#define XBD_CBT_SLOTS_OFF 24576
#define XBD_CBT_PAGE 4096

/* A zone: at least this much of the disk, and at most XBD_CBT_MAX_ZONES of them. */
#define XBD_CBT_ZONE_MIN_BYTES (64ull << 20)
#define XBD_CBT_MAX_ZONES (XBD_CBT_ZONE_BYTES * 8)

/* What a file disk looked like when xbd-back last closed it (the trust across a close). */
enum xbd_cbt_stamp_kind { XBD_CBT_STAMP_NONE = 0, XBD_CBT_STAMP_FILE };
struct xbd_cbt_stamp {
	uint32_t kind;           /* enum xbd_cbt_stamp_kind */
	uint32_t pad;
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
};

/* One checkpoint. */
struct xbd_cbt_ckpt {
	char name[XBD_CBT_NAME_MAX];
	int64_t created;         /* realtime, seconds */
	uint64_t seq;            /* in the order made, from 1 */
	uint32_t slot;           /* its bitmap: the blocks written from it to the next */
	uint32_t epoch;          /* the trust epoch it was made in */
};

/* The metadata, twice in the file (copy A at 0, B at XBD_CBT_META_SIZE). */
struct xbd_cbt_meta {
	uint64_t magic;
	uint32_t version, meta_size;
	uint64_t seqno;          /* commits: the valid copy with the higher one is the truth */
	uint64_t sum;            /* xbd_cbt_sum of the copy, with sum = 0 */
	/* The layout, fixed when the file was made. */
	uint64_t granularity;    /* bytes per block (a power of two) */
	uint64_t nblocks;        /* blocks the slots hold (the disk's size then) */
	uint64_t disk_bytes;     /* the disk's size then */
	uint64_t bitmap_bytes;   /* one slot, a multiple of XBD_CBT_PAGE */
	uint32_t nslots;         /* slots (bounds the checkpoints) */
	uint32_t zone_shift;     /* blocks per zone: 1 << zone_shift */
	uint64_t nzones;
	uint64_t file_bytes;     /* the layout's end */
	uint64_t shadow_off;     /* test builds: the last synced copy is kept here (0: none) */
	/* Who it is. */
	uint64_t tracking_id;    /* new for each file made: a gap between two is a new start */
	int64_t created;         /* realtime, seconds */
	char params[XBD_CBT_PARAMS_MAX];
	char started_why[XBD_CBT_WHY_MAX]; /* why this file was made */
	/* Trust. */
	uint32_t epoch;          /* checkpoints of an older epoch cannot be compared with now */
	uint32_t open;           /* 1: a daemon has it open (the boot it ran in: boot_id) */
	char boot_id[40];
	int64_t untrusted_at;    /* when epoch last moved on, realtime seconds (0: never) */
	char untrusted_why[XBD_CBT_WHY_MAX];
	struct xbd_cbt_stamp closed; /* the disk at the last clean close */
	uint64_t next_seq;
	uint32_t ncp;            /* checkpoints, oldest first; cp[ncp-1]'s slot is live */
	uint32_t pad;
	struct xbd_cbt_ckpt cp[XBD_CBT_MAX_CKPT];
};
_Static_assert(sizeof(struct xbd_cbt_meta) <= XBD_CBT_META_SIZE, "meta fits its copy");

/*
 * The run page: volatile, reset whenever the control plane opens the
 * file; shared by the control plane (main process) and the process that
 * runs the disk's rings (a worker, or the same process).  Each ring
 * writes only its own line.
 */
struct xbd_cbt_run {
	uint32_t hold;           /* the control plane's drained section: writes wait */
	uint32_t live;           /* the slot marked now, or XBD_CBT_NONE (no checkpoint) */
	uint32_t overflow;       /* a write beyond nblocks came (the disk grew) */
	uint32_t failed;         /* the data path could not keep the intents durable */
	uint32_t pad[12];
	struct {
		uint32_t inflight; /* writes and discards counted and not yet answered */
		uint32_t pad[15];
	} ring[XBD_CBT_MAX_RINGS];
};
_Static_assert(sizeof(struct xbd_cbt_run) <= XBD_CBT_PAGE, "the run page is a page");

/* ---- the view file ---- */

enum xbd_cbt_view_state {
	XBD_VIEW_NONE = 0,       /* none was made, or it ended and its copies are gone */
	XBD_VIEW_ACTIVE,         /* copy-before-write keeps the checkpoint's blocks */
	XBD_VIEW_FAILING,        /* failing: why being written */
	XBD_VIEW_FAILED,         /* a copy could not be made: the view is not whole */
	XBD_VIEW_ENDED,          /* ended (released, the disk closed): why says so */
};

struct xbd_cbt_view {
	uint64_t magic;
	uint32_t version;
	uint32_t state;          /* enum xbd_cbt_view_state (atomic) */
	uint64_t view_id;        /* new for each view: an export checks it on every read */
	char checkpoint[XBD_CBT_NAME_MAX];
	char device[40];         /* "vbd/5/51712" when it was made */
	char params[XBD_CBT_PARAMS_MAX];
	uint64_t granularity;
	uint64_t disk_bytes;     /* the disk's size at the checkpoint: the export's size */
	uint64_t nblocks;
	uint64_t nslots;         /* copies the data area holds */
	uint64_t table_entries;  /* a power of two, at least twice nslots */
	uint64_t data_off;       /* where copy 0 starts */
	uint64_t file_bytes;
	uint64_t used;           /* copies taken (atomic: the slot allocator) */
	uint64_t copied;         /* blocks installed (atomic) */
	int64_t started, ended;  /* realtime seconds */
	char boot_id[40];
	char why[XBD_CBT_WHY_MAX]; /* FAILED or ENDED: why */
};
_Static_assert(sizeof(struct xbd_cbt_view) <= XBD_CBT_PAGE, "the view's header is a page");
#define XBD_CBT_TABLE_OFF XBD_CBT_PAGE

/*
 * A table entry: 0 (empty), or (block + 1) << 24 | copy.  Inserted once
 * by compare-and-swap, never changed or removed while the view lives.
 */
#define XBD_CBT_COPY_BITS 24
#define XBD_CBT_MAX_COPIES ((1u << XBD_CBT_COPY_BITS) - 1)

/* ---- arithmetic ---- */

static inline uint64_t xbd_cbt_round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

static inline unsigned int xbd_cbt_log2(uint64_t v)
{
	unsigned int s = 0;

	while (v > 1) {
		v >>= 1;
		s++;
	}
	return s;
}

/* FNV-1a over n bytes, the metadata's checksum and the files' names. */
static inline uint64_t xbd_cbt_fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}
#define XBD_CBT_FNV_INIT 0xcbf29ce484222325ull

/* A copy's checksum: the bytes with sum = 0. */
static inline uint64_t xbd_cbt_sum(const struct xbd_cbt_meta *m)
{
	struct xbd_cbt_meta c;

	memcpy(&c, m, sizeof(c));
	c.sum = 0;
	return xbd_cbt_fnv(&c, sizeof(c), XBD_CBT_FNV_INIT);
}

/* The layout for a disk of bytes at granularity g with nslots slots (fills m's layout). */
static inline void xbd_cbt_layout(struct xbd_cbt_meta *m, uint64_t bytes, uint64_t g,
				  uint32_t nslots)
{
	uint64_t zone_blocks = XBD_CBT_ZONE_MIN_BYTES / g;

	m->granularity = g;
	m->disk_bytes = bytes;
	m->nblocks = (bytes + g - 1) / g;
	m->bitmap_bytes = xbd_cbt_round_up((m->nblocks + 7) / 8, XBD_CBT_PAGE);
	if (!zone_blocks)
		zone_blocks = 1;
	while ((m->nblocks + zone_blocks - 1) / zone_blocks > XBD_CBT_MAX_ZONES)
		zone_blocks *= 2;
	m->zone_shift = xbd_cbt_log2(zone_blocks);
	if (1ull << m->zone_shift < zone_blocks)
		m->zone_shift++;
	m->nzones = (m->nblocks + (1ull << m->zone_shift) - 1) >> m->zone_shift;
	m->nslots = nslots;
	m->file_bytes = XBD_CBT_SLOTS_OFF + (uint64_t)nslots * m->bitmap_bytes;
}

static inline uint64_t xbd_cbt_slot_off(const struct xbd_cbt_meta *m, uint32_t slot)
{
	return XBD_CBT_SLOTS_OFF + (uint64_t)slot * m->bitmap_bytes;
}

static inline bool xbd_cbt_bit(const uint64_t *map, uint64_t b)
{
	return (__atomic_load_n(&map[b / 64], __ATOMIC_RELAXED) >> (b % 64)) & 1;
}

/* Set bits [first, last] of map with atomic ORs (other rings set bits of the same words). */
static inline void xbd_cbt_set_range(uint64_t *map, uint64_t first, uint64_t last)
{
	while (first <= last) {
		uint64_t w = first / 64, lo = first % 64;
		uint64_t hi = last / 64 == w ? last % 64 : 63;
		uint64_t mask = (hi == 63 ? ~0ull : (1ull << (hi + 1)) - 1) & ~((1ull << lo) - 1);

		if ((__atomic_load_n(&map[w], __ATOMIC_RELAXED) & mask) != mask)
			__atomic_fetch_or(&map[w], mask, __ATOMIC_RELAXED);
		first = (w + 1) * 64;
	}
}

/* The table's home entry of a block. */
static inline uint64_t xbd_cbt_hash(uint64_t block, uint64_t entries)
{
	return (block * 0x9e3779b97f4a7c15ull >> 17) & (entries - 1);
}

/*
 * Where block's copy is (its index), or -1: none.  Loads with acquire: a
 * copy found is whole (cbw.c installs the entry after the copy's bytes).
 */
static inline int64_t xbd_cbt_view_find(const uint64_t *table, uint64_t entries, uint64_t block)
{
	uint64_t key = block + 1;

	for (uint64_t i = xbd_cbt_hash(block, entries), n = 0; n < entries;
	     i = (i + 1) & (entries - 1), n++) {
		uint64_t e = __atomic_load_n(&table[i], __ATOMIC_ACQUIRE);

		if (!e)
			return -1;
		if (e >> XBD_CBT_COPY_BITS == key)
			return (int64_t)(e & XBD_CBT_MAX_COPIES);
	}
	return -1;
}

/*
 * XAPI's VDI.list_changed_blocks form: one bit per 64 KiB block, the first
 * block in the most significant bit of the first byte, base64.
 */
#define XBD_CBT_XAPI_BLOCK 65536u

#endif /* XBD_BACK_CBT_FORMAT_H */
