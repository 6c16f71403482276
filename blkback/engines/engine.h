/*
 * engine.h: storage engines behind a small table of callbacks.  The data
 * path only ever sees struct xbd_engine; aio (raw files and block devices
 * through libaio) and null (completes at once, for protocol benchmarks)
 * nbd (NBD servers through libnbd), rbd (Ceph through librbd) and uring
 * (files and block devices through io_uring) are the engines today; others
 * plug in by filling another table.
 *
 * A store is one opened disk; a queue is one ring thread's private
 * submission context with a file descriptor that becomes readable when
 * completions are waiting.  A queue is used by one thread only.
 */
#ifndef XBD_BACK_ENGINE_H
#define XBD_BACK_ENGINE_H

#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "blkback/settings/options.h"

enum xbd_io_op { XBD_IO_READ, XBD_IO_WRITE, XBD_IO_FLUSH, XBD_IO_DISCARD };

/* One storage operation, owned by the caller until it is reaped. */
struct xbd_io {
	enum xbd_io_op op;
	bool dsync;              /* write: durable when complete (RWF_DSYNC) */
	bool secure;             /* discard: secure erase */
	uint64_t offset;         /* bytes */
	uint64_t len;            /* discard: bytes */
	const struct iovec *iov; /* read/write buffers */
	unsigned int iovcnt;
	int result;              /* out: 0 or a negative errno */
	void *opaque;            /* the caller's */
	struct xbd_io *next;     /* engine-private list link */
	alignas(16) unsigned char priv[80]; /* engine-private (an iocb for aio) */
};

/* What a store can do, for the keys the backend advertises. */
struct xbd_engine_caps {
	unsigned int logical_block;  /* sector-size */
	unsigned int physical_block; /* physical-sector-size */
	bool discard;
	bool discard_secure;
	unsigned int discard_granularity; /* bytes */
	unsigned int discard_alignment;   /* bytes */
	bool readonly_only;          /* storage cannot be written at all */
	unsigned int max_queues;     /* most queues (rings) the store takes; 0 = any */
	bool page_cache;             /* a file or device read and written through dom0's page cache */
};

struct xbd_engine;

/*
 * An open store and one of its queues as the engine table passes them.
 * Each engine's own (struct aio_store, struct nbd_queue, ...) embeds one
 * of these first, so that every name has one layout, and says which
 * engine made it.
 */
struct xbd_store {
	const struct xbd_engine *eng;
};

struct xbd_queue {
	const struct xbd_engine *eng;
};

/*
 * An open store described for another process of the same binary
 * (xbd-back's workers serve their domain's disks from what the main
 * process opened): the engine's own bytes, and up to
 * XBD_STORE_EXPORT_FDS file descriptors they refer to, passed beside.
 */
#define XBD_STORE_EXPORT_BYTES 512
#define XBD_STORE_EXPORT_FDS 2
struct xbd_store_export {
	char engine[16];         /* the engine's name */
	uint32_t len;            /* bytes of data used */
	uint32_t nfds;           /* fds that go with it */
	unsigned char data[XBD_STORE_EXPORT_BYTES];
};

