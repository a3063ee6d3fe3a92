/*
 * webp.c - WebP to 8-bit RGB with libwebp (issue 26), and the WebP header
 * probe (see probe.h).  Layer: transforms/ (pixels).
 *
 * The conversion is PIL's convert("RGB") of a WebP: PIL decodes a still
 * WebP with libwebp's defaults (fancy upsampling, no dithering) to RGBA or
 * RGBX, and convert("RGB") drops alpha without compositing; libwebp's
 * MODE_RGB output is those same colour bytes with alpha left out, lossy and
 * lossless alike.  The header is probed first (WebPGetFeatures), and an
 * image over max_pixels is refused before anything of its size is
 * allocated; the pixels are then decoded straight into a buffer from
 * xf_alloc (the worker's arena), as a JPEG's are.  libwebp is given the
 * whole file (have_all_data): a file cut short is refused ("not enough
 * data"), never served half-decoded.  Animated WebP is refused (PIL would
 * give its first frame composited on the canvas; a training set of stills
 * has none).
 */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>

#include "transforms/probe.h"
#include "transforms/probe_int.h"
#include "transforms/xf.h"

/* The most the probe reads of a file whose headers lie past its first
 * window: the mount's bound on a sample (core/sample.c). */
#define WEBP_PROBE_MAX_FILE (512u << 20)

static char webp_id[32];
static pthread_once_t webp_id_once = PTHREAD_ONCE_INIT;

static void
webp_id_init(void)
{
	int v = WebPGetDecoderVersion();

	snprintf(webp_id, sizeof(webp_id), "libwebp %d.%d.%d", (v >> 16) & 0xff,
	    (v >> 8) & 0xff, v & 0xff);
}

const char *
xf_webp_decoder_id(void)
{
	pthread_once(&webp_id_once, webp_id_init);
	return webp_id;
}

bool
xf_is_webp(const uint8_t *buf, size_t len)
{
	return len >= 12 && memcmp(buf, "RIFF", 4) == 0 &&
	       memcmp(buf + 8, "WEBP", 4) == 0;
}

/* libwebp's status in words. */
static const char *
webp_status(VP8StatusCode st)
{
	switch (st) {
	case VP8_STATUS_OUT_OF_MEMORY:
		return "out of memory";
	case VP8_STATUS_INVALID_PARAM:
		return "invalid parameter";
	case VP8_STATUS_BITSTREAM_ERROR:
		return "bitstream error";
	case VP8_STATUS_UNSUPPORTED_FEATURE:
		return "unsupported feature";
	case VP8_STATUS_SUSPENDED:
		return "suspended";
	case VP8_STATUS_USER_ABORT:
		return "aborted";
	case VP8_STATUS_NOT_ENOUGH_DATA:
		return "not enough data (truncated file)";
	default:
		return "error";
	}
}

/* The features of the len bytes at buf into out: 0, -EINVAL or -ENOTSUP. */
static int
features(const uint8_t *buf, size_t len, struct xf_probe *out, char *why,
    size_t whylen)
{
	WebPBitstreamFeatures f;
	VP8StatusCode st;

	if ((st = WebPGetFeatures(buf, len, &f)) != VP8_STATUS_OK) {
		snprintf(why, whylen, "corrupt WebP: %s", webp_status(st));
		return -EINVAL;
	}
	if (f.has_animation) {
		snprintf(why, whylen, "animated WebP is not supported");
		return -ENOTSUP;
	}
	if (f.width <= 0 || f.height <= 0) {
		snprintf(why, whylen, "corrupt WebP: empty image");
		return -EINVAL;
	}
	out->w = (uint32_t)f.width;
	out->h = (uint32_t)f.height;
	out->components = f.has_alpha ? 4 : 3;
	out->depth = 8;
	out->lossless = f.format == 2;
	return 0;
}

/*
 * The WebP probe: with XF_PROBE_END the RIFF header's size against the
 * file's first, then libwebp's WebPGetFeatures on the first
 * XF_PROBE_WINDOW bytes (or, when the headers lie past them, on the whole
 * file up to WEBP_PROBE_MAX_FILE), then max_pixels.
 */
