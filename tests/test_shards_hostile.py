#!/usr/bin/python3
"""test_shards_hostile.py - hostile tar shards through a real mount (issue
20).  Shards written by Python's tarfile, some headers made by hand:

  traversal     ../../etc/x.jpg and /abs/x.jpg members
  links         a symlink to /etc/passwd, a hard link, a char device and a
                FIFO, each named KEY.jpg
  sparse        a GNU 'S' member and a pax GNU.sparse.* member
  duplicates    dup.jpg twice; dup2.jpg and dup2.png (overlapping keys)
  labels        no .cls member; a .cls that is not an integer
  bigpax        a 2 MiB pax header (data present): its member is refused,
                the next one served
  paxbomb.tar   a pax header claiming 4 GiB in a small file (truncated)
  pastend.tar   a member whose size runs past the end of the shard
  trunc.tar     a shard cut inside its second image
  badsum.tar    a header with a bad checksum after a good member
  garbage.tar   random bytes; empty.tar: zero bytes

The mount starts (damage is logged per shard: "truncated", "bad
checksum"); samples.tsv lists exactly the expected samples; under
on_error = fail every good sample's batch equals feedfs-ref and every bad
one's read fails with EIO and a log line naming SHARD:MEMBER and why;
under on_error = substitute every batch reads and equals feedfs-ref; the
daemon keeps serving and exits 0.  The index kept for these shards gives
the same on a remount.
"""

import errno
import io
import os
import struct
import sys
import tarfile

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

t = fflib.Test()
data = t.gen(t.path("data"), n=6, classes=1, seed=9)
imgs = []
for f in sorted(os.listdir(os.path.join(data, "class000"))):
    with open(os.path.join(data, "class000", f), "rb") as fp:
        imgs.append(fp.read())
S = t.path("shards")
os.makedirs(S)


def ti(name, size=0, type_=tarfile.REGTYPE, **kw):
    i = tarfile.TarInfo(name)
    i.size, i.type, i.mtime = size, type_, 1700000000
    for k, v in kw.items():
        setattr(i, k, v)
    return i


def add(tf, name, payload, **kw):
    tf.addfile(ti(name, len(payload), **kw), io.BytesIO(payload))


def sample(tf, key, img, cls=b"0"):
    add(tf, key + ".jpg", img)
    if cls is not None:
        add(tf, key + ".cls", cls)


def raw_header(name, size, typeflag, bad_sum=False):
    """A ustar header block made by hand (size may be anything)."""
    h = bytearray(512)
    h[0:len(name)] = name.encode()
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    if size < 8 ** 11:
        h[124:136] = b"%011o\0" % size
    else:  # base-256
        h[124] = 0x80
        h[128:136] = struct.pack(">Q", size)
    h[136:148] = b"%011o\0" % 1700000000
    h[156:157] = typeflag
    h[257:265] = b"ustar\x0000"
    h[148:156] = b" " * 8
    s = sum(h) + (7 if bad_sum else 0)
    h[148:156] = b"%06o\0 " % s
    return bytes(h)


def pad(b):
    return b + b"\0" * (-len(b) % 512)


want = {}  # sample path -> None (ok) or the reason's words


def ok(path):
    want[path] = None


def bad(path, why):
    want[path] = why


# ---- h.tar: member-level cases; the scan goes on past each ----------------
h = os.path.join(S, "h.tar")
with tarfile.open(h, "w", format=tarfile.PAX_FORMAT) as tf:
    sample(tf, "a_ok", imgs[0])
    ok("h.tar:a_ok.jpg")
    sample(tf, "../../etc/trav", imgs[1])
    bad("h.tar:../../etc/trav.jpg", "'..' member name")
    sample(tf, "/abs/abs", imgs[1])
    bad("h.tar:/abs/abs.jpg", "absolute or '..'")
    tf.addfile(ti("sym.jpg", type_=tarfile.SYMTYPE, linkname="/etc/passwd"))
    add(tf, "sym.cls", b"0")
    bad("h.tar:sym.jpg", "symbolic link member")
    tf.addfile(ti("hard.jpg", type_=tarfile.LNKTYPE, linkname="a_ok.jpg"))
    add(tf, "hard.cls", b"0")
    bad("h.tar:hard.jpg", "hard link member")
    tf.addfile(ti("dev.jpg", type_=tarfile.CHRTYPE, devmajor=1, devminor=3))
    add(tf, "dev.cls", b"0")
    bad("h.tar:dev.jpg", "device or FIFO")
    tf.addfile(ti("fifo.jpg", type_=tarfile.FIFOTYPE))
    add(tf, "fifo.cls", b"0")
    bad("h.tar:fifo.jpg", "device or FIFO")
    i = ti("psparse.jpg", len(imgs[2]))
    i.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                     "GNU.sparse.name": "psparse.jpg",
                     "GNU.sparse.realsize": str(len(imgs[2]))}
    tf.addfile(i, io.BytesIO(imgs[2]))
    add(tf, "psparse.cls", b"0")
    bad("h.tar:psparse.jpg", "sparse member")
    sample(tf, "dup", imgs[2])
    sample(tf, "dup", imgs[3], cls=None)
    bad("h.tar:dup.jpg", "duplicate key")
    sample(tf, "dup2", imgs[2])
    add(tf, "dup2.png", imgs[3])
    bad("h.tar:dup2.jpg", "duplicate key")
    sample(tf, "nolabel", imgs[3], cls=None)
    bad("h.tar:nolabel.jpg", "no .cls member")
    sample(tf, "badlabel", imgs[3], cls=b"seven")
    bad("h.tar:badlabel.jpg", "not an integer")
    # a 2 MiB pax header: its member is refused, the scan goes on
    i = ti("bigpax.jpg", len(imgs[4]))
    i.pax_headers = {"comment": "x" * (2 << 20)}
    tf.addfile(i, io.BytesIO(imgs[4]))
    add(tf, "bigpax.cls", b"0")
    bad("h.tar:bigpax.jpg", "larger than 1 MiB")
    sample(tf, "z_ok", imgs[5])
    ok("h.tar:z_ok.jpg")
