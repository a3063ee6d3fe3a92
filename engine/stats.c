/*
 * stats.c - .feedfs/stats: the mount's counters in Prometheus's text
 * format, made anew at every open.  Layer: the engine (engine/), below
 * text.c; reads the engine's state, the cache's and the remote readers'
 * counters.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>

#include "config.h" /* PACKAGE_VERSION */
#include "ff_commit.h"

#include "cache/cache.h"
#include "cache/cluster.h"
#include "engine/engine.h"
#include "dataset/remote/remote.h"
#include "util/sbuf.h"

/*
 * A gauge NAME{error="TEXT"} 1 saying why a tier is off (nothing when
 * text is NULL), in Prometheus's label escaping.
 */
static void
stats_error(struct sbuf *sb, const char *name, const char *help, const char *e)
{
	if (e == NULL)
		return;
	sb_printf(sb, "# HELP %s %s\n# TYPE %s gauge\n%s{error=\"", name, help,
	    name, name);
	for (; *e; e++) {
		if (*e == '"' || *e == '\\')
			sb_printf(sb, "\\%c", *e);
		else if (*e == '\n')
			sb_printf(sb, "\\n");
		else
			sb_printf(sb, "%c", *e);
	}
	sb_printf(sb, "\"} 1\n");
}

/* Why the cache is off, when it failed (not when cache_size = 0). */
static void
stats_cache_error(struct feed *f, struct sbuf *sb)
{
	stats_error(sb, "feedfs_cache_error",
	    "Why the cache is off (the label).",
	    f->cache_err[0] ? f->cache_err : cache_error(f->cache));
}

/* The cache's disk: its bound, a clamp, a full disk, a newer format. */
static void
stats_cache_disk(const struct cache_stats *cs, struct sbuf *sb)
{
	sb_printf(sb,
	    "# HELP feedfs_cache_size_bytes The bound on the cache's disk use "
	    "in force (the owner's cache_size, clamped to its filesystem).\n"
	    "# TYPE feedfs_cache_size_bytes gauge\n"
	    "feedfs_cache_size_bytes %" PRIu64 "\n"
	    "# HELP feedfs_cache_size_clamped 1: cache_size was more than "
	    "cache_dir's filesystem holds, and was clamped (the owner's).\n"
	    "# TYPE feedfs_cache_size_clamped gauge\n"
	    "feedfs_cache_size_clamped %d\n"
	    "# HELP feedfs_cache_full 1: no room on cache_dir's filesystem: "
	    "inserts stop, hits go on (the owner's).\n"
	    "# TYPE feedfs_cache_full gauge\nfeedfs_cache_full %d\n"
	    "# HELP feedfs_cache_format_newer 1: cache_dir holds a newer cache "
	    "format than this build (labels: the two; 0: not known), and is "
	    "left alone.\n"
	    "# TYPE feedfs_cache_format_newer gauge\n"
	    "feedfs_cache_format_newer{build=\"%d\",cache_dir=\"%u\"} %d\n",
	    cs->size_bound, cs->size_clamped, cs->full, CACHE_FORMAT_VERSION,
	    cs->dir_format, cs->dir_format > CACHE_FORMAT_VERSION);
}

