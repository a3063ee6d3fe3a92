/*
 * config_opts.c - the model (core/): the keys -o gives besides the
 * [mount] ones (see config.h): [dataset] keys, said where they belong or
 * set on a dataset path's datasets (label on its shards, text on all),
 * and the words of the keys -o takes for
 * "expected ..." messages.  Over config_keys.c's table (config_int.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/config_int.h"

bool
cfg_is_dataset_key(const char *key, size_t len)
{
	return cfg_find_key(SEC_DATASET, key, len) != NULL;
}

void
cfg_opt_keys(bool jobs, char *buf, size_t len)
{
	const char *const *jo = cfg_job_opt_names();
	const char *words[64];
	size_t n = 0, used;

	for (const struct key *k; n < 62 &&
	     (k = cfg_key_at(SEC_MOUNT, n)) != NULL;)
		words[n++] = k->name;
	words[n++] = "log=FILE";
	used = (size_t)snprintf(buf, len, "a [mount] key: ");
	if (used < len)
		cfg_list_words(words, n, buf + used, len - used);
	if (!jobs)
		return;
	for (n = 0; jo[n] != NULL; n++)
		words[n] = jo[n];
	used = strlen(buf);
	used += (size_t)snprintf(buf + used, len - used,
	    "; a [job] key of the default jobs (KEY for every job, JOB.KEY "
	    "for one): ");
	if (used < len)
		cfg_list_words(words, n, buf + used, len - used);
	used = strlen(buf);
	snprintf(buf + used, len - used,
	    "; label (of tar shards), text (captions)");
}

/* The [dataset] keys of remote shards (s3://, https://). */
static bool
remote_key(const char *key)
{
	static const char *const rk[] = {"s3_endpoint", "s3_region",
	    "s3_path_style", "ca_file", "remote_timeout", "remote_retries"};

	for (size_t i = 0; i < sizeof(rk) / sizeof(rk[0]); i++)
		if (strcmp(key, rk[i]) == 0)
			return true;
	return false;
}

/*
 * -o text=: the captions of every dataset of a dataset path's config, a
 * class tree's (sidecars) as a folder of shards' (members).
 */
static int
set_text(struct cfg *c, const struct key *k, const char *value, char *err,
    size_t errlen)
{
	char msg[512];
	int r;

	if (strcmp(value, "txt") != 0 && strcmp(value, "none") != 0 &&
	    (strncmp(value, "json:", 5) != 0 || value[5] == '\0')) {
		snprintf(err, errlen,
		    "-o text=%s: expected txt, json:KEY or none", value);
		return -EINVAL;
	}
	for (size_t i = 0; i < c->ndatasets; i++)
		if ((r = cfg_set_key(k, &c->datasets[i], NULL, value, msg,
			 sizeof(msg))) != 0) {
			snprintf(err, errlen, "-o text=%s: %s", value, msg);
			return r;
		}
	return 0;
}

int
cfg_set_dataset_opt(
    struct cfg *c, const char *key, const char *value, char *err, size_t errlen)
{
	const struct key *k = cfg_find_key(SEC_DATASET, key, strlen(key));
	char msg[512];
	size_t set = 0;
	int r;

	if (k == NULL) {
		snprintf(err, errlen, "-o %s: not a [dataset] key", key);
		return -ENOENT;
	}
	if (c->layout == NULL) {
		snprintf(err, errlen,
		    "-o %s=%s: a [dataset] key: set it in the [dataset NAME] "
		    "section of %s (-o takes [mount] keys with a config)",
		    key, value, c->path);
		return -EINVAL;
	}
	if (remote_key(key)) {
		snprintf(err, errlen,
		    "-o %s=%s: a [dataset] key of remote shards (s3://, "
		    "https://); %s is on local disk, where it would do "
		    "nothing: set it in the [dataset NAME] section of a config "
		    "whose shards = is a URL",
		    key, value, c->path);
		return -EINVAL;
	}
	if (strcmp(key, "text") == 0)
		return set_text(c, k, value, err, errlen);
	if (strcmp(key, "label") != 0) {
		snprintf(err, errlen,
		    "-o %s=%s: a [dataset] key; without a config the dataset "
		    "is %s itself: write a config with a [dataset NAME] "
		    "section to set it (feedfs.conf(5))",
		    key, value, c->path);
		return -EINVAL;
	}
	if (strcmp(value, "cls") != 0 && strcmp(value, "none") != 0 &&
	    strcmp(value, "auto") != 0 &&
	    (strncmp(value, "json:", 5) != 0 || value[5] == '\0')) {
		snprintf(err, errlen,
		    "-o label=%s: expected cls, json:KEY, none or auto", value);
		return -EINVAL;
	}
	for (size_t i = 0; i < c->ndatasets; i++) {
		if (c->datasets[i].shards == NULL)
			continue;
		if ((r = cfg_set_key(k, &c->datasets[i], NULL, value, msg,
			 sizeof(msg))) != 0) {
			snprintf(err, errlen, "-o label=%s: %s", value, msg);
			return r;
		}
		set++;
	}
	if (set == 0) {
		snprintf(err, errlen,
		    "-o label=%s: label applies to tar shards; %s is a class "
		    "tree, whose labels are its class folders",
		    value, c->path);
		return -EINVAL;
	}
	return 0;
}
