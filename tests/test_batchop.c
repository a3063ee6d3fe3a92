/*
 * test_batchop.c - the batch ops' pieces (transforms/mix.c, issue 28):
 *
 * - xf_beta: 20000 draws per alpha against Beta(a, a)'s closed-form CDF
 *   (a = 0.5: arcsine, 1: uniform, 2 and 3: polynomials), one-sample
 *   Kolmogorov-Smirnov at alpha 0.001, and the mean and spread of small
 *   alphas (0.2, 0.01: mass at the ends, never NaN, always in [0, 1]);
 * - xf_mix_params: the same draw for the same key; cutmix boxes inside
 *   the image with lambda = 1 - area / image; mixup_cutmix's switch
 *   chooses cutmix with its probability (0, 1, and 0.3 over 20000);
 * - xf_mix_images: the AVX2 loops equal the portable ones bit for bit
 *   (float32, float16, CHW, HWC, sizes not a multiple of 8, batches of 1
 *   and 5), and both equal the roll-by-one definition computed here out
 *   of place; cutmix on uint8; mixup on uint8 refused;
 * - xf_convert_range: whole samples and pieces of them, mixup and
 *   cutmix's boxes included, the same bits as xf_convert and
 *   xf_mix_images, with every kernel (the portable loops, AVX2, AVX-512
 *   VBMI);
 * - xf_mix_labels: v2's soft labels, same-class pairs and labels out of
 *   range; xf_half_to_float inverts xf_float_to_half on every half;
 * - the parser: the batch ops' arguments and places (FILE:LINE is the
 *   config's; tests/test_badinput.sh checks it through a mount).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testlib.h"
#include "transforms/rng.h"
#include "transforms/xf.h"

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
beta_cdf(double a, double x)
{
	if (a == 0.5)
		return 2.0 / M_PI * asin(sqrt(x));
	if (a == 1)
		return x;
	if (a == 2)
		return 3 * x * x - 2 * x * x * x;
	/* a == 3: I_x(3, 3) */
	return 10 * pow(x, 3) - 15 * pow(x, 4) + 6 * pow(x, 5);
}

static void
test_beta(void)
{
	static const double alphas[] = {0.5, 1, 2, 3};
	enum { N = 20000 };
	double *v = malloc(N * sizeof(*v));

	for (size_t k = 0; k < sizeof(alphas) / sizeof(alphas[0]); k++) {
		double a = alphas[k], d = 0;

		for (int i = 0; i < N; i++)
			v[i] = xf_beta(
			    rng_key(RNG_DOMAIN_BATCHMIX, 3, k, i), 1, a);
		qsort(v, N, sizeof(*v), cmp_double);
		for (int i = 0; i < N; i++) {
			double f = beta_cdf(a, v[i]);

			d = fmax(d, fmax(fabs(f - (double)i / N),
					fabs((double)(i + 1) / N - f)));
		}
		/* Kolmogorov's 0.001 critical value: 1.949 / sqrt(N). */
		if (d >= 1.949 / sqrt(N))
			fprintf(stderr, "Beta(%g, %g): KS D = %g\n", a, a, d);
		CHECK(d < 1.949 / sqrt(N));
	}
	for (int s = 0; s < 2; s++) {
		double a = s ? 0.01 : 0.2, mean = 0, ends = 0;

		for (int i = 0; i < N; i++) {
			double x = xf_beta(
			    rng_key(RNG_DOMAIN_BATCHMIX, 9, s, i), 1, a);

			CHECK(x >= 0 && x <= 1);
			mean += x / N;
			ends += (x < 0.05 || x > 0.95) / (double)N;
		}
		CHECK(fabs(mean - 0.5) < 0.02);
		/* Beta(0.2, 0.2): P(x < 0.05 or x > 0.95) = 0.58; for 0.01
		 * nearly all of it. */
		CHECK(s ? ends > 0.95 : fabs(ends - 0.58) < 0.03);
	}
	free(v);
}

