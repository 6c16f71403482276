/*
 * test-journal.c: the crash journal's ordering argument (blkback/datapath/journal.h),
 * checked at every instant.  A model ring of 8 slots runs a random
 * workload the way xbd-back's ring thread drives the journal (requests
 * taken in batches, answered out of order, pushes), with indexes that wrap
 * at 2^32.  After every step the journal is copied as a dead daemon would
 * leave it, with the shared rsp_prod of that instant, and planned: the
 * requests to execute again must be exactly those taken (counted in
 * consumed) and not answered by a pushed response, each once.  Then the
 * things a plan must refuse: an rsp_prod we never published, entries
 * that do not add up, a journal of another ring, a damaged file; a fresh
 * journal (made, never started) resumes with nothing to execute again;
 * and a journal's file is locked while anybody holds it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blkback/datapath/journal.h"

#define N 8
#define STEPS 100000

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
	failures++; if (failures > 10) exit(1); } } while (0)

/* What really happened to each request, by its index in the ring. */
struct model {
	uint32_t req_prod, consumed, rsp_pvt, rsp_prod;
	bool answered[64];       /* has a response (pushed or not) */
	uint32_t answer_idx[64]; /* the index of that response */
	bool slot_used[N];
	uint32_t slot_seq[N];    /* the seq the slot holds */
	bool slot_answered[N];
};

static unsigned int rnd(unsigned int n)
{
	return (unsigned int)random() % n;
}

static struct xbd_journal_id ring_id(void)
{
	struct xbd_journal_id id;

	memset(&id, 0, sizeof(id));
	strcpy(id.type, "vbd");
	id.domid = 5;
	id.devid = 51728;
	id.nr_queues = 1;
	id.nr_pages = 1;
	id.refs[0] = 8;
	id.remote_port = 9;
	id.nr_ents = N;
	return id;
}

/* A fresh journal's file (the control plane's part), mapped and started (the ring's). */
static struct xbd_journal *make_journal(const char *path, const struct xbd_journal_id *id,
					uint32_t rsp_prod)
{
	struct xbd_journal *j = NULL;
	int fd = -1;

	CHECK(xbd_journal_file_create(path, id, &fd) == 0);
	CHECK(xbd_journal_map(fd, &j) == 0);
	CHECK(j && xbd_journal_start(j, rsp_prod) == 0);
	/* The mapping outlives the fd. */
	close(fd);
	if (!j)
		exit(1);
	return j;
}

/* Plan a copy of the journal as it is now, and compare with the model. */
static void check_instant(struct xbd_journal *j, const struct model *m)
{
	struct xbd_journal copy = *j, *c = &copy;
	bool redo[N];
	unsigned int nredo = 0, i, want = 0;

	/* What a daemon killed at this instant leaves in the file. */
	copy.hdr = malloc(j->size);
	CHECK(copy.hdr != NULL);
	memcpy(copy.hdr, j->hdr, j->size);
	copy.ents = (struct xbd_jreq *)((char *)copy.hdr + sizeof(*copy.hdr));
	CHECK(xbd_journal_plan(c, m->rsp_prod, m->req_prod, redo, &nredo) == 0);
	for (i = 0; i < N; i++) {
		uint32_t seq = m->slot_seq[i];
		bool expect;

		/* Taken and counted, not answered by a response the guest can see. */
		expect = m->slot_used[i] && (int32_t)(seq - c->hdr->consumed) < 0 &&
			 !(m->slot_answered[i] &&
			   (int32_t)(m->answer_idx[seq % 64] - m->rsp_prod) < 0);
		CHECK(redo[i] == expect);
		if (expect) {
			struct xbd_request r;

			xbd_journal_get(&c->ents[i], &r);
			CHECK(r.id == (uint64_t)seq * 3 && r.sector_number == seq);
			want++;
		}
	}
	CHECK(nredo == want);
	CHECK(nredo == c->hdr->consumed - m->rsp_prod);
	free(copy.hdr);
}

