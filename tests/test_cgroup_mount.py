#!/usr/bin/python3
"""test_cgroup_mount.py - issue 40, section 1: feedfs sizes itself from
what the job is given, in real cgroups (tests/cgroups.py: v1 here, v2
where its controllers can be had; each version skipped with the reason
where not), as Slurm and Kubernetes give a job its memory and cores.

Before, feedfs sized itself from the whole machine: in a 512M memory
cgroup the default `memory` stayed 2G (feedfs_memory_limit_bytes
1879048192) and two readers got the daemon OOM-killed (short reads, then
ENOTCONN); threads = 0 started two workers per online CPU under taskset
-c 0, in a one-CPU cpuset and under a 0.5-CPU quota; a 1.8 GB batch with
memory = 256M got the daemon OOM-killed in a 1G cgroup; memory = 100T was
taken as it was.  Checked here, each on a mount of its own:

  - taskset -c 0, a cpuset of one CPU, a quota of 0.5 CPU: threads = 0
    starts 2 workers (two per CPU the process may use: feedfs_workers),
    said in the log;
  - a 512M limit on a parent group, the daemon in a child without one
    (the nearest limited ancestor counts): the default memory is half of
    512M less 64M (feedfs_memory_limit_bytes: that less the cache's
    eighth); two readers (sha256sum, in the group too) read an epoch of
    the default train job (256 float32 3x224x224 a batch: 147 MiB) in
    different orders, get feedfs-ref's bytes, and nothing is OOM-killed;
    the daemon's peak RSS (VmHWM) and the group's charges are printed;
  - memory = 100T in that group: lowered to 512M less 128M, said in one
    line with FILE:LINE on the terminal of a background mount, in -o
    log=FILE and .feedfs/log; -o memory=100T outside it: lowered to what
    this process may use (its own limit, or the RAM);
  - 3000 1x1 JPEGs, batch_size = 3000, float32 (1.8 GB a batch), memory
    = 256M, in a 1G group: refused at mount, exit 2, "FILE:LINE: job
    big: a batch needs ..." naming batch_size's line; nothing killed;
  - six readers of 25 MB batches on different epochs, in a 512M group:
    the daemon's VmHWM stays under memory + 100 MiB (batch buffers are
    mapped on their own: from malloc, every FUSE thread's arena kept
    those freed in it, 502 MiB at memory = 224M);
  - a batch that fits at mount, read while open label files hold the
    metadata it would need: the read fails with ENOMEM after a moment,
    logged and counted (feedfs_read_room_refused_total), the budget's
    peak stays under its limit (before, the batch was made past it), the
    daemon lives; the files closed, that batch and the next read with
    feedfs-ref's bytes.

Under AddressSanitizer (whose shadow and quarantine are charged to the
group too) the groups that hold batches are four times larger and the
RSS is not checked.  FF_CASES=taskset,ram,cpuset,quota,mount,clamp,read,
arenas,readers runs only those cases.
"""

import hashlib
import os
import re
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cgroups  # noqa: E402
import fflib  # noqa: E402
from fflib import check, fail, log  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30
# The default train job's pipeline (cfg_default's).
TRAIN = ("decode resize(256) cache random_resized_crop(224) flip(0.5) "
         "normalize(imagenet)")
