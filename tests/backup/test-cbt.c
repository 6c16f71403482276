/*
 * test-cbt.c: changed-block tracking's pieces on their own (the data
 * path's cbt.c on a tracking file the test makes; cbt-format.h's
 * arithmetic), without a daemon or a guest:
 *
 *  - the layout: a 2 TiB disk at 64 KiB has 4 MiB bitmaps and at most
 *    16384 zones of at least 64 MiB; a disk not a whole number of blocks
 *    rounds up;
 *  - bit ranges set by atomic ORs, against a plain array, across words;
 *  - the view's table: a copy found after probing past others, wrapping;
 *  - a tracking file with a bad checksum, or too short, is refused;
 *  - a write admitted is counted until answered; one admitted while a
 *    checkpoint holds writes is held back (and not counted); its blocks
 *    are marked only once a checkpoint is live; the first write into a
 *    zone syncs the file before it goes, the next one in that zone does
 *    not, another ring's write there while the intent is unsynced does;
 *    a write past the bitmaps flags the overflow;
 *  - the drained section against a thread that admits and answers
 *    writes as fast as it can: no write is ever admitted and out while
 *    the section says none is (the Dekker pair of cbt.c).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blkback/datapath/cbt.h"
#include "blkback/datapath/ring-thread.h"
#include "common/clock.h"

static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { \
	fprintf(stderr, "FAIL: %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } while (0)

static void test_layout(void)
{
	struct xbd_cbt_meta m;

	memset(&m, 0, sizeof(m));
	xbd_cbt_layout(&m, 2ull << 40, 65536, 16);
	CHECK(m.bitmap_bytes == 4u << 20, "2 TiB at 64 KiB: %llu-byte bitmaps, not 4 MiB",
	      (unsigned long long)m.bitmap_bytes);
	CHECK(m.nzones <= XBD_CBT_MAX_ZONES, "%llu zones", (unsigned long long)m.nzones);
	CHECK((65536ull << m.zone_shift) >= XBD_CBT_ZONE_MIN_BYTES, "zones smaller than 64 MiB");
	CHECK(m.file_bytes == XBD_CBT_SLOTS_OFF + 16 * m.bitmap_bytes, "file size");
	memset(&m, 0, sizeof(m));
	xbd_cbt_layout(&m, 16u << 20, 65536, 2);
	CHECK(m.nzones == 1 && m.nblocks == 256, "16 MiB: %llu zones, %llu blocks",
	      (unsigned long long)m.nzones, (unsigned long long)m.nblocks);
	memset(&m, 0, sizeof(m));
	xbd_cbt_layout(&m, 65536 * 3 + 512, 65536, 1);
	CHECK(m.nblocks == 4 && m.bitmap_bytes == XBD_CBT_PAGE, "a short last block counts");
}

static void test_ranges(void)
{
	uint64_t map[8];
	bool ref[512];

	for (int round = 0; round < 2000; round++) {
		memset(map, 0, sizeof(map));
		memset(ref, 0, sizeof(ref));
		for (int k = 0; k < 4; k++) {
			uint64_t a = (uint64_t)rand() % 512, b = (uint64_t)rand() % 512, t;

			if (a > b)
				t = a, a = b, b = t;
			xbd_cbt_set_range(map, a, b);
			for (uint64_t i = a; i <= b; i++)
				ref[i] = true;
		}
		for (uint64_t i = 0; i < 512; i++)
			if (xbd_cbt_bit(map, i) != ref[i]) {
				CHECK(0, "round %d: bit %llu is %d", round, (unsigned long long)i,
				      xbd_cbt_bit(map, i));
				return;
			}
	}
}

static void test_table(void)
{
	uint64_t table[16] = { 0 }, entries = 16;

	/* Three blocks with one home: the second and third probe on, past the end. */
	for (uint64_t b = 0, n = 0; b < 100000 && n < 3; b++) {
		if (xbd_cbt_hash(b, entries) != 15)
			continue;
		for (uint64_t i = 15, k = 0; k < entries; i = (i + 1) % entries, k++)
			if (!table[i]) {
				table[i] = (b + 1) << XBD_CBT_COPY_BITS | (7 + n);
				break;
			}
		CHECK(xbd_cbt_view_find(table, entries, b) == (int64_t)(7 + n), "block %llu",
		      (unsigned long long)b);
		n++;
	}
	CHECK(table[0] && table[1], "the probes did not wrap");
	CHECK(xbd_cbt_view_find(table, entries, 123456789) == -1, "a block never copied was found");
}

