/*
 * test-wire.c: xbd-xenstored at the byte level, without libxenstore: reply
 * headers, error names, watch event framing, DIRECTORY_PART, RESET_WATCHES,
 * and malformed input (bad types, oversized or truncated messages, missing
 * NULs, garbage, disconnects mid-message) after which the daemon must still
 * answer.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdint.h>
#include <xen/io/xs_wire.h>

#include "tests/xenstored/harness.h"

static struct daemon d;
static char body[XENSTORE_PAYLOAD_MAX + 16];

/* One request, one reply: returns the reply type (body in `body`), or
 * -1 if the connection broke. */
static int talk(int fd, uint32_t type, uint32_t req_id, uint32_t tx_id,
		const void *payload, uint32_t len, uint32_t *rlen)
{
	uint32_t t, rid, tid;
	int n;

	if (raw_send(fd, type, req_id, tx_id, payload, len) < 0)
		return -1;
	n = raw_recv(fd, &t, &rid, &tid, body, sizeof(body), 2000);
	if (n < 0)
		return -1;
	if (rid != req_id || tid != tx_id) {
		fprintf(stderr, "  reply ids %u/%u for request %u/%u\n", rid,
			tid, req_id, tx_id);
		return -1;
	}
	if (rlen)
		*rlen = (uint32_t)n;
	return (int)t;
}

static bool is_error(int t, const char *name)
{
	return t == XS_ERROR && strcmp(body, name) == 0;
}

/* The daemon still serves a fresh connection. */
static bool alive(void)
{
	int fd = raw_as(&d, 0), t;
	bool ok;

	if (fd < 0)
		return false;
	t = talk(fd, XS_READ, 77, 0, "/wire/ok", 9, NULL);
	ok = t == XS_READ && strcmp(body, "yes") == 0;
	close(fd);
	return ok;
}

/* True if the daemon closed fd (EOF within the timeout). */
static bool closed_by_daemon(int fd)
{
	char b[64];
	int n;

	do {
		n = raw_recv(fd, NULL, NULL, NULL, b, sizeof(b), 2000);
	} while (n >= 0);
	return n == -1;
}

