/*
 * fill-batches.h - a program's part (tools/): feedfs-fill --batches, a
 * batch worker (fill-batches.c), called by feedfs-fill's main
 * (feedfs-fill.c) once the config is loaded.  See feedfs-fill(8).
 */
#ifndef FEEDFS_FILL_BATCHES_H
#define FEEDFS_FILL_BATCHES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"

/* The most batches a worker keeps ahead of a reader (--window). */
#define FB_WINDOW_MAX 1024
#define FB_WINDOW_DEFAULT 8

struct fb_opts {
	uint64_t part, parts; /* --part K/N */
	uint64_t ea, eb;      /* --epochs A-B */
	bool have_epochs;
	uint32_t world;	 /* --world W: with --epochs, ranks 0..W-1 */
	uint32_t window; /* --window N: batches ahead of each reader */
};

/*
 * Run the worker for job cj of c (c stays the caller's): with
 * have_epochs, make every batch of those epochs (each rank view of
 * world) that the tier lacks and no one else holds, then return; else
 * follow the readers until SIGINT or SIGTERM.  Prints progress on stderr
 * and a summary on stdout.  The exit status: 0, 1 when a batch could
 * not be made or stored, 2 on a config or dataset error (said).
 */
int fill_batches(
    struct cfg *c, const struct cfg_job *cj, const struct fb_opts *o);

#endif
