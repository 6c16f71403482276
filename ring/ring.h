/*
 * ring.h: the blkif wire protocol shared by xbd-back and xbd-front.
 *
 * A shared ring laid over 1..2^XBD_RING_MAX_ORDER pages, the three request
 * ABIs (native, x86_32, x86_64), copy-once request consumption, request
 * validation with a distinct reason per failure, and notification
 * suppression as xen/io/ring.h defines it.
 *
 * Pure C: no I/O, no Xen calls, no allocation, no global state.  Every
 * function returns a negative errno value (or a reason code) on failure.
 *
 * Names: xring_* is this library's view of a shared ring (xring_back_*
 * its back end, xring_front_* its front end); xbd_req_* and xbd_abi_* the
 * requests and ABIs.  xbd_ring_* is xbd-back's per-ring thread (struct
 * xbd_bring) and xbd_front_* is libxbdfront, both built on this.
 */
#ifndef XBD_RING_H
#define XBD_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xen/xen.h>
#include <xen/io/blkif.h>

#define XBD_PAGE_SIZE 4096u
#define XBD_SECTOR_SHIFT 9 /* every sector field on the wire is 512 bytes */

/* Linux blkback accepts ring-page-order up to 4 (16 pages). */
#define XBD_RING_MAX_ORDER 4
#define XBD_RING_MAX_PAGES (1u << XBD_RING_MAX_ORDER)

/* Segments per indirect page: sizeof(struct blkif_request_segment) == 8. */
#define XBD_SEGS_PER_INDIRECT_PAGE (XBD_PAGE_SIZE / 8u)
/*
 * Largest feature-max-indirect-segments we ever advertise or accept
 * (Linux blkback's MAX_INDIRECT_SEGMENTS): 256 x 4 KiB = 1 MiB requests.
 */
#define XBD_MAX_INDIRECT_SEGS 256u
#define XBD_MAX_INDIRECT_PAGES \
	((XBD_MAX_INDIRECT_SEGS + XBD_SEGS_PER_INDIRECT_PAGE - 1) / XBD_SEGS_PER_INDIRECT_PAGE)
#define XBD_MAX_SEGS XBD_MAX_INDIRECT_SEGS

/* The request layouts of the `protocol` xenstore key. */
enum xbd_abi {
	XBD_ABI_NATIVE = 0, /* this machine's own layout (x86_64 here) */
	XBD_ABI_X86_32,     /* "x86_32-abi": 64-bit id at offset 4, 108-byte entries */
	XBD_ABI_X86_64,     /* "x86_64-abi": 112-byte entries */
};

/* Parses a `protocol` value; NULL or "" means native. -EINVAL if unknown. */
int xbd_abi_from_protocol(const char *protocol, enum xbd_abi *out);
/* The string a frontend writes to `protocol` for this ABI. */
const char *xbd_abi_protocol(enum xbd_abi abi);

/* One segment: a granted page and the 512-byte sectors used within it. */
struct xbd_seg {
	uint32_t gref;
	uint8_t first_sect;
	uint8_t last_sect;
};

/*
 * A request in the internal form every ABI converts to.  It is a private
 * copy: each shared field was read exactly once.
 *
 * For BLKIF_OP_INDIRECT, `operation` is the inner op (indirect_op) and
 * `indirect` is true; `nr_segments` is the count the frontend claimed and
 * `seg[]` is filled only by xbd_req_load_indirect() from the mapped
 * indirect pages.
 */
struct xbd_request {
	uint64_t id;
	uint64_t sector_number;
	uint64_t nr_sectors;   /* discard: as sent; read/write: set by validation */
	uint8_t operation;     /* BLKIF_OP_* (inner op for indirect) */
	uint8_t raw_operation; /* the op byte as found on the ring */
	bool indirect;
	uint8_t discard_flags; /* BLKIF_DISCARD_SECURE */
	uint16_t handle;
	uint16_t nr_segments;
	uint16_t nr_indirect_pages; /* derived from nr_segments */
	uint32_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	struct xbd_seg seg[XBD_MAX_SEGS];
};

/* A response as the frontend sees it after consumption. */
struct xbd_response {
	uint64_t id;
	uint8_t operation;
	int16_t status;
};

enum xring_side { XRING_BACK, XRING_FRONT };

/*
 * One end's view of a shared ring.  The shared page(s) hold the indexes
 * (req_prod, req_event, rsp_prod, rsp_event) and the entries; the private
 * indexes live here and are never read back from shared memory.
 */
