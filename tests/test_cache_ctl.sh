#!/usr/bin/env bash
# test_cache_ctl.sh - the control socket and feedfs-cache against slow,
# foreign and stopped peers (issue 17 item 5), with a real mount:
#   - clients that connect to control.sock and send nothing, or one byte a
#     second, delay no other feedfs-cache request (each answered within a
#     1.5 s --timeout while they hold their connections) nor the unmount
#     (the daemon exits within 5 s of fusermount3 -u);
#   - a process of another user that reaches the socket (the directory
#     opened up for the test) is closed unanswered (SO_PEERCRED; as root);
#   - feedfs-cache stats against a SIGSTOPped owner returns within its
#     --timeout, with exit status 3 and a message that says so; after
#     SIGCONT the mount serves the reference's bytes and unmounts cleanly.
. "$(dirname "$0")/lib.sh"

FC=$FF_BUILDDIR/feedfs-cache
[ -x "$FC" ] || ff_fail "$FC is not built"
N=12
ff_gen "$T/data" --n $N --classes 2 --seed 23
CFG=$T/feedfs.conf
C=$T/cache
ff_config "$CFG" "$T/data" cache_dir="$C"
ff_job "$CFG" a epochs=1
ff_ref "$CFG" a 0 "$T/ref/a"

read_check() {
	rm -rf "$T/out"
	mkdir -p "$T/out"
	cp "$1"/a/epoch-0000/* "$T/out/"
	ff_cmp_tree "$T/ref/a" "$T/out"
}
ms() { echo $(($(date +%s%N) / 1000000)); }

# slow SOCKET IDLE: IDLE connections that send nothing and one that sends
# a byte a second (never a newline); prints "ready" once all are
# connected, then holds them for 60 s at most.
cat >"$T/slow.py" <<'PY'
import socket, sys, time
path, idle = sys.argv[1], int(sys.argv[2])
socks = []
for _ in range(idle + 1):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    socks.append(s)
print("ready", flush=True)
for _ in range(60):
    try:
        socks[-1].send(b"s")
    except OSError:
        pass
    time.sleep(1)
PY

M=$T/mnt
ff_mount "$CFG" "$M"
read_check "$M"
SOCK=$C/control.sock
[ -S "$SOCK" ] || ff_fail "no control socket at $SOCK"

# ---- slow clients hold nothing -------------------------------------------------
$PY "$T/slow.py" "$SOCK" 3 >"$T/slow.out" 2>&1 &
SLOW=$!
for i in $(seq 100); do grep -q ready "$T/slow.out" && break; sleep 0.05; done
grep -q ready "$T/slow.out" || { cat "$T/slow.out"; ff_fail "the slow clients did not connect"; }
for k in 1 2 3; do
	t0=$(ms)
	rc=0
	"$FC" --cache-dir "$C" --timeout 1.5 stats >"$T/fc.out" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] || { cat "$T/fc.out"; ff_fail "stats beside slow clients exited $rc"; }
	grep -q "^inserts" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "stats beside slow clients: no answer from the owner"; }
	ff_log "stats $k beside 4 slow clients: $(($(ms) - t0)) ms"
done

# ---- another user's process is closed unanswered ----------------------------------
if [ "$(id -u)" -eq 0 ]; then
	chmod 0711 "$C"
	chmod 0777 "$SOCK"
	rc=0
	$PY - "$SOCK" >"$T/foreign.out" 2>&1 <<'PY' || rc=$?
import os, socket, sys
# In the directory first: uid 65534 need not traverse $T's parents.
os.chdir(os.path.dirname(sys.argv[1]))
os.setgid(65534)
os.setuid(65534)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(os.path.basename(sys.argv[1]))
# Closed at once: the send or the read fails, or the read sees EOF.
try:
    s.sendall(b"stats\n")
    got = s.recv(4096)
except (BrokenPipeError, ConnectionResetError) as e:
    got = b""
print("reply: %r" % got)
sys.exit(1 if got else 0)
PY
	chmod 0700 "$C"
	chmod 0755 "$SOCK"
	[ "$rc" -eq 0 ] || { cat "$T/foreign.out"; ff_fail "a process of uid 65534 was answered on the control socket"; }
	ff_log "uid 65534: closed unanswered"
else
	ff_log "not root: the SO_PEERCRED check is not exercised"
fi

# ---- the unmount does not wait on the slow clients ------------------------------
kill -0 "$SLOW" 2>/dev/null || ff_fail "the slow clients exited early"
t0=$(ms)
fusermount3 -u "$M"
ff_wait_daemon "$(cd "$M" && pwd -P)"
el=$(($(ms) - t0))
ff_log "unmount beside 4 slow clients: $el ms"
[ "$el" -lt 5000 ] || ff_fail "the unmount took $el ms beside slow clients"
kill "$SLOW" 2>/dev/null || true
wait "$SLOW" 2>/dev/null || true

# ---- a stopped owner: a deadline, a message, exit status 3 ------------------------
ff_mount "$CFG" "$M"
MR=$(cd "$M" && pwd -P)
PID=${FF_PID[$MR]}
kill -STOP "$PID"
t0=$(ms)
rc=0
"$FC" --cache-dir "$C" --timeout 2 stats >"$T/fc.out" 2>"$T/fc.err" || rc=$?
el=$(($(ms) - t0))
kill -CONT "$PID"
[ "$rc" -eq 3 ] || { cat "$T/fc.out" "$T/fc.err"; ff_fail "stats against a stopped owner exited $rc, expected 3"; }
grep -q "did not answer" "$T/fc.err" || { cat "$T/fc.err"; ff_fail "no message about the owner not answering"; }
[ "$el" -lt 4000 ] || ff_fail "stats against a stopped owner took $el ms with --timeout 2"
ff_log "stats against a stopped owner: exit 3 after $el ms: $(cat "$T/fc.err")"
kill -STOP "$PID"
rc=0
"$FC" --cache-dir "$C" --timeout 1 clear >"$T/fc.out" 2>"$T/fc.err" || rc=$?
kill -CONT "$PID"
[ "$rc" -eq 3 ] || { cat "$T/fc.out" "$T/fc.err"; ff_fail "clear against a stopped owner exited $rc, expected 3"; }
rc=0
"$FC" --cache-dir "$C" --timeout 0 stats >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || ff_fail "--timeout 0 exited $rc, expected 2 (usage)"
# Continued, the owner serves and answers again.
read_check "$M"
"$FC" --cache-dir "$C" stats >"$T/fc.out" 2>&1 || { cat "$T/fc.out"; ff_fail "stats after SIGCONT"; }
grep -q "^inserts" "$T/fc.out" || { cat "$T/fc.out"; ff_fail "stats after SIGCONT: no answer from the owner"; }
ff_umount "$M"
ff_log "ok"
