/*
 * handle.c - cache/ (the store), layer handle (the top: calls owner.c,
 * srv.c, client.c, the control socket and the store).  cache_open_shared's
 * handle: one interface (struct cache_ops, through which cache.h's
 * functions go) over two implementations, this process's own store once it
 * holds it, else the owner's data socket (client.c); the takeover that
 * switches from the second to the first, with the options given at open.
 *
 * Takeover: when the client finds that nobody holds the store
 * (-ENOTCONN), one thread of this process tries to take it (owner.c's
 * open.lock, then cache_open); the one process that gets it opens the
 * store and starts both sockets, the others attach to it.  A store left
 * by a killed owner recovers as after any crash (no WAL: its unflushed
 * puts are lost, never wrong).  The new owner's size bound is the larger
 * of its own cache_size and the bound the old owner announced, so a
 * takeover never shrinks the shared cache (feedfs.conf(5)).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/share_int.h"

#define RETRY_BUSY_MS 50     /* another process is taking the store */
#define RETRY_FAILED_MS 1000 /* the store could not be opened */
/*
 * At open, a store held by a feedfs whose mount is gone (it was unmounted
 * and is closing the store: a memtable to flush) is waited for this long,
 * so that a remount right after fusermount3 -u owns the cache instead of
 * missing until the old daemon has exited.
 */
#define HANDOVER_WAIT_MS 10000

struct cache_share {
	char dir[4096];
	struct cache_opts o; /* o.label points at self.label */
	struct share_self self;
	struct client *cl;

	/* Set once, when this process holds the store; never unset. */
	_Atomic(struct cache *) local;
	struct cache_srv *srv; /* under takeover; stopped by close */
	struct cache_ctl *ctl;
	pthread_mutex_t takeover;	/* one attempt at a time */
	atomic_uint_least64_t retry_at; /* no takeover before (ns) */
	atomic_uint_least64_t bytes_read;
	/*
	 * The dir holds a newer cache format (its format file at open, or
	 * the store's marker at a takeover): left alone for good, every get
	 * a miss.  why and dir_format are written once, before refused is
	 * set (at open, or under takeover).
	 */
	atomic_bool refused;
	char why[1024];
	uint32_t dir_format;
	char failed[1024]; /* the last takeover's failure; under takeover */
};

static void
say(struct cache_share *sh, bool warn, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (sh->o.say == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sh->o.say(warn, msg);
}

static struct cache *
local_of(struct cache *c)
{
	return atomic_load(&c->share->local);
}

/* Leave the dir alone for good: why (cache_error) and its format. */
static void
refuse(struct cache_share *sh, uint32_t format, const char *why)
{
	if (atomic_load(&sh->refused))
		return;
	snprintf(sh->why, sizeof(sh->why), "%s", why);
	sh->dir_format = format;
	atomic_store(&sh->refused, true);
}

/*
 * The owner's mount point, for a later mount's handover (holder_unmounted):
 * dir/OWNER_MOUNT holds "PID LABEL\n", written by each owner when it takes
 * the store (a file of another pid is an old owner's, and ignored).
 */
#define OWNER_MOUNT "owner.mount"

static void
note_owner_mount(const struct cache_share *sh)
{
	char path[4200], tmp[4240], text[sizeof(sh->self.label) + 32];
	int fd, n;

	if (sh->self.label[0] != '/' ||
	    (size_t)snprintf(path, sizeof(path), "%s/%s", sh->dir,
		OWNER_MOUNT) >= sizeof(path))
		return;
	snprintf(tmp, sizeof(tmp), "%s.%ld", path, (long)getpid());
	n = snprintf(text, sizeof(text), "%ld %s\n", (long)getpid(),
	    sh->self.label);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
				O_CLOEXEC,
		 0600)) < 0)
		return;
	if (write(fd, text, (size_t)n) != n || close(fd) != 0 ||
	    rename(tmp, path) != 0)
		unlink(tmp);
}

/* The mount point dir/OWNER_MOUNT gives for pid, into buf: false if none. */
static bool
owner_mount(const struct cache_share *sh, long pid, char *buf, size_t len)
{
	char path[4200], text[sizeof(sh->self.label) + 32], *end;
	ssize_t n;
	long p;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", sh->dir, OWNER_MOUNT);
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) <
	    0)
		return false;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return false;
	text[n] = '\0';
	p = strtol(text, &end, 10);
	if (p != pid || end[0] != ' ' || end[1] != '/' ||
	    strchr(end, '\n') == NULL)
		return false;
	*strchr(end, '\n') = '\0';
	snprintf(buf, len, "%s", end + 1);
	return true;
}

