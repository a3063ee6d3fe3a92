/*
 * test_probe.c - unit test (tests/, of the transforms layer and of the
 * model's --check): the header probes (transforms/probe.h, issue 35), the
 * one place that knows each image format, which feedfs --check and the
 * decoders both ask.
 *
 * (a) Every file of fuzz/corpus/decode and fuzz/corpus/check: the probe
 *     through a reader (as --check reads a tar member: a file at an
 *     offset) and in memory give the same verdict, words and facts (but
 *     where the reader's bounds stop it, (e));
 *     check_header (core/check.c) gives that verdict and those words;
 *     a file that decodes is ok to the probe, with the decoded size; a
 *     file the probe refuses as unsupported, the decoder refuses in the
 *     same words.
 * (b) The facts the decoders decide on: CMYK and YCCK (4 components),
 *     gray, progressive and arithmetic processes, 16-bit, Adam7 and
 *     palette PNGs, lossless and alpha WebP.
 * (c) Files libjpeg decodes that --check called corrupt: a stuffed zero
 *     (FF 00) before a marker, COM and APPn segments of length under 2;
 *     and one it called ok that the decoder refuses: a stray byte right
 *     after SOI ("not a JPEG").  The size ops.c scales the decode by
 *     (xf_jpeg_dims) is the probe's for all of them, stray bytes too.
 * (d) The rules in one set of words: 12-bit and lossless JPEGs, and
 *     max_pixels for every format (the decoders: -ENOTSUP and -EFBIG).
 * (e) The bounds of a reader: 5000 stray bytes are corrupt to --check
 *     (the decoder, reading memory, still decodes them); a WebP whose
 *     headers lie past the first window is read whole.
 * (f) The formats' names for files the scan does not take.
 */
#include <sys/mman.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "tests/testlib.h"
#include "transforms/probe.h"
#include "transforms/xf.h"

#define PAD 512 /* bytes of 0xff before and after a file in its memfd */
#define MAXPX (4u << 20)

struct file {
	uint8_t *b;
	size_t n;
};

static struct file
slurp(const char *path)
{
	struct file f = {0};
	FILE *fp = fopen(path, "rb");
	long n;

	if (fp == NULL || fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 ||
	    fseek(fp, 0, SEEK_SET) != 0) {
		fprintf(stderr, "%s: cannot read\n", path);
		exit(1);
	}
	f.n = (size_t)n;
	f.b = malloc(f.n ? f.n : 1);
	if (fread(f.b, 1, f.n, fp) != f.n)
		exit(1);
	fclose(fp);
	return f;
}

static struct file
corpus(const char *dir, const char *name)
{
	const char *src = getenv("FF_SRCDIR");
	char p[4096];

	snprintf(
	    p, sizeof(p), "%s/fuzz/corpus/%s/%s", src ? src : ".", dir, name);
	return slurp(p);
}

/* The file at offset PAD of a memfd, 0xff around it. */
static int
memfd_of(const uint8_t *b, size_t n)
{
	static uint8_t pad[PAD];
	int fd = memfd_create("probe", 0);

	memset(pad, 0xff, sizeof(pad));
	if (fd < 0 || pwrite(fd, pad, PAD, 0) != PAD ||
	    pwrite(fd, b, n, PAD) != (ssize_t)n ||
	    pwrite(fd, pad, PAD, (off_t)(PAD + n)) != PAD)
		exit(1);
	return fd;
}

struct at {
	int fd;
};

static ssize_t
fd_read(void *arg, uint64_t off, void *buf, size_t n)
{
	ssize_t k = pread(((struct at *)arg)->fd, buf, n, (off_t)(PAD + off));

	return k < 0 ? -errno : k;
}

/* The reader probe of b (at PAD in a memfd). */
static enum xf_verdict
probe_fd(const struct file *f, uint64_t maxpx, unsigned flags,
    struct xf_probe *pr, char *why, size_t len)
{
	struct at a = {memfd_of(f->b, f->n)};
	struct xf_reader rd = {.read = fd_read, .arg = &a, .size = f->n};
	enum xf_verdict v = xf_probe(&rd, maxpx, flags, pr, why, len);

