/*
 * engine-fault.c: a storage engine that injects faults, for the robustness
 * tests.  It wraps any other engine of the table and fails chosen
 * operations with a chosen errno before they reach it, so that a test can
 * show what a guest sees when the storage under a running disk says EIO or
 * ENOSPC, and that nothing else is disturbed.
 *
 *     params = fault:SPEC:INNER
 *
 * INNER is what the disk's params would be without faults (a path,
 * aio:PATH or null:SIZE).  SPEC is a comma-separated list of rules
 * ERR@WHEN; an operation fails with the errno of the first rule that
 * matches it and is then never handed to the inner engine (a failed write
 * changes nothing).
 *
 *     ERR   eio | enospc | eopnotsupp | eagain
 *     WHEN  sector=N[-M]        a read, write or discard touching 512-byte
 *                               sectors N..M (inclusive)
 *           read-sector=N[-M]   the same, reads only
 *           write-sector=N[-M]  the same, writes only
 *           read-after=K        every read after the first K (per disk)
 *           write-after=K       every write after the first K (per disk)
 *           flush-after=K       every flush after the first K (per disk)
 *           discard             every discard
 *           all                 every operation
 *
 * e.g. fault:eio@sector=2048-2055,enospc@write-after=500:/srv/a.img
 *
 * eagain is special: it does not fail the operation but makes submit()
 * refuse it for now (the engine contract's partial submission); with
 * eagain@all every other call to submit accepts only the first half of
 * its batch and refuses the rest once, to exercise the data path's
 * resubmission.  Counters are shared by every queue of the disk.
 *
 * Faulted operations complete through a private eventfd; the queue's fd
 * is an epoll set holding that eventfd and the inner queue's fd, readable
 * when either is.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "blkback/engines/engine.h"
#include "blkback/log/log.h"

#define FAULT_MAX_RULES 8

enum fault_when {
	FW_SECTOR,
	FW_READ_SECTOR,
	FW_WRITE_SECTOR,
	FW_READ_AFTER,
	FW_WRITE_AFTER,
	FW_FLUSH_AFTER,
	FW_DISCARD,
	FW_ALL,
};

struct fault_rule {
	int err;              /* negative errno */
	enum fault_when when;
	uint64_t lo, hi;      /* sectors (inclusive), or K in lo */
};

struct fault_store {
	struct xbd_store base;  /* first: what the engine table passes (fault_store_of) */
	const struct xbd_engine *inner;
	struct xbd_store *is;
	struct fault_rule rules[FAULT_MAX_RULES];
	unsigned int nrules;
	/* Operations seen, per kind, over every queue (atomics). */
	uint64_t reads, writes, flushes;
	uint64_t injected;
};

struct fault_queue {
	struct xbd_queue base;  /* first: what the engine table passes (fault_queue_of) */
	struct fault_store *s;
	struct xbd_queue *iq;
	int epfd, efd;
	unsigned int depth;
	unsigned int submits;
	struct xbd_io *head, *tail; /* faulted, not yet reaped */
};

/* The engine table passes the bases; each is the first member of ours. */
static inline struct fault_store *fault_store_of(struct xbd_store *b)
{
	return (struct fault_store *)b;
}

static inline struct fault_queue *fault_queue_of(struct xbd_queue *b)
{
	return (struct fault_queue *)b;
}

static const struct {
	const char *name;
	int err;
} fault_errs[] = {
	{ "eio", -EIO },
	{ "enospc", -ENOSPC },
	{ "eopnotsupp", -EOPNOTSUPP },
	{ "eagain", -EAGAIN },
};

static const struct {
	const char *name;
	enum fault_when when;
	bool range; /* takes =N[-M] (else =K, or nothing) */
	bool arg;
} fault_whens[] = {
	{ "sector", FW_SECTOR, true, true },
	{ "read-sector", FW_READ_SECTOR, true, true },
	{ "write-sector", FW_WRITE_SECTOR, true, true },
	{ "read-after", FW_READ_AFTER, false, true },
	{ "write-after", FW_WRITE_AFTER, false, true },
	{ "flush-after", FW_FLUSH_AFTER, false, true },
	{ "discard", FW_DISCARD, false, false },
	{ "all", FW_ALL, false, false },
};

