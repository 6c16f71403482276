/*
 * platform/sim.c: platform.h on the simulator.  This is the per-process
 * half, the part Linux's gntdev, gntalloc and evtchn drivers play on real
 * Xen: it maps granted frames into contiguous memory, remembers what it
 * mapped and shared, caches the domains it talks to, and owns the FIFOs
 * of event channel handles.  The shared "hypervisor" state and its rules
 * are in sim/.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/impl.h"
#include "sim/hypervisor.h"

/* ---- regions this process mapped or shared, by address ---- */

#define HTAB_BITS 12

struct hnode {
	struct hnode *next;
	void *addr;
};

struct htab {
	struct hnode *b[1u << HTAB_BITS];
};

static size_t hbucket(const void *addr)
{
	return (size_t)((((uintptr_t)addr >> SIM_PAGE_SHIFT) * 0x9E3779B97F4A7C15ull) >>
			(64 - HTAB_BITS));
}

static void htab_insert(struct htab *t, struct hnode *n)
{
	size_t b = hbucket(n->addr);

	n->next = t->b[b];
	t->b[b] = n;
}

static struct hnode *htab_remove(struct htab *t, const void *addr)
{
	for (struct hnode **pp = &t->b[hbucket(addr)]; *pp; pp = &(*pp)->next) {
		struct hnode *n = *pp;

		if (n->addr == addr) {
			*pp = n->next;
			return n;
		}
	}
	return NULL;
}

struct map_region {
	struct hnode node;
	unsigned int count;
	bool writable;
	struct sim_dom *d;
	uint32_t refs[];
};

struct share_region {
	struct hnode node;
	unsigned int count;
	uint32_t domid;
	bool writable;
	uint32_t *pages;
	uint32_t refs[];
};

struct sim_platform {
	struct xbd_platform base;
	struct sim_hostmap *h;
	struct sim_dom *self;          /* the domain we act as (one reference) */
	pthread_mutex_t lock;          /* doms[], the tables, nmaps, refs */
	struct sim_dom **doms;         /* per domid: its current incarnation */
	uint16_t *cached;              /* the domids doms[] holds, for sweeping */
	uint32_t ncached;
	struct htab maps;
	struct htab shares;
	uint32_t ref_hint;
	uint32_t page_hint;
};

static struct sim_platform *sp_of(struct xbd_platform *p)
{
	return (struct sim_platform *)p;
}

/* ---- the domain cache ---- */

static void dom_put_locked(struct sim_dom *d)
{
	if (d && --d->refs == 0)
		sim_dom_close(d);
}

/* Drop domid's cache entry (and the cache's reference). */
static void cache_remove_locked(struct sim_platform *sp, uint32_t domid)
{
	struct sim_dom *d;

	if (domid > XBD_SIM_MAX_DOMID || !sp->doms[domid])
		return;
	d = sp->doms[domid];
	for (uint32_t i = 0; i < sp->ncached; i++) {
		if (sp->cached[i] == domid) {
			sp->cached[i] = sp->cached[--sp->ncached];
			break;
		}
	}
	sp->doms[domid] = NULL;
	dom_put_locked(d);
}

static void cache_insert_locked(struct sim_platform *sp, uint32_t domid, struct sim_dom *d)
{
	sp->doms[domid] = d;
	sp->cached[sp->ncached++] = (uint16_t)domid;
	d->refs++;
}

/*
 * Drop every cached domain that no longer runs.  A destroyed guest we
 * stopped talking to would otherwise stay open here (its memory, grant
 * and Xen files: fds, mappings, address space) until its domid was
 * looked up again, which may be never.  Our mappings of it keep their
 * own references, so this frees only what nobody uses.
 */
static void cache_sweep_locked(struct sim_platform *sp)
{
	for (uint32_t i = sp->ncached; i-- > 0;) {
		uint32_t id = sp->cached[i];

		if (!sim_dom_running(sp->h, sp->doms[id]))
			cache_remove_locked(sp, id);
	}
}

/*
 * Drop a reference from dom_get.  When only the cache's own is left and
 * none of its pages is mapped here, nothing in this process talks to the
 * domain any more (a connected device holds its event channel, and with
 * it a reference): forget it, so that a guest whose disks were detached
 * is not kept open here after it dies.  The next lookup opens it again.
 */
static void dom_put(struct sim_platform *sp, struct sim_dom *d)
{
	uint32_t domid;
	bool cached;

	if (!d)
		return;
	pthread_mutex_lock(&sp->lock);
	domid = d->domid;
	cached = sp->doms[domid] == d;
	dom_put_locked(d);
	if (cached && d->refs == 1 && d->nmaps == 0)
		cache_remove_locked(sp, domid);
	pthread_mutex_unlock(&sp->lock);
}

/*
 * A reference to the current incarnation of domid; with running_only,
 * NULL (errno ESRCH) unless it runs.  A destroyed domain drops out of the
 * cache, so its memory is freed once our mappings of it are gone.
 */
