/*
 * fs.c - the FUSE operations (fs/, the FUSE glue over the engine): inodes
 * to namespace nodes (engine/ns.h), nodes to feed files, errors to errno
 * replies; the per-mount state and its open files.  Nothing here knows
 * which names exist or how a batch is made.  The inode table is nodes.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "util/replybuf.h"
#include "engine/ns.h"
#include "fs/fs.h"
#include "fs/nodes.h"

/* An open file: a feed handle, or generated text (owned: ours to free,
 * with feed_text_free). */
struct ofile {
	struct feed_handle *h;
	const char *text;
	size_t len;
	char *owned;
	struct ofile *prev, *next; /* fs->files, under fs->files_lock */
};

/*
 * The open files, so that those still open when the session ends are
 * closed then: an unmount can end the session with releases the kernel
 * sent late, or never (a reader that still holds the file, a lazy
 * unmount), and each holds a batch.
 */
static void
files_link(struct feedfs *fs, struct ofile *of)
{
	pthread_mutex_lock(&fs->files_lock);
	of->prev = NULL;
	of->next = fs->files;
	if (fs->files != NULL)
		fs->files->prev = of;
	fs->files = of;
	pthread_mutex_unlock(&fs->files_lock);
}

static void
files_unlink(struct feedfs *fs, struct ofile *of)
{
	pthread_mutex_lock(&fs->files_lock);
	if (of->prev != NULL)
		of->prev->next = of->next;
	else
		fs->files = of->next;
	if (of->next != NULL)
		of->next->prev = of->prev;
	pthread_mutex_unlock(&fs->files_lock);
}

static void
ofile_close(struct feedfs *fs, struct ofile *of)
{
	if (of->h)
		feed_release(fs->feed, of->h);
	feed_text_free(fs->feed, of->owned);
	free(of);
}

/* Close the files still open when the session has ended. */
static void
close_files(struct feedfs *fs)
{
	struct ofile *of;

	pthread_mutex_lock(&fs->files_lock);
	while ((of = fs->files) != NULL) {
		fs->files = of->next;
		ofile_close(fs, of);
	}
	pthread_mutex_unlock(&fs->files_lock);
}

size_t
fs_open_files(struct feedfs *fs)
{
	size_t n = 0;

	pthread_mutex_lock(&fs->files_lock);
	for (const struct ofile *of = fs->files; of != NULL; of = of->next)
		n++;
	pthread_mutex_unlock(&fs->files_lock);
	return n;
}

int
fs_init_state(struct feedfs *fs, struct feed *feed)
{
	int r;

	memset(fs, 0, sizeof(*fs));
	fs->feed = feed;
	clock_gettime(CLOCK_REALTIME, &fs->mtime);
	fs->uid = getuid();
	fs->gid = getgid();
	if ((r = fs_nodes_init(fs)) != 0)
		return r;
	pthread_mutex_init(&fs->files_lock, NULL);
	return 0;
}

void
fs_fini_state(struct feedfs *fs)
{
	close_files(fs);
	fs_nodes_fini(fs);
	pthread_mutex_destroy(&fs->files_lock);
}

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

static void
fill_stat(
    struct feedfs *fs, const struct ns_key *k, fuse_ino_t ino, struct stat *st)
{
	struct ns_attr a;

	ns_attr(fs->feed, k, &a);
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atim = st->st_mtim = st->st_ctim = fs->mtime;
	st->st_blksize = 1 << 20;
	st->st_mode =
	    a.dir ? S_IFDIR | 0555 : S_IFREG | (a.writable ? 0644 : 0444);
	st->st_nlink = a.dir ? 2 : 1;
	st->st_size = (off_t)a.size;
	st->st_blocks = (st->st_size + 511) / 512;
}

/* Whether k's contents (and size) change at every read: no attribute
 * caching (stats, log, errors.tsv). */
static bool
live(struct feedfs *fs, const struct ns_key *k)
{
	(void)fs;
	return k->type == NS_STATS || k->type == NS_LOG || k->type == NS_ERRORS;
}

/* The largest read and readahead request (libfuse's buffer holds 1 MiB). */
#define FS_MAX_REQUEST (1u << 20)

/*
 * Whether the caller of req may change JOB/mixture: root or the mount's
 * owner.  Others get EACCES, and the log says so.
 */
