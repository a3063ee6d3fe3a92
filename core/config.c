/*
 * config.c - the INI config: parse, check, defaults.
 *
 * The grammar is small: "[section]" or "[section NAME]" headers, "key =
 * value" lines, comments from "#" or ";" at the start of a line or from a
 * "#" that follows a blank inside a value.  Every error stops the load and
 * names the file and line.
 *
 * What each key sets and how its value is checked is the key table of
 * config_keys.c; this file is the grammar, the sections and the checks of
 * the whole file (datasets named by jobs, pipelines parsed once).
 */
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config_int.h"
#include "core/mix.h"

#define DEFAULT_TRAIN_PIPELINE                                                 \
	"decode resize(256) cache random_resized_crop(224) flip(0.5) "         \
	"normalize(imagenet)"
#define DEFAULT_VAL_PIPELINE                                                   \
	"decode resize(256) center_crop(224) cache normalize(imagenet)"

static const char *const section_names[] = {"", "mount", "dataset", "job"};

/* Parser state: the file, the line, the section being filled. */
struct parser {
	struct cfg *c;
	const char *dir; /* of the config file (absolute), for relative paths */
	int line;
	enum section sec;
	int mount_line;
	uint64_t seen; /* keys[] of the current section already set (bits) */
	char *err;
	size_t errlen;
};

static int __attribute__((format(printf, 3, 4)))
perr(struct parser *p, int line, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(p->err, p->errlen, "%s:%d: %s", p->c->path, line, msg);
	return -EINVAL;
}

