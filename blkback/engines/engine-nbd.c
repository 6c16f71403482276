/*
 * engine-nbd.c: disks on an NBD server through libnbd, named by an NBD
 * URI in params: nbd://HOST[:PORT]/EXPORT or
 * nbd+unix:///EXPORT?socket=PATH (qemu-storage-daemon or qemu-nbd
 * serving a qcow2 image, nbdkit, another host's disk).
 *
 * Each queue (ring thread) has its own connection when the server allows
 * multi-conn (NBD_FLAG_CAN_MULTI_CONN: the connections see each other's
 * writes and flushes); otherwise the disk offers one queue, so it still
 * has exactly one connection.  Commands go out with libnbd's aio calls
 * and their replies are read when the socket is readable: the socket is
 * in an epoll set of the queue's own, whose fd is queue_fd, so the ring
 * thread's epoll sees it without knowing which way libnbd waits (the
 * queue changes EPOLLIN/EPOLLOUT as nbd_aio_get_direction says) or which
 * socket it is after a reconnect.  The socket is in that set only while
 * commands are in flight: the ring thread reaps only then, and an idle
 * socket the server closed would otherwise wake it for ever.
 *
 * Writes that must be durable carry NBD_CMD_FLAG_FUA where the server
 * has it, else they are followed by a flush; a guest flush is
 * NBD_CMD_FLUSH (nothing to do on a server without a write cache);
 * discard is NBD_CMD_TRIM, or NBD_CMD_WRITE_ZEROES (may trim) on a
 * server that zeroes but does not trim.  The server's minimum block size
 * becomes sector-size and its maximum splits large requests.  A request
 * of several segments goes through one bounce buffer (libnbd has no
 * vectored I/O).
 *
 * A server that goes away fails the commands in flight (the guest gets
 * BLKIF_RSP_ERROR) with one log line; the next request after
 * nbd-retry-ms starts a reconnect (bounded by nbd-connect-timeout-ms)
 * and waits for it, requests in between fail at once: never a hang.
 * NBD has no size change notification, so online resize is not offered.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <libnbd.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "blkback/engines/engine.h"
#include "blkback/engines/engine-remote.h"
#include "blkback/log/log.h"
#include "common/clock.h"

/* What NBD allows in one command's length field, kept a multiple of 4 KiB. */
#define NBD_CMD_MAX (32u << 20)
#define NBD_TRIM_MAX (1u << 30)

struct nbd_store {
	struct xbd_store base;  /* first: what the engine table passes (nbd_store_of) */
	char *uri;
	bool readonly;
	uint64_t size;
	struct xbd_engine_caps caps;
	bool fua, flush, trim, zero, multi_conn;
	uint64_t max_cmd;             /* bytes per read or write command */
	unsigned int connect_ms, retry_ms, request_ms;
	struct nbd_handle *spare;     /* the probe's connection, for the first queue */
};

enum conn_state { NBD_UP, NBD_CONNECTING, NBD_DOWN };

struct nbd_queue {
	struct xbd_queue base;  /* first: what the engine table passes (nbd_queue_of) */
	struct nbd_store *s;
	struct nbd_handle *h;
	enum conn_state state;
	int epfd;        /* queue_fd: the socket (while busy), efd and tfd */
	int efd;         /* completions made without the server */
	int tfd;         /* connect deadline; while up, the oldest command's */
	bool req_timer;  /* tfd is armed for a command's deadline */
	int sock;        /* the socket in epfd, or -1 */
	uint32_t events; /* what it is registered for */
	uint64_t retry_at;     /* DOWN: no connect before this (ns) */
	unsigned int attempts; /* failed connects in this outage */
	unsigned int failed;   /* requests failed in this outage */
	uint64_t replies;      /* command replies seen (command_done calls) */
	uint64_t down_since;
	bool first;            /* its first connect (an extra queue's) is under way */
	struct xbd_io *done_head, *done_tail; /* finished, not reaped */
	struct xbd_io *wait_head, *wait_tail; /* waiting for a connect */
	struct xbd_io *busy;                  /* commands at the server (doubly linked) */
	struct xbd_io *again_head, *again_tail; /* durable writes whose flush is to send */
};

