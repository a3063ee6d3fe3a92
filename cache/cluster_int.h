/*
 * cluster_int.h - what the files of the cluster tier share (cluster.c:
 * open, close, stats and errors; cluster_conf.c: the server list and the
 * auth file; cluster_io.c: the value codec, get and put).  Not for use
 * outside cache/cluster*.c.
 */
#ifndef FEEDFS_CLUSTER_INT_H
#define FEEDFS_CLUSTER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libmemcached/memcached.h>
#include <libmemcachedutil-1.0/pool.h>

#include "cache/cluster.h"

/*
 * Lock order: none.  The counters are atomics; errlock guards only the
 * error text.
 */
struct cluster {
	memcached_st *master; /* the template the pool clones */
	memcached_pool_st *pool;
	size_t chunk; /* value bytes per item */

	_Atomic uint64_t hits, misses, errors, bytes_in, bytes_out, puts,
	    put_errors, skipped_large, bad_checksum, missing_chunks;

	pthread_mutex_t errlock;
	char first[256];      /* the first failure; guarded by errlock */
	char errtext[256];    /* the latest; guarded by errlock */
	atomic_bool failed;   /* a failure happened */
	atomic_bool reported; /* cluster_error_once said it */
};

struct server {
	char host[256];
	unsigned port;
};

/* printf into err[errlen] (nothing when err is NULL or errlen 0). */
void cluster_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Parse the comma-separated "HOST:PORT" list servers into
 * sv[CLUSTER_MAX_SERVERS]; *n set to their number on success.  -EINVAL
 * with a message in err naming the server.
 */
int cluster_parse_servers(
    const char *servers, struct server *sv, int *n, char *err, size_t errlen);

/*
 * Read user and password from the auth file path (a regular file that
 * only its owner may read) into user[ulen] and pass[plen]; the caller
 * wipes pass.  0, or -errno with a message in err.
 */
int cluster_read_auth(const char *path, char *user, size_t ulen, char *pass,
    size_t plen, char *err, size_t errlen);

#endif
