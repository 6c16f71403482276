/*
 * bind.c: a device as the supervisor knows it (struct xbd_wdev,
 * workers.h): bound to its domain's worker while a connection of it runs
 * there (a worker runs while its domain has such a device), its disk
 * opened in the worker and closed, its size and run-time settings handed
 * on (the worker's cgroup weights from its devices' settings: record.c).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/workers/cgroup.h"
#include "blkback/workers/supervisor.h"
#include "common/clock.h"

/* Open wd's connection in the worker (a new device number). */
int wdev_open(struct xbd_worker *w, struct xbd_wdev *wd)
{
	const struct xbd_disk *disk = wd->disk;
	struct xbd_wmsg m;
	struct xbd_wmsg_dev_open *o = &m.u.dev_open;
	int fds[XBD_WMSG_MAX_FDS], err;

	memset(&m, 0, sizeof(m));
	err = xbd_store_export(disk->eng, disk->store, &o->store, fds);
	if (err)
		return err;
	if (!++w->next_wid)
		++w->next_wid;
	m.type = XBD_WMSG_DEV_OPEN;
	m.dev = w->next_wid;
	snprintf(o->type, sizeof(o->type), "%s", disk->type);
	o->domid = disk->domid;
	o->devid = disk->devid;
	snprintf(o->name, sizeof(o->name), "%s", disk->name);
	o->o = disk->o;
	o->lim = disk->lim;
	o->abi = disk->abi;
	o->nr_rings = disk->nr_rings;
	o->persistent = disk->persistent;
	o->copy = disk->copy;
	o->thr = disk->thr_state;
	/* Its changed-block tracking, which its rings map (datapath/cbt.h). */
	if (disk->cbt_fd >= 0 && o->store.nfds + 2 <= XBD_WMSG_MAX_FDS) {
		fds[o->store.nfds + o->cbt_fds++] = disk->cbt_fd;
		if (disk->view_fd >= 0)
			fds[o->store.nfds + o->cbt_fds++] = disk->view_fd;
	}
	err = worker_send(w, &m, fds, o->store.nfds + o->cbt_fds);
	if (err)
		return err;
	wd->wid = m.dev;
	return 0;
}

struct xbd_wdev *xbd_wdev_new(struct xbd_workers *ws, struct xbd_disk *disk,
			      void (*step)(void *arg), void *arg)
{
	struct xbd_wdev *wd;

	if (!ws)
		return NULL;
	wd = calloc(1, sizeof(*wd));
	if (!wd)
		return NULL;
	wd->srv.ops = &wring_ops;
	wd->ws = ws;
	wd->disk = disk;
	wd->step = step;
	wd->arg = arg;
	return wd;
}

int xbd_worker_bind(struct xbd_wdev *wd, struct xbd_ring_server **srv)
{
	struct xbd_store_export trial;
	int tfds[XBD_STORE_EXPORT_FDS];
	struct xbd_worker *w;
	int err;

	*srv = &xbd_ring_here;
	if (!wd)
		return 0;
	wd->wid = 0;
	/* (The export hands out the store's own fds, no copies: a trial costs nothing.) */
	memset(&trial, 0, sizeof(trial));
	if (xbd_store_export(wd->disk->eng, wd->disk->store, &trial, tfds) == -EOPNOTSUPP) {
		if (!wd->said_here)
			XBD_DISK_LOG(wd->disk, XBD_LOG_INFO, "served by the main process: %s%s engine cannot "
			     "run in a confined worker yet", trial.engine[0] ? "the store under its "
			     : "its ", wd->disk->eng->name);
		wd->said_here = true;
		return 0;
	}
	w = wd->worker ? wd->worker : worker_get(wd->ws, wd->disk->domid);
	if (!w)
		return -ENOMEM;
	if (!wd->worker) {
		wd->worker = w;
		wd->next = w->devs;
		w->devs = wd;
		w->refs++;
		worker_weights(w);
	}
	*srv = &wd->srv;
	/*
	 * Told to exit (its domain had no device left) when a device of the
	 * domain comes back: it goes first (by its exit deadline), then a new
	 * one starts for this device (xbd_workers_reaped calls its step).
	 */
	if (w->pid && w->exiting)
		return -EINPROGRESS;
	if (!w->pid) {
		unsigned int n = worker_deaths_within(w, DEATH_WINDOW_MS);

		if (n >= wd->ws->opts->worker_restarts) {
			XBD_DISK_LOG(wd->disk, XBD_LOG_ERR, "%s died %u times within %u s: not started again yet",
			     w->name, n, DEATH_WINDOW_MS / 1000);
			return -EAGAIN;
		}
		err = worker_start(w);
		if (err)
			return err;
	}
	return worker_starting(w) ? -EINPROGRESS : 0;
}

