/*
 * ring.h: a ring as the data path sees it (dataplane.c, grant-cache.c,
 * throttle.c): its requests, the disk it serves and what the process that
 * runs it offers (struct xbd_disk and struct xbd_ring_host, filled by the
 * control plane at connect, or in a worker from its DEV_OPEN message),
 * and the ops table through which the control plane starts and stops it,
 * served here or by a worker.  Nothing here knows a device's life or the
 * daemon (control/device.h).
 */
#ifndef XBD_BACK_RING_H
#define XBD_BACK_RING_H

#include <pthread.h>
#include <sys/types.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

#include "blkback/log/log.h"
#include "blkback/datapath/grant-cache.h"
#include "blkback/datapath/journal.h"
#include "blkback/datapath/ringcpu.h"
#include "blkback/datapath/stats.h"
#include "blkback/datapath/throttle.h"
#include "blkback/engines/engine.h"
#include "blkback/settings/options.h"
#include "platform/platform.h"
#include "ring/ring.h"
#include "common/clock.h"

struct xbd_dev;
struct xbd_ring_proxy;

/*
 * A request slot's life: req->state is the truth, and the list a slot is
 * on follows from it (every slot is on at most one: they share req->next).
 * The one place it changes is req_move (dataplane.c), which checks the
 * edge, takes the slot off its old list (always at that list's head),
 * puts it on the new one, and writes the journal's entry with it
 * (journal.h: TAKEN, ANSWERED, FREE).
 *
 *   state         where the slot is                  how it gets there
 *   BK_FREE       br->free                           push() published its answer
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
 *   BK_ANSWERED   br->answered_head .. _tail         its response written (respond(),
 *                                                    the one place a request ends),
 *                                                    until push() publishes it: its
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
 * next one, once this one succeeded, is step_next's (dataplane.c).  Most
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
};

/* One consumed request from copy to response. */
struct bk_req {
	struct xbd_request r;
	struct xbd_io io;
	enum bk_req_state state; /* the truth (above): only req_move writes it */
	enum bk_req_step step;   /* QUEUED or INFLIGHT: which of its operations */
	int16_t status;          /* DONE: the answer it gets once unmapped */
	uint64_t consumed_ns;    /* accepted at (now_ns clock), for its latency; 0: refused */
	bool thr_paid;           /* its cost taken by the disk's limiter (throttle.h) */
	uint64_t thr_since;      /* the limiter first held it then (ring clock), or 0 */
	struct bk_region *region;
	struct bk_pgrant **pg;   /* nr_segments persistent grants, or NULL */
	void *bounce;            /* grant-copy buffer, nr_segments pages */
	void *ind;               /* copied indirect pages */
	struct iovec *iov;
	struct bk_req *next;     /* the list its state puts it on (above) */
};

/*
 * What a ring thread saw when it last went to sleep, for the "ring" object
 * of `xbdctl stats --json` (the dump of a ring that seems stuck): stored by
 * the ring thread with relaxed atomics, loaded by the control socket.
 * asleep_since (CLOCK_MONOTONIC ns) is 0 while the thread is awake; shared
 * is the ring's shared header at that moment (read by the control socket
 * itself where the ring is mapped in its process).
 */
struct xbd_ring_seen {
	uint32_t req_cons, rsp_pushed, inflight, spurious;
	int32_t masked_port;
	uint64_t asleep_since;
	struct xring_shared_idx shared;
};

/* Adaptive polling state of one event source. */
struct bk_poll {
	uint64_t ns;
};

struct xbd_ring_ops;

/* What the process that runs rings offers them: the daemon's, or a worker's. */
struct xbd_ring_host {
	struct xbd_platform *plat;
	int wake_fd;             /* ring threads signal a failed or drained ring here */
	bool stopping;           /* SIGTERM: rings report how they stopped */
	uint64_t stop_deadline_ms; /* SIGTERM: rings still out then are left to their journals */
	bool abandoned;          /* ... and one was: the daemon ends as if killed (xbd-back.c) */
};

/*
 * A disk as its rings' threads see it: who the frontend is, the
 * negotiated protocol, the storage, the settings and limits.  Filled by
 * the control plane before its rings start; while they run, the ring
 * threads load the run-time settings (o), the size (lim.nr_sectors) and
 * the limiter (thr) atomically, as the control plane or a worker's
 * messages store them.
 */