/*
 * Become the owner: take the store with the handle's options and start
 * both sockets.  Called with takeover held.  0 when this process holds it
 * now; -EBUSY when another one does, -ETIMEDOUT when another one has been
 * taking it for wait_ms; else LOCK's error (-EPERM: not a regular
 * file, refused) or cache_open's, and why.
 */
static int
become_owner(struct cache_share *sh, int wait_ms, char *err, size_t errlen)
{
	struct cache_opts o = sh->o;
	uint64_t was = client_owner_bound(sh->cl);
	struct srv_opts so = {sh->o.conns, sh->o.share_mem, {0}};
	struct cache *c;
	const char *note;
	char msg[1024];
	long holder;
	bool warn;
	int e, lk;

	if ((lk = owner_open_lock(sh->dir, wait_ms)) < 0) {
		snprintf(err, errlen, "%s/%s: %s", sh->dir, OPEN_LOCK,
		    strerror(-lk));
		return lk;
	}
	if ((e = owner_lease(sh->dir, &holder)) != 0) {
		close(lk);
		if (e == -EPERM) {
			/* a FIFO or a link: nobody's lease, and no store */
			snprintf(err, errlen,
			    "%s/LOCK is not a regular file: refusing the cache "
			    "(remove it)",
			    sh->dir);
			return e;
		}
		if (e < 0) {
			snprintf(
			    err, errlen, "%s/LOCK: %s", sh->dir, strerror(-e));
			return e;
		}
		if (holder > 0)
			snprintf(err, errlen, "%s is held by pid %ld", sh->dir,
			    holder);
		else
			snprintf(err, errlen,
			    "%s is held by a process of another PID namespace",
			    sh->dir);
		return -EBUSY;
	}
	if (o.size_bound != CACHE_SIZE_AUTO && was > o.size_bound)
		o.size_bound = was; /* a takeover never shrinks the cache */
	e = cache_open_opts(sh->dir, &o, &c, err, errlen);
	close(lk); /* the store's own lock holds from here */
	if (e != 0)
		return e;
	if (cache_note(c) != NULL)
		say(sh, true, "%s", cache_note(c));
	cache_keep_bound(c, was); /* cache_size = auto: never shrinks either */
	if ((note = cache_size_note(c, &warn)) != NULL)
		say(sh, warn, "%s", note);
	if (cache_ctl_start(c, sh->dir, &sh->ctl, msg, sizeof(msg)) != 0)
		say(sh, true, "no control socket for feedfs-cache: %s", msg);
	/* The token before the socket: whoever reaches us can check it. */
	if ((e = owner_write_token(sh->dir, so.token)) != 0)
		say(sh, true, "other mounts cannot attach: %s/%s: %s", sh->dir,
		    OWNER_ID, strerror(-e));
	else if (srv_start(c, &sh->self, sh->dir, &so, &sh->srv, msg,
		     sizeof(msg)) != 0)
		say(sh, true, "other mounts cannot attach: %s", msg);
	atomic_store(&sh->local, c);
	note_owner_mount(sh);
	return 0;
}

/* Nobody holds the store: one thread tries to take it. */
static void
try_takeover(struct cache_share *sh)
{
	uint64_t now = wire_now_ns();
	char err[1024];
	int e;

	if (now < atomic_load(&sh->retry_at) ||
	    pthread_mutex_trylock(&sh->takeover) != 0)
		return;
	if (atomic_load(&sh->local) != NULL) {
		pthread_mutex_unlock(&sh->takeover);
		return;
	}
	if ((e = become_owner(sh, 0, err, sizeof(err))) == 0) {
		say(sh, false,
		    "this feedfs (pid %ld) is the owner of %s now, serving "
		    "the other mounts on %s/%s",
		    (long)getpid(), sh->dir, sh->dir, DATA_NAME);
	} else if (e == -EINVAL) {
		/* A store of a newer format: never tried again (cache.h). */
		refuse(sh, (uint32_t)cache_dir_format(sh->dir), err);
	} else if (e == -EBUSY || e == -ETIMEDOUT) {
		atomic_store(
		    &sh->retry_at, now + (uint64_t)RETRY_BUSY_MS * 1000000u);
	} else {
		/* Said once, not at every retry (a full disk, say). */
		if (strcmp(err, sh->failed) != 0)
			say(sh, true, "cannot take over %s: %s", sh->dir, err);
		snprintf(sh->failed, sizeof(sh->failed), "%s", err);
		atomic_store(
		    &sh->retry_at, now + (uint64_t)RETRY_FAILED_MS * 1000000u);
	}
	pthread_mutex_unlock(&sh->takeover);
}

