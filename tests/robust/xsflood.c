/*
 * xsflood.c: a hostile guest that attacks the backend through xenstore
 * alone, with writes to its own frontend directory and no ring at all.
 * It acts as a domU (XBD_SIM_DOMID), writes as fast as xenstored answers
 * for SECS seconds, and prints how many writes it made.
 *
 *   xsflood [--dev DEVID] [--secs S] MODE
 *
 *   flap     rewrite its frontend state Closed, Initialising, Closed ...:
 *            every Closed -> Initialising turn asks the backend to offer
 *            the device again (features re-advertised, InitWait written)
 *   subtree  rewrite a node with a long name below its state node: a
 *            watch on state fires for it each time
 *   connect  rewrite state Initialised with no ring behind it: every turn
 *            asks the backend to connect, and the connect fails
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "platform/platform.h"
#include "xenstore/xenbus.h"

#define die(...) do { fprintf(stderr, "xsflood: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

/*
 * One long node name: XENSTORE_REL_PATH_MAX (2048) less the directory and
 * a margin.  One, rewritten: xenstored counts the names of a node's
 * children in its size (2048 at most), so two such names would not fit.
 */
#define LONG_NAME 1900

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, NULL, 'd' },
		{ "secs", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	char fdir[XBD_XS_PATH_MAX], state[XBD_XS_PATH_MAX], *name;
	struct xbd_platform *p;
	struct xbd_xs *xs;
	uint32_t devid = 51728;
	double secs = 5, end;
	uint64_t writes = 0;
	const char *mode;
	int c, err;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': devid = strtoul(optarg, NULL, 0); break;
		case 's': secs = atof(optarg); break;
		default: die("bad option");
		}
	}
	if (optind != argc - 1)
		die("usage: xsflood [--dev DEVID] [--secs S] flap|subtree|connect");
	mode = argv[optind];
	if (strcmp(mode, "flap") && strcmp(mode, "subtree") && strcmp(mode, "connect"))
		die("unknown mode %s", mode);
	if ((err = xbd_platform_open(XBD_PLATFORM_AUTO, &p)) || (err = xbd_xs_open(&xs)))
		die("cannot open the platform: %s", strerror(-err));
	xbd_xs_pathf(fdir, sizeof(fdir), "/local/domain/%u/device/vbd/%u",
		     xbd_platform_domid(p), devid);
	xbd_xs_join(state, sizeof(state), fdir, "state");
	{
		size_t dl = strlen(state) + 1;

		name = malloc(dl + LONG_NAME + 1);
		if (!name)
			die("out of memory");
		memcpy(name, state, dl - 1);
		name[dl - 1] = '/';
		memset(name + dl, 'a', LONG_NAME);
		name[dl + LONG_NAME] = '\0';
	}
	end = now_s() + secs;
	while (now_s() < end) {
		/* A batch between clock reads: the writes are what costs. */
		for (c = 0; c < 64; c++, writes++) {
			if (!strcmp(mode, "flap"))
				err = xbd_xs_write_str(xs, XBT_NULL, state, writes & 1 ? "1" : "6");
			else if (!strcmp(mode, "subtree"))
				err = xbd_xs_write_str(xs, XBT_NULL, name, writes & 1 ? "x" : "y");
			else
				err = xbd_xs_write_str(xs, XBT_NULL, state, writes & 1 ? "3" : "1");
			if (err)
				die("write %" PRIu64 " failed: %s", writes, strerror(-err));
		}
	}
	/* Leave the device as a frontend that stopped would: Closed. */
	xbd_xs_write_str(xs, XBT_NULL, state, "6");
	printf("xsflood: %s: %" PRIu64 " writes in %.1f s\n", mode, writes, secs);
	xbd_xs_close(xs);
	xbd_platform_close(p);
	free(name);
	return 0;
}
