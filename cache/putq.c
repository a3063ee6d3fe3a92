/*
 * putq.c - cache/ (the store), layer server (under srv.c; calls the
 * store).  The owner's put queue: PUT and PUT_DIGEST bodies queued by the
 * request threads (at most SRV_QUEUE_MAX), done in order by one put
 * thread, their bytes and the bodies being read within srv_opts'
 * share_mem; and the maintenance thread, which alone checks the store's
 * size and evicts while the server runs (srv.c says how the server fits
 * together).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache/srv_int.h"

/* Queue a put (its body is taken: freed here if dropped). */
void
srv_enqueue(struct cache_srv *s, struct put_item *it)
{
	pthread_mutex_lock(&s->qlock);
	if (s->qstop || s->qn >= SRV_QUEUE_MAX) {
		s->mem_used -= it->len; /* its body's share, taken at read */
		pthread_mutex_unlock(&s->qlock);
		atomic_fetch_add(&s->dropped, 1);
		free(it->body);
		free(it);
		return;
	}
	it->next = NULL;
	*s->qtail = it;
	s->qtail = &it->next;
	s->qn++;
	s->qbytes += it->len;
	pthread_cond_signal(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
}

/*
 * Count len bytes of a body in share_mem: true, or false for a PUT that
 * does not fit (the other ops' bodies are small, and always counted).
 */
bool
srv_mem_take(struct cache_srv *s, uint32_t op, size_t len)
{
	bool ok;

	pthread_mutex_lock(&s->qlock);
	ok = op != WIRE_PUT || s->mem_used + len <= s->o.share_mem;
	if (ok)
		s->mem_used += len;
	if (s->mem_used > s->mem_peak)
		s->mem_peak = s->mem_used;
	pthread_mutex_unlock(&s->qlock);
	return ok;
}

void
srv_mem_give(struct cache_srv *s, size_t len)
{
	if (len == 0)
		return;
	pthread_mutex_lock(&s->qlock);
	s->mem_used -= len;
	pthread_mutex_unlock(&s->qlock);
}

static void
do_put(struct cache_srv *s, struct put_item *it)
{
	if (it->op == WIRE_PUT) {
		char prefix[WIRE_PREFIX_MAX + 1];
		struct cache_val v = it->put.v;

		memcpy(prefix, it->put.prefix, it->put.prefix_len);
		prefix[it->put.prefix_len] = '\0';
		v.prefix = prefix;
		cache_put(s->c, it->put.key, &v);
	} else {
		char path[WIRE_PATH_MAX + 1];

		memcpy(path, it->dig.path, it->dig.path_len);
		path[it->dig.path_len] = '\0';
		cache_put_digest(s->c, path, &it->dig.st, it->dig.digest);
	}
}

/* The put thread: the queue, in order, until stopped and drained. */
void *
srv_put_thread(void *arg)
{
	struct cache_srv *s = arg;

	pthread_mutex_lock(&s->qlock);
	for (;;) {
		struct put_item *it = s->qhead;

		if (it == NULL) {
			if (s->qstop)
				break;
			pthread_cond_wait(&s->qcond, &s->qlock);
			continue;
		}
		if ((s->qhead = it->next) == NULL)
			s->qtail = &s->qhead;
		s->qn--;
		s->qbytes -= it->len;
		pthread_mutex_unlock(&s->qlock);
		do_put(s, it);
		free(it->body);
		pthread_mutex_lock(&s->qlock);
		s->mem_used -= it->len;
		free(it);
	}
	pthread_mutex_unlock(&s->qlock);
	return NULL;
}

void
srv_maint_wake(void *arg)
{
	struct cache_srv *s = arg;

	pthread_mutex_lock(&s->qlock);
	s->mwake = true;
	pthread_cond_signal(&s->mcond);
	pthread_mutex_unlock(&s->qlock);
}

/* The maintenance thread: the size check and eviction, when woken. */
void *
srv_maint_thread(void *arg)
{
	struct cache_srv *s = arg;

	pthread_mutex_lock(&s->qlock);
	while (!s->mstop) {
		if (!s->mwake) {
			pthread_cond_wait(&s->mcond, &s->qlock);
			continue;
		}
		s->mwake = false;
		pthread_mutex_unlock(&s->qlock);
		cache_maintain(s->c);
		pthread_mutex_lock(&s->qlock);
	}
	pthread_mutex_unlock(&s->qlock);
	return NULL;
}

uint64_t
srv_dropped(struct cache_srv *s)
{
	return s != NULL ? atomic_load(&s->dropped) : 0;
}

uint64_t
srv_mem_peak(struct cache_srv *s)
{
	uint64_t p;

	if (s == NULL)
		return 0;
	pthread_mutex_lock(&s->qlock);
	p = s->mem_peak;
	pthread_mutex_unlock(&s->qlock);
	return p;
}
