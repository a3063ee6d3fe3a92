/*
 * gen-hostile - the hostile-input dataset of issue 6, as an ImageFolder tree.
 *
 *   gen-hostile OUTDIR [--outside DIR]
 *
 * Writes OUTDIR/CLASS/NAME files that a real dataset may hold and a decoder
 * must survive, and OUTDIR/hostile.tsv (not a sample: files directly in the
 * root are skipped by the ImageFolder scan) listing each entry as
 *
 *   relative path <TAB> expect <TAB> label <TAB> reason <TAB> what
 *
 * expect is "ok" (decodes; the mount must serve feedfs-ref's bytes), "bad"
 * (refused: on_error applies; the log line must hold reason) or "absent"
 * (not a sample: the scan skips it).  label is the ImageFolder class index.
 * The classes are
 *
 *   a_valid        unusual but valid JPEGs (CMYK, YCCK, grayscale,
 *                  progressive, arithmetic, every subsampling, restarts,
 *                  1x1, 10000x3, 3x10000, huge COM and EXIF segments,
 *                  stray bytes before a marker, garbage after EOI)
 *   b_broken       truncated at several points, zero bytes, random bytes, a
 *                  GIF named .jpg, PNGs (valid ones, one named .jpg, one
 *                  interlaced; a 65500x65500 IHDR, bad CRCs, a cut IDAT),
 * 12-bit, 65500x65500 headers (decompression bombs), 1x65500 and 65500x1 (a
 * resize makes them gigabytes), 576 progressive scans, zero width, corrupt
 * entropy data, a segment length running past the end "c names ü ☃"  unicode,
 * spaces, quotes and a backslash in names d_links        symlinks: into the
 * root, out of it (DIR, default OUTDIR.outside, gets the target; skipped by the
 * scan), dangling, loops
 *
 * Everything is deterministic.  The JPEGs come from libjpeg's compressor,
 * not TurboJPEG's: CMYK and YCCK input, arithmetic coding and restart
 * intervals are only reachable through it (and a fresh compressor per image
 * sidesteps TurboJPEG 2.1.5's handle-reuse bug).  libjpeg-turbo 2.1 cannot
 * write 12-bit samples, so the 12-bit file is a baseline file whose SOF was
 * patched to SOF1 with precision 12, which an 8-bit decoder must refuse.
 *
 * Exit 0, 1 on an I/O or libjpeg error, 2 on bad usage.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <jpeglib.h>

#define PATH_LEN 4096

static const char *outdir;
static FILE *manifest;

struct buf {
	unsigned char *p;
	size_t n;
};

/* ---- helpers ------------------------------------------------------------ */

static void
die(const char *what, const char *why)
{
	fprintf(stderr, "gen-hostile: %s: %s\n", what, why);
	exit(1);
}

static uint64_t
mix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void
mkdir_in(const char *rel)
{
	char path[PATH_LEN];

	snprintf(path, sizeof(path), "%s/%s", outdir, rel);
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		die(path, strerror(errno));
}

static void
write_path(const char *path, const void *p, size_t n)
{
	FILE *fp = fopen(path, "wb");

	if (fp == NULL)
		die(path, strerror(errno));
	if ((n > 0 && fwrite(p, 1, n, fp) != n) || fclose(fp) != 0)
		die(path, strerror(errno));
}

/* Write OUTDIR/rel and list it in the manifest. */
static void
emit(const char *rel, const void *p, size_t n, const char *expect, int label,
    const char *reason, const char *what)
{
	char path[PATH_LEN];

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", outdir, rel) >=
	    sizeof(path))
		die(rel, strerror(ENAMETOOLONG));
	write_path(path, p, n);
	fprintf(manifest, "%s\t%s\t%d\t%s\t%s\n", rel, expect, label, reason,
	    what);
}

