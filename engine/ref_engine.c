/*
 * The reference engine: cache layout, prefill, the decode step and its three modes
 * (engine.h). Model math lives in ref_model.c, the selected-entry fetch in
 * ref_fetch.c.
 *
 * Layout. Every cache is sized per 256-token logical block (FORMATS.md section 2):
 * request r owns blocks [r*nblk, (r+1)*nblk) of each per-layer pool, so its C4 entry
 * j is slot r*cap4 + j (cap4 = 64*nblk), its C128 entry j slot r*cap128 + j
 * (cap128 = 2*nblk), its index key j slot r*cap4 + j of the index pages, and its
 * window ring slot r*128 + pos%128. Model math runs on the host in fp32; quantisation,
 * the indexer and attention run as kernels on the engine's device.
 *
 * Order inside a step: every layer's caches are written first (window entry of the
 * new token, compressor rows, any completed C4/C128 entry and index key), then the
 * attention side runs layer by layer: a CSA layer scans and selects over the
 * completed entries j < (t+1) div 4, which include one completed by this token.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine/ref_eng_int.h"

static int dalloc(strata_ref_engine *e, size_t bytes, void *out, uint64_t *acct)
{
	int err = strata_dev_alloc(e->dev, bytes, (void **)out);
	if (!err) {
		err = strata_dev_memset(e->dev, *(void **)out, 0, bytes, NULL);
		if (acct)
			*acct += bytes;
	}
	return err;
}

static int halloc(strata_ref_engine *e, size_t bytes, void *out)
{
	int err = strata_dev_host_alloc(e->dev, bytes, (void **)out);
	if (!err) {
		memset(*(void **)out, 0, bytes);
		e->st.host_bytes += bytes;
	}
	return err;
}

/* The C4 host tier of a layer as a tiers/ host pool of one page: 2 MiB pages where
 * the system has them (hugetlb, else THP), pinned and mapped. Fewer pages mean fewer
 * IOMMU translations for the device's scattered reads of single entries. */
static int huge_alloc(strata_ref_engine *e, ref_lay *L, size_t bytes)
{
	strata_pool_config pc = STRATA_POOL_CONFIG_INIT;
	pc.page_bytes = bytes;
	pc.capacity_pages = 1;
	int err = strata_host_pool_create(e->dev, &pc, &L->c4_pool);
	if (err)
		return err;
	L->c4 = strata_host_pool_base(L->c4_pool);
	e->st.host_bytes += bytes;
	e->st.host_mem = (int)strata_host_pool_mem(L->c4_pool);
	return 0;
}