/* The engine table passes the bases; each is the first member of ours. */
static inline struct nbd_store *nbd_store_of(struct xbd_store *b)
{
	return (struct nbd_store *)b;
}

static inline struct nbd_queue *nbd_queue_of(struct xbd_queue *b)
{
	return (struct nbd_queue *)b;
}

/* Kept in io->priv while the io is ours. */
struct nbd_priv {
	struct nbd_queue *q;
	struct xbd_io *prev, *next;  /* in q->busy */
	void *bounce;
	unsigned int parts;          /* commands not yet answered */
	int err;                     /* the first error */
	bool then_flush;             /* a durable write on a server without FUA */
	bool flushing;               /* that write, now at its flush */
	uint64_t sent_ns;            /* when it went to the server */
};
_Static_assert(sizeof(struct nbd_priv) <= sizeof(((struct xbd_io *)0)->priv),
	       "struct xbd_io has no room for the NBD state");

static struct nbd_priv *priv(struct xbd_io *io)
{
	return (struct nbd_priv *)io->priv;
}

static void list_add(struct xbd_io **head, struct xbd_io **tail, struct xbd_io *io)
{
	io->next = NULL;
	if (*tail)
		(*tail)->next = io;
	else
		*head = io;
	*tail = io;
}

/* ---- connecting ---- */

/* A handle that accepts only what an NBD URI for a disk should say. */
static struct nbd_handle *new_handle(void)
{
	struct nbd_handle *h = nbd_create();

	if (!h)
		return NULL;
	/* Only TCP and unix sockets; no TLS, no ?tls-psk-file= or other local files. */
	if (nbd_set_uri_allow_transports(h, LIBNBD_ALLOW_TRANSPORT_TCP |
					 LIBNBD_ALLOW_TRANSPORT_UNIX) ||
	    nbd_set_uri_allow_tls(h, LIBNBD_TLS_DISABLE) ||
	    nbd_set_uri_allow_local_file(h, false) || nbd_set_request_block_size(h, true)) {
		nbd_close(h);
		return NULL;
	}
	return h;
}

/* Start an aio connect; false (and nbd_get_error) if it failed at once. */
static bool connect_start(struct nbd_handle *h, const char *uri)
{
	return nbd_aio_connect_uri(h, uri) == 0 || nbd_aio_is_connecting(h) ||
	       nbd_aio_is_ready(h);
}

/* Drive a connect to the end, at most ms: 0, or -ETIMEDOUT / -ECONNREFUSED... */
static int connect_wait(struct nbd_handle *h, unsigned int ms)
{
	uint64_t end = xbd_mono_ns() + (uint64_t)ms * 1000000u;

	while (nbd_aio_is_connecting(h)) {
		unsigned int dir = nbd_aio_get_direction(h);
		struct pollfd p = { .fd = nbd_aio_get_fd(h) };
		uint64_t now = xbd_mono_ns();
		int r;

		if (now >= end)
			return -ETIMEDOUT;
		p.events = (dir & LIBNBD_AIO_DIRECTION_READ ? POLLIN : 0) |
			   (dir & LIBNBD_AIO_DIRECTION_WRITE ? POLLOUT : 0);
		r = poll(&p, 1, (int)((end - now + 999999) / 1000000));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && nbd_aio_notify_read(h) < 0)
			break;
		if ((p.revents & POLLOUT) && nbd_aio_notify_write(h) < 0)
			break;
	}
	if (nbd_aio_is_ready(h))
		return 0;
	return nbd_get_errno() ? -nbd_get_errno() : -ECONNREFUSED;
}

/* ---- the store ---- */

