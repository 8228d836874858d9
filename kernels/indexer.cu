/*
 * Indexer on the GPU: fused tensor-core scan + exact two-level radix top-k (FORMATS.md
 * section 4).
 *
 * Two kernels and no memset (the scratch's counters are zero at rest: the last CTA of
 * each row clears what the row used), launch shapes fixed by the host fields and the
 * GPU's occupancy (CUDA-graph capturable, no host synchronisation):
 *  1. scan   grid (G, n_req), 4 warps, G = resident CTAs / n_req (one wave). CTA x of a
 *            request scores key units x, x+G, ... of 128 keys for all of its rows (MTP
 *            rows share the key reads and the dequantisation), so the query staging and
 *            histogram flush happen once per CTA and no wave tail is left. Keys are
 *            dequantised in registers straight into mma.sync m16n8k16 B fragments (bf16,
 *            exact); the permuted bf16 query is the A operand (heads = M) from shared
 *            memory. The epilogue applies ReLU and the head weights, reduces over heads
 *            by a reduce-scatter across lanes, writes the fp32 score and counts it in a
 *            2048-bucket histogram (fp16 of the score, a monotone map) flushed once per
 *            CTA. (See "scan v2" below for the register and instruction budget.)
 *  2. filter grid (ceil(max_limit / 2048), n_rows), 512 threads. Every CTA finds the
 *            threshold bucket b* (the bucket holding the k-th score), appends ids with
 *            bucket > b* to the row's "selected" list and (score, id) keys of bucket b*
 *            to its candidate list, and counts those in a 4096-bin second-level histogram
 *            over the score's ordered bits inside b*. The row's last CTA to finish
 *            (a release-acquire arrive) then selects: bin b2* of the second level holding the
 *            k-th score, everything above it taken outright, and among bin (b*, b2*)'s
 *            elements a rank select when they are few (the usual case) or an exact radix
 *            select on 64-bit (score bits, inverted id) keys (in shared memory; from
 *            global memory when crowded: many equal scores; from the whole row when the
 *            candidate list overflowed); then a counting sort of the k ids. The lists'
 *            shared counters are incremented once per warp (agg_inc, or one warp scan
 *            of the lanes' counts), so equal scores do not serialise on them; the
 *            bin-2 counts are plain atomics (faster on scores that differ; a crowd of
 *            equal ones queues on one word there, slower, as exact). Rows with limit
 *            <= k are written 0..limit-1.
 * Where a row's filter CTAs fit one thread-block cluster (and every row's cluster the GPU
 * at once), filter_cl_kernel runs step 2 with the row's CTAs meeting in the shared memory
 * of the cluster's first CTA, which selects (indexer_cluster_int.h, filter_cluster).
 * The wgmma scans (indexer_wgmma.cu) can instead run the filter's work in their own
 * CTAs (a cooperative launch; scan_tail there), when each CTA holds at most 512 scores:
 * then select_kernel follows the scan as its programmatic dependent, reading the cut
 * the scan left in the row's count slots.
 * strata_k_indexer_phases runs the same work with the select as its own kernel and
 * events between the launches.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <atomic>

#include "kernels/indexer_int.h"
#include "kernels/prestage_int.h"
#include "kernels_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

constexpr int kThreads = 128; /* scan CTA: 4 warps */
constexpr int kWarps = kThreads / 32;
constexpr int kUnit = kWarps * 32; /* keys a scan CTA scores per step (32 per warp) */
constexpr int kQStride = 136; /* bf16 per query head row in smem: +16 B keeps ldmatrix conflict-free */

struct Args {
	int heads, mt, topk, max_limit, max_pages, B, b_shift, lim_cap;
	int page32; /* B % 32 == 0: a warp's 32-aligned run of 32 keys sits in one page */
	size_t page_bytes;
	const uint16_t *q;
	const uint8_t *q8;
	const float *w;
	const int32_t *req_rows, *row_limit, *page_table;
	const uint8_t *pages;
	int32_t *out_ids;
	float *out_scores;
	uint32_t *hist, *count, *hist2;
	unsigned long long *sel, *cand; /* keys (idx_key64) */
	float *scores;
	size_t sstride, cap;
	unsigned long long *cut_out, cut_epoch;
	/* strata_indexer_params.stage: sx staging CTAs per row (0: none), then fx
	 * filter CTAs */
	int fx, sx;
	strata_attn_prestage_params st;
	unsigned long long *trace; /* idx_trace (indexer_int.h), or null */
	uint32_t *sw; /* select_list: the sampled tail's bound words, [rows][IDX_SAMPW] */
	int cl_loc;   /* filter_cl_kernel: bucket-b* keys its leader holds (<= kClLoc) */
};

/* The row's cut word (strata_indexer_params.cut_out), for a poller on another stream. */
__device__ __forceinline__ void publish_cut(const Args &a, int row, uint32_t b)
{
	if (a.cut_out)
		*reinterpret_cast<volatile unsigned long long *>(a.cut_out + row) =
			a.cut_epoch << 12 | (unsigned long long)b;
}

__device__ __forceinline__ int row_lim(const Args &a, int r)
{
	int L = a.row_limit[r];
	return L < 0 ? 0 : (L > a.lim_cap ? a.lim_cap : L);
}

__device__ __forceinline__ uint32_t bmul2(uint32_t x, uint32_t y)
{
	uint32_t d;
	/* x * y + (-0): an exact product here (powers of two, no overflow) */
	asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(y), "r"(0x80008000u));
	return d;
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
					 uint32_t b1)
{
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
	    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Page base of logical key `key` of a request, and its offset in the page. */
template <int EB>
__device__ __forceinline__ const uint8_t *key_page(const Args &a, const int32_t *pt, int key,
						   int *off)
{
	int pi;
	if (a.b_shift >= 0) {
		pi = key >> a.b_shift;
		*off = key & (a.B - 1);
	} else {
		pi = key / a.B;
		*off = key - pi * a.B;
	}
	return a.pages + (size_t)pt[pi] * (size_t)a.B * EB;
}

/* The raw bytes one lane quarter loads for one key. */
template <int FMT> struct Raw;
template <> struct Raw<STRATA_INDEX_MXFP4> {
	uint4 v;
	uint32_t sb;
};
template <> struct Raw<STRATA_INDEX_FP8> {
	uint4 v0, v1;
};

template <int FMT>
__device__ __forceinline__ void load_raw(const Args &a, const int32_t *pt, int key, int maxlim,
					 int c, Raw<FMT> &r)
{
	constexpr int EB = FMT == STRATA_INDEX_MXFP4 ? STRATA_INDEX_MXFP4_BYTES : STRATA_INDEX_FP8_BYTES;
	if (key >= maxlim) {
		r = Raw<FMT>{};
		return;
	}
	int off;
	const uint8_t *base = key_page<EB>(a, pt, key, &off);
	if constexpr (FMT == STRATA_INDEX_MXFP4) {
		r.v = __ldg(reinterpret_cast<const uint4 *>(base + (size_t)off * 64 + 16 * c));
		r.sb = __ldg(base + (size_t)a.B * 64 + (size_t)off * 4 + c);
	} else {
		const uint4 *p = reinterpret_cast<const uint4 *>(base + (size_t)off * 128 + 32 * c);
		r.v0 = __ldg(p);
		r.v1 = __ldg(p + 1);
	}
}

/* Raw bytes to the key's 16 bf16 pairs (B fragments: pair p feeds k-step p/2). */
template <int FMT>
__device__ __forceinline__ void convert(const Raw<FMT> &r, uint32_t (&b)[16])
{
	if constexpr (FMT == STRATA_INDEX_MXFP4) {
		const uint32_t wd[4] = { r.v.x, r.v.y, r.v.z, r.v.w };
		if (r.sb <= 128u) {
			/* one multiply by 2^126 * 2^(sb-127) = 2^(sb-1) (a normal bf16 for
			 * sb <= 128): the same exact value, rounded once, as the two below */
			uint32_t s1 = (r.sb + 126u) << 7;
			s1 |= s1 << 16;
#pragma unroll
			for (int p = 0; p < 16; p++)
				b[p] = bmul2(idx_fp4_pair_bits(wd[p >> 2], p & 3), s1);
		} else {
			/* group scale 2^(sb-127) as bf16 bits (255, NaN, as infinity) */
			uint32_t sbits = r.sb >= 255 ? 0x7F80u : r.sb << 7;
			uint32_t s2 = sbits | (sbits << 16);
#pragma unroll
			for (int p = 0; p < 16; p++)
				b[p] = bmul2(bmul2(idx_fp4_pair_bits(wd[p >> 2], p & 3),
						   IDX_FP4_PAIR_SCALE_BITS * 0x10001u),
					     s2);
		}
	} else {
		const uint32_t wd[8] = { r.v0.x, r.v0.y, r.v0.z, r.v0.w, r.v1.x, r.v1.y, r.v1.z, r.v1.w };
#pragma unroll
		for (int p = 0; p < 16; p++)
			b[p] = bmul2(idx_fp8_pair_bits(wd[p >> 1], p & 1), IDX_FP8_PAIR_SCALE_BITS * 0x10001u);
	}
}

/* ---- scan v2 ---------------------------------------------------------------------------
 * (v2; the first version, in the results of 2026-11-30, was 3.6 us slower at 1M.) The
 * same products and per-key results as that version up to fp32 summation order, with
 * fewer instructions per key and fewer registers (4 CTAs per SM instead of 3):
 *  - one page-table lookup per warp and step when B % 32 == 0 (a warp's 32 keys start
 *    32-aligned, so they sit in one page), the general path otherwise;
 *  - FP8's per-key scale is fetched with the key bytes, one step ahead, not after the
 *    multiply;
 *  - the first k-step's mma starts from a zero accumulator operand (no zeroing);
 *  - the m-tile loop is unrolled for 64 heads (MTC = 4), so independent mma chains of
 *    adjacent m-tiles overlap;
 *  - ReLU and head weights as two fused multiply-adds per pair of values;
 *  - the sum over the 8 lanes that share a key quarter is a reduce-scatter (7 shuffles
 *    and 7 adds instead of 24 and 24): lane g ends with value g, i.e. key
 *    8 (g >> 1) + 2c + (g & 1). Every key's sum has the same shape wherever it sits in
 *    the warp (an xor butterfly, and fp32 addition commutes), so equal keys still get
 *    bit-equal scores and exact ties stay exact;
 *  - the query is staged with 4-byte shared stores of bf16 pairs (the permutation puts
 *    dims t and t+4 (MXFP4) or t and t+2 (FP8) of an 8-dim vector side by side). */

/* Logical position of the bf16 pair word j (0..3) of the 8-dim query vector starting
 * at dim d0 (a multiple of 8), and the vector elements in its low and high halves.
 * Equal to idx_kl_of_dim for both halves (checked against it when writing this). */
template <int FMT>
__device__ __forceinline__ int q_pair_kl(int d0, int j, int *lo, int *hi)
{
	const int c = d0 >> 5, rem0 = d0 & 31;
	if constexpr (FMT == STRATA_INDEX_MXFP4) {
		*lo = j;
		*hi = j + 4;
		return 32 * (rem0 >> 3) + 16 * (j >> 1) + 8 * (j & 1) + 2 * c;
	} else {
		const int b = j >> 1, odd = j & 1;
		*lo = 4 * b + odd;
		*hi = 4 * b + odd + 2;
		return 16 * ((rem0 >> 2) + b) + 8 * odd + 2 * c;
	}
}

__device__ __forceinline__ void mma_bf16_zc(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
					    uint32_t b1)
{
	const float z = 0.0f;
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
	    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
	    : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(z));
}

