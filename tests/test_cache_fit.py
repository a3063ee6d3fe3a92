#!/usr/bin/python3
"""test_cache_fit.py - a cache too small for its job is said at mount
(issue 36 §3).

At cache_size = 20M, 12% of a job fit and every epoch decoded the rest
again, and only the stats showed it.  Now the start says, in one line,
what the job's prefix needs in its cache_format against cache_size: the
estimate --check makes (cachefit.h: the same sample of 16 images run and
encoded; --check scales it by the exact size from every header, the
mount by the image count).  Checked:
  - cache_size = 20M, raw: one warning line with the need and the
    share held, within 1.5x of --check's figure for the same config;
  - a lossless job at 20M: its line (a warning or, when it fits, the
    log's) says a smaller need, within 1.5x of --check's;
  - cache_size = 1G: no warning; the log has the info line "holds all".
"""

import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

t = fflib.Test()
data = t.gen(t.path("data"), n=200, classes=4, seed=36)
PIPE = "decode resize(256) cache center_crop(224)"
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def size_of(text):
    m = re.match(r"([0-9.]+) (B|KiB|MiB|GiB)", text)
    return float(m.group(1)) * UNITS[m.group(2)]


def conf(name, size, fmt="raw"):
    return t.config(t.path(name + ".conf"), data, {
        "train": dict(pipeline=PIPE, dtype="uint8", layout="HWC",
                      cache_format=fmt)},
        cache_dir=t.path("cache-" + name), cache_size=size)


def fit_lines(text):
    return [x for x in text.splitlines() if "cache_size" in x and
            "of it" in x]


def check_need(cfg):
    r = subprocess.run([fflib.FEEDFS, "--check", cfg], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    out = r.stdout.decode()
    m = re.search(r"^  cache_size .* of it \(([0-9.]+ \w+)\)", out, re.M)
    check(m, "--check said no cache_size line:\n" + out)
    return size_of(m.group(1))


cfg = conf("small", "20M")
want = check_need(cfg)
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    said = fit_lines(m.log())
    check(len(said) == 1 and "warning" in said[0],
          "the start should warn once:\n%s" % m.log())
    mm = re.search(r"job train needs ~([0-9.]+ \w+) in cache_format raw "
                   r".*cache_size 20\.0 MiB holds (\d+)% of it", said[0])
    check(mm, said[0])
    got = size_of(mm.group(1))
    check(want / 1.5 < got < want * 1.5,
          "the mount estimated %d bytes, --check %d" % (got, want))
    held = int(mm.group(2))
    check(abs(held - 100 * 20 * 2**20 / got) <= 1,
          "%d%% held of %d bytes" % (held, got))
    log("(raw, 20M) " + said[0].split("warning: ", 1)[1])
    log("(raw, 20M) --check's need: %.1f MiB" % (want / 2**20))
raw_need = got

cfg = conf("small-ll", "20M", "lossless")
want = check_need(cfg)
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    said = fit_lines(m.log())
    check(len(said) == 1, "one line on the cache's fit:\n%s" % m.log())
    mm = re.search(r"need[s]? ~([0-9.]+ \w+)", said[0])
    got = size_of(mm.group(1))
    check(want / 1.5 < got < want * 1.5 and got < raw_need,
          "lossless: the mount estimated %d bytes, --check %d, raw %d"
          % (got, want, raw_need))
    log("(lossless, 20M) " + said[0].split(": ", 2)[2])
    log("(lossless, 20M) --check's need: %.1f MiB" % (want / 2**20))

cfg = conf("big", "1G")
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    check(not [x for x in fit_lines(m.log()) if "warning" in x],
          "a cache that holds the job warned:\n" + m.log())
    with open(m.p(".feedfs", "log")) as f:
        text = f.read()
    said = [x for x in fit_lines(text) if "holds all of it" in x]
    check(len(said) == 1, "the log should say the cache holds it:\n" + text)
    log("(big) " + said[0].split("info: ", 1)[1])
log("ok")
