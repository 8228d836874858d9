/*
 * Private to kernels/: where a main entry or an index key lives inside its block or
 * page (FORMATS.md sections 2 and 3), as arithmetic both the CPU twins and the CUDA
 * kernels use, and the GPU launchers of format.cu.
 *
 * Negative slots (FlashMLA's "-1 = invalid") are skipped by the encoders and decode
 * to zeros; the kernels cannot report them without a host sync.
 */
#ifndef STRATA_KERNELS_FORMAT_INT_H
#define STRATA_KERNELS_FORMAT_INT_H

#include "kernels/codec.h"
#include "kernels/kernels.h"

#define FMT_TILE 64                           /* NoPE dims per UE8M0 scale */
#define FMT_TILES (STRATA_NOPE_DIM / FMT_TILE) /* 7 */
#define FMT_MX_GROUP 32                       /* MXFP4 elements per scale */
#define FMT_MX_GROUPS (STRATA_INDEX_DIM / FMT_MX_GROUP)
#define FMT_MX_PAYLOAD (STRATA_INDEX_DIM / 2) /* 64 */
#define FMT_FP8_PAYLOAD STRATA_INDEX_DIM      /* 128 */

/* Main block of B entries: data region [0, B*576), scale region [B*576, B*584). */
STRATA_HD size_t fmt_main_block_stride(int B)
{
	return (((size_t)B * STRATA_MAIN_ENTRY_BYTES + STRATA_MAIN_DATA_BYTES - 1) /
		STRATA_MAIN_DATA_BYTES) * STRATA_MAIN_DATA_BYTES;
}
STRATA_HD size_t fmt_main_data_off(int64_t slot, int B)
{
	return (size_t)(slot / B) * fmt_main_block_stride(B) +
	       (size_t)(slot % B) * STRATA_MAIN_DATA_BYTES;
}
STRATA_HD size_t fmt_main_scale_off(int64_t slot, int B)
{
	return (size_t)(slot / B) * fmt_main_block_stride(B) +
	       (size_t)B * STRATA_MAIN_DATA_BYTES +
	       (size_t)(slot % B) * STRATA_MAIN_SCALE_BYTES;
}

/* Index page of B keys: [B*payload][B*4 scale bytes]. */
STRATA_HD size_t fmt_index_payload_bytes(strata_index_fmt f)
{
	return f == STRATA_INDEX_FP8 ? FMT_FP8_PAYLOAD : FMT_MX_PAYLOAD;
}
STRATA_HD size_t fmt_index_data_off(strata_index_fmt f, int64_t slot, int B)
{
	size_t page = (size_t)B * (fmt_index_payload_bytes(f) + 4);
	return (size_t)(slot / B) * page + (size_t)(slot % B) * fmt_index_payload_bytes(f);
}
STRATA_HD size_t fmt_index_scale_off(strata_index_fmt f, int64_t slot, int B)
{
	size_t page = (size_t)B * (fmt_index_payload_bytes(f) + 4);
	return (size_t)(slot / B) * page + (size_t)B * fmt_index_payload_bytes(f) +
	       (size_t)(slot % B) * 4;
}

STRATA_HD int64_t fmt_slot(const int64_t *slots, int i)
{
	return slots ? slots[i] : (int64_t)i;
}

#ifdef __cplusplus
extern "C" {
#endif
/* format.cu: same contract as the _cpu twins, on device pointers, asynchronous on
 * the stream. Arguments were checked by the dispatcher. */
int strata_k_main_encode_gpu(strata_dev *d, const strata_main_encode_params *p,
			     strata_stream *s);
int strata_k_main_decode_gpu(strata_dev *d, const strata_main_decode_params *p,
			     strata_stream *s);
int strata_k_index_encode_gpu(strata_dev *d, const strata_index_encode_params *p,
			      strata_stream *s);
int strata_k_index_decode_gpu(strata_dev *d, const strata_index_decode_params *p,
			      strata_stream *s);
#ifdef __cplusplus
}
#endif

#endif
