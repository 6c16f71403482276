/*
 * xenbus.c: xbd-back's control plane, in the main thread.  Finds devices
 * under backend/<type>/ for the types it serves, opens their storage,
 * advertises the blkif.h features, follows the frontend through the
 * XenbusState machine (tolerating skipped states, resets and reconnects),
 * and tears a device down on frontend close, toolstack removal (state=5,
 * online=0), a corrupt ring, or the death of the frontend's domain.
 *
 * The backend directory is written by the toolstack and trusted; every
 * key under the frontend directory is the guest's and is range-checked.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blkback/device.h"

/*
 * Reconnect rate limit per device: a burst of CONN_BURST connects, then
 * one per CONN_INTERVAL_MS.  A guest that flips its state between
 * Initialising and Connected makes us map rings and start threads each
 * time; beyond the burst it waits (its disk connects late, nobody else
 * notices).
 */
#define CONN_BURST 4
#define CONN_INTERVAL_MS 250

#define DLOG(dev, lvl, fmt, ...) xbd_log(lvl, "%s: " fmt, (dev)->name, ##__VA_ARGS__)

static void dev_frontend_changed(struct xbd_xs *xs, const char *path, void *arg);
static void handle_device(struct xbd_back *bk, unsigned int ti, uint32_t domid, uint32_t devid);

static int key(char *buf, const char *dir, const char *k)
{
	return xbd_xs_pathf(buf, XBD_XS_PATH_MAX, "%s/%s", dir, k);
}

static int read_bkey_str(struct xbd_dev *dev, const char *k, char **out)
{
	char p[XBD_XS_PATH_MAX];

	if (key(p, dev->bpath, k))
		return -ENAMETOOLONG;
	return xbd_xs_read_str(dev->bk->xs, XBT_NULL, p, out);
}

static bool read_bkey_bool(struct xbd_dev *dev, const char *k, bool dflt)
{
	char p[XBD_XS_PATH_MAX];
	bool v;

	if (key(p, dev->bpath, k) || xbd_xs_read_bool(dev->bk->xs, XBT_NULL, p, &v))
		return dflt;
	return v;
}

/* Write our state, unless the toolstack has removed the directory meanwhile. */
struct state_arg {
	struct xbd_dev *dev;
	enum xenbus_state st;
};

static int state_txn(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	struct state_arg *a = arg;
	char p[XBD_XS_PATH_MAX];

	if (!xbd_xs_exists(xs, t, a->dev->bpath))
		return -ENOENT;
	if (key(p, a->dev->bpath, "state"))
		return -ENAMETOOLONG;
	return xbd_xs_printf(xs, t, p, "%d", (int)a->st);
}

static void write_state(struct xbd_dev *dev, enum xenbus_state st)
{
	struct state_arg a = { dev, st };
	int err;

	err = xbd_xs_transact(dev->bk->xs, state_txn, &a);
	if (err && err != -ENOENT)
		DLOG(dev, XBD_LOG_INFO, "cannot write state %d: %s", (int)st, strerror(-err));
}

static void set_state(struct xbd_dev *dev, enum xenbus_state st)
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
	write_state(dev, st);
}

/* ---- storage ---- */

static void update_limits(struct xbd_dev *dev, uint64_t size)
{
	struct xbd_limits *l = &dev->lim;

	__atomic_store_n(&l->nr_sectors, size >> XBD_SECTOR_SHIFT, __ATOMIC_RELAXED);
	l->sector_size = dev->caps.logical_block;
	l->max_indirect_segs = dev->o.barrier ? 0 : dev->o.max_indirect_segs;
	l->readonly = dev->readonly;
	l->flush = !dev->o.barrier;
	l->barrier = dev->o.barrier;
	l->discard = dev->caps.discard && dev->discard_enable && !dev->readonly;
	l->discard_secure = l->discard && dev->caps.discard_secure;
}

static int open_storage(struct xbd_dev *dev)
{
	char *mode = NULL, *dtype = NULL;
	const char *target;
	uint64_t size = 0;
	int err;

	free(dev->params);
	dev->params = NULL;
	err = read_bkey_str(dev, "params", &dev->params);
	if (err || !dev->params[0])
		return err ? err : -ENOENT;
	/* The daemon's defaults, then any --disk settings for this params. */
	xbd_disk_opts_for(&dev->bk->opts, dev->params, &dev->o);
	if (!read_bkey_str(dev, "mode", &mode))
		dev->readonly = mode[0] == 'r' && (mode[1] == '\0' || mode[1] == 'o');
	free(mode);
	dev->cdrom = false;
	if (!read_bkey_str(dev, "device-type", &dtype))
		dev->cdrom = !strcmp(dtype, "cdrom");
	free(dtype);
	dev->discard_enable = read_bkey_bool(dev, "discard-enable", true);
	dev->removable = read_bkey_bool(dev, "removable", false);

	dev->eng = xbd_engine_for(dev->params, &target);
	if (!dev->eng) {
		DLOG(dev, XBD_LOG_INFO, "params '%s' names no storage engine", dev->params);
		return -EINVAL;
	}
	err = dev->eng->open(target, dev->readonly, &dev->o, &dev->store);
	if (err) {
		DLOG(dev, XBD_LOG_INFO, "cannot open '%s': %s", target, strerror(-err));
		dev->store = NULL;
		return err;
	}
	dev->eng->capabilities(dev->store, &dev->caps);
	err = dev->eng->size(dev->store, &size);
	if (err) {
		DLOG(dev, XBD_LOG_INFO, "cannot read the size of '%s': %s", target, strerror(-err));
		dev->eng->close(dev->store);
		dev->store = NULL;
		return err;
	}
	update_limits(dev, size);
	DLOG(dev, XBD_LOG_INFO, "opened %s (%s engine, %" PRIu64 " sectors, %s, cache %s%s%s)",
	     target, dev->eng->name, dev->lim.nr_sectors, dev->readonly ? "read-only" : "read-write",
	     xbd_cache_mode_name(dev->o.cache), dev->o.barrier ? ", barrier mode" : "",
	     dev->o.grants == XBD_GRANTS_COPY ? ", grant copy" : "");
	return 0;
}

