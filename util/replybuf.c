/*
 * replybuf.c - a buffer of the calling thread's for a FUSE reply's bytes
 * (replybuf.h).  Layer: util/.
 *
 * A pthread key, not _Thread_local: libfuse ends idle worker threads,
 * and the key's destructor frees what such a thread held.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "util/replybuf.h"

#define HUGE_FROM ((size_t)1 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

struct replybuf {
	size_t cap;
	void *p;
};

static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int key_err;

static void
buf_free(void *v)
{
	struct replybuf *rb = v;

	free(rb->p);
	free(rb);
}

static void
key_init(void)
{
	key_err = pthread_key_create(&key, buf_free);
}

uint8_t *
ff_reply_buf(size_t size)
{
	struct replybuf *rb;

	pthread_once(&once, key_init);
	if (key_err != 0)
		return NULL;
	if ((rb = pthread_getspecific(key)) == NULL) {
		if ((rb = calloc(1, sizeof(*rb))) == NULL)
			return NULL;
		if (pthread_setspecific(key, rb) != 0) {
			free(rb);
			return NULL;
		}
	}
	if (rb->cap < size || rb->p == NULL) {
		size_t align = size >= HUGE_FROM ? HUGE_PAGE : 64;
		size_t cap = (size + align - 1) & ~(align - 1);
		void *p;

		if (cap == 0)
			cap = align;
		if (posix_memalign(&p, align, cap) != 0)
			return NULL;
		if (align == HUGE_PAGE)
			madvise(p, cap, MADV_HUGEPAGE); /* a hint */
		free(rb->p);
		rb->p = p;
		rb->cap = cap;
	}
	return rb->p;
}
