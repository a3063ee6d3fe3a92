/*
 * ds_remote.c - remote tar shards, the dataset's side.  Layer: dataset/
 * (called by ds_tar.c; calls dataset/remote/, ds_tar_index.c and
 * ds_tar_walk.c; the remote reader is closed by ds_free through
 * remote_close, so nothing below calls back up here).
 *
 * A remote shard is probed (dataset/remote/remote_probe.c: its size and
 * its version, and that the server answers ranges), its index had from
 * the kept index (keyed by its display name, remote_url_display: an s3
 * key whole, and its version), else from the caller's (the cluster
 * tier), else walked from one stream of its bytes
 * (dataset/remote/remote_stream.c) that feeds the tar walk as it comes;
 * its members are then read by range (dataset/remote/remote_read.c).
 *
 * The pass (issue 38) runs over many shards at once, a thread a stream
 * (joined before it returns: a mount has no thread at this time, and
 * must have none when it forks).  As a stream passes an image member,
 * the walk takes its bytes (member_seen): their SHA-256, the cache
 * key's input, goes into the index, and the bytes to the caller's
 * member hook (the one pass: engine/prefill.c fills the cache with them).
 * A shard that cannot be indexed after the retries fails its samples,
 * not the mount.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/evp.h>

#include "dataset/ds_remote.h"
#include "dataset/ds_tar_int.h"
#include "dataset/remote/remote_int.h"
#include "util/log.h"

/*
 * The stat a remote shard's kept index is keyed by (ds_shard_same): its
 * size, and a SHA-256 of its version (remote_version_text) in the fields
 * a local shard's inode and times take.  0 or -ENOMEM.
 */
static int
synth_stat(const struct remote_version *v, struct stat *st)
{
	char *text = remote_version_text(v);
	uint8_t h[32];
	unsigned int hl = sizeof(h);
	uint64_t a = 0, b = 0;

	if (text == NULL)
		return -ENOMEM;
	if (EVP_Digest(text, strlen(text), h, &hl, EVP_sha256(), NULL) != 1) {
		free(text);
		return -ENOMEM;
	}
	free(text);
	for (int i = 0; i < 8; i++) {
		a = a << 8 | h[i];
		b = b << 8 | h[8 + i];
	}
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFREG | 0444;
	st->st_size = (off_t)v->size;
	st->st_ino = (ino_t)a;
	st->st_dev = (dev_t)0xfeed5;
	st->st_mtim.tv_sec = 1;
	st->st_mtim.tv_nsec = (long)(b % 1000000000u);
	st->st_ctim.tv_sec = 1;
	st->st_ctim.tv_nsec = (long)((b >> 32) % 1000000000u);
	st->st_nlink = 1;
	return 0;
}

/* A shard to walk: its stream, and what sees its members. */
struct scan_arg {
	struct remote_ctx *c;
	const struct remote_obj *o;
	const struct ds_remote_hooks *h; /* may be NULL */
	struct remote_stream *s;
};

static int
scan_pread(void *arg, void *buf, size_t n, uint64_t off)
{
	return remote_stream_pread(((struct scan_arg *)arg)->s, buf, n, off);
}

/*
 * An image member the walk recorded (ix->m[i]): its bytes, read on from
 * the stream, give its digest and its first bytes, and go to the hooks'
 * member.  Members over DS_DIGEST_MAX are left for range reads.  0, or
 * -EIO (the stream failed: the walk stops there).
 */
static int
member_seen(void *arg, struct tar_index *ix, size_t i)
{
	const struct scan_arg *a = arg;
	struct tar_member *m = &ix->m[i];
	unsigned int dl = 32;
	const char *ext;
	uint8_t *buf;
	size_t kl;

	if ((ext = ds_tar_member_ext(m->name, &kl)) == NULL ||
	    !ds_tar_is_image_ext(ext) || m->size > DS_DIGEST_MAX)
		return 0;
	if ((buf = malloc(m->size ? (size_t)m->size : 1)) == NULL)
		return 0; /* no digest: read by range later */
	if (remote_stream_pread(a->s, buf, (size_t)m->size, m->off) != 0) {
		free(buf);
		return -EIO;
	}
	if (EVP_Digest(buf, (size_t)m->size, m->digest, &dl, EVP_sha256(),
		NULL) != 1) {
		free(buf);
		return 0;
	}
	m->hlen = (uint8_t)(m->size < TAR_HEAD_MAX ? m->size : TAR_HEAD_MAX);
	memcpy(m->head, buf, m->hlen);
	m->has_digest = true;
	if (a->h != NULL && a->h->member != NULL)
		a->h->member(a->h->arg, buf, (size_t)m->size, m->digest);
	else
		free(buf);
	return 0;
}