static void
test_params(void)
{
	struct xf_op cut = {.kind = XF_OP_CUTMIX, .alpha = {0, 1.0}};
	struct xf_op both = {.kind = XF_OP_MIXUP_CUTMIX, .alpha = {0.2, 1.0}};
	struct xf_mix m, m2;
	int cuts = 0;

	for (uint64_t i = 0; i < 2000; i++) {
		uint32_t w = 1 + (uint32_t)(i % 37), h = 1 + (uint32_t)(i % 23);
		uint64_t key = rng_key(RNG_DOMAIN_BATCHMIX, 1, 0, i);

		xf_mix_params(&cut, key, w, h, &m);
		xf_mix_params(&cut, key, w, h, &m2);
		CHECK(memcmp(&m, &m2, sizeof(m)) == 0);
		CHECK(m.cut && m.x0 <= m.x1 && m.x1 <= w && m.y0 <= m.y1 &&
		      m.y1 <= h);
		CHECK(m.lam == 1.0 - (double)((m.x1 - m.x0) * (m.y1 - m.y0)) /
					 ((double)w * h));
	}
	for (int p = 0; p < 3; p++) {
		both.p = p == 0 ? 0 : p == 1 ? 1 : 0.3;
		cuts = 0;
		for (uint64_t i = 0; i < 20000; i++) {
			xf_mix_params(&both,
			    rng_key(RNG_DOMAIN_BATCHMIX, 2, p, i), 64, 64, &m);
			cuts += m.cut;
		}
		CHECK(p == 0   ? cuts == 0
		      : p == 1 ? cuts == 20000
			       : abs(cuts - 6000) < 300);
	}
}

/* x[i] from x[i - 1] (x[0] from the last): the definition, out of place,
 * on floats (the halves widened), into want. */
static void
mix_ref(const struct xf_mix *m, const float *x, uint32_t n, uint32_t w,
    uint32_t h, enum xf_layout layout, float *want)
{
	size_t k = (size_t)w * h * 3;
	float a = (float)(1.0 - m->lam), c = (float)m->lam;

	for (uint32_t i = 0; i < n; i++) {
		const float *s = x + i * k, *p = x + (i ? i - 1 : n - 1) * k;

		for (size_t e = 0; e < k; e++) {
			uint32_t px = layout == XF_HWC ? (uint32_t)(e / 3 % w)
						       : (uint32_t)(e % w);
			uint32_t py = layout == XF_HWC ? (uint32_t)(e / 3 / w)
						       : (uint32_t)(e / w % h);
			bool in = px >= m->x0 && px < m->x1 && py >= m->y0 &&
				  py < m->y1;

			if (m->cut)
				want[i * k + e] = in ? p[e] : s[e];
			else {
				float t = p[e] * a, u = s[e] * c;

				want[i * k + e] = t + u;
			}
		}
	}
}

static void
test_images(void)
{
	static const uint32_t sizes[][3] = {{5, 3, 5}, {16, 8, 1}, {13, 7, 4}};

	for (size_t si = 0; si < 3; si++)
		for (int dt = 0; dt < 2; dt++)
			for (int lay = 0; lay < 2; lay++)
				for (int cut = 0; cut < 2; cut++) {
					uint32_t w = sizes[si][0],
						 h = sizes[si][1],
						 n = sizes[si][2];
					size_t k = (size_t)w * h * 3,
					       es = dt ? 2 : 4;
					enum xf_dtype d =
					    dt ? XF_FLOAT16 : XF_FLOAT32;
					enum xf_layout l =
					    lay ? XF_HWC : XF_CHW;
					float *x = malloc(n * k * 4),
					      *want = malloc(n * k * 4);
					uint8_t *a = malloc(n * k * es),
						*b = malloc(n * k * es),
						*tmp = malloc(k * es);
					struct xf_mix m = {
					    cut, 0.3137, 1, 1, w - 1, h};

					for (size_t e = 0; e < n * k; e++) {
						float v =
						    (float)(rng_uniform(5, e) *
								4 -
							    2);

						if (dt) {
							uint16_t hv =
							    xf_float_to_half(v);

							memcpy(
							    a + e * 2, &hv, 2);
							v = xf_half_to_float(
							    hv);
						} else
							memcpy(
							    a + e * 4, &v, 4);
						x[e] = v;
					}
					memcpy(b, a, n * k * es);
					CHECK(xf_mix_images(&m, a, n, w, h, d,
						  l, tmp) == 0);
					CHECK(xf_mix_images_scalar(&m, b, n, w,
						  h, d, l, tmp) == 0);
					CHECK(memcmp(a, b, n * k * es) == 0);
					mix_ref(&m, x, n, w, h, l, want);
					for (size_t e = 0; e < n * k; e++) {
						if (dt) {
							uint16_t hv;

							memcpy(
							    &hv, a + e * 2, 2);
							CHECK(hv ==
							      xf_float_to_half(
								  want[e]));
						} else
							CHECK(memcmp(a + e * 4,
								  &want[e],
								  4) == 0);
					}
					free(x);
					free(want);
					free(a);
					free(b);
					free(tmp);
				}
}

