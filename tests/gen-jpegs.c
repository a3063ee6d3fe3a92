/*
 * gen-jpegs - a deterministic ImageFolder dataset of varied JPEGs for tests.
 *
 *   gen-jpegs OUTDIR [--n N] [--classes K] [--seed S] [--big]
 *
 * Writes OUTDIR/classNNN/imgNNNNNN.jpg: N images (default 60), image i in
 * class i % K (default 3 classes; every class directory is made, even when
 * N < K).  Image i depends only on (S, i, K), not on N: the same seed
 * gives the same files on every run (with the same libjpeg-turbo).
 *
 * The images vary in what a decoder and the resize/crop ops care about:
 * sizes (short side 40..400, a few up to 700 with --big), aspect ratios
 * (4:3, 3:4, 1:1, 16:9, 1:3, 3:1 and odd sizes such as 333x201), chroma
 * subsampling (4:2:0, 4:2:2, 4:4:4, 4:4:0, grayscale), quality 70..95 and
 * baseline or progressive coding.  The content is a smooth gradient, a
 * class-dependent shape, a few random shapes, a patch of fine stripes (so
 * that antialiasing matters) and a little per-pixel noise.
 *
 * Prints "wrote N images, K classes, X bytes".  Exit 0, 1 on an I/O or
 * TurboJPEG error, 2 on bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <turbojpeg.h>

#define MAX_IMAGES 999999 /* imgNNNNNN */
#define MAX_CLASSES 1000  /* classNNN */
#define PATH_LEN 4096

/* splitmix64: a tiny, portable, seedable generator. */
struct rng {
	uint64_t s;
};

static uint64_t
rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (inclusive); the modulo bias does not matter here. */
static uint32_t
rng_range(struct rng *r, uint32_t lo, uint32_t hi)
{
	return lo + (uint32_t)(rng_next(r) % ((uint64_t)hi - lo + 1));
}

/* Uniform in [0, 1). */
static double
rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* A stateless hash of a pixel position: the noise. */
static uint32_t
hash3(uint64_t seed, uint32_t x, uint32_t y)
{
	struct rng r = {seed ^ ((uint64_t)x << 32 | y)};

	return (uint32_t)rng_next(&r);
}

static uint8_t
clamp8(double v)
{
	if (v <= 0)
		return 0;
	if (v >= 255)
		return 255;
	return (uint8_t)(v + 0.5);
}

struct image {
	uint32_t w, h;
	uint8_t *px; /* RGB, rows packed */
};

static void
put(struct image *im, uint32_t x, uint32_t y, const uint8_t c[3])
{
	uint8_t *p = im->px + ((size_t)y * im->w + x) * 3;

	p[0] = c[0];
	p[1] = c[1];
	p[2] = c[2];
}

static void
random_color(struct rng *r, uint8_t c[3])
{
	for (int k = 0; k < 3; k++)
		c[k] = (uint8_t)rng_range(r, 0, 255);
}

/* Bilinear blend of four random corner colors. */
static void
draw_gradient(struct image *im, struct rng *r)
{
	uint8_t c[4][3];

	for (int i = 0; i < 4; i++)
		random_color(r, c[i]);
	for (uint32_t y = 0; y < im->h; y++) {
		double fy = im->h > 1 ? (double)y / (im->h - 1) : 0;

		for (uint32_t x = 0; x < im->w; x++) {
			double fx = im->w > 1 ? (double)x / (im->w - 1) : 0;
			uint8_t v[3];

			for (int k = 0; k < 3; k++)
				v[k] = clamp8(
				    (1 - fy) *
					((1 - fx) * c[0][k] + fx * c[1][k]) +
				    fy * ((1 - fx) * c[2][k] + fx * c[3][k]));
			put(im, x, y, v);
		}
	}
}

enum shape { SH_RECT, SH_ELLIPSE, SH_TRIANGLE, SH_CROSS, SH_RING, NSHAPES };

