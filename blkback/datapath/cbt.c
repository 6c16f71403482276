/*
 * cbt.c: changed-block tracking in the process that runs a disk's rings
 * (cbt.h; the files: cbt-format.h).  Every write, discard and barrier
 * with data has its blocks marked in the live slot before the engine
 * gets it, and is counted in its ring's inflight until it is answered,
 * so that a checkpoint (the control plane's drained section) can tell
 * when no write is out.
 *
 * The ordering, for a write W of a ring (ring_submit, then its answer):
 *
 *   1. admit: inflight := inflight + 1, then load hold (both seq_cst the
 *      first time inflight leaves 0).  The control plane stores hold = 1
 *      (seq_cst) and then waits until every ring's inflight is 0: either
 *      it sees W counted and waits for W's answer, or W sees hold and
 *      waits.  So no write is out across a checkpoint: one answered
 *      before it is in the old slot, one submitted after it in the new.
 *   2. mark: W's blocks set in the live slot (atomic ORs in the shared
 *      mapping).  From here the bits are in the page cache: a kill of
 *      this process (or of xbd-back) cannot lose them, and W itself, if
 *      it is not answered, is in the ring's journal and runs again.
 *   3. intent: for each zone W touches, its bit in zone[gen & 1]; a bit
 *      this batch set (pending counted) or one another ring set and has
 *      not synced yet (pending != 0) makes the batch sync the file
 *      (fdatasync) before anything of it is submitted: the intent is on
 *      stable storage before W can reach it, which a power loss needs.
 *   4. submit.  5. W completes, is answered: inflight := inflight - 1
 *      (release: the control plane's acquire of 0 sees every bit).
 *
 * A period's switch (every CBT_PERIOD_NS, by the ring that finds it due):
 * gen := gen + 1 (seq_cst); wait until no ring is between 2 and 3 under
 * the old gen (each sets busy before it loads gen, clears it after its
 * sync); fdatasync: every bit marked under the old gen is durable; then
 * zone[old gen & 1] is cleared.  So a zone with no intent on disk has all
 * its marks on disk, and after a power loss the control plane counts
 * every block of a zone with an intent changed: the over-report, at most
 * the zones written in the last two periods.
 *
 * Arm64 is weakly ordered: every store another thread or process must
 * see in order is an atomic with the order named here; none relies on
 * x86's.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blkback/datapath/ring-thread.h"
#include "common/clock.h"

/* md's write-intent bitmap clears its bits after 5 s by default: the same trade. */
#define CBT_PERIOD_NS (5ull * 1000000000ull)
/* A write held by a checkpoint's drained section looks again this often. */
#define CBT_HOLD_RECHECK_NS 1000000ull
/* A period's switch waits this long for a ring to finish its marking, else skips its clear. */
#define CBT_SWITCH_WAIT_NS 200000000ull

/* ---- the files ---- */

/* The valid copy of the metadata with the higher seqno, or NULL. */
static const struct xbd_cbt_meta *meta_pick(const char *map, size_t len)
{
	const struct xbd_cbt_meta *best = NULL;

	if (len < XBD_CBT_SLOTS_OFF)
		return NULL;
	for (int i = 0; i < 2; i++) {
		const struct xbd_cbt_meta *c = (const void *)(map + i * XBD_CBT_META_SIZE);

		if (c->magic != XBD_CBT_MAGIC || c->version != XBD_CBT_VERSION ||
		    c->meta_size != sizeof(*c) || c->sum != xbd_cbt_sum(c))
			continue;
		if (!best || c->seqno > best->seqno)
			best = c;
	}
	return best;
}

