/*
 * xbd-back.c: xbd-back, the userspace blkback.  Opens the platform and
 * xenstore, watches backend/<type>/ and runs the control plane in this
 * thread; each connected ring gets its own I/O thread.
 *
 * Signals: SIGHUP re-reads the configuration file (its settings apply to
 * devices that appear from then on) and every disk's size (online
 * resize); SIGUSR1 prints every ring's counters to the log; SIGTERM and
 * SIGINT stop.  The control socket (control.c) is served from this
 * thread's loop too; under systemd, Type=notify is answered through
 * sd_notify(3).
 *
 * On SIGTERM we stop consuming requests, let in-flight I/O complete and
 * answer every request we consumed, then unmap and unbind, but leave
 * xenstore as it is (state 4 stays 4) and never touch the frontend's
 * ring.  That keeps the guest safest: its outstanding requests are all
 * answered, nothing tells its blkfront to tear the disk down, and a
 * restarted xbd-back finds backend and frontend Connected, maps the same
 * ring again and continues at the shared producer indexes, the way a
 * Linux blkback reconnect would.  Closing instead would make the guest
 * lose the disk for the length of a daemon restart.  Requests the guest
 * queued but we had not consumed stay in the ring for the next daemon.
 * "Tidy" is thus: every node we own describes a true state (the
 * features and Connected are still true of the ring), a device we were
 * closing is written Closed (we released it), and the control socket is
 * removed.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "blkback/control/control.h"
#include "common/clock.h"
#include "blkback/datapath/ringcpu.h"
#include "blkback/workers/workers.h"

/*
 * Watch events handled per turn of the main loop: then the control
 * socket, signals and the devices' pending work get their turn, however
 * fast a guest makes events (each costs a compare here, no round trip).
 */
#define XS_BATCH 256

/* What woke the main loop (epoll data). */
enum main_event {
	EV_XENSTORE,             /* watch events waiting */
	EV_SIGNAL,               /* signalfd */
	EV_WAKE,                 /* a ring failed or finished draining */
	EV_CONTROL,              /* the control socket */
	EV_TIMER,                /* a retry or a log-limit report is due */
	EV_WORKERS,              /* a worker has something to say (workers.h) */
};

static void add_fd(int epfd, int fd, enum main_event what)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = what };

	epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* Type=notify: tell systemd where we are (no-op outside systemd). */
static void notify(const char *state)
{
#ifdef HAVE_SYSTEMD
	sd_notify(0, state);
#else
	(void)state;
#endif
}

/*
 * The control socket's path: --control or the file's control key, else
 * the simulated host's directory (so that tests on different simulated
 * hosts never meet), else /run/xbd/xbd-back.sock.  NULL: none.
 */
static char *control_path(const struct xbd_back *bk, bool *required)
{
	const char *sim = getenv("XBD_SIM_DIR");
	char *p = NULL, dom[16];

	*required = bk->opts.control != NULL;
	if (bk->opts.control)
		return bk->opts.control[0] ? strdup(bk->opts.control) : NULL;
	if (!strcmp(xbd_platform_name(bk->host.plat), "sim") && sim && sim[0]) {
		snprintf(dom, sizeof(dom), "%u", bk->domid);
		if (asprintf(&p, XBD_SIM_CONTROL_FMT, sim, dom) < 0)
			return NULL;
		return p;
	}
	return strdup(XBD_DEFAULT_CONTROL);
}

/*
 * Where the disks' changed-block tracking lives (control/tracking.h):
 * cbt-dir, a file system that outlives the host's restarts, on the
 * simulator its host's directory.  Made when the first disk's tracking
 * opens (tracking.c), so that a host without cbt gets no directory.
 */
static char *cbt_dir(const struct xbd_back *bk)
{
	const char *sim = getenv("XBD_SIM_DIR");
	char *p = NULL;

	if (bk->opts.cbt_dir)
		p = strdup(bk->opts.cbt_dir);
	else if (!strcmp(xbd_platform_name(bk->host.plat), "sim") && sim && sim[0]) {
		if (asprintf(&p, "%s/xbd-cbt.%u", sim, bk->domid) < 0)
			p = NULL;
	} else {
		p = strdup(XBD_DEFAULT_CBT_DIR);
	}
	return p;
}

