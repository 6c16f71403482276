/*
 * sim/hypervisor.h: the simulated hypervisor as a process acting as a
 * domain reaches it, the header made for platform/ (its simulator,
 * platform/sim.c, is the per-process half: mappings, caches, fds): the
 * layout of its shared memory and the operations over it.  Nothing else
 * of the product includes anything of sim/ (tests/build/layering.sh);
 * what only sim/ itself uses (the keeper, the host lock) is sim/layout.h.
 * Every process of a simulated host maps these memory files MAP_SHARED.
 *
 *   DIR/hv/keeper        the keeper's socket (sim/keeper.c): a small
 *                        process started by xbd_sim_host_init that holds
 *                        every memory file below and hands them out.
 *   DIR/hv/mem -> MEMDIR  on tmpfs (/dev/shm) when DIR is not.
 *   MEMDIR/evt-S-G       the FIFO of event channel handle slot S, gen G:
 *                        its fd is the handle's fd; a byte in it wakes it.
 * Memory files (memfds sealed against shrinking and growing, so that no
 * process can truncate memory another one maps: that would kill the
 * mapper with SIGBUS), named after where they used to live:
 *   host                 struct sim_host: domain slots, event channel
 *                        handle slots, the host lock.
 *   dom-N.mem            guest memory (sparse), mapped by grant maps.
 *   dom-N.gnt            what the guest itself writes: its v1 grant table
 *                        and its allocators (grant refs, pages).
 *   dom-N.xen            what Xen keeps: active grant entries (pins),
 *                        event channel ports, the locks over both.  A
 *                        process that maps a domain's grants holds an OFD
 *                        read lock on byte 0 of its own open file of it;
 *                        the domain is finally freed when nobody does.
 *                        A process that pins reference R (a map, or a
 *                        copy while it runs) holds one on byte 1 + R: a
 *                        pin nobody holds that lock for is a dead
 *                        process's, and is released (sim_gnt_reclaim), as
 *                        the kernel's gntdev unmaps a process's grants
 *                        when it exits.
 *
 * Every process may write all of it (the simulator has no privilege
 * separation), whatever its uid: the memdir is world-writable (sticky),
 * FIFOs and the keeper's socket are open to everyone, and the keeper
 * hands each asker Xen's file as an open file of its own, so that an
 * xbd-back worker (its own uid, no /proc, nothing but these directories
 * bind-mounted in an empty root) works like any process.  The grant
 * table above all: everything read from shared
 * memory is read once, checked and bounded before use, and every lock
 * wait is bounded, so a hostile guest process can make our operations
 * fail but never crash or hang them.
 */
#ifndef XBD_SIM_HYPERVISOR_H
#define XBD_SIM_HYPERVISOR_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>

#include <xen/xen.h>
#include <xen/grant_table.h>

#include "sim/simhost.h"

#define SIM_PAGE_SHIFT 12
#define SIM_PAGE_SIZE (1u << SIM_PAGE_SHIFT)

#define SIM_HOST_MAGIC 0x68646278u   /* "xbdh" */
#define SIM_XEN_MAGIC 0x78646278u    /* "xbdx" */
#define SIM_LAYOUT_VERSION 3u   /* 3: pin locks (a process without them looks dead) */

/* Xen's default max_grant_frames (64) of v1 entries (512 per 4 KiB frame). */
#define SIM_NR_GRANTS 32768u
/* The first entries are the toolstack's (xenstore, console), as in Xen. */
#define SIM_GNT_RESERVED GNTTAB_NR_RESERVED_ENTRIES
/* Ports per domain: the 2-level ABI of a 64-bit guest. */
#define SIM_NR_PORTS 4096u
/* Event channel handles open at once on one host. */
#define SIM_NR_HANDLES 4096u
/* Largest guest memory (sparse; bounded so page numbers fit everywhere). */
#define SIM_MAX_MEM_PAGES (1u << 24)
/*
 * How long we wait for a domain's grant or event channel lock, which its
 * guest may hold forever, before failing the operation; and for the host
 * lock, held while a domain is created or destroyed.
 */
#define SIM_LOCK_TIMEOUT_MS 100u
#define SIM_HOST_LOCK_TIMEOUT_MS 2000u

enum sim_dom_state {
	SIM_DOM_FREE = 0,
	SIM_DOM_RUNNING,
	SIM_DOM_DYING,
};

/* One per domid in the host file.  Written under sim_host.lock only. */
struct sim_host_dom {
	uint32_t state;      /* enum sim_dom_state */
	uint32_t gen;        /* incarnation: bumped by every create */
	uint32_t mem_pages;
	uint32_t pad;
};

