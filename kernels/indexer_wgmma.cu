// Indexer scan on Hopper's FP8 tensor cores (wgmma), for FP8 or MXFP4 keys and FP8
// queries (strata_indexer_params.scan_wgmma; kernels.h). Built for sm_90a only: FP8
// mma.sync is emulated through fp16 on Hopper (measured slower than the bf16 scan), so
// FP8 tensor throughput needs the warpgroup MMA.
//
// One CTA = one warpgroup (4 warps) of one request, one query row. A tile is one page
// of 64 keys (B = 64). The keys are the MMA's A operand, in registers: warp w owns keys
// 16w .. 16w + 15 of the tile, and lane (g, c) (g = lane / 4, c = lane % 4) holds 32
// dims of keys 16w + g and 16w + g + 8, read from shared memory and, for MXFP4, turned
// into e4m3 there in registers (indexer_int.h idx_mx_*: exact for group scales within 14
// octaves of the key's largest). The query's 64 heads x 128 bytes are the B operand,
// staged once in shared memory (128-byte-swizzled K-major: rows of 128 bytes, 8-row
// atoms of 1 KiB, 16-byte chunk j of row r at j ^ (r % 8)), its dims permuted as the keys'
// are laid out over the A registers (a dot product does not care about the order of its
// terms), so a tile is 4 wgmma m64n64k32 with A from registers.
//
// Each warp copies its own 16 keys of a tile (cp.async, a ring of S tiles per warp) and
// waits only for its own copies: the tile loop has no CTA-wide barrier. While a tile's
// MMA runs, the warp loads (and converts) the next tile's A registers.
//
// Epilogue per tile: lane (g, c) holds heads 8j + 2c + e of its two keys; it sums ReLU
// times the head weights over them in a fixed order (two chains, then one add), then
// over the 4 lanes of the key (two butterfly shuffles: every lane ends with the same
// bits), times the key's scale. Every key's score has the same shape wherever it sits,
// so equal keys get equal scores. Scores and the 2048-bucket histogram as the other
// scan writes them.
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
constexpr int kRowB = 128;                    /* bytes per query head */
constexpr int kHeads = 64;
constexpr int kWarpKeys = 16;                 /* keys of a tile per warp */
/* A key's bytes: FP8 128 (then fp32 scales), MXFP4 64 nibble bytes (then 4 ue8m0). */
template <bool MX> constexpr int key_bytes() { return MX ? 64 : 128; }
template <bool MX> constexpr int page_bytes() { return kTile * (key_bytes<MX>() + 4); }
/* One warp's share of a tile in its ring: 16 keys' bytes, then their 16 scale words. */
template <bool MX> constexpr int warp_bytes() { return kWarpKeys * (key_bytes<MX>() + 4); }

template <int S, bool MX> struct Smem {
	uint8_t q[kHeads * kRowB];               /* the query (B), swizzled; 1 KiB-aligned */
	uint8_t ring[4][S][warp_bytes<MX>()];    /* each warp's tiles, raw */
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
/* D (+)= A B, A (64 keys x 32 bytes of k) from registers, B (32 x 64 heads) by descriptor. */
__device__ __forceinline__ void wgmma_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t db, int acc)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
		     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}
#endif

/* Keeps the compiler from moving register reads or writes across the async MMA. */
template <int N> __device__ __forceinline__ void reg_fence(float (&d)[N])
{
#pragma unroll
	for (int i = 0; i < N; i++)
		asm volatile("" : "+f"(d[i])::"memory");
}
template <int N> __device__ __forceinline__ void reg_fence(uint32_t (&d)[N])
{
#pragma unroll
	for (int i = 0; i < N; i++)
		asm volatile("" : "+r"(d[i])::"memory");
}

/* The A registers of one tile: k-step s uses a[4s .. 4s + 3] = (key g, k 4c..4c+3),
 * (key g + 8, same k), (key g, k 16 + 4c..), (key g + 8, same k). Lane (g, c) loads
 * word j (0 .. 7) of each of its two keys into a[4 (j / 2) + 2 (j % 2) + key]. */

/* Key dim of k position p (0 .. 31) of k-step s: the inverse of the keys' placement.
 * FP8: lane c's words j = 2s + p / 16 are dims 16c + 4j (j < 4) or 64 + 16c + 4(j - 4),
 * read as 16-byte chunks c and c + 4 of the key. MXFP4: lane c holds the key's scale
 * group c (dims 32c .. 32c + 31, one 16-byte chunk of nibbles); nibble word s converts
 * to dims 32c + 8s + 0..3 (k 4c..) and + 4..7 (k 16 + 4c..). */
template <bool MX> __device__ __forceinline__ int dim_of(int s, int p)
{
	const int half = p >> 4, c = (p & 15) >> 2, i = p & 3;
	if (MX)
		return 32 * c + 8 * s + 4 * half + i;
	const int j = 2 * s + half;
	return (j < 4 ? 16 * c + 4 * j : 64 + 16 * c + 4 * (j - 4)) + i;
}

