/*
 * test_dataset - ImageFolder scans and manifests: order, labels, what is
 * skipped, error messages, progress.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dataset.h"
#include "tests/testlib.h"

static char tmp[64];

/* Create tmp/rel (and its parent directories) as an empty file or a dir. */
static void
make(const char *rel, int dir)
{
	char path[512];
	size_t n;
	int fd;

	n = (size_t)snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	for (size_t i = strlen(tmp) + 1; i < n; i++)
		if (path[i] == '/') {
			path[i] = '\0';
			mkdir(path, 0755);
			path[i] = '/';
		}
	if (dir)
		mkdir(path, 0755);
	else if ((fd = open(path, O_WRONLY | O_CREAT, 0644)) >= 0)
		close(fd);
}

static void
write_file(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	if ((f = fopen(path, "w")) != NULL) {
		fputs(text, f);
		fclose(f);
	}
}

static int
open_ds(const char *root, const char *manifest, struct dataset **ds, char *err,
    size_t errlen)
{
	char r[512], m[512];

	snprintf(r, sizeof(r), "%s/%s", tmp, root);
	if (manifest != NULL)
		snprintf(m, sizeof(m), "%s/%s", tmp, manifest);
	err[0] = '\0';
	return ds_open(
	    "test", r, manifest ? m : NULL, NULL, NULL, ds, err, errlen);
}

static void
test_folder(void)
{
	static const char *want[] = {"C/z.JPEG", "a/1.jpg", "a/deep/er/x.jpeg",
	    "a/link.jpg", "b/0.Jpg", "b/sub/2.jpg"};
	static const int64_t labels[] = {0, 1, 1, 1, 2, 2};
	struct dataset *ds = NULL;
	char err[512], path[512], target[512];
	int r;

	make("img/b/0.Jpg", 0);
	make("img/b/sub/2.jpg", 0);
	make("img/b/notes.txt", 0);
	make("img/b/.hidden.jpg", 0);
	make("img/b/.hiddendir/3.jpg", 0);
	make("img/a/1.jpg", 0);
	make("img/a/deep/er/x.jpeg", 0);
	make("img/a/1.jpg.bak", 0);
	make("img/a/jpg", 0);
	make("img/C/z.JPEG", 0);
	make("img/.git/4.jpg", 0);
	make("img/empty", 1);
	make("img/top.jpg", 0); /* not in a class directory */
	/* Links are followed: to a file, and a dangling one is skipped. */
	snprintf(path, sizeof(path), "%s/img/a/link.jpg", tmp);
	snprintf(target, sizeof(target), "%s/img/top.jpg", tmp);
	CHECK_EQ_INT(symlink(target, path), 0);
	snprintf(path, sizeof(path), "%s/img/a/dangling.jpg", tmp);
	CHECK_EQ_INT(symlink("/nonexistent/x.jpg", path), 0);
	/* A loop of links ends. */
	snprintf(path, sizeof(path), "%s/img/C/loop", tmp);
	snprintf(target, sizeof(target), "%s/img/C", tmp);
	CHECK_EQ_INT(symlink(target, path), 0);
	/* A link to the root is a loop too: it does not list every class
	 * again under b (issue 6). */
	snprintf(path, sizeof(path), "%s/img/b/root", tmp);
	CHECK_EQ_INT(symlink("..", path), 0);

	r = open_ds("img", NULL, &ds, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	if (r != 0) {
		fprintf(stderr, "ds_open: %s\n", err);
		return;
	}
	CHECK_EQ_STR(ds->name, "test");
	CHECK(ds->root[0] == '/');
	snprintf(path, sizeof(path), "%s/img", tmp);
	CHECK_EQ_STR(ds->root, path);
	/* Byte order, as torchvision's sorted(): upper case first. */
	CHECK_EQ_INT(ds->nclasses, 4);
	if (ds->nclasses == 4) {
		CHECK_EQ_STR(ds->classes[0], "C");
		CHECK_EQ_STR(ds->classes[1], "a");
		CHECK_EQ_STR(ds->classes[2], "b");
		CHECK_EQ_STR(ds->classes[3], "empty");
	}
	CHECK_EQ_INT(ds->n, 6);
	for (size_t i = 0; i < ds->n && i < 6; i++) {
		CHECK_EQ_STR(ds->samples[i].path, want[i]);
		CHECK_EQ_INT(ds->samples[i].label, labels[i]);
	}
	ds_free(ds);

	/* A relative root comes back absolute. */
	if (chdir(tmp) == 0) {
		ds = NULL;
		r = ds_open(
		    "rel", "img/", NULL, NULL, NULL, &ds, err, sizeof(err));
		CHECK_EQ_INT(r, 0);
		if (r == 0) {
			snprintf(path, sizeof(path), "%s/img", tmp);
			CHECK_EQ_STR(ds->root, path);
			CHECK_EQ_INT(ds->n, 6);
		}
		ds_free(ds);
		if (chdir("/") != 0)
			perror("chdir");
	}
}

static void
test_errors(void)
{
	struct dataset *ds = NULL;
	char err[512], want[600];
	int r;

	r = open_ds("missing", NULL, &ds, err, sizeof(err));
	CHECK_EQ_INT(r, -ENOENT);
	snprintf(
	    want, sizeof(want), "%s/missing: No such file or directory", tmp);
	CHECK_EQ_STR(err, want);
	CHECK(ds == NULL);

	make("plain", 0);
	r = open_ds("plain", NULL, &ds, err, sizeof(err));
	CHECK_EQ_INT(r, -ENOTDIR);
	snprintf(want, sizeof(want), "%s/plain: Not a directory", tmp);
	CHECK_EQ_STR(err, want);

	make("none/cls/readme.txt", 0);
	make("none/x.jpg", 0);
	r = open_ds("none", NULL, &ds, err, sizeof(err));
	CHECK(r < 0);
	snprintf(want, sizeof(want), "no JPEG images found under %s/none", tmp);
	CHECK_EQ_STR(err, want);
	CHECK(ds == NULL);

	make("void", 1);
	r = open_ds("void", NULL, &ds, err, sizeof(err));
	CHECK(r < 0);
	snprintf(want, sizeof(want), "no JPEG images found under %s/void", tmp);
	CHECK_EQ_STR(err, want);
	CHECK(ds == NULL);
}

static void
test_manifest(void)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
	    {"a.jpg\t0\nb.jpg\tx\n", ":2: bad label 'x'"},
	    {"# c\n\na.jpg 0\n", ":3: expected \"relative/path<TAB>label\""},
	    {"a.jpg\t-1\n", ":1: negative label -1"},
	    {"a.jpg\t1\nb.jpg\t2\n\na.jpg\t3\n",
		":4: duplicate path 'a.jpg' (also on line 1)"},
	    {"a.jpg\t\n", ":1: bad label ''"},
	    {"a.jpg\t3x\n", ":1: bad label '3x'"},
	    {"\t3\n", ":1: empty path"},
	    {"/etc/passwd\t3\n", ":1: path must be relative"},
	    {"# only comments\n\n", ": no samples"},
	};
	struct dataset *ds = NULL;
	char err[512], want[600];
	int r;

	make("mroot", 1);
	write_file("ok.tsv", "# a comment\n"
			     "z/9.jpg\t2\n"
			     "\n"
			     "a/1.jpg\t0\r\n"
			     "   \n"
			     "m/5.JPG\t4\n"
			     "b b/2.jpg\t0\n");
	r = open_ds("mroot", "ok.tsv", &ds, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	if (r == 0) {
		CHECK_EQ_INT(ds->n, 4);
		CHECK_EQ_STR(ds->samples[0].path, "a/1.jpg");
		CHECK_EQ_INT(ds->samples[0].label, 0);
		CHECK_EQ_STR(ds->samples[1].path, "b b/2.jpg");
		CHECK_EQ_INT(ds->samples[1].label, 0);
		CHECK_EQ_STR(ds->samples[2].path, "m/5.JPG");
		CHECK_EQ_INT(ds->samples[2].label, 4);
		CHECK_EQ_STR(ds->samples[3].path, "z/9.jpg");
		CHECK_EQ_INT(ds->samples[3].label, 2);
		CHECK_EQ_INT(ds->nclasses, 5);
		if (ds->nclasses == 5) {
			CHECK_EQ_STR(ds->classes[0], "0");
			CHECK_EQ_STR(ds->classes[4], "4");
		}
	} else
		fprintf(stderr, "ds_open: %s\n", err);
	ds_free(ds);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ds = NULL;
		write_file("bad.tsv", bad[i].text);
		r = open_ds("mroot", "bad.tsv", &ds, err, sizeof(err));
		CHECK(r < 0);
		CHECK(ds == NULL);
		snprintf(want, sizeof(want), "%s/bad.tsv%s", tmp, bad[i].msg);
		if (strncmp(err, want, strlen(want)) != 0) {
			CHECK_EQ_STR(err, want);
		} else
			CHECK(1);
	}

	r = open_ds("mroot", "nofile.tsv", &ds, err, sizeof(err));
	CHECK_EQ_INT(r, -ENOENT);
	snprintf(want, sizeof(want), "%s/nofile.tsv: No such file or directory",
	    tmp);
	CHECK_EQ_STR(err, want);
	/* The root must exist in manifest mode too. */
	r = open_ds("nomroot", "ok.tsv", &ds, err, sizeof(err));
	CHECK_EQ_INT(r, -ENOENT);
}

