/*
 * record.c: a worker's record in the main process (struct xbd_worker,
 * supervisor.h), what the other files of workers/ build on and which
 * calls none of them: the record made and freed (or kept for its deaths),
 * its life and its kills, the messages that go to it and wait for room,
 * its deadlines and the timer that keeps them, its log lines (each
 * counted against the device it names), its devices' next steps and its
 * cgroup weights.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "blkback/workers/cgroup.h"
#include "blkback/workers/supervisor.h"
#include "common/clock.h"

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

void worker_log(struct xbd_worker *w, int level, const char *text)
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

/* ---- its deadlines, and its record ---- */

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

unsigned int worker_deaths_within(const struct xbd_worker *w, uint64_t window_ms)
{
	uint64_t now = xbd_mono_ms();
	unsigned int n = 0;

	for (unsigned int i = 0; i < w->ndeaths && i < MAX_DEATHS; i++)
		if (now - w->deaths_ms[i] < window_ms)
			n++;
	return n;
}

/*
 * No device of w's domain is connected and no process runs: free it, but
 * while its deaths of the last minute count (the restart-storm limit),
 * keep just that record, without counters, socket or process.
 */
void worker_idle(struct xbd_worker *w)
{
	if (!worker_deaths_within(w, DEATH_WINDOW_MS)) {
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
void worker_weights(struct xbd_worker *w)
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

/* Every device bound to w takes its next step (a connect that waited for it). */
void worker_step_devices(struct xbd_worker *w)
{
	for (struct xbd_wdev *wd = w->devs; wd; wd = wd->next)
		wd->step(wd->arg);
}
