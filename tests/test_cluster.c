/*
 * test_cluster - the cluster tier against real memcached servers, started
 * here on free 127.0.0.1 ports and killed here (by pid, also on failure):
 * the server list syntax, no server up at all, small and chunked round
 * trips, values of 1 to 64 chunks, the spread over three servers, damaged
 * and missing chunks, forged heads (bounded memory), items copied to
 * another key's names, pool waits apart from server errors, a server
 * killed with -9 under load and brought back, values over the bound, the
 * auth and secret files' checks (mode, owner, FIFO, symlink, size), the
 * MAC of cluster_secret, and SASL against `memcached -S`.
 *
 * Exits 77 when /usr/bin/memcached is missing.
 */
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "cache/cluster.h"
#include "cache/cluster_int.h"
#include "cache/format.h"
#include "tests/testlib.h"

#define MEMCACHED "/usr/bin/memcached"
#define SASLPASSWD "/usr/sbin/saslpasswd2"
#define NSRV 5 /* three for the cluster, one for SASL, one to stop */
#define NSMALL 300

static pid_t srv_pid[NSRV];
static int srv_port[NSRV];
static char tmp[64];

/* ---- servers ----------------------------------------------------------- */

static void
kill_servers(void)
{
	int i;

	for (i = 0; i < NSRV; i++)
		if (srv_pid[i] > 0) {
			kill(srv_pid[i], SIGKILL);
			waitpid(srv_pid[i], NULL, 0);
			srv_pid[i] = 0;
		}
}

static void
on_signal(int sig)
{
	kill_servers();
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

/* Start server i on its port (sasl_dir: with -S and that SASL_CONF_PATH). */
static void
start_server(int i, const char *sasl_dir)
{
	char port[16], log[128];
	const char *argv[20];
	int n = 0, fd, t;
	pid_t pid;

	snprintf(port, sizeof(port), "%d", srv_port[i]);
	argv[n++] = MEMCACHED;
	argv[n++] = "-p";
	argv[n++] = port;
	argv[n++] = "-l";
	argv[n++] = "127.0.0.1";
	argv[n++] = "-U";
	argv[n++] = "0";
	argv[n++] = "-m";
	argv[n++] = "256";
	argv[n++] = "-t";
	argv[n++] = "2";
	if (geteuid() == 0) {
		argv[n++] = "-u";
		argv[n++] = "root";
	}
	if (sasl_dir != NULL)
		argv[n++] = "-S";
	argv[n] = NULL;
	snprintf(log, sizeof(log), "%s/memcached-%d.log", tmp, i);
	if ((pid = fork()) == -1) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		if (sasl_dir != NULL)
			setenv("SASL_CONF_PATH", sasl_dir, 1);
		if ((fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644)) !=
		    -1) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(MEMCACHED, (char *const *)argv);
		_exit(127);
	}
	srv_pid[i] = pid;
	for (t = 0; t < 500; t++) {
		if (accepts(srv_port[i]))
			return;
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			srv_pid[i] = 0;
			break;
		}
		usleep(10000);
	}
	fprintf(stderr, "memcached on port %d did not start (see %s)\n",
	    srv_port[i], log);
	kill_servers();
	exit(1);
}

static void
stop_server(int i)
{
	kill(srv_pid[i], SIGKILL);
	waitpid(srv_pid[i], NULL, 0);
	srv_pid[i] = 0;
}

/* ---- helpers ----------------------------------------------------------- */

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
	uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
	int j;

	for (j = 0; j < CLUSTER_KEY_LEN; j++) {
		x ^= x >> 29;
		x *= 0xbf58476d1ce4e5b9ull;
		key[j] = (uint8_t)(x >> 56);
	}
}

/* len bytes that depend on i. */
static uint8_t *
val_of(int i, size_t len)
{
	uint8_t *v = malloc(len ? len : 1);
	size_t j;

	for (j = 0; j < len; j++)
		v[j] = (uint8_t)(j * 31 + i * 7 + (j >> 12));
	return v;
}

/*
 * A value's shape: w x h x 1 uint8 with w * h == len (w, h <= 65535, as
 * the envelope requires); false when len has no such factors.
 */
static bool
shape_of(size_t len, uint32_t *w, uint32_t *h)
{
	size_t x;

	for (x = len < 65535 ? len : 65535; x > 0; x--)
		if (len % x == 0 && len / x <= 65535) {
			*w = (uint32_t)x;
			*h = (uint32_t)(len / x);
			return true;
		}
	return false;
}

/* The first length from len up that shape_of takes. */
static size_t
fit_len(size_t len)
{
	uint32_t w, h;

	while (!shape_of(len, &w, &h))
		len++;
	return len;
}

static size_t
small_len(int i)
{
	return fit_len(1 + (size_t)(i * 997) % 120000);
}

/*
 * The namespace of the items the helpers below name: a client's without a
 * secret, unless a test sets another client's (its ns) for a while.
 */
static const char *ns = "ffc2:";

/* The memcached key of key (chunk 0: the head), as cluster.c makes it. */
static size_t
mkey(char *buf, size_t len, const uint8_t key[CLUSTER_KEY_LEN], int chunk)
{
	size_t n;
	int j;

	n = (size_t)snprintf(buf, len, "%s", ns);
	for (j = 0; j < CLUSTER_KEY_LEN; j++)
		n += (size_t)snprintf(buf + n, len - n, "%02x", key[j]);
	if (chunk > 0)
		n += (size_t)snprintf(buf + n, len - n, "#%d", chunk);
	return n;
}

/* A plain client of server i alone. */
static memcached_st *
direct(int i)
{
	memcached_st *m = memcached_create(NULL);

	memcached_behavior_set(m, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
	memcached_server_add(m, "127.0.0.1", srv_port[i]);
	return m;
}

static bool
has_key(memcached_st *m, const uint8_t key[CLUSTER_KEY_LEN], int chunk)
{
	char k[128];
	size_t n = mkey(k, sizeof(k), key, chunk);

	return memcached_exist(m, k, n) == MEMCACHED_SUCCESS;
}

static char *
servers_of(int a, int b, int c)
{
	static char s[128];

	snprintf(s, sizeof(s), "127.0.0.1:%d,127.0.0.1:%d, 127.0.0.1:%d",
	    srv_port[a], srv_port[b], srv_port[c]);
	return s;
}

/*
 * get key i and compare with val_of(i, len) of put_of's shape: 1 hit, 0
 * miss (*rp, when not NULL, cluster_get's return), -1 wrong.
 */
static int
get_check_r(struct cluster *c, int i, size_t len, double *secs, int *rp)
{
	uint8_t key[CLUSTER_KEY_LEN], *want;
	struct cache_val v = {0};
	uint32_t w = 0, h = 0;
	double t0 = now();
	int r, ok;

	key_of(i, key);
	r = cluster_get(c, key, &v);
	if (secs != NULL)
		*secs = now() - t0;
	if (rp != NULL)
		*rp = r;
	if (r != 0) {
		if (r != -ENOENT && r != -EIO && r != -EBADMSG &&
		    r != -EACCES && r != -EBUSY)
			return -1;
		return 0;
	}
	want = val_of(i, len);
	shape_of(len, &w, &h);
	ok = v.len == len && v.w == w && v.h == h && v.c == 1 && v.dtype == 0 &&
	     v.enc == 0 && memcmp(v.data, want, len) == 0;
	free(want);
	free(v.data);
	return ok ? 1 : -1;
}

static int
get_check(struct cluster *c, int i, size_t len, double *secs)
{
	return get_check_r(c, i, len, secs, NULL);
}

/* Store val_of(i, len) under key i, shaped w x h x 1 (shape_of). */
static int
put_of(struct cluster *c, int i, size_t len)
{
	uint8_t key[CLUSTER_KEY_LEN], *d = val_of(i, len);
	struct cache_val v = {.c = 1, .data = d, .len = len};
	int r;

	if (!shape_of(len, &v.w, &v.h)) {
		fprintf(stderr, "put_of: no shape for %zu bytes\n", len);
		free(d);
		return -EINVAL;
	}
	key_of(i, key);
	r = cluster_put(c, key, &v);
	free(d);
	return r;
}

static int
write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f;

	unlink(path);
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	fputs(text, f);
	fclose(f);
	return chmod(path, mode);
}