static void test_framing(int fd)
{
	uint32_t len, t, rid, tid;
	int ty;

	ty = talk(fd, XS_WRITE, 1, 0, "/wire/ok\0yes", 12, &len);
	CHECK(ty == XS_WRITE && len == 3 && strcmp(body, "OK") == 0,
	      "write reply type %d '%s'", ty, body);
	ty = talk(fd, XS_READ, 0xdeadbeef, 0, "/wire/ok", 9, &len);
	CHECK(ty == XS_READ && len == 3 && memcmp(body, "yes", 3) == 0,
	      "read reply echoes req_id");
	ty = talk(fd, XS_READ, 2, 0, "/wire/none", 11, NULL);
	CHECK(is_error(ty, "ENOENT"), "error reply ENOENT: %d %s", ty, body);
	ty = talk(fd, XS_GET_DOMAIN_PATH, 3, 0, "12", 3, NULL);
	CHECK(ty == XS_GET_DOMAIN_PATH && strcmp(body, "/local/domain/12") == 0,
	      "domain path %s", body);
	ty = talk(fd, XS_IS_DOMAIN_INTRODUCED, 4, 0, "0", 2, NULL);
	CHECK(ty == XS_IS_DOMAIN_INTRODUCED && strcmp(body, "T") == 0, "T");
	ty = talk(fd, XS_IS_DOMAIN_INTRODUCED, 4, 0, "3", 2, NULL);
	CHECK(ty == XS_IS_DOMAIN_INTRODUCED && strcmp(body, "F") == 0, "F");
	ty = talk(fd, XS_CONTROL, 5, 0, "check", 6, NULL);
	CHECK(ty == XS_CONTROL && strcmp(body, "OK") == 0, "control check");

	/* Watch events: req_id and tx_id 0, payload path NUL token NUL. */
	ty = talk(fd, XS_WATCH, 6, 0, "/wire/w\0tok", 12, NULL);
	CHECK(ty == XS_WATCH, "watch");
	len = (uint32_t)raw_recv(fd, &t, &rid, &tid, body, sizeof(body), 2000);
	CHECK(t == XS_WATCH_EVENT && rid == 0 && tid == 0 && len == 12 &&
	      memcmp(body, "/wire/w\0tok\0", 12) == 0, "initial event framing");
	CHECK(raw_send(fd, XS_WRITE, 7, 0, "/wire/w/x\0v", 11) == 0, "send");
	/* The event of our own write comes before the reply. */
	ty = raw_recv(fd, &t, &rid, &tid, body, sizeof(body), 2000);
	CHECK(ty == 14 && t == XS_WATCH_EVENT && rid == 0 && tid == 0 &&
	      memcmp(body, "/wire/w/x\0tok", 14) == 0, "event first: %d", ty);
	ty = raw_recv(fd, &t, &rid, NULL, body, sizeof(body), 2000);
	CHECK(ty == 3 && t == XS_WRITE && rid == 7, "then the reply");

	/* RESET_WATCHES forgets them all. */
	ty = talk(fd, XS_RESET_WATCHES, 8, 0, "", 1, NULL);
	CHECK(ty == XS_RESET_WATCHES, "reset watches");
	ty = talk(fd, XS_WRITE, 9, 0, "/wire/w/y\0v", 11, NULL);
	CHECK(ty == XS_WRITE, "no event after RESET_WATCHES (%d)", ty);
	ty = talk(fd, XS_UNWATCH, 10, 0, "/wire/w\0tok", 12, NULL);
	CHECK(is_error(ty, "ENOENT"), "watch gone");

	/* Pipelined requests are answered in order. */
	{
		char buf[64 * 30];
		struct xsd_sockmsg h = { XS_READ, 0, 0, 9 };
		size_t off = 0;
		unsigned int i;
		bool ok = true;

		for (i = 0; i < 64; i++) {
			h.req_id = 1000 + i;
			memcpy(buf + off, &h, sizeof(h));
			memcpy(buf + off + sizeof(h), "/wire/ok", 9);
			off += sizeof(h) + 9;
		}
		CHECK(write(fd, buf, off) == (ssize_t)off, "pipeline send");
		for (i = 0; i < 64; i++) {
			if (raw_recv(fd, &t, &rid, NULL, body, sizeof(body),
				     2000) != 3 || rid != 1000 + i ||
			    t != XS_READ)
				ok = false;
		}
		CHECK(ok, "64 pipelined replies in order");
	}
}

static void test_transactions_raw(int fd)
{
	uint32_t tx;
	int ty;

	ty = talk(fd, XS_TRANSACTION_START, 1, 0, "", 1, NULL);
	CHECK(ty == XS_TRANSACTION_START, "start");
	tx = (uint32_t)strtoul(body, NULL, 10);
	CHECK(tx != 0, "transaction id %s", body);
	ty = talk(fd, XS_TRANSACTION_START, 2, tx, "", 1, NULL);
	CHECK(is_error(ty, "EBUSY"), "nested start: %s", body);
	ty = talk(fd, XS_TRANSACTION_END, 3, tx, "X", 2, NULL);
	CHECK(is_error(ty, "EINVAL"), "end with bad argument");
	ty = talk(fd, XS_WRITE, 4, tx, "/wire/t\0v", 9, NULL);
	CHECK(ty == XS_WRITE, "write in tx (tx_id echoed)");
	ty = talk(fd, XS_TRANSACTION_END, 5, tx, "T", 2, NULL);
	CHECK(ty == XS_TRANSACTION_END, "commit");
	ty = talk(fd, XS_READ, 6, tx, "/wire/t", 8, NULL);
	CHECK(is_error(ty, "ENOENT"), "tx id gone after end");
	ty = talk(fd, XS_TRANSACTION_END, 7, 0, "T", 2, NULL);
	CHECK(is_error(ty, "ENOENT"), "end without transaction");
	/* Watches ignore the transaction id. */
	ty = talk(fd, XS_WATCH, 8, 12345, "/wire/tw\0t", 11, NULL);
	CHECK(ty == XS_WATCH, "watch with bogus tx id");
	ty = raw_recv(fd, NULL, NULL, NULL, body, sizeof(body), 2000);
	CHECK(ty > 0, "initial event");
	ty = talk(fd, XS_RESET_WATCHES, 9, 0, "", 1, NULL);
}