/* What the server said about itself, for the keys the backend advertises. */
static int probe(struct nbd_store *s, struct nbd_handle *h)
{
	int64_t size = nbd_get_size(h);
	int64_t min = nbd_get_block_size(h, LIBNBD_SIZE_MINIMUM);
	int64_t pref = nbd_get_block_size(h, LIBNBD_SIZE_PREFERRED);
	int64_t max = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);

	if (size < 0)
		return -EIO;
	s->size = (uint64_t)size;
	s->fua = nbd_can_fua(h) == 1;
	s->flush = nbd_can_flush(h) == 1;
	s->trim = nbd_can_trim(h) == 1;
	s->zero = nbd_can_zero(h) == 1;
	s->multi_conn = nbd_can_multi_conn(h) == 1;
	memset(&s->caps, 0, sizeof(s->caps));
	/* sector-size: the server's minimum block (1 = any, so 512), at most 4 KiB. */
	s->caps.logical_block = min > 512 ? (unsigned int)min : 512;
	if (s->caps.logical_block > 4096 || (s->caps.logical_block & (s->caps.logical_block - 1))) {
		xbd_log(XBD_LOG_ERR, "%s: the NBD server's minimum block size is %" PRId64
			" bytes; xbd-back serves sector sizes of 512 to 4096 (powers of two)",
			s->uri, min);
		return -EINVAL;
	}
	s->caps.physical_block = s->caps.logical_block;
	if (pref > s->caps.logical_block && pref <= 65536 && !(pref & (pref - 1)))
		s->caps.physical_block = (unsigned int)pref;
	if (max > 0 && max < 4096) {
		xbd_log(XBD_LOG_ERR, "%s: the NBD server's maximum request is %" PRId64
			" bytes, less than one 4 KiB page", s->uri, max);
		return -EINVAL;
	}
	s->max_cmd = NBD_CMD_MAX;
	if (max > 0 && (uint64_t)max < s->max_cmd)
		s->max_cmd = (uint64_t)max / 4096 * 4096;
	/* A read-only export is served read-only (the backend says so in its log). */
	s->caps.readonly_only = nbd_is_read_only(h) == 1;
	s->caps.discard = !s->readonly && !s->caps.readonly_only && (s->trim || s->zero);
	s->caps.discard_granularity = s->caps.physical_block > 4096 ? s->caps.physical_block : 4096;
	s->caps.max_queues = s->multi_conn ? 0 : 1;
	return 0;
}

/* Connect once, learn the size and what the server can do; the connection is kept. */
static int ne_open(const char *target, bool readonly, const struct xbd_disk_opts *o,
		   struct xbd_store **out)
{
	struct nbd_store *s;
	struct nbd_handle *h = NULL;
	int err = xbd_open_failure_recent(target, o->nbd_retry_ms > 1000 ? o->nbd_retry_ms : 1000);

	if (err)
		return err; /* said once already */
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->readonly = readonly;
	s->connect_ms = o->nbd_connect_timeout_ms;
	s->retry_ms = o->nbd_retry_ms;
	s->request_ms = o->nbd_request_timeout_ms;
	s->uri = strdup(target);
	h = new_handle();
	if (!s->uri || !h) {
		err = -ENOMEM;
		goto fail;
	}
	if (!connect_start(h, s->uri)) {
		err = nbd_get_errno() ? -nbd_get_errno() : -EINVAL;
		/* libnbd says what is wrong with the URI, or why the connect failed at once. */
		xbd_log(xbd_open_failure_level(target, err), "%s: %s: %s", s->uri,
			err == -EINVAL || err == -EPERM || err == -ENOTSUP ? "invalid NBD URI"
									    : "cannot connect to the NBD server",
			nbd_get_error() ? nbd_get_error() : strerror(-err));
		goto fail;
	}
	err = connect_wait(h, s->connect_ms);
	if (err) {
		xbd_log(xbd_open_failure_level(target, err), "%s: cannot connect to the NBD server: %s",
			s->uri,
			err == -ETIMEDOUT ? "no answer within nbd-connect-timeout-ms"
					  : nbd_get_error() ? nbd_get_error() : strerror(-err));
		goto fail;
	}
	err = probe(s, h);
	if (err)
		goto fail;
	s->spare = h;
	s->base.eng = &xbd_engine_nbd;
	*out = &s->base;
	return 0;
fail:
	xbd_open_failure_note(target, err);
	if (h)
		nbd_close(h);
	free(s->uri);
	free(s);
	return err;
}

/* Close the spare connection; every queue is closed already. */
static void ne_close(struct xbd_store *s_base)
{
	struct nbd_store *s = nbd_store_of(s_base);

	if (s->spare)
		nbd_close(s->spare);
	free(s->uri);
	free(s);
}

/* The size the server gave at connect (NBD has no resize notification). */
static int ne_size(struct xbd_store *s_base, uint64_t *bytes)
{
	struct nbd_store *s = nbd_store_of(s_base);

	*bytes = s->size;
	return 0;
}

