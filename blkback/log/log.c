/*
 * log.c: log lines and their per-device rate limit.  Each line is written
 * with one write(2) (or one syslog(3) call) so that lines from ring
 * threads never interleave.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "blkback/log/log.h"

/* Set by the main thread, read by every thread: atomics, no lock. */
static int log_level;
static bool log_syslog;
static bool log_journal; /* stderr is the journal: prefix "<priority>" */
/* The journal's native socket, for lines with fields (-1: the stream only). */
static int journal_fd = -1;
static struct sockaddr_un journal_addr;
/* A worker's lines go to its main process instead (set before any thread exists). */
static void (*log_sink)(int level, const char *text, void *arg);
static void *log_sink_arg;
/*
 * The guests' names, escaped, for the journal's DOMAIN_NAME field: set by
 * the main thread, read by any thread that logs (hence the lock).
 */
struct log_domain {
	uint32_t domid;
	char name[XBD_LOG_STR_BUF];
};
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static struct log_domain *names;
static size_t nr_names, names_cap;

void xbd_log_set_sink(void (*sink)(int level, const char *text, void *arg), void *arg)
{
	log_sink = sink;
	log_sink_arg = arg;
}

void xbd_log_set_level(int level)
{
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

int xbd_log_level(void)
{
	return __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

/* systemd sets JOURNAL_STREAM=dev:ino for the stream it connected stderr to. */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st))
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static int priority(int level)
{
	if (level <= XBD_LOG_ERR)
		return LOG_ERR;
	if (level == XBD_LOG_WARNING)
		return LOG_WARNING;
	return level < XBD_LOG_DEBUG ? LOG_INFO : LOG_DEBUG;
}

/* Where journald takes native messages (systemd.journal-fields(7)). */
static void journal_open(void)
{
	const char *path = "/run/systemd/journal/socket";

#ifdef XBD_TEST_HOOKS
	if (getenv("XBD_TEST_JOURNAL_SOCKET"))
		path = getenv("XBD_TEST_JOURNAL_SOCKET");
#endif
	if (strlen(path) >= sizeof(journal_addr.sun_path))
		return;
	journal_addr.sun_family = AF_UNIX;
	strcpy(journal_addr.sun_path, path);
	journal_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

void xbd_log_set_syslog(bool to_syslog)
{
	log_syslog = to_syslog;
	if (to_syslog) {
		openlog("xbd-back", LOG_PID | LOG_NDELAY, LOG_DAEMON);
		return;
	}
	log_journal = stderr_is_journal();
	if (log_journal)
		journal_open();
}

void xbd_log_domain_name(uint32_t domid, const char *name)
{
	struct log_domain *d;
	size_t i;

	pthread_mutex_lock(&names_lock);
	for (i = 0; i < nr_names && names[i].domid != domid; i++)
		;
	if (!name || !name[0]) {
		if (i < nr_names)
			names[i] = names[--nr_names];
	} else {
		if (i == nr_names && nr_names == names_cap &&
		    (d = realloc(names, (names_cap * 2 + 8) * sizeof(*names)))) {
			names = d;
			names_cap = names_cap * 2 + 8;
		}
		/* Out of memory: the lines go without the name. */
		if (i < names_cap) {
			names[i].domid = domid;
			xbd_log_str(names[i].name, name);
			nr_names += i == nr_names;
		}
	}
	pthread_mutex_unlock(&names_lock);
}

/* DOMAIN_NAME=... for domid's line, if it has a name: the bytes written to buf. */
static int domain_name_field(uint32_t domid, char *buf, size_t len)
{
	int n = 0;

	pthread_mutex_lock(&names_lock);
	for (size_t i = 0; i < nr_names; i++)
		if (names[i].domid == domid)
			n = snprintf(buf, len, "DOMAIN_NAME=%s\n", names[i].name);
	pthread_mutex_unlock(&names_lock);
	return n;
}

/*
 * A line to the journal's native socket, with the device it names as
 * fields (DOMID=5, DEVID=51728, DEVICE=vbd/5/51728, the guest's
 * DOMAIN_NAME=, XBD_QUEUE=1; XBD_DEVICE= as DEVICE=, its first name), so
 * that journalctl DOMID=5 or DOMAIN_NAME=web1 finds a guest's lines.
 * False: not sent (the stream takes it).
 */
static bool journal_send(int level, const char *text)
{
	char head[160 + XBD_LOG_STR_BUF], dev[48];
	unsigned int domid, devid, queue;
	int n = 0, len = 0, qlen = 0;
	struct iovec iov[4];
	struct msghdr m;

	if (journal_fd < 0 || strchr(text, '\n'))
		return false;
	n = snprintf(head, sizeof(head), "PRIORITY=%d\nSYSLOG_IDENTIFIER=xbd-back\n",
		     priority(level));
	/* The device's name starts DLOG's lines: TYPE/DOMID/DEVID[ queue N]: */
	if ((sscanf(text, "vbd/%u/%u%n", &domid, &devid, &len) == 2 ||
	     sscanf(text, "vbd3/%u/%u%n", &domid, &devid, &len) == 2) &&
	    (text[len] == ':' || (sscanf(text + len, " queue %u%n", &queue, &qlen) == 1 &&
				  text[len + qlen] == ':')) && len < (int)sizeof(dev)) {
		memcpy(dev, text, len);
		dev[len] = '\0';
		n += snprintf(head + n, sizeof(head) - n, "DOMID=%u\nDEVID=%u\nDEVICE=%s\n"
			      "XBD_DEVICE=%s\n", domid, devid, dev, dev);
		n += domain_name_field(domid, head + n, sizeof(head) - n);
		if (qlen)
			n += snprintf(head + n, sizeof(head) - n, "XBD_QUEUE=%u\n", queue);
	}
	iov[0].iov_base = head;
	iov[0].iov_len = n;
	iov[1].iov_base = (void *)"MESSAGE=";
	iov[1].iov_len = strlen("MESSAGE=");
	iov[2].iov_base = (void *)text;
	iov[2].iov_len = strlen(text);
	iov[3].iov_base = (void *)"\n";
	iov[3].iov_len = 1;
	memset(&m, 0, sizeof(m));
	m.msg_name = &journal_addr;
	m.msg_namelen = sizeof(journal_addr);
	m.msg_iov = iov;
	m.msg_iovlen = 4;
	return sendmsg(journal_fd, &m, MSG_NOSIGNAL) >= 0;
}

static void vlog(int level, const char *fmt, va_list ap)
{
	char buf[1024];
	int n = 0, m, head;

	if (log_sink) {
		if (vsnprintf(buf, sizeof(buf), fmt, ap) >= 0)
			log_sink(level, buf, log_sink_arg);
		return;
	}
	if (log_journal)
		n = snprintf(buf, sizeof(buf), "<%d>", priority(level));
	head = n;
	n += snprintf(buf + n, sizeof(buf) - n, "xbd-back: ");
	m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	if (log_syslog) {
		buf[n] = '\0';
		syslog(priority(level), "%s", buf + head + strlen("xbd-back: "));
		return;
	}
	buf[n] = '\0';
	if (log_journal && journal_send(level, buf + head + strlen("xbd-back: ")))
		return;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, n) < 0) {
		/* Nowhere left to report it. */
	}
}

