/*
 * cgroup.c: each guest's worker in a cgroup v2 of its own, with the
 * weights of its disks (cgroup.h).  Finding the service's own cgroup
 * (/proc/self/cgroup's "0::" line under the cgroup2 mount of
 * /proc/self/mountinfo), deciding whether it can be used and saying so
 * in one line, moving the main process to a leaf, and then per worker:
 * its directory, its pid, its weights, and the directory's removal.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "blkback/workers/cgroup.h"
#include "blkback/workers/workers.h"
#include "blkback/log/log.h"

/* A weight of 0 asks for the cgroup's default, which is 100 for both. */
#define CG_DEFAULT_WEIGHT 100
/* BFQ's io.bfq.weight takes at most this (io.weight 10000). */
#define BFQ_MAX_WEIGHT 1000

struct xbd_cgroup {
	char dir[PATH_MAX];      /* the service's own cgroup */
	bool io, cpu;            /* the controllers enabled for the workers */
	bool bfq;                /* io.bfq.weight exists: BFQ's weight is written too */
	bool fake;               /* XBD_TEST_CGROUP: plain files stand for the kernel's */
	struct xbd_ratelimit rl; /* placing and weighing workers */
};

/* Where the own cgroup is and why it cannot be used. */
struct cg_find {
	char mount[PATH_MAX];    /* the cgroup2 mount point */
	char rel[PATH_MAX];      /* our cgroup below it ("/" for the root) */
	bool v1;                 /* cgroup v1 hierarchies are mounted too (hybrid) */
	bool fake;
	char why[3 * PATH_MAX + 400]; /* set when it cannot be used (it names paths) */
};

/* ---- files ---- */

static int read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	return 0;
}

/*
 * One write of text to dir/name, as the kernel's interface files want
 * (O_CREAT and O_TRUNC do nothing to them, and let the tests' plain files
 * hold the last value).  0 or -errno.
 */
static int write_text(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX + 32];
	size_t len = strlen(text);
	ssize_t n;
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	n = write(fd, text, len);
	if (n < 0)
		err = -errno;
	else if ((size_t)n != len)
		err = -EIO;
	if (close(fd) && !err)
		err = -errno;
	return err;
}

/* Whether the whitespace-separated list holds word. */
static bool has_word(const char *list, const char *word)
{
	size_t l = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += l)
		if ((p == list || p[-1] == ' ' || p[-1] == '\n') &&
		    (!p[l] || p[l] == ' ' || p[l] == '\n'))
			return true;
	return false;
}

/* ---- finding our cgroup ---- */

/* mountinfo's octal escapes (\040 for a space) undone in place. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* The cgroup2 mount point and its root into f; f->v1 if v1 hierarchies are mounted too. */
static bool find_mount(struct cg_find *f, char *root, size_t rootlen)
{
	FILE *mi = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	bool found = false;

	if (!mi)
		return false;
	while (fgets(line, sizeof(line), mi)) {
		char mroot[PATH_MAX], mpoint[PATH_MAX], fstype[64];
		const char *dash = strstr(line, " - ");

		if (!dash || sscanf(dash + 3, "%63s", fstype) != 1 ||
		    sscanf(line, "%*s %*s %*s %4095s %4095s", mroot, mpoint) != 2)
			continue;
		if (!strcmp(fstype, "cgroup"))
			f->v1 = true;
		if (strcmp(fstype, "cgroup2") || found)
			continue;
		unescape(mroot);
		unescape(mpoint);
		snprintf(f->mount, sizeof(f->mount), "%s", mpoint);
		snprintf(root, rootlen, "%s", mroot);
		found = true;
	}
	fclose(mi);
	return found;
}

/* Our cgroup v2 path ("0::" of /proc/self/cgroup) into f->rel; false: none. */
static bool find_rel(struct cg_find *f)
{
	FILE *c = fopen("/proc/self/cgroup", "re");
	char line[PATH_MAX + 16];
	bool found = false;

	if (!c)
		return false;
	while (!found && fgets(line, sizeof(line), c)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(f->rel, sizeof(f->rel), "%.*s", (int)sizeof(f->rel) - 1, line + 3);
		found = true;
	}
	fclose(c);
	return found;
}

