/*
 * config_res.c - the model (core/): the [mount] values that follow what
 * the process is given, its cgroup's memory limit, the RAM, its CPUs and
 * CPU quota (util/cgroup.h probes them; config.h states the rules, and
 * feedfs.conf(5) says them to users).
 *
 * Why these rules.  `memory` bounds what the engine holds for readers
 * (and, an eighth of it, the cache's memtables and block cache), but the
 * cgroup is charged for more: the daemon's code, libraries, stacks and
 * FUSE buffers, what glibc keeps of freed memory (about 50 MiB in all,
 * measured under two readers), and the page cache of the files the job
 * reads and writes: the dataset's images, the cache's files written
 * (dirty until written back, which reclaim must wait for) and read by
 * warm epochs.  Half of the limit, less 64 MiB, leaves the rest to them
 * with room; above 4 GiB of limit the old default of 2G holds.  A
 * `memory` given is the user's to choose up to the limit less 128 MiB;
 * past that the first pages the daemon touches would be its own OOM kill.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/config_int.h"
#include "util/cgroup.h"

#define MIN_MEMORY (16ull << 20) /* as config_keys.c's */

uint64_t
cfg_memory_default(const struct cgroup_res *res)
{
	uint64_t l = cgroup_mem_bound(res), m;

	m = l > CFG_MEMORY_SLACK ? (l - CFG_MEMORY_SLACK) / 2 : 0;
	if (m > CFG_MEMORY_DEFAULT_MAX)
		m = CFG_MEMORY_DEFAULT_MAX;
	return m < MIN_MEMORY ? MIN_MEMORY : m;
}

uint64_t
cfg_memory_ceiling(const struct cgroup_res *res)
{
	uint64_t l = cgroup_mem_bound(res), d = cfg_memory_default(res);

	if (l == CGROUP_NONE)
		return CGROUP_NONE;
	return l > CFG_MEMORY_KEEP && l - CFG_MEMORY_KEEP > d
		   ? l - CFG_MEMORY_KEEP
		   : d;
}

unsigned
cfg_res_threads(const struct cgroup_res *res)
{
	return 2 * cgroup_cpus(res);
}

unsigned
cfg_threads(const struct cfg_mount *m)
{
	struct cgroup_res res;

	if (m->threads)
		return (unsigned)m->threads;
	cgroup_probe(NULL, &res);
	return cfg_res_threads(&res);
}

void
cfg_size_text(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (u < 3 && bytes >= (1024ull << (10 * (u + 1))))
		u++;
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, bytes);
	else if (bytes % (1ull << (10 * (u + 1))) == 0)
		snprintf(buf, len, "%" PRIu64 "%c", bytes >> (10 * (u + 1)),
		    units[u]);
	else
		snprintf(buf, len, "%.1f%c",
		    (double)bytes / (double)(1ull << (10 * (u + 1))), units[u]);
}

/* "the cgroup's limit of 512M (FILE)" or "the RAM, 24G": what L is. */
static void
bound_text(const struct cgroup_res *res, char *buf, size_t len)
{
	char sz[32];

	cfg_size_text(cgroup_mem_bound(res), sz, sizeof(sz));
	if (res->mem_limit != CGROUP_NONE &&
	    (res->ram == 0 || res->mem_limit <= res->ram))
		snprintf(buf, len, "the cgroup's memory limit of %s (%s)", sz,
		    res->mem_file);
	else
		snprintf(buf, len, "the RAM, %s (no lower cgroup limit)", sz);
}

/* "CPUs: N (2 of 8 in its affinity mask, a quota of 0.5 CPU)". */
static void
cpu_text(const struct cgroup_res *res, char *buf, size_t len)
{
	int n = snprintf(buf, len,
	    "%u CPU%s (%u of %u online in its "
	    "affinity mask",
	    cgroup_cpus(res), cgroup_cpus(res) == 1 ? "" : "s",
	    res->cpus_affinity, res->cpus_online);

	if (n < 0 || (size_t)n >= len)
		return;
	if (res->quota_us > 0)
		snprintf(buf + n, len - (size_t)n,
		    ", a quota of %.2f CPU in %s)",
		    (double)res->quota_us / (double)res->period_us,
		    res->cpu_file);
	else
		snprintf(buf + n, len - (size_t)n, ", no CPU quota)");
}

void
cfg_fit(struct cfg *c, const struct cgroup_res *res, char *info, size_t ilen,
    char *warn, size_t wlen)
{
	struct cfg_mount *m = &c->mount;
	char bound[CGROUP_PATH_MAX + 128], cpus[CGROUP_PATH_MAX + 128];
	char was[32], now[32], where[CGROUP_PATH_MAX + 64];
	uint64_t ceiling = cfg_memory_ceiling(res);
	bool threads_auto = m->threads == 0;
	const char *how = "given";

	bound_text(res, bound, sizeof(bound));
	cpu_text(res, cpus, sizeof(cpus));
	warn[0] = '\0';
	if (threads_auto)
		m->threads = cfg_res_threads(res);
	if (m->memory_line == 0) {
		m->memory = cfg_memory_default(res);
		how = "the default: half of the bound less 64M, at most 2G";
	} else if (m->memory > ceiling) {
		cfg_size_text(m->memory, was, sizeof(was));
		cfg_size_text(ceiling, now, sizeof(now));
		if (m->memory_line > 0)
			snprintf(where, sizeof(where), "%s:%d: memory = %s",
			    c->path, m->memory_line, was);
		else
			snprintf(where, sizeof(where), "-o memory=%s", was);
		snprintf(warn, wlen,
		    "%s is more than this process may use: lowered to %s "
		    "(%s, less 128M for what the memory budget does not "
		    "count: see feedfs.conf(5))",
		    where, now, bound);
		m->memory = ceiling;
		how = "lowered";
	}
	cfg_size_text(m->memory, now, sizeof(now));
	snprintf(info, ilen,
	    "resources: memory = %s (%s; the bound is %s); threads = %" PRIu64
	    " (%s; %s)",
	    now, how, bound, m->threads,
	    threads_auto ? "0: two per CPU" : "given", cpus);
}
