/*
 * Private to kernels/: the pieces of early staging (strata_k_attn_prestage) that the
 * CPU twin (prestage_cpu.c) and the GPU kernels (prestage.cu) share, so that both
 * bucket and cut the same way.
 */
#ifndef STRATA_KERNELS_PRESTAGE_INT_H
#define STRATA_KERNELS_PRESTAGE_INT_H

#include "kernels/attention_int.h"
#include "kernels/codec.h"
#include "kernels/kernels.h"

#define PRE_BINS STRATA_PRESTAGE_BUCKETS
#define PRE_CNT 4 /* per row: slots taken, CTAs done */
#define PRE_ENTRY_BITS 24
#define PRE_ENTRY_LIMIT ((int64_t)1 << PRE_ENTRY_BITS)
#define PRE_EPOCH_LIMIT ((uint64_t)1 << 40)
#define PRE_E0 112 /* biased exponent of 2^-15, the lowest binade with its own steps */

/* Monotone non-decreasing in s (-0 and +0 equal): magnitude code c in [0, 1023] is
 * 32 steps (the top 5 mantissa bits) per binade over [2^-15, 2^17), clamped at both
 * ends; positive scores take 1024 + c, negative ones 1024 - c. */
STRATA_HD uint32_t pre_bucket(float s)
{
	const uint32_t u = codec_f2u(s), a = u & 0x7fffffffu;
	const int e = (int)(a >> 23);
	uint32_t c;
	if (e < PRE_E0)
		c = 0;
	else if (e >= PRE_E0 + 32)
		c = 1023;
	else
		c = (uint32_t)(e - PRE_E0) * 32u + ((a >> 18) & 31u);
	return (u >> 31) ? 1024u - c : 1024u + c;
}

/* b*: the highest bucket b with at least k scores in buckets >= b (0 when there are
 * fewer than k in all). */
STRATA_HD uint32_t pre_cut(const uint32_t *hist, uint32_t k)
{
	uint32_t acc = 0;
	for (int b = PRE_BINS - 1; b > 0; b--) {
		acc += hist[b];
		if (acc >= k)
			return (uint32_t)b;
	}
	return 0;
}

STRATA_HD int pre_row_limit(const strata_attn_prestage_params *p, int r)
{
	const int L = p->row_limit[r];
	return L < 0 ? 0 : L > p->max_limit ? p->max_limit : L;
}

/* Scratch: [n_rows][PRE_BINS] histogram, then [n_rows][PRE_CNT] counters; all zero at
 * rest. */
static inline size_t pre_scratch_bytes(int n_rows)
{
	return (size_t)n_rows * (PRE_BINS + PRE_CNT) * sizeof(uint32_t);
}

#ifdef __cplusplus
extern "C" {
#endif
/* Host-field checks both backends share: 0 or -EINVAL. */
int pre_check(const strata_attn_prestage_params *p);
#ifdef STRATA_HAVE_CUDA
int strata_k_attn_prestage_gpu(strata_dev *dev, const strata_attn_prestage_params *p,
			       strata_stream *s);
#endif
#ifdef __cplusplus
}
#endif

#endif
