/*
 * test_config - the config parser: values, defaults, and one case per kind
 * of mistake, each reported as FILE:LINE: message with the right line.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "tests/testlib.h"

static char dir[] = "/tmp/test_config.XXXXXX";
static char path[256];

static void
write_cfg(const char *text)
{
	FILE *fp = fopen(path, "w");

	if (!fp) {
		perror(path);
		exit(1);
	}
	fputs(text, fp);
	fclose(fp);
}

/* The head of a valid file; mistakes are appended at known lines. */
#define HEAD                                                                  \
	"[dataset d]\n"     /* 1 */                                           \
	"root = /tmp\n"     /* 2 */                                           \
	"[job j]\n"         /* 3 */                                           \
	"batch_size = 4\n"  /* 4 */

/* Load text; expect failure at line with msg contained in the error. */
static void
bad(const char *text, int line, const char *msg)
{
	struct cfg *c = NULL;
	char err[1024], want[300];
	int r;

	write_cfg(text);
	r = cfg_load(path, &c, err, sizeof(err));
	CHECK_EQ_INT(r, -EINVAL);
	CHECK(c == NULL);
	if (r == 0) {
		cfg_free(c);
		return;
	}
	snprintf(want, sizeof(want), "%s:%d: ", path, line);
	if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, msg))
		fprintf(stderr, "  got \"%s\", wanted \"%s...%s\"\n", err,
		    want, msg);
	CHECK(strncmp(err, want, strlen(want)) == 0);
	CHECK(strstr(err, msg) != NULL);
}

static struct cfg *
good(const char *text)
{
	struct cfg *c = NULL;
	char err[1024];

	write_cfg(text);
	if (cfg_load(path, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "  unexpected error: %s\n", err);
		CHECK(0);
		return NULL;
	}
	return c;
}

/* shards = a URL is kept as it is (not joined to the config's
 * directory), with the remote keys' values and defaults. */
static void
test_remote_keys(void)
{
	struct cfg *c = good("[dataset d]\n"
			     "shards = https://h:8443/p/s-{0..9}.tar?sig=x\n"
			     "ca_file = ca.pem\n"
			     "s3_endpoint = http://127.0.0.1:9000\n"
			     "s3_region = eu-west-1\n"
			     "s3_path_style = no\n"
			     "remote_timeout = 7\n"
			     "[dataset e]\n"
			     "shards = s3://bucket/x.tar\n"
			     "[job j]\ndataset = d\n");

	if (c == NULL)
		return;
	CHECK_EQ_STR(c->datasets[0].shards,
	    "https://h:8443/p/s-{0..9}.tar?sig=x");
	CHECK(c->datasets[0].ca_file != NULL &&
	      c->datasets[0].ca_file[0] == '/');
	CHECK_EQ_STR(c->datasets[0].s3_endpoint, "http://127.0.0.1:9000");
	CHECK_EQ_STR(c->datasets[0].s3_region, "eu-west-1");
	CHECK_EQ_INT(c->datasets[0].s3_path_style, 1);
	CHECK_EQ_INT(c->datasets[0].remote_timeout, 7);
	CHECK_EQ_INT(c->datasets[0].remote_retries, 4);
	CHECK_EQ_STR(c->datasets[1].shards, "s3://bucket/x.tar");
	CHECK_EQ_INT(c->datasets[1].s3_path_style, 0);
	CHECK_EQ_INT(c->datasets[1].remote_timeout, 30);
	cfg_free(c);
}

static void
test_full(void)
{
	struct cfg *c = good(
	    "# a comment\n"
	    "; another\n"
	    "[mount]\n"
	    "cache_dir = cache   # relative: from the file's dir\n"
	    "cache_size = 1.5G\n"
	    "threads = 3\n"
	    "memory = 512M\n"
	    "readahead = 0\n"
	    "\n"
	    "[dataset a]\n"
	    "root = /data/a\n"
	    "[dataset b]\n"
	    "root = rel\n"
	    "manifest = /data/list.tsv\n"
	    "[job train]\n"
	    "dataset = b\n"
	    "batch_size = 32\n"
	    "epochs = 3\n"
	    "seed = 18446744073709551615\n"
	    "shuffle = no\n"
	    "drop_last = yes\n"
	    "order = strict\n"
	    "pipeline = decode resize(72) cache random_resized_crop(64, 0.2, 1) "
	    "flip(0.5)\n"
	    "dtype = uint8\n"
	    "layout = HWC\n"
	    "on_error = substitute\n"
	    "gpu = off\n"
	    "[job val]\n"
	    "dataset = a\n");

	if (!c)
		return;
	CHECK_EQ_INT(c->ndatasets, 2);
	CHECK_EQ_INT(c->njobs, 2);
	char want[300];
	snprintf(want, sizeof(want), "%s/cache", dir);
	CHECK_EQ_STR(c->mount.cache_dir, want);
	CHECK(c->mount.cache_size == 3ull << 29);
	CHECK_EQ_INT(c->mount.threads, 3);
	CHECK(c->mount.memory == 512ull << 20);
	CHECK_EQ_INT(c->mount.readahead, 0);
	CHECK_EQ_STR(c->datasets[0].root, "/data/a");
	CHECK(c->datasets[0].manifest == NULL);
	snprintf(want, sizeof(want), "%s/rel", dir);
	CHECK_EQ_STR(c->datasets[1].root, want);
	CHECK_EQ_STR(c->datasets[1].manifest, "/data/list.tsv");
	CHECK_EQ_INT(c->datasets[1].line, 12);

	struct cfg_job *j = &c->jobs[0];
	CHECK_EQ_STR(j->name, "train");
	CHECK_EQ_STR(j->dataset, "b");
	CHECK_EQ_INT(j->batch_size, 32);
	CHECK_EQ_INT(j->epochs, 3);
	CHECK(j->seed == UINT64_MAX);
	CHECK(!j->shuffle && j->drop_last && !j->gpu);
	CHECK_EQ_INT(j->dtype, XF_UINT8);
	CHECK_EQ_INT(j->layout, XF_HWC);
	CHECK_EQ_INT(j->on_error, CFG_ON_ERROR_SUBSTITUTE);
	CHECK_EQ_INT(j->order, CFG_ORDER_STRICT);
	CHECK_EQ_INT(j->line, 15);
	CHECK_EQ_INT(j->dataset_line, 16);
	CHECK_EQ_INT(j->pipeline_line, 23);

	/* Defaults of a job that sets nothing but its dataset. */
	j = &c->jobs[1];
	CHECK_EQ_INT(j->batch_size, 256);
	CHECK_EQ_INT(j->epochs, 90);
	CHECK(j->seed == 42);
	CHECK(j->shuffle && !j->drop_last && !j->gpu);
	CHECK_EQ_INT(j->dtype, XF_FLOAT32);
	CHECK_EQ_INT(j->layout, XF_CHW);
	CHECK_EQ_INT(j->on_error, CFG_ON_ERROR_FAIL);
	CHECK_EQ_STR(j->pipeline, "decode(scaled) shrink(512) cache "
				  "random_resized_crop(224) flip(0.5) "
				  "normalize(imagenet)");
	cfg_free(c);
}

