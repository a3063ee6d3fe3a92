/*
 * test_gpu_desc - the parts of GPU staging that need no device, run in
 * every build: the .cuda descriptor's bytes, the pool accounting (one
 * pool per gpu = on job, each its share of gpu_memory), the stub's
 * message, and the refusal of gpu = on in a config.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "dataset/dataset.h"
#include "engine/engine.h"
#include "core/sample.h"
#include "gpu/feedfs_cuda.h"
#include "gpu/gpu.h"
#include "gpu/pool.h"
#include "tests/testlib.h"

static struct feedfs_cuda_desc
sample_desc(void)
{
	struct feedfs_cuda_desc d;

	memset(&d, 0, sizeof(d));
	for (int i = 0; i < FEEDFS_CUDA_HANDLE_SIZE; i++)
		d.handle[i] = (uint8_t)(0xa0 + i);
	d.device = 3;
	d.dtype = FEEDFS_CUDA_FLOAT16;
	d.offset = 0x0102030405060708ull;
	d.ndim = 4;
	d.layout = FEEDFS_CUDA_NCHW;
	d.shape[0] = 256;
	d.shape[1] = 3;
	d.shape[2] = 224;
	d.shape[3] = 224;
	d.nbytes = 256ull * 3 * 224 * 224 * 2;
	for (int i = 0; i < 16; i++)
		d.uuid[i] = (uint8_t)i;
	return d;
}

static void
test_desc(void)
{
	struct feedfs_cuda_desc d = sample_desc(), e;
	uint8_t buf[FEEDFS_CUDA_DESC_SIZE + 8], bad[FEEDFS_CUDA_DESC_SIZE];

	feedfs_cuda_encode(&d, buf);
	/* The documented layout, byte for byte (feedfs(8)). */
	CHECK(memcmp(buf, "FFSCUDA\0", 8) == 0);
	CHECK(buf[8] == 1 && buf[9] == 0 && buf[10] == 0 && buf[11] == 0);
	CHECK(buf[12] == 160 && buf[13] == 0);
	CHECK(buf[16] == 0xa0 && buf[79] == 0xa0 + 63);
	CHECK(buf[80] == 3 && buf[83] == 0);
	CHECK(buf[84] == 1);
	CHECK(buf[88] == 0x08 && buf[95] == 0x01); /* little-endian */
	CHECK(feedfs_cuda_get64(buf + 96) == d.nbytes);
	CHECK(buf[104] == 4 && buf[108] == 1);
	CHECK(feedfs_cuda_get64(buf + 112) == 256);
	CHECK(feedfs_cuda_get64(buf + 120) == 3);
	CHECK(feedfs_cuda_get64(buf + 136) == 224);
	CHECK(buf[144] == 0 && buf[159] == 15);

	memset(&e, 0xff, sizeof(e));
	CHECK_EQ_INT(feedfs_cuda_decode(buf, FEEDFS_CUDA_DESC_SIZE, &e), 0);
	CHECK(memcmp(&d, &e, sizeof(d)) == 0);
	/* A longer read is fine; a shorter one is not. */
	CHECK_EQ_INT(feedfs_cuda_decode(buf, sizeof(buf), &e), 0);
	CHECK_EQ_INT(feedfs_cuda_decode(buf, FEEDFS_CUDA_DESC_SIZE - 1, &e),
	    -EINVAL);
	CHECK_EQ_INT(feedfs_cuda_decode(buf, 8, &e), -EINVAL);

	/* Each corruption is refused, and leaves *d alone. */
	memcpy(bad, buf, sizeof(bad));
	bad[0] = 'X';
	memset(&e, 0x5a, sizeof(e));
	CHECK_EQ_INT(feedfs_cuda_decode(bad, sizeof(bad), &e), -EINVAL);
	CHECK(e.device == 0x5a5a5a5a);
	memcpy(bad, buf, sizeof(bad));
	bad[8] = 2;
	CHECK_EQ_INT(feedfs_cuda_decode(bad, sizeof(bad), &e), -ENOTSUP);
	memcpy(bad, buf, sizeof(bad));
	bad[84] = 7; /* dtype */
	CHECK_EQ_INT(feedfs_cuda_decode(bad, sizeof(bad), &e), -EINVAL);
	memcpy(bad, buf, sizeof(bad));
	bad[104] = 5; /* ndim */
	CHECK_EQ_INT(feedfs_cuda_decode(bad, sizeof(bad), &e), -EINVAL);
	memcpy(bad, buf, sizeof(bad));
	bad[96] ^= 1; /* nbytes not the shape's */
	CHECK_EQ_INT(feedfs_cuda_decode(bad, sizeof(bad), &e), -EINVAL);
	memcpy(bad, buf, sizeof(bad));
	bad[108] = 2; /* layout */
	CHECK_EQ_INT(feedfs_cuda_decode(bad, sizeof(bad), &e), -EINVAL);

	/* ndim < 4: the rest of shape is zero. */
	d.ndim = 2;
	d.shape[2] = d.shape[3] = 0;
	d.dtype = FEEDFS_CUDA_UINT8;
	d.nbytes = 256 * 3;
	feedfs_cuda_encode(&d, buf);
	CHECK_EQ_INT(feedfs_cuda_decode(buf, FEEDFS_CUDA_DESC_SIZE, &e), 0);
	feedfs_cuda_put64(buf + 128, 1);
	CHECK_EQ_INT(feedfs_cuda_decode(buf, FEEDFS_CUDA_DESC_SIZE, &e),
	    -EINVAL);
	CHECK_EQ_INT(feedfs_cuda_dtype_size(FEEDFS_CUDA_FLOAT32), 4);
	CHECK_EQ_INT(feedfs_cuda_dtype_size(9), 0);
}

