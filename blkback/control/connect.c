/*
 * connect.c: a device's connection to its frontend (lifecycle.h): the
 * rings read from the frontend's keys, their journals opened and the
 * rings started where the device's rings run (here or its worker: the
 * answer may come later, as a mark), what a connect's outcome means for
 * the frontend's step, and the disconnect: rings told to stop without
 * waiting, released once drained.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blkback/control/lifecycle.h"
#include "blkback/control/tracking.h"
#include "blkback/datapath/journal.h"

/*
 * How many times in a row a connect starts again when the device's worker
 * died before its rings started (the supervisor's worker-restarts bounds
 * the deaths themselves; this, a worker that never lets a connect finish).
 */
#define XBD_CONNECT_WORKER_RETRIES 3

static int read_fe_uint(struct xbd_dev *dev, const char *dir, const char *k, uint64_t min,
			uint64_t max, uint64_t *out)
{
	char p[XBD_XS_PATH_MAX];

	if (xbd_xs_join(p, sizeof(p), dir, k))
		return -ENAMETOOLONG;
	return xbd_xs_read_uint(dev->bk->xs, XBT_NULL, p, min, max, out);
}

/*
 * ring-page-order + ring-refN, the deprecated num-ring-pages, or ring-ref.
 * The page count is per device (Linux blkfront writes ring-page-order in
 * the top directory even with several queues); a queue directory's own
 * value is accepted too.  The references are per queue (dir).
 */
static int read_ring(struct xbd_dev *dev, const char *dir, struct xbd_ring_params *rp)
{
	uint64_t v, max_pages = 1u << dev->disk.o.max_ring_order;
	unsigned int i, nr = 1;
	bool numbered = false;
	const char *odir = dev->fpath;
	char k[24], esc[XBD_LOG_STR_BUF];
	int err;

	err = read_fe_uint(dev, odir, "ring-page-order", 0, dev->disk.o.max_ring_order, &v);
	if (err == -ENOENT && strcmp(dir, odir)) {
		odir = dir;
		err = read_fe_uint(dev, odir, "ring-page-order", 0, dev->disk.o.max_ring_order, &v);
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
				DLOG(dev, XBD_LOG_WARNING, "num-ring-pages %" PRIu64 " is not a power of two", v);
				return -EINVAL;
			}
			nr = v;
			numbered = true;
		} else if (err != -ENOENT) {
			DLOG(dev, XBD_LOG_WARNING, "bad num-ring-pages (allowed 1..%" PRIu64 "): %s",
			     max_pages, strerror(-err));
			return err;
		}
	} else {
		DLOG(dev, XBD_LOG_WARNING, "bad ring-page-order (allowed 0..%u): %s",
		     dev->disk.o.max_ring_order, strerror(-err));
		return err;
	}
	rp->nr_pages = nr;
	for (i = 0; i < nr; i++) {
		if (numbered)
			snprintf(k, sizeof(k), "ring-ref%u", i);
		else
			snprintf(k, sizeof(k), "ring-ref");
		err = read_fe_uint(dev, dir, k, 0, UINT32_MAX, &v);
		if (err == -ENOENT && nr == 1 && numbered)
			err = read_fe_uint(dev, dir, "ring-ref", 0, UINT32_MAX, &v);
		if (err) {
			DLOG(dev, XBD_LOG_WARNING, "cannot read %s/%s: %s", xbd_log_str(esc, dir), k,
			     strerror(-err));
			return err;
		}
		rp->refs[i] = v;
	}
	err = read_fe_uint(dev, dir, "event-channel", 0, UINT32_MAX - 1, &v);
	if (err) {
		DLOG(dev, XBD_LOG_WARNING, "cannot read %s/event-channel: %s", xbd_log_str(esc, dir),
		     strerror(-err));
		return err;
	}
	rp->remote_port = v;
	return 0;
}

bool dev_drained(const struct xbd_dev *dev)
{
	unsigned int i;

	for (i = 0; i < dev->nr_drain; i++)
		if (!xbd_ring_exited(dev->drain[i].ring))
			return false;
	return true;
}

/* A restarted daemon waits this long for a dying process's journal lock (journal.h). */
#define JOURNAL_LOCK_WAIT_MS 2000