static int layer_alloc(strata_ref_engine *e, int l)
{
	ref_lay *L = &e->lay[l];
	const strata_model *m = &e->m;
	const int R = e->cfg.n_req, K = m->index_topk;
	uint64_t *dev_acct = &e->st.device_bytes;
	int err = ref_layer_init(&L->w, m, l, e->cfg.seed);
	if (err)
		return err;
	size_t win_bytes = (size_t)R * REF_WIN_BLOCKS * strata_main_block_stride(64);
	if ((err = dalloc(e, win_bytes, &L->win, dev_acct)))
		return err;
	if ((err = dalloc(e, sizeof(float) * m->n_heads, &L->d_sink, NULL)) ||
	    (err = strata_dev_copy(e->dev, L->d_sink, L->w.sink, sizeof(float) * m->n_heads, NULL)))
		return err;
	size_t qn = (size_t)R * m->n_heads * REF_D;
	if ((err = dalloc(e, sizeof(float) * qn, &L->d_q, NULL)) ||
	    (err = dalloc(e, sizeof(float) * qn, &L->d_out, NULL)))
		return err;
	L->h_out = calloc(qn, sizeof(float));
	if (!L->h_out)
		return -ENOMEM;
	if (L->w.ratio) {
		L->cstate = malloc(sizeof(float) * ref_comp_state_floats(&L->w.main) * R);
		if (!L->cstate)
			return -ENOMEM;
		for (int r = 0; r < R; r++)
			ref_comp_state_reset(&L->w.main, L->cstate + ref_comp_state_floats(&L->w.main) * r);
	}
	if (L->w.ratio == 128) {
		size_t bytes = (size_t)R * e->nblk * strata_main_block_stride(2);
		return dalloc(e, bytes, &L->c128, dev_acct);
	}
	if (L->w.ratio != 4)
		return 0;
	L->istate = malloc(sizeof(float) * ref_comp_state_floats(&L->w.idx) * R);
	if (!L->istate)
		return -ENOMEM;
	for (int r = 0; r < R; r++)
		ref_comp_state_reset(&L->w.idx, L->istate + ref_comp_state_floats(&L->w.idx) * r);
	size_t pages = (size_t)R * e->nblk * 64 * strata_index_entry_bytes(m->index_fmt);
	if ((err = dalloc(e, pages, &L->pages, dev_acct)))
		return err;
	size_t c4 = (size_t)R * e->nblk * strata_main_block_stride(64);
	e->st.c4_main_bytes += c4;
	if (e->cfg.mode == STRATA_REF_ALL_RESIDENT)
		err = dalloc(e, c4, &L->c4, dev_acct);
	else if (e->cfg.host_tier == STRATA_REF_HOST_HUGE)
		err = huge_alloc(e, L, c4);
	else if (e->cfg.host_tier == STRATA_REF_HOST_DEVICE)
		err = dalloc(e, c4, &L->c4, dev_acct);
	else
		err = halloc(e, c4, &L->c4);
	if (err)
		return err;
	size_t iqn = (size_t)R * m->index_heads;
	if ((err = dalloc(e, sizeof(uint16_t) * iqn * REF_ID, &L->d_iq, NULL)) ||
	    (err = dalloc(e, sizeof(float) * iqn, &L->d_iw, NULL)) ||
	    (L->csa >= 0 ? (L->d_ids = e->d_ids_csa + (size_t)L->csa * R * K, 0)
			 : (err = dalloc(e, sizeof(int32_t) * R * K, &L->d_ids, NULL))) ||
	    (err = dalloc(e, sizeof(int32_t) * R * K, &L->d_list, NULL)))
		return err;
	L->h_ids = malloc(sizeof(int32_t) * R * K);
	L->h_list = malloc(sizeof(int32_t) * R * K);
	if (!L->h_ids || !L->h_list)
		return -ENOMEM;
	for (int i = 0; i < R * K; i++)
		L->h_ids[i] = -1;
	if (e->cfg.mode != STRATA_REF_ALL_RESIDENT)
		return ref_fetch_layer_init(e, L);
	return 0;
}

static void layer_free(strata_ref_engine *e, ref_lay *L)
{
	strata_dev_free(e->dev, L->win);
	strata_dev_free(e->dev, L->d_sink);
	strata_dev_free(e->dev, L->d_q);
	strata_dev_free(e->dev, L->d_out);
	strata_dev_free(e->dev, L->c128);
	strata_dev_free(e->dev, L->pages);
	if (e->cfg.mode == STRATA_REF_ALL_RESIDENT || e->cfg.host_tier == STRATA_REF_HOST_DEVICE)
		strata_dev_free(e->dev, L->c4);
	else if (L->c4_pool)
		strata_host_pool_destroy(L->c4_pool);
	else
		strata_dev_host_free(e->dev, L->c4);
	L->c4_pool = NULL;
	strata_dev_free(e->dev, L->d_iq);
	strata_dev_free(e->dev, L->d_iw);
	if (L->csa < 0) /* a CSA layer's are part of e->d_ids_csa */
		strata_dev_free(e->dev, L->d_ids);
	strata_dev_free(e->dev, L->d_list);
	ref_fetch_layer_free(e, L);
	free(L->h_out);
	free(L->h_ids);
	free(L->h_list);
	free(L->cstate);
	free(L->istate);
	ref_layer_free(&L->w);
}