/*
 * Where the rings' crash journals live (journal.h): tmpfs that outlives
 * the process but not the host, on the simulator its host's run
 * directory, which xbd-sim stop removes.  NULL (with a warning) if it
 * cannot be made: then a crash of xbd-back closes its guests' disks.
 */
static char *journal_dir(const struct xbd_back *bk)
{
	const char *sim = getenv("XBD_SIM_DIR");
	char *p = NULL;

	if (!strcmp(xbd_platform_name(bk->host.plat), "sim") && sim && sim[0]) {
		char *run = NULL;

		if (asprintf(&run, "%s/run", sim) < 0)
			return NULL;
		/* A host an older xbd-sim started has no run directory yet. */
		if (mkdir(run, 0755) && errno != EEXIST)
			xbd_log(XBD_LOG_VERBOSE, "cannot make %s: %s", run, strerror(errno));
		if (asprintf(&p, "%s/xbd-journal.%u", run, bk->domid) < 0)
			p = NULL;
		free(run);
		if (!p)
			return NULL;
	} else {
		p = strdup(XBD_DEFAULT_JOURNAL_DIR);
		if (p && mkdir(XBD_DEFAULT_RUN_DIR, 0755) && errno != EEXIST) {
			free(p);
			p = NULL;
		}
	}
	if (p && mkdir(p, 0700) && errno != EEXIST) {
		xbd_log(XBD_LOG_WARNING, "no crash journal: cannot make %s: %s (a crash of "
			"xbd-back would close its guests' disks)", p, strerror(errno));
		free(p);
		return NULL;
	}
	return p;
}

/*
 * One daemon per host (per backend domain on the simulator): two would
 * both open the next guest's disk and bind its event channel, and the
 * guest's attach would fail.  The lock is in the host's run directory
 * (/run/xbd; the simulated host's run/) whatever --control says, and is an flock(2), which the kernel drops
 * at any death of ours (a SIGKILL leaves nothing to clean).  The fd is
 * close-on-exec: workers and the --run command never hold it.  It says
 * the holder's pid for the one line of a second daemon.  Returns the
 * lock's fd, -1 with that line said, or -2 if the lock cannot be made
 * (said too; the daemon goes on without it).
 */
static int host_lock(const struct xbd_back *bk)
{
	const char *sim = getenv("XBD_SIM_DIR");
	char path[4096], buf[32];
	int fd;

	if (!strcmp(xbd_platform_name(bk->host.plat), "sim") && sim && sim[0]) {
		/* The simulated host's /run (xbd-sim stop removes it, as a reboot would). */
		snprintf(path, sizeof(path), "%s/run", sim);
		if (mkdir(path, 0755) && errno != EEXIST)
			goto unusable;
		snprintf(path, sizeof(path), "%s/run/xbd-back.%u.lock", sim, bk->domid);
	} else {
		snprintf(path, sizeof(path), "%s", XBD_DEFAULT_LOCK);
		if (mkdir(XBD_DEFAULT_RUN_DIR, 0755) && errno != EEXIST)
			goto unusable;
	}
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		goto unusable;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		long pid = 0;

		if (errno != EWOULDBLOCK) {
			close(fd);
			goto unusable;
		}
		/* The holder writes its pid just after it locks: give it a moment. */
		for (unsigned int t = 0; t < 20 && pid <= 0; t++) {
			ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

			buf[n > 0 ? n : 0] = '\0';
			pid = strtol(buf, NULL, 10);
			if (pid <= 0)
				usleep(10000);
		}
		close(fd);
		if (pid > 0)
			xbd_log(XBD_LOG_ERR, "another xbd-back (pid %ld) serves this host (%s): "
				"exiting", pid, path);
		else
			xbd_log(XBD_LOG_ERR, "another xbd-back serves this host (%s): exiting", path);
		return -1;
	}
	snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) || pwrite(fd, buf, strlen(buf), 0) != (ssize_t)strlen(buf))
		xbd_log(XBD_LOG_WARNING, "cannot write our pid to %s: %s", path, strerror(errno));
	return fd;
unusable:
	xbd_log(XBD_LOG_WARNING, "no lock against a second xbd-back: cannot use %s: %s",
		path, strerror(errno));
	return -2;
}

/*
 * SIGHUP: read the file and the command line again.  The disk defaults,
 * [disk] sections and log level apply to devices that appear from now
 * on; types, platform, log and control keep their start-up values.
 */
