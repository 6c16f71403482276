/*
 * throttle.c: the per-disk I/O limits (throttle.h): the buckets, the
 * groups a domain's disks may share, and a device's limiter as its
 * settings say.
 *
 * A limiter is shared by the ring threads of its disks (and of its
 * group's disks), so its buckets are under a mutex; a ring only takes it
 * while a limit is set (xbd_throttle_active, one relaxed load), so a disk
 * without limits pays a pointer test per submission and nothing else.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/datapath/dataplane.h"
#include "blkback/log/log.h"
#include "blkback/settings/options.h"
#include "blkback/datapath/throttle.h"
#include "common/clock.h"

/* One leaking bucket: its level drains at rate per second, its room is size. */
struct bucket {
	double level;
	double rate, size;
};

struct xbd_throttle {
	pthread_mutex_t lock;
	struct xbd_iolimits conf;
	bool active;             /* a limit is set (relaxed atomic: the rings' fast test) */
	struct bucket b[XBD_IOLIMIT_KINDS];
	struct bucket burst[XBD_IOLIMIT_KINDS]; /* the burst's own rate (rate 0: no burst) */
	uint64_t last_ns;        /* the buckets' levels are as of then */
	/*
	 * Its key: a group (domid, group), or one disk's own (domid, devid,
	 * group ""); and how many disks hold it now.
	 */
	uint32_t domid, devid;
	char group[XBD_THROTTLE_GROUP_MAX];
	unsigned int refs;
	struct xbd_throttle *next;
};

/*
 * The limiters of this process (a worker serves one domain; workers = 0:
 * all of them).  One a disk let go of may stay (xbd_throttle_put's keep):
 * a worker's devices end with each connection, and a disk that connects
 * again must find its buckets as it left them, not a fresh burst.
 */
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xbd_throttle *all;

/*
 * The buckets of conf: a tenth of a second of the limit, or with a burst
 * max x length and the burst's own bucket (a tenth of a second of it).
 */
static void set_conf(struct xbd_throttle *t, const struct xbd_iolimits *c)
{
	bool any = false;

	t->conf = *c;
	for (unsigned int k = 0; k < XBD_IOLIMIT_KINDS; k++) {
		const struct xbd_iolimit *l = &c->l[k];
		struct bucket *b = &t->b[k], *bb = &t->burst[k];

		double size = b->size, bsize = bb->size;

		b->rate = (double)l->avg;
		bb->rate = l->max && l->avg ? (double)l->max : 0;
		b->size = bb->rate ? bb->rate * (l->max_length ? l->max_length : 1) : b->rate / 10;
		bb->size = bb->rate / 10;
		/*
		 * A bucket made smaller: what it holds beyond its new size is
		 * forgiven.  Otherwise (the same limits again, as a disk
		 * connects) its level stays, above the size too: a debt.
		 */
		if (b->size < size && b->level > b->size)
			b->level = b->size;
		if (bb->size < bsize && bb->level > bb->size)
			bb->level = bb->size;
		any |= l->avg != 0;
	}
	__atomic_store_n(&t->active, any, __ATOMIC_RELAXED);
}

static struct xbd_throttle *throttle_new(uint32_t domid, uint32_t devid, const char *group,
					 const struct xbd_iolimits *c)
{
	struct xbd_throttle *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->domid = domid;
	t->devid = group[0] ? 0 : devid;
	snprintf(t->group, sizeof(t->group), "%s", group);
	set_conf(t, c);
	return t;
}

static void conf_text(const struct xbd_iolimits *c, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned int k = 0; k < XBD_IOLIMIT_KINDS && n < len; k++)
		if (c->l[k].avg)
			n += snprintf(buf + n, len - n, "%s%s=%" PRIu64, n ? " " : "",
				      xbd_iolimit_name(k), c->l[k].avg);
	if (!n)
		snprintf(buf, len, "none");
}

/*
 * A level as a state says it, within what a bucket can come to hold: its
 * size and up to a minute of debt (large requests, a stopping ring's).
 */
