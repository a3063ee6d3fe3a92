/*
 * config.c - the model (core/): the INI config: parse, check, defaults.
 *
 * The grammar is small: "[section]" or "[section NAME]" headers, "key =
 * value" lines, comments from "#" or ";" at the start of a line or from a
 * "#" that follows a blank inside a value.  Every error stops the load and
 * names the file and line.
 *
 * What each key sets and how its value is checked is the key table of
 * config_keys.c; this file is the grammar, the sections and the checks of
 * the whole file (datasets named by jobs); a job's own checks (its
 * dataset or mixture, its pipeline parsed once, its schedule and views)
 * are config_job.c's, the class lists config_classes.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config_int.h"

static const char *const section_names[] = {"", "mount", "dataset", "job"};

struct cfg *
cfg_new(const char *path)
{
	struct cfg *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (!(c->path = strdup(path)) || cfg_mount_defaults(&c->mount) != 0) {
		cfg_free(c);
		return NULL;
	}
	return c;
}

void
cfg_free(struct cfg *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->ndatasets; i++) {
		free(c->datasets[i].name);
		free(c->datasets[i].root);
		free(c->datasets[i].manifest);
		free(c->datasets[i].shards);
		free(c->datasets[i].label);
		free(c->datasets[i].text);
		free(c->datasets[i].s3_endpoint);
		free(c->datasets[i].s3_region);
		free(c->datasets[i].ca_file);
		free(c->datasets[i].classes);
		cfg_classes_free(
		    c->datasets[i].class_names, c->datasets[i].nclass_names);
	}
	for (size_t i = 0; i < c->njobs; i++) {
		free(c->jobs[i].name);
		free(c->jobs[i].dataset);
		free(c->jobs[i].pipeline);
		xf_pipeline_free(c->jobs[i].pl);
		free(c->jobs[i].mixture);
		free(c->jobs[i].mixture_schedule);
		free(c->jobs[i].source_index);
		for (size_t k = 0; k < c->jobs[i].nsteps; k++)
			free(c->jobs[i].steps[k].w);
		free(c->jobs[i].steps);
		for (size_t k = 0; k < c->jobs[i].nvdefs; k++)
			free(c->jobs[i].vdefs[k].tail);
		free(c->jobs[i].vdefs);
		for (size_t k = 0; c->jobs[i].view_pl && k < c->jobs[i].views;
		     k++) {
			xf_pipeline_free(c->jobs[i].view_pl[k]);
			free(c->jobs[i].view_text[k]);
		}
		free(c->jobs[i].view_pl);
		free(c->jobs[i].view_text);
	}
	free(c->datasets);
	free(c->jobs);
	free(c->layout);
	free(c->mount.cache_dir);
	free(c->mount.cluster);
	free(c->mount.cluster_auth);
	free(c->mount.cluster_secret);
	free(c->path);
	free(c);
}

/*
 * Names become directory names in the mount: keep them plain, and short
 * enough for any listing buffer (CFG_MAX_NAME).
 */
static bool
valid_name(const char *s)
{
	if (s[0] == '\0' || s[0] == '.' || strlen(s) > CFG_MAX_NAME ||
	    strcmp(s, "README") == 0)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' &&
		    *s != '.')
			return false;
	return true;
}

/* A new [dataset NAME] or [job NAME] of kind (after its checks). */
static int
add_named(struct parser *p, enum section sec, const char *name)
{
	struct cfg *c = p->c;

	if (sec == SEC_DATASET) {
		struct cfg_dataset *d;

		for (size_t i = 0; i < c->ndatasets; i++)
			if (strcmp(c->datasets[i].name, name) == 0)
				return cfg_perr(p, p->line,
				    "dataset '%s' is "
				    "already defined at line %d",
				    name, c->datasets[i].line);
		d = realloc(c->datasets, (c->ndatasets + 1) * sizeof(*d));
		if (!d)
			return -ENOMEM;
		c->datasets = d;
		d = &c->datasets[c->ndatasets++];
		memset(d, 0, sizeof(*d));
		d->line = p->line;
		d->remote_timeout = 30;
		d->remote_retries = 4;
		d->remote_fill = true;
		return (d->name = strdup(name)) ? 0 : -ENOMEM;
	}
	struct cfg_job *j;

	for (size_t i = 0; i < c->njobs; i++)
		if (strcmp(c->jobs[i].name, name) == 0)
			return cfg_perr(p, p->line,
			    "job '%s' is already defined "
			    "at line %d",
			    name, c->jobs[i].line);
	j = realloc(c->jobs, (c->njobs + 1) * sizeof(*j));
	if (!j)
		return -ENOMEM;
	c->jobs = j;
	j = &c->jobs[c->njobs++];
	memset(j, 0, sizeof(*j));
	cfg_job_defaults(j);
	j->line = j->pipeline_line = j->dataset_line = p->line;
	j->mixture_line = j->schedule_line = j->epoch_samples_line = p->line;
	return (j->name = strdup(name)) ? 0 : -ENOMEM;
}

