/*
 * storage.c: a device's storage (lifecycle.h): its settings and engine
 * from params, the open (at once for a file or block device, on a thread
 * of its own for a server that may not answer: the main loop never waits
 * for a handshake or a Ceph monitor), a failure's backoff and its one
 * line per change of outcome, what the store can do and its size, the
 * close, and its size read again (online resize).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blkback/control/lifecycle.h"
#include "blkback/control/tracking.h"
#include "blkback/engines/engine-file.h"
#include "common/clock.h"

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
 * read-only, and a value we do not know is named in a warning.  A '!'
 * beside the 'w' (w!, rw!: Xen's block script's forced mode, which xl
 * never writes) asks for the image to be shared read-write (*forced).
 */
static bool mode_readonly(struct xbd_dev *dev, const char *mode, bool *forced)
{
	static const char *const known[] = { "r", "ro", "w", "rw", "w!", "rw!" };
	char esc[XBD_LOG_STR_BUF];
	bool ro, ok = false;

	*forced = false;
	if (!mode) {
		DLOG(dev, XBD_LOG_WARNING, "no mode in the backend directory: serving it read-only");
		return true;
	}
	ro = !strchr(mode, 'w');
	*forced = !ro && strchr(mode, '!');
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		ok |= !strcmp(mode, known[i]);
	if (!ok)
		DLOG(dev, XBD_LOG_WARNING, "mode '%s' is not r, ro, w, rw, w! or rw!: serving it %s "
		     "(writable only with a 'w', shared with a '!' too)", xbd_log_str(esc, mode),
		     ro ? "read-only" : *forced ? "read-write, shared" : "read-write");
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
	unsigned int *running;   /* the daemon's count of opens on their threads (atomic) */
	unsigned int refs;       /* atomic: the thread's and the device's */
	bool done;               /* atomic */
};

/* A failed open is tried again after 1 s, then 2, 4 ... at most 60 s apart. */
#define OPEN_BACKOFF_MIN_MS 1000
#define OPEN_BACKOFF_MAX_MS 60000

