// Indexer scans on Hopper's FP8 tensor cores (wgmma), for FP8 or MXFP4 keys and FP8
// queries (strata_indexer_params.scan_wgmma; kernels.h). Built for sm_90a only: FP8
// mma.sync is emulated through fp16 on Hopper (measured slower than the bf16 scan), so
// FP8 tensor throughput needs the warpgroup MMA. One CTA = one warpgroup (4 warps) of one
// request, one query row; a tile is one page of 64 keys (B = 64); a CTA takes tiles x,
// x + G, x + 2G, ... Two kernels, each where it measured faster (H200, 1M keys,
// bench/results/2026-11-30-h200-s10):
//
// FP8 keys (scan_ss_kernel): both operands in shared memory, in the 128-byte-swizzled
// K-major layout (rows of 128 bytes, 8-row atoms of 1 KiB, 16-byte chunk j of row r at
// j ^ (r % 8)). The query's 64 heads x 128 bytes are A, staged once; the key tile is B,
// copied by cp.async straight into that layout (a ring of tiles), so a tile is 4 wgmma
// m64n64k32 (k-steps of 32 bytes: the descriptors' start advances by 32 bytes inside the
// swizzled rows). Epilogue: ReLU and the head weights on the accumulators (warp w holds
// heads 16w .. 16w + 15), a reduce-scatter over the 8 lanes that share a key column (14
// shuffles), the 4 warps' sums added in a fixed order in shared memory, times the key's
// scale.
//
// MXFP4 keys (scan_rs_kernel): the keys are A, in registers, converted to e4m3 there
// (indexer_int.h idx_mx_*: exact for group scales within 14 octaves of the key's
// largest). Warp w owns keys 16w .. 16w + 15 of a tile; lane (g, c) (g = lane / 4, c =
// lane % 4) holds scale group c (dims 32c .. 32c + 31) of keys 16w + g and 16w + g + 8.
// The query is B, staged once with its dims permuted as the keys' sit in the A
// registers (a dot product does not care about the order of its terms). Each warp copies
// its own 16 keys of a tile (cp.async, a ring per warp) and waits only for its own
// copies: no CTA-wide barrier in the tile loop, and the next tile is converted while
// this one's MMA runs. Epilogue: lane (g, c) sums ReLU times the head weights over its
// heads 8j + 2c + e of both keys in a fixed order (two chains, then one add), then over
// the key's 4 lanes (two butterfly shuffles: every lane ends with the same bits), times
// the key's scale.
//
// In both, every key's score has the same shape wherever it sits, so equal keys get
// equal scores; scores and the 2048-bucket histogram as the other scan writes them; and
// each page-table entry is read a tile ahead of the copy that needs it (an index, made
// an address only there). Hopper's FP8 tensor cores add with about 13 mantissa bits, so
// scores differ from the CPU twin's by more than the fp32 paths' (kernels.h, scan_wgmma).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>

#include "kernels/indexer_int.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

namespace {

constexpr int kWgThreads = 128;               /* one warpgroup */
constexpr int kTile = 64;                     /* keys per tile: one page of B = 64 */
constexpr int kRowB = 128;                    /* bytes per query head, per FP8 key */
constexpr int kTileBytes = kTile * kRowB;     /* 8 KiB */
constexpr int kHeads = 64;
constexpr int kFp8Page = kTile * (kRowB + 4); /* FP8 page: [64 x 128][64 x 4 fp32 scales] */
constexpr int kMxKey = 64;                    /* MXFP4 nibble bytes per key */
constexpr int kMxPage = kTile * (kMxKey + 4); /* MXFP4 page: [64 x 64 nibbles][64 x 4 ue8m0] */
constexpr int kWarpKeys = 16;                 /* MXFP4: keys of a tile per warp */
constexpr int kMxWarpBytes = kWarpKeys * (kMxKey + 4); /* a warp's share: nibbles, scales */

/* The tail's shared words (beside the scan's buffers, which FinSmem reuses). */
struct TailSmem {
	uint32_t wsum[4]; /* the warps' sums of a block scan */
	int bin;          /* the CTA's local cut bucket */
	uint32_t npub;    /* its published keys */
};

/* FP8: the ring holds key tiles copied straight into the swizzled operand layout. */
template <int S> struct SsSmem {
	uint8_t a[kHeads * kRowB];             /* the query, swizzled; 1 KiB-aligned atoms */
	uint8_t b[S][kTileBytes];              /* key tiles, swizzled */
	float ks[S][kTile];                    /* the keys' fp32 scales */
	float w[kHeads];
	float red[4][kTile];                   /* each warp's per-key sum over its 16 heads */
	uint32_t hist[IDX_BINS];
	TailSmem tail;
};
/* MXFP4: the query (B) and each warp's ring of raw shares. */
template <int S> struct RsSmem {
	uint8_t q[kHeads * kRowB];             /* the query, swizzled; 1 KiB-aligned */
	uint8_t ring[4][S][kMxWarpBytes];
	uint32_t hist[IDX_BINS];
	TailSmem tail;
};
template <typename T> constexpr size_t smem_of()
{
	return sizeof(T) + 1024; /* + alignment slack */
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

template <int N> __device__ __forceinline__ void wait_groups()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* The dynamic shared memory, aligned to 1 KiB (the swizzle's atoms). */
template <typename T> __device__ __forceinline__ T &smem_at(uint8_t *raw)
{
	return *reinterpret_cast<T *>(
		raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(raw) & 1023)) & 1023));
}

/* What a scan CTA works on: request blockIdx.y's row, its limit L, and the tiles x, x +
 * G, ... (n of them) of x = blockIdx.x in a grid of G; the page-table entries by tile. */