/* Loads the raw bytes of the warp's 32 keys kb.. (lane: key kb + 8 nt + g, quarter c)
 * and, for FP8, the scale of the key the lane scores in the epilogue (kb + ekey). */
template <int FMT>
__device__ __forceinline__ void load_step(const Args &a, const int32_t *pt, int kb, int maxlim,
					  int g, int c, int ekey, Raw<FMT> (&r)[4], float &ks)
{
	constexpr int EB = FMT == STRATA_INDEX_MXFP4 ? STRATA_INDEX_MXFP4_BYTES : STRATA_INDEX_FP8_BYTES;
	ks = 0.0f;
	if (kb >= maxlim) { /* a warp past the end (its page may not exist) */
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
			r[nt] = Raw<FMT>{};
		return;
	}
	if (a.page32) { /* warp-uniform */
		const int pi = a.b_shift >= 0 ? kb >> a.b_shift : kb / a.B;
		const int off0 = kb - pi * a.B;
		const uint8_t *base = a.pages + (size_t)__ldg(pt + pi) * a.page_bytes;
#pragma unroll
		for (int nt = 0; nt < 4; nt++) {
			const int d = nt * 8 + g, off = off0 + d;
			if (kb + d >= maxlim) {
				r[nt] = Raw<FMT>{};
			} else if constexpr (FMT == STRATA_INDEX_MXFP4) {
				r[nt].v = __ldg(reinterpret_cast<const uint4 *>(base + (size_t)off * 64 + 16 * c));
				r[nt].sb = __ldg(base + (size_t)a.B * 64 + (size_t)off * 4 + c);
			} else {
				const uint4 *p = reinterpret_cast<const uint4 *>(base + (size_t)off * 128 + 32 * c);
				r[nt].v0 = __ldg(p);
				r[nt].v1 = __ldg(p + 1);
			}
		}
		if constexpr (FMT == STRATA_INDEX_FP8)
			ks = kb + ekey < maxlim ? __ldg(reinterpret_cast<const float *>(
							  base + (size_t)a.B * 128 + (size_t)(off0 + ekey) * 4))
						: 0.0f;
	} else {
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
			load_raw<FMT>(a, pt, kb + nt * 8 + g, maxlim, c, r[nt]);
		if constexpr (FMT == STRATA_INDEX_FP8) {
			if (kb + ekey < maxlim) {
				int off;
				const uint8_t *base = key_page<EB>(a, pt, kb + ekey, &off);
				ks = __ldg(reinterpret_cast<const float *>(base + (size_t)a.B * 128 +
									     (size_t)off * 4));
			}
		}
	}
}

/* Registers: MXFP4 with one row fits 128 (4 CTAs per SM) without spilling; FP8's raw
 * prefetch is twice MXFP4's, and more rows need more, so those take 3 CTAs per SM. */
template <int FMT, int R> constexpr int scan_min_ctas()
{
	return FMT == STRATA_INDEX_MXFP4 && R == 1 ? 4 : 3;
}

/* 8 query dims of an FP8 query as bf16 bits, exactly (e4m3 values are fp16 and bf16
 * values): the hardware's e4m3x2 -> f16x2 conversion, then f16 -> f32, whose top half is
 * the bf16. */
__device__ __forceinline__ uint4 q8_as_bf16(const uint8_t *src, bool vec)
{
	uint16_t b2[4];
	if (vec) {
		const uint2 x = __ldg(reinterpret_cast<const uint2 *>(src));
		memcpy(b2, &x, 8);
	} else {
#pragma unroll
		for (int e = 0; e < 4; e++)
			b2[e] = (uint16_t)(src[2 * e] | (src[2 * e + 1] << 8));
	}
	uint16_t t[8];
#pragma unroll
	for (int e = 0; e < 4; e++) {
		const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)b2[e], __NV_E4M3);
		const __half2 h = *reinterpret_cast<const __half2 *>(&hr);
		t[2 * e] = (uint16_t)(__float_as_uint(__low2float(h)) >> 16);
		t[2 * e + 1] = (uint16_t)(__float_as_uint(__high2float(h)) >> 16);
	}
	uint4 r;
	memcpy(&r, t, 16);
	return r;
}

/* R query rows of one request, MTC m-tiles of 16 heads (0: a.mt, not unrolled); Q8:
 * FP8 queries (a.q8), widened to bf16 as they are staged. */
