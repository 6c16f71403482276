/*
 * checkpoint.c: what the operator does with a disk's changed-block
 * tracking (tracking.h): xbdctl's checkpoint, checkpoints, changes, drop
 * and release, set cbt=, and what list and stats show of it.
 *
 * A checkpoint is made atomically in a drained section: hold = 1 in the
 * run page, then wait (on the main loop's timer, never blocking it) until
 * no ring of the disk counts a write (datapath/cbt.c says why that pair
 * of steps is enough); then the old slot's bits are synced, a free slot
 * zeroed, the checkpoint committed and made live, its view (if asked for)
 * made active, and hold = 0.  So every write answered before the
 * checkpoint is in the interval before it, every write submitted after it
 * in the one after, and none is in flight across it: a view made there
 * holds exactly the disk as the guest had been told it was.  Writes wait
 * meanwhile (the guest sees one write's latency more); a disk whose
 * writes do not drain within CBT_DRAIN_MS gets an error and no checkpoint.
 * Dropping the latest checkpoint and releasing a view take the same path.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blkback/control/tracking.h"
#include "blkback/datapath/cbt.h"
#include "common/clock.h"
#include "common/control-protocol.h"

/* How long writes may take to drain before a checkpoint gives up (xbdctl waits 10 s). */
#define CBT_DRAIN_MS 5000

enum track_op_kind { OP_CHECKPOINT, OP_DROP, OP_RELEASE };

/* An operation that needs the disk's writes drained. */
struct track_op {
	enum track_op_kind kind;
	char name[XBD_CBT_NAME_MAX];
	bool view;               /* OP_CHECKPOINT: and its view */
	uint64_t deadline_ms;
	struct xbd_ctl_wait *wait;
};

/* ---- helpers ---- */

static const char *const view_states[] = {
	[XBD_VIEW_NONE] = "none", [XBD_VIEW_ACTIVE] = "active", [XBD_VIEW_FAILING] = "failed",
	[XBD_VIEW_FAILED] = "failed", [XBD_VIEW_ENDED] = "ended",
};

static const char *view_state(const struct xbd_cbt_view *v)
{
	uint32_t s = __atomic_load_n(&v->state, __ATOMIC_ACQUIRE);

	return s <= XBD_VIEW_ENDED ? view_states[s] : "?";
}

/* A checkpoint's name: 1 to 47 of [A-Za-z0-9_.:-], not starting with '-'. */
static bool name_ok(const char *n)
{
	size_t i;

	if (!n[0] || n[0] == '-' || strlen(n) >= XBD_CBT_NAME_MAX)
		return false;
	for (i = 0; n[i]; i++)
		if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
		      (n[i] >= '0' && n[i] <= '9') || strchr("_.:-", n[i])))
			return false;
	return true;
}

static int cp_index(const struct xbd_track *t, const char *name)
{
	for (uint32_t i = 0; i < t->m.ncp; i++)
		if (!strcmp(t->m.cp[i].name, name))
			return (int)i;
	return -1;
}

static void when(char *buf, size_t len, int64_t t)
{
	struct tm tm;
	time_t tt = (time_t)t;

	if (!t || !gmtime_r(&tt, &tm))
		snprintf(buf, len, "-");
	else
		strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The checkpoints by name, for an error line: "a, b, c" or "none". */
static void cp_names(const struct xbd_track *t, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < t->m.ncp && n < len; i++)
		n += snprintf(buf + n, len - n, "%s%s", i ? ", " : "", t->m.cp[i].name);
	if (!t->m.ncp)
		snprintf(buf, len, "none");
}

/* Whether the view belongs to checkpoint name and is open (active or failed). */
static bool view_of(const struct xbd_track *t, const char *name)
{
	uint32_t s;

	if (!t->view)
		return false;
	s = __atomic_load_n(&t->view->state, __ATOMIC_ACQUIRE);
	return (s == XBD_VIEW_ACTIVE || s == XBD_VIEW_FAILED || s == XBD_VIEW_FAILING) &&
	       !strcmp(t->view->checkpoint, name);
}

/* The blocks set in slot, and how many of the disk's blocks there are now. */
static uint64_t count_bits(const struct xbd_track *t, const uint64_t *map)
{
	uint64_t n = 0;

	for (uint64_t w = 0; w < (t->m.nblocks + 63) / 64; w++)
		n += (uint64_t)__builtin_popcountll(__atomic_load_n(&map[w], __ATOMIC_RELAXED));
	return n;
}

/* The one device sel names: 0, -ENODEV, or -EINVAL (several; said in err). */
static int find_dev(struct xbd_back *bk, const char *sel, struct xbd_dev **out, char *err,
		    size_t errlen)
{
	struct xbd_dev *dev, *found = NULL;
	unsigned int n = 0;

	for (dev = bk->devs; dev; dev = dev->next)
		if (ctl_dev_matches(dev, sel)) {
			found = dev;
			n++;
		}
	if (!n)
		return -ENODEV;
	if (n > 1) {
		snprintf(err, errlen, "'%.100s' names %u devices: name one as TYPE/DOMID/DEVID", sel, n);
		return -EINVAL;
	}
	*out = found;
	return 0;
}

