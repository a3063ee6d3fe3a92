/*
 * log.c - the daemon's log (util/, under every other folder; see log.h).
 * The sink is process-wide by nature (one stderr, one syslog, one
 * terminal), so it is the one piece of global state: the syslog settings
 * are written by main before any thread; the ring, the file's and the
 * terminal's fds are under ring_lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

static const char *log_prog = "feedfs";
static bool log_syslog;
static bool log_debug_on;
static int log_term_fd = -1;
static int log_file_fd = -1;

/* The last LOG_RING_BYTES of lines: ring[(start + i) % size], i < len;
 * and the fds above: under ring_lock. */
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static char ring[LOG_RING_BYTES];
static size_t ring_start, ring_len;

static const char *const name[] = {"error", "warning", "info", "debug"};

void
log_init(const char *progname, bool use_syslog, bool debug)
{
	log_prog = progname;
	log_syslog = use_syslog;
	log_debug_on = debug;
	if (use_syslog)
		openlog(progname, LOG_PID, LOG_DAEMON);
}

bool
log_syslog_present(void)
{
	return access("/dev/log", F_OK) == 0;
}

void
log_set_term(int fd)
{
	pthread_mutex_lock(&ring_lock);
	log_term_fd = fd;
	pthread_mutex_unlock(&ring_lock);
}

void
log_set_file(int fd)
{
	pthread_mutex_lock(&ring_lock);
	log_file_fd = fd;
	pthread_mutex_unlock(&ring_lock);
}

/* Append one line (with its newline) to the ring, dropping whole old
 * lines to make room.  Locked. */
static void
ring_add(const char *s, size_t n)
{
	if (n > LOG_RING_BYTES)
		return;
	while (ring_len + n > LOG_RING_BYTES) {
		/* Drop the oldest line. */
		size_t i = 0;

		while (i < ring_len &&
		       ring[(ring_start + i) % LOG_RING_BYTES] != '\n')
			i++;
		i = i < ring_len ? i + 1 : ring_len;
		ring_start = (ring_start + i) % LOG_RING_BYTES;
		ring_len -= i;
	}
	for (size_t i = 0; i < n; i++)
		ring[(ring_start + ring_len + i) % LOG_RING_BYTES] = s[i];
	ring_len += n;
}

size_t
log_ring_copy(char *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(&ring_lock);
	n = ring_len < len ? ring_len : len;
	/* The newest n bytes, from a line's start when cut. */
	for (size_t i = 0; i < n; i++)
		buf[i] = ring[(ring_start + ring_len - n + i) % LOG_RING_BYTES];
	pthread_mutex_unlock(&ring_lock);
	if (n < ring_len) {
		char *nl = memchr(buf, '\n', n);
		size_t cut = nl ? (size_t)(nl - buf) + 1 : n;

		memmove(buf, buf + cut, n - cut);
		n -= cut;
	}
	return n;
}

size_t
log_ring_len(void)
{
	size_t n;

	pthread_mutex_lock(&ring_lock);
	n = ring_len;
	pthread_mutex_unlock(&ring_lock);
	return n;
}

void
log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	char buf[1024], line[1100], when[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	if (lvl == LOG_LVL_DEBUG && !log_debug_on)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	n = snprintf(line, sizeof(line), "%s %s: %s\n", when, name[lvl], buf);
	/*
	 * The ring, the file and the terminal under one lock: their fds
	 * change (log_set_*) while workers log, and each is closed once set
	 * to -1, never written after.
	 */
	pthread_mutex_lock(&ring_lock);
	if (n > 0)
		ring_add(line,
		    (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	/* One write per line (O_APPEND): whole lines, several daemons. */
	if (log_file_fd >= 0) {
		char out[sizeof(line) + 64];
		int m = snprintf(out, sizeof(out), "%s %s[%ld] %s: %s\n", when,
		    log_prog, (long)getpid(), name[lvl], buf);

		if (m > 0)
			(void)!write(log_file_fd, out,
			    (size_t)m < sizeof(out) ? (size_t)m
						    : sizeof(out) - 1);
	}
	/* The terminal that mounted, until the mount is in place. */
	if (log_term_fd >= 0 && lvl <= LOG_LVL_WARN)
		dprintf(log_term_fd, "%s: %s: %s\n", log_prog, name[lvl], buf);
	pthread_mutex_unlock(&ring_lock);
	if (log_syslog)
		syslog(prio[lvl], "%s", buf);
	else
		fprintf(stderr, "%s: %s: %s\n", log_prog, name[lvl], buf);
}
