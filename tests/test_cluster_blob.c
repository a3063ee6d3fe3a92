/*
 * test_cluster_blob - the cluster tier's finished batches (blobs,
 * claims, notes: cache/cluster_blob.h) against real memcached servers,
 * started here on free 127.0.0.1 ports and killed here by pid (also on
 * failure): round trips of 0 bytes to 40 chunks from buffers cut
 * anywhere; a destination of another length; a chunk changed, missing or
 * of another length; a head copied to another key; the MAC of a secret
 * (the same secret reads, another or none refuses, a blob without a MAC
 * is refused by a secret); claims (add, held, its holder, renewal,
 * expiry, drop; a holder's text planted with control bytes, a NUL or
 * too long comes back printable and bounded); notes (set, add, get of
 * many, bad names); a server stopped: errors within the client's
 * timeouts, never a hang.
 *
 * Exits 77 when /usr/bin/memcached is missing.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "cache/cluster.h"
#include "cache/cluster_blob.h"
#include "cache/cluster_blob_int.h"
#include "cache/cluster_int.h"
#include "tests/testlib.h"

#define MEMCACHED "/usr/bin/memcached"
#define CHUNK 4096 /* small chunks: many of them, quickly */

static pid_t srv_pid;
static int srv_port;
static char tmp[64];

static void
kill_server(void)
{
	if (srv_pid > 0) {
		kill(srv_pid, SIGKILL);
		waitpid(srv_pid, NULL, 0);
		srv_pid = 0;
	}
}

static void
on_signal(int sig)
{
	kill_server();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int
free_port(void)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	int fd, port;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd == -1 || bind(fd, (struct sockaddr *)&a, sizeof(a)) == -1 ||
	    getsockname(fd, (struct sockaddr *)&a, &alen) == -1) {
		perror("free_port");
		exit(1);
	}
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static bool
accepts(int port)
{
	struct sockaddr_in a;
	int fd, ok;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons(port);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return false;
	ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

static void
start_server(void)
{
	char port[16], log[128];
	const char *argv[16];
	int n = 0, fd;
	pid_t pid;

	snprintf(port, sizeof(port), "%d", srv_port);
	argv[n++] = MEMCACHED;
	argv[n++] = "-p";
	argv[n++] = port;
	argv[n++] = "-l";
	argv[n++] = "127.0.0.1";
	argv[n++] = "-U";
	argv[n++] = "0";
	argv[n++] = "-m";
	argv[n++] = "64";
	if (geteuid() == 0) {
		argv[n++] = "-u";
		argv[n++] = "root";
	}
	argv[n] = NULL;
	snprintf(log, sizeof(log), "%s/memcached.log", tmp);
	if ((pid = fork()) == -1) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		if ((fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644)) !=
		    -1) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(MEMCACHED, (char *const *)argv);
		_exit(127);
	}
	srv_pid = pid;
	for (int t = 0; t < 500; t++) {
		if (accepts(srv_port))
			return;
		usleep(10000);
	}
	fprintf(stderr, "memcached did not start (see %s)\n", log);
	kill_server();
	exit(1);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
key_of(int i, uint8_t key[CLUSTER_KEY_LEN])
{
	for (int j = 0; j < CLUSTER_KEY_LEN; j++)
		key[j] = (uint8_t)(i * 31 + j * 7 + 1);
}

/* A client of the server with CHUNK-byte chunks (secret: a file, or NULL). */
static struct cluster *
client(const char *secret)
{
	struct cluster_opts o = {.chunk = CHUNK, .secret_file = secret};
	struct cluster *c = NULL;
	char servers[64], err[256];

	snprintf(servers, sizeof(servers), "127.0.0.1:%d", srv_port);
	if (cluster_open(servers, &o, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "cluster_open: %s\n", err);
		exit(1);
	}
	return c;
}

