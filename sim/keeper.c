/*
 * sim/keeper.c: the keeper of a simulated host's memory files, and the
 * client side of its socket.
 *
 * Guest memory, grant tables and Xen's tables are memfds sealed against
 * shrinking and growing before anyone maps them: a process acting as a
 * guest cannot truncate memory a backend has mapped (which would kill the
 * backend with SIGBUS at its next access), as on real Xen a guest cannot
 * take pages away from under a foreign mapping.  A sealed memfd has no
 * name in any file system, so somebody must hold it between the process
 * that creates a domain and those that use it: a small process, started
 * by xbd_sim_host_init and stopped by xbd_sim_host_cleanup, holds them
 * and hands them out over DIR/hv/keeper with SCM_RIGHTS.  It answers one
 * request per connection, in order; it never touches the memory itself.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "sim/layout.h"
#include "common/fdpass.h"

struct keeper_msg {
	uint32_t op;         /* enum sim_keeper_op; in replies: 0 or errno */
	uint32_t domid;
	uint32_t gen;
	uint32_t pad;
};

/* A client that connects and says nothing must not stall the others. */
#define KEEPER_IO_TIMEOUT_MS 1000
/* How often the keeper checks that its socket is still its own. */
#define KEEPER_IDLE_CHECK_MS 2000

static int sock_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

