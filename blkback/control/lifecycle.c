/*
 * lifecycle.c: xbd-back's control plane for one device, in the main thread.
 * Opens the device's storage, advertises the blkif.h features, drives the
 * XenbusState machine of xenstore/xenbus.h against the frontend (with
 * xbd's own rules as guards on its edges), and tears the device down on
 * frontend close, toolstack removal (state=5, online=0), a corrupt ring,
 * or the death of the frontend's domain.  Devices are found by
 * discovery.c.
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

#include "blkback/control/device.h"
#include "blkback/datapath/journal.h"
#include "blkback/engines/engine-file.h"
#include "blkback/datapath/throttle.h"
#include "common/clock.h"

/*
 * Rate limit on the edges that cost writes or threads, per device and per
 * kind of edge: a burst of EDGE_BURST, then one per EDGE_INTERVAL_MS.  A
 * guest that flips its state makes us map rings and start threads, or
 * write about 15 feature keys, each time; beyond the burst it waits (its
 * disk connects late, nobody else notices).
 */
/*
 * How many times in a row a connect starts again when the device's worker
 * died before its rings started (the supervisor's worker-restarts bounds
 * the deaths themselves; this, a worker that never lets a connect finish).
 */
#define XBD_CONNECT_WORKER_RETRIES 3
#define EDGE_BURST 4
#define EDGE_INTERVAL_MS 250

/* At most this many steps per pass: a skipped state yields two. */
#define PASS_STEPS 3

static int read_bkey_str(struct xbd_dev *dev, const char *k, char **out)
{
	char p[XBD_XS_PATH_MAX];

	if (xbd_xs_join(p, sizeof(p), dev->bpath, k))
		return -ENAMETOOLONG;
	return xbd_xs_read_str(dev->bk->xs, XBT_NULL, p, out);
}

static bool read_bkey_bool(struct xbd_dev *dev, const char *k, bool dflt)
{
	char p[XBD_XS_PATH_MAX];
	bool v;

	if (xbd_xs_join(p, sizeof(p), dev->bpath, k) ||
	    xbd_xs_read_bool_default(dev->bk->xs, XBT_NULL, p, dflt, &v))
		return dflt;
	return v;
}

