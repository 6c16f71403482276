/*
 * test-state.c: the XenbusState machine against a real xbd-xenstored:
 * switch_state writes the state (and refuses to recreate a removed
 * device directory), wait_state returns as soon as another process
 * writes an awaited state, times out on schedule when nobody does,
 * reports a directory that disappears, and runs other watches while it
 * waits; a peer watch reports each new state of the other end once, and
 * reports the other end gone when its directory is removed or its domain
 * is destroyed (@releaseDomain).
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/xenbus/harness.h"

#define DEV "/local/domain/0/xbd-state/dev"

/* In a child process: after delay_ms, write value to path (or remove path if value is NULL). */
static pid_t later(int delay_ms, const char *path, const char *value)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		struct xbd_xs *xs;
		int r;

		usleep((useconds_t)delay_ms * 1000);
		if (xbd_xs_open(&xs))
			_exit(1);
		r = value ? xbd_xs_write_str(xs, XBT_NULL, path, value) : xbd_xs_rm(xs, XBT_NULL, path);
		xbd_xs_close(xs);
		/* _exit: the parent's atexit handlers (host shutdown) are not ours to run. */
		_exit(r ? 1 : 0);
	}
	return pid;
}

static void reap(pid_t pid)
{
	int st;

	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void poke_state(struct xbd_xs *xs, const char *path, void *arg)
{
	/* Reacting to some other node by moving the device to Connected. */
	int *calls = arg;

	if ((*calls)++ == 0)
		CHECK_RET(xbd_xenbus_switch_state(xs, DEV, XenbusStateConnected), 0);
}

static void test_switch_wait(struct xbd_xs *xs)
{
	enum xenbus_state s = XenbusStateUnknown;
	struct xbd_xs_watch *w;
	int64_t t0, dt;
	int calls = 0;
	pid_t pid;

	CHECK_RET(xbd_xs_mkdir(xs, XBT_NULL, DEV), 0);
	CHECK_RET(xbd_xenbus_switch_state(xs, DEV, XenbusStateInitWait), 0);
	CHECK(xbd_xenbus_read_state(xs, DEV) == XenbusStateInitWait);
	CHECK_RET(xbd_xenbus_switch_state(xs, DEV, (enum xenbus_state)9), -EINVAL);

	/* Already there: returns at once. */
	CHECK_RET(xbd_xenbus_wait_state(xs, DEV, 1u << XenbusStateInitWait, 0, &s), 0);
	CHECK(s == XenbusStateInitWait);

	/* Nobody answers: -ETIMEDOUT after the timeout, not much later. */
	t0 = xbd_mono_ms();
	CHECK_RET(xbd_xenbus_wait_state(xs, DEV, 1u << XenbusStateConnected, 300, &s), -ETIMEDOUT);
	dt = xbd_mono_ms() - t0;
	CHECK(dt >= 290 && dt < 1500);

	/* Another process moves it through 3 to 4: we wake for 4 long before the timeout. */
	pid = later(100, DEV "/state", "3");
	reap(pid);
	CHECK(xbd_xenbus_read_state(xs, DEV) == XenbusStateInitialised);
	pid = later(150, DEV "/state", "4");
	t0 = xbd_mono_ms();
	CHECK_RET(xbd_xenbus_wait_state(xs, DEV, 1u << XenbusStateConnected |
					1u << XenbusStateClosed, 5000, &s), 0);
	dt = xbd_mono_ms() - t0;
	reap(pid);
	CHECK(s == XenbusStateConnected);
	CHECK(dt < 2000);

	/* Garbage in the node reads as Unknown, which can be waited for. */
	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, DEV "/state", "4x"), 0);
	CHECK(xbd_xenbus_read_state(xs, DEV) == XenbusStateUnknown);
	CHECK_RET(xbd_xenbus_wait_state(xs, DEV, 1u << XenbusStateUnknown, 0, &s), 0);
	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, DEV "/state", "99"), 0);
	CHECK(xbd_xenbus_read_state(xs, DEV) == XenbusStateUnknown);

	/* Other watches run while we wait: one of them makes the state we wait for. */
	CHECK_RET(xbd_xenbus_switch_state(xs, DEV, XenbusStateInitialising), 0);
	CHECK_RET(xbd_xs_watch(xs, "/local/domain/0/xbd-state/kick", poke_state, &calls, &w), 0);
	CHECK_RET(xbd_xenbus_wait_state(xs, DEV, 1u << XenbusStateConnected, 3000, &s), 0);
	CHECK(calls >= 1 && s == XenbusStateConnected);
	xbd_xs_unwatch(xs, w);

	/* The directory goes away while we wait: -ENOENT. */
	pid = later(100, DEV, NULL);
	CHECK_RET(xbd_xenbus_wait_state(xs, DEV, 1u << XenbusStateClosed, 5000, &s), -ENOENT);
	reap(pid);
	/* And switching state on it now must not bring back a stray node. */
	CHECK_RET(xbd_xenbus_switch_state(xs, DEV, XenbusStateClosed), -ENOENT);
	CHECK(!xbd_xs_exists(xs, XBT_NULL, DEV));
	CHECK(xbd_xenbus_read_state(xs, DEV) == XenbusStateUnknown);
}