static void load_level(struct bucket *b, double v)
{
	double most = b->size + b->rate * 60;

	if (isfinite(v) && v > 0)
		b->level = v < most ? v : most;
}

/*
 * A new limiter's buckets from a state a worker reported (it may lie: a
 * level that is not a number, or a time ahead of ours, would hold the
 * disk for ever).
 */
static void load_state(struct xbd_throttle *t, const struct xbd_throttle_state *st,
		       uint64_t now_ns)
{
	if (!st || !st->at_ns)
		return;
	for (unsigned int k = 0; k < XBD_IOLIMIT_KINDS; k++) {
		load_level(&t->b[k], st->level[k]);
		load_level(&t->burst[k], st->burst[k]);
	}
	t->last_ns = st->at_ns < now_ns ? st->at_ns : now_ns;
}

struct xbd_throttle *xbd_throttle_get(uint32_t domid, uint32_t devid, const char *group,
				      const struct xbd_iolimits *c,
				      const struct xbd_throttle_state *st, uint64_t now_ns,
				      const char *who)
{
	struct xbd_throttle *t;
	char had[200] = "", has[200];

	if (!group)
		group = "";
	pthread_mutex_lock(&all_lock);
	for (t = all; t; t = t->next)
		if (t->domid == domid && !strcmp(t->group, group) && (group[0] || t->devid == devid))
			break;
	if (t) {
		/* Kept (its own, or a group): its limits as this disk connects now. */
		pthread_mutex_lock(&t->lock);
		if (t->refs && group[0] && memcmp(&t->conf, c, sizeof(*c)))
			conf_text(&t->conf, had, sizeof(had));
		t->refs++;
		set_conf(t, c);
		pthread_mutex_unlock(&t->lock);
	} else if ((t = throttle_new(domid, devid, group, c))) {
		load_state(t, st, now_ns);
		t->refs = 1;
		t->next = all;
		all = t;
	}
	pthread_mutex_unlock(&all_lock);
	/* Said with no lock held: in a worker a log line is a message to the main process. */
	if (had[0]) {
		conf_text(c, has, sizeof(has));
		xbd_log(XBD_LOG_WARNING, "%s: throttle group '%s' of domain %u takes this disk's "
			"limits (%s) in place of its others' (%s)", who, group, domid, has, had);
	}
	return t;
}

