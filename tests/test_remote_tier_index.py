#!/usr/bin/python3
"""test_remote_tier_index.py - remote shards' indexes in the cluster tier
(issue 38).

Four WebDataset shards of 48 images served by nginx (its access log
counts the bytes), a memcached as the cluster tier, the same shards on
local disk for feedfs-ref.  Each "node" is a mount with a cache_dir of
its own; bytes are counted, never time.

1. Node A (a fresh cache_dir) mounts and reads its first epoch: the one
   pass puts each shard's index (offsets, sizes, content digests) and
   every prefix in the tier.
2. Node B (another fresh cache_dir, the same tier): over its mount and
   its first epoch nginx sends at most 5% of the shards' bytes (it was
   2x: every shard streamed again, then every member fetched by range
   for its digest); it streams no shard, takes the four indexes from the
   tier (.feedfs/stats) and every prefix from it; its epoch equals
   feedfs-ref's over the local shards.
3. feedfs-fill on another node (a fresh cache_dir) takes the indexes
   from the tier too: no shard streamed, no member read, every prefix
   "already there".
4. A stale index: shard 1 replaced on the server (other images, another
   ETag), and node A's index of shard 1 as it was planted under the tier
   key of the new version (tests/tier-plant: sealed as a value of that
   key, so only the index's own check can tell).  Node C refuses it
   (feedfs_index_refused_total), streams shard 1, and serves the
   new shard's samples as feedfs-ref does over it.
5. A forged index: with cluster_secret, node D fills the tier; an index
   of shard 2 planted in the secret's namespace without its MAC (what
   someone who sees the servers' item names, and not the secret, could
   store; tier-plant --forge) overwrites the real one.  Node E (the same
   secret) refuses it: it streams shard 2 and only shard 2, and serves
   the epoch as feedfs-ref does.
6. Captions and lists of labels (issue 39) through the one pass and the
   tier: two other shards whose samples have a .txt caption and a .json
   list of labels (text = txt, label = json:labels).  Node F streams them
   and serves its epoch (images, multi-hot labels, .text.jsonl) as
   feedfs-ref does over the same shards on disk; node G (a fresh
   cache_dir) streams nothing, takes both indexes from the tier, and
   serves the same epoch, every caption in it.
"""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402
import remote_servers as rs  # noqa: E402

MEMCACHED = "/usr/bin/memcached"
why = rs.Nginx.unavailable()
if why:
    fflib.skip(why)
if not os.access(MEMCACHED, os.X_OK):
    fflib.skip("%s is not installed" % MEMCACHED)

t = fflib.Test()
N, NSHARDS = 48, 4
data = t.gen(t.path("data"), n=N, classes=3, seed=38)
other = t.gen(t.path("other"), n=N, classes=3, seed=83)
www = t.path("www")
paths = rs.make_shards(data, www, NSHARDS)
SHARD_BYTES = sum(os.path.getsize(p) for p in paths)
local = t.path("local")
shutil.copytree(www, local)
BRACE = "shard-{000000..%06d}.tar" % (NSHARDS - 1)
PLANT = os.path.join(fflib.BUILDDIR, "tests", "tier-plant")
secret = t.path("tier.secret")
with open(secret, "w") as f:
    f.write("0123456789abcdef0123456789abcdef\n")
os.chmod(secret, 0o600)