static int parse_u64(const char *s, const char *end, uint64_t *v)
{
	char buf[32], *e;
	size_t len = (size_t)(end - s);

	if (!len || len >= sizeof(buf) || *s < '0' || *s > '9')
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	*v = strtoull(buf, &e, 10);
	return errno || *e ? -EINVAL : 0;
}

/* One rule, s..end: ERR@WHEN[=ARG]. */
static int parse_rule(const char *s, const char *end, struct fault_rule *r)
{
	const char *at = memchr(s, '@', (size_t)(end - s)), *w, *eq;
	unsigned int i;
	size_t len;

	if (!at)
		return -EINVAL;
	for (i = 0; i < sizeof(fault_errs) / sizeof(fault_errs[0]); i++)
		if ((size_t)(at - s) == strlen(fault_errs[i].name) &&
		    !strncmp(s, fault_errs[i].name, (size_t)(at - s)))
			break;
	if (i == sizeof(fault_errs) / sizeof(fault_errs[0]))
		return -EINVAL;
	r->err = fault_errs[i].err;
	w = at + 1;
	eq = memchr(w, '=', (size_t)(end - w));
	len = (size_t)((eq ? eq : end) - w);
	for (i = 0; i < sizeof(fault_whens) / sizeof(fault_whens[0]); i++)
		if (len == strlen(fault_whens[i].name) && !strncmp(w, fault_whens[i].name, len))
			break;
	if (i == sizeof(fault_whens) / sizeof(fault_whens[0]) || !eq != !fault_whens[i].arg)
		return -EINVAL;
	r->when = fault_whens[i].when;
	if (!eq)
		return 0;
	if (fault_whens[i].range) {
		const char *dash = memchr(eq + 1, '-', (size_t)(end - eq - 1));

		if (parse_u64(eq + 1, dash ? dash : end, &r->lo))
			return -EINVAL;
		r->hi = r->lo;
		if (dash && parse_u64(dash + 1, end, &r->hi))
			return -EINVAL;
		return r->hi >= r->lo ? 0 : -EINVAL;
	}
	return parse_u64(eq + 1, end, &r->lo);
}

/* SPEC:INNER: parse the rules, then open INNER through the engine table. */
static int fault_open(const char *target, bool readonly, const struct xbd_disk_opts *o,
		      struct xbd_store **out)
{
	const char *colon = strchr(target, ':'), *p, *inner_target;
	struct fault_store *s;
	int err;

	if (!colon)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (p = target; p < colon;) {
		const char *comma = memchr(p, ',', (size_t)(colon - p));
		const char *end = comma ? comma : colon;

		if (s->nrules == FAULT_MAX_RULES || parse_rule(p, end, &s->rules[s->nrules])) {
			err = -EINVAL;
			goto fail;
		}
		s->nrules++;
		p = comma ? comma + 1 : colon;
	}
	s->inner = xbd_engine_choose(colon + 1, o, &inner_target);
	if (!s->inner) {
		err = -EINVAL;
		goto fail;
	}
	err = s->inner->open(inner_target, readonly, o, &s->is);
	if (err)
		goto fail;
	xbd_log(XBD_LOG_INFO, "fault engine: %u rule(s) '%.*s' over %s engine", s->nrules,
		(int)(colon - target), target, s->inner->name);
	s->base.eng = &xbd_engine_fault;
	*out = &s->base;
	return 0;
fail:
	free(s);
	return err;
}

static void fault_close(struct xbd_store *s_base)
{
	struct fault_store *s = fault_store_of(s_base);

	xbd_log(XBD_LOG_INFO, "fault engine: %" PRIu64 " fault(s) injected",
		__atomic_load_n(&s->injected, __ATOMIC_RELAXED));
	s->inner->close(s->is);
	free(s);
}

/* The rules, then the inner store's own description (xbd_store_export). */
struct fault_export {
	uint32_t nrules;
	struct fault_rule rules[FAULT_MAX_RULES];
	struct xbd_store_export inner_hdr; /* its data follows, inner_hdr.len bytes */
};
_Static_assert(offsetof(struct fault_export, inner_hdr.data) < XBD_STORE_EXPORT_BYTES,
	       "no room for a fault engine's rules");
