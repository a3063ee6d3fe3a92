/*
 * cred.c - layer: dataset/remote/ (the HTTP/S3 client; see cred.h): a set of
 * credentials, the chain of providers, and the cache in front of it.
 *
 * The cache keeps what the chain gave (one generation, counted up on each
 * read of the source) until CRED_REFRESH_MARGIN_S before it expires (or
 * half its life, when that is shorter); a request refused with it asks
 * for one re-read (cred_src_denied), at most once a CRED_REREAD_MIN_MS
 * (the first refusal's at once, however fresh what it refused);
 * a read that fails keeps what there is and is tried again after
 * CRED_RETRY_MS.  It never names a provider: a new source is a new
 * provider in cred_chain.c.
 *
 * Locks: s->read (one read of the source at a time) before s->lock (the
 * fields); a reader of the fields never waits for a read of the source
 * unless it must (there are none, or they were refused or expired).
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset/remote/cred.h"
#include "util/clock.h"
#include "util/log.h"

struct cred *
cred_new(const char *key_id, size_t kl, const char *secret, size_t sl,
    const char *token, size_t tl, time_t expires, const char *source)
{
	size_t n = sizeof(struct cred) + kl + sl + (token ? tl : 0) + 3;
	struct cred *c = cred_alloc(n);
	char *p;

	if (c == NULL)
		return NULL;
	memset(c, 0, sizeof(*c));
	atomic_init(&c->refs, 1);
	p = (char *)(c + 1);
	c->key_id = p;
	memcpy(p, key_id, kl);
	p[kl] = '\0';
	p += kl + 1;
	c->secret = p;
	memcpy(p, secret, sl);
	p[sl] = '\0';
	p += sl + 1;
	if (token != NULL) {
		c->token = p;
		memcpy(p, token, tl);
		p[tl] = '\0';
	}
	c->expires = expires;
	snprintf(c->source, sizeof(c->source), "%s", source);
	return c;
}

struct cred *
cred_ref(struct cred *c)
{
	atomic_fetch_add(&c->refs, 1);
	return c;
}

void
cred_unref(struct cred *c)
{
	if (c != NULL && atomic_fetch_sub(&c->refs, 1) == 1)
		cred_free(c); /* zeroed */
}

void
cred_provider_free(struct cred_provider *p)
{
	if (p != NULL)
		p->ops->free(p);
}

/* ---- the chain ---- */

struct chain {
	struct cred_provider base;
	size_t n;
	struct cred_provider *v[];
};

static int
chain_get(struct cred_provider *p, struct cred **out, char *err, size_t errlen)
{
	struct chain *ch = (struct chain *)p;
	size_t o;
	int r = -ENOENT;

	o = (size_t)snprintf(err, errlen, "no S3 credentials:");
	for (size_t i = 0; i < ch->n; i++) {
		char why[512];

		why[0] = '\0';
		r = cred_provider_get(ch->v[i], out, why, sizeof(why));
		if (r == 0)
			return 0;
		if (r != -ENOENT) {
			snprintf(err, errlen, "%s", why);
			return r;
		}
		if (o < errlen)
			o += (size_t)snprintf(
			    err + o, errlen - o, "%s %s", i ? ";" : "", why);
	}
	return r;
}

static void
chain_free(struct cred_provider *p)
{
	struct chain *ch = (struct chain *)p;

	for (size_t i = 0; i < ch->n; i++)
		cred_provider_free(ch->v[i]);
	free(ch);
}

static const struct cred_provider_ops chain_ops = {chain_get, chain_free};

struct cred_provider *
cred_chain_new(struct cred_provider **v, size_t n)
{
	struct chain *ch = malloc(sizeof(*ch) + n * sizeof(*v));
	bool ok = ch != NULL;

	for (size_t i = 0; i < n; i++)
		ok &= v[i] != NULL;
	if (!ok) {
		for (size_t i = 0; i < n; i++)
			cred_provider_free(v[i]);
		free(ch);
		return NULL;
	}
	ch->base.ops = &chain_ops;
	ch->n = n;
	memcpy(ch->v, v, n * sizeof(*v));
	return &ch->base;
}

/* ---- the cache ---- */

struct cred_src {
	struct cred_provider *chain;
	pthread_mutex_t read; /* one read of the source at a time */
	pthread_mutex_t lock; /* what follows */
	struct cred *cur;
	uint64_t gen;	     /* of cur: 1, 2, ... */
	uint64_t denied_ms;  /* the last read a refusal asked for */
	time_t refresh_at;   /* wall clock: read again from then on */
	bool stale;	     /* refused: read again */
	uint64_t retry_ms;   /* a failed read: not again before */
	uint64_t logged_gen; /* the last generation said refused */
	char why[512];	     /* why the last read failed, "" if it did not */
};

/* When credentials read at now that expire at exp are read again. */
static time_t
refresh_time(time_t now, time_t exp)
{
	time_t life = exp - now, m = CRED_REFRESH_MARGIN_S;

	if (exp == 0)
		return 0;
	if (life / 2 < m)
		m = life > 0 ? life / 2 : 0;
	return exp - m;
}

/* Whether the source is to be read now.  Locked. */
static bool
due_locked(struct cred_src *s, bool must_only)
{
	time_t now = time(NULL);
	bool must = s->cur == NULL || s->stale ||
		    (s->cur->expires != 0 && now >= s->cur->expires);

	if (ff_mono_ms() < s->retry_ms)
		return false;
	if (must)
		return true;
	return !must_only && s->refresh_at != 0 && now >= s->refresh_at;
}