struct xbd_disk {
	struct xbd_ring_host *host;
	const char *type;        /* "vbd" or "vbd3" */
	uint32_t domid, devid;
	char name[40];           /* "vbd/1/51728" */
	struct xbd_disk_opts o;
	const struct xbd_engine *eng;
	struct xbd_store *store;
	struct xbd_limits lim;   /* nr_sectors updated atomically on resize */
	/* negotiated */
	bool persistent;
	bool copy;               /* grant copy (grants = copy, or auto without persistent) */
	enum xbd_abi abi;
	unsigned int nr_rings;
	/*
	 * Log budgets, each with its count of suppressed lines: requests the
	 * frontend sent (ring threads), and everything else it can cause
	 * (connects, state changes), so that neither starves the other.
	 */
	struct xbd_ratelimit rl;
	struct xbd_ratelimit crl;
	/*
	 * Its I/O limiter (throttle.h), in the process that runs its rings,
	 * or NULL: no limit was ever set.  Ring threads load it (acquire).
	 */
	struct xbd_throttle *thr;
	/* Its limiter's buckets as its worker last reported them (a worker's next connection starts there). */
	struct xbd_throttle_state thr_state;
	bool unclean;            /* a ring ended with its worker's death, or was left at SIGTERM: no clean-stop marker */
};

/*
 * A ring's life.  The thread serving it makes it while it runs; the
 * owner (the control plane, or a worker's main loop) before it starts and
 * once it is joined; for a ring a worker serves, the proxy in the main
 * process makes it from the worker's answers.  What the owner asks
 * (br->stop), how the ring ended (br->failed: its frontend corrupted it)
 * and SIGTERM's decision (br->abandoned) are not lives but inputs and
 * outcomes, and stay flags.  The legal edges are xbd_ring_set_life's.
 */
enum xbd_ring_life {
	XBD_RING_IDLE = 0,       /* no thread: never started, or joined and released */
	XBD_RING_RUNNING,        /* its thread (or its worker) serves it */
	XBD_RING_DRAINING,       /* the thread saw the stop: nothing more is consumed */
	XBD_RING_RETIRING,       /* its loop ended, nothing in flight: the persistent grants go */
	XBD_RING_EXITED,         /* the thread is done (or its worker said so): the owner joins it */
};

struct xbd_bring {
	struct xbd_disk *disk;   /* the data path's inputs (xbd_ring_init) */
	struct xbd_dev *dev;     /* the control plane's device (NULL in a worker) */
	const struct xbd_ring_ops *ops; /* served here or by a worker (below) */
	unsigned int idx;
	char name[48];           /* "vbd/1/51728" or "vbd/1/51728 queue 1" */
	/* shared ring */
	void *sring;
	unsigned int nr_pages;
	uint32_t refs[XBD_RING_MAX_PAGES];
	struct xring ring;
	/* event channel */
	struct xbd_evtchn *evtchn;
	int evtchn_fd;           /* in: a device fd to bind with (a worker on Xen), or -1 */
	uint32_t remote_port;
	int port;
	/* storage */
	struct xbd_queue *q;
	/* crash journal (journal.h), or NULL when journaling is off */
	struct xbd_journal *jr;
	int journal_fd;          /* in: its file (the control plane's), or -1: none */
	bool resume;             /* in: take over a live ring from its journal */
	bool resumed;            /* out: it was taken over from its journal */
	unsigned int nredo;      /* out: requests its journal had taken and not answered */
	int journal_err;         /* out: why the journal could not be used, or 0 */
	struct bk_req *redo_head; /* those requests, oldest first, executed before new ones (BK_REDO) */
	/* thread */
	pthread_t thread;
	enum xbd_ring_life life; /* atomic: xbd_ring_life, xbd_ring_set_life */
	int cpu;                 /* the CPU it runs on (pin-rings, ringcpu.h), or -1 */
	char irq_tag[XBD_RINGCPU_TAG_LEN]; /* its event channel interrupt is named "evtchn:" this, or "" */
	int stop_fd;
	int epfd;
	volatile bool stop;      /* asked by xbd_ring_stop, then stop_fd is written */
	unsigned int stop_inflight; /* consumed, unanswered requests when stop was seen */
	unsigned int stop_busy;  /* after the stop: consumed requests NOT answered (0!) */
	int stop_left;           /* after the stop: requests left in the ring */
	/*
	 * Served elsewhere (xbd_ring_worker_ops): that implementation's side
	 * of it in this process, which only it reads, or NULL.
	 */
	struct xbd_ring_proxy *proxy;
	/* A start that returned -EINPROGRESS (struct xbd_ring_ops): its answer is due. */
	bool start_pending;
	int start_err;           /* why its start failed (at once, or its answer), or 0 */
	bool abandoned;          /* SIGTERM: left running to its journal at the deadline */
	volatile bool failed;    /* the frontend corrupted the ring */
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
	 * wake-up); push() stamps the responses it publishes with it.  Each
	 * saves a clock read: in a PV dom0 every clock_gettime is a system
	 * call (Xen's clocksource has no vDSO page), several per request at QD1.
	 */
	uint64_t turn_ns;
	bool turn_woke;          /* turn_ns is a wake-up's, and nothing was consumed since */
	uint64_t clock_ns;       /* the ring thread's latest clock read (dataplane.c) */
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
	/*
	 * The ring's counters: own_stats when the ring runs in this process,
	 * else its slot in the memory its worker shares with the main process
	 * (worker.h), where xbdctl reads them.
	 */
	struct xbd_ring_stats *stats;
	struct xbd_ring_stats own_stats;
	struct xbd_lat_pending lat; /* responses written since the last push (stats.h) */
	/*
	 * What the thread saw when it last went to sleep, for the "ring"
	 * object of `xbdctl stats --json` (the dump of a ring that seems
	 * stuck): stored by the ring thread with relaxed atomics, loaded by
	 * the control socket.  asleep_since (CLOCK_MONOTONIC ns) is 0 while
	 * the thread is awake.
	 */
	struct xbd_ring_seen *seen; /* own_seen, or its slot in a worker's memory */
	struct xbd_ring_seen own_seen;
};

