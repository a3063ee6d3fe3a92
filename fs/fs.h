/*
 * fs.h - the FUSE low-level operations of feedfs over a feed engine (fs/,
 * the FUSE glue: the only folder that includes FUSE headers) and the
 * per-mount state they share with the inode table (nodes.h).
 */
#ifndef FEEDFS_FS_H
#define FEEDFS_FS_H

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <time.h>

#include "engine/feed.h"
#include "fs/io.h"

struct node;

/*
 * Per-mount state, the session's userdata.  The node tables, their LRU
 * list and the pruner's flags are protected by lock; feed does its own
 * locking (fs.lock is never held while calling into feed, so there is no
 * order between the two).
 */
struct ofile;

struct feedfs {
	/*
	 * First: libfuse hands the custom I/O (fs/io.c) the session's
	 * userdata, this struct, which io.c reads as its struct fs_io.
	 */
	struct fs_io io;
	struct feed *feed;
	struct timespec mtime; /* of every node: the mount time */
	uid_t uid;
	gid_t gid;
	pthread_mutex_t lock;
	struct node **by_key, **by_ino; /* hash tables */
	size_t nbuckets, nnodes;
	fuse_ino_t ino_next;
	struct node *lru_head, *lru_tail; /* by last lookup, oldest first */
	/* The pruner (nodes.c): asks the kernel to forget the oldest names
	 * while the nodes pass their share of the memory budget. */
	struct fuse_session *se;
	pthread_t pruner;
	pthread_cond_t prune_cv; /* under lock */
	bool pruning, prune_stop, prune_wanted;
	atomic_bool io_logged; /* which way batch files are served: said */
	pthread_mutex_t files_lock;
	struct ofile *files; /* open, not yet released (fs.c) */
};

extern const struct fuse_lowlevel_ops fs_ops;

/*
 * Make the state of a mount over feed: 0, or -ENOMEM with nothing to
 * undo.  fs_fini_state closes the files still open when the session has
 * ended (an unmount can end it with releases the kernel sent late, or
 * never), then frees the inode table (fs_nodes_fini).
 */
int fs_init_state(struct feedfs *fs, struct feed *feed);
void fs_fini_state(struct feedfs *fs);
/* The files readers hold open now (opened, not yet released). */
size_t fs_open_files(struct feedfs *fs);

#endif
