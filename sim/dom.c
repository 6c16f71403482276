/*
 * sim/dom.c: opening one simulated domain's files (guest memory, grant
 * table, Xen's side) in this process, and the mapper lock that keeps a
 * destroyed domain's memory alive while some process still maps it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/layout.h"

size_t sim_gnt_file_size(uint32_t mem_pages)
{
	size_t size = offsetof(struct sim_gnt_file, page_map) +
		      ((size_t)mem_pages + 63) / 64 * sizeof(uint64_t);

	return (size + SIM_PAGE_SIZE - 1) & ~(size_t)(SIM_PAGE_SIZE - 1);
}

void sim_dom_path(const struct sim_hostmap *h, uint32_t domid, const char *ext,
		  char *buf, size_t len)
{
	snprintf(buf, len, "%s/dom-%u.%s", h->memdir, domid, ext);
}

static int open_file(const struct sim_hostmap *h, uint32_t domid, const char *ext,
		     size_t min_size, off_t *size)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	sim_dom_path(h, domid, ext, path, sizeof(path));
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < min_size) {
		close(fd);
		return -EPROTO;
	}
	*size = st.st_size;
	return fd;
}

static int dom_open_once(struct sim_hostmap *h, uint32_t domid, uint32_t gen,
			 struct sim_dom *d)
{
	off_t size;
	int fd;

	d->mem_fd = open_file(h, domid, "mem", SIM_PAGE_SIZE, &size);
	if (d->mem_fd < 0)
		return d->mem_fd;
	/* The memory's size is what the file says, whatever shared data claim. */
	if ((uint64_t)size >> SIM_PAGE_SHIFT > SIM_MAX_MEM_PAGES)
		return -EPROTO;
	d->mem_pages = (uint32_t)((uint64_t)size >> SIM_PAGE_SHIFT);
	d->mem = mmap(NULL, (size_t)d->mem_pages << SIM_PAGE_SHIFT,
		      PROT_READ | PROT_WRITE, MAP_SHARED, d->mem_fd, 0);
	if (d->mem == MAP_FAILED) {
		d->mem = NULL;
		return -errno;
	}

	d->gnt_size = sim_gnt_file_size(d->mem_pages);
	fd = open_file(h, domid, "gnt", d->gnt_size, &size);
	if (fd < 0)
		return fd;
	d->gnt = mmap(NULL, d->gnt_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (d->gnt == MAP_FAILED) {
		d->gnt = NULL;
		return -errno;
	}

	d->xen_fd = open_file(h, domid, "xen", sizeof(struct sim_xen_file), &size);
	if (d->xen_fd < 0)
		return d->xen_fd;
	d->xen = mmap(NULL, sizeof(struct sim_xen_file), PROT_READ | PROT_WRITE,
		      MAP_SHARED, d->xen_fd, 0);
	if (d->xen == MAP_FAILED) {
		d->xen = NULL;
		return -errno;
	}
	if (__atomic_load_n(&d->xen->magic, __ATOMIC_ACQUIRE) != SIM_XEN_MAGIC ||
	    d->xen->gen != gen || d->xen->domid != domid)
		return -EAGAIN;
	return 0;
}

static void dom_unmap(struct sim_dom *d)
{
	if (d->xen)
		munmap(d->xen, sizeof(struct sim_xen_file));
	if (d->gnt)
		munmap(d->gnt, d->gnt_size);
	if (d->mem)
		munmap(d->mem, (size_t)d->mem_pages << SIM_PAGE_SHIFT);
	if (d->xen_fd >= 0)
		close(d->xen_fd);
	if (d->mem_fd >= 0)
		close(d->mem_fd);
}

int sim_dom_open(struct sim_hostmap *h, uint32_t domid, struct sim_dom **out)
{
	struct sim_host_dom *s;
	struct sim_dom *d;

	if (domid > XBD_SIM_MAX_DOMID)
		return -ESRCH;
	s = &h->host->doms[domid];
	/*
	 * A domain may be destroyed and created again while we open its
	 * files: we want files and slot of one and the same incarnation.
	 */
	for (int tries = 0; tries < 5; tries++) {
		uint32_t state = __atomic_load_n(&s->state, __ATOMIC_SEQ_CST);
		uint32_t gen = __atomic_load_n(&s->gen, __ATOMIC_SEQ_CST);
		int r;

		if (state == SIM_DOM_FREE)
			return -ESRCH;
		d = calloc(1, sizeof(*d));
		if (!d)
			return -ENOMEM;
		d->mem_fd = d->xen_fd = -1;
		d->domid = domid;
		d->gen = gen;
		r = dom_open_once(h, domid, gen, d);
		if (r == 0 && __atomic_load_n(&s->gen, __ATOMIC_SEQ_CST) == gen) {
			*out = d;
			return 0;
		}
		dom_unmap(d);
		free(d);
		if (r != -EAGAIN && r != -ENOENT && r != 0)
			return r;
	}
	return -ESRCH;
}

void sim_dom_close(struct sim_dom *d)
{
	if (!d)
		return;
	dom_unmap(d);
	free(d);
}

static int ofd_lock(int fd, short type, int cmd, struct flock *fl)
{
	*fl = (struct flock){ .l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
	return fcntl(fd, cmd, fl) < 0 ? -errno : 0;
}

/*
 * An OFD lock, not a counter in shared memory: the kernel drops it when
 * the process dies, so a crashed backend cannot keep a dead domain alive.
 */
int sim_dom_mapper_hold(struct sim_dom *d)
{
	struct flock fl;

	return ofd_lock(d->xen_fd, F_RDLCK, F_OFD_SETLK, &fl);
}

void sim_dom_mapper_release(struct sim_dom *d)
{
	struct flock fl;

	ofd_lock(d->xen_fd, F_UNLCK, F_OFD_SETLK, &fl);
}

bool sim_dom_path_mapped(const char *xen_path)
{
	struct flock fl;
	bool mapped = false;
	int fd = open(xen_path, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (ofd_lock(fd, F_WRLCK, F_OFD_GETLK, &fl) == 0)
		mapped = fl.l_type != F_UNLCK;
	close(fd);
	return mapped;
}

bool sim_dom_running(const struct sim_hostmap *h, const struct sim_dom *d)
{
	const struct sim_host_dom *s = &h->host->doms[d->domid];

	return __atomic_load_n(&s->state, __ATOMIC_SEQ_CST) == SIM_DOM_RUNNING &&
	       __atomic_load_n(&s->gen, __ATOMIC_SEQ_CST) == d->gen;
}
