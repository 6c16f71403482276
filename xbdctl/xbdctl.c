/*
 * xbdctl.c: the administrator's window into a running xbd-back.  Sends
 * one request over the daemon's control socket (control.c) and prints the
 * answer: the devices (list), their counters (stats, as a table, JSON or
 * Prometheus metrics), or the result of changing a setting at run time
 * (set: the keys its help names are the settings table's run-time ones,
 * set-keys.awk).  `stats --interval N` is the live view (xbdctl-view.c).
 *
 *   xbdctl [--socket PATH] [--json|--format F] list | stats [DEVICE] [--interval N [--count K]]
 *          | set [DEVICE] KEY=VALUE... | version
 *          | checkpoint DEVICE NAME [--view] | checkpoints [DEVICE]
 *          | changes DEVICE FROM [TO] [--xapi] | drop DEVICE NAME | release DEVICE NAME
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/control-protocol.h"
#include "xbdctl/set-keys.h"
#include "xbdctl/xbdctl.h"

/* text, its words wrapped at 79 columns, each line after the first indented by indent. */
static void wrapped(FILE *f, int indent, const char *text)
{
	int col = indent;

	while (*text) {
		int w = (int)strcspn(text, " ");

		if (col > indent && col + 1 + w > 79) {
			fprintf(f, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', f);
			col++;
		}
		fprintf(f, "%.*s", w, text);
		col += w;
		text += w;
		text += strspn(text, " ");
	}
	fputc('\n', f);
}

static void usage(FILE *f)
{
	/* The keys come from the settings table (set-keys.awk): the list cannot go stale. */
	char *keys = NULL;

	fprintf(f, "Usage: xbdctl [--socket PATH] [--json|--format FORMAT] COMMAND\n"
		"Talk to a running xbd-back.\n\n"
		"  list [DEVICE]                 the devices served, one per line\n"
		"  stats [DEVICE]                their counters (all devices without DEVICE)\n"
		"  stats [DEVICE] --interval N [--count K]\n"
		"                                one line per device every N seconds (rates\n"
		"                                between samples; K lines each, or until Ctrl-C)\n"
		"  set [DEVICE|all] KEY=VALUE... ");
	if (asprintf(&keys, "change a setting at run time (all devices and the defaults for new "
		     "ones without DEVICE); KEY is one of: %s", XBDCTL_SET_KEYS) < 0)
		keys = NULL;
	wrapped(f, 32, keys ? keys : XBDCTL_SET_KEYS);
	free(keys);
	fprintf(f, "  version                       the daemon's version\n"
		"  checkpoint DEVICE NAME [--view]\n"
		"                                mark a checkpoint of the disk's changed-block\n"
		"                                tracking (cbt = 1); --view keeps what the disk\n"
		"                                holds there readable (nbdkit xbdview) until release\n"
		"  checkpoints [DEVICE]          the checkpoints, their bitmaps and views\n"
		"  changes DEVICE FROM [TO]      the extents written from checkpoint FROM to TO\n"
		"                                (or now); --json, or --xapi: XAPI's base64 bitmap\n"
		"  drop DEVICE NAME              forget a checkpoint (its changes join the one before)\n"
		"  release DEVICE NAME           end the view of checkpoint NAME\n\n"
		"DEVICE is TYPE/DOMID/DEVID (vbd/5/51712), DOMID/DEVID, or the disk's params.\n"
		"  -s, --socket PATH    the daemon's control socket (default: $XBD_CONTROL, the\n"
		"                       simulated host's when XBD_SIM_DIR is set, else %s)\n"
		"  -f, --format FORMAT  table (default), json or prometheus (stats only)\n"
		"      --by ring|device prometheus: a series per ring (default) or per device\n"
		"  -j, --json           the same as --format json (list and stats)\n"
		"  -i, --interval N     stats: the live view, a sample every N seconds\n"
		"  -c, --count K        the live view: stop after K samples\n"
		"  -h, --help           this text\n"
		"      --version        xbdctl's version (the command version: the daemon's)\n"
		"See xbdctl(8).\n", XBD_DEFAULT_CONTROL);
}

/* The same default as xbd-back's (blkback/control/xbd-back.c: control_path). */
static char *default_socket(void)
{
	const char *env = getenv("XBD_CONTROL"), *sim = getenv("XBD_SIM_DIR");
	const char *dom = getenv("XBD_SIM_DOMID");
	char *p = NULL;

	if (env && env[0])
		return strdup(env);
	if (sim && sim[0]) {
		if (asprintf(&p, XBD_SIM_CONTROL_FMT, sim, dom && dom[0] ? dom : "0") < 0)
			return NULL;
		return p;
	}
	return strdup(XBD_DEFAULT_CONTROL);
}

/* A positive number of seconds (fractions allowed), at most a day. */
static int parse_interval(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0.01 && v <= 86400)) {
		fprintf(stderr, "xbdctl: --interval '%s': seconds between 0.01 and 86400\n", s);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_count(const char *s, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1) {
		fprintf(stderr, "xbdctl: --count '%s': a number of samples, at least 1\n", s);
		return -1;
	}
	*out = v;
	return 0;
}

