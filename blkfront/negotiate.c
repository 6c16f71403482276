/*
 * negotiate.c: the xenstore side of libxbdfront.  Finds the vbd the
 * toolstack wrote, sets up rings and event channels for what the backend
 * offers (multi-page rings, queues), writes them as Linux blkfront does,
 * reads the disk and its features once the backend is Connected, and
 * follows the backend's state afterwards: Closing/Closed or a restart
 * (back to InitWait) tears the rings down and negotiates again, with the
 * requests that were in flight resubmitted.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blkfront/front-internal.h"
#include "common/clock.h"

#define BIT(s) (1u << (s))

/*
 * Who holds a frontend directory: written beside `state` when we offer a
 * ring, as "<pid> <start time>" (the start time, from /proc/<pid>/stat,
 * tells a live owner from a recycled pid), removed on close.
 */
#define OWNER_KEY "xbd-front-owner"

static int be_path(const struct xbd_front *f, char *buf, size_t len, const char *key)
{
	return xbd_xs_pathf(buf, len, "%s/%s", f->info.backend_path, key);
}

static int fe_path(const struct xbd_front *f, char *buf, size_t len, const char *key)
{
	return xbd_xs_pathf(buf, len, "%s/%s", f->info.frontend_path, key);
}

/* A backend key as an unsigned number, def when absent or malformed. */
static uint64_t be_uint(struct xbd_front *f, const char *key, uint64_t def)
{
	char p[XBD_XS_PATH_MAX];
	uint64_t v;

	if (be_path(f, p, sizeof(p), key) < 0)
		return def;
	if (xbd_xs_read_uint(f->xs, XBT_NULL, p, 0, UINT64_MAX, &v) < 0)
		return def;
	return v;
}

static int switch_state(struct xbd_front *f, enum xenbus_state st)
{
	int rc = xbd_xenbus_switch_state(f->xs, f->info.frontend_path, st);

	if (rc == 0)
		f->fstate = st;
	return rc;
}

/* "xvdb" -> 51728 (202 << 8 | 1 << 4), "xvdaa" -> extended form, "51728" -> 51728. */
static int parse_vdev(const char *vdev, uint32_t *out)
{
	char *end;
	unsigned long v;
	unsigned int idx = 0;
	const char *p;

	if (!vdev || !*vdev)
		return -EINVAL;
	if (vdev[0] >= '0' && vdev[0] <= '9') {
		errno = 0;
		v = strtoul(vdev, &end, 10);
		if (errno || *end || v == 0 || v > UINT32_MAX)
			return -EINVAL;
		*out = (uint32_t)v;
		return 0;
	}
	if (strncmp(vdev, "xvd", 3) != 0)
		return -EINVAL;
	p = vdev + 3;
	if (!*p)
		return -EINVAL;
	for (; *p >= 'a' && *p <= 'z'; p++)
		idx = idx * 26 + (unsigned int)(*p - 'a') + 1;
	if (*p || idx == 0)
		return -EINVAL;
	idx--;
	*out = idx < 16 ? (202u << 8) | (idx << 4) : (1u << 28) | (idx << 8);
	return 0;
}

/* Where our vbd lives: frontend dir, its backend path and backend domain. */
int xbd_front_resolve(struct xbd_front *f)
{
	char p[XBD_XS_PATH_MAX];
	char *be = NULL;
	uint64_t bid;
	int rc;

	if (f->opts.devid)
		f->info.devid = f->opts.devid;
	else if ((rc = parse_vdev(f->opts.vdev, &f->info.devid)) < 0)
		return rc;
	f->info.domid = xbd_platform_domid(f->plat);
	if (f->info.domid == 0 && !strcmp(xbd_platform_name(f->plat), "xen")) {
		uint64_t me;

		/* in a domU: xenstored resolves a relative path in our own home */
		if (xbd_xs_read_uint(f->xs, XBT_NULL, "domid", 0, DOMID_FIRST_RESERVED - 1, &me) == 0)
			f->info.domid = (uint32_t)me;
	}
	rc = xbd_xs_pathf(f->info.frontend_path, sizeof(f->info.frontend_path),
			  "/local/domain/%u/device/vbd/%u", f->info.domid, f->info.devid);
	if (rc < 0)
		return rc;
	if ((rc = fe_path(f, p, sizeof(p), "backend")) < 0)
		return rc;
	rc = xbd_xs_read_str(f->xs, XBT_NULL, p, &be);
	if (rc < 0)
		return rc;
	if (strlen(be) >= sizeof(f->info.backend_path) || be[0] != '/') {
		free(be);
		return -EINVAL;
	}
	strcpy(f->info.backend_path, be);
	free(be);
	if ((rc = fe_path(f, p, sizeof(p), "backend-id")) < 0)
		return rc;
	rc = xbd_xs_read_uint(f->xs, XBT_NULL, p, 0, DOMID_FIRST_RESERVED - 1, &bid);
	if (rc < 0)
		return rc;
	f->info.backend_domid = (uint32_t)bid;
	return 0;
}

