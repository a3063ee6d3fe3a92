/*
 * log.c - see log.h.  The sink is process-wide by nature (one stderr, one
 * syslog), so it is the one piece of global state.
 */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "core/log.h"

static const char *log_prog = "feedfs";
static bool log_syslog;
static bool log_debug_on;

void
log_init(const char *progname, bool use_syslog, bool debug)
{
	log_prog = progname;
	log_syslog = use_syslog;
	log_debug_on = debug;
	if (use_syslog)
		openlog(progname, LOG_PID, LOG_DAEMON);
}

void
log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	static const char *const name[] = { "error", "warning", "info", "debug" };
	char buf[1024];
	va_list ap;

	if (lvl == LOG_LVL_DEBUG && !log_debug_on)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (log_syslog)
		syslog(prio[lvl], "%s", buf);
	else
		fprintf(stderr, "%s: %s: %s\n", log_prog, name[lvl], buf);
}
