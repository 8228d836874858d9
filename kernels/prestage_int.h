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

#define PRE_CNT 4 /* per row: slots taken, CTAs done (strata_k_attn_prestage; zero at
		   * rest); the indexer's staging slot counters by epoch parity (2, 3) */
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

/* Scratch: [n_rows][PRE_CNT] counters (PRE_CNT). */
static inline size_t pre_scratch_bytes(int n_rows)
{
	return (size_t)n_rows * PRE_CNT * sizeof(uint32_t);
}

#ifdef __CUDACC__
#include "kernels/gather_int.h"

/* Copies list[0, n) (entry ids of row r) from the host tier into stage entries
 * first + [0, n) and publishes them. Every thread of a block of T calls it: up to
 * ROUND entries a round, every thread issuing its 16-byte loads of a round before any
 * store; then each thread fences its stores device-wide, the block syncs, and only
 * then are the stage_map words written (volatile), so that a reader that finds a word
 * with its epoch finds the bytes. FENCE false: no fence, for a caller whose readers
 * run after its kernel has ended (the indexer's staging: the end of a kernel makes
 * all of its writes visible to what follows on the stream). */
template <int T, int ROUND, bool FENCE = true>
__device__ void pre_copy_publish(const strata_attn_prestage_params &p, int r,
				 const int32_t *list, int n, int64_t first)
{
	constexpr int kLoads = (ROUND * GATHER_PIECES + T - 1) / T;
	const int tid = threadIdx.x;
	const int64_t hb = p.row_base[r];
	for (int t0 = 0; t0 < n; t0 += ROUND) {
		const int np = min(ROUND, n - t0) * GATHER_PIECES;
		uint4 v[kLoads];
#pragma unroll
		for (int u = 0; u < kLoads; u++) {
			const int c = tid + u * T;
			if (c < np) {
				const int e = c / GATHER_PIECES, pc = c - e * GATHER_PIECES;
				const int64_t src = hb + list[t0 + e];
				v[u] = gather_piece_load(attn_entry_data(p.host, p.host_B, src),
							 attn_entry_scales(p.host, p.host_B, src), pc);
			}
		}
#pragma unroll
		for (int u = 0; u < kLoads; u++) {
			const int c = tid + u * T;
			if (c < np) {
				const int e = c / GATHER_PIECES, pc = c - e * GATHER_PIECES;
				const int64_t dst = first + t0 + e;
				gather_piece_store(
					const_cast<uint8_t *>(attn_entry_data(p.stage, p.stage_B, dst)),
					const_cast<uint8_t *>(attn_entry_scales(p.stage, p.stage_B, dst)),
					pc, v[u]);
			}
		}
	}
	if (FENCE)
		__threadfence(); /* this thread's bytes, device-wide, before any word below */
	__syncthreads();
	volatile unsigned long long *sm =
		reinterpret_cast<volatile unsigned long long *>(p.stage_map) + (size_t)r * p.map_stride;
	for (int e = tid; e < n; e += T)
		sm[list[e]] = (unsigned long long)(p.epoch << PRE_ENTRY_BITS | (uint64_t)(first + e));
}

/* A row's first slot for a take whose counter read b before it: at or past cap (also
 * a stale counter's) nothing is left, whatever b is. */
__device__ __forceinline__ int pre_slot_base(uint32_t b, int cap)
{
	return b >= (uint32_t)cap ? cap : (int)b;
}

/* Takes n of row r's slots (one atomic on the row's slot counter cnt[0]) and copies
 * and publishes as many of list[0, n) as the row's cap leaves room for; returns how
 * many (the same in every thread). Every thread of the block calls it; base is a
 * shared int of the caller's. */
template <int T, int ROUND, bool FENCE = true>
__device__ int pre_take_copy(const strata_attn_prestage_params &p, int r, uint32_t *cnt,
			     const int32_t *list, int n, int &base)
{
	if (threadIdx.x == 0)
		base = pre_slot_base(atomicAdd(&cnt[0], (uint32_t)n), p.cap);
	__syncthreads();
	const int room = p.cap - base;
	const int ne = room <= 0 ? 0 : room < n ? room : n;
	pre_copy_publish<T, ROUND, FENCE>(p, r, list, ne,
					  p.stage_first + (int64_t)r * p.cap + base);
	__syncthreads(); /* list and base are reused */
	return ne;
}

/* The end of a staging CTA of a row: every CTA of the row that had work calls it
 * (all threads), nblk of them; the last adds the row's marks to n_staged and clears
 * the row's counters, so the scratch is zero at rest. last is a shared int of the
 * caller's. */
__device__ inline void pre_row_done(const strata_attn_prestage_params &p, uint32_t *cnt,
				    int nblk, int &last)
{
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0)
		last = atomicAdd(&cnt[1], 1u) == (uint32_t)nblk - 1;
	__syncthreads();
	if (!last || threadIdx.x != 0)
		return;
	const uint32_t taken = atomicAdd(&cnt[0], 0u); /* every CTA's share is in */
	if (p.n_staged)
		atomicAdd(p.n_staged, (unsigned long long)(taken < (uint32_t)p.cap ? taken : p.cap));
	cnt[0] = 0;
	cnt[1] = 0;
}
#endif

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
