/*
 * lifecycle.c: xbd-back's control plane for one device, in the main thread
 * (lifecycle.h: its storage is storage.c's, its connection connect.c's).
 * Drives the XenbusState machine of xenstore/xenbus.h against the
 * frontend (with xbd's own rules as guards on its edges), takes over a
 * device a previous daemon served, and tears the device down on frontend
 * close, toolstack removal (state=5, online=0), a corrupt ring, or the
 * death of the frontend's domain.  Devices are found by discovery.c.
 *
 * Every guest write to xenstore costs bounded work here.  Watch
 * callbacks only mark a device (XBD_DEV_PEND_*); the main loop runs
 * xbd_back_run after each bounded batch of events, and a device's pass
 * reads the frontend's state once and takes at most the steps that
 * state calls for.  The edges that cost writes (offering the device
 * again, connecting) are rate-limited per device, so a guest flapping
 * its state as fast as xenstored answers gets a few steps a second and
 * one log line.
 *
 * The backend directory is written by the toolstack and trusted; every
 * key under the frontend directory is the guest's and is range-checked,
 * and strings from it are escaped before they are logged.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "blkback/control/lifecycle.h"
#include "blkback/control/tracking.h"
#include "blkback/datapath/journal.h"
#include "blkback/engines/engine-file.h"
#include "blkback/datapath/throttle.h"
#include "common/clock.h"

/* At most this many steps per pass: a skipped state yields two. */
#define PASS_STEPS 3

/* ---- pending work ---- */

static void dev_unmark(struct xbd_dev *dev)
{
	struct xbd_back *bk = dev->bk;
	struct xbd_dev **pp, *prev = NULL;

	if (!dev->queued)
		return;
	for (pp = &bk->pend_head; *pp; prev = *pp, pp = &(*pp)->pend_next) {
		if (*pp == dev) {
			*pp = dev->pend_next;
			if (bk->pend_tail == dev)
				bk->pend_tail = prev;
			break;
		}
	}
	dev->queued = false;
	dev->pending = 0;
}

/* The frontend's state node changed: look at it in the next pass. */
static void frontend_changed(struct xbd_xs *xs, const char *path, void *arg)
{
	xbd_dev_mark(arg, XBD_DEV_PEND_FRONTEND);
}

/* Whether another device of ours (a live one, or one still draining) has dev's guest. */
static bool guest_has_others(const struct xbd_dev *dev)
{
	for (const struct xbd_dev *o = dev->bk->devs; o; o = o->next)
		if (o != dev && o->disk.domid == dev->disk.domid)
			return true;
	for (const struct xbd_dev *o = dev->bk->zombies; o; o = o->next)
		if (o != dev && o->disk.domid == dev->disk.domid)
			return true;
	return false;
}

