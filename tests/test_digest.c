/*
 * test_digest.c - the digest path of core/sample.c with a real store: a
 * source's digest memo is made only when it can be trusted (git's
 * racy-timestamp rule, cache_memo_trusted), so a file rewritten in place
 * with the same size and times is never served under its old digest
 * (issue 17 item 11).
 *
 * The data set is real JPEGs (gen-jpegs); sample 0's file is rewritten in
 * place with sample 1's bytes (both padded to one size: a JPEG decoder
 * stops at its EOI marker) and its mtime put back, and every output is
 * compared with sample_make's output without a cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "engine/engine.h"
#include "core/sample.h"
#include "tests/testlib.h"

static char dir[] = "/tmp/test_digest.XXXXXX";

static struct feed *
start(void)
{
	char path[512], err[2048];
	struct cfg *c = NULL;
	struct feed *f = NULL;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/feedfs.conf", dir);
	if ((fp = fopen(path, "w")) == NULL) {
		perror(path);
		exit(99);
	}
	/* No cache of the feed's own: the test passes its store. */
	fprintf(fp,
	    "[mount]\ncache_size = 0\nthreads = 1\nmemory = 64M\n"
	    "[dataset d]\nroot = %s/data\n"
	    "[job j]\nbatch_size = 2\nepochs = 1\nshuffle = no\n"
	    "pipeline = decode resize(40) cache center_crop(32)\n",
	    dir);
	fclose(fp);
	if (cfg_load(path, &c, err, sizeof(err)) != 0 ||
	    feed_new(c, NULL, NULL, &f, err, sizeof(err)) != 0 ||
	    feed_start(f) != 0) {
		fprintf(stderr, "setup: %s\n", err);
		exit(99);
	}
	return f;
}

static uint8_t *
slurp(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *b;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) != 0) {
		perror(path);
		exit(99);
	}
	b = calloc(1, (size_t)st.st_size + 1);
	if (b == NULL || read(fd, b, (size_t)st.st_size) != st.st_size)
		exit(99);
	close(fd);
	*len = (size_t)st.st_size;
	return b;
}

/* p (n bytes) grown to len with zeroes; exits on failure. */
static uint8_t *
pad(uint8_t *p, size_t n, size_t len)
{
	uint8_t *q = realloc(p, len);

	if (q == NULL) {
		free(p);
		exit(99);
	}
	memset(q + n, 0, len - n);
	return q;
}

/* Write len bytes over path in place (same inode), keeping its mtime. */
static void
rewrite(const char *path, const uint8_t *b, size_t len, bool keep_mtime)
{
	struct stat st;
	struct timespec ts[2];
	int fd = open(path, O_WRONLY);

	CHECK(fd >= 0 && fstat(fd, &st) == 0);
	CHECK(pwrite(fd, b, len, 0) == (ssize_t)len);
	if (keep_mtime) {
		ts[0] = st.st_atim;
		ts[1] = st.st_mtim;
		CHECK(futimens(fd, ts) == 0);
	}
	close(fd);
}

static void
test_rule(void)
{
	struct stat a, b;
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	memset(&a, 0, sizeof(a));
	a.st_size = 100;
	a.st_ino = 5;
	a.st_mtim.tv_sec = now.tv_sec - 60;
	a.st_ctim.tv_sec = now.tv_sec - 60;
	b = a;
	CHECK(cache_memo_trusted(&a, &b, &now));
	/* Changed during the read: the second fstat differs. */
	b.st_ctim.tv_nsec++;
	CHECK(!cache_memo_trusted(&a, &b, &now));
	b = a;
	b.st_size++;
	CHECK(!cache_memo_trusted(&a, &b, &now));
	/* Times within the grain of the read, or after it: racily clean. */
	a.st_ctim = now;
	b = a;
	CHECK(!cache_memo_trusted(&a, &b, &now));
	a.st_ctim.tv_sec = now.tv_sec - 2; /* exactly the grain: not more */
	a.st_ctim.tv_nsec = now.tv_nsec;
	b = a;
	CHECK(!cache_memo_trusted(&a, &b, &now));
	a.st_ctim.tv_sec = now.tv_sec - 3;
	a.st_mtim.tv_sec = now.tv_sec + 100; /* mtime in the future */
	b = a;
	CHECK(!cache_memo_trusted(&a, &b, &now));
	a.st_mtim.tv_sec = now.tv_sec - 3;
	b = a;
	CHECK(cache_memo_trusted(&a, &b, &now));
	/* Forged extremes (a client's stat): no overflow, a sane answer. */
	a.st_mtim.tv_sec = INT64_MIN;
	a.st_ctim.tv_sec = INT64_MAX;
	b = a;
	CHECK(!cache_memo_trusted(&a, &b, &now));
	a.st_ctim.tv_sec = INT64_MIN;
	a.st_ctim.tv_nsec = -1;
	b = a;
	CHECK(cache_memo_trusted(&a, &b, &now));
}