static void queue_teardown(struct xbdf_queue *q)
{
	if (q->port >= 0) {
		xbd_evtchn_unbind(q->evt, (uint32_t)q->port);
		q->port = -1;
	}
	if (q->sring) {
		xbdf_unshare_or_defer(q, q->sring, q->nr_ring_pages, false);
		q->sring = NULL;
	}
	q->live = false;
}

static int queue_setup(struct xbd_front *f, struct xbdf_queue *q, unsigned int order)
{
	unsigned int npages = 1u << order, ents, i;
	int rc, port;

	q->sring = xbd_gnt_share(f->plat, f->info.backend_domid, npages, true, q->ring_refs);
	if (!q->sring)
		return errno ? -errno : -ENOMEM;
	q->nr_ring_pages = npages;
	xring_init_shared(q->sring, npages);
	rc = xring_attach(&q->ring, q->sring, npages, f->opts.abi, XRING_FRONT);
	if (rc < 0)
		goto fail;
	ents = q->ring.nr_ents;
	if (ents != q->nr_slots) {
		/* every shadow has been taken off the old ring before this */
		struct xbdf_shadow **slot = calloc(ents, sizeof(*slot));
		unsigned int *ids = calloc(ents, sizeof(*ids));

		if (!slot || !ids) {
			free(slot);
			free(ids);
			rc = -ENOMEM;
			goto fail;
		}
		free(q->slot);
		free(q->free_ids);
		q->slot = slot;
		q->free_ids = ids;
		q->nr_slots = ents;
	}
	q->nr_free = 0;
	for (i = 0; i < ents; i++)
		q->free_ids[q->nr_free++] = ents - 1 - i;
	port = xbd_evtchn_alloc_unbound(q->evt, f->info.backend_domid);
	if (port < 0) {
		rc = port;
		goto fail;
	}
	q->port = port;
	return 0;
fail:
	queue_teardown(q);
	return rc;
}

struct talk_args {
	struct xbd_front *f;
	unsigned int nq, order;
};

static int write_queue_nodes(struct xbd_front *f, xs_transaction_t t, const char *dir,
			     const struct xbdf_queue *q, unsigned int order)
{
	char p[XBD_XS_PATH_MAX];
	unsigned int i;
	int rc;

	if (order == 0) {
		if ((rc = xbd_xs_pathf(p, sizeof(p), "%s/ring-ref", dir)) < 0 ||
		    (rc = xbd_xs_write_uint(f->xs, t, p, q->ring_refs[0])) < 0)
			return rc;
	} else {
		for (i = 0; i < (1u << order); i++)
			if ((rc = xbd_xs_pathf(p, sizeof(p), "%s/ring-ref%u", dir, i)) < 0 ||
			    (rc = xbd_xs_write_uint(f->xs, t, p, q->ring_refs[i])) < 0)
				return rc;
	}
	if ((rc = xbd_xs_pathf(p, sizeof(p), "%s/event-channel", dir)) < 0)
		return rc;
	return xbd_xs_write_uint(f->xs, t, p, (uint64_t)q->port);
}

