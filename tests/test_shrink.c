/*
 * test_shrink - issue 36's ops in the transforms library: shrink(S)
 * (Pillow's Lanczos resize of the short side to S when it is longer,
 * never an enlargement, the source's size kept as the image's frame),
 * random_resized_crop drawing its box in that frame, decode (Pillow's full
 * decode) against decode(scaled) (DCT-scaled where the next op shrinks),
 * the Lanczos passes (AVX2 equal to the portable loops), and the rules of
 * a pipeline with shrink.  test_xf_ref.py compares the same ops with PIL
 * and torchvision.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "tests/testlib.h"
#include "transforms/xf.h"
#include "tests/xftest.h"

static void
check_prefix(const char *text, const char *want)
{
	struct xf_pipeline *pl = parse_ok(text);
	char buf[256];

	if (pl == NULL)
		return;
	CHECK_EQ_INT(xf_prefix_text(pl, buf, sizeof(buf)), strlen(want));
	CHECK_EQ_STR(buf, want);
	xf_pipeline_free(pl);
}

static void
test_parse(void)
{
	struct xf_pipeline *pl;

	pl = parse_ok("decode(scaled) shrink(512) cache "
		      "random_resized_crop(224) flip(0.5) normalize(imagenet)");
	if (pl != NULL) {
		CHECK(pl->ops[0].kind == XF_OP_DECODE && pl->ops[0].scaled);
		CHECK(pl->ops[1].kind == XF_OP_SHRINK && pl->ops[1].w == 512);
		CHECK(pl->cache_at == 2 && pl->out_w == 224 && pl->size_at == 3);
		xf_pipeline_free(pl);
	}
	pl = parse_ok("decode(exact) resize(256) center_crop(224)");
	if (pl != NULL) {
		CHECK(!pl->ops[0].scaled);
		xf_pipeline_free(pl);
	}
	/* The canonical texts: the plain decode is "decode" either way. */
	check_prefix("decode(scaled) shrink(512) cache random_resized_crop(8)",
	    "decode(scaled) shrink(512)");
	check_prefix("decode(exact) shrink( 300 ) cache random_resized_crop(8)",
	    "decode shrink(300)");
	check_prefix("decode resize(256) center_crop(224) cache",
	    "decode resize(256) center_crop(224,224)");
	/* Allowed after shrink: cache, flip and normalize before the crop,
	 * anything after it. */
	xf_pipeline_free(parse_ok("decode shrink(64) cache flip(0.5) "
				  "random_resized_crop(32) center_crop(16) "
				  "color_jitter(0.4) normalize(imagenet)"));
	xf_pipeline_free(parse_ok("decode shrink(64) normalize(imagenet) "
				  "cache flip(0.5) random_resized_crop(32)"));
	xf_pipeline_free(parse_ok("decode shrink(64) random_resized_crop(32)"));

	parse_bad("decode(fast) center_crop(4)",
	    "decode: unknown argument \"fast\" (expected exact, the default, "
	    "or scaled)");
	parse_bad("decode(scaled,exact) center_crop(4)",
	    "expected no argument, or exact or scaled, got 2");
	parse_bad("decode shrink random_resized_crop(4)", "1 argument");
	parse_bad("decode shrink(1,2) random_resized_crop(4)", "1 argument");
	parse_bad("decode shrink(0) random_resized_crop(4)", "not a size");
	parse_bad("decode shrink(x) random_resized_crop(4)", "not a size");
	/* Right after decode. */
	parse_bad("decode resize(600) shrink(512) cache "
		  "random_resized_crop(224)",
	    "shrink after resize: shrink must come right after decode");
	parse_bad("decode cache shrink(512) random_resized_crop(224)",
	    "shrink after cache");
	parse_bad("decode shrink(512) shrink(256) cache "
		  "random_resized_crop(224)",
	    "shrink after shrink");
	parse_bad("decode random_resized_crop(224) shrink(512)",
	    "shrink after random_resized_crop");
	/* Until the crop only cache and flip. */
	parse_bad("decode shrink(512) cache center_crop(224)",
	    "center_crop after shrink: until random_resized_crop only cache "
	    "and flip may follow shrink");
	parse_bad("decode shrink(512) resize(256) cache "
		  "random_resized_crop(224)",
	    "resize after shrink");
	parse_bad("decode shrink(512) cache gaussian_blur(3, 0.1, 2) "
		  "random_resized_crop(224)",
	    "gaussian_blur after shrink");
	/* shrink keeps the aspect: no fixed output size of its own. */
	parse_bad("decode shrink(512)", "not fixed");
	parse_bad("decode shrink(512) cache flip(0.5)", "not fixed");
}

