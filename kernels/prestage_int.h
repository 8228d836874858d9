/*
 * Private to kernels/: the pieces of early staging (strata_k_attn_prestage) that the
 * CPU twin (prestage_cpu.c) and the GPU kernel (prestage.cu) share, so that both take
 * the same entries.
 */
#ifndef STRATA_KERNELS_PRESTAGE_INT_H
#define STRATA_KERNELS_PRESTAGE_INT_H

#include "kernels/attention_int.h"
#include "kernels/codec.h"
#include "kernels/indexer_int.h"
#include "kernels/kernels.h"

#define PRE_CNT 4 /* per row: slots taken, CTAs done */
#define PRE_ENTRY_BITS 24
#define PRE_ENTRY_LIMIT ((int64_t)1 << PRE_ENTRY_BITS)
#define PRE_EPOCH_LIMIT ((uint64_t)1 << 40)
#define PRE_SLACK_MAX 1024

/* The lowest order key a score needs to be taken, from the row's last selection's
 * lowest score t: ord(t) lowered by slack steps of 2^18 (1/32 of a power of two for
 * normal floats), 0 (everything) below the bottom; UINT32_MAX + 1 is not possible, so
 * a threshold of +inf (no last selection) is reported by *none. */
STRATA_HD uint32_t pre_floor(float t, int slack, int *none)
{
	*none = codec_f2u(t) == 0x7f800000u;
	const uint32_t o = idx_ord32(t), d = (uint32_t)slack << 18;
	return o > d ? o - d : 0u;
}

STRATA_HD int pre_row_limit(const strata_attn_prestage_params *p, int r)
{
	const int L = p->row_limit[r];
	return L < 0 ? 0 : L > p->max_limit ? p->max_limit : L;
}

/* Scratch: [n_rows][PRE_CNT] counters, zero at rest. */
static inline size_t pre_scratch_bytes(int n_rows)
{
	return (size_t)n_rows * PRE_CNT * sizeof(uint32_t);
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