/* Ring idx's journal file of dev. */
static int ring_journal_path(const struct xbd_dev *dev, unsigned int idx, char *path, size_t len)
{
	return xbd_journal_path(path, len, dev->bk->journal_dir, dev->disk.type, dev->disk.domid,
				dev->disk.devid, idx);
}

/*
 * The crash journal's file for a ring about to start (journal.h): the one
 * a previous daemon left when the ring is to be taken over (none there:
 * the ring says so), else a fresh one.  No journal directory: none.
 */
static int ring_journal_open(struct xbd_dev *dev, unsigned int idx)
{
	struct xbd_ring_params *rp = &dev->rings[idx].p;
	struct xbd_journal_id id;
	char path[XBD_XS_PATH_MAX];
	int err;

	rp->journal_fd = -1;
	if (!dev->bk->journal_dir)
		return 0;
	err = ring_journal_path(dev, idx, path, sizeof(path));
	if (err)
		return err;
	if (rp->resume) {
		err = xbd_journal_file_open(path, JOURNAL_LOCK_WAIT_MS, &rp->journal_fd);
		return err == -ENOENT ? 0 : err;
	}
	xbd_ring_journal_id(&dev->disk, idx, rp, &id);
	return xbd_journal_file_create(path, &id, &rp->journal_fd);
}

/*
 * The ring has stopped (or never started): close its journal, and remove
 * it unless keep (the daemon stops and leaves it, consistent, for the
 * next one; a ring that goes for good takes its journal with it).
 */
static void ring_journal_release(const struct xbd_dev *dev, unsigned int idx,
				 struct xbd_ring_params *rp, bool keep)
{
	char path[XBD_XS_PATH_MAX];
	struct stat a, b;

