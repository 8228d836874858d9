/* XXH3-64 compiled for AVX2 (see nvme_hash.c): called only once the CPU said it has it.
 * The pragma must come before any header so that xxhash.h sees the ISA macros and picks
 * its AVX2 kernel, and everything it inlines here is built for that ISA. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#pragma GCC target("avx2")
#endif
#define _GNU_SOURCE
#include "nvme_int.h"

#if NVME_HASH_X86
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t nvme_hash_avx2(const void *p, size_t n)
{
	return XXH3_64bits(p, n);
}
#else
typedef int nvme_hash_avx2_unused; /* ISO C: no empty translation unit */
#endif