static void
link_in(const char *target, const char *rel, const char *expect, int label,
    const char *reason, const char *what)
{
	char path[PATH_LEN];

	snprintf(path, sizeof(path), "%s/%s", outdir, rel);
	(void)unlink(path);
	if (symlink(target, path) != 0)
		die(path, strerror(errno));
	fprintf(manifest, "%s\t%s\t%d\t%s\t%s\n", rel, expect, label, reason,
	    what);
}

/* ---- JPEG encoding -------------------------------------------------------- */

struct enc {
	int w, h;
	J_COLOR_SPACE in;      /* JCS_RGB, JCS_GRAYSCALE or JCS_CMYK */
	J_COLOR_SPACE jpeg;    /* colorspace in the file (0: libjpeg's default) */
	int hs, vs;            /* luma sampling factors (0: libjpeg's 2x2) */
	bool progressive, arith;
	unsigned restart_interval, restart_rows;
	int quality;
	int ncom;              /* COM segments of 65533 bytes */
	int napp1;             /* APP1 segments of 65533 bytes (the first: Exif) */
	int scan_al;	       /* > 0: progressive, every coefficient of every
				  component in scans of its own, bits al..0
				  one scan each: 64 * ncomp * (al + 1) scans */
};

struct jerr {
	struct jpeg_error_mgr mgr;
	jmp_buf jb;
};

static void
enc_error_exit(j_common_ptr cinfo)
{
	char msg[JMSG_LENGTH_MAX];

	(*cinfo->err->format_message)(cinfo, msg);
	die("libjpeg", msg);
}

/* A smooth pattern with some edges, so every codec path has work. */
static uint8_t
pattern(int x, int y, int c, int w, int h)
{
	int v = (x * 255 / (w > 1 ? w - 1 : 1) + y * 255 / (h > 1 ? h - 1 : 1)) / 2;

	if (((x / 8) + (y / 8)) % 3 == c % 3)
		v = 255 - v;
	v += c * 40;
	return (uint8_t)(v & 0xff);
}

