/*
 * cache-report.c - a program's part (tools/, over cache/ and the model in
 * core/): the reports of feedfs-cache (feedfs-cache.h).  stats: the
 * store's totals, the holder's counters, the mounts that share it, and
 * per prefix and format the entries, the hits and misses, and with -c how
 * much of each job's dataset is cached; ls: the prefixes and the jobs
 * using them.
 */
#include <sys/stat.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "core/config.h"
#include "core/dsopen.h"
#include "dataset/dataset.h"
#include "core/job.h"
#include "core/sample.h"
#include "tools/feedfs-cache.h"
#include "transforms/xf.h"

/* Per prefix totals (few prefixes: a list). */
struct pfx {
	char *text;
	uint64_t n, bytes, oldest, newest;
	struct pfx *next;
};

struct tally {
	uint64_t n, bytes;
	struct pfx *list;
	int oom;
};

static int
tally_one(const struct cache_entry *e, void *arg)
{
	struct tally *t = arg;
	struct pfx *p;

	t->n++;
	t->bytes += e->bytes;
	for (p = t->list; p; p = p->next)
		if (strlen(p->text) == e->prefix_len &&
		    memcmp(p->text, e->prefix, e->prefix_len) == 0)
			break;
	if (!p) {
		if ((p = calloc(1, sizeof(*p))) == NULL ||
		    (p->text = strndup(e->prefix, e->prefix_len)) == NULL) {
			free(p);
			t->oom = 1;
			return -ENOMEM;
		}
		p->oldest = e->time;
		p->next = t->list;
		t->list = p;
	}
	p->n++;
	p->bytes += e->bytes;
	if (e->time < p->oldest)
		p->oldest = e->time;
	if (e->time > p->newest)
		p->newest = e->time;
	return 0;
}

static void
tally_free(struct tally *t)
{
	while (t->list) {
		struct pfx *p = t->list;

		t->list = p->next;
		free(p->text);
		free(p);
	}
}

static void
human(uint64_t b, char *buf, size_t len)
{
	const char *u = "BKMGT";

	double v = (double)b;
	while (v >= 1024 && u[1]) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, *u == 'B' ? "%.0f%c" : "%.1f%c", v, *u);
}

/* The key text of job j: its prefix and cache_format ("" on error). */
static void
job_text(const struct cfg_job *j, char *text, size_t len)
{
	char *index, *key;

	text[0] = '\0';
	if (job_cache_texts(j, &index, &key) != 0)
		return;
	snprintf(text, len, "%s", index);
	free(index);
	free(key);
}

/*
 * How many samples of job j's dataset have an entry of text: those whose
 * content digest the cache remembers (for the file as it is now) and whose
 * key has an entry.  -1 when the dataset cannot be read.
 */
static long
job_cached(struct cache *c, const struct cfg *cfg, const struct cfg_job *j,
    size_t *nsamples)
{
	const struct cfg_dataset *d = &cfg->datasets[j->dataset_index];
	struct dataset *ds;
	char err[4600], path[4096], *index = NULL, *keytext = NULL;
	long n = 0;
	int idx, r;

	if (job_cache_texts(j, &index, &keytext) != 0) {
		fprintf(stderr, "feedfs-cache: out of memory\n");
		return -1;
	}
	free(index);
	/* The mount's shard index where it is there and passes its checks. */
	idx = cfg->mount.cache_dir == NULL
		  ? -1
		  : cache_index_open(
			cfg->mount.cache_dir, false, err, sizeof(err));
	r = ds_open_cfg(d, idx, NULL, NULL, &ds, err, sizeof(err));
	if (idx >= 0)
		close(idx);
	if (r != 0) {
		fprintf(stderr, "feedfs-cache: job %s: %s\n", j->name, err);
		free(keytext);
		return -1;
	}
	for (size_t i = 0; i < ds->n; i++) {
		uint8_t digest[32], key[CACHE_KEY_LEN];
		struct stat st;
		enum xf_src kind;

		/* As the mount names and keys it: a file, a tar member, a PNG,
		 * a WebP. */
		if (ds_sample_name(ds, i, path, sizeof(path)) != 0 ||
		    ds_sample_stat(ds, i, &st) != 0 ||
		    !sample_memo_get(c, path, &st, digest, &kind))
			continue;
		sample_cache_key(digest, keytext, kind, key);
		n += cache_has(c, key);
	}
	*nsamples = ds->n;
	ds_free(ds);
	free(keytext);
	return n;
}

