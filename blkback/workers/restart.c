/*
 * restart.c: a worker's death (supervisor.h).  Asked for (told to exit,
 * SIGTERM) it is quiet; any other (a crash, a seccomp kill, the OOM
 * killer, a kill for a missed deadline) is the death of a daemon for its
 * rings only: a new worker starts and every ring that ran resumes from its
 * journal, unless the domain's worker died worker-restarts times within a
 * minute (then its devices are closed, with one line).
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blkback/workers/cgroup.h"
#include "blkback/workers/supervisor.h"
#include "common/clock.h"

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
		wring_exited(wr);
		return;
	}
	if (running && *resume)
		return;
	if (running)
		xbd_ring_set_failed(r);
	wring_exited(wr);
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
		wring_exited(wr);
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
		err = wdev_open(w, wd);
		for (unsigned int i = 0; i < XBD_WORKER_SLOTS; i++) {
			struct wring *wr = w->rings[i];

			if (!wr || wr->wd != wd || xbd_ring_exited(&wr->base))
				continue;
			wr->base.p.resume = true;
			if (!err)
				err = wring_start_in(wr, w, wr->slot, true);
			if (err == -EINPROGRESS) {
				/* Said once every ring of the device answered (restart_said). */
				err = 0;
				continue;
			}
			if (err) {
				/* Not taken over: the device is closed (its failed ring says so). */
				xbd_ring_set_failed(&wr->base);
				wring_exited(wr);
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
	xbd_wqueue_drop(&w->out);
	workers_arm_timer(ws);
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
			worker_step_devices(w);
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
	n = worker_deaths_within(w, DEATH_WINDOW_MS);
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
		worker_step_devices(w);
	/* No device of its domain connected: nothing to keep but its deaths. */
	if (!w->refs)
		worker_idle(w);
	workers_wake_main(ws);
	return true;
}

void worker_resume_rings(struct xbd_worker *w)
{
	for_rings(w, end_stopped, NULL);
	resume_all(w);
}
