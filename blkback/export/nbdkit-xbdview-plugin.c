/*
 * nbdkit-xbdview-plugin.c: serve a point-in-time view of a disk xbd-back
 * serves, read-only over NBD, in dom0 beside xbd-back: no VBD plugged
 * into dom0, nothing changed in the guest.
 *
 *   nbdkit xbdview view=/var/lib/xbd/cbt/NAME.view [checkpoint=NAME]
 *
 * `xbdctl checkpoint DEVICE NAME --view` makes the view and prints this
 * line.  What the disk held at the checkpoint is the disk now, but for
 * the blocks the guest has overwritten since, whose old contents xbd-back
 * copied into the view file first (blkback/datapath/cbw.c).  So a read
 * reads the disk (through xbd-back's own storage engine for its params:
 * a file, a block device, NBD, RBD), then looks each block up in the
 * view's table: a block found there is read from its copy.  cbw.c says
 * why that order gives the checkpoint's bytes while the guest writes.
 *
 * Every read checks the view before and after: one that ended (released,
 * its disk closed because the guest was destroyed, the host restarted) or
 * failed (its scratch store filled up) fails with a line saying why, and
 * so does every later one.  The view file is read with pread only: it may
 * be truncated or reset under us, and a mapping would die of SIGBUS.
 *
 * One export of a view at a time: the plugin holds an exclusive lock on
 * the view file, and a second nbdkit of the same view says who has it.
 */
#include "config.h"

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blkback/datapath/cbt-format.h"
#include "blkback/engines/engine.h"
#include "blkback/settings/table.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS
/* What one engine read covers; a larger request takes several. */
#define CHUNK (1u << 20)
/* A read of the disk is made of whole pages of this (direct I/O). */
#define ALIGN 4096u
/* How long one engine read may take before the export gives up on it. */
#define READ_TIMEOUT_MS 60000

/* One view per nbdkit process. */
static char *view_path, *want_checkpoint;
static int vfd = -1, hole_fd = -1;
static struct xbd_cbt_view head;         /* as it was when the export began */
static const struct xbd_engine *eng;
static struct xbd_store *store;
static struct xbd_queue *queue;
static void *bounce;
static bool null_store;                  /* the null engine: every block reads zeros */

/* The view's header as the file holds it now. */
static int read_head(struct xbd_cbt_view *v)
{
	if (pread(vfd, v, sizeof(*v), 0) != (ssize_t)sizeof(*v))
		return -1;
	v->why[sizeof(v->why) - 1] = '\0';
	v->checkpoint[sizeof(v->checkpoint) - 1] = '\0';
	v->device[sizeof(v->device) - 1] = '\0';
	return 0;
}

/* Whether the view is still the one exported and whole; if not, one line says why. */
static bool view_alive(void)
{
	struct xbd_cbt_view v;

	if (read_head(&v)) {
		nbdkit_error("xbdview: cannot read the view %s: %m", view_path);
		return false;
	}
	if (v.view_id != head.view_id) {
		nbdkit_error("xbdview: the view of checkpoint %s of %s ended and another was made: "
			     "export it anew", head.checkpoint, head.device);
		return false;
	}
	if (v.state == XBD_VIEW_ACTIVE)
		return true;
	if (v.state == XBD_VIEW_FAILED || v.state == XBD_VIEW_FAILING)
		nbdkit_error("xbdview: the view of checkpoint %s of %s failed: %s (what this "
			     "export read is not the checkpoint's)", head.checkpoint, head.device,
			     v.why);
	else
		nbdkit_error("xbdview: the view of checkpoint %s of %s ended: %s", head.checkpoint,
			     head.device, v.why[0] ? v.why : "released");
	return false;
}

static int xv_config(const char *key, const char *value)
{
	char **to = !strcmp(key, "view") ? &view_path :
		    !strcmp(key, "checkpoint") ? &want_checkpoint : NULL;

	if (!to) {
		nbdkit_error("xbdview: unknown parameter '%s' (view=FILE, checkpoint=NAME)", key);
		return -1;
	}
	free(*to);
	*to = strdup(value);
	return *to ? 0 : -1;
}

