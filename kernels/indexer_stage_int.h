/*
 * Private to kernels/indexer.cu: early staging inside the indexer call
 * (strata_indexer_params.stage), the two ways the GPU does it:
 *  - stage_role: extra CTAs of the filter launch (stage_in_filter 0);
 *  - the sf_* pieces: the filter CTAs themselves (stage_in_filter 1).
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
			const bool take = j < top && (all || bucket_of(s[u]) >= need) && map[j] < 0;
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

/* ---- staging in the filter CTAs (strata_indexer_params.stage_in_filter) ---------------
 * A filter CTA lists the misses among its chunks' entries in buckets >= b* (the
 * residency word of each entry is read with its score, before the cut is known) in
 * sm.ids while it filters. After its "done", a CTA that is not the row's last takes
 * slots for them and copies them: beside the last CTA's select, off top-k's path. The
 * last CTA takes its slots with its "done" (the two atomics in flight together), puts
 * the bus reads of its first kSfBulk misses in flight as bulk copies into shared
 * memory (cp.async.bulk, an mbarrier), selects, and then stores them: the select
 * hides their round trip. Its misses past kSfBulk (up to kSfList) are copied after the
 * select; past that they are left to the index map. */
constexpr int kSfBulk = 16, kSfList = 512;
struct SfSmem {
	__align__(128) uint8_t buf[kSfBulk][576]; /* entries' data bytes */
	__align__(16) uint4 scw[kSfBulk];         /* the 16-byte window of each scale pair */
	__align__(8) unsigned long long bar;
	int32_t lid[kSfList];
	int base, n;
};

__device__ __forceinline__ uint32_t sf_smem_u32(const void *ptr)
{
	return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

/* The residency words of a chunk's entries below top (0 past it: not a miss). */
__device__ __forceinline__ void load_map_chunk(const int32_t *mrow, int start, int top,
					       int32_t (&m)[kFPer])
{
#pragma unroll
	for (int u = 0; u < kFPer; u++) {
		const int j = start + u * kFThreads + (int)threadIdx.x;
		m[u] = j < top ? mrow[j] : 0;
	}
}

/* Appends the entries whose take is set to the CTA's miss list (sm.ids, counted in
 * sm.n_t; past STRATA_INDEXER_MAX_TOPK they are counted, not kept). */
__device__ __forceinline__ void sf_append(SelSmem &sm, int j, bool take)
{
	const int lane = (int)threadIdx.x & 31;
	const unsigned m = __ballot_sync(0xffffffffu, take);
	uint32_t wb = 0;
	if (lane == 0 && m)
		wb = atomicAdd(&sm.n_t, (uint32_t)__popc(m));
	wb = __shfl_sync(0xffffffffu, wb, 0);
	const uint32_t idx = wb + (uint32_t)__popc(m & ((1u << lane) - 1u));
	if (take && idx < (uint32_t)STRATA_INDEXER_MAX_TOPK)
		sm.ids[idx] = j;
}

/* Slots base .. base + n of row r's staging (base at or past cap: none) for list[0, n):
 * copies and publishes what the cap leaves room for (no fence: the readers run after
 * the call) and adds it to n_staged. Every thread calls it. */
__device__ void sf_copy(const strata_attn_prestage_params &p, int r, const int32_t *list,
			int n, int base)
{
	const int room = p.cap - base;
	const int ne = room <= 0 ? 0 : room < n ? room : n;
	if (ne)
		pre_copy_publish<kFThreads, 16, false>(p, r, list, ne,
						      p.stage_first + (int64_t)r * p.cap + base);
	if (threadIdx.x == 0 && ne && p.n_staged)
		atomicAdd(p.n_staged, (unsigned long long)ne);
}

/* Rows with limit <= k (no cut: every entry below the limit is selected): the CTA's
 * misses among its chunks, copied at once (such rows are short). */
__device__ void sf_stage_all(const Args &a, int row, int bx, int L, uint32_t *slots, SelSmem &sm)
{
	const strata_attn_prestage_params &p = a.st;
	const int top = L < p.map_stride ? L : p.map_stride;
	const int32_t *mrow = p.map + (size_t)p.row_map[row] * p.map_stride;
	for (int start = bx * kFChunk; start < top; start += a.fx * kFChunk) { /* block-uniform */
		if (threadIdx.x == 0)
			sm.n_t = 0;
		__syncthreads();
		int32_t m[kFPer];
		load_map_chunk(mrow, start, top, m);
#pragma unroll
		for (int u = 0; u < kFPer; u++) {
			const int j = start + u * kFThreads + (int)threadIdx.x;
			sf_append(sm, j, j < top && m[u] < 0);
		}
		__syncthreads();
		const int n = (int)sm.n_t;
		if (threadIdx.x == 0 && n)
			sm.digit = pre_slot_base(atomicAdd(slots, (uint32_t)n), p.cap);
		__syncthreads();
		if (n) /* block-uniform */
			sf_copy(p, row, sm.ids, n, sm.digit);
		__syncthreads(); /* sm.ids and sm.n_t are reused */
	}
}

/* The last CTA, before its select: its first misses' bus reads in flight (warp 0:
 * thread 0 sets up the mbarrier, then lane e issues entry e's two bulk copies; ss.lid
 * holds its list). sm_90 only (the caller passes nb = 0 elsewhere). */
__device__ void sf_issue(const strata_attn_prestage_params &p, int r, SfSmem &ss, int nb)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	if (threadIdx.x >= 32 || nb == 0)
		return;
	const uint32_t bar = sf_smem_u32(&ss.bar);
	if (threadIdx.x == 0) {
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar));
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
			     "r"((uint32_t)nb * (576u + 16u))
			     : "memory");
	}
	__syncwarp();
	const int e = (int)threadIdx.x;
	if (e < nb) {
		const int64_t src = p.row_base[r] + ss.lid[e];
		const uint8_t *d = attn_entry_data(p.host, p.host_B, src);
		const uint8_t *sw = reinterpret_cast<const uint8_t *>(
			reinterpret_cast<uintptr_t>(attn_entry_scales(p.host, p.host_B, src)) &
			~static_cast<uintptr_t>(15));
		asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
			     " [%0], [%1], %2, [%3];" ::"r"(sf_smem_u32(ss.buf[e])),
			     "l"(d), "r"(576u), "r"(bar)
			     : "memory");
		asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
			     " [%0], [%1], %2, [%3];" ::"r"(sf_smem_u32(&ss.scw[e])),
			     "l"(sw), "r"(16u), "r"(bar)
			     : "memory");
	}
