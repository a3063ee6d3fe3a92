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
#include "ff_commit.h"
#include "core/check.h"
#include "core/config.h"
#include "engine/feed.h"
#include "util/log.h"
#include "fs/fs.h"
#include "fs/nodes.h"
#include "fs/metrics.h"
#include "fs/mountopts.h"
#include "fs/privs.h"

#define EXIT_CONFIG 2
#define FS_READAHEAD_KB 1024 /* = the largest request, FS_MAX_REQUEST */

static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: feedfs [-f] [-d] [-o opt[,opt...]] config mountpoint\n"
	    "       feedfs [-f] [-d] [-o opt[,opt...]] dataset_dir mountpoint\n"
	    "       feedfs --check[=full] [-o opt[,opt...]] config|dataset_dir\n"
	    "\n"
	    "  --check   read every image's header and report: samples per "
	    "class,\n"
	    "            unreadable, unsupported, truncated files, empty "
	    "classes, the\n"
	    "            cache each job needs; exit 0 (no problem) or 1 "
	    "(=full: decode\n"
	    "            every image, as a worker does)\n"
	    "  -f        stay in the foreground, log to stderr\n"
	    "  -d        debug output (implies -f)\n"
	    "  -o opt    a [mount] key of feedfs.conf(5) (cache_dir=DIR,\n"
	    "            cache_size=SIZE, threads=N, memory=SIZE, "
	    "readahead=N,\n"
	    "            gpu_memory=SIZE, cache_stale=SECONDS,\n"
	    "            cluster=HOST:PORT[,HOST:PORT...], cluster_auth=FILE,\n"
	    "            cluster_secret=FILE), or a FUSE mount option "
	    "(allow_other);\n"
	    "            with a dataset_dir, also a [job] key of the jobs "
	    "train and val:\n"
	    "            KEY=VALUE for both, train.KEY=VALUE for one "
	    "(on_error=substitute,\n"
	    "            batch_size=N, epochs=N, seed=N, shuffle=yes|no, "
	    "drop_last=yes|no,\n"
	    "            order=strict|relaxed, dtype=T, layout=L, gpu=on|off,\n"
	    "            max_pixels=N, cache_format=F); log=FILE: the log "
	    "appended to FILE\n"
	    "            too (it outlives the mount; SIGHUP reopens it); "
	    "log_level=LEVEL;\n            metrics=HOST:PORT (Prometheus); "
	    "uid=USER[,gid=GROUP]: root mounts for USER\n"
	    "  -h        this help;  -V  the version\n"
	    "\n"
	    "The log: stderr with -f; else syslog (journalctl -t feedfs), and\n"
	    "always its last 256 KiB in MOUNTPOINT/.feedfs/log (and FILE with\n"
	    "-o log=FILE).  Samples that failed, with file and reason:\n"
	    "MOUNTPOINT/JOB/errors.tsv.\n"
	    "Warnings of the start (a cache refused, a mountpoint not empty,\n"
	    "skipped files, empty classes) are printed here before feedfs\n"
	    "returns.\n"
	    "\n"
	    "See feedfs(8) and feedfs.conf(5).\n");
}

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

/* Options of -o that are ours go to the config; the rest to FUSE. */
struct opts {
	bool foreground, debug;
	int check; /* --check: 1, --check=full: 2 */
	const char *source, *mountpoint;
	char *fuse_opts; /* comma separated, for fuse_session_new */
	const char *log_path; /* -o log=FILE: the log appended there too */
	char *log_opt;	      /* its token */
	char *log_level;      /* -o log_level=LEVEL's token */
	char *metrics;	      /* -o metrics=ADDR:PORT's token */
	char **mount_kv; /* key=value of [mount] keys (and of [job] keys for
			    the default jobs), applied after load */
	size_t nmount_kv;
	struct privs privs; /* uid=, gid=, user= */
};