static void ne_caps(struct xbd_store *s_base, struct xbd_engine_caps *caps)
{
	struct nbd_store *s = nbd_store_of(s_base);

	*caps = s->caps;
}

/* ---- the queue's epoll set ---- */

static void kick(struct nbd_queue *q)
{
	uint64_t one = 1;

	if (write(q->efd, &one, sizeof(one)) < 0) {
		/* Counter already non-zero: still readable. */
	}
}

/* Register the socket for what libnbd waits for, or take it out when idle. */
static void watch_socket(struct nbd_queue *q)
{
	struct epoll_event ev = { 0 };
	uint32_t want = 0;
	int fd = -1;

	if (q->h && q->state != NBD_DOWN &&
	    (q->state == NBD_CONNECTING || nbd_aio_in_flight(q->h) > 0)) {
		unsigned int dir = nbd_aio_get_direction(q->h);

		fd = nbd_aio_get_fd(q->h);
		want = (dir & LIBNBD_AIO_DIRECTION_READ ? EPOLLIN : 0) |
		       (dir & LIBNBD_AIO_DIRECTION_WRITE ? EPOLLOUT : 0);
		if (!want)
			fd = -1;
	}
	if (q->sock >= 0 && (fd != q->sock || !want)) {
		epoll_ctl(q->epfd, EPOLL_CTL_DEL, q->sock, NULL);
		q->sock = -1;
	}
	if (fd < 0)
		return;
	ev.events = want;
	ev.data.u32 = 0;
	if (q->sock < 0) {
		if (!epoll_ctl(q->epfd, EPOLL_CTL_ADD, fd, &ev)) {
			q->sock = fd;
			q->events = want;
		}
	} else if (want != q->events && !epoll_ctl(q->epfd, EPOLL_CTL_MOD, fd, &ev)) {
		q->events = want;
	}
}

static void arm_deadline(struct nbd_queue *q, unsigned int ms)
{
	struct itimerspec its = { .it_value = { ms / 1000, (long)(ms % 1000) * 1000000 } };

	if (!ms)
		its.it_value.tv_nsec = 1;
	timerfd_settime(q->tfd, 0, &its, NULL);
}

static void disarm_deadline(struct nbd_queue *q)
{
	struct itimerspec its = { 0 };
	uint64_t n;

	timerfd_settime(q->tfd, 0, &its, NULL);
	if (read(q->tfd, &n, sizeof(n)) < 0) {
		/* Not expired. */
	}
}

static bool reconnect(struct nbd_queue *q);

static int ne_queue_open(struct xbd_store *s_base, unsigned int depth, struct xbd_queue **out)
{
	struct nbd_store *s = nbd_store_of(s_base);
	struct nbd_queue *q = calloc(1, sizeof(*q));
	struct epoll_event ev = { .events = EPOLLIN };
	int err;

	if (!q)
		return -ENOMEM;
	q->s = s;
	q->sock = -1;
	q->epfd = epoll_create1(EPOLL_CLOEXEC);
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	q->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (q->epfd < 0 || q->efd < 0 || q->tfd < 0)
		goto fail_errno;
	ev.data.u32 = 1;
	if (epoll_ctl(q->epfd, EPOLL_CTL_ADD, q->efd, &ev))
		goto fail_errno;
	ev.data.u32 = 2;
	if (epoll_ctl(q->epfd, EPOLL_CTL_ADD, q->tfd, &ev))
		goto fail_errno;
	if (s->spare) {
		q->h = s->spare;
		s->spare = NULL;
	} else {
		/*
		 * Another queue's connection: started here, finished by the ring
		 * thread (requests wait for it as for a reconnect), so the caller,
		 * the control plane, never waits for the server's handshake.
		 */
		q->down_since = xbd_mono_ns();
		q->first = true;
		q->state = NBD_DOWN;
		reconnect(q);
		watch_socket(q);
	}
	q->base.eng = &xbd_engine_nbd;
	*out = &q->base;
	return 0;
fail_errno:
	err = -errno;
	if (q->epfd >= 0)
		close(q->epfd);
	if (q->efd >= 0)
		close(q->efd);
	if (q->tfd >= 0)
		close(q->tfd);
	free(q);
	return err;
}