static int
may_write(fuse_req_t req, const struct ns_key *k)
{
	struct feedfs *fs = fs_from_req(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	if (ctx->uid == 0 || ctx->uid == fs->uid)
		return 0;
	log_warn("job %s: mixture: uid %u may not change the weights (only "
		 "root or the mount's owner may)",
	    feed_job_name(fs->feed, k->job), (unsigned)ctx->uid);
	return -EACCES;
}

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
	struct ns_key pk, ck;
	fuse_ino_t ino;
	int r;

	if (!fs_node_key(fs, parent, &pk)) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if ((r = ns_child(fs->feed, &pk, name, &ck)) != 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if ((r = fs_node_ref(fs, &ck, parent, name, &ino)) != 0) {
		fuse_reply_err(req, -r);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	e.generation = 1;
	fill_stat(fs, &ck, ino, &e.attr);
	/* Names and sizes never change while mounted, but live files do. */
	e.attr_timeout = live(fs, &ck) ? 0 : 3600;
	e.entry_timeout = 3600;
	fuse_reply_entry(req, &e);
}

static void
fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_node_forget(fs_from_req(req), ino, nlookup);
	fuse_reply_none(req);
}

static void
fs_op_forget_multi(
    fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		fs_node_forget(
		    fs_from_req(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void
fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct stat st;
	struct ns_key k;

	(void)fi;
	if (!fs_node_key(fs, ino, &k)) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	fill_stat(fs, &k, ino, &st);
	fuse_reply_attr(req, &st, live(fs, &k) ? 0 : 3600);
}

static void
fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct ofile *of;
	struct ns_key k;
	int r = 0, t;

	if (!fs_node_key(fs, ino, &k)) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (k.type == NS_MIXTURE &&
	    ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))) {
		if ((r = may_write(req, &k)) != 0) {
			fuse_reply_err(req, -r);
			return;
		}
	} else if ((fi->flags & O_ACCMODE) != O_RDONLY ||
		   (fi->flags & (O_TRUNC | O_CREAT))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if ((of = calloc(1, sizeof(*of))) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (k.type == NS_BATCH) {
		struct feed_key fk = ns_feed_key(&k);

		r = feed_open(fs->feed, &fk, k.kind, &of->h);
		/*
		 * One copy, from the batch to the reader, where the kernel
		 * still allows mmap then (fs/io.h); else the page cache.  A
		 * .cuda file's bytes differ per open (its buffer).
		 */
		if (k.kind == BK_CUDA || fs_io_direct_mmap(&fs->io))
			fi->direct_io = 1;
		else
			fi->keep_cache = 1;
		if (log_first(&fs->io_logged))
			log_info("batch files: %s",
			    fs_io_direct_mmap(&fs->io)
				? "direct I/O, one copy to the reader "
				  "(the kernel allows shared mmap of them)"
				: "page cache (this kernel cannot map "
				  "direct I/O files shared: before Linux "
				  "6.6)");
	} else if (k.type == NS_MIXTURE || k.type == NS_EMIX) {
		/* Made at the open; the epoch's one opens that epoch. */
		r = feed_mixture_text(fs->feed, k.job,
		    k.type == NS_EMIX ? k.epoch : FEED_MIX_NEXT, &of->owned,
		    &of->len);
		of->text = of->owned;
		fi->direct_io = 1;
	} else if ((t = ns_text(&k)) >= 0) {
		r = feed_text(fs->feed, (enum feed_text)t, k.job, &of->text,
		    &of->len, &of->owned);
		/* Live files: their size is only known when read. */
		if (FEED_TEXT_LIVE(t))
			fi->direct_io = 1;
		else
			fi->keep_cache = 1;
	} else
		r = -EISDIR;
	if (r != 0) {
		free(of);
		fuse_reply_err(req, -r);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)of;
	files_link(fs, of);
	HANDOVER_RELEASE(of);
	if (fuse_reply_open(req, fi) == -ENOENT) {
		/* The opener was interrupted: nobody will release this. */
		files_unlink(fs, of);
		ofile_close(fs, of);
	}
}

static void
fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct ofile *of = (struct ofile *)(uintptr_t)fi->fh;
	struct feed_pin *pin = NULL;
	const void *p = NULL;
	size_t len = 0;
	int r = 0;

	(void)ino;
	HANDOVER_ACQUIRE(of);
	if (off < 0)
		r = -EINVAL;
	else if (of->h)
		r = feed_read(
		    fs->feed, of->h, (uint64_t)off, size, &p, &len, &pin);
	else if ((uint64_t)off < of->len) {
		len =
		    of->len - (size_t)off < size ? of->len - (size_t)off : size;
		p = of->text + off;
	}
	/*
	 * Bytes of the handle's own (a planned file's, a text's) go out from
	 * the thread's reply buffer: the kernel ends the read inside the
	 * reply's writev, and the release it then sends may free the handle
	 * on another thread before that writev returns (ASan checks the
	 * iovec then).  The kernel has copied them by then: without memory
	 * for the copy they go out from the handle, and the read does not
	 * fail.  A batch's bytes are held by the pin.
	 */
	if (r == 0 && len > 0 && pin == NULL) {
		uint8_t *copy = ff_reply_buf(len);

		if (copy != NULL)
			p = memcpy(copy, p, len);
	}
	/* The last touch of `of`: once the reply is out, a release may free
	 * it. */
	HANDOVER_RELEASE(of);
	if (r != 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_buf(req, len ? p : NULL, len);
	feed_read_end(fs->feed, pin); /* the kernel has the bytes */
}

static void
fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct ofile *of = (struct ofile *)(uintptr_t)fi->fh;

	(void)ino;
	HANDOVER_ACQUIRE(of);
	files_unlink(fs, of);
	ofile_close(fs, of);
	fuse_reply_err(req, 0);
}

static void
fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct ns_key k;

	if (!fs_node_key(fs, ino, &k)) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	{
		struct ns_attr a;

		ns_attr(fs->feed, &k, &a);
		if (!a.dir) {
			fuse_reply_err(req, ENOTDIR);
			return;
		}
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void
fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	char *buf, name[NS_NAME_MAX];
	size_t used = 0;
	struct ns_key k, c;
	struct stat st;

	(void)fi;
	if (!fs_node_key(fs, ino, &k)) {
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
		} else if (ns_entry(
			       fs->feed, &k, i - 2, name, sizeof(name), &c)) {
			/* The type alone: a .text.jsonl's size may make its
			 * batch (ns_attr). */
			st.st_mode = ns_is_dir(&c) ? S_IFDIR : S_IFREG;
		} else
			break;
		/* An inode number for d_ino only; lookup gives the real one. */
		st.st_ino = (ino_t)(i + 2);
		n = fuse_add_direntry(
		    req, buf + used, size - used, name, &st, (off_t)(i + 1));
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
	struct feedfs *fs = fs_from_req(req);
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_namemax = 255;
	/* Read-write only for a mixture's JOB/mixture. */
	sv.f_flag = feed_writable(fs->feed) ? 0 : ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

static void
fs_op_erofs(fuse_req_t req)
{
	fuse_reply_err(req, EROFS);
}

/* Only JOB/mixture's truncation to 0 (an O_TRUNC open): a no-op. */
static void
fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
    struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct ns_key k;
	struct stat st;
	int r;

	(void)fi;
	if (!fs_node_key(fs, ino, &k) || k.type != NS_MIXTURE ||
	    (to_set & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME |
			  FUSE_SET_ATTR_CTIME | FUSE_SET_ATTR_MTIME_NOW)) ||
	    !(to_set & FUSE_SET_ATTR_SIZE) || attr->st_size != 0) {
		fs_op_erofs(req);
		return;
	}
	if ((r = may_write(req, &k)) != 0) {
		fuse_reply_err(req, -r);
		return;
	}
	fill_stat(fs, &k, ino, &st);
	fuse_reply_attr(req, &st, 0);
}

static void
fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
    dev_t rdev)
{
	fs_op_erofs(req);
}

static void
fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	fs_op_erofs(req);
}

static void
fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fs_op_erofs(req);
}

static void
fs_op_symlink(
    fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fs_op_erofs(req);
}

static void
fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
    fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	fs_op_erofs(req);
}

static void
fs_op_link(
    fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fs_op_erofs(req);
}

/* JOB/mixture: each write is one line of weights (the offset is ignored). */
static void
fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
    off_t off, struct fuse_file_info *fi)
{
	struct feedfs *fs = fs_from_req(req);
	struct ns_key k;
	int r;

	(void)off;
	(void)fi;
	if (!fs_node_key(fs, ino, &k) || k.type != NS_MIXTURE) {
		fs_op_erofs(req);
		return;
	}
	if ((r = may_write(req, &k)) == 0)
		r = feed_mixture_set(fs->feed, k.job, buf, size);
	if (r != 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_write(req, size);
}

static void
fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
    const char *value, size_t size, int flags)
{
	fs_op_erofs(req);
}

static void
fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fs_op_erofs(req);
}

static void
fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
    struct fuse_file_info *fi)
{
	fs_op_erofs(req);
}

static void
fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
    off_t length, struct fuse_file_info *fi)
{
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
