/*
 * supervisor.c: the main process's side of the workers (worker.h).  It
 * starts a domain's worker when the domain's first device connects
 * (fork, then exec of our own binary: a fresh image with nothing of this
 * process's memory), opens each connection's disk there, and stands in
 * for the worker's rings: such a ring (struct wring) is one more way of
 * serving a ring (ring-impl.h), whose report the control plane reads as
 * it reads a thread's, and whose counters are a slot of the memory it
 * shares with the worker.  A device is known here only as the binding
 * the control plane made for it (struct xbd_wdev, workers.h): its disk,
 * and the call that makes it take its next step.
 *
 * A worker's death (a crash, a seccomp kill, the OOM killer, a test's
 * SIGKILL) is the death of a daemon for its rings only: their journals
 * are consistent, so a new worker is started and every ring that was
 * running resumes from its journal; the guest sees a pause, other guests
 * nothing.  A worker that dies worker-restarts times (5) within a
 * minute is not started again: its devices are closed, with one line.
 *
 * Everything a worker says is checked (worker.h, Trust), and nothing
 * here waits for a worker: a message its socket has no room for waits in
 * a queue of its own, a question (RING_START) is answered later, like any
 * message, and each has a deadline (ANSWER_TIMEOUT_MS: to take a message,
 * to answer, to exit when told).  A worker that breaks the protocol or
 * misses a deadline is killed, and that death counts against
 * worker-restarts like a crash, whatever its devices were doing; only
 * the deaths we asked for (told to exit, SIGTERM) do not.
 *
 * A start is not waited for: the main loop goes on while the new process
 * execs and confines itself (seconds on a loaded or emulated host), and
 * its READY, handled like any message, lets the devices bound to it
 * connect (or its rings resume).  One that says nothing for
 * START_TIMEOUT_MS is killed, which is a death like any other.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blkback/datapath/ring-impl.h"
#include "blkback/datapath/ringcpu.h"
#include "blkback/workers/cgroup.h"
#include "blkback/workers/confine.h"
#include "blkback/workers/worker.h"
#include "blkback/workers/workers.h"
#include "common/clock.h"

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

extern char **environ;

/* A message a worker's socket had no room for, with its own copies of the fds. */
struct wout {
	struct wout *next;
	struct xbd_wmsg m;
	int fds[XBD_WMSG_MAX_FDS];
	unsigned int nfds;
};

/*
 * A worker process's life, as the main process sees it.  Its death
 * (SIGCHLD, xbd_workers_reaped) ends every state but NONE; what the death
 * means depends on the state it ends (the started ones restart and resume
 * their rings).  The legal edges are worker_set_life's.
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
	pid_t pid;               /* 0: none runs */
	enum worker_life life;   /* where its process is (worker_set_life) */
	enum worker_kill kill;   /* why we killed it, if we did */
	bool exiting;            /* told to exit (no device of its domain left) */
	bool resume_pending;     /* at READY, its dead predecessor's rings resume */
	bool gntdev_limited;     /* the gntdev fd it was handed has a grant limit */
	uint64_t start_deadline; /* ms (now_ms); 0 once killed for missing it */
	unsigned int owed;       /* RING_START answers it owes */
	uint64_t answer_deadline; /* ms: by when the next of them is due; 0: none owed */
	uint64_t exit_deadline;  /* ms: told to exit, gone by then or killed; 0: not told */
	struct wout *out_head, *out_tail; /* what its socket had no room for, in order */
	unsigned int nout;
	uint64_t out_deadline;   /* ms: by when it must take the oldest of them */
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
	bool given_up;
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

/* epoll's tag of timer_fd in epfd (the workers' tags are their structs). */
static char timer_tag;

static void arm_timer(struct xbd_workers *ws);
static void ring_started(struct xbd_worker *w, struct wring *wr, const struct xbd_wmsg *m);

static void wake_main(struct xbd_workers *ws)
{
	uint64_t one = 1;

	if (write(ws->host->wake_fd, &one, sizeof(one)) < 0) {
		/* Counter already set: the main loop wakes anyway. */
	}
}

/* ---- the workers' log lines ---- */

/*
 * A worker's line: escaped (its devices' names and our own words are
 * printable; anything else is not its to write), and it may name only
 * its own domain's devices; any other line is marked as its own.
 */
/* The disk of a device bound to w with this type and devid, or NULL. */
static struct xbd_disk *worker_disk(struct xbd_worker *w, const char *type, unsigned int devid)
{
	for (struct xbd_wdev *wd = w->devs; wd; wd = wd->next)
		if (wd->disk->domid == w->domid && wd->disk->devid == devid &&
		    !strcmp(wd->disk->type, type))
			return wd->disk;
	return NULL;
}

/* "vbd/D/N: ..." or "vbd3/D/N: ...", digits right after the slashes: the device it names. */
static bool line_dev(const char *t, unsigned int *domid, unsigned int *devid, bool *vbd3)
{
	char *end;

	*vbd3 = !strncmp(t, "vbd3/", 5);
	if (!*vbd3 && strncmp(t, "vbd/", 4))
		return false;
	t += *vbd3 ? 5 : 4;
	if (*t < '0' || *t > '9')
		return false;
	*domid = (unsigned int)strtoul(t, &end, 10);
	if (*end != '/' || end[1] < '0' || end[1] > '9')
		return false;
	*devid = (unsigned int)strtoul(end + 1, &end, 10);
	return *end == ':';
}

static void worker_log(struct xbd_worker *w, int level, const char *text)
{
	char buf[XBD_WORKER_LOG_MAX * 4 + 8];
	struct xbd_ratelimit *rl = &w->rl;
	unsigned int domid, devid;
	struct xbd_disk *disk = NULL;
	bool ours, vbd3;

	if (level < XBD_LOG_ERR)
		level = XBD_LOG_ERR;
	if (level > XBD_LOG_DEBUG)
		level = XBD_LOG_DEBUG;
	ours = line_dev(text, &domid, &devid, &vbd3) && domid == w->domid;
	/*
	 * A line about one of its devices counts against that device's limit,
	 * as if the ring ran here (a worker's own limits start afresh with each
	 * connection and each worker).
	 */
	if (ours)
		disk = worker_disk(w, vbd3 ? "vbd3" : "vbd", devid);
	if (disk)
		rl = &disk->crl;
	/* The limit before any work: a line over it costs a worker that floods nothing more. */
	if (!xbd_ratelimit_take(rl, level))
		return;
	/* Its guests' text was escaped there: a backslash stays as it is. */
	xbd_log_escape(buf, text, XBD_WORKER_LOG_MAX, false);
	if (ours)
		xbd_log(level, "%s", buf);
	else
		xbd_log(level, "%s: %s", w->name, buf);
}

/* ---- finding what a message is about ---- */

/* The ring w serves as ring idx of its device wid, or NULL. */
static struct wring *find_ring(struct xbd_worker *w, uint32_t wid, uint32_t idx)
{
	for (unsigned int i = 0; i < XBD_WORKER_SLOTS; i++)
		if (w->rings[i] && w->rings[i]->wid == wid && w->rings[i]->base.idx == idx)
			return w->rings[i];
	return NULL;
}

/* ---- a worker's life ---- */

static const char *const worker_life_names[] = {
	[WORKER_NONE] = "none", [WORKER_SPAWNED] = "spawned", [WORKER_STARTING] = "starting",
	[WORKER_READY] = "ready", [WORKER_STARTING_LOST] = "lost while starting",
	[WORKER_LOST] = "lost",
};

/*
 * The one place a worker's life changes.  Legal: a fork (NONE ->
 * SPAWNED), HELLO sent (-> STARTING), READY (STARTING -> READY), a kill
 * (STARTING -> STARTING_LOST, READY -> LOST), its socket failing (READY
 * -> LOST), and its death from any state (-> NONE).  Anything else is a
 * bug here, said once in a line and done anyway.
 */
