/*
 * cbt.h: a disk's changed-block tracking and its point-in-time view as
 * the process that runs the disk's rings holds them (cbt-format.h says
 * what the files hold).  The control plane opens the files and hands
 * their descriptors over (disk->cbt_fd, disk->view_fd: to this process's
 * rings with xbd_cbt_attach, or to the disk's worker, which attaches
 * them there); the rings then mark every write, discard and barrier's
 * blocks before it reaches the storage (cbt.c) and copy the blocks a
 * view still needs before they are overwritten (cbw.c).
 */
#ifndef XBD_BACK_CBT_H
#define XBD_BACK_CBT_H

#include <stdint.h>

#include "blkback/datapath/cbt-format.h"

struct xbd_disk;

/*
 * Map the tracking file fd and the view file vfd (-1: none) for disk's
 * rings, and publish them (disk->cbt, which the rings load at each
 * round): 0 or -errno (-EINVAL: not a tracking file of ours).  The fds
 * are the tracking's from then on (closed by xbd_cbt_detach, or at once
 * on a failure: a confined worker may not duplicate them).  A disk that
 * has one already keeps it (0).
 */
int xbd_cbt_attach(struct xbd_disk *disk, int fd, int vfd);
/* Unmap disk's tracking, once no ring of it runs. */
void xbd_cbt_detach(struct xbd_disk *disk);

/*
 * Make what the tracking file's mapping holds durable (fdatasync of fd).
 * A test build asked to (the metadata's shadow_off) also keeps a copy of
 * what this sync made durable at shadow_off, so that a test can put the
 * file back as a host that lost power would find it.  0 or -errno.
 */
int xbd_cbt_file_sync(int fd, void *map, uint64_t file_bytes, uint64_t shadow_off);

#endif /* XBD_BACK_CBT_H */
