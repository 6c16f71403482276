/*
 * device.c: what the files of a device's life share (lifecycle.h): the
 * toolstack's keys read, our state and the blkif.h feature keys written,
 * the device's life changed through its one setter, and the rate limit
 * on the edges that cost writes or threads.  It calls none of them.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/control/lifecycle.h"
#include "common/clock.h"

/*
 * Rate limit on the edges that cost writes or threads, per device and per
 * kind of edge: a burst of EDGE_BURST, then one per EDGE_INTERVAL_MS.  A
 * guest that flips its state makes us map rings and start threads, or
 * write about 15 feature keys, each time; beyond the burst it waits (its
 * disk connects late, nobody else notices).
 */
#define EDGE_BURST 4
#define EDGE_INTERVAL_MS 250

int dev_bkey_str(struct xbd_dev *dev, const char *k, char **out)
{
	char p[XBD_XS_PATH_MAX];

	if (xbd_xs_join(p, sizeof(p), dev->bpath, k))
		return -ENAMETOOLONG;
	return xbd_xs_read_str(dev->bk->xs, XBT_NULL, p, out);
}

bool dev_bkey_bool(struct xbd_dev *dev, const char *k, bool dflt)
{
	char p[XBD_XS_PATH_MAX];
	bool v;

	if (xbd_xs_join(p, sizeof(p), dev->bpath, k) ||
	    xbd_xs_read_bool_default(dev->bk->xs, XBT_NULL, p, dflt, &v))
		return dflt;
	return v;
}

void dev_read_domain(struct xbd_dev *dev)
{
	/* xl names the receiving end of a migration NAME--incoming until it has it. */
	static const char incoming[] = "--incoming";
	char p[XBD_XS_PATH_MAX], *v = NULL;
	size_t n;

	dev->dom_name[0] = dev->dom_vm[0] = '\0';
	dev->incoming = false;
	if (!xbd_xs_pathf(p, sizeof(p), "/local/domain/%u/name", dev->disk.domid) &&
	    !xbd_xs_read_str(dev->bk->xs, XBT_NULL, p, &v)) {
		n = strlen(v);
		dev->incoming = n > strlen(incoming) && !strcmp(v + n - strlen(incoming), incoming);
		snprintf(dev->dom_name, sizeof(dev->dom_name), "%s", v);
		free(v);
		v = NULL;
	}
	/* The journal's DOMAIN_NAME field of its lines (log.h). */
	xbd_log_domain_name(dev->disk.domid, dev->dom_name);
	if (!xbd_xs_pathf(p, sizeof(p), "/local/domain/%u/vm", dev->disk.domid) &&
	    !xbd_xs_read_str(dev->bk->xs, XBT_NULL, p, &v)) {
		/* A vm node that does not fit is no VM's we can compare. */
		if (strlen(v) < sizeof(dev->dom_vm))
			snprintf(dev->dom_vm, sizeof(dev->dom_vm), "%s", v);
		free(v);
	}
}

/* Write our state (unless the toolstack has removed the directory meanwhile). */
void dev_write_state(struct xbd_dev *dev, enum xenbus_state st)
{
	int err = xbd_xenbus_switch_state(dev->bk->xs, dev->bpath, st);

	if (err && err != -ENOENT)
		DLOG(dev, XBD_LOG_WARNING, "cannot write state %d: %s", (int)st, strerror(-err));
}

void dev_set_state(struct xbd_dev *dev, enum xenbus_state st)
{
	if (dev->state != st)
		DLOG(dev, XBD_LOG_VERBOSE, "state %s -> %s%s", xbd_xenbus_state_name(dev->state),
		     xbd_xenbus_state_name(st), dev->nr_drain ? " (once the rings drained)" : "");
	dev->state = st;
	/*
	 * While old rings still drain, Closed or InitWait would tell the
	 * frontend its ring pages are free again: the write waits for the
	 * drain (dev_drain_done).
	 */
	if (dev->nr_drain) {
		dev->deferred_state = st;
		return;
	}
	dev_write_state(dev, st);
}

/* ---- a device's life ---- */

/* The lives each life may be entered from (device.h says what each is). */
#define DL(life) (1u << (life))
static const uint8_t dev_entered_from[] = {
	[XBD_DEV_NEW] = 0,                                 /* only made so (dev_new) */
	[XBD_DEV_LIVE] = DL(XBD_DEV_NEW) | DL(XBD_DEV_CONNECTED), /* adopted; disconnected */
	[XBD_DEV_CONNECTED] = DL(XBD_DEV_LIVE),            /* its rings started */
	[XBD_DEV_DEAD] = DL(XBD_DEV_LIVE),                 /* its domain died (disconnected first) */
	[XBD_DEV_REMOVED] = DL(XBD_DEV_NEW) | DL(XBD_DEV_LIVE) | DL(XBD_DEV_DEAD),
};

static const char *const dev_life_names[] = {
	[XBD_DEV_NEW] = "NEW", [XBD_DEV_LIVE] = "LIVE", [XBD_DEV_CONNECTED] = "CONNECTED",
	[XBD_DEV_DEAD] = "DEAD", [XBD_DEV_REMOVED] = "REMOVED",
};

