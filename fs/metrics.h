/*
 * metrics.h - fs/ (the FUSE glue), under main.c: -o metrics=ADDR:PORT, an
 * HTTP listener that serves .feedfs/stats to Prometheus, every series
 * labelled mount="MOUNTPOINT" (two mounts of a node told apart).
 *
 * Bounded whatever its clients do: at most FS_METRICS_CONNS connections
 * (a new one evicts the oldest), a request head of FS_METRICS_HEAD_MAX
 * bytes, FS_METRICS_DEADLINE_MS from accept to the last byte sent, one
 * request per connection; one thread, which never blocks on a client
 * (non-blocking sockets, poll): a slow or silent client costs a slot for
 * the deadline, never a stall of the mount nor memory past the bound
 * (FS_METRICS_CONNS x (head + one stats text)).
 */
#ifndef FEEDFS_METRICS_H
#define FEEDFS_METRICS_H

#include <stddef.h>

#define FS_METRICS_CONNS 8
#define FS_METRICS_HEAD_MAX 4096
#define FS_METRICS_DEADLINE_MS 5000

struct feed;
struct fs_metrics;

/*
 * Bind and listen on spec: HOST:PORT, [IPV6]:PORT, or PORT alone (then
 * 127.0.0.1).  Before the mount, so that a port taken is said then.
 * 0, or -errno with err ("-o metrics=SPEC: why").
 */
int fs_metrics_open(
    const char *spec, struct fs_metrics **out, char *err, size_t errlen);
/* Serve feed's stats, labelled with mnt, from a thread of its own (its
 * address said in the log).  0, or -errno. */
int fs_metrics_start(struct fs_metrics *m, struct feed *feed, const char *mnt);
/* The thread ended (if started), every socket closed; NULL is fine. */
void fs_metrics_free(struct fs_metrics *m);

#endif