template <int FMT, int R, int MTC, bool Q8>
__global__ void __launch_bounds__(kThreads, (scan_min_ctas<FMT, R>())) scan_kernel_v2(Args a)
{
	extern __shared__ __align__(16) unsigned char smem[];
	const int MT = MTC > 0 ? MTC : a.mt, MH = MT * 16;
	const int qelems = MH * kQStride;
	uint16_t *qs = reinterpret_cast<uint16_t *>(smem);                 /* [R][MH][kQStride] */
	float *ws = reinterpret_cast<float *>(smem + (size_t)R * qelems * 2); /* [R][MH] */
	uint32_t *hs = reinterpret_cast<uint32_t *>(ws + R * MH);          /* [R][IDX_BINS] */

	const int req = blockIdx.y;
	const int r0 = a.req_rows[req];
	int nr = a.req_rows[req + 1] - r0;
	nr = nr < 0 ? 0 : (nr > R ? R : nr);
	int lim[R];
	int maxlim = 0;
#pragma unroll
	for (int i = 0; i < R; i++) {
		lim[i] = 0;
		if (i < nr) {
			int L = row_lim(a, r0 + i);
			lim[i] = L > a.topk ? L : 0; /* rows with limit <= k are not scored */
		}
		maxlim = lim[i] > maxlim ? lim[i] : maxlim;
	}
	const int kstride = (int)gridDim.x * kUnit;
	if ((int)blockIdx.x * kUnit >= maxlim)
		return; /* whole CTA */

	const int tid = threadIdx.x;
	if (tid == 0) {
		idx_trace(a.trace, IDX_T_SCAN0);
		idx_trace_cta(a.trace, 0, 0);
	}
	const bool qvec = Q8 ? ((uintptr_t)a.q8 & 7) == 0 : ((uintptr_t)a.q & 15) == 0; /* 8 or 16-byte loads */
#pragma unroll
	for (int i = 0; i < R; i++) {
		if (!lim[i])
			continue;
		const uint16_t *qg = a.q + (size_t)(r0 + i) * a.heads * IDX_DIM;
		const uint8_t *qg8 = Q8 ? a.q8 + (size_t)(r0 + i) * a.heads * IDX_DIM : nullptr;
		const int nv = MH * (IDX_DIM / 8); /* 8 dims per vector */
		for (int v0 = tid; v0 < nv; v0 += 4 * kThreads) {
			uint4 x[4];
#pragma unroll
			for (int u = 0; u < 4; u++) {
				const int v = v0 + u * kThreads, h = v >> 4, d0 = (v & 15) * 8;
				x[u] = make_uint4(0, 0, 0, 0);
				if (v < nv && h < a.heads && Q8) {
					x[u] = q8_as_bf16(qg8 + (size_t)h * IDX_DIM + d0, qvec);
				} else if (v < nv && h < a.heads) {
					const uint16_t *src = qg + (size_t)h * IDX_DIM + d0;
					if (qvec) {
						x[u] = __ldg(reinterpret_cast<const uint4 *>(src));
					} else {
						uint16_t t[8];
#pragma unroll
						for (int e = 0; e < 8; e++)
							t[e] = src[e];
						memcpy(&x[u], t, 16);
					}
				}
			}
#pragma unroll
			for (int u = 0; u < 4; u++) {
				const int v = v0 + u * kThreads, h = v >> 4, d0 = (v & 15) * 8;
				if (v < nv) {
					uint16_t t[8];
					memcpy(t, &x[u], 16);
					uint32_t *row = reinterpret_cast<uint32_t *>(qs + i * qelems + h * kQStride);
#pragma unroll
					for (int j = 0; j < 4; j++) {
						int lo, hi;
						const int kl = q_pair_kl<FMT>(d0, j, &lo, &hi);
						row[kl >> 1] = (uint32_t)t[lo] | ((uint32_t)t[hi] << 16);
					}
				}
			}
		}
		for (int h = tid; h < MH; h += kThreads)
			ws[i * MH + h] = h < a.heads ? a.w[(size_t)(r0 + i) * a.heads + h] : 0.0f;
		for (int b = tid; b < IDX_BINS; b += kThreads)
			hs[i * IDX_BINS + b] = 0;
	}
	__syncthreads();

	const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
	const int32_t *pt = a.page_table + (size_t)req * a.max_pages;
	const uint32_t qs_base = (uint32_t)__cvta_generic_to_shared(qs);
	const int mat = lane >> 3;
	const uint32_t lds_off = (uint32_t)((((mat & 1) * 8 + (lane & 7)) * kQStride + (mat >> 1) * 8) * 2);
	const int ekey = (g >> 1) * 8 + 2 * c + (g & 1); /* the key this lane ends with */

	Raw<FMT> raw[4];
	float ks = 0.0f;
	int kb = (int)blockIdx.x * kUnit + warp * 32;
	load_step<FMT>(a, pt, kb, maxlim, g, c, ekey, raw, ks);

	for (; kb < maxlim; kb += kstride) { /* warp-uniform */
		uint32_t bf[4][16];
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
			convert<FMT>(raw[nt], bf[nt]);
		const float kscale = ks;
		if (kb + kstride < maxlim)
			load_step<FMT>(a, pt, kb + kstride, maxlim, g, c, ekey, raw, ks);
#pragma unroll
		for (int i = 0; i < R; i++) {
			if (kb >= lim[i])
				continue;
			/* part[2 nt + h]: this lane's heads' share of key 8 nt + 2c + h */
			float part[8];
			const uint32_t qa = qs_base + (uint32_t)(i * qelems * 2) + lds_off;
			const float *wr = ws + i * MH + g;
			auto mtile = [&](int m, bool first) {
				float acc[4][4];
				uint32_t af[4];
				const uint32_t qm = qa + (uint32_t)(m * 16 * kQStride * 2);
				ldsm_x4(af, qm);
#pragma unroll
				for (int nt = 0; nt < 4; nt++)
					mma_bf16_zc(acc[nt], af, bf[nt][0], bf[nt][1]);
#pragma unroll
				for (int s = 1; s < 8; s++) {
					ldsm_x4(af, qm + (uint32_t)(s * 32));
#pragma unroll
					for (int nt = 0; nt < 4; nt++)
						mma_bf16(acc[nt], af, bf[nt][2 * s], bf[nt][2 * s + 1]);
				}
				/* acc[nt]: c0,c1 = head 16m+g, keys 2c,2c+1; c2,c3 = head 16m+g+8 */
				const float wlo = wr[m * 16], whi = wr[m * 16 + 8];
#pragma unroll
				for (int nt = 0; nt < 4; nt++)
#pragma unroll
					for (int h = 0; h < 2; h++) {
						const float lo = fmaxf(acc[nt][h], 0.0f), hi = fmaxf(acc[nt][2 + h], 0.0f);
						float p = first ? wlo * lo : fmaf(wlo, lo, part[2 * nt + h]);
						part[2 * nt + h] = fmaf(whi, hi, p);
					}
			};
			if constexpr (MTC > 0) {
#pragma unroll
				for (int m = 0; m < MTC; m++)
					mtile(m, m == 0);
			} else {
				mtile(0, true);
#pragma unroll 1
				for (int m = 1; m < MT; m++)
					mtile(m, false);
			}
			float sc1[1]; /* this lane's key: ekey */
			idx_reduce_scatter8<8>(part, sc1, g);
			float sc = sc1[0];
			const int key = kb + ekey;
			if (key < lim[i]) {
				if constexpr (FMT == STRATA_INDEX_FP8)
					sc *= kscale;
				sc = sc == 0.0f ? 0.0f : sc; /* one zero: -0 sorts with +0 */
				a.scores[(size_t)(r0 + i) * a.sstride + key] = sc;
				atomicAdd(&hs[i * IDX_BINS + idx_bucket_dev(sc)], 1u);
			}
		}
	}
	idx_pdl_trigger(); /* the histogram flush below is short: let the filter launch */
	__syncthreads();
	if (tid == 0) {
		idx_trace(a.trace, IDX_T_SCAN1);
		idx_trace_cta(a.trace, 1, 0);
	}
#pragma unroll
	for (int i = 0; i < R; i++) {
		if (!lim[i])
			continue;
		uint32_t *gh = a.hist + (size_t)(r0 + i) * IDX_BINS;
		for (int b = tid; b < IDX_BINS; b += kThreads) {
			uint32_t v = hs[i * IDX_BINS + b];
			if (v)
				atomicAdd(&gh[b], v);
		}
	}
	idx_trace_fenced(a.trace, IDX_T_SCAN2); /* when the flush is performed */
}

/* ---- filter + select ------------------------------------------------------------------
 * Selection is exact for any monotone bucketing, so it runs on two levels: b1 =
 * idx_bucket_dev (2048 bins, counted by the scan) and, inside the threshold bucket b*, b2 =
 * idx_sub_of (4096 bins over the score's ordered bits, counted by the filter). Every element
 * with b1 > b*, or b1 == b* and b2 > b2*, is selected outright; only the few elements of
 * bin (b*, b2*) need an exact (score, id) radix select. */
constexpr int kFThreads = 512;
constexpr int kFPer = 4;                     /* scores per filter thread */
constexpr int kFChunk = kFThreads * kFPer;   /* scores per filter CTA */
constexpr int kFRound = 4;                   /* chunks a filter CTA places at once */
constexpr int kCC = 2048;                    /* bin (b*, b2*) keys resolved in shared memory */
constexpr int kRankMax = 64;                 /* up to this many of them: select by rank */
static_assert(kCC * 8 <= IDX_BINS2 * 4, "cc shares the bin-2 histogram's space");
static_assert(IDX_BINS % kFThreads == 0 && IDX_BINS2 % kFThreads == 0, "bins per thread");
typedef cub::BlockScan<uint32_t, kFThreads> FScan;

