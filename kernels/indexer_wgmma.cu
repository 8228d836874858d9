// Indexer scan on Hopper's FP8 tensor cores (wgmma), for FP8 keys and FP8 queries
// (strata_indexer_params.scan_wgmma; kernels.h). Built for sm_90a only: FP8 mma.sync is
// emulated through fp16 on Hopper (measured slower than the bf16 scan), so FP8 tensor
// throughput needs the warpgroup MMA.
//
// One CTA = one warpgroup (4 warps) of one request, one query row. Its 64 heads x 128
// query bytes are the A operand, staged once; a tile is one page of 64 keys (B = 64:
// 64 x 128 key bytes, contiguous in the page), the B operand, double-buffered with
// cp.async. Both sit in shared memory in the 128-byte-swizzled K-major layout (rows of
// 128 bytes, 8-row atoms of 1 KiB, 16-byte chunk j of row r at j ^ (r % 8)), so each
// tile is 4 wgmma m64n64k32 (k-steps of 32 bytes: the descriptors' start advances by 32
// bytes inside the swizzled rows). Epilogue per tile: ReLU and the head weights on the
// accumulators (warp w holds heads 16w .. 16w + 15), a butterfly over the 8 lanes that
// share a key, the 4 warps' sums added in a fixed order in shared memory, times the
// key's scale: every key's score has the same shape wherever it sits, so equal keys get
// equal scores. Scores and the 2048-bucket histogram as the other scan writes them.
//
// Hopper's FP8 tensor cores add with about 13 mantissa bits, so scores differ from the
// CPU twin's by more than the fp32 paths' (kernels.h, scan_wgmma).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/indexer_int.h"

#include <stdint.h>

