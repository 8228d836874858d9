/* Restore: one rank's pages of a stored entry, and the residual state, into the
 * caller's buffers or fresh ones.
 *
 * Two sources, both at the speed of their tier. Blocks with host copies: their pages sit
 * in host runs laid out per (layer, family) (prefix_int.h), so the copies are walked per
 * (layer, family) and page after page, and every stretch that is adjacent both in the
 * source and in the destination, inside one allocation on each side, becomes one copy
 * (a copy across two allocations is invalid on the GPU); on the GPU these are async copies on
 * the handle's stream with one sync at the end. Blocks without: their records are read
 * from the page store through a window of reads kept submitted (reap one, submit the
 * next), straight into host destinations; device-bound pages land in pinned staging and
 * go on with an async copy, and staging is recycled with one stream sync per window
 * rather than one per batch. */
#include "cachemgr/prefix_int.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SUB STRATA_SUB_CACHEMGR
#define ALIGN 4096u /* host destinations: what lets the NVMe store skip its bounce */

typedef struct restore_priv {
	uint32_t n;          /* chain length */
	int32_t *idx;
	uint32_t *gen;
	void *dev_buf, *host_buf; /* what restore allocated (NULL: none) */
} restore_priv;

uint32_t strata_prefix_rank_pages(const strata_prefix_hit *hit, int P, int rank)
{
	if (!hit || P < 1 || rank < 0 || rank >= P)
		return 0;
	uint32_t d = hit->pages;
	return (uint32_t)rank < d ? (d - 1 - (uint32_t)rank) / (uint32_t)P + 1 : 0;
}

size_t strata_prefix_state_bytes(const strata_model *m)
{
	size_t n = 0;
	for (int l = 0; m && l < m->n_layers; l++)
		n += strata_prefix_ring_bytes(m) + strata_prefix_comp_bytes(m, l);
	return n;
}

void strata_prefix_restored_release(strata_prefix *pfx, strata_prefix_restored *out)
{
	if (!pfx || !out || out->size < sizeof *out)
		return;
	restore_priv *pv = out->priv_;
	if (pv) {
		for (uint32_t i = 0; i < pv->n; i++) {
			pfx_node *nd = &pfx->ix.nodes[pv->idx[i]];
			if (nd->used && nd->gen == pv->gen[i] && nd->pins)
				nd->pins--;
		}
		strata_dev_free(pfx->dev, pv->dev_buf);
		strata_dev_host_free(pfx->dev, pv->host_buf);
		free(pv->idx);
		free(pv->gen);
		free(pv);
		pfx->live_restores--;
	}
	free(out->page_ids);
	/* The inputs (size, dest, into, into_state) stay: the caller restores into the
	 * same memory again. */
	size_t keep = offsetof(strata_prefix_restored, into_state) + sizeof out->into_state;
	memset((char *)out + keep, 0, sizeof *out - keep);
}

/* Where slot q of a block's canonical page order lands for this rank's j-th page. */
static uint8_t *dest_of(strata_prefix_restored *out, const strata_prefix *pfx, uint32_t q,
			uint32_t j)
{
	return (uint8_t *)out->pages[pfx->lay[q].layer][pfx->lay[q].kind] +
	       (size_t)j * pfx->lay[q].len;
}

static bool to_dev(const strata_prefix_restored *out, const strata_prefix *pfx, uint32_t q)
{
	return out->dest[pfx->lay[q].kind] == STRATA_PFX_TO_DEVICE;
}

static pfx_node *node_of(strata_prefix *pfx, const restore_priv *pv, const strata_prefix_restored *out,
			 uint32_t j)
{
	return &pfx->ix.nodes[pv->idx[out->page_ids[j]]];
}

/* A damaged page: drop its block and everything after it, and say so. */
static int damaged(strata_prefix *pfx, int32_t node, int err)
{
	if (err != STRATA_E_CHECKSUM && err != STRATA_E_CORRUPT)
		return err;
	pfx->st.checksum_failures++;
	pfx_drop_subtree(pfx, node, err);
	return STRATA_E_CHECKSUM;
}