int xbd_cbt_file_sync(int fd, void *map, uint64_t file_bytes, uint64_t shadow_off)
{
	int err;
#ifdef XBD_TEST_HOOKS
	/*
	 * The shadow: two copies of the file as a sync made it durable and a
	 * word saying which is whole (1 or 2), so that a kill in the middle of
	 * writing one leaves the other.  What is copied before the sync is on
	 * disk after it; what is set during the copy may or may not be.
	 */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static uint64_t seq_taken, seq_done;
	void *snap = NULL;
	uint64_t seq = 0;

	if (shadow_off && map) {
		snap = malloc(file_bytes);
		if (snap) {
			pthread_mutex_lock(&lock);
			seq = ++seq_taken;
			memcpy(snap, map, file_bytes);
			pthread_mutex_unlock(&lock);
		}
	}
#endif
	err = fdatasync(fd) ? -errno : 0;
#ifdef XBD_TEST_HOOKS
	if (snap) {
		pthread_mutex_lock(&lock);
		if (!err && seq > seq_done) {
			uint64_t *which = (uint64_t *)((char *)map + shadow_off);
			uint64_t next = __atomic_load_n(which, __ATOMIC_ACQUIRE) == 1 ? 2 : 1;
			char *to = (char *)map + shadow_off + XBD_CBT_PAGE + (next - 1) * file_bytes;

			memcpy(to, snap, file_bytes);
			__atomic_store_n(which, next, __ATOMIC_RELEASE);
			seq_done = seq;
		}
		pthread_mutex_unlock(&lock);
		free(snap);
	}
#endif
	return err;
}

static void unmap_view(struct xbd_cbt *t)
{
	if (t->vmap)
		munmap(t->vmap, t->vmap_len);
	if (t->vfd >= 0)
		close(t->vfd);
	t->vmap = NULL;
	t->view = NULL;
	t->vfd = -1;
}

/* Map the view file vfd (ours): 0 or -errno. */
static int map_view(struct xbd_cbt *t, int vfd)
{
	const struct xbd_cbt_view *v;
	struct stat st;

	t->vfd = vfd;
	if (fstat(t->vfd, &st) || st.st_size < XBD_CBT_TABLE_OFF) {
		unmap_view(t);
		return -EINVAL;
	}
	t->vmap_len = (size_t)st.st_size;
	t->vmap = mmap(NULL, t->vmap_len, PROT_READ | PROT_WRITE, MAP_SHARED, t->vfd, 0);
	if (t->vmap == MAP_FAILED) {
		t->vmap = NULL;
		unmap_view(t);
		return -errno;
	}
	v = (const void *)t->vmap;
	if (v->magic != XBD_CBT_VIEW_MAGIC || v->version != XBD_CBT_VERSION ||
	    v->file_bytes > t->vmap_len || v->data_off > v->file_bytes ||
	    v->table_entries & (v->table_entries - 1) ||
	    XBD_CBT_TABLE_OFF + v->table_entries * 8 > v->data_off ||
	    v->data_off + v->nslots * v->granularity > v->file_bytes ||
	    v->granularity != 1ull << t->gran_shift || v->nslots > XBD_CBT_MAX_COPIES) {
		unmap_view(t);
		return -EINVAL;
	}
	t->view = (struct xbd_cbt_view *)t->vmap;
	t->table = (uint64_t *)(t->vmap + XBD_CBT_TABLE_OFF);
	t->vdata = t->vmap + v->data_off;
	return 0;
}

static void cbt_free(struct xbd_cbt *t)
{
	unmap_view(t);
	if (t->map)
		munmap(t->map, t->map_len);
	if (t->fd >= 0)
		close(t->fd);
	pthread_mutex_destroy(&t->switch_lock);
	pthread_mutex_destroy(&t->shadow_lock);
	free(t);
}