static void
test_defaults(void)
{
	struct cfg *c = good("[dataset only]\nroot = /x\n[job t]\n");
	char err[256];

	if (!c)
		return;
	/* The only dataset is the job's default. */
	CHECK_EQ_STR(c->jobs[0].dataset, "only");
	CHECK_EQ_STR(c->mount.cache_dir, CFG_DEFAULT_CACHE_DIR);
	/* cache_size = auto: chosen from the disk at open (issue 26). */
	CHECK(c->mount.cache_size == CFG_SIZE_AUTO);
	CHECK(c->mount.memory == 2ull << 30);
	CHECK_EQ_INT(c->mount.threads, 0);
	CHECK_EQ_INT(c->mount.readahead, 4);
	CHECK(c->mount.gpu_memory == 1ull << 30);

	/* -o keys. */
	CHECK_EQ_INT(cfg_set_mount(c, "threads", "7", err, sizeof(err)), 0);
	CHECK_EQ_INT(c->mount.threads, 7);
	CHECK_EQ_INT(cfg_set_mount(c, "cache_size", "0", err, sizeof(err)), 0);
	CHECK(c->mount.cache_size == 0);
	CHECK_EQ_INT(
	    cfg_set_mount(c, "cache_size", "auto", err, sizeof(err)), 0);
	CHECK(c->mount.cache_size == CFG_SIZE_AUTO);
	/* `auto` is cache_size's alone. */
	CHECK_EQ_INT(cfg_set_mount(c, "memory", "auto", err, sizeof(err)),
	    -EINVAL);
	CHECK_EQ_INT(cfg_set_mount(c, "allow_other", "", err, sizeof(err)),
	    -ENOENT);
	CHECK_EQ_INT(cfg_set_mount(c, "threads", "abc", err, sizeof(err)),
	    -EINVAL);
	CHECK(strstr(err, "-o threads=abc") != NULL);
	CHECK_EQ_INT(cfg_set_mount(c, "memory", "1K", err, sizeof(err)),
	    -EINVAL);
	CHECK_EQ_INT(cfg_set_mount(c, "gpu_memory", "2G", err, sizeof(err)),
	    0);
	CHECK(c->mount.gpu_memory == 2ull << 30);
	cfg_free(c);

	CHECK_EQ_INT(
	    cfg_default_trees("/data/x", "/data/v", &c, err, sizeof(err)), 0);
	CHECK_EQ_INT(c->njobs, 2);
	CHECK_EQ_STR(c->jobs[0].name, "train");
	CHECK_EQ_STR(c->jobs[1].name, "val");
	CHECK(c->jobs[0].shuffle && !c->jobs[1].shuffle);
	CHECK_EQ_STR(c->jobs[1].pipeline, "decode resize(256) center_crop(224) "
					  "cache normalize(imagenet)");
	CHECK_EQ_STR(c->datasets[0].root, "/data/x");
	CHECK_EQ_STR(c->datasets[1].root, "/data/v");
	CHECK(c->jobs[0].dataset_index == 0 && c->jobs[1].dataset_index == 1);
	cfg_free(c);
	cfg_free(NULL);
}

