/*
 * sim/layout.h: what only the simulator itself uses of its hypervisor
 * state (sim/hypervisor.h has the layout and the operations platform/
 * reaches): the host file's lock, the keeper of the memory files, and a
 * domain's files by name.
 */
#ifndef XBD_SIM_LAYOUT_H
#define XBD_SIM_LAYOUT_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>

#include "sim/hypervisor.h"

/* ---- the host file's lock (sim/host.c) ---- */

int sim_host_lock(struct sim_host *host);
void sim_host_unlock(struct sim_host *host);
/* With the host lock held: free a dying domain nobody maps any more. */
void sim_host_try_finalize_locked(struct sim_hostmap *h, uint32_t domid);

/* ---- the keeper of the memory files (sim/keeper.c) ---- */

enum sim_keeper_op {
	SIM_KEEPER_HOST = 1, /* -> the host file */
	SIM_KEEPER_PUT,      /* domid, gen + 3 fds (mem, gnt, xen): keep them */
	SIM_KEEPER_GET,      /* domid, gen -> its 3 fds */
	SIM_KEEPER_DROP,     /* domid, gen: forget them */
	SIM_KEEPER_STOP,     /* exit (the host is being removed) */
};
#define SIM_KEEPER_NFDS 3
/* The seals every memory file carries before anyone maps it. */
#define SIM_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/*
 * Start the keeper serving the socket at path, holding host_fd; it runs
 * until SIM_KEEPER_STOP or until its socket is removed or replaced.
 */
int sim_keeper_start(const char *path, int host_fd);
/*
 * One request: sends send[0..nsend), receives up to SIM_KEEPER_NFDS fds
 * into recv[SIM_KEEPER_NFDS] (the rest set to -1; closed if recv is NULL);
 * returns the number received or a negative errno (-ENOENT or
 * -ECONNREFUSED: no keeper, -ESRCH: no such domain incarnation).
 */
int sim_keeper_call(const char *path, uint32_t op, uint32_t domid, uint32_t gen,
		    const int *send, unsigned int nsend, int *recv);
/* A new memory file of size bytes, sealed; a negative errno on failure. */
int sim_memfd_create(const char *name, uint64_t size, void (*init)(void *, void *),
		     void *arg);
/* 0 if fd is a memory file sealed as above (its size can never change). */
int sim_memfd_check(int fd, uint64_t *size);

/* ---- a domain's files (sim/dom.c) ---- */

size_t sim_gnt_file_size(uint32_t mem_pages);
void sim_dom_path(const struct sim_hostmap *h, uint32_t domid, const char *ext,
		  char *buf, size_t len);
/* Whether some process still marks itself as mapping incarnation gen of domid. */
bool sim_dom_mapped(struct sim_hostmap *h, uint32_t domid, uint32_t gen);

/* ---- grants (sim/grant.c) ---- */

/* Drop every pin domain dead holds on g's grants (dead is being destroyed). */
int sim_gnt_release_pins_of(struct sim_dom *g, uint32_t dead);

#endif /* XBD_SIM_LAYOUT_H */
