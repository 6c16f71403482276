/*
 * xbdctl-view.c: `xbdctl stats --interval N`, the live view.  Every N
 * seconds it asks the daemon for `stats --format prometheus`, takes the
 * difference to the previous sample series by series (a counter that went
 * down belongs to a ring that connected again: its whole value is new,
 * Prometheus' reset rule), sums the rings of each device and prints one
 * line per device, like iostat -x:
 *
 *   TIME DEVICE r/s w/s rMiB/s wMiB/s o/s p50us p99us inflt batch ntf-in ntf-out
 *
 * o/s is flushes, discards and barriers; p50/p99 are quantiles of the
 * consume-to-push latency of the requests answered in the interval,
 * interpolated in their log2 bucket; inflt is the mean number of requests
 * inside xbd-back over the interval (their latencies added up over the
 * interval's length, Little's law); batch is iocbs per io_submit; ntf-in and
 * ntf-out are event-channel notifications received and sent per request.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/control-protocol.h"
#include "xbdctl/xbdctl.h"
#include "common/clock.h"

#define VIEW_MAX_BUCKETS 40
#define VIEW_HEADER_EVERY 24

/* One sample line of the exposition. */
struct sample {
	char *key;              /* name{labels}: the series */
	char device[64], op[16], le[32];
	double v;
};

struct snapshot {
	struct sample *s;
	size_t n;
	char **devices;         /* in the daemon's order (xbd_device_info) */
	size_t ndev;
	double t;               /* CLOCK_MONOTONIC seconds */
};

/* What one device did in one interval, its rings added up. */
struct devrow {
	double rd, wr, other, rbytes, wbytes, lat_sum, iocbs, calls, ntf_in, ntf_out;
	struct {
		double le, cum;
	} b[VIEW_MAX_BUCKETS];
	unsigned int nb;
};

static volatile sig_atomic_t view_stop;

static void on_signal(int sig)
{
	(void)sig;
	view_stop = 1;
}

/* label="value" at *p: copy value (unescaped, truncated to len) and move past it. */
static bool parse_label(const char **p, char *name, size_t nlen, char *val, size_t vlen)
{
	const char *s = *p;
	size_t i = 0, j = 0;

	while (*s && *s != '=' && *s != '}' && i + 1 < nlen)
		name[i++] = *s++;
	name[i] = '\0';
	if (*s++ != '=' || *s++ != '"')
		return false;
	while (*s && *s != '"') {
		char c = *s++;

		if (c == '\\' && *s) {
			c = *s++;
			if (c == 'n')
				c = '\n';
		}
		if (j + 1 < vlen)
			val[j++] = c;
	}
	val[j] = '\0';
	if (*s++ != '"')
		return false;
	if (*s == ',')
		s++;
	*p = s;
	return true;
}

static int sample_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sample *)a)->key, ((const struct sample *)b)->key);
}

static void snapshot_free(struct snapshot *sn)
{
	size_t i;

	for (i = 0; i < sn->n; i++)
		free(sn->s[i].key);
	for (i = 0; i < sn->ndev; i++)
		free(sn->devices[i]);
	free(sn->s);
	free(sn->devices);
	memset(sn, 0, sizeof(*sn));
}

/* Parse the metrics we show; 0, or -1 on a line we cannot read. */
static int snapshot_parse(struct snapshot *sn, char *text)
{
	char *line, *save = NULL;
	size_t cap = 0, dcap = 0;

	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct sample smp = { 0 };
		const char *p;
		char *sp, lname[32], lval[256];

		if (line[0] == '#' || !line[0])
			continue;
		if (strncmp(line, XBD_METRIC_PREFIX, strlen(XBD_METRIC_PREFIX)))
			continue;
		sp = strrchr(line, ' ');
		if (!sp)
			return -1;
		*sp = '\0';
		smp.v = strtod(sp + 1, NULL);
		p = strchr(line, '{');
		if (p) {
			p++;
			while (*p && *p != '}') {
				if (!parse_label(&p, lname, sizeof(lname), lval, sizeof(lval)))
					return -1;
				if (!strcmp(lname, XBD_LABEL_DEVICE))
					snprintf(smp.device, sizeof(smp.device), "%.63s", lval);
				else if (!strcmp(lname, XBD_LABEL_OP))
					snprintf(smp.op, sizeof(smp.op), "%.15s", lval);
				else if (!strcmp(lname, XBD_LABEL_LE))
					snprintf(smp.le, sizeof(smp.le), "%.31s", lval);
			}
		}
		if (!strncmp(line, XBD_METRIC_DEVICE_INFO "{", strlen(XBD_METRIC_DEVICE_INFO "{"))) {
			if (sn->ndev == dcap) {
				char **nd = realloc(sn->devices, (dcap = dcap * 2 + 8) * sizeof(*nd));

				if (!nd)
					return -1;
				sn->devices = nd;
			}
			if (!(sn->devices[sn->ndev] = strdup(smp.device)))
				return -1;
			sn->ndev++;
			continue;
		}
		smp.key = strdup(line);
		if (!smp.key)
			return -1;
		if (sn->n == cap) {
			struct sample *ns = realloc(sn->s, (cap = cap * 2 + 256) * sizeof(*ns));

			if (!ns) {
				free(smp.key);
				return -1;
			}
			sn->s = ns;
		}
		sn->s[sn->n++] = smp;
	}
	qsort(sn->s, sn->n, sizeof(*sn->s), sample_cmp);
	return 0;
}