/* Whether the cgroup2 mounted at mount has the io or the cpu controller at all. */
static bool v2_controllers(const char *mount)
{
	char path[PATH_MAX + 32], ctl[512];

	snprintf(path, sizeof(path), "%s/cgroup.controllers", mount);
	return !read_text(path, ctl, sizeof(ctl)) && (has_word(ctl, "io") || has_word(ctl, "cpu"));
}

/* The own cgroup's directory into dir, or f->why. */
static bool find_own(struct cg_find *f, char *dir, size_t len)
{
	char root[PATH_MAX] = "/";
	const char *rel;
	size_t rl;

#ifdef XBD_TEST_HOOKS
	/* XBD_TEST_CGROUP=ROOT:OWN: ROOT stands for the cgroup2 mount, OWN for our cgroup. */
	const char *t = getenv("XBD_TEST_CGROUP");

	if (t && strchr(t, ':')) {
		snprintf(f->mount, sizeof(f->mount), "%.*s", (int)(strchr(t, ':') - t), t);
		snprintf(f->rel, sizeof(f->rel), "%s", strchr(t, ':') + 1);
		f->fake = true;
	}
#endif
	if (!f->fake && !find_mount(f, root, sizeof(root))) {
		snprintf(f->why, sizeof(f->why), "no cgroup2 is mounted (a cgroup v1 host: boot "
			 "with systemd.unified_cgroup_hierarchy=1)");
		return false;
	}
	if (!f->fake && f->v1 && !v2_controllers(f->mount)) {
		snprintf(f->why, sizeof(f->why), "a hybrid cgroup host: cgroup v1 holds the io and "
			 "cpu controllers, the cgroup2 at %s has neither (boot with systemd."
			 "unified_cgroup_hierarchy=1)", f->mount);
		return false;
	}
	if (!f->fake && !find_rel(f)) {
		snprintf(f->why, sizeof(f->why), "/proc/self/cgroup has no cgroup v2 line");
		return false;
	}
	/* Inside a cgroup namespace or a bind mount the mount's root is not "/". */
	rl = strcmp(root, "/") ? strlen(root) : 0;
	if (rl && (strncmp(f->rel, root, rl) || (f->rel[rl] && f->rel[rl] != '/'))) {
		snprintf(f->why, sizeof(f->why), "our cgroup %s is not below the cgroup2 mount "
			 "%s (its root %s)", f->rel, f->mount, root);
		return false;
	}
	rel = f->rel + rl;
	if (!rel[0] || !strcmp(rel, "/")) {
		snprintf(f->why, sizeof(f->why), "xbd-back runs in the root cgroup of %s, not in a "
			 "service's own (start it from its systemd unit, which has Delegate=yes)",
			 f->mount);
		return false;
	}
	if ((size_t)snprintf(dir, len, "%s%s", f->mount, rel) >= len) {
		snprintf(f->why, sizeof(f->why), "our cgroup's path is too long");
		return false;
	}
	return true;
}

/* Whether systemd delegated dir to us: it marks it so (v251 on, Delegate=yes). */
static bool delegated(const char *dir)
{
	const char *names[] = { "trusted.delegate", "user.delegate" };
	char v[8];

	for (unsigned int i = 0; i < 2; i++) {
		ssize_t n = getxattr(dir, names[i], v, sizeof(v) - 1);

		if (n > 0) {
			v[n] = '\0';
			if (!strcmp(v, "1"))
				return true;
		}
	}
	return false;
}