static struct buf
encode(const struct enc *e)
{
	struct jpeg_compress_struct cinfo;
	struct jerr je;
	unsigned long size = 0;
	unsigned char *out = NULL;
	int nc = e->in == JCS_GRAYSCALE ? 1 : e->in == JCS_CMYK ? 4 : 3;
	unsigned char *row = malloc((size_t)e->w * nc);
	unsigned char *seg = calloc(1, 65533);
	jpeg_scan_info *si = NULL;
	struct buf b;

	if (row == NULL || seg == NULL)
		die("encode", "out of memory");
	memset(&cinfo, 0, sizeof(cinfo));
	cinfo.err = jpeg_std_error(&je.mgr);
	je.mgr.error_exit = enc_error_exit;
	jpeg_create_compress(&cinfo);
	jpeg_mem_dest(&cinfo, &out, &size);
	cinfo.image_width = (JDIMENSION)e->w;
	cinfo.image_height = (JDIMENSION)e->h;
	cinfo.input_components = nc;
	cinfo.in_color_space = e->in;
	jpeg_set_defaults(&cinfo);
	if (e->jpeg != JCS_UNKNOWN)
		jpeg_set_colorspace(&cinfo, e->jpeg);
	jpeg_set_quality(&cinfo, e->quality ? e->quality : 90, TRUE);
	if (e->hs > 0 && cinfo.num_components >= 3) {
		cinfo.comp_info[0].h_samp_factor = e->hs;
		cinfo.comp_info[0].v_samp_factor = e->vs;
		for (int i = 1; i < cinfo.num_components; i++)
			cinfo.comp_info[i].h_samp_factor =
			    cinfo.comp_info[i].v_samp_factor = 1;
		if (cinfo.num_components == 4) /* YCCK: K like Y */
			cinfo.comp_info[3].h_samp_factor = e->hs,
			cinfo.comp_info[3].v_samp_factor = e->vs;
	}
	if (e->progressive)
		jpeg_simple_progression(&cinfo);
	if (e->scan_al > 0) {
		int ncomp = cinfo.num_components, n = 0;

		si = calloc((size_t)ncomp * 64 * (e->scan_al + 1), sizeof(*si));
		if (si == NULL)
			die("encode", "out of memory");
		for (int ci = 0; ci < ncomp; ci++)
			for (int k = 0; k < 64; k++)
				for (int a = e->scan_al; a >= 0; a--, n++) {
					si[n].comps_in_scan = 1;
					si[n].component_index[0] = ci;
					si[n].Ss = si[n].Se = k;
					si[n].Ah = a == e->scan_al ? 0 : a + 1;
					si[n].Al = a;
				}
		cinfo.scan_info = si;
		cinfo.num_scans = n;
	}
	cinfo.arith_code = e->arith ? TRUE : FALSE;
	cinfo.restart_interval = e->restart_interval;
	cinfo.restart_in_rows = (int)e->restart_rows;
	jpeg_start_compress(&cinfo, TRUE);
	for (int i = 0; i < e->ncom; i++) {
		for (int k = 0; k < 65533; k++)
			seg[k] = (unsigned char)(' ' + (k + i) % 90);
		jpeg_write_marker(&cinfo, JPEG_COM, seg, 65533);
	}
	for (int i = 0; i < e->napp1; i++) {
		uint64_t s = (uint64_t)i + 99;

		for (int k = 0; k < 65533; k++)
			seg[k] = (unsigned char)mix(&s);
		if (i == 0) /* Exif, little-endian TIFF, IFD0 claiming junk */
			memcpy(seg, "Exif\0\0II*\0\x08\0\0\0\xff\xff", 16);
		else
			memcpy(seg, "http://ns.adobe.com/xap/1.0/\0", 29);
		jpeg_write_marker(&cinfo, JPEG_APP0 + 1, seg, 65533);
	}
	while (cinfo.next_scanline < cinfo.image_height) {
		int y = (int)cinfo.next_scanline;
		JSAMPROW rp = row;

		for (int x = 0; x < e->w; x++)
			for (int c = 0; c < nc; c++)
				row[x * nc + c] = pattern(x, y, c, e->w, e->h);
		jpeg_write_scanlines(&cinfo, &rp, 1);
	}
	jpeg_finish_compress(&cinfo);
	jpeg_destroy_compress(&cinfo);
	free(row);
	free(seg);
	free(si);
	b.p = out; /* malloc'd by jpeg_mem_dest */
	b.n = size;
	return b;
}

/* Offset of the first marker m (0xffXX) after SOI, or 0. */
static size_t
find_marker(const struct buf *b, unsigned m)
{
	size_t i = 2;

	while (i + 4 <= b->n) {
		if (b->p[i] != 0xff)
			return 0;
		if (b->p[i + 1] == m)
			return i;
		if (b->p[i + 1] == 0xda)
			return 0; /* scan data follows */
		i += 2 + ((size_t)b->p[i + 2] << 8 | b->p[i + 3]);
	}
	return 0;
}

static size_t
find_sof(const struct buf *b)
{
	static const unsigned sofs[] = { 0xc0, 0xc1, 0xc2, 0xc9, 0xca };
	size_t at;

	for (size_t i = 0; i < sizeof(sofs) / sizeof(sofs[0]); i++)
		if ((at = find_marker(b, sofs[i])) != 0)
			return at;
	die("find_sof", "no SOF marker");
	return 0;
}

/* Set the SOF's precision, height and width. */
static void
patch_sof(struct buf *b, int precision, unsigned h, unsigned w)
{
	size_t at = find_sof(b);

	if (precision > 0)
		b->p[at + 4] = (unsigned char)precision;
	b->p[at + 5] = (unsigned char)(h >> 8);
	b->p[at + 6] = (unsigned char)h;
	b->p[at + 7] = (unsigned char)(w >> 8);
	b->p[at + 8] = (unsigned char)w;
}