/* A raw libmemcached handle on the server, to damage items. */
static memcached_st *
raw_client(void)
{
	memcached_st *m = memcached_create(NULL);

	memcached_behavior_set(m, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
	memcached_server_add(m, "127.0.0.1", (in_port_t)srv_port);
	return m;
}

static void
fill(uint8_t *p, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + (size_t)seed * 7 + (i >> 9));
}

/* Round trips of sizes around the chunk, from and into cut buffers. */
static void
test_round_trips(struct cluster *c)
{
	static const size_t sizes[] = {0, 1, CHUNK - 1, CHUNK, CHUNK + 1,
	    3 * CHUNK + 17, 40 * CHUNK};
	uint8_t key[CLUSTER_KEY_LEN];

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k], cut = n / 3, cut2 = n - n / 5;
		uint8_t *src = malloc(n + 1), *dst = malloc(n + 1);
		struct iovec in[3] = {{src, cut}, {src + cut, cut2 - cut},
		    {src + cut2, n - cut2}};
		struct iovec out[2] = {{dst, n / 2}, {dst + n / 2, n - n / 2}};

		fill(src, n, (int)k);
		memset(dst, 0xee, n + 1);
		key_of((int)k, key);
		CHECK_EQ_INT(cluster_blob_has(c, key), 0);
		CHECK_EQ_INT(cluster_blob_get(c, key, out, 2), -ENOENT);
		CHECK_EQ_INT(cluster_blob_put(c, key, in, 3, 60), 0);
		CHECK_EQ_INT(cluster_blob_has(c, key), 1);
		CHECK_EQ_INT(cluster_blob_get(c, key, out, 2), 0);
		CHECK(n == 0 || memcmp(src, dst, n) == 0);
		CHECK(dst[n] == 0xee);
		/* Another length than stored: refused. */
		if (n > 0) {
			struct iovec shorter = {dst, n - 1};

			CHECK_EQ_INT(
			    cluster_blob_get(c, key, &shorter, 1), -EBADMSG);
		}
		free(src);
		free(dst);
	}
}

/* Damage: a chunk changed, of another length, missing; a head moved. */
static void
test_damage(struct cluster *c)
{
	size_t n = 5 * CHUNK + 100;
	uint8_t key[CLUSTER_KEY_LEN], other[CLUSTER_KEY_LEN];
	uint8_t *src = malloc(n), *dst = malloc(n);
	struct iovec in = {src, n}, out = {dst, n};
	char k[CLUSTER_BLOB_MKEY_MAX], k2[CLUSTER_BLOB_MKEY_MAX];
	memcached_st *m = raw_client();
	memcached_return_t rc;
	size_t vlen, klen;
	uint32_t flags;
	char *v;

	fill(src, n, 9);
	key_of(100, key);
	key_of(101, other);
	CHECK_EQ_INT(cluster_blob_put(c, key, &in, 1, 60), 0);
	/* One byte of chunk 2 flipped. */
	klen = cluster_blob_mkey(k, "ffb1:", key, 2, false);
	v = memcached_get(m, k, klen, &vlen, &flags, &rc);
	CHECK(v != NULL && vlen == CHUNK);
	if (v != NULL) {
		v[10] ^= 1;
		memcached_set(m, k, klen, v, vlen, 0, 0);
		CHECK_EQ_INT(cluster_blob_get(c, key, &out, 1), -EBADMSG);
		v[10] ^= 1;
		memcached_set(m, k, klen, v, vlen - 1, 0, 0);
		CHECK_EQ_INT(cluster_blob_get(c, key, &out, 1), -EBADMSG);
		memcached_set(m, k, klen, v, vlen, 0, 0);
		CHECK_EQ_INT(cluster_blob_get(c, key, &out, 1), 0);
		free(v);
	}
	/* A chunk gone (evicted): a miss. */
	klen = cluster_blob_mkey(k, "ffb1:", key, 6, false);
	memcached_delete(m, k, klen, 0);
	CHECK_EQ_INT(cluster_blob_get(c, key, &out, 1), -ENOENT);
	/* Another key's head (and chunks) under this key: refused. */
	CHECK_EQ_INT(cluster_blob_put(c, other, &in, 1, 60), 0);
	klen = cluster_blob_mkey(k, "ffb1:", other, 0, false);
	v = memcached_get(m, k, klen, &vlen, &flags, &rc);
	CHECK(v != NULL);
	if (v != NULL) {
		for (uint32_t i = 1; i <= 6; i++) {
			char *cv;
			size_t cl;

			cluster_blob_mkey(k2, "ffb1:", other, i, false);
			cv = memcached_get(
			    m, k2, strlen(k2), &cl, &flags, &rc);
			cluster_blob_mkey(k2, "ffb1:", key, i, false);
			if (cv != NULL)
				memcached_set(m, k2, strlen(k2), cv, cl, 0, 0);
			free(cv);
		}
		cluster_blob_mkey(k2, "ffb1:", key, 0, false);
		memcached_set(m, k2, strlen(k2), v, vlen, 0, 0);
		CHECK_EQ_INT(cluster_blob_get(c, key, &out, 1), -EBADMSG);
		free(v);
	}
	memcached_free(m);
	free(src);
	free(dst);
}

