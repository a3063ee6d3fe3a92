#!/usr/bin/env bash
# test_badinput.sh - what feedfs does with bad input:
#  (a) every broken config stops feedfs before anything is mounted, with exit
#      status 2 and "feedfs: FILE:LINE: message" naming the right line; so do
#      a bad -o value and a missing config file;
#  (b) broken JPEGs: on_error = fail gives EIO for exactly the batches that
#      hold them (others equal feedfs-ref) and logs the file; on_error =
#      substitute serves every batch as feedfs-ref computes it, without the
#      bad ids, and counts the substitutions;
#  (c) a missing or empty dataset directory without a config: exit 2.
. "$(dirname "$0")/lib.sh"

ff_gen "$T/data" --n 40 --classes 2 --seed 3
mkdir -p "$T/empty/class000" "$T/empty/class001" "$T/nojpeg/a"
echo "not an image" >"$T/nojpeg/a/readme.txt"
M=$T/mnt
mkdir -p "$M"

# ---- (a) broken configs ------------------------------------------------------
BASE=$T/base.conf
cat >"$BASE" <<EOF
# a good config; each case below breaks one line of it
[mount]
cache_dir = $T/cache
memory = 64M
threads = 1

[dataset data]
root = $T/data

[job train]
dataset = data
batch_size = 8
epochs = 1
pipeline = decode resize(72) cache random_resized_crop(64) flip(0.5) normalize(imagenet)
dtype = float32
layout = CHW
on_error = fail
EOF

