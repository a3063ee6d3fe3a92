/*
 * cred_http.c - layer: dataset/remote/ (the HTTP/S3 client; see cred.h): the
 * I/O of credential sources.  A file, read straight into the arena.  One
 * request of a credential source (STS, IMDS), made as every remote request is
 * (remote_easy_setup: TLS verified, no redirect followed, connect and total
 * timeouts, headers bounded; retried as remote_retryable says, c->retries
 * times), with a body of its own: the response's, of any status, kept up to
 * CRED_RESP_MAX bytes in the arena.  Each request has an easy handle of its
 * own, cleaned up at once, so that libcurl's copies of what it sent and
 * received are freed (and so zeroed, see cred_secret.c) before the call
 * returns, and over HTTPS its TLS cleanses the plaintext it decrypted into
 * its buffers.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset/remote/cred_int.h"

/* TLS (OpenSSL, libcurl's backend here) that zeroes its record buffers'
 * plaintext when it frees them: a response of a credential source holds
 * a secret. */
static CURLcode
on_ssl_ctx(CURL *e, void *ctx, void *arg)
{
	(void)e;
	(void)arg;
	SSL_CTX_set_options(ctx, SSL_OP_CLEANSE_PLAINTEXT);
	return CURLE_OK;
}

struct body {
	char *buf;
	size_t len;
	bool over;
};

static size_t
on_body(char *p, size_t sz, size_t n, void *arg)
{
	struct body *b = arg;
	size_t k = sz * n;

	if (b->len + k >= CRED_RESP_MAX) {
		b->over = true;
		return 0;
	}
	memcpy(b->buf + b->len, p, k);
	b->len += k;
	return k;
}

int
cred_http(struct remote_ctx *c, const struct cred_req *q, long *status,
    char **body, size_t *blen, char *err, size_t errlen)
{
	uint64_t seed = (uint64_t)getpid() ^ (uint64_t)time(NULL);
	struct body b = {cred_alloc(CRED_RESP_MAX), 0, false};
	int r = -EIO;

	if (b.buf == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	for (unsigned k = 0;; k++) {
		struct remote_xfer x = {0};
		struct curl_slist *l;
		CURL *e = curl_easy_init();
		CURLcode cc;

		b.len = 0;
		b.over = false;
		/* A Content-Length over the bound is refused at the headers. */
		x.buf = (uint8_t *)b.buf;
		x.cap = CRED_RESP_MAX - 1;
		if (e == NULL ||
		    remote_easy_setup(c, e, q->url, NULL, c->timeout_ms, &x) !=
			0) {
			curl_easy_cleanup(e);
			snprintf(err, errlen, "%s", strerror(ENOMEM));
			r = -ENOMEM;
			break;
		}
		for (struct curl_slist *h = q->hdrs; h != NULL; h = h->next) {
			if ((l = curl_slist_append(x.hdrs, h->data)) == NULL)
				break;
			x.hdrs = l;
		}
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, x.hdrs);
		/* CURLE_NOT_BUILT_IN with another TLS backend: then without */
		curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
		if (q->body != NULL) {
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, q->body);
			curl_easy_setopt(
			    e, CURLOPT_POSTFIELDSIZE, (long)q->body_len);
		} else if (strcmp(q->method, "GET") != 0)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, q->method);
		cc = curl_easy_perform(e);
		remote_xfer_done(&x);
		curl_easy_cleanup(e); /* its buffers zeroed as they are freed */
		bool over = b.over || x.overflow || x.resp.header_overflow;

		if (k < c->retries && !over &&
		    remote_retryable(cc, x.resp.status)) {
			usleep((useconds_t)remote_backoff_ms(k + 1, &seed) *
			       1000u);
			continue;
		}
		if (cc == CURLE_OK && !over) {
			*status = x.resp.status;
			*body = b.buf; /* transferred */
			*blen = b.len;
			b.buf[b.len] = '\0';
			return 0;
		}
		if (over)
			snprintf(err, errlen, "%s: a response over %u bytes",
			    q->what,
			    x.resp.header_overflow ? REMOTE_HEADER_MAX
						   : CRED_RESP_MAX);
		else
			snprintf(err, errlen, "%s: %s", q->what,
			    curl_easy_strerror(cc));
		break;
	}
	cred_free(b.buf);
	return r;
}

int
cred_read_file(
    const char *path, char **text, size_t *n, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	size_t got = 0;
	char *t;

	if (fd < 0) {
		int r = -errno;

		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > (off_t)CRED_FILE_MAX) {
		close(fd);
		snprintf(err, errlen, "%s: not a regular file of at most 1 MiB",
		    path);
		return -EINVAL;
	}
	/* read(2) straight into the arena: no stdio buffer holds it. */
	if ((t = cred_alloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, t + got, (size_t)st.st_size - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break; /* shorter than it was: what there is */
		got += (size_t)k;
	}
	close(fd);
	t[got] = '\0';
	*text = t;
	*n = got;
	return 0;
}

char *
cred_form_escape(const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	char *o = cred_alloc(n * 3 + 1), *p = o;

	if (o == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' ||
		    ch == '~')
			*p++ = (char)ch;
		else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	*p = '\0';
	return o;
}
