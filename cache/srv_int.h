/*
 * srv_int.h - cache/ (the store), layer server.  What the owner's server's
 * two files share, and nothing else includes: srv.c (the socket, the
 * connections and their requests, start and stop) and putq.c (the put
 * queue, the put thread and the maintenance thread, the share_mem bound).
 */
#ifndef FEEDFS_SRV_INT_H
#define FEEDFS_SRV_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache/share_int.h"

struct mount_ent {
	pid_t pid;
	int nconn;
	uint64_t hits, misses;
	char label[256];
	struct mount_ent *next;
};

struct srv_conn {
	struct cache_srv *s;
	int fd;
	pid_t pid;  /* as this process sees it: 0, another namespace's */
	bool hello; /* said HELLO */
	atomic_bool done;
	pthread_t thread;
	size_t held; /* bytes of share_mem its body being read holds */
	struct srv_conn *next;
};

/* A queued put: its frame's body (owned) and what it decoded to. */
struct put_item {
	uint32_t op; /* WIRE_PUT or WIRE_PUT_DIGEST */
	uint8_t *body;
	size_t len;
	struct wire_put put;
	struct wire_digest_req dig;
	struct put_item *next;
};

struct cache_srv {
	struct cache *c;	       /* the store, held by this process */
	const struct share_self *self; /* this mount's label and counts */
	uint64_t put_limit;	       /* payload bytes of one value */
	struct srv_opts o;
	int fd;
	atomic_bool stopping;
	pthread_t thread, put_thread, maint_thread;
	pthread_mutex_t lock; /* protects conns, nconns and mounts */
	struct srv_conn *conns;
	int nconns;
	struct mount_ent *mounts;
	/* The put queue and the maintenance thread's wakeup. */
	pthread_mutex_t qlock; /* protects the rest */
	pthread_cond_t qcond, mcond;
	struct put_item *qhead, **qtail;
	size_t qn, qbytes;
	uint64_t mem_used; /* of o.share_mem: queued puts, bodies read */
	uint64_t mem_peak; /* the most mem_used was */
	bool qstop, mwake, mstop;
	atomic_uint_least64_t dropped, refused;
	char path[4200];
};

/* putq.c */
/* Queue a put (its body is taken: freed here if dropped). */
void srv_enqueue(struct cache_srv *s, struct put_item *it);
/*
 * Count len bytes of a body in share_mem: true, or false for a PUT that
 * does not fit (the other ops' bodies are small, and always counted).
 */
bool srv_mem_take(struct cache_srv *s, uint32_t op, size_t len);
/* Give back len bytes of share_mem. */
void srv_mem_give(struct cache_srv *s, size_t len);
/* The put thread: the queue, in order, until stopped and drained. */
void *srv_put_thread(void *arg);
/* c->maint_wake while s serves: wakes the maintenance thread. */
void srv_maint_wake(void *arg);
/* The maintenance thread: the size check and eviction, when woken. */
void *srv_maint_thread(void *arg);

#endif
