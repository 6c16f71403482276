/*
 * control-show.c: what the control socket answers to `xbdctl list` and
 * `xbdctl stats` (control.h): the table, the JSON (devices, their rings
 * and what each ring thread last saw, the daemon) and the Prometheus
 * exposition (what describes each device, then the counters and
 * histograms per ring or per device).  Every name a user reads is
 * common/control-protocol.h's; every string a guest or an operator wrote
 * is escaped for the format it goes into.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blkback/control/control.h"
#include "blkback/control/tracking.h"
#include "blkback/datapath/stats.h"
#include "common/clock.h"
#include "common/control-protocol.h"

/* ---- answers ---- */

/*
 * The length of the well-formed UTF-8 sequence s starts with (RFC 3629:
 * no overlong forms, surrogates or code points past U+10FFFF), 0 if it
 * starts with none.  A path is bytes; JSON and Prometheus take UTF-8.
 */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	for (i = 1; i < n; i++, lo = 0x80, hi = 0xbf)
		if (s[i] < lo || s[i] > hi)
			return 0; /* the string's end (0) included */
	return n;
}

/*
 * A disk's params as xbdctl shows them, in a string to free (NULL when it
 * has none, or no memory): a secret (key=, password=, secret=) hidden as
 * the log hides it.  Hiding turns a value of 0 to 2 bytes into 3, so
 * twice the length is room enough.
 */
static char *params_shown(const struct xbd_dev *dev)
{
	size_t len = dev->params ? strlen(dev->params) * 2 + 8 : 0;
	char *buf = len ? malloc(len) : NULL;

	return buf ? (char *)xbd_params_for_log(dev->params, buf, len) : NULL;
}

/*
 * The same in a table: every byte that is not printable ASCII, and the
 * backslash, as \xNN (as the log writes them), so that a disk stays one
 * line and its params cannot drive the terminal; "-" without params.
 */
static void table_params(FILE *f, const struct xbd_dev *dev)
{
	char esc[XBD_LOG_STR_BUF], *shown = params_shown(dev);
	const char *p = shown;

	if (!p)
		p = dev->params ? "(no memory)" : "-";
	while (*p) {
		p += xbd_log_escape(esc, p, XBD_LOG_STR_MAX, true);
		fputs(esc, f);
	}
	free(shown);
}

/* U+FFFD REPLACEMENT CHARACTER, for each byte that is not UTF-8. */
#define UTF8_REPLACEMENT "\xef\xbf\xbd"

/* A JSON string, or null for NULL; a byte that is not UTF-8 is U+FFFD. */
static void json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	while (*p) {
		size_t n = utf8_len(p);

		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else if (!n)
			fputs("\\ufffd", f);
		else
			fwrite(p, 1, n, f);
		p += n ? n : 1;
	}
	fputc('"', f);
}

/* How the connected rings reach guest pages; NULL before a frontend connects. */
static const char *grants_mode(const struct xbd_dev *dev)
{
	if (!xbd_dev_connected(dev))
		return NULL;
	if (dev->disk.copy)
		return "copy";
	return dev->disk.persistent ? "persistent" : "map";
}

/* A device's argument form: TYPE/DOMID/DEVID. */
void ctl_dev_id(const struct xbd_dev *dev, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%u/%u", dev->disk.type, dev->disk.domid, dev->disk.devid);
}

/*
 * A connected ring's indexes and event channel: the shared header (as it
 * is now where the ring is mapped here, else as its thread last saw it),
 * and what the ring thread had consumed, pushed and left masked when it
 * last went to sleep (datapath/dataplane.h, struct xbd_ring_view).  What a
 * frontend that seems stuck is waiting for can be read off these.
 */
