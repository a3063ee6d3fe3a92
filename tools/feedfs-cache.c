/*
 * feedfs-cache.c - a program (tools/, over cache/ and the model in core/):
 * inspect and maintain a feedfs cache directory.  main, and verify,
 * evict, clear and compact here; stats and ls in cache-report.c; the
 * access to the store that both use in cache-access.c.
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
#include "core/config.h"
#include "tools/feedfs-cache.h"

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

	if (fc_open_read(dir, &v.c) != 0)
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

/*
 * Run req on the store dir, which no feedfs holds: 0 and the reply in
 * reply, 1 when the store's files were removed instead (clear on a full
 * disk: said), -1.
 */
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
		uint64_t freed;

		/* A full disk: clear needs no open (cache.h: cache_wipe). */
		if (strstr(err, "No space left on device") == NULL ||
		    strcmp(req, "clear") != 0 ||
		    cache_wipe(dir, &freed, err, sizeof(err)) != 0) {
			fprintf(stderr, "feedfs-cache: %s%s\n", err,
			    strstr(err, "No space left on device")
				? " (opening the store needs about a MiB "
				  "free; clear needs none)"
				: "");
			return -1;
		}
		printf("cleared the store's files, %" PRIu64 " bytes: the "
		       "disk was too full to open it\n",
		    freed);
		return 1;
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
	if (!fc_trusted(dir))
		return EXIT_DAMAGE;
	if (fc_held(dir, who, sizeof(who))) {
		if ((r = fc_ctl(dir, who, req, reply, sizeof(reply))) != 0) {
			if (fc_timed_out)
				return EXIT_TIMEOUT;
			fprintf(stderr,
			    "feedfs-cache: %s, and its control socket "
			    "%s/control.sock does not answer: %s\n",
			    who, dir, strerror(-r));
			return EXIT_DAMAGE;
		}
	} else if ((r = run_offline(dir, req, reply, sizeof(reply))) != 0)
		return r > 0 ? 0 : EXIT_DAMAGE;
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
	char err[2048], req[4200], *dflt = NULL;
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
			fc_timeout_ms = sec * 1000 < 1 ? 1 : (int)(sec * 1000);
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
	if (!dir && !cfg && (dflt = cfg_default_cache_dir()) == NULL) {
		fprintf(stderr, "feedfs-cache: out of memory\n");
		return EXIT_USAGE;
	}
	if (!dir)
		dir = cfg ? cfg->mount.cache_dir : dflt;
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
	free(dflt);
	return fc_timed_out ? EXIT_TIMEOUT : ret;
}
