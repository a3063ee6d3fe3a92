/*
 * fs.c - the FUSE glue: names to nodes, nodes to feed files, errors to errno
 * replies.  Nothing here knows how a batch is made.
 *
 * Inodes are allocated on lookup from a table keyed by what the node is
 * (type, job, rank, world, epoch, batch, kind), counted by the kernel's
 * lookups and dropped on forget, so any number of epochs and rank views
 * can exist without being stored.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/log.h"
#include "fs/fs.h"
#include "fs/names.h"

enum ntype {
	N_ROOT,
	N_README,
	N_DOTDIR,  /* .feedfs */
	N_STATS,   /* .feedfs/stats */
	N_JOB,     /* JOB */
	N_INFO,    /* JOB/info.json */
	N_SAMPLES, /* JOB/samples.tsv */
	N_RANK,    /* JOB/rank-R-of-W */
	N_EPOCH,   /* JOB[/rank-R-of-W]/epoch-NNNN */
	N_BATCH,   /* .../batch-NNNNNN{.npy,.labels.npy,.ids.npy,.cuda} */
};

struct nkey {
	enum ntype type;
	uint32_t job, rank, world, epoch;
	uint64_t batch;
	enum batch_kind kind;
};

struct node {
	struct nkey k;
	fuse_ino_t ino;
	uint64_t nlookup;
	struct node *knext, *inext;
};

/* An open file: a feed handle, or generated text. */
struct ofile {
	struct feed_handle *h;
	char *text;
	size_t len;
};

/*
 * The kernel orders the open, the reads and the release of a handle
 * (through /dev/fuse), which run on different threads; ThreadSanitizer
 * cannot see that order, so a TSan build is told it.  Nothing otherwise.
 */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define HANDOVER_RELEASE(of) __tsan_release(of)
#define HANDOVER_ACQUIRE(of) __tsan_acquire(of)
#else
#define HANDOVER_RELEASE(of) ((void)(of))
#define HANDOVER_ACQUIRE(of) ((void)(of))
#endif

