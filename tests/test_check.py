#!/usr/bin/python3
"""test_check.py - `feedfs --check CONFIG|DIR` (issue 26): a script test
(tests/) of the model's check (core/check*.c) run as the program.

(a) A folder of real files (gen-jpegs' JPEGs, a PNG, a WebP) with a JPEG
    cut short, a PNG and a WebP cut short, a .bmp, a text file and an empty
    class directory: exit status 1, one line per problem (truncated: the
    three cut files; unsupported: the .bmp, as a BMP image; skipped: the
    text file, not a problem), the count of each class, the empty class,
    the summary; the same folder without the problems: exit 0 and "no
    problems".
(b) The raw cache size is exact: a mount of the same job (prefix
    `decode resize(40)`, shapes vary by image) reads one epoch, and the
    cache then holds exactly the pixel bytes --check said (feedfs-cache
    stats: bytes less 80 a value header); the lossless estimate is within
    a factor 1.5 of what a lossless job stores.
(c) Shards: a symbolic-link member is reported unreadable with its reason.
(d) gen-hostile's set (tests/test_hostile.sh's pipeline): no crash, no
    hang, exit 1; no file that decodes is reported; every file a mount
    refuses is reported by --check=full, and nothing else.
(e) A config error is exit status 2, a bad argument too.
(f) One place knows each format (issue 35): --check asks transforms/'
    header probes, which the decoders apply too.  A JPEG with a stuffed
    zero (FF 00) or an empty COM segment before its frame, which libjpeg
    decodes, is not reported; one with a stray byte right after SOI,
    which the decoder refuses ("not a JPEG"), is; a WebP named .wbp is
    named "a WebP image"; a 12-bit JPEG is reported in the words a
    mount logs for it.
"""

import errno
import io
import os
import re
import subprocess
import sys
import tarfile

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
    from PIL import Image
except ImportError as e:
    fflib.skip("numpy/PIL not importable: %s" % e)

CACHE = os.path.join(fflib.BUILDDIR, "feedfs-cache")
GENHOSTILE = os.path.join(fflib.BUILDDIR, "tests", "gen-hostile")
t = fflib.Test()


