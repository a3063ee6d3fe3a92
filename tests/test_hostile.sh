#!/usr/bin/env bash
# test_hostile.sh - the hostile inputs of issue 6 through a real mount:
#  (a) gen-hostile's set (CMYK, YCCK, arithmetic, 10000x3, PNGs: valid,
#      interlaced, named .jpg (decoded by magic bytes), a 65500x65500 IHDR,
#      bad IHDR and IDAT CRCs, a cut IDAT,
#      truncations, 12-bit, 65500x65500 bombs, 1x65500 and 65500x1 images
#      that resize(72) would make gigabytes, 576 progressive scans, odd
#      names, symlinks, those out of the root followed ...):
#      samples.tsv lists exactly the expected samples with their labels;
#      under on_error = fail each valid image's batch equals feedfs-ref and
#      each broken one's gives EIO, with exactly one log line naming the
#      file and the reason; under on_error = substitute every batch equals
#      feedfs-ref and each broken file is logged exactly once; the daemon
#      keeps serving and exits 0 on unmount;
#  (b) files deleted or rewritten after the mount: the deleted and the
#      garbled one fail (or are substituted), and so do one replaced by a
#      FIFO (without blocking a worker) and one grown to 600 MB; the
#      rewritten one serves its new content (never the cached old one);
#      nothing else changes;
#  (c) a dataset directory that vanishes (and comes back) while mounted:
#      reported per batch, not fatal; an unreadable one likewise (skipped as
#      root, who reads anything).
# One sample per batch and no shuffle, so batch k is sample k.
. "$(dirname "$0")/lib.sh"

GENHOSTILE=$FF_BUILDDIR/tests/gen-hostile
[ -x "$GENHOSTILE" ] || ff_fail "$GENHOSTILE is not built (run make check)"
M=$T/mnt
PIPE="decode resize(72) cache random_resized_crop(64) flip(0.5) normalize(imagenet)"

# ---- (a) the hostile set ----------------------------------------------------
"$GENHOSTILE" "$T/hostile" --outside "$T/outside" || ff_fail "gen-hostile failed"
H=$(cd "$T/hostile" && pwd -P)
for mode in fail substitute; do
	ff_config "$T/h-$mode.conf" "$H" threads=2 memory=256M readahead=2
	ff_job "$T/h-$mode.conf" train epochs=1 batch_size=1 shuffle=no \
		on_error=$mode pipeline="$PIPE"
done
ff_ref "$T/h-substitute.conf" train 0 "$T/ref-h"

# plan.tsv: id <TAB> expect <TAB> reason <TAB> path, from samples.tsv joined
# with gen-hostile's manifest; checks the scan against the manifest.
check_plan() {
	"$PY" - "$H/hostile.tsv" "$1" "$T/plan.tsv" <<'EOF'
import re, sys
man, samples, out = sys.argv[1:]
want = {}
for line in open(man, encoding="utf-8"):
    if line.startswith("#"):
        continue
    path, expect, label, reason, what = line.rstrip("\n").split("\t")
    want[path] = (expect, int(label), reason, what)
got = {}
esc = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}
for line in open(samples, encoding="utf-8"):
    i, path, label = line.rstrip("\n").split("\t")
    path = re.sub(r"\\(.)", lambda m: esc[m.group(1)], path)
    got[path] = (int(i), int(label))
listed = {p for p, w in want.items() if w[0] != "absent"}
missing, extra = listed - set(got), set(got) - listed
assert not missing and not extra, "samples.tsv: missing %s, extra %s" % (
    sorted(missing), sorted(extra))
with open(out, "w", encoding="utf-8") as f:
    for p, (i, label) in sorted(got.items(), key=lambda kv: kv[1][0]):
        assert label == want[p][1], "%s: label %d, expected %d" % (p, label, want[p][1])
        f.write("%d\t%s\t%s\t%s\n" % (i, want[p][0], want[p][2], p))
EOF
}

# log_count LOG PATH: lines of LOG naming "ROOT/PATH: ".
log_count() {
	grep -cF -- "$H/$2: " "$1" || true
}

