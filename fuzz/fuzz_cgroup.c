/*
 * fuzz_cgroup - libFuzzer target: the parsers of what a process is given
 * (util/cgroup.c), on the files a container may show garbled:
 * /proc/self/cgroup, /proc/self/mountinfo, the limit files (memory.max,
 * memory.limit_in_bytes, cpu.cfs_quota_us), cpu.max and memory.stat.
 *
 * The input is any such file's bytes; every parser reads all of it.
 * Each must give one of its stated returns, set its outputs only on
 * success, and give a path that is absolute, NUL-terminated within the
 * buffer and free of "." and ".." parts; never a crash.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/cgroup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_ret(int r)
{
	if (r != 0 && r != -ENOENT && r != -EINVAL)
		abort(); /* not a stated return */
}

/* An absolute path with no "." or ".." part, its NUL within n bytes. */
static void
check_path(const char *p, size_t n)
{
	const char *s;

	if (memchr(p, '\0', n) == NULL || p[0] != '/')
		abort();
	for (s = p; (s = strstr(s, "/.")) != NULL; s++)
		if (s[2] == '/' || s[2] == '\0' ||
		    (s[2] == '.' && (s[3] == '/' || s[3] == '\0')))
			abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const ctrls[] = {NULL, "memory", "cpu", ""};
	const char *t = (const char *)data;
	char path[64], mnt[64], root[64];
	uint64_t v, q, p;
	int r;

	for (size_t i = 0; i < sizeof(ctrls) / sizeof(ctrls[0]); i++) {
		memset(path, 'x', sizeof(path));
		r = cgroup_self_path(t, size, ctrls[i], path, sizeof(path));
		check_ret(r);
		if (r == 0)
			check_path(path, sizeof(path));
		else if (path[0] != 'x')
			abort(); /* set on failure */
		memset(mnt, 'x', sizeof(mnt));
		r = cgroup_mount_of(t, size, ctrls[i], i % 2 ? "/a/b" : "/",
		    mnt, sizeof(mnt), root, sizeof(root));
		check_ret(r);
		if (r == 0 && (memchr(mnt, '\0', sizeof(mnt)) == NULL ||
				  memchr(root, '\0', sizeof(root)) == NULL ||
				  mnt[0] != '/' || root[0] != '/'))
			abort();
		if (r != 0 && mnt[0] != 'x')
			abort();
	}
	v = 7;
	r = cgroup_parse_limit(t, size, &v);
	check_ret(r);
	if (r == 0 ? v >= CGROUP_HUGE && v != CGROUP_NONE : v != 7)
		abort();
	q = p = 7;
	r = cgroup_parse_cpu_max(t, size, &q, &p);
	check_ret(r);
	if (r == 0 ? p == 0 || p >= CGROUP_HUGE || q >= CGROUP_HUGE
		   : q != 7 || p != 7)
		abort();
	v = 7;
	r = cgroup_stat_value(t, size, "hierarchical_memory_limit", &v);
	check_ret(r);
	if (r != 0 && v != 7)
		abort();
	return 0;
}
