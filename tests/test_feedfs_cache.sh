#!/usr/bin/env bash
# test_feedfs_cache.sh - every feedfs-cache command (stats, ls, verify,
# evict --prefix, evict --older-than, compact, clear), first against a
# cache_dir that a running mount holds (reads through a secondary instance,
# writes through the daemon's control socket: the mount keeps serving the
# reference's bytes), then against one that no mount holds; verify finds
# damage (bytes flipped inside a table file) and exits 1; an age too large
# for evict --older-than is a usage error; the directory is 0700.
. "$(dirname "$0")/lib.sh"

FC=$FF_BUILDDIR/feedfs-cache
[ -x "$FC" ] || ff_fail "$FC is not built"
N=32
ff_gen "$T/data" --n $N --classes 2 --seed 17
GEN_T=$(date +%s)
CFG=$T/feedfs.conf
C=$T/cache
ff_config "$CFG" "$T/data" cache_dir="$C"
P72="decode resize(72)"
P96="decode resize(96)"
ff_job "$CFG" a epochs=1
ff_job "$CFG" b epochs=1 seed=3 batch_size=5
ff_job "$CFG" c epochs=1 "pipeline=$P96 cache center_crop(64)" dtype=uint8 layout=HWC
for j in a b c; do ff_ref "$CFG" $j 0 "$T/ref/$j"; done