static struct feedfs *
fs_from_req(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static bool
nkey_eq(const struct nkey *a, const struct nkey *b)
{
	return a->type == b->type && a->job == b->job && a->rank == b->rank &&
	    a->world == b->world && a->epoch == b->epoch &&
	    a->batch == b->batch && a->kind == b->kind;
}

static size_t
nkey_hash(const struct nkey *k, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	uint64_t v[] = { k->type, k->job, k->rank, k->world, k->epoch,
		k->batch, k->kind };

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
	if (!fs->by_key || !fs->by_ino)
		return -ENOMEM;
	if ((fs->readme = feed_readme(feed, &fs->readme_len)) == NULL)
		return -ENOMEM;
	fs->info_len = calloc(feed_njobs(feed), sizeof(size_t));
	fs->samples_len = calloc(feed_njobs(feed), sizeof(size_t));
	if (!fs->info_len || !fs->samples_len)
		return -ENOMEM;
	/* The generated files' sizes are fixed: compute them once. */
	for (size_t j = 0; j < feed_njobs(feed); j++) {
		char *t;

		if ((t = feed_info_json(feed, j, &fs->info_len[j])) == NULL)
			return -ENOMEM;
		free(t);
		if ((t = feed_samples_tsv(feed, j, &fs->samples_len[j])) ==
		    NULL)
			return -ENOMEM;
		free(t);
	}
	return 0;
}

void
fs_fini_state(struct feedfs *fs)
{
	for (size_t i = 0; fs->by_key && i < fs->nbuckets; i++)
		while (fs->by_key[i]) {
			struct node *n = fs->by_key[i];

			fs->by_key[i] = n->knext;
			free(n);
		}
	free(fs->by_key);
	free(fs->by_ino);
	free(fs->readme);
	free(fs->info_len);
	free(fs->samples_len);
	pthread_mutex_destroy(&fs->lock);
}

/* The node of k, created if new; nlookup incremented.  NULL: no memory. */
static struct node *
node_ref(struct feedfs *fs, const struct nkey *k)
{
	size_t h = nkey_hash(k, fs->nbuckets), hi;
	struct node *n;

	pthread_mutex_lock(&fs->lock);
	for (n = fs->by_key[h]; n; n = n->knext)
		if (nkey_eq(&n->k, k))
			break;
	if (!n && (n = calloc(1, sizeof(*n))) != NULL) {
		n->k = *k;
		n->ino = k->type == N_ROOT ? FUSE_ROOT_ID : fs->ino_next++;
		n->knext = fs->by_key[h];
		fs->by_key[h] = n;
		hi = n->ino % fs->nbuckets;
		n->inext = fs->by_ino[hi];
		fs->by_ino[hi] = n;
		fs->nnodes++;
	}
	if (n)
		n->nlookup++;
	pthread_mutex_unlock(&fs->lock);
	return n;
}

/* The key of inode ino (false if unknown). */
static bool
node_key(struct feedfs *fs, fuse_ino_t ino, struct nkey *k)
{
	struct node *n;

	if (ino == FUSE_ROOT_ID) {
		memset(k, 0, sizeof(*k));
		k->type = N_ROOT;
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

static void
node_forget(struct feedfs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	struct node *n, **pp;

	if (ino == FUSE_ROOT_ID)
		return;
	pthread_mutex_lock(&fs->lock);
	for (pp = &fs->by_ino[ino % fs->nbuckets]; (n = *pp); pp = &n->inext)
		if (n->ino == ino)
			break;
	if (n && (n->nlookup -= nlookup < n->nlookup ? nlookup : n->nlookup) ==
		0) {
		*pp = n->inext;
		for (pp = &fs->by_key[nkey_hash(&n->k, fs->nbuckets)]; *pp;
		     pp = &(*pp)->knext)
			if (*pp == n) {
				*pp = n->knext;
				break;
			}
		fs->nnodes--;
		free(n);
	}
	pthread_mutex_unlock(&fs->lock);
}

/* ---- names ------------------------------------------------------------ */

static struct feed_key
feed_key_of(const struct nkey *k)
{
	struct feed_key fk = { k->job, k->rank, k->world, k->epoch, k->batch };

	return fk;
}

/* The child called name of the directory node p: 0 or -ENOENT. */
static int
child_key(struct feedfs *fs, const struct nkey *p, const char *name,
    struct nkey *c)
{
	struct feed *f = fs->feed;
	int j;

	*c = *p;
	switch (p->type) {
	case N_ROOT:
		memset(c, 0, sizeof(*c));
		c->world = 1;
		if (strcmp(name, "README") == 0)
			c->type = N_README;
		else if (strcmp(name, ".feedfs") == 0)
			c->type = N_DOTDIR;
		else if ((j = feed_find_job(f, name)) >= 0) {
			c->type = N_JOB;
			c->job = (uint32_t)j;
		} else
			return -ENOENT;
		return 0;
	case N_DOTDIR:
		if (strcmp(name, "stats") != 0)
			return -ENOENT;
		c->type = N_STATS;
		return 0;
	case N_JOB:
		if (strcmp(name, "info.json") == 0) {
			c->type = N_INFO;
			return 0;
		}
		if (strcmp(name, "samples.tsv") == 0) {
			c->type = N_SAMPLES;
			return 0;
		}
		if (fs_parse_rank(name, &c->rank, &c->world)) {
			c->type = N_RANK;
			return 0;
		}
		/* epochs of the whole view: */
		/* FALLTHROUGH */
	case N_RANK:
		if (!fs_parse_epoch(name, &c->epoch) ||
		    c->epoch >= feed_job(f, c->job)->cfg->epochs)
			return -ENOENT;
		c->type = N_EPOCH;
		return 0;
	case N_EPOCH: {
		struct feed_key fk;

		if (!fs_parse_batch(name, &c->batch, &c->kind) ||
		    (c->kind == BK_CUDA && !feed_job(f, c->job)->cfg->gpu))
			return -ENOENT;
		fk = feed_key_of(c);
		if (!feed_key_valid(f, &fk))
			return -ENOENT;
		c->type = N_BATCH;
		return 0;
	}
	default:
		return -ENOTDIR;
	}
}

static void
fill_stat(struct feedfs *fs, const struct nkey *k, fuse_ino_t ino,
    struct stat *st)
{
	struct feed *f = fs->feed;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atim = st->st_mtim = st->st_ctim = fs->mtime;
	st->st_blksize = 1 << 20;
	switch (k->type) {
	case N_ROOT:
	case N_DOTDIR:
	case N_JOB:
	case N_RANK:
	case N_EPOCH:
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		break;
	case N_README:
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)fs->readme_len;
		break;
	case N_STATS:
		/* Live: its size is only known when read (direct_io). */
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		break;
	case N_INFO:
	case N_SAMPLES:
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)(k->type == N_INFO ? fs->info_len[k->job]
							: fs->samples_len[k->job]);
		break;
	case N_BATCH: {
		struct feed_key fk = feed_key_of(k);

		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)feed_file_size(f, &fk, k->kind);
		break;
	}
	}
	st->st_blocks = (st->st_size + 511) / 512;
}

