/*
 * The selected-entry fetch of the HISPARSE and SWAPIN modes.
 *
 * HISPARSE drives prefetch/'s hot cache: one (request, CSA layer) cache per rl =
 * csa * n_req + r, each bound to the request's C4 main blocks on the pinned host tier.
 * Per layer one strata_hotcache_step() turns the indexer's ids into an index list over
 * the hot pool (lookup, CLOCK victims, one zero-copy gather of the misses), then a
 * strata_hotcache_predict() on a side stream pulls in what the next CSA layer is likely
 * to select while this layer attends. No host synchronisation.
 *
 * SWAPIN is the synchronous baseline (SGLang's HiSparse today): right after top-k,
 * on the compute stream, every selected entry is gathered from the host tier into a
 * staging pool (selection k of row r at slot r*topk + k), no cache, no prediction.
 *
 * Either way attention receives the entries in selected-id order with the bytes of
 * the host tier, which is what makes the outputs bit-identical to ALL_RESIDENT.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ref_eng_int.h"

/* Bytes of a staging pool of n entries (blocks of 64). */
static size_t stage_bytes(int n)
{
	return (size_t)((n + 63) / 64) * strata_main_block_stride(64);
}

/* direct_misses EARLY: the id -> entry map (zero: no epoch yet; an 8-byte word per
 * (request, C4 entry), counted as device bytes), the scratch and the miss counts. */
static int early_init(strata_ref_engine *e)
{
	const int R = e->cfg.n_req;
	size_t map_bytes = sizeof(uint64_t) * (size_t)R * e->cap4;
	e->pre_scratch_bytes = strata_k_attn_prestage_scratch(R);
	int err = strata_dev_alloc(e->dev, map_bytes, (void **)&e->d_stage_map);
	if (!err)
		err = strata_dev_memset(e->dev, e->d_stage_map, 0, map_bytes, NULL);
	if (!err)
		err = strata_dev_alloc(e->dev, e->pre_scratch_bytes, &e->d_pre_scratch);
	if (!err)
		err = strata_dev_memset(e->dev, e->d_pre_scratch, 0, e->pre_scratch_bytes, NULL);
	if (!err)
		err = strata_dev_alloc(e->dev, 3 * sizeof(unsigned long long),
				       (void **)&e->d_miss_counts);
	if (!err)
		err = strata_dev_memset(e->dev, e->d_miss_counts, 0, 3 * sizeof(unsigned long long),
					NULL);
	if (!err)
		err = strata_dev_sync(e->dev);
	if (!err)
		e->st.device_bytes += map_bytes + e->pre_scratch_bytes;
	return err;
}

int ref_fetch_layer_init(strata_ref_engine *e, ref_lay *L)
{
	const int R = e->cfg.n_req, K = e->m.index_topk;
	if (L->csa < 0)
		return 0;
	L->d_row_rl = e->d_rl_csa + (size_t)L->csa * R;
	if (e->cfg.mode == STRATA_REF_SWAPIN)
		return strata_dev_alloc(e->dev, sizeof(int32_t) * R * K, (void **)&L->d_src);
	return 0;
}

void ref_fetch_layer_free(strata_ref_engine *e, ref_lay *L)
{
	strata_dev_free(e->dev, L->d_src);
	L->d_src = NULL;
	L->d_row_rl = NULL;
}