/* Open a client of servers with o; NULL (and a failed CHECK) on failure. */
static struct cluster *
open_with(const char *servers, const struct cluster_opts *o)
{
	struct cluster *c = NULL;
	char err[256];
	int r;

	r = cluster_open(servers, o, &c, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	if (r != 0)
		fprintf(stderr, "cluster_open: %s\n", err);
	return c;
}

/* ---- tests ------------------------------------------------------------- */

static void
test_syntax(void)
{
	static const char *good[] = {"h:1", "a.b-c_d:11211",
	    "10.0.0.1:11211,10.0.0.2:11211", "a:1 , b:2", "[::1]:11211",
	    "[fe80::1]:1,h:65535"};
	static const char *bad[] = {"", "h", "h:", ":11211", "h:0", "h:65536",
	    "h:12x", "h:-1", "a:1,,b:2", "a:1,", "a b:1", "[::1]", "[::1]11211",
	    "[zz]:1", "a:1,a:1", "h:1:2"};
	char err[256];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		err[0] = '\0';
		if (cluster_check_servers(good[i], err, sizeof(err)) != 0)
			fprintf(stderr, "\"%s\": %s\n", good[i], err);
		CHECK_EQ_INT(
		    cluster_check_servers(good[i], err, sizeof(err)), 0);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CHECK_EQ_INT(
		    cluster_check_servers(bad[i], err, sizeof(err)), -EINVAL);
		CHECK(err[0] != '\0');
	}
	cluster_check_servers("a:1,b", err, sizeof(err));
	CHECK(strstr(err, "server 2") != NULL);
	CHECK(cluster_check_servers(NULL, err, sizeof(err)) == -EINVAL);
}

/* No server up: open works, gets miss and puts drop, all fast. */
static void
test_none_up(void)
{
	struct cluster *c = NULL;
	struct cluster_stats st;
	char err[256], msg[256];
	double t, worst = 0;
	int i, r;

	r = cluster_open(servers_of(0, 1, 2), NULL, &c, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	if (r != 0) {
		fprintf(stderr, "cluster_open: %s\n", err);
		return;
	}
	CHECK_EQ_INT(cluster_chunk_size(c), 1024 * 1024 - 1024);
	CHECK(!cluster_error_once(c, msg, sizeof(msg)));
	for (i = 0; i < 20; i++) {
		CHECK_EQ_INT(get_check(c, i, 10, &t), 0);
		if (t > worst)
			worst = t;
		t = now();
		CHECK(put_of(c, i, 1000) != 0);
		t = now() - t;
		if (t > worst)
			worst = t;
	}
	CHECK(worst < 1.0);
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.hits, 0);
	CHECK_EQ_INT(st.misses, 20);
	CHECK(st.errors > 0);
	CHECK(st.put_errors > 0);
	CHECK(cluster_error_once(c, msg, sizeof(msg)));
	CHECK(msg[0] != '\0');
	CHECK(!cluster_error_once(c, msg, sizeof(msg)));
	fprintf(stderr, "none up: worst call %.3f s; logged once: %s\n", worst,
	    msg);
	cluster_close(c);
}

static void
test_round_trips(struct cluster *c)
{
	struct cluster_stats st0, st;
	int i, hits = 0, wrong = 0, r;

	cluster_get_stats(c, &st0);
	for (i = 0; i < NSMALL; i++)
		CHECK_EQ_INT(put_of(c, i, small_len(i)), 0);
	for (i = 0; i < NSMALL; i++) {
		r = get_check(c, i, small_len(i), NULL);
		hits += r == 1;
		wrong += r == -1;
	}
	CHECK_EQ_INT(hits, NSMALL);
	CHECK_EQ_INT(wrong, 0);
	/* never stored */
	CHECK_EQ_INT(get_check(c, 100000, 10, NULL), 0);
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.hits - st0.hits, NSMALL);
	CHECK_EQ_INT(st.misses - st0.misses, 1);
	CHECK_EQ_INT(st.errors, 0);
	CHECK_EQ_INT(st.puts - st0.puts, NSMALL);
	CHECK(st.bytes_in == st.bytes_out);
}

/* Every server holds a share of the keys, each key exactly one server. */
static void
test_spread(void)
{
	uint8_t key[CLUSTER_KEY_LEN];
	memcached_st *m[3];
	int count[3] = {0, 0, 0}, i, j, n, once = 0;

	for (j = 0; j < 3; j++)
		m[j] = direct(j);
	for (i = 0; i < NSMALL; i++) {
		key_of(i, key);
		for (n = 0, j = 0; j < 3; j++)
			if (has_key(m[j], key, 0)) {
				count[j]++;
				n++;
			}
		once += n == 1;
	}
	fprintf(stderr, "spread of %d keys: %d %d %d\n", NSMALL, count[0],
	    count[1], count[2]);
	CHECK_EQ_INT(once, NSMALL);
	for (j = 0; j < 3; j++) {
		CHECK(count[j] >= NSMALL / 10);
		memcached_free(m[j]);
	}
}

/* Which of servers 0..2 holds key's head, or -1. */
static int
holder(const uint8_t key[CLUSTER_KEY_LEN])
{
	memcached_st *m;
	int j, h = -1;

	for (j = 0; j < 3; j++) {
		m = direct(j);
		if (has_key(m, key, 0))
			h = j;
		memcached_free(m);
	}
	return h;
}

static void
test_chunked(struct cluster *c)
{
	const size_t big = fit_len(3 * 1024 * 1024 + 12345);
	uint8_t key[CLUSTER_KEY_LEN], *v;
	struct cluster_stats st0, st;
	memcached_st *m;
	char k[128];
	size_t n;
	int h, j, r;

	key_of(5000, key);
	CHECK_EQ_INT(put_of(c, 5000, big), 0);
	CHECK_EQ_INT(get_check(c, 5000, big, NULL), 1);

	/* the head and its 4 chunks on one server */
	h = holder(key);
	CHECK(h >= 0);
	if (h < 0)
		return;
	m = direct(h);
	for (j = 1; j <= 4; j++)
		CHECK(has_key(m, key, j));
	CHECK(!has_key(m, key, 5));

	/* a damaged chunk: same length, other bytes */
	cluster_get_stats(c, &st0);
	v = val_of(1, cluster_chunk_size(c));
	n = mkey(k, sizeof(k), key, 2);
	CHECK(memcached_set(m, k, n, (char *)v, cluster_chunk_size(c), 0, 0) ==
	      MEMCACHED_SUCCESS);
	free(v);
	CHECK_EQ_INT(get_check(c, 5000, big, NULL), 0);
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.bad_checksum - st0.bad_checksum, 1);
	CHECK_EQ_INT(st.misses - st0.misses, 1);

	/* a chunk of the wrong length */
	CHECK(memcached_set(m, k, n, "short", 5, 0, 0) == MEMCACHED_SUCCESS);
	CHECK_EQ_INT(get_check(c, 5000, big, NULL), 0);
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.bad_checksum - st0.bad_checksum, 2);

	/* put again, then lose a chunk */
	CHECK_EQ_INT(put_of(c, 5000, big), 0);
	CHECK_EQ_INT(get_check(c, 5000, big, NULL), 1);
	n = mkey(k, sizeof(k), key, 3);
	CHECK(memcached_delete(m, k, n, 0) == MEMCACHED_SUCCESS);
	{
		struct cache_val got;

		r = cluster_get(c, key, &got);
		CHECK_EQ_INT(r, -ENOENT);
	}
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.missing_chunks - st0.missing_chunks, 1);

	/* a damaged head */
	n = mkey(k, sizeof(k), key, 0);
	CHECK(memcached_set(m, k, n, "FFCLgarbage", 11, 0, 0) ==
	      MEMCACHED_SUCCESS);
	CHECK_EQ_INT(get_check(c, 5000, big, NULL), 0);
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.bad_checksum - st0.bad_checksum, 3);
	CHECK_EQ_INT(st.errors, 0);
	memcached_free(m);

	/* the most inline, one byte more, one chunk's worth and more */
	n = cluster_chunk_size(c) - CLUSTER_HEAD_LEN;
	CHECK_EQ_INT(put_of(c, 5001, n), 0);
	CHECK_EQ_INT(get_check(c, 5001, n, NULL), 1);
	CHECK_EQ_INT(put_of(c, 5002, n + 1), 0);
	CHECK_EQ_INT(get_check(c, 5002, n + 1, NULL), 1);
	n = cluster_chunk_size(c);
	CHECK_EQ_INT(put_of(c, 5003, n), 0);
	CHECK_EQ_INT(get_check(c, 5003, n, NULL), 1);
	n = fit_len(n + 1);
	CHECK_EQ_INT(put_of(c, 5004, n), 0);
	CHECK_EQ_INT(get_check(c, 5004, n, NULL), 1);
	CHECK_EQ_INT(put_of(c, 5005, 1), 0);
	CHECK_EQ_INT(get_check(c, 5005, 1, NULL), 1);
}