/* Where the entropy-coded data of the first scan starts. */
static size_t
scan_start(const struct buf *b)
{
	size_t at = find_marker(b, 0xda);

	if (at == 0) {
		/* find_marker stops at SOS: walk again to it */
		size_t i = 2;

		while (i + 4 <= b->n && b->p[i + 1] != 0xda)
			i += 2 + ((size_t)b->p[i + 2] << 8 | b->p[i + 3]);
		at = i;
	}
	return at + 2 + ((size_t)b->p[at + 2] << 8 | b->p[at + 3]);
}

static void
emit_jpeg(const char *rel, const struct enc *e, const char *what)
{
	struct buf b = encode(e);

	emit(rel, b.p, b.n, "ok", 0, "-", what);
	free(b.p);
}

/* ---- hand-made non-JPEG files -------------------------------------------- */

static uint32_t
crc32(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return c ^ 0xffffffffu;
}

static size_t
put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
	return 4;
}

/* One PNG chunk at p: length, type, data, CRC. */
static size_t
png_chunk(unsigned char *p, const char *type, const unsigned char *d,
    size_t n)
{
	size_t k = put32(p, (uint32_t)n);

	memcpy(p + k, type, 4);
	if (n > 0)
		memcpy(p + k + 4, d, n);
	put32(p + k + 4 + n, crc32(p + k, 4 + n));
	return 12 + n;
}

/*
 * A valid 2x2 RGB PNG: zlib with one stored deflate block; with interlace
 * the same pixels in Adam7 order (passes 1, 6 and 7 are the only ones a
 * 2x2 image has: (0,0), then (1,0), then row 1).  The IHDR then claims
 * w x h (2 x 2 for a valid file).
 */
static size_t
make_png_ex(unsigned char *p, bool interlace, uint32_t w, uint32_t h)
{
	unsigned char ihdr[13] = {0, 0, 0, 2, 0, 0, 0, 2, 8, 2, 0, 0, 0};
	unsigned char raw[2 * (1 + 6) + 1], z[64];
	uint32_t a = 1, b = 0;
	size_t n = 0, zn = 0;

	put32(ihdr, w);
	put32(ihdr + 4, h);
	ihdr[12] = interlace ? 1 : 0;
	if (interlace) {
		/* (0,0) | (1,0) | (0,1) (1,1): each a pass row, filter none */
		static const int xy[4][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};

		for (int k = 0; k < 4; k++) {
			if (k < 3)
				raw[n++] = 0;
			for (int c = 0; c < 3; c++)
				raw[n++] =
				    (unsigned char)(40 * (3 * xy[k][0] + c +
							     3 * xy[k][1]));
		}
	} else {
		for (int y = 0; y < 2; y++) {
			raw[n++] = 0; /* filter: none */
			for (int x = 0; x < 6; x++)
				raw[n++] = (unsigned char)(40 * (x + 3 * y));
		}
	}
	for (size_t i = 0; i < n; i++) {
		a = (a + raw[i]) % 65521;
		b = (b + a) % 65521;
	}
	z[zn++] = 0x78;
	z[zn++] = 0x01;
	z[zn++] = 0x01; /* final stored block */
	z[zn++] = (unsigned char)n;
	z[zn++] = (unsigned char)(n >> 8);
	z[zn++] = (unsigned char)~n;
	z[zn++] = (unsigned char)(~n >> 8);
	memcpy(z + zn, raw, n);
	zn += n;
	zn += put32(z + zn, b << 16 | a);
	memcpy(p, "\x89PNG\r\n\x1a\n", 8);
	n = 8;
	n += png_chunk(p + n, "IHDR", ihdr, sizeof(ihdr));
	n += png_chunk(p + n, "IDAT", z, zn);
	n += png_chunk(p + n, "IEND", NULL, 0);
	return n;
}

static size_t
make_png(unsigned char *p)
{
	return make_png_ex(p, false, 2, 2);
}

