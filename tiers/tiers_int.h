/* tiers/ private: the fixed-page allocator the arena and the host pool share, the fault
 * seam, and the extent allocator of the NVMe store. */
#ifndef STRATA_TIERS_INT_H
#define STRATA_TIERS_INT_H

#include <pthread.h>

#include "tiers/tiers.h"

/* ---- fault seam ---- */

/* One armed fault. Owned by the object's lock. */
typedef struct tier_fault {
	bool armed;
	int site;
	int64_t nth;     /* events at site still to let through */
	int err;
	uint64_t fired;  /* count of faults that fired */
} tier_fault;

static inline void fault_arm(tier_fault *f, int site, int64_t nth, int err)
{
	f->armed = nth >= 0;
	f->site = site;
	f->nth = nth;
	f->err = err;
}

/* Count one event at site; the error to inject, or 0. */
static inline int fault_hit(tier_fault *f, int site)
{
	if (!f->armed || f->site != site)
		return 0;
	if (f->nth > 0) {
		f->nth--;
		return 0;
	}
	f->armed = false;
	f->fired++;
	return f->err;
}

/* ---- fixed-size pages (arena, host pool) ---- */

typedef struct page_set {
	pthread_mutex_t mu;      /* guards everything below */
	strata_tier tier;
	size_t page_bytes;
	size_t stride;
	uint32_t capacity;       /* pages */
	uint32_t *free_stack;    /* free page indices; the top is handed out next */
	uint32_t nfree;
	uint8_t *live;           /* bitmap of allocated pages, catches double frees */
	uint64_t budget;
	strata_tier_stats st;
	tier_fault fault;
} page_set;

/* Validate cfg and fill stride/capacity; bytes to reserve in *bytes. */
int pages_check_config(const strata_pool_config *cfg, size_t *stride, size_t *bytes);
int pages_init(page_set *ps, strata_tier tier, const strata_pool_config *cfg);
void pages_fini(page_set *ps);
int pages_alloc(page_set *ps, int n, strata_page_handle *out);
int pages_free(page_set *ps, int n, const strata_page_handle *h);
int pages_set_budget(page_set *ps, uint64_t bytes);
/* Index of the page h names (range, alignment and tier checked; not liveness), or -1. */
int64_t pages_index(const page_set *ps, const strata_page_handle *h);
void pages_count_moved(page_set *ps, uint64_t in, uint64_t out);
int pages_stats(page_set *ps, strata_tier_stats *st);
int pages_inject(page_set *ps, int64_t nth, int err);

/* ---- extents (NVMe store), in 4 KiB blocks ---- */

typedef struct extent {
	uint64_t start, len;
} extent;

/* Free extents, sorted by start, never adjacent (coalesced). */
typedef struct extent_map {
	extent *v;
	size_t n, cap;
	uint64_t total;  /* blocks */
	uint64_t free;   /* blocks */
} extent_map;

int extents_init(extent_map *m, uint64_t first, uint64_t blocks); /* all free */
void extents_fini(extent_map *m);
/* First fit: the lowest free extent of len blocks. -ENOSPC when none. */
int extents_alloc(extent_map *m, uint64_t len, uint64_t *start);
/* Give [start, start+len) back. -EINVAL when any of it is already free or out of range. */
int extents_free(extent_map *m, uint64_t start, uint64_t len);
/* Take [start, start+len) out of the free space. -EINVAL unless all of it is free. */
int extents_take(extent_map *m, uint64_t start, uint64_t len);
uint64_t extents_largest(const extent_map *m);

#endif
