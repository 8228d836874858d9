/* The device hot cache: state, streams and events around the residency-and-fetch
 * kernel (kernels/hotcache*.{c,cu}) and the gather (kernels/gather*, for appends and
 * write-back). The policy itself is documented beside its twin in
 * kernels/hotcache_cpu.c; this file sizes and owns the memory and orders the work:
 *
 *   step     (stream): [wait predict, write-back] residency STEP, which also copies
 *            the misses host -> pool (one launch); record ev_step
 *   predict  (side):   wait ev_step; residency PREFETCH (copies included); record
 *            ev_predict
 *   append   (stream): [wait write-back] encode into staging; residency APPEND; copy
 *            staging -> slots; record ev_append. (side): wait ev_append; staging ->
 *            host tier; record ev_wb
 *
 * All device state lives in one allocation carved into arrays (one free, no leaks on
 * a failed create). The op counter is host-side: each call gets the next number, so
 * no call reads anything back from the device. */
#include "prefetch/prefetch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PLOG(level, ...) STRATA_LOG(level, STRATA_SUB_PREFETCH, __VA_ARGS__)

struct strata_hotcache {
	strata_dev *dev;
	strata_hotcache_config c;
	int n_slots, sel_cap, list_cap, max_blocks, n_blocks, staging_blocks;
	uint32_t op;

	void *mem;     /* the one device allocation */
	size_t mem_bytes;
	uint8_t *pool, *staging;
	int32_t *map, *owner, *hand, *last_sel, *last_n, *limit, *err;
	uint32_t *slot_op, *slot_sel, *slot_ref, *slot_pf, *last_step, *claim;
	uint64_t *counters;
	int32_t *scratch, *scratch_pf;
	int32_t *app_out;
	uint8_t **host_blocks; /* device [n_rl][max_blocks] */

	strata_event *ev_step, *ev_predict, *ev_append, *ev_wb;
	int stepped, predicted, written;
};

/* Carve: a bump allocator over the single allocation, 256-byte aligned pieces. With
 * base == NULL it only measures. */
static void *carve(uint8_t *base, size_t *off, size_t bytes)
{
	size_t at = (*off + 255) & ~(size_t)255;
	*off = at + bytes;
	return base ? base + at : NULL;
}

static void layout(strata_hotcache *hc, uint8_t *m, size_t *off)
{
	const strata_hotcache_config *c = &hc->c;
	size_t nrl = (size_t)c->n_rl, ns = (size_t)hc->n_slots;
	*off = 0;
	hc->pool = carve(m, off, (size_t)hc->n_blocks * strata_main_block_stride(c->B_hot));
	hc->staging = carve(m, off, (size_t)hc->staging_blocks * strata_main_block_stride(c->B_hot));
	hc->map = carve(m, off, nrl * (size_t)c->max_entries * 4);
	hc->owner = carve(m, off, ns * 4);
	hc->slot_op = carve(m, off, ns * 4);
	hc->slot_sel = carve(m, off, ns * 4);
	hc->slot_ref = carve(m, off, ns * 4);
	hc->slot_pf = carve(m, off, ns * 4);
	hc->hand = carve(m, off, nrl * 4);
	hc->last_step = carve(m, off, nrl * 4);
	hc->claim = carve(m, off, nrl * 4);
	hc->last_sel = carve(m, off, nrl * (size_t)hc->sel_cap * 4);
	hc->last_n = carve(m, off, nrl * 4);
	hc->limit = carve(m, off, nrl * 4);
	hc->counters = carve(m, off, nrl * STRATA_HC_NCOUNTERS * 8);
	hc->err = carve(m, off, 4);
	/* step and append share scratch (same stream): rows of either */
	size_t srows = (size_t)(c->max_rows > c->max_append ? c->max_rows : c->max_append);
	hc->scratch = carve(m, off, srows * hc->list_cap * 4);
	hc->scratch_pf = carve(m, off, (size_t)c->max_rows * hc->list_cap * 4);
	hc->app_out = carve(m, off, (size_t)c->max_append * 4);
	hc->host_blocks = carve(m, off, nrl * (size_t)hc->max_blocks * sizeof(uint8_t *));
}

