"""remote_servers - real servers for the remote-shard tests (issue 30).

Every server listens on 127.0.0.1 (or a veth address of a Netem) on a port
from fflib.free_port, is started by the test and stopped by its pid (by
stop(), the with block's end, or at the test's exit; a server process is
also killed when the test dies, PR_SET_PDEATHSIG); the
files it needs (configs, certificates, logs) live in a directory the test
gives it, inside fflib.Test's temp dir.

    ca = TestCA(t.path("ca"))                 # openssl: a CA, a server cert
    with Nginx(root, t.path("ng"), https=True, ca=ca) as ng:
        ng.url, ng.ca_file, ng.requests(), ng.body_bytes()
    with S3Server(t.path("s3")) as s3:        # moto, SigV4 checked
        s3.make_bucket("b"); s3.upload_dir("b", shards_dir, prefix="x/")
        s3.endpoint, s3.region, s3.access_key, s3.secret_key, s3.env()
        s3.create_key(), s3.delete_key(id)    # IAM: the user's keys
        s3.create_role("r"), s3.assume(arn, 900)  # IAM role, STS
    with ImdsServer(t.path("imds"), mint) as m:   # IMDSv2, its tokens
        m.endpoint, m.log, m.minted
    with Netem(20) as n:                      # netns + veth + tc netem
        Nginx(root, ..., netem=n)             # the server in the namespace
    with Proxy("127.0.0.1", ng.port) as p:    # a fault-injecting proxy
        p.set("status", code=503, times=2, when="range")
        p.url, p.stats(), p.log

Needs: nginx and openssl (Debian), iproute2 and a kernel with netem for
Netem, the venv of tests/setup-test-venv (moto) for S3Server.  Each class's
`unavailable()` returns why it cannot run here (None when it can); a test
calls fflib.skip with it.
"""

import atexit
import collections
import ctypes
import io
import json
import os
import queue
import shutil
import signal
import socket
import struct
import subprocess
import tarfile
import threading
import time

import fflib

VENV = os.environ.get("FF_TEST_VENV", "/var/tmp/feedfs-test-venv")
SETUP_VENV = os.path.join(fflib.SRCDIR, "tests", "setup-test-venv")


_live = []  # started servers and namespaces, stopped at exit


def _stop_all():
    for x in reversed(list(_live)):
        try:
            x.stop()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


atexit.register(_stop_all)
_libc = ctypes.CDLL(None, use_errno=True)


def _pdeathsig():
    """In the child: SIGKILL when the test (the thread that started it)
    dies, even by SIGKILL, so no server outlives its test."""
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class PortTaken(RuntimeError):
    """Another process listens on the port a server was started on
    (fflib.free_port's pick was taken before the server bound it)."""


def _listeners(pid, port):
    """The inodes of the sockets that listen on port in the network
    namespace of pid."""
    out = set()
    for name in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, name)) as f:
                next(f)
                for line in f:
                    v = line.split()
                    if v[3] == "0A" and int(v[1].rsplit(":", 1)[1], 16) \
                            == port:
                        out.add(v[9])
        except (OSError, StopIteration, IndexError, ValueError):
            pass
    return out


def _owns_port(pid, port):
    """Whether process pid itself listens on port."""
    want = _listeners(pid, port)
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in want:
            return True
    return False


def _wait_port(host, port, proc, what, timeout=30):
    """Until proc itself listens on host:port.  A connection that another
    process answers does not count: two tests that drew the same free
    port must not talk to each other's servers.  PortTaken when proc
    exited while another process listens there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if _listeners(os.getpid(), port):
                raise PortTaken("%s: port %d is another process's"
                                % (what, port))
            raise RuntimeError("%s exited with status %d before it listened"
                               % (what, proc.returncode))
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            if _owns_port(proc.pid, port):
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("%s does not listen on %s:%d after %d s"
                       % (what, host, port, timeout))


def _stop(proc, sig=signal.SIGTERM, timeout=10):
    """Stop proc by its pid: sig, then SIGKILL after timeout."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, sig)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


# ---- a test CA -----------------------------------------------------------

def make_shards(data, out, nshards):
    """WebDataset shards out/shard-NNNNNN.tar (ustar) of the ImageFolder
    tree data (as fflib.Test.gen makes): the images dealt round-robin,
    shard s holding sNNN_III.jpg and its class index as sNNN_III.cls.
    Returns the shards' paths."""
    os.makedirs(out, exist_ok=True)
    files = []
    for ci, c in enumerate(sorted(os.listdir(data))):
        for f in sorted(os.listdir(os.path.join(data, c))):
            files.append((ci, os.path.join(data, c, f)))
    paths = []
    for s in range(nshards):
        paths.append(os.path.join(out, "shard-%06d.tar" % s))
        with tarfile.open(paths[-1], "w", format=tarfile.USTAR_FORMAT) as tf:
            for i, (ci, p) in enumerate(files[s::nshards]):
                key = "s%d_%03d" % (s, i)
                tf.add(p, arcname=key + ".jpg")
                b = str(ci).encode()
                ti = tarfile.TarInfo(key + ".cls")
                ti.size = len(b)
                tf.addfile(ti, io.BytesIO(b))
    return paths


