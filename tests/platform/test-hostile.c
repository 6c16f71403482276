/*
 * test-hostile: a process acting as a guest attacks the simulated
 * hypervisor through the files it legitimately holds, and the backend
 * (dom0) must neither crash nor hang, as on real Xen.
 * - Shrinking: the guest tries to truncate (or grow, or seal) its memory,
 *   grant table and Xen files, and the host file, by fd and by every name
 *   it can find; all fail, and the backend's mapping of the guest's pages
 *   still reads and writes the guest's bytes (before: SIGBUS in the backend).
 * - Locks: the guest holds its own grant and event channel locks and
 *   sleeps; the backend's map, copy and bind fail within the bound instead
 *   of hanging, and work again once the guest process is killed.
 * - Scribbling: rewritten pin counts, pinned frames and port records make
 *   the backend's operations fail, never reach outside the guest's memory.
 * - The keeper process goes with its host (cleanup, or its socket removed).
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "common/clock.h"
#include "sim/layout.h"
#include "tests/platform/ptest.h"

#define N 4

static pid_t keeper_pid(const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/hv/keeper", dir);
	CHECK(s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect keeper: %s",
	      strerror(errno));
	CHECK(getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0, "SO_PEERCRED");
	close(s);
	return cred.pid;
}

/* Gone, or a zombie waiting for init to reap it. */
static bool process_gone(pid_t pid, double timeout)
{
	for (double end = xbd_mono_s() + timeout; xbd_mono_s() < end; usleep(20000)) {
		char path[64], buf[256];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		f = fopen(path, "r");
		if (!f)
			return true;
		buf[0] = '\0';
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
		if (strstr(buf, ") Z "))
			return true;
	}
	return false;
}

/* Every way a guest process could shrink fd: each must fail. */
static void try_shrink(int fd, const char *what)
{
	struct stat st;

	CHECK(fstat(fd, &st) == 0 && st.st_size > 0, "%s: fstat", what);
	CHECK(ftruncate(fd, 0) < 0 && errno == EPERM, "%s: truncated to 0", what);
	CHECK(ftruncate(fd, st.st_size - 1) < 0, "%s: shrunk by a byte", what);
	CHECK(ftruncate(fd, st.st_size + 4096) < 0, "%s: grown", what);
	CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) < 0, "%s: sealed against writes", what);
}

/* The guest of the shrink test: shares N pages, then attacks. */
static void shrink_guest(const char *dir, int to_back, int to_front)
{
	struct xbd_platform *p = ptest_open(1);
	int fds[SIM_KEEPER_NFDS];
	struct sim_hostmap *h;
	uint32_t refs[N];
	unsigned char *pages = xbd_gnt_share(p, 0, N, true, refs);
	char cmd, path[PATH_MAX], link[PATH_MAX];
	pid_t kp;
	DIR *d;
	struct dirent *de;

	CHECK(pages, "share: %s", strerror(errno));
	for (int i = 0; i < N * 4096; i++)
		pages[i] = (unsigned char)(i * 13 + 1);
	ptest_send(to_back, refs, sizeof(refs));
	ptest_recv(to_front, &cmd, 1);

	/* By fd, as the platform code gets them. */
	CHECK(sim_host_open(dir, &h) == 0, "host open");
	try_shrink(h->fd, "host file");
	CHECK(sim_keeper_call(h->sock, SIM_KEEPER_GET, 1, h->host->doms[1].gen, NULL, 0, fds) ==
	      SIM_KEEPER_NFDS, "keeper get");
	try_shrink(fds[0], "guest memory");
	try_shrink(fds[1], "grant table file");
	try_shrink(fds[2], "xen file");
	/* Punching holes is allowed (it is the guest's own memory) and harmless. */
	CHECK(fallocate(fds[0], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1 << 20, 4096) == 0,
	      "punch hole: %s", strerror(errno));
	for (int i = 0; i < SIM_KEEPER_NFDS; i++)
		close(fds[i]);
	/* By name: the keeper's fds in /proc, and whatever lies in the memdir. */
	kp = keeper_pid(dir);
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)kp);
	d = opendir(path);
	CHECK(d, "opendir %s: %s", path, strerror(errno));
	while ((de = readdir(d))) {
		char fdpath[PATH_MAX + 300];
		ssize_t n;

		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, de->d_name);
		n = readlink(fdpath, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = '\0';
		if (!strstr(link, "memfd:"))
			continue;
		CHECK(truncate(fdpath, 0) < 0, "truncated %s (%s)", fdpath, link);
	}
	closedir(d);
	d = opendir(h->memdir);
	while (d && (de = readdir(d))) {
		char fpath[PATH_MAX + 300];
		struct stat st;

		snprintf(fpath, sizeof(fpath), "%s/%s", h->memdir, de->d_name);
		if (lstat(fpath, &st) == 0 && S_ISREG(st.st_mode) && strncmp(de->d_name, "dom-", 4) == 0)
			CHECK(truncate(fpath, 0) < 0, "truncated %s", fpath);
	}
	if (d)
		closedir(d);
	sim_host_close(h);
	ptest_send(to_back, "t", 1);
	ptest_recv(to_front, &cmd, 1);
	/* What the backend wrote through its mapping. */
	for (int i = 0; i < N; i++)
		CHECK(pages[i * 4096 + 9] == 0xa5, "page %d: %#x", i, pages[i * 4096 + 9]);
	xbd_platform_close(p);
	_exit(0);
}