/* The cluster tier's own counters (all jobs together). */
static void
stats_cluster(struct feed *f, struct sbuf *sb)
{
	struct cluster_stats cs = {0};

	if (f->cluster)
		cluster_get_stats(f->cluster, &cs);
	sb_printf(sb,
	    "# HELP feedfs_cluster_enabled Whether the cluster tier is in "
	    "use.\n# TYPE feedfs_cluster_enabled gauge\n"
	    "feedfs_cluster_enabled %d\n"
	    "# HELP feedfs_cluster_errors_total Cluster gets and puts that a "
	    "server failed (down, timed out, refused).\n"
	    "# TYPE feedfs_cluster_errors_total counter\n"
	    "feedfs_cluster_errors_total %" PRIu64 "\n"
	    "# HELP feedfs_cluster_bad_values_total Cluster values refused "
	    "(checksum, length, another key's, lost chunk): misses.\n"
	    "# TYPE feedfs_cluster_bad_values_total counter\n"
	    "feedfs_cluster_bad_values_total %" PRIu64 "\n"
	    "# HELP feedfs_cluster_bad_mac_total Cluster values refused "
	    "for a missing or wrong MAC (cluster_secret): misses.\n"
	    "# TYPE feedfs_cluster_bad_mac_total counter\n"
	    "feedfs_cluster_bad_mac_total %" PRIu64 "\n"
	    "# HELP feedfs_cluster_pool_waits_total Cluster calls that found "
	    "no free connection in time: misses, no server asked.\n"
	    "# TYPE feedfs_cluster_pool_waits_total counter\n"
	    "feedfs_cluster_pool_waits_total %" PRIu64 "\n"
	    "# HELP feedfs_cluster_bytes_in_total Value bytes of cluster "
	    "hits.\n# TYPE feedfs_cluster_bytes_in_total counter\n"
	    "feedfs_cluster_bytes_in_total %" PRIu64 "\n"
	    "# HELP feedfs_cluster_bytes_out_total Value bytes stored in the "
	    "cluster.\n# TYPE feedfs_cluster_bytes_out_total counter\n"
	    "feedfs_cluster_bytes_out_total %" PRIu64 "\n"
	    "# HELP feedfs_cluster_puts_total Values stored in the cluster.\n"
	    "# TYPE feedfs_cluster_puts_total counter\n"
	    "feedfs_cluster_puts_total %" PRIu64 "\n"
	    "# HELP feedfs_cluster_skipped_total Values not stored: larger "
	    "than the cluster takes.\n"
	    "# TYPE feedfs_cluster_skipped_total counter\n"
	    "feedfs_cluster_skipped_total %" PRIu64 "\n",
	    f->cluster != NULL && !cs.off, cs.errors + cs.put_errors,
	    cs.bad_checksum + cs.missing_chunks, cs.bad_mac, cs.pool_waits,
	    cs.bytes_in, cs.bytes_out, cs.puts, cs.skipped_large);
	stats_error(sb, "feedfs_cluster_error",
	    "Servers of the tier that refused this mount's credentials at "
	    "mount (the label).",
	    f->cluster ? cluster_problem(f->cluster) : NULL);
}

/*
 * Admission (cache.h, cache_opts' stale) and the hit rate of the last
 * JOB_EPOCH_SLOTS epochs of each job.
 */
static void
stats_admission(struct feed *f, const struct cache_stats *cs, struct sbuf *sb)
{
	sb_printf(sb,
	    "# HELP feedfs_cache_inserts_total Values stored in the cache.\n"
	    "# TYPE feedfs_cache_inserts_total counter\n"
	    "feedfs_cache_inserts_total %" PRIu64 "\n"
	    "# HELP feedfs_cache_admission_denied_total Values not stored: "
	    "the cache was full of entries used within cache_stale.\n"
	    "# TYPE feedfs_cache_admission_denied_total counter\n"
	    "feedfs_cache_admission_denied_total %" PRIu64 "\n"
	    "# HELP feedfs_cache_oversize_total Values not stored: over "
	    "cache_size / 4.\n"
	    "# TYPE feedfs_cache_oversize_total counter\n"
	    "feedfs_cache_oversize_total %" PRIu64 "\n"
	    "# HELP feedfs_cache_evictions_total Entries deleted to make "
	    "room or keep cache_size.\n"
	    "# TYPE feedfs_cache_evictions_total counter\n"
	    "feedfs_cache_evictions_total %" PRIu64 "\n"
	    "# HELP feedfs_cache_refreshes_total Entries a hit rewrote as new "
	    "(older than cache_stale / 2).\n"
	    "# TYPE feedfs_cache_refreshes_total counter\n"
	    "feedfs_cache_refreshes_total %" PRIu64 "\n"
	    "# HELP feedfs_cache_entries Entries in the cache.\n"
	    "# TYPE feedfs_cache_entries gauge\n"
	    "feedfs_cache_entries %" PRIu64 "\n"
	    "# HELP feedfs_cache_used_bytes Bytes the entries take, as "
	    "admission counts them.\n"
	    "# TYPE feedfs_cache_used_bytes gauge\n"
	    "feedfs_cache_used_bytes %" PRIu64 "\n"
	    "# HELP feedfs_cache_admit_bytes Bytes admission fills the cache "
	    "up to (95%% of cache_size).\n"
	    "# TYPE feedfs_cache_admit_bytes gauge\n"
	    "feedfs_cache_admit_bytes %" PRIu64 "\n",
	    cs->inserts, cs->denied, cs->oversize, cs->evictions, cs->refreshes,
	    cs->entries, cs->used_bytes, cs->admit_bytes);
	sb_printf(sb,
	    "# HELP feedfs_epoch_cache_hits_total Local cache hits of an "
	    "epoch (the last %d epochs of each job).\n"
	    "# TYPE feedfs_epoch_cache_hits_total counter\n",
	    JOB_EPOCH_SLOTS);
	for (int m = 0; m < 2; m++) {
		if (m == 1)
			sb_printf(sb,
			    "# HELP feedfs_epoch_cache_misses_total Local "
			    "cache misses of an epoch.\n"
			    "# TYPE feedfs_epoch_cache_misses_total "
			    "counter\n");
		for (size_t i = 0; i < f->njobs; i++)
			for (int k = 0; k < JOB_EPOCH_SLOTS; k++) {
				uint64_t e1 =
				    atomic_load(&f->jobs[i].st.ep[k].epoch1);

				if (e1 == 0)
					continue;
				sb_printf(sb,
				    "feedfs_epoch_cache_%s_total{job=\"%s\","
				    "epoch=\"%" PRIu64 "\"} %" PRIu64 "\n",
				    m ? "misses" : "hits", f->jobs[i].name,
				    e1 - 1,
				    (uint64_t)atomic_load(
					m ? &f->jobs[i].st.ep[k].misses
					  : &f->jobs[i].st.ep[k].hits));
			}
	}
}

