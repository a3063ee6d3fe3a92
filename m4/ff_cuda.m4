# ff_cuda.m4 - the optional CUDA staging path (gpu/).
#
# FF_CHECK_CUDA: --with-cuda[=DIR] / --without-cuda.
#
# Without the option CUDA is guessed: $CUDA_HOME, /usr/local/cuda, then the
# directory above an nvcc on PATH.  With --with-cuda=DIR only DIR is tried.
# A toolkit counts when DIR/bin/nvcc compiles a kernel and the C compiler
# links a call of libcudart.  Only an explicit --with-cuda fails configure
# when that is not so; a guess that fails builds the no-CUDA stub.
#
# Sets: NVCC, NVCC_ARCH (override on the make command line), NVCC_FLAGS,
# CUDA_CFLAGS, CUDA_LIBS (-lcudart, with an rpath, and -lstdc++ for the
# nvcc objects), AM_CONDITIONAL HAVE_CUDA, HAVE_CUDA in config.h, and
# ff_cuda_summary for configure's closing summary.
AC_DEFUN([FF_CHECK_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
    [stage batches on a CUDA device; DIR holds bin/nvcc (default: guess)])],
  [], [with_cuda=check])
AC_ARG_VAR([NVCC_ARCH], [nvcc -gencode flags (default: cubins for those of sm_70 sm_75 sm_80 sm_86 sm_89 sm_90 that nvcc knows, and PTX of compute_90)])

ff_have_cuda=no
ff_cuda_why=""
NVCC=""
CUDA_CFLAGS=""
CUDA_LIBS=""
AS_CASE([$with_cuda],
  [no], [ff_cuda_dirs=""; ff_cuda_why="--without-cuda"],
  [yes|check],
    [ff_cuda_dirs="${CUDA_HOME:+$CUDA_HOME }/usr/local/cuda"
     AC_PATH_PROG([ff_nvcc_on_path], [nvcc], [])
     AS_IF([test -n "$ff_nvcc_on_path"],
       [ff_cuda_dirs="$ff_cuda_dirs `dirname \`dirname $ff_nvcc_on_path\``"])],
  [ff_cuda_dirs="$with_cuda"])

for ff_d in $ff_cuda_dirs; do
  AC_MSG_CHECKING([for CUDA in $ff_d])
  ff_libdir=""
  for ff_l in lib64 lib targets/x86_64-linux/lib targets/sbsa-linux/lib; do
    AS_IF([test -z "$ff_libdir" && test -e "$ff_d/$ff_l/libcudart.so"],
      [ff_libdir="$ff_d/$ff_l"])
  done
  AS_IF([test ! -x "$ff_d/bin/nvcc"], [AC_MSG_RESULT([no bin/nvcc]); continue])
  AS_IF([test ! -f "$ff_d/include/cuda_runtime_api.h"],
    [AC_MSG_RESULT([no include/cuda_runtime_api.h]); continue])
  AS_IF([test -z "$ff_libdir"], [AC_MSG_RESULT([no libcudart.so]); continue])

  dnl nvcc must compile a kernel with the host compiler it finds.
  cat > conftest.cu <<_FF_EOF
__global__ void k(float *x) { x[[threadIdx.x]] += 1.0f; }
void launch(float *x) { k<<<1, 32>>>(x); }
_FF_EOF
  AS_IF([! "$ff_d/bin/nvcc" -c -o conftest.$OBJEXT conftest.cu >&AS_MESSAGE_LOG_FD 2>&1],
    [rm -f conftest.cu conftest.$OBJEXT
     AC_MSG_RESULT([nvcc cannot compile a kernel (see config.log)]); continue])
  rm -f conftest.cu conftest.$OBJEXT

  ff_save_CFLAGS=$CFLAGS; ff_save_LIBS=$LIBS
  CFLAGS="$CFLAGS -I$ff_d/include"
  LIBS="-L$ff_libdir -lcudart $LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime_api.h>]],
      [[int n; return (int)cudaGetDeviceCount(&n);]])],
    [ff_have_cuda=yes], [])
  CFLAGS=$ff_save_CFLAGS; LIBS=$ff_save_LIBS
  AS_IF([test $ff_have_cuda = no],
    [AC_MSG_RESULT([cannot link libcudart (see config.log)]); continue])

  AC_MSG_RESULT([yes])
  NVCC="$ff_d/bin/nvcc"
  CUDA_CFLAGS="-I$ff_d/include"
  CUDA_LIBS="-L$ff_libdir -Wl,-rpath,$ff_libdir -lcudart -lstdc++"
  ff_cuda_version=`"$NVCC" --version | sed -n 's/.*release \([[0-9.]]*\).*/\1/p'`
  break
done

AS_IF([test $ff_have_cuda = no && test -z "$ff_cuda_why"],
  [ff_cuda_why="not found in: $ff_cuda_dirs"])
AS_IF([test $ff_have_cuda = no && test "x$with_cuda" != xcheck && test "x$with_cuda" != xno],
  [AC_MSG_ERROR([--with-cuda was given but CUDA is not usable ($ff_cuda_why): install the CUDA toolkit (nvcc and libcudart) or give its directory as --with-cuda=DIR])])

dnl Cubins for every data-centre and workstation generation that nvcc
dnl still targets (CUDA 13 dropped sm_70, Volta; CUDA 12 has it), so that
dnl a V100 or T4 runs the kernels without a JIT, and PTX of compute_90 for
dnl newer ones (Blackwell JIT-compiles it at the first load, at mount).
dnl gpu_init refuses a device none of them runs on.
AS_IF([test -z "$NVCC_ARCH" && test $ff_have_cuda = yes],
  [AC_MSG_CHECKING([for the GPU architectures nvcc builds])
   ff_codes=`"$NVCC" --list-gpu-code 2>/dev/null | tr '\n' ' '`
   ff_arch_list=""
   for ff_a in 70 75 80 86 89 90; do
     AS_CASE([" $ff_codes "], [*" sm_$ff_a "*],
       [NVCC_ARCH="$NVCC_ARCH -gencode arch=compute_$ff_a,code=sm_$ff_a"
        ff_arch_list="$ff_arch_list sm_$ff_a"])
   done
   AS_IF([test -z "$ff_codes"],
     [NVCC_ARCH="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"
      ff_arch_list=" sm_80 sm_90 (nvcc has no --list-gpu-code)"])
   NVCC_ARCH="$NVCC_ARCH -gencode arch=compute_90,code=compute_90"
   ff_arch_list="$ff_arch_list + compute_90 PTX"
   AC_MSG_RESULT([$ff_arch_list])])
NVCC_FLAGS="-O3 -std=c++17 -Xcompiler -Wall"
AS_IF([test $ff_have_cuda = yes],
  [AC_DEFINE([HAVE_CUDA], [1], [Define to 1 when gpu/ is built with CUDA.])
   ff_cuda_summary="yes, $ff_cuda_version ($NVCC;${ff_arch_list:- NVCC_ARCH=$NVCC_ARCH}; device tests skip without a device)"],
  [ff_cuda_summary="no ($ff_cuda_why; gpu/ is the no-CUDA stub)"])
AC_SUBST([NVCC])
AC_SUBST([NVCC_FLAGS])
AC_SUBST([CUDA_CFLAGS])
AC_SUBST([CUDA_LIBS])
AM_CONDITIONAL([HAVE_CUDA], [test $ff_have_cuda = yes])
])
