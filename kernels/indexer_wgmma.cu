// Indexer scans on Hopper's FP8 tensor cores (wgmma), for FP8 or MXFP4 keys and FP8
// queries (strata_indexer_params.scan_wgmma; kernels.h). Built for sm_90a only: FP8
// mma.sync is emulated through fp16 on Hopper (measured slower than the bf16 scan), so
// FP8 tensor throughput needs the warpgroup MMA. One CTA = one warpgroup (4 warps) of one
// request, one query row; a tile is one page of 64 keys (B = 64); a CTA takes tiles x,
// x + G, x + 2G, ... (G: the CTAs an SM holds x SMs / requests; MXFP4 batches of one or
// two rows with many tiles a CTA: up to three waves of them, wg_shape; FP8 batches of two
// or four rows a CTA: a contiguous range of them, wg_ranges). Two kernels,
// each where it measured faster (H200, 1M keys, bench/results/2026-11-30-h200-s10):
//
// FP8 keys (scan_ss_kernel): both operands in shared memory, in the 128-byte-swizzled
// K-major layout (rows of 128 bytes, 8-row atoms of 1 KiB, 16-byte chunk j of row r at
// j ^ (r % 8)). The key tile is A, copied straight into that layout (a ring of tiles):
// with one row a CTA by every thread's cp.async, with two or four by one thread's TMA
// tensor copy (the page pool seen as rows of 128 bytes; ss_tma_mode says why each);
// the query's 64 heads x 128 bytes are B, staged once; so a tile is 4 wgmma
// m64n64k32 (k-steps of 32 bytes: the descriptors' start advances by 32 bytes inside the
// swizzled rows). Keys as the rows, as in the MXFP4 scan, put a key's 64 heads in its
// warp (lane (g, c): 16 heads of keys g and g + 8), so the epilogue is the MXFP4 one: 16
// heads summed in the lane, then 2 shuffles; no shared-memory exchange between warps and
// no second barrier a tile. (With the query as A, a warp held 16 heads of every key: 14
// shuffles, 28 selects, a barrier and a shared-memory sum over the warps, ~60 more
// instructions a tile.)
//
// MXFP4 keys (scan_rs_kernel): the keys are A, in registers, converted to e4m3 there
// (indexer_int.h idx_mx_*: exact for group scales within 14 octaves of the key's
// largest; nine instructions for eight codes). Warp w owns keys 16w .. 16w + 15 of a
// tile; lane (g, c) (g = lane / 4, c = lane % 4) holds scale group c (dims 32c .. 32c +
// 31) of keys 16w + g and 16w + g + 8. The query is B, staged once with its dims permuted
// as the keys' sit in the A registers (a dot product does not care about the order of its
// terms). Each raw page (4352 bytes) comes into a ring of S pages by one bulk copy
// (cp.async.bulk, completing on the slot's mbarrier), issued by the warps in turn; every
// thread waits on the slot's barrier, and the MMA's completion (which needs every warp's
// A registers, so every warp's reads of the slot) frees the slot for a later copy: no
// CTA-wide barrier in the tile loop. Epilogue: lane (g, c) sums twice the ReLU (x + |x|,
// on the FMA pipe) times the head weights over its heads 8j + 2c + e of both keys in a
// fixed order (two chains, then one add), then over the key's 4 lanes by a
// reduce-scatter (two shuffles), times half the key's scale. Two forms of the tile loop
// (scan_rs_kernel): the next tile converted while this one's MMA runs (the fused tail's
// one-row launches), or one set of A registers and 5 CTAs an SM (batches, kRsOneCtas).
//
// Rows (both scans): a request's 1 - 4 query rows (MTP drafts) are scored by the same
// CTA, on each key tile it reads: the R queries sit side by side in shared memory as B
// operands, and with R > 1 each row's MMA is issued before the previous row's epilogue
// (two accumulator sets, rows_overlapped), so a key tile is read from HBM and (MXFP4)
// converted once for all rows. Two FP8 rows are one MMA of N = 128 instead
// (wgmma_ss4_n128: both queries as one B), so the key tile is read from shared memory
// once, not once a row: 3 % faster a call (H200, bench/results/2026-12-03-h200-s47,
// runs 1 - 2: two rows 128K batch 32 59.8 - 60.5 us against 61.7 - 62.6, 512K batch 8
// 56.5 - 57.2 against 58.3 - 59.2, 512K batch 32 205 - 216 against 211 - 218;
// STRATA_IDX_N128=0 restores the two). Rows of a request with limit <= k are left to
// the filter, as a one-row request's are. With R > 1 the scan never runs the fused
// tail. H200, 1M keys, batch 8 (bench/results/2026-12-01-h200-s24, runs 2 - 4): 4 rows
// 204 - 210 us a call (FP8) and 217 (MXFP4), 0.71 - 0.77 of the roofline; 2 rows 109 -
// 111 and 126 (0.61 - 0.71); batch 1, 2 rows: 27.8 / 31.8 us; the default scan (s21,
// run 6): 410 / 414 us (4 rows), 224 / 220 (2).
//
// In both, every key's score has the same shape wherever it sits, so equal keys get
// equal scores; scores and the 2048-bucket histogram as the other scan writes them; and
// each page-table entry is read a tile ahead of the copy that needs it (an index, made
// an address only there). Hopper's FP8 tensor cores add with about 13 mantissa bits, so
// scores differ from the CPU twin's by more than the fp32 paths' (kernels.h, scan_wgmma).
#include <cuda.h> /* CUtensorMap (a type: kernels_int.h strata_dev_tmap_rows makes one) */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/indexer_int.h"
#include "kernels/kernels_int.h" /* strata_dev_tmap_rows */

#include <atomic>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

namespace {

constexpr int kWgThreads = 128;               /* one warpgroup */
constexpr int kTile = 64;                     /* keys per tile: one page of B = 64 */
constexpr int kRowB = 128;                    /* bytes per query head, per FP8 key */
constexpr int kTileBytes = kTile * kRowB;     /* 8 KiB */
constexpr int kHeads = 64;
constexpr int kFp8Page = kTile * (kRowB + 4); /* FP8 page: [64 x 128][64 x 4 fp32 scales] */
constexpr int kMxKey = 64;                    /* MXFP4 nibble bytes per key */
constexpr int kMxPage = kTile * (kMxKey + 4); /* MXFP4 page: [64 x 64 nibbles][64 x 4 ue8m0] */
constexpr int kWarpKeys = 16;                 /* keys of a tile per warp (keys as A) */
constexpr int kQDesc = kHeads * kRowB >> 4;   /* a query row in a descriptor's start field */
/* CTAs an SM by the rows R a CTA scores (1, 2 or 4), as launch bounds (the occupancy
 * query sizes the grid). One row: six (shared memory). With R rows a CTA holds R
 * queries (8 KiB each) and R histograms (hist_words), and two accumulator sets and R
 * rows' head weights in registers: R = 2 fits four CTAs by shared memory, three by
 * registers (the FP8 scan takes 128 registers under this bound, so it runs four; with
 * the MXFP4 scan four at 128 registers spilled and measured the same as three:
 * bench/results/2026-12-01-h200-s21; it now keeps the weights in shared memory and
 * runs four, kRsTwoCtas); R = 4 fits three by both. */
constexpr int kCtasOf[5] = { 0, 6, 3, 0, 3 };
/* Words of a row's shared histogram: one a bucket for one or two rows a CTA; with four,
 * two 16-bit counts a word (bucket b in half b % 2 of word b / 2), so that four rows
 * fit three CTAs an SM. A CTA then scores at most kMaxTiles16 tiles (wg_shape), 64
 * keys each: no count passes 65,535. Two rows packed too (session 21) measured slower
 * than one word a bucket (H200, 1M keys, two rows: batch 1 30.5 us against 27.7 with
 * FP8 keys, 34.3 against 31.8 with MXFP4; batch 8 within ~1 us; bench/results/
 * 2026-12-01-h200-s22, run 5), and again with the FP8 scan at five CTAs an SM (packed
 * histograms and weights in shared memory: batch 8 124 us against 109; s24, run 5): a
 * lane-varying add (1 << 16 (b & 1)) is not the warp-aggregated increment that one word
 * a bucket gets. */
constexpr bool hist_packed(int R)
{
	return R > 2;
}
constexpr int hist_words(int R)
{
	return hist_packed(R) ? IDX_BINS / 2 : IDX_BINS;
}
constexpr int kMaxTiles16 = 65535 / 64;

/* The fused tail's (scan_tail) shared words. */
struct TailSmem {
	uint32_t wsum[4]; /* the warps' sums of a block scan */
	int bin;          /* the row's threshold bucket b* (samp_tail: its bound) */
	int last;         /* this CTA arrived last at the row's barrier */
	uint32_t m;       /* samp_agg: the sample's size, then the bound's rank in its bucket */
	uint32_t nl;      /* samp_agg: samples in the bound's bucket */
};

/* FP8: the ring holds key tiles copied straight into the swizzled operand layout. R:
 * query rows a CTA scores (its request's, up to R), each with its query and histogram. */
template <int S, int R> struct SsSmem {
	uint8_t q[R][kHeads * kRowB];          /* the queries, swizzled; 1 KiB-aligned atoms */
	uint8_t b[S][kTileBytes];              /* key tiles, swizzled */
	float ks[S][kTile];                    /* the keys' fp32 scales */
	uint32_t hist[R][hist_words(R)];
	uint64_t bar[S];                       /* TMA form: the ring slots' barriers */
	TailSmem tail;
};
constexpr int kWtStride = 20; /* RsSmem::wt: floats a lane class, 16 weights + 4 of padding */
/* MXFP4: the queries (B, one a row), a ring of raw pages (16-byte aligned: bulk copies)
 * and the ring slots' barriers. */
template <int S, int R> struct RsSmem {
	uint8_t q[R][kHeads * kRowB];          /* the queries, swizzled; 1 KiB-aligned */
	uint8_t ring[S][kMxPage];
	uint64_t bar[S];
	/* the one-set loop at R <= 2: row r's head weights of lane class c, 80 bytes apart:
	 * at 64, classes c and c + 2 of a quarter warp's 16-byte reads shared banks, and
	 * Nsight Compute put a third of the one-row loop's shared-load wavefronts on those
	 * conflicts (H200, 1M batch 8: 82.7 - 82.8 us a call against 83.6 - 83.8;
	 * bench/results/2026-12-01-h200-s25) */
	float wt[R][4][kWtStride];
	uint32_t hist[R][hist_words(R)];
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

/* An L2 policy that evicts first what it tags: the keys, read once a call, so that they
 * do not push out of L2 the scores the scan writes and the filter reads back (at batch
 * 8 the keys are 140 - 280 MB, the scores 8 MB, the H200's L2 50 MB). H200, 1M keys,
 * batch 8, alternated with the kernels before it (bench/results/2026-11-30-h200-s15,
 * run 1): FP8 84.4 - 85.3 us a call against 87.3 - 87.5, MXFP4 90.9 - 91.3 against
 * 92.5 - 93.2. */
__device__ __forceinline__ uint64_t l2_evict_first()
{
	uint64_t pol;
	asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
	return pol;
}

__device__ __forceinline__ void cp16(uint32_t dst, const void *src, uint64_t pol)
{
	asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(dst),
		     "l"(src), "l"(pol)
		     : "memory");
}
/* The same without the cache hint. */
__device__ __forceinline__ void cp16_plain(uint32_t dst, const void *src)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void fence_async_smem()
{
	asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#include "kernels/indexer_mma_int.h" /* wgmma_ss4, wgmma_ss4_n128, wgmma_rs4 */

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

/* A key tile's R > 1 rows in turn, two accumulator sets deep: row r + 1's MMA is issued
 * (issue(d, r + 1): its wgmmas, one commit group) before row r's epilogue (epi(d, r))
 * runs, so each row's MMA runs under the previous row's epilogue. Every row's MMA is
 * issued, and waited for, unconditionally (ptxas serialises the wgmmas where they or
 * their waits sit under branches); epilogues run for rows r with lr[r] (block-uniform).
 * Every MMA issued here is complete on return. */
template <int R, typename Issue, typename Epi>
__device__ __forceinline__ void rows_overlapped(const int (&lr)[R], Issue issue, Epi epi)
{
	float d[2][32];
	issue(d[0], 0);
#pragma unroll
	for (int r = 0; r < R; r++) {
		if (r + 1 < R) {
			issue(d[(r + 1) & 1], r + 1);
			asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); /* row r's */
		} else {
			asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
		}
		reg_fence(d[r & 1]);
		if (lr[r])
			epi(d[r & 1], r);
	}
}

/* The dynamic shared memory, aligned to 1 KiB (the swizzle's atoms). */
template <typename T> __device__ __forceinline__ T &smem_at(uint8_t *raw)
{
	return *reinterpret_cast<T *>(
		raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(raw) & 1023)) & 1023));
}

