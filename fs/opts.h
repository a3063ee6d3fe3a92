/*
 * opts.h - the feedfs command's arguments (fs/, opts.c): the command line
 * and -o's options, and the config they give.  Not thread safe: main()
 * uses them before any thread.
 */
#ifndef FEEDFS_FS_OPTS_H
#define FEEDFS_FS_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "fs/privs.h"

struct cfg;

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

/*
 * The command line into *o (-h and -V print and exit 0).  0, or -EINVAL
 * after a message and the usage on stderr, -ENOMEM.
 */
int fs_opts_parse(int argc, char **argv, struct opts *o);
/*
 * The config of o->source (a config file, or the default config of a
 * dataset path) with the -o keys applied: 0 and *out, or -errno with a
 * message in err.
 */
int fs_opts_load(struct opts *o, struct cfg **out, char *err, size_t errlen);
/* Free what fs_opts_parse kept in *o. */
void fs_opts_free(struct opts *o);

#endif
