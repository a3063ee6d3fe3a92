#!/usr/bin/python3
"""test_empty_file.py - a zero-byte image has one reason everywhere (issue
36 §6): it was "not a JPEG" in the log and errors.tsv, and "empty file"
in --check.  Now --check lists it as "truncated: cls/zero.jpg: empty
file", and a mount's read of its batch fails (EIO) with "empty file" in
errors.tsv and the log, for a job whose crop is fused with the decode
(random_resized_crop first after cache: xf_decode_box) and one that
decodes whole.
"""

import errno
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

t = fflib.Test()
data = t.gen(t.path("data"), n=4, classes=1, seed=6)
cls = os.listdir(data)[0]
open(os.path.join(data, cls, "zero.jpg"), "wb").close()
rel = cls + "/zero.jpg"
cfg = t.config(t.path("f.conf"), data, {
    "fused": dict(batch_size=1, shuffle="no", epochs=1, dtype="uint8",
                  layout="HWC",
                  pipeline="decode cache random_resized_crop(32)"),
    "whole": dict(batch_size=1, shuffle="no", epochs=1, dtype="uint8",
                  layout="HWC", pipeline="decode resize(40) center_crop(32)")},
    cache_size=0)
r = subprocess.run([fflib.FEEDFS, "--check", cfg], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, timeout=300)
out = r.stdout.decode()
m = re.search(r"^  (\w+): %s: (.*)$" % re.escape(rel), out, re.M)
check(m and m.group(2) == "empty file", "--check: %s" % out)
log("--check: %s" % m.group(0).strip())
with fflib.Mount(t, cfg, t.path("mnt")) as mnt:
    for job in ("fused", "whole"):
        with open(mnt.p(job, "samples.tsv")) as f:
            ids = {x.split("\t")[1]: int(x.split("\t")[0])
                   for x in f.read().splitlines()}
        try:
            fflib.read_file(mnt.p(job, "epoch-0000", "batch-%06d.npy"
                                  % ids[rel]))
            fflib.fail("%s: the empty file's batch read" % job)
        except OSError as e:
            check(e.errno == errno.EIO, "%s: %s, want EIO" % (job, e))
        with open(mnt.p(job, "errors.tsv")) as f:
            rows = [x.split("\t") for x in f.read().splitlines()
                    if not x.startswith("#")]
        check(len(rows) == 1 and rows[0][1] == rel and
              rows[0][2].endswith("empty file"),
              "%s: errors.tsv %s, want the reason 'empty file'" % (job, rows))
        log("%s: errors.tsv: %s" % (job, "\t".join(rows[0])))
    check("not a JPEG" not in mnt.log(), "the log says 'not a JPEG':\n"
          + mnt.log())
log("ok")