/* Write our state (unless the toolstack has removed the directory meanwhile). */
static void write_state(struct xbd_dev *dev, enum xenbus_state st)
{
	int err = xbd_xenbus_switch_state(dev->bk->xs, dev->bpath, st);

	if (err && err != -ENOENT)
		DLOG(dev, XBD_LOG_WARNING, "cannot write state %d: %s", (int)st, strerror(-err));
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

/*
 * May the device take an edge of this kind now?  If not, a retry is
 * scheduled for when it may, and the first refusal since the guest was
 * last quiet says so in the log.
 */
static bool edge_allowed(struct xbd_dev *dev, struct xbd_edge_limit *l, const char *what)
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

/* Give back the edge edge_allowed() just let through (it did not happen after all). */
static void edge_refund(struct xbd_edge_limit *l)
{
	/* edge_allowed() left tat_ms at least EDGE_INTERVAL_MS past its now. */
	l->tat_ms -= EDGE_INTERVAL_MS;
}

/* ---- storage ---- */

static void update_limits(struct xbd_dev *dev, uint64_t size)
{
	struct xbd_limits *l = &dev->disk.lim;

	__atomic_store_n(&l->nr_sectors, size >> XBD_SECTOR_SHIFT, __ATOMIC_RELAXED);
	l->sector_size = dev->caps.logical_block;
	l->max_indirect_segs = dev->disk.o.barrier ? 0 : dev->disk.o.max_indirect_segs;
	l->readonly = dev->readonly;
	l->flush = !dev->disk.o.barrier;
	l->barrier = dev->disk.o.barrier;
	l->discard = dev->caps.discard && dev->discard_enable && !dev->readonly;
	l->discard_secure = l->discard && dev->caps.discard_secure;
}

/*
 * The toolstack's mode: writable only if it contains a 'w', as Linux
 * blkback and QEMU decide; anything else, a missing node included, is
 * read-only, and a value we do not know is named in a warning.
 */
static bool mode_readonly(struct xbd_dev *dev, const char *mode)
{
	char esc[XBD_LOG_STR_BUF];
	bool ro;

	if (!mode) {
		DLOG(dev, XBD_LOG_WARNING, "no mode in the backend directory: serving it read-only");
		return true;
	}
	ro = !strchr(mode, 'w');
	if (strcmp(mode, "r") && strcmp(mode, "ro") && strcmp(mode, "w") && strcmp(mode, "rw"))
		DLOG(dev, XBD_LOG_WARNING, "mode '%s' is not r, ro, w or rw: serving it %s "
		     "(writable only with a 'w')", xbd_log_str(esc, mode), ro ? "read-only" : "read-write");
	return ro;
}

/* The engine's size watch (any thread): flag the disk, wake the main loop. */
static void size_changed(void *arg)
{
	struct xbd_dev *dev = arg;
	uint64_t one = 1;

	__atomic_store_n(&dev->size_changed, true, __ATOMIC_RELEASE);
	if (write(dev->bk->host.wake_fd, &one, sizeof(one)) < 0) {
		/* Counter already set: main wakes anyway. */
	}
}

/*
 * A storage open that may wait on a server (nbd, rbd: the engine's
 * open_remote) runs on a thread of its own, detached: the main loop never
 * waits for a handshake or a monitor that does not answer.  The job is
 * shared by the thread and the device until both let go (a device freed
 * meanwhile just lets go; the store is then closed by the thread).
 */
struct xbd_open_job {
	const struct xbd_engine *eng;
	char *target;
	bool readonly;
	struct xbd_disk_opts o;
	struct xbd_store *store;
	int err;
	int wake_fd;             /* a copy of the daemon's wake_fd: written when done */
	unsigned int refs;       /* atomic: the thread's and the device's */
	bool done;               /* atomic */
};

/* A failed open is tried again after 1 s, then 2, 4 ... at most 60 s apart. */
#define OPEN_BACKOFF_MIN_MS 1000
#define OPEN_BACKOFF_MAX_MS 60000

static void open_job_put(struct xbd_open_job *j)
{
	if (__atomic_sub_fetch(&j->refs, 1, __ATOMIC_ACQ_REL))
		return;
	if (j->store)
		j->eng->close(j->store);
	free(j->target);
	close(j->wake_fd);
	free(j);
}

static void *open_thread(void *arg)
{
	struct xbd_open_job *j = arg;
	uint64_t one = 1;

	j->err = j->eng->open(j->target, j->readonly, &j->o, &j->store);
	if (j->err)
		j->store = NULL;
	__atomic_store_n(&j->done, true, __ATOMIC_RELEASE);
	if (write(j->wake_fd, &one, sizeof(one)) < 0) {
		/* Counter already set: the main loop wakes anyway. */
	}
	open_job_put(j);
	return NULL;
}

/* Start j's open on its thread: 0, or -errno (nothing started). */
static int open_job_start(struct xbd_dev *dev, const char *target)
{
	struct xbd_open_job *j = calloc(1, sizeof(*j));
	pthread_attr_t at;
	pthread_t t;
	int err;

	if (!j)
		return -ENOMEM;
	j->eng = dev->disk.eng;
	j->readonly = dev->readonly;
	j->o = dev->disk.o;
	j->target = strdup(target);
	j->wake_fd = fcntl(dev->bk->host.wake_fd, F_DUPFD_CLOEXEC, 0);
	j->refs = 2;
	if (!j->target || j->wake_fd < 0) {
		err = j->target ? -errno : -ENOMEM;
		goto fail;
	}
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	err = -pthread_create(&t, &at, open_thread, j);
	pthread_attr_destroy(&at);
	if (err)
		goto fail;
	dev->open_job = j;
	return 0;
fail:
	if (j->wake_fd >= 0)
		close(j->wake_fd);
	free(j->target);
	free(j);
	return err;
}

/* The device lets go of its open (freed, or done with it). */
static void open_job_drop(struct xbd_dev *dev)
{
	if (!dev->open_job)
		return;
	open_job_put(dev->open_job);
	dev->open_job = NULL;
}

/*
 * An open failed: said once per change of outcome (not per try), and
 * tried again later with backoff (xbd_back_timer).
 */
static void open_failed(struct xbd_dev *dev, int err, const char *shown)
{
	char esc[XBD_LOG_STR_BUF];
	unsigned int backoff = OPEN_BACKOFF_MIN_MS;

	for (unsigned int i = 0; i < dev->open_tries && backoff < OPEN_BACKOFF_MAX_MS; i++)
		backoff *= 2;
	if (backoff > OPEN_BACKOFF_MAX_MS)
		backoff = OPEN_BACKOFF_MAX_MS;
	dev->open_tries++;
	dev->open_retry_ms = xbd_mono_ms() + backoff;
	if (err != dev->open_err)
		DLOG(dev, XBD_LOG_ERR, "cannot open '%s': %s (tried again after 1 s, then less "
		     "often, up to every %u s; xbdctl list shows the last error)",
		     xbd_log_str(esc, shown), strerror(-err), OPEN_BACKOFF_MAX_MS / 1000);
	dev->open_err = err;
}

/* The store is open: what it can do, its size; 0 or -errno (then closed). */
static int open_done(struct xbd_dev *dev, const char *shown)
{
	char esc[XBD_LOG_STR_BUF];
	uint64_t size = 0;
	int err;

	dev->disk.eng->capabilities(dev->disk.store, &dev->caps);
	if (dev->caps.readonly_only && !dev->readonly) {
		/* An RBD snapshot, a read-only NBD export: the guest gets a read-only disk. */
		DLOG(dev, XBD_LOG_INFO, "%s can only be read: served read-only",
		     xbd_log_str(esc, shown));
		dev->readonly = true;
	}
	if (dev->disk.eng->watch_size)
		dev->disk.eng->watch_size(dev->disk.store, size_changed, dev);
	/* A server that allows one connection (NBD without multi-conn) gets one ring. */
	if (dev->caps.max_queues && dev->disk.o.max_queues > dev->caps.max_queues)
		dev->disk.o.max_queues = dev->caps.max_queues;
	err = dev->disk.eng->size(dev->disk.store, &size);
	if (err) {
		DLOG(dev, XBD_LOG_ERR, "cannot read the size of '%s': %s", xbd_log_str(esc, shown),
		     strerror(-err));
		dev->disk.eng->close(dev->disk.store);
		dev->disk.store = NULL;
		return err;
	}
	if (size < 512) {
		if (dev->open_err != -EINVAL) /* once per change of outcome */
			DLOG(dev, XBD_LOG_ERR, "'%s' is empty (%" PRIu64 " bytes): a disk needs at "
			     "least one 512-byte sector (make it bigger, or check params)",
			     xbd_log_str(esc, shown), size);
		dev->disk.eng->close(dev->disk.store);
		dev->disk.store = NULL;
		dev->open_err = -EINVAL; /* said: not again by open_failed */
		return -EINVAL;
	}
	update_limits(dev, size);
	dev->open_err = 0;
	dev->open_tries = 0;
	dev->open_retry_ms = 0;
	DLOG(dev, XBD_LOG_INFO, "opened %s (%s engine, %" PRIu64 " sectors, %s, cache %s%s%s%s)",
	     xbd_log_str(esc, shown), dev->disk.eng->name, dev->disk.lim.nr_sectors,
	     dev->readonly ? "read-only" : "read-write", xbd_cache_mode_name(dev->disk.o.cache),
	     dev->caps.page_cache ? ", dom0's page cache" : "",
	     dev->disk.o.barrier ? ", barrier mode" : "",
	     dev->disk.o.grants == XBD_GRANTS_COPY ? ", grant copy" : "");
	return 0;
}

static int advertise(struct xbd_dev *dev);

/*
 * A remote open has finished: take its store, or note its failure.  A
 * device that was offered meanwhile (InitWait) gets its keys again, now
 * with the size, and its frontend's next step is taken.  0, -EINPROGRESS
 * while it runs, or the failure.
 */
static int open_collect(struct xbd_dev *dev)
{
	struct xbd_open_job *j = dev->open_job;
	char shown[XBD_PARAMS_LOG_MAX];
	const char *target;
	int err;

	if (!j)
		return dev->disk.store ? 0 : dev->open_err ? dev->open_err : -ENODEV;
	if (!__atomic_load_n(&j->done, __ATOMIC_ACQUIRE))
		return -EINPROGRESS;
	target = j->target;
	xbd_params_for_log(target, shown, sizeof(shown));
	err = j->err;
	if (!err) {
		dev->disk.store = j->store;
		j->store = NULL;
		err = open_done(dev, shown);
	}
	if (err)
		open_failed(dev, err, shown);
	open_job_drop(dev);
	if (!err && dev->state == XenbusStateInitWait)
		advertise(dev);
	xbd_dev_mark(dev, XBD_DEV_PEND_FRONTEND);
	return err;
}

/*
 * A disk image served raw shows the guest the image's metadata in place
 * of its data, and lets it overwrite that metadata (a backing file's name
 * included) for whoever opens the image next as what it is.  True: dev
 * must not open it (one line said why and what to do).  LUKS is the one
 * header served: a guest that encrypted its own whole disk writes it.
 */
static bool refuse_image(struct xbd_dev *dev, const char *target, const char *shown)
{
	const char *fmt = dev->disk.o.format_check ? xbd_file_image_format(target) : NULL;
	char esc[XBD_LOG_STR_BUF];

	if (!fmt)
		return false;
	if (!strcmp(fmt, "LUKS")) {
		DLOG(dev, XBD_LOG_WARNING, "'%s' starts with a LUKS header: served as it is, the "
		     "guest sees it encrypted (for dom0 to decrypt it, give the opened "
		     "/dev/mapper device)", xbd_log_str(esc, shown));
		return false;
	}
	if (dev->open_err != -EMEDIUMTYPE) /* once per change of outcome */
		DLOG(dev, XBD_LOG_ERR, "'%s' is a %s image, not a raw disk: refused (serve it "
		     "through NBD, e.g. qemu-storage-daemon, see xbd-back.conf(5); or, if its guest "
		     "wrote that header itself, set format-check = 0 in a [disk] section for it)",
		     xbd_log_str(esc, shown), fmt);
	return true;
}

/*
 * Open the device's storage from its params: at once for a local file or
 * device, on a thread of its own for a remote one (-EINPROGRESS until it
 * is done: open_collect).  A failure waits out its backoff: until then
 * the same error comes back without a try.
 */
static int open_storage(struct xbd_dev *dev)
{
	char *mode = NULL, *dtype = NULL, esc[XBD_LOG_STR_BUF];
	const char *target;
	char shown[XBD_PARAMS_LOG_MAX];
	int err;

	if (dev->open_job)
		return open_collect(dev);
	if (dev->open_err && xbd_mono_ms() < dev->open_retry_ms)
		return dev->open_err;
	free(dev->params);
	dev->params = NULL;
	err = read_bkey_str(dev, "params", &dev->params);
	if (err || !dev->params[0])
		return err ? err : -ENOENT;
	/*
	 * libxl's tap disks (backend/vbd3, backendtype=tap) put the image's
	 * format first, "aio:" for raw: the toolstack's word, not the
	 * admin's, so it neither names our engine nor takes part in [disk]
	 * patterns.  A VHD image is refused here.
	 */
	if (!strcmp(dev->disk.type, "vbd3")) {
		if (!strncmp(dev->params, "aio:", 4)) {
			memmove(dev->params, dev->params + 4, strlen(dev->params + 4) + 1);
		} else if (!strncmp(dev->params, "vhd:", 4)) {
			DLOG(dev, XBD_LOG_ERR, "params '%s' is a VHD image: xbd-back serves raw images "
			     "(format=raw)", xbd_log_str(esc, dev->params));
			return -EINVAL;
		}
		if (!dev->params[0])
			return -ENOENT;
	}
	/* The daemon's defaults, then any --disk settings for this params. */
	xbd_disk_opts_for(&dev->bk->opts, dev->params, &dev->disk.o);
	{
		/* Two rules may each set half of a limit and its burst: checked together here. */
		char why[200];

		if (xbd_iolimits_check(&dev->disk.o, why, sizeof(why)))
			DLOG(dev, XBD_LOG_WARNING, "its settings together: %s: that burst is ignored",
			     why);
	}
	err = read_bkey_str(dev, "mode", &mode);
	dev->readonly = mode_readonly(dev, err ? NULL : mode);
	free(mode);
	dev->cdrom = false;
	if (!read_bkey_str(dev, "device-type", &dtype))
		dev->cdrom = !strcmp(dtype, "cdrom");
	free(dtype);
	dev->discard_enable = read_bkey_bool(dev, "discard-enable", true);
	dev->removable = read_bkey_bool(dev, "removable", false);

	dev->disk.eng = xbd_engine_choose(dev->params, &dev->disk.o, &target);
	if (!dev->disk.eng) {
		DLOG(dev, XBD_LOG_ERR, "params '%s' names no storage engine",
		     xbd_log_str(esc, dev->params));
		return -EINVAL;
	}
	/* Log lines show params without the values of secret keys (rbd's key=). */
	xbd_params_for_log(target, shown, sizeof(shown));
	if (dev->disk.eng->open_remote) {
		err = open_job_start(dev, target);
		if (!err)
			return -EINPROGRESS;
	} else if (dev->disk.eng->file && refuse_image(dev, target, shown)) {
		/* Said once (refuse_image), not again by open_failed. */
		err = dev->open_err = -EMEDIUMTYPE;
	} else {
		err = dev->disk.eng->open(target, dev->readonly, &dev->disk.o, &dev->disk.store);
	}
	if (!err)
		err = open_done(dev, shown);
	if (err) {
		dev->disk.store = NULL;
		open_failed(dev, err, shown);
	}
	return err;
}

static void close_storage(struct xbd_dev *dev)
{
	/* An open still running: its thread closes what it opens. */
	open_job_drop(dev);
	/* A ring left running at the stop deadline still uses it, until the daemon ends. */
	if (dev->bk->host.abandoned)
		return;
	if (dev->disk.store)
		dev->disk.eng->close(dev->disk.store);
	dev->disk.store = NULL;
	dev->open_err = 0;
	dev->open_tries = 0;
	dev->open_retry_ms = 0;
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

static int advertise(struct xbd_dev *dev)
{
	int err = xbd_xs_transact(dev->bk->xs, advertise_txn, dev);

	if (err && err != -ENOENT)
		DLOG(dev, XBD_LOG_WARNING, "cannot write the backend features: %s", strerror(-err));
	return err;
}

/* ---- connecting to the frontend ---- */

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

static bool drained(const struct xbd_dev *dev)
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
static void drain_release(struct xbd_dev *dev)
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
		xbd_ring_free(dr->ring);
		dr->ring = NULL;
	}
	free(dev->drain);
	dev->drain = NULL;
	dev->nr_drain = 0;
	/* Every ring of the connection released: its worker forgets the device. */
	xbd_worker_dev_done(dev->wd);
}