struct ScanCta {
	int req, row, L, x, G, n;
	const int32_t *pt;
	/* Fills this in; false where the CTA has nothing to score (the caller returns). */
	__device__ __forceinline__ bool begin(const idx_wg_args &a)
	{
		req = (int)blockIdx.y;
		row = a.req_rows[req];
		if (a.req_rows[req + 1] - row < 1)
			return false;
		L = a.row_limit[row];
		L = L < 0 ? 0 : (L > a.lim_cap ? a.lim_cap : L);
		if (L <= a.topk)
			return false; /* not scored: the filter writes 0 .. L-1 */
		const int tiles = (L + kTile - 1) / kTile;
		G = (int)gridDim.x;
		x = (int)blockIdx.x;
		if (x >= tiles)
			return false;
		n = (tiles - x + G - 1) / G;
		pt = a.page_table + (size_t)req * a.max_pages;
		if (threadIdx.x == 0)
			idx_trace(a.trace, IDX_T_SCAN0);
		return true;
	}
	/* The page index of this CTA's tile i (0 past the end); read a tile ahead of its
	 * copy, and made an address only there (page). */
	__device__ __forceinline__ int pt_at(int i) const
	{
		return i < n ? __ldg(pt + x + (size_t)i * G) : 0;
	}
	/* Tile i's page (index p) of pages of `bytes`, or null past the end. */
	__device__ __forceinline__ const uint8_t *page(const idx_wg_args &a, int i, int p,
						      int bytes) const
	{
		return i < n ? a.pages + (size_t)p * bytes : nullptr;
	}
};

/* The row's histogram into the global one, after every tile (the scan's tail). */
__device__ __forceinline__ void flush_hist(const idx_wg_args &a, int row, const uint32_t *h)
{
	idx_pdl_trigger(); /* the flush below is short: let the filter launch */
	__syncthreads();
	if (threadIdx.x == 0)
		idx_trace(a.trace, IDX_T_SCAN1);
	uint32_t *gh = a.hist + (size_t)row * IDX_BINS;
	for (int i = threadIdx.x; i < IDX_BINS; i += kWgThreads) {
		const uint32_t v = h[i];
		if (v)
			atomicAdd(&gh[i], v);
	}
	idx_trace_fenced(a.trace, IDX_T_SCAN2); /* when the flush is performed */
	wait_groups<0>(); /* the trailing empty groups */
}

/* ---- the gather select: the top-k from the scan's records ------------------------------
 * With idx_wg_args.fused (each scan CTA holds at most kHold tiles, k <= kGK, G <= kGK),
 * no filter runs:
 *  - each scan CTA, once its histogram is flushed, publishes a record (64 bytes in
 *    the row's candidate list): its local cut pc, the lowest bucket with at most kPub of
 *    its scores at or above it, and those scores as keys; then it exits;
 *  - gather_kernel (one CTA of kGK threads a row, the scan's programmatic dependent)
 *    reads the row's histogram and every record in one trip, finds the threshold bucket
 *    b*, files every published key above b* and keeps b*'s. A CTA whose pc lies above
 *    b* may hold unpublished scores in [b*, pc): their slices are read back from the
 *    scores (a CTA holds ~0.9 of the ~700 entries at or above b* at 1M keys, so with
 *    kPub = 7 that is rare, more where the top entries cluster). Among b*'s keys a
 *    256-bin sub-histogram and a rank inside the threshold sub-bin pick the k - above1
 *    largest, and a counting sort writes the ids in ascending order.
 * Against the filter path this drops a launch, the filter's b* search in every CTA, its
 * filing of the lists and the select's list reads. (Finishing the row in the scan's last
 * CTA instead, 128 threads, measured 35 us a call at 1M keys against 23: one warp a
 * scheduler runs a dependent chain at ~9 cycles an instruction; bench/results/
 * 2026-11-30-h200-s12.) */
constexpr int kHold = 8;     /* tiles a scan CTA holds: one score a tile in 64 threads */
constexpr int kPub = 7;      /* keys a scan CTA publishes */
constexpr int kRecW = 16;    /* a record's words: pc | npub << 16, 0, then 7 keys */
constexpr int kGK = 1024;    /* gather_kernel's threads: one record (G <= kGK), one id (k) */
constexpr int kGCC = 2048;   /* b*'s keys kept in shared memory (more: a crowded bucket) */
constexpr int kOvCap = 256;  /* overflow CTAs listed; beyond, every CTA's slice is read */
constexpr int kSubList = 256; /* keys of b*'s threshold sub-bin ranked among themselves */
constexpr int kSliceF = 4 * kGK; /* scores of overflow slices a round */

/* The row's records: kRecW words a CTA from a 16-byte aligned start in its candidate
 * list (which holds cap >= 8 G + 2 keys; wg_launch checks). */
__device__ __forceinline__ uint4 *rec_of(const idx_wg_args &a, int row)
{
	const uintptr_t p = reinterpret_cast<uintptr_t>(a.cand + (size_t)row * a.cap);
	return reinterpret_cast<uint4 *>((p + 15) & ~(uintptr_t)15);
}

/* Exclusive prefix sum of v over the CTA's 128 threads in thread order; ends with a
 * barrier, so wsum is free again only after the caller's next one. */
__device__ __forceinline__ uint32_t excl_scan128(uint32_t v, uint32_t (&wsum)[4])
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	uint32_t incl = v;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		const uint32_t t = __shfl_up_sync(0xffffffffu, incl, o);
		if (lane >= o)
			incl += t;
	}
	if (lane == 31)
		wsum[warp] = incl;
	__syncthreads();
	uint32_t off = 0;
#pragma unroll
	for (int w = 0; w < 3; w++)
		off += w < warp ? wsum[w] : 0u;
	return off + incl - v;
}

/* A scan CTA's part, after its histogram flush (lh: its own, in shared memory): its
 * record. own[i]: the score this thread wrote at key position p (0 .. 63; -1: none) of
 * the CTA's tile i. */
