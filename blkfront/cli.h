/*
 * cli.h: what the xbd-front subcommands share: the device options every
 * subcommand takes (cli.c), and the entry points of bench.c and check.c.
 */
#ifndef XBD_FRONT_CLI_H
#define XBD_FRONT_CLI_H

#include <stdio.h>

#include "blkfront/xbdfront.h"

/*
 * Parse a device option (a row of device-options.h's table, as --name VALUE) at
 * argv[*i] into opts.  Returns 1 when consumed (and advances *i past its
 * value), 0 when not a device option, -1 (after printing why) on a bad
 * value.
 */
int cli_device_option(int argc, char **argv, int *i, struct xbd_front_opts *opts);
/* Help text for the device options (from the same table). */
void cli_device_usage(FILE *out);
/* "vbd 3/51728" style name for messages. */
const char *cli_devname(const struct xbd_front_opts *opts);
/* One line on stderr: the device, why it could not be attached, and a hint. */
void cli_open_failed(const struct xbd_front_opts *opts, int rc);
/* Print the info block (text). */
void cli_print_info(FILE *out, const struct xbd_front_info *in);

int cmd_bench(int argc, char **argv);
int cmd_check(int argc, char **argv);

#endif /* XBD_FRONT_CLI_H */