/* The device's tracking, or -EINVAL with why there is none (in err). */
static int need_track(struct xbd_dev *dev, struct xbd_track **out, char *err, size_t errlen)
{
	char id[64];

	ctl_dev_id(dev, id, sizeof(id));
	if (!dev->track || !dev->disk.o.cbt) {
		snprintf(err, errlen, "%s has no changed-block tracking (%s)", id,
			 !dev->disk.o.cbt ? "cbt = 0: xbdctl set DEVICE cbt=1, or cbt = 1 in a [disk] "
			 "section" : !dev->disk.store ? "its storage is not open" :
			 dev->readonly ? "it is read-only" : "it did not start: see the log");
		return -EINVAL;
	}
	tracking_poll(dev->track);
	*out = dev->track;
	return 0;
}

/* ---- operations in a drained section ---- */

static bool drained(const struct xbd_track *t)
{
	for (unsigned int i = 0; i < XBD_CBT_MAX_RINGS; i++)
		if (__atomic_load_n(&t->run->ring[i].inflight, __ATOMIC_SEQ_CST))
			return false;
	return true;
}

/* The rings that still have writes out, for the error of a drain that timed out: "ring 0: 3, ...". */
static void undrained_text(const struct xbd_track *t, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned int i = 0; i < XBD_CBT_MAX_RINGS && n < len; i++) {
		uint32_t k = __atomic_load_n(&t->run->ring[i].inflight, __ATOMIC_SEQ_CST);

		if (k) {
			int w = snprintf(buf + n, len - n, "%sring %u: %" PRIu32, n ? ", " : "", i, k);

			if (w < 0)
				break;
			n += (size_t)w;
		}
	}
	if (!buf[0])
		snprintf(buf, len, "none now");
}

/* The operation is over: writes go again, and its request is answered. */
static void op_end(struct xbd_track *t, int err, const char *text)
{
	struct track_op *op = t->op;

	__atomic_store_n(&t->run->hold, 0, __ATOMIC_RELEASE);
	t->op = NULL;
	if (op->wait)
		op->wait->answer(op->wait, err, text);
	free(op);
}

static uint32_t free_slot(const struct xbd_track *t)
{
	for (uint32_t s = 0; s < t->m.nslots; s++) {
		uint32_t i;

		for (i = 0; i < t->m.ncp && t->m.cp[i].slot != s; i++)
			;
		if (i == t->m.ncp)
			return s;
	}
	return XBD_CBT_NONE;
}

/* A new checkpoint (and its view), no write in flight. */
static int do_checkpoint(struct xbd_track *t, struct track_op *op, char *text, size_t len)
{
	struct xbd_cbt_meta *m = &t->m;
	uint32_t slot = free_slot(t);
	struct xbd_cbt_view *v = t->view;
	char id[64];
	int err;

	ctl_dev_id(t->dev, id, sizeof(id));
	if (slot == XBD_CBT_NONE || m->ncp >= m->nslots)
		return -ENOSPC;
	/* What the old slot holds is durable before a checkpoint stands on it. */
	err = tracking_sync(t);
	if (err)
		return err;
	if (op->view) {
		err = tracking_view_reset(t, true);
		if (err) {
			snprintf(text, len, "%s: no room for the view's scratch store (%" PRIu64
				 " bytes in %.300s): %s; no checkpoint was made", id,
				 v->nslots * v->granularity, t->vpath, strerror(-err));
			return -EIO;
		}
	}
	memset(tracking_slot(t, slot), 0, m->bitmap_bytes);
	memset(t->map + XBD_CBT_ZONES_OFF, 0, 2 * XBD_CBT_ZONE_BYTES);
	m->cp[m->ncp].slot = slot;
	m->cp[m->ncp].epoch = m->epoch;
	m->cp[m->ncp].seq = m->next_seq++;
	m->cp[m->ncp].created = time(NULL);
	snprintf(m->cp[m->ncp].name, sizeof(m->cp[0].name), "%s", op->name);
	m->ncp++;
	err = tracking_commit(t);
	if (err) {
		m->ncp--;
		return err;
	}
	/* Release: the rings load it with acquire and see the zeroed slot. */
	__atomic_store_n(&t->run->live, slot, __ATOMIC_RELEASE);
	if (op->view) {
		v->view_id = tracking_random();
		snprintf(v->checkpoint, sizeof(v->checkpoint), "%s", op->name);
		snprintf(v->device, sizeof(v->device), "%.39s", id);
		snprintf(v->params, sizeof(v->params), "%s", t->dev->params);
		v->disk_bytes = __atomic_load_n(&t->dev->disk.lim.nr_sectors, __ATOMIC_RELAXED) << 9;
		v->nblocks = (v->disk_bytes + v->granularity - 1) / v->granularity;
		v->started = time(NULL);
		v->ended = 0;
		v->why[0] = '\0';
		tracking_boot_id(v->boot_id, sizeof(v->boot_id));
		__atomic_store_n(&v->state, XBD_VIEW_ACTIVE, __ATOMIC_RELEASE);
	}
	snprintf(text, len, "%s: checkpoint %s made (%u of %u)\n", id, op->name, m->ncp, m->nslots);
	if (op->view)
		snprintf(text + strlen(text), len - strlen(text), "%s: its view: nbdkit xbdview "
			 "view=%.400s checkpoint=%s (xbdctl release %s %s when done)\n", id, t->vpath,
			 op->name, id, op->name);
	DLOG(t->dev, XBD_LOG_INFO, "checkpoint %s made%s", op->name, op->view ? ", with its view" : "");
	return 0;
}