static int fill_config(const strata_hotcache_config *in, strata_hotcache_config *c)
{
	if (!in || in->size < sizeof *in || in->n_rl <= 0 || in->max_entries <= 0 || in->topk <= 0)
		return -EINVAL;
	*c = *in;
	if (!c->rows_per_rl)
		c->rows_per_rl = 1;
	if (!c->budget)
		c->budget = 2 * c->topk * c->rows_per_rl;
	if (!c->max_rows)
		c->max_rows = c->n_rl * c->rows_per_rl;
	if (!c->B_hot)
		c->B_hot = 64;
	if (!c->host_B)
		c->host_B = 64;
	if (!c->max_append)
		c->max_append = c->n_rl;
	if (!c->predict_max)
		c->predict_max = c->topk / 2 > 0 ? c->topk / 2 : 1;
	if (!c->predict_recent)
		c->predict_recent = 16;
	if (c->rows_per_rl < 0 || c->budget <= 0 || c->max_rows <= 0 || c->B_hot <= 0 ||
	    c->host_B <= 0 || c->max_append <= 0 || c->predict_max < 0 || c->predict_recent < 0)
		return -EINVAL;
	if ((int64_t)c->n_rl * c->budget > INT32_MAX / 2 ||
	    (int64_t)c->max_entries * 2 > INT32_MAX)
		return -EINVAL;
	return 0;
}

/* Every slot free, every map entry -1, no last step (ordered on stream). */
static int reset_state(strata_hotcache *hc, int rl0, int nrl, strata_stream *s)
{
	strata_dev *d = hc->dev;
	size_t me = (size_t)hc->c.max_entries, b = (size_t)hc->c.budget;
	size_t s0 = (size_t)rl0 * b, ns = (size_t)nrl * b;
	int err = strata_dev_memset(d, hc->map + (size_t)rl0 * me, 0xff, (size_t)nrl * me * 4, s);
	if (!err)
		err = strata_dev_memset(d, hc->owner + s0, 0xff, ns * 4, s);
	if (!err)
		err = strata_dev_memset(d, hc->slot_op + s0, 0, ns * 4, s);
	if (!err)
		err = strata_dev_memset(d, hc->slot_sel + s0, 0, ns * 4, s);
	if (!err)
		err = strata_dev_memset(d, hc->slot_ref + s0, 0, ns * 4, s);
	if (!err)
		err = strata_dev_memset(d, hc->slot_pf + s0, 0, ns * 4, s);
	if (!err)
		err = strata_dev_memset(d, hc->hand + rl0, 0, (size_t)nrl * 4, s);
	if (!err)
		err = strata_dev_memset(d, hc->last_step + rl0, 0xff, (size_t)nrl * 4, s);
	if (!err)
		err = strata_dev_memset(d, hc->last_n + rl0, 0, (size_t)nrl * 4, s);
	return err;
}