/* ---- from host copies ---------------------------------------------------------------- */

/* A copy may join the next page only inside one allocation on each side: the CUDA
 * runtime rejects (cudaErrorInvalidValue) a copy whose range runs from one allocation
 * into another, however adjacent their addresses. So a span remembers the host run it
 * reads and the destination allocation it writes: restore's own buffer (one for all
 * the (layer, family) arrays it carves), or one caller array of into[] (separate
 * cudaMalloc's that often sit back to back). */
typedef struct span {
	uint8_t *dst;
	const uint8_t *src;
	size_t len;
	bool dev;
	const void *src_alloc, *dst_alloc;
} span;

static int flush(strata_prefix *pfx, strata_prefix_restored *out, const span *s)
{
	if (!s->len)
		return 0;
	out->host_copies++;
	if (s->dev)
		return strata_dev_copy(pfx->dev, s->dst, s->src, s->len, pfx->stream);
	memcpy(s->dst, s->src, s->len); /* host to host: no runtime call on any backend */
	return 0;
}

static int copy_host_pages(strata_prefix *pfx, strata_prefix_restored *out, const restore_priv *pv)
{
	span cur = { 0 };
	int rc = 0;
	for (uint32_t q = 0; q < pfx->blk_locs && !rc; q++) {
		size_t len = pfx->lay[q].len;
		bool dev = to_dev(out, pfx, q);
		const void *into = out->into[pfx->lay[q].layer][pfx->lay[q].kind];
		const void *dst_alloc = into ? into : dev ? pv->dev_buf : pv->host_buf;
		for (uint32_t j = 0; j < out->n_pages && !rc; j++) {
			const pfx_node *nd = node_of(pfx, pv, out, j);
			if (!nd->hrun)
				continue;
			const uint8_t *src = pfx_host_page(pfx, nd, q);
			uint8_t *dst = dest_of(out, pfx, q, j);
			out->bytes_from_host += len;
			if (cur.len && cur.dev == dev && cur.src_alloc == nd->hrun &&
			    cur.dst_alloc == dst_alloc && cur.src + cur.len == src &&
			    cur.dst + cur.len == dst) {
				cur.len += len;
				continue;
			}
			rc = flush(pfx, out, &cur);
			cur = (span){ dst, src, len, dev, nd->hrun, dst_alloc };
		}
	}
	return rc ? rc : flush(pfx, out, &cur);
}

/* ---- from the page store -------------------------------------------------------------- */

typedef struct window {
	pfx_io *io;                  /* W reads; io i stages in stage + i * slot */
	pfx_io **free_, **pend, **staged;
	uint32_t W, n_free, p_head, n_pend, n_staged;
	size_t slot;
} window;

static void window_free(window *w)
{
	free(w->io);
	free(w->free_);
	free(w->pend);
	free(w->staged);
}

static int window_init(strata_prefix *pfx, const strata_prefix_restored *out, window *w,
		       uint32_t n_state)
{
	/* Several blocks' worth, and well past any queue depth, so that the store never
	 * waits on us. */
	w->W = pfx->blk_locs * 4 > 512 ? pfx->blk_locs * 4 : 512;
	if (w->W < n_state)
		w->W = n_state;
	w->slot = 0;
	for (uint32_t q = 0; q < pfx->blk_locs; q++)
		if (to_dev(out, pfx, q) && pfx->lay[q].len > w->slot)
			w->slot = pfx->lay[q].len;
	w->slot = (w->slot + ALIGN - 1) / ALIGN * ALIGN;
	w->io = calloc(w->W, sizeof *w->io);
	w->free_ = malloc(w->W * sizeof *w->free_);
	w->pend = malloc(w->W * sizeof *w->pend);
	w->staged = malloc(w->W * sizeof *w->staged);
	if (!w->io || !w->free_ || !w->pend || !w->staged)
		return -ENOMEM;
	for (uint32_t i = 0; i < w->W; i++)
		w->free_[i] = &w->io[w->W - 1 - i];
	w->n_free = w->W;
	size_t need = w->slot * w->W;
	if (need > pfx->stage_bytes) {
		/* Kept on the handle: pinned memory is slow to get, and a restore's staging
		 * need is bounded by the window, not by the entry. */
		strata_dev_host_free(pfx->dev, pfx->stage);
		pfx->stage = NULL;
		pfx->stage_bytes = 0;
		int rc = strata_dev_host_alloc(pfx->dev, need, (void **)&pfx->stage);
		if (rc)
			return rc;
		pfx->stage_bytes = need;
	}
	return 0;
}

