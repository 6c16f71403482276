/*
 * tests/lib/testfront.h: the frontend half of blkif that the test
 * frontends share (tests/blkback/rawfront.c, tests/robust/evilfront.c;
 * tests/robust/xsflood.c uses the open).  Acting as a domU
 * (XBD_SIM_DOMID), it opens the platform and xenstore, grants a pool of
 * data pages, connects rings to the vbd backend, submits requests and
 * waits for their responses, and closes; a program names its scenarios in
 * a table and tf_main() runs the one asked for.  It talks through
 * ring.h, platform.h and xenbus.h directly, not libxbdfront, so that a
 * scenario can break every rule on purpose.
 *
 * Everything here exits the program (status 1, one line on stderr) when
 * something fails: a test frontend's exit status is its verdict.
 */
#ifndef XBD_TESTS_TESTFRONT_H
#define XBD_TESTS_TESTFRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/clock.h"
#include "platform/platform.h"
#include "ring/ring.h"
#include "xenstore/xenbus.h"

#define TF_MAXQ 4
#define TF_POOL_MAX 1200 /* data pages a frontend may grant */
#define TF_TIMEOUT_MS 10000 /* for every wait on the backend */

struct tf_queue {
	void *sring;
	unsigned int npages; /* pages shared at sring */
	uint32_t refs[XBD_RING_MAX_PAGES];
	struct xring ring;
	int port;
};

struct tf {
	/* What to connect: tf_init's defaults, changed before tf_main. */
	uint32_t devid;              /* 51728 (xvdb) */
	unsigned int nq;             /* queues (1..TF_MAXQ), 1 */
	unsigned int order;          /* ring-page-order, 0 */
	unsigned int num_ring_pages; /* if set, the old num-ring-pages spelling */
	bool order_per_queue;        /* the page count in queue-N/, not the top */
	enum xbd_abi abi;            /* native */
	bool persistent;             /* feature-persistent written, false */
	unsigned int connect_state;  /* written with the ring keys: Initialised */
	unsigned int pool_pages;     /* data pages granted at open (<= TF_POOL_MAX) */

	/* The connection (tf_open, tf_connect). */
	struct xbd_platform *p;
	struct xbd_xs *xs;
	struct xbd_evtchn *ev;
	uint32_t me, bdom;
	char fdir[XBD_XS_PATH_MAX], bdir[XBD_XS_PATH_MAX];
	struct tf_queue q[TF_MAXQ];
	char *pool; /* pool_pages pages granted read-write to the backend */
	uint32_t pool_refs[TF_POOL_MAX];

	/* What the backend offers, read when it is Connected. */
	uint64_t sectors;
	unsigned int sector_size, max_indirect;
	bool flush, barrier, discard, readonly;
	unsigned int discard_gran; /* discard-granularity, if discard */

	uint64_t next_id;                 /* of the next request tf_put sends */
	uint64_t notify_sent, notify_recv; /* event-channel notifications */

	const struct tf_program *prog;
};

/*
 * A program's scenarios, ended by { NULL }: tf_main runs the one named on
 * the command line after connecting, and closes the device afterwards
 * unless the scenario stays (it leaves the device as the test wants it).
 */
struct tf_scenario {
	const char *name;
	void (*run)(struct tf *f);
	const char *help;
	bool stays;
};

/* A test frontend: its name, its options' help text, its scenarios. */
struct tf_program {
	const char *name;
	const char *options;
	const struct tf_scenario *scenarios;
};

/* The program's name, first in every line tf_say and tf_die print. */
extern const char *tf_prog;

void tf_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tf_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/*
 * Defaults for everything tf_main connects, with pool_pages data pages,
 * for program prog (which names tf_prog; NULL leaves it).
 */
void tf_init(struct tf *f, const struct tf_program *prog, unsigned int pool_pages);

/*
 * The usage text ("usage: NAME [options] SCENARIO", the options' help and
 * the scenarios with theirs), on stdout for status 0, else on stderr;
 * then exit with status.
 */
void tf_usage(const struct tf_program *prog, int status) __attribute__((noreturn));

/* One "  NAME  help" entry of a usage text, the help wrapped to 79 columns. */
void tf_usage_item(FILE *out, const char *name, const char *help);

/*
 * After the options (getopt's optind): the one argument left names the
 * scenario (else tf_usage); look it up (tf_die if there is none), open,
 * connect (printing "connected to BACKEND_DIR in N ms: ..."), run it,
 * close, and print "NAME: ok".  Returns 0, the program's exit status.
 */
int tf_main(struct tf *f, int argc, char **argv);

/*
 * The pieces of tf_main, for a program or scenario that needs them alone.
 * tf_open: platform, xenstore, event channels, the frontend and backend
 * directories of devid, and the pool; what it acquires is released at
 * exit (grants the backend still maps stay: they are in use).
 * tf_connect: reset a frontend left by an earlier run to Initialising,
 * wait for the backend's InitWait, share fresh rings, write the ring keys
 * and connect_state in one transaction, wait for Connected, read what the
 * backend offers and write Connected.  tf_close: Closing, wait for the
 * backend to follow, Closed, wait for Closed.
 */
void tf_open(struct tf *f);
void tf_connect(struct tf *f);
void tf_close(struct tf *f);

/* xenstore: dir/key as an unsigned number (dflt if unreadable), or written. */
uint64_t tf_read_uint(struct tf *f, const char *dir, const char *key, uint64_t dflt);
void tf_write_uint(struct tf *f, xs_transaction_t t, const char *dir, const char *key, uint64_t v);

/* Wait up to ms for the backend to reach a state in mask: the state, or -errno. */
int tf_wait_backend(struct tf *f, unsigned int mask, int ms);

/* Page i of the pool. */
char *tf_page(struct tf *f, unsigned int i);

/* Push queue qi's requests, and notify the backend if it asked for it. */
void tf_kick(struct tf *f, unsigned int qi);

/* Wait up to ms for a notification; take and unmask every pending port. */
void tf_wait_event(struct tf *f, int ms);

/* r gets the next id and goes out on queue qi (put and kick). */
void tf_put(struct tf *f, unsigned int qi, struct xbd_request *r);

/* The status of the response to id on queue qi (tf_die after TF_TIMEOUT_MS). */
int16_t tf_wait_rsp(struct tf *f, unsigned int qi, uint64_t id);

/* tf_put, then tf_wait_rsp: the response's status. */
int16_t tf_submit(struct tf *f, unsigned int qi, struct xbd_request *r);

/* tf_die unless got is want; else say "WHAT: status N as expected". */
void tf_expect(int16_t got, int16_t want, const char *what);

#endif
