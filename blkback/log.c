/*
 * log.c: log lines and their per-device rate limit.  Each line is written
 * with one write(2) (or one syslog(3) call) so that lines from ring
 * threads never interleave.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "blkback/log.h"

/* Set by the main thread, read by every thread: atomics, no lock. */
static int log_level;
static bool log_syslog;
static bool log_journal; /* stderr is the journal: prefix "<priority>" */

void xbd_log_set_level(int level)
{
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

int xbd_log_level(void)
{
	return __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

/* systemd sets JOURNAL_STREAM=dev:ino for the stream it connected stderr to. */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st))
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void xbd_log_set_syslog(bool to_syslog)
{
	log_syslog = to_syslog;
	if (to_syslog)
		openlog("xbd-back", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	else
		log_journal = stderr_is_journal();
}

static int priority(int level)
{
	return level < XBD_LOG_INFO ? LOG_ERR : level < XBD_LOG_DEBUG ? LOG_INFO : LOG_DEBUG;
}

static void vlog(int level, const char *fmt, va_list ap)
{
	char buf[1024];
	int n = 0, m, head;

	if (log_journal)
		n = snprintf(buf, sizeof(buf), "<%d>", priority(level));
	head = n;
	n += snprintf(buf + n, sizeof(buf) - n, "xbd-back: ");
	m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	if (log_syslog) {
		buf[n] = '\0';
		syslog(priority(level), "%s", buf + head + strlen("xbd-back: "));
		return;
	}
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, n) < 0) {
		/* Nowhere left to report it. */
	}
}

void xbd_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > xbd_log_level())
		return;
	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

void xbd_ratelimit_init(struct xbd_ratelimit *rl)
{
	memset(rl, 0, sizeof(*rl));
	pthread_mutex_init(&rl->lock, NULL);
}

void xbd_ratelimit_destroy(struct xbd_ratelimit *rl)
{
	pthread_mutex_destroy(&rl->lock);
}

void xbd_log_limited(struct xbd_ratelimit *rl, const char *fmt, ...)
{
	struct timespec now;
	uint64_t suppressed = 0;
	bool print;
	va_list ap;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&rl->lock);
	if (now.tv_sec - rl->window_start >= XBD_LOG_WINDOW) {
		suppressed = rl->suppressed;
		rl->suppressed = 0;
		rl->printed = 0;
		rl->window_start = now.tv_sec;
	}
	print = rl->printed < XBD_LOG_BURST;
	if (print)
		rl->printed++;
	else
		rl->suppressed++;
	pthread_mutex_unlock(&rl->lock);
	if (suppressed)
		xbd_log(XBD_LOG_INFO, "%s%s(%llu similar lines suppressed)", rl->who ? rl->who : "",
			rl->who ? ": " : "", (unsigned long long)suppressed);
	if (!print)
		return;
	va_start(ap, fmt);
	vlog(XBD_LOG_INFO, fmt, ap);
	va_end(ap);
}