/* Whether (x, y) lies in shape kind inside the box (x0, y0, bw, bh). */
static bool
inside(enum shape kind, double x, double y, double x0, double y0, double bw,
    double bh)
{
	double u = (x - x0) / bw, v = (y - y0) / bh; /* 0..1 in the box */
	double du = u - 0.5, dv = v - 0.5, d2 = du * du + dv * dv;

	if (u < 0 || u >= 1 || v < 0 || v >= 1)
		return false;
	switch (kind) {
	case SH_RECT:
		return true;
	case SH_ELLIPSE:
		return d2 < 0.25;
	case SH_TRIANGLE: /* apex at the top middle */
		return fabs(du) < 0.5 * v;
	case SH_CROSS:
		return fabs(du) < 0.15 || fabs(dv) < 0.15;
	case SH_RING:
		return d2 < 0.25 && d2 > 0.09;
	default:
		return false;
	}
}

/* A filled shape of a random color; the box may stick out of the image. */
static void
draw_shape(struct image *im, struct rng *r, enum shape kind, double x0,
    double y0, double bw, double bh)
{
	uint8_t c[3];
	int64_t xa = (int64_t)floor(x0), ya = (int64_t)floor(y0);
	int64_t xb = (int64_t)ceil(x0 + bw), yb = (int64_t)ceil(y0 + bh);

	random_color(r, c);
	if (xa < 0)
		xa = 0;
	if (ya < 0)
		ya = 0;
	if (xb > im->w)
		xb = im->w;
	if (yb > im->h)
		yb = im->h;
	for (int64_t y = ya; y < yb; y++)
		for (int64_t x = xa; x < xb; x++)
			if (inside(kind, (double)x + 0.5, (double)y + 0.5, x0,
				y0, bw, bh))
				put(im, (uint32_t)x, (uint32_t)y, c);
}

/* A patch of one- to three-pixel stripes: aliasing shows if a resize lacks
 * an antialiasing filter. */
static void
draw_stripes(struct image *im, struct rng *r)
{
	uint32_t pw = rng_range(r, im->w / 8 + 1, im->w / 3 + 1);
	uint32_t ph = rng_range(r, im->h / 8 + 1, im->h / 3 + 1);
	uint32_t x0 = rng_range(r, 0, im->w - (pw < im->w ? pw : im->w));
	uint32_t y0 = rng_range(r, 0, im->h - (ph < im->h ? ph : im->h));
	uint32_t period = rng_range(r, 2, 6);
	bool vertical = rng_next(r) & 1;
	uint8_t a[3], b[3];

	random_color(r, a);
	random_color(r, b);
	for (uint32_t y = y0; y < y0 + ph && y < im->h; y++)
		for (uint32_t x = x0; x < x0 + pw && x < im->w; x++) {
			uint32_t t = vertical ? x : y;

			put(im, x, y, (t % period) < period / 2 ? a : b);
		}
}

static void
add_noise(struct image *im, uint64_t seed, int amp)
{
	for (uint32_t y = 0; y < im->h; y++)
		for (uint32_t x = 0; x < im->w; x++) {
			uint8_t *p = im->px + ((size_t)y * im->w + x) * 3;
			uint32_t h = hash3(seed, x, y);

			for (int k = 0; k < 3; k++) {
				int d = (int)((h >> (8 * k)) & 0xff) %
					    (2 * amp + 1) -
					amp;

				p[k] = clamp8((double)p[k] + d);
			}
		}
}

/* Sizes of image i: cycled aspect ratios, random short side, odd cases. */
static void
pick_size(struct rng *r, uint32_t i, bool big, uint32_t *w, uint32_t *h)
{
	static const struct {
		uint32_t aw, ah;
	} aspects[] = {{4, 3}, {3, 4}, {1, 1}, {16, 9}, {1, 3}, {3, 1}};
	static const struct {
		uint32_t w, h;
	} odd[] = {{333, 201}, {201, 333}, {97, 131}, {500, 375}, {257, 255},
	    {41, 400}};
	uint32_t s, aw, ah;

	if (i % 10 == 9) {
		*w = odd[(i / 10) % (sizeof(odd) / sizeof(odd[0]))].w;
		*h = odd[(i / 10) % (sizeof(odd) / sizeof(odd[0]))].h;
		return;
	}
	aw = aspects[(i / 5) % (sizeof(aspects) / sizeof(aspects[0]))].aw;
	ah = aspects[(i / 5) % (sizeof(aspects) / sizeof(aspects[0]))].ah;
	s = big && i % 8 == 7 ? rng_range(r, 450, 700) : rng_range(r, 40, 400);
	if (aw < ah) {
		*w = s;
		*h = (uint32_t)((uint64_t)s * ah / aw);
	} else {
		*h = s;
		*w = (uint32_t)((uint64_t)s * aw / ah);
	}
}