/* The largest read and readahead request (libfuse's buffer holds 1 MiB). */
#define FS_MAX_REQUEST (1u << 20)

/* ---- operations ------------------------------------------------------- */

static void
fs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* Bytes never change under a name: let the kernel keep them. */
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/*
	 * Large requests: libfuse asks the kernel for max_pages from
	 * max_write (even on a read-only mount), and reads and readahead
	 * then come in 1 MiB pieces instead of 128 KiB ones.  max_read stays
	 * 0 (unlimited) so that it agrees with the mount option.
	 */
	conn->max_write = FS_MAX_REQUEST;
	conn->max_readahead = FS_MAX_REQUEST;
}

static void
fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct feedfs *fs = fs_from_req(req);
	struct fuse_entry_param e;
	struct nkey pk, ck;
	struct node *n;
	int r;

	if (!node_key(fs, parent, &pk)) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if ((r = child_key(fs, &pk, name, &ck)) != 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if ((n = node_ref(fs, &ck)) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = n->ino;
	e.generation = 1;
	fill_stat(fs, &ck, n->ino, &e.attr);
	/* Names and sizes never change while mounted, but stats does. */
	e.attr_timeout = ck.type == N_STATS ? 0 : 3600;
	e.entry_timeout = 3600;
	fuse_reply_entry(req, &e);
}

static void
fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	node_forget(fs_from_req(req), ino, nlookup);
	fuse_reply_none(req);
}

static void
fs_op_forget_multi(fuse_req_t req, size_t count,
    struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		node_forget(fs_from_req(req), forgets[i].ino,
		    forgets[i].nlookup);
	fuse_reply_none(req);
}

static void
fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct stat st;
	struct nkey k;

	(void)fi;
	if (!node_key(fs, ino, &k)) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	fill_stat(fs, &k, ino, &st);
	fuse_reply_attr(req, &st, k.type == N_STATS ? 0 : 3600);
}

