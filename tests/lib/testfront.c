/*
 * tests/lib/testfront.c: the connect, close and request code of the test
 * frontends, and the scenario table's driver (see testfront.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/testfront.h"

const char *tf_prog = "testfront";

void tf_say(const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", tf_prog);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

void tf_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", tf_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void tf_init(struct tf *f, const struct tf_program *prog, unsigned int pool_pages)
{
	memset(f, 0, sizeof(*f));
	f->prog = prog;
	if (prog)
		tf_prog = prog->name;
	f->devid = 51728;
	f->nq = 1;
	f->abi = XBD_ABI_NATIVE;
	f->connect_state = XenbusStateInitialised;
	f->pool_pages = pool_pages;
}

uint64_t tf_read_uint(struct tf *f, const char *dir, const char *key, uint64_t dflt)
{
	char p[XBD_XS_PATH_MAX];
	uint64_t v;

	xbd_xs_pathf(p, sizeof(p), "%s/%s", dir, key);
	if (xbd_xs_read_uint(f->xs, XBT_NULL, p, 0, UINT64_MAX, &v))
		return dflt;
	return v;
}

void tf_write_uint(struct tf *f, xs_transaction_t t, const char *dir, const char *key, uint64_t v)
{
	char p[XBD_XS_PATH_MAX];
	int err;

	xbd_xs_pathf(p, sizeof(p), "%s/%s", dir, key);
	err = xbd_xs_write_uint(f->xs, t, p, v);
	if (err)
		tf_die("cannot write %s: %s", p, strerror(-err));
}

int tf_wait_backend(struct tf *f, unsigned int mask, int ms)
{
	enum xenbus_state st;
	int err = xbd_xenbus_wait_state(f->xs, f->bdir, mask, ms, &st);

	return err ? err : (int)st;
}

char *tf_page(struct tf *f, unsigned int i)
{
	return f->pool + (size_t)i * XBD_PAGE_SIZE;
}

/* ---- open and release ---- */

/*
 * At exit, however the program leaves: end our grants and free their
 * pages, so that repeated runs in one domain do not use up its grant
 * references and memory.  Grants the backend still maps (a scenario that
 * leaves the device connected, or a failure mid-run) stay: they are in use.
 */
static struct tf *exit_tf;

static void tf_release(void)
{
	struct tf *f = exit_tf;

	if (!f || !f->p)
		return;
	exit_tf = NULL;
	for (unsigned int i = 0; i < TF_MAXQ; i++)
		if (f->q[i].sring)
			xbd_gnt_unshare(f->p, f->q[i].sring, f->q[i].npages);
	if (f->pool)
		xbd_gnt_unshare(f->p, f->pool, f->pool_pages);
	if (f->ev)
		xbd_evtchn_close(f->ev);
	if (f->xs)
		xbd_xs_close(f->xs);
	xbd_platform_close(f->p);
}

void tf_open(struct tf *f)
{
	char p[XBD_XS_PATH_MAX], *s = NULL;
	int err;

	if (f->pool_pages > TF_POOL_MAX)
		tf_die("a pool of %u pages: at most %d", f->pool_pages, TF_POOL_MAX);
	exit_tf = f;
	atexit(tf_release);
	err = xbd_platform_open(XBD_PLATFORM_AUTO, &f->p);
	if (err)
		tf_die("platform: %s", strerror(-err));
	f->me = xbd_platform_domid(f->p);
	err = xbd_xs_open(&f->xs);
	if (err)
		tf_die("xenstore: %s", strerror(-err));
	err = xbd_evtchn_open(f->p, &f->ev);
	if (err)
		tf_die("evtchn: %s", strerror(-err));
	xbd_xs_pathf(f->fdir, sizeof(f->fdir), "/local/domain/%u/device/vbd/%u", f->me, f->devid);
	xbd_xs_pathf(p, sizeof(p), "%s/backend", f->fdir);
	err = xbd_xs_read_str(f->xs, XBT_NULL, p, &s);
	if (err)
		tf_die("cannot read %s: %s", p, strerror(-err));
	snprintf(f->bdir, sizeof(f->bdir), "%s", s);
	free(s);
	f->bdom = tf_read_uint(f, f->fdir, "backend-id", 0);
	if (f->pool_pages) {
		f->pool = xbd_gnt_share(f->p, f->bdom, f->pool_pages, true, f->pool_refs);
		if (!f->pool)
			tf_die("cannot share the data pages: %s", strerror(errno));
	}
}