static void dev_free(struct xbd_dev *dev)
{
	xbd_vbd3_unpublish(dev);
	xbd_wdev_free(dev->wd);
	close_storage(dev);
	xbd_disk_throttle_release(&dev->disk, false);
	xbd_ratelimit_destroy(&dev->disk.rl);
	xbd_ratelimit_destroy(&dev->disk.crl);
	free(dev->last);
	free(dev->params);
	free(dev);
}

/*
 * Stop the rings without waiting for the storage: a ring whose I/O hangs
 * (a frozen filesystem, a dead NFS server) or waits out the unmap grace
 * of its persistent grants must not hold up the control plane, which
 * serves every other guest.  The threads finish their in-flight requests
 * on their own and post wake_fd; the main loop then releases them
 * (xbd_back_handle_wake) and writes what waited for them.
 */
static void dev_disconnect(struct xbd_dev *dev)
{
	unsigned int i;

	dev->connecting = false;
	if (!dev->rings)
		return;
	for (i = 0; i < dev->disk.nr_rings; i++)
		if (dev->rings[i].ring)
			xbd_ring_request_stop(dev->rings[i].ring);
	/* A device connects only when drained (the CONNECT guard): drain is empty. */
	dev->drain = dev->rings;
	dev->nr_drain = dev->disk.nr_rings;
	dev->deferred_state = -1;
	dev->rings = NULL;
	dev->disk.nr_rings = 0;
	if (xbd_dev_connected(dev)) {
		DLOG(dev, XBD_LOG_INFO, "disconnected");
		dev->life = XBD_DEV_LIVE;
	}
	/* Rings whose threads never started (a connect that failed) go at once. */
	if (drained(dev))
		drain_release(dev);
}

