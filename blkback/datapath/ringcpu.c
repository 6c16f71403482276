/*
 * ringcpu.c: a CPU for each ring, its thread and its event channel's
 * interrupt on it (ringcpu.h).
 */
#define _GNU_SOURCE
#include "config.h"

#include "blkback/datapath/ringcpu.h"
#include "blkback/log/log.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool enabled, move_irqs;
static cpu_set_t allowed;
static unsigned int rings_on[CPU_SETSIZE];
static unsigned int next_tag;

void xbd_ringcpu_init(bool on, bool irqs)
{
	pthread_mutex_lock(&lock);
	enabled = move_irqs = false;
	memset(rings_on, 0, sizeof(rings_on));
	CPU_ZERO(&allowed);
	/* One CPU to run on: nothing to choose, and nothing to move. */
	if (on && sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) > 1)
		enabled = true;
	move_irqs = enabled && irqs;
	pthread_mutex_unlock(&lock);
}

bool xbd_ringcpu_on(void)
{
	return enabled;
}

int xbd_ringcpu_pick(void)
{
	int cpu, best = -1;

	pthread_mutex_lock(&lock);
	if (enabled) {
		for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
			if (CPU_ISSET(cpu, &allowed) && (best < 0 || rings_on[cpu] < rings_on[best]))
				best = cpu;
		if (best >= 0)
			rings_on[best]++;
	}
	pthread_mutex_unlock(&lock);
	return best;
}

void xbd_ringcpu_put(int cpu)
{
	pthread_mutex_lock(&lock);
	if (cpu >= 0 && cpu < CPU_SETSIZE && rings_on[cpu])
		rings_on[cpu]--;
	pthread_mutex_unlock(&lock);
}

void xbd_ringcpu_tag(char tag[XBD_RINGCPU_TAG_LEN], char saved[XBD_RINGCPU_TAG_LEN])
{
	unsigned int n;

	tag[0] = saved[0] = '\0';
	if (!move_irqs || prctl(PR_GET_NAME, saved) < 0)
		return;
	n = __atomic_fetch_add(&next_tag, 1, __ATOMIC_RELAXED) % 1000000000u;
	snprintf(tag, XBD_RINGCPU_TAG_LEN, "xbdr%u", n);
	if (prctl(PR_SET_NAME, tag) < 0)
		tag[0] = '\0';
}

void xbd_ringcpu_untag(const char tag[XBD_RINGCPU_TAG_LEN], const char saved[XBD_RINGCPU_TAG_LEN])
{
	if (tag[0] && prctl(PR_SET_NAME, saved) < 0) {
		/* The name is cosmetic: the thread works on under the tag. */
	}
}

/* The first CPU of a list such as "1" or "0-1,3", or -1. */
static int read_first_cpu(const char *path)
{
	char buf[64];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || !isdigit((unsigned char)buf[0]))
		return -1;
	buf[n] = '\0';
	return atoi(buf);
}

int xbd_ringcpu_move_irq(const char *irq_root, const char *tag, int cpu, int *effective)
{
	char path[512], val[16];
	struct dirent *de;
	struct stat st;
	DIR *d;
	int irq = -1, fd, len, err = 0;
	ssize_t wr;

	*effective = -1;
	if (!tag[0] || cpu < 0)
		return -EINVAL;
	d = opendir(irq_root);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		long n = strtol(de->d_name, &end, 10);

		if (!isdigit((unsigned char)de->d_name[0]) || *end || n < 0 || n > 1 << 24)
			continue;
		snprintf(path, sizeof(path), "%s/%ld/evtchn:%s", irq_root, n, tag);
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
			irq = (int)n;
			break;
		}
	}
	closedir(d);
	if (irq < 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%d/smp_affinity_list", irq_root, irq);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = snprintf(val, sizeof(val), "%d\n", cpu);
	wr = write(fd, val, (size_t)len);
	if (wr != len)
		err = wr < 0 ? -errno : -EIO;
	close(fd);
	if (err)
		return err;
	snprintf(path, sizeof(path), "%s/%d/effective_affinity_list", irq_root, irq);
	*effective = read_first_cpu(path);
	return irq;
}

int xbd_ringcpu_pin_self(int cpu)
{
	cpu_set_t set;

	if (cpu < 0 || cpu >= CPU_SETSIZE)
		return -EINVAL;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return -pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

void xbd_ringcpu_place_irq(const char *name, int cpu, const char *tag)
{
	static bool said;
	int irq, on;

	if (cpu < 0 || !tag[0])
		return;
	irq = xbd_ringcpu_move_irq("/proc/irq", tag, cpu, &on);
	if (irq >= 0 && (on < 0 || on == cpu)) {
		xbd_log(XBD_LOG_VERBOSE, "%s: on CPU %d with its event channel's interrupt (irq %d)",
			name, cpu, irq);
		return;
	}
	/* The same cause for every ring (no /proc, another kernel): said once. */
	if (__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		return;
	if (irq < 0)
		xbd_log(XBD_LOG_WARNING, "%s: runs on CPU %d, its event channel's interrupt "
			"(evtchn:%s) stays where it is: %s", name, cpu, tag,
			irq == -ENOENT ? "not found in /proc/irq" : strerror(-irq));
	else
		xbd_log(XBD_LOG_WARNING, "%s: runs on CPU %d, but its event channel's interrupt "
			"(irq %d) stays on CPU %d", name, cpu, irq, on);
}