# on_error = fail
ff_mount "$T/h-fail.conf" "$M"
check_plan "$M/train/samples.tsv" || ff_fail "samples.tsv does not match hostile.tsv"
nok=0 nbad=0
while IFS=$'\t' read -r id expect reason path; do
	f=$(printf 'batch-%06d' "$id")
	if [ "$expect" = ok ]; then
		for k in .npy .labels.npy .ids.npy; do
			cmp "$T/ref-h/$f$k" "$M/train/epoch-0000/$f$k" ||
				ff_fail "fail: $path: $f$k differs from feedfs-ref"
		done
		nok=$((nok + 1))
		continue
	fi
	if cat "$M/train/epoch-0000/$f.npy" >/dev/null 2>"$T/cat.err"; then
		ff_fail "fail: $path ($f) reads fine"
	fi
	grep -q "Input/output error" "$T/cat.err" || ff_fail "fail: $path: $(cat "$T/cat.err")"
	cmp -s "$T/ref-h/$f.ids.npy" "$M/train/epoch-0000/$f.ids.npy" &&
		ff_fail "fail: $path: ids.npy names a substitute"
	n=$(log_count "$FF_LOG" "$path")
	[ "$n" -eq 1 ] || { cat "$FF_LOG"; ff_fail "fail: $path is named on $n log lines, expected 1"; }
	grep -F -- "$H/$path: " "$FF_LOG" | grep -qF -- "$reason" ||
		ff_fail "fail: the log line of $path does not say '$reason': $(grep -F -- "$H/$path: " "$FF_LOG")"
	ff_log "fail: $path -> EIO; $(grep -F -- "$H/$path: " "$FF_LOG" | sed "s|$H/||")"
	nbad=$((nbad + 1))
done <"$T/plan.tsv"
[ "$nok" -ge 30 ] && [ "$nbad" -ge 15 ] || ff_fail "only $nok valid and $nbad broken samples"
[ "$(ff_stat_value "$M" feedfs_batch_errors_total)" -eq "$nbad" ] ||
	ff_fail "stats: batch errors $(ff_stat_value "$M" feedfs_batch_errors_total), expected $nbad"
kill -0 "${FF_PID[$M]}" || ff_fail "feedfs died"
ff_umount "$M"
ff_log "fail: $nok valid images equal feedfs-ref, $nbad broken ones give EIO, one log line each"

# on_error = substitute
ff_mount "$T/h-substitute.conf" "$M"
ff_cmp_tree "$T/ref-h" "$M/train/epoch-0000"
while IFS=$'\t' read -r id expect reason path; do
	[ "$expect" = bad ] || continue
	n=$(log_count "$FF_LOG" "$path")
	[ "$n" -eq 1 ] || { cat "$FF_LOG"; ff_fail "substitute: $path is named on $n log lines, expected 1"; }
	grep -F -- "$H/$path: " "$FF_LOG" | grep -F -- "$reason" | grep -qF "substituted" ||
		ff_fail "substitute: the log line of $path: $(grep -F -- "$H/$path: " "$FF_LOG")"
done <"$T/plan.tsv"
subs=$(ff_stat_value "$M" feedfs_substituted_total)
[ "$subs" -ge "$nbad" ] || ff_fail "stats: feedfs_substituted_total = $subs, expected >= $nbad"
ff_umount "$M"
ff_log "substitute: every batch equals feedfs-ref, $subs substitutions"

# ---- (b) files deleted or rewritten after the mount -----------------------------
ff_gen "$T/data" --n 12 --classes 2 --seed 5
D=$(cd "$T/data" && pwd -P)
# path_of ID: the relative path of sample ID (ids follow the sorted paths).
path_of() { (cd "$D" && find . -name '*.jpg' | sed 's|^\./||' | LC_ALL=C sort | sed -n "$(($1 + 1))p"); }
GONE=$(path_of 2) GARBLED=$(path_of 3) REWRITTEN=$(path_of 4) DONOR=$(path_of 5)
FIFO=$(path_of 6) HUGE=$(path_of 7)
[ "$(stat -c %s "$D/$REWRITTEN")" != "$(stat -c %s "$D/$DONOR")" ] || ff_fail "the donor has the same size"
# D2: the dataset as it will be after the changes, but with GONE still there
# (ids stay put), for the reference.
cp -a "$D" "$T/data2"
cp "$D/$DONOR" "$T/data2/$REWRITTEN"
head -c 3000 /dev/urandom >"$T/data2/$GARBLED"
for mode in fail substitute; do
	for d in data data2; do
		ff_config "$T/$d-$mode.conf" "$T/$d" threads=2 memory=64M readahead=0
		ff_job "$T/$d-$mode.conf" train epochs=3 batch_size=1 shuffle=no \
			on_error=$mode pipeline="$PIPE"
	done
done
ff_ref "$T/data-substitute.conf" train 0 "$T/ref-d0"
for e in 1 2; do
	ff_ref "$T/data-substitute.conf" train $e "$T/ref-d$e"
	ff_ref "$T/data2-substitute.conf" train $e "$T/ref-d2e$e"
done

ff_mount "$T/data-fail.conf" "$M"
# epoch 0 before the changes: digests and prefixes go to the cache
ff_cmp_tree "$T/ref-d0" "$M/train/epoch-0000"
rm "$D/$GONE"
cp "$T/data2/$GARBLED" "$D/$GARBLED"
cp "$D/$DONOR" "$D/$REWRITTEN"
# a FIFO must not block a worker in open(); a 600 MB file is refused unread
rm "$D/$FIFO"
mkfifo "$D/$FIFO"
truncate -s 600M "$D/$HUGE"
for b in $(seq 0 11); do
	f=$(printf 'batch-%06d' "$b")
	case $b in
	2 | 3 | 6 | 7)
		timeout 20 cat "$M/train/epoch-0001/$f.npy" >/dev/null 2>"$T/cat.err" &&
			ff_fail "changed files: batch $b (a deleted, garbled, FIFO or huge file) reads fine"
		grep -q "Input/output error" "$T/cat.err" ||
			ff_fail "changed files: batch $b: $(cat "$T/cat.err") (a hang?)"
		;;
	*)
		cmp "$T/ref-d2e1/$f.npy" "$M/train/epoch-0001/$f.npy" ||
			ff_fail "changed files: epoch 1 $f differs from feedfs-ref of the changed dataset"
		;;
	esac