int strata_hotcache_create(strata_dev *dev, const strata_hotcache_config *cfg,
			   strata_hotcache **out)
{
	if (!dev || !out)
		return -EINVAL;
	*out = NULL;
	strata_hotcache *hc = calloc(1, sizeof *hc);
	if (!hc)
		return -ENOMEM;
	int err = fill_config(cfg, &hc->c);
	if (err)
		goto out;
	const strata_hotcache_config *c = &hc->c;
	hc->dev = dev;
	hc->n_slots = c->n_rl * c->budget;
	hc->n_blocks = (hc->n_slots + c->B_hot - 1) / c->B_hot;
	hc->staging_blocks = (c->max_append + c->B_hot - 1) / c->B_hot;
	hc->sel_cap = c->rows_per_rl * c->topk;
	hc->list_cap = 2 * hc->sel_cap + c->predict_recent;
	if (hc->list_cap < c->topk)
		hc->list_cap = c->topk;
	hc->max_blocks = (c->max_entries + c->host_B - 1) / c->host_B;
	size_t bytes;
	layout(hc, NULL, &bytes);
	hc->mem_bytes = bytes;
	err = strata_dev_alloc(dev, bytes, &hc->mem);
	if (err)
		goto out;
	layout(hc, hc->mem, &bytes);
	err = reset_state(hc, 0, c->n_rl, NULL);
	if (!err)
		err = strata_dev_memset(dev, hc->claim, 0, (size_t)c->n_rl * 4, NULL);
	if (!err)
		err = strata_dev_memset(dev, hc->limit, 0, (size_t)c->n_rl * 4, NULL);
	if (!err)
		err = strata_dev_memset(dev, hc->counters, 0,
					(size_t)c->n_rl * STRATA_HC_NCOUNTERS * 8, NULL);
	if (!err)
		err = strata_dev_memset(dev, hc->err, 0, 4, NULL);
	if (!err)
		err = strata_dev_memset(dev, hc->host_blocks, 0,
					(size_t)c->n_rl * hc->max_blocks * sizeof(uint8_t *), NULL);
	if (!err)
		err = strata_dev_memset(dev, hc->pool, 0,
					(size_t)hc->n_blocks * strata_main_block_stride(c->B_hot), NULL);
	if (!err)
		err = strata_event_create(dev, &hc->ev_step);
	if (!err)
		err = strata_event_create(dev, &hc->ev_predict);
	if (!err)
		err = strata_event_create(dev, &hc->ev_append);
	if (!err)
		err = strata_event_create(dev, &hc->ev_wb);
	if (!err)
		err = strata_dev_sync(dev);
	if (!err)
		PLOG(STRATA_LOG_INFO, "hot cache: %d rl x %d slots, %d blocks of %d, %.1f MiB",
		     c->n_rl, c->budget, hc->n_blocks, c->B_hot, (double)hc->mem_bytes / 1048576.0);
out:
	if (err) {
		strata_hotcache_destroy(hc);
		return err;
	}
	*out = hc;
	return 0;
}

void strata_hotcache_destroy(strata_hotcache *hc)
{
	if (!hc)
		return;
	if (hc->dev) {
		(void)strata_dev_sync(hc->dev);
		strata_event_destroy(hc->dev, hc->ev_step);
		strata_event_destroy(hc->dev, hc->ev_predict);
		strata_event_destroy(hc->dev, hc->ev_append);
		strata_event_destroy(hc->dev, hc->ev_wb);
		strata_dev_free(hc->dev, hc->mem);
	}
	free(hc);
}

int strata_hotcache_pool(const strata_hotcache *hc, strata_hotcache_pool_info *out)
{
	if (!hc || !out)
		return -EINVAL;
	out->base = hc->pool;
	out->B = hc->c.B_hot;
	out->n_blocks = hc->n_blocks;
	out->block_stride = strata_main_block_stride(hc->c.B_hot);
	out->n_slots = hc->n_slots;
	return 0;
}

int strata_hotcache_get_config(const strata_hotcache *hc, strata_hotcache_config *out)
{
	if (!hc || !out)
		return -EINVAL;
	*out = hc->c;
	return 0;
}

int strata_hotcache_bind_host_blocks(strata_hotcache *hc, int rl, uint8_t *const *blocks,
				     int n_blocks, int n_entries, strata_stream *s)
{
	if (!hc || rl < 0 || rl >= hc->c.n_rl || n_blocks < 0 || n_blocks > hc->max_blocks ||
	    (n_blocks && !blocks) || n_entries < 0 || n_entries > hc->c.max_entries ||
	    n_entries > n_blocks * hc->c.host_B)
		return -EINVAL;
	for (int b = 0; b < n_blocks; b++)
		if (!blocks[b] || ((uintptr_t)blocks[b] & 15))
			return -EINVAL;
	size_t row = (size_t)hc->max_blocks * sizeof(uint8_t *);
	uint8_t **tab = calloc(1, row);
	if (!tab)
		return -ENOMEM;
	memcpy(tab, blocks, (size_t)n_blocks * sizeof *tab);
	int32_t lim = n_entries;
	/* Both sources are pageable: the copy has staged them when it returns (CUDA), or
	 * has been done (CPU), so they may go out of scope below. */
	int err = strata_dev_copy(hc->dev, hc->host_blocks + (size_t)rl * hc->max_blocks, tab,
				  row, s);
	if (!err)
		err = strata_dev_copy(hc->dev, hc->limit + rl, &lim, 4, s);
	if (!err)
		err = strata_stream_sync(hc->dev, s); /* setup path: keep it simple and safe */
	free(tab);
	return err;
}

