/*
 * engine-uring.c: files and block devices through io_uring (liburing).
 * Submission and completion share one ring per queue: a batch is one
 * io_uring_enter, completions are read from the completion ring in our
 * memory (no system call), and the ring thread waits on the ring's own fd,
 * which polls readable while completions wait (so there is no eventfd to
 * read, unlike aio).
 *
 * The ring thread's wait can be the ring's too (uring_wait): the event
 * channel and the stop eventfd are polled by sqes in the same ring, and
 * from the first such wait on, what submit is given is kept in the
 * submission ring until the wait, whose one io_uring_enter submits it,
 * arms the polls and sleeps.  At queue depth 1 a request then costs two
 * io_uring_enter (submit and wait for the completion; wait for the next
 * notification) and no epoll_wait.
 *
 * The disk's fd is a registered file; the ring's grant-copy bounce pool,
 * when the data path has one, is a registered buffer and single-segment
 * reads and writes inside it use READ_FIXED/WRITE_FIXED (pages mapped
 * from a guest through gntdev cannot be registered on Linux 6.1: those
 * use readv/writev).  A durable write is RWF_DSYNC, a flush
 * IORING_FSYNC_DATASYNC (not drained: like aio's IOCB_CMD_FDSYNC it
 * covers the writes completed before it; the data path drains for a
 * barrier), a discard IORING_OP_FALLOCATE(PUNCH_HOLE | KEEP_SIZE).
 *
 * Where the host has no io_uring (ENOSYS, EPERM: a seccomp filter,
 * kernel.io_uring_disabled) the disk is served by aio (available()).
 */
#include "config.h"

#include <errno.h>
#include <linux/falloc.h>
#include <liburing.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/engines/engine.h"
#include "blkback/engines/engine-file.h"
#include "blkback/log/log.h"

struct uring_store {
	struct xbd_file f; /* first: engine-file.c's store callbacks */
};

struct uring_queue {
	struct xbd_queue base;  /* first: what the engine table passes (uring_queue_of) */
	struct uring_store *s;
	struct io_uring ring;
	unsigned int depth;
	bool fixed_file;    /* the disk's fd is registered file 0 */
	char *buf;          /* registered buffer 0, or NULL */
	size_t buf_len;
	bool defer;         /* submissions wait for the next uring_wait */
	bool no_wait;       /* the kernel cannot bound a wait (no IORING_FEAT_EXT_ARG) */
	unsigned int armed; /* bit i: a poll of the wait's fd i is in the ring */
	unsigned int ready; /* bit i: fd i polled readable, not yet reported */
};

/* The engine table passes the bases; each is the first member of ours. */
static inline struct uring_store *uring_store_of(struct xbd_store *b)
{
	return (struct uring_store *)b;
}

static inline struct uring_queue *uring_queue_of(struct xbd_queue *b)
{
	return (struct uring_queue *)b;
}

/*
 * A poll's user_data is its fd's index + 1; an io's is its address, never
 * that small.  0 marks a poll completion already noted in q->ready.
 */
#define URING_WAIT_FDS 4
#define URING_NOTED 0
static bool is_poll(uint64_t data)
{
	return data <= URING_WAIT_FDS;
}

/* The errno io_uring_queue_init gives, or the test hook's (XBD_TEST_URING=ENOSYS|EPERM). */
static int ring_init(unsigned int entries, struct io_uring *ring, struct io_uring_params *p)
{
#ifdef XBD_TEST_HOOKS
	const char *t = getenv("XBD_TEST_URING");

	if (t && !strcmp(t, "ENOSYS"))
		return -ENOSYS;
	if (t && !strcmp(t, "EPERM"))
		return -EPERM;
#endif
	return io_uring_queue_init_params(entries, ring, p);
}

/* Whether io_uring works here: a one-entry ring, made and closed again. */
static int uring_available(char *why, size_t len)
{
	struct io_uring_params p;
	struct io_uring ring;
	FILE *f;
	int err, v = 0;

	memset(&p, 0, sizeof(p));
	err = ring_init(1, &ring, &p);
	if (!err) {
		io_uring_queue_exit(&ring);
		return 0;
	}
	if (err == -ENOSYS) {
		snprintf(why, len, "the kernel has no io_uring (ENOSYS)");
		return err;
	}
	if (err == -EPERM) {
		/* Linux 6.6 and later; 1: only the io_uring_group, 2: nobody. */
		f = fopen("/proc/sys/kernel/io_uring_disabled", "re");
		if (f && fscanf(f, "%d", &v) == 1 && v)
			snprintf(why, len, "io_uring_setup: EPERM, kernel.io_uring_disabled = %d", v);
		else
			snprintf(why, len, "io_uring_setup: EPERM (a seccomp filter or a container policy)");
		if (f)
			fclose(f);
		return err;
	}
	snprintf(why, len, "io_uring_setup: %s", strerror(-err));
	return err;
}

