/*
 * opts.c - the feedfs command's arguments (fs/, the FUSE glue; under
 * main.c, calls the model's config): the command line, -o's options (a
 * [mount] key, a [job] key of the default jobs, log=FILE, or FUSE's),
 * and the config they load (see opts.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "ff_commit.h"
#include "core/config.h"
#include "fs/opts.h"

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
	    "            max_pixels=N, cache_format=F), label=MODE for "
	    "its shards,\n"
	    "            text=txt|json:KEY for captions (.text.jsonl);\n"
	    "            log=FILE: the log appended to FILE too (it outlives "
	    "the mount;\n            SIGHUP reopens it); log_level=LEVEL; "
	    "metrics=HOST:PORT (Prometheus);\n"
	    "            uid=USER[,gid=GROUP]: root mounts for USER;\n"
	    "            an option neither feedfs nor FUSE knows is refused\n"
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
		    cfg_is_job_opt(tok, strcspn(tok, "=")) ||
		    cfg_is_dataset_key(tok, strcspn(tok, "="))) {
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

int
fs_opts_parse(int argc, char **argv, struct opts *o)
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
 * Each of o's FUSE options as libfuse takes it: a session made with it
 * alone and dropped (libfuse's message, on stderr, silenced), so that the
 * first one it refuses is answered in feedfs's words, with the keys -o
 * takes (jobs: those of a dataset path's default jobs too).  Before any
 * thread: stderr is borrowed.  0 or -EINVAL with err.
 */
static int
check_fuse_opts(const struct opts *o, bool jobs, char *err, size_t errlen)
{
	static const struct fuse_lowlevel_ops none;
	char *list, *tok, *save = NULL, keys[2048];
	int r = 0;

	if (o->fuse_opts == NULL)
		return 0;
	if ((list = strdup(o->fuse_opts)) == NULL)
		return -ENOMEM;
	for (tok = strtok_r(list, ",", &save); tok != NULL && r == 0;
	     tok = strtok_r(NULL, ",", &save)) {
		struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
		struct fuse_session *se = NULL;
		int saved = dup(STDERR_FILENO), null = -1;

		if (saved >= 0 &&
		    (null = open("/dev/null", O_WRONLY | O_CLOEXEC)) >= 0)
			dup2(null, STDERR_FILENO);
		if (fuse_opt_add_arg(&args, "feedfs") == 0 &&
		    fuse_opt_add_arg(&args, "-o") == 0 &&
		    fuse_opt_add_arg(&args, tok) == 0)
			se = fuse_session_new(&args, &none, sizeof(none), NULL);
		if (saved >= 0) {
			dup2(saved, STDERR_FILENO);
			close(saved);
		}
		if (null >= 0)
			close(null);
		fuse_opt_free_args(&args);
		if (se != NULL) {
			fuse_session_destroy(se);
			continue;
		}
		cfg_opt_keys(jobs, keys, sizeof(keys));
		snprintf(err, errlen,
		    "-o %s: unknown key '%.*s' (expected %s; or a FUSE mount "
		    "option of mount.fuse3(8), like allow_other)",
		    tok, (int)strcspn(tok, "="), tok, keys);
		r = -EINVAL;
	}
	free(list);
	return r;
}

/* Load the config (or the default one for a dataset dir), apply -o. */
int
fs_opts_load(struct opts *o, struct cfg **out, char *err, size_t errlen)
{
	struct cfg *c = NULL;
	struct stat st;
	int r;

	/* A dataset directory, or one tar shard: the default jobs. */
	bool dir = (stat(o->source, &st) == 0 && S_ISDIR(st.st_mode)) ||
		   cfg_is_tar(o->source);

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
		else if (cfg_is_dataset_key(kv, strlen(kv)))
			r = cfg_set_dataset_opt(c, kv, eq + 1, err, errlen);
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
	if ((r = check_fuse_opts(o, dir, err, errlen)) != 0) {
		cfg_free(c);
		return r;
	}
	*out = c;
	return 0;
}

void
fs_opts_free(struct opts *o)
{
	for (size_t i = 0; i < o->nmount_kv; i++)
		free(o->mount_kv[i]);
	free(o->mount_kv);
	free(o->fuse_opts);
	free(o->log_opt);
	free(o->log_level);
	free(o->metrics);
	privs_free(&o->privs);
}