#define FAULT_INNER_MAX (XBD_STORE_EXPORT_BYTES - offsetof(struct fault_export, inner_hdr.data))

/* What a worker needs to inject the same faults over the same inner store. */
static int fault_export(struct xbd_store *s_base, struct xbd_store_export *out, int *fds)
{
	struct fault_store *s = fault_store_of(s_base);
	struct fault_export f;
	struct xbd_store_export inner;
	size_t head = offsetof(struct fault_export, inner_hdr.data);
	int err;

	err = xbd_store_export(s->inner, s->is, &inner, fds);
	if (err)
		return err;
	if (inner.len > FAULT_INNER_MAX)
		return -E2BIG;
	memset(&f, 0, sizeof(f));
	f.nrules = s->nrules;
	memcpy(f.rules, s->rules, sizeof(f.rules));
	memcpy(f.inner_hdr.engine, inner.engine, sizeof(inner.engine));
	f.inner_hdr.len = inner.len;
	f.inner_hdr.nfds = inner.nfds;
	/* The export's bytes have no alignment of their own: copied, never cast. */
	memcpy(out->data, &f, head);
	memcpy(out->data + head, inner.data, inner.len);
	out->len = head + inner.len;
	out->nfds = inner.nfds;
	return 0;
}

/* The same rules over the inner store re-created from its own description. */
static int fault_import(const struct xbd_store_export *in, const int *fds,
			struct xbd_store **out)
{
	size_t head = offsetof(struct fault_export, inner_hdr.data);
	struct xbd_store_export inner;
	struct fault_export f;
	struct fault_store *s;
	int err;

