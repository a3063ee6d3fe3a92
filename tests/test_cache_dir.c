/*
 * test_cache_dir - trust in a cache directory, decided on its descriptor
 * (cache/dir.c; issue 25, class 1), with real directories, FIFOs, links
 * and, as root, another user's ownership:
 *
 *   - cache_dir_open: made 0700 with its parents; a symbolic link, a file,
 *     a group- or world-writable directory and (as root) one of uid 65534
 *     refused with a message naming why; 0755 made 0700;
 *   - cache_index_open: shard-index made 0700 under a checked cache_dir;
 *     a symlinked shard-index refused, nothing created at its target;
 *     without create, a missing one is -ENOENT and nothing is made;
 *   - cache_dir_openat: a FIFO opens at once (no reader), a link is ELOOP;
 *   - cache_probe_lock: LOCK a FIFO, a symlink: -EACCES at once, naming
 *     LOCK; a foreign dir: -EACCES; no dir, no LOCK: 0;
 *   - cache_open and cache_open_secondary over a store with LOCK a FIFO
 *     or a symlinked CURRENT: refused at once, the link's target untouched;
 *   - ds_open_shards through an index fd: the index file is made in that
 *     directory, and a symlinked HEX.idx is not followed when read;
 *   - the path to a cache_dir (issue 34): a directory on the way that
 *     others may write (not sticky), or (as root) that uid 65534 owns,
 *     refused naming it, with nothing made under it; a sticky one (as
 *     /tmp) taken; a symbolic link on the way followed when this user
 *     owns it and its target passes, refused when (as root) uid 65534
 *     owns it or its target is a directory others may write.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "dataset/dataset.h"
#include "tests/testlib.h"

static char tmp[64];

static const char *
p(char *buf, const char *name)
{
	snprintf(buf, 4096, "%s/%s", tmp, name);
	return buf;
}

static int
nentries(const char *dir)
{
	char cmd[4200];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "find %s -mindepth 1 | wc -l", dir);
	if ((f = popen(cmd, "r")) != NULL) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

static void
test_dir_open(void)
{
	char a[4096], b[4096], err[1024];
	struct stat st;
	int fd;

	/* Made, with its parents, 0700. */
	fd = cache_dir_open(p(a, "new/sub/cache"), true, err, sizeof(err));
	CHECK(fd >= 0);
	CHECK(fstat(fd, &st) == 0 && (st.st_mode & 0777) == 0700);
	close(fd);
	CHECK(stat(p(a, "new"), &st) == 0 && (st.st_mode & 0777) == 0700);
	/* Missing without create. */
	CHECK_EQ_INT(
	    cache_dir_open(p(a, "none"), false, err, sizeof(err)), -ENOENT);
	CHECK(access(p(a, "none"), F_OK) != 0);
	/* A link to a good directory: refused, said. */
	CHECK(symlink(p(b, "new/sub/cache"), p(a, "link")) == 0);
	CHECK_EQ_INT(
	    cache_dir_open(p(a, "link"), true, err, sizeof(err)), -ELOOP);
	CHECK(strstr(err, "symbolic link") != NULL);
	/* Writable by group, by others. */
	CHECK(mkdir(p(a, "gw"), 0700) == 0 && chmod(a, 0770) == 0);
	CHECK_EQ_INT(cache_dir_open(a, true, err, sizeof(err)), -EACCES);
	CHECK(strstr(err, "writable by group or others") != NULL);
	CHECK(chmod(a, 0703) == 0);
	CHECK_EQ_INT(cache_dir_open(a, true, err, sizeof(err)), -EACCES);
	/* Readable by others: made 0700. */
	CHECK(mkdir(p(a, "ro"), 0755) == 0 && chmod(a, 0755) == 0);
	fd = cache_dir_open(a, false, err, sizeof(err));
	CHECK(fd >= 0);
	close(fd);
	CHECK(stat(a, &st) == 0 && (st.st_mode & 0777) == 0700);
	/* A file. */
	CHECK((fd = open(p(a, "file"), O_CREAT | O_WRONLY, 0600)) >= 0);
	close(fd);
	CHECK(cache_dir_open(a, false, err, sizeof(err)) < 0);
	/* Another user's (as root). */
	if (geteuid() == 0) {
		CHECK(mkdir(p(a, "nobody"), 0700) == 0 &&
		      chown(a, 65534, 65534) == 0);
		CHECK_EQ_INT(
		    cache_dir_open(a, true, err, sizeof(err)), -EACCES);
		CHECK(strstr(err, "owned by uid 65534") != NULL);
		CHECK_EQ_INT(
		    cache_index_open(a, true, err, sizeof(err)), -EACCES);
		CHECK_EQ_INT(nentries(a), 0);
	} else
		fprintf(stderr, "  not root: another user's dir not tried\n");
}

