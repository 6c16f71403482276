/*
 * supervisor.c: the main process's side of the workers (worker.h;
 * supervisor.h says which file does what).  It
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blkback/workers/cgroup.h"
#include "blkback/workers/confine.h"
#include "blkback/workers/supervisor.h"
#include "common/clock.h"

/* epoll's tag of timer_fd in epfd (the workers' tags are their structs). */
static char timer_tag;


void workers_wake_main(struct xbd_workers *ws)
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

/* ---- a worker's life ---- */

static const char *const worker_life_names[] = {
	[WORKER_NONE] = "none", [WORKER_SPAWNED] = "spawned", [WORKER_STARTING] = "starting",
	[WORKER_READY] = "ready", [WORKER_STARTING_LOST] = "lost while starting",
	[WORKER_LOST] = "lost",
};

/* The states each life may be entered from (supervisor.h says what each is). */
#define WL(life) (1u << (life))
static const uint8_t worker_entered_from[] = {
	/* Its death (SIGCHLD), whatever it was doing. */
	[WORKER_NONE] = WL(WORKER_SPAWNED) | WL(WORKER_STARTING) | WL(WORKER_READY) |
			WL(WORKER_STARTING_LOST) | WL(WORKER_LOST),
	[WORKER_SPAWNED] = WL(WORKER_NONE),        /* forked */
	[WORKER_STARTING] = WL(WORKER_SPAWNED),    /* HELLO sent */
	[WORKER_READY] = WL(WORKER_STARTING),      /* READY said */
	[WORKER_STARTING_LOST] = WL(WORKER_STARTING), /* killed before READY */
	[WORKER_LOST] = WL(WORKER_READY),          /* killed, or its socket failed */
};

/*
 * The one place a worker's life changes: the edge is checked against the
 * table above, and one that is not there is a bug, said once in a line
 * (and fatal in a build with test hooks, so that the tests catch it).
 */
void worker_set_life(struct xbd_worker *w, enum worker_life to)
{
	enum worker_life from = w->life;

	if (!(worker_entered_from[to] & WL(from))) {
		static bool said;

		if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
			xbd_log(XBD_LOG_ERR, "%s: its life went from %s to %s (a bug in xbd-back)",
				w->name, worker_life_names[from], worker_life_names[to]);
#ifdef XBD_TEST_HOOKS
		abort();
#endif
	}
	w->life = to;
}

/* Said READY (and not lost since): confined and serving. */
bool worker_ready_now(const struct xbd_worker *w)
{
	return w->life == WORKER_READY;
}

/* Started and READY not said yet (killed meanwhile or not). */
bool worker_starting(const struct xbd_worker *w)
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

void worker_kill(struct xbd_worker *w, const char *why)
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
void worker_kill_asked(struct xbd_worker *w)
{
	if (!w->pid)
		return;
	kill(w->pid, SIGKILL);
	if (w->kill != WORKER_KILL_FAULT)
		w->kill = WORKER_KILL_ASKED;
	worker_lose(w);
}

