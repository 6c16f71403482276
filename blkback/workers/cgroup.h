/*
 * cgroup.h: proportional shares between guests (cgroups = auto|0|1).
 * With workers = 1 each guest domain's disks are served by a worker of
 * its own; here each worker goes into a cgroup v2 of its own below the
 * service's, <own>/dom<DOMID>, whose io.weight and cpu.weight come from
 * its disks' io-weight and cpu-weight settings.  cgroup v2 lets only
 * leaves hold processes once controllers are enabled for children, so
 * the main process moves to the leaf <own>/main first.
 *
 * The service's cgroup must be delegated to us (systemd's Delegate=,
 * which marks it with the xattr trusted.delegate since systemd 251):
 * without that, systemd owns the tree below it and may undo what we do.
 * io.weight only shares a disk's time where the disk has io.cost
 * enabled (io.cost.qos at the root) or uses BFQ (io.bfq.weight, written
 * too); cpu.weight always works.
 *
 * Every failure here is said and survived: a worker that cannot be
 * placed serves from the main process's cgroup.  Main process only.
 */
#ifndef XBD_BACK_CGROUP_H
#define XBD_BACK_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

#include "blkback/settings/options.h"

struct xbd_cgroup;

/*
 * At start: decide from opts (cgroups, workers) whether workers get
 * cgroups of their own, set the tree up, and say so (or why not and
 * what to do) in one line.  *out is NULL when they do not.  Returns 0,
 * or -EINVAL when cgroups = 1 and they cannot (the line said why).
 */
int xbd_cgroup_open(const struct xbd_back_opts *opts, struct xbd_cgroup **out);
void xbd_cgroup_close(struct xbd_cgroup *cg);
/*
 * A new worker: its cgroup <own>/dom<domid>, and pid moved into it.
 * 0 or -errno (said, rate-limited: the worker serves where it is).
 */
int xbd_cgroup_place(struct xbd_cgroup *cg, uint32_t domid, pid_t pid);
/*
 * The worker's weights (0: the cgroup default); each written only if it
 * differs from *io_now / *cpu_now, which say what was written last (0:
 * nothing yet) and are updated.
 */
void xbd_cgroup_weights(struct xbd_cgroup *cg, uint32_t domid, unsigned int io,
			unsigned int cpu, unsigned int *io_now, unsigned int *cpu_now);
/* The worker was reaped: remove its cgroup. */
void xbd_cgroup_remove(struct xbd_cgroup *cg, uint32_t domid);

#endif /* XBD_BACK_CGROUP_H */
