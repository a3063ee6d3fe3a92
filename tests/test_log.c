/*
 * test_log - the two logs a mount serves (issue 26).  The log's ring
 * (.feedfs/log): lines come back whole, newest last, stamped and
 * levelled; past LOG_RING_BYTES the oldest go, never a part of a line; a
 * short copy keeps the newest whole lines.  A job's failed samples
 * (JOB/errors.tsv): each once with its first reason, the path as in
 * samples.tsv and the reason without it, escaped, at most
 * JOB_ERRORS_MAX, the oldest going first and counted.  And the file of
 * -o log=FILE (issue 40, 5): a relative name opened again by its
 * absolute one after a rename (logrotate's), the lines before in the old
 * file and those after in the new; the level drops what is above it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/job.h"
#include "util/log.h"
#include "tests/testlib.h"

/* Every line of text (len bytes) is "STAMP LEVEL: msg N" with N rising by
 * one; returns the first N, -1 if a line is not whole or out of order. */
static long
check_lines(const char *text, size_t len, long *last)
{
	long first = -1, prev = -1;
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *at;
		long n;

		if (nl == NULL)
			return -1;
		if ((at = strstr(p, " info: line ")) == NULL || at > nl ||
		    at - p != 20 || p[4] != '-' || p[19] != 'Z')
			return -1;
		n = strtol(at + 12, NULL, 10);
		if (prev >= 0 && n != prev + 1)
			return -1;
		if (first < 0)
			first = n;
		prev = n;
		p = nl + 1;
	}
	*last = prev;
	return first;
}

/* The errors.tsv of a job over 3000 samples "cls/img-N.jpg". */
static void
test_errors_tsv(void)
{
	struct dataset ds = {0};
	struct job j = {0};
	struct ds_sample *v = calloc(3000, sizeof(*v));
	char why[600], *text, want[256];
	size_t len;

	CHECK(v != NULL);
	for (size_t i = 0; i < 3000; i++) {
		char p[64];

		snprintf(p, sizeof(p), "cls/img-%zu.jpg", i);
		v[i].path = strdup(p);
	}
	ds.samples = v;
	ds.n = 3000;
	j.ds = &ds;
	j.errlog = calloc(1, sizeof(*j.errlog)); /* as job_init makes it */
	CHECK(j.errlog != NULL);
	pthread_mutex_init(&j.errlog->lock, NULL);

	text = job_errors_tsv(&j, &len);
	CHECK_EQ_STR(text, "# id\tpath\treason\n");
	free(text);
	job_note_error(&j, 7,
	    "/data/cls/img-7.jpg: corrupt data: Premature "
	    "end of JPEG file");
	job_note_error(&j, 7, "/data/cls/img-7.jpg: another reason");
	job_note_error(&j, 9, "job x: a reason\twith a tab");
	/* Listed once, with its latest reason (issue 34). */
	text = job_errors_tsv(&j, &len);
	CHECK_EQ_STR(text, "# id\tpath\treason\n"
			   "7\tcls/img-7.jpg\tanother reason\n"
			   "9\tcls/img-9.jpg\tjob x: a reason\\twith a tab\n");
	CHECK_EQ_INT(len, strlen(text));
	free(text);
	/* Failing again, it moves to the end. */
	job_note_error(&j, 7,
	    "/data/cls/img-7.jpg: corrupt data: Premature "
	    "end of JPEG file");
	text = job_errors_tsv(&j, &len);
	CHECK_EQ_STR(text, "# id\tpath\treason\n"
			   "9\tcls/img-9.jpg\tjob x: a reason\\twith a tab\n"
			   "7\tcls/img-7.jpg\tcorrupt data: Premature end of "
			   "JPEG file\n");
	free(text);

	/* Past the bound: the oldest go, counted; a long reason is cut. */
	memset(why, 'x', sizeof(why) - 1);
	why[sizeof(why) - 1] = '\0';
	for (uint32_t id = 100; id < 100 + JOB_ERRORS_MAX + 1; id++)
		job_note_error(&j, id, why);
	text = job_errors_tsv(&j, &len);
	CHECK(text != NULL);
	CHECK(strstr(text, "# 3 older failures not listed\n") != NULL);
	CHECK(strstr(text, "\n7\t") == NULL && strstr(text, "\n100\t") == NULL);
	snprintf(want, sizeof(want), "\n%u\tcls/img-%u.jpg\t",
	    100 + JOB_ERRORS_MAX, 100 + JOB_ERRORS_MAX);
	CHECK(strstr(text, want) != NULL);
	CHECK(len < (size_t)JOB_ERRORS_MAX * 600);
	free(text);
	/* A sample that went comes back when it fails again. */
	job_note_error(&j, 7, "/data/cls/img-7.jpg: again");
	text = job_errors_tsv(&j, &len);
	CHECK(strstr(text, "\n7\tcls/img-7.jpg\tagain\n") != NULL);
	free(text);

	job_fini(&j);
	CHECK(j.errlog == NULL);
	for (size_t i = 0; i < 3000; i++)
		free(v[i].path);
	free(v);
}