void dev_set_life(struct xbd_dev *dev, enum xbd_dev_life to)
{
	if (!(dev_entered_from[to] & DL(dev->life))) {
		static bool said;

		if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
			xbd_log(XBD_LOG_ERR, "%s: its life went from %s to %s (a bug in xbd-back)",
				dev->disk.name, dev_life_names[dev->life], dev_life_names[to]);
#ifdef XBD_TEST_HOOKS
		abort();
#endif
	}
	dev->life = to;
}

/* ---- the rate limit on edges ---- */

/*
 * May the device take an edge of this kind now?  If not, a retry is
 * scheduled for when it may, and the first refusal since the guest was
 * last quiet says so in the log.
 */
bool dev_edge_allowed(struct xbd_dev *dev, struct xbd_edge_limit *l, const char *what)
{
	uint64_t now = xbd_mono_ms(), tat = l->tat_ms;
	const uint64_t span = (uint64_t)EDGE_BURST * EDGE_INTERVAL_MS;

	if (tat <= now) {
		tat = now;
		l->engaged = false; /* the bucket is full again */
	}
	if (tat > now + span - EDGE_INTERVAL_MS) {
		uint64_t at = tat - span + EDGE_INTERVAL_MS;

		if (!dev->retry_ms || at < dev->retry_ms)
			dev->retry_ms = at;
		if (!l->engaged) {
			l->engaged = true;
			DLOG(dev, XBD_LOG_WARNING, "%s too often: at most once every %u ms from now on",
			     what, EDGE_INTERVAL_MS);
		}
		return false;
	}
	l->tat_ms = tat + EDGE_INTERVAL_MS;
	return true;
}

/* Give back the edge dev_edge_allowed() just let through (it did not happen after all). */
void dev_edge_refund(struct xbd_edge_limit *l)
{
	/* dev_edge_allowed() left tat_ms at least EDGE_INTERVAL_MS past its now. */
	l->tat_ms -= EDGE_INTERVAL_MS;
}

/* ---- advertising (blkif.h keys; booleans always written as 0 or 1) ---- */

static int wr(struct xbd_xs *xs, xs_transaction_t t, const char *dir, const char *k,
	      uint64_t v)
{
	char p[XBD_XS_PATH_MAX];

	if (xbd_xs_join(p, sizeof(p), dir, k))
		return -ENAMETOOLONG;
	return xbd_xs_write_uint(xs, t, p, v);
}

static int advertise_txn(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	struct xbd_dev *dev = arg;
	const char *d = dev->bpath;
	char p[XBD_XS_PATH_MAX];
	int err = 0;

	if (!xbd_xs_exists(xs, t, d))
		return -ENOENT;
	err |= wr(xs, t, d, "max-ring-page-order", dev->disk.o.max_ring_order);
	err |= wr(xs, t, d, "max-ring-pages", 1u << dev->disk.o.max_ring_order); /* deprecated spelling */
	err |= wr(xs, t, d, "multi-queue-max-queues", dev->disk.o.max_queues);
	/* With grant copy a persistent grant would only add a copy in the guest. */
	err |= wr(xs, t, d, "feature-persistent",
		  dev->disk.o.persistent && dev->disk.o.grants != XBD_GRANTS_COPY);
	/* Barrier mode: no indirect (Linux blkfront BUG_ONs on big FUA writes). */
	if (!dev->disk.o.barrier && dev->disk.o.max_indirect_segs) {
		err |= wr(xs, t, d, "feature-max-indirect-segments", dev->disk.o.max_indirect_segs);
	} else if (!xbd_xs_join(p, sizeof(p), d, "feature-max-indirect-segments")) {
		err |= xbd_xs_rm(xs, t, p);
	}
	err |= wr(xs, t, d, "feature-flush-cache", !dev->disk.o.barrier);
	err |= wr(xs, t, d, "feature-barrier", dev->disk.o.barrier);
	if (dev->disk.store) {
		unsigned int info = (dev->cdrom ? VDISK_CDROM : 0) |
				    (dev->removable ? VDISK_REMOVABLE : 0) |
				    (dev->readonly ? VDISK_READONLY : 0);
		unsigned int gran = dev->caps.discard_granularity;

		if (gran < dev->caps.logical_block)
			gran = dev->caps.logical_block;
		err |= wr(xs, t, d, "feature-discard", dev->disk.lim.discard);
		if (dev->disk.lim.discard) {
			err |= wr(xs, t, d, "discard-granularity", gran);
			err |= wr(xs, t, d, "discard-alignment", dev->caps.discard_alignment);
			err |= wr(xs, t, d, "discard-secure", dev->disk.lim.discard_secure);
		}
		/* sectors is in 512-byte units whatever sector-size says. */
		err |= wr(xs, t, d, "sectors", dev->disk.lim.nr_sectors);
		err |= wr(xs, t, d, "info", info);
		err |= wr(xs, t, d, "sector-size", dev->caps.logical_block);
		err |= wr(xs, t, d, "physical-sector-size", dev->caps.physical_block);
	} else {
		err |= wr(xs, t, d, "feature-discard", 0);
	}
	return err ? -EIO : 0;
}

int dev_advertise(struct xbd_dev *dev)
{
	int err = xbd_xs_transact(dev->bk->xs, advertise_txn, dev);

	if (err && err != -ENOENT)
		DLOG(dev, XBD_LOG_WARNING, "cannot write the backend features: %s", strerror(-err));
	return err;
}
