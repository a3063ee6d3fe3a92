/*
 * cred_parse.c - layer: dataset/remote/ (the HTTP/S3 client; see cred.h):
 * what credential sources give, parsed with no I/O: a profile's key in the
 * AWS shared credentials and config files, an element of STS's XML responses,
 * an ISO 8601 time, IMDS's JSON (jansson, its allocations in the arena).
 * Every byte is looked at within the length given, never past it; no message
 * holds a byte of a value.  fuzz/fuzz_cred.c feeds all of it.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset/remote/cred.h"

/* ---- profile files ---- */

static bool
is_sp(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* Does the section name [s, e) (trimmed) name profile in a file of kind? */
static bool
section_is(
    const char *s, const char *e, enum cred_ini_kind kind, const char *profile)
{
	size_t pl = strlen(profile);

	if ((size_t)(e - s) > 8 && memcmp(s, "profile", 7) == 0 &&
	    is_sp(s[7])) {
		s += 8;
		while (s < e && is_sp(*s))
			s++;
	} else if (kind == CRED_INI_CONFIG && strcmp(profile, "default") != 0)
		return false; /* the config file says [profile NAME] */
	return (size_t)(e - s) == pl && memcmp(s, profile, pl) == 0;
}

int
cred_ini_get(const char *text, size_t n, enum cred_ini_kind kind,
    const char *profile, const char *key, const char **v, size_t *vl,
    bool *found)
{
	const char *p = text, *end = text + n, *val = NULL;
	size_t kl = strlen(key), len = 0;
	bool in = false, nested = false;

	while (p < end) {
		const char *le = memchr(p, '\n', (size_t)(end - p)), *a, *b,
			   *eq, *ke, *w;
		bool indented;

		if (le == NULL)
			le = end;
		a = p;
		b = le;
		p = le < end ? le + 1 : end;
		indented = a < b && is_sp(*a);
		while (a < b && is_sp(*a))
			a++;
		while (b > a && is_sp(b[-1]))
			b--;
		if (a == b || *a == '#' || *a == ';')
			continue;
		if (*a == '[') {
			const char *s = a + 1, *e = b - 1;

			nested = false;
			if (e <= s || *e != ']') {
				in = false;
				continue;
			}
			while (s < e && is_sp(*s))
				s++;
			while (e > s && is_sp(e[-1]))
				e--;
			in = section_is(s, e, kind, profile);
			if (in && found != NULL)
				*found = true;
			continue;
		}
		if (!indented)
			nested = false;
		else if (nested)
			continue; /* a sub-key ("s3 =" then "  key = v") */
		if (!in || (eq = memchr(a, '=', (size_t)(b - a))) == NULL)
			continue;
		ke = eq;
		while (ke > a && is_sp(ke[-1]))
			ke--;
		w = eq + 1;
		while (w < b && is_sp(*w))
			w++;
		if (w == b && !indented)
			nested = true;
		if ((size_t)(ke - a) == kl && memcmp(a, key, kl) == 0 &&
		    w < b) {
			val = w;
			len = (size_t)(b - w);
		}
	}
	if (val == NULL)
		return -ENOENT;
	*v = val;
	*vl = len;
	return 0;
}

/* ---- STS's XML ---- */

/*
 * The content [*cs, *ce) of the first element name in [p, e): "<name>",
 * or "<name" and attributes, up to its "</name>".  -ENOENT, -EINVAL.
 */
static int
element(const char *p, const char *e, const char *name, const char **cs,
    const char **ce)
{
	size_t nl = strlen(name);

	while (p < e) {
		const char *lt = memchr(p, '<', (size_t)(e - p)), *gt, *q;

		if (lt == NULL || (size_t)(e - lt) < nl + 2)
			return -ENOENT;
		p = lt + 1;
		if (memcmp(p, name, nl) != 0 ||
		    (p[nl] != '>' && p[nl] != '/' &&
			!isspace((unsigned char)p[nl])))
			continue;
		if ((gt = memchr(p, '>', (size_t)(e - p))) == NULL)
			return -EINVAL;
		if (gt[-1] == '/') { /* <name/> */
			*cs = *ce = gt + 1;
			return 0;
		}
		*cs = gt + 1;
		for (q = gt + 1; q < e; q++) {
			q = memchr(q, '<', (size_t)(e - q));
			if (q == NULL || (size_t)(e - q) < nl + 3)
				return -EINVAL;
			if (q[1] == '/' && memcmp(q + 2, name, nl) == 0 &&
			    q[2 + nl] == '>') {
				*ce = q;
				return 0;
			}
		}
		return -EINVAL;
	}
	return -ENOENT;
}

/* One code point as UTF-8 into out; its length, 0 if out of range. */
static size_t
utf8(unsigned long c, char *o)
{
	if (c == 0 || c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
		return 0;
	if (c < 0x80) {
		o[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (char)(0xc0 | (c >> 6));
		o[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (char)(0xe0 | (c >> 12));
		o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		o[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (c >> 18));
	o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
	o[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

int
cred_xml_text(const char *doc, size_t n, const char *parent, const char *name,
    char *out, size_t cap, size_t *ol)
{
	static const struct {
		const char *ent;
		char c;
	} ents[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'},
	    {"apos;", '\''}};
	const char *ps, *pe, *s, *e;
	size_t o = 0;
	int r;

	if (cap == 0)
		return -EINVAL;
	if ((r = element(doc, doc + n, parent, &ps, &pe)) != 0 ||
	    (r = element(ps, pe, name, &s, &e)) != 0)
		return r;
	while (s < e) {
		char buf[4];
		size_t k = 1;

		if (*s == '<' || *s == '\0')
			return -EINVAL; /* not a leaf, CDATA, not text */
		buf[0] = *s;
		if (*s == '&') {
			const char *semi = memchr(s, ';', (size_t)(e - s));
			size_t i;

			if (semi == NULL || semi - s > 10)
				return -EINVAL;
			k = 0;
			for (i = 0; i < sizeof(ents) / sizeof(ents[0]); i++)
				if ((size_t)(semi - s) == strlen(ents[i].ent) &&
				    memcmp(s + 1, ents[i].ent,
					strlen(ents[i].ent)) == 0) {
					buf[0] = ents[i].c;
					k = 1;
				}
			if (k == 0 && s[1] == '#' && semi - s > 2) {
				bool hx = s[2] == 'x' || s[2] == 'X';
				unsigned long c = 0;

				for (const char *d = s + 2 + hx; d < semi;
				     d++) {
					int v =
					    isdigit((unsigned char)*d)
						? *d - '0'
					    : hx && isxdigit((unsigned char)*d)
						? (tolower((unsigned char)*d) -
						      'a' + 10)
						: -1;
					if (v < 0)
						return -EINVAL;
					c = c * (hx ? 16u : 10u) + (unsigned)v;
				}
				k = utf8(c, buf);
			}
			if (k == 0)
				return -EINVAL;
			s = semi + 1;
		} else
			s++;
		if (o + k >= cap)
			return -EINVAL;
		memcpy(out + o, buf, k);
		o += k;
	}
	out[o] = '\0';
	*ol = o;
	return 0;
}

/* ---- times ---- */

/* n digits at s: 0 and *v, or -EINVAL. */
static int
digits(const char *s, int n, int *v)
{
	int x = 0;

	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		x = x * 10 + (s[i] - '0');
	}
	*v = x;
	return 0;
}

int
cred_time_parse(const char *s, size_t n, time_t *t)
{
	struct tm tm = {0};
	int y, mo, d, h, mi, se, oh = 0, om = 0, sign = 0;
	size_t i = 19;
	time_t v;

	if (n < 20 || digits(s, 4, &y) || s[4] != '-' ||
	    digits(s + 5, 2, &mo) || s[7] != '-' || digits(s + 8, 2, &d) ||
	    (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
	    digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) ||
	    s[16] != ':' || digits(s + 17, 2, &se))
		return -EINVAL;
	if (s[i] == '.') {
		size_t f = ++i;

		while (i < n && isdigit((unsigned char)s[i]))
			i++;
		if (i == f || i - f > 9)
			return -EINVAL;
	}
	if (i < n && (s[i] == 'Z' || s[i] == 'z'))
		i++;
	else if (i + 6 == n && (s[i] == '+' || s[i] == '-') &&
		 digits(s + i + 1, 2, &oh) == 0 && s[i + 3] == ':' &&
		 digits(s + i + 4, 2, &om) == 0 && oh < 24 && om < 60) {
		sign = s[i] == '+' ? 1 : -1;
		i += 6;
	} else
		return -EINVAL;
	if (i != n || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 ||
	    h > 23 || mi > 59 || se > 60)
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	if ((v = timegm(&tm)) == (time_t)-1)
		return -EINVAL;
	*t = v - sign * (oh * 3600 + om * 60);
	return 0;
}

/* ---- STS ---- */

#define KEY_MAX 256u
#define TOKEN_MAX (16u << 10)

int
cred_sts_parse(const char *doc, size_t n, const char *source, struct cred **out,
    char *err, size_t errlen)
{
	char id[KEY_MAX], when[64], code[128], msg[256];
	char *secret = cred_alloc(KEY_MAX), *token = cred_alloc(TOKEN_MAX);
	size_t il, sl, tl, wl, l;
	time_t exp;
	int r = -ENOMEM;

	if (secret == NULL || token == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		goto out;
	}
	if (cred_xml_text(doc, n, "Error", "Code", code, sizeof(code), &l) ==
	    0) {
		if (cred_xml_text(
			doc, n, "Error", "Message", msg, sizeof(msg), &l) != 0)
			msg[0] = '\0';
		for (char *p = msg; *p; p++)
			if ((unsigned char)*p < ' ' || *p == 0x7f)
				*p = ' ';
		for (char *p = code; *p; p++)
			if ((unsigned char)*p < ' ' || *p == 0x7f)
				*p = ' ';
		snprintf(err, errlen, "%s%s%s", code, msg[0] ? ": " : "", msg);
		r = -EACCES;
		goto out;
	}
	r = -EINVAL;
	if (cred_xml_text(doc, n, "Credentials", "AccessKeyId", id, sizeof(id),
		&il) != 0 ||
	    cred_xml_text(doc, n, "Credentials", "SecretAccessKey", secret,
		KEY_MAX, &sl) != 0 ||
	    cred_xml_text(doc, n, "Credentials", "SessionToken", token,
		TOKEN_MAX, &tl) != 0 ||
	    cred_xml_text(doc, n, "Credentials", "Expiration", when,
		sizeof(when), &wl) != 0 ||
	    il == 0 || sl == 0) {
		snprintf(err, errlen,
		    "the response holds no Credentials (AccessKeyId, "
		    "SecretAccessKey, SessionToken, Expiration)");
		goto out;
	}
	if (cred_time_parse(when, wl, &exp) != 0) {
		snprintf(err, errlen, "an Expiration that is not a time");
		goto out;
	}
	if ((*out = cred_new(id, il, secret, sl, tl ? token : NULL, tl, exp,
		 source)) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		r = -ENOMEM;
		goto out;
	}
	r = 0;
out:
	cred_free(secret);
	cred_free(token);
	return r;
}

/* ---- IMDS ---- */

/* A string member of o: 0 and its bytes, or -ENOENT. */
static int
member(json_t *o, const char *k, const char **s, size_t *l)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_string(v))
		return -ENOENT;
	*s = json_string_value(v);
	*l = json_string_length(v);
	return 0;
}

int
cred_imds_parse(const char *doc, size_t n, const char *source,
    struct cred **out, char *err, size_t errlen)
{
	const char *code, *id, *sec, *tok = NULL, *when;
	size_t cl, il, sl, tl = 0, wl;
	json_error_t je;
	json_t *j;
	time_t exp;
	int r = -EINVAL;

	/* Every allocation of the parse in the arena: it holds the secret. */
	cred_json_secret(true);
	j = json_loadb(doc, n, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(j)) {
		/* je.text may quote the document: not said. */
		snprintf(err, errlen, "not a JSON object (line %d, column %d)",
		    j ? 0 : je.line, j ? 0 : je.column);
		goto out;
	}
	if (member(j, "Code", &code, &cl) == 0 &&
	    (cl != 7 || memcmp(code, "Success", 7) != 0)) {
		snprintf(err, errlen, "its Code is not Success");
		goto out;
	}
	if (member(j, "AccessKeyId", &id, &il) != 0 ||
	    member(j, "SecretAccessKey", &sec, &sl) != 0 ||
	    member(j, "Expiration", &when, &wl) != 0 || il == 0 || sl == 0 ||
	    il > KEY_MAX || sl > KEY_MAX) {
		snprintf(err, errlen,
		    "no AccessKeyId, SecretAccessKey and Expiration in it");
		goto out;
	}
	if (member(j, "Token", &tok, &tl) != 0 || tl == 0)
		tok = NULL;
	if (cred_time_parse(when, wl, &exp) != 0) {
		snprintf(err, errlen, "an Expiration that is not a time");
		goto out;
	}
	if ((*out = cred_new(id, il, sec, sl, tok, tl, exp, source)) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		r = -ENOMEM;
		goto out;
	}
	r = 0;
out:
	json_decref(j);
	cred_json_secret(false);
	return r;
}