__device__ void publish(const idx_wg_args &a, const ScanCta &cta, const uint32_t *lh,
			TailSmem &ts, const float (&own)[kHold], int p)
{
	constexpr int NB = IDX_BINS / kWgThreads;
	const int tid = threadIdx.x, row = cta.row, L = cta.L;
	const uint32_t need = (uint32_t)kPub + 1u;
	/* pc: one above the bucket where the count from the top reaches kPub + 1 (0 where
	 * the CTA holds fewer) */
	{
		const int grp = kWgThreads - 1 - tid; /* bins NB (127 - t) .. + NB - 1 */
		uint32_t c[NB], sum = 0;
		const uint4 *h4 = reinterpret_cast<const uint4 *>(lh + grp * NB);
#pragma unroll
		for (int b = 0; b < NB / 4; b++) {
			const uint4 v = h4[b];
			c[4 * b] = v.x, c[4 * b + 1] = v.y, c[4 * b + 2] = v.z, c[4 * b + 3] = v.w;
		}
#pragma unroll
		for (int b = 0; b < NB; b++)
			sum += c[b];
		if (tid == 0)
			ts.bin = -1, ts.npub = 0;
		uint32_t acc = excl_scan128(sum, ts.wsum);
#pragma unroll
		for (int b = NB - 1; b >= 0; b--) {
			if (acc < need && acc + c[b] >= need)
				ts.bin = grp * NB + b;
			acc += c[b];
		}
		__syncthreads();
	}
	const uint32_t pc = ts.bin < 0 ? 0u : (uint32_t)ts.bin + 1u;
	uint32_t *rec = reinterpret_cast<uint32_t *>(rec_of(a, row) + 4 * cta.x);
#pragma unroll 1
	for (int i = 0; i < kHold; i++) {
		const int j = (cta.x + i * cta.G) * kTile + p;
		if (p >= 0 && i < cta.n && j < L && idx_bucket_dev(own[i]) >= pc) {
			const uint32_t at = atomicAdd(&ts.npub, 1u); /* < kPub + 1: pc's definition */
			if (at < (uint32_t)kPub)
				*reinterpret_cast<unsigned long long *>(rec + 2 + 2 * at) = idx_key64(own[i], j);
		}
	}
	__syncthreads();
	if (tid == 0)
		rec[0] = pc | (ts.npub < (uint32_t)kPub ? ts.npub : (uint32_t)kPub) << 16;
}

/* A row with limit <= k (its CTAs score nothing): CTA 0 writes 0 .. L-1, -1 padded. */
__device__ void write_unscored(const idx_wg_args &a)
{
	const int req = (int)blockIdx.y;
	if (blockIdx.x != 0 || a.req_rows[req + 1] - a.req_rows[req] < 1)
		return;
	const int row = a.req_rows[req], k = a.topk;
	int L = a.row_limit[row];
	L = L < 0 ? 0 : (L > a.lim_cap ? a.lim_cap : L);
	if (L > k)
		return;
	int32_t *oid = a.out_ids + (size_t)row * k;
	float *osc = a.out_scores ? a.out_scores + (size_t)row * k : nullptr;
	for (int i = threadIdx.x; i < k; i += blockDim.x) {
		oid[i] = i < L ? i : -1;
		if (osc)
			osc[i] = 0.0f;
	}
	if (threadIdx.x == 0 && a.cut_out)
		*reinterpret_cast<volatile unsigned long long *>(a.cut_out + row) =
			a.cut_epoch << 12 | (unsigned long long)STRATA_INDEXER_CUT_ALL;
}

typedef cub::BlockScan<uint32_t, kGK> GScan;

struct GSmem {
	GScan::TempStorage scan;
	int32_t ids[kGK]; /* the selected ids and scores */
	float sc[kGK];
	unsigned long long cc[kGCC]; /* b*'s keys */
	union {
		float sl[kSliceF];   /* a round of overflow slices */
		struct {
			uint32_t cnt[IDX_BINS];
			uint32_t pos[kGK];
			int32_t by[kGK];
		} s;                  /* the sort */
		struct {
			uint32_t h[256];
			unsigned long long lst[kSubList];
		} b;                  /* b*'s select */
	} u;
	uint32_t ov[kOvCap];
	int bin, bin2;
	uint32_t above, above2, tot, n_ov, n_l, n_t;
	int digit, dcnt;
	uint32_t dabove;
	uint32_t h256[256]; /* idx_radix_cut's */
};

/* Files each thread's n items (item(i): the key and its class, 0 none, 1 above b*, 2 in
 * b*; called twice an item) into the above list (ids / sc from *na) and b*'s keys (cc
 * from *nb, kept while fewer than kGCC) by one block scan of the two counts. */
struct GItem {
	unsigned long long key;
	uint32_t c;
};
template <typename F>
__device__ __forceinline__ void g_file(int n, F item, GSmem &sm, uint32_t k, uint32_t *na,
				       uint32_t *nb)
{
	uint32_t cls = 0, ca = 0, cb = 0;
	for (int i = 0; i < n; i++) {
		const uint32_t c = item(i).c;
		cls |= c << (2 * i);
		ca += c == 1u;
		cb += c == 2u;
	}
	uint32_t off, tot;
	GScan(sm.scan).ExclusiveSum(ca | cb << 16, off, tot); /* < 65536 each: n * kGK */
	uint32_t pa = *na + (off & 0xffffu), pb = *nb + (off >> 16);
	for (int i = 0; cls && i < n; i++) {
		const uint32_t c = cls >> (2 * i) & 3u;
		if (!c)
			continue;
		const unsigned long long key = item(i).key;
		if (c == 1u) {
			if (pa < k) /* fewer than k lie above b* */
				sm.ids[pa] = idx_key_id(key), sm.sc[pa] = idx_key_score(key);
			pa++;
		} else {
			if (pb < (uint32_t)kGCC)
				sm.cc[pb] = key;
			pb++;
		}
	}
	*na += tot & 0xffffu;
	*nb += tot >> 16;
	__syncthreads(); /* the writes done; the scan's storage free */
}

