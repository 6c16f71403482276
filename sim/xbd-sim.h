/*
 * xbd-sim.h: what the files of the `xbd-sim` command share: the simulated
 * host it acts on, argument parsing, error reporting and the xenstore
 * connection as dom0.  Not a library interface.
 */
#ifndef XBD_SIM_CMD_H
#define XBD_SIM_CMD_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "xenstore/xenbus.h"

/* Exit codes: 2 for bad usage, 1 for an operation that failed. */
#define SIM_EXIT_FAIL 1
#define SIM_EXIT_USAGE 2

struct sim_host {
	char dir[PATH_MAX];        /* absolute */
	char xsdir[PATH_MAX];      /* dir/xenstore */
	char socket[PATH_MAX];     /* dir/xenstore/socket (dom0's) */
	char pidfile[PATH_MAX];    /* dir/xenstore/xenstored.pid */
	char rundir[PATH_MAX];     /* dir/run: the host's /run, which stop empties as a reboot would */
	struct xbd_xs *xs;         /* connection as dom0, once sim_connect() succeeded */
};

/* Print "xbd-sim: MSG" and exit with code. */
_Noreturn void sim_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "xbd-sim: MSG" (no exit). */
void sim_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Fill h's paths from DIR (made absolute); exits 2 on an unusable DIR. */
void sim_host_paths(struct sim_host *h, const char *dir);
/* Connect to the host's xenstore as dom0; exits 1 when no host runs there. */
void sim_connect(struct sim_host *h);
/* The same, returning -errno instead of exiting (for stop, which goes on regardless). */
int sim_try_connect(struct sim_host *h);
void sim_disconnect(struct sim_host *h);

/* Strict decimal domid in [min, XBD_SIM_MAX_DOMID]; exits 2 naming what with a bad one. */
uint32_t sim_parse_domid(const char *what, const char *s, uint32_t min);
/* Strict decimal in [min, max]; exits 2 naming what with a bad one. */
uint64_t sim_parse_num(const char *what, const char *s, uint64_t min, uint64_t max);

/* Domains with a xenstore home that the hypervisor knows, ascending; *ids is malloc'd. */
int sim_list_domains(struct sim_host *h, uint32_t **ids, unsigned int *count);

/* Remove a xenstore node and then each parent left empty (libxl__xs_path_cleanup). */
int sim_path_cleanup(struct xbd_xs *xs, xs_transaction_t t, const char *path);

/* Subcommands: argc/argv start at the subcommand word. Return the exit code. */
int sim_cmd_domain(int argc, char **argv);
int sim_cmd_disk(int argc, char **argv);
/* Destroy one domain (used by `domain destroy` and `stop`); 0 or exit-worthy -errno. */
int sim_domain_destroy(struct sim_host *h, uint32_t domid);

/*
 * Turn a virtual device name (xvdb, xvdb1, sda, hdc, d1p2, or a plain
 * number) into its devid the way libxl does.  -EINVAL if not one.
 */
int sim_vdev_to_devid(const char *vdev, uint32_t *devid);

#endif /* XBD_SIM_CMD_H */
