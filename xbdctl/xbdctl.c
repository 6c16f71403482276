/*
 * xbdctl.c: the administrator's window into a running xbd-back.  Sends
 * one request over the daemon's control socket (control.c) and prints the
 * answer: the devices (list), their counters (stats, as a table, JSON or
 * Prometheus metrics), or the result of changing max-batch and polling at
 * run time (set).  `stats --interval N` is the live view (xbdctl-view.c).
 *
 *   xbdctl [--socket PATH] [--json|--format F] list | stats [DEVICE] [--interval N [--count K]]
 *          | set [DEVICE] KEY=VALUE... | version
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
#include "xbdctl/xbdctl.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: xbdctl [--socket PATH] [--json|--format FORMAT] COMMAND\n"
		"Talk to a running xbd-back.\n\n"
		"  list [DEVICE]                 the devices served, one per line\n"
		"  stats [DEVICE]                their counters (all devices without DEVICE)\n"
		"  stats [DEVICE] --interval N [--count K]\n"
		"                                one line per device every N seconds (rates\n"
		"                                between samples; K lines each, or until Ctrl-C)\n"
		"  set [DEVICE|all] KEY=VALUE... change max-batch, poll-max-ns, poll-grow or\n"
		"                                poll-shrink at run time (all devices and the\n"
		"                                defaults for new ones without DEVICE)\n"
		"  version                       the daemon's version\n\n"
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

int xbdctl_request(const char *path, const char *req, char **body)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 10 };
	size_t reqlen = strlen(req), rsplen = 0, cap = 0;
	char *rsp = NULL, *nl;
	int fd, rc = 1;

	*body = NULL;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "xbdctl: cannot reach xbd-back at %s: %s (is it running? "
			"--socket names another)\n", path, strerror(errno));
		goto out;
	}
	/* A daemon never takes long; a wedged one must not hang a script. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (send(fd, req, reqlen, MSG_NOSIGNAL) != (ssize_t)reqlen) {
		fprintf(stderr, "xbdctl: cannot send to %s: %s\n", path, strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t n;

		if (rsplen + 4096 + 1 > cap) {
			char *nb = realloc(rsp, cap = cap * 2 + 8192);

			if (!nb)
				goto out;
			rsp = nb;
		}
		n = read(fd, rsp + rsplen, cap - rsplen - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "xbdctl: no answer from %s: %s\n", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		rsplen += n;
	}
	if (!rsp || !rsplen) {
		fprintf(stderr, "xbdctl: %s closed the connection without an answer\n", path);
		goto out;
	}
	rsp[rsplen] = '\0';
	nl = strchr(rsp, '\n');
	if (!nl) {
		fprintf(stderr, "xbdctl: garbled answer from %s\n", path);
		goto out;
	}
	*nl = '\0';
	if (!strcmp(rsp, XBD_CTL_OK)) {
		*body = strdup(nl + 1);
		rc = *body ? 0 : 1;
	} else if (!strncmp(rsp, XBD_CTL_ERROR, strlen(XBD_CTL_ERROR))) {
		fprintf(stderr, "xbdctl: %s\n", rsp + strlen(XBD_CTL_ERROR));
	} else {
		fprintf(stderr, "xbdctl: garbled answer from %s\n", path);
	}
out:
	if (fd >= 0)
		close(fd);
	free(rsp);
	return rc;
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

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "format", required_argument, NULL, 'f' },
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	char *path = NULL, *req = NULL, *body = NULL;
	const char *format = NULL, *cmd, *sel = NULL;
	size_t reqlen = 0;
	double interval = 0;
	long count = 0;
	unsigned int nwords = 0;
	FILE *f;
	int c, i, rc = 2;

	while ((c = getopt_long(argc, argv, "+s:jf:i:c:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			free(path);
			path = strdup(optarg);
			break;
		case 'j':
			format = XBD_CTL_FORMAT_JSON;
			break;
		case 'f':
			format = optarg;
			break;
		case 'i':
			if (parse_interval(optarg, &interval))
				goto out;
			break;
		case 'c':
			if (parse_count(optarg, &count))
				goto out;
			break;
		case 'h':
			usage(stdout);
			rc = 0;
			goto out;
		case 'V':
			/* This program's; the command version asks the daemon for its own. */
			printf("xbdctl %s\n", PACKAGE_VERSION);
			rc = 0;
			goto out;
		default:
			usage(stderr);
			goto out;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		goto out;
	}
	cmd = argv[optind];
	if (strcmp(cmd, XBD_CTL_LIST) && strcmp(cmd, XBD_CTL_STATS) && strcmp(cmd, XBD_CTL_SET) &&
	    strcmp(cmd, XBD_CTL_VERSION)) {
		fprintf(stderr, "xbdctl: unknown command '%s' (" XBD_CTL_COMMANDS ")\n", cmd);
		goto out;
	}
	/* One line of tab-separated words; the options may also follow the command. */
	f = open_memstream(&req, &reqlen);
	if (!f) {
		rc = 1;
		goto out;
	}
	fputs(cmd, f);
	for (i = optind + 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--json") || !strcmp(a, "-j")) {
			format = XBD_CTL_FORMAT_JSON;
			continue;
		}
		if ((!strcmp(a, "--format") || !strcmp(a, "-f") || !strcmp(a, "--interval") ||
		     !strcmp(a, "-i") || !strcmp(a, "--count") || !strcmp(a, "-c")) && i + 1 >= argc) {
			fprintf(stderr, "xbdctl: %s needs a value\n", a);
			fclose(f);
			goto out;
		}
		if (!strcmp(a, "--format") || !strcmp(a, "-f")) {
			format = argv[++i];
			continue;
		}
		if (!strncmp(a, "--format=", 9)) {
			format = a + 9;
			continue;
		}
		if (!strcmp(a, "--interval") || !strcmp(a, "-i") || !strncmp(a, "--interval=", 11)) {
			if (parse_interval(a[1] == '-' && a[10] == '=' ? a + 11 : argv[++i], &interval)) {
				fclose(f);
				goto out;
			}
			continue;
		}
		if (!strcmp(a, "--count") || !strcmp(a, "-c") || !strncmp(a, "--count=", 8)) {
			if (parse_count(a[1] == '-' && a[7] == '=' ? a + 8 : argv[++i], &count)) {
				fclose(f);
				goto out;
			}
			continue;
		}
		if (!strcmp(a, "--by") && i + 1 < argc && !strpbrk(argv[i + 1], "\t\n")) {
			fprintf(f, XBD_CTL_SEP XBD_CTL_BY XBD_CTL_SEP "%s", argv[++i]);
			continue;
		}
		if (strpbrk(a, "\t\n")) {
			fprintf(stderr, "xbdctl: argument '%s' holds a tab or newline\n", a);
			fclose(f);
			goto out;
		}
		fprintf(f, XBD_CTL_SEP "%s", a);
		sel = a;
		nwords++;
	}
	if (format) {
		/* A usage error (2) here, not the daemon's refusal (1). */
		if (strcmp(format, XBD_CTL_FORMAT_TABLE) && strcmp(format, XBD_CTL_FORMAT_JSON) &&
		    strcmp(format, XBD_CTL_FORMAT_PROMETHEUS)) {
			fprintf(stderr, "xbdctl: unknown format '%s' (" XBD_CTL_FORMATS ")\n",
				format);
			fclose(f);
			goto out;
		}
		if (!strcmp(format, XBD_CTL_FORMAT_PROMETHEUS) && strcmp(cmd, XBD_CTL_STATS)) {
			fprintf(stderr, "xbdctl: --format prometheus is for stats\n");
			fclose(f);
			goto out;
		}
		fprintf(f, XBD_CTL_SEP XBD_CTL_FORMAT XBD_CTL_SEP "%s", format);
	}
	fputc('\n', f);
	fclose(f);
	if ((interval || count) && strcmp(cmd, XBD_CTL_STATS)) {
		fprintf(stderr, "xbdctl: --interval and --count are for stats\n");
		goto out;
	}
	if (count && !interval) {
		fprintf(stderr, "xbdctl: --count needs --interval\n");
		goto out;
	}
	if (interval && format && strcmp(format, XBD_CTL_FORMAT_TABLE)) {
		fprintf(stderr, "xbdctl: the live view (--interval) is a table; --format %s "
			"prints one sample\n", format);
		goto out;
	}
	if (interval && nwords > 1) {
		fprintf(stderr, "xbdctl: stats takes at most one DEVICE\n");
		goto out;
	}
	if (!path)
		path = default_socket();
	if (!path || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fprintf(stderr, "xbdctl: bad control socket path\n");
		goto out;
	}
	if (interval) {
		rc = xbdctl_view(path, nwords ? sel : NULL, interval, count);
		goto out;
	}
	rc = xbdctl_request(path, req, &body);
	if (!rc) {
		fputs(body, stdout);
		rc = fflush(stdout) ? 1 : 0;
	}
out:
	free(body);
	free(req);
	free(path);
	return rc;
}
