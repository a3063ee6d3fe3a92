#!/usr/bin/python3
"""test_pip.py - the Python package installs the usual ways (issue 26):

- `pip install ./python` (python/pyproject.toml) into a venv made from
  /usr/bin/python3 with --system-site-packages, with no network
  (--no-index --no-build-isolation: setuptools and wheel are Debian's,
  scripts/deps.txt); the torch extra resolves where torch is installed;
  the installed version is configure's (config.h's PACKAGE_VERSION);
- the venv's Python, isolated (-I: no PYTHONPATH, no working directory
  on sys.path) and run outside the source tree, imports feedfs from the
  venv, reads a batch of a real mount equal to the file's np.load, and
  runs `python3 -m feedfs.top` against the mount;
- `make install DESTDIR=...` (the package's part of it) puts the package,
  every module of python/feedfs/, in a directory of /usr/bin/python3's
  sys.path, where the same checks pass.

pip builds in the directory it is given, so it is given a copy of
python/: the source tree (read-only under distcheck) is left as it was.
"""

import json
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
except ImportError:
    fflib.skip("numpy is missing (Debian: python3-numpy)")
r = subprocess.run([fflib.PY, "-c", "import venv, ensurepip, setuptools, "
                    "wheel"], stderr=subprocess.PIPE)
if r.returncode != 0:
    fflib.skip("%s cannot make a venv and build a wheel (Debian: "
               "python3-venv python3-setuptools python3-wheel): %s"
               % (fflib.PY, r.stderr.decode().strip().splitlines()[-1]))
HAVE_TORCH = subprocess.call([fflib.PY, "-c", "import torch"],
                             stderr=subprocess.DEVNULL) == 0

t = fflib.Test()
# The environment of an ordinary shell: nothing that points Python or pip
# at the source tree or at another index.
env = {k: v for k, v in os.environ.items()
       if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
           PIP_NO_CACHE_DIR="1", PYTHONDONTWRITEBYTECODE="1")
outside = t.path("elsewhere")  # the working directory: no feedfs here
os.makedirs(outside)


