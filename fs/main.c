/*
 * main.c - the feedfs command (fs/, the FUSE glue, over the engine and
 * the model): parse, check, mount, serve, unmount.
 *
 *   feedfs [-f] [-d] [-o OPT[,OPT...]] CONFIG|DATASET_DIR MOUNTPOINT
 *   feedfs --check[=full] [-o OPT[,OPT...]] CONFIG|DATASET_DIR
 *
 * Everything that can be wrong with the config or the dataset is found
 * before the mount (exit 2, "feedfs: FILE:LINE: message").  No thread is
 * started before fuse_daemonize(): the cache and the workers come after.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "core/check.h"
#include "core/config.h"
#include "engine/feed.h"
#include "util/cgroup.h"
#include "util/log.h"
#include "fs/fs.h"
#include "fs/mountpoint.h"
#include "fs/nodes.h"
#include "fs/metrics.h"
#include "fs/mountopts.h"
#include "fs/privs.h"
#include "fs/opts.h"

#define EXIT_CONFIG 2
#define FS_READAHEAD_KB 1024 /* = the largest request, FS_MAX_REQUEST */

/* A progress line while scanning a large dataset, on a terminal only. */
struct progress {
	bool tty;
	struct timespec last;
	bool shown;
};

static void
scan_progress(size_t n, void *arg)
{
	struct progress *p = arg;
	struct timespec now;

	if (!p->tty)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (p->shown && (now.tv_sec - p->last.tv_sec) * 1000 +
				(now.tv_nsec - p->last.tv_nsec) / 1000000 <
			    200)
		return;
	p->last = now;
	p->shown = true;
	fprintf(stderr, "\rfeedfs: scanning dataset: %zu images", n);
}

/*
 * The kernel caps a FUSE mount's readahead at 128 KiB whatever init asks,
 * so sequential reads of a batch arrive as 128 KiB requests.  Its
 * backing device's read_ahead_kb can be raised from sysfs (as root): with
 * 1 MiB the requests are 1 MiB and the per-request cost is paid 8 times
 * less.  Failing to is not an error.
 */
