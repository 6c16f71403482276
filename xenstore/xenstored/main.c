/*
 * main.c: xbd-xenstored, the simulator's xenstore daemon.
 *
 *   xbd-xenstored --dir XSDIR [--daemon] [--pid-file FILE] [--log FILE]
 *
 * Serves XSDIR/socket (domain 0, privileged) and XSDIR/domain/<N>.sock for
 * every domain dom0 introduces; a connection speaks as the domain whose
 * socket it came through.  One thread, one epoll loop, non-blocking sockets;
 * the protocol itself lives in the engine (xsd.h), which never does I/O.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "xenstore/xenstored/xsd.h"

#define PROG "xbd-xenstored"

enum obj_kind { OBJ_SIGNAL, OBJ_LISTENER, OBJ_CLIENT };

struct listener {
	enum obj_kind kind;
	struct listener *next;
	int fd;
	unsigned int domid;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

struct client {
	enum obj_kind kind;
	int fd;
	uint32_t events;	/* epoll interest currently registered */
	struct xsd_conn *c;
};

struct daemon {
	int epfd;
	int sigfd;
	enum obj_kind sigtag;
	struct xsd *x;
	const char *dir;
	struct listener *listeners;
	struct listener *retired;	/* freed after the epoll batch */
	FILE *log;
	bool stop;
};

static void logline(struct daemon *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void logline(struct daemon *d, const char *fmt, ...)
{
	char stamp[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;

	if (!d->log)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
	fprintf(d->log, "%s.%03ld %s: ", stamp, ts.tv_nsec / 1000000, PROG);
	va_start(ap, fmt);
	vfprintf(d->log, fmt, ap);
	va_end(ap);
	fputc('\n', d->log);
	fflush(d->log);
}

static void engine_log(void *opaque, const char *line)
{
	logline(opaque, "%s", line);
}

static int socket_path(char *buf, size_t len, const char *dir,
		       unsigned int domid, bool dom0)
{
	int n = dom0 ? snprintf(buf, len, "%s/socket", dir)
		     : snprintf(buf, len, "%s/domain/%u.sock", dir, domid);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Opens a listening socket, replacing a stale file but never a live
 * daemon's socket. */
static int listen_on(struct daemon *d, unsigned int domid, bool dom0,
		     struct listener **out)
{
	struct listener *l = calloc(1, sizeof(*l));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN };
	int fd = -1, probe, ret;

	if (!l)
		return -ENOMEM;
	l->kind = OBJ_LISTENER;
	l->domid = domid;
	ret = socket_path(l->path, sizeof(l->path), d->dir, domid, dom0);
	if (ret < 0)
		goto fail;
	strcpy(sa.sun_path, l->path);

	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0) {
		ret = connect(probe, (struct sockaddr *)&sa, sizeof(sa));
		close(probe);
		if (ret == 0) {
			ret = -EADDRINUSE;
			goto fail;
		}
	}
	unlink(l->path);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(l->path, 0600) < 0 || listen(fd, 128) < 0) {
		ret = -errno;
		goto fail;
	}
	l->fd = fd;
	ev.data.ptr = l;
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		ret = -errno;
		unlink(l->path);
		goto fail;
	}
	l->next = d->listeners;
	d->listeners = l;
	*out = l;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(l);
	return ret;
}

static void listener_close(struct daemon *d, struct listener *l)
{
	struct listener **pp;

	for (pp = &d->listeners; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, l->fd, NULL);
	close(l->fd);
	l->fd = -1;
	unlink(l->path);
	l->next = d->retired;
	d->retired = l;
}

static int hook_introduce(void *opaque, unsigned int domid)
{
	struct daemon *d = opaque;
	struct listener *l;
	int ret = listen_on(d, domid, false, &l);

	if (ret < 0)
		logline(d, "domain %u: cannot open its socket: %s", domid,
			strerror(-ret));
	/* A socket problem on our side is an I/O error for the caller. */
	return ret < 0 ? -EIO : 0;
}

