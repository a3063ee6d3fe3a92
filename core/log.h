/*
 * log.h - the daemon's log: stderr in the foreground, syslog once detached.
 *
 * Thread safe.  log_first() is true the first time its flag is seen clear,
 * for a per-site "say so once": if (log_first(&flag)) log_warn(...).
 */
#ifndef FEEDFS_LOG_H
#define FEEDFS_LOG_H

#include <stdatomic.h>
#include <stdbool.h>

enum log_level { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_init(const char *progname, bool use_syslog, bool debug);
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
