/*
 * sim/grant.c: version-1 grant tables as Xen enforces them.  Pinning an
 * entry (for a map or a copy) checks it the way Xen's _set_status_v1 does
 * and sets GTF_reading/GTF_writing in the guest's entry, so that the guest
 * cannot end access under a mapping, and releases the pins of a process
 * that died (as gntdev unmaps at exit); the guest side (granting, ending
 * access, allocating references and pages) follows grant_table.h's rules.
 *
 * The grant table is guest memory: a hostile guest may rewrite any entry
 * at any time.  Each entry is read once into locals, updated only with
 * compare-and-swap, and every frame number is bounded by the size of the
 * guest memory file before anything touches it.
 */
#include "config.h"

#include <errno.h>

#include "sim/layout.h"

/* flags and domid of a v1 entry, as one word (Xen cmpxchg's them together). */
typedef uint32_t __attribute__((may_alias)) combo_t;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define COMBO_FLAGS(w) ((uint16_t)((w) & 0xffffu))
#define COMBO_DOMID(w) ((uint16_t)((w) >> 16))
#define COMBO(f, d) ((uint32_t)(f) | ((uint32_t)(d) << 16))
#else
#define COMBO_FLAGS(w) ((uint16_t)((w) >> 16))
#define COMBO_DOMID(w) ((uint16_t)((w) & 0xffffu))
#define COMBO(f, d) (((uint32_t)(f) << 16) | (uint32_t)(d))
#endif

/* Xen gives up on an entry the guest keeps changing under it. */
#define SET_STATUS_RETRIES 5
/* Compare-and-swap loops on words other processes may rewrite at will. */
#define CAS_RETRIES 1000
/* Pin counts stay far from overflow, as Xen's 0x80 checks do. */
#define PIN_MAX 0x7fff

static combo_t *entry_combo(grant_entry_v1_t *e)
{
	return (combo_t *)(void *)e;
}

static void clear_flags(grant_entry_v1_t *e, uint16_t bits)
{
	__atomic_fetch_and(&e->flags, (uint16_t)~bits, __ATOMIC_SEQ_CST);
}

