/*
 * sim/evtchn.c: interdomain event channels.  Ports live in each domain's
 * Xen file; a port belongs to one handle, and a handle is one named FIFO
 * (a write of one byte costs a third of a unix datagram), so its fd works
 * with poll/epoll.
 *
 * Delivery follows Xen plus the Linux evtchn driver: notify sets the peer
 * port's pending bit; a port that is pending and not masked is delivered
 * once (the reader clears pending and masks it); while masked, further
 * notifications only set pending again, and unmask re-delivers a port
 * that became pending meanwhile.  So notifications coalesce and none is
 * lost.  The handle's "awake" word lets at most one wake-up byte be in
 * flight per handle: a notify costs at most one write(), and none at all
 * while the reader has not caught up.  A handle whose owner process is
 * gone (xbd_sim_pid_gone, also simhost.h's) is reclaimed.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sim/layout.h"

bool xbd_sim_pid_gone(uint32_t pid)
{
	char path[48], buf[512], *p;
	ssize_t n;
	int fd;

	if (kill((pid_t)pid, 0) < 0)
		return errno == ESRCH;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* Gone meanwhile, if there is a /proc at all (a confined worker has none). */
		if (errno != ENOENT)
			return false;
		fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return false;
		close(fd);
		return true;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "PID (COMM) S ...": the state after the last ')' (COMM may hold one). */
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/*
 * Whether a handle's owner is gone.  A killed process has closed its
 * files (Linux's evtchn driver would have closed its ports) as soon as it
 * is a zombie, which it stays until its parent, or whoever inherited it,
 * reaps it: on a host whose init reaps slowly that takes seconds.  An
 * xbd-back worker has no /proc to tell: the main process reclaims for it
 * (sim_evt_reclaim).
 */
static bool pid_dead(uint32_t pid)
{
	return xbd_sim_pid_gone(pid);
}

int sim_evt_handle_alloc(struct sim_host *host, uint32_t domid, uint32_t *slot,
			 uint32_t *gen)
{
	uint32_t me = (uint32_t)getpid();

	/* Free slots first; then slots whose owner died without closing. */
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < SIM_NR_HANDLES; i++) {
			struct sim_host_handle *hh = &host->handles[i];
			uint32_t cur = __atomic_load_n(&hh->pid, __ATOMIC_ACQUIRE);
			uint32_t g;

			if (cur && (pass == 0 || !pid_dead(cur)))
				continue;
			if (!__atomic_compare_exchange_n(&hh->pid, &cur, me, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				continue;
			g = __atomic_add_fetch(&hh->gen, 1, __ATOMIC_SEQ_CST);
			__atomic_store_n(&hh->domid, domid, __ATOMIC_RELAXED);
			__atomic_store_n(&hh->awake, 0, __ATOMIC_SEQ_CST);
			*slot = i;
			*gen = g;
			return 0;
		}
	}
	return -EMFILE;
}

void sim_evt_handle_free(struct sim_host *host, uint32_t slot, uint32_t gen)
{
	struct sim_host_handle *hh = &host->handles[slot];

	if (__atomic_load_n(&hh->gen, __ATOMIC_ACQUIRE) != gen)
		return;
	__atomic_store_n(&hh->pid, 0, __ATOMIC_RELEASE);
}

void sim_evt_handle_path(const struct sim_hostmap *h, uint32_t slot, uint32_t gen,
			 char *buf, size_t len)
{
	snprintf(buf, len, "%s/evt-%u-%u", h->memdir, slot, gen);
}

bool sim_evt_arm(struct sim_host *host, uint32_t slot, uint32_t gen)
{
	struct sim_host_handle *hh;

	if (slot >= SIM_NR_HANDLES)
		return false;
	hh = &host->handles[slot];
	if (__atomic_load_n(&hh->gen, __ATOMIC_SEQ_CST) != gen ||
	    !__atomic_load_n(&hh->pid, __ATOMIC_SEQ_CST))
		return false;
	return !(__atomic_fetch_or(&hh->awake, 1, __ATOMIC_SEQ_CST) & 1);
}

void sim_evt_disarm(struct sim_host *host, uint32_t slot)
{
	__atomic_store_n(&host->handles[slot].awake, 0, __ATOMIC_SEQ_CST);
}

bool sim_evt_set_pending(struct sim_port *rec)
{
	uint32_t old = __atomic_fetch_or(&rec->pm, SIM_EVT_PENDING, __ATOMIC_SEQ_CST);

	return !(old & (SIM_EVT_PENDING | SIM_EVT_MASKED));
}

/* Lock the event channel tables of one or two domains, lowest domid first. */
static int lock2(struct sim_dom *a, struct sim_dom *b)
{
	int r;

	if (!b || a == b || a->domid == b->domid)
		return sim_lock_take(&a->xen->evt_lock, SIM_LOCK_TIMEOUT_MS);
	if (a->domid > b->domid) {
		struct sim_dom *t = a;

		a = b;
		b = t;
	}
	r = sim_lock_take(&a->xen->evt_lock, SIM_LOCK_TIMEOUT_MS);
	if (r)
		return r;
	r = sim_lock_take(&b->xen->evt_lock, SIM_LOCK_TIMEOUT_MS);
	if (r)
		sim_lock_drop(&a->xen->evt_lock);
	return r;
}