/* Drop checkpoint i (no write in flight when it is the latest, or has the view). */
static int do_drop(struct xbd_track *t, int i, char *text, size_t len)
{
	struct xbd_cbt_meta *m = &t->m;
	bool last = (uint32_t)i == m->ncp - 1;
	char id[64], name[XBD_CBT_NAME_MAX];
	int err;

	ctl_dev_id(t->dev, id, sizeof(id));
	snprintf(name, sizeof(name), "%s", m->cp[i].name);
	if (view_of(t, name))
		tracking_view_end(t, "its checkpoint was dropped");
	/* Its interval joins the one before, so that the earlier checkpoint still sees it. */
	if (i > 0 && m->cp[i - 1].epoch == m->cp[i].epoch) {
		uint64_t *to = tracking_slot(t, m->cp[i - 1].slot);
		const uint64_t *from = tracking_slot(t, m->cp[i].slot);

		for (uint64_t w = 0; w < m->bitmap_bytes / 8; w++)
			to[w] |= __atomic_load_n(&from[w], __ATOMIC_RELAXED);
		/* Durable before the commit that forgets where they came from. */
		err = tracking_sync(t);
		if (err)
			return err;
	}
	memmove(&m->cp[i], &m->cp[i + 1], (m->ncp - i - 1) * sizeof(m->cp[0]));
	m->ncp--;
	err = tracking_commit(t);
	if (err)
		return err;
	if (last)
		__atomic_store_n(&t->run->live, m->ncp && m->cp[m->ncp - 1].epoch == m->epoch ?
				 m->cp[m->ncp - 1].slot : XBD_CBT_NONE, __ATOMIC_RELEASE);
	snprintf(text, len, "%s: checkpoint %s dropped (%u left)\n", id, name, m->ncp);
	DLOG(t->dev, XBD_LOG_INFO, "checkpoint %s dropped", name);
	return 0;
}

/* The operation's writes did not drain in time: it ends, saying which rings still hold how many. */
static void op_give_up(struct xbd_track *t, const char *id)
{
	char text[1024], out[256];

	undrained_text(t, out, sizeof(out));
	snprintf(text, sizeof(text), "%s: its writes did not drain within %u ms (slow or "
		 "stalled storage?; writes out: %s): nothing was changed, try again", id,
		 CBT_DRAIN_MS, out);
	DLOG(t->dev, XBD_LOG_WARNING, "a checkpoint operation gave up: writes did not drain "
	     "within %u ms (writes out: %s)", CBT_DRAIN_MS, out);
	op_end(t, -ETIMEDOUT, text);
}

/* The drained section's step: done, given up, or still waiting. */
static void op_try(struct xbd_track *t)
{
	struct track_op *op = t->op;
	char text[1024] = "", id[64];
	int err = 0, i;

	ctl_dev_id(t->dev, id, sizeof(id));
	if (!drained(t)) {
		if (xbd_mono_ms() >= op->deadline_ms)
			op_give_up(t, id);
		return;
	}
	switch (op->kind) {
	case OP_CHECKPOINT:
		err = do_checkpoint(t, op, text, sizeof(text));
		break;
	case OP_DROP:
		i = cp_index(t, op->name);
		err = i < 0 ? -ENOENT : do_drop(t, i, text, sizeof(text));
		break;
	case OP_RELEASE:
		tracking_view_end(t, "released by xbdctl release");
		snprintf(text, sizeof(text), "%s: the view of %s is released\n", id, op->name);
		DLOG(t->dev, XBD_LOG_INFO, "the view of checkpoint %s released", op->name);
		break;
	}
	if (err && !text[0])
		snprintf(text, sizeof(text), "%s: %s", id, strerror(-err));
	op_end(t, err, text);
}

/* Start op on t: its answer comes through its wait (perhaps before this returns). */
static int op_start(struct xbd_track *t, struct track_op *op)
{
	t->op = op;
	op->deadline_ms = xbd_mono_ms() + CBT_DRAIN_MS;
	/* seq_cst: the Dekker pair of datapath/cbt.c's admit. */
	__atomic_store_n(&t->run->hold, 1, __ATOMIC_SEQ_CST);
	op_try(t);
	return -EINPROGRESS;
}

