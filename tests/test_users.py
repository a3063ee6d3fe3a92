#!/usr/bin/env python3
"""test_users - many users on one node (issue 40, 4), with real users:
uid 65534 and one that the test makes with useradd (and removes).

 (a) a user's own mount (no root): the default cache_dir is
     $XDG_CACHE_HOME/feedfs, else ~/.cache/feedfs, made 0700 by that user,
     and the cache is used;
 (b) root mounts for uid 65534 (-o uid=65534,gid=65534): the daemon's
     uids, gids and groups are all 65534 and it holds no capability; the
     mount is the user's (user_id=65534: root itself is refused without
     allow_other); the bytes the user reads equal feedfs-ref's; SIGTERM
     unmounts and exits 0;
 (c) a dataset that only root may read: the mount for 65534 is refused
     (exit 2, nothing mounted): the dataset is read as the user;
 (d) -o user=nobody from root: refused in feedfs's words (exit 2, nothing
     mounted), where it was taken silently and changed nothing;
 (e) root mounts for a user made by useradd, named (-o uid=NAME): the
     user's supplementary group opens a dataset readable by that group
     alone, and the default cache_dir is the user's ~/.cache/feedfs;
 (f) a root mount (no uid=) given a cache_dir in a user's home whose
     ~/.cache does not exist makes no directory there: it serves without
     the cache and says why.
"""
import os
import pwd
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, fail, log  # noqa: E402

if os.geteuid() != 0:
    fflib.skip("needs root (to mount for a user, and useradd)")
for tool in ("useradd", "userdel", "groupadd", "groupdel"):
    if shutil.which(tool) is None:
        fflib.skip("no %s" % tool)

t = fflib.Test()
os.chmod(t.dir, 0o711)  # others may pass through, not list
NOBODY = 65534
daemons = []  # (proc, mnt, uid) for the exit handler


def cleanup():
    for proc, mnt, _ in daemons:
        fflib._force_umount(mnt)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


import atexit  # noqa: E402
atexit.register(cleanup)


def own(path, uid, gid, mode=0o700):
    os.makedirs(path, exist_ok=True)
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    return path


