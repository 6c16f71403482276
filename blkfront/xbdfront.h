/*
 * xbdfront.h: libxbdfront, a userspace blkfront that drives any blkif
 * backend (xbd-back, Linux blkback, QEMU qdisk).
 *
 * The API is small on purpose:
 *   xbd_front_open()    attach to a vbd the toolstack wrote, negotiate, connect
 *   xbd_front_info()    what the backend offers
 *   xbd_front_submit()  asynchronous read/write/flush/discard with a callback
 *   xbd_front_fd()      one fd to poll; xbd_front_process() runs what is ready
 *   xbd_front_run()     poll + process, for simple loops
 *   xbd_front_io()      a blocking helper for single-threaded tools
 *   xbd_front_close()   Closing -> Closed handshake and teardown
 *
 * Threads: xbd_front_submit() may be called from any number of threads at
 * once (each queue has its own lock).  xbd_front_process()/run()/io() must
 * run in one thread at a time (the event loop thread: it owns the xenstore
 * connection).  Callbacks run in that thread with no library lock held, so
 * they may submit again.
 *
 * Functions return 0 (or a count) or a negative errno value.
 */
#ifndef XBD_FRONT_H
#define XBD_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "platform/platform.h"
#include "ring/ring.h"

struct xbd_front;

#define XBD_FRONT_PATH_MAX 256

struct xbd_front_opts {
	enum xbd_platform_kind platform; /* XBD_PLATFORM_AUTO by default */
	uint32_t devid;            /* device/vbd/<devid>; 0: use vdev */
	const char *vdev;          /* "xvdb", "51728"; used when devid == 0 */
	unsigned int max_queues;   /* 0: min(backend, CPUs, 4) */
	int ring_order;            /* -1: the backend's maximum; else capped by it */
	int persistent;            /* -1: if offered; 0: never; 1: if offered */
	int indirect_segs;         /* -1: min(backend, 32) as Linux; 0: never */
	enum xbd_abi abi;          /* protocol written; NATIVE by default */
	int timeout_ms;            /* how long open waits for the backend, and close at most (10000) */
	unsigned int max_grants;   /* data pages granted at once, all queues (0: 768) */
	bool reconnect;            /* follow a backend restart (default true) */
	/*
	 * Attach even though another frontend holds the vbd (its state
	 * Initialised/Connected and its owner process alive, or no owner
	 * recorded: a kernel blkfront).  Recovery only: the other one is cut off.
	 */
	bool force;
};

/* Fill opts with the defaults described above. */
void xbd_front_opts_init(struct xbd_front_opts *opts);

/* What the backend offers, after negotiation. */
struct xbd_front_info {
	uint64_t sectors;          /* size in 512-byte sectors */
	uint64_t size;             /* bytes */
	unsigned int sector_size;  /* logical block size */
	unsigned int physical_sector_size;
	unsigned int vdisk_info;   /* VDISK_* bits of `info` */
	bool readonly;
	bool cdrom;
	bool flush;                /* feature-flush-cache in use */
	bool barrier;              /* feature-barrier in use (no flush-cache) */
	bool discard;
	bool discard_secure;
	unsigned int discard_granularity;
	unsigned int discard_alignment;
	bool persistent;           /* persistent grants in use */
	unsigned int indirect_segs;/* segments per indirect request; 0: none */
	unsigned int max_segs;     /* segments per request actually used */
	unsigned int nr_queues;
	unsigned int ring_order;
	unsigned int ring_entries; /* per queue */
	enum xbd_abi abi;
	uint32_t domid;            /* ours */
	uint32_t backend_domid;
	uint32_t devid;
	char backend_path[XBD_FRONT_PATH_MAX];
	char frontend_path[XBD_FRONT_PATH_MAX];
};

enum xbd_front_op {
	XBD_FRONT_READ = 0,
	XBD_FRONT_WRITE,
	XBD_FRONT_FLUSH,
	XBD_FRONT_DISCARD,
};

/* Request flags. */
#define XBD_FRONT_FUA      0x1u /* write: durable on completion */
#define XBD_FRONT_SECURE   0x2u /* discard: BLKIF_DISCARD_SECURE */
/*
 * Skip the library's own checks (read-only, feature offered, range) and
 * send the request as is: for conformance tests of the backend.
 */
#define XBD_FRONT_NOCHECK  0x4u

/* Called once per submitted request: result 0 or a negative errno. */
typedef void (*xbd_front_cb)(void *arg, int result);