/* Open the file or block device (engine-file.c). */
static int uring_open(const char *target, bool readonly, const struct xbd_disk_opts *o,
		      struct xbd_store **out)
{
	struct xbd_file *f;
	int err = xbd_file_store_open(target, readonly, o->direct, sizeof(struct uring_store), out);

	if (err)
		return err;
	(*out)->eng = &xbd_engine_uring;
	/*
	 * On a block device fallocate(PUNCH_HOLE) is a write of zeroes
	 * without fallback, not BLKDISCARD: offered where the device does it.
	 */
	f = &uring_store_of(*out)->f;
	if (f->blockdev && f->caps.discard && !xbd_file_queue_attr(f, "write_zeroes_max_bytes"))
		f->caps.discard = false;
	return 0;
}

/* A ring of depth entries, completions for twice that, the disk's fd registered. */
static int uring_queue_open(struct xbd_store *s_base, unsigned int depth, struct xbd_queue **out)
{
	struct uring_store *s = uring_store_of(s_base);
	struct uring_queue *q = calloc(1, sizeof(*q));
	struct io_uring_params p;
	int err;

	if (!q)
		return -ENOMEM;
	q->s = s;
	q->depth = depth ? depth : 1;
	memset(&p, 0, sizeof(p));
	/*
	 * Every io in flight and every poll of uring_wait has room for its
	 * sqe and its completion: the CQ never overflows.
	 */
	p.flags = IORING_SETUP_CQSIZE;
	p.cq_entries = 2 * (q->depth + URING_WAIT_FDS);
	err = ring_init(q->depth + URING_WAIT_FDS, &q->ring, &p);
	if (err) {
		free(q);
		return err;
	}
	q->no_wait = !(p.features & IORING_FEAT_EXT_ARG);
	q->fixed_file = !io_uring_register_files(&q->ring, &s->f.fd, 1);
	q->base.eng = &xbd_engine_uring;
	*out = &q->base;
	return 0;
}

static void uring_queue_close(struct xbd_queue *q_base)
{
	struct uring_queue *q = uring_queue_of(q_base);

	io_uring_queue_exit(&q->ring);
	free(q);
}

/* The ring's fd: readable while completions wait in the completion ring. */
static int uring_queue_fd(struct xbd_queue *q_base)
{
	struct uring_queue *q = uring_queue_of(q_base);

	return q->ring.ring_fd;
}

static bool uring_queue_ready(struct xbd_queue *q_base)
{
	struct uring_queue *q = uring_queue_of(q_base);

	return io_uring_cq_ready(&q->ring) > 0;
}

static unsigned int uring_queue_depth(struct xbd_queue *q_base)
{
	struct uring_queue *q = uring_queue_of(q_base);

	return q->depth;
}

/* Register the bounce pool; without it (RLIMIT_MEMLOCK, ENOMEM) reads and writes use readv/writev. */
static void uring_queue_buffers(struct xbd_queue *q_base, void *base, size_t len)
{
	struct uring_queue *q = uring_queue_of(q_base);
	struct iovec iov = { .iov_base = base, .iov_len = len };
	int err;

	if (q->buf)
		return;
	err = io_uring_register_buffers(&q->ring, &iov, 1);
	if (err) {
		xbd_log(XBD_LOG_VERBOSE, "uring: cannot register the bounce buffers (%s): "
			"grant-copy I/O uses readv/writev", strerror(-err));
		return;
	}
	q->buf = base;
	q->buf_len = len;
}

/* The fd an sqe names: registered file 0, or the fd itself. */
static void set_file(struct uring_queue *q, struct io_uring_sqe *sqe)
{
	if (q->fixed_file) {
		sqe->fd = 0;
		sqe->flags |= IOSQE_FIXED_FILE;
	}
}

/* One segment wholly inside the registered buffer. */
static bool in_fixed(const struct uring_queue *q, const struct xbd_io *io)
{
	const char *b = io->iov[0].iov_base;

	return q->buf && io->iovcnt == 1 && b >= q->buf &&
	       io->iov[0].iov_len <= q->buf_len - (size_t)(b - q->buf);
}

