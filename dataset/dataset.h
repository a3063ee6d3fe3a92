/*
 * dataset.h - the index of a dataset's samples: dataset/'s interface.
 * Layer: dataset/ (the datasets), over dataset/remote/ and util/.
 *
 * Sample ids are positions in the list of samples sorted by relative path
 * (byte order), so they are stable across mounts.  ImageFolder: classes are
 * the subdirectories of root sorted by name (as torchvision does), label =
 * index of the class; files ending in .jpg/.jpeg/.png/.webp (any case) are
 * found at any depth below a class directory; hidden entries are skipped;
 * symbolic links are followed as torchvision's ImageFolder follows them,
 * out of root too, except where ds_scan.c says (dangling, loops, and, when
 * feedfs runs as root, a link out of root to what the link's owner cannot
 * read); a directory reached through links is read at most once a
 * class.  What the scan leaves out is counted, and the first of it kept
 * (ds->left).
 * Manifest: lines "relative/path<TAB>label", labels >= 0; nclasses
 * = max label + 1; a path that is absolute or has a ".." component is an
 * error.  With text (ds_open_meta, ds_open_shards_remote) each sample has
 * a caption; a shard dataset's labels may be lists (multi).  Immutable
 * after ds_open; safe to read from any thread.
 */
#ifndef FEEDFS_DATASET_H
#define FEEDFS_DATASET_H

#include <sys/stat.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ds_sample {
	char *path; /* relative to root; a shard's: "SHARD:MEMBER" */
	int64_t label; /* -1: none (a bad sample, or a multi-label one) */
	/* The file itself through no symbolic link, where path goes through
	 * one (scan only): relative to root, or absolute for a file out of
	 * it; NULL: path. */
	char *open_path;
	/* Tar shards only: the image member's data, size bytes at off in
	 * shards[shard].  bad, when set, why the sample cannot be served (a
	 * static string: "a symbolic link member", "no .txt member", ...):
	 * it fails when made (on_error decides), in any kind of dataset. */
	uint32_t shard;
	uint32_t tlen; /* text's bytes */
	/* A remote shard's member whose bytes its index saw: 1 + its
	 * record in dataset.digests (ds_sample_digest); 0: none. */
	uint32_t digest;
	/* Scan only: 0, or 1 + the index in ds->guards of the user whose
	 * link led out of root to this file: it is served only while that
	 * user may read it (ds_sample_open checks it again). */
	uint32_t guard;
	uint64_t off, size;
	const char *bad;
	/* With text (dataset.text): the caption, tlen bytes of valid UTF-8
	 * (a NUL after them; NULs inside allowed); NULL only with bad. */
	char *text;
	/* Multi-label (dataset.multi): labels[0] class indexes, sorted and
	 * distinct, at labels[1..]; NULL only with bad. */
	uint32_t *labels;
};

/*
 * What a dataset's samples carry besides their image, as its config says
 * (the keys of feedfs.conf(5)): label (shards: cls | json:KEY | none | auto;
 * NULL: cls), text (txt | json:KEY | none; NULL: none) and the names of
 * classes = FILE (NULL: none), by which a shard's .json label may name
 * its classes.  Any of it may be NULL (ds_open and ds_open_shards pass
 * NULL: labels as before, no text).
 */
struct ds_meta {
	const char *label;
	const char *text;
	char *const *class_names;
	size_t nclass_names;
};

/* What an index knows of a member's bytes (see ds_sample_digest). */
struct ds_digest {
	uint8_t sha256[32];
	uint8_t head[16];
	uint8_t hlen;
};

/*
 * The index pass over a dataset's remote shards (ds_open_shards_remote):
 * its shards, how each one's index was had (kept in cache_dir, from the
 * cluster tier, streamed, or failed), the bytes of the shards to stream
 * and those streamed so far, and the milliseconds since it began.
 */
