/*
 * platform/platform.c: choosing the platform (real Xen or the simulator)
 * and dispatching the platform.h calls to it, with the argument checks
 * both implementations share.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform/impl.h"
#include "sim/hypervisor.h"

int xbd_platform_kind_from_string(const char *s, enum xbd_platform_kind *out)
{
	static const struct {
		const char *name;
		enum xbd_platform_kind kind;
	} kinds[] = {
		{ "auto", XBD_PLATFORM_AUTO },
		{ "xen", XBD_PLATFORM_XEN },
		{ "sim", XBD_PLATFORM_SIM },
	};

	for (size_t i = 0; s && i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strcmp(s, kinds[i].name) == 0) {
			*out = kinds[i].kind;
			return 0;
		}
	}
	return -EINVAL;
}

static int sim_domid_from_env(uint32_t *domid)
{
	const char *s = getenv("XBD_SIM_DOMID");
	unsigned long v;
	char *end;

	*domid = 0;
	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v > XBD_SIM_MAX_DOMID)
		return -EINVAL;
	*domid = (uint32_t)v;
	return 0;
}

int xbd_platform_open_sim(const char *dir, uint32_t domid, struct xbd_platform **out)
{
	if (!dir || !*dir || !out || domid > XBD_SIM_MAX_DOMID)
		return -EINVAL;
	return xbd_platform_sim_open(dir, domid, out);
}

int xbd_platform_open(enum xbd_platform_kind kind, struct xbd_platform **out)
{
	const char *dir = getenv("XBD_SIM_DIR");
	uint32_t domid;
	int r;

	if (!out)
		return -EINVAL;
	if (kind == XBD_PLATFORM_AUTO) {
		if (dir && *dir)
			kind = XBD_PLATFORM_SIM;
		else if (access("/dev/xen", F_OK) == 0)
			kind = XBD_PLATFORM_XEN;
		else
			return -ENODEV;
	}
	switch (kind) {
	case XBD_PLATFORM_XEN:
		return xbd_platform_xen_open(out);
	case XBD_PLATFORM_SIM:
		if (!dir || !*dir)
			return -ENODEV;
		r = sim_domid_from_env(&domid);
		if (r)
			return r;
		return xbd_platform_sim_open(dir, domid, out);
	default:
		return -EINVAL;
	}
}

void xbd_platform_close(struct xbd_platform *p)
{
	if (p)
		p->ops->close(p);
}

const char *xbd_platform_name(const struct xbd_platform *p)
{
	return p->ops->name;
}

uint32_t xbd_platform_domid(const struct xbd_platform *p)
{
	return p->domid;
}

void *xbd_gnt_map(struct xbd_platform *p, uint32_t domid, unsigned int count,
		  const uint32_t *refs, bool writable, int16_t *status)
{
	if (!count || count > XBD_PLATFORM_MAX_BATCH || !refs) {
		errno = EINVAL;
		return NULL;
	}
	return p->ops->gnt_map(p, domid, count, refs, writable, status);
}

int xbd_gnt_unmap(struct xbd_platform *p, void *addr, unsigned int count)
{
	if (!addr || !count)
		return -EINVAL;
	return p->ops->gnt_unmap(p, addr, count);
}

int xbd_gnt_copy(struct xbd_platform *p, unsigned int count, struct xbd_gnt_copy_seg *segs)
{
	if (!count)
		return 0;
	if (!segs)
		return -EINVAL;
	return p->ops->gnt_copy(p, count, segs);
}

void *xbd_gnt_share(struct xbd_platform *p, uint32_t domid, unsigned int count,
		    bool writable, uint32_t *refs)
{
	if (!count || count > XBD_PLATFORM_MAX_BATCH || !refs || domid >= DOMID_FIRST_RESERVED) {
		errno = EINVAL;
		return NULL;
	}
	return p->ops->gnt_share(p, domid, count, writable, refs);
}

int xbd_gnt_unshare(struct xbd_platform *p, void *addr, unsigned int count)
{
	if (!addr || !count)
		return -EINVAL;
	return p->ops->gnt_unshare(p, addr, count);
}

int xbd_evtchn_open(struct xbd_platform *p, struct xbd_evtchn **out)
{
	if (!out)
		return -EINVAL;
	return p->ops->evtchn_open(p, out);
}

int xbd_evtchn_adopt(struct xbd_platform *p, int fd, struct xbd_evtchn **out)
{
	if (!out || fd < 0)
		return -EINVAL;
	if (!p->ops->evtchn_adopt) {
		close(fd);
		return -EOPNOTSUPP;
	}
	return p->ops->evtchn_adopt(p, fd, out);
}

void xbd_evtchn_close(struct xbd_evtchn *e)
{
	if (e)
		e->ops->close(e);
}

int xbd_evtchn_fd(const struct xbd_evtchn *e)
{
	return e->fd;
}

int xbd_evtchn_alloc_unbound(struct xbd_evtchn *e, uint32_t remote_domid)
{
	return e->ops->alloc_unbound(e, remote_domid);
}

int xbd_evtchn_bind_interdomain(struct xbd_evtchn *e, uint32_t remote_domid,
				uint32_t remote_port)
{
	return e->ops->bind_interdomain(e, remote_domid, remote_port);
}

int xbd_evtchn_reclaim(struct xbd_platform *p, uint32_t remote_domid, uint32_t remote_port)
{
	return p->ops->evtchn_reclaim ? p->ops->evtchn_reclaim(p, remote_domid, remote_port) : 0;
}

int xbd_evtchn_unbind(struct xbd_evtchn *e, uint32_t port)
{
	return e->ops->unbind(e, port);
}

int xbd_evtchn_notify(struct xbd_evtchn *e, uint32_t port)
{
	return e->ops->notify(e, port);
}

int xbd_evtchn_pending(struct xbd_evtchn *e)
{
	return e->ops->pending(e);
}

int xbd_evtchn_unmask(struct xbd_evtchn *e, uint32_t port)
{
	return e->ops->unmask(e, port);
}

int xbd_domain_state(struct xbd_platform *p, uint32_t domid)
{
	return p->ops->domain_state(p, domid);
}