enum xf_verdict
webp_probe(const struct probe_in *in, uint64_t max_pixels, unsigned flags,
    struct xf_probe *out, char *why, size_t len)
{
	uint64_t riff = (uint64_t)probe_le32(in->head + 4) + 8;
	size_t wn =
	    in->size < XF_PROBE_WINDOW ? (size_t)in->size : XF_PROBE_WINDOW;
	uint8_t *all;
	const uint8_t *p;
	ssize_t n;
	int e;

	out->format = XF_SRC_WEBP;
	if ((flags & XF_PROBE_END) && riff > in->size) {
		snprintf(why, len,
		    "WebP cut short: its RIFF header says %" PRIu64
		    " bytes, the file has %" PRIu64,
		    riff, in->size);
		return XF_PROBE_TRUNCATED;
	}
	if (in->mem != NULL)
		e = features(in->mem, (size_t)in->size, out, why, len);
	else {
		if ((all = malloc(wn)) == NULL)
			return probe_unreadable(-ENOMEM, why, len);
		if ((n = probe_at(in, 0, wn, all, &p)) < 0) {
			free(all);
			return probe_unreadable((int)n, why, len);
		}
		e = features(p, (size_t)n, out, why, len);
		free(all);
	}
	/* Headers past the window (large metadata first): the whole file. */
	if (e == -EINVAL && in->mem == NULL && wn < in->size &&
	    in->size <= WEBP_PROBE_MAX_FILE &&
	    (all = malloc((size_t)in->size)) != NULL) {
		n = probe_at(in, 0, (size_t)in->size, all, &p);
		e = n == (ssize_t)in->size
			? features(p, (size_t)n, out, why, len)
			: -EIO;
		free(all);
	}
	if (e == -ENOTSUP)
		return XF_PROBE_UNSUPPORTED;
	if (e != 0)
		return XF_PROBE_CORRUPT;
	if (xf_pixels_allowed(out->w, out->h, max_pixels, why, len) != 0) {
		out->too_large = true;
		return XF_PROBE_UNSUPPORTED;
	}
	return XF_PROBE_OK;
}

int
xf_webp_decode(const uint8_t *buf, size_t len, uint64_t max_pixels,
    struct xf_image *out, char *err, size_t errlen)
{
	WebPDecoderConfig cfg;
	VP8StatusCode st;
	struct xf_probe pr;
	enum xf_verdict v;
	uint8_t *px;
	uint32_t w, h;
	size_t n;

	if (!xf_is_webp(buf, len)) {
		snprintf(err, errlen, "not a WebP");
		return -EINVAL;
	}
	/* The probe's rules (still images, max_pixels), before anything of
	 * the image's size is allocated. */
	v = probe_mem_as(webp_probe, buf, len, max_pixels, &pr, err, errlen);
	if (v == XF_PROBE_UNSUPPORTED)
		return pr.too_large ? -EFBIG : -ENOTSUP;
	if (v != XF_PROBE_OK)
		return -EINVAL;
	w = pr.w;
	h = pr.h;
	if (!WebPInitDecoderConfig(&cfg)) {
		snprintf(err, errlen, "libwebp version mismatch");
		return -EINVAL;
	}
	n = (size_t)w * h * 3;
	if ((px = xf_alloc(n)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	cfg.output.colorspace = MODE_RGB;
	cfg.output.is_external_memory = 1;
	cfg.output.width = (int)w;
	cfg.output.height = (int)h;
	cfg.output.u.RGBA.rgba = px;
	cfg.output.u.RGBA.stride = (int)w * 3;
	cfg.output.u.RGBA.size = n;
	st = WebPDecode(buf, len, &cfg);
	WebPFreeDecBuffer(&cfg.output); /* external: frees nothing of px */
	if (st != VP8_STATUS_OK) {
		xf_free(px);
		snprintf(err, errlen, "corrupt WebP: %s", webp_status(st));
		return st == VP8_STATUS_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
	}
	out->w = w;
	out->h = h;
	out->px = px; /* transferred */
	out->borrowed = false;
	return 0;
}
