#!/usr/bin/python3
"""test_links.py - datasets laid out with symbolic links (issue 36 §2).

The scan follows links as torchvision's ImageFolder does, out of the
dataset's root too; what it leaves out, for any reason, is counted on
the terminal at mount and listed by --check.  Each layout through a real
mount, its bytes against feedfs-ref's over a plain copy (cp -rL):

(a) a link farm: 8 files and 10 absolute links into another directory
    (issue 36: 8 of 18 served, with no word): all 18 served, and nothing
    said at mount;
(b) a Hugging Face hub snapshot: snapshots/REV/CLASS/NAME.jpg ->
    ../../../blobs/HASH (relative links to files without an extension);
(c) a class subset made with `ln -s` of class directories, absolute and
    relative;
(d) dangling links, loops of links (a -> b -> a, a link to itself) and
    directory links to an ancestor, beside a text file: the real images
    served; the start says "N files ... are not served" with each reason
    counted; --check lists every one of them by path and reason;
(e) a dataset owned by uid 65534 mounted by root, with links out of the
    tree: to a world-readable file (served), to a root-only file in a
    root-only directory and to a mode 0600 file in an open directory
    (both refused, counted at mount, listed by --check); then, after the
    mount, a file a served link leads to is replaced by a hard link to
    the root-only file: its read fails (EIO) naming uid 65534 in
    errors.tsv, and the bytes of /etc/shadow-like files are never served.
"""

import errno
import hashlib
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

t = fflib.Test()
PIPE = "decode resize(40) cache center_crop(32)"
store = t.gen(t.path("store"), n=18, classes=2, seed=36)
classes = sorted(os.listdir(store))


def files_of(d):
    return sorted(os.path.relpath(os.path.join(r, f), d)
                  for r, _, fs in os.walk(d) for f in fs)


def job_conf(name, root, **mount):
    return t.config(t.path(name + ".conf"), root,
                    {"j": dict(pipeline=PIPE, dtype="uint8", layout="HWC",
                               batch_size=1, shuffle="no", epochs=1)},
                    **mount)


def samples(m):
    with open(m.p("j", "samples.tsv")) as f:
        return [line.split("\t")[1] for line in f.read().splitlines()]


def served_like_copy(name, root, want):
    """Mount root; samples.tsv must list want (relative paths) and every
    batch equal feedfs-ref's over a copy of root with the links
    resolved.  Returns the mount's start lines (its log)."""
    copy = t.path(name + "-copy")
    shutil.copytree(root, copy, symlinks=False)
    ref = t.ref(job_conf(name + "-copy", copy), "j", 0, t.path(name + "-ref"))
    mnt = t.path("mnt-" + name)
    with fflib.Mount(t, job_conf(name, root), mnt) as m:
        got = samples(m)
        check(got == want, "%s: samples.tsv lists %d samples %s, want %d %s"
              % (name, len(got), got, len(want), want))
        m.read_epoch("j", 0, ref=ref)
        text = m.log()
    log("(%s) %d samples served, bytes equal feedfs-ref's over a copy"
        % (name, len(want)))
    return text


