/*
 * iolimits.h: the per-disk I/O limits as the settings give them (the
 * iops-* and bps-* settings, xbd-back.conf(5) I/O LIMITS): their kinds and
 * names, a disk's limits read from its settings, and the check that a
 * burst goes with its limit.  The limiter that enforces them is the data
 * path's (datapath/throttle.h).  ("Limits" alone, struct xbd_limits in
 * ring/ring.h, are what a request may ask of a disk.)
 */
#ifndef XBD_BACK_IOLIMITS_H
#define XBD_BACK_IOLIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct xbd_disk_opts;

/* The limits, in the order of their settings: iops then bps; total, read, write. */
enum xbd_iolimit_kind {
	XBD_IOLIMIT_IOPS_TOTAL, XBD_IOLIMIT_IOPS_READ, XBD_IOLIMIT_IOPS_WRITE,
	XBD_IOLIMIT_BPS_TOTAL, XBD_IOLIMIT_BPS_READ, XBD_IOLIMIT_BPS_WRITE,
	XBD_IOLIMIT_KINDS
};

/* One limit as the settings give it: rate per second, burst rate, burst length (s). */
struct xbd_iolimit {
	uint64_t avg, max;
	unsigned int max_length;
};

/* A disk's limits (0: none of that kind). */
struct xbd_iolimits {
	struct xbd_iolimit l[XBD_IOLIMIT_KINDS];
	uint64_t iops_size;      /* bytes one operation stands for; 0: a request is one */
};

/* "iops-total", ... (the settings' names). */
const char *xbd_iolimit_name(unsigned int kind);
/* The limits a disk's settings give. */
void xbd_iolimits_from_opts(const struct xbd_disk_opts *o, struct xbd_iolimits *c);
/* Whether any limit is set. */
bool xbd_iolimits_any(const struct xbd_iolimits *c);
/*
 * A burst without its limit, or below it: -EINVAL and one line in err
 * naming both settings.  (xbd_iolimits_from_opts drops such a burst.)
 */
int xbd_iolimits_check(const struct xbd_disk_opts *o, char *err, size_t errlen);

#endif /* XBD_BACK_IOLIMITS_H */
