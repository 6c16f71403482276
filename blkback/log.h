/*
 * log.h: xbd-back's log lines, one per event:
 *     xbd-back: vbd <domid>/<devid>: <what>
 * to stderr (prefixed with the sd-daemon(3) "<N>" priority when stderr is
 * the systemd journal, which stores the priority and strips the prefix)
 * or to syslog, with a verbosity level, and a per-device rate limit for
 * lines a hostile frontend could otherwise make us print in a loop.
 */
#ifndef XBD_BACK_LOG_H
#define XBD_BACK_LOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

enum { XBD_LOG_ERR = -1, XBD_LOG_INFO = 0, XBD_LOG_VERBOSE = 1, XBD_LOG_DEBUG = 2 };

/* May change while ring threads log (SIGHUP re-reads the configuration). */
void xbd_log_set_level(int level);
/*
 * Where lines go: to_syslog false = stderr (journal-aware), true = syslog.
 * Call before any thread exists.
 */
void xbd_log_set_syslog(bool to_syslog);
int xbd_log_level(void);

void xbd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Allows XBD_LOG_BURST lines per XBD_LOG_WINDOW seconds; the first line
 * after a quiet window says how many were suppressed.
 */
#define XBD_LOG_BURST 10
#define XBD_LOG_WINDOW 5
struct xbd_ratelimit {
	pthread_mutex_t lock;
	time_t window_start;
	unsigned int printed;
	uint64_t suppressed;
	const char *who;         /* the device, named in the "suppressed" line */
};

void xbd_ratelimit_init(struct xbd_ratelimit *rl);
void xbd_ratelimit_destroy(struct xbd_ratelimit *rl);
/* Like xbd_log at XBD_LOG_INFO, subject to rl. */
void xbd_log_limited(struct xbd_ratelimit *rl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* XBD_BACK_LOG_H */
