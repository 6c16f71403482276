/*
 * sim/lock.c: the locks of the simulated hypervisor's shared state (the
 * host lock, each domain's grant and event channel locks).
 *
 * They live in files every process of the host maps read-write, guests
 * included, so they must survive whatever a guest does to them:
 * - no pointers in shared memory: glibc's robust mutexes link themselves
 *   into the owner thread's robust list through pointers kept in the
 *   mutex, and unlock writes through them, so a guest rewriting those
 *   words could make the backend write anywhere.  Ours is one 32-bit word:
 *   0 when free, else the owner's thread id plus a "waiters" bit;
 * - a bounded wait: a live guest holding its own lock forever makes our
 *   operations fail with -ETIMEDOUT, never hang a backend thread;
 * - an owner that died inside the section (killed) leaves the lock to the
 *   next taker, as a robust mutex does.
 * A guest can still break mutual exclusion over its own tables by writing
 * 0 into the word; everything under these locks is validated on reading,
 * so that only makes the guest's own grants and ports misbehave.
 */
#include "config.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "sim/layout.h"

#define LOCK_WAITERS 0x80000000u
#define LOCK_TID_MASK 0x3fffffffu
/* One futex sleep, after which we look again whether the owner died. */
#define LOCK_SLICE_NS 2000000ll

static void futex_wait(uint32_t *w, uint32_t val, int64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000ll, .tv_nsec = ns % 1000000000ll };

	/* Shared futex: the word is in a MAP_SHARED file of several processes. */
	syscall(SYS_futex, w, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/*
 * gettid() is a system call, and the grant copy path takes a lock twice
 * per batch: each thread remembers its id.  A forked child's thread has
 * another id, so fork clears the memory of the (only) thread it copies.
 * This cache is the only state of the library outside the structs it
 * hands out, and it holds nothing but a fact about the calling thread.
 */
static __thread uint32_t my_tid;
static pthread_once_t tid_once = PTHREAD_ONCE_INIT;

static void tid_forget(void)
{
	my_tid = 0;
}

static void tid_once_init(void)
{
	pthread_atfork(NULL, NULL, tid_forget);
}

static uint32_t self_tid(void)
{
	if (!my_tid) {
		pthread_once(&tid_once, tid_once_init);
		my_tid = (uint32_t)gettid() & LOCK_TID_MASK;
	}
	return my_tid;
}

/* The owner recorded in the word is a thread that no longer exists. */
static bool owner_dead(uint32_t word)
{
	pid_t tid = (pid_t)(word & LOCK_TID_MASK);

	return tid > 0 && kill(tid, 0) < 0 && errno == ESRCH;
}

int sim_lock_take(uint32_t *w, unsigned int timeout_ms)
{
	uint32_t me = self_tid();
	uint32_t cur = 0;
	int64_t deadline;
	bool slept = false;

	if (__atomic_compare_exchange_n(w, &cur, me, false, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED))
		return 0;
	deadline = xbd_mono_ns() + (int64_t)timeout_ms * 1000000ll;
	for (;;) {
		int64_t left;

		cur = __atomic_load_n(w, __ATOMIC_RELAXED);
		/* Free (a waiters bit alone names no owner): take it, keep waking. */
		if (!(cur & LOCK_TID_MASK) || (slept && owner_dead(cur))) {
			if (__atomic_compare_exchange_n(w, &cur, me | LOCK_WAITERS, false,
							__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return 0;
			continue;
		}
		left = deadline - xbd_mono_ns();
		if (left <= 0)
			return -ETIMEDOUT;
		if (!(cur & LOCK_WAITERS) &&
		    !__atomic_compare_exchange_n(w, &cur, cur | LOCK_WAITERS, false,
						 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			continue;
		futex_wait(w, cur | LOCK_WAITERS, left < LOCK_SLICE_NS ? left : LOCK_SLICE_NS);
		slept = true;
	}
}

void sim_lock_drop(uint32_t *w)
{
	if (__atomic_exchange_n(w, 0, __ATOMIC_RELEASE) & LOCK_WAITERS)
		futex_wake(w);
}
