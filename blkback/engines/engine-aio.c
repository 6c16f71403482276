/*
 * engine-aio.c: raw files and block devices through Linux native AIO
 * (libaio).  One io_submit per batch; completions signalled on an eventfd
 * (io_set_eventfd) that the ring thread epolls next to its event channel.
 *
 * Flush is IOCB_CMD_FDSYNC when the kernel takes it for this file (probed
 * at open), otherwise fdatasync in a helper thread.  Discard always runs in
 * the helper thread: fallocate(PUNCH_HOLE) on files, BLKDISCARD or
 * BLKSECDISCARD on block devices.  Both complete through the same eventfd
 * so the data path never knows the difference.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "blkback/engines/engine.h"
#include "blkback/engines/engine-file.h"
#include "blkback/log/log.h"

_Static_assert(sizeof(struct iocb) <= sizeof(((struct xbd_io *)0)->priv),
	       "struct xbd_io has no room for an iocb");

struct aio_store {
	struct xbd_file f; /* first: engine-file.c's store callbacks */
	bool fdsync;      /* IOCB_CMD_FDSYNC works on this fd */
};

struct aio_queue {
	struct xbd_queue base;  /* first: what the engine table passes (aio_queue_of) */
	struct aio_store *s;
	io_context_t ctx;
	int efd;
	bool edge;        /* efd is watched edge-triggered: reap leaves it unread */
	unsigned int depth;
	struct io_event *events;
	/* The helper thread for fdatasync and discard. */
	pthread_t helper;
	bool helper_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	struct xbd_io *todo_head, *todo_tail; /* for the helper */
	struct xbd_io *done_head, *done_tail; /* finished by the helper */
	bool done_any;    /* done_head is set (atomic: read without the lock) */
};

/* The engine table passes the bases; each is the first member of ours. */
static inline struct aio_store *aio_store_of(struct xbd_store *b)
{
	return (struct aio_store *)b;
}

static inline struct aio_queue *aio_queue_of(struct xbd_queue *b)
{
	return (struct aio_queue *)b;
}

/*
 * The head of the completion ring the kernel maps at the io_context_t
 * address (fs/aio.c, struct aio_ring; the layout libaio and fio also
 * rely on).  head == tail: no completion waiting.
 */
struct aio_ring_head {
	unsigned int id, nr, head, tail, magic, compat_features, incompat_features,
		header_length;
};
#define XBD_AIO_RING_MAGIC 0xa10a10a1u

static void list_add(struct xbd_io **head, struct xbd_io **tail, struct xbd_io *io)
{
	io->next = NULL;
	if (*tail)
		(*tail)->next = io;
	else
		*head = io;
	*tail = io;
}

/* Whether the kernel accepts IOCB_CMD_FDSYNC on this file (Linux 4.18+). */
static bool probe_fdsync(int fd)
{
	io_context_t ctx = 0;
	struct iocb cb, *cbp = &cb;
	struct io_event ev;
	bool ok = false;

	if (io_setup(1, &ctx))
		return false;
	io_prep_fdsync(&cb, fd);
	if (io_submit(ctx, 1, &cbp) == 1 && io_getevents(ctx, 1, 1, &ev, NULL) == 1)
		ok = (long)ev.res == 0;
	io_destroy(ctx);
	return ok;
}

/* Open the file or block device (engine-file.c), and probe IOCB_CMD_FDSYNC. */
static int aio_open(const char *target, bool readonly, const struct xbd_disk_opts *o,
		    struct xbd_store **out)
{
	int err = xbd_file_store_open(target, readonly, o->direct, sizeof(struct aio_store), out);

	if (!err) {
		struct aio_store *s = aio_store_of(*out);

		s->f.base.eng = &xbd_engine_aio;
		s->fdsync = probe_fdsync(s->f.fd);
	}
	return err;
}

/* What another process needs to serve the same open file: the fd, and what open found. */
struct aio_export {
	uint8_t blockdev, fdsync;
	dev_t rdev;
	struct xbd_engine_caps caps;
};

