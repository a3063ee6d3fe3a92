/*
 * jsonstr.h - UTF-8 text and JSON strings (util/, which includes nothing
 * of ours): whether bytes are valid UTF-8, and a string of known length
 * written as a JSON string, for the captions (the dataset checks them,
 * the model writes a batch's .text.jsonl).  Pure functions, thread safe.
 */
#ifndef FEEDFS_JSONSTR_H
#define FEEDFS_JSONSTR_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Whether s[0..n) is valid UTF-8 (RFC 3629): no overlong forms, no
 * surrogates, nothing past U+10FFFF, no sequence cut short.  NUL bytes
 * (U+0000) are valid.
 */
bool utf8_valid(const char *s, size_t n);

/*
 * The bytes of s[0..n) written as a JSON string (RFC 8259), quotes
 * included: '"' and '\\' escaped, \b \f \n \r \t by name, the other
 * bytes below 0x20 as \u00XX; every other byte is copied as it is (s is
 * valid UTF-8: utf8_valid), so that any Unicode, emoji included, reads
 * back as it was.
 */
size_t json_str_len(const char *s, size_t n);
/* Write it at out (json_str_len(s, n) bytes, no NUL); returns the end. */
char *json_str_put(char *out, const char *s, size_t n);

#endif