/* A message nobody waits for: a log line, a ring that failed or exited. */
void worker_handle_msg(struct xbd_worker *w, const struct xbd_wmsg *m)
{
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
	default:
		/* A ring's answer or news (ring-proxy.c), or what it may not send. */
		if (!wring_msg(w, m))
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

/* Hand the waiting messages over as far as its socket takes them. */
void worker_flush(struct xbd_worker *w)
{
	if (w->pid && worker_ready_now(w))
		xbd_wqueue_flush(&w->out, w->sock, ANSWER_TIMEOUT_MS);
	if (!w->out.head)
		watch_out(w, false);
}

/*
 * Send a message without waiting: what its socket has no room for now
 * waits, in order, with copies of its fds, for EPOLLOUT (worker_flush); a
 * worker that takes none of it for ANSWER_TIMEOUT_MS is killed
 * (check_deadlines).  0, or -errno: -ESRCH for a worker not serving.
 */
int worker_send(struct xbd_worker *w, const struct xbd_wmsg *m, const int *fds,
		    unsigned int nfds)
{
	uint64_t due = w->out.deadline;
	int err;

	if (!w->pid || !worker_ready_now(w))
		return -ESRCH;
	err = xbd_wqueue_send(&w->out, w->sock, m, fds, nfds, OUT_MAX, ANSWER_TIMEOUT_MS);
	if (err == -ENOBUFS) {
		worker_kill(w, "stopped reading its messages");
		return -ETIMEDOUT;
	}
	if (err || !w->out.head)
		return err;
	if (!due)
		workers_arm_timer(w->ws);
	watch_out(w, true);
	return 0;
}

/* ---- deadlines, and a worker's record ---- */

/* The earliest of w's deadlines (0: none). */
static uint64_t worker_deadline(const struct xbd_worker *w)
{
	uint64_t d[4] = { worker_starting(w) ? w->start_deadline : 0, w->answer_deadline,
			  w->out.deadline, w->exit_deadline };
	uint64_t at = 0;

	if (!w->pid)
		return 0;
	for (unsigned int i = 0; i < 4; i++)
		if (d[i] && (!at || d[i] < at))
			at = d[i];
	return at;
}

/* timer_fd at the earliest deadline of any worker (none: disarmed). */
void workers_arm_timer(struct xbd_workers *ws)
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
		} else if (w->out.deadline && w->out.deadline <= now) {
			w->out.deadline = 0;
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
	workers_arm_timer(ws);
}

struct xbd_worker *worker_get(struct xbd_workers *ws, uint32_t domid)
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

void worker_free(struct xbd_worker *w)
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

void xbd_workers_log_level(struct xbd_workers *ws, int level)
{
	struct xbd_wmsg m;

	if (!ws)
		return;
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_SET;
	m.u.set.log_level = level;
	for (struct xbd_worker *w = ws->list; w; w = w->next)
		worker_send(w, &m, NULL, 0);
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
			worker_flush(w);
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
				worker_handle_msg(w, &m);
			else if (!w->start_deadline)
				; /* killed for being late: what it says no longer counts */
			else if (m.type == XBD_WMSG_READY)
				worker_ready(w, &m);
			else if (m.type == XBD_WMSG_LOG)
				worker_handle_msg(w, &m);
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
		worker_send(w, &m, NULL, 0);
	}
}

/* ---- start and end ---- */

#ifdef XBD_TEST_HOOKS
/* Test builds: the environment's instructions for the workers (tests/robust/workers-*.sh). */
static void test_hooks(struct xbd_workers *ws)
{
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
}
#endif

/*
 * The confinement steps a worker will not manage here, as a mask of
 * XBD_CONFINE_* and their names in why: what confine.c predicts, and on
 * Xen what this kernel's gntdev and event channel devices allow.
 */
static uint32_t skipped_steps(const struct xbd_workers *ws, char *why, size_t len)
{
	uint32_t skipped = xbd_confine_predict(ws->sim, why, len);
	bool limited = false, restricted = false;
	int fd;

	if (ws->sim)
		return skipped;
	fd = xbd_xen_gntdev_open(WORKER_MAX_GRANTS, &limited);
	if (fd >= 0)
		close(fd);
	/* Any domain but 0 tells whether this kernel restricts (the fd is thrown away). */
	fd = xbd_xen_evtchn_open_for(1, &restricted);
	if (fd >= 0)
		close(fd);
	if (!limited) {
		skipped |= XBD_CONFINE_GNTDEV;
		snprintf(why + strlen(why), len - strlen(why), "%sa grant limit on "
			 "gntdev (this kernel has no IOCTL_GNTDEV_SET_MAX_GRANTS)",
			 why[0] ? "; " : "");
	}
	if (!restricted) {
		skipped |= XBD_CONFINE_EVTCHN;
		snprintf(why + strlen(why), len - strlen(why), "%sevent channels "
			 "restricted to its domain (no IOCTL_EVTCHN_RESTRICT_DOMID)",
			 why[0] ? "; " : "");
	}
	return skipped;
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
	ws->envp = workers_env(ws->sanitizers);
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
	test_hooks(ws);
#endif
	skipped = skipped_steps(ws, why, sizeof(why));
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
		xbd_wqueue_drop(&ws->list->out);
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
