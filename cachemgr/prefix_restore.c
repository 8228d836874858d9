/* Restore: one rank's pages of a stored entry into fresh buffers, and the residual
 * state. Pages come from a block's host copy when it has one, else from the page store
 * in batches (verified there against the record's checksum). Device-bound pages read
 * from the store go through a pinned staging buffer. */
#include "cachemgr/prefix_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 32 /* blocks per store read batch: enough to keep the queue full */
#define SUB STRATA_SUB_CACHEMGR

typedef struct restore_priv {
	uint32_t n;          /* chain length */
	int32_t *idx;
	uint32_t *gen;
	void *dev_buf, *host_buf;
} restore_priv;

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
	strata_prefix_dest dest[STRATA_PFX_FAMILIES];
	memcpy(dest, out->dest, sizeof dest);
	memset(out, 0, sizeof *out);
	out->size = sizeof *out;
	memcpy(out->dest, dest, sizeof dest);
}

/* Where slot q of a block's canonical page order lands for this rank's j-th page. */
static uint8_t *dest_of(strata_prefix_restored *out, const strata_prefix *pfx, uint32_t q,
			uint32_t j)
{
	return (uint8_t *)out->pages[pfx->lay[q].layer][pfx->lay[q].kind] +
	       (size_t)j * pfx->lay[q].len;
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

static int read_pages(strata_prefix *pfx, strata_prefix_restored *out, restore_priv *pv,
		      uint8_t *staging, pfx_record *r)
{
	const strata_model *m = &pfx->model;
	pfx_io *io = calloc((size_t)BATCH * pfx->blk_locs, sizeof *io);
	uint8_t **final = calloc((size_t)BATCH * pfx->blk_locs, sizeof *final);
	uint32_t *io_block = calloc((size_t)BATCH * pfx->blk_locs, sizeof *io_block);
	int rc = 0;
	if (!io || !final || !io_block) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t j0 = 0; j0 < out->n_pages; j0 += BATCH) {
		uint32_t n_io = 0;
		size_t soff = 0;
		for (uint32_t j = j0; j < out->n_pages && j < j0 + BATCH; j++) {
			uint32_t i = out->page_ids[j];
			pfx_node *nd = &pfx->ix.nodes[pv->idx[i]];
			if (nd->host) {
				for (uint32_t q = 0; q < pfx->blk_locs; q++) {
					rc = strata_dev_copy(pfx->dev, dest_of(out, pfx, q, j),
							     nd->host + pfx->lay[q].off, pfx->lay[q].len, NULL);
					if (rc)
						goto out;
				}
				out->bytes_from_host += pfx->blk_bytes;
				continue;
			}
			if ((rc = pfx_get_record(pfx, nd->key, r)))
				goto out;
			for (uint32_t q = 0; q < pfx->blk_locs; q++, n_io++) {
				pfx_io *x = &io[n_io];
				x->addr = r->loc[q].addr;
				x->len = r->loc[q].len;
				x->csum = r->loc[q].csum;
				final[n_io] = dest_of(out, pfx, q, j);
				io_block[n_io] = i;
				if (out->dest[pfx->lay[q].kind] == STRATA_PFX_TO_DEVICE) {
					x->dst = staging + soff;
					soff += x->len;
				} else {
					x->dst = final[n_io];
				}
			}
		}
		if (!n_io)
			continue;
		rc = pfx->ps->ops->read(pfx->ps, io, (int)n_io);
		for (uint32_t k = 0; rc && k < n_io; k++)
			if (io[k].result) {
				rc = damaged(pfx, pv->idx[io_block[k]], io[k].result);
				goto out;
			}
		for (uint32_t k = 0; k < n_io; k++) {
			out->bytes_from_nvme += io[k].len;
			if (io[k].dst != final[k] &&
			    (rc = strata_dev_copy(pfx->dev, final[k], io[k].dst, io[k].len, NULL)))
				goto out;
		}
		/* The staging buffer is reused by the next batch. */
		if ((rc = strata_stream_sync(pfx->dev, NULL)))
			goto out;
	}
	(void)m;
out:
	free(io_block);
	free(final);
	free(io);
	return rc;
}

