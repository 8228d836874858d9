/*
 * Early staging of a layer's misses on the GPU (strata_k_attn_prestage, kernels.h; the
 * CPU twin in prestage_cpu.c is the specification). It runs on a second stream while
 * the indexer's filter and select finish, so that the bus round trip of a layer's
 * misses leaves the path between top-k and attention. Two launches, grid (C, n_rows),
 * CTA x taking score chunks x, x + C, ... of 4096:
 *  1. hist:  a shared-memory histogram of its chunks' buckets (one atomic per distinct
 *            bucket of a warp, __match_any_sync: equal scores do not serialise),
 *            added into the row's global histogram.
 *  2. stage: every CTA finds b* from the row's histogram (a block scan from the top
 *            bucket), lists its chunk's ids with bucket >= b* that miss in the
 *            residency map, takes that many of the row's slots with one atomic, and
 *            copies the entries from the host tier: up to 64 a round, every thread
 *            issuing its loads of a round before any store, so a round costs about
 *            one bus round trip. The row's last CTA (threadfence + counter) clears
 *            the row's histogram and counters: the scratch is zero at rest.
 */
#include <cuda_runtime.h>
#include <errno.h>

#include "kernels/kernels_int.h"
#include "kernels/prestage_int.h"

namespace {

constexpr int kT = 512;
constexpr int kPer = 8;
constexpr int kChunk = kT * kPer;
constexpr int kRound = 64;                                /* entries copied per round */
constexpr int kPieces = 37;                               /* 36 x 16 B data, 8 B scales */
constexpr int kLoads = (kRound * kPieces + kT - 1) / kT; /* 16-byte loads per thread */

__device__ __forceinline__ int row_lim(const strata_attn_prestage_params &p, int r)
{
	const int L = p.row_limit[r];
	return L < 0 ? 0 : L > p.max_limit ? p.max_limit : L;
}

__device__ __forceinline__ uint32_t *row_hist(const strata_attn_prestage_params &p, int r)
{
	return static_cast<uint32_t *>(p.scratch) + (size_t)r * PRE_BINS;
}

__device__ __forceinline__ uint32_t *row_count(const strata_attn_prestage_params &p, int r)
{
	return static_cast<uint32_t *>(p.scratch) + (size_t)p.n_rows * PRE_BINS +
	       (size_t)r * PRE_CNT;
}

__global__ void __launch_bounds__(kT) hist_kernel(const strata_attn_prestage_params p)
{
	__shared__ uint32_t h[PRE_BINS];
	const int r = blockIdx.y, tid = threadIdx.x, lane = tid & 31;
	const int L = row_lim(p, r);
	if (L <= p.topk || (int)blockIdx.x * kChunk >= L)
		return; /* block-uniform */
	for (int i = tid; i < PRE_BINS; i += kT)
		h[i] = 0;
	__syncthreads();
	const float *sc = p.scores + (size_t)r * p.score_stride;
	for (int start = blockIdx.x * kChunk; start < L; start += gridDim.x * kChunk) {
		float s[kPer];
#pragma unroll
		for (int u = 0; u < kPer; u++) {
			const int j = start + u * kT + tid;
			s[u] = j < L ? sc[j] : 0.0f;
		}
#pragma unroll
		for (int u = 0; u < kPer; u++) {
			const int j = start + u * kT + tid;
			const uint32_t b = j < L ? pre_bucket(s[u]) : 0xffffffffu;
			const unsigned peers = __match_any_sync(0xffffffffu, b);
			if (b != 0xffffffffu && lane == __ffs(peers) - 1)
				atomicAdd(&h[b], (uint32_t)__popc(peers));
		}
	}
	__syncthreads();
	uint32_t *g = row_hist(p, r);
	for (int i = tid; i < PRE_BINS; i += kT)
		if (h[i])
			atomicAdd(&g[i], h[i]);
}

struct StageSmem {
	uint32_t warp[kT / 32];
	uint32_t bstar;
	int n, base, last;
	union {
		uint32_t hist[PRE_BINS];
		int32_t list[kChunk];
	} u;
};

/* b* of the row (pre_cut): thread t holds buckets 2047 - 4t - q, q = 0..3, so that an
 * inclusive block scan over t gives the count above each thread's last bucket. */
__device__ uint32_t block_cut(const uint32_t *g, uint32_t k, StageSmem &sm)
{
	const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
	for (int i = tid; i < PRE_BINS; i += kT)
		sm.u.hist[i] = g[i];
	if (tid == 0)
		sm.bstar = 0;
	__syncthreads();
	uint32_t c[4], s = 0;
#pragma unroll
	for (int q = 0; q < 4; q++) {
		c[q] = sm.u.hist[PRE_BINS - 1 - 4 * tid - q];
		s += c[q];
	}
	uint32_t x = s;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		const uint32_t y = __shfl_up_sync(0xffffffffu, x, o);
		if (lane >= o)
			x += y;
	}
	if (lane == 31)
		sm.warp[w] = x;
	__syncthreads();
	uint32_t before = 0;
	for (int i = 0; i < w; i++)
		before += sm.warp[i];
	uint32_t acc = before + x - s; /* scores in buckets above this thread's */
	if (acc < k && acc + s >= k) { /* the crossing: exactly one thread */
#pragma unroll
		for (int q = 0; q < 4; q++) {
			acc += c[q];
			if (acc >= k) {
				sm.bstar = (uint32_t)(PRE_BINS - 1 - 4 * tid - q);
				break;
			}
		}
	}
	__syncthreads();
	const uint32_t b = sm.bstar;
	__syncthreads(); /* u.hist is reused as the list */
	return b;
}