/*
 * The conversion's kernels, k: 0 the portable loops, 1 the AVX2 ones, 2
 * the best this CPU has (AVX-512 VBMI where it runs them; else the
 * same as 1).  kernels_reset after the call.
 */
static void
kernels(int k)
{
	if (k == 0)
		setenv("FEEDFS_XF_SCALAR", "1", 1);
	if (k == 1)
		setenv("FEEDFS_XF_AVX512", "0", 1);
}

static void
kernels_reset(void)
{
	unsetenv("FEEDFS_XF_SCALAR");
	unsetenv("FEEDFS_XF_AVX512");
}

/* n samples of w x h x 3 random bytes (stream seed) at im[0..n): their
 * pixels, one block to free. */
static uint8_t *
samples(uint32_t w, uint32_t h, uint32_t n, uint64_t seed,
    struct xf_image *im)
{
	size_t k = (size_t)w * h * 3;
	uint8_t *raw = malloc(n * k);

	for (size_t e = 0; e < n * k; e++)
		raw[e] = (uint8_t)(rng_uniform(seed, e) * 256);
	for (uint32_t i = 0; i < n; i++)
		im[i] = (struct xf_image){.w = w, .h = h, .px = raw + i * k};
	return raw;
}

/*
 * xf_convert_range of whole samples with mixup (a batch whose uint8
 * samples are all at hand: the cluster tier's) against the two steps it
 * fuses, xf_convert of every sample and xf_mix_images, with each kernel:
 * every dtype and layout, normalized or not, sizes below eight pixels,
 * not a multiple of eight, and 224 x 224 float32, into an aligned and a
 * misaligned buffer, lambdas at and between the ends.
 */
static void
test_convert_whole(void)
{
	static const uint32_t sizes[][2] = {
	    {1, 5}, {7, 1}, {13, 7}, {64, 3}, {161, 203}, {224, 224}};
	static const double lams[] = {0.0, 1.0, 0.3137, 0.777};
	static const float mean[3] = {0.485f, 0.456f, 0.406f},
			   std[3] = {0.229f, 0.224f, 0.225f};
	const uint32_t n = 3;
	int bad = 0;

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		uint32_t w = sizes[si][0], h = sizes[si][1];
		size_t k = (size_t)w * h * 3;
		/* aligned_alloc: a multiple of the alignment */
		size_t bytes = (n * k * 4 + 64 + 63) & ~(size_t)63;
		struct xf_image im[3];
		uint8_t *raw = samples(w, h, n, 9, im),
			*want = aligned_alloc(64, bytes),
			*got = aligned_alloc(64, bytes), *tmp = malloc(k * 4);

		for (int c = 0; c < 192; c++) {
			enum xf_dtype d = c & 1 ? XF_FLOAT16 : XF_FLOAT32;
			enum xf_layout l = c & 2 ? XF_CHW : XF_HWC;
			bool norm = c & 4;
			int kern = c >> 6; /* kernels() */
			size_t es = d == XF_FLOAT16 ? 2 : 4, sb = k * es;
			size_t off = c & 32 ? 4 : 0; /* misaligned */
			struct xf_mix m = {
			    .cut = false, .lam = lams[c >> 3 & 3]};

			memset(want, 0, bytes);
			memset(got, 0xa5, bytes);
			kernels(kern);
			for (uint32_t i = 0; i < n; i++)
				xf_convert(&im[i], norm, mean, std, d, l,
				    want + off + i * sb);
			CHECK(xf_mix_images_scalar(
				  &m, want + off, n, w, h, d, l, tmp) == 0);
			for (uint32_t i = 0; i < n; i++)
				CHECK(xf_convert_range(&im[i],
					  &im[i ? i - 1 : n - 1], &m, norm,
					  mean, std, d, l, 0, k,
					  got + off + i * sb) == 0);
			kernels_reset();
			if (memcmp(want + off, got + off, n * sb) != 0 &&
			    bad++ < 5)
				fprintf(stderr,
				    "convert_range whole %ux%u case %d differs\n", w,
				    h, c);
		}
		free(raw);
		free(want);
		free(got);
		free(tmp);
	}
	CHECK_EQ_INT(bad, 0);
}