static struct sim_dom *dom_get(struct sim_platform *sp, uint32_t domid, bool running_only)
{
	struct sim_host_dom *s;
	struct sim_dom *d;
	uint32_t state, gen;
	int r;

	if (domid > XBD_SIM_MAX_DOMID) {
		errno = ESRCH;
		return NULL;
	}
	s = &sp->h->host->doms[domid];
	pthread_mutex_lock(&sp->lock);
	state = __atomic_load_n(&s->state, __ATOMIC_SEQ_CST);
	gen = __atomic_load_n(&s->gen, __ATOMIC_SEQ_CST);
	cache_sweep_locked(sp);
	d = sp->doms[domid];
	if (d && (d->gen != gen || state != SIM_DOM_RUNNING)) {
		cache_remove_locked(sp, domid);
		d = NULL;
	}
	if (!d) {
		if (state == SIM_DOM_FREE || (running_only && state != SIM_DOM_RUNNING)) {
			pthread_mutex_unlock(&sp->lock);
			errno = ESRCH;
			return NULL;
		}
		r = sim_dom_open(sp->h, domid, &d);
		if (r < 0) {
			pthread_mutex_unlock(&sp->lock);
			errno = -r;
			return NULL;
		}
		d->refs = 1;
		if (sim_dom_running(sp->h, d))
			cache_insert_locked(sp, domid, d);
	} else {
		d->refs++;
	}
	pthread_mutex_unlock(&sp->lock);
	if (running_only && !sim_dom_running(sp->h, d)) {
		dom_put(sp, d);
		errno = ESRCH;
		return NULL;
	}
	return d;
}

/* Forget domid, and every other domain that stopped running. */
static void dom_evict(struct sim_platform *sp, uint32_t domid)
{
	pthread_mutex_lock(&sp->lock);
	cache_remove_locked(sp, domid);
	cache_sweep_locked(sp);
	pthread_mutex_unlock(&sp->lock);
}

static bool self_running(struct sim_platform *sp)
{
	return sim_dom_running(sp->h, sp->self);
}

/* While this process maps any of d's pages, d cannot be freed. */
static int mapper_get(struct sim_platform *sp, struct sim_dom *d)
{
	int r = 0;

	pthread_mutex_lock(&sp->lock);
	if (d->nmaps == 0)
		r = sim_dom_mapper_hold(d);
	if (!r)
		d->nmaps++;
	pthread_mutex_unlock(&sp->lock);
	return r;
}

static void mapper_put(struct sim_platform *sp, struct sim_dom *d)
{
	pthread_mutex_lock(&sp->lock);
	if (--d->nmaps == 0)
		sim_dom_mapper_release(d);
	pthread_mutex_unlock(&sp->lock);
}

/*
 * Our pins of refs of g, as the pin locks show them to every process:
 * taken before pinning, dropped after unpinning, so that a pin with no
 * lock held is a dead process's (sim_gnt_reclaim).
 */
static int pins_get(struct sim_platform *sp, struct sim_dom *g, unsigned int count,
		    const uint32_t *refs)
{
	int r;

	pthread_mutex_lock(&sp->lock);
	r = sim_dom_pins_hold(g, count, refs);
	pthread_mutex_unlock(&sp->lock);
	return r;
}

static void pins_put(struct sim_platform *sp, struct sim_dom *g, unsigned int count,
		     const uint32_t *refs)
{
	pthread_mutex_lock(&sp->lock);
	sim_dom_pins_release(g, count, refs);
	pthread_mutex_unlock(&sp->lock);
}

/*
 * Map frames of fd into one contiguous region: reserve the range, then
 * one MAP_FIXED mmap per run of adjacent frames.
 */
static void *map_frames(int fd, const uint32_t *frames, unsigned int count, int prot)
{
	size_t size = (size_t)count << SIM_PAGE_SHIFT;
	char *base = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			  -1, 0);

	if (base == MAP_FAILED)
		return NULL;
	for (unsigned int i = 0; i < count;) {
		unsigned int j = i + 1;

		while (j < count && frames[j] == frames[j - 1] + 1)
			j++;
		if (mmap(base + ((size_t)i << SIM_PAGE_SHIFT), (size_t)(j - i) << SIM_PAGE_SHIFT,
			 prot, MAP_SHARED | MAP_FIXED, fd,
			 (off_t)frames[i] << SIM_PAGE_SHIFT) == MAP_FAILED) {
			int saved = errno;

			munmap(base, size);
			errno = saved;
			return NULL;
		}
		i = j;
	}
	return base;
}

/* ---- grant maps ---- */

static void unpin_all(struct sim_platform *sp, struct sim_dom *g, unsigned int count,
		      const uint32_t *refs, const int16_t *st, bool write)
{
	if (sim_lock_take(&g->xen->gnt_lock, SIM_LOCK_TIMEOUT_MS))
		return;
	/* If we died meanwhile, our pins were released with us. */
	if (self_running(sp))
		for (unsigned int i = 0; i < count; i++)
			if (!st || st[i] == GNTST_okay)
				sim_gnt_unpin(g, refs[i], write);
	sim_lock_drop(&g->xen->gnt_lock);
}

