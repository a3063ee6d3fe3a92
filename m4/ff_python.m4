# ff_python.m4 - where `make install` puts the Python package (python/feedfs).
#
# FF_PYTHON_DIR: --with-pythondir=DIR.  PYTHON3 (AC_PATH_PROG in
# configure.ac, /usr/bin/python3 on Debian) must be set first.
#
# Without the option the directory is the one of PYTHON3's sys.path that
# lies in $prefix/lib: Debian's /usr/bin/python3 reads
# /usr/local/lib/python3.X/dist-packages (prefix /usr/local, the default)
# and /usr/lib/python3/dist-packages (prefix /usr), not site-packages.
# For a prefix the interpreter does not search, sysconfig's posix_prefix
# layout under $prefix (…/lib/python3.X/site-packages), which then needs
# PYTHONPATH.  The result keeps ${prefix} unexpanded, so `make install
# prefix=...` and distcheck follow it.  numpy and torch are looked for,
# not required (they are needed at run time only, torch only by
# feedfs.torch).
#
# Sets: pythondir (AC_SUBST), ff_python_summary.
AC_DEFUN([FF_PYTHON_DIR], [
AC_ARG_WITH([pythondir],
  [AS_HELP_STRING([--with-pythondir=DIR],
    [install the feedfs Python package in DIR (default: the directory of $PYTHON3's sys.path under PREFIX/lib)])],
  [], [with_pythondir=check])
ff_py_prefix=$prefix
test "x$ff_py_prefix" = xNONE && ff_py_prefix=$ac_default_prefix
AS_CASE([$with_pythondir],
  [check|yes|""],
    [AC_MSG_CHECKING([where $PYTHON3 looks for packages under $ff_py_prefix])
     ff_py_rel=`$PYTHON3 - "$ff_py_prefix" 2>/dev/null <<'FF_EOF'
import os, sys, sysconfig
prefix = sys.argv[[1]].rstrip("/") or "/"
for p in sys.path:
    if p.startswith(prefix + "/lib/") and \
            os.path.basename(p) in ("dist-packages", "site-packages"):
        print(os.path.relpath(p, prefix))
        break
else:
    print(os.path.relpath(sysconfig.get_path(
        "purelib", "posix_prefix",
        vars={"base": prefix, "platbase": prefix}), prefix))
FF_EOF`
     AS_IF([test -z "$ff_py_rel"],
       [ff_py_rel=lib/python3/dist-packages
        AC_MSG_RESULT([$PYTHON3 did not answer; guessing $ff_py_rel])],
       [AC_MSG_RESULT([$ff_py_rel])])
     pythondir='${prefix}/'$ff_py_rel],
  [no], [AC_MSG_ERROR([--without-pythondir: the package has to go somewhere; give --with-pythondir=DIR])],
  [pythondir=$with_pythondir])
AC_SUBST([pythondir])
ff_py_mods=""
for ff_m in numpy torch; do
  AS_IF([$PYTHON3 -c "import $ff_m" >/dev/null 2>&1],
    [ff_py_mods="$ff_py_mods $ff_m"])
done
AS_CASE([" $ff_py_mods "], [*" numpy "*], [],
  [AC_MSG_WARN([$PYTHON3 cannot import numpy: the feedfs package needs it at run time (Debian: apt-get install python3-numpy)])])
ff_python_summary="$PYTHON3, package in $pythondir (has:${ff_py_mods:- nothing})"
])
