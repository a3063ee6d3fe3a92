/*
 * png.c - PNG to 8-bit RGB with libspng.
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

/* err <- "corrupt data: why"; returns -EINVAL. */
static int
spng_fail(int e, char *err, size_t errlen)
{
	snprintf(err, errlen, "corrupt PNG: %s", spng_strerror(e));
	return -EINVAL;
}

/* RGBA16 (host order) to RGB8, round(v / 257) = (v + 128) / 257 exactly. */
static void
rgba16_to_rgb8(const uint16_t *in, uint8_t *out, size_t npx)
{
	for (size_t i = 0; i < npx; i++, in += 4, out += 3)
		for (int c = 0; c < 3; c++)
			out[c] = (uint8_t)((in[c] + 128u) / 257u);
}

int
xf_png_decode(const uint8_t *png, size_t len, uint64_t max_pixels,
    struct xf_image *out, char *err, size_t errlen)
{
	struct spng_ihdr ihdr;
	spng_ctx *ctx;
	size_t n = 0;
	void *buf = NULL;
	uint8_t *px = NULL;
	int fmt, e, r = -EINVAL;

	if (!xf_is_png(png, len)) {
		snprintf(err, errlen, "not a PNG");
		return -EINVAL;
	}
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
	/* Before anything of the image's size is allocated. */
	if (max_pixels > 0 && (uint64_t)ihdr.width * ihdr.height > max_pixels) {
		snprintf(err, errlen,
		    "image too large: %ux%u is more than max_pixels (%llu)",
		    (unsigned)ihdr.width, (unsigned)ihdr.height,
		    (unsigned long long)max_pixels);
		r = -EFBIG;
		goto out;
	}
	fmt = ihdr.bit_depth == 16 ? SPNG_FMT_RGBA16 : SPNG_FMT_RGB8;
	if ((e = spng_decoded_image_size(ctx, fmt, &n)) != 0) {
		r = spng_fail(e, err, errlen);
		goto out;
	}
	if ((buf = malloc(n)) == NULL ||
	    (fmt == SPNG_FMT_RGBA16 &&
		(px = malloc((size_t)ihdr.width * ihdr.height * 3)) == NULL)) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto out;
	}
	/* No SPNG_DECODE_TRNS: alpha from tRNS is dropped, as PIL does. */
	/* Then the chunks after the image, to IEND: the last IDAT's CRC is
	 * checked there, and a file cut after its image data is refused. */
	if ((e = spng_decode_image(ctx, buf, n, fmt, 0)) != 0 ||
	    (e = spng_decode_chunks(ctx)) != 0) {
		r = spng_fail(e, err, errlen);
		goto out;
	}
	if (fmt == SPNG_FMT_RGBA16) {
		rgba16_to_rgb8(buf, px, (size_t)ihdr.width * ihdr.height);
		free(buf);
	} else
		px = buf;
	buf = NULL;
	out->w = ihdr.width;
	out->h = ihdr.height;
	out->px = px; /* transferred */
	px = NULL;
	r = 0;
out:
	free(buf);
	free(px);
	spng_ctx_free(ctx);
	return r;
}