/* What a scan CTA works on: request req's rows row .. row + R - 1 (those it has), their
 * limits lr[] (0: a row not scored here), the largest L, and its n tiles x, x + G, ...;
 * the page-table entries by tile (tile i of the CTA at pt[px + i G]). By default req =
 * blockIdx.y, x = blockIdx.x and G the grid's x; with idx_wg_args.ranges (wg_ranges)
 * x starts a contiguous range and G = 1. */
struct ScanCta {
	int req, row, L, x, G, n;
	int px; /* x, or 0 where pt starts at tile x (begin) */
	const int32_t *pt;
	/* Fills this in; false where the CTA has nothing to score (the caller returns). */
	template <int R, bool MOVE = (R <= 2)> /* MOVE: wg_ranges may apply (FP8: any R) */
	__device__ __forceinline__ bool begin(const idx_wg_args &a, int (&lr)[R])
	{
		/* with a.ranges == 2, block b (launch order) is part b / n_req of request
		 * b % n_req */
		const int nq = (int)gridDim.y, b = (int)(blockIdx.y * gridDim.x + blockIdx.x);
		req = MOVE && a.ranges == 2 ? b % nq : (int)blockIdx.y;
		row = a.req_rows[req];
		const int nr = a.req_rows[req + 1] - row;
		if (nr < 1)
			return false;
		if constexpr (R == 1) {
			L = a.row_limit[row];
			L = L < 0 ? 0 : (L > a.lim_cap ? a.lim_cap : L);
			if (L <= a.topk)
				return false; /* not scored: the filter writes 0 .. L-1 */
			lr[0] = L;
		} else {
			L = 0;
#pragma unroll
			for (int r = 0; r < R; r++) {
				int l = r < nr ? a.row_limit[row + r] : 0;
				l = l < 0 ? 0 : (l > a.lim_cap ? a.lim_cap : l);
				lr[r] = l > a.topk ? l : 0; /* else not scored (as above) */
				L = lr[r] > L ? lr[r] : L;
			}
			if (L == 0)
				return false;
		}
		const int tiles = (L + kTile - 1) / kTile;
		x = (int)blockIdx.x;
		pt = a.page_table + (size_t)req * a.max_pages;
		if constexpr (MOVE) {
			/* the stride a kernel parameter (no register, as gridDim.x), pt moved
			 * to tile x (x not held in the loop); in the four-row MXFP4 loop (168
			 * registers) the moved pt spilled, so that one stays as it was */
			G = a.tstride;
			if (a.ranges) { /* part p of P: tiles [tiles p / P, tiles (p + 1) / P) (G = 1) */
				/* the sampled tail's first CTA a row samples (samp_agg) */
				const long long part = (a.ranges == 2 ? b / nq : x) - (a.fused == 2),
						parts = gridDim.x - (a.fused == 2);
				x = (int)(tiles * part / parts);
				n = (int)(tiles * (part + 1) / parts) - x;
				if (n <= 0)
					return false;
			} else {
				if (x >= tiles)
					return false;
				n = (tiles - x + G - 1) / G;
			}
			pt += x;
			px = 0;
		} else {
			G = (int)gridDim.x;
			if (x >= tiles)
				return false;
			n = (tiles - x + G - 1) / G;
			px = x;
		}
		if (threadIdx.x == 0) {
			idx_trace(a.trace, IDX_T_SCAN0);
			idx_trace_cta(a.trace, 0, (unsigned long long)n);
		}
		return true;
	}
	/* The page index of this CTA's tile i (0 past the end); read a tile ahead of its
	 * copy, and made an address only there (page). */
	__device__ __forceinline__ int pt_at(int i) const
	{
		return i < n ? __ldg(pt + px + (size_t)i * G) : 0;
	}
	/* Tile i's page (index p) of pages of `bytes`, or null past the end. */
	__device__ __forceinline__ const uint8_t *page(const idx_wg_args &a, int i, int p,
						      int bytes) const
	{
		return i < n ? a.pages + (size_t)p * bytes : nullptr;
	}
};

/* The histogram copies a scan adds to (idx_wg_args.hcopy): IDX_HCOPIES for the fused
 * FP8 scan, whose CTAs' loops end within ~2.5 us of each other since the keys became A
 * (they ended ~6 us apart), so that their flushes, nearly all at once, queue a quarter
 * as deep on the central buckets' words; the last CTA sums the copies (find_bstar).
 * H200, 1M keys, one row (bench/results/2026-11-30-h200-s16): with one copy the flush
 * took ~3 us after the last loop end and the call 22.8 - 22.9 us (runs 3 - 4), with four
 * 21.9 us (run 5). One copy elsewhere: the fused MXFP4 scan's CTAs end ~4 us apart,
 * and there four copies cost 0.4 us (run 5: 22.8 - 22.9 us against 22.4 - 22.5); the
 * unfused scans' histogram is read by the filter. */
__device__ __forceinline__ int hist_copies(const idx_wg_args &a)
{
	return a.fused && !a.mx ? IDX_HCOPIES : 1;
}

/* The rows' histograms into the global ones (copy x % hist_copies), after every tile (the
 * scan's tail): row + r's where lr[r] (scored here). */
template <int R>
__device__ __forceinline__ void flush_hist(const idx_wg_args &a, int row,
					   const uint32_t (&h)[R][hist_words(R)], const int (&lr)[R])
{
	idx_pdl_trigger(); /* the flush below is short: let the filter launch */
	__syncthreads();
	if (threadIdx.x == 0) {
		idx_trace(a.trace, IDX_T_SCAN1);
		idx_trace_cta(a.trace, 1, 0);
	}
#pragma unroll
	for (int r = 0; r < R; r++) {
		if ((R > 1 && !lr[r]) || a.fused == 2) /* block-uniform; one row: scored, or the
							* CTA had returned; samp_tail: no histogram */
			continue;
		uint32_t *gh = a.hist + (size_t)(blockIdx.x % hist_copies(a)) * a.hcopy +
			       (size_t)(row + r) * IDX_BINS;
		for (int i = threadIdx.x; i < hist_words(R); i += kWgThreads) {
			const uint32_t v = h[r][i];
			if (!hist_packed(R)) {
				if (v)
					atomicAdd(&gh[i], v);
			} else { /* two 16-bit counts */
				if (v & 0xffffu)
					atomicAdd(&gh[2 * i], v & 0xffffu);
				if (v >> 16)
					atomicAdd(&gh[2 * i + 1], v >> 16);
			}
		}
	}
	idx_trace_fenced(a.trace, IDX_T_SCAN2); /* when the flush is performed */
	wait_groups<0>(); /* the trailing empty groups */
}

#include "kernels/indexer_tail_int.h" /* scan_tail, samp_agg, samp_tail */

/* The weights of lane (g, c)'s heads 8j + 2c + e in a keys-as-A MMA's accumulators, at
 * wt[2j + e] (score_tile). */
__device__ __forceinline__ void head_weights(const idx_wg_args &a, int row, int c, float (&wt)[16])
{
#pragma unroll
	for (int j = 0; j < 8; j++)
#pragma unroll
		for (int e = 0; e < 2; e++)
			wt[2 * j + e] = __ldg(a.w + (size_t)row * kHeads + 8 * j + 2 * c + e);
}

/* A tile's scores from the accumulators of a keys-as-A MMA (both scans): d[4j + e]: key
 * g, head 8j + 2c + e; d[4j + 2 + e]: key g + 8 (lane (g, c), wt[2j + e]: the weight of
 * head 8j + 2c + e). The ReLU: with MAX (the FP8 scan) fmaxf, on the integer pipe, which
 * that scan leaves idle (two and four rows at 1M keys, batch 8: ~1.5 us faster a call,
 * bench/results/2026-12-01-h200-s22, run 5); else (MXFP4, whose conversion's permutes
 * fill that pipe) on the FMA pipe as x + |x|, twice the ReLU exactly, kscale then being
 * the key's scale halved. The two forms' scores are the same to the bit for finite
 * products (every partial sum scaled by exactly 2). Two partial sums per key (heads with
 * j even, j odd; halves the dependent chain), then one add; then over the key's 4 lanes as a reduce-scatter: even
 * lanes keep key g's sum, odd lanes key g + 8's, pairs first, then pairs of pairs (the
 * same order of adds for every key). Lanes c < 2 (key g + 8c) with `in` store the score
 * at sp and (hon) count it in the shared histogram; returns it (lanes c < 2). */
