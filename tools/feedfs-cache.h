/*
 * feedfs-cache.h - a program (tools/, over cache/ and the model in core/):
 * what the files of feedfs-cache share.  feedfs-cache.c holds main and the
 * commands that check or change a store (verify, evict, clear, compact);
 * cache-report.c the commands that report on it (stats, ls);
 * cache-access.c the access to a store that both use (its checks, the
 * holder's control socket, the secondary instance), which calls neither.
 * One thread; nothing here is thread safe.
 */
#ifndef FEEDFS_TOOLS_FEEDFS_CACHE_H
#define FEEDFS_TOOLS_FEEDFS_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#define EXIT_DAMAGE 1
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 3 /* the feedfs that holds the store did not answer */

struct cache;
struct cfg;

/* cache-access.c: reaching a store. */

/* --timeout: each request to the holder's control socket, in ms (main
 * sets it before any request; 0: 5 s, and 30 s for clear, evict and
 * compact). */
extern int fc_timeout_ms;
/* Set once a request timed out: the command stops, main exits 3. */
extern bool fc_timed_out;

/*
 * A request to the feedfs that holds dir (who: cache_probe_lock's text
 * naming it), within --timeout: cache_ctl_request's return.  A timeout is
 * said, once, and ends the command (fc_timed_out).
 */
int fc_ctl(
    const char *dir, const char *who, const char *req, char *reply, size_t len);
/* Whether a feedfs holds dir (who: its text, as cache_probe_lock says). */
bool fc_held(const char *dir, char *who, size_t len);
/* Whether dir may be used at all (the mount's checks, on its descriptor,
 * before anything is opened in it); said on stderr when not. */
bool fc_trusted(const char *dir);
/* Open dir for reading (a secondary instance); with a feedfs holding it,
 * ask it to flush first.  0, or -1 with the reason said on stderr. */
int fc_open_read(const char *dir, struct cache **c);

/* cache-report.c: the stats and ls commands (cfg: -c's, or NULL); the
 * exit status. */
int cmd_stats(const char *dir, const struct cfg *cfg);
int cmd_ls(const char *dir, const struct cfg *cfg);

#endif
