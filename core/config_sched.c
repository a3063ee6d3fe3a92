/*
 * config_sched.c - the model (core/): a job's schedules, as the config
 * gives them: its resolution schedule (resolution = A..B @ epochs C..D,
 * FFCV's progressive resizing: cfg_parse_res, cfg_job_res) and its seeds
 * (shuffle_seed and aug_seed, each seed's unless given).  See config.h.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/config_int.h"

/* A decimal of at most 9 digits at *s; advances *s. */
static bool
res_num(const char **s, uint64_t *v)
{
	const char *p = *s;

	*v = 0;
	while (*p >= '0' && *p <= '9' && p - *s < 9)
		*v = *v * 10 + (uint64_t)(*p++ - '0');
	if (p == *s || (*p >= '0' && *p <= '9'))
		return false;
	*s = p;
	return true;
}

/* "A..B" at *s (blanks allowed around ".."); advances *s. */
static bool
res_range(const char **s, uint64_t *a, uint64_t *b)
{
	if (!res_num(s, a))
		return false;
	while (**s == ' ' || **s == '\t')
		(*s)++;
	if (strncmp(*s, "..", 2) != 0)
		return false;
	*s += 2;
	while (**s == ' ' || **s == '\t')
		(*s)++;
	return res_num(s, b);
}

/* FFCV's rounding of an interpolated resolution: half to even. */
static uint32_t
res_round(double r)
{
	return (uint32_t)nearbyint(r / 32.0) * 32;
}

int
cfg_parse_res(const char *s, struct cfg_res *r, char *msg, size_t len)
{
	uint64_t lo, hi, e0, e1;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!res_range(&s, &lo, &hi)) {
		snprintf(msg, len, "expected sizes LO..HI first");
		return -EINVAL;
	}
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s != '@') {
		snprintf(
		    msg, len, "expected '@ epochs E0..E1' after the sizes");
		return -EINVAL;
	}
	s++;
	while (*s == ' ' || *s == '\t')
		s++;
	if (strncmp(s, "epochs", 6) != 0 ||
	    (s[6] != ' ' && s[6] != '\t' && s[6] != '\0')) {
		snprintf(msg, len, "expected the word 'epochs' after '@'");
		return -EINVAL;
	}
	s += 6;
	while (*s == ' ' || *s == '\t')
		s++;
	if (!res_range(&s, &e0, &e1)) {
		snprintf(msg, len, "expected epochs E0..E1 after '@ epochs'");
		return -EINVAL;
	}
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s != '\0') {
		snprintf(msg, len, "text after the epochs");
		return -EINVAL;
	}
	if (lo < 32 || hi > 65504 || lo > hi) {
		snprintf(msg, len, "sizes need 32 <= LO <= HI <= 65504");
		return -EINVAL;
	}
	if (e0 >= e1 || e1 > 9999) {
		snprintf(msg, len,
		    e0 >= e1 ? "the ramp's first epoch must be below its last"
			     : "epochs go up to 9999");
		return -EINVAL;
	}
	r->lo = (uint32_t)lo;
	r->hi = (uint32_t)hi;
	r->e0 = (uint32_t)e0;
	r->e1 = (uint32_t)e1;
	return 0;
}

uint32_t
cfg_job_res(const struct cfg_job *j, uint32_t epoch)
{
	const struct cfg_res *r = &j->res;
	double x;

	if (j->res_line == 0)
		return 0;
	/* FFCV's get_resolution: the ends as given, the ramp between them
	 * np.interp's value rounded to a multiple of 32. */
	if (epoch <= r->e0)
		return r->lo;
	if (epoch >= r->e1)
		return r->hi;
	x = ((double)r->hi - r->lo) / ((double)r->e1 - r->e0) *
		((double)epoch - r->e0) +
	    r->lo;
	return res_round(x);
}

uint64_t
cfg_job_shuffle_seed(const struct cfg_job *j)
{
	return j->shuffle_seed_line ? j->shuffle_seed : j->seed;
}

uint64_t
cfg_job_aug_seed(const struct cfg_job *j)
{
	return j->aug_seed_line ? j->aug_seed : j->seed;
}
