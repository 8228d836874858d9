/*
 * The selected-entry fetch of the HISPARSE and SWAPIN modes.
 *
 * This is the engine-local stand-in for prefetch/'s hot cache: the selected ids come
 * back to the host, a clock (second-chance) cache maps (request, entry) to a slot of
 * the device hot pool, and each miss is copied from the pinned host tier into its
 * slot (576 data bytes and 8 scale bytes: the block layout splits them). Slots used
 * by the current step are never evicted, so a step's selections always fit (the pool
 * holds at least n_req x top-k entries). SWAPIN has no cache: selection k of row r is
 * copied into slot r*topk + k every step. Either way attention receives the entries
 * in selected-id order with the bytes of the host tier, which is what makes the
 * outputs bit-identical to ALL_RESIDENT.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ref_eng_int.h"

int ref_fetch_init(strata_ref_engine *e, ref_lay *L)
{
	size_t blocks = ((size_t)e->hot_slots + 63) / 64;
	size_t bytes = blocks * strata_main_block_stride(64);
	int err = strata_dev_alloc(e->dev, bytes, (void **)&L->hot);
	if (err)
		return err;
	e->st.device_bytes += bytes;
	e->st.hot_bytes += bytes;
	if ((err = strata_dev_memset(e->dev, L->hot, 0, bytes, NULL)))
		return err;
	if (e->cfg.mode != STRATA_REF_HISPARSE)
		return 0;
	size_t keys = (size_t)e->cfg.n_req * e->cap4;
	L->res = malloc(sizeof *L->res * keys);
	L->owner = malloc(sizeof *L->owner * e->hot_slots);
	L->used = calloc((size_t)e->hot_slots, sizeof *L->used);
	L->ref = calloc((size_t)e->hot_slots, 1);
	if (!L->res || !L->owner || !L->used || !L->ref)
		return -ENOMEM;
	for (size_t i = 0; i < keys; i++)
		L->res[i] = -1;
	for (int i = 0; i < e->hot_slots; i++)
		L->owner[i] = -1;
	return 0;
}

void ref_fetch_free(strata_ref_engine *e, ref_lay *L)
{
	strata_dev_free(e->dev, L->hot);
	free(L->res);
	free(L->owner);
	free(L->used);
	free(L->ref);
}

static int copy_entry(strata_ref_engine *e, ref_lay *L, int64_t src, int64_t dst)
{
	const size_t stride = strata_main_block_stride(64);
	const uint8_t *sb = L->c4 + (size_t)(src / 64) * stride;
	uint8_t *db = L->hot + (size_t)(dst / 64) * stride;
	int err = strata_dev_copy(e->dev, db + (dst % 64) * 576, sb + (src % 64) * 576, 576, NULL);
	if (!err)
		err = strata_dev_copy(e->dev, db + 64 * 576 + (dst % 64) * 8,
				      sb + 64 * 576 + (src % 64) * 8, 8, NULL);
	e->st.fetched_bytes += STRATA_MAIN_ENTRY_BYTES;
	return err;
}

static int victim(strata_ref_engine *e, ref_lay *L)
{
	for (int tries = 0; tries < 2 * e->hot_slots + 1; tries++) {
		int s = L->hand;
		L->hand = (L->hand + 1) % e->hot_slots;
		if (L->used[s] == e->stamp)
			continue;
		if (L->ref[s]) {
			L->ref[s] = 0;
			continue;
		}
		return s;
	}
	return -1; /* cannot happen while hot_slots >= n_req * topk */
}

int ref_fetch(strata_ref_engine *e, ref_lay *L)
{
	const int R = e->cfg.n_req, K = e->m.index_topk;
	int err = strata_dev_copy(e->dev, L->h_ids, L->d_ids, sizeof(int32_t) * R * K, NULL);
	if (!err)
		err = strata_dev_sync(e->dev);
	if (err)
		return err;
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K && !err; k++) {
			int32_t id = L->h_ids[r * K + k];
			int32_t *out = &L->h_list[r * K + k];
			int64_t key = (int64_t)r * e->cap4 + id;
			if (id < 0) {
				*out = -1;
			} else if (e->cfg.mode == STRATA_REF_SWAPIN) {
				*out = r * K + k;
				e->st.misses++;
				err = copy_entry(e, L, key, *out);
			} else if (L->res[key] >= 0) {
				*out = L->res[key];
				L->used[*out] = e->stamp;
				L->ref[*out] = 1;
				e->st.hits++;
			} else {
				int s = victim(e, L);
				if (s < 0)
					return -ENOSPC;
				if (L->owner[s] >= 0)
					L->res[L->owner[s]] = -1;
				L->owner[s] = key;
				L->res[key] = s;
				L->used[s] = e->stamp;
				L->ref[s] = 1;
				*out = s;
				e->st.misses++;
				err = copy_entry(e, L, key, s);
			}
		}
	if (!err)
		err = strata_dev_copy(e->dev, L->d_list, L->h_list, sizeof(int32_t) * R * K, NULL);
	return err;
}
