/*
 * png.c - PNG to 8-bit RGB with libspng, and the PNG header probe (see
 * probe.h).  Layer: transforms/ (pixels).
 *
 * The conversion is PIL's convert("RGB") for 8-bit images: gray is
 * replicated, a palette is looked up, alpha (an alpha channel or tRNS) is
 * dropped, not composited; gAMA, sBIT and colour profiles are ignored, as
 * PIL ignores them.  Gray of 1, 2 or 4 bits is scaled to 0..255 by bit
 * replication, as PIL does.  16-bit samples become round(v / 257) (PIL
 * would clip a 16-bit gray image instead, which makes it white; an exact
 * rescale is what a training set wants).  Adam7 interlacing is decoded.
 * Every CRC (critical and ancillary chunks) and the zlib checksum are
 * checked: a damaged file is refused, never served half-decoded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spng.h>

#include "transforms/probe.h"
#include "transforms/probe_int.h"
#include "transforms/xf.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/*
 * What ancillary chunks (text, profiles, ...) may hold in memory: libspng
 * keeps them while it decodes, so a file of many large text chunks would
 * otherwise cost its own size again.  Image data (IDAT) is not counted.
 */
#define PNG_CHUNK_CACHE (16u << 20)

const char *
xf_png_decoder_id(void)
{
	return "libspng " STR(SPNG_VERSION_MAJOR) "." STR(
	    SPNG_VERSION_MINOR) "." STR(SPNG_VERSION_PATCH);
}