int strata_hotcache_bind_host(strata_hotcache *hc, int rl, uint8_t *base, int n_entries,
			      strata_stream *s)
{
	if (!hc || !base || n_entries < 0)
		return -EINVAL;
	int nb = (n_entries + hc->c.host_B - 1) / hc->c.host_B;
	if (nb > hc->max_blocks)
		return -EINVAL;
	uint8_t **tab = malloc((size_t)(nb ? nb : 1) * sizeof *tab);
	if (!tab)
		return -ENOMEM;
	size_t stride = strata_main_block_stride(hc->c.host_B);
	for (int b = 0; b < nb; b++)
		tab[b] = base + (size_t)b * stride;
	int err = strata_hotcache_bind_host_blocks(hc, rl, tab, nb, n_entries, s);
	free(tab);
	return err;
}

static void fill_params(strata_hotcache *hc, strata_hotcache_params *p, int mode)
{
	memset(p, 0, sizeof *p);
	p->mode = mode;
	if (++hc->op == 0xffffffffu) /* 2^32 calls; then wrap past the reserved values */
		hc->op = 1;
	p->op = hc->op;
	p->n_rl = hc->c.n_rl;
	p->max_entries = hc->c.max_entries;
	p->budget = hc->c.budget;
	p->map = hc->map;
	p->owner = hc->owner;
	p->slot_op = hc->slot_op;
	p->slot_sel = hc->slot_sel;
	p->slot_ref = hc->slot_ref;
	p->slot_pf = hc->slot_pf;
	p->hand = hc->hand;
	p->last_step = hc->last_step;
	p->claim = hc->claim;
	p->last_sel = hc->last_sel;
	p->last_n = hc->last_n;
	p->sel_cap = hc->sel_cap;
	p->limit = hc->limit;
	p->predict_max = hc->c.predict_max;
	p->predict_recent = hc->c.predict_recent;
	p->counters = hc->counters;
	p->list_cap = hc->list_cap;
	p->err = hc->err;
}

static strata_entry_space host_space(const strata_hotcache *hc)
{
	strata_entry_space sp = { NULL, hc->host_blocks, hc->max_blocks, hc->c.host_B };
	return sp;
}

static strata_entry_space pool_space(const strata_hotcache *hc, uint8_t *base)
{
	strata_entry_space sp = { base, NULL, 0, hc->c.B_hot };
	return sp;
}

int strata_hotcache_residency(const strata_hotcache *hc, const int32_t **map, int *max_entries)
{
	if (!hc || !map || !max_entries)
		return -EINVAL;
	*map = hc->map;
	*max_entries = hc->c.max_entries;
	return 0;
}

int strata_hotcache_host_fence(strata_hotcache *hc, strata_stream *stream)
{
	if (!hc)
		return -EINVAL;
	return hc->written ? strata_stream_wait_event(hc->dev, stream, hc->ev_wb) : 0;
}

int strata_hotcache_settled(strata_hotcache *hc)
{
	if (!hc)
		return -EINVAL;
	hc->written = 0;
	hc->predicted = 0;
	hc->stepped = 0;
	return 0;
}

int strata_hotcache_step(strata_hotcache *hc, const strata_hotcache_batch *b, strata_stream *s)
{
	if (!hc || !b || b->rows < 0 || b->rows > hc->c.max_rows || b->k <= 0 ||
	    b->k > hc->c.topk || (b->rows && (!b->ids || !b->row_rl)))
		return -EINVAL;
	if (!b->rows)
		return 0;
	strata_dev *d = hc->dev;
	int err = 0;
	if (hc->predicted)
		err = strata_stream_wait_event(d, s, hc->ev_predict);
	if (!err && hc->written)
		err = strata_stream_wait_event(d, s, hc->ev_wb);
	if (err)
		return err;
	strata_hotcache_params p;
	fill_params(hc, &p, STRATA_HC_STEP);
	p.n_rows = b->rows;
	p.k = b->k;
	p.ids = b->ids;
	p.row_rl = b->row_rl;
	p.out = b->out;
	p.scratch = hc->scratch;
	p.src = host_space(hc);
	p.dst = pool_space(hc, hc->pool);
	err = strata_k_hotcache(d, &p, s); /* lookups, victims and the misses' copies */
	if (!err)
		err = strata_event_record(d, hc->ev_step, s);
	if (!err)
		hc->stepped = 1;
	return err;
}

