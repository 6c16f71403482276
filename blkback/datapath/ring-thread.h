/*
 * ring-thread.h: a ring served by a thread of this process (ring-impl.h's
 * struct xbd_ring, embedded first), private to the data path: its
 * requests and the lists their states put them on, its grants, its
 * engine queue, its polling and its journal, and what the files that
 * serve it call of each other:
 *
 *   ring-thread.c  its start, its thread's loop, its stop (xbd_ring_here)
 *   ring-poll.c    the thread's polling and its sleep
 *   ring-round.c   a round: consume, submit, complete, reap, push
 *   cbw.c          copy-before-write: a view's blocks copied aside before a write
 *   grant-batch.c  a batch's grants: mapped, cached or copied, one call a batch
 *   requests.c     a request's moves and its end (answered, refused, released)
 *   cbt.c          changed-block tracking: a write's blocks marked before it goes out
 *   grant-cache.c  the persistent grants and the mappings that wait out the grace
 *   ring-clock.c   the thread's clock
 *
 * Each calls only those below it.
 *
 * Nothing outside datapath/ includes it (tests/build/layering.sh).
 */
#ifndef XBD_BACK_RING_THREAD_H
#define XBD_BACK_RING_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "blkback/datapath/cbt.h"
#include "blkback/datapath/grant-cache.h"
#include "blkback/datapath/journal.h"
#include "blkback/datapath/ring-impl.h"
#include "blkback/datapath/stats.h"
#include "common/clock.h"

/*
 * A request slot's life: req->state is the truth, and the list a slot is
 * on follows from it (every slot is on at most one: they share req->next).
 * The one place it changes is req_move (requests.c), which checks the
 * edge, takes the slot off its old list (always at that list's head),
 * puts it on the new one, and writes the journal's entry with it
 * (journal.h: TAKEN, ANSWERED, FREE).
 *
 *   state         where the slot is                  how it gets there
 *   BK_FREE       br->free                           ring_push published its answer
 *   BK_REDO       br->redo_head (oldest first)       a resume: the journal had taken
 *                                                    it and the guest saw no answer
 *   BK_TAKEN      br->batch, on no list              consumed from the ring (or from
 *                                                    redo) by this round's consume
 *   BK_DRAINING   br->barrier, on no list            a barrier, waiting for every
 *                                                    request before it to complete
 *   BK_QUEUED     br->submit_head .. submit_tail     prepared, waiting for the engine
 *   BK_INFLIGHT   in the engine (br->inflight)       submitted
 *   BK_COPYOUT    br->copyout                        a grant-copy read, its data to
 *                                                    copy to the guest
 *   BK_DONE       req->region->finished              finished, answered once its
 *                                                    batch mapping is unmapped
 *   BK_ANSWERED   br->answered_head .. _tail         its response written (req_respond,
 *                                                    the one place a request ends),
 *                                                    until ring_push publishes it: its
 *                                                    journal entry must outlive an
 *                                                    unpushed answer
 *
 * Legal edges: FREE -> REDO; FREE or REDO -> TAKEN; TAKEN -> DRAINING or
 * QUEUED; DRAINING or INFLIGHT -> QUEUED (its next step, below); QUEUED ->
 * INFLIGHT; INFLIGHT -> COPYOUT; QUEUED or INFLIGHT -> DONE; any of TAKEN
 * to DONE -> ANSWERED; ANSWERED -> FREE.  br->barrier is the barrier from
 * DRAINING until it is finished (DONE or ANSWERED): nothing is consumed
 * meanwhile.
 */
enum bk_req_state {
	BK_FREE = 0,
	BK_REDO,
	BK_TAKEN,
	BK_DRAINING,
	BK_QUEUED,
	BK_INFLIGHT,
	BK_COPYOUT,
	BK_DONE,
	BK_ANSWERED,
};

/*
 * Which of its engine operations a QUEUED or INFLIGHT request is at; its
 * next one, once this one succeeded, is step_next's (ring-round.c).  Most
 * requests have one (OP).  A durable write where fua-mode is fdatasync has
 * two (OP_SYNC, then SYNC).  A barrier drains (BK_DRAINING), flushes
 * (PREFLUSH, unless cache is unsafe), then writes its data, if it has any,
 * as a durable write (OP, or OP_SYNC and SYNC).
 */
enum bk_req_step {
	BK_STEP_OP = 0,          /* its own operation (prep_io), its last */
	BK_STEP_OP_SYNC,         /* its own operation, a durable write: a flush follows */
	BK_STEP_SYNC,            /* that flush */
	BK_STEP_PREFLUSH,        /* a barrier's flush before its write */
	BK_STEP_CBW,             /* a view's blocks read to be copied aside (cbw.c) before
				  * its write or discard; then that operation, from the start */
};