static struct cfg *
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
				return perr(p, p->line,
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
		return (d->name = strdup(name)) ? 0 : -ENOMEM;
	}
	struct cfg_job *j;

	for (size_t i = 0; i < c->njobs; i++)
		if (strcmp(c->jobs[i].name, name) == 0)
			return perr(p, p->line,
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
			return perr(p, p->line, "[mount] takes no name");
		if (p->mount_line)
			return perr(p, p->line,
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
		return perr(p, p->line,
		    "unknown section [%s] (expected "
		    "[mount], [dataset NAME] or [job NAME])",
		    kind);
	if (!*name)
		return perr(
		    p, p->line, "[%s] needs a name: [%s NAME]", kind, kind);
	if (!valid_name(name))
		return perr(p, p->line,
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
		return perr(p, p->line,
		    "%s: view 0 is the job's pipeline (batch-NNNNNN.npy): "
		    "set its tail with pipeline =",
		    key);
	if (lo > hi || hi >= CFG_MAX_VIEWS)
		return perr(p, p->line, "%s: views K-L need 1 <= K <= L <= %d",
		    key, CFG_MAX_VIEWS - 1);
	if (*val == '\0')
		return perr(p, p->line, "%s: no value", key);
	for (size_t i = 0; i < j->nvdefs; i++)
		if (j->vdefs[i].lo <= hi && lo <= j->vdefs[i].hi)
			return perr(p, p->line,
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
	return perr(p, p->line,
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
		return perr(p, p->line,
		    "unknown key '%s' in [%s%s%s] "
		    "(expected %s)",
		    key, section_names[p->sec], *sname ? " " : "", sname, msg);
	}
	if (p->seen & (1ull << cfg_key_index(k)))
		return perr(
		    p, p->line, "key '%s' given twice in this section", key);
	p->seen |= 1ull << cfg_key_index(k);
	if (*val == '\0' && p->sec != SEC_MOUNT)
		return perr(p, p->line, "%s: no value", key);
	if ((r = cfg_set_key(k, base, p->dir, val, msg, sizeof(msg))) ==
	    -EINVAL)
		return perr(p, p->line, "%s", msg);
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
			return perr(p, p->line, "section header without ']'");
		for (e = close + 1; *e && isspace((unsigned char)*e); e++)
			;
		if (*e && *e != '#' && *e != ';')
			return perr(p, p->line,
			    "text after the section "
			    "header");
		*close = '\0';
		return begin_section(p, s + 1);
	}
	if ((eq = strchr(s, '=')) == NULL)
		return perr(p, p->line,
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
		return perr(p, p->line, "a value without a key");
	if (p->sec == SEC_NONE)
		return perr(p, p->line, "key '%s' outside of a section", key);
	return set_line_key(p, key, val);
}

/* A job's dataset (by name, or the only one) and its parsed pipeline. */
/* Add the step (epoch, w) to j's schedule, taking w; keeps it sorted. */
static int
add_step(struct cfg_job *j, uint32_t epoch, uint64_t *w)
{
	struct cfg_mix_step *st;
	size_t i;

	for (i = 0; i < j->nsteps && j->steps[i].epoch < epoch; i++)
		;
	if (i < j->nsteps && j->steps[i].epoch == epoch) {
		free(j->steps[i].w);
		j->steps[i].w = w; /* transferred */
		return 0;
	}
	if ((st = realloc(j->steps, (j->nsteps + 1) * sizeof(*st))) == NULL) {
		free(w);
		return -ENOMEM;
	}
	j->steps = st;
	memmove(st + i + 1, st + i, (j->nsteps - i) * sizeof(*st));
	st[i].epoch = epoch;
	st[i].w = w; /* transferred */
	j->nsteps++;
	return 0;
}

/*
 * A mixture job's sources (datasets of this file), its weights and its
 * schedule: "EPOCH:NAME:W[,NAME:W...]" steps separated by blanks, epochs
 * increasing and below the job's epochs.
 */
static int
check_mixture(struct parser *p, struct cfg_job *j)
{
	struct cfg *c = p->c;
	const char *names[MIX_MAX_SOURCES];
	struct mix_pair *pv = NULL;
	char msg[512], *sched = NULL, *save = NULL, *tok;
	uint64_t *w = NULL;
	long last = -1;
	size_t np, k;
	int r;

	if (j->dataset)
		return perr(p, j->mixture_line,
		    "[job %s] has both dataset (line %d) and mixture: "
		    "a job takes one or the other",
		    j->name, j->dataset_line);
	if ((r = mix_split(j->mixture, &pv, &np, msg, sizeof(msg))) != 0) {
		if (r == -EINVAL)
			r = perr(p, j->mixture_line, "mixture: %s", msg);
		return r;
	}
	if ((j->source_index = calloc(np, sizeof(*j->source_index))) == NULL ||
	    (w = calloc(np, sizeof(*w))) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	j->nsources = np;
	for (size_t i = 0; i < np; i++) {
		for (k = 0; k < c->ndatasets; k++)
			if (strcmp(c->datasets[k].name, pv[i].name) == 0)
				break;
		if (k == c->ndatasets) {
			r = perr(p, j->mixture_line,
			    "mixture: unknown dataset '%s'", pv[i].name);
			goto out;
		}
		j->source_index[i] = k;
		names[i] = c->datasets[k].name;
		w[i] = pv[i].w;
	}
	/* The sum is checked by mix_weights over the sources' names. */
	if (mix_weights(j->mixture, names, np, w, msg, sizeof(msg)) != 0) {
		r = perr(p, j->mixture_line, "mixture: %s", msg);
		goto out;
	}
	j->dataset_index = j->source_index[0];
	if ((r = add_step(j, 0, w)) != 0) {
		w = NULL;
		goto out;
	}
	w = NULL;
	if (j->mixture_schedule &&
	    (sched = strdup(j->mixture_schedule)) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	for (tok = sched ? strtok_r(sched, " \t", &save) : NULL; tok;
	     tok = strtok_r(NULL, " \t", &save)) {
		char *colon = strchr(tok, ':'), *end;
		long e;

		errno = 0;
		e = strtol(tok, &end, 10);
		if (colon == NULL || end != colon || tok[0] < '0' ||
		    tok[0] > '9' || errno != 0) {
			r = perr(p, j->schedule_line,
			    "mixture_schedule: '%s': expected "
			    "EPOCH:NAME:W[,NAME:W...]",
			    tok);
			goto out;
		}
		if (e <= last || (uint64_t)e >= j->epochs) {
			r = perr(p, j->schedule_line,
			    "mixture_schedule: epoch %ld %s", e,
			    e <= last ? "does not follow the step before it"
				      : "is past the job's last epoch");
			goto out;
		}
		last = e;
		if ((w = calloc(np, sizeof(*w))) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		if (mix_weights(colon + 1, names, np, w, msg, sizeof(msg)) !=
		    0) {
			r = perr(p, j->schedule_line,
			    "mixture_schedule: epoch %ld: %s", e, msg);
			goto out;
		}
		r = add_step(j, (uint32_t)e, w);
		w = NULL;
		if (r != 0)
			goto out;
	}
	r = 0;
out:
	free(w);
	free(pv);
	free(sched);
	return r;
}

/* The resolution schedule of j: its pipeline's size op can take it. */
static int
check_res(struct parser *p, struct cfg_job *j)
{
	struct xf_pipeline *t;
	int r;

	if (j->res_line == 0)
		return 0;
	if (j->pl->size_at < j->pl->cache_at && j->pl->cache_at < j->pl->nops)
		return perr(p, j->res_line,
		    "resolution: the op that fixes the output size (op %zu of "
		    "the pipeline) comes before cache; a schedule needs it "
		    "after cache, where the cached prefix does not change "
		    "with the size",
		    j->pl->size_at + 1);
	if (j->pl->out_w != j->pl->out_h)
		return perr(p, j->res_line,
		    "resolution: the pipeline's output is %ux%u; a schedule "
		    "sets square sizes (end it with random_resized_crop(S), "
		    "center_crop(S) or resize(S,S))",
		    j->pl->out_w, j->pl->out_h);
	if ((r = xf_pipeline_sized(j->pl, cfg_job_res(j, 0), &t)) != 0)
		return r;
	xf_pipeline_free(t);
	return 0;
}

/*
 * A job's views: views = N, its view.K lines inside 1..N-1, each tail
 * parsed after the pipeline's cached prefix ("PREFIX cache TAIL"), which
 * the views share; the rules of a view's job.
 */
static int
check_views(struct parser *p, struct cfg_job *j)
{
	char msg[512];
	size_t plen;
	char *prefix;
	int r;

	for (size_t i = 0; i < j->nvdefs; i++)
		if (j->vdefs[i].hi >= j->views)
			return perr(p, j->vdefs[i].line,
			    "view.%u: the job has %" PRIu64 " view%s (views = "
			    "%" PRIu64 "): views 0 to %" PRIu64,
			    j->vdefs[i].hi, j->views, j->views == 1 ? "" : "s",
			    j->views, j->views - 1);
	if (j->views == 1)
		return 0;
	if (j->pl->cache_at >= j->pl->nops)
		return perr(p, j->views_line,
		    "views: the pipeline has no cache op; the views share "
		    "the prefix before it and differ in the ops after it");
	if (j->order == CFG_ORDER_RELAXED)
		return perr(p, j->views_line,
		    "views: order = relaxed chooses each batch's samples as "
		    "they finish, so views would differ in content; views "
		    "need order = strict");
	if (j->mixture)
		return perr(p, j->views_line,
		    "views: a mixture job cannot have views (its weights "
		    "change by writes of JOB/mixture)");
	if (j->gpu)
		return perr(p, j->views_line,
		    "views: gpu = on serves view 0 only; set gpu = off");
	/*
	 * A batch op's soft labels are one file per batch, which the views
	 * share, and a cutmix box (and so its lambda) depends on each view's
	 * size: refused rather than labels that fit one view only.
	 */
	if (j->pl->batch_op != NULL)
		return perr(p, j->views_line,
		    "views: the pipeline ends in batch op %s, whose soft "
		    "labels (one file per batch, shared by the views) would "
		    "fit view 0 only; batch ops with views are not supported",
		    j->pl->batch_op->kind == XF_OP_MIXUP    ? "mixup"
		    : j->pl->batch_op->kind == XF_OP_CUTMIX ? "cutmix"
							    : "mixup_cutmix");
	if ((j->view_pl = calloc(j->views, sizeof(*j->view_pl))) == NULL ||
	    (j->view_text = calloc(j->views, sizeof(*j->view_text))) == NULL)
		return -ENOMEM;
	plen = xf_prefix_text(j->pl, NULL, 0);
	if ((prefix = malloc(plen + 1)) == NULL)
		return -ENOMEM;
	xf_prefix_text(j->pl, prefix, plen + 1);
	r = 0;
	for (size_t i = 0; i < j->nvdefs && r == 0; i++) {
		struct cfg_vdef *v = &j->vdefs[i];

		for (uint32_t k = v->lo; k <= v->hi && r == 0; k++) {
			if (asprintf(&j->view_text[k], "%s cache %s", prefix,
				v->tail) < 0) {
				j->view_text[k] = NULL;
				r = -ENOMEM;
				break;
			}
			if ((r = xf_pipeline_parse(j->view_text[k],
				 &j->view_pl[k], msg, sizeof(msg))) != 0) {
				r = r == -EINVAL ? perr(p, v->line,
						       "view.%u: pipeline "
						       "(after the cached "
						       "prefix): %s",
						       k, msg)
						 : r;
				break;
			}
			if (xf_check_output(j->view_pl[k], j->dtype, msg,
				sizeof(msg)) != 0) {
				r = perr(p, v->line, "view.%u: %s", k, msg);
				break;
			}
			if (j->view_pl[k]->batch_op != NULL) {
				r = perr(p, v->line,
				    "view.%u: a batch op (mixup, cutmix, "
				    "mixup_cutmix) in a view's tail: the views "
				    "share one labels file per batch, and "
				    "batch ops with views are not supported",
				    k);
				break;
			}
			j->view_pl[k]->max_pixels = j->max_pixels;
		}
	}
	free(prefix);
	return r;
}

static int
check_job(struct parser *p, struct cfg_job *j)
{
	struct cfg *c = p->c;
	char msg[512];
	size_t k;
	int r;

	if (j->mixture) {
		if ((r = check_mixture(p, j)) != 0)
			return r;
		goto pipeline;
	}
	if (j->mixture_schedule)
		return perr(
		    p, j->schedule_line, "mixture_schedule without mixture");
	if (j->epoch_samples)
		return perr(p, j->epoch_samples_line,
		    "epoch_samples needs a mixture (a job over one dataset "
		    "serves each of its samples once per epoch)");
	if (!j->dataset) {
		if (c->ndatasets > 1)
			return perr(p, j->line,
			    "[job %s] needs a dataset key: "
			    "this file has %zu datasets",
			    j->name, c->ndatasets);
		if (!(j->dataset = strdup(c->datasets[0].name)))
			return -ENOMEM;
	}
	for (k = 0; k < c->ndatasets; k++)
		if (strcmp(c->datasets[k].name, j->dataset) == 0)
			break;
	if (k == c->ndatasets)
		return perr(
		    p, j->dataset_line, "unknown dataset '%s'", j->dataset);
	j->dataset_index = k;
pipeline:
	if (!j->pipeline && !(j->pipeline = strdup(DEFAULT_TRAIN_PIPELINE)))
		return -ENOMEM;
	if (xf_pipeline_parse(j->pipeline, &j->pl, msg, sizeof(msg)) != 0)
		return perr(p, j->pipeline_line, "pipeline: %s", msg);
	if (xf_check_output(j->pl, j->dtype, msg, sizeof(msg)) != 0)
		return perr(p, j->pipeline_line, "%s", msg);
	j->pl->max_pixels = j->max_pixels;
	if ((r = check_res(p, j)) != 0 || (r = check_views(p, j)) != 0)
		return r;
	return 0;
}

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

/* Read and parse d->classes into d->class_names. */
static int
load_classes(struct parser *p, struct cfg_dataset *d)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd, r;

	fd = open(d->classes, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return perr(p, d->classes_line, "classes: %s: %s", d->classes,
		    strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return perr(p, d->classes_line, "classes: %s: not a regular file",
		    d->classes);
	}
	if ((uint64_t)st.st_size > MAX_CLASSES_FILE) {
		close(fd);
		return perr(p, d->classes_line,
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
		return perr(p, d->classes_line,
		    "classes: %s: a NUL byte: not a text file", d->classes);
	}
	r = cfg_classes_parse(buf, got, d->classes, &d->class_names,
	    &d->nclass_names, p->err, p->errlen);
	free(buf);
	return r;
}

/* Whole-file checks, after every line has been read. */
static int
check_cfg(struct parser *p)
{
	struct cfg *c = p->c;
	int r;

	if (c->ndatasets == 0)
		return perr(p, p->line, "no [dataset NAME] section");
	if (c->njobs == 0)
		return perr(p, p->line, "no [job NAME] section");
	for (size_t i = 0; i < c->ndatasets; i++) {
		const struct cfg_dataset *d = &c->datasets[i];

		if (!d->root && !d->shards)
			return perr(
			    p, d->line, "[dataset %s] has no root", d->name);
		if (d->shards && (d->root || d->manifest))
			return perr(p, d->line,
			    "[dataset %s]: shards and %s exclude each other",
			    d->name, d->root ? "root" : "manifest");
		if (d->label && !d->shards)
			return perr(p, d->line,
			    "[dataset %s]: label applies to shards only",
			    d->name);
		if (d->label && strcmp(d->label, "cls") != 0 &&
		    strcmp(d->label, "none") != 0 &&
		    (strncmp(d->label, "json:", 5) != 0 || d->label[5] == '\0'))
			return perr(p, d->line,
			    "[dataset %s]: label '%s': expected cls, json:KEY "
			    "or none",
			    d->name, d->label);
		if (d->classes &&
		    (r = load_classes(p, &c->datasets[i])) != 0)
			return r;
	}
	for (size_t i = 0; i < c->njobs; i++)
		if ((r = check_job(p, &c->jobs[i])) != 0)
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
			r = perr(&p, p.line, "a NUL byte in the line");
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

int
cfg_default(const char *dir, struct cfg **out, char *err, size_t errlen)
{
	struct cfg *c = cfg_new(dir);
	struct cfg_job *j;
	char msg[512];

	if (!c || !(c->datasets = calloc(1, sizeof(*c->datasets))) ||
	    !(c->jobs = calloc(2, sizeof(*c->jobs))))
		goto nomem;
	c->ndatasets = 1;
	if (!(c->datasets[0].name = strdup(CFG_DEFAULT_DATASET)) ||
	    !(c->datasets[0].root = cfg_join_path(NULL, dir)))
		goto nomem;
	for (size_t i = 0; i < 2; i++) {
		j = &c->jobs[i];
		cfg_job_defaults(j);
		c->njobs++;
		if (!(j->name = strdup(i == 0 ? "train" : "val")) ||
		    !(j->dataset = strdup(CFG_DEFAULT_DATASET)) ||
		    !(j->pipeline = strdup(i == 0 ? DEFAULT_TRAIN_PIPELINE
						  : DEFAULT_VAL_PIPELINE)))
			goto nomem;
		if (xf_pipeline_parse(j->pipeline, &j->pl, msg, sizeof(msg)) !=
		    0)
			goto nomem; /* the defaults parse: only memory fails */
		j->pl->max_pixels = j->max_pixels;
	}
	c->jobs[1].shuffle = false;
	c->jobs[1].epochs = 1;
	*out = c;
	return 0;
nomem:
	cfg_free(c);
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
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

unsigned
cfg_threads(const struct cfg_mount *m)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	if (m->threads)
		return (unsigned)m->threads;
	return ncpu > 0 ? 2 * (unsigned)ncpu : 2;
}