/* The per-job counters, one family each. */
static void
stats_jobs(struct feed *f, struct sbuf *sb)
{
	static const struct {
		const char *name, *help;
		size_t off;
		bool seconds;
	} ctr[] = {
#define C(n, field, h, s) {n, h, offsetof(struct job_stats, field), s}
	    C("feedfs_cache_hits_total", cache_hits,
		"Samples whose cached prefix came from the cache.", false),
	    C("feedfs_cache_misses_total", cache_misses,
		"Samples the local cache lacked (from the cluster tier, or "
		"decoded).",
		false),
	    C("feedfs_cluster_hits_total", cluster_hits,
		"Samples the local cache lacked and the cluster tier had.",
		false),
	    C("feedfs_cluster_misses_total", cluster_misses,
		"Samples decoded because the cluster tier lacked them too.",
		false),
	    C("feedfs_samples_total", samples, "Samples prepared.", false),
	    C("feedfs_sample_errors_total", decode_errors,
		"Samples that could not be read or decoded.", false),
	    C("feedfs_sample_unavailable_total", unavailable,
		"Of those, samples whose remote source did not answer "
		"(substituted, or their batch made again at its next read).",
		false),
	    C("feedfs_substituted_total", substituted,
		"Samples replaced by the next good one (on_error).", false),
	    C("feedfs_prefetched_total", prefetched,
		"Sources asked of the kernel ahead of the workers (slots "
		"ahead, while the job's samples read their sources).",
		false),
	    C("feedfs_batches_total", batches, "Batches prepared.", false),
	    C("feedfs_batch_errors_total", batch_errors,
		"Batches that failed (each time one is made again too).",
		false),
	    C("feedfs_worker_busy_seconds_total", busy_ns,
		"Worker time spent preparing samples.", true),
	    C("feedfs_cache_put_cpu_seconds_total", put_ns,
		"Worker CPU time spent storing samples in the local cache "
		"(encoding them in cache_format too, and for jpeg(Q) decoding "
		"what a miss serves; RocksDB's flushes are its own threads).",
		true),
	    C("feedfs_job_read_wait_seconds_total", read_wait_ns,
		"Time readers of the job waited for its batches.", true),
	    C("feedfs_job_read_waits_total", read_waits,
		"Reads of the job's batches that had to wait.", false),
#undef C
	};

	for (size_t c = 0; c < sizeof(ctr) / sizeof(ctr[0]); c++) {
		sb_printf(sb, "# HELP %s %s\n# TYPE %s counter\n", ctr[c].name,
		    ctr[c].help, ctr[c].name);
		for (size_t i = 0; i < f->njobs; i++) {
			atomic_uint_fast64_t *v =
			    (atomic_uint_fast64_t *)((char *)&f->jobs[i].st +
						     ctr[c].off);
			uint64_t x = atomic_load(v);

			if (ctr[c].seconds)
				sb_printf(sb, "%s{job=\"%s\"} %.6f\n",
				    ctr[c].name, f->jobs[i].name,
				    (double)x / 1e9);
			else
				sb_printf(sb, "%s{job=\"%s\"} %" PRIu64 "\n",
				    ctr[c].name, f->jobs[i].name, x);
		}
	}
	sb_printf(sb, "# HELP feedfs_source_samples_total Samples prepared, "
		      "by source dataset (a mixture's sources).\n"
		      "# TYPE feedfs_source_samples_total counter\n");
	for (size_t i = 0; i < f->njobs; i++)
		for (size_t s = 0; s < f->jobs[i].nsrc; s++)
			sb_printf(sb,
			    "feedfs_source_samples_total{job=\"%s\","
			    "source=\"%s\"} %" PRIu64 "\n",
			    f->jobs[i].name, f->jobs[i].src_names[s],
			    (uint64_t)atomic_load(&f->jobs[i].src[s].samples));
	sb_printf(sb, "# HELP feedfs_images_per_second Samples prepared per "
		      "second, over the last 10 s (from the first of them "
		      "that made one).\n"
		      "# TYPE feedfs_images_per_second gauge\n");
	for (size_t i = 0; i < f->njobs; i++)
		sb_printf(sb, "feedfs_images_per_second{job=\"%s\"} %.1f\n",
		    f->jobs[i].name, job_rate(&f->jobs[i].st, 10));
}