template <bool PACKED = false, bool MAX = false>
__device__ __forceinline__ float score_tile(const float (&d)[32], const float (&wt)[16], int c,
					    float kscale, bool in, float *sp, uint32_t *hist,
					    bool hon = true)
{
	float p[2][2] = { { 0.0f, 0.0f }, { 0.0f, 0.0f } }; /* [key][j % 2] */
#pragma unroll
	for (int j = 0; j < 8; j++)
#pragma unroll
		for (int e = 0; e < 2; e++)
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const float x = d[4 * j + 2 * h + e];
				p[h][j & 1] = fmaf(wt[2 * j + e], MAX ? fmaxf(x, 0.0f) : __fadd_rn(x, fabsf(x)),
						   p[h][j & 1]);
			}
	const float s0 = p[0][0] + p[0][1], s1 = p[1][0] + p[1][1];
	const bool odd = c & 1;
	float v = (odd ? s1 : s0) + __shfl_xor_sync(0xffffffffu, odd ? s0 : s1, 1);
	v += __shfl_xor_sync(0xffffffffu, v, 2);
	const float sc = __fadd_rn(v * kscale, 0.0f); /* one zero: -0 + +0 is +0, as it sorts */
	if (c < 2 && in) {
		*sp = sc;
		if (hon) {
			const uint32_t b = idx_bucket_dev(sc);
			if (PACKED) /* hist_words: two 16-bit counts a word */
				atomicAdd(&hist[b >> 1], 1u << ((b & 1u) << 4));
			else
				atomicAdd(&hist[b], 1u);
		}
	}
	return sc;
}

/* ---- FP8 keys: scan_ss_kernel --------------------------------------------------------- */

/* One page's 64 keys and scales into ring slot `slot` (every thread 4 + (tid < 16)
 * copies), then a commit: one group per call, empty when `page` is null, so that "all
 * but the newest S - 2 groups done" always means "this tile's copies done". Rows tid / 8
 * + 16 i, chunk tid % 8: 16 rows on, both the swizzled place and the source move by 2 KiB
 * (the row's place in its 8-row atom stays). The thread's offsets, fixed for the CTA:
 * SsCopy. */
struct SsCopy {
	uint32_t dst; /* sw128(tid / 8, tid % 8): in a slot */
	uint32_t src; /* (tid / 8) row + (tid % 8) chunk: in a page */
	__device__ __forceinline__ SsCopy()
	    : dst(sw128(threadIdx.x >> 3, threadIdx.x & 7)),
	      src((threadIdx.x >> 3) * kRowB + (threadIdx.x & 7) * 16)
	{
	}
};
template <int S, int R>
__device__ __forceinline__ void ss_load(const uint8_t *page, SsSmem<S, R> &sm, int slot, uint64_t pol,
					const SsCopy &cp)
{
	const int tid = threadIdx.x;
	if (page) {
		const uint32_t b = (uint32_t)__cvta_generic_to_shared(sm.b[slot]) + cp.dst;
		const uint8_t *src = page + cp.src;
#pragma unroll
		for (int i = 0; i < kTileBytes / 16 / kWgThreads; i++)
			cp16(b + 2048 * i, src + 2048 * i, pol);
		if (tid < kTile * 4 / 16) /* no cache hint: with one, ptxas 13.0 made this copy
					   * (in a loop of 80 registers) an LDGSTS of two uniform
					   * operands that faults as an illegal instruction
					   * (bench/results/2026-12-01-h200-s17, run 3) */
			cp16_plain((uint32_t)__cvta_generic_to_shared(&sm.ks[slot][tid * 4]),
				   page + kTileBytes + tid * 16);
	}
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* N bytes from global src to shared dst by the bulk-copy engine, completing on barrier
 * bar (its expected bytes set by the caller), evicted first from L2 (the policy made here:
 * held across the MXFP4 batch loop it would cost 2 of its 80 registers). */
template <int N> __device__ __forceinline__ void bulk_copy(uint32_t dst, const void *src, uint32_t bar)
{
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
		     "[%0], [%1], %2, [%3], %4;\n" ::"r"(dst),
		     "l"(src), "n"(N), "r"(bar), "l"(l2_evict_first())
		     : "memory");
}

/* Waits for phase `parity` of a barrier (acquire: the bulk copies' bytes are visible). */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
	asm volatile("{\n\t.reg .pred done;\n"
		     "RS_WAIT_%=:\n\t"
		     "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
		     "@!done bra RS_WAIT_%=;\n}\n" ::"r"(bar),
		     "r"(parity)
		     : "memory");
}

/* The TMA form of ss_load (scan_ss_kernel's T): page p's 64 keys by one tensor copy
 * (the tensor map `tm`: the page pool as rows of 128 bytes, 66 a page, read 64 rows at a
 * time with the 128-byte swizzle, the operand layout sw128 describes) into the slot at
 * `dst`, and its 64 scales by one bulk copy to `ks`, both completing on the slot's
 * barrier. One thread issues it, after a barrier behind which every read of the slot
 * has returned (the MMAs waited for, the scales' loads used): no proxy fence. */
__device__ __forceinline__ void ss_tma(const CUtensorMap *tm, const uint8_t *pages, int p,
				       uint32_t dst, uint32_t ks, uint32_t bar)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
		     "n"(kFp8Page)
		     : "memory");
	asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
		     "l"(reinterpret_cast<uint64_t>(tm)), "r"(0), "r"(p * (kFp8Page / kRowB)), "r"(bar),
		     "l"(l2_evict_first())
		     : "memory");
	bulk_copy<kTile * 4>(ks, pages + (size_t)p * kFp8Page + kTileBytes, bar);
}

/* S - 1 tiles in flight ahead of the one being scored. Six CTAs an SM (shared memory
 * allows six), so 80 registers: the cap and the scales' plain copy (ss_load) took the
 * tile loop from 213 SASS instructions a warp to 206. H200, 1M keys (run 6 of
 * bench/results/2026-12-01-h200-s17): batch 8 79.6 - 79.8 us a call against 81.4; one
 * row 21.9 us, unchanged. */
/* SAMP: 0, the filter or the row barrier; 1, the sampled tail (samp_tail); 2, the same
 * with the staged filing (samp_staged: more tiles a CTA than samp_tail holds) */
template <int S, int R, bool T, int SAMP = 0>
__global__ void __launch_bounds__(kWgThreads, kCtasOf[R])
	scan_ss_kernel(const idx_wg_args a, const __grid_constant__ CUtensorMap tm)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	extern __shared__ uint8_t smem_raw[];
	SsSmem<S, R> &sm = smem_at<SsSmem<S, R>>(smem_raw);
	static_assert(!SAMP || R == 1, "the sampled tail scores one row a CTA");
	using Sm = SsSmem<S, R>;
	static_assert(offsetof(Sm, hist) % 8 == 0, "samp_staged's keys fit the histogram's words");
	if (SAMP && blockIdx.x == 0) { /* the row's sampling CTA */
		static_assert(sizeof(sm.b) >= kSampWords * 4, "the sample fits the ring");
		samp_agg<SAMP == 2>(a, reinterpret_cast<uint32_t *>(sm.b[0]), sm.tail);
		return;
	}
	ScanCta cta{}; /* value-initialised: nvcc warns that begin<R> reads it otherwise */
	int lr[R];
	if (!cta.begin<R, true>(a, lr))
		return;
	const int tid = threadIdx.x, row = cta.row, n = cta.n;
	auto page_of = [&](int i, int p) { return cta.page(a, i, p, kFp8Page); };
	auto pt_at = [&](int i) { return cta.pt_at(i); };
	const uint64_t pol = l2_evict_first();
	const SsCopy cp;

	const uint32_t b0 = (uint32_t)__cvta_generic_to_shared(sm.b[0]);
	const uint32_t ks0 = (uint32_t)__cvta_generic_to_shared(sm.ks[0]);
	const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(&sm.bar[0]);
	if constexpr (T) {
		if (tid == 0) {
#pragma unroll
			for (int s = 0; s < S; s++)
				asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar0 + 8u * s));
			asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#pragma unroll
			for (int i = 0; i < S - 1; i++)
				if (i < n)
					ss_tma(&tm, a.pages, pt_at(i), b0 + (uint32_t)(i * kTileBytes),
					       ks0 + (uint32_t)(i * kTile * 4), bar0 + 8u * i);
		}
	} else {
#pragma unroll
		for (int i = 0; i < S - 1; i++)
			ss_load(page_of(i, pt_at(i)), sm, i, pol, cp);
	}
	/* the page-table reads two tiles ahead of the copy that needs them: read one tile
	 * ahead, every warp waited for the load before its MMA (ptxas moves the index into
	 * a uniform register where it is loaded: s47 run 6's stall samples) */
	int pnext = pt_at(S - 1), pnext2 = pt_at(S);
	{ /* the queries (16-byte aligned: the dispatcher checks), the histograms */
#pragma unroll
		for (int r = 0; r < R; r++) {
			/* a row not scored here (its query may not exist) still feeds an MMA
			 * (rows_overlapped): zeros */
			const uint8_t *q = a.q8 + (size_t)(row + r) * kHeads * kRowB;
			const bool on = R == 1 || lr[r];
#pragma unroll
			for (int i = 0; i < kHeads * kRowB / 16 / kWgThreads; i++) {
				const int c = tid + i * kWgThreads, h = c >> 3, ch = c & 7;
				*reinterpret_cast<uint4 *>(sm.q[r] + sw128(h, ch)) =
					on ? __ldg(reinterpret_cast<const uint4 *>(q + h * kRowB + ch * 16))
					   : make_uint4(0, 0, 0, 0);
			}
		}
		if (!SAMP) /* every row's (the sampled tail keeps none) */
			for (int i = tid; i < R * hist_words(R); i += kWgThreads)
				(&sm.hist[0][0])[i] = 0;
		fence_async_smem(); /* the queries' generic stores, before the MMA reads them */
		if (T)
			__syncthreads(); /* the barriers initialised, before anyone waits on them */
	}
	const uint64_t db = wg_desc((uint32_t)__cvta_generic_to_shared(sm.q[0])); /* row r: + r kQDesc */
	const uint64_t da0 = wg_desc(b0); /* buffer 0 */
	const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
	float wt[R][16];
