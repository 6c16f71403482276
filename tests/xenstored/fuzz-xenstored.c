/*
 * fuzz-xenstored.c: libFuzzer target for the xbd-xenstored engine: message
 * framing and every request handler, without sockets.
 *
 * Input: a sequence of chunks "<selector> <length> <bytes...>".  The
 * selector picks a connection (two as dom0, two as guest 1, one as guest 2)
 * or, with its top bit, closes and reopens that connection; the bytes are
 * fed to it as received data.  After each chunk all queued output is
 * consumed and checked: every message must be a well-formed reply or event
 * within the 4096-byte payload limit.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xen/io/xs_wire.h>

#include "xenstore/xenstored/xsd.h"

#define NCONN 5

static const unsigned int conn_domid[NCONN] = { 0, 0, 1, 1, 2 };

/* Output is framed messages; check each one. */
struct outcheck {
	unsigned char hdr[sizeof(struct xsd_sockmsg)];
	size_t hdr_used;
	uint32_t body_left;
};

static void check_output(struct outcheck *oc, const unsigned char *p,
			 size_t n)
{
	struct xsd_sockmsg h;
	size_t k;

	while (n) {
		if (oc->body_left) {
			k = n < oc->body_left ? n : oc->body_left;
			oc->body_left -= (uint32_t)k;
			p += k;
			n -= k;
			continue;
		}
		k = sizeof(oc->hdr) - oc->hdr_used;
		if (k > n)
			k = n;
		memcpy(oc->hdr + oc->hdr_used, p, k);
		oc->hdr_used += k;
		p += k;
		n -= k;
		if (oc->hdr_used < sizeof(oc->hdr))
			continue;
		memcpy(&h, oc->hdr, sizeof(h));
		oc->hdr_used = 0;
		if (h.len > XENSTORE_PAYLOAD_MAX || h.type >= XS_TYPE_COUNT)
			abort();
		if (h.type == XS_WATCH_EVENT && (h.req_id || h.tx_id))
			abort();
		oc->body_left = h.len;
	}
}

struct fuzz {
	struct xsd *x;
	struct xsd_conn *conn[NCONN];
	struct outcheck oc[NCONN];
	unsigned int slot[NCONN];
};

static void reopen(struct fuzz *f, unsigned int i)
{
	if (f->conn[i])
		xsd_conn_free(f->conn[i]);
	memset(&f->oc[i], 0, sizeof(f->oc[i]));
	/* NULL if the guest has been released meanwhile. */
	f->conn[i] = xsd_conn_new(f->x, conn_domid[i], &f->slot[i]);
}

static void drain(struct fuzz *f)
{
	struct xsd_conn *c;
	struct iovec iov[16];
	unsigned int i;
	int n, k;

	while ((c = xsd_attention_pop(f->x))) {
		i = *(unsigned int *)xsd_conn_io(c);
		if (xsd_conn_dead(c)) {
			xsd_conn_free(c);
			f->conn[i] = NULL;
			continue;
		}
		while ((n = xsd_conn_out_iov(c, iov, 16)) > 0) {
			size_t total = 0;

			for (k = 0; k < n; k++) {
				check_output(&f->oc[i], iov[k].iov_base,
					     iov[k].iov_len);
				total += iov[k].iov_len;
			}
			xsd_conn_out_done(c, total);
		}
	}
}

static int hook_introduce(void *opaque, unsigned int domid)
{
	(void)opaque;
	/* Let some introductions fail, as a socket error would. */
	return domid == 13 ? -EIO : 0;
}

static void feed_msg(struct xsd_conn *c, uint32_t type, const char *body,
		     uint32_t len)
{
	struct xsd_sockmsg h = { type, 0, 0, len };

	xsd_conn_feed(c, &h, sizeof(h));
	xsd_conn_feed(c, body, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xsd_limits lim;
	struct xsd_hooks hooks = { .introduce = hook_introduce };
	struct fuzz f;
	unsigned int i, sel, len;

	memset(&f, 0, sizeof(f));
	xsd_limits_default(&lim);
	/* Small limits, so the fuzzer reaches them. */
	lim.entries_per_domain = 50;
	lim.watches_per_domain = 8;
	lim.transactions_per_conn = 3;
	lim.output_max = 64 * 1024;
	lim.output_pause = 16 * 1024;
	f.x = xsd_new(&lim, &hooks);
	if (!f.x)
		return 0;
	for (i = 0; i < NCONN; i++)
		f.slot[i] = i;
	reopen(&f, 0);
	/* Guests 1 and 2 exist, with a home like libxl's. */
	feed_msg(f.conn[0], XS_WRITE, "/local/domain/1/name\0g1", 23);
	feed_msg(f.conn[0], XS_SET_PERMS, "/local/domain/1\0n0\0r1", 22);
	feed_msg(f.conn[0], XS_MKDIR, "/local/domain/1/data", 21);
	feed_msg(f.conn[0], XS_SET_PERMS, "/local/domain/1/data\0n1", 24);
	feed_msg(f.conn[0], XS_INTRODUCE, "1\0" "1\0" "1", 6);
	feed_msg(f.conn[0], XS_INTRODUCE, "2\0" "1\0" "1", 6);
	for (i = 1; i < NCONN; i++)
		reopen(&f, i);
	drain(&f);

	while (size >= 2) {
		sel = data[0];
		len = data[1];
		data += 2;
		size -= 2;
		if (len > size)
			len = (unsigned int)size;
		i = (sel & 0x7f) % NCONN;
		if ((sel & 0x80) || !f.conn[i])
			reopen(&f, i);
		if (f.conn[i])
			xsd_conn_feed(f.conn[i], data, len);
		data += len;
		size -= len;
		drain(&f);
	}
	xsd_free(f.x);
	return 0;
}
