/*
 * harness.c: a simulated host for the xenbus tests.  A small reaper
 * process stops the host when the test process dies in any way (a crash
 * included), so no xbd-xenstored outlives a test.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/xenbus/harness.h"

static char host_dir[PATH_MAX];
static char sim_bin[PATH_MAX];
static int reaper_fd = -1;

static void stop_cmd(char *buf, size_t len)
{
	snprintf(buf, len, "'%s' stop '%s' >/dev/null 2>&1; rm -rf '%s'", sim_bin, host_dir,
		 host_dir);
}

static void stop_host(void)
{
	char cmd[3 * PATH_MAX + 64];

	if (!host_dir[0])
		return;
	stop_cmd(cmd, sizeof(cmd));
	if (system(cmd) == -1)
		perror("system");
	/* Tell the reaper the work is done. */
	if (reaper_fd >= 0 && write(reaper_fd, "q", 1) != 1)
		perror("reaper");
	host_dir[0] = '\0';
}

static void start_reaper(void)
{
	char cmd[3 * PATH_MAX + 64];
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		exit(99);
	stop_cmd(cmd, sizeof(cmd));
	pid = fork();
	if (pid < 0)
		exit(99);
	if (pid == 0) {
		char c;
		ssize_t n;

		close(p[1]);
		do
			n = read(p[0], &c, 1);
		while (n < 0 && errno == EINTR);
		if (n == 1)
			_exit(0);
		/* The test died without cleaning up: do it now. */
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(1);
	}
	close(p[0]);
	reaper_fd = p[1];
}

static bool executable(const char *path)
{
	return access(path, X_OK) == 0;
}

void xt_start(void)
{
	const char *top = getenv("top_builddir");
	char xsd[PATH_MAX], sock[PATH_MAX + 32];
	int st;

	if (!top) {
		fprintf(stderr, "top_builddir is not set (run through make check)\n");
		exit(99);
	}
	snprintf(sim_bin, sizeof(sim_bin), "%s/sim/xbd-sim", top);
	snprintf(xsd, sizeof(xsd), "%s/xenstore/xbd-xenstored", top);
	if (!executable(sim_bin) || !executable(xsd)) {
		fprintf(stderr, "SKIP: needs %s and %s (not built yet)\n", sim_bin, xsd);
		exit(77);
	}
	setenv("XBD_XENSTORED", xsd, 1);
	snprintf(host_dir, sizeof(host_dir), "%s/xbd-xenbus.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(host_dir)) {
		perror("mkdtemp");
		exit(99);
	}
	start_reaper();
	atexit(stop_host);
	st = xt_sim("start", "");
	if (st != 0) {
		fprintf(stderr, "FAIL: xbd-sim start %s exited %d\n", host_dir, st);
		exit(1);
	}
	snprintf(sock, sizeof(sock), "%s/xenstore/socket", host_dir);
	setenv("XENSTORED_PATH", sock, 1);
}

const char *xt_dir(void)
{
	return host_dir;
}

static void build_cmd(char *buf, size_t len, const char *cmd, const char *args)
{
	/* "domain create" etc. take DIR after the two words. */
	snprintf(buf, len, "'%s' %s '%s' %s", sim_bin, cmd, host_dir, args);
}

int xt_sim(const char *cmd, const char *args)
{
	char line[2 * PATH_MAX + 512];
	int st;

	build_cmd(line, sizeof(line), cmd, args);
	strncat(line, " >/dev/null", sizeof(line) - strlen(line) - 1);
	st = system(line);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

unsigned long xt_sim_num(const char *cmd, const char *args)
{
	char line[2 * PATH_MAX + 512], out[64];
	unsigned long v;
	FILE *f;
	int st;

	build_cmd(line, sizeof(line), cmd, args);
	f = popen(line, "r");
	if (!f || !fgets(out, sizeof(out), f)) {
		fprintf(stderr, "FAIL: no output from %s\n", line);
		exit(1);
	}
	st = pclose(f);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "FAIL: %s failed\n", line);
		exit(1);
	}
	v = strtoul(out, NULL, 10);
	return v;
}

struct xbd_xs *xt_open_as(uint32_t domid)
{
	char sock[PATH_MAX + 64], *saved;
	struct xbd_xs *xs;
	int r;

	saved = strdup(getenv("XENSTORED_PATH"));
	if (domid == 0)
		snprintf(sock, sizeof(sock), "%s/xenstore/socket", host_dir);
	else
		snprintf(sock, sizeof(sock), "%s/xenstore/domain/%u.sock", host_dir, domid);
	setenv("XENSTORED_PATH", sock, 1);
	r = xbd_xs_open(&xs);
	setenv("XENSTORED_PATH", saved, 1);
	free(saved);
	if (r) {
		fprintf(stderr, "FAIL: cannot connect as domain %u (%s): %s\n", domid, sock,
			strerror(-r));
		exit(1);
	}
	return xs;
}

void xt_pump(struct xbd_xs *xs, int ms, const volatile bool *flag)
{
	int64_t end = xbd_mono_ms() + ms;

	while (!(flag && *flag)) {
		struct pollfd pfd = { .fd = xbd_xs_fd(xs), .events = POLLIN };
		int64_t left = end - xbd_mono_ms();

		if (left <= 0)
			break;
		poll(&pfd, 1, (int)left);
		CHECK(xbd_xs_dispatch(xs) >= 0);
	}
}