	close(a.fd);
	return v;
}

static bool
same_facts(const struct xf_probe *a, const struct xf_probe *b)
{
	return a->format == b->format && a->w == b->w && a->h == b->h &&
	       a->components == b->components && a->depth == b->depth &&
	       a->sof == b->sof && a->progressive == b->progressive &&
	       a->palette == b->palette && a->lossless == b->lossless &&
	       a->too_large == b->too_large;
}

/* Whether a reader's bounds stopped the JPEG walk (see (e)). */
static bool
reader_bound(const char *why)
{
	return strncmp(why, "corrupt JPEG: no marker at offset ", 34) == 0 ||
	       strncmp(why, "corrupt JPEG: no scan in ", 25) == 0;
}

/* (a) for one file. */
static void
agree(const char *name, const struct file *f)
{
	struct xf_probe pm, pr;
	struct xf_image img;
	char wm[512], wr[512], wc[512], err[512];
	uint32_t w = 0, h = 0;
	enum xf_verdict vm, vr;
	int fd, k, d;

	for (unsigned flags = 0; flags <= XF_PROBE_END; flags++) {
		vm =
		    xf_probe_mem(f->b, f->n, MAXPX, flags, &pm, wm, sizeof(wm));
		vr = probe_fd(f, MAXPX, flags, &pr, wr, sizeof(wr));
		if (reader_bound(wr)) /* (e) */
			continue;
		if (vm != vr || strcmp(wm, wr) != 0 || !same_facts(&pm, &pr)) {
			fprintf(stderr,
			    "%s: memory %d \"%s\", reader %d \"%s\"\n", name,
			    vm, wm, vr, wr);
			CHECK(false);
		}
		CHECK((vm == XF_PROBE_OK) == (wm[0] == '\0'));
	}
	fd = memfd_of(f->b, f->n);
	k = check_header(fd, PAD, f->n, MAXPX, &w, &h, wc, sizeof(wc));
	close(fd);
	if (k != (int)vr || strcmp(wc, wr) != 0) {
		fprintf(stderr, "%s: check_header %d \"%s\", probe %d \"%s\"\n",
		    name, k, wc, vr, wr);
		CHECK(false);
	}
	CHECK(k != 0 || (w == pr.w && h == pr.h));
	err[0] = '\0';
	d = xf_decode_max(f->b, f->n, 0, 0, MAXPX, &img, err, sizeof(err));
	vm = xf_probe_mem(f->b, f->n, MAXPX, 0, &pm, wm, sizeof(wm));
	if (d == 0) {
		CHECK(vm == XF_PROBE_OK && pm.w == img.w && pm.h == img.h);
		xf_free(img.px);
	}
	if (vm == XF_PROBE_UNSUPPORTED && pm.format != XF_SRC_NONE) {
		CHECK_EQ_INT(d, pm.too_large ? -EFBIG : -ENOTSUP);
		CHECK_EQ_STR(err, wm);
	}
}

static void
test_corpus(const char *dir)
{
	const char *src = getenv("FF_SRCDIR");
	char p[4096];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(p, sizeof(p), "%s/fuzz/corpus/%s", src ? src : ".", dir);
	if ((d = opendir(p)) == NULL) {
		fprintf(stderr, "%s: %s\n", p, strerror(errno));
		CHECK(false);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		struct file f;

		if (e->d_name[0] == '.')
			continue;
		f = corpus(dir, e->d_name);
		agree(e->d_name, &f);
		free(f.b);
		n++;
	}
	closedir(d);
	fprintf(stderr,
	    "(a) %s: %d files, reader, memory, check_header and "
	    "decoder agree\n",
	    dir, n);
}

