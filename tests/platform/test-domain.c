/*
 * test-domain: simulated domains' life cycle as the toolstack and the
 * backends see it.
 * - create/exists/list/free_id, and their errors.
 * - Destroying a domain while a backend maps its pages: it is DYING (new
 *   maps fail with GNTST_bad_domain, its domid is not reusable), the
 *   mapped pages stay valid and keep their bytes; the last unmap makes it
 *   GONE, frees its memory files, and the domid can be created afresh
 *   with zeroed memory and no grants.
 * - A backend process that dies without unmapping does not keep a dead
 *   domain alive.
 * - Destroying a domain releases the mappings it held of other domains'
 *   pages: their owners can end access again.
 */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <time.h>

#include "sim/layout.h"
#include "tests/platform/ptest.h"

/* Whether the host still holds the memory files of domid's latest incarnation. */
static bool mem_file_exists(const char *dir, uint32_t domid)
{
	struct sim_hostmap *h;
	int fds[SIM_KEEPER_NFDS];
	int r;

	CHECK(sim_host_open(dir, &h) == 0, "host open");
	r = sim_keeper_call(h->sock, SIM_KEEPER_GET, domid,
			    __atomic_load_n(&h->host->doms[domid].gen, __ATOMIC_SEQ_CST), NULL, 0,
			    fds);
	sim_host_close(h);
	CHECK(r == SIM_KEEPER_NFDS || r == -ESRCH, "keeper: %d", r);
	for (int i = 0; i < r; i++)
		close(fds[i]);
	return r == SIM_KEEPER_NFDS;
}

static void basics(const char *dir)
{
	struct xbd_sim_domain_info info[8];
	int n;

	CHECK(xbd_sim_domain_exists(dir, 0) == 1, "dom0 exists");
	CHECK(xbd_sim_domain_exists(dir, 4) == 0, "dom4 exists");
	CHECK(xbd_sim_domain_create(dir, 1, 0) == -EEXIST, "created twice");
	CHECK(xbd_sim_domain_create(dir, XBD_SIM_MAX_DOMID + 1, 0) == -EINVAL, "domid too big");
	CHECK(xbd_sim_domain_destroy(dir, 4) == -ENOENT, "destroyed a missing domain");
	CHECK(xbd_sim_domain_free_id(dir) == 3, "free id %d", xbd_sim_domain_free_id(dir));
	CHECK(xbd_sim_domain_create(dir, 3, 8 << 20) == 0, "create dom3");
	CHECK(xbd_sim_domain_free_id(dir) == 4, "free id %d", xbd_sim_domain_free_id(dir));
	n = xbd_sim_domain_list(dir, info, 8);
	CHECK(n == 4, "listed %d", n);
	CHECK(info[3].domid == 3 && info[3].mem_bytes == 8 << 20 && !info[3].dying, "dom3 info");
	CHECK(info[0].mem_bytes == XBD_SIM_DEFAULT_MEM_BYTES, "default memory");
	CHECK(xbd_sim_domain_list(dir, info, 1) == 4, "count beyond max");
	CHECK(xbd_sim_domain_destroy(dir, 3) == 0, "destroy dom3");
	CHECK(xbd_sim_domain_exists(dir, 3) == 0, "dom3 still exists");
	CHECK(!mem_file_exists(dir, 3), "dom3's memory not freed");
	CHECK(xbd_sim_domain_exists("/nonexistent-xbd", 0) == -ENOENT, "no host");
}

