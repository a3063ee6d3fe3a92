/*
 * sbuf.h - a growing string for the generated text files (util/, which
 * includes nothing of ours).
 *
 * An allocation failure is sticky: later appends do nothing and sb_done
 * returns NULL.  Not thread safe (one builder, one thread).
 */
#ifndef FEEDFS_SBUF_H
#define FEEDFS_SBUF_H

#include <stdbool.h>
#include <stddef.h>

struct sbuf {
	char *s;
	size_t len, cap;
	bool oom;
};

void sb_printf(struct sbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* s as a JSON string: quoted, escaped; invalid UTF-8 becomes U+FFFD. */
void sb_json_str(struct sbuf *sb, const char *s);
/* s as a field of a tab-separated line: tab, newline, carriage return
 * and backslash written as \t, \n, \r and \\. */
void sb_tsv_field(struct sbuf *sb, const char *s);
/* The text (malloc'd, the caller frees) and its length; NULL after OOM. */
char *sb_done(struct sbuf *sb, size_t *len);

#endif
