/*
 * remote_version.c - a remote object's version, and the one check of a
 * response.  Layer: dataset/remote/ (the HTTP/S3 client), its parsers:
 * no I/O; fuzz/fuzz_remote.c feeds it.
 *
 * A version (remote.h: struct remote_version) is what the server says
 * identifies an object's bytes: a strong ETag; else its Last-Modified
 * with its size, a weak ETag beside them compared weakly.  An object with
 * neither is refused: a change under the mount could not be told.  The
 * same version keys the kept index (remote_version_text), goes out as the
 * precondition of every request (remote_version_header) and is compared
 * with every response (remote_resp_check, which judges a response where
 * its headers end, before any of its body is used).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataset/remote/remote.h"

static bool
weak(const char *tag)
{
	return tag[0] == 'W' && tag[1] == '/';
}

/* The opaque tag, W/ aside: what a weak comparison compares. */
static const char *
opaque(const char *tag)
{
	return weak(tag) ? tag + 2 : tag;
}

void
remote_version_free(struct remote_version *v)
{
	free(v->etag);
	memset(v, 0, sizeof(*v));
}

int
remote_version_of(const struct remote_resp *r, uint64_t size,
    struct remote_version *v, char *err, size_t errlen)
{
	memset(v, 0, sizeof(*v));
	v->size = size;
	if (r->etag != NULL && !weak(r->etag)) {
		v->kind = RV_ETAG;
		return (v->etag = strdup(r->etag)) == NULL ? -ENOMEM : 0;
	}
	if (!r->has_last_modified) {
		if (r->etag != NULL)
			snprintf(err, errlen,
			    "the server gives only a weak ETag (%.40s%s), "
			    "which does not identify the bytes and cannot be "
			    "sent in If-Match, and no Last-Modified: a change "
			    "of the object could not be told",
			    r->etag, strlen(r->etag) > 40 ? "..." : "");
		else
			snprintf(err, errlen,
			    "the server gives no ETag and no Last-Modified: a "
			    "change of the object could not be told (a remote "
			    "shard needs a strong ETag, else Last-Modified)");
		return -EPROTO;
	}
	v->kind = RV_DATE;
	v->last_modified = r->last_modified;
	if (r->etag != NULL && (v->etag = strdup(r->etag)) == NULL)
		return -ENOMEM;
	return 0;
}

/*
 * A strong version: the response's ETag, if it sends one, is the same
 * strong tag.  A dated one: its Last-Modified, if it sends one, is the
 * same second, and its ETag, if both have one, weakly the same.  What a
 * response leaves out the precondition sent with it stands for.
 */
bool
remote_version_same(const struct remote_version *v, const struct remote_resp *r)
{
	if (v->kind == RV_ETAG)
		return r->etag == NULL ||
		       (!weak(r->etag) && strcmp(r->etag, v->etag) == 0);
	if (r->has_last_modified && r->last_modified != v->last_modified)
		return false;
	return r->etag == NULL || v->etag == NULL ||
	       strcmp(opaque(r->etag), opaque(v->etag)) == 0;
}

char *
remote_version_header(const struct remote_version *v)
{
	static const char *const day[] = {
	    "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
	static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May",
	    "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	time_t t = (time_t)v->last_modified;
	struct tm tm;
	char *out;

	if (v->kind == RV_ETAG)
		return asprintf(&out, "If-Match: %s", v->etag) < 0 ? NULL : out;
	/* IMF-fixdate, in English whatever the locale. */
	if (gmtime_r(&t, &tm) == NULL)
		return NULL;
	if (asprintf(&out,
		"If-Unmodified-Since: %s, %02d %s %04d %02d:%02d:%02d GMT",
		day[tm.tm_wday], tm.tm_mday, mon[tm.tm_mon], tm.tm_year + 1900,
		tm.tm_hour, tm.tm_min, tm.tm_sec) < 0)
		return NULL;
	return out;
}

char *
remote_version_text(const struct remote_version *v)
{
	char *out;
	int n;

	if (v->kind == RV_ETAG)
		n = asprintf(&out, "etag %s size %" PRIu64, v->etag, v->size);
	else
		n = asprintf(&out,
		    "last-modified %" PRId64 " size %" PRIu64 "%s%s",
		    v->last_modified, v->size, v->etag ? " weak " : "",
		    v->etag ? v->etag : "");
	return n < 0 ? NULL : out;
}

enum remote_judge
remote_resp_check(const struct remote_resp *r, const struct remote_want *w,
    enum remote_bad *bad)
{
	uint64_t last = w->open ? w->size - 1 : w->last;

	*bad = RB_NONE;
	if (r->header_overflow || r->bad_header)
		*bad = RB_HEADERS;
	else if (r->status >= 300 && r->status < 400)
		*bad = RB_REDIRECT;
	else if (r->status == 412 && w->v != NULL)
		return RJ_CHANGED; /* the precondition failed */
	else if (r->status < 200 || r->status >= 300)
		return RJ_STATUS;
	else if (r->status != 206)
		*bad = RB_NOT206; /* a range request answered whole */
	else if (!r->has_range || r->range_total == UINT64_MAX)
		*bad = RB_RANGE;
	else if (w->v != NULL && (r->range_total != w->v->size ||
				     !remote_version_same(w->v, r)))
		return RJ_CHANGED; /* a server that ignores preconditions */
	else if (r->range_first != w->first || r->range_last != last ||
		 (w->size != UINT64_MAX && r->range_total != w->size))
		*bad = RB_RANGE;
	else if (r->has_length && r->length != last - w->first + 1)
		*bad = r->length > last - w->first + 1 ? RB_LONG : RB_SHORT;
	return *bad == RB_NONE ? RJ_OK : RJ_BAD;
}