static void ne_queue_close(struct xbd_queue *q_base)
{
	struct nbd_queue *q = nbd_queue_of(q_base);

	if (q->h) {
		if (q->state == NBD_UP && nbd_aio_disconnect(q->h, 0) == 0) {
			/* Tell the server we go; the reply does not matter. */
		}
		nbd_close(q->h);
	}
	close(q->epfd);
	close(q->efd);
	close(q->tfd);
	free(q);
}

static int ne_queue_fd(struct xbd_queue *q_base)
{
	struct nbd_queue *q = nbd_queue_of(q_base);

	return q->epfd;
}

/*
 * Only what finished without the server is known from memory; replies
 * are in the socket, and its readiness wakes the ring thread's epoll.
 */
static bool ne_queue_ready(struct xbd_queue *q_base)
{
	struct nbd_queue *q = nbd_queue_of(q_base);

	return q->done_head || q->again_head;
}

/* ---- commands ---- */

static void arm_deadline(struct nbd_queue *q, unsigned int ms);

static void busy_add(struct nbd_queue *q, struct xbd_io *io)
{
	struct nbd_priv *p = priv(io);

	p->sent_ns = xbd_mono_ns();
	/* The first command out arms the deadline; its expiry finds the oldest (request_due). */
	if (q->s->request_ms && !q->req_timer && q->state == NBD_UP) {
		arm_deadline(q, q->s->request_ms);
		q->req_timer = true;
	}
	p->prev = NULL;
	p->next = q->busy;
	if (q->busy)
		priv(q->busy)->prev = io;
	q->busy = io;
}

static void busy_del(struct nbd_queue *q, struct xbd_io *io)
{
	struct nbd_priv *p = priv(io);

	if (p->prev)
		priv(p->prev)->next = p->next;
	else
		q->busy = p->next;
	if (p->next)
		priv(p->next)->prev = p->prev;
	p->prev = p->next = NULL;
}

static void io_done(struct nbd_queue *q, struct xbd_io *io, int err)
{
	struct nbd_priv *p = priv(io);

	if (io->op == XBD_IO_READ && p->bounce && !err) {
		const char *src = p->bounce;
		unsigned int i;

		for (i = 0; i < io->iovcnt; i++) {
			memcpy(io->iov[i].iov_base, src, io->iov[i].iov_len);
			src += io->iov[i].iov_len;
		}
	}
	free(p->bounce);
	p->bounce = NULL;
	if (p->flushing)
		io->op = XBD_IO_WRITE; /* what the caller submitted */
	p->flushing = false;
	io->result = err;
	if (err && q->state != NBD_UP)
		q->failed++;
	list_add(&q->done_head, &q->done_tail, io);
}

static int issue(struct nbd_queue *q, struct xbd_io *io);

/* libnbd's completion callback (in our thread, inside notify_read or a failed connection). */
static int command_done(void *user_data, int *error)
{
	struct xbd_io *io = user_data;
	struct nbd_priv *p = priv(io);
	struct nbd_queue *q = p->q;

	q->replies++;
	if (*error && !p->err)
		p->err = -*error;
	if (--p->parts)
		return 1;
	busy_del(q, io);
	if (!p->err && p->then_flush) {
		/*
		 * The durable write's second half, on a server without FUA: sent
		 * after libnbd returns (no libnbd call on the handle inside its
		 * own callback).
		 */
		list_add(&q->again_head, &q->again_tail, io);
		return 1;
	}
	io_done(q, io, p->err);
	return 1;
}

/*
 * Send the commands of one io: reads and writes split at the server's
 * maximum, trims at 1 GiB.  0 if at least one command went out (the rest
 * fail through p->err), else a negative errno and nothing is pending.
 */