static void
test_pool(void)
{
	struct gpu_pool p;
	uint64_t a, b, c, x;

	CHECK_EQ_INT(gpu_pool_init(&p, 1 << 20, 3), -EINVAL);
	CHECK_EQ_INT(gpu_pool_init(&p, (1 << 20) + 100, 4096), 0);
	CHECK(p.size == 1 << 20); /* rounded down to the alignment */

	CHECK_EQ_INT(gpu_pool_get(&p, 0, &a), -EINVAL);
	CHECK_EQ_INT(gpu_pool_get(&p, 1, &a), 0);
	CHECK(a == 0);
	CHECK(p.used == 4096); /* rounded up */
	CHECK_EQ_INT(gpu_pool_get(&p, 300000, &b), 0);
	CHECK(b == 4096);
	CHECK_EQ_INT(gpu_pool_get(&p, 300000, &c), 0);
	CHECK(c == 4096 + 303104);
	CHECK(p.used == 4096 + 2 * 303104);

	/* The bound: what does not fit now fails, and is counted. */
	CHECK_EQ_INT(gpu_pool_get(&p, 500000, &x), -ENOSPC);
	CHECK_EQ_INT(gpu_pool_get(&p, (1 << 20) + 1, &x), -E2BIG);
	CHECK(p.fails == 2);
	CHECK(p.used <= p.size);

	/* A range given back is handed out again (first fit). */
	CHECK_EQ_INT(gpu_pool_put(&p, b), 0);
	CHECK_EQ_INT(gpu_pool_put(&p, b), -ENOENT);
	CHECK_EQ_INT(gpu_pool_get(&p, 200000, &x), 0);
	CHECK(x == b);
	CHECK_EQ_INT(gpu_pool_get(&p, 200000, &x), 0);
	CHECK(x == c + 303104); /* the gap at b is too small now */
	CHECK_EQ_INT(gpu_pool_put(&p, a), 0);
	CHECK_EQ_INT(gpu_pool_put(&p, c), 0);
	CHECK_EQ_INT(gpu_pool_get(&p, 4096 * 2, &x), 0);
	CHECK(x == b + 200704); /* the gap at 0 holds one page only */
	CHECK(p.peak >= p.used);

	/* Fill it exactly, in many pieces; then empty it. */
	gpu_pool_fini(&p);
	CHECK_EQ_INT(gpu_pool_init(&p, 64 * 4096, 4096), 0);
	for (int i = 0; i < 64; i++) {
		CHECK_EQ_INT(gpu_pool_get(&p, 4096, &x), 0);
		CHECK(x == (uint64_t)i * 4096);
	}
	CHECK_EQ_INT(gpu_pool_get(&p, 1, &x), -ENOSPC);
	CHECK(p.used == p.size);
	for (int i = 63; i >= 0; i--)
		CHECK_EQ_INT(gpu_pool_put(&p, (uint64_t)i * 4096), 0);
	CHECK(p.used == 0 && p.n == 0 && p.peak == p.size);
	CHECK_EQ_INT(gpu_pool_get(&p, 64 * 4096, &x), 0);
	CHECK(x == 0);
	gpu_pool_fini(&p);
}

/*
 * Per-job pools (issue 12): shares of gpu_memory that never add up to more
 * than it, and pools whose accounting is independent: one job filling its
 * pool takes nothing from another's.
 */