static void ring_json(FILE *f, const struct xbd_ring_view *v, uint32_t remote_port)
{
	const struct xbd_ring_seen *seen = &v->seen;
	uint64_t now = xbd_mono_ns();

	fprintf(f, ",\"ring\":{\"req_prod\":%" PRIu32 ",\"req_event\":%" PRIu32
		",\"rsp_prod\":%" PRIu32 ",\"rsp_event\":%" PRIu32 ",\"req_cons\":%" PRIu32
		",\"rsp_pushed\":%" PRIu32 ",\"inflight\":%" PRIu32 ",\"port\":%d"
		",\"remote_port\":%" PRIu32 ",\"port_masked\":%s,\"spurious_wakeups\":%" PRIu32
		",\"cpu\":",
		seen->shared.req_prod, seen->shared.req_event, seen->shared.rsp_prod,
		seen->shared.rsp_event, seen->req_cons, seen->rsp_pushed, seen->inflight, v->port,
		remote_port, seen->masked_port >= 0 ? "true" : "false", seen->spurious);
	if (v->cpu >= 0)
		fprintf(f, "%d", v->cpu);
	else
		fputs("null", f);
	fputs(",\"asleep_ms\":", f);
	if (seen->asleep_since)
		fprintf(f, "%" PRIu64 "}", now > seen->asleep_since ?
			(now - seen->asleep_since) / 1000000u : 0);
	else
		fprintf(f, "null}");
}

/*
 * Where its storage's open is: "open", "opening" (on its thread: a
 * server's handshake, a Ceph monitor), "failed" (tried again with
 * backoff), "refused" (can never open as it is: not tried again) or "-"
 * (not tried: no params yet).
 */
static const char *storage_state(const struct xbd_dev *dev)
{
	if (dev->disk.store)
		return "open";
	if (dev->open_job)
		return "opening";
	if (dev->open_err)
		return dev->open_refused ? "refused" : "failed";
	return "-";
}

static uint64_t ms_until(uint64_t at_ms)
{
	uint64_t now = xbd_mono_ns() / 1000000u;

	return at_ms > now ? at_ms - now : 0;
}

/* The I/O limits in force (iolimits.h): "limits  iops-total 500 (burst 1000 for 10 s) ...". */
static void table_limits(FILE *f, const char *indent, const struct xbd_disk_opts *o)
{
	struct xbd_iolimits c;
	unsigned int k;

	xbd_iolimits_from_opts(o, &c);
	fprintf(f, "%slimits       ", indent);
	if (!xbd_iolimits_any(&c))
		fprintf(f, " none");
	for (k = 0; k < XBD_IOLIMIT_KINDS; k++) {
		if (!c.l[k].avg)
			continue;
		fprintf(f, " %s %" PRIu64, xbd_iolimit_name(k), c.l[k].avg);
		if (c.l[k].max)
			fprintf(f, " (burst %" PRIu64 " for %u s)", c.l[k].max, c.l[k].max_length);
	}
	if (xbd_iolimits_any(&c) && c.iops_size)
		fprintf(f, "  iops-size %" PRIu64, c.iops_size);
	if (o->throttle_group[0])
		fprintf(f, "  group %s", o->throttle_group);
	fputc('\n', f);
}

/* "limits":{"iops_total":{"rate":N,"burst":N,"burst_seconds":N},...,"group":...}: set ones only. */
static void json_limits(FILE *f, const struct xbd_disk_opts *o)
{
	struct xbd_iolimits c;
	unsigned int k;
	bool first = true;

	xbd_iolimits_from_opts(o, &c);
	fprintf(f, ",\"limits\":{");
	for (k = 0; k < XBD_IOLIMIT_KINDS; k++) {
		const char *p;

		if (!c.l[k].avg)
			continue;
		fprintf(f, "%s\"", first ? "" : ",");
		for (p = xbd_iolimit_name(k); *p; p++)
			fputc(*p == '-' ? '_' : *p, f);
		fprintf(f, "\":{\"rate\":%" PRIu64 ",\"burst\":", c.l[k].avg);
		if (c.l[k].max)
			fprintf(f, "%" PRIu64 ",\"burst_seconds\":%u}", c.l[k].max, c.l[k].max_length);
		else
			fprintf(f, "null,\"burst_seconds\":null}");
		first = false;
	}
	fprintf(f, "%s\"iops_size\":%" PRIu64 ",\"group\":", first ? "" : ",", c.iops_size);
	if (o->throttle_group[0])
		fprintf(f, "\"%s\"}", o->throttle_group); /* validated: [A-Za-z0-9_.-] */
	else
		fprintf(f, "null}");
}