struct SelSmem {
	union {
		uint32_t h2[IDX_BINS2];        /* filter: this CTA's bin-2 counts */
		unsigned long long cc[kCC];    /* select: the keys of bin (b*, b2*) */
	} u;
	int32_t ids[STRATA_INDEXER_MAX_TOPK];
	float sc[STRATA_INDEXER_MAX_TOPK];     /* select: the ids' scores */
	uint32_t h256[256];
	int bin, digit, dcnt, last;
	uint32_t above, dabove, n_t, n_c;
	uint32_t g_sel, g_cand; /* filter: this chunk's places in the row's two lists */
};

/* This thread's NB counts of a histogram for find_cut_of, read through L2 (other CTAs
 * wrote it). */
template <int NB> __device__ __forceinline__ void cut_counts(const uint32_t *hist, uint32_t (&cnt)[NB])
{
	static_assert(NB % 4 == 0, "16-byte reads");
	const int grp = kFThreads - 1 - (int)threadIdx.x;
	const uint4 *h4 = reinterpret_cast<const uint4 *>(hist + grp * NB); /* rows are 16 B-aligned */
#pragma unroll
	for (int b = 0; b < NB / 4; b++) {
		const uint4 v = __ldcg(h4 + b);
		cnt[4 * b] = v.x, cnt[4 * b + 1] = v.y, cnt[4 * b + 2] = v.z, cnt[4 * b + 3] = v.w;
	}
}

/* Cut of a histogram (NB bins per thread, kFThreads threads; this thread's counts from
 * cut_counts): the highest bin with count(bin >= it) >= need to *bin, count(bin > it)
 * to *above. The caller sets *bin = -1 and synchronises before; synchronises after. */
template <int NB>
__device__ __forceinline__ void find_cut_of(const uint32_t (&cnt)[NB], uint32_t need,
					    FScan::TempStorage &tmp, int *bin, uint32_t *above_out)
{
	const int grp = kFThreads - 1 - (int)threadIdx.x;
	uint32_t sum = 0;
#pragma unroll
	for (int b = 0; b < NB; b++)
		sum += cnt[b];
	uint32_t above;
	FScan(tmp).ExclusiveSum(sum, above);
#pragma unroll
	for (int b = NB - 1; b >= 0; b--) {
		if (above < need && above + cnt[b] >= need) {
			*bin = grp * NB + b;
			*above_out = above;
		}
		above += cnt[b];
	}
}

/* find_cut_of, reading the counts first. */
template <int NB>
__device__ __forceinline__ void find_cut(const uint32_t *hist, uint32_t need,
					 FScan::TempStorage &tmp, int *bin, uint32_t *above_out)
{
	uint32_t cnt[NB];
	cut_counts<NB>(hist, cnt);
	find_cut_of<NB>(cnt, need, tmp, bin, above_out);
}

__device__ __forceinline__ int32_t id_of(unsigned long long key)
{
	return (int32_t)(0xffffffffu - (uint32_t)key);
}

/* The score of a key (the inverse of idx_ord32; zero comes back as +0). */
__device__ __forceinline__ float score_of(unsigned long long key)
{
	const uint32_t o = (uint32_t)(key >> 32);
	return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}

__device__ void write_trivial(const Args &a, int row, int L, bool invalid)
{
	const int k = a.topk;
	int32_t *oid = a.out_ids + (size_t)row * k;
	float *osc = a.out_scores ? a.out_scores + (size_t)row * k : nullptr;
	for (int i = threadIdx.x; i < k; i += blockDim.x) {
		oid[i] = !invalid && i < L ? i : -1;
		if (osc)
			osc[i] = 0.0f;
	}
}

/* Calls f(key64) for every element of bucket b* of the row: from the candidate list
 * when it held them all, else from the scores filtered by bucket. */
template <typename F>
__device__ __forceinline__ void for_each_cand(const Args &a, int row, int L, uint32_t bstar,
					      uint32_t nc, F f)
{
	if (nc <= a.cap) {
		const unsigned long long *cl = a.cand + (size_t)row * a.cap;
		for (uint32_t i = threadIdx.x; i < nc; i += blockDim.x)
			f(__ldcg(cl + i));
	} else {
		const float *sc = a.scores + (size_t)row * a.sstride;
		for (int j = threadIdx.x; j < L; j += blockDim.x) {
			float s = __ldcg(sc + j);
			if (idx_bucket_dev(s) == bstar)
				f((unsigned long long)idx_key64(s, j));
		}
	}
}

#include "kernels/indexer_select_int.h" /* radix_cut, sort_emit, select_row */

/* Clears what the row used of the counters (hist, hist2, count), so the scratch is zero
 * at rest for the next call; the caller has made sure that nothing reads them any more. */
__device__ void clear_row(const Args &a, int row)
{
	uint4 *h = reinterpret_cast<uint4 *>(a.hist + (size_t)row * IDX_BINS);
	uint4 *h2 = reinterpret_cast<uint4 *>(a.hist2 + (size_t)row * IDX_BINS2);
	const uint4 z = make_uint4(0, 0, 0, 0);
	for (int i = threadIdx.x; i < IDX_BINS / 4; i += blockDim.x)
		h[i] = z;
	for (int i = threadIdx.x; i < IDX_BINS2 / 4; i += blockDim.x)
		h2[i] = z;
	if (threadIdx.x < IDX_CNT)
		a.count[(size_t)row * IDX_CNT + threadIdx.x] = 0;
}

/* First-level cut of a row from the scan's histogram; false when there is none (an
 * inconsistent histogram, cannot happen). */
__device__ __forceinline__ bool row_cut(const Args &a, int row, SelSmem &sm,
					FScan::TempStorage &tmp, uint32_t *bstar, uint32_t *above1)
{
	if (threadIdx.x == 0)
		sm.bin = -1, sm.above = 0;
	__syncthreads();
	find_cut<IDX_BINS / kFThreads>(a.hist + (size_t)row * IDX_BINS, (uint32_t)a.topk, tmp,
				       &sm.bin, &sm.above);
	__syncthreads();
	const int b = sm.bin;
	*bstar = (uint32_t)b;
	*above1 = sm.above;
	__syncthreads(); /* sm.bin is reused */
	return b >= 0;
}

__device__ __forceinline__ void load_chunk(const float *sc, int start, int L, float (&s)[kFPer])
{
#pragma unroll
	for (int u = 0; u < kFPer; u++) {
		const int j = start + u * kFThreads + (int)threadIdx.x;
		s[u] = j < L ? sc[j] : 0.0f;
	}
}

#include "kernels/indexer_stage_int.h" /* stage_role */

/* A filter CTA's first-level cut of row `row` from its counts (hc, read by cut_counts)
 * into *bstar / *above1, traced, and published by the row's CTA 0 (bx); sm.bin and
 * sm.above set to -1 / 0 under a barrier before. false: an inconsistent histogram
 * (cannot happen). filter_kernel's and filter_cl_kernel's. */
__device__ __forceinline__ bool filter_cut(const Args &a, int row, int bx,
					   const uint32_t (&hc)[IDX_BINS / kFThreads], SelSmem &sm,
					   FScan::TempStorage &tmp, uint32_t *bstar, uint32_t *above1)
{
	find_cut_of<IDX_BINS / kFThreads>(hc, (uint32_t)a.topk, tmp, &sm.bin, &sm.above);
	__syncthreads();
	const bool cut = sm.bin >= 0;
	*bstar = (uint32_t)sm.bin;
	*above1 = sm.above;
	if (threadIdx.x == 0)
		idx_trace(a.trace, IDX_T_FCUT);
	if (cut && bx == 0 && threadIdx.x == 0)
		publish_cut(a, row, *bstar); /* top-k is far from done: early staging may start */
	return cut;
}

/* Where filter_rounds puts a row's places and entries: its lists in global memory
 * (filter_kernel; the row's last CTA selects from them) with this CTA's bin-2 counts in
 * its shared memory (flushed after the rounds). place(both) takes the CTA's places for
 * a round (selected count low, candidates high) and returns the lists' counts before
 * them; sel / cand store an entry (cand: its key, idx_key64's) at a place (past a
 * list's room: dropped, counted); count2 counts a candidate in its bin-2. */