struct xbd_engine {
	const char *name;
	/*
	 * open() gets the whole params, a URI whose scheme is name or
	 * name+TRANSPORT (nbd://..., nbd+unix:///...), instead of what
	 * follows "name:".
	 */
	bool uri;
	/*
	 * Its open talks to a server that may never answer (a handshake, a
	 * monitor): the control plane runs it on a thread of its own
	 * (control/storage.c), never in the main loop.
	 */
	bool open_remote;
	/* open() takes the path of a file or block device (format-check reads its header). */
	bool file;
	/* Open target (what follows "name:" in params); readonly as mode says. */
	int (*open)(const char *target, bool readonly, const struct xbd_disk_opts *o,
		    struct xbd_store **out);
	/* Release a store; every queue must already be closed. */
	void (*close)(struct xbd_store *s);
	/* Current size in bytes (re-read for online resize). */
	int (*size)(struct xbd_store *s, uint64_t *bytes);
	/* What the store supports. */
	void (*capabilities)(struct xbd_store *s, struct xbd_engine_caps *caps);
	/* A submission context for up to depth ios in flight. */
	int (*queue_open)(struct xbd_store *s, unsigned int depth, struct xbd_queue **out);
	/* Close a queue with nothing in flight. */
	void (*queue_close)(struct xbd_queue *q);
	/* Readable when completions may be waiting (cleared by reap). */
	int (*queue_fd)(struct xbd_queue *q);
	/*
	 * Start reads and writes, in one kernel call where the engine can.
	 * Returns how many were accepted (the rest must be submitted again
	 * later), or -EAGAIN when none could be, or another negative errno.
	 */
	int (*submit)(struct xbd_queue *q, struct xbd_io **ios, unsigned int n);
	/* Start a flush: complete once every write completed before it is durable. */
	int (*flush)(struct xbd_queue *q, struct xbd_io *io);
	/* Start a discard of io->offset, io->len. */
	int (*discard)(struct xbd_queue *q, struct xbd_io *io);
	/*
	 * Collect up to max finished ios without blocking; io->result is set.
	 * Call again while it returns max.
	 */
	int (*reap)(struct xbd_queue *q, struct xbd_io **done, unsigned int max);
	/*
	 * Optional: how many ios the queue really takes in flight (at most
	 * the depth asked for; less when the host is short of them).
	 */
	unsigned int (*queue_depth)(struct xbd_queue *q);
	/*
	 * Optional: false if reap would find nothing, decided from memory
	 * alone (no system call), so that polling costs no syscalls while
	 * nothing completes.  A false true is harmless.
	 */
	bool (*queue_ready)(struct xbd_queue *q);
	/*
	 * Optional: the caller watches queue_fd edge-triggered (EPOLLET), so
	 * that reap need not clear it; an engine whose fd is an eventfd
	 * written at each completion then saves a read per reap.  Not called
	 * by a wrapping engine that watches the fd level-triggered.
	 */
	void (*queue_edge)(struct xbd_queue *q);
	/*
	 * Optional: call changed(arg) when the size may have changed (from
	 * any thread; it must only flag and wake).  Set once after open; no
	 * call comes after close returns.
	 */
	void (*watch_size)(struct xbd_store *s, void (*changed)(void *arg), void *arg);
	/*
	 * Optional, both or neither: describe an open store for another
	 * process (fds[] receives the store's own descriptors, not
	 * duplicates; out->engine is set by the caller), and re-create a
	 * store there from such a description (taking the fds, which are
	 * closed on failure).  An engine without them (its library keeps
	 * connections, threads or files of its own) serves its disks in
	 * the process that opened them.
	 */
	int (*export_store)(struct xbd_store *s, struct xbd_store_export *out, int *fds);
	int (*import_store)(const struct xbd_store_export *in, const int *fds,
			    struct xbd_store **out);
	/*
	 * Optional: 0 when this host can run the engine, else a negative
	 * errno with the reason in why; fallback then serves the disk
	 * (xbd_engine_choose logs it).
	 */
	int (*available)(char *why, size_t len);
	const struct xbd_engine *fallback;
	/*
	 * Optional: every read or write buffer inside base..base+len (the
	 * ring's grant-copy bounce pool, page-aligned) stays valid until
	 * the queue is closed, so the engine may register it with the kernel.
	 */
	void (*queue_buffers)(struct xbd_queue *q, void *base, size_t len);
	/*
	 * Optional: the ring thread's whole wait in one system call.  Wait
	 * up to timeout_ms (-1: no limit, 0: do not block) for a completion
	 * (queue_ready then says so) or for fds[i] to poll readable, which
	 * sets bit i of *ready.  From its first call on, the engine may keep
	 * what submit, flush and discard are given until the next wait,
	 * which submits it in the same call: a wait with nfds = 0 and
	 * timeout 0 only submits.  Returns 0, -ETIME or another negative
	 * errno (nothing is lost: a later wait submits what is left).
	 * Only for a ring thread that calls it; a wrapping engine does not.
	 */
	int (*wait)(struct xbd_queue *q, const int *fds, unsigned int nfds, int timeout_ms,
		    unsigned int *ready);
};

extern const struct xbd_engine xbd_engine_aio;
extern const struct xbd_engine xbd_engine_null;
extern const struct xbd_engine xbd_engine_fault; /* tests: engine-fault.c */
extern const struct xbd_engine xbd_engine_nbd;   /* NBD URIs through libnbd */
extern const struct xbd_engine xbd_engine_rbd;   /* rbd:POOL/IMAGE through librbd */
#ifdef HAVE_LIBURING
extern const struct xbd_engine xbd_engine_uring; /* files and block devices through io_uring */
#endif

/*
 * The engine a params value names: "null:SIZE", "aio:PATH",
 * "rbd:POOL/IMAGE[@SNAP][:KEY=VALUE...]", an NBD URI
 * (nbd://HOST[:PORT]/EXPORT, nbd+unix:///EXPORT?socket=PATH) or a plain
 * path (aio).  *target points into params.  NULL if the prefix names no
 * engine.
 */
const struct xbd_engine *xbd_engine_for(const char *params, const char **target);
/* The engine called name ("aio", "null", ...), or NULL. */
const struct xbd_engine *xbd_engine_by_name(const char *name);
/*
 * Describe s (of engine e) for another process: -EOPNOTSUPP when e cannot
 * be served elsewhere.  And re-create it from in (taking fds).
 */
int xbd_store_export(const struct xbd_engine *e, struct xbd_store *s,
		     struct xbd_store_export *out, int *fds);
int xbd_store_import(const struct xbd_store_export *in, const int *fds,
		     const struct xbd_engine **e, struct xbd_store **out);

/*
 * The engine that serves a disk: xbd_engine_for, with a plain path served
 * by the disk's `engine` setting (o->engine), and an engine this host
 * cannot run replaced by its fallback, with one log line naming why.
 */
const struct xbd_engine *xbd_engine_choose(const char *params, const struct xbd_disk_opts *o,
					   const char **target);

/*
 * params (or its target) for a log line: the value of every secret key
 * (key=, password=, secret=) replaced by "***".  Returns buf.
 */
#define XBD_PARAMS_LOG_MAX 512
const char *xbd_params_for_log(const char *params, char *buf, size_t len);

#endif /* XBD_BACK_ENGINE_H */
