#!/usr/bin/python3
"""test_remote_shards.py - tar shards over HTTP, HTTPS and S3 give the
batches of the same shards on local disk (issue 30).

Four WebDataset shards (KEY.jpg + KEY.cls) on local disk, and the same
files served by nginx over HTTP and over HTTPS (a test CA, ca_file =) and
uploaded to moto's S3 server (SigV4 checked; s3_endpoint, s3_region,
s3_path_style; the credentials in AWS_* of the mount's environment, then
from a profile of the file AWS_SHARED_CREDENTIALS_FILE names).  For
each source, a mount with a cache_dir of its own:

- every batch of epochs 0 and 1 of the train job, of its rank view
  rank-1-of-2, and of a mixture of the remote dataset and a local
  directory equals feedfs-ref's over the local shards (byte for byte);
- samples.tsv names the same members (by shard base name) as over the
  local shards;
- every member read carried If-Match (the server's log), and epoch 2, a
  warm epoch served from the cache, fetches nothing;
- nothing of the credentials (key id, secret) appears in the mount's
  output, .feedfs/stats, .feedfs/log, samples.tsv or errors.tsv;
- S3 keys with a space, '#' and '?' (issue 34), named percent-encoded in
  shards =: the same batches, each shard named whole in samples.tsv (no
  two sharing a name, as they did when the name stopped at '?') and
  kept in an index file of its own; a raw '#' is refused with a message
  that says to write %23;
- (a wrong S3 secret: test_remote_s3_secret.py).

HTTP(S) needs nginx (skipped without it); S3 needs the venv of
tests/setup-test-venv (that part is skipped, with the reason, where it
cannot be made).
"""

import os
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402
import remote_servers as rs  # noqa: E402

t = fflib.Test()
why = rs.Nginx.unavailable()
if why:
    fflib.skip(why)

NSHARDS = 4
NIMAGES = 40
data = t.gen(t.path("data"), n=NIMAGES, classes=3, seed=30)
extra = t.gen(t.path("extra"), n=16, classes=3, seed=31)
local = t.path("shards")
rs.make_shards(data, local, NSHARDS)
BRACE = "shard-{000000..%06d}.tar" % (NSHARDS - 1)


