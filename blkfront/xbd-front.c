/*
 * xbd-front.c: the xbd-front command: attach to a vbd from userspace and
 * `info` (print what the backend offers), `bench` (load generator) or
 * `check` (conformance run).  Device options are shared (cli.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkfront/cli.h"

static int cmd_info(int argc, char **argv)
{
	struct xbd_front_opts opts;
	struct xbd_front_info in;
	struct xbd_front *f;
	int i, rc;

	xbd_front_opts_init(&opts);
	for (i = 1; i < argc; i++) {
		rc = cli_device_option(argc, argv, &i, &opts);
		if (rc < 0)
			return 2;
		if (rc == 0) {
			fprintf(stderr, "xbd-front info: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	rc = xbd_front_open(&opts, &f);
	if (rc < 0) {
		cli_open_failed(&opts, rc);
		return 1;
	}
	xbd_front_info(f, &in);
	cli_print_info(stdout, &in);
	xbd_front_close(f);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: xbd-front info  [device options]\n"
		"       xbd-front bench [device options] [bench options]\n"
		"       xbd-front check [device options] [--no-reopen]\n"
		"       xbd-front --help | --version\n"
		"Attaches to a vbd the toolstack wrote (device/vbd/N) as this domain.\n"
		"Run `xbd-front bench --help` for the bench options.\n");
	cli_device_usage(out);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("xbd-front %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "info"))
		return cmd_info(argc - 1, argv + 1);
	if (!strcmp(argv[1], "bench"))
		return cmd_bench(argc - 1, argv + 1);
	if (!strcmp(argv[1], "check"))
		return cmd_check(argc - 1, argv + 1);
	fprintf(stderr, "xbd-front: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