/* One per open event channel handle (a FIFO in the memdir). */
struct sim_host_handle {
	uint32_t pid;        /* owner, 0 = free */
	uint32_t gen;        /* bumped at every allocation */
	uint32_t awake;      /* 1: a wake-up byte is in its FIFO or on its way */
	uint32_t domid;
};

struct sim_host {
	uint32_t magic;
	uint32_t version;
	uint64_t host_id;    /* random, tells hosts apart */
	char memdir[256];
	uint32_t lock;       /* domain create/destroy/free (sim_lock_take) */
	uint32_t next_gen;
	struct sim_host_handle handles[SIM_NR_HANDLES];
	struct sim_host_dom doms[XBD_SIM_MAX_DOMID + 1];
};

/* The guest's own file: its grant table and its allocators. */
struct sim_gnt_file {
	grant_entry_v1_t entries[SIM_NR_GRANTS];
	uint64_t ref_map[SIM_NR_GRANTS / 64];  /* bit set: reference in use */
	uint64_t page_map[];                   /* bit set: page in use */
};

/* Xen's active grant entry: who pins it, how, and the frame it pinned. */
struct sim_active {
	uint16_t rd;         /* read-only pins (maps and copies) */
	uint16_t wr;         /* writable pins */
	uint16_t domid;      /* the pinning domain, while pinned */
	uint16_t pad;
	uint32_t frame;      /* frame read once at the first pin */
};

enum sim_port_state {
	SIM_PORT_FREE = 0,
	SIM_PORT_UNBOUND,    /* waiting for remote_dom to bind */
	SIM_PORT_INTERDOMAIN,
};

#define SIM_EVT_PENDING 1u
#define SIM_EVT_MASKED 2u

struct sim_port {
	uint32_t state;      /* enum sim_port_state */
	uint32_t remote_dom;
	uint32_t remote_port;
	uint32_t handle;     /* owning handle slot */
	uint32_t hgen;       /* and its generation */
	uint32_t pm;         /* SIM_EVT_PENDING | SIM_EVT_MASKED */
	uint32_t pad[2];
};

struct sim_xen_file {
	uint32_t magic;
	uint32_t gen;
	uint32_t domid;
	uint32_t mem_pages;
	uint32_t gnt_lock;         /* active entries (sim_lock_take) */
	uint32_t evt_lock;         /* port states (sim_lock_take) */
	struct sim_active active[SIM_NR_GRANTS];
	struct sim_port ports[SIM_NR_PORTS];
};

/* ---- the host file (sim/host.c) ---- */

struct sim_hostmap {
	int fd;
	struct sim_host *host;
	char memdir[256];
	char sock[256];      /* the keeper's socket */
};

int sim_host_open(const char *dir, struct sim_hostmap **out);
void sim_host_close(struct sim_hostmap *h);
/* Takes the host lock; returns the resulting enum sim_dom_state. */
int sim_host_try_finalize(struct sim_hostmap *h, uint32_t domid);

/* ---- locks in shared memory (sim/lock.c) ---- */

/* 0, or -ETIMEDOUT when the lock stayed held for timeout_ms. */
int sim_lock_take(uint32_t *w, unsigned int timeout_ms);
void sim_lock_drop(uint32_t *w);

/* ---- one domain's files, opened by this process (sim/dom.c) ---- */

struct sim_dom {
	uint32_t domid;
	uint32_t gen;
	uint32_t mem_pages;        /* from the memory file's size, not shared data */
	int mem_fd;
	int xen_fd;
	struct sim_gnt_file *gnt;
	size_t gnt_size;
	struct sim_xen_file *xen;
	void *mem;                 /* the whole guest memory */
	/* Per-process bookkeeping, owned by the opener (platform/sim.c). */
	unsigned int refs;
	unsigned int nmaps;
	uint32_t *pins;            /* our pins of each reference, NULL until the first */
};

/* Open the current incarnation of domid (running or dying); -ESRCH if none. */
int sim_dom_open(struct sim_hostmap *h, uint32_t domid, struct sim_dom **out);
void sim_dom_close(struct sim_dom *d);
/* Mark this process as mapping d's pages (OFD read lock), and undo it. */
int sim_dom_mapper_hold(struct sim_dom *d);
void sim_dom_mapper_release(struct sim_dom *d);
/*
 * Mark this process as pinning refs of d (the pin locks, counted per
 * reference: taken before the pins, dropped after them), and undo it.
 * The caller serializes calls on one d.
 */
int sim_dom_pins_hold(struct sim_dom *d, unsigned int count, const uint32_t *refs);
void sim_dom_pins_release(struct sim_dom *d, unsigned int count, const uint32_t *refs);
/* A process alive (this one, through d or another open file) holds ref's pin lock. */
bool sim_dom_pin_live(struct sim_dom *d, uint32_t ref);
/* The slot still names this incarnation of d, running. */
bool sim_dom_running(const struct sim_hostmap *h, const struct sim_dom *d);