struct ds_pass {
	size_t shards, done;
	size_t kept, tier, streamed, failed;
	uint64_t stream_bytes, streamed_bytes;
	uint64_t ms;
};

/* A tar shard as it was indexed: reads check that it did not change. */
struct ds_shard {
	char *path; /* absolute */
	struct stat st;
};

#define DS_SKIP_KINDS 8

/* Why a file of an ImageFolder tree is not served (ds->left). */
enum ds_left_why {
	DS_LEFT_NAME,	  /* not an image by its name (ds->skipped: by ext) */
	DS_LEFT_ROOT,	  /* a file beside the class folders */
	DS_LEFT_HIDDEN,	  /* a name starting with '.' in a class folder */
	DS_LEFT_SPECIAL,  /* a FIFO, socket or device (or a link to one) */
	DS_LEFT_DANGLING, /* a symbolic link to nothing */
	DS_LEFT_LOOP,	  /* a loop of links, or a link to a directory that
			     holds it (or holds the root) */
	DS_LEFT_REFUSED,  /* as root: a link out of root to what its owner
			     cannot read */
	DS_LEFT_UNREACHABLE, /* a link whose target cannot be reached */
	DS_LEFT_AGAIN,	  /* a directory reached again through a link: its
			     files are served once, under the first path */
	DS_NLEFT
};

/* One thing the scan left out, for --check's list. */
struct ds_left {
	char *path;   /* relative to root, as the scan met it */
	char *target; /* a link's: what it names, or where it leads; NULL */
	uint32_t uid; /* DS_LEFT_REFUSED: the link's owner */
	uint8_t why;  /* enum ds_left_why */
	bool image;   /* the name is one the scan takes as an image */
};

/* The left-out entries kept for --check (all of them are counted). */
#define DS_LEFT_KEPT 10000

/* A user whose link led out of root (ds_guard.c). */
struct ds_guard {
	uint32_t uid, gid;
	uint32_t *groups; /* supplementary, from getgrouplist */
	size_t ngroups;
	char *okdir; /* the last directory whose path it may search (scan) */
};

struct dataset {
	char *name;
	char *root; /* absolute; shards: the directory they are found under */
	struct ds_sample *samples;
	size_t n;
	/* ImageFolder: class names; manifest: "0", "1", ...; shards with
	 * label = cls or json:KEY: the distinct labels in increasing order
	 * (a sample's label is the index of its class here, as every
	 * dataset's is: labels 0, 1, 3, 7 are classes 0..3) */
	char **classes;
	size_t nclasses;
	bool
	    manifest; /* links in paths are resolved at open (ds_sample_open) */
	bool text;  /* its samples have captions (text = txt or json:KEY) */
	/* Multi-label: label = json:KEY met a list (of class indexes, or of
	 * names of classes = FILE) in some sample: every sample's labels are
	 * a list (an integer is a list of one), served multi-hot; classes
	 * are "0".."K-1", K the largest index + 1, or the names of classes =
	 * FILE (classes_file, set by core/dsopen.c). */
	bool multi;
	bool classes_file;
	struct ds_shard *shards; /* WebDataset tar shards (ds_open_shards) */
	size_t nshards;
	/* Remote shards (dataset/remote/remote.h): the reader of all of them, and one
	 * object per shard; NULL for local shards. */
	struct remote_ctx *remote;
	struct remote_obj *robjs;
	/* What the index of remote shards saw of their members' bytes
	 * (ds_sample.digest), and how the index pass went. */
	struct ds_digest *digests;
	size_t ndigests;
	struct ds_pass pass;
	/*
	 * ImageFolder: the files the scan left out, counted by why
	 * (nleft_by), the first DS_LEFT_KEPT of them kept (left, nleft);
	 * those not images by their name also by extension ("" for none),
	 * the first DS_SKIP_KINDS extensions met, the rest in skipped_other.
	 */
	size_t nleft_by[DS_NLEFT];
	struct ds_left *left;
	size_t nleft;
	struct {
		char ext[16];
		size_t n;
	} skipped[DS_SKIP_KINDS];
	size_t nskipped_kinds, skipped_other;
	uint32_t refused_uid; /* the first refused link's owner */
	bool refused_many;    /* links of more than one owner refused */
	/* The users whose links led out of root (ds_sample.guard). */
	struct ds_guard *guards;
	size_t nguards;
};