static void
raise_readahead(const char *mnt)
{
	char path[128], line[PATH_MAX + 256], where[PATH_MAX + 1];
	unsigned maj = 0, min = 0, a, b;
	bool found = false;
	FILE *fp;

	/*
	 * Not stat(mnt): the loop is not serving yet, so a GETATTR on the
	 * root would never be answered.  mountinfo names the device.
	 */
	if ((fp = fopen("/proc/self/mountinfo", "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "%*d %*d %u:%u %*s %4096s", &a, &b, where) ==
			3 &&
		    strcmp(where, mnt) == 0) {
			maj = a; /* the last one is the newest mount */
			min = b;
			found = true;
		}
	fclose(fp);
	if (!found)
		return;
	snprintf(
	    path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	if ((fp = fopen(path, "w")) == NULL)
		return;
	fprintf(fp, "%u\n", FS_READAHEAD_KB);
	fclose(fp);
}

/*
 * The real path of mountpoint p into mnt (PATH_MAX): realpath, or, when
 * p is a mount left dead (its root answers ENOTCONN), its directory's
 * real path and its name.  0 or -errno.
 */
static int
mountpoint_path(const char *p, char *mnt)
{
	char dir[PATH_MAX], *copy, *slash;
	const char *parent = ".";
	int r = 0;

	if (realpath(p, mnt) != NULL)
		return 0;
	if (errno != ENOTCONN)
		return -errno;
	if ((copy = strdup(p)) == NULL)
		return -ENOMEM;
	while (strlen(copy) > 1 && copy[strlen(copy) - 1] == '/')
		copy[strlen(copy) - 1] = '\0';
	slash = strrchr(copy, '/');
	if (slash == copy)
		parent = "/";
	else if (slash != NULL) {
		*slash = '\0';
		parent = copy;
	}
	if (realpath(parent, dir) == NULL)
		r = -errno;
	else if ((size_t)snprintf(mnt, PATH_MAX, "%s/%s",
		     strcmp(dir, "/") == 0 ? "" : dir,
		     slash == NULL ? copy : slash + 1) >= PATH_MAX)
		r = -ENAMETOOLONG;
	free(copy);
	return r;
}

/*
 * Why the mount ends, in the log (issue 40): the signal that stopped it
 * (SIGTERM from systemd or kill) and the files readers still hold, whose
 * reads fail from now on; or an unmount from outside; or the session's
 * error (loop: fuse_session_loop_mt's return).
 */
static void
say_stop(struct feedfs *fs, int loop, const char *mnt)
{
	size_t n = fs_open_files(fs);
	char sig[32];

	if (sigabbrev_np(loop) != NULL)
		snprintf(sig, sizeof(sig), "SIG%s", sigabbrev_np(loop));
	else
		snprintf(sig, sizeof(sig), "signal %d", loop);
	if (loop > 0)
		log_msg(n > 0 ? LOG_LVL_WARN : LOG_LVL_INFO,
		    "stopping on %s: unmounting %s with %zu file%s open by "
		    "readers%s",
		    sig, mnt, n, n == 1 ? "" : "s",
		    n > 0 ? ", whose reads fail from now on (ENOTCONN)" : "");
	else if (loop == 0)
		log_info("%s was unmounted (fusermount3 -u or umount): "
			 "stopping",
		    mnt);
	else
		log_err("%s: the FUSE session failed: %s; stopping", mnt,
		    strerror(-loop));
}

/* The entries of directory mnt (not . and ..), at most a few counted. */
static size_t
dir_entries(const char *mnt)
{
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	if ((d = opendir(mnt)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL && n < 1000)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/*
 * Detach as fuse_daemonize() does, but the parent (what the shell waits
 * for) exits only once the child says so (daemon_done), with the status
 * it says: so the mount is served, the cache open, and every warning of
 * the start printed on the terminal (log_set_term) when feedfs returns.
 * In the child: the fd to say it on.  No thread may exist yet.
 */
static int
daemon_begin(int *termp)
{
	int p[2], fd, term;
	unsigned char st = 1;

	if (pipe(p) != 0)
		return -errno;
	switch (fork()) {
	case -1:
		close(p[0]);
		close(p[1]);
		return -errno;
	case 0:
		break;
	default:
		close(p[1]);
		/* EOF without a word: the child died. */
		while (read(p[0], &st, 1) < 0 && errno == EINTR)
			;
		_exit(st);
	}
	close(p[0]);
	if (setsid() == -1)
		return -errno;
	if (chdir("/") != 0) /* "/" is there; said, never fatal */
		fprintf(stderr, "feedfs: chdir /: %s\n", strerror(errno));
	term = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	*termp = term; /* for log_set_term */
	if ((fd = open("/dev/null", O_RDWR)) >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	return p[1];
}

/* The child's word to the waiting parent: its exit status; the
 * terminal is let go. */
static void
daemon_done(int *fd, int *term, int status)
{
	unsigned char st = (unsigned char)status;

	if (*term >= 0) {
		log_set_term(-1);
		close(*term);
		*term = -1;
	}
	if (*fd < 0)
		return;
	(void)!write(*fd, &st, 1);
	close(*fd);
	*fd = -1;
}

int
main(int argc, char **argv)
{
	struct opts o = {0};
	struct progress prog = {0};
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc = NULL;
	struct fuse_session *se = NULL;
	struct feedfs fs;
	struct feed *feed = NULL;
	struct fs_metrics *mx = NULL;
	struct cfg *c = NULL;
	const char *warn; /* cfg_cluster_warning's, a constant */
	struct cgroup_res res;
	char err[2048], mnt[PATH_MAX], fsname[FS_MOUNT_OPTS_MAX];
	char fsname_rw[FS_MOUNT_OPTS_MAX];
	char fit_info[2 * CGROUP_PATH_MAX + 512],
	    fit_warn[CGROUP_PATH_MAX + 512];
	int ret = 1, r, said = -1, term = -1;
	size_t hidden;
	bool state = false;

	if (fs_opts_parse(argc, argv, &o) != 0)
		return EXIT_CONFIG;
	/*
	 * Every file feedfs makes is its user's alone: RocksDB makes the
	 * files of a store 0644 less the umask (cache.h), shard indexes too.
	 */
	umask(077);
	feed_keep_freed_memory(); /* before any thread */
	log_init("feedfs", false, o.debug);
	if (o.log_level && log_set_level_name(o.log_level + 10) != 0) {
		fprintf(stderr,
		    "feedfs: -o %s: expected error, warning, info or debug\n",
		    o.log_level);
		ret = EXIT_CONFIG;
		goto out_opts;
	}
	if (privs_resolve(&o.privs, err, sizeof(err)) != 0) {
		fprintf(stderr, "feedfs: %s\n", err);
		ret = EXIT_CONFIG;
		goto out_opts;
	}
	if (o.check) {
		/* No mount: a report on stdout, 0 or 1 (2: no dataset). */
		if (privs_begin(&o.privs, NULL, NULL, NULL, err, sizeof(err)) !=
			0 ||
		    fs_opts_load(&o, &c, err, sizeof(err)) != 0 ||
		    (r = check_run(c, o.check == 2, stdout, err, sizeof(err))) <
			0) {
			fprintf(stderr, "feedfs: %s\n", err);
			ret = EXIT_CONFIG;
		} else
			ret = r;
		goto out_opts;
	}
	if ((r = mountpoint_path(o.mountpoint, mnt)) != 0) {
		fprintf(stderr, "feedfs: %s: %s\n", o.mountpoint, strerror(-r));
		ret = 1;
		goto out_opts;
	}
	/* A live feedfs there is refused; one left dead is detached. */
	switch (fs_mnt_state(mnt, err, sizeof(err))) {
	case FS_MNT_LIVE:
		fprintf(stderr,
		    "feedfs: %s: a feedfs is mounted there already%s%s%s; "
		    "unmount it first (fusermount3 -u %s)\n",
		    mnt, err[0] ? " (" : "", err, err[0] ? ")" : "", mnt);
		ret = 1;
		goto out_opts;
	case FS_MNT_DEAD: {
		char why[512];

		if (fs_mnt_detach(mnt, why, sizeof(why)) != 0) {
			fprintf(stderr,
			    "feedfs: %s: the feedfs mounted there is gone "
			    "(%s), and its mount could not be detached: %s; "
			    "detach it with fusermount3 -u -z %s (umount -l "
			    "as root)\n",
			    mnt, err, why, mnt);
			ret = 1;
			goto out_opts;
		}
		log_warn("%s: the feedfs mounted there is gone (%s): its "
			 "mount detached, as fusermount3 -u -z would",
		    mnt, err);
		break;
	}
	case FS_MNT_FREE:
		break;
	}
	/* -o uid=: the user from here on, before anything is read (a helper
	 * mounts: privs.h), with the mount's -o, ro or not, fixed now. */
	fs_mount_opts(o.source, o.fuse_opts, false, fsname, sizeof(fsname));
	fs_mount_opts(o.source, o.fuse_opts, true, fsname_rw, sizeof(fsname));
	if (privs_begin(&o.privs, mnt, (const char *const[]){fsname, fsname_rw},
		raise_readahead, err, sizeof(err)) != 0) {
		fprintf(stderr, "feedfs: %s\n", err);
		goto out_opts;
	}
	/* Opened here: a relative name is the caller's, and a bad one is
	 * said before anything is mounted. */
	if (o.log_path && log_open_file(o.log_path, err, sizeof(err)) != 0) {
		fprintf(stderr, "feedfs: -o log=%s\n", err);
		ret = EXIT_CONFIG;
		goto out_opts;
	}
	if (fs_opts_load(&o, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "feedfs: %s\n", err);
		ret = EXIT_CONFIG;
		goto out_opts;
	}
	/* memory and threads from what the process is given (its cgroup). */
	cgroup_probe(NULL, &res);
	cfg_fit(
	    c, &res, fit_info, sizeof(fit_info), fit_warn, sizeof(fit_warn));
	/* On the terminal that mounts; in syslog too once in the background. */
	if (c->layout != NULL && c->layout_warn)
		log_warn("%s", c->layout);
	else if (c->layout != NULL)
		log_info("%s", c->layout);
	warn = cfg_cluster_warning(&c->mount);
	if (warn)
		log_warn("%s", warn);
	/* Said once everywhere: in the background, the log's copy waits
	 * until syslog is open (below); the terminal has it now. */
	if (fit_warn[0] && o.foreground)
		log_warn("%s", fit_warn);
	else if (fit_warn[0])
		fprintf(stderr, "feedfs: warning: %s\n", fit_warn);
	prog.tty = isatty(STDERR_FILENO);
	r = feed_new(c, scan_progress, &prog, &feed, err, sizeof(err));
	c = NULL; /* transferred */
	if (prog.shown)
		fputc('\n', stderr);
	if (r != 0) {
		fprintf(stderr, "feedfs: %s\n", err);
		ret = EXIT_CONFIG;
		goto out_opts;
	}
	/*
	 * A cache_dir that another feedfs holds is shared with it, not
	 * refused: feed_start attaches to its owner (cache.h).
	 */
	if (feed_set_mountpoint(feed, mnt) != 0 ||
	    fs_init_state(&fs, feed) != 0) {
		fprintf(stderr, "feedfs: out of memory\n");
		goto out_feed;
	}
	state = true;
	if (o.metrics && fs_metrics_open(o.metrics + 8, &mx, err, sizeof(err))) {
		fprintf(stderr, "feedfs: %s\n", err); /* a port taken */
		ret = EXIT_CONFIG;
		goto out_state;
	}

	/* Read-only, unless a mixture's JOB/mixture is to be written. */
	if (fuse_opt_add_arg(&args, argv[0]) != 0 ||
	    fuse_opt_add_arg(&args, "-o") != 0 ||
	    fuse_opt_add_arg(&args,
		feed_writable(feed) ? fsname_rw : fsname) != 0 ||
	    (o.debug && fuse_opt_add_arg(&args, "-d") != 0)) {
		fprintf(stderr, "feedfs: out of memory\n");
		goto out_state;
	}
	if ((se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), &fs)) ==
	    NULL) {
		/* libfuse said why (an unknown -o option, say). */
		ret = EXIT_CONFIG;
		goto out_args;
	}
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	/*
	 * libfuse ends the loop on SIGHUP too: a closed terminal would
	 * unmount.  Nothing can be reloaded (the config and the dataset
	 * are read once), so it is ignored until log_hup_start takes it to
	 * reopen the log file.
	 */
	signal(SIGHUP, SIG_IGN);
	if ((hidden = dir_entries(mnt)) > 0)
		log_warn("%s is not empty: its %s%zu entr%s hidden while "
			 "feedfs is mounted there",
		    mnt, hidden >= 1000 ? "more than " : "", hidden,
		    hidden == 1 ? "y is" : "ies are");
	if (!o.foreground && !log_syslog_present())
		log_warn("no syslog here (/dev/log is missing): the log is in "
			 "%s/.feedfs/log while mounted%s",
		    mnt,
		    o.log_path
			? ", and in -o log=FILE"
			: " (keep it with -o log=FILE, or run feedfs -f)");
	if (privs_mount(&o.privs, se, mnt, feed_writable(feed)) != 0)
		goto out_signals;
	if (fs_io_attach(se, &fs.io) != 0)
		goto out_unmount;
	raise_readahead(mnt);
	if (o.foreground) {
		if (chdir("/") != 0)
			fprintf(stderr, "feedfs: chdir /: %s\n",
			    strerror(errno));
	} else if ((said = daemon_begin(&term)) < 0) {
		fprintf(stderr, "feedfs: cannot detach: %s\n", strerror(-said));
		goto out_unmount;
	} else {
		log_init("feedfs", log_syslog_present(), o.debug);
		if (warn)
			log_warn(
			    "%s", warn); /* to syslog: said on the terminal */
		if (fit_warn[0])
			log_warn("%s", fit_warn); /* the terminal had it */
		log_set_term(term);
	}
	log_info("%s", fit_info);

	/* Threads from here on, SIGHUP blocked in all: one thread takes it
	 * and reopens the log file (-o log=FILE). */
	if ((r = log_hup_start()) != 0)
		log_warn("SIGHUP will not reopen the log: %s", strerror(-r));
	if (feed_start(feed) != 0)
		goto out_unmount;
	fs_prune_start(&fs, se); /* without it, only unbounded (said) */
	if (mx && (r = fs_metrics_start(mx, feed, mnt)) != 0)
		log_warn("-o %s: not served: %s", o.metrics, strerror(-r));
	log_info("serving %s on %s", o.source, mnt);
	/* The mount is in place: the command that started it returns. */
	daemon_done(&said, &term, 0);
	if ((lc = fuse_loop_cfg_create()) == NULL)
		goto out_unmount;
	fuse_loop_cfg_set_clone_fd(lc, 0);
	fuse_loop_cfg_set_max_threads(lc, 64);
	fuse_loop_cfg_set_idle_threads(lc, 16);
	/* > 0: the signal (SIGTERM, SIGINT) that ended the loop. */
	r = fuse_session_loop_mt(se, lc);
	ret = r >= 0 ? 0 : 1;
	fuse_loop_cfg_destroy(lc);
	say_stop(&fs, r, mnt);
out_unmount:
	if (!fs_prune_stop(&fs))
		state = false; /* its thread may still use the state */
	fuse_session_unmount(se);
	privs_unmount(&o.privs, se, mnt);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_args:
	fuse_opt_free_args(&args);
out_state:
	if (state)
		fs_fini_state(&fs);
out_feed:
	fs_metrics_free(mx); /* it reads feed */
	feed_free(feed);
out_opts:
	daemon_done(&said, &term, ret != 0 ? ret : 1);
	cfg_free(c);
	fs_opts_free(&o);
	log_hup_stop();
	log_close_file();
	return ret;
}