static void open_job_put(struct xbd_open_job *j)
{
	unsigned int *running = j->running;

	if (__atomic_sub_fetch(&j->refs, 1, __ATOMIC_ACQ_REL))
		return;
	if (j->store)
		j->eng->close(j->store);
	free(j->target);
	close(j->wake_fd);
	free(j);
	/* Last: the thread is done with the engine (the daemon may end once none runs). */
	__atomic_sub_fetch(running, 1, __ATOMIC_RELEASE);
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
	j->running = &dev->bk->open_threads;
	j->refs = 2;
	if (!j->target || j->wake_fd < 0) {
		err = j->target ? -errno : -ENOMEM;
		goto fail;
	}
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	__atomic_add_fetch(j->running, 1, __ATOMIC_ACQUIRE);
	err = -pthread_create(&t, &at, open_thread, j);
	pthread_attr_destroy(&at);
	if (err) {
		__atomic_sub_fetch(j->running, 1, __ATOMIC_RELEASE);
		goto fail;
	}
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
 * Whether a failed open can never pass as things are (the toolstack's
 * params and mode, the settings): then it is refused, not tried again.
 * A file or block device is what it is (missing, a directory, a disk
 * image, empty, not writable) until someone changes it; a server may
 * come back, so there only what params itself gets wrong is final.
 */
static bool open_final(const struct xbd_dev *dev, int err)
{
	/*
	 * The image in use elsewhere: final, but for a migration's receiving
	 * end, whose source lets go of it once the guest runs here.
	 */
	if (err == -EBUSY)
		return !dev->incoming;
	if (dev->disk.eng && dev->disk.eng->open_remote)
		return err == -EINVAL || err == -EMEDIUMTYPE;
	switch (err) {
	case -EAGAIN:
	case -EINTR:
	case -ENOMEM:
	case -EMFILE:
	case -ENFILE:
	case -EIO:
	case -ENXIO:     /* a block device whose disk is not there (yet) */
	case -ENODEV:
	case -ENOMEDIUM: /* a drive without its medium */
	case -ETIMEDOUT:
		return false;
	default:
		return true;
	}
}

/* A failed open as one line an operator acts on (shown: params, secrets hidden). */
static void open_reason(const struct xbd_dev *dev, int err, const char *shown, char *why,
			size_t len)
{
	char esc[XBD_LOG_STR_BUF];
	const char *s = xbd_log_str(esc, shown);

	if (err == -EBUSY && dev->disk.eng && dev->disk.eng->open_remote) {
		snprintf(why, len, "'%s' is in use read-write by another client (it holds the "
			 "image's exclusive lock: another xbd-back, QEMU or a kernel mapping)" XBD_SHARE_HINT,
			 s);
		return;
	}
	if (!dev->disk.eng || !dev->disk.eng->open_remote) {
		switch (err) {
		case -ENOENT:
			snprintf(why, len, "'%s' does not exist", s);
			return;
		case -EISDIR:
			snprintf(why, len, "'%s' is a directory, not a file or block device", s);
			return;
		case -EINVAL:
			snprintf(why, len, "'%s' is not a file or block device", s);
			return;
		case -EACCES:
		case -EPERM:
			snprintf(why, len, "'%s' cannot be opened %s: permission denied", s,
				 dev->readonly ? "for reading" : "for reading and writing");
			return;
		case -EROFS:
			snprintf(why, len, "'%s' is on a read-only filesystem: it cannot be served "
				 "read-write (the toolstack's mode is w)", s);
			return;
		}
	}
	snprintf(why, len, "cannot open '%s': %s", s, strerror(-err));
}

/*
 * Where the open stands, in the backend directory (XBD_STORAGE_KEY) for
 * the hotplug script: written when it changes.
 */
static void storage_publish(struct xbd_dev *dev)
{
	char p[XBD_XS_PATH_MAX], *v = NULL;

	if (dev->disk.store)
		v = strdup("open");
	else if (dev->open_job)
		v = strdup("opening");
	else if (dev->open_err && asprintf(&v, "%s: %s", dev->open_refused ? "refused" : "retrying",
					   dev->open_why) < 0)
		v = NULL;
	if (!v || (dev->storage_said && !strcmp(v, dev->storage_said)) ||
	    xbd_xs_join(p, sizeof(p), dev->bpath, XBD_STORAGE_KEY) ||
	    xbd_xs_write_str(dev->bk->xs, XBT_NULL, p, v)) {
		free(v);
		return;
	}
	free(dev->storage_said);
	dev->storage_said = v;
}

/*
 * An open failed (why: its reason, or NULL to say it from err): said
 * once per change of outcome (not per try); tried again later with
 * backoff (xbd_back_timer), unless it can never pass as things are.
 */
static void open_failed(struct xbd_dev *dev, int err, const char *shown, const char *why)
{
	char buf[XBD_OPEN_WHY_MAX];
	unsigned int backoff = OPEN_BACKOFF_MIN_MS;
	bool final = open_final(dev, err), news;

	if (!why) {
		open_reason(dev, err, shown, buf, sizeof(buf));
		why = buf;
	}
	news = err != dev->open_err || final != dev->open_refused || strcmp(why, dev->open_why);
	for (unsigned int i = 0; i < dev->open_tries && backoff < OPEN_BACKOFF_MAX_MS; i++)
		backoff *= 2;
	if (backoff > OPEN_BACKOFF_MAX_MS)
		backoff = OPEN_BACKOFF_MAX_MS;
	dev->open_tries++;
	dev->open_retry_ms = final ? 0 : xbd_mono_ms() + backoff;
	if (news && final)
		DLOG(dev, XBD_LOG_ERR, "refused: %s; not tried again until the toolstack changes its "
		     "params or mode, or SIGHUP", why);
	else if (news)
		DLOG(dev, XBD_LOG_ERR, "%s (tried again after 1 s, then less often, up to every %u s; "
		     "xbdctl list shows the last error)", why, OPEN_BACKOFF_MAX_MS / 1000);
	dev->open_err = err;
	dev->open_refused = final;
	snprintf(dev->open_why, sizeof(dev->open_why), "%s", why);
	free(dev->refused_params);
	dev->refused_params = final && dev->params ? strdup(dev->params) : NULL;
	dev->refused_ro = dev->readonly;
	storage_publish(dev);
}

/*
 * The store is open: what it can do, its size; 0 or -errno (then closed,
 * and why says so).
 */
static int open_done(struct xbd_dev *dev, const char *shown, char *why, size_t len)
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
	if (err)
		snprintf(why, len, "cannot read the size of '%s': %s", xbd_log_str(esc, shown),
			 strerror(-err));
	if (!err && size < 512) {
		snprintf(why, len, "'%s' is empty (%" PRIu64 " bytes): a disk needs at least one "
			 "512-byte sector (make it bigger, or check params)", xbd_log_str(esc, shown),
			 size);
		err = -EINVAL;
	}
	if (err) {
		dev->disk.eng->close(dev->disk.store);
		dev->disk.store = NULL;
		return err;
	}
	update_limits(dev, size);
	dev->open_err = 0;
	dev->open_tries = 0;
	dev->open_retry_ms = 0;
	dev->open_refused = false;
	dev->open_why[0] = '\0';
	/* Its changed-block tracking, when cbt = 1 (checkpoint.c). */
	track_storage_open(dev);
	DLOG(dev, XBD_LOG_INFO, "opened %s (%s engine, %" PRIu64 " sectors, %s, cache %s%s%s%s)",
	     xbd_log_str(esc, shown), dev->disk.eng->name, dev->disk.lim.nr_sectors,
	     dev->readonly ? "read-only" : "read-write", xbd_cache_mode_name(dev->disk.o.cache),
	     dev->caps.page_cache ? ", dom0's page cache" : "",
	     dev->disk.o.barrier ? ", barrier mode" : "",
	     dev->disk.o.grants == XBD_GRANTS_COPY ? ", grant copy" : "");
	storage_publish(dev);
	return 0;
}

