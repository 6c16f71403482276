/*
 * worker.h: xbd-back's workers, one process per frontend domain.
 *
 * The main process (root) keeps discovery, the XenbusState machine,
 * storage opening, the crash journals' files, the control socket and the
 * statistics.  The data path of a domain's disks runs in a worker of its
 * own: `xbd-back --worker FD`, a fresh image exec'd by the main process
 * when the domain's first device connects, which confines itself
 * (confine.c: its own uid, no capabilities, no file system, a seccomp
 * allow-list) before it touches anything the guest controls, and then
 * serves rings with the very code the main process would (datapath/)
 * from what it is handed: each disk's open store (engine.h's export),
 * each ring's journal fd, on Xen a gntdev fd and event channel fds
 * restricted to its domain.  Engines whose libraries keep connections or
 * threads of their own (nbd, rbd), and uring (its calls are not in the
 * allow-list yet), stay in the main process.
 *
 * The two talk over a SOCK_SEQPACKET socketpair: one fixed-size struct
 * xbd_wmsg per message, fds beside it (SCM_RIGHTS).  Counters live in a
 * memory file the main process makes per worker (struct xbd_wslot, one
 * per ring), so xbdctl reads them as before.
 *
 * Trust: the worker trusts the main process.  The main process trusts
 * nothing a worker sends or writes: every message is checked against
 * what it asked for, a log line is escaped and may only name the
 * worker's own domain, the counters are numbers to print, and every
 * wait for an answer is bounded.  supervisor.c is the main process's
 * side (workers.h: the proxies that serve a worker's rings, ring-impl.h;
 * worker deaths and restarts), worker.c the worker's.
 */
#ifndef XBD_BACK_WORKER_H
#define XBD_BACK_WORKER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "blkback/datapath/dataplane.h"
#include "blkback/engines/engine.h"
#include "blkback/settings/options.h"
#include "blkback/datapath/stats.h"
#include "ring/ring.h"

/* The worker's end of the socketpair after exec: `xbd-back --worker 3`. */
#define XBD_WORKER_FD 3
/* Rings one worker serves at once (its counter slots). */
#define XBD_WORKER_SLOTS 256
/* A sim directory longer than this cannot be handed to a worker. */
#define XBD_WORKER_PATH_MAX 200
#define XBD_WORKER_LOG_MAX 480

enum xbd_wmsg_type {
	/* main -> worker */
	XBD_WMSG_HELLO = 1,      /* fds: the counters' memory file; on Xen a gntdev fd */
	XBD_WMSG_DEV_OPEN,       /* fds: the store's (engine.h export) */
	XBD_WMSG_DEV_CLOSE,      /* every ring of the device has exited */
	XBD_WMSG_RING_START,     /* fds: the journal if any; on Xen an event channel fd */
	XBD_WMSG_RING_STOP,
	XBD_WMSG_RESIZE,
	XBD_WMSG_SET,            /* run-time disk settings (xbdctl set), log level */
	XBD_WMSG_SHUTDOWN,       /* SIGTERM: stop every ring, answer all it took, exit 0 */
	XBD_WMSG_EXIT,           /* no device of the domain left: exit once no ring runs */
	XBD_WMSG_CBT,            /* fds: the disk's changed-block tracking file, its view file */
	/* worker -> main */
	XBD_WMSG_READY,          /* confined (skipped: the steps that were not possible) */
	XBD_WMSG_RING_STARTED,   /* the answer to RING_START */
	XBD_WMSG_RING_FAILED,    /* the frontend corrupted the ring */
	XBD_WMSG_RING_EXITED,    /* the answer to RING_STOP (or SHUTDOWN): released */
	XBD_WMSG_LOG,            /* a log line */
	XBD_WMSG_MAX,
};

enum xbd_wplatform { XBD_WPLAT_SIM = 1, XBD_WPLAT_XEN };

/* Confinement steps (confine.c), as bits of READY's skipped mask. */
enum {
	XBD_CONFINE_MOUNTNS = 1u << 0,  /* a private mount namespace, an empty root */
	XBD_CONFINE_SIMDIRS = 1u << 1,  /* (simulator) its directories stay reachable */
	XBD_CONFINE_UID = 1u << 2,      /* its own uid and gid, no groups */
	XBD_CONFINE_CAPS = 1u << 3,     /* no capabilities (nor in the bounding set) */
	XBD_CONFINE_NNP = 1u << 4,      /* no_new_privs */
	XBD_CONFINE_RLIMITS = 1u << 5,  /* fds, threads, core dumps */
	XBD_CONFINE_SECCOMP = 1u << 6,  /* the system-call allow-list */
	XBD_CONFINE_EVTCHN = 1u << 7,   /* (Xen) event channels bound to its domain only */
	XBD_CONFINE_GNTDEV = 1u << 8,   /* (Xen) a grant limit on its gntdev */
	XBD_CONFINE_PDEATH = 1u << 9,   /* it dies with the main process */
	XBD_CONFINE_STEPS = 10,
};

struct xbd_wmsg_hello {
	uint32_t platform;       /* enum xbd_wplatform */
	uint32_t self_domid;     /* the domain the backend acts as */
	uint32_t domid;          /* the frontend domain served */
	uint32_t uid, gid;       /* to drop to */
	int32_t log_level;
	uint32_t main_pid;       /* it must die with this process */
	uint32_t sanitizers;     /* built with ASan/UBSan: their runtime's system calls too */
	char sim_dir[XBD_WORKER_PATH_MAX];
	char test_hook[32];      /* test builds: a forbidden call to make ("open:N", "exec:N") */
	uint32_t test_start_delay_ms; /* test builds: wait this long before READY */
	char test_misbehave[16]; /* test builds: after READY, "silent" or "flood" (worker.c) */
};

