/*
 * Private to kernels/indexer.cu: early staging inside the indexer call
 * (strata_indexer_params.stage) on the GPU: stage_role, which the staging CTAs
 * (extra CTAs of the filter launch) run.
 * Included by indexer.cu inside its anonymous namespace, after Args, SelSmem, the
 * filter constants, row_cut and load_chunk, which it uses; not a header of its own.
 */
#ifndef STRATA_KERNELS_INDEXER_STAGE_INT_H
#define STRATA_KERNELS_INDEXER_STAGE_INT_H

/* The early staging of strata_indexer_params.stage, in the filter's launch: staging
 * CTA x (blockIdx.x < sx, before the row's filter CTAs) takes score chunks x, x + sx,
 * ... of kFChunk. It finds the row's cut from the scan's histogram as the filter CTAs
 * do (no waiting on them), lists the chunk's entries in buckets >= the cut that miss
 * in the residency map (all entries below the limit when it is <= topk) in shared
 * memory, takes that many of the row's slots (one atomic) and copies and publishes
 * them (pre_take_copy), and adds what it published to n_staged (no reply awaited).
 * At batch 1 the staging CTAs end about when top-k does, so nothing follows the last
 * copy: the row's slot counter is the one of the call's epoch parity (scratch words
 * 2 and 3), and CTA 0 zeroes the other for the next call (which has the other parity
 * and runs after this one on the stream) instead of a last CTA clearing counters
 * behind a fence and an atomic. Nor is there a fence between the bytes and the
 * words: their readers (the index map) run after this call has ended. */
__device__ void stage_role(const Args &a, int row, SelSmem &sm, FScan::TempStorage &tmp)
{
	const strata_attn_prestage_params &p = a.st;
	const int tid = threadIdx.x, lane = tid & 31, x = (int)blockIdx.x;
	uint32_t *cnt = static_cast<uint32_t *>(p.scratch) + (size_t)row * PRE_CNT;
	if (x == 0 && tid == 0)
		cnt[2 + (int)((p.epoch + 1) & 1)] = 0;
	uint32_t *slots = cnt + 2 + (int)(p.epoch & 1);
	const int L = row_lim(a, row);
	const int top = L < p.map_stride ? L : p.map_stride;
	if (x * kFChunk >= top)
		return; /* block-uniform; no work */
	const bool all = L <= a.topk;
	uint32_t need = 0;
	if (!all) {
		uint32_t bstar, above1;
		need = row_cut(a, row, sm, tmp, &bstar, &above1) ? bstar : PRE_NONE;
	}
	const int32_t *map = p.map + (size_t)p.row_map[row] * p.map_stride;
	const float *sc = a.scores + (size_t)row * a.sstride;
	const unsigned lt = (1u << lane) - 1u;
	if (tid == 0)
		sm.n_t = 0;
	__syncthreads();
	int staged = 0;
	for (int start = x * kFChunk; need != PRE_NONE && start < top;
	     start += a.sx * kFChunk) { /* block-uniform */
		float s[kFPer];
		if (!all)
			load_chunk(sc, start, top, s);
#pragma unroll
		for (int u = 0; u < kFPer; u++) {
			const int j = start + u * kFThreads + tid;
			const bool take = j < top && (all || idx_bucket_dev(s[u]) >= need) && map[j] < 0;
			const unsigned m = __ballot_sync(0xffffffffu, take);
			uint32_t wb = 0;
			if (lane == 0 && m)
				wb = atomicAdd(&sm.n_t, (uint32_t)__popc(m));
			wb = __shfl_sync(0xffffffffu, wb, 0);
			if (take)
				sm.ids[wb + (uint32_t)__popc(m & lt)] = j;
		}
		__syncthreads();
		const int n = (int)sm.n_t;
		__syncthreads(); /* everyone has n before it changes */
		if (n) { /* block-uniform */
			if (tid == 0)
				sm.n_t = 0;
			/* 16 entries a round: the filter kernel's 64 registers */
			staged += pre_take_copy<kFThreads, 16, false>(p, row, slots, sm.ids, n,
								      sm.digit);
		}
	}
	if (tid == 0 && staged && p.n_staged)
		atomicAdd(p.n_staged, (unsigned long long)staged);
}

#endif
