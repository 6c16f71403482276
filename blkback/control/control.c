/*
 * control.c: the control socket xbdctl(8) talks to (control.h; its
 * answers to list and stats are control-show.c's).  A unix stream
 * socket, one request per connection: the client writes one line of
 * tab-separated words ("stats\t--json\tvbd/1/51728"; the words and the
 * metric names: common/control-protocol.h), the daemon answers
 * "ok\n" and the body, or "error: <why>\n", and closes.
 *
 * It is served from the main thread's event loop, which also owns the
 * device list, so a device cannot disappear under a request.  Nothing
 * here blocks (non-blocking sockets, answers buffered and written as the
 * client reads them), and nothing here touches a ring thread: counters
 * are read with relaxed atomic loads (stats.h) and the run-time settings
 * (the settings table marks them, options.c) are written with relaxed
 * atomic stores that the ring threads load on each use.
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

#include "blkback/control/control.h"
#include "blkback/control/tracking.h"
#include "blkback/datapath/throttle.h"
#include "common/control-protocol.h"

#define CTL_MAX_CONNS 32
#define CTL_MAX_LINE 1024
#define CTL_MAX_WORDS 32

struct ctl_conn;

/*
 * A request whose answer comes later (a checkpoint waits for its disk's
 * writes to drain: checkpoint.c).  The operation holds it until it
 * answers; a connection closed meanwhile (the daemon stopping) only lets
 * go of it, and the answer then goes nowhere.
 */
struct ctl_later {
	struct xbd_ctl_wait w;   /* first: what checkpoint.c is handed */
	struct xbd_control *ctl;
	struct ctl_conn *conn;   /* NULL once the connection is gone */
	bool in_handle;          /* answered while its request is being handled */
};

