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
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blkback/workers/cgroup.h"
#include "blkback/workers/confine.h"
#include "blkback/workers/supervisor.h"
#include "common/clock.h"

/* epoll's tag of timer_fd in epfd (the workers' tags are their structs). */
static char timer_tag;


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

/* Its READY: it is confined and serves; what waited for it goes on. */
static void worker_ready(struct xbd_worker *w, const struct xbd_wmsg *m)
{
	struct xbd_workers *ws = w->ws;

	worker_set_life(w, WORKER_READY);
	workers_arm_timer(ws);
	workers_said_skipped(ws, w, m->u.skipped | (ws->sim || w->gntdev_limited ? 0 : XBD_CONFINE_GNTDEV));
	xbd_log(XBD_LOG_VERBOSE, "%s started (pid %d, uid %u)", w->name, (int)w->pid, w->uid);
	if (w->resume_pending) {
		/* Rings told to stop while it started (their frontend went) stop here. */
		w->resume_pending = false;
		worker_resume_rings(w);
		workers_wake_main(ws);
	}
	worker_step_devices(w);
}

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