# bad_case NAME "LINES" LINE TEXT [LINE TEXT ...]: replace the given lines
# of the base config; feedfs must fail naming one of LINES (space separated;
# for a few cases either the section header or the key is right).
bad_case() {
	local name=$1 lines=$2 cfg=$T/$1.conf l ok=no
	shift 2
	cp "$BASE" "$cfg"
	while [ $# -gt 0 ]; do
		"$PY" - "$cfg" "$1" "$2" <<'EOF'
import sys
path, n, text = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = open(path).read().split("\n")
while len(lines) < n:
    lines.append("")
lines[n - 1] = text
open(path, "w").write("\n".join(lines) + "\n")
EOF
		shift 2
	done
	ff_run_bad "$name" "$cfg" "$M"
	for l in $lines; do
		grep -q "^feedfs: $cfg:$l: " "$T/$name.err" && ok=yes
	done
	if [ $ok = no ]; then
		echo "---- $cfg"
		cat -n "$cfg"
		echo "---- stderr"
		cat "$T/$name.err"
		ff_fail "$name: expected 'feedfs: $cfg:LINE: ...' with LINE in {$lines}"
	fi
	ff_log "$name: $(grep "^feedfs: " "$T/$name.err" | head -1)"
}

# The base config is good (feedfs-ref loads it).
ff_ref "$BASE" train 0 "$T/ref-base"

bad_case unknown-key 12 12 "batchsize = 8"
bad_case unknown-section 10 10 "[jobs train]"
bad_case bad-size 4 4 "memory = 12Q"
bad_case threads-negative 5 5 "threads = -1"
bad_case batch-size-zero 12 12 "batch_size = 0"
bad_case epochs-not-a-number 13 13 "epochs = many"
bad_case unknown-op 14 14 "pipeline = decode resize(72) cache sharpen(2) random_resized_crop(64)"
bad_case random-before-cache 14 14 "pipeline = decode random_resized_crop(64) cache flip(0.5)"
bad_case flip-before-cache 14 14 "pipeline = decode resize(72) flip(0.5) center_crop(64) cache"
bad_case shape-not-fixed 14 14 "pipeline = decode resize(72) cache"
bad_case bad-op-argument 14 14 "pipeline = decode resize(0) cache center_crop(64)"
# issue 28: the augmentations' arguments and order
bad_case rand-augment-bad-n 14 14 "pipeline = decode resize(72) cache center_crop(64) rand_augment(0,9)"
bad_case rand-augment-bad-m 14 14 "pipeline = decode resize(72) cache center_crop(64) rand_augment(2,40)"
bad_case auto-augment-policy 14 14 "pipeline = decode resize(72) cache center_crop(64) auto_augment(svhn)"
bad_case grayscale-probability 14 14 "pipeline = decode resize(72) cache center_crop(64) grayscale(1.2)"
bad_case normalize-before-colour 14 14 "pipeline = decode resize(72) cache center_crop(64) normalize(imagenet) color_jitter(0.4)"
# issue 36: shrink and decode's argument
bad_case shrink-zero 14 14 "pipeline = decode shrink(0) cache random_resized_crop(64)"
bad_case shrink-no-size 14 14 "pipeline = decode shrink cache random_resized_crop(64)"
bad_case shrink-not-first 14 14 "pipeline = decode resize(300) shrink(200) cache random_resized_crop(64)"
bad_case shrink-then-crop 14 14 "pipeline = decode shrink(200) cache center_crop(64)"
bad_case decode-argument 14 14 "pipeline = decode(fast) resize(72) cache random_resized_crop(64)"
bad_case normalize-uint8 "14 15" 15 "dtype = uint8"
bad_case missing-dataset 11 11 "dataset = nosuch"
bad_case root-missing "7 8" 8 "root = $T/nosuchdir"
bad_case root-empty "7 8" 8 "root = $T/empty"
bad_case root-no-jpegs "7 8" 8 "root = $T/nojpeg"
bad_case bad-dtype 15 15 "dtype = float64"
bad_case bad-layout 16 16 "layout = WHC"
bad_case bad-on-error 17 17 "on_error = skip"
bad_case bad-bool 18 18 "shuffle = maybe"
bad_case syntax-no-equals 13 13 "epochs 1"
bad_case duplicate-job 19 19 "[job train]" 20 "dataset = data"
# Batch ops (issue 28): last, alpha > 0, a switch in 0..1, not blending
# uint8, not with gpu = on.
P="pipeline = decode resize(72) cache random_resized_crop(64) flip(0.5)"
bad_case batch-op-not-last 14 14 "$P mixup(0.2) normalize(imagenet)"
bad_case batch-op-twice 14 14 "$P normalize(imagenet) mixup(0.2) cutmix(1)"
bad_case mixup-alpha-negative 14 14 "$P normalize(imagenet) mixup(-0.2)"
bad_case cutmix-alpha-zero 14 14 "$P normalize(imagenet) cutmix(0)"
bad_case mixup-cutmix-switch 14 14 "$P normalize(imagenet) mixup_cutmix(0.2, 1.0, 1.5)"
bad_case mixup-cutmix-nargs 14 14 "$P normalize(imagenet) mixup_cutmix(0.2, 1.0)"
bad_case mixup-uint8 "14 15" 14 "$P mixup(0.2)" 15 "dtype = uint8"
bad_case mixup-gpu 14 14 "$P normalize(imagenet) mixup(0.2)" 18 "gpu = on"
grep -q "blends pixels" "$T/mixup-uint8.err" || ff_fail "mixup-uint8: message does not say why"
grep -q "batch op mixup" "$T/mixup-gpu.err" || ff_fail "mixup-gpu: message does not name the batch op"

# issue 28: the order rules and probabilities of the per-sample ops, each
# with the message that says why (bad_msg NAME TEXT: TEXT in its message).
bad_msg() {
	grep -qF -- "$2" "$T/$1.err" || { cat "$T/$1.err"; ff_fail "$1: the message lacks '$2'"; }
}
PRE="pipeline = decode resize(72) cache random_resized_crop(64)"
bad_case normalize-before-blur 14 14 "$PRE normalize(imagenet) gaussian_blur(5, 0.1, 2.0)"
bad_msg normalize-before-blur "gaussian_blur after normalize: normalize must come after every pixel op"
bad_case erasing-before-normalize 14 14 "$PRE random_erasing(0.25) normalize(imagenet)"
bad_msg erasing-before-normalize "random_erasing must come after normalize"
bad_case erasing-before-flip 14 14 "$PRE normalize(imagenet) random_erasing(0.25) flip(0.5)"
bad_msg erasing-before-flip "flip after random_erasing"
bad_case erasing-probability 14 14 "$PRE normalize(imagenet) random_erasing(1.5)"
bad_msg erasing-probability "random_erasing: probability 1.5 not in 0..1"
bad_case flip-probability 14 14 "$PRE flip(-0.5) normalize(imagenet)"
bad_msg flip-probability "flip: probability -0.5 not in 0..1"
bad_case blur-even-kernel 14 14 "$PRE gaussian_blur(4, 0.1, 2.0) normalize(imagenet)"
bad_msg blur-even-kernel "is not an odd number"
bad_case blur-before-cache 14 14 "pipeline = decode resize(72) gaussian_blur(5, 0.1, 2.0) center_crop(64) cache"
bad_msg blur-before-cache "random op gaussian_blur before cache"
bad_case erasing-uint8 "14 15" 14 "$PRE random_erasing(0.25)" 15 "dtype = uint8"
bad_msg erasing-uint8 "would erase to 0, black in uint8 pixel space"
bad_case erasing-gpu "10 18" 14 "$PRE normalize(imagenet) random_erasing(0.25)" 18 "gpu = yes"
bad_msg erasing-gpu "gpu = on: random_erasing is not supported"

# -o with a bad value, an unknown option, a missing config file.
ff_run_bad threads-abc -o threads=abc "$BASE" "$M"
grep -q "threads" "$T/threads-abc.err" || ff_fail "-o threads=abc: message does not name threads"
ff_run_bad memory-bad -o memory=lots "$BASE" "$M"
ff_run_bad unknown-flag --frobnicate "$BASE" "$M"
ff_run_bad missing-config "$T/nosuch.conf" "$M"
grep -q "nosuch.conf" "$T/missing-config.err" || ff_fail "missing config: message does not name the file"
ff_log "missing config: $(head -1 "$T/missing-config.err")"

# ---- (c) no config: a missing or empty dataset directory --------------------
ff_run_bad missing-dataset-dir "$T/nosuchdata" "$M"
grep -q "nosuchdata" "$T/missing-dataset-dir.err" || ff_fail "missing dataset dir: message does not name it"
ff_run_bad empty-dataset-dir "$T/empty" "$M" -o cache_dir="$T/cache"
ff_log "missing dataset dir: $(head -1 "$T/missing-dataset-dir.err")"

# ---- (b) broken JPEGs ----------------------------------------------------------
cp -a "$T/data" "$T/bad"
TRUNC=class000/img000006.jpg # baseline 4:2:2: cut in the middle of the scan
RAND=class001/img000013.jpg  # replaced with random bytes (no JPEG at all)
size=$(stat -c %s "$T/bad/$TRUNC")
truncate -s $((size / 2)) "$T/bad/$TRUNC"
"$PY" -c 'import random, sys; r = random.Random(42); sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(5000)))' >"$T/bad/$RAND"

for mode in fail substitute; do
	ff_config "$T/$mode.conf" "$T/bad" threads=2 memory=64M
	ff_job "$T/$mode.conf" train epochs=1 on_error=$mode batch_size=6
done
# The reference follows on_error: with substitute it serves every batch.
ff_ref "$T/substitute.conf" train 0 "$T/ref-sub"
if "$FFREF" "$T/fail.conf" train 0 "$T/ref-fail" 2>"$T/ref-fail.err"; then
	ff_fail "feedfs-ref succeeded on a dataset with broken JPEGs (on_error = fail)"
fi
grep -qE "img000006.jpg|img000013.jpg" "$T/ref-fail.err" || ff_fail "feedfs-ref's error does not name the file: $(cat "$T/ref-fail.err")"

# on_error = fail
ff_mount "$T/fail.conf" "$M"
id_trunc=$(awk -F'\t' -v p="$TRUNC" '$2 == p { print $1 }' "$M/train/samples.tsv")
id_rand=$(awk -F'\t' -v p="$RAND" '$2 == p { print $1 }' "$M/train/samples.tsv")
[ -n "$id_trunc" ] && [ -n "$id_rand" ] || ff_fail "broken files not in samples.tsv"
nb=$(ls "$T/ref-sub" | grep -c '[0-9]\.npy$')
nfail=0 failed=
for b in $(seq 0 $((nb - 1))); do
	f=$(printf 'batch-%06d' "$b")
	# The ids file is planned: readable even when the images are not.
	holds=$("$PY" -c 'import numpy as np, sys
ids = set(np.load(sys.argv[1]).tolist())
print(" ".join(s for s in sys.argv[2:] if int(s) in ids))' "$M/train/epoch-0000/$f.ids.npy" "$id_trunc" "$id_rand") ||
		ff_fail "$f.ids.npy cannot be read under on_error = fail"
	if [ -n "$holds" ]; then
		nfail=$((nfail + 1))
		failed="$failed ${holds// /,}"
		if cat "$M/train/epoch-0000/$f.npy" >/dev/null 2>"$T/cat.err"; then
			ff_fail "$f.npy holds broken sample(s) $holds but reads fine"
		fi
		grep -q "Input/output error" "$T/cat.err" || ff_fail "$f.npy: $(cat "$T/cat.err")"
		# and again: the failure is not forgotten
		cat "$M/train/epoch-0000/$f.npy" >/dev/null 2>&1 && ff_fail "$f.npy reads on the second try"
		ff_log "fail: $f (ids $holds) gives EIO"
	else
		for k in .npy .labels.npy .ids.npy; do
			cmp "$T/ref-sub/$f$k" "$M/train/epoch-0000/$f$k" ||
				ff_fail "on_error = fail: $f$k differs from feedfs-ref"
		done
	fi
done
[ "$nfail" -ge 1 ] || ff_fail "no batch holds the broken samples"
# Each failed batch names (at least) one of its broken files in the log.
for h in $failed; do
	case $h in
	"$id_trunc") p=$TRUNC ;;
	"$id_rand") p=$RAND ;;
	*) p="$TRUNC|$RAND" ;;
	esac
	grep -qE "$(echo "$p" | sed 's,class00[01]/,,g')" "$FF_LOG" || { cat "$FF_LOG"; ff_fail "the log does not name $p"; }