/* The memory probe of a corpus file, ok, its facts. */
static struct xf_probe
facts(const char *name)
{
	struct file f = corpus("decode", name);
	struct xf_probe pr;
	char why[256];

	CHECK_EQ_INT(
	    xf_probe_mem(f.b, f.n, 0, XF_PROBE_END, &pr, why, sizeof(why)),
	    XF_PROBE_OK);
	free(f.b);
	return pr;
}

static void
test_facts(void)
{
	struct xf_probe p;

	p = facts("a-cmyk.jpg");
	CHECK(p.format == XF_SRC_JPEG && p.components == 4 && p.depth == 8);
	CHECK(facts("a-ycck.jpg").components == 4);
	CHECK(facts("a-gray.jpg").components == 1);
	p = facts("a-baseline-420.jpg");
	CHECK(p.components == 3 && !p.progressive && p.sof == 0);
	p = facts("a-progressive.jpg");
	CHECK(p.progressive && p.sof == 2);
	p = facts("a-arith.jpg");
	CHECK(!p.progressive && p.sof == 9);
	CHECK(facts("a-arith-progressive.jpg").sof == 10);
	p = facts("a-odd-17x13.jpg");
	CHECK(p.w == 17 && p.h == 13);
	p = facts("png-rgb16.png");
	CHECK(p.format == XF_SRC_PNG && p.depth == 16 && p.components == 3);
	p = facts("png-gray16-adam7.png");
	CHECK(p.progressive && p.depth == 16 && p.components == 1);
	p = facts("png-pal4-trns.png");
	CHECK(p.palette && p.depth == 4);
	CHECK(facts("png-ga8.png").components == 2);
	p = facts("webp-lossless.webp");
	CHECK(p.format == XF_SRC_WEBP && p.lossless && p.depth == 8);
	p = facts("webp-lossy-alpha.webp");
	CHECK(!p.lossless && p.components == 4);
	CHECK(facts("webp-lossy.webp").components == 3);
	fprintf(stderr, "(b) facts: CMYK, YCCK, gray, processes, 16-bit, "
			"Adam7, palette, lossless, alpha\n");
}

/* b with ins (k bytes) inserted at offset at. */
static struct file
inserted(const struct file *b, size_t at, const void *ins, size_t k)
{
	struct file f = {malloc(b->n + k), b->n + k};

	memcpy(f.b, b->b, at);
	memcpy(f.b + at, ins, k);
	memcpy(f.b + at + k, b->b + at, b->n - at);
	return f;
}

/* check_header (what --check says) and the decoder of f: both ok, one
 * size.  (Before issue 35's probe, --check called both files corrupt.) */
static void
check_and_decode_ok(const char *what, const struct file *f)
{
	struct xf_image img = {0};
	char why[512] = "", err[512] = "";
	uint32_t w = 0, h = 0;
	int fd = memfd_of(f->b, f->n), k, d;

	k = check_header(fd, PAD, f->n, MAXPX, &w, &h, why, sizeof(why));
	close(fd);
	d = xf_decode_max(f->b, f->n, 0, 0, MAXPX, &img, err, sizeof(err));
	if (k != 0 || d != 0)
		fprintf(stderr,
		    "%s: check_header %d \"%s\", decode %d \"%s\"\n", what, k,
		    why, d, err);
	CHECK_EQ_INT(k, 0);
	CHECK_EQ_INT(d, 0);
	CHECK(d != 0 || (w == img.w && h == img.h));
	/* and its size for the DCT scale is the probe's too */
	CHECK(xf_jpeg_dims(f->b, f->n, &w, &h) == 0 && d == 0 && w == img.w &&
	      h == img.h);
	if (d == 0)
		xf_free(img.px);
}

