/*
 * confine.c: a worker's confinement (confine.h), in the order that makes
 * each step possible: the empty root needs CAP_SYS_ADMIN, the bounding
 * set CAP_SETPCAP, so both come before the uid change, which drops every
 * capability; the parent-death signal is cleared by a uid change, so it
 * comes after; seccomp comes last, once nothing else needs a system call
 * outside its list.
 *
 * The allow-list is what the data path calls (datapath/, the aio, null
 * and fault engines, platform/xen-fd.c or platform/sim.c, the messages to
 * the main process), with the arguments pinned where they can be: ioctl
 * only with the gntdev, evtchn and discard request numbers, fcntl only
 * with the commands we use, clone only for threads (clone3 says ENOSYS,
 * so that glibc falls back to clone, whose flags can be checked).  The
 * simulator's event channels and keeper are files and a socket, so there
 * a worker may also open FIFOs with exactly the simulator's flags, make
 * and remove FIFOs, and connect unix sockets (only in the directories
 * bind-mounted into its root).  Everything else kills the process: the
 * call raises SIGSYS (SECCOMP_RET_TRAP), whose handler names the call and
 * where it came from, then dies of it (on_sigsys).  No audit logging is
 * asked for (SCMP_FLTATR_CTL_LOG would log clone3's deliberate ENOSYS
 * at every thread a worker starts, as audit type 1326).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/fs.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <grp.h>

#include <xen/xen.h>
#include <xen/sys/evtchn.h>
#include <xen/sys/gntdev.h>

#include "blkback/workers/confine.h"
#include "blkback/log/log.h"
#include "blkback/workers/worker.h"

/* Where the empty root is mounted before it becomes the root (never a source's ancestor). */
#define ROOT_MNT "/sys"
/*
 * Descriptors and threads a worker may have: per ring an event channel, a
 * journal, an epoll set, a stop eventfd and an aio context's eventfd (and
 * on the simulator a peer FIFO), plus the stores' files; per ring two
 * threads (the ring's and its aio helper).
 */
#define WORKER_NOFILE (16 + 8 * XBD_WORKER_SLOTS)
#define WORKER_NPROC (8 + 2 * XBD_WORKER_SLOTS)

static void step_failed(uint32_t *skipped, uint32_t step, const char *what)
{
	*skipped |= step;
	xbd_log(XBD_LOG_WARNING, "worker: %s: %s", what, strerror(errno));
}

/* mkdir -p of path below base (each component 0755). */
static int make_dirs(const char *base, const char *path)
{
	char p[PATH_MAX];
	size_t n = (size_t)snprintf(p, sizeof(p), "%s%s", base, path), i;

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	for (i = strlen(base) + 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		p[i] = '\0';
		if (mkdir(p, 0755) && errno != EEXIST)
			return -errno;
		if (i < n)
			p[i] = '/';
	}
	return 0;
}

/* Bind dir at its own path in the new root, without suid, devices or exec. */
static int bind_same_path(const char *dir)
{
	char target[PATH_MAX];

	if (make_dirs(ROOT_MNT, dir) ||
	    snprintf(target, sizeof(target), "%s%s", ROOT_MNT, dir) >= (int)sizeof(target) ||
	    mount(dir, target, NULL, MS_BIND, NULL) ||
	    mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL))
		return -1;
	return 0;
}

/*
 * A private mount namespace whose root is an empty tmpfs, read-only; on
 * the simulator its host's hv directory and memory directory (its event
 * channels' FIFOs, its keeper's socket) stay at their paths.
 */
