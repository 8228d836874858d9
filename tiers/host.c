/* Pinned host pool. The memory is one mapping, tried in this order:
 *   1. mmap(MAP_HUGETLB | MAP_HUGE_2MB): explicit 2 MiB pages. Fewer IOMMU/TLB entries
 *      for the device's zero-copy gather (one measurement saw a random gather over a
 *      4 GiB pool fall from ~42 to ~22 GB/s past ~128K entries on 4 KiB pages). Needs
 *      pages reserved in /proc/sys/vm/nr_hugepages; fails with ENOMEM otherwise.
 *   2. A 2 MiB-aligned anonymous mapping with madvise(MADV_HUGEPAGE): transparent huge
 *      pages when the kernel allows them (best effort; the kernel may still use 4 KiB).
 *   3. Plain anonymous pages.
 * Then strata_dev_host_register() pins it and maps it for the device (a no-op on the CPU
 * backend). Every fallback is logged at info level and reported by
 * strata_host_pool_mem(). */
#define _GNU_SOURCE
#include "tiers_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <xxhash.h>

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif

#define HUGE_2M ((size_t)2 << 20)

struct strata_host_pool {
	strata_dev *dev;
	void *base;          /* the pool's first page */
	void *map;           /* the mapping (may start before base for THP alignment) */
	size_t map_bytes;
	strata_host_mem mem;
	bool registered;
	page_set ps;
};

const char *strata_host_mem_name(strata_host_mem m)
{
	switch (m) {
	case STRATA_HOST_MEM_HUGETLB: return "hugetlb";
	case STRATA_HOST_MEM_THP: return "thp";
	default: return "plain";
	}
}

static size_t round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

