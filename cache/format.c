/*
 * format.c - cache/ (the store), layer codec (beside codec.c): raw,
 * lossless (row filter + zstd) and jpeg(Q) prefix images (see format.h).
 */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jpeglib.h>
#include <zstd.h>

#include "cache/format.h"

int
cache_fmt_parse(const char *s, uint32_t *enc)
{
	char *end;
	long q;

	if (strcasecmp(s, "raw") == 0) {
		*enc = CACHE_FMT_ENC(CACHE_FMT_RAW, 0);
		return 0;
	}
	if (strcasecmp(s, "lossless") == 0) {
		*enc = CACHE_FMT_ENC(CACHE_FMT_LOSSLESS, 0);
		return 0;
	}
	if (strncasecmp(s, "jpeg(", 5) != 0 || !isdigit((unsigned char)s[5]))
		return -EINVAL;
	errno = 0;
	q = strtol(s + 5, &end, 10);
	if (errno != 0 || strcmp(end, ")") != 0 || q < 1 || q > 100)
		return -EINVAL;
	*enc = CACHE_FMT_ENC(CACHE_FMT_JPEG, q);
	return 0;
}

void
cache_fmt_name(uint32_t enc, char *buf, size_t len)
{
	switch (CACHE_FMT_OF(enc)) {
	case CACHE_FMT_RAW:
		snprintf(buf, len, "raw");
		break;
	case CACHE_FMT_LOSSLESS:
		snprintf(buf, len, "lossless");
		break;
	case CACHE_FMT_JPEG:
		snprintf(buf, len, "jpeg(%d)", CACHE_FMT_Q(enc));
		break;
	default:
		snprintf(buf, len, "?");
	}
}

void
cache_fmt_suffix(uint32_t enc, char *buf, size_t len)
{
	char name[32];

	if (CACHE_FMT_OF(enc) == CACHE_FMT_RAW) {
		if (len > 0)
			buf[0] = '\0';
		return;
	}
	cache_fmt_name(enc, name, sizeof(name));
	snprintf(buf, len, "|format=%s", name);
}

/* w * h * 3, or 0 when it wraps or is empty. */
static size_t
image_bytes(uint32_t w, uint32_t h)
{
	size_t n;

	if (w == 0 || h == 0 ||
	    __builtin_mul_overflow((size_t)w, (size_t)h, &n) ||
	    __builtin_mul_overflow(n, (size_t)3, &n))
		return 0;
	return n;
}

/* ---- lossless ---------------------------------------------------------- */

static int
zstd_encode(uint32_t w, uint32_t h, const uint8_t *px, size_t n,
    uint8_t **out, size_t *outlen)
{
	size_t row = (size_t)w * 3, cap = ZSTD_compressBound(n), z;
	uint8_t *f = malloc(n), *o = malloc(cap ? cap : 1);

	if (f == NULL || o == NULL) {
		free(f);
		free(o);
		return -ENOMEM;
	}
	for (size_t y = 0; y < h; y++) {
		const uint8_t *s = px + y * row;
		uint8_t *d = f + y * row;

		memcpy(d, s, 3);
		for (size_t x = 3; x < row; x++)
			d[x] = (uint8_t)(s[x] - s[x - 3]);
	}
	z = ZSTD_compress(o, cap, f, n, CACHE_FMT_ZSTD_LEVEL);
	free(f);
	if (ZSTD_isError(z)) {
		free(o);
		return -EINVAL;
	}
	*out = o; /* transferred */
	*outlen = z;
	return 0;
}

static int
zstd_decode(uint32_t w, uint32_t h, const uint8_t *in, size_t len, size_t n,
    uint8_t **px)
{
	size_t row = (size_t)w * 3, z;
	uint8_t *p = malloc(n);

	if (p == NULL)
		return -ENOMEM;
	z = ZSTD_decompress(p, n, in, len);
	if (ZSTD_isError(z) || z != n) {
		free(p);
		return -EINVAL;
	}
	for (size_t y = 0; y < h; y++) {
		uint8_t *d = p + y * row;

		for (size_t x = 3; x < row; x++)
			d[x] = (uint8_t)(d[x] + d[x - 3]);
	}
	*px = p;
	return 0;
}

/* ---- jpeg -------------------------------------------------------------- */

struct jerr {
	struct jpeg_error_mgr mgr;
	jmp_buf jb;
};

static void
jerr_exit(j_common_ptr cinfo)
{
	longjmp(((struct jerr *)(void *)cinfo->err)->jb, 1);
}

/* Warnings are damage too: a value must decode cleanly. */
static void
jerr_emit(j_common_ptr cinfo, int level)
{
	if (level < 0)
		jerr_exit(cinfo);
}

