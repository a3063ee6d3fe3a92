#!/usr/bin/env bash
# test_schedule_config.sh - the config keys of resolution schedules, views
# and the two seeds (issue 28): every bad form stops feedfs before anything
# is mounted, with exit status 2 and "feedfs: FILE:LINE: message" naming the
# line of the bad key, and a message that says what is wrong; the good forms
# load (feedfs-ref runs them).
. "$(dirname "$0")/lib.sh"

ff_gen "$T/data" --n 12 --classes 2 --seed 3
M=$T/mnt
mkdir -p "$M"

# The base: a [job train] section whose last line is line 13; each case
# appends its lines after it (the first appended line is line 14).
BASE=$T/base.conf
cat >"$BASE" <<EOF
# a good config; each case below appends lines to [job train]
[mount]
cache_dir = $T/cache
memory = 64M
threads = 1

[dataset data]
root = $T/data

[job train]
batch_size = 4
epochs = 4
pipeline = decode resize(72) cache random_resized_crop(64) flip(0.5) normalize(imagenet)
EOF

# bad NAME LINE WORDS LINES...: append LINES (one argument each) to the
# base; feedfs must exit 2 naming line LINE and saying WORDS (a grep -E
# pattern).
bad() {
	local name=$1 line=$2 words=$3 cfg=$T/$1.conf
	shift 3
	cp "$BASE" "$cfg"
	printf '%s\n' "$@" >>"$cfg"
	ff_run_bad "$name" "$cfg" "$M"
	if ! grep -q "^feedfs: $cfg:$line: " "$T/$name.err" ||
	    ! grep -Eq "$words" "$T/$name.err"; then
		cat -n "$cfg"
		cat "$T/$name.err"
		ff_fail "$name: expected 'feedfs: $cfg:$line: ...' saying /$words/"
	fi
	ff_log "$name: $(grep "^feedfs: " "$T/$name.err" | head -1)"
}

# good NAME LINES...: the base with LINES appended loads (feedfs-ref makes
# epoch 0 of it).
good() {
	local name=$1 cfg=$T/$1.conf
	shift
	cp "$BASE" "$cfg"
	printf '%s\n' "$@" >>"$cfg"
	ff_ref "$cfg" train 0 "$T/ref-$name"
}

good res "resolution = 160..192 @ epochs 0..13"
good res-blanks "resolution = 32 .. 65504   @   epochs 2 .. 3"
good res-odd "resolution = 160..171 @ epochs 11..13"
good seeds "shuffle_seed = 1" "aug_seed = 18446744073709551615"
good views "views = 3" "view.2 = random_resized_crop(32, 0.05, 0.4) flip(0.5)" \
	"view.1 = flip(0.5) center_crop(48)"
# The augmentations and random_erasing in a view's tail (after normalize).
good views-augment "views = 3" \
	"view.1 = random_resized_crop(32) flip(0.5) trivial_augment normalize(imagenet) random_erasing(0.5)" \
	"view.2 = center_crop(48) rand_augment(2, 9) color_jitter(0.4, 0.4, 0.4, 0.1) normalize(imagenet)"

# ---- resolution ---------------------------------------------------------
bad res-empty 14 "no value" "resolution ="
bad res-one-size 14 "LO\.\.HI" "resolution = 160 @ epochs 0..13"
bad res-no-at 14 "'@ epochs" "resolution = 160..192 0..13"
bad res-no-word 14 "'epochs'" "resolution = 160..192 @ 0..13"
bad res-word-glued 14 "'epochs'" "resolution = 160..192 @ epochs0..13"
bad res-no-epochs 14 "E0\.\.E1" "resolution = 160..192 @ epochs"
bad res-one-epoch 14 "E0\.\.E1" "resolution = 160..192 @ epochs 5"
bad res-negative 14 "LO\.\.HI" "resolution = -160..192 @ epochs 0..13"
bad res-real 14 "LO\.\.HI|'@ epochs" "resolution = 160.5..192 @ epochs 0..13"
bad res-trailing 14 "text after" "resolution = 160..192 @ epochs 0..13 linear"
bad res-tiny 14 "32 <= LO <= HI <= 65504" "resolution = 31..192 @ epochs 0..13"
bad res-huge 14 "32 <= LO <= HI <= 65504" "resolution = 160..65505 @ epochs 0..13"
bad res-down 14 "32 <= LO <= HI <= 65504" "resolution = 192..160 @ epochs 0..13"
bad res-too-many-digits 14 "LO\.\.HI" "resolution = 1234567890..192 @ epochs 0..13"
bad res-epochs-backwards 14 "first epoch must be below" "resolution = 160..192 @ epochs 13..0"
bad res-epochs-equal 14 "first epoch must be below" "resolution = 160..192 @ epochs 3..3"
bad res-epochs-over 14 "up to 9999" "resolution = 160..192 @ epochs 0..10000"
bad res-twice 15 "given twice" "resolution = 160..192 @ epochs 0..1" "resolution = 160..192 @ epochs 0..2"
# The op that fixes the size must come after cache, and be square (in a
# second job: line 14 is its header).
bad res-size-before-cache 16 "before cache" "[job other]" \
	"pipeline = decode resize(72) center_crop(64) cache normalize(imagenet)" \
	"resolution = 160..192 @ epochs 0..1"
