/*
 * idle.c - an idle mount gives back what only speed needs (issue 36).
 * Layer: the engine (engine/), below sched.c (its workers wait here for
 * work) and files.c (every open and read touches the clock), above
 * budget.c.
 *
 * A mount read for an epoch and then left alone kept, before, the
 * batches its readahead made into the next epoch, the kept batch buffers,
 * the workers' scratch arenas and whatever glibc kept of the heap: 0.7
 * to 1.3 GiB per mount, for as long as it stayed mounted.  Once no file
 * was opened or read for `idle_trim` seconds and every worker waits for
 * work, the last worker to wait gives it back: every batch that is not
 * being read (held open or not: a held one keeps its struct and is made
 * again, to the same bytes, at its next read), relaxed views' finished
 * samples (owed again) and spare buffers, unused epoch orders and kept
 * buffers (budget_shrink); then each worker unmaps its arena's idle
 * blocks, and the heap's free pages go back to the kernel (malloc_trim).
 * The next read is a cold start of the readahead.  Metadata stays (a
 * relaxed epoch's choices decide what its batches hold), and so does the
 * cache, which is shared with other mounts.  Locked (engine.h), except
 * idle_scratch.
 */
#include <malloc.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "util/log.h"

void
idle_touch(struct feed *f)
{
	f->idle_used_ns = feed_mono_ns();
	if (f->idle_trimmed) {
		/* Workers wait without a deadline once trimmed: one of
		 * them arms it again. */
		f->idle_trimmed = false;
		pthread_cond_broadcast(&f->work);
	}
}

/*
 * The process's resident bytes (/proc/self/statm), for the log: what the
 * budget counts is not all resident (a batch from the tier never writes
 * its float32 buffer: engine/tier.c).  0: not known.
 */
static uint64_t
resident(void)
{
	unsigned long size, res;
	FILE *fp = fopen("/proc/self/statm", "re");
	int n;

	if (fp == NULL)
		return 0;
	n = fscanf(fp, "%lu %lu", &size, &res);
	fclose(fp);
	return n == 2 ? (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* Give back what only speed needs; the workers trim their arenas when
 * they see the new generation.  Locked. */
static void
trim(struct feed *f)
{
	uint64_t bytes;

	f->idle_rss0 = resident();
	bytes = budget_shrink(&f->budget);

	f->idle_trimmed = true;
	f->idle_gen++;
	f->idle_pending = f->nthreads; /* idle_scratched counts them down */
	f->idle_bytes += bytes;
	f->idle_last = bytes;
	pthread_cond_broadcast(&f->work);
}

void
idle_scratched(struct feed *f)
{
	if (f->idle_pending == 0 || --f->idle_pending > 0)
		return;
	/* Every worker trimmed its arena, the heap too: counted, said. */
	f->idle_trims++;
	log_info("idle for %llu s: gave back %llu MiB of batches and buffers "
		 "as the memory budget counts them, and the workers' "
		 "scratch; resident %llu -> %llu MiB (the next read starts "
		 "the readahead again)",
	    (unsigned long long)f->cfg->mount.idle_trim,
	    (unsigned long long)(f->idle_last >> 20),
	    (unsigned long long)(f->idle_rss0 >> 20),
	    (unsigned long long)(resident() >> 20));
}

/* The absolute CLOCK_MONOTONIC time of ns (f->work's clock: feed_new). */
static struct timespec
mono_at(uint64_t ns)
{
	struct timespec ts = {
	    (time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};

	return ts;
}

int
idle_wait(struct feed *f, uint64_t *gen)
{
	uint64_t span = f->cfg->mount.idle_trim * 1000000000u;
	int what = IDLE_NOTHING;

	f->idle_waiting++;
	if (span == 0 || f->idle_trimmed) {
		pthread_cond_wait(&f->work, &f->lock);
	} else {
		uint64_t due = f->idle_used_ns + span;

		if (feed_mono_ns() < due) {
			struct timespec ts = mono_at(due);

			pthread_cond_timedwait(&f->work, &f->lock, &ts);
		}
		/* Past the deadline (no read came meanwhile): the last
		 * worker to wait trims; the others wait for it, or for
		 * work. */
		bool idle = feed_mono_ns() >= f->idle_used_ns + span &&
			    !f->idle_trimmed && !f->stopping;

		if (idle && f->idle_waiting == f->nthreads &&
		    f->demand.head == NULL && f->ahead.head == NULL &&
		    f->mix.head == NULL) {
			trim(f);
			what = IDLE_HEAP;
		} else if (idle) {
			pthread_cond_wait(&f->work, &f->lock);
		}
	}
	f->idle_waiting--;
	if (*gen != f->idle_gen) {
		*gen = f->idle_gen;
		if (what == IDLE_NOTHING)
			what = IDLE_SCRATCH;
	}
	return what;
}

void
idle_scratch(struct xf_arena *a, int what)
{
	xf_arena_trim(a);
	if (what == IDLE_HEAP)
		malloc_trim(0);
}