static int talk_txn(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	struct talk_args *a = arg;
	struct xbd_front *f = a->f;
	char p[XBD_XS_PATH_MAX], dir[XBD_XS_PATH_MAX];
	unsigned int i;
	int rc;

	if (a->order > 0) {
		if ((rc = fe_path(f, p, sizeof(p), "ring-page-order")) < 0 ||
		    (rc = xbd_xs_write_uint(xs, t, p, a->order)) < 0)
			return rc;
	}
	if (a->nq == 1) {
		if ((rc = write_queue_nodes(f, t, f->info.frontend_path, &f->queues[0], a->order)) < 0)
			return rc;
	} else {
		if ((rc = fe_path(f, p, sizeof(p), "multi-queue-num-queues")) < 0 ||
		    (rc = xbd_xs_write_uint(xs, t, p, a->nq)) < 0)
			return rc;
		for (i = 0; i < a->nq; i++) {
			if ((rc = xbd_xs_pathf(dir, sizeof(dir), "%s/queue-%u",
					       f->info.frontend_path, i)) < 0 ||
			    (rc = write_queue_nodes(f, t, dir, &f->queues[i], a->order)) < 0)
				return rc;
		}
	}
	if ((rc = fe_path(f, p, sizeof(p), "protocol")) < 0 ||
	    (rc = xbd_xs_write_str(xs, t, p, xbd_abi_protocol(f->opts.abi))) < 0)
		return rc;
	if ((rc = fe_path(f, p, sizeof(p), "feature-persistent")) < 0 ||
	    (rc = xbd_xs_write_uint(xs, t, p, f->opts.persistent != 0)) < 0)
		return rc;
	if ((rc = fe_path(f, p, sizeof(p), OWNER_KEY)) < 0 ||
	    (rc = xbd_xs_write_str(xs, t, p, f->owner)) < 0)
		return rc;
	if ((rc = fe_path(f, p, sizeof(p), "state")) < 0 ||
	    (rc = xbd_xs_write_uint(xs, t, p, XenbusStateInitialised)) < 0)
		return rc;
	return 0;
}

/* Remove what an earlier negotiation wrote, so a smaller one leaves no stale keys. */
static void clear_front_nodes(struct xbd_front *f)
{
	static const char *const keys[] = {
		"ring-ref", "event-channel", "ring-page-order", "multi-queue-num-queues",
	};
	char p[XBD_XS_PATH_MAX];
	unsigned int i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (fe_path(f, p, sizeof(p), keys[i]) == 0)
			xbd_xs_rm(f->xs, XBT_NULL, p);
	for (i = 0; i < XBD_RING_MAX_PAGES; i++) {
		char k[32];

		snprintf(k, sizeof(k), "ring-ref%u", i);
		if (fe_path(f, p, sizeof(p), k) == 0)
			xbd_xs_rm(f->xs, XBT_NULL, p);
	}
	for (i = 0; i < XBD_FRONT_MAX_QUEUES; i++) {
		char k[32];

		snprintf(k, sizeof(k), "queue-%u", i);
		if (fe_path(f, p, sizeof(p), k) == 0)
			xbd_xs_rm(f->xs, XBT_NULL, p);
	}
}

/* Backend in InitWait: rings and channels for what it offers, then Initialised. */
static int talk(struct xbd_front *f)
{
	struct talk_args a = { .f = f };
	unsigned int i, order, nq, cpus;
	long n;
	int rc;

	f->be_max_order = (unsigned int)be_uint(f, "max-ring-page-order", 0);
	if (f->be_max_order == 0 && be_uint(f, "max-ring-pages", 1) > 1) {
		/* the deprecated spelling: a page count */
		uint64_t pages = be_uint(f, "max-ring-pages", 1);

		while ((2ull << f->be_max_order) <= pages && f->be_max_order < XBD_RING_MAX_ORDER)
			f->be_max_order++;
	}
	order = f->be_max_order > XBD_RING_MAX_ORDER ? XBD_RING_MAX_ORDER : f->be_max_order;
	if (f->opts.ring_order >= 0 && (unsigned int)f->opts.ring_order < order)
		order = (unsigned int)f->opts.ring_order;
	f->be_max_queues = (unsigned int)be_uint(f, "multi-queue-max-queues", 1);
	if (f->be_max_queues == 0)
		f->be_max_queues = 1;
	nq = f->be_max_queues;
	if (f->opts.max_queues) {
		if (nq > f->opts.max_queues)
			nq = f->opts.max_queues;
	} else {
		n = sysconf(_SC_NPROCESSORS_ONLN);
		cpus = n > 0 ? (unsigned int)n : 1;
		if (nq > cpus)
			nq = cpus;
		if (nq > 4)
			nq = 4;
	}
	if (nq > f->nr_queues_alloc)
		nq = f->nr_queues_alloc;

	clear_front_nodes(f);
	for (i = 0; i < nq; i++) {
		struct xbdf_queue *q = &f->queues[i];

		pthread_mutex_lock(&q->lock);
		rc = queue_setup(f, q, order);
		pthread_mutex_unlock(&q->lock);
		if (rc < 0)
			goto fail;
	}
	a.nq = nq;
	a.order = order;
	rc = xbd_xs_transact(f->xs, talk_txn, &a);
	if (rc < 0)
		goto fail;
	f->fstate = XenbusStateInitialised;
	pthread_mutex_lock(&f->lock);
	f->info.nr_queues = nq;
	f->info.ring_order = order;
	f->info.ring_entries = f->queues[0].nr_slots;
	f->info.abi = f->opts.abi;
	pthread_mutex_unlock(&f->lock);
	return 0;
fail:
	for (i = 0; i < nq; i++) {
		pthread_mutex_lock(&f->queues[i].lock);
		queue_teardown(&f->queues[i]);
		pthread_mutex_unlock(&f->queues[i].lock);
	}
	return rc;
}