static void
test_index_open(void)
{
	char a[4096], b[4096], err[1024];
	struct stat st;
	int fd;

	/* Without create: nothing made. */
	CHECK_EQ_INT(
	    cache_index_open(p(a, "ic"), false, err, sizeof(err)), -ENOENT);
	CHECK(access(a, F_OK) != 0);
	fd = cache_index_open(a, true, err, sizeof(err));
	CHECK(fd >= 0);
	CHECK(fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) &&
	      (st.st_mode & 0777) == 0700);
	close(fd);
	CHECK(stat(p(a, "ic/shard-index"), &st) == 0 && S_ISDIR(st.st_mode));
	/* shard-index a link to another directory: refused, not followed. */
	CHECK(mkdir(p(a, "il"), 0700) == 0 && mkdir(p(b, "target"), 0700) == 0);
	CHECK(symlink(b, p(a, "il/shard-index")) == 0);
	CHECK_EQ_INT(
	    cache_index_open(p(a, "il"), true, err, sizeof(err)), -ELOOP);
	CHECK(strstr(err, "shard-index is a symbolic link") != NULL);
	CHECK_EQ_INT(nentries(b), 0);
	/* shard-index group-writable. */
	CHECK(mkdir(p(a, "iw"), 0700) == 0 &&
	      mkdir(p(a, "iw/shard-index"), 0700) == 0 && chmod(a, 0777) == 0);
	CHECK_EQ_INT(
	    cache_index_open(p(a, "iw"), true, err, sizeof(err)), -EACCES);
}

static void
test_openat_and_probe(void)
{
	char a[4096], b[4096], err[1024];
	int dfd, fd;

	CHECK(mkdir(p(a, "st"), 0700) == 0);
	CHECK(mkfifo(p(a, "st/LOCK"), 0600) == 0);
	dfd = cache_dir_open(p(a, "st"), false, err, sizeof(err));
	CHECK(dfd >= 0);
	/* A FIFO with no writer: opened at once, not waited on. */
	alarm(20);
	fd = cache_dir_openat(dfd, "LOCK", O_RDONLY, 0);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK_EQ_INT(cache_probe_lock(p(a, "st"), err, sizeof(err)), -EACCES);
	CHECK(strstr(err, "LOCK is not a regular file") != NULL);
	alarm(0);
	/* A link. */
	CHECK(unlink(p(a, "st/LOCK")) == 0);
	CHECK((fd = open(p(b, "decoy"), O_CREAT | O_WRONLY, 0600)) >= 0);
	close(fd);
	CHECK(symlink(b, p(a, "st/LOCK")) == 0);
	CHECK_EQ_INT(cache_dir_openat(dfd, "LOCK", O_RDONLY, 0), -ELOOP);
	CHECK_EQ_INT(cache_probe_lock(p(a, "st"), err, sizeof(err)), -EACCES);
	CHECK(strstr(err, "LOCK is a symbolic link") != NULL);
	close(dfd);
	/* No store, no dir: nothing to say. */
	CHECK_EQ_INT(cache_probe_lock(p(a, "st2"), err, sizeof(err)), 0);
	CHECK(mkdir(a, 0700) == 0);
	CHECK_EQ_INT(cache_probe_lock(a, err, sizeof(err)), 0);
	/* A dir writable by others. */
	CHECK(chmod(a, 0777) == 0);
	CHECK_EQ_INT(cache_probe_lock(a, err, sizeof(err)), -EACCES);
}