static void *sim_gnt_map(struct xbd_platform *p, uint32_t domid, unsigned int count,
			 const uint32_t *refs, bool writable, int16_t *status)
{
	struct sim_platform *sp = sp_of(p);
	struct map_region *reg = NULL;
	struct sim_dom *g;
	uint32_t *frames = NULL;
	int16_t *st = status;
	bool failed = false;
	void *addr = NULL;
	int err = EINVAL;

	frames = malloc(count * sizeof(*frames));
	reg = malloc(sizeof(*reg) + count * sizeof(reg->refs[0]));
	if (!st)
		st = malloc(count * sizeof(*st));
	if (!frames || !reg || !st) {
		err = ENOMEM;
		goto out;
	}
	g = dom_get(sp, domid, true);
	if (!g) {
		for (unsigned int i = 0; i < count; i++)
			st[i] = GNTST_bad_domain;
		goto out;
	}
	err = mapper_get(sp, g);
	if (err < 0) {
		err = -err;
		dom_put(sp, g);
		goto out;
	}
	err = pins_get(sp, g, count, refs);
	if (err < 0) {
		err = -err;
		mapper_put(sp, g);
		dom_put(sp, g);
		goto out;
	}
	err = EINVAL;
	/* Its guest may hold the lock forever: fail, as a busy Xen would not. */
	if (sim_lock_take(&g->xen->gnt_lock, SIM_LOCK_TIMEOUT_MS)) {
		for (unsigned int i = 0; i < count; i++)
			st[i] = GNTST_general_error;
		goto fail_mapper;
	}
	/* Checked after our mapper lock is taken: see sim_host_try_finalize. */
	if (!sim_dom_running(sp->h, g) || !self_running(sp)) {
		sim_lock_drop(&g->xen->gnt_lock);
		for (unsigned int i = 0; i < count; i++)
			st[i] = sim_dom_running(sp->h, g) ? GNTST_general_error : GNTST_bad_domain;
		goto fail_mapper;
	}
	for (unsigned int i = 0; i < count; i++) {
		st[i] = sim_gnt_pin(g, p->domid, refs[i], writable, &frames[i]);
		failed |= st[i] != GNTST_okay;
	}
	sim_lock_drop(&g->xen->gnt_lock);
	if (failed) {
		unpin_all(sp, g, count, refs, st, writable);
		goto fail_mapper;
	}
	addr = map_frames(g->mem_fd, frames, count, PROT_READ | (writable ? PROT_WRITE : 0));
	if (!addr) {
		err = errno;
		unpin_all(sp, g, count, refs, NULL, writable);
		for (unsigned int i = 0; i < count; i++)
			st[i] = GNTST_no_space;
		goto fail_mapper;
	}
	reg->node.addr = addr;
	reg->count = count;
	reg->writable = writable;
	reg->d = g;
	memcpy(reg->refs, refs, count * sizeof(reg->refs[0]));
	pthread_mutex_lock(&sp->lock);
	htab_insert(&sp->maps, &reg->node);
	pthread_mutex_unlock(&sp->lock);
	reg = NULL;
	goto out;

fail_mapper:
	pins_put(sp, g, count, refs);
	mapper_put(sp, g);
	dom_put(sp, g);
out:
	free(frames);
	free(reg);
	if (st != status)
		free(st);
	if (!addr)
		errno = err;
	return addr;
}

static int sim_gnt_unmap(struct xbd_platform *p, void *addr, unsigned int count)
{
	struct sim_platform *sp = sp_of(p);
	struct map_region *reg;
	struct sim_dom *g;

	pthread_mutex_lock(&sp->lock);
	reg = (struct map_region *)htab_remove(&sp->maps, addr);
	if (reg && reg->count != count) {
		htab_insert(&sp->maps, &reg->node);
		reg = NULL;
	}
	pthread_mutex_unlock(&sp->lock);
	if (!reg)
		return -EINVAL;
	g = reg->d;
	/* Unmapped first: the granter may reuse the page once it is unpinned. */
	munmap(addr, (size_t)count << SIM_PAGE_SHIFT);
	unpin_all(sp, g, count, reg->refs, NULL, reg->writable);
	pins_put(sp, g, count, reg->refs);
	mapper_put(sp, g);
	if (!sim_dom_running(sp->h, g)) {
		/* We may have been the last to hold a destroyed domain. */
		sim_host_try_finalize(sp->h, g->domid);
	}
	dom_put(sp, g);
	free(reg);
	return 0;
}

/* ---- grant copy ---- */

#define COPY_CHUNK 64

