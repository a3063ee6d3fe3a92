/*
 * mix.c - the model (core/): mixtures: weights and the epoch order (see
 * mix.h).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mix.h"
#include "transforms/rng.h"

static bool
is_sep(char c)
{
	return c == ',' || isspace((unsigned char)c);
}

/* A weight: digits, an optional fraction; rounded to millionths. */
static int
parse_weight(const char *s, size_t len, uint64_t *out)
{
	uint64_t ip = 0, frac = 0, scale = MIX_ONE;
	size_t i = 0, nd = 0;
	bool round_up = false;

	for (; i < len && isdigit((unsigned char)s[i]); i++, nd++) {
		ip = ip * 10 + (uint64_t)(s[i] - '0');
		if (ip > MIX_MAX_WEIGHT / MIX_ONE)
			return -ERANGE;
	}
	if (i < len && s[i] == '.') {
		size_t nf = 0;

		for (i++; i < len && isdigit((unsigned char)s[i]); i++, nf++) {
			if (scale > 1) {
				scale /= 10;
				frac += (uint64_t)(s[i] - '0') * scale;
			} else if (nf == 6)
				round_up = s[i] >= '5';
		}
		nd += nf;
	}
	if (nd == 0 || i != len)
		return -EINVAL;
	*out = ip * MIX_ONE + frac + round_up;
	if (*out > MIX_MAX_WEIGHT)
		return -ERANGE;
	return 0;
}

int
mix_split(
    const char *text, struct mix_pair **pairs, size_t *n, char *msg, size_t len)
{
	struct mix_pair *pv = NULL;
	size_t np = 0;
	const char *s = text;
	int r = -EINVAL;

	if ((pv = calloc(MIX_MAX_SOURCES, sizeof(*pv))) == NULL)
		return -ENOMEM;
	for (;;) {
		const char *tok, *colon;
		size_t tl;

		while (*s && is_sep(*s))
			s++;
		if (*s == '\0')
			break;
		tok = s;
		while (*s && !is_sep(*s))
			s++;
		tl = (size_t)(s - tok);
		if ((colon = memchr(tok, ':', tl)) == NULL || colon == tok) {
			snprintf(msg, len, "'%.*s': expected NAME:WEIGHT",
			    (int)(tl > 64 ? 64 : tl), tok);
			goto fail;
		}
		if (np == MIX_MAX_SOURCES) {
			snprintf(
			    msg, len, "more than %d sources", MIX_MAX_SOURCES);
			goto fail;
		}
		if ((size_t)(colon - tok) > MIX_NAME_MAX) {
			snprintf(msg, len, "a source name longer than %d bytes",
			    MIX_NAME_MAX);
			goto fail;
		}
		memcpy(pv[np].name, tok, (size_t)(colon - tok));
		pv[np].name[colon - tok] = '\0';
		colon++;
		if (*colon == '-') {
			snprintf(
			    msg, len, "%s: a negative weight", pv[np].name);
			goto fail;
		}
		if (parse_weight(colon, (size_t)(s - colon), &pv[np].w) != 0) {
			snprintf(msg, len,
			    "%s: '%.*s' is not a weight (a decimal from 0 to "
			    "1000000)",
			    pv[np].name, (int)(s - colon > 64 ? 64 : s - colon),
			    colon);
			goto fail;
		}
		for (size_t i = 0; i < np; i++)
			if (strcmp(pv[i].name, pv[np].name) == 0) {
				snprintf(
				    msg, len, "%s named twice", pv[np].name);
				goto fail;
			}
		np++;
	}
	if (np == 0) {
		snprintf(msg, len, "no NAME:WEIGHT pair");
		goto fail;
	}
	*pairs = pv; /* transferred */
	*n = np;
	return 0;
fail:
	free(pv);
	return r;
}

int
mix_weights(const char *text, const char *const *names, size_t n, uint64_t *w,
    char *msg, size_t len)
{
	struct mix_pair *pv;
	uint64_t tmp[MIX_MAX_SOURCES] = {0}, sum = 0;
	size_t np, i, k;
	int r;

	if ((r = mix_split(text, &pv, &np, msg, len)) != 0)
		return r;
	r = -EINVAL;
	for (i = 0; i < np; i++) {
		for (k = 0; k < n; k++)
			if (strcmp(names[k], pv[i].name) == 0)
				break;
		if (k == n) {
			snprintf(msg, len, "unknown source '%s'", pv[i].name);
			goto out;
		}
		tmp[k] = pv[i].w;
		sum += pv[i].w;
	}
	if (sum == 0) {
		snprintf(msg, len, "the weights sum to 0");
		goto out;
	}
	memcpy(w, tmp, n * sizeof(*w));
	r = 0;
out:
	free(pv);
	return r;
}

