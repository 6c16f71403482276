/*
 * ring-clock.c: a ring thread's clock (ring-thread.h).  What a clock read
 * costs here is measured once per process: where it is a system call (a
 * PV dom0 whose clock has no vDSO), a ring takes its latest read as the
 * time a sleep or a poll begins, and a poll counts its window in spins.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "blkback/datapath/ring-thread.h"

/*
 * A clock read dearer than this is a system call: a PV dom0 whose TSC Xen
 * does not call stable has no vDSO clock, and each clock_gettime is a
 * trip through the hypervisor (tens of microseconds under emulation); on
 * a native host a system call costs 150-250 ns, a vDSO read 20-50 ns.
 */
#define CLOCK_DEAR_NS 120

static pthread_once_t clock_once = PTHREAD_ONCE_INIT;
static bool clock_dear;
static uint64_t spin_ps; /* one spin of the polling loop, in picoseconds */
#ifdef XBD_TEST_HOOKS
/* XBD_TEST_CLOCK=syscall: every read a real system call, as in a PV dom0. */
static bool clock_test_syscall;
#endif

static uint64_t clock_read(void)
{
#ifdef XBD_TEST_HOOKS
	if (clock_test_syscall) {
		struct timespec ts;

		syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
		return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}
#endif
	return xbd_mono_ns();
}

void ring_spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause(); /* be kind to a sibling hyperthread */
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory"); /* Linux's cpu_relax() on arm64 */
#endif
}

/*
 * What a clock read costs here (the fastest of three rounds of 32), and
 * what a spin of the polling loop costs (the fastest of three rounds of
 * 1024: a load from shared memory and a pause).
 */
static void clock_calibrate(void)
{
	uint64_t best = UINT64_MAX, spin = UINT64_MAX;
	unsigned int round, i;
	volatile uint32_t idx = 0;

#ifdef XBD_TEST_HOOKS
	const char *t = getenv("XBD_TEST_CLOCK");

	clock_test_syscall = t && !strcmp(t, "syscall");
#endif
	for (round = 0; round < 3; round++) {
		uint64_t t0 = clock_read(), t1;

		for (i = 0; i < 32; i++)
			(void)clock_read();
		t1 = clock_read();
		if ((t1 - t0) / 33 < best)
			best = (t1 - t0) / 33;
	}
	for (round = 0; round < 3; round++) {
		uint64_t t0 = clock_read(), t1;

		for (i = 0; i < 1024; i++) {
			(void)idx;
			ring_spin_pause();
		}
		t1 = clock_read();
		if (t1 - t0 < spin)
			spin = t1 - t0;
	}
	spin_ps = spin * 1000 / 1024;
	if (!spin_ps)
		spin_ps = 1;
	clock_dear = best >= CLOCK_DEAR_NS;
#ifdef XBD_TEST_HOOKS
	clock_dear = clock_dear || clock_test_syscall;
#endif
	xbd_log(XBD_LOG_VERBOSE, "a clock read costs %" PRIu64 " ns here%s", best,
		clock_dear ? " (a system call: no vDSO clock): a ring's sleep and poll "
			     "start at its latest read" : "");
}

/* A fresh read, which the ring keeps as its latest. */
uint64_t ring_now(struct xbd_bring *br)
{
	XBD_STAT_INC(br->base.stats, clock_reads);
	br->clock_ns = clock_read();
	br->clock_turn = true;
	return br->clock_ns;
}

/*
 * When a sleep or a poll begins.  Where a read is a system call, the
 * ring's latest read since it last woke stands in for it: it is older by
 * what the turn did since (a consume, a submit, a push), which makes a
 * sleep look that much longer to the polling windows and a masked port
 * or a retired mapping wait that much longer.  That saves two reads per
 * request at queue depth 1, where a PV dom0 made four.
 */
uint64_t ring_since(struct xbd_bring *br)
{
	return clock_dear && br->clock_turn ? br->clock_ns : ring_now(br);
}

void ring_clock_init(void)
{
	pthread_once(&clock_once, clock_calibrate);
}

bool ring_clock_dear(void)
{
	return clock_dear;
}

uint64_t ring_spin_ps(void)
{
	return spin_ps;
}