static void empty_root(const struct xbd_confine_req *c, uint32_t *skipped)
{
	char hv[PATH_MAX], mem[PATH_MAX], *memdir = NULL;

	if (c->sim) {
		if (snprintf(hv, sizeof(hv), "%s/hv", c->sim_dir) >= (int)sizeof(hv) ||
		    snprintf(mem, sizeof(mem), "%s/hv/mem", c->sim_dir) >= (int)sizeof(mem)) {
			errno = ENAMETOOLONG;
			step_failed(skipped, XBD_CONFINE_MOUNTNS, "no empty root");
			return;
		}
		/* The memory directory is DIR/hv itself, or where DIR/hv/mem points. */
		memdir = realpath(mem, NULL);
	}
	if (unshare(CLONE_NEWNS)) {
		*skipped |= XBD_CONFINE_MOUNTNS;
		if (errno != EPERM)
			step_failed(skipped, XBD_CONFINE_MOUNTNS, "no private mount namespace");
		goto out;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("xbd-worker", ROOT_MNT, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=64k,nr_inodes=64,mode=0755")) {
		step_failed(skipped, XBD_CONFINE_MOUNTNS, "no empty root");
		goto out;
	}
	if (c->sim && (bind_same_path(hv) || (memdir && strcmp(memdir, hv) &&
					       bind_same_path(memdir)))) {
		step_failed(skipped, XBD_CONFINE_MOUNTNS, "cannot bind the simulator's directories");
		goto out;
	}
	/* pivot_root(".", "."): the old root lands on top of the new one, then goes. */
	if (chdir(ROOT_MNT) || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) ||
	    chdir("/") ||
	    mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
		  MS_NOEXEC, NULL)) {
		step_failed(skipped, XBD_CONFINE_MOUNTNS, "cannot make the empty root its root");
		goto out;
	}
	if (c->sim)
		*skipped |= XBD_CONFINE_SIMDIRS;
out:
	free(memdir);
}

/* Every capability, effective, permitted and inheritable, is gone. */
static bool no_caps(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return false;
	return !d[0].effective && !d[1].effective && !d[0].permitted && !d[1].permitted &&
	       !d[0].inheritable && !d[1].inheritable;
}

static void drop_user(const struct xbd_confine_req *c, uint32_t *skipped)
{
	uid_t r, e, s;
	gid_t gr, ge, gs;

	if (geteuid() != 0) {
		*skipped |= XBD_CONFINE_UID;
		goto caps;
	}
	/* Needs CAP_SETPCAP: before the uid change takes it. */
	for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (setgroups(0, NULL) || setresgid(c->gid, c->gid, c->gid) ||
	    setresuid(c->uid, c->uid, c->uid)) {
		step_failed(skipped, XBD_CONFINE_UID, "cannot take its own uid");
		goto caps;
	}
	if (getresuid(&r, &e, &s) || r != c->uid || e != c->uid || s != c->uid ||
	    getresgid(&gr, &ge, &gs) || gr != c->gid || ge != c->gid || gs != c->gid) {
		errno = EPERM;
		step_failed(skipped, XBD_CONFINE_UID, "its uid did not change");
	}
caps:
	if (!no_caps()) {
		errno = EPERM;
		step_failed(skipped, XBD_CONFINE_CAPS, "it still has capabilities");
	}
}

static void limits(const struct xbd_confine_req *c, uint32_t *skipped)
{
	struct rlimit nofile = { WORKER_NOFILE, WORKER_NOFILE };
	struct rlimit nproc = { WORKER_NPROC, WORKER_NPROC };
	struct rlimit none = { 0, 0 };

	/*
	 * No RLIMIT_FSIZE: it limits every write to a regular file, the
	 * guest's disk image and a log file on stderr included, and the worker
	 * cannot create files anyway.  RLIMIT_NPROC counts the uid's threads:
	 * only with a uid of its own.
	 */
	if (setrlimit(RLIMIT_NOFILE, &nofile) || setrlimit(RLIMIT_CORE, &none) ||
	    (!(*skipped & XBD_CONFINE_UID) && setrlimit(RLIMIT_NPROC, &nproc)))
		step_failed(skipped, XBD_CONFINE_RLIMITS, "cannot set its resource limits");
}

/*
 * A call outside the list raises SIGSYS (SECCOMP_RET_TRAP) instead of
 * killing outright, so that the worker can say which call it was and
 * where from before it dies of the same signal: one line on stderr (the
 * main process's, so the journal or its log file) with the call's number,
 * its first three arguments and the return addresses as module+offset,
 * for addr2line or nm.  The handler runs with SIGSYS blocked: a second
 * forbidden call inside it makes the kernel kill the process at once.
 * It uses only what was ready before the filter: the module table below,
 * and backtrace(), called once at start so that its unwinder is loaded.
 */
#define TRAP_MODULES 24
#define TRAP_FRAMES 16

static struct trap_module {
	uintptr_t start, end;
	const char *name;
} trap_modules[TRAP_MODULES];
static unsigned int trap_nmodules;

