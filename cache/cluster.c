/*
 * cluster.c - cache/ (the store), the cluster tier, its top: preprocessed
 * values in memcached, through libmemcached (see cluster.h for the layout
 * and the contract).  Opening (the secret's key id, the probe of every
 * server) and closing, the counters and the error text; the server list
 * and the auth and secret files are in cluster_conf.c, the items' bytes in
 * cluster_codec.c, get and put in cluster_io.c.  Calls cluster_conf.c and
 * cluster_codec.c; cluster_io.c is beside it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmemcached/memcached.h>
#include <libmemcachedutil-1.0/pool.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "cache/cluster_int.h"

#define POOL_WAIT_MS 1000
#define CONNECT_TIMEOUT_MS 250
#define POLL_TIMEOUT_MS 500
#define FAILURE_LIMIT 1

/* ---- open and close --------------------------------------------------- */

/*
 * The namespace of the items of the secret mac is keyed with (NS in
 * cluster_int.h): "ffc2:k" and the key id in hex, ":".  0, or -ENOMEM.
 */
static int
secret_ns(const EVP_MAC_CTX *mac, char ns[CLUSTER_NS_MAX])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t id[32];
	EVP_MAC_CTX *ctx;
	size_t outl = 0, n;
	int ok;

	if ((ctx = EVP_MAC_CTX_dup(mac)) == NULL)
		return -ENOMEM;
	ok = EVP_MAC_update(ctx, (const uint8_t *)CLUSTER_KEYID_LABEL,
		 strlen(CLUSTER_KEYID_LABEL)) &&
	     EVP_MAC_final(ctx, id, &outl, sizeof(id)) && outl == sizeof(id);
	EVP_MAC_CTX_free(ctx);
	if (!ok)
		return -ENOMEM;
	n = (size_t)snprintf(ns, CLUSTER_NS_MAX, "%sk", CLUSTER_KEY_PREFIX);
	for (size_t i = 0; i < CLUSTER_KEYID_LEN; i++) {
		ns[n++] = hex[id[i] >> 4];
		ns[n++] = hex[id[i] & 15];
	}
	ns[n++] = ':';
	ns[n] = '\0';
	return 0;
}

/*
 * The MAC's context, keyed with the secret of path: 0 and *out, or -errno
 * and why.  The secret's bytes are wiped.
 */