/*
 * A mixture's first unopened epoch: where a write of JOB/mixture made now
 * would take effect (feed_mixture_set), for python/feedfs's Mixture.set.
 */
static void
stats_mixture(struct feed *f, struct sbuf *sb)
{
	sb_printf(sb, "# HELP feedfs_mixture_next_epoch The first epoch a "
		      "write of JOB/mixture applies to.\n"
		      "# TYPE feedfs_mixture_next_epoch gauge\n");
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->njobs; i++)
		if (job_is_mixture(&f->jobs[i]))
			sb_printf(sb,
			    "feedfs_mixture_next_epoch{job=\"%s\"} %" PRIu32
			    "\n",
			    f->jobs[i].name, f->jobs[i].opened);
	pthread_mutex_unlock(&f->lock);
}

/* The mount's gauges: waits, queue, workers, memory, buffers. */
static void
stats_mount(struct feed *f, struct sbuf *sb)
{
	uint64_t mem, peak, queued, nb, wait_ns = 0, waits = 0;

	/* The mount's waits are its jobs' waits. */
	for (size_t i = 0; i < f->njobs; i++) {
		wait_ns += atomic_load(&f->jobs[i].st.read_wait_ns);
		waits += atomic_load(&f->jobs[i].st.read_waits);
	}
	pthread_mutex_lock(&f->lock);
	mem = f->mem_used;
	peak = f->mem_peak;
	queued = f->queued_slots;
	nb = f->nbatches;
	pthread_mutex_unlock(&f->lock);
	sb_printf(sb,
	    "# HELP feedfs_read_wait_seconds_total Time readers waited for "
	    "batches.\n# TYPE feedfs_read_wait_seconds_total counter\n"
	    "feedfs_read_wait_seconds_total %.6f\n"
	    "# HELP feedfs_read_waits_total Reads that had to wait.\n"
	    "# TYPE feedfs_read_waits_total counter\n"
	    "feedfs_read_waits_total %" PRIu64 "\n"
	    "# HELP feedfs_queue_depth Samples queued for the workers.\n"
	    "# TYPE feedfs_queue_depth gauge\nfeedfs_queue_depth %" PRIu64 "\n"
	    "# HELP feedfs_workers Preprocessing threads.\n"
	    "# TYPE feedfs_workers gauge\nfeedfs_workers %u\n"
	    "# HELP feedfs_batches_in_memory Batches held in memory.\n"
	    "# TYPE feedfs_batches_in_memory gauge\n"
	    "feedfs_batches_in_memory %" PRIu64 "\n"
	    "# HELP feedfs_memory_bytes Bytes counted in the memory budget: "
	    "batches, buffers, orders, metadata.\n"
	    "# TYPE feedfs_memory_bytes gauge\nfeedfs_memory_bytes %" PRIu64
	    "\n# HELP feedfs_memory_peak_bytes Highest feedfs_memory_bytes.\n"
	    "# TYPE feedfs_memory_peak_bytes gauge\n"
	    "feedfs_memory_peak_bytes %" PRIu64 "\n"
	    "# HELP feedfs_memory_limit_bytes The memory key, less the "
	    "cache's share.\n# TYPE feedfs_memory_limit_bytes gauge\n"
	    "feedfs_memory_limit_bytes %" PRIu64 "\n",
	    (double)wait_ns / 1e9, waits, queued, f->nthreads, nb, mem, peak,
	    f->memory);
	pthread_mutex_lock(&f->lock);
	sb_printf(sb,
	    "# HELP feedfs_metadata_bytes Bytes of metadata in "
	    "feedfs_memory_bytes: open files, batch structs, relaxed views, "
	    "nodes.\n"
	    "# TYPE feedfs_metadata_bytes gauge\nfeedfs_metadata_bytes %" PRIu64
	    "\n# HELP feedfs_metadata_peak_bytes Highest "
	    "feedfs_metadata_bytes.\n"
	    "# TYPE feedfs_metadata_peak_bytes gauge\n"
	    "feedfs_metadata_peak_bytes %" PRIu64 "\n"
	    "# HELP feedfs_metadata_limit_bytes The cap of metadata, within "
	    "feedfs_memory_limit_bytes.\n"
	    "# TYPE feedfs_metadata_limit_bytes gauge\n"
	    "feedfs_metadata_limit_bytes %" PRIu64 "\n"
	    "# HELP feedfs_metadata_refused_total Opens refused (ENOMEM) with "
	    "metadata at its cap.\n"
	    "# TYPE feedfs_metadata_refused_total counter\n"
	    "feedfs_metadata_refused_total %" PRIu64 "\n"
	    "# HELP feedfs_read_room_refused_total Reads refused (ENOMEM): "
	    "their batch did not fit beside what nothing could give back.\n"
	    "# TYPE feedfs_read_room_refused_total counter\n"
	    "feedfs_read_room_refused_total %" PRIu64 "\n"
	    "# HELP feedfs_node_bytes Bytes of the mount's inode table in "
	    "feedfs_metadata_bytes.\n# TYPE feedfs_node_bytes gauge\n"
	    "feedfs_node_bytes %" PRIu64 "\n"
	    "# HELP feedfs_relaxed_views Relaxed views (job, rank view, "
	    "epoch) kept.\n# TYPE feedfs_relaxed_views gauge\n"
	    "feedfs_relaxed_views %zu\n"
	    "# HELP feedfs_relaxed_forgotten_total Finished relaxed epochs "
	    "whose choices were forgotten at the metadata cap.\n"
	    "# TYPE feedfs_relaxed_forgotten_total counter\n"
	    "feedfs_relaxed_forgotten_total %" PRIu64 "\n"
	    "# HELP feedfs_relaxed_stale_total Opens of their batches "
	    "refused (ESTALE).\n"
	    "# TYPE feedfs_relaxed_stale_total counter\n"
	    "feedfs_relaxed_stale_total %" PRIu64 "\n",
	    f->meta_used, f->meta_peak, f->meta_cap, f->meta_refused,
	    f->room_refused, f->node_bytes, f->nrviews, f->rforgotten,
	    f->rstale);
	sb_printf(sb,
	    "# HELP feedfs_batch_buffers_reused_total Batch buffers taken "
	    "from those kept or handed on from a batch given back (no page "
	    "faults).\n"
	    "# TYPE feedfs_batch_buffers_reused_total counter\n"
	    "feedfs_batch_buffers_reused_total %" PRIu64 "\n"
	    "# HELP feedfs_batch_buffers_allocated_total Batch buffers "
	    "allocated anew.\n"
	    "# TYPE feedfs_batch_buffers_allocated_total counter\n"
	    "feedfs_batch_buffers_allocated_total %" PRIu64 "\n"
	    "# HELP feedfs_scratch_bytes Bytes the workers keep for the "
	    "samples' buffers (decode, resize), in feedfs_memory_bytes.\n"
	    "# TYPE feedfs_scratch_bytes gauge\n"
	    "feedfs_scratch_bytes %" PRIu64 "\n"
	    "# HELP feedfs_scratch_reused_total Sample buffers taken from "
	    "those kept (no page faults).\n"
	    "# TYPE feedfs_scratch_reused_total counter\n"
	    "feedfs_scratch_reused_total %" PRIu64 "\n"
	    "# HELP feedfs_scratch_mapped_total Sample buffers mapped anew.\n"
	    "# TYPE feedfs_scratch_mapped_total counter\n"
	    "feedfs_scratch_mapped_total %" PRIu64 "\n"
	    "# HELP feedfs_idle_trims_total Times the mount, idle for "
	    "idle_trim seconds, gave back batches and buffers (counted once "
	    "every worker gave back its scratch too).\n"
	    "# TYPE feedfs_idle_trims_total counter\n"
	    "feedfs_idle_trims_total %" PRIu64 "\n"
	    "# HELP feedfs_idle_trimmed_bytes_total Bytes of the budget "
	    "those trims gave back.\n"
	    "# TYPE feedfs_idle_trimmed_bytes_total counter\n"
	    "feedfs_idle_trimmed_bytes_total %" PRIu64 "\n",
	    f->pool_reused, f->pool_allocated, f->scratch_bytes,
	    f->scratch_reused, f->scratch_fresh, f->idle_trims, f->idle_bytes);
	pthread_mutex_unlock(&f->lock);
}