static void
count(size_t nfound, void *arg)
{
	size_t *calls = arg;

	calls[0]++;
	calls[1] = nfound;
}

static void
test_progress(void)
{
	struct dataset *ds = NULL;
	size_t calls[2] = {0, 0};
	char name[64], root[512], err[512];
	int r;

	for (int i = 0; i < 1500; i++) {
		snprintf(name, sizeof(name), "many/cls/%04d.jpg", i);
		make(name, 0);
	}
	snprintf(root, sizeof(root), "%s/many", tmp);
	r = ds_open("many", root, NULL, count, calls, &ds, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	CHECK_EQ_INT(calls[0], 1);
	CHECK_EQ_INT(calls[1], 1000);
	if (r == 0) {
		CHECK_EQ_INT(ds->n, 1500);
		CHECK_EQ_STR(ds->samples[0].path, "cls/0000.jpg");
		CHECK_EQ_STR(ds->samples[1499].path, "cls/1499.jpg");
		for (size_t i = 1; i < ds->n; i++)
			if (strcmp(ds->samples[i - 1].path,
				ds->samples[i].path) >= 0)
				CHECK(!"samples out of order");
	}
	ds_free(ds);
}

int
main(void)
{
	char cmd[128];

	snprintf(tmp, sizeof(tmp), "/tmp/test_dataset.XXXXXX");
	if (mkdtemp(tmp) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_folder();
	test_errors();
	test_manifest();
	test_progress();
	ds_free(NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	return TEST_SUMMARY();
}
