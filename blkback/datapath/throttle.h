/*
 * throttle.h: per-disk I/O limits (the iops-* and bps-* settings), token
 * buckets in the style QEMU's throttling made familiar.  A disk with a
 * limit has one limiter that all its rings share, or, with
 * throttle-group, one per (domain, group name) that several of the
 * domain's disks share.  A ring thread asks it before handing a request
 * to the engine; a request that does not fit waits in the ring's submit
 * queue (the guest sees latency, never an error) until the time the
 * limiter named.
 *
 * Each limit is a bucket that leaks at the limit's rate.  A request
 * passes while the bucket's level is below its size, whatever it costs,
 * and fills it by its cost (beyond the size, maybe): so over any long
 * window a disk gets its limit, plus at most one bucket and one request
 * at the start, and a large request never waits longer than a small one.  The
 * bucket holds a tenth of a second of the limit; with a burst (the
 * -max setting, a rate above the limit, and -max-length seconds) it
 * holds max x length, and a second bucket leaking at the burst rate
 * keeps the burst itself at that rate.  What counts (throttle.c): every
 * request is one operation (iops-size: one per that many bytes); reads
 * and writes count their bytes; a flush or discard is one write
 * operation and no bytes.
 */
#ifndef XBD_BACK_THROTTLE_H
#define XBD_BACK_THROTTLE_H

#include <stdbool.h>
#include <stdint.h>

#include "blkback/settings/iolimits.h"

struct xbd_disk;

/* A request's kind, for what it counts against. */
enum xbd_throttle_op { XBD_THR_READ, XBD_THR_WRITE, XBD_THR_OTHER_WRITE };

struct xbd_throttle;

/*
 * A limiter's buckets as they were at at_ns (CLOCK_MONOTONIC), kept by
 * the main process for a disk whose worker may end between two of its
 * connections (worker.h), so that connecting again brings no fresh burst.
 * Only a worker reads it back, and checks it: it came from a worker.
 */
struct xbd_throttle_state {
	double level[XBD_IOLIMIT_KINDS], burst[XBD_IOLIMIT_KINDS];
	uint64_t at_ns;          /* 0: none */
};

/*
 * A limiter with these limits: the disk's own (domid, devid; group NULL
 * or ""), or the group (domid, group) shared with the other disks that
 * joined it.  A group's limits are those of the disk that joined or was
 * set last: who names it in the line logged when that changes them.  One
 * kept by xbd_throttle_put is found again with its buckets as they were.
 * NULL when out of memory.
 */
struct xbd_throttle *xbd_throttle_get(uint32_t domid, uint32_t devid, const char *group,
				      const struct xbd_iolimits *c,
				      const struct xbd_throttle_state *st, uint64_t now_ns,
				      const char *who);
/* Its buckets now (a new limiter starts from st, checked, where xbd_throttle_get makes one). */
void xbd_throttle_save(struct xbd_throttle *t, struct xbd_throttle_state *st);
/*
 * The disk lets go of it: freed with its last disk, unless keep (the disk
 * may connect again in this process: its buckets stay for it).
 */
void xbd_throttle_put(struct xbd_throttle *t, bool keep);
/* New limits (xbdctl set), for every disk that shares it. */
void xbd_throttle_set(struct xbd_throttle *t, const struct xbd_iolimits *c);

/*
 * Take a request's cost at now_ns (CLOCK_MONOTONIC): true if it may go
 * now (its cost is taken), else false with *due_ns the time to ask again.
 * force takes it and lets it go whatever the buckets hold (a stopping
 * ring's requests: they still count against what follows).
 */
bool xbd_throttle_take(struct xbd_throttle *t, enum xbd_throttle_op op, uint64_t bytes,
		       bool force, uint64_t now_ns, uint64_t *due_ns);
/* Whether it limits anything now (a ring skips it while not). */
bool xbd_throttle_active(const struct xbd_throttle *t);

/*
 * The disk's limiter as its settings say (none set and no group: none):
 * made (its buckets from disk->thr_state, if it has one), changed or kept;
 * disk->thr is stored with release semantics for the ring threads.  Called
 * where a device's settings are set (its connect, and xbdctl set in the
 * process that runs its rings).
 */
void xbd_disk_throttle_update(struct xbd_disk *disk);
/*
 * The device's rings have stopped and it goes: its limiter too, or with
 * keep, only until the disk connects again in this process (a worker's
 * device lasts one connection).
 */
void xbd_disk_throttle_release(struct xbd_disk *disk, bool keep);

#endif /* XBD_BACK_THROTTLE_H */