static void
fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct ofile *of;
	struct nkey k;
	int r = 0;

	if (!node_key(fs, ino, &k)) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY ||
	    (fi->flags & (O_TRUNC | O_CREAT))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if ((of = calloc(1, sizeof(*of))) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	switch (k.type) {
	case N_README:
		if ((of->text = malloc(fs->readme_len + 1)) == NULL)
			r = -ENOMEM;
		else {
			memcpy(of->text, fs->readme, fs->readme_len);
			of->len = fs->readme_len;
		}
		fi->keep_cache = 1;
		break;
	case N_STATS:
		of->text = feed_stats(fs->feed, &of->len);
		r = of->text ? 0 : -ENOMEM;
		fi->direct_io = 1;
		break;
	case N_INFO:
		of->text = feed_info_json(fs->feed, k.job, &of->len);
		r = of->text ? 0 : -ENOMEM;
		fi->keep_cache = 1;
		break;
	case N_SAMPLES:
		of->text = feed_samples_tsv(fs->feed, k.job, &of->len);
		r = of->text ? 0 : -ENOMEM;
		fi->keep_cache = 1;
		break;
	case N_BATCH: {
		struct feed_key fk = feed_key_of(&k);

		r = feed_open(fs->feed, &fk, k.kind, &of->h);
		/* A .cuda file's bytes differ per open (its buffer). */
		if (k.kind == BK_CUDA)
			fi->direct_io = 1;
		else
			fi->keep_cache = 1;
		break;
	}
	default:
		r = -EISDIR;
	}
	if (r != 0) {
		free(of->text);
		free(of);
		fuse_reply_err(req, -r);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)of;
	HANDOVER_RELEASE(of);
	if (fuse_reply_open(req, fi) == -ENOENT) {
		/* The opener was interrupted: nobody will release this. */
		if (of->h)
			feed_release(fs->feed, of->h);
		free(of->text);
		free(of);
	}
}

static void
fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct ofile *of = (struct ofile *)(uintptr_t)fi->fh;
	const void *p = NULL;
	size_t len = 0;
	int r = 0;

	(void)ino;
	HANDOVER_ACQUIRE(of);
	if (off < 0)
		r = -EINVAL;
	else if (of->h)
		r = feed_read(fs->feed, of->h, (uint64_t)off, size, &p, &len);
	else if ((uint64_t)off < of->len) {
		len = of->len - (size_t)off < size ? of->len - (size_t)off
						   : size;
		p = of->text + off;
	}
	/*
	 * The last touch of `of`: once the reply is out, a release may free
	 * it (the bytes replied are the batch's, which the handle keeps).
	 */
	HANDOVER_RELEASE(of);
	if (r != 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_buf(req, len ? p : NULL, len);
}

static void
fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct ofile *of = (struct ofile *)(uintptr_t)fi->fh;

	(void)ino;
	HANDOVER_ACQUIRE(of);
	if (of->h)
		feed_release(fs->feed, of->h);
	free(of->text);
	free(of);
	fuse_reply_err(req, 0);
}

static void
fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct nkey k;

	if (!node_key(fs, ino, &k)) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (k.type != N_ROOT && k.type != N_DOTDIR && k.type != N_JOB &&
	    k.type != N_RANK && k.type != N_EPOCH) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/*
 * The i-th entry of directory k (after "." and ".."): its name and type.
 * Returns false past the last.
 */
static bool
dir_entry(struct feedfs *fs, const struct nkey *k, uint64_t i, char *name,
    size_t len, struct nkey *c)
{
	struct feed *f = fs->feed;
	struct job *j;
	uint64_t nb;

	*c = *k;
	switch (k->type) {
	case N_ROOT:
		memset(c, 0, sizeof(*c));
		c->world = 1;
		if (i == 0) {
			snprintf(name, len, "README");
			c->type = N_README;
		} else if (i == 1) {
			snprintf(name, len, ".feedfs");
			c->type = N_DOTDIR;
		} else if (i - 2 < feed_njobs(f)) {
			c->type = N_JOB;
			c->job = (uint32_t)(i - 2);
			snprintf(name, len, "%s", feed_job(f, c->job)->cfg->name);
		} else
			return false;
		return true;
	case N_DOTDIR:
		if (i > 0)
			return false;
		snprintf(name, len, "stats");
		c->type = N_STATS;
		return true;
	case N_JOB:
		if (i == 0) {
			snprintf(name, len, "info.json");
			c->type = N_INFO;
			return true;
		}
		if (i == 1) {
			snprintf(name, len, "samples.tsv");
			c->type = N_SAMPLES;
			return true;
		}
		i -= 2;
		/* FALLTHROUGH */
	case N_RANK:
		j = feed_job(f, k->job);
		if (i >= j->cfg->epochs)
			return false;
		c->type = N_EPOCH;
		c->epoch = (uint32_t)i;
		snprintf(name, len, "epoch-%04" PRIu32, c->epoch);
		return true;
	case N_EPOCH: {
		unsigned per; /* files per batch: .cuda too with gpu = on */

		j = feed_job(f, k->job);
		per = j->cfg->gpu ? 4 : 3;
		nb = plan_nbatches(&j->plan, k->world);
		if (i >= per * nb)
			return false;
		c->type = N_BATCH;
		c->batch = i / per;
		c->kind = (enum batch_kind)(i % per);
		snprintf(name, len, "batch-%06" PRIu64 "%s", c->batch,
		    c->kind == BK_IMAGES     ? ".npy"
			: c->kind == BK_LABELS ? ".labels.npy"
			: c->kind == BK_IDS    ? ".ids.npy"
					       : ".cuda");
		return true;
	}
	default:
		return false;
	}
}

