/*
 * batch_kind.h - the model (core/, with job.h): the files a batch is
 * served as.  job.c lays them out (struct batch_geom, job_npy_header); the
 * engine (feed.h) and the namespace (ns.h) name them.  No code.
 */
#ifndef FEEDFS_BATCH_KIND_H
#define FEEDFS_BATCH_KIND_H

/* The files of a batch: BK_CUDA (its .cuda descriptor) with gpu = on. */
enum batch_kind { BK_IMAGES, BK_LABELS, BK_IDS, BK_CUDA, BK_COUNT };

#endif
