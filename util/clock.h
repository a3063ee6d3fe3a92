/*
 * clock.h - the monotonic clock and a thread's CPU clock in ns or ms, one
 * copy for every layer that may include util/ (util/, which includes
 * nothing of ours; cache/ and gpu/, which include nothing, keep their own).
 */
#ifndef FEEDFS_CLOCK_H
#define FEEDFS_CLOCK_H

#include <stdint.h>
#include <time.h>

/* clock c (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...) in ns. */
static inline uint64_t
ff_clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t
ff_mono_ns(void)
{
	return ff_clock_ns(CLOCK_MONOTONIC);
}

static inline uint64_t
ff_mono_ms(void)
{
	return ff_clock_ns(CLOCK_MONOTONIC) / 1000000u;
}

#endif