static void worker_set_life(struct xbd_worker *w, enum worker_life to)
{
	enum worker_life from = w->life;
	bool legal;

	switch (to) {
	case WORKER_NONE:
		legal = true;
		break;
	case WORKER_SPAWNED:
		legal = from == WORKER_NONE;
		break;
	case WORKER_STARTING:
		legal = from == WORKER_SPAWNED;
		break;
	case WORKER_READY:
		legal = from == WORKER_STARTING;
		break;
	case WORKER_STARTING_LOST:
		legal = from == WORKER_STARTING;
		break;
	case WORKER_LOST:
		legal = from == WORKER_READY;
		break;
	default:
		legal = false;
		break;
	}
	if (!legal) {
		static bool said;

		if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
			xbd_log(XBD_LOG_ERR, "%s: its life went from %s to %s (a bug in xbd-back)",
				w->name, worker_life_names[from], worker_life_names[to]);
	}
	w->life = to;
}

/* Said READY (and not lost since): confined and serving. */
static bool worker_ready_now(const struct xbd_worker *w)
{
	return w->life == WORKER_READY;
}

/* Started and READY not said yet (killed meanwhile or not). */
static bool worker_starting(const struct xbd_worker *w)
{
	return w->life == WORKER_STARTING || w->life == WORKER_STARTING_LOST;
}

/* Nothing more goes to it: its death comes through SIGCHLD. */
static void worker_lose(struct xbd_worker *w)
{
	if (w->life == WORKER_READY)
		worker_set_life(w, WORKER_LOST);
	else if (w->life == WORKER_STARTING)
		worker_set_life(w, WORKER_STARTING_LOST);
}

/* ---- talking to a worker ---- */

static void worker_kill(struct xbd_worker *w, const char *why)
{
	if (!w->pid)
		return;
	xbd_log(XBD_LOG_ERR, "%s (pid %d) %s: killing it", w->name, (int)w->pid, why);
	kill(w->pid, SIGKILL);
	/* Its death comes through SIGCHLD (xbd_workers_reaped), and counts. */
	w->kill = WORKER_KILL_FAULT;
	worker_lose(w);
}

/* Kill a worker we told to go that has not gone (its death is no fault). */
static void worker_kill_asked(struct xbd_worker *w)
{
	if (!w->pid)
		return;
	kill(w->pid, SIGKILL);
	if (w->kill != WORKER_KILL_FAULT)
		w->kill = WORKER_KILL_ASKED;
	worker_lose(w);
}

/* A ring its worker served has ended (its answer, its start's failure, or its worker's death). */
static void ring_exited(struct wring *wr)
{
	xbd_ring_set_life(&wr->base, XBD_RING_EXITED);
}

/* A message nobody waits for: a log line, a ring that failed or exited. */
static void handle_msg(struct xbd_worker *w, const struct xbd_wmsg *m)
{
	struct wring *wr;

	/* Killed for a broken rule or deadline: what it says no longer counts. */
	if (w->kill == WORKER_KILL_FAULT)
		return;
	switch (m->type) {
	case XBD_WMSG_LOG: {
		char text[XBD_WORKER_LOG_MAX];

		memcpy(text, m->u.log.text, sizeof(text));
		text[sizeof(text) - 1] = '\0';
		worker_log(w, m->u.log.level, text);
		return;
	}
	case XBD_WMSG_RING_FAILED:
		wr = find_ring(w, m->dev, m->ring);
		if (wr && xbd_ring_life(&wr->base) != XBD_RING_IDLE) {
			xbd_ring_set_failed(&wr->base);
			wake_main(w->ws);
		}
		return;
	case XBD_WMSG_RING_EXITED:
		wr = find_ring(w, m->dev, m->ring);
		if (wr && !xbd_ring_exited(&wr->base)) {
			wr->base.rep.stop_inflight = m->u.ring_exited.stop_inflight;
			wr->base.rep.stop_busy = m->u.ring_exited.busy;
			wr->base.rep.stop_left = m->u.ring_exited.left;
			/* Only given back to this domain's next worker, which checks it. */
			if (m->u.ring_exited.thr.at_ns)
				wr->base.disk->thr_state = m->u.ring_exited.thr;
			ring_exited(wr);
			wake_main(w->ws);
		}
		return;
	case XBD_WMSG_RING_STARTED:
		wr = find_ring(w, m->dev, m->ring);
		if (!wr || !wr->base.rep.start_pending) {
			worker_kill(w, "answered a question it was not asked");
			return;
		}
		ring_started(w, wr, m);
		return;
	default:
		worker_kill(w, "sent a message it may not send");
	}
}

/* The worker's socket polled for room too while messages wait for it. */
static void watch_out(struct xbd_worker *w, bool out)
{
	struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = w };

	if (w->sock >= 0)
		epoll_ctl(w->ws->epfd, EPOLL_CTL_MOD, w->sock, &ev);
}

static void out_drop(struct xbd_worker *w)
{
	while (w->out_head) {
		struct wout *o = w->out_head;

		w->out_head = o->next;
		for (unsigned int i = 0; i < o->nfds; i++)
			close(o->fds[i]);
		free(o);
	}
	w->out_tail = NULL;
	w->nout = 0;
	w->out_deadline = 0;
}

/* Hand the waiting messages over as far as its socket takes them. */
static void out_flush(struct xbd_worker *w)
{
	while (w->out_head && w->pid && worker_ready_now(w)) {
		struct wout *o = w->out_head;
		int err = xbd_wmsg_send(w->sock, &o->m, o->fds, o->nfds, 0);

		if (err == -EAGAIN)
			return;
		if (err) {
			/* Gone: its death comes through SIGCHLD and takes the rest. */
			out_drop(w);
			break;
		}
		w->out_head = o->next;
		if (!w->out_head)
			w->out_tail = NULL;
		for (unsigned int i = 0; i < o->nfds; i++)
			close(o->fds[i]);
		free(o);
		w->nout--;
		/* It reads: the next one has a deadline of its own. */
		w->out_deadline = w->out_head ? xbd_mono_ms() + ANSWER_TIMEOUT_MS : 0;
	}
	if (!w->out_head) {
		w->out_deadline = 0;
		watch_out(w, false);
	}
}

/*
 * Send a message without waiting: what its socket has no room for now
 * waits, in order, with copies of its fds, for EPOLLOUT (out_flush); a
 * worker that takes none of it for ANSWER_TIMEOUT_MS is killed
 * (check_deadlines).  0, or -errno: -ESRCH for a worker not serving.
 */