static void hook_release(void *opaque, unsigned int domid)
{
	struct daemon *d = opaque;
	struct listener *l;

	for (l = d->listeners; l; l = l->next) {
		if (l->domid == domid && domid != 0) {
			listener_close(d, l);
			return;
		}
	}
}

static void client_interest(struct daemon *d, struct client *cl)
{
	struct epoll_event ev = { .data.ptr = cl };
	uint32_t want = 0;

	if (!xsd_conn_paused(cl->c))
		want |= EPOLLIN;
	if (xsd_conn_out_bytes(cl->c))
		want |= EPOLLOUT;
	if (want == cl->events)
		return;
	ev.events = want;
	if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, cl->fd, &ev) == 0)
		cl->events = want;
}

static void client_flush(struct client *cl)
{
	struct iovec iov[64];
	struct msghdr mh = { .msg_iov = iov };
	ssize_t n;
	int cnt;

	while ((cnt = xsd_conn_out_iov(cl->c, iov, 64)) > 0) {
		mh.msg_iovlen = cnt;
		n = sendmsg(cl->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				xsd_conn_kill(cl->c, strerror(errno));
			return;
		}
		xsd_conn_out_done(cl->c, (size_t)n);
	}
}

static void client_accept(struct daemon *d, struct listener *l)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct client *cl;
	int fd;

	for (;;) {
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				logline(d, "accept on %s: %s", l->path,
					strerror(errno));
			return;
		}
		cl = calloc(1, sizeof(*cl));
		if (!cl) {
			close(fd);
			continue;
		}
		cl->kind = OBJ_CLIENT;
		cl->fd = fd;
		cl->events = EPOLLIN;
		cl->c = xsd_conn_new(d->x, l->domid, cl);
		ev.data.ptr = cl;
		if (!cl->c || epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			if (cl->c)
				xsd_conn_free(cl->c);
			close(fd);
			free(cl);
		}
	}
}

static void client_input(struct client *cl)
{
	char buf[8192];
	ssize_t n;

	if (xsd_conn_paused(cl->c))
		return;
	n = read(cl->fd, buf, sizeof(buf));
	if (n > 0) {
		xsd_conn_feed(cl->c, buf, (size_t)n);
	} else if (n == 0) {
		xsd_conn_kill(cl->c, NULL);	/* peer closed */
	} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		xsd_conn_kill(cl->c, strerror(errno));
	}
}

/* Sends what the engine queued and closes what it killed. */
static void service_attention(struct daemon *d)
{
	struct xsd_conn *c;
	struct client *cl;

	while ((c = xsd_attention_pop(d->x))) {
		cl = xsd_conn_io(c);
		if (!xsd_conn_dead(c)) {
			client_flush(cl);
			if (!xsd_conn_dead(c)) {
				client_interest(d, cl);
				continue;
			}
		}
		close(cl->fd);	/* also leaves the epoll set */
		xsd_conn_free(c);
		free(cl);
	}
}

