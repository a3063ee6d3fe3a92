/*
 * fuzz_tar - libFuzzer target: the tar shard reader and its kept index.
 *
 * The input is a tar file.  ds_tar_scan indexes it from a memfd (pread
 * only, as a mount does); each member it records must lie inside the
 * input.  The index is then encoded and parsed back (the same members),
 * and the input itself is parsed as a kept index file, which must fail
 * or give members inside the shard it claims, never crash.  The walk is
 * also made through a reader that allows what a stream allows (a remote
 * shard's streaming GET, dataset/ds_remote.c): each read at or after the
 * start of the one before; it must never go back further, and give the
 * same index.  That walk reads every plain member's data as a stream's
 * does (its digest: the first bytes stand in for the SHA-256), and its
 * index, digests and all, must encode and parse back the same.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/ds_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input read as a stream is: forward, from the last read's start. */
struct fwd {
	const uint8_t *d;
	size_t size;
	uint64_t last;
};

static int
fwd_pread(void *arg, void *buf, size_t n, uint64_t off)
{
	struct fwd *f = arg;

	if (off < f->last)
		abort(); /* the walk went back: a stream cannot */
	if (off > f->size || n > f->size - off)
		abort(); /* outside the shard */
	f->last = off;
	memcpy(buf, f->d + off, n);
	return 0;
}

/* A member as a stream sees it: its data read on, its "digest" set. */
static int
fwd_member(void *arg, struct tar_index *ix, size_t i)
{
	struct tar_member *m = &ix->m[i];
	uint8_t buf[64];
	size_t n = m->size < sizeof(buf) ? (size_t)m->size : sizeof(buf);

	if (fwd_pread(arg, buf, n, m->off) != 0)
		return -EIO;
	memset(m->digest, 0xd5, 32);
	memcpy(m->digest, buf, n < 32 ? n : 32);
	m->hlen = (uint8_t)(m->size < TAR_HEAD_MAX ? m->size : TAR_HEAD_MAX);
	memcpy(m->head, buf, m->hlen);
	m->has_digest = true;
	return 0;
}

/* ix encoded and parsed back: the same members, digests and text too. */
static void
round_trip(const struct tar_index *ix, const struct stat *st)
{
	struct tar_index back;
	uint8_t *enc;
	size_t len;

	if (ds_tar_index_encode(ix, "fuzz.tar", st, &enc, &len) != 0)
		return;
	if (ds_tar_index_parse(enc, len, "fuzz.tar", st, &back) != 0 ||
	    back.n != ix->n)
		abort();
	for (size_t i = 0; i < ix->n; i++)
		if (strcmp(back.m[i].name, ix->m[i].name) != 0 ||
		    back.m[i].off != ix->m[i].off ||
		    back.m[i].kind != ix->m[i].kind ||
		    back.m[i].has_digest != ix->m[i].has_digest ||
		    (ix->m[i].has_digest &&
			(memcmp(back.m[i].digest, ix->m[i].digest, 32) != 0 ||
			    back.m[i].hlen != ix->m[i].hlen ||
			    memcmp(back.m[i].head, ix->m[i].head,
				ix->m[i].hlen) != 0)) ||
		    back.m[i].has_data != ix->m[i].has_data ||
		    (ix->m[i].has_data &&
			(back.m[i].dlen != ix->m[i].dlen ||
			    memcmp(back.m[i].data, ix->m[i].data,
				ix->m[i].dlen) != 0)))
			abort();
	ds_tar_index_free(&back);
	if (ds_tar_index_parse(enc, len, "other.tar", st, &back) != -ESTALE)
		abort();
	free(enc);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tar_index ix, back;
	struct stat st;
	int fd;

	if ((fd = memfd_create("fuzz_tar", MFD_CLOEXEC)) < 0)
		abort();
	if (size > 0 && write(fd, data, size) != (ssize_t)size)
		abort();
	if (fstat(fd, &st) != 0)
		abort();
	struct fwd fw = {data, size, 0};
	struct tar_rd rd = {fwd_pread, &fw, fwd_member};

	if (ds_tar_scan_rd(&rd, size, &back) == 0) {
		if (ds_tar_scan(fd, size, &ix) != 0)
			abort();
		if (ix.n != back.n || ix.status != back.status)
			abort(); /* the stream's index is another */
		round_trip(&back, &st);
		ds_tar_index_free(&ix);
		ds_tar_index_free(&back);
	}
	if (ds_tar_scan(fd, size, &ix) == 0) {
		for (size_t i = 0; i < ix.n; i++) {
			if (ix.m[i].off > size ||
			    (ix.m[i].kind == TM_FILE &&
				ix.m[i].size > size - ix.m[i].off))
				abort(); /* a member outside the shard */
			if (ix.m[i].has_data && ix.m[i].dlen != ix.m[i].size)
				abort();
		}
		round_trip(&ix, &st);
		ds_tar_index_free(&ix);
	}
	close(fd);
	if (ds_tar_index_parse(data, size, NULL, NULL, &back) == 0)
		ds_tar_index_free(&back);
	return 0;
}