/* Warp `warp`'s 16 keys of a page into its ring slot (lane: FP8 4 chunks, MXFP4 2, and
 * lanes 0 - 3 one of the scales), then a commit: one group per call, empty when `page`
 * is null, so that "all but the newest S - 2 groups done" always means "this tile's
 * copies done". FP8 rows: chunk ch of key r at ch ^ 4 (r & 1), so that the 8 lanes of a
 * 16-byte load phase (keys r, r + 1, chunks c or c + 4) hit 8 distinct bank groups. */
template <bool MX>
__device__ __forceinline__ void load_warp(const uint8_t *page, uint8_t *slot, int warp, int lane)
{
	if (page) {
		const uint32_t d = (uint32_t)__cvta_generic_to_shared(slot);
		const uint8_t *src = page + warp * kWarpKeys * key_bytes<MX>();
		constexpr int nch = kWarpKeys * key_bytes<MX>() / 16; /* 16-byte chunks */
#pragma unroll
		for (int i = 0; i < nch / 32; i++) {
			const int q = lane + 32 * i;
			if (MX) {
				cp16(d + 16 * q, src + 16 * q);
			} else {
				const int r = q >> 3, ch = q & 7;
				cp16(d + r * 128 + ((ch ^ ((r & 1) << 2)) << 4), src + 16 * q);
			}
		}
		if (lane < 4)
			cp16(d + kWarpKeys * key_bytes<MX>() + 16 * lane,
			     page + kTile * key_bytes<MX>() + warp * kWarpKeys * 4 + 16 * lane);
	}
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* The A registers of a tile from the warp's ring slot, and the scale of the key this
 * lane scores (key g for c = 0, key g + 8 for c = 1; the other lanes' is unused). */
template <bool MX>
__device__ __forceinline__ void read_tile(const uint8_t *slot, int g, int c, uint32_t (&a)[16],
					  float *kscale)
{
	const uint32_t *scw = reinterpret_cast<const uint32_t *>(slot + kWarpKeys * key_bytes<MX>());
#pragma unroll
	for (int h = 0; h < 2; h++) { /* key g + 8h */
		const int r = g + 8 * h;
		if constexpr (MX) {
			const uint4 w = *reinterpret_cast<const uint4 *>(slot + r * 64 + 16 * c);
			const uint32_t sc = scw[r];
			const uint32_t m = idx_mx_max_scale(sc);
			uint32_t lo, hi;
			idx_mx_lut((int)((sc >> (8 * c)) & 255u) - (int)m, &lo, &hi);
			const uint32_t x[4] = { w.x, w.y, w.z, w.w };
#pragma unroll
			for (int s = 0; s < 4; s++)
				idx_mx_eight(x[s], lo, hi, &a[4 * s + h], &a[4 * s + 2 + h]);
			if (c == h)
				*kscale = idx_mx_key_scale(m);
		} else {
			const int sw = (r & 1) << 2;
			const uint4 u = *reinterpret_cast<const uint4 *>(slot + r * 128 + ((c ^ sw) << 4));
			const uint4 v = *reinterpret_cast<const uint4 *>(slot + r * 128 + (((c + 4) ^ sw) << 4));
			const uint32_t x[8] = { u.x, u.y, u.z, u.w, v.x, v.y, v.z, v.w };
#pragma unroll
			for (int j = 0; j < 8; j++)
				a[4 * (j >> 1) + 2 * (j & 1) + h] = x[j];
			if (c == h)
				*kscale = __uint_as_float(scw[r]);
		}
	}
}

template <int N> __device__ __forceinline__ void wait_groups()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* CTA x of a request's grid takes tiles x, x + G, x + 2G, ...; each warp keeps S - 1 of
 * its shares in flight ahead of the one being scored, and reads each page-table entry
 * one tile ahead of the copy that needs it. */
template <int S, bool MX>
__global__ void __launch_bounds__(kWgThreads) scan_wgmma_kernel(const idx_wg_args a)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	static_assert(S >= 3, "a tile in flight beyond the next one");
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
	const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
	/* The page-table entries of this CTA's tiles, 32 at a time: lane j holds tile 32b + j
	 * of chunk b in pc (the chunk in use) and of chunk b + 1 in pn (read 32 tiles ahead
	 * of its first use, so no copy waits for it). */
	const int32_t *pt = a.page_table + (size_t)req * a.max_pages;
	auto pt_chunk = [&](int b) {
		const int i = 32 * b + lane;
		return i < n ? __ldg(pt + x + (size_t)i * G) : 0;
	};
	int pc = pt_chunk(0), pn = pt_chunk(1);
	auto page_of = [&](int i) { /* tile i's page (i in pc's chunk), or null */
		const int p = __shfl_sync(0xffffffffu, pc, i & 31);
		return i < n ? a.pages + (size_t)p * page_bytes<MX>() : nullptr;
	};
	uint8_t(*ring)[warp_bytes<MX>()] = sm.ring[warp];

	static_assert(S <= 32, "the prologue's tiles sit in chunk 0");
#pragma unroll
	for (int i = 0; i < S - 1; i++)
		load_warp<MX>(page_of(i), ring[i], warp, lane);
	{ /* the query (16-byte aligned: the dispatcher checks) as B, 4 bytes at a time in
	   * the keys' dim order; the histogram */
		const uint8_t *q = a.q8 + (size_t)row * kHeads * kRowB;
		for (int i = tid; i < kHeads * kRowB / 4; i += kWgThreads) {
			const int h = i >> 5, kk = 4 * (i & 31); /* head, k position (0 .. 127) */
			const int s = kk >> 5, p = kk & 31;
			*reinterpret_cast<uint32_t *>(sm.q + sw128(h, kk >> 4) + (kk & 15)) =
				__ldg(reinterpret_cast<const uint32_t *>(q + h * kRowB + dim_of<MX>(s, p)));
		}
		for (int i = tid; i < IDX_BINS; i += kWgThreads)
			sm.hist[i] = 0;
		fence_async_smem(); /* the query's generic stores, before the MMA reads them */
		__syncthreads();
	}
	const uint64_t db = wg_desc((uint32_t)__cvta_generic_to_shared(sm.q));
	float wt[16]; /* the weights of this lane's heads 8j + 2c + e, at 2j + e */
#pragma unroll
	for (int j = 0; j < 8; j++)
#pragma unroll
		for (int e = 0; e < 2; e++)
			wt[2 * j + e] = __ldg(a.w + (size_t)row * kHeads + 8 * j + 2 * c + e);
	float *scores = a.scores + (size_t)row * a.sstride;
	const int mykey = kWarpKeys * warp + g + 8 * c; /* lanes c < 2 score this key of a tile */

	uint32_t a0[16], a1[16];
	float ks0 = 0.0f, ks1 = 0.0f;
	wait_groups<S - 2>(); /* tile 0 */
	__syncwarp();
	read_tile<MX>(ring[0], g, c, a0, &ks0);
	/* Tile i: its MMA from acur, while tile i + 1 is read into anext and tile i + S - 1
	 * (this warp's share) is copied into the slot tile i - 1 left. */
	auto step = [&](int i, uint32_t(&acur)[16], uint32_t(&anext)[16], float kcur, float *knext) {
		float d[32]; /* not cleared: k-step 0 runs with scale-d = 0 (D = A B) */
		reg_fence(d);
		reg_fence(acur);
		asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
		for (int k = 0; k < 4; k++)
			wgmma_rs(d, *reinterpret_cast<const uint32_t(*)[4]>(&acur[4 * k]),
				 db + (uint64_t)(2 * k), k);
		asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
		/* tile i + S - 1 into tile i - 1's slot: every lane read that before the last
		 * step's __syncwarp */
		const int t = i + S - 1;
		if ((t & 31) == 0) { /* the next chunk of page-table entries */
			pc = pn;
			pn = pt_chunk((t >> 5) + 1);
		}
		load_warp<MX>(page_of(t), ring[t % S], warp, lane);
		wait_groups<S - 2>(); /* this lane's copies of tile i + 1 */
		__syncwarp();         /* ... and everyone's */
		if (i + 1 < n)
			read_tile<MX>(ring[(i + 1) % S], g, c, anext, knext);
		asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
		reg_fence(d);
		reg_fence(acur);

		/* d[4j + e]: key g, head 8j + 2c + e; d[4j + 2 + e]: key g + 8. Two partial sums
		 * per key (heads with j even, j odd; halves the dependent chain), then one add */
		float p[2][2] = { { 0.0f, 0.0f }, { 0.0f, 0.0f } }; /* [key][j % 2] */
#pragma unroll
		for (int j = 0; j < 8; j++)
#pragma unroll
			for (int e = 0; e < 2; e++)
#pragma unroll
				for (int h = 0; h < 2; h++)
					p[h][j & 1] = fmaf(wt[2 * j + e], fmaxf(d[4 * j + 2 * h + e], 0.0f),
							   p[h][j & 1]);
		float s0 = p[0][0] + p[0][1], s1 = p[1][0] + p[1][1];
		s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
		s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
		s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
		s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
		const int key = (x + i * G) * kTile + mykey;
		if (c < 2 && key < L) {
			float s = (c ? s1 : s0) * kcur;
			s = s == 0.0f ? 0.0f : s; /* one zero: -0 sorts with +0 */
			scores[key] = s;
			atomicAdd(&sm.hist[idx_bucket_dev(s)], 1u);
		}
	};
	for (int i = 0; i < n; i += 2) {
		step(i, a0, a1, ks0, &ks1);
		if (i + 1 < n)
			step(i + 1, a1, a0, ks1, &ks0);
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

/* Each warp's ring depth: 4 (three tiles' shares in flight beyond the one being
 * scored; a power of two keeps the slot arithmetic cheap). */
constexpr int kStages = 4;

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
