/*
 * device.h: xbd-back's state: the daemon, its devices (one per backend
 * directory) and each device's rings.  The control plane (lifecycle.c) owns
 * devices and runs in the main thread; each ring has its own I/O thread
 * (dataplane.c) and shares nothing mutable with other rings.
 */
#ifndef XBD_BACK_DEVICE_H
#define XBD_BACK_DEVICE_H

#include <pthread.h>
#include <sys/types.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

#include "blkback/engines/engine.h"
#include "blkback/datapath/grant-cache.h"
#include "blkback/datapath/journal.h"
#include "blkback/common/log.h"
#include "blkback/settings/options.h"
#include "blkback/datapath/ringcpu.h"
#include "blkback/datapath/stats.h"
#include "blkback/datapath/throttle.h"
#include "platform/platform.h"
#include "ring/ring.h"
#include "xenstore/xenbus.h"

/*
 * A request slot's life: FREE; QUEUED from its consumption (or its
 * journal entry, after a restart) while it is prepared and waits for the
 * engine; INFLIGHT in the engine; DONE waiting for its batch mapping to be
 * unmapped; ANSWERED once its response is written (respond(), the one
 * place a request ends), until push() publishes the response and frees
 * the slot: its journal entry must outlive an unpushed answer.
 */
enum bk_req_state { BK_FREE = 0, BK_QUEUED, BK_INFLIGHT, BK_DONE, BK_ANSWERED };

/* One consumed request from copy to response. */
struct bk_req {
	struct xbd_request r;
	struct xbd_io io;
	enum bk_req_state state;
	int16_t status;
	unsigned int barrier_stage;
	bool then_flush;         /* fua-mode fdatasync: a durable write's flush is due */
	uint64_t consumed_ns;    /* accepted at (now_ns clock), for its latency; 0: refused */
	bool thr_paid;           /* its cost taken by the disk's limiter (throttle.h) */
	uint64_t thr_since;      /* the limiter first held it then (ring clock), or 0 */
	struct bk_region *region;
	struct bk_pgrant **pg;   /* nr_segments persistent grants, or NULL */
	void *bounce;            /* grant-copy buffer, nr_segments pages */
	void *ind;               /* copied indirect pages */
	struct iovec *iov;
	struct bk_req *next;     /* free list, submit queue or region list */
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
	struct xbd_ring_shared_idx shared;
};

/* Adaptive polling state of one event source. */
struct bk_poll {
	uint64_t ns;
};