/* The whole of file path, or NULL. */
static char *
slurp(const char *path)
{
	static char text[8192];
	FILE *fp = fopen(path, "r");
	size_t n;

	if (fp == NULL)
		return NULL;
	n = fread(text, 1, sizeof(text) - 1, fp);
	text[n] = '\0';
	fclose(fp);
	return text;
}

static void
test_file(void)
{
	char dir[] = "/tmp/test_log.XXXXXX", old[64], cwd[4096], err[256];
	const char *t;

	CHECK(mkdtemp(dir) != NULL && getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK(chdir(dir) == 0);
	CHECK_EQ_INT(log_open_file("x.log", err, sizeof(err)), 0);
	CHECK(chdir(cwd) == 0); /* the daemon moves to / */
	log_warn("before the rename");
	snprintf(old, sizeof(old), "%s/x.log", dir);
	snprintf(cwd, sizeof(cwd), "%s/x.log.1", dir);
	CHECK(rename(old, cwd) == 0);
	CHECK_EQ_INT(log_reopen(), 0);
	log_warn("after the rename");
	CHECK((t = slurp(cwd)) != NULL && strstr(t, "before the rename") &&
	      !strstr(t, "after the rename"));
	CHECK((t = slurp(old)) != NULL && strstr(t, "reopened the log") &&
	      strstr(t, "after the rename") && strstr(t, " warning: "));
	/* The level: info dropped at warning, everywhere. */
	CHECK_EQ_INT(log_set_level_name("loud"), -EINVAL);
	CHECK_EQ_INT(log_set_level_name("warning"), 0);
	log_info("an info line");
	CHECK((t = slurp(old)) != NULL && !strstr(t, "an info line"));
	CHECK_EQ_INT(log_set_level_name("info"), 0);
	CHECK(log_open_file("", err, sizeof(err)) != 0);
	log_close_file();
	CHECK_EQ_INT(log_reopen(), 0); /* no file: nothing to do */
	unlink(old);
	unlink(cwd);
	rmdir(dir);
}

int
main(void)
{
	char *buf = malloc(LOG_RING_BYTES), small[1000];
	long first, last = -1;
	size_t n;

	CHECK(buf != NULL);
	log_init("test_log", false, false);
	CHECK_EQ_INT(log_ring_len(), 0);
	for (long i = 0; i < 10; i++)
		log_info("line %ld", i);
	n = log_ring_copy(buf, LOG_RING_BYTES);
	CHECK_EQ_INT(n, log_ring_len());
	CHECK_EQ_INT(check_lines(buf, n, &last), 0);
	CHECK_EQ_INT(last, 9);
	/* Debug lines are not kept unless debug is on. */
	log_debug("not kept");
	CHECK_EQ_INT(log_ring_len(), n);

	/* Far past the bound: the oldest lines go, whole. */
	for (long i = 10; i < 20000; i++)
		log_info("line %ld %s", i, i % 7 ? "" : "with some more words");
	n = log_ring_copy(buf, LOG_RING_BYTES);
	CHECK(n <= LOG_RING_BYTES && n > LOG_RING_BYTES - 200);
	first = check_lines(buf, n, &last);
	CHECK(first > 10);
	CHECK_EQ_INT(last, 19999);

	/* A short copy: the newest whole lines that fit. */
	n = log_ring_copy(small, sizeof(small));
	CHECK(n > 0 && n <= sizeof(small));
	first = check_lines(small, n, &last);
	CHECK(first > 19950);
	CHECK_EQ_INT(last, 19999);
	free(buf);
	test_errors_tsv();
	test_file();
	return TEST_SUMMARY();
}