/*
 * The files an ImageFolder scan left out: their count, and a text like
 * "12 .tif, 3 .bmp, 1 without an extension, 2 directly under the root,
 * not in a class folder, 1 dangling symbolic link" (empty for none).
 */
size_t ds_skipped_total(const struct dataset *ds);
void ds_skipped_text(const struct dataset *ds, char *buf, size_t len);
/*
 * Why e was left out, in words: "a dangling symbolic link (to
 * nosuch.jpg)", ...; for DS_LEFT_NAME "not an image by its name".
 */
void ds_left_text(const struct ds_left *e, char *buf, size_t len);

/* Called now and then while scanning (for a progress line). */
typedef void (*ds_progress_fn)(size_t nfound, void *arg);

/*
 * Scan root (or read manifest).  Errors: a root that is missing or not a
 * directory, a manifest line that does not parse (message names its line),
 * no samples at all.  *out set on success only.
 */
int ds_open(const char *name, const char *root, const char *manifest,
    ds_progress_fn progress, void *arg, struct dataset **out, char *err,
    size_t errlen);
void ds_free(struct dataset *ds);
/*
 * ds_open with what the samples carry (meta: NULL for none).  text = txt:
 * an ImageFolder sample's caption is its sidecar, the file named like it
 * with .txt in place of its extension in the directory it is listed in
 * (links to that directory followed as the scan follows them, the
 * sidecar itself never a link); text = json:KEY: the string field KEY of
 * its .json sidecar.  A manifest's caption (text = txt) is the rest of
 * its line after "path<TAB>label<TAB>", taken as it is (tabs included;
 * the path then ends at the first tab).  A caption that is missing, not
 * valid UTF-8 or over 64 KiB makes its sample fail when made (bad).
 */
int ds_open_meta(const char *name, const char *root, const char *manifest,
    const struct ds_meta *meta, ds_progress_fn progress, void *arg,
    struct dataset **out, char *err, size_t errlen);

/*
 * WebDataset tar shards (dataset/ds_tar*.c).  shards is a glob
 * ("/d/shard-*.tar") or a file listing shard paths one a line (relative ones
 * from the file's directory; '#' starts a comment).  label is "cls" (the
 * integer text of the sample's .cls member), "json:KEY" (the integer field KEY
 * of its .json member) or "none" (-1).  A sample is the members sharing a key
 * (the name up to the first dot of its last component); its image is the member
 * with extension jpg, jpeg or png (any case).  Sample paths are "SHARD:MEMBER",
 * SHARD relative to ds->root (the directory the shards share).  Each shard is
 * indexed once from its headers (ustar, GNU long names, pax) and the index kept
 * in the directory index_fd (-1: not kept; cache_index_open opens and checks
 * it, and only files are opened in it, never through a link or blocking on a
 * FIFO), named by the SHA-256 of the shard's path and holding its
 * size, mtime, ctime, inode and device: a remount whose shard matches reads the
 * index, not the shard.  A damaged shard (truncated, a bad header) is indexed
 * up to the damage and logged; members that cannot be served (links, devices,
 * sparse files, unsafe names, duplicates, an oversized pax header, data
 * past the end, a missing label) become samples with bad set, which
 * fail when read (on_error applies).  Errors: no shard matches, a shard
 * that is not a regular file or cannot be read, a bad label mode, no
 * samples at all.
 */
int ds_open_shards(const char *name, const char *shards, const char *label,
    int index_fd, ds_progress_fn progress, void *arg, struct dataset **out,
    char *err, size_t errlen);

