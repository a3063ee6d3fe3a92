/*
 * ds_scan_int.h - layer: dataset/ (the datasets), the ImageFolder scan's own: the
 * state of one scan, shared by ds_scan.c (the walk) and ds_scan_entry.c
 * (what an entry is: its type, where a link leads and whether it may be
 * followed, the directories already read).  Not for use elsewhere.
 */
#ifndef FEEDFS_DS_SCAN_INT_H
#define FEEDFS_DS_SCAN_INT_H

#include <sys/types.h>

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "dataset/ds_int.h"

struct dirid {
	dev_t dev;
	ino_t ino;
};

/* The directories read through links: an open-addressing hash set. */
struct dirset {
	struct dirid *v;
	bool *used;
	size_t cap, n;
};

struct scan {
	struct ds_sample *v;
	size_t n, cap;
	ds_progress_fn progress;
	void *arg;
	const char *root;     /* as given, for messages */
	const char *realroot; /* realpath of root */
	size_t rootlen;	      /* of realroot; 0 when it is "/" */
	char rel[PATH_MAX];   /* path of the directory being read, from root */
	/* the same through no link: rel if none, relative to the root
	 * while inside it, absolute out of it */
	char phys[PATH_MAX];
	struct dirid *up; /* the directories from the root down */
	size_t depth, upcap;
	struct dirset linked; /* directories read through a link */
	struct dataset *ds;   /* what it leaves out is counted there */
	int rootfd;	      /* the root, open */
	int slashfd;	      /* "/", open: targets out of the root */
	bool guarded;	      /* ds_guard_active() */
	uint32_t guard;	      /* of the directory being read (0: none) */
	char *err;
	size_t errlen;
};

/* What entry_type found: a file or a directory to take, or neither. */
enum ent { ENT_SKIP, ENT_FILE, ENT_DIR };

/* Where an entry to take leads, when not to itself. */
struct ent_to {
	char *target;	/* through no link: relative to the root, or
			   absolute out of it (malloc'd); NULL: the entry */
	uint32_t guard; /* the guard of what it leads to (0: none) */
};

/*
 * Entry de of directory fd (s->rel, s->phys): a file or a directory to
 * take (*to set), or ENT_SKIP, with what was left out and why counted
 * in s->ds (a link broken, a loop, refused...; a FIFO or a device).
 * Hidden names are the caller's.  -ENOMEM.
 */
int ds_scan_entry(
    struct scan *s, int fd, const struct dirent *de, struct ent_to *to);

/*
 * Is the directory open as fd to be skipped (*skip, and counted as left
 * out): one being read (an ancestor: a loop), or, read through a link
 * (linked), one already read through one?  Else it is pushed on the
 * ancestors.  0 or -errno.
 */
int ds_scan_push_dir(struct scan *s, int fd, bool linked, bool *skip);

#endif
