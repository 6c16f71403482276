/*
 * iolimits.c: the I/O limits as a disk's settings give them (iolimits.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "blkback/settings/iolimits.h"
#include "blkback/settings/options.h"

static const char *const limit_names[XBD_IOLIMIT_KINDS] = {
	"iops-total", "iops-read", "iops-write", "bps-total", "bps-read", "bps-write",
};

const char *xbd_iolimit_name(unsigned int kind)
{
	return kind < XBD_IOLIMIT_KINDS ? limit_names[kind] : "?";
}

void xbd_iolimits_from_opts(const struct xbd_disk_opts *o, struct xbd_iolimits *c)
{
	unsigned int k;

	memset(c, 0, sizeof(*c));
	for (k = 0; k < XBD_IOLIMIT_KINDS; k++) {
		c->l[k].avg = __atomic_load_n(&o->limit[k], __ATOMIC_RELAXED);
		c->l[k].max = __atomic_load_n(&o->limit_max[k], __ATOMIC_RELAXED);
		c->l[k].max_length = __atomic_load_n(&o->limit_max_length[k], __ATOMIC_RELAXED);
		/*
		 * A burst without its limit, or below it (two [disk] sections
		 * that each set one half: xbd_iolimits_check says so at open) is
		 * no burst.
		 */
		if (c->l[k].max < c->l[k].avg || !c->l[k].avg)
			c->l[k].max = 0;
		if (!c->l[k].max)
			c->l[k].max_length = 0;
	}
	c->iops_size = __atomic_load_n(&o->iops_size, __ATOMIC_RELAXED);
}

bool xbd_iolimits_any(const struct xbd_iolimits *c)
{
	for (unsigned int k = 0; k < XBD_IOLIMIT_KINDS; k++)
		if (c->l[k].avg)
			return true;
	return false;
}

int xbd_iolimits_check(const struct xbd_disk_opts *o, char *err, size_t errlen)
{
	for (unsigned int k = 0; k < XBD_IOLIMIT_KINDS; k++) {
		const char *n = limit_names[k];

		if (o->limit_max[k] && !o->limit[k]) {
			snprintf(err, errlen, "%s-max = %" PRIu64 " needs %s (the rate the burst "
				 "falls back to)", n, o->limit_max[k], n);
			return -EINVAL;
		}
		if (o->limit_max[k] && o->limit_max[k] < o->limit[k]) {
			snprintf(err, errlen, "%s-max = %" PRIu64 " is below %s = %" PRIu64
				 ": a burst rate is at least the limit", n, o->limit_max[k], n,
				 o->limit[k]);
			return -EINVAL;
		}
	}
	return 0;
}