uint64_t track_due(struct xbd_back *bk)
{
	for (struct xbd_dev *dev = bk->devs; dev; dev = dev->next)
		if (dev->track && dev->track->op)
			return xbd_mono_ms() + 1;
	return 0;
}

void track_timer(struct xbd_back *bk)
{
	for (struct xbd_dev *dev = bk->devs; dev; dev = dev->next)
		if (dev->track && dev->track->op)
			op_try(dev->track);
}

static void op_abort(struct xbd_dev *dev, const char *why)
{
	char text[256], id[64];

	if (!dev->track || !dev->track->op)
		return;
	ctl_dev_id(dev, id, sizeof(id));
	snprintf(text, sizeof(text), "%s: %s: nothing was changed", id, why);
	op_end(dev->track, -ECANCELED, text);
}

void track_shutdown(struct xbd_back *bk)
{
	for (struct xbd_dev *dev = bk->devs; dev; dev = dev->next)
		op_abort(dev, "xbd-back is stopping");
}

/* ---- the tracking's life beside its disk's ---- */

void track_storage_open(struct xbd_dev *dev)
{
	if (!dev->disk.o.cbt || dev->track || dev->readonly || !dev->disk.store)
		return;
	for (struct xbd_dev *o = dev->bk->devs; o; o = o->next)
		if (o != dev && o->track && o->params && !strcmp(o->params, dev->params)) {
			char id[64];

			ctl_dev_id(o, id, sizeof(id));
			DLOG(dev, XBD_LOG_ERR, "changed-block tracking not started: %s tracks the "
			     "same image", id);
			tracking_untrust(o->track, "%s/%u/%u opened the same image writable",
					 dev->disk.type, dev->disk.domid, dev->disk.devid);
			return;
		}
	tracking_open(dev);
}

void track_storage_close(struct xbd_dev *dev, const char *why)
{
	op_abort(dev, "the disk closed");
	if (dev->track)
		xbd_cbt_detach(&dev->disk);
	tracking_close(dev, why);
}

void track_connect(struct xbd_dev *dev)
{
	int err;

	if (!dev->track || dev->server != &xbd_ring_here)
		return; /* its worker got the files with the disk (workers/bind.c) */
	/* Copies: the data path closes what it is given. */
	err = xbd_cbt_attach(&dev->disk, fcntl(dev->track->ring_fd, F_DUPFD_CLOEXEC, 0),
			     dev->track->ring_vfd < 0 ? -1 :
			     fcntl(dev->track->ring_vfd, F_DUPFD_CLOEXEC, 0));
	if (err)
		DLOG(dev, XBD_LOG_ERR, "cannot map its changed-block tracking: %s", strerror(-err));
}

void track_set(struct xbd_dev *dev)
{
	if (!dev->disk.o.cbt) {
		if (!dev->track || __atomic_load_n(&dev->track->run->live, __ATOMIC_ACQUIRE) ==
		    XBD_CBT_NONE)
			return;
		if (dev->track->view)
			tracking_view_end(dev->track, "the tracking was turned off");
		tracking_untrust(dev->track, "the tracking was turned off (xbdctl set cbt=0)");
		return;
	}
	if (dev->track)
		return; /* on already (checkpoints from now on) */
	track_storage_open(dev);
	if (!dev->track || !xbd_dev_connected(dev))
		return;
	/* Connected: to where its rings run now. */
	if (dev->server == &xbd_ring_here)
		track_connect(dev);
	else
		xbd_worker_cbt(dev->wd);
}

/* ---- the verbs ---- */

static int cmd_checkpoint(struct xbd_dev *dev, char **w, unsigned int nw, FILE *f, char *err,
			  size_t errlen, struct xbd_ctl_wait *wait)
{
	struct xbd_track *t;
	struct track_op *op;
	bool view = false;
	const char *name = NULL;
	char id[64], names[512];
	int ret;

	ctl_dev_id(dev, id, sizeof(id));
	for (unsigned int i = 0; i < nw; i++) {
		if (!strcmp(w[i], "--view")) {
			view = true;
		} else if (!name) {
			name = w[i];
		} else {
			snprintf(err, errlen, "checkpoint takes DEVICE NAME [--view]");
			return -EINVAL;
		}
	}
	if (!name || !name_ok(name)) {
		snprintf(err, errlen, "a checkpoint's name: 1 to %d of A-Z a-z 0-9 _ . : - (not "
			 "starting with -), got '%.60s'", XBD_CBT_NAME_MAX - 1, name ? name : "");
		return -EINVAL;
	}
	if ((ret = need_track(dev, &t, err, errlen)))
		return ret;
	(void)f;
	if (t->op) {
		snprintf(err, errlen, "%s: another checkpoint operation is under way", id);
		return -EBUSY;
	}
	if (cp_index(t, name) >= 0) {
		snprintf(err, errlen, "%s: checkpoint %s exists already", id, name);
		return -EEXIST;
	}
	if (t->m.ncp >= t->m.nslots) {
		cp_names(t, names, sizeof(names));
		snprintf(err, errlen, "%s: %u checkpoints already, the most it keeps (cbt-max-checkpoints "
			 "%u, cbt-max-memory %" PRIu64 " for %" PRIu64 "-byte bitmaps): drop one first "
			 "(%s)", id, t->m.ncp, dev->disk.o.cbt_max_checkpoints,
			 dev->disk.o.cbt_max_memory, t->m.bitmap_bytes, names);
		return -ENOSPC;
	}
	if (view && !t->view) {
		snprintf(err, errlen, "%s: cbt-scratch is 0: no views", id);
		return -EINVAL;
	}
	if (view && __atomic_load_n(&t->view->state, __ATOMIC_ACQUIRE) == XBD_VIEW_ACTIVE) {
		snprintf(err, errlen, "%s: the view of checkpoint %s is open: one view a disk "
			 "(xbdctl release %s %s first)", id, t->view->checkpoint, id,
			 t->view->checkpoint);
		return -EBUSY;
	}
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->kind = OP_CHECKPOINT;
	op->view = view;
	op->wait = wait;
	snprintf(op->name, sizeof(op->name), "%s", name);
	return op_start(t, op);
}

