/*
 * tracking.c: a disk's changed-block tracking files in the control plane
 * (tracking.h; their layout: datapath/cbt-format.h).  Opened with the
 * disk's storage when cbt = 1: made the first time, else checked and
 * trusted as far as it can be, recovered after a power loss; its
 * metadata committed (the other copy, then fdatasync); closed with the
 * disk's stamp.
 *
 * Trust.  A checkpoint can be compared with a later point only if every
 * write between them was marked.  What breaks that, and how it is seen:
 *
 *  - xbd-back or its worker killed: the bits are in the page cache, the
 *    writes not answered are in the rings' journals and run again: kept.
 *    (The file says open, in this boot.)
 *  - the host lost power, or its kernel died: the file says open in
 *    another boot; every zone with an intent is counted changed
 *    (datapath/cbt.c), the rest was durable: kept, over-reported.
 *  - closed cleanly (a guest's shutdown or reboot, a frontend's reconnect
 *    that closed the disk, SIGTERM): a file disk's dev, inode, size,
 *    mtime and ctime are kept, and the next open compares them: another
 *    writer meanwhile (a live migration away and back, qemu-img, dd)
 *    changes ctime.  A block device, NBD or RBD store has no such stamp:
 *    another host may have written it, so its tracking after a close is
 *    not trusted (the next backup is full; said so).
 *  - the file lost or unreadable, the disk grown past its bitmaps, the
 *    granularity or the slots changed: a new file, which says why.
 *  - a second writable device of the same image, the tracking turned off
 *    and on, a failed sync of the intents: untrusted from then on.
 *
 * An untrusted moment moves the epoch on: checkpoints of an older epoch
 * can be compared with each other, never with a later point, and a query
 * that tries says why and when.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blkback/control/tracking.h"
#include "blkback/datapath/cbt.h"

/* ---- small things ---- */