static void dev_json(FILE *f, const struct xbd_dev *dev, bool stats)
{
	const struct xbd_disk_opts *o = &dev->disk.o;
	unsigned int restarts, i;
	char id[64], *shown;
	uint32_t uid;
	pid_t pid;

	ctl_dev_id(dev, id, sizeof(id));
	fprintf(f, "{\"id\":");
	json_str(f, id);
	fprintf(f, ",\"type\":");
	json_str(f, dev->disk.type);
	fprintf(f, ",\"domid\":%u,\"domain_name\":", dev->disk.domid);
	json_str(f, dev->dom_name[0] ? dev->dom_name : NULL);
	fprintf(f, ",\"devid\":%u,\"state\":", dev->disk.devid);
	json_str(f, xbd_dev_state_name(dev));
	fprintf(f, ",\"connected\":%s,\"params\":", xbd_dev_connected(dev) ? "true" : "false");
	shown = params_shown(dev);
	json_str(f, shown ? shown : dev->params ? "(no memory)" : NULL);
	free(shown);
	fprintf(f, ",\"storage\":{\"state\":");
	json_str(f, storage_state(dev));
	fprintf(f, ",\"error\":");
	json_str(f, !dev->disk.store && dev->open_err ? dev->open_why : NULL);
	fprintf(f, ",\"failed_tries\":%u,\"retry_in_ms\":", dev->open_tries);
	if (!dev->disk.store && !dev->open_job && dev->open_err && !dev->open_refused)
		fprintf(f, "%" PRIu64 "}", ms_until(dev->open_retry_ms));
	else
		fprintf(f, "null}");
	fprintf(f, ",\"engine\":");
	json_str(f, dev->disk.store ? dev->disk.eng->name : NULL);
	fprintf(f, ",\"sectors\":%" PRIu64 ",\"sector_size\":%u,\"readonly\":%s,\"page_cache\":%s,"
		"\"grants\":",
		dev->disk.store ? __atomic_load_n(&dev->disk.lim.nr_sectors, __ATOMIC_RELAXED) : 0,
		dev->disk.store ? dev->caps.logical_block : 0, dev->readonly ? "true" : "false",
		dev->disk.store && dev->caps.page_cache ? "true" : "false");
	json_str(f, grants_mode(dev));
	fprintf(f, ",\"protocol\":");
	json_str(f, xbd_dev_connected(dev) ? xbd_abi_protocol(dev->disk.abi) : NULL);
	fprintf(f, ",\"settings\":");
	xbd_disk_opts_json(f, o);
	json_limits(f, o);
	/* Where its rings run: its domain's worker (workers.h), or null: this process. */
	fprintf(f, ",\"worker\":");
	if (xbd_worker_info(dev->wd, &pid, &uid, &restarts)) {
		/* pid null while it starts: a script's `kill -KILL 0` would kill its own group. */
		if (pid > 0)
			fprintf(f, "{\"pid\":%ld", (long)pid);
		else
			fprintf(f, "{\"pid\":null");
		fprintf(f, ",\"uid\":%u,\"restarts\":%u}", uid, restarts);
	} else {
		fprintf(f, "null");
	}
	/* Its changed-block tracking: checkpoints, bitmaps, its view (checkpoint.c). */
	track_json(f, dev);
	fprintf(f, ",\"rings\":[");
	for (i = 0; i < dev->disk.nr_rings; i++) {
		const struct xbd_dev_ring *dr = &dev->rings[i];
		struct xbd_ring_view v;

		fprintf(f, "%s{\"index\":%u,\"ring_pages\":%u", i ? "," : "", i, dr->p.nr_pages);
		if (stats && xbd_dev_connected(dev) && xbd_ring_view(dr->ring, &v))
			ring_json(f, &v, dr->p.remote_port);
		if (stats) {
			struct xbd_ring_stats s;

			xbd_stats_snapshot(xbd_ring_stats(dr->ring), &s);
			fprintf(f, ",\"stats\":");
			xbd_stats_json(f, &s);
		}
		fputc('}', f);
	}
	fputc(']', f);
	if (stats) {
		struct xbd_ring_stats sum;

		xbd_dev_totals(dev, &sum);
		fprintf(f, ",\"stats\":");
		xbd_stats_json(f, &sum);
	}
	fputc('}', f);
}

