/*
 * xf.h - the preprocessing pipeline: JPEG, PNG and WebP decode and the
 * image ops.  Layer: transforms/ (pixels); it includes nothing of ours,
 * and the model (core/), the engine, fs/ and the tools use it.  The
 * header probes of the formats are in transforms/probe.h.
 *
 * A pipeline is parsed once from its config text and is then immutable and
 * safe to use from any number of threads.  Images are 8-bit RGB, HWC, rows
 * packed (stride = 3 * w).  Every function here is reentrant; none keeps
 * global state.  Errors are 0 / negative errno plus a message in err.
 */
#ifndef FEEDFS_XF_H
#define FEEDFS_XF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum xf_dtype { XF_UINT8, XF_FLOAT16, XF_FLOAT32 };
enum xf_layout { XF_HWC, XF_CHW };

/*
 * An 8-bit RGB image; px is owned by whoever holds the struct and comes
 * from xf_alloc: it is freed with xf_free, on the thread that made it.
 * src_w x src_h, the frame: the size of the source image that this one
 * stands for, set by shrink (the image it received), in whose pixels a
 * random_resized_crop then draws its box (a cached prefix keeps it beside
 * the pixels).  0 x 0: none, the image is its own frame.  Every op that
 * makes a new image leaves it 0 x 0; flip keeps it.
 *
 * borrowed: px is the caller's, read only, and neither written nor freed
 * here (a cached value read in place, xf_run_suffix): an op that makes a
 * new image reads it, one that works in place copies it first.
 */
struct xf_image {
	uint32_t w, h;
	uint8_t *px; /* w * h * 3 bytes, HWC */
	uint32_t src_w, src_h;
	bool borrowed;
};

enum xf_opkind {
	XF_OP_DECODE, /* scaled: a JPEG may be DCT-scaled (PIL's draft) */
	XF_OP_RESIZE, /* h == 0: short side to w, aspect kept; else to w x h */
	XF_OP_CENTER_CROP, /* w x h, zero padded where the image is smaller */
	XF_OP_RRC,	   /* random_resized_crop to w x h */
	XF_OP_FLIP,	   /* horizontal, probability p */
	XF_OP_NORMALIZE,   /* applied at the output conversion, wherever written
			    */
	XF_OP_CACHE,	   /* end of the cached, deterministic prefix */
	/* Batch ops (transforms/mix.c): the last op, on the whole batch. */
	XF_OP_MIXUP,	      /* Beta(alpha[0], alpha[0]) */
	XF_OP_CUTMIX,	      /* Beta(alpha[1], alpha[1]) */
	XF_OP_MIXUP_CUTMIX,   /* cutmix with probability p, else mixup */
	XF_OP_GAUSSIAN_BLUR,  /* kernel ksize, sigma uniform in sigma[0..1] */
	XF_OP_RANDOM_ERASING, /* with probability p a box of the output to 0 */
	/* The per-sample augmentations of transforms/augment.c (issue 28). */
	XF_OP_TRIVIAL_AUGMENT, /* TrivialAugmentWide, 31 magnitude bins */
	XF_OP_RAND_AUGMENT,    /* RandAugment(n_ops, magnitude), 31 bins */
	XF_OP_AUTO_AUGMENT,    /* AutoAugment(policy) */
	XF_OP_COLOR_JITTER,    /* ColorJitter(jitter ranges) */
	XF_OP_GRAYSCALE,       /* RandomGrayscale(p), 3 channels out */
	/* Issue 36: F.solarize(img, threshold) (RandomSolarize with p=). */
	XF_OP_SOLARIZE,
	/* Short side to w when longer (Lanczos), never larger; keeps the
	 * frame for random_resized_crop (issue 36). */
	XF_OP_SHRINK,
};

struct xf_op {
	enum xf_opkind kind;
	uint32_t w, h;
	double scale[2], ratio[2]; /* RRC, RANDOM_ERASING */
	double p;                  /* FLIP, RANDOM_ERASING */
	float mean[3], std[3];     /* NORMALIZE */
	double alpha[2];           /* batch ops: mixup's, cutmix's */
	uint32_t ksize;            /* GAUSSIAN_BLUR: odd */
	double sigma[2];           /* GAUSSIAN_BLUR: min, max */
	uint32_t n_ops, magnitude; /* RAND_AUGMENT */
	int policy;                /* AUTO_AUGMENT: enum xf_aug_policy */
	/* COLOR_JITTER: brightness, contrast, saturation, hue ranges;
	 * jitter_on[k] false where torchvision's is None. */
	double jitter[4][2];
	bool jitter_on[4];
	double threshold; /* SOLARIZE: values >= it are inverted */
	/* p=P, the optional last argument of an op after cache: applied
	 * with probability p_apply (xf_op_applies); has_p false and p_apply
	 * 1 without it. */
	bool has_p;
	double p_apply;
	bool scaled; /* DECODE: decode(scaled) */
};