# read_check MNT JOB: JOB's epoch 0 through the mount equals the reference.
read_check() {
	rm -rf "$T/out/$2"
	mkdir -p "$T/out/$2"
	cp "$1/$2"/epoch-0000/* "$T/out/$2/"
	ff_cmp_tree "$T/ref/$2" "$T/out/$2"
}
# field OUTPUT NAME: the value after NAME<TAB> in feedfs-cache stats output.
field() { awk -F'\t' -v n="$2" '$1 == n { print $2 }' "$1" | cut -d' ' -f1; }
# has_prefix TEXT N: stats output has "prefix TEXT N entries ...".
has_prefix() {
	awk -F'\t' -v p="$1" -v n="$2 entries" '$1 == "prefix" && $2 == p && $3 == n { f = 1 } END { exit !f }' "$T/fc.out"
}
# ls_has N TEXT JOBS: ls output has N entries of prefix TEXT used by JOBS.
ls_has() {
	awk -F'\t' -v n="$1" -v p="$2" -v j="$3" '$1 == n && $2 ~ /^[0-9.]+[BKMG]$/ && $3 == p && $4 == j { f = 1 } END { exit !f }' "$T/fc.out"
}
# fc ARGS...: run feedfs-cache, output in $T/fc.out, must exit 0.
fc() {
	"$FC" "$@" >"$T/fc.out" 2>"$T/fc.err" ||
		{ cat "$T/fc.out" "$T/fc.err"; ff_fail "feedfs-cache $* exited $?"; }
}

rc=0
"$FC" -c "$CFG" evict >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || ff_fail "evict without --prefix or --older-than exited $rc, expected 2"

# ---- with the mount running ---------------------------------------------------
M=$T/mnt
ff_mount "$CFG" "$M"
read_check "$M" a
read_check "$M" c
fc -c "$CFG" stats
[ "$(field "$T/fc.out" cache_dir)" = "$C" ] || ff_fail "stats: cache_dir is not $C (from -c)"
[ "$(field "$T/fc.out" entries)" = $((2 * N)) ] || { cat "$T/fc.out"; ff_fail "stats: expected $((2 * N)) entries"; }
[ "$(field "$T/fc.out" misses)" = "$(ff_stat_value "$M" feedfs_cache_misses_total)" ] ||
	{ cat "$T/fc.out"; ff_fail "stats: misses differ from the mount's .feedfs/stats"; }
[ "$(field "$T/fc.out" hits)" = "$(ff_stat_value "$M" feedfs_cache_hits_total)" ] ||
	{ cat "$T/fc.out"; ff_fail "stats: hits differ from the mount's .feedfs/stats"; }
has_prefix "$P72" $N || { cat "$T/fc.out"; ff_fail "stats: no line for $P72"; }
has_prefix "$P96" $N || { cat "$T/fc.out"; ff_fail "stats: no line for $P96"; }

fc -c "$CFG" ls
ls_has $N "$P72" a,b || { cat "$T/fc.out"; ff_fail "ls: $P72 is not used by a,b"; }
ls_has $N "$P96" c || { cat "$T/fc.out"; ff_fail "ls: $P96 is not used by c"; }

fc --cache-dir "$C" verify
grep -q "^verified $((2 * N)) entries: 0 damaged$" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "verify (mounted)"; }

fc -c "$CFG" evict --older-than 1h
grep -q "^evicted 0 entries" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "evict --older-than 1h dropped fresh entries"; }
fc -c "$CFG" evict --prefix "$P96"
grep -q "^evicted $N entries" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "evict --prefix $P96"; }
fc -c "$CFG" ls
grep -q "$P96" "$T/fc.out" && { cat "$T/fc.out"; ff_fail "ls still lists $P96 after evicting it"; }
fc -c "$CFG" compact
grep -q "^compacted$" "$T/fc.out" || ff_fail "compact (mounted)"
# b shares a's prefix: all hits, the reference's bytes.
read_check "$M" b
[ "$(ff_stat_value "$M" 'feedfs_cache_hits_total{job="b"}')" = $N ] || ff_fail "b did not hit a's entries"
fc -c "$CFG" clear
grep -q "^cleared $N entries" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "clear (mounted)"; }
fc -c "$CFG" stats
[ "$(field "$T/fc.out" entries)" = 0 ] || { cat "$T/fc.out"; ff_fail "entries left after clear"; }
# The mount still uses its cache; a remount misses a's cleared entries
# and still serves the reference's bytes.
[ "$(ff_stat_value "$M" feedfs_cache_enabled)" = 1 ] || ff_fail "the mount lost its cache"
ff_umount "$M"
# Sources older than the memo grain (2 s) by now: this read makes their
# digest memos.
while [ $(($(date +%s) - GEN_T)) -lt 4 ]; do sleep 0.5; done
ff_mount "$CFG" "$M"
read_check "$M" a
[ "$(ff_stat_value "$M" 'feedfs_cache_misses_total{job="a"}')" = $N ] || ff_fail "a hit after clear"
ff_umount "$M"
[ -e "$C/control.sock" ] && ff_fail "control.sock left after the unmount"
ff_log "every command with the mount running"

# ---- without a mount -------------------------------------------------------------
fc -c "$CFG" stats
# The cache is private to its owner (issue 12 item 8).
[ "$(stat -c %a "$C")" = 700 ] || ff_fail "$C is mode $(stat -c %a "$C"), expected 700"
[ "$(stat -c %a "$C/CURRENT")" = 600 ] || ff_fail "$C/CURRENT is mode $(stat -c %a "$C/CURRENT"), expected 600"
[ "$(field "$T/fc.out" entries)" = $N ] || { cat "$T/fc.out"; ff_fail "stats (unmounted): expected $N entries"; }
grep -q "^hits	n/a" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "stats (unmounted): hits should be n/a"; }
fc -c "$CFG" ls
ls_has $N "$P72" a,b || { cat "$T/fc.out"; ff_fail "ls (unmounted)"; }
fc --cache-dir "$C" verify
grep -q "^verified $N entries: 0 damaged$" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "verify (unmounted)"; }
fc -c "$CFG" evict --prefix "$P96"
grep -q "^evicted 0 entries" "$T/fc.out" || ff_fail "evict --prefix (unmounted): expected nothing"
# An age that overflows (issue 12 item 12) is a usage error and drops
# nothing; one past the epoch, but under the limit, drops nothing either.
rc=0
"$FC" -c "$CFG" evict --older-than 99999999999d >"$T/fc.out" 2>"$T/fc.err" || rc=$?
[ "$rc" -eq 2 ] || { cat "$T/fc.out" "$T/fc.err"; ff_fail "evict --older-than 99999999999d exited $rc, expected 2"; }
grep -q "at most 100 years" "$T/fc.err" || { cat "$T/fc.err"; ff_fail "evict --older-than 99999999999d: no usage message"; }
rc=0
"$FC" -c "$CFG" evict --older-than 9223372036854775807s >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || ff_fail "evict --older-than 9223372036854775807s exited $rc, expected 2"
fc -c "$CFG" evict --older-than 36500d
grep -q "^evicted 0 entries" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "evict --older-than 36500d: expected nothing"; }
fc -c "$CFG" stats
[ "$(field "$T/fc.out" entries)" = $N ] || { cat "$T/fc.out"; ff_fail "huge ages evicted entries"; }
[ "$(field "$T/fc.out" digest_memos)" = $N ] || { cat "$T/fc.out"; ff_fail "stats: expected $N digest memos"; }
fc -c "$CFG" compact
# Digest memos go with the entries (issue 25: they were never evicted).
fc -c "$CFG" evict --older-than 0s
grep -q "^evicted $N entries, [0-9]* bytes, $N digest memos" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "evict --older-than 0s (unmounted)"; }
fc -c "$CFG" stats
[ "$(field "$T/fc.out" digest_memos)" = 0 ] || { cat "$T/fc.out"; ff_fail "stats: digest memos left after evict --older-than 0s"; }
ff_mount "$CFG" "$M"
read_check "$M" c
ff_umount "$M"
fc -c "$CFG" clear
grep -q "^cleared $N entries" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "clear (unmounted)"; }

# ---- verify finds damage -----------------------------------------------------------
ff_mount "$CFG" "$M"
read_check "$M" a
ff_umount "$M"
sst=$(ls -S "$C"/*.sst | head -1)
size=$(stat -c %s "$sst")
for frac in 2 3 4 5 6; do
	printf '\xde\xad\xbe\xef\xde\xad\xbe\xef' |
		dd of="$sst" bs=1 seek=$((size * frac / 10)) conv=notrunc status=none
done
rc=0
"$FC" --cache-dir "$C" verify >"$T/fc.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat "$T/fc.out"; ff_fail "verify of a damaged store exited $rc, expected 1"; }
grep -q "^damaged" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "verify lists no damaged entry"; }
ff_log "verify: $(grep -c '^damaged' "$T/fc.out") damaged entries found"
# A mount over the damaged store still serves the reference's bytes.
ff_mount "$CFG" "$M"
read_check "$M" a
ff_umount "$M"
