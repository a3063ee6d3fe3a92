"""credcheck - where a credential's secret must not be found (issue 34).

    credcheck.secrets_absent(m, secrets)  # the mount's output and texts
    credcheck.core_holds(t, pid, secrets, control)  # a gcore of pid

Used by the tests of S3 credentials (test_remote_cred_*.py).
"""

import os
import shutil
import subprocess

import fflib
from fflib import check, log


def secrets_absent(m, secrets):
    """None of secrets in the mount's output, log, stats, text files."""
    texts = {"the mount's output": m.log()}
    for d, _, files in os.walk(m.mnt):
        for n in files:
            if n.endswith(".npy"):
                continue
            p = os.path.join(d, n)
            texts[os.path.relpath(p, m.mnt)] = fflib.read_file(p).decode(
                errors="replace")
    check(".feedfs/log" in texts and ".feedfs/stats" in texts,
          "the walk missed .feedfs: %s" % sorted(texts))
    for what, text in texts.items():
        for s in secrets:
            check(s not in text, "a secret in %s" % what)
    log("no secret in %d texts of the mount" % len(texts))


def core_holds(t, pid, secrets, control):
    """Which of secrets a gcore of pid holds; None when gcore cannot.
    control: a string the daemon's memory must hold (the search works)."""
    if shutil.which("gcore") is None:
        log("SKIP of the core dump: no gcore (Debian's gdb)")
        return None
    ldd = subprocess.run(["ldd", fflib.FEEDFS], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout
    if b"libasan" in ldd:
        # gdb walks ASan's terabytes of reserved shadow for hours
        log("SKIP of the core dump: an ASan build (the plain build's "
            "run of this test checks it)")
        return None
    prefix = t.path("core")
    r = subprocess.run(["gcore", "-o", prefix, str(pid)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=600)
    core = "%s.%d" % (prefix, pid)
    if r.returncode != 0 or not os.path.exists(core):
        log("SKIP of the core dump: gcore failed: %s"
            % r.stdout.decode(errors="replace")[-300:])
        return None
    found = set()
    secrets = list(secrets) + [control]
    keep = max(len(s) for s in secrets)
    size = os.path.getsize(core)
    with open(core, "rb") as f:
        tail = b""
        while True:
            chunk = f.read(64 << 20)
            if not chunk:
                break
            buf = tail + chunk
            for s in secrets:
                if s.encode() in buf:
                    found.add(s)
            tail = buf[-keep:]
    os.unlink(core)
    log("core dump of the daemon: %d MiB searched" % (size >> 20))
    check(control in found, "the core lacks %s: a search that finds "
          "nothing proves nothing" % control)
    return found - {control}