/*
 * The counter of op i's p= draw: (i << 32) + XF_APPLY_DRAW, apart from
 * every counter its own draws use ((i << 32) + k for small k, and those
 * plus multiples of 2^48 where rng_below draws again), so that adding
 * p= to an op changes neither what it draws when it applies nor any
 * other op's draws.
 */
#define XF_APPLY_DRAW 0xffffffffu

struct xf_pipeline {
	struct xf_op *ops;
	size_t nops;
	size_t cache_at;   /* index of the cache op; == nops when there is none */
	bool normalize;    /* a normalize op is present: mean/std below */
	float mean[3], std[3];
	uint32_t out_w, out_h; /* fixed output size; 0 when not fixed */
	uint64_t max_pixels;   /* larger source images are refused */
	const struct xf_op *batch_op; /* the last op when it is a batch op,
					 else NULL */
	size_t size_at;	       /* index of the op that fixes out_w x out_h */
};

/*
 * The default bound on a source image's width x height, checked from the
 * JPEG header before anything is allocated.  A 100-megapixel image is
 * 300 MB of RGB per worker, more than any camera photo of a training set
 * (medium-format sensors stop near 100 MP); beyond that a "JPEG" is almost
 * always a decompression bomb (a 1 KB file can claim 65500x65500, 12.8 GB
 * of RGB and more for a progressive decoder's coefficients).  A job can
 * raise or lower it with the max_pixels key.
 */
#define XF_DEFAULT_MAX_PIXELS 100000000u

/*
 * The most scans a JPEG may have (djpeg's -maxscans; libjpeg-turbo
 * suggests 500 for untrusted input).  Each scan of a progressive file is
 * one more pass over all of its coefficients, so a small file of
 * thousands of tiny refinement scans costs unbounded CPU; a file reaching
 * scan XF_MAX_SCANS + 1 is refused ("too many scans"), as broken.
 * jpeg_simple_progression writes 10 scans (6 for grayscale).
 */
#define XF_MAX_SCANS 500

/*
 * Parses pipeline text ("decode resize(256) cache random_resized_crop(224)
 * flip(0.5) normalize(imagenet)").  Refuses: unknown ops, bad arguments, no
 * leading decode, a second decode or cache, a random op before cache, an
 * output size that is not fixed (the pipeline must end in a crop or
 * resize(W,H) so that every sample has one shape), and ops out of the
 * order of their classes (pipeline.c's order_rule: normalize after every
 * pixel op, random_erasing after normalize and every op that changes the
 * image).  On error returns
 * -EINVAL with a message (without FILE:LINE; the caller adds it).
 */
int xf_pipeline_parse(const char *text, struct xf_pipeline **out, char *err,
    size_t errlen);
void xf_pipeline_free(struct xf_pipeline *pl);
/* Whether k is one of the augmentations of transforms/augment.c. */
bool xf_op_augment(enum xf_opkind k);
/*
 * A copy of pl whose output size is s x s: the op that fixes the output
 * (size_at) set to s x s (a resolution schedule's size of an epoch).
 * -EINVAL when that op comes before cache (the cached prefix would change
 * with the size) or is not square; -ENOMEM.
 */
int xf_pipeline_sized(
    const struct xf_pipeline *pl, uint32_t s, struct xf_pipeline **out);

/*
 * Canonical text of the cached prefix (ops before `cache`, normalize left out
 * since it acts at output time), e.g. "decode resize(256)"; numbers printed
 * so that equal ops give equal text.  Returns the length snprintf would.
 * When the pipeline has no cache op the prefix is empty ("").
 */
size_t xf_prefix_text(const struct xf_pipeline *pl, char *buf, size_t len);

/*
 * The decoder and its version ("libjpeg-turbo 2001005"): part of what a
 * cached prefix depends on, so part of its cache key.
 */