/*
 * A remote open has finished: take its store, or note its failure.  A
 * device that was offered meanwhile (InitWait) gets its keys again, now
 * with the size, and its frontend's next step is taken.  0, -EINPROGRESS
 * while it runs, or the failure.
 */
int dev_open_collect(struct xbd_dev *dev)
{
	struct xbd_open_job *j = dev->open_job;
	char shown[XBD_PARAMS_LOG_MAX], why[XBD_OPEN_WHY_MAX];
	int err;

	if (!j)
		return dev->disk.store ? 0 : dev->open_err ? dev->open_err : -ENODEV;
	if (!__atomic_load_n(&j->done, __ATOMIC_ACQUIRE))
		return -EINPROGRESS;
	xbd_params_for_log(j->target, shown, sizeof(shown));
	err = j->err;
	if (!err) {
		dev->disk.store = j->store;
		j->store = NULL;
	}
	/* Done with the job (its target too): what is published now is the outcome. */
	open_job_drop(dev);
	why[0] = '\0';
	if (!err)
		err = open_done(dev, shown, why, sizeof(why));
	if (err)
		open_failed(dev, err, shown, why[0] ? why : NULL);
	if (!err && dev->state == XenbusStateInitWait)
		dev_advertise(dev);
	xbd_dev_mark(dev, XBD_DEV_PEND_FRONTEND);
	return err;
}

/*
 * A disk image served raw shows the guest the image's metadata in place
 * of its data, and lets it overwrite that metadata (a backing file's name
 * included) for whoever opens the image next as what it is.  True: dev
 * must not open it (why says what to do).  LUKS is the one header
 * served: a guest that encrypted its own whole disk writes it.
 */
static bool refuse_image(struct xbd_dev *dev, const char *target, const char *shown, char *why,
			 size_t len)
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
	snprintf(why, len, "'%s' is a %s image, not a raw disk (serve it through NBD, "
		 "e.g. qemu-storage-daemon, see xbd-back.conf(5); or, if its guest wrote that "
		 "header itself, set format-check = 0 in a [disk] section for it)",
		 xbd_log_str(esc, shown), fmt);
	return true;
}

/*
 * Open the device's storage from its params: at once for a local file or
 * device, on a thread of its own for a remote one (-EINPROGRESS until it
 * is done: open_collect).  A failure waits out its backoff: until then
 * the same error comes back without a try.
 */