static void
test_sample_path(void)
{
	struct feed *f = start();
	struct job *j = &f->jobs[0];
	struct cache *c = NULL;
	char cdir[512], p0[4096], p1[4096], err[512];
	uint8_t *a, *b, *refa, *refb, *out, d[32], got[32];
	size_t la, lb, n, len;
	struct stat st;
	uint32_t local;
	const struct dataset *ds = job_source_of(j, 0, &local)->ds;

	snprintf(cdir, sizeof(cdir), "%s/cache", dir);
	if (cache_open(cdir, 256 << 20, 16 << 20, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "cache_open: %s\n", err);
		exit(99);
	}
	snprintf(p0, sizeof(p0), "%s/%s", ds->root, ds->samples[0].path);
	snprintf(p1, sizeof(p1), "%s/%s", ds->root, ds->samples[1].path);
	a = slurp(p0, &la);
	b = slurp(p1, &lb);
	/* Both padded with zeroes to one size (after the EOI marker). */
	len = la > lb ? la : lb;
	a = pad(a, la, len);
	b = pad(b, lb, len);
	rewrite(p0, a, len, false);
	rewrite(p1, b, len, false);
	n = j->raw_bytes;
	refa = malloc(n);
	refb = malloc(n);
	out = malloc(n);
	CHECK_EQ_INT(
	    sample_make(j, NULL, 0, 0, true, refa, err, sizeof(err)), 0);
	CHECK_EQ_INT(
	    sample_make(j, NULL, 0, 1, true, refb, err, sizeof(err)), 0);
	CHECK(memcmp(refa, refb, n) != 0);

	/*
	 * Just written: racily clean.  The sample is right and gets no memo,
	 * so a same-size rewrite in the same tick (same stat) cannot be
	 * served the old digest.
	 */
	CHECK_EQ_INT(sample_make(j, c, 0, 0, true, out, err, sizeof(err)), 0);
	CHECK(memcmp(out, refa, n) == 0);
	CHECK_EQ_INT(stat(p0, &st), 0);
	CHECK_EQ_INT(cache_get_digest(c, p0, &st, got), -ENOENT);
	rewrite(p0, b, len, true);
	CHECK_EQ_INT(sample_make(j, c, 0, 0, true, out, err, sizeof(err)), 0);
	CHECK(memcmp(out, refb, n) == 0);
	CHECK_EQ_INT(stat(p0, &st), 0);
	CHECK_EQ_INT(cache_get_digest(c, p0, &st, got), -ENOENT);

	/*
	 * Older than the grain: the memo is made (a hit reads no source),
	 * and a rewrite with the mtime put back is still seen (its ctime).
	 */
	rewrite(p0, a, len, false);
	usleep((useconds_t)(CACHE_MEMO_GRAIN_NS / 1000) + 200000);
	CHECK_EQ_INT(sample_make(j, c, 0, 0, true, out, err, sizeof(err)), 0);
	CHECK(memcmp(out, refa, n) == 0);
	CHECK_EQ_INT(stat(p0, &st), 0);
	cache_sha256(a, len, d);
	CHECK_EQ_INT(cache_get_digest(c, p0, &st, got), 0);
	CHECK(memcmp(got, d, 32) == 0);
	CHECK_EQ_INT(sample_make(j, c, 0, 0, true, out, err, sizeof(err)), 0);
	CHECK(memcmp(out, refa, n) == 0);
	rewrite(p0, b, len, true);
	CHECK_EQ_INT(sample_make(j, c, 0, 0, true, out, err, sizeof(err)), 0);
	CHECK(memcmp(out, refb, n) == 0);
	CHECK_EQ_INT(stat(p0, &st), 0);
	CHECK(
	    cache_get_digest(c, p0, &st, got) != 0 || memcmp(got, d, 32) != 0);

	free(a);
	free(b);
	free(refa);
	free(refb);
	free(out);
	cache_close(c);
	feed_free(f);
}

int
main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	if (test_gen_jpegs(dir, 2, 1, 5) != 0)
		return 99;
	test_rule();
	test_sample_path();
	test_rmtree(dir);
	return TEST_SUMMARY();
}
