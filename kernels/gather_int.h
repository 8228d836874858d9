/*
 * Private to kernels/: the entry addressing and the hot-cache policy predicates shared
 * by the CUDA kernels (gather.cu, hotcache.cu) and their CPU twins (gather_cpu.c,
 * hotcache_cpu.c), so both sides compute the same addresses and make the same choices.
 */
#ifndef STRATA_KERNELS_GATHER_INT_H
#define STRATA_KERNELS_GATHER_INT_H

#include "kernels/kernels.h"

#ifdef __CUDACC__
#define GATHER_HD __host__ __device__ __forceinline__
#else
#define GATHER_HD static inline
#endif

/* Pieces of one entry as the gather moves it: 36 x 16 data bytes, then 8 scale bytes. */
#define GATHER_PIECES 37

#ifdef __CUDACC__
/* Piece pc of an entry with these data and scale bytes: pieces 0 .. 35 are 16 data
 * bytes each, piece 36 the 8 scale bytes (in .x, .y). Loads stream (.cs): a moved
 * entry is not read again. */
__device__ __forceinline__ uint4 gather_piece_load(const uint8_t *data, const uint8_t *scales,
						   int pc)
{
	if (pc < GATHER_PIECES - 1)
		return __ldcs(reinterpret_cast<const uint4 *>(data) + pc);
	const uint2 x = __ldcs(reinterpret_cast<const uint2 *>(scales));
	return make_uint4(x.x, x.y, 0u, 0u);
}
__device__ __forceinline__ void gather_piece_store(uint8_t *data, uint8_t *scales, int pc,
						   uint4 v)
{
	if (pc < GATHER_PIECES - 1)
		reinterpret_cast<uint4 *>(data)[pc] = v;
	else
		*reinterpret_cast<uint2 *>(scales) = make_uint2(v.x, v.y);
}
#endif

/* Block base of entry id of table tab in space sp. */
GATHER_HD uint8_t *gather_block(const strata_entry_space *sp, int tab, int id)
{
	int b = id / sp->B;
	if (sp->blocks)
		return sp->blocks[(size_t)tab * (size_t)sp->max_blocks + (size_t)b];
	size_t stride = sp->packed ? (size_t)sp->B * (size_t)sp->packed
				   : (((size_t)sp->B * STRATA_MAIN_ENTRY_BYTES +
				       STRATA_MAIN_DATA_BYTES - 1) /
				      STRATA_MAIN_DATA_BYTES) * STRATA_MAIN_DATA_BYTES;
	return sp->base + (size_t)b * stride;
}
GATHER_HD uint8_t *gather_data(const strata_entry_space *sp, uint8_t *blk, int id)
{
	return blk + (size_t)(id % sp->B) * (sp->packed ? (size_t)sp->packed
							 : (size_t)STRATA_MAIN_DATA_BYTES);
}
GATHER_HD uint8_t *gather_scale(const strata_entry_space *sp, uint8_t *blk, int id)
{
	if (sp->packed)
		return blk + (size_t)(id % sp->B) * (size_t)sp->packed + STRATA_MAIN_DATA_BYTES;
	return blk + (size_t)sp->B * STRATA_MAIN_DATA_BYTES +
	       (size_t)(id % sp->B) * STRATA_MAIN_SCALE_BYTES;
}

/* The hot-cache policy, one predicate: may this call take slot g (global) of rl?
 * A STEP never takes a slot its own call claimed (the entries selected in this step);
 * PREFETCH and APPEND also leave alone what rl's latest STEP selected, since the next
 * step is likely to select most of it again. */
GATHER_HD int hc_protected(const strata_hotcache_params *p, int rl, int g)
{
	if (p->slot_op[g] == p->op)
		return 1;
	if (p->mode != STRATA_HC_STEP) {
		uint32_t ls = p->last_step[rl];
		return ls != 0xffffffffu && p->slot_sel[g] == ls;
	}
	return 0;
}

/* Candidate number j of a PREFETCH list for rl: first the newest predict_recent ids,
 * newest first (recent entries are selected most often), then id + 1 and id - 1 of
 * each id of rl's last selection, in its order. -1 when the candidate does not exist. */
GATHER_HD int hc_candidate(const strata_hotcache_params *p, int rl, int n_last, int j)
{
	int id;
	if (j < p->predict_recent) {
		id = p->limit[rl] - 1 - j;
	} else {
		j -= p->predict_recent;
		if (j >= 2 * n_last)
			return -1;
		int base = p->last_sel[(size_t)rl * p->sel_cap + j / 2];
		if (base < 0)
			return -1;
		id = (j & 1) ? base - 1 : base + 1;
	}
	if (id < 0 || id >= p->limit[rl] || id >= p->max_entries)
		return -1;
	return id;
}

/* Length of rl's PREFETCH candidate list. */
GATHER_HD int hc_candidates(const strata_hotcache_params *p, int n_last)
{
	return 2 * n_last + p->predict_recent;
}

/* Pending marker for a miss claimed by list position j during one row (map values
 * below -1). The lowest position wins, on both sides. */
#define HC_PENDING(j) ((int32_t)(INT32_MIN + (j)))

#ifdef STRATA_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
int strata_k_gather_gpu(strata_dev *dev, const strata_gather_params *p, strata_stream *s);
int strata_k_hotcache_gpu(strata_dev *dev, const strata_hotcache_params *p, strata_stream *s);
int strata_bench_gather_baseline_gpu(strata_dev *dev, const strata_gather_params *p,
				     strata_gather_baseline how, strata_stream *s);
#ifdef __cplusplus
}
#endif
#endif

#endif