static void daemon_json(FILE *f, const struct xbd_back *bk)
{
	unsigned int i;

	fprintf(f, "\"daemon\":{\"version\":");
	json_str(f, PACKAGE_VERSION);
	fprintf(f, ",\"pid\":%ld,\"domid\":%u,\"platform\":", (long)getpid(), bk->domid);
	json_str(f, xbd_platform_name(bk->host.plat));
	fprintf(f, ",\"config\":");
	json_str(f, bk->opts.config);
	fprintf(f, ",\"types\":[");
	for (i = 0; i < bk->opts.nr_types; i++) {
		fprintf(f, "%s", i ? "," : "");
		json_str(f, bk->opts.types[i]);
	}
	fprintf(f, "]}");
}

/* A latency for a person: "850 ns", "12.3 us", "4.56 ms", "1.20 s". */
static void fmt_ns(char *buf, size_t len, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, len, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.3g us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.3g ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.3g s", (double)ns / 1e9);
}

/* One line per op that answered requests: consume-to-push quantiles and max. */
static void table_latency(FILE *f, const char *indent, const struct xbd_ring_stats *s)
{
	unsigned int op, lines = 0;

	for (op = 0; op < XBD_LAT_OPS; op++) {
		const struct xbd_lat_hist *h = &s->lat[op];
		uint64_t n = xbd_lat_count(h);
		char p50[16], p99[16], p999[16], max[16];

		if (!n)
			continue;
		fmt_ns(p50, sizeof(p50), xbd_lat_quantile(h, 0.5));
		fmt_ns(p99, sizeof(p99), xbd_lat_quantile(h, 0.99));
		fmt_ns(p999, sizeof(p999), xbd_lat_quantile(h, 0.999));
		fmt_ns(max, sizeof(max), h->max_ns);
		fprintf(f, "%s%-14s%-8s p50 %s  p99 %s  p99.9 %s  max %s  (%" PRIu64 " answered)\n",
			indent, lines++ ? "" : "latency", xbd_lat_op_name(op), p50, p99, p999, max, n);
	}
	if (!lines)
		fprintf(f, "%slatency       none answered yet\n", indent);
}