/* Copy segs[0..n), all from one domain, pinning them for the copy only. */
static void copy_run(struct sim_platform *sp, unsigned int n, struct xbd_gnt_copy_seg *segs)
{
	uint32_t frames[COPY_CHUNK], refs[COPY_CHUNK];
	struct sim_dom *g = dom_get(sp, segs[0].domid, true);
	bool self_ok;

	for (unsigned int k = 0; k < n; k++) {
		segs[k].status = GNTST_bad_domain;
		refs[k] = segs[k].ref;
	}
	if (!g)
		return;
	/* A copy is one hypercall on Xen: a process killed in it leaves no pin. */
	if (pins_get(sp, g, n, refs) < 0) {
		for (unsigned int k = 0; k < n; k++)
			segs[k].status = GNTST_general_error;
		goto out;
	}
	if (sim_lock_take(&g->xen->gnt_lock, SIM_LOCK_TIMEOUT_MS)) {
		for (unsigned int k = 0; k < n; k++)
			segs[k].status = GNTST_general_error;
		goto out_pins;
	}
	self_ok = self_running(sp) && sim_dom_running(sp->h, g);
	for (unsigned int k = 0; k < n; k++) {
		struct xbd_gnt_copy_seg *s = &segs[k];

		if ((unsigned int)s->offset + s->len > SIM_PAGE_SIZE)
			s->status = GNTST_bad_copy_arg;
		else if (!self_ok)
			s->status = sim_dom_running(sp->h, g) ? GNTST_general_error : GNTST_bad_domain;
		else
			s->status = sim_gnt_pin(g, sp->base.domid, s->ref, s->to_guest, &frames[k]);
	}
	sim_lock_drop(&g->xen->gnt_lock);
	for (unsigned int k = 0; k < n; k++) {
		struct xbd_gnt_copy_seg *s = &segs[k];
		char *page;

		if (s->status != GNTST_okay || !s->len)
			continue;
		page = (char *)g->mem + ((size_t)frames[k] << SIM_PAGE_SHIFT) + s->offset;
		if (s->to_guest)
			memcpy(page, s->local, s->len);
		else
			memcpy(s->local, page, s->len);
	}
	if (sim_lock_take(&g->xen->gnt_lock, SIM_LOCK_TIMEOUT_MS))
		goto out_pins;
	if (self_running(sp))
		for (unsigned int k = 0; k < n; k++)
			if (segs[k].status == GNTST_okay)
				sim_gnt_unpin(g, segs[k].ref, segs[k].to_guest);
	sim_lock_drop(&g->xen->gnt_lock);
out_pins:
	pins_put(sp, g, n, refs);
out:
	dom_put(sp, g);
}

static int sim_gnt_copy(struct xbd_platform *p, unsigned int count,
			struct xbd_gnt_copy_seg *segs)
{
	struct sim_platform *sp = sp_of(p);

	for (unsigned int i = 0; i < count;) {
		unsigned int j = i + 1;

		while (j < count && j - i < COPY_CHUNK && segs[j].domid == segs[i].domid)
			j++;
		copy_run(sp, j - i, &segs[i]);
		i = j;
	}
	return 0;
}

/* ---- granting our own pages ---- */

static void *sim_gnt_share(struct xbd_platform *p, uint32_t domid, unsigned int count,
			   bool writable, uint32_t *refs)
{
	struct sim_platform *sp = sp_of(p);
	struct sim_dom *self = sp->self;
	struct share_region *reg;
	void *addr;
	int err;

	if (!self_running(sp)) {
		errno = ESRCH;
		return NULL;
	}
	reg = malloc(sizeof(*reg) + 2 * (size_t)count * sizeof(uint32_t));
	if (!reg) {
		errno = ENOMEM;
		return NULL;
	}
	reg->pages = reg->refs + count;
	if (sim_mem_alloc_pages(self, count, reg->pages, &sp->page_hint) < 0) {
		err = ENOMEM;
		goto fail;
	}
	if (sim_gnt_alloc_refs(self, count, reg->refs, &sp->ref_hint) < 0) {
		err = ENOSPC;
		goto fail_pages;
	}
	addr = map_frames(self->mem_fd, reg->pages, count, PROT_READ | PROT_WRITE);
	if (!addr) {
		err = errno;
		goto fail_refs;
	}
	/* Freed pages keep what their last user wrote. */
	memset(addr, 0, (size_t)count << SIM_PAGE_SHIFT);
	for (unsigned int i = 0; i < count; i++)
		sim_gnt_grant(self, reg->refs[i], domid, reg->pages[i], !writable);
	memcpy(refs, reg->refs, count * sizeof(refs[0]));
	reg->node.addr = addr;
	reg->count = count;
	reg->domid = domid;
	reg->writable = writable;
	pthread_mutex_lock(&sp->lock);
	htab_insert(&sp->shares, &reg->node);
	pthread_mutex_unlock(&sp->lock);
	return addr;

fail_refs:
	sim_gnt_free_refs(self, count, reg->refs);
fail_pages:
	sim_mem_free_pages(self, count, reg->pages);
fail:
	free(reg);
	errno = err;
	return NULL;
}