/* -o job keys of the default jobs (issue 26): KEY for both, JOB.KEY one. */
static void
test_job_opts(void)
{
	struct cfg *c;
	char err[512];

	CHECK(cfg_is_job_opt("on_error", 8));
	CHECK(cfg_is_job_opt("train.epochs", 12));
	CHECK(!cfg_is_job_opt("pipeline", 8));
	CHECK(!cfg_is_job_opt("dataset", 7));
	CHECK(!cfg_is_job_opt("threads", 7));
	CHECK(!cfg_is_job_opt("allow_other", 11));
	CHECK_EQ_INT(
	    cfg_default_trees("/data/x", "/data/v", &c, err, sizeof(err)), 0);
	CHECK_EQ_INT(
	    cfg_set_job(c, "on_error", "substitute", err, sizeof(err)), 0);
	CHECK(c->jobs[0].on_error == CFG_ON_ERROR_SUBSTITUTE &&
	      c->jobs[1].on_error == CFG_ON_ERROR_SUBSTITUTE);
	CHECK_EQ_INT(cfg_set_job(c, "train.epochs", "3", err, sizeof(err)), 0);
	CHECK(c->jobs[0].epochs == 3 && c->jobs[1].epochs == 1);
	CHECK_EQ_INT(cfg_set_job(c, "max_pixels", "1000", err, sizeof(err)), 0);
	CHECK(c->jobs[1].pl->max_pixels == 1000);
	CHECK_EQ_INT(
	    cfg_set_job(c, "val.dtype", "uint8", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "-o val.dtype=uint8: job val:") != NULL);
	CHECK_EQ_INT(
	    cfg_set_job(c, "on_error", "maybe", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "fail or substitute") != NULL);
	CHECK_EQ_INT(
	    cfg_set_job(c, "test.epochs", "3", err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "no job test (the jobs are train val)") != NULL);
	CHECK_EQ_INT(
	    cfg_set_job(c, "pipeline", "decode", err, sizeof(err)), -ENOENT);
	cfg_free(c);
}

static void
test_sizes(void)
{
	uint64_t v;

	CHECK(cfg_parse_size("4096", &v) == 0 && v == 4096);
	CHECK(cfg_parse_size("512M", &v) == 0 && v == 512ull << 20);
	CHECK(cfg_parse_size("50G", &v) == 0 && v == 50ull << 30);
	CHECK(cfg_parse_size("2T", &v) == 0 && v == 2ull << 40);
	CHECK(cfg_parse_size("1k", &v) == 0 && v == 1024);
	CHECK(cfg_parse_size("1.5G", &v) == 0 && v == 3ull << 29);
	CHECK(cfg_parse_size("8GiB", &v) == 0 && v == 8ull << 30);
	CHECK(cfg_parse_size("8GB", &v) == 0 && v == 8ull << 30);
	CHECK(cfg_parse_size("12Q", &v) == -EINVAL);
	CHECK(cfg_parse_size("-1G", &v) == -EINVAL);
	CHECK(cfg_parse_size("", &v) == -EINVAL);
	CHECK(cfg_parse_size("G", &v) == -EINVAL);
	CHECK(cfg_parse_size("1G junk", &v) == -EINVAL);
	CHECK(cfg_parse_size("99999999T", &v) == -EINVAL);

	bool b;
	CHECK(cfg_parse_bool("yes", &b) == 0 && b);
	CHECK(cfg_parse_bool("On", &b) == 0 && b);
	CHECK(cfg_parse_bool("false", &b) == 0 && !b);
	CHECK(cfg_parse_bool("0", &b) == 0 && !b);
	CHECK(cfg_parse_bool("maybe", &b) == -EINVAL);
}