/* Walk the shard of a into ix, from one stream. */
static int
stream_scan(struct scan_arg *a, struct tar_index *ix, char *err, size_t errlen)
{
	struct tar_rd rd = {scan_pread, a, member_seen};
	int r;

	if ((r = remote_stream_open(a->c, a->o, &a->s)) != 0) {
		snprintf(err, errlen, "shard %s: %s", a->o->name, strerror(-r));
		return r;
	}
	r = ds_tar_scan_rd(&rd, a->o->v.size, ix);
	if (r == 0 && ix->status == TS_READ) {
		/* The walk met a read error: the shard cannot be indexed. */
		ds_tar_index_free(ix);
		snprintf(err, errlen, "shard %s", remote_stream_error(a->s));
		r = -EIO;
	} else if (r != 0)
		snprintf(err, errlen, "shard %s: %s", a->o->name, strerror(-r));
	remote_stream_close(a->s);
	a->s = NULL;
	return r;
}

int
ds_remote_ctx(const struct remote_opts *o, const char *const *urls, size_t n,
    struct remote_ctx **out, char *err, size_t errlen)
{
	struct remote_ctx *c;
	bool s3 = false;
	static bool inited;
	int r;

	if (!inited) {
		/* Before any thread: the mount opens datasets first. */
		if (cred_curl_global_init() != 0) {
			snprintf(err, errlen, "libcurl cannot start");
			return -EIO;
		}
		inited = true;
	}
	for (size_t i = 0; i < n; i++)
		s3 |= strncmp(urls[i], "s3://", 5) == 0;
	if ((r = remote_ctx_new(o, s3, &c, err, errlen)) != 0)
		return r;
	/* S3: the credentials' chain, asked once now (cred.h). */
	if (s3 && (r = cred_attach(c, o, err, errlen)) != 0) {
		remote_ctx_free(c);
		return r;
	}
	*out = c;
	return 0;
}

int
ds_remote_prepare(struct remote_ctx *c, char *const *specs, size_t n,
    struct remote_obj *objs, char *err, size_t errlen)
{
	char why[512];

	for (size_t i = 0; i < n; i++) {
		struct remote_obj *o = &objs[i];

		if ((o->name = remote_url_display(specs[i])) == NULL)
			return -ENOMEM;
		if ((o->url = remote_request_url(
			 c, specs[i], why, sizeof(why))) == NULL) {
			snprintf(err, errlen, "shard %s: %s", o->name, why);
			return -EINVAL;
		}
	}
	remote_probe_all(c, objs, n);
	return 0;
}

/* ---- the pass ---------------------------------------------------------- */

/* The pass over a dataset's shards, shared by its threads. */
struct pass {
	struct dataset *ds;
	const struct ds_remote_hooks *h; /* may be NULL */
	int index_fd;
	ds_shard_add_fn add;
	void *add_arg;
	pthread_mutex_t lock; /* what follows, and ds->pass */
	pthread_cond_t done;  /* a shard done, or a thread gone */
	size_t next;	      /* the next shard to take */
	unsigned running;     /* threads still at work */
	uint64_t t0, bytes0;
	int fatal; /* the first failure that stops the pass */
	char err[1024];
	char first_fail[640]; /* the first failed shard's why */
	bool tier_said;	      /* a tier's index refused: logged */
};

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* How a shard's index was had. */
enum how { H_KEPT, H_TIER, H_STREAM, H_FAILED };

/*
 * The index of the shard in the tier (the hooks' index_get), checked as
 * a kept one is: 0, else a miss (a refused one said once).
 */
static int
tier_index(struct pass *p, const struct remote_obj *o, const struct stat *st,
    struct tar_index *ix)
{
	char *vt = remote_version_text(&o->v);
	uint8_t *d = NULL;
	size_t len = 0;
	int r;

