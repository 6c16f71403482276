/*
 * log.c: log lines and their per-device rate limit.  Each line is written
 * with one write(2) so that lines from ring threads never interleave.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "blkback/log.h"

static int log_level;

void xbd_log_set_level(int level)
{
	log_level = level;
}

int xbd_log_level(void)
{
	return log_level;
}

static void vlog(const char *prefix, const char *fmt, va_list ap)
{
	char buf[1024];
	int n = 0, m;

	n = snprintf(buf, sizeof(buf), "xbd-back: %s", prefix);
	m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, n) < 0) {
		/* Nowhere left to report it. */
	}
}

void xbd_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vlog("", fmt, ap);
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
		xbd_log(XBD_LOG_INFO, "(%llu similar lines suppressed)",
			(unsigned long long)suppressed);
	if (!print)
		return;
	va_start(ap, fmt);
	vlog("", fmt, ap);
	va_end(ap);
}