const char *xf_decoder_id(void);

/*
 * PNG (transforms/png.c).  xf_decode_max and everything above it decode a
 * PNG wherever they decode a JPEG: the format is told by the magic bytes.
 * xf_png_decoder_id ("libspng 0.7.3") is part of the cache key of PNG
 * samples only (a JPEG's key does not change with libspng).
 */
const char *xf_png_decoder_id(void);
bool xf_is_png(const uint8_t *buf, size_t len);
/*
 * PNG to 8-bit RGB as PIL's convert("RGB") (gray replicated, palette
 * looked up, alpha dropped), 16-bit samples as round(v / 257); interlaced
 * files too.  -EFBIG ("image too large: ...") over max_pixels (0: no
 * bound) before anything of the image's size is allocated; -EINVAL
 * ("corrupt PNG: ...", "not a PNG") for a damaged file (a bad CRC of any
 * chunk, a truncated stream), -ENOMEM.
 */
int xf_png_decode(const uint8_t *png, size_t len, uint64_t max_pixels,
    struct xf_image *out, char *err, size_t errlen);

/*
 * WebP (transforms/webp.c, issue 26), told by its magic bytes (RIFF....WEBP)
 * as PNG is.  xf_webp_decoder_id ("libwebp 1.2.4") is part of the cache key
 * of WebP samples only.  xf_webp_decode: still WebP (lossy or lossless,
 * with or without alpha) to 8-bit RGB as PIL's convert("RGB") (alpha
 * dropped); -EFBIG over max_pixels (0: no bound) before anything of the
 * image's size is allocated; -EINVAL ("corrupt WebP: ...", "not a WebP")
 * for a damaged or truncated file; -ENOTSUP for an animated one; -ENOMEM.
 * The pixels come from xf_alloc.  The header alone: xf_probe_mem
 * (transforms/probe.h).
 */
const char *xf_webp_decoder_id(void);
bool xf_is_webp(const uint8_t *buf, size_t len);
int xf_webp_decode(const uint8_t *buf, size_t len, uint64_t max_pixels,
    struct xf_image *out, char *err, size_t errlen);

/*
 * The kinds of source file, by magic bytes (transforms/probe.c, where the
 * header probes are dispatched), and the id of the decoder
 * that a cache key of such a source names beside the job's text: NULL for
 * JPEG (xf_decoder_id is in every job's text), xf_png_decoder_id,
 * xf_webp_decoder_id.  (XF_SRC_NONE: none of them, as a probe says;
 * xf_src_kind takes what is neither PNG nor WebP for a JPEG.)
 */
enum xf_src { XF_SRC_JPEG, XF_SRC_PNG, XF_SRC_WEBP, XF_SRC_NONE };
enum xf_src xf_src_kind(const uint8_t *buf, size_t len);
const char *xf_src_decoder_id(enum xf_src kind);

/*
 * Whether ops of kind k draw random numbers (such an op must come after
 * cache; without cache the prefix ends before the first one).
 */
bool xf_op_random(enum xf_opkind k);
/* Whether op draws per sample: a random kind, or any op with p=. */
bool xf_op_draws(const struct xf_op *op);
/*
 * Whether op i of pl applies to the sample of rngkey: always without
 * p=; with it, when its uniform draw (counter (i << 32) + XF_APPLY_DRAW)
 * is below p_apply, as torchvision's RandomApply applies its transforms
 * when torch.rand(1) <= p (the two differ only on a draw equal to p).
 */
bool xf_op_applies(const struct xf_pipeline *pl, size_t i, uint64_t rngkey);

/*
 * Refuses combinations of pipeline and output: normalize with uint8,
 * random_erasing with uint8 and no normalize (it would erase to black),
 * and mixup, which blends pixels, with uint8.
 */
int xf_check_output(const struct xf_pipeline *pl, enum xf_dtype dtype,
    char *err, size_t errlen);

/* Bytes of one output sample: out_w * out_h * 3 * sizeof(dtype). */
size_t xf_sample_bytes(const struct xf_pipeline *pl, enum xf_dtype dtype);