static void test_directory_part(int fd)
{
	char req[64];
	uint32_t len;
	int ty, i;

	for (i = 0; i < 3; i++) {
		snprintf(req, sizeof(req), "/wire/dir/k%d", i);
		memcpy(req + strlen(req) + 1, "", 1);
		talk(fd, XS_WRITE, 1, 0, req, strlen(req) + 1, NULL);
	}
	ty = talk(fd, XS_DIRECTORY, 2, 0, "/wire/dir", 10, &len);
	CHECK(ty == XS_DIRECTORY && len == 9 &&
	      memcmp(body, "k0\0k1\0k2\0", 9) == 0, "directory payload");
	ty = talk(fd, XS_DIRECTORY_PART, 3, 0, "/wire/dir\0" "0", 12, &len);
	CHECK(ty == XS_DIRECTORY_PART, "directory_part");
	if (ty == XS_DIRECTORY_PART) {
		size_t gl = strlen(body) + 1;

		CHECK(gl > 1 && len == gl + 10 &&
		      memcmp(body + gl, "k0\0k1\0k2\0\0", 10) == 0,
		      "generation, names, final empty string");
	}
	ty = talk(fd, XS_DIRECTORY_PART, 4, 0, "/wire/dir\0" "3", 12, &len);
	CHECK(ty == XS_DIRECTORY_PART && len == strlen(body) + 1 + 7 &&
	      memcmp(body + strlen(body) + 1, "k1\0k2\0\0", 7) == 0,
	      "from an offset");
	ty = talk(fd, XS_DIRECTORY_PART, 5, 0, "/wire/dir\0" "99", 13, &len);
	CHECK(ty == XS_DIRECTORY_PART && len == strlen(body) + 2,
	      "offset past the end");
	ty = talk(fd, XS_DIRECTORY_PART, 6, 0, "/wire/dir", 10, NULL);
	CHECK(is_error(ty, "EINVAL"), "directory_part without offset");
}