/* The select of request req's row (gather_kernel). dry: a rehearsal on made-up data
 * (a bucket of three keys, two wanted, one CTA overflowing) that writes nothing to
 * global memory: it runs the main path once, so that the real run, right after,
 * finds its instructions in the SM's caches. This code runs once a call, and a cold
 * fetch of each 128-byte line of it costs an L2 or DRAM trip (a few hundred ns): the
 * rehearsal overlaps those with the scan's end (H200: bench/results/2026-11-30-h200-s12). */
constexpr uint32_t kDryB = 1504; /* the bucket of 1.0 */
__device__ __noinline__ void gather_row(const idx_wg_args &a, GSmem &sm, int req, bool dry)
{
	const int tid = threadIdx.x, G = a.gx;
	int row = 0, L = 4096, k = 2;
	if (!dry) {
		if (a.req_rows[req + 1] - a.req_rows[req] < 1)
			return;
		row = a.req_rows[req];
		L = a.row_limit[row];
		L = L < 0 ? 0 : (L > a.lim_cap ? a.lim_cap : L);
		k = a.topk;
		if (L <= k)
			return; /* the scan's CTA 0 wrote it */
	}
	if (tid == 0 && !dry)
		idx_trace(a.trace, IDX_T_SEL0);
	const int tiles = (L + kTile - 1) / kTile, want = tiles < G ? tiles : G;
	const int per = (tiles + G - 1) / G * kTile; /* score slots of the CTAs with the most */
	uint32_t *gh = a.hist + (size_t)row * IDX_BINS;
	const uint4 *rec = rec_of(a, row);
	/* one trip: two histogram bins a thread (2047 - 2t, 2046 - 2t) and record t */
	uint2 hv = __ldcg(reinterpret_cast<const uint2 *>(gh) + (kGK - 1 - tid));
	uint4 r[kRecW / 4];
#pragma unroll
	for (int q = 0; q < kRecW / 4; q++)
		r[q] = tid < want ? __ldcg(rec + 4 * tid + q) : make_uint4(0, 0, 0, 0);
	if (dry) { /* bucket kDryB: 3 keys, in records 0 - 2; record 0's pc above it */
		hv = make_uint2(2 * tid == IDX_BINS - 2 - (int)kDryB ? 3u : 0u, 0u);
		const unsigned long long key = idx_key64(1.0f + 0.001f * (float)tid, tid);
		r[0] = make_uint4(tid < 3 ? (tid == 0 ? kDryB + 1u : 0u) | 1u << 16 : 0u, 0u,
				  (uint32_t)key, (uint32_t)(key >> 32));
	}
	if (tid == 0)
		sm.bin = -1, sm.n_ov = 0, sm.n_l = 0, sm.n_t = 0;
	for (int i = tid; i < k; i += kGK)
		sm.ids[i] = -1; /* every one is filled below; were one not, it would not be sorted */
	uint32_t acc, total;
	GScan(sm.scan).ExclusiveSum(hv.x + hv.y, acc, total);
	if (acc < (uint32_t)k && acc + hv.y >= (uint32_t)k)
		sm.bin = 2 * (kGK - 1 - tid) + 1, sm.above = acc;
	else if (acc + hv.y < (uint32_t)k && acc + hv.y + hv.x >= (uint32_t)k)
		sm.bin = 2 * (kGK - 1 - tid), sm.above = acc + hv.y;
	if (!dry)
		reinterpret_cast<uint2 *>(gh)[kGK - 1 - tid] = make_uint2(0, 0); /* zero at rest */
	__syncthreads();
	const int bs = sm.bin;
	const uint32_t above1 = sm.above;
	if (tid == 0 && !dry)
		idx_trace(a.trace, IDX_T_FCUT);
	int32_t *oid = a.out_ids + (size_t)row * k;
	if (bs < 0) { /* cannot happen (L > k scores counted): no selection, not a wrong one */
		for (int i = tid; i < k && !dry; i += kGK)
			oid[i] = -1;
		return;
	}
	const uint32_t bstar = (uint32_t)bs;
	if (tid == 0 && a.cut_out && !dry) /* top-k is far from done: early staging may start */
		*reinterpret_cast<volatile unsigned long long *>(a.cut_out + row) =
			a.cut_epoch << 12 | (unsigned long long)bstar;
	auto class_of = [&](uint32_t b) { return b > bstar ? 1u : b == bstar ? 2u : 0u; };
	uint32_t na = 0, nb = 0; /* keys above b*, b*'s keys: filed so far */
	/* record tid's keys; an overflowing CTA listed */
	const uint32_t w0 = r[0].x, pc = w0 & 0xffffu, np = w0 >> 16;
	auto rkey = [&](int q) { /* key q: words 2 + 2q, 3 + 2q */
		const int wd = 2 + 2 * q;
		const uint4 v = r[wd >> 2];
		return (wd & 2) ? (unsigned long long)v.w << 32 | v.z
				: (unsigned long long)v.y << 32 | v.x;
	};
	g_file(
		kPub,
		[&](int q) {
			GItem it = { 0, 0 };
			if ((uint32_t)q < np) {
				it.key = rkey(q);
				it.c = class_of(idx_bucket_dev(idx_key_score(it.key)));
			}
			return it;
		},
		sm, (uint32_t)k, &na, &nb);
	if (tid < want && pc > bstar) {
		const uint32_t o = atomicAdd(&sm.n_ov, 1u);
		if (o < (uint32_t)kOvCap)
			sm.ov[o] = (uint32_t)tid | pc << 16;
	}
	__syncthreads();
	if (tid == 0 && !dry)
		idx_trace(a.trace, IDX_T_FLOOP);
	/* the CTAs that kept scores in [b*, pc) back: the listed CTAs' slices, or, where more
	 * than kOvCap overflowed (many equal scores), every CTA's whole slice instead of the
	 * records (their keys dropped: pc taken as above every bucket) */
	const uint32_t nov = sm.n_ov;
	const bool listed = nov <= (uint32_t)kOvCap;
	const uint32_t nlist = listed ? nov : (uint32_t)want;
	const float *scr = a.scores + (size_t)row * a.sstride;
	auto cta_of = [&](uint32_t o) { return listed ? sm.ov[o] & 0xffffu : o; };
	auto pc_of = [&](uint32_t o) { return listed ? sm.ov[o] >> 16 : 0x10000u; };
	if (nov) {
		if (!listed)
			na = nb = 0;
		const uint32_t fit = (uint32_t)kSliceF / (uint32_t)per, cpt = (uint32_t)per / 4u;
		const uint32_t d = (uint32_t)__cvta_generic_to_shared(sm.u.sl);
		for (uint32_t o0 = 0; o0 < nlist; o0 += fit) {
			const uint32_t m = nlist - o0 < fit ? nlist - o0 : fit;
			for (uint32_t c = tid; c < m * cpt; c += kGK) {
				const uint32_t o = c / cpt, w = c - o * cpt; /* 16-byte chunk w of slice o */
				const int t = (int)cta_of(o0 + o) + (int)(w >> 4) * G;
				if (t < tiles)
					cp16(d + 16u * c, scr + (size_t)t * kTile + 4u * (w & 15u));
			}
			asm volatile("cp.async.commit_group;\n" ::: "memory");
			wait_groups<0>();
			__syncthreads();
			g_file(
				kSliceF / kGK,
				[&](int i) {
					const uint32_t e = tid + kGK * (uint32_t)i;
					GItem it = { 0, 0 };
					if (e < m * (uint32_t)per) {
						const uint32_t o = e / (uint32_t)per, rr = e - o * (uint32_t)per;
						const int t = (int)cta_of(o0 + o) + (int)(rr >> 6) * G;
						const int j = t * kTile + (int)(rr & (kTile - 1));
						const float v = dry ? 0.0f : sm.u.sl[e];
						const uint32_t b = idx_bucket_dev(v);
						if (t < tiles && j < L && b >= bstar && b < pc_of(o0 + o)) {
							it.key = idx_key64(v, j);
							it.c = class_of(b);
						}
					}
					return it;
				},
				sm, (uint32_t)k, &na, &nb);
		}
	}
	if (tid == 0 && !dry)
		idx_trace(a.trace, IDX_T_CLASS);
	/* the k - above1 largest of b*'s nb keys: 256 sub-bins over b*'s span, the sub-bin
	 * s* holding the need-th, every key above it taken, and s*'s keys ranked among
	 * themselves (unique keys) */
	const uint32_t nc = nb, need = (uint32_t)k - above1;
	bool done = nc <= need;
	if (done) {
		for (uint32_t i = tid; i < nc; i += kGK)
			sm.ids[above1 + i] = idx_key_id(sm.cc[i]), sm.sc[above1 + i] = idx_key_score(sm.cc[i]);
	} else if (nc <= (uint32_t)kGCC) {
		uint32_t base;
		int shift;
		idx_sub_bounds(bstar, &base, &shift);
		auto sub_of = [&](unsigned long long key) {
			return idx_sub_of((uint32_t)(key >> 32), base, shift) >> 4; /* 4096 / 16 */
		};
		if (tid < 256)
			sm.u.b.h[tid] = 0;
		__syncthreads();
		for (uint32_t i = tid; i < nc; i += kGK)
			atomicAdd(&sm.u.b.h[sub_of(sm.cc[i])], 1u);
		__syncthreads();
		if (tid < 32) { /* lane l: sub-bins 255 - 8l down to 248 - 8l */
			uint32_t c[8], sum = 0;
#pragma unroll
			for (int b = 0; b < 8; b++)
				sum += c[b] = sm.u.b.h[255 - 8 * tid - b];
			uint32_t incl = sum;
#pragma unroll
			for (int o = 1; o < 32; o <<= 1) {
				const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
				if (tid >= o)
					incl += v;
			}
			uint32_t ac = incl - sum;
#pragma unroll
			for (int b = 0; b < 8; b++) {
				if (ac < need && ac + c[b] >= need)
					sm.bin2 = 255 - 8 * tid - b, sm.above2 = ac;
				ac += c[b];
			}
		}
		__syncthreads();
		const uint32_t s2 = (uint32_t)sm.bin2, above2 = sm.above2, cnt2 = sm.u.b.h[s2];
		if (cnt2 <= (uint32_t)kSubList) {
			/* keys above s*: their places by a block scan (nc <= 2 kGK: two a thread) */
			uint32_t ca = 0;
			for (uint32_t i = tid; i < nc; i += kGK) {
				const uint32_t sb = sub_of(sm.cc[i]);
				ca += sb > s2;
				if (sb == s2)
					sm.u.b.lst[atomicAdd(&sm.n_l, 1u)] = sm.cc[i];
			}
			uint32_t at, tt;
			GScan(sm.scan).ExclusiveSum(ca, at, tt);
			at += above1;
			for (uint32_t i = tid; i < nc; i += kGK)
				if (sub_of(sm.cc[i]) > s2)
					sm.ids[at] = idx_key_id(sm.cc[i]), sm.sc[at] = idx_key_score(sm.cc[i]), at++;
			__syncthreads(); /* the list complete */
			const uint32_t need2 = need - above2, at2 = above1 + above2;
			if (tid < cnt2) {
				const unsigned long long key = sm.u.b.lst[tid];
				uint32_t rk = 0;
				for (uint32_t q = 0; q < cnt2; q++)
					rk += sm.u.b.lst[q] > key;
				if (rk < need2)
					sm.ids[at2 + rk] = idx_key_id(key), sm.sc[at2 + rk] = idx_key_score(key);
			}
			done = true;
		}
		__syncthreads();
	}
	if (!done) { /* a crowded sub-bin or bucket (many equal scores): a radix select, from
		      * shared memory or from global memory */
		auto take = [&](unsigned long long key) {
			const uint32_t at = above1 + idx_agg_inc(&sm.n_t, true);
			if (at < (uint32_t)k)
				sm.ids[at] = idx_key_id(key), sm.sc[at] = idx_key_score(key);
		};
		unsigned long long prefix = 0, mask = 0;
		auto each = [&](auto fn) {
			if (nc <= (uint32_t)kGCC) {
				for (uint32_t i = tid; i < nc; i += kGK)
					fn(sm.cc[i]);
				return;
			}
			for (int x = tid; listed && x < want; x += kGK) {
				uint32_t rw[kRecW];
#pragma unroll
				for (int q = 0; q < kRecW / 4; q++) {
					const uint4 v = __ldcg(rec + 4 * x + q);
					rw[4 * q] = v.x, rw[4 * q + 1] = v.y, rw[4 * q + 2] = v.z, rw[4 * q + 3] = v.w;
				}
#pragma unroll
				for (int q = 0; q < kPub; q++) {
					const unsigned long long key =
						(unsigned long long)rw[3 + 2 * q] << 32 | rw[2 + 2 * q];
					if ((uint32_t)q < (rw[0] >> 16) &&
					    idx_bucket_dev(idx_key_score(key)) == bstar)
						fn(key);
				}
			}
			for (uint32_t e = tid; e < nlist * (uint32_t)per; e += kGK) {
				const uint32_t o = e / (uint32_t)per, rr = e - o * (uint32_t)per;
				const int t = (int)cta_of(o) + (int)(rr >> 6) * G;
				const int j = t * kTile + (int)(rr & (kTile - 1));
				if (t < tiles && j < L) {
					const float v = __ldcg(scr + j);
					const uint32_t b = idx_bucket_dev(v);
					if (b == bstar && b < pc_of(o))
						fn((unsigned long long)idx_key64(v, j));
				}
			}
		};
		idx_radix_cut(each, (int)need, sm, &prefix, &mask);
		each([&](unsigned long long key) {
			if ((key & mask) >= prefix)
				take(key);
		});
		__syncthreads();
	}
	if (tid == 0 && !dry)
		idx_trace(a.trace, IDX_T_SORT0);
	/* ascending ids: a counting sort on the top 11 bits (2048 buckets, two a thread),
	 * then each id ranked inside its bucket (max(1, L / 2048) ids a bucket) */
	const int nbits = 32 - __clz(L - 1), shift = nbits > 11 ? nbits - 11 : 0;
	reinterpret_cast<uint2 *>(sm.u.s.cnt)[tid] = make_uint2(0, 0);
	__syncthreads();
	const int32_t id = tid < k ? sm.ids[tid] : -1;
	const uint32_t bk = id >= 0 ? (uint32_t)id >> shift : 0u;
	uint32_t pos = 0;
	if (id >= 0)
		pos = atomicAdd(&sm.u.s.cnt[bk], 1u);
	__syncthreads();
	const uint2 c2 = reinterpret_cast<const uint2 *>(sm.u.s.cnt)[tid];
	uint32_t off, tot;
	GScan(sm.scan).ExclusiveSum(c2.x + c2.y, off, tot);
	reinterpret_cast<uint2 *>(sm.u.s.cnt)[tid] = make_uint2(off, off + c2.x);
	__syncthreads();
	if (id >= 0)
		sm.u.s.by[sm.u.s.cnt[bk] + pos] = id;
	__syncthreads();
	float *osc = a.out_scores ? a.out_scores + (size_t)row * k : nullptr;
	if (id >= 0) {
		const uint32_t s0 = sm.u.s.cnt[bk], s1 = bk + 1 < (uint32_t)IDX_BINS ? sm.u.s.cnt[bk + 1] : tot;
		uint32_t at = s0;
		for (uint32_t q = s0; q < s1; q++)
			at += sm.u.s.by[q] < id;
		if (!dry) {
			oid[at] = id;
			if (osc)
				osc[at] = sm.sc[tid];
		}
	}
	for (int i = (int)tot + tid; i < k && !dry; i += kGK) {
		oid[i] = -1;
		if (osc)
			osc[i] = 0.0f;
	}
	if (tid == 0 && !dry) {
		idx_trace(a.trace, IDX_T_SORT1);
		idx_trace(a.trace, IDX_T_END);
	}
	__syncthreads(); /* the shared memory free for the next run */
}