static void
test_mistakes(void)
{
	/* Syntax. */
	bad(HEAD "this line has no equals sign\n", 5, "expected 'key = value'");
	bad(HEAD "[job x\n", 5, "without ']'");
	bad(HEAD "= 3\n", 5, "without a key");
	bad("epochs = 3\n" HEAD, 1, "outside of a section");
	bad(HEAD "[job x] junk\n", 5, "text after the section header");
	/* Sections. */
	bad(HEAD "[jobs x]\n", 5, "unknown section [jobs]");
	bad(HEAD "[job]\n", 5, "needs a name");
	bad(HEAD "[job .hidden]\n", 5, "not a valid name");
	bad(HEAD "[job a/b]\n", 5, "not a valid name");
	bad(HEAD "[job j]\n", 5, "already defined at line 3");
	bad(HEAD "[dataset d]\nroot = /\n", 5, "already defined at line 1");
	bad("[mount]\n[mount]\n" HEAD, 2, "second [mount]");
	bad("[mount x]\n" HEAD, 1, "takes no name");
	bad("[dataset d]\nroot = /\n", 2, "no [job NAME]");
	bad("[job j]\n", 1, "no [dataset NAME]");
	bad("[dataset d]\nmanifest = x\n[job j]\n", 1, "has no root");
	/* Tar shards (issue 20): instead of root, labels only with them. */
	bad("[dataset d]\nroot = /\nshards = /x/*.tar\n[job j]\n", 1,
	    "shards and root exclude each other");
	bad("[dataset d]\nshards = /x/*.tar\nmanifest = m\n[job j]\n", 1,
	    "shards and manifest exclude each other");
	bad("[dataset d]\nroot = /\nlabel = cls\n[job j]\n", 1,
	    "label applies to shards only");
	bad("[dataset d]\nshards = /x/*.tar\nlabel = json:\n[job j]\n", 1,
	    "expected cls, json:KEY, none or auto");
	bad("[dataset d]\nshards = /x/*.tar\nlabel = txt\n[job j]\n", 1,
	    "expected cls, json:KEY, none or auto");
	/* Remote shards (issue 30): their keys' values. */
	bad("[dataset d]\nshards = s3://b/k.tar\ns3_path_style = maybe\n"
	    "[job j]\n",
	    3, "s3_path_style: 'maybe' is not");
	bad("[dataset d]\nshards = s3://b/k.tar\nremote_timeout = 0\n"
	    "[job j]\n",
	    3, "remote_timeout: '0' is not a count of seconds");
	bad("[dataset d]\nshards = s3://b/k.tar\nremote_retries = 21\n"
	    "[job j]\n",
	    3, "remote_retries: '21' is not a count from 0 to 20");
	/* Keys. */
	bad(HEAD "colour = blue\n", 5, "unknown key 'colour' in [job j]");
	bad("[mount]\nthreds = 2\n" HEAD, 2, "unknown key 'threds' in [mount]");
	bad("[dataset d]\nroot = /\npath = x\n[job j]\n", 3,
	    "unknown key 'path'");
	bad(HEAD "batch_size = 8\n", 5, "given twice");
	bad(HEAD "seed =\n", 5, "no value");
	/* Values. */
	bad("[mount]\nmemory = 12Q\n" HEAD, 2, "memory: '12Q' is not a size");
	bad("[mount]\nmemory = 1M\n" HEAD, 2, "too small");
	bad("[mount]\ngpu_memory = lots\n" HEAD, 2,
	    "gpu_memory: 'lots' is not a size");
	bad("[mount]\ngpu_memory = 1M\n" HEAD, 2, "gpu_memory: 1M is too small");
	bad("[mount]\ngpu_memory = 1G\ngpu_memory = 2G\n" HEAD, 3, "given twice");
	bad("[mount]\ncache_size = 1K\n" HEAD, 2, "too small");
	bad("[mount]\nthreads = -1\n" HEAD, 2, "threads: '-1'");
	bad("[mount]\nthreads = 99999\n" HEAD, 2, "threads: '99999'");
	bad("[mount]\nreadahead = many\n" HEAD, 2, "readahead: 'many'");
	bad(HEAD "[job k]\nbatch_size = 0\n", 6, "batch_size: '0'");
	bad(HEAD "[job k]\nbatch_size = 8x\n", 6, "batch_size: '8x'");
	bad(HEAD "epochs = 10001\n", 5, "epochs: '10001'");
	bad(HEAD "seed = 18446744073709551616\n", 5, "seed:");
	bad(HEAD "shuffle = perhaps\n", 5, "shuffle: 'perhaps' is not yes or no");
	bad(HEAD "order = random\n", 5, "order: 'random'");
	bad(HEAD "dtype = float64\n", 5, "dtype: 'float64'");
	bad(HEAD "layout = NCHW\n", 5, "layout: 'NCHW'");
	bad(HEAD "on_error = ignore\n", 5, "on_error: 'ignore'");
	/* Cross-checks: the job's dataset and pipeline. */
	bad(HEAD "dataset = nope\n", 5, "unknown dataset 'nope'");
	bad("[dataset a]\nroot = /\n[dataset b]\nroot = /\n[job j]\n", 5,
	    "needs a dataset key");
	bad(HEAD "pipeline = decode sharpen(2) center_crop(8)\n", 5,
	    "pipeline:");
	bad(HEAD "pipeline = decode flip(0.5) cache center_crop(8)\n", 5,
	    "pipeline:");
	bad(HEAD "pipeline = resize(8,8)\n", 5, "pipeline:");
	bad(HEAD "pipeline = decode resize(8)\n", 5, "pipeline:");
	bad(HEAD "dtype = uint8\npipeline = decode center_crop(8) "
		 "normalize(imagenet)\n", 6, "");
}

/* Mixtures (issue 14): sources, weights, schedule; their mistakes. */
#define MIXHEAD                                                                \
	"[dataset web]\n" /* 1 */                                              \
	"root = /tmp\n"	  /* 2 */                                              \
	"[dataset cur]\n" /* 3 */                                              \
	"root = /tmp\n"	  /* 4 */                                              \
	"[job j]\n"	  /* 5 */                                              \
	"epochs = 20\n"	  /* 6 */