/* Copy the items of key's blob from namespace from to namespace to. */
static void
copy_blob(const char *from, const char *to, const uint8_t *key, uint32_t n)
{
	memcached_st *m = raw_client();
	char k1[CLUSTER_BLOB_MKEY_MAX], k2[CLUSTER_BLOB_MKEY_MAX];
	memcached_return_t rc;
	uint32_t flags;
	size_t len;
	char *v;

	for (uint32_t i = 0; i <= n; i++) {
		cluster_blob_mkey(k1, from, key, i, false);
		cluster_blob_mkey(k2, to, key, i, false);
		if ((v = memcached_get(m, k1, strlen(k1), &len, &flags, &rc)) !=
		    NULL)
			memcached_set(m, k2, strlen(k2), v, len, 0, 0);
		free(v);
	}
	memcached_free(m);
}

/*
 * A secret's MAC: the same secret reads; another secret, or none, sees
 * nothing (another namespace); in the secret's namespace, a blob without
 * a MAC or with a wrong one is refused.
 */
static void
test_secret(struct cluster *plain)
{
	char s1[128], s2[128];
	struct cluster *a, *b, *a2;
	size_t n = 3 * CHUNK + 5;
	uint8_t key[CLUSTER_KEY_LEN], key2[CLUSTER_KEY_LEN];
	uint8_t *src = malloc(n), *dst = malloc(n);
	struct iovec in = {src, n}, out = {dst, n};
	char nsa[64], nsb[64];
	FILE *fp;

	snprintf(s1, sizeof(s1), "%s/secret1", tmp);
	snprintf(s2, sizeof(s2), "%s/secret2", tmp);
	if ((fp = fopen(s1, "w")) != NULL) {
		fputs("0123456789abcdef0123456789abcdef\n", fp);
		fclose(fp);
	}
	if ((fp = fopen(s2, "w")) != NULL) {
		fputs("fedcba9876543210fedcba9876543210\n", fp);
		fclose(fp);
	}
	chmod(s1, 0600);
	chmod(s2, 0600);
	a = client(s1);
	a2 = client(s1);
	b = client(s2);
	fill(src, n, 3);
	key_of(200, key);
	key_of(201, key2);
	CHECK_EQ_INT(cluster_blob_put(a, key, &in, 1, 60), 0);
	CHECK_EQ_INT(cluster_blob_get(a2, key, &out, 1), 0);
	CHECK(memcmp(src, dst, n) == 0);
	CHECK_EQ_INT(cluster_blob_get(b, key, &out, 1), -ENOENT);
	CHECK_EQ_INT(cluster_blob_get(plain, key, &out, 1), -ENOENT);
	snprintf(nsa, sizeof(nsa), "ffb1:%s", a->ns + strlen("ffc2:"));
	snprintf(nsb, sizeof(nsb), "ffb1:%s", b->ns + strlen("ffc2:"));
	CHECK(strcmp(nsa, nsb) != 0 && strcmp(nsa, "ffb1:") != 0);
	/* Another secret's blob, or one without a MAC, put in its place. */
	CHECK_EQ_INT(cluster_blob_put(b, key2, &in, 1, 60), 0);
	copy_blob(nsb, nsa, key2, 4);
	CHECK_EQ_INT(cluster_blob_get(a, key2, &out, 1), -EACCES);
	CHECK_EQ_INT(cluster_blob_put(plain, key2, &in, 1, 60), 0);
	copy_blob("ffb1:", nsa, key2, 4);
	CHECK_EQ_INT(cluster_blob_get(a, key2, &out, 1), -EACCES);
	/* And the MAC'd blob of a, in the plain namespace: not for plain. */
	copy_blob(nsa, "ffb1:", key, 4);
	CHECK_EQ_INT(cluster_blob_get(plain, key, &out, 1), -EACCES);
	cluster_close(a);
	cluster_close(a2);
	cluster_close(b);
	free(src);
	free(dst);
}

