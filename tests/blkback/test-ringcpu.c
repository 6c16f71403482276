/*
 * test-ringcpu: pin-rings' choices and its interrupt moves (ringcpu.c) on
 * a made-up /proc/irq: rings spread over the CPUs the process may use and
 * a freed CPU is taken again first; the tag is the thread's name while it
 * is set and a fresh one each time; the interrupt named evtchn:TAG (and
 * no other) gets the CPU in smp_affinity_list, its effective CPU is read
 * back, a missing one is -ENOENT.  The daemon's use on real Xen is
 * check-xen's xbd-ring-cpu step; the threads' pinning on the simulator
 * is tests/blkback/pin-rings.sh.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blkback/datapath/ringcpu.h"

static int failed;

static void expect(int ok, const char *what, int line)
{
	if (!ok) {
		fprintf(stderr, "test-ringcpu.c:%d: not so: %s\n", line, what);
		failed = 1;
	}
}
#define EXPECT(c) expect(!!(c), #c, __LINE__)

static char root[64];

static void put_file(const char *rel, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		perror(path);
		exit(99);
	}
}

static void get_file(const char *rel, char *buf, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	buf[0] = '\0';
	f = fopen(path, "r");
	if (f) {
		if (!fgets(buf, (int)len, f))
			buf[0] = '\0';
		fclose(f);
	}
}

static void make_dir(const char *rel)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if (mkdir(path, 0755) < 0) {
		perror(path);
		exit(99);
	}
}

static void spreading(void)
{
	cpu_set_t set;
	int n, first, a, b, c;

	if (sched_getaffinity(0, sizeof(set), &set) < 0 || CPU_COUNT(&set) < 2) {
		printf("one CPU here: spreading not checked\n");
		xbd_ringcpu_init(true, true);
		EXPECT(!xbd_ringcpu_on());
		EXPECT(xbd_ringcpu_pick() == -1);
		return;
	}
	n = CPU_COUNT(&set);
	for (first = 0; !CPU_ISSET(first, &set); first++)
		;
	xbd_ringcpu_init(false, true);
	EXPECT(!xbd_ringcpu_on());
	EXPECT(xbd_ringcpu_pick() == -1);

	xbd_ringcpu_init(true, true);
	EXPECT(xbd_ringcpu_on());
	a = xbd_ringcpu_pick();
	b = xbd_ringcpu_pick();
	EXPECT(a == first);
	EXPECT(b >= 0 && b != a && CPU_ISSET(b, &set));
	/* Freed, a is the least used again and the lowest such. */
	xbd_ringcpu_put(a);
	c = xbd_ringcpu_pick();
	EXPECT(c == a);
	/* n more rings after these two: every CPU gets one more before any gets a third. */
	{
		int count[CPU_SETSIZE] = { 0 }, i;

		count[a]++;
		count[b]++;
		for (i = 0; i < 2 * n - 2; i++) {
			int x = xbd_ringcpu_pick();

			EXPECT(x >= 0 && x < CPU_SETSIZE && CPU_ISSET(x, &set));
			if (x >= 0 && x < CPU_SETSIZE)
				count[x]++;
		}
		for (i = 0; i < CPU_SETSIZE; i++)
			EXPECT(!CPU_ISSET(i, &set) || count[i] == 2);
	}
	/* A put of what was never picked, or of no CPU, changes nothing. */
	xbd_ringcpu_put(-1);
	xbd_ringcpu_put(CPU_SETSIZE + 5);
}

