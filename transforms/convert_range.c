/*
 * convert_range.c - a part of one sample's output, mixed as its batch is
 * (xf_convert_range): a batch from the cluster tier is converted so, a
 * reader's range at a time, from its uint8 samples (engine/tier.c's
 * tier_read).  Layer: transforms (transforms/), above convert.c and
 * convert_vbmi.c.
 *
 * A range of CHW values is a run of pixels for each channel it touches.
 * (Reading the pixels two or three channels share once for all of them,
 * their tables then taken from memory, was slower: bench/tier-recv's
 * "as read", 35-41 us an image against 30-34.)  Cutmix takes a box of
 * each sample from the one before: the runs are cut at the box's rows
 * and columns.  The values are convert.c's, to the bit: the same tables
 * and blends.
 */
#include <errno.h>
#include <string.h>

#include "transforms/convert_int.h"

/* What a part is converted with: the tables, the weights, the dtype. */
struct part {
	const struct tables *tb;
	float a, c; /* blend weights (mixup) */
	bool normalize;
	const float *mean, *std;
	enum xf_dtype dtype;
	struct kernels k;
};

/*
 * count values from pixel 0 of px to dst: channel ch's (CHW: a run of
 * one plane), or ch < 0 every channel's, in HWC order; blended with pv's
 * (the same pixels of the sample before) where pv is not NULL.
 */
static void
run(const struct part *pt, const uint8_t *px, const uint8_t *pv, int ch,
    size_t count, void *dst)
{
	const table_row *t = pv != NULL && pt->dtype == XF_FLOAT16
				 ? pt->tb->halff
				 : pt->tb->t;
	size_t done = 0;

	if (ch < 0) { /* HWC: count whole pixels, as convert.c writes them */
		struct xf_image im = {
		    .w = (uint32_t)count, .h = 1, .px = (uint8_t *)px};

		xf_conv_image(&im, pv, pt->a, pt->c, pt->normalize, pt->mean,
		    pt->std, pt->dtype, XF_HWC, pt->k, dst);
		return;
	}
#ifdef HAVE_AVX2_KERNELS
	if (count >= 8 && pt->k.avx2) {
		done = count & ~(size_t)7;
		xf_conv_run_avx2(px, pv, pt->a, pt->c, ch, done, t,
		    pt->dtype == XF_FLOAT16, dst);
	}
#endif
	for (size_t i = done; i < count; i++) {
		float x = t[ch][px[i * 3 + ch]];

		if (pv != NULL) { /* as convert.c's blend */
			float y = t[ch][pv[i * 3 + ch]] * pt->a;

			x = y + x * pt->c;
		}
		if (pt->dtype == XF_FLOAT32)
			((float *)dst)[i] = x;
		else
			((uint16_t *)dst)[i] =
			    pv != NULL ? xf_float_to_half(x)
				       : pt->tb->half[ch][px[i * 3 + ch]];
	}
}

/* Runs of channel ch (every one blended, or none) to their places. */
static void
segs(const struct part *pt, int ch, const struct seg *sg, size_t n)
{
#ifdef HAVE_AVX2_KERNELS
	if (pt->dtype == XF_FLOAT32 && pt->k.vbmi) {
		xf_conv_segs_vbmi(sg, n, ch, pt->a, pt->c, pt->tb);
		return;
	}
#endif
	for (size_t i = 0; i < n; i++)
		run(pt, sg[i].px, sg[i].pv, ch, sg[i].count, sg[i].dst);
}

/*
 * Cutmix: how many of the count pixels from pixel p (of a row of w) are
 * all inside its box (*boxed: taken from the sample before) or all out.
 */
static size_t
cut_run(const struct xf_mix *m, size_t w, size_t p, size_t count, bool *boxed)
{
	size_t y = p / w, x = p % w, len;

	*boxed = false;
	if (y < m->y0)
		len = (size_t)m->y0 * w - p;
	else if (y >= m->y1 || m->x1 <= m->x0)
		len = count;
	else if (x < m->x0)
		len = m->x0 - x;
	else if (x < m->x1) {
		len = m->x1 - x;
		*boxed = true;
	} else
		len = w - x;
	return len < count ? len : count;
}

/* Runs gathered for segs at a time. */
#define SEGS_MAX 64