static void
count(struct cache_share *sh, bool hit)
{
	atomic_fetch_add(hit ? &sh->self.hits : &sh->self.misses, 1);
}

static int
h_get(struct cache *c, const uint8_t key[CACHE_KEY_LEN], struct cache_val *v)
{
	struct cache_share *sh = c->share;
	struct cache *l = local_of(c);
	int e = -ENOENT;

	if (atomic_load(&sh->refused)) {
		count(sh, false);
		return -ENOENT;
	}
	if (l == NULL && !cache_is_zero(key, CACHE_KEY_LEN) &&
	    (e = client_get(sh->cl, key, v)) == -ENOTCONN) {
		try_takeover(sh);
		l = local_of(c);
		e = -ENOENT;
	}
	if (l != NULL && (e = cache_get(l, key, v)) == 0)
		atomic_fetch_add(&sh->bytes_read, v->len);
	count(sh, e == 0);
	return e == 0 ? 0 : -ENOENT;
}

/* cache_holds: the store this process holds tells; another's cannot. */
static int
h_holds(struct cache *c, const uint8_t key[CACHE_KEY_LEN])
{
	return local_of(c) != NULL ? cache_holds(local_of(c), key) : -1;
}

static void
h_put(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v)
{
	struct cache_share *sh = c->share;
	struct cache *l = local_of(c);

	if (cache_is_zero(key, CACHE_KEY_LEN) || atomic_load(&sh->refused))
		return;
	if (l == NULL && client_put(sh->cl, key, v) == -ENOTCONN) {
		try_takeover(sh);
		l = local_of(c);
	}
	if (l != NULL)
		cache_put(l, key, v); /* the store counts what it stores */
}

static int
h_get_digest(struct cache *c, const char *path, const struct stat *st,
    uint8_t digest[32])
{
	struct cache_share *sh = c->share;
	struct cache *l = local_of(c);
	int e;

	if (atomic_load(&sh->refused))
		return -ENOENT;
	if (l == NULL &&
	    (e = client_get_digest(sh->cl, path, st, digest)) != -ENOTCONN)
		return e == 0 ? 0 : -ENOENT;
	if (l == NULL) {
		try_takeover(sh);
		l = local_of(c);
	}
	return l != NULL ? cache_get_digest(l, path, st, digest) : -ENOENT;
}

static void
h_put_digest(struct cache *c, const char *path, const struct stat *st,
    const uint8_t digest[32])
{
	struct cache_share *sh = c->share;
	struct cache *l = local_of(c);

	if (cache_is_zero(digest, 32) || atomic_load(&sh->refused))
		return;
	if (l == NULL &&
	    client_put_digest(sh->cl, path, st, digest) == -ENOTCONN) {
		try_takeover(sh);
		l = local_of(c);
	}
	if (l != NULL)
		cache_put_digest(l, path, st, digest);
}

static void
h_get_stats(struct cache *c, struct cache_stats *st)
{
	struct cache_share *sh = c->share;
	struct cache *l = local_of(c);
	struct client_stats cs;
	struct wire_stats ws;

	memset(st, 0, sizeof(*st));
	client_counts(sh->cl, &cs);
	if (atomic_load(&sh->refused)) {
		st->disabled = true;
		st->dir_format = sh->dir_format;
	} else if (l == NULL &&
		   (st->dir_format = client_dir_format(sh->cl)) != 0) {
		/* An owner of another format: not used (cache.h). */
		st->disabled = true;
	} else if (l != NULL) {
		cache_get_stats(l, st);
		/*
		 * The clients' puts the owner's queue had no room for (srv
		 * was set before local, and stays until close).
		 */
		st->insert_failures += srv_dropped(sh->srv);
		st->share_peak = srv_mem_peak(sh->srv);
	} else if (client_owner_stats(sh->cl, &ws) == 0) {
		/* The shared store's figures, as its owner counts them. */
		st->disk_bytes = ws.disk_bytes;
		st->disabled = ws.disabled != 0;
		st->bytes_written = ws.bytes_written;
		st->inserts = ws.inserts;
		st->denied = ws.denied;
		st->evictions = ws.evictions;
		st->refreshes = ws.refreshes;
		st->oversize = ws.oversize;
		st->entries = ws.entries;
		st->used_bytes = ws.used_bytes;
		st->admit_bytes = ws.admit_bytes;
		st->size_bound = client_owner_bound(sh->cl);
		st->dir_format = CACHE_FORMAT_VERSION; /* it answers us */
	}
	/* This mount's own lookups and traffic, not the store's. */
	st->hits = atomic_load(&sh->self.hits);
	st->misses = atomic_load(&sh->self.misses);
	st->bytes_read = atomic_load(&sh->bytes_read) + cs.bytes_read;
	/*
	 * bytes_written stays the store's own figure, in either role: what
	 * the shared cache stored (issue 17 item 7: never a put it refused),
	 * not what this mount handed over.
	 */
	st->insert_failures += cs.insert_failures + cs.dropped;
}