void strata_ref_engine_destroy(strata_ref_engine *e)
{
	if (!e)
		return;
	ref_fetch_free(e);
	if (e->lay) {
		strata_dev_sync(e->dev);
		for (int l = 0; l < e->m.n_layers; l++)
			layer_free(e, &e->lay[l]);
	}
	free(e->lay);
	strata_dev_free(e->dev, e->d_ids_csa);
	strata_dev_free(e->dev, e->d_rl_csa);
	strata_event_destroy(e->dev, e->ev_attended);
	strata_dev_free(e->dev, e->d_pt);
	strata_dev_free(e->dev, e->tmpl_c4);
	strata_dev_free(e->dev, e->tmpl_pages);
	strata_dev_free(e->dev, e->tmpl_c128);
	strata_dev_free(e->dev, e->d_rowreq);
	strata_dev_free(e->dev, e->d_rowlim);
	strata_dev_free(e->dev, e->d_rowbase);
	strata_dev_free(e->dev, e->d_win_idx);
	strata_dev_free(e->dev, e->d_c128_idx);
	strata_dev_free(e->dev, e->d_scratch);
	strata_dev_free(e->dev, e->d_attn_scratch);
	strata_dev_free(e->dev, e->d_stage);
	strata_dev_free(e->dev, e->d_slots);
	strata_event_destroy(e->dev, e->ev0);
	strata_event_destroy(e->dev, e->ev1);
	strata_event_destroy(e->dev, e->ev_side);
	ref_step_free(e);
	free(e->in);
	free(e->len);
	free(e->h_stage);
	free(e->h_slots);
	free(e->h_hid);
	free(e->h_q);
	free(e->h_win_idx);
	free(e->h_c128_idx);
	free(e->hashes);
	free(e->tokens);
	free(e);
}