class TestCA:
    """A CA and a server certificate for 127.0.0.1, localhost and any
    extra IP addresses, made by openssl in dir.  ca_file: the CA's PEM (for
    `ca_file =`, curl --cacert); cert, key: the server's."""

    def __init__(self, dir, ips=(), names=()):
        os.makedirs(dir, exist_ok=True)
        self.dir = dir
        self.ca_file = os.path.join(dir, "ca.pem")
        self.ca_key = os.path.join(dir, "ca.key")
        self.cert = os.path.join(dir, "server.pem")
        self.key = os.path.join(dir, "server.key")
        san = ["IP:127.0.0.1", "DNS:localhost"]
        san += ["IP:%s" % ip for ip in ips] + ["DNS:%s" % n for n in names]
        self._run(["req", "-x509", "-newkey", "ec", "-pkeyopt",
                   "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                   "-subj", "/CN=feedfs test CA", "-keyout", self.ca_key,
                   "-out", self.ca_file,
                   "-addext", "basicConstraints=critical,CA:TRUE",
                   "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        csr = os.path.join(dir, "server.csr")
        self._run(["req", "-newkey", "ec", "-pkeyopt",
                   "ec_paramgen_curve:prime256v1", "-nodes",
                   "-subj", "/CN=127.0.0.1", "-keyout", self.key,
                   "-out", csr])
        ext = os.path.join(dir, "server.ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\n" % ",".join(san))
            f.write("basicConstraints=CA:FALSE\n")
            f.write("extendedKeyUsage=serverAuth\n")
        self._run(["x509", "-req", "-in", csr, "-CA", self.ca_file,
                   "-CAkey", self.ca_key, "-CAcreateserial", "-days", "2",
                   "-extfile", ext, "-out", self.cert])

    @staticmethod
    def _run(args):
        r = subprocess.run(["openssl"] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise RuntimeError("openssl %s: %s" % (args[0],
                                                   r.stderr.decode()))


# ---- nginx ---------------------------------------------------------------

class Nginx:
    """Debian's nginx serving root (read-only, Range and ETag on, If-Match
    honoured) on host:port, HTTPS with ca's certificate when https, as a
    non-daemon single process (master_process off: nothing of it outlives
    the test, even one killed) whose prefix, temp dirs, pid and logs are
    in dir.

    url: the base URL ("https://127.0.0.1:PORT"); ca_file: the CA's PEM
    (None over HTTP); requests(): the access log as dicts (method, uri,
    status, body, range, conn, if_match, if_unmodified_since);
    body_bytes(): the body bytes sent.  etag=False: no ETag, only
    Last-Modified (nginx's `etag off`)."""

    @staticmethod
    def unavailable():
        if shutil.which("nginx") is None and not os.path.exists(
                "/usr/sbin/nginx"):
            return "nginx is not installed (Debian's nginx)"
        if shutil.which("openssl") is None:
            return "openssl is not installed"
        return None

    def __init__(self, root, dir, https=False, ca=None, netem=None,
                 http2=False, etag=True):
        self.root = os.path.abspath(root)
        self.dir = dir
        self.https = https
        self.netem = netem
        self.host = netem.server_ip if netem is not None else "127.0.0.1"
        self.port = fflib.free_port()
        self.proc = None
        os.makedirs(dir, exist_ok=True)
        for d in ("logs", "tmp"):
            os.makedirs(os.path.join(dir, d), exist_ok=True)
        self.ca = None
        if https:
            self.ca = ca or TestCA(os.path.join(dir, "ca"),
                                   ips=[self.host] if netem else [])
        self.ca_file = self.ca.ca_file if https else None
        self.access_log = os.path.join(dir, "logs", "access.log")
        self.error_log = os.path.join(dir, "logs", "error.log")
        self.conf = os.path.join(dir, "nginx.conf")
        self.http2, self.etag = http2, etag
        self.started = False
        self._write_conf()

    def _write_conf(self):
        """nginx.conf for self.port; url."""
        dir, https, http2, etag = self.dir, self.https, self.http2, self.etag
        tmp = os.path.join(dir, "tmp")
        listen = "%s:%d" % (self.host, self.port)
        if https:
            listen += " ssl" + (" http2" if http2 else "")
        lines = [
            "daemon off;",
            # one process: it dies with the test (PR_SET_PDEATHSIG), where
            # a master's workers would outlive a SIGKILL of it
            "master_process off;",
            "pid %s;" % os.path.join(dir, "nginx.pid"),
            "error_log %s info;" % self.error_log,
            "events { worker_connections 256; }",
            "http {",
            "  default_type application/octet-stream;",
            "  sendfile on;",
            "  keepalive_requests 100000;",
            "  keepalive_timeout 60s;",
            # etag off: Last-Modified only, as many small servers
            "  etag %s;" % ("on" if etag else "off"),
            "  max_ranges 1;",
            "  log_format feedfs '$request_method $uri $status $body_bytes_sent"
            " $bytes_sent $connection $connection_requests \"$http_range\""
            " \"$http_if_match\" \"$http_if_unmodified_since\"';",
            "  access_log %s feedfs;" % self.access_log,
        ]
        for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            lines.append("  %s_temp_path %s;" % (k, os.path.join(tmp, k)))
        lines += ["  server {", "    listen %s;" % listen,
                  "    root %s;" % self.root]
        if https:
            lines += ["    ssl_certificate %s;" % self.ca.cert,
                      "    ssl_certificate_key %s;" % self.ca.key]
        lines += ["    location / { autoindex off; }", "  }", "}"]
        if os.geteuid() == 0:
            # workers as root: the test's temp dirs are 0700
            lines.insert(0, "user root;")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.url = "%s://%s:%d" % ("https" if https else "http", self.host,
                                   self.port)

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()
        return False

    def start(self):
        cmd = ["nginx", "-p", self.dir, "-c", self.conf, "-e",
               self.error_log]
        if self.netem is not None:
            cmd = self.netem.ns_cmd(cmd)
        for attempt in range(5):
            self.proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(
                    self.dir, "logs", "stderr"), "wb"),
                preexec_fn=_pdeathsig)
            if self not in _live:
                _live.append(self)
            try:
                _wait_port(self.host, self.port, self.proc, "nginx")
                break
            except PortTaken:
                # before its URL was given out: another port
                if self.started or attempt == 4:
                    raise
                _stop(self.proc)
                self.port = fflib.free_port()
                self._write_conf()
            except RuntimeError as e:
                with open(self.error_log, errors="replace") as f:
                    raise RuntimeError("%s\n%s" % (e, f.read()[-2000:]))
        self.started = True
        return self

    def stop(self):
        # SIGQUIT: a graceful stop
        _stop(self.proc, signal.SIGQUIT, timeout=10)
        self.proc = None
        if self in _live:
            _live.remove(self)

    def requests(self):
        out = []
        if not os.path.exists(self.access_log):
            return out
        with open(self.access_log) as f:
            for line in f:
                head, rest = line.rstrip("\n").split(' "', 1)
                m, uri, st, body, sent, conn, nreq = head.split(" ")
                rng, im, ius = (None if v == "-" else
                                v.replace("\\x22", '"')
                                for v in rest[:-1].split('" "'))
                out.append(dict(method=m, uri=uri, status=int(st),
                                body=int(body), sent=int(sent),
                                conn=int(conn), conn_requests=int(nreq),
                                range=rng, if_match=im,
                                if_unmodified_since=ius))
        return out

    def body_bytes(self):
        return sum(r["body"] for r in self.requests())


# ---- moto's S3 server -----------------------------------------------------

class S3Server:
    """moto's server (moto[server] in the venv of tests/setup-test-venv) on
    127.0.0.1:port, with its IAM authentication on: an IAM user with an
    S3 policy and an access key is made first, then /moto-api/reset-auth 0
    turns the checks on for every later request, which must carry a SigV4
    signature (recomputed by moto over its SignedHeaders with the user's
    secret) of that key.  auth=False leaves the checks off (moto fails an
    unsigned request, such as STS AssumeRoleWithWebIdentity, while they
    are on).  The user may read S3 and assume roles (STS AssumeRole);
    moto's STS and IAM answer on the same endpoint.

    endpoint: "http://127.0.0.1:PORT"; region; access_key, secret_key;
    env(): AWS_* variables for them; make_bucket(), upload_dir(), put()."""

    region = "us-east-1"

    @staticmethod
    def unavailable():
        py = os.path.join(VENV, "bin", "python")
        if not os.access(os.path.join(VENV, "bin", "moto_server"), os.X_OK):
            r = subprocess.run([SETUP_VENV, VENV], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            if r.returncode != 0:
                return ("the test venv %s (moto) cannot be made: %s"
                        % (VENV, r.stdout.decode(errors="replace")[-300:]))
        r = subprocess.run([py, "-c", "import moto.server, boto3"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            return "moto does not import in %s: %s" % (VENV, r.stdout[-300:])
        return None

    def __init__(self, dir, auth=True):
        self.dir = dir
        self.auth = auth
        os.makedirs(dir, exist_ok=True)
        self.port = fflib.free_port()
        self.host = "127.0.0.1"
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.proc = None
        self.access_key = self.secret_key = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()
        return False

    def start(self):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("AWS_"):
                del env[k]
        env["MOTO_ALLOW_NONEXISTENT_REGION"] = "true"
        for attempt in range(5):
            self.proc = subprocess.Popen(
                [os.path.join(VENV, "bin", "moto_server"), "-H",
                 "127.0.0.1", "-p", str(self.port)],
                stdout=open(os.path.join(self.dir, "moto.log"), "wb"),
                stderr=subprocess.STDOUT, env=env, cwd=self.dir,
                preexec_fn=_pdeathsig)
            if self not in _live:
                _live.append(self)
            try:
                _wait_port(self.host, self.port, self.proc, "moto_server")
                break
            except PortTaken:
                if attempt == 4:
                    raise
                _stop(self.proc)
                self.port = fflib.free_port()
                self.endpoint = "http://127.0.0.1:%d" % self.port
        # Auth is off until reset-auth: make the user and its key first.
        out = self._admin({"op": "bootstrap"}, creds=("bootstrap",
                                                      "bootstrap"))
        self.access_key = out["access_key"]
        self.secret_key = out["secret_key"]
        if self.auth:
            self._post("/moto-api/reset-auth", b"0")
        return self

    def stop(self):
        _stop(self.proc)
        self.proc = None
        if self in _live:
            _live.remove(self)

    def _post(self, path, body):
        import http.client
        c = http.client.HTTPConnection(self.host, self.port, timeout=30)
        c.request("POST", path, body=body)
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status != 200:
            raise RuntimeError("moto %s: %d %s" % (path, r.status, data))
        return data

    def env(self, secret=None):
        """The AWS_* environment of the user's key (secret: another one)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": secret or self.secret_key,
                "AWS_DEFAULT_REGION": self.region,
                "AWS_REGION": self.region}

    def _admin(self, req, creds=None):
        """Run S3_ADMIN in the venv's python: boto3 against this server."""
        key, secret = creds or (self.access_key, self.secret_key)
        # (the credentials under names of their own: an object's "key"
        # is the request's)
        req = dict(req, endpoint=self.endpoint, region=self.region,
                   access_key=key, secret_key=secret)
        r = subprocess.run([os.path.join(VENV, "bin", "python"), "-c",
                            S3_ADMIN], input=json.dumps(req).encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise RuntimeError("boto3 %s: %s" % (req["op"],
                                                 r.stderr.decode()[-2000:]))
        return json.loads(r.stdout or b"{}")

    def make_bucket(self, bucket):
        self._admin({"op": "mb", "bucket": bucket})

    def upload_dir(self, bucket, local, prefix=""):
        """Every file under local as prefix + its relative path; returns
        {key: ETag}."""
        return self._admin({"op": "put_dir", "bucket": bucket,
                            "dir": os.path.abspath(local),
                            "prefix": prefix})["etags"]

    def put(self, bucket, key, path):
        return self._admin({"op": "put", "bucket": bucket, "key": key,
                            "path": os.path.abspath(path)})["etag"]

    def create_key(self):
        """A new access key of the user (IAM allows two): (id, secret).
        The server's own calls go on with it (access_key, secret_key),
        so that the old one may be deleted."""
        out = self._admin({"op": "create_key"})
        self.access_key = out["access_key"]
        self.secret_key = out["secret_key"]
        return out["access_key"], out["secret_key"]

    def delete_key(self, key_id):
        """Delete the user's access key key_id (IAM DeleteAccessKey)."""
        self._admin({"op": "delete_key", "key_id": key_id})

    def create_role(self, name):
        """An IAM role the user may assume, which may read S3: its ARN."""
        return self._admin({"op": "create_role", "name": name})["arn"]

    def assume(self, arn, seconds):
        """STS AssumeRole of arn for seconds: {AccessKeyId,
        SecretAccessKey, SessionToken, Expiration (ISO 8601)}."""
        return self._admin({"op": "assume", "arn": arn,
                            "seconds": seconds})


# The boto3 side of S3Server, run by the venv's python (stdin: a request).
S3_ADMIN = r'''
import json, os, sys
import boto3
from botocore.config import Config
req = json.load(sys.stdin)
kw = dict(endpoint_url=req["endpoint"], region_name=req["region"],
          aws_access_key_id=req["access_key"],
          aws_secret_access_key=req["secret_key"],
          config=Config(s3={"addressing_style": "path"},
                        retries={"max_attempts": 2},
                        # STS of a few seconds (AWS's least is 900)
                        parameter_validation=False))
op = req["op"]
if op == "bootstrap":
    iam = boto3.client("iam", **kw)
    iam.create_user(UserName="feedfs-test")
    iam.put_user_policy(UserName="feedfs-test", PolicyName="s3",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:*", "sts:AssumeRole",
                                            "iam:*"],
             "Resource": "*"}]}))
    k = iam.create_access_key(UserName="feedfs-test")["AccessKey"]
    print(json.dumps({"access_key": k["AccessKeyId"],
                      "secret_key": k["SecretAccessKey"]}))
    sys.exit(0)
if op in ("create_key", "delete_key", "create_role"):
    iam = boto3.client("iam", **kw)
    if op == "create_key":
        k = iam.create_access_key(UserName="feedfs-test")["AccessKey"]
        print(json.dumps({"access_key": k["AccessKeyId"],
                          "secret_key": k["SecretAccessKey"]}))
    elif op == "delete_key":
        iam.delete_access_key(UserName="feedfs-test",
                              AccessKeyId=req["key_id"])
        print("{}")
    else:
        me = boto3.client("sts", **kw).get_caller_identity()["Arn"]
        r = iam.create_role(RoleName=req["name"],
            AssumeRolePolicyDocument=json.dumps({
                "Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow", "Principal": {"AWS": me},
                    "Action": "sts:AssumeRole"}]}))["Role"]
        iam.put_role_policy(RoleName=req["name"], PolicyName="s3",
            PolicyDocument=json.dumps({"Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "s3:*",
                               "Resource": "*"}]}))
        print(json.dumps({"arn": r["Arn"]}))
    sys.exit(0)
if op == "assume":
    sts = boto3.client("sts", **kw)
    c = sts.assume_role(RoleArn=req["arn"], RoleSessionName="imds",
                        DurationSeconds=req["seconds"])["Credentials"]
    print(json.dumps({"AccessKeyId": c["AccessKeyId"],
                      "SecretAccessKey": c["SecretAccessKey"],
                      "SessionToken": c["SessionToken"],
                      "Expiration": c["Expiration"].strftime(
                          "%Y-%m-%dT%H:%M:%SZ")}))
    sys.exit(0)
s3 = boto3.client("s3", **kw)
if op == "mb":
    s3.create_bucket(Bucket=req["bucket"])
    print("{}")
elif op == "put":
    with open(req["path"], "rb") as f:
        r = s3.put_object(Bucket=req["bucket"], Key=req["key"], Body=f)
    print(json.dumps({"etag": r["ETag"]}))
elif op == "put_dir":
    etags = {}
    for d, _, files in os.walk(req["dir"]):
        for n in sorted(files):
            p = os.path.join(d, n)
            key = req["prefix"] + os.path.relpath(p, req["dir"])
            with open(p, "rb") as f:
                r = s3.put_object(Bucket=req["bucket"], Key=key, Body=f)
            etags[key] = r["ETag"]
    print(json.dumps({"etags": etags}))
'''


# ---- an EC2 instance metadata service (IMDSv2) ----------------------------

class ImdsServer:
    """The instance metadata service's credentials, IMDSv2 only, written
    to AWS's documentation of it (EC2 User Guide, "Use the Instance
    Metadata Service to access instance metadata" and "Retrieve security
    credentials from instance metadata"): no real implementation that
    checks the session token runs here (moto's answers any request, with
    fixed credentials; amazon-ec2-metadata-mock is a Go program).

      PUT /latest/api/token   needs X-aws-ec2-metadata-token-ttl-seconds
                              (1..21600, else 400) and refuses a request
                              with X-Forwarded-For (403); the token, text
      GET /latest/meta-data/iam/security-credentials/       the role
      GET /latest/meta-data/iam/security-credentials/ROLE   its JSON

    Every GET needs X-aws-ec2-metadata-token of a live token, else 401
    (an instance with HttpTokens=required).  The credentials come from
    mint() (a dict: AccessKeyId, SecretAccessKey, SessionToken,
    Expiration as ISO 8601) and are handed out until half their life is
    left, then minted again (EC2 has new ones at least five minutes
    before the old expire).  Runs in the test's process (threads) on
    127.0.0.1; endpoint: its URL (AWS_EC2_METADATA_SERVICE_ENDPOINT);
    log: (method, path, status) of each request; minted: the credentials
    handed out so far."""

    ROLE = "feedfs-test-role"

    def __init__(self, dir, mint):
        import http.server
        self.dir = dir
        os.makedirs(dir, exist_ok=True)
        self.mint = mint
        self.minted = []
        self.log = []
        self.tokens = {}  # token -> its end (monotonic)
        self.cur = None  # (creds, minted at, expires) as time.time()
        self.lock = threading.Lock()
        self.port = fflib.free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.port
        server = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, code, body, ctype="text/plain"):
                b = body.encode()
                with server.lock:  # before the answer: in order
                    server.log.append((self.command, self.path, code))
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(b)))
                self.end_headers()
                self.wfile.write(b)

            def do_PUT(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
                if self.path != "/latest/api/token":
                    return self._send(404, "Not Found")
                if self.headers.get("X-Forwarded-For") is not None:
                    return self._send(403, "Forbidden")
                if ttl is None or not ttl.isdigit() or \
                        not 1 <= int(ttl) <= 21600:
                    return self._send(400, "Bad Request")
                tok = os.urandom(24).hex()
                with server.lock:
                    server.tokens[tok] = time.monotonic() + int(ttl)
                self._send(200, tok)

            def do_GET(self):
                tok = self.headers.get("X-aws-ec2-metadata-token")
                with server.lock:
                    ok = tok is not None and \
                        server.tokens.get(tok, 0) > time.monotonic()
                if not ok:
                    return self._send(401, "Unauthorized")
                base = "/latest/meta-data/iam/security-credentials/"
                if self.path == base:
                    return self._send(200, ImdsServer.ROLE)
                if self.path != base + ImdsServer.ROLE:
                    return self._send(404, "Not Found")
                c = server._creds()
                self._send(200, json.dumps(dict(
                    Code="Success", LastUpdated=time.strftime(
                        "%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    Type="AWS-HMAC", AccessKeyId=c["AccessKeyId"],
                    SecretAccessKey=c["SecretAccessKey"],
                    Token=c["SessionToken"], Expiration=c["Expiration"]),
                    indent=2), "application/json")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1",
                                                      self.port), H)
        self.httpd.daemon_threads = True
        self.thread = None

    def _creds(self):
        import calendar
        now = time.time()
        with self.lock:
            if self.cur is not None:
                c, t0, exp = self.cur
                if now < exp - (exp - t0) / 2:
                    return c
            c = self.mint()
            exp = calendar.timegm(time.strptime(c["Expiration"],
                                                "%Y-%m-%dT%H:%M:%SZ"))
            self.cur = (c, now, exp)
            self.minted.append(c)
            return c

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()
        return False

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)
        self.thread.start()
        _live.append(self)
        return self

    def stop(self):
        if self.thread is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread = None
        if self in _live:
            _live.remove(self)


# ---- a network namespace with netem --------------------------------------

class Netem:
    """A network namespace joined to the root one by a veth pair whose two
    ends each delay their packets by rtt_ms / 2 (tc netem), so a round trip
    between root_ip (the root namespace's end) and server_ip (the
    namespace's) takes rtt_ms more.  Servers run in the namespace
    (ns_cmd(cmd)); feedfs, in the root namespace, reaches them at
    server_ip.  Removed on exit (deleting the namespace deletes the pair)."""

    _n = 0

    @staticmethod
    def unavailable():
        """Why netns + veth + netem cannot run here, or None; probed by
        making them (a kernel without sch_netem, no root, no iproute2)."""
        if os.geteuid() != 0:
            return "network namespaces need root"
        for b in ("ip", "tc"):
            if shutil.which(b) is None:
                return "%s (iproute2) is not installed" % b
        probe = Netem(1, probe=True)
        try:
            probe.start()
        except RuntimeError as e:
            return str(e)
        finally:
            probe.stop()
        return None

    def __init__(self, rtt_ms, probe=False):
        Netem._n += 1
        tag = "%d%d" % (os.getpid() % 100000, Netem._n)
        self.rtt_ms = rtt_ms
        self.ns = "ffnet%s" % tag
        self.dev_root = "ffv%sa" % tag
        self.dev_ns = "ffv%sb" % tag
        # a /30 in 10.200/16 per (pid, n): concurrent tests do not collide
        k = (os.getpid() * 7 + Netem._n) % 16000
        base = (10 << 24) | (200 << 16) | (k << 2)
        self.root_ip = socket.inet_ntoa(struct.pack(">I", base + 1))
        self.server_ip = socket.inet_ntoa(struct.pack(">I", base + 2))
        self.probe = probe
        self.made = False

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()
        return False

    def _ip(self, *args, ns=False):
        cmd = (["ip", "netns", "exec", self.ns] if ns else []) + list(args)
        r = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(cmd),
                                           r.stderr.decode().strip()))

    def ns_cmd(self, cmd):
        return ["ip", "netns", "exec", self.ns] + list(cmd)

    def start(self):
        self._ip("ip", "netns", "add", self.ns)
        self.made = True
        _live.append(self)
        self._ip("ip", "link", "add", self.dev_root, "type", "veth",
                 "peer", "name", self.dev_ns, "netns", self.ns)
        self._ip("ip", "addr", "add", self.root_ip + "/30", "dev",
                 self.dev_root)
        self._ip("ip", "link", "set", self.dev_root, "up")
        self._ip("ip", "addr", "add", self.server_ip + "/30", "dev",
                 self.dev_ns, ns=True)
        self._ip("ip", "link", "set", self.dev_ns, "up", ns=True)
        self._ip("ip", "link", "set", "lo", "up", ns=True)
        half = "%.3fms" % (self.rtt_ms / 2.0)
        try:
            self._ip("tc", "qdisc", "add", "dev", self.dev_root, "root",
                     "netem", "delay", half, "limit", "100000")
            self._ip("tc", "qdisc", "add", "dev", self.dev_ns, "root",
                     "netem", "delay", half, "limit", "100000", ns=True)
        except RuntimeError as e:
            raise RuntimeError("tc netem is not available (a kernel "
                               "without sch_netem?): %s" % e)
        return self

    def stop(self):
        if self.made:
            subprocess.run(["ip", "netns", "del", self.ns],
                           stderr=subprocess.DEVNULL)
            subprocess.run(["ip", "link", "del", self.dev_root],
                           stderr=subprocess.DEVNULL)
            self.made = False
        if self in _live:
            _live.remove(self)


