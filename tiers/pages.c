/* The fixed-size page allocator shared by the device arena and the host pool, and the
 * vocabulary helpers (checksum, names). Pages are handed out from a stack of free
 * indices: O(1) alloc and free, and a freed page is reused first (warm in caches and
 * TLBs). A bitmap of live pages turns double frees into -EINVAL instead of a corrupt
 * free stack. */
#define _GNU_SOURCE
#include "tiers_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint64_t strata_page_checksum(const void *p, size_t n)
{
	return XXH3_64bits(p, n);
}

const char *strata_tier_name(strata_tier t)
{
	switch (t) {
	case STRATA_TIER_DEVICE: return "device";
	case STRATA_TIER_HOST: return "host";
	case STRATA_TIER_NVME: return "nvme";
	default: return "none";
	}
}

int pages_check_config(const strata_pool_config *cfg, size_t *stride, size_t *bytes)
{
	if (!cfg || cfg->size < sizeof *cfg || !cfg->page_bytes || !cfg->capacity_pages ||
	    cfg->capacity_pages >= UINT32_MAX)
		return -EINVAL;
	size_t a = cfg->align > 1 ? cfg->align : 1;
	if (cfg->page_bytes > SIZE_MAX / 2)
		return -EINVAL;
	size_t s = (cfg->page_bytes + a - 1) / a * a;
	if (cfg->capacity_pages > SIZE_MAX / s)
		return -EINVAL;
	*stride = s;
	*bytes = s * (size_t)cfg->capacity_pages;
	return 0;
}

int pages_init(page_set *ps, strata_tier tier, const strata_pool_config *cfg)
{
	size_t bytes;
	memset(ps, 0, sizeof *ps);
	int err = pages_check_config(cfg, &ps->stride, &bytes);
	if (err)
		return err;
	ps->tier = tier;
	ps->page_bytes = cfg->page_bytes;
	ps->capacity = (uint32_t)cfg->capacity_pages;
	ps->free_stack = malloc(sizeof(uint32_t) * ps->capacity);
	ps->live = calloc((ps->capacity + 7) / 8, 1);
	if (!ps->free_stack || !ps->live) {
		free(ps->free_stack);
		free(ps->live);
		return -ENOMEM;
	}
	/* Page 0 on top: a fresh pool hands out pages in address order. */
	for (uint32_t i = 0; i < ps->capacity; i++)
		ps->free_stack[i] = ps->capacity - 1 - i;
	ps->nfree = ps->capacity;
	ps->st.size = sizeof ps->st;
	ps->st.tier = tier;
	ps->st.capacity_bytes = bytes;
	ps->budget = cfg->budget_bytes ? cfg->budget_bytes : bytes;
	pthread_mutex_init(&ps->mu, NULL);
	return 0;
}

void pages_fini(page_set *ps)
{
	free(ps->free_stack);
	free(ps->live);
	pthread_mutex_destroy(&ps->mu);
}

static bool live_get(const page_set *ps, uint32_t i)
{
	return ps->live[i >> 3] >> (i & 7) & 1;
}
static void live_set(page_set *ps, uint32_t i, bool v)
{
	if (v)
		ps->live[i >> 3] |= (uint8_t)(1u << (i & 7));
	else
		ps->live[i >> 3] &= (uint8_t)~(1u << (i & 7));
}

int pages_alloc(page_set *ps, int n, strata_page_handle *out)
{
	if (!out || n < 1)
		return -EINVAL;
	int err = 0;
	pthread_mutex_lock(&ps->mu);
	if ((err = fault_hit(&ps->fault, STRATA_FAULT_ALLOC))) {
		ps->st.faults_fired++;
		goto out;
	}
	uint64_t want = (uint64_t)n * ps->stride;
	if ((uint64_t)n > ps->nfree) {
		ps->st.full_failures++;
		err = -ENOSPC;
		goto out;
	}
	if (ps->st.used_bytes + want > ps->budget) {
		ps->st.budget_failures++;
		err = STRATA_E_BUDGET;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		uint32_t pg = ps->free_stack[--ps->nfree];
		live_set(ps, pg, true);
		out[i] = (strata_page_handle){ .tier = ps->tier,
					       .location = (uint64_t)pg * ps->stride,
					       .length = ps->page_bytes };
	}
	ps->st.used_bytes += want;
	ps->st.pages += (uint64_t)n;
	ps->st.allocs += (uint64_t)n;
	if (ps->st.used_bytes > ps->st.peak_bytes)
		ps->st.peak_bytes = ps->st.used_bytes;
out:
	pthread_mutex_unlock(&ps->mu);
	return err;
}

int64_t pages_index(const page_set *ps, const strata_page_handle *h)
{
	if (!h || h->tier != (uint32_t)ps->tier || h->location % ps->stride)
		return -1;
	uint64_t i = h->location / ps->stride;
	return i < ps->capacity ? (int64_t)i : -1;
}

int pages_free(page_set *ps, int n, const strata_page_handle *h)
{
	if (!h || n < 1)
		return -EINVAL;
	int err = 0;
	pthread_mutex_lock(&ps->mu);
	/* Check all first (including duplicates within h), so a bad list frees nothing. */
	int i;
	for (i = 0; i < n; i++) {
		int64_t pg = pages_index(ps, &h[i]);
		if (pg < 0 || !live_get(ps, (uint32_t)pg))
			break;
		live_set(ps, (uint32_t)pg, false);
	}
	if (i < n) {
		for (int j = 0; j < i; j++)
			live_set(ps, (uint32_t)pages_index(ps, &h[j]), true);
		err = -EINVAL;
		goto out;
	}
	for (i = 0; i < n; i++)
		ps->free_stack[ps->nfree++] = (uint32_t)pages_index(ps, &h[i]);
	ps->st.used_bytes -= (uint64_t)n * ps->stride;
	ps->st.pages -= (uint64_t)n;
	ps->st.frees += (uint64_t)n;
out:
	pthread_mutex_unlock(&ps->mu);
	return err;
}

int pages_set_budget(page_set *ps, uint64_t bytes)
{
	pthread_mutex_lock(&ps->mu);
	ps->budget = bytes ? bytes : ps->st.capacity_bytes;
	pthread_mutex_unlock(&ps->mu);
	return 0;
}

void pages_count_moved(page_set *ps, uint64_t in, uint64_t out)
{
	pthread_mutex_lock(&ps->mu);
	ps->st.bytes_in += in;
	ps->st.bytes_out += out;
	pthread_mutex_unlock(&ps->mu);
}

int pages_stats(page_set *ps, strata_tier_stats *st)
{
	if (!st || st->size < sizeof *st)
		return -EINVAL;
	pthread_mutex_lock(&ps->mu);
	*st = ps->st;
	st->budget_bytes = ps->budget;
	pthread_mutex_unlock(&ps->mu);
	return 0;
}

int pages_inject(page_set *ps, int64_t nth, int err)
{
	if (nth >= 0 && err >= 0)
		return -EINVAL;
	pthread_mutex_lock(&ps->mu);
	fault_arm(&ps->fault, STRATA_FAULT_ALLOC, nth, err);
	pthread_mutex_unlock(&ps->mu);
	return 0;
}