int strata_ref_engine_create(strata_dev *dev, const strata_ref_config *cfg,
			     strata_ref_engine **out)
{
	if (!dev || !cfg || !out || cfg->size < sizeof *cfg || cfg->n_req < 1 ||
	    cfg->max_ctx < 1 || cfg->mode < STRATA_REF_ALL_RESIDENT || cfg->mode > STRATA_REF_SWAPIN ||
	    (cfg->direct_misses != STRATA_REF_MISS_COPY &&
	     (cfg->direct_misses < STRATA_REF_MISS_IN_PLACE || cfg->direct_misses > STRATA_REF_MISS_EARLY ||
	      cfg->mode != STRATA_REF_HISPARSE)) ||
	    (cfg->attn_tensor_cores != 0 && cfg->attn_tensor_cores != 1) ||
	    cfg->host_tier < STRATA_REF_HOST_PINNED || cfg->host_tier > STRATA_REF_HOST_DEVICE ||
	    cfg->attn_spare_sms < 0 || cfg->early_ctas < 0 || cfg->early_slots < 0 ||
	    (cfg->early_dry != 0 && cfg->early_dry != 1) ||
	    cfg->early_slots > 2 * cfg->model.index_topk)
		return -EINVAL;
	int err = strata_model_validate(&cfg->model);
	if (err)
		return err;
	if (cfg->model.window != 128)
		return -EINVAL; /* the ring layout assumes V4's 128-token window */
	strata_ref_engine *e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	*out = NULL;
	e->dev = dev;
	e->cfg = *cfg;
	e->m = cfg->model;
	const int R = cfg->n_req, K = e->m.index_topk;
	e->nblk = (cfg->max_ctx + STRATA_BLOCK_TOKENS - 1) / STRATA_BLOCK_TOKENS;
	e->cap4 = e->nblk * 64;
	e->cap128 = e->nblk * 2;
	e->hot_slots = cfg->hot_slots ? cfg->hot_slots : 2 * K;
	if (e->hot_slots < K) {
		ELOG(STRATA_LOG_WARN, "engine: hot cache of %d entries per request and layer < "
		     "top-k %d", e->hot_slots, K);
		free(e);
		return -EINVAL;
	}
	ref_rope_freqs(e->freqs);
	e->stage_rows = R > 128 ? R : 128;
	e->in = calloc((size_t)R, sizeof *e->in);
	e->len = calloc((size_t)R, sizeof *e->len);
	e->h_stage = malloc(sizeof(float) * (size_t)e->stage_rows * REF_D);
	e->h_slots = malloc(sizeof(int64_t) * (size_t)e->stage_rows);
	e->h_hid = malloc(sizeof(float) * (size_t)e->stage_rows * REF_HID);
	e->h_q = malloc(sizeof(float) * (size_t)R * e->m.n_heads * REF_D);
	e->h_win_idx = malloc(sizeof(int32_t) * (size_t)R * 128);
	e->h_c128_idx = malloc(sizeof(int32_t) * (size_t)R * e->cap128);
	e->lay = calloc((size_t)e->m.n_layers, sizeof *e->lay);
	err = -ENOMEM;
	if (!e->in || !e->len || !e->h_stage || !e->h_slots || !e->h_hid || !e->h_q ||
	    !e->h_win_idx || !e->h_c128_idx || !e->lay)
		goto fail;
	for (int r = 0; r < R; r++)
		ref_input_init(&e->in[r], cfg->seed, r, cfg->inputs);
	if ((err = dalloc(e, sizeof(float) * (size_t)e->stage_rows * REF_D, &e->d_stage, NULL)) ||
	    (err = dalloc(e, sizeof(int64_t) * (size_t)e->stage_rows, &e->d_slots, NULL)) ||
	    (err = dalloc(e, sizeof(int32_t) * (size_t)R * e->nblk, &e->d_pt, NULL)) ||
	    (err = dalloc(e, sizeof(int32_t) * (R + 1), &e->d_rowreq, NULL)) ||
	    (err = dalloc(e, sizeof(int32_t) * R, &e->d_rowlim, NULL)) ||
	    (err = dalloc(e, sizeof(int32_t) * R, &e->d_rowbase, NULL)) ||
	    (err = dalloc(e, sizeof(int32_t) * R * 128, &e->d_win_idx, NULL)) ||
	    (err = dalloc(e, sizeof(int32_t) * (size_t)R * e->cap128, &e->d_c128_idx, NULL)))
		goto fail;
	{
		/* Identity page table and row maps: request r's page p is page r*nblk + p. */
		int32_t *pt = malloc(sizeof(int32_t) * (size_t)R * e->nblk);
		int32_t *rr = malloc(sizeof(int32_t) * (R + 1)), *rb = malloc(sizeof(int32_t) * R);
		err = -ENOMEM;
		if (pt && rr && rb) {
			for (int i = 0; i < R * e->nblk; i++)
				pt[i] = i;
			for (int r = 0; r <= R; r++)
				rr[r] = r; /* one query row per request */
			for (int r = 0; r < R; r++) {
				rb[r] = r * e->cap4;
			}
			err = strata_dev_copy(dev, e->d_pt, pt, sizeof(int32_t) * (size_t)R * e->nblk, NULL);
			if (!err)
				err = strata_dev_copy(dev, e->d_rowreq, rr, sizeof(int32_t) * (R + 1), NULL);
			if (!err)
				err = strata_dev_copy(dev, e->d_rowbase, rb, sizeof(int32_t) * R, NULL);
			if (!err)
				err = strata_dev_sync(dev); /* pageable sources: keep them alive */
		}
		free(pt);
		free(rr);
		free(rb);
		if (err)
			goto fail;
	}
	for (int l = 0, csa = 0; l < e->m.n_layers; l++) {
		e->lay[l].csa = e->m.ratio[l] == 4 ? csa++ : -1;
		e->lay[l].next_csa = -1;
		for (int j = l + 1; j < e->m.n_layers && e->lay[l].next_csa < 0; j++)
			if (e->m.ratio[j] == 4)
				e->lay[l].next_csa = j;
	}
	{
		const int n_csa = strata_model_count(&e->m, 4);
		if (n_csa && (err = dalloc(e, sizeof(int32_t) * n_csa * R * K, &e->d_ids_csa, NULL)))
			goto fail;
		if (n_csa && cfg->mode != STRATA_REF_ALL_RESIDENT) {
			int32_t *rl = malloc(sizeof *rl * n_csa * R);
			if (!rl) {
				err = -ENOMEM;
				goto fail;
			}
			for (int i = 0; i < n_csa * R; i++)
				rl[i] = i; /* row csa * R + r is (request r, CSA layer csa) */
			err = dalloc(e, sizeof *rl * n_csa * R, &e->d_rl_csa, NULL);
			if (!err)
				err = strata_dev_copy(dev, e->d_rl_csa, rl, sizeof *rl * n_csa * R, NULL);
			if (!err)
				err = strata_dev_sync(dev);
			free(rl);
			if (err)
				goto fail;
		}
	}
	for (int l = 0; l < e->m.n_layers; l++)
		if ((err = layer_alloc(e, l)))
			goto fail;
	if (cfg->mode != STRATA_REF_ALL_RESIDENT && (err = ref_fetch_init(e)))
		goto fail;
	{
		strata_indexer_params ip = { .fmt = e->m.index_fmt, .heads = e->m.index_heads,
					     .topk = K, .n_req = R, .n_rows = R, .max_rows = 1,
					     .max_limit = e->cap4,
					     .max_pages = e->nblk, .B = 64 };
		e->scratch_bytes = strata_k_indexer_scratch(dev, &ip);
		if (e->scratch_bytes && (err = dalloc(e, e->scratch_bytes, &e->d_scratch, NULL)))
			goto fail;
	}
	{
		/* Sized for the longest list attend() passes (top-k or every C128 entry,
		 * plus the window); the size never shrinks with longer lists, so one
		 * buffer serves every layer, and every call with these shapes splits the
		 * same way: HiSparse and all-resident stay bit-identical. */
		strata_attn_params ap = { .n_rows = R, .heads = e->m.n_heads,
					  .n_idx = K > e->cap128 ? K : e->cap128, .n_win = 128,
					  .tensor_cores = cfg->attn_tensor_cores,
					  .spare_sms = cfg->attn_spare_sms };
		e->attn_scratch_bytes = strata_k_attn_scratch(dev, &ap);
		if (e->attn_scratch_bytes &&
		    (err = dalloc(e, e->attn_scratch_bytes, &e->d_attn_scratch, NULL)))
			goto fail;
	}
	if ((err = strata_event_create(dev, &e->ev0)) || (err = strata_event_create(dev, &e->ev1)) ||
	    (err = strata_event_create(dev, &e->ev_side)) || (err = ref_step_init(e)))
		goto fail;
	*out = e;
	return 0;
fail:
	strata_ref_engine_destroy(e);
	return err;
}