static void
test_mixture(void)
{
	struct cfg *c;

	c = good(MIXHEAD "mixture = web:0.7 cur:0.3\n"
			 "mixture_schedule = 10:web:0.5,cur:0.5 "
			 "15:cur:1\nepoch_samples = 100\n");
	if (c != NULL) {
		const struct cfg_job *j = &c->jobs[0];

		CHECK_EQ_INT(j->nsources, 2);
		CHECK_EQ_INT(j->source_index[0], 0);
		CHECK_EQ_INT(j->source_index[1], 1);
		CHECK_EQ_INT(j->epoch_samples, 100);
		CHECK_EQ_INT(j->nsteps, 3);
		if (j->nsteps == 3) {
			CHECK(j->steps[0].epoch == 0 &&
			      j->steps[0].w[0] == 700000 &&
			      j->steps[0].w[1] == 300000);
			CHECK(j->steps[1].epoch == 10 &&
			      j->steps[1].w[0] == 500000 &&
			      j->steps[1].w[1] == 500000);
			CHECK(j->steps[2].epoch == 15 &&
			      j->steps[2].w[0] == 0 &&
			      j->steps[2].w[1] == 1000000);
		}
		cfg_free(c);
	}
	/* A schedule step at 0 replaces the mixture line's weights. */
	c = good(MIXHEAD "mixture = web:1,cur:1\n"
			 "mixture_schedule = 0:web:2\n");
	if (c != NULL) {
		CHECK_EQ_INT(c->jobs[0].nsteps, 1);
		CHECK(c->jobs[0].steps[0].w[0] == 2000000 &&
		      c->jobs[0].steps[0].w[1] == 0);
		CHECK_EQ_INT(c->jobs[0].epoch_samples, 0);
		cfg_free(c);
	}
	bad(MIXHEAD "dataset = web\nmixture = web:1 cur:1\n", 8,
	    "has both dataset (line 7) and mixture");
	bad(MIXHEAD "mixture = web:1 cur:1\ndataset = web\n", 7,
	    "has both dataset (line 8) and mixture");
	bad(MIXHEAD "mixture = web:1 other:1\n", 7,
	    "mixture: unknown dataset 'other'");
	bad(MIXHEAD "mixture = web:-1 cur:1\n", 7, "a negative weight");
	bad(MIXHEAD "mixture = web:lots cur:1\n", 7, "'lots' is not a weight");
	bad(MIXHEAD "mixture = web:2000000 cur:1\n", 7, "is not a weight");
	bad(MIXHEAD "mixture = web cur\n", 7, "expected NAME:WEIGHT");
	bad(MIXHEAD "mixture = web:0 cur:0\n", 7, "the weights sum to 0");
	bad(MIXHEAD "mixture = web:1 web:2\n", 7, "web named twice");
	bad(MIXHEAD "mixture = web:1\nepoch_samples = 0\n", 8,
	    "epoch_samples: '0'");
	bad(MIXHEAD "dataset = web\nepoch_samples = 10\n", 8,
	    "epoch_samples needs a mixture");
	bad(MIXHEAD "dataset = web\nmixture_schedule = 1:web:1\n", 8,
	    "mixture_schedule without mixture");
	bad(MIXHEAD "mixture = web:1 cur:0\n"
		    "mixture_schedule = 3:cur:0.5,x:1\n",
	    8, "epoch 3: unknown source 'x'");
	/* A dataset of the file that is not one of the mixture's sources. */
	bad(MIXHEAD "mixture = web:1\nmixture_schedule = 3:cur:0.5\n", 8,
	    "epoch 3: unknown source 'cur'");
	bad(MIXHEAD "mixture = web:1\nmixture_schedule = 5:web:1 2:cur:1\n", 8,
	    "epoch 2 does not follow");
	bad(MIXHEAD "mixture = web:1\nmixture_schedule = 20:web:1\n", 8,
	    "epoch 20 is past the job's last epoch");
	bad(MIXHEAD "mixture = web:1\nmixture_schedule = web:1\n", 8,
	    "expected EPOCH:NAME:W");
	bad(MIXHEAD "mixture = web:1\nmixture_schedule = 4:web:-1\n", 8,
	    "epoch 4: web: a negative weight");
}

/* max_pixels: the default, a value, bad values (issue 6). */
static void
test_max_pixels(void)
{
	struct cfg *c;

	if ((c = good(HEAD)) != NULL) {
		CHECK(c->jobs[0].max_pixels == XF_DEFAULT_MAX_PIXELS);
		cfg_free(c);
	}
	if ((c = good(HEAD "max_pixels = 4000000000\n")) != NULL) {
		CHECK(c->jobs[0].max_pixels == 4000000000ull);
		cfg_free(c);
	}
	bad(HEAD "max_pixels = 0\n", 5, "max_pixels: '0'");
	bad(HEAD "max_pixels = lots\n", 5, "max_pixels: 'lots'");
	bad(HEAD "max_pixels = -5\n", 5, "max_pixels: '-5'");
	bad(HEAD "max_pixels = 18446744073709551616\n", 5, "max_pixels:");
	bad(HEAD "max_pixels = 10\nmax_pixels = 20\n", 6, "given twice");
}

/*
 * Hostile files (issue 6): absurd sizes, a 10 MB line, binary garbage, a
 * NUL byte; each is a FILE:LINE error, never a crash.
 */
static void
test_hostile_files(void)
{
	size_t big = 10u << 20;
	char *s = malloc(big + 256);
	struct cfg *c = NULL;
	char err[1024];
	FILE *fp;

	bad(HEAD "batch_size = 1099511627776\n", 5, "given twice");
	bad("[dataset d]\nroot = /tmp\n[job j]\nbatch_size = 1099511627776\n",
	    4, "batch_size: '1099511627776'");
	bad("[mount]\nmemory = 1\n" HEAD, 2, "memory: 1 is too small");
	bad("[mount]\ncache_size = 1\n" HEAD, 2, "cache_size: 1 is too small");
	bad("[mount]\ncache_size = Auto\n" HEAD, 2, "auto, or like 500G");
	bad("[mount]\nmemory = 99999999999T\n" HEAD, 2, "memory:");
	bad("[mount]\nthreads = 4294967297\n" HEAD, 2, "threads:");
	bad(HEAD "epochs = 0\n", 5, "epochs: '0'");
	bad(HEAD "[mount]\n[mount]\n", 6, "a second [mount]");
	bad(HEAD "[dataset d]\n", 5, "dataset 'd' is already defined");
	bad(HEAD "[job j]\n", 5, "job 'j' is already defined");
	bad(HEAD "pipeline = decode resize(99999999999999999999) "
		 "center_crop(8)\n", 5, "pipeline:");
	bad(HEAD "pipeline = decode center_crop(8) center_crop(8) "
		 "center_crop(8) center_crop(8) center_crop(8) cache "
		 "frobnicate\n", 5, "pipeline:");
	if (s == NULL) {
		CHECK(0);
		return;
	}
	/* A 10 MB key on line 5. */
	memcpy(s, HEAD, strlen(HEAD));
	memset(s + strlen(HEAD), 'k', big);
	strcpy(s + strlen(HEAD) + big, " = 1\n");
	bad(s, 5, "unknown key");
	/* A 10 MB pipeline value on line 5. */
	strcpy(s, HEAD "pipeline = decode ");
	memset(s + strlen(s), 'x', big);
	strcpy(s + strlen(HEAD "pipeline = decode ") + big, "\n");
	bad(s, 5, "pipeline:");
	/* Binary garbage (no NUL): an error on line 1. */
	for (size_t i = 0; i < 4096; i++)
		s[i] = (char)(1 + (i * 131 + (i >> 3) * 7) % 255);
	s[4096] = '\0';
	bad(s, 1, "");
	/* A NUL byte. */
	if ((fp = fopen(path, "w")) != NULL) {
		fwrite(HEAD "\0seed = 1\n", 1, strlen(HEAD) + 11, fp);
		fclose(fp);
		CHECK_EQ_INT(cfg_load(path, &c, err, sizeof(err)), -EINVAL);
		CHECK(strstr(err, ":5: a NUL byte") != NULL);
	}
	free(s);
}