/* Open the view file, check it, and lock it for this export. */
static int open_view(void)
{
	vfd = open(view_path, O_RDONLY | O_CLOEXEC);
	if (vfd < 0) {
		nbdkit_error("xbdview: %s: %m (xbdctl checkpoints shows each disk's view file)",
			     view_path);
		return -1;
	}
	if (read_head(&head) || head.magic != XBD_CBT_VIEW_MAGIC ||
	    head.version != XBD_CBT_VERSION) {
		nbdkit_error("xbdview: %s is not a view of xbd-back's", view_path);
		return -1;
	}
	if (want_checkpoint && strcmp(want_checkpoint, head.checkpoint)) {
		nbdkit_error("xbdview: %s holds the view of checkpoint %s of %s, not of %s",
			     view_path, head.checkpoint, head.device, want_checkpoint);
		return -1;
	}
	if (head.state != XBD_VIEW_ACTIVE) {
		nbdkit_error("xbdview: %s holds no open view (%s%s%s): make one with xbdctl "
			     "checkpoint DEVICE NAME --view", view_path,
			     head.state == XBD_VIEW_ENDED ? "ended" : head.state == XBD_VIEW_NONE ?
			     "none made" : "failed", head.why[0] ? ": " : "", head.why);
		return -1;
	}
	if (!head.granularity || head.granularity & (head.granularity - 1) ||
	    head.table_entries & (head.table_entries - 1) || !head.table_entries ||
	    head.data_off < XBD_CBT_TABLE_OFF + head.table_entries * 8) {
		nbdkit_error("xbdview: %s: its layout does not add up", view_path);
		return -1;
	}
	if (flock(vfd, LOCK_EX | LOCK_NB)) {
		nbdkit_error("xbdview: checkpoint %s of %s is exported already (another nbdkit "
			     "holds %s): one export of a view at a time", head.checkpoint,
			     head.device, view_path);
		return -1;
	}
	return 0;
}

/* Open the disk as xbd-back does, read-only, through the engine its params name. */
static int open_disk(void)
{
	struct xbd_back_opts o;
	const char *target = NULL;
	struct stat st;
	int err;

	settings_defaults(&o);
	head.params[sizeof(head.params) - 1] = '\0';
	eng = xbd_engine_choose(head.params, &o.disk, &target);
	if (!eng) {
		nbdkit_error("xbdview: the view's params '%s' names no storage engine", head.params);
		return -1;
	}
	null_store = !strcmp(eng->name, "null");
	err = eng->open(target, true, &o.disk, &store);
	if (!err)
		err = eng->queue_open(store, 1, &queue);
	if (err) {
		nbdkit_error("xbdview: cannot open %s (%s engine): %s", head.params, eng->name,
			     strerror(-err));
		return -1;
	}
	/* A file's holes, for base:allocation (the engine knows none). */
	if (eng->file && (hole_fd = open(target, O_RDONLY | O_CLOEXEC)) >= 0 &&
	    (fstat(hole_fd, &st) || !S_ISREG(st.st_mode))) {
		close(hole_fd);
		hole_fd = -1;
	}
	if (posix_memalign(&bounce, ALIGN, CHUNK + 2 * ALIGN)) {
		nbdkit_error("xbdview: out of memory");
		return -1;
	}
	return 0;
}

static int xv_config_complete(void)
{
	if (!view_path) {
		nbdkit_error("xbdview: view=FILE is needed (xbdctl checkpoint DEVICE NAME --view "
			     "prints it)");
		return -1;
	}
	return open_view();
}

/*
 * The disk is opened after nbdkit forks (--run, daemonizing): an engine
 * may start threads or an aio context, which a fork does not carry over.
 */
static int xv_after_fork(void)
{
	return open_disk();
}

static void xv_unload(void)
{
	if (queue)
		eng->queue_close(queue);
	if (store)
		eng->close(store);
	if (vfd >= 0)
		close(vfd);
	if (hole_fd >= 0)
		close(hole_fd);
	free(bounce);
	free(view_path);
	free(want_checkpoint);
}

static void *xv_open(int readonly)
{
	return &head; /* one view: every connection reads the same */
}

static int64_t xv_get_size(void *h)
{
	return (int64_t)head.disk_bytes;
}

static int xv_can_multi_conn(void *h)
{
	return 1; /* it never changes */
}

/*
 * n bytes of the disk at off into buf (n <= CHUNK), through the engine,
 * in whole 4 KiB pages (direct I/O wants them; the disk ends on one).
 */
static int disk_read(char *buf, uint32_t n, uint64_t off)
{
	uint64_t from = off & ~(uint64_t)(ALIGN - 1), to = xbd_cbt_round_up(off + n, ALIGN);
	struct iovec iov = { .iov_base = bounce };
	struct xbd_io io, *ios[1] = { &io }, *done[1];
	int ret, waited = 0;

	if (null_store) {
		memset(buf, 0, n);
		return 0;
	}
	if (to > head.disk_bytes)
		to = xbd_cbt_round_up(head.disk_bytes, 512);
	iov.iov_len = to - from;
	memset(&io, 0, sizeof(io));
	io.op = XBD_IO_READ;
	io.offset = from;
	io.iov = &iov;
	io.iovcnt = 1;
	io.result = 1;
	while ((ret = eng->submit(queue, ios, 1)) == -EAGAIN || ret == 0) {
		if ((waited += 10) > READ_TIMEOUT_MS)
			return -ETIMEDOUT;
		poll(NULL, 0, 10);
	}
	if (ret < 0)
		return ret;
	for (;;) {
		struct pollfd p = { .fd = eng->queue_fd(queue), .events = POLLIN };

		if (eng->reap(queue, done, 1) == 1)
			break;
		if (waited > READ_TIMEOUT_MS)
			return -ETIMEDOUT; /* the io stays with the engine: the export is done for */
		if (poll(&p, 1, 100) == 0)
			waited += 100;
	}
	if (io.result)
		return io.result;
	memcpy(buf, (char *)bounce + (off - from), n);
	return 0;
}