/* ---- writing the caches ------------------------------------------------------------ */

static int encode_main(strata_ref_engine *e, uint8_t *pool, int B, int n)
{
	if (!n)
		return 0;
	int err = strata_dev_copy(e->dev, e->d_stage, e->h_stage, sizeof(float) * n * REF_D, NULL);
	if (!err)
		err = strata_dev_copy(e->dev, e->d_slots, e->h_slots, sizeof(int64_t) * n, NULL);
	strata_main_encode_params p = { .src = e->d_stage, .slots = e->d_slots, .n = n, .B = B,
					 .pool = pool };
	return err ? err : strata_k_main_encode(e->dev, &p, NULL);
}

static int encode_index(strata_ref_engine *e, uint8_t *pages, int n)
{
	if (!n)
		return 0;
	int err = strata_dev_copy(e->dev, e->d_stage, e->h_stage, sizeof(float) * n * REF_ID, NULL);
	if (!err)
		err = strata_dev_copy(e->dev, e->d_slots, e->h_slots, sizeof(int64_t) * n, NULL);
	strata_index_encode_params p = { .fmt = e->m.index_fmt, .src = e->d_stage,
					 .slots = e->d_slots, .n = n, .B = 64, .pages = pages };
	return err ? err : strata_k_index_encode(e->dev, &p, NULL);
}

