/*
 * log.c - the daemon's log (util/, under every other folder; see log.h).
 * The sink is process-wide by nature (one stderr, one syslog, one
 * terminal), so it is the one piece of global state: the syslog settings
 * are written by main before any thread; the ring, the file's and the
 * terminal's fds are under ring_lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

static const char *log_prog = "feedfs";
static bool log_syslog;
static _Atomic int log_max_level = LOG_LVL_INFO; /* and those above it */
static int log_term_fd = -1;
static int log_file_fd = -1;
static char log_file_path[PATH_MAX]; /* log_set_file_path's, for SIGHUP */

/* The last LOG_RING_BYTES of lines: ring[(start + i) % size], i < len;
 * and the fds above: under ring_lock. */
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static char ring[LOG_RING_BYTES];
static size_t ring_start, ring_len;

static const char *const name[] = {"error", "warning", "info", "debug"};

/* The SIGHUP thread (log_hup_start): it, and whether it is to end. */
static pthread_t hup_thread;
static bool hup_started;
static atomic_bool hup_stop;

void
log_init(const char *progname, bool use_syslog, bool debug)
{
	log_prog = progname;
	log_syslog = use_syslog;
	if (debug)
		atomic_store(&log_max_level, LOG_LVL_DEBUG);
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

int
log_set_level_name(const char *s)
{
	for (int i = LOG_LVL_ERR; i <= LOG_LVL_DEBUG; i++)
		if (strcmp(s, name[i]) == 0) {
			atomic_store(&log_max_level, i);
			return 0;
		}
	return -EINVAL;
}

int
log_open_file(const char *path, char *err, size_t errlen)
{
	size_t n = 0;
	int fd;

	if (path[0] == '\0') {
		snprintf(err, errlen, ": an empty name");
		return -EINVAL;
	}
	/* SIGHUP reopens it by its absolute name (the daemon is in /). */
	if (path[0] != '/' &&
	    (getcwd(log_file_path, sizeof(log_file_path)) == NULL ||
		(n = strlen(log_file_path)) + 1 + strlen(path) >=
		    sizeof(log_file_path))) {
		snprintf(err, errlen, "%s: %s", path, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	snprintf(log_file_path + n, sizeof(log_file_path) - n, "%s%s",
	    n ? "/" : "", path);
	fd = open(log_file_path,
	    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		log_file_path[0] = '\0';
		return -errno;
	}
	log_set_file(fd);
	return 0;
}

void
log_close_file(void)
{
	int fd;

	pthread_mutex_lock(&ring_lock);
	fd = log_file_fd;
	log_file_fd = -1;
	log_file_path[0] = '\0';
	pthread_mutex_unlock(&ring_lock);
	if (fd >= 0)
		close(fd);
}

int
log_reopen(void)
{
	int fd, r = 0;

	pthread_mutex_lock(&ring_lock);
	if (log_file_fd < 0 || log_file_path[0] == '\0') {
		pthread_mutex_unlock(&ring_lock);
		return 0;
	}
	/* In place of the old one, atomically (dup3): no line is lost. */
	fd = open(log_file_path,
	    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || dup3(fd, log_file_fd, O_CLOEXEC) < 0)
		r = -errno;
	if (fd >= 0)
		close(fd);
	pthread_mutex_unlock(&ring_lock);
	if (r != 0)
		log_err("cannot reopen the log %s on SIGHUP: %s (still "
			"writing to the file it was)",
		    log_file_path, strerror(-r));
	else
		log_info("reopened the log %s (SIGHUP)", log_file_path);
	return r;
}

/* SIGHUP, taken by sigwait (blocked in every thread): the log reopened. */
static void *
hup_main(void *arg)
{
	sigset_t set;
	int sig;

	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	while (sigwait(&set, &sig) == 0 && !atomic_load(&hup_stop))
		(void)log_reopen();
	return NULL;
}

/* A SIGHUP pending for sigwait: not SIG_IGN, which would drop it. */
static void
hup_pending(int sig)
{
	(void)sig;
}

int
log_hup_start(void)
{
	struct sigaction sa = {.sa_handler = hup_pending};
	sigset_t set;
	int r;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	if ((r = pthread_sigmask(SIG_BLOCK, &set, NULL)) != 0 ||
	    (r = sigaction(SIGHUP, &sa, NULL) != 0 ? errno : 0) != 0 ||
	    (r = pthread_create(&hup_thread, NULL, hup_main, NULL)) != 0)
		return -r;
	hup_started = true;
	return 0;
}

void
log_hup_stop(void)
{
	if (!hup_started)
		return;
	atomic_store(&hup_stop, true);
	pthread_kill(hup_thread, SIGHUP);
	pthread_join(hup_thread, NULL);
	hup_started = false;
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

	if ((int)lvl > atomic_load(&log_max_level))
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
