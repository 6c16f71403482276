/*
 * vbd3-stats.c: a vbd3 disk's counters where Xen's libxenstat (xentop,
 * from Xen 4.19) reads tapdisk3's: the backend directory's kthread-pid
 * names the serving process, whose /dev/shm/td3-<pid>/vbd-<domid>-<devid>
 * holds a struct vbd3_stats (blktap's layout, version 1).  libxenstat
 * finds the disk through the kernel's /sys/bus/xen-backend/devices/vbd3-*
 * entry and reads kthread-pid under /local/domain/0 only, so only dom0's
 * disks appear.  On the simulator the directory is its host's run/shm.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blkback/control/device.h"

/* blktap's tapdisk-metrics-stats.h, as Xen's xenstat_priv.h copies it. */
struct vbd3_stats {
	uint32_t version;
	uint32_t pad;
	uint64_t oo_reqs;
	uint64_t read_reqs_submitted;
	uint64_t read_reqs_completed;
	uint64_t read_sectors;
	uint64_t read_total_ticks;
	uint64_t write_reqs_submitted;
	uint64_t write_reqs_completed;
	uint64_t write_sectors;
	uint64_t write_total_ticks;
	uint64_t io_errors;
	uint64_t flags;
};
_Static_assert(sizeof(struct vbd3_stats) == 96, "libxenstat freads exactly 96 bytes");

/* DIR/td3-PID for this process (buf of len bytes); false if it does not fit. */
static bool vbd3_dir(char *buf, size_t len)
{
	const char *sim = getenv("XBD_SIM_DIR");
	int n;

	if (sim && *sim)
		n = snprintf(buf, len, "%s/run/shm/td3-%d", sim, (int)getpid());
	else
		n = snprintf(buf, len, "/dev/shm/td3-%d", (int)getpid());
	return n > 0 && (size_t)n < len;
}

static bool vbd3_path(const struct xbd_dev *dev, char *buf, size_t len)
{
	char dir[PATH_MAX];
	int n;

	if (!vbd3_dir(dir, sizeof(dir)))
		return false;
	n = snprintf(buf, len, "%s/vbd-%u-%u", dir, dev->disk.domid, dev->disk.devid);
	return n > 0 && (size_t)n < len;
}

/* Make DIR/td3-PID (and the simulator's run/shm), mode 0755: readers are not root-only. */
static int vbd3_mkdir(void)
{
	char dir[PATH_MAX], *slash;

	if (!vbd3_dir(dir, sizeof(dir)))
		return -ENAMETOOLONG;
	slash = strrchr(dir, '/');
	*slash = '\0';
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	*slash = '/';
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

void xbd_vbd3_publish(struct xbd_dev *dev, const struct xbd_ring_stats *sum)
{
	struct vbd3_stats v = { .version = 1 };
	char path[PATH_MAX], p[XBD_XS_PATH_MAX];
	int fd, err;

	if (strcmp(dev->disk.type, "vbd3") || dev->vbd3_failed)
		return;
	if (!dev->vbd3_published) {
		err = vbd3_mkdir();
		if (!err && (xbd_xs_join(p, sizeof(p), dev->bpath, "kthread-pid") ||
			     xbd_xs_write_uint(dev->bk->xs, XBT_NULL, p, (uint64_t)getpid())))
			err = -EIO;
		if (err) {
			DLOG(dev, XBD_LOG_WARNING, "no statistics for xentop: %s", strerror(-err));
			dev->vbd3_failed = true;
			return;
		}
		dev->vbd3_published = true;
	}
	v.oo_reqs = sum->oo_req;
	v.read_reqs_submitted = sum->rd_req;
	v.read_reqs_completed = sum->rd_req;
	v.read_sectors = sum->rd_sect;
	v.write_reqs_submitted = sum->wr_req;
	v.write_reqs_completed = sum->wr_req;
	v.write_sectors = sum->wr_sect;
	v.io_errors = sum->io_errors;
	if (!vbd3_path(dev, path, sizeof(path)))
		return;
	/* One write of the whole record: a reader sees one refresh or the one before. */
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return;
	if (pwrite(fd, &v, sizeof(v), 0) != (ssize_t)sizeof(v)) {
		/* Read again at the next refresh. */
	}
	close(fd);
}

void xbd_vbd3_unpublish(struct xbd_dev *dev)
{
	char path[PATH_MAX];

	if (dev->vbd3_published && vbd3_path(dev, path, sizeof(path)))
		unlink(path);
	dev->vbd3_published = false;
}

void xbd_vbd3_cleanup(void)
{
	char dir[PATH_MAX];

	if (vbd3_dir(dir, sizeof(dir)))
		rmdir(dir);
}