/*
 * The time readers waited, at least one at a time (wait_ready): per job
 * and for the mount.  The summed waits (feedfs_read_wait_seconds_total)
 * grow faster than the clock when several readers wait; these never do,
 * so their rate is the share of the time the input held training up.
 * The clock they were read at goes with them (feedfs_stats_clock_seconds):
 * a reader's own clock around the read of the stats is late by however
 * long the read took, and a share over it could pass 100%.
 */
static void
stats_starved(struct feed *f, struct sbuf *sb)
{
	uint64_t now = feed_mono_ns(); /* the waits' own clock */

	sb_printf(sb,
	    "# HELP feedfs_job_read_starved_seconds_total Time at least one "
	    "reader of the job waited for a batch.\n"
	    "# TYPE feedfs_job_read_starved_seconds_total counter\n");
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->njobs; i++)
		sb_printf(sb,
		    "feedfs_job_read_starved_seconds_total{job=\"%s\"} %.6f\n",
		    f->jobs[i].name,
		    (double)starved_ns(&f->jobs[i].starved, now) / 1e9);
	sb_printf(sb,
	    "# HELP feedfs_read_starved_seconds_total Time at least one "
	    "reader waited for a batch.\n"
	    "# TYPE feedfs_read_starved_seconds_total counter\n"
	    "feedfs_read_starved_seconds_total %.6f\n"
	    "# HELP feedfs_stats_clock_seconds The mount's monotonic clock "
	    "when the starved times were taken: the denominator of their "
	    "rates.\n"
	    "# TYPE feedfs_stats_clock_seconds gauge\n"
	    "feedfs_stats_clock_seconds %.6f\n",
	    (double)starved_ns(&f->starved, now) / 1e9, (double)now / 1e9);
	pthread_mutex_unlock(&f->lock);
}

