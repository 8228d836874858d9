/*
 * The decode step (engine.h) in two phases. (a) Host preparation: the fp32 model math
 * of every layer (window entries, compressors, RoPE, Hadamard, queries) for one new
 * token per request, into per-layer staging uploaded once, then a device sync. (b)
 * The device phase: every layer's cache writes, then per layer indexer scan + top-k,
 * fetch and sparse attention with the sink, launched back to back with no host
 * synchronisation and timed with device events around it alone, so that the stream
 * never idles on host math inside the timed window (the host math stands in for a real
 * engine's projections, which strata does not own). Then the outputs are hashed.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine/ref_eng_int.h"

static int grow_hashes(strata_ref_engine *e)
{
	if (e->n_steps < e->cap_steps)
		return 0;
	int cap = e->cap_steps ? 2 * e->cap_steps : 64;
	uint64_t *h = realloc(e->hashes, sizeof *h * (size_t)cap * e->m.n_layers);
	if (!h)
		return -ENOMEM;
	e->hashes = h;
	e->cap_steps = cap;
	return 0;
}

/* ---- staging ---------------------------------------------------------------------- */

/* One layer's part of the staging (h_prep on the host, d_prep on the device, the same
 * offsets): float window entries [R][512], completed main entries [R][512], completed
 * index keys [R][128], then int64 slots of each (window, main, index) [R]. After every
 * layer's part, HISPARSE's appends of the step, all CSA layers in one batch (one
 * strata_hotcache_append per step): float entries [n_csa][R][512], int32 rl and ids
 * [n_csa][R], row csa * R + r for request r (id -1: it completed no entry there).
 * A layer's part is padded to 256 bytes; inside it every array is a multiple of 16. */
typedef struct prep_view {
	float *win, *main, *idx;
	int64_t *win_slots, *main_slots, *idx_slots;
} prep_view;

typedef struct prep_appends {
	float *main;
	int32_t *rl, *ids;
	int rows;
} prep_appends;

static prep_view prep_layout(const strata_ref_engine *e, uint8_t *base, int l)
{
	const size_t R = (size_t)e->cfg.n_req;
	uint8_t *p = base + e->prep_layer_bytes * (size_t)l;
	prep_view v;
	v.win = (float *)p;
	v.main = v.win + R * REF_D;
	v.idx = v.main + R * REF_D;
	v.win_slots = (int64_t *)(v.idx + R * REF_ID);
	v.main_slots = v.win_slots + R;
	v.idx_slots = v.main_slots + R;
	return v;
}

static prep_appends prep_appends_of(const strata_ref_engine *e, uint8_t *base)
{
	prep_appends a;
	a.rows = e->cfg.mode == STRATA_REF_HISPARSE ? strata_model_count(&e->m, 4) * e->cfg.n_req
						    : 0;
	a.main = (float *)(base + e->prep_layer_bytes * (size_t)e->m.n_layers);
	a.rl = (int32_t *)(a.main + (size_t)a.rows * REF_D);
	a.ids = a.rl + a.rows;
	return a;
}

/* Bytes of the staging: every layer's part, then the appends (rows of 512 floats and
 * two int32, padded to 8 bytes). */
static size_t prep_bytes(const strata_ref_engine *e)
{
	const prep_appends a = prep_appends_of(e, NULL);
	return e->prep_layer_bytes * (size_t)e->m.n_layers +
	       (((size_t)a.rows * (sizeof(float) * REF_D + 2 * sizeof(int32_t)) + 7) & ~(size_t)7);
}

int ref_step_init(strata_ref_engine *e)
{
	const size_t R = (size_t)e->cfg.n_req;
	/* rounded up to 256 bytes, so that every layer's part starts as aligned as the
	 * kernels need (the index keys 16 bytes, kernels.h) */
	e->prep_layer_bytes =
		(R * (sizeof(float) * (2 * REF_D + REF_ID) + 3 * sizeof(int64_t)) + 255) & ~(size_t)255;
	size_t bytes = prep_bytes(e);
	/* Pinned, so that phase (a)'s one upload is a true asynchronous copy. */
	int err = strata_dev_host_alloc(e->dev, bytes, (void **)&e->h_prep);
	if (!err)
		err = strata_dev_alloc(e->dev, bytes, (void **)&e->d_prep);
	if (!err)
		memset(e->h_prep, 0, bytes);
	if (err || !e->cfg.trace)
		return err;
	const size_t n = (size_t)(e->m.n_layers + 1) * STRATA_REF_T_POINTS;
	e->tev = calloc(n, sizeof *e->tev);
	e->trace_us = calloc(n, sizeof *e->trace_us);
	e->trecorded = calloc(n, 1);
	if (!e->tev || !e->trace_us || !e->trecorded)
		return -ENOMEM;
	for (size_t i = 0; i < n && !err; i++)
		err = strata_event_create(e->dev, &e->tev[i]);
	return err;
}