static void run_model(const char *path, uint32_t start)
{
	struct xbd_journal_id id = ring_id();
	struct xbd_journal *j;
	struct model m;
	unsigned int step, i;

	memset(&m, 0, sizeof(m));
	m.req_prod = m.consumed = m.rsp_pvt = m.rsp_prod = start;
	j = make_journal(path, &id, start);
	for (step = 0; step < STEPS; step++) {
		switch (rnd(4)) {
		case 0: /* the guest produces (at most a ring's worth it has not seen answered) */
			if (m.req_prod - m.rsp_prod < N)
				m.req_prod++;
			break;
		case 1: { /* consume a batch: take each, then consumed once */
			unsigned int k = rnd(4) + 1, t = 0;

			while (t < k && m.req_prod != m.consumed) {
				struct xbd_request r;
				int s = -1;

				for (i = 0; i < N; i++)
					if (!m.slot_used[i]) {
						s = (int)i;
						break;
					}
				if (s < 0)
					break;
				memset(&r, 0, offsetof(struct xbd_request, seg));
				r.id = (uint64_t)m.consumed * 3;
				r.sector_number = m.consumed;
				r.operation = r.raw_operation = BLKIF_OP_WRITE;
				r.nr_segments = 1;
				r.seg[0].gref = m.consumed;
				xbd_journal_take(j, (unsigned int)s, m.consumed, &r);
				m.slot_used[s] = true;
				m.slot_seq[s] = m.consumed;
				m.slot_answered[s] = false;
				m.consumed++;
				t++;
				/* Killed here: taken, not yet counted. */
				check_instant(j, &m);
			}
			if (t)
				xbd_journal_consumed(j, m.consumed);
			break;
		}
		case 2: { /* answer one in-flight request, any of them */
			int cand[N], nc = 0, s;

			for (i = 0; i < N; i++)
				if (m.slot_used[i] && !m.slot_answered[i] &&
				    (int32_t)(m.slot_seq[i] - j->hdr->consumed) < 0)
					cand[nc++] = (int)i;
			if (!nc)
				break;
			s = cand[rnd(nc)];
			xbd_journal_answer(j, (unsigned int)s, m.rsp_pvt);
			m.slot_answered[s] = true;
			m.answer_idx[m.slot_seq[s] % 64] = m.rsp_pvt;
			m.rsp_pvt++;
			break;
		}
		default: /* push: pushing, the shared store, pushed, then free */
			if (m.rsp_pvt == m.rsp_prod)
				break;
			xbd_journal_pushing(j, m.rsp_pvt);
			check_instant(j, &m); /* killed before the shared store */
			m.rsp_prod = m.rsp_pvt;
			check_instant(j, &m); /* ... after it */
			xbd_journal_pushed(j, m.rsp_pvt);
			for (i = 0; i < N; i++)
				if (m.slot_used[i] && m.slot_answered[i]) {
					xbd_journal_free(j, i);
					m.slot_used[i] = false;
					m.slot_answered[i] = false;
				}
			break;
		}
		check_instant(j, &m);
	}
	xbd_journal_close(j);
	unlink(path);
}

