/*
 * probe.h - what an image's headers say, without decoding it: one header
 * probe per format, beside its decoder.  Layer: transforms/ (pixels); it
 * includes only transforms/xf.h, and core/ (feedfs --check) asks it.
 *
 * The one place that knows a source format: xf_probe tells JPEG, PNG and
 * WebP apart by their magic bytes (probe.c) and reads the headers of the
 * one it found (jpeg_probe.c beside decode.c, png.c, webp.c).  It reports
 * what the decoders decide on (the size, the components, the bit depth,
 * whether a JPEG is progressive) and a verdict: ok, or why the file is
 * refused.  The decoders (xf_decode_max, xf_decode_box, xf_png_decode,
 * xf_webp_decode) run the same probe on the bytes they are given and
 * refuse what it refuses as unsupported, in its words: each rule
 * (max_pixels, 8-bit JPEG only, the JPEG processes libjpeg-turbo decodes,
 * still WebP only, CMYK decoded as CMYK) is written once.  Damage the
 * probe finds in a file's structure (a segment cut short, a missing
 * IHDR), the decoder leaves to its library, which names it in its words
 * ("corrupt data: ...", "corrupt PNG: ...").
 *
 * Reentrant; no global state.
 */
#ifndef FEEDFS_PROBE_H
#define FEEDFS_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "transforms/xf.h"

/* A probe's verdict (feedfs --check's kinds, in its order). */
enum xf_verdict {
	XF_PROBE_OK,
	XF_PROBE_UNREADABLE,  /* the reader failed: why is its strerror */
	XF_PROBE_UNSUPPORTED, /* another format, or a rule (too_large ...) */
	XF_PROBE_TRUNCATED,   /* cut short */
	XF_PROBE_CORRUPT,     /* damaged headers */
};

/*
 * What the headers say.  format is set once the magic bytes matched
 * (XF_SRC_NONE: none of JPEG's, PNG's or WebP's); the rest once the frame
 * header (JPEG SOF, PNG IHDR, WebP VP8/VP8L/VP8X) was read, whatever the
 * verdict (0 where it was not).
 */
struct xf_probe {
	enum xf_src format;
	uint32_t w, h;
	/* JPEG: the frame's components (1 gray, 3 YCbCr or RGB, 4 CMYK or
	 * YCCK: decoded as CMYK, then to RGB as Pillow does); PNG: its colour
	 * type's (1 gray, 2 gray and alpha, 3 RGB or palette, 4 RGBA);
	 * WebP: 3, or 4 with alpha. */
	uint8_t components;
	uint8_t depth;	  /* bits a sample: JPEG's precision, PNG's bit
			     depth; 8 for WebP */
	uint8_t sof;	  /* JPEG: the process, n of its SOFn marker */
	bool progressive; /* JPEG: SOF2 or SOF10, decoded scan by scan
			     (XF_MAX_SCANS); PNG: Adam7 interlaced */
	bool palette;	  /* PNG: colour type 3 */
	bool lossless;	  /* WebP: VP8L */
	bool too_large;	  /* unsupported for max_pixels: a decoder says
			     -EFBIG, not -ENOTSUP */
};

/*
 * A file the probe does not hold: size bytes, read with read (up to n
 * bytes at off into buf: how many, fewer only at the end; or -errno).
 */
struct xf_reader {
	ssize_t (*read)(void *arg, uint64_t off, void *buf, size_t n);
	void *arg;
	uint64_t size;
};

/*
 * Also judge, from the end of the file, whether it was cut short: a JPEG
 * needs an end-of-image marker (FF D9) after its first scan's header and a
 * PNG its IEND chunk, each within the last XF_PROBE_WINDOW bytes (garbage
 * after them is allowed, as the decoders allow it); a WebP's RIFF header
 * must not claim more bytes than the file has.  A cut file is then
 * TRUNCATED ("... JPEG cut short").  Without it, only the headers are
 * read: the decoders find a cut file by decoding it.
 */
#define XF_PROBE_END 1u

/* The most a probe reads at the start and at the end of a file. */
#define XF_PROBE_WINDOW (64u << 10)

/*
 * The probe of a file read through rd.  Reads are bounded: XF_PROBE_WINDOW
 * at each end, a few bytes at each JPEG segment header (at most 4096
 * segments before the first scan, at most 4096 stray bytes before each
 * marker: past these bounds the file is called corrupt, though libjpeg,
 * which scans all of it, may still decode it), and for a WebP whose
 * headers lie past the first window (large metadata first), the whole
 * file up to 512 MiB.  Nothing is allocated of the size a header claims.
 * Returns the verdict, with why ("" when ok) and *out as above.
 */
enum xf_verdict xf_probe(const struct xf_reader *rd, uint64_t max_pixels,
    unsigned flags, struct xf_probe *out, char *why, size_t whylen);

/*
 * The same probe of a file held in memory, all len bytes of it: as
 * xf_probe through a reader of them, but without the bounds on JPEG
 * segments and stray bytes (a walk over memory costs no reads), so that
 * it walks every file libjpeg does.  What the decoders call.
 */
enum xf_verdict xf_probe_mem(const uint8_t *buf, size_t len,
    uint64_t max_pixels, unsigned flags, struct xf_probe *out, char *why,
    size_t whylen);

/*
 * The format of a file by its first n bytes, in words, for a file the
 * scan does not take ("a JPEG image", "a PNG image", "a WebP image", "a
 * BMP image", "a GIF image", "a TIFF image", ...); NULL when unknown.
 */
const char *xf_format_name(const uint8_t *p, size_t n);

/*
 * The max_pixels rule of every format, before anything of the image's
 * size is allocated: 0 when w x h is at most max_pixels (0: no bound),
 * else -EFBIG and why ("image too large: WxH is more than max_pixels (N)").
 */
int xf_pixels_allowed(
    uint32_t w, uint32_t h, uint64_t max_pixels, char *why, size_t whylen);

#endif
