/*
 * xenbus-state.c: the XenbusState machine of xen/io/xenbus.h for both ends
 * of a device: switching our state, waiting for the other end's with a
 * timeout, deciding what to do about it (the startup and shutdown
 * diagrams of xen/io/blkif.h), and following the other end until it goes
 * away.
 */
#include "config.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "xenstore/xenbus-internal.h"

static const char *const state_names[] = {
	[XenbusStateUnknown] = "Unknown",
	[XenbusStateInitialising] = "Initialising",
	[XenbusStateInitWait] = "InitWait",
	[XenbusStateInitialised] = "Initialised",
	[XenbusStateConnected] = "Connected",
	[XenbusStateClosing] = "Closing",
	[XenbusStateClosed] = "Closed",
	[XenbusStateReconfiguring] = "Reconfiguring",
	[XenbusStateReconfigured] = "Reconfigured",
};

const char *xbd_xenbus_state_name(int state)
{
	if (state < 0 || state > XenbusStateReconfigured)
		return "Unknown";
	return state_names[state];
}

struct switch_args {
	const char *dir;
	enum xenbus_state state;
};

static int switch_txn(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	const struct switch_args *a = arg;
	char path[XBD_XS_PATH_MAX];
	int ret;

	/*
	 * Like Linux's xenbus_switch_state: when the toolstack has removed
	 * the device directory, writing state would bring back a stray node
	 * nobody cleans up.
	 */
	if (!xbd_xs_exists(xs, t, a->dir))
		return -ENOENT;
	ret = xbd_xs_join(path, sizeof(path), a->dir, "state");
	if (ret)
		return ret;
	return xbd_xs_write_uint(xs, t, path, (uint64_t)a->state);
}

int xbd_xenbus_switch_state(struct xbd_xs *xs, const char *dir, enum xenbus_state state)
{
	struct switch_args a = { .dir = dir, .state = state };

	if ((int)state < 0 || state > XenbusStateReconfigured)
		return -EINVAL;
	return xbd_xs_transact(xs, switch_txn, &a);
}

/* 0 and *out on success; -ENOENT when missing; other errors as read. Malformed reads Unknown. */
static int read_state_path(struct xbd_xs *xs, const char *path, enum xenbus_state *out)
{
	uint64_t v;
	int ret;

	ret = xbd_xs_read_uint(xs, XBT_NULL, path, 0, XenbusStateReconfigured, &v);
	if (ret == -EINVAL || ret == -ERANGE) {
		*out = XenbusStateUnknown;
		return 0;
	}
	if (ret)
		return ret;
	*out = (enum xenbus_state)v;
	return 0;
}

enum xenbus_state xbd_xenbus_read_state(struct xbd_xs *xs, const char *dir)
{
	char path[XBD_XS_PATH_MAX];
	enum xenbus_state s;

	if (xbd_xs_join(path, sizeof(path), dir, "state"))
		return XenbusStateUnknown;
	if (read_state_path(xs, path, &s))
		return XenbusStateUnknown;
	return s;
}

static void wake_only(struct xbd_xs *xs, const char *path, void *arg)
{
	/* The watch exists to wake the poll below; the loop re-reads the node. */
}

/*
 * The longest we sleep without re-reading the node: libxenstore does not
 * wake the watch fd when the connection drops, so this bounds how long a
 * lost xenstore goes unnoticed.
 */
#define WAIT_SLICE_MS 1000

int xbd_xenbus_wait_state(struct xbd_xs *xs, const char *dir, unsigned int mask,
			  int timeout_ms, enum xenbus_state *out)
{
	char path[XBD_XS_PATH_MAX];
	struct xbd_xs_watch *w;
	int64_t deadline = 0;
	int ret;

	ret = xbd_xs_join(path, sizeof(path), dir, "state");
	if (ret)
		return ret;
	/* Watch before the first read, so no change can slip in between. */
	ret = xbd_xs_watch(xs, path, wake_only, NULL, &w);
	if (ret)
		return ret;
	if (timeout_ms >= 0)
		deadline = xbd_mono_ms() + timeout_ms;

	for (;;) {
		struct pollfd pfd = { .fd = xs->fd, .events = POLLIN };
		enum xenbus_state s;
		int slice = WAIT_SLICE_MS;

		ret = read_state_path(xs, path, &s);
		if (ret)
			break;
		if ((unsigned int)s < 32 && (mask & (1u << s))) {
			if (out)
				*out = s;
			break;
		}
		if (timeout_ms >= 0) {
			int64_t left = deadline - xbd_mono_ms();

			if (left <= 0) {
				ret = -ETIMEDOUT;
				break;
			}
			if (left < slice)
				slice = (int)left;
		}
		if (poll(&pfd, 1, slice) < 0 && errno != EINTR) {
			ret = xbd_xs_errno();
			break;
		}
		/* Other watches' callbacks run here too: the caller's loop is blocked on us. */
		ret = xbd_xs_dispatch(xs);
		if (ret < 0)
			break;
		ret = 0;
	}
	xbd_xs_unwatch(xs, w);
	return ret;
}

