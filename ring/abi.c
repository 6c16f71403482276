/*
 * abi.c: the three request layouts of the blkif `protocol` key and the
 * ring geometry that follows from them.
 *
 * Native is this machine's own struct blkif_request, taken from
 * xen/io/blkif.h with offsetof.  x86_32 and x86_64 are fixed layouts
 * (the same ones Linux blkback and QEMU declare as packed structs):
 *
 *                    x86_32          x86_64
 *   rw id/sector/seg 4 / 12 / 20     8 / 16 / 24
 *   request size     108             112
 *   discard          flag 1, id 4, sector 12, nr_sectors 20
 *                                    flag 1, id 8, sector 16, nr_sectors 24
 *   indirect         op 1, nseg 2 (u16), id 4, sector 12, handle 20,
 *                    grefs 24..56    id 8, sector 16, handle 24, grefs 28..60
 *   response         id 0, op 8, status 10; 12 bytes (x86_32), 16 (x86_64)
 *
 * The 32-bit ABI aligns uint64_t to 4 bytes, which is why its id moves.
 *
 * On Arm (32- and 64-bit alike, protocol "arm-abi") uint64_t is 8-aligned
 * in every ABI Xen supports there, so native is the x86_64 layout byte
 * for byte (the asserts below hold it to blkif.h).  A backend on Arm
 * still accepts "x86_32-abi" and "x86_64-abi" with their fixed layouts,
 * as Linux blkback does; "arm-abi" is native on Arm and unknown (refused)
 * on x86, and the reverse for nothing: x86's native name is "x86_64-abi".
 */
#include <errno.h>
#include <string.h>

#include <xen/io/protocols.h>

#include "ring/ring.h"
#include "ring/wire.h"

static const struct xbd_abi_layout layout_x86_32 = {
	.req_size = 108,
	.rsp_size = 12,
	.ent_size = 108,
	.rw_nr_segments = 1,
	.rw_handle = 2,
	.rw_id = 4,
	.rw_sector = 12,
	.rw_seg = 20,
	.discard_flag = 1,
	.discard_handle = 2,
	.discard_id = 4,
	.discard_sector = 12,
	.discard_nr_sectors = 20,
	.ind_op = 1,
	.ind_nr_segments = 2,
	.ind_id = 4,
	.ind_sector = 12,
	.ind_handle = 20,
	.ind_grefs = 24,
	.rsp_id = 0,
	.rsp_op = 8,
	.rsp_status = 10,
};

static const struct xbd_abi_layout layout_x86_64 = {
	.req_size = 112,
	.rsp_size = 16,
	.ent_size = 112,
	.rw_nr_segments = 1,
	.rw_handle = 2,
	.rw_id = 8,
	.rw_sector = 16,
	.rw_seg = 24,
	.discard_flag = 1,
	.discard_handle = 2,
	.discard_id = 8,
	.discard_sector = 16,
	.discard_nr_sectors = 24,
	.ind_op = 1,
	.ind_nr_segments = 2,
	.ind_id = 8,
	.ind_sector = 16,
	.ind_handle = 24,
	.ind_grefs = 28,
	.rsp_id = 0,
	.rsp_op = 8,
	.rsp_status = 10,
};

#define NATIVE_REQ_SIZE \
	(sizeof(struct blkif_request) > sizeof(struct blkif_request_indirect) ? \
	 sizeof(struct blkif_request) : sizeof(struct blkif_request_indirect))

static const struct xbd_abi_layout layout_native = {
	.req_size = NATIVE_REQ_SIZE,
	.rsp_size = sizeof(struct blkif_response),
	.ent_size = sizeof(union blkif_sring_entry),
	.rw_nr_segments = offsetof(struct blkif_request, nr_segments),
	.rw_handle = offsetof(struct blkif_request, handle),
	.rw_id = offsetof(struct blkif_request, id),
	.rw_sector = offsetof(struct blkif_request, sector_number),
	.rw_seg = offsetof(struct blkif_request, seg),
	.discard_flag = offsetof(struct blkif_request_discard, flag),
	.discard_handle = offsetof(struct blkif_request_discard, handle),
	.discard_id = offsetof(struct blkif_request_discard, id),
	.discard_sector = offsetof(struct blkif_request_discard, sector_number),
	.discard_nr_sectors = offsetof(struct blkif_request_discard, nr_sectors),
	.ind_op = offsetof(struct blkif_request_indirect, indirect_op),
	.ind_nr_segments = offsetof(struct blkif_request_indirect, nr_segments),
	.ind_id = offsetof(struct blkif_request_indirect, id),
	.ind_sector = offsetof(struct blkif_request_indirect, sector_number),
	.ind_handle = offsetof(struct blkif_request_indirect, handle),
	.ind_grefs = offsetof(struct blkif_request_indirect, indirect_grefs),
	.rsp_id = offsetof(struct blkif_response, id),
	.rsp_op = offsetof(struct blkif_response, operation),
	.rsp_status = offsetof(struct blkif_response, status),
};

/* The wire facts the rest of ring/ (and every peer) relies on. */
_Static_assert(sizeof(struct blkif_request_segment) == XBD_SEG_SIZE, "segment size");
_Static_assert(offsetof(struct blkif_request_segment, first_sect) == XBD_SEG_OFF_FIRST,
	       "segment first_sect");
_Static_assert(offsetof(struct blkif_request_segment, last_sect) == XBD_SEG_OFF_LAST,
	       "segment last_sect");
