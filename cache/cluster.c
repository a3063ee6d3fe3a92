/*
 * cluster.c - the cluster cache tier: preprocessed values in memcached,
 * through libmemcached (see cluster.h for the layout and the contract).
 * Opening and closing, the counters and the error text; the server list
 * and the auth file are in cluster_conf.c, get and put in cluster_io.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmemcached/memcached.h>
#include <libmemcachedutil-1.0/pool.h>

#include "cache/cluster_int.h"

#define DEFAULT_ITEM_MAX (1024u * 1024)
/* Room in an item for memcached's item header, the key and the CAS. */
#define ITEM_HEADROOM 1024u
#define MIN_CHUNK (64u * 1024)

#define CONNECT_TIMEOUT_MS 250
#define POLL_TIMEOUT_MS 500
#define FAILURE_LIMIT 1

/* ---- open and close --------------------------------------------------- */

static memcached_return_t
settings_cb(const memcached_instance_st *server, const char *key, size_t klen,
    const char *value, size_t vlen, void *ctx)
{
	size_t *min = ctx;
	char num[32];
	unsigned long long v;

	(void)server;
	if (klen == strlen("item_size_max") &&
	    memcmp(key, "item_size_max", klen) == 0 && vlen < sizeof(num)) {
		memcpy(num, value, vlen);
		num[vlen] = '\0';
		v = strtoull(num, NULL, 10);
		if (v > 0 && (*min == 0 || v < *min))
			*min = (size_t)v;
	}
	return MEMCACHED_SUCCESS;
}

static int
set_behaviors(memcached_st *m, char *err, size_t errlen)
{
	static const struct {
		memcached_behavior_t b;
		uint64_t v;
	} bs[] = {
	    {MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1},
	    {MEMCACHED_BEHAVIOR_DISTRIBUTION,
		MEMCACHED_DISTRIBUTION_CONSISTENT},
	    {MEMCACHED_BEHAVIOR_TCP_NODELAY, 1},
	    {MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, CONNECT_TIMEOUT_MS},
	    {MEMCACHED_BEHAVIOR_POLL_TIMEOUT, POLL_TIMEOUT_MS},
	    {MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS, 1},
	    {MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, FAILURE_LIMIT},
	    {MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, CLUSTER_RETRY_S},
	    {MEMCACHED_BEHAVIOR_DEAD_TIMEOUT, CLUSTER_RETRY_S},
	};
	memcached_return_t rc;
	size_t i;

	for (i = 0; i < sizeof(bs) / sizeof(bs[0]); i++) {
		rc = memcached_behavior_set(m, bs[i].b, bs[i].v);
		if (memcached_failed(rc)) {
			cluster_set_err(err, errlen, "libmemcached: %s: %s",
			    libmemcached_string_behavior(bs[i].b),
			    memcached_strerror(m, rc));
			return -EINVAL;
		}
	}
	return 0;
}