void tracking_boot_id(char *buf, size_t len)
{
	FILE *f;

#ifdef XBD_TEST_HOOKS
	/* Tests: the boot a power loss ends, without one. */
	const char *t = getenv("XBD_TEST_BOOT_ID");

	if (t && t[0]) {
		snprintf(buf, len, "%s", t);
		return;
	}
#endif
	snprintf(buf, len, "unknown");
	f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

uint64_t tracking_random(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		v = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	return v ? v : 1;
}

uint64_t *tracking_slot(const struct xbd_track *t, uint32_t slot)
{
	return (uint64_t *)(t->map + xbd_cbt_slot_off(&t->m, slot));
}

int tracking_sync(struct xbd_track *t)
{
	return xbd_cbt_file_sync(t->fd, t->map, t->m.file_bytes, t->m.shadow_off);
}

int tracking_commit(struct xbd_track *t)
{
	t->m.seqno++;
	t->m.sum = 0;
	t->m.sum = xbd_cbt_sum(&t->m);
	/* The other copy than the one in force: a torn write leaves that one. */
	memcpy(t->map + (t->m.seqno % 2) * XBD_CBT_META_SIZE, &t->m, sizeof(t->m));
	return tracking_sync(t);
}

void tracking_untrust(struct xbd_track *t, const char *fmt, ...)
{
	va_list ap;

	t->m.epoch++;
	t->m.untrusted_at = time(NULL);
	va_start(ap, fmt);
	vsnprintf(t->m.untrusted_why, sizeof(t->m.untrusted_why), fmt, ap);
	va_end(ap);
	/* Nothing compares with the latest checkpoint any more: stop marking it. */
	if (t->run)
		__atomic_store_n(&t->run->live, XBD_CBT_NONE, __ATOMIC_RELEASE);
	tracking_commit(t);
	DLOG(t->dev, XBD_LOG_WARNING, "changed-block tracking: %s: checkpoints made before now "
	     "cannot be compared with later ones (their next backup is a full one)",
	     t->m.untrusted_why);
}

void tracking_poll(struct xbd_track *t)
{
	if (!t->run)
		return;
	if (__atomic_load_n(&t->run->overflow, __ATOMIC_ACQUIRE) && !t->said_overflow) {
		t->said_overflow = true;
		tracking_untrust(t, "the disk grew past the %" PRIu64 " bytes its bitmaps hold",
				 t->m.nblocks * t->m.granularity);
	}
	if (__atomic_load_n(&t->run->failed, __ATOMIC_ACQUIRE) && !t->said_failed) {
		t->said_failed = true;
		tracking_untrust(t, "a sync of its file failed (a power loss could leave a gap)");
	}
}

/* ---- names and stamps ---- */

/* NAME: params made a file name (letters, digits, . _ -), and its hash. */
static void file_name(const char *params, char *buf, size_t len)
{
	char base[65];
	size_t i, n = 0;

	for (i = 0; params[i] && n < sizeof(base) - 1; i++) {
		char c = params[i];

		base[n++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9') || c == '.' || c == '-' ? c : '_';
	}
	base[n] = '\0';
	snprintf(buf, len, "%s-%016" PRIx64, base,
		 xbd_cbt_fnv(params, strlen(params), XBD_CBT_FNV_INIT));
}

/* What a file disk looks like now; NONE for anything else. */
static void stamp_now(const struct xbd_track *t, struct xbd_cbt_stamp *s)
{
	struct stat st;

	memset(s, 0, sizeof(*s));
	if (!t->disk_path[0] || stat(t->disk_path, &st) || !S_ISREG(st.st_mode))
		return;
	s->kind = XBD_CBT_STAMP_FILE;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->size = (uint64_t)st.st_size;
	s->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	s->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
}

/* ---- the tracking file ---- */

static void unmap_all(struct xbd_track *t)
{
	if (t->map)
		munmap(t->map, t->map_len);
	if (t->vmap)
		munmap(t->vmap, t->vmap_len);
	t->map = t->vmap = NULL;
	t->run = NULL;
	t->view = NULL;
}

static int map_file(struct xbd_track *t, size_t len)
{
	t->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, 0);
	if (t->map == MAP_FAILED) {
		t->map = NULL;
		return -errno;
	}
	t->map_len = len;
	t->run = (struct xbd_cbt_run *)(t->map + XBD_CBT_RUN_OFF);
	return 0;
}

/*
 * The slots the settings give a disk of bytes: the checkpoints allowed,
 * as far as cbt-max-memory holds their bitmaps; 0: not even one.
 */
static uint32_t slots_for(const struct xbd_disk_opts *o, uint64_t bytes, uint64_t *bitmap)
{
	struct xbd_cbt_meta l;
	uint64_t n;

	memset(&l, 0, sizeof(l));
	xbd_cbt_layout(&l, bytes, o->cbt_granularity, 0);
	*bitmap = l.bitmap_bytes;
	n = o->cbt_max_memory / l.bitmap_bytes;
	return n < o->cbt_max_checkpoints ? (uint32_t)n : o->cbt_max_checkpoints;
}

/* Make the file anew for a disk of bytes (why: what the metadata will say). */
static int create_file(struct xbd_track *t, uint64_t bytes, uint32_t nslots, const char *why)
{
	struct xbd_cbt_meta *m = &t->m;
	uint64_t total;
	int err;

	unmap_all(t);
	memset(m, 0, sizeof(*m));
	m->magic = XBD_CBT_MAGIC;
	m->version = XBD_CBT_VERSION;
	m->meta_size = sizeof(*m);
	xbd_cbt_layout(m, bytes, t->dev->disk.o.cbt_granularity, nslots);
	total = m->file_bytes;
#ifdef XBD_TEST_HOOKS
	/* Tests: zones of this many bytes, so that a small disk has several. */
	if (getenv("XBD_TEST_CBT_ZONE_BYTES")) {
		uint64_t zb = strtoull(getenv("XBD_TEST_CBT_ZONE_BYTES"), NULL, 10) / m->granularity;

		if (zb && !(zb & (zb - 1)) && (m->nblocks + zb - 1) / zb <= XBD_CBT_MAX_ZONES) {
			m->zone_shift = xbd_cbt_log2(zb);
			m->nzones = (m->nblocks + zb - 1) / zb;
		}
	}
	/* Tests: keep what each sync made durable (xbd_cbt_file_sync), for a simulated power loss. */
	if (getenv("XBD_TEST_CBT_SHADOW")) {
		m->shadow_off = m->file_bytes;
		total += XBD_CBT_PAGE + 2 * m->file_bytes;
	}
#endif
	m->tracking_id = tracking_random();
	m->created = time(NULL);
	snprintf(m->params, sizeof(m->params), "%s", t->dev->params);
	snprintf(m->started_why, sizeof(m->started_why), "%s", why);
	m->next_seq = 1;
	/* Zeroes, every slot and intent. */
	if (ftruncate(t->fd, 0) || ftruncate(t->fd, (off_t)total))
		return -errno;
	err = map_file(t, total);
	if (err)
		return err;
	m->seqno = 0; /* the first commit writes copy 1 (seqno 1) */
	err = tracking_commit(t);
	if (!err)
		DLOG(t->dev, XBD_LOG_INFO, "changed-block tracking begins (%s): %s, %" PRIu64
		     "-byte blocks, %u checkpoints of %" PRIu64 " KiB bitmaps", why, t->path,
		     m->granularity, m->nslots, m->bitmap_bytes >> 10);
	return err;
}

/*
 * Read the file that is there: 0 with t->m its metadata, or -errno with
 * why (what a new file will say) when it cannot be used as it is.
 */
static int read_file(struct xbd_track *t, uint64_t bytes, uint32_t nslots, char *why, size_t len)
{
	const struct xbd_cbt_meta *best = NULL;
	struct stat st;
	int err;

	if (fstat(t->fd, &st))
		return -errno;
	if (st.st_size == 0) {
		snprintf(why, len, "first use");
		return -ENOENT;
	}
	if ((uint64_t)st.st_size < XBD_CBT_SLOTS_OFF) {
		snprintf(why, len, "its file was too short (%lld bytes): lost or damaged",
			 (long long)st.st_size);
		return -EINVAL;
	}
	err = map_file(t, (size_t)st.st_size);
	if (err)
		return err;
	for (int i = 0; i < 2; i++) {
		const struct xbd_cbt_meta *c = (const void *)(t->map + i * XBD_CBT_META_SIZE);

		if (c->magic == XBD_CBT_MAGIC && c->version == XBD_CBT_VERSION &&
		    c->meta_size == sizeof(*c) && c->sum == xbd_cbt_sum(c) &&
		    (!best || c->seqno > best->seqno))
			best = c;
	}
	if (!best) {
		snprintf(why, len, "its file was unreadable (neither copy of its metadata checks)");
		return -EINVAL;
	}
	t->m = *best;
	t->m.params[sizeof(t->m.params) - 1] = '\0';
	if (strcmp(t->m.params, t->dev->params)) {
		snprintf(why, len, "its file belonged to another image");
		return -EINVAL;
	}
	if (t->m.file_bytes > (uint64_t)st.st_size || t->m.ncp > t->m.nslots ||
	    t->m.nslots > XBD_CBT_MAX_CKPT) {
		snprintf(why, len, "its file was damaged (its layout does not fit it)");
		return -EINVAL;
	}
	if (t->m.granularity != t->dev->disk.o.cbt_granularity) {
		snprintf(why, len, "cbt-granularity changed from %" PRIu64 " to %" PRIu64,
			 t->m.granularity, t->dev->disk.o.cbt_granularity);
		return -EINVAL;
	}
	if (bytes > t->m.nblocks * t->m.granularity) {
		snprintf(why, len, "the disk grew from %" PRIu64 " to %" PRIu64 " bytes",
			 t->m.disk_bytes, bytes);
		return -EINVAL;
	}
	if (nslots != t->m.nslots) {
		snprintf(why, len, "cbt-max-checkpoints or cbt-max-memory changed (%u checkpoints, "
			 "%u before)", nslots, t->m.nslots);
		return -EINVAL;
	}
	return 0;
}

/*
 * A daemon had it open when the host went down (another boot): every
 * zone that had an intent may hold writes whose bits did not reach the
 * disk (datapath/cbt.c); all its blocks count as changed.  How many.
 */
static uint64_t recover_power_loss(struct xbd_track *t)
{
	const uint64_t *z0 = (const uint64_t *)(t->map + XBD_CBT_ZONES_OFF);
	const uint64_t *z1 = (const uint64_t *)(t->map + XBD_CBT_ZONES_OFF + XBD_CBT_ZONE_BYTES);
	struct xbd_cbt_meta *m = &t->m;
	uint64_t blocks = 0, z, zb = 1ull << m->zone_shift;
	uint64_t *live;

	if (!m->ncp || m->cp[m->ncp - 1].epoch != m->epoch)
		return 0;
	live = tracking_slot(t, m->cp[m->ncp - 1].slot);
	for (z = 0; z < m->nzones; z++) {
		uint64_t first = z * zb, last = first + zb - 1, b, set = 0;

		if (!((z0[z / 64] | z1[z / 64]) >> (z % 64) & 1))
			continue;
		if (last >= m->nblocks)
			last = m->nblocks - 1;
		for (b = first; b <= last; b++)
			set += !xbd_cbt_bit(live, b);
		xbd_cbt_set_range(live, first, last);
		blocks += set;
	}
	return blocks;
}

/* The view file: its layout for cbt-scratch, and a view that survived a crash kept. */
static int open_view(struct xbd_track *t, const char *boot)
{
	const struct xbd_disk_opts *o = &t->dev->disk.o;
	uint64_t g = o->cbt_granularity, nslots = o->cbt_scratch / g, entries = 64, data_off, total;
	struct xbd_cbt_view old, *v;
	bool keep = false;
	struct stat st;

	if (nslots > XBD_CBT_MAX_COPIES)
		nslots = XBD_CBT_MAX_COPIES;
	if (!nslots) {
		unlink(t->vpath);
		return 0;
	}
	while (entries < 2 * nslots)
		entries *= 2;
	data_off = xbd_cbt_round_up(XBD_CBT_TABLE_OFF + entries * 8, XBD_CBT_PAGE);
	total = data_off + nslots * g;
	t->vfd = open(t->vpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (t->vfd < 0 || fstat(t->vfd, &st))
		return -errno;
	memset(&old, 0, sizeof(old));
	if (pread(t->vfd, &old, sizeof(old), 0) == (ssize_t)sizeof(old) &&
	    old.magic == XBD_CBT_VIEW_MAGIC && old.version == XBD_CBT_VERSION &&
	    old.state == XBD_VIEW_ACTIVE && !strncmp(old.boot_id, boot, sizeof(old.boot_id)) &&
	    old.granularity == g && old.nslots == nslots && old.table_entries == entries &&
	    old.data_off == data_off && (uint64_t)st.st_size == total)
		keep = true; /* xbd-back or its worker was killed: the view goes on */
	if (!keep) {
		/* A reader of an old view sees ENDED before anything under it changes. */
		if (old.magic == XBD_CBT_VIEW_MAGIC && old.state == XBD_VIEW_ACTIVE) {
			old.state = XBD_VIEW_ENDED;
			snprintf(old.why, sizeof(old.why), "%s", strncmp(old.boot_id, boot,
				 sizeof(old.boot_id)) ? "the host restarted" : "its scratch store changed");
			if (pwrite(t->vfd, &old, sizeof(old), 0) != (ssize_t)sizeof(old))
				return -EIO;
		}
		if ((uint64_t)st.st_size != total && ftruncate(t->vfd, (off_t)total))
			return -errno;
	}
	t->vmap = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, t->vfd, 0);
	if (t->vmap == MAP_FAILED) {
		t->vmap = NULL;
		return -errno;
	}
	t->vmap_len = total;
	t->view = v = (struct xbd_cbt_view *)t->vmap;
	if (keep) {
		DLOG(t->dev, XBD_LOG_INFO, "the view of checkpoint '%s' goes on (%" PRIu64
		     " blocks kept)", v->checkpoint, v->copied);
		return 0;
	}
	if (old.magic != XBD_CBT_VIEW_MAGIC) {
		memset(v, 0, sizeof(*v));
		v->magic = XBD_CBT_VIEW_MAGIC;
		v->version = XBD_CBT_VERSION;
	} else if (v->state != XBD_VIEW_ENDED) {
		__atomic_store_n(&v->state, XBD_VIEW_NONE, __ATOMIC_RELEASE);
	}
	v->granularity = g;
	v->nslots = nslots;
	v->table_entries = entries;
	v->data_off = data_off;
	v->file_bytes = total;
	return tracking_view_reset(t, false);
}

int tracking_view_reset(struct xbd_track *t, bool reserve)
{
	struct xbd_cbt_view *v = t->view;
	uint64_t bytes = v->nslots * v->granularity;

	memset(t->vmap + XBD_CBT_TABLE_OFF, 0, v->table_entries * 8);
	v->used = v->copied = 0;
	/* Reserved, so that storing a copy never finds the file system full. */
	if (reserve)
		return fallocate(t->vfd, 0, (off_t)v->data_off, (off_t)bytes) ? -errno : 0;
	if (fallocate(t->vfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)v->data_off,
		      (off_t)bytes) && errno != EOPNOTSUPP)
		return -errno;
	return 0;
}