/* The local cache's counters and state. */
static void
stats_cache(struct feed *f, struct sbuf *sb)
{
	struct cache_stats cs = {0};

	if (f->cache)
		cache_get_stats(f->cache, &cs);
	sb_printf(sb,
	    "# HELP feedfs_cache_enabled Whether the cache is in use.\n"
	    "# TYPE feedfs_cache_enabled gauge\nfeedfs_cache_enabled %d\n"
	    "# HELP feedfs_cache_read_bytes_total Bytes read from the cache.\n"
	    "# TYPE feedfs_cache_read_bytes_total counter\n"
	    "feedfs_cache_read_bytes_total %" PRIu64 "\n"
	    "# HELP feedfs_cache_written_bytes_total Bytes written to the "
	    "cache.\n# TYPE feedfs_cache_written_bytes_total counter\n"
	    "feedfs_cache_written_bytes_total %" PRIu64 "\n"
	    "# HELP feedfs_cache_insert_failures_total Values the cache did "
	    "not take.\n# TYPE feedfs_cache_insert_failures_total counter\n"
	    "feedfs_cache_insert_failures_total %" PRIu64 "\n"
	    "# HELP feedfs_cache_disk_bytes Disk used by the cache.\n"
	    "# TYPE feedfs_cache_disk_bytes gauge\n"
	    "feedfs_cache_disk_bytes %" PRIu64 "\n"
	    "# HELP feedfs_cache_share_peak_bytes The most bytes the owner "
	    "of a shared cache held at once for the other mounts (queued "
	    "inserts, requests being read): within memory.\n"
	    "# TYPE feedfs_cache_share_peak_bytes gauge\n"
	    "feedfs_cache_share_peak_bytes %" PRIu64 "\n",
	    f->cache && !cs.disabled, cs.bytes_read, cs.bytes_written,
	    cs.insert_failures, cs.disk_bytes, cs.share_peak);
	stats_admission(f, &cs, sb);
	stats_cache_disk(&cs, sb);
	stats_cache_error(f, sb);
}

