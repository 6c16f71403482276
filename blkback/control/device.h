/*
 * device.h: xbd-back's state: the daemon, its devices (one per backend
 * directory) and each device's rings.  The control plane (lifecycle.c) owns
 * devices and runs in the main thread; each ring has its own I/O thread
 * (datapath/ring-thread.c) and shares nothing mutable with other rings.
 *
 * The data path sees none of it: a ring reads its disk (struct xbd_disk,
 * datapath/dataplane.h), which a device holds, and its host (struct
 * xbd_ring_host), which the daemon holds; the control plane sees a ring
 * only as dataplane.h shows it, and the workers only as workers.h does.
 */
#ifndef XBD_BACK_DEVICE_H
#define XBD_BACK_DEVICE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "blkback/datapath/dataplane.h"
#include "blkback/datapath/stats.h"
#include "blkback/workers/workers.h"
#include "xenstore/xenbus.h"

/*
 * Where a device is in its life, as the control plane sees it; the
 * XenbusState machine (dev->state) runs while it is LIVE or CONNECTED.
 * It changes only through dev_set_life (lifecycle.h), whose table says
 * which edges are legal.
 */
enum xbd_dev_life {
	XBD_DEV_NEW = 0,         /* found; the toolstack has not finished writing it */
	XBD_DEV_LIVE,            /* followed through the XenbusState machine, no rings */
	XBD_DEV_CONNECTED,       /* its rings run */
	XBD_DEV_DEAD,            /* its frontend's domain is gone; waits for the toolstack */
	XBD_DEV_REMOVED,         /* its directory is gone; freed once its rings drained */
};

/* Work a device waits for, set by watch events and done once per pass (lifecycle.c). */
enum {
	XBD_DEV_PEND_BACKEND = 1u << 0,  /* the toolstack changed its backend directory */
	XBD_DEV_PEND_FRONTEND = 1u << 1, /* the frontend's state changed, or a retry is due */
};

/*
 * One ring of a device's connection: the ring (a closed box, served here
 * or by the device's worker) and what the control plane read from the
 * frontend and opened for it, which it was started with.
 */
struct xbd_dev_ring {
	struct xbd_ring *ring;
	struct xbd_ring_params p;
	int open_err;            /* its journal's file could not be opened (not started), or 0 */
};

/* A token bucket on one kind of state edge (device.c). */
struct xbd_edge_limit {
	uint64_t tat_ms;         /* theoretical arrival time of the next edge */
	bool engaged;            /* said so in the log; quiet again once the bucket is full */
};

/* A frontend domain's name and vm node as kept (device.c): longer ones are cut. */
#define XBD_DOM_NAME_MAX 65
#define XBD_DOM_VM_MAX 128

/* A failed open's reason, one line (storage.c). */
#define XBD_OPEN_WHY_MAX 512
/*
 * Where the storage's open stands, for the hotplug script (storage.c):
 * "open", "opening", "retrying: WHY" (a failure that may pass, tried
 * again) or "refused: WHY" (one that cannot: the script fails the disk).
 */
#define XBD_STORAGE_KEY "xbd-storage"

/* How a device has its image, for the others that have it too (sharing.c). */
enum xbd_share {
	XBD_SHARE_READ,          /* read-only: shares with readers and shared writers */
	XBD_SHARE_WRITE_SHARED,  /* read-write, sharing asked for (shared-write = 1, mode w!) */
	XBD_SHARE_WRITE,         /* read-write: shares with nobody but its own VM */
};
struct xbd_image;