/* Find checkpoint name for a query: its index, or -1 with why in err. */
static int query_cp(const struct xbd_track *t, const char *id, const char *name, char *err,
		    size_t errlen)
{
	char names[400], at[32];
	int i = cp_index(t, name);

	if (i >= 0)
		return i;
	cp_names(t, names, sizeof(names));
	when(at, sizeof(at), t->m.created);
	snprintf(err, errlen, "%s: no checkpoint '%.47s' (checkpoints: %s; its tracking began "
		 "%s: %s): take a full backup", id, name, names, at, t->m.started_why);
	return -1;
}

/* Base64 of n bytes. */
static void base64(FILE *f, const unsigned char *p, size_t n)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);

		fputc(a[v >> 18 & 63], f);
		fputc(a[v >> 12 & 63], f);
		fputc(i + 1 < n ? a[v >> 6 & 63] : '=', f);
		fputc(i + 2 < n ? a[v & 63] : '=', f);
	}
}

static int cmd_changes(struct xbd_dev *dev, char **w, unsigned int nw, enum ctl_format fmt,
		       FILE *f, char *err, size_t errlen)
{
	struct xbd_track *t;
	const char *from = NULL, *to = NULL;
	bool xapi = false;
	uint64_t *acc, words, nb, size, g, bytes = 0, nx = 0, b;
	char id[64], at[32];
	int fi, ti, ret;

	ctl_dev_id(dev, id, sizeof(id));
	for (unsigned int i = 0; i < nw; i++) {
		if (!strcmp(w[i], "--xapi"))
			xapi = true;
		else if (!from)
			from = w[i];
		else if (!to)
			to = w[i];
		else
			from = NULL, i = nw;
	}
	if (!from) {
		snprintf(err, errlen, "changes takes DEVICE FROM [TO] [--json|--xapi]");
		return -EINVAL;
	}
	if ((ret = need_track(dev, &t, err, errlen)))
		return ret;
	if ((fi = query_cp(t, id, from, err, errlen)) < 0)
		return -ENOENT;
	if (to && (ti = query_cp(t, id, to, err, errlen)) < 0)
		return -ENOENT;
	if (!to)
		ti = (int)t->m.ncp;
	if (ti <= fi) {
		snprintf(err, errlen, "%s: checkpoint %s was made %s %s: changes FROM TO need the "
			 "earlier first", id, to, ti == fi ? "as" : "before", from);
		return -EINVAL;
	}
	/* Every interval between them must have been tracked throughout. */
	if (t->m.cp[fi].epoch != (ti < (int)t->m.ncp ? t->m.cp[ti].epoch : t->m.epoch)) {
		when(at, sizeof(at), t->m.untrusted_at);
		snprintf(err, errlen, "%s: the changes since checkpoint %s are not known: %s (%s): "
			 "take a full backup", id, from, t->m.untrusted_why, at);
		return -ESTALE;
	}
	g = t->m.granularity;
	size = __atomic_load_n(&dev->disk.lim.nr_sectors, __ATOMIC_RELAXED) << 9;
	nb = (size + g - 1) / g;
	if (nb > t->m.nblocks)
		nb = t->m.nblocks;
	words = (nb + 63) / 64;
	acc = calloc(words ? words : 1, 8);
	if (!acc)
		return -ENOMEM;
	for (int i = fi; i < ti; i++) {
		const uint64_t *s = tracking_slot(t, t->m.cp[i].slot);

		for (uint64_t k = 0; k < words; k++)
			acc[k] |= __atomic_load_n(&s[k], __ATOMIC_ACQUIRE);
	}
	if (nb % 64)
		acc[words - 1] &= (1ull << (nb % 64)) - 1;
	if (xapi) {
		/* XAPI's 64 KiB blocks, the first in the top bit of the first byte. */
		uint64_t xn = (size + XBD_CBT_XAPI_BLOCK - 1) / XBD_CBT_XAPI_BLOCK;
		unsigned char *x = calloc((xn + 7) / 8 ? (xn + 7) / 8 : 1, 1);

		if (!x) {
			free(acc);
			return -ENOMEM;
		}
		for (b = 0; b < nb; b++) {
			uint64_t first, last;

			if (!(acc[b / 64] >> (b % 64) & 1))
				continue;
			first = b * g / XBD_CBT_XAPI_BLOCK;
			last = ((b + 1) * g - 1) / XBD_CBT_XAPI_BLOCK;
			for (uint64_t k = first; k <= last && k < xn; k++)
				x[k / 8] |= (unsigned char)(0x80 >> (k % 8));
		}
		base64(f, x, (xn + 7) / 8);
		fputc('\n', f);
		free(x);
		free(acc);
		return 0;
	}
	for (b = 0; b < nb; b++)
		if (acc[b / 64] >> (b % 64) & 1) {
			uint64_t e = b, off = b * g, len;

			while (e + 1 < nb && acc[(e + 1) / 64] >> ((e + 1) % 64) & 1)
				e++;
			len = ((e + 1) * g > size ? size : (e + 1) * g) - off;
			if (fmt == FMT_JSON)
				fprintf(f, "%s{\"offset\":%" PRIu64 ",\"length\":%" PRIu64 "}",
					nx ? "," : "{\"extents\":[", off, len);
			else
				fprintf(f, "%s%" PRIu64 " %" PRIu64 "\n", nx ? "" :
					"# OFFSET LENGTH (bytes)\n", off, len);
			nx++;
			bytes += len;
			b = e;
		}
	if (fmt == FMT_JSON) {
		fprintf(f, "%s],\"device\":\"%s\",\"from\":\"%s\",\"to\":", nx ? "" : "{\"extents\":[",
			id, from);
		if (to)
			fprintf(f, "\"%s\"", to);
		else
			fprintf(f, "null");
		fprintf(f, ",\"granularity\":%" PRIu64 ",\"disk_bytes\":%" PRIu64
			",\"changed_bytes\":%" PRIu64 ",\"extent_count\":%" PRIu64 "}\n", g, size,
			bytes, nx);
	} else {
		fprintf(f, "# %s: %s to %s: %" PRIu64 " extents, %" PRIu64 " of %" PRIu64
			" bytes changed (%" PRIu64 "-byte blocks)\n", id, from, to ? to : "now", nx,
			bytes, size, g);
	}
	free(acc);
	return 0;
}