#else
	(void)p, (void)r, (void)ss, (void)nb;
#endif
}

/* The last CTA, after its select: waits for the bulk copies, stores them into its
 * slots, copies the rest of its list, publishes all. Every thread calls it. */
__device__ void sf_finish(const strata_attn_prestage_params &p, int r, SfSmem &ss, int nb)
{
	const int nl = ss.n; /* within the row's room (the caller's) */
	const int64_t first = p.stage_first + (int64_t)r * p.cap + ss.base;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	if (nb > 0) {
		const uint32_t bar = sf_smem_u32(&ss.bar);
		asm volatile("{\n\t.reg .pred done;\n"
			     "SF_WAIT_%=:\n\t"
			     "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
			     "@!done bra SF_WAIT_%=;\n}" ::"r"(bar),
			     "r"(0u)
			     : "memory");
		const int64_t hb = p.row_base[r];
		for (int c = (int)threadIdx.x; c < nb * GATHER_PIECES; c += kFThreads) {
			const int e = c / GATHER_PIECES, pc = c - e * GATHER_PIECES;
			uint4 v;
			if (pc < GATHER_PIECES - 1) {
				v = reinterpret_cast<const uint4 *>(ss.buf[e])[pc];
			} else {
				const uintptr_t sa = reinterpret_cast<uintptr_t>(
					attn_entry_scales(p.host, p.host_B, hb + ss.lid[e]));
				const uint4 w = ss.scw[e];
				v = (sa & 15) ? make_uint4(w.z, w.w, 0u, 0u) : make_uint4(w.x, w.y, 0u, 0u);
			}
			gather_piece_store(const_cast<uint8_t *>(attn_entry_data(p.stage, p.stage_B, first + e)),
					   const_cast<uint8_t *>(attn_entry_scales(p.stage, p.stage_B, first + e)),
					   pc, v);
		}
		volatile unsigned long long *sm =
			reinterpret_cast<volatile unsigned long long *>(p.stage_map) +
			(size_t)r * p.map_stride;
		for (int e = (int)threadIdx.x; e < nb; e += kFThreads)
			sm[ss.lid[e]] = (unsigned long long)(p.epoch << PRE_ENTRY_BITS | (uint64_t)(first + e));
		if (threadIdx.x == 0 && p.n_staged)
			atomicAdd(p.n_staged, (unsigned long long)nb);
	}
#endif
	if (nl > nb) /* block-uniform */
		sf_copy(p, r, ss.lid + nb, nl - nb, ss.base + nb);
}

#endif