struct xbd_bring {
	struct xbd_dev *dev;
	unsigned int idx;
	char name[48];           /* "vbd/1/51728" or "vbd/1/51728 queue 1" */
	/* shared ring */
	void *sring;
	unsigned int nr_pages;
	uint32_t refs[XBD_RING_MAX_PAGES];
	struct xbd_ring ring;
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
	struct bk_req *redo_head; /* those requests, oldest first, executed before new ones */
	/* thread */
	pthread_t thread;
	bool thread_started;
	int cpu;                 /* the CPU it runs on (pin-rings, ringcpu.h), or -1 */
	char irq_tag[XBD_RINGCPU_TAG_LEN]; /* its event channel interrupt is named "evtchn:" this, or "" */
	int stop_fd;
	int epfd;
	volatile bool stop;      /* set by xbd_ring_stop, then stop_fd is written */
	bool stop_seen;
	unsigned int stop_inflight; /* consumed, unanswered requests when stop was seen */
	unsigned int stop_busy;  /* after the stop: consumed requests NOT answered (0!) */
	int stop_left;           /* after the stop: requests left in the ring */
	/* Served by a worker (worker.h): this is its proxy in the main process. */
	struct xbd_worker *worker;
	uint32_t wid;            /* the worker's device number, when started */
	unsigned int slot;       /* its counters' slot in the worker's memory */
	bool start_pending;      /* asked its worker to start it; the answer is due */
	bool start_restart;      /* ... to resume it after its worker died */
	int start_err;           /* why its start failed (the worker's answer), or 0 */
	bool abandoned;          /* SIGTERM: left running to its journal at the deadline */
	volatile bool failed;    /* the frontend corrupted the ring */
	bool exited;             /* the thread has finished (atomic; main joins it) */
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
	struct bk_req *copyout;  /* grant-copy reads waiting to be copied to the guest */
	struct bk_req *free;
	struct bk_req *answered_head, *answered_tail; /* responses written, not yet pushed */
	struct bk_req *submit_head, *submit_tail;
	unsigned int inflight;
	struct bk_req *barrier;  /* a barrier in progress: consume nothing more */
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
	bool retiring;           /* atomic: the loop ended, nothing is in flight */
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

/*
 * Where a device is in its life, as the control plane sees it; the
 * XenbusState machine (dev->state) runs while it is LIVE or CONNECTED.
 */
enum xbd_dev_life {
	XBD_DEV_NEW = 0,         /* found; the toolstack has not finished writing it */
	XBD_DEV_LIVE,            /* followed through the XenbusState machine, no rings */
	XBD_DEV_CONNECTED,       /* its rings run */
	XBD_DEV_DEAD,            /* its frontend's domain is gone; waits for the toolstack */
	XBD_DEV_REMOVED,         /* its directory is gone; freed once its rings drained */
};

/* Work a device waits for, set by watch events and done once per pass (lifecycle.c). */
enum {
	XBD_DEV_PEND_BACKEND = 1u << 0,  /* the toolstack changed its backend directory */
	XBD_DEV_PEND_FRONTEND = 1u << 1, /* the frontend's state changed, or a retry is due */
};

/* A token bucket on one kind of state edge (lifecycle.c). */
struct xbd_edge_limit {
	uint64_t tat_ms;         /* theoretical arrival time of the next edge */
	bool engaged;            /* said so in the log; quiet again once the bucket is full */
};

struct xbd_dev {
	struct xbd_back *bk;
	struct xbd_dev *next;
	const char *type;        /* "vbd" or "vbd3" */
	uint32_t domid, devid;
	char name[40];           /* "vbd/1/51728" */
	char bpath[XBD_XS_PATH_MAX];
	char fpath[XBD_XS_PATH_MAX];
	enum xbd_dev_life life;
	enum xenbus_state state; /* the machine's own state: what we last wrote */
	bool online;             /* the toolstack's online flag */
	struct xbd_xs_watch *fe_watch;
	/* Coalesced work: marks, and the device's place in bk's pending list. */
	unsigned int pending;
	bool queued;
	struct xbd_dev *pend_next;
	bool size_changed;          /* the engine's watch_size fired (atomic) */
	struct xbd_disk_opts o;
	/* storage */
	char *params;
	const struct xbd_engine *eng;
	struct xbd_store *store;
	struct xbd_engine_caps caps;
	bool readonly, cdrom, removable, discard_enable;
	struct xbd_limits lim;   /* nr_sectors updated atomically on resize */
	/* negotiated */
	bool persistent;
	bool copy;               /* grant copy (grants = copy, or auto without persistent) */
	enum xbd_abi abi;
	struct xbd_bring *rings;
	unsigned int nr_rings;
	struct xbd_ratelimit rl;
	/*
	 * Log budgets, each with its count of suppressed lines: requests the
	 * frontend sent (ring threads), and everything else it can cause
	 * (connects, state changes), so that neither starves the other.
	 */
	struct xbd_ratelimit crl;
	struct xbd_ring_stats past; /* counters of rings already stopped */
	/*
	 * Each ring's counters as its last connection left them (by ring
	 * index), so that its Prometheus series stays while the device is
	 * closed instead of vanishing until the next connection.
	 */
	struct xbd_ring_stats *last;
	unsigned int nr_last;
	/*
	 * Asynchronous teardown: rings told to stop whose threads still wait
	 * for in-flight I/O.  Until they are released the device does not
	 * connect again, and what it would write to state waits in
	 * deferred_state (see lifecycle.c).
	 */
	struct xbd_bring *drain;
	unsigned int nr_drain;
	int deferred_state;      /* -1: nothing to write after the drain */
	/* Taking over a device found Connected at start (lifecycle.c, dev_adopt). */
	bool resuming;           /* its rings resume from their journals */
	bool clean_stop;         /* the previous daemon stopped cleanly (its marker) */
	/* Rate limits on the edges that cost writes (lifecycle.c). */
	struct xbd_edge_limit offer_limit;   /* offering the device again (InitWait) */
	struct xbd_edge_limit connect_limit; /* mapping rings and starting threads */
	uint64_t retry_ms;       /* a rate-limited edge to retry then; 0: none */
	/* Its domain's worker (worker.h) serves this connection's rings, or NULL: here. */
	struct xbd_worker *worker;
	uint32_t wid;            /* the worker's number for this connection (0: none) */
	bool bound;              /* counted in its worker's devices (connect .. release) */
	bool said_here;          /* logged why it is served in the main process */
	bool unclean;            /* a ring ended with its worker's death: no clean-stop marker */
	bool connecting;         /* its rings' starts were asked for: the connect waits (lifecycle.c) */
	unsigned int worker_retries; /* connects again after its worker died mid-connect (lifecycle.c) */
	/* Its storage's open (lifecycle.c): on a thread when remote, retried with backoff. */
	struct xbd_open_job *open_job; /* running, or done and not collected yet */
	int open_err;            /* the last open's failure, or 0 */
	unsigned int open_tries; /* failed opens in a row */
	uint64_t open_retry_ms;  /* when to try again after a failure */
	/*
	 * Its I/O limiter (throttle.h), in the process that runs its rings,
	 * or NULL: no limit was ever set.  Ring threads load it (acquire).
	 */
	struct xbd_throttle *thr;
	/* Its limiter's buckets as its worker last reported them (a worker's next connection starts there). */
	struct xbd_throttle_state thr_state;
	bool vbd3_published;     /* kthread-pid written, xentop's file made (vbd3-stats.c) */
	bool vbd3_failed;        /* could not: said once, not tried again */
};

static inline bool xbd_dev_connected(const struct xbd_dev *dev)
{
	return dev->life == XBD_DEV_CONNECTED;
}

struct xbd_control;

struct xbd_back {
	struct xbd_back_opts opts;
	struct xbd_platform *plat;
	struct xbd_xs *xs;
	uint32_t domid;
	struct xbd_dev *devs;
	struct xbd_dev *zombies; /* removed devices whose rings still drain */
	int wake_fd;             /* ring threads signal a failed or drained ring here */
	int timer_fd;            /* due at the earliest retry, log-limit report or size check */
	uint64_t size_check_ms;  /* when connected disks' sizes are read next (lifecycle.c) */
	/* Coalesced work for the next pass (lifecycle.c): devices in FIFO order. */
	struct xbd_dev *pend_head, *pend_tail;
	bool scan_pending[XBD_BACK_MAX_TYPES];
	bool release_pending;    /* @releaseDomain fired */
	char base[XBD_BACK_MAX_TYPES][XBD_XS_PATH_MAX]; /* /local/domain/<us>/backend/<type> */
	struct xbd_base_watch {
		struct xbd_back *bk;
		unsigned int idx;
	} bw[XBD_BACK_MAX_TYPES];
	struct xbd_xs_watch *watches[XBD_BACK_MAX_TYPES + 1]; /* + @releaseDomain */
	bool stopping;           /* SIGTERM: rings report how they stopped */
	bool vbd_left_noted;     /* logged that kernel blkback has backend/vbd (discovery.c) */
	struct xbd_control *ctl; /* the control socket, or NULL */
	char *journal_dir;       /* the rings' crash journals (journal.h), or NULL: none */
	struct xbd_workers *workers; /* the workers' supervisor (supervisor.c), or NULL */
	bool journals_checked;   /* journals of devices that are gone removed (once, at start) */
	uint64_t stop_deadline_ms; /* SIGTERM: rings still out then are left to their journals */
	bool abandoned;          /* ... and one was: the daemon ends as if killed (main.c) */
	int argc;                /* the command line, re-read with the file on SIGHUP */
	char **argv;
};

/*
 * SIGTERM's deadline: what a ring still has out with its storage this
 * long after it is left to its journal (the next daemon executes it
 * again), so that the daemon is gone within about 2 s whatever the
 * storage does; systemd would SIGKILL it after 30 s otherwise.
 */
#define XBD_STOP_DEADLINE_MS 1000

static inline uint64_t xbd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static inline struct xbd_platform *xbd_ring_plat(const struct xbd_bring *br)
{
	return br->dev->bk->plat;
}

/* A device's control-plane log line, through its rate limit (a guest can cause most). */
#define DLOG(dev, lvl, fmt, ...) \
	xbd_log_limited(&(dev)->crl, lvl, "%s: " fmt, (dev)->name, ##__VA_ARGS__)

/* dataplane.c */
/* A ring of dev not set up yet: releasable by xbd_ring_stop, counting in own_stats. */
void xbd_ring_init(struct xbd_bring *br, struct xbd_dev *dev, unsigned int idx);
/* Which ring a journal belongs to (dev's negotiated ABI and queues, br's keys). */
void xbd_ring_journal_id(const struct xbd_bring *br, struct xbd_journal_id *id);
int xbd_ring_start(struct xbd_bring *br);
/* Stop taking requests, answer every consumed one, release everything. */
void xbd_ring_stop(struct xbd_bring *br);
/*
 * A started ring's event channel interrupt to its CPU (pin-rings; the
 * control plane, after the bind): said in a verbose line, a failure once.
 */
void xbd_ring_place_irq(struct xbd_bring *br);
/*
 * Tell the thread to stop without waiting: it finishes its in-flight I/O,
 * sets br->exited and writes the daemon's wake_fd.  xbd_ring_stop then
 * joins it at once.
 */
void xbd_ring_request_stop(struct xbd_bring *br);
/* True once the thread has exited (or never ran). */
bool xbd_ring_exited(const struct xbd_bring *br);
/* Whether a stopped ring's thread only waits to unmap persistent grants. */
bool xbd_ring_retiring(const struct xbd_bring *br);

/* discovery.c: finding devices under backend/<type>/ and noticing dead domains. */
int xbd_back_watch_start(struct xbd_back *bk);
/* Look at every device of type index ti (start-up, or a subtree changed). */
void xbd_back_scan(struct xbd_back *bk, unsigned int ti);
/* The device of (type index ti, domid, devid), created if its directory may exist. */
struct xbd_dev *xbd_back_device(struct xbd_back *bk, unsigned int ti, uint32_t domid,
				uint32_t devid);
/* Tear down the devices of domains that died, and only those. */
void xbd_back_release_domains(struct xbd_back *bk);

/* lifecycle.c: a device's life and its XenbusState machine, in the main thread. */
/* Note work for the device's next pass (coalesced: marked once, done once). */
void xbd_dev_mark(struct xbd_dev *dev, unsigned int what);
/* A device found under backend/<type>/ (discovery.c). */
struct xbd_dev *xbd_dev_new(struct xbd_back *bk, unsigned int ti, uint32_t domid,
			    uint32_t devid);
/* Its directory is gone: stop it and free it (once its rings drained). */
void xbd_dev_destroy(struct xbd_dev *dev);
/* Its frontend's domain died (why says so): release everything. */
void xbd_dev_kill(struct xbd_dev *dev, const char *why);
/*
 * Do the work watch events marked, one bounded step per device, fairly
 * (first marked, first served), then arm timer_fd for what is due later.
 * True if the pass marked more work (for the next turn of the main loop).
 */
bool xbd_back_run(struct xbd_back *bk);
/* timer_fd expired: retries that are due, log-limit reports. */
void xbd_back_timer(struct xbd_back *bk);
/* wake_fd: rings that failed, rings that finished draining. */
void xbd_back_handle_wake(struct xbd_back *bk);
void xbd_back_resize_all(struct xbd_back *bk);
void xbd_back_print_stats(struct xbd_back *bk);
/* Stop every ring of every device, leaving xenstore as it is (see main.c). */
void xbd_back_shutdown(struct xbd_back *bk);
/* The device's state as a word ("Connected"). */
const char *xbd_dev_state_name(const struct xbd_dev *dev);

/*
 * supervisor.c: the main process's side of the workers (worker.h).  The
 * xbd_ring_* functions above hand a ring whose br->worker is set to the
 * xbd_wring_* proxies below, so the control plane drives both alike.
 */
struct xbd_worker;
struct xbd_workers;
/* workers = 1: start the supervisor and say which confinement steps this host skips. */
int xbd_workers_init(struct xbd_back *bk);
/* After xbd_back_shutdown: every worker gone (waited for, bounded), everything freed. */
void xbd_workers_close(struct xbd_back *bk);
/*
 * Where this connection's rings run: the domain's worker or, for an
 * engine that cannot be served elsewhere, this process.  Binds the device
 * to its domain's worker, which is started if none runs: 0 when it serves
 * (or none is needed), -EINPROGRESS while it starts (its READY marks the
 * device for another pass), or -errno.
 */
int xbd_worker_bind(struct xbd_dev *dev);
/* After xbd_worker_bind said 0: open this connection's device in the worker. */
int xbd_worker_attach(struct xbd_dev *dev);
/*
 * Every ring of this connection was released: close the device in its
 * worker and unbind it (a worker runs while its domain has a connected
 * device; the last one's disconnect lets it exit).
 */
void xbd_worker_dev_done(struct xbd_dev *dev);
/* The device goes for good (unbound from its worker if it still was). */
void xbd_worker_detach(struct xbd_dev *dev);
void xbd_worker_resize(struct xbd_dev *dev);
void xbd_worker_set(struct xbd_dev *dev, const struct xbd_disk_opts *o, uint64_t mask);
void xbd_workers_log_level(struct xbd_back *bk, int level);
/* Readable when a worker has something to say: then xbd_workers_dispatch. */
int xbd_workers_fd(const struct xbd_back *bk);
void xbd_workers_dispatch(struct xbd_back *bk);
/* A child exited: if it was a worker, handle its death (restart, or give up); true then. */
bool xbd_workers_reaped(struct xbd_back *bk, pid_t pid, int status);
/* SIGTERM: every worker stops its rings, answering what it took. */
void xbd_workers_shutdown(struct xbd_back *bk);
/* The worker's pid, uid and restarts, for xbdctl (pid 0: none runs). */
void xbd_worker_info(const struct xbd_dev *dev, pid_t *pid, uint32_t *uid,
		     unsigned int *restarts);
int xbd_wring_start(struct xbd_bring *br);
void xbd_wring_request_stop(struct xbd_bring *br);
void xbd_wring_stop(struct xbd_bring *br);

/* control.c: the control socket xbdctl talks to, served from the main loop. */
int xbd_control_open(struct xbd_back *bk, const char *path, bool required,
		     struct xbd_control **out);
/* An fd for the main loop's epoll: readable when the control socket has work. */
int xbd_control_fd(const struct xbd_control *ctl);
/* Accept, read, answer; never blocks. */
void xbd_control_dispatch(struct xbd_control *ctl);
/* Close every connection and remove the socket (if it is still ours). */
void xbd_control_close(struct xbd_control *ctl);
/* A device's counters: its rings, those still draining, and those of earlier connections. */
void xbd_dev_totals(const struct xbd_dev *dev, struct xbd_ring_stats *sum);

/* vbd3-stats.c: a vbd3 disk's counters for xentop (Xen 4.19+'s libxenstat). */
/* Write them now (the first time also kthread-pid); nothing for a vbd disk. */
void xbd_vbd3_publish(struct xbd_dev *dev);
/* Remove the device's file (the device goes). */
void xbd_vbd3_unpublish(struct xbd_dev *dev);
/* Remove this process's directory (at exit, once every device went). */
void xbd_vbd3_cleanup(void);

#endif /* XBD_BACK_DEVICE_H */