static int
begin_section(struct parser *p, char *hdr)
{
	char *name, *kind = hdr;
	enum section sec;

	while (isspace((unsigned char)*kind))
		kind++;
	name = kind + strcspn(kind, " \t");
	if (*name) {
		*name++ = '\0';
		while (isspace((unsigned char)*name))
			name++;
		name[strcspn(name, " \t")] = '\0';
	}
	p->seen = 0;
	if (strcmp(kind, "mount") == 0) {
		if (*name)
			return cfg_perr(p, p->line, "[mount] takes no name");
		if (p->mount_line)
			return cfg_perr(p, p->line,
			    "a second [mount] section "
			    "(the first is at line %d)",
			    p->mount_line);
		p->mount_line = p->line;
		p->sec = SEC_MOUNT;
		return 0;
	}
	if (strcmp(kind, "dataset") == 0)
		sec = SEC_DATASET;
	else if (strcmp(kind, "job") == 0)
		sec = SEC_JOB;
	else
		return cfg_perr(p, p->line,
		    "unknown section [%s] (expected "
		    "[mount], [dataset NAME] or [job NAME])",
		    kind);
	if (!*name)
		return cfg_perr(
		    p, p->line, "[%s] needs a name: [%s NAME]", kind, kind);
	if (!valid_name(name))
		return cfg_perr(p, p->line,
		    "'%s' is not a valid name (up to %d "
		    "letters, digits, '_', '-', '.', not starting with '.')",
		    name, CFG_MAX_NAME);
	p->sec = sec;
	return add_named(p, sec, name);
}

/* The struct that the keys of the current section fill. */
static void *
section_base(struct parser *p, const char **name)
{
	switch (p->sec) {
	case SEC_MOUNT:
		*name = "";
		return &p->c->mount;
	case SEC_DATASET:
		*name = p->c->datasets[p->c->ndatasets - 1].name;
		return &p->c->datasets[p->c->ndatasets - 1];
	default:
		*name = p->c->jobs[p->c->njobs - 1].name;
		return &p->c->jobs[p->c->njobs - 1];
	}
}

/*
 * "view.K = TAIL" or "view.K-L = TAIL" in a [job]: views K to L (1 <=
 * K <= L < CFG_MAX_VIEWS) run TAIL after the cached prefix.  Checked
 * against views = N and parsed once the file is read (check_views).
 */