/*
 * A hit or miss per prefix goes to the store's table when this process
 * holds it: that table is what the control socket's prefix-stats reads
 * (feedfs-cache stats), beside the store's own totals.  A client's are
 * not counted per prefix (its totals are in its .feedfs/stats).
 */
static void
h_note_use(struct cache *c, const char *prefix, bool hit)
{
	struct cache *l = local_of(c);

	if (l != NULL)
		cache_note_use(l, prefix, hit);
}

static const char *
h_error(struct cache *c)
{
	struct cache *l = local_of(c);

	if (atomic_load(&c->share->refused))
		return c->share->why;
	return l != NULL ? cache_error(l) : client_error(c->share->cl);
}

static const char *
h_note(struct cache *c)
{
	return local_of(c) != NULL ? cache_note(local_of(c)) : NULL;
}

static void
h_close(struct cache *c)
{
	struct cache_share *sh = c->share;
	struct cache *l;

	/* The sockets go before the store, so no new owner races them. */
	pthread_mutex_lock(&sh->takeover);
	srv_stop(sh->srv);
	cache_ctl_stop(sh->ctl);
	l = atomic_load(&sh->local);
	pthread_mutex_unlock(&sh->takeover);
	if (l != NULL)
		cache_close(l);
	client_free(sh->cl);
	pthread_mutex_destroy(&sh->takeover);
	free(sh);
	pthread_mutex_destroy(&c->errlock);
	free(c);
}

static const struct cache_ops share_ops = {
    .get = h_get,
    .holds = h_holds,
    .put = h_put,
    .get_digest = h_get_digest,
    .put_digest = h_put_digest,
    .get_stats = h_get_stats,
    .note_use = h_note_use,
    .error = h_error,
    .note = h_note,
    .close = h_close,
};

bool
cache_is_owner(struct cache *c)
{
	return c != NULL && (c->ops == NULL || local_of(c) != NULL);
}

/* /proc/PID/what (PID "self" or a number) into buf, NUL ended: its
 * length, or -1. */
static ssize_t
proc_read(const char *pid, const char *what, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/%s", pid, what);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* The mount point from the command line: feedfs's last argument. */
static void
default_label(char *buf, size_t len)
{
	char cmd[8192], *last = NULL;
	ssize_t n = proc_read("self", "cmdline", cmd, sizeof(cmd));

	buf[0] = '\0';
	if (n <= 0)
		return;
	for (char *p = cmd; p < cmd + n; p += strlen(p) + 1)
		if (*p != '\0')
			last = p;
	if (last != NULL && last != cmd)
		snprintf(buf, len, "%s", last);
}

/* Undo mountinfo's escapes of a path (\040 for a space, ...), in place. */
static void
unescape_octal(char *s)
{
	char *d = s;

	for (; *s; s++, d++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				    (s[3] - '0'));
			s += 3;
		} else
			*d = *s;
	}
	*d = '\0';
}

/* Whether a FUSE file system is mounted on path now (an absolute one). */
static bool
fuse_mounted(const char *path)
{
	char line[8192], where[4097], type[64];
	bool found = false;
	FILE *f;

	if ((f = fopen("/proc/self/mountinfo", "re")) == NULL)
		return true; /* cannot tell: as if it were */
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		const char *dash = strstr(line, " - ");

		if (sscanf(line, "%*d %*d %*s %*s %4096s", where) != 1 ||
		    dash == NULL || sscanf(dash + 3, "%63s", type) != 1 ||
		    strncmp(type, "fuse", 4) != 0)
			continue;
		unescape_octal(where);
		found = strcmp(where, path) == 0;
	}
	fclose(f);
	return found;
}

/*
 * Whether the store's holder is a feedfs whose mount is gone: its mount
 * point (OWNER_MOUNT) is this one's, its label (this feedfs is mounted
 * there now: one feedfs per mount point), or no FUSE mount any more.
 */
static bool
holder_unmounted(const struct cache_share *sh, long holder)
{
	char theirs[PATH_MAX];

	if (holder <= 0 || holder == (long)getpid() ||
	    sh->self.label[0] != '/' ||
	    !owner_mount(sh, holder, theirs, sizeof(theirs)))
		return false; /* not known: do not wait */
	return strcmp(theirs, sh->self.label) == 0 || !fuse_mounted(theirs);
}