/*
 * The same with what the samples carry (meta; NULL: label = cls, no
 * text), the settings of remote shards (ropts: NULL for the defaults) and
 * the hooks of their index pass (hooks: NULL for none).  shards may then
 * be a URL (s3://, https://, http://) with WebDataset brace ranges
 * ("shard-{000000..000999}.tar"), or a list file whose lines are such
 * URLs; a dataset's shards are all local or all remote.  A remote shard
 * is indexed from one streaming GET (the index kept keyed by its URL,
 * size and ETag) and its members read by range requests carrying If-Match
 * (dataset/remote/remote.h).
 *
 * text = txt: a sample's caption is its member KEY.txt, as it is (UTF-8,
 * at most 64 KiB); text = json:KEY: the string field KEY of its .json
 * member.  A caption missing, twice, not UTF-8 or too long makes a
 * sample with bad set.  label = json:KEY whose value is a list of class
 * indexes (or of names of meta's classes) makes the dataset multi-label
 * (ds->multi); an index above DS_MAX_LABEL or a name not in the classes
 * makes a bad sample.  The index (kept, streamed or from the cluster
 * tier) holds the captions and the label members' text, so none of them
 * is read again from a remote shard.
 */
struct remote_opts;
struct ds_remote_hooks;
int ds_open_shards_remote(const char *name, const char *shards,
    const struct ds_meta *meta, const struct remote_opts *ropts,
    const struct ds_remote_hooks *hooks, int index_fd, ds_progress_fn progress,
    void *arg, struct dataset **out, char *err, size_t errlen);

/*
 * What a caller adds to the index pass of remote shards (issue 38): all
 * of it may be NULL or 0 (a zeroed struct: the pass as it was, one shard
 * at a time).
 *
 * Every remote shard's index is had, in this order, from the kept index
 * in index_fd, from index_get (the cluster tier: core/ds_tier.c), else
 * from one stream of its bytes, which also gives each image member's
 * digest (the SHA-256 the cache keys are made of) and hands its bytes to
 * member; a streamed index goes to the kept index and to index_put.
 * Streams run `streams` shards at once, each holding its largest member
 * and about 1 MiB.  A shard whose index cannot be had (its stream or its
 * probe failed after their retries, from the server's availability, a
 * bad response or a change of the object during the pass) becomes one
 * sample that fails when read (on_error applies), named SHARD:, and
 * nothing of it is kept, so the next mount indexes it again; the mount
 * goes on unless every shard failed.
 *
 *   index_get  the encoded index (ds_tar_index_encode's bytes) of the
 *              shard called name at version (remote_version_text):
 *              0 and *d (malloc'd) and *len, or nonzero (a miss); what
 *              it gives is parsed and checked as a kept index is (name,
 *              version, checksum), and refused when it fails a check
 *              (counted in *refused, said in the log);
 *   index_put  keep one there (the callee copies); both are called with
 *              tier, from the streaming threads;
 *   member     an image member's bytes d (malloc'd; transferred) and
 *              their SHA-256, whole, as the stream passes them, from the
 *              streaming threads; it may block (the stream waits);
 *   progress   the pass's counters, every quarter of a second while
 *              streams run and once at the end, from the opening thread;
 *   defer      a shard that needs a stream is not streamed: the open
 *              fails with -EAGAIN (the caller runs the pass elsewhere,
 *              then opens again: engine/prefill.c).
 */
struct ds_remote_hooks {
	int (*index_get)(void *tier, const char *name, const char *version,
	    uint8_t **d, size_t *len);
	void (*index_put)(void *tier, const char *name, const char *version,
	    const uint8_t *d, size_t len);
	void *tier; /* index_get's and index_put's */
	void (*member)(
	    void *arg, uint8_t *d, size_t len, const uint8_t sha256[32]);
	void (*progress)(void *arg, const struct ds_pass *p);
	void *arg;		   /* member's and progress's */
	_Atomic uint64_t *refused; /* counts index_get's refused (or NULL) */
	unsigned streams;
	bool defer;
};