/* The store as a worker re-creates it (xbd_store_export). */
static int aio_export(struct xbd_store *s_base, struct xbd_store_export *out, int *fds)
{
	struct aio_store *s = aio_store_of(s_base);
	struct aio_export a;

	memset(&a, 0, sizeof(a));
	a.blockdev = s->f.blockdev;
	a.fdsync = s->fdsync;
	a.rdev = s->f.rdev;
	a.caps = s->f.caps;
	memcpy(out->data, &a, sizeof(a));
	out->len = sizeof(a);
	out->nfds = 1;
	fds[0] = s->f.fd;
	return 0;
}

/* Serve the open file another process handed over (its flags, O_DIRECT included, came with it). */
static int aio_import(const struct xbd_store_export *in, const int *fds, struct xbd_store **out)
{
	struct aio_store *s;
	struct aio_export a;

	if (in->len != sizeof(a) || in->nfds != 1 || fds[0] < 0) {
		if (in->nfds >= 1 && fds[0] >= 0)
			close(fds[0]);
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		close(fds[0]);
		return -ENOMEM;
	}
	memcpy(&a, in->data, sizeof(a));
	s->f.fd = fds[0];
	s->f.blockdev = a.blockdev;
	s->f.rdev = a.rdev;
	s->f.caps = a.caps;
	s->fdsync = a.fdsync;
	s->f.base.eng = &xbd_engine_aio;
	*out = &s->f.base;
	return 0;
}

static void kick(struct aio_queue *q)
{
	uint64_t one = 1;

	if (write(q->efd, &one, sizeof(one)) < 0) {
		/* Counter saturated: still readable. */
	}
}

/* Runs the operations that have no AIO form: fdatasync and discard. */
static void *helper_main(void *arg)
{
	struct aio_queue *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct xbd_io *io;

		while (!q->todo_head && !q->stop)
			pthread_cond_wait(&q->cond, &q->lock);
		if (!q->todo_head)
			break;
		io = q->todo_head;
		q->todo_head = io->next;
		if (!q->todo_head)
			q->todo_tail = NULL;
		pthread_mutex_unlock(&q->lock);

		if (io->op == XBD_IO_FLUSH) {
			io->result = fdatasync(q->s->f.fd) ? -errno : 0;
		} else if (q->s->f.blockdev) {
			uint64_t range[2] = { io->offset, io->len };

			io->result = ioctl(q->s->f.fd, io->secure ? BLKSECDISCARD : BLKDISCARD, range)
					     ? -errno : 0;
		} else {
			io->result = fallocate(q->s->f.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					       io->offset, io->len) ? -errno : 0;
		}

		pthread_mutex_lock(&q->lock);
		list_add(&q->done_head, &q->done_tail, io);
		__atomic_store_n(&q->done_any, true, __ATOMIC_RELEASE);
		kick(q);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

/* An AIO context with an eventfd, and the helper thread. */
static int aio_queue_open(struct xbd_store *s_base, unsigned int depth, struct xbd_queue **out)
{
	struct aio_store *s = aio_store_of(s_base);
	struct aio_queue *q = calloc(1, sizeof(*q));
	int err;

	if (!q)
		return -ENOMEM;
	q->s = s;
	q->depth = depth ? depth : 1;
	q->efd = -1;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	/*
	 * EAGAIN: the host's fs.aio-max-nr is nearly used up (by us or
	 * anybody else).  A smaller context still serves the disk; the data
	 * path queues what does not fit.
	 */
	while ((err = io_setup(q->depth, &q->ctx)) == -EAGAIN && q->depth > 8) {
		q->ctx = 0;
		q->depth /= 2;
	}
	if (err) {
		q->ctx = 0;
		goto fail;
	}
	if (q->depth < (depth ? depth : 1))
		xbd_log(XBD_LOG_INFO, "aio: fs.aio-max-nr nearly used up: queue depth %u instead of %u",
			q->depth, depth);
	q->events = calloc(q->depth, sizeof(*q->events));
	if (!q->events) {
		err = -ENOMEM;
		goto fail;
	}
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0) {
		err = -errno;
		goto fail;
	}
	err = -pthread_create(&q->helper, NULL, helper_main, q);
	if (err)
		goto fail;
	q->helper_started = true;
	q->base.eng = &xbd_engine_aio;
	*out = &q->base;
	return 0;
fail:
	if (q->efd >= 0)
		close(q->efd);
	if (q->ctx)
		io_destroy(q->ctx);
	free(q->events);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	free(q);
	return err;
}

