/*
 * room.c - cache/ (the store), layer store, its bottom with err.c (calls
 * nothing; err.c and store.c call it).  The room on the store's
 * filesystem: the floor of free bytes the store leaves there, and the full
 * state in which inserts stop while hits go on.
 *
 * A full disk costs inserts, never hits.  The store stops inserting
 * before its own puts can fill the filesystem (less than floor free, as
 * fstatvfs says at most once a second), and when a write finds no space
 * anyway (another program filled the disk; RocksDB then refuses every
 * write until its own recovery, which it starts when it sees room again,
 * every 5 s).  Gets go on from what the store holds.  Once the check
 * finds twice floor free, puts are tried again: the first that is
 * written ends the episode.  Both ends are said once (cache_opts' say).
 *
 * The floor: room for RocksDB to flush its two memtables and write a
 * compaction's output file beside its inputs, 4 write buffers, but at
 * most an eighth of the filesystem (a small one would else get no cache
 * at all) and at least 1 MiB.
 */
#include <sys/statvfs.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache_int.h"
#include "cache/wire.h"

#define FLOOR_MIN (1u << 20)

static void
human(uint64_t b, char *out, size_t len)
{
	if (b >= (1ull << 30))
		snprintf(out, len, "%.1fG", (double)b / (1ull << 30));
	else
		snprintf(out, len, "%.1fM", (double)b / (1u << 20));
}

static void say(struct cache *c, bool warn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
say(struct cache *c, bool warn, const char *fmt, ...)
{
	char msg[4096 + 512];
	va_list ap;

	if (c->say == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->say(warn, msg);
}

bool
cache_is_nospace(const char *msg)
{
	return msg != NULL && strstr(msg, "No space left on device") != NULL;
}

void
cache_room_init(struct cache *c, int dfd)
{
	struct statvfs sv;
	uint64_t total = 0, f;

	c->dirfd = dup(dfd);
	if (c->dirfd >= 0 && fstatvfs(c->dirfd, &sv) == 0)
		total = (uint64_t)sv.f_blocks * sv.f_frsize;
	f = 4 * c->wbuf;
	if (total > 0 && f > total / 8)
		f = total / 8;
	c->floor = f < FLOOR_MIN ? FLOOR_MIN : f;
	atomic_store(&c->room_at, 0);
}

void
cache_room_free(struct cache *c)
{
	if (c->dirfd >= 0)
		close(c->dirfd);
	c->dirfd = -1;
}

/* The bytes free for this user on the store's filesystem (UINT64_MAX
 * when it cannot be asked: never full by the check). */
static uint64_t
free_bytes(struct cache *c)
{
	struct statvfs sv;

	if (c->dirfd < 0 || fstatvfs(c->dirfd, &sv) != 0)
		return UINT64_MAX;
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* Enter the full state; say why, once per episode. */
static void
enter_full(struct cache *c, const char *why)
{
	atomic_store(&c->full, true);
	if (!atomic_exchange(&c->said_full, true))
		say(c, true, "%s: inserts stop until there is room; hits go on",
		    why);
}

bool
cache_room_ok(struct cache *c)
{
	uint64_t now = wire_now_ns(), at = atomic_load(&c->room_at), avail;
	bool full = atomic_load(&c->full);
	char f[32], fl[32], why[4096 + 128];

	if (now < at || !atomic_compare_exchange_strong(
			    &c->room_at, &at, now + CACHE_ROOM_CHECK_NS)) {
		/* Checked within the second (or by another thread now). */
		return !full;
	}
	avail = free_bytes(c);
	if (!full && avail < c->floor) {
		human(avail, f, sizeof(f));
		human(c->floor, fl, sizeof(fl));
		snprintf(why, sizeof(why),
		    "%s's filesystem has %s free, less than the %s the cache "
		    "leaves free",
		    c->dir, f, fl);
		enter_full(c, why);
		full = true;
	} else if (full && avail != UINT64_MAX && avail >= 2 * c->floor) {
		/* Room again: the next put tries; its write says if so. */
		atomic_store(&c->full, false);
		full = false;
	}
	return !full;
}

void
cache_room_nospace(struct cache *c, const char *msg)
{
	char why[4096 + 300];

	/* No check before the next second: no write before it either. */
	atomic_store(&c->room_at, wire_now_ns() + CACHE_ROOM_CHECK_NS);
	snprintf(why, sizeof(why), "%s: %s", c->dir, msg);
	enter_full(c, why);
}

void
cache_room_wrote(struct cache *c)
{
	char f[32];

	if (!atomic_load(&c->said_full) || atomic_load(&c->full))
		return; /* the common case: one load */
	if (atomic_exchange(&c->said_full, false)) {
		human(free_bytes(c), f, sizeof(f));
		say(c, false,
		    "%s's filesystem has room again (%s free): inserts resume",
		    c->dir, f);
	}
}