static void shrink(struct xbd_platform *back, const char *dir)
{
	int to_back[2], to_front[2];
	uint32_t refs[N];
	int16_t st[N];
	unsigned char *m, *m2;
	pid_t pid;
	char cmd;

	CHECK(pipe(to_back) == 0 && pipe(to_front) == 0, "pipe");
	pid = ptest_fork();
	if (pid == 0)
		shrink_guest(dir, to_back[1], to_front[0]);
	ptest_recv(to_back[0], refs, sizeof(refs));
	m = xbd_gnt_map(back, 1, N, refs, true, st);
	CHECK(m, "map: %s", strerror(errno));
	ptest_send(to_front[1], "m", 1);
	ptest_recv(to_back[0], &cmd, 1);
	/* Without sealed memory, this is where the backend died of SIGBUS. */
	for (int i = 0; i < N * 4096; i++)
		CHECK(m[i] == (unsigned char)(i * 13 + 1), "byte %d: %#x", i, m[i]);
	for (int i = 0; i < N; i++)
		m[i * 4096 + 9] = 0xa5;
	m2 = xbd_gnt_map(back, 1, N, refs, false, st);
	CHECK(m2 && m2[4096] == m[4096], "map again after the attack: %s", strerror(errno));
	CHECK(xbd_gnt_unmap(back, m2, N) == 0, "unmap");
	ptest_send(to_front[1], "c", 1);
	CHECK(ptest_wait(pid) == 0, "guest failed");
	CHECK(xbd_gnt_unmap(back, m, N) == 0, "unmap");
}