void xbd_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > xbd_log_level())
		return;
	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

size_t xbd_log_escape(char *buf, const char *s, size_t max, bool backslash)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, n = 0;

	for (i = 0; s[i] && i < max; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c >= 0x7f || (backslash && c == '\\')) {
			buf[n++] = '\\';
			buf[n++] = 'x';
			buf[n++] = hex[c >> 4];
			buf[n++] = hex[c & 15];
		} else {
			buf[n++] = (char)c;
		}
	}
	buf[n] = '\0';
	return i;
}

const char *xbd_log_str(char *buf, const char *s)
{
	size_t n;

	if (!s)
		s = "(none)";
	if (s[xbd_log_escape(buf, s, XBD_LOG_STR_MAX, true)]) {
		n = strlen(buf);
		memcpy(buf + n, "...", 4);
	}
	return buf;
}

void xbd_ratelimit_init(struct xbd_ratelimit *rl)
{
	memset(rl, 0, sizeof(*rl));
	pthread_mutex_init(&rl->lock, NULL);
}

static unsigned int burst(const struct xbd_ratelimit *rl)
{
	return rl->burst ? rl->burst : XBD_LOG_BURST;
}

static void report_suppressed(const struct xbd_ratelimit *rl, uint64_t n)
{
	/* What the limit does, said as it is: each kind has a budget of its own. */
	xbd_log(XBD_LOG_WARNING, "%s%s%llu similar line%s suppressed (at most %u of each kind, "
		"errors and warnings, information, detail, every %u s)",
		rl->who ? rl->who : "", rl->who ? ": " : "", (unsigned long long)n, n == 1 ? "" : "s",
		burst(rl), XBD_LOG_WINDOW);
}

void xbd_ratelimit_destroy(struct xbd_ratelimit *rl)
{
	if (rl->suppressed)
		report_suppressed(rl, rl->suppressed);
	pthread_mutex_destroy(&rl->lock);
}

/* Start a new window if the current one is over; returns what it suppressed. Locked. */
static uint64_t roll_window(struct xbd_ratelimit *rl, time_t now)
{
	uint64_t suppressed = 0;

	if (now - rl->window_start >= XBD_LOG_WINDOW) {
		suppressed = rl->suppressed;
		rl->suppressed = 0;
		memset(rl->printed, 0, sizeof(rl->printed));
		rl->window_start = now;
	}
	return suppressed;
}

bool xbd_ratelimit_take(struct xbd_ratelimit *rl, int level)
{
	struct timespec now;
	uint64_t suppressed;
	unsigned int kind;
	bool print;

	if (level > xbd_log_level())
		return false;
	/* Asked for by the administrator, line by line: not limited. */
	if (level >= XBD_LOG_DEBUG)
		return true;
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&rl->lock);
	suppressed = roll_window(rl, now.tv_sec);
	kind = level < XBD_LOG_INFO ? 0 : level == XBD_LOG_INFO ? 1 : 2;
	print = rl->printed[kind] < burst(rl);
	if (print)
		rl->printed[kind]++;
	else
		rl->suppressed++;
	pthread_mutex_unlock(&rl->lock);
	if (suppressed)
		report_suppressed(rl, suppressed);
	return print;
}

void xbd_log_limited(struct xbd_ratelimit *rl, int level, const char *fmt, ...)
{
	va_list ap;

	if (!xbd_ratelimit_take(rl, level))
		return;
	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

uint64_t xbd_ratelimit_flush(struct xbd_ratelimit *rl)
{
	struct timespec now;
	uint64_t suppressed, due = 0;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&rl->lock);
	suppressed = roll_window(rl, now.tv_sec);
	if (rl->suppressed)
		due = (uint64_t)(rl->window_start + XBD_LOG_WINDOW) * 1000;
	pthread_mutex_unlock(&rl->lock);
	if (suppressed)
		report_suppressed(rl, suppressed);
	return due;
}