/* Append n tokens: token k belongs to request req[k] at position pos[k] with hidden
 * state e->h_hid[k]. At most one token per ring slot per call (n <= 128 for one
 * request, or one token per request). */
int ref_append_tokens(strata_ref_engine *e, const int *req, const int64_t *pos, int n)
{
	int err = 0;
	for (int l = 0; l < e->m.n_layers && !err; l++) {
		ref_lay *L = &e->lay[l];
		for (int k = 0; k < n; k++) {
			ref_window_entry(&L->w, e->h_hid + (size_t)k * REF_HID, pos[k], e->freqs,
					 e->h_stage + (size_t)k * REF_D);
			e->h_slots[k] = (int64_t)req[k] * 128 + pos[k] % 128;
		}
		if ((err = encode_main(e, L->win, 64, n)))
			break;
		if (!L->w.ratio)
			continue;
		/* Main compressor: completed entries go to the C4 or C128 pool. */
		size_t sf = ref_comp_state_floats(&L->w.main);
		int cnt = 0;
		for (int k = 0; k < n; k++) {
			float *st = L->cstate + sf * req[k];
			if (ref_comp_push(&L->w.main, st, e->h_hid + (size_t)k * REF_HID, pos[k],
					  e->freqs, e->h_stage + (size_t)cnt * REF_D)) {
				int64_t id = pos[k] / L->w.ratio;
				int64_t cap = L->w.ratio == 4 ? e->cap4 : e->cap128;
				e->h_slots[cnt++] = (int64_t)req[k] * cap + id;
			}
		}
		if (L->w.ratio == 128) {
			err = encode_main(e, L->c128, 2, cnt);
			continue;
		}
		if (e->cfg.mode == STRATA_REF_HISPARSE) {
			/* Through the hot cache, which also learns that the entries exist. */
			int rq[cnt > 0 ? cnt : 1];
			int64_t id[cnt > 0 ? cnt : 1];
			for (int k = 0, c = 0; k < n; k++)
				if ((pos[k] + 1) % 4 == 0) {
					rq[c] = req[k];
					id[c++] = pos[k] / 4;
				}
			err = ref_fetch_append(e, L, rq, id, cnt);
		} else {
			err = encode_main(e, L->c4, 64, cnt);
		}
		if (err)
			break;
		/* Indexer compressor: keys are normalised, roped, then Hadamard-rotated. */
		sf = ref_comp_state_floats(&L->w.idx);
		cnt = 0;
		for (int k = 0; k < n; k++) {
			float *st = L->istate + sf * req[k];
			float *key = e->h_stage + (size_t)cnt * REF_ID;
			if (ref_comp_push(&L->w.idx, st, e->h_hid + (size_t)k * REF_HID, pos[k],
					  e->freqs, key)) {
				ref_hadamard128(key);
				e->h_slots[cnt++] = (int64_t)req[k] * e->cap4 + pos[k] / 4;
			}
		}
		err = encode_index(e, L->pages, cnt);
	}
	/* The staging buffers are reused by the next call: the copies out of pageable
	 * memory are synchronous, and the kernels run in stream order. */
	return err;
}