/* ---- connect and close ---- */

static unsigned int ring_pages(const struct tf *f)
{
	return f->num_ring_pages ? f->num_ring_pages : 1u << f->order;
}

static void setup_queue(struct tf *f, unsigned int i)
{
	struct tf_queue *q = &f->q[i];
	unsigned int npages = ring_pages(f);
	int err;

	q->sring = xbd_gnt_share(f->p, f->bdom, npages, true, q->refs);
	if (!q->sring)
		tf_die("cannot share %u ring pages: %s", npages, strerror(errno));
	q->npages = npages;
	xring_init_shared(q->sring, npages);
	err = xring_attach(&q->ring, q->sring, npages, f->abi, XRING_FRONT);
	if (err)
		tf_die("ring attach: %s", strerror(-err));
	q->port = xbd_evtchn_alloc_unbound(f->ev, f->bdom);
	if (q->port < 0)
		tf_die("alloc_unbound: %s", strerror(-q->port));
}

/* Whether key is one of the ring keys a frontend (of any kind) writes. */
static bool ring_key(const char *key)
{
	static const char *const keys[] = {
		"ring-page-order", "num-ring-pages", "event-channel", "multi-queue-num-queues",
	};

	if (!strncmp(key, "queue-", 6) || !strncmp(key, "ring-ref", 8))
		return true;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(key, keys[i]))
			return true;
	return false;
}

/*
 * Remove the ring keys an earlier frontend of this vbd (another test
 * frontend, or xbd-front with more queues or pages) left: the backend
 * reads them with ours and would see a layout we never wrote.
 */
static int clear_ring_keys(struct tf *f, xs_transaction_t t)
{
	char **names = NULL, p[XBD_XS_PATH_MAX];
	unsigned int n = 0, i;
	int err;

	err = xbd_xs_directory(f->xs, t, f->fdir, &names, &n);
	if (err)
		return err == -ENOENT ? 0 : err;
	for (i = 0; i < n && !err; i++) {
		if (!ring_key(names[i]))
			continue;
		xbd_xs_pathf(p, sizeof(p), "%s/%s", f->fdir, names[i]);
		err = xbd_xs_rm(f->xs, t, p);
	}
	free(names);
	return err;
}

static int write_keys(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	struct tf *f = arg;
	unsigned int i, j, npages = ring_pages(f);
	char p[XBD_XS_PATH_MAX];
	int err;

	err = clear_ring_keys(f, t);
	if (err)
		return err;

	for (i = 0; i < f->nq; i++) {
		struct tf_queue *q = &f->q[i];
		char dir[XBD_XS_PATH_MAX], k[32];

		if (f->nq > 1)
			xbd_xs_pathf(dir, sizeof(dir), "%s/queue-%u", f->fdir, i);
		else
			snprintf(dir, sizeof(dir), "%s", f->fdir);
		/* Linux blkfront writes the page count once, in the top directory. */
		if (f->num_ring_pages)
			tf_write_uint(f, t, f->order_per_queue ? dir : f->fdir, "num-ring-pages", npages);
		else if (f->order)
			tf_write_uint(f, t, f->order_per_queue ? dir : f->fdir, "ring-page-order", f->order);
		if (!f->order && !f->num_ring_pages) {
			tf_write_uint(f, t, dir, "ring-ref", q->refs[0]);
		} else {
			for (j = 0; j < npages; j++) {
				snprintf(k, sizeof(k), "ring-ref%u", j);
				tf_write_uint(f, t, dir, k, q->refs[j]);
			}
		}
		tf_write_uint(f, t, dir, "event-channel", q->port);
	}
	if (f->nq > 1)
		tf_write_uint(f, t, f->fdir, "multi-queue-num-queues", f->nq);
	xbd_xs_pathf(p, sizeof(p), "%s/protocol", f->fdir);
	if (xbd_xs_write_str(xs, t, p, xbd_abi_protocol(f->abi)))
		tf_die("cannot write protocol");
	tf_write_uint(f, t, f->fdir, "feature-persistent", f->persistent);
	tf_write_uint(f, t, f->fdir, "state", f->connect_state);
	return 0;
}

