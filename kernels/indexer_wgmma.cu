// Indexer scan on Hopper's FP8 tensor cores (wgmma), for FP8 or MXFP4 keys and FP8
// queries (strata_indexer_params.scan_wgmma; kernels.h). Built for sm_90a only: FP8
// mma.sync is emulated through fp16 on Hopper (measured slower than the bf16 scan), so
// FP8 tensor throughput needs the warpgroup MMA.
//
// One CTA = one warpgroup (4 warps) of one request, one query row. Its 64 heads x 128
// query bytes are the A operand, staged once; a tile is one page of 64 keys (B = 64),
// the B operand. Both sit in shared memory in the 128-byte-swizzled K-major layout
// (rows of 128 bytes, 8-row atoms of 1 KiB, 16-byte chunk j of row r at j ^ (r % 8)),
// so each tile is 4 wgmma m64n64k32 (k-steps of 32 bytes: the descriptors' start
// advances by 32 bytes inside the swizzled rows). FP8 pages are copied by cp.async
// straight into that layout, a ring of kStages tiles; MXFP4 pages are copied raw into
// the ring and each is rewritten as e4m3 into the operand buffer before its MMA
// (indexer_int.h idx_mx_*: exact for group scales within 14 octaves of the key's
// largest). A CTA takes tiles x, x + G, ...; each page-table entry is read a tile
// ahead of its copy.
//
// Epilogue per tile: ReLU and the head weights on the accumulators (warp w holds heads
// 16w .. 16w + 15), a reduce-scatter over the 8 lanes that share a key column (14
// shuffles), the 4 warps' sums added in a fixed order in shared memory, times the key's
// scale: every key's score has the same shape wherever it sits, so equal keys get
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
constexpr int kFp8Page = kTile * (kRowB + 4); /* FP8 page: [64 x 128][64 x 4 fp32 scales] */
constexpr int kMxPage = kTile * (64 + 4);      /* MXFP4 page: [64 x 64 nibbles][64 x 4 ue8m0] */
template <bool MX> constexpr int page_bytes() { return MX ? kMxPage : kFp8Page; }

/* FP8 (MX false): the ring holds key tiles copied straight into the swizzled operand
 * layout. MXFP4: the ring holds raw pages; each tile is converted to e4m3 into the
 * one operand buffer (mx_convert) before its MMA. */
template <int S, bool MX> struct Smem {
	uint8_t a[kHeads * kRowB];             /* the query, swizzled; 1 KiB-aligned atoms */
	uint8_t b[MX ? 1 : S][kTileBytes];     /* key tiles, swizzled */
	float ks[MX ? 1 : S][kTile];           /* the keys' fp32 scales */
	uint8_t raw[MX ? S : 1][MX ? kMxPage : 16]; /* MXFP4: the raw pages' ring */
	float w[kHeads];
	float red[4][kTile];                   /* each warp's per-key sum over its 16 heads */
	uint32_t hist[IDX_BINS];
};
template <int S, bool MX> constexpr size_t smem_bytes()
{
	return sizeof(Smem<S, MX>) + 1024; /* + alignment slack */
}

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

/* One page's 64 keys and scales into ring slot `slot` (every thread: FP8 4 + (tid < 16)
 * copies, MXFP4 2 + (tid < 16)), then a commit: one group per call, empty when `page`
 * is null, so that "all but the newest S - 2 groups done" always means "this tile's
 * copies done". */
