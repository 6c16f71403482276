/*
 * xbdfront.c: libxbdfront's lifetime and event loop: open (platform,
 * xenstore, per-queue event channel handles, the first handshake), the
 * epoll fd callers wait on, process (responses, then backend state
 * changes), the blocking helper, and close.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "blkfront/front-internal.h"
#include "common/clock.h"

#define XS_TAG UINT32_MAX

void xbd_front_opts_init(struct xbd_front_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->platform = XBD_PLATFORM_AUTO;
	opts->ring_order = -1;
	opts->persistent = -1;
	opts->indirect_segs = -1;
	opts->abi = XBD_ABI_NATIVE;
	opts->timeout_ms = 10000;
	opts->reconnect = true;
}

static void on_backend_state(struct xbd_xs *xs, const char *path, void *arg)
{
	struct xbd_front *f = arg;

	f->be_changed = true;
}

/*
 * End every grant and free the queues.  The backend gets up to grace_ms
 * (for all queues together) to unmap what it still maps.
 */
static void free_queues(struct xbd_front *f, int grace_ms)
{
	unsigned int i, left;
	int waited;

	for (i = 0; i < f->nr_queues_alloc; i++) {
		struct xbdf_queue *q = &f->queues[i];

		pthread_mutex_lock(&q->lock);
		xbdf_pool_drain(q);
		pthread_mutex_unlock(&q->lock);
	}
	for (waited = 0;; waited += 20) {
		for (i = 0, left = 0; i < f->nr_queues_alloc; i++)
			left += xbdf_deferred_retry(&f->queues[i]);
		if (!left || waited >= grace_ms)
			break;
		usleep(20000);
	}
	for (i = 0; i < f->nr_queues_alloc; i++) {
		struct xbdf_queue *q = &f->queues[i];

		if (xbdf_deferred_retry(q)) {
			unsigned int pages = 0;

			for (struct xbdf_deferred *d = q->deferred; d; d = d->next)
				pages += d->count;
			/*
			 * Only where ending a mapped grant fails (the
			 * simulator; Linux's gntalloc defers it instead): a
			 * backend dead is unmapped by its kernel, so this is
			 * one alive but slow to unmap, or hung.
			 */
			fprintf(stderr, "xbd-front: vbd %u/%u: queue %u: the backend still maps %u page(s)"
				" %d ms after close (alive but slow to unmap, or hung); they stay granted"
				" and are never reused: %u KiB of the guest's memory lost until the guest"
				" is destroyed\n", f->info.domid, f->info.devid, i, pages, waited,
				pages * (XBD_PAGE_SIZE / 1024));
		}
		/* the pages stay granted (never free what the backend maps); the records go */
		while (q->deferred) {
			struct xbdf_deferred *d = q->deferred;

			q->deferred = d->next;
			free(d);
		}
		if (q->evt)
			xbd_evtchn_close(q->evt);
		free(q->slot);
		free(q->free_ids);
		pthread_mutex_destroy(&q->lock);
	}
}

int xbd_front_open(const struct xbd_front_opts *opts, struct xbd_front **out)
{
	struct xbd_front *f;
	struct epoll_event ev;
	char p[XBD_XS_PATH_MAX];
	unsigned int i, nq;
	int rc;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->opts = *opts;
	if (f->opts.timeout_ms <= 0)
		f->opts.timeout_ms = 10000;
	pthread_mutex_init(&f->lock, NULL);
	f->epfd = -1;
	rc = xbd_platform_open(opts->platform, &f->plat);
	if (rc < 0)
		goto fail_free;
	rc = xbd_xs_open(&f->xs);
	if (rc < 0)
		goto fail_plat;
	rc = xbd_front_resolve(f);
	if (rc < 0)
		goto fail_xs;

	nq = opts->max_queues ? opts->max_queues : 4;
	if (nq > XBD_FRONT_MAX_QUEUES)
		nq = XBD_FRONT_MAX_QUEUES;
	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (f->epfd < 0) {
		rc = -errno;
		goto fail_xs;
	}
	for (i = 0; i < nq; i++) {
		struct xbdf_queue *q = &f->queues[i];

		pthread_mutex_init(&q->lock, NULL);
		q->f = f;
		q->idx = i;
		q->port = -1;
		f->nr_queues_alloc = i + 1;
		rc = xbd_evtchn_open(f->plat, &q->evt);
		if (rc < 0) {
			q->evt = NULL;
			goto fail_queues;
		}
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN;
		ev.data.u32 = i;
		if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, xbd_evtchn_fd(q->evt), &ev) < 0) {
			rc = -errno;
			goto fail_queues;
		}
	}
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u32 = XS_TAG;
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, xbd_xs_fd(f->xs), &ev) < 0) {
		rc = -errno;
		goto fail_queues;
	}

	rc = xbd_front_attach(f);
	if (rc < 0)
		goto fail_detach;
	rc = xbd_xs_pathf(p, sizeof(p), "%s/state", f->info.backend_path);
	if (rc == 0)
		rc = xbd_xs_watch(f->xs, p, on_backend_state, f, &f->watch);
	if (rc < 0)
		goto fail_detach;
	*out = f;
	return 0;

fail_detach:
	xbd_front_detach(f, f->opts.timeout_ms);
fail_queues:
	free_queues(f, 1000);
	close(f->epfd);
fail_xs:
	xbd_xs_close(f->xs);
fail_plat:
	xbd_platform_close(f->plat);
fail_free:
	pthread_mutex_destroy(&f->lock);
	free(f);
	return rc;
}