	if (vt == NULL)
		return -ENOMEM;
	r = p->h->index_get(p->h->tier, o->name, vt, &d, &len);
	free(vt);
	if (r != 0)
		return -ENOENT;
	r = ds_tar_index_parse(d, len, o->name, st, ix);
	free(d);
	if (r == 0 && ix->status == TS_READ) {
		ds_tar_index_free(ix); /* never kept: not taken either */
		r = -EINVAL;
	}
	if (r != 0 && r != -ENOMEM) {
		if (p->h->refused != NULL)
			atomic_fetch_add(p->h->refused, 1);
		pthread_mutex_lock(&p->lock);
		if (!p->tier_said) {
			p->tier_said = true;
			log_warn("shard %s: the cluster tier's index of it is "
				 "%s: refused, the shard is streamed (said "
				 "once; counted in "
				 "feedfs_index_refused_total)",
			    o->name,
			    r == -ESTALE ? "another shard's or version's"
					 : "damaged");
		}
		pthread_mutex_unlock(&p->lock);
	}
	return r;
}

/* Put a streamed index in the tier (the hooks' index_put). */
static void
tier_keep(struct pass *p, const struct remote_obj *o, const struct stat *st,
    const struct tar_index *ix)
{
	char *vt;
	uint8_t *d;
	size_t len;

	if (ix->status == TS_READ || (vt = remote_version_text(&o->v)) == NULL)
		return;
	if (ds_tar_index_encode(ix, o->name, st, &d, &len) == 0) {
		p->h->index_put(p->h->tier, o->name, vt, d, len);
		free(d);
	}
	free(vt);
}

/*
 * Shard i's index into ix, as struct ds_remote_hooks says: *how says how,
 * H_FAILED with why in err for a shard whose samples fail.  0, or a
 * failure of the pass (-errno with err).
 */
static int
shard_index(struct pass *p, size_t i, struct tar_index *ix, enum how *how,
    char *err, size_t errlen)
{
	struct remote_ctx *c = p->ds->remote;
	struct remote_obj *o = &p->ds->robjs[i];
	struct stat *st = &p->ds->shards[i].st;
	struct scan_arg a = {c, o, p->h, NULL};
	char why[512];
	int r;

	if (!o->probed && (r = remote_probe(c, o, why, sizeof(why))) != 0) {
		snprintf(err, errlen, "shard %s", why);
		if (r != -EHOSTDOWN)
			return r; /* a refusal, not an outage: a mistake */
		*how = H_FAILED;
		return 0;
	}
	if ((r = synth_stat(&o->v, st)) != 0) {
		snprintf(err, errlen, "%s", strerror(-r));
		return r;
	}
	*how = H_KEPT;
	if (ds_tar_index_load(p->index_fd, o->name, st, ix) == 0)
		return 0;
	*how = H_TIER;
	if (p->h != NULL && p->h->index_get != NULL &&
	    tier_index(p, o, st, ix) == 0) {
		ds_tar_index_keep(p->index_fd, o->name, st, ix);
		return 0;
	}
	if (p->h != NULL && p->h->defer) {
		snprintf(err, errlen, "shard %s: to be streamed", o->name);
		return -EAGAIN;
	}
	*how = H_STREAM;
	if ((r = stream_scan(&a, ix, err, errlen)) != 0) {
		if (r == -ENOMEM)
			return r;
		*how = H_FAILED; /* after its retries: its samples fail */
		return 0;
	}
	ds_tar_index_keep(p->index_fd, o->name, st, ix);
	if (p->h != NULL && p->h->index_put != NULL)
		tier_keep(p, o, st, ix);
	return 0;
}

/* Shard i done (its index ix, or its failure: how): added.  Locked. */
static int
shard_done(struct pass *p, size_t i, struct tar_index *ix, enum how how,
    const char *why)
{
	struct ds_pass *st = &p->ds->pass;
	int r;

	switch (how) {
	case H_KEPT:
		st->kept++;
		break;
	case H_TIER:
		st->tier++;
		break;
	case H_STREAM:
		st->streamed++;
		break;
	case H_FAILED:
		st->failed++;
		if (p->first_fail[0] == '\0')
			snprintf(
			    p->first_fail, sizeof(p->first_fail), "%s", why);
		break;
	}
	if (how != H_STREAM && how != H_FAILED &&
	    st->stream_bytes >= p->ds->robjs[i].v.size)
		st->stream_bytes -= p->ds->robjs[i].v.size; /* not streamed */
	st->done++;
	r = p->add(p->add_arg, i, how == H_FAILED ? NULL : ix, why);
	if (how != H_FAILED)
		ds_tar_index_free(ix);
	pthread_cond_broadcast(&p->done);
	return r;
}