/* ---- grant tables (sim/grant.c) ---- */

/*
 * Pin reference ref of g for domain mapper, as Xen's map and copy do:
 * returns a GNTST_* code and, on success, the pinned frame.  With
 * g->xen->gnt_lock held.
 */
int16_t sim_gnt_pin(struct sim_dom *g, uint32_t mapper, uint32_t ref, bool write,
		    uint32_t *frame);
/* Drop a pin taken by sim_gnt_pin.  With g->xen->gnt_lock held. */
void sim_gnt_unpin(struct sim_dom *g, uint32_t ref, bool write);
/*
 * Release ref's pins if no live process holds its pin lock: their
 * processes died, and the kernel's gntdev would have unmapped them at
 * exit.  True if ref is pinned no more.  With g->xen->gnt_lock held.
 */
bool sim_gnt_reclaim(struct sim_dom *g, uint32_t ref);

/* Guest side: allocate and free grant references and pages of d. */
int sim_gnt_alloc_refs(struct sim_dom *d, unsigned int count, uint32_t *refs,
		       uint32_t *hint);
void sim_gnt_free_refs(struct sim_dom *d, unsigned int count, const uint32_t *refs);
int sim_mem_alloc_pages(struct sim_dom *d, unsigned int count, uint32_t *pages,
			uint32_t *hint);
void sim_mem_free_pages(struct sim_dom *d, unsigned int count, const uint32_t *pages);
/* Fill a grant entry the way a guest does (flags last, after a barrier). */
void sim_gnt_grant(struct sim_dom *d, uint32_t ref, uint32_t domid,
		   uint32_t frame, bool readonly);
/*
 * End access: -EBUSY while the entry is mapped (GTF_reading/GTF_writing)
 * by a live process; a dead process's pins are released first.
 */
int sim_gnt_end(struct sim_dom *d, uint32_t ref);

/* ---- event channels (sim/evtchn.c) ---- */

int sim_evt_handle_alloc(struct sim_host *host, uint32_t domid, uint32_t *slot,
			 uint32_t *gen);
void sim_evt_handle_free(struct sim_host *host, uint32_t slot, uint32_t gen);
/* The FIFO of a handle (unique per slot and generation), in the memdir. */
void sim_evt_handle_path(const struct sim_hostmap *h, uint32_t slot, uint32_t gen,
			 char *buf, size_t len);
/* Returns the new local port. */
int sim_evt_alloc_unbound(struct sim_hostmap *h, struct sim_dom *self,
			  uint32_t remote_dom, uint32_t slot, uint32_t gen);
/*
 * Free self's end of the binding of remote's remote_port if the handle
 * that bound it is gone (as bind does first), for a process that cannot
 * tell a dead owner itself: an xbd-back worker, without /proc.
 */
int sim_evt_reclaim(struct sim_hostmap *h, struct sim_dom *self, struct sim_dom *remote,
		    uint32_t remote_port);
/* Returns the new local port. */
int sim_evt_bind_interdomain(struct sim_hostmap *h, struct sim_dom *self,
			     struct sim_dom *remote, uint32_t remote_port,
			     uint32_t slot, uint32_t gen);
/*
 * Close port of self; the peer port (in remote, which may be NULL when the
 * peer is gone) becomes unbound, as in Xen.  rdom is the peer domain the
 * caller read with sim_evt_peer (UINT32_MAX for a port with no peer);
 * -EAGAIN when that changed meanwhile: look it up again and retry.
 */
int sim_evt_close(struct sim_dom *self, uint32_t port, struct sim_dom *remote,
		  uint32_t rdom);
/* The remote end of port, read once (state, domain, port). */
void sim_evt_peer(const struct sim_dom *self, uint32_t port, uint32_t *state,
		  uint32_t *remote_dom, uint32_t *remote_port);
/*
 * Set port pending.  True if it was neither pending nor masked: then its
 * handle must be woken (sim_evt_arm, then one byte into its FIFO).
 */
bool sim_evt_set_pending(struct sim_port *rec);
/*
 * Arm the doorbell of handle slot (generation gen): true if the caller
 * must write the wake-up byte, false if one is already on its way (at
 * most one per handle is in flight) or the handle is gone.
 */
bool sim_evt_arm(struct sim_host *host, uint32_t slot, uint32_t gen);
/* The reader took the wake-up: the next arm rings again. */
void sim_evt_disarm(struct sim_host *host, uint32_t slot);

#endif /* XBD_SIM_HYPERVISOR_H */
