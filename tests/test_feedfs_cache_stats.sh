#!/usr/bin/env bash
# test_feedfs_cache_stats.sh - feedfs-cache against a real mount (issue 26):
#  1. stats gives, per prefix, the hits and misses of the feedfs that holds
#     the directory (its own lookups), equal to its .feedfs/stats per job,
#     never "hits n/a" while that feedfs serves hits; 0 for a prefix it
#     has not looked up; n/a when no feedfs holds the directory; each of
#     the three pairs of hits and misses (the store's, a mount's, a
#     prefix's) says whose lookups it counts (issue 36);
#  2. after that feedfs is killed (kill -9) on a fresh cache, before it
#     wrote anything out, stats, ls and verify still read the store (no
#     "Not supported operation in secondary mode"), and a new mount serves
#     the reference's bytes over it;
#  3. evict --older-than takes the units s, m, h, d and w; any other unit
#     is a usage error that names the unit and the accepted ones, not "the
#     option is missing".
. "$(dirname "$0")/lib.sh"

FC=$FF_BUILDDIR/feedfs-cache
[ -x "$FC" ] || ff_fail "$FC is not built"
N=16
ff_gen "$T/data" --n $N --classes 2 --seed 23
CFG=$T/feedfs.conf
C=$T/cache
ff_config "$CFG" "$T/data" cache_dir="$C"
P72="decode resize(72)"
P96="decode resize(96)"
ff_job "$CFG" a epochs=2
ff_job "$CFG" c epochs=2 "pipeline=$P96 cache center_crop(64)" dtype=uint8 layout=HWC
for j in a c; do for e in 0 1; do ff_ref "$CFG" $j $e "$T/ref/$j/$e"; done; done