# ---- a fault-injecting HTTP proxy ----------------------------------------

MODES = ("pass", "delay", "truncate", "reset", "status", "full200",
         "bad_range", "long", "redirect", "change", "endless_headers",
         "huge_length", "range_from", "latency")


def _range_kind(rng):
    """What a request's Range header asks: None (no Range), "probe"
    (bytes=0-0), "stream" (bytes=N-, to the end), "member" (bytes=A-B)."""
    if rng is None:
        return None
    spec = rng.strip()[6:] if rng.strip().startswith("bytes=") else ""
    if spec == "0-0":
        return "probe"
    if spec.endswith("-"):
        return "stream"
    return "member"


def _when_matches(when, rng, method="GET"):
    """Whether a request with Range rng is one that `when` names: "all",
    "range" (any Range), "full" (none), "stream" (the index's GET: none,
    or bytes=N-), "resume" (a GET of bytes=N- with N > 0), "member"
    (bytes=A-B, not the probe's bytes=0-0)."""
    kind = _range_kind(rng)
    if when in ("stream", "resume") and method != "GET":
        return False
    if when == "all":
        return True
    if when == "range":
        return kind is not None
    if when == "full":
        return kind is None
    if when == "stream":
        return kind in (None, "stream")
    if when == "resume":
        return kind == "stream" and not rng.strip().startswith("bytes=0-")
    if when == "member":
        return kind == "member"
    raise ValueError("no proxy when=%r" % when)


