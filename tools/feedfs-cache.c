/*
 * feedfs-cache.c - inspect and maintain a feedfs cache directory.
 *
 *   feedfs-cache [-c CONFIG] [--cache-dir DIR] COMMAND [ARGS]
 *	stats | ls | verify | evict --prefix TEXT | evict --older-than AGE |
 *	clear | compact
 *
 * The directory is DIR, else CONFIG's [mount] cache_dir, else the default.
 * Reading commands (stats, ls, verify) open the store as a RocksDB
 * secondary instance, which works while a feedfs holds it (that one is
 * asked to flush first, through its control socket, so that they see
 * everything).  Writing commands (evict, clear, compact) go through the
 * control socket when a feedfs holds the store, and open it themselves
 * when none does.  Each request to that feedfs has a deadline (--timeout,
 * default 5 s); one not answered in time ends the command.  Exit status:
 * 0, 1 for damage found by verify or a failed command, 2 for a usage
 * error, 3 when the feedfs that holds the store did not answer in time.
 */
#include <sys/stat.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "cache/cache.h"
#include "cache/format.h"
#include "core/config.h"
#include "core/dataset.h"
#include "core/job.h"
#include "core/sample.h"
#include "transforms/xf.h"

#define EXIT_DAMAGE 1
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 3 /* the feedfs that holds the store did not answer */

/* --timeout: each request to the holder's control socket, in ms. */
static int timeout_ms = CACHE_CTL_TIMEOUT_MS;
/* Set once a request timed out: the command stops, main exits 3. */
static bool timed_out;

/*
 * A request to the feedfs that holds dir (who: cache_probe_lock's text
 * naming it), within timeout_ms: cache_ctl_request's return.  A timeout is
 * said here, once, and ends the command.
 */
static int
ctl(const char *dir, const char *who, const char *req, char *reply, size_t len)
{
	int r;

	if (timed_out)
		return -ETIMEDOUT;
	r = cache_ctl_request(dir, req, reply, len, timeout_ms);
	if (r == -ETIMEDOUT) {
		timed_out = true;
		fprintf(stderr,
		    "feedfs-cache: %s, and it did not answer '%s' on "
		    "%s/control.sock within %.1f s: it may be stopped "
		    "(SIGSTOP, a debugger) or busy; nothing more was asked "
		    "(--timeout SECONDS gives it longer)\n",
		    who, req, dir, timeout_ms / 1000.0);
	}
	return r;
}

static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: feedfs-cache [-c config] [--cache-dir dir] "
	    "[--timeout seconds] command\n"
	    "\n"
	    "  stats                     entries, bytes, hits, misses, per "
	    "prefix\n"
	    "  ls                        the prefixes, their sizes, the jobs "
	    "(of -c) using them\n"
	    "  verify                    check every entry's checksum\n"
	    "  evict --prefix TEXT       drop the entries of one prefix\n"
	    "  evict --older-than AGE    drop entries older than AGE (30s, "
	    "10m, 2h, 7d, 1w)\n"
	    "  clear                     drop everything\n"
	    "  compact                   give the space of dropped entries "
	    "back\n"
	    "\n  --timeout SECONDS         for the feedfs that holds the "
	    "cache to answer\n"
	    "                            each request (default 5)\n"
	    "\nSee feedfs-cache(8).\n");
}

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

static bool
held(const char *dir, char *who, size_t len)
{
	return cache_probe_lock(dir, who, len) == -EBUSY;
}

/*
 * Whether dir may be used at all, before anything is opened in it: the
 * mount's checks, on its descriptor (cache_probe_lock: this user's,
 * writable by nobody else, not a link; LOCK a plain file, never a FIFO
 * that blocks or a link that is followed).  Said when not.
 */
static bool
trusted(const char *dir)
{
	char why[4500];
	int r = cache_probe_lock(dir, why, sizeof(why));

	if (r == 0 || r == -EBUSY)
		return true;
	fprintf(stderr, "feedfs-cache: %s\n", why);
	return false;
}

