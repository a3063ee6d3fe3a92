/*
 * cache-access.c - a program's part (tools/, over cache/): how feedfs-cache
 * reaches a store (feedfs-cache.h): whether dir may be used at all, the
 * feedfs that holds it and its control socket within --timeout, and the
 * secondary instance that reading commands open.  The commands
 * (feedfs-cache.c, cache-report.c) call these; nothing here calls them.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cache/cache.h"
#include "tools/feedfs-cache.h"

/*
 * --timeout: each request to the holder's control socket, in ms; 0: not
 * given, CACHE_CTL_TIMEOUT_MS, and WRITE_TIMEOUT_MS for the writing
 * commands (a compaction, or a store waiting for room on a full disk).
 */
int fc_timeout_ms;
#define WRITE_TIMEOUT_MS 30000
bool fc_timed_out;

int
fc_ctl(
    const char *dir, const char *who, const char *req, char *reply, size_t len)
{
	bool write = strncmp(req, "clear", 5) == 0 ||
		     strncmp(req, "evict", 5) == 0 ||
		     strncmp(req, "compact", 7) == 0;
	int ms = fc_timeout_ms ? fc_timeout_ms
		 : write       ? WRITE_TIMEOUT_MS
			       : CACHE_CTL_TIMEOUT_MS;
	int r;

	if (fc_timed_out)
		return -ETIMEDOUT;
	r = cache_ctl_request(dir, req, reply, len, ms);
	if (r == -ETIMEDOUT) {
		fc_timed_out = true;
		fprintf(stderr,
		    "feedfs-cache: %s, and it did not answer '%s' on "
		    "%s/control.sock within %.1f s: it may be stopped "
		    "(SIGSTOP, a debugger) or busy; nothing more was asked "
		    "(--timeout SECONDS gives it longer)\n",
		    who, req, dir, ms / 1000.0);
	}
	return r;
}

bool
fc_held(const char *dir, char *who, size_t len)
{
	return cache_probe_lock(dir, who, len) == -EBUSY;
}

/*
 * Whether dir may be used at all, before anything is opened in it: the
 * mount's checks, on its descriptor (cache_probe_lock: this user's,
 * writable by nobody else, not a link; LOCK a plain file, never a FIFO
 * that blocks or a link that is followed).  Said when not.
 */
bool
fc_trusted(const char *dir)
{
	char why[4500];
	int r = cache_probe_lock(dir, why, sizeof(why));

	if (r == 0 || r == -EBUSY)
		return true;
	fprintf(stderr, "feedfs-cache: %s\n", why);
	return false;
}

/* Open for reading; with a feedfs holding dir, ask it to flush first. */
int
fc_open_read(const char *dir, struct cache **c)
{
	char err[1024], reply[512], who[1024];

	if (!fc_trusted(dir))
		return -1;
	if (fc_held(dir, who, sizeof(who)) &&
	    fc_ctl(dir, who, "flush", reply, sizeof(reply)) != 0) {
		if (fc_timed_out)
			return -1;
		fprintf(stderr,
		    "feedfs-cache: %s; its control socket does not answer, "
		    "so entries not yet flushed are not seen\n",
		    who);
	}
	if (cache_open_secondary(dir, c, err, sizeof(err)) != 0) {
		fprintf(stderr, "feedfs-cache: %s\n", err);
		return -1;
	}
	return 0;
}
