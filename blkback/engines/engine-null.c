/*
 * engine-null.c: a store that does nothing and completes every request at
 * once; reads return zeros.  "null:SIZE" (e.g. null:1G).  It measures the
 * protocol and the data path with the storage taken out.
 *
 * "null:SIZE:delay_ms=N" completes every operation N ms after it was
 * submitted instead: storage that stalls (a frozen filesystem, a slow
 * network disk), for the tests that show one slow disk holds up nobody
 * else.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "blkback/engines/engine.h"
#include "common/clock.h"
#include "common/size.h"

struct null_store {
	struct xbd_store base;  /* first: what the engine table passes (null_store_of) */
	uint64_t size;
	uint64_t delay_ns;
};

struct null_queue {
	struct xbd_queue base;  /* first: what the engine table passes (null_queue_of) */
	int efd;                    /* an eventfd, or a timerfd with a delay */
	uint64_t delay_ns;
	struct xbd_io *head, *tail; /* completed (or due in order), not yet reaped */
};

/* The engine table passes the bases; each is the first member of ours. */
static inline struct null_store *null_store_of(struct xbd_store *b)
{
	return (struct null_store *)b;
}

static inline struct null_queue *null_queue_of(struct xbd_queue *b)
{
	return (struct null_queue *)b;
}

/* Parse the size; nothing else to open. */
static int null_open(const char *target, bool readonly, const struct xbd_disk_opts *o,
		     struct xbd_store **out)
{
	struct null_store *s;
	uint64_t size, delay = 0;
	const char *opt = strchr(target, ':');
	char num[32];
	size_t len = opt ? (size_t)(opt - target) : strlen(target);

	if (len >= sizeof(num))
		return -EINVAL;
	memcpy(num, target, len);
	num[len] = '\0';
	if (xbd_parse_size(num, &size) || size < 512 || size % 512)
		return -EINVAL;
	if (opt) {
		char *end;

		if (strncmp(opt + 1, "delay_ms=", 9) || opt[10] < '0' || opt[10] > '9')
			return -EINVAL;
		delay = strtoull(opt + 10, &end, 10);
		if (*end || delay > 3600 * 1000)
			return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->size = size;
	s->delay_ns = delay * 1000000;
	s->base.eng = &xbd_engine_null;
	*out = &s->base;
	return 0;
}

/* Free the store. */
static void null_close(struct xbd_store *s_base)
{
	struct null_store *s = null_store_of(s_base);

	free(s);
}

/* Nothing but the numbers params gave (xbd_store_export). */
static int null_export(struct xbd_store *s_base, struct xbd_store_export *out, int *fds)
{
	struct null_store *s = null_store_of(s_base);
	uint64_t v[2] = { s->size, s->delay_ns };

	memcpy(out->data, v, sizeof(v));
	out->len = sizeof(v);
	out->nfds = 0;
	return 0;
}

/* The same disk in another process. */
static int null_import(const struct xbd_store_export *in, const int *fds, struct xbd_store **out)
{
	struct null_store *s;
	uint64_t v[2];

	if (in->len != sizeof(v) || in->nfds)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	memcpy(v, in->data, sizeof(v));
	s->size = v[0];
	s->delay_ns = v[1];
	s->base.eng = &xbd_engine_null;
	*out = &s->base;
	return 0;
}

/* The size given in params. */
static int null_size(struct xbd_store *s_base, uint64_t *bytes)
{
	struct null_store *s = null_store_of(s_base);

	*bytes = s->size;
	return 0;
}

/* 512-byte sectors; discard accepted (and ignored). */
static void null_caps(struct xbd_store *s, struct xbd_engine_caps *c)
{
	memset(c, 0, sizeof(*c));
	c->logical_block = 512;
	c->physical_block = 512;
	c->discard = true;
	c->discard_secure = true;
	c->discard_granularity = 4096;
}

/* A completion list and its eventfd. */
static int null_queue_open(struct xbd_store *s_base, unsigned int depth, struct xbd_queue **out)
{
	struct null_store *s = null_store_of(s_base);
	struct null_queue *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	q->delay_ns = s->delay_ns;
	if (q->delay_ns)
		q->efd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	else
		q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0) {
		int err = -errno;

		free(q);
		return err;
	}
	q->base.eng = &xbd_engine_null;
	*out = &q->base;
	return 0;
}

