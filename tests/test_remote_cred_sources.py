#!/usr/bin/python3
"""test_remote_cred_sources.py - each source of S3 credentials of the
chain, through a real mount, against a server that speaks its protocol,
and temporary credentials read again before they expire (issue 34).

Two shards in moto's S3 server, read through tests/remote_servers.py's
Proxy in front of moto (which logs each request's SigV4 key id and
whether it carried a session token), with cache_size = 0 (every epoch
asks S3 again):

- AssumeRole: a profile of the config file with role_arn + source_profile
  (a profile of the credentials file with the user's keys) and
  duration_seconds = 20, STS at the proxy (AWS_ENDPOINT_URL_STS), moto's
  IAM checks on: epoch 0 reads; a second AssumeRole, signed with the
  source profile's key, comes before the first credentials expire, and
  the range reads after it carry its key id and token: epoch 1 reads;
- AssumeRoleWithWebIdentity: a profile with role_arn +
  web_identity_token_file, then the environment's AWS_ROLE_ARN +
  AWS_WEB_IDENTITY_TOKEN_FILE (as EKS sets them): an unsigned STS call,
  then range reads with the key id STS gave and its token; the profile's
  (duration_seconds = 20) read again before expiry, the token file with
  it (the environment's last STS's default hour).  moto fails an unsigned request while its IAM checks are
  on, so this part runs against a moto whose checks are off;
- IMDSv2: ImdsServer (tests/remote_servers.py, IMDSv2 as AWS documents
  it, with its session tokens; its credentials minted by moto's STS, so
  moto checks every signature): reads, the credentials read again before
  they expire, every GET of it carried a live token, none of the secrets
  it gave in the mount's texts or in a core dump of the daemon (gcore;
  skipped in an ASan build); then moto's own
  instance metadata endpoint (which checks no token and gives fixed
  credentials: against the moto without IAM checks) as a second one.

Skipped (77) where the venv of tests/setup-test-venv cannot be made.
"""

import os
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402
import remote_servers as rs  # noqa: E402
import credcheck  # noqa: E402

t = fflib.Test()
why = rs.S3Server.unavailable()
if why:
    fflib.skip(why)

data = t.gen(t.path("data"), n=16, classes=2, seed=61)
local = t.path("shards")
rs.make_shards(data, local, 2)
BATCHES = 4  # 16 samples, batch_size 4
LIFE = 20    # seconds of each temporary credential
NOWHERE = t.path("no-such-file")