/* The remote shards' reads (dataset/remote/remote_fetch.c), per dataset. */
static void
stats_remote(struct feed *f, struct sbuf *sb)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} ctr[] = {
#define RS(f) offsetof(struct remote_stats, f)
	    {"requests", "HTTP requests made (HEAD, index GETs, range GETs, "
			 "retries)", RS(requests)},
	    {"bytes", "Member bytes fetched by range requests", RS(bytes)},
	    {"index_bytes", "Shard bytes streamed to index them",
		RS(index_bytes)},
	    {"retries", "Requests tried again (5xx, 429, a reset, a "
			"timeout, a bad response)", RS(retries)},
	    {"failed", "Reads that failed once their retries were spent",
		RS(failed)},
	    {"fast_failed", "Reads failed at once by the open breaker",
		RS(fast_failed)},
	    {"changed", "Responses of an object changed since it was "
			"indexed (412, another ETag)", RS(changed)},
	    {"breaker_opens", "Times the breaker opened", RS(breaker_opens)},
	    {"prefetched", "Ranges asked for ahead of their read",
		RS(prefetched)},
	    {"prefetch_hits", "Reads served by a range fetched ahead",
		RS(prefetch_hits)},
	    {"dropped", "Ranges fetched ahead and never read", RS(dropped)},
#undef RS
	};
	size_t nremote = 0;

	for (size_t i = 0; i < f->cfg->ndatasets; i++)
		nremote += f->ds[i] != NULL && ds_remote_stats(f->ds[i]) != NULL;
	if (nremote == 0)
		return; /* no remote shards: no lines of them */
	for (size_t k = 0; k < sizeof(ctr) / sizeof(ctr[0]); k++) {
		sb_printf(sb,
		    "# HELP feedfs_remote_%s_total %s.\n"
		    "# TYPE feedfs_remote_%s_total counter\n",
		    ctr[k].name, ctr[k].help, ctr[k].name);
		for (size_t i = 0; i < f->cfg->ndatasets; i++) {
			const struct remote_stats *rs =
			    f->ds[i] ? ds_remote_stats(f->ds[i]) : NULL;

			if (rs != NULL)
				sb_printf(sb,
				    "feedfs_remote_%s_total{dataset=\"%s\"} "
				    "%" PRIu64 "\n",
				    ctr[k].name, f->cfg->datasets[i].name,
				    (uint64_t)atomic_load(
					(const atomic_uint_fast64_t
						*)((const char *)rs +
						   ctr[k].off)));
		}
	}
	sb_printf(sb, "# HELP feedfs_remote_bad_responses_total Responses "
		      "refused: short, long, not_206, content_range, "
		      "redirect, headers.\n"
		      "# TYPE feedfs_remote_bad_responses_total counter\n");
	for (size_t i = 0; i < f->cfg->ndatasets; i++) {
		const struct remote_stats *rs =
		    f->ds[i] ? ds_remote_stats(f->ds[i]) : NULL;

		for (unsigned b = 1; rs != NULL && b < RB_NKINDS; b++)
			sb_printf(sb,
			    "feedfs_remote_bad_responses_total{dataset=\"%s\","
			    "kind=\"%s\"} %" PRIu64 "\n",
			    f->cfg->datasets[i].name, remote_bad_name(b),
			    (uint64_t)atomic_load(&rs->bad[b]));
	}
	sb_printf(sb, "# HELP feedfs_remote_held_bytes Bytes fetched ahead "
		      "(or in flight) and not yet read; ahead_bytes: what is "
		      "worth fetching ahead (4 latencies at the readers' "
		      "rate, 8 MiB at least, the window at most); "
		      "latency_seconds: a request's, smoothed.\n"
		      "# TYPE feedfs_remote_held_bytes gauge\n");
	for (size_t i = 0; i < f->cfg->ndatasets; i++) {
		const struct remote_stats *rs =
		    f->ds[i] ? ds_remote_stats(f->ds[i]) : NULL;

		if (rs != NULL)
			sb_printf(sb,
			    "feedfs_remote_held_bytes{dataset=\"%s\"} %" PRIu64
			    "\nfeedfs_remote_ahead_bytes{dataset=\"%s\"} %" PRIu64
			    "\nfeedfs_remote_latency_seconds{dataset=\"%s\"} "
			    "%.6f\n",
			    f->cfg->datasets[i].name,
			    (uint64_t)atomic_load(&rs->held),
			    f->cfg->datasets[i].name,
			    (uint64_t)atomic_load(&rs->ahead_target),
			    f->cfg->datasets[i].name,
			    (double)atomic_load(&rs->latency_us) / 1e6);
	}
}

