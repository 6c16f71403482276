/*
 * dataplane.h: a ring as the control plane sees it, a closed box.  A
 * ring is made for a disk by what serves that disk's rings (a thread of
 * this process, xbd_ring_here, or the disk's worker: workers/workers.h),
 * started with one parameter struct, stopped, and read back through one
 * report; its fields are the data path's (ring-impl.h, what both ways of
 * serving a ring share; ring-thread.h, a ring a thread of this process
 * serves), and nothing else writes them.  The disk (what a ring needs of
 * its device) and the host (what it needs of the process) are the
 * control plane's, filled before the rings start.
 */
#ifndef XBD_BACK_DATAPLANE_H
#define XBD_BACK_DATAPLANE_H

#include <stdbool.h>
#include <stdint.h>

#include "blkback/datapath/throttle.h"
#include "blkback/engines/engine.h"
#include "blkback/log/log.h"
#include "blkback/settings/options.h"
#include "platform/platform.h"
#include "ring/ring.h"

struct xbd_ring_stats;
struct xbd_journal_id;
struct xbd_cbt;

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
	/*
	 * Its changed-block tracking (cbt.h): the files the control plane
	 * opened for the process that runs its rings (-1: none), and their
	 * mapping there, which the ring threads load (acquire) at each round.
	 */
	int cbt_fd, view_fd;
	struct xbd_cbt *cbt;
};

/* A disk's log line, through its budget for what the frontend can cause (crl). */
#define XBD_DISK_LOG(disk, lvl, fmt, ...) \
	xbd_log_limited(&(disk)->crl, lvl, "%s: " fmt, (disk)->name, ##__VA_ARGS__)

/* One ring of a disk: made by xbd_ring_new, its fields the data path's. */
struct xbd_ring;
/* What serves a disk's rings: this process's threads, or the disk's worker. */
struct xbd_ring_server;
/* A thread of this process for each ring. */
extern struct xbd_ring_server xbd_ring_here;

/* What a ring is started with. */
struct xbd_ring_params {
	unsigned int nr_pages;   /* the shared ring's pages and their grants */
	uint32_t refs[XBD_RING_MAX_PAGES];
	uint32_t remote_port;    /* the frontend's end of the event channel */
	bool resume;             /* take the live ring over from its journal */
	bool redo_counted;       /* resume on the counters of the process that took the requests
				  * it runs again (a worker's successor, on its slot): those are
				  * in stats already, and are not counted as accepted again */
	int journal_fd;          /* its crash journal's file, kept open by the caller until
				  * the ring is stopped; -1: none (journal.h) */
	int evtchn_fd;           /* an event channel device to bind with (a worker on Xen,
				  * handed by the main process; the ring takes it), or -1 */
	int cpu;                 /* the CPU to run on (a worker's, picked by the main
				  * process), or -1: the ring picks one (pin-rings) */
	/* Where it counts (a worker's memory shared with the main process), or NULL: its own. */
	struct xbd_ring_stats *stats;
	struct xbd_ring_seen *seen;
};

/* What a ring reports back: its start, and once it is stopped, its stop. */
struct xbd_ring_report {
	bool start_pending;      /* its start's answer is still due (a worker's): ask again later */
	int start_err;           /* why its start failed (at once, or in that answer), or 0 */
	int journal_err;         /* why its journal could not be used, or 0 */
	bool resumed;            /* it was taken over from its journal */
	unsigned int nredo;      /* requests its journal had taken and not answered: run again */
	int port;                /* our end of the event channel, or -1 */
	bool failed;             /* its frontend corrupted it: its device closes */
	bool abandoned;          /* SIGTERM: left running to its journal at the deadline */
	unsigned int stop_inflight; /* consumed, unanswered requests when it saw the stop */
	unsigned int stop_busy;  /* after the stop: consumed requests NOT answered (0!) */
	int stop_left;           /* after the stop: requests left in the ring for the next backend */
};

/*
 * What a ring thread saw when it last went to sleep, for the "ring"
 * object of `xbdctl stats --json` (the dump of a ring that seems stuck):
 * stored by the ring thread with relaxed atomics, loaded by the control
 * socket.  asleep_since (CLOCK_MONOTONIC ns) is 0 while the thread is
 * awake; shared is the ring's shared header at that moment.
 */
struct xbd_ring_seen {
	uint32_t req_cons, rsp_pushed, inflight, spurious;
	int32_t masked_port;
	uint64_t asleep_since;
	struct xring_shared_idx shared;
};

/* What the control socket shows of a served ring (xbd_ring_view). */
struct xbd_ring_view {
	struct xbd_ring_seen seen; /* its shared header now, where it is mapped in this process */
	int port;
	int cpu;                 /* the CPU it runs on (pin-rings), or -1 */
};

/*
 * Ring idx of disk, served by srv, not started (its name says the queue
 * when the disk has several); NULL when out of memory.
 */
struct xbd_ring *xbd_ring_new(struct xbd_ring_server *srv, struct xbd_disk *disk,
			      unsigned int idx);
/*
 * Map the ring, bind its event channel, start serving it: 0, -EINPROGRESS
 * (its answer is due: the report's start_pending) or -errno; the report
 * says so too.
 */
int xbd_ring_start(struct xbd_ring *r, const struct xbd_ring_params *p);
/*
 * Tell it to stop without waiting: it finishes its in-flight I/O, and
 * then writes the host's wake_fd; xbd_ring_exited says when.
 */
void xbd_ring_request_stop(struct xbd_ring *r);
/* Stop taking requests, answer every consumed one, release everything (bounded at SIGTERM). */
void xbd_ring_stop(struct xbd_ring *r);
/* Free a stopped (or never started) ring; NULL: nothing. */
void xbd_ring_free(struct xbd_ring *r);
/* True once it has stopped (or never ran), wherever it ran; true for NULL. */
bool xbd_ring_exited(const struct xbd_ring *r);
void xbd_ring_report(const struct xbd_ring *r, struct xbd_ring_report *rep);
/* Its counters (stats.h), read with relaxed atomic loads while it runs. */
const struct xbd_ring_stats *xbd_ring_stats(const struct xbd_ring *r);
/* "vbd/1/51728" or "vbd/1/51728 queue 1". */
const char *xbd_ring_name(const struct xbd_ring *r);
/* What the control socket shows of it; false: it is not served (never started, or stopped). */
bool xbd_ring_view(const struct xbd_ring *r, struct xbd_ring_view *v);
/* Which ring a journal belongs to (the disk's negotiated ABI and queues, the ring's keys). */
void xbd_ring_journal_id(const struct xbd_disk *disk, unsigned int idx,
			 const struct xbd_ring_params *p, struct xbd_journal_id *id);

#endif /* XBD_BACK_DATAPLANE_H */