/*
 * Decode a JPEG (grayscale, YCbCr, CMYK, YCCK all give RGB) and run the ops
 * before `cache` (all ops when there is no cache op, except the random ones
 * and normalize, which xf_run_suffix does).  The decode is Pillow's full
 * one, unless the pipeline says decode(scaled): then a JPEG is DCT-scaled
 * (1/2, 1/4, 1/8) where the op after decode is a resize or a shrink and
 * the scaled image stays at least twice that op's output in both sides.
 * On success *out holds a new image, with its frame (src_w x src_h) when
 * the prefix holds a shrink.  -EINVAL/-ENOMEM with a message on
 * error (XF_EMPTY_FILE for no bytes at all, as xf_run says it too; "not a
 * JPEG", "corrupt data: ...", "too many scans (501 > 500)"),
 * -EFBIG for an image over the pipeline's max_pixels: the source image,
 * and every image an op would make, checked before it is allocated
 * ("resize(256): output 256x16768000 exceeds max_pixels (100000000)";
 * "intermediate" for the horizontal pass of a resize, its output width x
 * the rows it reads).
 */
#define XF_EMPTY_FILE "empty file" /* the reason, everywhere (--check) */
int xf_run_prefix(const struct xf_pipeline *pl, const uint8_t *jpeg,
    size_t len, struct xf_image *out, char *err, size_t errlen);

/*
 * Run the ops after `cache` on img (consumed: freed or replaced; a
 * borrowed img's px is only read, and stays the caller's), drawing
 * random numbers from stream rngkey only, then convert to dtype and layout
 * (normalizing if asked) into dst, which holds xf_sample_bytes() bytes.
 * Every image an op would make is bounded by max_pixels as in
 * xf_run_prefix: -EFBIG (there is no message here: xf_run gives one).
 * -EINVAL for an img of a shape the ops do not turn into out_w x out_h.
 */
int xf_run_suffix(const struct xf_pipeline *pl, struct xf_image *img,
    uint64_t rngkey, enum xf_dtype dtype, enum xf_layout layout, void *dst);

/*
 * One op of xf_run_suffix, for bench/op-cost: xf_run_op runs op i of pl
 * on img (replaced in place) as xf_run_suffix does, drawing from rngkey
 * (0, or an error with the message in err); xf_run_op_output does op i's
 * part at the output conversion on dst, a converted w x h sample
 * (random_erasing's box; nothing for the other ops), which only
 * pipelines with xf_has_output_ops have.
 */
int xf_run_op(const struct xf_pipeline *pl, size_t i, struct xf_image *img,
    uint64_t rngkey, char *err, size_t errlen);
/* Whether an op of pl has a part at the output conversion. */
bool xf_has_output_ops(const struct xf_pipeline *pl);
void xf_run_op_output(const struct xf_pipeline *pl, size_t i, uint64_t rngkey,
    enum xf_dtype dtype, enum xf_layout layout, uint32_t w, uint32_t h,
    void *dst);

/*
 * The whole pipeline on a JPEG, for callers that have nothing to cache:
 * xf_run_prefix then xf_run_suffix, except that a pipeline without cache
 * that starts "decode random_resized_crop" draws the crop box from the
 * size in the JPEG header (the same box as the full path) and decodes
 * only that box, at the smallest DCT scale that keeps the box at least
 * the crop's output size (xf_decode_box), then resizes it.  The output is
 * then close to, not bit-exact with, a full decode + crop + resize (the
 * DCT-scaled IDCT is not Pillow's antialiasing filter); it is still a
 * pure function of (jpeg, rngkey).  Errors as xf_run_prefix, with the
 * message in err.
 */
int xf_run(const struct xf_pipeline *pl, const uint8_t *jpeg, size_t len,
    uint64_t rngkey, enum xf_dtype dtype, enum xf_layout layout, void *dst,
    char *err, size_t errlen);

/*
 * The size of the prefix image (xf_run_prefix's) of a w x h source,
 * from the ops alone: what a cached value of it holds, w x h x 3 bytes
 * (issue 26: feedfs --check's exact raw size).  Returns the pixels of
 * the largest image the prefix makes (source, outputs and a resize's
 * intermediate), which xf_run_prefix refuses over max_pixels.
 */
uint64_t xf_prefix_dims(const struct xf_pipeline *pl, uint32_t w, uint32_t h,
    uint32_t *ow, uint32_t *oh);

/* The image size from a JPEG's frame header, without decoding: the JPEG
 * probe's (transforms/probe.h), 0; or -EINVAL when the probe does not
 * accept the headers (the decoder then says what is wrong). */
