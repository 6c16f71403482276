/*
 * platform/xen.c: platform.h on real Xen, a thin layer over libxengnttab
 * (grant maps, copies, and xengntshr for granting), libxenevtchn and
 * libxenctrl.  Each device is opened when first needed, so a frontend-only
 * guest needs no privcmd and a backend-only dom0 no gntalloc.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xenctrl.h>
#include <xenevtchn.h>
#include <xengnttab.h>

#include "platform/impl.h"

struct xen_platform {
	struct xbd_platform base;
	pthread_mutex_t lock;    /* lazy opening of the handles below */
	xengnttab_handle *gnttab;
	xengntshr_handle *gntshr;
	xc_interface *xc;
};

struct xen_evtchn {
	struct xbd_evtchn base;
	xenevtchn_handle *xce;
};

static struct xen_platform *xp_of(struct xbd_platform *p)
{
	return (struct xen_platform *)p;
}

static struct xen_evtchn *xe_of(struct xbd_evtchn *e)
{
	return (struct xen_evtchn *)e;
}

static void xen_close(struct xbd_platform *p)
{
	struct xen_platform *xp = xp_of(p);

	if (xp->gnttab)
		xengnttab_close(xp->gnttab);
	if (xp->gntshr)
		xengntshr_close(xp->gntshr);
	if (xp->xc)
		xc_interface_close(xp->xc);
	pthread_mutex_destroy(&xp->lock);
	free(xp);
}

static xengntshr_handle *gntshr(struct xen_platform *xp)
{
	xengntshr_handle *h;

	pthread_mutex_lock(&xp->lock);
	if (!xp->gntshr)
		xp->gntshr = xengntshr_open(NULL, 0);
	h = xp->gntshr;
	pthread_mutex_unlock(&xp->lock);
	return h;
}

static xc_interface *xc(struct xen_platform *xp)
{
	xc_interface *h;

	pthread_mutex_lock(&xp->lock);
	if (!xp->xc)
		xp->xc = xc_interface_open(NULL, NULL, 0);
	h = xp->xc;
	pthread_mutex_unlock(&xp->lock);
	return h;
}

static void *xen_gnt_map(struct xbd_platform *p, uint32_t domid, unsigned int count,
			 const uint32_t *refs, bool writable, int16_t *status)
{
	struct xen_platform *xp = xp_of(p);
	void *addr;
	int saved;

	/* libxengnttab does not write through refs; its prototype predates const. */
	addr = xengnttab_map_domain_grant_refs(xp->gnttab, count, domid, (uint32_t *)refs,
					       PROT_READ | (writable ? PROT_WRITE : 0));
	saved = errno;
	if (status)
		for (unsigned int i = 0; i < count; i++)
			status[i] = addr ? GNTST_okay : GNTST_general_error;
	errno = saved;
	return addr;
}

static int xen_gnt_unmap(struct xbd_platform *p, void *addr, unsigned int count)
{
	return xengnttab_unmap(xp_of(p)->gnttab, addr, count) < 0 ? -errno : 0;
}

static int xen_gnt_copy(struct xbd_platform *p, unsigned int count,
			struct xbd_gnt_copy_seg *segs)
{
	struct xen_platform *xp = xp_of(p);
	xengnttab_grant_copy_segment_t batch[64];

