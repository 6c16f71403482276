/*
 * journal.c: a ring's crash journal (journal.h says why and in what
 * order it is written): its file (made and locked by the control plane,
 * mapped by the ring), and the decision of what a restarted daemon
 * executes again.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blkback/datapath/journal.h"

_Static_assert(sizeof(struct xbd_jreq) == 192, "journal entries are three cache lines");
_Static_assert(offsetof(struct xbd_journal_hdr, consumed) % 64 == 0,
	       "the journal's indexes start a cache line");

/* The ring's slot count bounds it; a file that says more is not ours. */
#define JOURNAL_MAX_ENTS 4096

int xbd_journal_path(char *buf, size_t len, const char *dir, const char *type, uint32_t domid,
		     uint32_t devid, unsigned int queue)
{
	int n = snprintf(buf, len, "%s/%s.%u.%u.%u", dir, type, domid, devid, queue);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static size_t journal_size(unsigned int nr_ents)
{
	return sizeof(struct xbd_journal_hdr) + (size_t)nr_ents * sizeof(struct xbd_jreq);
}

/* A journal's path is at most this long (with room for the temporary suffix). */
#define JOURNAL_PATH_MAX 256

/* The exclusive lock of a journal's file, for up to wait_ms. */
static int lock_file(int fd, unsigned int wait_ms)
{
	struct timespec ten_ms = { 0, 10 * 1000000 };
	unsigned int waited = 0;

	while (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (waited >= wait_ms)
			return -EBUSY;
		nanosleep(&ten_ms, NULL);
		waited += 10;
	}
	return 0;
}

int xbd_journal_file_create(const char *path, const struct xbd_journal_id *id, int *out)
{
	char tmp[JOURNAL_PATH_MAX + 8];
	struct xbd_journal_hdr h;
	uint64_t magic = XBD_JOURNAL_MAGIC;
	int fd, err;

	if (!id->nr_ents || id->nr_ents > JOURNAL_MAX_ENTS)
		return -EINVAL;
	if (strlen(path) >= JOURNAL_PATH_MAX ||
	    snprintf(tmp, sizeof(tmp), "%s.new", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	err = lock_file(fd, 0);
	if (err)
		goto fail;
	/* A file of zeros: every entry FREE; the magic last. */
	memset(&h, 0, sizeof(h));
	h.version = XBD_JOURNAL_VERSION;
	h.ent_size = sizeof(struct xbd_jreq);
	h.id = *id;
	h.fresh = 1;
	errno = 0;
	if (ftruncate(fd, (off_t)journal_size(id->nr_ents)) ||
	    pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    pwrite(fd, &magic, sizeof(magic), offsetof(struct xbd_journal_hdr, magic)) !=
		    (ssize_t)sizeof(magic) ||
	    rename(tmp, path)) {
		err = errno ? -errno : -EIO;
		goto fail;
	}
	*out = fd;
	return 0;
fail:
	close(fd);
	unlink(tmp);
	return err;
}

int xbd_journal_file_open(const char *path, unsigned int wait_ms, int *out)
{
	struct stat st;
	int fd, err;

	if (strlen(path) >= JOURNAL_PATH_MAX)
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	err = fstat(fd, &st) ? -errno : !S_ISREG(st.st_mode) ? -EINVAL : 0;
	if (!err)
		err = lock_file(fd, wait_ms);
	if (err) {
		close(fd);
		return err;
	}
	*out = fd;
	return 0;
}

int xbd_journal_map(int fd, struct xbd_journal **out)
{
	struct xbd_journal_hdr h;
	struct xbd_journal *j;
	struct stat st;
	void *p;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (size_t)st.st_size < sizeof(h) ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return -EINVAL;
	if (h.magic != XBD_JOURNAL_MAGIC || h.version != XBD_JOURNAL_VERSION ||
	    h.ent_size != sizeof(struct xbd_jreq) || !h.id.nr_ents ||
	    h.id.nr_ents > JOURNAL_MAX_ENTS || (size_t)st.st_size != journal_size(h.id.nr_ents))
		return -EINVAL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int err = -errno;

		free(j);
		return err;
	}
	j->hdr = p;
	j->ents = (struct xbd_jreq *)((char *)p + sizeof(struct xbd_journal_hdr));
	j->size = (size_t)st.st_size;
	*out = j;
	return 0;
}

int xbd_journal_start(struct xbd_journal *j, uint32_t rsp_prod)
{
	struct xbd_journal_hdr *h = j->hdr;

	if (__atomic_load_n(&h->fresh, __ATOMIC_RELAXED) != 1)
		return -EINVAL;
	xbd_jstore(&h->consumed, rsp_prod);
	xbd_jstore(&h->pushing, rsp_prod);
	xbd_jstore(&h->pushed, rsp_prod);
	xbd_journal_order();
	xbd_jstore(&h->fresh, 0);
	xbd_journal_order();
	return 0;
}

bool xbd_journal_matches(const struct xbd_journal *j, const struct xbd_journal_id *id)
{
	const struct xbd_journal_id *h = &j->hdr->id;

	return !strncmp(h->type, id->type, sizeof(h->type)) && h->domid == id->domid &&
	       h->devid == id->devid && h->queue == id->queue && h->nr_queues == id->nr_queues &&
	       h->abi == id->abi && h->nr_pages == id->nr_pages &&
	       h->remote_port == id->remote_port && h->nr_ents == id->nr_ents &&
	       h->nr_pages <= XBD_RING_MAX_PAGES &&
	       !memcmp(h->refs, id->refs, h->nr_pages * sizeof(h->refs[0]));
}

/* a before b, modulo 2^32 (indexes at most 2^31 apart). */
static bool before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

int xbd_journal_plan(struct xbd_journal *j, uint32_t rsp_prod, uint32_t req_prod, bool *redo,
		     unsigned int *nredo)
{
	struct xbd_journal_hdr *h = j->hdr;
	const unsigned int n = h->id.nr_ents;
	uint32_t consumed = h->consumed;
	unsigned int i, count = 0;

	/* Made and never started: the ring had taken nothing. */
	if (h->fresh == 1) {
		for (i = 0; i < n; i++)
			if (j->ents[i].state != XBD_J_FREE)
				return -EPROTO;
		if (req_prod - rsp_prod > n)
			return -EPROTO;
		*nredo = 0;
		for (i = 0; i < n; i++)
			redo[i] = false;
		return xbd_journal_start(j, rsp_prod);
	}

	/* The guest sees rsp_prod: it must be one we published or were publishing. */
	if (rsp_prod != h->pushed && rsp_prod != h->pushing)
		return -EPROTO;
	/* Taken and unanswered-as-seen: at most a ring's worth, all produced by the guest. */
	if (consumed - rsp_prod > n || req_prod - consumed > n)
		return -EPROTO;
	for (i = 0; i < n; i++) {
		const struct xbd_jreq *e = &j->ents[i];
		uint32_t state = e->state;

		redo[i] = false;
		if (state == XBD_J_FREE)
			continue;
		if (state != XBD_J_TAKEN && state != XBD_J_ANSWERED)
			return -EPROTO;
		/*
		 * Taken but not yet counted in consumed: the ring still holds
		 * it.  (A request taken long ago may still be in flight while
		 * later ones come and go: its seq has no lower bound.)
		 */
		if (!before(e->seq, consumed))
			continue;
		/* Answered and the answer pushed: done. */
		if (state == XBD_J_ANSWERED && before(e->rsp, rsp_prod))
			continue;
		if (state == XBD_J_ANSWERED && !before(e->rsp, consumed))
			return -EPROTO; /* an answer after everything taken: not ours */
		redo[i] = true;
		count++;
	}
	if (count != consumed - rsp_prod)
		return -EPROTO;
	/* Each request once. */
	for (i = 0; i < n; i++) {
		unsigned int k;

		for (k = i + 1; redo[i] && k < n; k++)
			if (redo[k] && j->ents[k].seq == j->ents[i].seq)
				return -EPROTO;
	}
	/* The plan holds: make the journal say it. */
	for (i = 0; i < n; i++) {
		if (redo[i]) {
			xbd_jstore(&j->ents[i].state, XBD_J_TAKEN);
		} else if (j->ents[i].state != XBD_J_FREE) {
			xbd_journal_order();
			xbd_jstore(&j->ents[i].state, XBD_J_FREE);
		}
	}
	xbd_journal_order();
	xbd_jstore(&h->pushing, rsp_prod);
	xbd_jstore(&h->pushed, rsp_prod);
	*nredo = count;
	return 0;
}

void xbd_journal_get(const struct xbd_jreq *e, struct xbd_request *r)
{
	unsigned int n = e->indirect ? 0 : e->nr_segments;

	if (n > BLKIF_MAX_SEGMENTS_PER_REQUEST)
		n = BLKIF_MAX_SEGMENTS_PER_REQUEST;
	memset(r, 0, offsetof(struct xbd_request, seg));
	r->id = e->id;
	r->sector_number = e->sector_number;
	r->nr_sectors = e->nr_sectors;
	r->operation = e->operation;
	r->raw_operation = e->raw_operation;
	r->indirect = e->indirect;
	r->discard_flags = e->discard_flags;
	r->handle = e->handle;
	r->nr_segments = e->nr_segments;
	memcpy(r->seg, e->seg, n * sizeof(r->seg[0]));
	if (e->indirect)
		memcpy(r->indirect_grefs, e->indirect_grefs, sizeof(r->indirect_grefs));
}

void xbd_journal_close(struct xbd_journal *j)
{
	if (!j)
		return;
	munmap(j->hdr, j->size);
	free(j);
}
