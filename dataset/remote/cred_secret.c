/*
 * cred_secret.c - layer: dataset/remote/ (the HTTP/S3 client; see cred.h):
 * where secrets live.  One mapping of CRED_ARENA_BYTES, reserved
 * (MAP_NORESERVE: pages are made as they are touched) and marked
 * MADV_DONTDUMP, so that a core dump (the kernel's, or gdb's gcore, which
 * reads the same flag from /proc/PID/smaps) never holds a byte of it; blocks
 * handed out first-fit and zeroed when freed.  Secrets also pass through
 * libcurl (a response's bytes before they reach us) and jansson (IMDS's
 * JSON): libcurl's memory is zeroed whenever it frees it, and jansson's
 * allocations go to the arena while a thread parses a secret
 * (cred_json_secret).
 *
 * Not MADV_WIPEONFORK or MADV_DONTFORK: the mount reads its credentials
 * before fuse_daemonize forks the daemon, which must keep them.
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dataset/remote/cred.h"

/* A block: its size (header included) and, while free, the next free
 * block (the free list is in address order, neighbours merged). */
struct blk {
	size_t size;
	struct blk *next;
};
#define HDR 16u
#define MIN_SPLIT 64u

static struct {
	pthread_once_t once;
	pthread_mutex_t lock; /* the free list */
	uint8_t *base;	      /* NULL: no arena (mmap failed) */
	size_t len;
	struct blk *free;
	size_t used; /* bytes of the blocks handed out */
} A = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, NULL, 0, NULL, 0};

static void
arena_init(void)
{
	void *p = mmap(NULL, CRED_ARENA_BYTES, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return;
	if (madvise(p, CRED_ARENA_BYTES, MADV_DONTDUMP) != 0) {
		/* A kernel without it: no arena rather than a false promise. */
		munmap(p, CRED_ARENA_BYTES);
		return;
	}
	A.base = p;
	A.len = CRED_ARENA_BYTES;
	A.free = p;
	A.free->size = A.len;
	A.free->next = NULL;
}

void *
cred_alloc(size_t n)
{
	size_t need;
	struct blk **pp, *b;

	pthread_once(&A.once, arena_init);
	if (A.base == NULL || n > A.len)
		return NULL;
	need = (n + HDR + 15u) & ~(size_t)15u;
	pthread_mutex_lock(&A.lock);
	for (pp = &A.free; (b = *pp) != NULL; pp = &b->next)
		if (b->size >= need)
			break;
	if (b == NULL) {
		pthread_mutex_unlock(&A.lock);
		return NULL;
	}
	if (b->size - need >= MIN_SPLIT) {
		struct blk *rest = (struct blk *)((uint8_t *)b + need);

		rest->size = b->size - need;
		rest->next = b->next;
		*pp = rest;
		b->size = need;
	} else
		*pp = b->next;
	A.used += b->size;
	pthread_mutex_unlock(&A.lock);
	b->next = NULL;
	return (uint8_t *)b + HDR;
}

bool
cred_in_arena(const void *p)
{
	const uint8_t *q = p;

	return A.base != NULL && q >= A.base && q < A.base + A.len;
}

size_t
cred_arena_used(void)
{
	size_t u;

	pthread_mutex_lock(&A.lock);
	u = A.used;
	pthread_mutex_unlock(&A.lock);
	return u;
}

void
cred_arena_range(uintptr_t *lo, uintptr_t *hi)
{
	pthread_once(&A.once, arena_init);
	*lo = (uintptr_t)A.base;
	*hi = (uintptr_t)A.base + A.len;
}

void
cred_free(void *p)
{
	struct blk *b, **pp, *prev = NULL;

	if (p == NULL)
		return;
	if (!cred_in_arena(p))
		abort(); /* not ours: a bug, never to be passed to free() */
	b = (struct blk *)((uint8_t *)p - HDR);
	explicit_bzero(p, b->size - HDR);
	pthread_mutex_lock(&A.lock);
	A.used -= b->size;
	for (pp = &A.free; *pp != NULL && *pp < b; pp = &(*pp)->next)
		prev = *pp;
	b->next = *pp;
	*pp = b;
	if (b->next != NULL && (uint8_t *)b + b->size == (uint8_t *)b->next) {
		b->size += b->next->size;
		b->next = b->next->next;
	}
	if (prev != NULL && (uint8_t *)prev + prev->size == (uint8_t *)b) {
		prev->size += b->size;
		prev->next = b->next;
	}
	pthread_mutex_unlock(&A.lock);
}

char *
cred_strndup(const char *s, size_t n)
{
	char *p = cred_alloc(n + 1);

	if (p != NULL) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

/* ---- jansson: the arena while a thread parses a secret ---- */

static _Thread_local bool json_secret;

static void *
json_alloc(size_t n)
{
	return json_secret ? cred_alloc(n) : malloc(n);
}

static void
json_release(void *p)
{
	if (cred_in_arena(p))
		cred_free(p);
	else
		free(p);
}

void
cred_json_secret(bool on)
{
	json_secret = on;
}

/* ---- libcurl: its memory zeroed when freed ---- */

static void
wipe_free(void *p)
{
	if (p != NULL) {
		explicit_bzero(p, malloc_usable_size(p));
		free(p);
	}
}

static void *
wipe_realloc(void *p, size_t n)
{
	size_t old;
	void *q;

	if (p == NULL)
		return malloc(n);
	if (n == 0) {
		wipe_free(p);
		return NULL;
	}
	if ((old = malloc_usable_size(p)) >= n)
		return p;
	/* Moved by hand: realloc would leave the old bytes behind. */
	if ((q = malloc(n)) == NULL)
		return NULL;
	memcpy(q, p, old);
	wipe_free(p);
	return q;
}

int
cred_curl_global_init(void)
{
	/* jansson's hooks too: both before any thread, once. */
	json_set_alloc_funcs(json_alloc, json_release);
	if (curl_global_init_mem(CURL_GLOBAL_DEFAULT, malloc, wipe_free,
		wipe_realloc, strdup, calloc) != CURLE_OK)
		return -EIO;
	return 0;
}