/* Backend Connected: read the disk, go live, push what waited. */
static int connect(struct xbd_front *f)
{
	struct xbdf_shadow *done[XBD_FRONT_MAX_QUEUES] = { 0 };
	struct xbd_front_info in;
	char p[XBD_XS_PATH_MAX];
	uint64_t v;
	unsigned int i, budget;
	int rc;

	pthread_mutex_lock(&f->lock);
	in = f->info;
	pthread_mutex_unlock(&f->lock);

	/* Linux blkfront refuses to connect without these three. */
	if ((rc = be_path(f, p, sizeof(p), "sectors")) < 0 ||
	    (rc = xbd_xs_read_uint(f->xs, XBT_NULL, p, 0, UINT64_MAX >> XBD_SECTOR_SHIFT, &v)) < 0)
		return rc;
	in.sectors = v;
	in.size = v << XBD_SECTOR_SHIFT;
	in.vdisk_info = (unsigned int)be_uint(f, "info", 0);
	v = be_uint(f, "sector-size", 0);
	if (v != 512 && v != 1024 && v != 2048 && v != 4096)
		return -EINVAL;
	in.sector_size = (unsigned int)v;
	v = be_uint(f, "physical-sector-size", in.sector_size);
	in.physical_sector_size = (v >= in.sector_size && v <= (1u << 20)) ? (unsigned int)v
									 : in.sector_size;
	in.readonly = (in.vdisk_info & VDISK_READONLY) != 0;
	in.cdrom = (in.vdisk_info & VDISK_CDROM) != 0;
	/* Linux: barrier means flush+FUA via barrier; flush-cache wins when both. */
	in.flush = be_uint(f, "feature-flush-cache", 0) != 0;
	in.barrier = !in.flush && be_uint(f, "feature-barrier", 0) != 0;
	in.discard = be_uint(f, "feature-discard", 0) != 0;
	in.discard_secure = in.discard && be_uint(f, "discard-secure", 0) != 0;
	in.discard_granularity = (unsigned int)be_uint(f, "discard-granularity", 0);
	in.discard_alignment = (unsigned int)be_uint(f, "discard-alignment", 0);
	in.persistent = f->opts.persistent != 0 && be_uint(f, "feature-persistent", 0) != 0;
	v = be_uint(f, "feature-max-indirect-segments", 0);
	if (v > XBD_MAX_INDIRECT_SEGS)
		v = XBD_MAX_INDIRECT_SEGS;
	if (f->opts.indirect_segs == 0 || v <= BLKIF_MAX_SEGMENTS_PER_REQUEST)
		v = 0;
	else if (f->opts.indirect_segs < 0 && v > XBD_FRONT_DEFAULT_INDIRECT)
		v = XBD_FRONT_DEFAULT_INDIRECT;
	else if (f->opts.indirect_segs > 0 && v > (uint64_t)f->opts.indirect_segs)
		v = (uint64_t)f->opts.indirect_segs;
	/* the largest request (segments + one indirect page) must fit a queue's grant budget */
	budget = (f->opts.max_grants ? f->opts.max_grants : XBD_FRONT_DEFAULT_GRANTS) /
		 (in.nr_queues ? in.nr_queues : 1);
	if (budget < 2 * BLKIF_MAX_SEGMENTS_PER_REQUEST)
		budget = 2 * BLKIF_MAX_SEGMENTS_PER_REQUEST;
	if (v + 1 > budget)
		v = budget - 1;
	if (v <= BLKIF_MAX_SEGMENTS_PER_REQUEST)
		v = 0;
	in.indirect_segs = (unsigned int)v;
	in.max_segs = in.indirect_segs ? in.indirect_segs : BLKIF_MAX_SEGMENTS_PER_REQUEST;

	/* every queue lock: the data path reads persistent and the limits */
	for (i = 0; i < f->nr_queues_alloc; i++)
		pthread_mutex_lock(&f->queues[i].lock);
	pthread_mutex_lock(&f->lock);
	f->info = in;
	pthread_mutex_unlock(&f->lock);
	rc = switch_state(f, XenbusStateConnected);
	for (i = 0; i < f->nr_queues_alloc; i++)
		f->queues[i].budget = budget;
	for (i = 0; i < in.nr_queues; i++) {
		f->queues[i].live = rc == 0;
		done[i] = xbdf_queue_refit(&f->queues[i]);
		xbdf_queue_kick(&f->queues[i]);
	}
	for (i = f->nr_queues_alloc; i-- > 0;)
		pthread_mutex_unlock(&f->queues[i].lock);
	for (i = 0; i < in.nr_queues; i++)
		if (done[i])
			xbdf_queue_finish(&f->queues[i], done[i]);
	return rc;
}

