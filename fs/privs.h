/*
 * privs.h - fs/ (the FUSE glue), under main.c: a mount that root starts
 * for a user, -o uid=USER[,gid=GROUP] (feedfs(8), "Many users").
 *
 * The daemon becomes the user before it reads anything of the config or
 * the dataset: privs_begin forks a helper that stays root and parses
 * nothing, then drops every privilege of the daemon (supplementary
 * groups, gid, uid: real, effective and saved) and checks that it cannot
 * get root back.  When the daemon is ready to serve, privs_mount asks the
 * helper for the mount: the helper opens /dev/fuse, mounts it on the
 * mountpoint it opened before the drop (user_id= and group_id= the
 * user's, so the mount is the user's as if the user had mounted it), and
 * hands the descriptor over (SCM_RIGHTS); then it exits.  At the end
 * privs_unmount detaches the mount as its user (fusermount3 -u -z),
 * unless it is gone already.
 *
 * Not thread safe: main calls these before any thread (privs_unmount
 * after the loop).
 */
#ifndef FEEDFS_PRIVS_H
#define FEEDFS_PRIVS_H

#include <stdbool.h>
#include <sys/types.h>

struct fuse_session;

struct privs {
	char *uid_opt, *gid_opt; /* -o uid=, gid= as given */
	char *user_opt;		 /* -o user= as given (refused, see below) */
	bool drop;		 /* root, for another user: a helper mounts */
	uid_t uid;
	gid_t gid;
	pid_t helper; /* > 0 until the mount is made or refused */
	int sock;     /* to the helper */
	bool mounted; /* by the helper, for us */
};

/*
 * A token of -o that is ours: uid=, gid= or user= (kept, checked by
 * privs_resolve).  1 taken, 0 not ours, -ENOMEM.
 */
int privs_opt(struct privs *p, const char *tok);
/*
 * What the tokens ask, checked: names to ids, gid= alone refused, uid= of
 * another user refused unless root, user= refused unless it names the
 * caller (what mount(8) records for a "user" fstab line).  0, or -EINVAL
 * with err.
 */
int privs_resolve(struct privs *p, char *err, size_t errlen);
/*
 * Become the user (with privs_resolve's drop): with mnt (a real path),
 * the mount helper is forked first, and mount_opts[w] are the -o strings
 * of libfuse it may mount with (w: writable); after(mnt) runs in it once
 * mounted (as root).  Without mnt (--check) no helper.  HOME, USER and
 * LOGNAME become the user's; XDG_* are unset.  0, or -errno with err.
 */
int privs_begin(struct privs *p, const char *mnt,
    const char *const mount_opts[2], void (*after)(const char *mnt), char *err,
    size_t errlen);
/*
 * fuse_session_mount(se, mnt), or, after a drop, through the helper with
 * mount_opts[writable].  0, or -1 (said on stderr).
 */
int privs_mount(
    struct privs *p, struct fuse_session *se, const char *mnt, bool writable);
/* After the loop, before fuse_session_destroy: a drop's mount detached
 * if it is still there. */
void privs_unmount(struct privs *p, struct fuse_session *se, const char *mnt);
/* The helper ended (if still there), and what privs_opt kept freed. */
void privs_free(struct privs *p);

#endif
