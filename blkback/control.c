/*
 * control.c: the control socket xbdctl(8) talks to.  A unix stream
 * socket, one request per connection: the client writes one line of
 * tab-separated words ("stats\t--json\tvbd/1/51728"), the daemon answers
 * "ok\n" and the body, or "error: <why>\n", and closes.
 *
 * It is served from the main thread's event loop, which also owns the
 * device list, so a device cannot disappear under a request.  Nothing
 * here blocks (non-blocking sockets, answers buffered and written as the
 * client reads them), and nothing here touches a ring thread: counters
 * are read with relaxed atomic loads (stats.h) and the run-time settings
 * (max-batch, polling) are written with relaxed atomic stores that the
 * ring threads load on each use.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "blkback/device.h"

#define CTL_MAX_CONNS 32
#define CTL_MAX_LINE 1024
#define CTL_MAX_WORDS 32

struct ctl_conn {
	int fd;
	char in[CTL_MAX_LINE];
	size_t inlen;
	char *out;
	size_t outlen, outoff;
	struct ctl_conn *next;
};

struct xbd_control {
	struct xbd_back *bk;
	int epfd;
	int lfd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t dev;
	ino_t ino;
	struct ctl_conn *conns;
	unsigned int nconns;
};

/* ---- answers ---- */

