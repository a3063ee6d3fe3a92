/*
 * test_cgroup - what the process is given (util/cgroup.c) and the
 * [mount] values that follow it (core/config_res.c), without a real
 * cgroup: the parsers on the lines kernels and containers write, and the
 * probe on trees of files laid out as /proc/self/cgroup,
 * /proc/self/mountinfo and the cgroup files of cgroup v1 and v2 (the
 * nearest limited ancestor, memory.high, cpu.max, a container's part of
 * the tree, files that are missing or garbage).  The real cgroups are
 * tests/test_cgroup_mount.py's.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "tests/testlib.h"
#include "util/cgroup.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static char tmp[] = "/tmp/feedfs-test_cgroup.XXXXXX";

/* tmp/rel with text, its directories made. */
static void
put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	for (char *s = path + strlen(tmp) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(path, 0755);
		*s = '/';
	}
	if ((fp = fopen(path, "w")) == NULL) {
		perror(path);
		exit(1);
	}
	fputs(text, fp);
	fclose(fp);
}

/* A fresh tree: the previous one removed. */
static void
fresh(void)
{
	test_rmtree(tmp);
	if (mkdir(tmp, 0700) != 0) {
		perror(tmp);
		exit(1);
	}
}

/* The path of a file of the tree, as the probe names it. */
static const char *
at(const char *rel)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	return path;
}

static int
self(const char *text, const char *ctrl, char *out)
{
	return cgroup_self_path(text, strlen(text), ctrl, out, 256);
}

static void
test_self_path(void)
{
	const char *hybrid = "12:pids:/user.slice\n"
			     "4:memory:/process_api/abc\n"
			     "3:cpu,cpuacct:/job 7/step:0\n"
			     "2:cpuset:/\n"
			     "1:name=systemd:/init.scope\n"
			     "0::/init.scope\n";
	char p[256];

	CHECK_EQ_INT(self(hybrid, "memory", p), 0);
	CHECK_EQ_STR(p, "/process_api/abc");
	CHECK_EQ_INT(self(hybrid, "cpu", p), 0);
	CHECK_EQ_STR(p, "/job 7/step:0"); /* blanks and colons are a path's */
	CHECK_EQ_INT(self(hybrid, "cpuacct", p), 0);
	CHECK_EQ_INT(self(hybrid, "cpuset", p), 0);
	CHECK_EQ_STR(p, "/");
	CHECK_EQ_INT(self(hybrid, NULL, p), 0);
	CHECK_EQ_STR(p, "/init.scope");
	CHECK_EQ_INT(self(hybrid, "hugetlb", p), -ENOENT);
	CHECK_EQ_INT(self(hybrid, "systemd", p), -ENOENT);
	/* Pure v1 (no 0:: line), pure v2, and no newline at the end. */
	CHECK_EQ_INT(self("4:memory:/a\n", NULL, p), -ENOENT);
	CHECK_EQ_INT(self("0::/kubepods/pod1/ctr", NULL, p), 0);
	CHECK_EQ_STR(p, "/kubepods/pod1/ctr");
	CHECK_EQ_INT(self("0::/kubepods\n", "memory", p), -ENOENT);
	/* Garbage lines are skipped; bad paths are refused. */
	strcpy(p, "kept");
	CHECK_EQ_INT(self("junk\n::\n0::/ok\n", NULL, p), 0);
	CHECK_EQ_STR(p, "/ok");
	strcpy(p, "kept");
	CHECK_EQ_INT(self("0::relative\n", NULL, p), -EINVAL);
	CHECK_EQ_INT(self("0::/a/../etc\n", NULL, p), -EINVAL);
	CHECK_EQ_INT(self("0::/a/.\n", NULL, p), -EINVAL);
	CHECK_EQ_INT(self("0::\n", NULL, p), -EINVAL);
	CHECK_EQ_INT(self("1:memory,:/a\n", "", p), 0); /* an empty item */
	CHECK_EQ_INT(self("", NULL, p), -ENOENT);
	CHECK_EQ_STR(p, "/a");
	/* A path longer than the caller's buffer. */
	CHECK_EQ_INT(cgroup_self_path("0::/abcdef", 10, NULL, p, 4), -EINVAL);
	CHECK_EQ_INT(cgroup_self_path("0::/a\0b\n", 8, NULL, p, 256), -EINVAL);
}

static int
mount_of(
    const char *text, const char *ctrl, const char *path, char *mnt, char *root)
{
	return cgroup_mount_of(
	    text, strlen(text), ctrl, path, mnt, 256, root, 256);
}