/* cfg.trace: record point pt of layer l (-1: the step's own row) on stream s. */
int ref_trace_mark(strata_ref_engine *e, int l, int pt, strata_stream *s)
{
	if (!e->tev)
		return 0;
	const size_t i = (size_t)(l < 0 ? e->m.n_layers : l) * STRATA_REF_T_POINTS + (size_t)pt;
	e->trecorded[i] = 1;
	return strata_event_record(e->dev, e->tev[i], s);
}

int strata_ref_engine_trace(const strata_ref_engine *e, int layer,
			    float us[STRATA_REF_T_POINTS])
{
	if (!e || !us || layer < -1 || layer >= e->m.n_layers)
		return -EINVAL;
	if (!e->tev)
		return -ENODATA;
	const size_t row = (size_t)(layer < 0 ? e->m.n_layers : layer) * STRATA_REF_T_POINTS;
	for (int p = 0; p < STRATA_REF_T_POINTS; p++)
		us[p] = e->trecorded[row + p] ? e->trace_us[row + p] : -1.0f;
	return 0;
}

void ref_step_free(strata_ref_engine *e)
{
	strata_dev_host_free(e->dev, e->h_prep);
	strata_dev_free(e->dev, e->d_prep);
	e->h_prep = e->d_prep = NULL;
	if (e->tev)
		for (size_t i = 0; i < (size_t)(e->m.n_layers + 1) * STRATA_REF_T_POINTS; i++)
			strata_event_destroy(e->dev, e->tev[i]);
	free(e->tev);
	free(e->trace_us);
	free(e->trecorded);
	e->tev = NULL;
	e->trace_us = NULL;
	e->trecorded = NULL;
}

/* ---- phase (a): host preparation ----------------------------------------------------- */

/* Layer l's new entries for one token per request (the host math of
 * ref_append_tokens(), same functions, same order per layer and request), into the
 * layer's staging. */
static void prep_entries(strata_ref_engine *e, int l, const int64_t *pos)
{
	const int R = e->cfg.n_req;
	ref_lay *L = &e->lay[l];
	prep_view v = prep_layout(e, e->h_prep, l);
	L->n_main = L->n_idx = 0;
	for (int r = 0; r < R; r++) {
		ref_window_entry(&L->w, e->h_hid + (size_t)r * REF_HID, pos[r], e->freqs,
				 v.win + (size_t)r * REF_D);
		v.win_slots[r] = (int64_t)r * 128 + pos[r] % 128;
	}
	if (!L->w.ratio)
		return;
	size_t sf = ref_comp_state_floats(&L->w.main);
	int64_t cap = L->w.ratio == 4 ? e->cap4 : e->cap128;
	/* HISPARSE C4: into the step's batch of appends, row csa * R + r */
	const prep_appends ap = prep_appends_of(e, e->h_prep);
	const int batch = ap.rows && L->w.ratio == 4;
	for (int r = 0; r < R; r++) {
		const int row = L->csa * R + r;
		float *dst = batch ? ap.main + (size_t)row * REF_D : v.main + (size_t)L->n_main * REF_D;
		const int done = ref_comp_push(&L->w.main, L->cstate + sf * r,
					       e->h_hid + (size_t)r * REF_HID, pos[r], e->freqs, dst);
		if (batch) {
			ap.rl[row] = row;
			ap.ids[row] = done ? (int32_t)(pos[r] / 4) : -1;
		}
		if (done)
			v.main_slots[L->n_main++] = (int64_t)r * cap + pos[r] / L->w.ratio;
	}
	if (L->w.ratio != 4)
		return;
	sf = ref_comp_state_floats(&L->w.idx);
	for (int r = 0; r < R; r++) {
		float *key = v.idx + (size_t)L->n_idx * REF_ID;
		if (ref_comp_push(&L->w.idx, L->istate + sf * r, e->h_hid + (size_t)r * REF_HID,
				  pos[r], e->freqs, key)) {
			ref_hadamard128(key);
			v.idx_slots[L->n_idx++] = (int64_t)r * e->cap4 + pos[r] / 4;
		}
	}
}