static const char *const step_names[] = {
	[XBD_XENBUS_STEP_NONE] = "none",
	[XBD_XENBUS_STEP_INITWAIT] = "initwait",
	[XBD_XENBUS_STEP_INITIALISE] = "initialise",
	[XBD_XENBUS_STEP_CONNECT] = "connect",
	[XBD_XENBUS_STEP_REREAD] = "reread",
	[XBD_XENBUS_STEP_CLOSING] = "closing",
	[XBD_XENBUS_STEP_CLOSED] = "closed",
	[XBD_XENBUS_STEP_RESTART] = "restart",
};

const char *xbd_xenbus_step_name(enum xbd_xenbus_step step)
{
	if ((int)step < 0 || step > XBD_XENBUS_STEP_RESTART)
		return "invalid";
	return step_names[step];
}

/*
 * The backend's reaction to the frontend: Linux xen-blkback's
 * frontend_changed, plus the resets Linux leaves to a reboot (a frontend
 * that starts over while we are Connected, or skips Closed on its way
 * back from Closing).
 */
static enum xbd_xenbus_step backend_step(enum xenbus_state self, enum xenbus_state fe)
{
	switch (fe) {
	case XenbusStateInitialising:
	case XenbusStateInitWait:
		if (self == XenbusStateInitWait)
			return XBD_XENBUS_STEP_NONE;
		return XBD_XENBUS_STEP_INITWAIT;
	case XenbusStateInitialised:
	case XenbusStateConnected:
		/* blkif.h: do the work of a skipped state first; the caller asks again. */
		if (self == XenbusStateInitWait)
			return XBD_XENBUS_STEP_CONNECT;
		/* Closing: wait for the frontend to close first. */
		if (self == XenbusStateConnected || self == XenbusStateClosing)
			return XBD_XENBUS_STEP_NONE;
		return XBD_XENBUS_STEP_INITWAIT;
	case XenbusStateClosing:
		if (self == XenbusStateClosing || self == XenbusStateClosed)
			return XBD_XENBUS_STEP_NONE;
		return XBD_XENBUS_STEP_CLOSING;
	case XenbusStateClosed:
	case XenbusStateUnknown:
		/* Frontend closed, or its node is gone or unreadable: nothing left to serve. */
		if (self == XenbusStateClosed)
			return XBD_XENBUS_STEP_NONE;
		return XBD_XENBUS_STEP_CLOSED;
	default:
		/* Reconfiguring/Reconfigured are not part of blkif. */
		return XBD_XENBUS_STEP_NONE;
	}
}

/* The frontend's reaction to the backend (Linux xen-blkfront's blkback_changed). */
static enum xbd_xenbus_step frontend_step(enum xenbus_state self, enum xenbus_state be)
{
	switch (be) {
	case XenbusStateInitialising:
	case XenbusStateInitWait:
	case XenbusStateInitialised:
		/* A backend that started over under a connected frontend. */
		if (self == XenbusStateConnected)
			return XBD_XENBUS_STEP_RESTART;
		if (be == XenbusStateInitWait &&
		    (self == XenbusStateInitialising || self == XenbusStateClosed ||
		     self == XenbusStateUnknown))
			return XBD_XENBUS_STEP_INITIALISE;
		return XBD_XENBUS_STEP_NONE;
	case XenbusStateConnected:
		if (self == XenbusStateInitialising || self == XenbusStateUnknown)
			return XBD_XENBUS_STEP_INITIALISE;
		if (self == XenbusStateInitialised)
			return XBD_XENBUS_STEP_CONNECT;
		if (self == XenbusStateConnected)
			return XBD_XENBUS_STEP_REREAD;
		return XBD_XENBUS_STEP_NONE;
	case XenbusStateClosing:
	case XenbusStateClosed:
	case XenbusStateUnknown:
		if (self != XenbusStateClosed)
			return XBD_XENBUS_STEP_CLOSED;
		/* Both Closed: a frontend that wants the disk back asks again. */
		return be == XenbusStateClosed ? XBD_XENBUS_STEP_RESTART : XBD_XENBUS_STEP_NONE;
	default:
		return XBD_XENBUS_STEP_NONE;
	}
}

