/*
 * err.c - cache/ (the store), layer store, its bottom (calls room.c
 * only).  A store's first failure, after which the cache is off
 * (cache_fail: every store file calls it), and what it was
 * (cache_error).  A full disk is not such a failure: room.c's.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "cache/cache_int.h"

void
cache_fail(struct cache *c, const char *what, const char *msg)
{
	if (cache_is_nospace(msg)) {
		cache_room_nospace(c, msg); /* hits go on */
		return;
	}
	pthread_mutex_lock(&c->errlock);
	if (!atomic_load(&c->disabled)) {
		snprintf(c->err, sizeof(c->err), "%s failed: %s", what, msg);
		atomic_store(&c->disabled, true);
	}
	pthread_mutex_unlock(&c->errlock);
}

const char *
cache_error(struct cache *c)
{
	if (c != NULL && c->ops != NULL)
		return c->ops->error(c);
	if (c == NULL || !atomic_load(&c->disabled))
		return NULL;
	return c->err;
}
