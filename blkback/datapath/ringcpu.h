/*
 * ringcpu.h: where each ring runs (pin-rings, real Xen).  A new ring gets
 * the CPU with the fewest rings among those xbd-back may run on; its
 * thread runs there, and so does its event channel's interrupt, so that
 * the guest's kick, the thread it wakes and the answer's notify stay on
 * one dom0 vCPU (Linux spreads user event channels over the vCPUs round
 * robin, which puts half the wake-ups on the wrong one).
 *
 * The interrupt is found by name: Linux's evtchn device names it
 * "evtchn:<comm>" after the thread that opened the device, so the opener
 * takes a name of its own (xbd_ringcpu_tag) for the open.
 *
 * The counts belong to the process that called xbd_ringcpu_init (the
 * daemon's control plane); a worker only applies the CPU it is given.
 */
#ifndef XBD_BACK_RINGCPU_H
#define XBD_BACK_RINGCPU_H

#include <stdbool.h>

/* The length of a tag, "xbdr" and a number, as a thread's comm allows. */
#define XBD_RINGCPU_TAG_LEN 16

/*
 * Pinning on (where there are two or more CPUs to choose from) or off;
 * irqs: the interrupts move too (real Xen; the simulator has none).
 */
void xbd_ringcpu_init(bool on, bool irqs);
bool xbd_ringcpu_on(void);

/* A CPU for a new ring, counted until xbd_ringcpu_put; -1 when off. */
int xbd_ringcpu_pick(void);
void xbd_ringcpu_put(int cpu);

/*
 * Name the calling thread with a fresh tag (written to tag) for the open
 * of an event channel device; xbd_ringcpu_untag gives it back the name
 * saved in saved.  Without pinning of interrupts tag is "" and nothing
 * changes.
 */
void xbd_ringcpu_tag(char tag[XBD_RINGCPU_TAG_LEN], char saved[XBD_RINGCPU_TAG_LEN]);
void xbd_ringcpu_untag(const char tag[XBD_RINGCPU_TAG_LEN], const char saved[XBD_RINGCPU_TAG_LEN]);

/*
 * Move the interrupt named "evtchn:TAG" under irq_root (/proc/irq) to cpu.
 * The irq number, or -errno: -ENOENT (no such interrupt), or why the
 * kernel refused.  effective is the CPU the kernel reports it on after
 * the move (-1 where it does not say).
 */
int xbd_ringcpu_move_irq(const char *irq_root, const char *tag, int cpu, int *effective);

/* Pin the calling thread to cpu (>= 0): 0 or -errno. */
int xbd_ringcpu_pin_self(int cpu);

/*
 * A started ring's event channel interrupt (tagged tag) to the ring's cpu
 * (pin-rings; after the bind, by whoever bound it): said in a verbose line
 * naming the ring, a failure once per process.
 */
void xbd_ringcpu_place_irq(const char *name, int cpu, const char *tag);

#endif
