/*
 * privs.c - fs/ (the FUSE glue), under main.c: a mount that root starts
 * for a user (-o uid=,gid=): the drop of privileges before anything is
 * read, and the helper that mounts for the dropped daemon.  See privs.h.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>

#include <fuse_lowlevel.h>

#include "fs/privs.h"

static int
keep(char **slot, const char *v)
{
	free(*slot);
	return (*slot = strdup(v)) ? 1 : -ENOMEM;
}

int
privs_opt(struct privs *p, const char *tok)
{
	if (strncmp(tok, "uid=", 4) == 0)
		return keep(&p->uid_opt, tok + 4);
	if (strncmp(tok, "gid=", 4) == 0)
		return keep(&p->gid_opt, tok + 4);
	if (strncmp(tok, "user=", 5) == 0)
		return keep(&p->user_opt, tok + 5);
	return 0;
}

/* A decimal id, or -1. */
static long
number(const char *s)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	return errno || *end || v < 0 || v >= (long)UINT32_MAX ? -1 : v;
}

int
privs_resolve(struct privs *p, char *err, size_t errlen)
{
	const struct passwd *me = getpwuid(getuid()), *pw = NULL;
	long n;

	if (p->user_opt &&
	    (me == NULL || strcmp(me->pw_name, p->user_opt) != 0)) {
		/* mount(8) passes user=NAME of whoever mounts a "user"
		 * line of fstab: that one is taken, and means nothing. */
		snprintf(err, errlen,
		    "-o user=%s: user= changes no identity (mount(8) records "
		    "with it who mounted), and feedfs would run as %s%s%lu: "
		    "to serve as %s, mount with -o uid=%s",
		    p->user_opt, me ? me->pw_name : "", me ? ", uid " : "uid ",
		    (unsigned long)getuid(), p->user_opt, p->user_opt);
		return -EINVAL;
	}
	if (p->uid_opt == NULL) {
		if (p->gid_opt) {
			snprintf(err, errlen,
			    "-o gid=%s: needs uid=, the user the mount is for",
			    p->gid_opt);
			return -EINVAL;
		}
		return 0;
	}
	if ((n = number(p->uid_opt)) >= 0) {
		p->uid = (uid_t)n;
		pw = getpwuid(p->uid);
	} else if ((pw = getpwnam(p->uid_opt)) != NULL)
		p->uid = pw->pw_uid;
	else {
		snprintf(err, errlen, "-o uid=%s: no such user", p->uid_opt);
		return -EINVAL;
	}
	if (p->gid_opt == NULL && pw == NULL) {
		snprintf(err, errlen,
		    "-o uid=%s: no user has that uid here (no passwd entry): "
		    "say the group with gid=",
		    p->uid_opt);
		return -EINVAL;
	}
	if (p->gid_opt == NULL)
		p->gid = pw->pw_gid;
	else if ((n = number(p->gid_opt)) >= 0)
		p->gid = (gid_t)n;
	else {
		const struct group *gr = getgrnam(p->gid_opt);

		if (gr == NULL) {
			snprintf(err, errlen, "-o gid=%s: no such group",
			    p->gid_opt);
			return -EINVAL;
		}
		p->gid = gr->gr_gid;
	}
	if (p->uid == getuid() && p->gid == getgid() && geteuid() == getuid())
		return 0; /* already that user: nothing to drop */
	if (geteuid() != 0) {
		snprintf(err, errlen,
		    "-o uid=%s: only root mounts for another user (this is "
		    "uid %lu)",
		    p->uid_opt, (unsigned long)geteuid());
		return -EPERM;
	}
	p->drop = true;
	return 0;
}

/* ---- the helper (root, parses nothing) ----------------------------------- */