struct xbd_dev {
	struct xbd_back *bk;
	struct xbd_dev *next;
	struct xbd_disk disk;    /* what its rings' threads see (type, ids, name, storage, settings, ...) */
	char bpath[XBD_XS_PATH_MAX];
	char fpath[XBD_XS_PATH_MAX];
	enum xbd_dev_life life;  /* dev_set_life only */
	enum xenbus_state state; /* the machine's own state: what we last wrote */
	bool online;             /* the toolstack's online flag */
	/* Its frontend's domain as the toolstack names it (dev_read_domain, device.c). */
	char dom_name[XBD_DOM_NAME_MAX]; /* its name ("" unknown), at most 64 bytes of it */
	char dom_vm[XBD_DOM_VM_MAX];     /* its vm node: one VM's, across a migration */
	bool incoming;           /* the name ends --incoming: xl's receiving end of a migration */
	struct xbd_xs_watch *fe_watch;
	/* Coalesced work: marks, and the device's place in bk's pending list. */
	unsigned int pending;
	bool queued;
	struct xbd_dev *pend_next;
	bool size_changed;          /* the engine's watch_size fired (atomic) */
	/* storage */
	char *params;
	struct xbd_engine_caps caps;
	bool readonly, cdrom, removable, discard_enable;
	struct xbd_dev_ring *rings; /* disk.nr_rings of them */
	struct xbd_ring_stats past; /* counters of rings already stopped */
	/*
	 * Each ring's counters as its last connection left them (by ring
	 * index), so that its Prometheus series stays while the device is
	 * closed instead of vanishing until the next connection.
	 */
	struct xbd_ring_stats *last;
	unsigned int nr_last;
	/*
	 * Asynchronous teardown: rings told to stop whose threads still wait
	 * for in-flight I/O.  Until they are released the device does not
	 * connect again, and what it would write to state waits in
	 * deferred_state (dev_write_state, device.c).
	 */
	struct xbd_dev_ring *drain;
	unsigned int nr_drain;
	int deferred_state;      /* -1: nothing to write after the drain */
	/* Taking over a device found Connected at start (lifecycle.c, dev_adopt). */
	bool resuming;           /* its rings resume from their journals */
	bool clean_stop;         /* the previous daemon stopped cleanly (its marker) */
	/* Rate limits on the edges that cost writes (device.c). */
	struct xbd_edge_limit offer_limit;   /* offering the device again (InitWait) */
	struct xbd_edge_limit connect_limit; /* mapping rings and starting threads */
	uint64_t retry_ms;       /* a rate-limited edge to retry then; 0: none */
	/* Its binding to its domain's worker (workers.h), or NULL: workers = 0. */
	struct xbd_wdev *wd;
	/* What serves this connection's rings (xbd_worker_bind): here, or its worker. */
	struct xbd_ring_server *server;
	bool connecting;         /* its rings' starts were asked for: the connect waits (connect.c) */
	unsigned int worker_retries; /* connects again after its worker died mid-connect (connect.c) */
	/*
	 * Its storage's open (storage.c): on a thread when remote; a failure
	 * that may pass (a server down) retried with backoff, one that cannot
	 * (a qcow2 image given as raw, a missing file) refused: not tried
	 * again until params or mode change, or SIGHUP.
	 */
	struct xbd_open_job *open_job; /* running, or done and not collected yet */
	int open_err;            /* the last open's failure, or 0 */
	unsigned int open_tries; /* failed opens in a row */
	uint64_t open_retry_ms;  /* when to try again after a failure */
	bool open_refused;       /* open_err can never pass as it is: no retry */
	enum xbd_share share;    /* how it has its image (mode, shared-write) */
	struct xbd_image *image; /* the file or block device it has (sharing.c), or NULL */
	char *refused_params;    /* the params refused (with refused_ro): a change tries again */
	bool refused_ro;
	char open_why[XBD_OPEN_WHY_MAX]; /* open_err as one line: the log, xbdctl, the hotplug script */
	char *storage_said;      /* what XBD_STORAGE_KEY holds (storage.c), or NULL */
	bool vbd3_published;     /* kthread-pid written, xentop's file made (vbd3-stats.c) */
	bool vbd3_failed;        /* could not: said once, not tried again */
	/* Its changed-block tracking (tracking.h), open while its storage is, or NULL. */
	struct xbd_track *track;
};

static inline bool xbd_dev_connected(const struct xbd_dev *dev)
{
	return dev->life == XBD_DEV_CONNECTED;
}

struct xbd_control;
struct xbd_track;

struct xbd_back {
	struct xbd_back_opts opts;
	struct xbd_ring_host host; /* the platform, wake_fd, SIGTERM's state: what rings run here use */
	struct xbd_xs *xs;
	uint32_t domid;
	struct xbd_dev *devs;
	struct xbd_dev *zombies; /* removed devices whose rings still drain */
	int timer_fd;            /* due at the earliest retry, log-limit report or size check */
	uint64_t size_check_ms;  /* when connected disks' sizes are read next (lifecycle.c) */
	/* Coalesced work for the next pass (lifecycle.c): devices in FIFO order. */
	struct xbd_dev *pend_head, *pend_tail;
	bool scan_pending[XBD_BACK_MAX_TYPES];
	bool release_pending;    /* @releaseDomain fired */
	char base[XBD_BACK_MAX_TYPES][XBD_XS_PATH_MAX]; /* /local/domain/<us>/backend/<type> */
	struct xbd_base_watch {
		struct xbd_back *bk;
		unsigned int idx;
	} bw[XBD_BACK_MAX_TYPES];
	struct xbd_xs_watch *watches[XBD_BACK_MAX_TYPES + 1]; /* + @releaseDomain */
	bool vbd_left_noted;     /* logged that kernel blkback has backend/vbd (lifecycle.c) */
	struct xbd_control *ctl; /* the control socket, or NULL */
	char *journal_dir;       /* the rings' crash journals (journal.h), or NULL: none */
	char *cbt_dir;           /* the disks' changed-block tracking (tracking.h), or NULL */
	struct xbd_workers *workers; /* the workers' supervisor (workers.h), or NULL */
	struct xbd_image *images;    /* the files and block devices its devices have (sharing.c) */
	unsigned int open_threads;   /* storage opens still on their threads (storage.c; atomic) */
	bool journals_checked;   /* journals of devices that are gone removed (once, at start) */
	int argc;                /* the command line, re-read with the file on SIGHUP */
	char **argv;
};

