/*
 * sim/dom.c: opening one simulated domain's memory files (guest memory,
 * grant table, Xen's side; held by the keeper) in this process, and the
 * mapper lock that keeps a destroyed domain's memory alive while some
 * process still maps it, and the pin locks that tell a live process's
 * grant pins from a dead one's.
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

static int dom_open_once(struct sim_hostmap *h, uint32_t domid, uint32_t gen,
			 struct sim_dom *d)
{
	int fds[SIM_KEEPER_NFDS] = { -1, -1, -1 };
	uint64_t size[SIM_KEEPER_NFDS];
	int r;

	r = sim_keeper_call(h->sock, SIM_KEEPER_GET, domid, gen, NULL, 0, fds);
	if (r == -ESRCH)
		return -EAGAIN;
	if (r >= 0 && r != SIM_KEEPER_NFDS)
		r = -EPROTO;
	for (int i = 0; r >= 0 && i < SIM_KEEPER_NFDS; i++)
		r = sim_memfd_check(fds[i], &size[i]);
	if (r < 0)
		goto out;
	/*
	 * Sizes are what the sealed files say, whatever shared data claim:
	 * they can never change while we map them.
	 */
	r = -EPROTO;
	if (size[0] < SIM_PAGE_SIZE || size[0] % SIM_PAGE_SIZE ||
	    size[0] >> SIM_PAGE_SHIFT > SIM_MAX_MEM_PAGES)
		goto out;
	d->mem_pages = (uint32_t)(size[0] >> SIM_PAGE_SHIFT);
	d->gnt_size = sim_gnt_file_size(d->mem_pages);
	if (size[1] < d->gnt_size || size[2] < sizeof(struct sim_xen_file))
		goto out;
	d->mem_fd = fds[0];
	fds[0] = -1;
	/* Xen's file comes as an open file of our own (its mapper mark is an OFD lock). */
	d->xen_fd = fds[2];
	fds[2] = -1;
	d->mem = mmap(NULL, (size_t)d->mem_pages << SIM_PAGE_SHIFT,
		      PROT_READ | PROT_WRITE, MAP_SHARED, d->mem_fd, 0);
	if (d->mem == MAP_FAILED) {
		d->mem = NULL;
		r = -errno;
		goto out;
	}
	d->gnt = mmap(NULL, d->gnt_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
	if (d->gnt == MAP_FAILED) {
		d->gnt = NULL;
		r = -errno;
		goto out;
	}
	d->xen = mmap(NULL, sizeof(struct sim_xen_file), PROT_READ | PROT_WRITE,
		      MAP_SHARED, d->xen_fd, 0);
	if (d->xen == MAP_FAILED) {
		d->xen = NULL;
		r = -errno;
		goto out;
	}
	r = 0;
	if (__atomic_load_n(&d->xen->magic, __ATOMIC_ACQUIRE) != SIM_XEN_MAGIC ||
	    d->xen->gen != gen || d->xen->domid != domid)
		r = -EAGAIN;
out:
	for (int i = 0; i < SIM_KEEPER_NFDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return r;
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
	free(d->pins);
	free(d);
}

static int ofd_lock_range(int fd, short type, int cmd, off_t start, off_t len,
			  struct flock *fl)
{
	*fl = (struct flock){ .l_type = type, .l_whence = SEEK_SET, .l_start = start,
			      .l_len = len };
	return fcntl(fd, cmd, fl) < 0 ? -errno : 0;
}

static int ofd_lock(int fd, short type, int cmd, struct flock *fl)
{
	return ofd_lock_range(fd, type, cmd, 0, 1, fl);
}

/* Byte 0 of Xen's file is the mapper lock; byte 1 + ref, ref's pin lock. */
static off_t pin_lock_byte(uint32_t ref)
{
	return (off_t)1 + ref;
}

/*
 * Lock (type F_RDLCK) or unlock (F_UNLCK) the pin lock of every refs[i]
 * with want[i], one fcntl per run of adjacent references.
 */
static int pin_locks_set(struct sim_dom *d, unsigned int count, const uint32_t *refs,
			 const bool *want, short type)
{
	struct flock fl;

	for (unsigned int i = 0; i < count;) {
		unsigned int j = i + 1;
		int r;

		if (!want[i]) {
			i++;
			continue;
		}
		while (j < count && want[j] && refs[j] == refs[j - 1] + 1)
			j++;
		r = ofd_lock_range(d->xen_fd, type, F_OFD_SETLK, pin_lock_byte(refs[i]),
				   (off_t)(j - i), &fl);
		if (r < 0)
			return r;
		i = j;
	}
	return 0;
}

int sim_dom_pins_hold(struct sim_dom *d, unsigned int count, const uint32_t *refs)
{
	bool *first = calloc(count ? count : 1, sizeof(*first));
	int r = 0;

	if (!first)
		return -ENOMEM;
	if (!d->pins)
		d->pins = calloc(SIM_NR_GRANTS, sizeof(*d->pins));
	if (!d->pins) {
		free(first);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < count; i++) {
		if (refs[i] >= SIM_NR_GRANTS)
			continue;
		first[i] = d->pins[refs[i]]++ == 0;
	}
	r = pin_locks_set(d, count, refs, first, F_RDLCK);
	if (r < 0) {
		/* Undo the counts; a lock taken on the way is dropped with the last. */
		for (unsigned int i = 0; i < count; i++)
			if (refs[i] < SIM_NR_GRANTS)
				d->pins[refs[i]]--;
		for (unsigned int i = 0; i < count; i++)
			first[i] = first[i] && refs[i] < SIM_NR_GRANTS && !d->pins[refs[i]];
		pin_locks_set(d, count, refs, first, F_UNLCK);
	}
	free(first);
	return r;
}

void sim_dom_pins_release(struct sim_dom *d, unsigned int count, const uint32_t *refs)
{
	bool *last = calloc(count ? count : 1, sizeof(*last));

	if (!d->pins)
		goto out;
	for (unsigned int i = 0; i < count; i++) {
		if (refs[i] >= SIM_NR_GRANTS || !d->pins[refs[i]])
			continue;
		if (--d->pins[refs[i]] == 0 && last)
			last[i] = true;
	}
	if (last) {
		pin_locks_set(d, count, refs, last, F_UNLCK);
	} else {
		/* No memory for the runs: one reference at a time. */
		for (unsigned int i = 0; i < count; i++) {
			bool one = refs[i] < SIM_NR_GRANTS && !d->pins[refs[i]];

			pin_locks_set(d, 1, &refs[i], &one, F_UNLCK);
		}
	}
out:
	free(last);
}

bool sim_dom_pin_live(struct sim_dom *d, uint32_t ref)
{
	struct flock fl;

	/* Our own lock never conflicts with ourselves: our count says it. */
	if (d->pins && ref < SIM_NR_GRANTS && d->pins[ref])
		return true;
	if (ofd_lock_range(d->xen_fd, F_WRLCK, F_OFD_GETLK, pin_lock_byte(ref), 1, &fl) < 0)
		return true;   /* cannot tell: a pin we cannot prove dead stays */
	return fl.l_type != F_UNLCK;
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

bool sim_dom_mapped(struct sim_hostmap *h, uint32_t domid, uint32_t gen)
{
	int fds[SIM_KEEPER_NFDS] = { -1, -1, -1 };
	struct flock fl;
	bool mapped = false;

	/* The keeper's own open file holds no lock: any lock we see is a mapper's. */
	if (sim_keeper_call(h->sock, SIM_KEEPER_GET, domid, gen, NULL, 0, fds) !=
	    SIM_KEEPER_NFDS)
		goto out;
	if (ofd_lock(fds[2], F_WRLCK, F_OFD_GETLK, &fl) == 0)
		mapped = fl.l_type != F_UNLCK;
out:
	for (int i = 0; i < SIM_KEEPER_NFDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return mapped;
}

bool sim_dom_running(const struct sim_hostmap *h, const struct sim_dom *d)
{
	const struct sim_host_dom *s = &h->host->doms[d->domid];

	return __atomic_load_n(&s->state, __ATOMIC_SEQ_CST) == SIM_DOM_RUNNING &&
	       __atomic_load_n(&s->gen, __ATOMIC_SEQ_CST) == d->gen;
}
