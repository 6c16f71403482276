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

#include "blkback/device.h"
#include "blkback/log.h"
#include "blkback/options.h"
#include "blkback/throttle.h"

/* One leaking bucket: its level drains at rate per second, its room is size. */
struct bucket {
	double level;
	double rate, size;
};

struct xbd_throttle {
	pthread_mutex_t lock;
	struct xbd_limits_conf conf;
	bool active;             /* a limit is set (relaxed atomic: the rings' fast test) */
	struct bucket b[XBD_LIMIT_KINDS];
	struct bucket burst[XBD_LIMIT_KINDS]; /* the burst's own rate (rate 0: no burst) */
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

static const char *const limit_names[XBD_LIMIT_KINDS] = {
	"iops-total", "iops-read", "iops-write", "bps-total", "bps-read", "bps-write",
};

/*
 * The limiters of this process (a worker serves one domain; workers = 0:
 * all of them).  One a disk let go of may stay (xbd_throttle_put's keep):
 * a worker's devices end with each connection, and a disk that connects
 * again must find its buckets as it left them, not a fresh burst.
 */
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xbd_throttle *all;

const char *xbd_limit_name(unsigned int kind)
{
	return kind < XBD_LIMIT_KINDS ? limit_names[kind] : "?";
}

void xbd_limits_from_opts(const struct xbd_disk_opts *o, struct xbd_limits_conf *c)
{
	unsigned int k;

	memset(c, 0, sizeof(*c));
	for (k = 0; k < XBD_LIMIT_KINDS; k++) {
		c->l[k].avg = __atomic_load_n(&o->limit[k], __ATOMIC_RELAXED);
		c->l[k].max = __atomic_load_n(&o->limit_max[k], __ATOMIC_RELAXED);
		c->l[k].max_length = __atomic_load_n(&o->limit_max_length[k], __ATOMIC_RELAXED);
	}
	c->iops_size = __atomic_load_n(&o->iops_size, __ATOMIC_RELAXED);
}

bool xbd_limits_any(const struct xbd_limits_conf *c)
{
	for (unsigned int k = 0; k < XBD_LIMIT_KINDS; k++)
		if (c->l[k].avg)
			return true;
	return false;
}

int xbd_limits_check(const struct xbd_disk_opts *o, char *err, size_t errlen)
{
	for (unsigned int k = 0; k < XBD_LIMIT_KINDS; k++) {
		const char *n = limit_names[k];

		if (o->limit_max[k] && !o->limit[k]) {
			snprintf(err, errlen, "%s-max = %" PRIu64 " needs %s (the rate the burst "
				 "falls back to)", n, o->limit_max[k], n);
			return -EINVAL;
		}
		if (o->limit_max[k] && o->limit_max[k] < o->limit[k]) {
			snprintf(err, errlen, "%s-max = %" PRIu64 " is below %s = %" PRIu64
				 ": a burst rate is at least the limit", n, o->limit_max[k], n,
				 o->limit[k]);
			return -EINVAL;
		}
	}
	return 0;
}

/*
 * The buckets of conf: a tenth of a second of the limit, or with a burst
 * max x length and the burst's own bucket (a tenth of a second of it).
 */
static void set_conf(struct xbd_throttle *t, const struct xbd_limits_conf *c)
{
	bool any = false;

	t->conf = *c;
	for (unsigned int k = 0; k < XBD_LIMIT_KINDS; k++) {
		const struct xbd_limit *l = &c->l[k];
		struct bucket *b = &t->b[k], *bb = &t->burst[k];

		b->rate = (double)l->avg;
		bb->rate = l->max && l->avg ? (double)l->max : 0;
		b->size = bb->rate ? bb->rate * (l->max_length ? l->max_length : 1) : b->rate / 10;
		bb->size = bb->rate / 10;
		/* A bucket shrunk below its level: what it holds beyond is forgiven. */
		if (b->level > b->size)
			b->level = b->size;
		if (bb->level > bb->size)
			bb->level = bb->size;
		any |= l->avg != 0;
	}
	__atomic_store_n(&t->active, any, __ATOMIC_RELAXED);
}

static struct xbd_throttle *throttle_new(uint32_t domid, uint32_t devid, const char *group,
					 const struct xbd_limits_conf *c)
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

static void conf_text(const struct xbd_limits_conf *c, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned int k = 0; k < XBD_LIMIT_KINDS && n < len; k++)
		if (c->l[k].avg)
			n += snprintf(buf + n, len - n, "%s%s=%" PRIu64, n ? " " : "",
				      limit_names[k], c->l[k].avg);
	if (!n)
		snprintf(buf, len, "none");
}

struct xbd_throttle *xbd_throttle_get(uint32_t domid, uint32_t devid, const char *group,
				      const struct xbd_limits_conf *c, const char *who)
{
	struct xbd_throttle *t;

	if (!group)
		group = "";
	pthread_mutex_lock(&all_lock);
	for (t = all; t; t = t->next)
		if (t->domid == domid && !strcmp(t->group, group) && (group[0] || t->devid == devid))
			break;
	if (t && !group[0]) {
		/* Its own, kept from its last connection: its limits as it connects now. */
		t->refs++;
		xbd_throttle_set(t, c);
	} else if (t) {
		t->refs++;
		pthread_mutex_lock(&t->lock);
		if (t->refs > 1 && memcmp(&t->conf, c, sizeof(*c))) {
			char had[200], has[200];

			conf_text(&t->conf, had, sizeof(had));
			conf_text(c, has, sizeof(has));
			xbd_log(XBD_LOG_WARNING, "%s: throttle group '%s' of domain %u takes this "
				"disk's limits (%s) in place of its others' (%s)", who, group,
				domid, has, had);
		}
		set_conf(t, c);
		pthread_mutex_unlock(&t->lock);
	} else if ((t = throttle_new(domid, devid, group, c))) {
		t->refs = 1;
		t->next = all;
		all = t;
	}
	pthread_mutex_unlock(&all_lock);
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
	for (unsigned int k = 0; k < XBD_LIMIT_KINDS; k++) {
		st->level[k] = t->b[k].level;
		st->burst[k] = t->burst[k].level;
	}
	st->at_ns = t->last_ns;
	pthread_mutex_unlock(&t->lock);
}