/* Claims: one holder at a time, renewed, expired, dropped. */
/*
 * A claim's holder as whoever can write to the server left it: control
 * bytes, a NUL, more than CLUSTER_WHO_MAX bytes.  The holder's text comes
 * back printable, cut at the NUL, within its bound.
 */
static void
test_claim_text(struct cluster *c)
{
	static const char planted[] = "worker\n\x1b[2J\xff\0hidden";
	memcached_st *m = raw_client();
	char ck[CLUSTER_BLOB_MKEY_MAX], who[CLUSTER_WHO_MAX + 1];
	char big[3 * CLUSTER_WHO_MAX];
	uint8_t key[CLUSTER_KEY_LEN];

	key_of(301, key);
	cluster_blob_mkey(ck, CLUSTER_BLOB_PREFIX, key, 0, true);
	CHECK(memcached_set(m, ck, strlen(ck), planted, sizeof(planted) - 1, 5,
		  0) == MEMCACHED_SUCCESS);
	CHECK_EQ_INT(cluster_claim_held(c, key, who), 1);
	CHECK_EQ_STR(who, "worker??[2J?");
	memset(big, 'w', sizeof(big));
	CHECK(memcached_set(m, ck, strlen(ck), big, sizeof(big), 5, 0) ==
	      MEMCACHED_SUCCESS);
	CHECK_EQ_INT(cluster_claim_held(c, key, who), 1);
	CHECK_EQ_INT((int)strlen(who), CLUSTER_WHO_MAX);
	/* A claim of nothing is held by nobody named. */
	CHECK(
	    memcached_set(m, ck, strlen(ck), "", 0, 5, 0) == MEMCACHED_SUCCESS);
	CHECK_EQ_INT(cluster_claim_held(c, key, who), 1);
	CHECK_EQ_STR(who, "");
	memcached_free(m);
}

static void
test_claims(struct cluster *c)
{
	uint8_t key[CLUSTER_KEY_LEN];
	char who[CLUSTER_WHO_MAX + 1];
	double t0;
	int r;

	key_of(300, key);
	CHECK_EQ_INT(cluster_claim_held(c, key, who), 0);
	CHECK_EQ_INT(cluster_claim(c, key, "worker a", 2), 0);
	CHECK_EQ_INT(cluster_claim(c, key, "worker b", 2), -EEXIST);
	CHECK_EQ_INT(cluster_claim_held(c, key, who), 1);
	CHECK_EQ_STR(who, "worker a");
	CHECK_EQ_INT(cluster_claim_renew(c, key, "worker a", 3), 0);
	CHECK_EQ_INT(cluster_claim_drop(c, key), 0);
	CHECK_EQ_INT(cluster_claim_drop(c, key), 0);
	CHECK_EQ_INT(cluster_claim(c, key, "worker b", 1), 0);
	CHECK_EQ_INT(cluster_claim(c, key, "worker a", 1), -EEXIST);
	/* Its holder gone, the claim expires by itself within seconds. */
	t0 = now();
	while ((r = cluster_claim(c, key, "worker c", 5)) == -EEXIST &&
	       now() - t0 < 10)
		usleep(100000);
	CHECK_EQ_INT(r, 0);
	CHECK(now() - t0 < 3.5);
	CHECK_EQ_INT(cluster_claim(c, key, "x", 0), -EINVAL);
	test_claim_text(c);
}

