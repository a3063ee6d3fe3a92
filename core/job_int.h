/*
 * job_int.h - the model (core/): what job.c (the setup of every job) and
 * job_mix.c (a mixture's sources) share.  Private to those two files.
 */
#ifndef FEEDFS_JOB_INT_H
#define FEEDFS_JOB_INT_H

#include <stddef.h>

#include "core/job.h"

/*
 * The part of the setup common to every job, once j's ds, sources and
 * plan.n are set: its view's pipeline, the checks of a job over a
 * dataset ("FILE:LINE: message" in err), its cache texts, plan and
 * geometry.  On failure the caller calls job_fini.
 */
int job_init_common(struct job *j, const struct cfg *c,
    const struct cfg_job *cj, char *err, size_t errlen);

#endif