static int sim_gnt_unshare(struct xbd_platform *p, void *addr, unsigned int count)
{
	struct sim_platform *sp = sp_of(p);
	struct sim_dom *self = sp->self;
	struct share_region *reg;

	pthread_mutex_lock(&sp->lock);
	reg = (struct share_region *)htab_remove(&sp->shares, addr);
	if (reg && reg->count != count) {
		htab_insert(&sp->shares, &reg->node);
		reg = NULL;
	}
	pthread_mutex_unlock(&sp->lock);
	if (!reg)
		return -EINVAL;
	for (unsigned int i = 0; i < count; i++) {
		if (sim_gnt_end(self, reg->refs[i]) == 0)
			continue;
		/* All or nothing: grant again what we ended already. */
		for (unsigned int k = 0; k < i; k++)
			sim_gnt_grant(self, reg->refs[k], reg->domid, reg->pages[k], !reg->writable);
		pthread_mutex_lock(&sp->lock);
		htab_insert(&sp->shares, &reg->node);
		pthread_mutex_unlock(&sp->lock);
		return -EBUSY;
	}
	munmap(addr, (size_t)count << SIM_PAGE_SHIFT);
	sim_gnt_free_refs(self, count, reg->refs);
	sim_mem_free_pages(self, count, reg->pages);
	free(reg);
	return 0;
}

/* ---- domains ---- */

static int sim_domain_state(struct xbd_platform *p, uint32_t domid)
{
	struct sim_platform *sp = sp_of(p);
	int state;

	if (domid > XBD_SIM_MAX_DOMID)
		return XBD_DOMAIN_GONE;
	state = (int)__atomic_load_n(&sp->h->host->doms[domid].state, __ATOMIC_SEQ_CST);
	if (state == SIM_DOM_RUNNING) {
		/* Callers poll this for their peers: the moment to sweep. */
		dom_evict(sp, UINT32_MAX);
		return XBD_DOMAIN_RUNNING;
	}
	dom_evict(sp, domid);
	if (state == SIM_DOM_DYING)
		state = sim_host_try_finalize(sp->h, domid);
	if (state < 0)
		return state;
	return state == SIM_DOM_DYING ? XBD_DOMAIN_DYING : XBD_DOMAIN_GONE;
}

/* ---- event channels ---- */

/* An open FIFO of some handle, for waking it. */
struct wake_fd {
	int fd;
	uint32_t slot;
	uint32_t gen;
};

struct sim_lport {
	struct sim_dom *remote;        /* the peer domain, cached for notify */
	struct wake_fd peer;           /* the peer handle's FIFO */
};

struct sim_evtchn {
	struct xbd_evtchn base;
	struct sim_platform *sp;
	struct sim_dom *self;
	uint32_t slot;
	uint32_t gen;
	char path[PATH_MAX];           /* our FIFO */
	struct sim_lport *ports[SIM_NR_PORTS];
	uint32_t list[SIM_NR_PORTS];   /* the ports bound here */
	unsigned int nlist;
	uint32_t queue[SIM_NR_PORTS];  /* delivered, not yet returned */
	unsigned int qhead;
	unsigned int qlen;
};

static struct sim_evtchn *se_of(struct xbd_evtchn *e)
{
	return (struct sim_evtchn *)e;
}

static bool port_owned(struct sim_evtchn *e, uint32_t port)
{
	struct sim_port *rec = &e->self->xen->ports[port];

	return e->ports[port] &&
	       __atomic_load_n(&rec->state, __ATOMIC_ACQUIRE) != SIM_PORT_FREE &&
	       __atomic_load_n(&rec->handle, __ATOMIC_RELAXED) == e->slot &&
	       __atomic_load_n(&rec->hgen, __ATOMIC_RELAXED) == e->gen;
}

/*
 * Write the wake-up byte into handle slot/gen's FIFO.  Every FIFO is
 * opened read-write, by its owner and by those who wake it, so a write
 * never meets a FIFO without readers (no SIGPIPE, even if the owner died).
 */
