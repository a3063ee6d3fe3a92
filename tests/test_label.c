/*
 * test_label - a tar shard sample's label (dataset/ds_label.c): the .cls
 * text, and the .json member parsed by jansson, with its stated limits:
 * the key at the top level only, a key twice in any object refused,
 * nesting bounded (2048 levels), numbers beyond 64 bits refused; and,
 * from a shard made by GNU tar through ds_open_shards, that each refusal
 * is a sample that fails when read with its reason (on_error decides),
 * the same from the kept index.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "dataset/dataset.h"
#include "dataset/ds_tar_int.h"
#include "tests/testlib.h"

static char tmp[64];

/* ds_label_json of the C string s for key "label"; *v -1 unless set. */
static int
js(const char *s, int64_t *v)
{
	*v = -1;
	return ds_label_json(s, strlen(s), "label", v);
}

/* {"label": 1, "deep": [[...]]} with arrays nested levels deep. */
static char *
deep(int arrays)
{
	char *s = malloc(2 * (size_t)arrays + 64);
	size_t n;

	if (s == NULL)
		abort();
	n = (size_t)sprintf(s, "{\"label\": 1, \"deep\": ");
	for (int i = 0; i < arrays; i++)
		s[n++] = '[';
	for (int i = 0; i < arrays; i++)
		s[n++] = ']';
	s[n++] = '}';
	s[n] = '\0';
	return s;
}

static void
test_json(void)
{
	int64_t v;
	char *s;

	CHECK_EQ_INT(js("{\"label\": 3}", &v), 0);
	CHECK_EQ_INT(v, 3);
	/* A string holding an integer, read as a .cls member is. */
	CHECK_EQ_INT(js("{\"label\": \" 4 \"}", &v), 0);
	CHECK_EQ_INT(v, 4);
	/* The top level only; strings with brackets and quotes in them. */
	CHECK_EQ_INT(js("{\"caption\": \"a {tricky}, \\\"quoted\\\" [text]\", "
			"\"nested\": {\"label\": 99}, \"label\": 5}",
			 &v),
	    0);
	CHECK_EQ_INT(v, 5);
	CHECK_EQ_INT(js("{\"nested\": {\"label\": 99}}", &v), -ENOENT);
	CHECK_EQ_INT(js("{}", &v), -ENOENT);
	/* Not an integer. */
	CHECK_EQ_INT(js("{\"label\": 3.0}", &v), -EINVAL);
	CHECK_EQ_INT(js("{\"label\": 1e2}", &v), -EINVAL);
	CHECK_EQ_INT(js("{\"label\": true}", &v), -EINVAL);
	CHECK_EQ_INT(js("{\"label\": null}", &v), -EINVAL);
	CHECK_EQ_INT(js("{\"label\": [1]}", &v), -EINVAL);
	CHECK_EQ_INT(js("{\"label\": \"seven\"}", &v), -EINVAL);
	CHECK_EQ_INT(v, -1);
	/* Out of range: 0 to 16777215. */
	CHECK_EQ_INT(js("{\"label\": 16777215}", &v), 0);
	CHECK_EQ_INT(v, DS_MAX_LABEL);
	CHECK_EQ_INT(js("{\"label\": 16777216}", &v), -ERANGE);
	CHECK_EQ_INT(js("{\"label\": -1}", &v), -ERANGE);
	CHECK_EQ_INT(js("{\"label\": \"-1\"}", &v), -ERANGE);
	CHECK_EQ_INT(js("{\"label\": 99999999999999999999}", &v), -EOVERFLOW);
	CHECK_EQ_INT(js("{\"label\": 1, \"x\": 1e999}", &v), -EOVERFLOW);
	CHECK_EQ_INT(v, -1);
	/* Not JSON, or not an object: the whole member is parsed. */
	CHECK_EQ_INT(js("[1]", &v), -EBADMSG);
	CHECK_EQ_INT(js("{\"label\": 3", &v), -EBADMSG);
	CHECK_EQ_INT(js("{\"label\": 3} x", &v), -EBADMSG);
	CHECK_EQ_INT(js("{\"label\": 3, }", &v), -EBADMSG);
	CHECK_EQ_INT(js("{\"label\": \"\xff\"}", &v), -EBADMSG);
	CHECK_EQ_INT(js("{\"label\": \"\\u0000\"}", &v), -EBADMSG);
	CHECK_EQ_INT(
	    ds_label_json("{\"label\": 3}\0", 14, "label", &v), -EBADMSG);
	CHECK_EQ_INT(js("", &v), -EBADMSG);
	CHECK_EQ_INT(v, -1);
	/* A key twice in one object, at any depth: refused, the label
	 * key or another. */
	CHECK_EQ_INT(js("{\"label\": 1, \"label\": 2}", &v), -ENOTUNIQ);
	CHECK_EQ_INT(
	    js("{\"label\": 1, \"a\": {\"b\": 1, \"b\": 2}}", &v), -ENOTUNIQ);
	CHECK_EQ_INT(v, -1);
	/* The same key in two objects is no duplicate. */
	CHECK_EQ_INT(js("{\"a\": {\"label\": 1}, \"label\": 2}", &v), 0);
	CHECK_EQ_INT(v, 2);
	/* Nesting: 2048 levels of objects and arrays, the top object the
	 * first. */
	s = deep(2047);
	CHECK_EQ_INT(js(s, &v), 0);
	CHECK_EQ_INT(v, 1);
	free(s);
	s = deep(2048);
	CHECK_EQ_INT(js(s, &v), -ELOOP);
	free(s);
	s = deep(30000); /* most of a 64 KiB member: no deep recursion */
	CHECK_EQ_INT(js(s, &v), -ELOOP);
	free(s);
}

