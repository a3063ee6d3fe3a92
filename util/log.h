/*
 * log.h - the daemon's log (util/, which includes nothing of ours and
 * which every folder but cache/ and gpu/ may use): stderr in the
 * foreground, syslog once detached (where there is one:
 * log_syslog_present), and always the last LOG_RING_BYTES of lines in
 * memory, which a mount serves as .feedfs/log.
 * While a detached daemon still has the terminal that started it
 * (log_set_term), warnings and errors go there too; with -o log=FILE
 * (log_set_file) every line goes to that file as well.
 *
 * Thread safe, except log_init: call it while no other thread logs.
 * log_first() is true the first time its flag is seen clear, for a
 * per-site "say so once":
 *
 *	if (log_first(&flag)) log_warn(...);
 */
#ifndef FEEDFS_LOG_H
#define FEEDFS_LOG_H

#include <stdatomic.h>
#include <stdbool.h>

enum log_level { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

#define LOG_RING_BYTES (256u << 10)

void log_init(const char *progname, bool use_syslog, bool debug);
/* Whether syslog(3) reaches anyone here (/dev/log exists). */
bool log_syslog_present(void);
/* Warnings and errors also to fd (a terminal), -1: no more. */
void log_set_term(int fd);
/* Every line also to fd (a file open with O_APPEND), stamped and with
 * the pid: "2026-11-25T21:30:00Z feedfs[123] warning: message". */
void log_set_file(int fd);
/*
 * -o log=FILE: path opened (O_APPEND, 0600, its last component not
 * followed) for log_set_file, its absolute name kept for log_reopen
 * (SIGHUP: logrotate's rename, then HUP), which opens it again in place
 * of the old (0: no file, or done).  log_open_file: 0, or -errno with
 * err ("FILE: why").  log_close_file: no more file.
 */
int log_open_file(const char *path, char *err, size_t errlen);
int log_reopen(void);
void log_close_file(void);
/*
 * SIGHUP blocked in this thread and every thread it starts from here on
 * (call before any other thread), and taken by a thread of its own that
 * calls log_reopen; log_hup_stop ends it.
 */
int log_hup_start(void);
void log_hup_stop(void);
/*
 * Lines above the level named s ("error", "warning", "info", "debug")
 * are dropped everywhere (default: info; debug with log_init's debug).
 * 0, or -EINVAL for another word.
 */
int log_set_level_name(const char *s);
/*
 * The newest lines of the ring, whole, into buf (at most len bytes):
 * "2026-11-25T21:30:00Z warning: message\n" each.  Returns the length.
 */
size_t log_ring_copy(char *buf, size_t len);
size_t log_ring_len(void);
void log_msg(enum log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

/* True the first time for *flag; the caller then logs. */
static inline bool
log_first(atomic_bool *flag)
{
	return !atomic_exchange(flag, true);
}

#endif