/* One consumed request from copy to response. */
struct bk_req {
	struct xbd_request r;
	struct xbd_io io;
	enum bk_req_state state; /* the truth (above): only req_move writes it */
	enum bk_req_step step;   /* QUEUED or INFLIGHT: which of its operations */
	int16_t status;          /* DONE: the answer it gets once unmapped */
	uint64_t consumed_ns;    /* accepted at (now_ns clock), for its latency; 0: refused */
	bool redone;             /* taken from the journal's redo list (a resume), not the ring */
	bool thr_paid;           /* its cost taken by the disk's limiter (throttle.h) */
	uint64_t thr_since;      /* the limiter first held it then (ring clock), or 0 */
	bool cbt_counted;        /* a write or discard counted in its ring's inflight (cbt.c) */
	bool cbt_held;           /* held back by a checkpoint's drained section (counted once) */
	void *cbw_buf;           /* BK_STEP_CBW: the blocks read, to be copied aside */
	uint64_t cbw_first;      /* ... the first of them */
	unsigned int cbw_n;      /* ... how many */
	struct iovec cbw_iov;
	struct bk_region *region;
	struct bk_pgrant **pg;   /* nr_segments persistent grants, or NULL */
	void *bounce;            /* grant-copy buffer, nr_segments pages */
	void *ind;               /* copied indirect pages */
	struct iovec *iov;
	struct bk_req *next;     /* the list its state puts it on (above) */
};

/* Adaptive polling state of one event source. */
struct bk_poll {
	uint64_t ns;
};

struct xbd_bring {
	struct xbd_ring base;    /* what every ring has (ring-impl.h): its disk, params, life, report */
	/* shared ring */
	void *sring;
	struct xring ring;
	/* event channel */
	struct xbd_evtchn *evtchn;
	int port;
	/* storage */
	struct xbd_queue *q;
	/* crash journal (journal.h), or NULL when journaling is off */
	struct xbd_journal *jr;
	struct bk_req *redo_head; /* requests it had taken and not answered, oldest first (BK_REDO) */
	/* thread */
	pthread_t thread;
	int stop_fd;             /* written by xbd_ring_request_stop after base.stop */
	int epfd;
	/* requests */
	struct bk_req *slots;
	unsigned int nslots;
	struct bk_req **batch;   /* nslots: this round's consumed requests */
	unsigned int segmax;     /* most segments one request can carry here */
	struct xbd_gnt_copy_seg *cseg; /* grant copy segments for one batch (BK_BATCH_SEGS) */
	uint32_t *mrefs;         /* grant refs for one batch map (BK_BATCH_SEGS) */
	int16_t *mstatus;
	struct bk_pgrant **pgs;  /* persistent grants only: segmax per slot */
	struct xbd_io **ios;     /* nslots: one io_submit batch */
	unsigned int depth;      /* most ios in flight in the engine */
	bool starved;            /* consume stopped for bounce pages or retired mappings */
	bool sync_io;            /* the last io_submit's I/O had completed on return */
	bool epoll_only;         /* the engine cannot wait for the ring thread: epoll_wait */
	/* The disk's tracking as this round sees it (cbt.c), or NULL, and this batch's marking. */
	struct xbd_cbt *cbt;
	bool cbt_busy;           /* marking under cbt_gen (cbt.c: the period's switch waits) */
	bool cbt_sync;           /* a zone intent of this batch must be durable before it goes */
	uint32_t cbt_gen;
	uint32_t cbt_pending;    /* zone intents this batch set (struct xbd_cbt's pending) */
	bool throttled;          /* the submit queue's head waits for the disk's limiter ... */
	uint64_t throttle_due;   /* ... until then (ring clock) */
	/* grant copy: the ring's bounce pages, allocated once, reused */
	char *bpool;
	uint16_t *bpool_free;    /* indexes of free pages */
	unsigned int bpool_nfree;
	/* The requests' lists and counts: struct bk_req's states say which (req_move). */
	struct bk_req *copyout;  /* BK_COPYOUT: grant-copy reads waiting to be copied to the guest */
	struct bk_req *free;     /* BK_FREE */
	struct bk_req *answered_head, *answered_tail; /* BK_ANSWERED: responses written, not yet pushed */
	struct bk_req *submit_head, *submit_tail; /* BK_QUEUED */
	unsigned int inflight;   /* BK_INFLIGHT */
	struct bk_req *barrier;  /* a barrier from BK_DRAINING to its end: consume nothing more */
	struct bk_gcache gcache;
	unsigned int pg_pinned;  /* pages mapped for persistent grants, cached or in use */
	struct bk_retired *retired_head, *retired_tail; /* unmaps waiting out the grace */
	unsigned int pg_retired; /* pages on that list */
	uint64_t last_done_ns;   /* when a reap last found completions */
	/*
	 * The latest clock read since the last push (0: none): a wake-up, a
	 * consume, a reap that found completions, a poll that found work.
	 * The consume after a wake-up takes it as its time, and so does a
	 * reap before any consume (what it finds completed before the
	 * wake-up); ring_push stamps the responses it publishes with it.  Each
	 * saves a clock read: in a PV dom0 every clock_gettime is a system
	 * call (Xen's clocksource has no vDSO page), several per request at QD1.
	 */
	uint64_t turn_ns;
	bool turn_woke;          /* turn_ns is a wake-up's, and nothing was consumed since */
	uint64_t clock_ns;       /* the ring thread's latest clock read (ring-clock.c) */
	bool clock_turn;         /* ... made since it last woke */
	struct xbd_limits lim;   /* this batch's copy of the device limits */
	struct bk_poll poll_ring, poll_io;
	/*
	 * Spurious notifications (a wake-up with no request behind it): after
	 * the second in a row the port stays masked for a growing delay, as
	 * Linux's "lateeoi" handling does since XSA-332, so a guest that only
	 * notifies cannot keep a ring thread busy.
	 */
	uint64_t consumed;       /* requests consumed since connect */
	uint64_t wake_consumed;  /* `consumed` at the last ring wake-up */
	unsigned int spurious;   /* spurious wake-ups in a row */
	int masked_port;         /* port left masked, or -1 */
	uint64_t unmask_at;      /* when to unmask it (now_ns clock) */
	struct xbd_lat_pending lat; /* responses written since the last push (stats.h) */
};

