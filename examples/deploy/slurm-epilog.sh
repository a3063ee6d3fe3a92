#!/bin/bash
# slurm-epilog.sh - unmount what slurm-prolog.sh mounted for the job
# (feedfs(8), DEPLOYMENT).  Slurm runs it as root when the job ends; the
# daemon (in the job's cgroup) exits once its mount is gone.
set -u

: "${SLURM_JOB_ID:?not run by Slurm: no SLURM_JOB_ID}"
root=${FEEDFS_MNT_ROOT:-/run/feedfs}
mnt=$root/$SLURM_JOB_ID

# The mount is the job's user's: root may not even stat its root, so
# mountinfo says whether it is there, and umount does not look into it
# (-c).  A reader still busy: detach lazily; the daemon ends when it goes.
if awk -v m="$mnt" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; then
	umount -c "$mnt" 2>/dev/null || umount -c -l "$mnt"
fi
rmdir "$mnt" 2>/dev/null
exit 0