/*
 * xf_convert_range (a batch from the cluster tier, converted a reader's
 * range at a time) against the whole batch made as a mount makes it:
 * xf_convert of every sample, then xf_mix_images (none, mixup, cutmix
 * with boxes inside, at the edges, empty and whole).  Each sample is
 * made in random pieces (ends inside pixels, rows and planes; pieces of
 * one value; a whole sample), with each kernel, every dtype and layout,
 * normalized or not, and sizes below 64 pixels, not a multiple of 8, and
 * 224 x 224.  A piece's neighbours are checked untouched.
 */
static void
test_convert_range(void)
{
	static const uint32_t sizes[][2] = {
	    {1, 1}, {7, 3}, {13, 7}, {64, 3}, {97, 61}, {224, 224}};
	static const float mean[3] = {0.485f, 0.456f, 0.406f},
			   std[3] = {0.229f, 0.224f, 0.225f};
	const uint32_t n = 3;
	uint64_t rnd = 1;
	int bad = 0;

#define RND() (rnd = rnd * 6364136223846793005ull + 1442695040888963407ull, \
	(uint32_t)(rnd >> 33))
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		uint32_t w = sizes[si][0], h = sizes[si][1];
		size_t k = (size_t)w * h * 3;
		struct xf_image im[3];
		uint8_t *raw = samples(w, h, n, 11, im),
			*want = malloc(n * k * 4), *got = malloc(n * k * 4 + 8),
			*tmp = malloc(k * 4);

		for (int c = 0; c < 3 * 4 * 5; c++) {
			enum xf_dtype d = c & 1 ? XF_FLOAT16 : XF_FLOAT32;
			enum xf_layout l = c & 2 ? XF_CHW : XF_HWC;
			int kind = c / 4 % 5, kern = c / 20;
			bool norm = (c / 4 + c / 20) & 1;
			size_t es = d == XF_FLOAT16 ? 2 : 4, sb = k * es;
			struct xf_mix m = {.cut = kind >= 2, .lam = 0.3137};

			if (kind == 2) { /* a box inside */
				m.x0 = w / 4;
				m.x1 = w / 4 + (w + 1) / 2;
				m.y0 = h / 3;
				m.y1 = h / 3 + (h + 1) / 2;
			} else if (kind == 3) { /* at the edges */
				m.x0 = w / 2;
				m.x1 = w;
				m.y1 = h;
			} else if (kind == 4 && c & 1) { /* whole */
				m.x1 = w;
				m.y1 = h;
			} /* kind 4, else: empty */
			for (uint32_t i = 0; i < n; i++)
				xf_convert(&im[i], norm, mean, std, d, l,
				    want + i * sb);
			if (kind > 0)
				CHECK(xf_mix_images_scalar(&m, want, n, w, h,
					  d, l, tmp) == 0);
			memset(got, 0xa5, n * sb + 8);
			kernels(kern);
			for (uint32_t i = 0; i < n; i++) {
				size_t e0 = 0;

				while (e0 < k) {
					size_t len = RND() % 4 == 0 ? 1
						     : RND() % 3 == 0
							 ? k - e0
							 : 1 + RND() % k;

					if (len > k - e0)
						len = k - e0;
					CHECK(xf_convert_range(&im[i],
						  &im[i ? i - 1 : n - 1],
						  kind ? &m : NULL, norm, mean,
						  std, d, l, e0, e0 + len,
						  got + i * sb + e0 * es) == 0);
					e0 += len;
				}
			}
			kernels_reset();
			if (memcmp(want, got, n * sb) != 0 && bad++ < 5)
				fprintf(stderr,
				    "convert_range %ux%u case %d differs\n", w,
				    h, c);
			for (int x = 0; x < 8; x++)
				CHECK(got[n * sb + x] == 0xa5);
		}
		free(raw);
		free(want);
		free(got);
		free(tmp);
	}