/* Close the eventfd. */
static void null_queue_close(struct xbd_queue *q_base)
{
	struct null_queue *q = null_queue_of(q_base);

	close(q->efd);
	free(q);
}

/* Readable when completions wait. */
static int null_queue_fd(struct xbd_queue *q_base)
{
	struct null_queue *q = null_queue_of(q_base);

	return q->efd;
}

/* With a delay, the due time is kept in the engine-private bytes of the io. */
static void complete(struct null_queue *q, struct xbd_io *io)
{
	if (q->delay_ns) {
		/* Due times grow with submission order: the list stays sorted. */
		uint64_t due = xbd_mono_ns() + q->delay_ns;

		memcpy(io->priv, &due, sizeof(due));
	}
	io->result = 0;
	io->next = NULL;
	if (q->tail)
		q->tail->next = io;
	else
		q->head = io;
	q->tail = io;
}

/* Arm the timer for the oldest operation's due time. */
static void arm(struct null_queue *q)
{
	struct itimerspec its;
	uint64_t due;

	memset(&its, 0, sizeof(its));
	if (q->head) {
		memcpy(&due, q->head->priv, sizeof(due));
		its.it_value.tv_sec = due / 1000000000u;
		its.it_value.tv_nsec = due % 1000000000u;
	}
	timerfd_settime(q->efd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void kick(struct null_queue *q)
{
	uint64_t one = 1;

	if (q->delay_ns) {
		arm(q);
		return;
	}
	if (write(q->efd, &one, sizeof(one)) < 0) {
		/* The counter is already non-zero: still readable. */
	}
}

/* Every read returns zeros, every write is dropped. */
static int null_submit(struct xbd_queue *q_base, struct xbd_io **ios, unsigned int n)
{
	struct null_queue *q = null_queue_of(q_base);
	unsigned int i, j;

	for (i = 0; i < n; i++) {
		if (ios[i]->op == XBD_IO_READ)
			for (j = 0; j < ios[i]->iovcnt; j++)
				memset(ios[i]->iov[j].iov_base, 0, ios[i]->iov[j].iov_len);
		complete(q, ios[i]);
	}
	if (n)
		kick(q);
	return n;
}

/* Nothing to make durable. */
static int null_flush(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct null_queue *q = null_queue_of(q_base);

	complete(q, io);
	kick(q);
	return 0;
}

/* Nothing to discard. */
static int null_discard(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct null_queue *q = null_queue_of(q_base);

	complete(q, io);
	kick(q);
	return 0;
}

/* Hand back what completed. */
static int null_reap(struct xbd_queue *q_base, struct xbd_io **done, unsigned int max)
{
	struct null_queue *q = null_queue_of(q_base);
	uint64_t cnt;
	unsigned int n = 0;

	if (read(q->efd, &cnt, sizeof(cnt)) < 0) {
		/* EAGAIN: nothing signalled since the last reap. */
	}
	while (n < max && q->head) {
		if (q->delay_ns) {
			uint64_t due;

			memcpy(&due, q->head->priv, sizeof(due));
			if (due > xbd_mono_ns())
				break;
		}
		done[n++] = q->head;
		q->head = q->head->next;
	}
	if (!q->head)
		q->tail = NULL;
	if (q->delay_ns)
		arm(q);
	return n;
}

/* Something to reap (and due, with a delay). */
static bool null_queue_ready(struct xbd_queue *q_base)
{
	struct null_queue *q = null_queue_of(q_base);
	uint64_t due;

	if (!q->head)
		return false;
	if (!q->delay_ns)
		return true;
	memcpy(&due, q->head->priv, sizeof(due));
	return due <= xbd_mono_ns();
}

const struct xbd_engine xbd_engine_null = {
	.name = "null",
	.open = null_open,
	.close = null_close,
	.size = null_size,
	.capabilities = null_caps,
	.queue_open = null_queue_open,
	.queue_close = null_queue_close,
	.queue_fd = null_queue_fd,
	.submit = null_submit,
	.flush = null_flush,
	.discard = null_discard,
	.reap = null_reap,
	.queue_ready = null_queue_ready,
	.export_store = null_export,
	.import_store = null_import,
};
