/*
 * ds_shard_list.c - layer: dataset/ (the datasets), tar shard backend (calls
 * nothing of the others).  Which shards a dataset's shards = names: a glob
 * (or a path ending in .tar), else a file listing shard paths one a line
 * (relative ones from the file's directory; '#' starts a comment; URLs
 * kept as they are), or a URL with WebDataset brace ranges; and the
 * directory they share, which becomes the dataset's root.
 */
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset/ds_tar_int.h"
#include "dataset/remote/remote.h"

static bool
has_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

/* Paths from a list file (relative ones from its directory). */
static int
read_list(const char *list, char ***out, size_t *n, char *err, size_t errlen)
{
	FILE *f = fopen(list, "r");
	char *line = NULL, *dir, *slash, **v = NULL, **nv;
	size_t linecap = 0, cap = 0, lineno = 0;
	ssize_t len;
	int r = 0;

	*n = 0;
	if (f == NULL) {
		r = -errno;
		snprintf(err, errlen, "shards %s: %s", list, strerror(-r));
		return r;
	}
	if ((dir = strdup(list)) == NULL) {
		fclose(f);
		return -ENOMEM;
	}
	if ((slash = strrchr(dir, '/')) != NULL)
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		strcpy(dir, ".");
	while ((len = getline(&line, &linecap, f)) >= 0) {
		char *p = line, *e;

		lineno++;
		while (len > 0 && isspace((unsigned char)line[len - 1]))
			line[--len] = '\0';
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '\0' || *p == '#')
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			if ((nv = realloc(v, cap * sizeof(*v))) == NULL) {
				r = -ENOMEM;
				break;
			}
			v = nv;
		}
		if (*p == '/' || remote_is_url(p))
			e = strdup(p);
		else if (asprintf(&e, "%s/%s", dir, p) < 0)
			e = NULL;
		if (e == NULL) {
			r = -ENOMEM;
			break;
		}
		v[(*n)++] = e;
	}
	if (r == 0 && ferror(f)) {
		r = -EIO;
		snprintf(err, errlen, "shards %s: %s", list, strerror(EIO));
	}
	if (r == 0 && *n == 0) {
		r = -ENOENT;
		snprintf(err, errlen, "shards %s: lists no shard", list);
	}
	free(line);
	free(dir);
	fclose(f);
	if (r != 0) {
		for (size_t i = 0; i < *n; i++)
			free(v[i]);
		free(v);
		*n = 0;
		return r;
	}
	*out = v;
	return 0;
}

static int
by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* See ds_tar_int.h. */
int
ds_shard_paths(
    const char *spec, char ***out, size_t *n, char *err, size_t errlen)
{
	char **v = NULL;
	size_t k = 0;
	int r;

	if (remote_is_url(spec)) {
		char why[256];

		if ((r = remote_brace_expand(spec, REMOTE_BRACE_MAX, &v, &k,
			 why, sizeof(why))) != 0) {
			char *d = remote_url_display(spec);

			snprintf(err, errlen, "shards %s: %s", d ? d : "",
			    r == -ENOMEM ? strerror(ENOMEM) : why);
			free(d);
			return r;
		}
	} else if (has_glob(spec) ||
	    (strlen(spec) > 4 &&
		strcmp(spec + strlen(spec) - 4, ".tar") == 0)) {
		glob_t gl;

		r = glob(spec, GLOB_ERR, NULL, &gl);
		if (r == GLOB_NOMATCH || (r == 0 && gl.gl_pathc == 0)) {
			globfree(&gl);
			snprintf(
			    err, errlen, "shards %s: no file matches", spec);
			return -ENOENT;
		}
		if (r != 0) {
			globfree(&gl);
			snprintf(
			    err, errlen, "shards %s: cannot be read", spec);
			return -EIO;
		}
		if ((v = calloc(gl.gl_pathc, sizeof(*v))) == NULL) {
			globfree(&gl);
			return -ENOMEM;
		}
		for (; k < gl.gl_pathc; k++)
			if ((v[k] = strdup(gl.gl_pathv[k])) == NULL) {
				globfree(&gl);
				*n = k;
				r = -ENOMEM;
				goto fail;
			}
		globfree(&gl);
	} else if ((r = read_list(spec, &v, &k, err, errlen)) != 0)
		return r;
	*n = k;
	for (size_t i = 0; i < k; i++) {
		char *res;

		if (remote_is_url(v[i]) != remote_is_url(v[0])) {
			snprintf(err, errlen,
			    "shards %s: local and remote shards in one "
			    "dataset (make two datasets and a mixture)",
			    spec);
			r = -EINVAL;
			goto fail;
		}
		if (remote_is_url(v[i])) {
			struct remote_url u;
			char why[256];

			if ((r = remote_url_parse(v[i], &u, why, sizeof(why))) !=
			    0) {
				char *d = remote_url_display(v[i]);

				snprintf(err, errlen, "shard %s: %s",
				    d ? d : "", why);
				free(d);
				goto fail;
			}
			remote_url_free(&u);
			continue;
		}
		res = realpath(v[i], NULL);

		if (res == NULL) {
			r = -errno;
			snprintf(
			    err, errlen, "shard %s: %s", v[i], strerror(-r));
			goto fail;
		}
		free(v[i]);
		v[i] = res;
	}
	qsort(v, k, sizeof(*v), by_str);
	/* unique */
	size_t u = 0;
	for (size_t i = 0; i < k; i++) {
		if (u > 0 && strcmp(v[u - 1], v[i]) == 0) {
			free(v[i]);
			continue;
		}
		v[u++] = v[i];
	}
	*n = u;
	*out = v;
	return 0;
fail:
	for (size_t i = 0; i < *n; i++)
		free(v[i]);
	free(v);
	*n = 0;
	return r;
}

/* See ds_tar_int.h. */
char *
ds_shard_common_dir(char **v, size_t n)
{
	size_t len = strlen(v[0]);
	char *d;

	for (size_t i = 1; i < n; i++) {
		size_t k = 0;

		while (k < len && v[i][k] == v[0][k])
			k++;
		len = k;
	}
	while (len > 0 && v[0][len - 1] != '/')
		len--;
	if (len > 1)
		len--; /* the slash */
	if ((d = strndup(v[0], len ? len : 1)) != NULL && len == 0)
		d[0] = '/';
	return d;
}
