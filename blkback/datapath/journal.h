/*
 * journal.h: a ring's crash journal, so that xbd-back's own death
 * (SIGKILL, a crash, the OOM killer) costs its guests a pause and no I/O.
 *
 * Why: a blkif response shares its slot with a request.  Response k is
 * written into slot k mod N, which held request k; so the moment a
 * response is written, the ring alone no longer says what request k was.
 * A daemon that dies has written responses it never pushed, and a new
 * daemon cannot tell what the slots between the pushed response producer
 * (rsp_prod) and the request producer (req_prod) hold.  The journal says.
 *
 * What: a small file on tmpfs per ring (/run/xbd/journal on a host, the
 * simulator's directory there), mapped MAP_SHARED: whatever the process
 * stored in it before it died is in the page cache for the next one.  No
 * fsync: this is about the process dying, not the host.  It holds a copy
 * of every request taken from the ring and not yet answered by a pushed
 * response, one entry per request slot of ours (the slot a request keeps
 * from its consumption to the push of its response), and three indexes.
 *
 * Who does what: the control plane (the main process) makes, opens and
 * removes the file, and holds an exclusive flock(2) on it for as long as
 * the ring may run; the ring (in the main process or in a worker, which
 * has no file system) maps it from the fd it is handed, starts it or
 * plans a resume from it, and writes it.  The lock lives as long as any
 * copy of the fd: a restarted daemon waits for it (xbd_journal_file_open),
 * so that it never reads a journal a dying process may still write.  A
 * new file is "fresh" (the ring has not started it): a resume from a
 * fresh journal takes nothing, whatever the ring's indexes are.
 *
 * The ordering, instant by instant (each step of the ring thread is in
 * program order, and a compiler barrier, xbd_journal_order(), keeps the
 * journal's stores before the ring's; a process killed between two
 * instructions has completed every store before the first and none after,
 * and the next process reads the file only once it is dead).  That holds
 * on a weakly ordered CPU too, so the journal needs no hardware barrier
 * on Arm: a killed thread stops at an instruction boundary with every
 * earlier store committed, and the next process reads the journal only
 * after the kernel has seen the dead one exit (the flock a restarted
 * daemon waits for, the supervisor's wait for a dead worker before it
 * starts the next), which orders every store of the dead process before
 * the new one's loads;
 * what the guest may see of the ring meanwhile changes nothing the next
 * process reads (tests/ring/arm64-user.sh runs test-journal on arm64):
 *
 *  Consume request k into slot i:
 *   1. the request is copied out of ring entry k (private req_cons = k+1);
 *   2. entry i := TAKEN, seq k, the copy (xbd_journal_take);
 *   3. consumed := k+1 (once per batch, xbd_journal_consumed).
 *   Killed before 2: consumed is k, entry i FREE: request k is read from
 *   the ring again (its slot holds it: only response k can overwrite it,
 *   and response k is written only after consumed passed k).  Between 2
 *   and 3: entry i is TAKEN with seq >= consumed, which means "not
 *   consumed": it is dropped and the ring read again.  After 3: request k
 *   is in the journal before any response can overwrite its ring slot.
 *
 *  Answer the request of slot i with response r (r = private rsp_prod_pvt):
 *   4. entry i := ANSWERED at r (xbd_journal_answer);
 *   5. the response is written into ring slot r (private rsp_prod_pvt++).
 *   Killed before 4: entry i is TAKEN, the request is executed again.
 *   After 4, before the push: r >= the shared rsp_prod, so the guest has
 *   not seen the response: the request is executed again, and its answer
 *   goes into a slot at or after rsp_prod, which the guest has not read.
 *
 *  Push (publish rsp_prod = p):
 *   6. pushing := p;  7. the shared rsp_prod := p;  8. pushed := p;
 *   9. every entry answered below p := FREE, its slot reusable.
 *   The shared rsp_prod is the truth the guest sees: the next daemon takes
 *   it (after checking it is pushed or pushing: anything else is a ring
 *   that is not ours) and executes again exactly the entries TAKEN, or
 *   ANSWERED at or after it.  Killed between 7 and 9: entries answered
 *   below p are done (the guest saw their responses) and stay done.
 *
 * So at every instant, journal plus ring say exactly which requests were
 * taken and not yet answered by a pushed response: there are consumed -
 * rsp_prod of them, no more and no fewer (xbd_journal_plan checks it), and
 * each is answered exactly once, by the next daemon.  A slot is reused
 * only after step 9, so an unpushed answer is never forgotten behind a
 * new request.  A guest that has not seen a completion cannot depend on
 * its order: the requests are executed again in the order they were
 * consumed, a barrier with its drain and flushes.
 */