/* Whether cg->dir can be used (controllers into cg, else why into f->why). */
static bool usable(struct xbd_cgroup *cg, struct cg_find *f, bool trust)
{
	char ctl[512], path[PATH_MAX + 32];
	int err;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", cg->dir);
	err = read_text(path, ctl, sizeof(ctl));
	if (err) {
		snprintf(f->why, sizeof(f->why), "cannot read %s: %s", path, strerror(-err));
		return false;
	}
	cg->io = has_word(ctl, "io");
	cg->cpu = has_word(ctl, "cpu");
	if (!cg->io && !cg->cpu) {
		snprintf(f->why, sizeof(f->why), "%s offers neither the io nor the cpu controller (%s)",
			 cg->dir, f->v1 ? "a hybrid host keeps them in cgroup v1: boot with "
			 "systemd.unified_cgroup_hierarchy=1" : "Delegate=yes in the unit passes them "
			 "down");
		return false;
	}
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", cg->dir);
	if (access(cg->dir, W_OK) || access(path, W_OK)) {
		snprintf(f->why, sizeof(f->why), "%s is not writable by xbd-back (%s): Delegate=yes "
			 "in the unit", cg->dir, strerror(errno));
		return false;
	}
	if (!trust && !delegated(cg->dir)) {
		snprintf(f->why, sizeof(f->why), "%s is not delegated to xbd-back (no trusted."
			 "delegate on it): Delegate=yes in its systemd unit (systemd 251 and later "
			 "mark it; cgroups = 1 trusts an older one)", cg->dir);
		return false;
	}
	return true;
}

/* ---- setting the tree up ---- */

/*
 * cgroup v2 holds processes only in leaves once a cgroup enables
 * controllers for its children: every process of our cgroup (we, and
 * anything the unit started beside us) moves to <own>/main first.
 */
static int move_to_main(struct xbd_cgroup *cg, char *why, size_t len)
{
	char main_dir[PATH_MAX + 8], pid[16], path[PATH_MAX + 32], procs[4096];
	int err;

	snprintf(main_dir, sizeof(main_dir), "%s/main", cg->dir);
	if (mkdir(main_dir, 0755) && errno != EEXIST) {
		err = -errno;
		snprintf(why, len, "cannot make %s: %s", main_dir, strerror(-err));
		return err;
	}
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	err = write_text(main_dir, "cgroup.procs", pid);
	if (err) {
		snprintf(why, len, "cannot move xbd-back into %s: %s", main_dir, strerror(-err));
		return err;
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg->dir);
	if (read_text(path, procs, sizeof(procs)))
		return 0; /* (enabling the controllers below says what is left) */
	for (char *save = NULL, *p = strtok_r(procs, "\n", &save); p;
	     p = strtok_r(NULL, "\n", &save)) {
		if (!strcmp(p, pid))
			continue;
		err = write_text(main_dir, "cgroup.procs", p);
		if (err && err != -ESRCH) {
			snprintf(why, len, "cannot move process %s of %s into %s: %s", p, cg->dir,
				 main_dir, strerror(-err));
			return err;
		}
	}
	return 0;
}

/* The controllers for the workers' cgroups, in one write. */
static int enable_controllers(struct xbd_cgroup *cg, char *why, size_t len)
{
	char text[16];
	int err;

	snprintf(text, sizeof(text), "%s%s%s", cg->io ? "+io" : "", cg->io && cg->cpu ? " " : "",
		 cg->cpu ? "+cpu" : "");
	err = write_text(cg->dir, "cgroup.subtree_control", text);
	if (err)
		snprintf(why, len, "cannot enable %s in %s/cgroup.subtree_control: %s", text, cg->dir,
			 strerror(-err));
	return err;
}

/* What makes io.weight work here: io.cost on some disks, or BFQ. */
static void io_text(const struct xbd_cgroup *cg, const char *mount, char *buf, size_t len)
{
	char qos[4096], path[PATH_MAX + 32], on[200] = "";
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/io.cost.qos", mount);
	if (!read_text(path, qos, sizeof(qos))) {
		for (char *save = NULL, *l = strtok_r(qos, "\n", &save); l;
		     l = strtok_r(NULL, "\n", &save)) {
			if (strstr(l, " enable=1") && n < sizeof(on))
				n += snprintf(on + n, sizeof(on) - n, "%s%.*s", n ? ", " : "",
					      (int)strcspn(l, " "), l);
		}
	}
	if (!cg->io)
		snprintf(buf, len, "; io.weight not applied: %s does not offer the io controller",
			 cg->dir);
	else if (on[0])
		snprintf(buf, len, "; io.cost is on for %s (io.weight works on those disks only%s)", on,
			 cg->bfq ? ", and on those BFQ schedules: io.bfq.weight too" : "");
	else
		snprintf(buf, len, "; io.weight works only on disks with io.cost on (%s, which has "
			 "none) or the BFQ scheduler%s", path, cg->bfq ? " (io.bfq.weight is written "
			 "too)" : "");
}