static void close_storage(struct xbd_dev *dev)
{
	if (dev->store)
		dev->eng->close(dev->store);
	dev->store = NULL;
}

/* ---- advertising (blkif.h keys; booleans always written as 0 or 1) ---- */

static int wr(struct xbd_xs *xs, xs_transaction_t t, const char *dir, const char *k,
	      uint64_t v)
{
	char p[XBD_XS_PATH_MAX];

	if (key(p, dir, k))
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
	err |= wr(xs, t, d, "max-ring-page-order", dev->o.max_ring_order);
	err |= wr(xs, t, d, "max-ring-pages", 1u << dev->o.max_ring_order); /* deprecated spelling */
	err |= wr(xs, t, d, "multi-queue-max-queues", dev->o.max_queues);
	/* With grant copy a persistent grant would only add a copy in the guest. */
	err |= wr(xs, t, d, "feature-persistent",
		  dev->o.persistent && dev->o.grants != XBD_GRANTS_COPY);
	/* Barrier mode: no indirect (Linux blkfront BUG_ONs on big FUA writes). */
	if (!dev->o.barrier && dev->o.max_indirect_segs) {
		err |= wr(xs, t, d, "feature-max-indirect-segments", dev->o.max_indirect_segs);
	} else if (!key(p, d, "feature-max-indirect-segments")) {
		int e = xbd_xs_rm(xs, t, p);

		if (e && e != -ENOENT)
			err |= e;
	}
	err |= wr(xs, t, d, "feature-flush-cache", !dev->o.barrier);
	err |= wr(xs, t, d, "feature-barrier", dev->o.barrier);
	if (dev->store) {
		unsigned int info = (dev->cdrom ? VDISK_CDROM : 0) |
				    (dev->removable ? VDISK_REMOVABLE : 0) |
				    (dev->readonly ? VDISK_READONLY : 0);
		unsigned int gran = dev->caps.discard_granularity;

		if (gran < dev->caps.logical_block)
			gran = dev->caps.logical_block;
		err |= wr(xs, t, d, "feature-discard", dev->lim.discard);
		if (dev->lim.discard) {
			err |= wr(xs, t, d, "discard-granularity", gran);
			err |= wr(xs, t, d, "discard-alignment", dev->caps.discard_alignment);
			err |= wr(xs, t, d, "discard-secure", dev->lim.discard_secure);
		}
		/* sectors is in 512-byte units whatever sector-size says. */
		err |= wr(xs, t, d, "sectors", dev->lim.nr_sectors);
		err |= wr(xs, t, d, "info", info);
		err |= wr(xs, t, d, "sector-size", dev->caps.logical_block);
		err |= wr(xs, t, d, "physical-sector-size", dev->caps.physical_block);
	} else {
		err |= wr(xs, t, d, "feature-discard", 0);
	}
	return err ? -EIO : 0;
}

static int advertise(struct xbd_dev *dev)
{
	int err = xbd_xs_transact(dev->bk->xs, advertise_txn, dev);

	if (err && err != -ENOENT)
		DLOG(dev, XBD_LOG_INFO, "cannot write the backend features: %s", strerror(-err));
	return err;
}

/* ---- connecting to the frontend ---- */

static int read_fe_uint(struct xbd_dev *dev, const char *dir, const char *k, uint64_t min,
			uint64_t max, uint64_t *out)
{
	char p[XBD_XS_PATH_MAX];

	if (key(p, dir, k))
		return -ENAMETOOLONG;
	return xbd_xs_read_uint(dev->bk->xs, XBT_NULL, p, min, max, out);
}

/*
 * ring-page-order + ring-refN, the deprecated num-ring-pages, or ring-ref.
 * The page count is per device (Linux blkfront writes ring-page-order in
 * the top directory even with several queues); a queue directory's own
 * value is accepted too.  The references are per queue (dir).
 */