#ifndef XBD_BACK_JOURNAL_H
#define XBD_BACK_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ring/ring.h"

#define XBD_JOURNAL_MAGIC 0x314c4e524a444258ull /* "XBDJRNL1" */
#define XBD_JOURNAL_VERSION 1

enum xbd_jstate { XBD_J_FREE = 0, XBD_J_TAKEN = 1, XBD_J_ANSWERED = 2 };

/*
 * A request as the ring carried it (an indirect request's segments are in
 * its indirect pages, read again when it runs again).  Laid out so that a
 * request with one or two segments is one cache line.
 */
struct xbd_jreq {
	uint32_t state;          /* enum xbd_jstate */
	uint32_t seq;            /* its index in the ring: req_cons when it was taken */
	uint32_t rsp;            /* XBD_J_ANSWERED: the index of its response */
	uint8_t operation, raw_operation, indirect, discard_flags;
	uint16_t handle, nr_segments;
	uint32_t pad;
	uint64_t id, sector_number, nr_sectors;
	struct xbd_seg seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
	uint32_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	uint8_t tail_pad[24];
};

/* Which ring a journal belongs to: compared with the frontend's keys before a resume. */
struct xbd_journal_id {
	char type[8];            /* "vbd", "vbd3" */
	uint32_t domid, devid, queue, nr_queues;
	uint32_t abi, nr_pages, remote_port, nr_ents;
	uint32_t refs[XBD_RING_MAX_PAGES];
};

struct xbd_journal_hdr {
	uint64_t magic;
	uint32_t version, ent_size;
	struct xbd_journal_id id;
	uint8_t pad[64 - (16 + sizeof(struct xbd_journal_id)) % 64];
	/* The indexes the ring thread writes, on a cache line of their own. */
	uint32_t consumed;       /* req_cons: requests taken from the ring */
	uint32_t pushing;        /* the rsp_prod about to be published */
	uint32_t pushed;         /* the rsp_prod last published */
	uint32_t fresh;          /* 1: made by the control plane, not started by the ring */
	uint32_t pad2[12];
};

struct xbd_journal {
	struct xbd_journal_hdr *hdr;
	struct xbd_jreq *ents;   /* hdr->id.nr_ents: one per request slot of ours */
	size_t size;
};

/* DIR/TYPE.DOMID.DEVID.QUEUE; -ENAMETOOLONG if it does not fit. */
int xbd_journal_path(char *buf, size_t len, const char *dir, const char *type, uint32_t domid,
		     uint32_t devid, unsigned int queue);
/*
 * Make a fresh journal for the ring id describes (nothing taken; the ring
 * starts it with xbd_journal_start), written under a temporary name and
 * renamed into place, so that a half-made journal is never found.  *fd is
 * the file, locked (see above).
 */
int xbd_journal_file_create(const char *path, const struct xbd_journal_id *id, int *fd);
/*
 * Open the journal at path for a resume, waiting up to wait_ms for the
 * lock a dying process may still hold.  -ENOENT if there is none, -EBUSY
 * if the lock stays held, -EINVAL if it is not a regular file.
 */
int xbd_journal_file_open(const char *path, unsigned int wait_ms, int *fd);
/* Map the journal in fd (which stays the caller's); -EINVAL if it is not one of ours. */
int xbd_journal_map(int fd, struct xbd_journal **out);
/*
 * Start a fresh journal at the ring's response index (requests and
 * responses both at rsp_prod: nothing taken); -EINVAL if j is not fresh.
 */