bool
xf_is_png(const uint8_t *buf, size_t len)
{
	static const uint8_t magic[8] = {
	    0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

	return len >= sizeof(magic) && memcmp(buf, magic, sizeof(magic)) == 0;
}

/*
 * The PNG probe: the signature and the IHDR chunk (33 bytes), its facts
 * and max_pixels; with XF_PROBE_END, the IEND chunk with its CRC within
 * the last XF_PROBE_WINDOW bytes (a file cut short has none there).  The
 * chunks' CRCs and the zlib stream are the decoder's to check.
 */
enum xf_verdict
png_probe(const struct probe_in *in, uint64_t max_pixels, unsigned flags,
    struct xf_probe *out, char *why, size_t len)
{
	static const uint8_t iend[8] = {
	    'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
	static const uint8_t channels[7] = {1, 0, 3, 3, 2, 0, 4};
	uint8_t b[33];
	const uint8_t *p;
	ssize_t n;
	bool found;
	int e;

	out->format = XF_SRC_PNG;
	if ((n = probe_at(in, 0, sizeof(b), b, &p)) < 0)
		return probe_unreadable((int)n, why, len);
	if (n < 33) {
		snprintf(why, len, "PNG cut in its header (%zd bytes)", n);
		return XF_PROBE_TRUNCATED;
	}
	if (probe_be32(p + 8) != 13 || memcmp(p + 12, "IHDR", 4) != 0 ||
	    probe_be32(p + 16) == 0 || probe_be32(p + 20) == 0 ||
	    probe_be32(p + 16) > INT32_MAX || probe_be32(p + 20) > INT32_MAX) {
		snprintf(why, len, "corrupt PNG: bad IHDR");
		return XF_PROBE_CORRUPT;
	}
	out->w = probe_be32(p + 16);
	out->h = probe_be32(p + 20);
	out->depth = p[24];
	out->components = p[25] < sizeof(channels) ? channels[p[25]] : 0;
	out->palette = p[25] == 3;
	out->progressive = p[28] != 0;
	if (xf_pixels_allowed(out->w, out->h, max_pixels, why, len) != 0) {
		out->too_large = true;
		return XF_PROBE_UNSUPPORTED;
	}
	if (!(flags & XF_PROBE_END))
		return XF_PROBE_OK;
	if ((e = probe_tail_has(in, 33, iend, sizeof(iend), &found)) != 0)
		return probe_unreadable(e, why, len);
	if (!found) {
		snprintf(why, len, "no IEND chunk at the end: PNG cut short");
		return XF_PROBE_TRUNCATED;
	}
	return XF_PROBE_OK;
}

/* err <- "corrupt data: why"; returns -EINVAL. */
static int
spng_fail(int e, char *err, size_t errlen)
{
	snprintf(err, errlen, "corrupt PNG: %s", spng_strerror(e));
	return -EINVAL;
}

/* Adam7: the first column and the column step of each pass. */
static const uint8_t adam7_x0[7] = {0, 4, 0, 2, 0, 1, 0};
static const uint8_t adam7_dx[7] = {8, 8, 4, 4, 2, 2, 1};

/*
 * One RGBA16 (host order) row from spng_decode_row into RGB8 row out,
 * round(v / 257) = (v + 128) / 257 exactly: the whole row, or for an
 * interlaced image only the columns of pass (the others of in are stale).
 */
static void
rgba16_row_to_rgb8(const uint16_t *in, uint8_t *out, uint32_t w,
    bool interlaced, int pass)
{
	uint32_t x0 = interlaced ? adam7_x0[pass] : 0;
	uint32_t dx = interlaced ? adam7_dx[pass] : 1;

	for (uint32_t x = x0; x < w; x += dx)
		for (int c = 0; c < 3; c++)
			out[(size_t)x * 3 + c] =
			    (uint8_t)((in[(size_t)x * 4 + c] + 128u) / 257u);
}

/*
 * A 16-bit image, row by row: libspng decodes each (deinterlaced) row to
 * RGBA16 into row (w * 8 bytes), which is converted into px at once, so
 * that the image costs its 3 bytes a pixel and one row, not 11 bytes a
 * pixel (an RGBA16 copy beside the RGB8 one).
 */
static int
decode_rows16(spng_ctx *ctx, const struct spng_ihdr *ihdr, uint8_t *px,
    uint16_t *row, char *err, size_t errlen)
{
	size_t rowlen = (size_t)ihdr->width * 8;
	struct spng_row_info ri;
	int e;

	if ((e = spng_decode_image(
		 ctx, NULL, 0, SPNG_FMT_RGBA16, SPNG_DECODE_PROGRESSIVE)) != 0)
		return spng_fail(e, err, errlen);
	do {
		if ((e = spng_get_row_info(ctx, &ri)) != 0)
			return spng_fail(e, err, errlen);
		/* SPNG_EOI: this row was the last one. */
		e = spng_decode_row(ctx, row, rowlen);
		if (e != 0 && e != SPNG_EOI)
			return spng_fail(e, err, errlen);
		if (ri.row_num >= ihdr->height || ri.pass < 0 || ri.pass > 6)
			return spng_fail(SPNG_EINTERNAL, err, errlen);
		rgba16_row_to_rgb8(row,
		    px + (size_t)ri.row_num * ihdr->width * 3, ihdr->width,
		    ihdr->interlace_method != 0, ri.pass);
	} while (e == 0);
	return 0;
}

int
xf_png_decode(const uint8_t *png, size_t len, uint64_t max_pixels,
    struct xf_image *out, char *err, size_t errlen)
{
	struct spng_ihdr ihdr;
	struct xf_probe pr;
	enum xf_verdict v;
	spng_ctx *ctx;
	size_t n = 0;
	uint16_t *row = NULL;
	uint8_t *px = NULL;
	int e, r = -EINVAL;

	if (!xf_is_png(png, len)) {
		snprintf(err, errlen, "not a PNG");
		return -EINVAL;
	}
	/* The probe's rules (max_pixels), before anything of the image's
	 * size is allocated; damage is libspng's to name. */
	v = probe_mem_as(png_probe, png, len, max_pixels, &pr, err, errlen);
	if (v == XF_PROBE_UNSUPPORTED)
		return pr.too_large ? -EFBIG : -ENOTSUP;
	if ((ctx = spng_ctx_new(0)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((e = spng_set_crc_action(ctx, SPNG_CRC_ERROR, SPNG_CRC_ERROR)) !=
		0 ||
	    (e = spng_set_chunk_limits(
		 ctx, PNG_CHUNK_CACHE, PNG_CHUNK_CACHE)) != 0 ||
	    (e = spng_set_png_buffer(ctx, png, len)) != 0 ||
	    (e = spng_get_ihdr(ctx, &ihdr)) != 0) {
		r = spng_fail(e, err, errlen);
		goto out;
	}
	/* libspng took an IHDR the probe did not: refused all the same (err
	 * holds the probe's why). */
	if (v != XF_PROBE_OK)
		goto out;
	if (pr.w != ihdr.width || pr.h != ihdr.height) {
		snprintf(err, errlen, "corrupt PNG: bad IHDR");
		goto out;
	}
	if ((e = spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &n)) != 0) {
		r = spng_fail(e, err, errlen);
		goto out;
	}
	/* The caller's buffers (xf.h): from the thread's arena, counted. */
	if ((px = xf_alloc(n)) == NULL ||
	    (pr.depth == 16 &&
		(row = xf_alloc((size_t)ihdr.width * 8)) == NULL)) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto out;
	}
	/* No SPNG_DECODE_TRNS: alpha from tRNS is dropped, as PIL does. */
	if (pr.depth == 16) {
		if ((r = decode_rows16(ctx, &ihdr, px, row, err, errlen)) != 0)
			goto out;
	} else if ((e = spng_decode_image(ctx, px, n, SPNG_FMT_RGB8, 0)) != 0) {
		r = spng_fail(e, err, errlen);
		goto out;
	}
	/* Then the chunks after the image, to IEND: the last IDAT's CRC is
	 * checked there, and a file cut after its image data is refused. */
	if ((e = spng_decode_chunks(ctx)) != 0) {
		r = spng_fail(e, err, errlen);
		goto out;
	}
	out->w = ihdr.width;
	out->h = ihdr.height;
	out->px = px; /* transferred */
	out->borrowed = false;
	px = NULL;
	r = 0;
out:
	xf_free(row);
	xf_free(px);
	spng_ctx_free(ctx);
	return r;
}