static int
set_view_key(struct parser *p, const char *key, const char *val)
{
	struct cfg_job *j = &p->c->jobs[p->c->njobs - 1];
	const char *s = key + 5;
	unsigned long lo, hi;
	struct cfg_vdef *v;
	char *end;

	if (*s < '0' || *s > '9' || (*s == '0' && s[1] >= '0' && s[1] <= '9'))
		goto bad;
	lo = strtoul(s, &end, 10);
	hi = lo;
	if (*end == '-') {
		s = end + 1;
		if (*s < '0' || *s > '9' ||
		    (*s == '0' && s[1] >= '0' && s[1] <= '9'))
			goto bad;
		hi = strtoul(s, &end, 10);
	}
	if (*end != '\0')
		goto bad;
	if (lo == 0)
		return cfg_perr(p, p->line,
		    "%s: view 0 is the job's pipeline (batch-NNNNNN.npy): "
		    "set its tail with pipeline =",
		    key);
	if (lo > hi || hi >= CFG_MAX_VIEWS)
		return cfg_perr(p, p->line,
		    "%s: views K-L need 1 <= K <= L <= %d", key,
		    CFG_MAX_VIEWS - 1);
	if (*val == '\0')
		return cfg_perr(p, p->line, "%s: no value", key);
	for (size_t i = 0; i < j->nvdefs; i++)
		if (j->vdefs[i].lo <= hi && lo <= j->vdefs[i].hi)
			return cfg_perr(p, p->line,
			    "%s: view %lu is also given at line %d", key,
			    lo > j->vdefs[i].lo ? lo
						: (unsigned long)j->vdefs[i].lo,
			    j->vdefs[i].line);
	if ((v = realloc(j->vdefs, (j->nvdefs + 1) * sizeof(*v))) == NULL)
		return -ENOMEM;
	j->vdefs = v;
	v += j->nvdefs;
	if ((v->tail = strdup(val)) == NULL)
		return -ENOMEM;
	v->lo = (uint32_t)lo;
	v->hi = (uint32_t)hi;
	v->line = p->line;
	j->nvdefs++;
	return 0;
bad:
	return cfg_perr(p, p->line,
	    "'%s': expected view.K or view.K-L with views K to L (like "
	    "view.1 or view.2-7)",
	    key);
}

/* "key = value" in the current section. */
static int
set_line_key(struct parser *p, const char *key, const char *val)
{
	const struct key *k = cfg_find_key(p->sec, key, strlen(key));
	const char *sname;
	void *base = section_base(p, &sname);
	char msg[512];
	int r;

	if (k == NULL && p->sec == SEC_JOB && strncmp(key, "view.", 5) == 0)
		return set_view_key(p, key, val);
	if (k == NULL) {
		cfg_list_keys(p->sec, msg, sizeof(msg));
		return cfg_perr(p, p->line,
		    "unknown key '%s' in [%s%s%s] "
		    "(expected %s)",
		    key, section_names[p->sec], *sname ? " " : "", sname, msg);
	}
	if (p->seen & (1ull << cfg_key_index(k)))
		return cfg_perr(
		    p, p->line, "key '%s' given twice in this section", key);
	p->seen |= 1ull << cfg_key_index(k);
	if (*val == '\0' && p->sec != SEC_MOUNT)
		return cfg_perr(p, p->line, "%s: no value", key);
	if ((r = cfg_set_key(k, base, p->dir, val, msg, sizeof(msg))) ==
	    -EINVAL)
		return cfg_perr(p, p->line, "%s", msg);
	if (r == 0 && k->line_off >= 0)
		*(int *)((char *)base + k->line_off) = p->line;
	return r;
}

static int
parse_line(struct parser *p, char *s)
{
	char *key, *val, *eq, *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	if (*s == '\0' || *s == '#' || *s == ';')
		return 0;
	if (*s == '[') {
		char *close = strchr(s, ']');

		if (!close)
			return cfg_perr(
			    p, p->line, "section header without ']'");
		for (e = close + 1; *e && isspace((unsigned char)*e); e++)
			;
		if (*e && *e != '#' && *e != ';')
			return cfg_perr(p, p->line,
			    "text after the section "
			    "header");
		*close = '\0';
		return begin_section(p, s + 1);
	}
	if ((eq = strchr(s, '=')) == NULL)
		return cfg_perr(p, p->line,
		    "expected 'key = value' or "
		    "'[section]'");
	*eq = '\0';
	key = s;
	for (e = eq; e > key && isspace((unsigned char)e[-1]);)
		*--e = '\0';
	val = eq + 1;
	while (isspace((unsigned char)*val))
		val++;
	/* An inline comment starts at a '#' after a blank. */
	for (e = val; *e; e++)
		if (*e == '#' && e > val && isspace((unsigned char)e[-1])) {
			*e = '\0';
			break;
		}
	for (e = val + strlen(val); e > val && isspace((unsigned char)e[-1]);)
		*--e = '\0';
	if (*key == '\0')
		return cfg_perr(p, p->line, "a value without a key");
	if (p->sec == SEC_NONE)
		return cfg_perr(
		    p, p->line, "key '%s' outside of a section", key);
	return set_line_key(p, key, val);
}

