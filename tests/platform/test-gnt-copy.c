/*
 * test-gnt-copy: grant copy of a batch of segments, each with its own
 * status.  Bytes land where they should in both directions (checked in
 * the granting domain's own pages, from another process); a batch mixing
 * good segments with a bad reference, a wrong domid, a write to a
 * read-only grant, a segment crossing the page end and a domain that does
 * not exist copies the good ones and reports Xen's code for each bad one;
 * a copy leaves no entry in use; a dead domain's grants copy nothing.
 */
#include "config.h"

#include "tests/platform/ptest.h"

static void segment(struct xbd_gnt_copy_seg *s, void *local, uint32_t domid, uint32_t ref,
		    uint16_t offset, uint16_t len, bool to_guest)
{
	*s = (struct xbd_gnt_copy_seg){ .local = local, .domid = domid, .ref = ref,
					 .offset = offset, .len = len, .to_guest = to_guest,
					 .status = 99 };
}

int main(void)
{
	const char *dir = ptest_host(3, 60);
	int to_back[2], to_front[2];
	uint32_t refs[4];  /* 0, 1: writable; 2: read-only; 3: granted to dom2 */
	char cmd;
	pid_t pid;

	CHECK(pipe(to_back) == 0 && pipe(to_front) == 0, "pipe");
	pid = ptest_fork();
	if (pid == 0) {
		struct xbd_platform *p = ptest_open(1);
		unsigned char *rw = xbd_gnt_share(p, 0, 2, true, refs);
		unsigned char *ro = xbd_gnt_share(p, 0, 1, false, &refs[2]);
		unsigned char *o = xbd_gnt_share(p, 2, 1, true, &refs[3]);

		CHECK(rw && ro && o, "share: %s", strerror(errno));
		for (int i = 0; i < 4096; i++) {
			rw[4096 + i] = (unsigned char)(i * 7);
			ro[i] = 0xee;
		}
		ptest_send(to_back[1], refs, sizeof(refs));
		ptest_recv(to_front[0], &cmd, 1);
		/* What the backend copied in, at the offsets it chose. */
		for (int i = 0; i < 4096; i++) {
			unsigned char want = i >= 100 && i < 100 + 512 ? (unsigned char)(i - 100) : 0;

			CHECK(rw[i] == want, "byte %d of page 0: %#x, want %#x", i, rw[i], want);
		}
		CHECK(ro[0] == 0xee && ro[4095] == 0xee, "read-only page written");
		CHECK(o[0] == 0, "page granted to dom2 written");
		/* Nothing is left in use: every grant ends at once. */
		CHECK(xbd_gnt_unshare(p, rw, 2) == 0, "unshare after copy");
		CHECK(xbd_gnt_unshare(p, ro, 1) == 0, "unshare ro");
		CHECK(xbd_gnt_unshare(p, o, 1) == 0, "unshare o");
		xbd_platform_close(p);
		_exit(0);
	}

	struct xbd_platform *p = ptest_open(0);
	struct xbd_gnt_copy_seg segs[9];
	unsigned char out[512], in[4096], junk[4096];

	ptest_recv(to_back[0], refs, sizeof(refs));
	for (int i = 0; i < 512; i++)
		out[i] = (unsigned char)i;
	memset(in, 0, sizeof(in));
	memset(junk, 0xab, sizeof(junk));
	segment(&segs[0], out, 1, refs[0], 100, 512, true);
	segment(&segs[1], in, 1, refs[1], 0, 4096, false);
	segment(&segs[2], junk, 1, 40000, 0, 16, true);           /* beyond the table */
	segment(&segs[3], junk, 1, refs[3], 0, 16, true);         /* granted to dom2 */
	segment(&segs[4], junk, 1, refs[2], 0, 16, true);         /* read-only */
	segment(&segs[5], junk, 1, refs[0], 4000, 200, true);     /* crosses the page end */
	segment(&segs[6], junk, 9, refs[0], 0, 16, true);         /* no such domain */
	segment(&segs[7], junk, 1, refs[2], 0, 16, false);        /* read-only, read: fine */
	segment(&segs[8], junk, 1, refs[1], 4095, 0, true);       /* empty */
	CHECK(xbd_gnt_copy(p, 9, segs) == 0, "copy call failed");
	CHECK(segs[0].status == GNTST_okay, "to guest: %d", segs[0].status);
	CHECK(segs[1].status == GNTST_okay, "from guest: %d", segs[1].status);
	CHECK(segs[2].status == GNTST_bad_gntref, "bad ref: %d", segs[2].status);
	CHECK(segs[3].status == GNTST_general_error, "wrong domid: %d", segs[3].status);
	CHECK(segs[4].status == GNTST_general_error, "write to read-only: %d", segs[4].status);
	CHECK(segs[5].status == GNTST_bad_copy_arg, "crossing: %d", segs[5].status);
	CHECK(segs[6].status == GNTST_bad_domain, "no domain: %d", segs[6].status);
	CHECK(segs[7].status == GNTST_okay, "read from read-only: %d", segs[7].status);
	CHECK(segs[8].status == GNTST_okay, "empty segment: %d", segs[8].status);
	for (int i = 0; i < 4096; i++)
		CHECK(in[i] == (unsigned char)(i * 7), "copied-out byte %d: %#x", i, in[i]);
	CHECK(junk[0] == 0xee && junk[15] == 0xee && junk[16] == 0xab, "read-only read copied %#x",
	      junk[0]);
	ptest_send(to_front[1], "c", 1);
	CHECK(ptest_wait(pid) == 0, "frontend process failed");

	/* The frontend is gone (its pages unshared): a dead domain copies nothing. */
	CHECK(xbd_sim_domain_destroy(dir, 1) == 0, "destroy dom1");
	segment(&segs[0], in, 1, refs[0], 0, 16, false);
	CHECK(xbd_gnt_copy(p, 1, segs) == 0 && segs[0].status == GNTST_bad_domain,
	      "copy from dead domain: %d", segs[0].status);
	CHECK(xbd_gnt_copy(p, 0, NULL) == 0, "empty batch");
	xbd_platform_close(p);
	return 0;
}
