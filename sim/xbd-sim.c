/*
 * xbd-sim.c: the `xbd-sim` command, which brings a simulated Xen host up
 * and down (start, stop), prints the environment that makes a process act
 * as one of its domains (env), and dispatches the domain and disk
 * subcommands (xbd-sim-domain.c, xbd-sim-disk.c).  The host's layout:
 * DIR/hv for the hypervisor state (sim/simhost.h; its files in
 * sim/hypervisor.h), DIR/xenstore for xbd-xenstored.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "sim/simhost.h"
#include "sim/xbd-sim.h"

static const char usage_text[] =
	"usage: xbd-sim start DIR\n"
	"       xbd-sim stop DIR\n"
	"       xbd-sim env DIR DOMID\n"
	"       xbd-sim domain create DIR [DOMID] [--mem MiB] [--name NAME]\n"
	"       xbd-sim domain destroy DIR DOMID\n"
	"       xbd-sim domain list DIR\n"
	"       xbd-sim disk add DIR DOMID VDEV TARGET [--mode w|r|w!] [--type vbd|vbd3]\n"
	"                    [--device-type disk|cdrom] [--backend-domid N]\n"
	"                    [--discard-enable 0|1] [--script PATH]\n"
	"       xbd-sim disk remove DIR DOMID DEVID [--timeout S]\n"
	"       xbd-sim --help | --version\n";

/* How long xbd-xenstored --daemon may take to say its socket is ready. */
#define DAEMON_START_TIMEOUT_MS 10000
/* How long the daemon may take to exit on SIGTERM before it gets SIGKILL. */
#define DAEMON_STOP_TIMEOUT_MS 5000

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static bool is_executable(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode) && !access(path, X_OK);
}

/*
 * Where xbd-xenstored is: $XBD_XENSTORED; else next to this binary
 * (installed side by side), or in the build tree's xenstore/ beside our
 * sim/; else whatever PATH finds.
 */
static void find_xenstored(char *buf, size_t len)
{
	static const char *const rel[] = { "/xbd-xenstored", "/../xenstore/xbd-xenstored",
					   "/../sbin/xbd-xenstored" };
	const char *env = getenv("XBD_XENSTORED");
	char self[PATH_MAX];
	ssize_t n;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		char *slash;

		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			size_t l;

			*slash = '\0';
			/* A libtool build may run us from sim/.libs/. */
			l = strlen(self);
			if (l >= 6 && !strcmp(self + l - 6, "/.libs"))
				self[l - 6] = '\0';
			for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
				if ((size_t)snprintf(buf, len, "%s%s", self, rel[i]) < len &&
				    is_executable(buf))
					return;
			}
		}
	}
	snprintf(buf, len, "xbd-xenstored");
}

/* Run xbd-xenstored --daemon; it exits 0 once the dom0 socket accepts connections. */
static int start_xenstored(const struct sim_host *h)
{
	char exe[PATH_MAX], log[PATH_MAX];
	uint64_t deadline;
	pid_t pid;
	int status;

	find_xenstored(exe, sizeof(exe));
	if ((size_t)snprintf(log, sizeof(log), "%s/xenstored.log", h->xsdir) >= sizeof(log))
		return -ENAMETOOLONG;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execlp(exe, exe, "--dir", h->xsdir, "--daemon", "--pid-file", h->pidfile, "--log",
		       log, (char *)NULL);
		sim_err("cannot run %s: %s (set XBD_XENSTORED)", exe, strerror(errno));
		_exit(127);
	}
	deadline = xbd_mono_ms() + DAEMON_START_TIMEOUT_MS;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (xbd_mono_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			sim_err("%s did not get ready within %d s", exe, DAEMON_START_TIMEOUT_MS / 1000);
			return -ETIMEDOUT;
		}
		sleep_ms(5);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (!(WIFEXITED(status) && WEXITSTATUS(status) == 127))
			sim_err("%s failed to start (see %s)", exe, log);
		return -EIO;
	}
	return 0;
}

static pid_t read_pidfile(const char *path)
{
	char buf[32];
	uint64_t v;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (xbd_xs_parse_uint(buf, 2, INT32_MAX, &v))
		return -1;
	return (pid_t)v;
}

/* A daemon we did not fork cannot be reaped by us: a zombie counts as gone. */
static bool process_alive(pid_t pid)
{
	return !xbd_sim_pid_gone((uint32_t)pid);
}