struct ctl_conn {
	int fd;
	char in[CTL_MAX_LINE];
	size_t inlen;
	char *out;
	size_t outlen, outoff;
	struct ctl_later *later; /* its answer comes later, or NULL */
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

/*
 * Whether xbdctl set with this selection changes dev: a selected device,
 * and the disks that share a throttle group with one (a group has one set
 * of limits, and every disk of it shows them).
 */
static bool set_selects(const struct xbd_back *bk, const struct xbd_dev *dev, const char *sel)
{
	const struct xbd_dev *d;

	if (ctl_dev_matches(dev, sel))
		return true;
	if (!dev->disk.o.throttle_group[0])
		return false;
	for (d = bk->devs; d; d = d->next)
		if (d != dev && d->disk.domid == dev->disk.domid && ctl_dev_matches(d, sel) &&
		    !strcmp(d->disk.o.throttle_group, dev->disk.o.throttle_group))
			return true;
	return false;
}

/* Settings that may change while rings run (the table's run-time ones): stored atomically. */
static int cmd_set(struct xbd_control *ctl, FILE *f, char **w, unsigned int nw, char *err,
		   size_t errlen)
{
	const char *sel = NULL, *keys = xbd_setting_names(XBD_SETTING_DISK, true);
	struct xbd_disk_opts vals = ctl->bk->opts.disk;
	struct xbd_dev *dev;
	uint64_t mask = 0;
	unsigned int i, n = 0;

	if (nw && !strchr(w[0], '=')) {
		sel = strcmp(w[0], "all") ? w[0] : NULL;
		w++;
		nw--;
	}
	if (!nw) {
		snprintf(err, errlen, "set needs KEY=VALUE (keys: %s)", keys);
		return -EINVAL;
	}
	/* Check everything before changing anything. */
	for (i = 0; i < nw; i++) {
		char *eq = strchr(w[i], '=');

		if (!eq) {
			snprintf(err, errlen, "'%s' is not KEY=VALUE", w[i]);
			return -EINVAL;
		}
		*eq = '\0';
		if (!xbd_setting_exists(w[i]) && xbd_setting_nearest(w[i], true, true)) {
			snprintf(err, errlen, "unknown key '%s' (did you mean %s?)", w[i],
				 xbd_setting_nearest(w[i], true, true));
			return -EINVAL;
		}
		if (!xbd_setting_exists(w[i])) {
			snprintf(err, errlen, "unknown key '%s' (allowed: %s)", w[i], keys);
			return -EINVAL;
		}
		if (!xbd_setting_is_runtime(w[i])) {
			snprintf(err, errlen, "'%s' cannot be changed at run time (allowed: %s)", w[i],
				 keys);
			return -EINVAL;
		}
		if (xbd_disk_opt_set(&vals, &mask, "", w[i], eq + 1, err, errlen))
			return -EINVAL;
	}
	for (dev = ctl->bk->devs; dev; dev = dev->next)
		n += ctl_dev_matches(dev, sel);
	if (sel && !n)
		return -ENODEV;
	/* Limits that would contradict a device's others (a burst below its limit): nothing changes. */
	for (dev = ctl->bk->devs; dev; dev = dev->next) {
		struct xbd_disk_opts merged = dev->disk.o;
		char why[200];

		if (!set_selects(ctl->bk, dev, sel))
			continue;
		xbd_disk_opts_store(&merged, &vals, mask);
		if (xbd_iolimits_check(&merged, why, sizeof(why))) {
			char id[64];

			ctl_dev_id(dev, id, sizeof(id));
			snprintf(err, errlen, "%.63s: %.199s", id, why);
			return -EINVAL;
		}
	}
	if (!sel) {
		struct xbd_disk_opts merged = ctl->bk->opts.disk;

		xbd_disk_opts_store(&merged, &vals, mask);
		if (xbd_iolimits_check(&merged, err, errlen))
			return -EINVAL;
	}
	for (dev = ctl->bk->devs; dev; dev = dev->next) {
		char id[64];
		char *line = NULL;
		size_t len = 0;
		bool in_worker;
		FILE *l;

		if (!set_selects(ctl->bk, dev, sel))
			continue;
		/* Only the keys given: the device keeps its other settings. */
		xbd_disk_opts_store(&dev->disk.o, &vals, mask);
		/* Its limits, where its rings run: its worker, or here. */
		in_worker = xbd_worker_set(dev->wd, &vals, mask);
		if (dev->disk.thr || (xbd_dev_connected(dev) && !in_worker))
			xbd_disk_throttle_update(&dev->disk);
		/* Its changed-block tracking opened, or stopped (checkpoint.c). */
		if (xbd_setting_in_mask("cbt", mask))
			track_set(dev);
		ctl_dev_id(dev, id, sizeof(id));
		fprintf(f, "%s: ", id);
		xbd_disk_opts_print_runtime(f, &dev->disk.o);
		fputc('\n', f);
		l = open_memstream(&line, &len);
		if (l) {
			xbd_disk_opts_print_runtime(l, &dev->disk.o);
			fclose(l);
			xbd_log(XBD_LOG_INFO, "%s: set by xbdctl: %s", dev->disk.name, line ? line : "");
			free(line);
		}
	}
	if (vals.io_weight || vals.cpu_weight)
		xbd_workers_weights_asked();
	if (!sel) {
		/* And the devices still to come (until SIGHUP re-reads the file). */
		xbd_disk_opts_store(&ctl->bk->opts.disk, &vals, mask);
		fprintf(f, "defaults: ");
		xbd_disk_opts_print_runtime(f, &ctl->bk->opts.disk);
		fputc('\n', f);
	}
	return 0;
}

/*
 * --json, --format FORMAT or --by ring|device, anywhere among the n words
 * w: taken out (the words left, in order; how many), into *fmt and
 * *by_device, or a value they do not take into *bad_fmt or *bad_by.
 */
static unsigned int take_format(char **w, unsigned int nw, enum ctl_format *fmt, bool *by_device,
				const char **bad_fmt, const char **bad_by)
{
	unsigned int i, j;

	for (i = j = 0; i < nw; i++) {
		const char *v = NULL;

		if (!strcmp(w[i], XBD_CTL_BY)) {
			const char *by = i + 1 < nw ? w[++i] : "";

			if (!strcmp(by, XBD_CTL_BY_DEVICE) || !strcmp(by, XBD_CTL_BY_RING))
				*by_device = !strcmp(by, XBD_CTL_BY_DEVICE);
			else
				*bad_by = by;
			continue;
		}
		if (!strcmp(w[i], XBD_CTL_JSON))
			v = XBD_CTL_FORMAT_JSON;
		else if (!strcmp(w[i], XBD_CTL_FORMAT))
			v = i + 1 < nw ? w[++i] : "";
		else if (!strncmp(w[i], XBD_CTL_FORMAT "=", strlen(XBD_CTL_FORMAT "=")))
			v = w[i] + strlen(XBD_CTL_FORMAT "=");
		else
			w[j++] = w[i];
		if (!v)
			continue;
		if (!strcmp(v, XBD_CTL_FORMAT_JSON))
			*fmt = FMT_JSON;
		else if (!strcmp(v, XBD_CTL_FORMAT_PROMETHEUS))
			*fmt = FMT_PROMETHEUS;
		else if (!strcmp(v, XBD_CTL_FORMAT_TABLE))
			*fmt = FMT_TABLE;
		else
			*bad_fmt = v;
	}
	return j;
}

static void conn_send(struct xbd_control *ctl, struct ctl_conn *c);

/* An answer that came later: to its connection, if that is still there. */
static void later_answer(struct xbd_ctl_wait *w, int err, const char *text)
{
	struct ctl_later *l = (struct ctl_later *)w;
	struct ctl_conn *c = l->conn;
	FILE *o;

	if (!c) {
		free(l); /* the connection went first */
		return;
	}
	c->later = NULL;
	o = open_memstream(&c->out, &c->outlen);
	if (o) {
		if (err)
			fprintf(o, XBD_CTL_ERROR "%s\n", text && text[0] ? text : strerror(-err));
		else
			fprintf(o, XBD_CTL_OK "\n%s", text ? text : "");
		fclose(o);
	}
	if (!c->out)
		c->outlen = 0;
	/* Answered from within its request (it drained at once): conn_read sends it. */
	if (!l->in_handle)
		conn_send(l->ctl, c);
	free(l);
}

/*
 * The verbs of changed-block tracking (checkpoint.c): an answer now, or
 * (-EINPROGRESS) one that comes later through c->later.
 */
static int track_verb(struct xbd_control *ctl, struct ctl_conn *c, char **w, unsigned int nw,
		      enum ctl_format fmt, FILE *f, char *err, size_t errlen, const char **sel)
{
	struct ctl_later *l = calloc(1, sizeof(*l));
	int ret;