static void table_counters(FILE *f, const char *indent, const struct xbd_ring_stats *s)
{
	uint64_t invalid = 0;
	unsigned int i;

	for (i = 1; i < XBD_REQ_NR_ERRORS; i++)
		invalid += s->errors[i];
	fprintf(f, "%srequests      read %" PRIu64 "  write %" PRIu64 "  flush %" PRIu64
		"  discard %" PRIu64 "  barrier %" PRIu64 "\n", indent, s->rd_req, s->wr_req,
		s->f_req, s->ds_req, s->barrier_req);
	fprintf(f, "%ssectors       read %" PRIu64 "  written %" PRIu64 "\n", indent, s->rd_sect,
		s->wr_sect);
	fprintf(f, "%serrors        invalid %" PRIu64 "  grant %" PRIu64 "  io %" PRIu64, indent,
		invalid, s->grant_errors, s->io_errors);
	for (i = 1; i < XBD_REQ_NR_ERRORS; i++)
		if (s->errors[i])
			fprintf(f, "  %s %" PRIu64, xbd_stats_error_name(i), s->errors[i]);
	fprintf(f, "\n%swaits         out-of-slot %" PRIu64 "\n", indent, s->oo_req);
	fprintf(f, "%sio_submit     calls %" PRIu64 "  iocbs %" PRIu64 "  batch sizes", indent,
		s->io_submit_calls, s->io_submitted);
	for (i = 0; i < XBD_BATCH_BUCKETS; i++)
		fprintf(f, " %s:%" PRIu64, xbd_stats_bucket_name(i), s->batch_hist[i]);
	fprintf(f, "\n%scompletions   reaped %" PRIu64 " in %" PRIu64 " reap calls (%.2f per call)\n",
		indent, s->reaped, s->reap_calls,
		s->reap_calls ? (double)s->reaped / (double)s->reap_calls : 0.0);
	fprintf(f, "%sgrants        map calls %" PRIu64 "  copy calls %" PRIu64 "  unmap calls %"
		PRIu64 "  persistent hits %" PRIu64 "  misses %" PRIu64 "\n", indent,
		s->grant_map_calls, s->grant_copy_calls, s->grant_unmap_calls, s->persistent_hits,
		s->persistent_misses);
	fprintf(f, "%snotifications sent %" PRIu64 "  received %" PRIu64 "\n", indent,
		s->notify_sent, s->notify_recv);
	fprintf(f, "%spoll          hits %" PRIu64 "  misses %" PRIu64 "  time %" PRIu64 " us\n",
		indent, s->poll_hits, s->poll_misses, s->poll_ns / 1000);
	fprintf(f, "%sclock reads   %" PRIu64 "\n", indent, s->clock_reads);
	fprintf(f, "%sthrottled     %" PRIu64 " requests waited %.3f s for the I/O limits\n", indent,
		s->throttled, (double)s->throttle_ns / 1e9);
	if (s->cbt_held || s->cbt_syncs || s->cbw_blocks)
		fprintf(f, "%stracked       writes held for checkpoints %" PRIu64 "  syncs %" PRIu64
			"  blocks copied for a view %" PRIu64 "\n", indent, s->cbt_held, s->cbt_syncs,
			s->cbw_blocks);
	table_latency(f, indent, s);
}

bool ctl_dev_matches(const struct xbd_dev *dev, const char *arg)
{
	char id[64];

	if (!arg)
		return true;
	ctl_dev_id(dev, id, sizeof(id));
	if (!strcmp(arg, id) || !strcmp(arg, id + strlen(dev->disk.type) + 1))
		return true;
	return dev->params && !strcmp(arg, dev->params);
}

/* ---- Prometheus ---- */

/*
 * A label value: backslash, double quote and newline escaped (the text
 * format's rule), and U+FFFD for a byte that is not UTF-8 (which the
 * format requires).
 */
static void prom_label_value(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', f);
	while (*p) {
		size_t n = utf8_len(p);

		if (*p == '\\' || *p == '"')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (!n)
			fputs(UTF8_REPLACEMENT, f);
		else
			fwrite(p, 1, n, f);
		p += n ? n : 1;
	}
	fputc('"', f);
}

/*
 * A device's labels, domain="5",domain_name="web1",device="vbd/5/51712":
 * the id kept (a series per boot of the guest), the name beside it (what
 * xl list shows; the toolstack's text, escaped as every label value).
 */
static void prom_dev_labels(FILE *f, const struct xbd_dev *dev)
{
	char id[64];

	ctl_dev_id(dev, id, sizeof(id));
	fprintf(f, XBD_LABEL_EQ(XBD_LABEL_DOMAIN, "%u") "," XBD_LABEL_DOMAIN_NAME "=",
		dev->disk.domid);
	prom_label_value(f, dev->dom_name);
	fprintf(f, "," XBD_LABEL_EQ(XBD_LABEL_DEVICE, "%s"), id);
}

/* The same as a string of its own (a counter series' labels), ring's too if ring >= 0: NULL, no memory. */
static char *prom_dev_labels_str(const struct xbd_dev *dev, int ring)
{
	char *s = NULL;
	size_t len;
	FILE *f = open_memstream(&s, &len);

	if (!f)
		return NULL;
	prom_dev_labels(f, dev);
	if (ring >= 0)
		fprintf(f, "," XBD_LABEL_EQ(XBD_LABEL_RING, "%d"), ring);
	if (fclose(f)) {
		free(s);
		return NULL;
	}
	return s;
}