/* A valid 1x1 GIF89a (one black pixel). */
static const unsigned char gif1x1[] = { 'G', 'I', 'F', '8', '9', 'a', 1, 0,
	1, 0, 0x80, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, ',', 0, 0, 0, 0, 1, 0, 1,
	0, 0, 2, 2, 0x44, 0x01, 0, ';' };

/* ---- the set -------------------------------------------------------------- */

static void
gen_valid(void)
{
	struct enc base = { .w = 160, .h = 120, .in = JCS_RGB };
	struct enc e;
	struct buf b;
	unsigned char *p;
	size_t at;

	mkdir_in("a_valid");
#define V(name, what, ...)                                                    \
	do {                                                                  \
		e = base;                                                     \
		__VA_ARGS__;                                                  \
		emit_jpeg("a_valid/" name, &e, what);                         \
	} while (0)
	V("baseline-420.jpg", "baseline 4:2:0", (void)0);
	V("s444.jpg", "4:4:4", e.hs = 1, e.vs = 1);
	V("s422.jpg", "4:2:2", e.hs = 2, e.vs = 1);
	V("s440.jpg", "4:4:0", e.hs = 1, e.vs = 2);
	V("s411.jpg", "4:1:1", e.hs = 4, e.vs = 1);
	V("odd-17x13.jpg", "odd size, partial MCUs", e.w = 17, e.h = 13);
	V("gray.jpg", "grayscale", e.in = JCS_GRAYSCALE);
	V("progressive.jpg", "progressive", e.progressive = true);
	V("progressive-gray.jpg", "progressive grayscale",
	    e.progressive = true, e.in = JCS_GRAYSCALE);
	V("arith.jpg", "arithmetic-coded", e.arith = true);
	V("arith-progressive.jpg", "arithmetic-coded progressive",
	    e.arith = true, e.progressive = true);
	V("restart-1.jpg", "restart marker every MCU", e.restart_interval = 1);
	V("restart-rows.jpg", "restart marker every MCU row",
	    e.restart_rows = 1, e.progressive = true);
	V("cmyk.jpg", "CMYK (Adobe marker)", e.in = JCS_CMYK,
	    e.jpeg = JCS_CMYK);
	V("ycck.jpg", "YCCK (Adobe marker)", e.in = JCS_CMYK,
	    e.jpeg = JCS_YCCK);
	V("ycck-progressive.jpg", "YCCK progressive", e.in = JCS_CMYK,
	    e.jpeg = JCS_YCCK, e.progressive = true);
	V("rgb-colorspace.jpg", "RGB components (no YCbCr transform)",
	    e.jpeg = JCS_RGB);
	V("q100.jpg", "quality 100", e.quality = 100);
	V("q1.jpg", "quality 1", e.quality = 1);
	V("tiny-1x1.jpg", "1x1", e.w = 1, e.h = 1);
	V("gray-1x1.jpg", "1x1 grayscale", e.w = 1, e.h = 1,
	    e.in = JCS_GRAYSCALE);
	V("wide-10000x3.jpg", "10000x3", e.w = 10000, e.h = 3);
	V("tall-3x10000.jpg", "3x10000", e.w = 3, e.h = 10000);
	V("huge-com.jpg", "16 COM segments of 64K (1 MB)", e.ncom = 16);
	V("huge-exif.jpg", "64K Exif APP1 with a junk IFD, and 3 more APP1",
	    e.napp1 = 4);
#undef V

	/* Stray bytes before a marker: libjpeg warns, the pixels are whole. */
	e = base;
	b = encode(&e);
	at = find_marker(&b, 0xdb);
	if ((p = malloc(b.n + 3)) == NULL)
		die("stray", "out of memory");
	memcpy(p, b.p, at);
	memcpy(p + at, "\x00\x11\x22", 3);
	memcpy(p + at + 3, b.p + at, b.n - at);
	emit("a_valid/stray-bytes.jpg", p, b.n + 3, "ok", 0, "-",
	    "3 stray bytes before DQT");
	free(p);
	/* Garbage after EOI is never read. */
	if ((p = malloc(b.n + 1000)) == NULL)
		die("trailer", "out of memory");
	memcpy(p, b.p, b.n);
	for (int i = 0; i < 1000; i++)
		p[b.n + i] = (unsigned char)(i * 7);
	emit("a_valid/trailing-garbage.jpg", p, b.n + 1000, "ok", 0, "-",
	    "1000 bytes after EOI");
	free(p);
	free(b.p);
}