/*
 * The backend went away from Connected: take every request off the old
 * rings (answered ones complete normally first), end the rings, and put
 * the unanswered ones first in line for the next connection.  Queues
 * beyond the new count hand theirs to queue 0.
 */
void xbd_front_teardown_rings(struct xbd_front *f)
{
	struct xbdf_shadow *head[XBD_FRONT_MAX_QUEUES] = { 0 }, *tail[XBD_FRONT_MAX_QUEUES] = { 0 };
	unsigned int i;

	for (i = 0; i < f->nr_queues_alloc; i++)
		if (f->queues[i].sring)
			xbdf_queue_reap(&f->queues[i]);
	for (i = 0; i < f->nr_queues_alloc; i++) {
		struct xbdf_queue *q = &f->queues[i];

		pthread_mutex_lock(&q->lock);
		q->live = false;
		if (q->sring) {
			xbdf_queue_requeue_inflight(q, &head[i], &tail[i]);
			queue_teardown(q);
		}
		if (head[i]) {
			tail[i]->next = q->wait_head;
			q->wait_head = head[i];
			if (!q->wait_tail)
				q->wait_tail = tail[i];
		}
		pthread_mutex_unlock(&q->lock);
	}
	__atomic_add_fetch(&f->stats.reconnects, 1, __ATOMIC_RELAXED);
}

/* After a new talk with fewer queues: move orphaned waiting requests to queue 0. */
static void regroup_queues(struct xbd_front *f)
{
	struct xbdf_queue *q0 = &f->queues[0];
	unsigned int i;

	for (i = f->info.nr_queues; i < f->nr_queues_alloc; i++) {
		struct xbdf_queue *q = &f->queues[i];

		pthread_mutex_lock(&q0->lock);
		pthread_mutex_lock(&q->lock);
		if (q->wait_head) {
			struct xbdf_shadow *s, **pp = &q->wait_head;

			/*
			 * Their pages are q's grants (its pool, its budget): give
			 * them back here; queue 0 grants its own in their turn.
			 */
			q->wait_tail = NULL;
			while ((s = *pp)) {
				if (xbdf_shadow_drop_pages(q, s) < 0) {
					*pp = s->next;
					s->result = -ENOMEM;
					s->next = q->failed;
					q->failed = s;
					continue;
				}
				if (s->io)
					s->io->queue = 0;
				q->wait_tail = s;
				pp = &s->next;
			}
		}
		if (q->wait_head) {
			if (q0->wait_tail)
				q0->wait_tail->next = q->wait_head;
			else
				q0->wait_head = q->wait_head;
			q0->wait_tail = q->wait_tail;
			q->wait_head = q->wait_tail = NULL;
		}
		pthread_mutex_unlock(&q->lock);
		pthread_mutex_unlock(&q0->lock);
	}
}

static int talk_and_regroup(struct xbd_front *f)
{
	int rc = talk(f);

	if (rc == 0)
		regroup_queues(f);
	return rc;
}

static bool rings_up(const struct xbd_front *f)
{
	return f->queues[0].sring != NULL;
}