struct GlobalSink {
	const Args &a;
	int row;
	SelSmem &sm;
	unsigned long long *cnt64;
	__device__ __forceinline__ unsigned long long place(unsigned long long both) const
	{
		return both ? atomicAdd(cnt64, both) : 0ull;
	}
	__device__ __forceinline__ void sel(uint32_t at, float s, int j) const
	{
		if (at < (uint32_t)a.topk)
			a.sel[(size_t)row * a.topk + at] = idx_key64(s, j);
	}
	__device__ __forceinline__ void cand(uint32_t at, unsigned long long key) const
	{
		if (at < a.cap)
			a.cand[(size_t)row * a.cap + at] = key;
	}
	/* a candidate's bin-2 count (on) in this CTA's shared memory: a plain atomic whose
	 * old value nothing waits for. (An aggregated one, ballot, match, atomic and shuffle,
	 * was a dependent chain a live slot, in every warp with a candidate there.) */
	__device__ __forceinline__ void count2(uint32_t b, bool on) const
	{
		if (on)
			atomicAdd(&sm.u.h2[b], 1u);
	}
};

/* This CTA's rounds over its chunks of row `row` (start, start + step, ... of kFChunk
 * scores, kFRound at a time; the first round's scores already in s), given the row's
 * first-level cut b*: ids with bucket > b* to the selected list, bucket-b* keys to the
 * candidate list, counted by sub-bin (sink.count2). */
template <typename Sink>
__device__ __forceinline__ void filter_rounds(const Args &a, int row, int L, int start, int step,
					      float (&s)[kFRound][kFPer], uint32_t bstar, SelSmem &sm,
					      const Sink &sink)
{
	const int tid = threadIdx.x;
	const float *sc = a.scores + (size_t)row * a.sstride;
	uint32_t base;
	int shift;
	idx_sub_bounds(bstar, &base, &shift);
	const int lane = tid & 31;
	/* Places in the row's lists: one 64-bit atomic a round for the whole CTA
	 * (selected count low, candidates high), one shared atomic a warp and list, and
	 * within a warp one scan of its lanes' counts. The lists' order does not matter
	 * (the select sorts the k ids). The sink takes the places and the entries. */
	auto id_at = [&](int r, int u) { return start + r * step + u * kFThreads + tid; };
	/* A score below thr cannot reach bucket b*: idx_bucket_dev rounds to fp16
	 * (monotone) and thr is the fp16 value just below b*'s range (skipping -0,
	 * which the bucket map folds into +0; NaN or -inf for the lowest buckets, where
	 * every score goes on). Nearly every warp's 32 scores of a slot lie below it
	 * (b* holds the k-th largest of the row): those skip the bucket arithmetic and
	 * the writes. Rounds and skip together (either alone was no faster): batch 8
	 * FP8 85.8 - 85.9 us a call against 87.3 - 87.5, MXFP4 91.2 - 91.5 against
	 * 92.5 - 93.2 (bench/results/2026-11-30-h200-s15, run 1).
	 * Each thread classes its own scores of a round (cls: 2 bits a slot, 2 selected,
	 * 1 candidate) and takes its places from one warp scan of its two counts; the
	 * writes then visit only the slots some lane of the warp holds. Two ballots a
	 * live slot in each pass before (a slot's 32 scores are live with odds ~k / L
	 * each, so at 128K most slots were): two FP8 rows 128K batch 32 60.3 - 60.4 us
	 * against 61.3, 512K batch 8 56.7 - 57.0 against 57.2 - 57.4, 512K batch 32
	 * 201.3 - 201.6 against 203.1 - 205.7 (bench/results/2026-12-03-h200-s44,
	 * run 2). */
	const uint32_t o_thr = (bstar << 5) - 1u;
	const float thr =
		bstar == 0u ? -INFINITY : idx_ord16_value(o_thr == 0x7fffu ? 0x7ffeu : o_thr);
	auto at_or_above = [&](int r, int u) {
		return id_at(r, u) < L && !(s[r][u] < thr);
	};
	for (;;) {
		uint32_t cls = 0;
#pragma unroll
		for (int r = 0; r < kFRound; r++)
#pragma unroll
			for (int u = 0; u < kFPer; u++) {
				const bool in = at_or_above(r, u);
				if (!__any_sync(0xffffffffu, in))
					continue;
				const uint32_t b = idx_bucket_dev(s[r][u]);
				const uint32_t c = !in ? 0u : b > bstar ? 2u : b == bstar ? 1u : 0u;
				cls |= c << (2 * (r * kFPer + u));
			}
		static_assert(kFRound * kFPer <= 16, "two bits a slot in one word");
		const uint32_t v = (uint32_t)__popc(cls & 0xaaaaaaaau) |
				   (uint32_t)__popc(cls & 0x55555555u) << 16;
		uint32_t x = v;
#pragma unroll
		for (int d = 1; d < 32; d <<= 1) {
			const uint32_t y = __shfl_up_sync(0xffffffffu, x, d);
			if (lane >= d)
				x += y;
		}
		const uint32_t tot = __shfl_sync(0xffffffffu, x, 31); /* the warp's counts */
		if (tid == 0)
			idx_trace(a.trace, IDX_T_FP1);
		uint32_t ws = 0, wc = 0; /* this warp's places in the CTA's share */
		if (lane == 0 && (tot & 0xffffu))
			ws = atomicAdd(&sm.n_t, tot & 0xffffu);
		if (lane == 0 && (tot >> 16))
			wc = atomicAdd(&sm.n_c, tot >> 16);
		__syncthreads();
		if (tid == 0) {
			const unsigned long long both = sm.n_t | (unsigned long long)sm.n_c << 32;
			const unsigned long long at = sink.place(both);
			sm.g_sel = (uint32_t)at;
			sm.g_cand = (uint32_t)(at >> 32);
			sm.n_t = 0, sm.n_c = 0; /* every warp has added: ready for the next round */
		}
		__syncthreads();
		if (tid == 0)
			idx_trace(a.trace, IDX_T_FAT);
		const uint32_t ex = x - v;
		uint32_t bs = sm.g_sel + __shfl_sync(0xffffffffu, ws, 0) + (ex & 0xffffu);
		uint32_t bc = sm.g_cand + __shfl_sync(0xffffffffu, wc, 0) + (ex >> 16);
		const uint32_t wl = __reduce_or_sync(0xffffffffu, cls); /* warp-uniform */
#pragma unroll
		for (int r = 0; r < kFRound; r++)
#pragma unroll
			for (int u = 0; u < kFPer; u++) {
				const int sh = 2 * (r * kFPer + u);
				if (!(wl >> sh & 3u)) /* warp-uniform */
					continue;
				const uint32_t c = cls >> sh & 3u;
				const int j = id_at(r, u);
				if (c == 2u) {
					sink.sel(bs, s[r][u], j);
					bs++;
				}
				if (wl >> sh & 1u) { /* warp-uniform: the sink's count2 may vote */
					const uint32_t o = idx_ord32(s[r][u]);
					sink.count2(c == 1u ? idx_sub_of(o, base, shift) : 0u, c == 1u);
					if (c == 1u) {
						sink.cand(bc, ((unsigned long long)o << 32) |
							      (unsigned long long)(0xffffffffu - (uint32_t)j));
						bc++;
					}
				}
			}
		start += kFRound * step;
		if (start >= L)
			break;
#pragma unroll
		for (int r = 0; r < kFRound; r++)
			load_chunk(sc, start + r * step, L, s[r]);
	}
}

/* grid (sx + fx, n_rows) (filter_shape). Filter CTA x walks score chunks x, x + fx, ...
 * of kFChunk, kFRound at a time. Appends ids with bucket > b* to the row's
 * selected list and bucket-b* keys to its candidate list, counting them by sub-bin.
 * FUSE: the row's last CTA to finish (its arrive at a counter) then selects the row and
 * clears its counters, and CTA 0 of rows with limit <= k writes them; else
 * select_kernel does both. */
/* Two CTAs per SM: 64 registers a thread at most (the staging role copies 16 entries a
 * round to stay within them). PER: the ids a thread of the fused select sorts (one
 * where k <= kFThreads, as the select kernels and the cluster filter have it). */
