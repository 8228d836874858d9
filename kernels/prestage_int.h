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
#define PRE_WAIT_MAX_US 1000
#define PRE_WAIT_DEFAULT_US 50

/* The bucket a row's entries need to be taken, from its cut word: 0 (everything)
 * for STRATA_INDEXER_CUT_ALL, PRE_NONE when the word does not carry epoch (not
 * published: nothing is taken). */
#define PRE_NONE 0xffffffffu
STRATA_HD uint32_t pre_need(unsigned long long word, uint64_t epoch)
{
	if ((word >> 12) != epoch)
		return PRE_NONE;
	const uint32_t b = (uint32_t)(word & 0xfffu);
	return b == STRATA_INDEXER_CUT_ALL ? 0u : b;
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
