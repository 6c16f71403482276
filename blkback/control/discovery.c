/*
 * discovery.c: finding the devices xbd-back serves.  One watch per backend
 * type on /local/domain/<us>/backend/<type> (the toolstack's directories)
 * and one on @releaseDomain.  A watch callback does no xenstore round
 * trip: it maps the path that changed to a device and marks the device
 * for the next pass of the main loop (lifecycle.c), so that however many
 * events arrive, each device's work is done once per pass.
 *
 * What we write ourselves (the feature keys, sectors, ...) fires the same
 * watch: an event for a key the control plane does not act on is
 * dropped here, before it costs anything.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/control/device.h"

/*
 * The keys of a backend directory whose change the control plane acts on
 * (lifecycle.c, dev_backend_changed): written by the toolstack.  The device
 * directory itself (created, removed) is acted on too.
 */
static const char *const acted_on[] = {
	"state", "online", "params", "mode", "frontend", "frontend-id",
	"device-type", "discard-enable", "removable",
};

static bool key_acted_on(const char *k, size_t len)
{
	size_t i;

	if (!len)
		return true;
	for (i = 0; i < sizeof(acted_on) / sizeof(acted_on[0]); i++)
		if (strlen(acted_on[i]) == len && !memcmp(acted_on[i], k, len))
			return true;
	return false;
}

/* A decimal id below limit, nothing else. */
static bool parse_id(const char *s, size_t len, uint64_t limit, uint32_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (!len || len > 10)
		return false;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	if (v >= limit)
		return false;
	*out = v;
	return true;
}

/* Look at every device of type index ti (start-up, or a subtree changed). */
static void scan(struct xbd_back *bk, unsigned int ti)
{
	char **doms = NULL, **devs = NULL, p[XBD_XS_PATH_MAX];
	unsigned int nd = 0, nv = 0, i, j;
	struct xbd_dev *dev, *next;
	uint32_t domid, devid;

	bk->scan_pending[ti] = false;
	if (!xbd_xs_directory(bk->xs, XBT_NULL, bk->base[ti], &doms, &nd)) {
		for (i = 0; i < nd; i++) {
			if (!parse_id(doms[i], strlen(doms[i]), DOMID_FIRST_RESERVED, &domid))
				continue;
			if (xbd_xs_pathf(p, sizeof(p), "%s/%u", bk->base[ti], domid))
				continue;
			devs = NULL;
			nv = 0;
			if (xbd_xs_directory(bk->xs, XBT_NULL, p, &devs, &nv))
				continue;
			for (j = 0; j < nv; j++) {
				if (!parse_id(devs[j], strlen(devs[j]), UINT32_MAX, &devid))
					continue;
				dev = xbd_back_device(bk, ti, domid, devid);
				if (dev)
					xbd_dev_mark(dev, XBD_DEV_PEND_BACKEND);
			}
			free(devs);
		}
		free(doms);
	}
	/* Devices whose directory went away with a whole subtree. */
	for (dev = bk->devs; dev; dev = next) {
		next = dev->next;
		if (dev->disk.type == bk->opts.types[ti] && !xbd_xs_exists(bk->xs, XBT_NULL, dev->bpath))
			xbd_dev_destroy(dev);
	}
}

void xbd_back_scan_pending(struct xbd_back *bk)
{
	unsigned int ti;

	for (ti = 0; ti < bk->opts.nr_types; ti++)
		if (bk->scan_pending[ti])
			scan(bk, ti);
}

/* An event below backend/<type>: which device, and does it matter. */
static void base_changed(struct xbd_xs *xs, const char *path, void *arg)
{
	struct xbd_base_watch *w = arg;
	struct xbd_back *bk = w->bk;
	const char *base = bk->base[w->idx], *rest, *slash, *k;
	size_t blen = strlen(base);
	uint32_t domid, devid;
	struct xbd_dev *dev;

	if (strncmp(path, base, blen) || (path[blen] && path[blen] != '/'))
		return; /* not below our directory (xenstored fires the watch on set-up too) */
	rest = path + blen;
	if (*rest == '/')
		rest++;
	slash = strchr(rest, '/');
	if (!*rest || !slash || !parse_id(rest, slash - rest, DOMID_FIRST_RESERVED, &domid)) {
		/* The whole directory or a domain's: look at everything once. */
		bk->scan_pending[w->idx] = true;
		return;
	}
	rest = slash + 1;
	slash = strchr(rest, '/');
	if (!parse_id(rest, slash ? (size_t)(slash - rest) : strlen(rest), UINT32_MAX, &devid)) {
		bk->scan_pending[w->idx] = true;
		return;
	}
	k = slash ? slash + 1 : "";
	slash = strchr(k, '/');
	if (!key_acted_on(k, slash ? (size_t)(slash - k) : strlen(k)))
		return;
	dev = xbd_back_device(bk, w->idx, domid, devid);
	if (dev)
		xbd_dev_mark(dev, XBD_DEV_PEND_BACKEND);
}

/* @releaseDomain says some domain went; which one is found out in the pass. */
static void release_domain(struct xbd_xs *xs, const char *path, void *arg)
{
	struct xbd_back *bk = arg;

	bk->release_pending = true;
}

void xbd_back_release_domains(struct xbd_back *bk)
{
	struct xbd_dev *dev;

	bk->release_pending = false;
	for (dev = bk->devs; dev; dev = dev->next) {
		int st;

		if (dev->life != XBD_DEV_LIVE && dev->life != XBD_DEV_CONNECTED)
			continue;
		st = xbd_domain_state(bk->host.plat, dev->disk.domid);
		if (st == XBD_DOMAIN_DYING || st == XBD_DOMAIN_GONE) {
			char why[48];

			snprintf(why, sizeof(why), "domain %u is %s", dev->disk.domid,
				 st == XBD_DOMAIN_DYING ? "dying" : "gone");
			xbd_dev_kill(dev, why);
		}
	}
}

int xbd_back_watch_start(struct xbd_back *bk)
{
	unsigned int i;
	int err;

	for (i = 0; i < bk->opts.nr_types; i++) {
		err = xbd_xs_pathf(bk->base[i], sizeof(bk->base[i]), "/local/domain/%u/backend/%s",
				   bk->domid, bk->opts.types[i]);
		if (err)
			return err;
		bk->bw[i].bk = bk;
		bk->bw[i].idx = i;
		err = xbd_xs_watch(bk->xs, bk->base[i], base_changed, &bk->bw[i], &bk->watches[i]);
		if (err) {
			xbd_log(XBD_LOG_ERR, "cannot watch %s: %s", bk->base[i], strerror(-err));
			return err;
		}
		/* Whatever is there already (a restart): the first pass looks. */
		bk->scan_pending[i] = true;
	}
	err = xbd_xs_watch(bk->xs, "@releaseDomain", release_domain, bk,
			   &bk->watches[bk->opts.nr_types]);
	if (err)
		xbd_log(XBD_LOG_ERR, "cannot watch @releaseDomain: %s", strerror(-err));
	return err;
}
