/*
 * cpu.h - which of the transforms' vector kernels run here.  Layer:
 * transforms (transforms/).
 *
 * xf_scalar_forced: FEEDFS_XF_SCALAR set (and not "0") forces every
 * kernel's portable loop, for the tests, which set it between calls: so
 * it is asked each call.  xf_cpu_avx2_f16c: whether the CPU runs the
 * AVX2 + F16C kernels, asked of CPUID once per program.  CPUID traps to
 * the hypervisor in a virtual machine: asked per call, as convert.c and
 * mix.c did, it took 4.5% of a trainer's CPU for batches from the
 * cluster tier (perf, Firecracker).  __builtin_cpu_supports reads what
 * libgcc asked at start-up; F16C is asked here because clang (14) knows
 * no "f16c" for it, and `make fuzz` builds with clang.
 */
#ifndef FEEDFS_XF_CPU_H
#define FEEDFS_XF_CPU_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline bool
xf_scalar_forced(void)
{
	const char *e = getenv("FEEDFS_XF_SCALAR");

	return e != NULL && *e != '\0' && strcmp(e, "0") != 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <stdatomic.h>

static inline bool
xf_cpu_avx2_f16c(void)
{
	static atomic_int have = -1; /* one per file that asks: that is fine */
	int h = atomic_load_explicit(&have, memory_order_relaxed);

	if (h < 0) {
		unsigned a, b, c, d;

		h = __builtin_cpu_supports("avx2") &&
		    __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
		atomic_store_explicit(&have, h, memory_order_relaxed);
	}
	return h != 0;
}

/* The AVX2 + F16C kernels (convert.c, mix.c): here, and not forced off. */
static inline bool
xf_use_avx2_f16c(void)
{
	return !xf_scalar_forced() && xf_cpu_avx2_f16c();
}

/* Whether the CPU runs the AVX-512 VBMI kernel (convert.c), once. */
static inline bool
xf_cpu_avx512_vbmi(void)
{
	static atomic_int have = -1;
	int h = atomic_load_explicit(&have, memory_order_relaxed);

	if (h < 0) {
		h = __builtin_cpu_supports("avx512f") &&
		    __builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512vbmi");
		atomic_store_explicit(&have, h, memory_order_relaxed);
	}
	return h != 0;
}

/*
 * The AVX-512 VBMI kernel, where the AVX2 ones run (xf_use_avx2_f16c,
 * which the caller asked already): here, and not FEEDFS_XF_AVX512=0 (the
 * tests' way to run the AVX2 kernels on a CPU that has both).
 */
static inline bool
xf_use_avx512_vbmi(void)
{
	const char *e = getenv("FEEDFS_XF_AVX512");

	return (e == NULL || strcmp(e, "0") != 0) && xf_cpu_avx512_vbmi();
}
#endif

#endif