static int read_state(strata_prefix *pfx, strata_prefix_restored *out, restore_priv *pv,
		      uint8_t *state, pfx_record *r)
{
	int32_t n = pv->idx[pv->n - 1];
	pfx_node *nd = &pfx->ix.nodes[n];
	uint64_t len = pfx->ckpt_bytes - pfx->blk_bytes;
	if (nd->host && nd->host_bytes == pfx->ckpt_bytes) {
		memcpy(state, nd->host + pfx->blk_bytes, len);
		return 0;
	}
	int rc = pfx_get_record(pfx, nd->key, r);
	if (rc)
		return rc;
	uint32_t cnt = pfx->ckpt_locs - pfx->blk_locs;
	pfx_io io[STRATA_MAX_LAYERS];
	memset(io, 0, sizeof io);
	for (uint32_t k = 0; k < cnt; k++) {
		const pfx_loc *l = &r->loc[pfx->blk_locs + k];
		io[k].addr = l->addr;
		io[k].len = l->len;
		io[k].csum = l->csum;
		io[k].dst = state + (pfx->lay[pfx->blk_locs + k].off - pfx->blk_bytes);
	}
	rc = pfx->ps->ops->read(pfx->ps, io, (int)cnt);
	for (uint32_t k = 0; rc && k < cnt; k++)
		if (io[k].result)
			return damaged(pfx, n, io[k].result);
	return rc;
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
	const strata_model *m = &pfx->model;
	int32_t n = pfx_index_find(&pfx->ix, hit->key);
	if (n < 0 || !pfx->ix.nodes[n].ckpt || pfx->ix.nodes[n].block + 1 != hit->pages ||
	    hit->tokens != (uint64_t)hit->pages * STRATA_BLOCK_TOKENS)
		return STRATA_E_NOTFOUND;
	uint32_t d = hit->pages;
	restore_priv *pv = calloc(1, sizeof *pv);
	pfx_record *r = malloc(sizeof *r);
	uint8_t *staging = NULL;
	int rc = 0;
	if (!pv || !r) {
		free(pv);
		free(r);
		return -ENOMEM;
	}
	pv->idx = malloc(d * sizeof *pv->idx);
	pv->gen = malloc(d * sizeof *pv->gen);
	out->n_pages = (uint32_t)rank < d ? (d - 1 - (uint32_t)rank) / (uint32_t)P + 1 : 0;
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

	/* One buffer per destination, carved per layer and family. */
	size_t bytes[2] = { 0, 0 }, stage = 0, state = pfx->ckpt_bytes - pfx->blk_bytes;
	for (uint32_t q = 0; q < pfx->blk_locs; q++) {
		int dst = out->dest[pfx->lay[q].kind];
		bytes[dst] += (size_t)out->n_pages * pfx->lay[q].len;
		if (dst == STRATA_PFX_TO_DEVICE)
			stage += (size_t)BATCH * pfx->lay[q].len;
	}
	bytes[STRATA_PFX_TO_HOST] += state;
	if ((rc = strata_dev_host_alloc(pfx->dev, bytes[STRATA_PFX_TO_HOST], &pv->host_buf)))
		goto fail;
	if (bytes[STRATA_PFX_TO_DEVICE] &&
	    (rc = strata_dev_alloc(pfx->dev, bytes[STRATA_PFX_TO_DEVICE], &pv->dev_buf)))
		goto fail;
	if (stage && (rc = strata_dev_host_alloc(pfx->dev, stage, (void **)&staging)))
		goto fail;
	uint8_t *base[2] = { (uint8_t *)pv->host_buf, (uint8_t *)pv->dev_buf };
	size_t off[2] = { state, 0 };
	for (uint32_t q = 0; q < pfx->blk_locs; q++) {
		int dst = out->dest[pfx->lay[q].kind];
		out->pages[pfx->lay[q].layer][pfx->lay[q].kind] = out->n_pages ? base[dst] + off[dst] : NULL;
		off[dst] += (size_t)out->n_pages * pfx->lay[q].len;
	}
	for (uint32_t q = pfx->blk_locs; q < pfx->ckpt_locs; q++) {
		int l = pfx->lay[q].layer;
		out->ring[l] = base[0] + (pfx->lay[q].off - pfx->blk_bytes);
		out->comp[l] = strata_prefix_comp_bytes(m, l) ?
				       (uint8_t *)out->ring[l] + strata_prefix_ring_bytes(m) : NULL;
	}
	for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
		out->page_bytes[f] = strata_prefix_page_bytes(m, (strata_prefix_family)f);

	if ((rc = read_pages(pfx, out, pv, staging, r)))
		goto fail;
	if ((rc = read_state(pfx, out, pv, (uint8_t *)pv->host_buf, r)))
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
	strata_dev_host_free(pfx->dev, staging);
	free(r);
	return 0;
fail:
	strata_dev_host_free(pfx->dev, staging);
	free(r);
	if (!out->priv_) {
		free(pv->idx);
		free(pv->gen);
		free(pv);
	}
	strata_prefix_restored_release(pfx, out);
	return rc;
}