int xf_jpeg_dims(const uint8_t *jpeg, size_t len, uint32_t *w, uint32_t *h);
/* A JPEG's magic bytes as the decoder takes them: SOI and a marker (FF D8
 * FF); else "not a JPEG" (transforms/jpeg_probe.c). */
bool xf_is_jpeg(const uint8_t *buf, size_t len);

/* The single ops, exported for tests.  All allocate a new out->px. */
int xf_decode(const uint8_t *jpeg, size_t len, uint32_t min_w, uint32_t min_h,
    struct xf_image *out, char *err, size_t errlen);
/* xf_decode refusing (-EFBIG, "image too large: ...") more than max_pixels
 * (0: no bound); xf_decode uses XF_DEFAULT_MAX_PIXELS.  Both refuse a file
 * of more than XF_MAX_SCANS scans (-EINVAL, "too many scans"), and what
 * the JPEG probe finds unsupported (-ENOTSUP, in its words: samples of
 * other than 8 bits, a lossless or hierarchical process).  Both decode a
 * PNG or a WebP too (xf_png_decode, xf_webp_decode; min_w and min_h do
 * not apply). */
int xf_decode_max(const uint8_t *jpeg, size_t len, uint32_t min_w,
    uint32_t min_h, uint64_t max_pixels, struct xf_image *out, char *err,
    size_t errlen);
int xf_resize(const struct xf_image *in, uint32_t w, uint32_t h,
    struct xf_image *out);
/* Pillow's filters: BILINEAR (xf_resize's), LANCZOS (shrink's). */
enum xf_filter { XF_BILINEAR, XF_LANCZOS };
/* Pillow's resize((w, h), f) of the whole image. */
int xf_resize_filter(const struct xf_image *in, uint32_t w, uint32_t h,
    enum xf_filter f, struct xf_image *out);
/* The box (x, y, cw, ch), inside in, resized to w x h: the bytes of
 * xf_crop then xf_resize, without the copy.  -EINVAL if not inside. */
int xf_resize_box(const struct xf_image *in, uint32_t x, uint32_t y,
    uint32_t cw, uint32_t ch, uint32_t w, uint32_t h, struct xf_image *out);
/* Pillow's resize((w, h), BILINEAR, box): box = x0, y0, x1, y1 in in's
 * pixels, fractional, inside in; taps outside in are left out. */
int xf_resize_fbox(const struct xf_image *in, const float box[4], uint32_t w,
    uint32_t h, struct xf_image *out);
/*
 * A partial decode: only the iMCU rows and columns that cover the box
 * (x, y, cw, ch) of the full image, at the smallest DCT scale M/8 at which
 * the box still measures at least tw x th.  *out holds the whole pixels
 * covering the scaled box; box gets the box in out's pixels.  Damaged data
 * below the box goes undetected (it is not read).  Errors as xf_decode_max.
 */
int xf_decode_box(const uint8_t *jpeg, size_t len, uint64_t max_pixels,
    uint32_t x, uint32_t y, uint32_t cw, uint32_t ch, uint32_t tw,
    uint32_t th, struct xf_image *out, float box[4], char *err,
    size_t errlen);
int xf_crop(const struct xf_image *in, int32_t x, int32_t y, uint32_t w,
    uint32_t h, struct xf_image *out); /* zero pads outside in */
void xf_flip(struct xf_image *img);  /* in place */
/* torchvision RandomResizedCrop.get_params with draws from rngkey. */
void xf_rrc_params(uint32_t w, uint32_t h, const double scale[2],
    const double ratio[2], uint64_t rngkey, uint64_t counter, int32_t *x,
    int32_t *y, uint32_t *cw, uint32_t *ch);
/*
 * The box random_resized_crop op i of pl (an XF_OP_RRC) draws for img with
 * key rngkey, in the pixels of img's frame (src_w x src_h when set, else
 * img's own): get_params of the source image, as torchvision draws it
 * there.  Returns whether the frame is img itself (the box is then in
 * img's pixels, else it is scaled into them by img->w / src_w, img->h /
 * src_h: xf_rrc_fbox).
 */
bool xf_rrc_box(const struct xf_pipeline *pl, size_t i,
    const struct xf_image *img, uint64_t rngkey, int32_t *x, int32_t *y,
    uint32_t *cw, uint32_t *ch);