/* One status byte, and fd when >= 0. */
static void
send_fd(int sock, unsigned char st, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {&st, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		struct cmsghdr *c;

		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	while (sendmsg(sock, &m, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/*
 * Wait for the daemon's word (1 byte: writable or not; EOF: no mount),
 * mount mfd's directory with libfuse's own code (real ids the user's,
 * effective root: user_id= and group_id= come from the real ones), hand
 * over the /dev/fuse descriptor, and exit.
 */
static void __attribute__((noreturn))
helper(int sock, int mfd, const char *mnt, const char *const opts[2],
    const struct privs *p, void (*after)(const char *))
{
	static const struct fuse_lowlevel_ops none;
	struct fuse_args a = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se;
	unsigned char w;
	char path[64];
	ssize_t n;

	while ((n = read(sock, &w, 1)) < 0 && errno == EINTR)
		;
	if (n != 1 || w > 1)
		_exit(0); /* the daemon stopped before its mount */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	if (setresgid(p->gid, 0, 0) != 0 || setresuid(p->uid, 0, 0) != 0 ||
	    fuse_opt_add_arg(&a, "feedfs") != 0 ||
	    fuse_opt_add_arg(&a, "-o") != 0 ||
	    fuse_opt_add_arg(&a, opts[w]) != 0 ||
	    (se = fuse_session_new(&a, &none, sizeof(none), NULL)) == NULL ||
	    fuse_session_mount(se, path) != 0) {
		send_fd(sock, 1, -1);
		_exit(1);
	}
	send_fd(sock, 0, fuse_session_fd(se));
	if (after)
		after(mnt);
	_exit(0);
}

/* ---- the drop ------------------------------------------------------------ */

/* Whether this process holds no capability at all (capget(2)). */
static bool
no_caps(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) != 0)
		return false;
	return (d[0].effective | d[1].effective | d[0].permitted |
		   d[1].permitted) == 0;
}

/* Groups, gid, uid (real, effective, saved), then the proof. */
static int
drop(const struct privs *p, const char *name, char *err, size_t errlen)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if ((name ? initgroups(name, p->gid) : setgroups(1, &p->gid)) != 0 ||
	    setresgid(p->gid, p->gid, p->gid) != 0 ||
	    setresuid(p->uid, p->uid, p->uid) != 0) {
		snprintf(err, errlen, "-o uid=%s: cannot become uid %lu: %s",
		    p->uid_opt, (unsigned long)p->uid, strerror(errno));
		return -errno;
	}
	if (getresuid(&ru, &eu, &su) != 0 || getresgid(&rg, &eg, &sg) != 0 ||
	    ru != p->uid || eu != p->uid || su != p->uid || rg != p->gid ||
	    eg != p->gid || sg != p->gid ||
	    (p->uid != 0 && (setuid(0) == 0 || setgid(0) == 0 ||
				setgroups(0, NULL) == 0 || !no_caps()))) {
		snprintf(err, errlen,
		    "-o uid=%s: after the drop to uid %lu this process could "
		    "still become root: refusing to go on",
		    p->uid_opt, (unsigned long)p->uid);
		return -EPERM;
	}
	/* Nothing of root's is in it: the user may look at their daemon
	 * (/proc, kill, a debugger) as at one they started. */
	(void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	return 0;
}

/* The environment of the user's login, as su(1) makes it, less XDG_*. */
static void
user_env(const struct passwd *pw)
{
	static const char *const xdg[] = {"XDG_CACHE_HOME", "XDG_CONFIG_HOME",
	    "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"};

	for (size_t i = 0; i < sizeof(xdg) / sizeof(*xdg); i++)
		unsetenv(xdg[i]);
	if (pw == NULL) {
		unsetenv("HOME");
		unsetenv("USER");
		unsetenv("LOGNAME");
		return;
	}
	setenv("HOME", pw->pw_dir, 1);
	setenv("USER", pw->pw_name, 1);
	setenv("LOGNAME", pw->pw_name, 1);
}

int
privs_begin(struct privs *p, const char *mnt, const char *const mount_opts[2],
    void (*after)(const char *mnt), char *err, size_t errlen)
{
	const struct passwd *pw;
	char *name = NULL;
	int sv[2], mfd = -1, r;

	if (!p->drop)
		return 0;
	if ((pw = getpwuid(p->uid)) != NULL &&
	    (name = strdup(pw->pw_name)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (mnt != NULL) {
		/* The mountpoint as root sees it now: the helper mounts on
		 * this directory, whatever its path names later. */
		if ((mfd = open(mnt, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
		    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) !=
			0) {
			r = -errno;
			snprintf(err, errlen, "%s: %s", mnt, strerror(-r));
			goto out;
		}
		switch (p->helper = fork()) {
		case -1:
			r = -errno;
			close(sv[0]);
			close(sv[1]);
			snprintf(err, errlen, "fork: %s", strerror(-r));
			goto out;
		case 0:
			close(sv[0]);
			helper(sv[1], mfd, mnt, mount_opts, p, after);
		default:
			close(sv[1]);
			p->sock = sv[0];
		}
	}
	if ((r = drop(p, name, err, errlen)) != 0)
		goto out;
	user_env(name ? getpwuid(p->uid) : NULL);
out:
	if (mfd >= 0)
		close(mfd);
	free(name);
	return r;
}

/* The helper's end, waited for. */
static void
reap(struct privs *p)
{
	if (p->helper <= 0)
		return;
	close(p->sock); /* EOF: a helper still waiting exits */
	while (waitpid(p->helper, NULL, 0) < 0 && errno == EINTR)
		;
	p->helper = 0;
}

int
privs_mount(
    struct privs *p, struct fuse_session *se, const char *mnt, bool writable)
{
	char cbuf[CMSG_SPACE(sizeof(int))], path[64];
	unsigned char w = writable, st = 1;
	struct iovec iov = {&st, 1};
	struct msghdr m = {.msg_iov = &iov,
	    .msg_iovlen = 1,
	    .msg_control = cbuf,
	    .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *c;
	int fd = -1;
	ssize_t n;

	if (!p->drop)
		return fuse_session_mount(se, mnt);
	if (write(p->sock, &w, 1) == 1)
		while ((n = recvmsg(p->sock, &m, MSG_CMSG_CLOEXEC)) < 0 &&
		       errno == EINTR)
			;
	for (c = CMSG_FIRSTHDR(&m); st == 0 && c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	reap(p);
	if (fd < 0) {
		fprintf(stderr, "feedfs: %s: the mount for uid %lu failed\n",
		    mnt, (unsigned long)p->uid);
		return -1;
	}
	/* libfuse takes a mount made by its caller as /dev/fd/N. */
	snprintf(path, sizeof(path), "/dev/fd/%d", fd);
	if (fuse_session_mount(se, path) != 0) {
		close(fd);
		return -1;
	}
	p->mounted = true;
	return 0;
}

void
privs_unmount(struct privs *p, struct fuse_session *se, const char *mnt)
{
	struct pollfd pfd = {.fd = fuse_session_fd(se)};
	pid_t pid;

	if (!p->mounted)
		return;
	p->mounted = false;
	/* POLLERR: unmounted already (fusermount3 -u, umount). */
	if (pfd.fd < 0 || (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR)))
		return;
	if ((pid = fork()) == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-z", "-q", "--",
		    mnt, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
}

void
privs_free(struct privs *p)
{
	reap(p);
	free(p->uid_opt);
	free(p->gid_opt);
	free(p->user_opt);
	p->uid_opt = p->gid_opt = p->user_opt = NULL;
}