static void refusals(const char *path, const char *scratch)
{
	struct xbd_journal_id id = ring_id(), other = ring_id();
	struct xbd_journal *j, *c;
	struct xbd_request r;
	bool redo[N];
	unsigned int n;
	int fd;
	FILE *f;

	j = make_journal(path, &id, 100);
	/* Started once only. */
	CHECK(xbd_journal_start(j, 100) == -EINVAL);
	CHECK(xbd_journal_matches(j, &id));
	other.refs[0] = 9;
	CHECK(!xbd_journal_matches(j, &other));
	other = ring_id();
	other.remote_port = 10;
	CHECK(!xbd_journal_matches(j, &other));
	memset(&r, 0, sizeof(r));
	r.operation = r.raw_operation = BLKIF_OP_READ;
	xbd_journal_take(j, 0, 100, &r);
	xbd_journal_take(j, 1, 101, &r);
	xbd_journal_consumed(j, 102);
	/* An rsp_prod we never published. */
	CHECK(xbd_journal_plan(j, 101, 102, redo, &n) == -EPROTO);
	CHECK(xbd_journal_plan(j, 5000, 5002, redo, &n) == -EPROTO);
	/* A request producer that ran away. */
	CHECK(xbd_journal_plan(j, 100, 100 + 2 * N + 3, redo, &n) == -EPROTO);
	/* Entries that do not add up to consumed - rsp_prod. */
	xbd_journal_free(j, 1);
	CHECK(xbd_journal_plan(j, 100, 102, redo, &n) == -EPROTO);
	xbd_jstore(&j->ents[1].state, XBD_J_TAKEN);
	/* A state that is none of ours. */
	xbd_jstore(&j->ents[2].state, 7);
	CHECK(xbd_journal_plan(j, 100, 102, redo, &n) == -EPROTO);
	xbd_jstore(&j->ents[2].state, XBD_J_FREE);
	CHECK(xbd_journal_plan(j, 100, 102, redo, &n) == 0 && n == 2 && redo[0] && redo[1]);
	xbd_journal_close(j);
	/* Damaged files: truncated, wrong magic, a directory, missing. */
	CHECK(truncate(path, 100) == 0);
	CHECK(xbd_journal_file_open(path, 0, &fd) == 0);
	CHECK(xbd_journal_map(fd, &c) == -EINVAL);
	close(fd);
	f = fopen(scratch, "w");
	CHECK(f && fputs("not a journal at all, but long enough to hold a header............"
			 "......................................................................"
			 "......................................................................"
			 "..........", f) >= 0);
	fclose(f);
	CHECK(xbd_journal_file_open(scratch, 0, &fd) == 0);
	CHECK(xbd_journal_map(fd, &c) == -EINVAL);
	close(fd);
	CHECK(xbd_journal_file_open("/nonexistent/journal", 0, &fd) == -ENOENT);
	CHECK(xbd_journal_file_open("/tmp", 0, &fd) != 0);
	unlink(path);
}

/*
 * A journal made and never started (the process died between the two):
 * whatever the ring's indexes, nothing was taken, and the plan starts it.
 * Its file is locked while the first fd is open, and free once it closes.
 */
static void fresh_and_locked(const char *path)
{
	struct xbd_journal_id id = ring_id();
	struct xbd_journal *j = NULL;
	bool redo[N];
	unsigned int n = 99;
	int fd = -1, fd2 = -1;

	CHECK(xbd_journal_file_create(path, &id, &fd) == 0);
	CHECK(xbd_journal_file_open(path, 50, &fd2) == -EBUSY);
	CHECK(xbd_journal_map(fd, &j) == 0);
	if (!j)
		exit(1);
	CHECK(xbd_journal_plan(j, 1234, 1236, redo, &n) == 0 && n == 0);
	CHECK(j->hdr->consumed == 1234 && j->hdr->pushed == 1234 && !j->hdr->fresh);
	CHECK(xbd_journal_start(j, 1234) == -EINVAL);
	/* A fresh journal with an entry taken is not one the ring made. */
	xbd_journal_close(j);
	close(fd);
	CHECK(xbd_journal_file_open(path, 0, &fd2) == 0);
	close(fd2);
	CHECK(xbd_journal_file_create(path, &id, &fd) == 0);
	CHECK(xbd_journal_map(fd, &j) == 0);
	if (!j)
		exit(1);
	xbd_jstore(&j->ents[3].state, XBD_J_TAKEN);
	CHECK(xbd_journal_plan(j, 0, 0, redo, &n) == -EPROTO);
	xbd_journal_close(j);
	close(fd);
	unlink(path);
}



int main(void)
{
	char dir[] = "/tmp/xbd-journal-test.XXXXXX", path[300], scratch[300];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/vbd.5.51728.0", dir);
	snprintf(scratch, sizeof(scratch), "%s/copy", dir);
	srandom(1);
	run_model(path, 0);
	run_model(path, 0xfffffff0u); /* the indexes wrap */
	refusals(path, scratch);
	fresh_and_locked(path);
	unlink(scratch);
	rmdir(dir);
	if (failures)
		return 1;
	printf("PASS: journal plan right at every instant of %u steps (twice), refusals, fresh and locked journals\n", STEPS);
	return 0;
}