static int read_ring(struct xbd_dev *dev, const char *dir, struct xbd_bring *br)
{
	uint64_t v, max_pages = 1u << dev->o.max_ring_order;
	unsigned int i, nr = 1;
	bool numbered = false;
	const char *odir = dev->fpath;
	char k[24];
	int err;

	err = read_fe_uint(dev, odir, "ring-page-order", 0, dev->o.max_ring_order, &v);
	if (err == -ENOENT && strcmp(dir, odir)) {
		odir = dir;
		err = read_fe_uint(dev, odir, "ring-page-order", 0, dev->o.max_ring_order, &v);
	}
	if (!err) {
		nr = 1u << v;
		numbered = true;
	} else if (err == -ENOENT) {
		odir = dev->fpath;
		err = read_fe_uint(dev, odir, "num-ring-pages", 1, max_pages, &v);
		if (err == -ENOENT && strcmp(dir, odir)) {
			odir = dir;
			err = read_fe_uint(dev, odir, "num-ring-pages", 1, max_pages, &v);
		}
		if (!err) {
			if (v & (v - 1)) {
				DLOG(dev, XBD_LOG_INFO, "num-ring-pages %" PRIu64 " is not a power of two", v);
				return -EINVAL;
			}
			nr = v;
			numbered = true;
		} else if (err != -ENOENT) {
			DLOG(dev, XBD_LOG_INFO, "bad num-ring-pages (allowed 1..%" PRIu64 "): %s",
			     max_pages, strerror(-err));
			return err;
		}
	} else {
		DLOG(dev, XBD_LOG_INFO, "bad ring-page-order (allowed 0..%u): %s",
		     dev->o.max_ring_order, strerror(-err));
		return err;
	}
	br->nr_pages = nr;
	for (i = 0; i < nr; i++) {
		if (numbered)
			snprintf(k, sizeof(k), "ring-ref%u", i);
		else
			snprintf(k, sizeof(k), "ring-ref");
		err = read_fe_uint(dev, dir, k, 0, UINT32_MAX, &v);
		if (err == -ENOENT && nr == 1 && numbered)
			err = read_fe_uint(dev, dir, "ring-ref", 0, UINT32_MAX, &v);
		if (err) {
			DLOG(dev, XBD_LOG_INFO, "cannot read %s/%s: %s", dir, k, strerror(-err));
			return err;
		}
		br->refs[i] = v;
	}
	err = read_fe_uint(dev, dir, "event-channel", 0, UINT32_MAX - 1, &v);
	if (err) {
		DLOG(dev, XBD_LOG_INFO, "cannot read %s/event-channel: %s", dir, strerror(-err));
		return err;
	}
	br->remote_port = v;
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool drained(const struct xbd_dev *dev)
{
	unsigned int i;

	for (i = 0; i < dev->nr_drain; i++)
		if (!xbd_ring_exited(&dev->drain[i]))
			return false;
	return true;
}

/* Join the stopped threads (at once if drained) and release their rings. */
static void drain_release(struct xbd_dev *dev)
{
	unsigned int i;

	for (i = 0; i < dev->nr_drain; i++) {
		xbd_ring_stop(&dev->drain[i]);
		/* The thread is gone: its counters are stable, keep them for xbdctl. */
		xbd_stats_sum(&dev->past, &dev->drain[i].stats);
	}
	free(dev->drain);
	dev->drain = NULL;
	dev->nr_drain = 0;
}

static void dev_free(struct xbd_dev *dev)
{
	close_storage(dev);
	xbd_ratelimit_destroy(&dev->rl);
	free(dev->params);
	free(dev);
}

/*
 * Stop the rings without waiting for the storage: a ring whose I/O hangs
 * (a frozen filesystem, a dead NFS server) must not hold up the control
 * plane, which serves every other guest and @releaseDomain.  The threads
 * finish their in-flight requests on their own and post wake_fd; the
 * main loop then releases them (xbd_back_handle_failed_rings).  The
 * common case, nothing stuck, is over in well under the short wait here,
 * and then everything is released before this returns.
 */
static void dev_disconnect(struct xbd_dev *dev)
{
	unsigned int i;
	uint64_t t0;

	if (!dev->rings)
		return;
	for (i = 0; i < dev->nr_rings; i++)
		xbd_ring_request_stop(&dev->rings[i]);
	/* A device connects only when drained (dev_frontend_changed): drain is empty. */
	dev->drain = dev->rings;
	dev->nr_drain = dev->nr_rings;
	dev->deferred_state = -1;
	dev->rings = NULL;
	dev->nr_rings = 0;
	if (dev->connected)
		DLOG(dev, XBD_LOG_INFO, "disconnected");
	dev->connected = false;
	t0 = now_ms();
	while (!drained(dev) && now_ms() - t0 < 50) {
		struct timespec ts = { 0, 500000 };

		nanosleep(&ts, NULL);
	}
	if (drained(dev)) {
		drain_release(dev);
	} else {
		bool io = false;

		for (i = 0; i < dev->nr_drain; i++)
			io |= !xbd_ring_exited(&dev->drain[i]) && !xbd_ring_retiring(&dev->drain[i]);
		if (io)
			DLOG(dev, XBD_LOG_INFO,
			     "I/O still in flight: releasing the rings once it completes");
		else
			DLOG(dev, XBD_LOG_VERBOSE, "disconnected rings wait to unmap their "
			     "persistent grants (a grace period after the last I/O)");
	}
}

/* The rings of a draining device have all stopped: finish what waited for them. */
static void dev_drain_done(struct xbd_dev *dev)
{
	int st = dev->deferred_state;

	drain_release(dev);
	dev->deferred_state = -1;
	DLOG(dev, XBD_LOG_INFO, "rings drained and released");
	if (dev->dead)
		close_storage(dev);
	if (st >= 0)
		write_state(dev, st);
	/* A connect the frontend asked for meanwhile. */
	if (!dev->dead && dev->fe_watch)
		dev_frontend_changed(dev->bk->xs, NULL, dev);
}

static int dev_connect(struct xbd_dev *dev)
{
	struct xbd_xs *xs = dev->bk->xs;
	char p[XBD_XS_PATH_MAX], *proto = NULL;
	uint64_t nq = 1;
	unsigned int i;
	bool fe_persistent = false;
	int err;

	if (!dev->store && open_storage(dev))
		return -ENODEV;
	if (key(p, dev->fpath, "protocol"))
		return -ENAMETOOLONG;
	err = xbd_xs_read_str(xs, XBT_NULL, p, &proto);
	if (err == -ENOENT) {
		dev->abi = XBD_ABI_NATIVE;
	} else if (err || xbd_abi_from_protocol(proto, &dev->abi)) {
		DLOG(dev, XBD_LOG_INFO, "unknown protocol '%s'", proto ? proto : "?");
		free(proto);
		return -EINVAL;
	}
	free(proto);
	if (!key(p, dev->fpath, "feature-persistent") &&
	    xbd_xs_read_bool(xs, XBT_NULL, p, &fe_persistent))
		fe_persistent = false;
	dev->persistent = dev->o.persistent && fe_persistent && dev->o.grants != XBD_GRANTS_COPY;
	/*
	 * Without persistent grants every batch would be mapped and unmapped:
	 * auto copies instead, as QEMU's qdisk does.  Mapping per batch also
	 * meets a Linux dom0 bug (see struct bk_retired): the pages must be
	 * unmapped before the response, while direct I/O may still hold them.
	 */
	dev->copy = dev->o.grants == XBD_GRANTS_COPY ||
		    (dev->o.grants == XBD_GRANTS_AUTO && !dev->persistent);
	if (!dev->copy && !dev->persistent &&
	    !strcmp(xbd_platform_name(dev->bk->plat), "xen"))
		DLOG(dev, XBD_LOG_INFO, "grants = map without persistent grants: a Linux dom0 "
		     "may log 'Bad page map' for gntdev pages (grants = auto avoids it)");
	err = read_fe_uint(dev, dev->fpath, "multi-queue-num-queues", 1, dev->o.max_queues, &nq);
	if (err && err != -ENOENT) {
		DLOG(dev, XBD_LOG_INFO, "bad multi-queue-num-queues (allowed 1..%u)",
		     dev->o.max_queues);
		return err;
	}
	if (err == -ENOENT)
		nq = 1;
	dev->rings = calloc(nq, sizeof(*dev->rings));
	if (!dev->rings)
		return -ENOMEM;
	dev->nr_rings = nq;
	/* Every ring is releasable (xbd_ring_stop) before any is read. */
	for (i = 0; i < nq; i++) {
		dev->rings[i].dev = dev;
		dev->rings[i].idx = i;
		dev->rings[i].port = -1;
		dev->rings[i].epfd = dev->rings[i].stop_fd = -1;
	}
	for (i = 0; i < nq; i++) {
		struct xbd_bring *br = &dev->rings[i];
		char qdir[XBD_XS_PATH_MAX];

		if (nq > 1) {
			snprintf(br->name, sizeof(br->name), "%s queue %u", dev->name, i);
			if (xbd_xs_pathf(qdir, sizeof(qdir), "%s/queue-%u", dev->fpath, i)) {
				err = -ENAMETOOLONG;
				goto fail;
			}
		} else {
			snprintf(br->name, sizeof(br->name), "%s", dev->name);
			snprintf(qdir, sizeof(qdir), "%s", dev->fpath);
		}
		err = read_ring(dev, qdir, br);
		if (err)
			goto fail;
	}
	for (i = 0; i < nq; i++) {
		err = xbd_ring_start(&dev->rings[i]);
		if (err) {
			/* Rings not started are released by xbd_ring_stop too. */
			goto fail;
		}
	}
	dev->connected = true;
	err = advertise(dev);
	if (err)
		goto fail;
	set_state(dev, XenbusStateConnected);
	DLOG(dev, XBD_LOG_INFO, "connected: %u queue%s, %u ring page%s, protocol %s, %s grants",
	     dev->nr_rings, dev->nr_rings > 1 ? "s" : "", dev->rings[0].nr_pages,
	     dev->rings[0].nr_pages > 1 ? "s" : "", xbd_abi_protocol(dev->abi),
	     dev->copy ? "copied" : dev->persistent ? "persistent" : "mapped");
	return 0;
fail:
	dev_disconnect(dev);
	return err;
}

/* ---- the state machine ---- */

static void timer_schedule(struct xbd_back *bk, uint64_t due);

/* True if the device may connect now; otherwise a retry is scheduled. */
static bool connect_allowed(struct xbd_dev *dev)
{
	uint64_t now = now_ms(), tat = dev->conn_tat_ms;
	const uint64_t span = (uint64_t)CONN_BURST * CONN_INTERVAL_MS;

	if (tat < now)
		tat = now;
	if (tat > now + span - CONN_INTERVAL_MS) {
		dev->retry_ms = tat - span + CONN_INTERVAL_MS;
		DLOG(dev, XBD_LOG_VERBOSE, "reconnecting too often: connect in %" PRIu64 " ms",
		     dev->retry_ms - now);
		timer_schedule(dev->bk, dev->retry_ms);
		return false;
	}
	dev->conn_tat_ms = tat + CONN_INTERVAL_MS;
	dev->retry_ms = 0;
	return true;
}

/*
 * XBD_CLEAN_STOP in the backend directory says the daemon that stopped
 * had answered and pushed every request it consumed, so the slots from
 * rsp_prod to req_prod still hold requests and a new daemon may resume the
 * live ring.  set: write it; !set: report whether it was there, removing it.
 */
#define XBD_CLEAN_STOP "xbd-clean-stop"
static bool clean_stop_marker(struct xbd_dev *dev, bool set)
{
	char p[XBD_XS_PATH_MAX];
	bool was;

	if (xbd_xs_join(p, sizeof(p), dev->bpath, XBD_CLEAN_STOP))
		return false;
	if (set)
		return xbd_xs_write_str(dev->bk->xs, XBT_NULL, p, "1") == 0;
	was = xbd_xs_exists(dev->bk->xs, XBT_NULL, p);
	if (was)
		xbd_xs_rm(dev->bk->xs, XBT_NULL, p);
	return was;
}

static void connect_or_close(struct xbd_dev *dev)
{
	if (dev_connect(dev)) {
		DLOG(dev, XBD_LOG_INFO, "cannot connect to the frontend, closing");
		set_state(dev, XenbusStateClosing);
	}
}

static void dev_frontend_changed(struct xbd_xs *xs, const char *path, void *arg)
{
	struct xbd_dev *dev = arg;
	enum xenbus_state fs;

	if (dev->dead || dev->state == XenbusStateUnknown)
		return;
	fs = xbd_xenbus_read_state(xs, dev->fpath);
	DLOG(dev, XBD_LOG_DEBUG, "frontend state %s, ours %s", xbd_xenbus_state_name(fs),
	     xbd_xenbus_state_name(dev->state));
	switch (fs) {
	case XenbusStateInitialising:
		/* A frontend that reset: offer the device again. */
		if (dev->state == XenbusStateConnected) {
			dev_disconnect(dev);
			set_state(dev, XenbusStateInitWait);
		} else if ((dev->state == XenbusStateClosed || dev->state == XenbusStateClosing) &&
			   dev->online) {
			/* Closing: it skipped Closed on its way back. */
			dev_disconnect(dev);
			advertise(dev);
			set_state(dev, XenbusStateInitWait);
		}
		break;
	case XenbusStateInitialised:
	case XenbusStateConnected:
		if (dev->state == XenbusStateConnected && dev->connected)
			break;
		if (dev->state == XenbusStateClosing)
			break; /* wait for the frontend to close first */
		/* The old rings first (dev_drain_done calls us again). */
		if (dev->nr_drain)
			break;
		if (!connect_allowed(dev))
			break;
		if (dev->state == XenbusStateClosed) {
			/* It skipped Initialising on its way back. */
			if (!dev->online)
				break;
			set_state(dev, XenbusStateInitWait);
		}
		dev_disconnect(dev);
		connect_or_close(dev);
		break;
	case XenbusStateClosing:
		dev_disconnect(dev);
		if (dev->state != XenbusStateClosed)
			set_state(dev, XenbusStateClosing);
		break;
	case XenbusStateClosed:
	case XenbusStateUnknown: /* the frontend directory is gone */
		dev_disconnect(dev);
		if (dev->state != XenbusStateClosed)
			set_state(dev, XenbusStateClosed);
		break;
	default:
		break;
	}
}

static void dev_destroy(struct xbd_dev *dev)
{
	struct xbd_dev **pp;

	dev_disconnect(dev);
	if (dev->fe_watch)
		xbd_xs_unwatch(dev->bk->xs, dev->fe_watch);
	dev->fe_watch = NULL;
	for (pp = &dev->bk->devs; *pp; pp = &(*pp)->next) {
		if (*pp == dev) {
			*pp = dev->next;
			break;
		}
	}
	DLOG(dev, XBD_LOG_VERBOSE, "removed");
	if (dev->nr_drain) {
		/* Its threads still use the storage and the struct: free it once drained. */
		dev->destroyed = true;
		dev->next = dev->bk->zombies;
		dev->bk->zombies = dev;
		return;
	}
	dev_free(dev);
}

/* The toolstack has removed the device or the domain: release everything. */
static void dev_kill(struct xbd_dev *dev, const char *why)
{
	DLOG(dev, XBD_LOG_INFO, "%s, tearing down", why);
	dev_disconnect(dev);
	if (dev->fe_watch)
		xbd_xs_unwatch(dev->bk->xs, dev->fe_watch);
	dev->fe_watch = NULL;
	if (!dev->nr_drain)
		close_storage(dev); /* else once drained (dev_drain_done) */
	dev->dead = true;
	set_state(dev, XenbusStateClosed);
}

static void check_resize(struct xbd_dev *dev)
{
	uint64_t size, old = __atomic_load_n(&dev->lim.nr_sectors, __ATOMIC_RELAXED);
	char p[XBD_XS_PATH_MAX];

	if (!dev->store || dev->eng->size(dev->store, &size))
		return;
	if (size >> XBD_SECTOR_SHIFT == old)
		return;
	__atomic_store_n(&dev->lim.nr_sectors, size >> XBD_SECTOR_SHIFT, __ATOMIC_RELAXED);
	DLOG(dev, XBD_LOG_INFO, "resized: %" PRIu64 " -> %" PRIu64 " sectors", old,
	     size >> XBD_SECTOR_SHIFT);
	if (key(p, dev->bpath, "sectors"))
		return;
	xbd_xs_write_uint(dev->bk->xs, XBT_NULL, p, size >> XBD_SECTOR_SHIFT);
	/* Rewriting state fires the frontend's watch (what Linux blkback does). */
	if (dev->state == XenbusStateConnected)
		set_state(dev, XenbusStateConnected);
}

static void dev_backend_changed(struct xbd_dev *dev)
{
	struct xbd_xs *xs = dev->bk->xs;
	enum xenbus_state bs;
	char *fe = NULL;
	uint64_t v;
	char p[XBD_XS_PATH_MAX];

	if (!xbd_xs_exists(xs, XBT_NULL, dev->bpath)) {
		dev_destroy(dev);
		return;
	}
	bs = xbd_xenbus_read_state(xs, dev->bpath);
	if (dev->dead) {
		/*
		 * libxl rewrites the directory in one transaction when the domid
		 * is reused: a live domain and state 1 is a new device.
		 */
		if (bs == XenbusStateInitialising &&
		    xbd_domain_state(dev->bk->plat, dev->domid) == XBD_DOMAIN_RUNNING) {
			struct xbd_back *bk = dev->bk;
			const char *type = dev->type;
			uint32_t domid = dev->domid, devid = dev->devid;
			unsigned int ti;

			dev_destroy(dev);
			for (ti = 0; ti < bk->opts.nr_types; ti++)
				if (bk->opts.types[ti] == type)
					handle_device(bk, ti, domid, devid);
		}
		return;
	}
	dev->online = read_bkey_bool(dev, "online", true);

	if (dev->state == XenbusStateUnknown) {
		/* First sight of the device. */
		if (bs == XenbusStateUnknown)
			return; /* not written completely yet */
		if (read_bkey_str(dev, "frontend", &fe) || !fe[0] ||
		    strlen(fe) >= sizeof(dev->fpath)) {
			free(fe);
			return;
		}
		snprintf(dev->fpath, sizeof(dev->fpath), "%s", fe);
		free(fe);
		if (!key(p, dev->bpath, "frontend-id") &&
		    !xbd_xs_read_uint(xs, XBT_NULL, p, 0, DOMID_FIRST_RESERVED - 1, &v) &&
		    v != dev->domid)
			DLOG(dev, XBD_LOG_INFO, "frontend-id %" PRIu64 " differs from the path", v);
		open_storage(dev); /* a failure is reported again at connect */
		switch (bs) {
		case XenbusStateClosing:
			/* Closed by the toolstack while no daemon ran. */
			dev->state = XenbusStateClosing;
			set_state(dev, XenbusStateClosed);
			break;
		case XenbusStateClosed:
			/* A frontend that starts over finds us through its watch. */
			dev->state = XenbusStateClosed;
			break;
		case XenbusStateInitialising:
			/*
			 * libxl waits 10 s for InitWait before it even runs the
			 * hotplug script, so we get there at once.
			 */
			dev->state = XenbusStateInitWait;
			advertise(dev);
			set_state(dev, XenbusStateInitWait);
			break;
		default:
			if (bs == XenbusStateConnected && !clean_stop_marker(dev, false)) {
				/*
				 * The previous daemon died without answering what it
				 * had consumed.  Responses share the ring's slots with
				 * requests, so slots between rsp_prod and req_prod may
				 * already hold unpushed responses: consuming them again
				 * would run garbage requests against the disk.  Close,
				 * so the frontend reconnects with fresh rings and
				 * resubmits what it has in flight.
				 */
				DLOG(dev, XBD_LOG_INFO, "found Connected after an unclean stop: "
				     "the ring cannot be trusted, closing so the frontend reconnects");
				dev->state = XenbusStateClosing;
				set_state(dev, XenbusStateClosing);
				break;
			}
			/* After a clean stop (state 4) the frontend's watch reconnects us. */
			dev->state = XenbusStateInitWait;
			advertise(dev);
			DLOG(dev, XBD_LOG_INFO, "found in state %s, resuming",
			     xbd_xenbus_state_name(bs));
			break;
		}
		if (key(p, dev->fpath, "state") ||
		    xbd_xs_watch(xs, p, dev_frontend_changed, dev, &dev->fe_watch)) {
			DLOG(dev, XBD_LOG_INFO, "cannot watch %s", p);
			dev->fe_watch = NULL;
		}
		return;
	}

	/* The toolstack closes the device: libxl writes online=0 and state=5. */
	if (bs == XenbusStateClosing && (dev->state != XenbusStateClosing || !dev->online) &&
	    dev->state != XenbusStateClosed) {
		DLOG(dev, XBD_LOG_INFO, "closed by the toolstack");
		dev_disconnect(dev);
		set_state(dev, XenbusStateClosed);
		return;
	}
	if (bs == XenbusStateClosed && dev->state != XenbusStateClosed) {
		dev_disconnect(dev);
		dev->state = XenbusStateClosed;
		return;
	}
	if (!dev->store && dev->state == XenbusStateInitWait && !open_storage(dev))
		advertise(dev);
	if (dev->connected)
		check_resize(dev);
}

static struct xbd_dev *dev_find(struct xbd_back *bk, const char *type, uint32_t domid,
				uint32_t devid)
{
	struct xbd_dev *dev;

	for (dev = bk->devs; dev; dev = dev->next)
		if (dev->type == type && dev->domid == domid && dev->devid == devid)
			return dev;
	return NULL;
}

static struct xbd_dev *dev_new(struct xbd_back *bk, unsigned int ti, uint32_t domid,
			       uint32_t devid)
{
	struct xbd_dev *dev = calloc(1, sizeof(*dev));

	if (!dev)
		return NULL;
	dev->bk = bk;
	dev->type = bk->opts.types[ti];
	dev->domid = domid;
	dev->devid = devid;
	dev->state = XenbusStateUnknown;
	dev->o = bk->opts.disk;
	snprintf(dev->name, sizeof(dev->name), "%s %u/%u", dev->type, domid, devid);
	if (xbd_xs_pathf(dev->bpath, sizeof(dev->bpath), "%s/%u/%u", bk->base[ti], domid, devid)) {
		free(dev);
		return NULL;
	}
	xbd_ratelimit_init(&dev->rl);
	dev->rl.who = dev->name;
	dev->next = bk->devs;
	bk->devs = dev;
	DLOG(dev, XBD_LOG_VERBOSE, "new device");
	return dev;
}

/* A decimal id below limit, nothing else. */
static bool parse_id(const char *s, size_t len, uint64_t limit, uint32_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (!len || len > 10)
		return false;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	if (v >= limit)
		return false;
	*out = v;
	return true;
}

/*
 * Kernel xen-blkback, once loaded, takes every device under backend/vbd
 * (from Xen 4.19 libxl puts ours under backend/vbd3, where it does not
 * look).  Serving one of those too would put two backends on one ring: the
 * second fails to bind the event channel and closes the device under the
 * guest.  So while the module is loaded, new vbd devices are left to it.
 */
static bool left_to_kernel_blkback(struct xbd_back *bk, unsigned int ti)
{
	if (strcmp(bk->opts.types[ti], "vbd") || strcmp(xbd_platform_name(bk->plat), "xen") ||
	    access("/sys/module/xen_blkback", F_OK))
		return false;
	if (!bk->vbd_left_noted)
		xbd_log(XBD_LOG_INFO, "xen-blkback is loaded: new devices under backend/vbd "
			"are left to it (use backendtype=tap, backend/vbd3, for xbd-back's)");
	bk->vbd_left_noted = true;
	return true;
}

static void handle_device(struct xbd_back *bk, unsigned int ti, uint32_t domid, uint32_t devid)
{
	struct xbd_dev *dev = dev_find(bk, bk->opts.types[ti], domid, devid);

	if (!dev) {
		char p[XBD_XS_PATH_MAX];

		if (xbd_xs_pathf(p, sizeof(p), "%s/%u/%u", bk->base[ti], domid, devid) ||
		    !xbd_xs_exists(bk->xs, XBT_NULL, p) || left_to_kernel_blkback(bk, ti))
			return;
		dev = dev_new(bk, ti, domid, devid);
		if (!dev)
			return;
	}
	dev_backend_changed(dev);
}

/* Look at every device of one type (start-up, or a whole subtree changed). */
static void scan(struct xbd_back *bk, unsigned int ti)
{
	char **doms = NULL, **devs = NULL, p[XBD_XS_PATH_MAX];
	unsigned int nd = 0, nv = 0, i, j;
	struct xbd_dev *dev, *next;
	uint32_t domid, devid;

	if (!xbd_xs_directory(bk->xs, XBT_NULL, bk->base[ti], &doms, &nd)) {
		for (i = 0; i < nd; i++) {
			if (!parse_id(doms[i], strlen(doms[i]), DOMID_FIRST_RESERVED, &domid))
				continue;
			if (xbd_xs_pathf(p, sizeof(p), "%s/%u", bk->base[ti], domid))
				continue;
			devs = NULL;
			nv = 0;
			if (xbd_xs_directory(bk->xs, XBT_NULL, p, &devs, &nv))
				continue;
			for (j = 0; j < nv; j++)
				if (parse_id(devs[j], strlen(devs[j]), UINT32_MAX, &devid))
					handle_device(bk, ti, domid, devid);
			free(devs);
		}
		free(doms);
	}
	/* Devices whose directory went away with a whole subtree. */
	for (dev = bk->devs; dev; dev = next) {
		next = dev->next;
		if (dev->type == bk->opts.types[ti] && !xbd_xs_exists(bk->xs, XBT_NULL, dev->bpath))
			dev_destroy(dev);
	}
}

static void base_changed(struct xbd_xs *xs, const char *path, void *arg)
{
	struct xbd_base_watch *w = arg;
	struct xbd_back *bk = w->bk;
	const char *base = bk->base[w->idx], *rest, *slash;
	size_t blen = strlen(base);
	uint32_t domid, devid;

	if (strncmp(path, base, blen) || (path[blen] && path[blen] != '/')) {
		scan(bk, w->idx);
		return;
	}
	rest = path + blen;
	if (*rest == '/')
		rest++;
	slash = strchr(rest, '/');
	if (!*rest || !slash || !parse_id(rest, slash - rest, DOMID_FIRST_RESERVED, &domid)) {
		scan(bk, w->idx);
		return;
	}
	rest = slash + 1;
	slash = strchr(rest, '/');
	if (!parse_id(rest, slash ? (size_t)(slash - rest) : strlen(rest), UINT32_MAX, &devid)) {
		scan(bk, w->idx);
		return;
	}
	handle_device(bk, w->idx, domid, devid);
}

/* @releaseDomain: tear down the devices of domains that died, and only those. */
static void release_domain(struct xbd_xs *xs, const char *path, void *arg)
{
	struct xbd_back *bk = arg;
	struct xbd_dev *dev;

	for (dev = bk->devs; dev; dev = dev->next) {
		int st;

		if (dev->dead || dev->state == XenbusStateUnknown)
			continue;
		st = xbd_domain_state(bk->plat, dev->domid);
		if (st == XBD_DOMAIN_DYING || st == XBD_DOMAIN_GONE) {
			char why[48];

			snprintf(why, sizeof(why), "domain %u is %s", dev->domid,
				 st == XBD_DOMAIN_DYING ? "dying" : "gone");
			dev_kill(dev, why);
		}
	}
}

int xbd_back_watch_start(struct xbd_back *bk)
{
	pthread_condattr_t ca;
	unsigned int i;
	int err;

	pthread_mutex_init(&bk->timer_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&bk->timer_cond, &ca);
	pthread_condattr_destroy(&ca);

	for (i = 0; i < bk->opts.nr_types; i++) {
		err = xbd_xs_pathf(bk->base[i], sizeof(bk->base[i]), "/local/domain/%u/backend/%s",
				   bk->domid, bk->opts.types[i]);
		if (err)
			return err;
		bk->bw[i].bk = bk;
		bk->bw[i].idx = i;
		err = xbd_xs_watch(bk->xs, bk->base[i], base_changed, &bk->bw[i], &bk->watches[i]);
		if (err) {
			xbd_log(XBD_LOG_INFO, "cannot watch %s: %s", bk->base[i], strerror(-err));
			return err;
		}
	}
	err = xbd_xs_watch(bk->xs, "@releaseDomain", release_domain, bk,
			   &bk->watches[bk->opts.nr_types]);
	if (err)
		xbd_log(XBD_LOG_INFO, "cannot watch @releaseDomain: %s", strerror(-err));
	return err;
}

/* Writes wake_fd when the earliest scheduled retry is due. */
static void *timer_main(void *arg)
{
	struct xbd_back *bk = arg;

	pthread_mutex_lock(&bk->timer_lock);
	while (!bk->timer_stop) {
		uint64_t now = now_ms(), one = 1;

		if (!bk->timer_due_ms) {
			pthread_cond_wait(&bk->timer_cond, &bk->timer_lock);
		} else if (now >= bk->timer_due_ms) {
			bk->timer_due_ms = 0;
			if (write(bk->wake_fd, &one, sizeof(one)) < 0) {
				/* Counter already set: main wakes anyway. */
			}
		} else {
			struct timespec ts;
			uint64_t due = bk->timer_due_ms;

			ts.tv_sec = due / 1000;
			ts.tv_nsec = (long)(due % 1000) * 1000000;
			pthread_cond_timedwait(&bk->timer_cond, &bk->timer_lock, &ts);
		}
	}
	pthread_mutex_unlock(&bk->timer_lock);
	return NULL;
}

static void timer_schedule(struct xbd_back *bk, uint64_t due)
{
	pthread_mutex_lock(&bk->timer_lock);
	if (!bk->timer_started) {
		bk->timer_started = !pthread_create(&bk->timer, NULL, timer_main, bk);
		if (!bk->timer_started)
			xbd_log(XBD_LOG_INFO, "cannot start the retry timer: a rate-limited "
				"connect waits for the next event");
	}
	if (!bk->timer_due_ms || due < bk->timer_due_ms)
		bk->timer_due_ms = due ? due : 1;
	pthread_cond_signal(&bk->timer_cond);
	pthread_mutex_unlock(&bk->timer_lock);
}

static void timer_stop(struct xbd_back *bk)
{
	if (!bk->timer_started)
		return;
	pthread_mutex_lock(&bk->timer_lock);
	bk->timer_stop = true;
	pthread_cond_signal(&bk->timer_cond);
	pthread_mutex_unlock(&bk->timer_lock);
	pthread_join(bk->timer, NULL);
	bk->timer_started = false;
}

/* wake_fd: rings that failed, rings that finished draining, retries that are due. */
void xbd_back_handle_failed_rings(struct xbd_back *bk)
{
	struct xbd_dev *dev, **pp;
	unsigned int i;
	uint64_t now = now_ms();

	for (pp = &bk->zombies; *pp;) {
		dev = *pp;
		if (!drained(dev)) {
			pp = &dev->next;
			continue;
		}
		*pp = dev->next;
		drain_release(dev);
		DLOG(dev, XBD_LOG_INFO, "rings drained and released");
		dev_free(dev);
	}
	for (dev = bk->devs; dev; dev = dev->next) {
		if (dev->nr_drain && drained(dev)) {
			dev_drain_done(dev);
		} else if (dev->retry_ms && now < dev->retry_ms) {
			timer_schedule(bk, dev->retry_ms); /* the timer served an earlier one */
		} else if (dev->retry_ms && !dev->nr_drain) {
			dev->retry_ms = 0; /* set again if still too early */
			if (!dev->dead && dev->fe_watch)
				dev_frontend_changed(bk->xs, NULL, dev);
		}
	}

	for (dev = bk->devs; dev; dev = dev->next) {
		bool failed = false;

		for (i = 0; i < dev->nr_rings; i++)
			failed |= dev->rings[i].failed;
		if (!failed)
			continue;
		/* Only this device: the other devices' rings never notice. */
		dev_disconnect(dev);
		set_state(dev, XenbusStateClosing);
	}
}

void xbd_back_resize_all(struct xbd_back *bk)
{
	struct xbd_dev *dev;

	for (dev = bk->devs; dev; dev = dev->next)
		if (dev->connected)
			check_resize(dev);
}

void xbd_back_print_stats(struct xbd_back *bk)
{
	struct xbd_dev *dev;
	unsigned int i;

	for (dev = bk->devs; dev; dev = dev->next) {
		for (i = 0; i < dev->nr_rings; i++) {
			struct xbd_ring_stats s;

			xbd_stats_snapshot(&dev->rings[i].stats, &s);
			xbd_stats_print(stderr, dev->rings[i].name, &s);
		}
	}
	fflush(stderr);
}

const char *xbd_dev_state_name(const struct xbd_dev *dev)
{
	if (dev->dead)
		return "Dead";
	return xbd_xenbus_state_name(dev->state);
}

void xbd_back_shutdown(struct xbd_back *bk)
{
	unsigned int i;

	for (i = 0; i <= bk->opts.nr_types; i++) {
		if (bk->watches[i])
			xbd_xs_unwatch(bk->xs, bk->watches[i]);
		bk->watches[i] = NULL;
	}
	timer_stop(bk);
	/* Every ring drains at once, not one device after another. */
	for (struct xbd_dev *dev = bk->devs; dev; dev = dev->next)
		for (i = 0; i < dev->nr_rings; i++)
			xbd_ring_request_stop(&dev->rings[i]);
	while (bk->zombies) {
		struct xbd_dev *dev = bk->zombies;

		bk->zombies = dev->next;
		drain_release(dev);
		dev_free(dev);
	}
	while (bk->devs) {
		struct xbd_dev *dev = bk->devs;

		dev_disconnect(dev);
		if (dev->nr_drain) {
			int st = dev->deferred_state;

			/* SIGTERM waits for every consumed request (see main.c). */
			drain_release(dev);
			if (st >= 0)
				write_state(dev, st);
		}
		/*
		 * Tidy: a device we were closing has now released everything,
		 * which is what Closed says; nobody would write it after us and
		 * the toolstack waits for it.  Connected and InitWait devices stay
		 * as they are, for the next xbd-back (see main.c).
		 */
		if (dev->state == XenbusStateClosing && !dev->dead)
			set_state(dev, XenbusStateClosed);
		/* Every consumed request was answered: the next daemon may resume. */
		if (dev->state == XenbusStateConnected && !dev->dead)
			clean_stop_marker(dev, true);
		if (dev->fe_watch)
			xbd_xs_unwatch(bk->xs, dev->fe_watch);
		dev->fe_watch = NULL;
		close_storage(dev);
		bk->devs = dev->next;
		xbd_ratelimit_destroy(&dev->rl);
		free(dev->params);
		free(dev);
	}
}
