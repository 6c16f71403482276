/*
 * device-options.h: the frontend's device options, named once for both programs
 * that take them: xbd-front spells them `--queues 4`, the nbdkit plugin
 * `queues=4`.  Each option's name, kind, range and help text is one row of
 * xbdf_options[]; both programs look names up and set values through it,
 * so an option, its range and its error message cannot drift apart
 * (tests/blkfront/options.sh feeds both programs every row).
 */
#ifndef XBD_FRONT_OPTIONS_H
#define XBD_FRONT_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "blkfront/xbdfront.h"

enum xbdf_option_id {
	XBDF_OPT_VDEV,
	XBDF_OPT_DEVID,
	XBDF_OPT_PLATFORM,
	XBDF_OPT_QUEUES,
	XBDF_OPT_RING_ORDER,
	XBDF_OPT_PERSISTENT,
	XBDF_OPT_INDIRECT,
	XBDF_OPT_PROTOCOL,
	XBDF_OPT_TIMEOUT,
	XBDF_OPT_MAX_GRANTS,
	XBDF_OPT_NO_RECONNECT,
	XBDF_OPT_FORCE,
};

enum xbdf_option_kind {
	XBDF_KIND_STRING, /* any text (vdev) */
	XBDF_KIND_NUMBER, /* an integer from min to max (strtol base 0) */
	XBDF_KIND_CHOICE, /* one of the words `help_values` lists */
	XBDF_KIND_FLAG,   /* on or off: `--force`; the plugin's force=BOOL */
};

struct xbdf_option {
	enum xbdf_option_id id;
	const char *name;          /* "ring-order": --ring-order, ring-order= */
	enum xbdf_option_kind kind;
	long min, max;             /* XBDF_KIND_NUMBER */
	const char *meta;          /* the value in help: "N", "0|1", "ABI" */
	const char *help;          /* one line, with the default */
	/* CHOICE: what a bad value is told is allowed */
	const char *allowed;
	/*
	 * xbd-front only, not a plugin key: --no-reconnect (the plugin always
	 * follows a restarting backend: nbdkit serves for as long as it runs).
	 */
	bool cli_only;
};

extern const struct xbdf_option xbdf_options[];
extern const size_t xbdf_nr_options;

/* The row named name (without "--"), or NULL. */
const struct xbdf_option *xbdf_option_find(const char *name);

/*
 * Set a STRING, NUMBER or CHOICE option from its value.  value is stored
 * as is for STRING (it must outlive opts).  Returns 0, or -1 with why
 * holding what was wrong and what is allowed ("bad value 'x' (1..16)").
 */
int xbdf_option_set(const struct xbdf_option *o, const char *value,
		    struct xbd_front_opts *opts, char *why, size_t why_len);

/* Turn a FLAG option on or off. */
void xbdf_option_set_flag(const struct xbdf_option *o, bool on, struct xbd_front_opts *opts);

#endif /* XBD_FRONT_OPTIONS_H */
