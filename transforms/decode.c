/*
 * decode.c - JPEG to 8-bit RGB with libjpeg(-turbo); PNG goes to png.c,
 * WebP to webp.c.  Layer: transforms/ (pixels).  The JPEG header probe,
 * whose rules the decoder applies, is beside it in jpeg_probe.c.
 *
 * The decoder settings are libjpeg's defaults (ISLOW IDCT, fancy
 * upsampling), which is what Pillow uses outside draft mode, so that a
 * full-size decode gives Pillow's pixels.  Every libjpeg warning is an
 * error here: a truncated or damaged file must not be served as an image
 * padded with grey.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "transforms/probe.h"
#include "transforms/probe_int.h"
#include "transforms/xf.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const char *
xf_decoder_id(void)
{
	/* Built against; Debian rebuilds dependents when the ABI changes. */
	return "libjpeg-turbo " STR(LIBJPEG_TURBO_VERSION_NUMBER);
}

struct decode_err {
	struct jpeg_error_mgr mgr; /* first: libjpeg casts to it */
	jmp_buf jb;
	char *err;
	size_t errlen;
};

static void
decode_error_exit(j_common_ptr cinfo)
{
	struct decode_err *de = (struct decode_err *)cinfo->err;
	char msg[JMSG_LENGTH_MAX];

	(*cinfo->err->format_message)(cinfo, msg);
	snprintf(de->err, de->errlen, "corrupt data: %s", msg);
	longjmp(de->jb, 1);
}

/* Warnings (msg_level -1) are errors; trace messages are dropped. */
static void
decode_emit_message(j_common_ptr cinfo, int msg_level)
{
	/*
	 * A warning means damaged data (a truncated file decodes to grey):
	 * refuse it, except for stray bytes before a marker, which leave the
	 * pixels intact and which Pillow accepts too (some ImageNet files
	 * have them).
	 */
	if (msg_level < 0 && cinfo->err->msg_code != JWRN_EXTRANEOUS_DATA)
		decode_error_exit(cinfo);
}

/*
 * The scan cap (XF_MAX_SCANS), as djpeg -maxscans: libjpeg calls the
 * progress monitor before each step of absorbing a multi-scan file in
 * jpeg_start_decompress, after it has counted the scan it just reached,
 * so a file is refused on reaching scan XF_MAX_SCANS + 1, before its data
 * is decoded.
 */
static void
decode_progress(j_common_ptr cinfo)
{
	struct decode_err *de = (struct decode_err *)cinfo->err;
	int n;

	if (!cinfo->is_decompressor)
		return;
	n = ((j_decompress_ptr)cinfo)->input_scan_number;
	if (n > XF_MAX_SCANS) {
		snprintf(de->err, de->errlen, "too many scans (%d > %d)", n,
		    XF_MAX_SCANS);
		longjmp(de->jb, 1);
	}
}

/*
 * Pillow's CMYK to RGB on a row libjpeg decoded as JCS_CMYK.  Pillow reads
 * every CMYK JPEG as "CMYK;I" (Adobe's inverted polarity), so its C,M,Y,K
 * are 255 minus the stored bytes, and then convert('RGB') computes
 * nk - nk * c / 255 with nk = 255 - k, rounded as MULDIV255.
 */