port = fflib.free_port()
mc = subprocess.Popen([MEMCACHED, "-p", str(port), "-l", "127.0.0.1", "-U",
                       "0", "-m", "256"] +
                      (["-u", "root"] if os.geteuid() == 0 else []),
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(500):
    if fflib.accepts(port):
        break
    time.sleep(0.01)
check(fflib.accepts(port), "memcached does not listen")
SERVERS = "127.0.0.1:%d" % port


def conf(name, shards, cluster=True, with_secret=False,
         meta=("label = cls",)):
    path = t.path(name + ".conf")
    lines = ["[mount]", "cache_dir = %s" % t.path("cache-" + name),
             "cache_size = 1G", "threads = 2", "memory = 256M",
             "readahead = 2"]
    if cluster:
        lines.append("cluster = %s" % SERVERS)
    if with_secret:
        lines.append("cluster_secret = %s" % secret)
    lines += ["", "[dataset d]", "shards = %s" % shards] + list(meta) + ["",
              "[job train]", "dataset = d", "batch_size = 8", "epochs = 1",
              "seed = 5", "shuffle = yes",
              "pipeline = decode resize(72) cache center_crop(64) flip(0.5)",
              "dtype = uint8", "layout = HWC", "on_error = fail"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def stat(m, name, **labels):
    want = name + ("{" + ",".join('%s="%s"' % kv for kv in sorted(
        labels.items())) + "}" if labels else "")
    with open(m.p(".feedfs", "stats")) as f:
        for line in f:
            key, _, val = line.rpartition(" ")
            if key == want:
                return float(val)
    return 0


def streams(reqs):
    """The shards streamed (a GET of bytes=0-, or of no range)."""
    return sorted(r["uri"].rsplit("/", 1)[-1] for r in reqs
                  if r["method"] == "GET" and r["range"] in (None,
                                                             "bytes=0-"))


def version(ng, shard):
    """remote_version_text's words of a shard as nginx serves it now."""
    req = urllib.request.Request("%s/%s" % (ng.url, shard),
                                 headers={"Range": "bytes=0-0"})
    with urllib.request.urlopen(req) as r:
        etag = r.headers["ETag"]
        size = int(r.headers["Content-Range"].rsplit("/", 1)[1])
    return "etag %s size %d" % (etag, size)


def kept_index(node, name):
    """The file a node's cache_dir keeps the index of shard name in."""
    h = hashlib.sha256(name.encode()).hexdigest()
    return t.path("cache-" + node, "shard-index", h + ".idx")


def caption_shards(data, out, nshards):
    """Shards out/shard-NNNNNN.tar of data's images, each sample with a
    caption (KEY.txt: quotes, a tab, a newline, non-ASCII) and a .json
    list of labels; returns the captions."""
    os.makedirs(out)
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(data)
                   for f in fs)
    caps = []
    for s in range(nshards):
        with tarfile.open(os.path.join(out, "shard-%06d.tar" % s), "w",
                          format=tarfile.USTAR_FORMAT) as tf:
            for i, p in enumerate(files[s::nshards]):
                key = "c%d_%03d" % (s, i)
                cap = '"%d"\tcaf\u00e9\nline %d' % (i, s)
                caps.append(cap)
                tf.add(p, arcname=key + ".jpg")
                for ext, b in (("txt", cap.encode()),
                               ("json", json.dumps(
                                   {"labels": sorted({i % 5, s + 5})}
                               ).encode())):
                    ti = tarfile.TarInfo("%s.%s" % (key, ext))
                    ti.size = len(b)
                    tf.addfile(ti, io.BytesIO(b))
    return caps


def plant(name, ver, path, *opts):
    r = subprocess.run([PLANT] + list(opts) + [SERVERS, name, ver, path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(r.returncode == 0, "tier-plant: %s" % r.stdout.decode())


ref = t.ref(conf("ref", os.path.join(local, "shard-*.tar"), cluster=False),
            "train", 0, t.path("ref"))
try:
    with rs.Nginx(www, t.path("ng")) as ng:
        url = "%s/%s" % (ng.url, BRACE)

        # 1. node A: the index pass and the first epoch fill the tier
        with fflib.Mount(t, conf("a", url), t.path("mnt")) as m:
            m.read_epoch("train", 0, ref)
            check(stat(m, "feedfs_index_shards", dataset="d",
                       how="streamed") == NSHARDS, "node A streamed "
                  "%d shards" % stat(m, "feedfs_index_shards", dataset="d",
                                     how="streamed"))
        log("node A: %d shards streamed, their indexes and prefixes in "
            "the tier" % NSHARDS)

        # 2. node B: nothing of the shards fetched
        r0, b0 = len(ng.requests()), ng.body_bytes()
        with fflib.Mount(t, conf("b", url), t.path("mnt")) as m:
            m.read_epoch("train", 0, ref)
            got = ng.body_bytes() - b0
            tier = stat(m, "feedfs_index_shards", dataset="d", how="tier")
            hits = m.job_stat("feedfs_cluster_hits_total", "train")
        check(got <= 0.05 * SHARD_BYTES,
              "node B fetched %d bytes over its mount and first epoch, "
              "%.3fx the shards' %d (at most 0.05x)"
              % (got, got / SHARD_BYTES, SHARD_BYTES))
        check(not streams(ng.requests()[r0:]), "node B streamed %s"
              % streams(ng.requests()[r0:]))
        check(tier == NSHARDS and hits == N,
              "node B: %d indexes from the tier, %d prefixes (of %d)"
              % (tier, hits, N))
        log("node B: %d bytes (%.4fx the shards'), the %d indexes and %d "
            "prefixes from the tier" % (got, got / SHARD_BYTES, tier, hits))

        # 3. feedfs-fill on another node: the indexes from the tier
        r0, b0 = len(ng.requests()), ng.body_bytes()
        r = subprocess.run([os.path.join(fflib.BUILDDIR, "feedfs-fill"),
                            conf("fill", url), "train"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = r.stdout.decode(errors="replace")
        reqs = ng.requests()[r0:]
        check(r.returncode == 0 and "0 computed, %d already there" % N in out,
              "feedfs-fill: exit %d\n%s" % (r.returncode, out))
        check(not streams(reqs) and all(q["range"] == "bytes=0-0"
                                        for q in reqs),
              "feedfs-fill fetched %s" % [(q["uri"], q["range"])
                                          for q in reqs])
        log("feedfs-fill: the indexes from the tier, %d requests (probes), "
            "every prefix there" % len(reqs))

        # 4. a stale index: shard 1 replaced, its old index planted
        name1 = "%s/shard-000001.tar" % ng.url
        old1 = t.path("old-index-1")
        shutil.copy(kept_index("a", name1), old1)
        rs.make_shards(other, t.path("other-shards"), NSHARDS)
        for d in (www, local):
            shutil.copy(t.path("other-shards", "shard-000001.tar"),
                        os.path.join(d, "shard-000001.tar.new"))
            os.rename(os.path.join(d, "shard-000001.tar.new"),
                      os.path.join(d, "shard-000001.tar"))
        plant(name1, version(ng, "shard-000001.tar"), old1)
        ref1 = t.ref(conf("ref1", os.path.join(local, "shard-*.tar"),
                          cluster=False), "train", 0, t.path("ref1"))
        r0 = len(ng.requests())
        with fflib.Mount(t, conf("c", url), t.path("mnt")) as m:
            m.read_epoch("train", 0, ref1)
            refused = stat(m, "feedfs_index_refused_total",
                           dataset="d")
            text = m.log()
        got = streams(ng.requests()[r0:])
        check(refused == 1 and got == ["shard-000001.tar"],
              "a stale index in the tier: %d refused, streamed %s"
              % (refused, got))
        check("the cluster tier's index of it is another shard's or "
              "version's" in text, "the log does not say why:\n%s"
              % text[-2000:])
        log("a stale index of shard 1 in the tier: refused, the shard "
            "streamed, its new samples served")

        # 5. a forged index: planted in the secret's namespace, no MAC
        with fflib.Mount(t, conf("d", url, with_secret=True),
                         t.path("mnt")) as m:
            m.read_epoch("train", 0, ref1)
        name2 = "%s/shard-000002.tar" % ng.url
        plant(name2, version(ng, "shard-000002.tar"), kept_index("d", name2),
              "--secret", secret, "--forge")
        r0 = len(ng.requests())
        with fflib.Mount(t, conf("e", url, with_secret=True),
                         t.path("mnt")) as m:
            m.read_epoch("train", 0, ref1)
            tier = stat(m, "feedfs_index_shards", dataset="d", how="tier")
        got = streams(ng.requests()[r0:])
        check(got == ["shard-000002.tar"] and tier == NSHARDS - 1,
              "a forged index of shard 2 in the tier: streamed %s, %d "
              "indexes from the tier" % (got, tier))
        log("a forged index of shard 2 (no MAC): refused, the shard "
            "streamed, the three others from the tier")

        # 6. captions and lists of labels: the one pass, then the tier
        capdir = os.path.join(www, "cap")
        caps = caption_shards(data, capdir, 2)
        caplocal = t.path("cap-local")
        shutil.copytree(capdir, caplocal)
        meta = ("text = txt", "label = json:labels")
        capurl = "%s/cap/shard-{000000..000001}.tar" % ng.url
        refc = t.ref(conf("refc", os.path.join(caplocal, "shard-*.tar"),
                          cluster=False, meta=meta), "train", 0,
                     t.path("refc"))
        lines = b"".join(fflib.read_file(os.path.join(refc, n))
                         for n in sorted(os.listdir(refc))
                         if n.endswith(".text.jsonl"))
        got = sorted(json.loads(x) for x in lines.splitlines())
        check(got == sorted(caps), "feedfs-ref's captions: %d of %d"
              % (len(got), len(caps)))
        r0 = len(ng.requests())
        with fflib.Mount(t, conf("f", capurl, meta=meta),
                         t.path("mnt")) as m:
            m.read_epoch("train", 0, refc)
        check(streams(ng.requests()[r0:]) == ["shard-000000.tar",
                                              "shard-000001.tar"],
              "node F streamed %s" % streams(ng.requests()[r0:]))
        r0 = len(ng.requests())
        with fflib.Mount(t, conf("g", capurl, meta=meta),
                         t.path("mnt")) as m:
            m.read_epoch("train", 0, refc)
            tier = stat(m, "feedfs_index_shards", dataset="d", how="tier")
        check(not streams(ng.requests()[r0:]) and tier == 2,
              "node G: streamed %s, %d indexes from the tier"
              % (streams(ng.requests()[r0:]), tier))
        log("captions and lists of labels: node F's one pass and node G's "
            "indexes from the tier serve feedfs-ref's epoch, %d captions"
            % len(caps))
finally:
    mc.terminate()
    mc.wait()
log("ok")
