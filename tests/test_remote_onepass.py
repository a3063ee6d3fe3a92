#!/usr/bin/python3
"""test_remote_onepass.py - the one pass over remote shards (issue 38).

Four WebDataset shards of 64 images served by nginx, through
tests/remote_servers.py's Proxy (whose faults cut the index's streams),
and the same shards on local disk for feedfs-ref.  Bytes are counted, by
nginx's access log and the proxy's stats, never time.

1. A cache that holds the job: the bytes fetched over the first mount and
   its first epoch are at most 1.1x the shards' bytes (they were 2x: the
   index pass streamed every shard, then the epoch fetched every member
   again by range), the epoch equals feedfs-ref's over the local shards,
   and no member was fetched by range; .feedfs/stats says the pass
   streamed the four shards and made 64 prefixes.  A pass that takes
   longer than a few seconds (one stream held back 3 s by the proxy) says
   how far it got in the log (shards indexed, bytes, rate, time left).
2. A cache that cannot hold the job (cache_size = 16M, prefixes of about
   1 MB): no more bytes than the same mount with remote_fill = no (the
   pass as it was: index, then every member by range), and the same
   batches.
3. A stream cut during the pass (the proxy closes shard 1's stream
   halfway, twice): it is resumed from where it was cut, each resume
   judged as every response is; the epoch equals feedfs-ref's, and the
   proxy sent at most 1.1x the shards' bytes.
4. A shard whose stream fails after its retries (a 503 every time): the
   mount starts (it exited 2 before), the shard's samples fail as one
   sample named shard-000002.tar: (on_error = substitute: batches are
   served, errors.tsv names it, the log says why), .feedfs/stats counts
   one failed shard; a remount with the server back indexes the shard
   and serves the epoch as feedfs-ref does.
5. The same failed shard under label = auto, over shards without .cls
   members: the label is none (only the failed shard's placeholder has
   no .cls, and it is no vote), so the other shards' samples are served
   and errors.tsv names the placeholder alone (before, the placeholder
   kept auto at cls and every sample failed "no .cls member").
6. cache_size = auto under the node's bound (feedfs.conf(5), THE NODE:
   $FEEDFS_NODE_CONF saying cache_total = 16M, a registry of root's, so
   as root only): the pass fills only what that bound admits, as the
   mount would (before, the pass's child opened the cache without the
   node's config, took half the free disk, and made every prefix).
"""

import os
import sys
import tarfile

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402
import remote_servers as rs  # noqa: E402

why = rs.Nginx.unavailable()
if why:
    fflib.skip(why)

t = fflib.Test()
N, NSHARDS = 64, 4
data = t.gen(t.path("data"), n=N, classes=4, seed=38)
local = t.path("shards")
paths = rs.make_shards(data, local, NSHARDS)
# the same shards without their .cls members, beside them (case 5)
os.makedirs(os.path.join(local, "nocls"))
for p in paths:
    with tarfile.open(p) as src, tarfile.open(
            os.path.join(local, "nocls", os.path.basename(p)), "w",
            format=tarfile.USTAR_FORMAT) as dst:
        for ti in src.getmembers():
            if not ti.name.endswith(".cls"):
                dst.addfile(ti, src.extractfile(ti))
SHARD_BYTES = sum(os.path.getsize(p) for p in paths)
BRACE = "shard-{000000..%06d}.tar" % (NSHARDS - 1)
PIPE = "decode resize(72) cache center_crop(64) flip(0.5)"
BIG = "decode resize(512) cache center_crop(64) flip(0.5)"


def conf(name, shards, cache_size="1G", fill="yes", pipe=PIPE,
         on_error="fail", retries=2, label="cls"):
    path = t.path(name + ".conf")
    with open(path, "w") as f:
        f.write("\n".join([
            "[mount]", "cache_dir = %s" % t.path("cache-" + name),
            "cache_size = %s" % cache_size, "threads = 2",
            "memory = 256M", "readahead = 2", "",
            "[dataset d]", "shards = %s" % shards, "label = %s" % label,
            "remote_fill = %s" % fill, "remote_timeout = 5",
            "remote_retries = %d" % retries, "",
            "[job train]", "dataset = d", "batch_size = 8", "epochs = 1",
            "seed = 5", "shuffle = yes", "pipeline = %s" % pipe,
            "dtype = uint8", "layout = HWC",
            "on_error = %s" % on_error]) + "\n")
    return path


