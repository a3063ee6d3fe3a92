/*
 * fuzz_wire - libFuzzer target: the shared cache's frames (cache/wire.c),
 * both ends.
 *
 * The first input byte picks the end.  Even: the rest is what a client
 * sent the owner, a stream of requests: each header goes through
 * wire_dec_req_hdr, each body through its op's decoder, and what decodes
 * is served as srv.c serves it, against a real store (cache_open in a
 * temporary directory, once): a GET is looked up and its reply sealed, a
 * PUT's envelope stored under the key it names, a digest memo looked up
 * or stored.  Odd: the rest is what the owner answered to request op
 * (the second byte): the reply header and its body through the client's
 * decoders, a GET's envelope checked against a fixed key, a HELLO's lease
 * token and a STATS reply's admission figures where the bytes put them,
 * and an error status (an owner at its cap answers a HELLO -EBUSY) with
 * no body.
 *
 * Whatever decodes must stay within the frame: a decoded PUT's prefix and
 * envelope, a digest request's path, lie inside the body.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/codec.h"
#include "cache/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PUT_LIMIT (1u << 20)

static struct cache *store;
static char store_dir[] = "/tmp/fuzz_wire.XXXXXX";

/* At exit: the store closed and its directory gone. */
static void
drop_store(void)
{
	char cmd[64];

	cache_close(store);
	store = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", store_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_wire: could not remove %s\n", store_dir);
}

static struct cache *
the_store(void)
{
	static int tried;
	char err[512];

	if (tried++)
		return store;
	if (mkdtemp(store_dir) == NULL)
		return NULL;
	if (cache_open(
		store_dir, 64u << 20, 16u << 20, &store, err, sizeof(err)) != 0)
		store = NULL;
	atexit(drop_store);
	return store;
}

static bool
inside(const void *p, size_t n, const uint8_t *b, size_t len)
{
	const uint8_t *q = p;

	return q >= b && n <= len && q - b <= (ptrdiff_t)(len - n);
}

static void
serve(uint32_t op, const uint8_t *b, size_t n)
{
	struct cache *c = the_store();
	struct wire_hello h;
	struct wire_put p;
	struct wire_digest_req d;
	struct cache_val v;
	const uint8_t *key;
	uint8_t hdr[CODEC_ENV_HDR], dig[32];
	char text[WIRE_PREFIX_MAX + 1]; /* the larger: a prefix or a path */

	switch (op) {
	case WIRE_HELLO:
		if (wire_dec_hello(b, n, &h) == 0 &&
		    (!inside(h.label, h.label_len, b, n) ||
			h.label_len > WIRE_LABEL_MAX))
			abort();
		break;
	case WIRE_GET:
		if (wire_dec_get(b, n, &key) == 0 && c != NULL &&
		    cache_get(c, key, &v) == 0) {
			codec_env_seal(hdr, key, &v);
			free(v.data);
		}
		break;
	case WIRE_PUT:
		if (wire_dec_put(b, n, PUT_LIMIT, &p) != 0)
			break;
		if (!inside(p.prefix, p.prefix_len, b, n) ||
		    !inside(p.env, p.env_len, b, n) ||
		    p.env_len != CODEC_ENV_HDR + p.v.len ||
		    p.prefix_len > WIRE_PREFIX_MAX)
			abort();
		memcpy(text, p.prefix, p.prefix_len);
		text[p.prefix_len] = '\0';
		p.v.prefix = text;
		if (c != NULL)
			cache_put(c, p.key, &p.v);
		break;
	case WIRE_GET_DIGEST:
	case WIRE_PUT_DIGEST:
		if ((op == WIRE_GET_DIGEST
			    ? wire_dec_get_digest(b, n, &d)
			    : wire_dec_put_digest(b, n, &d)) != 0)
			break;
		if (!inside(d.path, d.path_len, b, n) || d.path_len == 0 ||
		    d.path_len > WIRE_PATH_MAX)
			abort();
		memcpy(text, d.path, d.path_len);
		text[d.path_len] = '\0';
		if (c == NULL)
			break;
		if (op == WIRE_GET_DIGEST)
			(void)cache_get_digest(c, text, &d.st, dig);
		else
			cache_put_digest(c, text, &d.st, d.digest);
		break;
	default:
		break;
	}
}

/* A stream of requests, as a request thread reads it. */
static void
requests(const uint8_t *b, size_t n)
{
	struct wire_req_hdr h;

	while (n >= WIRE_REQ_HDR) {
		if (wire_dec_req_hdr(b, PUT_LIMIT, &h) != 0)
			return; /* the owner closes the connection */
		if (h.len > wire_req_cap(h.op, PUT_LIMIT))
			abort();
		b += WIRE_REQ_HDR;
		n -= WIRE_REQ_HDR;
		if (h.len > n)
			return; /* half a frame: the deadline ends it */
		serve(h.op, b, h.len);
		b += h.len;
		n -= h.len;
	}
}

/* One reply to op, as the client reads it. */
static void
reply(uint32_t op, const uint8_t *b, size_t n)
{
	static const uint8_t key[CACHE_KEY_LEN] = {7, 7, 7};
	struct wire_rep_hdr h;
	struct wire_hello_rep hr;
	struct wire_stats ws;
	struct cache_val v;
	uint8_t dig[32];

	if (n < WIRE_REP_HDR || wire_dec_rep_hdr(b, op, PUT_LIMIT, &h) != 0)
		return;
	if (h.status != 0) {
		if (h.len != 0 || h.status < -4095)
			abort(); /* an error has no body */
		return;
	}
	b += WIRE_REP_HDR;
	n -= WIRE_REP_HDR;
	if (h.len > n)
		return;
	switch (op) {
	case WIRE_HELLO:
		if (wire_dec_hello_rep(b, h.len, &hr) == 0 &&
		    (hr.version != WIRE_VERSION ||
			hr.put_limit > WIRE_PUT_LIMIT_MAX ||
			h.len != WIRE_HELLO_REP ||
			memcmp(hr.token, b + 24, WIRE_TOKEN_LEN) != 0))
			abort();
		break;
	case WIRE_GET:
		if (wire_dec_get_rep(b, h.len, key, &v) == 0 &&
		    (v.len + CODEC_ENV_HDR != h.len ||
			memcmp(b + 32, key, CACHE_KEY_LEN) != 0))
			abort();
		break;
	case WIRE_GET_DIGEST:
		(void)wire_dec_digest_rep(b, h.len, dig);
		break;
	case WIRE_STATS:
		if (wire_dec_stats_rep(b, h.len, &ws) == 0 &&
		    (strlen(ws.err) != h.len - WIRE_STATS_FIXED ||
			ws.admit_bytes != codec_get_le64(b + 116)))
			abort();
		break;
	default:
		break;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	if (data[0] & 1)
		reply(data[1] % 8, data + 2, size - 2);
	else
		requests(data + 1, size - 1);
	return 0;
}
