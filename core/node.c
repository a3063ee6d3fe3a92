/*
 * node.c - the model (core/), beside the config parser: the node's config
 * (node.h), a [node] section of two keys.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/node.h"

static char *
trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* One "key = value" of [node]; 0, or -EINVAL with why. */
static int
node_key(
    struct cfg_node *n, const char *key, const char *val, char *why, size_t len)
{
	char *end;
	long pct;

	if (strcmp(key, "cache_total") == 0) {
		size_t l = strlen(val);

		if (l > 1 && val[l - 1] == '%') {
			errno = 0;
			pct = strtol(val, &end, 10);
			if (errno || end != val + l - 1 || pct < 1 ||
			    pct > 100) {
				snprintf(why, len,
				    "cache_total = %s: a share from 1%% to "
				    "100%%, or a size",
				    val);
				return -EINVAL;
			}
			n->cache_pct = (unsigned)pct;
			n->cache_total = 0;
		} else if (cfg_parse_size(val, &n->cache_total) != 0 ||
			   n->cache_total == 0) {
			snprintf(why, len,
			    "cache_total = %s: a size (like 500G) or a share "
			    "of the filesystem (like 40%%)",
			    val);
			return -EINVAL;
		} else
			n->cache_pct = 0;
		return 0;
	}
	if (strcmp(key, "cache_registry") == 0) {
		if (val[0] != '/' || strlen(val) >= sizeof(n->registry)) {
			snprintf(why, len,
			    "cache_registry = %s: an absolute path", val);
			return -EINVAL;
		}
		snprintf(n->registry, sizeof(n->registry), "%s", val);
		return 0;
	}
	snprintf(why, len,
	    "unknown key '%s' (expected cache_total, cache_registry)", key);
	return -EINVAL;
}

int
cfg_node_load(struct cfg_node *n, char *err, size_t errlen)
{
	const char *path = getenv("FEEDFS_NODE_CONF");
	char line[8192], why[512], *s, *eq;
	int lineno = 0, in_node = 0;
	FILE *fp;

	memset(n, 0, sizeof(*n));
	if (path == NULL || path[0] == '\0')
		path = CFG_NODE_CONF;
	if ((fp = fopen(path, "re")) == NULL) {
		if (errno == ENOENT)
			return 0; /* no node config: no bound */
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -EINVAL;
	}
	snprintf(n->path, sizeof(n->path), "%s", path);
	snprintf(n->registry, sizeof(n->registry), "%s", CFG_NODE_REGISTRY);
	while (fgets(line, sizeof(line), fp) != NULL) {
		lineno++;
		if (strchr(line, '\n') == NULL && !feof(fp)) {
			snprintf(why, sizeof(why), "a line over %zu bytes",
			    sizeof(line) - 2);
			goto bad;
		}
		if ((s = strpbrk(line, "#;")) != NULL)
			*s = '\0';
		s = trim(line);
		if (*s == '\0')
			continue;
		if (*s == '[') {
			in_node = strcmp(s, "[node]") == 0;
			if (!in_node) {
				snprintf(why, sizeof(why),
				    "unknown section %s (expected [node])", s);
				goto bad;
			}
			continue;
		}
		if (!in_node || (eq = strchr(s, '=')) == NULL) {
			snprintf(why, sizeof(why),
			    in_node ? "expected KEY = VALUE"
				    : "a key before [node]");
			goto bad;
		}
		*eq = '\0';
		if (node_key(n, trim(s), trim(eq + 1), why, sizeof(why)) != 0)
			goto bad;
	}
	fclose(fp);
	return 0;
bad:
	snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
	fclose(fp);
	memset(n, 0, sizeof(*n));
	return -EINVAL;
}
