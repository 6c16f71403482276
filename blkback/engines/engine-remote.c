/*
 * engine-remote.c: what the engines on storage behind a network (NBD,
 * RBD) share: their failed opens, remembered per target (engine-remote.h).
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/engines/engine-remote.h"
#include "blkback/log/log.h"
#include "common/clock.h"

#define OPEN_FAIL_SLOTS 8
static struct {
	char *target;
	uint64_t at_ns;
	int err;
} open_fail[OPEN_FAIL_SLOTS];
static unsigned int open_fail_next;
static pthread_mutex_t open_fail_lock = PTHREAD_MUTEX_INITIALIZER;

int xbd_open_failure_recent(const char *target, unsigned int ms)
{
	unsigned int i;
	int err = 0;

	pthread_mutex_lock(&open_fail_lock);
	for (i = 0; i < OPEN_FAIL_SLOTS && !err; i++)
		if (open_fail[i].target && !strcmp(open_fail[i].target, target) &&
		    xbd_mono_ns() - open_fail[i].at_ns < (uint64_t)ms * 1000000u)
			err = open_fail[i].err;
	pthread_mutex_unlock(&open_fail_lock);
	return err;
}

int xbd_open_failure_level(const char *target, int err)
{
	int level = XBD_LOG_ERR;
	unsigned int i;

	pthread_mutex_lock(&open_fail_lock);
	for (i = 0; i < OPEN_FAIL_SLOTS; i++) {
		/* The newest slot for target decides. */
		unsigned int k = (open_fail_next + OPEN_FAIL_SLOTS - 1 - i) % OPEN_FAIL_SLOTS;

		if (open_fail[k].target && !strcmp(open_fail[k].target, target)) {
			if (open_fail[k].err == err)
				level = XBD_LOG_DEBUG;
			break;
		}
	}
	pthread_mutex_unlock(&open_fail_lock);
	return level;
}

void xbd_open_failure_note(const char *target, int err)
{
	unsigned int i;

	pthread_mutex_lock(&open_fail_lock);
	i = open_fail_next++ % OPEN_FAIL_SLOTS;
	free(open_fail[i].target);
	open_fail[i].target = strdup(target);
	open_fail[i].at_ns = xbd_mono_ns();
	open_fail[i].err = err;
	pthread_mutex_unlock(&open_fail_lock);
}

