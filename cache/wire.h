/*
 * wire.h - cache/ (the store), layer wire (under srv.c and client.c; calls
 * codec.c only).  The frames of the shared cache's data socket,
 * dir/data.sock: one encoder and one decoder per message, the size cap of
 * each, and reading and sending a frame against a deadline.
 *
 * Every field is little-endian; every decoder takes untrusted bytes and
 * checks each field against what remains (a cursor, never a sum of
 * lengths from the wire), so a frame cannot make either end read past it
 * or allocate more than its op's cap.
 *
 *	request	 op u32, body length u32, the client's hits and misses
 *		 (2 x u64: the owner's mounts table), then the body
 *	reply	 status i32 (0 or -errno; a body only with 0), length u32
 *
 *	op		body					reply body
 *	HELLO		version u32, label (<= 255 bytes)	version u32,
 *								pid u32,
 *								put limit u64,
 *								size bound u64,
 *								token[16]
 *	GET		key[32]					one envelope
 *								(codec.h) of key
 *	PUT		prefix length u32 (<= 4096), prefix,	(none)
 *			one envelope (<= put limit payload)
 *	GET_DIGEST	stat (7 x u64), path (1..4095 bytes)	digest[32]
 *	PUT_DIGEST	stat, digest[32], path			(none)
 *	STATS		(empty)					7 x u64,
 *								disabled u32,
 *								8 x u64 (the
 *								admission's),
 *								error (<= 255)
 *	MOUNTS		(empty)					text (<= 1 MiB)
 *
 * A reply with status -ENOENT is a miss; -EIO on GET: a miss, the owner's
 * store is off (STATS says why).  -EBUSY, sent in place of a HELLO's
 * reply before the connection is closed: the owner is at its cap of
 * connections (it runs; the client waits for one of its own connections
 * or misses that request).  The HELLO's pid is the owner's own (in its
 * PID namespace: for the log), its token the one it wrote to
 * dir/owner.id when it took the lease (owner.c).  PUT and PUT_DIGEST have no
 *reply: the owner queues them and answers GETs first.
 */
#ifndef FEEDFS_WIRE_H
#define FEEDFS_WIRE_H

#include <sys/stat.h>
#include <sys/uio.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"

#define WIRE_VERSION 3
#define WIRE_REQ_HDR 24
#define WIRE_REP_HDR 8
#define WIRE_LABEL_MAX 255
#define WIRE_PREFIX_MAX 4096
#define WIRE_PATH_MAX 4095 /* PATH_MAX less its NUL */
#define WIRE_STAT_LEN 56
#define WIRE_TOKEN_LEN 16
#define WIRE_HELLO_REP 40
#define WIRE_STATS_FIXED 124
#define WIRE_ERR_MAX 255
#define WIRE_MOUNTS_MAX (1u << 20)
/* No owner announces a larger put limit (payload bytes of one value). */
#define WIRE_PUT_LIMIT_MAX (256u << 20)

enum wire_op {
	WIRE_HELLO = 1,
	WIRE_GET,
	WIRE_PUT,
	WIRE_GET_DIGEST,
	WIRE_PUT_DIGEST,
	WIRE_STATS,
	WIRE_MOUNTS,
};

struct wire_req_hdr {
	uint32_t op, len;
	uint64_t hits, misses;
};
struct wire_rep_hdr {
	int32_t status;
	uint32_t len;
};