/* Everything the host computes for the step, uploaded: every layer's new entries and
 * queries, the window / C128 index lists and row limits (the same for every layer).
 * The per-layer inputs are functions of the requests' hidden states alone (no layer
 * reads an earlier layer's device output), so all of it can be made up front. Ends
 * with the device idle and every input in place. */
static int prepare(strata_ref_engine *e, int *n128)
{
	const int R = e->cfg.n_req, H = e->m.n_heads, IH = e->m.index_heads;
	int64_t pos[R];
	int32_t rowlim[R];
	for (int r = 0; r < R; r++) {
		if (e->len[r] >= e->cfg.max_ctx) {
			ELOG(STRATA_LOG_ERROR, "decode step %d: request %d is full (max_ctx %d tokens)",
			     e->n_steps, r, e->cfg.max_ctx);
			return -ENOSPC;
		}
		pos[r] = e->len[r];
		ref_input_next(&e->in[r], e->h_hid + (size_t)r * REF_HID);
	}
	for (int l = 0; l < e->m.n_layers; l++)
		prep_entries(e, l, pos);
	int err = strata_dev_copy(e->dev, e->d_prep, e->h_prep, prep_bytes(e), NULL);
	if (err)
		return err;
	*n128 = 0;
	for (int r = 0; r < R; r++) {
		int64_t t = pos[r];
		rowlim[r] = (int32_t)((t + 1) / 4);
		int c = (int)((t + 1) / 128);
		*n128 = c > *n128 ? c : *n128;
		/* Window: positions max(0, t-127) .. t in ascending order. */
		for (int k = 0; k < 128; k++) {
			int64_t p = t - 127 + k;
			e->h_win_idx[r * 128 + k] = p < 0 ? -1 : (int32_t)(r * 128 + p % 128);
		}
	}
	for (int r = 0; r < R; r++) {
		int c = (int)((pos[r] + 1) / 128);
		for (int j = 0; j < *n128; j++)
			e->h_c128_idx[r * *n128 + j] = j < c ? r * e->cap128 + j : -1;
	}
	if ((err = strata_dev_copy(e->dev, e->d_win_idx, e->h_win_idx, sizeof(int32_t) * R * 128, NULL)) ||
	    (err = strata_dev_copy(e->dev, e->d_c128_idx, e->h_c128_idx,
				   sizeof(int32_t) * (size_t)R * (*n128 ? *n128 : 1), NULL)) ||
	    (err = strata_dev_copy(e->dev, e->d_rowlim, rowlim, sizeof(int32_t) * R, NULL)))
		return err;
	float *iq = malloc(sizeof(float) * (size_t)R * IH * (REF_ID + 1));
	uint16_t *iqb = malloc(sizeof(uint16_t) * (size_t)R * IH * REF_ID);
	if (!iq || !iqb) {
		free(iq);
		free(iqb);
		return -ENOMEM;
	}
	float *iw = iq + (size_t)R * IH * REF_ID;
	for (int l = 0; l < e->m.n_layers && !err; l++) {
		ref_lay *L = &e->lay[l];
		for (int r = 0; r < R; r++)
			ref_query(&L->w, H, e->h_hid + (size_t)r * REF_HID, pos[r], e->freqs,
				  e->h_q + (size_t)r * H * REF_D);
		err = strata_dev_copy(e->dev, L->d_q, e->h_q, sizeof(float) * (size_t)R * H * REF_D, NULL);
		if (err || L->w.ratio != 4)
			continue;
		for (int r = 0; r < R; r++)
			ref_index_query(&L->w, IH, e->h_hid + (size_t)r * REF_HID, pos[r], e->freqs,
					iq + (size_t)r * IH * REF_ID, iw + (size_t)r * IH);
		/* The indexer takes bf16 queries (as the reference quantises them). */
		for (size_t i = 0; i < (size_t)R * IH * REF_ID; i++)
			iqb[i] = strata_bf16_encode(iq[i]);
		err = strata_dev_copy(e->dev, L->d_iq, iqb, sizeof(uint16_t) * (size_t)R * IH * REF_ID, NULL);
		if (!err)
			err = strata_dev_copy(e->dev, L->d_iw, iw, sizeof(float) * (size_t)R * IH, NULL);
	}
	/* Pageable sources (iq, rowlim) and the pinned staging the next step rewrites: the
	 * device phase starts from an idle device, so nothing of this lands in its timing. */
	if (!err)
		err = strata_dev_sync(e->dev);
	free(iq);
	free(iqb);
	if (err)
		return err;
	/* The device is idle: the last step's side work (admissions, write-backs,
	 * predictions) is done, so the device phase need not wait for any of it. */
	e->side_open = 0;
	if (e->hc)
		err = strata_hotcache_settled(e->hc);
	if (err)
		return err;
	for (int r = 0; r < R; r++)
		e->len[r]++;
	return 0;
}

