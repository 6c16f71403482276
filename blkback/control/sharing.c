/*
 * sharing.c: one image is never served read-write to several guests by
 * accident (lifecycle.h).  A file or block device a device opens is
 * checked against the other devices of this daemon, then locked against
 * other processes and, on storage shared between hosts that passes file
 * locks on (NFS, CephFS, GFS2, OCFS2), other hosts: an OFD lock
 * (fcntl(2) F_OFD_SETLK, on an open of the image of our own) on one byte
 * far past anything QEMU locks, exclusive for a disk served read-write,
 * shared for one served read-only or read-write with sharing asked for
 * (shared-write = 1, or the toolstack's mode w!, Xen's block script's
 * forced mode).  So readers share, shared writers share with each other
 * and with readers, and a writer shares with nobody: the rule of Xen's
 * block script (check_sharing), which also lets one VM have an image
 * twice (the two domains of a live migration on one host, the same vm
 * node).  The lock belongs to the open file description, so it holds
 * whatever else of ours opens and closes the image (the engine's own
 * open, format-check's read), goes with our last close of it and with
 * the process, a SIGKILL included; it is advisory: what does not ask
 * for it (QEMU's own locks are on other bytes) is not kept out.
 * Ceph RBD images are the engine's: librbd's exclusive lock
 * (engine-rbd.c).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blkback/control/lifecycle.h"

/*
 * The byte locked: "XBD" in ASCII, a place no other program's locks are
 * known to use (QEMU's are at 100 to 300), past the end of most images
 * (a lock past the end is allowed, and changes nothing of the data).
 */
#define SHARE_LOCK_BYTE 0x584244

/* One image this daemon holds, and its lock. */
struct xbd_image {
	struct xbd_image *next;
	bool blockdev;           /* keyed by the device number, else by file */
	dev_t dev;               /* the file's filesystem, or the block device */
	ino_t ino;
	int fd;                  /* our open of it, which holds the lock */
	int rw_err;              /* why it could not be opened for writing, or 0 */
	short held;              /* F_RDLCK or F_WRLCK, or F_UNLCK: none (yet, or not lockable) */
	bool unlockable;         /* the filesystem takes no locks (said once) */
	unsigned int refs;       /* the devices that have it (dev->image) */
};

static const char *share_name(enum xbd_share s)
{
	switch (s) {
	case XBD_SHARE_READ:
		return "read-only";
	case XBD_SHARE_WRITE_SHARED:
		return "read-write (shared)";
	default:
		return "read-write";
	}
}

/* Readers share, shared writers share, a writer shares with nobody but its own VM. */
static bool conflict(const struct xbd_dev *a, const struct xbd_dev *b)
{
	if (a->share != XBD_SHARE_WRITE && b->share != XBD_SHARE_WRITE)
		return false;
	if (a->disk.domid == b->disk.domid)
		return false;
	return !a->dom_vm[0] || strcmp(a->dom_vm, b->dom_vm);
}

/* The lock the image's holders need: exclusive if one of them writes unshared. */
static short lock_wanted(const struct xbd_back *bk, const struct xbd_image *img,
			 const struct xbd_dev *also)
{
	if (also && also->share == XBD_SHARE_WRITE)
		return F_WRLCK;
	for (const struct xbd_dev *o = bk->devs; o; o = o->next)
		if (o->image == img && o->share == XBD_SHARE_WRITE)
			return F_WRLCK;
	return F_RDLCK;
}

/* Set the image's lock to type: 0, or -errno (EAGAIN: another process has it). */
static int lock_set(struct xbd_image *img, short type)
{
	struct flock fl = {
		.l_type = type, .l_whence = SEEK_SET, .l_start = SHARE_LOCK_BYTE, .l_len = 1,
	};

	if (type == F_WRLCK && img->rw_err)
		return img->rw_err;
	if (fcntl(img->fd, F_OFD_SETLK, &fl))
		return errno == EACCES ? -EAGAIN : -errno;
	img->held = type;
	return 0;
}

static struct xbd_image *image_find(struct xbd_back *bk, const struct stat *st)
{
	bool blk = S_ISBLK(st->st_mode);

	for (struct xbd_image *img = bk->images; img; img = img->next)
		if (img->blockdev == blk && (blk ? img->dev == st->st_rdev :
					     img->dev == st->st_dev && img->ino == st->st_ino))
			return img;
	return NULL;
}

/* Open target with flags, and without O_DIRECT where its filesystem refuses that. */
static int image_open(const char *target, int flags)
{
	int fd = open(target, flags);

	if (fd < 0 && errno == EINVAL && (flags & O_DIRECT))
		fd = open(target, flags & ~O_DIRECT);
	return fd;
}

