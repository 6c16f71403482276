/*
 * worker.c: a worker process (worker.h), `xbd-back --worker FD`.  It
 * receives HELLO, opens its platform (on Xen from the gntdev fd it was
 * handed, on the simulator by the host's directory), confines itself
 * (confine.c), says READY, and then serves the rings of its domain's
 * devices with the data path (datapath/), exactly as the main process
 * would: a device is a store re-created from what the main process
 * opened, a ring is started from the journal and event channel fds it is
 * handed, and its counters are a slot of the memory both processes map.  Its log lines
 * go to the main process, which writes them.  It exits when told to
 * (EXIT, or SHUTDOWN on SIGTERM once every ring answered everything),
 * and dies with the main process.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blkback/datapath/cbt.h"
#include "blkback/datapath/dataplane.h"
#include "blkback/datapath/throttle.h"
#include "blkback/workers/confine.h"
#include "blkback/workers/worker.h"
#include "blkback/workers/workers.h"

/* One device of the domain, as DEV_OPEN described it. */
struct wk_dev {
	struct wk_dev *next;
	uint32_t id;             /* the main process's number for it */
	char type[8];
	struct xbd_disk disk;    /* its rings' inputs, from DEV_OPEN */
	struct xbd_ring **rings; /* disk.nr_rings of them, served by threads here (dataplane.h) */
	bool *running;           /* per ring: its thread runs, RING_EXITED not sent yet */
	bool *failed_sent;       /* per ring: RING_FAILED sent */
	int *journal_fd;         /* per ring: its journal's file while it runs, or -1 */
	int import_err;          /* the store could not be re-created: rings fail */
};

struct wk {
	int sock;
	struct xbd_ring_host host; /* what its rings use: the platform, wake_fd, stopping */
	struct xbd_wslot *slots;
	size_t slots_size;
	struct wk_dev *devs;
	uint32_t domid;
	uint32_t self_domid;     /* the domain xbd-back runs in */
	bool exiting;            /* EXIT or SHUTDOWN: leave once no ring runs */
	uint64_t log_dropped;    /* lines the main process had no room for */
#ifdef XBD_TEST_HOOKS
	char hook[32];           /* a forbidden call to make, once (tests) */
	uint64_t hook_after;
	uint32_t start_delay_ms; /* before READY (tests) */
	char misbehave[16];      /* after READY: "silent" or "flood" (tests) */
#endif
};

/* ---- log lines, through the main process ---- */

static void log_to_main(int level, const char *text, void *arg)
{
	struct wk *w = arg;
	struct xbd_wmsg m;

	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_LOG;
	m.u.log.level = level;
	snprintf(m.u.log.text, sizeof(m.u.log.text), "%s", text);
	/* Never block a ring thread on the main process: drop what does not fit. */
	if (xbd_wmsg_send(w->sock, &m, NULL, 0, 0))
		__atomic_add_fetch(&w->log_dropped, 1, __ATOMIC_RELAXED);
}

/* ---- devices and rings ---- */

static struct wk_dev *find_dev(struct wk *w, uint32_t id)
{
	struct wk_dev *d;

	for (d = w->devs; d; d = d->next)
		if (d->id == id)
			return d;
	return NULL;
}

static void close_fds(const int *fds, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* The disk's tracking files (a tracking file and its view's, or the first alone): mapped, closed. */
static void dev_cbt(struct wk_dev *d, const int *fds, unsigned int n)
{
	int err = xbd_cbt_attach(&d->disk, fds[0], n > 1 ? fds[1] : -1);

	if (err)
		xbd_log(XBD_LOG_ERR, "%s: cannot map its changed-block tracking: %s", d->disk.name,
			strerror(-err));
}