static void
test_libjpeg_grammar(void)
{
	struct file j = corpus("decode", "a-baseline-420.jpg"), f;

	f = corpus("decode", "a-stray-bytes.jpg");
	check_and_decode_ok("3 stray bytes before DQT", &f);
	free(f.b);
	f = inserted(&j, 2, "\xff\x00", 2);
	check_and_decode_ok("FF 00 after SOI", &f);
	free(f.b);
	f = inserted(&j, 2, "\xff\xfe\x00\x00", 4);
	check_and_decode_ok("COM of length 0", &f);
	free(f.b);
	f = inserted(&j, 2, "\xff\xe5\x00\x01", 4);
	check_and_decode_ok("APP5 of length 1", &f);
	free(f.b);
	/* A stray byte right after SOI: the decoder's "not a JPEG", which
	 * --check called ok (it skipped the byte as libjpeg would). */
	f = inserted(&j, 2, "\x00", 1);
	{
		struct xf_image img;
		char why[512] = "", err[512] = "";
		uint32_t w, h;
		int fd = memfd_of(f.b, f.n), k;

		k = check_header(fd, PAD, f.n, MAXPX, &w, &h, why, sizeof(why));
		close(fd);
		CHECK_EQ_INT(k, XF_PROBE_CORRUPT);
		CHECK(strncmp(why, "not a JPEG", 10) == 0);
		CHECK_EQ_INT(xf_decode_max(
				 f.b, f.n, 0, 0, MAXPX, &img, err, sizeof(err)),
		    -EINVAL);
		CHECK_EQ_STR(err, "not a JPEG");
	}
	free(f.b);
	free(j.b);
	fprintf(stderr, "(c) FF 00, COM and APPn of length under 2: ok to "
			"--check, as to libjpeg; a byte after SOI: not a JPEG "
			"to both\n");
}

/* f refused as unsupported by --check and by the decoder, in one set of
 * words containing want; the decoder's errno derr. */
static void
same_words(const char *what, const struct file *f, uint64_t maxpx,
    const char *want, int derr)
{
	struct xf_image img;
	char why[512] = "", err[512] = "";
	uint32_t w, h;
	int fd = memfd_of(f->b, f->n), k, d;

	k = check_header(fd, PAD, f->n, maxpx, &w, &h, why, sizeof(why));
	close(fd);
	d = xf_decode_max(f->b, f->n, 0, 0, maxpx, &img, err, sizeof(err));
	if (d == 0)
		xf_free(img.px);
	if (k != XF_PROBE_UNSUPPORTED || d != derr || strcmp(why, err) != 0 ||
	    strstr(why, want) == NULL)
		fprintf(stderr,
		    "%s: check_header %d \"%s\", decode %d \"%s\", want "
		    "\"%s\"\n",
		    what, k, why, d, err, want);
	CHECK_EQ_INT(k, XF_PROBE_UNSUPPORTED);
	CHECK_EQ_INT(d, derr);
	CHECK_EQ_STR(err, why);
	CHECK(strstr(why, want) != NULL);
}

static void
test_rules(void)
{
	struct file f = corpus("decode", "b-precision-12.jpg");
	uint8_t *sof;

	same_words("12-bit", &f, MAXPX, "data precision 12", -ENOTSUP);
	free(f.b);
	f = corpus("decode", "a-baseline-420.jpg");
	if ((sof = memmem(f.b, f.n, "\xff\xc0", 2)) != NULL)
		sof[1] = 0xc3;
	CHECK(sof != NULL);
	same_words("SOF3", &f, MAXPX, "lossless or hierarchical JPEG (SOF3)",
	    -ENOTSUP);
	free(f.b);
	f = corpus("decode", "a-baseline-420.jpg");
	same_words("JPEG over max_pixels", &f, 100,
	    "image too large: 160x120 is more than max_pixels (100)", -EFBIG);
	free(f.b);
	f = corpus("decode", "png-rgb8.png");
	same_words("PNG over max_pixels", &f, 4, "image too large: ", -EFBIG);
	free(f.b);
	f = corpus("decode", "webp-lossy.webp");
	same_words("WebP over max_pixels", &f, 4, "image too large: ", -EFBIG);
	free(f.b);
	fprintf(stderr, "(d) 12-bit, SOF3, max_pixels (JPEG, PNG, WebP): "
			"--check and the decoder in one set of words\n");
}

