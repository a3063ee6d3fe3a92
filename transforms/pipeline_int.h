/*
 * pipeline_int.h - layer: transforms (transforms/).  What pipeline.c
 * and pipeline_op.c share: one op's text, and the two steps of reading
 * it; nothing else includes it.
 */
#ifndef FEEDFS_PIPELINE_INT_H
#define FEEDFS_PIPELINE_INT_H

#include <stddef.h>

#include "transforms/xf.h"

#define MAX_ARGS 6
#define ARG_LEN 64
#define NAME_LEN 32

struct optext {
	char name[NAME_LEN];
	int nargs;
	char args[MAX_ARGS][ARG_LEN];
};

/*
 * The next op of *sp into t.  Returns 1 when there is none left, 0 when t
 * holds one, -EINVAL with a message on a syntax error.
 */
int pipeline_next_op(
    const char **sp, struct optext *t, char *err, size_t errlen);
/* One op from its text: names, argument counts and ranges; -EINVAL with
 * a message. */
int pipeline_make_op(
    const struct optext *t, struct xf_op *op, char *err, size_t errlen);

#endif
