/*
 * platform/xen-fd.c: platform.h on real Xen for a process that opens no
 * device itself (xbd-back's workers, which have no file system): grant
 * maps, unmaps and copies through the ioctls of a /dev/xen/gntdev fd it
 * was handed (libxengnttab cannot adopt an fd), event channels from
 * /dev/xen/evtchn fds it is handed (xenevtchn_fdopen).  And the other
 * half, for the process that hands them over: opening those devices
 * limited to what one worker needs, where the kernel can limit them.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <stdarg.h>
#include <xenevtchn.h>
#include <xentoollog.h>
#include <xen/sys/evtchn.h>
#include <xen/sys/gntdev.h>

#include "platform/impl.h"

#define GNTDEV_PATH "/dev/xen/gntdev"
#define EVTCHN_PATH "/dev/xen/evtchn"
#define PAGE_BYTES 4096u

struct xenfd_platform {
	struct xbd_platform base;
	int gntdev;
};

static int gntdev_of(struct xbd_platform *p)
{
	return ((struct xenfd_platform *)p)->gntdev;
}

static void xenfd_close(struct xbd_platform *p)
{
	close(gntdev_of(p));
	free(p);
}

/*
 * Map: the ioctl reserves the references under an offset of the fd, the
 * mmap of that offset maps them (the hypercall happens there).  A grant
 * of a page its guest has paged out fails with EAGAIN for a while.
 */
static void *xenfd_gnt_map(struct xbd_platform *p, uint32_t domid, unsigned int count,
			   const uint32_t *refs, bool writable, int16_t *status)
{
	size_t size = offsetof(struct ioctl_gntdev_map_grant_ref, refs) +
		      (size_t)count * sizeof(struct ioctl_gntdev_grant_ref);
	struct ioctl_gntdev_map_grant_ref *m = malloc(size);
	struct timespec ms = { 0, 1000000 };
	void *addr = MAP_FAILED;
	int fd = gntdev_of(p), saved = ENOMEM, tries = 0;

	if (m) {
		m->count = count;
		m->pad = 0;
		for (unsigned int i = 0; i < count; i++) {
			m->refs[i].domid = domid;
			m->refs[i].ref = refs[i];
		}
		if (ioctl(fd, IOCTL_GNTDEV_MAP_GRANT_REF, m) == 0) {
			while ((addr = mmap(NULL, (size_t)count * PAGE_BYTES,
					    PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd,
					    (off_t)m->index)) == MAP_FAILED &&
			       errno == EAGAIN && ++tries < 10)
				nanosleep(&ms, NULL);
			saved = errno;
			if (addr == MAP_FAILED) {
				struct ioctl_gntdev_unmap_grant_ref u = { .index = m->index,
									  .count = count };

				ioctl(fd, IOCTL_GNTDEV_UNMAP_GRANT_REF, &u);
			}
		} else {
			saved = errno;
		}
	}
	free(m);
	/* As libxengnttab: no code per reference, every one failed. */
	if (status)
		for (unsigned int i = 0; i < count; i++)
			status[i] = addr != MAP_FAILED ? GNTST_okay : GNTST_general_error;
	if (addr == MAP_FAILED) {
		errno = saved;
		return NULL;
	}
	return addr;
}

/* Unmap: the region's offset from its address, the pages, then the reservation. */
static int xenfd_gnt_unmap(struct xbd_platform *p, void *addr, unsigned int count)
{
	struct ioctl_gntdev_get_offset_for_vaddr g = { .vaddr = (uintptr_t)addr };
	struct ioctl_gntdev_unmap_grant_ref u;
	int fd = gntdev_of(p);

	if (ioctl(fd, IOCTL_GNTDEV_GET_OFFSET_FOR_VADDR, &g))
		return -errno;
	if (g.count != count)
		return -EINVAL;
	if (munmap(addr, (size_t)count * PAGE_BYTES))
		return -errno;
	u.index = g.offset;
	u.count = count;
	u.pad = 0;
	return ioctl(fd, IOCTL_GNTDEV_UNMAP_GRANT_REF, &u) ? -errno : 0;
}

#define COPY_BATCH 64

static int xenfd_gnt_copy(struct xbd_platform *p, unsigned int count,
			  struct xbd_gnt_copy_seg *segs)
{
	struct ioctl_gntdev_grant_copy_segment batch[COPY_BATCH];
	int fd = gntdev_of(p);