done
[ "$(ff_stat_value "$M" feedfs_sample_errors_total)" -ge "$nfail" ] || ff_fail "stats: sample errors $(ff_stat_value "$M" feedfs_sample_errors_total)"
[ "$(ff_stat_value "$M" feedfs_batch_errors_total)" -ge "$nfail" ] || ff_fail "stats: batch errors $(ff_stat_value "$M" feedfs_batch_errors_total)"
kill -0 "${FF_PID[$M]}" || ff_fail "feedfs died"
ff_umount "$M"

# on_error = substitute
ff_mount "$T/substitute.conf" "$M"
ff_cmp_tree "$T/ref-sub" "$M/train/epoch-0000"
"$PY" - "$M/train/epoch-0000" "$id_trunc" "$id_rand" <<'EOF' || ff_fail "substituted ids"
import glob, sys
import numpy as np
d, bad = sys.argv[1], {int(s) for s in sys.argv[2:]}
ids = np.concatenate([np.load(f) for f in sorted(glob.glob(d + "/*.ids.npy"))])
assert not bad & set(ids.tolist()), "bad ids served: %s" % (bad & set(ids.tolist()))
assert len(ids) == 40, len(ids)
# every good sample still comes; the substitutes are duplicates
assert set(ids.tolist()) == set(range(40)) - bad, sorted(set(range(40)) - set(ids.tolist()))
EOF
subs=$(ff_stat_value "$M" feedfs_substituted_total)
[ "$subs" -ge 2 ] || ff_fail "stats: feedfs_substituted_total = $subs, expected >= 2"
for p in "$TRUNC" "$RAND"; do
	[ "$(grep -c "$(basename "$p")" "$FF_LOG")" -eq 1 ] || { cat "$FF_LOG"; ff_fail "the log does not name $p exactly once"; }
done
ff_log "substitute: every batch equals feedfs-ref, $subs substitutions counted"
ff_umount "$M"
exit 0