/* Stop the helper and release the context. */
static void aio_queue_close(struct xbd_queue *q_base)
{
	struct aio_queue *q = aio_queue_of(q_base);

	if (q->helper_started) {
		pthread_mutex_lock(&q->lock);
		q->stop = true;
		pthread_cond_signal(&q->cond);
		pthread_mutex_unlock(&q->lock);
		pthread_join(q->helper, NULL);
	}
	io_destroy(q->ctx);
	close(q->efd);
	free(q->events);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	free(q);
}

/* The ring watches efd edge-triggered: every write is an edge, no read needed. */
static void aio_queue_edge(struct xbd_queue *q_base)
{
	struct aio_queue *q = aio_queue_of(q_base);

	q->edge = true;
}

/* The completion eventfd. */
static int aio_queue_fd(struct xbd_queue *q_base)
{
	struct aio_queue *q = aio_queue_of(q_base);

	return q->efd;
}

/* Completions waiting, from the kernel's ring in our memory and the helper's flag. */
static bool aio_queue_ready(struct xbd_queue *q_base)
{
	struct aio_queue *q = aio_queue_of(q_base);
	const struct aio_ring_head *r = (const struct aio_ring_head *)q->ctx;

	if (__atomic_load_n(&q->done_any, __ATOMIC_ACQUIRE))
		return true;
	if (!r || r->magic != XBD_AIO_RING_MAGIC)
		return true; /* not the layout we know: ask the kernel */
	return __atomic_load_n(&r->head, __ATOMIC_RELAXED) !=
	       __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
}

/* The depth io_setup granted. */
static unsigned int aio_queue_depth(struct xbd_queue *q_base)
{
	struct aio_queue *q = aio_queue_of(q_base);

	return q->depth;
}

/* Reads and writes: one io_submit for the whole batch. */
static int aio_submit(struct xbd_queue *q_base, struct xbd_io **ios, unsigned int n)
{
	struct aio_queue *q = aio_queue_of(q_base);
	struct iocb *cbs[n ? n : 1];
	unsigned int i;
	int ret;

	if (!n)
		return 0;
	for (i = 0; i < n; i++) {
		struct xbd_io *io = ios[i];
		struct iocb *cb = (struct iocb *)io->priv;

		if (io->op == XBD_IO_READ)
			io_prep_preadv(cb, q->s->f.fd, io->iov, io->iovcnt, io->offset);
		else
			io_prep_pwritev2(cb, q->s->f.fd, io->iov, io->iovcnt, io->offset,
					 io->dsync ? RWF_DSYNC : 0);
		io_set_eventfd(cb, q->efd);
		cb->data = io;
		cbs[i] = cb;
	}
	ret = io_submit(q->ctx, n, cbs);
	return ret;
}