int xbd_cbt_attach(struct xbd_disk *disk, int fd, int vfd)
{
	const struct xbd_cbt_meta *m;
	struct xbd_cbt *t;
	struct stat st;
	int err;

	if (__atomic_load_n(&disk->cbt, __ATOMIC_ACQUIRE) || !(t = calloc(1, sizeof(*t)))) {
		close(fd);
		if (vfd >= 0)
			close(vfd);
		return disk->cbt ? 0 : -ENOMEM;
	}
	t->vfd = -1;
	pthread_mutex_init(&t->switch_lock, NULL);
	pthread_mutex_init(&t->shadow_lock, NULL);
	t->fd = fd;
	if (fstat(t->fd, &st) || st.st_size < XBD_CBT_SLOTS_OFF) {
		err = -EINVAL;
		goto fail;
	}
	t->map_len = (size_t)st.st_size;
	t->map = mmap(NULL, t->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, 0);
	if (t->map == MAP_FAILED) {
		t->map = NULL;
		err = -errno;
		goto fail;
	}
	/* Only the layout is read here, and it never changes in a file. */
	m = meta_pick(t->map, t->map_len);
	if (!m || m->file_bytes > t->map_len || m->nslots > XBD_CBT_MAX_CKPT ||
	    m->granularity < 512 || m->granularity & (m->granularity - 1) ||
	    m->bitmap_bytes * 8 < m->nblocks || m->nzones > XBD_CBT_MAX_ZONES ||
	    m->zone_shift > 63 || (m->shadow_off && m->shadow_off + XBD_CBT_PAGE +
					 2 * m->file_bytes > t->map_len)) {
		err = -EINVAL;
		goto fail;
	}
	t->gran_shift = xbd_cbt_log2(m->granularity);
	t->zone_shift = m->zone_shift;
	t->nblocks = m->nblocks;
	t->bitmap_bytes = m->bitmap_bytes;
	t->nslots = m->nslots;
	t->file_bytes = m->file_bytes;
	t->shadow_off = m->shadow_off;
	t->run = (struct xbd_cbt_run *)(t->map + XBD_CBT_RUN_OFF);
	t->zone[0] = (uint64_t *)(t->map + XBD_CBT_ZONES_OFF);
	t->zone[1] = (uint64_t *)(t->map + XBD_CBT_ZONES_OFF + XBD_CBT_ZONE_BYTES);
	if (vfd >= 0) {
		err = map_view(t, vfd);
		vfd = -1;
		if (err)
			goto fail;
	}
	/* The rings load it with acquire: they see it whole. */
	__atomic_store_n(&disk->cbt, t, __ATOMIC_RELEASE);
	return 0;
fail:
	if (vfd >= 0)
		close(vfd);
	cbt_free(t);
	return err;
}

void xbd_cbt_detach(struct xbd_disk *disk)
{
	struct xbd_cbt *t = disk->cbt;

	if (!t)
		return;
	disk->cbt = NULL;
	cbt_free(t);
}

/* ---- the hot path (ring-thread.h) ---- */

static inline uint32_t *ring_inflight(struct xbd_bring *br)
{
	return &br->cbt->run->ring[br->base.idx % XBD_CBT_MAX_RINGS].inflight;
}

void cbt_ring_reset(struct xbd_bring *br)
{
	struct xbd_cbt *t = __atomic_load_n(&br->base.disk->cbt, __ATOMIC_ACQUIRE);

	/* A ring's line: nothing of a previous process's (a worker that died) is out any more. */
	if (t)
		__atomic_store_n(&t->run->ring[br->base.idx % XBD_CBT_MAX_RINGS].inflight, 0,
				 __ATOMIC_SEQ_CST);
}