static int snapshot_take(const char *path, const char *req, struct snapshot *sn)
{
	char *body = NULL;
	int rc;

	memset(sn, 0, sizeof(*sn));
	if (xbdctl_request(path, req, &body))
		return -1;
	sn->t = xbd_mono_s();
	rc = snapshot_parse(sn, body);
	free(body);
	if (rc)
		fprintf(stderr, "xbdctl: cannot read the daemon's metrics\n");
	return rc;
}

/* Does the series key belong to metric name (exactly, not a longer name)? */
static bool is_metric(const char *key, const char *name)
{
	size_t n = strlen(name);

	return !strncmp(key, name, n) && (key[n] == '{' || key[n] == '\0');
}

/* The increase of a series since prev (all of it after a reset or when new). */
static double delta(const struct snapshot *prev, const struct sample *s)
{
	struct sample *p = bsearch(s, prev->s, prev->n, sizeof(*prev->s), sample_cmp);

	if (!p || s->v < p->v)
		return s->v;
	return s->v - p->v;
}

static void add_bucket(struct devrow *r, const char *le, double d)
{
	double v = !strcmp(le, XBD_LABEL_LE_INF) ? INFINITY : strtod(le, NULL);
	unsigned int i;

	for (i = 0; i < r->nb; i++) {
		if (r->b[i].le == v) {
			r->b[i].cum += d;
			return;
		}
	}
	if (r->nb == VIEW_MAX_BUCKETS)
		return;
	r->b[r->nb].le = v;
	r->b[r->nb++].cum = d;
}