static void reload(struct xbd_back *bk)
{
	struct xbd_back_opts n;

	if (xbd_back_parse_options(bk->argc, bk->argv, &n)) {
		xbd_log(XBD_LOG_WARNING, "configuration not reloaded (see the line before); "
			"the current settings stay");
		xbd_back_free_options(&n);
		return;
	}
	xbd_back_take_rules(&bk->opts, &n);
	bk->opts.disk = n.disk;
	bk->opts.verbose = n.verbose;
	xbd_log_set_level(n.verbose);
	free(bk->opts.config);
	bk->opts.config = n.config;
	n.config = NULL;
	xbd_back_free_options(&n);
	xbd_log(XBD_LOG_INFO, "configuration reloaded from %s: %u disk section%s, for new devices",
		bk->opts.config ? bk->opts.config : "the command line", bk->opts.nr_rules,
		bk->opts.nr_rules == 1 ? "" : "s");
}

static pid_t run_command(const char *cmd, const sigset_t *oldmask)
{
	pid_t pid = fork();

	if (pid == 0) {
		sigprocmask(SIG_SETMASK, oldmask, NULL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Why there is no platform, and what to do: the first thing an operator off Xen sees. */
static void platform_error(enum xbd_platform_kind kind, int err)
{
	const char *sim = getenv("XBD_SIM_DIR");

	if (kind == XBD_PLATFORM_SIM && (!sim || !*sim))
		xbd_log(XBD_LOG_ERR, "cannot open the platform: --platform sim needs XBD_SIM_DIR, "
			"the directory of a simulated host (xbd-sim start DIR; README, \"by hand\")");
	else if (kind == XBD_PLATFORM_SIM || (kind == XBD_PLATFORM_AUTO && sim && *sim))
		xbd_log(XBD_LOG_ERR, "cannot open the simulated host at XBD_SIM_DIR=%s: %s (is it "
			"started? xbd-sim start DIR)", sim, strerror(-err));
	else if (err == -ENODEV)
		xbd_log(XBD_LOG_ERR, "cannot open the platform: this is not a Xen domain (no "
			"/dev/xen) and XBD_SIM_DIR names no simulated host: run xbd-back in dom0 or a "
			"driver domain, or set XBD_SIM_DIR to a host xbd-sim started (README)");
	else
		xbd_log(XBD_LOG_ERR, "cannot open Xen's grant device: %s (load xen-gntdev and "
			"xen-evtchn, mount xenfs on /proc/xen, run as root)", strerror(-err));
}

/*
 * One pass of the main loop, after each bounded batch of events: the
 * scans discovery.c's watches asked for, each marked device's work once,
 * first marked first served (lifecycle.c), the devices of domains that
 * died (after the devices: one adopted in this pass may belong to a dead
 * domain), then (lifecycle.c again) the crash journals of devices that
 * are gone, once at start, and the timer armed for what is due later.
 * True if the pass marked more work, for the next turn.
 */
static bool pass(struct xbd_back *bk)
{
	xbd_back_scan_pending(bk);
	xbd_back_run(bk);
	if (bk->release_pending)
		xbd_back_release_domains(bk);
	return xbd_back_pass_end(bk);
}

/* The main loop's state, beside the daemon's. */
struct loop {
	struct xbd_back bk;
	int sfd, epfd;           /* the signals' fd, and the loop's epoll */
	sigset_t oldmask;        /* the signal mask before ours (the --run command gets it back) */
	pid_t child;             /* the --run command, or -1 */
	bool running;
	bool started;            /* said so (the start line): the stop says so too */
	const char *why_stop;    /* what stopped it ("SIGTERM"), or NULL */
	struct xbd_back_count shown; /* what systemd's status last said */
	bool more;               /* the last pass marked more work: do not sleep */
	int rc;                  /* the exit status */
	char *ctl_path;          /* the control socket's path, or NULL: none */
};

/* Signals through a signalfd, the wake-up eventfd, the timer, epoll over them and xenstore. */
static int loop_open(struct loop *l)
{
	struct xbd_back *bk = &l->bk;
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGCHLD);
	/* Before any thread exists, so that every thread inherits the mask. */
	sigprocmask(SIG_BLOCK, &mask, &l->oldmask);
	l->sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	bk->host.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	bk->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->sfd < 0 || bk->host.wake_fd < 0 || bk->timer_fd < 0 || l->epfd < 0) {
		xbd_log(XBD_LOG_ERR, "cannot set up the event loop: %s", strerror(errno));
		return -1;
	}
	add_fd(l->epfd, xbd_xs_fd(bk->xs), EV_XENSTORE);
	add_fd(l->epfd, l->sfd, EV_SIGNAL);
	add_fd(l->epfd, bk->host.wake_fd, EV_WAKE);
	add_fd(l->epfd, bk->timer_fd, EV_TIMER);
	return 0;
}

/*
 * What the daemon serves with: the control socket, the crash journals'
 * directory, pin-rings, the workers, the watches.  0, or -1 (said why).
 */
static int serve_setup(struct loop *l)
{
	struct xbd_back *bk = &l->bk;
	bool ctl_required, xen = !strcmp(xbd_platform_name(bk->host.plat), "xen");

	l->ctl_path = control_path(bk, &ctl_required);
	if (l->ctl_path && xbd_control_open(bk, l->ctl_path, ctl_required, &bk->ctl) &&
	    ctl_required)
		return -1;
	if (bk->ctl)
		add_fd(l->epfd, xbd_control_fd(bk->ctl), EV_CONTROL);

	bk->cbt_dir = cbt_dir(bk);
	if (bk->opts.journal)
		bk->journal_dir = journal_dir(bk);
	else
		xbd_log(XBD_LOG_WARNING, "journal = 0: no crash journals (a crash of xbd-back "
			"closes its guests' disks)");
	xbd_ringcpu_init(bk->opts.pin_rings == XBD_PIN_RINGS_ON ||
			 (bk->opts.pin_rings == XBD_PIN_RINGS_AUTO && xen), xen);
	if (bk->opts.pin_rings == XBD_PIN_RINGS_ON && !xbd_ringcpu_on())
		xbd_log(XBD_LOG_VERBOSE, "pin-rings: one CPU to run on: nothing to pin");
	if (xbd_workers_init(&bk->opts, &bk->host, bk->domid, &bk->workers))
		return -1;
	if (bk->workers)
		add_fd(l->epfd, xbd_workers_fd(bk->workers), EV_WORKERS);
	if (xbd_back_watch_start(bk))
		return -1;
	return 0;
}

/* "3 disks of 2 guests" */
static const char *count_words(char *buf, size_t len, const struct xbd_back_count *n)
{
	snprintf(buf, len, "%u disk%s of %u guest%s", n->disks, n->disks == 1 ? "" : "s",
		 n->guests, n->guests == 1 ? "" : "s");
	return buf;
}

/* systemd's status (systemctl status), when what is served has changed. */
static void status_update(struct loop *l)
{
	struct xbd_back_count n;
	char st[96], w[64];

	xbd_back_count(&l->bk, &n);
	if (n.disks == l->shown.disks && n.guests == l->shown.guests)
		return;
	l->shown = n;
	snprintf(st, sizeof(st), "STATUS=serving %s", count_words(w, sizeof(w), &n));
	notify(st);
}

/* The start line, once the devices already there are found: what is served. */
static void say_started(struct loop *l)
{
	struct xbd_back *bk = &l->bk;
	struct xbd_back_count n;
	char w[64];

	xbd_back_count(bk, &n);
	xbd_log(XBD_LOG_INFO, "started: serving %s%s%s on the %s platform as domain %u: %s",
		bk->opts.types[0], bk->opts.nr_types > 1 ? "," : "",
		bk->opts.nr_types > 1 ? bk->opts.types[1] : "", xbd_platform_name(bk->host.plat),
		bk->domid, count_words(w, sizeof(w), &n));
	l->started = true;
	l->shown = (struct xbd_back_count){ 0 };
	l->shown.disks = ~0u;
	status_update(l);
}

/* Children that exited: the --run command (its status is ours), or a worker (workers.h). */
static void reap_children(struct loop *l)
{
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == l->child) {
			l->rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			l->child = -1;
			l->running = false;
		} else {
			xbd_workers_reaped(l->bk.workers, pid, status);
		}
	}
}

