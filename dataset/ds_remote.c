/*
 * ds_remote.c - layer: dataset index, remote shards: the dataset's side
 * (called by ds_tar.c; calls remote_*.c and ds_tar_index.c).  A remote
 * shard is found by a HEAD, else a GET of its first byte (its size and
 * ETag: what its kept index is keyed by, with its URL), indexed from one
 * streaming GET that feeds the tar walk as it comes (never more than the walk's
 * window of it held), and its members read by range (remote_fetch.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset/ds_remote.h"
#include "dataset/ds_tar_int.h"
#include "dataset/remote/remote_int.h"

/* The stream's buffer: what the walk asks for and this much more. */
#define STREAM_SLACK (1u << 20)

/* The stat a remote shard's kept index is keyed by: its size and ETag. */
static void
synth_stat(uint64_t size, const char *etag, struct stat *st)
{
	uint64_t h = 1469598103934665603ull;

	for (const char *p = etag; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFREG | 0444;
	st->st_size = (off_t)size;
	st->st_ino = (ino_t)h;
	st->st_dev = (dev_t)0xfeed5;
	st->st_mtim.tv_sec = 1;
	st->st_ctim.tv_sec = 1;
	st->st_ctim.tv_nsec = (long)((h >> 32) % 1000000000u);
	st->st_nlink = 1;
}

/* One streaming GET of a shard, read forward by the tar walk. */
struct stream {
	struct remote_ctx *c;
	const struct remote_obj *o;
	CURLM *m;
	CURL *e;
	struct remote_xfer x;
	bool started, over, paused;
	CURLcode cc;
	unsigned tries;
	uint64_t seed;
	uint8_t *buf;
	size_t len, cap;
	uint64_t base; /* buf holds [base, base + len) */
	uint64_t pos;  /* of the next byte from the wire */
	uint64_t keep; /* bytes before this are dropped as they come */
	char err[512];
};

static size_t
sink(void *arg, const char *p, size_t n)
{
	struct stream *s = arg;
	uint64_t at = s->pos;
	size_t k = n;

	if (s->pos + n > s->o->size)
		return 0; /* more than the object: refused */
	if (at < s->keep) {
		uint64_t d = s->keep - at;

		if (d >= k) {
			s->pos += n;
			atomic_fetch_add(&s->c->st.index_bytes, n);
			return n;
		}
		p += d;
		k -= (size_t)d;
		at = s->keep;
	}
	if (s->len == 0)
		s->base = at;
	if (s->len + k > s->cap) {
		s->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	memcpy(s->buf + s->len, p, k);
	s->len += k;
	s->pos += n;
	atomic_fetch_add(&s->c->st.index_bytes, n);
	return n;
}

/* (Re)start the GET from s->pos. */
static int
stream_start(struct stream *s)
{
	char range[64];

	if (s->started) {
		curl_multi_remove_handle(s->m, s->e);
		remote_xfer_done(&s->x);
	}
	s->x.sink = sink;
	s->x.sink_arg = s;
	snprintf(range, sizeof(range), "%" PRIu64 "-", s->pos);
	if (remote_easy_setup(s->c, s->e, s->o->url, s->o->etag,
		s->pos ? range : NULL, false, 0, &s->x) != 0)
		return -ENOMEM;
	s->started = true;
	s->over = false;
	s->paused = false;
	curl_multi_add_handle(s->m, s->e);
	atomic_fetch_add(&s->c->st.requests, 1);
	return 0;
}

/* The transfer ended short of the object: retry from where it stopped,
 * or say why not.  0: started again. */
static int
stream_failed(struct stream *s)
{
	const struct remote_resp *r = &s->x.resp;
	bool ok_status = r->status == (s->pos ? 206 : 200);

	if (s->cc == CURLE_OK && r->status == 412) {
		snprintf(s->err, sizeof(s->err),
		    "%s: the object changed while it was indexed", s->o->name);
		return -EIO;
	}
	if (s->tries < s->c->retries && (remote_retryable(s->cc, r->status) ||
					    (s->cc == CURLE_OK && ok_status))) {
		s->tries++;
		atomic_fetch_add(&s->c->st.retries, 1);
		usleep(
		    (useconds_t)remote_backoff_ms(s->tries, &s->seed) * 1000u);
		return stream_start(s);
	}
	if (s->cc != CURLE_OK)
		snprintf(s->err, sizeof(s->err), "%s: %s", s->o->name,
		    curl_easy_strerror(s->cc));
	else if (!ok_status)
		snprintf(s->err, sizeof(s->err), "%s: HTTP status %ld",
		    s->o->name, r->status);
	else
		snprintf(s->err, sizeof(s->err),
		    "%s: the body ended after %" PRIu64 " of %" PRIu64 " bytes",
		    s->o->name, s->pos, s->o->size);
	return -EIO;
}

static int
stream_pread(void *arg, void *out, size_t n, uint64_t off)
{
	struct stream *s = arg;

	if (n == 0)
		return 0;
	if (off + n > s->o->size || off + n < off)
		return -EIO;
	/* Drop what lies before off: the walk never goes back past it. */
	if (s->len > 0) {
		uint64_t d;

		if (off < s->base)
			return -EIO; /* the walk reads forward only */
		d = off - s->base;
		if (d >= s->len)
			s->len = 0;
		else if (d > 0) {
			memmove(s->buf, s->buf + d, s->len - (size_t)d);
			s->len -= (size_t)d;
			s->base = off;
		}
	}
	if (s->keep < off)
		s->keep = off;
	if (n + STREAM_SLACK > s->cap) {
		uint8_t *nb = realloc(s->buf, n + STREAM_SLACK);

		if (nb == NULL)
			return -ENOMEM;
		s->buf = nb;
		s->cap = n + STREAM_SLACK;
	}
	while (!(s->len > 0 && s->base + s->len >= off + n)) {
		int running = 0, left;
		CURLMsg *msg;

		if (s->len == 0 && s->pos > off)
			return -EIO;
		if (s->over) {
			if (stream_failed(s) != 0)
				return -EIO;
			continue;
		}
		if (s->paused) {
			s->paused = false;
			curl_easy_pause(s->e, CURLPAUSE_CONT);
		}
		curl_multi_perform(s->m, &running);
		while ((msg = curl_multi_info_read(s->m, &left)) != NULL)
			if (msg->msg == CURLMSG_DONE) {
				s->over = true;
				s->cc = msg->data.result;
			}
		if (!s->over && !s->paused &&
		    !(s->len > 0 && s->base + s->len >= off + n))
			curl_multi_poll(s->m, NULL, 0, 1000, NULL);
	}
	memcpy(out, s->buf + (off - s->base), n);
	return 0;
}

/* Walk the shard of arg (a stream) into ix. */
static int
stream_scan(void *arg, struct tar_index *ix, char *err, size_t errlen)
{
	struct stream *s = arg;
	struct tar_rd rd = {stream_pread, s};
	int r;

	s->seed = (uint64_t)getpid() ^ remote_now_ms();
	if ((s->m = curl_multi_init()) == NULL)
		return -ENOMEM;
	if ((r = stream_start(s)) != 0)
		goto out;
	r = ds_tar_scan_rd(&rd, s->o->size, ix);
	if (r == 0 && ix->status == TS_READ) {
		/* The walk met a read error: the shard cannot be indexed. */
		ds_tar_index_free(ix);
		snprintf(err, errlen, "shard %s",
		    s->err[0] ? s->err : "cannot be read");
		r = -EIO;
	} else if (r != 0)
		snprintf(err, errlen, "shard %s: %s", s->o->name, strerror(-r));
out:
	if (s->started) {
		curl_multi_remove_handle(s->m, s->e);
		remote_xfer_done(&s->x);
	}
	curl_multi_cleanup(s->m);
	free(s->buf);
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

/* The HEADs of the objects, this many in flight at once. */
#define PROBE_PARALLEL 32

/* One HEAD of ds_remote_prepare in flight. */
struct probe {
	CURL *e;
	struct remote_xfer x;
	struct remote_obj *o;
};

/*
 * The HEADs of objs[0..n), PROBE_PARALLEL at once over one multi handle
 * (no thread: the mount has none yet): each answered with a length sets
 * its object's size, etag and probed; the others are asked again, one by
 * one, by ds_remote_shard (remote_head: retries, a GET where a HEAD says
 * nothing).  A remount of many shards costs a few round trips, not one
 * per shard.
 */
static void
probe_all(struct remote_ctx *c, struct remote_obj *objs, size_t n)
{
	struct probe pv[PROBE_PARALLEL];
	CURLM *m = curl_multi_init();
	size_t next = 0, busy = 0;
	uint8_t none;

	if (m == NULL)
		return;
	memset(pv, 0, sizeof(pv));
	for (;;) {
		int running, left;
		CURLMsg *msg;

		for (size_t k = 0; k < PROBE_PARALLEL && next < n; k++) {
			struct probe *p = &pv[k];

			if (p->o != NULL)
				continue;
			if (p->e == NULL && (p->e = curl_easy_init()) == NULL)
				break;
			memset(&p->x, 0, sizeof(p->x));
			p->x.buf = &none;
			p->x.cap = UINT64_MAX; /* a HEAD: no body */
			if (remote_easy_setup(c, p->e, objs[next].url, NULL,
				NULL, true, c->timeout_ms, &p->x) != 0)
				break;
			p->o = &objs[next++];
			curl_easy_setopt(p->e, CURLOPT_PRIVATE, p);
			curl_multi_add_handle(m, p->e);
			atomic_fetch_add(&c->st.requests, 1);
			busy++;
		}
		if (busy == 0)
			break;
		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			struct probe *p;
			const struct remote_resp *rs;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(
			    msg->easy_handle, CURLINFO_PRIVATE, (char **)&p);
			rs = &p->x.resp;
			if (msg->data.result == CURLE_OK && rs->status == 200 &&
			    rs->has_length && rs->length > 0) {
				p->o->size = rs->length;
				snprintf(p->o->etag, sizeof(p->o->etag), "%s",
				    rs->etag);
				p->o->probed = true;
			}
			curl_multi_remove_handle(m, p->e);
			remote_xfer_done(&p->x);
			p->o = NULL;
			busy--;
		}
		if (running > 0)
			curl_multi_poll(m, NULL, 0, 1000, NULL);
	}
	for (size_t k = 0; k < PROBE_PARALLEL; k++)
		if (pv[k].e != NULL) {
			if (pv[k].o != NULL) {
				curl_multi_remove_handle(m, pv[k].e);
				remote_xfer_done(&pv[k].x);
			}
			curl_easy_cleanup(pv[k].e);
		}
	curl_multi_cleanup(m);
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
	probe_all(c, objs, n);
	return 0;
}

int
ds_remote_shard(struct remote_ctx *c, struct remote_obj *o, int index_fd,
    struct stat *st, struct tar_index *ix, char *err, size_t errlen)
{
	char why[512];
	CURL *e = curl_easy_init();
	bool scanned;
	int r = 0;

	if (e == NULL)
		return -ENOMEM;
	if (!o->probed &&
	    (r = remote_head(c, e, o->url, o->name, &o->size, o->etag,
		 sizeof(o->etag), why, sizeof(why))) != 0) {
		snprintf(err, errlen, "shard %s", why);
		goto out;
	}
	o->probed = true;
	synth_stat(o->size, o->etag, st);
	struct stream s = {.c = c, .o = o, .e = e};
	r = ds_tar_index_remote(
	    o->name, st, index_fd, stream_scan, &s, ix, &scanned, err, errlen);
out:
	curl_easy_cleanup(e);
	return r;
}

void
ds_remote_free(struct remote_ctx *c, struct remote_obj *objs, size_t n)
{
	remote_ctx_free(c); /* the fetcher first: it reads objs */
	for (size_t i = 0; objs != NULL && i < n; i++) {
		free(objs[i].url);
		free(objs[i].name);
	}
	free(objs);
}