int strata_ref_engine_prefill(strata_ref_engine *e, int req, int n_tokens)
{
	if (!e || req < 0 || req >= e->cfg.n_req || n_tokens < 0)
		return -EINVAL;
	if ((int64_t)e->len[req] + n_tokens > e->cfg.max_ctx)
		return -ENOSPC;
	int jerr = ref_side_join(e); /* the last step's side work touches the hot cache */
	if (jerr)
		return jerr;
	int reqs[128];
	int64_t pos[128];
	while (n_tokens > 0) {
		int n = n_tokens < 128 ? n_tokens : 128;
		for (int k = 0; k < n; k++) {
			reqs[k] = req;
			pos[k] = e->len[req] + k;
			ref_input_next(&e->in[req], e->h_hid + (size_t)k * REF_HID);
		}
		int err = ref_append_tokens(e, reqs, pos, n);
		if (err)
			return err;
		e->len[req] += n;
		n_tokens -= n;
	}
	return 0;
}

int strata_ref_engine_length(const strata_ref_engine *e, int req)
{
	return (!e || req < 0 || req >= e->cfg.n_req) ? -1 : e->len[req];
}

/* ---- synthetic fill (benchmarks) --------------------------------------------------- */

/* Template entries for the first n tokens, generated once with the first CSA / HCA
 * layer's weights from a dedicated input stream and kept on the device. */
static int fill_template(strata_ref_engine *e, int n_tokens)
{
	if (e->tmpl_tokens >= n_tokens)
		return 0;
	strata_dev_free(e->dev, e->tmpl_c4);
	strata_dev_free(e->dev, e->tmpl_pages);
	strata_dev_free(e->dev, e->tmpl_c128);
	e->tmpl_c4 = e->tmpl_pages = e->tmpl_c128 = NULL;
	e->tmpl_tokens = 0;
	const ref_layer_w *w4 = NULL, *w128 = NULL;
	for (int l = 0; l < e->m.n_layers; l++) {
		if (!w4 && e->lay[l].w.ratio == 4)
			w4 = &e->lay[l].w;
		if (!w128 && e->lay[l].w.ratio == 128)
			w128 = &e->lay[l].w;
	}
	int nb = (n_tokens + 255) / 256, err;
	size_t c4b = (size_t)nb * strata_main_block_stride(64);
	size_t pb = (size_t)nb * 64 * strata_index_entry_bytes(e->m.index_fmt);
	size_t c128b = (size_t)nb * strata_main_block_stride(2);
	if ((err = dalloc(e, c4b, &e->tmpl_c4, NULL)) || (err = dalloc(e, pb, &e->tmpl_pages, NULL)) ||
	    (err = dalloc(e, c128b, &e->tmpl_c128, NULL)))
		return err;
	ref_input in;
	ref_input_init(&in, e->cfg.seed ^ 0xf111ull, 0, e->cfg.inputs);
	float h[REF_HID];
	int n4 = n_tokens / 4, cnt = 0;
	int cntk = 0;
	float *keys = malloc(sizeof(float) * (size_t)e->stage_rows * REF_ID);
	int64_t *kslots = malloc(sizeof(int64_t) * (size_t)e->stage_rows);
	if (!keys || !kslots) {
		free(keys);
		free(kslots);
		return -ENOMEM;
	}
	for (int j = 0; j < n4 && !err; j++) {
		for (int k = 0; k < 4; k++)
			ref_input_next(&in, h);
		/* An entry resembling its group: the compressor's kv base applied to the last
		 * token's state, normalised and roped at the group's start. */
		if (w4) {
			float *x = e->h_stage + (size_t)cnt * REF_D;
			for (int i = 0; i < REF_D; i++) {
				float s = 0.0f;
				for (int q = 0; q < REF_HID; q++)
					s += w4->main.w[(size_t)i * REF_HID + q] * h[q];
				x[i] = s;
			}
			ref_rmsnorm(x, REF_D, w4->main.norm_w);
			ref_rope(x + REF_D - 64, e->freqs, 4 * (int64_t)j);
			e->h_slots[cnt++] = j;
			float *kk = keys + (size_t)cntk * REF_ID;
			for (int i = 0; i < REF_ID; i++) {
				float s = 0.0f;
				for (int q = 0; q < REF_HID; q++)
					s += w4->idx.w[(size_t)i * REF_HID + q] * h[q];
				kk[i] = s;
			}
			ref_rmsnorm(kk, REF_ID, w4->idx.norm_w);
			ref_rope(kk + REF_ID - 64, e->freqs, 4 * (int64_t)j);
			ref_hadamard128(kk);
			kslots[cntk++] = j;
		}
		if (cnt == e->stage_rows || (j == n4 - 1 && cnt)) {
			err = encode_main(e, e->tmpl_c4, 64, cnt);
			if (!err) {
				memcpy(e->h_stage, keys, sizeof(float) * (size_t)cntk * REF_ID);
				memcpy(e->h_slots, kslots, sizeof(int64_t) * (size_t)cntk);
				err = encode_index(e, e->tmpl_pages, cntk);
			}
			cnt = cntk = 0;
		}
	}
	free(keys);
	free(kslots);
	/* C128: one entry per 128 tokens from the same stream's statistics. */
	for (int j = 0; j < n_tokens / 128 && w128 && !err; j++) {
		ref_input_next(&in, h);
		float *x = e->h_stage;
		for (int i = 0; i < REF_D; i++) {
			float s = 0.0f;
			for (int q = 0; q < REF_HID; q++)
				s += w128->main.w[(size_t)i * REF_HID + q] * h[q];
			x[i] = s;
		}
		ref_rmsnorm(x, REF_D, w128->main.norm_w);
		ref_rope(x + REF_D - 64, e->freqs, 128 * (int64_t)j);
		e->h_slots[0] = j;
		err = encode_main(e, e->tmpl_c128, 2, 1);
	}
	if (!err)
		err = strata_dev_sync(e->dev);
	if (!err)
		e->tmpl_tokens = n_tokens;
	return err;
}