/*
 * xbdctl's options, named once.  Before the command getopt_long reads
 * them (abbreviations and -xVALUE too); those marked after are also
 * taken from among the command's words, spelt in full: --name,
 * --name=VALUE or -x VALUE.
 */
struct xbdctl_opt {
	const char *name;
	int key;                 /* its short option, or OPT_VERSION */
	bool arg;                /* it takes a value */
	bool after;              /* it may follow the command */
};

#define OPT_VERSION 256

static const struct xbdctl_opt opts[] = {
	{ "socket", 's', true, false },
	{ "json", 'j', false, true },
	{ "format", 'f', true, true },
	{ "interval", 'i', true, true },
	{ "count", 'c', true, true },
	{ "help", 'h', false, false },
	{ "version", OPT_VERSION, false, false },
};
#define NR_OPTS (sizeof(opts) / sizeof(opts[0]))

/* What the options ask for. */
struct args {
	char *path;              /* --socket */
	const char *format;      /* --format or --json; NULL: the daemon's default */
	double interval;         /* the live view's period; 0: one answer */
	long count;
};

/* getopt_long's tables, made from opts. */
static void getopt_tables(struct option *lo, char *so)
{
	*so++ = '+';
	for (size_t i = 0; i < NR_OPTS; i++) {
		lo[i] = (struct option){ opts[i].name, opts[i].arg ? required_argument : no_argument,
					 NULL, opts[i].key };
		if (opts[i].key < OPT_VERSION) {
			*so++ = (char)opts[i].key;
			if (opts[i].arg)
				*so++ = ':';
		}
	}
	lo[NR_OPTS] = (struct option){ NULL, 0, NULL, 0 };
	*so = '\0';
}

/* Take one option: -1 to go on, else the exit status (help and version stop with 0). */
static int take_opt(struct args *a, int key, const char *val)
{
	switch (key) {
	case 's':
		free(a->path);
		a->path = strdup(val);
		return -1;
	case 'j':
		a->format = XBD_CTL_FORMAT_JSON;
		return -1;
	case 'f':
		a->format = val;
		return -1;
	case 'i':
		return parse_interval(val, &a->interval) ? 2 : -1;
	case 'c':
		return parse_count(val, &a->count) ? 2 : -1;
	case 'h':
		usage(stdout);
		return 0;
	case OPT_VERSION:
		/* This program's; the command version asks the daemon for its own. */
		printf("xbdctl %s\n", PACKAGE_VERSION);
		return 0;
	default:
		usage(stderr);
		return 2;
	}
}

/*
 * argv[*i], among the command's words, as one of the options that may
 * follow it: its entry and *val (*i moved past a value of its own), or
 * NULL: a word of the command.  *missing: it needs a value and has none.
 */
static const struct xbdctl_opt *word_opt(int argc, char **argv, int *i, const char **val,
					 bool *missing)
{
	const char *w = argv[*i];

	*val = NULL;
	*missing = false;
	for (size_t k = 0; k < NR_OPTS; k++) {
		const struct xbdctl_opt *o = &opts[k];
		size_t n = strlen(o->name);

		if (!o->after)
			continue;
		if (o->arg && !strncmp(w, "--", 2) && !strncmp(w + 2, o->name, n) && w[2 + n] == '=') {
			*val = w + 3 + n;
			return o;
		}
		if ((strncmp(w, "--", 2) || strcmp(w + 2, o->name)) &&
		    (w[0] != '-' || w[1] != o->key || w[2]))
			continue;
		if (o->arg && *i + 1 >= argc)
			*missing = true;
		else if (o->arg)
			*val = argv[++*i];
		return o;
	}
	return NULL;
}

/*
 * The request line: the command, its words (the options among them
 * taken into a), --by and its value as they are, and the format.  NULL
 * with *rc set on a usage error (said).
 */