int dev_open_storage(struct xbd_dev *dev)
{
	char *mode = NULL, *dtype = NULL, esc[XBD_LOG_STR_BUF], why[XBD_OPEN_WHY_MAX] = "";
	const char *target;
	char shown[XBD_PARAMS_LOG_MAX];
	bool forced;
	int err;

	if (dev->open_job)
		return dev_open_collect(dev);
	if (dev->open_err && !dev->open_refused && xbd_mono_ms() < dev->open_retry_ms)
		return dev->open_err;
	free(dev->params);
	dev->params = NULL;
	err = dev_bkey_str(dev, "params", &dev->params);
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
	if (dev->disk.o.io_weight || dev->disk.o.cpu_weight)
		xbd_workers_weights_asked(); /* a [disk] rule added by SIGHUP */
	/* Two rules may each set half of a limit and its burst: checked together here. */
	if (xbd_iolimits_check(&dev->disk.o, why, sizeof(why)))
		DLOG(dev, XBD_LOG_WARNING, "its settings together: %s: that burst is ignored", why);
	why[0] = '\0';
	err = dev_bkey_str(dev, "mode", &mode);
	dev->readonly = mode_readonly(dev, err ? NULL : mode, &forced);
	free(mode);
	/* The toolstack's forced mode is shared-write as the engines see it. */
	dev->disk.o.shared_write |= forced;
	dev->share = dev->readonly ? XBD_SHARE_READ : dev->disk.o.shared_write ?
		     XBD_SHARE_WRITE_SHARED : XBD_SHARE_WRITE;
	/* Whose the image may be too (its VM), and a migration's receiving end. */
	dev_read_domain(dev);
	/* Refused, and asked for again as it was: the same answer, no try. */
	if (dev->open_refused && dev->refused_params && !strcmp(dev->refused_params, dev->params) &&
	    dev->refused_ro == dev->readonly)
		return dev->open_err;
	dev->cdrom = false;
	if (!dev_bkey_str(dev, "device-type", &dtype))
		dev->cdrom = !strcmp(dtype, "cdrom");
	free(dtype);
	dev->discard_enable = dev_bkey_bool(dev, "discard-enable", true);
	dev->removable = dev_bkey_bool(dev, "removable", false);

	dev->disk.eng = xbd_engine_choose(dev->params, &dev->disk.o, &target);
	if (!dev->disk.eng) {
		xbd_params_for_log(dev->params, shown, sizeof(shown));
		snprintf(why, sizeof(why), "params '%s' names no storage engine",
			 xbd_log_str(esc, shown));
		open_failed(dev, -EINVAL, shown, why);
		return -EINVAL;
	}
	/* Log lines show params without the values of secret keys (rbd's key=). */
	xbd_params_for_log(target, shown, sizeof(shown));
	if (dev->disk.eng->open_remote) {
		err = open_job_start(dev, target);
		if (!err) {
			storage_publish(dev);
			return -EINPROGRESS;
		}
	} else if (dev->disk.eng->file && refuse_image(dev, target, shown, why, sizeof(why))) {
		err = -EMEDIUMTYPE;
	} else if (!dev->disk.eng->file ||
		   !(err = dev_share_take(dev, target, shown, why, sizeof(why)))) {
		err = dev->disk.eng->open(target, dev->readonly, &dev->disk.o, &dev->disk.store);
	}
	if (!err)
		err = open_done(dev, shown, why, sizeof(why));
	if (err) {
		dev->disk.store = NULL;
		dev_share_drop(dev);
		open_failed(dev, err, shown, why[0] ? why : NULL);
	}
	return err;
}

void dev_storage_retry(struct xbd_dev *dev)
{
	if (!dev->open_refused)
		return;
	dev->open_refused = false;
	dev->open_retry_ms = xbd_mono_ms();
}

void dev_close_storage(struct xbd_dev *dev)
{
	/* An open still running: its thread closes what it opens. */
	open_job_drop(dev);
	/* A ring left running at the stop deadline still uses it, until the daemon ends. */
	if (dev->bk->host.abandoned)
		return;
	/* Its rings are gone: the tracking closes cleanly, ending any view with a reason. */
	track_storage_close(dev, dev->life == XBD_DEV_DEAD ? "its guest's domain is gone "
			    "(destroyed or shut down)" : dev->life == XBD_DEV_REMOVED ?
			    "the disk was detached from its guest" : dev->bk->host.stopping ?
			    "xbd-back stopped" : "the disk was closed");
	if (dev->disk.store)
		dev->disk.eng->close(dev->disk.store);
	dev->disk.store = NULL;
	dev_share_drop(dev);
	dev->open_err = 0;
	dev->open_tries = 0;
	dev->open_retry_ms = 0;
	dev->open_refused = false;
	free(dev->refused_params);
	dev->refused_params = NULL;
}

void dev_check_resize(struct xbd_dev *dev)
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
		dev_set_state(dev, XenbusStateConnected);
}

bool dev_open_finished(const struct xbd_dev *dev)
{
	return dev->open_job && __atomic_load_n(&dev->open_job->done, __ATOMIC_ACQUIRE);
}
