/*
 * fuzz_cred - libFuzzer target: what credential sources give
 * (dataset/remote/cred_parse.c): the first byte picks
 *
 *   0  a profile file (cred_ini_get, both kinds, profiles "default", "p"
 *      and a missing one, keys that exist and not): a value found lies
 *      within the text, is not empty, has no line break and no space at
 *      either end;
 *   1  an STS response (cred_sts_parse, cred_xml_text): credentials with
 *      a key id and a secret, or an error whose message holds neither
 *      the document's secret nor a control character;
 *   2  an IMDS role document (cred_imds_parse): credentials with a key id,
 *      a secret and an expiry, or a message;
 *   3  a time (cred_time_parse): parsed times are after 1970.
 *
 * Every allocation of a secret goes through the arena (cred_secret.c),
 * which must end each input as empty as it began.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dataset/remote/cred.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
ini(const char *s, size_t n)
{
	static const char *const prof[] = {"default", "p", "none"};
	static const char *const keys[] = {"aws_access_key_id",
	    "aws_secret_access_key", "role_arn", "source_profile", "x"};

	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 3; i++)
			for (int j = 0; j < 5; j++) {
				const char *v;
				size_t vl;
				bool found = false;

				if (cred_ini_get(s, n, (enum cred_ini_kind)k,
					prof[i], keys[j], &v, &vl, &found) != 0)
					continue;
				if (!found || v < s || v + vl > s + n ||
				    vl == 0 || memchr(v, '\n', vl) != NULL ||
				    v[0] == ' ' || v[vl - 1] == ' ')
					abort();
			}
}

static void
sts(const char *s, size_t n)
{
	struct cred *c = NULL;
	char err[512] = "", out[64];
	size_t ol;
	int r = cred_sts_parse(s, n, "fuzz", &c, err, sizeof(err));

	if (r == 0) {
		if (c->key_id[0] == '\0' || c->secret[0] == '\0' ||
		    !cred_in_arena(c->secret))
			abort();
		cred_unref(c);
	} else if (r != -EACCES && r != -EINVAL && r != -ENOMEM)
		abort();
	else
		for (const char *p = err; *p; p++)
			if ((unsigned char)*p < ' ')
				abort();
	if (cred_xml_text(s, n, "a", "b", out, sizeof(out), &ol) == 0 &&
	    (ol >= sizeof(out) || strlen(out) > ol))
		abort();
}

static void
imds(const char *s, size_t n)
{
	struct cred *c = NULL;
	char err[512];
	int r = cred_imds_parse(s, n, "fuzz", &c, err, sizeof(err));

	if (r == 0) {
		if (c->key_id[0] == '\0' || c->secret[0] == '\0' ||
		    c->expires == 0)
			abort();
		cred_unref(c);
	} else if (r != -EINVAL && r != -ENOMEM)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t used = cred_arena_used();
	char *s;
	time_t t;

	if (size < 1 || size > (1u << 16))
		return 0;
	if ((s = malloc(size)) == NULL)
		abort();
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] % 4) {
	case 0:
		ini(s, size - 1);
		break;
	case 1:
		sts(s, size - 1);
		break;
	case 2:
		imds(s, size - 1);
		break;
	default:
		if (cred_time_parse(s, size - 1, &t) == 0 && t < 0)
			abort();
		break;
	}
	free(s);
	if (cred_arena_used() != used)
		abort(); /* a secret's block not freed (not zeroed) */
	return 0;
}