template <bool FUSE, int PER = STRATA_INDEXER_MAX_TOPK / kFThreads>
__global__ void __launch_bounds__(kFThreads, 2) filter_kernel(Args a)
{
	__shared__ FScan::TempStorage tmp;
	__shared__ SelSmem sm;
	const int row = blockIdx.y, tid = threadIdx.x, k = a.topk;
	idx_pdl_wait(); /* launched as the scan's programmatic dependent (run_indexer) */
	if (tid == 0)
		idx_trace(a.trace, IDX_T_FILT0);
	/* the staging CTAs come first in the launch, so that they read the scan's
	 * histogram before the row's select clears it. A later read would see some bins
	 * zeroed: a lower cut (a superset staged, cap permitting) or none (nothing
	 * staged). Never a wrong word: each one published names an exact copy, and the
	 * index map copies whatever is not published. */
	if ((int)blockIdx.x < a.sx) { /* block-uniform */
		stage_role(a, row, sm, tmp);
		return;
	}
	const int bx = (int)blockIdx.x - a.sx; /* this CTA's filter chunk */
	/* The reads the cut and the first round need: the histogram's counts first, then
	 * the row's limit and the first round's scores up to it (only slots this call's
	 * scan wrote are read; issuing the scores before the limit is known, bounded by
	 * the scratch row, measured no faster: s32 run 1). */
	uint32_t hc[IDX_BINS / kFThreads];
	cut_counts<IDX_BINS / kFThreads>(a.hist + (size_t)row * IDX_BINS, hc);
	const int L = row_lim(a, row);
	const float *sc = a.scores + (size_t)row * a.sstride;
	/* A round is up to kFRound of this CTA's chunks (x, x + fx, ...): their scores held
	 * in registers, their places in the row's lists taken at once (one chain of shared
	 * and global atomics a round, not a chunk: at batch 8 a CTA has ~4 chunks, and each
	 * chain cost ~1.2 us). The first round's scores do not depend on the cut: in flight
	 * while it is found. */
	const int step = a.fx * kFChunk;
	int start = bx * kFChunk;
	float s[kFRound][kFPer];
	auto load_round = [&](int at) {
#pragma unroll
		for (int r = 0; r < kFRound; r++)
			load_chunk(sc, at + r * step, L, s[r]);
	};
	if (L <= k) {
		if (bx == 0 && tid == 0)
			publish_cut(a, row, STRATA_INDEXER_CUT_ALL);
		if (FUSE && bx == 0)
			write_trivial(a, row, L, false);
		return;
	}
	if (bx * kFChunk >= L)
		return; /* block-uniform */
	load_round(start);
	/* the first-level cut from the counts read above; the bin-2 counts are zeroed
	 * under the same barrier */
	for (int i = tid; i < IDX_BINS2; i += kFThreads)
		sm.u.h2[i] = 0;
	if (tid == 0)
		sm.bin = -1, sm.above = 0, sm.n_t = 0, sm.n_c = 0;
	__syncthreads();
	uint32_t bstar, above1;
	const bool cut = filter_cut(a, row, bx, hc, sm, tmp, &bstar, &above1);
	if (cut) {
		unsigned long long *cnt64 =
			reinterpret_cast<unsigned long long *>(a.count + (size_t)row * IDX_CNT);
		const GlobalSink gs{ a, row, sm, cnt64 };
		filter_rounds(a, row, L, start, step, s, bstar, sm, gs);
		__syncthreads();
		if (tid == 0)
			idx_trace(a.trace, IDX_T_FLOOP);
		uint32_t *gh2 = a.hist2 + (size_t)row * IDX_BINS2;
		for (int i = tid; i < IDX_BINS2; i += kFThreads) {
			uint32_t v = sm.u.h2[i];
			if (v)
				atomicAdd(&gh2[i], v);
		}
		if (tid == 0)
			idx_trace(a.trace, IDX_T_FH2);
	}
	if (!FUSE) {
		if (tid == 0)
			idx_trace(a.trace, IDX_T_FILT1);
		return;
	}
	/* The row's done counter: thread 0's release-acquire arrive after the barrier
	 * publishes every thread's list entries and bins (cumulativity through the
	 * barrier) and, at the last CTA, acquires everyone else's for the select's reads
	 * (through L2) after the next barrier. In place of a fence by every thread on
	 * each side: 512K batch 8 one row 45.5 us a call against 46.1 - 46.2, two rows
	 * 56.4 against 57.1 - 57.4 (bench/results/2026-12-02-h200-s32, run 1). */
	__syncthreads();
	if (tid == 0) {
		idx_trace(a.trace, IDX_T_FILT1);
		const uint32_t chunks = (uint32_t)((L + kFChunk - 1) / kFChunk);
		const uint32_t nblk = chunks < (uint32_t)a.fx ? chunks : (uint32_t)a.fx; /* CTAs with work */
		sm.last = idx_arrive(&a.count[(size_t)row * IDX_CNT + 2]) == nblk - 1;
	}
	__syncthreads();
	if (!sm.last)
		return;
	if (cut) {
		select_row<PER>(a, row, L, true, bstar, above1, sm, tmp);
	} else {
		write_trivial(a, row, L, true);
		__syncthreads(); /* this CTA's cut reads are done */
		clear_row(a, row);
	}
}

/* An integer knob from the environment (dflt where unset or empty). */
static int samp_env(const char *name, int dflt)
{
	const char *e = getenv(name);
	return e && *e ? atoi(e) : dflt;
}

#include "kernels/indexer_cluster_int.h" /* filter_cl_kernel, filter_cluster */

/* grid n_rows: the select after a fused scan (its programmatic dependent: the scan's
 * tail filed the lists) or after the filter (the phases benchmark aid). */
template <int PER> /* ids a select thread sorts: one where k <= kFThreads (run_indexer) */
__global__ void __launch_bounds__(kFThreads) select_kernel(Args a)
{
	__shared__ FScan::TempStorage tmp;
	__shared__ SelSmem sm;
	if (threadIdx.x == 0)
		idx_trace(a.trace, IDX_T_SELIN); /* resident: how early a rehearsal could start */
	idx_pdl_wait();
	select_row<PER>(a, (int)blockIdx.x, -1, false, 0, 0, sm, tmp);
}

/* grid n_rows: the select after a sampled tail (the scan's programmatic dependent; the
 * tail filed each row's list). Its own kernel: the select's time is mostly its code's
 * first fetch (bench/results/2026-11-30-h200-s13), so each kernel holds one path. */
template <int PER> /* ids a select thread sorts: one where k <= kFThreads (run_indexer) */
__global__ void __launch_bounds__(kFThreads) select_list_kernel(Args a)
{
	__shared__ FScan::TempStorage tmp;
	__shared__ SelSmem sm;
	if (threadIdx.x == 0)
		idx_trace(a.trace, IDX_T_SELIN);
	/* the scan (a cooperative launch, no programmatic dependent of its predecessor)
	 * began after every earlier kernel ended, so the call's inputs are final here: only
	 * the scan's outputs wait */
	const int row = (int)blockIdx.x, L = row_lim(a, row);
	select_list_prep(a, sm);
	idx_pdl_wait();
	select_list<PER>(a, row, L, sm, tmp);
}

/* Scan kernel variants: 0 = 4 m-tiles unrolled (64 heads), 1 = generic. */
template <int FMT, int R, int V, bool Q8> constexpr auto scan_fn()
{
	if constexpr (V == 0)
		return scan_kernel_v2<FMT, R, 4, Q8>;
	else
		return scan_kernel_v2<FMT, R, 0, Q8>;
}

template <int FMT, int R, int V, bool Q8>
cudaError_t launch_scan(const Args &a, int n_req, int max_limit, cudaStream_t st)
{
	auto kern = scan_fn<FMT, R, V, Q8>();
	size_t smem = (size_t)R * a.mt * 16 * kQStride * 2 + (size_t)R * a.mt * 16 * 4 +
		      (size_t)R * IDX_BINS * 4;
	cudaError_t e;
	if (smem > 48 * 1024) {
		e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		if (e != cudaSuccess)
			return e;
	}
	/* one wave: as many CTAs per request as the GPU holds at once, split over requests.
	 * The occupancy query is cached (keyed by device and shared memory; one cache per
	 * kernel) because the host time of a launch sequence shows up in short calls'
	 * latency. */
	static std::atomic<unsigned long long> cache{ 0 }; /* dev:16 | smem:24 | per_sm:16 | 1 */
	int devi = 0, nsm = 0, per_sm = 0;
	if ((e = cudaGetDevice(&devi)) != cudaSuccess ||
	    (e = cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, devi)) != cudaSuccess)
		return e;
	const unsigned long long key = ((unsigned long long)(devi & 0xffff) << 48) |
				       ((unsigned long long)(smem & 0xffffff) << 24);
	unsigned long long c = cache.load(std::memory_order_relaxed);
	if ((c & 1) && (c & ~0xffffffull) == key) {
		per_sm = (int)((c >> 1) & 0xffff);
	} else {
		if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kThreads, smem)) !=
		    cudaSuccess)
			return e;
		cache.store(key | ((unsigned long long)(per_sm & 0xffff) << 1) | 1ull,
			    std::memory_order_relaxed);
	}
	const long long slots = (long long)(nsm > 0 ? nsm : 1) * (per_sm > 0 ? per_sm : 1);
	const long long units = ((long long)max_limit + kUnit - 1) / kUnit;
	long long gx = slots / n_req;
	gx = gx < 1 ? 1 : gx > units ? units : gx;
	dim3 grid((unsigned)gx, (unsigned)n_req);
	kern<<<grid, kThreads, smem, st>>>(a);
	return cudaSuccess;
}