struct xbd_wmsg_dev_open {
	char type[8];            /* "vbd", "vbd3" */
	uint32_t domid, devid;
	char name[40];           /* "vbd/5/51728", for log lines */
	struct xbd_disk_opts o;
	struct xbd_limits lim;
	uint32_t abi, nr_rings;
	uint8_t persistent, copy;
	struct xbd_store_export store;
	struct xbd_throttle_state thr; /* its limiter's buckets when it was last served */
	uint8_t cbt_fds;         /* after the store's: its tracking file (and view file), 0 to 2 */
};

struct xbd_wmsg_ring_start {
	uint32_t nr_pages;
	uint32_t refs[XBD_RING_MAX_PAGES];
	uint32_t remote_port;
	uint32_t slot;           /* its counters' slot */
	uint8_t resume;          /* take the live ring over from its journal */
	uint8_t redo_counted;    /* ... on the dead worker's counters (xbd_ring_params) */
	uint8_t journal;         /* a journal fd comes with it */
	uint8_t evtchn;          /* an event channel fd comes with it (after the journal's) */
	int32_t cpu;             /* the CPU its thread runs on (pin-rings), or -1 */
};

struct xbd_wmsg_ring_started {
	int32_t err, journal_err;
	uint32_t nredo;
	uint8_t resumed;
	int32_t port;            /* our end of the event channel */
};

struct xbd_wmsg_ring_exited {
	uint32_t stop_inflight;  /* consumed, unanswered when the stop was seen */
	uint32_t busy;           /* consumed requests NOT answered (0 unless broken) */
	int32_t left;            /* requests left in the ring for the next backend */
	struct xbd_throttle_state thr; /* the disk's limiter now (at_ns 0: it has none) */
};

struct xbd_wmsg_set {
	struct xbd_disk_opts o;
	uint64_t mask;           /* which of o (the settings table's bits) */
	int32_t log_level;       /* < -10: unchanged */
};

struct xbd_wmsg {
	uint32_t type;           /* enum xbd_wmsg_type */
	uint32_t dev;            /* the worker's device number (DEV_OPEN gives it) */
	uint32_t ring;           /* a ring of that device */
	int32_t err;
	union {
		struct xbd_wmsg_hello hello;
		struct xbd_wmsg_dev_open dev_open;
		struct xbd_wmsg_ring_start ring_start;
		struct xbd_wmsg_ring_started ring_started;
		struct xbd_wmsg_ring_exited ring_exited;
		struct xbd_wmsg_set set;
		uint64_t nr_sectors;     /* RESIZE */
		uint32_t cbt_fds;        /* CBT: the fds that come with it (1 or 2) */
		uint32_t skipped;        /* READY: XBD_CONFINE_* bits */
		struct {
			int32_t level;
			char text[XBD_WORKER_LOG_MAX];
		} log;
	} u;
};

/* One ring's counters in a worker's shared memory, on cache lines of their own. */
struct xbd_wslot {
	struct xbd_ring_stats stats;
	struct xbd_ring_seen seen; /* what the ring thread saw when it last slept */
} __attribute__((aligned(64)));

/* ---- wmsg.c: messages with fds over the socketpair, and those waiting to be sent ---- */

#define XBD_WMSG_MAX_FDS 4
/*
 * One message and nfds fds (still the caller's); 0 or -errno (-EPIPE: the
 * other end is gone, -ETIMEDOUT: it did not read for timeout_ms; -1:
 * forever, 0: not at all).
 */
int xbd_wmsg_send(int sock, const struct xbd_wmsg *m, const int *fds, unsigned int nfds,
		  int timeout_ms);
/*
 * One message (*nfds fds into fds, the rest closed); 0, -EAGAIN, -EPIPE at
 * the end, -EPROTO for a message of the wrong size.  Waits up to
 * timeout_ms (-1: forever, 0: not at all).
 */
int xbd_wmsg_recv(int sock, struct xbd_wmsg *m, int *fds, unsigned int *nfds, int timeout_ms);
/*
 * Messages a socket had no room for, waiting in order (each with copies
 * of its fds) for the reader to take them: so that the main process never
 * waits for a worker to read.
 */
struct xbd_wout;
struct xbd_wqueue {
	struct xbd_wout *head, *tail;
	unsigned int n;
	uint64_t deadline;       /* ms (xbd_mono_ms): by when the oldest must be taken; 0: none waits */
};
/*
 * Send m at once if nothing waits and the socket has room, else queue it
 * (the oldest then due within timeout_ms): 0, -ENOBUFS when max already
 * wait, or -errno (the send's, or a copy's of an fd).
 */
int xbd_wqueue_send(struct xbd_wqueue *q, int sock, const struct xbd_wmsg *m, const int *fds,
		    unsigned int nfds, unsigned int max, unsigned int timeout_ms);
/*
 * Hand over what waits as far as the socket takes it, each next one due
 * within timeout_ms of the last taken; on a failed send (the reader is
 * gone) everything waiting is dropped.
 */
void xbd_wqueue_flush(struct xbd_wqueue *q, int sock, unsigned int timeout_ms);
/* Drop what waits (closing its fds). */
void xbd_wqueue_drop(struct xbd_wqueue *q);
/* The step names of a skipped mask ("uid change, seccomp"), for one log line. */
void xbd_confine_describe(uint32_t skipped, char *buf, size_t len);

#endif /* XBD_BACK_WORKER_H */
