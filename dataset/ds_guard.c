/*
 * ds_guard.c - layer: dataset/ (the datasets), under ds_scan.c and ds_safeopen.c
 * (calls nothing of the index).  What a symbolic link out of a dataset's
 * root may lead a privileged feedfs to (issue 36).
 *
 * A feedfs that can read what others cannot (euid 0, or CAP_DAC_OVERRIDE
 * or CAP_DAC_READ_SEARCH) must not become a way for the owner of a link
 * in a dataset to read what they could not read themselves: a link
 * to /etc/shadow, or to another user's photos, in a dataset that root
 * mounts.  So a link that leaves the root, made by a user other than
 * root, is followed only to a file that user may read, on a path whose
 * directories that user may search, judged by the mode bits against the
 * user's uid, primary group and supplementary groups (getgrouplist).
 * A file or directory with a POSIX ACL counts only when the user owns it
 * (its owner bits hold whatever the ACL says to others; judging the
 * entries is left undone, on the refusing side).  What lies below a
 * directory reached that way is judged for the same user, and a file is
 * judged again when it is opened (ds_sample_open), so a file replaced
 * after the scan is refused as well.  Inside the root nothing is judged:
 * whoever mounts a tree serves what it holds.
 */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/ds_int.h"

#define MAX_GROUPS 65536 /* NGROUPS_MAX */

bool
ds_guard_active(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	const uint32_t dac =
	    (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH);

	if (geteuid() == 0)
		return true;
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) != 0)
		return false;
	return (data[0].effective & dac) != 0;
}

int
ds_guard_of(struct dataset *ds, uint32_t uid, uint32_t *g)
{
	struct ds_guard *v, *n;
	struct passwd pw, *res = NULL;
	char buf[4096];
	gid_t *groups = NULL;
	int ng;

	for (size_t i = 0; i < ds->nguards; i++)
		if (ds->guards[i].uid == uid) {
			*g = (uint32_t)i + 1;
			return 0;
		}
	if ((v = realloc(ds->guards, (ds->nguards + 1) * sizeof(*v))) == NULL)
		return -ENOMEM;
	ds->guards = v;
	n = &v[ds->nguards];
	memset(n, 0, sizeof(*n));
	n->uid = uid;
	n->gid = UINT32_MAX; /* no user of that uid: no group counts */
	if (getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &res) == 0 &&
	    res != NULL) {
		n->gid = (uint32_t)pw.pw_gid;
		ng = 64;
		for (;;) {
			gid_t *t = realloc(groups, (size_t)ng * sizeof(*t));
			int want = ng;

			if (t == NULL) {
				free(groups);
				return -ENOMEM;
			}
			groups = t;
			if (getgrouplist(
				pw.pw_name, pw.pw_gid, groups, &want) >= 0) {
				ng = want;
				break;
			}
			if (want <= ng || want > MAX_GROUPS) {
				ng = 0; /* cannot tell: no group counts */
				break;
			}
			ng = want;
		}
		if (ng > 0 && (n->groups = malloc(
				   (size_t)ng * sizeof(*n->groups))) == NULL) {
			free(groups);
			return -ENOMEM;
		}
		for (int i = 0; i < ng; i++)
			n->groups[i] = (uint32_t)groups[i];
		n->ngroups = (size_t)(ng > 0 ? ng : 0);
		free(groups);
	}
	*g = (uint32_t)++ds->nguards;
	return 0;
}

/* Whether the user of guard u is in group gid. */
static bool
in_group(const struct ds_guard *u, uint32_t gid)
{
	if (u->gid == gid)
		return true;
	for (size_t i = 0; i < u->ngroups; i++)
		if (u->groups[i] == gid)
			return true;
	return false;
}

bool
ds_guard_allows(const struct dataset *ds, uint32_t g, const struct stat *st,
    bool acl, unsigned want)
{
	const struct ds_guard *u;

	if (g == 0)
		return true;
	if (g > ds->nguards)
		return false;
	u = &ds->guards[g - 1];
	if (u->uid == 0)
		return true;
	/* As the kernel's rule: the owner's bits, else the group's, else
	 * the others'; never a union of them. */
	if ((uint32_t)st->st_uid == u->uid)
		return ((st->st_mode >> 6) & want) == want;
	if (acl)
		return false;
	if (in_group(u, (uint32_t)st->st_gid))
		return ((st->st_mode >> 3) & want) == want;
	return (st->st_mode & want) == want;
}

bool
ds_has_acl(int fd, const char *path)
{
	ssize_t n = fd >= 0
			? fgetxattr(fd, "system.posix_acl_access", NULL, 0)
			: lgetxattr(path, "system.posix_acl_access", NULL, 0);

	/* ENODATA: none; ENOTSUP: the filesystem has no ACLs. */
	return n >= 0 || (errno != ENODATA && errno != ENOTSUP);
}

/* May u search (x) the directory at path, given no link on it? */
static bool
may_search(const struct dataset *ds, uint32_t g, const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
	       ds_guard_allows(ds, g, &st, ds_has_acl(-1, path), 1);
}

bool
ds_guard_path(struct dataset *ds, uint32_t g, const char *path)
{
	struct ds_guard *u;
	struct stat st;
	const char *slash = strrchr(path, '/');
	size_t dlen;
	char *dir;

	if (g == 0)
		return true;
	if (g > ds->nguards || path[0] != '/' || slash == NULL)
		return false;
	u = &ds->guards[g - 1];
	if (lstat(path, &st) != 0 ||
	    !ds_guard_allows(
		ds, g, &st, ds_has_acl(-1, path), S_ISDIR(st.st_mode) ? 5 : 4))
		return false;
	dlen = slash == path ? 1 : (size_t)(slash - path);
	/* The directories above it: the last ones found fine are kept. */
	if (u->okdir != NULL && strlen(u->okdir) == dlen &&
	    memcmp(u->okdir, path, dlen) == 0)
		return true;
	if ((dir = strndup(path, dlen)) == NULL)
		return false;
	for (char *p = dir;;) {
		char *next = strchr(p + 1, '/');
		char keep;

		if (next == NULL) {
			if (!may_search(ds, g, dir))
				goto no;
			break;
		}
		keep = *next;
		*next = '\0';
		if (!may_search(ds, g, next == dir ? "/" : dir)) {
			*next = keep;
			goto no;
		}
		*next = keep;
		p = next;
	}
	if (!may_search(ds, g, "/"))
		goto no;
	free(u->okdir);
	u->okdir = dir; /* transferred */
	return true;
no:
	free(dir);
	return false;
}