template <int FMT, int R, bool Q8>
cudaError_t launch_scan_v(const Args &a, int n_req, int max_limit, cudaStream_t st)
{
	/* FP8 keys unrolled over m-tiles spill (their raw prefetch is twice MXFP4's) */
	if constexpr (FMT == STRATA_INDEX_MXFP4)
		if (a.mt == 4)
			return launch_scan<FMT, R, 0, Q8>(a, n_req, max_limit, st);
	return launch_scan<FMT, R, 1, Q8>(a, n_req, max_limit, st);
}

template <int FMT, bool Q8>
cudaError_t launch_scan_q(const Args &a, int R, int n_req, int max_limit, cudaStream_t st)
{
	switch (R) {
	case 1: return launch_scan_v<FMT, 1, Q8>(a, n_req, max_limit, st);
	case 2: return launch_scan_v<FMT, 2, Q8>(a, n_req, max_limit, st);
	case 3: return launch_scan_v<FMT, 3, Q8>(a, n_req, max_limit, st);
	default: return launch_scan_v<FMT, 4, Q8>(a, n_req, max_limit, st);
	}
}

template <int FMT>
cudaError_t launch_scan_fmt(const Args &a, int R, int n_req, int max_limit, cudaStream_t st)
{
	return a.q8 ? launch_scan_q<FMT, true>(a, R, n_req, max_limit, st)
		    : launch_scan_q<FMT, false>(a, R, n_req, max_limit, st);
}

} // namespace

/* The filter launch's shape on a GPU of nsm SMs: fx filter CTAs per row (rows with
 * limit <= k need no filter CTAs beyond the first; 2 per SM in all, one wave at two
 * resident per SM, chunks looped beyond: batch 1 gets one CTA per chunk up to 1M
 * tokens) and, with p->stage, sx staging CTAs per
 * row beside them: stage->max_ctas, or by default as many as fit one wave beside the
 * filter's (two 512-thread CTAs per SM), at most one per filter CTA (staging CTAs
 * queued in front of filter CTAs would put the copies on top-k's path); else 0. */
static void filter_shape(int nsm, const strata_indexer_params *p, int *fx_out, int *sx_out)
{
	const bool scored = p->max_limit > p->topk && p->n_req > 0;
	const long long rows = p->n_rows > 0 ? p->n_rows : 1;
	const long long chunks = ((long long)p->max_limit + kFChunk - 1) / kFChunk;
	long long fx = 1;
	if (scored) {
		/* one wave (two CTAs per SM): at batch, fewer CTAs that walk several chunks
		 * (the next chunk's reads overlap this one's list atomic) beat waves of
		 * one-chunk CTAs, each paying the cut and the done counter */
		long long want = (long long)(nsm > 0 ? nsm : 1) * 2 / rows;
		want = want < 1 ? 1 : want;
		fx = chunks < want ? chunks : want;
	}
	long long sx = 0;
	if (p->stage) {
		long long room = ((long long)2 * nsm - fx * rows) / rows;
		sx = p->stage->max_ctas ? p->stage->max_ctas : room < fx ? room : fx;
		sx = sx > chunks ? chunks : sx;
		sx = sx < 1 ? 1 : sx;
	}
	*fx_out = (int)fx;
	*sx_out = (int)sx;
}

#include "kernels/indexer_trace_int.h" /* trace_begin, trace_end */

/* The fused one-row tail (indexer_tail_int.h): the sampled bound (samp_tail) where the
 * rows may be STRATA_IDX_SAMP_MIN entries long or longer (32,768: s37 measured it faster
 * than the row barrier there at batch 1 and 8, as fast at 32 and 64, and slower at 8,192
 * entries at batch 1 and 32), else the row barrier (scan_tail); STRATA_IDX_SAMP=0
 * the row barrier always, and with cut_out, whose early cut only the row barrier has.
 * STRATA_IDX_SAMP_X: the list's expected size in units of k (3; tests set 0, a
 * sample's largest bucket, to drive the select's path for a list too short);
 * STRATA_IDX_SAMP_SLEEP: ns the sampling CTA sleeps between polls (100). Read at each
 * call. */
static int samp_on(int lim_cap)
{
	return samp_env("STRATA_IDX_SAMP", 1) != 0 && lim_cap >= samp_env("STRATA_IDX_SAMP_MIN", 32768);
}
static int samp_x(void)
{
	return samp_env("STRATA_IDX_SAMP_X", 3);
}

/* The whole indexer on stream s; with ev (5 events) recorded at the start, after the
 * (former) memset, and after each of the scan, filter and select (the phases benchmark
 * aid). */