static void test_malformed(void)
{
	static const uint32_t bad_types[] = {
		XS_WATCH_EVENT, XS_ERROR, 20, XS_TYPE_COUNT, 999, 0xffff,
		0xffffffffu,
	};
	char junk[16384];
	unsigned int i, seed = 12345;
	int fd, ty;

	fd = raw_as(&d, 0);
	for (i = 0; i < sizeof(bad_types) / sizeof(bad_types[0]); i++) {
		ty = talk(fd, bad_types[i], 50 + i, 0, "/x", 3, NULL);
		CHECK(is_error(ty, "ENOSYS"), "type %u: %d %s", bad_types[i],
		      ty, body);
	}
	/* Arguments without their terminating NUL. */
	ty = talk(fd, XS_READ, 60, 0, "/wire/ok", 8, NULL);
	CHECK(is_error(ty, "EINVAL"), "read without NUL");
	ty = talk(fd, XS_READ, 61, 0, "", 0, NULL);
	CHECK(is_error(ty, "EINVAL"), "read without path");
	ty = talk(fd, XS_READ, 62, 0, "/wire/ok\0extra", 15, NULL);
	CHECK(is_error(ty, "EINVAL"), "read with two strings");
	ty = talk(fd, XS_WRITE, 63, 0, "/wire/nonul", 11, NULL);
	CHECK(is_error(ty, "EINVAL"), "write without NUL");
	ty = talk(fd, XS_WATCH, 64, 0, "/wire/w", 8, NULL);
	CHECK(is_error(ty, "EINVAL"), "watch without token");
	ty = talk(fd, XS_SET_PERMS, 65, 0, "/wire/ok\0q7", 12, NULL);
	CHECK(is_error(ty, "EINVAL"), "bad permission letter");
	ty = talk(fd, XS_SET_PERMS, 66, 0, "/wire/ok\0r99999", 16, NULL);
	CHECK(is_error(ty, "EINVAL"), "domid out of range");
	ty = talk(fd, XS_SET_PERMS, 67, 0, "/wire/ok", 9, NULL);
	CHECK(is_error(ty, "EINVAL"), "set_perms without permissions");
	ty = talk(fd, XS_INTRODUCE, 68, 0, "4\0" "1\0" "0", 6, NULL);
	CHECK(is_error(ty, "EINVAL"), "introduce with port 0");
	ty = talk(fd, XS_INTRODUCE, 69, 0, "x\0" "1\0" "1", 6, NULL);
	CHECK(is_error(ty, "EINVAL"), "introduce with bad domid");
	ty = talk(fd, XS_RELEASE, 70, 0, "0", 2, NULL);
	CHECK(is_error(ty, "EINVAL"), "release dom0");
	ty = talk(fd, XS_RELEASE, 71, 0, "44", 3, NULL);
	CHECK(is_error(ty, "ENOENT"), "release unknown domain");
	ty = talk(fd, XS_CONTROL, 72, 0, "no-such-command", 16, NULL);
	CHECK(is_error(ty, "EINVAL"), "unknown control command");
	memset(junk, 'a', 3500);
	junk[0] = '/';
	junk[3500] = '\0';
	ty = talk(fd, XS_READ, 73, 0, junk, 3501, NULL);
	CHECK(is_error(ty, "EINVAL"), "path over 3072 bytes");
	CHECK(talk(fd, XS_READ, 74, 0, "/wire/ok", 9, NULL) == XS_READ,
	      "connection still usable after errors");
	close(fd);
	CHECK(alive(), "alive after bad requests");

	/* Announcing more than 4096 bytes gets the connection dropped. */
	fd = raw_as(&d, 0);
	{
		struct xsd_sockmsg h = { XS_READ, 1, 0,
					 XENSTORE_PAYLOAD_MAX + 1 };

		CHECK(write(fd, &h, sizeof(h)) == sizeof(h), "send header");
		CHECK(closed_by_daemon(fd), "oversized message closes");
	}
	close(fd);
	CHECK(alive(), "alive after oversized message");

	/* Exactly 4096 is fine. */
	fd = raw_as(&d, 0);
	memset(junk, 'b', sizeof(junk));
	memcpy(junk, "/wire/big", 10);
	ty = talk(fd, XS_WRITE, 80, 0, junk, XENSTORE_PAYLOAD_MAX, NULL);
	CHECK(ty == XS_WRITE, "4096-byte write");
	close(fd);

	/* Disconnects in the middle of a header and of a payload. */
	fd = raw_as(&d, 0);
	CHECK(write(fd, "\x02\x00\x00", 3) == 3, "half header");
	close(fd);
	fd = raw_as(&d, 0);
	{
		struct xsd_sockmsg h = { XS_WRITE, 1, 0, 100 };

		CHECK(write(fd, &h, sizeof(h)) == sizeof(h) &&
		      write(fd, "/wire/half\0", 11) == 11, "half payload");
	}
	close(fd);
	CHECK(alive(), "alive after disconnects mid-message");

	/* Garbage, as dom0 and as a guest: whatever the daemon makes of it,
	 * it survives. */
	fd = raw_as(&d, 0);
	ty = talk(fd, XS_INTRODUCE, 90, 0, "9\0" "1\0" "1", 6, NULL);
	CHECK(ty == XS_INTRODUCE, "introduce 9");
	close(fd);
	for (i = 0; i < 8; i++) {
		size_t k;

		fd = raw_as(&d, i % 2 ? 0 : 9);
		CHECK(fd >= 0, "connect for garbage");
		for (k = 0; k < sizeof(junk); k++) {
			seed = seed * 1103515245u + 12345u;
			junk[k] = (char)(seed >> 16);
		}
		/* Keep lengths small now and then so some parse. */
		if (i & 4)
			for (k = 12; k + 4 <= sizeof(junk); k += 64)
				memset(junk + k, 0, 3);
		if (fd >= 0) {
			if (write(fd, junk, sizeof(junk)) < 0)
				(void)0;	/* the daemon may hang up */
			close(fd);
		}
	}
	CHECK(alive(), "alive after garbage");
}