struct peer_log {
	int calls;
	enum xenbus_state states[16];
	bool gone;
	struct xbd_xenbus_peer **self; /* unwatch from the callback when gone */
};

static void peer_cb(struct xbd_xs *xs, enum xenbus_state state, bool gone, void *arg)
{
	struct peer_log *l = arg;

	CHECK(!l->gone); /* nothing after gone */
	if (l->calls < 16)
		l->states[l->calls] = state;
	l->calls++;
	if (gone) {
		CHECK(state == XenbusStateUnknown);
		l->gone = true;
		if (l->self) {
			xbd_xenbus_peer_unwatch(xs, *l->self);
			*l->self = NULL;
		}
	}
}

static void pump_calls(struct xbd_xs *xs, struct peer_log *l, int want)
{
	uint64_t end = xbd_mono_ms() + 3000;

	while (l->calls < want && xbd_mono_ms() < end)
		xt_pump(xs, 50, NULL);
	xt_pump(xs, 150, NULL); /* and nothing extra */
}

static void test_peer(struct xbd_xs *xs)
{
	struct peer_log l = { 0 };
	struct xbd_xenbus_peer *p;
	char fe[XBD_XS_PATH_MAX];
	struct xbd_xs *guest;
	unsigned long domid;
	char args[32];

	/* A frontend directory in a real domain, written by the guest itself. */
	domid = xt_sim_num("domain create", "");
	CHECK_RET(xbd_xs_frontend_dir(fe, sizeof(fe), (uint32_t)domid, "vbd", 51728), 0);
	snprintf(args, sizeof(args), "%lu xvdb /dev/null", domid);
	CHECK(xt_sim("disk add", args) == 0);

	l.self = &p;
	CHECK_RET(xbd_xenbus_peer_watch(xs, fe, (uint32_t)domid, peer_cb, &l, &p), 0);
	pump_calls(xs, &l, 1);
	CHECK(l.calls == 1 && l.states[0] == XenbusStateInitialising);

	guest = xt_open_as((uint32_t)domid);
	CHECK_RET(xbd_xenbus_switch_state(guest, fe, XenbusStateInitialised), 0);
	pump_calls(xs, &l, 2);
	CHECK(l.calls == 2 && l.states[1] == XenbusStateInitialised);
	/* The same state written again is no news. */
	CHECK_RET(xbd_xenbus_switch_state(guest, fe, XenbusStateInitialised), 0);
	xt_pump(xs, 300, NULL);
	CHECK(l.calls == 2);
	CHECK_RET(xbd_xenbus_switch_state(guest, fe, XenbusStateConnected), 0);
	pump_calls(xs, &l, 3);
	CHECK(l.calls == 3 && l.states[2] == XenbusStateConnected);
	xbd_xs_close(guest);

	/* The domain is destroyed: its home goes, then @releaseDomain; reported once as gone. */
	snprintf(args, sizeof(args), "%lu", domid);
	CHECK(xt_sim("domain destroy", args) == 0);
	pump_calls(xs, &l, 4);
	CHECK(l.calls == 4 && l.gone && p == NULL);

	/* Gone by removal of the directory alone, and unwatch outside a callback. */
	memset(&l, 0, sizeof(l));
	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, "/local/domain/0/xbd-state/fe/state", "1"), 0);
	CHECK_RET(xbd_xenbus_peer_watch(xs, "/local/domain/0/xbd-state/fe", 0, peer_cb, &l, &p), 0);
	pump_calls(xs, &l, 1);
	CHECK(l.calls == 1 && l.states[0] == XenbusStateInitialising);
	CHECK_RET(xbd_xs_rm(xs, XBT_NULL, "/local/domain/0/xbd-state/fe"), 0);
	pump_calls(xs, &l, 2);
	CHECK(l.calls == 2 && l.gone);
	xbd_xenbus_peer_unwatch(xs, p);
}

/* xenstored dies under a waiter: an error within about a second, not a hang or a timeout. */
static void test_lost_connection(struct xbd_xs *xs)
{
	char pidfile[4200], buf[32];
	enum xenbus_state s;
	int64_t t0, dt;
	FILE *f;
	int ret;
	long pid;

	CHECK_RET(xbd_xs_write_str(xs, XBT_NULL, DEV "/state", "1"), 0);
	snprintf(pidfile, sizeof(pidfile), "%s/xenstore/xenstored.pid", xt_dir());
	f = fopen(pidfile, "r");
	CHECK(f && fgets(buf, sizeof(buf), f));
	fclose(f);
	pid = strtol(buf, NULL, 10);
	CHECK(pid > 1);
	CHECK(kill((pid_t)pid, SIGKILL) == 0);
	t0 = xbd_mono_ms();
	ret = xbd_xenbus_wait_state(xs, DEV, 1u << XenbusStateConnected, 10000, &s);
	dt = xbd_mono_ms() - t0;
	CHECK(ret < 0 && ret != -ETIMEDOUT && ret != -ENOENT);
	CHECK(dt < 3000);
	CHECK(xbd_xs_dispatch(xs) < 0);
}

int main(void)
{
	struct xbd_xs *xs;

	xt_start();
	CHECK_RET(xbd_xs_open(&xs), 0);
	test_switch_wait(xs);
	test_peer(xs);
	test_lost_connection(xs);
	xbd_xs_close(xs);
	printf("PASS: state machine\n");
	return 0;
}