static inline struct xbd_platform *xbd_ring_plat(const struct xbd_bring *br)
{
	return br->disk->host->plat;
}

/*
 * How a ring is served: by a thread of this process (dataplane.c,
 * xbd_ring_local_ops) or by its domain's worker process, through a proxy
 * in the main process (supervisor.c, xbd_ring_worker_ops).  The control
 * plane picks one as it starts a ring (br->ops) and drives both alike
 * through the xbd_ring_* calls below; neither implementation calls the
 * other.
 */
struct xbd_ring_ops {
	/* Map the ring, bind its event channel, start serving it: 0, -EINPROGRESS (an answer is due) or -errno. */
	int (*start)(struct xbd_bring *br);
	/*
	 * Tell it to stop without waiting: it finishes its in-flight I/O, sets
	 * its life EXITED and writes the daemon's wake_fd.  stop then joins it at once.
	 */
	void (*request_stop)(struct xbd_bring *br);
	/* Stop taking requests, answer every consumed one, release everything. */
	void (*stop)(struct xbd_bring *br);
};
extern const struct xbd_ring_ops xbd_ring_local_ops;
extern const struct xbd_ring_ops xbd_ring_worker_ops;

/* dataplane.c */
/* A ring of disk not set up yet, served here: releasable by xbd_ring_stop, counting in own_stats. */
void xbd_ring_init(struct xbd_bring *br, struct xbd_disk *disk, unsigned int idx);
/* Which ring a journal belongs to (its disk's negotiated ABI and queues, br's keys). */
void xbd_ring_journal_id(const struct xbd_bring *br, struct xbd_journal_id *id);

static inline int xbd_ring_start(struct xbd_bring *br)
{
	return br->ops->start(br);
}

static inline void xbd_ring_request_stop(struct xbd_bring *br)
{
	br->ops->request_stop(br);
}

static inline void xbd_ring_stop(struct xbd_bring *br)
{
	br->ops->stop(br);
}

static inline enum xbd_ring_life xbd_ring_life(const struct xbd_bring *br)
{
	return __atomic_load_n(&br->life, __ATOMIC_ACQUIRE);
}

/*
 * The one place a ring's life changes.  Legal: a start (IDLE ->
 * RUNNING), the thread seeing the stop (RUNNING -> DRAINING), its loop
 * ending (RUNNING or DRAINING -> RETIRING), its end (RETIRING -> EXITED),
 * a worker's ring ending as its answers say (RUNNING or DRAINING ->
 * EXITED), and the owner joining it or taking it back (any -> IDLE).
 * Anything else is a bug here, said once in a line and done anyway.
 */
static inline void xbd_ring_set_life(struct xbd_bring *br, enum xbd_ring_life to)
{
	enum xbd_ring_life from = xbd_ring_life(br);
	bool legal;

	switch (to) {
	case XBD_RING_IDLE:
		legal = true;
		break;
	case XBD_RING_RUNNING:
		legal = from == XBD_RING_IDLE;
		break;
	case XBD_RING_DRAINING:
		legal = from == XBD_RING_RUNNING;
		break;
	case XBD_RING_RETIRING:
		legal = from == XBD_RING_RUNNING || from == XBD_RING_DRAINING;
		break;
	case XBD_RING_EXITED:
		legal = from != XBD_RING_IDLE;
		break;
	default:
		legal = false;
		break;
	}
	if (!legal && from != to) {
		static bool said;

		if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
			xbd_log(XBD_LOG_ERR, "%s: its life went from %d to %d (a bug in xbd-back)",
				br->name, (int)from, (int)to);
	}
	__atomic_store_n(&br->life, to, __ATOMIC_RELEASE);
}

/* True once the thread has exited (or never ran), wherever it ran. */
static inline bool xbd_ring_exited(const struct xbd_bring *br)
{
	enum xbd_ring_life life = xbd_ring_life(br);

	return !br->disk || life == XBD_RING_IDLE || life == XBD_RING_EXITED;
}

/* Whether a stopped ring's thread only waits to unmap persistent grants (or is done). */
static inline bool xbd_ring_retiring(const struct xbd_bring *br)
{
	enum xbd_ring_life life = xbd_ring_life(br);

	return life == XBD_RING_RETIRING || life == XBD_RING_EXITED;
}

#endif /* XBD_BACK_RING_H */