/* A tracking file of a disk of bytes, like tracking.c makes; its fd. */
static int make_file(const char *path, uint64_t bytes, uint32_t nslots, struct xbd_cbt_meta *m)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	memset(m, 0, sizeof(*m));
	m->magic = XBD_CBT_MAGIC;
	m->version = XBD_CBT_VERSION;
	m->meta_size = sizeof(*m);
	xbd_cbt_layout(m, bytes, 65536, nslots);
	/* 1 MiB zones: a 16 MiB disk has 16 */
	m->zone_shift = 4;
	m->nzones = (m->nblocks + 15) / 16;
	m->seqno = 1;
	m->sum = xbd_cbt_sum(m);
	if (fd < 0 || ftruncate(fd, (off_t)m->file_bytes) ||
	    pwrite(fd, m, sizeof(*m), XBD_CBT_META_SIZE) != (ssize_t)sizeof(*m))
		return -1;
	return fd;
}

/* A ring of disk as the hot path sees it (only what cbt.c reads). */
static struct xbd_bring *ring_of(struct xbd_disk *disk, unsigned int idx)
{
	struct xbd_bring *br = calloc(1, sizeof(*br));

	br->base.disk = disk;
	br->base.idx = idx;
	br->base.stats = &br->base.own_stats;
	snprintf(br->base.name, sizeof(br->base.name), "test ring %u", idx);
	br->cbt = disk->cbt;
	return br;
}

static struct bk_req *write_req(uint64_t sector, uint64_t sectors)
{
	struct bk_req *req = calloc(1, sizeof(*req));

	req->r.operation = BLKIF_OP_WRITE;
	req->r.sector_number = sector;
	req->r.nr_sectors = sectors;
	return req;
}

static void test_attach(const char *dir)
{
	struct xbd_disk disk;
	struct xbd_cbt_meta m;
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/bad.cbt", dir);
	fd = make_file(path, 16u << 20, 2, &m);
	m.sum ^= 1;
	CHECK(pwrite(fd, &m, sizeof(m), XBD_CBT_META_SIZE) == (ssize_t)sizeof(m), "pwrite");
	memset(&disk, 0, sizeof(disk));
	CHECK(xbd_cbt_attach(&disk, fd, -1) == -EINVAL && !disk.cbt, "a bad checksum was mapped");
	fd = open(path, O_RDWR);
	CHECK(ftruncate(fd, 4096) == 0, "truncate");
	CHECK(xbd_cbt_attach(&disk, fd, -1) == -EINVAL && !disk.cbt, "a short file was mapped");
}

static void test_hot_path(const char *dir)
{
	struct xbd_disk disk;
	struct xbd_cbt_meta m;
	struct xbd_bring *r0, *r1;
	struct bk_req *w;
	uint64_t now = 0, *slot;
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/t.cbt", dir);
	fd = make_file(path, 16u << 20, 2, &m);
	memset(&disk, 0, sizeof(disk));
	CHECK(xbd_cbt_attach(&disk, fd, -1) == 0 && disk.cbt, "attach");
	if (!disk.cbt)
		return;
	disk.cbt->run->live = XBD_CBT_NONE;
	r0 = ring_of(&disk, 0);
	r1 = ring_of(&disk, 1);
	slot = (uint64_t *)(disk.cbt->map + xbd_cbt_slot_off(&m, 1));

	/* No checkpoint yet: counted, nothing marked. */
	w = write_req(0, 8);
	CHECK(cbt_admit(r0, w, &now) && disk.cbt->run->ring[0].inflight == 1, "admit");
	cbt_mark(r0, w);
	cbt_flush(r0);
	CHECK(!slot[0], "marked before any checkpoint");
	cbt_done(r0, w);
	CHECK(disk.cbt->run->ring[0].inflight == 0, "not uncounted at its answer");

	/* A drained section: held back, not counted. */
	disk.cbt->run->hold = 1;
	w->cbt_counted = false;
	CHECK(!cbt_admit(r0, w, &now) && r0->throttled && disk.cbt->run->ring[0].inflight == 0,
	      "admitted during a drained section");
	CHECK(r0->base.own_stats.cbt_held == 1, "the held write was not counted held");
	disk.cbt->run->hold = 0;

	/* Checkpoint in slot 1: marks, and the first write into a zone syncs. */
	disk.cbt->run->live = 1;
	CHECK(cbt_admit(r0, w, &now), "admit after the section");
	cbt_mark(r0, w);
	CHECK(xbd_cbt_bit(slot, 0) && !xbd_cbt_bit(slot, 1), "block 0 alone not marked");
	CHECK(r0->cbt_sync && disk.cbt->pending == 1, "a new zone's intent asked for no sync");
	/* Ring 1 writes into the same zone before ring 0's sync: it syncs too. */
	{
		struct bk_req *w1 = write_req(128, 8);

		CHECK(cbt_admit(r1, w1, &now), "ring 1 admit");
		cbt_mark(r1, w1);
		CHECK(r1->cbt_sync && xbd_cbt_bit(slot, 1), "ring 1 relied on an unsynced intent");
		cbt_flush(r1);
		cbt_done(r1, w1);
		free(w1);
	}
	cbt_flush(r0);
	CHECK(!r0->cbt_sync && disk.cbt->pending == 0 && r0->base.own_stats.cbt_syncs == 1,
	      "the intent was not synced");
	cbt_done(r0, w);
	/* The same zone again: durable already, no sync. */
	w->r.sector_number = 256;
	CHECK(cbt_admit(r0, w, &now), "admit");
	cbt_mark(r0, w);
	CHECK(!r0->cbt_sync && xbd_cbt_bit(slot, 2), "a zone with a durable intent synced again");
	cbt_flush(r0);
	cbt_done(r0, w);
	/* Past the bitmaps (the disk grew): flagged. */
	w->r.sector_number = (16u << 20) / 512;
	CHECK(cbt_admit(r0, w, &now), "admit");
	cbt_mark(r0, w);
	cbt_flush(r0);
	cbt_done(r0, w);
	CHECK(disk.cbt->run->overflow, "a write past the bitmaps was not flagged");
	free(w);
	free(r0);
	free(r1);
	xbd_cbt_detach(&disk);
}

