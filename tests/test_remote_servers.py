#!/usr/bin/python3
"""test_remote_servers.py - the servers of the remote-shard tests, checked
with curl (issue 30): tests/remote_servers.py does what it says before any
feedfs test relies on it.

- nginx over HTTPS with the test CA: a range request is answered 206 with
  its Content-Range and ETag and the file's bytes, curl without the CA
  refuses the certificate, If-Match with another ETag gets 412, two
  requests share one keep-alive connection, the access log counts the
  bytes; the same over HTTP; stopped, no nginx process of it is left,
  nor when the test that started it is killed with SIGKILL;
  with http2=True curl speaks HTTP/2 to it;
- moto's S3 server: a range GET signed by curl --aws-sigv4 with the
  user's key gets the object's bytes, the same request signed with a wrong
  secret gets 403 SignatureDoesNotMatch, an unsigned one 403 too (skipped
  where the venv of tests/setup-test-venv cannot be made); put() stores
  an object under the key asked for, one with a space, '#' and '?' too;
- Netem(40): nginx in the namespace, reached from the root namespace over
  the veth pair, connects no faster than the RTT and answers no faster
  than another RTT (curl's timings, lower bounds only); the namespace is
  gone afterwards (skipped where the kernel has no netem);
- the proxy in front of nginx, each mode with curl: pass, delay, truncate
  (curl: partial file), reset, 503 twice then a pass, 429 with
  Retry-After, a 200 for a range, a shifted Content-Range, a longer body,
  a redirect, an object changed between a full GET and a range (412 for
  the old ETag, other bytes and ETag without If-Match, and a server that
  ignores If-Match), endless headers and a gigantic Content-Length (curl
  gives up, the proxy stops sending); its counters count each; a plan
  of steps (a truncated index stream, then its resume answered from
  offset 0), and the when= kinds stream, resume and member;
- nginx with etag=False: no ETag, a Last-Modified, If-Unmodified-Since
  honoured (412 for an older date) and logged;
- FileServer: strong, weak, 130-byte and no ETags, If-Match compared
  strongly (a weak tag gets 412), If-Unmodified-Since, Range on and off,
  a trickle no faster than its rate;
- python3 -m http.server: a 200 of the whole file to a range request;
- a port another process took before a server bound it (two tests that
  drew the same free port): nginx and python3 -m http.server start on
  another one, never talking to the other process's server.
"""

import hashlib
import os
import subprocess
import sys
import time
import urllib.parse

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402
import remote_servers as rs  # noqa: E402

t = fflib.Test(needs_fuse=False)
why = rs.Nginx.unavailable()
if why:
    fflib.skip(why)
if subprocess.run(["curl", "--version"], stdout=subprocess.DEVNULL).returncode:
    fflib.skip("curl is not installed")

root = t.path("www")
os.makedirs(os.path.join(root, "d"))
BLOB = os.urandom(300_000)
with open(os.path.join(root, "d", "blob.bin"), "wb") as f:
    f.write(BLOB)