static void
cmyk_row_to_rgb(const uint8_t *in, uint8_t *out, uint32_t w)
{
	for (uint32_t x = 0; x < w; x++, in += 4, out += 3) {
		int nk = in[3]; /* 255 - (255 - stored k) */

		for (int c = 0; c < 3; c++) {
			int t = (255 - in[c]) * nk + 128;
			int v = nk - (((t >> 8) + t) >> 8);

			out[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
		}
	}
}

int
xf_decode(const uint8_t *jpeg, size_t len, uint32_t min_w, uint32_t min_h,
    struct xf_image *out, char *err, size_t errlen)
{
	return xf_decode_max(
	    jpeg, len, min_w, min_h, XF_DEFAULT_MAX_PIXELS, out, err, errlen);
}

/*
 * Before libjpeg: the JPEG probe's rules on the whole file (max_pixels,
 * 8-bit samples, the processes libjpeg-turbo decodes), refused in the
 * probe's words before libjpeg or we allocate anything of the image's
 * size: -EFBIG over max_pixels, -ENOTSUP for the others.  Damage the
 * probe finds is left to libjpeg, which names it (*probed false).
 */
static int
probe_rules(const uint8_t *jpeg, size_t len, uint64_t max_pixels,
    struct xf_probe *pr, bool *probed, char *err, size_t errlen)
{
	enum xf_verdict v =
	    probe_mem_as(jpeg_probe, jpeg, len, max_pixels, pr, err, errlen);

	if (v == XF_PROBE_UNSUPPORTED)
		return pr->too_large ? -EFBIG : -ENOTSUP;
	*probed = v == XF_PROBE_OK;
	return 0;
}

/*
 * After jpeg_read_header: libjpeg read the frame the probe read (a header
 * the probe refused, libjpeg refuses too: should it not, the probe's why
 * in err stands), and the output colour space is chosen from the probe's
 * components: RGB, or CMYK for the 4 of CMYK and YCCK (*cmyk), which
 * cmyk_row_to_rgb converts.  0, or -EINVAL.
 */
static int
header_checked(struct jpeg_decompress_struct *cinfo, const struct xf_probe *pr,
    bool probed, bool *cmyk, char *err, size_t errlen)
{
	if (!probed)
		return -EINVAL;
	if (pr->w != cinfo->image_width || pr->h != cinfo->image_height ||
	    pr->components != cinfo->num_components) {
		snprintf(err, errlen,
		    "corrupt data: the frame header does not read the same "
		    "twice");
		return -EINVAL;
	}
	*cmyk = pr->components == 4;
	/* grayscale, YCbCr and RGB all come out as RGB */
	cinfo->out_color_space = *cmyk ? JCS_CMYK : JCS_RGB;
	return 0;
}

int
xf_decode_max(const uint8_t *jpeg, size_t len, uint32_t min_w, uint32_t min_h,
    uint64_t max_pixels, struct xf_image *out, char *err, size_t errlen)
{
	struct jpeg_decompress_struct cinfo;
	struct decode_err de;
	struct jpeg_progress_mgr pm = {.progress_monitor = decode_progress};
	uint8_t *volatile px = NULL;
	uint8_t *volatile row = NULL;
	volatile int r = -EINVAL;
	struct xf_probe pr;
	bool cmyk, probed;
	uint32_t w, h;

	/* By magic bytes, not by name: no scaled decode for PNG. */
	if (xf_is_png(jpeg, len))
		return xf_png_decode(jpeg, len, max_pixels, out, err, errlen);
	if (xf_is_webp(jpeg, len))
		return xf_webp_decode(jpeg, len, max_pixels, out, err, errlen);
	if (!xf_is_jpeg(jpeg, len)) {
		snprintf(err, errlen, "not a JPEG");
		return -EINVAL;
	}
	if ((r = probe_rules(
		 jpeg, len, max_pixels, &pr, &probed, err, errlen)) != 0)
		return r;
	r = -EINVAL;
	memset(&cinfo, 0, sizeof(cinfo));
	cinfo.err = jpeg_std_error(&de.mgr);
	de.mgr.error_exit = decode_error_exit;
	de.mgr.emit_message = decode_emit_message;
	de.err = err;
	de.errlen = errlen;
	if (setjmp(de.jb) != 0)
		goto out;
	jpeg_create_decompress(&cinfo);
	cinfo.progress = &pm;
	jpeg_mem_src(&cinfo, jpeg, (unsigned long)len);
	jpeg_read_header(&cinfo, TRUE);
	if ((r = header_checked(&cinfo, &pr, probed, &cmyk, err, errlen)) != 0)
		goto out;
	r = -EINVAL;

	/*
	 * The smallest DCT scale M/8 that still gives min_w x min_h, of 1/8,
	 * 2/8, 4/8 and 8/8 only: libjpeg-turbo's other scaled IDCTs have no
	 * SIMD and decode no faster, and stray further from Pillow (measured
	 * on the bench dataset with resize(256): 2.26 vs 2.31-2.36 ms an
	 * image, mean |diff| 0.016 vs 0.092 levels).
	 */
	cinfo.scale_denom = 8;
	cinfo.scale_num = 8;
	if (min_w > 0 || min_h > 0) {
		for (unsigned int num = 1; num < 8; num *= 2) {
			cinfo.scale_num = num;
			jpeg_calc_output_dimensions(&cinfo);
			if (cinfo.output_width >= min_w &&
			    cinfo.output_height >= min_h)
				break;
			cinfo.scale_num = 8;
		}
	}

	jpeg_start_decompress(&cinfo);
	w = cinfo.output_width;
	h = cinfo.output_height;
	if (w == 0 || h == 0) {
		snprintf(err, errlen, "corrupt data: empty image");
		goto out;
	}
	if ((px = xf_alloc((size_t)w * h * 3)) == NULL ||
	    (cmyk && (row = xf_alloc((size_t)w * 4)) == NULL)) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto out;
	}
	/* Straight into the output, a few rows per call. */
	while (cinfo.output_scanline < h) {
		JSAMPROW rows[4];
		uint32_t y = cinfo.output_scanline, n;

		if (cmyk) {
			rows[0] = row;
			if (jpeg_read_scanlines(&cinfo, rows, 1) != 1)
				break;
			cmyk_row_to_rgb(row, px + (size_t)y * w * 3, w);
			continue;
		}
		n = h - y < 4 ? h - y : 4;
		for (uint32_t i = 0; i < n; i++)
			rows[i] = px + (size_t)(y + i) * w * 3;
		if (jpeg_read_scanlines(&cinfo, rows, n) == 0)
			break;
	}
	if (cinfo.output_scanline < h) {
		snprintf(err, errlen, "corrupt data: image ends early");
		goto out;
	}
	jpeg_finish_decompress(&cinfo);
	out->w = w;
	out->h = h;
	out->px = px; /* transferred */
	out->borrowed = false;
	px = NULL;
	r = 0;
out:
	jpeg_destroy_decompress(&cinfo);
	xf_free(row);
	xf_free(px);
	return r;
}