static void
gen_broken(void)
{
	struct enc e = { .w = 160, .h = 120, .in = JCS_RGB };
	struct buf b = encode(&e), c;
	unsigned char png[256], rnd[4096];
	uint64_t s = 6;
	size_t dht = find_marker(&b, 0xc4), ss = scan_start(&b), n;
	const int L = 1;

	mkdir_in("b_broken");
	emit("b_broken/empty.jpg", "", 0, "bad", L, "empty file", "zero bytes");
	for (size_t i = 0; i < sizeof(rnd); i++)
		rnd[i] = (unsigned char)mix(&s);
	rnd[0] = 0x42; /* never FF D8 */
	emit("b_broken/random.jpg", rnd, sizeof(rnd), "bad", L, "not a JPEG",
	    "4096 random bytes");
	/* PNG (issue 20): told by its magic bytes, whatever its name. */
	n = make_png(png);
	emit("b_broken/png.jpg", png, n, "ok", L, "-",
	    "a valid PNG named .jpg (decoded: magic bytes, not the name)");
	emit("b_broken/png-valid.png", png, n, "ok", L, "-", "a valid PNG");
	n = make_png_ex(png, true, 2, 2);
	emit("b_broken/png-interlaced.png", png, n, "ok", L, "-",
	    "a valid Adam7-interlaced PNG");
	n = make_png_ex(png, false, 65500, 65500);
	emit("b_broken/png-bomb-65500.png", png, n, "bad", L, "max_pixels",
	    "a PNG whose IHDR claims 65500x65500 (valid CRC)");
	n = make_png(png);
	png[8 + 8 + 13 + 3] ^= 0x5a; /* the IHDR's CRC */
	emit("b_broken/png-bad-crc.png", png, n, "bad", L, "corrupt PNG",
	    "a PNG whose IHDR CRC is wrong");
	n = make_png(png);
	png[n - 12 - 1] ^= 0x01; /* the last byte of the IDAT's CRC */
	emit("b_broken/png-bad-idat-crc.png", png, n, "bad", L, "corrupt PNG",
	    "a PNG whose IDAT CRC is wrong");
	n = make_png(png);
	emit("b_broken/png-trunc.png", png, n - 12 - 20, "bad", L,
	    "corrupt PNG", "a PNG cut inside its IDAT");
	emit("b_broken/gif.jpg", gif1x1, sizeof(gif1x1), "bad", L,
	    "not a JPEG", "a valid GIF named .jpg");

	/* Truncations. */
	emit("b_broken/trunc-soi.jpg", b.p, 2, "bad", L, "not a JPEG",
	    "SOI only (2 bytes)");
	emit("b_broken/trunc-app0.jpg", b.p, 11, "bad", L, "corrupt data",
	    "cut inside APP0");
	emit("b_broken/trunc-dht.jpg", b.p, dht + 9, "bad", L, "corrupt data",
	    "cut inside DHT");
	emit("b_broken/trunc-scan-start.jpg", b.p, ss + 8, "bad", L,
	    "corrupt data", "cut 8 bytes into the scan");
	emit("b_broken/trunc-half.jpg", b.p, b.n / 2, "bad", L,
	    "corrupt data", "cut at half");
	emit("b_broken/trunc-no-eoi.jpg", b.p, b.n - 2, "bad", L,
	    "corrupt data", "all but EOI");

	/* Corrupt entropy-coded data: a run of stuffed 0xff bytes is a run
	 * of 1 bits, never a valid Huffman code. */
	c.n = b.n;
	if ((c.p = malloc(c.n)) == NULL)
		die("corrupt", "out of memory");
	memcpy(c.p, b.p, b.n);
	for (size_t i = ss + (b.n - ss) / 3, k = 0; k < 48; k += 2) {
		c.p[i + k] = 0xff;
		c.p[i + k + 1] = 0x00;
	}
	emit("b_broken/corrupt-huffman.jpg", c.p, c.n, "bad", L,
	    "corrupt data", "48 bytes of 1 bits mid-scan");
	/* A segment whose length runs past the end of the file. */
	memcpy(c.p, b.p, b.n);
	n = find_marker(&c, 0xdb);
	c.p[n + 2] = 0xff;
	c.p[n + 3] = 0xf0;
	emit("b_broken/seglen-past-eof.jpg", c.p, c.n, "bad", L,
	    "corrupt data", "DQT length 65520 in a short file");
	/* 12 bits: SOF1, precision 12. */
	memcpy(c.p, b.p, b.n);
	n = find_sof(&c);
	c.p[n + 1] = 0xc1;
	patch_sof(&c, 12, 120, 160);
	emit("b_broken/precision-12.jpg", c.p, c.n, "bad", L, "precision",
	    "12-bit (SOF1, precision 12)");
	/* Zero width. */
	memcpy(c.p, b.p, b.n);
	patch_sof(&c, 0, 120, 0);
	emit("b_broken/width-0.jpg", c.p, c.n, "bad", L, "corrupt data",
	    "SOF width 0");
	/* Decompression bombs: a tiny file claiming 65500x65500. */
	memcpy(c.p, b.p, b.n);
	patch_sof(&c, 0, 65500, 65500);
	emit("b_broken/bomb-65500.jpg", c.p, c.n, "bad", L, "max_pixels",
	    "baseline header claiming 65500x65500");
	free(c.p);
	free(b.p);
	e.progressive = true;
	b = encode(&e);
	patch_sof(&b, 0, 65500, 65500);
	emit("b_broken/bomb-65500-progressive.jpg", b.p, b.n, "bad", L,
	    "max_pixels", "progressive header claiming 65500x65500");
	free(b.p);
	e.progressive = false;
	e.w = e.h = 8;
	b = encode(&e);
	patch_sof(&b, 0, 65500, 65500);
	emit("b_broken/bomb-65500-8x8data.jpg", b.p, b.n, "bad", L,
	    "max_pixels", "8x8 data claiming 65500x65500");
	free(b.p);
	/* Thin images (issue 12 item 5): 65,500 pixels, but resize(S) makes
	 * them S x 65500 S, gigabytes: refused before the allocation. */
	e.w = 1;
	e.h = 65500;
	b = encode(&e);
	emit("b_broken/thin-1x65500.jpg", b.p, b.n, "bad", L,
	    "exceeds max_pixels", "1x65500: resize(S) makes it S x 65500 S");
	free(b.p);
	e.w = 65500;
	e.h = 1;
	b = encode(&e);
	emit("b_broken/thin-65500x1.jpg", b.p, b.n, "bad", L,
	    "exceeds max_pixels", "65500x1: resize(S) makes it 65500 S x S");
	free(b.p);
	/* Issue 12 item 6: 576 scans, each one more pass over the image. */
	e.w = 160;
	e.h = 120;
	e.scan_al = 2;
	b = encode(&e);
	emit("b_broken/scans-576.jpg", b.p, b.n, "bad", L, "too many scans",
	    "progressive, 576 scans (3 components x 64 coefficients x 3 "
	    "bits)");
	free(b.p);
}

