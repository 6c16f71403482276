/*
 * xsd.h: the protocol engine of xbd-xenstored, without any I/O.
 *
 * The engine owns the store, the domains, the connections, their watches and
 * transactions.  Whoever drives it (the epoll loop in main.c, or the fuzz
 * target) feeds each connection the bytes it received and sends the bytes
 * the engine queued, so the whole request handler runs without sockets.
 *
 * After feeding bytes (or calling any engine function), the driver pops
 * connections from the attention list: each one either has output queued or
 * has been killed (protocol violation, RELEASE of its domain, output queue
 * overflow) and must be closed and freed with xsd_conn_free().
 */
#ifndef XBD_XENSTORED_XSD_H
#define XBD_XENSTORED_XSD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct xsd;
struct xsd_conn;

/* Limits, defaulting to xenstored's (Xen 4.17) values. */
struct xsd_limits {
	unsigned int entries_per_domain;	/* nodes a domU may own: 1000 */
	unsigned int entry_size;		/* bytes per node record: 2048 */
	unsigned int watches_per_domain;	/* 128 */
	unsigned int transactions_per_conn;	/* 10 */
	unsigned int perms_per_node;		/* 5 */
	size_t output_max;			/* queued bytes before a
						   connection is dropped */
	size_t output_pause;			/* queued bytes above which the
						   driver stops reading it */
};

/* What the engine asks of its driver. */
struct xsd_hooks {
	/* A domain was introduced: start serving its socket.  0 or -errno. */
	int (*introduce)(void *opaque, unsigned int domid);
	/* A domain was released: stop serving its socket. */
	void (*release)(void *opaque, unsigned int domid);
	/* One line of log, without newline. */
	void (*log)(void *opaque, const char *line);
	void *opaque;
};

void xsd_limits_default(struct xsd_limits *l);

struct xsd *xsd_new(const struct xsd_limits *limits,
		    const struct xsd_hooks *hooks);
/* Frees everything, including connections not yet freed. */
void xsd_free(struct xsd *x);

/* A connection arriving through domid's socket (domain 0 is privileged).
 * io is the driver's cookie for it.  NULL if out of memory or if domid has
 * not been introduced. */
struct xsd_conn *xsd_conn_new(struct xsd *x, unsigned int domid, void *io);
void *xsd_conn_io(const struct xsd_conn *c);
unsigned int xsd_conn_domid(const struct xsd_conn *c);
/* The peer closed: drop the connection's watches and transactions. */
void xsd_conn_kill(struct xsd_conn *c, const char *why);
bool xsd_conn_dead(const struct xsd_conn *c);
void xsd_conn_free(struct xsd_conn *c);

/* Bytes received from the peer; complete requests are handled at once. */
void xsd_conn_feed(struct xsd_conn *c, const void *buf, size_t len);

/* Queued output: fills up to max iovecs, returns how many. */
int xsd_conn_out_iov(const struct xsd_conn *c, struct iovec *iov, int max);
size_t xsd_conn_out_bytes(const struct xsd_conn *c);
/* n bytes of the queued output were sent. */
void xsd_conn_out_done(struct xsd_conn *c, size_t n);
/* True if the driver should read no more from c for now. */
bool xsd_conn_paused(const struct xsd_conn *c);

/* Kills every connection (at shutdown); they then show up on the
 * attention list to be freed. */
void xsd_kill_all(struct xsd *x);

/* Next connection that has output or was killed, or NULL. */
struct xsd_conn *xsd_attention_pop(struct xsd *x);

#endif