/* Job j of a store read: the checkpoint's state (STATE_JOB), else this rank's page j. */
#define STATE_JOB UINT32_MAX

static int read_store(strata_prefix *pfx, strata_prefix_restored *out, const restore_priv *pv,
		      pfx_record *r)
{
	const pfx_pages_ops *ops = pfx->ps->ops;
	const int32_t last = pv->idx[pv->n - 1];
	uint32_t per = pfx->blk_locs, j = 0, bad_j = 0;
	uint32_t n_state = pfx->ckpt_locs - pfx->blk_locs;
	bool state = !pfx->ix.nodes[last].hstate;
	window w = { 0 };
	pfx_io *done[64];
	int err = 0, rc = 0;
	while (j < out->n_pages && node_of(pfx, pv, out, j)->hrun)
		j++;
	if (j == out->n_pages && !state)
		return 0;
	if ((rc = window_init(pfx, out, &w, n_state)))
		goto out;
	for (;;) {
		/* Describe whole blocks (the state first) while the window has room. */
		while (!err && (state || j < out->n_pages) && w.n_free >= (state ? n_state : per)) {
			const pfx_node *nd = state ? &pfx->ix.nodes[last] : node_of(pfx, pv, out, j);
			if (!state && nd->hrun) {
				j++;
				continue;
			}
			uint32_t job = state ? STATE_JOB : j;
			uint32_t q0 = state ? pfx->blk_locs : 0, q1 = state ? pfx->ckpt_locs : per;
			if ((err = pfx_get_record(pfx, nd->key, r))) {
				bad_j = job;
				break;
			}
			for (uint32_t q = q0; q < q1; q++) {
				pfx_io *x = w.free_[--w.n_free];
				x->addr = r->loc[q].addr;
				x->len = r->loc[q].len;
				x->csum = r->loc[q].csum;
				x->tag = (uint64_t)job << 32 | q;
				if (state)
					x->dst = (uint8_t *)out->ring[0] + (pfx->lay[q].off - pfx->blk_bytes);
				else if (to_dev(out, pfx, q))
					x->dst = pfx->stage + (size_t)(x - w.io) * w.slot;
				else
					x->dst = dest_of(out, pfx, q, j);
				w.pend[(w.p_head + w.n_pend++) % w.W] = x;
			}
			if (state)
				state = false;
			else
				j++;
		}
		/* Hand the store as many as it takes (the pend ring in contiguous pieces). */
		while (!err && w.n_pend) {
			uint32_t run = w.W - w.p_head < w.n_pend ? w.W - w.p_head : w.n_pend;
			int k = ops->submit(pfx->ps, w.pend + w.p_head, (int)run);
			if (k < 0)
				err = k;
			if (k <= 0)
				break;
			w.p_head = (w.p_head + (uint32_t)k) % w.W;
			w.n_pend -= (uint32_t)k;
		}
		int inflight = ops->inflight(pfx->ps);
		if (!inflight && (err || (!w.n_pend && !state && j >= out->n_pages)))
			break;
		/* Wait only when there is nothing else to do. */
		bool more = !err && j < out->n_pages && w.n_free >= per;
		int got = ops->reap(pfx->ps, more || !inflight ? 0 : 1, done, 64);
		if (got < 0) {
			rc = got; /* the ring is broken: nothing more comes back */
			goto out;
		}
		for (int i = 0; i < got; i++) {
			pfx_io *x = done[i];
			uint32_t job = (uint32_t)(x->tag >> 32), q = (uint32_t)x->tag;
			if (x->result) {
				if (!err) {
					err = x->result;
					bad_j = job;
				}
				w.free_[w.n_free++] = x;
				continue;
			}
			if (job == STATE_JOB || !to_dev(out, pfx, q)) {
				if (job != STATE_JOB)
					out->bytes_from_nvme += x->len;
				w.free_[w.n_free++] = x;
				continue;
			}
			out->bytes_from_nvme += x->len;
			if (!err && (err = strata_dev_copy(pfx->dev, dest_of(out, pfx, q, job), x->dst,
							   x->len, pfx->stream)))
				bad_j = job;
			w.staged[w.n_staged++] = x;
		}
		/* Staging goes back once its copies are done: one sync per window's worth. */
		if (w.n_staged && (w.n_free < per || err)) {
			int e = strata_stream_sync(pfx->dev, pfx->stream);
			if (e && !err)
				err = e;
			while (w.n_staged)
				w.free_[w.n_free++] = w.staged[--w.n_staged];
		}
	}
	if (err)
		rc = damaged(pfx, bad_j == STATE_JOB ? last : pv->idx[out->page_ids[bad_j]], err);
out:
	window_free(&w);
	return rc;
}