def as_user(uid, gid, argv, env=None, groups=None, **kw):
    """argv run as uid:gid (groups: the supplementary ones, else none)."""
    return subprocess.run(argv, user=uid, group=gid,
                          extra_groups=groups or [], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def mountinfo(mnt):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == mnt:
                return line
    return None


def start(argv, mnt, reader_uid, reader_gid, env=None, user=None,
          groups=None):
    """feedfs -f ARGV in the background (as user, a (uid, gid), or
    root); returns once the mount answers reader_uid."""
    log_path = t.path("feedfs.%d.log" % len(daemons))
    logf = open(log_path, "wb")
    kw = {}
    if user is not None:
        kw = dict(user=user[0], group=user[1], extra_groups=groups or [])
    proc = subprocess.Popen([fflib.FEEDFS, "-f"] + argv, stdout=logf,
                            stderr=subprocess.STDOUT, env=env, **kw)
    daemons.append((proc, mnt, reader_uid))
    for _ in range(300):
        if mountinfo(mnt) and as_user(reader_uid, reader_gid,
                                      ["stat", mnt + "/README"]).returncode == 0:
            return proc, log_path
        if proc.poll() is not None:
            print(open(log_path).read())
            fail("feedfs %s exited with %d before serving" % (argv, proc.returncode))
        time.sleep(0.1)
    print(open(log_path).read())
    fail("%s not ready after 30 s" % mnt)


def stop(proc, mnt, how):
    if how == "term":
        proc.terminate()
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        fail("feedfs still runs 30 s after %s" % how)
    check(rc == 0, "feedfs exited %d after %s" % (rc, how))
    check(mountinfo(mnt) is None, "%s still mounted after %s" % (mnt, how))


def stats(uid, gid, mnt):
    r = as_user(uid, gid, ["cat", mnt + "/.feedfs/stats"])
    check(r.returncode == 0, "cat stats as %d: %s" % (uid, r.stderr.decode()))
    out = {}
    for line in r.stdout.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(None, 1)
            out[k] = v
    return out


def write_config(path, root, cache_dir=None):
    m = "" if cache_dir is None else "cache_dir = %s\n" % cache_dir
    with open(path, "w") as f:
        f.write("[mount]\n%scache_size = 64M\nthreads = 1\nmemory = 128M\n"
                "readahead = 1\n\n[dataset data]\nroot = %s\n\n[job train]\n"
                % (m, root))
        for k, v in fflib.job(epochs=1).items():
            f.write("%s = %s\n" % (k, v))
    os.chmod(path, 0o644)
    return path


data = t.gen(own(t.path("data"), 0, 0, 0o755), n=20, classes=2, seed=5)
for d, _, files in os.walk(data):
    os.chmod(d, 0o755)
    for n in files:
        os.chmod(os.path.join(d, n), 0o644)
cfg = write_config(t.path("feedfs.conf"), data)
ref = t.ref(cfg, "train", 0, t.path("ref"))
base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

# ---- (a) a user's own mount: the default cache_dir ------------------------
# A user mounts through fusermount3 where /dev/fuse is open to users
# (Debian's 0666); where it is root's alone, feedfs-cache, which takes the
# same default, says which directory it is.
home = own(t.path("home-nobody"), NOBODY, NOBODY)
user_fuse = as_user(NOBODY, NOBODY, ["test", "-w", "/dev/fuse"]).returncode == 0
for label, env, want in (
        ("HOME", dict(base_env, HOME=home), home + "/.cache/feedfs"),
        ("XDG_CACHE_HOME", dict(base_env, HOME=home,
                                XDG_CACHE_HOME=home + "/xdg"),
         home + "/xdg/feedfs")):
    if not user_fuse:
        r = as_user(NOBODY, NOBODY, [fflib.FEEDFS + "-cache", "stats"], env=env)
        err = r.stderr.decode()
        check(want + ":" in err, "(a, %s) feedfs-cache of uid 65534: %s"
              % (label, err))
        log("(a) %s: feedfs-cache's default %s (/dev/fuse is root's alone "
            "here: no user mount)" % (label, want))
        continue
    mnt = own(t.path("mnt-a-" + label), NOBODY, NOBODY, 0o755)
    proc, lp = start([cfg, mnt], mnt, NOBODY, NOBODY, env=env,
                     user=(NOBODY, NOBODY))
    st = stats(NOBODY, NOBODY, mnt)
    text = open(lp).read()
    check(st.get("feedfs_cache_enabled") == "1",
          "(a, %s) the cache is off for uid 65534: %s" % (label, text))
    check(os.path.isdir(want), "(a, %s) no %s" % (label, want))
    s = os.stat(want)
    check(s.st_uid == NOBODY and (s.st_mode & 0o777) == 0o700,
          "(a, %s) %s is uid %d mode %o" % (label, want, s.st_uid,
                                            s.st_mode & 0o777))
    r = as_user(NOBODY, NOBODY, ["fusermount3", "-u", mnt])
    check(r.returncode == 0, "fusermount3 -u as 65534: %s" % r.stderr.decode())
    stop(proc, mnt, "fusermount3 -u")
    log("(a) %s: cache_dir %s, 0700, uid 65534" % (label, want))

# ---- (b) root mounts for 65534 ---------------------------------------------
ncache = own(t.path("nobody"), NOBODY, NOBODY) + "/cache"
mnt = own(t.path("mnt-b"), 0, 0, 0o755)
proc, lp = start(["-o", "uid=65534,gid=65534,cache_dir=" + ncache, cfg, mnt],
                 mnt, NOBODY, NOBODY)
with open("/proc/%d/status" % proc.pid) as f:
    status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
for k in ("Uid", "Gid"):
    check(status[k].split() == ["65534"] * 4, "(b) %s: %s" % (k, status[k]))
check(status["Groups"].split() in ([], ["65534"]), "(b) Groups: %s" % status["Groups"])
for k in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
    check(int(status[k], 16) == 0, "(b) %s: %s" % (k, status[k]))
mi = mountinfo(mnt)
check("user_id=65534" in mi and "group_id=65534" in mi, "(b) mountinfo: %s" % mi)
try:
    os.stat(mnt + "/README")
    fail("(b) root reads the mount of uid 65534 (no allow_other)")
except PermissionError:
    pass
for n in sorted(os.listdir(ref)):
    r = as_user(NOBODY, NOBODY, ["cat", os.path.join(mnt, "train", "epoch-0000", n)])
    check(r.returncode == 0, "(b) cat %s: %s" % (n, r.stderr.decode()))
    check(r.stdout == open(os.path.join(ref, n), "rb").read(),
          "(b) %s differs from feedfs-ref's" % n)
check(stats(NOBODY, NOBODY, mnt).get("feedfs_cache_enabled") == "1",
      "(b) no cache: %s" % open(lp).read())
check(os.stat(ncache).st_uid == NOBODY, "(b) the cache is not 65534's")
stop(proc, mnt, "term")
log("(b) daemon uid/gid 65534, no capability, user_id=65534, bytes = ref, "
    "SIGTERM unmounted")

# ---- (c) a dataset root alone may read -------------------------------------
secret = t.gen(own(t.path("secret"), 0, 0, 0o700), n=4, classes=2, seed=1)
scfg = write_config(t.path("secret.conf"), secret, cache_dir=ncache)
mnt = own(t.path("mnt-c"), 0, 0, 0o755)
r = subprocess.run([fflib.FEEDFS, "-f", "-o", "uid=65534,gid=65534", scfg, mnt],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
out = r.stdout.decode()
check(r.returncode == 2, "(c) exit %d: %s" % (r.returncode, out))
check("ermission denied" in out and secret in out, "(c) %s" % out)
check(mountinfo(mnt) is None, "(c) mounted")
log("(c) refused as uid 65534: %s" % out.strip().splitlines()[-1])

# ---- (d) -o user= ---------------------------------------------------------
mnt = own(t.path("mnt-d"), 0, 0, 0o755)
r = subprocess.run([fflib.FEEDFS, "-f", "-o", "user=nobody", cfg, mnt],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
out = r.stdout.decode()
check(mountinfo(mnt) is None, "(d) -o user=nobody mounted (%s)" % out)
check(r.returncode == 2 and "-o user=nobody" in out and "uid=nobody" in out,
      "(d) exit %d: %s" % (r.returncode, out))
log("(d) %s" % out.strip())

# ---- (e) a user made by useradd, by name, with a supplementary group ---------
name = "fft%d" % os.getpid()
group = "fftg%d" % os.getpid()
uhome = t.path("home-" + name)


def deluser():
    subprocess.run(["userdel", "-r", name], stderr=subprocess.DEVNULL)
    subprocess.run(["groupdel", group], stderr=subprocess.DEVNULL)


atexit.register(deluser)
r = subprocess.run(["groupadd", group], stderr=subprocess.PIPE)
check(r.returncode == 0, "groupadd: %s" % r.stderr.decode())
r = subprocess.run(["useradd", "-U", "-m", "-d", uhome, "-s", "/usr/sbin/nologin",
                    "-G", group, name], stderr=subprocess.PIPE)
check(r.returncode == 0, "useradd: %s" % r.stderr.decode())
pw = pwd.getpwnam(name)
gid_grp = int(subprocess.run(["getent", "group", group], stdout=subprocess.PIPE)
              .stdout.decode().split(":")[2])
gdata = t.gen(own(t.path("gdata"), 0, gid_grp, 0o750), n=12, classes=2, seed=9)
for d, _, files in os.walk(gdata):
    os.chown(d, 0, gid_grp)
    os.chmod(d, 0o750)
    for n in files:
        os.chown(os.path.join(d, n), 0, gid_grp)
        os.chmod(os.path.join(d, n), 0o640)
gcfg = write_config(t.path("gdata.conf"), gdata)
mnt = own(t.path("mnt-e"), 0, 0, 0o755)
proc, lp = start(["-o", "uid=" + name, gcfg, mnt], mnt, pw.pw_uid, pw.pw_gid,
                 env=base_env)
st = stats(pw.pw_uid, pw.pw_gid, mnt)
check(st.get("feedfs_cache_enabled") == "1", "(e) no cache: %s" % open(lp).read())
want = uhome + "/.cache/feedfs"
check(os.path.isdir(want) and os.stat(want).st_uid == pw.pw_uid,
      "(e) no cache_dir %s of %s" % (want, name))
check(os.stat(uhome + "/.cache").st_uid == pw.pw_uid, "(e) ~/.cache is not the user's")
r = as_user(pw.pw_uid, pw.pw_gid,
            ["cat", mnt + "/train/epoch-0000/batch-000000.npy"])
check(r.returncode == 0 and len(r.stdout) > 0, "(e) read: %s" % r.stderr.decode())
stop(proc, mnt, "term")
log("(e) %s (uid %d, group %s): cache_dir %s" % (name, pw.pw_uid, group, want))

# ---- (f) root makes no directory in a user's home ---------------------------
shutil.rmtree(uhome + "/.cache")
fcfg = write_config(t.path("f.conf"), data, cache_dir=uhome + "/.cache/feedfs")
with fflib.Mount(t, fcfg, t.path("mnt-f")) as m:
    text = m.log()
    if os.path.exists(uhome + "/.cache"):
        fail("(f) root made %s/.cache (uid %d)"
             % (uhome, os.stat(uhome + "/.cache").st_uid))
    check(m.stats().get("feedfs_cache_enabled") == 0, "(f) the cache is on")
    check(uhome in text, "(f) the log does not say why: %s" % text)
log("(f) no %s/.cache made by root: %s" % (uhome, [
    line for line in text.splitlines() if uhome in line][0]))
log("ok")
