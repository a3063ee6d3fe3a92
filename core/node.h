/*
 * node.h - the model (core/): the node's own config, read by every feedfs
 * of the node whatever its user (feedfs.conf(5), "THE NODE"):
 *
 *	# /etc/feedfs/node.conf (root's; $FEEDFS_NODE_CONF names another)
 *	[node]
 *	cache_total = 40%		# or a size: 500G
 *	cache_registry = /var/lib/feedfs/caches
 *
 * cache_total bounds all the caches with cache_size = auto on one
 * filesystem together, shared equally by the users who have one there
 * (each user's share split between their own caches); the users are
 * counted in cache_registry, a directory root makes 1777 (sticky), where
 * each cache leaves an entry of its own (cache/registry.c).
 */
#ifndef FEEDFS_NODE_H
#define FEEDFS_NODE_H

#include <stddef.h>
#include <stdint.h>

#define CFG_NODE_CONF SYSCONFDIR "/feedfs/node.conf"
#define CFG_NODE_REGISTRY "/var/lib/feedfs/caches"

struct cfg_node {
	char path[4096];      /* the file read, "" when there is none */
	uint64_t cache_total; /* bytes; 0: a share, or no bound */
	unsigned cache_pct;   /* 1..100 of the filesystem; 0: bytes, or none */
	char registry[4096];
};

/*
 * The node's config ($FEEDFS_NODE_CONF, else CFG_NODE_CONF): none is no
 * bound (all zero, path "").  A mistake is -EINVAL with "FILE:LINE:
 * message" in err.
 */
int cfg_node_load(struct cfg_node *n, char *err, size_t errlen);

#endif
