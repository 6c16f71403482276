/*
 * tracking.h: a disk's changed-block tracking as the control plane holds
 * it (datapath/cbt-format.h: the files), in two files, the first calling
 * the second, never the reverse:
 *
 *   checkpoint.c  what the operator does with it (xbdctl checkpoint,
 *                 checkpoints, changes, drop, release, set cbt=): the
 *                 checkpoints and views made in a drained section, the
 *                 changed extents, what list and stats show
 *   tracking.c    the files: opened with the disk's storage (made,
 *                 checked, trusted or not, recovered after a power
 *                 loss), committed, handed to the rings, closed
 *
 * The control plane (main thread) is the only writer of the metadata;
 * the rings, wherever they run, write their bits, their intents and
 * their line of the run page (datapath/cbt.c), and the view's copies.
 */
#ifndef XBD_BACK_TRACKING_H
#define XBD_BACK_TRACKING_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "blkback/control/control.h"
#include "blkback/datapath/cbt-format.h"

struct track_op;

/* A disk's tracking, open while its storage is (dev->track). */
struct xbd_track {
	struct xbd_dev *dev;
	char path[PATH_MAX], vpath[PATH_MAX];
	int fd;                  /* ours, flock'd: one holder per image */
	int vfd;                 /* the view file, or -1 (cbt-scratch 0) */
	int ring_fd, ring_vfd;   /* what the process of its rings maps (their own opens) */
	char *map;
	size_t map_len;
	struct xbd_cbt_meta m;   /* the truth in memory; tracking_commit writes it */
	struct xbd_cbt_run *run;
	char *vmap;
	size_t vmap_len;
	struct xbd_cbt_view *view;
	char disk_path[PATH_MAX]; /* a file disk's path, for its stamp; "" otherwise */
	struct track_op *op;     /* checkpoint.c's drained section in progress */
	bool said_overflow, said_failed;
};

/* ---- checkpoint.c ---- */

/* A control-socket request that answers later (control.c makes it). */
struct xbd_ctl_wait {
	void (*answer)(struct xbd_ctl_wait *w, int err, const char *text);
};

/*
 * The verbs of common/control-protocol.h's XBD_CTL_TRACK_COMMANDS: 0 with
 * the answer in f, -EINPROGRESS when wait will be answered later, or
 * -errno with one line in err (-ENODEV: no such device, sel names it).
 */
int track_command(struct xbd_back *bk, const char *cmd, char **w, unsigned int nw,
		  enum ctl_format fmt, FILE *f, char *err, size_t errlen, const char **sel,
		  struct xbd_ctl_wait *wait);
/* xbdctl set cbt=0|1 reached dev: open or stop its tracking now. */
void track_set(struct xbd_dev *dev);
/* The storage opened (tracking opens when cbt = 1), or closes (why: for the view it ends). */
void track_storage_open(struct xbd_dev *dev);
void track_storage_close(struct xbd_dev *dev, const char *why);
/* Its rings are about to start: the tracking where they run. */
void track_connect(struct xbd_dev *dev);
/* SIGTERM: every drained section given up (answered), before the rings stop. */
void track_shutdown(struct xbd_back *bk);
/* The main loop's timer: when an operation is due to be looked at (0: none), and the look. */
uint64_t track_due(struct xbd_back *bk);
void track_timer(struct xbd_back *bk);
/* list and stats: the JSON object, the table's column and lines, the Prometheus series. */
void track_json(FILE *f, const struct xbd_dev *dev);
const char *track_column(const struct xbd_dev *dev, char *buf, size_t len);
void track_table(FILE *f, const char *indent, const struct xbd_dev *dev);
void track_prometheus(FILE *f, const struct xbd_back *bk, const char *sel);

/* ---- tracking.c ---- */

/*
 * Open dev's tracking (dev->disk.o.cbt): made, or checked and trusted as
 * far as it can be; dev->track set.  0, or -errno after one log line
 * (the disk is served without tracking).
 */
int tracking_open(struct xbd_dev *dev);
/* Close it: the view ended (why), the disk's stamp, closed cleanly. */
void tracking_close(struct xbd_dev *dev, const char *why);
/* Write the metadata (the other copy) and sync: 0 or -errno. */
int tracking_commit(struct xbd_track *t);
/* Sync the tracking file (what its mapping holds durable): 0 or -errno. */
int tracking_sync(struct xbd_track *t);
/* Checkpoints made before now cannot be compared with later points: why, once in the log. */
void tracking_untrust(struct xbd_track *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Events the rings left in the run page (the disk grew, a failed sync): untrust. */
void tracking_poll(struct xbd_track *t);
/* A slot's bitmap. */
uint64_t *tracking_slot(const struct xbd_track *t, uint32_t slot);
/* The view file's table and copies made ready for a new view (its space reserved): 0 or -errno. */
int tracking_view_reset(struct xbd_track *t, bool reserve);
/* The view ends (state ENDED, why), its space freed. */
void tracking_view_end(struct xbd_track *t, const char *why);
/* The current boot's id (boot_id, or XBD_TEST_BOOT_ID in a test build). */
void tracking_boot_id(char *buf, size_t len);
/* A fresh random 64-bit id. */
uint64_t tracking_random(void);

#endif /* XBD_BACK_TRACKING_H */
