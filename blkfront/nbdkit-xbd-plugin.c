/*
 * nbdkit-xbd-plugin.c: serve a vbd over NBD through libxbdfront, with
 * nbdkit doing the protocol:  nbdkit xbd vdev=xvdb [queues=N] ...
 *
 * One device per nbdkit process, attached after nbdkit forks, with one
 * event thread that runs the library's loop; nbdkit's worker threads
 * submit in parallel (each queue has its own lock) and sleep until their
 * request completes.  Every connection shares the one device and a flush
 * reaches the backend's whole disk, so multi-conn is safe.
 */
#include "config.h"

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "blkfront/device-options.h"
#include "blkfront/xbdfront.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

/* nbdkit plugins are modules with one instance per process: state lives here. */
static struct xbd_front_opts opts;
static bool opts_ready;
static struct xbd_front *dev;
static struct xbd_front_info info;
static pthread_t loop_thread;
static bool loop_running;
static volatile bool loop_stop;

static void xbd_load(void)
{
	xbd_front_opts_init(&opts);
	opts_ready = true;
}

/* Device parameters: xbd-front's device options (device-options.c's table) as key=value. */
static int xbd_config(const char *key, const char *value)
{
	const struct xbdf_option *o = xbdf_option_find(key);
	char why[160];

	if (!opts_ready)
		xbd_load();
	if (!o || o->cli_only) {
		nbdkit_error("unknown parameter '%s'", key);
		return -1;
	}
	if (o->kind == XBDF_KIND_FLAG) {
		int b = nbdkit_parse_bool(value);

		if (b < 0)
			return -1;
		xbdf_option_set_flag(o, b != 0, &opts);
		return 0;
	}
	if (o->kind == XBDF_KIND_STRING) {
		value = strdup(value);
		if (!value) {
			nbdkit_error("%s: %s", key, strerror(errno));
			return -1;
		}
	}
	if (xbdf_option_set(o, value, &opts, why, sizeof(why)) < 0) {
		nbdkit_error("%s: %s", key, why);
		return -1;
	}
	return 0;
}

static int xbd_config_complete(void)
{
	if (!opts_ready)
		xbd_load();
	if (!opts.devid && !opts.vdev) {
		nbdkit_error("vdev=NAME or devid=N is required");
		return -1;
	}
	return 0;
}

/* The event loop: completions and backend state changes. */
static void *loop_main(void *arg)
{
	while (!loop_stop) {
		int rc = xbd_front_run(dev, 100);

		if (rc == -ENODEV || rc == -EPROTO) {
			nbdkit_error("xbd: device lost: %s", strerror(-rc));
			break;
		}
	}
	return NULL;
}

/* Attach once nbdkit has forked: threads do not survive a fork. */
static int xbd_after_fork(void)
{
	int rc = xbd_front_open(&opts, &dev);

	if (rc < 0) {
		nbdkit_error("xbd: cannot attach to vbd %s: %s",
			     opts.vdev ? opts.vdev : "(devid)", strerror(-rc));
		return -1;
	}
	xbd_front_info(dev, &info);
	loop_stop = false;
	rc = pthread_create(&loop_thread, NULL, loop_main, NULL);
	if (rc) {
		nbdkit_error("xbd: pthread_create: %s", strerror(rc));
		xbd_front_close(dev);
		dev = NULL;
		return -1;
	}
	loop_running = true;
	nbdkit_debug("xbd: attached %s: %llu bytes, %u queue(s)", info.backend_path,
		     (unsigned long long)info.size, info.nr_queues);
	return 0;
}

static void xbd_cleanup(void)
{
	if (loop_running) {
		loop_stop = true;
		pthread_join(loop_thread, NULL);
		loop_running = false;
	}
	if (dev) {
		xbd_front_close(dev);
		dev = NULL;
	}
}

static void *xbd_open(int readonly)
{
	if (!dev) {
		nbdkit_error("xbd: device not attached");
		return NULL;
	}
	return &dev;
}

static int64_t xbd_get_size(void *handle)
{
	struct xbd_front_info in;

	xbd_front_info(dev, &in); /* may have grown (online resize) */
	return (int64_t)in.size;
}