/* Open for reading; with a feedfs holding dir, ask it to flush first. */
static int
open_read(const char *dir, struct cache **c)
{
	char err[1024], reply[512], who[1024];

	if (!trusted(dir))
		return -1;
	if (held(dir, who, sizeof(who)) &&
	    ctl(dir, who, "flush", reply, sizeof(reply)) != 0) {
		if (timed_out)
			return -1;
		fprintf(stderr,
		    "feedfs-cache: %s; its control socket does not answer, "
		    "so entries not yet flushed are not seen\n",
		    who);
	}
	if (cache_open_secondary(dir, c, err, sizeof(err)) != 0) {
		fprintf(stderr, "feedfs-cache: %s\n", err);
		return -1;
	}
	return 0;
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
print_prefixes(
    struct cache *c, const struct tally *t, const char *dir,
    const struct cfg *cfg)
{
	char reply[4096], who[1024];
	bool live = held(dir, who, sizeof(who)) &&
		    ctl(dir, who, "prefix-stats", reply, sizeof(reply)) == 0 &&
		    strncmp(reply, "ok", 2) == 0;

	if (timed_out)
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
		    fmt ? (int)(fmt - p->text) : (int)strlen(p->text),
		    p->text, p->n, p->bytes, fmt ? fmt + 8 : "raw");
		if (counted && h + m > 0)
			printf("\thits %" PRIu64 " misses %" PRIu64
			       " (%.1f%% since the mount started)",
			    h, m, 100.0 * (double)h / (double)(h + m));
		else if (live && !counted && nrec < PFX_COUNTED &&
			 strlen(reply) + 320 < sizeof(reply))
			/* Every counted prefix came back: not this one. */
			printf("\thits 0 misses 0 (not looked up since the "
			       "mount started)");
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
			    (k = job_cached(c, cfg, &cfg->jobs[i], &ns)) <
				0)
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
 * ROLE hits H misses M MOUNTPOINT" (hits and misses above are the
 * store's, every mount's together).
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
		       "\t%s\n",
		    pid, role, h, m, label);
	}
	free(text);
}

static int
cmd_stats(const char *dir, const struct cfg *cfg)
{
	struct cache *c;
	struct tally t = {0};
	struct cache_stats st;
	char err[512], reply[512], who[1024], hb[32];
	uint64_t hits, misses, ins, den, ev, rf, ovs, wr;
	int r;

	if (open_read(dir, &c) != 0)
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
	if (held(dir, who, sizeof(who)) &&
	    ctl(dir, who, "stats", reply, sizeof(reply)) == 0 &&
	    sscanf(reply, "ok hits %" SCNu64 " misses %" SCNu64, &hits,
		&misses) == 2) {
		printf("hits\t%" PRIu64 "\n", hits);
		printf("misses\t%" PRIu64 "\n", misses);
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
	} else if (!timed_out) {
		printf("hits\tn/a (no running feedfs holds it)\n");
		printf("misses\tn/a\n");
	}
	if (!timed_out)
		print_mounts(dir);
	print_prefixes(c, &t, dir, cfg);
	cache_close(c);
	tally_free(&t);
	return 0;
}