/* A w x h RGB JPEG of a pattern with detail at every scale (q 95). */
static uint8_t *
make_jpeg(uint32_t w, uint32_t h, unsigned long *len)
{
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr jerr;
	unsigned char *buf = NULL;
	uint8_t *row = malloc((size_t)w * 3);

	c.err = jpeg_std_error(&jerr);
	jpeg_create_compress(&c);
	*len = 0;
	jpeg_mem_dest(&c, &buf, len);
	c.image_width = w;
	c.image_height = h;
	c.input_components = 3;
	c.in_color_space = JCS_RGB;
	jpeg_set_defaults(&c);
	jpeg_set_quality(&c, 95, TRUE);
	jpeg_start_compress(&c, TRUE);
	while (c.next_scanline < h) {
		JSAMPROW r = row;
		uint32_t y = c.next_scanline;

		for (uint32_t x = 0; x < w; x++) {
			row[x * 3] = (uint8_t)(128 + 100 * sin(x * 0.37) *
							 cos(y * 0.11));
			row[x * 3 + 1] = (uint8_t)((x * 7 + y * 3) & 0xff);
			row[x * 3 + 2] = (uint8_t)((x ^ y) * 5);
		}
		jpeg_write_scanlines(&c, &r, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	free(row);
	return buf;
}

/* xf_run_prefix of text on j, else a failed check. */
static int
prefix(const char *text, const uint8_t *j, unsigned long len,
    struct xf_image *out)
{
	struct xf_pipeline *pl = parse_ok(text);
	char err[256];
	int r = -EINVAL;

	if (pl != NULL &&
	    (r = xf_run_prefix(pl, j, len, out, err, sizeof(err))) != 0)
		fprintf(stderr, "%s: %s\n", text, err);
	CHECK_EQ_INT(r, 0);
	xf_pipeline_free(pl);
	return r;
}

static double
mean_diff(const struct xf_image *a, const struct xf_image *b)
{
	size_t n = (size_t)a->w * a->h * 3;
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += abs(a->px[i] - b->px[i]);
	return n ? s / n : 0;
}

/*
 * shrink on a 1000 x 700 JPEG: 731 x 512 (torchvision's int() of the long
 * side), Pillow's decode and Lanczos resize, the frame 1000 x 700; the
 * same sizes as xf_prefix_dims; a source not over S unchanged, its own
 * frame.  decode(scaled) shrink(128) decodes at 1/2 (500 x 350, twice
 * 182 x 128 and more): the same size and frame, pixels a little apart.
 */
static void
test_shrink_prefix(void)
{
	unsigned long len, slen;
	uint8_t *j = make_jpeg(1000, 700, &len), *sj = make_jpeg(400, 300, &slen);
	struct xf_image full, want, got, scaled;
	struct xf_pipeline *pl;
	char err[256];
	uint32_t ow, oh;

	CHECK_EQ_INT(xf_decode(j, len, 0, 0, &full, err, sizeof(err)), 0);
	CHECK_EQ_INT(xf_resize_filter(&full, 731, 512, XF_LANCZOS, &want), 0);
	if (prefix("decode shrink(512) cache random_resized_crop(64)", j, len,
		&got) == 0) {
		CHECK(got.w == 731 && got.h == 512);
		CHECK(got.src_w == 1000 && got.src_h == 700);
		CHECK(memcmp(got.px, want.px, (size_t)731 * 512 * 3) == 0);
		xf_free(got.px);
	}
	pl = parse_ok("decode shrink(512) cache random_resized_crop(64)");
	if (pl != NULL) {
		CHECK(xf_prefix_dims(pl, 1000, 700, &ow, &oh) == 700000);
		CHECK(ow == 731 && oh == 512);
		CHECK(xf_prefix_dims(pl, 400, 300, &ow, &oh) == 120000);
		CHECK(ow == 400 && oh == 300);
		CHECK(xf_prefix_dims(pl, 512, 900, &ow, &oh) == 512 * 900);
		CHECK(ow == 512 && oh == 900);
		xf_pipeline_free(pl);
	}
	if (prefix("decode shrink(512) cache random_resized_crop(64)", sj, slen,
		&got) == 0) {
		CHECK(got.w == 400 && got.h == 300);
		CHECK(got.src_w == 400 && got.src_h == 300);
		xf_free(got.px);
	}
	xf_free(want.px);

	/* The plain decode is exact; decode(scaled) only where it may. */
	CHECK_EQ_INT(xf_resize_filter(&full, 182, 128, XF_LANCZOS, &want), 0);
	if (prefix("decode shrink(128) cache random_resized_crop(64)", j, len,
		&got) == 0 &&
	    prefix("decode(scaled) shrink(128) cache random_resized_crop(64)",
		j, len, &scaled) == 0) {
		CHECK(memcmp(got.px, want.px, (size_t)182 * 128 * 3) == 0);
		CHECK(scaled.w == 182 && scaled.h == 128);
		CHECK(scaled.src_w == 1000 && scaled.src_h == 700);
		CHECK(memcmp(scaled.px, want.px, (size_t)182 * 128 * 3) != 0);
		CHECK(mean_diff(&scaled, &want) < 3.0);
		xf_free(got.px);
		xf_free(scaled.px);
	}
	/* Not twice the target at 1/2 (500 x 350 < 2 x 366 x 256): full. */
	xf_free(want.px);
	CHECK_EQ_INT(xf_resize_filter(&full, 365, 256, XF_LANCZOS, &want), 0);
	if (prefix("decode(scaled) shrink(256) cache random_resized_crop(64)",
		j, len, &got) == 0) {
		CHECK(memcmp(got.px, want.px, (size_t)365 * 256 * 3) == 0);
		xf_free(got.px);
	}
	/* val's resize(256): exact by default, DCT-scaled when asked. */
	xf_free(want.px);
	CHECK_EQ_INT(xf_resize(&full, 365, 256, &want), 0);
	if (prefix("decode resize(256) cache center_crop(224)", j, len,
		&got) == 0) {
		CHECK(memcmp(got.px, want.px, (size_t)365 * 256 * 3) == 0);
		CHECK(got.src_w == 0 && got.src_h == 0);
		xf_free(got.px);
	}
	xf_free(want.px);
	CHECK_EQ_INT(xf_resize(&full, 182, 128, &want), 0);
	if (prefix("decode(scaled) resize(128) cache center_crop(64)", j, len,
		&got) == 0) {
		CHECK(got.w == 182 && got.h == 128);
		CHECK(memcmp(got.px, want.px, (size_t)182 * 128 * 3) != 0);
		CHECK(mean_diff(&got, &want) < 3.0);
		xf_free(got.px);
	}
	xf_free(want.px);
	xf_free(full.px);
	free(j);
	free(sj);
}

/*
 * random_resized_crop after shrink: the box of torchvision's get_params
 * on the source's size (the frame), taken from the shrunk pixels as
 * Pillow's resize with a fractional box; after a shrink that kept the
 * image, the integer box of the image itself.  flip keeps the frame.
 */
static void
test_rrc_frame(void)
{
	static const double scale[2] = {0.08, 1.0}, ratio[2] = {0.75, 4 / 3.0};
	unsigned long len, slen;
	uint8_t *j = make_jpeg(1000, 700, &len), *sj = make_jpeg(400, 300, &slen);
	struct xf_pipeline *pl =
	    parse_ok("decode shrink(512) cache random_resized_crop(64)");
	struct xf_pipeline *fl =
	    parse_ok("decode shrink(512) cache flip(1) random_resized_crop(64)");
	struct xf_image img, small, c, want;
	uint8_t out[64 * 64 * 3];
	int bad = 0;

	if (pl == NULL || fl == NULL ||
	    prefix("decode shrink(512) cache random_resized_crop(64)", j, len,
		&img) != 0 ||
	    prefix("decode shrink(512) cache random_resized_crop(64)", sj,
		slen, &small) != 0) {
		CHECK(0);
		return;
	}
	for (uint64_t key = 0; key < 200; key++) {
		int32_t x, y, wx, wy;
		uint32_t cw, ch, wcw, wch;
		float box[4];

		CHECK(!xf_rrc_box(pl, 3, &img, key, &x, &y, &cw, &ch));
		xf_rrc_params(1000, 700, scale, ratio, key, 3ULL << 32, &wx,
		    &wy, &wcw, &wch);
		if (x != wx || y != wy || cw != wcw || ch != wch)
			bad++;
		CHECK(x >= 0 && y >= 0 && x + cw <= 1000 && y + ch <= 700);
		xf_rrc_fbox(&img, x, y, cw, ch, box);
		CHECK(box[0] == (float)(x * (731 / 1000.0)));
		CHECK(box[3] <= 512.0f && box[2] <= 731.0f);
		c = img;
		c.px = xf_alloc((size_t)img.w * img.h * 3);
		memcpy(c.px, img.px, (size_t)img.w * img.h * 3);
		CHECK_EQ_INT(xf_run_suffix(pl, &c, key, XF_UINT8, XF_HWC, out),
		    0);
		CHECK_EQ_INT(xf_resize_fbox(&img, box, 64, 64, &want), 0);
		CHECK(memcmp(out, want.px, sizeof(out)) == 0);
		xf_free(want.px);

		/* After flip (op 3), the crop is op 4: the frame kept. */
		c = img;
		c.px = xf_alloc((size_t)img.w * img.h * 3);
		memcpy(c.px, img.px, (size_t)img.w * img.h * 3);
		xf_flip(&c);
		CHECK(!xf_rrc_box(fl, 4, &c, key, &x, &y, &cw, &ch));
		xf_rrc_params(1000, 700, scale, ratio, key, 4ULL << 32, &wx,
		    &wy, &wcw, &wch);
		CHECK(x == wx && y == wy && cw == wcw && ch == wch);
		xf_free(c.px);

		/* The small image is its own frame: integer boxes. */
		CHECK(xf_rrc_box(pl, 3, &small, key, &x, &y, &cw, &ch));
		xf_rrc_params(400, 300, scale, ratio, key, 3ULL << 32, &wx,
		    &wy, &wcw, &wch);
		CHECK(x == wx && y == wy && cw == wcw && ch == wch);
		c = small;
		c.px = xf_alloc((size_t)small.w * small.h * 3);
		memcpy(c.px, small.px, (size_t)small.w * small.h * 3);
		CHECK_EQ_INT(xf_run_suffix(pl, &c, key, XF_UINT8, XF_HWC, out),
		    0);
		CHECK_EQ_INT(xf_resize_box(&small, (uint32_t)x, (uint32_t)y,
				 cw, ch, 64, 64, &want), 0);
		CHECK(memcmp(out, want.px, sizeof(out)) == 0);
		xf_free(want.px);
	}
	CHECK_EQ_INT(bad, 0);
	/* A frame smaller than the image (no shrink makes one) is none. */
	{
		struct xf_image odd = small;
		int32_t x, y, wx, wy;
		uint32_t cw, ch, wcw, wch;

		odd.src_w = 300;
		odd.src_h = 1000;
		CHECK(xf_rrc_box(pl, 3, &odd, 5, &x, &y, &cw, &ch));
		xf_rrc_params(400, 300, scale, ratio, 5, 3ULL << 32, &wx, &wy,
		    &wcw, &wch);
		CHECK(x == wx && y == wy && cw == wcw && ch == wch);
	}
	xf_free(img.px);
	xf_free(small.px);
	xf_pipeline_free(pl);
	xf_pipeline_free(fl);
	free(j);
	free(sj);
}

/*
 * The Lanczos passes: the AVX2 kernels (negative taps) give the portable
 * loops' bytes, shrinking and enlarging, at odd sizes; a flat image stays
 * flat within the coefficients' rounding.
 */
static void
test_lanczos_paths(void)
{
	uint64_t s = 0x2545f4914f6cdd1dULL;
	int bad = 0;

	for (int it = 0; it < 300; it++) {
		struct xf_image in, a, b;
		uint32_t w, h;
		size_t n;

#define RND() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, (uint32_t)s)
		in.w = RND() % 5 == 0 ? 1 + RND() % 6 : 1 + RND() % 700;
		in.h = RND() % 5 == 0 ? 1 + RND() % 6 : 1 + RND() % 700;
		n = (size_t)in.w * in.h * 3;
		in.px = malloc(n);
		for (size_t i = 0; i < n; i++)
			in.px[i] = it % 3 ? (uint8_t)RND() : (uint8_t)(i * 5 / 7);
		w = 1 + RND() % 400;
		h = RND() % 4 == 0 ? in.h : 1 + RND() % 400;
#undef RND
		setenv("FEEDFS_XF_SCALAR", "1", 1);
		CHECK_EQ_INT(xf_resize_filter(&in, w, h, XF_LANCZOS, &a), 0);
		unsetenv("FEEDFS_XF_SCALAR");
		CHECK_EQ_INT(xf_resize_filter(&in, w, h, XF_LANCZOS, &b), 0);
		if (memcmp(a.px, b.px, (size_t)w * h * 3) != 0 && bad++ < 5)
			fprintf(stderr, "lanczos %ux%u -> %ux%u: paths differ\n",
			    in.w, in.h, w, h);
		free(in.px);
		xf_free(a.px);
		xf_free(b.px);
	}
	CHECK_EQ_INT(bad, 0);
	{
		uint8_t px[40 * 30 * 3];
		struct xf_image in = {.w = 40, .h = 30, .px = px}, out;

		memset(px, 200, sizeof(px));
		CHECK_EQ_INT(xf_resize_filter(&in, 13, 11, XF_LANCZOS, &out), 0);
		for (size_t i = 0; i < 13 * 11 * 3; i++)
			if (abs(out.px[i] - 200) > 1)
				bad++;
		CHECK_EQ_INT(bad, 0);
		xf_free(out.px);
		CHECK_EQ_INT(xf_resize_filter(&in, 0, 11, XF_LANCZOS, &out),
		    -EINVAL);
	}
}

int
main(void)
{
	test_parse();
	test_shrink_prefix();
	test_rrc_frame();
	test_lanczos_paths();
	return TEST_SUMMARY();
}
