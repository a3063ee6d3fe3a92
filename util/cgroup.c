/*
 * cgroup.c - what this process is given to run on: its cgroup's memory
 * limit and CPU quota, the RAM, the CPUs of its affinity mask (see
 * cgroup.h).  Layer: util/, the bottom; libc only, no FUSE.
 *
 * The parsers read text the kernel wrote, but a container may show odd
 * files (a cgroup namespace, a bind mount of part of the tree, lxcfs):
 * each line and field is checked on its own, a line that does not parse
 * is skipped, and a value that does not parse is no limit.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "util/cgroup.h"

/* A field of a line: len bytes at s. */
struct span {
	const char *s;
	size_t len;
};

static bool
span_is(struct span a, const char *word)
{
	return a.len == strlen(word) && memcmp(a.s, word, a.len) == 0;
}

/* The next line of [*p, end) without its newline; false at the end. */
static bool
next_line(const char **p, const char *end, struct span *line)
{
	const char *nl;

	if (*p >= end)
		return false;
	nl = memchr(*p, '\n', (size_t)(end - *p));
	line->s = *p;
	line->len = (size_t)((nl ? nl : end) - *p);
	*p = nl ? nl + 1 : end;
	return true;
}

/* Whether word is one of the comma-separated items of list. */
static bool
in_list(struct span list, const char *word)
{
	const char *p = list.s, *end = list.s + list.len;

	while (p <= end) {
		const char *c = memchr(p, ',', (size_t)(end - p));
		struct span item = {p, (size_t)((c ? c : end) - p)};

		if (span_is(item, word))
			return true;
		if (c == NULL)
			break;
		p = c + 1;
	}
	return false;
}

/* An absolute path without NULs, "." or ".." parts, into out. */
static int
copy_path(struct span p, char *out, size_t outlen)
{
	if (p.len == 0 || p.s[0] != '/' || p.len >= outlen ||
	    memchr(p.s, '\0', p.len) != NULL)
		return -EINVAL;
	for (size_t i = 0; i < p.len;) {
		size_t j = i + 1;

		while (j < p.len && p.s[j] != '/')
			j++;
		struct span part = {p.s + i + 1, j - i - 1};
		if (span_is(part, ".") || span_is(part, ".."))
			return -EINVAL;
		i = j;
	}
	memcpy(out, p.s, p.len);
	out[p.len] = '\0';
	return 0;
}

int
cgroup_self_path(
    const char *text, size_t len, const char *ctrl, char *path, size_t plen)
{
	const char *p = text, *end = text + len;
	struct span line;

	while (next_line(&p, end, &line)) {
		const char *c1 = memchr(line.s, ':', line.len), *c2;
		struct span id, ctrls;

		if (c1 == NULL ||
		    (c2 = memchr(c1 + 1, ':',
			 (size_t)(line.s + line.len - c1 - 1))) == NULL)
			continue;
		id.s = line.s;
		id.len = (size_t)(c1 - line.s);
		ctrls.s = c1 + 1;
		ctrls.len = (size_t)(c2 - c1 - 1);
		/* v2: "0::PATH"; v1: the controller among the line's. */
		if (ctrl == NULL ? ctrls.len != 0 || !span_is(id, "0")
				 : !in_list(ctrls, ctrl))
			continue;
		return copy_path(
		    (struct span){c2 + 1, (size_t)(line.s + line.len - c2 - 1)},
		    path, plen);
	}
	return -ENOENT;
}