/* Queue an op for the helper thread. */
static void to_helper(struct aio_queue *q, struct xbd_io *io)
{
	pthread_mutex_lock(&q->lock);
	list_add(&q->todo_head, &q->todo_tail, io);
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

/* fdatasync: as an iocb where the kernel allows, else in the helper. */
static int aio_flush(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct aio_queue *q = aio_queue_of(q_base);

	if (q->s->fdsync) {
		struct iocb *cb = (struct iocb *)io->priv;
		int ret;

		io_prep_fdsync(cb, q->s->f.fd);
		io_set_eventfd(cb, q->efd);
		cb->data = io;
		ret = io_submit(q->ctx, 1, &cb);
		if (ret == 1)
			return 0;
		if (ret == -EAGAIN)
			return ret;
		/* Refused after all: fall through to the helper. */
	}
	to_helper(q, io);
	return 0;
}

/* Punch a hole or discard the device range, in the helper. */
static int aio_discard(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct aio_queue *q = aio_queue_of(q_base);

	to_helper(q, io);
	return 0;
}

/*
 * Up to max completions into q->events straight from the kernel's ring,
 * without io_getevents: the ring is ours to read, and moving its head is
 * how the kernel learns the room is free again (fs/aio.c refills from
 * the head user space wrote at the next io_submit; fio reaps the same
 * way).  A system call less per batch of completions, which a PV dom0
 * pays a hypervisor round trip for.  -1: not a layout we know (then
 * io_getevents does it).  Only the ring thread reaps.
 */
static int ring_events(struct aio_queue *q, unsigned int max)
{
	struct aio_ring_head *r = (struct aio_ring_head *)q->ctx;
	const struct io_event *ev = (const struct io_event *)(r + 1);
	unsigned int head, tail, nr, i = 0;

	if (!r || r->magic != XBD_AIO_RING_MAGIC || r->incompat_features ||
	    r->header_length != sizeof(*r))
		return -1;
	nr = r->nr;
	head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
	/* The kernel's writes of the events come before its tail's. */
	tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	if (!nr || head >= nr || tail >= nr)
		return -1;
	while (head != tail && i < max) {
		q->events[i++] = ev[head];
		head = head + 1 == nr ? 0 : head + 1;
	}
	/* The events are copied before the kernel may reuse their slots. */
	__atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
	return (int)i;
}

/* Collect finished iocbs and helper results. */
static int aio_reap(struct xbd_queue *q_base, struct xbd_io **done, unsigned int max)
{
	struct aio_queue *q = aio_queue_of(q_base);
	struct timespec zero = { 0, 0 };
	unsigned int n = 0;
	uint64_t cnt;
	int ret, i;

	if (!q->edge && read(q->efd, &cnt, sizeof(cnt)) < 0) {
		/* EAGAIN: nothing new signalled; completions may still wait. */
	}
	pthread_mutex_lock(&q->lock);
	while (n < max && q->done_head) {
		done[n++] = q->done_head;
		q->done_head = q->done_head->next;
	}
	if (!q->done_head) {
		q->done_tail = NULL;
		__atomic_store_n(&q->done_any, false, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&q->lock);
	if (n == max)
		return n;
	ret = ring_events(q, (max - n) > q->depth ? q->depth : max - n);
	if (ret < 0)
		ret = io_getevents(q->ctx, 0, (max - n) > q->depth ? q->depth : max - n, q->events,
				   &zero);
	for (i = 0; i < ret; i++) {
		struct xbd_io *io = q->events[i].data;
		long res = (long)q->events[i].res;

		if (io->op == XBD_IO_FLUSH)
			io->result = res < 0 ? (int)res : 0;
		else
			io->result = xbd_file_rw_result(io, res);
		done[n++] = io;
	}
	return n;
}

const struct xbd_engine xbd_engine_aio = {
	.name = "aio",
	.file = true,
	.open = aio_open,
	.close = xbd_file_store_close,
	.size = xbd_file_store_size,
	.capabilities = xbd_file_store_caps,
	.queue_open = aio_queue_open,
	.queue_close = aio_queue_close,
	.queue_fd = aio_queue_fd,
	.submit = aio_submit,
	.flush = aio_flush,
	.discard = aio_discard,
	.reap = aio_reap,
	.queue_depth = aio_queue_depth,
	.queue_ready = aio_queue_ready,
	.queue_edge = aio_queue_edge,
	.export_store = aio_export,
	.import_store = aio_import,
};
