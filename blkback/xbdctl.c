/*
 * xbdctl.c: the administrator's window into a running xbd-back.  Sends
 * one request over the daemon's control socket (control.c) and prints the
 * answer: the devices (list), their counters (stats), or the result of
 * changing max-batch and polling at run time (set).
 *
 *   xbdctl [--socket PATH] [--json] list | stats [DEVICE] | set [DEVICE] KEY=VALUE... | version
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

#define DEFAULT_SOCKET "/run/xbd/xbd-back.sock"

static void usage(FILE *f)
{
	fprintf(f, "Usage: xbdctl [--socket PATH] [--json] COMMAND\n"
		"Talk to a running xbd-back.\n\n"
		"  list [DEVICE]                 the devices served, one per line\n"
		"  stats [DEVICE]                their counters (all devices without DEVICE)\n"
		"  set [DEVICE|all] KEY=VALUE... change max-batch, poll-max-ns, poll-grow or\n"
		"                                poll-shrink at run time (all devices and the\n"
		"                                defaults for new ones without DEVICE)\n"
		"  version                       the daemon's version\n\n"
		"DEVICE is TYPE/DOMID/DEVID (vbd/5/51712), DOMID/DEVID, or the disk's params.\n"
		"  -s, --socket PATH  the daemon's control socket (default: $XBD_CONTROL, the\n"
		"                     simulated host's when XBD_SIM_DIR is set, else %s)\n"
		"  -j, --json         JSON instead of a table (list and stats)\n"
		"  -h, --help         this text\n"
		"See xbdctl(8).\n", DEFAULT_SOCKET);
}

/* The same default as xbd-back's (main.c: control_path). */
static char *default_socket(void)
{
	const char *env = getenv("XBD_CONTROL"), *sim = getenv("XBD_SIM_DIR");
	const char *dom = getenv("XBD_SIM_DOMID");
	char *p = NULL;

	if (env && env[0])
		return strdup(env);
	if (sim && sim[0]) {
		if (asprintf(&p, "%s/xbd-back.%s.sock", sim, dom && dom[0] ? dom : "0") < 0)
			return NULL;
		return p;
	}
	return strdup(DEFAULT_SOCKET);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 10 };
	char *path = NULL, *req = NULL, *rsp = NULL, *nl;
	size_t reqlen = 0, rsplen = 0, cap = 0;
	bool json = false;
	FILE *f;
	int c, i, fd = -1, rc = 1;

	while ((c = getopt_long(argc, argv, "+s:jh", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			free(path);
			path = strdup(optarg);
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[optind], "list") && strcmp(argv[optind], "stats") &&
	    strcmp(argv[optind], "set") && strcmp(argv[optind], "version")) {
		fprintf(stderr, "xbdctl: unknown command '%s' (list, stats, set, version)\n",
			argv[optind]);
		return 2;
	}
	if (!path)
		path = default_socket();
	if (!path || strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "xbdctl: bad control socket path\n");
		return 2;
	}
	/* One line of tab-separated words; --json may also follow the command. */
	f = open_memstream(&req, &reqlen);
	if (!f)
		return 1;
	for (i = optind; i < argc; i++) {
		if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j")) {
			json = true;
			continue;
		}
		if (strpbrk(argv[i], "\t\n")) {
			fprintf(stderr, "xbdctl: argument '%s' holds a tab or newline\n", argv[i]);
			fclose(f);
			goto out;
		}
		fprintf(f, "%s%s", i > optind ? "\t" : "", argv[i]);
	}
	fprintf(f, "%s\n", json ? "\t--json" : "");
	fclose(f);

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
	if (!strcmp(rsp, "ok")) {
		fputs(nl + 1, stdout);
		rc = fflush(stdout) ? 1 : 0;
	} else if (!strncmp(rsp, "error: ", 7)) {
		fprintf(stderr, "xbdctl: %s\n", rsp + 7);
	} else {
		fprintf(stderr, "xbdctl: garbled answer from %s\n", path);
	}
out:
	if (fd >= 0)
		close(fd);
	free(rsp);
	free(req);
	free(path);
	return rc;
}