static void prep_rw(struct uring_queue *q, struct io_uring_sqe *sqe, struct xbd_io *io)
{
	int fd = q->s->f.fd;
	bool wr = io->op == XBD_IO_WRITE;

	if (in_fixed(q, io)) {
		if (wr)
			io_uring_prep_write_fixed(sqe, fd, io->iov[0].iov_base,
						  (unsigned int)io->iov[0].iov_len, io->offset, 0);
		else
			io_uring_prep_read_fixed(sqe, fd, io->iov[0].iov_base,
						 (unsigned int)io->iov[0].iov_len, io->offset, 0);
		if (wr && io->dsync)
			sqe->rw_flags = RWF_DSYNC;
	} else if (wr) {
		io_uring_prep_writev2(sqe, fd, io->iov, io->iovcnt, io->offset,
				      io->dsync ? RWF_DSYNC : 0);
	} else {
		io_uring_prep_readv(sqe, fd, io->iov, io->iovcnt, io->offset);
	}
	set_file(q, sqe);
	io_uring_sqe_set_data(sqe, io);
}

/*
 * Give the kernel the sqes queued since the last call.  Those it did not
 * take (EAGAIN, EBUSY, ENOMEM) are taken back out of the submission ring,
 * so that the data path's retry does not submit them twice: without
 * SQPOLL the kernel reads the ring only inside io_uring_enter.  Returns
 * how many it took, or the error when it took none.
 */
static int flush_sq(struct uring_queue *q, unsigned int queued)
{
	struct io_uring_sq *sq = &q->ring.sq;
	int ret = io_uring_submit(&q->ring);
	unsigned int head;

	if (ret >= 0 && (unsigned int)ret == queued)
		return ret;
	head = __atomic_load_n(sq->khead, __ATOMIC_ACQUIRE);
	__atomic_store_n(sq->ktail, head, __ATOMIC_RELEASE);
	sq->sqe_head = sq->sqe_tail = head;
	if (ret > 0)
		return ret;
	return ret == 0 || ret == -EBUSY || ret == -ENOMEM ? -EAGAIN : ret;
}

/* Reads and writes: one io_uring_enter for the batch. */
static int uring_submit(struct xbd_queue *q_base, struct xbd_io **ios, unsigned int n)
{
	struct uring_queue *q = uring_queue_of(q_base);
	unsigned int i;

	for (i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

		if (!sqe)
			break;
		prep_rw(q, sqe, ios[i]);
	}
	if (!i)
		return n ? -EAGAIN : 0;
	return q->defer ? (int)i : flush_sq(q, i);
}

/* One sqe of its own: a flush or a discard. */
static int submit_one(struct uring_queue *q, struct xbd_io *io)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	int fd = q->s->f.fd, ret;

	if (!sqe)
		return -EAGAIN;
	if (io->op == XBD_IO_FLUSH)
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
	else
		io_uring_prep_fallocate(sqe, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					io->offset, io->len);
	set_file(q, sqe);
	io_uring_sqe_set_data(sqe, io);
	if (q->defer)
		return 0;
	ret = flush_sq(q, 1);
	return ret == 1 ? 0 : ret;
}

/* fdatasync of every write completed before it. */
static int uring_flush(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct uring_queue *q = uring_queue_of(q_base);

	return submit_one(q, io);
}

/* Punch a hole (a file) or write zeroes (a block device). */
static int uring_discard(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct uring_queue *q = uring_queue_of(q_base);

	return submit_one(q, io);
}

/* A poll's completion: its fd is ready (or the poll ended: look anyway), and no longer armed. */
static void note_poll(struct uring_queue *q, struct io_uring_cqe *cqe)
{
	uint64_t data = cqe->user_data;

	if (data == URING_NOTED)
		return;
	q->ready |= 1u << (data - 1);
	q->armed &= ~(1u << (data - 1));
	cqe->user_data = URING_NOTED;
}

/*
 * Note every poll completion waiting in the completion ring.  Those at
 * its head are consumed; one behind an io's stays, marked noted, until
 * uring_reap takes it with the io.  True if an io's completion waits.
 */
static bool sweep_polls(struct uring_queue *q)
{
	struct io_uring_cqe *cqe;
	unsigned int head, lead = 0;
	bool io = false;

	io_uring_for_each_cqe(&q->ring, head, cqe) {
		if (!is_poll(cqe->user_data)) {
			io = true;
			continue;
		}
		note_poll(q, cqe);
		if (!io)
			lead++;
	}
	io_uring_cq_advance(&q->ring, lead);
	return io;
}

/*
 * Submit what waits in the submission ring, arm a poll of each fd not
 * armed yet (one-shot: armed again at each wait, it reports a level, as
 * epoll does), and sleep in the same io_uring_enter until a completion
 * or a poll's, or timeout_ms.
 */
