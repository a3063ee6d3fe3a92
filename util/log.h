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