int strata_ref_engine_fill(strata_ref_engine *e, int req, int n_tokens)
{
	if (!e || req < 0 || req >= e->cfg.n_req || n_tokens < 0 || e->len[req] != 0)
		return -EINVAL;
	if (n_tokens > e->cfg.max_ctx)
		return -ENOSPC;
	int err = ref_side_join(e);
	if (!err)
		err = fill_template(e, n_tokens);
	int nb = (n_tokens + 255) / 256;
	for (int l = 0; l < e->m.n_layers && !err; l++) {
		ref_lay *L = &e->lay[l];
		if (L->w.ratio == 4) {
			size_t cs = strata_main_block_stride(64);
			size_t ps = (size_t)64 * strata_index_entry_bytes(e->m.index_fmt);
			err = strata_dev_copy(e->dev, L->c4 + (size_t)req * e->nblk * cs, e->tmpl_c4,
					      (size_t)nb * cs, NULL);
			if (!err)
				err = strata_dev_copy(e->dev, L->pages + (size_t)req * e->nblk * ps,
						      e->tmpl_pages, (size_t)nb * ps, NULL);
		} else if (L->w.ratio == 128) {
			size_t cs = strata_main_block_stride(2);
			err = strata_dev_copy(e->dev, L->c128 + (size_t)req * e->nblk * cs, e->tmpl_c128,
					      (size_t)nb * cs, NULL);
		}
	}
	/* The window ring: the last 128 tokens through the real path. */
	int64_t first = n_tokens > 128 ? n_tokens - 128 : 0;
	for (int64_t t = first; t < n_tokens && !err; t++) {
		ref_input_next(&e->in[req], e->h_hid);
		for (int l = 0; l < e->m.n_layers && !err; l++) {
			ref_window_entry(&e->lay[l].w, e->h_hid, t, e->freqs, e->h_stage);
			e->h_slots[0] = (int64_t)req * 128 + t % 128;
			err = encode_main(e, e->lay[l].win, 64, 1);
		}
	}
	if (!err)
		err = ref_fetch_filled(e, req, n_tokens / 4);
	if (!err)
		e->len[req] = n_tokens;
	return err;
}