	if (in->len < head)
		goto bad;
	memcpy(&f, in->data, head);
	if (f.nrules > FAULT_MAX_RULES || f.inner_hdr.len > FAULT_INNER_MAX ||
	    in->len != head + f.inner_hdr.len || f.inner_hdr.nfds != in->nfds)
		goto bad;
	s = calloc(1, sizeof(*s));
	if (!s)
		goto bad;
	memset(&inner, 0, sizeof(inner));
	memcpy(inner.engine, f.inner_hdr.engine, sizeof(inner.engine));
	inner.len = f.inner_hdr.len;
	inner.nfds = f.inner_hdr.nfds;
	memcpy(inner.data, in->data + head, inner.len);
	err = xbd_store_import(&inner, fds, &s->inner, &s->is);
	if (err) {
		free(s);
		return err;
	}
	s->nrules = f.nrules;
	memcpy(s->rules, f.rules, sizeof(s->rules));
	s->base.eng = &xbd_engine_fault;
	*out = &s->base;
	return 0;
bad:
	for (unsigned int i = 0; i < in->nfds && i < XBD_STORE_EXPORT_FDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return -EINVAL;
}

static int fault_size(struct xbd_store *s_base, uint64_t *bytes)
{
	struct fault_store *s = fault_store_of(s_base);

	return s->inner->size(s->is, bytes);
}

static void fault_caps(struct xbd_store *s_base, struct xbd_engine_caps *caps)
{
	struct fault_store *s = fault_store_of(s_base);

	s->inner->capabilities(s->is, caps);
}

static int fault_queue_open(struct xbd_store *s_base, unsigned int depth, struct xbd_queue **out)
{
	struct fault_store *s = fault_store_of(s_base);
	struct fault_queue *q = calloc(1, sizeof(*q));
	struct epoll_event ev = { .events = EPOLLIN };
	int err;

	if (!q)
		return -ENOMEM;
	q->s = s;
	q->depth = depth;
	q->epfd = q->efd = -1;
	err = s->inner->queue_open(s->is, depth, &q->iq);
	if (err)
		goto fail;
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	q->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (q->efd < 0 || q->epfd < 0)
		goto fail_errno;
	if (epoll_ctl(q->epfd, EPOLL_CTL_ADD, q->efd, &ev) ||
	    epoll_ctl(q->epfd, EPOLL_CTL_ADD, s->inner->queue_fd(q->iq), &ev))
		goto fail_errno;
	q->base.eng = &xbd_engine_fault;
	*out = &q->base;
	return 0;
fail_errno:
	err = -errno;
	if (q->efd >= 0)
		close(q->efd);
	if (q->epfd >= 0)
		close(q->epfd);
	s->inner->queue_close(q->iq);
fail:
	free(q);
	return err;
}

static void fault_queue_close(struct xbd_queue *q_base)
{
	struct fault_queue *q = fault_queue_of(q_base);

	q->s->inner->queue_close(q->iq);
	close(q->efd);
	close(q->epfd);
	free(q);
}

static int fault_queue_fd(struct xbd_queue *q_base)
{
	struct fault_queue *q = fault_queue_of(q_base);

	return q->epfd;
}

static uint64_t io_bytes(const struct xbd_io *io)
{
	uint64_t n = 0;
	unsigned int i;

	if (io->op == XBD_IO_DISCARD)
		return io->len;
	for (i = 0; i < io->iovcnt; i++)
		n += io->iov[i].iov_len;
	return n;
}

static bool touches(const struct xbd_io *io, const struct fault_rule *r)
{
	uint64_t first = io->offset / 512, bytes = io_bytes(io);

	if (io->op == XBD_IO_FLUSH || !bytes)
		return false;
	return first <= r->hi && (io->offset + bytes - 1) / 512 >= r->lo;
}

/*
 * The errno the rules give io, or 0.  n is the io's ordinal among its
 * kind (1 for the first read, ...), counted by the caller.
 */
static int decide(const struct fault_store *s, const struct xbd_io *io, uint64_t n)
{
	unsigned int i;

	for (i = 0; i < s->nrules; i++) {
		const struct fault_rule *r = &s->rules[i];
		bool hit = false;

		switch (r->when) {
		case FW_SECTOR:
			hit = io->op != XBD_IO_FLUSH && touches(io, r);
			break;
		case FW_READ_SECTOR:
			hit = io->op == XBD_IO_READ && touches(io, r);
			break;
		case FW_WRITE_SECTOR:
			hit = io->op == XBD_IO_WRITE && touches(io, r);
			break;
		case FW_READ_AFTER:
			hit = io->op == XBD_IO_READ && n > r->lo;
			break;
		case FW_WRITE_AFTER:
			hit = io->op == XBD_IO_WRITE && n > r->lo;
			break;
		case FW_FLUSH_AFTER:
			hit = io->op == XBD_IO_FLUSH && n > r->lo;
			break;
		case FW_DISCARD:
			hit = io->op == XBD_IO_DISCARD;
			break;
		case FW_ALL:
			hit = true;
			break;
		}
		if (hit)
			return r->err;
	}
	return 0;
}

static uint64_t *counter(struct fault_store *s, enum xbd_io_op op)
{
	switch (op) {
	case XBD_IO_READ: return &s->reads;
	case XBD_IO_WRITE: return &s->writes;
	case XBD_IO_FLUSH: return &s->flushes;
	default: return NULL;
	}
}

/* Count io and decide; eagain rules are handled by the caller. */
static int count_decide(struct fault_store *s, const struct xbd_io *io)
{
	uint64_t *c = counter(s, io->op);
	uint64_t n = c ? __atomic_add_fetch(c, 1, __ATOMIC_RELAXED) : 0;

	return decide(s, io, n);
}

/* A refused io will come again: do not count it twice. */
static void uncount(struct fault_store *s, const struct xbd_io *io)
{
	uint64_t *c = counter(s, io->op);

	if (c)
		__atomic_sub_fetch(c, 1, __ATOMIC_RELAXED);
}

static void fail_io(struct fault_queue *q, struct xbd_io *io, int err)
{
	uint64_t one = 1;

	__atomic_add_fetch(&q->s->injected, 1, __ATOMIC_RELAXED);
	io->result = err;
	io->next = NULL;
	if (q->tail)
		q->tail->next = io;
	else
		q->head = io;
	q->tail = io;
	if (write(q->efd, &one, sizeof(one)) < 0) {
		/* Counter already non-zero: still readable. */
	}
}

/*
 * Faulted ios complete here; runs of the others go to the inner engine.
 * Returns how many of ios were taken, as the contract says.
 */
static int fault_submit(struct xbd_queue *q_base, struct xbd_io **ios, unsigned int n)
{
	struct fault_queue *q = fault_queue_of(q_base);
	struct fault_store *s = q->s;
	unsigned int i = 0, j, k;

	if (!n)
		return 0;
	q->submits++;
	while (i < n) {
		int err = count_decide(s, ios[i]), ret;

		if (err == -EAGAIN) {
			/* Every other call refuses the second half of its batch, once. */
			if ((q->submits & 1) && i >= (n + 1) / 2) {
				uncount(s, ios[i]);
				return (int)i;
			}
			err = 0;
		}
		if (err) {
			fail_io(q, ios[i], err);
			i++;
			continue;
		}
		/* A run of ios that pass, up to the next faulted one. */
		for (j = i + 1; j < n; j++) {
			int e = count_decide(s, ios[j]);

			if (e == -EAGAIN && (q->submits & 1) && j >= (n + 1) / 2)
				e = 1; /* stop the run here */
			else if (e == -EAGAIN)
				e = 0;
			if (e) {
				uncount(s, ios[j]);
				break;
			}
		}
		ret = s->inner->submit(q->iq, ios + i, j - i);
		if (ret < 0 || (unsigned int)ret < j - i) {
			for (k = i + (ret > 0 ? (unsigned int)ret : 0); k < j; k++)
				uncount(s, ios[k]);
			if (ret < 0)
				return i ? (int)i : ret;
			return (int)(i + (unsigned int)ret);
		}
		i = j;
	}
	return (int)n;
}

static int fault_flush(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct fault_queue *q = fault_queue_of(q_base);
	int err = count_decide(q->s, io);

	if (err && err != -EAGAIN) {
		fail_io(q, io, err);
		return 0;
	}
	err = q->s->inner->flush(q->iq, io);
	if (err == -EAGAIN)
		uncount(q->s, io);
	return err;
}

static int fault_discard(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct fault_queue *q = fault_queue_of(q_base);
	int err = decide(q->s, io, 0);

	if (err && err != -EAGAIN) {
		fail_io(q, io, err);
		return 0;
	}
	return q->s->inner->discard(q->iq, io);
}

/* Faulted ios first, then the inner engine's completions. */
static int fault_reap(struct xbd_queue *q_base, struct xbd_io **done, unsigned int max)
{
	struct fault_queue *q = fault_queue_of(q_base);
	unsigned int n = 0;
	uint64_t cnt;
	int ret;

	if (read(q->efd, &cnt, sizeof(cnt)) < 0) {
		/* EAGAIN: nothing faulted since the last reap. */
	}
	while (n < max && q->head) {
		done[n++] = q->head;
		q->head = q->head->next;
	}
	if (!q->head)
		q->tail = NULL;
	else if (write(q->efd, &(uint64_t){ 1 }, sizeof(uint64_t)) < 0) {
		/* Still readable. */
	}
	if (n == max)
		return (int)n;
	ret = q->s->inner->reap(q->iq, done + n, max - n);
	if (ret < 0)
		return n ? (int)n : ret;
	return (int)n + ret;
}

/* What the inner queue takes. */
static unsigned int fault_queue_depth(struct xbd_queue *q_base)
{
	struct fault_queue *q = fault_queue_of(q_base);
	const struct xbd_engine *in = q->s->inner;

	return in->queue_depth ? in->queue_depth(q->iq) : q->depth;
}

/* Faulted ios waiting, or whatever the inner engine says (true if it cannot tell). */
static bool fault_queue_ready(struct xbd_queue *q_base)
{
	struct fault_queue *q = fault_queue_of(q_base);
	const struct xbd_engine *in = q->s->inner;

	return q->head || !in->queue_ready || in->queue_ready(q->iq);
}

const struct xbd_engine xbd_engine_fault = {
	.name = "fault",
	.open = fault_open,
	.close = fault_close,
	.size = fault_size,
	.capabilities = fault_caps,
	.queue_open = fault_queue_open,
	.queue_close = fault_queue_close,
	.queue_fd = fault_queue_fd,
	.submit = fault_submit,
	.flush = fault_flush,
	.discard = fault_discard,
	.reap = fault_reap,
	.queue_depth = fault_queue_depth,
	.queue_ready = fault_queue_ready,
	.export_store = fault_export,
	.import_store = fault_import,
};