/* "io-weight 500, cpu-weight 0 for every disk (...), others from 2 [disk] rules"; whether any is set. */
static bool weights_text(const struct xbd_back_opts *o, char *buf, size_t len)
{
	unsigned int rules = 0;
	size_t n;

	for (unsigned int i = 0; i < o->nr_rules; i++)
		rules += o->rules[i].vals.io_weight != o->disk.io_weight ||
			 o->rules[i].vals.cpu_weight != o->disk.cpu_weight;
	n = (size_t)snprintf(buf, len, "io-weight %u, cpu-weight %u for every disk (0: the "
			     "cgroup default, 100)", o->disk.io_weight, o->disk.cpu_weight);
	if (rules && n < len)
		snprintf(buf + n, len - n, ", others from %u [disk] rule%s", rules,
			 rules == 1 ? "" : "s");
	return rules || o->disk.io_weight || o->disk.cpu_weight;
}

/*
 * Why weights are not applied in this daemon, while nobody has asked for
 * one yet: said once a weight is set (xbd_workers_weights_asked).  The
 * main thread's, set at start.
 */
static char unapplied_why[sizeof(((struct cg_find *)0)->why)];

/*
 * A start without cgroups: a warning where the configuration sets a
 * weight; where none is set, nothing (a detail line with -v), and the
 * reason is kept for when one is set.
 */
static int not_applied(const struct xbd_back_opts *o, const char *why)
{
	char w[200];
	bool asked = weights_text(o, w, sizeof(w));

	if (o->cgroups == XBD_CGROUPS_ON) {
		xbd_log(XBD_LOG_ERR, "cgroups = 1, but weights cannot be applied: %s: not starting",
			why);
		return -EINVAL;
	}
	if (asked) {
		xbd_log(XBD_LOG_WARNING, "cgroups: weights not applied: %s", why);
		return 0;
	}
	snprintf(unapplied_why, sizeof(unapplied_why), "%s", why);
	xbd_log(XBD_LOG_VERBOSE, "cgroups: not used: %s (said again if a weight is set)", why);
	return 0;
}

void xbd_workers_weights_asked(void)
{
	if (!unapplied_why[0])
		return;
	xbd_log(XBD_LOG_WARNING, "cgroups: weights not applied: %s", unapplied_why);
	unapplied_why[0] = '\0';
}

int xbd_cgroup_open(const struct xbd_back_opts *opts, struct xbd_cgroup **out)
{
	struct xbd_cgroup *cg;
	struct cg_find *f;
	char io[PATH_MAX + 300], w[200], path[PATH_MAX + 32];
	int ret = 0;

	*out = NULL;
	if (opts->cgroups == XBD_CGROUPS_OFF)
		return not_applied(opts, "cgroups = 0");
	if (!opts->workers)
		return not_applied(opts, "workers = 0 serves every guest in this process (workers "
				   "= 1 gives each its own, and its cgroup)");
	cg = calloc(1, sizeof(*cg));
	f = calloc(1, sizeof(*f));
	if (!cg || !f) {
		free(cg);
		free(f);
		return not_applied(opts, strerror(ENOMEM));
	}
	if (!find_own(f, cg->dir, sizeof(cg->dir)) ||
	    !usable(cg, f, opts->cgroups == XBD_CGROUPS_ON) ||
	    move_to_main(cg, f->why, sizeof(f->why)) ||
	    enable_controllers(cg, f->why, sizeof(f->why))) {
		ret = not_applied(opts, f->why);
		free(cg);
		free(f);
		return ret;
	}
	cg->fake = f->fake;
	snprintf(path, sizeof(path), "%s/io.bfq.weight", cg->dir);
	cg->bfq = cg->io && !access(path, F_OK);
	xbd_ratelimit_init(&cg->rl);
	cg->rl.who = "cgroups";
	io_text(cg, f->mount, io, sizeof(io));
	weights_text(opts, w, sizeof(w));
	xbd_log(XBD_LOG_INFO, "cgroups: each guest's worker in %s/dom<DOMID> (%s%s%s), this "
		"process in %s/main; %s%s", cg->dir, cg->io ? "io.weight" : "",
		cg->io && cg->cpu ? ", " : "", cg->cpu ? "cpu.weight" : "", cg->dir, w, io);
	free(f);
	*out = cg;
	return 0;
}