static int issue(struct nbd_queue *q, struct xbd_io *io)
{
	struct nbd_store *s = q->s;
	struct nbd_priv *p = priv(io);
	nbd_completion_callback cb = { .callback = command_done, .user_data = io };
	uint64_t len = 0, off, step;
	unsigned int i, sent = 0;
	char *buf = NULL;
	int64_t r = 0;

	p->q = q;
	p->err = 0;
	if (!p->flushing)
		p->bounce = NULL;
	p->parts = 1; /* held until every command is out */
	busy_add(q, io);
	switch (io->op) {
	case XBD_IO_FLUSH:
		if (!s->flush)
			break; /* no write cache at the server: nothing to make durable */
		p->parts++;
		r = nbd_aio_flush(q->h, cb, 0);
		if (r < 0)
			p->parts--;
		else
			sent++;
		break;
	case XBD_IO_DISCARD:
		for (off = 0; off < io->len && r >= 0; off += step) {
			step = io->len - off < NBD_TRIM_MAX ? io->len - off : NBD_TRIM_MAX;
			p->parts++;
			r = s->trim ? nbd_aio_trim(q->h, step, io->offset + off, cb, 0)
				    : nbd_aio_zero(q->h, step, io->offset + off, cb, 0);
			if (r < 0)
				p->parts--;
			else
				sent++;
		}
		break;
	default:
		for (i = 0; i < io->iovcnt; i++)
			len += io->iov[i].iov_len;
		if (io->iovcnt == 1) {
			buf = io->iov[0].iov_base;
		} else {
			buf = p->bounce = malloc(len ? len : 1);
			if (!buf) {
				r = -1;
				break;
			}
			if (io->op == XBD_IO_WRITE) {
				char *dst = buf;

				for (i = 0; i < io->iovcnt; i++) {
					memcpy(dst, io->iov[i].iov_base, io->iov[i].iov_len);
					dst += io->iov[i].iov_len;
				}
			}
		}
		p->then_flush = io->op == XBD_IO_WRITE && io->dsync && !s->fua && s->flush;
		for (off = 0; off < len && r >= 0; off += step) {
			step = len - off < s->max_cmd ? len - off : s->max_cmd;
			p->parts++;
			if (io->op == XBD_IO_READ)
				r = nbd_aio_pread(q->h, buf + off, step, io->offset + off, cb, 0);
			else
				r = nbd_aio_pwrite(q->h, buf + off, step, io->offset + off, cb,
						   io->dsync && s->fua ? LIBNBD_CMD_FLAG_FUA : 0);
			if (r < 0)
				p->parts--;
			else
				sent++;
		}
		break;
	}
	if (r < 0 && !p->err)
		p->err = nbd_get_errno() ? -nbd_get_errno() : -EIO;
	if (--p->parts)
		return 0; /* the last reply finishes it (command_done) */
	busy_del(q, io);
	if (p->err && !sent) {
		/* Nothing went out: the caller decides (the connection may be gone). */
		free(p->bounce);
		p->bounce = NULL;
		return p->err;
	}
	if (!p->err && p->then_flush) {
		list_add(&q->again_head, &q->again_tail, io);
	} else {
		io_done(q, io, p->err);
	}
	kick(q);
	return 0;
}

/* Send the flushes that durable writes on a server without FUA still owe. */
static void send_again(struct nbd_queue *q)
{
	while (q->again_head) {
		struct xbd_io *io = q->again_head;

		q->again_head = io->next;
		if (!q->again_head)
			q->again_tail = NULL;
		priv(io)->then_flush = false;
		priv(io)->flushing = true;
		io->op = XBD_IO_FLUSH;
		if (q->state != NBD_UP || issue(q, io)) {
			io_done(q, io, -EIO);
			kick(q);
			continue;
		}
	}
}

/* ---- losing the server and finding it again ---- */

/* Fail every io of a list with -EIO; how many. */
static unsigned int fail_all(struct nbd_queue *q, struct xbd_io **head, struct xbd_io **tail)
{
	unsigned int n = 0;

	while (*head) {
		struct xbd_io *io = *head;

		*head = io->next;
		io_done(q, io, -EIO);
		n++;
	}
	*tail = NULL;
	return n;
}