template <int S, bool MX>
__device__ __forceinline__ void load_tile(const uint8_t *page, Smem<S, MX> &sm, int slot)
{
	const int tid = threadIdx.x;
	if (page && MX) {
		const uint32_t r = (uint32_t)__cvta_generic_to_shared(sm.raw[slot]);
#pragma unroll
		for (int i = 0; i < (kMxPage / 16 + kWgThreads - 1) / kWgThreads; i++) {
			const int q = tid + i * kWgThreads;
			if (q < kMxPage / 16)
				cp16(r + 16 * q, page + 16 * q);
		}
	} else if (page) {
		/* rows tid / 8 + 16 i, chunk tid % 8: 16 rows on, both the swizzled place and
		 * the source move by 2 KiB (the row's place in its 8-row atom stays) */
		const int r0 = tid >> 3, ch = tid & 7;
		const uint32_t b = (uint32_t)__cvta_generic_to_shared(sm.b[slot]) + sw128(r0, ch);
		const uint8_t *src = page + r0 * kRowB + ch * 16;
#pragma unroll
		for (int i = 0; i < kTileBytes / 16 / kWgThreads; i++)
			cp16(b + 2048 * i, src + 2048 * i);
		if (tid < kTile * 4 / 16)
			cp16((uint32_t)__cvta_generic_to_shared(&sm.ks[slot][tid * 4]),
			     page + kTileBytes + tid * 16);
	}
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Raw page `slot` into the operand buffer as e4m3 (swizzled) and the keys' scales.
 * Thread t converts half t % 2 of key t / 2: groups 2h, 2h + 1, 16-byte chunks 4h ..
 * 4h + 3 (a phase of 8 threads writes 4 rows x 2 halves: 8 distinct bank groups). */
template <int S>
__device__ __forceinline__ void mx_convert(Smem<S, true> &sm, int slot)
{
	const int tid = threadIdx.x, row = tid >> 1, h = tid & 1;
	const uint8_t *raw = sm.raw[slot];
	const uint4 *src = reinterpret_cast<const uint4 *>(raw + row * 64 + h * 32);
	const uint4 p0 = src[0], p1 = src[1];
	const uint32_t sc = *reinterpret_cast<const uint32_t *>(raw + kTile * 64 + row * 4);
	const uint32_t m = idx_mx_max_scale(sc);
	uint32_t lo0, hi0, lo1, hi1;
	idx_mx_lut((int)((sc >> (16 * h)) & 255u) - (int)m, &lo0, &hi0);
	idx_mx_lut((int)((sc >> (16 * h + 8)) & 255u) - (int)m, &lo1, &hi1);
	const uint32_t w[8] = { p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w };
#pragma unroll
	for (int c = 0; c < 4; c++) { /* chunk 4h + c: words 2c, 2c + 1; group 2h + c / 2 */
		const uint32_t lo = c < 2 ? lo0 : lo1, hi = c < 2 ? hi0 : hi1;
		uint4 o;
		idx_mx_eight(w[2 * c], lo, hi, &o.x, &o.y);
		idx_mx_eight(w[2 * c + 1], lo, hi, &o.z, &o.w);
		*reinterpret_cast<uint4 *>(sm.b[0] + sw128(row, 4 * h + c)) = o;
	}
	if (h == 0)
		sm.ks[0][row] = idx_mx_key_scale(m);
}

template <int N> __device__ __forceinline__ void wait_groups()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* CTA x of a request's grid takes tiles x, x + G, x + 2G, ... with S - 1 of them in
 * flight ahead of the one being scored; each page-table entry is read one tile ahead of
 * the copy that needs it, so the copies never wait for it. */
template <int S, bool MX>
__global__ void __launch_bounds__(kWgThreads) scan_wgmma_kernel(const idx_wg_args a)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	extern __shared__ uint8_t smem_raw[];
	Smem<S, MX> &sm = *reinterpret_cast<Smem<S, MX> *>(
		smem_raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023)) & 1023));
	const int req = blockIdx.y, tid = threadIdx.x;
	const int row = a.req_rows[req];
	if (a.req_rows[req + 1] - row < 1)
		return;
	int L = a.row_limit[row];
	L = L < 0 ? 0 : (L > a.lim_cap ? a.lim_cap : L);
	if (L <= a.topk)
		return; /* not scored: the filter writes 0 .. L-1 */
	const int tiles = (L + kTile - 1) / kTile, G = (int)gridDim.x, x = (int)blockIdx.x;
	if (x >= tiles)
		return;
	const int n = (tiles - x + G - 1) / G; /* this CTA's tiles */
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SCAN0);
	const int32_t *pt = a.page_table + (size_t)req * a.max_pages;
	auto page_of = [&](int i) { /* this CTA's i-th page, or null past the end */
		return i < n ? a.pages + (size_t)pt[x + i * G] * page_bytes<MX>() : nullptr;
	};

