/*
 * supervisor.h: the main process's side of the workers (workers.h says
 * what the control plane asks of it), private to workers/: the
 * supervisor, its workers, the devices bound to them and the rings they
 * serve, and what its files call of each other.
 *
 *   supervisor.c  the supervisor: start and end, the main loop's side (a
 *                 worker's messages, its READY, the deadlines), SIGTERM
 *   restart.c     a worker's death: its rings resumed in a new one, or
 *                 ended; the restart-storm limit
 *   bind.c        a device's binding to its domain's worker: opening its
 *                 disk there, closing it, its settings
 *   ring-proxy.c  the rings a worker serves (ring-impl.h's third party:
 *                 wring_ops), their starts and stops, their messages
 *   spawn.c       starting a worker: its process, HELLO
 *   record.c      a worker's record: its life and kills, what is sent to
 *                 it, its deadlines, its log lines, its devices' steps and
 *                 cgroup weights, its deaths counted
 *
 * Each file calls only those below it in this list.
 */
#ifndef XBD_BACK_SUPERVISOR_H
#define XBD_BACK_SUPERVISOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "blkback/datapath/ring-impl.h"
#include "blkback/workers/worker.h"
#include "blkback/workers/workers.h"

/* How long a worker may take to start and confine itself, and to answer. */
#define START_TIMEOUT_MS 30000
#define ANSWER_TIMEOUT_MS 2000
/* Messages waiting for room in one worker's socket (its own do not stop reading). */
#define OUT_MAX 1024
/* Deaths are counted over this window (worker-restarts of them: given up). */
#define DEATH_WINDOW_MS 60000
#define MAX_DEATHS 64
/* The grants one worker may have mapped, where gntdev still takes a limit. */
#define WORKER_MAX_GRANTS 65536
/* A worker's log lines per kind and 5 s (its own devices' limits come first). */
#define WORKER_LOG_BURST 100
/*
 * What the main process reads from one worker: at most MSGS_PER_TURN
 * messages a turn of its loop, and MSG_RATE a second over time (a bucket
 * of MSG_RATE).  A worker sends a handful per ring start and stop, and
 * log lines its own limits keep to a few a second; one that sends more is
 * killed, a death like a crash (it once kept the main process at 13-25%
 * CPU with 100,000 log lines a second for as long as it liked).
 */
#define MSGS_PER_TURN 64
#define MSG_RATE 5000

/*
 * A worker process's life, as the main process sees it.  Its death
 * (SIGCHLD, xbd_workers_reaped) ends every state but NONE; what the death
 * means depends on the state it ends (the started ones restart and resume
 * their rings).  The legal edges are worker_set_life's table
 * (record.c), the one place it changes.
 */
enum worker_life {
	WORKER_NONE = 0,         /* no process */
	WORKER_SPAWNED,          /* forked; its HELLO not sent (or refused): dies unstarted */
	WORKER_STARTING,         /* HELLO sent, READY due by start_deadline */
	WORKER_READY,            /* said READY: confined, serving */
	WORKER_STARTING_LOST,    /* killed before READY: its death is due */
	WORKER_LOST,             /* said READY, then killed or its socket failed: its death is due */
};

/* Why we killed a worker: a fault (its death counts) or as one told to go (quiet). */
enum worker_kill { WORKER_NOT_KILLED = 0, WORKER_KILL_ASKED, WORKER_KILL_FAULT };

/*
 * A ring its worker serves, as the main process holds it (wring_ops): the
 * ring, its device's binding, and from the start it asked for to its stop
 * the worker that serves it and its counter slot there.
 */
struct wring {
	struct xbd_ring base;    /* ring-impl.h: what every ring has */
	struct xbd_wdev *wd;
	struct xbd_worker *w;    /* NULL: none serves it (not started, or stopped) */
	unsigned int slot;       /* w->rings[slot] is it: its counters in w's memory */
	uint32_t wid;            /* the worker's device number when it was started */
	bool start_restart;      /* its start resumes the ring after its worker died */
};

