/*
 * cbw.c: copy-before-write for a disk's point-in-time view (cbt-format.h:
 * the view file).  While a view is active, the first write or discard
 * that would change a block the view has not copied yet reads that block
 * first, through the disk's own engine (so whatever the storage), copies
 * it into the view's scratch area and installs it in the view's table;
 * only then does the write go.  The view's reader (the export) reads the
 * disk, then looks the block up in the table: found, it reads the copy.
 *
 * Why that reader is right: the entry is installed (compare-and-swap,
 * release) after the copy's bytes are stored and before the write that
 * overwrites the block is submitted.  A reader's disk read that completed
 * before it looked the block up and found no entry completed before that
 * write was submitted, so it read what the view holds; a reader that
 * finds the entry reads the copy, whole (it loads with acquire).
 *
 * A copy that cannot be made (the scratch area is full, the read failed,
 * no memory) fails the view, never the guest: the write goes on, and the
 * export of the view answers every read with an error from then on.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/datapath/ring-thread.h"

/* At most this much is read for one copy; a larger discard takes several. */
#define CBW_MAX_BYTES (2u << 20)

/* The view cannot be kept whole: said once, in the view and in the log. */
static void view_fail(struct xbd_bring *br, const char *fmt, ...)
{
	struct xbd_cbt *t = br->cbt;
	struct xbd_cbt_view *v = t->view;
	uint32_t st = XBD_VIEW_ACTIVE;
	va_list ap;

	if (!__atomic_compare_exchange_n(&v->state, &st, XBD_VIEW_FAILING, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return; /* another ring said it first, or it ended */
	va_start(ap, fmt);
	vsnprintf(v->why, sizeof(v->why), fmt, ap);
	va_end(ap);
	/* Release: a reader that sees FAILED sees why. */
	__atomic_store_n(&v->state, XBD_VIEW_FAILED, __ATOMIC_RELEASE);
	xbd_log_limited(&br->base.disk->crl, XBD_LOG_WARNING, "%s: the view of checkpoint '%s' "
			"failed (the guest's writes go on; its export fails): %s", br->base.name,
			v->checkpoint, v->why);
}

void cbw_check(struct xbd_bring *br, struct bk_req *req)
{
	struct xbd_cbt *t = br->cbt;
	struct xbd_cbt_view *v = t->view;
	uint64_t gran, off, len, first, last, b, n, max, bytes;
	struct xbd_io *io = &req->io;
	void *buf;

	if (!v || __atomic_load_n(&v->state, __ATOMIC_ACQUIRE) != XBD_VIEW_ACTIVE)
		return;
	gran = v->granularity;
	off = req->r.sector_number << XBD_SECTOR_SHIFT;
	len = req->r.nr_sectors << XBD_SECTOR_SHIFT;
	if (!len || off >= v->disk_bytes)
		return;
	first = off / gran;
	last = (off + len - 1) / gran;
	if (last >= v->nblocks)
		last = v->nblocks - 1;
	for (b = first; b <= last; b++)
		if (xbd_cbt_view_find(t->table, v->table_entries, b) < 0)
			break;
	if (b > last)
		return; /* every block kept already */
	max = CBW_MAX_BYTES / gran ? CBW_MAX_BYTES / gran : 1;
	for (n = 1; b + n <= last && n < max &&
	     xbd_cbt_view_find(t->table, v->table_entries, b + n) < 0; n++)
		;
	bytes = n * gran;
	if (b * gran + bytes > v->disk_bytes)
		bytes = v->disk_bytes - b * gran; /* the disk's last block may be short */
	buf = NULL;
	if (posix_memalign(&buf, XBD_PAGE_SIZE, xbd_cbt_round_up(bytes, XBD_PAGE_SIZE))) {
		view_fail(br, "no memory to copy block %" PRIu64 " aside", b);
		return;
	}
	req->cbw_buf = buf;
	req->cbw_first = b;
	req->cbw_n = (unsigned int)n;
	req->cbw_iov.iov_base = buf;
	req->cbw_iov.iov_len = bytes;
	memset(io, 0, offsetof(struct xbd_io, priv));
	io->opaque = req;
	io->op = XBD_IO_READ;
	io->offset = b * gran;
	io->iov = &req->cbw_iov;
	io->iovcnt = 1;
	req->step = BK_STEP_CBW;
}

/* Install block b's copy (at src, bytes long) unless another ring did: false when full. */
static bool install(struct xbd_bring *br, uint64_t b, const char *src, uint64_t bytes)
{
	struct xbd_cbt *t = br->cbt;
	struct xbd_cbt_view *v = t->view;
	uint64_t key = (b + 1) << XBD_CBT_COPY_BITS, slot, i, n;

	if (xbd_cbt_view_find(t->table, v->table_entries, b) >= 0)
		return true;
	slot = __atomic_fetch_add(&v->used, 1, __ATOMIC_RELAXED);
	if (slot >= v->nslots) {
		view_fail(br, "its scratch store is full (%" PRIu64 " blocks of %" PRIu64 " bytes: "
			  "cbt-scratch)", v->nslots, v->granularity);
		return false;
	}
	memcpy(t->vdata + slot * v->granularity, src, bytes);
	for (i = xbd_cbt_hash(b, v->table_entries), n = 0; n < v->table_entries;
	     i = (i + 1) & (v->table_entries - 1), n++) {
		uint64_t e = 0;

		/* Release: a reader that finds the entry finds the copy's bytes. */
		if (__atomic_compare_exchange_n(&t->table[i], &e, key | slot, false,
						__ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
			__atomic_add_fetch(&v->copied, 1, __ATOMIC_RELAXED);
			XBD_STAT_INC(br->base.stats, cbw_blocks);
			return true;
		}
		if (e >> XBD_CBT_COPY_BITS == b + 1)
			return true; /* another ring's copy won: ours is a wasted slot */
	}
	view_fail(br, "its table is full");
	return false;
}

void cbw_done(struct xbd_bring *br, struct bk_req *req, int result)
{
	struct xbd_cbt *t = br->cbt;
	struct xbd_cbt_view *v = t ? t->view : NULL;
	const char *buf = req->cbw_buf;
	uint64_t left = req->cbw_iov.iov_len;

	if (v && __atomic_load_n(&v->state, __ATOMIC_ACQUIRE) == XBD_VIEW_ACTIVE) {
		if (result) {
			view_fail(br, "block %" PRIu64 " could not be read to be kept: %s",
				  req->cbw_first, strerror(-result));
		} else {
			for (unsigned int i = 0; i < req->cbw_n && left; i++) {
				uint64_t bytes = left < v->granularity ? left : v->granularity;

				if (!install(br, req->cbw_first + i, buf, bytes))
					break;
				buf += bytes;
				left -= bytes;
			}
		}
	}
	free(req->cbw_buf);
	req->cbw_buf = NULL;
	req->cbw_n = 0;
}
