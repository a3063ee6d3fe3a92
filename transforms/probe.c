/*
 * probe.c - the header probe's dispatch: a source file's format told by
 * its magic bytes, and the per-format probe called (jpeg_probe.c, png.c,
 * webp.c; see probe.h).  Layer: transforms/ (pixels), the top of the
 * probes: nothing in transforms/ calls it (the decoders call their own
 * format's probe), core/'s --check does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/probe.h"
#include "transforms/probe_int.h"
#include "transforms/xf.h"

/* A format feedfs does not decode, by its magic bytes; NULL: unknown. */
static const char *
other_format(const uint8_t *p, size_t n)
{
	if (n >= 2 && p[0] == 'B' && p[1] == 'M')
		return "a BMP image";
	if (n >= 4 && memcmp(p, "GIF8", 4) == 0)
		return "a GIF image";
	if (n >= 4 &&
	    (memcmp(p, "II*\0", 4) == 0 || memcmp(p, "MM\0*", 4) == 0))
		return "a TIFF image";
	if (n >= 12 && memcmp(p + 4, "ftyp", 4) == 0) {
		if (memcmp(p + 8, "avif", 4) == 0 ||
		    memcmp(p + 8, "avis", 4) == 0)
			return "an AVIF image";
		return "a HEIF/ISO media file";
	}
	if (n >= 12 && memcmp(p, "\0\0\0\x0cjP  \r\n\x87\n", 12) == 0)
		return "a JPEG 2000 image";
	if (n >= 4 && memcmp(p, "\0\0\1\0", 4) == 0)
		return "an ICO image";
	if (n >= 4 && memcmp(p, "RIFF", 4) == 0)
		return "a RIFF file that is not WebP";
	return NULL;
}

/* A JPEG's start of image (libjpeg's first_marker); jpeg_probe.c wants
 * a marker after it (xf_is_jpeg). */
static bool
is_jpeg(const uint8_t *p, size_t n)
{
	return n >= 2 && p[0] == 0xff && p[1] == 0xd8;
}

const char *
xf_format_name(const uint8_t *p, size_t n)
{
	if (xf_is_png(p, n))
		return "a PNG image";
	if (xf_is_webp(p, n))
		return "a WebP image";
	if (is_jpeg(p, n))
		return "a JPEG image";
	return other_format(p, n);
}

/* The probe of in by its magic bytes. */
static enum xf_verdict
dispatch(const struct probe_in *in, uint64_t max_pixels, unsigned flags,
    struct xf_probe *out, char *why, size_t whylen)
{
	const char *fmt;

	if (xf_is_png(in->head, in->hn))
		return png_probe(in, max_pixels, flags, out, why, whylen);
	if (xf_is_webp(in->head, in->hn))
		return webp_probe(in, max_pixels, flags, out, why, whylen);
	if (is_jpeg(in->head, in->hn))
		return jpeg_probe(in, max_pixels, flags, out, why, whylen);
	fmt = other_format(in->head, in->hn);
	snprintf(why, whylen, "%s, not a JPEG, PNG or WebP",
	    fmt ? fmt : "an unknown format");
	return XF_PROBE_UNSUPPORTED;
}

enum xf_verdict
xf_probe(const struct xf_reader *rd, uint64_t max_pixels, unsigned flags,
    struct xf_probe *out, char *why, size_t whylen)
{
	uint8_t head[PROBE_HEAD];
	struct probe_in in = {.rd = rd, .size = rd->size, .head = head};
	ssize_t n;

	*out = (struct xf_probe){.format = XF_SRC_NONE};
	why[0] = '\0';
	if (rd->size == 0) {
		snprintf(why, whylen, XF_EMPTY_FILE);
		return XF_PROBE_TRUNCATED;
	}
	n = rd->read(rd->arg, 0, head,
	    rd->size < PROBE_HEAD ? (size_t)rd->size : PROBE_HEAD);
	if (n < 0)
		return probe_unreadable((int)n, why, whylen);
	in.hn = (size_t)n;
	return dispatch(&in, max_pixels, flags, out, why, whylen);
}

enum xf_verdict
xf_probe_mem(const uint8_t *buf, size_t len, uint64_t max_pixels,
    unsigned flags, struct xf_probe *out, char *why, size_t whylen)
{
	struct probe_in in = {.mem = buf, .size = len, .head = buf, .hn = len};

	*out = (struct xf_probe){.format = XF_SRC_NONE};
	why[0] = '\0';
	if (len == 0) {
		snprintf(why, whylen, XF_EMPTY_FILE);
		return XF_PROBE_TRUNCATED;
	}
	return dispatch(&in, max_pixels, flags, out, why, whylen);
}

enum xf_src
xf_src_kind(const uint8_t *buf, size_t len)
{
	if (xf_is_png(buf, len))
		return XF_SRC_PNG;
	if (xf_is_webp(buf, len))
		return XF_SRC_WEBP;
	return XF_SRC_JPEG;
}

const char *
xf_src_decoder_id(enum xf_src kind)
{
	switch (kind) {
	case XF_SRC_PNG:
		return xf_png_decoder_id();
	case XF_SRC_WEBP:
		return xf_webp_decoder_id();
	default:
		return NULL;
	}
}
