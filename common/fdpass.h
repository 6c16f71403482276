/*
 * common/fdpass.h: file descriptors beside a message on a Unix socket
 * (SCM_RIGHTS), for xbd-back's workers (blkback/workers/wmsg.c) and the
 * simulator's keeper (sim/keeper.c).  Header only, like common/clock.h.
 *
 * The sender puts its fds in the message's control buffer; the receiver
 * takes every fd that came, keeps up to what it has room for and closes
 * the rest, so that a peer sending more than agreed cannot leak fds into
 * this process.
 */
#ifndef XBD_COMMON_FDPASS_H
#define XBD_COMMON_FDPASS_H

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * Attach n fds to mh, in ctl (ctl_len bytes, aligned for a cmsghdr and at
 * least CMSG_SPACE(n * sizeof(int))).  No fds: no control data.
 */
static inline void xbd_fdpass_attach(struct msghdr *mh, void *ctl, size_t ctl_len,
				     const int *fds, unsigned int n)
{
	struct cmsghdr *c;

	if (!n)
		return;
	memset(ctl, 0, ctl_len);
	mh->msg_control = ctl;
	mh->msg_controllen = CMSG_SPACE(sizeof(int) * n);
	c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
}

/*
 * The fds a received mh carries: up to max of them into fds (fds may be
 * NULL with max 0), every other one closed.  How many were kept.
 */
static inline unsigned int xbd_fdpass_take(struct msghdr *mh, int *fds, unsigned int max)
{
	unsigned int n = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

#endif /* XBD_COMMON_FDPASS_H */