/*
 * The signals waiting: SIGHUP reloads, SIGUSR1 prints the counters,
 * SIGCHLD reaps, the rest stop.
 */
static void on_signals(struct loop *l)
{
	struct xbd_back *bk = &l->bk;
	struct signalfd_siginfo si;

	while (read(l->sfd, &si, sizeof(si)) == sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGHUP:
			notify("RELOADING=1");
			reload(bk);
			xbd_workers_log_level(bk->workers, bk->opts.verbose);
			xbd_back_resize_all(bk);
			xbd_back_retry_refused(bk);
			notify("READY=1");
			break;
		case SIGUSR1:
			xbd_back_print_stats(bk);
			break;
		case SIGCHLD:
			reap_children(l);
			break;
		default:
			l->why_stop = si.ssi_signo == SIGTERM ? "SIGTERM" :
				      si.ssi_signo == SIGINT ? "SIGINT" : "a signal";
			l->running = false;
			break;
		}
	}
}

static void on_event(struct loop *l, enum main_event ev)
{
	struct xbd_back *bk = &l->bk;
	uint64_t v;

	switch (ev) {
	case EV_XENSTORE:
		if (xbd_xs_dispatch_some(bk->xs, XS_BATCH) < 0) {
			xbd_log(XBD_LOG_ERR, "lost the connection to xenstore");
			l->why_stop = "the loss of xenstore";
			l->rc = 1;
			l->running = false;
		}
		break;
	case EV_CONTROL:
		xbd_control_dispatch(bk->ctl);
		break;
	case EV_WAKE:
		if (read(bk->host.wake_fd, &v, sizeof(v)) > 0)
			xbd_back_handle_wake(bk);
		break;
	case EV_TIMER:
		xbd_back_timer(bk);
		break;
	case EV_WORKERS:
		xbd_workers_dispatch(bk->workers);
		break;
	case EV_SIGNAL:
		on_signals(l);
		break;
	}
}

