/*
 * test-stress.c: xbd-xenstored under load: 2000 watches on one connection,
 * 50 concurrent clients (dom0 and guests) incrementing one counter in
 * transactions, 200 open connections at once, a client that never
 * reads its watch events (it is dropped; nobody else waits for it), and one
 * that sends requests without reading replies and hangs up (the daemon
 * must not spin on it).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdint.h>
#include <xen/io/xs_wire.h>

#include "common/clock.h"
#include "tests/xenstored/harness.h"

#define NWATCH 2000
#define NCLIENT 50
#define NINCR 20

static struct daemon d;

/* Collects n events; returns how many had a token in [0, NWATCH) seen for
 * the first time. */
static unsigned int collect(struct xs_handle *h, unsigned int n,
			    unsigned char *seen)
{
	char p[256], t[64];
	unsigned int got = 0, k;

	memset(seen, 0, NWATCH);
	while (got < n && next_event(h, 5000, p, sizeof(p), t, sizeof(t))) {
		k = (unsigned int)strtoul(t + 1, NULL, 10);
		if (t[0] == 'w' && k < NWATCH && !seen[k]) {
			seen[k] = 1;
			got++;
		}
	}
	return got;
}

static void test_many_watches(void)
{
	static unsigned char seen[NWATCH];
	struct xs_handle *h = xs_as(&d, 0), *w = xs_as(&d, 0);
	char path[64], token[16];
	unsigned int i, ok = 0;
	double t0 = xbd_mono_s();

	CHECK(h && w, "open");
	if (!h || !w)
		return;
	for (i = 0; i < NWATCH; i++) {
		snprintf(path, sizeof(path), "/s/w%u", i);
		snprintf(token, sizeof(token), "w%u", i);
		ok += xs_watch(h, path, token);
	}
	CHECK(ok == NWATCH, "%u watches set", ok);
	CHECK(collect(h, NWATCH, seen) == NWATCH, "initial events");
	for (i = 0; i < NWATCH; i++) {
		snprintf(path, sizeof(path), "/s/w%u", i);
		xs_write(w, XBT_NULL, path, "1", 1);
	}
	CHECK(collect(h, NWATCH, seen) == NWATCH, "one event per write");
	CHECK(xs_rm(w, XBT_NULL, "/s"), "rm /s");
	CHECK(collect(h, NWATCH, seen) == NWATCH,
	      "every watch hears its node removed");
	printf("2000 watches: set, 2000 writes, rm, 6000 events: %.2f s\n",
	       xbd_mono_s() - t0);
	xs_close(h);
	xs_close(w);
}

static int client(unsigned int n, int barrier)
{
	struct xs_handle *h = xs_as(&d, n % 2 ? 5 : 0);
	char path[64], val[32], *v, c;
	xs_transaction_t t;
	unsigned int i, len, tries = 0;

	if (!h)
		return 2;
	/* Everybody starts together, so the transactions do overlap. */
	if (read(barrier, &c, 1) != 0)
		return 10;
	snprintf(path, sizeof(path), "/stress/c%u", n);
	for (i = 0; i < NINCR; i++) {
		snprintf(val, sizeof(val), "%u", i);
		if (!xs_write(h, XBT_NULL, path, val, strlen(val)))
			return 3;
		v = xs_read(h, XBT_NULL, path, &len);
		if (!v || strcmp(v, val) != 0)
			return 4;
		free(v);
		/* Read-modify-write in a transaction, retried on EAGAIN. */
		for (;;) {
			if (++tries > 100000)
				return 5;
			t = xs_transaction_start(h);
			if (t == XBT_NULL)
				return 6;
			v = xs_read(h, t, "/stress/counter", &len);
			if (!v)
				return 7;
			snprintf(val, sizeof(val), "%lu",
				 strtoul(v, NULL, 10) + 1);
			free(v);
			if (!xs_write(h, t, "/stress/counter", val,
				      strlen(val)))
				return 8;
			if (xs_transaction_end(h, t, false))
				break;
			if (errno != EAGAIN)
				return 9;
		}
	}
	xs_close(h);
	return 0;
}

static void test_concurrent_clients(void)
{
	struct xs_handle *h0 = xs_as(&d, 0);
	struct xs_permissions all = { 0, XS_PERM_READ | XS_PERM_WRITE };
	pid_t pids[NCLIENT];
	unsigned int i, bad = 0, len;
	int st, barrier[2];
	char *v;
	double t0;

	CHECK(h0 && xs_write(h0, XBT_NULL, "/stress/counter", "0", 1) &&
	      xs_set_permissions(h0, XBT_NULL, "/stress", &all, 1) &&
	      xs_set_permissions(h0, XBT_NULL, "/stress/counter", &all, 1),
	      "setup");
	CHECK(pipe(barrier) == 0, "pipe");
	for (i = 0; i < NCLIENT; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(barrier[1]);
			_exit(client(i, barrier[0]));
		}
	}
	close(barrier[0]);
	t0 = xbd_mono_s();
	close(barrier[1]);
	for (i = 0; i < NCLIENT; i++) {
		if (pids[i] < 0 || waitpid(pids[i], &st, 0) < 0 ||
		    !WIFEXITED(st) || WEXITSTATUS(st)) {
			bad++;
			fprintf(stderr, "  client %u: status %d\n", i,
				WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		}
	}
	CHECK(bad == 0, "%u clients failed", bad);
	v = xs_read(h0, XBT_NULL, "/stress/counter", &len);
	CHECK(v && strtoul(v, NULL, 10) == NCLIENT * NINCR,
	      "counter %s, want %u", v ? v : "?", NCLIENT * NINCR);
	free(v);
	printf("50 clients x %u writes, reads and transactional increments: "
	       "%.2f s\n", NINCR, xbd_mono_s() - t0);
	xs_close(h0);
}