/* The backend's operations on a guest that holds its own locks. */
static void locks(struct xbd_platform *back, const char *dir)
{
	int to_back[2];
	uint32_t msg[2];  /* ref, port */
	struct xbd_gnt_copy_seg seg;
	struct xbd_evtchn *e;
	char buf[4096];
	int16_t st;
	void *m;
	double t;
	pid_t pid;
	int port;

	CHECK(pipe(to_back) == 0, "pipe");
	pid = ptest_fork();
	if (pid == 0) {
		struct xbd_platform *p = ptest_open(2);
		struct xbd_evtchn *ge;
		struct sim_hostmap *h;
		struct sim_dom *d;
		int gport;
		char *page;

		page = xbd_gnt_share(p, 0, 1, true, &msg[0]);
		CHECK(page, "share");
		page[0] = 'g';
		CHECK(xbd_evtchn_open(p, &ge) == 0, "evtchn open");
		gport = xbd_evtchn_alloc_unbound(ge, 0);
		CHECK(gport > 0, "alloc unbound: %d", gport);
		msg[1] = (uint32_t)gport;
		CHECK(sim_host_open(dir, &h) == 0 && sim_dom_open(h, 2, &d) == 0, "open dom2");
		CHECK(sim_lock_take(&d->xen->gnt_lock, 1000) == 0, "take gnt lock");
		CHECK(sim_lock_take(&d->xen->evt_lock, 1000) == 0, "take evt lock");
		ptest_send(to_back[1], msg, sizeof(msg));
		for (;;)
			pause();
	}
	ptest_recv(to_back[0], msg, sizeof(msg));

	t = xbd_mono_s();
	m = xbd_gnt_map(back, 2, 1, &msg[0], true, &st);
	t = xbd_mono_s() - t;
	CHECK(!m && st == GNTST_general_error, "map under the guest's lock: %p, status %d", m, st);
	CHECK(t < 1.0, "map took %.3f s", t);

	seg = (struct xbd_gnt_copy_seg){ .local = buf, .domid = 2, .ref = msg[0], .len = 16 };
	t = xbd_mono_s();
	CHECK(xbd_gnt_copy(back, 1, &seg) == 0, "copy call");
	t = xbd_mono_s() - t;
	CHECK(seg.status == GNTST_general_error, "copy status %d", seg.status);
	CHECK(t < 1.0, "copy took %.3f s", t);

	CHECK(xbd_evtchn_open(back, &e) == 0, "evtchn open");
	t = xbd_mono_s();
	port = xbd_evtchn_bind_interdomain(e, 2, msg[1]);
	t = xbd_mono_s() - t;
	CHECK(port < 0, "bind under the guest's lock: %d", port);
	CHECK(t < 1.0, "bind took %.3f s", t);

	/* The holder dies: as with a robust mutex, the next taker recovers. */
	kill(pid, SIGKILL);
	CHECK(ptest_wait(pid) == 128 + SIGKILL, "guest status");
	m = xbd_gnt_map(back, 2, 1, &msg[0], false, &st);
	CHECK(m && st == GNTST_okay && *(char *)m == 'g', "map after the holder died: %d", st);
	CHECK(xbd_gnt_unmap(back, m, 1) == 0, "unmap");
	port = xbd_evtchn_bind_interdomain(e, 2, msg[1]);
	CHECK(port > 0, "bind after the holder died: %d", port);
	xbd_evtchn_close(e);
}

