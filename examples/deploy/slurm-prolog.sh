#!/bin/bash
# slurm-prolog.sh - mount feedfs for a Slurm job's user, inside the job's
# cgroup (feedfs(8), DEPLOYMENT).  In slurm.conf:
#
#	Prolog=/etc/slurm/feedfs-prolog.sh
#	Epilog=/etc/slurm/feedfs-epilog.sh
#	PrologFlags=Alloc,Contain
#
# Contain runs the prolog in the job's extern step, so the daemon it
# starts is in the job's cgroup: feedfs takes its memory and workers from
# the job's limits, and the job's end (the cgroup's) ends it too.  Slurm
# runs the prolog as root with the job's SLURM_JOB_ID, SLURM_JOB_UID and
# SLURM_JOB_GID: feedfs mounts for that user (-o uid=,gid=), becoming the
# user before it reads the config or a byte of the dataset, and the mount
# is the user's (only the job's user reads it).  The job finds it at
# $FEEDFS_MNT_ROOT/$SLURM_JOB_ID (default /run/feedfs/JOBID).
#
# FEEDFS_CONF (the node's config of datasets, default /etc/feedfs/feedfs.conf),
# FEEDFS_MNT_ROOT and FEEDFS (the command) may be set in slurmd's
# environment.  A failure fails the prolog: Slurm drains the node and
# requeues the job, so it says why on stderr (slurmd's log).
set -eu

: "${SLURM_JOB_ID:?not run by Slurm: no SLURM_JOB_ID}"
: "${SLURM_JOB_UID:?no SLURM_JOB_UID}"
: "${SLURM_JOB_GID:?no SLURM_JOB_GID}"
conf=${FEEDFS_CONF:-/etc/feedfs/feedfs.conf}
root=${FEEDFS_MNT_ROOT:-/run/feedfs}
feedfs=${FEEDFS:-feedfs}
mnt=$root/$SLURM_JOB_ID

# Not in the job's cgroup (no PrologFlags=Contain): the daemon would be
# slurmd's, sized from the node.  Said, not refused.
if ! grep -q "job_$SLURM_JOB_ID" /proc/self/cgroup 2>/dev/null; then
	echo "feedfs prolog: not in job $SLURM_JOB_ID's cgroup (PrologFlags=Contain?): feedfs sizes itself from the node" >&2
fi

# The mountpoint is root's (the user cannot swap it); the mount on it will
# be the user's.
install -d -m 0755 -o root -g root "$root"
install -d -m 0755 -o root -g root "$mnt"
# The log: the user's, in the mount's directory tree's parent, kept after
# the job for a post-mortem; the cache: the user's own ~/.cache/feedfs.
install -d -m 0700 -o "$SLURM_JOB_UID" -g "$SLURM_JOB_GID" "$root/$SLURM_JOB_ID.log.d"
"$feedfs" -o "uid=$SLURM_JOB_UID,gid=$SLURM_JOB_GID,log=$root/$SLURM_JOB_ID.log.d/feedfs.log" \
	"$conf" "$mnt"
