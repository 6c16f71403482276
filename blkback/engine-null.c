/*
 * engine-null.c: a store that does nothing and completes every request at
 * once; reads return zeros.  "null:SIZE" (e.g. null:1G).  It measures the
 * protocol and the data path with the storage taken out.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "blkback/engine.h"

struct xbd_store {
	uint64_t size;
};

struct xbd_queue {
	int efd;
	struct xbd_io *head, *tail; /* completed, not yet reaped */
};

/* Parse the size; nothing else to open. */
static int null_open(const char *target, bool readonly, const struct xbd_disk_opts *o,
		     struct xbd_store **out)
{
	struct xbd_store *s;
	uint64_t size;

	if (xbd_parse_size(target, &size) || size < 512 || size % 512)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->size = size;
	*out = s;
	return 0;
}

/* Free the store. */
static void null_close(struct xbd_store *s)
{
	free(s);
}

/* The size given in params. */
static int null_size(struct xbd_store *s, uint64_t *bytes)
{
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
static int null_queue_open(struct xbd_store *s, unsigned int depth, struct xbd_queue **out)
{
	struct xbd_queue *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0) {
		int err = -errno;

		free(q);
		return err;
	}
	*out = q;
	return 0;
}

/* Close the eventfd. */
static void null_queue_close(struct xbd_queue *q)
{
	close(q->efd);
	free(q);
}

/* Readable when completions wait. */
static int null_queue_fd(struct xbd_queue *q)
{
	return q->efd;
}

static void complete(struct xbd_queue *q, struct xbd_io *io)
{
	io->result = 0;
	io->next = NULL;
	if (q->tail)
		q->tail->next = io;
	else
		q->head = io;
	q->tail = io;
}

static void kick(struct xbd_queue *q)
{
	uint64_t one = 1;

	if (write(q->efd, &one, sizeof(one)) < 0) {
		/* The counter is already non-zero: still readable. */
	}
}

/* Every read returns zeros, every write is dropped. */
static int null_submit(struct xbd_queue *q, struct xbd_io **ios, unsigned int n)
{
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
static int null_flush(struct xbd_queue *q, struct xbd_io *io)
{
	complete(q, io);
	kick(q);
	return 0;
}

/* Nothing to discard. */
static int null_discard(struct xbd_queue *q, struct xbd_io *io)
{
	complete(q, io);
	kick(q);
	return 0;
}

/* Hand back what completed. */
static int null_reap(struct xbd_queue *q, struct xbd_io **done, unsigned int max)
{
	uint64_t cnt;
	unsigned int n = 0;

	if (read(q->efd, &cnt, sizeof(cnt)) < 0) {
		/* EAGAIN: nothing signalled since the last reap. */
	}
	while (n < max && q->head) {
		done[n++] = q->head;
		q->head = q->head->next;
	}
	if (!q->head)
		q->tail = NULL;
	return n;
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
};
