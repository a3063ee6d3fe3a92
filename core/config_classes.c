/*
 * config_classes.c - the model (core/): class lists, one name a line:
 * the file a dataset's classes = FILE names, read and checked at load,
 * and the parser it and the shard index share (cfg_classes_parse, see
 * config.h).
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config_int.h"

void
cfg_classes_free(char **names, size_t n)
{
	for (size_t i = 0; names != NULL && i < n; i++)
		free(names[i]);
	free(names);
}

/* "FNAME:LINE: message" into err; -EINVAL. */
static int
classes_err(char *err, size_t errlen, const char *fname, size_t line,
    const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "%s:%zu: %s", fname, line, msg);
	return -EINVAL;
}

static int
by_name(const void *a, const void *b)
{
	const char *const *x = a, *const *y = b;

	return strcmp(*x, *y);
}

int
cfg_classes_parse(const char *text, size_t len, const char *fname,
    char ***names, size_t *n, char *err, size_t errlen)
{
	char **v = NULL, **sorted = NULL;
	size_t nv = 0, cap = 0, line = 0, at = 0;
	int r = -ENOMEM;

	while (at < len) {
		const char *s = text + at, *nl = memchr(s, '\n', len - at);
		size_t k = nl != NULL ? (size_t)(nl - s) : len - at;

		at += k + (nl != NULL);
		line++;
		if (k > 0 && s[k - 1] == '\r')
			k--;
		if (line > CFG_MAX_CLASSES) {
			r = classes_err(err, errlen, fname, line,
			    "more than %u classes", CFG_MAX_CLASSES);
			goto fail;
		}
		if (k == 0) {
			r = classes_err(err, errlen, fname, line,
			    "empty class name (class %zu is line %zu)",
			    line - 1, line);
			goto fail;
		}
		if (k > CFG_MAX_CLASS_NAME) {
			r = classes_err(err, errlen, fname, line,
			    "class name of %zu bytes (at most %u)", k,
			    CFG_MAX_CLASS_NAME);
			goto fail;
		}
		for (size_t i = 0; i < k; i++)
			if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
				r = classes_err(err, errlen, fname, line,
				    "control character 0x%02x in a class name",
				    (unsigned char)s[i]);
				goto fail;
			}
		if (nv == cap) {
			size_t nc = cap ? 2 * cap : 64;
			char **t = realloc(v, nc * sizeof(*v));

			if (t == NULL)
				goto nomem;
			v = t;
			cap = nc;
		}
		if ((v[nv] = strndup(s, k)) == NULL)
			goto nomem;
		nv++;
	}
	if (nv == 0) {
		r = classes_err(err, errlen, fname, 1, "no class names");
		goto fail;
	}
	/* A name twice: found sorted, reported by its lines. */
	if ((sorted = malloc(nv * sizeof(*sorted))) == NULL)
		goto nomem;
	memcpy(sorted, v, nv * sizeof(*v));
	qsort(sorted, nv, sizeof(*sorted), by_name);
	for (size_t i = 1; i < nv; i++) {
		if (strcmp(sorted[i], sorted[i - 1]) != 0)
			continue;
		size_t a = SIZE_MAX, b = SIZE_MAX;

		for (size_t j = 0; j < nv; j++)
			if (strcmp(v[j], sorted[i]) == 0) {
				if (a == SIZE_MAX)
					a = j;
				else if (b == SIZE_MAX)
					b = j;
			}
		r = classes_err(err, errlen, fname, b + 1,
		    "class '%.100s' is also line %zu", sorted[i], a + 1);
		goto fail;
	}
	free(sorted);
	*names = v;
	*n = nv;
	return 0;
nomem:
	snprintf(err, errlen, "%s: out of memory", fname);
	r = -ENOMEM;
fail:
	free(sorted);
	cfg_classes_free(v, nv);
	return r;
}

/* The file a classes key names, read whole: at most this much. */
#define MAX_CLASSES_FILE (64u << 20)

int
cfg_load_classes(struct parser *p, struct cfg_dataset *d)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd, r;

	fd = open(d->classes, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return cfg_perr(p, d->classes_line, "classes: %s: %s",
		    d->classes, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return cfg_perr(p, d->classes_line,
		    "classes: %s: not a regular file", d->classes);
	}
	if ((uint64_t)st.st_size > MAX_CLASSES_FILE) {
		close(fd);
		return cfg_perr(p, d->classes_line,
		    "classes: %s: more than %u MiB", d->classes,
		    MAX_CLASSES_FILE >> 20);
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	if (memchr(buf, '\0', got) != NULL) {
		free(buf);
		return cfg_perr(p, d->classes_line,
		    "classes: %s: a NUL byte: not a text file", d->classes);
	}
	r = cfg_classes_parse(buf, got, d->classes, &d->class_names,
	    &d->nclass_names, p->err, p->errlen);
	free(buf);
	return r;
}