/* Serve until a signal, the --run command's end or a lost xenstore says to stop. */
static void run(struct loop *l)
{
	l->rc = 0;
	l->running = true;
	while (l->running) {
		struct epoll_event evs[8];
		int n, i;

		n = epoll_wait(l->epfd, evs, 8, l->more ? 0 : -1);
		if (n < 0 && errno != EINTR) {
			xbd_log(XBD_LOG_ERR, "epoll_wait: %s", strerror(errno));
			l->rc = 1;
			break;
		}
		for (i = 0; i < n; i++)
			on_event(l, (enum main_event)evs[i].data.u32);
		/* The work this turn's events marked, each device once. */
		if (l->running) {
			l->more = pass(&l->bk);
			status_update(l);
		}
	}
	if (l->child > 0) {
		kill(l->child, SIGTERM);
		waitpid(l->child, NULL, 0);
	}
}

/*
 * The stop (see the top of this file): every ring answers what it took,
 * xenstore is left as it is.  Returns, unless a ring was left to its
 * journal at the deadline: then the daemon ends here as if killed.
 */
static void stop(struct loop *l)
{
	struct xbd_back *bk = &l->bk;
	struct xbd_back_count n;
	char w[64], st[256];

	notify("STOPPING=1");
	xbd_back_count(bk, &n);
	if (l->started)
		xbd_log(XBD_LOG_INFO, "stopping on %s: %s",
			l->why_stop ? l->why_stop : l->child < 0 && bk->opts.run ?
			"the end of the --run command" : "an error", count_words(w, sizeof(w), &n));
	bk->host.stopping = true;
	bk->host.stop_deadline_ms = xbd_mono_ns() / 1000000 + XBD_STOP_DEADLINE_MS;
	xbd_back_shutdown(bk);
	/*
	 * What the next daemon finds: the devices left Connected resume (see
	 * the top of this file), their rings' requests all answered or, past
	 * the deadline, left to the journals.
	 */
	snprintf(st, sizeof(st), "stopped: %u disk%s left Connected for the next xbd-back (%s "
		 "then), %u not connected; %s", n.connected, n.connected == 1 ? "" : "s",
		 n.connected == 1 ? "its guest resumes" : "their guests resume",
		 n.disks - n.connected, bk->host.abandoned ?
		 "rings past the deadline left to their journals (the next xbd-back answers "
		 "their requests)" : "every request consumed was answered");
	if (l->started)
		xbd_log(XBD_LOG_INFO, "%s", st);
	if (l->started && !bk->host.abandoned) {
		char msg[sizeof(st) + 8];

		snprintf(msg, sizeof(msg), "STATUS=%s", st);
		notify(msg);
	}
	xbd_workers_close(bk->workers);
	xbd_control_close(bk->ctl);
	/*
	 * A ring whose storage kept its requests past the deadline still runs:
	 * end here, as a kill would, with its journal as it is (journal.h: any
	 * instant is a consistent one), and leave the rest to the kernel.
	 */
	if (bk->host.abandoned) {
		notify("STATUS=stopped; rings past the deadline left to their journals");
		fflush(stderr);
		_exit(l->rc);
	}
	/*
	 * A storage open still on its thread (a server or a Ceph monitor
	 * slow to answer) has until the deadline: exit() would tear down the
	 * library it runs in (librados' globals) under it; past it, end as
	 * a kill would.
	 */
	while (__atomic_load_n(&bk->open_threads, __ATOMIC_ACQUIRE) &&
	       xbd_mono_ns() / 1000000 < bk->host.stop_deadline_ms)
		usleep(10000);
	if (__atomic_load_n(&bk->open_threads, __ATOMIC_ACQUIRE)) {
		fflush(stderr);
		_exit(l->rc);
	}
	free(l->ctl_path);
	if (bk->xs)
		xbd_xs_close(bk->xs);
	xbd_platform_close(bk->host.plat);
	if (l->sfd >= 0)
		close(l->sfd);
	if (l->epfd >= 0)
		close(l->epfd);
	if (bk->host.wake_fd >= 0)
		close(bk->host.wake_fd);
	if (bk->timer_fd >= 0)
		close(bk->timer_fd);
	free(bk->journal_dir);
	free(bk->cbt_dir);
	xbd_back_free_options(&bk->opts);
}

