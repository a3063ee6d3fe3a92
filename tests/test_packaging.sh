#!/usr/bin/env bash
# test_packaging.sh - what an operator's tools see of feedfs (issue 40, 5):
#  (a) a real fstab line (a temp fstab, mount -a -T): mounted by mount.fuse3,
#      and `mount -a` again is a no-op (rc 0), because the mount's source
#      (fsname) is the config's real path, which util-linux compares with
#      the fstab line's; the same for a dataset directory as the source;
#  (b) -V names the version and the commit it was built from (git
#      describe), the same that .feedfs/stats's feedfs_build_info says;
#  (c) the installed man pages and example config name the configured
#      sysconfdir, not /etc when the prefix is /usr/local (make install
#      into a DESTDIR).
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || ff_skip "mount -a needs root"
command -v mount >/dev/null || ff_skip "no mount(8)"

ff_gen "$T/data" --n 12 --classes 2 --seed 3
CFG=$T/feedfs.conf
ff_config "$CFG" "$T/data" threads=1
ff_job "$CFG" train epochs=1

# mount(8) runs its helpers with PATH=/usr/local/sbin:/usr/local/bin:...,
# so the fstab part runs in a mount namespace of its own where
# /usr/local/bin is a directory holding this build's feedfs (bound over
# it: nothing outside sees it), and unmounts there before it ends.
command -v unshare >/dev/null || ff_skip "no unshare(1)"
mkdir -p "$T/bin"
ln -s "$FEEDFS" "$T/bin/feedfs"
M=$T/mnt
D=$T/mnt-dir
mkdir -p "$M" "$D"
printf '%s %s fuse.feedfs defaults,threads=1 0 0\n' "$CFG" "$M" >"$T/fstab"
printf '%s %s fuse.feedfs defaults,threads=1,cache_dir=%s 0 0\n' \
	"$T/data" "$D" "$T/cache2" >>"$T/fstab"
cat >"$T/fstab.sh" <<'EOS'
set -u
fail() { echo "FAIL: $*"; exit 1; }
umount_all() {
	for m in "$M" "$D"; do
		mountpoint -q "$m" 2>/dev/null && fusermount3 -u "$m"
	done
	return 0
}
trap umount_all EXIT
mount --bind "$T/bin" /usr/local/bin || fail "cannot bind $T/bin"
mount -a -T "$T/fstab" || fail "mount -a -T $T/fstab: rc $?"
mountpoint -q "$M" || fail "$M is not mounted after mount -a"
mountpoint -q "$D" || fail "$D is not mounted after mount -a"
[ -s "$M/train/info.json" ] || fail "$M serves no train/info.json"
src=$(findmnt -n -o SOURCE --mountpoint "$M")
[ "$src" = "$CFG" ] || fail "the mount's source is '$src', not $CFG"
src=$(findmnt -n -o SOURCE --mountpoint "$D")
[ "$src" = "$T/data" ] || fail "the mount's source is '$src', not $T/data"
rc=0
mount -a -T "$T/fstab" >"$T/again.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || {
	cat "$T/again.out"
	fail "mount -a -T run a second time: rc $rc (util-linux did not see the entries mounted)"
}
[ "$(grep -c " $M " /proc/self/mounts)" -eq 1 ] || fail "$M is mounted twice"
exit 0
EOS
rc=0
T=$T M=$M D=$D CFG=$CFG unshare -m --propagation private bash "$T/fstab.sh" || rc=$?
[ "$rc" -eq 0 ] || ff_fail "the fstab part failed (rc $rc)"
ff_log "(a) mount -a twice: rc 0, sources $CFG and $T/data"

# ---- (b) -V ---------------------------------------------------------------
v=$("$FEEDFS" -V)
echo "$v" | grep -Eq '^feedfs [0-9]+\.[0-9]+\.[0-9]+ ' || ff_fail "-V: '$v'"
if git -C "$FF_SRCDIR" rev-parse HEAD >/dev/null 2>&1; then
	want=$(git -C "$FF_SRCDIR" rev-parse --short=12 HEAD)
	echo "$v" | grep -q "$want" || ff_fail "-V '$v' does not name commit $want"
else
	echo "$v" | grep -Eq 'commit|without' || ff_fail "-V '$v' says nothing of its commit"
fi
ff_mount "$CFG" "$M"
line=$(grep '^feedfs_build_info{' "$M/.feedfs/stats") ||
	ff_fail ".feedfs/stats has no feedfs_build_info"
commit=$(echo "$v" | sed -n 's/.*(commit \([^,)]*\).*/\1/p')
echo "$line" | grep -qF "commit=\"$commit\"" ||
	ff_fail "feedfs_build_info '$line' and -V '$v' name different commits"
ff_umount "$M"
ff_log "(b) -V: $v"

# ---- (c) make install names the configured sysconfdir --------------------
sysconfdir=$(sed -n 's/^sysconfdir = //p' "$FF_BUILDDIR/Makefile")
prefix=$(sed -n 's/^prefix = //p' "$FF_BUILDDIR/Makefile")
sysconfdir=${sysconfdir//\$\{prefix\}/$prefix}
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$FF_BUILDDIR" DESTDIR="$T/inst" install-man install-sysconfDATA \
	>"$T/install.out" 2>&1 || {
	cat "$T/install.out"
	ff_fail "make install-man install-sysconfDATA failed"
}
page=$T/inst$(sed -n 's/^mandir = //p' "$FF_BUILDDIR/Makefile" |
	sed "s|\${datarootdir}|$prefix/share|; s|\${prefix}|$prefix|")/man8/feedfs.8
[ -f "$page" ] || ff_fail "no $page installed"
[ -f "$T/inst$sysconfdir/feedfs.conf" ] || ff_fail "no $sysconfdir/feedfs.conf installed"
for f in "$page" "${page%/man8/feedfs.8}/man5/feedfs.conf.5" "$T/inst$sysconfdir/feedfs.conf"; do
	grep -qF "$sysconfdir/feedfs.conf" "$f" ||
		ff_fail "$f does not name $sysconfdir/feedfs.conf"
	if [ "$sysconfdir" != /etc ] && grep -Eq '(^|[^[:alnum:]_/.-])/etc/feedfs' "$f"; then
		grep -En '(^|[^[:alnum:]_/.-])/etc/feedfs' "$f" | head -3
		ff_fail "$f names /etc/feedfs, sysconfdir is $sysconfdir"
	fi
done
ff_log "(c) installed pages name $sysconfdir/feedfs.conf"
ff_log "ok"
