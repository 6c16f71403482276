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
 * Reads.  t is a transaction from xbd_xs_transact() or XBT_NULL.
 * -ENOENT when the node does not exist, -EACCES when denied,
 * -EINVAL when the value does not parse, -ERANGE when outside [min, max].
 */
int xbd_xs_read_str(struct xbd_xs *xs, xs_transaction_t t, const char *path, char **out);
int xbd_xs_read_uint(struct xbd_xs *xs, xs_transaction_t t, const char *path,
		     uint64_t min, uint64_t max, uint64_t *out);
/* "0" or "1" only (what blkif.h's boolean keys hold). */
int xbd_xs_read_bool(struct xbd_xs *xs, xs_transaction_t t, const char *path, bool *out);
bool xbd_xs_exists(struct xbd_xs *xs, xs_transaction_t t, const char *path);
/* Children of a directory; *out is a malloc'd array freed with free(). */
int xbd_xs_directory(struct xbd_xs *xs, xs_transaction_t t, const char *path,
		     char ***out, unsigned int *count);

/* Writes. */
int xbd_xs_write_str(struct xbd_xs *xs, xs_transaction_t t, const char *path, const char *value);
int xbd_xs_write_uint(struct xbd_xs *xs, xs_transaction_t t, const char *path, uint64_t value);
int xbd_xs_printf(struct xbd_xs *xs, xs_transaction_t t, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int xbd_xs_rm(struct xbd_xs *xs, xs_transaction_t t, const char *path);

/*
 * Run fn inside a transaction and commit it; when the commit fails with
 * EAGAIN (a conflicting change), run fn again, up to a bounded number of
 * times.  fn returning non-zero aborts the transaction and is returned.
 */
typedef int (*xbd_xs_txn_fn)(struct xbd_xs *xs, xs_transaction_t t, void *arg);
int xbd_xs_transact(struct xbd_xs *xs, xbd_xs_txn_fn fn, void *arg);

/*
 * Watches.  The callback runs from xbd_xs_dispatch() with the path that
 * changed (the watched node or one below it).  Xenstore fires every watch
 * once when it is registered.
 */
typedef void (*xbd_xs_watch_cb)(struct xbd_xs *xs, const char *path, void *arg);
int xbd_xs_watch(struct xbd_xs *xs, const char *path, xbd_xs_watch_cb cb, void *arg,
		 struct xbd_xs_watch **out);
/* Removes the watch; safe to call from inside its own callback. */
void xbd_xs_unwatch(struct xbd_xs *xs, struct xbd_xs_watch *w);
/*
 * Deliver every watch event waiting (call when xbd_xs_fd() is readable).
 * Returns the number of events dispatched, or a negative errno when the
 * connection to xenstore is lost.
 */
int xbd_xs_dispatch(struct xbd_xs *xs);

/* ---- XenbusState (xen/io/xenbus.h) ---- */

/* "Initialising", "InitWait", ... ; "Unknown" for anything else. */
const char *xbd_xenbus_state_name(int state);
/* Write dir/state. */
int xbd_xenbus_switch_state(struct xbd_xs *xs, const char *dir, enum xenbus_state state);
/* Read dir/state; a missing or malformed node reads as XenbusStateUnknown. */
enum xenbus_state xbd_xenbus_read_state(struct xbd_xs *xs, const char *dir);

/*
 * Wait (dispatching other watches meanwhile) until dir/state is one of the
 * states in the bit mask (1u << state), the node disappears (-ENOENT), or
 * timeout_ms passes (-ETIMEDOUT).  On success *out holds the state seen.
 */
int xbd_xenbus_wait_state(struct xbd_xs *xs, const char *dir, unsigned int mask,
			  int timeout_ms, enum xenbus_state *out);

#endif /* XBD_XENBUS_H */