/* The connection is gone: every command at the server fails, once, with a log line. */
static void lost(struct nbd_queue *q, const char *why)
{
	unsigned int n = 0;

	if (q->state == NBD_UP) {
		q->down_since = xbd_mono_ns();
		q->failed = 0;
		q->attempts = 0;
		xbd_log(XBD_LOG_ERR, "%s: connection to the NBD server lost (%s); "
			"requests fail until it is back", q->s->uri, why);
	}
	q->state = NBD_DOWN;
	q->req_timer = false;
	if (q->sock >= 0) {
		epoll_ctl(q->epfd, EPOLL_CTL_DEL, q->sock, NULL);
		q->sock = -1;
	}
	if (q->h)
		nbd_close(q->h); /* libnbd retires what it still had, with errors */
	q->h = NULL;
	while (q->busy) {
		/* Whatever libnbd did not answer. */
		struct xbd_io *io = q->busy;

		busy_del(q, io);
		priv(io)->then_flush = false;
		io_done(q, io, priv(io)->err ? priv(io)->err : -EIO);
		n++;
	}
	n += fail_all(q, &q->wait_head, &q->wait_tail);
	n += fail_all(q, &q->again_head, &q->again_tail);
	q->retry_at = xbd_mono_ns() + (uint64_t)q->s->retry_ms * 1000000u;
	if (n || q->done_head)
		kick(q);
}

/* A connect finished: send what waited, or give up on it. */
static void connect_step(struct nbd_queue *q, bool timed_out)
{
	if (nbd_aio_is_connecting(q->h) && !timed_out)
		return;
	disarm_deadline(q);
	if (nbd_aio_is_ready(q->h)) {
		if (!q->first)
			xbd_log(XBD_LOG_INFO, "%s: reconnected to the NBD server after %.1f s "
				"(%u requests failed meanwhile)", q->s->uri,
				(double)(xbd_mono_ns() - q->down_since) / 1e9, q->failed);
		q->first = false;
		q->state = NBD_UP;
		while (q->wait_head) {
			struct xbd_io *io = q->wait_head;
			int err;

			q->wait_head = io->next;
			err = issue(q, io);
			if (err)
				io_done(q, io, err);
		}
		q->wait_tail = NULL;
		kick(q);
		return;
	}
	q->attempts++;
	q->first = false;
	/* One line for the first failed attempt and then at 2, 4, 8 ... */
	if (!(q->attempts & (q->attempts - 1)))
		xbd_log(XBD_LOG_ERR, "%s: NBD server still unreachable (%u attempt%s): %s",
			q->s->uri, q->attempts, q->attempts == 1 ? "" : "s",
			timed_out ? "no answer within nbd-connect-timeout-ms"
				  : nbd_get_error() ? nbd_get_error() : "refused");
	lost(q, "reconnect failed");
}

/* Start a reconnect; false if it failed at once (retry later). */
static bool reconnect(struct nbd_queue *q)
{
	q->h = new_handle();
	if (!q->h || !connect_start(q->h, q->s->uri)) {
		q->attempts++;
		if (!(q->attempts & (q->attempts - 1)))
			xbd_log(XBD_LOG_ERR, "%s: NBD server still unreachable (%u attempt%s): %s",
				q->s->uri, q->attempts, q->attempts == 1 ? "" : "s",
				q->h && nbd_get_error() ? nbd_get_error() : "out of memory");
		if (q->h)
			nbd_close(q->h);
		q->h = NULL;
		q->retry_at = xbd_mono_ns() + (uint64_t)q->s->retry_ms * 1000000u;
		return false;
	}
	q->state = NBD_CONNECTING;
	q->req_timer = false;
	arm_deadline(q, q->s->connect_ms);
	connect_step(q, false);
	return true;
}

/* ---- the engine calls ---- */

/* Send, or hold for a connect, or fail at once while the server is away. */
static int start(struct nbd_queue *q, struct xbd_io *io)
{
	if (q->state == NBD_DOWN && xbd_mono_ns() >= q->retry_at)
		reconnect(q);
	switch (q->state) {
	case NBD_UP: {
		int err = issue(q, io);

		if (err && q->h && (nbd_aio_is_dead(q->h) || nbd_aio_is_closed(q->h))) {
			lost(q, nbd_get_error() ? nbd_get_error() : "connection closed");
			io_done(q, io, -EIO);
			kick(q);
			err = 0;
		}
		if (err)
			return err;
		break;
	}
	case NBD_CONNECTING:
		list_add(&q->wait_head, &q->wait_tail, io);
		break;
	case NBD_DOWN:
		io_done(q, io, -EIO);
		kick(q);
		break;
	}
	watch_socket(q);
	return 0;
}

static int ne_submit(struct xbd_queue *q_base, struct xbd_io **ios, unsigned int n)
{
	struct nbd_queue *q = nbd_queue_of(q_base);
	unsigned int i;

	for (i = 0; i < n; i++) {
		int err = start(q, ios[i]);

		if (err)
			return i ? (int)i : err;
	}
	return (int)n;
}