/* A level as a state says it, if it is one a bucket of this size can hold. */
static void load_level(struct bucket *b, double v)
{
	if (isfinite(v) && v > 0)
		b->level = v < b->size ? v : b->size;
}

void xbd_throttle_load(struct xbd_throttle *t, const struct xbd_throttle_state *st)
{
	if (!st->at_ns)
		return;
	pthread_mutex_lock(&t->lock);
	for (unsigned int k = 0; k < XBD_LIMIT_KINDS; k++) {
		load_level(&t->b[k], st->level[k]);
		load_level(&t->burst[k], st->burst[k]);
	}
	/* The levels drain from then on (a time ahead of ours only delays that). */
	if (st->at_ns > t->last_ns)
		t->last_ns = st->at_ns;
	pthread_mutex_unlock(&t->lock);
}

void xbd_throttle_set(struct xbd_throttle *t, const struct xbd_limits_conf *c)
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
static void request_cost(const struct xbd_limits_conf *c, enum xbd_throttle_op op,
			 uint64_t bytes, double cost[XBD_LIMIT_KINDS])
{
	double ops = 1;

	if (c->iops_size && bytes > c->iops_size)
		ops = (double)bytes / (double)c->iops_size;
	memset(cost, 0, sizeof(double) * XBD_LIMIT_KINDS);
	cost[XBD_LIMIT_IOPS_TOTAL] = ops;
	cost[op == XBD_THR_READ ? XBD_LIMIT_IOPS_READ : XBD_LIMIT_IOPS_WRITE] = ops;
	if (op != XBD_THR_OTHER_WRITE) {
		cost[XBD_LIMIT_BPS_TOTAL] = (double)bytes;
		cost[op == XBD_THR_READ ? XBD_LIMIT_BPS_READ : XBD_LIMIT_BPS_WRITE] = (double)bytes;
	}
}

/* Seconds until the bucket has room for cost (all of it, or, if larger, until it is empty). */
static double bucket_wait(const struct bucket *b, double cost)
{
	double room = b->size > cost ? b->size - cost : 0;

	if (!b->rate || b->level <= room)
		return 0;
	return (b->level - room) / b->rate;
}

bool xbd_throttle_take(struct xbd_throttle *t, enum xbd_throttle_op op, uint64_t bytes,
		       uint64_t now_ns, uint64_t *due_ns)
{
	double cost[XBD_LIMIT_KINDS], wait = 0, dt;
	unsigned int k;

	pthread_mutex_lock(&t->lock);
	/* Ring threads read the clock at different moments: time never runs back. */
	dt = now_ns > t->last_ns ? (double)(now_ns - t->last_ns) / 1e9 : 0;
	if (now_ns > t->last_ns)
		t->last_ns = now_ns;
	request_cost(&t->conf, op, bytes, cost);
	for (k = 0; k < XBD_LIMIT_KINDS; k++) {
		struct bucket *b = &t->b[k], *bb = &t->burst[k];
		double w;

		b->level = b->level > b->rate * dt ? b->level - b->rate * dt : 0;
		bb->level = bb->level > bb->rate * dt ? bb->level - bb->rate * dt : 0;
		if (!cost[k])
			continue;
		w = bucket_wait(b, cost[k]);
		if (w > wait)
			wait = w;
		w = bucket_wait(bb, cost[k]);
		if (w > wait)
			wait = w;
	}
	if (wait == 0) {
		for (k = 0; k < XBD_LIMIT_KINDS; k++) {
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

void xbd_dev_throttle_update(struct xbd_dev *dev)
{
	struct xbd_limits_conf c;
	struct xbd_throttle *t;

	xbd_limits_from_opts(&dev->o, &c);
	/* Its group changed (a new configuration at its next connect): it leaves the old one. */
	if (dev->thr && strcmp(dev->thr->group, dev->o.throttle_group)) {
		xbd_throttle_put(dev->thr, false);
		dev->thr = NULL;
	}
	if (dev->thr) {
		xbd_throttle_set(dev->thr, &c);
		return;
	}
	if (!xbd_limits_any(&c) && !dev->o.throttle_group[0])
		return;
	t = xbd_throttle_get(dev->domid, dev->devid, dev->o.throttle_group, &c, dev->name);
	if (!t) {
		xbd_log(XBD_LOG_ERR, "%s: no memory for its I/O limits: served without them",
			dev->name);
		return;
	}
	/* New here, and the disk's last connection left a state: from there. */
	if (t->refs == 1)
		xbd_throttle_load(t, &dev->thr_state);
	/* The ring threads load it with acquire: they see it whole. */
	__atomic_store_n(&dev->thr, t, __ATOMIC_RELEASE);
}

void xbd_dev_throttle_release(struct xbd_dev *dev, bool keep)
{
	xbd_throttle_put(dev->thr, keep);
	dev->thr = NULL;
}
