#!/usr/bin/env bash
# test_fuzz_wire.sh - the data socket's fuzz target (fuzz/fuzz_wire.c) run
# without libFuzzer for a bounded time: its seed corpus, then deterministic
# mutations of it (fuzz/replay.c) for FF_FUZZ_SECONDS (10).  In CI's
# ASan+UBSan pass too.  A crash or an abort of the target fails.
set -eu
secs=${FF_FUZZ_SECONDS:-10}
"$FF_BUILDDIR/fuzz/replay_wire" "$secs" "$FF_SRCDIR/fuzz/corpus/wire"
