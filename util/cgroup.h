/*
 * cgroup.h - what this process is given to run on, as Slurm, Kubernetes,
 * systemd, a container runtime or taskset give it.  Layer: util/, the
 * bottom (libc only; no FUSE): the config's defaults (core/) and the
 * workers (engine/) ask it.
 *
 *  - memory: the smallest limit of the process's cgroup and of each
 *    ancestor visible under the cgroup mount (the nearest limited one
 *    counts, and any smaller one above it): cgroup v2's memory.max and
 *    memory.high, v1's memory.limit_in_bytes and, in the process's own
 *    group, memory.stat's hierarchical_memory_limit (which also covers
 *    the ancestors a container does not see); and the machine's RAM;
 *  - CPUs: those of its affinity mask (sched_getaffinity: taskset, a
 *    cpuset), and the smallest CPU quota on the same path (v2 cpu.max,
 *    v1 cpu.cfs_quota_us over cpu.cfs_period_us).
 *
 * The process's group is its line of /proc/self/cgroup ("0::PATH" for
 * v2, "ID:CONTROLLERS:PATH" for v1), taken relative to the root of the
 * hierarchy's mount in /proc/self/mountinfo (fstype cgroup2, or cgroup
 * with the controller among its options), which is where a container
 * sees its own part of the tree.  What cannot be found or read, or
 * reads as garbage (a container can show odd files), is no limit.  The
 * parsers take the bytes as read, any bytes, and are fuzzed
 * (fuzz/fuzz_cgroup.c).
 *
 * Thread safe: no state.  Out-parameters are set on success only.
 */
#ifndef FEEDFS_CGROUP_H
#define FEEDFS_CGROUP_H

#include <stddef.h>
#include <stdint.h>

/* No limit (a limit file's "max", or none found). */
#define CGROUP_NONE UINT64_MAX
/* Limits from here up read as none (v1 writes its "unlimited" as
 * PAGE_COUNTER_MAX pages, about 2^63 bytes). */
#define CGROUP_HUGE (1ull << 60)
/* A file of ours to read whole: limits, mountinfo (many mounts on a
 * Kubernetes node), /proc/self/cgroup. */
#define CGROUP_FILE_MAX (4u << 20)
#define CGROUP_PATH_MAX 4096

struct cgroup_res {
	uint64_t ram;	    /* bytes of RAM (sysinfo); 0: unknown */
	uint64_t mem_limit; /* bytes, the smallest limit; CGROUP_NONE */
	char mem_file[CGROUP_PATH_MAX]; /* the file that set it, or "" */
	unsigned cpus_online;		/* the machine's (sysconf) */
	unsigned cpus_affinity;		/* in the affinity mask, >= 1 */
	/* The smallest quota: quota_us of period_us; quota_us 0: none. */
	uint64_t quota_us, period_us;
	char cpu_file[CGROUP_PATH_MAX]; /* the file that set it, or "" */
};

/*
 * Fill r: every path is taken under root (NULL or "": the real ones; a
 * test's tree of proc/self/cgroup, proc/self/mountinfo and the cgroup
 * files otherwise).  RAM and the affinity are the process's own.
 * Cannot fail: what is not found is no limit.
 */
void cgroup_probe(const char *root, struct cgroup_res *r);

/* The memory the process may use: its limit or the RAM, the smaller. */
uint64_t cgroup_mem_bound(const struct cgroup_res *r);

/* The CPUs it may use: those of its mask, or its quota rounded up,
 * the fewer; at least 1. */
unsigned cgroup_cpus(const struct cgroup_res *r);

/*
 * The parsers, on len bytes of a file as read (no NUL needed).  Each
 * returns 0, -ENOENT (no such entry) or -EINVAL (garbage), and sets its
 * outputs only on 0.
 *
 * cgroup_self_path: the PATH of /proc/self/cgroup's line for controller
 * ctrl (v1: ctrl among the line's controllers), or for ctrl NULL the v2
 * line ("0::PATH").  A PATH is absolute, without "." or ".." parts.
 */
int cgroup_self_path(
    const char *text, size_t len, const char *ctrl, char *path, size_t plen);
/*
 * The mount of the hierarchy for ctrl (NULL: cgroup2) in mountinfo's
 * text whose root holds path (the first such, else -ENOENT): its mount
 * point and root, \ooo escapes undone.
 */
int cgroup_mount_of(const char *text, size_t len, const char *ctrl,
    const char *path, char *mnt, size_t mlen, char *root, size_t rlen);
/*
 * A limit file: "max" (v2), a decimal, or "-1" (v1's no quota), each
 * with an optional newline.  *v: bytes or microseconds, CGROUP_NONE for
 * max, -1 and values of CGROUP_HUGE and more.
 */
int cgroup_parse_limit(const char *text, size_t len, uint64_t *v);
/* v2 cpu.max: "QUOTA PERIOD" or "max PERIOD" (*quota 0: none). */
int cgroup_parse_cpu_max(
    const char *text, size_t len, uint64_t *quota, uint64_t *period);
/* The value of "KEY VALUE" lines (v1 memory.stat) for key. */
int cgroup_stat_value(
    const char *text, size_t len, const char *key, uint64_t *v);

#endif
