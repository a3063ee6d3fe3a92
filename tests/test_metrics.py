#!/usr/bin/env python3
"""test_metrics - -o metrics=ADDR:PORT, the Prometheus listener (issue 40, 5).

 (a) two mounts, each with its listener: curl gets .feedfs/stats's series,
     each labelled mount="MNT" (the two told apart), parsed by Prometheus's
     own parser (python3-prometheus-client; promtool check metrics too
     where it is installed); feedfs_build_info{version,commit} as -V says;
 (b) what is not a scrape: 400, 404, 405 (POST), 431 (a head over 4 KiB),
     505 (HTTP/2.0); HEAD has no body;
 (c) a slowloris (40 connections dribbling a head a byte at a time) and a
     client that asks and never reads: curl still gets its answer, the
     mount still serves batches, the daemon's descriptors stay within the
     listener's bound, and the stalled connections are closed by the
     server after its deadline;
 (d) the node's root reads the counters of a mount that root started for
     uid 65534 (-o uid=): from its listener, and with allow_root from
     .feedfs/stats too (uid 1 still kept out);
 (e) a port already taken: exit 2, nothing mounted.
"""
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faulthandler  # noqa: E402
import fflib  # noqa: E402

faulthandler.dump_traceback_later(400, exit=True)
from fflib import check, fail, log  # noqa: E402

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    fflib.skip("no python3-prometheus-client (Prometheus's parser)")
if shutil.which("curl") is None:
    fflib.skip("no curl")

t = fflib.Test()
data = t.gen(t.path("data"), n=24, classes=2, seed=2)
cfg = t.config(t.path("feedfs.conf"), data, {"train": dict(epochs=1)},
               threads=1)
cfg2 = t.config(t.path("feedfs2.conf"), data, {"train": dict(epochs=1)},
                threads=1, cache_dir=t.path("cache2"))