/* The prefixes the store's holder counts (cache.h: CACHE_PFX_MAX). */
#define PFX_COUNTED 32

/*
 * Per prefix and format: entries, bytes, the hits and misses of the
 * lookups of the feedfs that holds the store (its own, not its clients')
 * since it took it, and with -c, per job of that prefix and format, the
 * fraction of its dataset cached.
 */
static void
print_prefixes(struct cache *c, const struct tally *t, const char *dir,
    const struct cfg *cfg)
{
	char reply[4096], who[1024];
	bool live =
	    fc_held(dir, who, sizeof(who)) &&
	    fc_ctl(dir, who, "prefix-stats", reply, sizeof(reply)) == 0 &&
	    strncmp(reply, "ok", 2) == 0;

	if (fc_timed_out)
		return;

	for (struct pfx *p = t->list; p; p = p->next) {
		char *fmt = strstr(p->text, "|format=");
		uint64_t h = 0, m = 0;
		bool counted = false;
		int nrec = 0;

		if (live) {
			/* Records: TAB text TAB hits TAB misses. */
			char cp[sizeof(reply)], *q = cp + 2, *f[3];

			memcpy(cp, reply, sizeof(cp));
			while (q != NULL && *q == '\t') {
				q++;
				for (int k = 0; k < 3; k++)
					f[k] = strsep(&q, "\t");
				if (f[1] == NULL || f[2] == NULL)
					break;
				nrec++;
				if (q != NULL)
					*--q = '\t'; /* the next record's */
				if (strcmp(f[0], p->text) == 0) {
					h = strtoull(f[1], NULL, 10);
					m = strtoull(f[2], NULL, 10);
					counted = true;
				}
			}
		}
		printf("prefix\t%.*s\t%" PRIu64 " entries\t%" PRIu64
		       " bytes\tformat %s",
		    fmt ? (int)(fmt - p->text) : (int)strlen(p->text), p->text,
		    p->n, p->bytes, fmt ? fmt + 8 : "raw");
		if (counted && h + m > 0)
			printf("\thits %" PRIu64 " misses %" PRIu64
			       " (%.1f%%: the owner's own lookups of this "
			       "prefix, since it took the store)",
			    h, m, 100.0 * (double)h / (double)(h + m));
		else if (live && !counted && nrec < PFX_COUNTED &&
			 strlen(reply) + 320 < sizeof(reply))
			/* Every counted prefix came back: not this one. */
			printf("\thits 0 misses 0 (the owner has not looked "
			       "it up since it took the store)");
		else if (live)
			printf("\thits n/a (more than %d prefixes: not "
			       "counted)",
			    PFX_COUNTED);
		else
			printf("\thits n/a");
		for (size_t i = 0; cfg && i < cfg->njobs; i++) {
			char text[4096];
			size_t ns = 0;
			long k;

			job_text(&cfg->jobs[i], text, sizeof(text));
			if (strcmp(text, p->text) != 0 ||
			    (k = job_cached(c, cfg, &cfg->jobs[i], &ns)) < 0)
				continue;
			printf("\tjob %s: %ld of %zu samples cached (%.1f%%)",
			    cfg->jobs[i].name, k, ns,
			    ns ? 100.0 * (double)k / (double)ns : 0.0);
		}
		printf("\n");
	}
}

/*
 * The mounts that share the store, from its owner's table: "mount PID
 * ROLE hits H misses M MOUNTPOINT", each mount's own lookups (hits and
 * misses above are the store's, every mount's together), so labelled.
 */