/* A WebP's little-endian 24- and 32-bit fields. */
static void
le(uint8_t *p, uint32_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
test_bounds(void)
{
	struct file j = corpus("decode", "a-baseline-420.jpg"), f, wp;
	struct xf_probe pr, pm;
	struct xf_image img;
	char why[512], err[512];
	uint8_t *stray = calloc(1, 5000), *x;
	size_t icc = 100000, n;

	/* 5000 zero bytes before DQT (after APP0's 20 bytes) */
	f = inserted(&j, 20, stray, 5000);
	CHECK_EQ_INT(probe_fd(&f, MAXPX, XF_PROBE_END, &pr, why, sizeof(why)),
	    XF_PROBE_CORRUPT);
	CHECK_EQ_STR(why, "corrupt JPEG: no marker at offset 20");
	CHECK_EQ_INT(
	    xf_probe_mem(f.b, f.n, MAXPX, XF_PROBE_END, &pm, why, sizeof(why)),
	    XF_PROBE_OK);
	CHECK_EQ_INT(
	    xf_decode_max(f.b, f.n, 0, 0, MAXPX, &img, err, sizeof(err)), 0);
	xf_free(img.px);
	free(f.b);
	free(j.b);
	free(stray);

	/* A simple lossy WebP made extended: VP8X, a 100 KB ICCP, then VP8. */
	wp = corpus("decode", "webp-lossy.webp");
	CHECK_EQ_INT(
	    xf_probe_mem(wp.b, wp.n, 0, 0, &pm, why, sizeof(why)), XF_PROBE_OK);
	n = wp.n + 18 + 8 + icc;
	x = calloc(1, n);
	memcpy(x, "RIFF", 4);
	le(x + 4, (uint32_t)(n - 8), 4);
	memcpy(x + 8, "WEBPVP8X", 8);
	le(x + 16, 10, 4);
	x[20] = 0x20; /* ICC profile */
	le(x + 24, pm.w - 1, 3);
	le(x + 27, pm.h - 1, 3);
	memcpy(x + 30, "ICCP", 4);
	le(x + 34, (uint32_t)icc, 4);
	memcpy(x + 38 + icc, wp.b + 12, wp.n - 12);
	f = (struct file){x, n};
	CHECK_EQ_INT(probe_fd(&f, MAXPX, XF_PROBE_END, &pr, why, sizeof(why)),
	    XF_PROBE_OK);
	CHECK(pr.w == pm.w && pr.h == pm.h);
	CHECK_EQ_INT(
	    xf_decode_max(f.b, f.n, 0, 0, MAXPX, &img, err, sizeof(err)), 0);
	CHECK(img.w == pm.w && img.h == pm.h);
	xf_free(img.px);
	free(x);
	free(wp.b);
	fprintf(stderr,
	    "(e) bounds: 5000 stray bytes corrupt through a "
	    "reader only; a WebP's headers past 64 KiB read whole\n");
}

static void
test_names(void)
{
	struct file w = corpus("decode", "webp-lossy.webp");

	CHECK_EQ_STR(xf_format_name(w.b, 16), "a WebP image");
	memcpy(w.b + 8, "WAVE", 4);
	CHECK_EQ_STR(xf_format_name(w.b, 16), "a RIFF file that is not WebP");
	CHECK_EQ_STR(
	    xf_format_name((const uint8_t *)"\xff\xd8\xff", 3), "a JPEG image");
	CHECK_EQ_STR(xf_format_name((const uint8_t *)"\x89PNG\r\n\x1a\n", 8),
	    "a PNG image");
	CHECK_EQ_STR(
	    xf_format_name((const uint8_t *)"GIF89a", 6), "a GIF image");
	CHECK(xf_format_name((const uint8_t *)"hello, world", 12) == NULL);
	free(w.b);
	fprintf(stderr, "(f) names by magic bytes\n");
}

int
main(void)
{
	test_corpus("decode");
	test_corpus("check");
	test_facts();
	test_libjpeg_grammar();
	test_rules();
	test_bounds();
	test_names();
	return TEST_SUMMARY();
}
