# lib.sh - shared helpers of the real-mount shell tests (sourced, not run).
#
# The test runs as automake runs it: FF_BUILDDIR and FF_SRCDIR are absolute
# paths of the build and source trees.  Each test gets a temporary directory
# ($T) that an EXIT trap removes after unmounting everything ff_mount
# mounted and stopping the daemons.  Exit 77 means "skipped" (no FUSE here).
#
#   ff_mount CONFIG MNT [feedfs options]  mount and wait until it serves
#   ff_umount MNT                         fusermount3 -u, daemon must exit 0
#   ff_term MNT                           the same through SIGTERM
#   ff_config FILE ROOT [mount key=value ...]   [mount] and [dataset data]
#   ff_job FILE NAME [key=value ...]      append a [job NAME] section
#   ff_ref [--rank R --world W] CONFIG JOB EPOCH OUTDIR
#   ff_cmp_tree REFDIR DIR                same file names, same bytes
#   ff_errno ERRNAME PATH                 stat(PATH) fails with ERRNAME

set -eu
set -o pipefail

: "${FF_BUILDDIR:=$(pwd)}"
: "${FF_SRCDIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
FEEDFS=$FF_BUILDDIR/feedfs
FFREF=$FF_BUILDDIR/tests/feedfs-ref
GENJPEGS=$FF_BUILDDIR/tests/gen-jpegs
PY=/usr/bin/python3
FF_TEST=$(basename "$0" .sh)

ff_log() { echo "$FF_TEST: $*"; }
ff_skip() { echo "$FF_TEST: SKIP: $*"; exit 77; }
ff_fail() { echo "$FF_TEST: FAIL: $*" >&2; exit 1; }

for _b in "$FEEDFS" "$FFREF" "$GENJPEGS"; do
	[ -x "$_b" ] || ff_fail "$_b is not built (run make check)"
done
[ -x "$PY" ] || ff_skip "$PY is missing"
[ -c /dev/fuse ] || ff_skip "/dev/fuse is missing"
command -v fusermount3 >/dev/null 2>&1 || ff_skip "fusermount3 is missing"

T=$(mktemp -d "${TMPDIR:-/tmp}/feedfs-$FF_TEST.XXXXXX")
declare -A FF_PID=() FF_LOGF=()
FF_NLOG=0

# Detach MNT however we can (used by the EXIT trap only).
ff_force_umount() {
	local mnt=$1
	mountpoint -q "$mnt" 2>/dev/null || return 0
	fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null ||
		umount -l "$mnt" 2>/dev/null || true
}

ff_cleanup() {
	local rc=$? mnt pid
	set +e
	for mnt in "${!FF_PID[@]}"; do
		ff_force_umount "$mnt"
		pid=${FF_PID[$mnt]}
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null
			for _ in $(seq 50); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			kill -KILL "$pid" 2>/dev/null
		fi
		wait "$pid" 2>/dev/null
	done
	# Never recurse into a mount that is still there.
	if ! grep -qF " $T" /proc/self/mounts; then
		rm -rf --one-file-system "$T"
	else
		echo "$FF_TEST: warning: $T still has a mount; left in place" >&2
	fi
	exit "$rc"
}
trap ff_cleanup EXIT

# ff_mount CONFIG MNT [options]: start `feedfs -f [options] CONFIG MNT` and
# return once MNT/README can be stat'ed through the mount (the daemon
# answers).  The log goes to $FF_LOG (also kept in FF_LOGF[MNT]).
ff_mount() {
	local cfg=$1 mnt=$2 pid i rc
	shift 2
	mkdir -p "$mnt"
	mnt=$(cd "$mnt" && pwd -P)
	FF_NLOG=$((FF_NLOG + 1))
	FF_LOG=$T/feedfs.$FF_NLOG.log
	"$FEEDFS" -f "$@" "$cfg" "$mnt" >"$FF_LOG" 2>&1 &
	pid=$!
	FF_PID[$mnt]=$pid
	FF_LOGF[$mnt]=$FF_LOG
	for i in $(seq 300); do
		if mountpoint -q "$mnt" && stat "$mnt/README" >/dev/null 2>&1; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			rc=0
			wait "$pid" || rc=$?
			unset "FF_PID[$mnt]"
			if grep -qiE 'permission denied|operation not permitted|fuse: device not found|failed to open /dev/fuse' "$FF_LOG"; then
				cat "$FF_LOG"
				ff_skip "cannot mount FUSE file systems here"
			fi
			echo "---- feedfs log ($FF_LOG)"
			cat "$FF_LOG"
			ff_fail "feedfs exited with status $rc before serving $mnt"
		fi
		sleep 0.1
	done
	echo "---- feedfs log ($FF_LOG)"
	cat "$FF_LOG"
	ff_fail "$mnt not ready after 30 s"
}

# Wait for the daemon of mnt to exit; its status must be 0.
ff_wait_daemon() {
	local mnt=$1 pid rc=0 i
	pid=${FF_PID[$mnt]}
	for i in $(seq 300); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && ff_fail "feedfs ($pid) still runs after unmounting $mnt"
	wait "$pid" || rc=$?
	unset "FF_PID[$mnt]"
	if [ "$rc" -ne 0 ]; then
		echo "---- feedfs log (${FF_LOGF[$mnt]})"
		cat "${FF_LOGF[$mnt]}"
		ff_fail "feedfs exited with status $rc after unmounting $mnt"
	fi
	mountpoint -q "$mnt" && ff_fail "$mnt is still mounted"
	return 0
}