void tf_connect(struct tf *f)
{
	unsigned int i;
	int st, err;

	/* Left over from an earlier run: reset, as a rebooted guest would. */
	if (xbd_xenbus_read_state(f->xs, f->fdir) != XenbusStateInitialising)
		tf_write_uint(f, XBT_NULL, f->fdir, "state", XenbusStateInitialising);
	st = tf_wait_backend(f, 1u << XenbusStateInitWait, TF_TIMEOUT_MS);
	if (st < 0)
		tf_die("backend %s never reached InitWait: %s", f->bdir, strerror(-st));
	for (i = 0; i < f->nq; i++)
		setup_queue(f, i);
	err = xbd_xs_transact(f->xs, write_keys, f);
	if (err)
		tf_die("writing the frontend keys: %s", strerror(-err));
	st = tf_wait_backend(f, 1u << XenbusStateConnected | 1u << XenbusStateClosing |
					1u << XenbusStateClosed, TF_TIMEOUT_MS);
	if (st != XenbusStateConnected)
		tf_die("backend did not connect (state %d)", st);
	f->sectors = tf_read_uint(f, f->bdir, "sectors", 0);
	f->sector_size = tf_read_uint(f, f->bdir, "sector-size", 512);
	f->max_indirect = tf_read_uint(f, f->bdir, "feature-max-indirect-segments", 0);
	f->flush = tf_read_uint(f, f->bdir, "feature-flush-cache", 0);
	f->barrier = tf_read_uint(f, f->bdir, "feature-barrier", 0);
	f->discard = tf_read_uint(f, f->bdir, "feature-discard", 0);
	f->discard_gran = f->discard ? tf_read_uint(f, f->bdir, "discard-granularity", 0) : 0;
	f->readonly = tf_read_uint(f, f->bdir, "info", 0) & VDISK_READONLY;
	tf_write_uint(f, XBT_NULL, f->fdir, "state", XenbusStateConnected);
}

void tf_close(struct tf *f)
{
	int st;

	tf_write_uint(f, XBT_NULL, f->fdir, "state", XenbusStateClosing);
	st = tf_wait_backend(f, 1u << XenbusStateClosing | 1u << XenbusStateClosed, TF_TIMEOUT_MS);
	if (st < 0)
		tf_die("backend did not follow the frontend to Closing");
	tf_write_uint(f, XBT_NULL, f->fdir, "state", XenbusStateClosed);
	st = tf_wait_backend(f, 1u << XenbusStateClosed, TF_TIMEOUT_MS);
	if (st < 0)
		tf_die("backend did not reach Closed");
}

/* ---- requests ---- */

void tf_kick(struct tf *f, unsigned int qi)
{
	if (xring_front_push(&f->q[qi].ring)) {
		f->notify_sent++;
		xbd_evtchn_notify(f->ev, f->q[qi].port);
	}
}

void tf_wait_event(struct tf *f, int ms)
{
	struct pollfd pfd = { .fd = xbd_evtchn_fd(f->ev), .events = POLLIN };
	int port;

	if (poll(&pfd, 1, ms) > 0) {
		while ((port = xbd_evtchn_pending(f->ev)) >= 0) {
			f->notify_recv++;
			xbd_evtchn_unmask(f->ev, port);
		}
	}
}