int strata_hotcache_predict(strata_hotcache *hc, int n, const int32_t *rl, strata_stream *side)
{
	if (!hc || n < 0 || n > hc->c.max_rows || (n && !rl))
		return -EINVAL;
	if (!n || !hc->c.predict_max)
		return 0;
	strata_dev *d = hc->dev;
	int err = 0;
	if (hc->stepped)
		err = strata_stream_wait_event(d, side, hc->ev_step);
	if (err)
		return err;
	strata_hotcache_params p;
	fill_params(hc, &p, STRATA_HC_PREFETCH);
	p.n_rows = n;
	p.k = 0;
	p.row_rl = rl;
	p.scratch = hc->scratch_pf;
	p.src = host_space(hc);
	p.dst = pool_space(hc, hc->pool);
	err = strata_k_hotcache(d, &p, side);
	if (!err)
		err = strata_event_record(d, hc->ev_predict, side);
	if (!err)
		hc->predicted = 1;
	return err;
}

int strata_hotcache_append(strata_hotcache *hc, int n, const int32_t *rl, const int32_t *ids,
			   const float *src, strata_stream *s, strata_stream *side)
{
	if (!hc || n < 0 || n > hc->c.max_append || (n && (!rl || !ids || !src)))
		return -EINVAL;
	if (!n)
		return 0;
	strata_dev *d = hc->dev;
	if (!side)
		side = s;
	int err = 0;
	/* The staging area is reused: the previous write-back must have read it. A
	 * predict may be touching the same rl's slots. */
	if (hc->written)
		err = strata_stream_wait_event(d, s, hc->ev_wb);
	if (!err && hc->predicted)
		err = strata_stream_wait_event(d, s, hc->ev_predict);
	if (err)
		return err;
	strata_main_encode_params e = { src, NULL, n, hc->c.B_hot, hc->staging };
	err = strata_k_main_encode(d, &e, s);
	if (err)
		return err;
	strata_hotcache_params p;
	fill_params(hc, &p, STRATA_HC_APPEND);
	p.n_rows = n;
	p.k = 1;
	p.ids = ids;
	p.row_rl = rl;
	p.out = hc->app_out;
	p.scratch = hc->scratch;
	err = strata_k_hotcache(d, &p, s);
	if (err)
		return err;
	strata_gather_params g = { 0 };
	g.n = n;
	g.src = pool_space(hc, hc->staging);
	g.dst_ids = hc->app_out;
	g.dst = pool_space(hc, hc->pool);
	err = strata_k_gather(d, &g, s);
	if (!err)
		err = strata_event_record(d, hc->ev_append, s);
	if (!err)
		err = strata_stream_wait_event(d, side, hc->ev_append);
	if (err)
		return err;
	strata_gather_params w = { 0 };
	w.n = n;
	w.src = pool_space(hc, hc->staging);
	w.dst_ids = ids;
	w.dst_tab = rl;
	w.dst = host_space(hc);
	err = strata_k_gather(d, &w, side);
	if (!err)
		err = strata_event_record(d, hc->ev_wb, side);
	if (!err)
		hc->written = 1;
	return err;
}

int strata_hotcache_release(strata_hotcache *hc, int rl, strata_stream *s)
{
	if (!hc || rl < 0 || rl >= hc->c.n_rl)
		return -EINVAL;
	int err = 0;
	if (hc->predicted)
		err = strata_stream_wait_event(hc->dev, s, hc->ev_predict);
	if (!err && hc->written)
		err = strata_stream_wait_event(hc->dev, s, hc->ev_wb);
	return err ? err : reset_state(hc, rl, 1, s);
}