bool cbt_admit(struct xbd_bring *br, struct bk_req *req, uint64_t *now)
{
	uint32_t *mine, v;
	bool hold;

	if (req->cbt_counted)
		return true; /* counted at an earlier pass (a partial submit, its copy's read) */
	mine = ring_inflight(br);
	v = __atomic_load_n(mine, __ATOMIC_RELAXED);
	if (!v) {
		/*
		 * Leaving 0: the control plane may be looking.  Store, then
		 * load hold, both seq_cst (the Dekker pair of the ordering above).
		 */
		__atomic_store_n(mine, 1, __ATOMIC_SEQ_CST);
		hold = __atomic_load_n(&br->cbt->run->hold, __ATOMIC_SEQ_CST);
	} else {
		/* Already above 0: the control plane waits for those anyway, and then for this one. */
		__atomic_store_n(mine, v + 1, __ATOMIC_RELAXED);
		hold = __atomic_load_n(&br->cbt->run->hold, __ATOMIC_RELAXED);
	}
	if (hold) {
		__atomic_store_n(mine, v, __ATOMIC_RELEASE);
		if (!req->cbt_held) {
			req->cbt_held = true;
			XBD_STAT_INC(br->base.stats, cbt_held);
		}
		if (!*now)
			*now = ring_now(br);
		br->throttled = true;
		br->throttle_due = *now + CBT_HOLD_RECHECK_NS;
		return false;
	}
	req->cbt_counted = true;
	return true;
}

void cbt_done(struct xbd_bring *br, struct bk_req *req)
{
	uint32_t *mine;

	if (!req->cbt_counted)
		return;
	req->cbt_counted = false;
	req->cbt_held = false;
	if (!br->cbt)
		return;
	mine = ring_inflight(br);
	/* Release: whoever sees the count drop sees every bit and copy the request made. */
	__atomic_store_n(mine, __atomic_load_n(mine, __ATOMIC_RELAXED) - 1, __ATOMIC_RELEASE);
}

void cbt_mark(struct xbd_bring *br, struct bk_req *req)
{
	struct xbd_cbt *t = br->cbt;
	uint64_t off = req->r.sector_number << XBD_SECTOR_SHIFT;
	uint64_t len = req->r.nr_sectors << XBD_SECTOR_SHIFT, first, last, z;
	uint32_t live;
	uint64_t *zone;

	if (!len)
		return;
	if (!br->cbt_busy) {
		/* busy before gen (seq_cst both): a switch that moved gen on waits for us. */
		__atomic_store_n(&t->ring[br->base.idx % XBD_CBT_MAX_RINGS].busy, 1, __ATOMIC_SEQ_CST);
		br->cbt_gen = __atomic_load_n(&t->gen, __ATOMIC_SEQ_CST);
		br->cbt_busy = true;
	}
	/* Acquire: the slot the control plane zeroed before it made it live. */
	live = __atomic_load_n(&t->run->live, __ATOMIC_ACQUIRE);
	if (live >= t->nslots)
		return; /* no checkpoint: nothing to compare with */
	first = off >> t->gran_shift;
	last = (off + len - 1) >> t->gran_shift;
	if (last >= t->nblocks) {
		/* The disk grew past the slots: the control plane says the tracking has a gap. */
		if (!__atomic_load_n(&t->run->overflow, __ATOMIC_RELAXED))
			__atomic_store_n(&t->run->overflow, 1, __ATOMIC_RELEASE);
		if (first >= t->nblocks)
			return;
		last = t->nblocks - 1;
	}
	xbd_cbt_set_range((uint64_t *)(t->map + XBD_CBT_SLOTS_OFF + (uint64_t)live * t->bitmap_bytes),
			  first, last);
	if (!__atomic_load_n(&t->marked, __ATOMIC_RELAXED))
		__atomic_store_n(&t->marked, 1, __ATOMIC_RELAXED);
	zone = t->zone[br->cbt_gen & 1];
	for (z = first >> t->zone_shift; z <= last >> t->zone_shift; z++) {
		uint64_t bit = 1ull << (z % 64);

		if (!(__atomic_load_n(&zone[z / 64], __ATOMIC_ACQUIRE) & bit)) {
			/* A new intent: counted pending before it is visible (seq_cst both). */
			__atomic_add_fetch(&t->pending, 1, __ATOMIC_SEQ_CST);
			__atomic_fetch_or(&zone[z / 64], bit, __ATOMIC_SEQ_CST);
			br->cbt_pending++;
			br->cbt_sync = true;
		} else if (__atomic_load_n(&t->pending, __ATOMIC_SEQ_CST)) {
			/* Set, but perhaps by a ring whose sync is still running: sync too. */
			br->cbt_sync = true;
		}
	}
}

