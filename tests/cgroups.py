"""cgroups - real cgroups for the tests of issue 40 (what a job is given):
made below the test process's own groups, as Slurm and Kubernetes make a
job's, with the limits a test asks for, and removed at exit.

    v = cgroups.Version("v1")          # or "v2"; v.unavailable(): why not
    g = v.group("mem", memory=512 << 20, inner=True)
        # the limit on g, the processes in g/inner (no limit of its own):
        # the nearest limited ancestor is what counts
    g = v.group("cpu", quota=(50000, 100000))   # 0.5 CPU
    g = v.group("one", cpus="0")                # a cpuset of one CPU
    subprocess.Popen(..., preexec_fn=g.enter)   # the child joins first
    g.oom_kills(), g.usage(), g.peak(), g.anon(), g.procs()

v1: a hierarchy per controller (memory, cpu, cpuset), as bench/scale
uses one; v2: the unified hierarchy, where the controllers must be
enabled in the test's own group (possible when it is the root, or when
they already are).  Names are feedfs-test.PID.NAME; a group left behind
by a killed test is only a directory to remove.
"""

import atexit
import os
import time

_made = []  # directories made, removed in reverse order at exit


def _read(path):
    with open(path) as f:
        return f.read()


def _write(path, value):
    with open(path, "w") as f:
        f.write("%s\n" % value)


def _unescape(s):
    out, i = "", 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) and s[i + 1:i + 4].isdigit():
            out += chr(int(s[i + 1:i + 4], 8))
            i += 4
        else:
            out += s[i]
            i += 1
    return out


def _mount_of(ctrl):
    """(mount point, root) of the hierarchy of ctrl (None: cgroup2)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            a, _, b = line.partition(" - ")
            fa, fb = a.split(), b.split()
            if len(fa) < 5 or len(fb) < 3:
                continue
            if ctrl is None and fb[0] == "cgroup2":
                return _unescape(fa[4]), _unescape(fa[3])
            if ctrl is not None and fb[0] == "cgroup" and \
                    ctrl in fb[2].split(","):
                return _unescape(fa[4]), _unescape(fa[3])
    return None, None


def _own_path(ctrl):
    """This process's group for ctrl (None: the v2 line)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            hid, ctrls, path = line.rstrip("\n").split(":", 2)
            if ctrl is None and hid == "0" and ctrls == "":
                return path
            if ctrl is not None and ctrl in ctrls.split(","):
                return path
    return None


def _own_dir(ctrl):
    mnt, root = _mount_of(ctrl)
    path = _own_path(ctrl)
    if mnt is None or path is None:
        return None
    if root != "/":
        if not (path == root or path.startswith(root + "/")):
            return None
        path = path[len(root):]
    return mnt + path.rstrip("/") if path != "/" else mnt


def _cleanup():
    for d, home in reversed(_made):
        # Whatever still runs there goes back to where the test was.
        for _ in range(50):
            try:
                pids = _read(os.path.join(d, "cgroup.procs")).split()
            except OSError:
                break
            for pid in pids:
                try:
                    _write(os.path.join(home, "cgroup.procs"), pid)
                except OSError:
                    pass
            try:
                os.rmdir(d)
                break
            except OSError:
                time.sleep(0.1)


atexit.register(_cleanup)


class Group:
    """A group (v1: one directory per controller used) that processes
    enter; limits on its top, processes in its inner directory."""

    def __init__(self, version, dirs, top):
        self.version = version
        self.dirs = dirs  # controller -> the directory processes enter
        self.top = top    # controller -> the directory with the limits

    def enter(self, pid=0):
        """Move pid (0: this process, e.g. from preexec_fn) in."""
        for d in dict.fromkeys(self.dirs.values()):
            _write(os.path.join(d, "cgroup.procs"), pid or os.getpid())

    def _mem(self, name, top=True):
        return os.path.join((self.top if top else self.dirs)["memory"], name)

    def procs(self):
        out = set()
        for d in self.dirs.values():
            out.update(int(p) for p in _read(
                os.path.join(d, "cgroup.procs")).split())
        return out

    def oom_kills(self):
        """OOM kills in the group and below it (v1 counts them in the
        killed process's own group, v2 in every group above it too)."""
        if self.version == "v1":
            files = [os.path.join(d, "memory.oom_control") for d in
                     dict.fromkeys((self.top["memory"],
                                    self.dirs["memory"]))]
        else:
            files = [self._mem("memory.events")]
        n = 0
        for path in files:
            for line in _read(path).splitlines():
                k, _, v = line.partition(" ")
                if k == "oom_kill":
                    n += int(v)
        return n

    def usage(self):
        """Bytes charged now (memory.usage_in_bytes, memory.current)."""
        return int(_read(self._mem("memory.usage_in_bytes"
                                   if self.version == "v1"
                                   else "memory.current")))

    def peak(self):
        """The most bytes charged (page cache included), or None."""
        name = ("memory.max_usage_in_bytes" if self.version == "v1"
                else "memory.peak")
        try:
            return int(_read(self._mem(name)))
        except OSError:
            return None

    def anon(self):
        """Anonymous bytes charged now (memory.stat rss / anon)."""
        key = "total_rss" if self.version == "v1" else "anon"
        for line in _read(self._mem("memory.stat")).splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
        return 0


