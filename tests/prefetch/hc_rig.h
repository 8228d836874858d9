/* Test rig shared by tests/prefetch/test_hotcache.c and gpu_hotcache.c (included by
 * both; not a test itself): a hot cache with a random host tier per rl, batch builders
 * and a checker that verifies a step's output against the host originals and the
 * residency table's invariants. Works on either backend. */
#ifndef STRATA_TESTS_HC_RIG_H
#define STRATA_TESTS_HC_RIG_H

#include <check.h>
#include <errno.h>

#include "prefetch/prefetch.h"
#include "testutil.h"

typedef struct rig {
	strata_dev *dev;
	strata_hotcache *hc;
	strata_hotcache_config c;
	uint8_t **host;        /* [n_rl] host tier, max_entries entries in 64-entry blocks */
	int32_t *map, *owner, *hand; /* dumps */
	uint8_t *pool;         /* host copy of the pool */
	size_t pool_bytes;
	/* device copies of a batch */
	int32_t *d_ids, *d_rl, *d_out;
	float *d_src;
} rig;

static inline size_t rig_host_bytes(const rig *r)
{
	return (size_t)((r->c.max_entries + 63) / 64) * strata_main_block_stride(64);
}

/* Open dev (backend) and a hot cache with config c; host tiers get random bytes from
 * seed (the same bytes for the same seed on either backend). */
static inline void rig_open(rig *r, strata_backend be, const strata_hotcache_config *c,
			    uint64_t seed)
{
	memset(r, 0, sizeof *r);
	strata_dev_config dc = STRATA_DEV_CONFIG_INIT;
	dc.backend = be;
	ck_assert_int_eq(strata_dev_open(&dc, &r->dev), 0);
	ck_assert_int_eq(strata_hotcache_create(r->dev, c, &r->hc), 0);
	ck_assert_int_eq(strata_hotcache_get_config(r->hc, &r->c), 0);
	r->host = calloc((size_t)r->c.n_rl, sizeof *r->host);
	size_t hb = rig_host_bytes(r);
	for (int rl = 0; rl < r->c.n_rl; rl++) {
		ck_assert_int_eq(strata_dev_host_alloc(r->dev, hb, (void **)&r->host[rl]), 0);
		uint64_t s = seed * 1000003u + (uint64_t)rl;
		for (size_t i = 0; i < hb; i += 8) {
			uint64_t v = tu_next(&s);
			memcpy(r->host[rl] + i, &v, 8);
		}
		ck_assert_int_eq(strata_hotcache_bind_host(r->hc, rl, r->host[rl],
							   r->c.max_entries, NULL), 0);
	}
	int ns = r->c.n_rl * r->c.budget;
	r->map = malloc((size_t)r->c.n_rl * r->c.max_entries * 4);
	r->owner = malloc((size_t)ns * 4);
	r->hand = malloc((size_t)r->c.n_rl * 4);
	strata_hotcache_pool_info pi;
	ck_assert_int_eq(strata_hotcache_pool(r->hc, &pi), 0);
	r->pool_bytes = (size_t)pi.n_blocks * pi.block_stride;
	r->pool = malloc(r->pool_bytes);
	size_t rows = (size_t)r->c.max_rows > (size_t)r->c.max_append ? (size_t)r->c.max_rows
								       : (size_t)r->c.max_append;
	ck_assert_int_eq(strata_dev_alloc(r->dev, rows * r->c.topk * 4, (void **)&r->d_ids), 0);
	ck_assert_int_eq(strata_dev_alloc(r->dev, rows * 4, (void **)&r->d_rl), 0);
	ck_assert_int_eq(strata_dev_alloc(r->dev, rows * r->c.topk * 4, (void **)&r->d_out), 0);
	ck_assert_int_eq(strata_dev_alloc(r->dev, rows * 512 * 4, (void **)&r->d_src), 0);
}