static void
test_too_large(struct cluster *c)
{
	struct cluster_stats st;
	uint8_t key[CLUSTER_KEY_LEN], *v;

	key_of(6000, key);
	v = calloc(1, CLUSTER_MAX_VALUE + 1);
	{
		struct cache_val cv = {.w = 65535,
		    .h = 1025,
		    .c = 1,
		    .data = v,
		    .len = CLUSTER_MAX_VALUE + 1};

		CHECK_EQ_INT(cluster_put(c, key, &cv), -EFBIG);
	}
	free(v);
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.skipped_large, 1);
}

static void
test_latency(struct cluster *c)
{
	const size_t len = 270 * 1024;
	uint8_t key[CLUSTER_KEY_LEN], *v = val_of(7, len);
	struct cache_val cv = {.w = 512,
			     .h = 540,
			     .c = 1,
			     .data = v,
			     .len = len},
			 got;
	double t0, tput, tget;
	int i, n = 100, ok = 0;

	t0 = now();
	for (i = 0; i < n; i++) {
		key_of(7000 + i, key);
		ok += cluster_put(c, key, &cv) == 0;
	}
	tput = (now() - t0) / n;
	t0 = now();
	for (i = 0; i < n; i++) {
		key_of(7000 + i, key);
		if (cluster_get(c, key, &got) == 0) {
			ok += got.len == len && memcmp(got.data, v, len) == 0;
			free(got.data);
		}
	}
	tget = (now() - t0) / n;
	CHECK_EQ_INT(ok, 2 * n);
	fprintf(stderr,
	    "270 KiB value on loopback: put %.0f us, get %.0f us (%.0f MB/s)\n",
	    tput * 1e6, tget * 1e6, len / tget / 1e6);
	free(v);
}

/* Readers and writers while a server dies. */
struct load {
	struct cluster *c;
	int id;
	atomic_bool *stop;
	double worst;
	int hits, misses, wrong, calls;
};

static void *
load_run(void *arg)
{
	struct load *ld = arg;
	double t;
	int i = 0, r;

	while (!atomic_load(ld->stop)) {
		int k = (i * 7 + ld->id * 13) % NSMALL;

		r = get_check(ld->c, k, small_len(k), &t);
		ld->hits += r == 1;
		ld->misses += r == 0;
		ld->wrong += r == -1;
		if (t > ld->worst)
			ld->worst = t;
		if (i % 5 == 0) {
			t = now();
			(void)put_of(ld->c, 20000 + ld->id * 100000 + i, 5000);
			t = now() - t;
			if (t > ld->worst)
				ld->worst = t;
		}
		ld->calls++;
		i++;
	}
	return NULL;
}

static void
test_kill_and_back(struct cluster *c)
{
	struct load ld[4];
	pthread_t th[4];
	atomic_bool stop = false;
	struct cluster_stats st0, st;
	uint8_t key[CLUSTER_KEY_LEN];
	memcached_st *m;
	char msg[256];
	double worst = 0, t, t0;
	int i, hits = 0, misses = 0, wrong = 0, on1 = 0, back = 0;

	cluster_get_stats(c, &st0);
	for (i = 0; i < 4; i++) {
		memset(&ld[i], 0, sizeof(ld[i]));
		ld[i].c = c;
		ld[i].id = i;
		ld[i].stop = &stop;
		pthread_create(&th[i], NULL, load_run, &ld[i]);
	}
	usleep(300000);
	stop_server(1);
	fprintf(stderr, "killed server 1 (port %d) under load\n", srv_port[1]);
	usleep(1500000);
	atomic_store(&stop, true);
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		hits += ld[i].hits;
		misses += ld[i].misses;
		wrong += ld[i].wrong;
		if (ld[i].worst > worst)
			worst = ld[i].worst;
	}
	fprintf(stderr,
	    "under load: %d hits, %d misses, %d wrong, worst call %.3f s\n",
	    hits, misses, wrong, worst);
	CHECK_EQ_INT(wrong, 0);
	CHECK(hits > 0);
	CHECK(misses > 0);
	CHECK(worst < 1.0);

	/* every small key: a hit with its bytes or a miss, each fast */
	hits = misses = 0;
	worst = 0;
	m = direct(0);
	for (i = 0; i < NSMALL; i++) {
		int r = get_check(c, i, small_len(i), &t);

		CHECK(r != -1);
		hits += r == 1;
		misses += r == 0;
		if (t > worst)
			worst = t;
	}
	memcached_free(m);
	fprintf(stderr, "server 1 down: %d hits, %d misses, worst %.3f s\n",
	    hits, misses, worst);
	CHECK(hits >= NSMALL / 3);
	CHECK(misses >= NSMALL / 10);
	CHECK(worst < 1.0);
	cluster_get_stats(c, &st);
	CHECK(st.errors > st0.errors);
	CHECK(cluster_error_once(c, msg, sizeof(msg)));
	fprintf(stderr, "logged once: %s\n", msg);
	CHECK(!cluster_error_once(c, msg, sizeof(msg)));

	/* the survivors take new values: put, then get them back */
	for (i = 0; i < 50; i++) {
		t = now();
		(void)put_of(c, 30000 + i, 2000);
		CHECK(now() - t < 1.0);
	}
	for (i = 0, hits = 0; i < 50; i++)
		hits += get_check(c, 30000 + i, 2000, NULL) == 1;
	fprintf(stderr, "after the ejection: %d of 50 new values back\n", hits);
	CHECK(hits >= 40);

	/* back on the same port (empty): used again after the retry time */
	start_server(1, NULL);
	t0 = now();
	m = direct(1);
	for (i = 0; now() - t0 < 4.0 * CLUSTER_RETRY_S + 4; i++) {
		(void)put_of(c, 40000 + i, 2000);
		key_of(40000 + i, key);
		if (has_key(m, key, 0)) {
			on1++;
			if (on1 == 10)
				break;
		}
		usleep(20000);
	}
	back = on1 >= 10;
	fprintf(stderr,
	    "server 1 back: %d new values on it %.1f s after the "
	    "restart\n",
	    on1, now() - t0);
	CHECK(back);
	memcached_free(m);
	/* and its keys miss cleanly, then hit once stored again */
	for (i = 0; i < NSMALL; i++)
		CHECK(get_check(c, i, small_len(i), NULL) != -1);
	/*
	 * Every handle of the pool notices the server again on its own,
	 * after its retry time: under load some may take a round or two
	 * longer, so store and look again until the deadline.
	 */
	t0 = now();
	do {
		for (i = 0; i < NSMALL; i++)
			(void)put_of(c, i, small_len(i));
		for (i = 0, hits = 0; i < NSMALL; i++)
			hits += get_check(c, i, small_len(i), NULL) == 1;
	} while (hits < NSMALL - 10 && now() - t0 < 4.0 * CLUSTER_RETRY_S + 4);
	fprintf(stderr, "after the restart: %d of %d hit\n", hits, NSMALL);
	CHECK(hits >= NSMALL - 10);
}

