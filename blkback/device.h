/*
 * device.h: xbd-back's state: the daemon, its devices (one per backend
 * directory) and each device's rings.  The control plane (xenbus.c) owns
 * devices and runs in the main thread; each ring has its own I/O thread
 * (dataplane.c) and shares nothing mutable with other rings.
 */
#ifndef XBD_BACK_DEVICE_H
#define XBD_BACK_DEVICE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "blkback/engine.h"
#include "blkback/log.h"
#include "blkback/options.h"
#include "blkback/stats.h"
#include "platform/platform.h"
#include "ring/ring.h"
#include "xenstore/xenbus.h"

/* Linux blkback's xen_blkif_max_pgrants default: persistent grants per ring. */
#define XBD_MAX_PGRANTS 1056

struct xbd_back;
struct xbd_dev;
struct bk_req;

/* One xbd_gnt_map call shared by the requests of a batch. */
struct bk_region {
	void *addr;
	unsigned int count;
	unsigned int refs;       /* requests still using it */
	struct bk_req *finished; /* done, answered once the region is unmapped */
};

/*
 * One xbd_gnt_map call for a batch's persistent-grant misses: a mapping
 * can only be unmapped whole, so it goes once its last grant is evicted.
 */
struct bk_pregion {
	void *addr;
	unsigned int count;
	unsigned int live;       /* entries still pointing into it */
	unsigned int users;      /* requests using its pages (sum of the entries' users) */
	bool building;           /* map_persistent is still creating its entries */
	struct bk_pgrant *ents[]; /* count: the entry of each page, or NULL */
};

/*
 * A mapping of persistent grants that carried I/O, waiting to be unmapped.
 * A Linux dom0 (5.19 and later) unmaps gntdev pages asynchronously when
 * the kernel still holds a reference to them, and the direct I/O that
 * completed a moment ago may still hold one: the completion reaches
 * userspace before the block layer releases the pages.  Unmapping then
 * leaves a live PTE behind ("BUG: Bad page map ... gntdev", a WARNING in
 * __unmap_grant_pages_done).  So such mappings are unmapped only after
 * BK_UNMAP_GRACE_NS (dataplane.c), and at most BK_RETIRED_MAX pages wait.
 */
struct bk_retired {
	void *addr;
	unsigned int count;
	uint64_t at;             /* CLOCK_MONOTONIC ns when it was retired */
	struct bk_retired *next;
};

/* A persistently mapped grant (blkif.h: feature-persistent). */
struct bk_pgrant {
	uint32_t gref;
	void *addr;
	struct bk_pregion *rg;   /* NULL: a mapping of its own */
	unsigned int rg_idx;     /* its page in rg */
	unsigned int users;
	bool cached;             /* in the LRU; otherwise unmapped when unused */
	struct bk_pgrant *hnext;
	struct bk_pgrant *lru_prev, *lru_next;
};

#define BK_PG_BUCKETS 2048
struct bk_gcache {
	struct bk_pgrant *hash[BK_PG_BUCKETS];
	struct bk_pgrant *lru_head, *lru_tail; /* head = most recently used */
	unsigned int count, max;
};

enum bk_req_state { BK_FREE = 0, BK_QUEUED, BK_INFLIGHT, BK_DONE };

/* One consumed request from copy to response. */
struct bk_req {
	struct xbd_request r;
	struct xbd_io io;
	enum bk_req_state state;
	int16_t status;
	unsigned int barrier_stage;
	bool then_flush;         /* fua-mode fdatasync: a durable write's flush is due */
	struct bk_region *region;
	struct bk_pgrant **pg;   /* nr_segments persistent grants, or NULL */
	void *bounce;            /* grant-copy buffer, nr_segments pages */
	void *ind;               /* copied indirect pages */
	struct iovec *iov;
	struct bk_req *next;     /* free list, submit queue or region list */
};

/* Adaptive polling state of one event source. */
struct bk_poll {
	uint64_t ns;
};

struct xbd_bring {
	struct xbd_dev *dev;
	unsigned int idx;
	char name[48];           /* "vbd 1/51728" or "vbd 1/51728 queue 1" */
	/* shared ring */
	void *sring;
	unsigned int nr_pages;
	uint32_t refs[XBD_RING_MAX_PAGES];
	struct xbd_ring ring;
	/* event channel */
	struct xbd_evtchn *evtchn;
	uint32_t remote_port;
	int port;
	/* storage */
	struct xbd_queue *q;
	/* thread */
	pthread_t thread;
	bool thread_started;
	int stop_fd;
	int epfd;
	volatile bool stop;      /* set by xbd_ring_stop, then stop_fd is written */
	bool stop_seen;
	unsigned int stop_inflight; /* consumed, unanswered requests when stop was seen */
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
	/* grant copy: the ring's bounce pages, allocated once, reused */
	char *bpool;
	uint16_t *bpool_free;    /* indexes of free pages */
	unsigned int bpool_nfree;
	struct bk_req *copyout;  /* grant-copy reads waiting to be copied to the guest */
	struct bk_req *free;
	struct bk_req *submit_head, *submit_tail;
	unsigned int inflight;
	struct bk_req *barrier;  /* a barrier in progress: consume nothing more */
	struct bk_gcache gcache;
	unsigned int pg_pinned;  /* pages mapped for persistent grants, cached or in use */
	struct bk_retired *retired_head, *retired_tail; /* unmaps waiting out the grace */
	unsigned int pg_retired; /* pages on that list */
	uint64_t last_done_ns;   /* when a reap last found completions */
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
	struct xbd_ring_stats stats;
	/*
	 * What the thread saw when it last went to sleep, for the "ring"
	 * object of `xbdctl stats --json` (the dump of a ring that seems
	 * stuck): stored by the ring thread with relaxed atomics, loaded by
	 * the control socket.  asleep_since (CLOCK_MONOTONIC ns) is 0 while
	 * the thread is awake.
	 */
	struct {
		uint32_t req_cons, rsp_pushed, inflight, spurious;
		int32_t masked_port;
		uint64_t asleep_since;
	} seen;
};