/* Absurd input: a 10 MB line, a binary file, absurd sizes.  No crash. */
static void
test_absurd(void)
{
	size_t big = 10u << 20;
	char *text = malloc(big + 256);

	if (!text) {
		CHECK(0);
		return;
	}
	/* A 10 MB line without '=', then a 10 MB value. */
	memcpy(text, HEAD, strlen(HEAD));
	memset(text + strlen(HEAD), 'x', big);
	strcpy(text + strlen(HEAD) + big, "\n");
	bad(text, 5, "expected 'key = value'");
	snprintf(text, 256, HEAD "pipeline = decode ");
	for (size_t n = strlen(text); n + 16 < big; n += 10)
		memcpy(text + n, "flip(0.5) ", 11);
	strcat(text, "\n");
	bad(text, 5, "pipeline:");
	/* Binary: every byte value, NULs included. */
	for (size_t i = 0; i < 4096; i++)
		text[i] = (char)((i * 131 + 7) & 0xff);
	{
		FILE *fp = fopen(path, "w");
		struct cfg *c = NULL;
		char err[512];

		if (fp) {
			fwrite(text, 1, 4096, fp);
			fclose(fp);
		}
		CHECK_EQ_INT(cfg_load(path, &c, err, sizeof(err)), -EINVAL);
		CHECK(c == NULL && strncmp(err, path, strlen(path)) == 0);
	}
	free(text);
	bad(HEAD "[job k]\nbatch_size = 1099511627776\n", 6,
	    "batch_size: '1099511627776'");
	bad("[mount]\nmemory = 1\n" HEAD, 2, "too small");
	bad("[mount]\ncache_size = 99999999999T\n" HEAD, 2, "not a size");
}

/* The cluster tier's keys: the server list is checked, auth is a path. */
static void
test_cluster(void)
{
	struct cfg *c;
	char err[1024], want[300];

	c = good("[mount]\n"
		 "cluster = h1:11211, 10.0.0.2:11211,[::1]:11212\n"
		 "cluster_auth = mc.auth\n" HEAD);
	if (c) {
		CHECK_EQ_STR(c->mount.cluster,
		    "h1:11211, 10.0.0.2:11211,[::1]:11212");
		snprintf(want, sizeof(want), "%s/mc.auth", dir);
		CHECK_EQ_STR(c->mount.cluster_auth, want);
		/* -o overrides; an empty list turns the tier off. */
		CHECK_EQ_INT(cfg_set_mount(c, "cluster", "a:1,b:2", err,
				 sizeof(err)),
		    0);
		CHECK_EQ_STR(c->mount.cluster, "a:1,b:2");
		CHECK_EQ_INT(cfg_set_mount(c, "cluster", "a:1,a:1", err,
				 sizeof(err)),
		    -EINVAL);
		CHECK(strstr(err, "-o cluster=a:1,a:1: cluster: ") == err);
		CHECK_EQ_STR(c->mount.cluster, "a:1,b:2");
		CHECK_EQ_INT(cfg_set_mount(c, "cluster", "", err, sizeof(err)),
		    0);
		CHECK(c->mount.cluster == NULL);
		cfg_free(c);
	}
	c = good(HEAD);
	if (c) {
		CHECK(c->mount.cluster == NULL);
		CHECK(c->mount.cluster_auth == NULL);
		cfg_free(c);
	}
	bad("[mount]\ncluster = h1\n" HEAD, 2, "cluster: server 1");
	bad("[mount]\n\ncluster = h1:1,h2:99999\n" HEAD, 3,
	    "cluster: server 2");
	bad("[mount]\ncluster = h1:1\ncluster = h2:1\n" HEAD, 3,
	    "given twice");
	bad("[mount]\ncluster_auth =\n" HEAD, 2, "cluster_auth: empty path");
}

/*
 * Issue 12 item 11: relative paths become absolute at load (the daemon
 * changes directory to / when it detaches): from -o, from the working
 * directory; from a config named by a relative path, from its directory.
 */