def run(cmd, timeout=600):
    r = subprocess.run(cmd, cwd=outside, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace")


def config_version():
    with open(os.path.join(fflib.BUILDDIR, "config.h")) as f:
        m = re.search(r'#define PACKAGE_VERSION "([^"]*)"', f.read())
    check(m, "no PACKAGE_VERSION in config.h")
    return m.group(1)


data = t.gen(t.path("data"), n=24, classes=3, seed=3)
cfg = t.config(t.path("feedfs.conf"), data, {"train": {}}, threads=2)
m = fflib.Mount(t, cfg, t.path("mnt")).__enter__()
batch = os.path.join(m.mnt, "train", "epoch-0001", "batch-000002")
want_x, want_y = np.load(batch + ".npy"), np.load(batch + ".labels.npy")

# What the installed package does, run by the interpreter under test:
# where feedfs comes from, its version, a batch as the Job reads it, and
# feedfs.torch where torch is there.
PROBE = r"""
import json, sys
import numpy as np
import feedfs
job = feedfs.Job(sys.argv[1] + "/train")
for b, (x, y) in enumerate(job.epoch(1)):
    if b == 2:
        break
np.save(sys.argv[2] + "/x.npy", x)
np.save(sys.argv[2] + "/y.npy", y)
out = {"file": feedfs.__file__, "version": feedfs.__version__}
if sys.argv[3] == "torch":
    import feedfs.torch
    out["torch"] = feedfs.torch.__file__
print(json.dumps(out))
"""


def check_interpreter(py_c, py_m, where, what):
    """Outside the source tree, py_c + [code, args...] (a Python's -c) and
    py_m + [args...] (its -m feedfs.top): feedfs from where, a batch equal
    to the file, feedfs.top's frame of the mount."""
    got = t.path("got-" + what)
    os.makedirs(got)
    rc, out = run(py_c + [PROBE, m.mnt, got,
                   "torch" if HAVE_TORCH else "-"])
    check(rc == 0, "%s: the probe failed (%d):\n%s" % (what, rc, out))
    info = json.loads(out.strip().splitlines()[-1])
    where = os.path.realpath(where)
    check(os.path.realpath(info["file"]).startswith(where + os.sep),
          "%s: feedfs imported from %s, not from %s" % (what, info["file"],
                                                        where))
    check(not os.path.realpath(info["file"]).startswith(
        os.path.realpath(fflib.SRCDIR) + os.sep),
          "%s: feedfs imported from the source tree" % what)
    check(info["version"] == config_version(),
          "%s: feedfs %s, configure says %s"
          % (what, info["version"], config_version()))
    if HAVE_TORCH:
        check(os.path.realpath(info["torch"]).startswith(where + os.sep),
              "%s: feedfs.torch from %s" % (what, info["torch"]))
    x, y = np.load(os.path.join(got, "x.npy")), np.load(
        os.path.join(got, "y.npy"))
    check(x.shape == want_x.shape and x.dtype == want_x.dtype and
          np.array_equal(x, want_x) and np.array_equal(y, want_y),
          "%s: the batch read differs from the file's np.load" % what)
    rc, out = run(py_m + ["--count", "1", "-n", "0.2", m.mnt], timeout=120)
    check(rc == 0 and "feedfs.top  " in out and
          any(line.split()[:1] == ["train"] for line in out.splitlines()),
          "%s: python3 -m feedfs.top: status %d\n%s" % (what, rc, out))
    log("%s: feedfs %s from %s; batch equal to np.load; feedfs.top drew "
        "its frame" % (what, info["version"], os.path.dirname(info["file"])))


# ---- pip install ./python into a venv ---------------------------------------
venv = t.path("venv")
rc, out = run([fflib.PY, "-m", "venv", "--system-site-packages", venv])
check(rc == 0, "python3 -m venv failed (%d):\n%s" % (rc, out))
vpy = os.path.join(venv, "bin", "python")
src = t.path("src", "python")
shutil.copytree(os.path.join(fflib.SRCDIR, "python"), src,
                ignore=shutil.ignore_patterns("__pycache__", "build",
                                              "*.egg-info"))
check(os.path.exists(os.path.join(src, "pyproject.toml")),
      "python/pyproject.toml is missing")
spec = src + ("[torch]" if HAVE_TORCH else "")
rc, out = run([vpy, "-m", "pip", "install", "--no-index",
               "--no-build-isolation", spec])
check(rc == 0, "pip install %s failed (%d):\n%s" % (spec, rc, out))
rc, site = run([vpy, "-I", "-c", "import sysconfig; "
                "print(sysconfig.get_path('purelib'))"])
check(rc == 0, "the venv's purelib: %s" % site)
site = site.strip()
check(os.path.realpath(site).startswith(os.path.realpath(venv) + os.sep),
      "the venv's purelib %s is outside it" % site)
rc, out = run([vpy, "-m", "pip", "show", "feedfs"])
check(rc == 0 and re.search(r"^Requires: numpy$", out, re.M),
      "pip show feedfs: numpy is not its requirement:\n%s" % out)
log("pip install %s: installed in %s%s" % (
    os.path.basename(spec), site, " with the torch extra" if HAVE_TORCH
    else " (no torch here: the extra not tried)"))
check_interpreter([vpy, "-I", "-c"], [vpy, "-I", "-m", "feedfs.top"], site,
                  "venv")

# ---- make install DESTDIR=... for /usr/bin/python3 ---------------------------
# The package's part of `make install` (nothing to build for it).
dest = t.path("dest")
menv = {k: v for k, v in env.items()
        if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
r = subprocess.run(["make", "-s", "-C", fflib.BUILDDIR,
                    "install-dist_feedfspyDATA", "DESTDIR=" + dest],
                   env=menv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   timeout=300)
check(r.returncode == 0, "make install-dist_feedfspyDATA DESTDIR=%s: %d\n%s"
      % (dest, r.returncode, r.stdout.decode()))
inits = [os.path.join(d, "__init__.py") for d, _, files in os.walk(dest)
         if os.path.basename(d) == "feedfs" and "__init__.py" in files]
check(len(inits) == 1, "make install put feedfs/__init__.py in %d places: %s"
      % (len(inits), inits))
pkgdir = os.path.dirname(os.path.dirname(inits[0]))
installed = "/" + os.path.relpath(pkgdir, dest)
# Every module of python/feedfs/ (Makefile.am lists them one by one).
for f in sorted(os.listdir(os.path.join(fflib.SRCDIR, "python", "feedfs"))):
    if f.endswith(".py"):
        check(os.path.exists(os.path.join(pkgdir, "feedfs", f)),
              "make install: feedfs/%s missing in %s (Makefile.am's "
              "dist_feedfspy_DATA)" % (f, pkgdir))
rc, out = run([fflib.PY, "-I", "-c", "import sys; print('\\n'.join(sys.path))"])
syspath = [os.path.realpath(p) for p in out.split("\n") if p]
if os.path.realpath(installed) not in syspath:
    # --prefix or --with-pythondir outside the interpreter's path: the
    # package is meant to need PYTHONPATH then (m4/ff_python.m4).
    log("make install: %s is not on %s's sys.path (configured for another "
        "prefix): that part not checked" % (installed, fflib.PY))
    m.umount()
    sys.exit(0)
log("make install DESTDIR: the package in %s, which %s searches"
    % (installed, fflib.PY))
# The DESTDIR copy stands in for the installed one: /usr/bin/python3 -I
# with the DESTDIR directory in place of the installed one on sys.path.
PRELUDE = ("import os, runpy, sys; "
           "i = [os.path.realpath(p) for p in sys.path].index(%r); "
           "sys.path[i] = %r; " % (os.path.realpath(installed), pkgdir))
check_interpreter([fflib.PY, "-I", "-c", PRELUDE + "exec(sys.argv.pop(1))"],
                  [fflib.PY, "-I", "-c", PRELUDE + "sys.argv[0] = "
                   "'feedfs.top'; runpy.run_module('feedfs.top', "
                   "run_name='__main__', alter_sys=True)"],
                  pkgdir, "make install")
m.umount()
sys.exit(0)