/* ---- chunks, forged and copied items ----------------------------------- */

/* The chunk-key parse reads only the key's length, whatever follows it. */
static void
test_chunk_keys(void)
{
	uint8_t key[CLUSTER_KEY_LEN];
	char hkey[CLUSTER_MKEY_MAX], k[CLUSTER_MKEY_MAX + 16];
	size_t hlen, kl;
	uint32_t idx = 0;

	key_of(1, key);
	hlen = cluster_mkey(hkey, CLUSTER_KEY_PREFIX, key, 0);
	kl = cluster_mkey(k, CLUSTER_KEY_PREFIX, key, 12);
	CHECK_EQ_INT(kl, hlen + 3);
	/* a longer key's digits left behind in the buffer, no NUL */
	memcpy(k + kl, "345", 3);
	CHECK_EQ_INT(cluster_chunk_index(k, kl, hkey, hlen, 64, &idx), 0);
	CHECK_EQ_INT(idx, 12);
	CHECK(cluster_chunk_index(k, kl + 3, hkey, hlen, 64, &idx) != 0);
	CHECK_EQ_INT(
	    cluster_chunk_index(k, kl, hkey, hlen, 11, &idx), -EBADMSG);
	kl = cluster_mkey(k, CLUSTER_KEY_PREFIX, key, 64);
	CHECK_EQ_INT(cluster_chunk_index(k, kl, hkey, hlen, 64, &idx), 0);
	CHECK_EQ_INT(idx, 64);
	memcpy(k + hlen, "#01", 3); /* a leading zero */
	CHECK(cluster_chunk_index(k, hlen + 3, hkey, hlen, 64, &idx) != 0);
	memcpy(k + hlen, "#0", 2);
	CHECK(cluster_chunk_index(k, hlen + 2, hkey, hlen, 64, &idx) != 0);
	kl = cluster_mkey(k, CLUSTER_KEY_PREFIX, key, 3);
	k[5] ^= 1; /* another key's chunk */
	CHECK(cluster_chunk_index(k, kl, hkey, hlen, 64, &idx) != 0);
	CHECK(cluster_chunk_index(hkey, hlen, hkey, hlen, 64, &idx) != 0);
}

/*
 * Values of 1 to 64 chunks round-trip (chunk keys "#10" and up among
 * them), twice, with chunks of 16 KiB; a client of the default chunk size
 * takes them for damaged (another chunk size), counted.
 */
static void
test_many_chunks(struct cluster *dflt)
{
	const size_t chunk = 16384;
	struct cluster_opts o = {.chunk = chunk};
	struct cluster_stats st0, st;
	struct cluster *c;
	uint8_t key[CLUSTER_KEY_LEN];
	memcached_st *m;
	size_t len[65];
	int k, h, round, hits = 0, wrong = 0, placed = 0;

	if ((c = open_with(servers_of(0, 1, 2), &o)) == NULL)
		return;
	CHECK_EQ_INT(cluster_chunk_size(c), chunk);
	for (k = 1; k <= 64; k++) {
		/* k chunks: the last one short, or full for every 8th */
		len[k] = k % 8 == 0 ? k * chunk : fit_len(k * chunk - 100);
		CHECK_EQ_INT(put_of(c, 9000 + k, len[k]), 0);
	}
	for (round = 0; round < 2; round++)
		for (k = 1; k <= 64; k++) {
			int r = get_check(c, 9000 + k, len[k], NULL);

			hits += r == 1;
			wrong += r == -1;
		}
	fprintf(stderr, "1 to 64 chunks of 16 KiB: %d of 128 gets hit\n", hits);
	CHECK_EQ_INT(hits, 128);
	CHECK_EQ_INT(wrong, 0);
	/* the head and exactly k chunks on the head's server */
	for (k = 1; k <= 64; k++) {
		key_of(9000 + k, key);
		if ((h = holder(key)) < 0)
			continue;
		m = direct(h);
		placed += has_key(m, key, k) && !has_key(m, key, k + 1);
		memcached_free(m);
	}
	CHECK_EQ_INT(placed, 64);

	cluster_get_stats(dflt, &st0);
	CHECK_EQ_INT(get_check(dflt, 9000 + 20, len[20], NULL), 0);
	cluster_get_stats(dflt, &st);
	CHECK_EQ_INT(st.bad_checksum - st0.bad_checksum, 1);
	cluster_close(c);
}

/* Set the raw item of key (chunk 0: its head) on server h. */
static void
raw_set(int h, const uint8_t key[CLUSTER_KEY_LEN], int chunk, const void *v,
    size_t len)
{
	memcached_st *m = direct(h);
	char k[128];
	size_t n = mkey(k, sizeof(k), key, chunk);

	CHECK(memcached_set(m, k, n, (const char *)v, len, 0, 0) ==
	      MEMCACHED_SUCCESS);
	memcached_free(m);
}

/* The raw item of key (chunk 0: its head) on server h: malloc'd or NULL. */
static uint8_t *
raw_get(int h, const uint8_t key[CLUSTER_KEY_LEN], int chunk, size_t *len)
{
	memcached_st *m = direct(h);
	memcached_return_t rc;
	uint32_t fl;
	char k[128];
	size_t n = mkey(k, sizeof(k), key, chunk);
	uint8_t *v = (uint8_t *)memcached_get(m, k, n, len, &fl, &rc);

	memcached_free(m);
	return v;
}

/* A head of the layout of cluster_int.h with the given fields. */
static void
forge_head(uint8_t head[CLUSTER_HEAD_LEN], const uint8_t key[CLUSTER_KEY_LEN],
    uint32_t flags, uint32_t n, uint32_t csize, uint64_t plen)
{
	memset(head, 0, CLUSTER_HEAD_LEN);
	cluster_item_encode(head, flags, n, csize);
	memcpy(head + CLUSTER_ITEM_HDR + CLUSTER_MAC_LEN, CODEC_ENV_MAGIC, 4);
	codec_put_le64(head + CLUSTER_ITEM_HDR + CLUSTER_MAC_LEN + 24, plen);
	memcpy(head + CLUSTER_ITEM_HDR + CLUSTER_MAC_LEN + 32, key,
	    CLUSTER_KEY_LEN);
}

/* ASan reserves terabytes of address space: no RLIMIT_AS under it. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
/*
 * In a child limited to its address space now plus 32 MiB: a get of key
 * through a fresh client of servers.  Its return, or 1000 if the child
 * died.
 */