/*
 * What the index of sample id's shard says of its bytes: their SHA-256
 * and their first bytes (hlen of them, at most 16: what tells JPEG, PNG
 * and WebP apart), where a remote shard's stream saw them; NULL where it
 * did not (a local shard, a member past the digest's bound).
 */
const struct ds_digest *ds_sample_digest(const struct dataset *ds, size_t id);

/*
 * The remote reads of ds (NULL: its shards are local): the counters, and
 * the window of bytes the fetcher may hold ahead of the readers (set by
 * the engine from `memory`; counted in its budget).
 */
const struct remote_stats *ds_remote_stats(const struct dataset *ds);
void ds_remote_window(struct dataset *ds, uint64_t bytes);
/* The bytes the window has room for now (0 for a local dataset). */
uint64_t ds_remote_room(const struct dataset *ds);
/* Drop what was fetched ahead for sample id (a cache hit needs none). */
void ds_remote_forget(const struct dataset *ds, size_t id);


/*
 * What names sample id in messages and in the digest memo: "ROOT/PATH"
 * ("ROOT/SHARD:MEMBER" for a member).  -ENAMETOOLONG if it does not fit.
 */
int ds_sample_name(const struct dataset *ds, size_t id, char *buf, size_t len);

/*
 * The stat the digest memo of sample id is keyed by: its file's (stat,
 * following links as the scan did), or for a member its shard's (the
 * member's name is in ds_sample_name).  0 or -errno.
 */
int ds_sample_stat(const struct dataset *ds, size_t id, struct stat *st);

/*
 * Read a tar member sample's image bytes (ds->shards set) with pread,
 * after checking that the shard is the one indexed (size, mtime, inode):
 * *out (malloc'd) and *len; *st gets the shard's fstat.  Nothing outside
 * [off, off + size) is read.  -EIO with err ("SHARD:MEMBER: why") for a
 * bad member, a changed or short shard; -EFBIG when size > max; -ENOMEM,
 * -EMFILE... (transient) as they come; a remote shard's -EHOSTDOWN when
 * its server did not answer (remote_read), which may go away when it
 * answers again.
 */
int ds_member_read(const struct dataset *ds, size_t id, size_t max,
    uint8_t **out, size_t *len, struct stat *st, char *err, size_t errlen);

/*
 * Open sample id for reading, safely: no symlink followed at open time
 * (O_NOFOLLOW|O_NOCTTY|O_NONBLOCK|O_CLOEXEC, relative to a descriptor of
 * root opened for the call, with openat2 RESOLVE_BENEATH|
 * RESOLVE_NO_SYMLINKS where the kernel has it, else component by
 * component with O_NOFOLLOW), the scan having resolved the links it
 * allowed (open_path).  A manifest's path that goes through links is
 * resolved here, and opened only if it stays inside root.  A file a
 * link out of root led to (guard) must still be readable by the link's
 * owner, else -EACCES.  fstat before
 * reading: anything but a regular file is -EINVAL "not a regular file"; a
 * FIFO or a device does not block.  On success *fd (blocking, close-on-
 * exec; the caller closes it) and *st are set.  On error err names the
 * file ("ROOT/PATH: why"): -ELOOP for a symbolic link that is not
 * allowed, -errno of open otherwise.  Thread-safe.
 */
int ds_sample_open(const struct dataset *ds, size_t id, int *fd,
    struct stat *st, char *err, size_t errlen);

/*
 * Ask the kernel to start reading sample id's bytes into the page cache
 * (posix_fadvise WILLNEED: it queues the reads and returns), so that a
 * worker's read of it later finds them there.  A hint: opened as
 * ds_sample_open opens it, or the shard with the member's range; any
 * failure is ignored (the read that follows reports it).  Thread-safe.
 */
void ds_sample_prefetch(const struct dataset *ds, size_t id);

#endif
