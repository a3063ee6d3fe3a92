#!/usr/bin/python3
"""test_remote_s3_secret.py - S3 credentials that the server refuses stop
the mount with a clear message (issue 30).

Two shards uploaded to moto's S3 server (tests/remote_servers.py: every
request's SigV4 signature recomputed with the user's secret):

- the right key id with a wrong secret: feedfs exits (nonzero, within
  120 s) with FILE:LINE and a message that says why (the signature or
  the credentials refused, 403), never the key id or either secret;
- an unknown key id: the same;
- no credentials at all (no AWS_* variables, HOME without
  .aws/credentials): the message says where it looked, never a secret.

Skipped (77) where the venv of tests/setup-test-venv cannot be made.
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
why = rs.S3Server.unavailable()
if why:
    fflib.skip(why)

data = t.gen(t.path("data"), n=8, classes=2, seed=50)
local = t.path("shards")
rs.make_shards(data, local, 2)


def conf(path, keys):
    lines = ["[mount]", "cache_dir = %s" % t.path("cache"),
             "cache_size = 1G", "threads = 2", "memory = 128M", "",
             "[dataset data]"]
    lines += ["%s = %s" % kv for kv in keys.items()]
    lines += ["label = cls", "", "[job train]"]
    lines += ["%s = %s" % kv for kv in fflib.job().items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def refused(cfg, env, secrets, what):
    """feedfs -f with env: must exit nonzero with FILE:LINE and a reason,
    none of secrets in what it says; returns its last line."""
    mnt = t.path("mnt-" + what.replace(" ", "-"))
    os.makedirs(mnt)
    p = subprocess.Popen([fflib.FEEDFS, "-f", cfg, mnt], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out, _ = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        fflib._force_umount(mnt)
        p.kill()
        out, _ = p.communicate()
        fflib.fail("%s: the mount did not stop in 120 s:\n%s\n---- moto:\n%s"
                   % (what, out.decode(errors="replace")[-2000:],
                      open(os.path.join(t.path("s3"), "moto.log"),
                           errors="replace").read()[-2000:]))
    out = out.decode(errors="replace")
    check(p.returncode != 0, "%s: mounted:\n%s" % (what, out))
    check(cfg + ":" in out, "%s: no FILE:LINE in:\n%s" % (what, out))
    for s in secrets:
        check(s not in out, "%s: the message shows a credential:\n%s"
              % (what, out))
    return out.strip().splitlines()[-1]


with rs.S3Server(t.path("s3")) as s3:
    s3.make_bucket("bkt")
    s3.upload_dir("bkt", local, prefix="ds/")
    cfg = conf(t.path("a.conf"), dict(
        shards="s3://bkt/ds/shard-{000000..000001}.tar",
        s3_endpoint=s3.endpoint, s3_region=s3.region, s3_path_style="yes"))
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base["AWS_EC2_METADATA_DISABLED"] = "true"  # nothing leaves the host
    # another first character (one secret in 64 starts with "W")
    wrong = ("V" if s3.secret_key[0] == "W" else "W") + s3.secret_key[1:]
    secrets = (s3.access_key, s3.secret_key, wrong)
    for what, env in (
            ("a wrong secret", dict(base, **s3.env(secret=wrong))),
            ("an unknown key id", dict(base, **dict(
                s3.env(), AWS_ACCESS_KEY_ID="AKIAUNKNOWNKEY000000")))):
        line = refused(cfg, env, secrets, what)
        low = line.lower()
        check(any(w in low for w in ("403", "signature", "credentials",
                                     "access denied")),
              "%s: the message says not why: %s" % (what, line))
        log("%s stops the mount: %s" % (what, line[:300]))
    home = t.path("home")
    os.makedirs(home)
    line = refused(cfg, dict(base, HOME=home), secrets, "no credentials")
    check("AWS_ACCESS_KEY_ID" in line or "credentials" in line.lower(),
          "no credentials: the message says not where it looked: %s" % line)
    log("no credentials stop the mount: %s" % line[:300])
    # the right ones mount (the refusals were the credentials' doing)
    old = dict(os.environ)
    os.environ.update(s3.env())
    try:
        with fflib.Mount(t, cfg, t.path("mnt-ok")) as m:
            m.read_epoch("train", 0)
    finally:
        os.environ.clear()
        os.environ.update(old)
log("PASS")