/* Draw image i of class cls into a new im (px malloc'd). */
static int
make_image(uint64_t seed, uint32_t i, uint32_t cls, bool big, struct image *im)
{
	struct rng r = {seed};
	uint32_t nshapes, w, h;
	double sw, sh, side;

	/* A stream per image: image i does not depend on N. */
	r.s = rng_next(&r) ^ ((uint64_t)i * 0xd1b54a32d192ed03ULL);
	rng_next(&r);
	pick_size(&r, i, big, &w, &h);
	if ((im->px = malloc((size_t)w * h * 3)) == NULL)
		return -ENOMEM;
	im->w = w;
	im->h = h;
	draw_gradient(im, &r);

	/* The class's shape, large and roughly central. */
	side = (w < h ? w : h) * (0.4 + 0.3 * rng_unit(&r));
	sw = side * (0.8 + 0.4 * rng_unit(&r));
	sh = side * (0.8 + 0.4 * rng_unit(&r));
	draw_shape(im, &r, (enum shape)(cls % NSHAPES),
	    (w - sw) * (0.25 + 0.5 * rng_unit(&r)),
	    (h - sh) * (0.25 + 0.5 * rng_unit(&r)), sw, sh);

	/* Clutter, possibly cut by the border. */
	nshapes = rng_range(&r, 1, 4);
	for (uint32_t k = 0; k < nshapes; k++) {
		sw = w * (0.05 + 0.25 * rng_unit(&r));
		sh = h * (0.05 + 0.25 * rng_unit(&r));
		draw_shape(im, &r, (enum shape)rng_range(&r, 0, NSHAPES - 1),
		    w * rng_unit(&r) - sw / 2, h * rng_unit(&r) - sh / 2, sw,
		    sh);
	}
	draw_stripes(im, &r);
	add_noise(im, rng_next(&r), (int)rng_range(&r, 2, 8));
	return 0;
}