int
mix_format(const char *const *names, const uint64_t *w, size_t n, char *buf,
    size_t len)
{
	size_t at = 0;

	for (size_t i = 0; i < n; i++) {
		char frac[16];
		int k;

		snprintf(frac, sizeof(frac), "%06" PRIu64,
		    (uint64_t)(w[i] % MIX_ONE));
		for (k = 5; k >= 0 && frac[k] == '0'; k--)
			frac[k] = '\0';
		at += (size_t)snprintf(buf + (at < len ? at : len),
		    at < len ? len - at : 0, "%s%s:%" PRIu64 "%s%s",
		    i ? " " : "", names[i], (uint64_t)(w[i] / MIX_ONE),
		    frac[0] ? "." : "", frac);
	}
	at += (size_t)snprintf(
	    buf + (at < len ? at : len), at < len ? len - at : 0, "\n");
	return (int)at;
}

void
mix_counts(const uint64_t *w, size_t n, uint32_t L, uint32_t *count)
{
	unsigned __int128 rem[MIX_MAX_SOURCES];
	uint64_t sum = 0;
	uint32_t given = 0;

	for (size_t s = 0; s < n; s++)
		sum += w[s];
	for (size_t s = 0; s < n; s++) {
		unsigned __int128 q = (unsigned __int128)w[s] * L;

		count[s] = (uint32_t)(q / sum);
		rem[s] = q % sum;
		given += count[s];
	}
	/* The rest, one each, to the largest remainders (earlier on ties). */
	while (given < L) {
		size_t best = n;

		for (size_t s = 0; s < n; s++)
			if (rem[s] > 0 && (best == n || rem[s] > rem[best]))
				best = s;
		count[best]++;
		rem[best] = 0;
		given++;
	}
}

/* Source s's permutation of its size samples for epoch (into perm). */
static void
source_perm(
    const struct plan *p, uint32_t epoch, size_t s, size_t size, uint32_t *perm)
{
	uint64_t key = rng_key(RNG_DOMAIN_MIXSRC, p->seed, epoch, s);

	for (size_t i = 0; i < size; i++)
		perm[i] = (uint32_t)i;
	if (!p->shuffle)
		return;
	for (size_t i = size; i > 1; i--) {
		uint64_t j = rng_below(key, i, i);
		uint32_t t = perm[i - 1];

		perm[i - 1] = perm[j];
		perm[j] = t;
	}
}

int
mix_order(const struct plan *p, uint32_t epoch, const size_t *size,
    const uint64_t *w, size_t n, uint32_t *ids)
{
	uint32_t *perm[MIX_MAX_SOURCES] = {0}, start[MIX_MAX_SOURCES];
	uint32_t count[MIX_MAX_SOURCES];
	uint64_t drawn[MIX_MAX_SOURCES] = {0};
	uint8_t *tag = NULL;
	uint32_t at = 0, B = p->batch_size;
	int r = -ENOMEM;

	for (size_t s = 0; s < n; s++) {
		start[s] = at;
		at += (uint32_t)size[s];
		if ((perm[s] = malloc(
			 (size[s] ? size[s] : 1) * sizeof(*perm[s]))) == NULL)
			goto out;
		source_perm(p, epoch, s, size[s], perm[s]);
	}
	if ((tag = malloc(B)) == NULL)
		goto out;
	for (uint64_t k = 0; k * B < p->n; k++) {
		uint64_t base = k * B;
		uint32_t L = p->n - base < B ? (uint32_t)(p->n - base) : B;
		uint64_t key = rng_key(RNG_DOMAIN_MIXBATCH, p->seed, epoch, k);
		uint32_t i = 0;

		mix_counts(w, n, L, count);
		for (size_t s = 0; s < n; s++)
			for (uint32_t c = 0; c < count[s]; c++)
				tag[i++] = (uint8_t)s;
		for (uint32_t m = L; p->shuffle && m > 1; m--) {
			uint64_t j = rng_below(key, m, m);
			uint8_t t = tag[m - 1];

			tag[m - 1] = tag[j];
			tag[j] = t;
		}
		for (i = 0; i < L; i++) {
			size_t s = tag[i];

			ids[base + i] =
			    start[s] + perm[s][drawn[s]++ % size[s]];
		}
	}
	r = 0;
out:
	for (size_t s = 0; s < n; s++)
		free(perm[s]);
	free(tag);
	return r;
}