void tracking_view_end(struct xbd_track *t, const char *why)
{
	struct xbd_cbt_view *v = t->view;
	uint32_t st;

	if (!v)
		return;
	st = __atomic_load_n(&v->state, __ATOMIC_ACQUIRE);
	if (st != XBD_VIEW_ACTIVE && st != XBD_VIEW_FAILED && st != XBD_VIEW_FAILING)
		return;
	if (st != XBD_VIEW_FAILED)
		snprintf(v->why, sizeof(v->why), "%s", why);
	v->ended = time(NULL);
	/* Release: an export sees ENDED (and why) before the copies go. */
	__atomic_store_n(&v->state, XBD_VIEW_ENDED, __ATOMIC_RELEASE);
	tracking_view_reset(t, false);
}

static void track_free(struct xbd_track *t)
{
	unmap_all(t);
	if (t->fd >= 0)
		close(t->fd); /* the lock goes with it */
	if (t->vfd >= 0)
		close(t->vfd);
	if (t->ring_fd >= 0)
		close(t->ring_fd);
	if (t->ring_vfd >= 0)
		close(t->ring_vfd);
	free(t);
}

/* What an open that finds the file as its last user left it trusts, or does not. */
static void check_trust(struct xbd_track *t, const char *boot)
{
	struct xbd_cbt_meta *m = &t->m;

	if (m->open && strncmp(m->boot_id, boot, sizeof(m->boot_id))) {
		uint64_t n = recover_power_loss(t);

		DLOG(t->dev, XBD_LOG_WARNING, "changed-block tracking: the host went down while "
		     "it was in use: %" PRIu64 " blocks of the zones written last are counted "
		     "changed (over-reported at most; nothing missing)", n);
	} else if (m->open) {
		DLOG(t->dev, XBD_LOG_INFO, "changed-block tracking: taken over after an unclean "
		     "stop of xbd-back (nothing lost)");
	} else {
		struct xbd_cbt_stamp now;

		stamp_now(t, &now);
		if (m->closed.kind == XBD_CBT_STAMP_NONE || now.kind == XBD_CBT_STAMP_NONE) {
			if (m->ncp)
				tracking_untrust(t, "its storage is not a file: xbd-back cannot tell "
						 "whether something else wrote it while it was closed");
		} else if (now.dev != m->closed.dev || now.ino != m->closed.ino ||
			   now.size != m->closed.size || now.mtime_ns != m->closed.mtime_ns ||
			   now.ctime_ns != m->closed.ctime_ns) {
			if (m->ncp)
				tracking_untrust(t, "the image changed while xbd-back did not serve it");
		}
	}
}