/* The box (x, y, cw, ch) of img's frame in img's pixels (x0 y0 x1 y1),
 * clamped to them: where a shrunk image holds the source's box. */
void xf_rrc_fbox(const struct xf_image *img, int32_t x, int32_t y, uint32_t cw,
    uint32_t ch, float box[4]);
void xf_convert(const struct xf_image *img, bool normalize, const float mean[3],
    const float std[3], enum xf_dtype dtype, enum xf_layout layout, void *dst);
uint16_t xf_float_to_half(float f);
float xf_half_to_float(uint16_t h); /* exact */

/*
 * Batch ops (transforms/mix.c): torchvision v2's MixUp and CutMix.  The
 * batch is paired with itself rolled by one (sample i with sample i - 1,
 * sample 0 with the last: batch.roll(1, 0)); one draw per batch, a pure
 * function of the batch's stream key (the caller's: job seed, epoch and
 * batch identity in a domain of their own, RNG_DOMAIN_BATCHMIX).
 *
 * The draws, counters of that stream: lambda ~ Beta(a, a) as X / (X + Y)
 * of two Gamma(a) draws (Marsaglia and Tsang's method, each on a stream
 * of counters of its own: normals by Box-Muller; for a < 1, Gamma(a + 1)
 * times U^(1/a)), computed in logarithms so that a small alpha does not
 * underflow, and rounded to float32 as torch's Beta sample is.  CutMix's
 * box: center uniform in the image (integers, as torch.randint), half
 * sides int(r * W), int(r * H) with r = 0.5 * sqrt(1 - lambda), clamped
 * to the image, and lambda corrected to 1 - box area / image area.
 * mixup_cutmix: cutmix when a uniform draw is below p (timm's switch_prob;
 * torchvision's recipe is RandomChoice([MixUp, CutMix]), p = 0.5).
 */
struct xf_mix {
	bool cut;       /* cutmix: the box; else mixup */
	double lam;     /* the weight of a sample's own pixels and label */
	uint32_t x0, y0, x1, y1; /* cutmix: [x0, x1) x [y0, y1), may be empty */
};
/* Its blend weights: prev * a + own * c (a mixup's values and labels). */
static inline void
xf_mix_weights(const struct xf_mix *m, float *a, float *c)
{
	*a = (float)(1.0 - m->lam);
	*c = (float)m->lam;
}
/* A Beta(alpha, alpha) draw of stream key (counters from stream << 32 on,
 * two streams: stream and stream + 1); alpha > 0.  For tests. */
double xf_beta(uint64_t key, uint64_t stream, double alpha);
/* The draw of batch op op (a batch op kind) for images of w x h. */
void xf_mix_params(const struct xf_op *op, uint64_t key, uint32_t w,
    uint32_t h, struct xf_mix *m);
/*
 * Mix n samples of w x h x 3 (dtype, layout), contiguous at px, in place,
 * as v2 does: mixup out = roll(x) * f32(1 - lam) + x * f32(lam) in float32
 * (float16: computed in float32 from the halves, rounded once to half);
 * cutmix copies the box of the rolled batch (any dtype).  tmp holds one
 * sample.  Mixup with uint8 is -EINVAL (xf_check_output refuses it).
 * xf_mix_images_scalar: the portable loops, which the AVX2 ones equal.
 */
int xf_mix_images(const struct xf_mix *m, void *px, uint32_t n, uint32_t w,
    uint32_t h, enum xf_dtype dtype, enum xf_layout layout, void *tmp);
int xf_mix_images_scalar(const struct xf_mix *m, void *px, uint32_t n,
    uint32_t w, uint32_t h, enum xf_dtype dtype, enum xf_layout layout,
    void *tmp);
/*
 * A part of one sample of a batch whose uint8 samples are all at hand
 * (the cluster tier's): values [e0, e1) of sample img's output
 * (xf_convert's layout), mixed with prev (the sample before it in the
 * batch, the last for the first) as xf_mix_images mixes the batch (m:
 * mixup or cutmix; NULL: not mixed), to dst (value e0 at dst), to the
 * same bits.  A batch from the cluster tier is converted so, a reader's
 * range at a time.  Float dtypes only; -EINVAL for uint8, a range past
 * the sample or images of two sizes.
 */
int xf_convert_range(const struct xf_image *img, const struct xf_image *prev,
    const struct xf_mix *m, bool normalize, const float mean[3],
    const float std[3], enum xf_dtype dtype, enum xf_layout layout,
    size_t e0, size_t e1, void *dst);
