/*
 * nodes.c - the inode table of a mount (fs/, the FUSE glue): inodes are
 * allocated on lookup from a table keyed by what the node is (type, job,
 * rank, world, epoch, batch, kind), counted by the kernel's lookups and
 * dropped on forget, so any number of epochs and rank views can exist
 * without being stored.  Each node is counted in the feed's memory budget
 * while it exists (feed_nodes_add); past the nodes' share, the pruner asks
 * the kernel to forget the names looked up longest ago.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/log.h"
#include "engine/ns.h"
#include "fs/nodes.h"

#define PRUNE_BATCH 256 /* names the pruner invalidates per round */

struct node {
	struct ns_key k;
	fuse_ino_t ino;
	uint64_t nlookup;
	struct node *knext, *inext;
	struct node *lprev, *lnext; /* the LRU list, by last lookup */
	fuse_ino_t parent;	    /* where the kernel knows it, as name */
	size_t size;		    /* counted in the budget */
	char name[];
};

static void
lru_unlink(struct feedfs *fs, struct node *n)
{
	if (n->lprev)
		n->lprev->lnext = n->lnext;
	else
		fs->lru_head = n->lnext;
	if (n->lnext)
		n->lnext->lprev = n->lprev;
	else
		fs->lru_tail = n->lprev;
	n->lprev = n->lnext = NULL;
}

static void
lru_append(struct feedfs *fs, struct node *n)
{
	n->lprev = fs->lru_tail;
	n->lnext = NULL;
	if (fs->lru_tail)
		fs->lru_tail->lnext = n;
	else
		fs->lru_head = n;
	fs->lru_tail = n;
}

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
fs_nodes_init(struct feedfs *fs)
{
	fs->nbuckets = 4096;
	fs->by_key = calloc(fs->nbuckets, sizeof(*fs->by_key));
	fs->by_ino = calloc(fs->nbuckets, sizeof(*fs->by_ino));
	if (fs->by_key == NULL || fs->by_ino == NULL) {
		free(fs->by_key);
		free(fs->by_ino);
		fs->by_key = fs->by_ino = NULL;
		return -ENOMEM;
	}
	fs->ino_next = FUSE_ROOT_ID + 1;
	pthread_mutex_init(&fs->lock, NULL);
	pthread_cond_init(&fs->prune_cv, NULL);
	return 0;
}

void
fs_nodes_fini(struct feedfs *fs)
{
	for (size_t i = 0; i < fs->nbuckets; i++)
		while (fs->by_key[i]) {
			struct node *n = fs->by_key[i];

			fs->by_key[i] = n->knext;
			if (fs->feed)
				feed_nodes_sub(fs->feed, n->size);
			free(n);
		}
	free(fs->by_key);
	free(fs->by_ino);
	fs->by_key = fs->by_ino = NULL;
	pthread_cond_destroy(&fs->prune_cv);
	pthread_mutex_destroy(&fs->lock);
}

int
fs_node_ref(struct feedfs *fs, const struct ns_key *k, fuse_ino_t parent,
    const char *name, fuse_ino_t *ino)
{
	size_t h = nkey_hash(k, fs->nbuckets), hi;
	size_t size = sizeof(struct node) + strlen(name) + 1;
	struct node *n;
	bool made = false;

	pthread_mutex_lock(&fs->lock);
	for (n = fs->by_key[h]; n; n = n->knext)
		if (nkey_eq(&n->k, k))
			break;
	if (n)
		lru_unlink(fs, n);
	else if ((n = calloc(1, size)) != NULL) {
		n->k = *k;
		n->parent = parent;
		n->size = size;
		memcpy(n->name, name, size - sizeof(*n));
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
		lru_append(fs, n);
	}
	pthread_mutex_unlock(&fs->lock);
	/* Counted in the budget, without our lock; past the nodes' share,
	 * the pruner is woken. */
	if (made && fs->feed && feed_nodes_add(fs->feed, size)) {
		pthread_mutex_lock(&fs->lock);
		if (fs->pruning && !fs->prune_wanted) {
			fs->prune_wanted = true;
			pthread_cond_signal(&fs->prune_cv);
		}
		pthread_mutex_unlock(&fs->lock);
	}
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
	size_t gone = 0;

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
		lru_unlink(fs, n);
		gone = n->size;
		free(n);
	}
	pthread_mutex_unlock(&fs->lock);
	if (gone && fs->feed)
		feed_nodes_sub(fs->feed, gone);
}

