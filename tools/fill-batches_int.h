/*
 * fill-batches_int.h - a program's part (tools/): what the batch worker's
 * files share (fill-batches.c: setup, the workers, storing, the run;
 * fill-choose.c: which batches to make, asked of the tier and claimed).
 * Private to them.
 */
#ifndef FEEDFS_FILL_BATCHES_INT_H
#define FEEDFS_FILL_BATCHES_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/batch_tier.h"
#include "core/job.h"
#include "tools/fill-batches.h"

#define PROG "feedfs-fill"
#define DEPTH 2	    /* batches in flight */
#define CLAIM_TTL 3 /* seconds; renewed every RENEW_NS */
#define RENEW_NS 1000000000ull
#define BLOB_TTL 900		    /* a stored batch, seconds */
#define POLL_NS 200000000ull	    /* the positions, read again */
#define NOTE_AGE 600		    /* older positions are readers gone */
#define SEEN 4096		    /* candidates remembered */
#define HELD_AGAIN_NS 1000000000ull /* a held batch, asked again */
/* Following: a reader's batches looked at, at most, per --window. */
#define FOLLOW_FAR 4
#define ORDERS 4		    /* epochs' orders kept */
#define TTY_NS 250000000ull
#define PLAIN_NS 5000000000ull

/* A batch of one view in flight. */
struct item {
	uint32_t view, epoch, rank, world;
	uint64_t batch;
	uint32_t len, next, done;
	uint8_t key[TIER_KEY_LEN];
	uint8_t *raw;
	uint64_t rawlen;
	uint8_t *ids; /* len int64 LE */
	uint64_t *pos;
	const uint32_t *order;
	bool failed;
	char msg[512];
	uint64_t renewed;
	struct item *next_item;
};

/* A candidate: a batch of a view. */
struct cand {
	uint32_t view, epoch, rank, world;
	uint64_t batch;
};

/*
 * What was found of a candidate, until when it holds: there; held by a
 * worker; held by a mount (never there); the tier failed on it, or it
 * could not be made (--epochs: not asked again).
 */
enum seen_state { S_NONE, S_THERE, S_HELD, S_MOUNT, S_ERROR };
struct seen {
	struct cand c;
	uint8_t state;
	uint64_t until;
};

struct fb {
	struct cfg *c;
	const struct cfg_job *cj;
	const struct fb_opts *o;
	struct dataset **ds;
	struct job *jobs; /* the views: jobs[0] the job */
	bool *job_ok;
	uint32_t nviews;
	uint8_t (*print)[TIER_KEY_LEN];
	struct cluster *cl;
	char who[96];
	struct {
		uint32_t epoch;
		uint32_t *ids; /* NULL: free */
		unsigned refs;
		uint64_t used;
	} ord[ORDERS];
	uint64_t tick;
	/* The workers' queue, under lock. */
	pthread_mutex_t lock;
	pthread_cond_t work, done;
	struct item *head;
	unsigned nitems;
	bool stop;
	/* The main thread's. */
	struct seen *seen;
	size_t nseen, seen_at;
	uint64_t seq;	   /* --epochs: the next place in order */
	struct cand *held; /* --epochs: held by workers, for later */
	size_t nheld, cheld;
	uint64_t made, there, heldn, failed, put_errors, images;
	uint64_t positions_at;
	struct tier_pos pos[TIER_SLOTS];
	size_t npos;
};

/* fill-choose.c: the next batch to make, taken (1), none now (0) or
 * -ENOMEM: --epochs' order, or the readers' windows (follow); whether
 * --epochs has nothing left; what was found of a candidate; an epoch's
 * order, held and given back; the monotonic clock. */
int fb_next_epochs(struct fb *fb);
int fb_next_follow(struct fb *fb);
bool fb_epochs_done(struct fb *fb);
void fb_seen_note(
    struct fb *fb, const struct cand *c, uint8_t state, uint64_t until);
/* The tier failed on c (r): counted as not stored, said once. */
void fb_tier_failed(struct fb *fb, const struct cand *c, int r);
const uint32_t *fb_order_get(struct fb *fb, uint32_t epoch);
void fb_order_put(struct fb *fb, const uint32_t *ids);

#endif