def stat(m, name, **labels):
    """The value of a line of .feedfs/stats (0 when it has none)."""
    want = name + ("{" + ",".join('%s="%s"' % kv for kv in sorted(
        labels.items())) + "}" if labels else "")
    with open(m.p(".feedfs", "stats")) as f:
        for line in f:
            key, _, val = line.rpartition(" ")
            if key == want:
                return float(val)
    return 0


refs = {}


def ref(pipe):
    if pipe not in refs:
        cfg = conf("ref-%d" % len(refs), os.path.join(local, "shard-*.tar"),
                   pipe=pipe)
        refs[pipe] = t.ref(cfg, "train", 0, t.path("ref-%d" % len(refs)))
    return refs[pipe]


with rs.Nginx(local, t.path("ng")) as ng, \
        rs.Proxy("127.0.0.1", ng.port) as px:
    url = px.url + "/" + BRACE

    # 1. a cache that holds the job: one pass over the bytes
    px.set("delay", seconds=3, when="stream", times=1, path="shard-000003")
    b0 = ng.body_bytes()
    with fflib.Mount(t, conf("one", url), t.path("mnt"), timeout=120) as m:
        m.read_epoch("train", 0, ref(PIPE))
        got = ng.body_bytes() - b0
        ranged = stat(m, "feedfs_remote_bytes_total", dataset="d")
        made = stat(m, "feedfs_index_fill_total", dataset="d",
                    outcome="made")
        streamed = stat(m, "feedfs_index_shards", dataset="d",
                        how="streamed")
        text = m.log()
    check(got <= 1.1 * SHARD_BYTES,
          "the first mount and its epoch fetched %d bytes, %.2fx the "
          "shards' %d (at most 1.1x)" % (got, got / SHARD_BYTES,
                                          SHARD_BYTES))
    check(ranged == 0, "the first epoch fetched %d bytes by range" % ranged)
    check(made == N and streamed == NSHARDS,
          "the pass made %d prefixes (of %d) over %d streamed shards (of "
          "%d)" % (made, N, streamed, NSHARDS))
    check("shards indexed" in text and "s left" in text,
          "a pass of more than 3 s said nothing of its progress:\n%s"
          % text[-2000:])
    log("one pass: %.3fx the shards' bytes over the first mount and its "
        "epoch, %d prefixes made as the shards streamed, nothing by range"
        % (got / SHARD_BYTES, made))

    # 2. a cache that cannot hold the job: no more than the pass was
    px.set("pass")
    fetched = {}
    for fill in ("no", "yes"):
        b0 = ng.body_bytes()
        cfg = conf("small-" + fill, url, cache_size="16M", fill=fill,
                   pipe=BIG)
        with fflib.Mount(t, cfg, t.path("mnt")) as m:
            m.read_epoch("train", 0, ref(BIG))
            fetched[fill] = ng.body_bytes() - b0
            unfilled = stat(m, "feedfs_index_fill_total", dataset="d",
                            outcome="unfilled")
        if fill == "yes":
            check(unfilled > 0, "a cache of 16M held every prefix of 1 MB: "
                  "the test's premise is gone")
    check(fetched["yes"] <= fetched["no"],
          "a cache too small for the job: %d bytes with the one pass, %d "
          "without" % (fetched["yes"], fetched["no"]))
    log("a cache of a part of the job: %.2fx the shards' bytes (%.2fx "
        "without the one pass)" % (fetched["yes"] / SHARD_BYTES,
                                   fetched["no"] / SHARD_BYTES))

    # 3. a stream cut during the pass: resumed where it was cut
    px.set("truncate", when="stream", times=2, path="shard-000001")
    s0 = px.stats()
    r0 = len(ng.requests())
    with fflib.Mount(t, conf("cut", url), t.path("mnt")) as m:
        m.read_epoch("train", 0, ref(PIPE))
        retries = stat(m, "feedfs_remote_retries_total", dataset="d")
    s1 = px.stats()
    sent = s1["bytes_out"] - s0["bytes_out"]
    resumes = [r["range"] for r in ng.requests()[r0:]
               if "shard-000001" in r["uri"] and r["range"]
               and r["range"].endswith("-") and r["range"] != "bytes=0-"]
    check(s1.get("fault_truncate", 0) - s0.get("fault_truncate", 0) == 2,
          "the proxy cut %d streams, not 2"
          % (s1.get("fault_truncate", 0) - s0.get("fault_truncate", 0)))
    check(len(resumes) == 2, "shard 1's stream resumed %s" % resumes)
    check(sent <= 1.1 * SHARD_BYTES,
          "a cut stream: the proxy sent %d bytes, %.2fx the shards'"
          % (sent, sent / SHARD_BYTES))
    log("a stream cut twice during the pass: resumed at %s, %.3fx the "
        "shards' bytes, the epoch as feedfs-ref's" % (resumes,
                                                      sent / SHARD_BYTES))

    # 4. a shard that cannot be indexed: its samples fail, not the mount
    px.set("status", code=503, when="stream", path="shard-000002")
    cfg = conf("fail", url, on_error="substitute", retries=1)
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        with open(m.p("train", "samples.tsv")) as f:
            rows = [ln.split("\t")[1] for ln in f.read().splitlines()]
        check("shard-000002.tar:" in rows and len(rows) == N - N // 4 + 1,
              "samples of a shard that failed: %d rows, %s"
              % (len(rows), [r for r in rows if "000002" in r]))
        m.read_epoch("train", 0)
        with open(m.p("train", "errors.tsv")) as f:
            errors = f.read()
        failed = stat(m, "feedfs_index_shards", dataset="d", how="failed")
        text = m.log()
    check("shard-000002.tar:" in errors and "could not be indexed" in errors,
          "errors.tsv:\n%s" % errors)
    check(failed == 1, "feedfs_index_shards{how=failed} is %d" % failed)
    check("HTTP status 503" in text and "until a mount indexes it" in text,
          "the log does not say why:\n%s" % text[-2000:])
    log("a shard whose stream fails: the mount serves, its samples fail "
        "(%s)" % errors.splitlines()[-1].split("\t", 2)[-1][:60])
    px.set("pass")
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        with open(m.p("train", "samples.tsv")) as f:
            n = len(f.read().splitlines())
        check(n == N, "the remount has %d samples, not %d" % (n, N))
    log("the remount indexes it: %d samples" % n)

    # 5. label = auto over shards without .cls, one shard failed
    px.set("status", code=503, when="stream", path="shard-000002")
    cfg = conf("auto", px.url + "/nocls/" + BRACE, on_error="substitute",
               retries=1, label="auto")
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        m.read_epoch("train", 0)
        with open(m.p("train", "errors.tsv")) as f:
            errors = [ln for ln in f.read().splitlines()
                      if ln and not ln.startswith("#")]
    check(len(errors) == 1 and "shard-000002.tar:" in errors[0]
          and "no .cls member" not in errors[0],
          "label = auto, shards without .cls, one shard failed: errors.tsv "
          "has %d rows: %s" % (len(errors), errors[:3]))
    px.set("pass")
    log("label = auto with a failed shard: none, only the placeholder "
        "fails")

    # 6. cache_size = auto under the node's bound of 16M
    if os.geteuid() == 0:
        reg = t.path("registry")
        os.makedirs(reg)
        os.chmod(reg, 0o1777)
        node = t.path("node-config")
        with open(node, "w") as f:
            f.write("[node]\ncache_total = 16M\ncache_registry = %s\n"
                    % reg)
        os.environ["FEEDFS_NODE_CONF"] = node
        try:
            cfg = conf("nodebound", url, cache_size="auto", pipe=BIG)
            with fflib.Mount(t, cfg, t.path("mnt")) as m:
                made = stat(m, "feedfs_index_fill_total", dataset="d",
                            outcome="made")
                unfilled = stat(m, "feedfs_index_fill_total", dataset="d",
                                outcome="unfilled")
                m.read_epoch("train", 0, ref(BIG))
        finally:
            del os.environ["FEEDFS_NODE_CONF"]
        check(unfilled > 0 and made < N,
              "cache_size = auto under a node's bound of 16M: the pass "
              "made %d prefixes of about 1 MB (of %d), %d unfilled"
              % (made, N, unfilled))
        log("cache_size = auto, the node's 16M: the pass made %d "
            "prefixes, passed %d by" % (made, unfilled))
log("ok")