int xbd_journal_start(struct xbd_journal *j, uint32_t rsp_prod);
/* Whether j is the journal of the ring described by id. */
bool xbd_journal_matches(const struct xbd_journal *j, const struct xbd_journal_id *id);
/*
 * Decide a resume against the ring's shared indexes: which entries to
 * execute again (redo[i] set; *nredo of them, in no order) and which are
 * done.  Rewrites the journal to that plan (done entries FREE, entries to
 * execute again TAKEN, pushed = pushing = rsp_prod).  -EPROTO, and the
 * journal untouched, when journal and ring disagree: rsp_prod neither
 * pushed nor pushing, entries that do not add up to consumed - rsp_prod,
 * indexes out of range.  A fresh journal plans nothing to execute again
 * and is started at rsp_prod.
 */
int xbd_journal_plan(struct xbd_journal *j, uint32_t rsp_prod, uint32_t req_prod, bool *redo,
		     unsigned int *nredo);
/* Unmap j (the file and its fd stay). */
void xbd_journal_close(struct xbd_journal *j);

/* Copy a journal entry back into a request (the ring's form, before indirect pages). */
void xbd_journal_get(const struct xbd_jreq *e, struct xbd_request *r);

/* ---- the ring thread's hot path ---- */

/* Keep the journal's stores before the ring's (see the ordering above). */
static inline void xbd_journal_order(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void xbd_jstore(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

/* Step 2: request seq (as consumed, before its indirect pages are read) in slot i. */
static inline void xbd_journal_take(struct xbd_journal *j, unsigned int i, uint32_t seq,
				    const struct xbd_request *r)
{
	struct xbd_jreq *e = &j->ents[i];
	unsigned int n = r->indirect ? 0 : r->nr_segments;

	if (n > BLKIF_MAX_SEGMENTS_PER_REQUEST)
		n = BLKIF_MAX_SEGMENTS_PER_REQUEST;
	e->seq = seq;
	e->operation = r->operation;
	e->raw_operation = r->raw_operation;
	e->indirect = r->indirect;
	e->discard_flags = r->discard_flags;
	e->handle = r->handle;
	e->nr_segments = r->nr_segments;
	e->id = r->id;
	e->sector_number = r->sector_number;
	e->nr_sectors = r->nr_sectors;
	memcpy(e->seg, r->seg, n * sizeof(e->seg[0]));
	if (r->indirect)
		memcpy(e->indirect_grefs, r->indirect_grefs, sizeof(e->indirect_grefs));
	xbd_journal_order();
	xbd_jstore(&e->state, XBD_J_TAKEN);
}

/* Step 3: every request before index consumed is in the journal. */
static inline void xbd_journal_consumed(struct xbd_journal *j, uint32_t consumed)
{
	xbd_journal_order();
	xbd_jstore(&j->hdr->consumed, consumed);
	xbd_journal_order();
}

/* Step 4: slot i's request is answered by response rsp (written next). */
static inline void xbd_journal_answer(struct xbd_journal *j, unsigned int i, uint32_t rsp)
{
	struct xbd_jreq *e = &j->ents[i];

	xbd_jstore(&e->rsp, rsp);
	xbd_journal_order();
	xbd_jstore(&e->state, XBD_J_ANSWERED);
	xbd_journal_order();
}

/* Step 6, before the shared rsp_prod is written. */
static inline void xbd_journal_pushing(struct xbd_journal *j, uint32_t rsp_prod)
{
	xbd_jstore(&j->hdr->pushing, rsp_prod);
	xbd_journal_order();
}

/* Step 8, after it. */
static inline void xbd_journal_pushed(struct xbd_journal *j, uint32_t rsp_prod)
{
	xbd_journal_order();
	xbd_jstore(&j->hdr->pushed, rsp_prod);
}

/* Step 9: slot i's answer is pushed; the slot may take a new request. */
static inline void xbd_journal_free(struct xbd_journal *j, unsigned int i)
{
	xbd_jstore(&j->ents[i].state, XBD_J_FREE);
}

#endif /* XBD_BACK_JOURNAL_H */