static void
test_relative_paths(void)
{
	char cwd[1024], want[1300], err[512], rel[256];
	struct cfg *c = NULL;

	if (getcwd(cwd, sizeof(cwd)) == NULL || chdir(dir) != 0) {
		CHECK(0);
		return;
	}
	write_cfg("[mount]\ncache_dir = cache\n[dataset d]\nroot = data\n"
		  "[job j]\n");
	snprintf(rel, sizeof(rel), "./%s", strrchr(path, '/') + 1);
	CHECK_EQ_INT(cfg_load(rel, &c, err, sizeof(err)), 0);
	if (c != NULL) {
		CHECK(c->mount.cache_dir[0] == '/');
		CHECK(strstr(c->mount.cache_dir, "/cache") != NULL);
		CHECK(c->datasets[0].root[0] == '/');
		CHECK_EQ_INT(cfg_set_mount(c, "cache_dir", "other", err,
				 sizeof(err)),
		    0);
		snprintf(want, sizeof(want), "%s/other", dir);
		CHECK_EQ_STR(c->mount.cache_dir, want);
		cfg_free(c);
	}
	CHECK(chdir(cwd) == 0);
}

static void
test_missing_file(void)
{
	struct cfg *c = NULL;
	char err[512];

	CHECK_EQ_INT(cfg_load("/nonexistent/feedfs.conf", &c, err,
			 sizeof(err)), -ENOENT);
	CHECK(strstr(err, "/nonexistent/feedfs.conf: No such file") != NULL);
	CHECK(c == NULL);
}

/*
 * Issue 28: a resolution schedule is FFCV's get_resolution: the ends as
 * given (171 is not a multiple of 32), np.interp between them rounded to
 * a multiple of 32 with half to even (48 and 80 are 1.5 and 2.5 times 32:
 * both go to 64); the seeds default to seed, and -o sets them.
 */