static void
test_job_pools(void)
{
	uint64_t total = (1ull << 30) + 1234, off[3], x;
	struct gpu_pool p[3];

	CHECK(gpu_pool_share(total, 0) == 0);
	CHECK(gpu_pool_share(total, 1) == 1ull << 30);
	CHECK(gpu_pool_share(4095, 1) == 0);
	CHECK(gpu_pool_share(3 * 4096, 4) == 0);
	for (uint32_t n = 1; n <= 7; n++) {
		uint64_t sh = gpu_pool_share(total, n);

		CHECK(sh % GPU_POOL_ALIGN == 0);
		CHECK(sh * n <= total);
		CHECK(total - sh * n < (uint64_t)n * GPU_POOL_ALIGN + n);
	}
	CHECK(gpu_pool_share(UINT64_MAX, 3) * 3 <= UINT64_MAX - 2);

	/* Three jobs' pools of one share each. */
	for (int i = 0; i < 3; i++) {
		CHECK_EQ_INT(gpu_pool_init(&p[i], gpu_pool_share(64 * 4096, 3),
				 GPU_POOL_ALIGN),
		    0);
		CHECK(p[i].size == 21 * 4096);
	}
	/* Job 0 fills its pool; jobs 1 and 2 still get theirs whole. */
	for (int k = 0; k < 21; k++)
		CHECK_EQ_INT(gpu_pool_get(&p[0], 4096, &x), 0);
	CHECK_EQ_INT(gpu_pool_get(&p[0], 1, &x), -ENOSPC);
	CHECK_EQ_INT(gpu_pool_get(&p[1], 21 * 4096, &off[1]), 0);
	CHECK_EQ_INT(gpu_pool_get(&p[2], 21 * 4096, &off[2]), 0);
	CHECK(off[1] == 0 && off[2] == 0); /* offsets within each pool */
	/* A batch larger than a job's share never fits in it. */
	CHECK_EQ_INT(gpu_pool_get(&p[1], 22 * 4096, &x), -E2BIG);
	CHECK(p[0].fails == 1 && p[1].fails == 1 && p[2].fails == 0);
	/* A range given back to job 0 is job 0's again; not job 1's. */
	CHECK_EQ_INT(gpu_pool_put(&p[1], 5 * 4096), -ENOENT);
	CHECK_EQ_INT(gpu_pool_put(&p[0], 5 * 4096), 0);
	CHECK_EQ_INT(gpu_pool_get(&p[1], 1, &x), -ENOSPC);
	CHECK_EQ_INT(gpu_pool_get(&p[0], 1, &off[0]), 0);
	CHECK(off[0] == 5 * 4096);
	CHECK(p[0].used + p[1].used + p[2].used <= 64 * 4096);
	for (int i = 0; i < 3; i++)
		gpu_pool_fini(&p[i]);
}

/* gpu = on in a config: refused, saying why, unless a device is here. */
static void
test_refusal(void)
{
	char dir[] = "/tmp/test_gpu_desc.XXXXXX", path[300], err[1024];
	char probe[512];
	struct dataset ds;
	struct cfg *c = NULL;
	struct job j;
	bool device;
	FILE *fp;
	int r;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/feedfs.conf", dir);
	if (!(fp = fopen(path, "w"))) {
		perror(path);
		exit(1);
	}
	fputs("[dataset d]\nroot = /tmp\n[job j]\nbatch_size = 4\n"
	      "pipeline = decode center_crop(8)\ngpu = on\n",
	    fp);
	fclose(fp);
	CHECK_EQ_INT(cfg_load(path, &c, err, sizeof(err)), 0);
	if (!c)
		goto out;
	CHECK(c->jobs[0].gpu);
	memset(&ds, 0, sizeof(ds));
	device = gpu_probe(probe, sizeof(probe)) == 0;
	/* The model takes the job; the engine asks for its device. */
	r = job_init(&j, c, &c->jobs[0], &ds, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	if (r == 0) {
		r = stage_probe(c, &c->jobs[0], err, sizeof(err));
		job_fini(&j);
	}
	if (device) {
		fprintf(stderr, "a CUDA device is here: gpu = on accepted\n");
		CHECK_EQ_INT(r, 0);
	} else {
		char want[400];

		snprintf(want, sizeof(want), "%s:3: gpu = on: %s", path,
		    gpu_built() ? "no CUDA device: "
				: "feedfs was built without CUDA");
		fprintf(stderr, "refused: %s\n", err);
		CHECK(r != 0);
		CHECK(strncmp(err, want, strlen(want)) == 0);
	}
	cfg_free(c);
out:
	unlink(path);
	rmdir(dir);
}

static void
test_stub(void)
{
	struct gpu *g = NULL;
	struct gpu_buf *b = NULL;
	struct gpu_conv cv;
	char err[512] = "";
	int r;

	if (gpu_built())
		return;
	memset(&cv, 0, sizeof(cv));
	CHECK_EQ_INT(gpu_job_pool(NULL, 0, 1 << 20, err, sizeof(err)),
	    -ENOTSUP);
	CHECK_EQ_INT(gpu_stage(NULL, 0, &cv, NULL, 0, &b, err, sizeof(err)),
	    -ENOTSUP);
	CHECK(b == NULL);
	CHECK_EQ_INT(gpu_probe(err, sizeof(err)), -ENOTSUP);
	CHECK_EQ_STR(err, "feedfs was built without CUDA");
	err[0] = '\0';
	r = gpu_init(&g, 1 << 30, err, sizeof(err));
	CHECK_EQ_INT(r, -ENOTSUP);
	CHECK(g == NULL);
	CHECK_EQ_STR(err, "feedfs was built without CUDA");
}

int
main(void)
{
	test_desc();
	test_pool();
	test_job_pools();
	test_stub();
	test_refusal();
	return TEST_SUMMARY();
}