#pragma unroll
	for (int r = 0; r < R; r++)
		if (R == 1 || lr[r])
			head_weights(a, row + r, c, wt[r]);
	/* lanes c < 2 score key 16 warp + g + 8c of each tile: its slot, tile by tile (row r's
	 * at sp + r sstride) */
	const int kt = kWarpKeys * warp + g + 8 * (c & 1), kstep = cta.G * kTile;
	int key = cta.x * kTile + kt;
	float *sp = a.scores + (size_t)row * a.sstride + key;

	for (int i = 0; i < n; i++) {
		const int slot = i % S;
		/* TMA form: tile i + S - 1 into tile i - 1's slot by thread 0; with one row after
		 * the MMA is issued, so that warp 0's copy does not delay the warpgroup's MMA */
		const int pfill = pnext; /* tile i + S - 1's page (pnext moves on below) */
		auto refill = [&]() {
			if (tid == 0 && i + S - 1 < n) {
				const int sl = (i + S - 1) % S;
				ss_tma(&tm, a.pages, pfill, b0 + (uint32_t)(sl * kTileBytes),
				       ks0 + (uint32_t)(sl * kTile * 4), bar0 + 8u * (uint32_t)sl);
			}
		};
		if constexpr (T) {
			mbar_wait(bar0 + 8u * (uint32_t)slot, (uint32_t)(i / S) & 1u); /* tile i landed */
			__syncthreads(); /* tile i - 1 wholly scored: its slot is free */
			if (R > 1 && !(R == 2 && a.n128)) /* N = 128: after its MMA is issued */
				refill();
		} else {
			wait_groups<S - 2>(); /* this thread's copies of tile i */
			fence_async_smem();   /* ... before the MMA reads them */
			__syncthreads();      /* everyone's copies; tile i - 1 wholly scored: its slot is free */
			ss_load(page_of(i + S - 1, pnext), sm, (i + S - 1) % S, pol, cp);
		}
		pnext = pnext2;
		pnext2 = pt_at(i + S + 1);

		const uint64_t da = da0 + (uint64_t)(slot * (kTileBytes >> 4)); /* start field: 16 B units */
		/* row r's MMA (not cleared: k-step 0 runs with scale-d = 0 (D = A B), as CUTLASS's
		 * first MMA of a tile; the previous reads of d are fenced before wgmma.fence, as
		 * the PTX rules ask) */
		auto issue = [&](float(&d)[32], int r) {
			const uint64_t dq = db + (uint64_t)(r * kQDesc);
			reg_fence(d);
			asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
			wgmma_ss4(d, da, dq); /* k-step k: bytes 32k .. 32k + 31 of every row */
			asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
		};
		if (R == 1) {
			float d[32];
			issue(d, 0);
			if (T)
				refill();
			/* the keys' scales (score_tile with MAX: sums of the ReLUs), read while
			 * the MMA runs */
			const float ks = sm.ks[slot][kt];
			asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
			reg_fence(d);
			/* warp w holds keys 16w .. + 15 */
			const float s0 = score_tile<false, true>(d, wt[0], c, ks, key < lr[0], sp, sm.hist[0],
								 !SAMP);
			if (SAMP == 1 && i == 0)
				samp_put(a, row, warp, lane, key < lr[0], s0);
			if (SAMP == 2 && i < a.samp_tiles)
				samp_put_store(a, row, warp, lane, key < lr[0], s0, i, samp_cnt(a, i, n));
		} else if (R == 2 && a.n128) { /* both rows by one MMA of N = 128 */
			float d[64];
			reg_fence(d);
			asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
			wgmma_ss4_n128(d, da, db);
			asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
			if (T) /* warp 0's copy after the MMA, which needs every warp */
				refill();
			const float ks = sm.ks[slot][kt];
			asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
			reg_fence(d);
#pragma unroll
			for (int r = 0; r < 2; r++)
				if (lr[r])
					score_tile<hist_packed(R), true>(
						*reinterpret_cast<const float(*)[32]>(d + 32 * r), wt[r], c, ks,
						key < lr[r], sp + (size_t)r * a.sstride, sm.hist[r]);
		} else {
			const float ks = sm.ks[slot][kt];
			rows_overlapped(lr, issue, [&](const float(&d)[32], int r) {
				score_tile<hist_packed(R), true>(d, wt[r], c, ks, key < lr[r],
								 sp + (size_t)r * a.sstride, sm.hist[r]);
			});
		}
		key += kstep;
		sp += kstep;
		/* no barrier here: the next tile's first one frees this slot */
	}
	flush_hist(a, row, sm.hist, lr);
	if (SAMP == 2 && n * kTile > kHold * kWgThreads) /* more than samp_tail holds */
		samp_staged(a, cta, sm.tail, reinterpret_cast<unsigned long long *>(sm.hist[0]),
			    sizeof sm.hist / 8);
	else if (SAMP)
		samp_tail(a, cta, sm.tail);
	else if (R == 1 && a.fused == 1) /* one row a CTA (wg_shape) */
		scan_tail(a, cta, sm.tail);
#endif
}

/* ---- MXFP4 keys: scan_rs_kernel ------------------------------------------------------- */

/* Key dim of k position p (0 .. 31) of k-step s, as the query is staged: lane c's nibble
 * word s of its scale group converts to dims 32c + 8s + 0..3 (k 4c .. 4c + 3) and + 4..7
 * (k 16 + 4c ..). */
__host__ __device__ constexpr int rs_dim(int s, int p)
{
	return 32 * ((p & 15) >> 2) + 8 * s + 4 * (p >> 4) + (p & 3);
}

/* Its inverse for the query's staging: the k (0 .. 124, a multiple of 4) where the
 * 4-byte piece of dims 4u .. 4u + 3 (u = 0 .. 31) goes. */
__host__ __device__ constexpr int rs_k_of(int u)
{
	return 4 * ((u >> 3) + 4 * (u & 1) + 8 * ((u >> 1) & 3));
}

constexpr bool rs_k_of_inverts()
{
	for (int k = 0; k < kRowB; k += 4)
		if (rs_dim(k >> 5, k & 31) % 4 != 0 || rs_k_of(rs_dim(k >> 5, k & 31) / 4) != k)
			return false;
	return true;
}
static_assert(rs_k_of_inverts(), "the staging puts dims where the conversion reads them");

/* A page (64 keys: their nibbles, then their scales; one contiguous run) into a ring
 * slot by the bulk-copy engine, completing on the slot's barrier. One thread issues it;
 * the slot's earlier reads (every warp's, a tile or more back) are ordered before the
 * engine's writes by the proxy fence. */
__device__ __forceinline__ void rs_bulk(const uint8_t *page, uint32_t slot, uint32_t bar)
{
	asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
		     "n"(kMxPage)
		     : "memory");
	bulk_copy<kMxPage>(slot, page, bar);
}

/* The A registers of a tile from its ring slot (the warp's 16 keys: nibbles nib, scale
 * words scw), as e4m3: k-step s uses a[4s .. 4s + 3] = (key g, k 4c..4c+3), (key g + 8,
 * same k), (key g, k 16 + 4c..), (key g + 8, same k). And the scale of the key this lane
 * scores (key g for c = 0, key g + 8 for c = 1; the other lanes' is unused), halved: the
 * epilogue sums twice the ReLUs. A phase of 8 lanes reads keys r, r + 1 (128 bytes): no
 * bank conflicts. csel: prmt selector of scale byte c (rs_read, whole; below).
 *
 * rs_read in parts: the conversion tables of the warp's two keys (and the lane's key
 * scale), then each key half's conversion. The two-set loop waits for the previous
 * tile's MMA between the halves, so that the second half's integer work and that tile's
 * epilogue (the FMA pipe) form one block for ptxas to interleave: H200, one row, same
 * call (bench/results/2026-12-02-h200-s39, run 3) MXFP4 512K 14.9 - 15.0 us against
 * 15.2 - 15.3, 256K 13.8 against 13.9 - 14.0, 1M 18.7 - 18.8 against 18.7 - 18.9. */
struct RsTab {
	uint32_t lo[2], hi[2];
};
__device__ __forceinline__ RsTab rs_tables(const uint32_t *scw, int g, int c, uint32_t csel,
					   float *kscale)
{
	uint32_t m[2];
	int d[2];
#pragma unroll
	for (int h = 0; h < 2; h++) { /* key g + 8h */
		const uint32_t sc = scw[g + 8 * h];
		m[h] = idx_mx_max_scale(sc);
		d[h] = (int)__byte_perm(sc, 0, csel) - (int)m[h];
	}
	/* by arithmetic where every group of the warp's keys is within 11 octaves of its
	 * key's largest; else (rare) by idx_mx_lut, a branch the whole warp takes (a lane's
	 * own test cost a divergent region, BSSY / BSYNC, a key half and tile). With the
	 * key's half scale made directly (not 0.5f x idx_mx_key_scale, predicated for both
	 * halves) and score_tile's -0 folded by one add: H200, one row, same call (run 2)
	 * MXFP4 1M 18.7 - 18.8 us against 19.0 - 19.1, 128K batch 8 20.1 - 20.2 against
	 * 20.3 - 20.5; FP8 unchanged. */
	RsTab t;
#pragma unroll
	for (int h = 0; h < 2; h++)
		idx_mx_lut_normal(d[h], &t.lo[h], &t.hi[h]);
	if (!__all_sync(0xffffffffu, min(d[0], d[1]) >= -11))
#pragma unroll
		for (int h = 0; h < 2; h++)
			idx_mx_lut(d[h], &t.lo[h], &t.hi[h]);
	*kscale = idx_mx_key_half_scale(c ? m[1] : m[0]); /* used where c < 2 */
	return t;
}
/* key half h's 16 nibble bytes w (key g + 8h, lane c's group) as e4m3 */
__device__ __forceinline__ void rs_conv(uint4 w, const RsTab &t, int h, uint32_t (&a)[16])
{
	const uint32_t x[4] = { w.x, w.y, w.z, w.w };
#pragma unroll
	for (int s = 0; s < 4; s++)
		idx_mx_eight(x[s], t.lo[h], t.hi[h], &a[4 * s + h], &a[4 * s + 2 + h]);
}
__device__ __forceinline__ uint4 rs_nib(const uint8_t *nib, int g, int c, int h)
{
	return *reinterpret_cast<const uint4 *>(nib + (g + 8 * h) * kMxKey + 16 * c);
}
__device__ __forceinline__ void rs_half(const uint8_t *nib, int g, int c, const RsTab &t, int h,
					uint32_t (&a)[16])
{
	rs_conv(rs_nib(nib, g, c, h), t, h, a);
}
/* The whole tile (the one-set loops): every shared-memory read first, as before the
 * split (with the nibbles read after the tables the MXFP4 batch loop took 82.6 - 82.8 us
 * at 1M batch 8 against 82.1 - 82.5 in run 3; the same base build moved by ~0.5 us
 * between runs 3 and 4, so that is at the edge of the noise). */
