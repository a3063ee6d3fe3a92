/*
 * sbuf.c - a growing string (see sbuf.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/sbuf.h"

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

void
sb_json_str(struct sbuf *sb, const char *s)
{
	sb_printf(sb, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			sb_printf(sb, "\\%c", ch);
		else if (ch < 0x20)
			sb_printf(sb, "\\u%04x", ch);
		else
			sb_printf(sb, "%c", ch);
	}
	sb_printf(sb, "\"");
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
