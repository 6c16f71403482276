/*
 * conn.c: engine and connection lifecycle for xbd-xenstored: message
 * framing of the bytes a client sends, the bounded output queue of replies
 * and watch events, and the attention list the I/O driver works from.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xenstore/xenstored/internal.h"

void xsd_limits_default(struct xsd_limits *l)
{
	l->entries_per_domain = 1000;
	l->entry_size = 2048;
	l->watches_per_domain = 128;
	l->transactions_per_conn = 10;
	l->perms_per_node = 5;
	/* A client that leaves 16 MiB of replies and events unread is not
	 * reading at all; 4096 watch events of maximum size fit below. */
	l->output_max = 16u << 20;
	/* Stop reading requests from a client that does not read replies. */
	l->output_pause = 1u << 20;
}

void xsd_log(struct xsd *x, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (!x->hooks.log)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	x->hooks.log(x->hooks.opaque, line);
}

static struct xsd_perm *default_special_perms(void)
{
	/* Owner dom0, nobody else: only privileged connections get the
	 * @introduceDomain / @releaseDomain events until dom0 says so. */
	return calloc(1, sizeof(struct xsd_perm));
}

struct xsd *xsd_new(const struct xsd_limits *limits,
		    const struct xsd_hooks *hooks)
{
	struct xsd *x = calloc(1, sizeof(*x));
	struct xsd_domain *d0;

	if (!x)
		return NULL;
	if (limits)
		x->lim = *limits;
	else
		xsd_limits_default(&x->lim);
	if (hooks)
		x->hooks = *hooks;
	x->attn_tail = &x->attn_head;
	xsd_hmap_init(&x->watch_index);
	if (xsd_store_init(&x->st) < 0) {
		free(x);
		return NULL;
	}
	x->intro_perms = default_special_perms();
	x->release_perms = default_special_perms();
	x->intro_nperms = x->release_nperms = 1;
	if (!x->intro_perms || !x->release_perms ||
	    xsd_domain_add(x, 0, &d0) < 0) {
		xsd_free(x);
		return NULL;
	}
	return x;
}

void xsd_free(struct xsd *x)
{
	if (!x)
		return;
	while (x->conns)
		xsd_conn_free(x->conns);
	xsd_watch_index_fini(x);
	xsd_domains_free(x);
	xsd_store_fini(&x->st);
	free(x->intro_perms);
	free(x->release_perms);
	free(x);
}

void xsd_attention(struct xsd_conn *c)
{
	struct xsd *x = c->x;

	if (c->on_attention)
		return;
	c->on_attention = true;
	c->attn_next = NULL;
	*x->attn_tail = c;
	x->attn_tail = &c->attn_next;
}

struct xsd_conn *xsd_attention_pop(struct xsd *x)
{
	struct xsd_conn *c = x->attn_head;

	if (!c)
		return NULL;
	x->attn_head = c->attn_next;
	if (!x->attn_head)
		x->attn_tail = &x->attn_head;
	c->on_attention = false;
	c->attn_next = NULL;
	return c;
}

static void attention_remove(struct xsd_conn *c)
{
	struct xsd *x = c->x;
	struct xsd_conn **pp;

	if (!c->on_attention)
		return;
	for (pp = &x->attn_head; *pp; pp = &(*pp)->attn_next) {
		if (*pp == c) {
			*pp = c->attn_next;
			break;
		}
	}
	x->attn_tail = &x->attn_head;
	while (*x->attn_tail)
		x->attn_tail = &(*x->attn_tail)->attn_next;
	c->on_attention = false;
}

struct xsd_conn *xsd_conn_new(struct xsd *x, unsigned int domid, void *io)
{
	struct xsd_domain *d = xsd_domain_find(x, domid);
	struct xsd_conn *c;