/* The drained section against a ring admitting and answering writes. */
struct race {
	struct xbd_disk *disk;
	volatile int stop;
	volatile int drained;    /* the section saw no write out */
	unsigned long admitted, violations;
};

static void *writer(void *arg)
{
	struct race *rc = arg;
	struct xbd_bring *br = ring_of(rc->disk, 3);
	struct bk_req *w[3] = { write_req(0, 8), write_req(8, 8), write_req(16, 8) };
	uint64_t now = 1;

	while (!rc->stop) {
		/* Up to three out at once, answered in turn. */
		for (int i = 0; i < 3; i++) {
			if (!cbt_admit(br, w[i], &now))
				continue;
			rc->admitted++;
			if (__atomic_load_n(&rc->drained, __ATOMIC_SEQ_CST))
				rc->violations++;
		}
		for (int i = 0; i < 3; i++)
			cbt_done(br, w[i]);
	}
	for (int i = 0; i < 3; i++)
		free(w[i]);
	free(br);
	return NULL;
}

static void test_drain(const char *dir)
{
	struct xbd_disk disk;
	struct xbd_cbt_meta m;
	struct race rc = { .disk = &disk };
	struct xbd_cbt_run *run;
	char path[256];
	pthread_t t;
	int sections = 0;

	snprintf(path, sizeof(path), "%s/d.cbt", dir);
	memset(&disk, 0, sizeof(disk));
	CHECK(xbd_cbt_attach(&disk, make_file(path, 16u << 20, 2, &m), -1) == 0, "attach");
	if (!disk.cbt)
		return;
	run = disk.cbt->run;
	pthread_create(&t, NULL, writer, &rc);
	/* At least 2000 sections and 10000 writes around them, within 10 s. */
	for (uint64_t end = xbd_mono_ns() + 10000000000ull;
	     (sections < 2000 || __atomic_load_n(&rc.admitted, __ATOMIC_RELAXED) < 10000) &&
	     xbd_mono_ns() < end;) {
		__atomic_store_n(&run->hold, 1, __ATOMIC_SEQ_CST);
		while (__atomic_load_n(&run->ring[3].inflight, __ATOMIC_SEQ_CST))
			;
		__atomic_store_n(&rc.drained, 1, __ATOMIC_SEQ_CST);
		sections++;
		for (volatile int k = 0; k < 200; k++)
			;
		__atomic_store_n(&rc.drained, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&run->hold, 0, __ATOMIC_RELEASE);
		for (volatile int k = 0; k < 200; k++)
			;
	}
	rc.stop = 1;
	pthread_join(t, NULL);
	CHECK(rc.violations == 0, "%lu writes admitted while a drained section said none was out",
	      rc.violations);
	CHECK(rc.admitted > 0, "no write was admitted at all");
	printf("drained sections: %d, writes admitted meanwhile around them: %lu, inside: %lu\n",
	       sections, rc.admitted, rc.violations);
	xbd_cbt_detach(&disk);
}

int main(void)
{
	char dir[] = "/tmp/test-cbt.XXXXXX";

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	srand(49);
	test_layout();
	test_ranges();
	test_table();
	test_attach(dir);
	test_hot_path(dir);
	test_drain(dir);
	{
		char cmd[64];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "note: %s not removed\n", dir);
	}
	if (failures) {
		fprintf(stderr, "FAIL: %d checks failed\n", failures);
		return 1;
	}
	printf("changed-block tracking: layout, ranges, table, attach, hot path and drained section as said\n");
	return 0;
}