class Version:
    """cgroup v1 or v2 as mounted here, for groups below this process's."""

    CTRLS = ("memory", "cpu", "cpuset")

    def __init__(self, version):
        self.version = version
        self.why = None
        self.home = {}
        if os.geteuid() != 0:
            self.why = "not root: cannot make cgroups"
            return
        if version == "v1":
            for c in self.CTRLS:
                d = _own_dir(c)
                if d is None or not os.path.isdir(d):
                    self.why = "no cgroup v1 %s hierarchy here" % c
                    return
                self.home[c] = d
        else:
            d = _own_dir(None)
            if d is None:
                self.why = "no cgroup v2 hierarchy mounted"
                return
            have = _read(os.path.join(d, "cgroup.controllers")).split()
            missing = [c for c in self.CTRLS if c not in have]
            if missing:
                self.why = ("cgroup v2 at %s has no %s controller (cgroup "
                            "v1 holds it here)" % (d, ", ".join(missing)))
                return
            sub = _read(os.path.join(d, "cgroup.subtree_control")).split()
            if any(c not in sub for c in self.CTRLS):
                if _own_path(None) != "/":
                    self.why = ("the test's cgroup v2 group %s has "
                                "processes: no controller can be enabled "
                                "below it" % d)
                    return
                _write(os.path.join(d, "cgroup.subtree_control"),
                       " ".join("+" + c for c in self.CTRLS))
            for c in self.CTRLS:
                self.home[c] = d

    def unavailable(self):
        return self.why

    def _mkdir(self, parent, name, home):
        d = os.path.join(parent, name)
        os.mkdir(d)
        _made.append((d, home))
        return d

    def group(self, name, memory=None, quota=None, cpus=None, inner=False):
        name = "feedfs-test.%d.%s" % (os.getpid(), name)
        used = []
        if memory is not None:
            used.append("memory")
        if quota is not None:
            used.append("cpu")
        if cpus is not None:
            used.append("cpuset")
        dirs, top = {}, {}
        for c in used:
            if c in top:
                continue
            if self.version == "v2" and top:
                d = next(iter(top.values()))
            else:
                d = self._mkdir(self.home[c], name, self.home[c])
            top[c] = d
        for c in used:
            d = top[c]
            if c == "memory":
                _write(os.path.join(d, "memory.limit_in_bytes"
                                    if self.version == "v1"
                                    else "memory.max"), memory)
            elif c == "cpu":
                if self.version == "v1":
                    _write(os.path.join(d, "cpu.cfs_period_us"), quota[1])
                    _write(os.path.join(d, "cpu.cfs_quota_us"), quota[0])
                else:
                    _write(os.path.join(d, "cpu.max"), "%d %d" % quota)
            elif c == "cpuset":
                if self.version == "v1":
                    _write(os.path.join(d, "cpuset.mems"), _read(
                        os.path.join(self.home[c], "cpuset.mems")).strip())
                _write(os.path.join(d, "cpuset.cpus"), cpus)
        for c in used:
            d = top[c]
            if inner:
                sub = os.path.join(d, "inner")
                if not os.path.isdir(sub):
                    if self.version == "v2":
                        _write(os.path.join(d, "cgroup.subtree_control"),
                               " ".join("+" + x for x in used))
                    self._mkdir(d, "inner", self.home[c])
                    if c == "cpuset" and self.version == "v1":
                        for f in ("cpuset.mems", "cpuset.cpus"):
                            _write(os.path.join(sub, f), _read(
                                os.path.join(d, f)).strip())
                d = sub
            dirs[c] = d
        return Group(self.version, dirs, top)