static int
add_opts(struct opts *o, const char *list)
{
	char *dup = strdup(list), *save = NULL, *tok;
	int r;

	if (!dup)
		return -ENOMEM;
	for (tok = strtok_r(dup, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		/*
		 * cluster=h1:11211,h2:11211: a HOST:PORT after cluster= goes
		 * on its server list (no FUSE option has a colon and no =).
		 */
		if (o->nmount_kv > 0 && !strchr(tok, '=') && strchr(tok, ':') &&
		    strncmp(o->mount_kv[o->nmount_kv - 1], "cluster=", 8) ==
			0) {
			char **last = &o->mount_kv[o->nmount_kv - 1];
			char *s;

			if (asprintf(&s, "%s,%s", *last, tok) < 0) {
				free(dup);
				return -ENOMEM;
			}
			free(*last);
			*last = s;
			continue;
		}
		if ((r = privs_opt(&o->privs, tok)) != 0) {
			if (r < 0) {
				free(dup);
				return r;
			}
			continue;
		}
		if (strncmp(tok, "log_level=", 10) == 0 ||
		    strncmp(tok, "metrics=", 8) == 0) {
			char **slot = tok[1] == 'o' ? &o->log_level : &o->metrics;

			free(*slot);
			if ((*slot = strdup(tok)) == NULL) {
				free(dup);
				return -ENOMEM;
			}
			continue;
		}
		if (strncmp(tok, "log=", 4) == 0) {
			free(o->log_opt);
			if ((o->log_opt = strdup(tok)) == NULL) {
				free(dup);
				return -ENOMEM;
			}
			o->log_path = o->log_opt + 4;
			continue;
		}
		if (cfg_is_mount_key(tok, strcspn(tok, "=")) ||
		    cfg_is_job_opt(tok, strcspn(tok, "="))) {
			char **kv = realloc(
			    o->mount_kv, (o->nmount_kv + 1) * sizeof(*kv));

			if (!kv || !(kv[o->nmount_kv] = strdup(tok))) {
				free(kv);
				free(dup);
				return -ENOMEM;
			}
			o->mount_kv = kv;
			o->nmount_kv++;
		} else if (strcmp(tok, "defaults") != 0 &&
			   strcmp(tok, "rw") != 0) {
			/* rw is what mount(8) adds; feedfs is read-only. */
			size_t len = o->fuse_opts ? strlen(o->fuse_opts) : 0;
			char *s = realloc(o->fuse_opts, len + strlen(tok) + 2);

			if (!s) {
				free(dup);
				return -ENOMEM;
			}
			snprintf(s + len, strlen(tok) + 2, "%s%s",
			    len ? "," : "", tok);
			o->fuse_opts = s;
		}
	}
	free(dup);
	return 0;
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-f") == 0)
			o->foreground = true;
		else if (strcmp(a, "-d") == 0)
			o->debug = o->foreground = true;
		else if (strcmp(a, "--check") == 0)
			o->check = 1;
		else if (strcmp(a, "--check=full") == 0)
			o->check = 2;
		else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(a, "-V") == 0 ||
			   strcmp(a, "--version") == 0) {
			printf("feedfs %s (commit %s%s)\n", PACKAGE_VERSION,
			    FEEDFS_COMMIT, FEEDFS_COMMIT_NOTE);
			exit(0);
		} else if (strncmp(a, "-o", 2) == 0) {
			const char *v = a[2] ? a + 2 : argv[++i];

			if (!v) {
				fprintf(stderr, "feedfs: -o needs options\n");
				return -EINVAL;
			}
			if (add_opts(o, v) != 0)
				return -ENOMEM;
		} else if (a[0] == '-' && a[1] != '\0') {
			fprintf(stderr, "feedfs: unknown option %s\n", a);
			usage(stderr);
			return -EINVAL;
		} else if (!o->source)
			o->source = a;
		else if (!o->mountpoint)
			o->mountpoint = a;
		else {
			fprintf(stderr, "feedfs: too many arguments\n");
			usage(stderr);
			return -EINVAL;
		}
	}
	if (!o->source || (!o->mountpoint) != (o->check != 0)) {
		usage(stderr);
		return -EINVAL;
	}
	return 0;
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
 * Whether a feedfs already serves mnt (/proc/self/mountinfo: a
 * fuse.feedfs mount there).  A second one would stack on it, and two
 * unmounts would be needed.
 */
static bool
feedfs_mounted(const char *mnt)
{
	char line[PATH_MAX + 512], where[PATH_MAX + 1], type[64], *d;
	bool found = false;
	FILE *fp;

	if ((fp = fopen("/proc/self/mountinfo", "re")) == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), fp)) {
		const char *dash = strstr(line, " - ");

		if (sscanf(line, "%*d %*d %*s %*s %4096s", where) != 1 ||
		    dash == NULL || sscanf(dash + 3, "%63s", type) != 1 ||
		    strcmp(type, "fuse.feedfs") != 0)
			continue;
		/* Spaces and the like are escaped as \ooo (octal). */
		d = where;
		for (const char *s = where; *s; s++, d++)
			if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
			    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
			    s[3] <= '7') {
				*d = (char)((s[1] - '0') * 64 +
					    (s[2] - '0') * 8 + (s[3] - '0'));
				s += 3;
			} else
				*d = *s;
		*d = '\0';
		found = strcmp(where, mnt) == 0;
	}
	fclose(fp);
	return found;
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
	(void)chdir("/");
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

