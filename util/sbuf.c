/*
 * sbuf.c - a growing string (util/, under every other folder; see sbuf.h).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sbuf.h"

void
sb_printf(struct sbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (sb->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(sb->s ? sb->s + sb->len : NULL,
		    sb->s ? sb->cap - sb->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			sb->oom = true;
			return;
		}
		if (sb->s && sb->len + (size_t)n < sb->cap) {
			sb->len += (size_t)n;
			return;
		}
		size_t cap = sb->cap ? sb->cap : 4096;
		while (cap <= sb->len + (size_t)n)
			cap *= 2;
		char *s = realloc(sb->s, cap);
		if (!s) {
			sb->oom = true;
			return;
		}
		sb->s = s;
		sb->cap = cap;
	}
}

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0. */
static size_t
utf8_len(const unsigned char *s)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* No overlong forms, no surrogates, nothing past U+10FFFF. */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

void
sb_json_str(struct sbuf *sb, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	sb_printf(sb, "\"");
	while (*s) {
		size_t n = utf8_len(s);

		if (n == 0) {
			sb_printf(sb, "\\ufffd");
			s++;
		} else if (*s == '"' || *s == '\\') {
			sb_printf(sb, "\\%c", *s);
			s++;
		} else if (*s < 0x20) {
			sb_printf(sb, "\\u%04x", *s);
			s++;
		} else {
			sb_printf(sb, "%.*s", (int)n, (const char *)s);
			s += n;
		}
	}
	sb_printf(sb, "\"");
}

void
sb_tsv_field(struct sbuf *sb, const char *s)
{
	if (strpbrk(s, "\t\n\r\\") == NULL) {
		sb_printf(sb, "%s", s); /* the common case, in one go */
		return;
	}
	for (; *s; s++) {
		if (*s == '\t')
			sb_printf(sb, "\\t");
		else if (*s == '\n')
			sb_printf(sb, "\\n");
		else if (*s == '\r')
			sb_printf(sb, "\\r");
		else if (*s == '\\')
			sb_printf(sb, "\\\\");
		else
			sb_printf(sb, "%c", *s);
	}
}

char *
sb_done(struct sbuf *sb, size_t *len)
{
	if (sb->oom) {
		free(sb->s);
		return NULL;
	}
	*len = sb->len;
	return sb->s;
}