# a GNU sparse ('S') member, appended by hand before the end blocks
with open(h, "rb") as f:
    body = f.read()
end = len(body)
while end >= 512 and body[end - 512:end] == b"\0" * 512:
    end -= 512
body = (body[:end] + raw_header("gsparse.jpg", len(imgs[1]), b"S") +
        pad(imgs[1]) + raw_header("gsparse.cls", 1, b"0") + pad(b"0") +
        b"\0" * 1024)
bad("h.tar:gsparse.jpg", "sparse member")
with open(h, "wb") as f:
    f.write(body)

# ---- whole-shard damage: what comes before is kept --------------------------
good = io.BytesIO()
with tarfile.open(fileobj=good, mode="w", format=tarfile.USTAR_FORMAT) as tf:
    sample(tf, "k1", imgs[0])
    sample(tf, "k2", imgs[1])
    sample(tf, "k3", imgs[2])
good = good.getvalue()
first_end = 512 + len(pad(imgs[0])) + 512 + 512  # k1.jpg and k1.cls
with open(os.path.join(S, "paxbomb.tar"), "wb") as f:
    f.write(good[:first_end] + raw_header("PaxHeaders/x", 4 << 30, b"x") +
            b"30 path=this-is-never-read\n" + b"\0" * 2000)
ok("paxbomb.tar:k1.jpg")
with open(os.path.join(S, "pastend.tar"), "wb") as f:
    f.write(good[:first_end] + raw_header("big.jpg", 10 << 20, b"0") +
            imgs[3][:1000])
ok("pastend.tar:k1.jpg")
bad("pastend.tar:big.jpg", "runs past the end of the shard")
with open(os.path.join(S, "trunc.tar"), "wb") as f:
    f.write(good[:first_end + 512 + 300])  # inside k2.jpg's data
ok("trunc.tar:k1.jpg")
bad("trunc.tar:k2.jpg", "runs past the end of the shard")
bs = bytearray(good)
bs[first_end + 5] ^= 0x20  # k2.jpg's header: checksum no longer matches
with open(os.path.join(S, "badsum.tar"), "wb") as f:
    f.write(bytes(bs))
ok("badsum.tar:k1.jpg")
with open(os.path.join(S, "garbage.tar"), "wb") as f:
    f.write(bytes((i * 131 + 7) % 256 for i in range(5000)))
open(os.path.join(S, "empty.tar"), "wb").close()

paths = sorted(want)
N = len(paths)
log("%d samples expected, %d bad" % (N, sum(w is not None
                                              for w in want.values())))


def conf(path, on_error):
    with open(path, "w") as f:
        f.write("""[mount]
cache_dir = %s
cache_size = 1G
threads = 2
memory = 256M
readahead = 2

[dataset sh]
shards = %s/*.tar
label = cls

[job train]
dataset = sh
batch_size = 1
epochs = 1
shuffle = no
on_error = %s
pipeline = decode resize(40) cache random_resized_crop(32) flip(0.5)
dtype = uint8
""" % (t.path("cache"), S, on_error))
    return path


cfail = conf(t.path("fail.conf"), "fail")
csub = conf(t.path("sub.conf"), "substitute")
ref = t.ref(csub, "train", 0, t.path("ref"))


def batch(i):
    return "batch-%06d.npy" % i


for rnd in ("first mount", "remount from the kept index"):
    with fflib.Mount(t, cfail, t.path("mnt")) as m:
        rows = [r.split("\t") for r in
                open(m.p("train", "samples.tsv")).read().splitlines()]
        check([r[1] for r in rows] == paths, "samples.tsv:\n%s\nwant\n%s"
              % ([r[1] for r in rows], paths))
        for i, p in enumerate(paths):
            f = m.p("train", "epoch-0000", batch(i))
            try:
                got = fflib.read_file(f)
                err = None
            except OSError as e:
                err = e.errno
            if want[p] is None:
                with open(os.path.join(ref, batch(i)), "rb") as fp:
                    check(err is None and got == fp.read(),
                          "%s: %s" % (p, "EIO" if err else "!= feedfs-ref"))
            else:
                check(err == errno.EIO, "%s: read gave %s, want EIO"
                      % (p, err))
        text = m.log()
        for p, why in want.items():
            if why is None:
                continue
            line = [x for x in text.splitlines() if p + ": " in x]
            check(line and why in line[0], "%s: log %s, want '%s'"
                  % (p, line, why))
        if rnd == "first mount":
            for what in ("paxbomb.tar: truncated", "pastend.tar: truncated",
                         "trunc.tar: truncated", "badsum.tar: a header with "
                         "a bad checksum", "garbage.tar: a header with a "
                         "bad checksum"):
                check(what in text, "the log does not say '%s'" % what)
        check(m.alive(), "feedfs died")
    log("on_error = fail, %s: good samples as feedfs-ref, bad ones EIO "
        "with the reason" % rnd)

with fflib.Mount(t, csub, t.path("mnt")) as m:
    for i in range(N):
        with open(os.path.join(ref, batch(i)), "rb") as fp:
            check(fflib.read_file(m.p("train", "epoch-0000", batch(i))) ==
                  fp.read(), "substitute: batch %d != feedfs-ref" % i)
    check(m.alive(), "feedfs died")
log("on_error = substitute: every batch equals feedfs-ref")
log("ok")