/* grid n_req, kGK threads: the select of each scored row from its scan's records and
 * histogram (the scan's programmatic dependent), after a rehearsal (gather_row). */
__global__ void __launch_bounds__(kGK) gather_kernel(const idx_wg_args a)
{
	__shared__ GSmem sm;
	gather_row(a, sm, (int)blockIdx.x, true);
	idx_pdl_wait(); /* the scan's completion and memory */
	gather_row(a, sm, (int)blockIdx.x, false);
}

/* ---- FP8 keys: scan_ss_kernel --------------------------------------------------------- */

/* One page's 64 keys and scales into ring slot `slot` (every thread 4 + (tid < 16)
 * copies), then a commit: one group per call, empty when `page` is null, so that "all
 * but the newest S - 2 groups done" always means "this tile's copies done". Rows tid / 8
 * + 16 i, chunk tid % 8: 16 rows on, both the swizzled place and the source move by 2 KiB
 * (the row's place in its 8-row atom stays). */
template <int S>
__device__ __forceinline__ void ss_load(const uint8_t *page, SsSmem<S> &sm, int slot)
{
	const int tid = threadIdx.x;
	if (page) {
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

/* S - 1 tiles in flight ahead of the one being scored. */
template <int S>
__global__ void __launch_bounds__(kWgThreads, 6) scan_ss_kernel(const idx_wg_args a)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	extern __shared__ uint8_t smem_raw[];
	SsSmem<S> &sm = smem_at<SsSmem<S>>(smem_raw);
	ScanCta cta;
	if (!cta.begin(a)) {
		if (a.fused)
			write_unscored(a);
		return;
	}
	const int tid = threadIdx.x, row = cta.row, L = cta.L, n = cta.n;
	auto page_of = [&](int i, int p) { return cta.page(a, i, p, kFp8Page); };
	auto pt_at = [&](int i) { return cta.pt_at(i); };

#pragma unroll
	for (int i = 0; i < S - 1; i++)
		ss_load<S>(page_of(i, pt_at(i)), sm, i);
	int pnext = pt_at(S - 1); /* the page-table read, a tile ahead */
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
	float own[kHold]; /* this thread's scores by tile, for the gather tail */

	for (int i = 0; i < n; i++) {
		const int slot = i % S, t = cta.x + i * cta.G;
		wait_groups<S - 2>(); /* this thread's copies of tile i */
		fence_async_smem();   /* ... before the MMA reads them */
		__syncthreads();      /* everyone's copies; tile i - 1 wholly scored: its slot is free */
		ss_load<S>(page_of(i + S - 1, pnext), sm, (i + S - 1) % S);
		pnext = pt_at(i + S);

		float d[32]; /* not cleared: k-step 0 runs with scale-d = 0 (D = A B), as CUTLASS's
			      * first MMA of a tile; the previous tile's reads of d are fenced
			      * before wgmma.fence, as the PTX rules ask */
		const uint64_t db = db0 + (uint64_t)(slot * (kTileBytes >> 4)); /* start field: 16 B units */
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
			s *= sm.ks[slot][tid];
			if (key < L) {
				s = s == 0.0f ? 0.0f : s; /* one zero: -0 sorts with +0 */
				scores[key] = s;
				atomicAdd(&sm.hist[idx_bucket_dev(s)], 1u);
			}
			if (i < kHold)
				own[i] = s; /* the gather tail's (local memory: a dynamic index) */
		}
		/* no barrier here: the next tile's first one frees this slot and red */
	}
	flush_hist(a, row, sm.hist);
	if (a.fused)
		publish(a, cta, sm.hist, sm.tail, own, tid < kTile ? tid : -1);
#endif
}

