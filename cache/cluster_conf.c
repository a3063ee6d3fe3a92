/*
 * cluster_conf.c - cache/ (the store), the cluster tier, its
 * configuration: the server list, the SASL auth file and the MAC's secret
 * file (see cluster.h).  A leaf of the tier: it calls nothing of cache/.
 */
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cache/cluster_int.h"

#define AUTH_MAX 4096

/* ---- the server list -------------------------------------------------- */

void
cluster_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int
host_char(int ch)
{
	return isalnum(ch) || ch == '.' || ch == '-' || ch == '_';
}

/* Parse one "HOST:PORT" of n bytes at s into sv. */
static int
parse_one(const char *s, size_t n, int idx, struct server *sv, char *err,
    size_t errlen)
{
	const char *colon, *h, *p;
	size_t hlen, i;
	unsigned long port;
	char *end;
	char buf[300];

	if (n >= sizeof(buf)) {
		cluster_set_err(err, errlen, "server %d: too long", idx);
		return -EINVAL;
	}
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (buf[0] == '[') {
		/* [IPv6]:port */
		if ((colon = strchr(buf, ']')) == NULL) {
			cluster_set_err(err, errlen,
			    "server %d (\"%s\"): no ']'", idx, buf);
			return -EINVAL;
		}
		h = buf + 1;
		hlen = colon - h;
		for (i = 0; i < hlen; i++)
			if (!isxdigit((unsigned char)h[i]) && h[i] != ':' &&
			    h[i] != '.') {
				cluster_set_err(err, errlen,
				    "server %d (\"%s\"): bad IPv6 address", idx,
				    buf);
				return -EINVAL;
			}
		colon++;
		if (*colon != ':') {
			cluster_set_err(err, errlen,
			    "server %d (\"%s\"): no port", idx, buf);
			return -EINVAL;
		}
	} else {
		h = buf;
		if ((colon = strrchr(buf, ':')) == NULL) {
			cluster_set_err(err, errlen,
			    "server %d (\"%s\"): no port (HOST:PORT)", idx,
			    buf);
			return -EINVAL;
		}
		hlen = colon - h;
		for (i = 0; i < hlen; i++)
			if (!host_char((unsigned char)h[i])) {
				cluster_set_err(err, errlen,
				    "server %d (\"%s\"): bad character in "
				    "host name",
				    idx, buf);
				return -EINVAL;
			}
	}
	if (hlen == 0) {
		cluster_set_err(
		    err, errlen, "server %d (\"%s\"): no host", idx, buf);
		return -EINVAL;
	}
	p = colon + 1;
	errno = 0;
	port = strtoul(p, &end, 10);
	if (*p == '\0' || !isdigit((unsigned char)*p) || *end != '\0' ||
	    errno != 0 || port == 0 || port > 65535) {
		cluster_set_err(err, errlen,
		    "server %d (\"%s\"): port must be 1..65535", idx, buf);
		return -EINVAL;
	}
	memcpy(sv->host, h, hlen);
	sv->host[hlen] = '\0';
	sv->port = (unsigned)port;
	return 0;
}

/* Parse servers into sv[CLUSTER_MAX_SERVERS]; *n servers. */
int
cluster_parse_servers(
    const char *servers, struct server *sv, int *n, char *err, size_t errlen)
{
	const char *s, *e, *a, *b;
	int i, k, r;

	if (servers == NULL || *servers == '\0') {
		cluster_set_err(err, errlen, "no servers");
		return -EINVAL;
	}
	k = 0;
	for (s = servers;; s = e + 1) {
		if ((e = strchr(s, ',')) == NULL)
			e = s + strlen(s);
		a = s;
		b = e;
		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if (a == b) {
			cluster_set_err(err, errlen, "server %d: empty", k + 1);
			return -EINVAL;
		}
		if (k == CLUSTER_MAX_SERVERS) {
			cluster_set_err(err, errlen, "more than %d servers",
			    CLUSTER_MAX_SERVERS);
			return -EINVAL;
		}
		if ((r = parse_one(a, b - a, k + 1, &sv[k], err, errlen)) != 0)
			return r;
		for (i = 0; i < k; i++)
			if (sv[i].port == sv[k].port &&
			    strcasecmp(sv[i].host, sv[k].host) == 0) {
				cluster_set_err(err, errlen,
				    "server %d (%s:%u): listed twice", k + 1,
				    sv[k].host, sv[k].port);
				return -EINVAL;
			}
		k++;
		if (*e == '\0')
			break;
	}
	*n = k;
	return 0;
}

int
cluster_check_servers(const char *servers, char *err, size_t errlen)
{
	struct server *sv;
	int n, r;

	if ((sv = calloc(CLUSTER_MAX_SERVERS, sizeof(*sv))) == NULL)
		return -ENOMEM;
	r = cluster_parse_servers(servers, sv, &n, err, errlen);
	free(sv);
	return r;
}

/* ---- the auth file ---------------------------------------------------- */

/*
 * Read the private file path (what) into buf[max + 1], NUL-terminated; *len
 * its length.  The file must be a regular file (opened without following a
 * symlink and without blocking on a FIFO), owned by the effective uid or
 * root, that neither group nor others can read or write, and at most max
 * bytes.  0, or -errno with why in err; the caller wipes buf.
 */