/* cbt-dir and its parents (/var/lib/xbd on a fresh host), 0700; 0 or -errno. */
static int make_dir(const char *dir)
{
	char p[PATH_MAX];

	if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = strchr(p + 1, '/'); ; s = strchr(s + 1, '/')) {
		if (s)
			*s = '\0';
		if (mkdir(p, 0700) && errno != EEXIST)
			return -errno;
		if (!s)
			return 0;
		*s = '/';
	}
}

int tracking_open(struct xbd_dev *dev)
{
	const char *dir = dev->bk->cbt_dir;
	uint64_t bytes = __atomic_load_n(&dev->disk.lim.nr_sectors, __ATOMIC_RELAXED) << 9, bitmap;
	uint32_t nslots = slots_for(&dev->disk.o, bytes, &bitmap);
	char name[96], why[XBD_CBT_WHY_MAX] = "", boot[40];
	const struct xbd_engine *e;
	const char *target = NULL;
	struct xbd_track *t;
	int err;

	if (!dir)
		return -ENOENT;
	if (!nslots) {
		DLOG(dev, XBD_LOG_ERR, "changed-block tracking not started: one checkpoint's bitmap "
		     "(%" PRIu64 " bytes at cbt-granularity %" PRIu64 ") is more than "
		     "cbt-max-memory (%" PRIu64 "): raise either", bitmap,
		     dev->disk.o.cbt_granularity, dev->disk.o.cbt_max_memory);
		return -E2BIG;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->dev = dev;
	t->fd = t->vfd = t->ring_fd = t->ring_vfd = -1;
	file_name(dev->params, name, sizeof(name));
	snprintf(t->path, sizeof(t->path), "%s/%s.cbt", dir, name);
	snprintf(t->vpath, sizeof(t->vpath), "%s/%s.view", dir, name);
	e = xbd_engine_for(dev->params, &target);
	if (e && e->file && target)
		snprintf(t->disk_path, sizeof(t->disk_path), "%s", target);
	tracking_boot_id(boot, sizeof(boot));
	err = make_dir(dir);
	if (err)
		goto fail;
	t->fd = open(t->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (t->fd < 0) {
		err = -errno;
		goto fail;
	}
	if (flock(t->fd, LOCK_EX | LOCK_NB)) {
		err = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto fail;
	}
	err = read_file(t, bytes, nslots, why, sizeof(why));
	if (err && err != -ENOMEM && err != -EIO) {
		err = create_file(t, bytes, nslots, why);
	} else if (!err) {
		check_trust(t, boot);
		t->m.closed.kind = XBD_CBT_STAMP_NONE;
	}
	if (err)
		goto fail;
	/* Ours now, in this boot; the run page as no ring has run yet. */
	t->m.open = 1;
	snprintf(t->m.boot_id, sizeof(t->m.boot_id), "%s", boot);
	memset(t->run, 0, sizeof(*t->run));
	t->run->live = t->m.ncp && t->m.cp[t->m.ncp - 1].epoch == t->m.epoch ?
		       t->m.cp[t->m.ncp - 1].slot : XBD_CBT_NONE;
	/* Every mark is in the page cache (or was recovered): the intents start empty. */
	memset(t->map + XBD_CBT_ZONES_OFF, 0, 2 * XBD_CBT_ZONE_BYTES);
	err = tracking_sync(t);
	if (!err)
		err = tracking_commit(t);
	if (!err)
		err = open_view(t, boot);
	if (err)
		goto fail;
	/* The process of its rings maps its own opens (a dying one never holds the lock). */
	t->ring_fd = open(t->path, O_RDWR | O_CLOEXEC);
	if (t->ring_fd < 0 || (t->vfd >= 0 && (t->ring_vfd = open(t->vpath, O_RDWR | O_CLOEXEC)) < 0)) {
		err = -errno;
		goto fail;
	}
	dev->track = t;
	dev->disk.cbt_fd = t->ring_fd;
	dev->disk.view_fd = t->ring_vfd;
	return 0;
fail:
	DLOG(dev, XBD_LOG_ERR, "changed-block tracking not started: %s: %s", t->path,
	     err == -EBUSY ? "in use by another process" : strerror(-err));
	track_free(t);
	return err;
}

void tracking_close(struct xbd_dev *dev, const char *why)
{
	struct xbd_track *t = dev->track;

	if (!t)
		return;
	tracking_poll(t);
	tracking_view_end(t, why);
	stamp_now(t, &t->m.closed);
	t->m.open = 0;
	tracking_commit(t);
	dev->track = NULL;
	dev->disk.cbt_fd = dev->disk.view_fd = -1;
	track_free(t);
}