static inline void rig_close(rig *r)
{
	strata_hotcache_destroy(r->hc);
	for (int rl = 0; rl < r->c.n_rl; rl++)
		strata_dev_host_free(r->dev, r->host[rl]);
	strata_dev_free(r->dev, r->d_ids);
	strata_dev_free(r->dev, r->d_rl);
	strata_dev_free(r->dev, r->d_out);
	strata_dev_free(r->dev, r->d_src);
	free(r->host);
	free(r->map);
	free(r->owner);
	free(r->hand);
	free(r->pool);
	strata_dev_close(r->dev);
}

static inline void rig_sync_copy(rig *r, void *dst, const void *src, size_t n)
{
	ck_assert_int_eq(strata_dev_copy(r->dev, dst, src, n, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(r->dev), 0);
}

/* Run one step of rows x k ids (host arrays); out (host) receives the index list. */
static inline int rig_step(rig *r, int rows, int k, const int32_t *ids, const int32_t *row_rl,
			   int32_t *out)
{
	rig_sync_copy(r, r->d_ids, ids, (size_t)rows * k * 4);
	rig_sync_copy(r, r->d_rl, row_rl, (size_t)rows * 4);
	strata_hotcache_batch b = { rows, k, r->d_ids, r->d_rl, r->d_out };
	int err = strata_hotcache_step(r->hc, &b, NULL);
	if (err)
		return err;
	rig_sync_copy(r, out, r->d_out, (size_t)rows * k * 4);
	return 0;
}

static inline int rig_predict(rig *r, int n, const int32_t *rls)
{
	rig_sync_copy(r, r->d_rl, rls, (size_t)n * 4);
	int err = strata_hotcache_predict(r->hc, n, r->d_rl, NULL);
	return err ? err : strata_dev_sync(r->dev);
}

static inline int rig_append(rig *r, int n, const int32_t *rls, const int32_t *ids,
			     const float *src)
{
	rig_sync_copy(r, r->d_rl, rls, (size_t)n * 4);
	rig_sync_copy(r, r->d_ids, ids, (size_t)n * 4);
	rig_sync_copy(r, r->d_src, src, (size_t)n * 512 * 4);
	int err = strata_hotcache_append(r->hc, n, r->d_rl, r->d_ids, r->d_src, NULL, NULL);
	return err ? err : strata_dev_sync(r->dev);
}

static inline void rig_dump(rig *r)
{
	ck_assert_int_eq(strata_hotcache_dump(r->hc, r->map, r->owner, r->hand), 0);
	strata_hotcache_pool_info pi;
	ck_assert_int_eq(strata_hotcache_pool(r->hc, &pi), 0);
	rig_sync_copy(r, r->pool, pi.base, r->pool_bytes);
}

static inline const uint8_t *rig_pool_entry(const rig *r, int g, int scale)
{
	size_t stride = strata_main_block_stride(r->c.B_hot);
	const uint8_t *blk = r->pool + (size_t)(g / r->c.B_hot) * stride;
	return scale ? blk + (size_t)r->c.B_hot * 576 + (size_t)(g % r->c.B_hot) * 8
		     : blk + (size_t)(g % r->c.B_hot) * 576;
}
static inline const uint8_t *rig_host_entry(const rig *r, int rl, int id, int scale)
{
	const uint8_t *blk = r->host[rl] + (size_t)(id / 64) * strata_main_block_stride(64);
	return scale ? blk + 64 * 576 + (size_t)(id % 64) * 8 : blk + (size_t)(id % 64) * 576;
}

/* The residency table is consistent: map and owner are inverse, slots stay in their
 * rl's range, and every resident entry's bytes equal its host original. */
static inline void rig_check_table(rig *r)
{
	rig_dump(r);
	int B = r->c.budget;
	for (int rl = 0; rl < r->c.n_rl; rl++) {
		const int32_t *m = r->map + (size_t)rl * r->c.max_entries;
		for (int id = 0; id < r->c.max_entries; id++) {
			int g = m[id];
			ck_assert_int_ge(g, -1);
			if (g < 0)
				continue;
			ck_assert_int_ge(g, rl * B);
			ck_assert_int_lt(g, (rl + 1) * B);
			ck_assert_int_eq(r->owner[g], id);
			ck_assert_mem_eq(rig_pool_entry(r, g, 0), rig_host_entry(r, rl, id, 0), 576);
			ck_assert_mem_eq(rig_pool_entry(r, g, 1), rig_host_entry(r, rl, id, 1), 8);
		}
		for (int s = 0; s < B; s++) {
			int id = r->owner[rl * B + s];
			if (id >= 0)
				ck_assert_int_eq(m[id], rl * B + s);
		}
		ck_assert_int_ge(r->hand[rl], 0);
		ck_assert_int_lt(r->hand[rl], B);
	}
}

/* A step's output: every selected id has a slot of its rl holding its bytes (unless
 * overflow is allowed), equal ids of a group share a slot, distinct ids never do.
 * Returns the number of -1 outputs for valid ids. */
static inline int rig_check_step(rig *r, int rows, int k, const int32_t *ids,
				 const int32_t *row_rl, const int32_t *out, int allow_overflow)
{
	rig_dump(r);
	int missing = 0;
	for (int a = 0; a < rows * k; a++) {
		int rl = row_rl[a / k], id = ids[a], g = out[a];
		if (id < 0) {
			ck_assert_int_eq(g, -1);
			continue;
		}
		if (g < 0) {
			ck_assert_msg(allow_overflow, "id %d of rl %d got no slot", id, rl);
			missing++;
			continue;
		}
		ck_assert_int_ge(g, rl * r->c.budget);
		ck_assert_int_lt(g, (rl + 1) * r->c.budget);
		ck_assert_int_eq(r->owner[g], id);
		ck_assert_mem_eq(rig_pool_entry(r, g, 0), rig_host_entry(r, rl, id, 0), 576);
		ck_assert_mem_eq(rig_pool_entry(r, g, 1), rig_host_entry(r, rl, id, 1), 8);
		/* same group (adjacent rows of rl): slot equality <=> id equality */
		for (int b2 = a + 1; b2 < rows * k && row_rl[b2 / k] == rl; b2++)
			if (ids[b2] >= 0 && out[b2] >= 0)
				ck_assert_int_eq(ids[b2] == id, out[b2] == g);
	}
	return missing;
}

/* A batch: a random ascending subset of rl, each with 1..rows_per_rl rows; row 0 of an
 * rl from its generator, further (MTP) rows share ~half of row 0. Returns rows. */
static inline int rig_batch(rig *r, strata_selgen **gen, int k, uint64_t *seed, int32_t *ids,
			    int32_t *row_rl)
{
	int rows = 0;
	for (int rl = 0; rl < r->c.n_rl; rl++) {
		if (tu_next(seed) % 4 == 0 && !(rl == r->c.n_rl - 1 && rows == 0))
			continue;
		int nr = 1 + (int)(tu_next(seed) % (uint64_t)r->c.rows_per_rl);
		int32_t *first = ids + (size_t)rows * k;
		strata_selgen_next(gen[rl], first);
		row_rl[rows++] = rl;
		for (int x = 1; x < nr; x++) {
			int32_t *row = ids + (size_t)rows * k;
			for (int j = 0; j < k; j++) {
				int32_t v = first[j];
				if (v >= 0 && tu_next(seed) % 2) {
					v = (int32_t)(tu_next(seed) % (uint64_t)r->c.max_entries);
					for (int q = 0; q < j; q++) /* keep the row's ids distinct */
						if (row[q] == v)
							v = -1;
					for (int q = j + 1; q < k; q++)
						if (first[q] == v)
							v = -1;
				}
				row[j] = v;
			}
			row_rl[rows++] = rl;
		}
	}
	return rows;
}

#endif
