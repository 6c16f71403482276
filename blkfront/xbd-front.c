/*
 * xbd-front.c: the xbd-front command: attach to a vbd from userspace and
 * `info` (print what the backend offers), `bench` (load generator) or
 * `check` (conformance run).  Device options are shared (cli.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkfront/cli.h"

static char devname_buf[64];

const char *cli_devname(const struct xbd_front_opts *opts)
{
	if (opts->devid)
		snprintf(devname_buf, sizeof(devname_buf), "vbd %u", opts->devid);
	else
		snprintf(devname_buf, sizeof(devname_buf), "vbd %s", opts->vdev ? opts->vdev : "?");
	return devname_buf;
}

static int parse_int(const char *opt, const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || v < min || v > max) {
		fprintf(stderr, "xbd-front: %s: bad value '%s' (%ld..%ld)\n", opt, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_device_option(int argc, char **argv, int *i, struct xbd_front_opts *opts)
{
	const char *o = argv[*i];
	const char *v;
	long n;

	if (strcmp(o, "--vdev") && strcmp(o, "--devid") && strcmp(o, "--platform") &&
	    strcmp(o, "--queues") && strcmp(o, "--ring-order") && strcmp(o, "--persistent") &&
	    strcmp(o, "--indirect") && strcmp(o, "--protocol") && strcmp(o, "--timeout") &&
	    strcmp(o, "--no-reconnect") && strcmp(o, "--max-grants") && strcmp(o, "--force"))
		return 0;
	if (!strcmp(o, "--no-reconnect")) {
		opts->reconnect = false;
		return 1;
	}
	if (!strcmp(o, "--force")) {
		opts->force = true;
		return 1;
	}
	if (*i + 1 >= argc) {
		fprintf(stderr, "xbd-front: %s needs a value\n", o);
		return -1;
	}
	v = argv[++*i];
	if (!strcmp(o, "--vdev")) {
		opts->vdev = v;
	} else if (!strcmp(o, "--devid")) {
		if (parse_int(o, v, 1, 0x7fffffff, &n) < 0)
			return -1;
		opts->devid = (uint32_t)n;
	} else if (!strcmp(o, "--platform")) {
		if (xbd_platform_kind_from_string(v, &opts->platform) < 0) {
			fprintf(stderr, "xbd-front: --platform: auto, xen or sim\n");
			return -1;
		}
	} else if (!strcmp(o, "--queues")) {
		if (parse_int(o, v, 1, 16, &n) < 0)
			return -1;
		opts->max_queues = (unsigned int)n;
	} else if (!strcmp(o, "--ring-order")) {
		if (parse_int(o, v, 0, XBD_RING_MAX_ORDER, &n) < 0)
			return -1;
		opts->ring_order = (int)n;
	} else if (!strcmp(o, "--persistent")) {
		if (parse_int(o, v, 0, 1, &n) < 0)
			return -1;
		opts->persistent = (int)n;
	} else if (!strcmp(o, "--indirect")) {
		if (parse_int(o, v, 0, XBD_MAX_INDIRECT_SEGS, &n) < 0)
			return -1;
		opts->indirect_segs = (int)n;
	} else if (!strcmp(o, "--protocol")) {
		if (xbd_abi_from_protocol(v, &opts->abi) < 0) {
			fprintf(stderr, "xbd-front: --protocol: x86_32-abi, x86_64-abi or native\n");
			return -1;
		}
	} else if (!strcmp(o, "--max-grants")) {
		if (parse_int(o, v, 2 * BLKIF_MAX_SEGMENTS_PER_REQUEST, 1 << 20, &n) < 0)
			return -1;
		opts->max_grants = (unsigned int)n;
	} else if (!strcmp(o, "--timeout")) {
		if (parse_int(o, v, 1, 3600, &n) < 0)
			return -1;
		opts->timeout_ms = (int)n * 1000;
	}
	return 1;
}

void cli_device_usage(FILE *out)
{
	fprintf(out,
		"device options:\n"
		"  --vdev NAME          xvdb, or a device number (51728)\n"
		"  --devid N            the device number (device/vbd/N)\n"
		"  --platform P         auto (default), xen or sim\n"
		"  --queues N           at most N queues (default: min(backend, CPUs, 4))\n"
		"  --ring-order N       at most 2^N ring pages (default: the backend's maximum)\n"
		"  --persistent 0|1     persistent grants if offered (default 1)\n"
		"  --indirect N         at most N indirect segments (0: none; default 32)\n"
		"  --protocol ABI       x86_32-abi or x86_64-abi (default: native)\n"
		"  --timeout S          backend handshake timeout (default 10)\n"
		"  --max-grants N       data pages granted at once (default 768; gntalloc allows 1024)\n"
		"  --no-reconnect       give up when the backend closes or restarts\n"
		"  --force              attach even if another frontend holds the vbd (after a crash)\n");
}

void cli_open_failed(const struct xbd_front_opts *opts, int rc)
{
	const char *hint = "";

	switch (-rc) {
	case ENOENT:
		hint = " (no such vbd for this domain, or no simulated host at XBD_SIM_DIR)";
		break;
	case ENODEV:
		hint = " (no platform: set XBD_SIM_DIR or run on Xen)";
		break;
	case ETIMEDOUT:
		hint = " (the backend did not reach the next state in time: is it running?)";
		break;
	case ECONNREFUSED:
		hint = " (the backend closed instead of connecting)";
		break;
	case EBUSY:
		hint = " (another frontend is attached to this vbd; --force takes over)";
		break;
	}
	fprintf(stderr, "xbd-front: %s: cannot attach: %s%s\n", cli_devname(opts), strerror(-rc), hint);
}

void cli_print_info(FILE *out, const struct xbd_front_info *in)
{
	fprintf(out, "backend: %s (domain %u)\n", in->backend_path, in->backend_domid);
	fprintf(out, "sectors: %llu (%llu bytes)\n", (unsigned long long)in->sectors,
		(unsigned long long)in->size);
	fprintf(out, "sector-size: %u physical-sector-size: %u\n", in->sector_size,
		in->physical_sector_size);
	fprintf(out, "readonly: %d cdrom: %d\n", in->readonly, in->cdrom);
	fprintf(out, "flush: %s\n", in->flush ? "flush-cache" : in->barrier ? "barrier" : "none");
	fprintf(out, "discard: %d secure: %d granularity: %u alignment: %u\n", in->discard,
		in->discard_secure, in->discard_granularity, in->discard_alignment);
	fprintf(out, "persistent: %d indirect-segments: %u max-segments: %u\n", in->persistent,
		in->indirect_segs, in->max_segs);
	fprintf(out, "queues: %u ring-page-order: %u ring-entries: %u protocol: %s\n",
		in->nr_queues, in->ring_order, in->ring_entries, xbd_abi_protocol(in->abi));
}

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