def conf(path, source_keys, cache):
    lines = ["[mount]", "cache_dir = %s" % cache, "cache_size = 1G",
             "threads = 2", "memory = 256M", "readahead = 2", "",
             "[dataset data]"]
    lines += ["%s = %s" % kv for kv in source_keys.items()]
    lines += ["label = cls", "", "[dataset extra]", "root = %s" % extra]
    for name, keys in (("train", dict(epochs=3)),
                       ("mix", dict(mixture="data:0.7 extra:0.3",
                                    epochs=1))):
        k = fflib.job(**keys)
        if "mixture" in k:
            del k["dataset"]
        lines += ["", "[job %s]" % name] + ["%s = %s" % kv for kv in
                                            k.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


# the reference: feedfs-ref over the local shards
ref_cfg = conf(t.path("local.conf"), dict(
    shards=os.path.join(local, "shard-*.tar")), t.path("cache-ref"))
REFS = [("train", 0, 0, 1), ("train", 1, 0, 1), ("train", 0, 1, 2),
        ("mix", 0, 0, 1)]
refs = {}
for job, e, rank, world in REFS:
    refs[(job, e, rank, world)] = t.ref(
        ref_cfg, job, e, t.path("ref-%s-%d-%d" % (job, e, rank)), rank=rank,
        world=world)


def samples(m):
    """samples.tsv's member names, the shard by its base name."""
    out = []
    with open(m.p("train", "samples.tsv")) as f:
        for line in f:
            name = line.split("\t")[1]
            shard, _, member = name.rpartition(":")
            out.append("%s:%s" % (shard.rsplit("/", 1)[-1], member))
    return out


with fflib.Mount(t, ref_cfg, t.path("mnt-local")) as m:
    local_samples = samples(m)
check(len(local_samples) == NIMAGES, "local samples.tsv: %d rows"
      % len(local_samples))


def read_all(m):
    """Every file of each reference read through m and compared."""
    for (job, e, rank, world), ref in sorted(refs.items()):
        d = m.p(job, *(["rank-%d-of-%d" % (rank, world)] if world > 1
                       else []), "epoch-%04d" % e)
        names = sorted(os.listdir(ref))
        listed = set(os.listdir(d)) - {"mixture"}
        check(sorted(listed) == names, "%s lists %s" % (d, sorted(listed)))
        for n in names:
            with open(os.path.join(ref, n), "rb") as f:
                check(fflib.read_file(os.path.join(d, n)) == f.read(),
                      "%s/%s differs from feedfs-ref's" % (d, n))


def secrets_absent(m, secrets, what):
    """None of secrets in the mount's output, stats, log, samples.tsv,
    errors.tsv."""
    texts = {"the mount's output": m.log()}
    for p in ((".feedfs", "stats"), (".feedfs", "log"),
              ("train", "samples.tsv"), ("train", "errors.tsv")):
        try:
            texts["/".join(p)] = fflib.read_file(m.p(*p)).decode(
                errors="replace")
        except OSError:
            pass
    for name, text in texts.items():
        for s in secrets:
            check(s not in text, "%s: %s shows a credential" % (what, name))


def run_source(tag, keys, server_reqs=None, env=None, secrets=()):
    cfg = conf(t.path("%s.conf" % tag), keys, t.path("cache-%s" % tag))
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        with fflib.Mount(t, cfg, t.path("mnt-%s" % tag)) as m:
            check(samples(m) == local_samples,
                  "%s: samples.tsv names other members" % tag)
            read_all(m)
            if server_reqs is not None:
                # epoch 2 is warm: every prefix is in the cache
                before = len(server_reqs())
                m.read_epoch("train", 2)
                got = server_reqs()[before:]
                check(not got, "%s: a warm epoch fetched %d times: %s"
                      % (tag, len(got), got[:3]))
            check(m.alive(), "%s: feedfs died" % tag)
            secrets_absent(m, secrets, tag)
    finally:
        os.environ.clear()
        os.environ.update(old)
    log("%s: train epochs 0, 1, rank-1-of-2 and the mixture equal "
        "feedfs-ref over the local shards" % tag)


for https in (False, True):
    tag = "https" if https else "http"
    with rs.Nginx(local, t.path("ng-" + tag), https=https) as ng:
        keys = dict(shards="%s/%s" % (ng.url, BRACE))
        if https:
            keys["ca_file"] = ng.ca_file
        run_source(tag, keys, server_reqs=ng.requests)
        # every member read; bytes=0-0 is the shard's size and ETag asked
        # for (before there is an ETag to match)
        ranged = [r for r in ng.requests() if r["range"]
                  and r["range"] != "bytes=0-0"]
        check(ranged and all(r["if_match"] for r in ranged),
              "%s: a range request without If-Match: %s"
              % (tag, [r for r in ranged if not r["if_match"]][:3]))
        check(all(r["status"] in (200, 206) for r in ng.requests()
                  if r["method"] == "GET"),
              "%s: failed GETs: %s" % (tag, [r for r in ng.requests()
                                             if r["status"] >= 300][:3]))

why = rs.S3Server.unavailable()
if why:
    log("SKIP: S3: %s" % why)
    log("PASS (HTTP and HTTPS only)")
    sys.exit(0)
with rs.S3Server(t.path("s3")) as s3:
    s3.make_bucket("bkt")
    s3.upload_dir("bkt", local, prefix="ds/")
    keys = dict(shards="s3://bkt/ds/" + BRACE, s3_endpoint=s3.endpoint,
                s3_region=s3.region, s3_path_style="yes")
    secrets = (s3.access_key, s3.secret_key)
    run_source("s3", keys, env=s3.env(), secrets=secrets)
    # a profile of the shared credentials file, no AWS_* keys
    cred = t.path("aws-credentials")
    with open(cred, "w") as f:
        f.write("[default]\naws_access_key_id = AKIAOTHER0000000000\n"
                "aws_secret_access_key = not-this-one\n\n"
                "# the test's user\n[feedfs-test]\n"
                "aws_access_key_id = %s\naws_secret_access_key = %s\n"
                % (s3.access_key, s3.secret_key))
    run_source("s3-profile", keys, env=dict(
        AWS_SHARED_CREDENTIALS_FILE=cred, AWS_PROFILE="feedfs-test"),
        secrets=secrets)

    # keys with a space, '#' and '?': percent-encoded in shards = ('?'
    # may be written as it is), each named whole
    for i in range(NSHARDS):
        s3.put("bkt", "sp ace/x#1?%06d.tar" % i,
               os.path.join(local, "shard-%06d.tar" % i))
    keys["shards"] = "s3://bkt/sp%%20ace/x%%231?{000000..%06d}.tar" % (
        NSHARDS - 1)
    cache = t.path("cache-s3-keys")
    cfg = conf(t.path("s3-keys.conf"), keys, cache)
    old = dict(os.environ)
    os.environ.update(s3.env())
    try:
        with fflib.Mount(t, cfg, t.path("mnt-s3-keys")) as m:
            with open(m.p("train", "samples.tsv")) as f:
                names = [ln.split("\t")[1] for ln in f]
            shards = sorted({n.rpartition(":")[0] for n in names})
            check(shards == ["x%%231%%3F%06d.tar" % i
                             for i in range(NSHARDS)],
                  "s3 keys: samples.tsv names the shards %s" % shards)
            check(["shard-%s" % n.rpartition("%3F")[2] for n in names] ==
                  local_samples, "s3 keys: samples.tsv names other members")
            read_all(m)
        idx = [n for n in os.listdir(os.path.join(cache, "shard-index"))
               if n.endswith(".idx")]
        check(len(idx) == NSHARDS, "s3 keys: %d kept index files for %d "
              "shards" % (len(idx), NSHARDS))
        keys["shards"] = "s3://bkt/sp%20ace/x#1?000000.tar"
        cfg = conf(t.path("s3-hash.conf"), keys, cache)
        r = subprocess.run([fflib.FEEDFS, "--check", cfg],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = r.stdout.decode()
        check(r.returncode == 2 and "%23" in out,
              "s3 key with a raw '#': %d %s" % (r.returncode, out[-500:]))
    finally:
        os.environ.clear()
        os.environ.update(old)
    log("s3 keys with a space, '#' and '?': the same batches, %d shards "
        "named whole, %d index files" % (len(shards), len(idx)))

log("PASS")
