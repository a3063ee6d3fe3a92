"""fflib - shared helpers of the real-mount Python tests.

Run as automake runs the tests: FF_BUILDDIR and FF_SRCDIR are absolute
paths of the build and source trees; exit status 77 means "skipped".

    t = fflib.Test("name")             # temp dir t.dir, removed at exit
    t.gen(dir, n=48, classes=3)        # gen-jpegs
    t.config(path, root, jobs, **mount)
    with fflib.Mount(t, cfg, mnt, "-o", "threads=1") as m:  # ready on entry
        ...                           # unmounted (daemon exit 0) on exit
    t.ref(cfg, job, epoch, outdir, rank=0, world=1)
"""

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"
# No test asks an EC2 instance metadata service at 169.254.169.254 (the
# end of feedfs's chain of S3 credentials): a test of it points
# AWS_EC2_METADATA_SERVICE_ENDPOINT at a server of its own.
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
BUILDDIR = os.environ.get("FF_BUILDDIR") or os.getcwd()
SRCDIR = os.environ.get("FF_SRCDIR") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
FEEDFS = os.path.join(BUILDDIR, "feedfs")
FFREF = os.path.join(BUILDDIR, "tests", "feedfs-ref")
GENJPEGS = os.path.join(BUILDDIR, "tests", "gen-jpegs")

TRAIN_PIPELINE = ("decode resize(72) cache random_resized_crop(64) flip(0.5) "
                  "normalize(imagenet)")

_mounts = []  # live Mount objects, for the exit handler


def name():
    return os.path.splitext(os.path.basename(sys.argv[0]))[0]


def log(*args):
    print("%s:" % name(), *args, flush=True)


def skip(why):
    print("%s: SKIP: %s" % (name(), why), flush=True)
    sys.exit(77)


def fail(why):
    print("%s: FAIL: %s" % (name(), why), file=sys.stderr, flush=True)
    sys.exit(1)


def check(cond, why):
    if not cond:
        fail(why)


def _mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 1 and fields[1].replace("\\040", " ") == path:
                return True
    return False


def _force_umount(path):
    if not _mounted(path):
        return
    for cmd in (["fusermount3", "-u", path], ["fusermount3", "-uz", path],
                ["umount", "-l", path]):
        if subprocess.call(cmd, stderr=subprocess.DEVNULL) == 0:
            return