	if (!d) {
		errno = ENOENT;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->x = x;
	c->io = io;
	c->dom = d;
	c->domid = domid;
	c->privileged = domid == 0;
	c->out_tail = &c->out_head;
	c->next_txid = 1;
	d->nconns++;
	c->next = x->conns;
	if (x->conns)
		x->conns->prev = c;
	x->conns = c;
	return c;
}

void *xsd_conn_io(const struct xsd_conn *c)
{
	return c->io;
}

unsigned int xsd_conn_domid(const struct xsd_conn *c)
{
	return c->domid;
}

bool xsd_conn_dead(const struct xsd_conn *c)
{
	return c->dead;
}

static void out_clear(struct xsd_conn *c)
{
	struct xsd_outbuf *b;

	while ((b = c->out_head)) {
		c->out_head = b->next;
		free(b);
	}
	c->out_tail = &c->out_head;
	c->out_bytes = c->out_off = 0;
}

/*
 * Killing only marks the connection: it gets no more input or output, and
 * its watches no longer fire.  Its watches and transactions are dropped when
 * the driver frees it, so that killing is safe anywhere, even while the
 * engine walks a list of watches to deliver an event.
 */
void xsd_conn_kill(struct xsd_conn *c, const char *why)
{
	if (c->dead)
		return;
	if (why)
		xsd_log(c->x, "domain %u: connection dropped: %s", c->domid,
			why);
	out_clear(c);
	c->dead = true;
	xsd_attention(c);
}

void xsd_kill_all(struct xsd *x)
{
	struct xsd_conn *c;

	for (c = x->conns; c; c = c->next)
		xsd_conn_kill(c, NULL);
}

void xsd_conn_free(struct xsd_conn *c)
{
	struct xsd *x = c->x;

	xsd_conn_kill(c, NULL);
	xsd_watches_drop(c);
	xsd_txns_drop(c);
	if (c->dom)
		c->dom->nconns--;
	attention_remove(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		x->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

void xsd_conn_feed(struct xsd_conn *c, const void *buf, size_t len)
{
	const char *p = buf;
	size_t n;

	while (!c->dead) {
		if (c->hdr_used < sizeof(c->hdr)) {
			if (!len)
				break;
			n = sizeof(c->hdr) - c->hdr_used;
			if (n > len)
				n = len;
			memcpy((char *)&c->hdr + c->hdr_used, p, n);
			c->hdr_used += n;
			p += n;
			len -= n;
			if (c->hdr_used < sizeof(c->hdr))
				break;
			/* Xen drops a client that announces more than the
			 * protocol allows: the stream cannot be resynced. */
			if (c->hdr.len > XENSTORE_PAYLOAD_MAX) {
				xsd_conn_kill(c, "payload length over 4096");
				break;
			}
			c->body_used = 0;
		}
		n = c->hdr.len - c->body_used;
		if (n > len)
			n = len;
		memcpy(c->body + c->body_used, p, n);
		c->body_used += n;
		p += n;
		len -= n;
		if (c->body_used < c->hdr.len)
			break;
		c->body[c->hdr.len] = '\0';
		c->hdr_used = 0;
		xsd_handle(c);
	}
}

void xsd_send(struct xsd_conn *c, uint32_t type, uint32_t req_id,
	      uint32_t tx_id, const void *data, uint32_t len)
{
	struct xsd_sockmsg h = {
		.type = type, .req_id = req_id, .tx_id = tx_id, .len = len,
	};
	struct xsd_outbuf *b;

	if (c->dead)
		return;
	b = malloc(sizeof(*b) + sizeof(h) + len);
	if (!b) {
		/* A lost reply would leave the client waiting forever. */
		xsd_conn_kill(c, "out of memory");
		return;
	}
	b->next = NULL;
	b->len = sizeof(h) + len;
	memcpy(b->data, &h, sizeof(h));
	if (len)
		memcpy(b->data + sizeof(h), data, len);
	*c->out_tail = b;
	c->out_tail = &b->next;
	c->out_bytes += b->len;
	if (c->out_bytes > c->x->lim.output_max) {
		xsd_conn_kill(c, "output queue overflow (client not reading)");
		return;
	}
	xsd_attention(c);
}

int xsd_conn_out_iov(const struct xsd_conn *c, struct iovec *iov, int max)
{
	const struct xsd_outbuf *b;
	int n = 0;

	for (b = c->out_head; b && n < max; b = b->next, n++) {
		size_t off = n == 0 ? c->out_off : 0;

		iov[n].iov_base = (void *)(b->data + off);
		iov[n].iov_len = b->len - off;
	}
	return n;
}

size_t xsd_conn_out_bytes(const struct xsd_conn *c)
{
	return c->out_bytes - c->out_off;
}

void xsd_conn_out_done(struct xsd_conn *c, size_t n)
{
	struct xsd_outbuf *b;

	while (n && (b = c->out_head)) {
		size_t left = b->len - c->out_off;

		if (n < left) {
			c->out_off += n;
			return;
		}
		n -= left;
		c->out_head = b->next;
		c->out_bytes -= b->len;
		c->out_off = 0;
		free(b);
	}
	if (!c->out_head)
		c->out_tail = &c->out_head;
}

bool xsd_conn_paused(const struct xsd_conn *c)
{
	return c->out_bytes >= c->x->lim.output_pause;
}

void xsd_reply(struct xsd_req *r, const void *data, uint32_t len)
{
	/* Replies obey the same payload limit as requests. */
	if (len > XENSTORE_PAYLOAD_MAX) {
		xsd_reply_error(r, E2BIG);
		return;
	}
	xsd_send(r->c, r->hdr->type, r->hdr->req_id, r->hdr->tx_id, data, len);
}

void xsd_reply_str(struct xsd_req *r, const char *s)
{
	xsd_reply(r, s, strlen(s) + 1);
}

void xsd_reply_error(struct xsd_req *r, int err)
{
	const char *name = xsd_errors[0].errstring;	/* EINVAL */
	size_t i;

	for (i = 0; i < sizeof(xsd_errors) / sizeof(xsd_errors[0]); i++) {
		if (xsd_errors[i].errnum == err) {
			name = xsd_errors[i].errstring;
			break;
		}
	}
	xsd_send(r->c, XS_ERROR, r->hdr->req_id, r->hdr->tx_id, name,
		 strlen(name) + 1);
}