static int
get_in_small_child(const uint8_t key[CLUSTER_KEY_LEN])
{
	struct rlimit rl;
	pid_t pid;
	int status;

	if ((pid = fork()) == 0) {
		struct cluster *c = NULL;
		struct cache_val v;
		unsigned long pages = 0;
		char err[256];
		FILE *f;
		int r;

		if (cluster_open(
			servers_of(0, 1, 2), NULL, &c, err, sizeof(err)) != 0)
			_exit(99);
		/* one get first: the connection's own buffers */
		(void)cluster_get(c, key, &v);
		if ((f = fopen("/proc/self/statm", "r")) == NULL ||
		    fscanf(f, "%lu", &pages) != 1)
			_exit(98);
		fclose(f);
		rl.rlim_cur = rl.rlim_max =
		    pages * (unsigned long)sysconf(_SC_PAGESIZE) + (32u << 20);
		if (setrlimit(RLIMIT_AS, &rl) != 0)
			_exit(97);
		r = cluster_get(c, key, &v);
		_exit(r == -ENOMEM    ? 12
		      : r == -ENOENT  ? 2
		      : r == -EBADMSG ? 74
				      : 1);
	}
	if (pid == -1 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 1000;
	switch (WEXITSTATUS(status)) {
	case 12:
		return -ENOMEM;
	case 2:
		return -ENOENT;
	case 74:
		return -EBADMSG;
	default:
		return 1000 + WEXITSTATUS(status);
	}
}
#endif

/*
 * Forged heads, written to the server straight: each a miss, counted,
 * and the one whose geometry is sound but whose chunks are not there
 * allocates nothing for its 64 MiB.
 */
static void
test_forged_heads(struct cluster *c)
{
	uint8_t key[CLUSTER_KEY_LEN], head[CLUSTER_HEAD_LEN], old[32];
	struct cluster_stats st0, st;
	struct cache_val v;
	uint64_t plen = CLUSTER_MAX_VALUE;
	uint32_t n = (uint32_t)((plen + CLUSTER_CHUNK - 1) / CLUSTER_CHUNK);
	int h;

	key_of(9500, key);
	CHECK_EQ_INT(put_of(c, 9500, 1000), 0); /* where its head goes */
	if ((h = holder(key)) < 0) {
		CHECK(h >= 0);
		return;
	}
	cluster_get_stats(c, &st0);

	/* the 32-byte head of version 1 naming 4 GiB chunks */
	memset(old, 0, sizeof(old));
	memcpy(old, "FFCL", 4);
	old[4] = 1;
	codec_put_le64(old + 8, 1ull << 40);
	codec_put_le32(old + 16, 256);
	codec_put_le32(old + 20, 0xffffffffu);
	raw_set(h, key, 0, old, sizeof(old));
	CHECK_EQ_INT(cluster_get(c, key, &v), -EBADMSG);
	/* version 2: a length over the bound, another chunk size */
	forge_head(head, key, 0, 1u << 20, CLUSTER_CHUNK, 1ull << 40);
	raw_set(h, key, 0, head, sizeof(head));
	CHECK_EQ_INT(cluster_get(c, key, &v), -EBADMSG);
	forge_head(head, key, 0, 1, 0xffffffffu, 100);
	raw_set(h, key, 0, head, sizeof(head));
	CHECK_EQ_INT(cluster_get(c, key, &v), -EBADMSG);
	/* a count that does not fit the length */
	forge_head(head, key, 0, n + 1, CLUSTER_CHUNK, plen);
	raw_set(h, key, 0, head, sizeof(head));
	CHECK_EQ_INT(cluster_get(c, key, &v), -EBADMSG);
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.bad_checksum - st0.bad_checksum, 4);

	/* sound geometry, 64 MiB, no chunks: a miss, nothing allocated */
	forge_head(head, key, 0, n, CLUSTER_CHUNK, plen);
	raw_set(h, key, 0, head, sizeof(head));
	CHECK_EQ_INT(cluster_get(c, key, &v), -ENOENT);
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.missing_chunks - st0.missing_chunks, 1);
#ifndef UNDER_ASAN
	{
		int r = get_in_small_child(key);

		CHECK_EQ_INT(r, -ENOENT);
		fprintf(stderr,
		    "forged 64 MiB head, 32 MiB of address space left: %s\n",
		    r == -ENOENT ? "a miss, nothing allocated" : strerror(-r));
	}
#else
	fprintf(stderr, "ASan: the address-space limit is not tried\n");
#endif
	/* and with forged chunks: the envelope refuses it */
	{
		uint8_t *junk = val_of(3, CLUSTER_CHUNK);
		uint32_t i;

		forge_head(head, key, 0, 2, CLUSTER_CHUNK, 2 * CLUSTER_CHUNK);
		for (i = 1; i <= 2; i++)
			raw_set(h, key, (int)i, junk, CLUSTER_CHUNK);
		raw_set(h, key, 0, head, sizeof(head));
		free(junk);
	}
	CHECK_EQ_INT(cluster_get(c, key, &v), -EBADMSG);
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.bad_checksum - st0.bad_checksum, 5);
	CHECK_EQ_INT(st.hits, st0.hits);
	CHECK_EQ_INT(st.errors, st0.errors);
}

/*
 * The items of key a copied to key b's names (head and chunks, on b's
 * server): b misses (the envelope names a), counted; a still hits.
 */
static void
copy_value(struct cluster *c, int a, int b, size_t len, int nchunks)
{
	uint8_t ka[CLUSTER_KEY_LEN], kb[CLUSTER_KEY_LEN], *v;
	struct cluster_stats st0, st;
	size_t l;
	int ha, hb, i;

	key_of(a, ka);
	key_of(b, kb);
	CHECK_EQ_INT(put_of(c, a, len), 0);
	CHECK_EQ_INT(put_of(c, b, len), 0); /* where b's items go */
	ha = holder(ka);
	hb = holder(kb);
	CHECK(ha >= 0 && hb >= 0);
	if (ha < 0 || hb < 0)
		return;
	for (i = nchunks; i >= 0; i--) { /* the head last */
		if ((v = raw_get(ha, ka, i, &l)) == NULL) {
			CHECK(v != NULL);
			return;
		}
		raw_set(hb, kb, i, v, l);
		free(v);
	}
	cluster_get_stats(c, &st0);
	CHECK_EQ_INT(get_check(c, b, len, NULL), 0);
	CHECK_EQ_INT(get_check(c, a, len, NULL), 1);
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.bad_checksum - st0.bad_checksum, 1);
}

static void
test_copied(struct cluster *c)
{
	copy_value(c, 9600, 9601, 5000, 0);
	copy_value(c, 9602, 9603, fit_len(3 * 1024 * 1024), 4);
}

/* ---- pool waits ---------------------------------------------------------- */

struct waiter {
	struct cluster *c;
	int r;
	double start, secs;
};

static void *
wait_get(void *arg)
{
	struct waiter *w = arg;

	w->start = now();
	(void)get_check_r(w->c, 9700, 1000, &w->secs, &w->r);
	return NULL;
}

/*
 * With a stopped server every get holds its handle for the poll timeout.
 * A pool of one: the calls that find no handle in time are pool waits,
 * not server errors.  A pool sized to the threads: no call waits.
 */
static void
test_pool_waits(void)
{
	struct cluster_opts o1 = {.pool = 1, .pool_wait_ms = 50};
	struct cluster_opts on = {.pool = 100};
	struct waiter w[100];
	pthread_t th[100];
	struct cluster_stats st;
	struct cluster *c;
	char servers[64];
	int i, busy = 0, eio = 0, late = 0;

	srv_port[4] = free_port();
	start_server(4, NULL);
	snprintf(servers, sizeof(servers), "127.0.0.1:%d", srv_port[4]);
	if ((c = open_with(servers, &o1)) == NULL)
		return;
	CHECK_EQ_INT(put_of(c, 9700, 1000), 0);
	CHECK_EQ_INT(get_check(c, 9700, 1000, NULL), 1);
	kill(srv_pid[4], SIGSTOP);

	w[0].c = c;
	pthread_create(&th[0], NULL, wait_get, &w[0]);
	usleep(100000); /* it holds the only handle for ~0.5 s */
	for (i = 1; i < 5; i++) {
		w[i].c = c;
		pthread_create(&th[i], NULL, wait_get, &w[i]);
	}
	for (i = 0; i < 5; i++) {
		pthread_join(th[i], NULL);
		busy += w[i].r == -EBUSY;
		eio += w[i].r == -EIO;
	}
	cluster_get_stats(c, &st);
	fprintf(stderr,
	    "pool of 1, server stopped: %d pool waits, %d server errors\n",
	    busy, eio);
	CHECK_EQ_INT(st.pool_waits, (uint64_t)busy);
	CHECK_EQ_INT(st.errors, (uint64_t)eio);
	/*
	 * Each of the four gave up its wait while the first held the
	 * handle, unless it was scheduled so late (a loaded machine) that
	 * its wait began after the first's get returned: then it took the
	 * handle itself, and what follows is not this test's case.
	 */
	for (i = 1; i < 5; i++)
		late += w[i].start + 0.05 >= w[0].start + w[0].secs;
	if (late == 0) {
		CHECK_EQ_INT(busy, 4);
		CHECK(eio <= 1);
		CHECK_EQ_INT(st.misses, 5);
	} else
		fprintf(stderr,
		    "pool of 1: %d of 4 calls began after the first's get "
		    "ended (a loaded machine): counts not checked\n",
		    late);
	cluster_close(c);

	if ((c = open_with(servers, &on)) != NULL) {
		for (i = 0; i < 100; i++) {
			w[i].c = c;
			pthread_create(&th[i], NULL, wait_get, &w[i]);
		}
		for (i = 0; i < 100; i++)
			pthread_join(th[i], NULL);
		cluster_get_stats(c, &st);
		fprintf(stderr,
		    "pool of 100, 100 threads, server stopped: %" PRIu64
		    " pool waits, %" PRIu64 " errors\n",
		    st.pool_waits, st.errors);
		CHECK_EQ_INT(st.pool_waits, 0);
		CHECK_EQ_INT(st.misses, 100);
		cluster_close(c);
	}
	kill(srv_pid[4], SIGCONT);
	stop_server(4);
}

