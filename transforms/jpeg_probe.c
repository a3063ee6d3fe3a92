/*
 * jpeg_probe.c - the JPEG header probe, beside its decoder (decode.c):
 * the markers walked from SOI to the first scan's header, the frame
 * header's facts and rules (see probe.h).  Layer: transforms/ (pixels).
 *
 * A JPEG starts with SOI and a marker (xf_is_jpeg: FF D8 FF, as the
 * decoder wants it).  The walk then reads markers as libjpeg's
 * next_marker does: stray bytes and stuffed zeros (FF 00) before a marker
 * are skipped (libjpeg warns, JWRN_EXTRANEOUS_DATA, which the decoder
 * allows), and so are fill bytes (FF FF); SOI, TEM and RSTn stand alone;
 * every other marker has a length (under 2, an APPn, COM or DNL segment
 * is taken as empty, as libjpeg takes it).  The first frame header (SOFn)
 * gives the size, the components, the precision and the process; the
 * rules are applied there: a lossless or hierarchical process
 * (libjpeg-turbo decodes none) or samples of other than 8 bits are
 * unsupported.  An image over max_pixels is refused once the scan header
 * is reached, as the decoder refuses it after jpeg_read_header.
 *
 * With XF_PROBE_END, a file is judged cut short when no end-of-image
 * marker (FF D9) follows the first scan's header within the last
 * XF_PROBE_WINDOW bytes: scan data stuffs every FF byte, so a file cut in
 * its scans has none there.  That finds a file cut short, which is what
 * copies and downloads leave, not damage inside the data (a corrupt
 * entropy code, too many scans): that is the decoder's to find.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "transforms/probe.h"
#include "transforms/probe_int.h"
#include "transforms/xf.h"

/* Through a reader: the segments read before the first scan, and the
 * stray bytes skipped before each marker (see probe.h). */
#define JPEG_MAX_SEGMENTS 4096
#define JPEG_MAX_STRAY 4096

static bool
sof_marker(uint8_t m)
{
	return m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc;
}

/*
 * The markers libjpeg skips by their length (APPn, COM, DNL): a length
 * under 2 skips nothing (skip_variable), where the others' is an error.
 */
static bool
skipped_marker(uint8_t m)
{
	return (m >= 0xe0 && m <= 0xef) || m == 0xfe || m == 0xdc;
}

/*
 * Skip to the next 0xff at or after *pos (stray bytes, as libjpeg does):
 * 0, -ENOENT when there is none (within JPEG_MAX_STRAY bytes through a
 * reader), or the reader's -errno.
 */
static int
to_marker(const struct probe_in *in, uint64_t *pos, uint8_t *buf)
{
	size_t want = probe_bounded(in) ? JPEG_MAX_STRAY : SIZE_MAX;
	const uint8_t *p, *ff;
	ssize_t n;

	if ((n = probe_at(in, *pos, want, buf, &p)) < 0)
		return (int)n;
	if ((ff = memchr(p, 0xff, (size_t)n)) == NULL)
		return -ENOENT;
	*pos += (uint64_t)(ff - p);
	return 0;
}

/* The frame header at b (SOFm, 10 bytes): its facts into out, its rules. */
static enum xf_verdict
frame(uint8_t m, const uint8_t *b, struct xf_probe *out, char *why, size_t len)
{
	out->sof = (uint8_t)(m - 0xc0);
	out->depth = b[4];
	out->h = probe_be16(b + 5);
	out->w = probe_be16(b + 7);
	out->components = b[9];
	out->progressive = m == 0xc2 || m == 0xca;
	if (m == 0xc3 || (m >= 0xc5 && m <= 0xc7) || m == 0xcb || m >= 0xcd) {
		snprintf(why, len,
		    "a lossless or hierarchical JPEG (SOF%d), which "
		    "libjpeg-turbo does not decode",
		    m - 0xc0);
		return XF_PROBE_UNSUPPORTED;
	}
	if (b[4] != 8) {
		snprintf(why, len,
		    "a %u-bit JPEG (data precision %u): only 8-bit samples "
		    "are decoded",
		    b[4], b[4]);
		return XF_PROBE_UNSUPPORTED;
	}
	if (out->w == 0 || out->h == 0) {
		snprintf(why, len, "corrupt JPEG: an image of %ux%u",
		    (unsigned)out->w, (unsigned)out->h);
		return XF_PROBE_CORRUPT;
	}
	return XF_PROBE_OK;
}

/*
 * The walk from SOI to the first scan's header: *sos its offset, the
 * frame's facts in out; a verdict other than ok when it cannot get there.
 */