/* The backend re-announced Connected: a new size is all that may change meanwhile. */
static void reread(struct xbd_front *f)
{
	uint64_t s = be_uint(f, "sectors", f->info.sectors);

	pthread_mutex_lock(&f->lock);
	f->info.sectors = s;
	f->info.size = s << XBD_SECTOR_SHIFT;
	pthread_mutex_unlock(&f->lock);
}

/* At most this many steps per call: a restart yields two. */
#define FOLLOW_STEPS 3

/*
 * Follow the backend state now in xenstore through the XenbusState
 * machine of xenstore/xenbus.h (Linux blkback_changed plus restart
 * handling), with libxbdfront's guards: a toolstack detaching the disk
 * (online=0) ends the device, reconnecting is done only when the caller
 * allows it, a connect needs our rings up, and we publish rings only to a
 * backend that waits for them (InitWait).  Returns -ENODEV when the device
 * is gone.
 */
int xbd_front_follow_backend(struct xbd_front *f)
{
	enum xenbus_state be;
	unsigned int n;
	int rc = 0;

	if (!xbd_xs_exists(f->xs, XBT_NULL, f->info.backend_path) ||
	    !xbd_xs_exists(f->xs, XBT_NULL, f->info.frontend_path))
		return -ENODEV;
	be = xbd_xenbus_read_state(f->xs, f->info.backend_path);
	if ((be == XenbusStateClosing || be == XenbusStateClosed) && be_uint(f, "online", 1) == 0) {
		/* online=0: the toolstack is detaching the disk, not a backend bounce */
		if (f->fstate != XenbusStateClosed) {
			xbd_front_teardown_rings(f);
			switch_state(f, XenbusStateClosed);
		}
		return -ENODEV;
	}
	for (n = 0; n < FOLLOW_STEPS && rc == 0; n++) {
		switch (xbd_xenbus_next_step(XBD_XENBUS_FRONTEND, f->fstate, be)) {
		case XBD_XENBUS_STEP_RESTART:
			if (f->fstate == XenbusStateConnected) {
				/* a restarted backend: start over, keep what was in flight */
				if (!f->opts.reconnect)
					return -ENODEV;
				xbd_front_teardown_rings(f);
				f->fstate = XenbusStateInitialising;
				continue;
			}
			/* both Closed: ask for a new connection (blkback: Closed + Initialising) */
			return switch_state(f, XenbusStateInitialising);
		case XBD_XENBUS_STEP_INITIALISE:
			if (be != XenbusStateInitWait)
				return 0;
			return talk_and_regroup(f);
		case XBD_XENBUS_STEP_CONNECT:
			return rings_up(f) ? connect(f) : 0;
		case XBD_XENBUS_STEP_REREAD:
			reread(f);
			return 0;
		case XBD_XENBUS_STEP_CLOSED:
			if (!f->opts.reconnect)
				return -ENODEV;
			xbd_front_teardown_rings(f);
			rc = switch_state(f, XenbusStateClosed);
			break;
		default:
			return 0;
		}
	}
	return rc;
}

static int wait_backend(struct xbd_front *f, unsigned int mask, enum xenbus_state *st)
{
	return xbd_xenbus_wait_state(f->xs, f->info.backend_path, mask, f->opts.timeout_ms, st);
}

/* "<pid> <start time>" of process pid into buf; -errno when it is not running. */
static int owner_of(pid_t pid, char *buf, size_t len)
{
	char path[64], stat[1024], *p;
	unsigned long long start = 0;
	FILE *fp;
	size_t n;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fp = fopen(path, "r");
	if (!fp) {
		/* no /proc: the pid alone, alive if signal 0 reaches it */
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return -ESRCH;
		snprintf(buf, len, "%d 0", (int)pid);
		return 0;
	}
	n = fread(stat, 1, sizeof(stat) - 1, fp);
	fclose(fp);
	stat[n] = 0;
	/* the command name may hold spaces: fields count from its closing paren */
	p = strrchr(stat, ')');
	/* field 3 is the state: a zombie (killed, not yet reaped) holds nothing */
	if (p && (p[1] == ' ') && (p[2] == 'Z' || p[2] == 'X'))
		return -ESRCH;
	/* field 22 is the start time; p points at field 2's end */
	for (i = 2; p && i < 22; i++)
		p = strchr(p + 1, ' ');
	if (p)
		start = strtoull(p + 1, NULL, 10);
	snprintf(buf, len, "%d %llu", (int)pid, start);
	return 0;
}

static void owner_self(char *buf, size_t len)
{
	if (owner_of(getpid(), buf, len) < 0)
		snprintf(buf, len, "%d 0", (int)getpid());
}

