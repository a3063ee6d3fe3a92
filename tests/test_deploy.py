#!/usr/bin/env python3
"""test_deploy - the deployment examples of examples/deploy (issue 40, 5),
checked with the parsers that exist here and run where they can be:

 (a) kubernetes-daemonset.yaml parsed as YAML (python3-yaml): a ConfigMap
     and a DaemonSet whose container is privileged, has /dev/fuse from a
     CharDevice hostPath, the cache on a hostPath at the config's
     cache_dir, the mountpoint with mountPropagation: Bidirectional; its
     feedfs.conf (the dataset's path put in place) is accepted by feedfs
     --check, and the container's command line mounts it for real, with
     its node.conf, and serves its metrics;
 (b) slurm-prolog.sh and slurm-epilog.sh: bash -n and shellcheck, then run
     as Slurm runs them (root, SLURM_JOB_ID, SLURM_JOB_UID=65534): the
     prolog mounts for uid 65534 (user_id=65534, read as that user), the
     epilog unmounts and the daemon ends.
No Kubernetes and no Slurm run here: what they would do with these files
beyond that is not tested.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, fail, log  # noqa: E402

try:
    import yaml
except ImportError:
    fflib.skip("no python3-yaml")

t = fflib.Test()
ex = os.path.join(fflib.SRCDIR, "examples", "deploy")
data = t.gen(t.path("data"), n=12, classes=2, seed=6)

# ---- (a) the DaemonSet -------------------------------------------------------
with open(os.path.join(ex, "kubernetes-daemonset.yaml")) as f:
    docs = [d for d in yaml.safe_load_all(f) if d]
kinds = {d["kind"]: d for d in docs}
check(set(kinds) == {"ConfigMap", "DaemonSet"}, "(a) kinds %s" % list(kinds))
cm, ds = kinds["ConfigMap"], kinds["DaemonSet"]
check(ds["apiVersion"] == "apps/v1", "(a) apiVersion %s" % ds["apiVersion"])
spec = ds["spec"]["template"]["spec"]
check(ds["spec"]["selector"]["matchLabels"].items() <=
      ds["spec"]["template"]["metadata"]["labels"].items(),
      "(a) the selector does not match the template's labels")
(c,) = spec["containers"]
check(c["securityContext"].get("privileged") is True, "(a) not privileged")
vols = {v["name"]: v for v in spec["volumes"]}
mounts = {m["name"]: m for m in c["volumeMounts"]}
check(set(mounts) <= set(vols), "(a) mounts of no volume: %s" % (set(mounts) - set(vols)))
byp = {m["mountPath"]: vols[m["name"]] for m in c["volumeMounts"]}
check(byp["/dev/fuse"]["hostPath"] == {"path": "/dev/fuse", "type": "CharDevice"},
      "(a) /dev/fuse: %s" % byp.get("/dev/fuse"))
cmd = c["command"]
check(cmd[0] == "feedfs" and "-f" in cmd, "(a) command %s" % cmd)
mnt_path, conf_path = cmd[-1], cmd[-2]
(mm,) = [m for m in c["volumeMounts"] if m["mountPath"] == mnt_path]
check(mm.get("mountPropagation") == "Bidirectional",
      "(a) %s is mounted without Bidirectional propagation" % mnt_path)
check("hostPath" in vols[mm["name"]], "(a) the mountpoint is not the host's")
(cfgm,) = [m for m in c["volumeMounts"] if conf_path.startswith(m["mountPath"] + "/")]
check(vols[cfgm["name"]]["configMap"]["name"] == cm["metadata"]["name"] and
      os.path.basename(conf_path) in cm["data"], "(a) %s is not the ConfigMap's" % conf_path)
conf_text = cm["data"][os.path.basename(conf_path)]
cache_dir = [line.split("=", 1)[1].strip() for line in conf_text.splitlines()
             if line.strip().startswith("cache_dir")][0]
check("hostPath" in byp[cache_dir], "(a) cache_dir %s is not on a hostPath" % cache_dir)
env = {e["name"]: e["value"] for e in c.get("env", [])}
node_path = env["FEEDFS_NODE_CONF"]
check(os.path.basename(node_path) in cm["data"], "(a) FEEDFS_NODE_CONF %s" % node_path)
check(any(p["containerPort"] == 9464 for p in c["ports"]), "(a) no metrics port")
log("(a) YAML: %d documents, privileged, /dev/fuse, cache %s on the host, %s "
    "Bidirectional" % (len(docs), cache_dir, mnt_path))

# The ConfigMap's config, the dataset and the cache put here, as feedfs reads it.
root = [line.split("=", 1)[1].strip() for line in conf_text.splitlines()
        if line.strip().startswith("root")][0]
conf = t.path("feedfs.conf")
with open(conf, "w") as f:
    f.write(conf_text.replace(root, data).replace(cache_dir, t.path("cache")))
r = subprocess.run([fflib.FEEDFS, "--check", conf], stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, timeout=300)
check(r.returncode == 0, "(a) feedfs --check of the ConfigMap's config: %s" % r.stdout.decode())
node = t.path("node.conf")
with open(node, "w") as f:
    f.write(cm["data"][os.path.basename(node_path)])
os.environ["FEEDFS_NODE_CONF"] = node
port = fflib.free_port()
opts = cmd[cmd.index("-o") + 1].replace("0.0.0.0:9464", "127.0.0.1:%d" % port)
with fflib.Mount(t, conf, t.path("mnt"), "-o", opts) as m:
    check(os.path.getsize(m.p("README")) > 0, "(a) no README")
    fflib.read_file(m.p("train", "epoch-0000", "batch-000000.npy"))
    r = subprocess.run(["curl", "-sS", "-m", "20", "http://127.0.0.1:%d/metrics" % port],
                       stdout=subprocess.PIPE)
    check(b"feedfs_build_info" in r.stdout, "(a) no metrics from -o %s" % opts)
del os.environ["FEEDFS_NODE_CONF"]
log("(a) its feedfs.conf passes feedfs --check; the command line (-o %s) mounts and serves" % opts)

# ---- (b) Slurm's prolog and epilog -------------------------------------------
pro, epi = (os.path.join(ex, n) for n in ("slurm-prolog.sh", "slurm-epilog.sh"))
for s in (pro, epi):
    r = subprocess.run(["bash", "-n", s], stderr=subprocess.PIPE)
    check(r.returncode == 0, "(b) bash -n %s: %s" % (s, r.stderr.decode()))
    if shutil.which("shellcheck"):
        r = subprocess.run(["shellcheck", s], stdout=subprocess.PIPE)
        check(r.returncode == 0, "(b) shellcheck %s:\n%s" % (s, r.stdout.decode()))
if os.geteuid() != 0:
    log("(b) bash -n and shellcheck only: not root")
    log("ok")
    sys.exit(0)
os.chmod(t.dir, 0o711)
for d, _, files in os.walk(data):
    os.chmod(d, 0o755)
    for n in files:
        os.chmod(os.path.join(d, n), 0o644)
ncache = t.path("nobody")
os.makedirs(ncache)
os.chown(ncache, 65534, 65534)
jconf = t.config(t.path("job.conf"), data, {"train": dict(epochs=1)},
                 cache_dir=ncache + "/cache", threads=1)
os.chmod(jconf, 0o644)
job = "t%d" % os.getpid()
run = t.path("run")
env = dict(os.environ, SLURM_JOB_ID=job, SLURM_JOB_UID="65534",
           SLURM_JOB_GID="65534", FEEDFS_CONF=jconf, FEEDFS_MNT_ROOT=run,
           FEEDFS=fflib.FEEDFS)
mnt = os.path.join(run, job)
try:
    r = subprocess.run(["bash", pro], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)
    check(r.returncode == 0, "(b) the prolog: rc %d: %s" % (r.returncode, r.stdout.decode()))
    with open("/proc/self/mountinfo") as f:
        mi = [line for line in f if line.split()[4] == mnt]
    check(len(mi) == 1 and "user_id=65534" in mi[0], "(b) mountinfo: %s" % mi)
    r = subprocess.run(["cat", mnt + "/train/info.json"], user=65534, group=65534,
                       extra_groups=[], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(r.returncode == 0 and b"batch_size" in r.stdout,
          "(b) uid 65534 reads no info.json: %s" % r.stderr.decode())
    logf = os.path.join(run, job + ".log.d", "feedfs.log")
    with open(logf) as f:  # the daemon's pid: the "serving" line's
        line = [x for x in f if " serving " in x][-1]
        pid = int(line.split("feedfs[", 1)[1].split("]", 1)[0])
    check(os.path.exists("/proc/%d" % pid), "(b) no daemon %d" % pid)
    r = subprocess.run(["bash", epi], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    check(r.returncode == 0, "(b) the epilog: %s" % r.stdout.decode())
    check(not fflib._mounted(mnt) and not os.path.exists(mnt), "(b) %s left (mounted %s): %s" % (mnt, fflib._mounted(mnt), r.stdout.decode()))
    for _ in range(300):
        if not os.path.exists("/proc/%d" % pid):
            break
        time.sleep(0.1)
    else:
        fail("(b) the daemon %d still runs after the epilog" % pid)
finally:
    fflib._force_umount(mnt)
log("(b) bash -n, shellcheck; the prolog mounted for uid 65534 (pid %d), the "
    "epilog unmounted and the daemon ended" % pid)
log("ok")