int xbd_front_process(struct xbd_front *f)
{
	unsigned int i;
	int n, total = 0;

	if (f->broken)
		return f->broken;
	for (i = 0; i < f->nr_queues_alloc; i++) {
		struct xbdf_queue *q = &f->queues[i];

		/* the budget counts deferred pages: what they free may let a request go */
		pthread_mutex_lock(&q->lock);
		if (q->deferred) {
			xbdf_deferred_retry(q);
			xbdf_queue_kick(q);
		}
		pthread_mutex_unlock(&q->lock);
		n = xbdf_queue_reap(q);
		if (n < 0) {
			/* a backend that corrupts the ring gets nothing more from us */
			xbd_front_detach(f, f->opts.timeout_ms);
			return n;
		}
		total += n;
	}
	n = xbd_xs_dispatch(f->xs);
	if (n < 0) {
		xbd_front_set_broken(f, -ENODEV, "xenstore connection lost");
		return -ENODEV;
	}
	while (f->be_changed) {
		enum xenbus_state before = f->fstate;

		f->be_changed = false;
		n = xbd_front_follow_backend(f);
		if (n == -ENODEV) {
			xbd_front_set_broken(f, -ENODEV, "device removed");
			return -ENODEV;
		}
		if (n < 0)
			fprintf(stderr, "xbd-front: vbd %u/%u: reconnect step failed: %s\n",
				f->info.domid, f->info.devid, strerror(-n));
		/* a state we wrote may let the next step happen at once */
		if (f->fstate != before)
			f->be_changed = true;
	}
	return total;
}

int xbd_front_run(struct xbd_front *f, int timeout_ms)
{
	struct epoll_event ev[8];
	int n;

	n = epoll_wait(f->epfd, ev, 8, timeout_ms);
	if (n < 0 && errno != EINTR)
		return -errno;
	return xbd_front_process(f);
}

struct sync_wait {
	bool done;
	int result;
};

static void sync_done(void *arg, int result)
{
	struct sync_wait *w = arg;

	w->result = result;
	w->done = true;
}

int xbd_front_io(struct xbd_front *f, enum xbd_front_op op, unsigned int flags, int queue,
		 uint64_t offset, uint64_t len, void *buf)
{
	struct sync_wait w = { 0 };
	struct xbd_front_req req = {
		.op = op, .flags = flags, .queue = queue, .offset = offset, .len = len,
		.buf = buf, .cb = sync_done, .arg = &w,
	};
	int rc;

	rc = xbd_front_submit(f, &req);
	if (rc < 0)
		return rc;
	while (!w.done) {
		rc = xbd_front_run(f, 1000);
		if (rc < 0 && !w.done)
			return rc;
	}
	return w.result;
}

void xbd_front_close(struct xbd_front *f)
{
	uint64_t t0;
	long long left;

	if (!f)
		return;
	/*
	 * One timeout for all of close: letting what is in flight finish and
	 * the handshake share it, so a backend that is gone costs it once.
	 */
	t0 = xbd_mono_ms();
	while (!f->broken && atomic_load(&f->inflight) > 0) {
		if (xbd_mono_ms() - t0 > (uint64_t)f->opts.timeout_ms)
			break;
		if (xbd_front_run(f, 100) < 0)
			break;
	}
	if (f->watch)
		xbd_xs_unwatch(f->xs, f->watch);
	left = f->opts.timeout_ms - (long long)(xbd_mono_ms() - t0);
	/* a short handshake even when the drain used it all: a live backend answers at once */
	if (left < 1000)
		left = f->opts.timeout_ms < 1000 ? f->opts.timeout_ms : 1000;
	xbd_front_detach(f, (int)left);
	left = f->opts.timeout_ms - (long long)(xbd_mono_ms() - t0);
	pthread_mutex_lock(&f->lock);
	if (!f->broken)
		f->broken = -ESHUTDOWN;
	pthread_mutex_unlock(&f->lock);
	xbd_front_fail_all(f, -ESHUTDOWN);
	/* a second for the backend to unmap, unless the timeout is spent (a dead backend) */
	free_queues(f, left > 1000 ? 1000 : left > 200 ? (int)left : 200);
	close(f->epfd);
	xbd_xs_close(f->xs);
	xbd_platform_close(f->plat);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

void xbd_front_info(const struct xbd_front *f, struct xbd_front_info *out)
{
	pthread_mutex_lock((pthread_mutex_t *)&f->lock);
	*out = f->info;
	pthread_mutex_unlock((pthread_mutex_t *)&f->lock);
}

void xbd_front_stats(const struct xbd_front *f, struct xbd_front_stats *out)
{
	out->requests = __atomic_load_n(&f->stats.requests, __ATOMIC_RELAXED);
	out->indirect = __atomic_load_n(&f->stats.indirect, __ATOMIC_RELAXED);
	out->responses = __atomic_load_n(&f->stats.responses, __ATOMIC_RELAXED);
	out->notifies = __atomic_load_n(&f->stats.notifies, __ATOMIC_RELAXED);
	out->reconnects = __atomic_load_n(&f->stats.reconnects, __ATOMIC_RELAXED);
	out->resubmitted = __atomic_load_n(&f->stats.resubmitted, __ATOMIC_RELAXED);
	out->grants = __atomic_load_n(&f->stats.grants, __ATOMIC_RELAXED);
	out->deferred_unshare = __atomic_load_n(&f->stats.deferred_unshare, __ATOMIC_RELAXED);
}

int xbd_front_fd(const struct xbd_front *f)
{
	return f->epfd;
}

unsigned int xbd_front_inflight(const struct xbd_front *f)
{
	return atomic_load(&f->inflight);
}

const char *xbd_front_error(const struct xbd_front *f)
{
	return f->error;
}