static void test_guest_raw(void)
{
	int fd0 = raw_as(&d, 0), fd5, ty;

	ty = talk(fd0, XS_INTRODUCE, 1, 0, "5\0" "123\0" "9", 8, NULL);
	CHECK(ty == XS_INTRODUCE, "introduce 5: %s", body);
	ty = talk(fd0, XS_INTRODUCE, 2, 0, "5\0" "123\0" "9", 8, NULL);
	CHECK(ty == XS_INTRODUCE, "introduce again is accepted");
	fd5 = raw_as(&d, 5);
	CHECK(fd5 >= 0, "connect as 5");
	ty = talk(fd5, XS_IS_DOMAIN_INTRODUCED, 3, 0, "5", 2, NULL);
	CHECK(is_error(ty, "EACCES"), "guest IS_DOMAIN_INTRODUCED");
	ty = talk(fd5, XS_CONTROL, 4, 0, "check", 6, NULL);
	CHECK(is_error(ty, "EACCES"), "guest CONTROL");
	ty = talk(fd5, XS_SET_TARGET, 5, 0, "5\0" "0", 4, NULL);
	CHECK(is_error(ty, "EACCES"), "guest SET_TARGET");
	/* Its identity is the socket: it cannot claim dom0's home. */
	ty = talk(fd5, XS_WRITE, 6, 0, "/local/domain/0/x\0v", 19, NULL);
	CHECK(is_error(ty, "EACCES"), "guest writes dom0's home");
	ty = talk(fd5, XS_GET_DOMAIN_PATH, 7, 0, "5", 2, NULL);
	CHECK(ty == XS_GET_DOMAIN_PATH, "guest domain path");
	/* A relative path longer than 2048 bytes is refused for guests. */
	{
		char p[2100];

		memset(p, 'c', sizeof(p));
		p[sizeof(p) - 1] = '\0';
		ty = talk(fd5, XS_READ, 8, 0, p, sizeof(p), NULL);
		CHECK(is_error(ty, "EINVAL"), "long relative path: %s", body);
	}
	ty = talk(fd0, XS_RELEASE, 9, 0, "5", 2, NULL);
	CHECK(ty == XS_RELEASE, "release");
	CHECK(closed_by_daemon(fd5), "release closes the guest connection");
	close(fd5);
	close(fd0);
}

int main(void)
{
	int fd;

	daemon_start(&d, NULL);
	fd = raw_as(&d, 0);
	if (fd < 0) {
		perror("connect");
		daemon_stop(&d);
		return 1;
	}
	test_framing(fd);
	test_transactions_raw(fd);
	test_directory_part(fd);
	close(fd);
	test_malformed();
	test_guest_raw();
	CHECK(alive(), "daemon answers at the end");
	CHECK(daemon_alive(&d), "daemon process running");
	daemon_stop(&d);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