void tf_put(struct tf *f, unsigned int qi, struct xbd_request *r)
{
	int err;

	r->id = f->next_id++;
	err = xring_front_put_request(&f->q[qi].ring, r);
	if (err)
		tf_die("put_request: %s", strerror(-err));
	tf_kick(f, qi);
}

int16_t tf_wait_rsp(struct tf *f, unsigned int qi, uint64_t id)
{
	uint64_t end = xbd_mono_ms() + TF_TIMEOUT_MS;
	struct xbd_response rsp[64];
	int n, i;

	for (;;) {
		n = xring_front_consume(&f->q[qi].ring, rsp, 64);
		if (n < 0)
			tf_die("response ring corrupt: %s", strerror(-n));
		for (i = 0; i < n; i++)
			if (rsp[i].id == id)
				return rsp[i].status;
		if (n)
			continue;
		if (xring_front_final_check(&f->q[qi].ring))
			continue;
		if (xbd_mono_ms() > end)
			tf_die("no response to request %" PRIu64 " within %d ms", id, TF_TIMEOUT_MS);
		tf_wait_event(f, 100);
	}
}

int16_t tf_submit(struct tf *f, unsigned int qi, struct xbd_request *r)
{
	tf_put(f, qi, r);
	return tf_wait_rsp(f, qi, r->id);
}

void tf_expect(int16_t got, int16_t want, const char *what)
{
	if (got != want)
		tf_die("%s: status %d, expected %d", what, got, want);
	tf_say("%s: status %d as expected", what, got);
}

/* ---- the scenario table ---- */

void tf_usage_item(FILE *out, const char *name, const char *help)
{
	const int indent = 23, width = 79;
	int col = fprintf(out, "  %-*s", indent - 3, name);

	/* help, word by word, wrapped at width under the first line's start */
	while (*help) {
		size_t len = strcspn(help, " ");

		if (col > indent && col + 1 + (int)len > width) {
			col = fprintf(out, "\n%*s", indent, "") - 1;
		} else {
			fputc(' ', out);
			col++;
		}
		col += fprintf(out, "%.*s", (int)len, help);
		help += len;
		help += strspn(help, " ");
	}
	fputc('\n', out);
}

void tf_usage(const struct tf_program *prog, int status)
{
	FILE *out = status ? stderr : stdout;
	const struct tf_scenario *s;

	fprintf(out, "usage: %s [options] SCENARIO\n", prog->name);
	if (prog->options)
		fprintf(out, "options:\n%s", prog->options);
	fprintf(out, "scenarios:\n");
	for (s = prog->scenarios; s->name; s++)
		tf_usage_item(out, s->name, s->help);
	exit(status);
}

int tf_main(struct tf *f, int argc, char **argv)
{
	const struct tf_scenario *s;
	const char *name;
	uint64_t t0;

	if (optind != argc - 1)
		tf_usage(f->prog, 1);
	name = argv[optind];
	for (s = f->prog->scenarios; s->name && strcmp(s->name, name); s++)
		;
	if (!s->name)
		tf_die("unknown scenario %s (%s --help lists them)", name, tf_prog);
	if (f->nq < 1 || f->nq > TF_MAXQ)
		tf_die("--queues must be 1..%d", TF_MAXQ);
	tf_open(f);
	t0 = xbd_mono_ms();
	tf_connect(f);
	tf_say("connected to %s in %" PRIu64 " ms: %" PRIu64 " sectors, %u queue(s), abi %s", f->bdir,
	       xbd_mono_ms() - t0, f->sectors, f->nq, xbd_abi_protocol(f->abi));
	s->run(f);
	if (!s->stays)
		tf_close(f);
	tf_say("%s: ok", s->name);
	return 0;
}
