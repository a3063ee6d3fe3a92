#!/usr/bin/env bash
# test_mount.sh - mount a small dataset for real and check the namespace, the
# bytes of every batch (against feedfs-ref, read with cat and with dd of
# several block sizes), rank views, canonical names, the generated files,
# that everything is read-only, and determinism across a remount with
# another thread count (given with -o), with a warm cache.
. "$(dirname "$0")/lib.sh"

N=45 # 5 full batches of 8 and one of 5
ff_gen "$T/data" --n $N --classes 3 --seed 11
CFG=$T/feedfs.conf
ff_config "$CFG" "$T/data" threads=2
ff_job "$CFG" train
ff_job "$CFG" val shuffle=no epochs=1 \
	"pipeline=decode resize(72) center_crop(64) cache" dtype=uint8 layout=HWC

# The reference bytes, computed in-process.
for e in 0 1; do ff_ref "$CFG" train $e "$T/ref/train/$e"; done
ff_ref "$CFG" val 0 "$T/ref/val/0"
ff_ref --rank 1 --world 3 "$CFG" train 0 "$T/ref/train-r1w3/0"
[ "$(ls "$T/ref/train/0" | wc -l)" -eq 18 ] || ff_fail "feedfs-ref wrote $(ls "$T/ref/train/0" | wc -l) files, expected 18"

M=$T/mnt
ff_mount "$CFG" "$M"
ff_log "mounted, log $FF_LOG"

# ---- namespace ------------------------------------------------------------
[ -f "$M/README" ] && [ -s "$M/README" ] || ff_fail "README missing or empty"
grep -q train "$M/README" || ff_fail "README does not name the job train"
[ "$(ls "$M" | tr '\n' ' ')" = "README train val " ] || ff_fail "ls: $(ls "$M" | tr '\n' ' ')"
[ "$(ls -A "$M" | tr '\n' ' ')" = ".feedfs README train val " ] || ff_fail "ls -A: $(ls -A "$M" | tr '\n' ' ')"
[ -d "$M/.feedfs" ] || ff_fail ".feedfs is not a directory"
[ "$(ls "$M/train" | tr '\n' ' ')" = "epoch-0000 epoch-0001 errors.tsv info.json samples.tsv " ] ||
	ff_fail "ls train: $(ls "$M/train" | tr '\n' ' ')"
[ "$(ls "$M/val" | tr '\n' ' ')" = "epoch-0000 errors.tsv info.json samples.tsv " ] ||
	ff_fail "ls val: $(ls "$M/val" | tr '\n' ' ')"
ff_errno ENOENT "$M/train/epoch-0002"
ff_errno ENOENT "$M/val/epoch-0001"
ff_errno ENOENT "$M/nosuchjob"
ff_errno ENOENT "$M/train/epoch-0000/batch-000006.npy"
# Only canonical names resolve.
for name in epoch-1 epoch-01 epoch-00000 epoch-0000x epoch--001 Epoch-0000; do
	ff_errno ENOENT "$M/train/$name"
done
for name in batch-0.npy batch-0000000.npy batch-000000 batch-000000.NPY \
	batch-000000.lbl.npy batch-+00000.npy batch-000000.npy.x; do
	ff_errno ENOENT "$M/train/epoch-0000/$name"
done
for name in rank-0-of-0 rank-3-of-3 rank-1-of-1025 rank-01-of-3 rank-1-of-03 \
	rank-1-of- rank--1-of-3 rank-1-of-3x; do
	ff_errno ENOENT "$M/train/$name"
done
ff_errno ENOENT "$M/train/rank-1-of-3/epoch-0002"
ff_errno ENOENT "$M/train/rank-1-of-3/epoch-0000/batch-000002.npy"
ff_errno ENOTDIR "$M/train/info.json/x"
stat "$M/train/rank-0-of-1/epoch-0001/batch-000005.npy" >/dev/null
stat "$M/train/rank-1023-of-1024/epoch-0000/batch-000000.ids.npy" >/dev/null