__device__ __forceinline__ void rs_read(const uint8_t *nib, const uint32_t *scw, int g, int c,
					uint32_t csel, uint32_t (&a)[16], float *kscale)
{
	const uint4 w0 = rs_nib(nib, g, c, 0), w1 = rs_nib(nib, g, c, 1);
	const RsTab t = rs_tables(scw, g, c, csel, kscale);
	rs_conv(w0, t, 0, a);
	rs_conv(w1, t, 1, a);
}
/* S - 1 pages in flight ahead of the one being scored: a ring of S slots, each page one
 * bulk copy (a few instructions of one lane a tile, taken by the warps in turn; per-lane
 * 16-byte copies took ~85 of a warp's ~380 a tile). Two forms of the tile loop, measured
 * on an H200 at 1M keys (bench/results/2026-11-30-h200-s14, alternated with the same
 * run's other side):
 *  - ONE = false: tile i + 1 is read and converted into a second set of A registers while
 *    tile i's MMA runs (116 registers, 4 CTAs an SM). Where the scan runs the fused tail
 *    (one row, each CTA 8 tiles at most), whose CTAs each score a few tiles in turn: one
 *    row 23.2 us a call against 25.2 - 25.3 before this session.
 *  - ONE = true: one set of A registers, the MMA waited for before the next conversion;
 *    other CTAs' warps fill its latency, and the registers saved fit kRsOneCtas CTAs an
 *    SM (80 registers). Batch 8: 92.0 - 92.5 us a call against 110.5 - 110.7 before this
 *    session. (Run 3, still with per-warp copies: 6 CTAs an SM 105.3 - 106.0 us, 5 CTAs
 *    109.1 - 109.7, the old kernel 110.8 - 111.2; at one row this loop lost, 26.8 us
 *    against 25.3 - 25.4, hence the other form there.) Unrolled by the ring's four
 *    slots, so that each step's slot, barrier and copying warp are constants: ~250
 *    instructions a warp a tile against ~290 (a few spilled registers now sit in the
 *    loop), 1M batch 8 83.6 - 83.8 us a call against 86.0 - 86.3, batch 32 305.4 -
 *    307.9 against 311.9 - 313.8 (bench/results/2026-12-01-h200-s20, run 5). Five CTAs
 *    an SM since s49: the loop's 96 registers hold it without the spill (six CTAs, 80
 *    registers, spilled 8 / 40 bytes), 128K batch 32 48.0 - 48.3 us against 49.5 - 49.9,
 *    batch 64 82.0 - 82.5 against 84.3 - 84.8, 1M batch 8 78.0 - 78.2 against 79.9 -
 *    80.1 (bench/results/2026-12-03-h200-s49, run 1). */
constexpr int kRsOneCtas = 5;
/* Two rows a CTA, with the head weights in shared memory (122 registers, no spill): four
 * CTAs an SM, as shared memory allows (kCtasOf[2]: three, by the registers the weights
 * took). */
constexpr int kRsTwoCtas = 4;

template <int V> struct Ic { /* a compile-time int for the unrolled loop's steps */
	static constexpr int value = V;
};

template <int S, bool ONE, int R, bool SAMP = false>
__global__ void __launch_bounds__(kWgThreads, ONE ? (R == 1 ? kRsOneCtas : R == 2 ? kRsTwoCtas : kCtasOf[R]) : 1)
	scan_rs_kernel(const idx_wg_args a)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	static_assert(S >= 3 && (S & (S - 1)) == 0, "a tile in flight beyond the next one; cheap slots");
	static_assert(ONE || R == 1, "the two-set loop scores one row");
	extern __shared__ uint8_t smem_raw[];
	RsSmem<S, R> &sm = smem_at<RsSmem<S, R>>(smem_raw);
	static_assert(!SAMP || (!ONE && R == 1), "the sampled tail: the two-set loop, one row");
	if (SAMP && blockIdx.x == 0) { /* the row's sampling CTA */
		static_assert(sizeof(sm.ring) >= kSampWords * 4, "the sample fits the ring");
		samp_agg(a, reinterpret_cast<uint32_t *>(sm.ring[0]), sm.tail);
		return;
	}
	ScanCta cta{}; /* value-initialised: nvcc warns that begin<R> reads it otherwise */
	int lr[R];
	if (!cta.begin(a, lr))
		return;
	const int tid = threadIdx.x, row = cta.row, n = cta.n;
	const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
	const uint32_t ring0 = (uint32_t)__cvta_generic_to_shared(sm.ring[0]);
	const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(&sm.bar[0]);
	auto slot_of = [&](int t) { return ring0 + (uint32_t)(t & (S - 1)) * kMxPage; };
	auto bar_of = [&](int t) { return bar0 + (uint32_t)(t & (S - 1)) * 8u; };
	auto page_at = [&](int p) { return a.pages + (size_t)p * kMxPage; };

	/* Tiles 0 .. S - 2 are copied by thread 0 up front; tile t >= S - 1 by lane 0 of warp
	 * t % 4, in step t - S + 1 (the copies' instructions spread over the warps, which
	 * meet at every MMA). pmine: that lane's next tile's page index, read 4 tiles ahead. */
	const int t_first = (warp - (S - 1)) & 3; /* this warp's first copy: tile S - 1 + t_first */
	int pmine = 0;
	if (lane == 0)
		pmine = cta.pt_at(S - 1 + t_first);
	if (tid == 0) {
		/* the first pages' indices, every read in flight before the first copy (read
		 * one copy at a time, each copy waited for its own read: three L2 trips in a
		 * row, as the bulk copy takes its operands in uniform registers). Not in the
		 * one-row batch loop, at its 80-register cap: there ptxas spilled 4x more. */
		constexpr bool EARLY = !ONE || R > 1;
		int p0[S - 1];
#pragma unroll
		for (int i = 0; i < S - 1; i++)
			p0[i] = EARLY ? cta.pt_at(i) : 0;
#pragma unroll
		for (int s = 0; s < S; s++)
			asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar0 + 8u * s));
		asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#pragma unroll
		for (int i = 0; i < S - 1; i++)
			if (i < n)
				rs_bulk(page_at(EARLY ? p0[i] : cta.pt_at(i)), slot_of(i), bar_of(i));
	}
	constexpr bool WSM = ONE && R < 4; /* the head weights in shared memory (below) */
	{ /* the queries (16-byte aligned: the dispatcher checks) as B in the keys' dim order:
	   * a row's 16-byte loads in flight at once (one L2 trip a row; 4-byte loads in a
	   * loop took four), each load's four 4-byte pieces then stored at their k (rs_k_of);
	   * the histograms. A row not scored here (its query may not exist) still feeds an
	   * MMA (rows_overlapped): zeros. */
		constexpr int kQv = kHeads * kRowB / 16 / kWgThreads; /* loads a thread and row */
		float wv[R]; /* WSM: c = tid / 16, weight tid % 16 (head_weights' order), in flight
			      * with the queries' loads, under the same barrier */
#pragma unroll
		for (int r = 0; r < R; r++)
			wv[r] = WSM && tid < 4 * 16 && (R == 1 || lr[r])
					? __ldg(a.w + (size_t)(row + r) * kHeads + 8 * ((tid & 15) >> 1) +
						2 * (tid >> 4) + (tid & 1))
					: 0.0f;
#pragma unroll
		for (int r = 0; r < R; r++) {
			const uint4 *q = reinterpret_cast<const uint4 *>(a.q8 + (size_t)(row + r) * kHeads * kRowB);
			if constexpr (R == 4) { /* 4-byte loads: the 16-byte ones made this scan (at its
						 * register cap) spill into its tile loop */
				const uint32_t *q4 = reinterpret_cast<const uint32_t *>(q);
				for (int i = tid; i < kHeads * kRowB / 4; i += kWgThreads) {
					const int h = i >> 5, kk = 4 * (i & 31); /* head, k (0 .. 127) */
					*reinterpret_cast<uint32_t *>(sm.q[r] + sw128(h, kk >> 4) + (kk & 15)) =
						lr[r] ? __ldg(q4 + h * (kRowB / 4) + rs_dim(kk >> 5, kk & 31) / 4) : 0u;
				}
			} else {
				uint4 qv[kQv];
#pragma unroll
				for (int j = 0; j < kQv; j++)
					qv[j] = R == 1 || lr[r] ? __ldg(q + tid + j * kWgThreads) : make_uint4(0, 0, 0, 0);
#pragma unroll
				for (int j = 0; j < kQv; j++) {
					const int i = tid + j * kWgThreads, h = i >> 3; /* head h, dims 16 (i % 8) .. */
					const uint32_t w[4] = { qv[j].x, qv[j].y, qv[j].z, qv[j].w };
#pragma unroll
					for (int e = 0; e < 4; e++) {
						const int kk = rs_k_of(4 * (i & 7) + e);
						*reinterpret_cast<uint32_t *>(sm.q[r] + sw128(h, kk >> 4) + (kk & 15)) = w[e];
					}
				}
			}
		}
		if (WSM && tid < 4 * 16)
#pragma unroll
			for (int r = 0; r < R; r++)
				sm.wt[r][tid >> 4][tid & 15] = wv[r];
		if (!SAMP) /* every row's (the sampled tail keeps none) */
			for (int i = tid; i < R * hist_words(R); i += kWgThreads)
				(&sm.hist[0][0])[i] = 0;
		fence_async_smem(); /* the queries' generic stores, before the MMA reads them */
		__syncthreads();    /* ... and the barriers initialised, for everyone's waits */
	}
	const uint64_t db = wg_desc((uint32_t)__cvta_generic_to_shared(sm.q[0])); /* row r: + r kQDesc */
	/* The head weights: in registers, or (the one-set loop at one and two rows) in shared
	 * memory, read back before each row's epilogue (four 16-byte reads a lane, four
	 * addresses a warp). Held in registers across that loop they made its one-row form,
	 * at its 80-register cap, spill in every step (40 / 100 bytes), and the two-row form
	 * take 145 registers (three CTAs an SM; 122 and four without them). H200, 1M keys,
	 * alternated with the weights in registers (bench/results/2026-12-01-h200-s24, run
	 * 3): one row batch 8 / 32 82.9 - 83.5 / 298.0 - 300.9 us against 83.8 - 84.3 / 303.1 -
	 * 304.7; two rows 125.3 - 125.4 / 468.8 - 469.0 against 128.8 - 129.3 / 481.9 -
	 * 483.5. At four rows (153 registers against 168, three CTAs an SM either way) they
	 * cost 13 us at batch 8 (230 against 217), so there they stay in registers. */
	float wt[R][16];
