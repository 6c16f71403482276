/*
 * journal.c: a ring's crash journal (journal.h says why and in what
 * order it is written): its file, and the decision of what a restarted
 * daemon executes again.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blkback/journal.h"

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

static int journal_map(int fd, size_t size, const char *path, struct xbd_journal **out)
{
	struct xbd_journal *j = calloc(1, sizeof(*j));
	void *p;

	if (!j)
		return -ENOMEM;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		free(j);
		return -errno;
	}
	j->hdr = p;
	j->ents = (struct xbd_jreq *)((char *)p + sizeof(struct xbd_journal_hdr));
	j->size = size;
	snprintf(j->path, sizeof(j->path), "%s", path);
	*out = j;
	return 0;
}

int xbd_journal_create(const char *path, const struct xbd_journal_id *id, uint32_t rsp_prod,
		       struct xbd_journal **out)
{
	char tmp[sizeof(((struct xbd_journal *)0)->path) + 8];
	size_t size;
	int fd, err;

	if (!id->nr_ents || id->nr_ents > JOURNAL_MAX_ENTS)
		return -EINVAL;
	if (strlen(path) >= sizeof(((struct xbd_journal *)0)->path) ||
	    snprintf(tmp, sizeof(tmp), "%s.new", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	size = journal_size(id->nr_ents);
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	/* A fresh file of zeros: every entry FREE. */
	if (ftruncate(fd, (off_t)size)) {
		err = -errno;
		goto fail;
	}
	err = journal_map(fd, size, path, out);
	if (err)
		goto fail;
	(*out)->hdr->version = XBD_JOURNAL_VERSION;
	(*out)->hdr->ent_size = sizeof(struct xbd_jreq);
	(*out)->hdr->id = *id;
	(*out)->hdr->consumed = rsp_prod;
	(*out)->hdr->pushing = rsp_prod;
	(*out)->hdr->pushed = rsp_prod;
	xbd_journal_order();
	(*out)->hdr->magic = XBD_JOURNAL_MAGIC;
	if (rename(tmp, path)) {
		err = -errno;
		xbd_journal_close(*out);
		*out = NULL;
		goto fail;
	}
	close(fd);
	return 0;
fail:
	close(fd);
	unlink(tmp);
	return err;
}

int xbd_journal_load(const char *path, struct xbd_journal **out)
{
	struct xbd_journal_hdr h;
	struct stat st;
	int fd, err;

	if (strlen(path) >= sizeof(((struct xbd_journal *)0)->path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	err = -EINVAL;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (size_t)st.st_size < sizeof(h) ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		goto out;
	if (h.magic != XBD_JOURNAL_MAGIC || h.version != XBD_JOURNAL_VERSION ||
	    h.ent_size != sizeof(struct xbd_jreq) || !h.id.nr_ents ||
	    h.id.nr_ents > JOURNAL_MAX_ENTS || (size_t)st.st_size != journal_size(h.id.nr_ents))
		goto out;
	err = journal_map(fd, (size_t)st.st_size, path, out);
out:
	close(fd);
	return err;
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

void xbd_journal_discard(struct xbd_journal *j)
{
	if (!j)
		return;
	unlink(j->path);
	xbd_journal_close(j);
}