static int note_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct trap_module *m;
	const char *slash;

	if (trap_nmodules == TRAP_MODULES)
		return 1;
	m = &trap_modules[trap_nmodules];
	/* Offsets from the load address, as addr2line and nm count them; up to its last segment. */
	m->start = info->dlpi_addr;
	m->end = 0;
	for (unsigned int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && info->dlpi_addr + ph->p_vaddr + ph->p_memsz > m->end)
			m->end = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
	m->name = slash ? slash + 1 : info->dlpi_name && *info->dlpi_name ? info->dlpi_name
									    : "xbd-back";
	if (m->end > m->start)
		trap_nmodules++;
	return 0;
}

static void trap_prepare(void)
{
	void *frames[2];

	dl_iterate_phdr(note_module, NULL);
	backtrace(frames, 2);
}

static int put_frame(char *buf, size_t len, uintptr_t a)
{
	for (unsigned int i = 0; i < trap_nmodules; i++)
		if (a >= trap_modules[i].start && a < trap_modules[i].end)
			return snprintf(buf, len, " %s+%#lx", trap_modules[i].name,
					(unsigned long)(a - trap_modules[i].start));
	return snprintf(buf, len, " %#lx", (unsigned long)a);
}

static void on_sigsys(int sig, siginfo_t *si, void *ucv)
{
	void *frames[TRAP_FRAMES];
	char buf[1024];
	size_t n = 0;
	int nf, i;
#if defined(__x86_64__)
	const ucontext_t *uc = ucv;
	const greg_t *g = uc->uc_mcontext.gregs;

	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "xbd-back: worker (pid %d): system call "
			      "%d (%#llx, %#llx, %#llx) is not allowed; called from", (int)getpid(),
			      si->si_syscall, (unsigned long long)g[REG_RDI],
			      (unsigned long long)g[REG_RSI], (unsigned long long)g[REG_RDX]);
#elif defined(__aarch64__)
	const ucontext_t *uc = ucv;
	const unsigned long long *x = uc->uc_mcontext.regs;

	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "xbd-back: worker (pid %d): system call "
			      "%d (%#llx, %#llx, %#llx) is not allowed; called from", (int)getpid(),
			      si->si_syscall, x[0], x[1], x[2]);
#else
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "xbd-back: worker (pid %d): system call "
			      "%d is not allowed; called from", (int)getpid(), si->si_syscall);
#endif
	/* The call's own address first: the frames below the handler start at the signal frame. */
	n += (size_t)put_frame(buf + n, sizeof(buf) - n, (uintptr_t)si->si_call_addr);
	nf = backtrace(frames, TRAP_FRAMES);
	/* This handler and the signal trampoline come first, then the call again. */
	for (i = 0; i < nf && frames[i] != si->si_call_addr; i++)
		;
	for (i = i < nf ? i + 1 : 1; i < nf && n < sizeof(buf) - 40; i++)
		n += (size_t)put_frame(buf + n, sizeof(buf) - n, (uintptr_t)frames[i]);
	if (n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, n) < 0) {
		/* Nothing to do about it: the death below is reported anyway. */
	}
	/*
	 * The list has no rt_sigaction for SIGSYS: this call traps again with
	 * SIGSYS blocked, and the kernel kills the process with it.  (Code
	 * that took the worker over cannot ignore the signal either way, and
	 * blocking it has the same effect.)
	 */
	signal(SIGSYS, SIG_DFL);
	raise(SIGSYS);
}

#define ALLOW(call, ...) \
	err |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(call), __VA_ARGS__)
/* An argument compared on its low 32 bits (ioctl requests and flags are ints). */
#define ARG32(i, v) SCMP_CMP(i, SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint32_t)(v))

/*
 * One list for every architecture.  arm64 (the kernel's generic system
 * call table) has no open, poll, epoll_wait, mknod, unlink or chmod:
 * libseccomp adds nothing for a name the architecture lacks, and glibc
 * calls the forms listed beside them there (openat, ppoll, epoll_pwait,
 * mknodat, unlinkat, fchmodat; fstat and newfstatat both exist).
 */
