/*
 * spawn.c: starting a worker (supervisor.h): our own binary exec'd as
 * `xbd-back --worker 3` (posix_spawn: nothing of our memory is copied or
 * runs in the child), its counters' memory, HELLO with what it needs to
 * confine itself, its place in its cgroup.  Nothing here waits for it:
 * its READY comes as a message (supervisor.c).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "blkback/workers/cgroup.h"
#include "blkback/workers/supervisor.h"
#include "common/clock.h"

extern char **environ;

/* Our environment for the workers; a sanitizer build's leak check would ptrace them. */
char **workers_env(bool sanitizers)
{
	size_t n = 0, i, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (i = 0; i < n; i++) {
		if (sanitizers && !strncmp(environ[i], "ASAN_OPTIONS=", 13))
			continue;
		env[k++] = environ[i];
	}
	if (sanitizers) {
		const char *old = getenv("ASAN_OPTIONS");

		if (asprintf(&env[k++], "ASAN_OPTIONS=%s%sdetect_leaks=0", old ? old : "",
			     old && *old ? ":" : "") < 0)
			k--;
	}
	env[k] = NULL;
	return env;
}

static int make_slots(struct xbd_worker *w)
{
	size_t size = sizeof(struct xbd_wslot) * XBD_WORKER_SLOTS;
	int fd = memfd_create("xbd-back-counters", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p;

	if (fd < 0)
		return -errno;
	/* Sealed: a worker cannot shrink it under us (a SIGBUS here). */
	if (ftruncate(fd, (off_t)size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) ||
	    (p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		int err = -errno;

		close(fd);
		return err;
	}
	w->stats_fd = fd;
	w->slots = p;
	return 0;
}

/*
 * Start our own binary as `xbd-back --worker 3` with sock at fd 3:
 * posix_spawn, whose child shares our memory until its exec (vfork), so
 * the main loop pays no copy of its page tables (tens of ms for a
 * sanitizer build's), and nothing of ours runs in the child.  The binary
 * is the one we were started from (exe_fd), through /proc/self/fd as
 * fexecve(3) does.  -errno on failure.
 */
static pid_t spawn(struct xbd_workers *ws, int sock)
{
	char *argv[] = { (char *)"xbd-back", (char *)"--worker", (char *)"3", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	char exe[64];
	sigset_t none;
	pid_t pid = -1;
	int err, moved = -1;

	/* dup2 onto itself would keep close-on-exec: move it off 3 first. */
	if (sock == XBD_WORKER_FD) {
		moved = fcntl(sock, F_DUPFD_CLOEXEC, XBD_WORKER_FD + 1);
		if (moved < 0)
			return -errno;
		sock = moved;
	}
	snprintf(exe, sizeof(exe), "/proc/self/fd/%d", ws->exe_fd);
	sigemptyset(&none);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	err = posix_spawn_file_actions_adddup2(&fa, sock, XBD_WORKER_FD);
	if (!err)
		err = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDWR, 0);
	if (!err)
		err = posix_spawn_file_actions_adddup2(&fa, STDIN_FILENO, STDOUT_FILENO);
	if (!err)
		err = posix_spawnattr_setsigmask(&at, &none);
	if (!err)
		err = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
	if (!err)
		err = posix_spawn(&pid, exe, &fa, &at, argv, ws->envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (moved >= 0)
		close(moved);
	return err ? -err : pid;
}

void workers_said_skipped(struct xbd_workers *ws, const struct xbd_worker *w, uint32_t skipped)
{
	char names[400];
	uint32_t fresh = skipped & ~ws->said;

	if (!fresh)
		return;
	ws->said |= fresh;
	xbd_confine_describe(fresh, names, sizeof(names));
	xbd_log(XBD_LOG_WARNING, "%s could not confine itself fully: skipped %s", w->name, names);
}

/*
 * Fork and exec the worker and hand it HELLO; its READY comes later
 * (worker_ready).  0 once it runs, or -errno.
 */
int worker_start(struct xbd_worker *w)
{
	struct xbd_workers *ws = w->ws;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = w };
	struct xbd_wmsg m;
	int sv[2], fds[2], nfds = 1, err;
	bool limited = false;

	if (!w->slots && (err = make_slots(w)))
		return err;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_HELLO;
	m.u.hello.self_domid = ws->self_domid;
	m.u.hello.domid = w->domid;
	m.u.hello.uid = m.u.hello.gid = w->uid;
	m.u.hello.log_level = xbd_log_level();
	m.u.hello.main_pid = (uint32_t)getpid();
	m.u.hello.sanitizers = ws->sanitizers;
	fds[0] = w->stats_fd;
	if (ws->sim) {
		m.u.hello.platform = XBD_WPLAT_SIM;
		memcpy(m.u.hello.sim_dir, ws->sim_dir, sizeof(m.u.hello.sim_dir));
	} else {
		m.u.hello.platform = XBD_WPLAT_XEN;
		fds[1] = xbd_xen_gntdev_open(WORKER_MAX_GRANTS, &limited);
		if (fds[1] < 0) {
			close(sv[0]);
			close(sv[1]);
			return fds[1];
		}
		nfds = 2;
	}
#ifdef XBD_TEST_HOOKS
	/* The forbidden call of the tests: the domain's first worker only. */
	if (!w->restarts)
		memcpy(m.u.hello.test_hook, ws->test_hook, sizeof(m.u.hello.test_hook));
	if (ws->test_delay_ms && ws->test_delay_domid == w->domid)
		m.u.hello.test_start_delay_ms = ws->test_delay_ms;
	if (ws->test_misbehave[0] && ws->test_misbehave_domid == w->domid) {
		/* "silent-once": the domain's first worker is silent, the next ones are not */
		if (!strcmp(ws->test_misbehave, "silent-once")) {
			if (!w->restarts)
				memcpy(m.u.hello.test_misbehave, "silent", sizeof("silent"));
		} else {
			memcpy(m.u.hello.test_misbehave, ws->test_misbehave,
			       sizeof(m.u.hello.test_misbehave));
		}
	}
#endif
	w->pid = spawn(ws, sv[1]);
	close(sv[1]);
	if (w->pid < 0) {
		err = w->pid;
		w->pid = 0;
		close(sv[0]);
		if (nfds == 2)
			close(fds[1]);
		return err;
	}
	worker_set_life(w, WORKER_SPAWNED);
	w->sock = sv[0];
	w->exiting = false;
	w->gntdev_limited = limited;
	/* Into its cgroup before HELLO, so before it serves anything. */
	if (ws->cg) {
		w->cg_placed = !xbd_cgroup_place(ws->cg, w->domid, w->pid);
		w->cg_io = w->cg_cpu = 0;
		worker_weights(w);
	}
	/* (A fresh socket's buffer takes HELLO at once: nothing waits here.) */
	err = xbd_wmsg_send(w->sock, &m, fds, (unsigned int)nfds, ANSWER_TIMEOUT_MS);
	if (nfds == 2)
		close(fds[1]);
	if (err) {
		/* Its death comes through SIGCHLD. */
		xbd_log(XBD_LOG_ERR, "%s did not start: %s", w->name, strerror(-err));
		kill(w->pid, SIGKILL);
		return err;
	}
	worker_set_life(w, WORKER_STARTING);
	w->start_deadline = xbd_mono_ms() + ws->start_timeout_ms;
	w->budget = MSG_RATE;
	w->budget_ms = xbd_mono_ms();
	epoll_ctl(ws->epfd, EPOLL_CTL_ADD, w->sock, &ev);
	workers_arm_timer(ws);
	xbd_log(XBD_LOG_VERBOSE, "%s starting (pid %d)", w->name, (int)w->pid);
	return 0;
}