/* Xen-private state rewritten by the guest: operations fail, safely. */
static void scribble(struct xbd_platform *back, const char *dir)
{
	struct xbd_platform *guest = ptest_open(3);
	struct xbd_evtchn *ge, *be;
	struct xbd_gnt_copy_seg seg;
	struct sim_hostmap *h;
	struct sim_dom *d;
	struct sim_active *act;
	uint32_t ref, frame;
	unsigned char *page, *m, *m2;
	char buf[64];
	int16_t st;
	int gport, bport;

	page = xbd_gnt_share(guest, 0, 1, true, &ref);
	CHECK(page, "share");
	page[1] = 'x';
	m = xbd_gnt_map(back, 3, 1, &ref, true, &st);
	CHECK(m, "map");
	CHECK(sim_host_open(dir, &h) == 0 && sim_dom_open(h, 3, &d) == 0, "open dom3");
	act = &d->xen->active[ref];
	frame = act->frame;

	/* A pinned frame beyond the guest's memory. */
	act->frame = 0xfffffff0u;
	m2 = xbd_gnt_map(back, 3, 1, &ref, true, &st);
	CHECK(!m2 && st == GNTST_bad_page, "map of a scribbled pin: status %d", st);
	seg = (struct xbd_gnt_copy_seg){ .local = buf, .domid = 3, .ref = ref, .len = 16 };
	CHECK(xbd_gnt_copy(back, 1, &seg) == 0 && seg.status == GNTST_bad_page,
	      "copy of a scribbled pin: %d", seg.status);
	act->frame = d->mem_pages;
	seg.status = 0;
	CHECK(xbd_gnt_copy(back, 1, &seg) == 0 && seg.status == GNTST_bad_page,
	      "copy of the frame just past the end: %d", seg.status);
	act->frame = frame;
	/* Pin counts at their limit, or pinned by another domain. */
	act->rd = 0xffff;
	CHECK(!xbd_gnt_map(back, 3, 1, &ref, false, &st) && st == GNTST_general_error,
	      "map with a saturated pin count: %d", st);
	act->rd = 0;
	act->domid = 2;
	CHECK(!xbd_gnt_map(back, 3, 1, &ref, false, &st) && st == GNTST_general_error,
	      "map pinned by another domain: %d", st);
	act->domid = 0;
	m2 = xbd_gnt_map(back, 3, 1, &ref, false, &st);
	CHECK(m2 && m2[1] == 'x', "map after the repair: %d", st);
	CHECK(xbd_gnt_unmap(back, m2, 1) == 0, "unmap");

	/* Port records pointing nowhere. */
	CHECK(xbd_evtchn_open(guest, &ge) == 0 && xbd_evtchn_open(back, &be) == 0, "evtchn open");
	gport = xbd_evtchn_alloc_unbound(ge, 0);
	bport = xbd_evtchn_bind_interdomain(be, 3, (uint32_t)gport);
	CHECK(gport > 0 && bport > 0, "bind: %d %d", gport, bport);
	d->xen->ports[gport].handle = 0xfffffff0u;
	d->xen->ports[gport].hgen = 7;
	CHECK(xbd_evtchn_notify(be, (uint32_t)bport) == 0, "notify a port with a bad handle");
	d->xen->ports[gport].remote_port = 0xffffffffu;
	d->xen->ports[gport].remote_dom = 0x7fff;
	CHECK(xbd_evtchn_notify(be, (uint32_t)bport) == 0, "notify a port with a bad peer");
	d->xen->ports[gport].state = 77;
	CHECK(xbd_evtchn_notify(be, (uint32_t)bport) == 0, "notify a port in a bad state");
	CHECK(xbd_evtchn_unbind(be, (uint32_t)bport) == 0, "unbind");
	xbd_evtchn_close(be);
	xbd_evtchn_close(ge);

	/* A lock word with garbage in it (no such thread): taken over. */
	d->xen->gnt_lock = 0x3ffffff0u;
	m2 = xbd_gnt_map(back, 3, 1, &ref, false, &st);
	CHECK(m2, "map under a garbage lock word: %d", st);
	CHECK(xbd_gnt_unmap(back, m2, 1) == 0, "unmap");

	sim_dom_close(d);
	sim_host_close(h);
	CHECK(xbd_gnt_unmap(back, m, 1) == 0, "unmap");
	xbd_platform_close(guest);
}

static char extra_dir[64] = "/tmp/xbd-ptest3-XXXXXX";

/* A failed check must not leave the second host (and its keeper) behind. */
static void extra_cleanup(void)
{
	if (getpid() == ptest_owner) {
		xbd_sim_host_cleanup(extra_dir);
		rmdir(extra_dir);
	}
}

/* The keeper process goes with its host. */
static void keeper_lifetime(void)
{
	char *dir = extra_dir, path[PATH_MAX];
	pid_t kp;

	CHECK(mkdtemp(dir), "mkdtemp");
	atexit(extra_cleanup);
	CHECK(xbd_sim_host_init(dir) == 0, "init");
	kp = keeper_pid(dir);
	CHECK(kp > 0 && kp != getpid(), "keeper pid %d", (int)kp);
	CHECK(xbd_sim_host_cleanup(dir) == 0, "cleanup");
	CHECK(process_gone(kp, 2.0), "keeper %d still runs after cleanup", (int)kp);

	/* A host removed behind the keeper's back (rm -rf): it leaves too. */
	CHECK(xbd_sim_host_init(dir) == 0, "init again");
	kp = keeper_pid(dir);
	snprintf(path, sizeof(path), "%s/hv/keeper", dir);
	CHECK(unlink(path) == 0, "unlink");
	CHECK(process_gone(kp, 6.0), "keeper %d still runs without its socket", (int)kp);
	CHECK(xbd_sim_domain_exists(dir, 0) == -ENOENT, "host without keeper");
	CHECK(xbd_sim_host_cleanup(dir) == 0, "cleanup");
	CHECK(rmdir(dir) == 0, "rmdir %s: %s", dir, strerror(errno));
}

int main(void)
{
	const char *dir = ptest_host(4, 60);
	struct xbd_platform *back = ptest_open(0);

	shrink(back, dir);
	locks(back, dir);
	scribble(back, dir);
	xbd_platform_close(back);
	keeper_lifetime();
	return 0;
}