/* What the decoders give; pointers point into the decoded bytes. */
struct wire_hello {
	uint32_t version;
	const char *label; /* label_len bytes, no NUL */
	size_t label_len;
};
struct wire_put {
	const char *prefix; /* prefix_len bytes, no NUL */
	size_t prefix_len;
	const uint8_t *key; /* the key the envelope names */
	const uint8_t *env; /* the envelope: env_len bytes, checked */
	size_t env_len;
	struct cache_val v; /* its shape; v.data = env + CODEC_ENV_HDR */
};
struct wire_digest_req {
	struct stat st;
	const uint8_t *digest; /* PUT_DIGEST only */
	const char *path;      /* path_len bytes, no NUL */
	size_t path_len;
};
struct wire_hello_rep {
	uint32_t version, pid;
	uint64_t put_limit, size_bound;
	uint8_t token[WIRE_TOKEN_LEN];
};
struct wire_stats {
	uint64_t hits, misses, bytes_read, bytes_written, insert_failures;
	uint64_t disk_bytes, dropped;
	uint32_t disabled;
	/* The owner's admission figures (cache_stats'). */
	uint64_t inserts, denied, evictions, refreshes, oversize;
	uint64_t entries, used_bytes, admit_bytes;
	char err[WIRE_ERR_MAX + 1]; /* NUL-terminated */
};

/*
 * The most body bytes a request of op may have (0 when op is unknown:
 * the caller treats that as malformed), given the owner's put limit.
 */
size_t wire_req_cap(uint32_t op, uint64_t put_limit);

/* ---- requests ---- */
void wire_enc_req_hdr(uint8_t b[WIRE_REQ_HDR], uint32_t op, uint32_t len,
    uint64_t hits, uint64_t misses);
/* A known op whose length is within its bounds: 0, else -EPROTO. */
int wire_dec_req_hdr(
    const uint8_t b[WIRE_REQ_HDR], uint64_t put_limit, struct wire_req_hdr *h);
int wire_dec_hello(const uint8_t *b, size_t n, struct wire_hello *out);
int wire_dec_get(const uint8_t *b, size_t n, const uint8_t **key);
/* A PUT whose envelope opens (codec_env_open, key from the envelope). */
int wire_dec_put(
    const uint8_t *b, size_t n, uint64_t put_limit, struct wire_put *out);
int wire_dec_get_digest(
    const uint8_t *b, size_t n, struct wire_digest_req *out);
int wire_dec_put_digest(
    const uint8_t *b, size_t n, struct wire_digest_req *out);

void wire_enc_stat(const struct stat *st, uint8_t b[WIRE_STAT_LEN]);

/* ---- replies ---- */
void wire_enc_rep_hdr(uint8_t b[WIRE_REP_HDR], int32_t status, uint32_t len);
/*
 * A reply header to a request of op: a status of 0 or -errno, no body
 * unless 0, a body within op's reply bounds (put_limit: the one the owner
 * announced, for a GET's envelope).  0 or -EPROTO.
 */
int wire_dec_rep_hdr(const uint8_t b[WIRE_REP_HDR], uint32_t op,
    uint64_t put_limit, struct wire_rep_hdr *h);
void wire_enc_hello_rep(
    uint8_t b[WIRE_HELLO_REP], const struct wire_hello_rep *h);
int wire_dec_hello_rep(const uint8_t *b, size_t n, struct wire_hello_rep *out);
/* A GET reply: one envelope of exactly key (codec_env_open). */
int wire_dec_get_rep(const uint8_t *b, size_t n,
    const uint8_t key[CACHE_KEY_LEN], struct cache_val *out);
int wire_dec_digest_rep(const uint8_t *b, size_t n, uint8_t digest[32]);
/* b: WIRE_STATS_FIXED bytes, the error text (at most 255) after them. */
void wire_enc_stats(uint8_t b[WIRE_STATS_FIXED], const struct wire_stats *s);
int wire_dec_stats_rep(const uint8_t *b, size_t n, struct wire_stats *out);

/* ---- transport ---- */
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t wire_now_ns(void);
/*
 * Read exactly len bytes from fd by deadline (CLOCK_MONOTONIC ns): 0,
 * -ETIMEDOUT, -ECONNRESET at end of file, or -errno.
 */
int wire_read(int fd, void *buf, size_t len, uint64_t deadline);
/* Send every iovec (modified) by deadline; never raises SIGPIPE. */
int wire_send(int fd, struct iovec *iov, int n, uint64_t deadline);
/* Room for a whole value in fd's socket buffers (best effort). */
void wire_set_bufs(int fd);

#endif