static int ne_flush(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct nbd_queue *q = nbd_queue_of(q_base);

	return start(q, io);
}

static int ne_discard(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct nbd_queue *q = nbd_queue_of(q_base);

	return start(q, io);
}

/*
 * libnbd's notify_read handles one reply and returns to waiting; a
 * socket with many replies in it is drained here in one wake-up, while
 * it stays readable and each call finishes a reply, up to a reap's worth.
 */
static void read_replies(struct nbd_queue *q)
{
	unsigned int i;

	for (i = 0; i < 64 && q->h; i++) {
		struct pollfd p = { .fd = nbd_aio_get_fd(q->h), .events = POLLIN };
		uint64_t before = q->replies;

		/* Again only with data there (libnbd's socket may block), and connected. */
		if (i && (q->state != NBD_UP || poll(&p, 1, 0) != 1))
			break;
		if (nbd_aio_notify_read(q->h) < 0 || q->replies == before)
			break;
	}
}

/* Read replies (and send what waits), then hand back what finished. */
/*
 * The command deadline passed: if the oldest command out has waited
 * nbd-request-timeout-ms, the server counts as lost (every command out
 * fails with an I/O error, as the kernel's nbd driver does at its
 * timeout, and the connection is made again); else the deadline moves to
 * the oldest's.
 */
static void request_due(struct nbd_queue *q)
{
	uint64_t now = xbd_mono_ns(), oldest = now, limit = (uint64_t)q->s->request_ms * 1000000u;

	q->req_timer = false;
	for (struct xbd_io *io = q->busy; io; io = priv(io)->next)
		if (priv(io)->sent_ns < oldest)
			oldest = priv(io)->sent_ns;
	if (!q->busy)
		return;
	if (now - oldest >= limit) {
		lost(q, "no reply within nbd-request-timeout-ms");
		return;
	}
	arm_deadline(q, (unsigned int)((oldest + limit - now + 999999) / 1000000));
	q->req_timer = true;
}

static int ne_reap(struct xbd_queue *q_base, struct xbd_io **done, unsigned int max)
{
	struct nbd_queue *q = nbd_queue_of(q_base);
	struct epoll_event ev[3];
	unsigned int n = 0;
	uint64_t cnt;
	int nev, i;

	if (read(q->efd, &cnt, sizeof(cnt)) < 0) {
		/* Nothing signalled. */
	}
	nev = epoll_wait(q->epfd, ev, 3, 0);
	for (i = 0; i < nev; i++) {
		if (ev[i].data.u32 == 2) {
			if (read(q->tfd, &cnt, sizeof(cnt)) <= 0)
				continue;
			if (q->state == NBD_CONNECTING)
				connect_step(q, true);
			else if (q->state == NBD_UP && q->req_timer)
				request_due(q);
			continue;
		}
		if (ev[i].data.u32 != 0 || !q->h)
			continue;
		if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			read_replies(q);
		if (q->h && (ev[i].events & EPOLLOUT))
			nbd_aio_notify_write(q->h);
		if (q->state == NBD_CONNECTING)
			connect_step(q, false);
		else if (nbd_aio_is_dead(q->h) || nbd_aio_is_closed(q->h))
			lost(q, nbd_get_error() ? nbd_get_error() : "connection closed by the server");
	}
	send_again(q);
	watch_socket(q);
	while (n < max && q->done_head) {
		done[n++] = q->done_head;
		q->done_head = q->done_head->next;
	}
	if (!q->done_head)
		q->done_tail = NULL;
	else
		kick(q);
	return (int)n;
}

const struct xbd_engine xbd_engine_nbd = {
	.name = "nbd",
	.open_remote = true,
	.uri = true,
	.open = ne_open,
	.close = ne_close,
	.size = ne_size,
	.capabilities = ne_caps,
	.queue_open = ne_queue_open,
	.queue_close = ne_queue_close,
	.queue_fd = ne_queue_fd,
	.submit = ne_submit,
	.flush = ne_flush,
	.discard = ne_discard,
	.reap = ne_reap,
	.queue_ready = ne_queue_ready,
};
