/*
 * log.h: xbd-back's log lines, one per event:
 *     xbd-back: vbd/<domid>/<devid>: <what>  (the spelling of xbdctl and Prometheus)
 * to stderr (prefixed with the sd-daemon(3) "<N>" priority when stderr is
 * the systemd journal, which stores the priority and strips the prefix)
 * or to syslog, with a verbosity level, and a per-device rate limit for
 * lines a hostile frontend could otherwise make us print in a loop.
 *
 * Severity means something: XBD_LOG_ERR for what failed and loses
 * service (a device closed, the daemon stopping), XBD_LOG_WARNING for
 * what failed or was refused and is survived (a bad request, a value we
 * ignore), XBD_LOG_INFO for the events an administrator follows.  Every
 * line a guest can cause goes through its device's rate limit, and every
 * string a guest wrote goes through xbd_log_str first.
 */
#ifndef XBD_BACK_LOG_H
#define XBD_BACK_LOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum {
	XBD_LOG_ERR = -2,
	XBD_LOG_WARNING = -1,
	XBD_LOG_INFO = 0,
	XBD_LOG_VERBOSE = 1,
	XBD_LOG_DEBUG = 2,
};

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
 * domid's name (NULL or "": none) for the journal's DOMAIN_NAME field of
 * its devices' lines, kept escaped as xbd_log_str does; the main thread
 * sets it, any thread may log.
 */
void xbd_log_domain_name(uint32_t domid, const char *name);
/*
 * Hand every line (its level, and its text without "xbd-back: ") to sink
 * instead of writing it: a worker's lines go to its main process, which
 * writes them (worker.h).  Call before any thread exists.
 */
void xbd_log_set_sink(void (*sink)(int level, const char *text, void *arg), void *arg);

/*
 * A guest's text (a xenstore value) for a log line: bytes outside
 * printable ASCII and the backslash as \xNN, at most XBD_LOG_STR_MAX
 * bytes of it, then "...".  buf has room for XBD_LOG_STR_BUF; returns buf.
 */
/*
 * The same for at most max bytes of s (backslash: escape it too, for text
 * not escaped before) into buf, which has room for max * 4 + 1; returns
 * how many bytes of s it took.
 */
size_t xbd_log_escape(char *buf, const char *s, size_t max, bool backslash);
#define XBD_LOG_STR_MAX 64
#define XBD_LOG_STR_BUF (XBD_LOG_STR_MAX * 4 + 4)
const char *xbd_log_str(char *buf, const char *s);

/*
 * Allows XBD_LOG_BURST lines per XBD_LOG_WINDOW seconds of each kind:
 * errors and warnings, information, and XBD_LOG_VERBOSE detail (asked for
 * with -v), counted apart so that routine lines cannot push a warning
 * out; once a window with suppressed lines
 * is over, one line says how many were suppressed (from the next line, or
 * from xbd_ratelimit_flush, whichever comes first).
 */
#define XBD_LOG_BURST 10
#define XBD_LOG_WINDOW 5
struct xbd_ratelimit {
	pthread_mutex_t lock;
	time_t window_start;
	unsigned int printed[3]; /* errors and warnings, info, verbose */
	uint64_t suppressed;
	const char *who;         /* the device, named in the "suppressed" line */
	unsigned int burst;      /* lines per window and kind; 0: XBD_LOG_BURST */
};

void xbd_ratelimit_init(struct xbd_ratelimit *rl);
/* Reports what is still suppressed, then releases rl. */
void xbd_ratelimit_destroy(struct xbd_ratelimit *rl);
/*
 * Whether a line of this level may be written now under rl, counted as
 * written or suppressed: for a caller that has work to do before it can
 * write the line (a worker's, escaped), which is then not done for a
 * line that goes.  A debug line is not limited.
 */
bool xbd_ratelimit_take(struct xbd_ratelimit *rl, int level);
/* Like xbd_log, subject to rl (a line below the log level costs nothing, a debug line is not limited). */
void xbd_log_limited(struct xbd_ratelimit *rl, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * If lines were suppressed in a window that is over, say how many now.
 * Returns 0, or the CLOCK_MONOTONIC millisecond at which to call again.
 */
uint64_t xbd_ratelimit_flush(struct xbd_ratelimit *rl);

#endif /* XBD_BACK_LOG_H */
