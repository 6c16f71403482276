/*
 * common/clock.h: the monotonic clock, in the unit the caller counts in.
 * Header only (static inline), so every library and program can use it
 * with nothing more to link.  CLOCK_MONOTONIC: timeouts and rates must not
 * jump when someone sets the wall clock.  Unsigned, as the clock never
 * goes below zero: a deadline's time left is `deadline > now ? ... : 0`.
 */
#ifndef XBD_COMMON_CLOCK_H
#define XBD_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds since an arbitrary point (boot on Linux). */
static inline uint64_t xbd_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Milliseconds, for timeouts and deadlines. */
static inline uint64_t xbd_mono_ms(void)
{
	return xbd_mono_ns() / 1000000;
}

/* Seconds, for rates and durations a person reads. */
static inline double xbd_mono_s(void)
{
	return (double)xbd_mono_ns() / 1e9;
}

#endif /* XBD_COMMON_CLOCK_H */
