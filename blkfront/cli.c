/*
 * cli.c: what the xbd-front subcommands share (cli.h): the device options
 * as command-line options, the device's name in messages, the line that
 * says why a device could not be attached, and the info block.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "blkfront/cli.h"
#include "blkfront/device-options.h"

static char devname_buf[64];

const char *cli_devname(const struct xbd_front_opts *opts)
{
	if (opts->devid)
		snprintf(devname_buf, sizeof(devname_buf), "vbd %u", opts->devid);
	else
		snprintf(devname_buf, sizeof(devname_buf), "vbd %s", opts->vdev ? opts->vdev : "?");
	return devname_buf;
}

/*
 * The options are device-options.c's table: a row `name` is `--name VALUE` here
 * (a flag takes no value) and `name=VALUE` to the nbdkit plugin.
 */
int cli_device_option(int argc, char **argv, int *i, struct xbd_front_opts *opts)
{
	const char *o = argv[*i];
	const struct xbdf_option *opt;
	char why[160];

	if (strncmp(o, "--", 2) || !(opt = xbdf_option_find(o + 2)))
		return 0;
	if (opt->kind == XBDF_KIND_FLAG) {
		xbdf_option_set_flag(opt, true, opts);
		return 1;
	}
	if (*i + 1 >= argc) {
		fprintf(stderr, "xbd-front: %s needs a value\n", o);
		return -1;
	}
	if (xbdf_option_set(opt, argv[++*i], opts, why, sizeof(why)) < 0) {
		fprintf(stderr, "xbd-front: %s: %s\n", o, why);
		return -1;
	}
	return 1;
}

void cli_device_usage(FILE *out)
{
	char arg[64];

	fprintf(out, "device options:\n");
	for (size_t i = 0; i < xbdf_nr_options; i++) {
		const struct xbdf_option *o = &xbdf_options[i];

		snprintf(arg, sizeof(arg), "--%s%s%s", o->name, o->meta ? " " : "",
			 o->meta ? o->meta : "");
		fprintf(out, "  %-20s %s\n", arg, o->help);
	}
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