int strata_hotcache_stats_get(strata_hotcache *hc, int rl, strata_hotcache_stats *out)
{
	if (!hc || !out || rl >= hc->c.n_rl)
		return -EINVAL;
	int r0 = rl < 0 ? 0 : rl, nr = rl < 0 ? hc->c.n_rl : 1;
	size_t bytes = (size_t)nr * STRATA_HC_NCOUNTERS * 8;
	uint64_t *c = malloc(bytes);
	if (!c)
		return -ENOMEM;
	int err = strata_dev_sync(hc->dev);
	if (!err)
		err = strata_dev_copy(hc->dev, c, hc->counters + (size_t)r0 * STRATA_HC_NCOUNTERS,
				      bytes, NULL);
	if (!err)
		err = strata_dev_sync(hc->dev);
	if (!err) {
		uint64_t t[STRATA_HC_NCOUNTERS] = { 0 };
		for (int r = 0; r < nr; r++)
			for (int i = 0; i < STRATA_HC_NCOUNTERS; i++)
				t[i] += c[(size_t)r * STRATA_HC_NCOUNTERS + i];
		memset(out, 0, sizeof *out);
		out->lookups = t[STRATA_HC_C_LOOKUPS];
		out->hits = t[STRATA_HC_C_HITS];
		out->misses = t[STRATA_HC_C_MISSES];
		out->overflow = t[STRATA_HC_C_OVERFLOW];
		out->prefetched = t[STRATA_HC_C_PREFETCHED];
		out->prefetch_used = t[STRATA_HC_C_PF_USED];
		out->appended = t[STRATA_HC_C_APPENDED];
		out->steps = t[STRATA_HC_C_STEPS];
		out->bytes_moved = out->misses * STRATA_MAIN_ENTRY_BYTES;
		out->bytes_prefetched = out->prefetched * STRATA_MAIN_ENTRY_BYTES;
		out->bytes_saved = out->prefetch_used * STRATA_MAIN_ENTRY_BYTES;
		out->bytes_written = out->appended * STRATA_MAIN_ENTRY_BYTES;
	}
	free(c);
	return err;
}

int strata_hotcache_stats_reset(strata_hotcache *hc)
{
	if (!hc)
		return -EINVAL;
	int err = strata_dev_sync(hc->dev);
	if (!err)
		err = strata_dev_memset(hc->dev, hc->counters, 0,
					(size_t)hc->c.n_rl * STRATA_HC_NCOUNTERS * 8, NULL);
	return err ? err : strata_dev_sync(hc->dev);
}

int strata_hotcache_check(strata_hotcache *hc)
{
	if (!hc)
		return -EINVAL;
	int32_t e = 0;
	int err = strata_dev_sync(hc->dev);
	if (!err)
		err = strata_dev_copy(hc->dev, &e, hc->err, 4, NULL);
	if (!err)
		err = strata_dev_memset(hc->dev, hc->err, 0, 4, NULL);
	if (!err)
		err = strata_dev_sync(hc->dev);
	if (err)
		return err;
	if (e & (STRATA_HC_ERR_SPLIT | STRATA_HC_ERR_RANGE)) {
		PLOG(STRATA_LOG_WARN, "hot cache: %s", e & STRATA_HC_ERR_SPLIT ?
		     "rows of one (request, layer) were not adjacent" : "id or rl out of range");
		return -EINVAL;
	}
	return e & STRATA_HC_ERR_OVERFLOW ? STRATA_E_BUDGET : 0;
}

int strata_hotcache_dump(strata_hotcache *hc, int32_t *map, int32_t *owner, int32_t *hand)
{
	if (!hc)
		return -EINVAL;
	int err = strata_dev_sync(hc->dev);
	if (!err && map)
		err = strata_dev_copy(hc->dev, map, hc->map,
				      (size_t)hc->c.n_rl * hc->c.max_entries * 4, NULL);
	if (!err && owner)
		err = strata_dev_copy(hc->dev, owner, hc->owner, (size_t)hc->n_slots * 4, NULL);
	if (!err && hand)
		err = strata_dev_copy(hc->dev, hand, hc->hand, (size_t)hc->c.n_rl * 4, NULL);
	return err ? err : strata_dev_sync(hc->dev);
}