static void handle_event(struct daemon *d, struct epoll_event *ev)
{
	enum obj_kind *kind = ev->data.ptr;
	struct client *cl;
	struct signalfd_siginfo si;

	switch (*kind) {
	case OBJ_SIGNAL:
		if (read(d->sigfd, &si, sizeof(si)) == sizeof(si))
			logline(d, "signal %u: exiting", si.ssi_signo);
		d->stop = true;
		break;
	case OBJ_LISTENER:
		if (((struct listener *)kind)->fd >= 0)
			client_accept(d, (struct listener *)kind);
		break;
	case OBJ_CLIENT:
		cl = (struct client *)kind;
		if (xsd_conn_dead(cl->c))
			break;
		if (ev->events & EPOLLOUT)
			client_flush(cl);
		if (xsd_conn_dead(cl->c))
			break;
		/* A paused client is not read, so a hangup would be reported
		 * again and again: it has gone, drop it. */
		if ((ev->events & (EPOLLHUP | EPOLLERR)) &&
		    xsd_conn_paused(cl->c))
			xsd_conn_kill(cl->c, NULL);
		else if (ev->events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			client_input(cl);
		if (!xsd_conn_dead(cl->c))
			client_interest(d, cl);
		break;
	}
}

static void free_retired(struct daemon *d)
{
	struct listener *l;

	while ((l = d->retired)) {
		d->retired = l->next;
		free(l);
	}
}

static void run(struct daemon *d)
{
	struct epoll_event evs[64];
	int n, i;

	while (!d->stop) {
		n = epoll_wait(d->epfd, evs, 64, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			logline(d, "epoll_wait: %s", strerror(errno));
			break;
		}
		/* Killed connections and closed listeners are freed only after
		 * the whole batch: later events may still point at them. */
		for (i = 0; i < n; i++)
			handle_event(d, &evs[i]);
		service_attention(d);
		free_retired(d);
	}
}

/* Domain sockets left by a daemon that died: no domain is introduced at
 * start, so none of them is live. */
static void remove_stale_domain_sockets(const char *dir)
{
	char path[4096];
	struct dirent *de;
	DIR *dh;
	size_t l;

	snprintf(path, sizeof(path), "%s/domain", dir);
	dh = opendir(path);
	if (!dh)
		return;
	while ((de = readdir(dh))) {
		l = strlen(de->d_name);
		if (l > 5 && strcmp(de->d_name + l - 5, ".sock") == 0) {
			snprintf(path, sizeof(path), "%s/domain/%s", dir,
				 de->d_name);
			unlink(path);
		}
	}
	closedir(dh);
}

static int write_pid_file(const char *file)
{
	FILE *f = fopen(file, "w");

	if (!f)
		return -errno;
	fprintf(f, "%ld\n", (long)getpid());
	if (fclose(f) != 0)
		return -errno;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " --dir XSDIR [--daemon] [--pid-file FILE] "
		"[--log FILE]\n"
		"       [--entry-nb N] [--entry-size BYTES] [--watch-nb N]\n"
		"       [--transaction N] [--perm-nb N]\n"
		"       " PROG " --help | --version\n"
		"Serves XSDIR/socket (dom0) and XSDIR/domain/N.sock (domain N)"
		"\nwith the xenstore wire protocol.  Limits apply to domains "
		"other\nthan 0 and default to Xen's: 1000 nodes, 2048 bytes "
		"per node,\n128 watches, 10 transactions, 5 permissions.\n");
}

static int parse_uint(const char *s, unsigned int *v)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(s, &end, 10);
	if (errno || !*s || *end || n > 0x7fffffff)
		return -1;
	*v = (unsigned int)n;
	return 0;
}

/* The command line. */
struct args {
	const char *pidfile, *logfile;
	bool daemonize;
	struct xsd_limits lim;
};

/* The options into a and d->dir: -1 to go on, else the exit status (said why). */
static int parse_args(int argc, char **argv, struct daemon *d, struct args *a)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "daemon", no_argument, NULL, 'D' },
		{ "pid-file", required_argument, NULL, 'p' },
		{ "log", required_argument, NULL, 'l' },
		{ "entry-nb", required_argument, NULL, 'E' },
		{ "entry-size", required_argument, NULL, 'S' },
		{ "watch-nb", required_argument, NULL, 'W' },
		{ "transaction", required_argument, NULL, 't' },
		{ "perm-nb", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned int *lp;
	int opt;

	xsd_limits_default(&a->lim);
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		lp = NULL;
		switch (opt) {
		case 'd': d->dir = optarg; break;
		case 'D': a->daemonize = true; break;
		case 'p': a->pidfile = optarg; break;
		case 'l': a->logfile = optarg; break;
		case 'E': lp = &a->lim.entries_per_domain; break;
		case 'S': lp = &a->lim.entry_size; break;
		case 'W': lp = &a->lim.watches_per_domain; break;
		case 't': lp = &a->lim.transactions_per_conn; break;
		case 'A': lp = &a->lim.perms_per_node; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf(PROG " %s\n", PACKAGE_VERSION); return 0;
		default: usage(stderr); return 2;
		}
		if (lp && parse_uint(optarg, lp) < 0) {
			fprintf(stderr, PROG ": bad number '%s'\n", optarg);
			return 2;
		}
	}
	if (!d->dir || optind != argc) {
		usage(stderr);
		return 2;
	}
	return -1;
}