/* Block b's copy in the view, or -1 (ordered after what was read before it). */
static int64_t copy_of(uint64_t b)
{
	uint64_t key = b + 1, e;

	for (uint64_t i = xbd_cbt_hash(b, head.table_entries), n = 0; n < head.table_entries;
	     i = (i + 1) & (head.table_entries - 1), n++) {
		if (pread(vfd, &e, sizeof(e), (off_t)(XBD_CBT_TABLE_OFF + i * 8)) != sizeof(e))
			return -1;
		/* Acquire: the copy's bytes are read after the entry that says they are whole. */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!e)
			return -1;
		if (e >> XBD_CBT_COPY_BITS == key)
			return (int64_t)(e & XBD_CBT_MAX_COPIES);
	}
	return -1;
}

static int xv_pread(void *h, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
	const uint64_t g = head.granularity;
	char *out = buf;

	if (!view_alive()) {
		errno = EIO;
		return -1;
	}
	while (count) {
		uint32_t n = count < CHUNK ? count : CHUNK;
		int err = disk_read(out, n, offset);

		if (err) {
			nbdkit_error("xbdview: reading %s at %" PRIu64 ": %s", head.params, offset,
				     strerror(-err));
			errno = -err;
			return -1;
		}
		/* Then the blocks the guest overwrote since: their copies. */
		for (uint64_t b = offset / g; b * g < offset + n; b++) {
			int64_t c = copy_of(b);
			uint64_t from = b * g > offset ? b * g : offset;
			uint64_t to = (b + 1) * g < offset + n ? (b + 1) * g : offset + n;

			if (c < 0)
				continue;
			if (pread(vfd, out + (from - offset), to - from,
				  (off_t)(head.data_off + (uint64_t)c * g + (from - b * g))) !=
			    (ssize_t)(to - from)) {
				nbdkit_error("xbdview: reading the copy of block %" PRIu64 ": %m", b);
				errno = EIO;
				return -1;
			}
		}
		out += n;
		offset += n;
		count -= n;
	}
	/* The view ended or failed meanwhile: what was read may not be the checkpoint's. */
	if (!view_alive()) {
		errno = EIO;
		return -1;
	}
	return 0;
}

static int xv_can_extents(void *h)
{
	return 1;
}

/* base:allocation: holes where the store has them (a file's, the null engine's all). */
static int xv_extents(void *h, uint32_t count, uint64_t offset, uint32_t flags,
		      struct nbdkit_extents *ex)
{
	const uint64_t g = head.granularity;
	uint64_t end = offset + count;

	if (!view_alive()) {
		errno = EIO;
		return -1;
	}
	if (!null_store && hole_fd < 0)
		return nbdkit_add_extent(ex, offset, count, 0);
	while (offset < end) {
		uint64_t b = offset / g, next = (b + 1) * g < end ? (b + 1) * g : end;
		bool hole = null_store;

		if (!null_store) {
			off_t d = lseek(hole_fd, (off_t)offset, SEEK_DATA);

			/* No data from offset to the block's end (ENXIO: none to the file's end). */
			hole = (d < 0 && errno == ENXIO) || (d >= 0 && (uint64_t)d >= next);
		}
		/* After the look at the disk, the copy: a block kept is data whatever it was. */
		if (hole && copy_of(b) >= 0)
			hole = false;
		if (nbdkit_add_extent(ex, offset, next - offset,
				      hole ? NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO : 0))
			return -1;
		offset = next;
		if (flags & NBDKIT_FLAG_REQ_ONE)
			break;
	}
	return view_alive() ? 0 : (errno = EIO, -1);
}

static struct nbdkit_plugin plugin = {
	.name = "xbdview",
	.longname = "xbdview: a point-in-time view of a disk xbd-back serves",
	.version = PACKAGE_VERSION,
	.description = "Serves, read-only, what a disk held at a checkpoint (xbdctl checkpoint "
		       "--view) while its guest goes on writing.",
	.config = xv_config,
	.config_complete = xv_config_complete,
	.after_fork = xv_after_fork,
	.config_help =
		"view=FILE          the view file (xbdctl checkpoint DEVICE NAME --view prints it)\n"
		"checkpoint=NAME    refuse a view of another checkpoint",
	.magic_config_key = "view",
	.unload = xv_unload,
	.open = xv_open,
	.get_size = xv_get_size,
	.can_multi_conn = xv_can_multi_conn,
	.can_extents = xv_can_extents,
	.pread = xv_pread,
	.extents = xv_extents,
	.errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN(plugin)