static void
fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	char *buf, name[64];
	size_t used = 0;
	struct nkey k, c;
	struct stat st;

	(void)fi;
	if (!node_key(fs, ino, &k)) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if ((buf = malloc(size)) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (uint64_t i = (uint64_t)off;; i++) {
		size_t n;

		memset(&st, 0, sizeof(st));
		if (i < 2) {
			snprintf(name, sizeof(name), i ? ".." : ".");
			st.st_mode = S_IFDIR;
		} else if (dir_entry(fs, &k, i - 2, name, sizeof(name), &c)) {
			fill_stat(fs, &c, 0, &st);
			st.st_mode &= S_IFMT;
		} else
			break;
		/* An inode number for d_ino only; lookup gives the real one. */
		st.st_ino = (ino_t)(i + 2);
		n = fuse_add_direntry(req, buf + used, size - used, name, &st,
		    (off_t)(i + 1));
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void
fs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

static void
fs_op_erofs(fuse_req_t req)
{
	fuse_reply_err(req, EROFS);
}

static void
fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
    struct fuse_file_info *fi)
{
	(void)ino, (void)attr, (void)to_set, (void)fi;
	fs_op_erofs(req);
}

static void
fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
    dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	fs_op_erofs(req);
}

static void
fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	fs_op_erofs(req);
}

static void
fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	fs_op_erofs(req);
}

static void
fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
    const char *name)
{
	(void)link, (void)parent, (void)name;
	fs_op_erofs(req);
}

static void
fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
    fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	(void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
	fs_op_erofs(req);
}

static void
fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
    const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	fs_op_erofs(req);
}

static void
fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
    off_t off, struct fuse_file_info *fi)
{
	(void)ino, (void)buf, (void)size, (void)off, (void)fi;
	fs_op_erofs(req);
}

static void
fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
    const char *value, size_t size, int flags)
{
	(void)ino, (void)name, (void)value, (void)size, (void)flags;
	fs_op_erofs(req);
}

static void
fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino, (void)name;
	fs_op_erofs(req);
}

static void
fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
    struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	fs_op_erofs(req);
}

static void
fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
    off_t length, struct fuse_file_info *fi)
{
	(void)ino, (void)mode, (void)offset, (void)length, (void)fi;
	fs_op_erofs(req);
}

const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_op_init,
	.lookup = fs_op_lookup,
	.forget = fs_op_forget,
	.forget_multi = fs_op_forget_multi,
	.getattr = fs_op_getattr,
	.setattr = fs_op_setattr,
	.mknod = fs_op_mknod,
	.mkdir = fs_op_mkdir,
	.unlink = fs_op_unlink,
	.rmdir = fs_op_unlink,
	.symlink = fs_op_symlink,
	.rename = fs_op_rename,
	.link = fs_op_link,
	.open = fs_op_open,
	.read = fs_op_read,
	.write = fs_op_write,
	.release = fs_op_release,
	.opendir = fs_op_opendir,
	.readdir = fs_op_readdir,
	.statfs = fs_op_statfs,
	.setxattr = fs_op_setxattr,
	.removexattr = fs_op_removexattr,
	.create = fs_op_create,
	.fallocate = fs_op_fallocate,
};
