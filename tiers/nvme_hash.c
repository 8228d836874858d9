/* The payload checksum (XXH3-64) on AVX2 where the CPU has it.
 *
 * Why not just XXH3_64bits(): the distribution's libxxhash is built for baseline x86-64,
 * so it runs the SSE2 kernel: ~14 GB/s from cache, ~13 GB/s from memory on this
 * project's dev VM, against ~55 and ~25 GB/s for AVX2. The hash is the largest per-op
 * CPU cost of the store past 4 KiB (a 64 KiB record from memory, as a read's DMA'd
 * payload is: 5.0 us with the library, 2.6 us with AVX2), paid once per write and once
 * per read. AVX-512 was tried: faster from cache (0.9 vs 1.2 us) but slower from memory
 * (3.2 us), which is the store's case, so it is not used.
 * XXH3's result doesn't depend on the kernel used, so records stay bit-compatible with
 * every other XXH3 implementation (tests compare against the library on every size).
 *
 * The AVX2 kernel lives in nvme_hash_avx2.c, compiled for AVX2 by a target pragma, and
 * is only called after the CPU said it has AVX2. */
#define _GNU_SOURCE
#include "nvme_int.h"

#include <pthread.h>
#include <xxhash.h>

static uint64_t hash_lib(const void *p, size_t n)
{
	return XXH3_64bits(p, n);
}

static nvme_hash_fn g_hash = hash_lib;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

nvme_hash_fn nvme_hash_impl(int which)
{
	switch (which) {
	case NVME_HASH_LIB:
		return hash_lib;
#if NVME_HASH_X86
	case NVME_HASH_AVX2:
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") ? nvme_hash_avx2 : NULL;
#endif
	default:
		return NULL;
	}
}

static void pick(void)
{
	nvme_hash_fn f = nvme_hash_impl(NVME_HASH_AVX2);
	g_hash = f ? f : hash_lib;
}

nvme_hash_fn nvme_hash_best(void)
{
	pthread_once(&g_once, pick);
	return g_hash;
}
