#!/usr/bin/env bash
# test_layout.sh - the tree's architecture keeps holding (issue 35):
# scripts/check-layout over this build's objects: no circle of files
# (Tarjan's SCC over nm), each folder includes only what its README
# allows, no source file over 700 lines, no folder over 30% of the
# product's lines, every file opens with a comment.
set -u
: "${FF_SRCDIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${FF_BUILDDIR:=$FF_SRCDIR/build}"
command -v nm >/dev/null || { echo "SKIP: no nm (binutils)"; exit 77; }
out=$(/usr/bin/python3 "$FF_SRCDIR/scripts/check-layout" "$FF_BUILDDIR" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "test_layout: FAIL: scripts/check-layout found the above" >&2; exit 1; }
# the check itself must see the tree: a build with objects and files
echo "$out" | grep -q "^[0-9]* files, [1-9][0-9]* objects" ||
	{ echo "test_layout: FAIL: check-layout saw no objects" >&2; exit 1; }
echo "test_layout: the layout holds"