# ff_umount MNT: fusermount3 -u (retried while busy), daemon exits 0.
ff_umount() {
	local mnt i
	mnt=$(cd "$1" && pwd -P)
	for i in $(seq 50); do
		fusermount3 -u "$mnt" 2>"$T/umount.err" && break
		sleep 0.2
	done
	mountpoint -q "$mnt" && { cat "$T/umount.err"; ff_fail "cannot unmount $mnt"; }
	ff_wait_daemon "$mnt"
}

# ff_term MNT: SIGTERM to the daemon: it must unmount and exit 0.
ff_term() {
	local mnt
	mnt=$(cd "$1" && pwd -P)
	kill -TERM "${FF_PID[$mnt]}"
	ff_wait_daemon "$mnt"
}

# ff_config FILE ROOT [key=value ...]: [mount] (cache in $T, small memory)
# and [dataset data] at ROOT.  key=value pairs override the [mount] keys.
ff_config() {
	local file=$1 root=$2 kv k
	shift 2
	declare -A m=([cache_dir]="$T/cache" [cache_size]=1G [threads]=2
		[memory]=256M [readahead]=2)
	for kv in "$@"; do
		m[${kv%%=*}]=${kv#*=}
	done
	{
		echo "# written by $FF_TEST"
		echo "[mount]"
		for k in cache_dir cache_size threads memory readahead; do
			echo "$k = ${m[$k]}"
		done
		echo
		echo "[dataset data]"
		echo "root = $root"
	} >"$file"
}

# ff_job FILE NAME [key=value ...]: a job over dataset data; every key is
# written (defaults below, overridden by the arguments).
ff_job() {
	local file=$1 name=$2 kv k
	shift 2
	local keys="dataset batch_size epochs seed shuffle drop_last order pipeline dtype layout on_error"
	declare -A j=([dataset]=data [batch_size]=8 [epochs]=2 [seed]=7
		[shuffle]=yes [drop_last]=no [order]=strict
		[pipeline]="decode resize(72) cache random_resized_crop(64) flip(0.5) normalize(imagenet)"
		[dtype]=float32 [layout]=CHW [on_error]=fail)
	for kv in "$@"; do
		k=${kv%%=*}
		case " $keys " in *" $k "*) ;; *) keys="$keys $k" ;; esac
		j[$k]=${kv#*=}
	done
	{
		echo
		echo "[job $name]"
		for k in $keys; do
			echo "$k = ${j[$k]}"
		done
	} >>"$file"
}

# ff_ref [--rank R --world W] CONFIG JOB EPOCH OUTDIR
ff_ref() {
	mkdir -p "${@: -1}"
	"$FFREF" "$@" || ff_fail "feedfs-ref $* failed"
}

# ff_cmp_tree REFDIR DIR: DIR lists exactly REFDIR's files, every one has
# the reference's size at stat time (before it is read), and equal bytes.
ff_cmp_tree() {
	local ref=$1 dir=$2 f
	diff <(cd "$ref" && ls) <(ls "$dir") >/dev/null ||
		ff_fail "$dir lists $(ls "$dir" | tr '\n' ' '), the reference $(cd "$ref" && ls | tr '\n' ' ')"
	for f in "$ref"/*; do
		f=$(basename "$f")
		[ "$(stat -c %s "$dir/$f")" = "$(stat -c %s "$ref/$f")" ] ||
			ff_fail "$dir/$f: size $(stat -c %s "$dir/$f"), reference $(stat -c %s "$ref/$f")"
		cmp "$ref/$f" "$dir/$f" || ff_fail "$dir/$f differs from the reference"
	done
}

# ff_errno ERRNAME PATH: stat(PATH) fails with errno ERRNAME (e.g. ENOENT).
ff_errno() {
	"$PY" - "$1" "$2" <<'EOF' || ff_fail "stat $2: expected $1"
import errno, os, sys
want, path = getattr(errno, sys.argv[1]), sys.argv[2]
try:
    os.stat(path)
except OSError as e:
    if e.errno == want:
        sys.exit(0)
    print("stat %s: %s" % (path, e), file=sys.stderr)
    sys.exit(1)
print("stat %s: succeeded" % path, file=sys.stderr)
sys.exit(1)
EOF
}

# ff_stat_value MNT NAME: the sum of NAME's samples in MNT/.feedfs/stats.
ff_stat_value() {
	awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $2 } END { print s + 0 }' "$1/.feedfs/stats"
}

# ff_run_bad NAME ARGS...: `feedfs -f ARGS` must exit 2 without mounting
# $M, saying something on stderr, which is left in $T/NAME.err.
ff_run_bad() {
	local name=$1 rc=0
	shift
	timeout -s TERM 20 "$FEEDFS" -f "$@" 2>"$T/$name.err" >/dev/null || rc=$?
	if mountpoint -q "$M"; then
		fusermount3 -u "$M" || umount -l "$M"
		ff_fail "$name: feedfs mounted (exit status $rc)"
	fi
	[ "$rc" -eq 2 ] || { cat "$T/$name.err"; ff_fail "$name: exit status $rc, expected 2"; }
	[ -s "$T/$name.err" ] || ff_fail "$name: no message on stderr"
}

# ff_gen DIR [gen-jpegs options]
ff_gen() {
	"$GENJPEGS" "$@" >/dev/null || ff_fail "gen-jpegs $* failed"
}