/* A device's binding (workers.h). */
struct xbd_wdev {
	struct xbd_ring_server srv; /* its rings served by its worker (wring_ops) */
	struct xbd_workers *ws;
	struct xbd_disk *disk;
	void (*step)(void *arg); /* the device takes its next step */
	void *arg;
	struct xbd_worker *worker; /* bound to it (xbd_worker_bind .. unbind), or NULL */
	struct xbd_wdev *next;   /* in its worker's list of bound devices */
	uint32_t wid;            /* the worker's number for this connection (0: none) */
	bool said_here;          /* logged why it is served in the main process */
};

struct xbd_worker {
	struct xbd_worker *next;
	struct xbd_workers *ws;
	uint32_t domid;          /* the frontend domain it serves */
	char name[40];           /* "worker of domain 5", for log lines */
	enum worker_life life;   /* where its process is (worker_set_life) */
	pid_t pid;               /* its process while life is not NONE; 0 then */
	/*
	 * Beside its life, and not folded into it: what we asked of it and
	 * what its death will mean, which cut across where its process is
	 * (a worker told to exit can be starting, ready or lost; one killed
	 * for a fault can be starting or ready), and decide only how its
	 * death is counted (restart.c).  As with a ring's stop and failed,
	 * inputs and outcomes stay flags.
	 */
	enum worker_kill kill;   /* why we killed it, if we did */
	bool exiting;            /* told to exit (EXIT: no device of its domain left; SHUTDOWN) */
	bool resume_pending;     /* what its READY does: its dead predecessor's rings resume */
	bool gntdev_limited;     /* the gntdev fd it was handed has a grant limit */
	uint64_t start_deadline; /* ms (now_ms); 0 once killed for missing it */
	unsigned int owed;       /* RING_START answers it owes */
	uint64_t answer_deadline; /* ms: by when the next of them is due; 0: none owed */
	uint64_t exit_deadline;  /* ms: told to exit, gone by then or killed; 0: not told */
	struct xbd_wqueue out;   /* what its socket had no room for (wmsg.c): taken by out.deadline */
	int sock;
	uint32_t uid;
	unsigned int refs;       /* devices bound to it (xbd_worker_bind .. unbind) */
	struct xbd_wdev *devs;   /* those devices */
	unsigned int restarts;   /* started again after a death */
	uint32_t next_wid;
	/* Counters: one memory file for every worker of the domain, kept across restarts. */
	int stats_fd;
	struct xbd_wslot *slots;
	struct wring *rings[XBD_WORKER_SLOTS]; /* the ring each counter slot holds, or NULL */
	uint64_t deaths_ms[MAX_DEATHS]; /* the latest deaths, a ring */
	unsigned int ndeaths;
	bool given_up;           /* said once that it is not restarted (the restart-storm limit) */
	struct xbd_ratelimit rl; /* its log lines */
	uint64_t budget;         /* messages it may still send (MSG_RATE a second) */
	uint64_t budget_ms;      /* when the budget was last filled */
	/* Its cgroup (cgroup.h): placed since it started; the weights written there. */
	bool cg_placed;
	unsigned int cg_io, cg_cpu;
	bool cg_said_differ;     /* said that its disks ask for different weights */
};

struct xbd_workers {
	const struct xbd_back_opts *opts;
	struct xbd_ring_host *host; /* the main process's: its platform, wake_fd, SIGTERM */
	uint32_t self_domid;
	int epfd;                /* every worker's socket, and timer_fd */
	int timer_fd;            /* the earliest deadline of any worker */
	unsigned int start_timeout_ms;
	int exe_fd;              /* our own binary, exec'd as a worker */
	char **envp;             /* its environment (made before any fork) */
	struct xbd_worker *list;
	bool sim;
	char sim_dir[XBD_WORKER_PATH_MAX];
	uint32_t said;           /* confinement steps already named as skipped */
	bool sanitizers;
	struct xbd_cgroup *cg;   /* each worker in a cgroup of its own, or NULL */
#ifdef XBD_TEST_HOOKS
	char test_hook[32];      /* XBD_TEST_WORKER_CALL: for each domain's first worker */
	bool test_crash;         /* XBD_TEST_CRASH: a worker killed at a crash point takes us too */
	uint32_t test_delay_domid, test_delay_ms; /* XBD_TEST_WORKER_DELAY=DOMID:MS */
	uint32_t test_misbehave_domid;            /* XBD_TEST_WORKER_MISBEHAVE=DOMID:HOW */
	char test_misbehave[16];
#endif
};

