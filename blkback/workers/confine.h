/*
 * confine.h: what a worker (worker.h) does to itself before it touches
 * anything a guest controls, and what the main process can tell at start
 * about which of those steps this host does not allow.
 */
#ifndef XBD_BACK_CONFINE_H
#define XBD_BACK_CONFINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct xbd_confine_req {
	uint32_t uid, gid;       /* the worker's own */
	pid_t main_pid;          /* it dies with this process */
	bool sim;                /* on the simulator (its files stay reachable) */
	const char *sim_dir;     /* the simulated host's directory (absolute) */
	bool sanitizers;         /* ASan/UBSan build: their runtime's calls too */
};

/*
 * Confine the calling process, which must have one thread: a private
 * mount namespace whose root is an empty read-only tmpfs (on the
 * simulator with its host's directory and memory directory bind-mounted
 * at their own paths), its own uid and gid and no supplementary groups
 * (every capability gone, the bounding set emptied), death with the main
 * process, no_new_privs, resource limits, and a seccomp filter that
 * allows exactly the system calls the data path makes and kills the
 * process on any other, after one line on stderr that names the call.  Returns the XBD_CONFINE_* steps that were not
 * possible (each failure is logged); a step that fails is skipped, not
 * fatal, except that a worker whose main process is already gone exits.
 */
uint32_t xbd_confine(const struct xbd_confine_req *c);

/*
 * In the main process at start: the steps a worker cannot take on this
 * host and why ("its own uid (not root)"), for one log line.
 */
uint32_t xbd_confine_predict(bool sim, char *buf, size_t len);

#endif /* XBD_BACK_CONFINE_H */
