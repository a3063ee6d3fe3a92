/*
 * tier-plant.c - a test tool (tests/, over core/ds_tier.c and the cluster
 * client of cache/): plants a shard's index in the cluster tier, as
 * tests/test_remote_tier_index.py's stale and forged indexes.
 *
 *	tier-plant [--secret FILE [--forge]] SERVERS NAME VERSION FILE
 *
 * Puts FILE's bytes (an index as cache_dir/shard-index keeps it) under
 * the tier key of the index of shard NAME (its display URL) at VERSION
 * (remote_version_text's words, e.g. etag "abc" size 1024), in the
 * payload core/ds_tier.c reads, through the real client: sealed in the
 * value envelope, with --secret MAC'd under that secret in its
 * namespace.  --forge: in that secret's namespace but without its MAC,
 * what someone who sees the servers' item names, and not the secret,
 * could store.  Exit 0 when stored.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cluster_int.h"
#include "core/dsopen.h"

static int
slurp(const char *path, uint8_t **d, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p = NULL;
	size_t n = 0, cap = 0, k;

	if (f == NULL)
		return -errno;
	do {
		if (n == cap) {
			uint8_t *np = realloc(p, cap = cap ? cap * 2 : 65536);

			if (np == NULL) {
				free(p);
				fclose(f);
				return -ENOMEM;
			}
			p = np;
		}
		k = fread(p + n, 1, cap - n, f);
		n += k;
	} while (k > 0);
	fclose(f);
	*d = p;
	*len = n;
	return 0;
}

int
main(int argc, char **argv)
{
	const char *secret = NULL;
	struct cluster_opts o = {0};
	struct cluster *cl = NULL, *owner = NULL;
	struct cache_val v;
	uint8_t key[32], *d = NULL;
	size_t len = 0;
	char err[1024];
	bool forge = false;
	int i = 1, r;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--secret") == 0 && i + 1 < argc)
			secret = argv[++i];
		else if (strcmp(argv[i], "--forge") == 0)
			forge = true;
		else
			break;
	}
	if (argc - i != 4 || (forge && secret == NULL)) {
		fprintf(stderr, "usage: tier-plant [--secret FILE [--forge]] "
				"SERVERS NAME VERSION FILE\n");
		return 2;
	}
	if ((r = slurp(argv[i + 3], &d, &len)) != 0) {
		fprintf(
		    stderr, "tier-plant: %s: %s\n", argv[i + 3], strerror(-r));
		return 1;
	}
	o.secret_file = forge ? NULL : secret;
	if (cluster_open(argv[i], &o, &cl, err, sizeof(err)) != 0) {
		fprintf(stderr, "tier-plant: %s\n", err);
		return 1;
	}
	if (forge) {
		/* The namespace of the secret's key id, without its MAC. */
		o.secret_file = secret;
		if (cluster_open(argv[i], &o, &owner, err, sizeof(err)) != 0) {
			fprintf(stderr, "tier-plant: %s\n", err);
			return 1;
		}
		memcpy(cl->ns, owner->ns, sizeof(cl->ns));
		cluster_close(owner);
	}
	ds_tier_key(argv[i + 1], argv[i + 2], key);
	if ((r = ds_tier_wrap(d, len, &v)) == 0) {
		r = cluster_put(cl, key, &v);
		free(v.data);
	}
	free(d);
	cluster_close(cl);
	if (r != 0) {
		fprintf(stderr, "tier-plant: not stored: %s\n", strerror(-r));
		return 1;
	}
	return 0;
}
