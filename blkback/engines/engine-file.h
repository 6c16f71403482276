/*
 * engine-file.h: what the engines on files and block devices (aio,
 * uring) share: opening the disk (O_DIRECT unless direct = 0 or the
 * filesystem refuses it), what it can do, its size, and how a finished
 * read or write is judged.  One copy of these rules, so that the engines validate alike.
 */
#ifndef XBD_BACK_ENGINE_FILE_H
#define XBD_BACK_ENGINE_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "blkback/engines/engine.h"

struct xbd_file {
	struct xbd_store base;       /* first: the file engines' stores begin with a struct xbd_file */
	int fd;
	bool blockdev;
	dev_t rdev;                  /* block device: its number (sysfs) */
	struct xbd_engine_caps caps;
};

/* Open target read-only or read-write, O_DIRECT if direct (and the filesystem can); fills f. */
int xbd_file_open(const char *target, bool readonly, bool direct, struct xbd_file *f);
void xbd_file_close(struct xbd_file *f);
/* Size now, in bytes (online resize re-reads it). */
int xbd_file_size(const struct xbd_file *f, uint64_t *bytes);
/* A number from /sys/dev/block/MAJ:MIN/queue/FILE, 0 if unreadable. */
unsigned int xbd_file_queue_attr(const struct xbd_file *f, const char *file);
/*
 * The disk image format whose header b (the first len bytes of a disk)
 * starts with ("qcow2", "VHD", "VHDX", "VMDK", "QED", "VDI", "LUKS"), or
 * NULL: nothing we know, served raw.
 */
const char *xbd_image_format(const unsigned char *b, size_t len);
/* The same for the first sector of the file or device target (NULL if unreadable). */
const char *xbd_file_image_format(const char *target);
/*
 * io->result for a read or write the kernel finished with res (bytes
 * moved, or a negative errno): a short transfer (past the end after a
 * shrink, an I/O error) is -EIO.
 */
int xbd_file_rw_result(const struct xbd_io *io, long res);

/*
 * The store callbacks of the file engines, whose struct xbd_store begins
 * with a struct xbd_file: open allocates size bytes (zeroed) and opens
 * the file into them; close closes the file and frees the store.
 */
int xbd_file_store_open(const char *target, bool readonly, bool direct, size_t size,
			struct xbd_store **out);
void xbd_file_store_close(struct xbd_store *s);
int xbd_file_store_size(struct xbd_store *s, uint64_t *bytes);
void xbd_file_store_caps(struct xbd_store *s, struct xbd_engine_caps *caps);

#endif /* XBD_BACK_ENGINE_FILE_H */