/* ---- cluster_secret ------------------------------------------------------ */

static struct cluster *
open_secret(const char *path, size_t chunk)
{
	struct cluster_opts o = {.secret_file = path, .chunk = chunk};

	return open_with(servers_of(0, 1, 2), &o);
}

static void
test_mac(struct cluster *plain)
{
	char p1[128], p2[128];
	struct cluster *s1, *s2, *s1c;
	struct cluster_stats st0, st, st1;
	uint8_t key[CLUSTER_KEY_LEN], head[CLUSTER_HEAD_LEN], *v, *d;
	struct cache_val cv;
	size_t l;
	int h, r;

	snprintf(p1, sizeof(p1), "%s/s1", tmp);
	snprintf(p2, sizeof(p2), "%s/s2", tmp);
	write_file(p1, "the first secret, 32 bytes long\n", 0600);
	write_file(p2, "another secret of 32 bytes long\n", 0600);
	s1 = open_secret(p1, 0);
	s2 = open_secret(p2, 0);
	s1c = open_secret(p1, 16384);
	if (s1 == NULL || s2 == NULL || s1c == NULL)
		goto out;

	/* with the secret: round trips, inline and chunked */
	CHECK_EQ_INT(put_of(s1, 9800, 5000), 0);
	CHECK_EQ_INT(get_check(s1, 9800, 5000, NULL), 1);
	CHECK_EQ_INT(put_of(s1c, 9801, fit_len(40 * 16384 - 9)), 0);
	CHECK_EQ_INT(get_check(s1c, 9801, fit_len(40 * 16384 - 9), NULL), 1);
	l = fit_len(3 * 1024 * 1024);
	CHECK_EQ_INT(put_of(s1, 9802, l), 0);
	CHECK_EQ_INT(get_check(s1, 9802, l, NULL), 1);

	/*
	 * Namespaces (issue 40): one per secret, named by a key id derived
	 * from it, never the secret; the plain client keeps "ffc2:".
	 */
	CHECK(strcmp(s1->ns, s1c->ns) == 0 && strcmp(s1->ns, s2->ns) != 0);
	CHECK(strcmp(plain->ns, "ffc2:") == 0);
	CHECK(strncmp(s1->ns, "ffc2:k", 6) == 0 &&
	      strlen(s1->ns) == 6 + 2 * CLUSTER_KEYID_LEN + 1 &&
	      s1->ns[strlen(s1->ns) - 1] == ':');
	CHECK(strstr(s1->ns, "the first") == NULL);
	fprintf(
	    stderr, "cluster_secret: namespaces %s and %s\n", s1->ns, s2->ns);

	/*
	 * Another secret, or none: a plain miss of their own namespace,
	 * never a bad MAC; their puts of the same key leave s1's value
	 * alone (they overwrote it before the namespaces).
	 */
	cluster_get_stats(s1, &st0);
	cluster_get_stats(s2, &st);
	CHECK_EQ_INT(get_check_r(s2, 9800, 5000, NULL, &r), 0);
	CHECK_EQ_INT(r, -ENOENT);
	CHECK_EQ_INT(get_check_r(plain, 9800, 5000, NULL, &r), 0);
	CHECK_EQ_INT(r, -ENOENT);
	CHECK_EQ_INT(put_of(s2, 9800, 4000), 0);
	CHECK_EQ_INT(put_of(plain, 9800, 3000), 0);
	CHECK_EQ_INT(get_check(s1, 9800, 5000, NULL), 1);
	CHECK_EQ_INT(get_check(s2, 9800, 4000, NULL), 1);
	CHECK_EQ_INT(get_check(plain, 9800, 3000, NULL), 1);
	CHECK_EQ_INT(put_of(plain, 9803, 5000), 0);
	CHECK_EQ_INT(get_check_r(s1, 9803, 5000, NULL, &r), 0);
	CHECK_EQ_INT(r, -ENOENT);
	cluster_get_stats(s1, &st1);
	CHECK_EQ_INT(st1.bad_mac - st0.bad_mac, 0);
	cluster_get_stats(s2, &st1);
	CHECK_EQ_INT(st1.bad_mac - st.bad_mac, 0);

	/*
	 * Planted in s1's namespace (its key id is on the wire) without the
	 * secret: a sound envelope of other pixels under 9800, the MAC flag
	 * set and the MAC field kept; then the flag stripped.  s1 takes
	 * neither.  The same item in the plain namespace: the plain reader
	 * takes it (it asked for no MAC).
	 */
	key_of(9800, key);
	ns = s1->ns;
	if ((h = holder(key)) < 0 || (v = raw_get(h, key, 0, &l)) == NULL) {
		CHECK(0);
		ns = "ffc2:";
		goto out;
	}
	CHECK_EQ_INT(l, CLUSTER_HEAD_LEN + 5000);
	d = val_of(77, 5000);
	cv = (struct cache_val){.c = 1, .data = d, .len = 5000};
	shape_of(5000, &cv.w, &cv.h);
	codec_env_seal(v + CLUSTER_ITEM_HDR + CLUSTER_MAC_LEN, key, &cv);
	memcpy(v + CLUSTER_HEAD_LEN, d, 5000);
	raw_set(h, key, 0, v, l);
	cluster_get_stats(s1, &st0);
	CHECK_EQ_INT(get_check_r(s1, 9800, 5000, NULL, &r), 0);
	CHECK_EQ_INT(r, -EACCES);
	/* the MAC flag stripped */
	memcpy(head, v, CLUSTER_HEAD_LEN);
	head[6] = 0;
	memcpy(v, head, CLUSTER_HEAD_LEN);
	raw_set(h, key, 0, v, l);
	CHECK_EQ_INT(get_check_r(s1, 9800, 5000, NULL, &r), 0);
	CHECK_EQ_INT(r, -EACCES);
	cluster_get_stats(s1, &st);
	CHECK_EQ_INT(st.bad_mac - st0.bad_mac, 2);
	ns = "ffc2:";
	for (int j = 0; j < 3; j++) /* wherever the plain name hashes */
		raw_set(j, key, 0, v, l);
	CHECK_EQ_INT(get_check(plain, 9800, 5000, NULL), -1); /* val 77's */
	free(d);
	free(v);

	/* a MAC'd value replayed under another key: a miss */
	ns = s1->ns;
	copy_value(s1, 9805, 9806, 5000, 0);
	ns = "ffc2:";
	fprintf(stderr, "cluster_secret: MAC'd round trips; other secret, "
			"no MAC, planted and replayed values are misses\n");
out:
	cluster_close(s1);
	cluster_close(s2);
	cluster_close(s1c);
}

/*
 * A value of an encoded cache_format (what a jpeg(Q) job stores in the
 * tier, issue 25): its format and bytes round-trip with the secret, and
 * the MAC covers the format: the envelope rewritten to name another
 * quality (its checksum made good) is taken by a reader without a secret
 * only, with the other format, which core/sample.c then refuses.
 */