#undef RND
	CHECK_EQ_INT(bad, 0);
	{
		uint8_t px[2 * 3] = {0}, out[4 * 2 * 3];
		struct xf_image a = {.w = 2, .h = 1, .px = px},
				b = {.w = 1, .h = 2, .px = px};
		struct xf_mix mix = {.cut = false, .lam = 0.5};

		CHECK(xf_convert_range(&a, &a, NULL, false, mean, std,
			  XF_UINT8, XF_HWC, 0, 6, out) == -EINVAL);
		CHECK(xf_convert_range(&a, &a, NULL, false, mean, std,
			  XF_FLOAT32, XF_HWC, 0, 7, out) == -EINVAL);
		CHECK(xf_convert_range(&a, &a, NULL, false, mean, std,
			  XF_FLOAT32, XF_HWC, 4, 3, out) == -EINVAL);
		CHECK(xf_convert_range(&a, &b, &mix, false, mean, std,
			  XF_FLOAT32, XF_CHW, 0, 6, out) == -EINVAL);
		CHECK(xf_convert_range(&a, NULL, &mix, false, mean, std,
			  XF_FLOAT32, XF_CHW, 0, 6, out) == -EINVAL);
		CHECK(xf_convert_range(&a, NULL, NULL, false, mean, std,
			  XF_FLOAT32, XF_CHW, 2, 2, out) == 0);
	}
}

static void
test_uint8(void)
{
	uint8_t px[2 * 4 * 2 * 3], tmp[4 * 2 * 3];
	struct xf_mix cut = {.cut = true,
			  .lam = 0.5,
			  .x0 = 1,
			  .y0 = 0,
			  .x1 = 3,
			  .y1 = 1},
		      mix = {.cut = false, .lam = 0.5};

	for (size_t i = 0; i < sizeof(px); i++)
		px[i] = (uint8_t)(i < 24 ? 10 : 200);
	CHECK(
	    xf_mix_images(&mix, px, 2, 4, 2, XF_UINT8, XF_HWC, tmp) == -EINVAL);
	CHECK(xf_mix_images(&cut, px, 2, 4, 2, XF_UINT8, XF_HWC, tmp) == 0);
	/* Sample 0's box (x 1..2 of row 0) came from sample 1, and 1's
	 * from sample 0; the rest is theirs. */
	for (int s = 0; s < 2; s++)
		for (int y = 0; y < 2; y++)
			for (int x = 0; x < 4; x++)
				for (int c = 0; c < 3; c++) {
					bool in = y == 0 && x >= 1 && x < 3;
					uint8_t own = s ? 200 : 10,
						other = s ? 10 : 200;

					CHECK(
					    px[s * 24 + (y * 4 + x) * 3 + c] ==
					    (in ? other : own));
				}
}

static void
test_labels(void)
{
	int64_t lab[4] = {2, 2, 0, 7};
	float out[4 * 3];
	struct xf_mix m = {.cut = false, .lam = 0.8};
	float a = (float)(1.0 - 0.8), c = (float)0.8;

	xf_mix_labels(&m, lab, 4, 3, out);
	/* row 0: self 2, prev 7 (none) */
	CHECK(out[0] == 0 && out[1] == 0 && out[2] == c);
	/* row 1: self 2, prev 2 */
	CHECK(out[3] == 0 && out[4] == 0 && out[5] == a + c);
	/* row 2: self 0, prev 2 */
	CHECK(out[6] == c && out[7] == 0 && out[8] == a);
	/* row 3: self 7 (none), prev 0 */
	CHECK(out[9] == a && out[10] == 0 && out[11] == 0);
	for (uint32_t hv = 0; hv < 0x10000; hv++) {
		if ((hv & 0x7c00) == 0x7c00 && (hv & 0x3ff)) /* NaN */
			continue;
		CHECK(xf_float_to_half(xf_half_to_float((uint16_t)hv)) == hv);
	}
}