/*
 * --daemon: fork; the parent exits 0 only once the child listens on
 * dom0's socket (it writes ready[1]).  In the child: -1; in the parent,
 * or on a failure, the exit status.
 */
static int daemonize_start(int ready[2])
{
	pid_t pid;
	char c;

	if (pipe2(ready, O_CLOEXEC) < 0) {
		perror(PROG ": pipe");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror(PROG ": fork");
		return 1;
	}
	if (pid > 0) {
		close(ready[1]);
		return read(ready[0], &c, 1) == 1 ? 0 : 1;
	}
	close(ready[0]);
	setsid();
	return -1;
}

/* --daemon: the standard fds to /dev/null, and the parent told it may exit: 0 or -1. */
static int daemonize_ready(int ready[2])
{
	int null = open("/dev/null", O_RDWR);
	char c = 1;

	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
	if (write(ready[1], &c, 1) != 1)
		return -1;
	close(ready[1]);
	return 0;
}

/*
 * The daemon's directories, its loop (epoll, the signals in mask), the
 * store, dom0's socket (*l) and the pid file: 0, or 1 (said why).
 */
static int serve_setup(struct daemon *d, const struct args *a, const sigset_t *mask,
		       struct xsd_hooks *hooks, struct listener **l)
{
	struct epoll_event ev = { .events = EPOLLIN };
	char path[4096];
	int ret;

	if (mkdir(d->dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, PROG ": %s: %s\n", d->dir, strerror(errno));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/domain", d->dir);
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
		return 1;
	}
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	d->sigfd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK);
	ev.data.ptr = &d->sigtag;
	if (d->epfd < 0 || d->sigfd < 0 ||
	    epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->sigfd, &ev) < 0) {
		perror(PROG ": epoll");
		return 1;
	}
	d->x = xsd_new(&a->lim, hooks);
	if (!d->x) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	ret = listen_on(d, 0, true, l);
	if (ret < 0) {
		fprintf(stderr, PROG ": %s/socket: %s\n", d->dir,
			ret == -EADDRINUSE ? "another daemon is serving it"
					   : strerror(-ret));
		return 1;
	}
	remove_stale_domain_sockets(d->dir);
	ret = write_pid_file(a->pidfile);
	if (ret < 0) {
		fprintf(stderr, PROG ": %s: %s\n", a->pidfile, strerror(-ret));
		unlink((*l)->path);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct daemon d = { .epfd = -1, .sigfd = -1, .sigtag = OBJ_SIGNAL };
	struct args a = { 0 };
	struct xsd_hooks hooks = {
		.introduce = hook_introduce, .release = hook_release,
		.log = engine_log, .opaque = &d,
	};
	char pidbuf[4096];
	struct listener *l;
	sigset_t mask;
	int ret, ready[2] = { -1, -1 };

	ret = parse_args(argc, argv, &d, &a);
	if (ret >= 0)
		return ret;
	if (!a.pidfile) {
		snprintf(pidbuf, sizeof(pidbuf), "%s/xenstored.pid", d.dir);
		a.pidfile = pidbuf;
	}
	if (a.daemonize && (ret = daemonize_start(ready)) >= 0)
		return ret;

	if (a.logfile) {
		d.log = fopen(a.logfile, "a");
		if (!d.log) {
			fprintf(stderr, PROG ": %s: %s\n", a.logfile,
				strerror(errno));
			return 1;
		}
	} else if (!a.daemonize) {
		d.log = stderr;
	}

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if (serve_setup(&d, &a, &mask, &hooks, &l))
		return 1;
	logline(&d, "serving %s (pid %ld)", l->path, (long)getpid());
	if (a.daemonize && daemonize_ready(ready))
		return 1;

	run(&d);

	xsd_kill_all(d.x);
	service_attention(&d);
	while (d.listeners)
		listener_close(&d, d.listeners);
	free_retired(&d);
	unlink(a.pidfile);
	xsd_free(d.x);
	if (d.log && d.log != stderr)
		fclose(d.log);
	close(d.sigfd);
	close(d.epfd);
	return 0;
}