static void test_many_connections(void)
{
	int fds[200];
	unsigned int i, ok = 0;
	char body[64];
	uint32_t type;

	for (i = 0; i < 200; i++) {
		fds[i] = raw_as(&d, i % 2 ? 5 : 0);
		if (fds[i] >= 0)
			raw_send(fds[i], XS_GET_DOMAIN_PATH, i, 0, "3", 2);
	}
	for (i = 0; i < 200; i++) {
		if (fds[i] < 0)
			continue;
		if (raw_recv(fds[i], &type, NULL, NULL, body, sizeof(body),
			     3000) > 0 && type == XS_GET_DOMAIN_PATH)
			ok++;
		close(fds[i]);
	}
	CHECK(ok == 200, "%u of 200 simultaneous connections answered", ok);
}

static void test_slow_reader(void)
{
	static char req[XENSTORE_PAYLOAD_MAX];
	struct xs_handle *w = xs_as(&d, 0);
	int slow = raw_as(&d, 0), n, writes = 0, eof = 0;
	char buf[4096];
	size_t l;
	double t0 = xbd_mono_s();
	struct pollfd p;

	CHECK(w && slow >= 0, "open");
	if (!w || slow < 0)
		return;
	/* A watch with a 3000-byte token: each event is ~3 KiB. */
	l = strlen("/slow") + 1;
	memcpy(req, "/slow", l);
	memset(req + l, 't', 3000);
	req[l + 3000] = '\0';
	raw_send(slow, XS_WATCH, 1, 0, req, (uint32_t)(l + 3001));
	/* Never read; write until the daemon gives up on the reader. */
	for (writes = 0; writes < 12000; writes++) {
		if (!xs_write(w, XBT_NULL, "/slow/x", "1", 1))
			break;
		if (writes % 500 == 0) {
			p.fd = slow;
			p.events = POLLRDHUP;
			if (poll(&p, 1, 0) == 1 && (p.revents & POLLRDHUP))
				break;
		}
	}
	CHECK(writes < 12000, "writes never failed (%d)", writes);
	/* Drain what was already sent; then the daemon's close shows. */
	p.fd = slow;
	p.events = POLLIN;
	while (poll(&p, 1, 2000) == 1) {
		n = read(slow, buf, sizeof(buf));
		if (n <= 0) {
			eof = n == 0;
			break;
		}
	}
	CHECK(eof, "slow reader was disconnected");
	CHECK(xs_write(w, XBT_NULL, "/slow/y", "1", 1),
	      "writer unaffected");
	printf("slow reader dropped after %d writes, %.2f s\n", writes,
	       xbd_mono_s() - t0);
	close(slow);
	xs_close(w);
}

/* CPU time the daemon used so far, in clock ticks. */
static unsigned long daemon_cpu(void)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)d.pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	p = strrchr(buf, ')');
	/* After "pid (comm)": state, then fields 4..13, then utime stime. */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%lu %lu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

static void test_unread_replies(void)
{
	static char big[4000], reqs[3000 * 21];
	struct xs_handle *h = xs_as(&d, 0);
	struct xsd_sockmsg m = { XS_READ, 0, 0, 5 };
	int fd = raw_as(&d, 0), i;
	size_t off = 0, len = sizeof(reqs);
	struct pollfd p;
	unsigned long before;
	long hz = sysconf(_SC_CLK_TCK);
	ssize_t n;

	memset(big, 'z', sizeof(big));
	CHECK(h && fd >= 0 && xs_write(h, XBT_NULL, "/big", big, sizeof(big)),
	      "setup");
	if (!h || fd < 0)
		return;
	/* 3000 requests, 12 MB of replies nobody reads.  The daemon stops
	 * reading a client that leaves over 1 MiB of replies unread, so the
	 * sending stalls: never block on it. */
	for (i = 0; i < 3000; i++) {
		memcpy(reqs + i * 21, &m, sizeof(m));
		memcpy(reqs + i * 21 + sizeof(m), "/big", 5);
	}
	while (off < len) {
		n = send(fd, reqs + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		p.fd = fd;
		p.events = POLLOUT;
		if (n < 0 && errno != EAGAIN)
			break;
		if (poll(&p, 1, 300) != 1)
			break;
	}
	/* Enough sent for the daemon to have paused this client. */
	CHECK(off / 21 * 4016 > 2u << 20, "only %zu requests sent", off / 21);
	close(fd);
	usleep(100000);
	before = daemon_cpu();
	usleep(500000);
	CHECK(daemon_cpu() - before < (unsigned long)hz / 5,
	      "daemon busy after a paused client hung up (%lu ticks)",
	      daemon_cpu() - before);
	CHECK(xs_write(h, XBT_NULL, "/after", "1", 1), "daemon answers");
	xs_close(h);
}

int main(void)
{
	struct xs_handle *h0;

	daemon_start(&d, NULL);
	h0 = xs_as(&d, 0);
	if (!h0) {
		daemon_stop(&d);
		return 1;
	}
	make_domain(h0, 5);
	test_many_watches();
	test_concurrent_clients();
	test_many_connections();
	test_slow_reader();
	test_unread_replies();
	CHECK(daemon_alive(&d), "daemon running");
	xs_close(h0);
	daemon_stop(&d);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
