/*
 * webp.c - WebP to 8-bit RGB with libwebp (issue 26).  Layer:
 * transforms (transforms/).
 *
 * The conversion is PIL's convert("RGB") of a WebP: PIL decodes a still
 * WebP with libwebp's defaults (fancy upsampling, no dithering) to RGBA or
 * RGBX, and convert("RGB") drops alpha without compositing; libwebp's
 * MODE_RGB output is those same colour bytes with alpha left out, lossy and
 * lossless alike.  The header is read first (WebPGetFeatures), and an image
 * over max_pixels is refused before anything of its size is allocated; the
 * pixels are then decoded straight into a buffer from xf_alloc (the
 * worker's arena), as a JPEG's are.  libwebp is given the whole file
 * (have_all_data): a file cut short is refused ("not enough data"), never
 * served half-decoded.  Animated WebP is refused (PIL would give its
 * first frame composited on the canvas; a training set of stills has
 * none).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <webp/decode.h>

#include "transforms/xf.h"

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

int
xf_webp_info(const uint8_t *buf, size_t len, uint32_t *w, uint32_t *h,
    char *err, size_t errlen)
{
	WebPBitstreamFeatures f;
	VP8StatusCode st;

	if (!xf_is_webp(buf, len)) {
		snprintf(err, errlen, "not a WebP");
		return -EINVAL;
	}
	if ((st = WebPGetFeatures(buf, len, &f)) != VP8_STATUS_OK) {
		snprintf(err, errlen, "corrupt WebP: %s", webp_status(st));
		return -EINVAL;
	}
	if (f.has_animation) {
		snprintf(err, errlen, "animated WebP is not supported");
		return -ENOTSUP;
	}
	if (f.width <= 0 || f.height <= 0) {
		snprintf(err, errlen, "corrupt WebP: empty image");
		return -EINVAL;
	}
	*w = (uint32_t)f.width;
	*h = (uint32_t)f.height;
	return 0;
}

int
xf_webp_decode(const uint8_t *buf, size_t len, uint64_t max_pixels,
    struct xf_image *out, char *err, size_t errlen)
{
	WebPDecoderConfig cfg;
	VP8StatusCode st;
	uint8_t *px;
	uint32_t w, h;
	size_t n;
	int r;

	if ((r = xf_webp_info(buf, len, &w, &h, err, errlen)) != 0)
		return r;
	/* Before anything of the image's size is allocated. */
	if (max_pixels > 0 && (uint64_t)w * h > max_pixels) {
		snprintf(err, errlen,
		    "image too large: %ux%u is more than max_pixels (%llu)",
		    (unsigned)w, (unsigned)h, (unsigned long long)max_pixels);
		return -EFBIG;
	}
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
	return 0;
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