/* The pid of the store's holder (owner_lease): 0 for none or not visible
 * from this PID namespace, -errno when LOCK cannot be asked. */
static long
holder_pid(const char *dir)
{
	long pid;
	int r = owner_lease(dir, &pid);

	return r < 0 ? r : pid;
}

/*
 * A store held by a feedfs that was unmounted (holder_unmounted): wait
 * for its close, up to HANDOVER_WAIT_MS, then take it.  As become_owner.
 */
static int
wait_handover(struct cache_share *sh, char *err, size_t errlen)
{
	uint64_t until = wire_now_ns() + (uint64_t)HANDOVER_WAIT_MS * 1000000u;
	long was = holder_pid(sh->dir), now;
	int e = -EBUSY;

	if (!holder_unmounted(sh, was))
		return e;
	say(sh, false,
	    "%s is held by feedfs pid %ld, whose mount is gone: waiting up to "
	    "%d s for it to close the cache",
	    sh->dir, was, HANDOVER_WAIT_MS / 1000);
	while (wire_now_ns() < until) {
		struct timespec ts = {0, 20 * 1000000};

		nanosleep(&ts, NULL);
		e = become_owner(sh, 0, err, errlen);
		if (e != -EBUSY && e != -ETIMEDOUT)
			return e;
		/* Another process got it first, or the holder stopped. */
		if ((now = holder_pid(sh->dir)) != was && now != 0)
			return e;
		if (now > 0 && owner_stopped(now) == 1)
			return e;
	}
	return e;
}

int
cache_open_shared(const char *dir, const struct cache_opts *o,
    struct cache **out, char *err, size_t errlen)
{
	struct cache_share *sh;
	struct cache *c;
	char why[sizeof(sh->why)];
	int e, v;

	/* Every role: the directory must be this user's alone. */
	if ((e = owner_check_dir(dir, err, errlen)) != 0)
		return e;
	v = cache_dir_format(dir);
	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (sh = calloc(1, sizeof(*sh))) == NULL) {
		free(c);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	pthread_mutex_init(&c->errlock, NULL);
	c->ops = &share_ops;
	c->share = sh;
	snprintf(sh->dir, sizeof(sh->dir), "%s", dir);
	if (o->label != NULL)
		snprintf(
		    sh->self.label, sizeof(sh->self.label), "%s", o->label);
	else
		default_label(sh->self.label, sizeof(sh->self.label));
	sh->o = *o;
	sh->o.label = sh->self.label;
	pthread_mutex_init(&sh->takeover, NULL);
	if ((e = client_new(dir, &sh->self, o->say,
		 o->workers > 0 ? o->workers + POOL_EXTRA : 0, &sh->cl)) != 0) {
		snprintf(err, errlen, "%s", strerror(-e));
		goto fail;
	}

	if (v > CACHE_FORMAT_VERSION) {
		/* Neither owned nor asked: its owner (if any) reads it. */
		snprintf(why, sizeof(why),
		    "%s holds cache format %d, newer than this feedfs's %d (a "
		    "newer feedfs made it): left alone; use the newer feedfs, "
		    "or another cache_dir for this one",
		    dir, v, CACHE_FORMAT_VERSION);
		refuse(sh, (uint32_t)v, why);
		*out = c;
		return 0;
	}
	pthread_mutex_lock(&sh->takeover);
	e = become_owner(sh, OPEN_LOCK_WAIT_MS, err, errlen);
	if (e == -EBUSY)
		e = wait_handover(sh, err, errlen);
	pthread_mutex_unlock(&sh->takeover);
	if (e == 0) {
		say(sh, false,
		    "this feedfs (pid %ld) owns the cache in %s; other mounts "
		    "attach through %s/%s",
		    (long)getpid(), dir, dir, DATA_NAME);
		*out = c;
		return 0;
	}
	if (e == -ETIMEDOUT)
		say(sh, true,
		    "another process has held %s/%s for %d ms: starting as a "
		    "client of %s, which misses until an owner serves it",
		    dir, OPEN_LOCK, OPEN_LOCK_WAIT_MS, dir);
	else if (e != -EBUSY)
		goto fail;
	else
		say(sh, false,
		    "%s is held by another feedfs: using it through %s/%s", dir,
		    dir, DATA_NAME);
	(void)client_attach(sh->cl); /* it logs who */
	*out = c;
	return 0;
fail:
	client_free(sh->cl);
	pthread_mutex_destroy(&sh->takeover);
	free(sh);
	pthread_mutex_destroy(&c->errlock);
	free(c);
	return e;
}
