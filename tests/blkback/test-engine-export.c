/*
 * test-engine-export.c: a store opened in one process and served in
 * another (engine.h's export_store/import_store, what xbd-back's workers
 * do): the description and its fds cross a unix socket to a child, which
 * re-creates the store and does I/O through a queue of its own.
 *   aio    the child's writes are in the file the parent opened, its reads
 *          see the parent's, and the caps are the same;
 *   fault  the rules travel with it (a read of a faulted sector fails
 *          with EIO in the child, the next sector reads), over aio;
 *   null   its size and delay;
 *   nbd    refused (-EOPNOTSUPP): its connections stay where they are.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blkback/engines/engine.h"

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
	failures++; } } while (0)

static void send_export(int s, const struct xbd_store_export *x, const int *fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * XBD_STORE_EXPORT_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)x, .iov_len = sizeof(*x) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (x->nfds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * x->nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * x->nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * x->nfds);
	}
	CHECK(sendmsg(s, &mh, 0) == (ssize_t)sizeof(*x));
}

static int recv_export(int s, struct xbd_store_export *x, int *fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * XBD_STORE_EXPORT_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = x, .iov_len = sizeof(*x) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	unsigned int n = 0;

	fds[0] = fds[1] = -1;
	if (recvmsg(s, &mh, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(*x))
		return -1;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) &&
				   n < XBD_STORE_EXPORT_FDS; i++)
			memcpy(&fds[n++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	return (int)n;
}

/* One I/O through a fresh queue of s, waited for: its result. */
static int do_io(const struct xbd_engine *e, struct xbd_store *s, enum xbd_io_op op,
		 uint64_t off, void *buf, size_t len)
{
	struct xbd_queue *q;
	struct xbd_io io, *ios[1] = { &io }, *done[1];
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	int r;

	if (e->queue_open(s, 4, &q))
		return -999;
	memset(&io, 0, sizeof(io));
	io.op = op;
	io.offset = off;
	io.iov = &iov;
	io.iovcnt = 1;
	r = op == XBD_IO_FLUSH ? e->flush(q, &io) : e->submit(q, ios, 1);
	if (r >= 0) {
		for (int t = 0; t < 500; t++) {
			struct pollfd p = { .fd = e->queue_fd(q), .events = POLLIN };

			poll(&p, 1, 10);
			if (e->reap(q, done, 1) == 1)
				break;
			done[0] = NULL;
		}
		r = done[0] == &io ? io.result : -998;
	}
	e->queue_close(q);
	return r;
}

/* The child: re-create the store from what arrives, then run the checks for kind. */
static int child(int sock, const char *kind)
{
	struct xbd_store_export x;
	const struct xbd_engine *e;
	struct xbd_store *s;
	struct xbd_engine_caps caps;
	uint64_t size = 0;
	static char buf[4096] __attribute__((aligned(4096)));
	int fds[2];

	if (recv_export(sock, &x, fds) < 0 || xbd_store_import(&x, fds, &e, &s))
		return 2;
	e->capabilities(s, &caps);
	if (e->size(s, &size) || write(sock, &size, sizeof(size)) != sizeof(size) ||
	    write(sock, &caps, sizeof(caps)) != sizeof(caps))
		return 3;
	if (!strcmp(kind, "aio")) {
		/* Read what the parent wrote at 0, write at 4096 for it. */
		if (do_io(e, s, XBD_IO_READ, 0, buf, sizeof(buf)) || buf[0] != 'P' || buf[4095] != 'P')
			return 4;
		memset(buf, 'C', sizeof(buf));
		if (do_io(e, s, XBD_IO_WRITE, 4096, buf, sizeof(buf)) ||
		    do_io(e, s, XBD_IO_FLUSH, 0, NULL, 0))
			return 5;
	} else if (!strcmp(kind, "fault")) {
		/* eio@read-sector=8-15: the second 4 KiB fails, the first reads. */
		if (do_io(e, s, XBD_IO_READ, 4096, buf, sizeof(buf)) != -EIO)
			return 6;
		if (do_io(e, s, XBD_IO_READ, 0, buf, sizeof(buf)) || buf[0] != 'P')
			return 7;
	}
	e->close(s);
	return 0;
}

/* Open params here, serve it in a child, compare what the child reports. */
static void roundtrip(const char *kind, const char *params)
{
	const char *target;
	const struct xbd_engine *e = xbd_engine_for(params, &target);
	struct xbd_store_export x;
	struct xbd_engine_caps caps, ccaps;
	struct xbd_store *s;
	struct xbd_disk_opts o;
	uint64_t size, csize = 0;
	int sv[2], fds[2], st;
	pid_t pid;

	memset(&o, 0, sizeof(o));
	o.direct = true;	/* xbd-back's default */
	CHECK(e && e->open(target, false, &o, &s) == 0);
	if (!e)
		return;
	CHECK(xbd_store_export(e, s, &x, fds) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		_exit(child(sv[1], kind));
	}
	close(sv[1]);
	send_export(sv[0], &x, fds);
	e->capabilities(s, &caps);
	CHECK(e->size(s, &size) == 0);
	CHECK(read(sv[0], &csize, sizeof(csize)) == sizeof(csize) && csize == size);
	CHECK(read(sv[0], &ccaps, sizeof(ccaps)) == sizeof(ccaps) &&
	      !memcmp(&caps, &ccaps, sizeof(caps)));
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
	if (WIFEXITED(st) && WEXITSTATUS(st))
		fprintf(stderr, "%s: the child failed its check %d\n", kind, WEXITSTATUS(st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(sv[0]);
	e->close(s);
}

int main(void)
{
	char dir[] = "/tmp/xbd-export-test.XXXXXX", path[300], params[400], buf[4096];
	const char *target;
	const struct xbd_engine *e;
	struct xbd_store_export x;
	int fd, fds[2];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/disk", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	memset(buf, 'P', sizeof(buf));
	CHECK(fd >= 0 && ftruncate(fd, 1 << 20) == 0 && pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf));
	close(fd);

	roundtrip("aio", path);
	/* The child's write is in the file. */
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, buf, sizeof(buf), 4096) == sizeof(buf) && buf[0] == 'C' &&
	      buf[4095] == 'C');
	close(fd);
	snprintf(params, sizeof(params), "fault:eio@read-sector=8-15:%s", path);
	roundtrip("fault", params);
	roundtrip("null", "null:64M:delay_ms=1");
	/* An engine whose connections live in its library stays where it was opened. */
	e = xbd_engine_for("nbd+unix:///x?socket=/nonexistent", &target);
	CHECK(e && !e->export_store);
	CHECK(e && xbd_store_export(e, NULL, &x, fds) == -EOPNOTSUPP);
	/* A description that names no engine is refused. */
	memset(&x, 0, sizeof(x));
	strcpy(x.engine, "nope");
	CHECK(xbd_store_import(&x, fds, &e, NULL) == -EINVAL);
	unlink(path);
	rmdir(dir);
	if (failures)
		return 1;
	printf("PASS: aio, fault and null stores served in another process; nbd stays\n");
	return 0;
}
