#!/usr/bin/env bash
# test_fuzz_replay.sh - a script test (tests/, over fuzz/): the fuzz
# targets of what crosses a process boundary into the cache
# (fuzz/fuzz_wire.c: the data socket's frames, both ends;
# fuzz/fuzz_cluster.c: the cluster tier's items; fuzz/fuzz_blob.c: its
# finished batches' heads and the readers' positions; fuzz/fuzz_cacheval.c: the
# value envelope and the index; fuzz/fuzz_tar.c: the tar shard reader;
# fuzz/fuzz_label.c: a shard sample's .json and .cls label;
# fuzz/fuzz_text.c: captions (a .json's field, a .txt, a sidecar's name,
# a manifest line's third column) and lists of labels, issue 39;
# fuzz/fuzz_remote.c: remote shards' URLs, brace ranges and responses;
# fuzz/fuzz_cred.c: the credentials' profile files, STS's XML, IMDS's JSON
# and times;
# fuzz/fuzz_http.c: the metrics listener's request heads;
# fuzz/fuzz_decode.c: the JPEG, PNG and WebP decoders;
# fuzz/fuzz_config.c: the config and class lists; fuzz/fuzz_check.c:
# feedfs --check's header reads; fuzz/fuzz_probe.c: the header probes in
# memory and through a reader, against the decoders (issue 35);
# fuzz/fuzz_ops.c: the pipeline's tail
# parsed and run on images of any size; fuzz/fuzz_augment.c: the
# augmentations on degenerate image sizes, issue 28; fuzz/fuzz_names.c: the
# mount's file names, views' included; fuzz/fuzz_cgroup.c: /proc/self/cgroup,
# mountinfo and the cgroup files, issue 40) run without libFuzzer for a
# bounded time:
# each seed corpus, then deterministic mutations of it (fuzz/replay.c), for
# FF_FUZZ_SECONDS (10) for the socket and half that for the others.  In
# CI's ASan+UBSan pass too.  A crash or an abort of a target fails.
set -eu
secs=${FF_FUZZ_SECONDS:-10}
half=$(( (secs + 1) / 2 ))
"$FF_BUILDDIR/fuzz/replay_wire" "$secs" "$FF_SRCDIR/fuzz/corpus/wire"
"$FF_BUILDDIR/fuzz/replay_cluster" "$half" "$FF_SRCDIR/fuzz/corpus/cluster"
"$FF_BUILDDIR/fuzz/replay_blob" "$half" "$FF_SRCDIR/fuzz/corpus/blob"
"$FF_BUILDDIR/fuzz/replay_cacheval" "$half" "$FF_SRCDIR/fuzz/corpus/cacheval"
"$FF_BUILDDIR/fuzz/replay_tar" "$half" "$FF_SRCDIR/fuzz/corpus/tar"
"$FF_BUILDDIR/fuzz/replay_tier_index" "$half" \
    "$FF_SRCDIR/fuzz/corpus/tier_index"
"$FF_BUILDDIR/fuzz/replay_label" "$half" "$FF_SRCDIR/fuzz/corpus/label"
"$FF_BUILDDIR/fuzz/replay_text" "$half" "$FF_SRCDIR/fuzz/corpus/text"
"$FF_BUILDDIR/fuzz/replay_remote" "$half" "$FF_SRCDIR/fuzz/corpus/remote"
"$FF_BUILDDIR/fuzz/replay_cred" "$half" "$FF_SRCDIR/fuzz/corpus/cred"
"$FF_BUILDDIR/fuzz/replay_http" "$half" "$FF_SRCDIR/fuzz/corpus/http"
"$FF_BUILDDIR/fuzz/replay_decode" "$half" "$FF_SRCDIR/fuzz/corpus/decode"
"$FF_BUILDDIR/fuzz/replay_config" "$half" "$FF_SRCDIR/fuzz/corpus/config"
"$FF_BUILDDIR/fuzz/replay_check" "$half" "$FF_SRCDIR/fuzz/corpus/check"
"$FF_BUILDDIR/fuzz/replay_probe" "$half" "$FF_SRCDIR/fuzz/corpus/probe"
"$FF_BUILDDIR/fuzz/replay_ops" "$half" "$FF_SRCDIR/fuzz/corpus/ops"
"$FF_BUILDDIR/fuzz/replay_augment" "$half" "$FF_SRCDIR/fuzz/corpus/augment"
"$FF_BUILDDIR/fuzz/replay_names" "$half" "$FF_SRCDIR/fuzz/corpus/names"
"$FF_BUILDDIR/fuzz/replay_cgroup" "$half" "$FF_SRCDIR/fuzz/corpus/cgroup"