static int xbd_block_size(void *handle, uint32_t *minimum, uint32_t *preferred,
			  uint32_t *maximum)
{
	*minimum = info.sector_size;
	*preferred = info.physical_sector_size > 4096 ? info.physical_sector_size : 4096;
	*maximum = 0xffffffffu;
	return 0;
}

static int xbd_can_write(void *handle)
{
	return !info.readonly;
}

/* A flush always succeeds: without flush support the backend writes through. */
static int xbd_can_flush(void *handle)
{
	return 1;
}

static int xbd_can_fua(void *handle)
{
	return NBDKIT_FUA_NATIVE;
}

static int xbd_can_trim(void *handle)
{
	return info.discard && !info.readonly;
}

static int xbd_can_multi_conn(void *handle)
{
	return 1;
}

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int result;
};

static void wake(void *arg, int result)
{
	struct waiter *w = arg;

	pthread_mutex_lock(&w->lock);
	w->result = result;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Submit and sleep until the event thread completes it. */
static int do_io(enum xbd_front_op op, unsigned int flags, uint64_t offset, uint64_t len,
		 void *buf)
{
	struct waiter w = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	struct xbd_front_req req = {
		.op = op, .flags = flags, .queue = -1, .offset = offset, .len = len, .buf = buf,
		.cb = wake, .arg = &w,
	};
	int rc = xbd_front_submit(dev, &req);

	if (rc == 0) {
		pthread_mutex_lock(&w.lock);
		while (!w.done)
			pthread_cond_wait(&w.cond, &w.lock);
		pthread_mutex_unlock(&w.lock);
		rc = w.result;
	}
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	if (rc < 0) {
		nbdkit_error("xbd: %s of %llu bytes at %llu: %s", xbd_front_op_name(op),
			     (unsigned long long)len, (unsigned long long)offset, strerror(-rc));
		errno = -rc;
		return -1;
	}
	return 0;
}

static int xbd_pread(void *handle, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
	return do_io(XBD_FRONT_READ, 0, offset, count, buf);
}

static int xbd_pwrite(void *handle, const void *buf, uint32_t count, uint64_t offset,
		      uint32_t flags)
{
	/* the library copies write data into granted pages and never writes to buf */
	return do_io(XBD_FRONT_WRITE, (flags & NBDKIT_FLAG_FUA) ? XBD_FRONT_FUA : 0, offset, count,
		     (void *)buf);
}

static int xbd_flush(void *handle, uint32_t flags)
{
	return do_io(XBD_FRONT_FLUSH, 0, 0, 0, NULL);
}

static int xbd_trim(void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
	int rc = do_io(XBD_FRONT_DISCARD, 0, offset, count, NULL);

	if (rc == 0 && (flags & NBDKIT_FLAG_FUA))
		rc = do_io(XBD_FRONT_FLUSH, 0, 0, 0, NULL);
	return rc;
}

static struct nbdkit_plugin plugin = {
	.name = "xbd",
	.longname = "xbd: a Xen vbd through a userspace blkfront",
	.version = PACKAGE_VERSION,
	.description = "Serves a Xen PV block device (any blkif backend) over NBD.",
	.load = xbd_load,
	.config = xbd_config,
	.config_complete = xbd_config_complete,
	.config_help =
		"vdev=NAME | devid=N   the vbd (device/vbd/N of this domain)\n"
		"platform=auto|xen|sim queues=N ring-order=N persistent=0|1\n"
		"indirect=N protocol=x86_32-abi|x86_64-abi timeout=S max-grants=N\n"
		"force=true            attach even if another frontend holds the vbd",
	.magic_config_key = "vdev",
	.after_fork = xbd_after_fork,
	.cleanup = xbd_cleanup,
	.open = xbd_open,
	.get_size = xbd_get_size,
	.block_size = xbd_block_size,
	.can_write = xbd_can_write,
	.can_flush = xbd_can_flush,
	.can_fua = xbd_can_fua,
	.can_trim = xbd_can_trim,
	.can_multi_conn = xbd_can_multi_conn,
	.pread = xbd_pread,
	.pwrite = xbd_pwrite,
	.flush = xbd_flush,
	.trim = xbd_trim,
	.errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN(plugin)