static void tags(void)
{
	char tag[XBD_RINGCPU_TAG_LEN], tag2[XBD_RINGCPU_TAG_LEN], saved[XBD_RINGCPU_TAG_LEN];
	char now[XBD_RINGCPU_TAG_LEN];

	prctl(PR_SET_NAME, "test-ringcpu");
	xbd_ringcpu_init(true, false);
	xbd_ringcpu_tag(tag, saved);
	EXPECT(tag[0] == '\0');
	xbd_ringcpu_untag(tag, saved);
	xbd_ringcpu_init(true, true);
	if (!xbd_ringcpu_on())
		return;
	xbd_ringcpu_tag(tag, saved);
	prctl(PR_GET_NAME, now);
	EXPECT(!strncmp(tag, "xbdr", 4) && !strcmp(now, tag));
	EXPECT(!strcmp(saved, "test-ringcpu"));
	xbd_ringcpu_untag(tag, saved);
	prctl(PR_GET_NAME, now);
	EXPECT(!strcmp(now, "test-ringcpu"));
	xbd_ringcpu_tag(tag2, saved);
	xbd_ringcpu_untag(tag2, saved);
	EXPECT(tag2[0] && strcmp(tag, tag2) != 0);
}

static void moves(void)
{
	char buf[64];
	int on, r;

	make_dir("7");
	make_dir("7/evtchn:xbdr1");
	put_file("7/smp_affinity_list", "0-1\n");
	put_file("7/effective_affinity_list", "1\n");
	make_dir("12");
	make_dir("12/evtchn:xbdr10");
	put_file("12/smp_affinity_list", "0-1\n");
	make_dir("default_smp_affinity_dir");
	make_dir("3");
	make_dir("3/virtio0-requests");
	put_file("3/smp_affinity_list", "0-1\n");

	/* Not a prefix match: xbdr1 is irq 7, xbdr10 irq 12. */
	r = xbd_ringcpu_move_irq(root, "xbdr10", 1, &on);
	EXPECT(r == 12);
	EXPECT(on == -1); /* no effective_affinity_list */
	get_file("12/smp_affinity_list", buf, sizeof(buf));
	EXPECT(!strcmp(buf, "1\n"));
	get_file("7/smp_affinity_list", buf, sizeof(buf));
	EXPECT(!strcmp(buf, "0-1\n"));

	/* The kernel's answer is what is reported, not what was asked. */
	r = xbd_ringcpu_move_irq(root, "xbdr1", 0, &on);
	EXPECT(r == 7);
	EXPECT(on == 1);
	get_file("7/smp_affinity_list", buf, sizeof(buf));
	EXPECT(!strcmp(buf, "0\n"));
	get_file("3/smp_affinity_list", buf, sizeof(buf));
	EXPECT(!strcmp(buf, "0-1\n"));

	EXPECT(xbd_ringcpu_move_irq(root, "xbdr2", 0, &on) == -ENOENT);
	EXPECT(xbd_ringcpu_move_irq(root, "", 0, &on) == -EINVAL);
	EXPECT(xbd_ringcpu_move_irq(root, "xbdr1", -1, &on) == -EINVAL);
	EXPECT(xbd_ringcpu_move_irq("/nonexistent/irq", "xbdr1", 0, &on) == -ENOENT);
	/* A file the kernel would refuse to write: the errno comes back. */
	if (geteuid() != 0) {
		char path[256];

		snprintf(path, sizeof(path), "%s/7/smp_affinity_list", root);
		chmod(path, 0444);
		EXPECT(xbd_ringcpu_move_irq(root, "xbdr1", 1, &on) == -EACCES);
	}
}

static void pin_self(void)
{
	cpu_set_t set, got;
	int cpu;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return;
	for (cpu = CPU_SETSIZE - 1; cpu >= 0 && !CPU_ISSET(cpu, &set); cpu--)
		;
	EXPECT(xbd_ringcpu_pin_self(cpu) == 0);
	EXPECT(sched_getaffinity(0, sizeof(got), &got) == 0 && CPU_COUNT(&got) == 1 &&
	       CPU_ISSET(cpu, &got));
	EXPECT(xbd_ringcpu_pin_self(-1) == -EINVAL);
	sched_setaffinity(0, sizeof(set), &set);
}

int main(void)
{
	char cmd[128];

	snprintf(root, sizeof(root), "/tmp/test-ringcpu.XXXXXX");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 99;
	}
	spreading();
	tags();
	moves();
	pin_self();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "test-ringcpu: %s left behind\n", root);
	if (!failed)
		printf("test-ringcpu: all checks passed\n");
	return failed;
}