static void
test_schedule_seeds(void)
{
	struct cfg_job j;
	struct cfg *c;
	char err[512];

	memset(&j, 0, sizeof(j));
	CHECK_EQ_INT(cfg_job_res(&j, 3), 0); /* no schedule */
	CHECK_EQ_INT(
	    cfg_parse_res("32..96 @ epochs 0..4", &j.res, err, sizeof(err)), 0);
	j.res_line = 1;
	CHECK_EQ_INT(cfg_job_res(&j, 0), 32);
	CHECK_EQ_INT(cfg_job_res(&j, 1), 64); /* 48: 1.5 -> 2 */
	CHECK_EQ_INT(cfg_job_res(&j, 2), 64);
	CHECK_EQ_INT(cfg_job_res(&j, 3), 64); /* 80: 2.5 -> 2 */
	CHECK_EQ_INT(cfg_job_res(&j, 4), 96);
	CHECK_EQ_INT(cfg_job_res(&j, 9999), 96);
	CHECK_EQ_INT(
	    cfg_parse_res("160..171 @ epochs 11..13", &j.res, err, sizeof(err)),
	    0);
	CHECK_EQ_INT(cfg_job_res(&j, 11), 160);
	CHECK_EQ_INT(cfg_job_res(&j, 12), 160); /* 165.5: 5.17 -> 5 */
	CHECK_EQ_INT(cfg_job_res(&j, 13), 171);
	CHECK_EQ_INT(
	    cfg_parse_res("160..192", &j.res, err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(j.res.hi, 171); /* unchanged on error */
	CHECK_EQ_INT(
	    cfg_default_trees("/data/x", "/data/v", &c, err, sizeof(err)), 0);
	CHECK(cfg_job_shuffle_seed(&c->jobs[0]) == 42 &&
	      cfg_job_aug_seed(&c->jobs[0]) == 42);
	CHECK_EQ_INT(cfg_set_job(c, "seed", "7", err, sizeof(err)), 0);
	CHECK(cfg_job_shuffle_seed(&c->jobs[0]) == 7 &&
	      cfg_job_aug_seed(&c->jobs[1]) == 7);
	CHECK(cfg_is_job_opt("train.aug_seed", 14));
	CHECK_EQ_INT(
	    cfg_set_job(c, "train.aug_seed", "9", err, sizeof(err)), 0);
	CHECK(cfg_job_aug_seed(&c->jobs[0]) == 9 &&
	      cfg_job_shuffle_seed(&c->jobs[0]) == 7 &&
	      cfg_job_aug_seed(&c->jobs[1]) == 7);
	CHECK(c->jobs[0].views == 1 && c->jobs[1].views == 1);
	cfg_free(c);
}

/* dir/rel made: a directory, or with text a file. */
static void
mk(const char *rel, const char *text)
{
	char p[512], *s;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	for (s = p + strlen(dir) + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		(void)mkdir(p, 0755);
		*s = '/';
	}
	if (text == NULL) {
		(void)mkdir(p, 0755);
		return;
	}
	FILE *f = fopen(p, "w");

	if (f != NULL) {
		fputs(text, f);
		fclose(f);
	}
}

/* cfg_default of dir/rel: 0 and *c, or the error. */
static int
layout(const char *rel, struct cfg **c, char *err, size_t len)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	*c = NULL;
	return cfg_default(p, c, err, len);
}

/*
 * Issue 36: what a dataset path is taken as without a config (the
 * mounts of tests/test_layouts.py read them).
 */
static void
test_layouts(void)
{
	char err[512], want[512];
	struct cfg *c;

	mk("L/in/train/a/1.jpg", "");
	mk("L/in/train/b/2.jpg", "");
	mk("L/in/val/b/3.jpg", "");
	mk("L/in/README.md", "");
	/* ROOT: train/ and val/, val's classes by name as train's. */
	CHECK_EQ_INT(layout("L/in", &c, err, sizeof(err)), 0);
	if (c != NULL) {
		CHECK_EQ_INT(c->njobs, 2);
		CHECK_EQ_INT(c->ndatasets, 2);
		snprintf(want, sizeof(want), "%s/L/in/val", dir);
		CHECK_EQ_STR(c->datasets[1].root, want);
		CHECK_EQ_INT(c->datasets[1].nclass_names, 2);
		CHECK(!c->layout_warn && strstr(c->layout, "job val from") !=
						 NULL);
		cfg_free(c);
	}
	/* ROOT/train: the val/ beside it. */
	CHECK_EQ_INT(layout("L/in/train", &c, err, sizeof(err)), 0);
	if (c != NULL) {
		CHECK_EQ_INT(c->njobs, 2);
		CHECK(strstr(c->layout, ", the val/ beside it") != NULL);
		cfg_free(c);
	}
	/* A val/ with a class train has not: no val job, said. */
	mk("L/in/val/zz", NULL);
	CHECK_EQ_INT(layout("L/in/train", &c, err, sizeof(err)), 0);
	if (c != NULL) {
		CHECK_EQ_INT(c->njobs, 1);
		CHECK(c->layout_warn && strstr(c->layout, "no val job") &&
		      strstr(c->layout, "zz are not train's"));
		cfg_free(c);
	}
	/* A class tree not called train: train alone. */
	CHECK_EQ_INT(layout("L/in/val", &c, err, sizeof(err)), 0);
	if (c != NULL) {
		CHECK_EQ_INT(c->njobs, 1);
		CHECK(c->layout_warn && strstr(c->layout, "no val/ beside it"));
		/* -o text=txt: a class tree's captions are its sidecars */
		CHECK_EQ_INT(cfg_set_dataset_opt(
				 c, "text", "txt", err, sizeof(err)),
		    0);
		CHECK_EQ_STR(c->datasets[0].text, "txt");
		cfg_free(c);
	}
	/* A folder of shards, one shard; ROOT of shard folders. */
	mk("L/sh/a-0.tar", "");
	mk("L/sh/a-1.tar", "");
	CHECK_EQ_INT(layout("L/sh", &c, err, sizeof(err)), 0);
	if (c != NULL) {
		snprintf(want, sizeof(want), "%s/L/sh/*.tar", dir);
		CHECK_EQ_STR(c->datasets[0].shards, want);
		CHECK_EQ_STR(c->datasets[0].label, "auto");
		CHECK(c->datasets[0].root == NULL && c->njobs == 1);
		CHECK(strstr(c->layout, "(2 tar shards)") != NULL);
		/* -o label= (issue 36 §3), and a remote key's answer */
		CHECK_EQ_INT(cfg_set_dataset_opt(
				 c, "label", "json:y", err, sizeof(err)),
		    0);
		CHECK_EQ_STR(c->datasets[0].label, "json:y");
		CHECK_EQ_INT(cfg_set_dataset_opt(
				 c, "label", "bogus", err, sizeof(err)),
		    -EINVAL);
		/* -o text= (issue 39): captions on a dataset path's shards */
		CHECK_EQ_INT(cfg_set_dataset_opt(
				 c, "text", "json:caption", err, sizeof(err)),
		    0);
		CHECK_EQ_STR(c->datasets[0].text, "json:caption");
		CHECK_EQ_INT(cfg_set_dataset_opt(
				 c, "text", "json:", err, sizeof(err)),
		    -EINVAL);
		CHECK(strstr(err, "expected txt, json:KEY or none") != NULL);
		CHECK_EQ_INT(cfg_set_dataset_opt(
				 c, "remote_retries", "3", err, sizeof(err)),
		    -EINVAL);
		CHECK(strstr(err, "on local disk") != NULL);
		CHECK_EQ_INT(
		    cfg_set_dataset_opt(c, "nosuch", "3", err, sizeof(err)),
		    -ENOENT);
		cfg_free(c);
	}
	snprintf(want, sizeof(want), "%s/L/sh/a-0.tar", dir);
	CHECK(cfg_is_tar(want));
	CHECK(!cfg_is_tar(path));
	CHECK_EQ_INT(layout("L/sh/a-0.tar", &c, err, sizeof(err)), 0);
	if (c != NULL) {
		CHECK_EQ_STR(c->datasets[0].shards, want);
		cfg_free(c);
	}
	mk("L/ws/train/t.tar", "");
	mk("L/ws/validation/v.tar", "");
	CHECK_EQ_INT(layout("L/ws", &c, err, sizeof(err)), 0);
	if (c != NULL) {
		CHECK_EQ_INT(c->njobs, 2);
		snprintf(want, sizeof(want), "%s/L/ws/validation/*.tar", dir);
		CHECK_EQ_STR(c->datasets[1].shards, want);
		cfg_free(c);
	}
	CHECK_EQ_INT(layout("L/none", &c, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "L/none: No such file") != NULL);
	snprintf(want, sizeof(want), "rm -rf %s/L", dir);
	CHECK_EQ_INT(system(want), 0);
}

int
main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	snprintf(path, sizeof(path), "%s/feedfs.conf", dir);
	test_sizes();
	test_full();
	test_remote_keys();
	test_defaults();
	test_mistakes();
	test_max_pixels();
	test_mixture();
	test_hostile_files();
	test_absurd();
	test_relative_paths();
	test_missing_file();
	test_cluster();
	test_job_opts();
	test_schedule_seeds();
	test_layouts();
	unlink(path);
	rmdir(dir);
	return TEST_SUMMARY();
}