struct xring {
	void *sring;           /* start of the shared ring (contiguous pages) */
	unsigned int nr_pages;
	unsigned int nr_ents;  /* power of two, from the ABI's entry size */
	size_t ent_size;
	enum xbd_abi abi;
	enum xring_side side;
	uint32_t req_cons;     /* back: next request to consume */
	uint32_t rsp_prod_pvt; /* back: responses written, not yet pushed */
	uint32_t req_prod_pvt; /* front: requests written, not yet pushed */
	uint32_t rsp_cons;     /* front: next response to consume */
	/*
	 * Our producer index as last published (back: rsp_prod, front:
	 * req_prod): the "old" value of the push-and-check-notify rule, kept
	 * here so the rule never trusts the peer-writable shared copy.
	 */
	uint32_t prod_pushed;
};

/* Entries that fit in nr_pages pages for an ABI (ring.h's __CONST_RING_SIZE). */
unsigned int xring_size(enum xbd_abi abi, unsigned int nr_pages);

/* Frontend: zero the shared ring and set req_event = rsp_event = 1. */
void xring_init_shared(void *sring, unsigned int nr_pages);

/*
 * Attach to a mapped shared ring of nr_pages contiguous pages (1, 2, 4, 8
 * or 16).  The back side starts consuming at the current shared indexes
 * (so a backend restarted under a live ring continues where the responses
 * end: req_cons = rsp_prod_pvt = shared rsp_prod); the front side
 * likewise.  -EINVAL for a bad page count.
 */
int xring_attach(struct xring *r, void *sring, unsigned int nr_pages,
		 enum xbd_abi abi, enum xring_side side);

/* The four indexes of the shared header as they are now. */
struct xring_shared_idx {
	uint32_t req_prod, req_event, rsp_prod, rsp_event;
};

/*
 * Read the shared header's indexes, each once (either side, any thread:
 * nothing is written), for diagnostics such as a stuck ring's dump.  The
 * peer may change them at any time; the values are a snapshot.
 */
void xring_read_shared(const struct xring *r, struct xring_shared_idx *out);

/* ---- back end: consume requests, produce responses ---- */

/*
 * Unconsumed requests the frontend has published, read with one load of
 * req_prod and a read barrier after it.  -EPROTO when req_prod claims more
 * than the ring can hold (req_prod - req_cons > nr_ents) or more than there
 * is room for responses: a corrupt ring, and the caller disconnects.
 */
int xring_back_pending(struct xring *r);

/*
 * Copy up to max requests out of the ring into out[], each shared field
 * read once, and advance req_cons.  Returns the number copied (0 when the
 * ring is empty) or -EPROTO as xring_back_pending.  Copies never validate:
 * call xbd_req_validate() on each.
 */
int xring_back_consume(struct xring *r, struct xbd_request *out, unsigned int max);

/*
 * Write one response at rsp_prod_pvt, field by field (no struct copy, so
 * no padding bytes from our stack reach the guest).  Not yet visible to
 * the frontend until xring_back_push().
 */
void xring_back_put_response(struct xring *r, uint64_t id, uint8_t operation,
			     int16_t status);

/*
 * Publish the written responses (write barrier, rsp_prod store) and say
 * whether the frontend asked to be notified (RING_PUSH_RESPONSES_AND_CHECK_NOTIFY).
 */
bool xring_back_push(struct xring *r);

/*
 * RING_FINAL_CHECK_FOR_REQUESTS: true if requests are pending; otherwise
 * sets req_event = req_cons + 1, full barrier, and checks once more, so a
 * request published meanwhile is never missed.
 */
bool xring_back_final_check(struct xring *r);
/*
 * A restarted backend that knows (from its journal) that a previous one
 * took every request before req_cons: consume from there instead of from
 * the published rsp_prod.  -EINVAL when that is more than a ring's worth
 * of requests beyond rsp_prod.
 */
int xring_back_resume(struct xring *r, uint32_t req_cons);
/* The shared req_prod as the frontend last published it (unchecked). */
uint32_t xring_back_req_prod(struct xring *r);

/* ---- front end: produce requests, consume responses ---- */

/* Free request slots (RING_FREE_REQUESTS on the private producer). */
unsigned int xring_front_free(const struct xring *r);

/*
 * Serialise req into the next slot in the ring's ABI: read, write,
 * write-barrier, flush (nr_segments 0), discard (sector_number, nr_sectors,
 * discard_flags), indirect (operation = inner op, indirect = true,
 * indirect_grefs[] and nr_segments).  -ENOSPC when the ring is full,
 * -EINVAL for a request that cannot be expressed (too many segments, or
 * operation BLKIF_OP_INDIRECT without indirect set).  Other malformed
 * requests are written as given, so conformance checks can send them.
 */