/* The rings of a draining device have all stopped: finish what waited for them. */
static void dev_drain_done(struct xbd_dev *dev)
{
	int st = dev->deferred_state;

	drain_release(dev);
	dev->deferred_state = -1;
	DLOG(dev, XBD_LOG_VERBOSE, "rings drained and released");
	if (dev->life == XBD_DEV_DEAD)
		close_storage(dev);
	if (st >= 0)
		write_state(dev, st);
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
		err = open_storage(dev);
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
	dev->life = XBD_DEV_CONNECTED;
	err = advertise(dev);
	if (err)
		goto fail;
	set_state(dev, XenbusStateConnected);
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
	int err;

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
			if (!edge_allowed(dev, &dev->offer_limit, "the frontend starts over"))
				return;
			if (!dev->disk.store)
				open_storage(dev); /* a failure is reported again at connect */
			advertise(dev);
			set_state(dev, XenbusStateInitWait);
			break;
		case XBD_XENBUS_STEP_CONNECT:
			if (dev->nr_drain)
				return;
			if (dev->connecting) {
				/* Its rings' starts were asked for: this mark is an answer. */
				err = dev_connect_finish(dev);
				if (err == -EINPROGRESS)
					return;
			} else {
				if (!edge_allowed(dev, &dev->connect_limit, "the frontend reconnects"))
					return;
				err = dev_connect(dev);
			}
			if (err == -EINPROGRESS && !dev->connecting) {
				/*
				 * Only its storage's open or its worker's start: the connect
				 * comes when that is done, and counts then.
				 */
				edge_refund(&dev->connect_limit);
				DLOG(dev, XBD_LOG_VERBOSE, "waiting for its %s", dev->open_job ?
				     "storage to open" : "worker to start");
				return;
			}
			if (err == -ENODEV && !dev->disk.store && dev->open_err) {
				/*
				 * The storage's fault, not the frontend's: the device waits
				 * in InitWait while its open is tried again (the failure was
				 * said, and xbdctl list shows it), and connects once it opens.
				 */
				edge_refund(&dev->connect_limit);
				DLOG(dev, XBD_LOG_VERBOSE, "not connected yet: its storage did not open "
				     "(%s)", strerror(-dev->open_err));
				return;
			}
			if (err == -ESRCH && dev->worker_retries < XBD_CONNECT_WORKER_RETRIES) {
				/*
				 * Its worker died (or was killed for a deadline) before
				 * its rings started: the frontend did nothing wrong, and
				 * a closed disk would be lost to the guest for good.  The
				 * supervisor starts a new worker (within worker-restarts);
				 * connect again, which waits for it.
				 */
				dev->worker_retries++;
				DLOG(dev, XBD_LOG_WARNING, "its worker ended before its rings started: "
				     "connecting again with a new one");
				err = dev_connect(dev);
			}
			if (err == -EINPROGRESS) {
				DLOG(dev, XBD_LOG_DEBUG, "waiting for its worker to start its rings");
				return;
			}
			if (err) {
				DLOG(dev, XBD_LOG_ERR, "cannot connect to the frontend (%s), closing",
				     strerror(-err));
				set_state(dev, XenbusStateClosing);
				return;
			}
			break;
		case XBD_XENBUS_STEP_CLOSING:
			dev_disconnect(dev);
			set_state(dev, XenbusStateClosing);
			break;
		case XBD_XENBUS_STEP_CLOSED:
			dev_disconnect(dev);
			set_state(dev, XenbusStateClosed);
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
	uint64_t v;
	int st;

	if (read_bkey_str(dev, "frontend", &fe) || !fe[0] || strlen(fe) >= sizeof(dev->fpath)) {
		free(fe);
		return;
	}
	snprintf(dev->fpath, sizeof(dev->fpath), "%s", fe);
	free(fe);
	if (!xbd_xs_join(p, sizeof(p), dev->bpath, "frontend-id") &&
	    !xbd_xs_read_uint(xs, XBT_NULL, p, 0, DOMID_FIRST_RESERVED - 1, &v) && v != dev->disk.domid)
		DLOG(dev, XBD_LOG_WARNING, "frontend-id %" PRIu64 " differs from the path", v);
	dev->life = XBD_DEV_LIVE;
	st = xbd_domain_state(dev->bk->host.plat, dev->disk.domid);
	if (st == XBD_DOMAIN_DYING || st == XBD_DOMAIN_GONE) {
		/* Died before we saw it: the toolstack will remove the directory. */
		xbd_dev_kill(dev, st == XBD_DOMAIN_DYING ? "its domain is dying" : "its domain is gone");
		return;
	}
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
		 * libxl waits 10 s for InitWait before it even runs the hotplug
		 * script, so we get there at once.
		 */
		dev->state = XenbusStateInitialising;
		edge_allowed(dev, &dev->offer_limit, "the frontend starts over");
		advertise(dev);
		set_state(dev, XenbusStateInitWait);
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
		if (xbd_xenbus_read_state(xs, dev->fpath) == XenbusStateConnected &&
		    (dev->bk->journal_dir || dev->clean_stop)) {
			dev->resuming = true;
			dev->state = XenbusStateInitWait;
			advertise(dev);
			DLOG(dev, XBD_LOG_INFO, "found Connected, taking the live ring over%s",
			     dev->clean_stop ? " after a clean stop" : "");
			break;
		}
		if (!dev->clean_stop) {
			/*
			 * Died without answering what it had consumed, and no
			 * journal to say what: responses share the ring's slots
			 * with requests, so slots between rsp_prod and req_prod
			 * may hold unpushed responses, and consuming them again
			 * would run garbage requests against the disk.  Close, so
			 * the frontend reconnects with fresh rings.
			 */
			DLOG(dev, XBD_LOG_ERR, "found Connected after an unclean stop and no journal: "
			     "the ring cannot be trusted, closing so the frontend reconnects");
			dev->state = XenbusStateClosing;
			set_state(dev, XenbusStateClosing);
			break;
		}
		/* The frontend has moved on (a new ring): offer the device as usual. */
		dev->state = XenbusStateInitWait;
		advertise(dev);
		DLOG(dev, XBD_LOG_INFO, "found Connected, the frontend %s: offering it again",
		     xbd_xenbus_state_name(xbd_xenbus_read_state(xs, dev->fpath)));
		break;
	default:
		dev->state = XenbusStateInitWait;
		advertise(dev);
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

static void check_resize(struct xbd_dev *dev)
{
	uint64_t size, old = __atomic_load_n(&dev->disk.lim.nr_sectors, __ATOMIC_RELAXED);
	char p[XBD_XS_PATH_MAX];

	if (!dev->disk.store || dev->disk.eng->size(dev->disk.store, &size))
		return;
	if (size >> XBD_SECTOR_SHIFT == old)
		return;
	__atomic_store_n(&dev->disk.lim.nr_sectors, size >> XBD_SECTOR_SHIFT, __ATOMIC_RELAXED);
	xbd_worker_resize(dev->wd);
	DLOG(dev, XBD_LOG_INFO, "resized: %" PRIu64 " -> %" PRIu64 " sectors", old,
	     size >> XBD_SECTOR_SHIFT);
	if (xbd_xs_join(p, sizeof(p), dev->bpath, "sectors"))
		return;
	xbd_xs_write_uint(dev->bk->xs, XBT_NULL, p, size >> XBD_SECTOR_SHIFT);
	/* Rewriting state fires the frontend's watch (what Linux blkback does). */
	if (dev->state == XenbusStateConnected)
		set_state(dev, XenbusStateConnected);
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
	dev->online = read_bkey_bool(dev, "online", true);

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
		set_state(dev, XenbusStateClosed);
		return true;
	}
	if (bs == XenbusStateClosed && dev->state != XenbusStateClosed) {
		dev_disconnect(dev);
		dev->state = XenbusStateClosed;
		return true;
	}
	if (!dev->disk.store && dev->state == XenbusStateInitWait && !open_storage(dev))
		advertise(dev);
	if (xbd_dev_connected(dev))
		check_resize(dev);
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
	dev->life = XBD_DEV_NEW;
	dev->state = XenbusStateUnknown;
	dev->online = true;
	dev->deferred_state = -1;
	dev->disk.o = bk->opts.disk;
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
	dev->life = XBD_DEV_REMOVED;
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
	if (!dev->nr_drain)
		close_storage(dev); /* else once drained (dev_drain_done) */
	dev->life = XBD_DEV_DEAD;
	set_state(dev, XenbusStateClosed);
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
		if (dev->open_err && !dev->disk.store && !dev->open_job && dev->life == XBD_DEV_LIVE &&
		    (!due || dev->open_retry_ms < due))
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
		if (dev->open_err && !dev->disk.store && !dev->open_job && dev->open_retry_ms <= now &&
		    dev->life == XBD_DEV_LIVE && !open_storage(dev)) {
			if (dev->state == XenbusStateInitWait)
				advertise(dev);
			xbd_dev_mark(dev, XBD_DEV_PEND_FRONTEND); /* a connect that waited for it */
		}
	}
	if (bk->size_check_ms && bk->size_check_ms <= now) {
		/* Set again by arm_timer while a connected disk needs it. */
		bk->size_check_ms = 0;
		for (dev = bk->devs; dev; dev = dev->next) {
			if (size_polled(dev))
				check_resize(dev);
			if (periodic(dev))
				vbd3_refresh(dev);
		}
	}
	/* xbd_back_run reports what the rate limits suppressed and re-arms. */
}