/* ---- restart.c ---- */

/* A started replacement said READY: rings told to stop meanwhile end, the others resume. */
void worker_resume_rings(struct xbd_worker *w);

/* ---- bind.c ---- */

/* Open wd's connection in the worker (a new device number): 0 or -errno. */
int wdev_open(struct xbd_worker *w, struct xbd_wdev *wd);

/* ---- ring-proxy.c ---- */

extern const struct xbd_ring_ops wring_ops;
/* A message nobody waits for: a log line, a ring's answer or news. */
void worker_handle_msg(struct xbd_worker *w, const struct xbd_wmsg *m);
/* Start wr in w at counter slot (restart: a dead worker's ring, which runs on): -EINPROGRESS or -errno. */
int wring_start_in(struct wring *wr, struct xbd_worker *w, unsigned int slot, bool restart);
/* A ring its worker served has ended (its answer, its start's failure, or its worker's death). */
void wring_exited(struct wring *wr);

/* ---- spawn.c ---- */

/* Our environment for the workers (made once, before any spawn); NULL when out of memory. */
char **workers_env(bool sanitizers);
/* Fork and exec the worker and hand it HELLO; its READY comes later: 0, or -errno. */
int worker_start(struct xbd_worker *w);
/* The confinement steps it skipped that were not said yet: one line. */
void workers_said_skipped(struct xbd_workers *ws, const struct xbd_worker *w, uint32_t skipped);

/* ---- record.c ---- */

/* The record of domid's worker, made if there is none; NULL when out of memory. */
struct xbd_worker *worker_get(struct xbd_workers *ws, uint32_t domid);
void worker_free(struct xbd_worker *w);
/* Its deaths within the last window_ms. */
unsigned int worker_deaths_within(const struct xbd_worker *w, uint64_t window_ms);
/* No device of its domain is connected and no process runs: free it, or keep its deaths. */
void worker_idle(struct xbd_worker *w);
/* The one place a worker's life changes (the edges: record.c). */
void worker_set_life(struct xbd_worker *w, enum worker_life to);
/* Said READY (and not lost since): confined and serving. */
bool worker_ready_now(const struct xbd_worker *w);
/* Started and READY not said yet (killed meanwhile or not). */
bool worker_starting(const struct xbd_worker *w);
/* Kill it for a fault (said in a line): its death counts. */
void worker_kill(struct xbd_worker *w, const char *why);
/* Kill one told to go that has not gone (its death is no fault). */
void worker_kill_asked(struct xbd_worker *w);
/* Send without waiting (what its socket has no room for waits): 0, or -errno (-ESRCH: not serving). */
int worker_send(struct xbd_worker *w, const struct xbd_wmsg *m, const int *fds, unsigned int nfds);
/* Hand what waits for it over as far as its socket takes it. */
void worker_flush(struct xbd_worker *w);
/* The supervisor's timer at the earliest deadline of any worker. */
void workers_arm_timer(struct xbd_workers *ws);
/* Write the main process's wake_fd: a ring failed or exited. */
void workers_wake_main(struct xbd_workers *ws);
/* A line it sent, escaped, counted against the device it names (or its own limit). */
void worker_log(struct xbd_worker *w, int level, const char *text);
/* Every device bound to w takes its next step (a connect that waited for it). */
void worker_step_devices(struct xbd_worker *w);
/* w's cgroup weights: the largest any of its devices asks for. */
void worker_weights(struct xbd_worker *w);

#endif /* XBD_BACK_SUPERVISOR_H */
