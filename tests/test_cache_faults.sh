#!/usr/bin/env bash
# test_cache_faults.sh - a cache_dir that cannot be used never fails a read:
#   - two mounts on one cache_dir: the second uses the first one's cache
#     (hits on what the first inserted);
#   - a damaged database is moved aside (named in the log), a fresh one made;
#   - a read-only cache_dir (a read-only tmpfs): served without the cache,
#     said once in the log and in .feedfs/stats.  (A full one is not a
#     failure: hits go on, inserts stop: tests/test_cache_full.sh.)
# Every epoch read is compared with feedfs-ref's bytes.  The tmpfs case
# needs mount(2) (root); without it it is skipped, the rest still runs.
. "$(dirname "$0")/lib.sh"

ff_gen "$T/data" --n 48 --classes 3 --seed 5
CFG=$T/feedfs.conf
C=$T/cache
# memory 64M: the cache gets 8M, so memtables of 1M are flushed (and fail
# on a full disk) within one epoch of these 48 images of 128x170.
ff_config "$CFG" "$T/data" cache_dir="$C" memory=64M
ff_job "$CFG" train epochs=1 \
	"pipeline=decode resize(128) cache random_resized_crop(64) flip(0.5) normalize(imagenet)"
ff_ref "$CFG" train 0 "$T/ref"

# read_epoch MNT OUT: every file of train's epoch 0 through the mount.
read_epoch() {
	rm -rf "$2"
	mkdir -p "$2"
	cp "$1"/train/epoch-0000/* "$2"/
}

# stat_of MNT NAME: the value of NAME in MNT/.feedfs/stats.
stat_of() { ff_stat_value "$1" "$2"; }

# ---- two mounts on one cache_dir -------------------------------------------
# The second is a client of the first (see test_cache_share.py for more).
M=$T/mnt
ff_mount "$CFG" "$M"
P1=${FF_PID[$(cd "$M" && pwd -P)]}
grep -q "owns the cache in $C" "$FF_LOG" ||
	{ cat "$FF_LOG"; ff_fail "the first mount does not say it owns $C"; }
ff_mount "$CFG" "$T/mnt2"
grep -q "attached to the cache in $C, owned by feedfs pid $P1" "$FF_LOG" ||
	{ cat "$FF_LOG"; ff_fail "the second mount does not say whose cache it uses"; }
read_epoch "$M" "$T/out1"
ff_cmp_tree "$T/ref" "$T/out1"
[ "$(stat_of "$M" feedfs_cache_enabled)" = 1 ] || ff_fail "first mount lost its cache"
[ "$(stat_of "$M" feedfs_cache_misses_total)" = 48 ] ||
	ff_fail "cold epoch: $(stat_of "$M" feedfs_cache_misses_total) misses, expected 48"
read_epoch "$T/mnt2" "$T/out1b"
ff_cmp_tree "$T/ref" "$T/out1b"
[ "$(stat_of "$T/mnt2" feedfs_cache_hits_total)" = 48 ] ||
	ff_fail "second mount: $(stat_of "$T/mnt2" feedfs_cache_hits_total) hits, expected 48"
ff_umount "$T/mnt2"
ff_umount "$M"
ff_log "two mounts: the second shares the first one's cache"

# ---- a damaged database ------------------------------------------------------
set -- "$C"/MANIFEST-*
[ -f "$1" ] || ff_fail "no MANIFEST in $C"
head -c 512 /dev/urandom >"$1"
ff_mount "$CFG" "$M"
grep -q "was damaged.*moved it aside to $C.corrupt-[0-9]\{8\}-[0-9]\{6\}" "$FF_LOG" ||
	{ cat "$FF_LOG"; ff_fail "the log does not name the moved-aside store"; }
aside=$(sed -n "s|.*moved it aside to \($C\.corrupt-[0-9-]*\).*|\1|p" "$FF_LOG")
[ -d "$aside" ] && [ -f "$aside/CURRENT" ] || ff_fail "$aside is not the old store"
read_epoch "$M" "$T/out2"
ff_cmp_tree "$T/ref" "$T/out2"
[ "$(stat_of "$M" feedfs_cache_enabled)" = 1 ] || ff_fail "the fresh cache is not in use"
[ "$(stat_of "$M" feedfs_cache_misses_total)" = 48 ] || ff_fail "the fresh cache was not empty"
ff_umount "$M"
# ... and the fresh one works: a remount hits.
ff_mount "$CFG" "$M"
read_epoch "$M" "$T/out3"
ff_cmp_tree "$T/ref" "$T/out3"
[ "$(stat_of "$M" feedfs_cache_hits_total)" = 48 ] ||
	ff_fail "after the move: $(stat_of "$M" feedfs_cache_hits_total) hits, expected 48"
ff_umount "$M"
ff_log "damaged store moved aside to $aside"

# ---- read-only: tmpfs -----------------------------------------------------------
# (mode 0700: cache_open refuses a cache_dir that others can write, as a
# tmpfs root is by default.)
FS=$T/fs
mkdir -p "$FS"
if ! mount -t tmpfs -o ro,size=1M,mode=0700 feedfs-test "$FS" 2>"$T/mount.err"; then
	ff_log "SKIP read-only cache_dir: $(cat "$T/mount.err")"
	exit 0
fi
trap '_rc=$?; umount "$FS" 2>/dev/null || true; (exit $_rc); ff_cleanup' EXIT

# check_without WHAT PATTERN: the cache of $M is off, and .feedfs/stats
# gives the error (matching PATTERN).
check_without() {
	local why=$1
	[ "$(stat_of "$M" feedfs_cache_enabled)" = 0 ] || ff_fail "$why: feedfs_cache_enabled is not 0"
	grep -q "^feedfs_cache_error{error=\".*$2.*\"} 1$" "$M/.feedfs/stats" ||
		{ grep cache_error "$M/.feedfs/stats"; ff_fail "$why: .feedfs/stats does not give the error"; }
}

ff_config "$T/ro.conf" "$T/data" cache_dir="$FS" memory=64M
ff_job "$T/ro.conf" train epochs=1 \
	"pipeline=decode resize(128) cache random_resized_crop(64) flip(0.5) normalize(imagenet)"
ff_mount "$T/ro.conf" "$M"
read_epoch "$M" "$T/out4"
ff_cmp_tree "$T/ref" "$T/out4"
check_without "read-only cache_dir" "Read-only file system"
ff_umount "$M"
[ "$(grep -c 'serving without the cache' "$FF_LOG")" = 1 ] ||
	{ cat "$FF_LOG"; ff_fail "read-only cache_dir: not said exactly once in the log"; }
umount "$FS"
ff_log "read-only cache_dir: served without the cache"