_Static_assert(offsetof(struct blkif_sring, ring) == XBD_SRING_HDR_SIZE, "sring header");
_Static_assert(offsetof(struct blkif_sring, req_event) == XBD_SRING_REQ_EVENT, "req_event");
_Static_assert(offsetof(struct blkif_sring, rsp_prod) == XBD_SRING_RSP_PROD, "rsp_prod");
_Static_assert(offsetof(struct blkif_sring, rsp_event) == XBD_SRING_RSP_EVENT, "rsp_event");
_Static_assert(sizeof(struct blkif_request_discard) <= sizeof(struct blkif_request),
	       "discard fits in an entry");
_Static_assert(sizeof(struct blkif_request_indirect) <= sizeof(struct blkif_request),
	       "indirect fits in an entry");
#if defined(__x86_64__)
/* Native is x86_64 here: the fixed table must agree with the compiler. */
_Static_assert(sizeof(union blkif_sring_entry) == 112, "x86_64 entry size");
_Static_assert(offsetof(struct blkif_request, id) == 8, "x86_64 id");
_Static_assert(offsetof(struct blkif_request, seg) == 24, "x86_64 seg");
_Static_assert(offsetof(struct blkif_request_indirect, indirect_grefs) == 28,
	       "x86_64 indirect grefs");
_Static_assert(offsetof(struct blkif_request_discard, nr_sectors) == 24,
	       "x86_64 discard nr_sectors");
_Static_assert(sizeof(struct blkif_response) == 16, "x86_64 response");
#elif defined(__aarch64__) || defined(__arm__)
/* arm-abi: the same bytes as x86_64 (uint64_t 8-aligned), taken from blkif.h. */
_Static_assert(sizeof(union blkif_sring_entry) == 112, "arm-abi entry size");
_Static_assert(offsetof(struct blkif_request, nr_segments) == 1, "arm-abi nr_segments");
_Static_assert(offsetof(struct blkif_request, handle) == 2, "arm-abi handle");
_Static_assert(offsetof(struct blkif_request, id) == 8, "arm-abi id");
_Static_assert(offsetof(struct blkif_request, sector_number) == 16, "arm-abi sector");
_Static_assert(offsetof(struct blkif_request, seg) == 24, "arm-abi seg");
_Static_assert(offsetof(struct blkif_request_discard, id) == 8, "arm-abi discard id");
_Static_assert(offsetof(struct blkif_request_discard, sector_number) == 16,
	       "arm-abi discard sector");
_Static_assert(offsetof(struct blkif_request_discard, nr_sectors) == 24,
	       "arm-abi discard nr_sectors");
_Static_assert(offsetof(struct blkif_request_indirect, nr_segments) == 2,
	       "arm-abi indirect nr_segments");
_Static_assert(offsetof(struct blkif_request_indirect, id) == 8, "arm-abi indirect id");
_Static_assert(offsetof(struct blkif_request_indirect, sector_number) == 16,
	       "arm-abi indirect sector");
_Static_assert(offsetof(struct blkif_request_indirect, handle) == 24, "arm-abi indirect handle");
_Static_assert(offsetof(struct blkif_request_indirect, indirect_grefs) == 28,
	       "arm-abi indirect grefs");
_Static_assert(sizeof(struct blkif_response) == 16, "arm-abi response");
_Static_assert(offsetof(struct blkif_response, status) == 10, "arm-abi response status");
#elif defined(__i386__)
_Static_assert(sizeof(union blkif_sring_entry) == 108, "x86_32 entry size");
_Static_assert(offsetof(struct blkif_request, id) == 4, "x86_32 id");
_Static_assert(offsetof(struct blkif_request_indirect, indirect_grefs) == 24,
	       "x86_32 indirect grefs");
#endif

const struct xbd_abi_layout *xbd_abi_layout(enum xbd_abi abi)
{
	switch (abi) {
	case XBD_ABI_X86_32:
		return &layout_x86_32;
	case XBD_ABI_X86_64:
		return &layout_x86_64;
	case XBD_ABI_NATIVE:
		break;
	}
	return &layout_native;
}

int xbd_abi_from_protocol(const char *protocol, enum xbd_abi *out)
{
	if (protocol == NULL || protocol[0] == '\0')
		*out = XBD_ABI_NATIVE;
	else if (strcmp(protocol, XEN_IO_PROTO_ABI_X86_32) == 0)
		*out = XBD_ABI_X86_32;
	else if (strcmp(protocol, XEN_IO_PROTO_ABI_X86_64) == 0)
		*out = XBD_ABI_X86_64;
	else if (strcmp(protocol, XEN_IO_PROTO_ABI_NATIVE) == 0)
		*out = XBD_ABI_NATIVE; /* e.g. "arm-abi" on an arm host */
	else
		return -EINVAL;
	return 0;
}

const char *xbd_abi_protocol(enum xbd_abi abi)
{
	switch (abi) {
	case XBD_ABI_X86_32:
		return XEN_IO_PROTO_ABI_X86_32;
	case XBD_ABI_X86_64:
		return XEN_IO_PROTO_ABI_X86_64;
	case XBD_ABI_NATIVE:
		break;
	}
	return XEN_IO_PROTO_ABI_NATIVE;
}

/* Largest power of two not above n (n > 0): __RD32 of xen/io/ring.h. */
static unsigned int round_down_pow2(size_t n)
{
	unsigned int p = 1;

	while ((size_t)p * 2 <= n)
		p *= 2;
	return p;
}

unsigned int xring_size(enum xbd_abi abi, unsigned int nr_pages)
{
	size_t bytes = (size_t)nr_pages * XBD_PAGE_SIZE;
	size_t ents;

	if (bytes <= XBD_SRING_HDR_SIZE)
		return 0;
	ents = (bytes - XBD_SRING_HDR_SIZE) / xbd_abi_layout(abi)->ent_size;
	return ents ? round_down_pow2(ents) : 0;
}