static char *request_line(int argc, char **argv, int first, const char *cmd, struct args *a,
			  const char **sel, unsigned int *nwords, int *rc)
{
	char *req = NULL;
	size_t reqlen = 0;
	FILE *f = open_memstream(&req, &reqlen);

	*rc = 1;
	if (!f)
		return NULL;
	*rc = 2;
	fputs(cmd, f);
	for (int i = first; i < argc; i++) {
		const char *w = argv[i], *val;
		bool missing;
		const struct xbdctl_opt *o = word_opt(argc, argv, &i, &val, &missing);

		if (missing) {
			fprintf(stderr, "xbdctl: %s needs a value\n", w);
			goto bad;
		}
		if (o) {
			if (take_opt(a, o->key, val) >= 0)
				goto bad;
			continue;
		}
		if (!strcmp(w, "--by") && i + 1 < argc && !strpbrk(argv[i + 1], "\t\n")) {
			fprintf(f, XBD_CTL_SEP XBD_CTL_BY XBD_CTL_SEP "%s", argv[++i]);
			continue;
		}
		if (strpbrk(w, "\t\n")) {
			fprintf(stderr, "xbdctl: argument '%s' holds a tab or newline\n", w);
			goto bad;
		}
		fprintf(f, XBD_CTL_SEP "%s", w);
		*sel = w;
		++*nwords;
	}
	if (a->format) {
		/* A usage error (2) here, not the daemon's refusal (1). */
		if (strcmp(a->format, XBD_CTL_FORMAT_TABLE) && strcmp(a->format, XBD_CTL_FORMAT_JSON) &&
		    strcmp(a->format, XBD_CTL_FORMAT_PROMETHEUS)) {
			fprintf(stderr, "xbdctl: unknown format '%s' (" XBD_CTL_FORMATS ")\n",
				a->format);
			goto bad;
		}
		if (!strcmp(a->format, XBD_CTL_FORMAT_PROMETHEUS) && strcmp(cmd, XBD_CTL_STATS)) {
			fprintf(stderr, "xbdctl: --format prometheus is for stats\n");
			goto bad;
		}
		fprintf(f, XBD_CTL_SEP XBD_CTL_FORMAT XBD_CTL_SEP "%s", a->format);
	}
	fputc('\n', f);
	if (fclose(f)) {
		*rc = 1;
		free(req);
		return NULL;
	}
	return req;
bad:
	fclose(f);
	free(req);
	return NULL;
}

/* What the live view's options allow: 0, or 2 after saying why not. */
static int check_view(const char *cmd, const struct args *a, unsigned int nwords)
{
	if ((a->interval || a->count) && strcmp(cmd, XBD_CTL_STATS)) {
		fprintf(stderr, "xbdctl: --interval and --count are for stats\n");
		return 2;
	}
	if (a->count && !a->interval) {
		fprintf(stderr, "xbdctl: --count needs --interval\n");
		return 2;
	}
	if (a->interval && a->format && strcmp(a->format, XBD_CTL_FORMAT_TABLE)) {
		fprintf(stderr, "xbdctl: the live view (--interval) is a table; --format %s "
			"prints one sample\n", a->format);
		return 2;
	}
	if (a->interval && nwords > 1) {
		fprintf(stderr, "xbdctl: stats takes at most one DEVICE\n");
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct option longopts[NR_OPTS + 1];
	char shortopts[2 * NR_OPTS + 2];
	struct args a = { 0 };
	char *req = NULL, *body = NULL;
	const char *cmd, *sel = NULL;
	unsigned int nwords = 0;
	int c, rc = 2;

	getopt_tables(longopts, shortopts);
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1)
		if ((rc = take_opt(&a, c, optarg)) >= 0)
			goto out;
	rc = 2;
	if (optind >= argc) {
		usage(stderr);
		goto out;
	}
	cmd = argv[optind];
	if (strcmp(cmd, XBD_CTL_LIST) && strcmp(cmd, XBD_CTL_STATS) && strcmp(cmd, XBD_CTL_SET) &&
	    strcmp(cmd, XBD_CTL_VERSION) && strcmp(cmd, XBD_CTL_CHECKPOINT) &&
	    strcmp(cmd, XBD_CTL_CHECKPOINTS) && strcmp(cmd, XBD_CTL_CHANGES) &&
	    strcmp(cmd, XBD_CTL_DROP) && strcmp(cmd, XBD_CTL_RELEASE)) {
		fprintf(stderr, "xbdctl: unknown command '%s' (" XBD_CTL_COMMANDS ")\n", cmd);
		goto out;
	}
	/* One line of tab-separated words; the options may also follow the command. */
	req = request_line(argc, argv, optind + 1, cmd, &a, &sel, &nwords, &rc);
	if (!req || (rc = check_view(cmd, &a, nwords)))
		goto out;
	rc = 2;
	if (!a.path)
		a.path = default_socket();
	if (!a.path || strlen(a.path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fprintf(stderr, "xbdctl: bad control socket path\n");
		goto out;
	}
	if (a.interval) {
		rc = xbdctl_view(a.path, nwords ? sel : NULL, a.interval, a.count);
		goto out;
	}
	rc = xbdctl_request(a.path, req, &body);
	if (!rc) {
		fputs(body, stdout);
		rc = fflush(stdout) ? 1 : 0;
	}
out:
	free(body);
	free(req);
	free(a.path);
	return rc;
}