static struct xbd_image *image_new(struct xbd_back *bk, const char *target, const struct stat *st,
				   bool direct, int *err)
{
	struct xbd_image *img = calloc(1, sizeof(*img));
	/*
	 * No I/O goes through it, but it is one of the image's descriptors
	 * all the same: O_DIRECT as the disk's own (what an administrator
	 * reading /proc/PID/fdinfo is told a direct disk has).
	 */
	int flags = O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (direct ? O_DIRECT : 0);

	if (!img) {
		*err = -ENOMEM;
		return NULL;
	}
	img->blockdev = S_ISBLK(st->st_mode);
	img->dev = img->blockdev ? st->st_rdev : st->st_dev;
	img->ino = st->st_ino;
	img->held = F_UNLCK;
	/* An exclusive lock needs an open for writing; a read-only image gets a shared one. */
	img->fd = image_open(target, O_RDWR | flags);
	if (img->fd < 0) {
		img->rw_err = -errno;
		img->fd = image_open(target, O_RDONLY | flags);
	}
	if (img->fd < 0) {
		*err = -errno;
		free(img);
		return NULL;
	}
	img->next = bk->images;
	bk->images = img;
	return img;
}

static void image_put(struct xbd_back *bk, struct xbd_image *img)
{
	struct xbd_image **pp;

	if (--img->refs)
		return;
	for (pp = &bk->images; *pp != img; pp = &(*pp)->next)
		;
	*pp = img->next;
	close(img->fd); /* the lock goes with it */
	free(img);
}

/* The other device of ours that dev may not share target with, or NULL. */
static const struct xbd_dev *holder(const struct xbd_dev *dev, const struct xbd_image *img)
{
	for (const struct xbd_dev *o = dev->bk->devs; o; o = o->next)
		if (o != dev && o->image == img && conflict(dev, o))
			return o;
	return NULL;
}

int dev_share_take(struct xbd_dev *dev, const char *target, const char *shown, char *why,
		   size_t len)
{
	struct xbd_back *bk = dev->bk;
	const struct xbd_dev *o;
	struct xbd_image *img;
	char esc[XBD_LOG_STR_BUF], name[XBD_LOG_STR_BUF];
	struct stat st;
	short want;
	int err = 0;

	dev_share_drop(dev);
	if (stat(target, &st))
		return -errno;
	/* Neither a file nor a block device: the engine's open says what it is. */
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		return 0;
	img = image_find(bk, &st);
	if (img && (o = holder(dev, img))) {
		snprintf(why, len, "'%s' is in use %s by %s%s%s%s%s", xbd_log_str(esc, shown),
			 share_name(o->share), o->disk.name, o->dom_name[0] ? " (domain " : "",
			 o->dom_name[0] ? xbd_log_str(name, o->dom_name) : "",
			 o->dom_name[0] ? ")" : "", XBD_SHARE_HINT);
		return -EBUSY;
	}
	if (!img && !(img = image_new(bk, target, &st, dev->disk.o.direct, &err)))
		return err;
	want = lock_wanted(bk, img, dev);
	if (img->held != want && img->held != F_WRLCK && !img->unlockable)
		err = lock_set(img, want);
	if (err == -EAGAIN) {
		snprintf(why, len, "'%s' is in use by another process (it holds the image's lock: "
			 "another xbd-back, on this host or on another that shares the storage)%s",
			 xbd_log_str(esc, shown), XBD_SHARE_HINT);
		err = -EBUSY;
	} else if (err == -ENOLCK || err == -EINVAL || err == -EOPNOTSUPP) {
		/* NFS mounted nolock, a filesystem without locks: serve, and say it once. */
		DLOG(dev, XBD_LOG_WARNING, "'%s' takes no file lock (%s): other processes and "
		     "hosts are not kept from serving it read-write too", xbd_log_str(esc, shown),
		     strerror(-err));
		img->unlockable = true;
		err = 0;
	}
	if (err) {
		if (!img->refs) {
			img->refs = 1;
			image_put(bk, img);
		}
		return err;
	}
	img->refs++;
	dev->image = img;
	return 0;
}

void dev_share_drop(struct xbd_dev *dev)
{
	struct xbd_image *img = dev->image;

	if (!img)
		return;
	dev->image = NULL;
	/* The last writer gone: the others keep a shared lock (a downgrade cannot fail). */
	if (img->refs > 1 && img->held == F_WRLCK && lock_wanted(dev->bk, img, NULL) == F_RDLCK)
		lock_set(img, F_RDLCK);
	image_put(dev->bk, img);
}
