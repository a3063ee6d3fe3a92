/*
 * jsonstr.c - UTF-8 validation and JSON strings (util/, under every other
 * folder; see jsonstr.h).
 */
#include <stdint.h>
#include <string.h>

#include "util/jsonstr.h"

bool
utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t k;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 2, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			k = 3, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 4, cp = c & 0x07;
		else
			return false;
		if (n - i < k)
			return false;
		for (size_t j = 1; j < k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return false;
		i += k;
	}
	return true;
}

/* The escape of byte c: its length (1 when none). */
static size_t
esc_len(unsigned char c)
{
	if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' ||
	    c == '\r' || c == '\t')
		return 2;
	return c < 0x20 ? 6 : 1;
}

size_t
json_str_len(const char *s, size_t n)
{
	size_t len = 2;

	for (size_t i = 0; i < n; i++)
		len += esc_len((unsigned char)s[i]);
	return len;
}

char *
json_str_put(char *out, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";

	*out++ = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char e = 0;

		switch (c) {
		case '"':
			e = '"';
			break;
		case '\\':
			e = '\\';
			break;
		case '\b':
			e = 'b';
			break;
		case '\f':
			e = 'f';
			break;
		case '\n':
			e = 'n';
			break;
		case '\r':
			e = 'r';
			break;
		case '\t':
			e = 't';
			break;
		default:
			break;
		}
		if (e != 0) {
			*out++ = '\\';
			*out++ = e;
		} else if (c < 0x20) {
			memcpy(out, "\\u00", 4);
			out[4] = hex[c >> 4];
			out[5] = hex[c & 15];
			out += 6;
		} else
			*out++ = (char)c;
	}
	*out++ = '"';
	return out;
}