/* s with mountinfo's \ooo escapes undone, into out. */
static int
unescape(struct span s, char *out, size_t outlen)
{
	size_t n = 0;

	for (size_t i = 0; i < s.len; i++) {
		char c = s.s[i];

		if (c == '\\' && i + 3 < s.len && s.s[i + 1] >= '0' &&
		    s.s[i + 1] <= '3' && s.s[i + 2] >= '0' &&
		    s.s[i + 2] <= '7' && s.s[i + 3] >= '0' &&
		    s.s[i + 3] <= '7') {
			c = (char)((s.s[i + 1] - '0') * 64 +
				   (s.s[i + 2] - '0') * 8 + (s.s[i + 3] - '0'));
			i += 3;
		}
		if (c == '\0' || n + 1 >= outlen)
			return -EINVAL;
		out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}

/* Whether the group at path lies in the part of the tree under root. */
static bool
holds(const char *root, const char *path)
{
	size_t n = strlen(root);

	if (strcmp(root, "/") == 0)
		return true;
	return strncmp(path, root, n) == 0 &&
	       (path[n] == '\0' || path[n] == '/');
}

#define MI_FIELDS 64

int
cgroup_mount_of(const char *text, size_t len, const char *ctrl,
    const char *path, char *mnt, size_t mlen, char *root, size_t rlen)
{
	const char *p = text, *end = text + len;
	char m[CGROUP_PATH_MAX], r[CGROUP_PATH_MAX];
	struct span line, f[MI_FIELDS];

	while (next_line(&p, end, &line)) {
		size_t nf = 0, sep = 0;

		/* Fields: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS]
		 * - FSTYPE SOURCE SUPEROPTIONS. */
		for (size_t i = 0; i < line.len && nf < MI_FIELDS;) {
			size_t j = i;

			while (j < line.len && line.s[j] != ' ')
				j++;
			if (j > i)
				f[nf++] = (struct span){line.s + i, j - i};
			i = j + 1;
		}
		for (size_t i = 6; i < nf && sep == 0; i++)
			if (span_is(f[i], "-"))
				sep = i;
		if (sep == 0 || sep + 1 >= nf)
			continue;
		if (ctrl == NULL
			? !span_is(f[sep + 1], "cgroup2")
			: !span_is(f[sep + 1], "cgroup") || sep + 3 >= nf ||
			      !in_list(f[sep + 3], ctrl))
			continue;
		if (unescape(f[3], r, sizeof(r)) != 0 ||
		    unescape(f[4], m, sizeof(m)) != 0 || r[0] != '/' ||
		    m[0] != '/' || !holds(r, path))
			continue;
		if (strlen(m) >= mlen || strlen(r) >= rlen)
			return -EINVAL;
		strcpy(mnt, m);
		strcpy(root, r);
		return 0;
	}
	return -ENOENT;
}

/* An unsigned decimal of all of s; v: CGROUP_NONE past CGROUP_HUGE. */
static bool
decimal(struct span s, uint64_t *v)
{
	uint64_t x = 0;

	if (s.len == 0)
		return false;
	for (size_t i = 0; i < s.len; i++) {
		if (s.s[i] < '0' || s.s[i] > '9')
			return false;
		if (x < CGROUP_HUGE)
			x = x * 10 + (uint64_t)(s.s[i] - '0');
	}
	*v = x >= CGROUP_HUGE ? CGROUP_NONE : x;
	return true;
}

/* s less one trailing newline. */
static struct span
chomp(const char *text, size_t len)
{
	if (len > 0 && text[len - 1] == '\n')
		len--;
	return (struct span){text, len};
}

int
cgroup_parse_limit(const char *text, size_t len, uint64_t *v)
{
	struct span s = chomp(text, len);
	uint64_t x;

	if (span_is(s, "max") || span_is(s, "-1")) {
		*v = CGROUP_NONE;
		return 0;
	}
	if (!decimal(s, &x))
		return -EINVAL;
	*v = x;
	return 0;
}

int
cgroup_parse_cpu_max(
    const char *text, size_t len, uint64_t *quota, uint64_t *period)
{
	struct span s = chomp(text, len), q, per;
	const char *sp = memchr(s.s, ' ', s.len);
	uint64_t qv = 0, pv;

	if (sp == NULL)
		return -EINVAL;
	q = (struct span){s.s, (size_t)(sp - s.s)};
	per = (struct span){sp + 1, (size_t)(s.s + s.len - sp - 1)};
	if (!decimal(per, &pv) || pv == 0 || pv == CGROUP_NONE)
		return -EINVAL;
	if (!span_is(q, "max") &&
	    (!decimal(q, &qv) || qv == 0 || qv == CGROUP_NONE))
		return -EINVAL;
	*quota = qv;
	*period = pv;
	return 0;
}

int
cgroup_stat_value(const char *text, size_t len, const char *key, uint64_t *v)
{
	const char *p = text, *end = text + len;
	struct span line;

	while (next_line(&p, end, &line)) {
		const char *sp = memchr(line.s, ' ', line.len);

		if (sp == NULL ||
		    !span_is((struct span){line.s, (size_t)(sp - line.s)}, key))
			continue;
		return decimal((struct span){sp + 1,
				   (size_t)(line.s + line.len - sp - 1)},
			   v)
			   ? 0
			   : -EINVAL;
	}
	return -ENOENT;
}

/* ---- the probe ----------------------------------------------------- */

/* The whole of file path (at most CGROUP_FILE_MAX bytes), malloc'd. */
static char *
slurp(const char *path, size_t *len)
{
	size_t n = 0, cap = 4096;
	char *buf = malloc(cap), *nb;
	int fd;

	if (buf == NULL)
		return NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0) {
		free(buf);
		return NULL;
	}
	for (;;) {
		ssize_t got;

		if (n == cap) {
			if (cap >= CGROUP_FILE_MAX ||
			    (nb = realloc(buf, cap * 2)) == NULL)
				break; /* what was read is what there is */
			buf = nb;
			cap *= 2;
		}
		if ((got = read(fd, buf + n, cap - n)) < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	*len = n;
	return buf;
}

/* A group's directory and the top of its hierarchy's mount. */
struct where {
	char dir[CGROUP_PATH_MAX];
	size_t top; /* strlen of the mount point's directory in dir */
};

/* Where the group of ctrl (NULL: v2) is, under fsroot; false: nowhere. */
static bool
find_group(const char *fsroot, const char *self, size_t selflen, const char *mi,
    size_t milen, const char *ctrl, struct where *w)
{
	char path[CGROUP_PATH_MAX], mnt[CGROUP_PATH_MAX], root[CGROUP_PATH_MAX];
	const char *rel;
	int n;

	if (cgroup_self_path(self, selflen, ctrl, path, sizeof(path)) != 0 ||
	    cgroup_mount_of(mi, milen, ctrl, path, mnt, sizeof(mnt), root,
		sizeof(root)) != 0)
		return false;
	rel = strcmp(root, "/") == 0 ? path : path + strlen(root);
	if (strcmp(rel, "/") == 0)
		rel = "";
	if (strcmp(mnt, "/") == 0)
		mnt[0] = '\0';
	n = snprintf(w->dir, sizeof(w->dir), "%s%s", fsroot, mnt);
	if (n < 0 || (size_t)n >= sizeof(w->dir))
		return false;
	w->top = (size_t)n;
	n = snprintf(w->dir, sizeof(w->dir), "%s%s%s", fsroot, mnt, rel);
	return n >= 0 && (size_t)n < sizeof(w->dir);
}

/* Read dir/name; NULL when it cannot be read. */
static char *
read_in(const char *dir, const char *name, char *path, size_t plen, size_t *len)
{
	int n = snprintf(path, plen, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= plen ? NULL : slurp(path, len);
}

static void
mem_consider(struct cgroup_res *r, const char *dir, const char *name)
{
	char path[CGROUP_PATH_MAX], *t;
	uint64_t v;
	size_t len;

	if ((t = read_in(dir, name, path, sizeof(path), &len)) == NULL)
		return;
	if ((strcmp(name, "memory.stat") == 0
		    ? cgroup_stat_value(t, len, "hierarchical_memory_limit", &v)
		    : cgroup_parse_limit(t, len, &v)) == 0 &&
	    v < r->mem_limit) {
		r->mem_limit = v;
		snprintf(r->mem_file, sizeof(r->mem_file), "%s", path);
	}
	free(t);
}

/* A quota of q microseconds a period of p: the smallest is kept. */
static void
cpu_offer(struct cgroup_res *r, uint64_t q, uint64_t p, const char *path)
{
	if (q == 0 || q == CGROUP_NONE || p == 0 || p == CGROUP_NONE)
		return;
	if (r->quota_us == 0 ||
	    (double)q / (double)p <
		(double)r->quota_us / (double)r->period_us) {
		r->quota_us = q;
		r->period_us = p;
		snprintf(r->cpu_file, sizeof(r->cpu_file), "%s", path);
	}
}

static void
cpu_consider(struct cgroup_res *r, const char *dir, bool v2)
{
	char path[CGROUP_PATH_MAX], ppath[CGROUP_PATH_MAX], *t, *pt;
	uint64_t q, p;
	size_t len, plen;

	if ((t = read_in(dir, v2 ? "cpu.max" : "cpu.cfs_quota_us", path,
		 sizeof(path), &len)) == NULL)
		return;
	if (v2) {
		if (cgroup_parse_cpu_max(t, len, &q, &p) == 0)
			cpu_offer(r, q, p, path);
	} else if (cgroup_parse_limit(t, len, &q) == 0 &&
		   (pt = read_in(dir, "cpu.cfs_period_us", ppath, sizeof(ppath),
			&plen)) != NULL) {
		if (cgroup_parse_limit(pt, plen, &p) == 0)
			cpu_offer(r, q, p, path);
		free(pt);
	}
	free(t);
}

/* Each group from w's up to its mount's top, nearest first. */
static void
walk(struct cgroup_res *r, struct where *w, const char *const *mem, int cpu)
{
	for (;;) {
		char *slash;

		for (size_t i = 0; mem && mem[i]; i++)
			mem_consider(r, w->dir, mem[i]);
		if (cpu >= 0)
			cpu_consider(r, w->dir, cpu == 2);
		if (strlen(w->dir) <= w->top ||
		    (slash = strrchr(w->dir, '/')) == NULL ||
		    (size_t)(slash - w->dir) < w->top)
			break;
		*slash = '\0';
	}
}

static unsigned
affinity_cpus(void)
{
	for (int n = 1024; n <= (1 << 20); n *= 2) {
		cpu_set_t *s = CPU_ALLOC((size_t)n);
		size_t size = CPU_ALLOC_SIZE((size_t)n);

		if (s == NULL)
			break;
		if (sched_getaffinity(0, size, s) == 0) {
			int c = CPU_COUNT_S(size, s);

			CPU_FREE(s);
			return c > 0 ? (unsigned)c : 1;
		}
		CPU_FREE(s);
		if (errno != EINVAL)
			break;
	}
	return 0;
}

void
cgroup_probe(const char *root, struct cgroup_res *r)
{
	static const char *const v2mem[] = {"memory.max", "memory.high", NULL};
	static const char *const v1mem[] = {"memory.limit_in_bytes", NULL};
	char path[CGROUP_PATH_MAX], *self, *mi;
	size_t selflen, milen;
	struct sysinfo si;
	struct where w;
	long online = sysconf(_SC_NPROCESSORS_ONLN);

	if (root == NULL)
		root = "";
	memset(r, 0, sizeof(*r));
	r->mem_limit = CGROUP_NONE;
	if (sysinfo(&si) == 0)
		r->ram = (uint64_t)si.totalram * si.mem_unit;
	r->cpus_online = online > 0 ? (unsigned)online : 1;
	if ((r->cpus_affinity = affinity_cpus()) == 0)
		r->cpus_affinity = r->cpus_online;
	snprintf(path, sizeof(path), "%s/proc/self/cgroup", root);
	self = slurp(path, &selflen);
	snprintf(path, sizeof(path), "%s/proc/self/mountinfo", root);
	mi = slurp(path, &milen);
	if (self != NULL && mi != NULL) {
		if (find_group(root, self, selflen, mi, milen, NULL, &w))
			walk(r, &w, v2mem, 2);
		if (find_group(root, self, selflen, mi, milen, "memory", &w)) {
			walk(r, &w, v1mem, -1);
			/* Ancestors a container does not see, too: the
			 * process's own group again, which the walk left. */
			if (find_group(
				root, self, selflen, mi, milen, "memory", &w))
				mem_consider(r, w.dir, "memory.stat");
		}
		if (find_group(root, self, selflen, mi, milen, "cpu", &w))
			walk(r, &w, NULL, 1);
	}
	free(self);
	free(mi);
}

uint64_t
cgroup_mem_bound(const struct cgroup_res *r)
{
	if (r->ram == 0)
		return r->mem_limit;
	return r->mem_limit < r->ram ? r->mem_limit : r->ram;
}

unsigned
cgroup_cpus(const struct cgroup_res *r)
{
	unsigned n = r->cpus_affinity > 0 ? r->cpus_affinity : 1;

	if (r->quota_us > 0 && r->period_us > 0) {
		uint64_t q = r->quota_us / r->period_us +
			     (r->quota_us % r->period_us != 0);

		if (q < n)
			n = (unsigned)(q > 0 ? q : 1);
	}
	return n;
}