void xbd_cgroup_close(struct xbd_cgroup *cg)
{
	if (!cg)
		return;
	xbd_ratelimit_destroy(&cg->rl);
	free(cg);
}

/* ---- workers ---- */

static void dom_dir(const struct xbd_cgroup *cg, uint32_t domid, char *buf, size_t len)
{
	snprintf(buf, len, "%s/dom%u", cg->dir, domid);
}

int xbd_cgroup_place(struct xbd_cgroup *cg, uint32_t domid, pid_t pid)
{
	char dir[PATH_MAX + 16], text[16];
	int err = 0;

	dom_dir(cg, domid, dir, sizeof(dir));
	/* (Left by a worker whose removal failed, or by a daemon before us: taken as it is.) */
	if (mkdir(dir, 0755) && errno != EEXIST)
		err = -errno;
	snprintf(text, sizeof(text), "%ld", (long)pid);
	if (!err)
		err = write_text(dir, "cgroup.procs", text);
	if (err)
		xbd_log_limited(&cg->rl, XBD_LOG_WARNING, "cgroups: cannot place the worker of domain "
				"%u (pid %ld) in %s: %s (it serves without its weights)", domid,
				(long)pid, dir, strerror(-err));
	return err;
}

/* One weight file, if the weight changed; *now: what it holds (0: never written). */
static void weigh(struct xbd_cgroup *cg, const char *dir, const char *file, const char *prefix,
		  unsigned int v, unsigned int *now)
{
	char text[32];
	int err;

	if (v == *now || (!v && !*now))
		return;
	snprintf(text, sizeof(text), "%s%u", prefix, v ? v : CG_DEFAULT_WEIGHT);
	err = write_text(dir, file, text);
	if (err) {
		xbd_log_limited(&cg->rl, XBD_LOG_WARNING, "cgroups: cannot write '%s' to %s/%s: %s",
				text, dir, file, strerror(-err));
		return;
	}
	*now = v;
}

void xbd_cgroup_weights(struct xbd_cgroup *cg, uint32_t domid, unsigned int io,
			unsigned int cpu, unsigned int *io_now, unsigned int *cpu_now)
{
	char dir[PATH_MAX + 16];
	unsigned int bfq_now = *io_now > BFQ_MAX_WEIGHT ? BFQ_MAX_WEIGHT : *io_now;

	dom_dir(cg, domid, dir, sizeof(dir));
	if (cg->bfq)
		weigh(cg, dir, "io.bfq.weight", "", io > BFQ_MAX_WEIGHT ? BFQ_MAX_WEIGHT : io,
		      &bfq_now);
	if (cg->io)
		weigh(cg, dir, "io.weight", "default ", io, io_now);
	if (cg->cpu)
		weigh(cg, dir, "cpu.weight", "", cpu, cpu_now);
}

void xbd_cgroup_remove(struct xbd_cgroup *cg, uint32_t domid)
{
	static const char *const ours[] = { "cgroup.procs", "io.weight", "cpu.weight",
					    "io.bfq.weight" };
	char dir[PATH_MAX + 16], path[PATH_MAX + 32];

	dom_dir(cg, domid, dir, sizeof(dir));
	/* The kernel takes a cgroup's interface files with it; the tests' are plain files. */
	for (unsigned int i = 0; cg->fake && i < sizeof(ours) / sizeof(ours[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, ours[i]);
		unlink(path);
	}
	if (rmdir(dir) && errno != ENOENT)
		xbd_log_limited(&cg->rl, XBD_LOG_WARNING, "cgroups: cannot remove %s: %s", dir,
				strerror(errno));
}