/*
 * SIGTERM's deadline: what a ring still has out with its storage this
 * long after it is left to its journal (the next daemon executes it
 * again), so that the daemon is gone within about 2 s whatever the
 * storage does; systemd would SIGKILL it after 30 s otherwise.
 */
#define XBD_STOP_DEADLINE_MS 1000

/* A device's control-plane log line, through its rate limit (a guest can cause most). */
#define DLOG(dev, lvl, fmt, ...) XBD_DISK_LOG(&(dev)->disk, lvl, fmt, ##__VA_ARGS__)

/* discovery.c: finding devices under backend/<type>/ and noticing dead domains. */
int xbd_back_watch_start(struct xbd_back *bk);
/* The scans a watch asked for (start-up, or a subtree changed): every device of the type. */
void xbd_back_scan_pending(struct xbd_back *bk);
/* Tear down the devices of domains that died, and only those. */
void xbd_back_release_domains(struct xbd_back *bk);

/*
 * Note work for the device's next pass of the main loop (coalesced:
 * marked once, done once, first marked first served): what watch events
 * (discovery.c) and the workers' answers (the step lifecycle.c gives
 * xbd_wdev_new) ask lifecycle.c to do.
 */
static inline void xbd_dev_mark(struct xbd_dev *dev, unsigned int what)
{
	struct xbd_back *bk = dev->bk;

	dev->pending |= what;
	if (dev->queued)
		return;
	dev->queued = true;
	dev->pend_next = NULL;
	if (bk->pend_tail)
		bk->pend_tail->pend_next = dev;
	else
		bk->pend_head = dev;
	bk->pend_tail = dev;
}

/* lifecycle.c: a device's life and its XenbusState machine, in the main thread. */
/*
 * The device of (type index ti, domid, devid), created if its directory
 * may exist and it is ours to serve: what discovery.c finds.
 */
struct xbd_dev *xbd_back_device(struct xbd_back *bk, unsigned int ti, uint32_t domid,
				uint32_t devid);
/* Its directory is gone: stop it and free it (once its rings drained). */
void xbd_dev_destroy(struct xbd_dev *dev);
/* Its frontend's domain died (why says so): release everything. */
void xbd_dev_kill(struct xbd_dev *dev, const char *why);
/*
 * Do the work watch events marked, one bounded step per device, fairly
 * (first marked, first served): a pass of the main loop (xbd-back.c).
 */
void xbd_back_run(struct xbd_back *bk);
/*
 * The end of a pass: the journals of devices that are gone (once, at
 * start), timer_fd armed for what is due later.  True if the pass marked
 * more work (for the next turn of the main loop).
 */
bool xbd_back_pass_end(struct xbd_back *bk);
/* timer_fd expired: retries that are due, log-limit reports. */
void xbd_back_timer(struct xbd_back *bk);
/* wake_fd: rings that failed, rings that finished draining. */
void xbd_back_handle_wake(struct xbd_back *bk);
void xbd_back_resize_all(struct xbd_back *bk);
/* SIGHUP: every refused storage open is tried again (the settings may have changed). */
void xbd_back_retry_refused(struct xbd_back *bk);
void xbd_back_print_stats(struct xbd_back *bk);
/* What the daemon serves, for its start and stop lines and systemd's status. */
struct xbd_back_count {
	unsigned int disks;      /* its devices (not those going away) */
	unsigned int guests;     /* their frontends' domains */
	unsigned int connected;  /* the devices Connected */
};
void xbd_back_count(const struct xbd_back *bk, struct xbd_back_count *n);
/* Stop every ring of every device, leaving xenstore as it is (see xbd-back.c). */
void xbd_back_shutdown(struct xbd_back *bk);
/* The device's state as a word ("Connected"). */
const char *xbd_dev_state_name(const struct xbd_dev *dev);
/* A device's counters: its rings, those still draining, and those of earlier connections. */
void xbd_dev_totals(const struct xbd_dev *dev, struct xbd_ring_stats *sum);

/* vbd3-stats.c: a vbd3 disk's counters for xentop (Xen 4.19+'s libxenstat). */
/*
 * Write them now, from sum (xbd_dev_totals), the first time also
 * kthread-pid; nothing for a vbd disk.
 */
void xbd_vbd3_publish(struct xbd_dev *dev, const struct xbd_ring_stats *sum);
/* Remove the device's file (the device goes). */
void xbd_vbd3_unpublish(struct xbd_dev *dev);
/* Remove this process's directory (at exit, once every device went). */
void xbd_vbd3_cleanup(void);

#endif /* XBD_BACK_DEVICE_H */
