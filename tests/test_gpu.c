/*
 * test_gpu - GPU staging on a real device; exits 77 (skip) and says why
 * where this build has no CUDA or the machine no device.
 *
 * Checks: the device conversion equals xf_convert (the .npy path's) for
 * every dtype, layout and normalization; a held buffer keeps its bytes
 * while others are staged, and its range is reused once given back; the
 * pool bound holds; two consumer processes open the same batch at once
 * through its IPC handle and read the right bytes.  Issue 12: each job has
 * its own pool and handle, and the pools stay within the budget; a full
 * pool waits for a buffer to come back and does not stay full; a CUDA
 * error left by another call is not taken for the staging's; gpu_init ran
 * the kernel-image check (a device it cannot run on is refused, which
 * needs such a device to see).  Issue 35: gpu/ takes the descriptor's
 * dtype and layout codes, each checked against xf_convert's for the xf
 * code of the same meaning, and refuses a value that is none of them.
 * Not tested: a sticky error (it needs a kernel that faults, and then
 * this process's context is gone).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/feedfs_cuda.h"
#include "gpu/gpu.h"
#include "tests/testlib.h"
#include "transforms/xf.h"

#define W 37
#define H 19
#define N 7 /* samples per batch */
#define NCONSUMERS 2

static const float mean[3] = { 0.485f, 0.456f, 0.406f };
static const float stdv[3] = { 0.229f, 0.224f, 0.225f };

static void
pattern(uint8_t *px, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		px[i] = (uint8_t)x;
	}
	px[0] = 0; /* both ends of the range */
	px[1] = 255;
}

/*
 * What the CPU path gives for the batch at src: gpu/ takes the
 * descriptor's codes, xf_convert its own, named here one by one.
 */
static uint8_t *
expected(const struct gpu_conv *cv, const uint8_t *src, uint32_t n)
{
	size_t in = (size_t)cv->w * cv->h * 3;
	size_t out = in * feedfs_cuda_dtype_size(cv->dtype);
	enum xf_dtype xd = cv->dtype == FEEDFS_CUDA_UINT8 ? XF_UINT8 :
	    cv->dtype == FEEDFS_CUDA_FLOAT16 ? XF_FLOAT16 : XF_FLOAT32;
	enum xf_layout xl = cv->layout == FEEDFS_CUDA_NHWC ? XF_HWC : XF_CHW;
	uint8_t *e = malloc(out * n);

	for (uint32_t s = 0; e && s < n; s++) {
		struct xf_image img = {
		    .w = cv->w, .h = cv->h, .px = (uint8_t *)src + s * in};

		xf_convert(&img, cv->normalize, cv->mean, cv->std, xd, xl,
		    e + s * out);
	}
	return e;
}

static struct gpu_conv
conv(enum feedfs_cuda_dtype d, enum feedfs_cuda_layout l, bool norm)
{
	struct gpu_conv cv = { W, H, d, l, norm, { 0 }, { 0 } };

	memcpy(cv.mean, mean, sizeof(mean));
	memcpy(cv.std, stdv, sizeof(stdv));
	return cv;
}

/* ---- consumers: forked before this process opens CUDA --------------- */

struct consumer {
	pid_t pid;
	int to, from; /* pipes: requests in, answers out */
};