struct xbd_dev {
	struct xbd_back *bk;
	struct xbd_dev *next;
	const char *type;        /* "vbd" or "vbd3" */
	uint32_t domid, devid;
	char name[40];           /* "vbd 1/51728" */
	char bpath[XBD_XS_PATH_MAX];
	char fpath[XBD_XS_PATH_MAX];
	enum xenbus_state state; /* what we last wrote */
	bool online;
	bool dead;               /* the frontend's domain is gone */
	bool connected;
	struct xbd_xs_watch *fe_watch;
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
	struct xbd_ring_stats past; /* counters of rings already stopped */
	/*
	 * Asynchronous teardown: rings told to stop whose threads still wait
	 * for in-flight I/O.  Until they are released the device does not
	 * connect again, and what it would write to state waits in
	 * deferred_state (see xenbus.c).
	 */
	struct xbd_bring *drain;
	unsigned int nr_drain;
	int deferred_state;      /* -1: nothing to write after the drain */
	bool destroyed;          /* on bk->zombies: freed once drained */
	/* Reconnect rate limit: a token bucket (xenbus.c). */
	uint64_t conn_tat_ms;    /* theoretical arrival time of the next connect */
	uint64_t retry_ms;       /* a rate-limited connect to retry then; 0: none */
};

struct xbd_control;

struct xbd_back {
	struct xbd_back_opts opts;
	struct xbd_platform *plat;
	struct xbd_xs *xs;
	uint32_t domid;
	struct xbd_dev *devs;
	struct xbd_dev *zombies; /* removed devices whose rings still drain */
	int wake_fd;             /* ring threads signal a failed or drained ring here */
	/* One timer thread that writes wake_fd at the earliest deferred connect. */
	pthread_t timer;
	bool timer_started;
	pthread_mutex_t timer_lock;
	pthread_cond_t timer_cond;
	uint64_t timer_due_ms;   /* 0: nothing due */
	bool timer_stop;
	char base[XBD_BACK_MAX_TYPES][XBD_XS_PATH_MAX]; /* /local/domain/<us>/backend/<type> */
	struct xbd_base_watch {
		struct xbd_back *bk;
		unsigned int idx;
	} bw[XBD_BACK_MAX_TYPES];
	struct xbd_xs_watch *watches[XBD_BACK_MAX_TYPES + 1]; /* + @releaseDomain */
	bool stopping;           /* SIGTERM: rings report how they stopped */
	bool vbd_left_noted;     /* logged that kernel blkback has backend/vbd (xenbus.c) */
	struct xbd_control *ctl; /* the control socket, or NULL */
	int argc;                /* the command line, re-read with the file on SIGHUP */
	char **argv;
};

/* dataplane.c */
int xbd_ring_start(struct xbd_bring *br);
/* Stop taking requests, answer every consumed one, release everything. */
void xbd_ring_stop(struct xbd_bring *br);
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

/* xenbus.c */
int xbd_back_watch_start(struct xbd_back *bk);
void xbd_back_handle_failed_rings(struct xbd_back *bk);
void xbd_back_resize_all(struct xbd_back *bk);
void xbd_back_print_stats(struct xbd_back *bk);
/* Stop every ring of every device, leaving xenstore as it is (see main.c). */
void xbd_back_shutdown(struct xbd_back *bk);
/* The device's state as a word ("Connected"). */
const char *xbd_dev_state_name(const struct xbd_dev *dev);

/* control.c: the control socket xbdctl talks to, served from the main loop. */
int xbd_control_open(struct xbd_back *bk, const char *path, bool required,
		     struct xbd_control **out);
/* An fd for the main loop's epoll: readable when the control socket has work. */
int xbd_control_fd(const struct xbd_control *ctl);
/* Accept, read, answer; never blocks. */
void xbd_control_dispatch(struct xbd_control *ctl);
/* Close every connection and remove the socket (if it is still ours). */
void xbd_control_close(struct xbd_control *ctl);

#endif /* XBD_BACK_DEVICE_H */
