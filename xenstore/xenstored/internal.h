/*
 * internal.h: structures shared by the files of the xbd-xenstored engine
 * (conn.c, ops.c, watch.c, txn.c, domain.c).  Not used outside the engine.
 */
#ifndef XBD_XENSTORED_INTERNAL_H
#define XBD_XENSTORED_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <xen/io/xs_wire.h>

#include "xenstore/xenstored/hashmap.h"
#include "xenstore/xenstored/store.h"
#include "xenstore/xenstored/xsd.h"

/* Xen's reserved domain ids start here (DOMID_SELF is 0x7ff0). */
#define XSD_DOMID_FIRST_RESERVED 0x7ff0U

struct xsd_outbuf {
	struct xsd_outbuf *next;
	size_t len;
	unsigned char data[];
};

struct xsd_domain {
	struct xsd_domain *next;
	unsigned int domid;
	int target;			/* SET_TARGET, or -1 */
	unsigned int nwatches;		/* over all its connections */
	unsigned int nconns;
};

struct xsd_txn {
	struct xsd_txn *next;
	uint32_t id;
	struct xsd_overlay ov;
	struct xsd_event *events, **events_tail;	/* fired at commit */
};

struct xsd_conn {
	struct xsd *x;
	struct xsd_conn *prev, *next;		/* all connections */
	struct xsd_conn *attn_next;
	bool on_attention;
	bool dead;
	void *io;
	struct xsd_domain *dom;
	unsigned int domid;
	bool privileged;

	/* Request being received. */
	struct xsd_sockmsg hdr;
	uint32_t hdr_used;
	uint32_t body_used;
	char body[XENSTORE_PAYLOAD_MAX + 1];	/* +1: room for a NUL */

	/* Replies and events not yet sent. */
	struct xsd_outbuf *out_head, **out_tail;
	size_t out_bytes, out_off;

	struct xsd_watch *watches;		/* this connection's */
	struct xsd_txn *txns;
	unsigned int ntxns;
	uint32_t next_txid;
};

struct xsd {
	struct xsd_limits lim;
	struct xsd_hooks hooks;
	struct xsd_store st;
	struct xsd_hmap watch_index;		/* path -> xsd_watch_bucket */
	struct xsd_domain *domains;
	struct xsd_conn *conns;
	struct xsd_conn *attn_head, **attn_tail;
	/* Permissions of the special watch paths, settable by dom0. */
	struct xsd_perm *intro_perms, *release_perms;
	uint32_t intro_nperms, release_nperms;
};

/* One request being handled. */
struct xsd_req {
	struct xsd *x;
	struct xsd_conn *c;
	const struct xsd_sockmsg *hdr;
	const char *body;		/* NUL-terminated one byte past len */
	uint32_t len;
	struct xsd_txn *txn;		/* the request's transaction, or NULL */
	struct xsd_view view;
};

/* A watch event queued by a transaction until it commits. */
struct xsd_event {
	struct xsd_event *next;
	bool exact;
	uint32_t nperms, noldperms;
	struct xsd_perm *perms, *oldperms;
	char path[];
};

/* conn.c */
void xsd_log(struct xsd *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void xsd_attention(struct xsd_conn *c);
void xsd_send(struct xsd_conn *c, uint32_t type, uint32_t req_id,
	      uint32_t tx_id, const void *data, uint32_t len);
void xsd_reply(struct xsd_req *r, const void *data, uint32_t len);
void xsd_reply_str(struct xsd_req *r, const char *s);
void xsd_reply_error(struct xsd_req *r, int err);

/* ops.c */
void xsd_handle(struct xsd_conn *c);
char *xsd_canonical(const struct xsd_conn *c, const char *path);
bool xsd_valid_path(const struct xsd_conn *c, const char *path);
unsigned int xsd_conn_perm(const struct xsd_conn *c,
			   const struct xsd_perm *p, uint32_t n);
/* Counts the NUL-terminated strings at the start of the body. */
unsigned int xsd_count_strings(const struct xsd_req *r);

/* watch.c */
int xsd_op_watch(struct xsd_req *r);
int xsd_op_unwatch(struct xsd_req *r);
void xsd_watches_drop(struct xsd_conn *c);
/* A node changed (exact: only watches on that very path fire).  perms are
 * the node's, oldperms those it had before a SET_PERMS (or NULL). */
void xsd_fire(struct xsd_req *r, const char *path, bool exact,
	      const struct xsd_perm *perms, uint32_t nperms,
	      const struct xsd_perm *oldperms, uint32_t noldperms);
void xsd_fire_now(struct xsd *x, const char *path, bool exact,
		  const struct xsd_perm *perms, uint32_t nperms,
		  const struct xsd_perm *oldperms, uint32_t noldperms);
void xsd_watch_index_fini(struct xsd *x);

/* txn.c */
int xsd_op_transaction_start(struct xsd_req *r);
int xsd_op_transaction_end(struct xsd_req *r);
struct xsd_txn *xsd_txn_find(struct xsd_conn *c, uint32_t id);
void xsd_txns_drop(struct xsd_conn *c);
int xsd_txn_queue_event(struct xsd_txn *t, const char *path, bool exact,
			const struct xsd_perm *perms, uint32_t nperms,
			const struct xsd_perm *oldperms, uint32_t noldperms);

/* domain.c */
struct xsd_domain *xsd_domain_find(struct xsd *x, unsigned int domid);
int xsd_domain_add(struct xsd *x, unsigned int domid, struct xsd_domain **d);
void xsd_domains_free(struct xsd *x);
int xsd_op_introduce(struct xsd_req *r);
int xsd_op_release(struct xsd_req *r);
int xsd_op_resume(struct xsd_req *r);
int xsd_op_set_target(struct xsd_req *r);
int xsd_op_is_domain_introduced(struct xsd_req *r);
int xsd_op_get_domain_path(struct xsd_req *r);
int xsd_special_set_perms(struct xsd_req *r, const char *path,
			  const struct xsd_perm *p, uint32_t n);
bool xsd_special_readable(const struct xsd_conn *c, const char *path);

#endif