static void
test_mac_encoded(void)
{
	char p1[128];
	struct cluster *s1, *plain;
	uint8_t key[CLUSTER_KEY_LEN], px[48 * 32 * 3], *enc = NULL, *v;
	struct cache_val cv = {.w = 48, .h = 32, .c = 3}, got = {0};
	uint32_t q90, q91;
	size_t len = 0, l;
	int h;

	snprintf(p1, sizeof(p1), "%s/s1", tmp);
	s1 = open_secret(p1, 0);
	plain = open_with(servers_of(0, 1, 2), NULL);
	for (size_t i = 0; i < sizeof(px); i++)
		px[i] = (uint8_t)(i * 31 + i / 144);
	CHECK(cache_fmt_parse("jpeg(90)", &q90) == 0);
	CHECK(cache_fmt_parse("jpeg(91)", &q91) == 0);
	if (s1 == NULL || plain == NULL ||
	    cache_fmt_encode(q90, 48, 32, px, &enc, &len) != 0) {
		CHECK(0);
		goto out;
	}
	cv.data = enc;
	cv.len = len;
	cv.enc = q90;
	key_of(9900, key);
	CHECK_EQ_INT(cluster_put(s1, key, &cv), 0);
	CHECK_EQ_INT(cluster_get(s1, key, &got), 0);
	CHECK(got.enc == q90 && got.len == len && got.w == 48 &&
	      got.h == 32 && got.c == 3 && got.data != NULL &&
	      memcmp(got.data, enc, len) == 0);
	free(got.data);
	got.data = NULL;
	/*
	 * The format rewritten, the checksum resealed, the MAC kept; in s1's
	 * namespace, and the same item in the plain one.
	 */
	ns = s1->ns;
	if ((h = holder(key)) < 0 || (v = raw_get(h, key, 0, &l)) == NULL) {
		ns = "ffc2:";
		CHECK(0);
		goto out;
	}
	CHECK_EQ_INT(l, CLUSTER_HEAD_LEN + len);
	cv.enc = q91;
	codec_env_seal(v + CLUSTER_ITEM_HDR + CLUSTER_MAC_LEN, key, &cv);
	raw_set(h, key, 0, v, l);
	ns = "ffc2:";
	for (int j = 0; j < 3; j++)
		raw_set(j, key, 0, v, l);
	free(v);
	CHECK_EQ_INT(cluster_get(s1, key, &got), -EACCES);
	CHECK_EQ_INT(cluster_get(plain, key, &got), 0);
	CHECK(got.enc == q91);
	free(got.data);
	fprintf(stderr, "cluster_secret: a jpeg(90) value round-trips; its "
			"format rewritten is a bad MAC\n");
out:
	free(enc);
	cluster_close(s1);
	cluster_close(plain);
}

/* ---- SASL -------------------------------------------------------------- */

static bool
memcached_has_sasl(void)
{
	char cmd[256], line[512];
	FILE *p;
	bool yes = false;

	snprintf(cmd, sizeof(cmd), "%s -h 2>&1", MEMCACHED);
	if ((p = popen(cmd, "r")) == NULL)
		return false;
	while (fgets(line, sizeof(line), p) != NULL)
		if (strstr(line, "--enable-sasl") != NULL)
			yes = true;
	pclose(p);
	return yes;
}

/* cluster_open with path as the auth file (secret: as the secret file). */
static int
open_file(const char *path, bool secret, char *err, size_t errlen)
{
	struct cluster_opts o = {0};
	struct cluster *c = NULL;
	int r;

	if (secret)
		o.secret_file = path;
	else
		o.auth_file = path;
	err[0] = '\0';
	r = cluster_open(servers_of(0, 1, 2), &o, &c, err, errlen);
	cluster_close(c);
	return r;
}

/*
 * The checks the auth file and the secret file share: mode, owner, FIFO
 * (refused at once, not waited on), symlink, directory, size, missing.
 */
static void
test_private_file(bool secret)
{
	const char *good = secret ? "0123456789abcdef0123\n" : "user secret\n";
	const char *what = secret ? "secret" : "auth";
	char path[128], link[128], fifo[128], err[256], *big;
	double t;
	int r;

	snprintf(path, sizeof(path), "%s/%s", tmp, what);
	write_file(path, good, 0600);
	CHECK_EQ_INT(open_file(path, secret, err, sizeof(err)), 0);

	write_file(path, good, 0644);
	CHECK_EQ_INT(open_file(path, secret, err, sizeof(err)), -EPERM);
	CHECK(strstr(err, "group or others") != NULL);
	CHECK(strstr(err, path) != NULL);
	fprintf(stderr, "%s file of mode 0644: %s\n", what, err);
	write_file(path, good, 0640);
	CHECK_EQ_INT(open_file(path, secret, err, sizeof(err)), -EPERM);

	/* owned by another user (root can chown: the tests run as root) */
	write_file(path, good, 0600);
	if (geteuid() == 0) {
		CHECK(chown(path, 65534, 65534) == 0);
		CHECK_EQ_INT(open_file(path, secret, err, sizeof(err)), -EPERM);
		CHECK(strstr(err, "owned by uid 65534") != NULL);
		fprintf(stderr, "%s file of uid 65534: %s\n", what, err);
		CHECK(chown(path, 0, 0) == 0);
	} else
		fprintf(stderr, "not root: other owner not tried\n");

	/* a symlink to a good file: refused, not followed */
	snprintf(link, sizeof(link), "%s/%s.link", tmp, what);
	unlink(link);
	CHECK(symlink(path, link) == 0);
	CHECK_EQ_INT(open_file(link, secret, err, sizeof(err)), -ELOOP);
	CHECK(strstr(err, "symbolic link") != NULL);
	fprintf(stderr, "%s symlink: %s\n", what, err);

	/* a FIFO nobody writes: refused at once */
	snprintf(fifo, sizeof(fifo), "%s/%s.fifo", tmp, what);
	unlink(fifo);
	CHECK(mkfifo(fifo, 0600) == 0);
	alarm(10); /* a blocking open would hang the test: kill it */
	t = now();
	r = open_file(fifo, secret, err, sizeof(err));
	t = now() - t;
	alarm(0);
	CHECK_EQ_INT(r, -EINVAL);
	CHECK(strstr(err, "not a regular file") != NULL);
	CHECK(t < 1.0);
	fprintf(stderr, "%s FIFO: %s (%.3f s)\n", what, err, t);

	/* a directory, a missing file, a file too large */
	CHECK_EQ_INT(open_file(tmp, secret, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "regular file") != NULL);
	snprintf(link, sizeof(link), "%s/nonexistent", tmp);
	CHECK_EQ_INT(open_file(link, secret, err, sizeof(err)), -ENOENT);
	big = malloc(8192);
	memset(big, 'x', 8191);
	big[8191] = '\0';
	big[5] = ' ';
	write_file(path, big, 0600);
	free(big);
	CHECK_EQ_INT(open_file(path, secret, err, sizeof(err)), -EFBIG);
	CHECK(strstr(err, "larger than") != NULL);
}

static void
test_auth_file(void)
{
	char path[128], err[256];

	test_private_file(false);
	snprintf(path, sizeof(path), "%s/auth", tmp);
	write_file(path, "nopassword\n", 0600);
	CHECK_EQ_INT(open_file(path, false, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "USER PASSWORD") != NULL);
}

static void
test_secret_file(void)
{
	char path[128], err[256], text[CLUSTER_SECRET_MAX + 2];

	test_private_file(true);
	snprintf(path, sizeof(path), "%s/secret", tmp);
	/* 15 bytes and a newline: too short; 16 without one: enough */
	write_file(path, "0123456789abcde\n", 0600);
	CHECK_EQ_INT(open_file(path, true, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "15 bytes") != NULL);
	fprintf(stderr, "short secret: %s\n", err);
	write_file(path, "0123456789abcdef", 0600);
	CHECK_EQ_INT(open_file(path, true, err, sizeof(err)), 0);
	/* CLUSTER_SECRET_MAX bytes and a newline: taken; one more: not */
	memset(text, 'k', CLUSTER_SECRET_MAX);
	text[CLUSTER_SECRET_MAX] = '\n';
	text[CLUSTER_SECRET_MAX + 1] = '\0';
	write_file(path, text, 0600);
	CHECK_EQ_INT(open_file(path, true, err, sizeof(err)), 0);
	text[CLUSTER_SECRET_MAX] = 'k';
	write_file(path, text, 0600);
	CHECK(open_file(path, true, err, sizeof(err)) != 0);
}

