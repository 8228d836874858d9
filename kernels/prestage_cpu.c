/*
 * Early staging of a layer's misses (strata_k_attn_prestage, kernels.h): the CPU twin,
 * which is the specification, and the dispatcher. The GPU kernel in prestage.cu does
 * the same per row with many CTAs, in whatever order they run.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/prestage_int.h"

size_t strata_k_attn_prestage_scratch(int n_rows)
{
	return n_rows > 0 ? pre_scratch_bytes(n_rows) : 0;
}

int pre_check(const strata_attn_prestage_params *p)
{
	if (!p || p->n_rows < 0 || p->topk < 1 || p->max_limit < 0 || p->cap < 0 ||
	    p->wait_us < 0 || p->wait_us > PRE_WAIT_MAX_US || p->max_ctas < 0)
		return -EINVAL;
	if (!p->n_rows)
		return 0;
	if (!p->row_limit || !p->map || !p->row_map || p->map_stride < 1 || !p->row_base ||
	    !p->host || p->host_B < 1 || !p->stage || p->stage_B < 1 || !p->stage_map ||
	    !p->scratch || p->stage_first < 0 ||
	    p->scratch_bytes < pre_scratch_bytes(p->n_rows))
		return -EINVAL;
	if (p->max_limit > p->topk &&
	    (!p->scores || !p->cut || p->score_stride < (size_t)p->max_limit ||
	     p->cut_epoch < 1 || p->cut_epoch >= PRE_EPOCH_LIMIT))
		return -EINVAL;
	if (p->epoch < 1 || p->epoch >= PRE_EPOCH_LIMIT ||
	    p->stage_first + (int64_t)p->n_rows * p->cap > PRE_ENTRY_LIMIT)
		return -EINVAL;
	return 0;
}

static void copy_entry(const strata_attn_prestage_params *p, int64_t src, int64_t dst)
{
	memcpy((uint8_t *)attn_entry_data(p->stage, p->stage_B, dst),
	       attn_entry_data(p->host, p->host_B, src), 576);
	memcpy((uint8_t *)attn_entry_scales(p->stage, p->stage_B, dst),
	       attn_entry_scales(p->host, p->host_B, src), 8);
}

int strata_k_attn_prestage_cpu(const strata_attn_prestage_params *p)
{
	int err = pre_check(p);
	if (err || !p->n_rows)
		return err;
	for (int r = 0; r < p->n_rows; r++) {
		const int L = pre_row_limit(p, r);
		const int all = L <= p->topk;
		/* sequential: the indexer call that published the cut has ended */
		const uint32_t need = all ? 0u : pre_need(p->cut[r], p->cut_epoch);
		if (need == PRE_NONE)
			continue;
		const float *sc = all ? NULL : p->scores + (size_t)r * p->score_stride;
		const int32_t *map = p->map + (size_t)p->row_map[r] * p->map_stride;
		uint64_t *sm = p->stage_map + (size_t)r * p->map_stride;
		const int top = L < p->map_stride ? L : p->map_stride;
		int n = 0;
		for (int j = 0; j < top && n < p->cap; j++) {
			if (map[j] >= 0 || (!all && need && idx_bucket(sc[j]) < need))
				continue;
			const int64_t dst = p->stage_first + (int64_t)r * p->cap + n++;
			copy_entry(p, (int64_t)p->row_base[r] + j, dst);
			sm[j] = p->epoch << PRE_ENTRY_BITS | (uint64_t)dst;
		}
		if (p->n_staged)
			*p->n_staged += (unsigned long long)n;
	}
	return 0;
}

int strata_k_attn_prestage(strata_dev *dev, const strata_attn_prestage_params *p,
			   strata_stream *s)
{
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_k_attn_prestage_gpu(dev, p, s);
#endif
	(void)dev;
	(void)s;
	return strata_k_attn_prestage_cpu(p);
}