/* Destination memory: the caller's where given, else one buffer per kind (host, device),
 * carved per (layer, family) in canonical order so that a host run maps onto it in one
 * piece. Host memory starts 4 KiB-aligned; the state comes first, rounded up to 4 KiB. */
static int place(strata_prefix *pfx, strata_prefix_restored *out, restore_priv *pv)
{
	const strata_model *m = &pfx->model;
	size_t state = pfx->ckpt_bytes - pfx->blk_bytes;
	size_t bytes[2] = { out->into_state ? 0 : (state + ALIGN - 1) / ALIGN * ALIGN, 0 };
	for (uint32_t q = 0; q < pfx->blk_locs; q++)
		if (!out->into[pfx->lay[q].layer][pfx->lay[q].kind])
			bytes[to_dev(out, pfx, q)] += (size_t)out->n_pages * pfx->lay[q].len;
	uint8_t *base[2] = { NULL, NULL };
	int rc;
	if (bytes[0]) {
		if ((rc = strata_dev_host_alloc(pfx->dev, bytes[0] + ALIGN, &pv->host_buf)))
			return rc;
		base[0] = (uint8_t *)(((uintptr_t)pv->host_buf + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
	}
	if (bytes[1]) {
		if ((rc = strata_dev_alloc(pfx->dev, bytes[1], &pv->dev_buf)))
			return rc;
		base[1] = pv->dev_buf;
	}
	uint8_t *st = out->into_state ? (uint8_t *)out->into_state : base[0];
	size_t off[2] = { bytes[0] && !out->into_state ? (state + ALIGN - 1) / ALIGN * ALIGN : 0, 0 };
	for (uint32_t q = 0; q < pfx->blk_locs; q++) {
		int l = pfx->lay[q].layer, f = pfx->lay[q].kind, d = to_dev(out, pfx, q);
		if (!out->n_pages) {
			out->pages[l][f] = NULL;
		} else if (out->into[l][f]) {
			out->pages[l][f] = out->into[l][f];
		} else {
			out->pages[l][f] = base[d] + off[d];
			off[d] += (size_t)out->n_pages * pfx->lay[q].len;
		}
	}
	for (uint32_t q = pfx->blk_locs; q < pfx->ckpt_locs; q++) {
		int l = pfx->lay[q].layer;
		out->ring[l] = st + (pfx->lay[q].off - pfx->blk_bytes);
		out->comp[l] = strata_prefix_comp_bytes(m, l) ?
				       (uint8_t *)out->ring[l] + strata_prefix_ring_bytes(m) : NULL;
	}
	for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
		out->page_bytes[f] = strata_prefix_page_bytes(m, (strata_prefix_family)f);
	return 0;
}

int strata_prefix_restore(strata_prefix *pfx, const strata_prefix_hit *hit, int P, int rank,
			  strata_prefix_restored *out)
{
	if (!pfx || !hit || !out || out->size < sizeof *out)
		return -EINVAL;
	if (P < 1 || rank < 0 || rank >= P) {
		STRATA_LOG(STRATA_LOG_ERROR, SUB, "prefix: restore onto rank %d of %d ranks", rank, P);
		return -EINVAL;
	}
	for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
		if (out->dest[f] != STRATA_PFX_TO_HOST && out->dest[f] != STRATA_PFX_TO_DEVICE)
			return -EINVAL;
	strata_prefix_restored_release(pfx, out);
	int32_t n = pfx_index_find(&pfx->ix, hit->key);
	if (n < 0 || !pfx->ix.nodes[n].ckpt || pfx->ix.nodes[n].block + 1 != hit->pages ||
	    hit->tokens != (uint64_t)hit->pages * STRATA_BLOCK_TOKENS)
		return STRATA_E_NOTFOUND;
	uint32_t d = hit->pages;
	restore_priv *pv = calloc(1, sizeof *pv);
	pfx_record *r = malloc(sizeof *r);
	int rc = 0;
	if (!pv || !r) {
		free(pv);
		free(r);
		return -ENOMEM;
	}
	pv->idx = malloc(d * sizeof *pv->idx);
	pv->gen = malloc(d * sizeof *pv->gen);
	out->n_pages = strata_prefix_rank_pages(hit, P, rank);
	out->page_ids = malloc((out->n_pages + 1) * sizeof *out->page_ids);
	if (!pv->idx || !pv->gen || !out->page_ids) {
		rc = -ENOMEM;
		goto fail;
	}
	for (int32_t k = n, i = (int32_t)d - 1; i >= 0; i--) {
		if (k < 0 || pfx->ix.nodes[k].block != (uint32_t)i) {
			rc = STRATA_E_CORRUPT; /* the index lost a link: a bug, not the disk */
			goto fail;
		}
		pv->idx[i] = k;
		pv->gen[i] = pfx->ix.nodes[k].gen;
		k = pfx->ix.nodes[k].parent;
	}
	pv->n = d;
	pfx->live_restores++;
	out->priv_ = pv;
	for (uint32_t i = 0; i < d; i++)
		pfx->ix.nodes[pv->idx[i]].pins++;
	for (uint32_t j = 0; j < out->n_pages; j++)
		out->page_ids[j] = (uint32_t)strata_prefix_global_page(j, rank, P);

	if ((rc = place(pfx, out, pv)))
		goto fail;
	/* Host copies first: on the GPU they run while the CPU copies the state and reads
	 * the store. Layer 0's state starts the state block. */
	if ((rc = copy_host_pages(pfx, out, pv)))
		goto fail;
	const pfx_node *last = &pfx->ix.nodes[n];
	if (last->hstate)
		memcpy(out->ring[0], last->hstate, pfx->ckpt_bytes - pfx->blk_bytes);
	if ((rc = read_store(pfx, out, pv, r)))
		goto fail;
	if ((rc = strata_stream_sync(pfx->dev, pfx->stream)))
		goto fail;
	if ((rc = pfx_get_record(pfx, pfx->ix.nodes[n].key, r)))
		goto fail;
	out->writer_dcp = r->writer_dcp;
	out->tokens = hit->tokens;
	out->total_pages = d;
	out->P = P;
	out->rank = rank;
	for (uint32_t i = 0; i < d; i++)
		pfx->ix.nodes[pv->idx[i]].lru = ++pfx->tick;
	pfx->st.restores++;
	free(r);
	return 0;
fail:
	/* Copies may still be queued into memory release is about to free. */
	strata_stream_sync(pfx->dev, pfx->stream);
	free(r);
	if (!out->priv_) {
		free(pv->idx);
		free(pv->gen);
		free(pv);
	}
	strata_prefix_restored_release(pfx, out);
	return rc;
}