enum xbd_xenbus_step xbd_xenbus_next_step(enum xbd_xenbus_role role, enum xenbus_state self,
					  enum xenbus_state peer)
{
	if (role == XBD_XENBUS_BACKEND)
		return backend_step(self, peer);
	return frontend_step(self, peer);
}

struct xbd_xenbus_peer {
	char state_path[XBD_XS_PATH_MAX];
	char dom_path[XBD_XS_PATH_MAX];
	uint32_t domid;
	xbd_xenbus_peer_cb cb;
	void *arg;
	struct xbd_xs_watch *w_state;
	struct xbd_xs_watch *w_release;
	bool reported;
	bool gone;
	enum xenbus_state last;
};

static void peer_stop_watches(struct xbd_xs *xs, struct xbd_xenbus_peer *p)
{
	xbd_xs_unwatch(xs, p->w_state);
	xbd_xs_unwatch(xs, p->w_release);
	p->w_state = p->w_release = NULL;
}

static void peer_check(struct xbd_xs *xs, struct xbd_xenbus_peer *p, bool released)
{
	enum xenbus_state s = XenbusStateUnknown;
	bool gone = false;
	int ret;

	if (p->gone)
		return;
	ret = read_state_path(xs, p->state_path, &s);
	if (ret == -ENOENT)
		gone = true;
	else if (ret)
		/* EACCES and friends: we cannot tell, so we report nothing. */
		return;
	/*
	 * @releaseDomain does not say which domain: look whether the peer's
	 * home is still there.  Only ENOENT counts (a frontend may not be
	 * allowed to read a driver domain's home).
	 */
	if (!gone && released && p->dom_path[0]) {
		char *home;

		ret = xbd_xs_read_str(xs, XBT_NULL, p->dom_path, &home);
		if (ret == -ENOENT)
			gone = true;
		else if (!ret)
			free(home);
	}
	if (gone) {
		p->gone = true;
		peer_stop_watches(xs, p);
		/* Last use of p: the callback may free it. */
		p->cb(xs, XenbusStateUnknown, true, p->arg);
		return;
	}
	if (p->reported && s == p->last)
		return;
	p->reported = true;
	p->last = s;
	p->cb(xs, s, false, p->arg);
}

static void peer_state_cb(struct xbd_xs *xs, const char *path, void *arg)
{
	peer_check(xs, arg, false);
}

static void peer_release_cb(struct xbd_xs *xs, const char *path, void *arg)
{
	peer_check(xs, arg, true);
}

int xbd_xenbus_peer_watch(struct xbd_xs *xs, const char *peer_dir, uint32_t peer_domid,
			  xbd_xenbus_peer_cb cb, void *arg, struct xbd_xenbus_peer **out)
{
	struct xbd_xenbus_peer *p;
	int ret;

	if (!cb || !out)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->domid = peer_domid;
	p->cb = cb;
	p->arg = arg;
	ret = xbd_xs_join(p->state_path, sizeof(p->state_path), peer_dir, "state");
	if (ret)
		goto err;
	/* Dom0 does not go away; watching @releaseDomain for it would be noise. */
	if (peer_domid != 0) {
		ret = xbd_xs_pathf(p->dom_path, sizeof(p->dom_path), "/local/domain/%u", peer_domid);
		if (ret)
			goto err;
	}
	ret = xbd_xs_watch(xs, p->state_path, peer_state_cb, p, &p->w_state);
	if (ret)
		goto err;
	if (peer_domid != 0) {
		ret = xbd_xs_watch(xs, "@releaseDomain", peer_release_cb, p, &p->w_release);
		if (ret)
			goto err;
	}
	*out = p;
	return 0;

err:
	peer_stop_watches(xs, p);
	free(p);
	return ret;
}

void xbd_xenbus_peer_unwatch(struct xbd_xs *xs, struct xbd_xenbus_peer *p)
{
	if (!p)
		return;
	peer_stop_watches(xs, p);
	free(p);
}