/*
 * Soft labels of n samples: out (n x nclasses float32) row i =
 * one_hot(label[i - 1]) * f32(1 - lam) + one_hot(label[i]) * f32(lam),
 * label[-1] being label[n - 1], in float32 as v2's _mixup_label.  A label
 * outside 0..nclasses-1 (a sample without one) adds nothing.
 */
void xf_mix_labels(const struct xf_mix *m, const int64_t *labels,
    uint32_t n, uint32_t nclasses, float *out);
/*
 * The same over rows: n rows of k float32 (one-hot or multi-hot) mixed
 * in place, row i = row[i - 1] * f32(1 - lam) + row[i] * f32(lam),
 * row[-1] being the last row as it was (timm's and v2's mixing of
 * multi-hot targets); one-hot rows give xf_mix_labels's bytes.  tmp
 * holds k floats.
 */
void xf_mix_rows(
    const struct xf_mix *m, float *rows, uint32_t n, uint32_t k, float *tmp);

/*
 * gaussian_blur and random_erasing (transforms/blur.c), as torchvision
 * 0.14's GaussianBlur and RandomErasing.
 *
 * xf_gauss_kernel: _get_gaussian_kernel1d(k, sigma) in float32 into w[k].
 * xf_blur_sigma: the sigma of op (uniform in op->sigma, float32, as
 * GaussianBlur.get_params) drawn at counter of rngkey.
 * xf_gaussian_blur: F.gaussian_blur(img, [k, k], [sigma, sigma]) of a uint8
 * image, in place: reflect padding (repeated for a side shorter than k / 2,
 * where torch refuses), a separable float32 kernel, rounded half to even.
 * AVX2 where the CPU has it, unless FEEDFS_XF_SCALAR is set: the same
 * float operations in the same order, the same bytes.  0 or -ENOMEM.
 */
void xf_gauss_kernel(uint32_t k, float sigma, float *w);
float xf_blur_sigma(const struct xf_op *op, uint64_t rngkey, uint64_t counter);
int xf_gaussian_blur(struct xf_image *img, uint32_t k, float sigma);
/*
 * RandomErasing's draw for an output of w x h at counter of rngkey: false
 * when it erases nothing (the p draw, or no box fits in 10 attempts), else
 * true and the box (top, left, eh, ew), inside the output.
 */
bool xf_erasing_params(const struct xf_op *op, uint32_t w, uint32_t h,
    uint64_t rngkey, uint64_t counter, uint32_t *top, uint32_t *left,
    uint32_t *eh, uint32_t *ew);
/* The box of a converted w x h sample in dst set to 0 (zero bytes). */
void xf_erase(void *dst, enum xf_dtype dtype, enum xf_layout layout,
    uint32_t w, uint32_t h, uint32_t top, uint32_t left, uint32_t eh,
    uint32_t ew);

/*
 * Scratch arenas.  A thread that makes many samples installs an arena
 * (xf_arena_use), and the buffers of the ops (decoded and resized pixels,
 * a resize's intermediate rows) come from it and go back to it, their
 * pages kept: a steady state faults in no fresh page.  An arena keeps at
 * most cap bytes (xf_arena_bytes: how many now, for the caller's memory
 * budget); what does not fit, and small requests, are malloc'd.  An arena
 * belongs to one thread at a time; xf_arena_free it after that thread has
 * stopped using it (or installed NULL).
 *
 * xf_alloc: n bytes from the calling thread's arena, else from malloc
 * (NULL: no memory).  xf_free: p from xf_alloc on this thread, or from
 * malloc (NULL is fine).  Without an arena installed, they are malloc and
 * free.
 */
struct xf_arena;
struct xf_arena *xf_arena_new(size_t cap);
void xf_arena_free(struct xf_arena *a);
void xf_arena_use(struct xf_arena *a);
/*
 * The owner's count of buffers the arena does not keep (over half its
 * cap: a large image and its copies): count(arg, n, true) before such a
 * buffer of n bytes is allocated, count(arg, n, false) once it is freed
 * (or the arena is, whichever comes first), on the arena's thread.  It
 * lets a memory budget count them and make room for them first.  At most
 * 16 such buffers are counted at once; more are malloc'd uncounted.
 */