static void dev_open(struct wk *w, const struct xbd_wmsg *m, const int *fds, unsigned int nfds)
{
	const struct xbd_wmsg_dev_open *o = &m->u.dev_open;
	int sfds[XBD_STORE_EXPORT_FDS] = { -1, -1 };
	struct wk_dev *d;
	unsigned int i;

	if (find_dev(w, m->dev) || !o->nr_rings || o->nr_rings > XBD_WORKER_SLOTS ||
	    o->store.nfds > XBD_STORE_EXPORT_FDS || o->cbt_fds > 2 ||
	    o->store.nfds + o->cbt_fds != nfds ||
	    (strcmp(o->type, "vbd") && strcmp(o->type, "vbd3"))) {
		close_fds(fds, nfds);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (d) {
		d->rings = calloc(o->nr_rings, sizeof(*d->rings));
		d->running = calloc(o->nr_rings, sizeof(*d->running));
		d->failed_sent = calloc(o->nr_rings, sizeof(*d->failed_sent));
		d->journal_fd = calloc(o->nr_rings, sizeof(*d->journal_fd));
	}
	if (!d || !d->rings || !d->running || !d->failed_sent || !d->journal_fd) {
		if (d) {
			free(d->rings);
			free(d->running);
			free(d->failed_sent);
			free(d->journal_fd);
		}
		free(d);
		close_fds(fds, nfds);
		return;
	}
	d->id = m->dev;
	memcpy(d->type, o->type, sizeof(d->type));
	d->type[sizeof(d->type) - 1] = '\0';
	d->disk.host = &w->host;
	d->disk.type = d->type;
	d->disk.domid = o->domid;
	d->disk.devid = o->devid;
	snprintf(d->disk.name, sizeof(d->disk.name), "%.*s", (int)sizeof(o->name), o->name);
	d->disk.o = o->o;
	d->disk.thr_state = o->thr;
	d->disk.lim = o->lim;
	d->disk.abi = (enum xbd_abi)o->abi;
	d->disk.persistent = o->persistent;
	d->disk.copy = o->copy;
	d->disk.nr_rings = o->nr_rings;
	xbd_ratelimit_init(&d->disk.rl);
	xbd_ratelimit_init(&d->disk.crl);
	d->disk.rl.who = d->disk.crl.who = d->disk.name;
	for (i = 0; i < o->store.nfds; i++)
		sfds[i] = fds[i];
	d->import_err = xbd_store_import(&o->store, sfds, &d->disk.eng, &d->disk.store);
	if (d->import_err)
		xbd_log(XBD_LOG_ERR, "%s: cannot serve its %.16s store here: %s", d->disk.name,
			o->store.engine, strerror(-d->import_err));
	/* Its changed-block tracking (datapath/cbt.h): mapped here, the fds ours to close. */
	d->disk.cbt_fd = d->disk.view_fd = -1;
	if (o->cbt_fds)
		dev_cbt(d, fds + o->store.nfds, o->cbt_fds);
	for (i = 0; i < o->nr_rings; i++) {
		d->rings[i] = xbd_ring_new(&xbd_ring_here, &d->disk, i);
		d->journal_fd[i] = -1;
	}
	d->next = w->devs;
	w->devs = d;
}

static void dev_free(struct wk *w, struct wk_dev *d)
{
	struct wk_dev **pp;

	for (pp = &w->devs; *pp; pp = &(*pp)->next)
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	if (d->disk.store)
		d->disk.eng->close(d->disk.store);
	xbd_cbt_detach(&d->disk);
	xbd_disk_throttle_release(&d->disk, true);
	xbd_ratelimit_destroy(&d->disk.rl);
	xbd_ratelimit_destroy(&d->disk.crl);
	for (unsigned int i = 0; i < d->disk.nr_rings; i++)
		xbd_ring_free(d->rings[i]);
	free(d->rings);
	free(d->running);
	free(d->failed_sent);
	free(d->journal_fd);
	free(d);
}

static bool any_running(const struct wk_dev *d)
{
	for (unsigned int i = 0; i < d->disk.nr_rings; i++)
		if (d->running[i])
			return true;
	return false;
}

static void reply(struct wk *w, const struct xbd_wmsg *m)
{
	/* The main process waits for it: block until it has room (it reads promptly). */
	if (xbd_wmsg_send(w->sock, m, NULL, 0, -1) == -EPIPE)
		_exit(1);
}

static void ring_start(struct wk *w, const struct xbd_wmsg *m, const int *fds, unsigned int nfds)
{
	const struct xbd_wmsg_ring_start *rs = &m->u.ring_start;
	struct wk_dev *d = find_dev(w, m->dev);
	struct xbd_ring_params p = { .journal_fd = -1, .evtchn_fd = -1 };
	struct xbd_ring_report rep;
	struct xbd_wmsg r;
	unsigned int k = 0;

	memset(&r, 0, sizeof(r));
	r.type = XBD_WMSG_RING_STARTED;
	r.dev = m->dev;
	r.ring = m->ring;
	if (!d || m->ring >= d->disk.nr_rings || d->running[m->ring] || !d->rings[m->ring] ||
	    rs->slot >= XBD_WORKER_SLOTS || rs->nr_pages < 1 ||
	    rs->nr_pages > XBD_RING_MAX_PAGES || nfds != (unsigned int)(rs->journal + rs->evtchn) ||
	    rs->cpu < -1 || rs->cpu >= CPU_SETSIZE) {
		close_fds(fds, nfds);
		r.u.ring_started.err = -EINVAL;
		reply(w, &r);
		return;
	}
	p.nr_pages = rs->nr_pages;
	memcpy(p.refs, rs->refs, sizeof(p.refs));
	p.remote_port = rs->remote_port;
	p.resume = rs->resume;
	p.redo_counted = rs->redo_counted;
	p.cpu = rs->cpu;
	p.journal_fd = rs->journal ? fds[k++] : -1;
	p.evtchn_fd = rs->evtchn ? fds[k++] : -1;
	p.stats = &w->slots[rs->slot].stats;
	p.seen = &w->slots[rs->slot].seen;
	if (d->import_err) {
		r.u.ring_started.err = d->import_err;
		if (p.evtchn_fd >= 0)
			close(p.evtchn_fd);
	} else {
		/* (The ring takes the event channel's fd, adopted or closed.) */
		r.u.ring_started.err = xbd_ring_start(d->rings[m->ring], &p);
	}
	xbd_ring_report(d->rings[m->ring], &rep);
	r.u.ring_started.journal_err = rep.journal_err;
	r.u.ring_started.nredo = rep.nredo;
	r.u.ring_started.resumed = rep.resumed;
	r.u.ring_started.port = rep.port;
	if (r.u.ring_started.err) {
		/* Nothing runs: the journal's fd goes (the ring kept none it did not use). */
		if (p.journal_fd >= 0)
			close(p.journal_fd);
	} else {
		d->journal_fd[m->ring] = p.journal_fd;
		d->running[m->ring] = true;
		d->failed_sent[m->ring] = false;
	}
	reply(w, &r);
}

/* Rings that failed or whose threads finished: tell the main process. */
static void check_rings(struct wk *w)
{
	struct wk_dev *d;

	for (d = w->devs; d; d = d->next) {
		for (unsigned int i = 0; i < d->disk.nr_rings; i++) {
			struct xbd_ring *ring = d->rings[i];
			struct xbd_ring_report rep;
			struct xbd_wmsg m;

			if (!d->running[i])
				continue;
			memset(&m, 0, sizeof(m));
			m.dev = d->id;
			m.ring = i;
			xbd_ring_report(ring, &rep);
			if (rep.failed && !d->failed_sent[i]) {
				d->failed_sent[i] = true;
				m.type = XBD_WMSG_RING_FAILED;
				reply(w, &m);
			}
			if (!xbd_ring_exited(ring))
				continue;
			/* Joined and released: unmapped, unbound, before the main process hears. */
			xbd_ring_stop(ring);
			xbd_ring_report(ring, &rep);
			if (d->journal_fd[i] >= 0)
				close(d->journal_fd[i]);
			d->journal_fd[i] = -1;
			d->running[i] = false;
			m.type = XBD_WMSG_RING_EXITED;
			m.u.ring_exited.stop_inflight = rep.stop_inflight;
			m.u.ring_exited.busy = rep.stop_busy;
			m.u.ring_exited.left = rep.stop_left;
			if (d->disk.thr)
				xbd_throttle_save(d->disk.thr, &m.u.ring_exited.thr);
			reply(w, &m);
		}
	}
}

static void stop_all(struct wk *w)
{
	for (struct wk_dev *d = w->devs; d; d = d->next)
		for (unsigned int i = 0; i < d->disk.nr_rings; i++)
			if (d->running[i])
				xbd_ring_request_stop(d->rings[i]);
}

static bool anything_running(const struct wk *w)
{
	for (const struct wk_dev *d = w->devs; d; d = d->next)
		if (any_running(d))
			return true;
	return false;
}

static void handle(struct wk *w, struct xbd_wmsg *m, int *fds, unsigned int nfds)
{
	struct wk_dev *d = find_dev(w, m->dev);

	switch (m->type) {
	case XBD_WMSG_DEV_OPEN:
		dev_open(w, m, fds, nfds);
		return;
	case XBD_WMSG_RING_START:
		ring_start(w, m, fds, nfds);
		return;
	case XBD_WMSG_RING_STOP:
		if (d && m->ring < d->disk.nr_rings && d->running[m->ring])
			xbd_ring_request_stop(d->rings[m->ring]);
		break;
	case XBD_WMSG_DEV_CLOSE:
		if (d && !any_running(d))
			dev_free(w, d);
		break;
	case XBD_WMSG_RESIZE:
		if (d)
			__atomic_store_n(&d->disk.lim.nr_sectors, m->u.nr_sectors, __ATOMIC_RELAXED);
		break;
	case XBD_WMSG_SET:
		if (d) {
			xbd_disk_opts_store(&d->disk.o, &m->u.set.o, m->u.set.mask);
			/* New limits: the rings see them at their next submission. */
			if (d->disk.thr || any_running(d))
				xbd_disk_throttle_update(&d->disk);
		}
		if (m->u.set.log_level >= XBD_LOG_ERR && m->u.set.log_level <= XBD_LOG_DEBUG)
			xbd_log_set_level(m->u.set.log_level);
		break;
	case XBD_WMSG_CBT:
		/* Tracking turned on while it runs: its rings see it at their next round. */
		if (d && (m->u.cbt_fds == 1 || m->u.cbt_fds == 2) && nfds == m->u.cbt_fds) {
			dev_cbt(d, fds, nfds);
			return;
		}
		break;
	case XBD_WMSG_SHUTDOWN:
		/* Like the main process's SIGTERM: every consumed request answered. */
		w->host.stopping = true;
		w->exiting = true;
		stop_all(w);
		break;
	case XBD_WMSG_EXIT:
		/* Its domain has no device left: a ring still running has nobody to serve. */
		w->exiting = true;
		stop_all(w);
		break;
	default:
		break;
	}
	close_fds(fds, nfds);
}

#ifdef XBD_TEST_HOOKS
/*
 * Tests: once its rings have taken hook_after requests, make the call the
 * hook names, which the allow-list forbids: the worker must die of it
 * (SIGSYS).  Should it survive, the line below says so.
 */
static void test_forbidden_call(struct wk *w)
{
	uint64_t n = 0;

	if (!w->hook[0])
		return;
	for (unsigned int i = 0; i < XBD_WORKER_SLOTS; i++)
		n += __atomic_load_n(&w->slots[i].stats.rd_req, __ATOMIC_RELAXED) +
		     __atomic_load_n(&w->slots[i].stats.wr_req, __ATOMIC_RELAXED);
	if (n < w->hook_after)
		return;
	if (!strncmp(w->hook, "open", 4)) {
		int fd = open("/etc/passwd", O_RDONLY);

		xbd_log(XBD_LOG_ERR, "worker: TEST: a forbidden open() returned %d", fd);
	} else if (!strncmp(w->hook, "exec", 4)) {
		char *argv[] = { (char *)"true", NULL };

		execv("/bin/true", argv);
		xbd_log(XBD_LOG_ERR, "worker: TEST: a forbidden execv() returned: %s", strerror(errno));
	}
	w->hook[0] = '\0';
}
#endif

#ifdef XBD_TEST_HOOKS
/*
 * Tests: a worker as a compromised one would be, right after READY:
 * "silent" reads and answers nothing ever again; "flood" sends log lines
 * as fast as the main process takes them.  Either way it never returns;
 * it dies with the main process (or of its kill).
 */
static void test_misbehave(struct wk *w)
{
	struct xbd_wmsg m;

	if (!strcmp(w->misbehave, "silent")) {
		for (;;) {
			struct timespec ts = { .tv_sec = 3600 };

			nanosleep(&ts, NULL);
		}
	}
	if (!strcmp(w->misbehave, "flood")) {
		memset(&m, 0, sizeof(m));
		m.type = XBD_WMSG_LOG;
		m.u.log.level = XBD_LOG_ERR;
		for (uint64_t n = 0;; n++) {
			snprintf(m.u.log.text, sizeof(m.u.log.text), "worker: TEST: line %" PRIu64, n);
			if (xbd_wmsg_send(w->sock, &m, NULL, 0, -1) == -EPIPE)
				_exit(1);
		}
	}
}
#endif

/* ---- start: HELLO, the platform, confinement, READY ---- */

static int hello(struct wk *w, struct xbd_confine_req *c, char *simdir, size_t len)
{
	struct xbd_wmsg m;
	int fds[XBD_WMSG_MAX_FDS];
	unsigned int nfds = 0;
	int err;

	err = xbd_wmsg_recv(w->sock, &m, fds, &nfds, 10000);
	if (err)
		return err;
	if (m.type != XBD_WMSG_HELLO || nfds < 1) {
		close_fds(fds, nfds);
		return -EPROTO;
	}
	/* The counters: the main process sealed the file, it cannot change size. */
	w->slots_size = sizeof(struct xbd_wslot) * XBD_WORKER_SLOTS;
	w->slots = mmap(NULL, w->slots_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	if (w->slots == MAP_FAILED) {
		close_fds(fds + 1, nfds - 1);
		return -errno;
	}
	w->domid = m.u.hello.domid;
	w->self_domid = m.u.hello.self_domid;
	xbd_log_set_level(m.u.hello.log_level);
	memset(c, 0, sizeof(*c));
	c->uid = m.u.hello.uid;
	c->gid = m.u.hello.gid;
	c->main_pid = (pid_t)m.u.hello.main_pid;
	c->sanitizers = m.u.hello.sanitizers;
#ifdef XBD_TEST_HOOKS
	memcpy(w->hook, m.u.hello.test_hook, sizeof(w->hook));
	w->hook[sizeof(w->hook) - 1] = '\0';
	if (w->hook[0] && strchr(w->hook, ':'))
		w->hook_after = strtoull(strchr(w->hook, ':') + 1, NULL, 10);
	w->start_delay_ms = m.u.hello.test_start_delay_ms;
	memcpy(w->misbehave, m.u.hello.test_misbehave, sizeof(w->misbehave));
	w->misbehave[sizeof(w->misbehave) - 1] = '\0';
#endif
	if (m.u.hello.platform == XBD_WPLAT_XEN) {
		close_fds(fds + 2, nfds > 2 ? nfds - 2 : 0);
		return nfds >= 2 ? xbd_platform_xen_from_fd(fds[1], w->self_domid, &w->host.plat) : -EPROTO;
	}
	close_fds(fds + 1, nfds - 1);
	snprintf(simdir, len, "%.*s", (int)sizeof(m.u.hello.sim_dir), m.u.hello.sim_dir);
	c->sim = true;
	c->sim_dir = simdir;
	return xbd_platform_open_sim(simdir, w->self_domid, &w->host.plat);
}

/* Up to 64 of the main process's messages waiting on the socket, each handled. */
static void take_messages(struct wk *w)
{
	for (unsigned int k = 0; k < 64; k++) {
		struct xbd_wmsg m;
		int fds[XBD_WMSG_MAX_FDS];
		unsigned int nfds = 0;
		int err = xbd_wmsg_recv(w->sock, &m, fds, &nfds, 0);

		if (err == -EAGAIN)
			break;
		/* The main process is gone (PDEATHSIG kills us anyway). */
		if (err == -EPIPE)
			_exit(1);
		if (!err)
			handle(w, &m, fds, nfds);
	}
}

/* Serve: messages and ring events, until told to exit and no ring runs. */
static void serve(struct wk *w, int epfd)
{
	for (;;) {
		struct epoll_event evs[2];
		int n, i, timeout = -1;

#ifdef XBD_TEST_HOOKS
		if (w->hook[0])
			timeout = 20;
#endif
		n = epoll_wait(epfd, evs, 2, timeout);
		for (i = 0; i < n; i++) {
			if (evs[i].data.u32 == 1) {
				uint64_t v;

				if (read(w->host.wake_fd, &v, sizeof(v)) < 0) {
					/* Already read: the rings are checked anyway. */
				}
				continue;
			}
			take_messages(w);
		}
		check_rings(w);
#ifdef XBD_TEST_HOOKS
		test_forbidden_call(w);
#endif
		if (w->exiting && !anything_running(w))
			break;
	}
}

int xbd_worker_main(int argc, char **argv)
{
	struct wk w;
	struct xbd_confine_req c;
	struct xbd_wmsg m;
	char simdir[PATH_MAX];
	struct epoll_event ev = { .events = EPOLLIN };
	int epfd, err;

	memset(&w, 0, sizeof(w));
	if (argc != 3 || strcmp(argv[1], "--worker") || atoi(argv[2]) != XBD_WORKER_FD) {
		fprintf(stderr, "xbd-back: --worker is started by xbd-back itself\n");
		return 2;
	}
	w.sock = XBD_WORKER_FD;
	/* fexecve names us after the fd ("3"): ps, top and CPU accounting want a name. */
	prctl(PR_SET_NAME, "xbd-worker");
	/* Nothing of the main process but the socket (and stderr, for a sanitizer's report). */
	close_range(XBD_WORKER_FD + 1, ~0u, 0);
	/* The main process stops us: the terminal's and systemd's signals are its. */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGUSR1, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	xbd_log_set_sink(log_to_main, &w);
	err = hello(&w, &c, simdir, sizeof(simdir));
	if (err) {
		fprintf(stderr, "xbd-back: worker: cannot start: %s\n", strerror(-err));
		return 1;
	}
	w.host.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w.host.wake_fd < 0 || epfd < 0)
		return 1;
	ev.data.u32 = 0;
	epoll_ctl(epfd, EPOLL_CTL_ADD, w.sock, &ev);
	ev.data.u32 = 1;
	epoll_ctl(epfd, EPOLL_CTL_ADD, w.host.wake_fd, &ev);

	/* Before anything the guest controls: no ring is mapped yet. */
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_READY;
	m.u.skipped = xbd_confine(&c);
#ifdef XBD_TEST_HOOKS
	/* A start as slow as an exec on a loaded, emulated host. */
	if (w.start_delay_ms) {
		struct timespec ts = { .tv_sec = w.start_delay_ms / 1000,
				       .tv_nsec = (long)(w.start_delay_ms % 1000) * 1000000 };

		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
#endif
	reply(&w, &m);
#ifdef XBD_TEST_HOOKS
	test_misbehave(&w);
#endif
	serve(&w, epfd);
	while (w.devs)
		dev_free(&w, w.devs);
	xbd_platform_close(w.host.plat);
	return 0;
}