	for (unsigned int i = 0; i < count;) {
		unsigned int n = count - i < 64 ? count - i : 64;

		for (unsigned int k = 0; k < n; k++) {
			struct xbd_gnt_copy_seg *s = &segs[i + k];
			xengnttab_grant_copy_segment_t *c = &batch[k];

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
		if (xengnttab_grant_copy(xp->gnttab, n, batch) < 0)
			return -errno;
		for (unsigned int k = 0; k < n; k++)
			segs[i + k].status = batch[k].status;
		i += n;
	}
	return 0;
}

static void *xen_gnt_share(struct xbd_platform *p, uint32_t domid, unsigned int count,
			   bool writable, uint32_t *refs)
{
	xengntshr_handle *h = gntshr(xp_of(p));

	if (!h)
		return NULL;
	return xengntshr_share_pages(h, domid, (int)count, refs, writable);
}

static int xen_gnt_unshare(struct xbd_platform *p, void *addr, unsigned int count)
{
	xengntshr_handle *h = gntshr(xp_of(p));

	if (!h)
		return -errno;
	return xengntshr_unshare(h, addr, count) < 0 ? -errno : 0;
}

static int xen_domain_state(struct xbd_platform *p, uint32_t domid)
{
	xc_interface *h = xc(xp_of(p));
	xc_domaininfo_t info;
	int n;

	if (!h)
		return -errno;
	/* getinfolist is in every libxenctrl; getinfo_single only from 4.18. */
	n = xc_domain_getinfolist(h, domid, 1, &info);
	if (n < 0)
		return -errno;
	if (n == 0 || info.domain != domid)
		return XBD_DOMAIN_GONE;
	return info.flags & XEN_DOMINF_dying ? XBD_DOMAIN_DYING : XBD_DOMAIN_RUNNING;
}

/* ---- event channels ---- */

static void xen_evtchn_close(struct xbd_evtchn *e)
{
	xenevtchn_close(xe_of(e)->xce);
	free(e);
}

static int port_or_errno(int r)
{
	return r < 0 ? -errno : r;
}

static int xen_alloc_unbound(struct xbd_evtchn *e, uint32_t remote_domid)
{
	return port_or_errno(xenevtchn_bind_unbound_port(xe_of(e)->xce, remote_domid));
}

static int xen_bind_interdomain(struct xbd_evtchn *e, uint32_t remote_domid,
				uint32_t remote_port)
{
	return port_or_errno(xenevtchn_bind_interdomain(xe_of(e)->xce, remote_domid,
							remote_port));
}

static int xen_unbind(struct xbd_evtchn *e, uint32_t port)
{
	return xenevtchn_unbind(xe_of(e)->xce, port) < 0 ? -errno : 0;
}

static int xen_notify(struct xbd_evtchn *e, uint32_t port)
{
	return xenevtchn_notify(xe_of(e)->xce, port) < 0 ? -errno : 0;
}

static int xen_pending(struct xbd_evtchn *e)
{
	int r = xenevtchn_pending(xe_of(e)->xce);

	if (r >= 0)
		return r;
	return errno == EWOULDBLOCK ? -EAGAIN : -errno;
}

static int xen_unmask(struct xbd_evtchn *e, uint32_t port)
{
	return xenevtchn_unmask(xe_of(e)->xce, port) < 0 ? -errno : 0;
}

static const struct xbd_evtchn_ops xen_evtchn_ops = {
	.close = xen_evtchn_close,
	.alloc_unbound = xen_alloc_unbound,
	.bind_interdomain = xen_bind_interdomain,
	.unbind = xen_unbind,
	.notify = xen_notify,
	.pending = xen_pending,
	.unmask = xen_unmask,
};

/*
 * An event channel on an open libxenevtchn handle, which it then owns
 * (closed on failure too): ours, or one made with xenevtchn_fdopen on a
 * handed-over fd (platform/xen-fd.c).
 */
int xbd_xen_evtchn_wrap(xenevtchn_handle *xce, struct xbd_evtchn **out)
{
	struct xen_evtchn *e = calloc(1, sizeof(*e));
	int fl, r;

	if (!e) {
		xenevtchn_close(xce);
		return -ENOMEM;
	}
	e->xce = xce;
	e->base.ops = &xen_evtchn_ops;
	e->base.fd = xenevtchn_fd(xce);
	/* pending() must say -EAGAIN, not block, when nothing is pending. */
	fl = fcntl(e->base.fd, F_GETFL);
	if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(e->base.fd, F_SETFL, fl | O_NONBLOCK) < 0)) {
		r = -errno;
		xenevtchn_close(xce);
		free(e);
		return r;
	}
	*out = &e->base;
	return 0;
}

static int xen_evtchn_open(struct xbd_platform *p, struct xbd_evtchn **out)
{
	xenevtchn_handle *xce = xenevtchn_open(NULL, 0);

	return xce ? xbd_xen_evtchn_wrap(xce, out) : -errno;
}

static const struct xbd_platform_ops xen_ops = {
	.name = "xen",
	.close = xen_close,
	.gnt_map = xen_gnt_map,
	.gnt_unmap = xen_gnt_unmap,
	.gnt_copy = xen_gnt_copy,
	.gnt_share = xen_gnt_share,
	.gnt_unshare = xen_gnt_unshare,
	.evtchn_open = xen_evtchn_open,
	.domain_state = xen_domain_state,
};

int xbd_platform_xen_open(struct xbd_platform **out)
{
	struct xen_platform *xp;
	int r;

	/* Without the hypervisor's device the libraries only log noise. */
	if (access("/dev/xen", F_OK) < 0)
		return -ENODEV;
	xp = calloc(1, sizeof(*xp));
	if (!xp)
		return -ENOMEM;
	pthread_mutex_init(&xp->lock, NULL);
	xp->gnttab = xengnttab_open(NULL, 0);
	if (!xp->gnttab) {
		r = -errno;
		pthread_mutex_destroy(&xp->lock);
		free(xp);
		return r;
	}
	xp->base.ops = &xen_ops;
	xp->base.domid = 0;
	*out = &xp->base;
	return 0;
}
