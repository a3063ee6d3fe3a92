#!/usr/bin/env bash
# test_log_rotate.sh - the log file of -o log=FILE under logrotate, and
# -o log_level (issue 40, 5):
#  (a) logrotate (a real one, with a config of the test's: rename, then
#      postrotate's kill -HUP): the daemon opens FILE again, says so in
#      it, writes there from then on, and goes on serving (SIGHUP
#      unmounted nothing); the rotated file keeps what came before;
#  (b) a relative -o log=FILE is reopened in the directory it was given
#      in (the daemon works in /);
#  (c) -o log_level=warning drops info lines (the start's "serving"), in
#      FILE and in .feedfs/log; a level that is none is refused (exit 2).
. "$(dirname "$0")/lib.sh"

ff_gen "$T/data" --n 12 --classes 2 --seed 4
CFG=$T/feedfs.conf
ff_config "$CFG" "$T/data" threads=1
ff_job "$CFG" train epochs=1
M=$T/mnt

wait_for() { # FILE TEXT: until FILE holds TEXT (30 s at most)
	local i
	for i in $(seq 300); do
		grep -qF "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# ---- (a) logrotate's rename, then HUP ---------------------------------------
LOGF=$T/logs/feedfs.log
mkdir -p "$T/logs"
ff_mount "$CFG" "$M" -o "log=$LOGF"
pid=${FF_PID[$(cd "$M" && pwd -P)]}
wait_for "$LOGF" "serving $CFG" || ff_fail "no 'serving' line in $LOGF"
if command -v logrotate >/dev/null 2>&1; then
	cat >"$T/logrotate.conf" <<EOF
$LOGF {
	rotate 3
	nocompress
	missingok
	postrotate
		kill -HUP $pid
	endscript
}
EOF
	logrotate -f -s "$T/logrotate.state" "$T/logrotate.conf" ||
		ff_fail "logrotate failed"
	how="logrotate -f"
else
	mv "$LOGF" "$LOGF.1"
	kill -HUP "$pid"
	how="mv, kill -HUP (no logrotate here)"
fi
[ -f "$LOGF.1" ] || ff_fail "$how left no $LOGF.1"
wait_for "$LOGF" "reopened the log $LOGF" ||
	ff_fail "after $how no new $LOGF says it was reopened ($(ls "$T/logs"))"
grep -qF "serving $CFG" "$LOGF.1" || ff_fail "the rotated file lost the start"
grep -qF "reopened" "$LOGF.1" && ff_fail "the rotated file got the line after the HUP"
kill -0 "$pid" || ff_fail "SIGHUP ended the daemon"
stat "$M/train/info.json" >/dev/null || ff_fail "the mount stopped serving after SIGHUP"
# A second rotation: the file opened by the first HUP is the one renamed.
mv "$LOGF" "$LOGF.2"
kill -HUP "$pid"
wait_for "$LOGF" "reopened the log $LOGF" || ff_fail "the second HUP reopened nothing"
grep -qF "reopened the log" "$LOGF.2" || ff_fail "the first reopen's line is not in $LOGF.2"
ff_umount "$M"
ff_log "(a) $how, then a second rename and HUP: reopened each time, still serving"

# ---- (b) a relative log=FILE -------------------------------------------------
(cd "$T/logs" && ff_mount "$CFG" "$M" -o log=rel.log && echo "${FF_PID[$(cd "$M" && pwd -P)]}" >"$T/rel.pid")
# ff_mount ran in a subshell: the daemon is found by its pid file.
pid=$(cat "$T/rel.pid")
FF_PID[$(cd "$M" && pwd -P)]=$pid
mv "$T/logs/rel.log" "$T/logs/rel.log.1"
kill -HUP "$pid"
wait_for "$T/logs/rel.log" "reopened the log $T/logs/rel.log" ||
	ff_fail "a relative log=rel.log was not reopened in $T/logs"
fusermount3 -u "$M"
for i in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && ff_fail "the daemon of (b) still runs"
unset "FF_PID[$(cd "$M" && pwd -P)]"
ff_log "(b) log=rel.log reopened as $T/logs/rel.log"

# ---- (c) log_level ----------------------------------------------------------
ff_mount "$CFG" "$M" -o "log=$T/logs/warn.log,log_level=warning"
grep -q ' info: ' "$T/logs/warn.log" && ff_fail "log_level=warning wrote info lines: $(cat "$T/logs/warn.log")"
grep -q ' info: ' "$M/.feedfs/log" && ff_fail ".feedfs/log has info lines at log_level=warning"
ff_umount "$M"
ff_mount "$CFG" "$M" -o "log=$T/logs/info.log,log_level=info"
grep -q ' info: serving ' "$T/logs/info.log" || ff_fail "log_level=info: no info line"
ff_umount "$M"
rc=0
"$FEEDFS" -f -o log_level=loud "$CFG" "$M" >"$T/bad.out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q 'log_level=loud' "$T/bad.out" ||
	ff_fail "log_level=loud: rc $rc, $(cat "$T/bad.out")"
mountpoint -q "$M" && ff_fail "log_level=loud mounted"
ff_log "(c) warning drops info lines; log_level=loud refused: $(cat "$T/bad.out")"
ff_log "ok"