#pragma unroll
	for (int i = 0; i < S - 1; i++)
		load_tile<S, MX>(page_of(i), sm, i);
	const uint8_t *next = page_of(S - 1); /* the page-table read, one tile ahead */
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
	const uint64_t db0 = wg_desc((uint32_t)__cvta_generic_to_shared(sm.b[0])); /* buffer 0 */
	const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
	float *scores = a.scores + (size_t)row * a.sstride;

	for (int i = 0; i < n; i++) {
		const int slot = i % S, t = x + i * G;
		wait_groups<S - 2>(); /* this thread's copies of tile i */
		fence_async_smem();   /* ... before the MMA reads them */
		__syncthreads();      /* everyone's copies; tile i - 1 wholly scored: its slot is free */
		load_tile<S, MX>(next, sm, (i + S - 1) % S);
		next = page_of(i + S);
		const int kb = MX ? 0 : slot; /* the operand buffer */
		if constexpr (MX) {
			mx_convert<S>(sm, slot);
			fence_async_smem(); /* the converted keys' generic stores, before the MMA */
			__syncthreads();
		}

		float d[32]; /* not cleared: k-step 0 runs with scale-d = 0 (D = A B), as CUTLASS's
			      * first MMA of a tile; the previous tile's reads of d are fenced
			      * before wgmma.fence, as the PTX rules ask */
		const uint64_t db = db0 + (uint64_t)(kb * (kTileBytes >> 4)); /* start field: 16 B units */
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
		/* over the 8 lanes of a key column: lane (g, c) ends with keys 8g + 2c + {0, 1} */
		float u[2];
		idx_reduce_scatter8<16>(v, u, g);
		float *red = sm.red[warp];
		*reinterpret_cast<float2 *>(&red[8 * g + 2 * c]) = make_float2(u[0], u[1]);
		__syncthreads();
		if (tid < kTile) {
			const int key = t * kTile + tid;
			float (*r)[kTile] = sm.red;
			float s = ((r[0][tid] + r[1][tid]) + r[2][tid]) + r[3][tid];
			s *= sm.ks[kb][tid];
			if (key < L) {
				s = s == 0.0f ? 0.0f : s; /* one zero: -0 sorts with +0 */
				scores[key] = s;
				atomicAdd(&sm.hist[idx_bucket_dev(s)], 1u);
			}
		}
		/* no barrier here: the next tile's first one frees this slot and red */
	}
	idx_pdl_trigger(); /* the histogram flush below is short: let the filter launch */
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SCAN1);
	uint32_t *gh = a.hist + (size_t)row * IDX_BINS;
	for (int i = tid; i < IDX_BINS; i += kWgThreads) {
		const uint32_t v = sm.hist[i];
		if (v)
			atomicAdd(&gh[i], v);
	}
	idx_trace_fenced(a.trace, IDX_T_SCAN2); /* when the flush is performed */
	wait_groups<0>(); /* the trailing empty groups */
#endif
}

} // namespace

/* The ring's depth: 2 (a tile in flight while one is scored). Measured on the H200 at
 * 1M keys, cold L2: 2 stages 24.4 us one row, 0.62 / 0.71 of the roofline at batch 8 /
 * 32; 4 stages 25.2 us, 0.58 / 0.65 (fewer CTAs fit). */
constexpr int kStages = 2;

template <int S, bool MX> static int wg_prepare(void)
{
	cudaFuncAttributes fa;
	return cudaFuncGetAttributes(&fa, scan_wgmma_kernel<S, MX>) == cudaSuccess &&
	       cudaFuncSetAttribute(scan_wgmma_kernel<S, MX>, cudaFuncAttributeMaxDynamicSharedMemorySize,
				    (int)smem_bytes<S, MX>()) == cudaSuccess;
}

template <int S, bool MX>
static int wg_launch(const idx_wg_args *a, int n_req, int max_limit, cudaStream_t st)
{
	int dev = 0, nsm = 0, per_sm = 0;
	cudaError_t e;
	if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
	    (e = cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
	    (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, scan_wgmma_kernel<S, MX>,
								kWgThreads, smem_bytes<S, MX>())) !=
		    cudaSuccess)
		return (int)e;
	const long long slots = (long long)(nsm > 0 ? nsm : 1) * (per_sm > 0 ? per_sm : 1);
	const long long tiles = ((long long)max_limit + kTile - 1) / kTile;
	long long gx = slots / (n_req > 0 ? n_req : 1);
	gx = gx < 1 ? 1 : gx > tiles ? tiles : gx;
	dim3 grid((unsigned)gx, (unsigned)n_req);
	scan_wgmma_kernel<S, MX><<<grid, kWgThreads, smem_bytes<S, MX>(), st>>>(*a);
	return (int)cudaGetLastError();
}

extern "C" int idx_wgmma_ready(void)
{
	static int ready = -1; /* benign race: every caller computes the same value */
	if (ready < 0) {
		int dev = 0, major = 0, minor = 0;
		ready = cudaGetDevice(&dev) == cudaSuccess &&
			cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
			cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
			major == 9 && minor == 0 && wg_prepare<kStages, false>() &&
			wg_prepare<kStages, true>();
		if (!ready)
			(void)cudaGetLastError(); /* "no kernel image" is not sticky: clear it */
	}
	return ready;
}

extern "C" int idx_wgmma_scan(const idx_wg_args *a, int n_req, int max_limit, void *stream)
{
	if (!idx_wgmma_ready())
		return (int)cudaErrorInvalidDeviceFunction;
	cudaStream_t st = (cudaStream_t)stream;
	return a->mx ? wg_launch<kStages, true>(a, n_req, max_limit, st)
		     : wg_launch<kStages, false>(a, n_req, max_limit, st);
}
