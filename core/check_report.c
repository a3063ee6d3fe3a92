/*
 * check_report.c - the lines of `feedfs --check`'s report that name a
 * file (see check_int.h).  Layer: core/ (the model).
 */
#include <stdio.h>

#include "core/check_int.h"

const char *const check_kind_names[K_NKINDS] = {
    "ok", "unreadable", "unsupported", "truncated", "corrupt"};

/*
 * A name as samples.tsv writes it: tab, newline, carriage return and
 * backslash escaped (\\t \\n \\r \\\\), so one check_report line is one line.
 */
void
check_put_name(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\t')
			fputs("\\t", out);
		else if (*s == '\n')
			fputs("\\n", out);
		else if (*s == '\r')
			fputs("\\r", out);
		else if (*s == '\\')
			fputs("\\\\", out);
		else
			fputc(*s, out);
	}
}

/* "  KIND: NAME: why" (NAME escaped); the caller counts it. */
void
check_report(struct run *r, const char *kind, const char *name, const char *why)
{
	fprintf(r->out, "  %s: ", kind);
	check_put_name(r->out, name);
	fprintf(r->out, ": %s\n", why);
}
