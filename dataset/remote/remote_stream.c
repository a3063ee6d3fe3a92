/*
 * remote_stream.c - an object's bytes from one streaming GET, read
 * forward (what a shard's index is walked from).  Layer: dataset/remote/
 * (the HTTP/S3 client).
 *
 * The GET asks Range: bytes=N- with the object's version as its
 * precondition (N = 0 first); where it is cut (a reset, a timeout, a
 * body short of the range), it is resumed from the first byte not yet
 * come, and every answer, the first and each resume, is judged where its
 * headers end (remote_resp_check): a 200 of the whole object, a 206 from
 * another offset or of another version is never spliced in; a bad one is
 * tried again within remote_retries, another version fails the stream.
 * Below REMOTE_STREAM_MIN_BPS sustained for remote_timeout (a server
 * that trickles) a try fails, so a stream ends within a bound of the
 * settings; while it runs, the log says how far it got every
 * REMOTE_PROGRESS_MS.  Never more is held than the walk's last read and
 * STREAM_SLACK.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/remote/remote_int.h"
#include "util/log.h"

/* The stream's buffer: what the walk asks for and this much more. */
#define STREAM_SLACK (1u << 20)

struct remote_stream {
	struct remote_ctx *c;
	const struct remote_obj *o;
	CURLM *m;
	CURL *e;
	struct remote_xfer x;
	bool started, over, paused;
	bool too_long; /* the body went past the object */
	CURLcode cc;
	unsigned tries;
	uint64_t seed;
	uint8_t *buf;
	size_t len, cap;
	uint64_t base;	   /* buf holds [base, base + len) */
	uint64_t pos;	   /* of the next byte from the wire */
	uint64_t keep;	   /* bytes before this are dropped as they come */
	uint64_t t0, said; /* ms: the start, the last progress line */
	char err[512];
};