/* The period's switch (the ordering above), by one ring at a time. */
static void cbt_period(struct xbd_bring *br, struct xbd_cbt *t)
{
	uint64_t now = br->turn_ns, deadline;
	uint32_t g;
	bool all = true;

	if (!now || now < __atomic_load_n(&t->next_switch_ns, __ATOMIC_RELAXED))
		return;
	if (!__atomic_load_n(&t->next_switch_ns, __ATOMIC_RELAXED)) {
		/* The first marks of this process: its first period begins. */
		__atomic_store_n(&t->next_switch_ns, now + CBT_PERIOD_NS, __ATOMIC_RELAXED);
		return;
	}
	if (pthread_mutex_trylock(&t->switch_lock))
		return;
	if (now < t->next_switch_ns || !__atomic_load_n(&t->marked, __ATOMIC_RELAXED)) {
		/* Nothing marked since the last switch: its intents are cleared already. */
		if (now >= t->next_switch_ns)
			__atomic_store_n(&t->next_switch_ns, now + CBT_PERIOD_NS, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&t->switch_lock);
		return;
	}
	__atomic_store_n(&t->next_switch_ns, now + CBT_PERIOD_NS, __ATOMIC_RELAXED);
	__atomic_store_n(&t->marked, 0, __ATOMIC_RELAXED);
	g = __atomic_load_n(&t->gen, __ATOMIC_RELAXED);
	__atomic_store_n(&t->gen, g + 1, __ATOMIC_SEQ_CST);
	deadline = xbd_mono_ns() + CBT_SWITCH_WAIT_NS;
	for (unsigned int i = 0; i < XBD_CBT_MAX_RINGS; i++) {
		while (__atomic_load_n(&t->ring[i].busy, __ATOMIC_SEQ_CST)) {
			if (xbd_mono_ns() > deadline) {
				all = false;
				break;
			}
			sched_yield();
		}
	}
	/*
	 * A ring still marking under g: its bits may miss this sync, so its
	 * intents stay (marked again: the next switch clears them).
	 */
	if (all && !xbd_cbt_file_sync(t->fd, t->map, t->file_bytes, t->shadow_off)) {
		XBD_STAT_INC(br->base.stats, cbt_syncs);
		memset(t->zone[g & 1], 0, XBD_CBT_ZONE_BYTES);
	} else {
		__atomic_store_n(&t->marked, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&t->switch_lock);
}

void cbt_flush(struct xbd_bring *br)
{
	struct xbd_cbt *t = br->cbt;

	if (!t)
		return;
	if (br->cbt_sync) {
		int err = xbd_cbt_file_sync(t->fd, t->map, t->file_bytes, t->shadow_off);

		XBD_STAT_INC(br->base.stats, cbt_syncs);
		if (err) {
			/* The writes go on; a power loss could now leave a gap: say so. */
			__atomic_store_n(&t->run->failed, 1, __ATOMIC_RELEASE);
			if (!__atomic_exchange_n(&t->said_sync, true, __ATOMIC_RELAXED))
				xbd_log_limited(&br->base.disk->crl, XBD_LOG_ERR, "%s: cannot sync the "
						"changed-block tracking's file: %s", br->base.name,
						strerror(-err));
		}
		if (br->cbt_pending)
			__atomic_sub_fetch(&t->pending, br->cbt_pending, __ATOMIC_RELEASE);
		br->cbt_pending = 0;
		br->cbt_sync = false;
	}
	if (br->cbt_busy) {
		__atomic_store_n(&t->ring[br->base.idx % XBD_CBT_MAX_RINGS].busy, 0, __ATOMIC_RELEASE);
		br->cbt_busy = false;
	}
	cbt_period(br, t);
}