/* ---- MXFP4 keys: scan_rs_kernel ------------------------------------------------------- */

/* Key dim of k position p (0 .. 31) of k-step s, as the query is staged: lane c's nibble
 * word s of its scale group converts to dims 32c + 8s + 0..3 (k 4c .. 4c + 3) and + 4..7
 * (k 16 + 4c ..). */
__device__ __forceinline__ int rs_dim(int s, int p)
{
	return 32 * ((p & 15) >> 2) + 8 * s + 4 * (p >> 4) + (p & 3);
}

/* Warp `warp`'s 16 keys of a page into its ring slot (lane: 2 chunks, and lanes 0 - 3
 * one of the scales), then a commit, as ss_load. */
__device__ __forceinline__ void rs_load(const uint8_t *page, uint8_t *slot, int warp, int lane)
{
	if (page) {
		const uint32_t d = (uint32_t)__cvta_generic_to_shared(slot);
		const uint8_t *src = page + warp * kWarpKeys * kMxKey;
#pragma unroll
		for (int i = 0; i < kWarpKeys * kMxKey / 16 / 32; i++)
			cp16(d + 16 * (lane + 32 * i), src + 16 * (lane + 32 * i));
		if (lane < 4)
			cp16(d + kWarpKeys * kMxKey + 16 * lane,
			     page + kTile * kMxKey + warp * kWarpKeys * 4 + 16 * lane);
	}
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* The A registers of a tile from the warp's ring slot, as e4m3: k-step s uses a[4s ..
 * 4s + 3] = (key g, k 4c..4c+3), (key g + 8, same k), (key g, k 16 + 4c..), (key g + 8,
 * same k). And the scale of the key this lane scores (key g for c = 0, key g + 8 for c =
 * 1; the other lanes' is unused). A phase of 8 lanes reads keys r, r + 1 (128 bytes):
 * no bank conflicts. */
__device__ __forceinline__ void rs_read(const uint8_t *slot, int g, int c, uint32_t (&a)[16],
					float *kscale)
{
	const uint32_t *scw = reinterpret_cast<const uint32_t *>(slot + kWarpKeys * kMxKey);
#pragma unroll
	for (int h = 0; h < 2; h++) { /* key g + 8h */
		const int r = g + 8 * h;
		const uint4 w = *reinterpret_cast<const uint4 *>(slot + r * kMxKey + 16 * c);
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
	}
}

/* Each warp keeps S - 1 of its shares in flight ahead of the one being scored. */
template <int S>
__global__ void __launch_bounds__(kWgThreads, 4) scan_rs_kernel(const idx_wg_args a)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	static_assert(S >= 3, "a tile in flight beyond the next one");
	extern __shared__ uint8_t smem_raw[];
	RsSmem<S> &sm = smem_at<RsSmem<S>>(smem_raw);
	ScanCta cta;
	if (!cta.begin(a)) {
		if (a.fused)
			write_unscored(a);
		return;
	}
	const int tid = threadIdx.x, row = cta.row, L = cta.L, n = cta.n;
	const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
	auto page_of = [&](int i, int p) { return cta.page(a, i, p, kMxPage); };
	auto pt_at = [&](int i) { return cta.pt_at(i); };
	uint8_t(*ring)[kMxWarpBytes] = sm.ring[warp];

#pragma unroll
	for (int i = 0; i < S - 1; i++)
		rs_load(page_of(i, pt_at(i)), ring[i], warp, lane);
	int pnext = pt_at(S - 1); /* the page-table read, a tile ahead */
	{ /* the query (16-byte aligned: the dispatcher checks) as B, 4 bytes at a time in
	   * the keys' dim order; the histogram */
		const uint8_t *q = a.q8 + (size_t)row * kHeads * kRowB;
		for (int i = tid; i < kHeads * kRowB / 4; i += kWgThreads) {
			const int h = i >> 5, kk = 4 * (i & 31); /* head, k position (0 .. 127) */
			*reinterpret_cast<uint32_t *>(sm.q + sw128(h, kk >> 4) + (kk & 15)) =
				__ldg(reinterpret_cast<const uint32_t *>(q + h * kRowB +
									 rs_dim(kk >> 5, kk & 31)));
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
	float own[kHold]; /* this thread's scores by tile, for the gather tail */
	const int mykey = kWarpKeys * warp + g + 8 * c; /* lanes c < 2 score this key of a tile */

	uint32_t a0[16], a1[16];
	float ks0 = 0.0f, ks1 = 0.0f;
	wait_groups<S - 2>(); /* tile 0 */
	__syncwarp();
	rs_read(ring[0], g, c, a0, &ks0);
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
		rs_load(page_of(t, pnext), ring[t % S], warp, lane);
		pnext = pt_at(t + 1);
		wait_groups<S - 2>(); /* this lane's copies of tile i + 1 */
		__syncwarp();         /* ... and everyone's */
		if (i + 1 < n)
			rs_read(ring[(i + 1) % S], g, c, anext, knext);
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
		const int key = (cta.x + i * cta.G) * kTile + mykey;
		if (c < 2 && key < L) {
			float s = (c ? s1 : s0) * kcur;
			s = s == 0.0f ? 0.0f : s; /* one zero: -0 sorts with +0 */
			scores[key] = s;
			atomicAdd(&sm.hist[idx_bucket_dev(s)], 1u);
			if (i < kHold)
				own[i] = s; /* the gather tail's (local memory: a dynamic index) */
		}
	};
	for (int i = 0; i < n; i += 2) {
		step(i, a0, a1, ks0, &ks1);
		if (i + 1 < n)
			step(i + 1, a1, a0, ks1, &ks0);
	}
	flush_hist(a, row, sm.hist);
	if (a.fused)
		publish(a, cta, sm.hist, sm.tail, own, c < 2 ? mykey : -1);
#endif
}

} // namespace