class Test:
    """A test's environment: checks, a temp dir removed at exit."""

    def __init__(self, needs_fuse=True):
        for b in (FEEDFS, FFREF, GENJPEGS):
            if not os.access(b, os.X_OK):
                fail("%s is not built (run make check)" % b)
        if needs_fuse:
            if not os.path.exists("/dev/fuse"):
                skip("/dev/fuse is missing")
            if shutil.which("fusermount3") is None:
                skip("fusermount3 is missing")
        self.dir = tempfile.mkdtemp(prefix="feedfs-%s." % name(),
                                    dir=os.environ.get("TMPDIR", "/tmp"))
        atexit.register(self.cleanup)
        # SIGTERM (make's timeout, say) still unmounts.
        signal.signal(signal.SIGTERM, lambda s, f: sys.exit(1))

    def cleanup(self):
        for m in list(_mounts):
            m.kill()
        with open("/proc/self/mounts") as f:
            busy = any(self.dir in line for line in f)
        if busy:
            print("%s: warning: %s still has a mount; left in place"
                  % (name(), self.dir), file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def gen(self, outdir, n=48, classes=3, seed=0, big=False):
        cmd = [GENJPEGS, outdir, "--n", str(n), "--classes", str(classes),
               "--seed", str(seed)] + (["--big"] if big else [])
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(r.returncode == 0, "gen-jpegs failed: %s" % r.stderr.decode())
        return outdir

    def config(self, path, root, jobs, **mount):
        """Write a config: [mount] (cache in the temp dir, small memory),
        [dataset data] at root, and jobs: {name: {key: value}} over the
        defaults of job()."""
        m = dict(cache_dir=self.path("cache"), cache_size="1G", threads=2,
                 memory="256M", readahead=2)
        m.update(mount)
        lines = ["# written by %s" % name(), "[mount]"]
        lines += ["%s = %s" % kv for kv in m.items()]
        lines += ["", "[dataset data]", "root = %s" % root]
        for jname, keys in jobs.items():
            lines += ["", "[job %s]" % jname]
            lines += ["%s = %s" % kv for kv in job(**keys).items()]
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def ref(self, cfg, jobname, epoch, outdir, rank=0, world=1):
        """feedfs-ref's files of (job, epoch, rank view) in outdir."""
        os.makedirs(outdir, exist_ok=True)
        cmd = [FFREF]
        if world != 1:
            cmd += ["--rank", str(rank), "--world", str(world)]
        cmd += [cfg, jobname, str(epoch), outdir]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(r.returncode == 0, "%s failed: %s" % (" ".join(cmd),
                                                     r.stderr.decode()))
        return outdir


def job(**keys):
    """A job section's keys: the defaults, overridden by keys."""
    j = dict(dataset="data", batch_size=8, epochs=2, seed=7, shuffle="yes",
             drop_last="no", order="strict", pipeline=TRAIN_PIPELINE,
             dtype="float32", layout="CHW", on_error="fail")
    j.update(keys)
    return j


def free_port():
    """A TCP port of 127.0.0.1 that nothing listens on now (for a server
    the test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port):
    """Whether something accepts connections on 127.0.0.1:port."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


class Mount:
    """`feedfs -f [args] SOURCE MNT` in the background; entering waits until
    MNT/README can be stat'ed through the mount (the daemon answers), leaving
    unmounts with fusermount3 -u and requires exit status 0.  preexec: run
    in the child before feedfs (a cgroup to enter, an affinity to set)."""

    def __init__(self, t, source, mnt, *args, timeout=30, preexec=None):
        self.t, self.source, self.mnt, self.args = t, source, mnt, args
        self.timeout = timeout
        self.preexec = preexec
        self.proc = None
        self.logpath = None

    def __enter__(self):
        os.makedirs(self.mnt, exist_ok=True)
        self.mnt = os.path.realpath(self.mnt)
        n = 0
        while os.path.exists(self.t.path("feedfs.%d.log" % n)):
            n += 1
        self.logpath = self.t.path("feedfs.%d.log" % n)
        self.logf = open(self.logpath, "wb")
        self.proc = subprocess.Popen(
            [FEEDFS, "-f"] + list(self.args) + [self.source, self.mnt],
            stdout=self.logf, stderr=subprocess.STDOUT,
            preexec_fn=self.preexec)
        _mounts.append(self)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if _mounted(self.mnt):
                try:
                    os.stat(os.path.join(self.mnt, "README"))
                    return self
                except OSError:
                    pass
            rc = self.proc.poll()
            if rc is not None:
                _mounts.remove(self)
                text = self.log()
                low = text.lower()
                if any(s in low for s in ("permission denied",
                                          "operation not permitted",
                                          "fuse: device not found",
                                          "failed to open /dev/fuse")):
                    print(text)
                    skip("cannot mount FUSE file systems here")
                print("---- feedfs log (%s)\n%s" % (self.logpath, text))
                fail("feedfs exited with status %d before serving %s"
                     % (rc, self.mnt))
            time.sleep(0.1)
        print("---- feedfs log (%s)\n%s" % (self.logpath, self.log()))
        fail("%s not ready after %d s" % (self.mnt, self.timeout))

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.umount()
        else:
            self.kill()
        return False

    def log(self):
        if not self.logf.closed:
            self.logf.flush()
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def p(self, *parts):
        return os.path.join(self.mnt, *parts)

    def _wait_exit(self, how):
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            fail("feedfs still runs 30 s after %s" % how)
        if self in _mounts:
            _mounts.remove(self)
        self.logf.close()
        if rc != 0:
            print("---- feedfs log (%s)\n%s" % (self.logpath, self.log()))
            fail("feedfs exited with status %d after %s" % (rc, how))
        check(not _mounted(self.mnt), "%s still mounted after %s"
              % (self.mnt, how))

    def umount(self):
        """fusermount3 -u (retried while busy); the daemon must exit 0."""
        err = b""
        for _ in range(50):
            r = subprocess.run(["fusermount3", "-u", self.mnt],
                               stderr=subprocess.PIPE)
            if r.returncode == 0:
                break
            err = r.stderr
            time.sleep(0.2)
        else:
            fail("cannot unmount %s: %s" % (self.mnt, err.decode()))
        self._wait_exit("fusermount3 -u")

    def terminate(self):
        """SIGTERM: the daemon must unmount and exit 0."""
        self.proc.send_signal(signal.SIGTERM)
        self._wait_exit("SIGTERM")

    def kill(self):
        """Best effort, for failures and the exit handler."""
        _force_umount(self.mnt)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self in _mounts:
            _mounts.remove(self)

    def stats(self):
        """.feedfs/stats as {name: sum over its labels}."""
        out = {}
        with open(self.p(".feedfs", "stats")) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                key, val = line.rsplit(None, 1)
                key = key.split("{", 1)[0]
                out[key] = out.get(key, 0) + float(val)
        return out


    def read_epoch(self, job, epoch, ref=None):
        """Read every file of (job, epoch) through the mount, whole; with
        ref (a directory of feedfs-ref's files), the listing and every
        file's bytes must equal it."""
        d = self.p(job, "epoch-%04d" % epoch)
        names = sorted(os.listdir(d))
        if ref is not None:
            check(names == sorted(os.listdir(ref)),
                  "%s lists %s, the reference %s"
                  % (d, names, sorted(os.listdir(ref))))
        for n in names:
            got = read_file(os.path.join(d, n))
            if ref is not None:
                with open(os.path.join(ref, n), "rb") as f:
                    check(got == f.read(),
                          "%s/%s differs from feedfs-ref's" % (d, n))

    def load_epoch(self, job, e=0):
        """(images, labels, info.json) of (job, epoch e), every batch read
        with numpy.load and concatenated."""
        import json
        import numpy as np
        with open(self.p(job, "info.json")) as f:
            info = json.load(f)
        xs, ys = [], []
        for b in range(info["batches_per_epoch"]):
            base = self.p(job, "epoch-%04d" % e, "batch-%06d" % b)
            xs.append(np.load(base + ".npy"))
            ys.append(np.load(base + ".labels.npy"))
        return np.concatenate(xs), np.concatenate(ys), info

    def job_stat(self, name, job):
        """The value of counter name for job in .feedfs/stats."""
        key = '%s{job="%s"}' % (name, job)
        with open(self.p(".feedfs", "stats")) as f:
            for line in f:
                if line.startswith(key + " "):
                    return int(line.split()[1])
        fail("%s is not in .feedfs/stats" % key)


def read_file(path, bs=1 << 20, drop=False):
    """The bytes of path, read with plain read() calls.  drop: then drop the
    file's pages from the page cache, so that the next read asks feedfs."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            b = os.read(fd, bs)
            if not b:
                break
            chunks.append(b)
        if drop:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return b"".join(chunks)
    finally:
        os.close(fd)


def npy_header_len(path):
    """Offset of the data in a .npy file (version 1.0)."""
    with open(path, "rb") as f:
        head = f.read(10)
    check(head[:8] == b"\x93NUMPY\x01\x00", "%s: not .npy 1.0" % path)
    return 10 + int.from_bytes(head[8:10], "little")