static int allow_list(scmp_filter_ctx ctx, const struct xbd_confine_req *c)
{
	static const int plain[] = {
		/* descriptors, events, waits */
		SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev),
		SCMP_SYS(pread64), SCMP_SYS(close), SCMP_SYS(fstat), SCMP_SYS(newfstatat),
		SCMP_SYS(epoll_create1), SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_wait),
		SCMP_SYS(epoll_pwait), SCMP_SYS(eventfd2), SCMP_SYS(timerfd_create),
		SCMP_SYS(timerfd_settime), SCMP_SYS(timerfd_gettime), SCMP_SYS(poll),
		SCMP_SYS(ppoll), SCMP_SYS(sendmsg), SCMP_SYS(recvmsg), SCMP_SYS(sendto),
		SCMP_SYS(recvfrom),
		/* storage */
		SCMP_SYS(io_setup), SCMP_SYS(io_destroy), SCMP_SYS(io_submit),
		SCMP_SYS(io_getevents), SCMP_SYS(io_pgetevents), SCMP_SYS(io_cancel),
		SCMP_SYS(fdatasync), SCMP_SYS(fsync), SCMP_SYS(fallocate),
		/* memory, threads, time */
		SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mprotect), SCMP_SYS(madvise),
		SCMP_SYS(mremap), SCMP_SYS(brk), SCMP_SYS(futex), SCMP_SYS(set_robust_list),
		SCMP_SYS(rseq), SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity),
		/* a ring thread on its CPU (pin-rings): its uid owns no other process */
		SCMP_SYS(sched_setaffinity),
		SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(clock_nanosleep),
		SCMP_SYS(nanosleep), SCMP_SYS(gettimeofday), SCMP_SYS(getpid), SCMP_SYS(gettid),
		SCMP_SYS(getppid), SCMP_SYS(getrandom), SCMP_SYS(rt_sigprocmask),
		SCMP_SYS(rt_sigreturn), SCMP_SYS(sigaltstack),
		SCMP_SYS(restart_syscall),
		SCMP_SYS(exit), SCMP_SYS(exit_group),
	};
	static const unsigned long ioctls[] = {
		IOCTL_GNTDEV_MAP_GRANT_REF, IOCTL_GNTDEV_UNMAP_GRANT_REF,
		IOCTL_GNTDEV_GET_OFFSET_FOR_VADDR, IOCTL_GNTDEV_GRANT_COPY,
		IOCTL_EVTCHN_BIND_INTERDOMAIN, IOCTL_EVTCHN_UNBIND, IOCTL_EVTCHN_NOTIFY,
		BLKDISCARD, BLKSECDISCARD,
	};
	static const int fcntls[] = {
		F_GETFL, F_SETFL, F_GETFD, F_SETFD, F_GET_SEALS, F_OFD_SETLK, F_OFD_GETLK,
	};
	/* The flags the simulator opens FIFOs with (platform/sim.c: its own, a peer's). */
	const int fifo_own = O_RDWR | O_NONBLOCK | O_CLOEXEC, fifo_peer = fifo_own | O_NOFOLLOW;
	int err = 0;
	size_t i;

	for (i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		err |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, plain[i], 0);
	for (i = 0; i < sizeof(ioctls) / sizeof(ioctls[0]); i++)
		ALLOW(ioctl, 1, ARG32(1, ioctls[i]));
	for (i = 0; i < sizeof(fcntls) / sizeof(fcntls[0]); i++)
		ALLOW(fcntl, 1, ARG32(1, fcntls[i]));
	/* Threads, never processes (clone3's flags are in memory: ENOSYS, glibc falls back). */
	ALLOW(clone, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	err |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	/* Any handler but SIGSYS's: on_sigsys stays, and its own change kills (on_sigsys). */
	ALLOW(rt_sigaction, 1, SCMP_A0(SCMP_CMP_NE, SIGSYS));
	/* Signals to itself only (abort, the tests' crash points). */
	ALLOW(tgkill, 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid()));
	if (c->sim) {
		ALLOW(openat, 1, ARG32(2, fifo_own));
		ALLOW(openat, 1, ARG32(2, fifo_peer));
		ALLOW(open, 1, ARG32(1, fifo_own));
		ALLOW(open, 1, ARG32(1, fifo_peer));
		/* Whether a handle's owner is a zombie (sim/simhost.h): there is no /proc here. */
		ALLOW(openat, 1, ARG32(2, O_RDONLY | O_CLOEXEC));
		ALLOW(open, 1, ARG32(1, O_RDONLY | O_CLOEXEC));
		ALLOW(mknodat, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, S_IFMT, S_IFIFO));
		ALLOW(mknod, 1, SCMP_A1(SCMP_CMP_MASKED_EQ, S_IFMT, S_IFIFO));
		ALLOW(unlink, 0);
		ALLOW(unlinkat, 0);
		ALLOW(chmod, 0);
		ALLOW(fchmodat, 0);
		ALLOW(socket, 1, ARG32(0, AF_UNIX));
		ALLOW(connect, 0);
		/* Whether a lock's or a handle's owner is alive (signal 0: none sent). */
		ALLOW(kill, 1, ARG32(1, 0));
	} else {
		/*
		 * glibc opens a file of its own now and then, read-only: free()
		 * shrinking a thread's heap reads /proc/sys/vm/overcommit_memory
		 * once (check_may_shrink_heap; on real Xen the multi-queue guest's
		 * worker died of it releasing its rings).  The empty root has
		 * nothing to open: such opens fail with ENOENT, as they would
		 * there, instead of killing the worker.
		 */
		err |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOENT), SCMP_SYS(openat), 1,
					ARG32(2, O_RDONLY | O_CLOEXEC));
		err |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOENT), SCMP_SYS(open), 1,
					ARG32(1, O_RDONLY | O_CLOEXEC));
	}
	if (c->sanitizers) {
		/* Their runtime: reports to stderr, its allocator, its threads' stacks. */
		ALLOW(prctl, 0);
		ALLOW(ioctl, 1, ARG32(1, TCGETS));
		ALLOW(sched_getparam, 0);
		ALLOW(getrusage, 0);
	}
	return err;
}