static int
make_dir(const char *path)
{
	if (mkdir(path, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "gen-jpegs: %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int
write_file(const char *path, const unsigned char *buf, unsigned long len)
{
	FILE *fp = fopen(path, "wb");

	if (fp == NULL || fwrite(buf, 1, len, fp) != len) {
		fprintf(stderr, "gen-jpegs: %s: %s\n", path, strerror(errno));
		if (fp)
			fclose(fp);
		return -1;
	}
	if (fclose(fp) != 0) {
		fprintf(stderr, "gen-jpegs: %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Compress image i and write it; adds its size to *total.  Each image gets a
 * handle of its own: with TurboJPEG 2.1.5 a baseline tjCompress2() on a
 * handle that has made a progressive JPEG before writes a corrupt file
 * (Huffman tables left over from the progressive pass) that decoders
 * nevertheless accept.
 */
static int
write_image(const char *outdir, uint64_t seed, uint32_t i, uint32_t nclasses,
    bool big, uint64_t *total)
{
	static const int samps[] = {
	    TJSAMP_420, TJSAMP_422, TJSAMP_444, TJSAMP_440, TJSAMP_GRAY};
	struct image im = {0};
	struct rng r = {seed ^ 0x6a09e667f3bcc908ULL ^ i};
	unsigned char *jpeg = NULL;
	unsigned long jlen = 0;
	char path[PATH_LEN];
	uint32_t cls = i % nclasses;
	int samp, quality, flags, ret = -1;
	tjhandle tj;

	if ((tj = tjInitCompress()) == NULL) {
		fprintf(stderr, "gen-jpegs: tjInitCompress: %s\n",
		    tjGetErrorStr2(NULL));
		return -1;
	}
	if (make_image(seed, i, cls, big, &im) != 0) {
		fprintf(stderr, "gen-jpegs: out of memory\n");
		goto out;
	}
	samp = samps[i % (sizeof(samps) / sizeof(samps[0]))];
	quality = (int)rng_range(&r, 70, 95);
	flags = i % 4 == 3 ? TJFLAG_PROGRESSIVE : 0;
	if (tjCompress2(tj, im.px, (int)im.w, 0, (int)im.h, TJPF_RGB, &jpeg,
		&jlen, samp, quality, flags) != 0) {
		fprintf(stderr, "gen-jpegs: image %" PRIu32 ": %s\n", i,
		    tjGetErrorStr2(tj));
		goto out;
	}
	if ((size_t)snprintf(path, sizeof(path),
		"%s/class%03" PRIu32 "/img%06" PRIu32 ".jpg", outdir, cls,
		i) >= sizeof(path)) {
		fprintf(stderr, "gen-jpegs: %s: path too long\n", outdir);
		goto out;
	}
	if (write_file(path, jpeg, jlen) != 0)
		goto out;
#ifdef GEN_DUMP_RAW
	{
		char raw[PATH_LEN + 8];
		snprintf(raw, sizeof(raw), "%s.%ux%u.rgb", path, im.w, im.h);
		write_file(raw, im.px, (unsigned long)im.w * im.h * 3);
	}
#endif
	*total += jlen;
	ret = 0;
out:
	tjFree(jpeg);
	free(im.px);
	tjDestroy(tj);
	return ret;
}

static void
usage(void)
{
	fprintf(stderr, "usage: gen-jpegs OUTDIR [--n N] [--classes K] "
			"[--seed S] [--big]\n");
}

/* An unsigned number in [lo, hi] (decimal or 0x hex). */
static int
parse_num(
    const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (s == NULL) {
		fprintf(stderr, "gen-jpegs: %s needs a value\n", opt);
		return -1;
	}
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < lo ||
	    v > hi) {
		fprintf(stderr,
		    "gen-jpegs: %s %s: expected a number in %" PRIu64
		    "..%" PRIu64 "\n",
		    opt, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int
main(int argc, char **argv)
{
	const char *outdir = NULL;
	uint64_t n = 60, nclasses = 3, seed = 0, total = 0;
	bool big = false;
	char path[PATH_LEN];

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--n") == 0) {
			if (parse_num(a, argv[++i], 0, MAX_IMAGES, &n) != 0)
				return 2;
		} else if (strcmp(a, "--classes") == 0) {
			if (parse_num(
				a, argv[++i], 1, MAX_CLASSES, &nclasses) != 0)
				return 2;
		} else if (strcmp(a, "--seed") == 0) {
			if (parse_num(a, argv[++i], 0, UINT64_MAX, &seed) != 0)
				return 2;
		} else if (strcmp(a, "--big") == 0) {
			big = true;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage();
			return 0;
		} else if (a[0] == '-' || outdir != NULL) {
			usage();
			return 2;
		} else {
			outdir = a;
		}
	}
	if (outdir == NULL) {
		usage();
		return 2;
	}

	if (strlen(outdir) > PATH_LEN - 32) {
		fprintf(stderr, "gen-jpegs: %s: path too long\n", outdir);
		return 1;
	}
	if (make_dir(outdir) != 0)
		return 1;
	for (uint64_t c = 0; c < nclasses; c++) {
		snprintf(path, sizeof(path), "%s/class%03" PRIu64, outdir, c);
		if (make_dir(path) != 0)
			return 1;
	}
	for (uint64_t i = 0; i < n; i++)
		if (write_image(outdir, seed, (uint32_t)i, (uint32_t)nclasses,
			big, &total) != 0)
			return 1;
	printf("wrote %" PRIu64 " images, %" PRIu64 " classes, %" PRIu64
	       " bytes\n",
	    n, nclasses, total);
	return 0;
}