static void destroy_while_mapped(const char *dir)
{
	struct xbd_platform *back = ptest_open(0), *front = ptest_open(1);
	struct xbd_sim_domain_info info[4];
	uint32_t refs[4], more[1];
	int16_t st[4];
	unsigned char *pages = xbd_gnt_share(front, 0, 4, true, refs), *m;

	CHECK(pages, "share");
	CHECK(xbd_gnt_share(front, 0, 1, true, more), "share");
	memset(pages, 0x42, 4 * 4096);
	m = xbd_gnt_map(back, 1, 4, refs, true, st);
	CHECK(m, "map");
	CHECK(xbd_domain_state(back, 1) == XBD_DOMAIN_RUNNING, "running");

	CHECK(xbd_sim_domain_destroy(dir, 1) == 0, "destroy");
	CHECK(xbd_domain_state(back, 1) == XBD_DOMAIN_DYING, "state %d", xbd_domain_state(back, 1));
	CHECK(xbd_sim_domain_exists(dir, 1) == 1, "a dying domain exists");
	CHECK(xbd_sim_domain_list(dir, info, 4) == 3 && info[1].domid == 1 && info[1].dying,
	      "list shows it dying");
	CHECK(xbd_sim_domain_create(dir, 1, 0) == -EEXIST, "domid reused while dying");
	CHECK(xbd_sim_domain_destroy(dir, 1) == 0, "destroying twice");
	CHECK(!xbd_gnt_map(back, 1, 1, more, false, st) && st[0] == GNTST_bad_domain,
	      "new map of a dying domain: %d", st[0]);
	/* What is mapped stays mapped, and is still the guest's memory. */
	for (int i = 0; i < 4 * 4096; i += 512)
		CHECK(m[i] == 0x42, "byte %d: %#x", i, m[i]);
	m[0] = 0x43;
	CHECK(pages[0] == 0x43, "no longer shared memory");
	CHECK(mem_file_exists(dir, 1), "memory freed under a mapping");

	CHECK(xbd_gnt_unmap(back, m, 4) == 0, "unmap");
	CHECK(xbd_domain_state(back, 1) == XBD_DOMAIN_GONE, "state after unmap %d",
	      xbd_domain_state(back, 1));
	CHECK(!mem_file_exists(dir, 1), "memory not freed after the last unmap");
	xbd_platform_close(front);

	/* A new incarnation: fresh memory, no old grant maps. */
	CHECK(xbd_sim_domain_create(dir, 1, 0) == 0, "create again");
	front = ptest_open(1);
	CHECK(!xbd_gnt_map(back, 1, 4, refs, false, st) && st[0] == GNTST_general_error,
	      "old grant maps in the new domain: %d", st[0]);
	pages = xbd_gnt_share(front, 0, 4, true, refs);
	m = xbd_gnt_map(back, 1, 4, refs, false, st);
	CHECK(pages && m && m[0] == 0, "new domain's page: %#x", m ? m[0] : 0);
	CHECK(xbd_gnt_unmap(back, m, 4) == 0 && xbd_gnt_unshare(front, pages, 4) == 0, "cleanup");
	xbd_platform_close(front);
	xbd_platform_close(back);
}

static void mapper_crash(const char *dir)
{
	struct xbd_platform *front = ptest_open(2);
	uint32_t ref;
	int sync[2];
	char c;
	pid_t pid;

	CHECK(xbd_gnt_share(front, 0, 1, true, &ref), "share");
	CHECK(pipe(sync) == 0, "pipe");
	pid = ptest_fork();
	if (pid == 0) {
		struct xbd_platform *back = ptest_open(0);
		int16_t st;

		CHECK(xbd_gnt_map(back, 2, 1, &ref, true, &st), "map");
		ptest_send(sync[1], "m", 1);
		pause();
		_exit(0);
	}
	ptest_recv(sync[0], &c, 1);
	CHECK(xbd_sim_domain_destroy(dir, 2) == 0, "destroy");
	CHECK(xbd_sim_domain_exists(dir, 2) == 1, "gone while a live process maps it");
	kill(pid, SIGKILL);
	CHECK(ptest_wait(pid) == 128 + SIGKILL, "child");
	CHECK(xbd_sim_domain_exists(dir, 2) == 0, "a dead mapper keeps the domain");
	CHECK(!mem_file_exists(dir, 2), "memory not freed");
	xbd_platform_close(front);
	close(sync[0]);
	close(sync[1]);
}

