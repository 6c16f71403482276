/*
 * xsflood.c: a hostile guest that attacks the backend through xenstore
 * alone, with writes to its own frontend directory and no ring at all.
 * It acts as a domU (XBD_SIM_DOMID; tests/lib/testfront.c opens the
 * platform and finds the vbd), writes as fast as xenstored answers for
 * SECS seconds, or until SIGTERM, in one of the modes of the table below
 * (xsflood --help lists them), and prints how many writes it made.
 *
 *   xsflood [--dev DEVID] [--secs S] MODE
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "tests/lib/testfront.h"

/*
 * One long node name: XENSTORE_REL_PATH_MAX (2048) less the directory and
 * a margin.  One, rewritten: xenstored counts the names of a node's
 * children in its size (2048 at most), so two such names would not fit.
 */
#define LONG_NAME 1900

/* A mode rewrites one node with two values in turn, as fast as it can. */
static const struct mode {
	const char *name;
	bool below_state; /* the long node below state, not state itself */
	const char *value[2];
	const char *help;
} modes[] = {
	{ "flap", false, { "6", "1" },
	  "rewrite its frontend state Closed, Initialising, Closed ...: every Closed -> "
	  "Initialising turn asks the backend to offer the device again (features "
	  "re-advertised, InitWait written)" },
	{ "subtree", true, { "y", "x" },
	  "rewrite a node with a long name below its state node: a watch on state fires "
	  "for it each time" },
	{ "connect", false, { "1", "3" },
	  "rewrite state Initialised with no ring behind it: every turn asks the backend "
	  "to connect, and the connect fails" },
	{ NULL },
};

/* SIGTERM: stop writing, leave the device Closed and say what was done. */
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *out)
{
	const struct mode *m;

	fprintf(out, "usage: xsflood [options] MODE\n"
		     "options:\n"
		     "  --dev DEVID           the vbd (51728, xvdb)\n"
		     "  --secs S              how long to write at most (5; SIGTERM stops it)\n"
		     "modes:\n");
	for (m = modes; m->name; m++)
		tf_usage_item(out, m->name, m->help);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, NULL, 'd' },
		{ "secs", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char state[XBD_XS_PATH_MAX], *name;
	const struct mode *m;
	const char *node;
	static struct tf f;
	struct sigaction sa = { .sa_handler = on_term, .sa_flags = SA_RESTART };
	double secs = 5, start, end;
	uint64_t writes = 0;
	int c, err;

	tf_prog = "xsflood";
	tf_init(&f, NULL, 0);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': f.devid = strtoul(optarg, NULL, 0); break;
		case 's': secs = atof(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 1;
	}
	for (m = modes; m->name && strcmp(m->name, argv[optind]); m++)
		;
	if (!m->name)
		tf_die("unknown mode %s (xsflood --help lists them)", argv[optind]);
	tf_open(&f);
	xbd_xs_join(state, sizeof(state), f.fdir, "state");
	{
		size_t dl = strlen(state) + 1;

		name = malloc(dl + LONG_NAME + 1);
		if (!name)
			tf_die("out of memory");
		memcpy(name, state, dl - 1);
		name[dl - 1] = '/';
		memset(name + dl, 'a', LONG_NAME);
		name[dl + LONG_NAME] = '\0';
	}
	node = m->below_state ? name : state;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	start = xbd_mono_s();
	end = start + secs;
	while (!stop && xbd_mono_s() < end) {
		/* A batch between clock reads: the writes are what costs. */
		for (c = 0; c < 64; c++, writes++) {
			err = xbd_xs_write_str(f.xs, XBT_NULL, node, m->value[writes & 1]);
			if (err)
				tf_die("write %" PRIu64 " failed: %s", writes, strerror(-err));
		}
	}
	/* Leave the device as a frontend that stopped would: Closed. */
	xbd_xs_write_str(f.xs, XBT_NULL, state, "6");
	printf("xsflood: %s: %" PRIu64 " writes in %.1f s\n", m->name, writes, xbd_mono_s() - start);
	free(name);
	return 0;
}