static void
test_store(void)
{
	char a[4096], b[4096], c[4096], err[1024];
	struct cache *ca;
	int fd;

	/* A store, closed; then LOCK a FIFO. */
	CHECK_EQ_INT(
	    cache_open(p(a, "db"), 64u << 20, 16u << 20, &ca, err, sizeof(err)),
	    0);
	cache_close(ca);
	CHECK(unlink(p(b, "db/LOCK")) == 0 && mkfifo(b, 0600) == 0);
	alarm(60);
	CHECK_EQ_INT(cache_open(a, 64u << 20, 16u << 20, &ca, err, sizeof(err)),
	    -EACCES);
	CHECK(strstr(err, "LOCK is a FIFO") != NULL);
	CHECK_EQ_INT(cache_open_secondary(a, &ca, err, sizeof(err)), -EACCES);
	alarm(0);
	/* CURRENT a link to a file elsewhere: refused, not read. */
	CHECK(unlink(b) == 0);
	CHECK((fd = open(b, O_CREAT | O_WRONLY, 0600)) >= 0);
	close(fd);
	CHECK(rename(p(b, "db/CURRENT"), p(c, "current")) == 0);
	CHECK(symlink(c, p(b, "db/CURRENT")) == 0);
	CHECK_EQ_INT(cache_open_secondary(a, &ca, err, sizeof(err)), -EACCES);
	CHECK(strstr(err, "CURRENT is a symbolic link") != NULL);
	CHECK_EQ_INT(cache_open(a, 64u << 20, 16u << 20, &ca, err, sizeof(err)),
	    -EACCES);
}