static void seccomp_on(const struct xbd_confine_req *c, uint32_t *skipped)
{
	struct sigaction sa;
	scmp_filter_ctx ctx;
	int err;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSYS, &sa, NULL);
	ctx = seccomp_init(SCMP_ACT_TRAP);
	if (!ctx) {
		errno = ENOMEM;
		step_failed(skipped, XBD_CONFINE_SECCOMP, "no seccomp filter");
		return;
	}
	err = allow_list(ctx, c);
	if (!err)
		err = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	/*
	 * A binary tree of the calls instead of a list (libseccomp 2.5): the
	 * ioctls of every batch are checked by argument, on every call.
	 */
	if (!err)
		seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (!err)
		err = seccomp_load(ctx);
	seccomp_release(ctx);
	if (err) {
		errno = -err;
		step_failed(skipped, XBD_CONFINE_SECCOMP, "no seccomp filter");
	}
}

uint32_t xbd_confine(const struct xbd_confine_req *c)
{
	uint32_t skipped = 0;

	/* While the libraries' files are still reachable. */
	trap_prepare();
	empty_root(c, &skipped);
	drop_user(c, &skipped);
	/* A uid change clears it; the main process may have died meanwhile. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		step_failed(&skipped, XBD_CONFINE_PDEATH, "cannot die with the main process");
	if (getppid() != c->main_pid)
		_exit(1);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		step_failed(&skipped, XBD_CONFINE_NNP, "no no_new_privs");
	limits(c, &skipped);
	seccomp_on(c, &skipped);
	return skipped;
}

uint32_t xbd_confine_predict(bool sim, char *buf, size_t len)
{
	uint32_t skipped = 0;
	size_t n = 0;

	buf[0] = '\0';
	if (geteuid() != 0) {
		skipped |= XBD_CONFINE_MOUNTNS | XBD_CONFINE_UID;
		n += (size_t)snprintf(buf + n, len - n, "an empty root and its own uid (not root)");
	} else if (sim) {
		skipped |= XBD_CONFINE_SIMDIRS;
		n += (size_t)snprintf(buf + n, len - n, "an empty root: the simulator's directories "
				      "stay reachable (its event channels and memory are files)");
	}
	if (sim && n < len) {
		skipped |= XBD_CONFINE_EVTCHN | XBD_CONFINE_GNTDEV;
		snprintf(buf + n, len - n, "%sevent channels restricted to its domain and a gntdev "
			 "grant limit (the simulator has no such devices)", n ? "; " : "");
	}
	return skipped;
}
