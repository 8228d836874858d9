/*
 * Private to kernels/: the attention kernels' shared arithmetic (main-entry addressing
 * and exact dequantisation, usable from C and CUDA) and the GPU launchers.
 */
#ifndef STRATA_KERNELS_ATTENTION_INT_H
#define STRATA_KERNELS_ATTENTION_INT_H

#include <stdint.h>

#include "kernels/codec.h"
#include "kernels/kernels.h"

/* Block stride of B main entries (FORMATS.md section 2), for device code too. */
STRATA_HD size_t attn_block_stride(int B)
{
	return (((size_t)B * 584 + 575) / 576) * 576;
}

/* Pointers to entry `slot`'s 576 data bytes and its 8 scale bytes in a pool of
 * blocks of B entries. */
STRATA_HD const uint8_t *attn_entry_data(const uint8_t *pool, int B, int64_t slot)
{
	return pool + (size_t)(slot / B) * attn_block_stride(B) + (size_t)(slot % B) * 576;
}
STRATA_HD const uint8_t *attn_entry_scales(const uint8_t *pool, int B, int64_t slot)
{
	return pool + (size_t)(slot / B) * attn_block_stride(B) + (size_t)B * 576 +
	       (size_t)(slot % B) * 8;
}

/* Dimension d of an entry, dequantised exactly (e4m3 x 2^k and bf16 are exact in
 * fp32). */
STRATA_HD float attn_entry_dim(const uint8_t *data, const uint8_t *scales, int d)
{
	if (d < 448)
		return codec_e4m3_decode(data[d]) * codec_ue8m0_decode(scales[d >> 6]);
	const uint8_t *b = data + 448 + 2 * (d - 448);
	return codec_bf16_decode((uint16_t)(b[0] | (b[1] << 8)));
}

/* exp(lse) / (exp(lse) + exp(sink)) without overflow. */
STRATA_HD float attn_sink_factor(float lse, float sink)
{
	return 1.0f / (1.0f + expf(sink - lse));
}

#ifdef __cplusplus
extern "C" {
#endif
int strata_k_attn_gpu(strata_dev *dev, const strata_attn_params *p, strata_stream *s);
size_t strata_k_attn_scratch_gpu(const strata_dev *dev, const strata_attn_params *p);
int strata_k_attn_combine_gpu(strata_dev *dev, const strata_attn_combine_params *p,
			      strata_stream *s);
int strata_k_attn_map_gpu(strata_dev *dev, const strata_attn_map_params *p, strata_stream *s);
int strata_k_attn_head_groups_gpu(strata_dev *dev, const strata_attn_params *p);
#ifdef __cplusplus
}
#endif

#endif
