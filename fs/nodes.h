/*
 * nodes.h - the inode table of a mount (fs/, the FUSE glue; struct
 * feedfs's by_key and by_ino, under its lock): namespace keys to inode
 * numbers and back.  fs_node_ref, fs_node_key and fs_node_forget are
 * thread-safe; the root (FUSE_ROOT_ID) always exists.
 */
#ifndef FEEDFS_NODES_H
#define FEEDFS_NODES_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/ns.h"
#include "fs/fs.h"

/*
 * The table and the pruner's lock and condition of fs, whose feed is set
 * (fs_init_state, fs.c): 0, or -ENOMEM with nothing made.  fs_nodes_fini
 * frees every node and takes it out of the feed's budget; the pruner must
 * have stopped (fs_prune_stop) first.
 */
int fs_nodes_init(struct feedfs *fs);
void fs_nodes_fini(struct feedfs *fs);

/*
 * The inode of k, named name in directory parent, into *ino, its node
 * created if new, and its lookup count incremented (the kernel's lookup).
 * 0, or -ENOMEM.
 */
int fs_node_ref(struct feedfs *fs, const struct ns_key *k, fuse_ino_t parent,
    const char *name, fuse_ino_t *ino);

/* The key of inode ino into *k; false if ino is unknown. */
bool fs_node_key(struct feedfs *fs, fuse_ino_t ino, struct ns_key *k);

/* The kernel forgets nlookup lookups of ino; the node goes at zero. */
void fs_node_forget(struct feedfs *fs, fuse_ino_t ino, uint64_t nlookup);

/*
 * The pruner: a thread that, while the nodes pass their share of the
 * memory budget (feed_nodes_add), asks the kernel to forget the names
 * looked up longest ago (fuse_lowlevel_notify_inval_entry; the kernel
 * then sends FORGET for those no file holds open).  Start it once the
 * session is mounted, after fuse_daemonize; stop it before the session
 * is unmounted.  fs_prune_stop returns false when the thread did not end
 * (blocked in the kernel): fs_fini_state must then not be called.
 */
int fs_prune_start(struct feedfs *fs, struct fuse_session *se);
bool fs_prune_stop(struct feedfs *fs);

#endif