	if (rp->journal_fd < 0)
		return;
	/* Only the file we hold: never a newer one made under the same name. */
	if (!keep && !ring_journal_path(dev, idx, path, sizeof(path)) && !fstat(rp->journal_fd, &a) &&
	    !stat(path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		unlink(path);
	close(rp->journal_fd);
	rp->journal_fd = -1;
}

/* Join the stopped threads (at once if drained) and release their rings. */
void dev_drain_release(struct xbd_dev *dev)
{
	unsigned int i;

	if (dev->nr_drain > dev->nr_last) {
		struct xbd_ring_stats *last = realloc(dev->last, dev->nr_drain * sizeof(*last));

		if (last) {
			memset(last + dev->nr_last, 0, (dev->nr_drain - dev->nr_last) * sizeof(*last));
			dev->last = last;
			dev->nr_last = dev->nr_drain;
		}
	}
	for (i = 0; i < dev->nr_drain; i++) {
		struct xbd_dev_ring *dr = &dev->drain[i];
		struct xbd_ring_report rep;

		if (!dr->ring)
			continue; /* never made (out of memory) */
		if (i < dev->nr_last)
			xbd_stats_snapshot(xbd_ring_stats(dr->ring), &dev->last[i]);
		xbd_ring_stop(dr->ring);
		xbd_ring_report(dr->ring, &rep);
		/* Left running to its journal: nothing of it is ours to release. */
		if (rep.abandoned)
			return;
		ring_journal_release(dev, i, &dr->p, dev->bk->host.stopping);
		/* The thread is gone: its counters are stable, keep them for xbdctl. */
		xbd_stats_sum(&dev->past, xbd_ring_stats(dr->ring));
		/* ... but nothing of it is in flight (a dead worker's ring may say so: stats.h). */
		dev->past.in_flight = 0;
		xbd_ring_free(dr->ring);
		dr->ring = NULL;
	}
	free(dev->drain);
	dev->drain = NULL;
	dev->nr_drain = 0;
	/* Every ring of the connection released: its worker forgets the device. */
	xbd_worker_dev_done(dev->wd);
}

/*
 * Stop the rings without waiting for the storage: a ring whose I/O hangs
 * (a frozen filesystem, a dead NFS server) or waits out the unmap grace
 * of its persistent grants must not hold up the control plane, which
 * serves every other guest.  The threads finish their in-flight requests
 * on their own and post wake_fd; the main loop then releases them
 * (xbd_back_handle_wake) and writes what waited for them.
 */
void dev_disconnect(struct xbd_dev *dev)
{
	unsigned int i;

	dev->connecting = false;
	if (!dev->rings)
		return;
	for (i = 0; i < dev->disk.nr_rings; i++)
		if (dev->rings[i].ring)
			xbd_ring_request_stop(dev->rings[i].ring);
	/* A device connects only when dev_drained (the CONNECT guard): drain is empty. */
	dev->drain = dev->rings;
	dev->nr_drain = dev->disk.nr_rings;
	dev->deferred_state = -1;
	dev->rings = NULL;
	dev->disk.nr_rings = 0;
	if (xbd_dev_connected(dev)) {
		/* A stop leaves it Connected for the next daemon: the daemon's stop line says so. */
		if (!dev->bk->host.stopping)
			DLOG(dev, XBD_LOG_INFO, "disconnected");
		dev_set_life(dev, XBD_DEV_LIVE);
	}
	/* Rings whose threads never started (a connect that failed) go at once. */
	if (dev_drained(dev))
		dev_drain_release(dev);
}

/* The rings of a draining device have all stopped: finish what waited for them. */
void dev_drain_done(struct xbd_dev *dev)
{
	int st = dev->deferred_state;

	dev_drain_release(dev);
	dev->deferred_state = -1;
	DLOG(dev, XBD_LOG_VERBOSE, "rings drained and released");
	if (dev->life == XBD_DEV_DEAD)
		dev_close_storage(dev);
	if (st >= 0)
		dev_write_state(dev, st);
	/* A step the frontend asked for meanwhile. */
	if (dev->life == XBD_DEV_LIVE)
		xbd_dev_mark(dev, XBD_DEV_PEND_FRONTEND);
}

static int dev_connect_finish(struct xbd_dev *dev);

/* Open ring idx's journal and start the ring: 0, -EINPROGRESS or -errno. */
static int ring_start(struct xbd_dev *dev, unsigned int idx)
{
	struct xbd_dev_ring *dr = &dev->rings[idx];

	dr->open_err = ring_journal_open(dev, idx);
	return dr->open_err ? dr->open_err : xbd_ring_start(dr->ring, &dr->p);
}

static int dev_connect(struct xbd_dev *dev)
{
	struct xbd_xs *xs = dev->bk->xs;
	char p[XBD_XS_PATH_MAX], *proto = NULL, esc[XBD_LOG_STR_BUF];
	uint64_t nq = 1;
	unsigned int i;
	bool fe_persistent = false;
	int err;

	if (!dev->disk.store) {
		err = dev_open_storage(dev);
		if (err)
			return err == -EINPROGRESS ? err : -ENODEV;
	}
	/* The domain's worker first: while it starts, the main loop goes on. */
	err = xbd_worker_bind(dev->wd, &dev->server);
	if (err)
		return err;
	if (xbd_xs_join(p, sizeof(p), dev->fpath, "protocol"))
		return -ENAMETOOLONG;
	err = xbd_xs_read_str(xs, XBT_NULL, p, &proto);
	if (err == -ENOENT) {
		dev->disk.abi = XBD_ABI_NATIVE;
	} else if (err || xbd_abi_from_protocol(proto, &dev->disk.abi)) {
		DLOG(dev, XBD_LOG_WARNING, "unknown protocol '%s'", xbd_log_str(esc, proto));
		free(proto);
		return -EINVAL;
	}
	free(proto);
	if (!xbd_xs_join(p, sizeof(p), dev->fpath, "feature-persistent") &&
	    xbd_xs_read_bool(xs, XBT_NULL, p, &fe_persistent))
		fe_persistent = false;
	dev->disk.persistent = dev->disk.o.persistent && fe_persistent && dev->disk.o.grants != XBD_GRANTS_COPY;
	/*
	 * Without persistent grants every batch would be mapped and unmapped:
	 * auto copies instead, as QEMU's qdisk does.  Mapping per batch also
	 * meets a Linux dom0 bug (see struct bk_retired): the pages must be
	 * unmapped before the response, while direct I/O may still hold them.
	 */
	dev->disk.copy = dev->disk.o.grants == XBD_GRANTS_COPY ||
		    (dev->disk.o.grants == XBD_GRANTS_AUTO && !dev->disk.persistent);
	if (!dev->disk.copy && !dev->disk.persistent &&
	    !strcmp(xbd_platform_name(dev->bk->host.plat), "xen"))
		DLOG(dev, XBD_LOG_WARNING, "grants = map without persistent grants: a Linux dom0 "
		     "may log 'Bad page map' for gntdev pages (grants = auto avoids it)");
	err = read_fe_uint(dev, dev->fpath, "multi-queue-num-queues", 1, dev->disk.o.max_queues, &nq);
	if (err && err != -ENOENT) {
		DLOG(dev, XBD_LOG_WARNING, "bad multi-queue-num-queues (allowed 1..%u)",
		     dev->disk.o.max_queues);
		return err;
	}
	if (err == -ENOENT)
		nq = 1;
	dev->rings = calloc(nq, sizeof(*dev->rings));
	if (!dev->rings)
		return -ENOMEM;
	dev->disk.nr_rings = nq;
	/* Every ring is releasable (xbd_ring_stop) before any is read. */
	for (i = 0; i < nq; i++) {
		dev->rings[i].p.journal_fd = dev->rings[i].p.evtchn_fd = dev->rings[i].p.cpu = -1;
		dev->rings[i].ring = xbd_ring_new(dev->server, &dev->disk, i);
		if (!dev->rings[i].ring) {
			err = -ENOMEM;
			goto fail;
		}
	}
	for (i = 0; i < nq; i++) {
		char qdir[XBD_XS_PATH_MAX];

		if (nq > 1) {
			if (xbd_xs_pathf(qdir, sizeof(qdir), "%s/queue-%u", dev->fpath, i)) {
				err = -ENAMETOOLONG;
				goto fail;
			}
		} else {
			snprintf(qdir, sizeof(qdir), "%s", dev->fpath);
		}
		err = read_ring(dev, qdir, &dev->rings[i].p);
		if (err)
			goto fail;
	}
	/* This connection's rings run in the domain's worker, or here (nbd, rbd). */
	err = xbd_worker_attach(dev->wd);
	if (err)
		goto fail;
	/* Its tracking where they run (a worker got it with the disk). */
	track_connect(dev);
	for (i = 0; i < nq; i++) {
		dev->rings[i].p.resume = dev->resuming;
		err = ring_start(dev, i);
		if (err && err != -EINPROGRESS)
			break;
	}
	dev->connecting = true;
	return dev_connect_finish(dev);
fail:
	dev->resuming = false;
	dev_disconnect(dev);
	return err;
}

/*
 * The second half of a connect, once every ring's start has been answered
 * (a worker's answer comes as a message: the main loop does not wait for
 * it, and marks the device when it comes).  -EINPROGRESS while one is
 * still due.
 */
static int dev_connect_finish(struct xbd_dev *dev)
{
	unsigned int i, redone = 0;
	int err = 0;

	for (i = 0; i < dev->disk.nr_rings; i++) {
		struct xbd_ring_report rep;

		xbd_ring_report(dev->rings[i].ring, &rep);
		if (rep.start_pending)
			return -EINPROGRESS;
	}
	for (i = 0; i < dev->disk.nr_rings && !err; i++) {
		struct xbd_dev_ring *dr = &dev->rings[i];
		struct xbd_ring_report rep;

		xbd_ring_report(dr->ring, &rep);
		err = dr->open_err ? dr->open_err : rep.start_err;
		if (err && dr->p.resume && dev->clean_stop && rep.journal_err &&
		    rep.journal_err != -EPROTO) {
			/* No journal that matches, but nothing was left unanswered. */
			xbd_ring_stop(dr->ring); /* what a failed start holds (a worker's slot) */
			ring_journal_release(dev, i, &dr->p, false);
			dr->p.resume = false;
			err = ring_start(dev, i);
			if (err == -EINPROGRESS)
				return err;
			xbd_ring_report(dr->ring, &rep);
		}
		if (err) {
			int je = rep.journal_err;

			if (dr->p.resume)
				xbd_log_limited(&dev->disk.crl, XBD_LOG_ERR, "%s: cannot take the live ring "
						"over: %s%s", xbd_ring_name(dr->ring), strerror(-err),
						je == -ENOENT ? " (no journal)"
						: je == -ESTALE ? " (the journal is of another ring)"
						: je == -EPROTO ? " (journal and ring disagree)"
						: je ? " (the journal cannot be used)"
						: err == -EBUSY ? " (another process still holds its journal)"
						: "");
			/* Rings not started are released by xbd_ring_stop too. */
			goto fail;
		}
		redone += rep.nredo;
	}
	dev->connecting = false;
	dev->worker_retries = 0;
	if (dev->resuming) {
		if (dev->clean_stop)
			DLOG(dev, XBD_LOG_INFO, "resumed after a clean stop");
		else
			DLOG(dev, XBD_LOG_INFO, "resumed after an unclean stop: %u request%s "
			     "re-executed", redone, redone == 1 ? "" : "s");
		dev->resuming = false;
	}
	/* Its name again: a migration's receiving end is renamed before it runs. */
	dev_read_domain(dev);
	dev_set_life(dev, XBD_DEV_CONNECTED);
	err = dev_advertise(dev);
	if (err)
		goto fail;
	dev_set_state(dev, XenbusStateConnected);
	DLOG(dev, XBD_LOG_INFO, "connected: %u queue%s, %u ring page%s, protocol %s, %s grants",
	     dev->disk.nr_rings, dev->disk.nr_rings > 1 ? "s" : "", dev->rings[0].p.nr_pages,
	     dev->rings[0].p.nr_pages > 1 ? "s" : "", xbd_abi_protocol(dev->disk.abi),
	     dev->disk.copy ? "copied" : dev->disk.persistent ? "persistent" : "mapped");
	return 0;
fail:
	dev->resuming = false;
	dev_disconnect(dev);
	return err;
}

/*
 * What a connect's outcome means for the frontend's step: true, connected
 * (the step is taken); false, the device waits (its storage's open or its
 * worker's start, which mark it again and are not counted against the
 * rate limit; its rings' answers) or was closed (its frontend's fault, or
 * one a connect cannot get past).  A worker that died before the rings
 * started is the supervisor's to replace: connect again, a few times.
 */
static bool connect_outcome(struct xbd_dev *dev, int err)
{
	if (err == -EINPROGRESS && !dev->connecting) {
		/* Only its storage's open or its worker's start: the connect counts when it comes. */
		dev_edge_refund(&dev->connect_limit);
		DLOG(dev, XBD_LOG_VERBOSE, "waiting for its %s", dev->open_job ?
		     "storage to open" : "worker to start");
		return false;
	}
	if (err == -ENODEV && !dev->disk.store && dev->open_err) {
		/*
		 * The storage's fault, not the frontend's: the device waits
		 * in InitWait while its open is tried again (the failure was
		 * said, and xbdctl list shows it), and connects once it opens;
		 * a refused one waits for the toolstack (its hotplug script
		 * failed the disk) or SIGHUP.
		 */
		dev_edge_refund(&dev->connect_limit);
		DLOG(dev, XBD_LOG_VERBOSE, "not connected%s: its storage %s (%s)",
		     dev->open_refused ? "" : " yet", dev->open_refused ? "was refused" : "did not open",
		     dev->open_why);
		return false;
	}
	if (err == -ESRCH && dev->worker_retries < XBD_CONNECT_WORKER_RETRIES) {
		/*
		 * Its worker died (or was killed for a deadline) before its
		 * rings started: the frontend did nothing wrong, and a closed
		 * disk would be lost to the guest for good.  The supervisor
		 * starts a new worker (within worker-restarts); connect again,
		 * which waits for it.
		 */
		dev->worker_retries++;
		DLOG(dev, XBD_LOG_WARNING, "its worker ended before its rings started: "
		     "connecting again with a new one");
		err = dev_connect(dev);
	}
	if (err == -EINPROGRESS) {
		DLOG(dev, XBD_LOG_DEBUG, "waiting for its worker to start its rings");
		return false;
	}
	if (err) {
		DLOG(dev, XBD_LOG_ERR, "cannot connect to the frontend (%s), closing", strerror(-err));
		dev_set_state(dev, XenbusStateClosing);
		return false;
	}
	return true;
}

bool dev_connect_step(struct xbd_dev *dev)
{
	int err;

	if (dev->nr_drain)
		return false;
	if (dev->connecting) {
		/* Its rings' starts were asked for: this mark is an answer. */
		err = dev_connect_finish(dev);
		if (err == -EINPROGRESS)
			return false;
	} else {
		if (!dev_edge_allowed(dev, &dev->connect_limit, "the frontend reconnects"))
			return false;
		err = dev_connect(dev);
	}
	return connect_outcome(dev, err);
}
