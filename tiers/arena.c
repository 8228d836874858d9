/* Device arena: one strata_dev_alloc of capacity_pages * stride bytes, carved into
 * fixed-size pages by the shared page allocator. The memory is the device's (host
 * memory on the CPU backend); nothing here touches its bytes. */
#define _GNU_SOURCE
#include "tiers_int.h"

#include <errno.h>
#include <stdlib.h>

struct strata_arena {
	strata_dev *dev;
	void *base;
	page_set ps;
};

int strata_arena_create(strata_dev *dev, const strata_pool_config *cfg, strata_arena **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	size_t stride, bytes;
	if (!dev || pages_check_config(cfg, &stride, &bytes))
		return -EINVAL;
	strata_arena *a = calloc(1, sizeof *a);
	if (!a)
		return -ENOMEM;
	a->dev = dev;
	int err = pages_init(&a->ps, STRATA_TIER_DEVICE, cfg);
	if (err) {
		free(a);
		return err;
	}
	err = strata_dev_alloc(dev, bytes, &a->base);
	if (err) {
		pages_fini(&a->ps);
		free(a);
		return err;
	}
	STRATA_LOG(STRATA_LOG_INFO, STRATA_SUB_TIERS, "arena: %llu pages of %zu B (stride %zu) on %s",
		   (unsigned long long)cfg->capacity_pages, cfg->page_bytes, stride,
		   strata_dev_name(dev));
	*out = a;
	return 0;
}

void strata_arena_destroy(strata_arena *a)
{
	if (!a)
		return;
	strata_dev_free(a->dev, a->base);
	pages_fini(&a->ps);
	free(a);
}

int strata_arena_alloc(strata_arena *a, int n, strata_page_handle *out)
{
	return a ? pages_alloc(&a->ps, n, out) : -EINVAL;
}

int strata_arena_free(strata_arena *a, int n, const strata_page_handle *h)
{
	return a ? pages_free(&a->ps, n, h) : -EINVAL;
}

int strata_arena_set_budget(strata_arena *a, uint64_t bytes)
{
	return a ? pages_set_budget(&a->ps, bytes) : -EINVAL;
}

void *strata_arena_base(const strata_arena *a)
{
	return a ? a->base : NULL;
}

void *strata_arena_ptr(const strata_arena *a, const strata_page_handle *h)
{
	int64_t i = a ? pages_index(&a->ps, h) : -1;
	return i < 0 ? NULL : (char *)a->base + h->location;
}

size_t strata_arena_page_stride(const strata_arena *a)
{
	return a ? a->ps.stride : 0;
}

int64_t strata_arena_page_index(const strata_arena *a, const strata_page_handle *h)
{
	return a ? pages_index(&a->ps, h) : -1;
}

void strata_arena_count_moved(strata_arena *a, uint64_t bytes_in, uint64_t bytes_out)
{
	if (a)
		pages_count_moved(&a->ps, bytes_in, bytes_out);
}

int strata_arena_stats(const strata_arena *a, strata_tier_stats *st)
{
	return a ? pages_stats((page_set *)&a->ps, st) : -EINVAL;
}

int strata_arena_inject_alloc(strata_arena *a, int64_t nth, int err)
{
	return a ? pages_inject(&a->ps, nth, err) : -EINVAL;
}