void xbd_throttle_put(struct xbd_throttle *t, bool keep)
{
	struct xbd_throttle **pp;

	if (!t)
		return;
	pthread_mutex_lock(&all_lock);
	if (--t->refs || keep) {
		pthread_mutex_unlock(&all_lock);
		return;
	}
	for (pp = &all; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	pthread_mutex_unlock(&all_lock);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

void xbd_throttle_save(struct xbd_throttle *t, struct xbd_throttle_state *st)
{
	pthread_mutex_lock(&t->lock);
	for (unsigned int k = 0; k < XBD_IOLIMIT_KINDS; k++) {
		st->level[k] = t->b[k].level;
		st->burst[k] = t->burst[k].level;
	}
	st->at_ns = t->last_ns;
	pthread_mutex_unlock(&t->lock);
}

void xbd_throttle_set(struct xbd_throttle *t, const struct xbd_iolimits *c)
{
	pthread_mutex_lock(&t->lock);
	set_conf(t, c);
	pthread_mutex_unlock(&t->lock);
}

bool xbd_throttle_active(const struct xbd_throttle *t)
{
	return __atomic_load_n(&t->active, __ATOMIC_RELAXED);
}

/* What a request costs in each kind: operations, then bytes. */
static void request_cost(const struct xbd_iolimits *c, enum xbd_throttle_op op,
			 uint64_t bytes, double cost[XBD_IOLIMIT_KINDS])
{
	double ops = 1;

	if (c->iops_size && bytes > c->iops_size)
		ops = (double)bytes / (double)c->iops_size;
	memset(cost, 0, sizeof(double) * XBD_IOLIMIT_KINDS);
	cost[XBD_IOLIMIT_IOPS_TOTAL] = ops;
	cost[op == XBD_THR_READ ? XBD_IOLIMIT_IOPS_READ : XBD_IOLIMIT_IOPS_WRITE] = ops;
	if (op != XBD_THR_OTHER_WRITE) {
		cost[XBD_IOLIMIT_BPS_TOTAL] = (double)bytes;
		cost[op == XBD_THR_READ ? XBD_IOLIMIT_BPS_READ : XBD_IOLIMIT_BPS_WRITE] = (double)bytes;
	}
}

/*
 * Seconds until the bucket lets a request in: when its level is below
 * its size, whatever the request costs (it may fill the bucket beyond:
 * the next ones wait that much longer).  A large request thus waits no
 * longer than a small one, so a stream of small ones on another ring of
 * the disk (or of its group) cannot keep it out for ever, and the rate
 * over time is still the limit's.
 */
static double bucket_wait(const struct bucket *b)
{
	if (!b->rate || b->level < b->size)
		return 0;
	/* Just below the size, not at it: the caller rounds up to a whole wake-up anyway. */
	return (b->level - b->size) / b->rate + 1e-9;
}

bool xbd_throttle_take(struct xbd_throttle *t, enum xbd_throttle_op op, uint64_t bytes,
		       bool force, uint64_t now_ns, uint64_t *due_ns)
{
	double cost[XBD_IOLIMIT_KINDS], wait = 0, dt;
	unsigned int k;

	pthread_mutex_lock(&t->lock);
	/* Ring threads read the clock at different moments: time never runs back. */
	dt = now_ns > t->last_ns ? (double)(now_ns - t->last_ns) / 1e9 : 0;
	if (now_ns > t->last_ns)
		t->last_ns = now_ns;
	request_cost(&t->conf, op, bytes, cost);
	for (k = 0; k < XBD_IOLIMIT_KINDS; k++) {
		struct bucket *b = &t->b[k], *bb = &t->burst[k];
		double w;

		b->level = b->level > b->rate * dt ? b->level - b->rate * dt : 0;
		bb->level = bb->level > bb->rate * dt ? bb->level - bb->rate * dt : 0;
		if (!cost[k])
			continue;
		w = bucket_wait(b);
		if (w > wait)
			wait = w;
		w = bucket_wait(bb);
		if (w > wait)
			wait = w;
	}
	if (force)
		wait = 0;
	if (wait == 0) {
		for (k = 0; k < XBD_IOLIMIT_KINDS; k++) {
			if (t->b[k].rate)
				t->b[k].level += cost[k];
			if (t->burst[k].rate)
				t->burst[k].level += cost[k];
		}
	} else {
		/* At least 100 us on: a wake-up for a sliver of a token would only spin. */
		*due_ns = now_ns + (wait < 1e-4 ? 100000 : (uint64_t)(wait * 1e9) + 1);
	}
	pthread_mutex_unlock(&t->lock);
	return wait == 0;
}

void xbd_disk_throttle_update(struct xbd_disk *disk)
{
	struct xbd_iolimits c;
	struct xbd_throttle *t;

	xbd_iolimits_from_opts(&disk->o, &c);
	/* Its group changed (a new configuration at its next connect): it leaves the old one. */
	if (disk->thr && strcmp(disk->thr->group, disk->o.throttle_group)) {
		xbd_throttle_put(disk->thr, false);
		disk->thr = NULL;
	}
	if (disk->thr) {
		xbd_throttle_set(disk->thr, &c);
		return;
	}
	if (!xbd_iolimits_any(&c) && !disk->o.throttle_group[0])
		return;
	t = xbd_throttle_get(disk->domid, disk->devid, disk->o.throttle_group, &c, &disk->thr_state,
			     xbd_mono_ns(), disk->name);
	if (!t) {
		xbd_log(XBD_LOG_ERR, "%s: no memory for its I/O limits: served without them",
			disk->name);
		return;
	}
	/* The ring threads load it with acquire: they see it whole. */
	__atomic_store_n(&disk->thr, t, __ATOMIC_RELEASE);
}

void xbd_disk_throttle_release(struct xbd_disk *disk, bool keep)
{
	xbd_throttle_put(disk->thr, keep);
	disk->thr = NULL;
}