/* Mark the entry in use for mapper, checking it first unless already pinned. */
static int16_t set_status(grant_entry_v1_t *e, bool pinned, bool write, uint32_t mapper)
{
	combo_t *cw = entry_combo(e);
	uint32_t w = __atomic_load_n(cw, __ATOMIC_SEQ_CST);

	for (int retries = 0;; retries++) {
		uint16_t flags = COMBO_FLAGS(w), nflags;

		if (!pinned &&
		    ((flags & (GTF_type_mask | GTF_sub_page)) != GTF_permit_access ||
		     COMBO_DOMID(w) != mapper))
			return GNTST_general_error;
		nflags = flags | GTF_reading;
		if (write) {
			if (flags & GTF_readonly)
				return GNTST_general_error;
			nflags |= GTF_writing;
		}
		if (__atomic_compare_exchange_n(cw, &w, COMBO(nflags, COMBO_DOMID(w)), false,
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			return GNTST_okay;
		if (retries + 1 == SET_STATUS_RETRIES)
			return GNTST_general_error;
	}
}

/*
 * Xen's active entries are guest-writable here (the simulator has no
 * privilege separation): each field is read once into a local, checked,
 * and the frame we hand back is always one of the guest's own pages.
 */
int16_t sim_gnt_pin(struct sim_dom *g, uint32_t mapper, uint32_t ref, bool write,
		    uint32_t *frame)
{
	struct sim_active *act;
	grant_entry_v1_t *e;
	uint16_t rd, wr, adom;
	uint32_t f;
	int16_t st;

	if (ref >= SIM_NR_GRANTS)
		return GNTST_bad_gntref;
	act = &g->xen->active[ref];
	e = &g->gnt->entries[ref];
	rd = __atomic_load_n(&act->rd, __ATOMIC_RELAXED);
	wr = __atomic_load_n(&act->wr, __ATOMIC_RELAXED);
	adom = __atomic_load_n(&act->domid, __ATOMIC_RELAXED);
	f = __atomic_load_n(&act->frame, __ATOMIC_RELAXED);
	if ((rd || wr) && (adom != mapper || rd >= PIN_MAX || wr >= PIN_MAX))
		return GNTST_general_error;
	if ((!rd && !wr) || (write && !wr)) {
		st = set_status(e, rd || wr, write, mapper);
		if (st != GNTST_okay)
			return st;
		if (!rd && !wr) {
			/* The frame is read once, at the first pin, as Xen does. */
			f = __atomic_load_n(&e->frame, __ATOMIC_SEQ_CST);
			if (f >= g->mem_pages) {
				if (write)
					clear_flags(e, GTF_writing);
				clear_flags(e, GTF_reading);
				return GNTST_bad_page;
			}
			__atomic_store_n(&act->frame, f, __ATOMIC_RELAXED);
			__atomic_store_n(&act->domid, (uint16_t)mapper, __ATOMIC_RELAXED);
		}
	}
	if (f >= g->mem_pages)
		return GNTST_bad_page;
	if (write)
		__atomic_store_n(&act->wr, (uint16_t)(wr + 1), __ATOMIC_RELAXED);
	else
		__atomic_store_n(&act->rd, (uint16_t)(rd + 1), __ATOMIC_RELAXED);
	*frame = f;
	return GNTST_okay;
}

void sim_gnt_unpin(struct sim_dom *g, uint32_t ref, bool write)
{
	struct sim_active *act;
	grant_entry_v1_t *e;
	uint16_t rd, wr;

	if (ref >= SIM_NR_GRANTS)
		return;
	act = &g->xen->active[ref];
	e = &g->gnt->entries[ref];
	rd = __atomic_load_n(&act->rd, __ATOMIC_RELAXED);
	wr = __atomic_load_n(&act->wr, __ATOMIC_RELAXED);
	if (write) {
		if (wr)
			wr--;
		__atomic_store_n(&act->wr, wr, __ATOMIC_RELAXED);
		if (!wr)
			clear_flags(e, GTF_writing);
	} else if (rd) {
		rd--;
		__atomic_store_n(&act->rd, rd, __ATOMIC_RELAXED);
	}
	if (!rd && !wr)
		clear_flags(e, GTF_reading);
}

bool sim_gnt_reclaim(struct sim_dom *g, uint32_t ref)
{
	struct sim_active *act;

	if (ref >= SIM_NR_GRANTS)
		return true;
	act = &g->xen->active[ref];
	if (!__atomic_load_n(&act->rd, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&act->wr, __ATOMIC_RELAXED))
		return true;
	/*
	 * Every pinner takes its pin lock before pinning and drops it after
	 * unpinning, both outside gnt_lock: pins with no lock held are a dead
	 * process's.  A live pinner's pins keep a dead one's company until it
	 * unpins (the counts are the domain's, as Xen's are); then they go.
	 */
	if (sim_dom_pin_live(g, ref))
		return false;
	__atomic_store_n(&act->rd, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&act->wr, 0, __ATOMIC_RELAXED);
	clear_flags(&g->gnt->entries[ref], GTF_reading | GTF_writing);
	return true;
}

int sim_gnt_release_pins_of(struct sim_dom *g, uint32_t dead)
{
	int r = sim_lock_take(&g->xen->gnt_lock, SIM_LOCK_TIMEOUT_MS);

	if (r)
		return r;
	for (uint32_t ref = 0; ref < SIM_NR_GRANTS; ref++) {
		struct sim_active *act = &g->xen->active[ref];

		if ((!act->rd && !act->wr) || act->domid != dead)
			continue;
		act->rd = act->wr = 0;
		clear_flags(&g->gnt->entries[ref], GTF_reading | GTF_writing);
	}
	sim_lock_drop(&g->xen->gnt_lock);
	return 0;
}

/* ---- the guest side ---- */

/*
 * Several processes may act as one domain, so the allocators are shared
 * bitmaps claimed bit by bit with compare-and-swap.  Bits are taken in
 * ascending order from the hint, so a batch usually gets adjacent pages,
 * which map with one mmap.
 */
static int bitmap_alloc(uint64_t *map, uint32_t nbits, unsigned int count,
			uint32_t *out, uint32_t *hint)
{
	uint32_t nwords = (nbits + 63) / 64;
	uint32_t start = __atomic_load_n(hint, __ATOMIC_RELAXED) % nwords;
	uint32_t w = start;
	unsigned int got = 0;

	for (uint32_t i = 0; i < nwords && got < count; i++) {
		/* Another process rewriting the word forever must not keep us here. */
		unsigned int races = 0;
		uint64_t v;

		w = (start + i) % nwords;
		v = __atomic_load_n(&map[w], __ATOMIC_RELAXED);
		while (~v && got < count && races++ < CAS_RETRIES) {
			unsigned int bit = (unsigned int)__builtin_ctzll(~v);
			uint32_t idx = w * 64 + bit;

			if (idx >= nbits)
				break;
			if (__atomic_compare_exchange_n(&map[w], &v, v | (1ull << bit), false,
							__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
				out[got++] = idx;
				v |= 1ull << bit;
			}
		}
	}
	__atomic_store_n(hint, w, __ATOMIC_RELAXED);
	if (got < count) {
		for (unsigned int i = 0; i < got; i++)
			__atomic_fetch_and(&map[out[i] / 64], ~(1ull << (out[i] % 64)),
					   __ATOMIC_ACQ_REL);
		return -ENOSPC;
	}
	return 0;
}

static void bitmap_free(uint64_t *map, uint32_t nbits, unsigned int count,
			const uint32_t *idx)
{
	for (unsigned int i = 0; i < count; i++)
		if (idx[i] < nbits)
			__atomic_fetch_and(&map[idx[i] / 64], ~(1ull << (idx[i] % 64)),
					   __ATOMIC_ACQ_REL);
}

int sim_gnt_alloc_refs(struct sim_dom *d, unsigned int count, uint32_t *refs,
		       uint32_t *hint)
{
	return bitmap_alloc(d->gnt->ref_map, SIM_NR_GRANTS, count, refs, hint);
}

void sim_gnt_free_refs(struct sim_dom *d, unsigned int count, const uint32_t *refs)
{
	bitmap_free(d->gnt->ref_map, SIM_NR_GRANTS, count, refs);
}

int sim_mem_alloc_pages(struct sim_dom *d, unsigned int count, uint32_t *pages,
			uint32_t *hint)
{
	return bitmap_alloc(d->gnt->page_map, d->mem_pages, count, pages, hint);
}

void sim_mem_free_pages(struct sim_dom *d, unsigned int count, const uint32_t *pages)
{
	bitmap_free(d->gnt->page_map, d->mem_pages, count, pages);
}

void sim_gnt_grant(struct sim_dom *d, uint32_t ref, uint32_t domid, uint32_t frame,
		   bool readonly)
{
	grant_entry_v1_t *e = &d->gnt->entries[ref];

	/* grant_table.h: domid, frame, write barrier, then flags. */
	__atomic_store_n(&e->domid, (domid_t)domid, __ATOMIC_RELAXED);
	__atomic_store_n(&e->frame, frame, __ATOMIC_RELAXED);
	__atomic_store_n(&e->flags,
			 (uint16_t)(GTF_permit_access | (readonly ? GTF_readonly : 0)),
			 __ATOMIC_RELEASE);
}

int sim_gnt_end(struct sim_dom *d, uint32_t ref)
{
	grant_entry_v1_t *e = &d->gnt->entries[ref];
	uint16_t flags = __atomic_load_n(&e->flags, __ATOMIC_SEQ_CST);
	bool reclaimed = false;

	/* grant_table.h: observe !(reading|writing), then cmpxchg to 0. */
	for (unsigned int races = 0; races < CAS_RETRIES; races++) {
		if ((flags & (GTF_reading | GTF_writing)) && !reclaimed) {
			/*
			 * Xen needs no such step: there, the mapper's exit
			 * unmapped it.  Here the guest's own end of access
			 * finds a dead mapper out (Xen's side, in this
			 * simulator without privilege separation).
			 */
			reclaimed = true;
			if (sim_lock_take(&d->xen->gnt_lock, SIM_LOCK_TIMEOUT_MS))
				return -EBUSY;
			sim_gnt_reclaim(d, ref);
			sim_lock_drop(&d->xen->gnt_lock);
			flags = __atomic_load_n(&e->flags, __ATOMIC_SEQ_CST);
		}
		if (flags & (GTF_reading | GTF_writing))
			return -EBUSY;
		if (__atomic_compare_exchange_n(&e->flags, &flags, 0, false,
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			return 0;
	}
	/* The other side keeps changing the entry: treat it as in use. */
	return -EBUSY;
}
