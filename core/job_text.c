/*
 * job_text.c - the model (core/): a batch's captions file,
 * batch-NNNNNN.text.jsonl (see job.h): one JSON string a line, in the
 * batch's order, made from its sample ids and the dataset's captions
 * (util/jsonstr.h escapes them; they are valid UTF-8 since the index
 * checked them).  Its length is a pure function of the ids, so a plan's
 * batch has its size at stat time, and a batch whose content the reads
 * chose (order = relaxed, on_error = substitute) as soon as it is made.
 * Captions are metadata of the index: never in a cache key or value.
 */
#include <stdint.h>

#include "core/job.h"
#include "util/jsonstr.h"

/* Sample id's caption (NULL, 0 for none). */
static const char *
caption(const struct job *j, int64_t id, uint32_t *len)
{
	const struct ds_sample *s;

	*len = 0;
	if (id < 0 || (uint64_t)id >= j->ds->n)
		return NULL;
	s = &j->ds->samples[id];
	*len = s->text ? s->tlen : 0;
	return s->text;
}

uint64_t
job_batch_text_len(const struct job *j, const int64_t *ids, uint32_t len)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < len; i++) {
		uint32_t tl;
		const char *t = caption(j, ids[i], &tl);

		n += json_str_len(t ? t : "", tl) + 1;
	}
	return n;
}

void
job_batch_text(const struct job *j, const int64_t *ids, uint32_t len, char *out)
{
	for (uint32_t i = 0; i < len; i++) {
		uint32_t tl;
		const char *t = caption(j, ids[i], &tl);

		out = json_str_put(out, t ? t : "", tl);
		*out++ = '\n';
	}
}