static int bucket_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The q-quantile in seconds of cumulative buckets (histogram_quantile's rule); <0: none. */
static double quantile(struct devrow *r, double q)
{
	double total, rank, lo = 0, prev = 0;
	unsigned int i;

	qsort(r->b, r->nb, sizeof(r->b[0]), bucket_cmp);
	if (!r->nb || !isinf(r->b[r->nb - 1].le) || r->b[r->nb - 1].cum <= 0)
		return -1;
	total = r->b[r->nb - 1].cum;
	rank = q * total;
	for (i = 0; i < r->nb; i++) {
		if (r->b[i].cum >= rank && r->b[i].cum > prev) {
			if (isinf(r->b[i].le))
				return lo;
			return lo + (r->b[i].le - lo) * (rank - prev) / (r->b[i].cum - prev);
		}
		lo = r->b[i].le;
		prev = r->b[i].cum;
	}
	return lo;
}

static void row_add(struct devrow *r, const struct snapshot *prev, const struct sample *s)
{
	const char *k = s->key;
	double d = delta(prev, s);

	if (is_metric(k, XBD_METRIC_REQUESTS)) {
		if (!strcmp(s->op, XBD_OP_READ))
			r->rd += d;
		else if (!strcmp(s->op, XBD_OP_WRITE))
			r->wr += d;
		else
			r->other += d;
	} else if (is_metric(k, XBD_METRIC_READ_BYTES)) {
		r->rbytes += d;
	} else if (is_metric(k, XBD_METRIC_WRITTEN_BYTES)) {
		r->wbytes += d;
	} else if (is_metric(k, XBD_METRIC_LATENCY XBD_METRIC_BUCKET)) {
		add_bucket(r, s->le, d);
	} else if (is_metric(k, XBD_METRIC_LATENCY XBD_METRIC_SUM)) {
		r->lat_sum += d;
	} else if (is_metric(k, XBD_METRIC_SUBMIT_BATCH XBD_METRIC_SUM)) {
		r->iocbs += d;
	} else if (is_metric(k, XBD_METRIC_SUBMIT_BATCH XBD_METRIC_COUNT)) {
		r->calls += d;
	} else if (is_metric(k, XBD_METRIC_NOTIFY_RECEIVED)) {
		r->ntf_in += d;
	} else if (is_metric(k, XBD_METRIC_NOTIFY_SENT)) {
		r->ntf_out += d;
	}
}

static void print_header(void)
{
	printf("%-8s %-20s %9s %9s %8s %8s %7s %8s %8s %6s %6s %7s %7s\n", "TIME", "DEVICE",
	       "r/s", "w/s", "rMiB/s", "wMiB/s", "o/s", "p50us", "p99us", "inflt", "batch",
	       "ntf-in", "ntf-out");
}

/* One line per device of cur, with rates since prev. */
static void print_rows(const struct snapshot *prev, const struct snapshot *cur)
{
	double dt = cur->t - prev->t;
	char when[16];
	time_t now = time(NULL);
	struct tm tm;
	size_t d, i;

	if (dt <= 0)
		dt = 1e-9;
	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	for (d = 0; d < cur->ndev; d++) {
		struct devrow r;
		double reqs, p50, p99;
		char s50[16], s99[16], sbatch[16], sin[16], sout[16];

		memset(&r, 0, sizeof(r));
		for (i = 0; i < cur->n; i++)
			if (!strcmp(cur->s[i].device, cur->devices[d]))
				row_add(&r, prev, &cur->s[i]);
		reqs = r.rd + r.wr + r.other;
		p50 = quantile(&r, 0.5);
		p99 = quantile(&r, 0.99);
		snprintf(s50, sizeof(s50), p50 < 0 ? "-" : "%.1f", p50 * 1e6);
		snprintf(s99, sizeof(s99), p99 < 0 ? "-" : "%.1f", p99 * 1e6);
		snprintf(sbatch, sizeof(sbatch), r.calls > 0 ? "%.1f" : "-",
			 r.calls > 0 ? r.iocbs / r.calls : 0);
		snprintf(sin, sizeof(sin), reqs > 0 ? "%.3f" : "-", reqs > 0 ? r.ntf_in / reqs : 0);
		snprintf(sout, sizeof(sout), reqs > 0 ? "%.3f" : "-", reqs > 0 ? r.ntf_out / reqs : 0);
		printf("%-8s %-20s %9.1f %9.1f %8.2f %8.2f %7.1f %8s %8s %6.2f %6s %7s %7s\n", when,
		       cur->devices[d], r.rd / dt, r.wr / dt, r.rbytes / dt / 1048576.0,
		       r.wbytes / dt / 1048576.0, r.other / dt, s50, s99, r.lat_sum / dt, sbatch,
		       sin, sout);
	}
}

int xbdctl_view(const char *path, const char *dev, double interval, long count)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct snapshot prev, cur;
	char *req = NULL;
	double start;
	long k, lines = 0;
	bool tty = isatty(STDOUT_FILENO);
	int rc = 0;

	/* No SA_RESTART: Ctrl-C ends the sleep at once. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (asprintf(&req, XBD_CTL_STATS "%s%s" XBD_CTL_SEP XBD_CTL_FORMAT XBD_CTL_SEP
		     XBD_CTL_FORMAT_PROMETHEUS XBD_CTL_SEP XBD_CTL_BY XBD_CTL_SEP XBD_CTL_BY_DEVICE "\n",
		     dev ? XBD_CTL_SEP : "",
		     dev ? dev : "") < 0)
		return 1;
	if (snapshot_take(path, req, &prev)) {
		free(req);
		return 1;
	}
	start = prev.t;
	print_header();
	fflush(stdout);
	for (k = 1; !view_stop && (!count || k <= count); k++) {
		double due = start + (double)k * interval;
		struct timespec ts = { .tv_sec = (time_t)due,
				       .tv_nsec = (long)((due - floor(due)) * 1e9) };

		/* Absolute deadlines: the samples do not drift by the time each takes. */
		while (!view_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		if (view_stop)
			break;
		if (snapshot_take(path, req, &cur)) {
			rc = 1;
			break;
		}
		if (tty && lines >= VIEW_HEADER_EVERY) {
			print_header();
			lines = 0;
		}
		print_rows(&prev, &cur);
		lines += (long)cur.ndev;
		if (fflush(stdout)) {
			snapshot_free(&cur);
			rc = 1;
			break;
		}
		snapshot_free(&prev);
		prev = cur;
	}
	snapshot_free(&prev);
	free(req);
	return rc;
}