int xring_front_put_request(struct xring *r, const struct xbd_request *req);

/* Indirect pages needed for n segments (blkif.h: ceil(n / 512)). */
#define XBD_INDIRECT_PAGES(n) \
	(((n) + XBD_SEGS_PER_INDIRECT_PAGE - 1) / XBD_SEGS_PER_INDIRECT_PAGE)

/*
 * Write an indirect request's segments (req->seg[0..nr_segments)) into
 * its indirect pages as struct blkif_request_segment arrays; pages[i] is
 * indirect page i, XBD_INDIRECT_PAGES(req->nr_segments) of them.  Call
 * before xring_front_put_request() of that request.  -EINVAL when the
 * segments do not fit BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST pages or
 * seg[] (XBD_MAX_SEGS).
 */
int xring_front_fill_indirect(const struct xbd_request *req, void *const *pages);

/* Publish written requests; true if the backend must be notified. */
bool xring_front_push(struct xring *r);

/*
 * Copy up to max responses out and advance rsp_cons.  -EPROTO when
 * rsp_prod claims responses for requests that were never pushed.
 */
int xring_front_consume(struct xring *r, struct xbd_response *out, unsigned int max);

/* RING_FINAL_CHECK_FOR_RESPONSES. */
bool xring_front_final_check(struct xring *r);

/* ---- request validation ---- */

/* What the backend offers a device; requests are checked against it. */
struct xbd_limits {
	uint64_t nr_sectors;       /* disk size in 512-byte sectors */
	unsigned int sector_size;  /* logical block size: 512, 1024, 2048 or 4096 */
	unsigned int max_indirect_segs; /* 0: indirect not offered */
	bool readonly;
	bool flush;    /* feature-flush-cache offered */
	bool barrier;  /* feature-barrier offered */
	bool discard;  /* feature-discard offered */
	bool discard_secure;
};

/* Why a request was refused.  Each has a message from xbd_req_strerror(). */
enum xbd_req_error {
	XBD_REQ_OK = 0,
	XBD_REQ_BAD_OP,           /* unknown operation code */
	XBD_REQ_UNSUPPORTED,      /* known op the device does not offer: EOPNOTSUPP */
	XBD_REQ_READONLY,         /* write, barrier or discard to a read-only disk */
	XBD_REQ_BAD_NR_SEGS,      /* 0 or > 11 for read/write, > 0 for flush */
	XBD_REQ_BAD_INDIRECT_OP,  /* indirect wrapping something other than read/write */
	XBD_REQ_TOO_MANY_INDIRECT,/* indirect segments above the advertised maximum */
	XBD_REQ_BAD_SECTORS,      /* a segment with first_sect > last_sect or last_sect > 7 */
	XBD_REQ_MISALIGNED,       /* offset or length not a multiple of sector-size */
	XBD_REQ_BEYOND_END,       /* sector range past the end of the disk, or overflows */
	XBD_REQ_BAD_DISCARD,      /* discard of zero sectors or with unknown flags */
	XBD_REQ_NR_ERRORS
};

const char *xbd_req_strerror(enum xbd_req_error e);

/*
 * The status a refused request is answered with: BLKIF_RSP_EOPNOTSUPP
 * for XBD_REQ_UNSUPPORTED, BLKIF_RSP_ERROR for the rest.
 */
int16_t xbd_req_error_status(enum xbd_req_error e);

/*
 * Check an indirect request's header before its indirect pages are
 * mapped: inner op, segment count against lim->max_indirect_segs, and
 * sets nr_indirect_pages.  Not indirect: XBD_REQ_OK and nothing to do.
 */
enum xbd_req_error xbd_req_check_indirect(struct xbd_request *req,
					  const struct xbd_limits *lim);

/*
 * Copy req->nr_segments segments out of the mapped indirect pages
 * (pages[i] is indirect page i, each read once).
 */
void xbd_req_load_indirect(struct xbd_request *req, const void *const *pages);

/*
 * Validate a copied request completely (for indirect ones after
 * xbd_req_load_indirect): op against lim, segment counts and sector
 * bounds, alignment to sector_size, range against the disk without
 * overflow.  On success sets req->nr_sectors for read and write.
 */
enum xbd_req_error xbd_req_validate(struct xbd_request *req, const struct xbd_limits *lim);

#endif /* XBD_RING_H */