done
grep -F "$D/$GONE: " "$FF_LOG" | grep -q "No such file" || ff_fail "the log does not report $GONE as gone"
grep -F "$D/$GARBLED: " "$FF_LOG" | grep -q "not a JPEG" || ff_fail "the log does not report $GARBLED"
grep -F "$D/$FIFO: " "$FF_LOG" | grep -q "not a regular file" || ff_fail "the log does not report the FIFO $FIFO"
grep -F "$D/$HUGE: " "$FF_LOG" | grep -q "file too large" || ff_fail "the log does not report the huge $HUGE"
rm "$D/$FIFO"
cp "$T/data2/$FIFO" "$D/$FIFO"
cp "$T/data2/$HUGE" "$D/$HUGE"
ff_log "changed files (fail): deleted and garbled -> EIO, rewritten -> its new bytes"

# ---- (c) the dataset directory vanishes, then comes back ----------------------
mv "$T/data" "$T/data.gone"
for b in 0 1; do
	f=$(printf 'batch-%06d' "$b")
	cat "$M/train/epoch-0002/$f.npy" >/dev/null 2>&1 &&
		ff_fail "vanished root: epoch 2 $f reads fine"
done
# Said once (issue 12 item 7), not once per sample or batch.
[ "$(grep -c "dataset root $D: No such file or directory" "$FF_LOG")" -eq 1 ] ||
	ff_fail "the log does not report the vanished root exactly once"
kill -0 "${FF_PID[$M]}" || ff_fail "feedfs died when its root vanished"
mv "$T/data.gone" "$T/data"
for b in 5 6 7; do
	f=$(printf 'batch-%06d' "$b")
	cmp "$T/ref-d2e2/$f.npy" "$M/train/epoch-0002/$f.npy" ||
		ff_fail "root back: epoch 2 $f differs from feedfs-ref"
done
grep -q "job train: the dataset can be read again" "$FF_LOG" ||
	ff_fail "the log does not say the root is back"
if [ "$(id -u)" != 0 ]; then
	chmod 000 "$D/$(dirname "$DONOR")"
	cat "$M/train/epoch-0002/batch-000009.npy" >/dev/null 2>&1 &&
		{ chmod 755 "$D/$(dirname "$DONOR")"; ff_fail "an unreadable class directory reads fine"; }
	chmod 755 "$D/$(dirname "$DONOR")"
	grep -q "Permission denied" "$FF_LOG" || ff_fail "the log does not report the unreadable directory"
	ff_log "unreadable class directory: EIO, reported"
else
	ff_log "unreadable directory: not tried as root (root reads anything)"
fi
cmp "$T/ref-d2e2/batch-000011.npy" "$M/train/epoch-0002/batch-000011.npy" ||
	ff_fail "epoch 2 batch 11 differs after the faults"
ff_umount "$M"
ff_log "vanished root: EIO while gone, right bytes once back, daemon exit 0"

# substitute: the deleted and the garbled sample are replaced by sample 4
# (GONE is back for the scan, and deleted again once mounted)
cp "$T/data2/$GONE" "$D/$GONE"
ff_mount "$T/data-substitute.conf" "$M"
rm "$D/$GONE"
for b in $(seq 0 11); do
	f=$(printf 'batch-%06d' "$b")
	case $b in
	2 | 3)
		"$PY" -c 'import numpy as np, sys; assert np.load(sys.argv[1]).tolist() == [4]' \
			"$M/train/epoch-0001/$f.ids.npy" || ff_fail "substitute: batch $b is not sample 4"
		cmp "$M/train/epoch-0001/batch-000004.npy" "$M/train/epoch-0001/$f.npy" ||
			ff_fail "substitute: batch $b differs from batch 4"
		;;
	*)
		cmp "$T/ref-d2e1/$f.npy" "$M/train/epoch-0001/$f.npy" ||
			ff_fail "substitute: epoch 1 $f differs from feedfs-ref of the changed dataset"
		;;
	esac
done
for p in "$GONE" "$GARBLED"; do
	[ "$(grep -cF "$D/$p: " "$FF_LOG")" -eq 1 ] || { cat "$FF_LOG"; ff_fail "substitute: $p is not logged exactly once"; }
done
ff_umount "$M"
ff_log "changed files (substitute): replaced by the next good sample, logged once each"
exit 0