static void
test_mount_of(void)
{
	const char *mi =
	    "23 1 0:21 / /sys rw - sysfs sysfs rw\n"
	    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw\n"
	    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw shared:9 - cgroup "
	    "cgroup rw,cpu,cpuacct\n"
	    "35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw master:1 - "
	    "cgroup cgroup rw,memory\n"
	    "40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup "
	    "rw,name=systemd\n"
	    "41 31 0:38 / /sys/fs/cgroup/my\\040unified rw - cgroup2 cgroup2 "
	    "rw\n";
	char mnt[256], root[256];

	CHECK_EQ_INT(mount_of(mi, "cpu", "/job", mnt, root), 0);
	CHECK_EQ_STR(mnt, "/sys/fs/cgroup/cpu,cpuacct");
	CHECK_EQ_STR(root, "/");
	CHECK_EQ_INT(mount_of(mi, "cpuacct", "/", mnt, root), 0);
	CHECK_EQ_INT(mount_of(mi, "memory", "/docker/abc", mnt, root), 0);
	CHECK_EQ_STR(root, "/docker/abc");
	CHECK_EQ_INT(mount_of(mi, "memory", "/docker/abc/x", mnt, root), 0);
	/* Not under the mount's root: a part of the tree not seen. */
	CHECK_EQ_INT(
	    mount_of(mi, "memory", "/docker/abcd", mnt, root), -ENOENT);
	CHECK_EQ_INT(mount_of(mi, "memory", "/", mnt, root), -ENOENT);
	CHECK_EQ_INT(mount_of(mi, NULL, "/init.scope", mnt, root), 0);
	CHECK_EQ_STR(mnt, "/sys/fs/cgroup/my unified");
	CHECK_EQ_INT(mount_of(mi, "systemd", "/", mnt, root), -ENOENT);
	CHECK_EQ_INT(mount_of(mi, "pids", "/", mnt, root), -ENOENT);
	/* Lines cut short, a separator too early, no fields at all. */
	CHECK_EQ_INT(mount_of("1 2 0:3 / /x - cgroup2\n"
			      "1 - cgroup2 c rw\n\n   \n",
			 NULL, "/", mnt, root),
	    -ENOENT);
	CHECK_EQ_INT(
	    mount_of("1 2 0:3 / /x rw - cgroup2 c rw", NULL, "/a", mnt, root),
	    0);
	CHECK_EQ_STR(mnt, "/x");
	/* An escape cut short is kept as it is; a NUL escape refused. */
	CHECK_EQ_INT(mount_of("1 2 0:3 / /x\\04 rw - cgroup2 c rw", NULL, "/",
			 mnt, root),
	    0);
	CHECK_EQ_STR(mnt, "/x\\04");
	CHECK_EQ_INT(mount_of("1 2 0:3 / /x\\000 rw - cgroup2 c rw", NULL, "/",
			 mnt, root),
	    -ENOENT);
}

static void
test_values(void)
{
	uint64_t v = 7, q = 7, p = 7;

	CHECK_EQ_INT(cgroup_parse_limit("max\n", 4, &v), 0);
	CHECK(v == CGROUP_NONE);
	CHECK_EQ_INT(cgroup_parse_limit("536870912\n", 10, &v), 0);
	CHECK(v == 512 * MIB);
	CHECK_EQ_INT(cgroup_parse_limit("9223372036854771712\n", 20, &v), 0);
	CHECK(v == CGROUP_NONE); /* v1's "unlimited" */
	CHECK_EQ_INT(cgroup_parse_limit("-1\n", 3, &v), 0);
	CHECK(v == CGROUP_NONE);
	CHECK_EQ_INT(
	    cgroup_parse_limit("123456789012345678901234567890", 30, &v), 0);
	CHECK(v == CGROUP_NONE);
	v = 7;
	CHECK_EQ_INT(cgroup_parse_limit("", 0, &v), -EINVAL);
	CHECK_EQ_INT(cgroup_parse_limit("\n", 1, &v), -EINVAL);
	CHECK_EQ_INT(cgroup_parse_limit("12a\n", 4, &v), -EINVAL);
	CHECK_EQ_INT(cgroup_parse_limit(" 5", 2, &v), -EINVAL);
	CHECK_EQ_INT(cgroup_parse_limit("5\n\n", 3, &v), -EINVAL);
	CHECK(v == 7); /* set on success only */

	CHECK_EQ_INT(cgroup_parse_cpu_max("max 100000\n", 11, &q, &p), 0);
	CHECK(q == 0 && p == 100000);
	CHECK_EQ_INT(cgroup_parse_cpu_max("50000 100000\n", 13, &q, &p), 0);
	CHECK(q == 50000 && p == 100000);
	q = p = 7;
	CHECK_EQ_INT(cgroup_parse_cpu_max("50000 0\n", 8, &q, &p), -EINVAL);
	CHECK_EQ_INT(cgroup_parse_cpu_max("0 100000", 8, &q, &p), -EINVAL);
	CHECK_EQ_INT(cgroup_parse_cpu_max("50000", 5, &q, &p), -EINVAL);
	CHECK_EQ_INT(cgroup_parse_cpu_max("abc 1", 5, &q, &p), -EINVAL);
	CHECK_EQ_INT(cgroup_parse_cpu_max("1 max", 5, &q, &p), -EINVAL);
	CHECK(q == 7 && p == 7);

	const char *st = "cache 4096\nrss 8192\n"
			 "hierarchical_memory_limitX 1\n"
			 "hierarchical_memory_limit 268435456\n";
	CHECK_EQ_INT(
	    cgroup_stat_value(st, strlen(st), "hierarchical_memory_limit", &v),
	    0);
	CHECK(v == 256 * MIB);
	CHECK_EQ_INT(cgroup_stat_value(st, strlen(st), "swap", &v), -ENOENT);
	CHECK_EQ_INT(cgroup_stat_value("rss x\n", 6, "rss", &v), -EINVAL);
}