void xf_arena_count(struct xf_arena *a,
    void (*count)(void *arg, size_t n, bool held), void *arg);
size_t xf_arena_bytes(const struct xf_arena *a);
/* Unmap the blocks a keeps that are not handed out (an idle worker's:
 * its next samples map fresh ones); the bytes unmapped.  On the arena's
 * thread, as every call but xf_arena_free. */
size_t xf_arena_trim(struct xf_arena *a);
/* Requests served by a block kept, and blocks mapped (fresh pages). */
void xf_arena_counts(const struct xf_arena *a, uint64_t *reused,
    uint64_t *fresh);
void *xf_alloc(size_t n);
void xf_free(void *p);

/*
 * Per-sample augmentations (transforms/augment.c, issue 28): torchvision
 * 0.14's transforms.functional on uint8 tensors (the tensor path, not PIL),
 * bit for bit for the colour ops, with the geometric ones (NEAREST, fill
 * 0) computed in float32 as torchvision's affine grid is.
 *
 * The ops of TrivialAugmentWide, RandAugment and AutoAugment, in the order
 * of torchvision's _augmentation_space (TrivialAugmentWide and RandAugment
 * choose among the first 14; AutoAugment's policies also name INVERT).
 */
enum xf_aug {
	XF_AUG_IDENTITY,
	XF_AUG_SHEAR_X,
	XF_AUG_SHEAR_Y,
	XF_AUG_TRANSLATE_X,
	XF_AUG_TRANSLATE_Y,
	XF_AUG_ROTATE,
	XF_AUG_BRIGHTNESS,
	XF_AUG_COLOR,
	XF_AUG_CONTRAST,
	XF_AUG_SHARPNESS,
	XF_AUG_POSTERIZE,
	XF_AUG_SOLARIZE,
	XF_AUG_AUTOCONTRAST,
	XF_AUG_EQUALIZE,
	XF_AUG_INVERT,
	XF_AUG_COUNT
};
enum xf_aug_policy { XF_AUG_POLICY_IMAGENET };

/* The most steps one op draws: rand_augment's n_ops is at most this. */
#define XF_AUG_MAX_STEPS 16

/* One step of an augment op: op with magnitude mag (signed, torchvision's
 * float(magnitudes[bin]) with the sign applied), or skipped (!on: an
 * AutoAugment sub-policy whose probability draw failed). */
struct xf_aug_step {
	int op;     /* enum xf_aug */
	int bin;    /* the magnitude bin; -1 for ops without magnitudes */
	int neg;    /* 1: the sign draw negated mag; -1: not drawn */
	bool on;
	double mag;
};

/*
 * What op i of a pipeline draws for one sample (key rngkey) on an image
 * of w x h: for the augment ops the steps in order, AutoAugment's policy
 * and its two probability draws; for color_jitter the four factors
 * (brightness, contrast, saturation, hue; unused where !jitter_on) and
 * their order (torchvision's fn_idx); for grayscale whether it applies.
 */
struct xf_aug_params {
	int kind; /* enum xf_opkind */
	uint32_t nsteps;
	struct xf_aug_step step[XF_AUG_MAX_STEPS];
	uint32_t policy_id;
	float probs[2];
	uint8_t order[4];
	double factor[4];
	bool on[4];
	bool apply; /* grayscale */
};

/* Draws from the op's own counters (i << 32) + k only.  -EINVAL when op
 * i is not one of these kinds. */
int xf_aug_params(const struct xf_pipeline *pl, size_t i, uint64_t rngkey,
    uint32_t w, uint32_t h, struct xf_aug_params *out);
/* Applies drawn parameters to img in place (the geometric ops use a
 * scratch buffer: -ENOMEM). */
int xf_aug_apply(const struct xf_aug_params *p, struct xf_image *img);
/* One op of torchvision's _apply_op with its final magnitude, in place. */
int xf_aug_op(struct xf_image *img, int op, double mag);
/* The single colour ops of ColorJitter and RandomGrayscale, in place. */
void xf_adjust_brightness(struct xf_image *img, double f);
void xf_adjust_contrast(struct xf_image *img, double f);
void xf_adjust_saturation(struct xf_image *img, double f);
void xf_adjust_hue(struct xf_image *img, double f);
void xf_grayscale(struct xf_image *img);
/* The op's name as torchvision's _augmentation_space writes it. */
const char *xf_aug_name(int op);

#endif