static int uring_wait(struct xbd_queue *q_base, const int *fds, unsigned int nfds, int timeout_ms,
		      unsigned int *ready)
{
	struct uring_queue *q = uring_queue_of(q_base);
	struct io_uring_sq *sq = &q->ring.sq;
	struct io_uring_getevents_arg arg;
	struct __kernel_timespec ts;
	unsigned int i, tail, to_submit, flags = 0, min = 0;
	int ret = 0;

	if (q->no_wait || nfds > URING_WAIT_FDS)
		return -EOPNOTSUPP;
	q->defer = true;
	for (i = 0; i < nfds; i++) {
		struct io_uring_sqe *sqe;

		if (q->armed & (1u << i))
			continue;
		sqe = io_uring_get_sqe(&q->ring);
		if (!sqe)
			break; /* the ring is full of ios: their completions wake us */
		io_uring_prep_poll_add(sqe, fds[i], POLLIN);
		io_uring_sqe_set_data64(sqe, i + 1);
		q->armed |= 1u << i;
	}
	tail = sq->sqe_tail;
	if (sq->sqe_head != tail) {
		sq->sqe_head = tail;
		io_uring_smp_store_release(sq->ktail, tail);
	}
	to_submit = tail - io_uring_smp_load_acquire(sq->khead);
	/* Block only when nothing is there to report. */
	if (timeout_ms && !sweep_polls(q) && !(q->ready & ((1u << nfds) - 1))) {
		min = 1;
		flags = IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG;
		memset(&arg, 0, sizeof(arg));
		arg.sigmask_sz = _NSIG / 8;
		if (timeout_ms > 0) {
			ts.tv_sec = timeout_ms / 1000;
			ts.tv_nsec = (long long)(timeout_ms % 1000) * 1000000;
			arg.ts = (uint64_t)(uintptr_t)&ts;
		}
	}
	if (to_submit || min) {
		ret = io_uring_enter2((unsigned int)q->ring.ring_fd, to_submit, min, flags,
				      min ? (sigset_t *)&arg : NULL, min ? sizeof(arg) : _NSIG / 8);
		/* The kernel took none (short of memory): wait without submitting, briefly. */
		if ((ret == -EAGAIN || ret == -EBUSY || ret == -ENOMEM) && min) {
			if (timeout_ms < 0 || timeout_ms > 1) {
				ts.tv_sec = 0;
				ts.tv_nsec = 1000000;
				arg.ts = (uint64_t)(uintptr_t)&ts;
			}
			ret = io_uring_enter2((unsigned int)q->ring.ring_fd, 0, min, flags,
					      (sigset_t *)&arg, sizeof(arg));
		}
	}
	sweep_polls(q);
	*ready = q->ready & ((1u << nfds) - 1);
	q->ready &= ~*ready;
	if (ret >= 0 || ret == -EINTR)
		return 0;
	return ret;
}

/* Completions from the completion ring: memory only, no system call. */
static int uring_reap(struct xbd_queue *q_base, struct xbd_io **done, unsigned int max)
{
	struct uring_queue *q = uring_queue_of(q_base);
	struct io_uring_cqe *cqes[64];
	unsigned int n = 0;

	while (n < max) {
		unsigned int want = max - n < 64 ? max - n : 64;
		unsigned int got = io_uring_peek_batch_cqe(&q->ring, cqes, want), i;

		for (i = 0; i < got; i++) {
			struct xbd_io *io = io_uring_cqe_get_data(cqes[i]);
			int res = cqes[i]->res;

			if (is_poll(cqes[i]->user_data)) {
				note_poll(q, cqes[i]);
				continue;
			}
			if (io->op == XBD_IO_READ || io->op == XBD_IO_WRITE)
				io->result = xbd_file_rw_result(io, res);
			else
				io->result = res < 0 ? res : 0;
			done[n++] = io;
		}
		io_uring_cq_advance(&q->ring, got);
		if (got < want)
			break;
	}
	return (int)n;
}

const struct xbd_engine xbd_engine_uring = {
	.name = "uring",
	.file = true,
	.open = uring_open,
	.close = xbd_file_store_close,
	.size = xbd_file_store_size,
	.capabilities = xbd_file_store_caps,
	.queue_open = uring_queue_open,
	.queue_close = uring_queue_close,
	.queue_fd = uring_queue_fd,
	.submit = uring_submit,
	.flush = uring_flush,
	.discard = uring_discard,
	.reap = uring_reap,
	.queue_depth = uring_queue_depth,
	.queue_ready = uring_queue_ready,
	.available = uring_available,
	.fallback = &xbd_engine_aio,
	.queue_buffers = uring_queue_buffers,
	.wait = uring_wait,
};