static void dev_free(struct xbd_dev *dev)
{
	/* The journal's DOMAIN_NAME goes with the guest's last device. */
	if (!guest_has_others(dev))
		xbd_log_domain_name(dev->disk.domid, NULL);
	xbd_vbd3_unpublish(dev);
	xbd_wdev_free(dev->wd);
	dev_close_storage(dev);
	xbd_disk_throttle_release(&dev->disk, false);
	xbd_ratelimit_destroy(&dev->disk.rl);
	xbd_ratelimit_destroy(&dev->disk.crl);
	free(dev->last);
	free(dev->params);
	free(dev->storage_said);
	free(dev);
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

/*
 * Remove the crash journals of dev (its rings will not be taken over), or
 * with dev NULL those of every device we do not serve.  Returns how many.
 */
static unsigned int journals_remove(struct xbd_back *bk, const struct xbd_dev *dev)
{
	unsigned int n = 0, domid, devid, q;
	struct dirent *de;
	char type[8], extra;
	DIR *d;

	if (!bk->journal_dir || !(d = opendir(bk->journal_dir)))
		return 0;
	while ((de = readdir(d))) {
		const struct xbd_dev *o;
		bool ours = false;

		if (sscanf(de->d_name, "%7[a-z0-9].%u.%u.%u%c", type, &domid, &devid, &q, &extra) != 4)
			continue;
		if (dev) {
			ours = !strcmp(type, dev->disk.type) && domid == dev->disk.domid && devid == dev->disk.devid;
		} else {
			ours = true;
			for (o = bk->devs; o; o = o->next)
				if (!strcmp(type, o->disk.type) && domid == o->disk.domid && devid == o->disk.devid)
					ours = false;
		}
		if (ours && !unlinkat(dirfd(d), de->d_name, 0))
			n++;
	}
	closedir(d);
	return n;
}

/* ---- the XenbusState machine ---- */

/*
 * One pass for a device whose frontend changed: read its state once and
 * take the steps xbd_xenbus_next_step names, each behind xbd's guards.
 */
static void dev_frontend_step(struct xbd_dev *dev)
{
	enum xenbus_state fe;
	unsigned int n;

	if (dev->life != XBD_DEV_LIVE && dev->life != XBD_DEV_CONNECTED)
		return;
	fe = xbd_xenbus_read_state(dev->bk->xs, dev->fpath);
	for (n = 0; n < PASS_STEPS; n++) {
		enum xbd_xenbus_step step = xbd_xenbus_next_step(XBD_XENBUS_BACKEND, dev->state, fe);

		DLOG(dev, XBD_LOG_DEBUG, "frontend %s, ours %s: %s", xbd_xenbus_state_name(fe),
		     xbd_xenbus_state_name(dev->state), xbd_xenbus_step_name(step));
		switch (step) {
		case XBD_XENBUS_STEP_INITWAIT:
			/*
			 * Guards: the toolstack still wants the device (online);
			 * rings of an earlier connection are released first
			 * (dev_drain_done marks us again); offering the device
			 * again is rate-limited.
			 */
			if (!dev->online)
				return;
			dev_disconnect(dev);
			if (dev->nr_drain)
				return;
			if (!dev_edge_allowed(dev, &dev->offer_limit, "the frontend starts over"))
				return;
			if (!dev->disk.store)
				dev_open_storage(dev); /* a failure is reported again at connect */
			dev_advertise(dev);
			dev_set_state(dev, XenbusStateInitWait);
			break;
		case XBD_XENBUS_STEP_CONNECT:
			if (!dev_connect_step(dev))
				return;
			break;
		case XBD_XENBUS_STEP_CLOSING:
			dev_disconnect(dev);
			dev_set_state(dev, XenbusStateClosing);
			break;
		case XBD_XENBUS_STEP_CLOSED:
			dev_disconnect(dev);
			dev_set_state(dev, XenbusStateClosed);
			break;
		default:
			return;
		}
	}
}

/*
 * First sight of a device the toolstack has finished writing (bs is its
 * state in xenstore): what state we take it over in.
 */
static void dev_adopt(struct xbd_dev *dev, enum xenbus_state bs)
{
	struct xbd_xs *xs = dev->bk->xs;
	char p[XBD_XS_PATH_MAX], *fe = NULL;
	enum xenbus_state fs;
	uint64_t v;
	int st;

	if (dev_bkey_str(dev, "frontend", &fe) || !fe[0] || strlen(fe) >= sizeof(dev->fpath)) {
		free(fe);
		return;
	}
	snprintf(dev->fpath, sizeof(dev->fpath), "%s", fe);
	free(fe);
	if (!xbd_xs_join(p, sizeof(p), dev->bpath, "frontend-id") &&
	    !xbd_xs_read_uint(xs, XBT_NULL, p, 0, DOMID_FIRST_RESERVED - 1, &v) && v != dev->disk.domid)
		DLOG(dev, XBD_LOG_WARNING, "frontend-id %" PRIu64 " differs from the path", v);
	dev_set_life(dev, XBD_DEV_LIVE);
	st = xbd_domain_state(dev->bk->host.plat, dev->disk.domid);
	if (st == XBD_DOMAIN_DYING || st == XBD_DOMAIN_GONE) {
		/* Died before we saw it: the toolstack will remove the directory. */
		xbd_dev_kill(dev, st == XBD_DOMAIN_DYING ? "its domain is dying" : "its domain is gone");
		return;
	}
	dev_open_storage(dev); /* a failure is reported again at connect */
	switch (bs) {
	case XenbusStateClosing:
		/* Closed by the toolstack while no daemon ran. */
		dev->state = XenbusStateClosing;
		dev_set_state(dev, XenbusStateClosed);
		break;
	case XenbusStateClosed:
		/* A frontend that starts over finds us through its watch. */
		dev->state = XenbusStateClosed;
		break;
	case XenbusStateInitialising:
		/*
		 * libxl waits 10 s for InitWait before it even runs the hotplug
		 * script, so we get there at once.
		 */
		dev->state = XenbusStateInitialising;
		dev_edge_allowed(dev, &dev->offer_limit, "the frontend starts over");
		dev_advertise(dev);
		dev_set_state(dev, XenbusStateInitWait);
		break;
	case XenbusStateConnected:
		/*
		 * A previous daemon served it.  If the frontend still has the
		 * ring Connected, take the live ring over: from its journal
		 * (journal.h), which says which requests it had taken and not
		 * answered as the guest sees it, or, after a clean stop (every
		 * consumed request answered and pushed, the marker says so), at
		 * the shared indexes.  The frontend's state connects us.
		 */
		dev->clean_stop = clean_stop_marker(dev, false);
		fs = xbd_xenbus_read_state(xs, dev->fpath);
		if (fs == XenbusStateConnected && (dev->bk->journal_dir || dev->clean_stop)) {
			dev->resuming = true;
			dev->state = XenbusStateInitWait;
			dev_advertise(dev);
			DLOG(dev, XBD_LOG_INFO, "found Connected, taking the live ring over%s",
			     dev->clean_stop ? " after a clean stop" : "");
			break;
		}
		if (!dev->clean_stop) {
			char why[64];

			/*
			 * Died without answering what it had consumed, and no
			 * journal to say what (or a frontend that left Connected
			 * meanwhile: the journal is not taken over then):
			 * responses share the ring's slots with requests, so
			 * slots between rsp_prod and req_prod may hold unpushed
			 * responses, and consuming them again would run garbage
			 * requests against the disk.  Close, so the frontend
			 * reconnects with fresh rings.  The line says which.
			 */
			if (fs != XenbusStateConnected)
				snprintf(why, sizeof(why), "the frontend in state %s, not Connected",
					 xbd_xenbus_state_name(fs));
			else
				snprintf(why, sizeof(why), "no journal (%s)", dev->bk->opts.journal
					 ? "its directory could not be made" : "journal = 0");
			DLOG(dev, XBD_LOG_ERR, "found Connected after an unclean stop and %s: the ring "
			     "cannot be trusted, closing so the frontend reconnects", why);
			dev->state = XenbusStateClosing;
			dev_set_state(dev, XenbusStateClosing);
			break;
		}
		/* The frontend has moved on (a new ring): offer the device as usual. */
		dev->state = XenbusStateInitWait;
		dev_advertise(dev);
		DLOG(dev, XBD_LOG_INFO, "found Connected, the frontend %s: offering it again",
		     xbd_xenbus_state_name(fs));
		break;
	default:
		dev->state = XenbusStateInitWait;
		dev_advertise(dev);
		DLOG(dev, XBD_LOG_INFO, "found in state %s, resuming", xbd_xenbus_state_name(bs));
		break;
	}
	if (!dev->resuming && journals_remove(dev->bk, dev))
		DLOG(dev, XBD_LOG_INFO, "discarded the crash journal of a ring the frontend "
		     "no longer has");
	/* Only the node itself: a guest may write below it. */
	if (xbd_xs_join(p, sizeof(p), dev->fpath, "state") ||
	    xbd_xs_watch_node(xs, p, frontend_changed, dev, &dev->fe_watch)) {
		DLOG(dev, XBD_LOG_ERR, "cannot watch %s", p);
		dev->fe_watch = NULL;
	}
}

/* The toolstack changed the backend directory.  False: dev is gone. */
static bool dev_backend_changed(struct xbd_dev *dev)
{
	struct xbd_xs *xs = dev->bk->xs;
	enum xenbus_state bs;
	bool was_online = dev->online;

	if (!xbd_xs_exists(xs, XBT_NULL, dev->bpath)) {
		xbd_dev_destroy(dev);
		return false;
	}
	bs = xbd_xenbus_read_state(xs, dev->bpath);
	if (dev->life == XBD_DEV_DEAD) {
		/*
		 * libxl rewrites the directory in one transaction when the domid
		 * is reused: a live domain and state 1 is a new device.
		 */
		if (bs == XenbusStateInitialising &&
		    xbd_domain_state(dev->bk->host.plat, dev->disk.domid) == XBD_DOMAIN_RUNNING) {
			struct xbd_back *bk = dev->bk;
			const char *type = dev->disk.type;
			uint32_t domid = dev->disk.domid, devid = dev->disk.devid;
			unsigned int ti;

			xbd_dev_destroy(dev);
			for (ti = 0; ti < bk->opts.nr_types; ti++) {
				struct xbd_dev *nd;

				if (bk->opts.types[ti] != type)
					continue;
				nd = xbd_back_device(bk, ti, domid, devid);
				if (nd)
					xbd_dev_mark(nd, XBD_DEV_PEND_BACKEND);
			}
			return false;
		}
		return true;
	}
	dev->online = dev_bkey_bool(dev, "online", true);

	if (dev->life == XBD_DEV_NEW) {
		if (bs != XenbusStateUnknown) /* else not written completely yet */
			dev_adopt(dev, bs);
		return true;
	}
	/* The toolstack closes the device: libxl writes online=0 and state=5. */
	if (bs == XenbusStateClosing && (dev->state != XenbusStateClosing || !dev->online) &&
	    dev->state != XenbusStateClosed) {
		DLOG(dev, XBD_LOG_INFO, "closed by the toolstack");
		dev_disconnect(dev);
		dev_set_state(dev, XenbusStateClosed);
		return true;
	}
	if (bs == XenbusStateClosed && dev->state != XenbusStateClosed) {
		dev_disconnect(dev);
		dev->state = XenbusStateClosed;
		return true;
	}
	if (!dev->disk.store && dev->state == XenbusStateInitWait && !dev_open_storage(dev))
		dev_advertise(dev);
	if (xbd_dev_connected(dev))
		dev_check_resize(dev);
	if (dev->online && !was_online)
		xbd_dev_mark(dev, XBD_DEV_PEND_FRONTEND); /* the INITWAIT guard may pass now */
	return true;
}

/* ---- a device's life ---- */

/*
 * Its worker asks it to take its next step (it started, a ring's start
 * was answered, it died): a device that was removed has none left.
 */
static void dev_step(void *arg)
{
	struct xbd_dev *dev = arg;

	if (dev->life != XBD_DEV_REMOVED)
		xbd_dev_mark(dev, XBD_DEV_PEND_FRONTEND);
}

static struct xbd_dev *dev_new(struct xbd_back *bk, unsigned int ti, uint32_t domid,
			       uint32_t devid)
{
	struct xbd_dev *dev = calloc(1, sizeof(*dev));

	if (!dev)
		return NULL;
	dev->bk = bk;
	dev->disk.host = &bk->host;
	dev->disk.type = bk->opts.types[ti];
	dev->disk.domid = domid;
	dev->disk.devid = devid;
	/* (calloc: its life is XBD_DEV_NEW.) */
	dev->state = XenbusStateUnknown;
	dev->online = true;
	dev->deferred_state = -1;
	dev->disk.o = bk->opts.disk;
	dev->disk.cbt_fd = dev->disk.view_fd = -1;
	snprintf(dev->disk.name, sizeof(dev->disk.name), "%s/%u/%u", dev->disk.type, domid, devid);
	if (xbd_xs_pathf(dev->bpath, sizeof(dev->bpath), "%s/%u/%u", bk->base[ti], domid, devid)) {
		free(dev);
		return NULL;
	}
	dev->wd = xbd_wdev_new(bk->workers, &dev->disk, dev_step, dev);
	if (bk->workers && !dev->wd) {
		free(dev);
		return NULL;
	}
	xbd_ratelimit_init(&dev->disk.rl);
	xbd_ratelimit_init(&dev->disk.crl);
	dev->disk.rl.who = dev->disk.crl.who = dev->disk.name;
	dev->next = bk->devs;
	bk->devs = dev;
	dev_read_domain(dev);
	return dev;
}

static struct xbd_dev *dev_find(struct xbd_back *bk, const char *type, uint32_t domid,
				uint32_t devid)
{
	struct xbd_dev *dev;

	for (dev = bk->devs; dev; dev = dev->next)
		if (dev->disk.type == type && dev->disk.domid == domid && dev->disk.devid == devid)
			return dev;
	return NULL;
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
	if (strcmp(bk->opts.types[ti], "vbd") || strcmp(xbd_platform_name(bk->host.plat), "xen") ||
	    access("/sys/module/xen_blkback", F_OK))
		return false;
	if (!bk->vbd_left_noted)
		xbd_log(XBD_LOG_INFO, "xen-blkback is loaded: new devices under backend/vbd "
			"are left to it (use backendtype=tap, backend/vbd3, for xbd-back's)");
	bk->vbd_left_noted = true;
	return true;
}

struct xbd_dev *xbd_back_device(struct xbd_back *bk, unsigned int ti, uint32_t domid,
				uint32_t devid)
{
	struct xbd_dev *dev = dev_find(bk, bk->opts.types[ti], domid, devid);

	if (dev)
		return dev;
	if (left_to_kernel_blkback(bk, ti))
		return NULL;
	/* Only the toolstack writes here: a device it named is worth a look. */
	return dev_new(bk, ti, domid, devid);
}

void xbd_dev_destroy(struct xbd_dev *dev)
{
	struct xbd_dev **pp;

	dev_unmark(dev);
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
	if (dev->life != XBD_DEV_NEW)
		DLOG(dev, XBD_LOG_VERBOSE, "removed");
	journals_remove(dev->bk, dev);
	dev_set_life(dev, XBD_DEV_REMOVED);
	if (dev->nr_drain) {
		/* Its threads still use the storage and the struct: free it once drained. */
		dev->next = dev->bk->zombies;
		dev->bk->zombies = dev;
		return;
	}
	dev_free(dev);
}

void xbd_dev_kill(struct xbd_dev *dev, const char *why)
{
	DLOG(dev, XBD_LOG_INFO, "%s, tearing down", why);
	dev_disconnect(dev);
	if (dev->fe_watch)
		xbd_xs_unwatch(dev->bk->xs, dev->fe_watch);
	dev->fe_watch = NULL;
	dev_set_life(dev, XBD_DEV_DEAD);
	if (!dev->nr_drain)
		dev_close_storage(dev); /* else once dev_drained (dev_drain_done) */
	dev_set_state(dev, XenbusStateClosed);
}

/* Its rings' counters, those still draining, and those of earlier connections. */
void xbd_dev_totals(const struct xbd_dev *dev, struct xbd_ring_stats *sum)
{
	unsigned int i;

	*sum = dev->past;
	for (i = 0; i < dev->disk.nr_rings; i++) {
		struct xbd_ring_stats s;

		xbd_stats_snapshot(xbd_ring_stats(dev->rings[i].ring), &s);
		xbd_stats_sum(sum, &s);
	}
	/* Rings of an earlier connection still finishing their I/O. */
	for (i = 0; i < dev->nr_drain; i++) {
		struct xbd_ring_stats s;

		if (!dev->drain[i].ring)
			continue;
		xbd_stats_snapshot(xbd_ring_stats(dev->drain[i].ring), &s);
		xbd_stats_sum(sum, &s);
	}
}

/* ---- the main loop's passes ---- */

/*
 * How often a connected disk whose engine has no size notification (a
 * file or block device; NBD's size is fixed) has its size read, so that
 * growing or shrinking it reaches the guest without a SIGHUP, as kernel
 * blkback notices on its next request.  One fstat or BLKGETSIZE64 per
 * such disk per interval, in the main thread: bounded and cheap, where
 * inotify would miss block devices and resizes through another mount.
 */
#define SIZE_CHECK_MS 1000

static bool size_polled(const struct xbd_dev *dev)
{
	return xbd_dev_connected(dev) && dev->disk.store && !dev->disk.eng->watch_size;
}

/* The same pass refreshes a connected vbd3 disk's counters for xentop (vbd3-stats.c). */
static bool periodic(const struct xbd_dev *dev)
{
	return size_polled(dev) || (xbd_dev_connected(dev) && !strcmp(dev->disk.type, "vbd3"));
}

/* A vbd3 disk's counters for xentop, written again (vbd3-stats.c). */
static void vbd3_refresh(struct xbd_dev *dev)
{
	struct xbd_ring_stats sum;

	if (strcmp(dev->disk.type, "vbd3"))
		return;
	xbd_dev_totals(dev, &sum);
	xbd_vbd3_publish(dev, &sum);
}

/* Arm timer_fd for the earliest retry or rate-limit report (or disarm it). */
static void arm_timer(struct xbd_back *bk)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	uint64_t due = 0;
	struct xbd_dev *dev;

	if (bk->timer_fd < 0)
		return;
	for (dev = bk->devs; dev; dev = dev->next) {
		uint64_t d = xbd_ratelimit_flush(&dev->disk.rl), c = xbd_ratelimit_flush(&dev->disk.crl);

		if (c && (!d || c < d))
			d = c;
		if (dev->retry_ms && (!due || dev->retry_ms < due))
			due = dev->retry_ms;
		if (dev->open_err && !dev->open_refused && !dev->disk.store && !dev->open_job &&
		    dev->life == XBD_DEV_LIVE && (!due || dev->open_retry_ms < due))
			due = dev->open_retry_ms;
		if (d && (!due || d < due))
			due = d;
		if (periodic(dev)) {
			if (!bk->size_check_ms)
				bk->size_check_ms = xbd_mono_ms() + SIZE_CHECK_MS;
			if (!due || bk->size_check_ms < due)
				due = bk->size_check_ms;
		}
	}
	/* A checkpoint waiting for its disk's writes to drain looks again each ms. */
	if (track_due(bk) && (!due || track_due(bk) < due))
		due = track_due(bk);
	if (due) {
		its.it_value.tv_sec = due / 1000;
		its.it_value.tv_nsec = (long)(due % 1000) * 1000000 + 1;
	}
	timerfd_settime(bk->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

void xbd_back_run(struct xbd_back *bk)
{
	struct xbd_dev *dev;
	unsigned int n = 0;

	/*
	 * The devices marked so far, in order; what is marked from here on
	 * (a device may mark itself again) waits for the next pass.
	 */
	for (dev = bk->pend_head; dev; dev = dev->pend_next)
		n++;
	while (n-- && (dev = bk->pend_head)) {
		unsigned int what = dev->pending;

		bk->pend_head = dev->pend_next;
		if (!bk->pend_head)
			bk->pend_tail = NULL;
		dev->pending = 0;
		dev->queued = false;
		if ((what & XBD_DEV_PEND_BACKEND) && !dev_backend_changed(dev))
			continue;
		if (what & XBD_DEV_PEND_FRONTEND)
			dev_frontend_step(dev);
	}
}

bool xbd_back_pass_end(struct xbd_back *bk)
{
	/* Once every device there at start is known: journals of devices that are gone. */
	if (!bk->journals_checked) {
		unsigned int nj = journals_remove(bk, NULL);

		bk->journals_checked = true;
		if (nj)
			xbd_log(XBD_LOG_INFO, "removed %u crash journal%s of devices that are gone",
				nj, nj == 1 ? "" : "s");
	}
	arm_timer(bk);
	return bk->pend_head != NULL;
}

void xbd_back_timer(struct xbd_back *bk)
{
	uint64_t now = xbd_mono_ms(), expirations;
	struct xbd_dev *dev;

	if (read(bk->timer_fd, &expirations, sizeof(expirations)) < 0) {
		/* Not expired after all (re-armed meanwhile): nothing is due. */
	}
	for (dev = bk->devs; dev; dev = dev->next) {
		if (dev->retry_ms && dev->retry_ms <= now) {
			dev->retry_ms = 0; /* set again if still too early */
			xbd_dev_mark(dev, XBD_DEV_PEND_FRONTEND);
		}
		/* A failed open's next try (its backoff is over), while the device is wanted. */
		if (dev->open_err && !dev->open_refused && !dev->disk.store && !dev->open_job &&
		    dev->open_retry_ms <= now && dev->life == XBD_DEV_LIVE && !dev_open_storage(dev)) {
			if (dev->state == XenbusStateInitWait)
				dev_advertise(dev);
			xbd_dev_mark(dev, XBD_DEV_PEND_FRONTEND); /* a connect that waited for it */
		}
	}
	if (bk->size_check_ms && bk->size_check_ms <= now) {
		/* Set again by arm_timer while a connected disk needs it. */
		bk->size_check_ms = 0;
		for (dev = bk->devs; dev; dev = dev->next) {
			if (size_polled(dev))
				dev_check_resize(dev);
			if (periodic(dev))
				vbd3_refresh(dev);
		}
	}
	/* Checkpoints waiting for their disks' writes to drain. */
	track_timer(bk);
	/* xbd_back_run reports what the rate limits suppressed and re-arms. */
}

void xbd_back_handle_wake(struct xbd_back *bk)
{
	struct xbd_dev *dev, **pp;
	unsigned int i;

	for (pp = &bk->zombies; *pp;) {
		dev = *pp;
		if (!dev_drained(dev)) {
			pp = &dev->next;
			continue;
		}
		*pp = dev->next;
		dev_drain_release(dev);
		DLOG(dev, XBD_LOG_VERBOSE, "rings drained and released");
		dev_free(dev);
	}
	for (dev = bk->devs; dev; dev = dev->next)
		if (dev->nr_drain && dev_drained(dev))
			dev_drain_done(dev);

	/* Storage opens that finished on their threads. */
	for (dev = bk->devs; dev; dev = dev->next)
		if (dev_open_finished(dev))
			dev_open_collect(dev);

	for (dev = bk->devs; dev; dev = dev->next)
		if (__atomic_exchange_n(&dev->size_changed, false, __ATOMIC_ACQ_REL))
			dev_check_resize(dev);

	for (dev = bk->devs; dev; dev = dev->next) {
		bool failed = false;

		for (i = 0; i < dev->disk.nr_rings; i++) {
			struct xbd_ring_report rep;

			xbd_ring_report(dev->rings[i].ring, &rep);
			failed |= rep.failed;
		}
		if (!failed)
			continue;
		/* Only this device: the other devices' rings never notice. */
		dev_disconnect(dev);
		dev_set_state(dev, XenbusStateClosing);
	}
}

void xbd_back_resize_all(struct xbd_back *bk)
{
	struct xbd_dev *dev;

	for (dev = bk->devs; dev; dev = dev->next)
		if (xbd_dev_connected(dev))
			dev_check_resize(dev);
}

void xbd_back_retry_refused(struct xbd_back *bk)
{
	for (struct xbd_dev *dev = bk->devs; dev; dev = dev->next)
		dev_storage_retry(dev);
}

void xbd_back_print_stats(struct xbd_back *bk)
{
	struct xbd_dev *dev;
	unsigned int i;

	for (dev = bk->devs; dev; dev = dev->next) {
		for (i = 0; i < dev->disk.nr_rings; i++) {
			struct xbd_ring_stats s;

			xbd_stats_snapshot(xbd_ring_stats(dev->rings[i].ring), &s);
			xbd_stats_print(stderr, xbd_ring_name(dev->rings[i].ring), &s);
		}
	}
	fflush(stderr);
}

const char *xbd_dev_state_name(const struct xbd_dev *dev)
{
	if (dev->life == XBD_DEV_DEAD)
		return "Dead";
	return xbd_xenbus_state_name(dev->state);
}

void xbd_back_count(const struct xbd_back *bk, struct xbd_back_count *n)
{
	const struct xbd_dev *dev, *o;

	*n = (struct xbd_back_count){ 0 };
	for (dev = bk->devs; dev; dev = dev->next) {
		n->disks++;
		n->connected += xbd_dev_connected(dev);
		/* A guest once, at its first device. */
		for (o = bk->devs; o != dev && o->disk.domid != dev->disk.domid; o = o->next)
			;
		n->guests += o == dev;
	}
}

void xbd_back_shutdown(struct xbd_back *bk)
{
	unsigned int i;

	for (i = 0; i <= bk->opts.nr_types; i++) {
		if (bk->watches[i])
			xbd_xs_unwatch(bk->xs, bk->watches[i]);
		bk->watches[i] = NULL;
	}
	/* A checkpoint's drained section would hold writes the rings must answer now. */
	track_shutdown(bk);
	/* Every ring drains at once, not one device after another, in workers too. */
	xbd_workers_shutdown(bk->workers);
	for (struct xbd_dev *dev = bk->devs; dev; dev = dev->next)
		for (i = 0; i < dev->disk.nr_rings; i++)
			xbd_ring_request_stop(dev->rings[i].ring);
	while (bk->zombies) {
		struct xbd_dev *dev = bk->zombies;

		bk->zombies = dev->next;
		dev_drain_release(dev);
		/* (A ring left running to its journal still reads its device.) */
		if (!bk->host.abandoned)
			dev_free(dev);
	}
	while (bk->devs) {
		struct xbd_dev *dev = bk->devs;

		dev_disconnect(dev);
		if (dev->nr_drain) {
			int st = dev->deferred_state;

			/* SIGTERM waits for every consumed request (see xbd-back.c). */
			dev_drain_release(dev);
			if (st >= 0)
				dev_write_state(dev, st);
		}
		/*
		 * Tidy: a device we were closing has now released everything,
		 * which is what Closed says; nobody would write it after us and
		 * the toolstack waits for it.  Connected and InitWait devices stay
		 * as they are, for the next xbd-back (see xbd-back.c).
		 */
		if (dev->state == XenbusStateClosing && dev->life == XBD_DEV_LIVE)
			dev_set_state(dev, XenbusStateClosed);
		/*
		 * Every consumed request was answered: the next daemon may resume.
		 * (Not if a worker died meanwhile: then its journals say what to do.)
		 */
		if (dev->state == XenbusStateConnected && dev->life == XBD_DEV_LIVE && !dev->disk.unclean)
			clean_stop_marker(dev, true);
		if (dev->fe_watch)
			xbd_xs_unwatch(bk->xs, dev->fe_watch);
		dev->fe_watch = NULL;
		bk->devs = dev->next;
		dev->queued = false;
		if (!bk->host.abandoned)
			dev_free(dev);
	}
	bk->pend_head = bk->pend_tail = NULL;
	xbd_vbd3_cleanup();
}