struct xbd_front_req {
	enum xbd_front_op op;
	unsigned int flags;
	int queue;            /* -1: the library picks; else 0..nr_queues-1 */
	uint64_t offset;      /* bytes, multiple of sector_size */
	uint64_t len;         /* bytes, multiple of sector_size (flush: 0) */
	void *buf;            /* read: destination; write: source (copied at submit) */
	/*
	 * Or a vector (when iov is not NULL, buf is ignored and len must be
	 * the sum of the lengths).  A read's vector and buffers must stay
	 * valid until its callback; a write's only until submit returns.
	 */
	const struct iovec *iov;
	int iovcnt;
	xbd_front_cb cb;
	void *arg;
};

/* Statistics since open (monotonic counters). */
struct xbd_front_stats {
	uint64_t requests;     /* ring requests pushed */
	uint64_t indirect;     /* of which indirect */
	uint64_t responses;
	uint64_t notifies;     /* event channel notifications sent */
	uint64_t reconnects;
	uint64_t resubmitted;  /* ring requests sent again after a reconnect */
	uint64_t grants;       /* xbd_gnt_share calls for data pages */
	uint64_t deferred_unshare; /* grants still mapped at response time */
};

/*
 * -EBUSY (with a line on stderr) when another frontend holds the vbd:
 * see opts.force.
 */
int xbd_front_open(const struct xbd_front_opts *opts, struct xbd_front **out);
/*
 * Closing -> Closed handshake; fails what is still in flight with
 * -ESHUTDOWN.  Takes at most timeout_ms in all: a backend that does not
 * answer Closing (or is gone) is not waited for a second time.
 */
void xbd_front_close(struct xbd_front *f);

void xbd_front_info(const struct xbd_front *f, struct xbd_front_info *out);
void xbd_front_stats(const struct xbd_front *f, struct xbd_front_stats *out);

/*
 * Queue a request.  It is split into ring requests as the negotiated
 * segment limits need; the callback runs once, when all have completed.
 * Write data is copied before this returns.  -EINVAL for a misaligned
 * or out-of-range request, -EROFS for a write to a read-only disk,
 * -EOPNOTSUPP for discard when not offered, -ENODEV after the device
 * went away, -EPROTO after a protocol error.
 */
int xbd_front_submit(struct xbd_front *f, const struct xbd_front_req *req);

/* An epoll fd, readable when xbd_front_process() has work. */
int xbd_front_fd(const struct xbd_front *f);

/*
 * Consume responses, run callbacks, follow backend state changes
 * (reconnect).  Non-blocking.  Returns the number of requests completed,
 * -EPROTO after a protocol error by the backend (the device is then
 * disconnected and everything in flight failed), -ENODEV when the
 * device was removed.
 */
int xbd_front_process(struct xbd_front *f);

/* Wait up to timeout_ms (-1: forever) for work, then process it. */
int xbd_front_run(struct xbd_front *f, int timeout_ms);

/*
 * Reconnect now, with whatever is in flight (event loop thread; blocks up
 * to a few timeouts): Closing -> Closed -> Initialising -> a new
 * negotiation -> Connected, as after a backend restart.  Requests the
 * backend did not answer are sent again; none completes twice.  For
 * conformance tests of a backend's reconnect handling.
 */
int xbd_front_reconnect(struct xbd_front *f);

/* Requests submitted and not yet completed. */
unsigned int xbd_front_inflight(const struct xbd_front *f);

/* Blocking: submit one request and run the loop until it completes. */
int xbd_front_io(struct xbd_front *f, enum xbd_front_op op, unsigned int flags,
		 int queue, uint64_t offset, uint64_t len, void *buf);

/*
 * Test hook: the library's view of the last protocol error, or NULL.
 * A static string, valid until close.
 */
const char *xbd_front_error(const struct xbd_front *f);

/*
 * Test hook: check the library's accounting of granted pages and ring
 * slots, queue by queue: the pool and its count, granted against the
 * pages held and the budget, no request holding pages behind one waiting
 * for them; and when nothing is in flight, every pool page back in the
 * pool and no request left waiting on a connected ring.  Returns 0, or
 * -EUCLEAN with what is wrong in why.  Event loop thread, while no
 * xbd_front_submit() runs.
 */
int xbd_front_selfcheck(struct xbd_front *f, char *why, size_t len);

/* "read", "write", "flush", "discard". */
const char *xbd_front_op_name(enum xbd_front_op op);

#endif /* XBD_FRONT_H */
