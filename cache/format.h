/*
 * format.h - cache/ (the store), layer codec (beside codec.h): how a job's
 * prefix images are stored in the cache (cache_format = raw | lossless |
 * jpeg(Q)).
 *
 *	raw		the h x w x 3 uint8 pixels as they are
 *	lossless	each row "sub"-filtered (every byte less the byte of
 *			the same channel one pixel to the left, mod 256, as
 *			PNG's filter 1), then zstd at level 1; decodes to
 *			the same bytes
 *	jpeg(Q)		baseline JPEG of quality Q (1..100), 4:4:4 (no
 *			chroma subsampling), the accurate integer DCT both
 *			ways; decodes to pixels near the raw ones
 *
 * The format is part of the cache key (cache_fmt_suffix is appended to
 * the prefix text that is hashed: raw appends nothing, so raw keys are
 * those of a feedfs without formats) and of the value header (struct
 * cache_val.enc), so formats never mix.  No state: every function may be
 * called from any thread.
 */
#ifndef FEEDFS_CACHE_FORMAT_H
#define FEEDFS_CACHE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

enum cache_fmt { CACHE_FMT_RAW, CACHE_FMT_LOSSLESS, CACHE_FMT_JPEG };

/* The zstd level of lossless (measured: bench/cache-formats). */
#define CACHE_FMT_ZSTD_LEVEL 1

/* cache_val.enc of format fmt and quality q (q only for jpeg). */
#define CACHE_FMT_ENC(fmt, q) \
	((uint32_t)(fmt) | ((fmt) == CACHE_FMT_JPEG ? (uint32_t)(q) << 8 : 0))
#define CACHE_FMT_OF(enc) ((int)((enc) & 0xff))
#define CACHE_FMT_Q(enc) ((int)((enc) >> 8 & 0xff))

/*
 * Parse "raw", "lossless" or "jpeg(Q)" (any case, Q in 1..100): 0 and
 * *enc set, or -EINVAL.
 */
int cache_fmt_parse(const char *s, uint32_t *enc);
/* The config text of enc: "raw", "lossless", "jpeg(90)"; "?" if bad. */
void cache_fmt_name(uint32_t enc, char *buf, size_t len);
/*
 * What enc appends to the prefix text of the key and of the index: "" for
 * raw, else "|format=NAME".
 */
void cache_fmt_suffix(uint32_t enc, char *buf, size_t len);

/*
 * Encode the w x h x 3 uint8 pixels px as enc: 0 and *out (malloc'd, the
 * caller frees) of *outlen bytes, -EINVAL for a bad enc or size, -ENOMEM.
 * raw copies.
 */
int cache_fmt_encode(uint32_t enc, uint32_t w, uint32_t h, const uint8_t *px,
    uint8_t **out, size_t *outlen);
/*
 * Decode len bytes of format enc into w x h x 3 uint8 pixels: 0 and *px
 * (malloc'd), or -EINVAL when the bytes are not a w x h image of enc
 * (damaged: a miss), -ENOMEM.
 */
int cache_fmt_decode(uint32_t enc, uint32_t w, uint32_t h, const uint8_t *in,
    size_t len, uint8_t **px);

/*
 * Whether enc decodes to other pixels than it was given (jpeg).  A job of
 * a lossy format serves the round trip of its prefix images, whether or
 * not a cache holds them (the same bytes on every read).
 */
static inline int
cache_fmt_lossy(uint32_t enc)
{
	return CACHE_FMT_OF(enc) == CACHE_FMT_JPEG;
}
/*
 * cache_fmt_encode, and the pixels every decode of those bytes gives, as
 * a hit serves them: *served NULL when they are px (raw, lossless), else
 * malloc'd (lossy: *out decoded once).  0, or cache_fmt_encode's or
 * cache_fmt_decode's error, with nothing allocated.
 */
int cache_fmt_encode_served(uint32_t enc, uint32_t w, uint32_t h,
    const uint8_t *px, uint8_t **out, size_t *outlen, uint8_t **served);

#endif