/* The index pass of each remote dataset at mount (prefill.h, issue 38). */
static void
stats_pass(struct feed *f, struct sbuf *sb)
{
	static const char *const how[] = {"kept", "tier", "streamed", "failed"};
	bool any = false;

	for (size_t i = 0; i < f->cfg->ndatasets; i++)
		any |= f->ds[i] != NULL && ds_remote_stats(f->ds[i]) != NULL;
	if (!any)
		return;
	sb_printf(sb,
	    "# HELP feedfs_index_shards A remote dataset's shards at mount, "
	    "by how their index was had: kept in cache_dir, from the cluster "
	    "tier, streamed, or failed (their samples fail until a remount).\n"
	    "# TYPE feedfs_index_shards gauge\n");
	for (size_t i = 0; i < f->cfg->ndatasets; i++) {
		const struct ds_pass *p = &f->pass[i].pass;
		const size_t n[] = {p->kept, p->tier, p->streamed, p->failed};

		if (f->ds[i] == NULL || ds_remote_stats(f->ds[i]) == NULL)
			continue;
		for (size_t k = 0; k < 4; k++)
			sb_printf(sb,
			    "feedfs_index_shards{dataset=\"%s\",how=\"%s\"} "
			    "%zu\n",
			    f->cfg->datasets[i].name, how[k], n[k]);
	}
	sb_printf(sb,
	    "# HELP feedfs_index_pass_seconds How long the index pass took "
	    "(bytes: how much it streamed; cpu: the one pass's CPU, its fill "
	    "included).\n# TYPE feedfs_index_pass_seconds gauge\n"
	    "# HELP feedfs_index_refused_total Shard indexes of the cluster "
	    "tier refused at mount (damaged, or of another shard or version: "
	    "the shard was streamed instead).\n"
	    "# TYPE feedfs_index_refused_total counter\n"
	    "# HELP feedfs_index_fill_total The image members the one pass "
	    "saw, by what became of them: a prefix made and cached, there "
	    "already, not filled (no room, nothing cached), not decoded.\n"
	    "# TYPE feedfs_index_fill_total counter\n");
	for (size_t i = 0; i < f->cfg->ndatasets; i++) {
		const struct prefill_report *r = &f->pass[i];
		const char *name = f->cfg->datasets[i].name;

		if (f->ds[i] == NULL || ds_remote_stats(f->ds[i]) == NULL)
			continue;
		sb_printf(sb,
		    "feedfs_index_pass_seconds{dataset=\"%s\"} %.3f\n"
		    "feedfs_index_pass_bytes{dataset=\"%s\"} %" PRIu64 "\n"
		    "feedfs_index_pass_cpu_seconds{dataset=\"%s\"} %.3f\n"
		    "feedfs_index_refused_total{dataset=\"%s\"} %" PRIu64 "\n"
		    "feedfs_index_fill_total{dataset=\"%s\",outcome=\"made\"} "
		    "%" PRIu64 "\n"
		    "feedfs_index_fill_total{dataset=\"%s\",outcome="
		    "\"present\"}"
		    " %" PRIu64 "\n"
		    "feedfs_index_fill_total{dataset=\"%s\",outcome="
		    "\"unfilled\"} %" PRIu64 "\n"
		    "feedfs_index_fill_total{dataset=\"%s\",outcome=\"bad\"} "
		    "%" PRIu64 "\n",
		    name, (double)(r->ran ? r->wall_ms : r->pass.ms) / 1e3,
		    name, r->pass.streamed_bytes, name, (double)r->cpu_ns / 1e9,
		    name, r->refused, name, r->made, name, r->present, name,
		    r->unfilled, name, r->bad);
	}
}

/* What was built: the version and the commit (git describe, make time). */
static void
stats_build(struct sbuf *sb)
{
	sb_printf(sb,
	    "# HELP feedfs_build_info The version of feedfs and the commit it "
	    "was built from (labels).\n"
	    "# TYPE feedfs_build_info gauge\n"
	    "feedfs_build_info{version=\"%s\",commit=\"%s\"} 1\n",
	    PACKAGE_VERSION, FEEDFS_COMMIT);
}

char *
feed_stats(struct feed *f, size_t *len)
{
	struct sbuf sb = {0};

	stats_jobs(f, &sb);
	stats_mixture(f, &sb);
	stats_mount(f, &sb);
	stats_starved(f, &sb);
	stats_cache(f, &sb);
	stats_cluster(f, &sb);
	tier_stats(f, &sb);
	stats_remote(f, &sb);
	stats_pass(f, &sb);
	stats_build(&sb);
	return sb_done(&sb, len);
}