/* cgroup v1: the nearest limited ancestor's limit; the smallest quota. */
static void
test_probe_v1(void)
{
	struct cgroup_res r;

	fresh();
	put("proc/self/cgroup", "5:pids:/\n4:memory:/slurm/job7/step0\n"
				"3:cpu,cpuacct:/slurm/job7\n0::/\n");
	put("proc/self/mountinfo",
	    "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
	    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup "
	    "rw,cpu,cpuacct\n"
	    "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup "
	    "rw,memory\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes",
	    "9223372036854771712\n");
	put("sys/fs/cgroup/memory/slurm/memory.limit_in_bytes", "2147483648\n");
	put("sys/fs/cgroup/memory/slurm/job7/memory.limit_in_bytes",
	    "536870912\n");
	put("sys/fs/cgroup/memory/slurm/job7/step0/memory.limit_in_bytes",
	    "9223372036854771712\n");
	put("sys/fs/cgroup/memory/slurm/job7/step0/memory.stat",
	    "cache 0\nhierarchical_memory_limit 536870912\n");
	put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
	put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
	put("sys/fs/cgroup/cpu,cpuacct/slurm/cpu.cfs_quota_us", "400000\n");
	put("sys/fs/cgroup/cpu,cpuacct/slurm/cpu.cfs_period_us", "100000\n");
	put("sys/fs/cgroup/cpu,cpuacct/slurm/job7/cpu.cfs_quota_us", "25000\n");
	put("sys/fs/cgroup/cpu,cpuacct/slurm/job7/cpu.cfs_period_us",
	    "50000\n");
	cgroup_probe(tmp, &r);
	CHECK(r.mem_limit == 512 * MIB);
	CHECK_EQ_STR(r.mem_file,
	    at("sys/fs/cgroup/memory/slurm/job7/memory.limit_in_bytes"));
	CHECK(r.quota_us == 25000 && r.period_us == 50000);
	CHECK_EQ_STR(r.cpu_file,
	    at("sys/fs/cgroup/cpu,cpuacct/slurm/job7/cpu.cfs_quota_us"));
	CHECK_EQ_INT(cgroup_cpus(&r), 1);
	CHECK(r.ram > 0 && r.cpus_affinity >= 1 && r.cpus_online >= 1);
	CHECK(cgroup_mem_bound(&r) == (r.ram < 512 * MIB ? r.ram : 512 * MIB));

	/* A container's view: its group is the mount's root, and the limit
	 * of an ancestor it does not see is in memory.stat alone. */
	fresh();
	put("proc/self/cgroup", "4:memory:/docker/abc\n3:cpu:/docker/abc\n");
	put("proc/self/mountinfo",
	    "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup "
	    "ro,memory\n"
	    "36 31 0:33 /docker/abc /sys/fs/cgroup/cpu ro - cgroup cgroup "
	    "ro,cpu\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n");
	put("sys/fs/cgroup/memory/memory.stat",
	    "hierarchical_memory_limit 805306368\n");
	put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "250000\n");
	put("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
	cgroup_probe(tmp, &r);
	CHECK(r.mem_limit == 768 * MIB);
	CHECK_EQ_STR(r.mem_file, at("sys/fs/cgroup/memory/memory.stat"));
	CHECK(r.quota_us == 250000);
	CHECK_EQ_INT(cgroup_cpus(&r),
	    r.cpus_affinity < 3 ? r.cpus_affinity : 3); /* 2.5 up to 3 */
}