/*
 * A device's ring series: its rings, or those of the connection it is
 * leaving, or (closed) those of its last connection, so that a series
 * does not vanish while the device is there; a ring that connects again
 * starts from zero (a counter reset).
 */
static unsigned int prom_rings(const struct xbd_dev *dev)
{
	unsigned int n = dev->disk.nr_rings > dev->nr_drain ? dev->disk.nr_rings : dev->nr_drain;

	return n > dev->nr_last ? n : dev->nr_last;
}

/*
 * The I/O limits in force (iolimits.h), one series per limit set: a limit
 * removed by xbdctl set removes its series (a setting, not a counter).
 */
/* limit="SETTING",unit="UNIT", with the setting's format. */
#define LIMIT_LABELS(setting) \
	XBD_LABEL_EQ(XBD_LABEL_LIMIT, setting) "," XBD_LABEL_EQ(XBD_LABEL_UNIT, "%s")

static void prom_limits(FILE *f, const struct xbd_back *bk, const char *sel)
{
	static const char *const unit[XBD_IOLIMIT_KINDS] = {
		"operations", "operations", "operations", "bytes", "bytes", "bytes",
	};
	const struct xbd_dev *dev;

	fprintf(f, "# HELP " XBD_METRIC_DEVICE_LIMIT " An I/O limit of the disk (iops-* and bps-* "
		"settings; a burst is " XBD_LABEL_EQ(XBD_LABEL_LIMIT, "...-max") ").\n"
		"# TYPE " XBD_METRIC_DEVICE_LIMIT " gauge\n");
	for (dev = bk->devs; dev; dev = dev->next) {
		struct xbd_iolimits c;

		if (!ctl_dev_matches(dev, sel))
			continue;
		xbd_iolimits_from_opts(&dev->disk.o, &c);
		for (unsigned int k = 0; k < XBD_IOLIMIT_KINDS; k++) {
			if (!c.l[k].avg)
				continue;
			fputs(XBD_METRIC_DEVICE_LIMIT "{", f);
			prom_dev_labels(f, dev);
			fprintf(f, "," LIMIT_LABELS("%s") "} %" PRIu64 "\n", xbd_iolimit_name(k),
				unit[k], c.l[k].avg);
			if (!c.l[k].max)
				continue;
			fputs(XBD_METRIC_DEVICE_LIMIT "{", f);
			prom_dev_labels(f, dev);
			fprintf(f, "," LIMIT_LABELS("%s-max") "} %" PRIu64 "\n",
				xbd_iolimit_name(k), unit[k], c.l[k].max);
		}
	}
}

/*
 * stats --format prometheus: what describes each device, then the
 * counters and histograms per ring (labels domain, device, ring), or with
 * --by device one series per device (labels domain, device) holding its
 * rings of earlier connections too.  Per ring, a ring that connects again
 * starts its counters from zero, which Prometheus' rate() reads as a
 * counter reset; per device the counters only grow while xbd-back runs.
 */