namespace {

constexpr int kWgThreads = 128;               /* one warpgroup */
constexpr int kTile = 64;                     /* keys per tile: one page of B = 64 */
constexpr int kRowB = 128;                    /* bytes per key or query head */
constexpr int kTileBytes = kTile * kRowB;     /* 8 KiB */
constexpr int kHeads = 64;
constexpr int kPageBytes = kTile * (kRowB + 4); /* FP8 page: [64 x 128][64 x 4 scales] */

struct Smem {
	uint8_t a[kHeads * kRowB];     /* the query, swizzled; 1 KiB-aligned atoms */
	uint8_t b[2][kTileBytes];      /* key tiles, swizzled */
	float ks[2][kTile];            /* the keys' fp32 scales */
	float w[kHeads];
	float red[4][kTile];           /* each warp's per-key sum over its 16 heads */
	uint32_t hist[IDX_BINS];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024; /* + alignment slack */

/* Byte offset of 16-byte chunk `chunk` of row `row` in a 128-byte-swizzled operand. */
__device__ __forceinline__ uint32_t sw128(int row, int chunk)
{
	return (uint32_t)((row >> 3) * 1024 + (row & 7) * 128 + ((chunk ^ (row & 7)) << 4));
}

/* Shared-memory matrix descriptor: K-major, 128-byte swizzle, 8-row atoms 1 KiB apart. */
__device__ __forceinline__ uint64_t wg_desc(uint32_t saddr)
{
	uint64_t d = (uint64_t)((saddr & 0x3ffffu) >> 4);
	d |= (uint64_t)1 << 16;              /* leading byte offset: unused here (16 B) */
	d |= (uint64_t)(1024 >> 4) << 32;    /* stride byte offset: one 8-row atom */
	d |= (uint64_t)1 << 62;              /* 128-byte swizzle */
	return d;
}

__device__ __forceinline__ void cp16(uint32_t dst, const void *src)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void fence_async_smem()
{
	asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wgmma_64x64x32(float (&d)[32], uint64_t da, uint64_t db, int acc)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
		     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
		     : "l"(da), "l"(db), "r"(acc));
}
#endif

/* Keeps the compiler from moving accumulator reads or writes across the async MMA. */
__device__ __forceinline__ void reg_fence(float (&d)[32])
{
#pragma unroll
	for (int i = 0; i < 32; i++)
		asm volatile("" : "+f"(d[i])::"memory");
}

/* Tile t's 64 keys and scales into buffer `buf` (every thread: 4 + (tid < 16) copies). */
__device__ __forceinline__ void load_tile(const idx_wg_args &a, const uint8_t *page, Smem &sm,
					  int buf)
{
	const int tid = threadIdx.x;
	const uint32_t b = (uint32_t)__cvta_generic_to_shared(sm.b[buf]);
#pragma unroll
	for (int i = 0; i < kTileBytes / 16 / kWgThreads; i++) {
		const int q = tid + i * kWgThreads, row = q >> 3, ch = q & 7;
		cp16(b + sw128(row, ch), page + row * kRowB + ch * 16);
	}
	if (tid < kTile * 4 / 16)
		cp16((uint32_t)__cvta_generic_to_shared(&sm.ks[buf][tid * 4]),
		     page + kTileBytes + tid * 16);
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__global__ void __launch_bounds__(kWgThreads) scan_wgmma_kernel(const idx_wg_args a)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	extern __shared__ uint8_t smem_raw[];
	Smem &sm = *reinterpret_cast<Smem *>(
		smem_raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023)) & 1023));
	const int req = blockIdx.y, tid = threadIdx.x;
	const int row = a.req_rows[req];
	if (a.req_rows[req + 1] - row < 1)
		return;
	int L = a.row_limit[row];
	L = L < 0 ? 0 : (L > a.lim_cap ? a.lim_cap : L);
	if (L <= a.topk)
		return; /* not scored: the filter writes 0 .. L-1 */
	const int tiles = (L + kTile - 1) / kTile, G = (int)gridDim.x;
	if ((int)blockIdx.x >= tiles)
		return;
	const int32_t *pt = a.page_table + (size_t)req * a.max_pages;

	load_tile(a, a.pages + (size_t)pt[blockIdx.x] * kPageBytes, sm, 0);
	{ /* the query (16-byte aligned: the dispatcher checks), the weights, the histogram */
		const uint8_t *q = a.q8 + (size_t)row * kHeads * kRowB;
#pragma unroll
		for (int i = 0; i < kHeads * kRowB / 16 / kWgThreads; i++) {
			const int c = tid + i * kWgThreads, h = c >> 3, ch = c & 7;
			*reinterpret_cast<uint4 *>(sm.a + sw128(h, ch)) =
				__ldg(reinterpret_cast<const uint4 *>(q + h * kRowB + ch * 16));
		}
		if (tid < kHeads)
			sm.w[tid] = a.w[(size_t)row * kHeads + tid];
		for (int i = tid; i < IDX_BINS; i += kWgThreads)
			sm.hist[i] = 0;
		fence_async_smem(); /* the query's generic stores, before the MMA reads them */
	}
	const uint64_t da = wg_desc((uint32_t)__cvta_generic_to_shared(sm.a));
	const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
	float *scores = a.scores + (size_t)row * a.sstride;

	int buf = 0;
	for (int t = (int)blockIdx.x; t < tiles; t += G, buf ^= 1) {
		const int nt = t + G;
		if (nt < tiles) {
			load_tile(a, a.pages + (size_t)pt[nt] * kPageBytes, sm, buf ^ 1);
			asm volatile("cp.async.wait_group 1;\n" ::: "memory");
		} else {
			asm volatile("cp.async.wait_group 0;\n" ::: "memory");
		}
		fence_async_smem(); /* this thread's copies, before the MMA reads them */
		__syncthreads();

		float d[32];
#pragma unroll
		for (int i = 0; i < 32; i++)
			d[i] = 0.0f;
		const uint64_t db = wg_desc((uint32_t)__cvta_generic_to_shared(sm.b[buf]));
		/* the zeroing above is a register access: it must stay before wgmma.fence (PTX:
		 * a fence between any register access and the MMA that uses those registers;
		 * unfenced, the compiler sank the movs below it), as CUTLASS and DeepGEMM
		 * fence the accumulators before warpgroup_arrive */
		reg_fence(d);
		asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
		for (int k = 0; k < 4; k++) /* k-step k: bytes 32k .. 32k + 31 of every row */
			wgmma_64x64x32(d, da + (uint64_t)(2 * k), db + (uint64_t)(2 * k), k);
		asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
		asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
		reg_fence(d);

		/* d[4j + e]: head 16 warp + g, key 8j + 2c + e; d[4j + 2 + e]: head + 8 */
		const float wlo = sm.w[16 * warp + g], whi = sm.w[16 * warp + g + 8];
		float v[16];
#pragma unroll
		for (int j = 0; j < 8; j++)
#pragma unroll
			for (int e = 0; e < 2; e++)
				v[2 * j + e] = fmaf(whi, fmaxf(d[4 * j + 2 + e], 0.0f),
						    wlo * fmaxf(d[4 * j + e], 0.0f));
#pragma unroll
		for (int i = 0; i < 16; i++) {
			v[i] += __shfl_xor_sync(0xffffffffu, v[i], 4);
			v[i] += __shfl_xor_sync(0xffffffffu, v[i], 8);
			v[i] += __shfl_xor_sync(0xffffffffu, v[i], 16);
		}
		if (g == 0)
#pragma unroll
			for (int j = 0; j < 8; j++)
#pragma unroll
				for (int e = 0; e < 2; e++)
					sm.red[warp][8 * j + 2 * c + e] = v[2 * j + e];
		__syncthreads();
		if (tid < kTile) {
			const int key = t * kTile + tid;
			float s = ((sm.red[0][tid] + sm.red[1][tid]) + sm.red[2][tid]) + sm.red[3][tid];
			s *= sm.ks[buf][tid];
			if (key < L) {
				s = s == 0.0f ? 0.0f : s; /* one zero: -0 sorts with +0 */
				scores[key] = s;
				atomicAdd(&sm.hist[idx_bucket_dev(s)], 1u);
			}
		}
		__syncthreads(); /* red and this buffer are free again */
	}
	uint32_t *gh = a.hist + (size_t)row * IDX_BINS;
	for (int i = tid; i < IDX_BINS; i += kWgThreads) {
		const uint32_t v = sm.hist[i];
		if (v)
			atomicAdd(&gh[i], v);
	}