int
cluster_open(const char *servers, const char *auth_file, struct cluster **out,
    char *err, size_t errlen)
{
	struct cluster *c = NULL;
	struct server *sv = NULL;
	memcached_return_t rc;
	char user[256], pass[1024];
	size_t item_max = 0;
	int i, n, r;

	if ((sv = calloc(CLUSTER_MAX_SERVERS, sizeof(*sv))) == NULL) {
		r = -ENOMEM;
		cluster_set_err(err, errlen, "out of memory");
		goto out;
	}
	if ((r = cluster_parse_servers(servers, sv, &n, err, errlen)) != 0)
		goto out;
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		r = -ENOMEM;
		cluster_set_err(err, errlen, "out of memory");
		goto out;
	}
	pthread_mutex_init(&c->errlock, NULL);
	if ((c->master = memcached_create(NULL)) == NULL) {
		r = -ENOMEM;
		cluster_set_err(err, errlen, "libmemcached: out of memory");
		goto out;
	}
	if ((r = set_behaviors(c->master, err, errlen)) != 0)
		goto out;
	for (i = 0; i < n; i++) {
		rc = memcached_server_add(c->master, sv[i].host, sv[i].port);
		if (memcached_failed(rc)) {
			cluster_set_err(err, errlen, "%s:%u: %s", sv[i].host,
			    sv[i].port,
			    memcached_last_error_message(c->master));
			r = -EINVAL;
			goto out;
		}
	}
	if (auth_file != NULL) {
		if ((r = cluster_read_auth(auth_file, user, sizeof(user), pass,
			 sizeof(pass), err, errlen)) != 0)
			goto out;
		rc = memcached_set_sasl_auth_data(c->master, user, pass);
		explicit_bzero(pass, sizeof(pass));
		if (memcached_failed(rc)) {
			cluster_set_err(err, errlen, "SASL: %s",
			    memcached_strerror(c->master, rc));
			r = -ENOTSUP;
			goto out;
		}
	}

	/*
	 * The servers that answer say their item size; none answering is
	 * fine (they are misses until they come up).  The probe runs on the
	 * master, whose failure counts the pool's clones do not inherit.
	 */
	(void)memcached_stat_execute(
	    c->master, "settings", settings_cb, &item_max);
	if (item_max == 0)
		item_max = DEFAULT_ITEM_MAX;
	c->chunk = item_max > MIN_CHUNK + ITEM_HEADROOM
		       ? item_max - ITEM_HEADROOM
		       : MIN_CHUNK;

	c->pool = memcached_pool_create(c->master, 1, CLUSTER_POOL_MAX);
	if (c->pool == NULL) {
		r = -ENOMEM;
		cluster_set_err(
		    err, errlen, "libmemcached: cannot create the pool");
		goto out;
	}
	*out = c; /* transferred */
	c = NULL;
	r = 0;
out:
	cluster_close(c);
	free(sv);
	return r;
}

void
cluster_close(struct cluster *c)
{
	if (c == NULL)
		return;
	if (c->pool != NULL)
		memcached_pool_destroy(c->pool);
	if (c->master != NULL) {
		memcached_destroy_sasl_auth_data(c->master);
		memcached_free(c->master);
	}
	pthread_mutex_destroy(&c->errlock);
	free(c);
}

size_t
cluster_chunk_size(struct cluster *c)
{
	return c->chunk;
}
/* ---- stats and errors ------------------------------------------------- */

void
cluster_get_stats(struct cluster *c, struct cluster_stats *st)
{
	st->hits = atomic_load(&c->hits);
	st->misses = atomic_load(&c->misses);
	st->errors = atomic_load(&c->errors);
	st->bytes_in = atomic_load(&c->bytes_in);
	st->bytes_out = atomic_load(&c->bytes_out);
	st->puts = atomic_load(&c->puts);
	st->put_errors = atomic_load(&c->put_errors);
	st->skipped_large = atomic_load(&c->skipped_large);
	st->bad_checksum = atomic_load(&c->bad_checksum);
	st->missing_chunks = atomic_load(&c->missing_chunks);
}

bool
cluster_error_once(struct cluster *c, char *buf, size_t len)
{
	bool no = false;

	if (!atomic_load(&c->failed))
		return false;
	if (!atomic_compare_exchange_strong(&c->reported, &no, true))
		return false;
	if (len > 0) {
		pthread_mutex_lock(&c->errlock);
		snprintf(buf, len, "%s", c->first);
		pthread_mutex_unlock(&c->errlock);
	}
	return true;
}

uint64_t
cluster_last_error(struct cluster *c, char *buf, size_t len)
{
	if (len > 0) {
		pthread_mutex_lock(&c->errlock);
		snprintf(buf, len, "%s", c->errtext);
		pthread_mutex_unlock(&c->errlock);
	}
	return atomic_load(&c->errors) + atomic_load(&c->put_errors);
}