RAM = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def default_memory(bound):
    """feedfs.conf(5)'s rule: half of the bound less 64M, 16M to 2G."""
    return max(16 * MIB, min(2 * GIB, (bound - 64 * MIB) // 2))


def budget(memory, cache=True):
    """feedfs_memory_limit_bytes: memory less the cache's share."""
    return memory - (min(memory // 8, 256 * MIB) if cache else 0)


def sanitized():
    r = subprocess.run(["ldd", fflib.FEEDFS], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL)
    return b"libasan" in r.stdout


def write_config(path, mount, datasets, jobs):
    """[mount] (only the keys given: the rest are the defaults under
    test), [dataset NAME] sections, [job NAME] over fflib.job()'s keys.
    Returns {(section, key): line number}."""
    lines, where = ["# written by %s" % fflib.name(), "[mount]"], {}
    for k, v in mount.items():
        lines.append("%s = %s" % (k, v))
        where[("mount", k)] = len(lines)
    for name, keys in datasets.items():
        lines += ["", "[dataset %s]" % name]
        lines += ["%s = %s" % kv for kv in keys.items()]
    for name, keys in jobs.items():
        lines += ["", "[job %s]" % name]
        for k, v in fflib.job(**keys).items():
            lines.append("%s = %s" % (k, v))
            where[(name, k)] = len(lines)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return where


def vm(pid, key):
    with open("/proc/%d/status" % pid) as f:
        m = re.search(r"^%s:\s+(\d+) kB" % key, f.read(), re.M)
    return int(m.group(1)) * 1024 if m else 0


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def stats_at(mnt):
    """.feedfs/stats of the mount at mnt as {name: sum over labels}."""
    out = {}
    with open(os.path.join(mnt, ".feedfs", "stats")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            key, val = line.rsplit(None, 1)
            key = key.split("{", 1)[0]
            out[key] = out.get(key, 0) + float(val)
    return out


def resources_line(m):
    """The log's line that says what the mount chose, or ""."""
    for line in m.log().splitlines():
        if "resources:" in line:
            return line
    return ""


CASES = os.environ.get("FF_CASES")


def want(case):
    return CASES is None or case in CASES.split(",")


t = fflib.Test()
asan = sanitized()
scale = 4 if asan else 1
cpu0 = min(os.sched_getaffinity(0))
data = t.gen(t.path("data"), n=512, classes=4, seed=3)
base = dict(cache_dir=t.path("cache"), cache_size="1G")


def workers_case(title, preexec):
    """threads = 0 in a process given one CPU: two workers."""
    cfg = t.path("threads.conf")
    write_config(cfg, dict(base, threads=0), {"data": {"root": data}},
                 {"train": dict(epochs=1)})
    with fflib.Mount(t, cfg, t.path("mnt"), preexec=preexec) as m:
        st = m.stats()
        line = resources_line(m)
        log("%s: %d workers; %s" % (title, st["feedfs_workers"], line))
        check(st["feedfs_workers"] == 2,
              "%s: %d workers, not 2 (two per CPU the process may use)"
              % (title, st["feedfs_workers"]))
        check("threads = 2 (0: two per CPU; 1 CPU" in line,
              "%s: the log does not say why:\n%s" % (title, m.log()))
        return line


# ---- taskset -c 0: the affinity mask, no cgroup needed -----------------
if want("taskset"):
    workers_case("taskset -c %d" % cpu0,
                 lambda: os.sched_setaffinity(0, {cpu0}))

# ---- -o memory=100T where nothing lower than the RAM bounds it ---------
if want("ram"):
    cfg = t.path("ram.conf")
    write_config(cfg, base, {"data": {"root": data}}, {"train": dict(epochs=1)})
    with fflib.Mount(t, cfg, t.path("mnt"), "-o", "memory=100T") as m:
        st = m.stats()
        said = [ln for ln in m.log().splitlines()
                if "-o memory=100T is more than this process may use: "
                   "lowered to" in ln]
        log("memory=100T: limit %d bytes; %s" %
            (st["feedfs_memory_limit_bytes"], said[:1]))
        check(len(said) == 1, "memory=100T: %d lines say it was lowered, not 1:"
              "\n%s" % (len(said), m.log()))
        check(st["feedfs_memory_limit_bytes"] < RAM,
              "memory=100T: feedfs_memory_limit_bytes %d, over the RAM %d"
              % (st["feedfs_memory_limit_bytes"], RAM))

versions = [cgroups.Version("v1"), cgroups.Version("v2")]
for v in versions:
    if v.unavailable():
        log("cgroup %s: SKIP: %s" % (v.version, v.unavailable()))
if all(v.unavailable() for v in versions):
    fflib.skip("no cgroup to test in: %s" %
               "; ".join(v.unavailable() for v in versions))


def two_readers(v):
    """The default memory in a 512M group; two readers in it too."""
    limit = 512 * MIB * scale
    g = v.group("mem", memory=limit, inner=True)
    cfg = t.path("default-%s.conf" % v.version)
    write_config(cfg, base, {"data": {"root": data}},
                 {"train": dict(epochs=1, batch_size=256, pipeline=TRAIN,
                                seed=11)})
    ref = t.ref(cfg, "train", 0, t.path("ref-%s" % v.version))
    want = {n: sha(os.path.join(ref, n)) for n in
            ("batch-000000.npy", "batch-000001.npy")}
    mem = default_memory(min(limit, RAM))
    with fflib.Mount(t, cfg, t.path("mnt"), preexec=g.enter) as m:
        pid = m.proc.pid
        st = m.stats()
        log("%s: %s" % (v.version, resources_line(m)))
        check(st["feedfs_memory_limit_bytes"] == budget(mem),
              "%s, a %d MiB group: feedfs_memory_limit_bytes %d, not %d "
              "(memory = %d MiB, the default from the group's limit)"
              % (v.version, limit // MIB, st["feedfs_memory_limit_bytes"],
                 budget(mem), mem // MIB))
        check("memory = %dM (the default" % (mem // MIB) in
              resources_line(m), "%s: the log does not say why:\n%s"
              % (v.version, m.log()))
        ep = m.p("train", "epoch-0000")
        names = ["batch-000000.npy", "batch-000001.npy"]
        readers = [subprocess.Popen(
            ["sha256sum"] + [os.path.join(ep, n) for n in order],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=g.enter) for order in (names, names[::-1])]
        peak = dict(anon=0, usage=0, rss=0)
        done = threading.Event()

        def sample():
            while not done.is_set():
                try:
                    peak["anon"] = max(peak["anon"], g.anon())
                    peak["usage"] = max(peak["usage"], g.usage())
                    peak["rss"] = max(peak["rss"], vm(pid, "VmRSS"))
                except OSError:
                    pass
                time.sleep(0.1)

        th = threading.Thread(target=sample)
        th.start()
        outs = []
        for r in readers:
            try:
                out, err = r.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                r.kill()
                out, err = r.communicate()
            outs.append((r.returncode, out.decode(), err.decode()))
        done.set()
        th.join()
        kills = g.oom_kills()
        alive = m.alive()
        hwm = vm(pid, "VmHWM") if alive else 0
        st = m.stats() if alive else {}
        log("%s, two readers in a %d MiB group, memory = %d MiB: daemon "
            "VmHWM %.0f MiB (VmRSS sampled %.0f MiB); the group's anon "
            "(memory.stat) peak %.0f MiB, charged peak %.0f MiB (page cache "
            "included; sampled %.0f MiB), OOM kills %d; the budget's peak "
            "%.0f MiB of %.0f MiB"
            % (v.version, limit // MIB, mem // MIB, hwm / MIB,
               peak["rss"] / MIB, peak["anon"] / MIB,
               (g.peak() or 0) / MIB, peak["usage"] / MIB, kills,
               st.get("feedfs_memory_peak_bytes", 0) / MIB,
               st.get("feedfs_memory_limit_bytes", 0) / MIB))
        check(kills == 0 and alive,
              "%s: %d OOM kills in the group, the daemon %s"
              % (v.version, kills, "alive" if alive else "dead"))
        for (rc, out, err), order in zip(outs, (names, names[::-1])):
            check(rc == 0, "%s: a reader failed: %s" % (v.version, err))
            got = {os.path.basename(ln.split()[1]): ln.split()[0]
                   for ln in out.splitlines()}
            check(got == want, "%s: a reader (%s) got other bytes than "
                  "feedfs-ref's" % (v.version, " then ".join(order)))
        if not asan:
            check(hwm <= mem + 100 * MIB, "%s: VmHWM %.0f MiB over memory "
                  "+ 100 MiB" % (v.version, hwm / MIB))


def clamp(v):
    """memory = 100T in a 512M group: lowered to 384M, said once."""
    g = v.group("clamp", memory=512 * MIB, inner=True)
    cfg = t.path("clamp-%s.conf" % v.version)
    where = write_config(cfg, dict(base, memory="100T"),
                         {"data": {"root": data}}, {"train": dict(epochs=1)})
    mnt = t.path("mnt")
    os.makedirs(mnt, exist_ok=True)
    logfile = t.path("clamp-%s.log" % v.version)
    said = ("%s:%d: memory = 100T is more than this process may use: "
            "lowered to 384M" % (cfg, where[("mount", "memory")]))
    # Without -f: the terminal is the parent's stderr until it returns.
    r = subprocess.run([fflib.FEEDFS, "-o", "log=" + logfile, cfg, mnt],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       preexec_fn=g.enter, timeout=120)
    try:
        term = r.stderr.decode()
        check(r.returncode == 0, "%s: feedfs exited %d: %s"
              % (v.version, r.returncode, term))
        st = stats_at(mnt)
        with open(os.path.join(mnt, ".feedfs", "log")) as f:
            ring = f.read()
        with open(logfile) as f:
            filed = f.read()
        log("%s: on the terminal: %s" % (v.version, term.strip()))
        for what, text in (("the terminal", term), (".feedfs/log", ring),
                           ("-o log=FILE", filed)):
            n = text.count(said)
            check(n == 1, "%s: %s says %d times, not once, %r:\n%s"
                  % (v.version, what, n, said, text))
        check(st["feedfs_memory_limit_bytes"] == budget(384 * MIB),
              "%s: feedfs_memory_limit_bytes %d, not %d (384M less the "
              "cache's share)" % (v.version, st["feedfs_memory_limit_bytes"],
                                  budget(384 * MIB)))
    finally:
        subprocess.call(["fusermount3", "-u", mnt])
    for _ in range(300):  # the daemon gone from its group
        if not g.procs():
            break
        time.sleep(0.1)
    check(not g.procs(), "%s: feedfs still runs after its unmount"
          % v.version)
    check(g.oom_kills() == 0, "%s: an OOM kill" % v.version)


def tiny_jpeg():
    from PIL import Image
    import io
    b = io.BytesIO()
    Image.new("RGB", (1, 1), (200, 30, 90)).save(b, "JPEG")
    return b.getvalue()


def batch_at_mount(v):
    """3000 1x1 JPEGs, batch_size 3000, float32, memory 256M, a 1G group:
    refused at mount with FILE:LINE."""
    g = v.group("big", memory=GIB, inner=True)
    tiny = t.path("tiny")
    if not os.path.isdir(tiny):
        os.makedirs(os.path.join(tiny, "c0"))
        jpg = tiny_jpeg()
        for i in range(3000):
            with open(os.path.join(tiny, "c0", "%04d.jpg" % i), "wb") as f:
                f.write(jpg)
    cfg = t.path("big-%s.conf" % v.version)
    where = write_config(cfg, dict(base, memory="256M"),
                         {"tiny": {"root": tiny}},
                         {"big": dict(dataset="tiny", batch_size=3000,
                                      epochs=1, pipeline=TRAIN)})
    mnt = t.path("mnt")
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.Popen([fflib.FEEDFS, "-f", cfg, mnt],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         preexec_fn=g.enter)
    try:
        out, _ = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        # Mounted: what the read of such a batch does (before: OOM kill).
        what = "no read"
        try:
            with open(os.path.join(mnt, "big", "epoch-0000",
                                   "batch-000000.npy"), "rb") as f:
                while f.read(1 << 20):
                    pass
            what = "read whole"
        except OSError as e:
            what = "read failed: %s" % e
        subprocess.call(["fusermount3", "-u", mnt])
        p.kill()
        out, _ = p.communicate()
        fail("%s: a job of 1.8 GB batches was mounted at memory = 256M "
             "(%s; OOM kills in the group: %d):\n%s"
             % (v.version, what, g.oom_kills(), out.decode()))
    out = out.decode()
    want = "feedfs: %s:%d: job big: a batch needs 1.7G" % (
        cfg, where[("big", "batch_size")])
    log("%s: %s" % (v.version, out.strip()))
    check(p.returncode == 2, "%s: exit %d, not 2" % (v.version, p.returncode))
    check(want in out, "%s: not refused with %r:\n%s" % (v.version, want, out))
    check(g.oom_kills() == 0, "%s: an OOM kill" % v.version)


def gradient(path, i, size=1024):
    import numpy as np
    from PIL import Image
    y, x = np.mgrid[0:size, 0:size]
    px = np.stack([(x + 7 * i) % 256, (y + 13 * i) % 256,
                   ((x + y) // 2 + i) % 256], axis=-1).astype(np.uint8)
    Image.fromarray(px).save(path, "JPEG", quality=90)


def read_refused(v):
    """A batch that fits at mount, refused at its read while metadata
    holds what it needs; read once the metadata is gone."""
    g = v.group("meta", memory=512 * MIB * scale, inner=True)
    imgs = t.path("imgs")
    if not os.path.isdir(imgs):
        os.makedirs(os.path.join(imgs, "c0"))
        for i in range(46):
            gradient(os.path.join(imgs, "c0", "%02d.jpg" % i), i)
        # 100000 samples named only (never decoded: their labels files
        # are made from the plan): metadata of 512 KB an open file.
        os.makedirs(t.path("many"))
        with open(t.path("many", "list.tsv"), "w") as f:
            for i in range(100000):
                f.write("m/%06d.jpg\t%d\n" % (i, i % 10))
    cfg = t.path("meta-%s.conf" % v.version)
    write_config(cfg, dict(memory="96M", cache_size=0, threads=1,
                           readahead=0, cache_dir=t.path("cache")),
                 {"imgs": {"root": imgs},
                  "many": {"root": t.path("many"),
                           "manifest": t.path("many", "list.tsv")}},
                 {"big": dict(dataset="imgs", batch_size=23, epochs=1,
                              shuffle="no", pipeline="decode "
                              "center_crop(1024)", dtype="uint8",
                              layout="HWC"),
                  "lbl": dict(dataset="many", batch_size=65536, epochs=100,
                              pipeline="decode center_crop(8)",
                              dtype="uint8")})
    ref = t.ref(cfg, "big", 0, t.path("ref-big-%s" % v.version))
    with fflib.Mount(t, cfg, t.path("mnt"), preexec=g.enter) as m:
        held = [open(m.p("lbl", "epoch-%04d" % e, "batch-000000.labels.npy"),
                     "rb") for e in range(40)]
        st = m.stats()
        log("%s: %d label files hold %.1f MiB of metadata (cap %.1f MiB) "
            "of a budget of %.1f MiB" % (v.version, len(held),
                                         st["feedfs_metadata_bytes"] / MIB,
                                         st["feedfs_metadata_limit_bytes"] /
                                         MIB,
                                         st["feedfs_memory_limit_bytes"] /
                                         MIB))
        b0 = m.p("big", "epoch-0000", "batch-000000.npy")
        err = None
        try:
            fflib.read_file(b0)
        except OSError as e:
            err = e
        st = m.stats()
        check(err is not None,
              "%s: the read of a batch that does not fit beside the "
              "metadata held succeeded: the budget's peak %d over its "
              "limit %d" % (v.version, st["feedfs_memory_peak_bytes"],
                            st["feedfs_memory_limit_bytes"]))
        log("%s: the read failed: %s" % (v.version, err))
        check(err.errno == 12, "%s: %s, not ENOMEM" % (v.version, err))
        check(m.alive(), "%s: the daemon died" % v.version)
        check(st["feedfs_read_room_refused_total"] >= 1,
              "%s: feedfs_read_room_refused_total is %d"
              % (v.version, st["feedfs_read_room_refused_total"]))
        check(st["feedfs_memory_peak_bytes"] <=
              st["feedfs_memory_limit_bytes"],
              "%s: the budget's peak %d over its limit %d" %
              (v.version, st["feedfs_memory_peak_bytes"],
               st["feedfs_memory_limit_bytes"]))
        check("memory: job big, epoch 0, batch 0 needs" in m.log(),
              "%s: the refusal is not logged:\n%s" % (v.version, m.log()))
        for f in held:
            f.close()
        for b in (0, 1):
            name = "batch-%06d.npy" % b
            got = fflib.read_file(m.p("big", "epoch-0000", name))
            with open(os.path.join(ref, name), "rb") as f:
                check(got == f.read(), "%s: %s differs from feedfs-ref's "
                      "once the files are closed" % (v.version, name))
        check(g.oom_kills() == 0, "%s: an OOM kill" % v.version)


def arenas(v):
    """Six readers of 25 MB batches (under glibc's mmap threshold) on
    different epochs, in a 512M group: the daemon's RSS follows the
    budget (before: each FUSE thread's malloc arena kept the batch
    buffers freed in it, 502 MiB at memory = 224M)."""
    g = v.group("arenas", memory=512 * MIB * scale, inner=True)
    cfg = t.path("arenas-%s.conf" % v.version)
    d1k = t.path("data1k")
    if not os.path.isdir(d1k):
        t.gen(d1k, n=1024, classes=4, seed=5)
    write_config(cfg, base, {"data": {"root": d1k}},
                 {"small": dict(batch_size=512, epochs=30, pipeline="decode "
                                "resize(72) cache center_crop(64) flip(0.5)")})
    mem = default_memory(min(512 * MIB * scale, RAM))
    errors = []
    with fflib.Mount(t, cfg, t.path("mnt"), preexec=g.enter) as m:
        def reader(k):
            try:
                for e in range(k, 30, 6):
                    for b in (0, 1):
                        fflib.read_file(m.p("small", "epoch-%04d" % e,
                                            "batch-%06d.npy" % b))
            except OSError as e:
                errors.append(e)
        ths = [threading.Thread(target=reader, args=(k,)) for k in range(6)]
        [th.start() for th in ths]
        [th.join() for th in ths]
        hwm = vm(m.proc.pid, "VmHWM")
        st = m.stats()
        log("%s, six readers of 25 MB batches, memory = %d MiB: daemon VmHWM "
            "%.0f MiB, the budget's peak %.0f MiB, the group's charged peak "
            "%.0f MiB, OOM kills %d" % (v.version, mem // MIB, hwm / MIB,
                                        st["feedfs_memory_peak_bytes"] / MIB,
                                        (g.peak() or 0) / MIB, g.oom_kills()))
        check(not errors, "%s: reads failed: %s" % (v.version, errors))
        check(g.oom_kills() == 0, "%s: an OOM kill" % v.version)
        if not asan:
            check(hwm <= mem + 100 * MIB, "%s: VmHWM %.0f MiB over memory "
                  "+ 100 MiB" % (v.version, hwm / MIB))


for v in versions:
    if v.unavailable():
        continue
    if want("cpuset"):
        workers_case("%s cpuset of CPU %d" % (v.version, cpu0),
                     v.group("cpuset", cpus=str(cpu0)).enter)
    if want("quota"):
        workers_case("%s quota of 0.5 CPU" % v.version,
                     v.group("quota", quota=(50000, 100000)).enter)
    for case, run in (("mount", batch_at_mount), ("clamp", clamp),
                      ("read", read_refused), ("arenas", arenas),
                      ("readers", two_readers)):
        if want(case):
            run(v)
log("ok")