/* cgroup v2: memory.max and memory.high, cpu.max; odd files skipped. */
static void
test_probe_v2(void)
{
	struct cgroup_res r;

	fresh();
	put("proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
	put("proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw shared:4 - "
				   "cgroup2 cgroup2 rw,nsdelegate\n");
	put("sys/fs/cgroup/kubepods/memory.max", "max\n");
	put("sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
	put("sys/fs/cgroup/kubepods/pod1/memory.max", "1073741824\n");
	put("sys/fs/cgroup/kubepods/pod1/memory.high", "max\n");
	put("sys/fs/cgroup/kubepods/pod1/cpu.max", "150000 100000\n");
	put("sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n");
	put("sys/fs/cgroup/kubepods/pod1/ctr/memory.high", "805306368\n");
	put("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
	cgroup_probe(tmp, &r);
	CHECK(r.mem_limit == 768 * MIB);
	CHECK_EQ_STR(
	    r.mem_file, at("sys/fs/cgroup/kubepods/pod1/ctr/memory.high"));
	CHECK(r.quota_us == 150000 && r.period_us == 100000);
	CHECK_EQ_INT(
	    cgroup_cpus(&r), r.cpus_affinity < 2 ? r.cpus_affinity : 2);

	/* A cgroup namespace: the group is "/", the mount's top, whose files
	 * are the container's own.  Garbage in one file is no limit. */
	fresh();
	put("proc/self/cgroup", "0::/\n");
	put("proc/self/mountinfo",
	    "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	put("sys/fs/cgroup/memory.max", "314572800\n");
	put("sys/fs/cgroup/memory.high", "lots\n");
	put("sys/fs/cgroup/cpu.max", "\n");
	cgroup_probe(tmp, &r);
	CHECK(r.mem_limit == 300 * MIB);
	CHECK(r.quota_us == 0);
	CHECK_EQ_INT(cgroup_cpus(&r), r.cpus_affinity);

	/* A hybrid host whose v2 hierarchy has no memory controller, and a
	 * group outside the part of the tree mounted: no limit. */
	fresh();
	put("proc/self/cgroup", "4:memory:/elsewhere\n0::/user\n");
	put("proc/self/mountinfo",
	    "35 31 0:32 /mine /sys/fs/cgroup/memory rw - cgroup cgroup "
	    "rw,memory\n"
	    "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes", "1048576\n");
	put("sys/fs/cgroup/unified/user/cgroup.procs", "1\n");
	cgroup_probe(tmp, &r);
	CHECK(r.mem_limit == CGROUP_NONE);
	CHECK_EQ_STR(r.mem_file, "");
	CHECK(cgroup_mem_bound(&r) == r.ram);

	/* Nothing at all: no /proc, no cgroup files. */
	fresh();
	cgroup_probe(tmp, &r);
	CHECK(r.mem_limit == CGROUP_NONE && r.quota_us == 0);
}

static void
test_rules(void)
{
	struct cgroup_res r = {.ram = 24 * GIB,
	    .mem_limit = 512 * MIB,
	    .cpus_online = 8,
	    .cpus_affinity = 8};
	char buf[64];

	/* memory: half of the bound less 64M, at most 2G, at least 16M. */
	CHECK(cfg_memory_default(&r) == 224 * MIB);
	CHECK(cfg_memory_ceiling(&r) == 384 * MIB);
	r.mem_limit = CGROUP_NONE;
	CHECK(cfg_memory_default(&r) == 2 * GIB);
	CHECK(cfg_memory_ceiling(&r) == 24 * GIB - 128 * MIB);
	r.ram = 1 * GIB;
	CHECK(cfg_memory_default(&r) == 480 * MIB);
	r.ram = 24 * GIB;
	r.mem_limit = 100 * MIB;
	CHECK(cfg_memory_default(&r) == 18 * MIB);
	CHECK(cfg_memory_ceiling(&r) == 18 * MIB);
	r.mem_limit = 64 * MIB;
	CHECK(cfg_memory_default(&r) == 16 * MIB);
	r.mem_limit = 1 * MIB;
	CHECK(cfg_memory_default(&r) == 16 * MIB);

	/* threads = 0: two per CPU, the quota rounded up. */
	CHECK_EQ_INT(cfg_res_threads(&r), 16);
	r.quota_us = 50000;
	r.period_us = 100000;
	CHECK_EQ_INT(cgroup_cpus(&r), 1);
	CHECK_EQ_INT(cfg_res_threads(&r), 2);
	r.quota_us = 250000;
	CHECK_EQ_INT(cgroup_cpus(&r), 3);
	r.cpus_affinity = 2;
	CHECK_EQ_INT(cgroup_cpus(&r), 2);
	r.quota_us = 1;
	r.period_us = 1000000;
	CHECK_EQ_INT(cgroup_cpus(&r), 1);

	cfg_size_text(512 * MIB, buf, sizeof(buf));
	CHECK_EQ_STR(buf, "512M");
	cfg_size_text(1536 * MIB, buf, sizeof(buf));
	CHECK_EQ_STR(buf, "1.5G");
	cfg_size_text(100ull << 40, buf, sizeof(buf));
	CHECK_EQ_STR(buf, "100T");
	cfg_size_text(4096, buf, sizeof(buf));
	CHECK_EQ_STR(buf, "4K");
	cfg_size_text(1000, buf, sizeof(buf));
	CHECK_EQ_STR(buf, "1000");
}

/* cfg_fit on a config as loaded: the default, a memory lowered (said
 * with FILE:LINE, or -o), one within the ceiling kept. */
static void
test_fit(void)
{
	struct cgroup_res r = {.ram = 24 * GIB,
	    .mem_limit = 512 * MIB,
	    .cpus_online = 2,
	    .cpus_affinity = 1};
	char info[8192], warn[8192], err[512], path[PATH_MAX];
	struct cfg *c;

	strcpy(r.mem_file, "/sys/fs/cgroup/memory/job/memory.limit_in_bytes");
	fresh();
	put("data/a/x.jpg", "");
	put("f.conf", "[mount]\nthreads = 0\n\n\nmemory = 100T\n"
		      "[dataset d]\nroot = data\n[job j]\n");
	snprintf(path, sizeof(path), "%s/f.conf", tmp);
	if (cfg_load(path, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		CHECK(!"f.conf loads");
		return;
	}
	CHECK_EQ_INT(c->mount.memory_line, 5);
	cfg_fit(c, &r, info, sizeof(info), warn, sizeof(warn));
	CHECK(c->mount.memory == 384 * MIB);
	CHECK(c->mount.threads == 2);
	CHECK(strncmp(warn, path, strlen(path)) == 0);
	CHECK(strstr(warn, ":5: memory = 100T is more than this process may "
			   "use: lowered to 384M (the cgroup's memory limit "
			   "of 512M (/sys/fs/cgroup/memory/job/"
			   "memory.limit_in_bytes)") != NULL);
	CHECK(strstr(info, "memory = 384M (lowered") != NULL);
	CHECK(
	    strstr(info, "threads = 2 (0: two per CPU; 1 CPU (1 of 2") != NULL);

	/* -o memory=: said as such; within the ceiling: kept, no word. */
	CHECK_EQ_INT(cfg_set_mount(c, "memory", "1G", err, sizeof(err)), 0);
	CHECK_EQ_INT(c->mount.memory_line, -1);
	cfg_fit(c, &r, info, sizeof(info), warn, sizeof(warn));
	CHECK(strncmp(warn, "-o memory=1G is more than", 25) == 0);
	CHECK_EQ_INT(cfg_set_mount(c, "memory", "300M", err, sizeof(err)), 0);
	CHECK_EQ_INT(cfg_set_mount(c, "threads", "3", err, sizeof(err)), 0);
	cfg_fit(c, &r, info, sizeof(info), warn, sizeof(warn));
	CHECK_EQ_STR(warn, "");
	CHECK(c->mount.memory == 300 * MIB && c->mount.threads == 3);
	CHECK(strstr(info, "threads = 3 (given;") != NULL);
	cfg_free(c);

	/* Not given: the default, from the bound. */
	put("g.conf", "[dataset d]\nroot = data\n[job j]\nbatch_size = 9\n");
	snprintf(path, sizeof(path), "%s/g.conf", tmp);
	if (cfg_load(path, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		CHECK(!"g.conf loads");
		return;
	}
	CHECK_EQ_INT(c->mount.memory_line, 0);
	CHECK_EQ_INT(c->jobs[0].batch_size_line, 4);
	cfg_fit(c, &r, info, sizeof(info), warn, sizeof(warn));
	CHECK(c->mount.memory == 224 * MIB);
	CHECK_EQ_STR(warn, "");
	CHECK(strstr(info, "memory = 224M (the default") != NULL);
	cfg_free(c);
}

int
main(void)
{
	if (mkdtemp(tmp) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_self_path();
	test_mount_of();
	test_values();
	test_probe_v1();
	test_probe_v2();
	test_rules();
	test_fit();
	test_rmtree(tmp);
	return TEST_SUMMARY();
}