static int
read_all(int fd, void *buf, size_t len)
{
	for (size_t got = 0; got < len;) {
		ssize_t r = read(fd, (uint8_t *)buf + got, len - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static int
write_all(int fd, const void *buf, size_t len)
{
	for (size_t put = 0; put < len;) {
		ssize_t r = write(fd, (const uint8_t *)buf + put, len - put);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		put += (size_t)r;
	}
	return 0;
}

/*
 * A consumer: for each request (descriptor, then the expected bytes) it
 * opens the handle (once), reads the batch from the device and answers one
 * byte: 1 equal, 0 not, 2 error.
 */
static void
consumer_main(int in, int out)
{
	uint8_t desc[FEEDFS_CUDA_DESC_SIZE];
	uint8_t handle[FEEDFS_CUDA_HANDLE_SIZE];
	void *base = NULL;
	char err[512];

	while (read_all(in, desc, sizeof(desc)) == 0) {
		struct feedfs_cuda_desc d;
		uint8_t *want = NULL, *got = NULL, ok = 2;

		if (feedfs_cuda_decode(desc, sizeof(desc), &d) != 0)
			goto answer;
		want = malloc(d.nbytes);
		got = malloc(d.nbytes);
		if (!want || !got || read_all(in, want, d.nbytes) != 0)
			_exit(3);
		/* One handle per job's pool: another job, another open. */
		if (base && memcmp(handle, d.handle, sizeof(handle)) != 0) {
			gpu_ipc_close(base);
			base = NULL;
		}
		memcpy(handle, d.handle, sizeof(handle));
		if (!base && gpu_ipc_open(&d, &base, err, sizeof(err)) != 0) {
			fprintf(stderr, "consumer %d: %s\n", (int)getpid(),
			    err);
			goto answer;
		}
		if (gpu_copy_to_host(got, (uint8_t *)base + d.offset,
			d.nbytes) != 0)
			goto answer;
		ok = memcmp(got, want, d.nbytes) == 0;
answer:
		free(want);
		free(got);
		if (write_all(out, &ok, 1) != 0)
			break;
	}
	gpu_ipc_close(base);
	_exit(0);
}

static void
consumers_start(struct consumer *c)
{
	for (int i = 0; i < NCONSUMERS; i++) {
		int a[2], b[2];

		if (pipe(a) != 0 || pipe(b) != 0) {
			perror("pipe");
			exit(1);
		}
		if ((c[i].pid = fork()) < 0) {
			perror("fork");
			exit(1);
		}
		if (c[i].pid == 0) {
			/* Only its own ends: a sibling's request pipe held
			 * open here would never read EOF, and consumers_stop
			 * would wait for that sibling for ever. */
			for (int j = 0; j < i; j++) {
				close(c[j].to);
				close(c[j].from);
			}
			close(a[1]);
			close(b[0]);
			consumer_main(a[0], b[1]);
		}
		close(a[0]);
		close(b[1]);
		c[i].to = a[1];
		c[i].from = b[0];
	}
}

static void
consumers_stop(struct consumer *c)
{
	for (int i = 0; i < NCONSUMERS; i++) {
		int st;

		close(c[i].to);
		close(c[i].from);
		waitpid(c[i].pid, &st, 0);
	}
}

/* Both consumers read batch b at the same time while it is held. */
static void
check_consumers(struct consumer *c, struct gpu *g, struct gpu_buf *b,
    const uint8_t *want, uint32_t n)
{
	struct feedfs_cuda_desc d;
	uint8_t desc[FEEDFS_CUDA_DESC_SIZE];

	gpu_buf_desc(g, b, &d);
	d.ndim = 4;
	d.shape[0] = n;
	d.shape[1] = d.layout == FEEDFS_CUDA_NCHW ? 3 : H;
	d.shape[2] = d.layout == FEEDFS_CUDA_NCHW ? H : W;
	d.shape[3] = d.layout == FEEDFS_CUDA_NCHW ? W : 3;
	feedfs_cuda_encode(&d, desc);
	for (int i = 0; i < NCONSUMERS; i++)
		CHECK(write_all(c[i].to, desc, sizeof(desc)) == 0 &&
		    write_all(c[i].to, want, d.nbytes) == 0);
	for (int i = 0; i < NCONSUMERS; i++) {
		uint8_t ok = 9;

		CHECK(read_all(c[i].from, &ok, 1) == 0);
		if (ok != 1)
			fprintf(stderr, "consumer %d answered %d\n", i, ok);
		CHECK(ok == 1);
	}
}

/* ---- the tests ------------------------------------------------------- */

static void
check_values(struct gpu *g, const uint8_t *src)
{
	static const enum feedfs_cuda_dtype dts[] = { FEEDFS_CUDA_UINT8,
		FEEDFS_CUDA_FLOAT16, FEEDFS_CUDA_FLOAT32 };

	for (size_t di = 0; di < 3; di++)
		for (int l = 0; l < 2; l++)
			for (int norm = 0; norm < 2; norm++) {
				struct gpu_conv cv = conv(dts[di], l ?
				    FEEDFS_CUDA_NCHW : FEEDFS_CUDA_NHWC, norm);
				size_t len = (size_t)N * W * H * 3 *
				    feedfs_cuda_dtype_size(cv.dtype);
				uint8_t *want, *got = malloc(len);
				struct gpu_buf *b = NULL;
				char err[512];
				int r;

				if (cv.dtype == FEEDFS_CUDA_UINT8 && norm)
					continue; /* refused by config */
				want = expected(&cv, src, N);
				r = gpu_stage(g, 0, &cv, src, N, &b, err,
				    sizeof(err));
				if (r != 0)
					fprintf(stderr, "stage: %s\n", err);
				CHECK_EQ_INT(r, 0);
				if (r == 0) {
					CHECK_EQ_INT(gpu_buf_read(g, b, 0, got,
					    len), 0);
					if (memcmp(got, want, len) != 0)
						fprintf(stderr, "dtype %zu "
						    "layout %d normalize %d: "
						    "device != xf_convert\n",
						    di, l, norm);
					CHECK(memcmp(got, want, len) == 0);
					gpu_put(g, b);
				}
				free(want);
				free(got);
			}
}

static void
check_hold_and_reuse(struct gpu *g, struct consumer *c, const uint8_t *src,
    const uint8_t *src2)
{
	struct gpu_conv cv = conv(FEEDFS_CUDA_FLOAT32, FEEDFS_CUDA_NCHW, true);
	size_t len = (size_t)N * W * H * 3 * 4;
	uint8_t *wa = expected(&cv, src, N), *wb = expected(&cv, src2, N);
	uint8_t *got = malloc(len);
	struct feedfs_cuda_desc da, db, dc;
	struct gpu_buf *a = NULL, *b = NULL, *cb = NULL;
	char err[512];

	CHECK_EQ_INT(gpu_stage(g, 0, &cv, src, N, &a, err, sizeof(err)), 0);
	CHECK_EQ_INT(gpu_stage(g, 0, &cv, src2, N, &b, err, sizeof(err)), 0);
	if (!a || !b)
		goto out;
	gpu_buf_desc(g, a, &da);
	gpu_buf_desc(g, b, &db);
	CHECK(da.offset != db.offset);
	CHECK(memcmp(da.handle, db.handle, FEEDFS_CUDA_HANDLE_SIZE) == 0);
	CHECK(da.nbytes == len);
	/* a still holds its bytes after b was staged; both consumers too. */
	CHECK_EQ_INT(gpu_buf_read(g, a, 0, got, len), 0);
	CHECK(memcmp(got, wa, len) == 0);
	check_consumers(c, g, a, wa, N);
	check_consumers(c, g, b, wb, N);
	/* Given back, a's range is the next one handed out. */
	gpu_put(g, a);
	a = NULL;
	CHECK_EQ_INT(gpu_stage(g, 0, &cv, src2, N, &cb, err, sizeof(err)), 0);
	if (cb) {
		gpu_buf_desc(g, cb, &dc);
		CHECK(dc.offset == da.offset);
		check_consumers(c, g, cb, wb, N);
	}
out:
	gpu_put(g, a);
	gpu_put(g, b);
	gpu_put(g, cb);
	free(wa);
	free(wb);
	free(got);
}

static void
check_bound(const uint8_t *src)
{
	struct gpu_conv cv = conv(FEEDFS_CUDA_FLOAT32, FEEDFS_CUDA_NHWC, false);
	uint64_t pool = 16u << 20, len = (uint64_t)N * W * H * 3 * 4;
	struct gpu_buf *held[4096];
	struct gpu_stats st;
	struct gpu *g = NULL;
	char err[512];
	uint8_t *big;
	size_t n = 0;
	int r;

	CHECK_EQ_INT(gpu_init(&g, pool, err, sizeof(err)), 0);
	if (!g)
		return;
	CHECK_EQ_INT(gpu_job_pool(g, 0, pool, err, sizeof(err)), 0);
	while (n < 4096 &&
	    (r = gpu_stage(g, 0, &cv, src, N, &held[n], err, sizeof(err))) == 0)
		n++;
	CHECK_EQ_INT(r, -ENOSPC);
	CHECK(strstr(err, "gpu_memory") != NULL);
	gpu_get_stats(g, &st);
	CHECK(st.pool_used <= st.pool_bytes && st.pool_bytes == pool);
	CHECK(st.pools == 1 && st.budget == pool);
	CHECK(n == pool / ((len + 4095) / 4096 * 4096));
	CHECK(st.pool_fails == 1);
	/* One given back makes room for exactly one. */
	gpu_put(g, held[--n]);
	CHECK_EQ_INT(gpu_stage(g, 0, &cv, src, N, &held[n], err, sizeof(err)),
	    0);
	n++;
	while (n > 0)
		gpu_put(g, held[--n]);
	/* A batch larger than the whole pool never fits. */
	big = calloc(1, (size_t)(pool / 4));
	cv.w = 1024;
	cv.h = 1024;
	if (big) {
		struct gpu_buf *b = NULL;

		CHECK_EQ_INT(gpu_stage(g, 0, &cv, big, 2, &b, err, sizeof(err)),
		    -E2BIG);
	}
	free(big);
	gpu_get_stats(g, &st);
	CHECK(st.pool_used == 0);
	gpu_fini(g);
}

/* Two jobs: a pool and a handle each, within the budget (issue 12). */
static void
check_jobs(struct gpu *g, struct consumer *c, const uint8_t *src,
    const uint8_t *src2)
{
	struct gpu_conv cv = conv(FEEDFS_CUDA_FLOAT16, FEEDFS_CUDA_NCHW, true);
	uint8_t *wa = expected(&cv, src, N), *wb = expected(&cv, src2, N);
	struct feedfs_cuda_desc da, db;
	struct gpu_buf *a = NULL, *b = NULL;
	struct gpu_stats st;
	char err[512];

	CHECK_EQ_INT(gpu_job_pool(g, 1, 32u << 20, err, sizeof(err)), 0);
	CHECK_EQ_INT(gpu_job_pool(g, 1, 1, err, sizeof(err)), 0); /* made */
	CHECK_EQ_INT(gpu_job_pool(g, 2, 4096, err, sizeof(err)), -E2BIG);
	CHECK(strstr(err, "gpu_memory") != NULL);
	CHECK_EQ_INT(gpu_stage(g, 2, &cv, src, N, &a, err, sizeof(err)),
	    -ENOENT);
	gpu_get_stats(g, &st);
	CHECK(st.pools == 2 && st.pool_bytes == 64u << 20);
	CHECK_EQ_INT(gpu_stage(g, 0, &cv, src, N, &a, err, sizeof(err)), 0);
	CHECK_EQ_INT(gpu_stage(g, 1, &cv, src2, N, &b, err, sizeof(err)), 0);
	if (a && b) {
		gpu_buf_desc(g, a, &da);
		gpu_buf_desc(g, b, &db);
		/* Job 1's handle is not job 0's: it opens job 1 only. */
		CHECK(memcmp(da.handle, db.handle, sizeof(da.handle)) != 0);
		CHECK(db.offset + db.nbytes <= 32u << 20);
		check_consumers(c, g, a, wa, N);
		check_consumers(c, g, b, wb, N);
		check_consumers(c, g, a, wa, N);
	}
	gpu_put(g, a);
	gpu_put(g, b);
	free(wa);
	free(wb);
}

struct late_put {
	struct gpu *g;
	struct gpu_buf *b;
};

static void *
put_later(void *arg)
{
	struct late_put *lp = arg;
	struct timespec ts = { 0, 50 * 1000000 };

	nanosleep(&ts, NULL);
	gpu_put(lp->g, lp->b);
	return NULL;
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/*
 * Job 1's pool full: a stage waits for a buffer given back meanwhile;
 * with none it fails after GPU_FULL_WAIT_MS, and succeeds once one is
 * back (the failure does not stick); job 0 is not affected.
 */
static void
check_full(struct gpu *g, const uint8_t *src)
{
	struct gpu_conv cv = conv(FEEDFS_CUDA_FLOAT32, FEEDFS_CUDA_NHWC, false);
	static struct gpu_buf *held[4096];
	struct gpu_buf *x = NULL;
	struct late_put lp;
	pthread_t t;
	char err[512];
	size_t n = 0;
	double t0;
	int r;

	while (n < 4096 && (r = gpu_stage(g, 1, &cv, src, N, &held[n], err,
				sizeof(err))) == 0)
		n++;
	CHECK_EQ_INT(r, -ENOSPC);
	if (n == 0)
		return;
	t0 = now_ms();
	CHECK_EQ_INT(gpu_stage(g, 1, &cv, src, N, &x, err, sizeof(err)),
	    -ENOSPC);
	CHECK(now_ms() - t0 >= GPU_FULL_WAIT_MS * 0.9);
	CHECK_EQ_INT(gpu_stage(g, 0, &cv, src, N, &x, err, sizeof(err)), 0);
	gpu_put(g, x);
	x = NULL;
	lp.g = g;
	lp.b = held[--n];
	CHECK(pthread_create(&t, NULL, put_later, &lp) == 0);
	CHECK_EQ_INT(gpu_stage(g, 1, &cv, src, N, &held[n], err, sizeof(err)),
	    0);
	n++;
	pthread_join(t, NULL);
	while (n > 0)
		gpu_put(g, held[--n]);
}

/*
 * A failed CUDA call elsewhere in the process (here: opening a bogus IPC
 * handle) leaves an error behind; the next staging, which launches a
 * kernel, must not fail with it, nor may later ones.
 */
static void
check_stale_error(struct gpu *g, const uint8_t *src)
{
	struct gpu_conv cv = conv(FEEDFS_CUDA_FLOAT32, FEEDFS_CUDA_NCHW, true);
	struct feedfs_cuda_desc d;
	struct gpu_buf *b = NULL;
	void *base = NULL;
	char err[512];

	memset(&d, 0, sizeof(d));
	CHECK(gpu_ipc_open(&d, &base, err, sizeof(err)) != 0);
	for (int i = 0; i < 2; i++) {
		int r = gpu_stage(g, 0, &cv, src, N, &b, err, sizeof(err));

		if (r != 0)
			fprintf(stderr, "stage after a stale error: %s\n", err);
		CHECK_EQ_INT(r, 0);
		gpu_put(g, b);
		b = NULL;
	}
}

/*
 * gpu/ takes the descriptor's codes (feedfs_cuda.h), which the engine
 * translates from xf's: a value that is none of them is refused, not
 * taken for float32, and nothing of the pool is held.
 */
static void
check_bad_codes(struct gpu *g, const uint8_t *src)
{
	struct gpu_conv cv = conv(FEEDFS_CUDA_FLOAT32, FEEDFS_CUDA_NCHW, false);
	struct gpu_stats before, after;
	struct gpu_buf *b = NULL;
	char err[512] = "";

	gpu_get_stats(g, &before);
	cv.dtype = (enum feedfs_cuda_dtype)3;
	CHECK_EQ_INT(gpu_stage(g, 0, &cv, src, N, &b, err, sizeof(err)),
	    -EINVAL);
	CHECK(b == NULL && strstr(err, "no such code") != NULL);
	cv.dtype = FEEDFS_CUDA_FLOAT32;
	cv.layout = (enum feedfs_cuda_layout)2;
	CHECK_EQ_INT(gpu_stage(g, 0, &cv, src, N, &b, err, sizeof(err)),
	    -EINVAL);
	CHECK(b == NULL);
	gpu_get_stats(g, &after);
	CHECK(after.pool_used == before.pool_used &&
	    after.staged == before.staged);
}

int
main(void)
{
	struct consumer c[NCONSUMERS];
	uint8_t src[N * W * H * 3], src2[N * W * H * 3];
	struct gpu *g = NULL;
	char err[512];

	if (!gpu_built()) {
		printf("SKIP: feedfs was built without CUDA\n");
		return 77;
	}
	if (gpu_probe(err, sizeof(err)) != 0) {
		printf("SKIP: %s\n", err);
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	/* A hang (a consumer waiting on a pipe nobody closes) fails the
	 * test instead of holding make check; the whole run takes seconds. */
	alarm(300);
	consumers_start(c); /* before this process opens CUDA */
	if (gpu_init(&g, 64u << 20, err, sizeof(err)) != 0 ||
	    gpu_job_pool(g, 0, 32u << 20, err, sizeof(err)) != 0) {
		fprintf(stderr, "gpu_init: %s\n", err);
		gpu_fini(g);
		consumers_stop(c);
		return 1;
	}
	pattern(src, sizeof(src), 1);
	pattern(src2, sizeof(src2), 2);
	check_values(g, src);
	check_hold_and_reuse(g, c, src, src2);
	check_jobs(g, c, src, src2);
	check_full(g, src);
	check_stale_error(g, src);
	check_bad_codes(g, src);
	gpu_fini(g);
	consumers_stop(c);
	check_bound(src);
	return TEST_SUMMARY();
}
