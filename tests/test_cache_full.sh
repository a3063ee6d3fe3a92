#!/usr/bin/env bash
# test_cache_full.sh - a full disk (issue 40, section 3), on a 16M tmpfs
# made here (mount(2): root; skipped without it):
#   - cache_size = 1G there: clamped at mount to what cache_size = auto
#     would choose, said once in the log, and in .feedfs/stats
#     (feedfs_cache_size_clamped 1, feedfs_cache_size_bytes under 16M);
#   - the tmpfs filled by another file while the mount runs: job a's
#     epoch, cached before, still hits 48 of 48 and job b's (another
#     prefix) inserts nothing; feedfs_cache_enabled stays 1,
#     feedfs_cache_full is 1, said once; job a hits again after that;
#   - the file removed: job b's inserts come back, said once, and its
#     next epoch hits;
#   - feedfs-cache evict --older-than and clear on the full disk, through
#     the mount's control socket: they succeed and the space comes back;
#   - no mount: evict on a disk with less free than the cache's floor,
#     clear on one full to the last byte (the store's files removed), and
#     the next mount makes a new cache there.
# Every epoch read is compared with feedfs-ref's bytes.
. "$(dirname "$0")/lib.sh"

FC=$FF_BUILDDIR/feedfs-cache
FS=$T/fs
mkdir -p "$FS"
if ! mount -t tmpfs -o size=16M,mode=0700 feedfs-test "$FS" 2>"$T/mount.err"; then
	ff_skip "no tmpfs here: $(cat "$T/mount.err")"
fi
trap '_rc=$?; umount "$FS" 2>/dev/null || true; (exit $_rc); ff_cleanup' EXIT

ff_gen "$T/data" --n 48 --classes 3 --seed 5
CFG=$T/feedfs.conf
C=$FS/cache
# memory 64M: RocksDB's write buffers are 1M (flushed within an epoch);
# the cache's floor is 2M (an eighth of the tmpfs).
ff_config "$CFG" "$T/data" cache_dir="$C" cache_size=1G memory=64M
ff_job "$CFG" a epochs=1 \
	"pipeline=decode resize(128) cache random_resized_crop(64) flip(0.5) normalize(imagenet)"
ff_job "$CFG" b epochs=1 \
	"pipeline=decode resize(120) cache center_crop(64) normalize(imagenet)"
ff_ref "$CFG" a 0 "$T/ref-a"
ff_ref "$CFG" b 0 "$T/ref-b"