class _Conn:
    """A blocking socket with a read buffer."""

    def __init__(self, sock):
        self.s = sock
        self.buf = b""

    def head(self, limit=1 << 20):
        """Bytes up to and with CRLFCRLF, or None at EOF."""
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > limit:
                raise ValueError("header too long")
            d = self.s.recv(65536)
            if not d:
                return None
            self.buf += d
        i = self.buf.index(b"\r\n\r\n") + 4
        h, self.buf = self.buf[:i], self.buf[i:]
        return h

    def exactly(self, n):
        while len(self.buf) < n:
            d = self.s.recv(max(65536, n - len(self.buf)))
            if not d:
                raise EOFError("short body")
            self.buf += d
        b, self.buf = self.buf[:n], self.buf[n:]
        return b

    def until_eof(self):
        chunks = [self.buf]
        self.buf = b""
        while True:
            d = self.s.recv(1 << 20)
            if not d:
                return b"".join(chunks)
            chunks.append(d)

    def chunked(self):
        out = []
        while True:
            line = b""
            while b"\r\n" not in self.buf:
                d = self.s.recv(65536)
                if not d:
                    raise EOFError("short chunked body")
                self.buf += d
            i = self.buf.index(b"\r\n")
            line, self.buf = self.buf[:i], self.buf[i + 2:]
            n = int(line.split(b";")[0], 16)
            data = self.exactly(n + 2)[:n]
            if n == 0:
                # trailers up to an empty line
                while not self.buf.startswith(b"\r\n"):
                    if b"\r\n" in self.buf:
                        self.buf = self.buf[self.buf.index(b"\r\n") + 2:]
                        continue
                    d = self.s.recv(65536)
                    if not d:
                        break
                    self.buf += d
                self.buf = self.buf[2:]
                return b"".join(out)
            out.append(data)