struct got {
	int n;
	char seen[8][32];
};

static void
found(void *arg, size_t i, const uint8_t *v, size_t len)
{
	struct got *g = arg;

	if (i < 8 && len < 32) {
		memcpy(g->seen[i], v, len);
		g->seen[i][len] = '\0';
	}
	g->n++;
}

static void
test_notes(struct cluster *c)
{
	const char *names[4] = {"p/abc/0", "p/abc/1", "p/abc/2", "p/abc/3"};
	const char *bad[1] = {"p/a b"};
	struct got g = {0};
	char big[CLUSTER_NOTE_MAX + 1];

	CHECK_EQ_INT(cluster_note_set(c, names[0], "zero", 4, 60), 0);
	CHECK_EQ_INT(cluster_note_add(c, names[2], "two", 3, 60), 0);
	CHECK_EQ_INT(cluster_note_add(c, names[2], "TWO", 3, 60), -EEXIST);
	CHECK_EQ_INT(cluster_note_get(c, names, 4, found, &g), 2);
	CHECK_EQ_INT(g.n, 2);
	CHECK_EQ_STR(g.seen[0], "zero");
	CHECK_EQ_STR(g.seen[2], "two");
	CHECK_EQ_INT(cluster_note_set(c, bad[0], "x", 1, 60), -EINVAL);
	CHECK_EQ_INT(cluster_note_get(c, bad, 1, found, &g), -EINVAL);
	memset(big, 'x', sizeof(big));
	CHECK_EQ_INT(cluster_note_set(c, names[1], big, sizeof(big), 60),
	    -EINVAL);
}

/* The server stopped: every call an error, each within the timeouts. */
static void
test_down(struct cluster *c)
{
	uint8_t key[CLUSTER_KEY_LEN], buf[100];
	struct iovec io = {buf, sizeof(buf)};
	struct got g = {0};
	const char *name = "p/x/0";
	double t0;

	key_of(400, key);
	kill_server();
	t0 = now();
	CHECK_EQ_INT(cluster_blob_put(c, key, &io, 1, 60), -EIO);
	CHECK_EQ_INT(cluster_blob_get(c, key, &io, 1), -EIO);
	CHECK(cluster_blob_has(c, key) < 0);
	CHECK(cluster_claim(c, key, "w", 5) < 0);
	CHECK(cluster_note_get(c, &name, 1, found, &g) < 0);
	CHECK(now() - t0 < 10); /* a bound on a hang only */
	/* Back (empty): the client comes back to it. */
	start_server();
	t0 = now();
	while (cluster_blob_put(c, key, &io, 1, 60) != 0 && now() - t0 < 20)
		usleep(200000);
	CHECK_EQ_INT(cluster_blob_get(c, key, &io, 1), 0);
}

int
main(void)
{
	struct cluster *c;

	if (access(MEMCACHED, X_OK) != 0) {
		printf("SKIP: %s is missing\n", MEMCACHED);
		return 77;
	}
	snprintf(tmp, sizeof(tmp), "/tmp/test_cluster_blob.XXXXXX");
	if (mkdtemp(tmp) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	srv_port = free_port();
	start_server();
	c = client(NULL);
	test_round_trips(c);
	test_damage(c);
	test_secret(c);
	test_claims(c);
	test_notes(c);
	test_down(c);
	cluster_close(c);
	kill_server();
	test_rmtree(tmp);
	return TEST_SUMMARY();
}