static int
jpeg_encode(uint32_t w, uint32_t h, int q, const uint8_t *px, uint8_t **out,
    size_t *outlen)
{
	struct jpeg_compress_struct ci;
	struct jerr je;
	unsigned char *volatile mem = NULL;
	unsigned long msize = 0;
	uint8_t *o;

	if (w > JPEG_MAX_DIMENSION || h > JPEG_MAX_DIMENSION)
		return -EINVAL;
	ci.err = jpeg_std_error(&je.mgr);
	je.mgr.error_exit = jerr_exit;
	je.mgr.emit_message = jerr_emit;
	if (setjmp(je.jb) != 0) {
		jpeg_destroy_compress(&ci);
		free(mem);
		return -EINVAL;
	}
	jpeg_create_compress(&ci);
	jpeg_mem_dest(&ci, (unsigned char **)&mem, &msize);
	ci.image_width = w;
	ci.image_height = h;
	ci.input_components = 3;
	ci.in_color_space = JCS_RGB;
	jpeg_set_defaults(&ci);
	jpeg_set_quality(&ci, q, TRUE);
	ci.dct_method = JDCT_ISLOW;
	for (int i = 0; i < ci.num_components; i++) {
		ci.comp_info[i].h_samp_factor = 1; /* 4:4:4 */
		ci.comp_info[i].v_samp_factor = 1;
	}
	jpeg_start_compress(&ci, TRUE);
	while (ci.next_scanline < ci.image_height) {
		JSAMPROW row =
		    (JSAMPROW)(px + (size_t)ci.next_scanline * w * 3);

		jpeg_write_scanlines(&ci, &row, 1);
	}
	jpeg_finish_compress(&ci);
	jpeg_destroy_compress(&ci);
	/* jpeg_mem_dest's buffer is malloc'd: copy to the exact size. */
	if ((o = malloc(msize ? msize : 1)) == NULL) {
		free(mem);
		return -ENOMEM;
	}
	memcpy(o, mem, msize);
	free(mem);
	*out = o;
	*outlen = msize;
	return 0;
}

static int
jpeg_decode(uint32_t w, uint32_t h, const uint8_t *in, size_t len, size_t n,
    uint8_t **px)
{
	struct jpeg_decompress_struct ci;
	struct jerr je;
	uint8_t *volatile p = NULL;

	ci.err = jpeg_std_error(&je.mgr);
	je.mgr.error_exit = jerr_exit;
	je.mgr.emit_message = jerr_emit;
	if (setjmp(je.jb) != 0) {
		jpeg_destroy_decompress(&ci);
		free(p);
		return -EINVAL;
	}
	jpeg_create_decompress(&ci);
	jpeg_mem_src(&ci, in, (unsigned long)len);
	if (jpeg_read_header(&ci, TRUE) != JPEG_HEADER_OK ||
	    ci.image_width != w || ci.image_height != h ||
	    ci.num_components != 3) {
		jpeg_destroy_decompress(&ci);
		return -EINVAL;
	}
	ci.out_color_space = JCS_RGB;
	ci.dct_method = JDCT_ISLOW;
	if ((p = malloc(n)) == NULL) {
		jpeg_destroy_decompress(&ci);
		return -ENOMEM;
	}
	jpeg_start_decompress(&ci);
	while (ci.output_scanline < ci.output_height) {
		JSAMPROW row = (JSAMPROW)(p + (size_t)ci.output_scanline * w * 3);

		jpeg_read_scanlines(&ci, &row, 1);
	}
	jpeg_finish_decompress(&ci);
	jpeg_destroy_decompress(&ci);
	*px = p;
	return 0;
}

int
cache_fmt_encode(uint32_t enc, uint32_t w, uint32_t h, const uint8_t *px,
    uint8_t **out, size_t *outlen)
{
	size_t n = image_bytes(w, h);
	uint8_t *o;

	if (n == 0)
		return -EINVAL;
	switch (CACHE_FMT_OF(enc)) {
	case CACHE_FMT_RAW:
		if ((o = malloc(n)) == NULL)
			return -ENOMEM;
		memcpy(o, px, n);
		*out = o;
		*outlen = n;
		return 0;
	case CACHE_FMT_LOSSLESS:
		return zstd_encode(w, h, px, n, out, outlen);
	case CACHE_FMT_JPEG:
		if (CACHE_FMT_Q(enc) < 1 || CACHE_FMT_Q(enc) > 100)
			return -EINVAL;
		return jpeg_encode(w, h, CACHE_FMT_Q(enc), px, out, outlen);
	}
	return -EINVAL;
}

int
cache_fmt_decode(uint32_t enc, uint32_t w, uint32_t h, const uint8_t *in,
    size_t len, uint8_t **px)
{
	size_t n = image_bytes(w, h);
	uint8_t *p;

	if (n == 0)
		return -EINVAL;
	switch (CACHE_FMT_OF(enc)) {
	case CACHE_FMT_RAW:
		if (len != n)
			return -EINVAL;
		if ((p = malloc(n)) == NULL)
			return -ENOMEM;
		memcpy(p, in, n);
		*px = p;
		return 0;
	case CACHE_FMT_LOSSLESS:
		return zstd_decode(w, h, in, len, n, px);
	case CACHE_FMT_JPEG:
		return jpeg_decode(w, h, in, len, n, px);
	}
	return -EINVAL;
}

int
cache_fmt_encode_served(uint32_t enc, uint32_t w, uint32_t h, const uint8_t *px,
    uint8_t **out, size_t *outlen, uint8_t **served)
{
	uint8_t *o = NULL, *d = NULL;
	size_t olen = 0;
	int r;

	if ((r = cache_fmt_encode(enc, w, h, px, &o, &olen)) != 0)
		return r;
	/* Decoded from the bytes that are stored: what every hit gives. */
	if (cache_fmt_lossy(enc) &&
	    (r = cache_fmt_decode(enc, w, h, o, olen, &d)) != 0) {
		free(o);
		return r;
	}
	*out = o; /* transferred */
	*outlen = olen;
	*served = d; /* transferred */
	return 0;
}