/*
 * cluster_open with probe = true against servers, with the auth file
 * auth (NULL: none): the client (NULL when the open failed), its
 * cluster_problem in why ("" when none).
 */
static struct cluster *
probe_open(const char *servers, const char *auth, char *why, size_t len)
{
	struct cluster_opts o = {.auth_file = auth, .probe = true};
	struct cluster *c = NULL;
	char err[256];

	why[0] = '\0';
	if (cluster_open(servers, &o, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "cluster_open: %s\n", err);
		CHECK(0);
		return NULL;
	}
	if (cluster_problem(c) != NULL)
		snprintf(why, len, "%s", cluster_problem(c));
	return c;
}

/*
 * The probe at open (issue 40): a wrong password, none where the server
 * wants one, one where it takes none are said by cluster_problem, and
 * turn the tier off when every server that answered refused; the right
 * one says nothing.  sasl: the server of memcached -S (auth: feeder).
 */
static void
test_probe(const char *sasl)
{
	struct cluster_stats st;
	struct cluster *c;
	char auth[128], why[1024], both[128];
	double t;
	int r;

	snprintf(auth, sizeof(auth), "%s/auth", tmp);
	write_file(auth, "feeder\ns3cret\n", 0600);
	if ((c = probe_open(sasl, auth, why, sizeof(why))) != NULL) {
		cluster_get_stats(c, &st);
		CHECK(why[0] == '\0' && !st.off && st.refused == 0);
		CHECK_EQ_INT(get_check(c, 8000, 100000, NULL), 1);
		cluster_close(c);
	}
	write_file(auth, "feeder wrong\n", 0600);
	if ((c = probe_open(sasl, auth, why, sizeof(why))) != NULL) {
		cluster_get_stats(c, &st);
		CHECK(st.off && st.refused == 1);
		CHECK(
		    strstr(why, "refused cluster_auth's user feeder") != NULL);
		CHECK(strstr(why, "serving without the cluster tier") != NULL);
		CHECK(strstr(why, "wrong") == NULL); /* never the password */
		fprintf(stderr, "probe, a wrong password: %s\n", why);
		/* off: a miss and a dropped put at once, no server asked */
		t = now();
		CHECK_EQ_INT(get_check_r(c, 8000, 100000, NULL, &r), 0);
		CHECK_EQ_INT(r, -EACCES);
		CHECK_EQ_INT(put_of(c, 8003, 10), -EACCES);
		CHECK(now() - t < 0.5);
		cluster_close(c);
	}
	if ((c = probe_open(sasl, NULL, why, sizeof(why))) != NULL) {
		cluster_get_stats(c, &st);
		CHECK(
		    st.off && strstr(why, "wants SASL authentication") != NULL);
		fprintf(stderr, "probe, no cluster_auth: %s\n", why);
		cluster_close(c);
	}
	/* a password for a server without -S */
	write_file(auth, "feeder\ns3cret\n", 0600);
	snprintf(both, sizeof(both), "127.0.0.1:%d", srv_port[0]);
	if ((c = probe_open(both, auth, why, sizeof(why))) != NULL) {
		cluster_get_stats(c, &st);
		CHECK(st.off && strstr(why, "did not take SASL") != NULL);
		fprintf(stderr, "probe, auth for a plain server: %s\n", why);
		cluster_close(c);
	}
	/* no auth, one server of each kind: the tier stays on */
	snprintf(both, sizeof(both), "%s,127.0.0.1:%d", sasl, srv_port[0]);
	if ((c = probe_open(both, NULL, why, sizeof(why))) != NULL) {
		cluster_get_stats(c, &st);
		CHECK(!st.off && st.refused == 1 && strstr(why, sasl) != NULL &&
		      strstr(why, "values on it are misses") != NULL);
		fprintf(
		    stderr, "probe, one server of two wants SASL: %s\n", why);
		cluster_close(c);
	}
}

static void
test_sasl(void)
{
	struct cluster *c = NULL;
	char conf[128], db[128], auth[128], cmd[512], err[256];
	char servers[64];
	struct cluster_opts o = {.auth_file = auth};
	int r;

	if (access(SASLPASSWD, X_OK) != 0 || !memcached_has_sasl()) {
		fprintf(stderr,
		    "SASL: skipped (no %s or memcached without "
		    "-S)\n",
		    SASLPASSWD);
		return;
	}
	snprintf(db, sizeof(db), "%s/sasldb2", tmp);
	snprintf(conf, sizeof(conf), "%s/memcached.conf", tmp);
	snprintf(cmd, sizeof(cmd), "mech_list: plain\nsasldb_path: %s\n", db);
	write_file(conf, cmd, 0600);
	snprintf(cmd, sizeof(cmd),
	    "printf s3cret | %s -a memcached -c -p -f %s feeder", SASLPASSWD,
	    db);
	if (system(cmd) != 0) {
		fprintf(stderr, "SASL: %s failed\n", cmd);
		CHECK(0);
		return;
	}
	srv_port[3] = free_port();
	start_server(3, tmp);
	snprintf(servers, sizeof(servers), "127.0.0.1:%d", srv_port[3]);
	snprintf(auth, sizeof(auth), "%s/auth", tmp);

	/* the right password */
	write_file(auth, "feeder\ns3cret\n", 0600);
	r = cluster_open(servers, &o, &c, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	if (r == 0) {
		CHECK_EQ_INT(put_of(c, 8000, 100000), 0);
		CHECK_EQ_INT(get_check(c, 8000, 100000, NULL), 1);
		CHECK_EQ_INT(put_of(c, 8001, 2500000), 0);
		CHECK_EQ_INT(get_check(c, 8001, 2500000, NULL), 1);
		cluster_close(c);
		c = NULL;
	} else
		fprintf(stderr, "cluster_open: %s\n", err);

	/* a wrong password and no password: misses, not hits */
	write_file(auth, "feeder wrong\n", 0600);
	r = cluster_open(servers, &o, &c, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	if (r == 0) {
		CHECK_EQ_INT(get_check(c, 8000, 100000, NULL), 0);
		CHECK(put_of(c, 8002, 10) != 0);
		cluster_close(c);
		c = NULL;
	}
	r = cluster_open(servers, NULL, &c, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	if (r == 0) {
		CHECK_EQ_INT(get_check(c, 8000, 100000, NULL), 0);
		cluster_close(c);
	}
	fprintf(stderr, "SASL: PLAIN against memcached -S checked\n");
	test_probe(servers);
}

int
main(void)
{
	struct cluster *c = NULL;
	char err[256];
	int i, r;

	if (access(MEMCACHED, X_OK) != 0) {
		fprintf(stderr, "memcached not installed (%s): skipped\n",
		    MEMCACHED);
		return 77;
	}
	snprintf(tmp, sizeof(tmp), "/tmp/test_cluster.XXXXXX");
	if (mkdtemp(tmp) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	atexit(kill_servers);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGSEGV, on_signal);
	signal(SIGABRT, on_signal);
	signal(SIGPIPE, SIG_IGN);

	test_syntax();
	test_chunk_keys();
	for (i = 0; i < 3; i++)
		srv_port[i] = free_port();
	test_none_up();
	test_auth_file();
	test_secret_file();

	for (i = 0; i < 3; i++)
		start_server(i, NULL);
	r = cluster_open(servers_of(0, 1, 2), NULL, &c, err, sizeof(err));
	CHECK_EQ_INT(r, 0);
	if (r != 0) {
		fprintf(stderr, "cluster_open: %s\n", err);
		return TEST_SUMMARY();
	}
	test_round_trips(c);
	test_spread();
	test_chunked(c);
	test_many_chunks(c);
	test_forged_heads(c);
	test_copied(c);
	test_mac(c);
	test_mac_encoded();
	test_too_large(c);
	test_latency(c);
	test_kill_and_back(c);
	cluster_close(c);
	test_pool_waits();
	test_sasl();

	kill_servers();
	test_rmtree(tmp);
	return TEST_SUMMARY();
}