static int prom_stats(struct xbd_back *bk, FILE *f, const char *sel, bool by_device)
{
	struct xbd_stats_series *series = NULL;
	size_t n = 0, cap = 0, i;
	struct xbd_dev *dev;
	int ret = 0;

	for (dev = bk->devs; dev; dev = dev->next)
		if (ctl_dev_matches(dev, sel))
			cap += by_device ? 1 : prom_rings(dev);
	if (cap && !(series = calloc(cap, sizeof(*series))))
		return -ENOMEM;
	for (dev = bk->devs; dev && !ret; dev = dev->next) {
		unsigned int r;

		if (!ctl_dev_matches(dev, sel))
			continue;
		if (by_device) {
			char *labels = prom_dev_labels_str(dev, -1);

			if (!labels) {
				ret = -ENOMEM;
				break;
			}
			series[n].labels = labels;
			xbd_dev_totals(dev, &series[n++].s);
			continue;
		}
		for (r = 0; r < prom_rings(dev); r++) {
			const struct xbd_ring *ring = r < dev->disk.nr_rings ? dev->rings[r].ring :
						      r < dev->nr_drain ? dev->drain[r].ring : NULL;
			char *labels = prom_dev_labels_str(dev, (int)r);

			if (!labels) {
				ret = -ENOMEM;
				break;
			}
			series[n].labels = labels;
			if (ring)
				xbd_stats_snapshot(xbd_ring_stats(ring), &series[n].s);
			else if (r < dev->nr_last)
				series[n].s = dev->last[r];
			n++;
		}
	}
	if (!ret) {
		fprintf(f, "# HELP " XBD_METRIC_BACK_INFO " The running xbd-back.\n"
			"# TYPE " XBD_METRIC_BACK_INFO " gauge\n" XBD_METRIC_BACK_INFO "{"
			XBD_LABEL_EQ(XBD_LABEL_VERSION, "%s") "} 1\n",
			PACKAGE_VERSION);
		fprintf(f, "# HELP " XBD_METRIC_DEVICE_INFO " A device xbd-back serves (value 1).\n"
			"# TYPE " XBD_METRIC_DEVICE_INFO " gauge\n");
		for (dev = bk->devs; dev; dev = dev->next) {
			char *shown;

			if (!ctl_dev_matches(dev, sel))
				continue;
			fputs(XBD_METRIC_DEVICE_INFO "{", f);
			prom_dev_labels(f, dev);
			fprintf(f, "," XBD_LABEL_EQ(XBD_LABEL_STATE, "%s") "," XBD_LABEL_EQ(XBD_LABEL_MODE, "%s")
				"," XBD_LABEL_EQ(XBD_LABEL_CACHE, "%s") "," XBD_LABEL_EQ(XBD_LABEL_GRANTS, "%s")
				"," XBD_LABEL_PARAMS "=",
				xbd_dev_state_name(dev), dev->readonly ? "ro" : "rw",
				xbd_cache_mode_name(dev->disk.o.cache),
				grants_mode(dev) ? grants_mode(dev) : "");
			shown = params_shown(dev);
			prom_label_value(f, shown ? shown : dev->params ? "(no memory)" : "");
			free(shown);
			fputs("} 1\n", f);
		}
		fprintf(f, "# HELP " XBD_METRIC_DEVICE_SIZE " The disk's size.\n"
			"# TYPE " XBD_METRIC_DEVICE_SIZE " gauge\n");
		for (dev = bk->devs; dev; dev = dev->next) {
			if (!ctl_dev_matches(dev, sel))
				continue;
			fputs(XBD_METRIC_DEVICE_SIZE "{", f);
			prom_dev_labels(f, dev);
			fprintf(f, "} %" PRIu64 "\n", dev->disk.store ?
				__atomic_load_n(&dev->disk.lim.nr_sectors, __ATOMIC_RELAXED) * 512 : 0);
		}
		fprintf(f, "# HELP " XBD_METRIC_DEVICE_RINGS " Rings connected (0 before a frontend connects).\n"
			"# TYPE " XBD_METRIC_DEVICE_RINGS " gauge\n");
		for (dev = bk->devs; dev; dev = dev->next) {
			if (!ctl_dev_matches(dev, sel))
				continue;
			fputs(XBD_METRIC_DEVICE_RINGS "{", f);
			prom_dev_labels(f, dev);
			fprintf(f, "} %u\n", dev->disk.nr_rings);
		}
		prom_limits(f, bk, sel);
		track_prometheus(f, bk, sel);
		if (n)
			xbd_stats_prometheus(f, series, n);
	}
	for (i = 0; i < n; i++)
		free((char *)series[i].labels);
	free(series);
	return ret;
}

/* ---- list and stats ---- */