int ref_fetch_init(strata_ref_engine *e)
{
	const int R = e->cfg.n_req, K = e->m.index_topk;
	int n_csa = strata_model_count(&e->m, 4), err;
	if (e->cfg.mode == STRATA_REF_SWAPIN) {
		size_t bytes = stage_bytes(R * K);
		if ((err = strata_dev_alloc(e->dev, bytes, (void **)&e->stage_pool)))
			return err;
		e->st.device_bytes += bytes;
		e->st.hot_bytes += bytes;
		e->hot_base = e->stage_pool;
		int32_t *rb = malloc(sizeof *rb * R);
		if (!rb)
			return -ENOMEM;
		for (int r = 0; r < R; r++)
			rb[r] = r * K;
		err = strata_dev_alloc(e->dev, sizeof *rb * R, (void **)&e->d_rowbase_k);
		if (!err)
			err = strata_dev_copy(e->dev, e->d_rowbase_k, rb, sizeof *rb * R, NULL);
		if (!err)
			err = strata_dev_sync(e->dev);
		free(rb);
		return err;
	}
	if (!n_csa)
		return 0;
	strata_hotcache_config c = STRATA_HOTCACHE_CONFIG_INIT;
	c.n_rl = n_csa * R;
	c.max_entries = e->cap4;
	c.topk = K;
	c.budget = e->hot_slots;
	/* a 128-token prefill chunk, or a decode step's batch: a row per request and CSA
	 * layer */
	c.max_append = e->stage_rows > n_csa * R ? e->stage_rows : n_csa * R;
	if ((err = strata_hotcache_create(e->dev, &c, &e->hc)))
		return err;
	if ((err = strata_stream_create(e->dev, &e->side)))
		return err;
	strata_hotcache_pool_info pi;
	if ((err = strata_hotcache_pool(e->hc, &pi)))
		return err;
	e->hot_base = pi.base;
	e->st.hot_bytes += (uint64_t)pi.n_blocks * pi.block_stride;
	/* + the residency table (an int32 per entry the request may have) */
	e->st.device_bytes += (uint64_t)pi.n_blocks * pi.block_stride +
			      (uint64_t)c.n_rl * c.max_entries * sizeof(int32_t);
	size_t req_bytes = (size_t)e->nblk * strata_main_block_stride(64);
	uint8_t **tab = malloc(sizeof *tab * e->nblk);
	if (!tab)
		return -ENOMEM;
	for (int l = 0; l < e->m.n_layers && !err; l++) {
		ref_lay *L = &e->lay[l];
		if (L->w.ratio != 4)
			continue;
		/* No entry exists yet: strata_hotcache_append() raises the count, so that
		 * prediction never pulls in an id that has not been written. */
		for (int r = 0; r < R && !err; r++) {
			for (int b = 0; b < e->nblk; b++)
				tab[b] = L->c4 + req_bytes * r + strata_main_block_stride(64) * b;
			err = strata_hotcache_bind_host_blocks(e->hc, L->csa * R + r, tab, e->nblk, 0,
							       NULL);
		}
	}
	free(tab);
	/* direct_misses reads the residency map; the per-row host bases are e->d_rowbase
	 * (the host tier has the all-resident pool's layout: r * cap4 + id) */
	if (!err && e->cfg.direct_misses)
		err = strata_hotcache_residency(e->hc, &e->hc_map, &e->hc_stride);
	if (!err && e->cfg.direct_misses)
		err = strata_event_create(e->dev, &e->ev_attended);
	if (!err && e->cfg.direct_misses) {
		/* staged or in place: AUTO stages when attention's plan for a CSA layer
		 * (top-k + window, this batch) has more than one head group, each of which
		 * would read every miss over the bus; and stages early when the indexer
		 * call gives every filter CTA a staging CTA beside it in one wave (fewer
		 * staging CTAs each walk several chunks, and their copies outlast top-k:
		 * 1M batch 8 was 1.64 of all-resident early against 1.05 staged by the
		 * map, bench/results/2026-11-30-h200-s6) */
		int early = e->cfg.direct_misses == STRATA_REF_MISS_EARLY;
		int stage = e->cfg.direct_misses == STRATA_REF_MISS_STAGED || early;
		if (e->cfg.direct_misses == STRATA_REF_MISS_AUTO) {
			strata_attn_params ap = { .n_rows = R, .heads = e->m.n_heads, .n_idx = K,
						  .n_win = 128,
						  .tensor_cores = e->cfg.attn_tensor_cores,
						  .spare_sms = e->cfg.attn_spare_sms };
			int g = strata_k_attn_head_groups(e->dev, &ap);
			if (g < 0)
				err = g;
			stage = g > 1;
			/* the default shape (one wave): early_ctas shapes the calls, not the
			 * choice */
			strata_attn_prestage_params shape = { .max_ctas = 0 };
			strata_indexer_params ip = { .heads = e->m.index_heads, .topk = K,
						     .n_req = R, .n_rows = R, .max_rows = 1,
						     .max_limit = e->cap4, .stage = &shape };
			int fx = 0, sx = err ? 0 : strata_k_indexer_stage_ctas(e->dev, &ip, &fx);
			if (sx < 0)
				err = sx;
			early = stage && fx > 0 && sx >= fx;
		}
		e->miss_path = early ? STRATA_REF_MISS_EARLY
			       : stage ? STRATA_REF_MISS_STAGED : STRATA_REF_MISS_IN_PLACE;
		if (!err && stage) {
			/* the map's entries (r * topk + k), then EARLY's 2 x topk per
			 * request (it stages misses among a superset of the top-k) */
			size_t bytes = stage_bytes(R * K * (early ? 3 : 1));
			if (!(err = strata_dev_alloc(e->dev, bytes, (void **)&e->miss_stage))) {
				e->st.device_bytes += bytes;
				e->st.hot_bytes += bytes;
			}
		}
		if (!err && early)
			err = early_init(e);
	}
	if (!err)
		err = strata_dev_alloc(e->dev, sizeof(int32_t) * e->stage_rows, (void **)&e->d_ap_rl);
	if (!err)
		err = strata_dev_alloc(e->dev, sizeof(int32_t) * e->stage_rows, (void **)&e->d_ap_ids);
	if (!err && !(e->h_ap = malloc(sizeof(int32_t) * 2 * e->stage_rows)))
		err = -ENOMEM;
	return err;
}