/* Read the source (s->read held).  0, or its error with why set. */
static int
read_source(struct cred_src *s, char *err, size_t errlen)
{
	struct cred *c = NULL, *old;
	char why[512];
	int r;

	why[0] = '\0';
	r = cred_provider_get(s->chain, &c, why, sizeof(why));
	pthread_mutex_lock(&s->lock);
	if (r != 0) {
		bool first = s->why[0] == '\0';

		snprintf(s->why, sizeof(s->why), "%s", why);
		s->retry_ms = ff_mono_ms() + CRED_RETRY_MS;
		s->stale = false; /* said; the next refusal asks again */
		pthread_mutex_unlock(&s->lock);
		if (err != NULL)
			snprintf(err, errlen, "%s", why);
		if (first && s->cur != NULL)
			log_warn("S3 credentials cannot be read again (%s): "
				 "the ones read before are used while they "
				 "are accepted",
			    why);
		return r;
	}
	old = s->cur;
	s->cur = c; /* transferred */
	s->gen++;
	s->refresh_at = refresh_time(time(NULL), c->expires);
	s->stale = false;
	s->retry_ms = 0;
	if (s->why[0] != '\0')
		log_info("S3 credentials read again from %s", c->source);
	s->why[0] = '\0';
	pthread_mutex_unlock(&s->lock);
	cred_unref(old);
	if (c->expires != 0)
		log_debug("S3 credentials from %s, valid for %lld s", c->source,
		    (long long)(c->expires - time(NULL)));
	return 0;
}

int
cred_src_new(struct cred_provider *chain, struct cred_src **out, char *err,
    size_t errlen)
{
	struct cred_src *s;
	int r;

	if (chain == NULL || (s = calloc(1, sizeof(*s))) == NULL) {
		cred_provider_free(chain);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	s->chain = chain;
	pthread_mutex_init(&s->read, NULL);
	pthread_mutex_init(&s->lock, NULL);
	if ((r = read_source(s, err, errlen)) != 0) {
		cred_src_free(s);
		return r;
	}
	log_info("S3 credentials from %s", s->cur->source);
	*out = s;
	return 0;
}

void
cred_src_free(struct cred_src *s)
{
	if (s == NULL)
		return;
	cred_unref(s->cur);
	cred_provider_free(s->chain);
	pthread_mutex_destroy(&s->read);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

bool
cred_src_due(struct cred_src *s)
{
	bool d;

	pthread_mutex_lock(&s->lock);
	d = due_locked(s, false);
	pthread_mutex_unlock(&s->lock);
	return d;
}

/* Read the source if it is due (must_only: only if it must be). */
static void
refresh(struct cred_src *s, bool must_only)
{
	bool d;

	if (must_only) {
		pthread_mutex_lock(&s->read);
	} else if (pthread_mutex_trylock(&s->read) != 0)
		return; /* another thread reads it; the old ones still do */
	pthread_mutex_lock(&s->lock);
	d = due_locked(s, must_only);
	pthread_mutex_unlock(&s->lock);
	if (d)
		read_source(s, NULL, 0);
	pthread_mutex_unlock(&s->read);
}

void
cred_src_refresh(struct cred_src *s)
{
	refresh(s, false);
}

int
cred_src_get(struct cred_src *s, struct cred **out, uint64_t *gen)
{
	bool must;

	pthread_mutex_lock(&s->lock);
	must = due_locked(s, true);
	pthread_mutex_unlock(&s->lock);
	if (must)
		refresh(s, true);
	pthread_mutex_lock(&s->lock);
	*out = s->cur ? cred_ref(s->cur) : NULL;
	*gen = s->gen;
	pthread_mutex_unlock(&s->lock);
	return *out ? 0 : -ENOMEM;
}

bool
cred_src_denied(struct cred_src *s, uint64_t gen)
{
	bool retry;

	pthread_mutex_lock(&s->lock);
	if (gen != s->gen || s->stale)
		retry = true; /* read again since, or about to be */
	else if ((s->denied_ms != 0 &&
		     ff_mono_ms() - s->denied_ms < CRED_REREAD_MIN_MS) ||
		 ff_mono_ms() < s->retry_ms)
		retry = false; /* a refusal just had its read: not again */
	else {
		retry = s->stale = true;
		s->denied_ms = ff_mono_ms();
	}
	pthread_mutex_unlock(&s->lock);
	return retry;
}

bool
cred_src_describe(struct cred_src *s, uint64_t gen, char *buf, size_t len)
{
	bool first;

	pthread_mutex_lock(&s->lock);
	snprintf(buf, len, "%s%s%s", s->cur ? s->cur->source : "none",
	    s->why[0] ? "; reading them again failed: " : "", s->why);
	first = gen > s->logged_gen;
	if (first)
		s->logged_gen = gen;
	pthread_mutex_unlock(&s->lock);
	return first;
}

/* The payload of a GET or a HEAD: the SHA-256 of nothing. */
#define EMPTY_SHA256                                                           \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

int
cred_src_sign_s3(struct cred_src *s, const char *region, const char *method,
    const char *url, struct curl_slist **hdrs, uint64_t *gen)
{
	static const char *const sh[] = {"x-amz-content-sha256:" EMPTY_SHA256};
	struct cred_sig q = {method, url, region, "s3", EMPTY_SHA256, sh, 1, 0};
	struct curl_slist *l;
	struct cred *c;
	int r;

	if ((r = cred_src_get(s, &c, gen)) != 0)
		return r;
	q.now = time(NULL);
	l = curl_slist_append(*hdrs, "x-amz-content-sha256: " EMPTY_SHA256);
	if (l == NULL) {
		cred_unref(c);
		return -ENOMEM;
	}
	*hdrs = l;
	r = cred_sign(c, &q, hdrs);
	cred_unref(c);
	return r;
}