static int
read_private(const char *path, const char *what, char *buf, size_t max,
    size_t *len, char *err, size_t errlen)
{
	struct stat st;
	ssize_t got;
	size_t off;
	uid_t me = geteuid();
	int fd, r;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		r = -errno;
		if (errno == ELOOP)
			cluster_set_err(err, errlen,
			    "%s %s: a symbolic link; name the file itself",
			    what, path);
		else
			cluster_set_err(err, errlen, "%s %s: %s", what, path,
			    strerror(errno));
		return r;
	}
	if (fstat(fd, &st) == -1) {
		r = -errno;
		cluster_set_err(
		    err, errlen, "%s %s: %s", what, path, strerror(errno));
		goto out;
	}
	r = -EINVAL;
	if (!S_ISREG(st.st_mode)) {
		cluster_set_err(
		    err, errlen, "%s %s: not a regular file", what, path);
		goto out;
	}
	r = -EPERM;
	if (st.st_uid != me && st.st_uid != 0) {
		cluster_set_err(err, errlen,
		    "%s %s: owned by uid %u, not by %u (us) or root", what,
		    path, (unsigned)st.st_uid, (unsigned)me);
		goto out;
	}
	if (st.st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)) {
		cluster_set_err(err, errlen,
		    "%s %s: mode %03o lets group or others read it: chmod 600 "
		    "it",
		    what, path, (unsigned)(st.st_mode & 0777));
		goto out;
	}
	r = -EFBIG;
	if (st.st_size < 0 || (uint64_t)st.st_size > max) {
		cluster_set_err(err, errlen, "%s %s: larger than %zu bytes",
		    what, path, max);
		goto out;
	}
	off = 0;
	while (off <= max && (got = read(fd, buf + off, max + 1 - off)) != 0) {
		if (got == -1) {
			if (errno == EINTR)
				continue;
			r = -errno;
			cluster_set_err(err, errlen, "%s %s: %s", what, path,
			    strerror(errno));
			goto out;
		}
		off += (size_t)got;
	}
	if (off > max) { /* grew since the fstat */
		cluster_set_err(err, errlen, "%s %s: larger than %zu bytes",
		    what, path, max);
		goto out;
	}
	buf[off] = '\0';
	*len = off;
	r = 0;
out:
	close(fd);
	return r;
}

int
cluster_read_secret(
    const char *path, uint8_t *out, size_t *len, char *err, size_t errlen)
{
	char buf[CLUSTER_SECRET_MAX + 2];
	size_t n = 0;
	int r;

	/* One byte over the bound, so that a trailing newline may follow. */
	if ((r = read_private(path, "cluster_secret", buf,
		 CLUSTER_SECRET_MAX + 1, &n, err, errlen)) != 0)
		goto out;
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	r = -EINVAL;
	if (n < CLUSTER_SECRET_MIN || n > CLUSTER_SECRET_MAX) {
		cluster_set_err(err, errlen,
		    "cluster_secret %s: %zu bytes; a secret has %d to %d "
		    "(e.g. openssl rand -hex 32)",
		    path, n, CLUSTER_SECRET_MIN, CLUSTER_SECRET_MAX);
		goto out;
	}
	memcpy(out, buf, n);
	*len = n;
	r = 0;
out:
	explicit_bzero(buf, sizeof(buf));
	return r;
}

/* Read user and password from path into user[ulen], pass[plen]. */
int
cluster_read_auth(const char *path, char *user, size_t ulen, char *pass,
    size_t plen, char *err, size_t errlen)
{
	char buf[AUTH_MAX + 1], *nl, *l1, *l2, *p;
	size_t n = 0;
	int r;

	if ((r = read_private(
		 path, "cluster_auth", buf, AUTH_MAX, &n, err, errlen)) != 0) {
		explicit_bzero(buf, sizeof(buf));
		return r;
	}

	/* Two lines "user\npassword", or one "user password". */
	r = -EINVAL;
	l1 = buf;
	l2 = NULL;
	if ((nl = strchr(l1, '\n')) != NULL) {
		*nl = '\0';
		l2 = nl + 1;
		if ((nl = strchr(l2, '\n')) != NULL)
			*nl = '\0';
	}
	for (p = l1; *p; p++)
		if (*p == '\r')
			*p = '\0';
	if (l2 != NULL)
		for (p = l2; *p; p++)
			if (*p == '\r')
				*p = '\0';
	if (l2 == NULL || *l2 == '\0') {
		/* one line: split at the first blanks */
		if ((p = strpbrk(l1, " \t")) == NULL)
			goto bad;
		*p++ = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		l2 = p;
		for (p = l2 + strlen(l2);
		     p > l2 && (p[-1] == ' ' || p[-1] == '\t'); p--)
			p[-1] = '\0';
	}
	if (*l1 == '\0' || *l2 == '\0' || strpbrk(l1, " \t") != NULL)
		goto bad;
	if (strlen(l1) >= ulen || strlen(l2) >= plen)
		goto bad;
	strcpy(user, l1);
	strcpy(pass, l2);
	r = 0;
bad:
	if (r != 0)
		cluster_set_err(err, errlen,
		    "cluster_auth %s: expected \"USER PASSWORD\" or USER and "
		    "PASSWORD on two lines",
		    path);
	explicit_bzero(buf, sizeof(buf));
	return r;
}