def _parse_head(h):
    lines = h.decode("latin-1").split("\r\n")
    first = lines[0]
    hdrs = []
    for ln in lines[1:]:
        if ln:
            k, _, v = ln.partition(":")
            hdrs.append((k.strip(), v.strip()))
    return first, hdrs


def _get(hdrs, name):
    for k, v in hdrs:
        if k.lower() == name.lower():
            return v
    return None


def _without(hdrs, *names):
    low = [n.lower() for n in names]
    return [(k, v) for k, v in hdrs if k.lower() not in low]


def _head_bytes(first, hdrs):
    return ("\r\n".join([first] + ["%s: %s" % kv for kv in hdrs])
            + "\r\n\r\n").encode("latin-1")


class Proxy:
    """An HTTP/1.1 proxy on 127.0.0.1:port in front of an HTTP upstream
    (nginx, moto), forwarding requests verbatim (the Host header too, so a
    SigV4 signature stays valid), with a fault mode set per test:

      pass             forward
      delay            wait `seconds` before answering
      truncate         send the head, `keep` bytes (default half) of the
                       body, close
      reset            read the request, close with a TCP RST
      status           answer `code` (503, 429; Retry-After: `retry_after`)
      full200          ask upstream without Range, answer 200 and the whole
                       object to a range request
      bad_range        Content-Range shifted by `shift` bytes (body as is)
      long             `extra` more bytes than asked: a longer body, its
                       Content-Length and Content-Range claiming the asked
                       range
      redirect         answer 307 to `location` + the path (another host)
      change           the object changed: from this point the body XORed
                       with 0x5A and the ETag `"changed-N"`; If-Match with
                       another ETag gets 412 (a server that honours it;
                       honour_if_match=False: one that ignores it)
      endless_headers  200, then header lines until the client closes (or
                       `limit` bytes)
      huge_length      206 with Content-Length and a Content-Range of
                       10**15 bytes, then zeros until the client closes (or
                       `limit` bytes)
      range_from       the Range asked upstream replaced by bytes=`offset`-
                       (default 0): an honest 206 from another offset
      latency          (set at start: Proxy(..., rtt_ms=20)) every byte in
                       either direction delayed by rtt_ms / 2, connects by
                       rtt_ms: a user-space delay line, for a kernel
                       without netem

    set(mode, when="range"|"full"|"all", times=N, path=SUBSTRING, **params)
    applies mode to the requests that match (a Range header, none, any;
    path containing SUBSTRING) at most N times (None: every time), the rest
    pass.  when may also be "stream" (the index's GET: no Range or
    bytes=N-), "resume" (bytes=N-, N > 0) or "member" (bytes=A-B, not the
    probe's bytes=0-0).  plan([(mode, kwargs), ...]): set's steps in turn,
    each until its times are spent, then pass.  stats(): requests,
    faults, connections, bytes to the client (body and all), bytes from
    upstream; log: one dict per request (method, path, range, if_match,
    status, time; key_id: a SigV4 signature's key id, token: whether
    X-Amz-Security-Token came)."""

    def __init__(self, upstream_host, upstream_port, rtt_ms=None):
        self.up = (upstream_host, upstream_port)
        self.port = fflib.free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.rtt_ms = rtt_ms
        self.lock = threading.Lock()
        self.mode = ("pass", "all", None, None, {})
        self.steps = []
        self.counts = collections.Counter()
        self.log = []
        self.sock = None
        self.stopping = False
        self.threads = []
        self.conns = set()

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()
        return False

    def start(self):
        for attempt in range(5):
            self.sock = socket.socket()
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                self.sock.bind(("127.0.0.1", self.port))
                break
            except OSError:  # the free port taken meanwhile: another
                self.sock.close()
                if attempt == 4:
                    raise
                self.port = fflib.free_port()
                self.url = "http://127.0.0.1:%d" % self.port
        self.sock.listen(256)
        th = threading.Thread(target=self._accept, daemon=True)
        th.start()
        self.threads.append(th)
        _live.append(self)
        return self

    def stop(self):
        self.stopping = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for th in self.threads:
            th.join(timeout=5)
        if self in _live:
            _live.remove(self)

    def set(self, mode, when="all", times=None, path=None, **params):
        if mode not in MODES or mode == "latency":
            raise ValueError("no proxy mode %r" % mode)
        _when_matches(when, None)  # a when that exists
        with self.lock:
            self.mode = (mode, when, times, path, params)
            self.steps = []

    def plan(self, steps):
        """Each (mode, kwargs of set) in turn, the next once the times of
        the one before are spent; then pass."""
        steps = list(steps)
        mode, kw = steps[0]
        self.set(mode, **kw)
        with self.lock:
            self.steps = steps[1:]

    def _next_step(self):
        """The step after the one spent (locked)."""
        if self.steps:
            mode, kw = self.steps.pop(0)
            kw = dict(kw)
            self.mode = (mode, kw.pop("when", "all"), kw.pop("times", None),
                         kw.pop("path", None), kw)
        else:
            self.mode = ("pass", "all", None, None, {})

    def stats(self):
        with self.lock:
            return dict(self.counts)

    def _count(self, **kv):
        with self.lock:
            for k, v in kv.items():
                self.counts[k] += v

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self._count(connections=1)
            with self.lock:
                self.conns.add(c)
            fn = self._delay_line if self.rtt_ms else self._serve
            th = threading.Thread(target=fn, args=(c,), daemon=True)
            th.start()
            self.threads = [t for t in self.threads if t.is_alive()]
            self.threads.append(th)

    def _close(self, c, rst=False):
        if rst:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         struct.pack("ii", 1, 0))
        try:
            c.close()
        except OSError:
            pass
        with self.lock:
            self.conns.discard(c)

    # -- latency: a delay line per direction --------------------------------

    def _delay_line(self, c):
        d = self.rtt_ms / 2000.0
        time.sleep(2 * d)  # the connect's round trip
        try:
            u = socket.create_connection(self.up)
        except OSError:
            self._close(c, rst=True)
            return
        for s in (c, u):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def pump(src, dst, key):
            q = queue.Queue()

            def writer():
                while True:
                    due, data = q.get()
                    w = due - time.monotonic()
                    if w > 0:
                        time.sleep(w)
                    if data is None:
                        try:
                            dst.shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
                        return
                    try:
                        dst.sendall(data)
                    except OSError:
                        return
                    self._count(**{key: len(data)})

            wt = threading.Thread(target=writer, daemon=True)
            wt.start()
            while True:
                try:
                    data = src.recv(1 << 18)
                except OSError:
                    data = b""
                q.put((time.monotonic() + d, data or None))
                if not data:
                    break
            wt.join()

        t1 = threading.Thread(target=pump, args=(c, u, "bytes_up"),
                              daemon=True)
        t1.start()
        pump(u, c, "bytes_out")
        t1.join()
        self._close(u)
        self._close(c)

    # -- HTTP with faults ------------------------------------------------------

    def _pick(self, hdrs, path, method):
        """The mode for this request (and spend one of its times)."""
        with self.lock:
            mode, when, times, sub, params = self.mode
            match = _when_matches(when, _get(hdrs, "Range"), method)
            if sub is not None and sub not in path:
                match = False
            if mode == "change":
                # a change is for good once it happened: every later
                # request of the object (path) sees the new one
                if match and (times is None or times > 0):
                    self.mode = (mode, "all", None, sub,
                                 dict(params, happened=True))
                    return mode, params
                if sub is not None and sub not in path:
                    return "pass", {}
                return (mode, params) if params.get("happened") else \
                    ("pass", {})
            if not match or (times is not None and times <= 0):
                return "pass", {}
            if times is not None:
                self.mode = (mode, when, times - 1, sub, params)
                if times == 1:
                    self._next_step()
            return mode, params

    def _upstream(self, first, hdrs, body):
        """One request to upstream on a fresh connection (Connection:
        close): (status line, headers, body)."""
        u = socket.create_connection(self.up, timeout=60)
        try:
            hdrs = _without(hdrs, "Connection", "Keep-Alive",
                            "Proxy-Connection") + [("Connection", "close")]
            u.sendall(_head_bytes(first, hdrs) + body)
            uc = _Conn(u)
            h = uc.head()
            if h is None:
                raise EOFError("upstream closed")
            st, rh = _parse_head(h)
            method = first.split(" ", 1)[0]
            code = int(st.split(" ")[1])
            if method == "HEAD" or code in (204, 304):
                rb = b""
            elif _get(rh, "Content-Length") is not None:
                rb = uc.exactly(int(_get(rh, "Content-Length")))
            elif (_get(rh, "Transfer-Encoding") or "").lower() == "chunked":
                rb = uc.chunked()
                rh = _without(rh, "Transfer-Encoding")
            else:
                rb = uc.until_eof()
            self._count(bytes_up=len(h) + len(rb))
            if method == "HEAD":
                # the length of what a GET would send, kept as it is
                return st, _without(rh, "Connection", "Keep-Alive"), None
            rh = _without(rh, "Connection", "Keep-Alive", "Content-Length")
            return st, rh, rb
        finally:
            u.close()

    def _send(self, c, data):
        c.sendall(data)
        self._count(bytes_out=len(data))

    def _serve(self, c):
        cc = _Conn(c)
        try:
            while not self.stopping:
                h = cc.head()
                if h is None:
                    break
                first, hdrs = _parse_head(h)
                n = int(_get(hdrs, "Content-Length") or 0)
                body = cc.exactly(n) if n else b""
                method, path = first.split(" ")[:2]
                mode, p = self._pick(hdrs, path, method)
                auth = _get(hdrs, "Authorization") or ""
                entry = dict(method=method, path=path, mode=mode,
                             range=_get(hdrs, "Range"),
                             if_match=_get(hdrs, "If-Match"), status=None,
                             body=0, time=time.monotonic(),
                             # SigV4's key id (not a secret), and a token
                             key_id=auth.partition("Credential=")[2]
                             .partition("/")[0] or None,
                             token=_get(hdrs, "X-Amz-Security-Token")
                             is not None)
                with self.lock:
                    self.log.append(entry)
                    self.counts["requests"] += 1
                    if mode != "pass":
                        self.counts["faults"] += 1
                        self.counts["fault_" + mode] += 1
                if not self._answer(c, first, hdrs, body, mode, p, entry):
                    break
        except (OSError, EOFError, ValueError):
            pass
        self._close(c)

    def _reply(self, c, entry, code, reason, hdrs, body, length=None):
        hdrs = list(hdrs) + [("Content-Length",
                              str(len(body) if length is None else length))]
        entry["status"] = code
        entry["body"] = len(body)
        self._count(body_out=len(body))
        self._send(c, _head_bytes("HTTP/1.1 %d %s" % (code, reason), hdrs)
                   + body)

    def _answer(self, c, first, hdrs, body, mode, p, entry):
        """Answer one request; False: close the connection."""
        if mode == "reset":
            entry["status"] = "reset"
            self._close(c, rst=True)
            return False
        if mode == "delay":
            time.sleep(p.get("seconds", 1.0))
        if mode == "status":
            code = p.get("code", 503)
            extra = []
            if p.get("retry_after") is not None:
                extra.append(("Retry-After", str(p["retry_after"])))
            self._reply(c, entry, code, "Fault", extra,
                        b"injected %d\n" % code)
            return True
        if mode == "redirect":
            self._reply(c, entry, 307, "Temporary Redirect",
                        [("Location", p["location"] + first.split(" ")[1])],
                        b"")
            return True
        if mode == "endless_headers":
            return self._endless(c, entry, p, b"HTTP/1.1 200 OK\r\n",
                                 lambda i: b"X-Endless-%d: %s\r\n"
                                 % (i, b"x" * 64))
        if mode == "huge_length":
            huge = 10 ** 15
            head = _head_bytes("HTTP/1.1 206 Partial Content", [
                ("Content-Range", "bytes 0-%d/%d" % (huge - 1, huge)),
                ("Content-Length", str(huge)), ("ETag", p.get(
                    "etag", '"huge"'))])
            self._send(c, head)
            return self._endless(c, entry, p, b"", lambda i: b"\0" * 65536)
        uhdrs = hdrs
        if mode == "full200":
            uhdrs = _without(hdrs, "Range")
        if mode == "range_from":
            uhdrs = _without(hdrs, "Range") + [
                ("Range", "bytes=%d-" % p.get("offset", 0))]
        if mode == "change" and p.get("honour_if_match", True):
            im = _get(hdrs, "If-Match")
            if im is not None and im != '"changed-1"':
                self._reply(c, entry, 412, "Precondition Failed", [],
                            b"changed\n")
                return True
        if mode == "change":
            uhdrs = _without(uhdrs, "If-Match")
        st, rh, rb = self._upstream(first, uhdrs, body)
        code = int(st.split(" ")[1])
        reason = st.split(" ", 2)[2] if st.count(" ") >= 2 else ""
        if rb is None:  # HEAD: its headers as they came
            entry["status"] = code
            self._send(c, _head_bytes(st, rh))
            return True
        if mode == "change":
            rb = bytes(b ^ 0x5A for b in rb)
            rh = _without(rh, "ETag") + [("ETag", '"changed-1"')]
        if mode == "bad_range":
            cr = _get(rh, "Content-Range")
            if cr:
                unit, _, rest = cr.partition(" ")
                span, _, total = rest.partition("/")
                a, _, b = span.partition("-")
                s = p.get("shift", 1)
                rh = _without(rh, "Content-Range") + [(
                    "Content-Range", "%s %d-%d/%s"
                    % (unit, int(a) + s, int(b) + s, total))]
        if mode == "long":
            rb = rb + b"\xA5" * p.get("extra", 4096)
        if mode == "truncate":
            keep = p.get("keep", len(rb) // 2)
            entry["status"] = code
            entry["body"] = keep
            self._count(body_out=keep)
            self._send(c, _head_bytes(st, rh + [
                ("Content-Length", str(len(rb)))]) + rb[:keep])
            self._close(c)
            return False
        self._reply(c, entry, code, reason, rh, rb)
        return True

    def _endless(self, c, entry, p, start, piece):
        limit = p.get("limit", 1 << 30)
        entry["status"] = "endless"
        sent = 0
        try:
            self._send(c, start)
            i = 0
            while sent < limit and not self.stopping:
                b = piece(i)
                self._send(c, b)
                sent += len(b)
                i += 1
        except OSError:
            pass
        entry["body"] = sent
        self._close(c)
        return False


# ---- small origin servers that misbehave where a test says ----------------

class FileServer:
    """A small HTTP/1.1 origin of the files under root (Python's
    http.server, a thread a connection, in the test's process) whose
    validators, Range support and speed a test sets.  What it does, it
    does as RFC 9110 says a server does:

      etag="strong"   '"<sha256 hex of the bytes>"'
           "weak"     'W/"<size hex>-<mtime hex>"' (Express's, Rack's kind)
           "long"     '"<sha512 hex of the bytes>"': 130 bytes
           None       no ETag
      last_modified   Last-Modified: the file's mtime (IMF-fixdate)
      ranges          bytes=A-B and bytes=A- answered 206 with their
                      Content-Range; False: Range ignored, every GET a 200
                      of the whole file
      rate            bytes a second of every body (a trickle); the
                      headers go at once.  None: as fast as it goes

    Preconditions: If-Match is compared strongly (a weak tag matches
    nothing: 412), If-Unmodified-Since gets 412 when the file's mtime is
    later.  HEAD and GET; requests: one dict per request (method, path,
    range, if_match, if_unmodified_since, status)."""

    def __init__(self, root, etag="strong", last_modified=True, ranges=True,
                 rate=None):
        self.root = os.path.abspath(root)
        self.etag_kind = etag
        self.last_modified = last_modified
        self.ranges = ranges
        self.rate = rate
        self.port = fflib.free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.requests = []
        self.lock = threading.Lock()
        self.httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()
        return False

    def etag(self, data, st):
        import hashlib
        if self.etag_kind == "strong":
            return '"%s"' % hashlib.sha256(data).hexdigest()
        if self.etag_kind == "long":
            return '"%s"' % hashlib.sha512(data).hexdigest()
        if self.etag_kind == "weak":
            return 'W/"%x-%x"' % (st.st_size, int(st.st_mtime))
        return None

    def start(self):
        import email.utils
        import http.server
        srv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_HEAD(self):
                self.answer(False)

            def do_GET(self):
                self.answer(True)

            def reply(self, code, hdrs, body, entry):
                entry["status"] = code
                self.send_response(code)
                for k, v in hdrs:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command == "HEAD" or not body:
                    return
                if srv.rate is None:
                    self.wfile.write(body)
                    return
                step = max(1, srv.rate // 8)  # eight writes a second
                for i in range(0, len(body), step):
                    self.wfile.write(body[i:i + step])
                    self.wfile.flush()
                    time.sleep(step / srv.rate)

            def answer(self, get):
                path = self.path.split("?", 1)[0]
                entry = dict(method=self.command, path=path,
                             range=self.headers.get("Range"),
                             if_match=self.headers.get("If-Match"),
                             if_unmodified_since=self.headers.get(
                                 "If-Unmodified-Since"), status=None)
                with srv.lock:
                    srv.requests.append(entry)
                import urllib.parse
                fp = os.path.join(srv.root, urllib.parse.unquote(
                    path).lstrip("/"))
                try:
                    with open(fp, "rb") as f:
                        data = f.read()
                    st = os.stat(fp)
                except OSError:
                    return self.reply(404, [], b"no such file\n", entry)
                tag = srv.etag(data, st)
                hdrs = []
                if tag is not None:
                    hdrs.append(("ETag", tag))
                if srv.last_modified:
                    hdrs.append(("Last-Modified", email.utils.formatdate(
                        int(st.st_mtime), usegmt=True)))
                im = self.headers.get("If-Match")
                if im is not None and im.strip() != "*" and (
                        tag is None or tag.startswith("W/") or
                        tag not in [t.strip() for t in im.split(",")]):
                    return self.reply(412, [], b"precondition\n", entry)
                ius = self.headers.get("If-Unmodified-Since")
                if ius is not None and im is None:
                    try:
                        since = email.utils.parsedate_to_datetime(ius)
                        if int(st.st_mtime) > since.timestamp():
                            return self.reply(412, [], b"modified\n",
                                              entry)
                    except (TypeError, ValueError):
                        pass
                rng = self.headers.get("Range")
                if srv.ranges and rng and rng.startswith("bytes="):
                    a, _, b = rng[6:].partition("-")
                    a = int(a)
                    b = min(int(b), len(data) - 1) if b else len(data) - 1
                    if a >= len(data):
                        return self.reply(
                            416, [("Content-Range", "bytes */%d"
                                   % len(data))], b"", entry)
                    hdrs.append(("Content-Range", "bytes %d-%d/%d"
                                 % (a, b, len(data))))
                    return self.reply(206, hdrs, data[a:b + 1], entry)
                return self.reply(200, hdrs, data, entry)

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

            def handle_error(self, request, client_address):
                pass  # a client that went away mid-body

        for attempt in range(5):
            try:
                self.httpd = Server(("127.0.0.1", self.port), Handler)
                break
            except OSError:  # the free port taken meanwhile: another
                if attempt == 4:
                    raise
                self.port = fflib.free_port()
                self.url = "http://127.0.0.1:%d" % self.port
        th = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        th.start()
        _live.append(self)
        return self

    def stop(self):
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None
        if self in _live:
            _live.remove(self)


class PyHttpServer:
    """`python3 -m http.server` itself over root: Last-Modified, no ETag,
    and no Range (every GET a 200 of the whole file), as many users
    first try.  A process of its own, stopped by its pid."""

    def __init__(self, root, dir):
        self.root = os.path.abspath(root)
        self.dir = dir
        os.makedirs(dir, exist_ok=True)
        self.port = fflib.free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()
        return False

    def start(self):
        for attempt in range(5):
            self.proc = subprocess.Popen(
                [fflib.PY, "-m", "http.server", "--bind", "127.0.0.1",
                 "--directory", self.root, str(self.port)],
                stdout=open(os.path.join(self.dir, "http.server.log"), "wb"),
                stderr=subprocess.STDOUT, preexec_fn=_pdeathsig)
            if self not in _live:
                _live.append(self)
            try:
                _wait_port("127.0.0.1", self.port, self.proc,
                           "python3 -m http.server")
                return self
            except PortTaken:
                if attempt == 4:
                    raise
                _stop(self.proc)
                self.port = fflib.free_port()
                self.url = "http://127.0.0.1:%d" % self.port

    def stop(self):
        _stop(self.proc)
        self.proc = None
        if self in _live:
            _live.remove(self)
