/*
 * ns.h - the namespace of a mount, without FUSE: which names exist, the
 * children and listing of each directory, the attributes of each node,
 * and the one place where file names are printed and parsed.  Layer:
 * the engine (engine/), an interface of it: fs/ includes it.
 *
 *	README, .feedfs/stats, .feedfs/log, JOB/info.json, JOB/samples.tsv,
 *	JOB/errors.tsv,
 *	JOB[/rank-R-of-W]/epoch-NNNN/batch-NNNNNN{.npy,.labels.npy,.ids.npy,
 *	.text.jsonl,.cuda} (.text.jsonl with text, .cuda with gpu = on),
 *	and with views = N, batch-NNNNNN.viewV.npy for 1 <= V < N
 *	(listed after the batch's other files)
 *	and for a mixture job JOB/mixture (the one writable file) and
 *	JOB[/rank-R-of-W]/epoch-NNNN/mixture (listed after the batches)
 *
 * Only the canonical spelling resolves: numbers zero-padded to their width
 * (4 digits for epochs, 6 for batches, none for ranks), no sign, no extra
 * leading zeros, no trailing text.  Rank views resolve for 1 <= W <=
 * FEED_MAX_WORLD but are not listed.  Every function is pure given the
 * feed (which is immutable in what they read) and reentrant, save
 * ns_attr of a .text.jsonl (feed_text_size).
 */
#ifndef FEEDFS_NS_H
#define FEEDFS_NS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/feed.h"

/* The longest name a listing holds (with its NUL). */
#define NS_NAME_MAX (CFG_MAX_NAME + 32)

enum ns_type {
	NS_ROOT,
	NS_README,
	NS_DOTDIR,  /* .feedfs */
	NS_STATS,   /* .feedfs/stats */
	NS_LOG,	    /* .feedfs/log */
	NS_JOB,	    /* JOB */
	NS_INFO,    /* JOB/info.json */
	NS_SAMPLES, /* JOB/samples.tsv */
	NS_ERRORS,  /* JOB/errors.tsv */
	NS_RANK,    /* JOB/rank-R-of-W */
	NS_EPOCH,   /* JOB[/rank-R-of-W]/epoch-NNNN */
	NS_BATCH,   /* .../batch-NNNNNN{.npy,.labels.npy,.ids.npy,.cuda,
		       .text.jsonl} */
	NS_MIXTURE, /* JOB/mixture: the next epochs' weights, writable */
	NS_EMIX,    /* .../epoch-NNNN/mixture: the epoch's weights */
};

/* What a node is; fields that do not apply are 0 (world 1). */
struct ns_key {
	enum ns_type type;
	uint32_t job, rank, world, epoch;
	uint64_t batch;
	enum batch_kind kind;
	/* NS_BATCH of view v >= 1 (batch-NNNNNN.viewV.npy, kind BK_IMAGES):
	 * job is then the view's job (feed_job_view), which ns_feed_key
	 * names; 0 for every other node. */
	uint32_t view;
};

struct ns_attr {
	bool dir;
	bool live;     /* contents change (stats, log, errors.tsv): no
			  caching, no size */
	bool writable; /* JOB/mixture: the mount's owner may write it */
	uint64_t size; /* of a file */
};

/* The root directory. */
void ns_root(struct ns_key *k);
/* The child called name of directory dir: 0, -ENOENT, or -ENOTDIR. */
int ns_child(const struct feed *f, const struct ns_key *dir,
    const char *name, struct ns_key *out);
/*
 * The i-th entry of directory dir (not counting "." and ".."): its name
 * (len >= NS_NAME_MAX) and node.  false past the last.
 */
bool ns_entry(const struct feed *f, const struct ns_key *dir, uint64_t i,
    char *name, size_t len, struct ns_key *out);
/*
 * A node's attributes.  The size of a batch's .text.jsonl may make the
 * batch (feed_text_size: order = relaxed, on_error = substitute), so a
 * listing asks ns_is_dir, never this.
 */
void ns_attr(struct feed *f, const struct ns_key *k, struct ns_attr *a);
/* Whether k is a directory (what a listing's entries need). */
bool ns_is_dir(const struct ns_key *k);
/* The batch of a NS_BATCH (or NS_EPOCH) node. */
struct feed_key ns_feed_key(const struct ns_key *k);
/* The text file a node is, or -1 when it is not one. */
int ns_text(const struct ns_key *k);

/* The names: parse ("rank-R-of-W", "epoch-NNNN", "batch-NNNNNN.SUFFIX"),
 * and print into buf (len bytes; returns snprintf's count). */
bool ns_parse_rank(const char *name, uint32_t *rank, uint32_t *world);
bool ns_parse_epoch(const char *name, uint32_t *epoch);
bool ns_parse_batch(const char *name, uint64_t *batch, enum batch_kind *kind);
int ns_rank_name(char *buf, size_t len, uint32_t rank, uint32_t world);
int ns_epoch_name(char *buf, size_t len, uint32_t epoch);
int ns_batch_name(char *buf, size_t len, uint64_t batch,
    enum batch_kind kind);
/* "batch-NNNNNN.viewV.npy": view V >= 1 (canonical: no leading zero, up
 * to CFG_MAX_VIEWS - 1) of a job with views; its printer. */
bool ns_parse_view_batch(const char *name, uint64_t *batch, uint32_t *view);
int ns_view_batch_name(char *buf, size_t len, uint64_t batch, uint32_t view);

#endif
