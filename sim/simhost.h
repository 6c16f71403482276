/*
 * simhost.h: the simulated hypervisor's host-wide state (the part of Xen
 * that is not xenstore): domains, their guest memory and grant tables, and
 * the event channel table, all kept under DIR/hv/ so that every process of
 * the simulated host shares them.  Used by the `xbd-sim` command; processes
 * that act as a domain reach the same state through platform/platform.h.
 *
 * Functions return 0 or a negative errno value.
 */
#ifndef XBD_SIMHOST_H
#define XBD_SIMHOST_H

#include <stdbool.h>
#include <stdint.h>

/* Guest memory per simulated domain unless told otherwise (sparse). */
#define XBD_SIM_DEFAULT_MEM_BYTES (256ull << 20)
/* Highest domid the simulator hands out (DOMID_FIRST_RESERVED - 1). */
#define XBD_SIM_MAX_DOMID 0x7fefu

/*
 * Create the hypervisor state of a new simulated host under dir/hv/.  This
 * starts the host's keeper, a small background process (named
 * xbd-sim-keeper) that holds the memory of the simulated hypervisor and
 * its domains, sealed so that no process can shrink what others map.
 */
int xbd_sim_host_init(const char *dir);
/*
 * Remove dir/hv/ and everything in it (domains must be destroyed first or
 * are dropped), and stop the keeper.  A keeper whose dir/hv/ vanished
 * without this stops by itself within seconds.
 */
int xbd_sim_host_cleanup(const char *dir);

/* Create domain domid with mem_bytes of guest memory and an empty grant table. -EEXIST if it exists. */
int xbd_sim_domain_create(const char *dir, uint32_t domid, uint64_t mem_bytes);
/*
 * Destroy domain domid: it becomes dying at once (maps of its grants fail
 * with GNTST_bad_domain, its event channels close), its memory and grant
 * table are freed once nothing maps them any more.  -ENOENT if no such domain.
 */
int xbd_sim_domain_destroy(const char *dir, uint32_t domid);
/* 1 if domid exists (running or dying), 0 if not, negative errno on error. */
int xbd_sim_domain_exists(const char *dir, uint32_t domid);
/* Lowest unused domid >= 1, or -ENOSPC. */
int xbd_sim_domain_free_id(const char *dir);

/* One existing domain, as xbd_sim_domain_list reports it. */
struct xbd_sim_domain_info {
	uint32_t domid;
	bool dying;          /* destroyed, but some process still maps its pages */
	uint64_t mem_bytes;
};
/*
 * Fill out[0..max) with the existing domains in domid order; returns how
 * many exist (which may be more than max) or a negative errno.
 */
int xbd_sim_domain_list(const char *dir, struct xbd_sim_domain_info *out,
			unsigned int max);

/*
 * Whether process pid is gone: it does not exist, or it is a zombie (it
 * has exited and closed its files; whoever inherited it has not reaped it
 * yet), where /proc tells.  Without /proc a zombie counts as alive.  Its
 * only calls are kill(pid, 0), and open (O_RDONLY | O_CLOEXEC), read and
 * close of /proc files (xbd-back's seccomp allow-list has them).
 */
bool xbd_sim_pid_gone(uint32_t pid);

#endif /* XBD_SIMHOST_H */