static int run_indexer(strata_dev *dev, const strata_indexer_params *p, strata_stream *s,
		       cudaEvent_t *ev)
{
	int err = idx_check_params(p);
	strata_attn_prestage_params pst;
	if (!err)
		err = idx_stage_params(p, &pst);
	if (err)
		return err;
	/* the staging copies move 16-byte pieces; its counters are 4-byte words */
	if (p->stage && (((uintptr_t)p->stage->host & 15) || ((uintptr_t)p->stage->stage & 15) ||
			 ((uintptr_t)p->stage->scratch & 3)))
		return -EINVAL;
	if (p->topk > STRATA_INDEXER_MAX_TOPK || p->n_req > 65535 || p->n_rows > 65535 ||
	    p->max_limit > (INT_MAX >> 2) ||
	    p->B % 4 || (p->pages && ((uintptr_t)p->pages & 15)))
		return -EINVAL;
	if (p->n_rows == 0)
		return 0;
	idx_gpu_layout l;
	idx_gpu_layout_of(p, &l);
	if (!p->scratch || p->scratch_bytes < l.total || ((uintptr_t)p->scratch & 15))
		return -EINVAL;
	unsigned char *sb = static_cast<unsigned char *>(p->scratch);
	Args a;
	memset(&a, 0, sizeof a);
	a.heads = p->heads;
	a.mt = (p->heads + 15) / 16;
	a.topk = p->topk;
	a.max_limit = p->max_limit;
	a.max_pages = p->max_pages;
	a.B = p->B;
	a.b_shift = (p->B & (p->B - 1)) ? -1 : __builtin_ctz((unsigned)p->B);
	int64_t cap_pages = (int64_t)p->max_pages * p->B;
	a.lim_cap = cap_pages < p->max_limit ? (int)cap_pages : p->max_limit;
	a.page32 = p->B % 32 == 0;
	a.page_bytes = (size_t)p->B * strata_index_entry_bytes(p->fmt);
	a.q = p->q;
	a.q8 = p->q8;
	a.w = p->w;
	a.req_rows = p->req_rows;
	a.row_limit = p->row_limit;
	a.page_table = p->page_table;
	a.pages = p->pages;
	a.out_ids = p->out_ids;
	a.out_scores = p->out_scores;
	a.hist = reinterpret_cast<uint32_t *>(sb + l.off_hist);
	a.count = reinterpret_cast<uint32_t *>(sb + l.off_count);
	a.hist2 = reinterpret_cast<uint32_t *>(sb + l.off_hist2);
	a.sel = reinterpret_cast<unsigned long long *>(sb + l.off_sel);
	a.cand = reinterpret_cast<unsigned long long *>(sb + l.off_cand);
	a.scores = reinterpret_cast<float *>(sb + l.off_scores);
	a.sstride = l.score_stride;
	a.cap = l.cand_cap;
	a.cut_out = p->cut_out;
	a.cut_epoch = p->cut_epoch;

	cudaStream_t st = reinterpret_cast<cudaStream_t>(kstream(dev, s));
	a.trace = ev ? nullptr : trace_begin(st);
	/* no memset: the counters are zero at rest (indexer_int.h); ms[0] stays as the
	 * phases path's first figure, now two back-to-back events */
	if (ev) {
		cudaEventRecord(ev[0], st);
		cudaEventRecord(ev[1], st);
	}
	const bool scored = p->max_limit > p->topk && p->n_req > 0;
	int fused = 0; /* the scan's tail filed the lists: the select kernel follows */
	if (scored) {
		cudaError_t e;
		if (strata_k_indexer_wgmma(dev, p)) { /* FP8 tensor cores (indexer_wgmma.cu) */
			idx_wg_args w;
			memset(&w, 0, sizeof w);
			w.q8 = p->q8;
			w.pages = p->pages;
			w.w = p->w;
			w.req_rows = p->req_rows;
			w.row_limit = p->row_limit;
			w.page_table = p->page_table;
			w.scores = a.scores;
			w.hist = a.hist;
			w.hcopy = (size_t)p->n_rows * IDX_BINS;
			w.sstride = a.sstride;
			w.max_pages = p->max_pages;
			w.lim_cap = a.lim_cap;
			w.topk = p->topk;
			w.trace = a.trace;
			w.mx = p->fmt == STRATA_INDEX_MXFP4;
			w.rows = p->max_rows <= 1 ? 1 : p->max_rows <= 2 ? 2 : 4;
			/* the fused tail where no staging CTAs ride on the filter launch and no
			 * per-phase events are asked for */
			w.fused = !ev && !p->stage ? (samp_on(a.lim_cap) && !p->cut_out ? 2 : 1) : 0;
			w.samp = reinterpret_cast<uint32_t *>(sb + l.off_samp);
			w.samp_x = samp_x();
			w.samp_sleep = samp_env("STRATA_IDX_SAMP_SLEEP", 100);
			w.count = a.count;
			w.hist2 = a.hist2;
			w.flag = reinterpret_cast<uint32_t *>(sb + l.off_flag);
			w.sel = a.sel;
			w.cand = a.cand;
			w.cap = a.cap;
			w.cut_out = a.cut_out;
			w.cut_epoch = a.cut_epoch;
			e = (cudaError_t)idx_wgmma_scan(&w, p->n_req, p->max_limit, st, &fused);
		} else {
			e = p->fmt == STRATA_INDEX_MXFP4
				? launch_scan_fmt<STRATA_INDEX_MXFP4>(a, p->max_rows, p->n_req,
								      p->max_limit, st)
				: launch_scan_fmt<STRATA_INDEX_FP8>(a, p->max_rows, p->n_req,
								    p->max_limit, st);
		}
		if (e != cudaSuccess) {
			err = strata_dev_check(dev, "indexer: scan shared memory");
			return err ? err : STRATA_E_CUDA;
		}
		if ((err = strata_dev_check(dev, "indexer: scan")))
			return err;
	}
	if (ev)
		cudaEventRecord(ev[2], st);
	if (p->after_scan && cudaEventRecord(reinterpret_cast<cudaEvent_t>(p->after_scan), st) !=
				     cudaSuccess) {
		err = strata_dev_check(dev, "indexer: after_scan event");
		return err ? err : STRATA_E_CUDA;
	}
	int nsm = 0;
	if (scored || p->stage) {
		int devi = 0;
		if (cudaGetDevice(&devi) != cudaSuccess ||
		    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, devi) != cudaSuccess) {
			err = strata_dev_check(dev, "indexer: device attributes");
			return err ? err : STRATA_E_CUDA;
		}
	}
	int fx = 1, sx = 0;
	filter_shape(nsm, p, &fx, &sx);
	a.fx = fx;
	a.sx = sx;
	if (p->stage)
		a.st = *p->stage;
	dim3 fg((unsigned)(fx + sx), (unsigned)p->n_rows);
	/* the filter as a programmatic dependent of the scan (its launch overlaps the
	 * scan's tail; it waits for the scan's completion first thing), not across an
	 * event */
	auto launch = [&](void (*kern)(Args), dim3 grid, bool pdl) {
		cudaLaunchConfig_t cfg = {};
		cudaLaunchAttribute at[1];
		cfg.gridDim = grid;
		cfg.blockDim = dim3(kFThreads);
		cfg.stream = st;
		at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		at[0].val.programmaticStreamSerializationAllowed = 1;
		cfg.attrs = at;
		cfg.numAttrs = pdl ? 1 : 0;
		return cudaLaunchKernelEx(&cfg, kern, a) == cudaSuccess;
	};
	if (fused) {
		a.sw = reinterpret_cast<uint32_t *>(sb + l.off_samp);
		/* the list's select with one id a thread to sort where k allows (its code
		 * executed once, cold: each unrolled copy is fetched, s13) */
		constexpr int kPer = STRATA_INDEXER_MAX_TOPK / kFThreads;
		const bool one = p->topk <= kFThreads;
		auto kern = fused == 2 ? (one ? select_list_kernel<1> : select_list_kernel<kPer>)
				       : (one ? select_kernel<1> : select_kernel<kPer>);
		if (!launch(kern, dim3((unsigned)p->n_rows),
			    !p->after_scan)) {
			err = strata_dev_check(dev, "indexer: select launch");
			return err ? err : STRATA_E_CUDA;
		}
		if (a.trace)
			trace_end(st, a.trace);
		return strata_dev_check(dev, "indexer: select");
	}
	if (!ev) {
		constexpr int kPer = STRATA_INDEXER_MAX_TOPK / kFThreads;
		auto cl_kern = p->topk <= kFThreads ? filter_cl_kernel<1> : filter_cl_kernel<kPer>;
		const int c = scored && !sx ? filter_cluster(cl_kern, fx, p) : 0;
		if (c) {
			a.fx = c;
			const int loc = samp_env("STRATA_IDX_FCL_LOC", kClLoc);
			a.cl_loc = loc < 0 ? 0 : loc > kClLoc ? kClLoc : loc;
			cudaLaunchConfig_t cfg;
			cudaLaunchAttribute at[2];
			cluster_config(&cfg, at, c, p->n_rows);
			cfg.stream = st;
			at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
			at[1].val.programmaticStreamSerializationAllowed = 1;
			cfg.numAttrs = p->after_scan ? 1 : 2;
			if (cudaLaunchKernelEx(&cfg, cl_kern, a) != cudaSuccess) {
				err = strata_dev_check(dev, "indexer: cluster filter+select launch");
				return err ? err : STRATA_E_CUDA;
			}
			if (a.trace)
				trace_end(st, a.trace);
			return strata_dev_check(dev, "indexer: cluster filter+select");
		}
		/* filter with the row's select fused into its last CTA. (The select as the
		 * filter's own programmatic dependent measured no faster on the H200: its
		 * grid started ~1 us after the filter's last CTA, as long as the fences and
		 * counter of the fused path took then; bench/results/2026-11-30-h200-s8.) */
		if (!launch(p->topk <= kFThreads ? filter_kernel<true, 1> : filter_kernel<true, kPer>,
			    fg, !p->after_scan)) {
			err = strata_dev_check(dev, "indexer: filter+select launch");
			return err ? err : STRATA_E_CUDA;
		}
		if (a.trace)
			trace_end(st, a.trace);
		return strata_dev_check(dev, "indexer: filter+select");
	}
	if (scored || a.sx) { /* unscored rows: the staging CTAs still have work */
		filter_kernel<false><<<fg, kFThreads, 0, st>>>(a);
		if ((err = strata_dev_check(dev, "indexer: filter")))
			return err;
	}
	cudaEventRecord(ev[3], st);
	select_kernel<STRATA_INDEXER_MAX_TOPK / kFThreads><<<p->n_rows, kFThreads, 0, st>>>(a);
	err = strata_dev_check(dev, "indexer: select");
	cudaEventRecord(ev[4], st);
	return err;
}

extern "C" int strata_k_indexer_gpu(strata_dev *dev, const strata_indexer_params *p,
				    strata_stream *s)
{
	return run_indexer(dev, p, s, nullptr);
}

extern "C" int strata_k_indexer_phases_gpu(strata_dev *dev, const strata_indexer_params *p,
					   strata_stream *s, float ms[4])
{
	cudaEvent_t ev[5];
	int n = 0, err = 0;
	for (; n < 5; n++)
		if (cudaEventCreate(&ev[n]) != cudaSuccess)
			break;
	if (n < 5) {
		err = strata_dev_check(dev, "indexer phases: events");
		err = err ? err : STRATA_E_CUDA;
		goto out;
	}
	for (int i = 0; i < 4; i++)
		ms[i] = 0.0f;
	if ((err = run_indexer(dev, p, s, ev)))
		goto out;
	if (cudaEventSynchronize(ev[4]) != cudaSuccess) {
		err = strata_dev_check(dev, "indexer phases: sync");
		err = err ? err : STRATA_E_CUDA;
		goto out;
	}
	for (int i = 0; i < 4; i++)
		cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]);
out:
	while (n > 0)
		cudaEventDestroy(ev[--n]);
	return err;
}

extern "C" int strata_k_indexer_stage_ctas_gpu(strata_dev *dev, const strata_indexer_params *p,
					       int *filter)
{
	(void)dev;
	int devi = 0, nsm = 0;
	if (cudaGetDevice(&devi) != cudaSuccess ||
	    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, devi) != cudaSuccess) {
		int err = strata_dev_check(dev, "indexer: device attributes");
		return err ? err : STRATA_E_CUDA;
	}
	int fx = 1, sx = 0;
	filter_shape(nsm, p, &fx, &sx);
	if (filter)
		*filter = fx;
	return sx;
}