static int
open_mac(const char *path, EVP_MAC_CTX **out, char *err, size_t errlen)
{
	OSSL_PARAM params[2];
	EVP_MAC *mac = NULL;
	EVP_MAC_CTX *ctx = NULL;
	uint8_t secret[CLUSTER_SECRET_MAX];
	size_t len = 0;
	int r;

	if ((r = cluster_read_secret(path, secret, &len, err, errlen)) != 0)
		return r;
	params[0] = OSSL_PARAM_construct_utf8_string(
	    OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if ((mac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL ||
	    (ctx = EVP_MAC_CTX_new(mac)) == NULL ||
	    !EVP_MAC_init(ctx, secret, len, params)) {
		cluster_set_err(
		    err, errlen, "%s: OpenSSL's HMAC-SHA256 fails", path);
		EVP_MAC_CTX_free(ctx);
		r = -ENOTSUP;
	} else {
		*out = ctx; /* transferred */
		r = 0;
	}
	EVP_MAC_free(mac); /* the context keeps its own reference */
	explicit_bzero(secret, sizeof(secret));
	return r;
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

/* ---- the probe at open ------------------------------------------------ */

/* The key a probe deletes: nobody stores it. */
#define PROBE_KEY CLUSTER_KEY_PREFIX "probe"

/*
 * Ask server sv once, with the credentials user and pass (user NULL:
 * none): 0 it answered and took them, 1 it refused them (or wants some),
 * why said, -1 it did not answer (down: a miss later, said then).  A
 * delete of a key nobody stores: memcached -S refuses it without
 * authentication, where a get would only miss.
 */
static int
probe_one(const struct server *sv, const char *user, const char *pass,
    char *why, size_t len)
{
	memcached_st *m = memcached_create(NULL);
	memcached_return_t rc;
	int r = -1;

	if (m == NULL || set_behaviors(m, NULL, 0) != 0 ||
	    memcached_failed(memcached_server_add(m, sv->host, sv->port)) ||
	    (user != NULL &&
		memcached_failed(memcached_set_sasl_auth_data(m, user, pass))))
		goto out;
	rc = memcached_delete(m, PROBE_KEY, strlen(PROBE_KEY), 0);
	if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_NOTFOUND) {
		r = 0;
	} else if (rc == MEMCACHED_AUTH_FAILURE ||
		   rc == MEMCACHED_AUTH_PROBLEM ||
		   rc == MEMCACHED_AUTH_CONTINUE) {
		r = 1;
		if (user != NULL)
			snprintf(why, len,
			    "%s:%u refused cluster_auth's user %s (SASL "
			    "authentication failed)",
			    sv->host, sv->port, user);
		else
			snprintf(why, len,
			    "%s:%u wants SASL authentication (memcached -S), "
			    "and there is no cluster_auth",
			    sv->host, sv->port);
	} else if (user != NULL && (rc == MEMCACHED_UNKNOWN_READ_FAILURE ||
				       rc == MEMCACHED_PROTOCOL_ERROR ||
				       rc == MEMCACHED_NOT_SUPPORTED)) {
		r = 1;
		snprintf(why, len,
		    "%s:%u did not take SASL authentication (%s): a server "
		    "without -S, while cluster_auth is set",
		    sv->host, sv->port, memcached_strerror(m, rc));
	}
out:
	if (m != NULL) {
		if (user != NULL)
			memcached_destroy_sasl_auth_data(m);
		memcached_free(m);
	}
	return r;
}

/*
 * cluster_opts.probe: every server asked once (probe_one); c->problem
 * names those that refused, and c->off says that every one that answered
 * did.
 */
static void
probe_all(struct cluster *c, const struct server *sv, int n, const char *user,
    const char *pass)
{
	size_t used = 0;
	unsigned ok = 0;
	char why[512];

	for (int i = 0; i < n; i++) {
		int r = probe_one(&sv[i], user, pass, why, sizeof(why));

		if (r == 0)
			ok++;
		if (r != 1 || used >= sizeof(c->problem) - 1)
			continue;
		c->refused++;
		used += (size_t)snprintf(c->problem + used,
		    sizeof(c->problem) - used, "%s%s", used ? "; " : "", why);
	}
	if (c->refused == 0)
		return;
	c->off = ok == 0;
	if (used < sizeof(c->problem) - 1)
		snprintf(c->problem + used, sizeof(c->problem) - used, "%s",
		    c->off ? ": no server of the tier takes this node's "
			     "credentials, serving without the cluster tier"
			   : ": the values on it are misses, and puts to it "
			     "are dropped");
}

int
cluster_open(const char *servers, const struct cluster_opts *o,
    struct cluster **out, char *err, size_t errlen)
{
	static const struct cluster_opts none;
	struct cluster *c = NULL;
	struct server *sv = NULL;
	memcached_return_t rc;
	char user[256] = "", pass[1024] = "";
	unsigned pool;
	int i, n, r;

	if (o == NULL)
		o = &none;
	pool = o->pool ? o->pool : CLUSTER_POOL_DEFAULT;
	if (pool > CLUSTER_POOL_MAX ||
	    (o->chunk != 0 &&
		(o->chunk < CLUSTER_CHUNK_MIN || o->chunk > CLUSTER_CHUNK))) {
		cluster_set_err(err, errlen,
		    "pool of %u handles or chunks of %zu bytes: out of bounds",
		    pool, o->chunk);
		return -EINVAL;
	}
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
	/* Fixed, never read from a server: every client cuts alike. */
	c->chunk = o->chunk ? o->chunk : CLUSTER_CHUNK;
	c->pool_wait_ms = o->pool_wait_ms ? o->pool_wait_ms : POOL_WAIT_MS;
	snprintf(c->ns, sizeof(c->ns), "%s", CLUSTER_KEY_PREFIX);
	if (o->secret_file != NULL &&
	    (r = open_mac(o->secret_file, &c->mac, err, errlen)) != 0)
		goto out;
	if (c->mac != NULL && secret_ns(c->mac, c->ns) != 0) {
		r = -ENOMEM;
		cluster_set_err(err, errlen, "out of memory");
		goto out;
	}
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
	if (o->auth_file != NULL) {
		if ((r = cluster_read_auth(o->auth_file, user, sizeof(user),
			 pass, sizeof(pass), err, errlen)) != 0)
			goto out;
		rc = memcached_set_sasl_auth_data(c->master, user, pass);
		if (memcached_failed(rc)) {
			cluster_set_err(err, errlen, "SASL: %s",
			    memcached_strerror(c->master, rc));
			r = -ENOTSUP;
			goto out;
		}
	}
	/* Handles are cloned from the master as callers need them. */
	c->pool = memcached_pool_create(c->master, 1, pool);
	if (c->pool == NULL) {
		r = -ENOMEM;
		cluster_set_err(
		    err, errlen, "libmemcached: cannot create the pool");
		goto out;
	}
	if (o->probe)
		probe_all(c, sv, n, o->auth_file != NULL ? user : NULL, pass);
	*out = c; /* transferred */
	c = NULL;
	r = 0;
out:
	explicit_bzero(pass, sizeof(pass));
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
	EVP_MAC_CTX_free(c->mac);
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
	st->bad_mac = atomic_load(&c->bad_mac);
	st->pool_waits = atomic_load(&c->pool_waits);
	st->off = c->off;
	st->refused = c->refused;
}

const char *
cluster_problem(struct cluster *c)
{
	return c->problem[0] != '\0' ? c->problem : NULL;
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