/*
 * The vbd is ours to attach unless another frontend holds it: its state
 * says it offered a ring (Initialised) or is using one (Connected), and
 * its recorded owner is still the same running process, or no owner is
 * recorded at all (a kernel blkfront or another implementation).  A
 * stale owner (the process is gone: a crashed frontend) is taken over;
 * opts.force takes over a live one too.  Racing attaches are not
 * arbitrated: this guards against running a second one by mistake.
 */
static const char *state_name(enum xenbus_state st)
{
	return st == XenbusStateInitialised ? "Initialised" : st == XenbusStateConnected ? "Connected"
										    : "other";
}

static int check_owner(struct xbd_front *f, enum xenbus_state fe)
{
	char p[XBD_XS_PATH_MAX], now[64];
	char *rec = NULL;
	int pid, rc;

	if (fe != XenbusStateInitialised && fe != XenbusStateConnected)
		return 0;
	if ((rc = fe_path(f, p, sizeof(p), OWNER_KEY)) < 0)
		return rc;
	rc = xbd_xs_read_str(f->xs, XBT_NULL, p, &rec);
	if (rc == 0 && sscanf(rec, "%d", &pid) == 1 && pid > 0 &&
	    (owner_of(pid, now, sizeof(now)) < 0 || strcmp(now, rec) != 0)) {
		fprintf(stderr, "xbd-front: vbd %u/%u: taking over from frontend process %d,"
			" which is gone\n", f->info.domid, f->info.devid, pid);
		free(rec);
		return 0;
	}
	if (f->opts.force) {
		fprintf(stderr, "xbd-front: vbd %u/%u: forced: taking over from %s%s\n",
			f->info.domid, f->info.devid, rec ? "frontend process " : "another frontend",
			rec ? rec : "");
		free(rec);
		return 0;
	}
	if (rc == 0 && sscanf(rec, "%d", &pid) == 1)
		fprintf(stderr, "xbd-front: vbd %u/%u is in use by frontend process %d (state %s);"
			" not attaching (force to take over after a crash)\n", f->info.domid,
			f->info.devid, pid, state_name(fe));
	else
		fprintf(stderr, "xbd-front: vbd %u/%u is in use by another frontend (state %s,"
			" no owner recorded); not attaching (force to take over)\n", f->info.domid,
			f->info.devid, state_name(fe));
	free(rec);
	return -EBUSY;
}

/*
 * The first handshake, blocking up to the timeout.  A frontend state left
 * by an earlier process is reset through Closed first, as a backend only
 * offers a new connection from there.
 */
int xbd_front_attach(struct xbd_front *f)
{
	enum xenbus_state be, fe;
	int rc;

	owner_self(f->owner, sizeof(f->owner));
	fe = xbd_xenbus_read_state(f->xs, f->info.frontend_path);
	be = xbd_xenbus_read_state(f->xs, f->info.backend_path);
	if ((rc = check_owner(f, fe)) < 0)
		return rc;
	if (fe == XenbusStateInitialised || fe == XenbusStateConnected || fe == XenbusStateClosing ||
	    (be != XenbusStateInitWait && be != XenbusStateInitialising && be != XenbusStateUnknown &&
	     be != XenbusStateClosed)) {
		if ((rc = switch_state(f, XenbusStateClosed)) < 0)
			return rc;
		rc = wait_backend(f, BIT(XenbusStateClosed) | BIT(XenbusStateInitWait), &be);
		if (rc < 0)
			return rc;
	}
	if (be == XenbusStateClosed) {
		if ((rc = switch_state(f, XenbusStateInitialising)) < 0)
			return rc;
	} else {
		f->fstate = XenbusStateInitialising;
	}
	rc = wait_backend(f, BIT(XenbusStateInitWait), &be);
	if (rc < 0)
		return rc;
	f->fstate = XenbusStateInitialising;
	rc = talk(f);
	if (rc < 0)
		return rc;
	rc = wait_backend(f, BIT(XenbusStateConnected) | BIT(XenbusStateClosing) |
				     BIT(XenbusStateClosed), &be);
	if (rc < 0)
		return rc;
	if (be != XenbusStateConnected)
		return -ECONNREFUSED;
	return connect(f);
}