bad res-not-square 16 "square" "[job other]" \
	"pipeline = decode resize(72) cache center_crop(64, 48) normalize(imagenet)" \
	"resolution = 160..192 @ epochs 0..1"

# ---- the seeds -----------------------------------------------------------
bad shuffle-seed-negative 14 "shuffle_seed" "shuffle_seed = -1"
bad aug-seed-word 14 "aug_seed" "aug_seed = random"
bad aug-seed-overflow 14 "aug_seed" "aug_seed = 18446744073709551616"

# ---- views ---------------------------------------------------------------
bad views-zero 14 "views" "views = 0"
bad views-too-many 14 "1 to 64" "views = 65"
bad view-past-views 15 "views 0 to 1" "views = 2" "view.2 = flip(0.5) center_crop(32)"
bad view-without-views 14 "views 0 to 0" "view.1 = flip(0.5) center_crop(32)"
bad view-zero 15 "view 0 is the job's pipeline" "views = 2" "view.0 = center_crop(32)"
bad view-name 15 "view\.K or view\.K-L" "views = 2" "view.one = center_crop(32)"
bad view-leading-zero 15 "view\.K or view\.K-L" "views = 2" "view.01 = center_crop(32)"
bad view-range-backwards 15 "K <= L" "views = 8" "view.5-2 = center_crop(32)"
bad view-range-open 15 "view\.K or view\.K-L" "views = 8" "view.2- = center_crop(32)"
bad view-range-huge 15 "K <= L" "views = 8" "view.2-99999999999999999999 = center_crop(32)"
bad view-overlap 16 "view 3 is also given at line 15" "views = 8" \
	"view.1-3 = center_crop(32)" "view.3-5 = center_crop(16)"
bad view-empty 15 "no value" "views = 2" "view.1 ="
bad view-bad-op 15 "view\.1: pipeline.*sharpen" "views = 2" "view.1 = sharpen(2) center_crop(32)"
bad view-second-cache 15 "view\.1: pipeline.*second cache" "views = 2" "view.1 = cache center_crop(32)"
bad view-decode 15 "view\.1: pipeline.*second decode" "views = 2" "view.1 = decode center_crop(32)"
bad view-size-not-fixed 15 "view\.1: pipeline.*not fixed" "views = 2" "view.1 = flip(0.5)"
bad view-normalize-uint8 18 "view\.1: normalize needs" "[job other]" "dtype = uint8" \
	"pipeline = decode resize(72) cache center_crop(64)" "views = 2" \
	"view.1 = center_crop(32) normalize(imagenet)"
bad views-no-cache 16 "no cache op" "[job other]" \
	"pipeline = decode random_resized_crop(64) flip(0.5)" "views = 2"
bad views-relaxed 15 "order = strict" "order = relaxed" "views = 2"
bad views-gpu 15 "gpu = off" "gpu = on" "views = 2"
# A batch op's soft labels are one file per batch, shared by the views:
# refused, in the pipeline and in a view's tail.
bad views-batch-op 16 "batch op cutmix.*not supported" "[job other]" \
	"pipeline = decode resize(72) cache random_resized_crop(64) normalize(imagenet) cutmix(1.0)" \
	"views = 2"
bad view-batch-op 15 "view\.1: a batch op.*not supported" "views = 2" \
	"view.1 = random_resized_crop(32) normalize(imagenet) mixup(0.2)"

ff_log "PASS"