/*
 * count pixels from pixel p of img, channel ch's values to dst (CHW),
 * mixed as m says: mixup blends every value with prev's, cutmix takes
 * the box's pixels from prev (cut at its rows and columns), else img's
 * own.
 */
static void
chw_span(const struct part *pt, const struct xf_image *img,
    const struct xf_image *prev, const struct xf_mix *m, int ch, size_t p,
    size_t count, uint8_t *dst)
{
	size_t es = pt->dtype == XF_FLOAT16 ? 2 : 4, w = img->w, n = 0;
	struct seg sg[SEGS_MAX];

	if (m == NULL || !m->cut) {
		sg[0] = (struct seg){
		    img->px + 3 * p, m ? prev->px + 3 * p : NULL, count, dst};
		segs(pt, ch, sg, 1);
		return;
	}
	while (count > 0) {
		bool boxed;
		size_t len = cut_run(m, w, p, count, &boxed);
		const uint8_t *src = boxed ? prev->px : img->px;

		sg[n++] = (struct seg){src + 3 * p, NULL, len, dst};
		if (n == SEGS_MAX) {
			segs(pt, ch, sg, n);
			n = 0;
		}
		dst += len * es;
		p += len;
		count -= len;
	}
	segs(pt, ch, sg, n);
}

/* HWC: count pixels from pixel p, every channel's values, as chw_span. */
static void
hwc_span(const struct part *pt, const struct xf_image *img,
    const struct xf_image *prev, const struct xf_mix *m, size_t p,
    size_t count, uint8_t *dst)
{
	size_t es = pt->dtype == XF_FLOAT16 ? 2 : 4, w = img->w;

	if (m == NULL || !m->cut) {
		run(pt, img->px + 3 * p, m ? prev->px + 3 * p : NULL, -1, count,
		    dst);
		return;
	}
	while (count > 0) {
		bool boxed;
		size_t len = cut_run(m, w, p, count, &boxed);

		run(pt, (boxed ? prev->px : img->px) + 3 * p, NULL, -1, len, dst);
		dst += len * 3 * es;
		p += len;
		count -= len;
	}
}

int
xf_convert_range(const struct xf_image *img, const struct xf_image *prev,
    const struct xf_mix *m, bool normalize, const float mean[3],
    const float std[3], enum xf_dtype dtype, enum xf_layout layout,
    size_t e0, size_t e1, void *dst)
{
	size_t n = (size_t)img->w * img->h, es;
	struct part pt = {.normalize = normalize,
	    .mean = mean,
	    .std = std,
	    .dtype = dtype,
	    .k = xf_conv_kernels()};
	uint8_t *d = dst;

	if (dtype == XF_UINT8 || e0 > e1 || e1 > 3 * n ||
	    (m != NULL && (prev == NULL || prev->w != img->w ||
			      prev->h != img->h)))
		return -EINVAL;
	es = dtype == XF_FLOAT16 ? 2 : 4;
	pt.tb = xf_conv_tables(normalize, mean, std);
	pt.k.stream = false; /* a reply's buffer: the kernel copies it next */
	if (m != NULL)
		xf_mix_weights(m, &pt.a, &pt.c);
	if (layout == XF_CHW) {
		while (e0 < e1) { /* one plane's run at a time */
			size_t ch = e0 / n, p = e0 % n;
			size_t len = n - p < e1 - e0 ? n - p : e1 - e0;

			chw_span(&pt, img, prev, m, (int)ch, p, len, d);
			d += len * es;
			e0 += len;
		}
		return 0;
	}
	while (e0 < e1) {
		size_t p = e0 / 3, k = e0 % 3;

		if (k != 0 || e1 - e0 < 3) { /* a part of a pixel */
			uint8_t one[3 * 4];
			size_t len = 3 - k < e1 - e0 ? 3 - k : e1 - e0;

			hwc_span(&pt, img, prev, m, p, 1, one);
			memcpy(d, one + k * es, len * es);
			d += len * es;
			e0 += len;
			continue;
		}
		size_t px = (e1 - e0) / 3; /* whole pixels */

		hwc_span(&pt, img, prev, m, p, px, d);
		d += px * 3 * es;
		e0 += px * 3;
	}
	return 0;
}