static int send_msg(struct xbd_worker *w, const struct xbd_wmsg *m, const int *fds,
		    unsigned int nfds)
{
	struct wout *o;
	int err;

	if (!w->pid || !worker_ready_now(w))
		return -ESRCH;
	if (!w->out_head) {
		err = xbd_wmsg_send(w->sock, m, fds, nfds, 0);
		if (err != -EAGAIN)
			return err;
	}
	if (w->nout >= OUT_MAX) {
		worker_kill(w, "stopped reading its messages");
		return -ETIMEDOUT;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->m = *m;
	for (o->nfds = 0; o->nfds < nfds; o->nfds++) {
		o->fds[o->nfds] = fcntl(fds[o->nfds], F_DUPFD_CLOEXEC, 0);
		if (o->fds[o->nfds] < 0) {
			err = -errno;
			for (unsigned int i = 0; i < o->nfds; i++)
				close(o->fds[i]);
			free(o);
			return err;
		}
	}
	if (w->out_tail)
		w->out_tail->next = o;
	else
		w->out_head = o;
	w->out_tail = o;
	w->nout++;
	if (!w->out_deadline) {
		w->out_deadline = xbd_mono_ms() + ANSWER_TIMEOUT_MS;
		arm_timer(w->ws);
	}
	watch_out(w, true);
	return 0;
}

/* ---- starting a worker ---- */

static unsigned int deaths_within(const struct xbd_worker *w, uint64_t window_ms)
{
	uint64_t now = xbd_mono_ms();
	unsigned int n = 0;

	for (unsigned int i = 0; i < w->ndeaths && i < MAX_DEATHS; i++)
		if (now - w->deaths_ms[i] < window_ms)
			n++;
	return n;
}

static int make_slots(struct xbd_worker *w)
{
	size_t size = sizeof(struct xbd_wslot) * XBD_WORKER_SLOTS;
	int fd = memfd_create("xbd-back-counters", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p;

	if (fd < 0)
		return -errno;
	/* Sealed: a worker cannot shrink it under us (a SIGBUS here). */
	if (ftruncate(fd, (off_t)size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) ||
	    (p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		int err = -errno;

		close(fd);
		return err;
	}
	w->stats_fd = fd;
	w->slots = p;
	return 0;
}

/*
 * Start our own binary as `xbd-back --worker 3` with sock at fd 3:
 * posix_spawn, whose child shares our memory until its exec (vfork), so
 * the main loop pays no copy of its page tables (tens of ms for a
 * sanitizer build's), and nothing of ours runs in the child.  The binary
 * is the one we were started from (exe_fd), through /proc/self/fd as
 * fexecve(3) does.  -errno on failure.
 */
static pid_t spawn(struct xbd_workers *ws, int sock)
{
	char *argv[] = { (char *)"xbd-back", (char *)"--worker", (char *)"3", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	char exe[64];
	sigset_t none;
	pid_t pid = -1;
	int err, moved = -1;

	/* dup2 onto itself would keep close-on-exec: move it off 3 first. */
	if (sock == XBD_WORKER_FD) {
		moved = fcntl(sock, F_DUPFD_CLOEXEC, XBD_WORKER_FD + 1);
		if (moved < 0)
			return -errno;
		sock = moved;
	}
	snprintf(exe, sizeof(exe), "/proc/self/fd/%d", ws->exe_fd);
	sigemptyset(&none);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	err = posix_spawn_file_actions_adddup2(&fa, sock, XBD_WORKER_FD);
	if (!err)
		err = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDWR, 0);
	if (!err)
		err = posix_spawn_file_actions_adddup2(&fa, STDIN_FILENO, STDOUT_FILENO);
	if (!err)
		err = posix_spawnattr_setsigmask(&at, &none);
	if (!err)
		err = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
	if (!err)
		err = posix_spawn(&pid, exe, &fa, &at, argv, ws->envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (moved >= 0)
		close(moved);
	return err ? -err : pid;
}

static void said_skipped(struct xbd_workers *ws, const struct xbd_worker *w, uint32_t skipped)
{
	char names[400];
	uint32_t fresh = skipped & ~ws->said;

	if (!fresh)
		return;
	ws->said |= fresh;
	xbd_confine_describe(fresh, names, sizeof(names));
	xbd_log(XBD_LOG_WARNING, "%s could not confine itself fully: skipped %s", w->name, names);
}

/* The earliest of w's deadlines (0: none). */
static uint64_t worker_deadline(const struct xbd_worker *w)
{
	uint64_t d[4] = { worker_starting(w) ? w->start_deadline : 0, w->answer_deadline,
			  w->out_deadline, w->exit_deadline };
	uint64_t at = 0;

	if (!w->pid)
		return 0;
	for (unsigned int i = 0; i < 4; i++)
		if (d[i] && (!at || d[i] < at))
			at = d[i];
	return at;
}

/* timer_fd at the earliest deadline of any worker (none: disarmed). */
static void arm_timer(struct xbd_workers *ws)
{
	struct itimerspec its;
	uint64_t at = 0;

	for (struct xbd_worker *w = ws->list; w; w = w->next) {
		uint64_t d = worker_deadline(w);

		if (d && (!at || d < at))
			at = d;
	}
	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = (time_t)(at / 1000);
	its.it_value.tv_nsec = (long)(at % 1000) * 1000000;
	timerfd_settime(ws->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* Every device bound to w takes its next step (a connect that waited for it). */
static void mark_bound(struct xbd_worker *w)
{
	for (struct xbd_wdev *wd = w->devs; wd; wd = wd->next)
		wd->step(wd->arg);
}

/* The larger of *max and v into *max; true if both ask for a weight and differ. */
static bool weight_max(unsigned int *max, unsigned int v)
{
	bool differ = v && *max && v != *max;

	if (v > *max)
		*max = v;
	return differ;
}

/*
 * The weights of w's cgroup: a worker serves all of its domain's disks,
 * so it takes the largest weight any of them asks for (said once when
 * they differ).  Called whenever a disk binds, leaves or is set.
 */
static void worker_weights(struct xbd_worker *w)
{
	unsigned int io = 0, cpu = 0;
	bool differ = false;

	if (!w->cg_placed)
		return;
	for (struct xbd_wdev *wd = w->devs; wd; wd = wd->next) {
		differ |= weight_max(&io, wd->disk->o.io_weight);
		differ |= weight_max(&cpu, wd->disk->o.cpu_weight);
	}
	if (differ && !w->cg_said_differ) {
		w->cg_said_differ = true;
		xbd_log(XBD_LOG_INFO, "%s: its disks ask for different weights: its cgroup takes "
			"the largest, io-weight %u, cpu-weight %u", w->name, io, cpu);
	}
	xbd_cgroup_weights(w->ws->cg, w->domid, io, cpu, &w->cg_io, &w->cg_cpu);
}

/*
 * Fork and exec the worker and hand it HELLO; its READY comes later
 * (worker_ready).  0 once it runs, or -errno.
 */
static int worker_start(struct xbd_worker *w)
{
	struct xbd_workers *ws = w->ws;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = w };
	struct xbd_wmsg m;
	int sv[2], fds[2], nfds = 1, err;
	bool limited = false;

	if (!w->slots && (err = make_slots(w)))
		return err;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_HELLO;
	m.u.hello.self_domid = ws->self_domid;
	m.u.hello.domid = w->domid;
	m.u.hello.uid = m.u.hello.gid = w->uid;
	m.u.hello.log_level = xbd_log_level();
	m.u.hello.main_pid = (uint32_t)getpid();
	m.u.hello.sanitizers = ws->sanitizers;
	fds[0] = w->stats_fd;
	if (ws->sim) {
		m.u.hello.platform = XBD_WPLAT_SIM;
		memcpy(m.u.hello.sim_dir, ws->sim_dir, sizeof(m.u.hello.sim_dir));
	} else {
		m.u.hello.platform = XBD_WPLAT_XEN;
		fds[1] = xbd_xen_gntdev_open(WORKER_MAX_GRANTS, &limited);
		if (fds[1] < 0) {
			close(sv[0]);
			close(sv[1]);
			return fds[1];
		}
		nfds = 2;
	}
#ifdef XBD_TEST_HOOKS
	/* The forbidden call of the tests: the domain's first worker only. */
	if (!w->restarts)
		memcpy(m.u.hello.test_hook, ws->test_hook, sizeof(m.u.hello.test_hook));
	if (ws->test_delay_ms && ws->test_delay_domid == w->domid)
		m.u.hello.test_start_delay_ms = ws->test_delay_ms;
	if (ws->test_misbehave[0] && ws->test_misbehave_domid == w->domid) {
		/* "silent-once": the domain's first worker is silent, the next ones are not */
		if (!strcmp(ws->test_misbehave, "silent-once")) {
			if (!w->restarts)
				memcpy(m.u.hello.test_misbehave, "silent", sizeof("silent"));
		} else {
			memcpy(m.u.hello.test_misbehave, ws->test_misbehave,
			       sizeof(m.u.hello.test_misbehave));
		}
	}
#endif
	w->pid = spawn(ws, sv[1]);
	close(sv[1]);
	if (w->pid < 0) {
		err = w->pid;
		w->pid = 0;
		close(sv[0]);
		if (nfds == 2)
			close(fds[1]);
		return err;
	}
	worker_set_life(w, WORKER_SPAWNED);
	w->sock = sv[0];
	w->exiting = false;
	w->gntdev_limited = limited;
	/* Into its cgroup before HELLO, so before it serves anything. */
	if (ws->cg) {
		w->cg_placed = !xbd_cgroup_place(ws->cg, w->domid, w->pid);
		w->cg_io = w->cg_cpu = 0;
		worker_weights(w);
	}
	/* (A fresh socket's buffer takes HELLO at once: nothing waits here.) */
	err = xbd_wmsg_send(w->sock, &m, fds, (unsigned int)nfds, ANSWER_TIMEOUT_MS);
	if (nfds == 2)
		close(fds[1]);
	if (err) {
		/* Its death comes through SIGCHLD. */
		xbd_log(XBD_LOG_ERR, "%s did not start: %s", w->name, strerror(-err));
		kill(w->pid, SIGKILL);
		return err;
	}
	worker_set_life(w, WORKER_STARTING);
	w->start_deadline = xbd_mono_ms() + ws->start_timeout_ms;
	w->budget = MSG_RATE;
	w->budget_ms = xbd_mono_ms();
	epoll_ctl(ws->epfd, EPOLL_CTL_ADD, w->sock, &ev);
	arm_timer(ws);
	xbd_log(XBD_LOG_VERBOSE, "%s starting (pid %d)", w->name, (int)w->pid);
	return 0;
}

static void resume_all(struct xbd_worker *w);
static void for_rings(struct xbd_worker *w, void (*fn)(struct wring *wr, bool running, void *arg),
		      void *arg);
static void end_stopped(struct wring *wr, bool running, void *arg);

/* Its READY: it is confined and serves; what waited for it goes on. */
static void worker_ready(struct xbd_worker *w, const struct xbd_wmsg *m)
{
	struct xbd_workers *ws = w->ws;

	worker_set_life(w, WORKER_READY);
	arm_timer(ws);
	said_skipped(ws, w, m->u.skipped | (ws->sim || w->gntdev_limited ? 0 : XBD_CONFINE_GNTDEV));
	xbd_log(XBD_LOG_VERBOSE, "%s started (pid %d, uid %u)", w->name, (int)w->pid, w->uid);
	if (w->resume_pending) {
		/* Rings told to stop while it started (their frontend went) stop here. */
		w->resume_pending = false;
		for_rings(w, end_stopped, NULL);
		resume_all(w);
		wake_main(ws);
	}
	mark_bound(w);
}

/*
 * timer_fd fired: a worker that has not said READY, answered, taken a
 * waiting message, or exited when told by its deadline is killed.
 */
static void check_deadlines(struct xbd_workers *ws)
{
	uint64_t now = xbd_mono_ms(), x;

	if (read(ws->timer_fd, &x, sizeof(x)) < 0 && errno != EAGAIN)
		xbd_log(XBD_LOG_DEBUG, "workers' timer: %s", strerror(errno));
	for (struct xbd_worker *w = ws->list; w; w = w->next) {
		char why[80];

		if (!w->pid)
			continue;
		if (worker_starting(w) && w->start_deadline && w->start_deadline <= now) {
			w->start_deadline = 0;
			snprintf(why, sizeof(why), "did not say it was ready within %u ms",
				 ws->start_timeout_ms);
			worker_kill(w, why);
		} else if (w->answer_deadline && w->answer_deadline <= now) {
			w->answer_deadline = 0;
			snprintf(why, sizeof(why), "did not answer within %u ms", ANSWER_TIMEOUT_MS);
			worker_kill(w, why);
		} else if (w->out_deadline && w->out_deadline <= now) {
			w->out_deadline = 0;
			snprintf(why, sizeof(why), "took none of its messages for %u ms",
				 ANSWER_TIMEOUT_MS);
			worker_kill(w, why);
		} else if (w->exit_deadline && w->exit_deadline <= now) {
			w->exit_deadline = 0;
			xbd_log(XBD_LOG_VERBOSE, "%s (pid %d) did not exit within %u ms of being told: "
				"killing it", w->name, (int)w->pid, ANSWER_TIMEOUT_MS);
			worker_kill_asked(w);
		}
	}
	arm_timer(ws);
}

static struct xbd_worker *worker_get(struct xbd_workers *ws, uint32_t domid)
{
	struct xbd_worker *w;

	for (w = ws->list; w; w = w->next)
		if (w->domid == domid)
			return w;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->ws = ws;
	w->domid = domid;
	w->uid = ws->opts->worker_uid_base + domid;
	w->sock = w->stats_fd = -1;
	snprintf(w->name, sizeof(w->name), "worker of domain %u", domid);
	xbd_ratelimit_init(&w->rl);
	w->rl.who = w->name;
	w->rl.burst = WORKER_LOG_BURST;
	w->next = ws->list;
	ws->list = w;
	return w;
}

static void worker_free(struct xbd_worker *w)
{
	struct xbd_worker **pp;

	for (pp = &w->ws->list; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	if (w->sock >= 0)
		close(w->sock);
	if (w->slots)
		munmap(w->slots, sizeof(struct xbd_wslot) * XBD_WORKER_SLOTS);
	if (w->stats_fd >= 0)
		close(w->stats_fd);
	xbd_ratelimit_destroy(&w->rl);
	free(w);
}

/*
 * No device of w's domain is connected and no process runs: free it, but
 * while its deaths of the last minute count (the restart-storm limit),
 * keep just that record, without counters, socket or process.
 */
static void worker_idle(struct xbd_worker *w)
{
	if (!deaths_within(w, DEATH_WINDOW_MS)) {
		worker_free(w);
		return;
	}
	if (w->slots)
		munmap(w->slots, sizeof(struct xbd_wslot) * XBD_WORKER_SLOTS);
	w->slots = NULL;
	if (w->stats_fd >= 0)
		close(w->stats_fd);
	w->stats_fd = -1;
	memset(w->rings, 0, sizeof(w->rings));
}

/* ---- devices ---- */

/* Open wd's connection in the worker (a new device number). */
static int dev_open(struct xbd_worker *w, struct xbd_wdev *wd)
{
	const struct xbd_disk *disk = wd->disk;
	struct xbd_wmsg m;
	struct xbd_wmsg_dev_open *o = &m.u.dev_open;
	int fds[XBD_STORE_EXPORT_FDS], err;

	memset(&m, 0, sizeof(m));
	err = xbd_store_export(disk->eng, disk->store, &o->store, fds);
	if (err)
		return err;
	if (!++w->next_wid)
		++w->next_wid;
	m.type = XBD_WMSG_DEV_OPEN;
	m.dev = w->next_wid;
	snprintf(o->type, sizeof(o->type), "%s", disk->type);
	o->domid = disk->domid;
	o->devid = disk->devid;
	snprintf(o->name, sizeof(o->name), "%s", disk->name);
	o->o = disk->o;
	o->lim = disk->lim;
	o->abi = disk->abi;
	o->nr_rings = disk->nr_rings;
	o->persistent = disk->persistent;
	o->copy = disk->copy;
	o->thr = disk->thr_state;
	err = send_msg(w, &m, fds, o->store.nfds);
	if (err)
		return err;
	wd->wid = m.dev;
	return 0;
}

static const struct xbd_ring_ops wring_ops;

struct xbd_wdev *xbd_wdev_new(struct xbd_workers *ws, struct xbd_disk *disk,
			      void (*step)(void *arg), void *arg)
{
	struct xbd_wdev *wd;

	if (!ws)
		return NULL;
	wd = calloc(1, sizeof(*wd));
	if (!wd)
		return NULL;
	wd->srv.ops = &wring_ops;
	wd->ws = ws;
	wd->disk = disk;
	wd->step = step;
	wd->arg = arg;
	return wd;
}

int xbd_worker_bind(struct xbd_wdev *wd, struct xbd_ring_server **srv)
{
	struct xbd_store_export trial;
	int tfds[XBD_STORE_EXPORT_FDS];
	struct xbd_worker *w;
	int err;

	*srv = &xbd_ring_here;
	if (!wd)
		return 0;
	wd->wid = 0;
	/* (The export hands out the store's own fds, no copies: a trial costs nothing.) */
	memset(&trial, 0, sizeof(trial));
	if (xbd_store_export(wd->disk->eng, wd->disk->store, &trial, tfds) == -EOPNOTSUPP) {
		if (!wd->said_here)
			XBD_DISK_LOG(wd->disk, XBD_LOG_INFO, "served by the main process: %s%s engine cannot "
			     "run in a confined worker yet", trial.engine[0] ? "the store under its "
			     : "its ", wd->disk->eng->name);
		wd->said_here = true;
		return 0;
	}
	w = wd->worker ? wd->worker : worker_get(wd->ws, wd->disk->domid);
	if (!w)
		return -ENOMEM;
	if (!wd->worker) {
		wd->worker = w;
		wd->next = w->devs;
		w->devs = wd;
		w->refs++;
		worker_weights(w);
	}
	*srv = &wd->srv;
	/*
	 * Told to exit (its domain had no device left) when a device of the
	 * domain comes back: it goes first (by its exit deadline), then a new
	 * one starts for this device (xbd_workers_reaped calls its step).
	 */
	if (w->pid && w->exiting)
		return -EINPROGRESS;
	if (!w->pid) {
		unsigned int n = deaths_within(w, DEATH_WINDOW_MS);

		if (n >= wd->ws->opts->worker_restarts) {
			XBD_DISK_LOG(wd->disk, XBD_LOG_ERR, "%s died %u times within %u s: not started again yet",
			     w->name, n, DEATH_WINDOW_MS / 1000);
			return -EAGAIN;
		}
		err = worker_start(w);
		if (err)
			return err;
	}
	return worker_starting(w) ? -EINPROGRESS : 0;
}

int xbd_worker_attach(struct xbd_wdev *wd)
{
	int err;

	if (!wd || !wd->worker)
		return 0; /* served here */
	if (!worker_ready_now(wd->worker))
		err = -ESRCH;
	else
		err = dev_open(wd->worker, wd);
	if (err)
		XBD_DISK_LOG(wd->disk, XBD_LOG_ERR, "cannot hand the disk to %s: %s", wd->worker->name,
		     strerror(-err));
	return err;
}

/* wd leaves its worker, which exits with its domain's last device. */
static void unbind(struct xbd_wdev *wd)
{
	struct xbd_worker *w = wd->worker;
	struct xbd_wdev **pp;
	struct xbd_wmsg m;

	if (!w)
		return;
	for (pp = &w->devs; *pp; pp = &(*pp)->next)
		if (*pp == wd) {
			*pp = wd->next;
			break;
		}
	wd->next = NULL;
	wd->worker = NULL;
	if (--w->refs) {
		worker_weights(w);
		return;
	}
	if (!w->pid) {
		worker_idle(w);
		return;
	}
	/* Its domain's last device: it exits once no ring runs (its death is then quiet). */
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_EXIT;
	w->exiting = true;
	if (send_msg(w, &m, NULL, 0)) {
		worker_kill_asked(w);
		return;
	}
	/* Every ring of its domain has exited already: nothing keeps it long. */
	w->exit_deadline = xbd_mono_ms() + ANSWER_TIMEOUT_MS;
	arm_timer(w->ws);
}

void xbd_worker_dev_done(struct xbd_wdev *wd)
{
	struct xbd_wmsg m;

	if (!wd)
		return;
	if (wd->worker && wd->wid) {
		memset(&m, 0, sizeof(m));
		m.type = XBD_WMSG_DEV_CLOSE;
		m.dev = wd->wid;
		/* A worker that is gone took the device with it. */
		send_msg(wd->worker, &m, NULL, 0);
	}
	wd->wid = 0;
	/* Disconnected: the worker runs while its domain has a connected device. */
	unbind(wd);
}

void xbd_wdev_free(struct xbd_wdev *wd)
{
	if (!wd)
		return;
	unbind(wd);
	free(wd);
}

void xbd_worker_resize(struct xbd_wdev *wd)
{
	struct xbd_wmsg m;

	if (!wd || !wd->worker || !wd->wid)
		return;
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_RESIZE;
	m.dev = wd->wid;
	m.u.nr_sectors = __atomic_load_n(&wd->disk->lim.nr_sectors, __ATOMIC_RELAXED);
	send_msg(wd->worker, &m, NULL, 0);
}

bool xbd_worker_set(struct xbd_wdev *wd, const struct xbd_disk_opts *o, uint64_t mask)
{
	struct xbd_wmsg m;

	if (!wd || !wd->worker)
		return false;
	/* (wd->disk->o has the new values already.) */
	worker_weights(wd->worker);
	if (!wd->wid)
		return true;
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_SET;
	m.dev = wd->wid;
	m.u.set.o = *o;
	m.u.set.mask = mask;
	m.u.set.log_level = -100;
	send_msg(wd->worker, &m, NULL, 0);
	return true;
}

void xbd_workers_log_level(struct xbd_workers *ws, int level)
{
	struct xbd_wmsg m;

	if (!ws)
		return;
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_SET;
	m.u.set.log_level = level;
	for (struct xbd_worker *w = ws->list; w; w = w->next)
		send_msg(w, &m, NULL, 0);
}

bool xbd_worker_info(const struct xbd_wdev *wd, pid_t *pid, uint32_t *uid,
		     unsigned int *restarts)
{
	const struct xbd_worker *w = wd ? wd->worker : NULL;

	if (!w)
		return false;
	*pid = worker_ready_now(w) ? w->pid : 0;
	*uid = w->uid;
	*restarts = w->restarts;
	return true;
}

/* ---- rings ---- */

/*
 * Start wr in worker w at counter slot (counting on from what the slot
 * holds): RING_START with its journal and, on Xen, an event channel fd
 * bound to the frontend's domain only.  -EINPROGRESS: asked; its answer
 * comes as a message (ring_started), within ANSWER_TIMEOUT_MS or the
 * worker is killed.  Meanwhile wr is a ring that runs (its stop is sent
 * after the start) with rep.start_pending set.  restart: it resumes a dead
 * worker's ring, which runs on.
 */
static int ring_start_in(struct wring *wr, struct xbd_worker *w, unsigned int slot, bool restart)
{
	struct xbd_ring *r = &wr->base;
	struct xbd_wmsg m;
	struct xbd_wmsg_ring_start *rs = &m.u.ring_start;
	int fds[2], efd = -1, err;
	unsigned int nfds = 0;

	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_RING_START;
	m.dev = wr->wd->wid;
	m.ring = r->idx;
	rs->nr_pages = r->p.nr_pages;
	memcpy(rs->refs, r->p.refs, sizeof(rs->refs));
	rs->remote_port = r->p.remote_port;
	rs->slot = slot;
	rs->resume = r->p.resume;
	rs->cpu = r->cpu;
	/* A dead worker's end of the channel, which only we can tell is dead (sim). */
	if (r->p.resume)
		xbd_evtchn_reclaim(w->ws->host->plat, r->disk->domid, r->p.remote_port);
	if (r->p.journal_fd >= 0) {
		rs->journal = 1;
		fds[nfds++] = r->p.journal_fd;
	}
	if (!w->ws->sim) {
		char saved[XBD_RINGCPU_TAG_LEN];
		bool restricted;

		/* Its interrupt, made when the worker binds the fd, is named after us. */
		xbd_ringcpu_tag(r->irq_tag, saved);
		efd = xbd_xen_evtchn_open_for(r->disk->domid, &restricted);
		xbd_ringcpu_untag(r->irq_tag, saved);
		if (efd < 0)
			return efd;
		if (!restricted && !(w->ws->said & XBD_CONFINE_EVTCHN))
			said_skipped(w->ws, w, XBD_CONFINE_EVTCHN);
		rs->evtchn = 1;
		fds[nfds++] = efd;
	}
	err = send_msg(w, &m, fds, nfds);
	if (efd >= 0)
		close(efd);
	if (err)
		return err;
	wr->w = w;
	wr->slot = slot;
	w->rings[slot] = wr;
	wr->wid = wr->wd->wid;
	wr->start_restart = restart;
	r->stats = &w->slots[slot].stats;
	r->seen = &w->slots[slot].seen;
	r->stop = false;
	__atomic_store_n(&r->rep.failed, false, __ATOMIC_RELAXED);
	/* A dead worker's ring runs on, in the new one. */
	if (!restart)
		xbd_ring_set_life(r, XBD_RING_RUNNING);
	r->rep.start_pending = true;
	r->rep.start_err = 0;
	if (!w->owed++) {
		w->answer_deadline = xbd_mono_ms() + ANSWER_TIMEOUT_MS;
		arm_timer(w->ws);
	}
	return -EINPROGRESS;
}

/* A dead worker's device whose rings all answered in its successor: said once. */
static void restart_said(struct xbd_wdev *wd, struct xbd_worker *w)
{
	unsigned int i, redone = 0, n = 0;

	for (i = 0; i < XBD_WORKER_SLOTS; i++) {
		const struct wring *wr = w->rings[i];

		if (!wr || wr->wd != wd || !wr->start_restart)
			continue;
		if (wr->base.rep.start_pending)
			return;
		if (!wr->base.rep.start_err) {
			redone += wr->base.rep.nredo;
			n++;
		}
	}
	if (n)
		XBD_DISK_LOG(wd->disk, XBD_LOG_INFO, "resumed after its worker died: %u request%s re-executed",
		     redone, redone == 1 ? "" : "s");
}

/* RING_STARTED: the answer wr's start waited for. */
static void ring_started(struct xbd_worker *w, struct wring *wr, const struct xbd_wmsg *m)
{
	struct xbd_ring *r = &wr->base;
	int err = m->u.ring_started.err;

	r->rep.start_pending = false;
	w->answer_deadline = --w->owed ? xbd_mono_ms() + ANSWER_TIMEOUT_MS : 0;
	arm_timer(w->ws);
	r->rep.journal_err = m->u.ring_started.journal_err;
	r->rep.nredo = m->u.ring_started.nredo;
	r->rep.resumed = m->u.ring_started.resumed;
	if (err) {
		/* Nothing runs there: the ring has stopped; its slot goes with wring_stop. */
		r->rep.start_err = err < 0 ? err : -EIO;
		ring_exited(wr);
		wake_main(w->ws);
	} else {
		r->rep.port = m->u.ring_started.port;
		xbd_ringcpu_place_irq(r->name, r->cpu, r->irq_tag);
	}
	if (!wr->start_restart) {
		/* The connect that waits for it takes its next step. */
		wr->wd->step(wr->wd->arg);
		return;
	}
	if (r->rep.start_err) {
		/* Not taken over: the device is closed (its failed ring says so). */
		xbd_ring_set_failed(r);
		xbd_log_limited(&r->disk->crl, XBD_LOG_ERR, "%s: cannot take the ring over in a "
				"new worker: %s", r->name, strerror(-r->rep.start_err));
	}
	restart_said(wr->wd, w);
}

/* wring_ops.create: a ring of the device wd's binding serves. */
static struct xbd_ring *wring_create(struct xbd_ring_server *srv, struct xbd_disk *disk,
				     unsigned int idx)
{
	struct wring *wr = calloc(1, sizeof(*wr));

	if (!wr)
		return NULL;
	xbd_ring_base_init(&wr->base, &wring_ops, disk, idx);
	wr->wd = (struct xbd_wdev *)srv;
	return &wr->base;
}

/* wring_ops.start: ask the device's worker to start the ring (its answer is due). */
static int wring_start(struct xbd_ring *r)
{
	struct wring *wr = (struct wring *)r;
	struct xbd_worker *w = wr->wd->worker;
	unsigned int slot;
	int err;

	/* Kept when a worker is replaced: only a new connection picks again. */
	if (r->cpu < 0)
		r->cpu = xbd_ringcpu_pick();
	if (!w || !worker_ready_now(w))
		return -ESRCH;
	for (slot = 0; slot < XBD_WORKER_SLOTS && w->rings[slot]; slot++)
		;
	if (slot == XBD_WORKER_SLOTS)
		return -ENOSPC;
	memset(&w->slots[slot], 0, sizeof(w->slots[slot]));
	err = ring_start_in(wr, w, slot, false);
	return err;
}

/* wring_ops.request_stop */
static void wring_request_stop(struct xbd_ring *r)
{
	struct wring *wr = (struct wring *)r;
	struct xbd_wmsg m;

	if (r->stop || xbd_ring_exited(r))
		return;
	r->stop = true;
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_RING_STOP;
	m.dev = wr->wid;
	m.ring = r->idx;
	send_msg(wr->w, &m, NULL, 0);
}

/*
 * wring_ops.stop: wait (bounded) for the worker to stop the ring, then
 * take its counters back.  A ring no worker took (its start failed before,
 * or it was stopped already) holds nothing here.
 */
static void wring_stop(struct xbd_ring *r)
{
	struct wring *wr = (struct wring *)r;
	struct xbd_worker *w = wr->w;

	xbd_ringcpu_put(r->cpu);
	r->cpu = -1;
	if (!w)
		return;
	if (!xbd_ring_exited(r)) {
		uint64_t deadline = w->ws->host->stop_deadline_ms ? w->ws->host->stop_deadline_ms
				    : xbd_mono_ms() + ANSWER_TIMEOUT_MS;

		wring_request_stop(r);
		/*
		 * As a thread is joined, until it answered everything or its
		 * worker died, but never past the deadline: then its worker is
		 * killed, and the ring's journal keeps what it had taken and not
		 * answered for the next daemon, as after a crash.
		 */
		while (!xbd_ring_exited(r) && w->pid && worker_ready_now(w)) {
			struct xbd_wmsg m;
			int fds[XBD_WMSG_MAX_FDS];
			unsigned int nfds = 0, i;
			uint64_t now = xbd_mono_ms();
			int err;

			if (now >= deadline) {
				xbd_log_limited(&r->disk->crl, XBD_LOG_WARNING, "%s: not stopped by the "
						"deadline: %s killed, its journal keeps what it had "
						"not answered", r->name, w->name);
				worker_kill_asked(w);
				break;
			}
			out_flush(w);
			err = xbd_wmsg_recv(w->sock, &m, fds, &nfds,
					    (int)(deadline - now < 50 ? deadline - now : 50));

			for (i = 0; i < nfds; i++)
				close(fds[i]);
			if (err == -ETIMEDOUT || err == -EAGAIN)
				continue;
			if (err)
				break;
			handle_msg(w, &m);
		}
		if (!xbd_ring_exited(r)) {
			r->disk->unclean = true;
			ring_exited(wr);
		}
	}
	/* The counters stay with the device (xbdctl's totals); the slot is free again. */
	r->own_stats = w->slots[wr->slot].stats;
	r->stats = &r->own_stats;
	r->seen = &r->own_seen;
	w->rings[wr->slot] = NULL;
	wr->w = NULL;
	xbd_ring_set_life(r, XBD_RING_IDLE);
}

/* wring_ops.destroy */
static void wring_destroy(struct xbd_ring *r)
{
	free(r);
}

/* wring_ops.shared: mapped in its worker only: the header as its thread last saw it. */
static bool wring_shared(const struct xbd_ring *r, struct xring_shared_idx *sh)
{
	const struct wring *wr = (const struct wring *)r;
	const struct xbd_ring_seen *seen = r->seen;

	if (!wr->w)
		return false;
	sh->req_prod = __atomic_load_n(&seen->shared.req_prod, __ATOMIC_RELAXED);
	sh->req_event = __atomic_load_n(&seen->shared.req_event, __ATOMIC_RELAXED);
	sh->rsp_prod = __atomic_load_n(&seen->shared.rsp_prod, __ATOMIC_RELAXED);
	sh->rsp_event = __atomic_load_n(&seen->shared.rsp_event, __ATOMIC_RELAXED);
	return true;
}

static const struct xbd_ring_ops wring_ops = {
	.create = wring_create,
	.start = wring_start,
	.request_stop = wring_request_stop,
	.stop = wring_stop,
	.destroy = wring_destroy,
	.shared = wring_shared,
};

/* ---- deaths ---- */

static void describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
		snprintf(buf, len, "was killed by seccomp (SIGSYS: a system call outside its "
			 "allow-list, which the kernel's audit log names: type=1326)");
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "died");
}

/*
 * Every ring w serves: call fn for it, running unless it has exited or
 * was told to stop (its device disconnected, or closes).
 */
static void for_rings(struct xbd_worker *w, void (*fn)(struct wring *wr, bool running, void *arg),
		      void *arg)
{
	for (unsigned int i = 0; i < XBD_WORKER_SLOTS; i++) {
		struct wring *wr = w->rings[i];

		if (wr)
			fn(wr, !xbd_ring_exited(&wr->base) && !wr->base.stop, arg);
	}
}

/* A ring that was stopping when its worker died: it has stopped (its journal is consistent). */
static void end_ring(struct wring *wr, bool running, void *arg)
{
	struct xbd_ring *r = &wr->base;
	bool *resume = arg;

	r->disk->unclean = true;
	if (r->rep.start_pending) {
		/* Its start was never answered: nothing of it ran to resume. */
		r->rep.start_pending = false;
		r->rep.start_err = -ESRCH;
		if (wr->start_restart)
			xbd_ring_set_failed(r);
		else
			wr->wd->step(wr->wd->arg);
		ring_exited(wr);
		return;
	}
	if (running && *resume)
		return;
	if (running)
		xbd_ring_set_failed(r);
	ring_exited(wr);
}

/*
 * A dead worker's ring that was told to stop before its successor was
 * ready (the dead one's journal is consistent): stopped, not resumed.
 */
static void end_stopped(struct wring *wr, bool running, void *arg)
{
	(void)arg;
	if (!running && !xbd_ring_exited(&wr->base)) {
		wr->base.disk->unclean = true;
		ring_exited(wr);
	}
}

/* Whether a ring of wd that w serves still runs. */
static bool dev_running(struct xbd_worker *w, const struct xbd_wdev *wd)
{
	for (unsigned int i = 0; i < XBD_WORKER_SLOTS; i++)
		if (w->rings[i] && w->rings[i]->wd == wd && !xbd_ring_exited(&w->rings[i]->base))
			return true;
	return false;
}

/* Open each device that has running rings in the new worker, and resume those rings. */
static void resume_all(struct xbd_worker *w)
{
	for (struct xbd_wdev *wd = w->devs; wd; wd = wd->next) {
		int err;

		if (!dev_running(w, wd))
			continue;
		err = dev_open(w, wd);
		for (unsigned int i = 0; i < XBD_WORKER_SLOTS; i++) {
			struct wring *wr = w->rings[i];

			if (!wr || wr->wd != wd || xbd_ring_exited(&wr->base))
				continue;
			wr->base.p.resume = true;
			if (!err)
				err = ring_start_in(wr, w, wr->slot, true);
			if (err == -EINPROGRESS) {
				/* Said once every ring of the device answered (restart_said). */
				err = 0;
				continue;
			}
			if (err) {
				/* Not taken over: the device is closed (its failed ring says so). */
				xbd_ring_set_failed(&wr->base);
				ring_exited(wr);
				xbd_log_limited(&wd->disk->crl, XBD_LOG_ERR, "%s: cannot take the ring "
						"over in a new worker: %s", wr->base.name, strerror(-err));
			}
		}
	}
}

bool xbd_workers_reaped(struct xbd_workers *ws, pid_t pid, int status)
{
	struct xbd_worker *w;
	char how[160];
	unsigned int n;
	bool resume, was_ready, was_starting, killed, asked;

	if (!ws)
		return false;
	for (w = ws->list; w && w->pid != pid; w = w->next)
		;
	if (!w)
		return false;
	/* Ready, or started in its place to take its rings over: they resume. */
	was_ready = w->life == WORKER_READY || w->life == WORKER_LOST || w->resume_pending;
	was_starting = worker_starting(w) && !w->resume_pending;
	killed = w->kill == WORKER_KILL_FAULT;
	asked = w->kill == WORKER_KILL_ASKED;
	w->pid = 0;
	worker_set_life(w, WORKER_NONE);
	w->resume_pending = false;
	w->kill = WORKER_NOT_KILLED;
	if (w->cg_placed)
		xbd_cgroup_remove(ws->cg, w->domid);
	w->cg_placed = false;
	w->owed = 0;
	w->answer_deadline = w->exit_deadline = 0;
	out_drop(w);
	arm_timer(ws);
	if (w->sock >= 0) {
		epoll_ctl(ws->epfd, EPOLL_CTL_DEL, w->sock, NULL);
		close(w->sock);
		w->sock = -1;
	}
	/*
	 * Told to go (its domain has no device left, or SIGTERM), and gone as
	 * told: exited 0, or killed because it was slow to.  Any other death
	 * counts below, whatever its devices were doing: a worker we killed
	 * for a missed deadline and then told to exit (its failed connect
	 * released its last device) was once taken for one that exited.
	 */
	if (w->exiting && !killed && (asked || (WIFEXITED(status) && !WEXITSTATUS(status)))) {
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			describe_status(status, how, sizeof(how));
			xbd_log(XBD_LOG_VERBOSE, "%s (pid %d) %s while exiting", w->name, (int)pid, how);
		}
		/* A device of its domain came back meanwhile: it waits for a new one. */
		if (w->refs && !ws->host->stopping)
			mark_bound(w);
		if (!w->refs)
			worker_idle(w);
		return true;
	}
#ifdef XBD_TEST_HOOKS
	/* A crash point killed the worker: the daemon dies at that instant too. */
	if (ws->test_crash && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		raise(SIGKILL);
#endif
	describe_status(status, how, sizeof(how));
	w->deaths_ms[w->ndeaths++ % MAX_DEATHS] = xbd_mono_ms();
	n = deaths_within(w, DEATH_WINDOW_MS);
	resume = was_ready && n < ws->opts->worker_restarts && w->refs && !ws->host->stopping &&
		 !w->exiting;
	xbd_log(XBD_LOG_ERR, "%s (pid %d) %s%s", w->name, (int)pid, how,
		was_starting ? " before it was ready" : !was_ready ? ""
		: resume ? ": starting a new one, its rings resume from their journals" : "");
	for_rings(w, end_ring, &resume);
	/* Its devices went with it; a new worker opens them anew (resume_all). */
	for (struct xbd_wdev *wd = w->devs; wd; wd = wd->next)
		wd->wid = 0;
	if (resume) {
		w->restarts++;
		if (worker_start(w)) {
			resume = false;
			for_rings(w, end_ring, &resume);
		} else {
			w->resume_pending = true; /* worker_ready */
		}
	}
	if (!resume && was_ready && n >= ws->opts->worker_restarts && !w->given_up) {
		w->given_up = true;
		xbd_log(XBD_LOG_ERR, "%s died %u times within %u s: not restarted, its devices "
			"are closed", w->name, n, DEATH_WINDOW_MS / 1000);
	}
	/* A first start that failed: the connects that wait for it try again (or meet the limit). */
	if (was_starting && w->refs && !w->exiting && !ws->host->stopping)
		mark_bound(w);
	/* No device of its domain connected: nothing to keep but its deaths. */
	if (!w->refs)
		worker_idle(w);
	wake_main(ws);
	return true;
}

/* ---- the main loop's side ---- */

int xbd_workers_fd(const struct xbd_workers *ws)
{
	return ws ? ws->epfd : -1;
}

/* MSG_RATE a second since it was last filled, up to one second's worth. */
static void budget_fill(struct xbd_worker *w)
{
	uint64_t now = xbd_mono_ms(), add = (now - w->budget_ms) * MSG_RATE / 1000;

	if (!add)
		return;
	w->budget = w->budget + add > MSG_RATE ? MSG_RATE : w->budget + add;
	w->budget_ms = now;
}

void xbd_workers_dispatch(struct xbd_workers *ws)
{
	struct epoll_event evs[16];
	int n, i;

	if (!ws)
		return;
	n = epoll_wait(ws->epfd, evs, 16, 0);
	for (i = 0; i < n; i++) {
		struct xbd_worker *w = evs[i].data.ptr;

		if (evs[i].data.ptr == &timer_tag) {
			check_deadlines(ws);
			continue;
		}
		if (evs[i].events & EPOLLOUT)
			out_flush(w);
		budget_fill(w);
		/* A bounded number each turn: one busy worker does not hold up the loop. */
		for (unsigned int k = 0; k < MSGS_PER_TURN && w->sock >= 0 &&
				       w->kill != WORKER_KILL_FAULT; k++) {
			struct xbd_wmsg m;
			int fds[XBD_WMSG_MAX_FDS];
			unsigned int nfds = 0, j;
			int err = xbd_wmsg_recv(w->sock, &m, fds, &nfds, 0);

			for (j = 0; j < nfds; j++)
				close(fds[j]);
			if (err == -EAGAIN)
				break;
			if (err) {
				/* Gone (its death comes through SIGCHLD) or broken. */
				epoll_ctl(ws->epfd, EPOLL_CTL_DEL, w->sock, NULL);
				if (err != -EPIPE && w->pid && (worker_ready_now(w) || worker_starting(w)))
					worker_kill(w, "sent a malformed message");
				/* Nothing more goes to it; its death comes through SIGCHLD. */
				if (worker_ready_now(w))
					worker_set_life(w, WORKER_LOST);
				break;
			}
			if (!w->budget) {
				char why[80];

				snprintf(why, sizeof(why), "sent more than %u messages a second", MSG_RATE);
				worker_kill(w, why);
				break;
			}
			w->budget--;
			if (!worker_starting(w))
				handle_msg(w, &m);
			else if (!w->start_deadline)
				; /* killed for being late: what it says no longer counts */
			else if (m.type == XBD_WMSG_READY)
				worker_ready(w, &m);
			else if (m.type == XBD_WMSG_LOG)
				handle_msg(w, &m);
			else
				worker_kill(w, "sent a message before it was ready");
		}
	}
}

void xbd_workers_shutdown(struct xbd_workers *ws)
{
	struct xbd_wmsg m;

	if (!ws)
		return;
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_SHUTDOWN;
	for (struct xbd_worker *w = ws->list; w; w = w->next) {
		w->exiting = true;
		send_msg(w, &m, NULL, 0);
	}
}

/* ---- start and end ---- */

/* Our environment for the workers; a sanitizer build's leak check would ptrace them. */
static char **worker_env(bool sanitizers)
{
	size_t n = 0, i, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (i = 0; i < n; i++) {
		if (sanitizers && !strncmp(environ[i], "ASAN_OPTIONS=", 13))
			continue;
		env[k++] = environ[i];
	}
	if (sanitizers) {
		const char *old = getenv("ASAN_OPTIONS");

		if (asprintf(&env[k++], "ASAN_OPTIONS=%s%sdetect_leaks=0", old ? old : "",
			     old && *old ? ":" : "") < 0)
			k--;
	}
	env[k] = NULL;
	return env;
}

int xbd_workers_init(const struct xbd_back_opts *opts, struct xbd_ring_host *host,
		     uint32_t self_domid, struct xbd_workers **out)
{
	struct xbd_workers *ws;
	char why[400];
	const char *dir = getenv("XBD_SIM_DIR");
	uint32_t skipped;

	*out = NULL;
	if (!opts->workers) {
		struct xbd_cgroup *none;

		/* (Only says that weights are not applied, or fails for cgroups = 1.) */
		return xbd_cgroup_open(opts, &none);
	}
	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	ws->opts = opts;
	ws->host = host;
	ws->self_domid = self_domid;
	ws->epfd = epoll_create1(EPOLL_CLOEXEC);
	ws->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	ws->start_timeout_ms = START_TIMEOUT_MS;
	/* Our own binary as it was started (an upgrade may replace the file meanwhile). */
	ws->exe_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
#if defined(__SANITIZE_ADDRESS__)
	ws->sanitizers = true;
#endif
	ws->envp = worker_env(ws->sanitizers);
	ws->sim = !strcmp(xbd_platform_name(host->plat), "sim");
	if (ws->timer_fd >= 0 && ws->epfd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &timer_tag };

		if (epoll_ctl(ws->epfd, EPOLL_CTL_ADD, ws->timer_fd, &ev)) {
			close(ws->timer_fd);
			ws->timer_fd = -1;
		}
	}
	if (ws->epfd < 0 || ws->timer_fd < 0 || ws->exe_fd < 0 || !ws->envp) {
		xbd_log(XBD_LOG_ERR, "cannot prepare the workers: %s (workers = 0 serves every "
			"disk in this process)", strerror(errno));
		goto fail;
	}
	if (ws->sim) {
		char *real = dir ? realpath(dir, NULL) : NULL;

		if (!real || strlen(real) >= sizeof(ws->sim_dir)) {
			xbd_log(XBD_LOG_ERR, "the simulator's directory %s cannot be handed to a "
				"worker (workers = 0 serves every disk in this process)",
				dir ? dir : "(XBD_SIM_DIR unset)");
			free(real);
			goto fail;
		}
		snprintf(ws->sim_dir, sizeof(ws->sim_dir), "%s", real);
		free(real);
	}
#ifdef XBD_TEST_HOOKS
	if (getenv("XBD_TEST_WORKER_CALL"))
		snprintf(ws->test_hook, sizeof(ws->test_hook), "%s", getenv("XBD_TEST_WORKER_CALL"));
	ws->test_crash = getenv("XBD_TEST_CRASH") != NULL;
	if (getenv("XBD_TEST_WORKER_DELAY") &&
	    sscanf(getenv("XBD_TEST_WORKER_DELAY"), "%" SCNu32 ":%" SCNu32, &ws->test_delay_domid,
		   &ws->test_delay_ms) != 2)
		ws->test_delay_ms = 0;
	if (getenv("XBD_TEST_WORKER_MISBEHAVE") &&
	    sscanf(getenv("XBD_TEST_WORKER_MISBEHAVE"), "%" SCNu32 ":%15s", &ws->test_misbehave_domid,
		   ws->test_misbehave) != 2)
		ws->test_misbehave[0] = '\0';
	if (getenv("XBD_TEST_WORKER_START_TIMEOUT_MS"))
		ws->start_timeout_ms = (unsigned int)strtoul(getenv("XBD_TEST_WORKER_START_TIMEOUT_MS"),
							     NULL, 10);
#endif
	skipped = xbd_confine_predict(ws->sim, why, sizeof(why));
	if (!ws->sim) {
		bool limited = false, restricted = false;
		int fd = xbd_xen_gntdev_open(WORKER_MAX_GRANTS, &limited);

		if (fd >= 0)
			close(fd);
		/* Any domain but 0 tells whether this kernel restricts (the fd is thrown away). */
		fd = xbd_xen_evtchn_open_for(1, &restricted);
		if (fd >= 0)
			close(fd);
		if (!limited) {
			skipped |= XBD_CONFINE_GNTDEV;
			snprintf(why + strlen(why), sizeof(why) - strlen(why), "%sa grant limit on "
				 "gntdev (this kernel has no IOCTL_GNTDEV_SET_MAX_GRANTS)",
				 why[0] ? "; " : "");
		}
		if (!restricted) {
			skipped |= XBD_CONFINE_EVTCHN;
			snprintf(why + strlen(why), sizeof(why) - strlen(why), "%sevent channels "
				 "restricted to its domain (no IOCTL_EVTCHN_RESTRICT_DOMID)",
				 why[0] ? "; " : "");
		}
	}
	ws->said = skipped;
	if (xbd_cgroup_open(opts, &ws->cg))
		goto fail;
	*out = ws;
	xbd_log(XBD_LOG_INFO, "workers: each domain's disks are served by a confined worker of "
		"its own (uid %u + the domain's id)", opts->worker_uid_base);
	if (skipped)
		xbd_log(XBD_LOG_WARNING, "workers: confinement steps not possible here: %s", why);
	return 0;
fail:
	if (ws->epfd >= 0)
		close(ws->epfd);
	if (ws->timer_fd >= 0)
		close(ws->timer_fd);
	if (ws->exe_fd >= 0)
		close(ws->exe_fd);
	free(ws->envp);
	free(ws);
	return -EINVAL;
}

void xbd_workers_close(struct xbd_workers *ws)
{
	uint64_t deadline;

	if (!ws)
		return;
	/* They were told to stop (SHUTDOWN): until just past the deadline, then SIGKILL. */
	deadline = (ws->host->stop_deadline_ms ? ws->host->stop_deadline_ms : xbd_mono_ms() + 5000) + 300;

	for (struct xbd_worker *w = ws->list; w; w = w->next) {
		int st;

		while (w->pid) {
			if (waitpid(w->pid, &st, WNOHANG) == w->pid) {
				w->pid = 0;
				worker_set_life(w, WORKER_NONE);
			}
			else if (xbd_mono_ms() >= deadline)
				break;
			else
				usleep(10000);
		}
		if (w->pid) {
			kill(w->pid, SIGKILL);
			waitpid(w->pid, &st, 0);
			w->pid = 0;
			worker_set_life(w, WORKER_NONE);
		}
		if (w->cg_placed)
			xbd_cgroup_remove(ws->cg, w->domid);
	}
	while (ws->list) {
		out_drop(ws->list);
		worker_free(ws->list);
	}
	close(ws->epfd);
	close(ws->timer_fd);
	close(ws->exe_fd);
	xbd_cgroup_close(ws->cg);
	if (ws->envp) {
		for (size_t i = 0; ws->envp[i]; i++)
			if (!strncmp(ws->envp[i], "ASAN_OPTIONS=", 13) && ws->sanitizers)
				free(ws->envp[i]);
		free(ws->envp);
	}
	free(ws);
}