	if (!l)
		return -ENOMEM;
	l->w.answer = later_answer;
	l->ctl = ctl;
	l->conn = c;
	l->in_handle = true;
	c->later = l;
	ret = track_command(ctl->bk, w[0], w + 1, nw - 1, fmt, f, err, errlen, sel, &l->w);
	if (ret != -EINPROGRESS) {
		c->later = NULL;
		free(l);
		return ret;
	}
	/* Answered already (c->later cleared, l freed), or later. */
	if (c->later)
		l->in_handle = false;
	return ret;
}

/* Run one request line: the answer into c->out, or (c->later) later. */
static void handle(struct xbd_control *ctl, struct ctl_conn *c, char *line)
{
	char **out = &c->out;
	size_t *outlen = &c->outlen;
	char *w[CTL_MAX_WORDS], *save = NULL, *tok, err[1024] = "";
	char *body = NULL;
	size_t bodylen = 0;
	unsigned int nw = 0;
	enum ctl_format fmt = FMT_TABLE;
	const char *sel = NULL, *bad_fmt = NULL, *bad_by = NULL;
	bool by_device = false;
	FILE *f, *o;
	int ret = 0;

	for (tok = strtok_r(line, XBD_CTL_SEP, &save); tok && nw < CTL_MAX_WORDS;
	     tok = strtok_r(NULL, XBD_CTL_SEP, &save))
		w[nw++] = tok;
	nw = take_format(w, nw, &fmt, &by_device, &bad_fmt, &bad_by);
	f = open_memstream(&body, &bodylen);
	if (!f) {
		*out = NULL;
		return;
	}
	if (!nw) {
		snprintf(err, sizeof(err), "empty request");
		ret = -EINVAL;
	} else if (bad_fmt) {
		snprintf(err, sizeof(err), "unknown format '%.64s' (" XBD_CTL_FORMATS ")", bad_fmt);
		ret = -EINVAL;
	} else if (bad_by) {
		snprintf(err, sizeof(err), XBD_CTL_BY " '%.64s': " XBD_CTL_BY_RING " or " XBD_CTL_BY_DEVICE,
			 bad_by);
		ret = -EINVAL;
	} else if (!strcmp(w[0], XBD_CTL_LIST) || !strcmp(w[0], XBD_CTL_STATS)) {
		bool stats = !strcmp(w[0], XBD_CTL_STATS);

		if (nw > 2) {
			snprintf(err, sizeof(err), "%s takes at most one DEVICE", w[0]);
			ret = -EINVAL;
		} else if (fmt == FMT_PROMETHEUS && !stats) {
			snprintf(err, sizeof(err), XBD_CTL_FORMAT " " XBD_CTL_FORMAT_PROMETHEUS
				 " is for " XBD_CTL_STATS);
			ret = -EINVAL;
		} else {
			sel = nw == 2 ? w[1] : NULL;
			ret = ctl_list(ctl->bk, f, sel, fmt, by_device, stats);
		}
	} else if (!strcmp(w[0], XBD_CTL_SET)) {
		ret = cmd_set(ctl, f, w + 1, nw - 1, err, sizeof(err));
		if (ret == -ENODEV)
			sel = w[1];
	} else if (!strcmp(w[0], XBD_CTL_VERSION)) {
		fprintf(f, "xbd-back %s\n", PACKAGE_VERSION);
	} else if (!strcmp(w[0], XBD_CTL_CHECKPOINT) || !strcmp(w[0], XBD_CTL_CHECKPOINTS) ||
		   !strcmp(w[0], XBD_CTL_CHANGES) || !strcmp(w[0], XBD_CTL_DROP) ||
		   !strcmp(w[0], XBD_CTL_RELEASE)) {
		if (fmt == FMT_PROMETHEUS) {
			snprintf(err, sizeof(err), XBD_CTL_FORMAT " " XBD_CTL_FORMAT_PROMETHEUS
				 " is for " XBD_CTL_STATS);
			ret = -EINVAL;
		} else {
			ret = track_verb(ctl, c, w, nw, fmt, f, err, sizeof(err), &sel);
		}
		if (ret == -EINPROGRESS) {
			/* Its answer is in c->out already, or comes later. */
			fclose(f);
			free(body);
			return;
		}
	} else {
		snprintf(err, sizeof(err), "unknown command '%s' (" XBD_CTL_COMMANDS ")", w[0]);
		ret = -EINVAL;
	}
	if (ret == -ENODEV)
		snprintf(err, sizeof(err), "no device '%s' (xbdctl list shows them)", sel);
	else if (ret && !err[0])
		snprintf(err, sizeof(err), "%s", strerror(-ret));
	fclose(f);
	o = open_memstream(out, outlen);
	if (!o) {
		free(body);
		*out = NULL;
		return;
	}
	if (ret)
		fprintf(o, XBD_CTL_ERROR "%s\n", err);
	else
		fprintf(o, XBD_CTL_OK "\n%s", body ? body : "");
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
	/* An answer still to come goes nowhere (later_answer frees it). */
	if (c->later)
		c->later->conn = NULL;
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
	struct epoll_event ev;
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
		static const char toolong[] = XBD_CTL_ERROR "request line too long\n";

		c->out = strdup(toolong);
		c->outlen = c->out ? strlen(toolong) : 0;
	} else {
		*nl = '\0';
		handle(ctl, c, c->in);
		if (!c->out)
			c->outlen = 0;
		if (c->later) {
			/* It answers later (later_answer): nothing to read or write meanwhile. */
			ev.events = 0;
			ev.data.ptr = c;
			epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, c->fd, &ev);
			return;
		}
	}
	conn_send(ctl, c);
}

/* Its answer is ready: write it as the client reads it. */
static void conn_send(struct xbd_control *ctl, struct ctl_conn *c)
{
	struct epoll_event ev = { .events = EPOLLOUT };

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
		/* xbdctl writes its line at once: answer it in this turn of the loop. */
		conn_read(ctl, c);
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
		else if (!c->later)
			conn_read(ctl, c);
		else if (evs[i].events & (EPOLLHUP | EPOLLERR))
			conn_close(ctl, c); /* the client left before its answer came */
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
	xbd_log(required ? XBD_LOG_ERR : XBD_LOG_WARNING, "%s control socket %s: %s%s",
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