static void unlock2(struct sim_dom *a, struct sim_dom *b)
{
	if (b && b != a && b->domid != a->domid)
		sim_lock_drop(&b->xen->evt_lock);
	sim_lock_drop(&a->xen->evt_lock);
}

static bool handle_dead(struct sim_host *host, uint32_t slot, uint32_t gen);

/*
 * A free port of d, with d's evt_lock held.  When none is left, take an
 * unbound port whose handle is gone (its owner died without closing it:
 * Linux would have closed it then); nobody can bind it meanwhile, as
 * binding needs our lock.
 */
static int find_free_port(struct sim_host *host, struct sim_dom *d)
{
	for (uint32_t p = 1; p < SIM_NR_PORTS; p++)
		if (__atomic_load_n(&d->xen->ports[p].state, __ATOMIC_ACQUIRE) == SIM_PORT_FREE)
			return (int)p;
	for (uint32_t p = 1; p < SIM_NR_PORTS; p++) {
		struct sim_port *rec = &d->xen->ports[p];

		if (__atomic_load_n(&rec->state, __ATOMIC_ACQUIRE) == SIM_PORT_UNBOUND &&
		    handle_dead(host, __atomic_load_n(&rec->handle, __ATOMIC_RELAXED),
				__atomic_load_n(&rec->hgen, __ATOMIC_RELAXED)))
			return (int)p;
	}
	return -ENOSPC;
}

static void port_setup(struct sim_port *rec, uint32_t state, uint32_t rdom,
		       uint32_t rport, uint32_t slot, uint32_t gen)
{
	__atomic_store_n(&rec->remote_dom, rdom, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->remote_port, rport, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->handle, slot, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->hgen, gen, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->pm, 0, __ATOMIC_RELAXED);
	/* Lock-free readers (notify) check the state first, then the rest. */
	__atomic_store_n(&rec->state, state, __ATOMIC_SEQ_CST);
}

int sim_evt_alloc_unbound(struct sim_hostmap *h, struct sim_dom *self,
			  uint32_t remote_dom, uint32_t slot, uint32_t gen)
{
	int r, port;

	if (remote_dom == DOMID_SELF)
		remote_dom = self->domid;
	r = sim_lock_take(&self->xen->evt_lock, SIM_LOCK_TIMEOUT_MS);
	if (r)
		return r;
	if (!sim_dom_running(h, self)) {
		port = -ESRCH;
		goto out;
	}
	port = find_free_port(h->host, self);
	if (port > 0)
		port_setup(&self->xen->ports[port], SIM_PORT_UNBOUND, remote_dom, 0, slot, gen);
out:
	sim_lock_drop(&self->xen->evt_lock);
	return port;
}

/* Whether the handle a port was bound with is closed or its owner died. */
static bool handle_dead(struct sim_host *host, uint32_t slot, uint32_t gen)
{
	struct sim_host_handle *hh;
	uint32_t pid;

	if (slot >= SIM_NR_HANDLES)
		return true;
	hh = &host->handles[slot];
	pid = __atomic_load_n(&hh->pid, __ATOMIC_ACQUIRE);
	if (!pid || __atomic_load_n(&hh->gen, __ATOMIC_ACQUIRE) != gen)
		return true;
	return pid_dead(pid);
}

/*
 * Linux's evtchn device closes every port of a handle when its last fd
 * goes, so on Xen a killed backend's ports are closed and the guest's
 * port is unbound again, ready for the restarted backend to bind.  The
 * simulator's handles have no release hook, so we do that lazily here:
 * if remote's port is bound to a port of self whose handle is gone,
 * close that port the way its owner would have.  With both evt_locks held.
 */
static void reclaim_dead_peer(struct sim_host *host, struct sim_dom *self,
			      struct sim_dom *remote, uint32_t remote_port)
{
	struct sim_port *rrec = &remote->xen->ports[remote_port];
	struct sim_port *lrec;
	uint32_t lport;

