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
#include <unistd.h>

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

static struct xbd_dev *dev_find(struct xbd_back *bk, const char *type, uint32_t domid,
				uint32_t devid)
{
	struct xbd_dev *dev;

	for (dev = bk->devs; dev; dev = dev->next)
		if (dev->disk.type == type && dev->disk.domid == domid && dev->disk.devid == devid)
			return dev;
	return NULL;
}

/*
 * Kernel xen-blkback, once loaded, takes every device under backend/vbd
 * (from Xen 4.19 libxl puts ours under backend/vbd3, where it does not
 * look).  Serving one of those too would put two backends on one ring: the
 * second fails to bind the event channel and closes the device under the
 * guest.  So while the module is loaded, new vbd devices are left to it.
 */
static bool left_to_kernel_blkback(struct xbd_back *bk, unsigned int ti)
{
	if (strcmp(bk->opts.types[ti], "vbd") || strcmp(xbd_platform_name(bk->host.plat), "xen") ||
	    access("/sys/module/xen_blkback", F_OK))
		return false;
	if (!bk->vbd_left_noted)
		xbd_log(XBD_LOG_INFO, "xen-blkback is loaded: new devices under backend/vbd "
			"are left to it (use backendtype=tap, backend/vbd3, for xbd-back's)");
	bk->vbd_left_noted = true;
	return true;
}

struct xbd_dev *xbd_back_device(struct xbd_back *bk, unsigned int ti, uint32_t domid,
				uint32_t devid)
{
	struct xbd_dev *dev = dev_find(bk, bk->opts.types[ti], domid, devid);

	if (dev)
		return dev;
	if (left_to_kernel_blkback(bk, ti))
		return NULL;
	/* Only the toolstack writes here: a device it named is worth a look. */
	return xbd_dev_new(bk, ti, domid, devid);
}

void xbd_back_scan(struct xbd_back *bk, unsigned int ti)
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
