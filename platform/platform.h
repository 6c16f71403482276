/*
 * platform.h: everything that is a hypercall on real Xen, behind one small
 * interface with two implementations: real Xen (libxengnttab,
 * libxenevtchn, libxenctrl) and the simulator (sim/).  xbd-back, xbd-front
 * and the tests call only this.
 *
 * All functions return a negative errno value on failure unless said
 * otherwise; pointer-returning ones return NULL and set errno.
 * A platform handle may be used from several threads at once for grant
 * operations; an event channel handle belongs to one thread.
 */
#ifndef XBD_PLATFORM_H
#define XBD_PLATFORM_H

#include <stdbool.h>
#include <stdint.h>

/* GNTST_* status codes, as Xen reports them per grant reference. */
#include <xen/xen.h>
#include <xen/grant_table.h>

enum xbd_platform_kind {
	XBD_PLATFORM_AUTO = 0, /* XBD_SIM_DIR set: sim; else /dev/xen present: xen */
	XBD_PLATFORM_XEN,
	XBD_PLATFORM_SIM,
};

struct xbd_platform;

/*
 * Open the platform.  The simulator acts as the domain named by
 * XBD_SIM_DOMID (default 0) of the simulated host in XBD_SIM_DIR (both
 * printed by `xbd-sim env DIR DOMID`).  -ENODEV when AUTO finds neither.
 */
int xbd_platform_open(enum xbd_platform_kind kind, struct xbd_platform **out);
/*
 * Open the simulator acting as domain domid of the simulated host in dir,
 * whatever the environment says (tests, tools that act for several
 * domains).  -ENOENT if dir holds no simulated host, -ESRCH if domid does
 * not run there.
 */
int xbd_platform_open_sim(const char *dir, uint32_t domid, struct xbd_platform **out);
void xbd_platform_close(struct xbd_platform *p);
/* "xen" or "sim". */
const char *xbd_platform_name(const struct xbd_platform *p);
/* Parses "auto", "xen", "sim"; -EINVAL otherwise. */
int xbd_platform_kind_from_string(const char *s, enum xbd_platform_kind *out);
/* The domain this process acts as (sim: XBD_SIM_DOMID; xen: 0 unless known). */
uint32_t xbd_platform_domid(const struct xbd_platform *p);

/* ---- grant mapping and copying (the side that uses a domain's grants) ---- */

/*
 * Map count grant references of domain domid into one contiguous region
 * (count pages), read-only or read-write, in one call.  Returns the
 * address or NULL with errno set.  If status is not NULL it receives one
 * GNTST_* code per reference (GNTST_okay for all on success; on failure at
 * least the offending entries carry their code).  Nothing stays mapped
 * on failure.
 * Codes are Xen's: GNTST_bad_domain (domain gone or dying), GNTST_bad_gntref
 * (reference beyond the table), GNTST_general_error (entry not granting
 * access, granted to another domain, or read-only for a write),
 * GNTST_bad_page (frame beyond the domain's memory).  errno is EINVAL when
 * an entry failed.  Real Xen's libxengnttab reports no per-reference code:
 * there every entry reads GNTST_general_error on failure.
 */
void *xbd_gnt_map(struct xbd_platform *p, uint32_t domid, unsigned int count,
		  const uint32_t *refs, bool writable, int16_t *status);

/* Unmap a region returned by xbd_gnt_map (count pages). */
int xbd_gnt_unmap(struct xbd_platform *p, void *addr, unsigned int count);

/* One segment of a grant copy, between a local buffer and a granted page. */
struct xbd_gnt_copy_seg {
	void *local;       /* local buffer */
	uint32_t domid;    /* the granting domain */
	uint32_t ref;      /* its grant reference */
	uint16_t offset;   /* offset within the granted page */
	uint16_t len;      /* bytes; offset + len <= 4096 */
	bool to_guest;     /* true: local -> granted page; false: granted page -> local */
	int16_t status;    /* out: GNTST_* */
};

/*
 * Copy a batch of segments with one call.  Returns 0 when the call was
 * made (each segment then has its own status) or a negative errno when
 * nothing could be attempted.
 */
int xbd_gnt_copy(struct xbd_platform *p, unsigned int count, struct xbd_gnt_copy_seg *segs);

/* ---- granting (the side that owns the pages) ---- */

/*
 * Allocate count zeroed pages of this domain's memory, contiguous in our
 * address space, and grant domain domid access to them (read-only unless
 * writable).  refs[] receives one reference per page.  NULL with errno on
 * failure.
 */
void *xbd_gnt_share(struct xbd_platform *p, uint32_t domid, unsigned int count,
		    bool writable, uint32_t *refs);

/*
 * End the grants of a region from xbd_gnt_share and free its pages.
 * -EBUSY (and nothing is freed) while the other side still has any of
 * them mapped.  (On real Xen, Linux's gntalloc defers ending a grant that
 * is still mapped instead, so there this returns 0.)
 */