	if (__atomic_load_n(&rrec->state, __ATOMIC_ACQUIRE) != SIM_PORT_INTERDOMAIN ||
	    __atomic_load_n(&rrec->remote_dom, __ATOMIC_RELAXED) != self->domid)
		return;
	lport = __atomic_load_n(&rrec->remote_port, __ATOMIC_RELAXED);
	if (lport == 0 || lport >= SIM_NR_PORTS)
		return;
	lrec = &self->xen->ports[lport];
	if (__atomic_load_n(&lrec->state, __ATOMIC_ACQUIRE) != SIM_PORT_INTERDOMAIN ||
	    __atomic_load_n(&lrec->remote_dom, __ATOMIC_RELAXED) != remote->domid ||
	    __atomic_load_n(&lrec->remote_port, __ATOMIC_RELAXED) != remote_port)
		return;
	if (!handle_dead(host, __atomic_load_n(&lrec->handle, __ATOMIC_RELAXED),
			 __atomic_load_n(&lrec->hgen, __ATOMIC_RELAXED)))
		return;
	/* As in sim_evt_close: the peer waits to be bound again. */
	__atomic_store_n(&rrec->remote_port, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&rrec->state, SIM_PORT_UNBOUND, __ATOMIC_SEQ_CST);
	__atomic_store_n(&lrec->state, SIM_PORT_FREE, __ATOMIC_SEQ_CST);
	__atomic_store_n(&lrec->handle, UINT32_MAX, __ATOMIC_RELAXED);
	__atomic_store_n(&lrec->pm, 0, __ATOMIC_RELAXED);
}

int sim_evt_reclaim(struct sim_hostmap *h, struct sim_dom *self, struct sim_dom *remote,
		    uint32_t remote_port)
{
	int r;

	if (remote_port == 0 || remote_port >= SIM_NR_PORTS)
		return -EINVAL;
	r = lock2(self, remote);
	if (r)
		return r;
	reclaim_dead_peer(h->host, self, remote, remote_port);
	unlock2(self, remote);
	return 0;
}

int sim_evt_bind_interdomain(struct sim_hostmap *h, struct sim_dom *self,
			     struct sim_dom *remote, uint32_t remote_port,
			     uint32_t slot, uint32_t gen)
{
	struct sim_port *rrec;
	int r, port;

	if (remote_port == 0 || remote_port >= SIM_NR_PORTS)
		return -EINVAL;
	r = lock2(self, remote);
	if (r)
		return r;
	if (!sim_dom_running(h, self) || !sim_dom_running(h, remote)) {
		port = -ESRCH;
		goto out;
	}
	rrec = &remote->xen->ports[remote_port];
	reclaim_dead_peer(h->host, self, remote, remote_port);
	if (__atomic_load_n(&rrec->state, __ATOMIC_ACQUIRE) != SIM_PORT_UNBOUND ||
	    __atomic_load_n(&rrec->remote_dom, __ATOMIC_RELAXED) != self->domid) {
		port = -EINVAL;
		goto out;
	}
	port = find_free_port(h->host, self);
	if (port < 0)
		goto out;
	port_setup(&self->xen->ports[port], SIM_PORT_INTERDOMAIN, remote->domid,
		   remote_port, slot, gen);
	__atomic_store_n(&rrec->remote_port, (uint32_t)port, __ATOMIC_RELAXED);
	__atomic_store_n(&rrec->state, SIM_PORT_INTERDOMAIN, __ATOMIC_SEQ_CST);
out:
	unlock2(self, remote);
	return port;
}

void sim_evt_peer(const struct sim_dom *self, uint32_t port, uint32_t *state,
		  uint32_t *remote_dom, uint32_t *remote_port)
{
	const struct sim_port *rec = &self->xen->ports[port];

	*state = __atomic_load_n(&rec->state, __ATOMIC_ACQUIRE);
	*remote_dom = __atomic_load_n(&rec->remote_dom, __ATOMIC_RELAXED);
	*remote_port = __atomic_load_n(&rec->remote_port, __ATOMIC_RELAXED);
}

int sim_evt_close(struct sim_dom *self, uint32_t port, struct sim_dom *remote,
		  uint32_t rdom)
{
	struct sim_port *rec = &self->xen->ports[port];
	uint32_t state, cur_rdom, rport;
	int r;

	if (remote && remote->domid != rdom)
		return -EINVAL;
	r = lock2(self, remote);
	if (r)
		return r;
	sim_evt_peer(self, port, &state, &cur_rdom, &rport);
	if (state == SIM_PORT_INTERDOMAIN ? cur_rdom != rdom : rdom != UINT32_MAX) {
		r = -EAGAIN;
		goto out;
	}
	if (state == SIM_PORT_INTERDOMAIN && remote && rport > 0 && rport < SIM_NR_PORTS) {
		struct sim_port *rrec = &remote->xen->ports[rport];

		/* As in Xen, the peer's port waits to be bound again by us. */
		if (__atomic_load_n(&rrec->state, __ATOMIC_ACQUIRE) == SIM_PORT_INTERDOMAIN &&
		    __atomic_load_n(&rrec->remote_dom, __ATOMIC_RELAXED) == self->domid &&
		    __atomic_load_n(&rrec->remote_port, __ATOMIC_RELAXED) == port) {
			__atomic_store_n(&rrec->remote_port, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&rrec->state, SIM_PORT_UNBOUND, __ATOMIC_SEQ_CST);
		}
	}
	__atomic_store_n(&rec->state, SIM_PORT_FREE, __ATOMIC_SEQ_CST);
	__atomic_store_n(&rec->handle, UINT32_MAX, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->pm, 0, __ATOMIC_RELAXED);
out:
	unlock2(self, remote);
	return r;
}