def run_check(src, *args, full=False):
    r = subprocess.run([fflib.FEEDFS, "--check=full" if full else "--check"]
                       + list(args) + [src], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    return r.returncode, r.stdout.decode(errors="replace"), \
        r.stderr.decode(errors="replace")


def problems(out):
    """{path: (kind, why)} of the report's problem lines."""
    got = {}
    for line in out.splitlines():
        m = re.match(r"  (unreadable|unsupported|truncated|corrupt): "
                     r"(.*?): (.*)$", line)
        if m:
            got[m.group(2)] = (m.group(1), m.group(3))
    return got


# ---- (a) a folder with problems, then without --------------------------
data = t.gen(t.path("data"), n=24, classes=3, seed=5)
classes = sorted(os.listdir(data))
rng = np.random.default_rng(26)
img = Image.fromarray(rng.integers(0, 256, (50, 70, 3)).astype(np.uint8))
img.save(os.path.join(data, classes[0], "good.png"))
img.save(os.path.join(data, classes[1], "good.webp"), quality=80)
os.makedirs(os.path.join(data, "zz_empty"))
clean = t.path("clean.conf")
PIPE = "decode resize(40) cache random_resized_crop(32) flip(0.5)"
t.config(clean, data, {"train": dict(pipeline=PIPE, dtype="uint8",
                                     layout="HWC", batch_size=4)})
rc, out, err = run_check(clean)
check(rc == 1, "empty class only: exit %d, want 1\n%s%s" % (rc, out, err))
check("  empty class: zz_empty (class 3)" in out, out)
os.rmdir(os.path.join(data, "zz_empty"))
rc, out, err = run_check(clean)
check(rc == 0 and "no problems in 26 samples" in out,
      "clean folder: exit %d\n%s%s" % (rc, out, err))
log("(a) a clean folder: exit 0, '%s'" % out.splitlines()[-1])
counts_clean = out
# cache_size = auto (the default) is said as what a mount would choose
# from cache_dir's free space, not as the key's internal value.
rc, out, err = run_check(clean, "-o", "cache_size=auto")
sizes = [x for x in out.splitlines() if x.startswith("  cache_size ")]
check(rc == 0 and len(sizes) == 1 and
      "(auto: half of the space free on %s's filesystem now)"
      % t.path("cache") in sizes[0] and "PiB" not in sizes[0],
      "cache_size = auto: exit %d\n%s%s" % (rc, out, err))
log("(a) cache_size = auto:%s" % sizes[0])

with open(os.path.join(data, classes[0], os.listdir(
        os.path.join(data, classes[0]))[1]), "rb") as f:
    jpg = f.read()
bad = {
    classes[0] + "/cut.jpg": (jpg[:len(jpg) // 2], "truncated",
                              "no end-of-image marker"),
    classes[1] + "/cut.png": (open(os.path.join(
        data, classes[0], "good.png"), "rb").read()[:-30], "truncated",
        "no IEND chunk"),
    classes[2] + "/cut.webp": (open(os.path.join(
        data, classes[1], "good.webp"), "rb").read()[:-40], "truncated",
        "WebP cut short"),
}
for p, (b, _, _) in bad.items():
    with open(os.path.join(data, p), "wb") as f:
        f.write(b)
img.save(os.path.join(data, classes[2], "scan.bmp"))
with open(os.path.join(data, classes[1], "notes.txt"), "w") as f:
    f.write("not an image\n")
os.makedirs(os.path.join(data, "zz_empty"))
rc, out, err = run_check(data)  # a directory: the default jobs
check(rc == 1, "problems: exit %d, want 1\n%s%s" % (rc, out, err))
got = problems(out)
for p, (_, kind, why) in bad.items():
    check(p in got and got[p][0] == kind and why in got[p][1],
          "%s: reported %s, want %s (%s)\n%s" % (p, got.get(p), kind, why,
                                                 out))
bmp = classes[2] + "/scan.bmp"
check(bmp in got and got[bmp][0] == "unsupported" and
      "not .bmp (a BMP image)" in got[bmp][1], "bmp: %s" % (got.get(bmp),))
check(len(got) == 4, "more problems than planted: %s" % got)
check("  skipped: %s/notes.txt: not a sample" % classes[1] in out, out)
for c, name in enumerate(classes):
    n = len([f for f in os.listdir(os.path.join(data, name))
             if f.endswith((".jpg", ".png", ".webp"))]) - \
        sum(1 for p in bad if p.startswith(name + "/"))
    check(re.search(r"^  class %d %s: %d samples" % (c, name, n), out,
                    re.M), "class %d %s: want %d samples\n%s" % (
                        c, name, n, out))
check("  empty class: zz_empty (class 3)" in out, out)
check("5 problems in 29 samples: 0 unreadable, 1 unsupported, 3 truncated,"
      " 0 corrupt, 1 empty classes" in out, out)
for line in out.splitlines():
    if line.startswith(("  trunc", "  unsup", "  skipped", "  empty", "5 ")):
        log("(a) " + line.strip())
for p in list(bad) + [bmp, classes[1] + "/notes.txt"]:
    os.unlink(os.path.join(data, p))
os.rmdir(os.path.join(data, "zz_empty"))

# ---- (b) raw exact, lossless estimated, against a mount's cache ----------
m = re.search(r"cache_format raw .* exact: (\d+) pixel bytes", counts_clean)
check(m, "no raw line:\n%s" % counts_clean)
raw_pixels = int(m.group(1))
m = re.search(r"cache_format lossless +~ *\S+ \S+ +estimated: \d+ of \d+ "
              r"images encoded, ([0-9.]+)x raw", counts_clean)
check(m, "no lossless line:\n%s" % counts_clean)
ratio = float(m.group(1))
with fflib.Mount(t, clean, t.path("mnt")) as mnt:
    mnt.read_epoch("train", 0)
HDR = 80  # a value's envelope header (cache/codec.h CODEC_ENV_HDR)
r = subprocess.run([CACHE, "--cache-dir", t.path("cache"), "stats"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
st = r.stdout.decode()
entries = int(re.search(r"^entries\t(\d+)", st, re.M).group(1))
stored = int(re.search(r"^bytes\t(\d+)", st, re.M).group(1))
check(entries == 26 and stored - HDR * entries == raw_pixels,
      "cache holds %d entries, %d bytes (%d of pixels); --check said %d"
      % (entries, stored, stored - HDR * entries, raw_pixels))
log("(b) raw: --check said %d pixel bytes, the cache holds %d entries of "
    "%d" % (raw_pixels, entries, stored - HDR * entries))
ll = t.path("ll.conf")
t.config(ll, data, {"train": dict(pipeline=PIPE, dtype="uint8", layout="HWC",
                                  batch_size=4, cache_format="lossless")},
         cache_dir=t.path("cache-ll"))
with fflib.Mount(t, ll, t.path("mnt")) as mnt:
    mnt.read_epoch("train", 0)
r = subprocess.run([CACHE, "--cache-dir", t.path("cache-ll"), "stats"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
st = r.stdout.decode()
entries = int(re.search(r"^entries\t(\d+)", st, re.M).group(1))
actual = (int(re.search(r"^bytes\t(\d+)", st, re.M).group(1)) -
          HDR * entries) / raw_pixels
check(entries == 26 and ratio / 1.5 < actual < ratio * 1.5,
      "lossless: estimated %.3fx raw, stored %.3fx" % (ratio, actual))
log("(b) lossless: estimated %.3fx raw, a mount stored %.3fx" % (
    ratio, actual))

# ---- (c) shards: a link member is unreadable ------------------------------
shards = t.path("shards")
os.makedirs(shards)
with tarfile.open(os.path.join(shards, "s0.tar"), "w") as tf:
    for k in range(3):
        for name, payload in (("k%d.jpg" % k, jpg), ("k%d.cls" % k, b"1")):
            ti = tarfile.TarInfo(name)
            ti.size = len(payload)
            tf.addfile(ti, io.BytesIO(payload))
    ti = tarfile.TarInfo("k9.jpg")
    ti.type = tarfile.SYMTYPE
    ti.linkname = "/etc/passwd"
    tf.addfile(ti)
    ti = tarfile.TarInfo("k9.cls")
    ti.size = 1
    tf.addfile(ti, io.BytesIO(b"0"))
sh = t.path("sh.conf")
with open(sh, "w") as f:
    f.write("[dataset sh]\nshards = %s/*.tar\n\n[job j]\ndataset = sh\n"
            "pipeline = %s\ndtype = uint8\n" % (shards, PIPE))
rc, out, err = run_check(sh)
got = problems(out)
check(rc == 1 and got.get("s0.tar:k9.jpg", ("",))[0] == "unreadable" and
      len(got) == 1, "shards: exit %d, %s\n%s%s" % (rc, got, out, err))
log("(c) unreadable: s0.tar:k9.jpg: %s" % got["s0.tar:k9.jpg"][1])

# ---- (d) the hostile set ----------------------------------------------------
H = t.path("hostile")
r = subprocess.run([GENHOSTILE, H, "--outside", t.path("outside")],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
check(r.returncode == 0, "gen-hostile: %s" % r.stderr.decode())
H = os.path.realpath(H)
want = {}
with open(os.path.join(H, "hostile.tsv"), encoding="utf-8") as f:
    for line in f:
        if not line.startswith("#"):
            path, expect = line.split("\t")[:2]
            want[path] = expect
hc = t.path("h.conf")
t.config(hc, H, {"train": dict(
    pipeline="decode resize(72) cache random_resized_crop(64) flip(0.5) "
             "normalize(imagenet)")})
for full in (False, True):
    rc, out, err = run_check(hc, full=full)
    check(rc == 1, "hostile: exit %d, want 1\n%s%s" % (rc, out, err))
    got = problems(out)
    # An image's name the scan cannot serve (a dangling link, a loop) is
    # not a sample, and is reported as unreadable (issue 36).
    links = sorted(p for p, e in want.items() if e == "absent" and
                   p.startswith("d_links/") and p.endswith(".jpg"))
    wrong = sorted(p for p in got if want.get(p) != "bad" and not (
        p in links and got[p][0] == "unreadable" and
        "symbolic link" in got[p][1]))
    check(not wrong, "reported but not broken: %s" % [
        (p, got[p]) for p in wrong])
    check(all(p in got for p in links), "links not listed: %s" % [
        p for p in links if p not in got])
    if full:
        missed = sorted(p for p, e in want.items()
                        if e == "bad" and p not in got)
        check(not missed, "--check=full missed %s" % missed)
    log("(d) --check%s: %d of %d broken files reported, %d links that "
        "lead nowhere, none of the %d good ones" % (
            "=full" if full else "", len(got) - len(links),
            sum(e == "bad" for e in want.values()), len(links),
            sum(e == "ok" for e in want.values())))

# ---- (e) errors ----------------------------------------------------------------
with open(t.path("bad.conf"), "w") as f:
    f.write("[dataset d]\nroot = %s\nbogus = 1\n" % data)
rc, out, err = run_check(t.path("bad.conf"))
check(rc == 2 and "bad.conf:3:" in err, "config error: exit %d: %s" % (
    rc, err))
rc, out, err = run_check(t.path("nonexistent-dir"))
check(rc == 2, "a missing source: exit %d: %s" % (rc, err))
r = subprocess.run([fflib.FEEDFS, "--check", data, t.path("mnt")],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
check(r.returncode == 2, "--check with a mountpoint: exit %d" % r.returncode)
log("(e) a config error, a missing source, a mountpoint: exit 2")

# ---- (f) the probe's grammar is libjpeg's, its words the decoder's ---------
F = t.path("formats")
os.makedirs(os.path.join(F, "a"))
first = sorted(x for x in os.listdir(os.path.join(data, classes[0]))
               if x.endswith(".jpg"))[0]
with open(os.path.join(data, classes[0], first), "rb") as f:
    jpg = f.read()
i = jpg.index(b"\xff\xc0")  # the frame header of gen-jpegs' baseline
planted = {
    "a/ff00.jpg": jpg[:2] + b"\xff\x00" + jpg[2:],
    "a/com0.jpg": jpg[:2] + b"\xff\xfe\x00\x00" + jpg[2:],
    "a/after-soi.jpg": jpg[:2] + b"\x00" + jpg[2:],
    "a/bits12.jpg": jpg[:i + 4] + b"\x0c" + jpg[i + 5:],
    "a/good.jpg": jpg,
}
for p, b in planted.items():
    with open(os.path.join(F, p), "wb") as f:
        f.write(b)
with open(os.path.join(data, classes[1], "good.webp"), "rb") as f:
    with open(os.path.join(F, "a", "photo.wbp"), "wb") as g:
        g.write(f.read())
fc = t.path("f.conf")
t.config(fc, F, {"train": dict(pipeline=PIPE, dtype="uint8", layout="HWC",
                               batch_size=1, shuffle="no", epochs=1)},
         cache_dir=t.path("cache-f"))
for full in (False, True):
    rc, out, err = run_check(fc, full=full)
    got = problems(out)
    check(rc == 1 and sorted(got) == ["a/after-soi.jpg", "a/bits12.jpg",
                                      "a/photo.wbp"],
          "formats: exit %d, %s\n%s%s" % (rc, got, out, err))
    check(got.get("a/after-soi.jpg", ("",))[0] == "corrupt" and
          got["a/after-soi.jpg"][1].startswith("not a JPEG"), out)
    check(got.get("a/photo.wbp", ("", ""))[1].endswith(
        "not .wbp (a WebP image)"), out)
    check(got.get("a/bits12.jpg", ("",))[0] == "unsupported", out)
log("(f) FF 00 and an empty COM: not reported; a byte after SOI: %s; .wbp: "
    "%s" % (got["a/after-soi.jpg"][1], got["a/photo.wbp"][1]))
# The mount refuses the 12-bit JPEG in --check's words (samples.tsv is
# sorted: after-soi, bits12, com0, ff00, good).
with fflib.Mount(t, fc, t.path("mnt")) as mnt:
    ok = []
    for b in range(5):
        try:
            with open(os.path.join(t.path("mnt"), "train", "epoch-0000",
                                   "batch-%06d.npy" % b), "rb") as f:
                f.read()
            ok.append(b)
        except OSError as e:
            check(e.errno == errno.EIO, "batch %d: %s" % (b, e))
    text = mnt.log()
check(ok == [2, 3, 4], "the mount served batches %s, want [2, 3, 4]" % ok)
why = got["a/bits12.jpg"][1]
check("bits12.jpg: %s" % why in text,
      "the mount's log does not say '%s':\n%s" % (why, text))
log("(f) a 12-bit JPEG: --check and the mount say '%s'" % why)

log("ok")