/* Consume what the backend answered so far (its ring is still ours). */
static void reap_all(struct xbd_front *f)
{
	unsigned int i;

	for (i = 0; i < f->nr_queues_alloc; i++)
		if (f->queues[i].sring)
			xbdf_queue_reap(&f->queues[i]);
}

/*
 * Frontend-initiated reconnect with requests in flight: Closing, Closed
 * (the backend finishes or drops what it had and unmaps), Initialising,
 * a new negotiation, Connected; unanswered requests are resubmitted.
 */
int xbd_front_reconnect(struct xbd_front *f)
{
	enum xenbus_state be;
	unsigned int i;
	int rc;

	if (f->broken)
		return f->broken;
	if (f->fstate != XenbusStateConnected)
		return -ENOTCONN;
	/* nothing new goes to a backend that is closing: it waits for the next connection */
	for (i = 0; i < f->nr_queues_alloc; i++) {
		pthread_mutex_lock(&f->queues[i].lock);
		f->queues[i].live = false;
		pthread_mutex_unlock(&f->queues[i].lock);
	}
	if ((rc = switch_state(f, XenbusStateClosing)) < 0)
		return rc;
	rc = wait_backend(f, BIT(XenbusStateClosing) | BIT(XenbusStateClosed), &be);
	reap_all(f);
	if (rc == 0 && (rc = switch_state(f, XenbusStateClosed)) == 0)
		rc = wait_backend(f, BIT(XenbusStateClosed), &be);
	xbd_front_teardown_rings(f);
	if (rc < 0)
		return rc;
	if ((rc = switch_state(f, XenbusStateInitialising)) < 0)
		return rc;
	if ((rc = wait_backend(f, BIT(XenbusStateInitWait), &be)) < 0)
		return rc;
	if ((rc = talk_and_regroup(f)) < 0)
		return rc;
	rc = wait_backend(f, BIT(XenbusStateConnected) | BIT(XenbusStateClosing) |
				     BIT(XenbusStateClosed), &be);
	if (rc < 0)
		return rc;
	if (be != XenbusStateConnected)
		return -ECONNREFUSED;
	return connect(f);
}

/*
 * Closing -> Closed handshake (Linux blkfront_remove order), within
 * timeout_ms in all.  A backend that is gone (no directory, state Closed
 * or unreadable) is not waited for; one that does not answer Closing in
 * time gets Closed written and is not waited for again.
 */
void xbd_front_detach(struct xbd_front *f, int timeout_ms)
{
	enum xenbus_state be;
	uint64_t end = xbd_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	char p[XBD_XS_PATH_MAX];
	unsigned int i;
	int rc;

	/* nothing to hand back if we never offered a ring */
	if ((f->fstate == XenbusStateInitialised || f->fstate == XenbusStateConnected) &&
	    xbd_xs_exists(f->xs, XBT_NULL, f->info.frontend_path)) {
		be = xbd_xs_exists(f->xs, XBT_NULL, f->info.backend_path)
			? xbd_xenbus_read_state(f->xs, f->info.backend_path) : XenbusStateUnknown;
		rc = -ENOENT;
		if (be != XenbusStateUnknown && be != XenbusStateClosed &&
		    switch_state(f, XenbusStateClosing) == 0 && end > xbd_mono_ms())
			rc = xbd_xenbus_wait_state(f->xs, f->info.backend_path,
						   BIT(XenbusStateClosing) | BIT(XenbusStateClosed),
						   (int)(end - xbd_mono_ms()), &be);
		if (switch_state(f, XenbusStateClosed) == 0 && rc == 0 &&
		    be != XenbusStateClosed && end > xbd_mono_ms())
			xbd_xenbus_wait_state(f->xs, f->info.backend_path, BIT(XenbusStateClosed),
					      (int)(end - xbd_mono_ms()), &be);
	}
	if (fe_path(f, p, sizeof(p), OWNER_KEY) == 0 && f->fstate != XenbusStateUnknown) {
		char *rec = NULL;

		/* only our own record: a forced successor's stays */
		if (xbd_xs_read_str(f->xs, XBT_NULL, p, &rec) == 0 && !strcmp(rec, f->owner))
			xbd_xs_rm(f->xs, XBT_NULL, p);
		free(rec);
	}
	for (i = 0; i < f->nr_queues_alloc; i++) {
		pthread_mutex_lock(&f->queues[i].lock);
		queue_teardown(&f->queues[i]);
		pthread_mutex_unlock(&f->queues[i].lock);
	}
}