def curl(port, path="/metrics", *extra):
    r = subprocess.run(["curl", "-sS", "-m", "20", "-D", "-",
                        "http://127.0.0.1:%d%s" % (port, path)] + list(extra),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(r.returncode == 0, "curl :%d%s: %s" % (port, path, r.stderr.decode()))
    head, _, body = r.stdout.decode().partition("\r\n\r\n")
    return int(head.split()[1]), head, body


def raw(port, data, read=True):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(data)
    if not read:
        return s
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
    s.close()
    return out


def samples(text):
    fams = list(text_string_to_metric_families(text))
    return fams, [s for f in fams for s in f.samples]


version = subprocess.run([fflib.FEEDFS, "-V"], stdout=subprocess.PIPE).stdout.decode()
commit = version.split("(commit ", 1)[1].split(")")[0].split(",")[0].split(":")[0]
pa, pb = fflib.free_port(), fflib.free_port()
with fflib.Mount(t, cfg, t.path("mnt-a"), "-o", "metrics=127.0.0.1:%d" % pa) as a, \
        fflib.Mount(t, cfg2, t.path("mnt-b"), "-o", "metrics=%d" % pb) as b:
    # ---- (a) ------------------------------------------------------------
    fflib.read_file(a.p("train", "epoch-0000", "batch-000000.npy"))
    for m, port in ((a, pa), (b, pb)):
        status, head, body = curl(port)
        check(status == 200, "(a) status %d" % status)
        check("text/plain; version=0.0.4" in head, "(a) head: %s" % head)
        fams, ss = samples(body)
        check(len(ss) > 20, "(a) %d samples" % len(ss))
        for s in ss:
            check(s.labels.get("mount") == m.mnt,
                  "(a) %s%s has no mount=%s" % (s.name, s.labels, m.mnt))
        with open(m.p(".feedfs", "stats")) as f:
            fams2, ss2 = samples(f.read())
        check({f.name for f in fams} == {f.name for f in fams2},
              "(a) the listener's families differ from .feedfs/stats's: %s"
              % ({f.name for f in fams} ^ {f.name for f in fams2}))
        check(len(ss) == len(ss2), "(a) %d samples against %d" % (len(ss), len(ss2)))
        bi = [s for s in ss if s.name == "feedfs_build_info"]
        check(len(bi) == 1 and bi[0].labels["commit"] == commit and
              version.startswith("feedfs %s " % bi[0].labels["version"]),
              "(a) build_info %s, -V %s" % (bi, version))
        if shutil.which("promtool"):
            r = subprocess.run(["promtool", "check", "metrics"], input=body.encode(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            check(r.returncode == 0, "(a) promtool: %s" % r.stdout.decode())
    hits = [s for s in samples(curl(pa)[2])[1] if s.name == "feedfs_cache_misses_total"]
    check(any(s.value > 0 for s in hits), "(a) no misses counted in A: %s" % hits)
    log("(a) two mounts, %d samples each labelled with its mount; parsed by "
        "prometheus_client%s" % (len(ss), ", promtool" if shutil.which("promtool") else ""))

    # ---- (b) ------------------------------------------------------------
    for req, want in ((b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n", b" 404 "),
                      (b"POST /metrics HTTP/1.1\r\n\r\n", b" 405 "),
                      (b"GET /metrics HTTP/2.0\r\n\r\n", b" 505 "),
                      (b"GET metrics HTTP/1.1\r\n\r\n", b" 400 "),
                      (b"GET /metrics HTTP/1.1\r\nNoColon\r\n\r\n", b" 400 "),
                      (b"GET /metrics HTTP/1.1\r\nX: " + b"y" * 8000 + b"\r\n\r\n",
                       b" 431 "),
                      (b"GET /" + b"m" * 300 + b" HTTP/1.1\r\n\r\n", b" 414 "),
                      (b"GET /metrics?x=1 HTTP/1.0\n\n", b" 200 ")):
        got = raw(pa, req)
        check(got.split(b"\r\n")[0].find(want) > 0, "(b) %r: %r" % (req[:40], got[:80]))
    got = raw(pa, b"HEAD /metrics HTTP/1.1\r\n\r\n")
    check(got.endswith(b"\r\n\r\n") and b"Content-Length: " in got, "(b) HEAD: %r" % got[:200])
    log("(b) 404, 405, 505, 400, 431, 414, a query, HEAD")

    # ---- (c) a slowloris and a client that never reads -------------------
    pid = a.proc.pid
    nfd0 = len(os.listdir("/proc/%d/fd" % pid))
    slow = []
    for i in range(40):
        s = socket.create_connection(("127.0.0.1", pa), timeout=5)
        s.sendall(b"GET /metr")
        slow.append(s)
    deaf = []
    for i in range(4):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        s.connect(("127.0.0.1", pa))
        s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        deaf.append(s)
    for rnd in range(6):
        for s in slow:
            try:
                s.send(b"i")
            except OSError:
                pass
        status, _, body = curl(pa)
        check(status == 200 and "feedfs_build_info" in body,
              "(c) curl during the slowloris, round %d: %d" % (rnd, status))
        nfd = len(os.listdir("/proc/%d/fd" % pid))
        check(nfd <= nfd0 + 8 + 2, "(c) the daemon holds %d fds (%d before)" % (nfd, nfd0))
        time.sleep(0.3)
    ref = t.ref(cfg, "train", 0, t.path("ref"))
    a.read_epoch("train", 0, ref)
    # Past the deadline (5 s) every stalled connection is closed by the server.
    time.sleep(6)
    closed = 0
    for s in slow + deaf:
        s.settimeout(5)
        try:
            while True:
                b_ = s.recv(65536)
                if not b_:
                    closed += 1
                    break
        except (ConnectionResetError, BrokenPipeError):
            closed += 1
        except socket.timeout:
            pass
        s.close()
    check(closed == len(slow) + len(deaf),
          "(c) %d of %d stalled connections still open past the deadline"
          % (len(slow) + len(deaf) - closed, len(slow) + len(deaf)))
    check(len(os.listdir("/proc/%d/fd" % pid)) <= nfd0 + 1,
          "(c) fds left: %d, %d before" % (len(os.listdir("/proc/%d/fd" % pid)), nfd0))
    log("(c) 40 slow and 4 deaf clients: every curl answered, the epoch read "
        "equal to feedfs-ref's, fds within %d + 8, all closed after the deadline" % nfd0)

# ---- (d) root reads the counters of a user's mount ---------------------------
if os.geteuid() == 0:
    os.chmod(t.dir, 0o711)
    for d, _, files in os.walk(data):
        os.chmod(d, 0o755)
        for n in files:
            os.chmod(os.path.join(d, n), 0o644)
    ncache = t.path("nobody")
    os.makedirs(ncache)
    os.chown(ncache, 65534, 65534)
    os.chmod(cfg, 0o644)
    mnt = t.path("mnt-d")
    os.makedirs(mnt)
    pd = fflib.free_port()
    proc = subprocess.Popen([fflib.FEEDFS, "-f", "-o",
                             "uid=65534,gid=65534,allow_root,cache_dir=%s/c,"
                             "metrics=127.0.0.1:%d"
                             % (ncache, pd), cfg, mnt],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # The listener is bound before the mount: wait for the mount.
        for _ in range(300):
            if fflib._mounted(mnt) or proc.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        if proc.poll() is not None:
            fail("(d) feedfs: %s" % proc.stdout.read().decode())
        # Without allow_root root is kept out (test_users.py (b)); with
        # it, root reads .feedfs/stats, and another user still may not.
        with open(mnt + "/.feedfs/stats") as f:
            check("feedfs_build_info" in f.read(), "(d) allow_root: no stats")
        r = subprocess.run(["cat", mnt + "/README"], user=1, group=1,
                           extra_groups=[], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        check(r.returncode != 0, "(d) allow_root let uid 1 in")
        status, _, body = curl(pd)
        check(status == 200, "(d) %d" % status)
        ss = samples(body)[1]
        check(all(s.labels["mount"] == mnt for s in ss), "(d) labels")
        log("(d) root read %d samples of uid 65534's mount from its listener, "
            "and its .feedfs/stats with allow_root" % len(ss))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        fflib._force_umount(mnt)
else:
    log("(d) skipped: not root")

# ---- (e) a port taken -----------------------------------------------------
busy = socket.socket()
busy.bind(("127.0.0.1", 0))
busy.listen(1)
mnt = t.path("mnt-e")
os.makedirs(mnt, exist_ok=True)
r = subprocess.run([fflib.FEEDFS, "-f", "-o", "metrics=127.0.0.1:%d"
                    % busy.getsockname()[1], cfg, mnt],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
out = r.stdout.decode()
check(r.returncode == 2 and "metrics=" in out and "in use" in out,
      "(e) rc %d: %s" % (r.returncode, out))
check(not fflib._mounted(mnt), "(e) mounted")
busy.close()
log("(e) %s" % out.strip())
log("ok")