def conf(name, endpoint):
    path = t.path("%s.conf" % name)
    lines = ["[mount]", "cache_dir = %s" % t.path("cache-" + name),
             "cache_size = 0", "threads = 2", "memory = 128M",
             "readahead = 1", "", "[dataset data]",
             "shards = s3://bkt/ds/shard-{000000..000001}.tar",
             "s3_endpoint = %s" % endpoint, "s3_region = us-east-1",
             "s3_path_style = yes", "label = cls", "", "[job train]"]
    lines += ["%s = %s" % kv for kv in fflib.job(
        batch_size=4, epochs=3, pipeline="decode resize(40,40)").items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def read_epoch(m, e):
    for b in range(BATCHES):
        fflib.read_file(m.p("train", "epoch-%04d" % e, "batch-%06d.npy" % b))


def mount_env(**kv):
    """os.environ for a mount: no AWS_* but kv, no files but kv's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_SHARED_CREDENTIALS_FILE=NOWHERE, AWS_CONFIG_FILE=NOWHERE,
               AWS_EC2_METADATA_DISABLED="true")
    env.update(kv)
    return env


class Env:
    """with Env(env): os.environ is env inside (feedfs inherits it)."""

    def __init__(self, env):
        self.env = env

    def __enter__(self):
        self.old = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)

    def __exit__(self, *a):
        os.environ.clear()
        os.environ.update(self.old)


def ranges(px, since=0):
    """The range reads answered (those in flight, ahead, are not yet)."""
    return [e for e in px.log if e["method"] == "GET" and e["range"] and
            e["time"] >= since and e["status"] is not None]


def sts_calls(px):
    return [e for e in px.log if e["method"] == "POST" and e["path"] == "/"]


def wait_for(what, cond, limit=120):
    """Poll cond() until true: a bound on a hang, not a timing."""
    deadline = time.monotonic() + limit
    while not cond():
        check(time.monotonic() < deadline, "%s: not within %d s"
              % (what, limit))
        time.sleep(0.5)


def refreshed(m, px, calls, what):
    """Epoch 0 read; a later STS call (calls(px) grows) before the first
    credentials expire; epoch 1 read with the new key id."""
    read_epoch(m, 0)
    first = ranges(px)
    check(first and all(e["status"] == 206 and e["token"] for e in first),
          "%s: epoch 0's range reads: %s" % (
              what, [e for e in first if e["status"] != 206 or
                     not e["token"]][:3] or "none"))
    k0 = first[-1]["key_id"]
    n0 = len(calls(px))
    t0 = time.monotonic()
    wait_for("%s: a second read of the source" % what,
             lambda: len(calls(px)) > n0)
    check(time.monotonic() - t0 < LIFE,
          "%s: read again only after the credentials expired" % what)
    t1 = time.monotonic()
    read_epoch(m, 1)
    later = ranges(px, t1)
    check(later and all(e["status"] == 206 for e in later),
          "%s: epoch 1's range reads: %s" % (what, later[:3]))
    check(later[-1]["key_id"] != k0 and later[-1]["token"],
          "%s: epoch 1 still signed with %s" % (what, k0))
    log("%s: refreshed before expiry (%s -> %s), %d + %d range reads"
        % (what, k0, later[-1]["key_id"], len(first), len(later)))


with rs.S3Server(t.path("s3")) as s3, rs.Proxy("127.0.0.1", s3.port) as px:
    s3.make_bucket("bkt")
    s3.upload_dir("bkt", local, prefix="ds/")
    arn = s3.create_role("feedfs-reader")

    # ---- STS AssumeRole, from a profile with a source_profile ----------
    cred, cfg = t.path("credentials"), t.path("config")
    with open(cred, "w") as f:
        f.write("[base]\naws_access_key_id = %s\naws_secret_access_key = "
                "%s\n" % (s3.access_key, s3.secret_key))
    with open(cfg, "w") as f:
        f.write("[profile reader]\nrole_arn = %s\nsource_profile = base\n"
                "role_session_name = feedfs-test\nduration_seconds = %d\n"
                % (arn, LIFE))
    env = mount_env(AWS_SHARED_CREDENTIALS_FILE=cred, AWS_CONFIG_FILE=cfg,
                    AWS_PROFILE="reader", AWS_ENDPOINT_URL_STS=px.url)
    with Env(env), fflib.Mount(t, conf("assume", px.url),
                               t.path("mnt-assume")) as m:
        refreshed(m, px, sts_calls, "AssumeRole")
        check(all(e["key_id"] == s3.access_key and e["status"] == 200
                  for e in sts_calls(px)),
              "AssumeRole not signed with the source profile's key: %s"
              % sts_calls(px))
        check("AssumeRole %s" % arn in m.log(), "the log does not say "
              "where the credentials came from:\n%s" % m.log()[-1500:])

    # ---- IMDSv2 (ImdsServer), credentials minted by moto's STS ---------
    def mint():
        return s3.assume(arn, LIFE)

    with rs.ImdsServer(t.path("imds"), mint) as imds:
        env = mount_env(AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.endpoint,
                        AWS_METADATA_SERVICE_TIMEOUT="30",
                        AWS_METADATA_SERVICE_NUM_ATTEMPTS="3")
        del env["AWS_EC2_METADATA_DISABLED"]
        with Env(env), fflib.Mount(t, conf("imds", px.url),
                                   t.path("mnt-imds")) as m:
            refreshed(m, px, lambda _: imds.minted, "IMDSv2")
            check(imds.log and imds.log[0][0] == "PUT",
                  "IMDS not asked for a token first: %s" % imds.log[:3])
            check(all(code == 200 for _, _, code in imds.log),
                  "IMDS answered %s" % [x for x in imds.log if x[2] != 200])
            log("IMDSv2: %d requests, each GET with a live token"
                % len(imds.log))
            # the secrets came in HTTP responses: in no text, and (libcurl's
            # buffers zeroed, the arena not dumped) in no core dump
            secrets = [c["SecretAccessKey"] for c in imds.minted]
            credcheck.secrets_absent(m, secrets + [
                c["SessionToken"] for c in imds.minted])
            found = credcheck.core_holds(t, m.proc.pid, secrets,
                                         "ds/shard-000001.tar")
            check(not found, "the daemon's core dump holds %d of the %d "
                  "secrets IMDS gave" % (len(found or ()), len(secrets)))

with rs.S3Server(t.path("s3-open"), auth=False) as s3, \
        rs.Proxy("127.0.0.1", s3.port) as px:
    s3.make_bucket("bkt")
    s3.upload_dir("bkt", local, prefix="ds/")
    role = "arn:aws:iam::123456789012:role/feedfs-web"
    tok = t.path("token")
    with open(tok, "w") as f:  # a JWT's shape: moto does not verify it
        f.write("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJmZWVkZnMifQ.c2lnbmF0dXJl\n")

    # ---- AssumeRoleWithWebIdentity: a profile, then the environment ----
    cfg = t.path("config-web")
    with open(cfg, "w") as f:
        f.write("[profile web]\nrole_arn = %s\nweb_identity_token_file = %s"
                "\nduration_seconds = %d\n" % (role, tok, LIFE))
    for what, env in (
            ("web identity (profile)", mount_env(
                AWS_CONFIG_FILE=cfg, AWS_PROFILE="web",
                AWS_ENDPOINT_URL_STS=px.url)),
            ("web identity (AWS_ROLE_ARN)", mount_env(
                AWS_ROLE_ARN=role, AWS_WEB_IDENTITY_TOKEN_FILE=tok,
                AWS_ENDPOINT_URL_STS=px.url))):
        n0 = len(sts_calls(px))
        with Env(env), fflib.Mount(t, conf("web", px.url),
                                   t.path("mnt-web")) as m:
            read_epoch(m, 0)
            calls = sts_calls(px)[n0:]
            check(calls and all(e["key_id"] is None and e["status"] == 200
                                for e in calls),
                  "%s: not an unsigned STS call: %s" % (what, calls))
            got = ranges(px, calls[0]["time"])
            check(got and all(e["status"] == 206 and e["token"] and
                              e["key_id"] for e in got),
                  "%s: range reads: %s" % (what, got[:3]))
            check("AssumeRoleWithWebIdentity %s" % role in m.log(),
                  "%s: the log does not say so" % what)
            if "AWS_PROFILE" in env:  # duration_seconds = LIFE
                n1 = len(sts_calls(px))
                t1 = time.monotonic()
                wait_for("%s: read again" % what,
                         lambda: len(sts_calls(px)) > n1)
                check(time.monotonic() - t1 < LIFE, "%s: read again only "
                      "after the credentials expired" % what)
                log("%s: read again before expiry" % what)
            log("%s: %d range reads with %s" % (what, len(got),
                                               got[-1]["key_id"]))
        check(m.log().count("AssumeRoleWithWebIdentity") >= 1, what)

    # ---- moto's own instance metadata endpoint -------------------------
    env = mount_env(AWS_EC2_METADATA_SERVICE_ENDPOINT=s3.endpoint,
                    AWS_METADATA_SERVICE_TIMEOUT="30")
    del env["AWS_EC2_METADATA_DISABLED"]
    t1 = time.monotonic()
    with Env(env), fflib.Mount(t, conf("moto-imds", px.url),
                               t.path("mnt-moto-imds")) as m:
        read_epoch(m, 0)
        got = ranges(px, t1)
        check(got and all(e["key_id"] == "test-key" and e["token"] and
                          e["status"] == 206 for e in got),
              "moto's IMDS: range reads: %s" % got[:3])
        log("moto's IMDS: %d range reads with its key test-key" % len(got))
log("PASS")
