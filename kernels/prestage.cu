/*
 * Early staging of a layer's misses on the GPU (strata_k_attn_prestage, kernels.h; the
 * CPU twin in prestage_cpu.c is the specification). It runs on a second stream while
 * the indexer's filter and select finish, so that the bus round trip of a layer's
 * misses leaves the path between top-k and attention. One launch, grid (C, n_rows),
 * CTA x taking score chunks x, x + C, ... of 1024 (small chunks: at batch 1 a row's
 * misses spread over many CTAs, each of which copies its few in one round trip):
 *   1. the row's cut, published by the indexer's filter on the compute stream a few
 *      microseconds into top-k (thread 0 polls it), while the chunk's scores are in
 *      flight;
 *   2. the chunk's ids in buckets at or above the cut that miss in the residency
 *      map, listed in shared memory (a ballot and one shared atomic per warp);
 *   3. that many of the row's slots (one global atomic), the copies from the host
 *      tier (up to 64 entries a round, every thread issuing its loads of a round
 *      before any store), then the publication: every thread fences its stores, the
 *      block syncs, and only then are the stage_map words written (volatile), so an
 *      index map that finds a word finds the bytes;
 *   4. the row's last CTA (threadfence + counter) clears the row's counters: the
 *      scratch is zero at rest.
 */
#include <cuda_runtime.h>
#include <errno.h>

#include "kernels/gather_int.h"
#include "kernels/kernels_int.h"
#include "kernels/prestage_int.h"

namespace {

constexpr int kT = 512;
constexpr int kPer = 2;
constexpr int kChunk = kT * kPer;
constexpr int kRound = 64;                                /* entries copied per round */

struct Smem {
	uint32_t need;
	int n, base, last;
	int32_t list[kChunk];
};

__device__ __forceinline__ int row_lim(const strata_attn_prestage_params &p, int r)
{
	const int L = p.row_limit[r];
	return L < 0 ? 0 : L > p.max_limit ? p.max_limit : L;
}

__device__ __forceinline__ unsigned long long global_ns()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* The row's needed bucket (pre_need of its cut word) into sm.need: thread 0 polls the
 * word, which the indexer's filter publishes a few microseconds into top-k, for up
 * to wait_us, then gives up: PRE_NONE. The grid holds at most one CTA per SM, so the
 * filter always finds room beside it; the limit is a backstop (a filter that never
 * runs, a cut word of another call). The buckets are idx_bucket's, the integer twin
 * of the filter's __float2half_rn ones (gpu_prestage checks that they agree). */
__device__ void row_need(const strata_attn_prestage_params &p, int r, Smem &sm)
{
	if (threadIdx.x == 0) {
		const volatile unsigned long long *w =
			reinterpret_cast<const volatile unsigned long long *>(p.cut) + r;
		const unsigned long long wait =
			1000ull * (unsigned long long)(p.wait_us ? p.wait_us : PRE_WAIT_DEFAULT_US);
		const unsigned long long t0 = global_ns();
		uint32_t need;
		while ((need = pre_need(*w, p.cut_epoch)) == PRE_NONE && global_ns() - t0 < wait)
			__nanosleep(200);
		sm.need = need;
	}
	__syncthreads();
}

__global__ void __launch_bounds__(kT) prestage_kernel(const strata_attn_prestage_params p)
{
	__shared__ Smem sm;
	const int r = blockIdx.y, tid = threadIdx.x, lane = tid & 31;
	const int L = row_lim(p, r);
	if ((int)blockIdx.x * kChunk >= L)
		return; /* block-uniform; no work, not counted */
	const bool all = L <= p.topk;
	const int top = L < p.map_stride ? L : p.map_stride;
	const float *sc = all ? nullptr : p.scores + (size_t)r * p.score_stride;
	int start = blockIdx.x * kChunk;
	float s[kPer];
#pragma unroll
	for (int u = 0; u < kPer; u++) { /* in flight while the cut is awaited */
		const int j = start + u * kT + tid;
		s[u] = !all && j < top ? __ldcg(sc + j) : 0.0f;
	}
	if (tid == 0) {
		sm.n = 0;
		sm.need = 0;
	}
	__syncthreads();
	if (!all)
		row_need(p, r, sm);
	const uint32_t need = sm.need;
	uint32_t *cnt = static_cast<uint32_t *>(p.scratch) + (size_t)r * PRE_CNT;
	const int32_t *map = p.map + (size_t)p.row_map[r] * p.map_stride;
	const unsigned lt = (1u << lane) - 1u;
	while (need != PRE_NONE && start < top) { /* block-uniform */
#pragma unroll
		for (int u = 0; u < kPer; u++) {
			const int j = start + u * kT + tid;
			const bool take = j < top && (need == 0 || idx_bucket(s[u]) >= need) &&
					  map[j] < 0;
			const unsigned m = __ballot_sync(0xffffffffu, take);
			int wb = 0;
			if (lane == 0 && m)
				wb = atomicAdd(&sm.n, __popc(m));
			wb = __shfl_sync(0xffffffffu, wb, 0);
			if (take)
				sm.list[wb + __popc(m & lt)] = j;
		}
		__syncthreads();
		const int n = sm.n;
		__syncthreads(); /* everyone has n before it changes */
		if (n) { /* block-uniform */
			if (tid == 0)
				sm.n = 0;
			pre_take_copy<kT, kRound>(p, r, cnt, sm.list, n, sm.base);
		}
		start += gridDim.x * kChunk;
#pragma unroll
		for (int u = 0; u < kPer; u++) {
			const int j = start + u * kT + tid;
			s[u] = !all && j < top ? __ldcg(sc + j) : 0.0f;
		}
	}
	const int chunks = (L + kChunk - 1) / kChunk;
	pre_row_done(p, cnt, chunks < (int)gridDim.x ? chunks : (int)gridDim.x, sm.last);
}

} // namespace

extern "C" int strata_k_attn_prestage_gpu(strata_dev *dev, const strata_attn_prestage_params *p,
					  strata_stream *s)
{
	int err = pre_check(p);
	if (err || !p->n_rows)
		return err;
	if (p->n_rows > 65535 || ((uintptr_t)p->scratch & 3) || ((uintptr_t)p->host & 15) ||
	    ((uintptr_t)p->stage & 15))
		return -EINVAL;
	const long long chunks = ((long long)p->max_limit + kChunk - 1) / kChunk;
	if (chunks < 1)
		return 0;
	int nsm = 0;
	if (cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev->device) != cudaSuccess ||
	    nsm < 1) {
		(void)cudaGetLastError();
		nsm = 132;
	}
	/* at most one CTA per SM over the whole batch (chunks looped beyond), so that the
	 * filter whose cuts they poll always finds room beside them */
	long long cx = (long long)nsm / p->n_rows;
	cx = cx < 1 ? 1 : cx > chunks ? chunks : cx;
	if (p->max_ctas && cx > p->max_ctas)
		cx = p->max_ctas;
	const dim3 grid((unsigned)cx, (unsigned)p->n_rows);
	prestage_kernel<<<grid, kT, 0, reinterpret_cast<cudaStream_t>(kstream(dev, s))>>>(*p);
	return strata_dev_check(dev, "prestage");
}