static enum xf_verdict
walk(const struct probe_in *in, uint64_t *sos, struct xf_probe *out, char *why,
    size_t len)
{
	uint8_t b[JPEG_MAX_STRAY];
	uint64_t pos = 2;
	bool sof = false;

	for (unsigned seg = 0;; seg++) {
		const uint8_t *p;
		enum xf_verdict v;
		ssize_t n;
		uint32_t seglen;
		uint8_t m;
		int e;

		if (probe_bounded(in) && seg >= JPEG_MAX_SEGMENTS) {
			snprintf(why, len,
			    "corrupt JPEG: no scan in %d segments",
			    JPEG_MAX_SEGMENTS);
			return XF_PROBE_CORRUPT;
		}
		if ((n = probe_at(in, pos, 10, b, &p)) < 0)
			return probe_unreadable((int)n, why, len);
		if (n < 2) {
			snprintf(why, len, "JPEG cut in its headers");
			return XF_PROBE_TRUNCATED;
		}
		if (p[0] != 0xff) {
			if ((e = to_marker(in, &pos, b)) == -ENOENT) {
				snprintf(why, len,
				    "corrupt JPEG: no marker at offset "
				    "%" PRIu64,
				    pos);
				return XF_PROBE_CORRUPT;
			}
			if (e != 0)
				return probe_unreadable(e, why, len);
			continue;
		}
		m = p[1];
		if (m == 0xff) { /* fill byte */
			pos++;
			continue;
		}
		if (m == 0x00) { /* a stuffed zero: stray data */
			pos += 2;
			continue;
		}
		if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) {
			pos += 2;
			continue;
		}
		if (m == 0xd9) {
			snprintf(why, len,
			    "corrupt JPEG: end of image before any scan");
			return XF_PROBE_CORRUPT;
		}
		if (n < 4) {
			snprintf(why, len, "JPEG cut in its headers");
			return XF_PROBE_TRUNCATED;
		}
		if ((seglen = probe_be16(p + 2)) < 2) {
			if (!skipped_marker(m)) {
				snprintf(why, len,
				    "corrupt JPEG: segment length %u", seglen);
				return XF_PROBE_CORRUPT;
			}
			seglen = 2; /* libjpeg skips nothing of it */
		}
		if (pos + 2 + seglen > in->size) {
			snprintf(why, len,
			    "JPEG cut short: a segment at offset %" PRIu64
			    " runs past the end",
			    pos);
			return XF_PROBE_TRUNCATED;
		}
		if (m == 0xda) {
			if (!sof) {
				snprintf(why, len,
				    "corrupt JPEG: a scan before the frame "
				    "header");
				return XF_PROBE_CORRUPT;
			}
			*sos = pos;
			return XF_PROBE_OK;
		}
		if (sof_marker(m) && !sof) {
			if (n < 10) {
				snprintf(why, len, "JPEG cut in its headers");
				return XF_PROBE_TRUNCATED;
			}
			if ((v = frame(m, p, out, why, len)) != XF_PROBE_OK)
				return v;
			sof = true;
		}
		pos += 2 + seglen;
	}
}

bool
xf_is_jpeg(const uint8_t *buf, size_t len)
{
	return len >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff;
}

enum xf_verdict
jpeg_probe(const struct probe_in *in, uint64_t max_pixels, unsigned flags,
    struct xf_probe *out, char *why, size_t len)
{
	static const uint8_t eoi[2] = {0xff, 0xd9};
	enum xf_verdict v;
	uint64_t sos = 0;
	bool found;
	int e;

	out->format = XF_SRC_JPEG;
	if (in->hn >= 3 && !xf_is_jpeg(in->head, in->hn)) {
		/* libjpeg would skip stray bytes here; the decoder does not */
		snprintf(
		    why, len, "not a JPEG: no marker after its start of image");
		return XF_PROBE_CORRUPT;
	}
	if ((v = walk(in, &sos, out, why, len)) != XF_PROBE_OK)
		return v;
	if (xf_pixels_allowed(out->w, out->h, max_pixels, why, len) != 0) {
		out->too_large = true;
		return XF_PROBE_UNSUPPORTED;
	}
	if (!(flags & XF_PROBE_END))
		return XF_PROBE_OK;
	if ((e = probe_tail_has(in, sos + 2, eoi, sizeof(eoi), &found)) != 0)
		return probe_unreadable(e, why, len);
	if (!found) {
		snprintf(why, len,
		    "no end-of-image marker after the scan data: JPEG cut "
		    "short");
		return XF_PROBE_TRUNCATED;
	}
	return XF_PROBE_OK;
}

/*
 * The image size from a JPEG's frame header, without decoding (for the
 * DCT scale and the partial decode of ops.c): 0, or -EINVAL when the
 * probe does not find one it accepts (the decoder then says why).
 */
int
xf_jpeg_dims(const uint8_t *jpeg, size_t len, uint32_t *w, uint32_t *h)
{
	struct xf_probe pr;
	char why[160];

	if (!xf_is_jpeg(jpeg, len))
		return -EINVAL;
	if (probe_mem_as(jpeg_probe, jpeg, len, 0, &pr, why, sizeof(why)))
		return -EINVAL; /* not XF_PROBE_OK */
	*w = pr.w;
	*h = pr.h;
	return 0;
}