	for (unsigned int i = 0; i < count;) {
		unsigned int n = count - i < COPY_BATCH ? count - i : COPY_BATCH;
		struct ioctl_gntdev_grant_copy op = { .count = n, .segments = batch };

		for (unsigned int k = 0; k < n; k++) {
			const struct xbd_gnt_copy_seg *s = &segs[i + k];
			struct ioctl_gntdev_grant_copy_segment *c = &batch[k];

			memset(c, 0, sizeof(*c));
			if (s->to_guest) {
				c->source.virt = s->local;
				c->dest.foreign.ref = s->ref;
				c->dest.foreign.offset = s->offset;
				c->dest.foreign.domid = (uint16_t)s->domid;
				c->flags = GNTCOPY_dest_gref;
			} else {
				c->source.foreign.ref = s->ref;
				c->source.foreign.offset = s->offset;
				c->source.foreign.domid = (uint16_t)s->domid;
				c->dest.virt = s->local;
				c->flags = GNTCOPY_source_gref;
			}
			c->len = s->len;
		}
		if (ioctl(fd, IOCTL_GNTDEV_GRANT_COPY, &op))
			return -errno;
		for (unsigned int k = 0; k < n; k++)
			segs[i + k].status = batch[k].status;
		i += n;
	}
	return 0;
}

static void *xenfd_gnt_share(struct xbd_platform *p, uint32_t domid, unsigned int count,
			     bool writable, uint32_t *refs)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int xenfd_gnt_unshare(struct xbd_platform *p, void *addr, unsigned int count)
{
	return -EOPNOTSUPP;
}

static int xenfd_domain_state(struct xbd_platform *p, uint32_t domid)
{
	return -EOPNOTSUPP;
}

/* ---- event channels, from fds the main process opened ---- */

/* Opening a device would need a file system: only handed-over fds. */
static int xenfd_evtchn_open(struct xbd_platform *p, struct xbd_evtchn **out)
{
	return -EPERM;
}

/*
 * libxenevtchn's own logger (given NULL) is a stdio stream that asks
 * isatty(stderr) when it is made: an ioctl(TCGETS) the worker's seccomp
 * filter kills it for (seen on real Xen).  Its messages repeat the errno
 * each call returns to us anyway, so this one says nothing.
 */
static void quiet_vmessage(struct xentoollog_logger *l, xentoollog_level level, int errnoval,
			   const char *context, const char *format, va_list al)
{
}

static struct xentoollog_logger quiet_logger = { .vmessage = quiet_vmessage };

static int xenfd_evtchn_adopt(struct xbd_platform *p, int fd, struct xbd_evtchn **out)
{
	xenevtchn_handle *xce = xenevtchn_fdopen(&quiet_logger, fd, 0);

	if (!xce) {
		int r = -errno;

		close(fd);
		return r;
	}
	return xbd_xen_evtchn_wrap(xce, out);
}

static const struct xbd_platform_ops xenfd_ops = {
	.name = "xen",
	.close = xenfd_close,
	.gnt_map = xenfd_gnt_map,
	.gnt_unmap = xenfd_gnt_unmap,
	.gnt_copy = xenfd_gnt_copy,
	.gnt_share = xenfd_gnt_share,
	.gnt_unshare = xenfd_gnt_unshare,
	.evtchn_open = xenfd_evtchn_open,
	.evtchn_adopt = xenfd_evtchn_adopt,
	.domain_state = xenfd_domain_state,
};

int xbd_platform_xen_from_fd(int gntdev_fd, uint32_t domid, struct xbd_platform **out)
{
	struct xenfd_platform *xp;

	if (gntdev_fd < 0 || !out)
		return -EINVAL;
	xp = calloc(1, sizeof(*xp));
	if (!xp)
		return -ENOMEM;
	xp->base.ops = &xenfd_ops;
	xp->base.domid = domid;
	xp->gntdev = gntdev_fd;
	*out = &xp->base;
	return 0;
}

/* ---- handing the devices over ---- */

int xbd_xen_gntdev_open(unsigned int max_grants, bool *limited)
{
	struct ioctl_gntdev_set_max_grants m = { .count = max_grants };
	int fd = open(GNTDEV_PATH, O_RDWR | O_CLOEXEC);

	*limited = false;
	if (fd < 0)
		return -errno;
	/* Linux dropped this ioctl (4.x, a module-wide limit since): ENOTTY. */
	if (max_grants && ioctl(fd, IOCTL_GNTDEV_SET_MAX_GRANTS, &m) == 0)
		*limited = true;
	return fd;
}

int xbd_xen_evtchn_open_for(uint32_t domid, bool *restricted)
{
	struct ioctl_evtchn_restrict_domid r = { .domid = (domid_t)domid };
	int fd = open(EVTCHN_PATH, O_RDWR | O_CLOEXEC | O_NONBLOCK);

	*restricted = false;
	if (fd < 0)
		return -errno;
	/* Linux 4.8 and later: the fd binds to this domain's ports only. */
	if (ioctl(fd, IOCTL_EVTCHN_RESTRICT_DOMID, &r) == 0) {
		*restricted = true;
	} else if (errno != ENOTTY && errno != EINVAL) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}
