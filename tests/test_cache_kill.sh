#!/usr/bin/env bash
# test_cache_kill.sh - kill -9 of the daemon in the middle of an epoch, then
# fusermount3 -u and a remount with the same cache_dir: the cache opens
# (RocksDB's lock went with the process), nothing torn or wrong is served
# (the epoch's bytes equal feedfs-ref's, i.e. a never-killed run's), and
# what had reached the disk before the kill is served from the cache.
. "$(dirname "$0")/lib.sh"

N=96
ff_gen "$T/data" --n $N --classes 3 --seed 13
CFG=$T/feedfs.conf
# memory 64M: memtables of 1M, so some values reach SST files before the
# kill and the remount has something to hit.
ff_config "$CFG" "$T/data" memory=64M
ff_job "$CFG" train epochs=2 \
	"pipeline=decode resize(128) cache random_resized_crop(64) flip(0.5) normalize(imagenet)"
for e in 0 1; do ff_ref "$CFG" train $e "$T/ref/$e"; done

M=$T/mnt
ff_mount "$CFG" "$M"
MP=$(cd "$M" && pwd -P)
PID=${FF_PID[$MP]}
# Part of epoch 0: 7 of its 12 batches, then kill while a reader is inside
# batch 7 (opened, its samples being decoded by the workers).
for b in 0 1 2 3 4 5 6; do
	cat "$M/train/epoch-0000/batch-00000$b.npy" >/dev/null
done
sleep 0.3 # the flushes of the full memtables (1M each) finish
cat "$M/train/epoch-0000/batch-000007.npy" >/dev/null 2>&1 &
READER=$!
kill -9 "$PID"
wait "$PID" 2>/dev/null || true
unset "FF_PID[$MP]"
wait "$READER" 2>/dev/null || true # ENOTCONN: the daemon is gone
fusermount3 -u "$M" 2>/dev/null || fusermount3 -uz "$M"
mountpoint -q "$M" && ff_fail "$M still mounted after fusermount3 -u"
ff_log "killed feedfs ($PID) mid-epoch"

ff_mount "$CFG" "$M"
# (Besides the role it took: the owner of the cache, no other mount runs.)
grep -i "cache:" "$FF_LOG" | grep -qv "owns the cache in" &&
	{ cat "$FF_LOG"; ff_fail "the cache said something after the kill"; }
[ "$(ff_stat_value "$M" feedfs_cache_enabled)" = 1 ] || ff_fail "the cache did not open after kill -9"
for e in 0 1; do
	mkdir -p "$T/out/$e"
	cp "$M"/train/epoch-000$e/* "$T/out/$e/"
	ff_cmp_tree "$T/ref/$e" "$T/out/$e"
	[ $e = 0 ] && h0=$(ff_stat_value "$M" feedfs_cache_hits_total)
done
# 7 batches of 65 KB values went into 1M memtables before the kill: what
# was flushed survives it.
[ "$h0" -gt 0 ] || ff_fail "nothing written before the kill was served from the cache"
hits=$(ff_stat_value "$M" feedfs_cache_hits_total)
misses=$(ff_stat_value "$M" feedfs_cache_misses_total)
ff_log "after the kill: $hits hits, $misses misses over 2 epochs"
[ $((hits + misses)) -eq $((2 * N)) ] || ff_fail "$hits hits + $misses misses, expected $((2 * N)) lookups"
# Epoch 1 runs after epoch 0 put every image (again): all hits.
[ "$hits" -ge "$N" ] || ff_fail "only $hits hits after the remount"
ff_umount "$M"