int xbd_worker_attach(struct xbd_wdev *wd)
{
	int err;

	if (!wd || !wd->worker)
		return 0; /* served here */
	if (!worker_ready_now(wd->worker))
		err = -ESRCH;
	else
		err = wdev_open(wd->worker, wd);
	if (err)
		XBD_DISK_LOG(wd->disk, XBD_LOG_ERR, "cannot hand the disk to %s: %s", wd->worker->name,
		     strerror(-err));
	return err;
}

/* wd leaves its worker, which exits with its domain's last device. */
static void unbind(struct xbd_wdev *wd)
{
	struct xbd_worker *w = wd->worker;
	struct xbd_wdev **pp;
	struct xbd_wmsg m;

	if (!w)
		return;
	for (pp = &w->devs; *pp; pp = &(*pp)->next)
		if (*pp == wd) {
			*pp = wd->next;
			break;
		}
	wd->next = NULL;
	wd->worker = NULL;
	if (--w->refs) {
		worker_weights(w);
		return;
	}
	if (!w->pid) {
		worker_idle(w);
		return;
	}
	/* Its domain's last device: it exits once no ring runs (its death is then quiet). */
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_EXIT;
	w->exiting = true;
	if (worker_send(w, &m, NULL, 0)) {
		worker_kill_asked(w);
		return;
	}
	/* Every ring of its domain has exited already: nothing keeps it long. */
	w->exit_deadline = xbd_mono_ms() + ANSWER_TIMEOUT_MS;
	workers_arm_timer(w->ws);
}

void xbd_worker_dev_done(struct xbd_wdev *wd)
{
	struct xbd_wmsg m;

	if (!wd)
		return;
	if (wd->worker && wd->wid) {
		memset(&m, 0, sizeof(m));
		m.type = XBD_WMSG_DEV_CLOSE;
		m.dev = wd->wid;
		/* A worker that is gone took the device with it. */
		worker_send(wd->worker, &m, NULL, 0);
	}
	wd->wid = 0;
	/* Disconnected: the worker runs while its domain has a connected device. */
	unbind(wd);
}

void xbd_wdev_free(struct xbd_wdev *wd)
{
	if (!wd)
		return;
	unbind(wd);
	free(wd);
}

void xbd_worker_resize(struct xbd_wdev *wd)
{
	struct xbd_wmsg m;

	if (!wd || !wd->worker || !wd->wid)
		return;
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_RESIZE;
	m.dev = wd->wid;
	m.u.nr_sectors = __atomic_load_n(&wd->disk->lim.nr_sectors, __ATOMIC_RELAXED);
	worker_send(wd->worker, &m, NULL, 0);
}

bool xbd_worker_set(struct xbd_wdev *wd, const struct xbd_disk_opts *o, uint64_t mask)
{
	struct xbd_wmsg m;

	if (!wd || !wd->worker)
		return false;
	/* (wd->disk->o has the new values already.) */
	worker_weights(wd->worker);
	if (!wd->wid)
		return true;
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_SET;
	m.dev = wd->wid;
	m.u.set.o = *o;
	m.u.set.mask = mask;
	m.u.set.log_level = -100;
	worker_send(wd->worker, &m, NULL, 0);
	return true;
}

bool xbd_worker_cbt(struct xbd_wdev *wd)
{
	struct xbd_wmsg m;
	int fds[2];

	if (!wd || !wd->worker)
		return false;
	if (!wd->wid || wd->disk->cbt_fd < 0)
		return true; /* not opened there yet: DEV_OPEN will carry it */
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_CBT;
	m.dev = wd->wid;
	fds[0] = wd->disk->cbt_fd;
	fds[1] = wd->disk->view_fd;
	m.u.cbt_fds = fds[1] >= 0 ? 2 : 1;
	worker_send(wd->worker, &m, fds, m.u.cbt_fds);
	return true;
}

bool xbd_worker_info(const struct xbd_wdev *wd, pid_t *pid, uint32_t *uid,
		     unsigned int *restarts)
{
	const struct xbd_worker *w = wd ? wd->worker : NULL;

	if (!w)
		return false;
	*pid = worker_ready_now(w) ? w->pid : 0;
	*uid = w->uid;
	*restarts = w->restarts;
	return true;
}
