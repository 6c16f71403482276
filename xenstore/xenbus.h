/*
 * xenbus.h: the xenstore layer xbd-back and xbd-front share, over the
 * real libxenstore: typed reads and writes with range checks, transactions
 * retried on EAGAIN, watches dispatched to callbacks from an event loop,
 * path helpers, and the XenbusState machine of xen/io/xenbus.h.
 *
 * Works unchanged against Xen's xenstored and against xbd-xenstored
 * (XENSTORED_PATH).  Functions return 0 or a negative errno value.
 * A struct xbd_xs is not thread-safe; use one per thread.
 */
#ifndef XBD_XENBUS_H
#define XBD_XENBUS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xenstore.h>
#include <xen/xen.h>
#include <xen/io/xenbus.h>

#define XBD_XS_PATH_MAX 256 /* XENSTORE_ABS_PATH_MAX in xs_wire.h is 3072; ours are short */

struct xbd_xs;
struct xbd_xs_watch;

/* Connect to xenstore (xs_open(0)).  -errno when no xenstore is reachable. */
int xbd_xs_open(struct xbd_xs **out);
void xbd_xs_close(struct xbd_xs *xs);
/* The underlying libxenstore handle, for calls not wrapped here. */
struct xs_handle *xbd_xs_handle(struct xbd_xs *xs);
/* A file descriptor that becomes readable when watch events are waiting. */
int xbd_xs_fd(struct xbd_xs *xs);