# ---- batches: sizes at stat time, then bytes through cat and dd ------------
check_epoch() { # job epoch
	local job=$1 e=$2 d f ref
	d=$M/$job/epoch-$(printf %04d "$2")
	ref=$T/ref/$job/$e
	diff <(cd "$ref" && ls) <(ls "$d") >/dev/null || ff_fail "ls $d: $(ls "$d" | tr '\n' ' ')"
	for f in "$ref"/*; do
		f=$(basename "$f")
		[ "$(stat -c %s "$d/$f")" = "$(stat -c %s "$ref/$f")" ] ||
			ff_fail "$d/$f: stat size $(stat -c %s "$d/$f"), reference $(stat -c %s "$ref/$f")"
	done
	for f in "$ref"/*; do
		f=$(basename "$f")
		cat "$d/$f" >"$T/got" || ff_fail "cat $d/$f failed"
		cmp "$ref/$f" "$T/got" || ff_fail "cat $d/$f differs from feedfs-ref"
		dd if="$d/$f" bs=4096 status=none of="$T/got" || ff_fail "dd $d/$f failed"
		cmp "$ref/$f" "$T/got" || ff_fail "dd bs=4096 $d/$f differs"
		cmp <(cat "$d/$f") "$ref/$f" || ff_fail "second read of $d/$f differs"
	done
	# Odd block sizes, starting in the middle of the file.
	for f in batch-000001.npy batch-000005.npy batch-000000.labels.npy; do
		[ -e "$ref/$f" ] || continue
		cmp <(dd if="$d/$f" bs=1000 skip=3 status=none) \
			<(dd if="$ref/$f" bs=1000 skip=3 status=none) ||
			ff_fail "dd bs=1000 skip=3 $d/$f differs"
		cmp <(dd if="$d/$f" bs=777 skip=1 count=5 status=none) \
			<(dd if="$ref/$f" bs=777 skip=1 count=5 status=none) ||
			ff_fail "dd bs=777 skip=1 count=5 $d/$f differs"
		cmp <(tail -c 100 "$d/$f") <(tail -c 100 "$ref/$f") ||
			ff_fail "the last 100 bytes of $d/$f differ"
	done
}
check_epoch train 0
check_epoch train 1
check_epoch val 0
cmp -s "$T/ref/train/0/batch-000000.npy" "$T/ref/train/1/batch-000000.npy" &&
	ff_fail "epochs 0 and 1 have the same first batch"
ff_log "train epochs 0, 1 and val epoch 0 equal feedfs-ref (cat, dd)"

# Rank view 1 of 3 (not listed, but there).
[ -z "$(ls -a "$M/train" | grep rank)" ] || ff_fail "ls train lists rank views"
[ "$(ls "$M/train/rank-1-of-3" | tr '\n' ' ')" = "epoch-0000 epoch-0001 " ] ||
	ff_fail "ls rank-1-of-3: $(ls "$M/train/rank-1-of-3" | tr '\n' ' ')"
ff_cmp_tree "$T/ref/train-r1w3/0" "$M/train/rank-1-of-3/epoch-0000"
ff_log "rank-1-of-3 equals feedfs-ref --rank 1 --world 3"

# ---- generated files ---------------------------------------------------------
"$PY" - "$M" "$T/data" $N <<'EOF' || ff_fail "samples.tsv / info.json"
import json, os, sys
mnt, root, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = sorted(os.path.relpath(os.path.join(d, f), root)
               for d, _, fs in os.walk(root) for f in fs if f.endswith(".jpg"))
assert len(files) == n, len(files)
for job in ("train", "val"):
    lines = open(os.path.join(mnt, job, "samples.tsv")).read().splitlines()
    assert len(lines) == n, (job, len(lines))
    for i, line in enumerate(lines):
        sid, path, label = line.split("\t")
        assert int(sid) == i, line
        assert path == files[i], (line, files[i])
        assert int(label) == int(path.split("/")[0][len("class"):]), line
    info = json.load(open(os.path.join(mnt, job, "info.json")))
    assert info["batch_size"] == 8, info
    assert info["samples"] == n, info
    assert info["batches_per_epoch"] == 6, info
    assert info["num_classes"] == 3, info
    assert info["classes"] == ["class000", "class001", "class002"], info
    if job == "train":
        assert info["shape"] == [8, 3, 64, 64], info
        assert info["dtype"] == "float32" and info["layout"] == "CHW", info
        assert info["epochs"] == 2 and info["shuffle"] is True, info
    else:
        assert info["shape"] == [8, 64, 64, 3], info
        assert info["dtype"] == "uint8" and info["layout"] == "HWC", info
        assert info["epochs"] == 1 and info["shuffle"] is False, info
    st = os.stat(os.path.join(mnt, job, "info.json"))
    assert st.st_size == len(open(os.path.join(mnt, job, "info.json"), "rb").read())
EOF
grep -q '^feedfs_cache_hits_total' "$M/.feedfs/stats" || ff_fail "stats lacks feedfs_cache_hits_total"
grep -q '^feedfs_cache_misses_total{job="train"}' "$M/.feedfs/stats" || ff_fail "stats lacks per-job misses"
[ "$(ff_stat_value "$M" feedfs_cache_misses_total)" -gt 0 ] || ff_fail "a cold mount counted no cache miss"

# ---- read-only -----------------------------------------------------------------
touch "$M/x" 2>/dev/null && ff_fail "touch in the mount succeeded"
(echo > "$M/train/info.json") 2>/dev/null && ff_fail "writing info.json succeeded"
mkdir "$M/train/d" 2>/dev/null && ff_fail "mkdir succeeded"
rm -f "$M/train/info.json" 2>/dev/null && ff_fail "rm succeeded"
rm -f "$M/train/epoch-0000/batch-000000.npy" 2>/dev/null && ff_fail "rm of a batch succeeded"
mv "$M/train/info.json" "$M/train/info2.json" 2>/dev/null && ff_fail "mv succeeded"
ln -s x "$M/train/l" 2>/dev/null && ff_fail "symlink succeeded"
"$PY" - "$M" <<'EOF' || ff_fail "writes are not refused with EROFS"
import errno, os, sys
m = sys.argv[1]
def erofs(what, f):
    try:
        f()
    except OSError as e:
        assert e.errno == errno.EROFS, "%s: %s" % (what, e)
        return
    raise AssertionError("%s succeeded" % what)
erofs("open O_WRONLY", lambda: os.open(m + "/train/info.json", os.O_WRONLY))
erofs("open O_RDWR", lambda: os.open(m + "/train/epoch-0000/batch-000000.npy", os.O_RDWR))
erofs("open O_CREAT", lambda: os.open(m + "/train/new", os.O_WRONLY | os.O_CREAT, 0o644))
erofs("mkdir", lambda: os.mkdir(m + "/d"))
erofs("unlink", lambda: os.unlink(m + "/README"))
erofs("rename", lambda: os.rename(m + "/README", m + "/R"))
erofs("truncate", lambda: os.truncate(m + "/README", 0))
erofs("chmod", lambda: os.chmod(m + "/README", 0o777))
EOF
kill -0 "${FF_PID[$M]}" || ff_fail "feedfs died"
ff_umount "$M"
ff_log "unmounted cleanly"

# ---- remount with one thread (-o): the same bytes, from a warm cache ------------
ff_mount "$CFG" "$M" -o threads=1
grep -q '^feedfs_workers 1$' "$M/.feedfs/stats" || ff_fail "-o threads=1 not applied: $(grep '^feedfs_workers ' "$M/.feedfs/stats")"
# Another read order: epoch 1 backwards first.
for f in $(ls -r "$T/ref/train/1"); do
	cmp "$T/ref/train/1/$f" "$M/train/epoch-0001/$f" || ff_fail "after remount: train/epoch-0001/$f differs"
done
ff_cmp_tree "$T/ref/train/0" "$M/train/epoch-0000"
ff_cmp_tree "$T/ref/val/0" "$M/val/epoch-0000"
ff_cmp_tree "$T/ref/train-r1w3/0" "$M/train/rank-1-of-3/epoch-0000"
hits=$(ff_stat_value "$M" feedfs_cache_hits_total)
misses=$(ff_stat_value "$M" feedfs_cache_misses_total)
ff_log "after remount: cache hits $hits, misses $misses"
[ "$hits" -gt 0 ] || ff_fail "no cache hit after remount"
[ "$misses" -eq 0 ] || ff_fail "$misses cache misses after remount over a warm cache"
ff_log "remounted with -o threads=1: identical bytes, warm cache"

ff_term "$M"
ff_log "SIGTERM: unmounted, exit status 0"
exit 0
