/*
 * wmsg.c: the messages between xbd-back's main process and its workers
 * (worker.h): one fixed-size struct per SOCK_SEQPACKET message, fds
 * beside it, every wait bounded; the queue of those a socket had no room
 * for; and the names of the confinement steps.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "blkback/workers/worker.h"
#include "common/clock.h"
#include "common/fdpass.h"

/* Wait for events on sock until deadline (-1: none); 0, or -ETIMEDOUT. */
static int wait_fd(int sock, short events, int64_t deadline)
{
	struct pollfd p = { .fd = sock, .events = events };
	int r, ms;

	for (;;) {
		ms = deadline < 0 ? -1 : (int)(deadline > (int64_t)xbd_mono_ms() ? deadline - (int64_t)xbd_mono_ms() : 0);
		r = poll(&p, 1, ms);
		if (r > 0)
			return 0;
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

int xbd_wmsg_send(int sock, const struct xbd_wmsg *m, const int *fds, unsigned int nfds,
		  int timeout_ms)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * XBD_WMSG_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int64_t deadline = timeout_ms < 0 ? -1 : (int64_t)xbd_mono_ms() + timeout_ms;
	int err;

	if (nfds > XBD_WMSG_MAX_FDS)
		return -EINVAL;
	xbd_fdpass_attach(&mh, u.buf, sizeof(u.buf), fds, nfds);
	for (;;) {
		if (sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(*m))
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == ECONNRESET || errno == ENOTCONN)
			return -EPIPE;
		if (errno != EAGAIN || timeout_ms == 0)
			return -errno;
		err = wait_fd(sock, POLLOUT, deadline);
		if (err)
			return err;
	}
}

int xbd_wmsg_recv(int sock, struct xbd_wmsg *m, int *fds, unsigned int *nfds, int timeout_ms)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * XBD_WMSG_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr mh;
	int64_t deadline = timeout_ms < 0 ? -1 : (int64_t)xbd_mono_ms() + timeout_ms;
	unsigned int n = 0;
	ssize_t len;
	int err;

	for (;;) {
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		len = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (len >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == ECONNRESET)
			return -EPIPE;
		if (errno != EAGAIN || timeout_ms == 0)
			return -errno;
		err = wait_fd(sock, POLLIN, deadline);
		if (err)
			return err;
	}
	if (len == 0)
		return -EPIPE;
	/* Every fd that came is ours now: kept up to what the caller takes, the rest closed. */
	n = xbd_fdpass_take(&mh, fds, fds && nfds ? XBD_WMSG_MAX_FDS : 0);
	if (nfds)
		*nfds = n;
	if (len != (ssize_t)sizeof(*m) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (unsigned int i = 0; i < n; i++)
			close(fds[i]);
		if (nfds)
			*nfds = 0;
		return -EPROTO;
	}
	return 0;
}

static const char *const step_names[XBD_CONFINE_STEPS] = {
	"a private mount namespace with an empty root",
	"no simulator files",
	"its own uid",
	"dropping every capability",
	"no_new_privs",
	"resource limits",
	"the seccomp allow-list",
	"event channels restricted to its domain",
	"a grant limit on gntdev",
	"dying with the main process",
};

void xbd_confine_describe(uint32_t skipped, char *buf, size_t len)
{
	size_t n = 0;
	unsigned int i;

	buf[0] = '\0';
	for (i = 0; i < XBD_CONFINE_STEPS && n < len; i++) {
		if (!(skipped & (1u << i)))
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "; " : "", step_names[i]);
	}
}

/* ---- the messages waiting for room ---- */

/* A message a socket had no room for, with its own copies of the fds. */
struct xbd_wout {
	struct xbd_wout *next;
	struct xbd_wmsg m;
	int fds[XBD_WMSG_MAX_FDS];
	unsigned int nfds;
};

static void wout_free(struct xbd_wout *o)
{
	for (unsigned int i = 0; i < o->nfds; i++)
		close(o->fds[i]);
	free(o);
}

void xbd_wqueue_drop(struct xbd_wqueue *q)
{
	while (q->head) {
		struct xbd_wout *o = q->head;

		q->head = o->next;
		wout_free(o);
	}
	q->tail = NULL;
	q->n = 0;
	q->deadline = 0;
}

void xbd_wqueue_flush(struct xbd_wqueue *q, int sock, unsigned int timeout_ms)
{
	while (q->head) {
		struct xbd_wout *o = q->head;
		int err = xbd_wmsg_send(sock, &o->m, o->fds, o->nfds, 0);

		if (err == -EAGAIN)
			return;
		if (err) {
			/* Gone: nothing more reaches it. */
			xbd_wqueue_drop(q);
			return;
		}
		q->head = o->next;
		if (!q->head)
			q->tail = NULL;
		wout_free(o);
		q->n--;
		/* It reads: the next one has a deadline of its own. */
		q->deadline = q->head ? xbd_mono_ms() + timeout_ms : 0;
	}
	q->deadline = 0;
}

int xbd_wqueue_send(struct xbd_wqueue *q, int sock, const struct xbd_wmsg *m, const int *fds,
		    unsigned int nfds, unsigned int max, unsigned int timeout_ms)
{
	struct xbd_wout *o;
	int err;

	if (!q->head) {
		err = xbd_wmsg_send(sock, m, fds, nfds, 0);
		if (err != -EAGAIN)
			return err;
	}
	if (q->n >= max)
		return -ENOBUFS;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->m = *m;
	for (o->nfds = 0; o->nfds < nfds; o->nfds++) {
		o->fds[o->nfds] = fcntl(fds[o->nfds], F_DUPFD_CLOEXEC, 0);
		if (o->fds[o->nfds] < 0) {
			err = -errno;
			wout_free(o);
			return err;
		}
	}
	if (q->tail)
		q->tail->next = o;
	else
		q->head = o;
	q->tail = o;
	q->n++;
	if (!q->deadline)
		q->deadline = xbd_mono_ms() + timeout_ms;
	return 0;
}