static void
gen_names(void)
{
	static const char *const names[] = { "ñandú 日本.jpg", "a  b c.jpg",
		" leading space.jpg", "quote\"back\\slash.jpg", "UPPER.JPEG",
		"dots...jpg", "émoji 😀.jpeg" };
	static const char *const cls = "c names \xc3\xbc \xe2\x98\x83";
	struct enc e = { .w = 48, .h = 40, .in = JCS_RGB };
	char rel[PATH_LEN];

	mkdir_in(cls);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct buf b;

		e.w = 48 + 8 * (int)i;
		b = encode(&e);
		snprintf(rel, sizeof(rel), "%s/%s", cls, names[i]);
		emit(rel, b.p, b.n, "ok", 2, "-", "unicode, spaces, quotes");
		free(b.p);
	}
	/* Not JPEG names: never samples. */
	snprintf(rel, sizeof(rel), "%s/notes.txt", cls);
	emit(rel, "hello\n", 6, "absent", 2, "-", "not a .jpg name");
	snprintf(rel, sizeof(rel), "%s/.hidden.jpg", cls);
	emit(rel, "x", 1, "absent", 2, "-", "hidden file");
}

static void
gen_links(const char *outside)
{
	struct enc e = { .w = 64, .h = 48, .in = JCS_RGB };
	struct buf b = encode(&e);
	char path[PATH_LEN];

	mkdir_in("d_links");
	emit("d_links/real.jpg", b.p, b.n, "ok", 3, "-", "the links' target");
	if (mkdir(outside, 0755) != 0 && errno != EEXIST)
		die(outside, strerror(errno));
	if ((size_t)snprintf(path, sizeof(path), "%s/outside.jpg", outside) >=
	    sizeof(path))
		die(outside, strerror(ENAMETOOLONG));
	e.w = 80;
	free(b.p);
	b = encode(&e);
	write_path(path, b.p, b.n);
	free(b.p);
	link_in("real.jpg", "d_links/inside.jpg", "ok", 3, "-",
	    "symlink to a file in the same class");
	link_in("../a_valid/gray.jpg", "d_links/other-class.jpg", "ok", 3, "-",
	    "symlink to a file of another class (label of the link's class)");
	link_in(path, "d_links/outside.jpg", "ok", 3, "-",
	    "symlink out of the root (followed, as torchvision follows it)");
	link_in("nosuch.jpg", "d_links/dangling.jpg", "absent", 3, "-",
	    "dangling symlink");
	link_in("loop-b.jpg", "d_links/loop-a.jpg", "absent", 3, "-",
	    "symlink loop a -> b");
	link_in("loop-a.jpg", "d_links/loop-b.jpg", "absent", 3, "-",
	    "symlink loop b -> a");
	link_in("self.jpg", "d_links/self.jpg", "absent", 3, "-",
	    "symlink to itself");
	/* A directory link back to its own parent: cut, not followed forever. */
	link_in(".", "d_links/dirloop", "absent", 3, "-",
	    "directory symlink to itself");
	link_in("..", "d_links/up", "absent", 3, "-",
	    "directory symlink to the root (re-lists the other classes)");
}

int
main(int argc, char **argv)
{
	char outside[PATH_LEN], path[PATH_LEN];

	if (argc != 2 && !(argc == 4 && strcmp(argv[2], "--outside") == 0)) {
		fprintf(stderr, "usage: gen-hostile OUTDIR [--outside DIR]\n");
		return 2;
	}
	outdir = argv[1];
	if (argc == 4)
		snprintf(outside, sizeof(outside), "%s", argv[3]);
	else
		snprintf(outside, sizeof(outside), "%s.outside", outdir);
	if (mkdir(outdir, 0755) != 0 && errno != EEXIST)
		die(outdir, strerror(errno));
	snprintf(path, sizeof(path), "%s/hostile.tsv", outdir);
	if ((manifest = fopen(path, "w")) == NULL)
		die(path, strerror(errno));
	fprintf(manifest, "# path\texpect\tlabel\treason\twhat\n");
	gen_valid();
	gen_broken();
	gen_names();
	gen_links(outside);
	if (fclose(manifest) != 0)
		die(path, strerror(errno));
	return 0;
}