/* Copies list[0, n) (ids of row r) into the row's entries base + [0, n). */
__device__ void copy_list(const strata_attn_prestage_params &p, int r, const int32_t *list,
			  int n, int base)
{
	const int tid = threadIdx.x;
	const int64_t first = p.stage_first + (int64_t)r * p.cap + base;
	const int64_t hb = p.row_base[r];
	for (int t0 = 0; t0 < n; t0 += kRound) {
		const int np = min(kRound, n - t0) * kPieces;
		uint4 v[kLoads];
#pragma unroll
		for (int u = 0; u < kLoads; u++) {
			const int c = tid + u * kT;
			if (c < np) {
				const int e = c / kPieces, pc = c - e * kPieces;
				const int64_t src = hb + list[t0 + e];
				if (pc < kPieces - 1) {
					v[u] = __ldcs(reinterpret_cast<const uint4 *>(
							      attn_entry_data(p.host, p.host_B, src)) +
						      pc);
				} else {
					const uint2 x = __ldcs(reinterpret_cast<const uint2 *>(
						attn_entry_scales(p.host, p.host_B, src)));
					v[u] = make_uint4(x.x, x.y, 0u, 0u);
				}
			}
		}
#pragma unroll
		for (int u = 0; u < kLoads; u++) {
			const int c = tid + u * kT;
			if (c < np) {
				const int e = c / kPieces, pc = c - e * kPieces;
				const int64_t dst = first + t0 + e;
				if (pc < kPieces - 1)
					reinterpret_cast<uint4 *>(const_cast<uint8_t *>(
						attn_entry_data(p.stage, p.stage_B, dst)))[pc] = v[u];
				else
					*reinterpret_cast<uint2 *>(const_cast<uint8_t *>(
						attn_entry_scales(p.stage, p.stage_B, dst))) =
						make_uint2(v[u].x, v[u].y);
			}
		}
	}
	uint64_t *sm = p.stage_map + (size_t)r * p.map_stride;
	for (int e = tid; e < n; e += kT)
		sm[list[e]] = p.epoch << PRE_ENTRY_BITS | (uint64_t)(first + e);
}