/* One name for the kernel to forget. */
struct prune {
	fuse_ino_t parent;
	char name[NS_NAME_MAX];
};

/*
 * Ask the kernel to forget names, oldest first, until their nodes add up
 * to excess bytes (at most PRUNE_BATCH of them a round).  Each goes to
 * the end of the list, so that a name the kernel keeps (an open file)
 * comes round again only after the others.
 */
static void
prune_round(struct feedfs *fs, uint64_t excess, struct prune *p)
{
	size_t np = 0;
	uint64_t sum = 0;

	pthread_mutex_lock(&fs->lock);
	for (size_t i = 0; i < fs->nnodes && np < PRUNE_BATCH && sum < excess;
	     i++) {
		struct node *n = fs->lru_head;

		if (n == NULL)
			break;
		lru_unlink(fs, n);
		lru_append(fs, n);
		if (n->k.type == NS_ROOT || strlen(n->name) >= NS_NAME_MAX)
			continue;
		p[np].parent = n->parent;
		strcpy(p[np].name, n->name);
		np++;
		sum += n->size;
	}
	pthread_mutex_unlock(&fs->lock);
	/* Not under our lock: the kernel may send lookups meanwhile. */
	for (size_t i = 0; i < np && !fuse_session_exited(fs->se); i++)
		fuse_lowlevel_notify_inval_entry(
		    fs->se, p[i].parent, p[i].name, strlen(p[i].name));
}

static void *
pruner(void *arg)
{
	struct feedfs *fs = arg;
	struct prune *p = malloc(PRUNE_BATCH * sizeof(*p));

	uint64_t last = 0;

	pthread_mutex_lock(&fs->lock);
	while (p && !fs->prune_stop) {
		uint64_t excess;

		if (!fs->prune_wanted) {
			last = 0;
			pthread_cond_wait(&fs->prune_cv, &fs->lock);
			continue;
		}
		pthread_mutex_unlock(&fs->lock);
		/*
		 * Forgets come back asynchronously: a pause between rounds,
		 * longer when the last one gave nothing back (names of open
		 * files, which the kernel keeps).
		 */
		if ((excess = feed_nodes_excess(fs->feed)) > 0) {
			struct timespec ts = {0, 20 * 1000 * 1000};

			if (last && excess >= last)
				ts.tv_nsec = 500 * 1000 * 1000;
			prune_round(fs, excess, p);
			nanosleep(&ts, NULL);
		}
		last = excess;
		pthread_mutex_lock(&fs->lock);
		if (excess == 0)
			fs->prune_wanted = false;
	}
	pthread_mutex_unlock(&fs->lock);
	free(p);
	return NULL;
}

int
fs_prune_start(struct feedfs *fs, struct fuse_session *se)
{
	int r;

	fs->se = se;
	fs->prune_stop = false;
	if ((r = pthread_create(&fs->pruner, NULL, pruner, fs)) != 0) {
		log_warn("cannot start the node pruner: %s; names the kernel "
			 "remembers are not bounded",
		    strerror(r));
		return -r;
	}
	pthread_mutex_lock(&fs->lock);
	fs->pruning = true;
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

bool
fs_prune_stop(struct feedfs *fs)
{
	struct timespec ts;

	pthread_mutex_lock(&fs->lock);
	if (!fs->pruning) {
		pthread_mutex_unlock(&fs->lock);
		return true;
	}
	fs->pruning = false;
	fs->prune_stop = true;
	pthread_cond_signal(&fs->prune_cv);
	pthread_mutex_unlock(&fs->lock);
	/*
	 * A notification waits for the directory's lock, which a lookup the
	 * stopped loop will never answer may hold until the unmount: give it
	 * two seconds, then leave the thread (and the state it uses) be.
	 */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 2;
	if (pthread_timedjoin_np(fs->pruner, NULL, &ts) == 0)
		return true;
	log_warn("the node pruner is blocked in the kernel; exiting without it");
	return false;
}