# read_check MNT JOB EPOCH: JOB's EPOCH through the mount equals the reference.
read_check() {
	local out=$T/out/$2/$3
	rm -rf "$out"
	mkdir -p "$out"
	cp "$1/$2"/epoch-000"$3"/* "$out/"
	ff_cmp_tree "$T/ref/$2/$3" "$out"
}
# prefix_field TEXT: the hits field of stats' line of prefix TEXT.
prefix_field() {
	awk -F'\t' -v p="$1" '$1 == "prefix" && $2 == p { print $6 }' "$T/fc.out"
}
# fc ARGS...: run feedfs-cache, output in $T/fc.out, must exit 0.
fc() {
	local rc=0
	"$FC" "$@" >"$T/fc.out" 2>"$T/fc.err" || rc=$?
	[ "$rc" -eq 0 ] || { cat "$T/fc.out" "$T/fc.err"; ff_fail "feedfs-cache $* exited $rc"; }
}

# ---- 1. per prefix, the owner's hits ------------------------------------------
M=$T/mnt
ff_mount "$CFG" "$M"
read_check "$M" a 0 # misses: the entries are made
read_check "$M" a 1 # hits
read_check "$M" c 0
# The mount may still read ahead: compare once its counts stood still
# across the stats command.
for jp in "a:$P72" "c:$P96"; do
	j=${jp%%:*} p=${jp#*:}
	for i in $(seq 60); do
		h=$(ff_stat_value "$M" "feedfs_cache_hits_total{job=\"$j\"}")
		m=$(ff_stat_value "$M" "feedfs_cache_misses_total{job=\"$j\"}")
		fc -c "$CFG" stats
		got=$(prefix_field "$p")
		[ "$h $m" = "$(ff_stat_value "$M" "feedfs_cache_hits_total{job=\"$j\"}") $(ff_stat_value "$M" "feedfs_cache_misses_total{job=\"$j\"}")" ] && break
		sleep 0.5
	done
	case "$got" in
	"hits $h misses $m "*) ;;
	*) cat "$T/fc.out"; ff_fail "stats: prefix $p says '$got', the mount counted $h hits and $m misses for job $j" ;;
	esac
done
# Epoch 1 may be read ahead before all of epoch 0's entries are stored:
# most of it hits, not always all.
h=$(ff_stat_value "$M" 'feedfs_cache_hits_total{job="a"}')
[ "$h" -gt 0 ] || ff_fail "job a's second epoch did not hit ($h hits)"
ff_log "stats: $(prefix_field "$P72")"
# Issue 36: three pairs of hits and misses (the store's, each mount's, each
# prefix's), each saying whose lookups it counts.
label() {
	grep -qP -- "$1" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "stats: no line matches '$1' ($2)"; }
}
label "^hits\t[0-9]+\tthe store's: lookups that found an entry, every mount's" "the store's hits"
label "^misses\t[0-9]+\tthe store's: lookups that found none, every mount's" "the store's misses"
label "^mount\t[0-9]+\towner\thits [0-9]+\tmisses [0-9]+\t$M\tthis mount's own lookups$" "a mount's"
label "^prefix\tdecode resize\\(72\\)\t.*\thits [0-9]+ misses [0-9]+ \([0-9.]+%: the owner's own lookups of this prefix" "a prefix's"
ff_umount "$M"
# A new owner counts from its start; a prefix it did not look up is 0.
ff_mount "$CFG" "$M"
read_check "$M" a 1
fc -c "$CFG" stats
case "$(prefix_field "$P72")" in "hits $N misses 0 "*) ;; *) cat "$T/fc.out"; ff_fail "stats after the remount: $P72" ;; esac
case "$(prefix_field "$P96")" in "hits 0 misses 0 "*) ;; *) cat "$T/fc.out"; ff_fail "stats after the remount: $P96 (not looked up)" ;; esac
ff_umount "$M"
fc -c "$CFG" stats
[ "$(prefix_field "$P72")" = "hits n/a" ] || { cat "$T/fc.out"; ff_fail "stats without a mount: prefix hits should be n/a"; }

# ---- 2. the owner killed on a fresh cache -----------------------------------------
rm -rf "$C"
ff_mount "$CFG" "$M"
read_check "$M" a 0
pid=${FF_PID[$M]}
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
unset "FF_PID[$M]"
fusermount3 -u -z "$M"
fc -c "$CFG" stats
grep -q "^entries	[0-9]" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "stats after kill -9: no entries line"; }
grep -q "^hits	n/a" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "stats after kill -9: hits should be n/a"; }
fc -c "$CFG" ls
fc --cache-dir "$C" verify
grep -q "^verified [0-9]* entries: 0 damaged$" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "verify after kill -9"; }
ff_log "after kill -9: $(cat "$T/fc.out")"
# stats made nothing in the store for a later mount to trip on.
ff_mount "$CFG" "$M"
read_check "$M" a 0
read_check "$M" a 1
ff_umount "$M"
fc --cache-dir "$C" verify
grep -q "^verified $N entries: 0 damaged$" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "verify after the remount"; }

# ---- 3. evict --older-than's units ----------------------------------------------
for age in 30 30s 10m 2h 7d 1w 5200w; do
	fc -c "$CFG" evict --older-than $age
	grep -q "^evicted 0 entries" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "evict --older-than $age dropped fresh entries"; }
done
for age in 1y 2x 1W 1wk 1.5h w -1d " 1d" 1e3 ""; do
	rc=0
	"$FC" -c "$CFG" evict --older-than "$age" >"$T/fc.out" 2>"$T/fc.err" || rc=$?
	[ "$rc" -eq 2 ] || { cat "$T/fc.out" "$T/fc.err"; ff_fail "evict --older-than '$age' exited $rc, expected 2"; }
	grep -q "s, m, h, d or w" "$T/fc.err" || { cat "$T/fc.err"; ff_fail "evict --older-than '$age': the error does not name the units"; }
	grep -q "needs one of" "$T/fc.err" && { cat "$T/fc.err"; ff_fail "evict --older-than '$age': said the option is missing"; }
done
grep -q -- "--older-than" "$T/fc.err" || ff_fail "the error does not name --older-than"
rc=0
"$FC" -c "$CFG" evict --older-than 5300w >/dev/null 2>"$T/fc.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "at most 100 years" "$T/fc.err" || { cat "$T/fc.err"; ff_fail "evict --older-than 5300w: expected 'at most 100 years'"; }
fc -c "$CFG" evict --older-than 0w
grep -q "^evicted $N entries" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "evict --older-than 0w"; }
ff_log "evict --older-than: s, m, h, d, w accepted; other units named"