static int
parse(const char *text, char *err, size_t len)
{
	struct xf_pipeline *pl = NULL;
	int r = xf_pipeline_parse(text, &pl, err, len);

	xf_pipeline_free(pl);
	return r;
}

static void
test_parse(void)
{
	static const char *const head =
	    "decode resize(40) cache random_resized_crop(32) flip(0.5) ";
	static const struct {
		const char *tail, *msg; /* msg NULL: parses */
	} cases[] = {
	    {"mixup(0.2)", NULL},
	    {"cutmix(1)", NULL},
	    {"mixup_cutmix(0.2, 1.0, 0.5)", NULL},
	    {"mixup_cutmix(0.2,1.0,0)", NULL},
	    {"normalize(imagenet) mixup_cutmix(0.8, 1, 1)", NULL},
	    {"mixup(0.2) normalize(imagenet)", "must be the last op"},
	    {"mixup(0.2) cutmix(1.0)", "must be the last op"},
	    {"mixup(0)", "must be > 0"},
	    {"mixup(-0.2)", "must be > 0"},
	    {"cutmix(-1)", "must be > 0"},
	    {"mixup_cutmix(0.2, 0, 0.5)", "must be > 0"},
	    {"mixup_cutmix(0.2, 1.0, 1.5)", "not in 0..1"},
	    {"mixup_cutmix(0.2, 1.0, -0.1)", "not in 0..1"},
	    {"mixup()", "expected 1 argument"},
	    {"mixup(0.2, 0.3)", "expected 1 argument"},
	    {"mixup_cutmix(0.2, 1.0)", "expected 3 arguments"},
	    {"mixup(nan)", "not a number"},
	    {"mixup(inf)", "not a number"},
	};
	char text[256], err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r;

		snprintf(text, sizeof(text), "%s%s", head, cases[i].tail);
		err[0] = '\0';
		r = parse(text, err, sizeof(err));
		if (cases[i].msg == NULL)
			CHECK_EQ_INT(r, 0);
		else {
			CHECK_EQ_INT(r, -EINVAL);
			if (strstr(err, cases[i].msg) == NULL)
				fprintf(stderr, "%s: \"%s\" lacks \"%s\"\n",
				    text, err, cases[i].msg);
			CHECK(strstr(err, cases[i].msg) != NULL);
		}
	}
	CHECK_EQ_INT(parse("decode mixup(0.2) resize(40) center_crop(32)", err,
			 sizeof(err)),
	    -EINVAL);
	/* uint8: cutmix copies pixels, mixup would blend them. */
	{
		struct xf_pipeline *pl = NULL;

		CHECK(xf_pipeline_parse("decode center_crop(8) mixup(1)", &pl,
			  err, sizeof(err)) == 0);
		CHECK(pl && pl->batch_op && pl->batch_op->kind == XF_OP_MIXUP);
		CHECK(pl &&
		      xf_check_output(pl, XF_UINT8, err, sizeof(err)) ==
			  -EINVAL &&
		      strstr(err, "uint8") != NULL);
		CHECK(pl &&
		      xf_check_output(pl, XF_FLOAT16, err, sizeof(err)) == 0);
		xf_pipeline_free(pl);
		pl = NULL;
		CHECK(xf_pipeline_parse("decode center_crop(8) cutmix(1)", &pl,
			  err, sizeof(err)) == 0);
		CHECK(
		    pl && xf_check_output(pl, XF_UINT8, err, sizeof(err)) == 0);
		xf_pipeline_free(pl);
		pl = NULL;
		CHECK(xf_pipeline_parse(
			  "decode center_crop(8)", &pl, err, sizeof(err)) == 0);
		CHECK(pl && pl->batch_op == NULL);
		xf_pipeline_free(pl);
	}
}

int
main(void)
{
	test_beta();
	test_params();
	test_images();
	test_convert_whole();
	test_convert_range();
	test_uint8();
	test_labels();
	test_parse();
	return TEST_SUMMARY();
}
