/*
 * engine-rbd.c: disks in a Ceph cluster through librbd.  params is
 * QEMU's spelling:
 *     rbd:POOL[/NAMESPACE]/IMAGE[@SNAP][:KEY=VALUE]...
 * with KEY one of id (the cephx user, default admin), conf (a ceph.conf,
 * else Ceph's default search), keyring, mon_host, or any other Ceph
 * option (rbd_cache, rados_osd_op_timeout, ...), passed to
 * rados_conf_set; "\:" is a colon inside a value.  key= is refused: a
 * secret in params would be in xenstore and in every log line naming
 * the disk.
 *
 * One image handle per disk, shared by its rings: a second handle would
 * take the image's exclusive lock back and forth.  librbd runs
 * completion callbacks in its own threads; each queue gets them through
 * a locked list and an eventfd that the ring thread epolls.  Reads and
 * writes are rbd_aio_readv/writev; a flush is rbd_aio_flush (which also
 * writes back librbd's cache, rbd_cache); discard is rbd_aio_discard,
 * advertised with a 64 KiB granularity since librbd skips the parts of a
 * discard smaller than that (rbd_skip_partial_discard) and promising no
 * zeroing; a durable write (FUA) is the write then a flush, as librbd has
 * no vectored write with flags.  cache = writethrough sets librbd's
 * cache to write through (rbd_cache_max_dirty = 0) unless params sets
 * it.  A size change (rbd resize) reaches the backend through librbd's
 * update watch; a snapshot (@SNAP) is opened read-only and served so.
 * A disk served read-write holds the image's exclusive lock in librbd's
 * exclusive mode (image_lock), unless shared-write asks otherwise.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "blkback/engines/engine.h"
#include "blkback/engines/engine-remote.h"
#include "blkback/log/log.h"

/* librbd skips the parts of a discard below this (rbd_discard_granularity_bytes). */
#define RBD_DISCARD_GRANULARITY 65536
#define RBD_MAX_KEYS 16

struct rbd_store {
	struct xbd_store base;  /* first: what the engine table passes (rbd_store_of) */
	rados_t cluster;
	rados_ioctx_t ioctx;
	rbd_image_t image;
	bool snapshot;
	char what[256];             /* pool/image@snap, for log lines */
	uint64_t watch;
	bool watching;
	void (*changed)(void *);    /* the backend's resize hook */
	void *changed_arg;
};

struct rbd_queue {
	struct xbd_queue base;  /* first: what the engine table passes (rbd_queue_of) */
	struct rbd_store *s;
	int efd;
	pthread_mutex_t lock;
	struct xbd_io *done_head, *done_tail; /* filled by librbd's threads */
	bool done_any;                        /* done_head is set (read without the lock) */
};

/* The engine table passes the bases; each is the first member of ours. */
static inline struct rbd_store *rbd_store_of(struct xbd_store *b)
{
	return (struct rbd_store *)b;
}

static inline struct rbd_queue *rbd_queue_of(struct xbd_queue *b)
{
	return (struct rbd_queue *)b;
}

/* Kept in io->priv while librbd has the io. */
struct rbd_priv {
	struct rbd_queue *q;
	bool then_flush;  /* a durable write: its flush is still to come */
};
_Static_assert(sizeof(struct rbd_priv) <= sizeof(((struct xbd_io *)0)->priv),
	       "struct xbd_io has no room for the RBD state");

static struct rbd_priv *priv(struct xbd_io *io)
{
	return (struct rbd_priv *)io->priv;
}

/*
 * librbd and librados are loaded when the first rbd: disk is opened, not
 * linked: they add about 25 MB of memory and 60 ms of start-up (C++
 * static initialisers) to a daemon that may never serve an RBD disk.
 */
#define RBD_FNS(X) \
	X(rados_create) \
	X(rados_conf_read_file) \
	X(rados_conf_set) \
	X(rados_connect) \
	X(rados_ioctx_create) \
	X(rados_ioctx_set_namespace) \
	X(rados_ioctx_destroy) \
	X(rados_shutdown) \
	X(rbd_open) \
	X(rbd_open_read_only) \
	X(rbd_close) \
	X(rbd_get_features) \
	X(rbd_lock_acquire) \
	X(rbd_update_watch) \
	X(rbd_update_unwatch) \
	X(rbd_get_size) \
	X(rbd_aio_create_completion) \
	X(rbd_aio_get_return_value) \
	X(rbd_aio_release) \
	X(rbd_aio_readv) \
	X(rbd_aio_writev) \
	X(rbd_aio_flush) \
	X(rbd_aio_discard) \