/* The options, and the settings' own modes: 0 to serve, else 1 + the exit status. */
static int options(struct xbd_back *bk, int argc, char **argv)
{
	int err = xbd_back_parse_options(argc, argv, &bk->opts);

	if (err) {
		xbd_back_free_options(&bk->opts);
		return 1 + (err > 0 ? 0 : 2);
	}
	if (bk->opts.check_config) {
		xbd_back_print_options(stdout, &bk->opts);
		xbd_back_free_options(&bk->opts);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct loop l = { .sfd = -1, .epfd = -1, .child = -1, .rc = 1 };
	struct xbd_back *bk = &l.bk;
	int err, lock_fd;

	/* A worker (workers/worker.h): a fresh image our supervisor exec'd, nothing of the above. */
	if (argc > 1 && !strcmp(argv[1], "--worker"))
		return xbd_worker_main(argc, argv);
	bk->host.wake_fd = bk->timer_fd = -1;
	bk->argc = argc;
	bk->argv = argv;
	err = options(bk, argc, argv);
	if (err)
		return err - 1;
	xbd_log_set_level(bk->opts.verbose);
	xbd_log_set_syslog(bk->opts.log_target == XBD_LOG_TO_SYSLOG);
	/* Writes to a frontend that vanished must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);

	err = xbd_platform_open(bk->opts.platform, &bk->host.plat);
	if (err) {
		platform_error(bk->opts.platform, err);
		xbd_back_free_options(&bk->opts);
		return 1;
	}
	bk->domid = xbd_platform_domid(bk->host.plat);
	lock_fd = host_lock(bk);
	if (lock_fd == -1) {
		xbd_platform_close(bk->host.plat);
		xbd_back_free_options(&bk->opts);
		return 1;
	}
	err = xbd_xs_open(&bk->xs);
	if (err)
		xbd_log(XBD_LOG_ERR, "cannot connect to xenstore: %s", strerror(-err));
	if (!err && !loop_open(&l) && !serve_setup(&l)) {
		/* Find the devices already there before the --run command starts. */
		l.more = pass(bk);
		say_started(&l);
		notify("READY=1");
		if (bk->opts.run)
			l.child = run_command(bk->opts.run, &l.oldmask);
		if (l.child < 0 && bk->opts.run)
			xbd_log(XBD_LOG_ERR, "cannot run '%s': %s", bk->opts.run, strerror(errno));
		else
			run(&l);
	}
	stop(&l);
	/* Last: a successor may start the moment it is gone. */
	if (lock_fd >= 0)
		close(lock_fd);
	return l.rc;
}
