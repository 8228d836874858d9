/*
 * Sparse MQA attention with the per-head sink, and the LSE combine: the CPU references
 * that define the summation order (kernels.h, "attention"), and the dispatchers.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention_int.h"

static int attn_check(const strata_attn_params *p)
{
	if (!p || p->n_rows < 0 || p->heads < 1 || p->n_idx < 0 || p->n_win < 0)
		return -EINVAL;
	if (p->n_rows && (!p->q || !p->out))
		return -EINVAL;
	if (p->n_idx && (!p->pool || !p->idx || p->B < 1))
		return -EINVAL;
	if (p->n_win && (!p->win_pool || !p->win_idx || p->win_B < 1))
		return -EINVAL;
	if (p->pool2 && p->B2 < 1)
		return -EINVAL;
	return 0;
}

static void dequant_entry(const uint8_t *pool, int B, int64_t slot, float *dst)
{
	const uint8_t *data = attn_entry_data(pool, B, slot);
	const uint8_t *sc = attn_entry_scales(pool, B, slot);
	for (int d = 0; d < STRATA_HEAD_DIM; d++)
		dst[d] = attn_entry_dim(data, sc, d);
}

int strata_k_attn_cpu(const strata_attn_params *p)
{
	int err = attn_check(p);
	if (err)
		return err;
	const int D = STRATA_HEAD_DIM;
	int n_tot = p->n_idx + p->n_win;
	float *kv = malloc(((size_t)n_tot + 1) * D * sizeof *kv);
	float *s = malloc(((size_t)n_tot + 1) * sizeof *s);
	if (!kv || !s) {
		err = -ENOMEM;
		goto out;
	}
	for (int r = 0; r < p->n_rows; r++) {
		/* The row's valid entries, dequantised once (MQA: shared by all heads). */
		int n = 0;
		for (int j = 0; j < n_tot; j++) {
			int32_t slot = j < p->n_idx ? p->idx[(size_t)r * p->n_idx + j]
						    : p->win_idx[(size_t)r * p->n_win + j - p->n_idx];
			if (j < p->n_idx && slot <= -2 && p->pool2)
				dequant_entry(p->pool2, p->B2, -2 - (int64_t)slot, kv + (size_t)n * D);
			else if (slot < 0)
				continue;
			else if (j < p->n_idx)
				dequant_entry(p->pool, p->B, slot, kv + (size_t)n * D);
			else
				dequant_entry(p->win_pool, p->win_B, slot, kv + (size_t)n * D);
			n++;
		}
		for (int h = 0; h < p->heads; h++) {
			const float *q = p->q + ((size_t)r * p->heads + h) * D;
			float *o = p->out + ((size_t)r * p->heads + h) * D;
			memset(o, 0, sizeof *o * D);
			float lse = -INFINITY;
			if (n > 0) {
				float m = -INFINITY;
				for (int j = 0; j < n; j++) {
					const float *k = kv + (size_t)j * D;
					float dot = 0.0f;
					for (int d = 0; d < D; d++)
						dot += q[d] * k[d];
					s[j] = p->scale * dot;
					m = fmaxf(m, s[j]);
				}
				float l = 0.0f;
				for (int j = 0; j < n; j++) {
					s[j] = expf(s[j] - m);
					l += s[j];
				}
				for (int j = 0; j < n; j++) {
					const float *v = kv + (size_t)j * D;
					float w = s[j] / l;
					for (int d = 0; d < D; d++)
						o[d] += w * v[d];
				}
				lse = m + logf(l);
				if (p->sink) {
					float f = attn_sink_factor(lse, p->sink[h]);
					for (int d = 0; d < D; d++)
						o[d] *= f;
				}
			}
			if (p->lse)
				p->lse[(size_t)r * p->heads + h] = lse;
		}
	}
out:
	free(kv);
	free(s);
	return err;
}

size_t strata_k_attn_scratch(const strata_dev *dev, const strata_attn_params *p)
{
	if (!p || p->n_rows < 0 || p->heads < 1 || p->n_idx < 0 || p->n_win < 0)
		return 0;
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_k_attn_scratch_gpu(dev, p);
#endif
	(void)dev;
	return 0; /* the CPU twin needs none */
}

int strata_k_attn(strata_dev *dev, const strata_attn_params *p, strata_stream *s)
{
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_k_attn_gpu(dev, p, s);
#endif
	(void)dev;
	(void)s;
	return strata_k_attn_cpu(p);
}