static int cmd_drop_release(struct xbd_dev *dev, bool drop, char **w, unsigned int nw,
			    FILE *f, char *err, size_t errlen, struct xbd_ctl_wait *wait)
{
	struct xbd_track *t;
	struct track_op *op;
	char id[64], text[512];
	int i, ret;

	ctl_dev_id(dev, id, sizeof(id));
	if (nw != 1) {
		snprintf(err, errlen, "%s takes DEVICE CHECKPOINT", drop ? "drop" : "release");
		return -EINVAL;
	}
	if ((ret = need_track(dev, &t, err, errlen)))
		return ret;
	if ((i = query_cp(t, id, w[0], err, errlen)) < 0) {
		/* (Not a backup's question here: just the checkpoints there are.) */
		char *cut = strstr(err, "; its tracking began");

		if (cut)
			snprintf(cut, errlen - (size_t)(cut - err), ")");
		return -ENOENT;
	}
	if (t->op) {
		snprintf(err, errlen, "%s: another checkpoint operation is under way", id);
		return -EBUSY;
	}
	if (!drop && !view_of(t, w[0])) {
		snprintf(err, errlen, "%s: checkpoint %s has no open view", id, w[0]);
		return -ENOENT;
	}
	/* An earlier checkpoint without the view: no ring writes its slot. */
	if (drop && (uint32_t)i < t->m.ncp - 1 && !view_of(t, w[0])) {
		ret = do_drop(t, i, text, sizeof(text));
		if (ret) {
			snprintf(err, errlen, "%s: %s", id, strerror(-ret));
			return ret;
		}
		fputs(text, f);
		return 0;
	}
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->kind = drop ? OP_DROP : OP_RELEASE;
	op->wait = wait;
	snprintf(op->name, sizeof(op->name), "%s", w[0]);
	return op_start(t, op);
}

static void cp_table(FILE *f, const struct xbd_track *t)
{
	fprintf(f, "  %-20s %-20s %-8s %s\n", "CHECKPOINT", "MADE", "BLOCKS", "VIEW");
	for (uint32_t i = 0; i < t->m.ncp; i++) {
		const struct xbd_cbt_ckpt *c = &t->m.cp[i];
		char at[32];

		when(at, sizeof(at), c->created);
		fprintf(f, "  %-20s %-20s %-8" PRIu64 " %s%s\n", c->name, at,
			count_bits(t, tracking_slot(t, c->slot)),
			view_of(t, c->name) ? view_state(t->view) : "-",
			c->epoch != t->m.epoch ? "  (before a gap: compare with older ones only)" : "");
	}
}

