/*
 * ds_remote.c - remote tar shards, the dataset's side.  Layer: dataset/
 * (called by ds_tar.c; calls dataset/remote/ and ds_tar_index.c; the
 * remote reader is closed by ds_free through remote_close, so nothing
 * below calls back up here).
 *
 * A remote shard is probed (dataset/remote/remote_probe.c: its size and
 * its version, and that the server answers ranges), its kept index keyed
 * by its display name (remote_url_display: an s3 key whole) and its
 * version, else walked from one stream of its bytes
 * (dataset/remote/remote_stream.c) that feeds the tar walk as it comes;
 * its members are then read by range (dataset/remote/remote_read.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "dataset/ds_remote.h"
#include "dataset/ds_tar_int.h"
#include "dataset/remote/remote_int.h"

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

/* A shard to walk: its object and the context it is read with. */
struct scan_arg {
	struct remote_ctx *c;
	const struct remote_obj *o;
};

/* Walk the shard of arg (a scan_arg) into ix, from one stream. */
static int
stream_scan(void *arg, struct tar_index *ix, char *err, size_t errlen)
{
	const struct scan_arg *a = arg;
	struct remote_stream *s;
	struct tar_rd rd = {remote_stream_pread, NULL};
	int r;

	if ((r = remote_stream_open(a->c, a->o, &s)) != 0) {
		snprintf(err, errlen, "shard %s: %s", a->o->name, strerror(-r));
		return r;
	}
	rd.arg = s;
	r = ds_tar_scan_rd(&rd, a->o->v.size, ix);
	if (r == 0 && ix->status == TS_READ) {
		/* The walk met a read error: the shard cannot be indexed. */
		ds_tar_index_free(ix);
		snprintf(err, errlen, "shard %s", remote_stream_error(s));
		r = -EIO;
	} else if (r != 0)
		snprintf(err, errlen, "shard %s: %s", a->o->name, strerror(-r));
	remote_stream_close(s);
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

int
ds_remote_shard(struct remote_ctx *c, struct remote_obj *o, int index_fd,
    struct stat *st, struct tar_index *ix, char *err, size_t errlen)
{
	struct scan_arg a = {c, o};
	char why[512];
	bool scanned;
	int r;

	if (!o->probed && (r = remote_probe(c, o, why, sizeof(why))) != 0) {
		snprintf(err, errlen, "shard %s", why);
		return r;
	}
	if ((r = synth_stat(&o->v, st)) != 0) {
		snprintf(err, errlen, "%s", strerror(-r));
		return r;
	}
	return ds_tar_index_remote(
	    o->name, st, index_fd, stream_scan, &a, ix, &scanned, err, errlen);
}