static void
print_mounts(const char *dir)
{
	char *text = NULL, *line, *save = NULL;
	int n = 0;

	if (cache_mounts(dir, &text) != 0) {
		printf("mounts\t0\n");
		return;
	}
	for (line = text; (line = strchr(line, '\n')) != NULL; line++)
		n++;
	printf("mounts\t%d\n", n);
	for (line = strtok_r(text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char role[16], label[512] = "-";
		long pid;
		uint64_t h, m;

		if (sscanf(line,
			"%ld\t%15[^\t]\t%" SCNu64 "\t%" SCNu64 "\t%511[^\n]",
			&pid, role, &h, &m, label) < 4)
			continue;
		printf("mount\t%ld\t%s\thits %" PRIu64 "\tmisses %" PRIu64
		       "\t%s\tthis mount's own lookups%s\n",
		    pid, role, h, m, label,
		    strcmp(role, "owner") == 0 ? ""
					       : ", as of its last request");
	}
	free(text);
}

int
cmd_stats(const char *dir, const struct cfg *cfg)
{
	struct cache *c;
	struct tally t = {0};
	struct cache_stats st;
	char err[512], reply[512], who[1024], hb[32];
	uint64_t hits, misses, ins, den, ev, rf, ovs, wr;
	int r;

	if (fc_open_read(dir, &c) != 0)
		return EXIT_DAMAGE;
	r = cache_scan(c, tally_one, &t, err, sizeof(err));
	cache_get_stats(c, &st);
	if (r != 0) {
		cache_close(c);
		fprintf(stderr, "feedfs-cache: %s: %s\n", dir,
		    t.oom ? "out of memory" : err);
		tally_free(&t);
		return EXIT_DAMAGE;
	}
	printf("cache_dir\t%s\n", dir);
	printf("entries\t%" PRIu64 "\n", t.n);
	human(t.bytes, hb, sizeof(hb));
	printf("bytes\t%" PRIu64 " (%s)\n", t.bytes, hb);
	printf("disk_bytes\t%" PRIu64 "\n", st.disk_bytes);
	printf("digest_memos\t%" PRIu64 "\n", st.memos);
	if (fc_held(dir, who, sizeof(who)) &&
	    fc_ctl(dir, who, "stats", reply, sizeof(reply)) == 0 &&
	    sscanf(reply, "ok hits %" SCNu64 " misses %" SCNu64, &hits,
		&misses) == 2) {
		/* Three pairs of hits and misses: each says whose (issue
		 * 36). */
		printf("hits\t%" PRIu64 "\tthe store's: lookups that found "
		       "an entry, every mount's, since its owner took it\n",
		    hits);
		printf("misses\t%" PRIu64 "\tthe store's: lookups that found "
		       "none, every mount's, since its owner took it\n",
		    misses);
		if (sscanf(reply,
			"ok hits %*u misses %*u inserts %" SCNu64
			" denied %" SCNu64 " evictions %" SCNu64
			" refreshes %" SCNu64,
			&ins, &den, &ev, &rf) == 4) {
			printf("inserts\t%" PRIu64 "\n", ins);
			printf("admission_denied\t%" PRIu64 "\n", den);
			printf("evictions\t%" PRIu64 "\n", ev);
			printf("refreshes\t%" PRIu64 "\n", rf);
		}
		if (sscanf(reply,
			"ok hits %*u misses %*u inserts %*u denied %*u "
			"evictions %*u refreshes %*u oversize %" SCNu64
			" written %" SCNu64,
			&ovs, &wr) == 2) {
			printf("oversize\t%" PRIu64 "\n", ovs);
			printf("written_bytes\t%" PRIu64 "\n", wr);
		}
	} else if (!fc_timed_out) {
		printf("hits\tn/a (no running feedfs holds it)\n");
		printf("misses\tn/a\n");
	}
	if (!fc_timed_out)
		print_mounts(dir);
	print_prefixes(c, &t, dir, cfg);
	cache_close(c);
	tally_free(&t);
	return 0;
}

int
cmd_ls(const char *dir, const struct cfg *cfg)
{
	struct cache *c;
	struct tally t = {0};
	char err[512], hb[32];
	int r;

	if (fc_open_read(dir, &c) != 0)
		return EXIT_DAMAGE;
	r = cache_scan(c, tally_one, &t, err, sizeof(err));
	cache_close(c);
	if (r != 0) {
		fprintf(stderr, "feedfs-cache: %s: %s\n", dir,
		    t.oom ? "out of memory" : err);
		tally_free(&t);
		return EXIT_DAMAGE;
	}
	printf("ENTRIES\tBYTES\tPREFIX\tJOBS\n");
	for (struct pfx *p = t.list; p; p = p->next) {
		int njobs = 0;

		human(p->bytes, hb, sizeof(hb));
		printf("%" PRIu64 "\t%s\t%s\t", p->n, hb, p->text);
		for (size_t i = 0; cfg && i < cfg->njobs; i++) {
			char text[4096];

			job_text(&cfg->jobs[i], text, sizeof(text));
			if (strcmp(text, p->text) == 0)
				printf("%s%s", njobs++ ? "," : "",
				    cfg->jobs[i].name);
		}
		printf("%s\n", njobs ? "" : cfg ? "-" : "(no -c config)");
	}
	tally_free(&t);
	return 0;
}
