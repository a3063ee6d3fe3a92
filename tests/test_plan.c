/*
 * test_plan - properties of the epoch plan: every sample exactly once per
 * epoch, shards disjoint and covering with equal batch counts (as
 * DistributedSampler), determinism per (seed, epoch).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/mix.h"
#include "core/plan.h"
#include "tests/testlib.h"

/*
 * Mixtures (issue 14): weights' text, largest-remainder counts, and the
 * order: each batch's share within one sample of the target, each source
 * without replacement until it wraps, determinism per (seed, epoch).
 */
static void
test_mixture(void)
{
	const char *names[] = {"web", "cur", "x"};
	uint64_t w[3];
	uint32_t count[3];
	size_t size[3] = {5, 7, 30};
	struct plan p = {.n = 100, .batch_size = 6, .seed = 9, .shuffle = true};
	uint32_t *a = malloc(p.n * sizeof(*a)), *b = malloc(p.n * sizeof(*b));
	char buf[128], msg[256];

	CHECK_EQ_INT(
	    mix_weights("web:0.1234567, cur:2", names, 3, w, msg, sizeof(msg)),
	    0);
	CHECK(w[0] == 123457 && w[1] == 2000000 && w[2] == 0);
	mix_format(names, w, 3, buf, sizeof(buf));
	CHECK_EQ_STR(buf, "web:0.123457 cur:2 x:0\n");
	CHECK_EQ_INT(
	    mix_weights("web:1 y:1", names, 3, w, msg, sizeof(msg)), -EINVAL);
	CHECK(strstr(msg, "unknown source 'y'") != NULL);
	CHECK_EQ_INT(
	    mix_weights("web:.", names, 3, w, msg, sizeof(msg)), -EINVAL);
	CHECK_EQ_INT(mix_weights("", names, 3, w, msg, sizeof(msg)), -EINVAL);
	/* Thirds of 10: 3, 3, 4 would be wrong; 4, 3, 3 (ties: earlier). */
	w[0] = w[1] = w[2] = 1;
	mix_counts(w, 3, 10, count);
	CHECK(count[0] == 4 && count[1] == 3 && count[2] == 3);
	w[0] = 1;
	w[1] = 2;
	w[2] = 0;
	mix_counts(w, 3, 7, count);
	CHECK(count[0] == 2 && count[1] == 5 && count[2] == 0);

	w[0] = 333333;
	w[1] = 500000;
	w[2] = 166667;
	CHECK_EQ_INT(mix_order(&p, 3, size, w, 3, a), 0);
	CHECK_EQ_INT(mix_order(&p, 3, size, w, 3, b), 0);
	CHECK(memcmp(a, b, p.n * sizeof(*a)) == 0);
	CHECK_EQ_INT(mix_order(&p, 4, size, w, 3, b), 0);
	CHECK(memcmp(a, b, p.n * sizeof(*a)) != 0);
	{
		uint64_t drawn[3] = {0};
		unsigned seen[42] = {0};

		for (uint64_t k = 0; k * p.batch_size < p.n; k++) {
			uint32_t L = p.n - k * p.batch_size < p.batch_size
					 ? (uint32_t)(p.n - k * p.batch_size)
					 : p.batch_size;
			uint32_t c[3] = {0};

			for (uint32_t i = 0; i < L; i++) {
				uint32_t id = a[k * p.batch_size + i];
				int s = id < 5 ? 0 : id < 12 ? 1 : 2;

				CHECK(id < 42);
				c[s]++;
				/* A source's first cycle repeats nothing. */
				if (drawn[s]++ < size[s] && id < 42)
					CHECK_EQ_INT(seen[id]++, 0);
			}
			for (int s = 0; s < 3; s++) {
				double want = (double)w[s] * L / 1000000.0;

				CHECK(c[s] + 1 > want && c[s] < want + 1);
			}
		}
	}
	free(a);
	free(b);
}

static void
check_epoch_once(const struct plan *p, uint32_t epoch)
{
	uint32_t *perm = malloc(p->n * sizeof(*perm));
	unsigned *seen = calloc(p->n, sizeof(*seen));
	uint64_t *pos = malloc(p->batch_size * sizeof(*pos));
	uint64_t nb = plan_nbatches(p, 1), total = 0;

	plan_permutation(p, epoch, perm);
	for (uint64_t b = 0; b < nb; b++) {
		uint32_t len = plan_batch_positions(p, 0, 1, b, pos);

		CHECK(len == p->batch_size || (b == nb - 1 && !p->drop_last));
		for (uint32_t s = 0; s < len; s++)
			seen[perm[pos[s]]]++;
		total += len;
	}
	for (size_t i = 0; i < p->n; i++)
		CHECK(p->drop_last ? seen[i] <= 1 : seen[i] == 1);
	if (!p->drop_last)
		CHECK_EQ_INT(total, p->n);
	else
		CHECK_EQ_INT(total, p->n / p->batch_size * p->batch_size);
	CHECK_EQ_INT(plan_batch_len(p, 1, nb), 0);
	free(perm);
	free(seen);
	free(pos);
}

