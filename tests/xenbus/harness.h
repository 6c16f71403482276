/*
 * harness.h: what the xenbus tests share: a simulated host started for
 * the test (exit 77 when xbd-sim or xbd-xenstored are not built yet),
 * connections acting as a given domain, and CHECK macros that name the
 * failing line.
 */
#ifndef XBD_TEST_XENBUS_HARNESS_H
#define XBD_TEST_XENBUS_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "xenstore/xenbus.h"

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			exit(1);                                                 \
		}                                                                \
	} while (0)

/* An int-returning call that must give exactly want (0 or -Exxx). */
#define CHECK_RET(call, want)                                                    \
	do {                                                                     \
		int _r = (call);                                                 \
		if (_r != (want)) {                                              \
			fprintf(stderr, "FAIL %s:%d: %s returned %d (%s), want %d\n", \
				__FILE__, __LINE__, #call, _r, strerror(_r < 0 ? -_r : _r), \
				(int)(want));                                    \
			exit(1);                                                 \
		}                                                                \
	} while (0)

/* Start a simulated host; dom0's XENSTORED_PATH is set; stopped at exit. */
void xt_start(void);
/* The host directory. */
const char *xt_dir(void);
/* Run `xbd-sim ARGS...` (ARGS after the subcommand's DIR are appended); returns its exit code. */
int xt_sim(const char *cmd, const char *args);
/* Like xt_sim, but returns the first line of its stdout as a number (exits on failure). */
unsigned long xt_sim_num(const char *cmd, const char *args);
/* A connection acting as domain domid (0 = dom0). */
struct xbd_xs *xt_open_as(uint32_t domid);
/* Dispatch watch events for up to ms milliseconds, or until *flag is true. */
void xt_pump(struct xbd_xs *xs, int ms, const volatile bool *flag);

#endif