/* ---- phase (b): the device work ------------------------------------------------------ */

static int encode_dev(strata_ref_engine *e, uint8_t *pool, int B, const float *src,
		      const int64_t *slots, int n)
{
	strata_main_encode_params p = { .src = src, .slots = slots, .n = n, .B = B, .pool = pool };
	return n ? strata_k_main_encode(e->dev, &p, NULL) : 0;
}

/* Layer L's new entries from the device staging into its caches (the window ring, C4
 * or C128 main, index pages; HISPARSE: the hot cache and, on the side stream, the
 * host tier). */
static int write_layer(strata_ref_engine *e, int l)
{
	ref_lay *L = &e->lay[l];
	prep_view v = prep_layout(e, e->d_prep, l);
	int err = encode_dev(e, L->win, 64, v.win, v.win_slots, e->cfg.n_req);
	if (err || !L->w.ratio)
		return err;
	if (L->w.ratio == 128)
		return encode_dev(e, L->c128, 2, v.main, v.main_slots, L->n_main);
	if (e->cfg.mode != STRATA_REF_HISPARSE) /* HISPARSE: every CSA layer's at once, below */
		err = encode_dev(e, L->c4, 64, v.main, v.main_slots, L->n_main);
	if (err || !L->n_idx)
		return err;
	strata_index_encode_params ip = { .fmt = e->m.index_fmt, .src = v.idx,
					  .slots = v.idx_slots, .n = L->n_idx, .B = 64,
					  .pages = L->pages };
	return strata_k_index_encode(e->dev, &ip, NULL);
}

/* The attention side of one layer. */
static int attend(strata_ref_engine *e, ref_lay *L, int n128)
{
	const int R = e->cfg.n_req, K = e->m.index_topk, l = (int)(L - e->lay);
	strata_attn_params a = { .n_rows = R, .heads = e->m.n_heads,
				 .scale = 0.044194173824159216f /* 512^-0.5 */, .q = L->d_q,
				 .sink = L->d_sink, .win_pool = L->win, .win_B = 64,
				 .win_idx = e->d_win_idx, .n_win = 128, .out = L->d_out,
				 .scratch = e->d_attn_scratch,
				 .scratch_bytes = e->attn_scratch_bytes,
				 .tensor_cores = e->cfg.attn_tensor_cores,
				 .spare_sms = e->cfg.attn_spare_sms };
	int err = ref_trace_mark(e, l, STRATA_REF_T_START, NULL);
	if (err)
		return err;
	if (L->w.ratio == 4) {
		strata_indexer_params ip = {
			.fmt = e->m.index_fmt, .heads = e->m.index_heads, .topk = K, .n_req = R,
			.n_rows = R, .max_rows = 1, .max_limit = e->cap4, .q = L->d_iq, .w = L->d_iw,
			.req_rows = e->d_rowreq,
			.row_limit = e->d_rowlim, .pages = L->pages, .page_table = e->d_pt,
			.max_pages = e->nblk, .B = 64, .out_ids = L->d_ids, .scratch = e->d_scratch,
			.scratch_bytes = e->scratch_bytes };
		strata_attn_prestage_params pp; /* EARLY: the call stages the misses */
		int staged = 0;
		if ((err = ref_fetch_early(e, L, &pp, &staged)))
			return err;
		if (staged)
			ip.stage = &pp;
		if ((err = strata_k_indexer(e->dev, &ip, NULL)) ||
		    (err = ref_trace_mark(e, l, STRATA_REF_T_INDEXED, NULL)))
			return err;
		if (e->cfg.mode == STRATA_REF_ALL_RESIDENT) {
			strata_attn_map_params mp = { .n_rows = R, .width = K, .ids = L->d_ids,
						      .row_base = e->d_rowbase, .out = L->d_list };
			if ((err = strata_k_attn_map(e->dev, &mp, NULL)))
				return err;
			a.pool = L->c4;
		} else {
			if ((err = ref_fetch(e, L)))
				return err;
			a.pool = e->hot_base;
			if (e->cfg.mode == STRATA_REF_HISPARSE && e->cfg.direct_misses) {
				/* misses staged on the device, or in place on the host tier */
				a.pool2 = e->miss_stage ? e->miss_stage : L->c4;
				a.B2 = 64;
			}
		}
		if ((err = ref_trace_mark(e, l, STRATA_REF_T_MAPPED, NULL)))
			return err;
		a.B = 64;
		a.idx = L->d_list;
		a.n_idx = K;
	} else if (L->w.ratio == 128 && n128 > 0) {
		a.pool = L->c128;
		a.B = 2;
		a.idx = e->d_c128_idx;
		a.n_idx = n128;
	}
	if ((err = strata_k_attn(e->dev, &a, NULL)) ||
	    (err = ref_trace_mark(e, l, STRATA_REF_T_ATTENDED, NULL)))
		return err;
	return 0;
}