static int cmd_checkpoints(struct xbd_back *bk, const char *sel, enum ctl_format fmt, FILE *f)
{
	unsigned int n = 0;

	if (fmt == FMT_JSON)
		fputs("{\"devices\":[", f);
	for (struct xbd_dev *dev = bk->devs; dev; dev = dev->next) {
		char id[64];

		if (!ctl_dev_matches(dev, sel))
			continue;
		ctl_dev_id(dev, id, sizeof(id));
		if (fmt == FMT_JSON) {
			fprintf(f, "%s{\"id\":\"%s\"", n++ ? "," : "", id);
			track_json(f, dev);
			fputc('}', f);
			continue;
		}
		if (!dev->track)
			continue;
		tracking_poll(dev->track);
		fprintf(f, "%s", n++ ? "\n" : "");
		track_table(f, "", dev);
		cp_table(f, dev->track);
	}
	if (fmt == FMT_JSON)
		fputs("]}\n", f);
	return 0;
}

int track_command(struct xbd_back *bk, const char *cmd, char **w, unsigned int nw,
		  enum ctl_format fmt, FILE *f, char *err, size_t errlen, const char **sel,
		  struct xbd_ctl_wait *wait)
{
	struct xbd_dev *dev;
	int ret;

	if (!strcmp(cmd, XBD_CTL_CHECKPOINTS)) {
		if (nw > 1) {
			snprintf(err, errlen, XBD_CTL_CHECKPOINTS " takes at most one DEVICE");
			return -EINVAL;
		}
		*sel = nw ? w[0] : NULL;
		for (dev = bk->devs; *sel && dev && !ctl_dev_matches(dev, *sel); dev = dev->next)
			;
		if (*sel && !dev)
			return -ENODEV;
		return cmd_checkpoints(bk, *sel, fmt, f);
	}
	if (!nw) {
		snprintf(err, errlen, "%s needs a DEVICE", cmd);
		return -EINVAL;
	}
	*sel = w[0];
	if ((ret = find_dev(bk, w[0], &dev, err, errlen)))
		return ret;
	if (!strcmp(cmd, XBD_CTL_CHECKPOINT))
		return cmd_checkpoint(dev, w + 1, nw - 1, f, err, errlen, wait);
	if (!strcmp(cmd, XBD_CTL_CHANGES))
		return cmd_changes(dev, w + 1, nw - 1, fmt, f, err, errlen);
	if (!strcmp(cmd, XBD_CTL_DROP))
		return cmd_drop_release(dev, true, w + 1, nw - 1, f, err, errlen, wait);
	return cmd_drop_release(dev, false, w + 1, nw - 1, f, err, errlen, wait);
}

/* ---- what list and stats show ---- */

/* The bytes of scratch a view's copies took (the allocator may have run past the end). */
static uint64_t scratch_used(const struct xbd_cbt_view *v)
{
	uint64_t used = __atomic_load_n(&v->used, __ATOMIC_RELAXED);

	return (used < v->nslots ? used : v->nslots) * v->granularity;
}

