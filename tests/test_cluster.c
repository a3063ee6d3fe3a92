/*
 * test_cluster - the cluster tier against real memcached servers, started
 * here on free 127.0.0.1 ports and killed here (by pid, also on failure):
 * the server list syntax, no server up at all, small and chunked round
 * trips, the spread over three servers, damaged and missing chunks, a
 * server killed with -9 under load and brought back, values over the
 * bound, the auth file's checks and SASL against `memcached -S`.
 *
 * Exits 77 when /usr/bin/memcached is missing.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
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
#include "tests/testlib.h"

#define MEMCACHED "/usr/bin/memcached"
#define SASLPASSWD "/usr/sbin/saslpasswd2"
#define NSRV 4 /* three for the cluster, one for SASL */
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
	argv[n++] = "64";
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

static size_t
small_len(int i)
{
	return (size_t)(i * 997) % 120000;
}

/* The memcached key of key (chunk 0: the head), as cluster.c makes it. */
static size_t
mkey(char *buf, size_t len, const uint8_t key[CLUSTER_KEY_LEN], int chunk)
{
	size_t n;
	int j;

	n = (size_t)snprintf(buf, len, "ffc1:");
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

/* get key i and compare with val_of(i, len): 1 hit, 0 miss, -1 wrong. */
static int
get_check(struct cluster *c, int i, size_t len, double *secs)
{
	uint8_t key[CLUSTER_KEY_LEN], *data = NULL, *want;
	size_t got = 0;
	double t0 = now();
	int r, ok;

	key_of(i, key);
	r = cluster_get(c, key, &data, &got);
	if (secs != NULL)
		*secs = now() - t0;
	if (r != 0) {
		if (r != -ENOENT && r != -EIO && r != -EBADMSG)
			return -1;
		return 0;
	}
	want = val_of(i, len);
	ok = got == len && memcmp(data, want, len) == 0;
	free(want);
	free(data);
	return ok ? 1 : -1;
}

static int
put_of(struct cluster *c, int i, size_t len)
{
	uint8_t key[CLUSTER_KEY_LEN], *v = val_of(i, len);
	int r;

	key_of(i, key);
	r = cluster_put(c, key, v, len);
	free(v);
	return r;
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
	const size_t big = 3 * 1024 * 1024 + 12345;
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
		uint8_t *d;
		size_t l;

		r = cluster_get(c, key, &d, &l);
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

	/* exactly one chunk's worth and one byte more */
	n = cluster_chunk_size(c);
	CHECK_EQ_INT(put_of(c, 5001, n), 0);
	CHECK_EQ_INT(get_check(c, 5001, n, NULL), 1);
	CHECK_EQ_INT(put_of(c, 5002, n + 1), 0);
	CHECK_EQ_INT(get_check(c, 5002, n + 1, NULL), 1);
	CHECK_EQ_INT(put_of(c, 5003, 0), 0);
	CHECK_EQ_INT(get_check(c, 5003, 0, NULL), 1);
}

static void
test_too_large(struct cluster *c)
{
	struct cluster_stats st;
	uint8_t key[CLUSTER_KEY_LEN], *v;

	key_of(6000, key);
	v = calloc(1, CLUSTER_MAX_VALUE + 1);
	CHECK_EQ_INT(cluster_put(c, key, v, CLUSTER_MAX_VALUE + 1), -EFBIG);
	free(v);
	cluster_get_stats(c, &st);
	CHECK_EQ_INT(st.skipped_large, 1);
}

static void
test_latency(struct cluster *c)
{
	const size_t len = 270 * 1024;
	uint8_t key[CLUSTER_KEY_LEN], *v = val_of(7, len), *d;
	double t0, tput, tget;
	size_t l;
	int i, n = 100, ok = 0;

	t0 = now();
	for (i = 0; i < n; i++) {
		key_of(7000 + i, key);
		ok += cluster_put(c, key, v, len) == 0;
	}
	tput = (now() - t0) / n;
	t0 = now();
	for (i = 0; i < n; i++) {
		key_of(7000 + i, key);
		if (cluster_get(c, key, &d, &l) == 0) {
			ok += l == len && memcmp(d, v, len) == 0;
			free(d);
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

/* ---- SASL -------------------------------------------------------------- */

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

static void
test_auth_file(void)
{
	struct cluster *c = NULL;
	char path[128], err[256];
	int r;

	snprintf(path, sizeof(path), "%s/auth", tmp);
	write_file(path, "user secret\n", 0644);
	err[0] = '\0';
	r = cluster_open(servers_of(0, 1, 2), path, &c, err, sizeof(err));
	CHECK_EQ_INT(r, -EPERM);
	CHECK(c == NULL);
	CHECK(strstr(err, "group or others") != NULL);
	fprintf(stderr, "0644 auth file: %s\n", err);
	write_file(path, "user secret\n", 0640);
	CHECK_EQ_INT(
	    cluster_open(servers_of(0, 1, 2), path, &c, err, sizeof(err)),
	    -EPERM);
	write_file(path, "nopassword\n", 0600);
	CHECK_EQ_INT(
	    cluster_open(servers_of(0, 1, 2), path, &c, err, sizeof(err)),
	    -EINVAL);
	CHECK(c == NULL);
	CHECK_EQ_INT(
	    cluster_open(servers_of(0, 1, 2), tmp, &c, err, sizeof(err)),
	    -EINVAL);
	CHECK(strstr(err, "regular file") != NULL);
	snprintf(path, sizeof(path), "%s/nonexistent", tmp);
	CHECK_EQ_INT(
	    cluster_open(servers_of(0, 1, 2), path, &c, err, sizeof(err)),
	    -ENOENT);
	CHECK(c == NULL);
}

static void
test_sasl(void)
{
	struct cluster *c = NULL;
	char conf[128], db[128], auth[128], cmd[512], err[256];
	char servers[64];
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
	r = cluster_open(servers, auth, &c, err, sizeof(err));
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
	r = cluster_open(servers, auth, &c, err, sizeof(err));
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
	for (i = 0; i < 3; i++)
		srv_port[i] = free_port();
	test_none_up();
	test_auth_file();

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
	test_too_large(c);
	test_latency(c);
	test_kill_and_back(c);
	cluster_close(c);
	test_sasl();

	kill_servers();
	snprintf(err, sizeof(err), "rm -rf %s", tmp);
	if (system(err) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	return TEST_SUMMARY();
}