void xbd_back_handle_wake(struct xbd_back *bk)
{
	struct xbd_dev *dev, **pp;
	unsigned int i;

	for (pp = &bk->zombies; *pp;) {
		dev = *pp;
		if (!drained(dev)) {
			pp = &dev->next;
			continue;
		}
		*pp = dev->next;
		drain_release(dev);
		DLOG(dev, XBD_LOG_VERBOSE, "rings drained and released");
		dev_free(dev);
	}
	for (dev = bk->devs; dev; dev = dev->next)
		if (dev->nr_drain && drained(dev))
			dev_drain_done(dev);

	/* Storage opens that finished on their threads. */
	for (dev = bk->devs; dev; dev = dev->next)
		if (dev->open_job && __atomic_load_n(&dev->open_job->done, __ATOMIC_ACQUIRE))
			open_collect(dev);

	for (dev = bk->devs; dev; dev = dev->next)
		if (__atomic_exchange_n(&dev->size_changed, false, __ATOMIC_ACQ_REL))
			check_resize(dev);

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
		set_state(dev, XenbusStateClosing);
	}
}

void xbd_back_resize_all(struct xbd_back *bk)
{
	struct xbd_dev *dev;

	for (dev = bk->devs; dev; dev = dev->next)
		if (xbd_dev_connected(dev))
			check_resize(dev);
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

void xbd_back_shutdown(struct xbd_back *bk)
{
	unsigned int i;

	for (i = 0; i <= bk->opts.nr_types; i++) {
		if (bk->watches[i])
			xbd_xs_unwatch(bk->xs, bk->watches[i]);
		bk->watches[i] = NULL;
	}
	/* Every ring drains at once, not one device after another, in workers too. */
	xbd_workers_shutdown(bk->workers);
	for (struct xbd_dev *dev = bk->devs; dev; dev = dev->next)
		for (i = 0; i < dev->disk.nr_rings; i++)
			xbd_ring_request_stop(dev->rings[i].ring);
	while (bk->zombies) {
		struct xbd_dev *dev = bk->zombies;

		bk->zombies = dev->next;
		drain_release(dev);
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
			drain_release(dev);
			if (st >= 0)
				write_state(dev, st);
		}
		/*
		 * Tidy: a device we were closing has now released everything,
		 * which is what Closed says; nobody would write it after us and
		 * the toolstack waits for it.  Connected and InitWait devices stay
		 * as they are, for the next xbd-back (see xbd-back.c).
		 */
		if (dev->state == XenbusStateClosing && dev->life == XBD_DEV_LIVE)
			set_state(dev, XenbusStateClosed);
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
