/*
 * harness.h: helpers for the xbd-xenstored tests: start a private daemon in
 * a temporary folder, open libxenstore handles or raw sockets as a given
 * domain, and count failed checks.
 */
#ifndef XBD_TESTS_XENSTORED_HARNESS_H
#define XBD_TESTS_XENSTORED_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <xenstore.h>

struct daemon {
	pid_t pid;
	char tmp[64];		/* mktemp folder, removed at stop */
	char xsdir[96];		/* tmp/xs */
};

extern int failures;

#define CHECK(cond, ...) do {						\
	if (!(cond)) {							\
		failures++;						\
		fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__,	\
			#cond);						\
		fprintf(stderr, __VA_ARGS__);				\
		fputc('\n', stderr);					\
	}								\
} while (0)

/* Starts xbd-xenstored in the foreground with extra arguments (NULL-ended
 * list); it dies with the test process.  Exits 1 if it cannot start. */
void daemon_start(struct daemon *d, ...);
void daemon_stop(struct daemon *d);
bool daemon_alive(const struct daemon *d);
/* Path of domid's socket (domain 0: the privileged socket). */
bool daemon_socket(const struct daemon *d, unsigned int domid, char *buf,
		   size_t len);
/* libxenstore handle speaking as domid (through XENSTORED_PATH). */
struct xs_handle *xs_as(const struct daemon *d, unsigned int domid);
/* Raw connected socket as domid, or -1. */
int raw_as(const struct daemon *d, unsigned int domid);

/* Raw protocol: send one message, receive one (payload NUL-terminated). */
int raw_send(int fd, uint32_t type, uint32_t req_id, uint32_t tx_id,
	     const void *body, uint32_t len);
/* Returns payload length, -1 on EOF/error, -2 on timeout (ms). */
int raw_recv(int fd, uint32_t *type, uint32_t *req_id, uint32_t *tx_id,
	     char *body, size_t cap, int timeout_ms);

/* Sets up domain domid the way libxl does: home owned by dom0 and readable
 * by the domain, data/ device/ control/ writable by it; then INTRODUCE. */
void make_domain(struct xs_handle *h0, unsigned int domid);

/* Waits for one watch event; returns true and fills path/token. */
bool next_event(struct xs_handle *h, int timeout_ms, char *path,
		size_t plen, char *token, size_t tlen);
/* True if no watch event arrives within timeout_ms. */
bool no_event(struct xs_handle *h, int timeout_ms);

#endif