def check_run(src):
    r = subprocess.run([fflib.FEEDFS, "--check", src], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    return r.returncode, r.stdout.decode(errors="replace")


# ---- (a) a link farm ------------------------------------------------------
farm = t.path("farm")
names = files_of(store)
for i, rel in enumerate(names):
    os.makedirs(os.path.join(farm, os.path.dirname(rel)), exist_ok=True)
    if i % 9 < 4:  # 8 real files
        shutil.copy(os.path.join(store, rel), os.path.join(farm, rel))
    else:
        os.symlink(os.path.join(store, rel), os.path.join(farm, rel))
text = served_like_copy("farm", farm, names)
check("not served" not in text, "a farm with nothing left out said:\n"
      + text)

# ---- (b) a Hugging Face hub snapshot ----------------------------------------
hub = t.path("hub", "datasets--me--pets")
snap = os.path.join(hub, "snapshots", "0123abcd")
os.makedirs(os.path.join(hub, "blobs"))
for rel in names:
    with open(os.path.join(store, rel), "rb") as f:
        b = f.read()
    h = hashlib.sha256(b).hexdigest()
    with open(os.path.join(hub, "blobs", h), "wb") as f:
        f.write(b)
    os.makedirs(os.path.join(snap, os.path.dirname(rel)), exist_ok=True)
    os.symlink(os.path.join("..", "..", "..", "blobs", h),
               os.path.join(snap, rel))
served_like_copy("hub", snap, names)

# ---- (c) a class subset of directory links ---------------------------------
subset = t.path("subset")
os.makedirs(subset)
os.symlink(os.path.join(store, classes[0]), os.path.join(subset, "cats"))
os.symlink(os.path.join("..", "store", classes[1]),
           os.path.join(subset, "dogs"))
want = [re.sub("^" + classes[0], "cats", re.sub("^" + classes[1], "dogs", p))
        for p in names]
served_like_copy("subset", subset, sorted(want))

# ---- (d) dangling links, loops ----------------------------------------------
bad = t.path("bad")
cls = os.path.join(bad, "cls")
os.makedirs(cls)
for rel in names[:3]:
    shutil.copy(os.path.join(store, rel), cls)
real = sorted("cls/" + os.path.basename(p) for p in names[:3])
os.symlink("nosuch.jpg", os.path.join(cls, "dangling.jpg"))
os.symlink("loop-b.jpg", os.path.join(cls, "loop-a.jpg"))
os.symlink("loop-a.jpg", os.path.join(cls, "loop-b.jpg"))
os.symlink("self.jpg", os.path.join(cls, "self.jpg"))
os.symlink("..", os.path.join(cls, "up"))
os.symlink(".", os.path.join(cls, "here"))
with open(os.path.join(cls, "notes.txt"), "w") as f:
    f.write("not an image\n")
conf = job_conf("bad", bad)
mnt = t.path("mnt-bad")
with fflib.Mount(t, conf, mnt) as m:
    got = samples(m)
    check(got == real, "bad: samples %s, want %s" % (got, real))
    text = m.log()
said = [x for x in text.splitlines() if "not served" in x]
check(len(said) == 1, "the start should say once what is not served:\n"
      + text)
for want in ("7 files under %s are not served" % bad, "1 .txt",
             "1 dangling symbolic link", "5 symbolic link loops"):
    check(want in said[0], "the start did not say %r:\n%s" % (want, said[0]))
log("(d) the start said: " + said[0].split(": ", 1)[1])
rc, out = check_run(conf)
listed = {}
for line in out.splitlines():
    mm = re.match(r"  (\w+): (cls/\S+): (.*)$", line)
    if mm:
        listed[mm.group(2)] = (mm.group(1), mm.group(3))
for p, why in (("cls/dangling.jpg", "dangling symbolic link"),
               ("cls/loop-a.jpg", "loop"), ("cls/loop-b.jpg", "loop"),
               ("cls/self.jpg", "loop"), ("cls/up", "loop"),
               ("cls/here", "loop"), ("cls/notes.txt", "not a sample")):
    check(p in listed and why in listed[p][1],
          "--check did not list %s (%s):\n%s" % (p, why, out))
check(listed["cls/dangling.jpg"][0] == "unreadable" and rc == 1,
      "a dangling image link is a problem (exit %d):\n%s" % (rc, out))
log("(d) --check: " + "; ".join("%s: %s" % (p, w[1])
                                for p, w in sorted(listed.items())))

# ---- (e) another user's dataset, mounted by root -----------------------------
if os.geteuid() != 0:
    fflib.skip("(e) needs root (a dataset of uid 65534 mounted by root)")
os.chmod(t.dir, 0o755)  # the links' owner may walk to what is theirs
NOBODY = 65534
pub = t.path("pub")  # root's, open to all
sec = t.path("sec")  # root's alone
own = t.path("own")  # uid 65534's
for d, mode in ((pub, 0o755), (sec, 0o700), (own, 0o755)):
    os.makedirs(d)
    os.chmod(d, mode)
shutil.copy(os.path.join(store, names[0]), os.path.join(pub, "p.jpg"))
os.chmod(os.path.join(pub, "p.jpg"), 0o644)
shutil.copy(os.path.join(store, names[1]), os.path.join(pub, "private.jpg"))
os.chmod(os.path.join(pub, "private.jpg"), 0o600)
shutil.copy(os.path.join(store, names[2]), os.path.join(sec, "s.jpg"))
os.chmod(os.path.join(sec, "s.jpg"), 0o600)
shutil.copy(os.path.join(store, names[3]), os.path.join(own, "o.jpg"))
os.chown(own, NOBODY, NOBODY)
os.chown(os.path.join(own, "o.jpg"), NOBODY, NOBODY)
theirs = t.path("theirs")
tc = os.path.join(theirs, "cls")
os.makedirs(tc)
shutil.copy(os.path.join(store, names[4]), os.path.join(tc, "a.jpg"))
for link, target in (("pub.jpg", os.path.join(pub, "p.jpg")),
                     ("own.jpg", os.path.join(own, "o.jpg")),
                     ("secret.jpg", os.path.join(sec, "s.jpg")),
                     ("private.jpg", os.path.join(pub, "private.jpg"))):
    os.symlink(target, os.path.join(tc, link))
for r, ds, fs in os.walk(theirs):
    for x in [r] + [os.path.join(r, y) for y in ds + fs]:
        os.lchown(x, NOBODY, NOBODY)
conf = t.config(t.path("theirs.conf"), theirs,
                {"j": dict(pipeline=PIPE, dtype="uint8", layout="HWC",
                           batch_size=1, shuffle="no", epochs=1)},
                cache_size=0)
mnt = t.path("mnt-theirs")
with fflib.Mount(t, conf, mnt) as m:
    got = samples(m)
    want = ["cls/a.jpg", "cls/own.jpg", "cls/pub.jpg"]
    check(got == want, "theirs: samples %s, want %s" % (got, want))
    said = [x for x in m.log().splitlines() if "not served" in x]
    check(len(said) == 1 and "2 symbolic links out of the dataset refused"
          in said[0] and "65534" in said[0],
          "the start did not count the refused links:\n" + m.log())
    log("(e) the start said: " + said[0].split(": ", 1)[1])
    # After the scan: what own.jpg leads to becomes the root-only file.
    os.unlink(os.path.join(own, "o.jpg"))
    os.link(os.path.join(sec, "s.jpg"), os.path.join(own, "o.jpg"))
    fflib.read_file(m.p("j", "epoch-0000", "batch-000000.npy"))
    try:
        fflib.read_file(m.p("j", "epoch-0000", "batch-000001.npy"))
        fflib.fail("a link's target swapped for a root-only file was read")
    except OSError as e:
        check(e.errno == errno.EIO, "swapped target: %s, want EIO" % e)
    with open(m.p("j", "errors.tsv")) as f:
        errs = f.read()
    check("own.jpg" in errs and "65534" in errs,
          "errors.tsv does not say why:\n" + errs)
    log("(e) a target swapped after the scan: EIO; errors.tsv: "
        + errs.strip().splitlines()[-1])
os.unlink(os.path.join(own, "o.jpg"))
shutil.copy(os.path.join(store, names[3]), os.path.join(own, "o.jpg"))
rc, out = check_run(conf)
for p in ("cls/secret.jpg", "cls/private.jpg"):
    check(re.search(r"^  unreadable: %s: .*65534" % p, out, re.M),
          "--check did not list %s as refused:\n%s" % (p, out))
log("(e) --check: " + [x for x in out.splitlines()
                       if "secret.jpg" in x][0].strip())
log("ok")