static int stop_xenstored(const struct sim_host *h)
{
	pid_t pid = read_pidfile(h->pidfile);
	uint64_t deadline;

	if (pid <= 0)
		return -ENOENT;
	if (kill(pid, SIGTERM) && errno == ESRCH)
		return 0;
	deadline = xbd_mono_ms() + DAEMON_STOP_TIMEOUT_MS;
	while (process_alive(pid)) {
		if (xbd_mono_ms() > deadline) {
			sim_err("xbd-xenstored (pid %d) ignored SIGTERM; killing it", (int)pid);
			kill(pid, SIGKILL);
			break;
		}
		sleep_ms(5);
	}
	return 0;
}

/* rm -r of a tree we made (no symlinks followed). */
static int remove_tree(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int ret = 0;

	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) ? -errno : 0;
	d = opendir(path);
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char child[PATH_MAX];
		int r;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if ((size_t)snprintf(child, sizeof(child), "%s/%s", path, e->d_name) >= sizeof(child)) {
			ret = -ENAMETOOLONG;
			continue;
		}
		r = remove_tree(child);
		if (r && !ret)
			ret = r;
	}
	closedir(d);
	if (rmdir(path) && !ret)
		ret = -errno;
	return ret;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
	char p[PATH_MAX];

	if ((size_t)snprintf(p, sizeof(p), "%s", path) >= sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

/* 1 if DIR is absent or an empty directory, 0 if not, -errno when we cannot tell. */
static int dir_unused(const char *path)
{
	struct stat st;
	struct dirent *e;
	DIR *d;
	int empty = 1;

	if (stat(path, &st))
		return errno == ENOENT ? 1 : -errno;
	if (!S_ISDIR(st.st_mode))
		return 0;
	d = opendir(path);
	if (!d)
		return -errno;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			empty = 0;
			break;
		}
	closedir(d);
	return empty;
}

static int write_dom0_txn(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	/* What xen-init-dom0 writes for dom0, which no toolstack creates. */
	static const struct xbd_xs_kv dom0[] = {
		{ "domid", "0" },
		{ "name", "Domain-0" },
	};

	return xbd_xs_write_kvs(xs, t, "/local/domain/0", dom0, 2);
}

static int cmd_start(int argc, char **argv)
{
	struct sim_host h;
	bool hv = false, daemon = false;
	int ret;

	if (argc != 2)
		sim_die(SIM_EXIT_USAGE, "usage: xbd-sim start DIR");
	sim_host_paths(&h, argv[1]);
	ret = dir_unused(h.dir);
	if (ret < 0)
		sim_die(SIM_EXIT_FAIL, "%s: %s", h.dir, strerror(-ret));
	if (!ret)
		sim_die(SIM_EXIT_FAIL, "%s is not empty (a simulated host needs a fresh directory)",
			h.dir);
	ret = make_dirs(h.xsdir);
	if (!ret)
		ret = make_dirs(h.rundir);
	if (ret)
		sim_die(SIM_EXIT_FAIL, "cannot create %s: %s", h.xsdir, strerror(-ret));

	ret = xbd_sim_host_init(h.dir);
	if (ret) {
		sim_err("cannot initialise the simulated hypervisor in %s/hv: %s", h.dir,
			strerror(-ret));
		goto fail;
	}
	hv = true;
	ret = start_xenstored(&h);
	if (ret)
		goto fail;
	daemon = true;
	ret = xbd_sim_domain_create(h.dir, 0, XBD_SIM_DEFAULT_MEM_BYTES);
	if (ret) {
		sim_err("cannot create dom0: %s", strerror(-ret));
		goto fail;
	}
	sim_connect(&h);
	ret = xbd_xs_transact(h.xs, write_dom0_txn, NULL);
	sim_disconnect(&h);
	if (ret) {
		sim_err("cannot write /local/domain/0: %s", strerror(-ret));
		goto fail;
	}
	return 0;

fail:
	if (daemon)
		stop_xenstored(&h);
	if (hv)
		xbd_sim_host_cleanup(h.dir);
	remove_tree(h.xsdir);
	remove_tree(h.rundir);
	return SIM_EXIT_FAIL;
}