#pragma unroll
	for (int r = 0; r < R; r++)
		if (!WSM && (R == 1 || lr[r]))
			head_weights(a, row + r, c, wt[r]);
	const uint32_t csel = 0x4440u + (uint32_t)c; /* scale byte c, zero-extended */
	/* lanes c < 2 score key 16 warp + g + 8c of each tile: its score slot, tile by tile */
	const int kstep = cta.G * kTile;
	int key = cta.x * kTile + kWarpKeys * warp + g + 8 * c; /* tile by tile, as finish runs */
	float *sp = a.scores + (size_t)row * a.sstride + key;

	/* tile t = i + S - 1 into tile i - 1's slot sl = t % S, by warp w = t % 4 (both
	 * constants where the loop is unrolled): every warp read that slot at least a step
	 * ago, and its values fed an MMA that this warp has waited for since (so every warp
	 * had issued it) */
	auto refill_to = [&](int i, int sl, int w) {
		const int t = i + S - 1;
		if (lane == 0 && w == warp) {
			if (t < n)
				rs_bulk(page_at(pmine), ring0 + (uint32_t)sl * kMxPage, bar0 + (uint32_t)sl * 8u);
			pmine = cta.pt_at(t + 4);
		}
	};
	auto refill = [&](int i) { refill_to(i, (i + S - 1) & (S - 1), (i + S - 1) & 3); };
	const uint8_t *nib0 = sm.ring[0] + warp * kWarpKeys * kMxKey;
	const uint32_t *scw0 =
		reinterpret_cast<const uint32_t *>(sm.ring[0] + kTile * kMxKey + warp * kWarpKeys * 4);
	/* tile i from its slot sl (i % S, a constant where the loop is unrolled) */
	auto read_from = [&](int i, int sl, uint32_t(&dst)[16], float *ks) {
		mbar_wait(bar0 + 8u * (uint32_t)sl, (uint32_t)(i / S) & 1u);
		rs_read(nib0 + sl * kMxPage, scw0 + sl * (kMxPage / 4), g, c, csel, dst, ks);
	};
	auto read = [&](int i, uint32_t(&dst)[16], float *ks) { read_from(i, i & (S - 1), dst, ks); };
	auto mma = [&](float(&d)[32], uint32_t(&acur)[16], int r) {
		const uint64_t dq = db + (uint64_t)(r * kQDesc);
		reg_fence(d);
		reg_fence(acur);
		asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
		wgmma_rs4(d, acur, dq);
		asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
	};
	auto mma_wait = [&](float(&d)[32], uint32_t(&acur)[16]) {
		asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
		reg_fence(d);
		reg_fence(acur);
	};
	/* tile i's scores for row r from its accumulators (score_tile); then (next) its key
	 * slots moved on */
	auto finish = [&](const float(&d)[32], float kcur, int r) -> float {
		float w[16];
		if (WSM) {
			const float4 *w4 = reinterpret_cast<const float4 *>(sm.wt[r][c]);
#pragma unroll
			for (int q = 0; q < 4; q++) {
				const float4 v = w4[q];
				w[4 * q] = v.x, w[4 * q + 1] = v.y, w[4 * q + 2] = v.z, w[4 * q + 3] = v.w;
			}
		}
		return score_tile<hist_packed(R)>(d, WSM ? w : wt[r], c, kcur, key < lr[r],
						  sp + (size_t)r * a.sstride, sm.hist[r], !SAMP);
	};
	auto next = [&]() {
		key += kstep;
		sp += kstep;
	};

	if (ONE) {
		/* Tile i = 4j + U: its slot U, its copy's warp and slot fixed by U (S = 4), so
		 * the loop is unrolled by four and those are constants. */
		static_assert(S == 4, "one slot per unrolled step");
		auto step = [&](auto u, int i) {
			constexpr int U = decltype(u)::value;
			refill_to(i, (U + S - 1) & (S - 1), (U + S - 1) & 3);
			uint32_t acur[16];
			float kcur = 0.0f;
			read_from(i, U, acur, &kcur);
			if (R == 1) {
				float d[32]; /* not cleared: k-step 0 runs with scale-d = 0 */
				mma(d, acur, 0);
				mma_wait(d, acur);
				finish(d, kcur, 0);
			} else { /* the rows in turn, on the same A registers */
				rows_overlapped(lr, [&](float(&d)[32], int r) { mma(d, acur, r); },
						[&](const float(&d)[32], int r) { finish(d, kcur, r); });
				reg_fence(acur); /* every MMA done: the next read may write them */
			}
			next();
		};
		int i = 0;
		for (; i + 4 <= n; i += 4) {
			step(Ic<0>{}, i);
			step(Ic<1>{}, i + 1);
			step(Ic<2>{}, i + 2);
			step(Ic<3>{}, i + 3);
		}
		if (i < n)
			step(Ic<0>{}, i);
		if (i + 1 < n)
			step(Ic<1>{}, i + 1);
		if (i + 2 < n)
			step(Ic<2>{}, i + 2);
	} else {
		uint32_t a0[16], a1[16];
		float ks0 = 0.0f, ks1 = 0.0f;
		read(0, a0, &ks0);
		/* Tile i: its MMA from acur, while tile i + 1 is read into anext */
		auto step = [&](int i, uint32_t(&acur)[16], uint32_t(&anext)[16], float kcur,
				float *knext) {
			float d[32];
			mma(d, acur, 0);
			refill(i);
			/* tile i + 1's conversion, its second half after tile i's MMA is waited
			 * for, beside tile i's epilogue (rs_tables; the epilogue in each branch,
			 * so that it shares the block). The last tile converts nothing: a CTA of
			 * one tile (32K entries) took 0.2 us longer converting an empty slot. */
			float s0;
			if (i + 1 < n) {
				const int sl = (i + 1) & (S - 1);
				mbar_wait(bar0 + 8u * (uint32_t)sl, (uint32_t)((i + 1) / S) & 1u);
				const uint8_t *nib = nib0 + sl * kMxPage;
				const RsTab t = rs_tables(scw0 + sl * (kMxPage / 4), g, c, csel, knext);
				rs_half(nib, g, c, t, 0, anext);
				mma_wait(d, acur);
				rs_half(nib, g, c, t, 1, anext);
				s0 = finish(d, kcur, 0);
			} else {
				mma_wait(d, acur);
				s0 = finish(d, kcur, 0);
			}
			if (SAMP && i == 0)
				samp_put(a, row, warp, lane, key < lr[0], s0);
			next();
		};
		for (int i = 0; i < n; i += 2) {
			step(i, a0, a1, ks0, &ks1);
			if (i + 1 < n)
				step(i + 1, a1, a0, ks1, &ks0);
		}
	}
	flush_hist(a, row, sm.hist, lr);
	if (SAMP)
		samp_tail(a, cta, sm.tail);
	else if (R == 1 && a.fused == 1)
		scan_tail(a, cta, sm.tail);
#endif
}

} // namespace

/* The rings' depths. FP8: 2 tiles (one in flight while one is scored; H200, 1M keys,
 * cold L2: 24.4 us one row, 0.62 / 0.71 of the roofline at batch 8 / 32; 4 tiles 25.2
 * us, 0.58 / 0.65: fewer CTAs fit). MXFP4: 4 pages (three in flight beyond the one
 * being scored; a power of two keeps the slot arithmetic cheap). */
constexpr int kSsStages = 2;
constexpr int kRsStages = 4;

template <typename K> static int wg_prepare(K kern, size_t smem)
{
	cudaFuncAttributes fa;
	return cudaFuncGetAttributes(&fa, kern) == cudaSuccess &&
	       cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) ==
		       cudaSuccess;
}

/* Waves of the MXFP4 one-set loop (wg_shape's max_waves). An SM's warp schedulers serve
 * its older CTAs first, so a wave's CTAs end one after another (1M keys, batch 32, one
 * row: an SM's six CTAs ~20 us apart, its last ~100 us after its first; two rows: four
 * CTAs at ~308, 338, 375 and 413 us), and with one wave the SM runs ever fewer of them
 * towards the end (Nsight Compute, s25: 31 % achieved occupancy of 37.5 %). Tiles
 * handed out at run time do not help: the CTAs of one request are equally old on their
 * SMs, so they end together and the requests in launch order (s27 run 3, slower by the
 * loop's added work). More CTAs, each with fewer tiles, keep the SMs full until the
 * last wave: where a CTA of one wave would score at least kWaveTiles * w tiles, w waves
 * (up to kRsWaves). H200, 1M keys, batch 32, alternated with one wave (bench/results/
 * 2026-12-01-h200-s27, runs 4 - 5; graph us): one row 269 - 285 against 287 - 293, two
 * rows 445 - 462 against 456 - 470; 512K batch 32 two rows (two waves) 231.6 against
 * 236.9 - 238.1, 1M batch 64 one / two rows 566 - 568 / 896 - 902 against 582 - 583 /
 * 912 - 913 (run 6). Fewer tiles a CTA lost (two waves at 1M batch 8 two rows, 31
 * tiles a CTA: 125 us against 123; at 128K batch 32, 11 - 16 tiles: 54 against 51): a
 * CTA's staging and histogram flush, repeated; so did four rows (four histograms a CTA:
 * 512K batch 32, three waves, 431 - 433 against 420 - 425; 1M within 1 %), which stay
 * at one wave, as does FP8 (memory bound: its CTAs end closer together; two waves:
 * within 1 % at batch 32, slower at batch 8). STRATA_IDX_WAVE_TILES (tests) sets
 * kWaveTiles. */
constexpr int kRsWaves = 3, kWaveTiles = 56;