static int wake(struct sim_evtchn *e, struct wake_fd *w, uint32_t slot, uint32_t gen)
{
	int fd = e->base.fd;

	if (slot != e->slot || gen != e->gen) {
		if (!w)
			return -EINVAL;
		if (w->fd < 0 || w->slot != slot || w->gen != gen) {
			char path[PATH_MAX];
			struct stat st;

			if (w->fd >= 0)
				close(w->fd);
			sim_evt_handle_path(e->sp->h, slot, gen, path, sizeof(path));
			w->fd = open(path, O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
			w->slot = slot;
			w->gen = gen;
			/* Slot and gen come from shared memory: wake only a FIFO. */
			if (w->fd >= 0 && (fstat(w->fd, &st) < 0 || !S_ISFIFO(st.st_mode))) {
				close(w->fd);
				w->fd = -1;
				errno = ENOENT;
			}
			if (w->fd < 0) {
				int r = -errno;

				/* Gone (closed meanwhile) is no error; anything else is. */
				sim_evt_disarm(e->sp->h->host, slot);
				return r == -ENOENT ? 0 : r;
			}
		}
		fd = w->fd;
	}
	while (write(fd, "", 1) < 0) {
		if (errno == EINTR)
			continue;
		/* A full FIFO already wakes its reader. */
		return errno == EAGAIN ? 0 : -errno;
	}
	return 0;
}

/* Mark rec pending and wake its handle if it must be. */
static int raise_port(struct sim_evtchn *e, struct sim_port *rec, struct wake_fd *w)
{
	uint32_t slot, gen;

	if (!sim_evt_set_pending(rec))
		return 0;
	slot = __atomic_load_n(&rec->handle, __ATOMIC_ACQUIRE);
	gen = __atomic_load_n(&rec->hgen, __ATOMIC_ACQUIRE);
	if (!sim_evt_arm(e->sp->h->host, slot, gen))
		return 0;
	return wake(e, w, slot, gen);
}

static int lport_add(struct sim_evtchn *e, uint32_t port, struct sim_dom *remote)
{
	struct sim_lport *lp = calloc(1, sizeof(*lp));

	if (!lp)
		return -ENOMEM;
	lp->remote = remote;
	lp->peer.fd = -1;
	e->ports[port] = lp;
	e->list[e->nlist++] = port;
	return 0;
}

static void lport_del(struct sim_evtchn *e, uint32_t port)
{
	struct sim_lport *lp = e->ports[port];
	unsigned int k = 0;

	if (!lp)
		return;
	dom_put(e->sp, lp->remote);
	if (lp->peer.fd >= 0)
		close(lp->peer.fd);
	free(lp);
	e->ports[port] = NULL;
	for (unsigned int i = 0; i < e->nlist; i++) {
		if (e->list[i] == port) {
			e->list[i] = e->list[--e->nlist];
			break;
		}
	}
	for (unsigned int i = e->qhead; i < e->qlen; i++)
		if (e->queue[i] != port)
			e->queue[e->qhead + k++] = e->queue[i];
	e->qlen = e->qhead + k;
}

/* Close a port of ours in the shared table; the peer's becomes unbound. */
static void port_close(struct sim_evtchn *e, uint32_t port)
{
	for (int tries = 0; tries < 8; tries++) {
		struct sim_dom *remote = NULL;
		uint32_t state, rdom, rport;
		int r;

		sim_evt_peer(e->self, port, &state, &rdom, &rport);
		if (state == SIM_PORT_INTERDOMAIN)
			remote = dom_get(e->sp, rdom, false);
		r = sim_evt_close(e->self, port, remote,
				  state == SIM_PORT_INTERDOMAIN ? rdom : UINT32_MAX);
		dom_put(e->sp, remote);
		if (r != -EAGAIN)
			return;
	}
}

static void sim_evtchn_close(struct xbd_evtchn *xe)
{
	struct sim_evtchn *e = se_of(xe);

	while (e->nlist) {
		uint32_t port = e->list[e->nlist - 1];

		if (port_owned(e, port))
			port_close(e, port);
		lport_del(e, port);
	}
	sim_evt_handle_free(e->sp->h->host, e->slot, e->gen);
	unlink(e->path);
	close(e->base.fd);
	dom_put(e->sp, e->self);
	free(e);
}

static int sim_alloc_unbound(struct xbd_evtchn *xe, uint32_t remote_domid)
{
	struct sim_evtchn *e = se_of(xe);
	int port, r;

	if (remote_domid >= DOMID_FIRST_RESERVED && remote_domid != DOMID_SELF)
		return -EINVAL;
	port = sim_evt_alloc_unbound(e->sp->h, e->self, remote_domid, e->slot, e->gen);
	if (port < 0)
		return port;
	r = lport_add(e, (uint32_t)port, NULL);
	if (r) {
		port_close(e, (uint32_t)port);
		return r;
	}
	return port;
}

static int sim_bind_interdomain(struct xbd_evtchn *xe, uint32_t remote_domid,
				uint32_t remote_port)
{
	struct sim_evtchn *e = se_of(xe);
	struct sim_dom *remote;
	int port, r;

	if (remote_domid == DOMID_SELF)
		remote_domid = e->self->domid;
	remote = dom_get(e->sp, remote_domid, true);
	if (!remote)
		return -ESRCH;
	port = sim_evt_bind_interdomain(e->sp->h, e->self, remote, remote_port, e->slot, e->gen);
	if (port < 0) {
		dom_put(e->sp, remote);
		return port;
	}
	r = lport_add(e, (uint32_t)port, remote);
	if (r) {
		port_close(e, (uint32_t)port);
		dom_put(e->sp, remote);
		return r;
	}
	/* Xen: the peer may have notified before we bound; assume it did. */
	raise_port(e, &e->self->xen->ports[port], NULL);
	return port;
}

static int sim_unbind(struct xbd_evtchn *xe, uint32_t port)
{
	struct sim_evtchn *e = se_of(xe);

	if (port >= SIM_NR_PORTS)
		return -EINVAL;
	if (!e->ports[port])
		return -ENOTCONN;
	if (port_owned(e, port))
		port_close(e, port);
	lport_del(e, port);
	return 0;
}

static int sim_notify(struct xbd_evtchn *xe, uint32_t port)
{
	struct sim_evtchn *e = se_of(xe);
	struct sim_host *host = e->sp->h->host;
	struct sim_lport *lp;
	struct sim_dom *r;
	struct sim_port *rrec;
	uint32_t state, rdom, rport;

	if (port >= SIM_NR_PORTS)
		return -EINVAL;
	lp = e->ports[port];
	if (!lp || !port_owned(e, port))
		return -ENOTCONN;
	sim_evt_peer(e->self, port, &state, &rdom, &rport);
	/* Unbound (peer closed, died, or not bound yet): Xen drops it. */
	if (state != SIM_PORT_INTERDOMAIN || rdom > XBD_SIM_MAX_DOMID ||
	    rport == 0 || rport >= SIM_NR_PORTS)
		return 0;
	r = lp->remote;
	if (!r || r->domid != rdom ||
	    __atomic_load_n(&host->doms[rdom].gen, __ATOMIC_RELAXED) != r->gen) {
		dom_put(e->sp, r);
		r = lp->remote = dom_get(e->sp, rdom, false);
		if (!r)
			return 0;
	}
	rrec = &r->xen->ports[rport];
	if (__atomic_load_n(&rrec->state, __ATOMIC_ACQUIRE) != SIM_PORT_INTERDOMAIN ||
	    __atomic_load_n(&rrec->remote_dom, __ATOMIC_RELAXED) != e->self->domid ||
	    __atomic_load_n(&rrec->remote_port, __ATOMIC_RELAXED) != port)
		return 0;
	return raise_port(e, rrec, &lp->peer);
}

static int sim_pending(struct xbd_evtchn *xe)
{
	struct sim_evtchn *e = se_of(xe);
	char buf[16];
	ssize_t n;
	int port;

	if (e->qhead < e->qlen)
		return (int)e->queue[e->qhead++];
	e->qhead = e->qlen = 0;
	n = read(e->base.fd, buf, sizeof(buf));
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	/*
	 * Re-arm the doorbell before looking: a notify that sets a port
	 * pending after our scan then sees it clear and rings again.
	 */
	sim_evt_disarm(e->sp->h->host, e->slot);
	for (unsigned int i = 0; i < e->nlist; i++) {
		uint32_t p = e->list[i];
		uint32_t *pm = &e->self->xen->ports[p].pm;
		uint32_t v = __atomic_load_n(pm, __ATOMIC_SEQ_CST);

		if (!port_owned(e, p))
			continue;
		/* Deliver: pending and unmasked -> not pending, masked. */
		while ((v & (SIM_EVT_PENDING | SIM_EVT_MASKED)) == SIM_EVT_PENDING) {
			if (__atomic_compare_exchange_n(pm, &v, (v & ~SIM_EVT_PENDING) | SIM_EVT_MASKED,
							false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
				e->queue[e->qlen++] = p;
				break;
			}
		}
	}
	if (!e->qlen)
		return -EAGAIN;
	port = (int)e->queue[e->qhead++];
	/* More to return: keep the fd readable for the caller's poll. */
	if (e->qhead < e->qlen && sim_evt_arm(e->sp->h->host, e->slot, e->gen))
		wake(e, NULL, e->slot, e->gen);
	return port;
}

static int sim_unmask(struct xbd_evtchn *xe, uint32_t port)
{
	struct sim_evtchn *e = se_of(xe);
	uint32_t *pm, v;

	if (port >= SIM_NR_PORTS)
		return -EINVAL;
	if (!port_owned(e, port))
		return -ENOTCONN;
	pm = &e->self->xen->ports[port].pm;
	v = __atomic_fetch_and(pm, ~SIM_EVT_MASKED, __ATOMIC_SEQ_CST);
	/* Notified while masked: deliver it again. */
	if ((v & (SIM_EVT_PENDING | SIM_EVT_MASKED)) == (SIM_EVT_PENDING | SIM_EVT_MASKED) &&
	    sim_evt_arm(e->sp->h->host, e->slot, e->gen))
		return wake(e, NULL, e->slot, e->gen);
	return 0;
}

static const struct xbd_evtchn_ops sim_evtchn_ops = {
	.close = sim_evtchn_close,
	.alloc_unbound = sim_alloc_unbound,
	.bind_interdomain = sim_bind_interdomain,
	.unbind = sim_unbind,
	.notify = sim_notify,
	.pending = sim_pending,
	.unmask = sim_unmask,
};

static int sim_evtchn_open(struct xbd_platform *p, struct xbd_evtchn **out)
{
	struct sim_platform *sp = sp_of(p);
	struct sim_evtchn *e;
	char old[PATH_MAX];
	int r;

	if (!self_running(sp))
		return -ESRCH;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->sp = sp;
	e->base.ops = &sim_evtchn_ops;
	r = sim_evt_handle_alloc(sp->h->host, p->domid, &e->slot, &e->gen);
	if (r) {
		free(e);
		return r;
	}
	/* A slot taken over from a dead owner: its FIFO is garbage. */
	sim_evt_handle_path(sp->h, e->slot, e->gen - 1, old, sizeof(old));
	unlink(old);
	sim_evt_handle_path(sp->h, e->slot, e->gen, e->path, sizeof(e->path));
	unlink(e->path);
	if (mkfifo(e->path, 0600) < 0) {
		r = -errno;
		goto fail;
	}
	/* Its peers wake it whatever their uid (sim/hypervisor.h). */
	chmod(e->path, 0666);
	/* Read-write: never EOF, and readable (level) while a byte waits. */
	e->base.fd = open(e->path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (e->base.fd < 0) {
		r = -errno;
		unlink(e->path);
		goto fail;
	}
	pthread_mutex_lock(&sp->lock);
	e->self = sp->self;
	e->self->refs++;
	pthread_mutex_unlock(&sp->lock);
	*out = &e->base;
	return 0;
fail:
	sim_evt_handle_free(sp->h->host, e->slot, e->gen);
	free(e);
	return r;
}

/* ---- the platform ---- */

static void sim_close(struct xbd_platform *p)
{
	struct sim_platform *sp = sp_of(p);

	/* Whatever the caller left mapped or shared goes with us. */
	for (size_t b = 0; b < (1u << HTAB_BITS); b++) {
		while (sp->maps.b[b]) {
			struct map_region *reg = (struct map_region *)sp->maps.b[b];

			sim_gnt_unmap(p, reg->node.addr, reg->count);
		}
		while (sp->shares.b[b]) {
			struct share_region *reg = (struct share_region *)sp->shares.b[b];

			if (sim_gnt_unshare(p, reg->node.addr, reg->count) < 0) {
				/* Still mapped by a peer: leave the grant, drop our view. */
				htab_remove(&sp->shares, reg->node.addr);
				munmap(reg->node.addr, (size_t)reg->count << SIM_PAGE_SHIFT);
				free(reg);
			}
		}
	}
	for (uint32_t id = 0; id <= XBD_SIM_MAX_DOMID; id++)
		if (sp->doms[id])
			dom_put_locked(sp->doms[id]);
	dom_put_locked(sp->self);
	free(sp->doms);
	free(sp->cached);
	sim_host_close(sp->h);
	pthread_mutex_destroy(&sp->lock);
	free(sp);
}

static int sim_evtchn_reclaim(struct xbd_platform *p, uint32_t remote_domid,
			      uint32_t remote_port)
{
	struct sim_platform *sp = sp_of(p);
	struct sim_dom *remote = dom_get(sp, remote_domid, true);
	int r;

	if (!remote)
		return -ESRCH;
	r = sim_evt_reclaim(sp->h, sp->self, remote, remote_port);
	dom_put(sp, remote);
	return r;
}

static const struct xbd_platform_ops sim_ops = {
	.name = "sim",
	.close = sim_close,
	.gnt_map = sim_gnt_map,
	.gnt_unmap = sim_gnt_unmap,
	.gnt_copy = sim_gnt_copy,
	.gnt_share = sim_gnt_share,
	.gnt_unshare = sim_gnt_unshare,
	.evtchn_open = sim_evtchn_open,
	.domain_state = sim_domain_state,
	.evtchn_reclaim = sim_evtchn_reclaim,
};

int xbd_platform_sim_open(const char *dir, uint32_t domid, struct xbd_platform **out)
{
	struct sim_platform *sp;
	int r;

	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	pthread_mutex_init(&sp->lock, NULL);
	sp->base.ops = &sim_ops;
	sp->base.domid = domid;
	sp->doms = calloc(XBD_SIM_MAX_DOMID + 1, sizeof(sp->doms[0]));
	sp->cached = calloc(XBD_SIM_MAX_DOMID + 1, sizeof(sp->cached[0]));
	if (!sp->doms || !sp->cached) {
		r = -ENOMEM;
		goto fail;
	}
	r = sim_host_open(dir, &sp->h);
	if (r)
		goto fail;
	sp->self = dom_get(sp, domid, true);
	if (!sp->self) {
		r = -errno;
		goto fail;
	}
	sp->page_hint = (uint32_t)getpid();
	*out = &sp->base;
	return 0;
fail:
	for (uint32_t id = 0; sp->doms && id <= XBD_SIM_MAX_DOMID; id++)
		dom_put_locked(sp->doms[id]);
	if (sp->h)
		sim_host_close(sp->h);
	free(sp->doms);
	free(sp->cached);
	pthread_mutex_destroy(&sp->lock);
	free(sp);
	return r;
}
