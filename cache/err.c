/*
 * err.c - layer: store, its bottom (calls nothing).  A store's first
 * failure, after which the cache is off (cache_fail: every store file
 * calls it), and what it was (cache_error).
 */
#include <stdatomic.h>
#include <stdio.h>

#include "cache/cache_int.h"

void
cache_fail(struct cache *c, const char *what, const char *msg)
{
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