static int wave_tiles(void) /* read at each batch launch (tests change it) */
{
	const char *e = getenv("STRATA_IDX_WAVE_TILES");
	const int v = e ? atoi(e) : 0;
	return v > 0 ? v : kWaveTiles;
}

/* Tile ranges of the unfused scans of one or two rows a CTA, and of four FP8 rows
 * (idx_wg_args.ranges; ScanCta::begin's MOVE): 0, a CTA scores tiles x, x + G, ... (G
 * CTAs a request); 1, a contiguous 1 / G of them; 2, the same with block b (launch
 * order) serving request b % n_req, part b / n_req (a request's CTAs spread over the
 * launch, not side by side). 2 for two and four FP8 rows a CTA, else 0. H200, one
 * binary, the modes alternated (bench/results/2026-12-02-h200-s28, run 5; graph us,
 * eff): FP8 two rows 1M batch 8 107.2 - 107.6 (0.73 - 0.75) against 111.7 - 112.2 (0.71
 * - 0.73), batch 32 414 - 453 (0.70 - 0.77) against 466 - 472 (0.68 - 0.69), batch 64
 * 889 - 892 (0.72) against 930 - 932 (0.68 - 0.69); 512K batch 32 208 - 227 against 229
 * - 238; 128K batch 32 62.0 - 62.2 against 64.9 - 65.0. FP8 four rows (run 7): 1M batch
 * 8 194.5 - 195.3 (0.81 - 0.82) against 204.8 - 206.2 (0.77), batch 32 780 - 790 (0.80 -
 * 0.81) against 830 - 831 (0.76); 512K batch 32 384 - 404 against 403 - 423. Mode 1
 * gained as much at batch 8, less at batch 32 (451 - 458). One FP8 row lost 1 - 2 %
 * (batch 8: 81.5 - 82.0 against 80.0 - 80.4), MXFP4 one and two rows moved within the
 * noise or lost (batch 32 one row, both modes, 294 - 300 against 280 - 298): those stay
 * strided. Why two and four FP8 rows gain is not measured: s23's Nsight Compute put 23 %
 * of the FP8 two-row scan's stall samples on the next tile's page-index read (an L2 trip
 * a tile), and in a range 32 consecutive indices share one 128-byte line. It is not the
 * bench's pages lying in order in memory: with them scattered (`bench indexer --pages
 * shuffled`) the gain held, 1M batch 8 two rows 106.3 - 106.8 against 111.5 - 111.6,
 * batch 32 four rows 767 - 775 against 822 - 833 (bench/results/2026-12-02-h200-s29,
 * run 1). (Ranges weighted by the CTAs' age on their SMs, the
 * oldest taking 1.05 - 1.3 times the mean: no better than equal ranges at two FP8 rows,
 * slower elsewhere the more weight, up to 8 % at MXFP4 batch 8; runs 2 - 4.)
 * STRATA_IDX_RANGES=0 / 1 / 2 (read at each batch launch; tests) sets the mode for both
 * formats. */
static int wg_ranges(const idx_wg_args *a)
{
	if (a->rows > 2 && a->mx)
		return 0; /* the four-row MXFP4 scan keeps its strided tiles (begin's MOVE) */
	const char *e = getenv("STRATA_IDX_RANGES");
	if (e && *e)
		return atoi(e) == 1 ? 1 : atoi(e) == 2 ? 2 : 0;
	return !a->mx && a->rows >= 2 ? 2 : 0;
}

/* The sampled tail's scan CTAs an SM at most, more where a row's scores need them (kHold
 * a thread: 2 an SM up to 512K tokens, 131,072 entries; 4 at 1M). Fewer CTAs score more
 * tiles each, and the sample, its bound and the list come from fewer of them: FP8 batch
 * 1 at 1M 19.3 - 19.4 us at 4 against 20.6 - 21.0 at 6 (as many as fit) and 19.7 - 20.0
 * at 5; at 256K 14.0 - 14.1 at 2 against 15.1 - 15.2 at 4, 512K 15.8 - 15.9 against
 * 16.4; MXFP4 (4 fit) 256K 13.8 against 15.2, 512K 15.9 against 16.6
 * (bench/results/2026-12-02-h200-s36). */
constexpr int kSampPerSm = 2;

/* The staged filing (samp_staged, scan_ss_kernel's SAMP 2), where one wave's sampled-tail
 * CTAs would each score more than samp_tail holds (FP8 keys, one row a request: 1M and
 * 512K batch 8, 128K batch 32 and 64): each CTA samples its first samp_tiles tiles, the
 * fewest that keep one key in kStagedEvery of the longest row (r >= 3 k / 64 = 24 at k =
 * 512 with samp_x 3, so that a list too short, which costs the whole-row select, stays
 * below ~1e-6 a row), at most kStagedTiles (its slots); else the filter path. The fewest
 * tiles bring the sample in, and T out, soonest: 16 tiles a CTA gained nothing at 512K
 * batch 8. H200, one binary, graph us (bench/results/2026-12-03-h200-s42, run 2): FP8 512K
 * batch 8 43.4 - 43.5 against the filter path's 46.1 (eff 0.74 against 0.70), 1M batch 8
 * 77.0 - 77.3 against 78.0 - 78.1, 128K batch 32 45.1 against 47.9 (0.71 against 0.67),
 * batch 64 83.7 against 84.6. MXFP4 (the one-set loop at its 80-register cap, where the
 * staged code spilled) lost 2 - 13 us (runs 0 - 1): not staged. STRATA_IDX_SAMP_STAGED=0
 * turns it off, STRATA_IDX_SAMP_TILES=n fixes the tiles sampled (A/Bs; read at each
 * launch). */
constexpr int kStagedTiles = 16, kStagedEvery = 64;

static bool staged_on(void)
{
	const char *e = getenv("STRATA_IDX_SAMP_STAGED");
	return !(e && *e == '0');
}

/* As many CTAs per request as the GPU holds at once, split over the requests (*gx a
 * request), times up to max_waves waves (kRsWaves). With a->fused asked for, the tail
 * runs where one wave's CTAs each hold at most kHold * 128 scores (*fuse says whether
 * it does), or, with staged_ok, where the staged filing can run (*samp_tiles: the tiles
 * each CTA samples; 0 where it does not stage). */
template <typename K>
static cudaError_t wg_shape(K kern, size_t smem, const idx_wg_args *a, int n_req, int max_limit,
			    long long *gx_out, int *fuse, int max_waves = 1, int *ranges = nullptr,
			    bool staged_ok = false, int *samp_tiles = nullptr)
{
	int dev = 0, nsm = 0, per_sm = 0;
	cudaError_t e;
	if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
	    (e = cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
	    (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kWgThreads, smem)) !=
		    cudaSuccess)
		return e;
	const long long tiles = ((long long)max_limit + kTile - 1) / kTile;
	const long long nr = n_req > 0 ? n_req : 1, sms = nsm > 0 ? nsm : 1;
	auto holds = [&](long long f) { /* f CTAs a row hold its scores (kHold a thread) */
		return f >= 1 && (tiles + f - 1) / f * kTile <= kHold * kWgThreads;
	};
	if (a->fused == 2) { /* the sampled tail: at most kSampPerSm scan CTAs an SM */
		const char *cap = getenv("STRATA_IDX_SAMP_PER_SM"); /* A/Bs; 0: as many as fit */
		int c = cap && *cap ? atoi(cap) : kSampPerSm;
		while (c > 0 && c < per_sm && !holds(sms * c / nr - 1)) /* one a row samples */
			c++;
		per_sm = c > 0 && c < per_sm ? c : per_sm;
	}
	const long long slots = sms * (per_sm > 0 ? per_sm : 1);
	long long gx = slots / nr, waves = 1;
	if (max_waves > 1 && gx > 0) {
		waves = (tiles + gx - 1) / gx / wave_tiles(); /* a one-wave CTA's tiles */
		waves = waves < 1 ? 1 : waves > max_waves ? max_waves : waves;
		gx = waves * slots / nr;
	}
	if (hist_packed(a->rows) && gx < (tiles + kMaxTiles16 - 1) / kMaxTiles16) /* 16-bit counts */
		gx = (tiles + kMaxTiles16 - 1) / kMaxTiles16;
	gx = gx < 1 ? 1 : gx > tiles ? tiles : gx;
	/* the sampled tail: one CTA a row fewer scans, for the row's sampling CTA */
	long long fx = a->fused == 2 ? slots / nr - 1 : gx;
	fx = fx > tiles ? tiles : fx;
	/* the staged filing: ns tiles sampled a CTA, each CTA scoring at least per */
	const long long per = fx >= 1 ? tiles / fx : 0,
			nmin = fx >= 1 ? (tiles * kTile + fx * IDX_SAMP_KEYS * kStagedEvery - 1) /
						 (fx * IDX_SAMP_KEYS * kStagedEvery)
				       : 0;
	const char *nse = getenv("STRATA_IDX_SAMP_TILES");
	long long ns = nse && atoi(nse) > 0 ? atoi(nse) : nmin;
	ns = ns > per ? per : ns > kStagedTiles ? kStagedTiles : ns;
	const bool staged = a->fused == 2 && staged_ok && !holds(fx) && staged_on() && ns >= 1 &&
			    ns * fx * IDX_SAMP_KEYS * kStagedEvery >= tiles * kTile &&
			    fx * 64 * 2 <= (IDX_SAMPW - IDX_SAMP_STORE) * 4; /* the slots */
	*fuse = a->fused && waves == 1 && a->rows == 1 && (holds(fx) || staged) && fx <= IDX_FLAGS &&
			(a->fused != 2 || fx * IDX_SAMP_KEYS <= kSampWords)
		? a->fused
		: 0;
	if (samp_tiles)
		*samp_tiles = *fuse == 2 && !holds(fx) ? (int)ns : 0;
	if (*fuse)
		gx = fx;
	*gx_out = gx;
	if (ranges) /* scan_tail needs the strided tiles, samp_tail contiguous ranges */
		*ranges = *fuse == 2 ? 1 : !*fuse && gx > 1 ? wg_ranges(a) : 0;
	return cudaSuccess;
}

template <typename T> struct ident {
	using type = T;
};

/* The scan in wg_shape's shape; with the fused tail the launch is cooperative: every CTA
 * resident at once, or the launch fails (and runs unfused). kern_s: the same kernel's
 * instance with the sampled tail (its SAMP), which runs where wg_shape fuses it (2); with
 * none (null) a sampled tail asked for runs the row barrier instead. kern_st (or null):
 * the instance with the staged filing, where wg_shape stages. The sampled tail's code
 * lives only in its own instances, so the other paths keep their code as it was. */