/* Load the config (or the default one for a dataset dir), apply -o. */
static int
load_config(struct opts *o, struct cfg **out, char *err, size_t errlen)
{
	struct cfg *c = NULL;
	struct stat st;
	int r;

	bool dir = stat(o->source, &st) == 0 && S_ISDIR(st.st_mode);

	if (dir)
		r = cfg_default(o->source, &c, err, errlen);
	else
		r = cfg_load(o->source, &c, err, errlen);
	if (r != 0)
		return r;
	for (size_t i = 0; i < o->nmount_kv; i++) {
		char *kv = o->mount_kv[i], *eq = strchr(kv, '=');

		if (!eq) {
			snprintf(
			    err, errlen, "-o %s: expected %s=VALUE", kv, kv);
			cfg_free(c);
			return -EINVAL;
		}
		*eq = '\0';
		if (cfg_is_mount_key(kv, strlen(kv)))
			r = cfg_set_mount(c, kv, eq + 1, err, errlen);
		else if (!dir) {
			snprintf(err, errlen,
			    "-o %s: a [job] key; with a config, set it in its "
			    "[job NAME] sections (-o takes job keys only for "
			    "a dataset directory's default jobs)",
			    kv);
			r = -EINVAL;
		} else
			r = cfg_set_job(c, kv, eq + 1, err, errlen);
		*eq = '=';
		if (r != 0) {
			cfg_free(c);
			return r;
		}
	}
	*out = c;
	return 0;
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
	char err[2048], mnt[PATH_MAX], fsname[FS_MOUNT_OPTS_MAX];
	char fsname_rw[FS_MOUNT_OPTS_MAX];
	int ret = 1, r, said = -1, term = -1;
	size_t hidden;
	bool state = false;

	if (parse_args(argc, argv, &o) != 0)
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
		    load_config(&o, &c, err, sizeof(err)) != 0 ||
		    (r = check_run(c, o.check == 2, stdout, err, sizeof(err))) <
			0) {
			fprintf(stderr, "feedfs: %s\n", err);
			ret = EXIT_CONFIG;
		} else
			ret = r;
		goto out_opts;
	}
	if (realpath(o.mountpoint, mnt) == NULL) {
		fprintf(
		    stderr, "feedfs: %s: %s\n", o.mountpoint, strerror(errno));
		return 1;
	}
	if (feedfs_mounted(mnt)) {
		fprintf(stderr,
		    "feedfs: %s: a feedfs is mounted there already; "
		    "unmount it first (fusermount3 -u %s)\n",
		    mnt, mnt);
		ret = 1;
		goto out_opts;
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
	if (load_config(&o, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "feedfs: %s\n", err);
		ret = EXIT_CONFIG;
		goto out_opts;
	}
	/* On the terminal that mounts; in syslog too once in the background. */
	warn = cfg_cluster_warning(&c->mount);
	if (warn)
		log_warn("%s", warn);
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
	if (o.foreground)
		(void)chdir("/");
	else if ((said = daemon_begin(&term)) < 0) {
		fprintf(stderr, "feedfs: cannot detach: %s\n", strerror(-said));
		goto out_unmount;
	} else {
		log_init("feedfs", log_syslog_present(), o.debug);
		if (warn)
			log_warn(
			    "%s", warn); /* to syslog: said on the terminal */
		log_set_term(term);
	}

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
	ret = fuse_session_loop_mt(se, lc) >= 0 ? 0 : 1;
	fuse_loop_cfg_destroy(lc);
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
	privs_free(&o.privs);
	cfg_free(c);
	for (size_t i = 0; i < o.nmount_kv; i++)
		free(o.mount_kv[i]);
	free(o.mount_kv);
	free(o.fuse_opts);
	free(o.log_opt);
	free(o.log_level);
	free(o.metrics);
	log_hup_stop();
	log_close_file();
	return ret;
}
