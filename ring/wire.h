/*
 * wire.h: private to ring/: where each blkif field sits in a shared ring
 * entry for each ABI, and the single-load/single-store accessors used for
 * every byte of shared memory.
 *
 * All shared-memory access in ring/ goes through these helpers so that the
 * copy-once rule is visible in one place: each field is read with exactly
 * one volatile load (a hostile peer may rewrite it between two loads), and
 * entries need not be naturally aligned (x86_32 entries are 108 bytes, so
 * their 64-bit ids sit on 4-byte boundaries).
 */
#ifndef XBD_RING_WIRE_H
#define XBD_RING_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ring/ring.h"

/* The sring header: req_prod, req_event, rsp_prod, rsp_event, padding. */
#define XBD_SRING_HDR_SIZE 64u
#define XBD_SRING_REQ_PROD 0u
#define XBD_SRING_REQ_EVENT 4u
#define XBD_SRING_RSP_PROD 8u
#define XBD_SRING_RSP_EVENT 12u

/* Offsets of each request and response field within one entry. */
struct xbd_abi_layout {
	size_t req_size;
	size_t rsp_size;
	size_t ent_size; /* max(req_size, rsp_size): the ring's stride */

	/* read, write, write-barrier, flush-diskcache (and unknown ops) */
	size_t rw_nr_segments; /* uint8_t */
	size_t rw_handle;
	size_t rw_id;
	size_t rw_sector;
	size_t rw_seg; /* 11 x struct blkif_request_segment (8 bytes each) */

	size_t discard_flag; /* uint8_t */
	size_t discard_handle;
	size_t discard_id;
	size_t discard_sector;
	size_t discard_nr_sectors;

	size_t ind_op; /* uint8_t inner op */
	size_t ind_nr_segments; /* uint16_t */
	size_t ind_id;
	size_t ind_sector;
	size_t ind_handle;
	size_t ind_grefs; /* 8 x grant_ref_t */

	size_t rsp_id;
	size_t rsp_op;
	size_t rsp_status;
};

/* The operation byte is at offset 0 in every request layout. */
#define XBD_REQ_OFF_OP 0u
/* Within a struct blkif_request_segment. */
#define XBD_SEG_SIZE 8u
#define XBD_SEG_OFF_GREF 0u
#define XBD_SEG_OFF_FIRST 4u
#define XBD_SEG_OFF_LAST 5u

const struct xbd_abi_layout *xbd_abi_layout(enum xbd_abi abi);

/*
 * Packed wrappers give the accessors alignment 1, so an unaligned field is
 * still one load on x86 and is not undefined behaviour.
 */
struct xbd_una16 { uint16_t v; } __attribute__((packed, may_alias));
struct xbd_una32 { uint32_t v; } __attribute__((packed, may_alias));
struct xbd_una64 { uint64_t v; } __attribute__((packed, may_alias));

static inline const volatile uint8_t *xbd_at(const volatile void *base, size_t off)
{
	return (const volatile uint8_t *)base + off;
}

static inline volatile uint8_t *xbd_at_w(volatile void *base, size_t off)
{
	return (volatile uint8_t *)base + off;
}

static inline uint8_t xbd_ld8(const volatile void *base, size_t off)
{
	return *xbd_at(base, off);
}

static inline uint16_t xbd_ld16(const volatile void *base, size_t off)
{
	return ((const volatile struct xbd_una16 *)xbd_at(base, off))->v;
}

static inline uint32_t xbd_ld32(const volatile void *base, size_t off)
{
	return ((const volatile struct xbd_una32 *)xbd_at(base, off))->v;
}

static inline uint64_t xbd_ld64(const volatile void *base, size_t off)
{
	return ((const volatile struct xbd_una64 *)xbd_at(base, off))->v;
}

static inline void xbd_st8(volatile void *base, size_t off, uint8_t v)
{
	*xbd_at_w(base, off) = v;
}

static inline void xbd_st16(volatile void *base, size_t off, uint16_t v)
{
	((volatile struct xbd_una16 *)xbd_at_w(base, off))->v = v;
}

static inline void xbd_st32(volatile void *base, size_t off, uint32_t v)
{
	((volatile struct xbd_una32 *)xbd_at_w(base, off))->v = v;
}

static inline void xbd_st64(volatile void *base, size_t off, uint64_t v)
{
	((volatile struct xbd_una64 *)xbd_at_w(base, off))->v = v;
}

/*
 * The four ring indexes are naturally aligned at the start of the first
 * page, so they use real atomics: acquire on the producer index we
 * consume from (entries are read only after it), release on the producer
 * index we publish (entries are written before it).  These are xen_rmb()
 * and xen_wmb() of xen/io/ring.h.  On arm64 they compile to ldar and
 * stlr, and xbd_full_barrier() to dmb ish: tests/ring/arm64-barriers.sh
 * reads them in the cross-compiled code (x86 orders stores and loads
 * anyway, so a missing one would show only on Arm).
 */
static inline uint32_t *xbd_idx(const struct xring *r, size_t off)
{
	return (uint32_t *)((uint8_t *)r->sring + off);
}

static inline uint32_t xbd_idx_acquire(const struct xring *r, size_t off)
{
	return __atomic_load_n(xbd_idx(r, off), __ATOMIC_ACQUIRE);
}

static inline uint32_t xbd_idx_load(const struct xring *r, size_t off)
{
	return __atomic_load_n(xbd_idx(r, off), __ATOMIC_RELAXED);
}

static inline void xbd_idx_release(const struct xring *r, size_t off, uint32_t v)
{
	__atomic_store_n(xbd_idx(r, off), v, __ATOMIC_RELEASE);
}

static inline void xbd_idx_store(const struct xring *r, size_t off, uint32_t v)
{
	__atomic_store_n(xbd_idx(r, off), v, __ATOMIC_RELAXED);
}

/* xen_mb(): orders our index store before the peer's event index load. */
static inline void xbd_full_barrier(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* The entry for a free-running index (masked: always inside the ring). */
static inline volatile uint8_t *xbd_entry(const struct xring *r, uint32_t idx)
{
	size_t slot = idx & (r->nr_ents - 1);

	return (volatile uint8_t *)r->sring + XBD_SRING_HDR_SIZE + slot * r->ent_size;
}

#endif /* XBD_RING_WIRE_H */