def curl(*args, body=True):
    """(exit status, {header: value} of the last response, status, body)"""
    hdr = t.path("curl.hdr")
    out = t.path("curl.out")
    for p in (hdr, out):
        if os.path.exists(p):
            os.unlink(p)
    r = subprocess.run(["curl", "-sS", "--max-time", "60", "-D", hdr, "-o",
                        out] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    status, headers = None, {}
    if os.path.exists(hdr):
        with open(hdr, "rb") as f:
            for line in f.read().decode("latin-1").split("\r\n"):
                if line.startswith("HTTP/"):
                    status, headers = int(line.split()[1]), {}
                elif ":" in line:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
    data = b""
    if os.path.exists(out):
        with open(out, "rb") as f:
            data = f.read()
    return r.returncode, headers, status, data


def children(pid):
    """The live processes whose parent is pid."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                st = f.read().rsplit(")", 1)[1].split()
            if int(st[1]) == pid and st[0] != "Z":
                out.append(int(p))
        except (OSError, IndexError):
            pass
    return out


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# ---- nginx ---------------------------------------------------------------

def check_nginx(https):
    ng = rs.Nginx(root, t.path("ng-%s" % https), https=https)
    with ng:
        url = ng.url + "/d/blob.bin"
        tls = ["--cacert", ng.ca_file] if https else []
        rc, h, st, data = curl(*tls, "-r", "1000-1999", url)
        check(rc == 0 and st == 206, "nginx range: rc %d status %s"
              % (rc, st))
        check(h.get("content-range") == "bytes 1000-1999/%d" % len(BLOB),
              "Content-Range %r" % h.get("content-range"))
        check(data == BLOB[1000:2000], "a range's bytes differ")
        etag = h.get("etag")
        check(etag and etag.startswith('"'), "no ETag: %r" % etag)
        if https:
            rc, _, _, _ = curl("-r", "0-9", url)
            check(rc == 60, "curl without the CA: rc %d, not 60 (the "
                  "certificate must be refused)" % rc)
        rc, h, st, _ = curl(*tls, "-r", "0-9", "-H", 'If-Match: "other"',
                            url)
        check(st == 412, "If-Match with another ETag: %s, not 412" % st)
        rc, h, st, data = curl(*tls, "-r", "0-9", "-H", "If-Match: " + etag,
                               url)
        check(st == 206 and data == BLOB[:10], "If-Match its ETag: %s" % st)
        # keep-alive: two requests of one curl on one connection
        r = subprocess.run(["curl", "-sS"] + tls + ["-r", "10-19", url, url, "-o", "/dev/null", "-o",
                            "/dev/null"], stderr=subprocess.PIPE)
        check(r.returncode == 0, "two requests: %s" % r.stderr)
        time.sleep(0.2)
        reqs = ng.requests()
        check(reqs[-1]["conn"] == reqs[-2]["conn"]
              and reqs[-1]["conn_requests"] == 2,
              "two requests of one curl on two connections: %s" % reqs[-2:])
        check(reqs[-1]["range"] == "bytes=10-19", "log: %s" % reqs[-1])
        body = sum(r["body"] for r in reqs if r["status"] == 206)
        check(body == 1000 + 10 + 10 + 10, "206s' body bytes %d: %s" % (body, reqs))
        check(ng.body_bytes() > body, "the 412's page is not counted")
        pid = ng.proc.pid
        check(not children(pid), "nginx has children: %s" % children(pid))
    check(not alive(pid), "nginx is left")
    log("nginx %s: ranges, ETag, If-Match, keep-alive, stopped"
        % ("HTTPS" if https else "HTTP"))


check_nginx(True)
check_nginx(False)
# HTTP/2 over TLS (ALPN), where the fetcher multiplexes
with rs.Nginx(root, t.path("ng-h2"), https=True, http2=True) as ng:
    r = subprocess.run(["curl", "-sS", "--http2", "--cacert", ng.ca_file,
                        "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
                        "-r", "0-99", ng.url + "/d/blob.bin"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(r.stdout == b"2 206", "nginx http2=True: curl says %r %r"
          % (r.stdout, r.stderr))
    log("nginx HTTPS with http2=True: HTTP/2, 206")

# a test killed (SIGKILL) leaves no server behind
r = subprocess.run([sys.executable, "-c", """
import os, signal, sys
sys.path.insert(0, %r)
import remote_servers as rs
ng = rs.Nginx(%r, %r).start()
print(ng.proc.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
""" % (os.path.dirname(os.path.abspath(__file__)), root,
       t.path("ng-killed"))], stdout=subprocess.PIPE)
pid = int(r.stdout.split()[0])
for _ in range(50):
    if not alive(pid):
        break
    time.sleep(0.1)
check(not alive(pid), "nginx outlived its test's SIGKILL")
log("a test killed with SIGKILL leaves no nginx")

# ---- the proxy -------------------------------------------------------------

with rs.Nginx(root, t.path("ng-proxy")) as ng, \
        rs.Proxy("127.0.0.1", ng.port) as px:
    url = px.url + "/d/blob.bin"
    rc, h, st, data = curl("-r", "0-99", url)
    check(st == 206 and data == BLOB[:100], "pass: %s" % st)
    etag = h["etag"]

    px.set("delay", seconds=1.0, times=1)
    t0 = time.monotonic()
    rc, h, st, data = curl("-r", "0-99", url)
    check(st == 206 and time.monotonic() - t0 >= 0.9,
          "delay: %s after %.2f s" % (st, time.monotonic() - t0))

    px.set("truncate", keep=50, times=1)
    rc, h, st, data = curl("-r", "0-999", url)
    check(rc == 18 and data == BLOB[:50], "truncate: curl rc %d, %d bytes"
          % (rc, len(data)))

    px.set("reset", times=1)
    rc, h, st, data = curl("-r", "0-99", url)
    check(rc in (52, 56) and st is None, "reset: curl rc %d" % rc)

    px.set("status", code=503, times=2, when="range")
    got = [curl("-r", "0-99", url)[2] for _ in range(3)]
    check(got == [503, 503, 206], "503 twice then a pass: %s" % got)

    px.set("status", code=429, retry_after=1, times=1)
    rc, h, st, data = curl("-r", "0-99", url)
    check(st == 429 and h.get("retry-after") == "1", "429: %s %s" % (st, h))

    px.set("full200", times=1)
    rc, h, st, data = curl("-r", "0-99", url)
    check(st == 200 and data == BLOB and "content-range" not in h,
          "full200: %s, %d bytes" % (st, len(data)))

    px.set("bad_range", shift=7, times=1)
    rc, h, st, data = curl("-r", "100-199", url)
    check(st == 206 and h["content-range"] == "bytes 107-206/%d"
          % len(BLOB) and data == BLOB[100:200],
          "bad_range: %s %s" % (st, h.get("content-range")))

    px.set("long", extra=333, times=1)
    rc, h, st, data = curl("-r", "100-199", url)
    check(st == 206 and len(data) == 433 and data[:100] == BLOB[100:200]
          and h["content-range"] == "bytes 100-199/%d" % len(BLOB),
          "long: %s %d bytes" % (st, len(data)))

    px.set("redirect", location="http://localhost:%d" % ng.port, times=1)
    rc, h, st, data = curl("-r", "0-99", url)
    check(st == 307 and h["location"] == "http://localhost:%d/d/blob.bin"
          % ng.port, "redirect: %s %s" % (st, h.get("location")))

    # changed between the index's full GET and the member's range
    px.set("change", when="range")
    rc, h, st, data = curl(url)
    check(st == 200 and data == BLOB and h["etag"] == etag,
          "change: the full GET before it: %s" % st)
    rc, h, st, data = curl("-r", "0-99", "-H", "If-Match: " + etag, url)
    check(st == 412, "change: If-Match the old ETag: %s, not 412" % st)
    rc, h, st, data = curl("-r", "0-99", url)
    check(st == 206 and h["etag"] == '"changed-1"'
          and data == bytes(b ^ 0x5A for b in BLOB[:100]),
          "change: without If-Match: %s %s" % (st, h.get("etag")))
    rc, h, st, data = curl(url)
    check(h["etag"] == '"changed-1"', "change: a later full GET: %s" % h)
    px.set("change", when="range", honour_if_match=False)
    curl(url)
    rc, h, st, data = curl("-r", "0-99", "-H", "If-Match: " + etag, url)
    check(st == 206 and h["etag"] == '"changed-1"'
          and data == bytes(b ^ 0x5A for b in BLOB[:100]),
          "change, If-Match ignored: %s %s" % (st, h.get("etag")))

    px.set("endless_headers", times=1)
    rc, h, st, data = curl("-r", "0-99", url)
    check(rc != 0, "endless headers: curl rc 0")
    px.set("huge_length", times=1)
    rc, h, st, data = curl("--max-filesize", "1000000", "-r", "0-99", url)
    check(rc == 63, "huge Content-Length: curl rc %d, not 63" % rc)
    time.sleep(0.5)
    ent = {e["mode"]: e for e in px.log}
    for m in ("endless_headers", "huge_length"):
        check(ent[m]["status"] == "endless" and ent[m]["body"] < (64 << 20),
              "%s: the proxy sent %d bytes after the client left"
              % (m, ent[m]["body"]))
    s = px.stats()
    for m, n in (("delay", 1), ("truncate", 1), ("reset", 1), ("status", 3),
                 ("full200", 1), ("bad_range", 1), ("long", 1),
                 ("redirect", 1), ("endless_headers", 1),
                 ("huge_length", 1)):
        check(s.get("fault_" + m) == n, "fault_%s = %s, not %d"
              % (m, s.get("fault_" + m), n))
    check(s["fault_change"] == 4, "fault_change = %s" % s["fault_change"])
    check(s["requests"] == len(px.log) and s["bytes_out"] > s["body_out"]
          > 0 and s["bytes_up"] > 0, "counters: %s" % s)
    log("proxy: every mode, counted: %s" % s)

    # a plan: the index's stream cut, its resume answered from offset 0;
    # then everything passes
    px.plan([("truncate", dict(when="stream", times=1, keep=1000)),
             ("range_from", dict(when="resume", times=1, offset=0))])
    rc, h, st, data = curl("-r", "0-9", url)
    check(st == 206 and data == BLOB[:10], "plan: a member passes: %s" % st)
    rc, h, st, data = curl("-r", "0-", url)
    check(rc == 18 and data == BLOB[:1000], "plan step 1 (truncate): rc "
          "%d, %d bytes" % (rc, len(data)))
    rc, h, st, data = curl("-r", "1000-", url)
    check(st == 206 and h["content-range"] == "bytes 0-%d/%d"
          % (len(BLOB) - 1, len(BLOB)) and data == BLOB,
          "plan step 2 (range_from): %s %s" % (st, h.get("content-range")))
    rc, h, st, data = curl("-r", "1000-", url)
    check(st == 206 and data == BLOB[1000:], "plan over: %s" % st)
    log("proxy: a plan of steps, when=stream/resume, range_from")

# ---- nginx without ETags ---------------------------------------------------

with rs.Nginx(root, t.path("ng-noetag"), etag=False) as ng:
    url = ng.url + "/d/blob.bin"
    rc, h, st, data = curl("-r", "0-9", url)
    check(st == 206 and "etag" not in h and "last-modified" in h,
          "etag=False: %s %s" % (st, h))
    rc, _, st, data = curl("-r", "0-9", "-H", "If-Unmodified-Since: "
                           "Sun, 06 Nov 1994 08:49:37 GMT", url)
    check(st == 412, "etag=False, If-Unmodified-Since 1994: %s" % st)
    rc, _, st, data = curl("-r", "0-9", "-H", "If-Unmodified-Since: "
                            + h["last-modified"], url)
    check(st == 206 and data == BLOB[:10], "If-Unmodified-Since its own "
          "date: %s" % st)
    time.sleep(0.2)
    check(ng.requests()[-1]["if_unmodified_since"] == h["last-modified"],
          "log: %s" % ng.requests()[-1])
    log("nginx etag=False: Last-Modified only, If-Unmodified-Since")

# ---- FileServer and python3 -m http.server --------------------------------

d = os.path.join(root, "d")
for kind, want in (("strong", '"%s"' % hashlib.sha256(BLOB).hexdigest()),
                   ("long", '"%s"' % hashlib.sha512(BLOB).hexdigest()),
                   ("weak", None), (None, None)):
    with rs.FileServer(d, etag=kind) as fs:
        url = fs.url + "/blob.bin"
        rc, h, st, data = curl("-r", "5-14", url)
        check(st == 206 and data == BLOB[5:15] and h["content-range"] ==
              "bytes 5-14/%d" % len(BLOB) and "last-modified" in h,
              "FileServer %s: %s %s" % (kind, st, h))
        tag = h.get("etag")
        if kind is None:
            check(tag is None, "FileServer None: ETag %s" % tag)
        elif kind == "weak":
            check(tag.startswith('W/"'), "weak: %s" % tag)
        else:
            check(tag == want and (kind != "long" or len(tag) == 130),
                  "FileServer %s: ETag %s" % (kind, tag))
        if tag is not None:
            rc, h, st, data = curl("-r", "0-9", "-H", "If-Match: " + tag,
                                   url)
            check(st == (412 if kind == "weak" else 206),
                  "FileServer %s: If-Match its own tag: %s" % (kind, st))
        rc, h, st, data = curl("-r", "0-9", "-H", "If-Unmodified-Since: "
                               "Sun, 06 Nov 1994 08:49:37 GMT", url)
        check(st == 412, "FileServer %s: If-Unmodified-Since: %s"
              % (kind, st))
        check(fs.requests[-1]["if_unmodified_since"],
              "FileServer: requests %s" % fs.requests[-1])
with rs.FileServer(d, ranges=False, last_modified=False) as fs:
    rc, h, st, data = curl("-r", "0-9", fs.url + "/blob.bin")
    check(st == 200 and data == BLOB and "last-modified" not in h,
          "FileServer ranges=False: %s, %d bytes" % (st, len(data)))
with rs.FileServer(d, rate=20000) as fs:
    t0 = time.monotonic()
    rc, h, st, data = curl("-r", "0-29999", fs.url + "/blob.bin")
    took = time.monotonic() - t0
    check(st == 206 and data == BLOB[:30000] and took >= 1.0,
          "FileServer rate=20000: 30000 bytes in %.2f s" % took)
log("FileServer: strong, weak, long and no ETags, preconditions, Range "
    "off, a trickle")
with rs.PyHttpServer(d, t.path("pyhttp")) as ps:
    rc, h, st, data = curl("-r", "0-9", ps.url + "/blob.bin")
    check(st == 200 and data == BLOB and "etag" not in h,
          "python3 -m http.server: %s, %d bytes" % (st, len(data)))
    pid = ps.proc.pid
check(not alive(pid), "python3 -m http.server is left")
log("python3 -m http.server: a 200 of the whole file to a range")

# a free port taken before the server bound it: another port, never the
# other process's server
import socket  # noqa: E402
blocker = socket.socket()
blocker.bind(("127.0.0.1", 0))
blocker.listen(8)
taken = blocker.getsockname()[1]
ng = rs.Nginx(root, t.path("ng-taken"))
ng.port = taken
ng._write_conf()
ps = rs.PyHttpServer(d, t.path("pyhttp-taken"))
ps.port, ps.url = taken, "http://127.0.0.1:%d" % taken
with ng, ps:
    for what, url in (("nginx", ng.url + "/d/blob.bin"),
                      ("python3 -m http.server", ps.url + "/blob.bin")):
        rc, h, st, data = curl("-r", "0-9", url)
        check(str(taken) not in url and st in (200, 206) and
              data[:10] == BLOB[:10], "%s on a taken port: %s, %s"
              % (what, url, st))
blocker.close()
log("a port taken by another process: nginx and python3 -m http.server "
    "on another one")

# the latency mode (the bench's delay line where there is no netem)
with rs.Nginx(root, t.path("ng-lat")) as ng, \
        rs.Proxy("127.0.0.1", ng.port, rtt_ms=100) as px:
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w",
                        "%{time_starttransfer}", "-r", "0-99",
                        px.url + "/d/blob.bin"], stdout=subprocess.PIPE)
    ttfb = float(r.stdout)
    check(r.returncode == 0 and ttfb >= 0.18, "latency 100 ms: first byte "
          "after %.3f s (the connect and a request: two RTTs)" % ttfb)
    log("proxy latency 100 ms: first byte after %.3f s" % ttfb)

# ---- moto ----------------------------------------------------------------

why = rs.S3Server.unavailable()
if why:
    log("SKIP: S3: %s" % why)
else:
    with rs.S3Server(t.path("s3")) as s3:
        s3.make_bucket("bkt")
        etags = s3.upload_dir("bkt", os.path.join(root, "d"), prefix="p/")
        check(list(etags) == ["p/blob.bin"], "uploaded %s" % etags)
        url = s3.endpoint + "/bkt/p/blob.bin"
        # S3 wants the payload's hash in x-amz-content-sha256 on every
        # SigV4 request (curl signs it when given)
        sig = ["--aws-sigv4", "aws:amz:%s:s3" % s3.region, "-H",
               "x-amz-content-sha256: " + hashlib.sha256(b"").hexdigest()]
        rc, h, st, data = curl(*sig, "--user", "%s:%s" % (
            s3.access_key, s3.secret_key), "-r", "10-19", url)
        check(st == 206 and data == BLOB[10:20],
              "S3 signed range GET: rc %d status %s %r" % (rc, st, data[:300]))
        rc, h, st, data = curl(*sig, "--user", "%s:%s" % (
            s3.access_key, ("y" if s3.secret_key[0] == "x" else "x")
            + s3.secret_key[1:]), "-r", "10-19", url)
        check(st == 403 and b"SignatureDoesNotMatch" in data,
              "S3 wrong secret: %s %r" % (st, data[:300]))
        rc, h, st, data = curl("-r", "10-19", url)
        check(st == 403, "S3 unsigned: %s %r" % (st, data[:300]))
        rc, h, st, data = curl(*sig, "--user", "%s:%s" % (
            s3.access_key, s3.secret_key), "-r", "10-19", "-H",
            'If-Match: "0123"', url)
        check(st == 412, "S3 If-Match another ETag: %s" % st)
        # put stores under the key asked for (not the access key id), and
        # a key with a space, '#' and '?' is read back by its encoding
        for key in ("q/one.bin", "q/a b#1?.bin"):
            etag = s3.put("bkt", key, os.path.join(root, "d", "blob.bin"))
            rc, h, st, data = curl(*sig, "--user", "%s:%s" % (
                s3.access_key, s3.secret_key), "-r", "0-9",
                s3.endpoint + "/bkt/" + urllib.parse.quote(key))
            check(st == 206 and data == BLOB[:10] and
                  h.get("etag") == etag,
                  "S3 put %r: read back %s %r (ETag %s, put said %s)"
                  % (key, st, data[:200], h.get("etag"), etag))
        pid = s3.proc.pid
    check(not alive(pid), "moto_server is left")
    log("S3 (moto): SigV4 checked, a wrong secret refused")

# ---- netem ---------------------------------------------------------------

why = rs.Netem.unavailable()
if why:
    log("SKIP: netem: %s" % why)
else:
    with rs.Netem(40) as n:
        with rs.Nginx(root, t.path("ng-netem"), https=True, netem=n) as ng:
            r = subprocess.run(
                ["curl", "-sS", "--cacert", ng.ca_file, "-o", "/dev/null",
                 "-w", "%{time_connect} %{time_starttransfer}", "-r",
                 "0-99", ng.url + "/d/blob.bin"], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)
            check(r.returncode == 0, "curl over the veth: %s" % r.stderr)
            conn, first = (float(x) for x in r.stdout.split())
            check(conn >= 0.035 and first - conn >= 0.035,
                  "netem 40 ms: connect %.3f s, first byte %.3f s" %
                  (conn, first))
            log("netem 40 ms: connect %.3f s, first byte %.3f s"
                % (conn, first))
        ns = n.ns
    r = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE)
    check(ns.encode() not in r.stdout, "namespace %s is left" % ns)
log("PASS")