/* A dataset's text = (captions): txt | json:KEY | none. */
static int
check_text(struct parser *p, const struct cfg_dataset *d)
{
	if (d->text == NULL)
		return 0;
	if (strcmp(d->text, "txt") != 0 && strcmp(d->text, "none") != 0 &&
	    (strncmp(d->text, "json:", 5) != 0 || d->text[5] == '\0'))
		return cfg_perr(p, d->text_line,
		    "[dataset %s]: text '%s': expected txt, json:KEY or none",
		    d->name, d->text);
	if (d->manifest && strncmp(d->text, "json:", 5) == 0)
		return cfg_perr(p, d->text_line,
		    "[dataset %s]: text = %s: a manifest's caption is its "
		    "third column (text = txt)",
		    d->name, d->text);
	return 0;
}

/* Whole-file checks, after every line has been read. */
static int
check_cfg(struct parser *p)
{
	struct cfg *c = p->c;
	int r;

	if (c->ndatasets == 0)
		return cfg_perr(p, p->line, "no [dataset NAME] section");
	if (c->njobs == 0)
		return cfg_perr(p, p->line, "no [job NAME] section");
	for (size_t i = 0; i < c->ndatasets; i++) {
		const struct cfg_dataset *d = &c->datasets[i];

		if (!d->root && !d->shards)
			return cfg_perr(
			    p, d->line, "[dataset %s] has no root", d->name);
		if (d->shards && (d->root || d->manifest))
			return cfg_perr(p, d->line,
			    "[dataset %s]: shards and %s exclude each other",
			    d->name, d->root ? "root" : "manifest");
		if (d->label && !d->shards)
			return cfg_perr(p, d->line,
			    "[dataset %s]: label applies to shards only",
			    d->name);
		if (d->label && strcmp(d->label, "cls") != 0 &&
		    strcmp(d->label, "none") != 0 &&
		    strcmp(d->label, "auto") != 0 &&
		    (strncmp(d->label, "json:", 5) != 0 || d->label[5] == '\0'))
			return cfg_perr(p, d->line,
			    "[dataset %s]: label '%s': expected cls, json:KEY, "
			    "none or auto",
			    d->name, d->label);
		if ((r = check_text(p, d)) != 0)
			return r;
		if (d->classes &&
		    (r = cfg_load_classes(p, &c->datasets[i])) != 0)
			return r;
	}
	for (size_t i = 0; i < c->njobs; i++)
		if ((r = cfg_check_job(p, &c->jobs[i])) != 0)
			return r;
	return 0;
}

/* The absolute directory of the file path names (relative paths in it). */
static char *
config_dir(const char *path)
{
	char *dir = strdup(path), *slash, *abs;

	if (dir == NULL)
		return NULL;
	if ((slash = strrchr(dir, '/')) != NULL)
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		strcpy(dir, ".");
	abs = cfg_join_path(NULL, dir);
	free(dir);
	return abs;
}

int
cfg_load(const char *path, struct cfg **out, char *err, size_t errlen)
{
	struct parser p = {.err = err, .errlen = errlen};
	char *line = NULL, *dir = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *fp;
	int r = 0;

	if ((fp = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!(p.c = cfg_new(path)) || !(dir = config_dir(path))) {
		r = -ENOMEM;
		goto out;
	}
	p.dir = dir;
	while ((n = getline(&line, &cap, fp)) >= 0) {
		p.line++;
		if (strlen(line) != (size_t)n) {
			r = cfg_perr(&p, p.line, "a NUL byte in the line");
			goto out;
		}
		if ((r = parse_line(&p, line)) != 0)
			goto out;
	}
	if (ferror(fp)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		r = -EIO;
		goto out;
	}
	if (p.line == 0)
		p.line = 1;
	r = check_cfg(&p);
out:
	if (r == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory", path);
	if (r == 0)
		*out = p.c; /* transferred */
	else
		cfg_free(p.c);
	free(line);
	free(dir);
	fclose(fp);
	return r;
}

const char *
cfg_cluster_warning(const struct cfg_mount *m)
{
	if (m->cluster == NULL || m->cluster_secret != NULL)
		return NULL;
	return "cluster without cluster_secret: anyone who can reach the "
	       "memcached servers can store the pixels this mount serves for "
	       "any sample; set cluster_secret = FILE (openssl rand -hex 32, "
	       "mode 0600, the same on every node: feedfs.conf(5))";
}