void ref_fetch_free(strata_ref_engine *e)
{
	if (e->side)
		strata_dev_sync(e->dev);
	strata_hotcache_destroy(e->hc);
	strata_stream_destroy(e->dev, e->side);
	strata_dev_free(e->dev, e->stage_pool);
	strata_dev_free(e->dev, e->miss_stage);
	e->miss_stage = NULL;
	strata_dev_free(e->dev, e->d_stage_map);
	strata_dev_free(e->dev, e->d_pre_scratch);
	strata_dev_free(e->dev, e->d_miss_counts);
	e->d_stage_map = NULL;
	e->d_pre_scratch = NULL;
	e->d_miss_counts = NULL;
	strata_dev_free(e->dev, e->d_rowbase_k);
	strata_dev_free(e->dev, e->d_ap_rl);
	strata_dev_free(e->dev, e->d_ap_ids);
	free(e->h_ap);
	e->hc = NULL;
	e->side = NULL;
}

int ref_fetch(strata_ref_engine *e, ref_lay *L)
{
	const int R = e->cfg.n_req, K = e->m.index_topk;
	int err;
	if (e->cfg.mode == STRATA_REF_SWAPIN) {
		strata_attn_map_params src = { .n_rows = R, .width = K, .ids = L->d_ids,
					       .row_base = e->d_rowbase, .out = L->d_src };
		strata_gather_params g = { .n = R * K, .src_ids = L->d_src,
					   .src = { .base = L->c4, .B = 64 },
					   .dst = { .base = e->stage_pool, .B = 64 } };
		strata_attn_map_params dst = { .n_rows = R, .width = K, .positional = 1,
					       .ids = L->d_ids, .row_base = e->d_rowbase_k,
					       .out = L->d_list };
		if ((err = strata_k_attn_map(e->dev, &src, NULL)) ||
		    (err = strata_k_gather(e->dev, &g, NULL)))
			return err;
		return strata_k_attn_map(e->dev, &dst, NULL);
	}
	if (e->cfg.direct_misses) {
		/* hits from the hot pool, misses in place from the host tier or staged (the
		 * map kernel copies them into miss_stage, entry r * topk + k): the map's only
		 * writers for this layer are appends (earlier on this stream) and the last
		 * step's admission (joined at that step's end); an appended entry without a
		 * hot slot is a miss, so its write-back must have landed */
		strata_attn_map_params mp = { .n_rows = R, .width = K, .ids = L->d_ids,
					      .row_base = e->d_rowbase, .out = L->d_list,
					      .map = e->hc_map, .row_map = L->d_row_rl,
					      .map_stride = e->hc_stride, .host = L->c4,
					      .host_B = 64, .stage = e->miss_stage, .stage_B = 64 };
		if (e->d_stage_map) { /* EARLY: take what the indexer call staged */
			mp.stage_map = e->d_stage_map;
			mp.epoch = e->pre_epoch;
			mp.miss_counts = e->d_miss_counts;
		}
		/* the write-backs of this step's appends: fenced once, after the caches
		 * were written (device_phase) */
		return strata_k_attn_map(e->dev, &mp, NULL);
	}
	strata_hotcache_batch b = { .rows = R, .k = K, .ids = L->d_ids, .row_rl = L->d_row_rl,
				    .out = L->d_list };
	if ((err = strata_hotcache_step(e->hc, &b, NULL)))
		return err;
	if (L->next_csa >= 0)
		err = strata_hotcache_predict(e->hc, R, e->lay[L->next_csa].d_row_rl, e->side);
	return err;
}

int ref_side_join(strata_ref_engine *e)
{
	if (!e->side_open)
		return 0;
	e->side_open = 0;
	return strata_stream_wait_event(e->dev, NULL, e->ev_side);
}

