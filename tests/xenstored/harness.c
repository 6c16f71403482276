/*
 * harness.c: start/stop a private xbd-xenstored and talk to it, for the
 * xenstored tests (see harness.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdint.h>
#include <xen/io/xs_wire.h>

#include "tests/xenstored/harness.h"

int failures;

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

bool daemon_socket(const struct daemon *d, unsigned int domid, char *buf,
		   size_t len)
{
	int n;

	if (domid == 0)
		n = snprintf(buf, len, "%s/socket", d->xsdir);
	else
		n = snprintf(buf, len, "%s/domain/%u.sock", d->xsdir, domid);
	return n > 0 && (size_t)n < len;
}

int raw_as(const struct daemon *d, unsigned int domid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (!daemon_socket(d, domid, sa.sun_path, sizeof(sa.sun_path)) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

void daemon_start(struct daemon *d, ...)
{
	const char *top = getenv("top_builddir");
	char prog[4096];
	const char *argv[32];
	va_list ap;
	int argc = 0, i, fd;

	snprintf(prog, sizeof(prog), "%s/xenstore/xbd-xenstored",
		 top ? top : ".");
	strcpy(d->tmp, "/tmp/xsd-test.XXXXXX");
	if (!mkdtemp(d->tmp)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(d->xsdir, sizeof(d->xsdir), "%s/xs", d->tmp);
	argv[argc++] = prog;
	argv[argc++] = "--dir";
	argv[argc++] = d->xsdir;
	va_start(ap, d);
	while (argc < 30 && (argv[argc] = va_arg(ap, const char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;

	d->pid = fork();
	if (d->pid < 0) {
		perror("fork");
		exit(1);
	}
	if (d->pid == 0) {
		/* The daemon must not outlive a crashed test. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Its log (and any sanitizer report) goes to a file shown
		 * if it does not exit cleanly. */
		if (getenv("XSD_TEST_VERBOSE") == NULL) {
			char log[128];

			snprintf(log, sizeof(log), "%s/daemon.log", d->tmp);
			fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
			if (fd >= 0)
				dup2(fd, 2);
		}
		execv(prog, (char **)argv);
		perror(prog);
		_exit(127);
	}
	for (i = 0; i < 500; i++) {
		fd = raw_as(d, 0);
		if (fd >= 0) {
			close(fd);
			return;
		}
		if (!daemon_alive(d))
			break;
		sleep_ms(10);
	}
	fprintf(stderr, "cannot start %s\n", prog);
	daemon_stop(d);
	exit(1);
}

bool daemon_alive(const struct daemon *d)
{
	int st;

	return d->pid > 0 && waitpid(d->pid, &st, WNOHANG) == 0;
}

void daemon_stop(struct daemon *d)
{
	char cmd[128];
	int st;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		/* A clean exit also means no leak report from LeakSanitizer
		 * in sanitizer builds. */
		if (waitpid(d->pid, &st, 0) != d->pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0) {
			failures++;
			fprintf(stderr, "FAIL: daemon did not exit cleanly "
				"(status 0x%x); its log:\n", st);
			snprintf(cmd, sizeof(cmd), "tail -n 40 '%s/daemon.log'",
				 d->tmp);
			if (system(cmd) != 0)
				fprintf(stderr, "(no log)\n");
		}
		d->pid = 0;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", d->tmp);
}

struct xs_handle *xs_as(const struct daemon *d, unsigned int domid)
{
	char path[256];

	/* libxenstore reads XENSTORED_PATH at every xs_open(), so handles
	 * for several domains can live in one process. */
	if (!daemon_socket(d, domid, path, sizeof(path)))
		return NULL;
	setenv("XENSTORED_PATH", path, 1);
	return xs_open(0);
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int raw_send(int fd, uint32_t type, uint32_t req_id, uint32_t tx_id,
	     const void *body, uint32_t len)
{
	struct xsd_sockmsg h = { type, req_id, tx_id, len };

	if (write_all(fd, &h, sizeof(h)) < 0)
		return -1;
	return len ? write_all(fd, body, len) : 0;
}

static int read_full(int fd, void *buf, size_t len, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char *b = buf;
	ssize_t n;
	int r;

	while (len) {
		r = poll(&p, 1, timeout_ms);
		if (r == 0)
			return -2;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		n = read(fd, b, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

int raw_recv(int fd, uint32_t *type, uint32_t *req_id, uint32_t *tx_id,
	     char *body, size_t cap, int timeout_ms)
{
	struct xsd_sockmsg h;
	int r = read_full(fd, &h, sizeof(h), timeout_ms);

	if (r < 0)
		return r;
	if ((size_t)h.len >= cap)
		return -1;
	r = read_full(fd, body, h.len, timeout_ms);
	if (r < 0)
		return r;
	body[h.len] = '\0';
	if (type)
		*type = h.type;
	if (req_id)
		*req_id = h.req_id;
	if (tx_id)
		*tx_id = h.tx_id;
	return (int)h.len;
}

void make_domain(struct xs_handle *h0, unsigned int domid)
{
	static const char *const sub[] = { "data", "device", "control" };
	struct xs_permissions home[2] = {
		{ .id = 0, .perms = XS_PERM_NONE },
		{ .id = domid, .perms = XS_PERM_READ },
	};
	struct xs_permissions own[1] = {
		{ .id = domid, .perms = XS_PERM_NONE },
	};
	char path[128], val[16];
	unsigned int i;

	snprintf(path, sizeof(path), "/local/domain/%u", domid);
	if (!xs_mkdir(h0, XBT_NULL, path) ||
	    !xs_set_permissions(h0, XBT_NULL, path, home, 2)) {
		fprintf(stderr, "cannot create %s\n", path);
		exit(1);
	}
	snprintf(path, sizeof(path), "/local/domain/%u/domid", domid);
	snprintf(val, sizeof(val), "%u", domid);
	xs_write(h0, XBT_NULL, path, val, strlen(val));
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "/local/domain/%u/%s", domid,
			 sub[i]);
		if (!xs_mkdir(h0, XBT_NULL, path) ||
		    !xs_set_permissions(h0, XBT_NULL, path, own, 1)) {
			fprintf(stderr, "cannot create %s\n", path);
			exit(1);
		}
	}
	if (!xs_introduce_domain(h0, domid, 0xfeed, 7)) {
		fprintf(stderr, "cannot introduce domain %u: %s\n", domid,
			strerror(errno));
		exit(1);
	}
}

bool next_event(struct xs_handle *h, int timeout_ms, char *path,
		size_t plen, char *token, size_t tlen)
{
	struct pollfd p = { .fd = xs_fileno(h), .events = POLLIN };
	char **v;

	for (;;) {
		v = xs_check_watch(h);
		if (v) {
			snprintf(path, plen, "%s", v[XS_WATCH_PATH]);
			snprintf(token, tlen, "%s", v[XS_WATCH_TOKEN]);
			free(v);
			return true;
		}
		if (poll(&p, 1, timeout_ms) <= 0)
			return false;
	}
}

bool no_event(struct xs_handle *h, int timeout_ms)
{
	char p[256], t[256];

	return !next_event(h, timeout_ms, p, sizeof(p), t, sizeof(t));
}