/*
 * Segments (data pages and indirect pages) one consumed batch may carry;
 * the per-batch arrays (grant copy segments, map references) are sized
 * for it rather than for every slot at 256 segments (8 MB a ring at
 * order 4).  4 MiB of data a batch still fills any disk.
 */
#define BK_BATCH_SEGS 1024

/*
 * A disk's tracking in the process that runs its rings (cbt.h): the
 * tracking file and the view file mapped, their layout, and how the
 * disk's rings coordinate (cbt.c says why each step is ordered as it is).
 */
struct xbd_cbt {
	int fd, vfd;             /* this process's own copies */
	char *map;
	size_t map_len;
	struct xbd_cbt_run *run; /* shared with the control plane */
	uint64_t *zone[2];       /* the zone intents, by the period's parity */
	unsigned int gran_shift, zone_shift;
	uint64_t nblocks, bitmap_bytes, file_bytes, shadow_off;
	uint32_t nslots;
	/* The view (cbw.c), or NULL. */
	char *vmap;
	size_t vmap_len;
	struct xbd_cbt_view *view;
	uint64_t *table;
	char *vdata;
	/* The disk's rings in this process. */
	uint32_t gen;            /* atomic: the period; intents go to zone[gen & 1] */
	uint32_t pending;        /* atomic: intents set and not yet synced */
	uint32_t marked;         /* atomic: something was marked since the last switch */
	uint64_t next_switch_ns; /* atomic */
	pthread_mutex_t switch_lock;
	pthread_mutex_t shadow_lock; /* test builds: the shadow copy (xbd_cbt_file_sync) */
	bool said_sync;          /* a failed sync was logged */
	bool said_view;          /* a failed view was logged */
	struct {
		uint32_t busy;   /* marking: a period's switch waits for it */
		uint32_t pad[15];
	} ring[XBD_CBT_MAX_RINGS];
};

static inline struct xbd_platform *xbd_ring_plat(const struct xbd_bring *br)
{
	return br->base.disk->host->plat;
}

/* ---- requests.c ---- */