static struct {
#define RBD_FN_PTR(f) __typeof__(f) *f;
	RBD_FNS(RBD_FN_PTR)
#undef RBD_FN_PTR
} L;
static int lib_err;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static void lib_load(void)
{
	void *rados = dlopen("librados.so.2", RTLD_NOW | RTLD_GLOBAL);
	void *rbd = rados ? dlopen("librbd.so.1", RTLD_NOW | RTLD_LOCAL) : NULL;

	if (!rados || !rbd) {
		xbd_log(XBD_LOG_ERR, "rbd: cannot load librbd (Debian package librbd1): %s", dlerror());
		lib_err = -ENOSYS;
		return;
	}
#define RBD_FN_LOAD(f) \
	if (!lib_err && !(*(void **)&L.f = dlsym(!strncmp(#f, "rados", 5) ? rados : rbd, #f))) { \
		xbd_log(XBD_LOG_ERR, "rbd: librbd has no %s: too old", #f); \
		lib_err = -ENOSYS; \
	}
	RBD_FNS(RBD_FN_LOAD)
#undef RBD_FN_LOAD
}

/* ---- params ---- */

/*
 * Split target at unescaped colons into fields (in place; "\:" becomes
 * ":").  Returns the number of fields, or -E2BIG.
 */
static int split_fields(char *t, char **f, unsigned int max)
{
	unsigned int n = 0;
	char *r = t, *w = t;

	f[n++] = w;
	while (*r) {
		if (r[0] == '\\' && r[1] == ':') {
			*w++ = ':';
			r += 2;
		} else if (*r == ':') {
			*w++ = '\0';
			r++;
			if (n == max)
				return -E2BIG;
			f[n++] = w;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return (int)n;
}

/* "pool[/ns]/image[@snap]" into its parts (in place). */
static int parse_spec(char *spec, char **pool, char **ns, char **image, char **snap)
{
	char *at = strchr(spec, '@'), *s1, *s2;

	*snap = NULL;
	if (at) {
		*at = '\0';
		*snap = at + 1;
		if (!**snap)
			return -EINVAL;
	}
	s1 = strchr(spec, '/');
	if (!s1)
		return -EINVAL;
	*s1 = '\0';
	*pool = spec;
	s2 = strchr(s1 + 1, '/');
	if (s2) {
		*s2 = '\0';
		*ns = s1 + 1;
		*image = s2 + 1;
	} else {
		*ns = NULL;
		*image = s1 + 1;
	}
	if (!**pool || !**image || strchr(*image, '/') || (*ns && !**ns))
		return -EINVAL;
	return 0;
}

/* ---- the store ---- */

static void update_cb(void *arg)
{
	struct rbd_store *s = arg;
	void (*changed)(void *) = __atomic_load_n(&s->changed, __ATOMIC_ACQUIRE);

	/* librbd's thread: the hook only flags the disk and wakes the main loop. */
	if (changed)
		changed(s->changed_arg);
}

static int fail(const char *what, const char *why, int err)
{
	xbd_log(XBD_LOG_ERR, "rbd:%s: %s: %s", what, why, strerror(-err));
	return err;
}

/* rbd:POOL[/NAMESPACE]/IMAGE[@SNAP][:KEY=VALUE]... as parsed (pointers into the copy it was cut from). */
struct rbd_spec {
	char *pool, *ns, *image, *snap;
	char *f[RBD_MAX_KEYS + 1]; /* f[1..n): the KEY=VALUE fields, passed to Ceph but id and conf */
	int n;
	const char *id, *conf;   /* the client's name and the Ceph configuration file, or NULL */
	bool max_dirty_set, mount_timeout_set; /* keys that replace our defaults */
};

/* Cut copy (target's) into sp: 0, or -EINVAL (said why). */
static int spec_parse(char *copy, const char *target, struct rbd_spec *sp)
{
	sp->n = split_fields(copy, sp->f, RBD_MAX_KEYS + 1);
	if (sp->n < 0 || parse_spec(sp->f[0], &sp->pool, &sp->ns, &sp->image, &sp->snap)) {
		xbd_log(XBD_LOG_ERR, "rbd:%s: not rbd:POOL[/NAMESPACE]/IMAGE[@SNAP][:KEY=VALUE]... "
			"(at most %d keys)", target, RBD_MAX_KEYS);
		return -EINVAL;
	}
	for (int i = 1; i < sp->n; i++) {
		char *eq = strchr(sp->f[i], '=');

		if (!eq || eq == sp->f[i]) {
			xbd_log(XBD_LOG_ERR, "rbd:%s: '%s' is not KEY=VALUE", target, sp->f[i]);
			return -EINVAL;
		}
		*eq = '\0';
		if (!strcmp(sp->f[i], "key")) {
			xbd_log(XBD_LOG_ERR, "rbd:%s/%s: key= would put the secret in xenstore and "
				"the logs; name a keyring= file instead", sp->pool, sp->image);
			return -EINVAL;
		}
		if (!strcmp(sp->f[i], "id"))
			sp->id = eq + 1;
		else if (!strcmp(sp->f[i], "conf"))
			sp->conf = eq + 1;
		sp->max_dirty_set |= !strcmp(sp->f[i], "rbd_cache_max_dirty");
		sp->mount_timeout_set |= !strcmp(sp->f[i], "client_mount_timeout");
		*eq = '=';
	}
	return 0;
}

/*
 * s's cluster handle, configured (the file, our defaults, the keys) and
 * connected: 0, or -errno with nothing left to release.
 */
static int cluster_connect(struct rbd_store *s, const char *target, const struct rbd_spec *sp,
			   const struct xbd_disk_opts *o)
{
	int err = L.rados_create(&s->cluster, sp->id ? sp->id : "admin");

	if (err) {
		fail(s->what, "rados_create", err);
		return err;
	}
	err = L.rados_conf_read_file(s->cluster, sp->conf);
	if (err && sp->conf) {
		fail(s->what, "cannot read the Ceph configuration", err);
		goto out_shutdown;
	}
	/* Without a monitor, fail in 10 s instead of Ceph's 300. */
	if (!sp->mount_timeout_set)
		L.rados_conf_set(s->cluster, "client_mount_timeout", "10");
	if (o->cache == XBD_CACHE_WRITETHROUGH && !sp->max_dirty_set)
		L.rados_conf_set(s->cluster, "rbd_cache_max_dirty", "0");
	for (int i = 1; i < sp->n; i++) {
		char *eq = strchr(sp->f[i], '=');

		*eq = '\0';
		if (strcmp(sp->f[i], "id") && strcmp(sp->f[i], "conf")) {
			err = L.rados_conf_set(s->cluster, sp->f[i], eq + 1);
			if (err) {
				xbd_log(XBD_LOG_ERR, "rbd:%s: Ceph refuses %s = %s: %s", s->what,
					sp->f[i], eq + 1, strerror(-err));
				goto out_shutdown;
			}
		}
	}
	err = L.rados_connect(s->cluster);
	if (err) {
		xbd_log(xbd_open_failure_level(target, err), "rbd:%s: cannot connect to the Ceph "
			"cluster: %s", s->what, strerror(-err));
		xbd_open_failure_note(target, err);
		goto out_shutdown;
	}
	return 0;
out_shutdown:
	L.rados_shutdown(s->cluster);
	return err;
}

/*
 * A disk served read-write without sharing asked for (shared-write): the
 * image's exclusive lock, taken in librbd's exclusive mode, which never
 * hands it to another client that asks (librbd's default passes it back
 * and forth between writers, which would let two guests write one image
 * in turn).  Another client holding it that way (another xbd-back, krbd's
 * "exclusive" map option): -EBUSY.  An image without the exclusive-lock
 * feature cannot be locked: served, with a warning.
 */
static int image_lock(struct rbd_store *s)
{
	uint64_t features = 0;
	int err = L.rbd_get_features(s->image, &features);

	if (!err && !(features & RBD_FEATURE_EXCLUSIVE_LOCK)) {
		xbd_log(XBD_LOG_WARNING, "rbd:%s: the image has no exclusive-lock feature: nothing "
			"keeps another client from writing it too (rbd feature enable ... "
			"exclusive-lock)", s->what);
		return 0;
	}
	err = L.rbd_lock_acquire(s->image, RBD_LOCK_MODE_EXCLUSIVE);
	if (err) {
		xbd_log(XBD_LOG_VERBOSE, "rbd:%s: its exclusive lock: %s", s->what, strerror(-err));
		return -EBUSY;
	}
	return 0;
}

/* The pool's I/O context and the image (read-only for a snapshot), watched for resizes: 0 or -errno. */
static int image_open(struct rbd_store *s, const struct rbd_spec *sp, bool readonly,
		      bool shared)
{
	int err = L.rados_ioctx_create(s->cluster, sp->pool, &s->ioctx);

	if (err) {
		xbd_log(XBD_LOG_ERR, "rbd:%s: no pool '%s': %s", s->what, sp->pool, strerror(-err));
		return err;
	}
	if (sp->ns)
		L.rados_ioctx_set_namespace(s->ioctx, sp->ns);
	s->snapshot = sp->snap != NULL;
	if (readonly || sp->snap)
		err = L.rbd_open_read_only(s->ioctx, sp->image, &s->image, sp->snap);
	else
		err = L.rbd_open(s->ioctx, sp->image, &s->image, NULL);
	if (err) {
		xbd_log(XBD_LOG_ERR, "rbd:%s: cannot open the image: %s", s->what, strerror(-err));
		L.rados_ioctx_destroy(s->ioctx);
		return err;
	}
	if (!readonly && !sp->snap && !shared && (err = image_lock(s))) {
		L.rbd_close(s->image);
		L.rados_ioctx_destroy(s->ioctx);
		return err;
	}
	err = L.rbd_update_watch(s->image, &s->watch, update_cb, s);
	if (err)
		xbd_log(XBD_LOG_ERR, "rbd:%s: no update watch (%s): a resize needs SIGHUP",
			s->what, strerror(-err));
	s->watching = !err;
	return 0;
}

/* Connect to the cluster, open the image (read-only for a snapshot). */
static int rbd_engine_open(const char *target, bool readonly, const struct xbd_disk_opts *o,
			   struct xbd_store **out)
{
	char *copy = strdup(target);
	struct rbd_spec sp = { 0 };
	struct rbd_store *s = NULL;
	int err;

	pthread_once(&lib_once, lib_load);
	if (lib_err)
		return lib_err;
	/* A cluster that did not answer a second ago: fail at once (said already). */
	err = xbd_open_failure_recent(target, 1000);
	if (err) {
		free(copy);
		return err;
	}
	if (!copy)
		return -ENOMEM;
	err = spec_parse(copy, target, &sp);
	if (!err && !(s = calloc(1, sizeof(*s))))
		err = -ENOMEM;
	if (err)
		goto out;
	snprintf(s->what, sizeof(s->what), "%s/%s%s%s%s%s", sp.pool, sp.ns ? sp.ns : "",
		 sp.ns ? "/" : "", sp.image, sp.snap ? "@" : "", sp.snap ? sp.snap : "");
	err = cluster_connect(s, target, &sp, o);
	if (!err) {
		err = image_open(s, &sp, readonly, o->shared_write);
		if (err)
			L.rados_shutdown(s->cluster);
	}
	if (err) {
		free(s);
		goto out;
	}
	s->base.eng = &xbd_engine_rbd;
	*out = &s->base;
out:
	free(copy);
	return err;
}

static void rbd_engine_close(struct xbd_store *s_base)
{
	struct rbd_store *s = rbd_store_of(s_base);

	if (s->watching)
		L.rbd_update_unwatch(s->image, s->watch);
	L.rbd_close(s->image);
	L.rados_ioctx_destroy(s->ioctx);
	L.rados_shutdown(s->cluster);
	free(s);
}

/* The size now (librbd refreshes it after a resize notification). */
static int rbd_engine_size(struct xbd_store *s_base, uint64_t *bytes)
{
	struct rbd_store *s = rbd_store_of(s_base);

	return L.rbd_get_size(s->image, bytes);
}

static void rbd_engine_caps(struct xbd_store *s_base, struct xbd_engine_caps *c)
{
	struct rbd_store *s = rbd_store_of(s_base);

	memset(c, 0, sizeof(*c));
	c->logical_block = 512;
	c->physical_block = 4096;
	c->discard = !s->snapshot;
	c->discard_granularity = RBD_DISCARD_GRANULARITY;
	c->readonly_only = s->snapshot;
}

static void rbd_engine_watch_size(struct xbd_store *s_base, void (*changed)(void *), void *arg)
{
	struct rbd_store *s = rbd_store_of(s_base);

	s->changed_arg = arg;
	__atomic_store_n(&s->changed, changed, __ATOMIC_RELEASE);
}

/* ---- queues ---- */

static int rbd_queue_open(struct xbd_store *s_base, unsigned int depth, struct xbd_queue **out)
{
	struct rbd_store *s = rbd_store_of(s_base);
	struct rbd_queue *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	q->s = s;
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0) {
		int err = -errno;

		free(q);
		return err;
	}
	pthread_mutex_init(&q->lock, NULL);
	q->base.eng = &xbd_engine_rbd;
	*out = &q->base;
	return 0;
}

static void rbd_queue_close(struct xbd_queue *q_base)
{
	struct rbd_queue *q = rbd_queue_of(q_base);

	close(q->efd);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

static int rbd_queue_fd(struct xbd_queue *q_base)
{
	struct rbd_queue *q = rbd_queue_of(q_base);

	return q->efd;
}

static bool rbd_queue_ready(struct xbd_queue *q_base)
{
	struct rbd_queue *q = rbd_queue_of(q_base);

	return __atomic_load_n(&q->done_any, __ATOMIC_ACQUIRE);
}

static void done(struct rbd_queue *q, struct xbd_io *io, int result)
{
	uint64_t one = 1;

	io->result = result;
	io->next = NULL;
	pthread_mutex_lock(&q->lock);
	if (q->done_tail)
		q->done_tail->next = io;
	else
		q->done_head = io;
	q->done_tail = io;
	__atomic_store_n(&q->done_any, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->lock);
	if (write(q->efd, &one, sizeof(one)) < 0) {
		/* Counter already non-zero: still readable. */
	}
}

static int start(struct rbd_queue *q, struct xbd_io *io);

/* librbd's completion callback, in one of its threads. */
static void completion_cb(rbd_completion_t c, void *arg)
{
	struct xbd_io *io = arg;
	struct rbd_queue *q = priv(io)->q;
	ssize_t r = L.rbd_aio_get_return_value(c);

	L.rbd_aio_release(c);
	if (r >= 0 && priv(io)->then_flush) {
		/* The durable write's second half (librbd may be called from its callbacks). */
		int err;

		priv(io)->then_flush = false;
		io->op = XBD_IO_FLUSH;
		err = start(q, io);
		io->op = XBD_IO_WRITE;
		if (!err)
			return;
		r = err;
	}
	/* A read or write completes whole or fails: librbd returns the length or an error. */
	done(q, io, r < 0 ? (int)r : 0);
}

/* Hand one io to librbd; its completion comes back through completion_cb. */
static int start(struct rbd_queue *q, struct xbd_io *io)
{
	struct rbd_store *s = q->s;
	rbd_completion_t c;
	int err;

	priv(io)->q = q;
	err = L.rbd_aio_create_completion(io, completion_cb, &c);
	if (err)
		return err;
	switch (io->op) {
	case XBD_IO_READ:
		err = L.rbd_aio_readv(s->image, io->iov, (int)io->iovcnt, io->offset, c);
		break;
	case XBD_IO_WRITE:
		err = L.rbd_aio_writev(s->image, io->iov, (int)io->iovcnt, io->offset, c);
		break;
	case XBD_IO_FLUSH:
		err = L.rbd_aio_flush(s->image, c);
		break;
	case XBD_IO_DISCARD:
		err = L.rbd_aio_discard(s->image, io->offset, io->len, c);
		break;
	}
	if (err)
		L.rbd_aio_release(c);
	return err;
}

static int rbd_submit(struct xbd_queue *q_base, struct xbd_io **ios, unsigned int n)
{
	struct rbd_queue *q = rbd_queue_of(q_base);
	unsigned int i;

	for (i = 0; i < n; i++) {
		int err;

		priv(ios[i])->then_flush = ios[i]->op == XBD_IO_WRITE && ios[i]->dsync;
		err = start(q, ios[i]);
		if (err)
			return i ? (int)i : err;
	}
	return (int)n;
}

static int rbd_flush_io(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct rbd_queue *q = rbd_queue_of(q_base);

	priv(io)->then_flush = false;
	return start(q, io);
}

static int rbd_discard_io(struct xbd_queue *q_base, struct xbd_io *io)
{
	struct rbd_queue *q = rbd_queue_of(q_base);

	priv(io)->then_flush = false;
	return start(q, io);
}

static int rbd_reap(struct xbd_queue *q_base, struct xbd_io **out, unsigned int max)
{
	struct rbd_queue *q = rbd_queue_of(q_base);
	unsigned int n = 0;
	uint64_t cnt;

	if (read(q->efd, &cnt, sizeof(cnt)) < 0) {
		/* Nothing signalled since the last reap. */
	}
	pthread_mutex_lock(&q->lock);
	while (n < max && q->done_head) {
		out[n++] = q->done_head;
		q->done_head = q->done_head->next;
	}
	if (!q->done_head) {
		q->done_tail = NULL;
		__atomic_store_n(&q->done_any, false, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&q->lock);
	return (int)n;
}

const struct xbd_engine xbd_engine_rbd = {
	.name = "rbd",
	.open_remote = true,
	.open = rbd_engine_open,
	.close = rbd_engine_close,
	.size = rbd_engine_size,
	.capabilities = rbd_engine_caps,
	.queue_open = rbd_queue_open,
	.queue_close = rbd_queue_close,
	.queue_fd = rbd_queue_fd,
	.submit = rbd_submit,
	.flush = rbd_flush_io,
	.discard = rbd_discard_io,
	.reap = rbd_reap,
	.queue_ready = rbd_queue_ready,
	.watch_size = rbd_engine_watch_size,
};