static int combine_check(const strata_attn_combine_params *p)
{
	if (!p || p->n_parts < 1 || p->n_rows < 0 || p->heads < 1 || p->dim < 1)
		return -EINVAL;
	if (p->n_rows && (!p->part_out || !p->part_lse || !p->out))
		return -EINVAL;
	return 0;
}

int strata_k_attn_combine_cpu(const strata_attn_combine_params *p)
{
	int err = combine_check(p);
	if (err)
		return err;
	size_t rh = (size_t)p->n_rows * p->heads;
	for (size_t i = 0; i < rh; i++) {
		int h = (int)(i % (size_t)p->heads);
		float *o = p->out + i * p->dim;
		float m = -INFINITY;
		for (int k = 0; k < p->n_parts; k++)
			m = fmaxf(m, p->part_lse[k * rh + i]);
		memset(o, 0, sizeof *o * p->dim);
		float lse = -INFINITY;
		if (m != -INFINITY) {
			float z = 0.0f;
			for (int k = 0; k < p->n_parts; k++) {
				float lk = p->part_lse[k * rh + i];
				if (lk == -INFINITY)
					continue;
				float w = expf(lk - m);
				const float *po = p->part_out + (k * rh + i) * p->dim;
				z += w;
				for (int d = 0; d < p->dim; d++)
					o[d] += w * po[d];
			}
			lse = m + logf(z);
			float f = 1.0f / z;
			if (p->sink)
				f *= attn_sink_factor(lse, p->sink[h]);
			for (int d = 0; d < p->dim; d++)
				o[d] *= f;
		}
		if (p->lse)
			p->lse[i] = lse;
	}
	return 0;
}

int strata_k_attn_combine(strata_dev *dev, const strata_attn_combine_params *p,
			  strata_stream *s)
{
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_k_attn_combine_gpu(dev, p, s);
#endif
	(void)dev;
	(void)s;
	return strata_k_attn_combine_cpu(p);
}

int strata_k_attn_map_cpu(const strata_attn_map_params *p)
{
	if (!p || p->n_rows < 0 || p->width < 0 ||
	    (p->n_rows && p->width && (!p->ids || !p->row_base || !p->out)) ||
	    (p->map && (!p->row_map || p->map_stride < 1)) ||
	    (p->stage && (!p->map || !p->host || p->host_B < 1 || p->stage_B < 1)) ||
	    (p->stage_map && (!p->stage || p->epoch < 1)))
		return -EINVAL;
	unsigned long long early = 0, late = 0;
	for (int r = 0; r < p->n_rows; r++)
		for (int k = 0; k < p->width; k++) {
			size_t i = (size_t)r * p->width + k;
			int32_t id = p->ids[i];
			if (id < 0) {
				p->out[i] = -1;
			} else if (p->map) {
				int32_t v = id < p->map_stride
						    ? p->map[(size_t)p->row_map[r] * p->map_stride + id]
						    : -1;
				const uint64_t sv =
					v < 0 && p->stage_map && id < p->map_stride
						? p->stage_map[(size_t)r * p->map_stride + id]
						: 0;
				if (v >= 0) {
					p->out[i] = v;
				} else if (p->stage_map && sv >> 24 == p->epoch) {
					p->out[i] = -2 - (int32_t)(sv & 0xffffffu);
					early++;
				} else if (p->stage) {
					const int64_t e = (int64_t)p->row_base[r] + id;
					late++;
					uint8_t *d = (uint8_t *)attn_entry_data(p->stage, p->stage_B, (int64_t)i);
					memcpy(d, attn_entry_data(p->host, p->host_B, e), 576);
					memcpy((uint8_t *)attn_entry_scales(p->stage, p->stage_B, (int64_t)i),
					       attn_entry_scales(p->host, p->host_B, e), 8);
					p->out[i] = -2 - (int32_t)i;
				} else {
					p->out[i] = -2 - (p->row_base[r] + id);
					late++;
				}
			} else {
				p->out[i] = p->row_base[r] + (p->positional ? k : id);
			}
		}
	if (p->miss_counts) {
		p->miss_counts[0] += early;
		p->miss_counts[1] += late;
	}
	return 0;
}

int strata_k_attn_head_groups(strata_dev *dev, const strata_attn_params *p)
{
	if (!p || p->heads < 1)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_k_attn_head_groups_gpu(dev, p);
#endif
	(void)dev;
	return 1;
}

int strata_k_attn_map(strata_dev *dev, const strata_attn_map_params *p, strata_stream *s)
{
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_k_attn_map_gpu(dev, p, s);
#endif
	(void)dev;
	(void)s;
	return strata_k_attn_map_cpu(p);
}