int ref_fetch_early(strata_ref_engine *e, ref_lay *L, strata_attn_prestage_params *pp,
		    int *use)
{
	*use = 0;
	if (!e->d_stage_map)
		return 0;
	const int R = e->cfg.n_req, K = e->m.index_topk;
	/* A new epoch every call, also with early_dry, so that the map never takes a
	 * word of an earlier layer's or step's call. The map row's writers are the
	 * appends (before the scan on the compute stream) and the last step's admission
	 * (done before this step's start); the host tier's appended entries were fenced
	 * before the scan. Stage entries, stage_map and scratch are reused only by the
	 * next layer's call, after this layer's map on the same stream. */
	e->pre_epoch++; /* one more each call: the GPU's slot counters go by its parity */
	if (e->cfg.early_dry)
		return 0;
	strata_attn_prestage_params p = {
		.map = e->hc_map, .row_map = L->d_row_rl, .map_stride = e->hc_stride,
		.row_base = e->d_rowbase, .host = L->c4, .host_B = 64,
		.stage = e->miss_stage, .stage_B = 64, .stage_first = (int64_t)R * K,
		.cap = e->cfg.early_slots ? e->cfg.early_slots : 2 * K, .max_ctas = e->cfg.early_ctas,
		.stage_map = e->d_stage_map, .epoch = e->pre_epoch,
		.scratch = e->d_pre_scratch, .scratch_bytes = e->pre_scratch_bytes,
		.n_staged = e->d_miss_counts + 2 };
	*pp = p;
	*use = 1;
	return 0;
}

int ref_fetch_admit(strata_ref_engine *e)
{
	if (e->cfg.mode != STRATA_REF_HISPARSE || !e->cfg.direct_misses || !e->hc)
		return 0;
	/* Admit the step's misses of every CSA layer (lookup, CLOCK victims, copies host
	 * -> pool) in one call, once the last attention has read its layer: nothing the
	 * side stream does can change the bytes attention reads, and the next step's
	 * first user of the compute stream joins the side stream (ref_side_join). One
	 * launch and one cross-stream wait per step: per layer, a side stream waiting
	 * on the compute stream's future points slowed the compute stream's own kernels
	 * (bench/results/2026-11-30-h200-s5). The rows are (request, CSA layer) pairs,
	 * each rl once, so one CTA each. */
	const int n_csa = strata_model_count(&e->m, 4);
	strata_hotcache_batch b = { .rows = n_csa * e->cfg.n_req, .k = e->m.index_topk,
				    .ids = e->d_ids_csa, .row_rl = e->d_rl_csa, .out = NULL };
	int err = strata_event_record(e->dev, e->ev_attended, NULL);
	if (!err)
		err = strata_stream_wait_event(e->dev, e->side, e->ev_attended);
	if (!err)
		err = strata_hotcache_step(e->hc, &b, e->side);
	for (int l = 0; l < e->m.n_layers && !err; l++)
		if (e->lay[l].w.ratio == 4) /* every CSA layer's misses are in by now */
			err = ref_trace_mark(e, l, STRATA_REF_T_SIDE, e->side);
	return err;
}

int ref_fetch_append(strata_ref_engine *e, ref_lay *L, const int *reqs, const int64_t *ids,
		     int n)
{
	if (!n)
		return 0;
	int32_t *rl = e->h_ap, *id = e->h_ap + e->stage_rows;
	for (int i = 0; i < n; i++) {
		rl[i] = L->csa * e->cfg.n_req + reqs[i];
		id[i] = (int32_t)ids[i];
	}
	int err = strata_dev_copy(e->dev, e->d_stage, e->h_stage, sizeof(float) * n * REF_D, NULL);
	if (!err)
		err = strata_dev_copy(e->dev, e->d_ap_rl, rl, sizeof(int32_t) * n, NULL);
	if (!err)
		err = strata_dev_copy(e->dev, e->d_ap_ids, id, sizeof(int32_t) * n, NULL);
	if (!err)
		err = strata_hotcache_append(e->hc, n, e->d_ap_rl, e->d_ap_ids, e->d_stage, NULL,
					     e->side);
	return err;
}

int ref_fetch_filled(strata_ref_engine *e, int req, int n_entries)
{
	if (!e->hc)
		return 0;
	uint8_t **tab = malloc(sizeof *tab * e->nblk);
	if (!tab)
		return -ENOMEM;
	size_t req_bytes = (size_t)e->nblk * strata_main_block_stride(64);
	int err = 0;
	for (int l = 0; l < e->m.n_layers && !err; l++) {
		ref_lay *L = &e->lay[l];
		if (L->w.ratio != 4)
			continue;
		for (int b = 0; b < e->nblk; b++)
			tab[b] = L->c4 + req_bytes * req + strata_main_block_stride(64) * b;
		err = strata_hotcache_bind_host_blocks(e->hc, L->csa * e->cfg.n_req + req, tab,
						       e->nblk, n_entries, NULL);
	}
	free(tab);
	return err;
}

int ref_fetch_append_dev(strata_ref_engine *e, const int32_t *rl, const int32_t *ids,
			 const float *src, int n)
{
	if (!n)
		return 0;
	return strata_hotcache_append(e->hc, n, rl, ids, src, NULL, e->side);
}