/* The body of a response judged to be the range asked: bytes at pos. */
static size_t
sink(void *arg, const char *p, size_t n)
{
	struct remote_stream *s = arg;
	uint64_t at = s->pos;
	size_t k = n;

	if (s->pos + n > s->o->v.size) {
		s->too_long = true; /* more than the object: refused */
		return 0;
	}
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
start(struct remote_stream *s)
{
	struct remote_want w = {s->pos, 0, true, s->o->v.size, &s->o->v};

	if (s->started) {
		curl_multi_remove_handle(s->m, s->e);
		remote_xfer_done(&s->x);
	}
	s->x.sink = sink;
	s->x.sink_arg = s;
	s->too_long = false;
	if (remote_easy_setup(s->c, s->e, s->o->url, &w, 0, &s->x) != 0)
		return -ENOMEM;
	s->started = true;
	s->over = false;
	s->paused = false;
	curl_multi_add_handle(s->m, s->e);
	atomic_fetch_add(&s->c->st.requests, 1);
	return 0;
}

/* The transfer ended short of what the walk needs: resume from where it
 * stopped, or say why not.  0: started again. */
static int
resume(struct remote_stream *s)
{
	const struct remote_resp *r = &s->x.resp;
	const char *name = s->o->name;
	enum remote_bad bad;
	int j = remote_xfer_end(&s->x, s->cc, &bad);
	bool again;

	if (s->too_long) {
		j = RJ_BAD;
		bad = RB_LONG;
	}
	if (j == RJ_BAD)
		atomic_fetch_add(&s->c->st.bad[bad], 1);
	if (j == RJ_CHANGED) {
		atomic_fetch_add(&s->c->st.changed, 1);
		snprintf(s->err, sizeof(s->err),
		    "%s: the object changed while it was indexed", name);
		return -EIO;
	}
	again = j == RJ_BAD || (j == RJ_OK && s->pos < s->o->v.size) ||
		(j == RJ_STATUS && remote_retryable(CURLE_OK, r->status)) ||
		(j < 0 && remote_retryable(s->cc, 0));
	if (again && s->tries < s->c->retries) {
		s->tries++;
		atomic_fetch_add(&s->c->st.retries, 1);
		usleep(
		    (useconds_t)remote_backoff_ms(s->tries, &s->seed) * 1000u);
		return start(s);
	}
	if (j == RJ_BAD)
		snprintf(s->err, sizeof(s->err),
		    "%s: a bad response (%s) to Range: bytes=%" PRIu64 "-",
		    name, remote_bad_name(bad), s->x.want.first);
	else if (j == RJ_STATUS)
		snprintf(s->err, sizeof(s->err), "%s: HTTP status %ld", name,
		    r->status);
	else if (j < 0 && s->cc == CURLE_OPERATION_TIMEDOUT && s->x.judged)
		snprintf(s->err, sizeof(s->err),
		    "%s: fewer than %u bytes a second for %" PRIu64
		    " s (a server that trickles), %" PRIu64 " of %" PRIu64
		    " bytes read",
		    name, REMOTE_STREAM_MIN_BPS,
		    (s->c->timeout_ms + 999) / 1000, s->pos, s->o->v.size);
	else if (j < 0)
		snprintf(s->err, sizeof(s->err), "%s: %s", name,
		    curl_easy_strerror(s->cc));
	else
		snprintf(s->err, sizeof(s->err),
		    "%s: the body ended after %" PRIu64 " of %" PRIu64 " bytes",
		    name, s->pos, s->o->v.size);
	return -EIO;
}

/* Every REMOTE_PROGRESS_MS of a long stream: how far it got. */
static void
progress(struct remote_stream *s)
{
	uint64_t now = remote_now_ms();

	if (now - s->said < REMOTE_PROGRESS_MS)
		return;
	s->said = now;
	log_info("remote %s: indexing, %.1f of %.1f MiB read (%" PRIu64
		 "%%), %.2f MiB/s",
	    s->o->name, (double)s->pos / 1048576.0,
	    (double)s->o->v.size / 1048576.0,
	    s->o->v.size ? s->pos * 100 / s->o->v.size : 100,
	    (double)s->pos / 1048576.0 / ((double)(now - s->t0) / 1000.0));
}

int
remote_stream_pread(void *arg, void *out, size_t n, uint64_t off)
{
	struct remote_stream *s = arg;

	if (n == 0)
		return 0;
	if (off + n > s->o->v.size || off + n < off)
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
			if (resume(s) != 0)
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
		progress(s);
		if (!s->over && !s->paused &&
		    !(s->len > 0 && s->base + s->len >= off + n))
			curl_multi_poll(s->m, NULL, 0, 1000, NULL);
	}
	memcpy(out, s->buf + (off - s->base), n);
	return 0;
}

int
remote_stream_open(struct remote_ctx *c, const struct remote_obj *o,
    struct remote_stream **out)
{
	struct remote_stream *s = calloc(1, sizeof(*s));
	int r;

	if (s == NULL)
		return -ENOMEM;
	s->c = c;
	s->o = o;
	s->seed = (uint64_t)getpid() ^ remote_now_ms();
	s->t0 = s->said = remote_now_ms();
	if ((s->m = curl_multi_init()) == NULL ||
	    (s->e = curl_easy_init()) == NULL) {
		remote_stream_close(s);
		return -ENOMEM;
	}
	if ((r = start(s)) != 0) {
		remote_stream_close(s);
		return r;
	}
	*out = s;
	return 0;
}

const char *
remote_stream_error(const struct remote_stream *s)
{
	return s->err[0] ? s->err : "cannot be read";
}

void
remote_stream_close(struct remote_stream *s)
{
	if (s == NULL)
		return;
	if (s->started) {
		curl_multi_remove_handle(s->m, s->e);
		remote_xfer_done(&s->x);
	}
	if (s->e != NULL)
		curl_easy_cleanup(s->e);
	if (s->m != NULL)
		curl_multi_cleanup(s->m);
	free(s->buf);
	free(s);
}
