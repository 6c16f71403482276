/*
 * engine-file.c: opening a file or block device for the aio and uring
 * engines, and the rules both apply to it (engine-file.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "blkback/engines/engine-file.h"
#include "blkback/log/log.h"

unsigned int xbd_file_queue_attr(const struct xbd_file *f, const char *file)
{
	char path[128];
	unsigned long long v = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/%s", major(f->rdev),
		 minor(f->rdev), file);
	fp = fopen(path, "re");
	if (!fp)
		return 0;
	if (fscanf(fp, "%llu", &v) != 1)
		v = 0;
	fclose(fp);
	return v > UINT32_MAX ? UINT32_MAX : (unsigned int)v;
}

int xbd_file_open(const char *target, bool readonly, bool direct, struct xbd_file *f)
{
	int flags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	struct stat st;
	int err;

	if (!*target)
		return -ENOENT;
	f->fd = open(target, flags | (direct ? O_DIRECT : 0));
	if (direct && f->fd < 0 && errno == EINVAL) {
		/* tmpfs before Linux 6.6 and a few others: fall back to the page cache. */
		direct = false;
		f->fd = open(target, flags);
		if (f->fd >= 0)
			xbd_log(XBD_LOG_INFO, "%s: O_DIRECT refused by the filesystem, using the page cache",
				target);
	}
	if (f->fd < 0)
		return -errno;
	if (fstat(f->fd, &st)) {
		err = -errno;
		goto fail;
	}
	f->caps.logical_block = 512;
	f->caps.physical_block = 512;
	if (S_ISBLK(st.st_mode)) {
		int lbs = 512;
		unsigned int pbs = 512;

		f->blockdev = true;
		f->rdev = st.st_rdev;
		if (!ioctl(f->fd, BLKSSZGET, &lbs) && lbs >= 512 && lbs <= 4096)
			f->caps.logical_block = lbs;
		if (!ioctl(f->fd, BLKPBSZGET, &pbs) && pbs >= 512)
			f->caps.physical_block = pbs;
		if (xbd_file_queue_attr(f, "discard_max_bytes")) {
			f->caps.discard = true;
			f->caps.discard_granularity = xbd_file_queue_attr(f, "discard_granularity");
			if (!f->caps.discard_granularity)
				f->caps.discard_granularity = f->caps.logical_block;
		}
		/* Secure erase: the kernel dropped BLKSECDISCARD support from most drivers. */
		f->caps.discard_secure = false;
	} else if (S_ISREG(st.st_mode)) {
		struct statx stx;

		/*
		 * O_DIRECT on a file needs what the filesystem's device needs
		 * (4096 on a 4Kn disk): offer that as sector-size, so that the
		 * guest never sends what the kernel would refuse.
		 */
		if (direct && !statx(f->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) &&
		    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align > 512 &&
		    stx.stx_dio_offset_align <= 4096)
			f->caps.logical_block = stx.stx_dio_offset_align;
		/* Punched holes read back as zeros in whole filesystem blocks. */
		f->caps.discard = true;
		f->caps.discard_granularity = st.st_blksize >= 512 ? st.st_blksize : 4096;
	} else {
		/* Neither a regular file nor a block device (a directory opened read-only). */
		err = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		goto fail;
	}
	if (f->caps.physical_block < f->caps.logical_block)
		f->caps.physical_block = f->caps.logical_block;
	f->caps.page_cache = !direct;
	return 0;
fail:
	close(f->fd);
	f->fd = -1;
	return err;
}

void xbd_file_close(struct xbd_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

int xbd_file_size(const struct xbd_file *f, uint64_t *bytes)
{
	struct stat st;

	if (f->blockdev) {
		uint64_t sz;

		if (ioctl(f->fd, BLKGETSIZE64, &sz))
			return -errno;
		*bytes = sz;
		return 0;
	}
	if (fstat(f->fd, &st))
		return -errno;
	*bytes = st.st_size;
	return 0;
}

const char *xbd_image_format(const unsigned char *b, size_t len)
{
	static const struct {
		size_t off;
		const char *magic;
		size_t len;
		const char *name;
	} known[] = {
		{ 0, "QFI\xfb", 4, "qcow2" }, /* qcow (version 1) too: the same magic */
		{ 0, "QED\0", 4, "QED" },
		{ 0, "conectix", 8, "VHD" },  /* dynamic and differencing; a fixed VHD is raw data */
		{ 0, "vhdxfile", 8, "VHDX" },
		{ 0, "KDMV", 4, "VMDK" },     /* a sparse extent */
		{ 0, "COWD", 4, "VMDK" },     /* ESX's sparse extent */
		{ 0, "# Disk DescriptorFile", 21, "VMDK" },
		{ 0x40, "\x7f\x10\xda\xbe", 4, "VDI" },
		{ 0, "LUKS\xba\xbe", 6, "LUKS" },
	};
	unsigned int i;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (len >= known[i].off + known[i].len &&
		    !memcmp(b + known[i].off, known[i].magic, known[i].len))
			return known[i].name;
	return NULL;
}

const char *xbd_file_image_format(const char *target)
{
	unsigned char b[512];
	const char *name = NULL;
	ssize_t n;
	int fd;

	/* Through the page cache: one sector, whatever O_DIRECT would need. */
	fd = open(target, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return NULL; /* the engine's open says why */
	n = pread(fd, b, sizeof(b), 0);
	if (n > 0)
		name = xbd_image_format(b, (size_t)n);
	close(fd);
	return name;
}

int xbd_file_rw_result(const struct xbd_io *io, long res)
{
	uint64_t want = 0;
	unsigned int j;

	if (res < 0)
		return (int)res;
	for (j = 0; j < io->iovcnt; j++)
		want += io->iov[j].iov_len;
	/* A short transfer: past the end after a shrink, or an I/O error. */
	return (uint64_t)res == want ? 0 : -EIO;
}

int xbd_file_store_open(const char *target, bool readonly, bool direct, size_t size,
			struct xbd_store **out)
{
	struct xbd_file *f = calloc(1, size);
	int err;

	if (!f)
		return -ENOMEM;
	err = xbd_file_open(target, readonly, direct, f);
	if (err) {
		free(f);
		return err;
	}
	*out = &f->base;
	return 0;
}

void xbd_file_store_close(struct xbd_store *s)
{
	xbd_file_close((struct xbd_file *)s);
	free(s);
}

int xbd_file_store_size(struct xbd_store *s, uint64_t *bytes)
{
	return xbd_file_size((struct xbd_file *)s, bytes);
}

void xbd_file_store_caps(struct xbd_store *s, struct xbd_engine_caps *caps)
{
	*caps = ((struct xbd_file *)s)->caps;
}
