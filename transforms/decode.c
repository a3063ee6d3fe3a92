/*
 * decode.c - JPEG to 8-bit RGB with libjpeg(-turbo).
 *
 * The decoder settings are libjpeg's defaults (ISLOW IDCT, fancy
 * upsampling), which is what Pillow uses outside draft mode, so that a
 * full-size decode gives Pillow's pixels.  Every libjpeg warning is an
 * error here: a truncated or damaged file must not be served as an image
 * padded with grey.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "transforms/xf.h"

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
	struct jpeg_decompress_struct cinfo;
	struct decode_err de;
	uint8_t *volatile px = NULL;
	uint8_t *volatile row = NULL;
	volatile int r = -EINVAL;
	bool cmyk;
	uint32_t w, h;

	if (len < 3 || jpeg[0] != 0xff || jpeg[1] != 0xd8 || jpeg[2] != 0xff) {
		snprintf(err, errlen, "not a JPEG");
		return -EINVAL;
	}
	memset(&cinfo, 0, sizeof(cinfo));
	cinfo.err = jpeg_std_error(&de.mgr);
	de.mgr.error_exit = decode_error_exit;
	de.mgr.emit_message = decode_emit_message;
	de.err = err;
	de.errlen = errlen;
	if (setjmp(de.jb) != 0)
		goto out;
	jpeg_create_decompress(&cinfo);
	jpeg_mem_src(&cinfo, jpeg, (unsigned long)len);
	jpeg_read_header(&cinfo, TRUE);

	switch (cinfo.jpeg_color_space) {
	case JCS_CMYK:
	case JCS_YCCK:
		cinfo.out_color_space = JCS_CMYK;
		cmyk = true;
		break;
	default: /* grayscale, YCbCr, RGB */
		cinfo.out_color_space = JCS_RGB;
		cmyk = false;
		break;
	}

	/* The smallest DCT scale M/8 that still gives min_w x min_h. */
	cinfo.scale_denom = 8;
	cinfo.scale_num = 8;
	if (min_w > 0 || min_h > 0) {
		for (unsigned int num = 1; num < 8; num++) {
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
	if ((px = malloc((size_t)w * h * 3)) == NULL ||
	    (cmyk && (row = malloc((size_t)w * 4)) == NULL)) {
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
	px = NULL;
	r = 0;
out:
	jpeg_destroy_decompress(&cinfo);
	free(row);
	free(px);
	return r;
}