/* snprintf into buf; -ENAMETOOLONG if it does not fit. */
int xbd_xs_pathf(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Path helpers for the directories of the xenbus device convention
 * (xen/io/xenbus.h, as libxl lays them out).  Each returns 0 or
 * -ENAMETOOLONG / -EINVAL.
 */
/* "/local/domain/DOMID" */
int xbd_xs_domain_dir(char *buf, size_t len, uint32_t domid);
/* "/local/domain/BACKEND_DOMID/backend/TYPE/DOMID/DEVID" (TYPE e.g. "vbd", "vbd3") */
int xbd_xs_backend_dir(char *buf, size_t len, uint32_t backend_domid, const char *type,
		       uint32_t domid, uint32_t devid);
/* "/local/domain/DOMID/device/TYPE/DEVID" (TYPE "vbd" for every disk kind) */
int xbd_xs_frontend_dir(char *buf, size_t len, uint32_t domid, const char *type,
			uint32_t devid);
/* "DIR/KEY" */
int xbd_xs_join(char *buf, size_t len, const char *dir, const char *key);
/*
 * Split a backend directory path (as above, nothing after DEVID) into its
 * parts; type receives at most type_len - 1 characters.  -EINVAL when the
 * path does not have that shape or a number is not plain decimal.
 */
int xbd_xs_parse_backend_dir(const char *path, uint32_t *backend_domid, char *type,
			     size_t type_len, uint32_t *domid, uint32_t *devid);

/*
 * Reads.  t is a transaction from xbd_xs_transact() or XBT_NULL.
 * -ENOENT when the node does not exist, -EACCES when denied,
 * -EINVAL when the value does not parse, -ERANGE when outside [min, max].
 */
int xbd_xs_read_str(struct xbd_xs *xs, xs_transaction_t t, const char *path, char **out);
int xbd_xs_read_uint(struct xbd_xs *xs, xs_transaction_t t, const char *path,
		     uint64_t min, uint64_t max, uint64_t *out);
/* "0" or "1" only (what blkif.h's boolean keys hold). */
int xbd_xs_read_bool(struct xbd_xs *xs, xs_transaction_t t, const char *path, bool *out);
/*
 * As above, but a node that does not exist yields dflt (blkif.h: "any
 * specified default value is in effect if the node is not present").
 * A node that exists but does not parse is still -EINVAL/-ERANGE.
 */
int xbd_xs_read_uint_default(struct xbd_xs *xs, xs_transaction_t t, const char *path,
			     uint64_t min, uint64_t max, uint64_t dflt, uint64_t *out);
int xbd_xs_read_bool_default(struct xbd_xs *xs, xs_transaction_t t, const char *path,
			     bool dflt, bool *out);
/*
 * The strict number syntax of xbd_xs_read_uint: one or more ASCII decimal
 * digits and nothing else (no sign, no blanks, no "0x", no trailing
 * newline), value within [min, max].  Leading zeros are accepted (they are
 * still plain decimal).  -EINVAL on syntax, -ERANGE outside the range or
 * beyond 64 bits.
 */
int xbd_xs_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* True if the node exists and we may read it. */
bool xbd_xs_exists(struct xbd_xs *xs, xs_transaction_t t, const char *path);
/* Children of a directory; *out is a malloc'd array freed with free(). */
int xbd_xs_directory(struct xbd_xs *xs, xs_transaction_t t, const char *path,
		     char ***out, unsigned int *count);

/* Writes. */
int xbd_xs_write_str(struct xbd_xs *xs, xs_transaction_t t, const char *path, const char *value);
int xbd_xs_write_uint(struct xbd_xs *xs, xs_transaction_t t, const char *path, uint64_t value);
int xbd_xs_printf(struct xbd_xs *xs, xs_transaction_t t, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Remove a node and everything below it; a node that is already gone is not an error. */
int xbd_xs_rm(struct xbd_xs *xs, xs_transaction_t t, const char *path);
int xbd_xs_mkdir(struct xbd_xs *xs, xs_transaction_t t, const char *path);
/* Set a node's permissions (perms[0] is the owner and the default for others). */
int xbd_xs_set_perms(struct xbd_xs *xs, xs_transaction_t t, const char *path,
		     const struct xs_permissions *perms, unsigned int count);

/* A key and its value, for writing a directory's worth of nodes at once. */
struct xbd_xs_kv {
	const char *key;
	const char *value;
};
/* Write dir/key = value for each of the count pairs (use inside xbd_xs_transact). */
int xbd_xs_write_kvs(struct xbd_xs *xs, xs_transaction_t t, const char *dir,
		     const struct xbd_xs_kv *kvs, size_t count);

/*
 * Run fn inside a transaction and commit it; when the commit fails with
 * EAGAIN (a conflicting change), run fn again, up to a bounded number of
 * times.  fn returning non-zero aborts the transaction and is returned.
 */
typedef int (*xbd_xs_txn_fn)(struct xbd_xs *xs, xs_transaction_t t, void *arg);
#define XBD_XS_TXN_RETRIES 64 /* -EAGAIN once this many commits in a row conflicted */
int xbd_xs_transact(struct xbd_xs *xs, xbd_xs_txn_fn fn, void *arg);

/*
 * Watches.  The callback runs from xbd_xs_dispatch() with the path that
 * changed (the watched node or one below it).  Xenstore fires every watch
 * once when it is registered.
 */
typedef void (*xbd_xs_watch_cb)(struct xbd_xs *xs, const char *path, void *arg);
int xbd_xs_watch(struct xbd_xs *xs, const char *path, xbd_xs_watch_cb cb, void *arg,
		 struct xbd_xs_watch **out);
/*
 * A watch on the node alone: xenstore fires a watch for every node below
 * the watched one too, and whoever may write below it (a guest, below its
 * own state node) could otherwise make each of its writes cost the
 * callback.  Events for other paths are dropped as they are read, before
 * any callback (counted in xbd_xs_dropped).
 */
int xbd_xs_watch_node(struct xbd_xs *xs, const char *path, xbd_xs_watch_cb cb, void *arg,
		      struct xbd_xs_watch **out);
/* Events dropped so far by node watches and for watches already removed. */
uint64_t xbd_xs_dropped(const struct xbd_xs *xs);
/* Removes the watch; safe to call from inside its own callback. */
void xbd_xs_unwatch(struct xbd_xs *xs, struct xbd_xs_watch *w);
/*
 * Deliver every watch event waiting (call when xbd_xs_fd() is readable).
 * Returns the number of events dispatched, or a negative errno
 * (-ECONNRESET) when the connection to xenstore is lost.  libxenstore does
 * not make the fd readable when the connection drops, so a loop that must
 * notice a dead xenstore calls this (or any read) from a periodic timer
 * too; xbd_xenbus_wait_state does so every second.
 */
int xbd_xs_dispatch(struct xbd_xs *xs);
/*
 * The same, but at most max events (dropped ones count too), so that an
 * event loop gets back to its other sources after a bounded batch however
 * fast events arrive; the fd stays readable while more wait.
 */
int xbd_xs_dispatch_some(struct xbd_xs *xs, unsigned int max);

/* ---- XenbusState (xen/io/xenbus.h) ---- */

/* "Initialising", "InitWait", ... ; "Unknown" for anything else. */
const char *xbd_xenbus_state_name(int state);
/*
 * Write dir/state, in a transaction that first checks dir still exists:
 * -ENOENT when the toolstack has removed the device (no stray node is
 * left behind).
 */
int xbd_xenbus_switch_state(struct xbd_xs *xs, const char *dir, enum xenbus_state state);
/* Read dir/state; a missing or malformed node reads as XenbusStateUnknown. */
enum xenbus_state xbd_xenbus_read_state(struct xbd_xs *xs, const char *dir);

/*
 * Wait (dispatching other watches meanwhile) until dir/state is one of the
 * states in the bit mask (1u << state), the node disappears (-ENOENT), or
 * timeout_ms passes (-ETIMEDOUT; a negative timeout_ms waits for ever).
 * A malformed value counts as XenbusStateUnknown.  On success *out holds
 * the state seen.
 */
int xbd_xenbus_wait_state(struct xbd_xs *xs, const char *dir, unsigned int mask,
			  int timeout_ms, enum xenbus_state *out);

/*
 * The XenbusState machine both ends drive: what one end should do next,
 * given its own state and the other end's, following the startup and
 * shutdown diagrams of xen/io/blkif.h and what Linux xen-blkback and
 * xen-blkfront do.  A pure function: the caller checks its own guards
 * (for xbd-back: the toolstack's online flag, rings still draining, the
 * per-device rate limits; for libxbdfront: whether it may reconnect),
 * does the work the step names, records its new state and asks again
 * until the answer is NONE: a skipped state yields its own work first (a
 * backend still Initialising whose frontend is already Initialised gets
 * INITWAIT, then CONNECT).  self is the state this end last wrote (a
 * Closing written by the toolstack on detach is the backend's input, not
 * its state: xbd-back handles it with the toolstack's online flag).
 */
enum xbd_xenbus_role {
	XBD_XENBUS_BACKEND,
	XBD_XENBUS_FRONTEND,
};

enum xbd_xenbus_step {
	XBD_XENBUS_STEP_NONE = 0,   /* nothing to do until something changes */
	/* backend: (stop any rings,) publish features and transport limits,
	 * switch to InitWait: a new device, a frontend that starts over after
	 * a close, or one that reset while connected */
	XBD_XENBUS_STEP_INITWAIT,
	/* frontend: read the backend's features, set up rings, publish
	 * ring-ref/event-channel/protocol, switch to Initialised */
	XBD_XENBUS_STEP_INITIALISE,
	/* backend: read the frontend's transport parameters, map the rings,
	 * publish the disk properties, switch to Connected.
	 * frontend: read the disk properties, switch to Connected */
	XBD_XENBUS_STEP_CONNECT,
	/* frontend: the backend re-announced Connected (online resize): re-read sectors */
	XBD_XENBUS_STEP_REREAD,
	/* backend: the frontend is closing: stop the rings, switch to Closing */
	XBD_XENBUS_STEP_CLOSING,
	/* the other end closed or went away: tear down, switch to Closed */
	XBD_XENBUS_STEP_CLOSED,
	/* frontend: the backend started over (InitWait again while we were
	 * connected), or both ends are Closed: tear down what is left, switch
	 * to Initialising and negotiate again */
	XBD_XENBUS_STEP_RESTART,
};

enum xbd_xenbus_step xbd_xenbus_next_step(enum xbd_xenbus_role role, enum xenbus_state self,
					  enum xenbus_state peer);
const char *xbd_xenbus_step_name(enum xbd_xenbus_step step);

/*
 * Follow the other end of a device: cb runs (from xbd_xs_dispatch) with the
 * peer's state each time it changes, starting with the state found when
 * the watch is set up.  gone is true, and state XenbusStateUnknown, once
 * the peer's state node has disappeared (the toolstack removed its
 * directory) or, on @releaseDomain, its domain's /local/domain/N has
 * disappeared; after that cb is not called again.  peer_dir is the other
 * end's directory (a backend reads it from its "frontend" node).
 */
struct xbd_xenbus_peer;
typedef void (*xbd_xenbus_peer_cb)(struct xbd_xs *xs, enum xenbus_state state, bool gone,
				   void *arg);
int xbd_xenbus_peer_watch(struct xbd_xs *xs, const char *peer_dir, uint32_t peer_domid,
			  xbd_xenbus_peer_cb cb, void *arg, struct xbd_xenbus_peer **out);
/* Stop following; safe from inside cb. */
void xbd_xenbus_peer_unwatch(struct xbd_xs *xs, struct xbd_xenbus_peer *p);

#endif /* XBD_XENBUS_H */
