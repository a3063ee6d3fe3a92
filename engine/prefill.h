/*
 * prefill.h - the engine (engine/): a mount's datasets opened with the
 * one pass over remote shards (issue 38), for feed.c.  Layer: the
 * engine, beside feed.c's setup; includes the model and the datasets.
 * Private to engine/ (and its tests).
 */
#ifndef FEEDFS_PREFILL_H
#define FEEDFS_PREFILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset/dataset.h"

struct cfg;

/*
 * What the one pass over a dataset's remote shards did, for the log and
 * .feedfs/stats: whether it ran (in a child process: prefill.c says why),
 * how its shards' indexes were had, and what became of the image members
 * it saw: prefixes made and stored (made), found there already (present),
 * members that did not decode (bad), members passed by because no cache
 * had room or no job caches anything (unfilled); the cluster tier's
 * indexes it refused; its CPU time (user and system, every thread) and
 * its wall time.
 */
struct prefill_report {
	bool ran;
	struct ds_pass pass;
	uint64_t made, present, bad, unfilled;
	uint64_t refused; /* the tier's indexes refused (ds_remote_hooks) */
	uint64_t cpu_ns, wall_ms;
};

/*
 * Dataset i of c, opened as ds_open_cfg opens it (the shard index kept in
 * index_fd), and for remote shards with what a mount adds (dataset.h's
 * struct ds_remote_hooks): indexes from and into the cluster tier when c
 * has one, many shards streamed at once within `memory` and the fetcher's
 * connections, the pass's progress on the terminal, and the one pass:
 * where shards must be streamed and a cache or the tier can take the
 * prefixes of the jobs over the dataset, the stream's members are
 * decoded into them as it passes.  *rep says what it did.  Starts no
 * thread that outlives it, and leaves none (a mount forks after it).
 * 0, or -errno with err as ds_open_cfg's.
 */
int prefill_open(const struct cfg *c, size_t i, int index_fd,
    ds_progress_fn progress, void *arg, struct dataset **out,
    struct prefill_report *rep, char *err, size_t errlen);

#endif
