/*
 * jobs.c - the jobs as fs/ sees them (see feed.h): by index and name,
 * their views, and the keys and sizes of their batch files.  Layer: the
 * engine (engine/), below feed.c, text.c and files.c; it reads the jobs
 * that feed_new made (core/job.h) and calls nothing else of the engine,
 * so that text.c can name a job's views without calling up into feed.c.
 */
#include <string.h>

#include "engine/engine.h"

size_t
feed_njobs(const struct feed *f)
{
	return f->nshown;
}

uint32_t
feed_job_views(const struct feed *f, size_t job)
{
	return (uint32_t)f->jobs[job].cfg->views;
}

size_t
feed_job_view(const struct feed *f, size_t job, uint32_t view)
{
	return view == 0 ? job : f->jobs[job].view_base + view - 1;
}

int
feed_find_job(const struct feed *f, const char *name)
{
	for (size_t i = 0; i < f->nshown; i++)
		if (strcmp(f->jobs[i].cfg->name, name) == 0)
			return (int)i;
	return -1;
}

const char *
feed_job_name(const struct feed *f, size_t job)
{
	return f->jobs[job].cfg->name;
}

uint32_t
feed_job_epochs(const struct feed *f, size_t job)
{
	return (uint32_t)f->jobs[job].cfg->epochs;
}

bool
feed_job_cuda(const struct feed *f, size_t job)
{
	return f->jobs[job].cfg->gpu;
}

bool
feed_job_text(const struct feed *f, size_t job)
{
	return f->jobs[job].text;
}

uint64_t
feed_job_nbatches(const struct feed *f, size_t job, uint32_t world)
{
	return plan_nbatches(&f->jobs[job].plan, world);
}

bool
feed_job_mixture(const struct feed *f, size_t job)
{
	return job_is_mixture(&f->jobs[job]);
}

bool
feed_writable(const struct feed *f)
{
	for (size_t i = 0; i < f->njobs; i++)
		if (job_is_mixture(&f->jobs[i]))
			return true;
	return false;
}

bool
feed_key_valid(const struct feed *f, const struct feed_key *k)
{
	const struct job *j;

	if (k->job >= f->njobs || k->world < 1 || k->world > FEED_MAX_WORLD ||
	    k->rank >= k->world)
		return false;
	j = &f->jobs[k->job];
	return k->epoch < j->cfg->epochs &&
	       k->batch < plan_nbatches(&j->plan, k->world);
}

uint64_t
feed_file_size(
    const struct feed *f, const struct feed_key *k, enum batch_kind kind)
{
	struct batch_geom g;

	if (kind == BK_CUDA) /* the staged batch's descriptor (stage.c) */
		return FEEDFS_CUDA_DESC_SIZE;
	job_batch_geom(&f->jobs[k->job], k->epoch, k->world, k->batch, &g);
	return g.size[kind];
}