static void
test_index_files(void)
{
	char a[4096], b[4096], glob[4200], cmd[8600], err[1024];
	struct dataset *ds = NULL;
	int idx, fd, r;

	CHECK(mkdir(p(a, "tsrc"), 0700) == 0);
	CHECK((fd = open(p(b, "tsrc/k.jpg"), O_CREAT | O_WRONLY, 0600)) >= 0);
	CHECK(write(fd, "JPEG", 4) == 4);
	close(fd);
	CHECK((fd = open(p(b, "tsrc/k.cls"), O_CREAT | O_WRONLY, 0600)) >= 0);
	CHECK(write(fd, "3", 1) == 1);
	close(fd);
	snprintf(
	    cmd, sizeof(cmd), "tar -C %s -cf %s/s.tar k.jpg k.cls", a, tmp);
	CHECK(system(cmd) == 0);
	snprintf(glob, sizeof(glob), "%s/s.tar", tmp);
	idx = cache_index_open(p(a, "ix"), true, err, sizeof(err));
	CHECK(idx >= 0);
	r = ds_open_shards(
	    "t", glob, "cls", idx, NULL, NULL, &ds, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	if (r == 0)
		ds_free(ds);
	CHECK_EQ_INT(nentries(p(a, "ix/shard-index")), 1);
	/* The index file replaced by a link to a decoy: not followed. */
	snprintf(cmd, sizeof(cmd),
	    "cd %s/ix/shard-index && f=$(ls) && rm $f && "
	    "echo decoy > %s/decoy && ln -s %s/decoy $f",
	    tmp, tmp, tmp);
	CHECK(system(cmd) == 0);
	r = ds_open_shards(
	    "t", glob, "cls", idx, NULL, NULL, &ds, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	if (r == 0) {
		CHECK_EQ_INT((int)ds->n, 1);
		ds_free(ds);
	}
	/* Rewritten in place of the link, the decoy untouched. */
	snprintf(cmd, sizeof(cmd),
	    "test \"$(cat %s/decoy)\" = decoy && "
	    "test -z \"$(find %s/ix/shard-index -type l)\"",
	    tmp, tmp);
	CHECK(system(cmd) == 0);
	close(idx);
}

/* cache_dir_open(path, create) refused with -EACCES, err naming want. */
static void
refused(const char *path, const char *want)
{
	char err[1024];
	int fd = cache_dir_open(path, true, err, sizeof(err));

	CHECK_EQ_INT(fd, -EACCES);
	if (fd >= 0)
		close(fd);
	else if (strstr(err, want) == NULL) {
		fprintf(stderr, "  %s: \"%s\" does not say \"%s\"\n", path, err,
		    want);
		CHECK(strstr(err, want) != NULL);
	}
	fd = cache_index_open(path, true, err, sizeof(err));
	CHECK_EQ_INT(fd, -EACCES);
	if (fd >= 0)
		close(fd);
}

/* cache_dir_open(path, create) taken. */
static void
taken(const char *path)
{
	char err[1024];
	int fd = cache_dir_open(path, true, err, sizeof(err));

	if (fd < 0)
		fprintf(stderr, "  %s: %s\n", path, err);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
}

static void
test_dir_path(void)
{
	char a[4096], b[4096], c[4096];

	/* A directory on the way that others may write, not sticky. */
	CHECK(mkdir(p(a, "open"), 0700) == 0 && chmod(a, 0777) == 0);
	refused(p(b, "open/cache"), "/open is writable");
	CHECK_EQ_INT(nentries(a), 0);
	CHECK(chmod(a, 0770) == 0);
	refused(p(b, "open/sub/cache"), "/open is writable");
	CHECK_EQ_INT(nentries(a), 0);
	/* Sticky, as /tmp: others cannot rename what is ours in it. */
	CHECK(chmod(a, 01777) == 0);
	taken(p(b, "open/cache"));
	/* A link on the way, ours, to a good directory: followed. */
	CHECK(mkdir(p(a, "real"), 0700) == 0);
	CHECK(symlink(a, p(b, "ours")) == 0);
	taken(p(c, "ours/cache"));
	CHECK(access(p(a, "real/cache"), F_OK) == 0);
	/* ... a relative one, with a link and a parent on its way too */
	CHECK(symlink("real/../ours/", p(b, "rel")) == 0);
	taken(p(c, "rel/sub/../cache2"));
	CHECK(access(p(a, "real/cache2"), F_OK) == 0);
	/* ... and to a directory others may write: refused there. */
	CHECK(mkdir(p(a, "wild"), 0700) == 0 && chmod(a, 0777) == 0);
	CHECK(symlink(a, p(b, "towild")) == 0);
	refused(p(c, "towild/cache"), "/wild is writable");
	CHECK_EQ_INT(nentries(a), 0);
	if (geteuid() != 0) {
		fprintf(stderr, "  not root: another user's dir and link not "
				"tried\n");
		return;
	}
	/* A directory on the way that another user owns. */
	CHECK(mkdir(p(a, "theirs"), 0755) == 0 && chown(a, 65534, 65534) == 0);
	refused(p(b, "theirs/cache"), "/theirs is owned by uid 65534");
	CHECK_EQ_INT(nentries(a), 0);
	/* A link on the way that another user owns, to a good directory. */
	CHECK(symlink(p(a, "real"), p(b, "theirlink")) == 0 &&
	      lchown(b, 65534, 65534) == 0);
	refused(p(c, "theirlink/cache"), "owned by uid 65534");
}

int
main(void)
{
	umask(077);
	snprintf(tmp, sizeof(tmp), "/tmp/test_cache_dir.XXXXXX");
	if (mkdtemp(tmp) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_dir_open();
	test_index_open();
	test_openat_and_probe();
	test_store();
	test_index_files();
	test_dir_path();
	test_rmtree(tmp);
	return TEST_SUMMARY();
}
