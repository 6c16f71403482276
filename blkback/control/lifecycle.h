/*
 * lifecycle.h: a device's life, in five files of the control plane,
 * and what they call of each other, each only the ones below it:
 *
 *   lifecycle.c  the XenbusState machine and its guards, the device's
 *                life (found, adopted, killed, removed), the main loop's
 *                passes and timer, SIGTERM
 *   connect.c    its connection: the rings read, journaled and started,
 *                the disconnect and its drain
 *   storage.c    its storage: open (on a thread for a server), backoff,
 *                close, resize
 *   sharing.c    the image it opens, against the other devices and the
 *                other processes that have it (one writer, or sharers)
 *   device.c     what they share: the toolstack's keys, our state and
 *                feature keys written, the life's setter, the edge limits
 */
#ifndef XBD_BACK_LIFECYCLE_H
#define XBD_BACK_LIFECYCLE_H

#include <stdbool.h>

#include "blkback/control/device.h"

/* ---- storage.c ---- */

/*
 * Open the device's storage from its params: at once for a local file or
 * device, on a thread of its own for a remote one (-EINPROGRESS until it
 * is done: dev_open_collect).  A failure waits out its backoff: until then
 * the same error comes back without a try.
 */
int dev_open_storage(struct xbd_dev *dev);
/* An open on its thread has finished: dev_open_collect takes it. */
bool dev_open_finished(const struct xbd_dev *dev);
/* Take a finished open's store, or note its failure: 0, -EINPROGRESS, or the failure. */
int dev_open_collect(struct xbd_dev *dev);
void dev_close_storage(struct xbd_dev *dev);
/* A refused open is tried again at the next turn (SIGHUP: the settings may have changed). */
void dev_storage_retry(struct xbd_dev *dev);
/* Read the store's size again; a change reaches the guest (sectors, state rewritten). */
void dev_check_resize(struct xbd_dev *dev);

/* ---- sharing.c ---- */

/*
 * Take target (a file or block device dev is about to open, shown as
 * shown) for dev->share, against this daemon's other devices and, by its
 * lock, other processes: 0 (also for what is neither: the engine says
 * what it is); -EBUSY with why saying who has it; or the -errno of its
 * stat or open.  What dev had before is let go first.
 */
int dev_share_take(struct xbd_dev *dev, const char *target, const char *shown, char *why,
		   size_t len);
/* What the refusal of an image in use adds (sharing.c's and, for RBD, storage.c's). */
#define XBD_SHARE_HINT "; one image is served read-write to one guest at a time " \
	"(shared-write = 1 for the disks of a cluster filesystem)"
/* Let dev's image go (the lock with our last holder of it). */
void dev_share_drop(struct xbd_dev *dev);

/* ---- connect.c ---- */

/* The frontend's CONNECT step: true once connected; false while it waits, or closed. */
bool dev_connect_step(struct xbd_dev *dev);
/* Stop the rings without waiting for the storage (they drain: dev_drained). */
void dev_disconnect(struct xbd_dev *dev);
/* Whether the rings of an earlier connection have all stopped. */
bool dev_drained(const struct xbd_dev *dev);
/* Join the stopped rings and release them (their journals, counters, its worker's device). */
void dev_drain_release(struct xbd_dev *dev);
/* The rings have drained: release them and write what waited for them. */
void dev_drain_done(struct xbd_dev *dev);

/* ---- device.c ---- */

/*
 * The one place a device's life changes: the edge is checked against one
 * table (device.c), and one that is not there is a bug, said once in a
 * line, and fatal in a build with test hooks.
 */
void dev_set_life(struct xbd_dev *dev, enum xbd_dev_life to);
/* A key of the backend directory (the toolstack's): 0 or -errno. */
int dev_bkey_str(struct xbd_dev *dev, const char *k, char **out);
bool dev_bkey_bool(struct xbd_dev *dev, const char *k, bool dflt);
/*
 * Read its frontend's domain's name and vm node again (the toolstack's:
 * the domain cannot write them, but they are escaped wherever shown):
 * dom_name, dom_vm, incoming.
 */
void dev_read_domain(struct xbd_dev *dev);
/* Write our state now (unless the toolstack has removed the directory meanwhile). */
void dev_write_state(struct xbd_dev *dev, enum xenbus_state st);
/* Our state, written once the rings of an earlier connection drained. */
void dev_set_state(struct xbd_dev *dev, enum xenbus_state st);
/*
 * May the device take an edge of this kind now?  If not, a retry is
 * scheduled for when it may, and the first refusal since the guest was
 * last quiet says so in the log.
 */
bool dev_edge_allowed(struct xbd_dev *dev, struct xbd_edge_limit *l, const char *what);
/* Give back the edge dev_edge_allowed() just let through (it did not happen after all). */
void dev_edge_refund(struct xbd_edge_limit *l);
/* The blkif.h feature keys (booleans always written as 0 or 1): 0 or -errno. */
int dev_advertise(struct xbd_dev *dev);

#endif /* XBD_BACK_LIFECYCLE_H */