static int cmd_stop(int argc, char **argv)
{
	struct sim_host h;
	struct stat st;
	uint32_t *ids = NULL;
	unsigned int n = 0;
	int ret, rc = 0;

	if (argc != 2)
		sim_die(SIM_EXIT_USAGE, "usage: xbd-sim stop DIR");
	sim_host_paths(&h, argv[1]);
	if (stat(h.xsdir, &st) && errno == ENOENT) {
		char hvdir[PATH_MAX];

		if ((size_t)snprintf(hvdir, sizeof(hvdir), "%s/hv", h.dir) >= sizeof(hvdir) ||
		    (stat(hvdir, &st) && errno == ENOENT))
			sim_die(SIM_EXIT_FAIL, "no simulated host at %s", h.dir);
	}

	/*
	 * Guests first, as a host shutdown would, so backends see
	 * @releaseDomain.  With the daemon gone already there is nobody to
	 * tell: the hypervisor state is dropped below all the same.
	 */
	if (!stat(h.socket, &st) && !sim_try_connect(&h)) {
		ret = sim_list_domains(&h, &ids, &n);
		if (ret) {
			sim_err("cannot list domains: %s", strerror(-ret));
			rc = SIM_EXIT_FAIL;
		}
		for (unsigned int i = 0; i < n; i++)
			if (ids[i] != 0 && sim_domain_destroy(&h, ids[i]))
				rc = SIM_EXIT_FAIL;
		free(ids);
		sim_disconnect(&h);
	}

	ret = stop_xenstored(&h);
	if (ret && ret != -ENOENT) {
		sim_err("cannot stop xbd-xenstored: %s", strerror(-ret));
		rc = SIM_EXIT_FAIL;
	}
	if (xbd_sim_domain_exists(h.dir, 0) == 1)
		xbd_sim_domain_destroy(h.dir, 0);
	ret = xbd_sim_host_cleanup(h.dir);
	if (ret && ret != -ENOENT) {
		sim_err("cannot remove %s/hv: %s", h.dir, strerror(-ret));
		rc = SIM_EXIT_FAIL;
	}
	ret = remove_tree(h.xsdir);
	if (ret) {
		sim_err("cannot remove %s: %s", h.xsdir, strerror(-ret));
		rc = SIM_EXIT_FAIL;
	}
	/* What the host's daemons kept for a restart (xbd-back's crash journals) ends with it. */
	ret = remove_tree(h.rundir);
	if (ret && ret != -ENOENT) {
		sim_err("cannot remove %s: %s", h.rundir, strerror(-ret));
		rc = SIM_EXIT_FAIL;
	}
	/* DIR itself goes only if nothing else was put there. */
	rmdir(h.dir);
	return rc;
}

/* Print s single-quoted for sh. */
static void put_quoted(const char *s)
{
	putchar('\'');
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*s);
	}
	putchar('\'');
}

static int cmd_env(int argc, char **argv)
{
	char sock[PATH_MAX];
	struct sim_host h;
	struct stat st;
	uint32_t domid;
	int r, ret;

	if (argc != 3)
		sim_die(SIM_EXIT_USAGE, "usage: xbd-sim env DIR DOMID");
	sim_host_paths(&h, argv[1]);
	domid = sim_parse_domid("DOMID", argv[2], 0);
	if (stat(h.socket, &st) || !S_ISSOCK(st.st_mode))
		sim_die(SIM_EXIT_FAIL, "no simulated host at %s (no %s)", h.dir, h.socket);
	r = xbd_sim_domain_exists(h.dir, domid);
	if (r < 0)
		sim_die(SIM_EXIT_FAIL, "cannot look up domain %u: %s", domid, strerror(-r));
	if (!r)
		sim_die(SIM_EXIT_FAIL, "no domain %u on %s", domid, h.dir);
	/* sim_host_paths() made sure these fit. */
	if (domid == 0)
		ret = snprintf(sock, sizeof(sock), "%s", h.socket);
	else
		ret = snprintf(sock, sizeof(sock), "%s/domain/%u.sock", h.xsdir, domid);
	if (ret < 0 || (size_t)ret >= sizeof(sock))
		sim_die(SIM_EXIT_USAGE, "DIR '%s' is too long", h.dir);

	fputs("export XBD_SIM_DIR=", stdout);
	put_quoted(h.dir);
	printf("\nexport XBD_SIM_DOMID=%u\n", domid);
	fputs("export XENSTORED_PATH=", stdout);
	put_quoted(sock);
	putchar('\n');
	return fflush(stdout) ? SIM_EXIT_FAIL : 0;
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2) {
		sim_err("missing command (try xbd-sim --help)");
		return SIM_EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version")) {
		printf("xbd-sim %s\n", PACKAGE_VERSION);
		return 0;
	}
	/* A dead reader of our stdout must not kill us halfway through a host change. */
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(cmd, "start"))
		return cmd_start(argc - 1, argv + 1);
	if (!strcmp(cmd, "stop"))
		return cmd_stop(argc - 1, argv + 1);
	if (!strcmp(cmd, "env"))
		return cmd_env(argc - 1, argv + 1);
	if (!strcmp(cmd, "domain"))
		return sim_cmd_domain(argc - 1, argv + 1);
	if (!strcmp(cmd, "disk"))
		return sim_cmd_disk(argc - 1, argv + 1);
	sim_err("unknown command '%s' (try xbd-sim --help)", cmd);
	return SIM_EXIT_USAGE;
}