/* The rings' depths. FP8: 2 tiles (one in flight while one is scored; H200, 1M keys,
 * cold L2: 24.4 us one row, 0.62 / 0.71 of the roofline at batch 8 / 32; 4 tiles 25.2
 * us, 0.58 / 0.65: fewer CTAs fit). MXFP4: 4 per warp (three shares in flight beyond the
 * one being scored; a power of two keeps the slot arithmetic cheap). */
constexpr int kSsStages = 2;
constexpr int kRsStages = 4;

template <typename K> static int wg_prepare(K kern, size_t smem)
{
	cudaFuncAttributes fa;
	return cudaFuncGetAttributes(&fa, kern) == cudaSuccess &&
	       cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) ==
		       cudaSuccess;
}

/* One wave: as many CTAs per request as the GPU holds at once, split over the requests.
 * With a->fused asked for, where each CTA holds at most kHold tiles, k and G are at most
 * kGK and the records fit the candidate list, the CTAs publish records and gather_kernel
 * follows as the scan's programmatic dependent (*fused says whether it does). */
template <typename K>
static int wg_launch(K kern, size_t smem, const idx_wg_args *a, int n_req, int max_limit,
		     cudaStream_t st, int *fused)
{
	int dev = 0, nsm = 0, per_sm = 0;
	cudaError_t e;
	if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
	    (e = cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
	    (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kWgThreads, smem)) !=
		    cudaSuccess)
		return (int)e;
	const long long slots = (long long)(nsm > 0 ? nsm : 1) * (per_sm > 0 ? per_sm : 1);
	const long long tiles = ((long long)max_limit + kTile - 1) / kTile;
	long long gx = slots / (n_req > 0 ? n_req : 1);
	gx = gx < 1 ? 1 : gx > tiles ? tiles : gx;
	idx_wg_args w = *a;
	w.gx = (int)gx;
	w.fused = a->fused && (tiles + gx - 1) / gx <= kHold && gx <= kGK && a->topk <= kGK &&
		  (size_t)gx * (kRecW / 2) + 2 <= a->cap;
	*fused = w.fused;
	kern<<<dim3((unsigned)gx, (unsigned)n_req), kWgThreads, smem, st>>>(w);
	if ((e = cudaGetLastError()) != cudaSuccess || !w.fused)
		return (int)e;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];
	cfg.gridDim = dim3((unsigned)n_req);
	cfg.blockDim = dim3(kGK);
	cfg.stream = st;
	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	cfg.attrs = at;
	cfg.numAttrs = 1;
	return (int)cudaLaunchKernelEx(&cfg, gather_kernel, w);
}