/* err, after saying where a decode step failed (one line at ERROR: what a caller
 * sees as a bare error code is otherwise hard to place). */
static int step_failed(const strata_ref_engine *e, const char *what, int l, int err)
{
	if (err && l >= 0)
		ELOG(STRATA_LOG_ERROR, "decode step %d, layer %d (ratio %d): %s: %s", e->n_steps,
		     l, e->lay[l].w.ratio, what, strata_strerror(err));
	else if (err)
		ELOG(STRATA_LOG_ERROR, "decode step %d: %s: %s", e->n_steps, what,
		     strata_strerror(err));
	return err;
}

/* Phase (b), timed by ev0 .. ev1 on the compute stream: every layer's caches are
 * written first (as prefill does, so that a CSA layer's scan sees the entry this token
 * completed and the hot cache knows of every new entry before any predict), then the
 * attention side layer by layer. Launches only. The side streams' last work (the last
 * layers' admissions, write-backs, predictions) is not waited for here: it overlaps
 * what follows, and the next user of the compute stream joins it first
 * (ref_side_join; the next step does so inside its timed window, so a wait counts). */
static int device_phase(strata_ref_engine *e, int n128, float *ms)
{
	const int NL = e->m.n_layers;
	uint64_t t0 = strata_now_ns();
	if (e->trecorded)
		memset(e->trecorded, 0, (size_t)(NL + 1) * STRATA_REF_T_POINTS);
	int err = strata_event_record(e->dev, e->ev0, NULL);
	if (!err)
		err = ref_side_join(e);
	int n_app = 0;
	for (int l = 0; l < NL && !err; l++) {
		err = step_failed(e, "cache writes", l, write_layer(e, l));
		n_app += e->lay[l].w.ratio == 4 ? e->lay[l].n_main : 0;
	}
	if (!err && n_app && e->cfg.mode == STRATA_REF_HISPARSE) {
		/* one batch for every CSA layer: one encode, one residency launch, one
		 * gather into the hot pool and one write-back, instead of that per layer */
		const prep_appends ap = prep_appends_of(e, e->d_prep);
		err = step_failed(e, "hot-cache append", -1,
				  ref_fetch_append_dev(e, ap.rl, ap.ids, ap.main, ap.rows));
	}
	/* Every layer's appended entries are now on their way to the host tier: one
	 * fence orders the compute stream after those write-backs, so that any layer
	 * may read a miss from there (direct_misses). */
	if (!err && e->hc && e->cfg.direct_misses)
		err = strata_hotcache_host_fence(e->hc, NULL);
	if (!err)
		err = ref_trace_mark(e, -1, 0, NULL);
	for (int l = 0; l < NL && !err; l++)
		err = step_failed(e, "attention side", l, attend(e, &e->lay[l], n128));
	if (!err)
		err = step_failed(e, "hot-cache admission", -1, ref_fetch_admit(e));
	if (!err && e->side && !(err = strata_event_record(e->dev, e->ev_side, e->side)))
		e->side_open = 1;
	if (!err)
		err = strata_event_record(e->dev, e->ev1, NULL);
	e->st.last_launch_ns = strata_now_ns() - t0;
	if (!err)
		err = strata_event_sync(e->dev, e->ev1);
	if (!err)
		err = strata_event_elapsed_ms(e->dev, e->ev0, e->ev1, ms);
	for (int i = 0; e->tev && !err && i < (NL + 1) * STRATA_REF_T_POINTS; i++) {
		float t = 0.0f;
		/* a SIDE point may be on a side stream still running past ev1 */
		if (e->trecorded[i] && !(err = strata_event_sync(e->dev, e->tev[i])) &&
		    !(err = strata_event_elapsed_ms(e->dev, e->ev0, e->tev[i], &t)))
			e->trace_us[i] = t * 1000.0f;
	}
	if (e->tev && !err) { /* the end is ev1 */
		e->trace_us[(size_t)NL * STRATA_REF_T_POINTS + 1] = *ms * 1000.0f;
		e->trecorded[(size_t)NL * STRATA_REF_T_POINTS + 1] = 1;
	}
	return err;
}