/* Pixels of context decoded around a box (see xf_decode_box). */
#define CTX 16

/*
 * The box at the decode scale, and the whole pixels [rx0,rx1) x [ry0,ry1)
 * (rw x rh) that cover it.
 */
struct box_region {
	double x0, y0, x1, y1;
	uint32_t rx0, ry0, rx1, ry1, rw, rh;
};

/*
 * The smallest scale M/8 at which the box cw x ch of an iw x ih image
 * still gives tw x th, into cinfo.  Only 1/8, 2/8, 4/8 and 8/8:
 * libjpeg-turbo's other scaled IDCTs have no SIMD, so that 3/8 or 6/8
 * decode no faster than 4/8 or 8/8 and stray further from a full decode
 * (measured on the bench dataset: 1.66 ms vs 1.60 ms per image, mean
 * |diff| 0.68 vs 0.12).
 */
static void
box_scale(struct jpeg_decompress_struct *cinfo, uint32_t iw, uint32_t ih,
    uint32_t cw, uint32_t ch, uint32_t tw, uint32_t th)
{
	cinfo->scale_denom = 8;
	for (unsigned int num = 1; num <= 8; num *= 2) {
		cinfo->scale_num = num;
		jpeg_calc_output_dimensions(cinfo);
		if ((double)cw * cinfo->output_width / iw >= tw &&
		    (double)ch * cinfo->output_height / ih >= th)
			break;
	}
}

/*
 * The box x, y, cw x ch at scale num/8 of a W x H output.  Scaled block b
 * covers full-size block b: the scale is M/8 (W is rounded up from iw *
 * M/8).
 */
static void
box_region(uint32_t x, uint32_t y, uint32_t cw, uint32_t ch, unsigned num,
    uint32_t W, uint32_t H, struct box_region *rg)
{
	double sx, sy;

	sx = sy = num / 8.0;
	rg->x0 = x * sx;
	rg->x1 = (double)(x + cw) * sx;
	rg->y0 = y * sy;
	rg->y1 = (double)(y + ch) * sy;
	rg->rx0 = (uint32_t)rg->x0;
	rg->ry0 = (uint32_t)rg->y0;
	rg->rx1 = (uint32_t)ceil(rg->x1);
	rg->ry1 = (uint32_t)ceil(rg->y1);
	if (rg->rx1 > W)
		rg->rx1 = W;
	if (rg->ry1 > H)
		rg->ry1 = H;
	rg->rw = rg->rx1 - rg->rx0;
	rg->rh = rg->ry1 - rg->ry0;
}

/*
 * Crop the columns decoded to those around the region: libjpeg widens
 * them to whole iMCUs (the first column decoded, returned, is <= rx0).
 * Asked for CTX more pixels on each side, so that the box's edges get the
 * same chroma upsampling context as in a full decode, not that of an
 * image edge.
 */
static JDIMENSION
box_crop(struct jpeg_decompress_struct *cinfo, const struct box_region *rg,
    uint32_t W)
{
	uint32_t cx0 = rg->rx0 > CTX ? rg->rx0 - CTX : 0;
	uint32_t cx1 = rg->rx1 + CTX < W ? rg->rx1 + CTX : W;
	JDIMENSION xoff = cx0, cwid = cx1 - cx0;

	if (cwid < W)
		jpeg_crop_scanline(cinfo, &xoff, &cwid);
	else
		xoff = 0;
	return xoff;
}

/*
 * Decode the rows of the region (and CTX rows above it) into px (rw x rh
 * RGB), through row (a cropped output row starting at column xoff; CMYK
 * when cmyk).  0, or -EINVAL with a message when the image ends early.
 */