/* A JSON string, or null for NULL. */
static void json_str(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* How the connected rings reach guest pages; NULL before a frontend connects. */
static const char *grants_mode(const struct xbd_dev *dev)
{
	if (!dev->connected)
		return NULL;
	if (dev->copy)
		return "copy";
	return dev->persistent ? "persistent" : "map";
}

/* A device's argument form: TYPE/DOMID/DEVID. */
static void dev_id(const struct xbd_dev *dev, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%u/%u", dev->type, dev->domid, dev->devid);
}

static void dev_totals(const struct xbd_dev *dev, struct xbd_ring_stats *sum)
{
	unsigned int i;

	*sum = dev->past;
	for (i = 0; i < dev->nr_rings; i++) {
		struct xbd_ring_stats s;

		xbd_stats_snapshot(&dev->rings[i].stats, &s);
		xbd_stats_sum(sum, &s);
	}
	/* Rings of an earlier connection still finishing their I/O. */
	for (i = 0; i < dev->nr_drain; i++) {
		struct xbd_ring_stats s;

		xbd_stats_snapshot(&dev->drain[i].stats, &s);
		xbd_stats_sum(sum, &s);
	}
}

/*
 * A connected ring's indexes and event channel: the shared header as it is
 * now, and what the ring thread had consumed, pushed and left masked when
 * it last went to sleep (device.h, struct xbd_bring's seen).  What a
 * frontend that seems stuck is waiting for can be read off these.
 */
static void ring_json(FILE *f, const struct xbd_bring *br)
{
	struct xbd_ring_shared_idx sh;
	struct timespec ts;
	uint64_t since = __atomic_load_n(&br->seen.asleep_since, __ATOMIC_RELAXED), now;
	int32_t masked = __atomic_load_n(&br->seen.masked_port, __ATOMIC_RELAXED);

	xbd_ring_read_shared(&br->ring, &sh);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	fprintf(f, ",\"ring\":{\"req_prod\":%" PRIu32 ",\"req_event\":%" PRIu32
		",\"rsp_prod\":%" PRIu32 ",\"rsp_event\":%" PRIu32 ",\"req_cons\":%" PRIu32
		",\"rsp_pushed\":%" PRIu32 ",\"inflight\":%" PRIu32 ",\"port\":%d"
		",\"remote_port\":%" PRIu32 ",\"port_masked\":%s,\"spurious_wakeups\":%" PRIu32
		",\"asleep_ms\":",
		sh.req_prod, sh.req_event, sh.rsp_prod, sh.rsp_event,
		__atomic_load_n(&br->seen.req_cons, __ATOMIC_RELAXED),
		__atomic_load_n(&br->seen.rsp_pushed, __ATOMIC_RELAXED),
		__atomic_load_n(&br->seen.inflight, __ATOMIC_RELAXED), br->port, br->remote_port,
		masked >= 0 ? "true" : "false",
		__atomic_load_n(&br->seen.spurious, __ATOMIC_RELAXED));
	if (since)
		fprintf(f, "%" PRIu64 "}", now > since ? (now - since) / 1000000u : 0);
	else
		fprintf(f, "null}");
}

static void dev_json(FILE *f, const struct xbd_dev *dev, bool stats)
{
	const struct xbd_disk_opts *o = &dev->o;
	char id[64];
	unsigned int i;

	dev_id(dev, id, sizeof(id));
	fprintf(f, "{\"id\":");
	json_str(f, id);
	fprintf(f, ",\"type\":");
	json_str(f, dev->type);
	fprintf(f, ",\"domid\":%u,\"devid\":%u,\"state\":", dev->domid, dev->devid);
	json_str(f, xbd_dev_state_name(dev));
	fprintf(f, ",\"connected\":%s,\"params\":", dev->connected ? "true" : "false");
	json_str(f, dev->params);
	fprintf(f, ",\"engine\":");
	json_str(f, dev->store ? dev->eng->name : NULL);
	fprintf(f, ",\"sectors\":%" PRIu64 ",\"sector_size\":%u,\"readonly\":%s,\"grants\":",
		dev->store ? __atomic_load_n(&dev->lim.nr_sectors, __ATOMIC_RELAXED) : 0,
		dev->store ? dev->caps.logical_block : 0, dev->readonly ? "true" : "false");
	json_str(f, grants_mode(dev));
	fprintf(f, ",\"protocol\":");
	json_str(f, dev->connected ? xbd_abi_protocol(dev->abi) : NULL);
	fprintf(f, ",\"settings\":{\"cache\":\"%s\",\"fua_mode\":\"%s\",\"max_batch\":%u,"
		"\"poll_max_ns\":%" PRIu64 ",\"poll_grow\":%u,\"poll_shrink\":%u,\"persistent\":%s,\"grants\":\"%s\","
		"\"barrier\":%s,\"max_ring_order\":%u,\"max_queues\":%u,\"max_indirect_segs\":%u}",
		xbd_cache_mode_name(o->cache), xbd_fua_mode_name(o->fua_mode), o->max_batch,
		o->poll_max_ns, o->poll_grow, o->poll_shrink, o->persistent ? "true" : "false",
		xbd_grant_mode_name(o->grants),
		o->barrier ? "true" : "false", o->max_ring_order, o->max_queues,
		o->barrier ? 0 : o->max_indirect_segs);
	fprintf(f, ",\"rings\":[");
	for (i = 0; i < dev->nr_rings; i++) {
		const struct xbd_bring *br = &dev->rings[i];

		fprintf(f, "%s{\"index\":%u,\"ring_pages\":%u", i ? "," : "", i, br->nr_pages);
		if (stats && dev->connected && br->sring)
			ring_json(f, br);
		if (stats) {
			struct xbd_ring_stats s;

			xbd_stats_snapshot(&br->stats, &s);
			fprintf(f, ",\"stats\":");
			xbd_stats_json(f, &s);
		}
		fputc('}', f);
	}
	fputc(']', f);
	if (stats) {
		struct xbd_ring_stats sum;

		dev_totals(dev, &sum);
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
	json_str(f, xbd_platform_name(bk->plat));
	fprintf(f, ",\"config\":");
	json_str(f, bk->opts.config);
	fprintf(f, ",\"types\":[");
	for (i = 0; i < bk->opts.nr_types; i++) {
		fprintf(f, "%s", i ? "," : "");
		json_str(f, bk->opts.types[i]);
	}
	fprintf(f, "]}");
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
}

static bool dev_matches(const struct xbd_dev *dev, const char *arg)
{
	char id[64];

	if (!arg)
		return true;
	dev_id(dev, id, sizeof(id));
	if (!strcmp(arg, id) || !strcmp(arg, id + strlen(dev->type) + 1))
		return true;
	return dev->params && !strcmp(arg, dev->params);
}

/* ---- commands ---- */

static int cmd_list(struct xbd_control *ctl, FILE *f, const char *sel, bool json, bool stats)
{
	struct xbd_dev *dev;
	unsigned int n = 0;

	for (dev = ctl->bk->devs; dev; dev = dev->next)
		n += dev_matches(dev, sel);
	if (sel && !n)
		return -ENODEV;
	if (json) {
		fputc('{', f);
		daemon_json(f, ctl->bk);
		fprintf(f, ",\"devices\":[");
		n = 0;
		for (dev = ctl->bk->devs; dev; dev = dev->next) {
			if (!dev_matches(dev, sel))
				continue;
			if (n++)
				fputc(',', f);
			dev_json(f, dev, stats);
		}
		fprintf(f, "]}\n");
		return 0;
	}
	if (!stats) {
		fprintf(f, "%-18s %-12s %-6s %-5s %-10s %-12s %-18s %s\n", "DEVICE", "STATE",
			"RINGS", "MODE", "CACHE", "GRANTS", "SECTORS", "PARAMS");
		for (dev = ctl->bk->devs; dev; dev = dev->next) {
			char id[64];

			if (!dev_matches(dev, sel))
				continue;
			dev_id(dev, id, sizeof(id));
			fprintf(f, "%-18s %-12s %-6u %-5s %-10s %-12s %-18" PRIu64 " %s\n", id,
				xbd_dev_state_name(dev), dev->nr_rings, dev->readonly ? "ro" : "rw",
				xbd_cache_mode_name(dev->o.cache),
				grants_mode(dev) ? grants_mode(dev) : "-",
				dev->store ? __atomic_load_n(&dev->lim.nr_sectors, __ATOMIC_RELAXED) : 0,
				dev->params ? dev->params : "-");
		}
		return 0;
	}
	n = 0;
	for (dev = ctl->bk->devs; dev; dev = dev->next) {
		struct xbd_ring_stats sum;
		char id[64];
		unsigned int i;

		if (!dev_matches(dev, sel))
			continue;
		dev_id(dev, id, sizeof(id));
		fprintf(f, "%s%s  %s, %u ring%s, params %s\n", n++ ? "\n" : "", id,
			xbd_dev_state_name(dev), dev->nr_rings, dev->nr_rings == 1 ? "" : "s",
			dev->params ? dev->params : "-");
		dev_totals(dev, &sum);
		table_counters(f, "  ", &sum);
		for (i = 0; dev->nr_rings > 1 && i < dev->nr_rings; i++) {
			struct xbd_ring_stats s;

			xbd_stats_snapshot(&dev->rings[i].stats, &s);
			fprintf(f, "  ring %u\n", i);
			table_counters(f, "    ", &s);
		}
	}
	return 0;
}

/* Settings that may change while rings run: the ring threads load them atomically. */
static int cmd_set(struct xbd_control *ctl, FILE *f, char **w, unsigned int nw, char *err,
		   size_t errlen)
{
	static const char *const runtime[] = { "max-batch", "poll-max-ns", "poll-grow",
					       "poll-shrink" };
	const char *sel = NULL;
	struct xbd_disk_opts scratch = ctl->bk->opts.disk;
	struct xbd_dev *dev;
	unsigned int i, k, n = 0;

	if (nw && !strchr(w[0], '=')) {
		sel = strcmp(w[0], "all") ? w[0] : NULL;
		w++;
		nw--;
	}
	if (!nw) {
		snprintf(err, errlen, "set needs KEY=VALUE (keys: max-batch, poll-max-ns, "
			 "poll-grow, poll-shrink)");
		return -EINVAL;
	}
	/* Check everything before changing anything. */
	for (i = 0; i < nw; i++) {
		char *eq = strchr(w[i], '=');
		bool ok = false;

		if (!eq) {
			snprintf(err, errlen, "'%s' is not KEY=VALUE", w[i]);
			return -EINVAL;
		}
		*eq = '\0';
		for (k = 0; k < 4; k++)
			ok |= !strcmp(w[i], runtime[k]);
		if (!ok) {
			snprintf(err, errlen, "'%s' cannot be changed at run time (allowed: "
				 "max-batch, poll-max-ns, poll-grow, poll-shrink)", w[i]);
			return -EINVAL;
		}
		if (xbd_disk_opt_set(&scratch, "", w[i], eq + 1, err, errlen))
			return -EINVAL;
	}
	for (dev = ctl->bk->devs; dev; dev = dev->next)
		n += dev_matches(dev, sel);
	if (sel && !n)
		return -ENODEV;
	for (dev = ctl->bk->devs; dev; dev = dev->next) {
		char id[64];

		if (!dev_matches(dev, sel))
			continue;
		/* Only the keys given: the device keeps its other settings. */
		scratch = dev->o;
		for (i = 0; i < nw; i++)
			xbd_disk_opt_set(&scratch, "", w[i], w[i] + strlen(w[i]) + 1, err, errlen);
		__atomic_store_n(&dev->o.max_batch, scratch.max_batch, __ATOMIC_RELAXED);
		__atomic_store_n(&dev->o.poll_max_ns, scratch.poll_max_ns, __ATOMIC_RELAXED);
		__atomic_store_n(&dev->o.poll_grow, scratch.poll_grow, __ATOMIC_RELAXED);
		__atomic_store_n(&dev->o.poll_shrink, scratch.poll_shrink, __ATOMIC_RELAXED);
		dev_id(dev, id, sizeof(id));
		fprintf(f, "%s: max-batch=%u poll-max-ns=%" PRIu64 " poll-grow=%u poll-shrink=%u\n",
			id, scratch.max_batch, scratch.poll_max_ns, scratch.poll_grow,
			scratch.poll_shrink);
		xbd_log(XBD_LOG_INFO, "%s: set by xbdctl: max-batch=%u poll-max-ns=%" PRIu64
			" poll-grow=%u poll-shrink=%u", dev->name, scratch.max_batch,
			scratch.poll_max_ns, scratch.poll_grow, scratch.poll_shrink);
	}
	if (!sel) {
		/* And the devices still to come (until SIGHUP re-reads the file). */
		scratch = ctl->bk->opts.disk;
		for (i = 0; i < nw; i++)
			xbd_disk_opt_set(&scratch, "", w[i], w[i] + strlen(w[i]) + 1, err, errlen);
		ctl->bk->opts.disk = scratch;
		fprintf(f, "defaults: max-batch=%u poll-max-ns=%" PRIu64 " poll-grow=%u "
			"poll-shrink=%u\n", scratch.max_batch, scratch.poll_max_ns,
			scratch.poll_grow, scratch.poll_shrink);
	}
	return 0;
}

/* Run one request line; the answer goes to *out. */
static void handle(struct xbd_control *ctl, char *line, char **out, size_t *outlen)
{
	char *w[CTL_MAX_WORDS], *save = NULL, *tok, err[XBD_OPT_ERR_MAX] = "";
	char *body = NULL;
	size_t bodylen = 0;
	unsigned int nw = 0, i, j;
	bool json = false;
	const char *sel = NULL;
	FILE *f, *o;
	int ret = 0;

	for (tok = strtok_r(line, "\t", &save); tok && nw < CTL_MAX_WORDS;
	     tok = strtok_r(NULL, "\t", &save))
		w[nw++] = tok;
	/* --json anywhere. */
	for (i = j = 0; i < nw; i++) {
		if (!strcmp(w[i], "--json"))
			json = true;
		else
			w[j++] = w[i];
	}
	nw = j;
	f = open_memstream(&body, &bodylen);
	if (!f) {
		*out = NULL;
		return;
	}
	if (!nw) {
		snprintf(err, sizeof(err), "empty request");
		ret = -EINVAL;
	} else if (!strcmp(w[0], "list") || !strcmp(w[0], "stats")) {
		if (nw > 2) {
			snprintf(err, sizeof(err), "%s takes at most one DEVICE", w[0]);
			ret = -EINVAL;
		} else {
			sel = nw == 2 ? w[1] : NULL;
			ret = cmd_list(ctl, f, sel, json, w[0][0] == 's');
		}
	} else if (!strcmp(w[0], "set")) {
		ret = cmd_set(ctl, f, w + 1, nw - 1, err, sizeof(err));
		if (ret == -ENODEV)
			sel = w[1];
	} else if (!strcmp(w[0], "version")) {
		fprintf(f, "xbd-back %s\n", PACKAGE_VERSION);
	} else {
		snprintf(err, sizeof(err), "unknown command '%s' (list, stats, set, version)", w[0]);
		ret = -EINVAL;
	}
	if (ret == -ENODEV)
		snprintf(err, sizeof(err), "no device '%s' (xbdctl list shows them)", sel);
	fclose(f);
	o = open_memstream(out, outlen);
	if (!o) {
		free(body);
		*out = NULL;
		return;
	}
	if (ret)
		fprintf(o, "error: %s\n", err);
	else
		fprintf(o, "ok\n%s", body ? body : "");
	fclose(o);
	free(body);
}

/* ---- connections ---- */

static void conn_close(struct xbd_control *ctl, struct ctl_conn *c)
{
	struct ctl_conn **pp;

	for (pp = &ctl->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	epoll_ctl(ctl->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->out);
	free(c);
	ctl->nconns--;
}

static void conn_write(struct xbd_control *ctl, struct ctl_conn *c)
{
	while (c->outoff < c->outlen) {
		ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return; /* EPOLLOUT brings us back */
		if (n <= 0)
			break;
		c->outoff += n;
	}
	conn_close(ctl, c);
}

static void conn_read(struct xbd_control *ctl, struct ctl_conn *c)
{
	struct epoll_event ev = { .events = EPOLLOUT };
	char *nl;
	ssize_t n;

	for (;;) {
		n = read(c->fd, c->in + c->inlen, sizeof(c->in) - 1 - c->inlen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			conn_close(ctl, c); /* gone before finishing its line */
			return;
		}
		c->inlen += n;
		c->in[c->inlen] = '\0';
		nl = strchr(c->in, '\n');
		if (nl || c->inlen == sizeof(c->in) - 1)
			break;
	}
	if (!nl) {
		static const char toolong[] = "error: request line too long\n";

		c->out = strdup(toolong);
		c->outlen = c->out ? strlen(toolong) : 0;
	} else {
		*nl = '\0';
		handle(ctl, c->in, &c->out, &c->outlen);
		if (!c->out)
			c->outlen = 0;
	}
	ev.data.ptr = c;
	epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	conn_write(ctl, c);
}

static void accept_all(struct xbd_control *ctl)
{
	for (;;) {
		int fd = accept4(ctl->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN };
		struct ctl_conn *c;

		if (fd < 0)
			return;
		if (ctl->nconns >= CTL_MAX_CONNS) {
			close(fd); /* the socket is root's: this is a runaway script */
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		ev.data.ptr = c;
		if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			free(c);
			continue;
		}
		c->next = ctl->conns;
		ctl->conns = c;
		ctl->nconns++;
	}
}

void xbd_control_dispatch(struct xbd_control *ctl)
{
	struct epoll_event evs[16];
	int n, i;

	n = epoll_wait(ctl->epfd, evs, 16, 0);
	for (i = 0; i < n; i++) {
		struct ctl_conn *c = evs[i].data.ptr;

		if (!c)
			accept_all(ctl);
		else if (c->out)
			conn_write(ctl, c);
		else
			conn_read(ctl, c);
	}
}

int xbd_control_fd(const struct xbd_control *ctl)
{
	return ctl->epfd;
}

/* Is a live daemon answering at path?  Then it is not ours to replace. */
static bool socket_alive(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd < 0)
		return false;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	alive = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return alive;
}

int xbd_control_open(struct xbd_back *bk, const char *path, bool required,
		     struct xbd_control **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	struct xbd_control *ctl;
	struct stat st;
	char dir[sizeof(sa.sun_path)];
	int err;

	*out = NULL;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	ctl->bk = bk;
	ctl->lfd = ctl->epfd = -1;
	snprintf(ctl->path, sizeof(ctl->path), "%s", path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	/* /run/xbd does not survive a reboot: make it (the parent must exist). */
	snprintf(dir, sizeof(dir), "%s", path);
	if (mkdir(dirname(dir), 0755) && errno != EEXIST) {
		err = -errno;
		goto fail;
	}
	if (socket_alive(path)) {
		err = -EADDRINUSE;
		goto fail;
	}
	unlink(path); /* a stale socket of a daemon that did not exit cleanly */
	ctl->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ctl->lfd < 0) {
		err = -errno;
		goto fail;
	}
	if (bind(ctl->lfd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		goto fail;
	}
	/* Counters are harmless, but set changes the data path: root only. */
	if (chmod(path, 0600) || stat(path, &st) || listen(ctl->lfd, 16)) {
		err = -errno;
		unlink(path);
		goto fail;
	}
	ctl->dev = st.st_dev;
	ctl->ino = st.st_ino;
	ctl->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ctl->epfd < 0 || epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->lfd, &ev)) {
		err = -errno;
		unlink(path);
		goto fail;
	}
	*out = ctl;
	xbd_log(XBD_LOG_VERBOSE, "control socket %s", path);
	return 0;
fail:
	xbd_log(required ? XBD_LOG_ERR : XBD_LOG_INFO, "%s control socket %s: %s%s",
		required ? "cannot use the" : "no", path,
		err == -EADDRINUSE ? "another xbd-back is serving it" : strerror(-err),
		required ? "" : " (xbdctl will not reach this daemon)");
	if (ctl->lfd >= 0)
		close(ctl->lfd);
	if (ctl->epfd >= 0)
		close(ctl->epfd);
	free(ctl);
	return err;
}

void xbd_control_close(struct xbd_control *ctl)
{
	struct stat st;

	if (!ctl)
		return;
	while (ctl->conns)
		conn_close(ctl, ctl->conns);
	/* Only our own socket: a newer daemon may have replaced it. */
	if (!stat(ctl->path, &st) && st.st_dev == ctl->dev && st.st_ino == ctl->ino)
		unlink(ctl->path);
	close(ctl->lfd);
	close(ctl->epfd);
	free(ctl);
}