int strata_ref_engine_decode_step(strata_ref_engine *e)
{
	if (!e)
		return -EINVAL;
	const int R = e->cfg.n_req, NL = e->m.n_layers;
	int n128 = 0;
	uint64_t t0 = strata_now_ns();
	int err = grow_hashes(e);
	if (!err)
		err = prepare(e, &n128);
	if (err)
		return err;
	e->st.last_prep_ns = strata_now_ns() - t0;
	e->st.prep_ns += e->st.last_prep_ns;
	e->stamp++;
	float ms = 0.0f;
	if ((err = device_phase(e, n128, &ms)))
		return err;
	e->st.last_device_ns = (uint64_t)((double)ms * 1e6);
	e->st.device_ns += e->st.last_device_ns;
	e->st.steps++;
	size_t qn = (size_t)R * e->m.n_heads * REF_D;
	uint64_t *row = e->hashes + (size_t)e->n_steps * NL;
	for (int l = 0; l < NL && !err; l++) {
		ref_lay *L = &e->lay[l];
		err = strata_dev_copy(e->dev, L->h_out, L->d_out, sizeof(float) * qn, NULL);
		if (!err && L->w.ratio == 4)
			err = strata_dev_copy(e->dev, L->h_ids, L->d_ids,
					      sizeof(int32_t) * R * e->m.index_topk, NULL);
	}
	if (!err)
		err = strata_dev_sync(e->dev);
	if (err)
		return err;
	for (int l = 0; l < NL; l++) {
		ref_lay *L = &e->lay[l];
		row[l] = XXH3_64bits(L->h_out, sizeof(float) * qn);
		if (L->w.ratio != 4 || e->cfg.mode != STRATA_REF_SWAPIN)
			continue;
		for (int i = 0; i < R * e->m.index_topk; i++) /* swap-in moves every selection */
			if (L->h_ids[i] >= 0) {
				e->st.misses++;
				e->st.fetched_bytes += STRATA_MAIN_ENTRY_BYTES;
			}
	}
	e->n_steps++;
	return 0;
}

const uint64_t *strata_ref_engine_hashes(const strata_ref_engine *e, int *n_steps,
					 int *n_layers)
{
	if (n_steps)
		*n_steps = e ? e->n_steps : 0;
	if (n_layers)
		*n_layers = e ? e->m.n_layers : 0;
	return e ? e->hashes : NULL;
}

uint64_t strata_ref_engine_digest(const strata_ref_engine *e)
{
	if (!e || !e->n_steps)
		return 0;
	return XXH3_64bits(e->hashes, sizeof(uint64_t) * (size_t)e->n_steps * e->m.n_layers);
}

const float *strata_ref_engine_output(const strata_ref_engine *e, int layer)
{
	if (!e || !e->cfg.keep_outputs || layer < 0 || layer >= e->m.n_layers || !e->n_steps)
		return NULL;
	return e->lay[layer].h_out;
}

