/*
 * platform/impl.h: what an implementation of platform.h provides (real Xen
 * in platform/xen.c, the simulator in platform/sim.c).  platform.c checks
 * arguments common to both and dispatches through these tables.
 */
#ifndef XBD_PLATFORM_IMPL_H
#define XBD_PLATFORM_IMPL_H

#include "platform/platform.h"

struct xbd_platform_ops {
	const char *name;
	void (*close)(struct xbd_platform *p);
	void *(*gnt_map)(struct xbd_platform *p, uint32_t domid, unsigned int count,
			 const uint32_t *refs, bool writable, int16_t *status);
	int (*gnt_unmap)(struct xbd_platform *p, void *addr, unsigned int count);
	int (*gnt_copy)(struct xbd_platform *p, unsigned int count,
			struct xbd_gnt_copy_seg *segs);
	void *(*gnt_share)(struct xbd_platform *p, uint32_t domid, unsigned int count,
			   bool writable, uint32_t *refs);
	int (*gnt_unshare)(struct xbd_platform *p, void *addr, unsigned int count);
	int (*evtchn_open)(struct xbd_platform *p, struct xbd_evtchn **out);
	/* Optional (NULL: -EOPNOTSUPP). */
	int (*evtchn_adopt)(struct xbd_platform *p, int fd, struct xbd_evtchn **out);
	int (*domain_state)(struct xbd_platform *p, uint32_t domid);
	/* Optional (NULL: nothing to do, 0). */
	int (*evtchn_reclaim)(struct xbd_platform *p, uint32_t remote_domid,
			      uint32_t remote_port);
};

struct xbd_evtchn_ops {
	void (*close)(struct xbd_evtchn *e);
	int (*alloc_unbound)(struct xbd_evtchn *e, uint32_t remote_domid);
	int (*bind_interdomain)(struct xbd_evtchn *e, uint32_t remote_domid,
				uint32_t remote_port);
	int (*unbind)(struct xbd_evtchn *e, uint32_t port);
	int (*notify)(struct xbd_evtchn *e, uint32_t port);
	int (*pending)(struct xbd_evtchn *e);
	int (*unmask)(struct xbd_evtchn *e, uint32_t port);
};

/* Embedded first in each implementation's own struct. */
struct xbd_platform {
	const struct xbd_platform_ops *ops;
	uint32_t domid;
};

struct xbd_evtchn {
	const struct xbd_evtchn_ops *ops;
	int fd;
};

/* Upper bound of one map, share or copy call (the size of a grant table). */
#define XBD_PLATFORM_MAX_BATCH 32768u

int xbd_platform_xen_open(struct xbd_platform **out);
/* platform/xen.c's event channel on an open libxenevtchn handle, which it takes. */
struct xenevtchn_handle;
int xbd_xen_evtchn_wrap(struct xenevtchn_handle *xce, struct xbd_evtchn **out);
int xbd_platform_sim_open(const char *dir, uint32_t domid, struct xbd_platform **out);

#endif /* XBD_PLATFORM_IMPL_H */