__global__ void __launch_bounds__(kT) stage_kernel(const strata_attn_prestage_params p)
{
	__shared__ StageSmem sm;
	const int r = blockIdx.y, tid = threadIdx.x, lane = tid & 31;
	const int L = row_lim(p, r);
	if ((int)blockIdx.x * kChunk >= L)
		return; /* block-uniform; no work, not counted */
	const bool all = L <= p.topk;
	const uint32_t bstar = all ? 0u : block_cut(row_hist(p, r), (uint32_t)p.topk, sm);
	uint32_t *cnt = row_count(p, r);
	const float *sc = p.scores + (size_t)r * p.score_stride;
	const int32_t *map = p.map + (size_t)p.row_map[r] * p.map_stride;
	const int top = L < p.map_stride ? L : p.map_stride;
	const unsigned lt = (1u << lane) - 1u;
	if (tid == 0)
		sm.n = 0;
	__syncthreads();
	for (int start = blockIdx.x * kChunk; start < top; start += gridDim.x * kChunk) {
		float s[kPer];
#pragma unroll
		for (int u = 0; u < kPer; u++) {
			const int j = start + u * kT + tid;
			s[u] = !all && j < top ? sc[j] : 0.0f;
		}
#pragma unroll
		for (int u = 0; u < kPer; u++) {
			const int j = start + u * kT + tid;
			const bool take = j < top && (all || pre_bucket(s[u]) >= bstar) && map[j] < 0;
			const unsigned m = __ballot_sync(0xffffffffu, take);
			int wb = 0;
			if (lane == 0 && m)
				wb = atomicAdd(&sm.n, __popc(m));
			wb = __shfl_sync(0xffffffffu, wb, 0);
			if (take)
				sm.u.list[wb + __popc(m & lt)] = j;
		}
		__syncthreads();
		const int n = sm.n;
		if (n) { /* block-uniform */
			if (tid == 0)
				sm.base = (int)atomicAdd(&cnt[0], (uint32_t)n);
			__syncthreads();
			const int base = sm.base;
			const int room = p.cap - base;
			const int ne = room <= 0 ? 0 : room < n ? room : n;
			copy_list(p, r, sm.u.list, ne, base);
			__syncthreads();
			if (tid == 0)
				sm.n = 0;
			__syncthreads();
		}
	}
	__threadfence(); /* this CTA's reads of the histogram are done */
	__syncthreads();
	if (tid == 0) {
		const int chunks = (L + kChunk - 1) / kChunk;
		const int nblk = chunks < (int)gridDim.x ? chunks : (int)gridDim.x;
		sm.last = atomicAdd(&cnt[1], 1u) == (uint32_t)nblk - 1;
	}
	__syncthreads();
	if (!sm.last)
		return;
	if (!all) {
		uint4 *h = reinterpret_cast<uint4 *>(row_hist(p, r));
		for (int i = tid; i < PRE_BINS / 4; i += kT)
			h[i] = make_uint4(0u, 0u, 0u, 0u);
	}
	if (tid == 0 && p.n_staged) {
		const uint32_t taken = cnt[0];
		atomicAdd(p.n_staged, (unsigned long long)(taken < (uint32_t)p.cap ? taken : p.cap));
	}
	__syncthreads();
	if (tid < PRE_CNT)
		cnt[tid] = 0;
}

} // namespace

extern "C" int strata_k_attn_prestage_gpu(strata_dev *dev, const strata_attn_prestage_params *p,
					  strata_stream *s)
{
	int err = pre_check(p);
	if (err || !p->n_rows)
		return err;
	if (p->n_rows > 65535 || ((uintptr_t)p->scratch & 15))
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
	/* about two CTAs per SM over the whole batch; chunks looped beyond */
	long long cx = 2LL * nsm / p->n_rows;
	cx = cx < 1 ? 1 : cx > chunks ? chunks : cx;
	const dim3 grid((unsigned)cx, (unsigned)p->n_rows);
	cudaStream_t st = reinterpret_cast<cudaStream_t>(s);
	if (p->max_limit > p->topk) {
		hist_kernel<<<grid, kT, 0, st>>>(*p);
		if ((err = strata_dev_check(dev, "prestage histogram")))
			return err;
	}
	stage_kernel<<<grid, kT, 0, st>>>(*p);
	return strata_dev_check(dev, "prestage copies");
}