const int32_t *strata_ref_engine_selection(const strata_ref_engine *e, int layer, int req)
{
	if (!e || layer < 0 || layer >= e->m.n_layers || req < 0 || req >= e->cfg.n_req ||
	    e->lay[layer].w.ratio != 4)
		return NULL;
	return e->lay[layer].h_ids + (size_t)req * e->m.index_topk;
}

void strata_ref_engine_stats(const strata_ref_engine *e, strata_ref_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof *st);
	if (!e)
		return;
	*st = e->st;
	st->miss_path = e->miss_path;
	/* [early, late, staged] of EARLY's index maps and early staging (device) */
	unsigned long long mc[3] = { 0, 0, 0 };
	const int have_mc = e->d_miss_counts &&
			    !strata_dev_copy(e->dev, mc, e->d_miss_counts, sizeof mc, NULL) &&
			    !strata_dev_sync(e->dev);
	st->early_misses = mc[0];
	st->late_misses = mc[1];
	strata_hotcache_stats hs;
	/* The hot cache's counters live on the device; reading them synchronises. */
	if (e->hc && !strata_hotcache_stats_get(e->hc, -1, &hs)) {
		st->hits = hs.hits;
		st->misses = hs.misses;
		st->fetched_bytes = hs.bytes_moved + hs.bytes_prefetched;
		/* direct_misses: attention read each miss in place (or the map kernel
		 * staged it) before the hot cache copied it in, so it crossed the bus
		 * twice (in place: once more per extra head group, not counted). EARLY:
		 * the early staging copied every miss among the entries that could still
		 * make the top-k, selected or not, and the map the late ones. */
		if (have_mc)
			st->fetched_bytes += (mc[2] + mc[1]) * STRATA_MAIN_ENTRY_BYTES;
		else if (e->cfg.direct_misses)
			st->fetched_bytes += hs.misses * STRATA_MAIN_ENTRY_BYTES;
	}
}

static int hash_dev(strata_ref_engine *e, XXH3_state_t *x, const void *p, size_t n)
{
	void *tmp = malloc(n ? n : 1);
	if (!tmp)
		return -ENOMEM;
	int err = strata_dev_copy(e->dev, tmp, p, n, NULL);
	if (!err)
		err = strata_dev_sync(e->dev);
	if (!err)
		XXH3_64bits_update(x, tmp, n);
	free(tmp);
	return err;
}

uint64_t strata_ref_engine_cache_hash(strata_ref_engine *e, int req)
{
	if (!e || req < 0 || req >= e->cfg.n_req)
		return 0;
	/* Write-backs to the host tier may still be in flight on the side stream. */
	if (strata_dev_sync(e->dev))
		return 0;
	XXH3_state_t *x = XXH3_createState();
	if (!x)
		return 0;
	XXH3_64bits_reset(x);
	XXH3_64bits_update(x, &e->len[req], sizeof e->len[req]);
	int err = 0;
	for (int l = 0; l < e->m.n_layers && !err; l++) {
		ref_lay *L = &e->lay[l];
		size_t ws = REF_WIN_BLOCKS * strata_main_block_stride(64);
		err = hash_dev(e, x, L->win + ws * req, ws);
		if (err || !L->w.ratio)
			continue;
		size_t sf = ref_comp_state_floats(&L->w.main);
		XXH3_64bits_update(x, L->cstate + sf * req, sizeof(float) * sf);
		if (L->w.ratio == 128) {
			size_t cs = (size_t)e->nblk * strata_main_block_stride(2);
			err = hash_dev(e, x, L->c128 + cs * req, cs);
			continue;
		}
		sf = ref_comp_state_floats(&L->w.idx);
		XXH3_64bits_update(x, L->istate + sf * req, sizeof(float) * sf);
		size_t cs = (size_t)e->nblk * strata_main_block_stride(64);
		err = hash_dev(e, x, L->c4 + cs * req, cs);
		size_t ps = (size_t)e->nblk * 64 * strata_index_entry_bytes(e->m.index_fmt);
		if (!err)
			err = hash_dev(e, x, L->pages + ps * req, ps);
	}
	uint64_t h = err ? 0 : XXH3_64bits_digest(x);
	XXH3_freeState(x);
	return h;
}