static int
cmd_ls(const char *dir, const struct cfg *cfg)
{
	struct cache *c;
	struct tally t = {0};
	char err[512], hb[32];
	int r;

	if (open_read(dir, &c) != 0)
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

struct verify {
	struct cache *c;
	uint64_t total, done, damaged, gone;
	bool tty;
	time_t shown;
};

static int
count_one(const struct cache_entry *e, void *arg)
{
	(void)e;
	((struct verify *)arg)->total++;
	return 0;
}

static int
verify_one(const struct cache_entry *e, void *arg)
{
	struct verify *v = arg;
	char why[512];
	int r = cache_check_entry(v->c, e, why, sizeof(why));

	v->done++;
	if (r == -ENOENT)
		v->gone++;
	else if (r != 0) {
		v->damaged++;
		if (v->tty)
			fputc('\n', stderr);
		printf("damaged\tseq %" PRIu64 "\t%.*s\t%s\n", e->seq,
		    (int)e->prefix_len, e->prefix, why);
	}
	if (v->tty && (time(NULL) != v->shown || v->done == v->total)) {
		v->shown = time(NULL);
		fprintf(stderr, "\rverify: %" PRIu64 "/%" PRIu64 " entries",
		    v->done, v->total);
	}
	return 0;
}

static int
cmd_verify(const char *dir)
{
	struct verify v = {0};
	char err[512];
	int r;

	if (open_read(dir, &v.c) != 0)
		return EXIT_DAMAGE;
	v.tty = isatty(STDERR_FILENO);
	cache_scan(v.c, count_one, &v, err, sizeof(err));
	r = cache_scan(v.c, verify_one, &v, err, sizeof(err));
	cache_close(v.c);
	if (v.tty)
		fputc('\n', stderr);
	if (r != 0) {
		printf("damaged\tindex\t-\t%s\n", err);
		v.damaged++;
	}
	printf("verified %" PRIu64 " entries: %" PRIu64 " damaged\n",
	    v.done - v.gone, v.damaged);
	return v.damaged ? EXIT_DAMAGE : 0;
}

/* The longest age evict --older-than takes: 100 years. */
#define AGE_MAX (100LL * 366 * 86400)

/* What --older-than takes, for its errors and usage. */
#define AGE_UNITS                                                              \
	"a number of seconds, or a number followed by s, m, h, d or w "        \
	"(30s, 10m, 2h, 7d, 1w), at most 100 years"

/*
 * 30, 30s, 10m, 2h, 7d, 1w: seconds (at most AGE_MAX), or -1 and why
 * (what is wrong with s, without the units: AGE_UNITS says them).
 */
static long long
parse_age(const char *s, char *why, size_t whylen)
{
	static const struct {
		char unit;
		long long secs;
	} units[] = {{'\0', 1}, {'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400},
	    {'w', 7 * 86400}};
	char *end;
	long long v;
	size_t i;

	if (*s < '0' || *s > '9') { /* strtoll takes blanks and signs */
		snprintf(why, whylen, "not a number");
		return -1;
	}
	errno = 0;
	v = strtoll(s, &end, 10);
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (units[i].unit == *end && (*end == '\0' || end[1] == '\0'))
			break;
	if (i == sizeof(units) / sizeof(units[0])) {
		snprintf(why, whylen, "unknown unit '%s'", end);
		return -1;
	}
	if (errno != 0 || v > AGE_MAX / units[i].secs) {
		snprintf(why, whylen, "over 100 years");
		return -1;
	}
	return v * units[i].secs;
}

/* Run req on the store dir, which no feedfs holds: the reply in reply. */
static int
run_offline(const char *dir, const char *req, char *reply, size_t len)
{
	struct cache *c;
	char err[1024];

	if (access(dir, F_OK) != 0) {
		fprintf(stderr, "feedfs-cache: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	if (cache_open(dir, UINT64_MAX / 2, 16u << 20, &c, err, sizeof(err)) !=
	    0) {
		fprintf(stderr, "feedfs-cache: %s\n", err);
		return -1;
	}
	if (cache_note(c))
		fprintf(stderr, "feedfs-cache: %s\n", cache_note(c));
	cache_admin_run(c, req, reply, len);
	cache_close(c);
	return 0;
}

/*
 * A writing command: through the daemon's control socket when one holds
 * dir, else on the store opened here; either way cache_admin_run runs
 * req, the control request.
 */
static int
cmd_write(const char *dir, const char *req)
{
	char who[1024], reply[4096];
	struct cache_admin_req q;
	uint64_t n = 0, bytes = 0, memos = 0;
	int r;

	if (cache_admin_parse(req, &q, reply, sizeof(reply)) != 0) {
		fprintf(stderr, "feedfs-cache: %s: %s\n", req, reply);
		return EXIT_USAGE;
	}
	if (!trusted(dir))
		return EXIT_DAMAGE;
	if (held(dir, who, sizeof(who))) {
		if ((r = ctl(dir, who, req, reply, sizeof(reply))) != 0) {
			if (timed_out)
				return EXIT_TIMEOUT;
			fprintf(stderr,
			    "feedfs-cache: %s, and its control socket "
			    "%s/control.sock does not answer: %s\n",
			    who, dir, strerror(-r));
			return EXIT_DAMAGE;
		}
	} else if (run_offline(dir, req, reply, sizeof(reply)) != 0)
		return EXIT_DAMAGE;
	if (strncmp(reply, "ok", 2) != 0) {
		fprintf(stderr, "feedfs-cache: %s: %s\n", dir,
		    strncmp(reply, "error ", 6) == 0 ? reply + 6 : reply);
		return EXIT_DAMAGE;
	}
	if (q.op == CACHE_ADMIN_COMPACT) {
		printf("compacted\n");
		return 0;
	}
	if (sscanf(reply, "ok %" SCNu64 " %" SCNu64 " %" SCNu64, &n, &bytes,
		&memos) == 3)
		printf("evicted %" PRIu64 " entries, %" PRIu64
		       " bytes, %" PRIu64 " digest memos\n",
		    n, bytes, memos);
	else
		printf("%s %" PRIu64 " entries, %" PRIu64 " bytes\n",
		    q.op == CACHE_ADMIN_CLEAR ? "cleared" : "evicted", n,
		    bytes);
	return 0;
}

int
main(int argc, char **argv)
{
	const char *dir = NULL, *config = NULL, *cmd = NULL;
	const char *prefix = NULL, *age = NULL;
	struct cfg *cfg = NULL;
	char err[2048], req[4200];
	int i, ret;

	/*
	 * A store it opens itself (no feedfs holds it) makes files 0644
	 * less the umask, and so does the secondary instance's copy in /tmp:
	 * they are its user's alone (cache.h).
	 */
	umask(077);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "-V") == 0 ||
			   strcmp(a, "--version") == 0) {
			printf("feedfs-cache %s\n", PACKAGE_VERSION);
			return 0;
		} else if (strcmp(a, "--cache-dir") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (strncmp(a, "--cache-dir=", 12) == 0)
			dir = a + 12;
		else if ((strcmp(a, "--timeout") == 0 && i + 1 < argc) ||
			 strncmp(a, "--timeout=", 10) == 0) {
			const char *v = a[9] == '=' ? a + 10 : argv[++i];
			char *end;
			double sec = strtod(v, &end);

			if (*v == '\0' || *end != '\0' || !(sec > 0) ||
			    sec > 86400) {
				fprintf(stderr,
				    "feedfs-cache: --timeout needs seconds "
				    "(more than 0, at most 86400)\n");
				return EXIT_USAGE;
			}
			timeout_ms = sec * 1000 < 1 ? 1 : (int)(sec * 1000);
		} else if (strcmp(a, "-c") == 0 && i + 1 < argc)
			config = argv[++i];
		else if (cmd && strcmp(a, "--prefix") == 0 && i + 1 < argc)
			prefix = argv[++i];
		else if (cmd && strcmp(a, "--older-than") == 0 && i + 1 < argc)
			age = argv[++i];
		else if (!cmd && a[0] != '-')
			cmd = a;
		else {
			fprintf(stderr, "feedfs-cache: unexpected %s\n", a);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (!cmd) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (config && cfg_load(config, &cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "feedfs-cache: %s\n", err);
		return EXIT_USAGE;
	}
	if (!dir)
		dir = cfg ? cfg->mount.cache_dir : CFG_DEFAULT_CACHE_DIR;
	if (strcmp(cmd, "evict") != 0 && (prefix || age)) {
		fprintf(stderr, "feedfs-cache: --prefix and --older-than are "
				"options of evict\n");
		ret = EXIT_USAGE;
	} else if (strcmp(cmd, "stats") == 0)
		ret = cmd_stats(dir, cfg);
	else if (strcmp(cmd, "ls") == 0)
		ret = cmd_ls(dir, cfg);
	else if (strcmp(cmd, "verify") == 0)
		ret = cmd_verify(dir);
	else if (strcmp(cmd, "clear") == 0 || strcmp(cmd, "compact") == 0)
		ret = cmd_write(dir, cmd);
	else if (strcmp(cmd, "evict") == 0) {
		char why[256];
		long long s = age ? parse_age(age, why, sizeof(why)) : 0;

		if ((prefix != NULL) == (age != NULL)) {
			fprintf(stderr, "feedfs-cache: evict needs one of "
					"--prefix TEXT or --older-than AGE "
					"(AGE: " AGE_UNITS ")\n");
			ret = EXIT_USAGE;
		} else if (s < 0) {
			fprintf(stderr,
			    "feedfs-cache: --older-than '%s': %s; AGE "
			    "is " AGE_UNITS "\n",
			    age, why);
			ret = EXIT_USAGE;
		} else if (prefix && strchr(prefix, '\n')) {
			fprintf(stderr, "feedfs-cache: --prefix: a prefix "
					"has no newline\n");
			ret = EXIT_USAGE;
		} else {
			if (prefix)
				snprintf(req, sizeof(req), "evict-prefix %s",
				    prefix);
			else {
				/* Older than the epoch: nothing (before 0). */
				long long now = (long long)time(NULL);

				snprintf(req, sizeof(req), "evict-before %lld",
				    s < now ? now - s + 1 : 0);
			}
			ret = cmd_write(dir, req);
		}
	} else {
		fprintf(stderr, "feedfs-cache: unknown command %s\n", cmd);
		usage(stderr);
		ret = EXIT_USAGE;
	}
	cfg_free(cfg);
	return timed_out ? EXIT_TIMEOUT : ret;
}
