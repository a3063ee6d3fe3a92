/*
 * nodes.c - the per-mount state and its inode table: inodes are allocated
 * on lookup from a table keyed by what the node is (type, job, rank,
 * world, epoch, batch, kind), counted by the kernel's lookups and dropped
 * on forget, so any number of epochs and rank views can exist without
 * being stored.  Each node is counted in the feed's memory budget while it
 * exists (feed_nodes_add).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/ns.h"
#include "fs/nodes.h"

struct node {
	struct ns_key k;
	fuse_ino_t ino;
	uint64_t nlookup;
	struct node *knext, *inext;
};

static bool
nkey_eq(const struct ns_key *a, const struct ns_key *b)
{
	return a->type == b->type && a->job == b->job && a->rank == b->rank &&
	       a->world == b->world && a->epoch == b->epoch &&
	       a->batch == b->batch && a->kind == b->kind;
}

static size_t
nkey_hash(const struct ns_key *k, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	uint64_t v[] = {
	    k->type, k->job, k->rank, k->world, k->epoch, k->batch, k->kind};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		h = (h ^ v[i]) * 0x100000001b3ULL;
	return (size_t)(h ^ (h >> 31)) % n;
}

int
fs_init_state(struct feedfs *fs, struct feed *feed)
{
	memset(fs, 0, sizeof(*fs));
	fs->feed = feed;
	clock_gettime(CLOCK_REALTIME, &fs->mtime);
	fs->uid = getuid();
	fs->gid = getgid();
	fs->nbuckets = 4096;
	fs->by_key = calloc(fs->nbuckets, sizeof(*fs->by_key));
	fs->by_ino = calloc(fs->nbuckets, sizeof(*fs->by_ino));
	fs->ino_next = FUSE_ROOT_ID + 1;
	pthread_mutex_init(&fs->lock, NULL);
	return fs->by_key && fs->by_ino ? 0 : -ENOMEM;
}

void
fs_fini_state(struct feedfs *fs)
{
	for (size_t i = 0; fs->by_key && i < fs->nbuckets; i++)
		while (fs->by_key[i]) {
			struct node *n = fs->by_key[i];

			fs->by_key[i] = n->knext;
			if (n->nlookup && fs->feed)
				feed_nodes_sub(fs->feed, sizeof(*n));
			free(n);
		}
	free(fs->by_key);
	free(fs->by_ino);
	pthread_mutex_destroy(&fs->lock);
}

int
fs_node_ref(struct feedfs *fs, const struct ns_key *k, fuse_ino_t *ino)
{
	size_t h = nkey_hash(k, fs->nbuckets), hi;
	struct node *n;
	bool made = false;

	pthread_mutex_lock(&fs->lock);
	for (n = fs->by_key[h]; n; n = n->knext)
		if (nkey_eq(&n->k, k))
			break;
	if (!n && (n = calloc(1, sizeof(*n))) != NULL) {
		n->k = *k;
		n->ino = k->type == NS_ROOT ? FUSE_ROOT_ID : fs->ino_next++;
		n->knext = fs->by_key[h];
		fs->by_key[h] = n;
		hi = n->ino % fs->nbuckets;
		n->inext = fs->by_ino[hi];
		fs->by_ino[hi] = n;
		fs->nnodes++;
	}
	if (n) {
		made = n->nlookup++ == 0;
		*ino = n->ino;
	}
	pthread_mutex_unlock(&fs->lock);
	if (made && fs->feed) /* counted in the budget, without our lock */
		feed_nodes_add(fs->feed, sizeof(*n));
	return n ? 0 : -ENOMEM;
}

bool
fs_node_key(struct feedfs *fs, fuse_ino_t ino, struct ns_key *k)
{
	struct node *n;

	if (ino == FUSE_ROOT_ID) {
		ns_root(k);
		return true;
	}
	pthread_mutex_lock(&fs->lock);
	for (n = fs->by_ino[ino % fs->nbuckets]; n; n = n->inext)
		if (n->ino == ino)
			break;
	if (n)
		*k = n->k;
	pthread_mutex_unlock(&fs->lock);
	return n != NULL;
}

void
fs_node_forget(struct feedfs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	struct node *n, **pp;
	bool gone = false;

	if (ino == FUSE_ROOT_ID)
		return;
	pthread_mutex_lock(&fs->lock);
	for (pp = &fs->by_ino[ino % fs->nbuckets]; (n = *pp); pp = &n->inext)
		if (n->ino == ino)
			break;
	if (n &&
	    (n->nlookup -= nlookup < n->nlookup ? nlookup : n->nlookup) == 0) {
		*pp = n->inext;
		for (pp = &fs->by_key[nkey_hash(&n->k, fs->nbuckets)]; *pp;
		     pp = &(*pp)->knext)
			if (*pp == n) {
				*pp = n->knext;
				break;
			}
		fs->nnodes--;
		free(n);
		gone = true;
	}
	pthread_mutex_unlock(&fs->lock);
	if (gone && fs->feed)
		feed_nodes_sub(fs->feed, sizeof(*n));
}