static void dying_mapper_releases(const char *dir)
{
	struct xbd_platform *owner, *mapper;
	uint32_t ref;
	int16_t st;
	unsigned char *page, *m;

	CHECK(xbd_sim_domain_create(dir, 5, 0) == 0 && xbd_sim_domain_create(dir, 6, 0) == 0,
	      "create");
	owner = ptest_open(5);
	mapper = ptest_open(6);
	page = xbd_gnt_share(owner, 6, 1, true, &ref);
	m = xbd_gnt_map(mapper, 5, 1, &ref, true, &st);
	CHECK(page && m, "share and map");
	CHECK(xbd_gnt_unshare(owner, page, 1) == -EBUSY, "unshare under a mapping");
	CHECK(xbd_sim_domain_destroy(dir, 6) == 0, "destroy the mapping domain");
	CHECK(xbd_gnt_unshare(owner, page, 1) == 0, "its mapping was not released");
	/* Its process unmapping later changes nothing for the owner. */
	CHECK(xbd_gnt_unmap(mapper, m, 1) == 0, "late unmap");
	page = xbd_gnt_share(owner, 0, 1, true, &ref);
	CHECK(page, "share again");
	struct xbd_platform *back = ptest_open(0);

	m = xbd_gnt_map(back, 5, 1, &ref, true, &st);
	CHECK(m, "map");
	CHECK(xbd_gnt_unshare(owner, page, 1) == -EBUSY, "pins went wrong after a late unmap");
	CHECK(xbd_gnt_unmap(back, m, 1) == 0 && xbd_gnt_unshare(owner, page, 1) == 0, "cleanup");
	xbd_platform_close(back);
	xbd_platform_close(mapper);
	xbd_platform_close(owner);
}

/*
 * Host cleanup removes everything, also under live handles; a new host
 * removes the memory of hosts that vanished without cleanup.
 */
static void host_files(void)
{
	char dir[64] = "/tmp/xbd-ptest2-XXXXXX", link[PATH_MAX], memdir[PATH_MAX] = "";
	char orphan[64] = "/dev/shm/xbd-sim-XXXXXX", path[PATH_MAX];
	struct timespec old[2] = { { .tv_sec = 1000000 }, { .tv_sec = 1000000 } };
	struct xbd_platform *p;
	struct xbd_evtchn *e;
	struct stat st;
	FILE *f;
	ssize_t n;

	/* An orphan: its owner's link is gone, and it is old. */
	CHECK(mkdtemp(orphan), "mkdtemp %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/owner", orphan);
	f = fopen(path, "w");
	CHECK(f && fprintf(f, "/nonexistent-xbd/hv/mem\n") > 0 && fclose(f) == 0, "owner");
	snprintf(path, sizeof(path), "%s/dom-9.mem", orphan);
	f = fopen(path, "w");
	CHECK(f && fclose(f) == 0, "mem file");
	CHECK(utimensat(AT_FDCWD, orphan, old, 0) == 0, "utimensat");

	CHECK(mkdtemp(dir), "mkdtemp");
	CHECK(xbd_sim_host_init(dir) == 0, "init");
	CHECK(stat(orphan, &st) < 0 && errno == ENOENT, "orphaned memory left in %s", orphan);
	snprintf(link, sizeof(link), "%s/hv/mem", dir);
	n = readlink(link, memdir, sizeof(memdir) - 1);
	memdir[n > 0 ? n : 0] = '\0';
	CHECK(xbd_sim_domain_create(dir, 0, 0) == 0, "create");
	CHECK(xbd_platform_open_sim(dir, 0, &p) == 0, "open");
	CHECK(xbd_evtchn_open(p, &e) == 0, "evtchn");
	/* The live host's memory survives another host's start, however old. */
	if (*memdir)
		CHECK(utimensat(AT_FDCWD, memdir, old, 0) == 0, "utimensat");
	CHECK(xbd_sim_host_cleanup(ptest_dir) == 0 && xbd_sim_host_init(ptest_dir) == 0,
	      "restart the test host");
	if (*memdir)
		CHECK(stat(memdir, &st) == 0, "live memdir %s removed", memdir);
	CHECK(xbd_sim_host_cleanup(dir) == 0, "cleanup under a live handle");
	if (*memdir)
		CHECK(stat(memdir, &st) < 0, "memdir %s left behind", memdir);
	snprintf(path, sizeof(path), "%s/hv", dir);
	CHECK(stat(path, &st) < 0, "hv left behind");
	xbd_evtchn_close(e);
	xbd_platform_close(p);
	CHECK(rmdir(dir) == 0, "rmdir %s: %s", dir, strerror(errno));
}

int main(void)
{
	const char *dir = ptest_host(3, 60);

	basics(dir);
	destroy_while_mapped(dir);
	mapper_crash(dir);
	dying_mapper_releases(dir);
	host_files();
	return 0;
}
