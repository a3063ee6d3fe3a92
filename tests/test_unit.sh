#!/usr/bin/env bash
# test_unit.sh - the systemd unit make install puts in place (issue 40 §2):
#  - `make install-systemdsystemunitDATA DESTDIR=...` installs
#    feedfs@.service, its paths this build's (bindir, sysconfdir);
#  - `systemd-analyze verify` of an instance (feedfs@mnt-feed.service)
#    says nothing and exits 0, with ExecStart pointed at this build's
#    feedfs and the man pages of Documentation= found (MANPATH);
#  - Restart=on-failure; no ExecStartPre that fails the start on a dead
#    mountpoint (mkdir only with "-"); MemoryMax= and CPUQuota= guidance.
# Skipped (77) where systemd-analyze is missing: it cannot be verified.
# No systemd as PID 1 is needed (verify reads files); the unit is not
# started here.
set -eu
: "${FF_BUILDDIR:=$(pwd)}"
: "${FF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
name=test_unit
fail() { echo "$name: FAIL: $*" >&2; exit 1; }
UNIT=$FF_BUILDDIR/etc/feedfs@.service
[ -f "$UNIT" ] || fail "$UNIT is not built (make check builds it)"
T=$(mktemp -d "${TMPDIR:-/tmp}/feedfs-$name.XXXXXX")
trap 'rm -rf "$T"' EXIT

# ---- installed where configure said ------------------------------------------
make -s -C "$FF_BUILDDIR" install-systemdsystemunitDATA DESTDIR="$T/root" \
	>/dev/null 2>&1 || fail "make install-systemdsystemunitDATA failed"
installed=$(find "$T/root" -name 'feedfs@.service')
[ -n "$installed" ] || fail "make install put no feedfs@.service under DESTDIR"
cmp -s "$installed" "$UNIT" || fail "the installed unit differs from $UNIT"
echo "$name: installed as ${installed#$T/root}"

grep -q '^ExecStart=.*/feedfs ${FEEDFS_SOURCE} %f$' "$UNIT" ||
	fail "no ExecStart of feedfs: $(grep ExecStart "$UNIT")"
grep -q '^Restart=on-failure$' "$UNIT" || fail "no Restart=on-failure"
grep -q '^Type=forking$' "$UNIT" || fail "not Type=forking"
if grep '^ExecStartPre=' "$UNIT" | grep -v '^ExecStartPre=-' | grep -q .; then
	fail "an ExecStartPre whose failure fails the start (a dead mountpoint)"
fi
grep -q '^#.*MemoryMax=' "$UNIT" && grep -q '^#.*CPUQuota=' "$UNIT" ||
	fail "no MemoryMax=/CPUQuota= guidance"
grep -q '@bindir@\|@sysconfdir@' "$UNIT" && fail "a path left unsubstituted"

# ---- systemd-analyze verify ------------------------------------------------------
command -v systemd-analyze >/dev/null 2>&1 ||
	{ echo "$name: SKIP: systemd-analyze is missing (no systemd here): the unit is not verified"; exit 77; }
mkdir -p "$T/units" "$T/man/man8" "$T/man/man5"
ln -s "$FF_SRCDIR/man/feedfs.8" "$T/man/man8/feedfs.8"
ln -s "$FF_SRCDIR/man/feedfs.conf.5" "$T/man/man5/feedfs.conf.5"
# This build's feedfs where the installed one would be.
sed "s|^ExecStart=.*/feedfs |ExecStart=$FF_BUILDDIR/feedfs |" "$UNIT" \
	>"$T/units/feedfs@mnt-feed.service"
out=$(MANPATH="$T/man" systemd-analyze verify \
	"$T/units/feedfs@mnt-feed.service" 2>&1) ||
	fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify said: $out"
echo "$name: systemd-analyze verify feedfs@mnt-feed.service: no complaint ($(systemd-analyze --version | head -1))"
# It does complain: a unit that is broken is not passed.
sed 's/^Restart=on-failure/Restart=sometimes/' "$T/units/feedfs@mnt-feed.service" \
	>"$T/units/feedfs@mnt-bad.service"
out=$(MANPATH="$T/man" systemd-analyze verify \
	"$T/units/feedfs@mnt-bad.service" 2>&1) || true
[ -n "$out" ] || fail "systemd-analyze verify took Restart=sometimes"
echo "$name: ok"