static void json_str_plain(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

void track_json(FILE *f, const struct xbd_dev *dev)
{
	const struct xbd_track *t = dev->track;
	const struct xbd_cbt_view *v;

	fprintf(f, ",\"tracking\":{\"enabled\":%s", dev->disk.o.cbt ? "true" : "false");
	if (!t) {
		fprintf(f, ",\"open\":false}");
		return;
	}
	fprintf(f, ",\"open\":true,\"file\":");
	json_str_plain(f, t->path);
	fprintf(f, ",\"granularity\":%" PRIu64 ",\"bitmap_bytes\":%" PRIu64 ",\"max_checkpoints\":%u"
		",\"memory_bytes\":%" PRIu64 ",\"file_bytes\":%" PRIu64 ",\"epoch\":%u,\"started\":{\"at\":%"
		PRId64 ",\"why\":", t->m.granularity, t->m.bitmap_bytes, t->m.nslots,
		t->m.bitmap_bytes * t->m.nslots, t->m.file_bytes, t->m.epoch, t->m.created);
	json_str_plain(f, t->m.started_why);
	fprintf(f, "},\"untrusted\":");
	if (t->m.untrusted_at) {
		fprintf(f, "{\"at\":%" PRId64 ",\"why\":", t->m.untrusted_at);
		json_str_plain(f, t->m.untrusted_why);
		fputc('}', f);
	} else {
		fputs("null", f);
	}
	fprintf(f, ",\"checkpoints\":[");
	for (uint32_t i = 0; i < t->m.ncp; i++) {
		const struct xbd_cbt_ckpt *c = &t->m.cp[i];

		fprintf(f, "%s{\"name\":", i ? "," : "");
		json_str_plain(f, c->name);
		fprintf(f, ",\"created\":%" PRId64 ",\"seq\":%" PRIu64 ",\"comparable_with_now\":%s"
			",\"blocks_until_next\":%" PRIu64 "}", c->created, c->seq,
			c->epoch == t->m.epoch ? "true" : "false",
			count_bits(t, tracking_slot(t, c->slot)));
	}
	fprintf(f, "],\"view\":");
	v = t->view;
	if (!v) {
		fputs("null}", f);
		return;
	}
	fprintf(f, "{\"state\":\"%s\",\"checkpoint\":", view_state(v));
	json_str_plain(f, v->checkpoint);
	fprintf(f, ",\"file\":");
	json_str_plain(f, t->vpath);
	fprintf(f, ",\"copied_blocks\":%" PRIu64 ",\"scratch_used_bytes\":%" PRIu64
		",\"scratch_bytes\":%" PRIu64 ",\"why\":",
		__atomic_load_n(&v->copied, __ATOMIC_RELAXED),
		scratch_used(v), v->nslots * v->granularity);
	json_str_plain(f, v->why);
	fputs("}}", f);
}

const char *track_column(const struct xbd_dev *dev, char *buf, size_t len)
{
	const struct xbd_track *t = dev->track;

	if (!dev->disk.o.cbt)
		return "-";
	if (!t)
		return "off";
	snprintf(buf, len, "on/%u%s", t->m.ncp, t->view && __atomic_load_n(&t->view->state,
		 __ATOMIC_RELAXED) == XBD_VIEW_ACTIVE ? "+v" : "");
	return buf;
}

void track_table(FILE *f, const char *indent, const struct xbd_dev *dev)
{
	const struct xbd_track *t = dev->track;
	const struct xbd_cbt_view *v;
	char id[64];

	if (!t)
		return;
	ctl_dev_id(dev, id, sizeof(id));
	fprintf(f, "%s%s%stracking      %s, %" PRIu64 "-byte blocks, %u checkpoints of %u, "
		"bitmaps %" PRIu64 " KiB, %s\n", indent, indent[0] ? "" : id, indent[0] ? "" : "  ",
		dev->disk.o.cbt ? "on" : "off", t->m.granularity, t->m.ncp, t->m.nslots,
		t->m.bitmap_bytes * t->m.nslots >> 10, t->path);
	if (t->m.untrusted_at)
		fprintf(f, "%s  gap: %s\n", indent, t->m.untrusted_why);
	v = t->view;
	if (v && __atomic_load_n(&v->state, __ATOMIC_RELAXED) != XBD_VIEW_NONE)
		fprintf(f, "%s  view of %s: %s, %" PRIu64 " blocks kept, scratch %" PRIu64 " of %"
			PRIu64 " KiB%s%s\n", indent, v->checkpoint, view_state(v),
			__atomic_load_n(&v->copied, __ATOMIC_RELAXED), scratch_used(v) >> 10,
			v->nslots * v->granularity >> 10, v->why[0] ? ": " : "", v->why);
}

void track_prometheus(FILE *f, const struct xbd_back *bk, const char *sel)
{
	static const struct {
		const char *name, *help;
	} g[] = {
		{ XBD_METRIC_CBT_ENABLED, "Changed-block tracking open for the disk (1) or not (0)." },
		{ XBD_METRIC_CBT_CHECKPOINTS, "Checkpoints the disk keeps." },
		{ XBD_METRIC_CBT_BITMAP_BYTES, "Bytes of the disk's tracking bitmaps (all its slots)." },
		{ XBD_METRIC_CBT_VIEW, "A point-in-time view of the disk is active (1) or not (0)." },
		{ XBD_METRIC_CBT_SCRATCH_USED, "Bytes the disk's view copied aside." },
		{ XBD_METRIC_CBT_SCRATCH, "Bytes the disk's view may copy aside (cbt-scratch)." },
	};

	for (unsigned int k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", g[k].name, g[k].help, g[k].name);
		for (const struct xbd_dev *dev = bk->devs; dev; dev = dev->next) {
			const struct xbd_track *t = dev->track;
			const struct xbd_cbt_view *v = t ? t->view : NULL;
			uint64_t val = 0;
			char id[64];

			if (!ctl_dev_matches(dev, sel))
				continue;
			switch (k) {
			case 0: val = t != NULL; break;
			case 1: val = t ? t->m.ncp : 0; break;
			case 2: val = t ? t->m.bitmap_bytes * t->m.nslots : 0; break;
			case 3: val = v && __atomic_load_n(&v->state, __ATOMIC_RELAXED) == XBD_VIEW_ACTIVE; break;
			case 4: val = v ? scratch_used(v) : 0; break;
			default: val = v ? v->nslots * v->granularity : 0; break;
			}
			ctl_dev_id(dev, id, sizeof(id));
			fprintf(f, "%s{" XBD_LABEL_EQ(XBD_LABEL_DOMAIN, "%u") "," XBD_LABEL_EQ(XBD_LABEL_DEVICE, "%s")
				"} %" PRIu64 "\n", g[k].name, dev->disk.domid, id, val);
		}
	}
}
