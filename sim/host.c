/*
 * sim/host.c: the simulated host's life cycle and its domains: DIR/hv/
 * creation and removal, domain create/destroy/exists/list, and freeing a
 * destroyed domain once nothing maps its pages (Xen keeps a dying domain's
 * memory until the last foreign mapping goes; so do we).  The memory files
 * themselves are held by the keeper (sim/keeper.c).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "sim/layout.h"

#define SHM_PREFIX "/dev/shm/xbd-sim-"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

/* ---- the host file ---- */

static int host_path(const char *dir, const char *name, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/hv%s%s", dir, *name ? "/" : "", name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int sim_host_open(const char *dir, struct sim_hostmap **out)
{
	int fds[SIM_KEEPER_NFDS] = { -1, -1, -1 };
	char path[PATH_MAX];
	struct sim_hostmap *h;
	uint64_t size;
	int r;

	if (!dir || !*dir)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->fd = -1;
	r = host_path(dir, "keeper", h->sock, sizeof(h->sock));
	if (!r)
		r = host_path(dir, "", path, sizeof(path));
	if (r)
		goto fail;
	r = sim_keeper_call(h->sock, SIM_KEEPER_HOST, 0, 0, NULL, 0, fds);
	h->fd = fds[0];
	for (int i = 1; r > 1 && i < r; i++)
		close(fds[i]);
	if (r == 1)
		r = sim_memfd_check(h->fd, &size);
	else if (r >= 0)
		r = -EPROTO;
	/* No keeper listening: no host there (any more). */
	if (r == -ECONNREFUSED || r == -ENOTDIR)
		r = -ENOENT;
	if (r)
		goto fail;
	if (size < sizeof(struct sim_host)) {
		r = -EPROTO;
		goto fail;
	}
	h->host = mmap(NULL, sizeof(struct sim_host), PROT_READ | PROT_WRITE,
		       MAP_SHARED, h->fd, 0);
	if (h->host == MAP_FAILED) {
		h->host = NULL;
		r = -errno;
		goto fail;
	}
	if (__atomic_load_n(&h->host->magic, __ATOMIC_ACQUIRE) != SIM_HOST_MAGIC ||
	    h->host->version != SIM_LAYOUT_VERSION) {
		r = -EPROTO;
		goto fail;
	}
	memcpy(h->memdir, h->host->memdir, sizeof(h->memdir));
	h->memdir[sizeof(h->memdir) - 1] = '\0';
	/*
	 * We create and remove FIFOs there: a guest's rewrite must not point
	 * us elsewhere.  choose_memdir makes one of two kinds only.
	 */
	if (strcmp(h->memdir, path) &&
	    (strncmp(h->memdir, SHM_PREFIX, strlen(SHM_PREFIX)) ||
	     strchr(h->memdir + strlen(SHM_PREFIX), '/') || strstr(h->memdir, ".."))) {
		r = -EPROTO;
		goto fail;
	}
	*out = h;
	return 0;
fail:
	sim_host_close(h);
	return r;
}

void sim_host_close(struct sim_hostmap *h)
{
	if (!h)
		return;
	if (h->host)
		munmap(h->host, sizeof(struct sim_host));
	if (h->fd >= 0)
		close(h->fd);
	free(h);
}

int sim_host_lock(struct sim_host *host)
{
	return sim_lock_take(&host->lock, SIM_HOST_LOCK_TIMEOUT_MS);
}

void sim_host_unlock(struct sim_host *host)
{
	sim_lock_drop(&host->lock);
}

/* A memdir younger than this may belong to a host still being made. */
#define ORPHAN_AGE_S 60

/* Remove a memdir and the files we put there; retried in case a process
 * of the host made a new handle's FIFO while we were at it. */
static void remove_memdir(const char *memdir)
{
	char path[PATH_MAX];

	for (int tries = 0; tries < 5; tries++) {
		DIR *d = opendir(memdir);
		struct dirent *de;

		if (!d)
			return;
		while ((de = readdir(d))) {
			if (strncmp(de->d_name, "dom-", 4) && strncmp(de->d_name, "evt-", 4) &&
			    strcmp(de->d_name, "owner"))
				continue;
			if (snprintf(path, sizeof(path), "%s/%s", memdir, de->d_name) <
			    (int)sizeof(path))
				unlink(path);
		}
		closedir(d);
		if (rmdir(memdir) == 0 || errno != ENOTEMPTY)
			return;
	}
}

/* memdir/owner names the DIR/hv/mem link of the host that owns memdir. */
static int write_owner(const char *memdir, const char *hvdir)
{
	char path[PATH_MAX];
	char *hv = realpath(hvdir, NULL);
	FILE *f;
	int r;

	if (!hv)
		return -errno;
	if (snprintf(path, sizeof(path), "%s/owner", memdir) >= (int)sizeof(path)) {
		free(hv);
		return -ENAMETOOLONG;
	}
	f = fopen(path, "we");
	if (!f) {
		r = -errno;
		free(hv);
		return r;
	}
	r = fprintf(f, "%s/mem\n", hv) < 0 ? -EIO : 0;
	free(hv);
	if (fclose(f) != 0 && !r)
		r = -EIO;
	return r;
}

/*
 * Memdirs whose host is gone (its test was killed before it could stop
 * it) would hold tmpfs memory until reboot: a new host removes them.  A
 * memdir is orphaned when the link its owner file names no longer points
 * back to it.
 */
static void remove_orphan_memdirs(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *de;
	time_t now = time(NULL);

	while (d && (de = readdir(d))) {
		char memdir[PATH_MAX], path[PATH_MAX], link[PATH_MAX], target[PATH_MAX];
		struct stat st;
		ssize_t n;
		FILE *f;

		if (strncmp(de->d_name, "xbd-sim-", 8))
			continue;
		if (snprintf(memdir, sizeof(memdir), "/dev/shm/%s", de->d_name) >= (int)sizeof(memdir) ||
		    snprintf(path, sizeof(path), "%s/owner", memdir) >= (int)sizeof(path))
			continue;
		if (lstat(memdir, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    st.st_uid != geteuid() || now - st.st_mtime < ORPHAN_AGE_S)
			continue;
		f = fopen(path, "re");
		if (!f) {
			/* Made before owner files existed: orphaned once old enough. */
			if (errno == ENOENT && now - st.st_mtime >= ORPHAN_AGE_S * 10)
				remove_memdir(memdir);
			continue;
		}
		if (!fgets(link, sizeof(link), f)) {
			fclose(f);
			continue;
		}
		fclose(f);
		link[strcspn(link, "\n")] = '\0';
		n = readlink(link, target, sizeof(target) - 1);
		if (n >= 0) {
			target[n] = '\0';
			if (strcmp(target, memdir) == 0)
				continue;
		}
		remove_memdir(memdir);
	}
	if (d)
		closedir(d);
}

/*
 * Guest memory goes to tmpfs: on a disk file system every page a guest
 * writes would eventually be written back to disk for nothing.
 */
static int choose_memdir(const char *dir, char *memdir, size_t len)
{
	char hv[PATH_MAX], link[PATH_MAX];
	struct statfs fs;
	int r;

	r = host_path(dir, "", hv, sizeof(hv));
	if (r)
		return r;
	if (statfs(hv, &fs) == 0 && fs.f_type == TMPFS_MAGIC)
		goto in_hv;
	r = snprintf(memdir, len, SHM_PREFIX "XXXXXX");
	if (r < 0 || (size_t)r >= len || !mkdtemp(memdir))
		goto in_hv;
	/* Every uid makes its event channels' FIFOs here (hypervisor.h). */
	chmod(memdir, 01777);
	r = host_path(dir, "mem", link, sizeof(link));
	if (r == 0 && write_owner(memdir, hv) == 0 && symlink(memdir, link) == 0)
		return 0;
	remove_memdir(memdir);
in_hv:
	r = snprintf(memdir, len, "%s", hv);
	if (r >= 0 && (size_t)r < len)
		chmod(memdir, 01777);
	return r < 0 || (size_t)r >= len ? -ENAMETOOLONG : 0;
}

static uint64_t random_id(void)
{
	uint64_t id;
	struct timespec ts;

	if (getrandom(&id, sizeof(id), 0) == (ssize_t)sizeof(id))
		return id;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
}

struct host_init {
	const char *memdir;
	uint64_t id;
};

static void host_init_mem(void *mem, void *arg)
{
	struct sim_host *host = mem;
	const struct host_init *hi = arg;

	host->version = SIM_LAYOUT_VERSION;
	host->host_id = hi->id;
	snprintf(host->memdir, sizeof(host->memdir), "%s", hi->memdir);
	host->magic = SIM_HOST_MAGIC;
}

int xbd_sim_host_init(const char *dir)
{
	char path[PATH_MAX], memdir[256];
	struct host_init hi = { .memdir = memdir, .id = random_id() };
	int fd = -1, r;

	if (!dir || !*dir)
		return -EINVAL;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	r = host_path(dir, "", path, sizeof(path));
	if (r)
		return r;
	if (mkdir(path, 0755) < 0)
		return -errno;
	remove_orphan_memdirs();
	r = choose_memdir(dir, memdir, sizeof(memdir));
	if (r)
		goto fail;
	snprintf(path, sizeof(path), "%s/host", memdir);
	fd = sim_memfd_create(path, sizeof(struct sim_host), host_init_mem, &hi);
	if (fd < 0) {
		r = fd;
		goto fail;
	}
	r = host_path(dir, "keeper", path, sizeof(path));
	if (!r)
		r = sim_keeper_start(path, fd);
	close(fd);
	if (r)
		goto fail;
	return 0;
fail:
	xbd_sim_host_cleanup(dir);
	return r;
}

/* The keeper lets go of the files; they go when their last mapping does. */
static void drop_dom_files(struct sim_hostmap *h, uint32_t domid, uint32_t gen)
{
	sim_keeper_call(h->sock, SIM_KEEPER_DROP, domid, gen, NULL, 0, NULL);
}

int xbd_sim_host_cleanup(const char *dir)
{
	char path[PATH_MAX], hv[PATH_MAX], memdir[256] = "";
	struct sim_hostmap *h;
	int r;

	r = host_path(dir, "", hv, sizeof(hv));
	if (r)
		return r;
	if (sim_host_open(dir, &h) == 0) {
		if (sim_host_lock(h->host) == 0) {
			for (uint32_t id = 0; id <= XBD_SIM_MAX_DOMID; id++) {
				struct sim_host_dom *s = &h->host->doms[id];

				if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == SIM_DOM_FREE)
					continue;
				drop_dom_files(h, id, __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE));
				__atomic_store_n(&s->state, SIM_DOM_FREE, __ATOMIC_RELEASE);
			}
			sim_host_unlock(h->host);
		}
		memcpy(memdir, h->memdir, sizeof(memdir));
		sim_keeper_call(h->sock, SIM_KEEPER_STOP, 0, 0, NULL, 0, NULL);
		sim_host_close(h);
	}
	/* No host file (a half-made or half-removed host): the link says where. */
	if (!*memdir && host_path(dir, "mem", path, sizeof(path)) == 0) {
		ssize_t n = readlink(path, memdir, sizeof(memdir) - 1);

		memdir[n > 0 ? n : 0] = '\0';
	}
	/* Leftovers of domains we could not see, and handles' FIFOs. */
	if (*memdir && strcmp(memdir, hv)) {
		remove_memdir(memdir);
	} else if (*memdir) {
		DIR *d = opendir(memdir);
		struct dirent *de;

		while (d && (de = readdir(d))) {
			if (strncmp(de->d_name, "dom-", 4) && strncmp(de->d_name, "evt-", 4))
				continue;
			if (snprintf(path, sizeof(path), "%s/%s", memdir, de->d_name) <
			    (int)sizeof(path))
				unlink(path);
		}
		if (d)
			closedir(d);
	}
	if (host_path(dir, "mem", path, sizeof(path)) == 0)
		unlink(path);
	if (host_path(dir, "keeper", path, sizeof(path)) == 0)
		unlink(path);
	if (rmdir(hv) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* ---- domains ---- */

void sim_host_try_finalize_locked(struct sim_hostmap *h, uint32_t domid)
{
	struct sim_host_dom *s = &h->host->doms[domid];
	uint32_t gen;

	if (__atomic_load_n(&s->state, __ATOMIC_SEQ_CST) != SIM_DOM_DYING)
		return;
	gen = __atomic_load_n(&s->gen, __ATOMIC_SEQ_CST);
	/*
	 * A mapper takes its lock before checking that the domain runs, and
	 * the domain was marked dying before this check: either we see its
	 * lock or it sees the domain dying and backs off.
	 */
	if (sim_dom_mapped(h, domid, gen))
		return;
	drop_dom_files(h, domid, gen);
	__atomic_store_n(&s->state, SIM_DOM_FREE, __ATOMIC_SEQ_CST);
}

int sim_host_try_finalize(struct sim_hostmap *h, uint32_t domid)
{
	int r;

	if (domid > XBD_SIM_MAX_DOMID)
		return SIM_DOM_FREE;
	r = sim_host_lock(h->host);
	if (r)
		return r;
	sim_host_try_finalize_locked(h, domid);
	r = (int)__atomic_load_n(&h->host->doms[domid].state, __ATOMIC_ACQUIRE);
	sim_host_unlock(h->host);
	return r;
}

struct dom_init {
	uint32_t domid;
	uint32_t gen;
	uint32_t pages;
	int r;
};

static void gnt_init_mem(void *mem, void *arg)
{
	struct sim_gnt_file *gnt = mem;
	const struct dom_init *di = arg;

	/* Reserved references are never handed out, as in Linux. */
	gnt->ref_map[0] = (1ull << SIM_GNT_RESERVED) - 1;
	/* Bits past the end of memory read as used. */
	if (di->pages % 64)
		gnt->page_map[di->pages / 64] = ~0ull << (di->pages % 64);
}

static void xen_init_mem(void *mem, void *arg)
{
	struct sim_xen_file *xen = mem;
	struct dom_init *di = arg;

	xen->gen = di->gen;
	xen->domid = di->domid;
	xen->mem_pages = di->pages;
	xen->magic = SIM_XEN_MAGIC;
}

static int init_dom_files(struct sim_hostmap *h, uint32_t domid, uint32_t gen,
			  uint32_t pages)
{
	struct dom_init di = { .domid = domid, .gen = gen, .pages = pages };
	int fds[SIM_KEEPER_NFDS] = { -1, -1, -1 };
	char path[PATH_MAX];
	int r;

	sim_dom_path(h, domid, "mem", path, sizeof(path));
	fds[0] = sim_memfd_create(path, (uint64_t)pages << SIM_PAGE_SHIFT, NULL, NULL);
	sim_dom_path(h, domid, "gnt", path, sizeof(path));
	fds[1] = sim_memfd_create(path, sim_gnt_file_size(pages), gnt_init_mem, &di);
	sim_dom_path(h, domid, "xen", path, sizeof(path));
	fds[2] = sim_memfd_create(path, sizeof(struct sim_xen_file), xen_init_mem, &di);
	r = 0;
	for (int i = 0; i < SIM_KEEPER_NFDS; i++)
		if (fds[i] < 0 && !r)
			r = fds[i];
	if (!r) {
		r = sim_keeper_call(h->sock, SIM_KEEPER_PUT, domid, gen, fds, SIM_KEEPER_NFDS,
				    NULL);
	}
	for (int i = 0; i < SIM_KEEPER_NFDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return r;
}

int xbd_sim_domain_create(const char *dir, uint32_t domid, uint64_t mem_bytes)
{
	struct sim_hostmap *h;
	struct sim_host_dom *s;
	uint64_t pages;
	uint32_t gen;
	int r;

	if (domid > XBD_SIM_MAX_DOMID)
		return -EINVAL;
	if (!mem_bytes)
		mem_bytes = XBD_SIM_DEFAULT_MEM_BYTES;
	pages = (mem_bytes + SIM_PAGE_SIZE - 1) >> SIM_PAGE_SHIFT;
	if (pages > SIM_MAX_MEM_PAGES)
		return -EINVAL;
	r = sim_host_open(dir, &h);
	if (r)
		return r;
	r = sim_host_lock(h->host);
	if (r)
		goto out;
	s = &h->host->doms[domid];
	sim_host_try_finalize_locked(h, domid);
	if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != SIM_DOM_FREE) {
		r = -EEXIST;
		goto unlock;
	}
	gen = ++h->host->next_gen;
	if (!gen)
		gen = ++h->host->next_gen;
	r = init_dom_files(h, domid, gen, (uint32_t)pages);
	if (r)
		goto unlock;
	s->mem_pages = (uint32_t)pages;
	__atomic_store_n(&s->gen, gen, __ATOMIC_SEQ_CST);
	/* Openers check the state, then the gen: the files are complete now. */
	__atomic_store_n(&s->state, SIM_DOM_RUNNING, __ATOMIC_SEQ_CST);
unlock:
	sim_host_unlock(h->host);
out:
	sim_host_close(h);
	return r;
}

/* Close every port of dying domain d; its peers' ports become unbound. */
static void close_ports_of(struct sim_hostmap *h, struct sim_dom *d)
{
	for (uint32_t port = 1; port < SIM_NR_PORTS; port++) {
		for (int tries = 0; tries < 8; tries++) {
			struct sim_dom *remote = NULL;
			uint32_t state, rdom, rport;
			int r;

			sim_evt_peer(d, port, &state, &rdom, &rport);
			if (state == SIM_PORT_FREE)
				break;
			if (state == SIM_PORT_INTERDOMAIN && rdom == d->domid)
				remote = d;
			else if (state == SIM_PORT_INTERDOMAIN && rdom <= XBD_SIM_MAX_DOMID &&
				 sim_dom_open(h, rdom, &remote) < 0)
				remote = NULL;
			r = sim_evt_close(d, port, remote, state == SIM_PORT_INTERDOMAIN ? rdom : UINT32_MAX);
			if (remote && remote != d)
				sim_dom_close(remote);
			if (r != -EAGAIN)
				break;
		}
	}
}

int xbd_sim_domain_destroy(const char *dir, uint32_t domid)
{
	struct sim_hostmap *h;
	struct sim_host_dom *s;
	struct sim_dom *d = NULL;
	int r;

	if (domid > XBD_SIM_MAX_DOMID)
		return -ENOENT;
	r = sim_host_open(dir, &h);
	if (r)
		return r;
	r = sim_host_lock(h->host);
	if (r)
		goto out;
	s = &h->host->doms[domid];
	switch (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE)) {
	case SIM_DOM_FREE:
		r = -ENOENT;
		goto unlock;
	case SIM_DOM_DYING:
		/* Already destroyed; it waits for its last foreign mapping. */
		goto finalize;
	}
	/* From here on no new map, copy or bind involving it succeeds. */
	__atomic_store_n(&s->state, SIM_DOM_DYING, __ATOMIC_SEQ_CST);
	if (sim_dom_open(h, domid, &d) == 0) {
		close_ports_of(h, d);
		sim_dom_close(d);
	}
	/*
	 * The pages it mapped from other domains are released, as Xen does
	 * when it tears a domain down: their owners may end access again.
	 */
	for (uint32_t g = 0; g <= XBD_SIM_MAX_DOMID; g++) {
		struct sim_dom *gd;

		if (g == domid ||
		    __atomic_load_n(&h->host->doms[g].state, __ATOMIC_ACQUIRE) == SIM_DOM_FREE)
			continue;
		if (sim_dom_open(h, g, &gd) < 0)
			continue;
		sim_gnt_release_pins_of(gd, domid);
		sim_dom_close(gd);
	}
finalize:
	sim_host_try_finalize_locked(h, domid);
unlock:
	sim_host_unlock(h->host);
out:
	sim_host_close(h);
	return r;
}

int xbd_sim_domain_exists(const char *dir, uint32_t domid)
{
	struct sim_hostmap *h;
	int r;

	if (domid > XBD_SIM_MAX_DOMID)
		return 0;
	r = sim_host_open(dir, &h);
	if (r)
		return r;
	r = sim_host_try_finalize(h, domid);
	sim_host_close(h);
	if (r < 0)
		return r;
	return r != SIM_DOM_FREE;
}

int xbd_sim_domain_free_id(const char *dir)
{
	struct sim_hostmap *h;
	int r;

	r = sim_host_open(dir, &h);
	if (r)
		return r;
	r = sim_host_lock(h->host);
	if (r)
		goto out;
	r = -ENOSPC;
	for (uint32_t id = 1; id <= XBD_SIM_MAX_DOMID; id++) {
		sim_host_try_finalize_locked(h, id);
		if (__atomic_load_n(&h->host->doms[id].state, __ATOMIC_ACQUIRE) == SIM_DOM_FREE) {
			r = (int)id;
			break;
		}
	}
	sim_host_unlock(h->host);
out:
	sim_host_close(h);
	return r;
}

int xbd_sim_domain_list(const char *dir, struct xbd_sim_domain_info *out,
			unsigned int max)
{
	struct sim_hostmap *h;
	unsigned int n = 0;
	int r;

	r = sim_host_open(dir, &h);
	if (r)
		return r;
	r = sim_host_lock(h->host);
	if (r)
		goto out;
	for (uint32_t id = 0; id <= XBD_SIM_MAX_DOMID; id++) {
		struct sim_host_dom *s = &h->host->doms[id];
		uint32_t state;

		sim_host_try_finalize_locked(h, id);
		state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
		if (state == SIM_DOM_FREE)
			continue;
		if (n < max && out) {
			out[n].domid = id;
			out[n].dying = state == SIM_DOM_DYING;
			out[n].mem_bytes = (uint64_t)s->mem_pages << SIM_PAGE_SHIFT;
		}
		n++;
	}
	sim_host_unlock(h->host);
	r = (int)n;
out:
	sim_host_close(h);
	return r;
}
