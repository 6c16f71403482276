/*
 * device-options.c: the frontend's device options (device-options.h): the table both
 * xbd-front and the nbdkit plugin parse through, and the setters.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkfront/device-options.h"

const struct xbdf_option xbdf_options[] = {
	{ XBDF_OPT_VDEV, "vdev", XBDF_KIND_STRING, 0, 0, "NAME",
	  "xvdb, or a device number (51728)", NULL, false },
	{ XBDF_OPT_DEVID, "devid", XBDF_KIND_NUMBER, 1, 0x7fffffff, "N",
	  "the device number (device/vbd/N)", NULL, false },
	{ XBDF_OPT_PLATFORM, "platform", XBDF_KIND_CHOICE, 0, 0, "P",
	  "auto (default), xen or sim", "auto, xen or sim", false },
	{ XBDF_OPT_QUEUES, "queues", XBDF_KIND_NUMBER, 1, 16, "N",
	  "at most N queues (default: min(backend, CPUs, 4))", NULL, false },
	{ XBDF_OPT_RING_ORDER, "ring-order", XBDF_KIND_NUMBER, 0, XBD_RING_MAX_ORDER, "N",
	  "at most 2^N ring pages (default: the backend's maximum)", NULL, false },
	{ XBDF_OPT_PERSISTENT, "persistent", XBDF_KIND_NUMBER, 0, 1, "0|1",
	  "persistent grants if offered (default 1)", NULL, false },
	{ XBDF_OPT_INDIRECT, "indirect", XBDF_KIND_NUMBER, 0, XBD_MAX_INDIRECT_SEGS, "N",
	  "at most N indirect segments (0: none; default 32)", NULL, false },
	{ XBDF_OPT_PROTOCOL, "protocol", XBDF_KIND_CHOICE, 0, 0, "ABI",
	  "x86_32-abi or x86_64-abi (default: native)", "x86_32-abi, x86_64-abi or native",
	  false },
	{ XBDF_OPT_TIMEOUT, "timeout", XBDF_KIND_NUMBER, 1, 3600, "S",
	  "backend handshake timeout (default 10)", NULL, false },
	/* two of the largest direct requests at least, so one can always be built */
	{ XBDF_OPT_MAX_GRANTS, "max-grants", XBDF_KIND_NUMBER,
	  2 * BLKIF_MAX_SEGMENTS_PER_REQUEST, 1 << 20, "N",
	  "data pages granted at once (default 768; gntalloc allows 1024)", NULL, false },
	{ XBDF_OPT_NO_RECONNECT, "no-reconnect", XBDF_KIND_FLAG, 0, 0, NULL,
	  "give up when the backend closes or restarts", NULL, true },
	{ XBDF_OPT_FORCE, "force", XBDF_KIND_FLAG, 0, 0, NULL,
	  "attach even if another frontend holds the vbd (after a crash)", NULL, false },
};

const size_t xbdf_nr_options = sizeof(xbdf_options) / sizeof(xbdf_options[0]);

const struct xbdf_option *xbdf_option_find(const char *name)
{
	for (size_t i = 0; i < xbdf_nr_options; i++)
		if (!strcmp(xbdf_options[i].name, name))
			return &xbdf_options[i];
	return NULL;
}

static int parse_number(const struct xbdf_option *o, const char *s, long *out, char *why,
			size_t why_len)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || end == s || *end || v < o->min || v > o->max) {
		snprintf(why, why_len, "bad value '%s' (%ld..%ld)", s, o->min, o->max);
		return -1;
	}
	*out = v;
	return 0;
}

int xbdf_option_set(const struct xbdf_option *o, const char *value,
		    struct xbd_front_opts *opts, char *why, size_t why_len)
{
	long n = 0;
	int rc = 0;

	if (o->kind == XBDF_KIND_NUMBER && parse_number(o, value, &n, why, why_len) < 0)
		return -1;
	switch (o->id) {
	case XBDF_OPT_VDEV:
		opts->vdev = value;
		break;
	case XBDF_OPT_DEVID:
		opts->devid = (uint32_t)n;
		break;
	case XBDF_OPT_PLATFORM:
		rc = xbd_platform_kind_from_string(value, &opts->platform);
		break;
	case XBDF_OPT_QUEUES:
		opts->max_queues = (unsigned int)n;
		break;
	case XBDF_OPT_RING_ORDER:
		opts->ring_order = (int)n;
		break;
	case XBDF_OPT_PERSISTENT:
		opts->persistent = (int)n;
		break;
	case XBDF_OPT_INDIRECT:
		opts->indirect_segs = (int)n;
		break;
	case XBDF_OPT_PROTOCOL:
		rc = xbd_abi_from_protocol(value, &opts->abi);
		break;
	case XBDF_OPT_TIMEOUT:
		opts->timeout_ms = (int)n * 1000;
		break;
	case XBDF_OPT_MAX_GRANTS:
		opts->max_grants = (unsigned int)n;
		break;
	case XBDF_OPT_NO_RECONNECT:
	case XBDF_OPT_FORCE:
		xbdf_option_set_flag(o, true, opts);
		break;
	}
	if (rc < 0) {
		snprintf(why, why_len, "%s", o->allowed);
		return -1;
	}
	return 0;
}

void xbdf_option_set_flag(const struct xbdf_option *o, bool on, struct xbd_front_opts *opts)
{
	if (o->id == XBDF_OPT_NO_RECONNECT)
		opts->reconnect = !on;
	else if (o->id == XBDF_OPT_FORCE)
		opts->force = on;
}