static int send_msg(int s, const struct keeper_msg *m, const int *fds, unsigned int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SIM_KEEPER_NFDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	xbd_fdpass_attach(&mh, u.buf, sizeof(u.buf), fds, nfds);
	while (sendmsg(s, &mh, MSG_NOSIGNAL) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/* Receive one message and up to SIM_KEEPER_NFDS fds; returns how many fds. */
static int recv_msg(int s, struct keeper_msg *m, int *fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SIM_KEEPER_NFDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct pollfd pfd = { .fd = s, .events = POLLIN };
	int n = 0, r;
	ssize_t len;

	for (unsigned int i = 0; i < SIM_KEEPER_NFDS; i++)
		fds[i] = -1;
	do
		r = poll(&pfd, 1, KEEPER_IO_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return r < 0 ? -errno : -ETIMEDOUT;
	len = recvmsg(s, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (len < 0)
		return -errno;
	n = (int)xbd_fdpass_take(&mh, fds, SIM_KEEPER_NFDS);
	if (len != (ssize_t)sizeof(*m) || (mh.msg_flags & MSG_CTRUNC)) {
		for (int i = 0; i < n; i++) {
			close(fds[i]);
			fds[i] = -1;
		}
		return -EPROTO;
	}
	return n;
}

int sim_keeper_call(const char *path, uint32_t op, uint32_t domid, uint32_t gen,
		    const int *send, unsigned int nsend, int *recv)
{
	struct keeper_msg m = { .op = op, .domid = domid, .gen = gen };
	struct sockaddr_un sa;
	int fds[SIM_KEEPER_NFDS];
	int s, r;

	r = sock_addr(path, &sa);
	if (r)
		return r;
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		goto out;
	}
	r = send_msg(s, &m, send, nsend);
	if (r)
		goto out;
	r = recv_msg(s, &m, fds);
	if (r >= 0 && (m.op || !recv)) {
		for (int i = 0; i < r; i++)
			close(fds[i]);
		r = m.op ? -(int)m.op : 0;
	} else if (r >= 0) {
		memcpy(recv, fds, sizeof(fds));
	}
out:
	close(s);
	return r;
}

/* ---- memory files ---- */

int sim_memfd_check(int fd, uint64_t *size)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	/* A file that is not a memfd has no seals (EINVAL). */
	if (seals < 0 || (seals & SIM_SEALS) != SIM_SEALS)
		return -EPROTO;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size < 0)
		return -EPROTO;
	*size = (uint64_t)st.st_size;
	return 0;
}

int sim_memfd_create(const char *name, uint64_t size, void (*init)(void *, void *),
		     void *arg)
{
	/* memfd names are limited to 249 bytes; keep the telling end. */
	size_t len = strlen(name);
	int fd = memfd_create(len > 240 ? name + len - 240 : name,
			      MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int r;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		r = -errno;
		goto fail;
	}
	if (init) {
		void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		if (p == MAP_FAILED) {
			r = -errno;
			goto fail;
		}
		init(p, arg);
		munmap(p, size);
	}
	if (fcntl(fd, F_ADD_SEALS, SIM_SEALS) < 0) {
		r = -errno;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return r;
}

/* ---- the keeper process ---- */

struct kept {
	uint32_t gen;        /* 0: nothing kept */
	int fds[SIM_KEEPER_NFDS];
};

struct keeper {
	int lfd;
	int host_fd;
	struct stat sock_st;  /* our socket, as bound */
	char path[PATH_MAX];
	struct kept *doms;
};

static void kept_drop(struct kept *k)
{
	for (unsigned int i = 0; i < SIM_KEEPER_NFDS; i++)
		if (k->gen && k->fds[i] >= 0)
			close(k->fds[i]);
	k->gen = 0;
}

/* Answer one request on s; false when told to stop. */
static bool keeper_serve(struct keeper *kp, int s)
{
	struct keeper_msg m, reply = { 0 };
	int fds[SIM_KEEPER_NFDS], gfds[SIM_KEEPER_NFDS], xen_own = -1;
	int n = recv_msg(s, &m, fds), nreply = 0;
	char proc[64];
	int *rfds = NULL;
	struct kept *k;
	bool go_on = true;

	if (n < 0)
		return true;
	k = m.domid <= XBD_SIM_MAX_DOMID ? &kp->doms[m.domid] : NULL;
	switch (m.op) {
	case SIM_KEEPER_HOST:
		rfds = &kp->host_fd;
		nreply = 1;
		break;
	case SIM_KEEPER_PUT: {
		uint64_t size;

		reply.op = EINVAL;
		if (!k || !m.gen || n != SIM_KEEPER_NFDS)
			break;
		/* Only sealed memory: what we hand out can never shrink. */
		for (int i = 0; i < n; i++)
			if (sim_memfd_check(fds[i], &size))
				goto put_done;
		kept_drop(k);
		k->gen = m.gen;
		memcpy(k->fds, fds, sizeof(fds));
		n = 0;
		reply.op = 0;
put_done:
		break;
	}
	case SIM_KEEPER_GET:
		if (!k || !k->gen || k->gen != m.gen) {
			reply.op = ESRCH;
			break;
		}
		/*
		 * Xen's file as an open file of the asker's own: its mapper
		 * mark is an OFD lock, which belongs to an open file (ours is
		 * shared by everyone we hand it to).  Made here, where /proc is,
		 * so that the asker needs none (a confined xbd-back worker).
		 */
		memcpy(gfds, k->fds, sizeof(gfds));
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", k->fds[2]);
		gfds[2] = xen_own = open(proc, O_RDWR | O_CLOEXEC);
		if (xen_own < 0) {
			reply.op = (uint32_t)errno;
			break;
		}
		rfds = gfds;
		nreply = SIM_KEEPER_NFDS;
		break;
	case SIM_KEEPER_DROP:
		if (k && k->gen && k->gen == m.gen)
			kept_drop(k);
		break;
	case SIM_KEEPER_STOP:
		go_on = false;
		break;
	default:
		reply.op = EINVAL;
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	send_msg(s, &reply, rfds, reply.op ? 0 : (unsigned int)nreply);
	if (xen_own >= 0)
		close(xen_own);
	return go_on;
}

/* Still our socket at our path?  If the host was removed behind our back, leave. */
static bool keeper_sock_ours(const struct keeper *kp)
{
	struct stat st;

	return lstat(kp->path, &st) == 0 && st.st_ino == kp->sock_st.st_ino &&
	       st.st_dev == kp->sock_st.st_dev;
}

static void keeper_run(struct keeper *kp)
{
	int64_t next_check = xbd_mono_ms() + KEEPER_IDLE_CHECK_MS;

	for (;;) {
		struct pollfd pfd = { .fd = kp->lfd, .events = POLLIN };
		int64_t wait = next_check - xbd_mono_ms();
		int r, s;

		/* Checked on time however busy we are, not only when idle. */
		if (wait <= 0) {
			if (!keeper_sock_ours(kp))
				return;
			next_check = xbd_mono_ms() + KEEPER_IDLE_CHECK_MS;
			continue;
		}
		r = poll(&pfd, 1, (int)wait);
		if (r < 0 && errno != EINTR)
			return;
		if (r <= 0)
			continue;
		s = accept4(kp->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (s < 0)
			continue;
		r = keeper_serve(kp, s);
		close(s);
		if (!r) {
			unlink(kp->path);
			return;
		}
	}
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Close every fd from 3 up except a and b. */
static void keep_only_fds(int a, int b)
{
	int keep[3] = { a, b, INT_MAX };
	unsigned int from = 3;

	qsort(keep, 2, sizeof(int), cmp_int);
	for (int i = 0; i < 3; i++) {
		if (keep[i] < (int)from)
			continue;
		if (keep[i] > (int)from)
			close_range(from, keep[i] == INT_MAX ? ~0u : (unsigned int)keep[i] - 1, 0);
		if (keep[i] == INT_MAX)
			break;
		from = (unsigned int)keep[i] + 1;
	}
}

/* In the keeper: make the listening socket; 0 or an errno value. */
static int keeper_listen(struct keeper *kp)
{
	struct sockaddr_un sa;

	if (sock_addr(kp->path, &sa))
		return ENAMETOOLONG;
	kp->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (kp->lfd < 0)
		return errno;
	if (bind(kp->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return errno;
	/* Any uid may ask (an xbd-back worker runs as its own): hypervisor.h. */
	chmod(kp->path, 0666);
	if (listen(kp->lfd, 64) < 0 || lstat(kp->path, &kp->sock_st) < 0) {
		int e = errno;

		unlink(kp->path);
		return e;
	}
	return 0;
}

int sim_keeper_start(const char *path, int host_fd)
{
	struct keeper kp = { .lfd = -1, .host_fd = host_fd };
	struct sockaddr_un sa;
	int sync[2], r, st, err;
	pid_t pid;

	r = sock_addr(path, &sa);
	if (r)
		return r;
	snprintf(kp.path, sizeof(kp.path), "%s", path);
	if (pipe2(sync, O_CLOEXEC) < 0)
		return -errno;
	/*
	 * Forked twice and in its own session: it outlives the caller (the
	 * xbd-sim command exits at once), is nobody's zombie, and holds none
	 * of the caller's fds, so that a test harness waiting for the
	 * caller's output to end is not kept waiting by it.  The socket is
	 * its own (SO_PEERCRED names it) and listens before we return.
	 */
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(sync[0]);
		close(sync[1]);
		return r;
	}
	if (pid == 0) {
		int devnull;

		close(sync[0]);
		if (setsid() < 0 || (pid = fork()) < 0)
			_exit(1);
		if (pid > 0)
			_exit(0);
		devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			dup2(devnull, 2);
			if (devnull > 2)
				close(devnull);
		}
		keep_only_fds(kp.host_fd, sync[1]);
		/* What ps shows instead of the command that started the host. */
		prctl(PR_SET_NAME, "xbd-sim-keeper");
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGALRM, SIG_DFL);
		signal(SIGPIPE, SIG_IGN);
		kp.doms = calloc(XBD_SIM_MAX_DOMID + 1, sizeof(kp.doms[0]));
		err = kp.doms ? keeper_listen(&kp) : ENOMEM;
		if (write(sync[1], &err, sizeof(err)) != sizeof(err) || err)
			_exit(1);
		close(sync[1]);
		keeper_run(&kp);
		_exit(0);
	}
	close(sync[1]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (read(sync[0], &err, sizeof(err)) != sizeof(err))
		r = -ECHILD;
	else
		r = -err;
	close(sync[0]);
	return r;
}