static int
box_rows(struct jpeg_decompress_struct *cinfo, const struct box_region *rg,
    JDIMENSION xoff, bool cmyk, uint8_t *row, uint8_t *px, char *err,
    size_t errlen)
{
	uint32_t skip = rg->ry0 > CTX ? rg->ry0 - CTX : 0;

	if (skip > 0 && jpeg_skip_scanlines(cinfo, skip) != skip) {
		snprintf(err, errlen, "corrupt data: image ends early");
		return -EINVAL;
	}
	for (uint32_t yy = cinfo->output_scanline; yy < rg->ry1; yy++) {
		JSAMPROW rows[1] = {row};
		uint8_t *d = px + (size_t)(yy - rg->ry0) * rg->rw * 3;

		if (jpeg_read_scanlines(cinfo, rows, 1) != 1) {
			snprintf(err, errlen, "corrupt data: image ends early");
			return -EINVAL;
		}
		if (yy < rg->ry0)
			continue;
		if (cmyk)
			cmyk_row_to_rgb(
			    row + (size_t)(rg->rx0 - xoff) * 4, d, rg->rw);
		else
			memcpy(d, row + (size_t)(rg->rx0 - xoff) * 3,
			    (size_t)rg->rw * 3);
	}
	return 0;
}

/* The box in the region's pixels, clamped to them. */
static void
box_in_region(const struct box_region *rg, float box[4])
{
	box[0] = (float)(rg->x0 - rg->rx0);
	box[1] = (float)(rg->y0 - rg->ry0);
	box[2] = (float)(rg->x1 - rg->rx0);
	box[3] = (float)(rg->y1 - rg->ry0);
	if (box[2] > (float)rg->rw)
		box[2] = (float)rg->rw;
	if (box[3] > (float)rg->rh)
		box[3] = (float)rg->rh;
}

int
xf_decode_box(const uint8_t *jpeg, size_t len, uint64_t max_pixels, uint32_t x,
    uint32_t y, uint32_t cw, uint32_t ch, uint32_t tw, uint32_t th,
    struct xf_image *out, float box[4], char *err, size_t errlen)
{
	struct jpeg_decompress_struct cinfo;
	struct decode_err de;
	struct jpeg_progress_mgr pm = {.progress_monitor = decode_progress};
	uint8_t *volatile px = NULL;
	uint8_t *volatile row = NULL;
	volatile int r = -EINVAL;
	struct box_region rg;
	struct xf_probe pr;
	JDIMENSION xoff;
	uint32_t iw, ih, W, H, bpp;
	bool cmyk, probed;

	if (!xf_is_jpeg(jpeg, len)) {
		snprintf(err, errlen, "not a JPEG");
		return -EINVAL;
	}
	if ((r = probe_rules(
		 jpeg, len, max_pixels, &pr, &probed, err, errlen)) != 0)
		return r;
	r = -EINVAL;
	memset(&cinfo, 0, sizeof(cinfo));
	cinfo.err = jpeg_std_error(&de.mgr);
	de.mgr.error_exit = decode_error_exit;
	de.mgr.emit_message = decode_emit_message;
	de.err = err;
	de.errlen = errlen;
	if (setjmp(de.jb) != 0)
		goto out;
	jpeg_create_decompress(&cinfo);
	cinfo.progress = &pm;
	jpeg_mem_src(&cinfo, jpeg, (unsigned long)len);
	jpeg_read_header(&cinfo, TRUE);
	iw = cinfo.image_width;
	ih = cinfo.image_height;
	if ((r = header_checked(&cinfo, &pr, probed, &cmyk, err, errlen)) != 0)
		goto out;
	r = -EINVAL;
	if (cw == 0 || ch == 0 || x > iw || cw > iw - x || y > ih ||
	    ch > ih - y) {
		snprintf(err, errlen, "crop box outside the image");
		goto out;
	}
	bpp = cmyk ? 4 : 3;
	box_scale(&cinfo, iw, ih, cw, ch, tw, th);
	jpeg_start_decompress(&cinfo);
	W = cinfo.output_width;
	H = cinfo.output_height;
	if (W == 0 || H == 0) {
		snprintf(err, errlen, "corrupt data: empty image");
		goto out;
	}
	box_region(x, y, cw, ch, cinfo.scale_num, W, H, &rg);
	xoff = box_crop(&cinfo, &rg, W);
	if ((px = xf_alloc((size_t)rg.rw * rg.rh * 3)) == NULL ||
	    (row = xf_alloc((size_t)cinfo.output_width * bpp)) == NULL) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto out;
	}
	if ((r = box_rows(&cinfo, &rg, xoff, cmyk, row, px, err, errlen)) != 0)
		goto out;
	/* The rows below the box are not decoded. */
	jpeg_abort_decompress(&cinfo);
	out->w = rg.rw;
	out->h = rg.rh;
	out->px = px; /* transferred */
	out->borrowed = false;
	px = NULL;
	box_in_region(&rg, box);
	r = 0;
out:
	jpeg_destroy_decompress(&cinfo);
	xf_free(row);
	xf_free(px);
	return r;
}
