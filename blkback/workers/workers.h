/*
 * workers.h: what the control plane asks of the workers, the one header
 * of workers/ that control/ includes.  The supervisor (supervisor.c)
 * starts one worker process per frontend domain (worker.h says what a
 * worker is and what the two processes say to each other), opens a
 * device's disk there, and serves that device's rings through its proxy
 * (ring-impl.h: one more way of serving a ring, beside this process's
 * threads).  It knows a device only as the binding the control plane
 * made for it (struct xbd_wdev: its disk, and a function to call when the
 * device should take its next step), and never sees the control plane's
 * devices.
 */
#ifndef XBD_BACK_WORKERS_H
#define XBD_BACK_WORKERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "blkback/datapath/dataplane.h"
#include "blkback/settings/options.h"

/* The supervisor of this daemon's workers. */
struct xbd_workers;
/* A device as the supervisor knows it: its disk, bound to its domain's worker or not. */
struct xbd_wdev;

/*
 * workers = 1: start the supervisor (*out) and say which confinement
 * steps this host skips; workers = 0: *out NULL (and, with cgroups = 1,
 * the failure that cgroups need workers).  host is what rings run here
 * use (its platform, wake_fd, SIGTERM's state); 0 or -errno.
 */
int xbd_workers_init(const struct xbd_back_opts *opts, struct xbd_ring_host *host,
		     uint32_t self_domid, struct xbd_workers **out);
/* After every ring stopped: every worker gone (waited for, bounded), everything freed. */
void xbd_workers_close(struct xbd_workers *ws);
/* Readable when a worker has something to say: then xbd_workers_dispatch. */
int xbd_workers_fd(const struct xbd_workers *ws);
void xbd_workers_dispatch(struct xbd_workers *ws);
/* A child exited: if it was a worker, handle its death (restart, or give up); true then. */
bool xbd_workers_reaped(struct xbd_workers *ws, pid_t pid, int status);
/* SIGTERM: every worker stops its rings, answering what it took. */
void xbd_workers_shutdown(struct xbd_workers *ws);
void xbd_workers_log_level(struct xbd_workers *ws, int level);
/*
 * A device was given an io-weight or cpu-weight (its settings, or xbdctl
 * set): where this daemon cannot apply weights and has not said so yet
 * (nothing asked for one at start), say it now, once, with why.
 */
void xbd_workers_weights_asked(void);

/*
 * A device's binding, for its whole life: disk is what its rings read
 * (the supervisor reads it too: it opens the disk in the worker, and
 * counts a worker's log lines against its limits); step(arg) is called
 * when the device should take its next step (its worker started, a ring's
 * start was answered, its worker died).  ws NULL (workers = 0): NULL, and
 * every call below with it serves the device here.
 */
struct xbd_wdev *xbd_wdev_new(struct xbd_workers *ws, struct xbd_disk *disk,
			      void (*step)(void *arg), void *arg);
/* The device goes for good (unbound from its worker if it still was). */
void xbd_wdev_free(struct xbd_wdev *wd);
/*
 * Where this connection's rings run (*srv): the domain's worker or, for
 * an engine that cannot be served elsewhere, this process.  Binds the
 * device to its domain's worker, which is started if none runs: 0 when
 * it serves (or none is needed), -EINPROGRESS while it starts (its READY
 * calls the device's step), or -errno.
 */
int xbd_worker_bind(struct xbd_wdev *wd, struct xbd_ring_server **srv);
/* After xbd_worker_bind said 0: open this connection's disk in the worker. */
int xbd_worker_attach(struct xbd_wdev *wd);
/*
 * Every ring of this connection was released: close the disk in its
 * worker and unbind it (a worker runs while its domain has a connected
 * device; the last one's disconnect lets it exit).
 */
void xbd_worker_dev_done(struct xbd_wdev *wd);
/* The disk's size changed (disk->lim.nr_sectors): its worker's rings see it too. */
void xbd_worker_resize(struct xbd_wdev *wd);
/*
 * Run-time settings changed (disk->o has them; o and mask: the ones set):
 * its worker's rings take them too.  True if the device is bound to a
 * worker, which then keeps its I/O limiter; false: this process does.
 */
bool xbd_worker_set(struct xbd_wdev *wd, const struct xbd_disk_opts *o, uint64_t mask);
/*
 * Its changed-block tracking was opened while it is served by its worker
 * (disk->cbt_fd, disk->view_fd): the worker's rings take it.  False if it
 * is not bound to a worker.
 */
bool xbd_worker_cbt(struct xbd_wdev *wd);
/*
 * Whether the device is bound to a worker, and if so that worker's pid
 * (0 while none runs or it starts), uid and restarts, for xbdctl.
 */
bool xbd_worker_info(const struct xbd_wdev *wd, pid_t *pid, uint32_t *uid,
		     unsigned int *restarts);

/* `xbd-back --worker FD` (worker.c): serve until told to exit; the exit status. */
int xbd_worker_main(int argc, char **argv);

#endif /* XBD_BACK_WORKERS_H */
