#!/usr/bin/python3
"""test_cluster_auth.py - the cluster tier's credentials at mount (issue 40,
section 5), against a real memcached -S (SASL PLAIN, a sasldb made here by
saslpasswd2) and a plain memcached, started here on free 127.0.0.1 ports
and killed here by pid:

  - a wrong password in cluster_auth, and no cluster_auth at all: the
    mount says once, at mount, that the server refused it and that it
    serves without the tier; feedfs_cluster_enabled 0 and
    feedfs_cluster_error name it; every read gives feedfs-ref's bytes;
  - the same in the background: said on the terminal that mounts;
  - the right password: nothing said, the tier on, values stored;
  - no cluster_auth with one server of each kind: the tier stays on,
    the SASL server is named, values go to the other.

Exits 77 without memcached built with SASL or saslpasswd2."""

import atexit
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import accepts, check, free_port, log  # noqa: E402

MEMCACHED = "/usr/bin/memcached"
SASLPASSWD = "/usr/sbin/saslpasswd2"
N = 32

if not os.access(MEMCACHED, os.X_OK) or not os.access(SASLPASSWD, os.X_OK):
    fflib.skip("%s or %s is missing" % (MEMCACHED, SASLPASSWD))
if b"--enable-sasl" not in subprocess.run(
        [MEMCACHED, "-h"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT).stdout:
    fflib.skip("%s has no SASL (-S)" % MEMCACHED)
t = fflib.Test()

servers = []


def kill_servers():
    for p in servers:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


atexit.register(kill_servers)  # runs before Test's cleanup (LIFO)


def start_server(sasl):
    port = free_port()
    argv = [MEMCACHED, "-p", str(port), "-l", "127.0.0.1", "-U", "0",
            "-m", "64", "-t", "2"] + (["-S"] if sasl else [])
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    env = dict(os.environ)
    if sasl:
        env["SASL_CONF_PATH"] = t.path("sasl")
    logf = open(t.path("memcached-%d.log" % port), "wb")
    p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, env=env)
    servers.append(p)
    for _ in range(500):
        if accepts(port):
            return port
        check(p.poll() is None, "memcached on port %d exited" % port)
        time.sleep(0.01)
    fflib.fail("memcached on port %d did not start" % port)


os.makedirs(t.path("sasl"))
db = t.path("sasl", "sasldb2")
with open(t.path("sasl", "memcached.conf"), "w") as f:
    f.write("mech_list: plain\nsasldb_path: %s\n" % db)
r = subprocess.run([SASLPASSWD, "-a", "memcached", "-c", "-p", "-f", db,
                    "feeder"], input=b"s3cret", stderr=subprocess.PIPE)
check(r.returncode == 0, "saslpasswd2: %r" % r.stderr)
sasl_port = start_server(True)
plain_port = start_server(False)
log("memcached -S on %d, memcached on %d" % (sasl_port, plain_port))


def auth_file(name, text):
    path = t.path(name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, text.encode())
    os.close(fd)
    return path


good = auth_file("good.auth", "feeder\ns3cret\n")
wrong = auth_file("wrong.auth", "feeder\nnot-the-password\n")
data = t.gen(t.path("data"), n=N, classes=4, seed=3)
cfg = t.config(t.path("feedfs.conf"), data, {"a": dict(epochs=1)},
               readahead=1)
ref = t.ref(cfg, "a", 0, t.path("ref"))
OFF = "serving without the cluster tier"


def opts(name, cluster, auth=None):
    o = "cache_dir=%s,cluster=%s" % (t.path("cache-" + name), cluster)
    return o + (",cluster_auth=" + auth if auth else "")


def error_label(m):
    with open(m.p(".feedfs", "stats")) as f:
        for line in f:
            if line.startswith("feedfs_cluster_error{"):
                return line.strip()
    return None


def refused(name, auth, said):
    server = "127.0.0.1:%d" % sasl_port
    with fflib.Mount(t, cfg, t.path("mnt-" + name), "-o",
                     opts(name, server, auth)) as m:
        text = m.log()
        check(text.count("warning: cluster: " + server) == 1
              and said in text and OFF in text,
              "%s: not said once at mount:\n%s" % (name, text))
        m.read_epoch("a", 0, ref)
        st = m.stats()
        label = error_label(m)
        check(st["feedfs_cluster_enabled"] == 0 and label is not None
              and said in label, "%s: enabled %d, %s"
              % (name, st["feedfs_cluster_enabled"], label))
        check(st["feedfs_cluster_puts_total"] == 0, "%s: puts" % name)
        check("not-the-password" not in text + label,
              "%s: the password is shown" % name)
    log("%s: %s" % (name, label))


refused("wrong", wrong, "refused cluster_auth's user feeder")
refused("none", None, "wants SASL authentication")

# In the background: on the terminal that mounts.
bg = t.path("mnt-bg")
os.makedirs(bg)
r = subprocess.run([fflib.FEEDFS, "-o", opts("bg", "127.0.0.1:%d" % sasl_port,
                                             wrong), cfg, bg],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
try:
    err = r.stderr.decode()
    check(r.returncode == 0 and err.count("refused cluster_auth's user "
                                          "feeder") == 1,
          "a mount in the background with a wrong password: exit %d, "
          "stderr %r" % (r.returncode, err))
finally:
    fflib._force_umount(bg)
log("in the background: said on the terminal")

with fflib.Mount(t, cfg, t.path("mnt-good"), "-o",
                 opts("good", "127.0.0.1:%d" % sasl_port, good)) as m:
    m.read_epoch("a", 0, ref)
    st = m.stats()
    check("warning: cluster:" not in m.log() and error_label(m) is None
          and st["feedfs_cluster_enabled"] == 1
          and st["feedfs_cluster_puts_total"] >= N,
          "the right password: enabled %d, %d puts, log:\n%s"
          % (st["feedfs_cluster_enabled"], st["feedfs_cluster_puts_total"],
             m.log()))
log("the right password: nothing said, %d values stored"
    % st["feedfs_cluster_puts_total"])

both = "127.0.0.1:%d,127.0.0.1:%d" % (sasl_port, plain_port)
with fflib.Mount(t, cfg, t.path("mnt-both"), "-o", opts("both", both)) as m:
    m.read_epoch("a", 0, ref)
    st = m.stats()
    label = error_label(m) or ""
    check(st["feedfs_cluster_enabled"] == 1 and OFF not in m.log()
          and "127.0.0.1:%d wants SASL" % sasl_port in label
          and st["feedfs_cluster_puts_total"] > 0,
          "one server of each kind: enabled %d, %d puts, %s"
          % (st["feedfs_cluster_enabled"], st["feedfs_cluster_puts_total"],
             label))
log("one server of each kind, no cluster_auth: on, %d values stored, %s"
    % (st["feedfs_cluster_puts_total"], label))
log("ok")