#endif
}

} // namespace

extern "C" int idx_wgmma_ready(void)
{
	static int ready = -1; /* benign race: every caller computes the same value */
	if (ready < 0) {
		int dev = 0, major = 0, minor = 0;
		cudaFuncAttributes fa;
		ready = cudaGetDevice(&dev) == cudaSuccess &&
			cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
			cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
			major == 9 && minor == 0 &&
			cudaFuncGetAttributes(&fa, scan_wgmma_kernel) == cudaSuccess &&
			cudaFuncSetAttribute(scan_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
					     (int)kSmemBytes) == cudaSuccess;
		if (!ready)
			(void)cudaGetLastError(); /* "no kernel image" is not sticky: clear it */
	}
	return ready;
}

extern "C" int idx_wgmma_scan(const idx_wg_args *a, int n_req, int max_limit, void *stream)
{
	if (!idx_wgmma_ready())
		return (int)cudaErrorInvalidDeviceFunction;
	int dev = 0, nsm = 0, per_sm = 0;
	cudaError_t e;
	if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
	    (e = cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
	    (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, scan_wgmma_kernel, kWgThreads,
								kSmemBytes)) != cudaSuccess)
		return (int)e;
	const long long slots = (long long)(nsm > 0 ? nsm : 1) * (per_sm > 0 ? per_sm : 1);
	const long long tiles = ((long long)max_limit + kTile - 1) / kTile;
	long long gx = slots / (n_req > 0 ? n_req : 1);
	gx = gx < 1 ? 1 : gx > tiles ? tiles : gx;
	dim3 grid((unsigned)gx, (unsigned)n_req);
	scan_wgmma_kernel<<<grid, kWgThreads, kSmemBytes, (cudaStream_t)stream>>>(*a);
	return (int)cudaGetLastError();
}