template <typename K, typename... X>
static int wg_launch(K kern, typename ident<K>::type kern_s, typename ident<K>::type kern_st,
		     size_t smem, const idx_wg_args *a, int n_req, int max_limit, cudaStream_t st,
		     int *fused, int max_waves = 1, const X &...extra)
{
	long long gx = 1;
	int fuse = 0;
	int ranges = 0, ns = 0;
	idx_wg_args w = *a;
	if (w.fused == 2 && !kern_s)
		w.fused = 1;
	/* the shape (its occupancy) of the instance that runs */
	cudaError_t e = wg_shape(w.fused == 2 ? kern_s : kern, smem, &w, n_req, max_limit, &gx, &fuse,
				 max_waves, &ranges, kern_st != nullptr, &ns);
	if (e == cudaSuccess && ns > 0) { /* staged: the same shape for its own instance */
		long long gx2 = 1;
		int fuse2 = 0, ranges2 = 0, ns2 = 0;
		e = wg_shape(kern_st, smem, &w, n_req, max_limit, &gx2, &fuse2, max_waves, &ranges2, true, &ns2);
		if (e == cudaSuccess && (gx2 != gx || fuse2 != fuse || ns2 != ns)) { /* the filter path */
			ns = 0;
			e = wg_shape(kern, smem, &w, n_req, max_limit, &gx, &fuse, max_waves, &ranges);
		}
	}
	if (e != cudaSuccess)
		return (int)e;
	w.fused = fuse;
	w.samp_tiles = ns;
	if (ns > 0)
		kern_s = kern_st;
	w.ranges = ranges;
	w.tstride = ranges ? 1 : (int)gx;
	{
		const char *e = getenv("STRATA_IDX_N128"); /* =0: two MMAs (A/Bs) */
		w.n128 = !(e && *e == '0');
	}
	*fused = w.fused;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];
	cfg.gridDim = dim3((unsigned)(gx + (w.fused == 2)), (unsigned)n_req); /* + samp_agg's */
	cfg.blockDim = dim3(kWgThreads);
	cfg.dynamicSmemBytes = smem;
	cfg.stream = st;
	at[0].id = cudaLaunchAttributeCooperative;
	at[0].val.cooperative = 1;
	cfg.attrs = at;
	cfg.numAttrs = w.fused ? 1 : 0;
	e = cudaLaunchKernelEx(&cfg, w.fused == 2 ? kern_s : kern, w, extra...);
	if (e == cudaErrorCooperativeLaunchTooLarge) {
		/* fewer SMs than the occupancy query saw (MPS, a partitioned GPU): the
		 * unfused tail needs no co-residency */
		(void)cudaGetLastError();
		w.fused = 0;
		*fused = 0;
		cfg.numAttrs = 0;
		cfg.gridDim.x = (unsigned)gx; /* no sampling CTA (its ranges serve unfused) */
		e = cudaLaunchKernelEx(&cfg, kern, w, extra...);
	}
	return (int)e;
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
			wg_prepare(scan_ss_kernel<kSsStages, 1, false>, smem_of<SsSmem<kSsStages, 1>>()) &&
			wg_prepare(scan_ss_kernel<kSsStages, 2, false>, smem_of<SsSmem<kSsStages, 2>>()) &&
			wg_prepare(scan_ss_kernel<kSsStages, 4, false>, smem_of<SsSmem<kSsStages, 4>>()) &&
			wg_prepare(scan_ss_kernel<kSsStages, 1, true>, smem_of<SsSmem<kSsStages, 1>>()) &&
			wg_prepare(scan_ss_kernel<kSsStages, 2, true>, smem_of<SsSmem<kSsStages, 2>>()) &&
			wg_prepare(scan_ss_kernel<kSsStages, 4, true>, smem_of<SsSmem<kSsStages, 4>>()) &&
			wg_prepare(scan_ss_kernel<kSsStages, 1, false, 1>, smem_of<SsSmem<kSsStages, 1>>()) &&
			wg_prepare(scan_ss_kernel<kSsStages, 1, true, 1>, smem_of<SsSmem<kSsStages, 1>>()) &&
			wg_prepare(scan_ss_kernel<kSsStages, 1, false, 2>, smem_of<SsSmem<kSsStages, 1>>()) &&
			wg_prepare(scan_ss_kernel<kSsStages, 1, true, 2>, smem_of<SsSmem<kSsStages, 1>>()) &&
			wg_prepare(scan_rs_kernel<kRsStages, false, 1, true>, smem_of<RsSmem<kRsStages, 1>>()) &&
			wg_prepare(scan_rs_kernel<kRsStages, false, 1>, smem_of<RsSmem<kRsStages, 1>>()) &&
			wg_prepare(scan_rs_kernel<kRsStages, true, 1>, smem_of<RsSmem<kRsStages, 1>>()) &&
			wg_prepare(scan_rs_kernel<kRsStages, true, 2>, smem_of<RsSmem<kRsStages, 2>>()) &&
			wg_prepare(scan_rs_kernel<kRsStages, true, 4>, smem_of<RsSmem<kRsStages, 4>>());
		if (!ready)
			(void)cudaGetLastError(); /* "no kernel image" is not sticky: clear it */
	}
	return ready;
}

/* The FP8 scan's tile copies (scan_ss_kernel's T): by TMA where a CTA scores two or four
 * rows, per-thread cp.async with one. The TMA loop issues 131 / 130 SASS instructions a
 * tile at two / four rows against 146.5 / 141 (163 against 203 at one row). H200,
 * alternated in one binary (bench/results/2026-12-02-h200-s30, run 4), graph us,
 * cp.async -> TMA: 1M batch 8 two rows 105.7 -> 104.7, four 195.2 - 198.4 -> 189.7 -
 * 190.4; 512K / 128K batch 8 two rows 58.3 / 27.6 -> 57.4 / 27.1; one row lost (1M batch
 * 8 79.0 -> 82.3): its short tile does not hide the engine's longer latency with one
 * tile in flight. STRATA_IDX_SS_TMA=0 / 1 forces one form everywhere (read at each
 * launch: tests and A/Bs set it). */
static int ss_tma_mode(void)
{
	const char *e = getenv("STRATA_IDX_SS_TMA");
	return e && (*e == '0' || *e == '1') ? *e - '0' : -1;
}

/* The tensor map of ss_tma over the page pool at `pages`: rows of 128 bytes (66 a page),
 * a box of 64 rows, the 128-byte swizzle. The pool's size is not known here, so the
 * map spans 2^31 rows (256 GiB); only the rows of pages the page tables name are read.
 * False where it cannot be made: the cp.async form runs, with a warning the first time
 * (the results are the same; only the speed differs). */
static bool ss_tensor_map(const uint8_t *pages, CUtensorMap *tm)
{
	static std::atomic<int> warned{ 0 };
	const int e = pages ? strata_dev_tmap_rows(tm, pages, kRowB, (uint64_t)1 << 31, kTile) : -EINVAL;
	if (e && !warned.exchange(1))
		KLOG(STRATA_LOG_WARN, "indexer: no TMA tensor map over the FP8 pages (%d): the scan copies "
				      "tiles by cp.async",
		     e);
	return e == 0;
}

/* The scan with R query rows a CTA (a->rows). */
template <int R>
static int wg_scan_rows(const idx_wg_args *a, int n_req, int max_limit, cudaStream_t st, int *fused)
{
	if (!a->mx) {
		const size_t ss = smem_of<SsSmem<kSsStages, R>>();
		const int mode = ss_tma_mode();
		const int tma = mode < 0 ? R > 1 : mode; /* ss_tma_mode's rule */
		CUtensorMap tm;
		if (tma && ss_tensor_map(a->pages, &tm))
			return wg_launch(scan_ss_kernel<kSsStages, R, true>,
					 R == 1 ? scan_ss_kernel<kSsStages, R, true, R == 1> : nullptr,
					 R == 1 ? scan_ss_kernel<kSsStages, R, true, 2 * (R == 1)> : nullptr, ss,
					 a, n_req, max_limit, st, fused, 1, tm);
		memset(&tm, 0, sizeof tm); /* unused by the cp.async form */
		return wg_launch(scan_ss_kernel<kSsStages, R, false>,
				 R == 1 ? scan_ss_kernel<kSsStages, R, false, R == 1> : nullptr,
				 R == 1 ? scan_ss_kernel<kSsStages, R, false, 2 * (R == 1)> : nullptr, ss, a,
				 n_req, max_limit, st, fused, 1, tm);
	}
	const size_t smem = smem_of<RsSmem<kRsStages, R>>();
	if (R > 1) /* never fused (wg_shape): the one-set loop */
		return wg_launch(scan_rs_kernel<kRsStages, true, R>, nullptr, nullptr, smem, a, n_req, max_limit, st,
				 fused, R == 2 ? kRsWaves : 1);
	/* one row: the two-register-set loop where the fused tail runs, else the one-set loop
	 * (more CTAs an SM; scan_rs_kernel) */
	long long gx = 1;
	int fuse = 0;
	const cudaError_t e =
		wg_shape(scan_rs_kernel<kRsStages, false, 1>, smem, a, n_req, max_limit, &gx, &fuse);
	if (e != cudaSuccess)
		return (int)e;
	return fuse ? wg_launch(scan_rs_kernel<kRsStages, false, 1>, scan_rs_kernel<kRsStages, false, 1, true>, nullptr,
				smem, a, n_req, max_limit, st, fused)
		    : wg_launch(scan_rs_kernel<kRsStages, true, 1>, nullptr, nullptr, smem, a, n_req, max_limit, st,
				fused, kRsWaves);
}

extern "C" int idx_wgmma_scan(const idx_wg_args *a, int n_req, int max_limit, void *stream,
			      int *fused)
{
	*fused = 0;
	if (!idx_wgmma_ready())
		return (int)cudaErrorInvalidDeviceFunction;
	cudaStream_t st = (cudaStream_t)stream;
	switch (a->rows) {
	case 1:
		return wg_scan_rows<1>(a, n_req, max_limit, st, fused);
	case 2:
		return wg_scan_rows<2>(a, n_req, max_limit, st, fused);
	case 4:
		return wg_scan_rows<4>(a, n_req, max_limit, st, fused);
	default:
		return (int)cudaErrorInvalidValue;
	}
}