# read_epoch JOB OUT: every file of JOB's epoch 0 through $M, checked.
read_epoch() {
	rm -rf "$2"
	mkdir -p "$2"
	cp "$M/$1"/epoch-0000/* "$2"/
	ff_cmp_tree "$T/ref-$1" "$2"
}
stat_of() { ff_stat_value "$M" "$1"; }
fill() { dd if=/dev/zero of="$FS/filler" bs=64k 2>/dev/null || true; }
free_kb() { df -k --output=avail "$FS" | tail -1 | tr -d ' '; }

# ---- cache_size above the filesystem: clamped, said ------------------------
M=$T/mnt
ff_mount "$CFG" "$M"
LOG1=$FF_LOG
[ "$(grep -c "cache_size = 1.0G is more than the 16.0M that $C's filesystem holds: clamped to" "$LOG1")" = 1 ] ||
	{ cat "$LOG1"; ff_fail "the clamp of cache_size is not said once at mount"; }
[ "$(stat_of feedfs_cache_size_clamped)" = 1 ] || ff_fail "feedfs_cache_size_clamped is not 1"
bound=$(stat_of feedfs_cache_size_bytes)
[ "$bound" -gt 0 ] && [ "$bound" -lt $((16 << 20)) ] ||
	ff_fail "feedfs_cache_size_bytes $bound, expected within the 16M tmpfs"
ff_log "cache_size = 1G on a 16M tmpfs: clamped to $bound bytes"

# ---- the disk filled while the mount runs: hits go on ----------------------
read_epoch a "$T/a0"
[ "$(stat_of feedfs_cache_inserts_total)" = 48 ] ||
	ff_fail "job a inserted $(stat_of feedfs_cache_inserts_total), expected 48"
fill
[ "$(free_kb)" -lt 1024 ] || ff_fail "the tmpfs is not full: $(free_kb)K free"
# The store looks at its filesystem at most once a second: the first put
# after this one looks.
sleep 1.2
read_epoch a "$T/a1"
[ "$(stat_of feedfs_cache_hits_total)" = 48 ] ||
	ff_fail "full disk: job a hit $(stat_of feedfs_cache_hits_total) of 48"
read_epoch b "$T/b1"
[ "$(stat_of feedfs_cache_enabled)" = 1 ] || ff_fail "full disk: the cache is off"
[ "$(stat_of feedfs_cache_full)" = 1 ] || ff_fail "full disk: feedfs_cache_full is not 1"
[ "$(stat_of feedfs_cache_inserts_total)" = 48 ] ||
	ff_fail "full disk: job b inserted $(( $(stat_of feedfs_cache_inserts_total) - 48 ))"
[ "$(stat_of feedfs_cache_insert_failures_total)" -ge 1 ] ||
	ff_fail "full disk: no insert failure counted"
read_epoch a "$T/a2"
[ "$(stat_of feedfs_cache_hits_total)" = 96 ] ||
	ff_fail "after the failed inserts: $(stat_of feedfs_cache_hits_total) hits, expected 96"
grep -q "serving without the cache" "$LOG1" &&
	{ cat "$LOG1"; ff_fail "full disk: the log says the cache is off"; }
[ "$(grep -c "inserts stop until there is room; hits go on" "$LOG1")" = 1 ] ||
	{ cat "$LOG1"; ff_fail "full disk: not said once in the log"; }
ff_log "full disk: job a hits 96 of 96, job b inserts nothing, said once"

# ---- space back: inserts come back -----------------------------------------
rm -f "$FS/filler"
ins=48
for i in $(seq 30); do
	read_epoch b "$T/b2"
	ins=$(stat_of feedfs_cache_inserts_total)
	[ "$ins" -gt 48 ] && break
	sleep 1
done
[ "$ins" -gt 48 ] || ff_fail "space back: no insert in 30 epochs of job b"
h=$(stat_of feedfs_cache_hits_total)
read_epoch b "$T/b3"
[ "$(stat_of feedfs_cache_full)" = 0 ] || ff_fail "space back: feedfs_cache_full is still 1"
[ $(( $(stat_of feedfs_cache_hits_total) - h )) -ge $(( ins - 48 )) ] ||
	ff_fail "space back: $(( $(stat_of feedfs_cache_hits_total) - h )) hits on the $(( ins - 48 )) values inserted"
[ "$(grep -c "has room again .*: inserts resume" "$LOG1")" = 1 ] ||
	{ cat "$LOG1"; ff_fail "space back: not said once in the log"; }
ff_log "space back: job b inserted $((ins - 48)) and hit them"

# ---- feedfs-cache on the full disk, through the mount ----------------------
fill
before=$(du -sk "$C" | cut -f1)
"$FC" --cache-dir "$C" evict --older-than 0s >"$T/fc.out" 2>&1 ||
	{ cat "$T/fc.out"; ff_fail "evict --older-than 0s on a full disk failed"; }
grep -q "^evicted [1-9][0-9]* entries" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "evict evicted nothing"; }
after=$(du -sk "$C" | cut -f1)
[ "$after" -lt $((before - 1024)) ] ||
	ff_fail "evict on a full disk: the cache took ${before}K, then ${after}K"
ff_log "evict --older-than 0s on a full disk: $(cat "$T/fc.out"), ${before}K -> ${after}K"
read_epoch a "$T/a3" # refills what the filler left room for
fill
before=$(du -sk "$C" | cut -f1)
"$FC" --cache-dir "$C" clear >"$T/fc.out" 2>&1 ||
	{ cat "$T/fc.out"; ff_fail "clear on a full disk failed"; }
after=$(du -sk "$C" | cut -f1)
[ "$after" -lt "$before" ] && [ "$(stat_of feedfs_cache_entries)" = 0 ] ||
	ff_fail "clear on a full disk: ${before}K -> ${after}K, $(stat_of feedfs_cache_entries) entries left"
ff_log "clear on a full disk: $(cat "$T/fc.out"), ${before}K -> ${after}K"
read_epoch a "$T/a4"
ff_umount "$M"

# ---- no mount ------------------------------------------------------------------
rm -f "$FS/filler"
ff_mount "$CFG" "$M"
read_epoch a "$T/a5"
ff_umount "$M"
# Less free than the cache's floor (2M), more than opening the store needs.
fill
rm -f "$FS/filler"
dd if=/dev/zero of="$FS/filler" bs=64k count=$(( ($(free_kb) - 1536) / 64 )) 2>/dev/null
"$FC" --cache-dir "$C" evict --older-than 0s >"$T/fc.out" 2>&1 ||
	{ cat "$T/fc.out"; ff_fail "evict with no mount, $(free_kb)K free, failed"; }
grep -q "^evicted 48 entries" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "evict with no mount: not 48 entries"; }
ff_log "no mount, $(free_kb)K free: $(cat "$T/fc.out")"
rm -f "$FS/filler"
ff_mount "$CFG" "$M"
read_epoch a "$T/a6"
ff_umount "$M"
fill
[ "$(free_kb)" = 0 ] || ff_fail "the tmpfs is not full: $(free_kb)K free"
"$FC" --cache-dir "$C" clear >"$T/fc.out" 2>&1 ||
	{ cat "$T/fc.out"; ff_fail "clear with no mount on a full disk failed"; }
grep -q "^cleared the store.s files, [1-9][0-9]* bytes" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "clear did not say what it did"; }
[ "$(free_kb)" -gt 1024 ] || ff_fail "clear with no mount: $(free_kb)K free after it"
ff_log "no mount, a full disk: $(tr '\n' ' ' <"$T/fc.out")"
rm -f "$FS/filler"
ff_mount "$CFG" "$M"
read_epoch a "$T/a7"
[ "$(stat_of feedfs_cache_misses_total)" = 48 ] && [ "$(stat_of feedfs_cache_enabled)" = 1 ] ||
	ff_fail "after the store was removed: $(stat_of feedfs_cache_misses_total) misses, enabled $(stat_of feedfs_cache_enabled)"
ff_umount "$M"
ff_log "ok"
