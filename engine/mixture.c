/*
 * mixture.c - a mixture job's weights files: JOB/mixture (the next
 * epochs', the one writable file) and JOB/epoch-NNNN/mixture (that
 * epoch's), read as owned texts (text.c) and written a line at a time
 * (see feed.h).  Layer: the engine (engine/), its top beside feed.c and
 * files.c: fs/ calls it; it calls text.c (feed_owned_alloc) and
 * core/mix.c (the weights' text).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "engine/engine.h"
#include "util/log.h"
#include "core/mix.h"

int
feed_mixture_text(
    struct feed *f, size_t job, uint32_t epoch, char **text, size_t *len)
{
	struct job *j = &f->jobs[job];
	char *buf;
	size_t cap;
	int n;

	if (!job_is_mixture(j))
		return -ENOENT;
	cap = j->nsrc * (CFG_MAX_NAME + 32) + 2;
	if ((buf = feed_owned_alloc(f, cap)) == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&f->lock);
	if (epoch == FEED_MIX_NEXT)
		epoch = j->opened;
	else if (epoch >= j->opened)
		j->opened = epoch + 1; /* what is read here is what is served */
	n = mix_format(j->src_names, job_weights(j, epoch), j->nsrc, buf, cap);
	pthread_mutex_unlock(&f->lock);
	*text = buf; /* transferred */
	*len = (size_t)n < cap ? (size_t)n : cap - 1;
	return 0;
}

int
feed_mixture_set(struct feed *f, size_t job, const char *line, size_t len)
{
	struct job *j = &f->jobs[job];
	uint64_t w[MIX_MAX_SOURCES];
	char text[4096], msg[512], now[MIX_MAX_SOURCES * (CFG_MAX_NAME + 32)];
	uint32_t from;
	int r;

	if (!job_is_mixture(j))
		return -EROFS;
	if (len >= sizeof(text) || memchr(line, '\0', len) != NULL) {
		log_warn("job %s: mixture: a write of %zu bytes refused: %s",
		    j->cfg->name, len,
		    len >= sizeof(text) ? "longer than one line of 4095 bytes"
					: "a NUL byte in it");
		return -EINVAL;
	}
	memcpy(text, line, len);
	text[len] = '\0';
	if (mix_weights(text, j->src_names, j->nsrc, w, msg, sizeof(msg)) !=
	    0) {
		text[strcspn(text, "\n")] = '\0';
		log_warn("job %s: mixture: '%.200s' refused: %s (nothing "
			 "changed)",
		    j->cfg->name, text, msg);
		return -EINVAL;
	}
	pthread_mutex_lock(&f->lock);
	from = j->opened;
	r = job_set_weights(j, from, w);
	pthread_mutex_unlock(&f->lock);
	if (r != 0)
		return r;
	mix_format(j->src_names, w, j->nsrc, now, sizeof(now));
	now[strcspn(now, "\n")] = '\0';
	if (from >= j->cfg->epochs)
		log_info("job %s: mixture %s: every epoch is opened already",
		    j->cfg->name, now);
	else
		log_info("job %s: mixture %s from epoch %" PRIu32, j->cfg->name,
		    now, from);
	return 0;
}