extern "C" int idx_wgmma_ready(void)
{
	static int ready = -1; /* benign race: every caller computes the same value */
	if (ready < 0) {
		int dev = 0, major = 0, minor = 0;
		ready = cudaGetDevice(&dev) == cudaSuccess &&
			cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
			cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
			major == 9 && minor == 0 &&
			wg_prepare(scan_ss_kernel<kSsStages>, smem_of<SsSmem<kSsStages>>()) &&
			wg_prepare(scan_rs_kernel<kRsStages>, smem_of<RsSmem<kRsStages>>());
		if (!ready)
			(void)cudaGetLastError(); /* "no kernel image" is not sticky: clear it */
	}
	return ready;
}

extern "C" int idx_wgmma_scan(const idx_wg_args *a, int n_req, int max_limit, void *stream,
			      int *fused)
{
	*fused = 0;
	if (!idx_wgmma_ready())
		return (int)cudaErrorInvalidDeviceFunction;
	cudaStream_t st = (cudaStream_t)stream;
	return a->mx ? wg_launch(scan_rs_kernel<kRsStages>, smem_of<RsSmem<kRsStages>>(), a, n_req,
				 max_limit, st, fused)
		     : wg_launch(scan_ss_kernel<kSsStages>, smem_of<SsSmem<kSsStages>>(), a, n_req,
				 max_limit, st, fused);
}