/*
 * DistributedSampler, written out as in PyTorch: pad by repeating the order
 * (or cut), rank r takes indices[r::W].  Compared with plan's positions.
 */
static void
check_shards(const struct plan *p, uint32_t world)
{
	size_t n = p->n, total, per;
	uint32_t *perm = malloc(n * sizeof(*perm));
	uint32_t *padded;
	unsigned *seen = calloc(n, sizeof(*seen));
	uint64_t *pos = malloc(p->batch_size * sizeof(*pos));
	uint64_t nb0 = plan_nbatches(p, world);

	plan_permutation(p, 3, perm);
	if (p->drop_last && n % world)
		per = n / world;
	else
		per = (n + world - 1) / world;
	total = per * world;
	padded = malloc((total ? total : 1) * sizeof(*padded));
	for (size_t i = 0; i < total; i++)
		padded[i] = perm[i % n];
	for (uint32_t r = 0; r < world; r++) {
		uint64_t k = 0;

		CHECK_EQ_INT(plan_rank_len(p, world), per);
		CHECK_EQ_INT(plan_nbatches(p, world), nb0);
		for (uint64_t b = 0; b < nb0; b++) {
			uint32_t len = plan_batch_positions(p, r, world, b,
			    pos);

			for (uint32_t s = 0; s < len; s++, k++) {
				CHECK_EQ_INT(perm[pos[s]],
				    padded[r + k * world]);
				seen[perm[pos[s]]]++;
			}
		}
		CHECK(k == per || (p->drop_last && k == per / p->batch_size *
			p->batch_size));
	}
	/* Covering (without drop_last) and disjoint up to the padding. */
	if (!p->drop_last) {
		size_t extra = 0;

		for (size_t i = 0; i < n; i++) {
			CHECK(seen[i] >= 1);
			extra += seen[i] - 1;
		}
		CHECK_EQ_INT(extra, total - n);
	} else {
		for (size_t i = 0; i < n; i++)
			CHECK(seen[i] <= 1);
	}
	free(perm);
	free(padded);
	free(seen);
	free(pos);
}

int
main(void)
{
	struct plan p = { .n = 1003, .batch_size = 32, .seed = 42,
		.shuffle = true };
	uint32_t *a = malloc(p.n * sizeof(*a)), *b = malloc(p.n * sizeof(*b));

	test_mixture();
	/* Same seed and epoch: same order; another epoch or seed: another. */
	plan_permutation(&p, 0, a);
	plan_permutation(&p, 0, b);
	CHECK(memcmp(a, b, p.n * sizeof(*a)) == 0);
	plan_permutation(&p, 1, b);
	CHECK(memcmp(a, b, p.n * sizeof(*a)) != 0);
	p.seed = 43;
	plan_permutation(&p, 0, b);
	CHECK(memcmp(a, b, p.n * sizeof(*a)) != 0);
	p.seed = 42;
	/* Not nearly the identity. */
	{
		size_t fixed = 0;

		for (size_t i = 0; i < p.n; i++)
			fixed += a[i] == i;
		CHECK(fixed < 20);
	}
	/* Without shuffle: the identity, every epoch. */
	p.shuffle = false;
	plan_permutation(&p, 7, a);
	for (size_t i = 0; i < p.n; i++)
		CHECK_EQ_INT(a[i], i);
	p.shuffle = true;

	/* Batch counts. */
	CHECK_EQ_INT(plan_nbatches(&p, 1), 32); /* ceil(1003/32) */
	CHECK_EQ_INT(plan_batch_len(&p, 1, 31), 1003 - 31 * 32);
	p.drop_last = true;
	CHECK_EQ_INT(plan_nbatches(&p, 1), 31);
	CHECK_EQ_INT(plan_rank_len(&p, 4), 250);
	p.drop_last = false;
	CHECK_EQ_INT(plan_rank_len(&p, 4), 251);

	for (int dl = 0; dl < 2; dl++) {
		p.drop_last = dl;
		for (uint32_t e = 0; e < 3; e++)
			check_epoch_once(&p, e);
		for (uint32_t w = 1; w <= 9; w++)
			check_shards(&p, w);
		check_shards(&p, 1024);
	}
	/* Tiny datasets: fewer samples than ranks. */
	{
		struct plan t = { .n = 3, .batch_size = 2, .seed = 1,
			.shuffle = true };

		check_shards(&t, 8);
		CHECK_EQ_INT(plan_nbatches(&t, 8), 1);
		t.drop_last = true;
		CHECK_EQ_INT(plan_nbatches(&t, 8), 0);
		check_epoch_once(&t, 0);
	}
	free(a);
	free(b);
	return TEST_SUMMARY();
}