/* The one place a request's state changes (the legal edges: the table above). */
void req_move(struct xbd_bring *br, struct bk_req *req, enum bk_req_state to);
/* Its slot's index. */
unsigned int req_slot(const struct xbd_bring *br, const struct bk_req *req);
/* Whether its response is written: the batch's steps pass it by. */
bool req_answered(const struct bk_req *req);
/* Answer it: the one place a request ends. */
void req_respond(struct xbd_bring *br, struct bk_req *req, int16_t status);
/* Refuse it: validation said e (counted, one rate-limited line, answered). */
void req_reject(struct xbd_bring *br, struct bk_req *req, enum xbd_req_error e);
/* Refuse it: grant ref was not usable (status st). */
void req_grant_fail(struct xbd_bring *br, struct bk_req *req, uint32_t ref, int st);
/* Release its grants; answer it now, or once its batch mapping is unmapped. */
void req_finish(struct xbd_bring *br, struct bk_req *req, int16_t status);
#ifdef XBD_TEST_HOOKS
/*
 * XBD_TEST_CRASH=POINT[:N]: SIGKILL at the Nth time a ring thread reaches
 * POINT; XBD_TEST_CRASH_WORKER=POINT[:N]: the same, counting only rings
 * that are not a resume, so that a worker dies there and its successor
 * (which resumes) does not (requests.c).
 */
void ring_crash_point(const struct xbd_bring *br, const char *point);
#define CRASH_POINT(br, point) ring_crash_point(br, point)
#else
#define CRASH_POINT(br, point) do { (void)(br); } while (0)
#endif

/* ---- cbt.c ---- */

/*
 * A write or discard about to go to the engine (or its copy's read): true
 * when it may (it is counted in its ring's inflight until it is
 * answered), false while a checkpoint's drained section holds writes
 * back (br->throttled, a recheck soon).  *now: as throttle_pass's.
 */
bool cbt_admit(struct xbd_bring *br, struct bk_req *req, uint64_t *now);
/* Its blocks marked changed, its zones' intents set (made durable by cbt_flush). */
void cbt_mark(struct xbd_bring *br, struct bk_req *req);
/* Before the engine gets what was marked: the intents durable; the period's switch when due. */
void cbt_flush(struct xbd_bring *br);
/* It is answered: no longer counted. */
void cbt_done(struct xbd_bring *br, struct bk_req *req);
/* A ring starts (or stops) with nothing counted. */
void cbt_ring_reset(struct xbd_bring *br);

/* ---- ring-round.c ---- */

/* One round of the ring: take, check, grant and queue a batch; how many were taken, or -errno. */
int ring_consume(struct xbd_bring *br);
/* Hand the queued requests to the engine (as the disk's limits allow). */
void ring_submit(struct xbd_bring *br);
/* Its current operation (or a barrier's drain) completed with result: on to the next, or done. */
void req_complete(struct xbd_bring *br, struct bk_req *req, int result);
/* Collect completions in batches; how many. */
unsigned int ring_reap(struct xbd_bring *br);
/* Publish the written responses and free their slots. */
void ring_push(struct xbd_bring *br);
/* Set the in_flight gauge from the ring's indexes (stats.h). */
void ring_count_in_flight(struct xbd_bring *br);

/* ---- cbw.c ---- */

/*
 * A write or discard about to go to the engine: when the disk's view
 * still needs blocks it overwrites, its io becomes the read of the first
 * run of them (req->step BK_STEP_CBW), submitted in its place.
 */
void cbw_check(struct xbd_bring *br, struct bk_req *req);
/* That read completed with result: the blocks copied aside (or the view failed). */
void cbw_done(struct xbd_bring *br, struct bk_req *req, int result);

/* ---- grant-batch.c ---- */

/* The indirect requests' pages, copied in with one call. */
void grants_load_indirect(struct xbd_bring *br, struct bk_req **batch, unsigned int nb);
/* The batch's data pages: copied in, or mapped (persistently or for the batch). */
void grants_batch(struct xbd_bring *br, struct bk_req **batch, unsigned int nb);
/* Grant copy: the finished reads' data copied out to the guest, then answered. */
void grants_copy_out(struct xbd_bring *br);

/* ---- ring-poll.c ---- */

/* Busy-poll the ring and the storage for up to the current windows: true if work was found. */
bool ring_poll(struct xbd_bring *br);
/* Sleep until the ring, the storage or a stop wakes it (or a deadline of its own). */
void ring_wait(struct xbd_bring *br);

/* ---- ring-clock.c ---- */

/* Measure what a clock read and a spin cost here (once per process). */
void ring_clock_init(void);
/* A fresh clock read, which the ring keeps as its latest. */
uint64_t ring_now(struct xbd_bring *br);
/* When a sleep or a poll begins (the latest read where a read is a system call). */
uint64_t ring_since(struct xbd_bring *br);
/* Whether a clock read is a system call here (then polls count spins, not reads). */
bool ring_clock_dear(void);
/* One spin of a polling loop, in picoseconds. */
uint64_t ring_spin_ps(void);
/* A pause between spins, kind to a sibling hyperthread. */
void ring_spin_pause(void);

#endif /* XBD_BACK_RING_THREAD_H */