static void
test_cls(void)
{
	int64_t v = -1;

	CHECK_EQ_INT(ds_label_int("7\n", 2, &v), 0);
	CHECK_EQ_INT(v, 7);
	CHECK_EQ_INT(ds_label_int(" +2 ", 4, &v), 0);
	CHECK_EQ_INT(v, 2);
	CHECK_EQ_INT(ds_label_int("seven", 5, &v), -EINVAL);
	CHECK_EQ_INT(ds_label_int("", 0, &v), -EINVAL);
	CHECK_EQ_INT(ds_label_int("7 7", 3, &v), -EINVAL);
	CHECK_EQ_INT(ds_label_int("-0", 2, &v), -ERANGE);
	CHECK_EQ_INT(ds_label_int("99999999999999999999", 20, &v), -ERANGE);
	CHECK_EQ_INT(v, 2);
}

static void
write_file(const char *rel, const char *s)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f == NULL)
		return;
	fputs(s, f);
	fclose(f);
}

/* The reason sample id fails with, from ds_member_read. */
static void
check_fails(const struct dataset *ds, size_t id, const char *why)
{
	char err[1024];
	uint8_t *buf = NULL;
	size_t len;
	struct stat st;

	CHECK_EQ_INT(
	    ds_member_read(ds, id, 1 << 20, &buf, &len, &st, err, sizeof(err)),
	    -EIO);
	CHECK(strstr(err, why) != NULL);
	if (strstr(err, why) == NULL)
		fprintf(
		    stderr, "sample %zu: '%s', expected '%s'\n", id, err, why);
	free(buf);
}

/* Samples a (good), b (a key twice), c (too deep), d (no such key), e
 * (not an integer), f (not JSON), g (out of range), h (beyond 64 bits). */
static void
test_shard(void)
{
	const char *names = "abcdefgh";
	char cmd[2048], glob[512], err[1024], *s;
	struct dataset *ds;
	int idx, r;

	snprintf(cmd, sizeof(cmd), "mkdir -p %s/src %s/tars", tmp, tmp);
	CHECK(system(cmd) == 0);
	for (const char *p = names; *p != '\0'; p++) {
		char rel[32];

		snprintf(rel, sizeof(rel), "src/%c.jpg", *p);
		write_file(rel, "JPEG");
	}
	write_file("src/a.json", "{\"label\": 7, \"nested\": {\"label\": 1}}");
	write_file("src/b.json", "{\"label\": 7, \"label\": 8}");
	s = deep(3000);
	write_file("src/c.json", s);
	free(s);
	write_file("src/d.json", "{\"lable\": 7}");
	write_file("src/e.json", "{\"label\": 7.5}");
	write_file("src/f.json", "{\"label\": 7");
	write_file("src/g.json", "{\"label\": 16777216}");
	write_file("src/h.json", "{\"label\": 18446744073709551616}");
	snprintf(cmd, sizeof(cmd), "cd %s/src && tar -cf ../tars/s.tar *", tmp);
	CHECK(system(cmd) == 0);
	snprintf(glob, sizeof(glob), "%s/tars/*.tar", tmp);
	idx = cache_index_open(tmp, true, err, sizeof(err));
	CHECK(idx >= 0);
	/* Twice: from a walk of the shard, then from the kept index. */
	for (int pass = 0; pass < 2; pass++) {
		r = ds_open_shards("t", glob, "json:label", idx, NULL, NULL,
		    &ds, err, sizeof(err));
		CHECK_EQ_INT(r, 0);
		if (r != 0) {
			fprintf(stderr, "ds_open_shards: %s\n", err);
			break;
		}
		CHECK_EQ_INT((int)ds->n, 8);
		CHECK(ds->samples[0].bad == NULL);
		/* its class "7", the only one: index 0 */
		CHECK_EQ_INT(ds->samples[0].label, 0);
		CHECK_EQ_INT((int)ds->nclasses, 1);
		CHECK_EQ_STR(ds->classes[0], "7");
		for (size_t i = 1; i < ds->n; i++)
			CHECK_EQ_INT(ds->samples[i].label, -1);
		check_fails(ds, 1, "has a key twice in one object");
		check_fails(ds, 2, "nested deeper than 2048 levels");
		check_fails(ds, 3, "has no such key");
		check_fails(ds, 4, "not an integer");
		check_fails(ds, 5, "not a JSON object");
		check_fails(ds, 6, "label out of range (0 to 16777215)");
		check_fails(ds, 7, "has a number out of range");
		ds_free(ds);
	}
	close(idx);
}

int
main(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/test_label.XXXXXX");
	if (mkdtemp(tmp) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_cls();
	test_json();
	test_shard();
	test_rmtree(tmp);
	return TEST_SUMMARY();
}