int xbd_gnt_unshare(struct xbd_platform *p, void *addr, unsigned int count);

/* ---- event channels ---- */

struct xbd_evtchn;

/* One handle = one file descriptor, readable when a bound port is pending. */
int xbd_evtchn_open(struct xbd_platform *p, struct xbd_evtchn **out);
/*
 * A handle from an event channel device another process opened and
 * handed over (real Xen: an fd of xbd_xen_evtchn_open_for); takes fd,
 * closing it on failure.  -EOPNOTSUPP on the simulator, whose handles are
 * files each process makes for itself.
 */
int xbd_evtchn_adopt(struct xbd_platform *p, int fd, struct xbd_evtchn **out);
void xbd_evtchn_close(struct xbd_evtchn *e);
int xbd_evtchn_fd(const struct xbd_evtchn *e);

/* Allocate a port that remote_domid may bind to.  Returns the local port. */
int xbd_evtchn_alloc_unbound(struct xbd_evtchn *e, uint32_t remote_domid);
/*
 * Bind to remote_domid's unbound port.  Returns the local port; -ESRCH if
 * that domain does not exist or is dying, -EINVAL if remote_port is not a
 * port it allocated unbound for us.
 */
int xbd_evtchn_bind_interdomain(struct xbd_evtchn *e, uint32_t remote_domid,
				uint32_t remote_port);
/*
 * Before another process binds remote_domid's remote_port (taking a live
 * ring over): release our domain's end of it if the process that bound it
 * is dead.  Real Xen: nothing to do (Linux closes a dead process's ports);
 * the simulator, whose handles have no release hook, checks the owner
 * here, where a dead but unreaped process can be told from a live one.
 */
int xbd_evtchn_reclaim(struct xbd_platform *p, uint32_t remote_domid, uint32_t remote_port);
int xbd_evtchn_unbind(struct xbd_evtchn *e, uint32_t port);
/* Notify the other end of a bound port: about one syscall. */
int xbd_evtchn_notify(struct xbd_evtchn *e, uint32_t port);
/*
 * Next pending port of this handle, or -EAGAIN when none.  A pending
 * port stays masked until xbd_evtchn_unmask(); notifications meanwhile
 * coalesce, none is lost.
 * As in Xen and Linux's evtchn driver: the port returned has had its
 * pending bit cleared and is masked; notifications while it is masked set
 * pending again, and unmask delivers it again if they did.  The fd is
 * readable (level) while a port may be pending; a spurious -EAGAIN after a
 * wake-up is possible.  bind_interdomain leaves the new local port pending
 * (Xen does so in case the peer notified before the bind).  notify on a
 * port whose peer has unbound or died, or not yet bound, is dropped and
 * returns 0 (Xen's ECS_UNBOUND); notify, unbind or unmask on a port this
 * handle does not hold returns -ENOTCONN (Linux evtchn).
 */
int xbd_evtchn_pending(struct xbd_evtchn *e);
int xbd_evtchn_unmask(struct xbd_evtchn *e, uint32_t port);

/* ---- real Xen: devices opened by one process, used by another ---- */

/*
 * The Xen platform of a process that opens no device itself (xbd-back's
 * workers): grant maps, unmaps and copies through the ioctls of the
 * /dev/xen/gntdev fd it was handed (taken), acting as domain domid;
 * event channels only through xbd_evtchn_adopt; no granting, no domain
 * states (-EOPNOTSUPP).
 */
int xbd_platform_xen_from_fd(int gntdev_fd, uint32_t domid, struct xbd_platform **out);
/*
 * Open /dev/xen/gntdev for such a process and limit it to max_grants
 * mapped at once; *limited says whether the kernel could (Linux dropped
 * IOCTL_GNTDEV_SET_MAX_GRANTS for a module-wide limit).  An fd or -errno.
 */
int xbd_xen_gntdev_open(unsigned int max_grants, bool *limited);
/*
 * Open /dev/xen/evtchn (non-blocking) for binding to domid's ports only
 * (IOCTL_EVTCHN_RESTRICT_DOMID, Linux 4.8 and later; never for domain 0);
 * *restricted says whether it is.  An fd or -errno.
 */
int xbd_xen_evtchn_open_for(uint32_t domid, bool *restricted);

/* ---- domains ---- */

enum xbd_domain_state {
	XBD_DOMAIN_RUNNING = 0,
	XBD_DOMAIN_DYING,   /* being destroyed: tear down, map nothing new */
	XBD_DOMAIN_GONE,    /* does not exist */
};

/* Whether domain domid exists and whether it is dying; negative errno on error. */
int xbd_domain_state(struct xbd_platform *p, uint32_t domid);

#endif /* XBD_PLATFORM_H */
