/*
 * probe_int.h - the header probes' common parts, inside transforms/ (the
 * pixels layer) only: the cursor every per-format probe reads a file
 * through (probe_in.c), and the per-format probes that probe.c dispatches
 * to and the decoders call.
 */
#ifndef FEEDFS_PROBE_INT_H
#define FEEDFS_PROBE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "transforms/probe.h"

/* How many of the first bytes the dispatch reads (magic bytes, IHDR). */
#define PROBE_HEAD 4096u

/*
 * One file, held in memory (mem) or read through rd.  head holds its first
 * hn bytes (min(size, PROBE_HEAD)); reads never go outside the size.
 */
struct probe_in {
	const uint8_t *mem; /* all of it, or NULL: read rd */
	const struct xf_reader *rd;
	uint64_t size;
	const uint8_t *head;
	size_t hn;
};

/* Whether reads are bounded (a reader: each read costs I/O). */
static inline bool
probe_bounded(const struct probe_in *in)
{
	return in->mem == NULL;
}

/*
 * Up to n bytes at off: how many (fewer only at the end of the file), *p
 * at them (into the file's memory or head, or into buf, n bytes), or
 * -errno from the reader.
 */
ssize_t probe_at(const struct probe_in *in, uint64_t off, size_t n,
    uint8_t *buf, const uint8_t **p);

/*
 * Whether the last XF_PROBE_WINDOW bytes of the file at or after from
 * hold pat: 0 and *found, or -errno.
 */
int probe_tail_has(const struct probe_in *in, uint64_t from, const void *pat,
    size_t plen, bool *found);

/* verdict UNREADABLE with the reader's error e (-errno) in why. */
enum xf_verdict probe_unreadable(int e, char *why, size_t whylen);

/*
 * The format probes (jpeg_probe.c, png.c, webp.c), called once the magic
 * bytes matched (head), *out zeroed and why "": as xf_probe.
 */
enum xf_verdict jpeg_probe(const struct probe_in *in, uint64_t max_pixels,
    unsigned flags, struct xf_probe *out, char *why, size_t whylen);
enum xf_verdict png_probe(const struct probe_in *in, uint64_t max_pixels,
    unsigned flags, struct xf_probe *out, char *why, size_t whylen);
enum xf_verdict webp_probe(const struct probe_in *in, uint64_t max_pixels,
    unsigned flags, struct xf_probe *out, char *why, size_t whylen);

/*
 * The probe of the len bytes at buf by the format's own probe, as
 * xf_probe_mem gives it (flags 0): what the decoders call, so that no
 * file of transforms/ calls probe.c, which calls them.
 */
static inline enum xf_verdict
probe_mem_as(enum xf_verdict (*probe)(const struct probe_in *, uint64_t,
		 unsigned, struct xf_probe *, char *, size_t),
    const uint8_t *buf, size_t len, uint64_t max_pixels, struct xf_probe *out,
    char *why, size_t whylen)
{
	struct probe_in in = {.mem = buf, .size = len, .head = buf, .hn = len};

	*out = (struct xf_probe){.format = XF_SRC_NONE};
	why[0] = '\0';
	return probe(&in, max_pixels, 0, out, why, whylen);
}

static inline uint32_t
probe_be16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static inline uint32_t
probe_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static inline uint32_t
probe_le32(const uint8_t *p)
{
	return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[1] << 8 | p[0];
}

#endif