/* Map bytes of host memory; fills p->map/map_bytes/base/mem. */
static int map_pool(strata_host_pool *p, size_t bytes, unsigned flags)
{
	const int prot = PROT_READ | PROT_WRITE;
	const int anon = MAP_PRIVATE | MAP_ANONYMOUS;
	if (!(flags & (STRATA_HOST_NO_HUGE | STRATA_HOST_NO_HUGETLB))) {
		size_t n = round_up(bytes, HUGE_2M);
		void *m = mmap(NULL, n, prot, anon | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
		if (m != MAP_FAILED) {
			p->map = p->base = m;
			p->map_bytes = n;
			p->mem = STRATA_HOST_MEM_HUGETLB;
			return 0;
		}
		STRATA_LOG(STRATA_LOG_INFO, STRATA_SUB_TIERS,
			   "host pool: no 2 MiB hugetlb pages for %zu B (errno %d); trying THP",
			   n, errno);
	}
	if (!(flags & STRATA_HOST_NO_HUGE)) {
		/* Over-map by 2 MiB and trim so the pool starts on a 2 MiB boundary: THP only
		 * backs aligned 2 MiB ranges. */
		size_t n = round_up(bytes, HUGE_2M);
		char *m = mmap(NULL, n + HUGE_2M, prot, anon, -1, 0);
		if (m != MAP_FAILED) {
			char *a = (char *)round_up((uintptr_t)m, HUGE_2M);
			if (a > m)
				munmap(m, (size_t)(a - m));
			size_t tail = (size_t)(m + n + HUGE_2M - (a + n));
			if (tail)
				munmap(a + n, tail);
			if (!madvise(a, n, MADV_HUGEPAGE)) {
				p->map = p->base = a;
				p->map_bytes = n;
				p->mem = STRATA_HOST_MEM_THP;
				return 0;
			}
			STRATA_LOG(STRATA_LOG_INFO, STRATA_SUB_TIERS,
				   "host pool: madvise(MADV_HUGEPAGE) failed (errno %d); plain pages",
				   errno);
			p->map = p->base = a; /* keep it: plain pages are what we fall to anyway */
			p->map_bytes = n;
			p->mem = STRATA_HOST_MEM_PLAIN;
			return 0;
		}
	}
	void *m = mmap(NULL, bytes, prot, anon, -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	p->map = p->base = m;
	p->map_bytes = bytes;
	p->mem = STRATA_HOST_MEM_PLAIN;
	return 0;
}

int strata_host_pool_create(strata_dev *dev, const strata_pool_config *cfg,
			    strata_host_pool **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	size_t stride, bytes;
	if (pages_check_config(cfg, &stride, &bytes))
		return -EINVAL;
	strata_host_pool *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	p->dev = dev;
	int err = pages_init(&p->ps, STRATA_TIER_HOST, cfg);
	if (err)
		goto fail;
	err = map_pool(p, bytes, cfg->flags);
	if (err)
		goto fail_pages;
	if (dev && !(cfg->flags & STRATA_HOST_NO_REGISTER)) {
		err = strata_dev_host_register(dev, p->base, p->map_bytes);
		if (err)
			goto fail_map;
		p->registered = strata_dev_is_gpu(dev); /* the CPU backend's register is a no-op */
	}
	STRATA_LOG(STRATA_LOG_INFO, STRATA_SUB_TIERS,
		   "host pool: %llu pages of %zu B (stride %zu), %zu B %s%s",
		   (unsigned long long)cfg->capacity_pages, cfg->page_bytes, stride,
		   p->map_bytes, strata_host_mem_name(p->mem), p->registered ? ", registered" : "");
	*out = p;
	return 0;
fail_map:
	munmap(p->map, p->map_bytes);
fail_pages:
	pages_fini(&p->ps);
fail:
	free(p);
	return err;
}

void strata_host_pool_destroy(strata_host_pool *p)
{
	if (!p)
		return;
	if (p->registered)
		(void)strata_dev_host_unregister(p->dev, p->base);
	munmap(p->map, p->map_bytes);
	pages_fini(&p->ps);
	free(p);
}

int strata_host_pool_alloc(strata_host_pool *p, int n, strata_page_handle *out)
{
	return p ? pages_alloc(&p->ps, n, out) : -EINVAL;
}

int strata_host_pool_free(strata_host_pool *p, int n, const strata_page_handle *h)
{
	return p ? pages_free(&p->ps, n, h) : -EINVAL;
}

int strata_host_pool_set_budget(strata_host_pool *p, uint64_t bytes)
{
	return p ? pages_set_budget(&p->ps, bytes) : -EINVAL;
}

void *strata_host_pool_base(const strata_host_pool *p)
{
	return p ? p->base : NULL;
}

void *strata_host_pool_ptr(const strata_host_pool *p, const strata_page_handle *h)
{
	int64_t i = p ? pages_index(&p->ps, h) : -1;
	return i < 0 ? NULL : (char *)p->base + h->location;
}

size_t strata_host_pool_page_stride(const strata_host_pool *p)
{
	return p ? p->ps.stride : 0;
}

int64_t strata_host_pool_page_index(const strata_host_pool *p, const strata_page_handle *h)
{
	return p ? pages_index(&p->ps, h) : -1;
}

strata_host_mem strata_host_pool_mem(const strata_host_pool *p)
{
	return p ? p->mem : STRATA_HOST_MEM_PLAIN;
}

bool strata_host_pool_registered(const strata_host_pool *p)
{
	return p && p->registered;
}

int strata_host_pool_seal(strata_host_pool *p, strata_page_handle *h)
{
	void *q = strata_host_pool_ptr(p, h);
	if (!q)
		return -EINVAL;
	h->checksum = XXH3_64bits(q, p->ps.page_bytes);
	return 0;
}

int strata_host_pool_verify(strata_host_pool *p, const strata_page_handle *h)
{
	void *q = strata_host_pool_ptr(p, h);
	if (!q)
		return -EINVAL;
	if (XXH3_64bits(q, p->ps.page_bytes) == h->checksum)
		return 0;
	pthread_mutex_lock(&p->ps.mu);
	p->ps.st.checksum_failures++;
	pthread_mutex_unlock(&p->ps.mu);
	return STRATA_E_CHECKSUM;
}

void strata_host_pool_count_moved(strata_host_pool *p, uint64_t bytes_in, uint64_t bytes_out)
{
	if (p)
		pages_count_moved(&p->ps, bytes_in, bytes_out);
}

int strata_host_pool_stats(const strata_host_pool *p, strata_tier_stats *st)
{
	return p ? pages_stats((page_set *)&p->ps, st) : -EINVAL;
}

int strata_host_pool_inject_alloc(strata_host_pool *p, int64_t nth, int err)
{
	return p ? pages_inject(&p->ps, nth, err) : -EINVAL;
}
