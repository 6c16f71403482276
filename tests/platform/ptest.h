/*
 * tests/platform/ptest.h: what the platform tests share: a simulated host
 * in a fresh temporary directory (removed at exit, on a timeout or a
 * signal), platforms acting as given domains, children that die with
 * their parent, and CHECK() that names the failing condition.
 */
#ifndef XBD_PTEST_H
#define XBD_PTEST_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/platform.h"
#include "sim/simhost.h"

#define CHECK(cond, ...)                                                        \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, \
				#cond);                                         \
			fprintf(stderr, __VA_ARGS__);                           \
			fputc('\n', stderr);                                    \
			ptest_exit(1);                                          \
		}                                                               \
	} while (0)

static char ptest_dir[64];
static pid_t ptest_owner;

static void ptest_cleanup(void)
{
	if (*ptest_dir && getpid() == ptest_owner) {
		xbd_sim_host_cleanup(ptest_dir);
		rmdir(ptest_dir);
		*ptest_dir = '\0';
	}
}

/* Children leave the host to the parent: they never run its cleanup. */
static inline void ptest_exit(int code)
{
	if (getpid() != ptest_owner)
		_exit(code);
	exit(code);
}

static void ptest_on_signal(int sig)
{
	static const char msg[] = "ptest: timed out or killed\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	ptest_cleanup();
	_exit(1);
}

/* A new simulated host with domains 0..ndoms-1; the test gets timeout s. */
static inline const char *ptest_host(unsigned int ndoms, unsigned int timeout)
{
	int r;

	ptest_owner = getpid();
	const char *tmp = getenv("TMPDIR");

	if (!tmp || !*tmp || strlen(tmp) > sizeof(ptest_dir) - 20)
		tmp = "/tmp";
	snprintf(ptest_dir, sizeof(ptest_dir), "%s/xbd-ptest-XXXXXX", tmp);
	if (!mkdtemp(ptest_dir)) {
		perror("mkdtemp");
		exit(99);
	}
	atexit(ptest_cleanup);
	signal(SIGALRM, ptest_on_signal);
	signal(SIGTERM, ptest_on_signal);
	signal(SIGINT, ptest_on_signal);
	alarm(timeout);
	r = xbd_sim_host_init(ptest_dir);
	CHECK(r == 0, "host init: %s", strerror(-r));
	for (unsigned int d = 0; d < ndoms; d++) {
		r = xbd_sim_domain_create(ptest_dir, d, 0);
		CHECK(r == 0, "create dom%u: %s", d, strerror(-r));
	}
	return ptest_dir;
}

static inline struct xbd_platform *ptest_open(uint32_t domid)
{
	struct xbd_platform *p;
	int r = xbd_platform_open_sim(ptest_dir, domid, &p);

	CHECK(r == 0, "open as dom%u: %s", domid, strerror(-r));
	return p;
}

/* fork() a child that dies with us; returns its pid (0 in the child). */
static inline pid_t ptest_fork(void)
{
	pid_t pid = fork();

	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(0);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
	}
	return pid;
}

/* Wait for a child; its exit status, or 128+signal. */
static inline int ptest_wait(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Fixed-size messages between a test's processes over a pipe. */
static inline void ptest_send(int fd, const void *buf, size_t len)
{
	CHECK(write(fd, buf, len) == (ssize_t)len, "pipe write: %s", strerror(errno));
}

static inline void ptest_recv(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		CHECK(n > 0, "pipe read: %s", n ? strerror(errno) : "peer closed");
		got += (size_t)n;
	}
}

#endif /* XBD_PTEST_H */
