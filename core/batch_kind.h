/*
 * batch_kind.h - the model (core/, with job.h): the files a batch is
 * served as.  job_batch.c lays out the .npy ones (struct batch_geom,
 * job_npy_header), job_text.c makes the captions; the engine
 * (engine/feed.h, engine/ns.h) serves them, the .cuda descriptor too.
 * No code.
 */
#ifndef FEEDFS_BATCH_KIND_H
#define FEEDFS_BATCH_KIND_H

/* The files of a batch: BK_CUDA (its .cuda descriptor) with gpu = on,
 * BK_TEXT (its .text.jsonl captions, job_text.c) with text. */
enum batch_kind { BK_IMAGES, BK_LABELS, BK_IDS, BK_CUDA, BK_TEXT, BK_COUNT };

#endif