/* A thread of the pass: shards taken in turn until none is left. */
static void *
pass_thread(void *arg)
{
	struct pass *p = arg;

	pthread_mutex_lock(&p->lock);
	while (p->fatal == 0 && p->next < p->ds->nshards) {
		size_t i = p->next++;
		struct tar_index ix;
		enum how how = H_FAILED;
		char why[640] = "";
		int r;

		pthread_mutex_unlock(&p->lock);
		memset(&ix, 0, sizeof(ix));
		r = shard_index(p, i, &ix, &how, why, sizeof(why));
		pthread_mutex_lock(&p->lock);
		if (r == 0)
			r = shard_done(p, i, &ix, how, why);
		else if (how != H_FAILED)
			ds_tar_index_free(&ix);
		if (r != 0 && p->fatal == 0) {
			p->fatal = r;
			snprintf(p->err, sizeof(p->err), "%s",
			    r == -ENOMEM ? strerror(ENOMEM) : why);
		}
	}
	p->running--;
	pthread_cond_broadcast(&p->done);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* The pass's counters now, to the hooks' progress.  Locked. */
static void
pass_progress(struct pass *p)
{
	struct ds_pass *st = &p->ds->pass;

	st->ms = mono_ms() - p->t0;
	st->streamed_bytes =
	    atomic_load(&p->ds->remote->st.index_bytes) - p->bytes0;
	if (p->h != NULL && p->h->progress != NULL)
		p->h->progress(p->h->arg, st);
}

int
ds_remote_pass(struct dataset *ds, const struct ds_remote_hooks *hooks,
    int index_fd, ds_shard_add_fn add, void *arg, char *err, size_t errlen)
{
	struct pass p = {.ds = ds,
	    .h = hooks,
	    .index_fd = index_fd,
	    .add = add,
	    .add_arg = arg};
	unsigned n = hooks != NULL && hooks->streams > 1 ? hooks->streams : 1;
	pthread_t *th;
	unsigned started = 0;

	if (n > ds->nshards)
		n = (unsigned)ds->nshards;
	memset(&ds->pass, 0, sizeof(ds->pass));
	ds->pass.shards = ds->nshards;
	for (size_t i = 0; i < ds->nshards; i++)
		ds->pass.stream_bytes += ds->robjs[i].v.size;
	if ((th = calloc(n ? n : 1, sizeof(*th))) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	pthread_mutex_init(&p.lock, NULL);
	pthread_cond_init(&p.done, NULL);
	p.t0 = mono_ms();
	p.bytes0 = atomic_load(&ds->remote->st.index_bytes);
	p.running = n;
	for (unsigned k = 0; k < n; k++) {
		if (pthread_create(&th[k], NULL, pass_thread, &p) != 0)
			break;
		started++;
	}
	pthread_mutex_lock(&p.lock);
	p.running -= n - started;
	if (started == 0) {
		/* No thread to be had: this one does it all. */
		p.running++;
		pthread_mutex_unlock(&p.lock);
		pass_thread(&p);
		pthread_mutex_lock(&p.lock);
	}
	while (p.running > 0) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&p.done, &p.lock, &ts);
		pass_progress(&p);
	}
	pass_progress(&p);
	pthread_mutex_unlock(&p.lock);
	for (unsigned k = 0; k < started; k++)
		pthread_join(th[k], NULL);
	free(th);
	pthread_cond_destroy(&p.done);
	pthread_mutex_destroy(&p.lock);
	if (p.fatal != 0) {
		snprintf(err, errlen, "%s", p.err);
		return p.fatal;
	}
	if (ds->pass.failed == ds->nshards) {
		/* Nothing to serve: say why, as a mount always did. */
		snprintf(err, errlen, "%s", p.first_fail);
		return -EIO;
	}
	return 0;
}