int ctl_list(struct xbd_back *bk, FILE *f, const char *sel, enum ctl_format fmt,
	     bool by_device, bool stats)
{
	struct xbd_dev *dev;
	unsigned int n = 0;

	for (dev = bk->devs; dev; dev = dev->next)
		n += ctl_dev_matches(dev, sel);
	if (sel && !n)
		return -ENODEV;
	if (fmt == FMT_PROMETHEUS)
		return prom_stats(bk, f, sel, by_device);
	if (fmt == FMT_JSON) {
		fputc('{', f);
		daemon_json(f, bk);
		fprintf(f, ",\"devices\":[");
		n = 0;
		for (dev = bk->devs; dev; dev = dev->next) {
			if (!ctl_dev_matches(dev, sel))
				continue;
			if (n++)
				fputc(',', f);
			dev_json(f, dev, stats);
		}
		fprintf(f, "]}\n");
		return 0;
	}
	if (!stats) {
		unsigned int failed = 0;

		fprintf(f, "%-18s %-16s %-12s %-8s %-6s %-5s %-10s %-12s %-18s %-7s %s\n", "DEVICE",
			"DOMAIN", "STATE", "STORAGE", "RINGS", "MODE", "CACHE", "GRANTS", "SECTORS",
			"CBT", "PARAMS");
		for (dev = bk->devs; dev; dev = dev->next) {
			char id[64], name[XBD_LOG_STR_BUF], cbt[16];

			if (!ctl_dev_matches(dev, sel))
				continue;
			ctl_dev_id(dev, id, sizeof(id));
			fprintf(f, "%-18s %-16s %-12s %-8s %-6u %-5s %-10s %-12s %-18" PRIu64 " %-7s ",
				id, dev->dom_name[0] ? xbd_log_str(name, dev->dom_name) : "-",
				xbd_dev_state_name(dev), storage_state(dev), dev->disk.nr_rings,
				dev->readonly ? "ro" : "rw", xbd_cache_mode_name(dev->disk.o.cache),
				grants_mode(dev) ? grants_mode(dev) : "-",
				dev->disk.store ? __atomic_load_n(&dev->disk.lim.nr_sectors, __ATOMIC_RELAXED) : 0,
				track_column(dev, cbt, sizeof(cbt)));
			table_params(f, dev);
			fputc('\n', f);
			failed += !dev->disk.store && !dev->open_job && dev->open_err;
		}
		/* What failed, and what to do: below the table, one line a device. */
		for (dev = bk->devs; failed && dev; dev = dev->next) {
			char id[64];

			if (!ctl_dev_matches(dev, sel) || dev->disk.store || dev->open_job || !dev->open_err)
				continue;
			ctl_dev_id(dev, id, sizeof(id));
			if (dev->open_refused)
				fprintf(f, "%s: refused: %s; not tried again until params or mode "
					"change, or SIGHUP\n", id, dev->open_why);
			else
				fprintf(f, "%s: its storage did not open: %s (%u tr%s; the next in %"
					PRIu64 " s); the guest's disk connects once it opens\n", id,
					dev->open_why, dev->open_tries, dev->open_tries == 1 ? "y" : "ies",
					(ms_until(dev->open_retry_ms) + 999) / 1000);
		}
		return 0;
	}
	n = 0;
	for (dev = bk->devs; dev; dev = dev->next) {
		struct xbd_ring_stats sum;
		char id[64];
		unsigned int i;

		if (!ctl_dev_matches(dev, sel))
			continue;
		ctl_dev_id(dev, id, sizeof(id));
		fprintf(f, "%s%s  %s, %u ring%s, params ", n++ ? "\n" : "", id,
			xbd_dev_state_name(dev), dev->disk.nr_rings, dev->disk.nr_rings == 1 ? "" : "s");
		table_params(f, dev);
		fputc('\n', f);
		table_limits(f, "  ", &dev->disk.o);
		track_table(f, "  ", dev);
		xbd_dev_totals(dev, &sum);
		table_counters(f, "  ", &sum);
		for (i = 0; dev->disk.nr_rings > 1 && i < dev->disk.nr_rings; i++) {
			struct xbd_ring_stats s;

			xbd_stats_snapshot(xbd_ring_stats(dev->rings[i].ring), &s);
			fprintf(f, "  ring %u\n", i);
			table_counters(f, "    ", &s);
		}
	}
	return 0;
}
