/*
 * Private to kernels/: the indexer's pieces shared by the CPU twin (indexer_cpu.c),
 * the GPU kernels (indexer.cu) and the unit tests: key dequantisation, the register
 * layout the tensor-core scan uses, score ordering, and the GPU scratch layout.
 *
 * Register layout of the GPU scan (mma.sync m16n8k16, keys are the B operand). In a
 * key fragment, lane quarter c = lane % 4 owns a contiguous quarter of the key's
 * payload: MXFP4 bytes [16c, 16c+16) (exactly scale group c), FP8 bytes [32c, 32c+32).
 * It expands that quarter into 16 bf16 pairs with a few shifts and masks (no table),
 * and pair p feeds k-step p / 2 (b0 for even p, b1 for odd p). The dot product does
 * not care in which order dims are summed, so the query is stored permuted to match:
 * dim d sits at logical position idx_kl_of_dim(fmt, d) of the mma's k axis.
 */
#ifndef STRATA_KERNELS_INDEXER_INT_H
#define STRATA_KERNELS_INDEXER_INT_H

#include "kernels/codec.h"
#include "kernels/kernels.h"
#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

#define IDX_DIM 128

/* ---- exact dequantisation (CPU twin; the values are bf16-exact) ------------------- */

/* Key `off` of a page in the reference layout: values to v[128], fp32 scale to *s
 * (FP8's per-vector scale; 1 for MXFP4, whose group scales are folded into v). */
STRATA_HD void idx_key_dequant(strata_index_fmt fmt, const uint8_t *page, int B, int off,
			       float *v, float *s)
{
	if (fmt == STRATA_INDEX_MXFP4) {
		const uint8_t *pay = page + (size_t)off * 64;
		const uint8_t *sc = page + (size_t)B * 64 + (size_t)off * 4;
		for (int d = 0; d < IDX_DIM; d++) {
			uint8_t b = pay[d >> 1];
			uint8_t code = (d & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15);
			v[d] = codec_e2m1_decode(code) * codec_ue8m0_decode(sc[d >> 5]);
		}
		*s = 1.0f;
	} else {
		const uint8_t *pay = page + (size_t)off * 128;
		for (int d = 0; d < IDX_DIM; d++)
			v[d] = codec_e4m3_decode(pay[d]);
		memcpy(s, page + (size_t)B * 128 + (size_t)off * 4, sizeof *s);
	}
}

/* ---- GPU register layout (kept here so the CPU tests can check it) ------------------ */

/* MXFP4: nibbles i (low half) and i+4 (high half) of a payload word as bf16x2 bits;
 * the values are e2m1 * 2^-126 (the shift puts the 3 code bits into the exponent's
 * low bits and the mantissa's top bit; code 1 = 0.5 lands on a bf16 subnormal). */
STRATA_HD uint32_t idx_fp4_pair_bits(uint32_t word, int i)
{
	uint32_t x = word >> (4 * i);
	return ((x << 6) & 0x01C001C0u) | ((x << 12) & 0x80008000u);
}
#define IDX_FP4_PAIR_SCALE_BITS 0x7E80u /* bf16 2^126 undoes the shift */

/* FP8: bytes sub (low half) and sub+2 (high half) of a payload word as bf16x2 bits;
 * the values are e4m3 * 2^-120 (e4m3 subnormals land on bf16 subnormals). */
STRATA_HD uint32_t idx_fp8_pair_bits(uint32_t word, int sub)
{
	if (sub)
		return ((word >> 4) & 0x07F007F0u) | (word & 0x80008000u);
	return ((word << 4) & 0x07F007F0u) | ((word << 8) & 0x80008000u);
}
#define IDX_FP8_PAIR_SCALE_BITS 0x7B80u /* bf16 2^120 */

/* The FP8 tensor-core (wgmma) scan's inputs (indexer_wgmma.cu, built for sm_90a): FP8 or
 * MXFP4 keys with B = 64, FP8 queries of 64 heads (16-byte aligned), 1 - 4 rows per
 * request (a CTA scores all of its request's rows on each key tile it reads). It writes
 * scores and the first-level histograms as the default scan does. */
typedef struct idx_wg_args {
	const uint8_t *q8, *pages;
	const float *w;
	const int32_t *req_rows, *row_limit, *page_table;
	float *scores;
	uint32_t *hist;            /* copy 0; copy c at hist + c hcopy (IDX_HCOPIES) */
	size_t hcopy;
	size_t sstride;
	int max_pages, lim_cap, topk;
	unsigned long long *trace; /* IDX_TRACE_N timestamps, or null (run_indexer) */
	int mx;                    /* MXFP4 keys (else FP8) */
	/* the fused tail (indexer_tail_int.h): asked for (1: scan_tail, the row's barrier;
	 * 2: samp_tail, a sampled bound); the filter's outputs */
	int fused;
	uint32_t *count, *hist2, *flag; /* flag: [rows][IDX_FLAGS] */
	uint32_t *samp;                 /* [rows][IDX_SAMPW]: samp_tail's bound and sample */
	int samp_x;                     /* samp_tail: the list's expected size in units of k */
	int samp_tiles;                 /* the staged filing (samp_staged): the first tiles of
					 * each scan CTA sampled, 1 .. 16 */
	unsigned samp_sleep;            /* samp_agg: ns asleep between polls of the sample */
	unsigned long long *sel, *cand; /* [rows][topk], [rows][cap] keys (idx_key64) */
	size_t cap;
	unsigned long long *cut_out, cut_epoch; /* strata_indexer_params.cut_out */
	int rows;                  /* rows a CTA scores: 1, 2 or 4, >= every request's */
	int ranges;                /* 0 strided tiles, 1 / 2 contiguous ranges (indexer_wgmma.cu wg_ranges) */
	int tstride;               /* tiles between a CTA's tiles: the grid's x, or 1 with ranges */
	int n128;                  /* two FP8 rows a CTA by one MMA of N = 128 (wgmma_ss4_n128) */
} idx_wg_args;

/* Diagnostic timeline of one indexer call (STRATA_IDX_TRACE=1; run_indexer prints it):
 * %globaltimer ns at these points, each kept twice: the earliest CTA's (slot 2 at) and
 * the latest's (slot 2 at + 1). */
enum { IDX_T_SCAN0, IDX_T_FILT0, IDX_T_SCAN1, IDX_T_FILT1, IDX_T_CUT2, IDX_T_CLASS,
       IDX_T_SORT0, IDX_T_SORT1, IDX_T_END,
       /* inside the select: its start (after the done counter), its list
	* reads used; inside the sort: counted, scanned, scattered */
       IDX_T_SEL0, IDX_T_SELLD, IDX_T_SCNT, IDX_T_SSCAN, IDX_T_SSCAT,
       /* a scan CTA's histogram flush performed (traced calls fence it) */
       IDX_T_SCAN2,
       /* inside a filter CTA (or a fused scan's tail): its cut found, its chunks
	* classified, its bins flushed */
       IDX_T_FCUT, IDX_T_FLOOP, IDX_T_FH2,
       /* the select kernel resident (its entry, before it waits for the scan) */
       IDX_T_SELIN,
       /* a sampled tail's sampling CTA: its start, its sample histogram complete; then
	* (a count, not a time) the length of the row's list at the select */
       IDX_T_AGG0, IDX_T_AGG1, IDX_T_NLIST,
       /* a scan CTA's sample counted; the sampling CTA's bound found */
       IDX_T_SAMPW, IDX_T_AGG2,
       /* inside a filter CTA, its first round: scores classed and counted; its places
	* in the row's lists taken */
       IDX_T_FP1, IDX_T_FAT, IDX_TRACE_N };

#ifdef STRATA_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
/* 1 when the sm_90a kernel runs on the current device (a compute capability 9.0 GPU). */
int idx_wgmma_ready(void);
/* Launches the scan on stream (a cudaStream_t); returns a cudaError_t. *fused: whether
 * the launch runs the fused tail (a->fused asked for it; the select kernel follows). */
int idx_wgmma_scan(const idx_wg_args *a, int n_req, int max_limit, void *stream, int *fused);
#ifdef __cplusplus
}
#endif
#endif

/* ---- MXFP4 keys as e4m3 (the wgmma scan converts them in registers) ------------------
 * A key's value in group g is e2m1 x 2^(s_g - 127). With m = max_g s_g it is written as
 * e4m3(e2m1 x 2^t) x 2^(m - 133), t = s_g - m + 6 <= 6: e2m1 magnitudes are {0, .5, 1,
 * 1.5, 2, 3, 4, 6}, so every t in [-8, 6] is exact in e4m3 (6 x 2^6 = 384 <= 448, and
 * 0.5 x 2^-8 is e4m3's least subnormal). A group more than 14 octaves below its key's
 * largest (t < -8) is read as zero: its values are below 2^-14 of the largest group's
 * largest possible value. */

/* prmt: byte j of the result is byte (sel nibble j) of hi:lo. Callers keep bit 3 of
 * sel's nibbles 0 - 3 clear (prmt would replicate a sign there); bits 16 - 31 of sel are
 * ignored, as prmt ignores them. */
STRATA_HD uint32_t idx_prmt(uint32_t lo, uint32_t hi, uint32_t sel)
{
#ifdef __CUDA_ARCH__
	uint32_t r; /* opaque to the compiler, which would otherwise mask sel's high half too */
	asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
	return r;
#else
	uint64_t v = lo | (uint64_t)hi << 32;
	uint32_t r = 0;
	for (int j = 0; j < 4; j++)
		r |= (uint32_t)(v >> (8 * ((sel >> (4 * j)) & 7)) & 255u) << (8 * j);
	return r;
#endif
}

/* The 8 e4m3 magnitudes of e2m1 codes 0-7 at group offset d = s_g - m (<= 0), as two prmt
 * tables (codes 0-3 in lo, 4-7 in hi). */
STRATA_HD void idx_mx_lut_normal(int d, uint32_t *lo, uint32_t *hi)
{
	/* d >= -11 (t = d + 6 >= -5): all normal, the t = -5 bytes with the exponent raised
	 * by t + 5 */
	const uint32_t add = (uint32_t)(d + 11) * 8u;
	*lo = 0x14100800u + add * 0x01010100u; /* 0, 2^-6, 2^-5, 1.5 x 2^-5 */
	*hi = 0x24201C18u + add * 0x01010101u; /* 2^-4, 1.5 x 2^-4, 2^-3, 1.5 x 2^-3 */
}
STRATA_HD void idx_mx_lut(int d, uint32_t *lo, uint32_t *hi)
{
	const int t = d + 6;
	if (t >= -5) {
		idx_mx_lut_normal(d, lo, hi);
		return;
	}
	*lo = *hi = 0;
	if (t < -8)
		return; /* read as zero (above) */
	static const uint32_t twice[8] = { 0, 1, 2, 3, 4, 6, 8, 12 }; /* 2 x e2m1 */
	for (int c = 1; c < 8; c++) {
		const uint32_t u = twice[c] << (t + 8); /* the value in units of 2^-9 */
		uint32_t byte = u; /* below 8: a subnormal's mantissa */
		if (u >= 8) {
			int e = 3;
			while (u >> (e + 1))
				e++;
			byte = (uint32_t)(e - 2) << 3 | ((u >> (e - 3)) & 7u);
		}
		if (c < 4)
			*lo |= byte << (8 * c);
		else
			*hi |= byte << (8 * (c - 4));
	}
}

/* 8 e2m1 codes (x's nibbles, in dim order) as 8 e4m3 bytes: codes 0-3 to *o0, 4-7 to
 * *o1. Magnitudes by table (the selectors: x without its sign bits; prmt reads the low
 * 16 bits, so codes 4-7 take one shift); each code's sign bit (nibble bit 3) lands on its
 * byte's bit 7 by one byte permute of x and x << 4 (byte j of x << 4 holds code 2j's
 * sign at bit 7, byte j of x code 2j + 1's). Nine instructions for eight codes. */
STRATA_HD void idx_mx_eight(uint32_t x, uint32_t lo, uint32_t hi, uint32_t *o0, uint32_t *o1)
{
	const uint32_t mag = x & 0x77777777u, t = x << 4;
	*o0 = idx_prmt(lo, hi, mag) | (idx_prmt(t, x, 0x5140u) & 0x80808080u);
	*o1 = idx_prmt(lo, hi, mag >> 16) | (idx_prmt(t, x, 0x7362u) & 0x80808080u);
}

/* The largest of a key's 4 group scale bytes. */
STRATA_HD uint32_t idx_mx_max_scale(uint32_t sc)
{
#ifdef __CUDA_ARCH__
	const uint32_t b1 = __byte_perm(sc, 0, 0x4441u), b2 = __byte_perm(sc, 0, 0x4442u);
	return max(max(sc & 255u, b1), max(b2, sc >> 24));
#else
	const uint32_t a = sc & 255u, b = (sc >> 8) & 255u, c = (sc >> 16) & 255u, d = sc >> 24;
	const uint32_t ab = a > b ? a : b, cd = c > d ? c : d;
	return ab > cd ? ab : cd;
#endif
}

/* 2^(m - 133): the key's scale (a subnormal float below m = 7). */
STRATA_HD float idx_mx_key_scale(uint32_t m)
{
	return codec_u2f(m >= 7 ? (m - 6) << 23 : 1u << (m + 16));
}

/* Half of it, 2^(m - 134) (a subnormal below m = 8): the same bits as
 * 0.5f * idx_mx_key_scale(m), made directly. */
STRATA_HD float idx_mx_key_half_scale(uint32_t m)
{
	return codec_u2f(m >= 8 ? (m - 7) << 23 : 1u << (m + 15));
}

/* Key dim of pair p's half h (0 low, 1 high) in quarter c. */
STRATA_HD int idx_dim_of_pair(strata_index_fmt fmt, int c, int p, int h)
{
	if (fmt == STRATA_INDEX_MXFP4) /* word p/4 = dims 32c + 8(p/4) + 0..7 */
		return 32 * c + 8 * (p >> 2) + (p & 3) + 4 * h;
	return 32 * c + 4 * (p >> 1) + (p & 1) + 2 * h; /* word p/2 = dims 32c + 4(p/2) + 0..3 */
}

/* Logical mma k position (16 * k-step + position in the step) of pair p's half h in
 * quarter c: b0 (even p) holds k = 2c + h, b1 (odd p) holds k = 8 + 2c + h. */
STRATA_HD int idx_kl_of_pair(int c, int p, int h)
{
	return 16 * (p >> 1) + ((p & 1) ? 8 : 0) + 2 * c + h;
}

/* Inverse: the logical position of key dim d. */
STRATA_HD int idx_kl_of_dim(strata_index_fmt fmt, int d)
{
	int c = d >> 5, rem = d & 31, p, h;
	if (fmt == STRATA_INDEX_MXFP4) {
		p = 4 * (rem >> 3) + (rem & 3);
		h = (rem >> 2) & 1;
	} else {
		p = 2 * (rem >> 2) + (rem & 1);
		h = (rem >> 1) & 1;
	}
	return idx_kl_of_pair(c, p, h);
}

/* ---- ordering ------------------------------------------------------------------------ */

/* Order-preserving map of a float to uint32 (-0 and +0 equal). */
STRATA_HD uint32_t idx_ord32(float f)
{
	uint32_t u = codec_f2u(f);
	if ((u & 0x7fffffffu) == 0)
		return 0x80000000u;
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* fp16 bits of f, rounded to nearest even (overflow to inf, NaN kept quiet): the
 * conversion the GPU's __float2half_rn does, in integer arithmetic for the CPU. */
STRATA_HD uint16_t idx_half_rn(float f)
{
	const uint32_t x = codec_f2u(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
	if (ax >= 0x7f800000u) /* inf, NaN */
		return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
	if (ax >= 0x477ff000u) /* 65520 and up round to inf */
		return (uint16_t)(sign | 0x7c00u);
	if (ax >= 0x38800000u) { /* a normal half: rebias the exponent, round 13 bits off */
		uint32_t h = (ax - 0x38000000u) >> 13, rem = ax & 0x1fffu;
		if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
			h++;
		return (uint16_t)(sign | h);
	}
	if (ax <= 0x33000000u) /* up to 2^-25 (a tie with 0): zero */
		return (uint16_t)sign;
	/* a subnormal half: units of 2^-24 */
	const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, sh = 126u - e;
	uint32_t h = m >> sh;
	const uint32_t rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u);
	if (rem > half || (rem == half && (h & 1u)))
		h++;
	return (uint16_t)(sign | h);
}

/* The GPU indexer's score bucket (strata_k_indexer_bucket): the top 11 bits of the
 * score's fp16 in an order-preserving encoding, -0 counted as +0. */
STRATA_HD uint32_t idx_bucket(float s)
{
	uint16_t u = idx_half_rn(s);
	if (!(u & 0x7fffu))
		u = 0;
	u = (u & 0x8000u) ? (uint16_t)~u : (uint16_t)(u | 0x8000u);
	return (uint32_t)u >> 5;
}

#ifdef __CUDACC__
/* idx_bucket with the hardware's fp16 rounding (the same bucket): -0 is +0 here, as in
 * the selection order (idx_ord32), so the two tie in one bucket and the lower id wins
 * between them as between any equal scores. */
__device__ __forceinline__ uint32_t idx_bucket_dev(float s)
{
	/* + 0 turns -0 into +0 (round to nearest); then the ordered map as one xor: a
	 * negative's 16 bits all flip (~u), a positive's sign bit only (u | 0x8000). Equal
	 * to idx_bucket on all 63,490 non-NaN fp16 values (bench/results/
	 * 2026-11-30-h200-s14/bucket-map-check.c); 7 instructions, where 11 were. */
	const uint32_t u = __half_as_ushort(__hadd(__float2half_rn(s), __ushort_as_half(0)));
	uint32_t neg; /* 0xffff for a negative u, else 0 (prmt's sign-replicate mode) */
	asm("prmt.b32 %0, %1, 0, 0x4499;" : "=r"(neg) : "r"(u));
	return (u ^ (neg | 0x8000u)) >> 5;
}

/* atomicAdd(addr, 1) for every lane that calls it with on set, as one atomic per
 * distinct address in the warp: equal scores land in one bin, and 32 lanes adding 1
 * to one shared word one at a time serialise (a row of zero scores, a crowded tie).
 * Returns the lane's old value plus its rank among its address's lanes (0 when off). */
__device__ __forceinline__ uint32_t agg_inc(uint32_t *addr, bool on)
{
	const unsigned act = __activemask();
	const unsigned onm = __ballot_sync(act, on);
	if (!on)
		return 0;
	const unsigned grp = __match_any_sync(onm, (unsigned long long)(uintptr_t)addr);
	const int lane = (int)(threadIdx.x & 31), leader = __ffs(grp) - 1;
	uint32_t base = 0;
	if (lane == leader)
		base = atomicAdd(addr, (uint32_t)__popc(grp));
	base = __shfl_sync(grp, base, leader);
	return base + (uint32_t)__popc(grp & ((1u << lane) - 1u));
}

/* Sums v over the 8 lanes of a warp that share lane % 4 (g = lane / 4 = lane bits 4, 3,
 * 2), as a reduce-scatter: 4 + 2 + 1 rounds of N / 8 shuffles each, not 3 of N. Lane g
 * ends with the sums of v[N/8 g .. N/8 (g + 1)) in out. */
template <int N>
__device__ __forceinline__ void idx_reduce_scatter8(const float (&v)[N], float (&out)[N / 8], int g)
{
	static_assert(N % 8 == 0, "N values: 8 lanes' shares");
	const bool b0 = g & 1, b1 = g & 2, b2 = g & 4;
	float y[N / 2], z[N / 4];
#pragma unroll
	for (int j = 0; j < N / 2; j++) { /* keep the half of g bit 2, send the other */
		const float snd = b2 ? v[j] : v[j + N / 2], kp = b2 ? v[j + N / 2] : v[j];
		y[j] = kp + __shfl_xor_sync(0xffffffffu, snd, 16);
	}
#pragma unroll
	for (int j = 0; j < N / 4; j++) {
		const float snd = b1 ? y[j] : y[j + N / 4], kp = b1 ? y[j + N / 4] : y[j];
		z[j] = kp + __shfl_xor_sync(0xffffffffu, snd, 8);
	}
#pragma unroll
	for (int j = 0; j < N / 8; j++) {
		const float snd = b0 ? z[j] : z[j + N / 8], kp = b0 ? z[j + N / 8] : z[j];
		out[j] = kp + __shfl_xor_sync(0xffffffffu, snd, 4);
	}
}

/* Programmatic dependent launch (sm_90+; no-ops before): the scan lets the filter's
 * launch begin once every scan CTA has passed its trigger, and the filter waits for the
 * scan's completion and memory before it touches anything. */
__device__ __forceinline__ void idx_pdl_trigger(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void idx_trace(unsigned long long *t, int at)
{
	if (!t)
		return;
	unsigned long long ns;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
	atomicMin(t + 2 * at, ns);
	atomicMax(t + 2 * at + 1, ns);
}
/* STRATA_IDX_TRACE's per-scan-CTA records, after the 2 IDX_TRACE_N points: 4 words a
 * CTA (blockIdx.y gridDim.x + blockIdx.x, the first IDX_TRACE_CTAS): its start and the end
 * of its tile loop (%globaltimer ns), its SM, and its tiles | blockIdx.y << 32. Thread 0
 * calls it at the scan0 (end 0) and scan1 (end 1) points. */
#define IDX_TRACE_CTAS 8192
static __device__ __noinline__ void idx_trace_cta(unsigned long long *t, int end, unsigned long long tiles)
{
	const unsigned cid = blockIdx.y * gridDim.x + blockIdx.x;
	if (!t || cid >= IDX_TRACE_CTAS)
		return;
	unsigned long long ns, *r = t + 2 * IDX_TRACE_N + 4 * (size_t)cid;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
	if (end) {
		r[1] = ns;
		return;
	}
	unsigned sm;
	asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
	r[0] = ns;
	r[2] = sm;
	r[3] = tiles | (unsigned long long)blockIdx.y << 32;
}

/* A count in trace slot `at` (its least and greatest over the call) in place of a time. */
__device__ __forceinline__ void idx_trace_val(unsigned long long *t, int at, unsigned long long v)
{
	if (!t)
		return;
	atomicMin(t + 2 * at, v);
	atomicMax(t + 2 * at + 1, v);
}

/* idx_trace once this CTA's earlier writes and atomics are performed (a fence, then a
 * barrier: every thread of the CTA calls it); nothing, not even the fence, untraced. */
__device__ __forceinline__ void idx_trace_fenced(unsigned long long *t, int at)
{
	if (!t)
		return;
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0)
		idx_trace(t, at);
}

/* A CTA's arrive at a counter (its thread 0, after a barrier): a cumulative release of
 * the CTA's writes and an acquire of the earlier arrivals'; returns the count before it. */
__device__ __forceinline__ uint32_t idx_arrive(uint32_t *ctr)
{
	uint32_t old;
	asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(old) : "l"(ctr) : "memory");
	return old;
}

__device__ __forceinline__ void idx_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
#endif

/* Unique selection key: higher score first, then lower id. */
STRATA_HD uint64_t idx_key64(float score, int32_t id)
{
	return ((uint64_t)idx_ord32(score) << 32) | (uint64_t)(0xffffffffu - (uint32_t)id);
}

/* ---- GPU scratch layout (host computes it, kernels use it) ------------------------ */

#define IDX_BINS 2048         /* first-pass histogram buckets (fp16 of the score) */
#define IDX_BINS2 4096        /* second-level bins inside the threshold bucket */
#define IDX_HCOPIES 4         /* copies of the first-pass histogram a fused scan adds to */
#define IDX_CAND_CAP 32768    /* threshold-bucket candidates kept per row */
#define IDX_CNT 8             /* per-row counters: selected, candidates, filter CTAs done
			       * (a fused scan's CTAs arrived), a fused scan's b* + 1 and
			       * count above b* (indexer_tail_int.h scan_tail), 3 spare */
#define IDX_FLAGS 2048        /* per-row words: a fused scan's CTAs' release flags */
#define IDX_SAMP_KEYS 4       /* keys of its first tile each CTA of a sampled tail samples */
#define IDX_SAMPW (32 + 4096 + 4096) /* per-row words: the bound (word 0), the sample
			       * (from word 32; indexer_wgmma.cu kSampWords), the staged
			       * filing's stored sample (from IDX_SAMP_STORE) */
#define IDX_SAMP_STORE (32 + 4096) /* a row's stored sample: 16-bit slots, 64 a scan CTA
			       * (4 warps x 16 tiles), each bucket + 1 (0: empty) */

#ifdef __CUDACC__
/* Float value of an ordered fp16 pattern (the inverse of idx_bucket_dev's map). */
__device__ __forceinline__ float idx_ord16_value(uint32_t o)
{
	unsigned short u = (o & 0x8000u) ? (unsigned short)(o & 0x7fffu) : (unsigned short)(~o & 0xffffu);
	return __half2float(__ushort_as_half(u));
}

/* Second level inside bucket b: ordered score bits relative to a lower bound of the
 * bucket, shifted so the bucket's span fits IDX_BINS2 bins. Clamping keeps idx_sub_of
 * monotone even if a bound were off, so the bounds only matter for speed. */
__device__ __forceinline__ void idx_sub_bounds(uint32_t b, uint32_t *base, int *shift)
{
	uint32_t lo = 0, hi = 0xffffffffu;
	if (b > 0) {
		float f = idx_ord16_value((b << 5) - 1); /* the fp16 value just below the bucket */
		if (!isnan(f))
			lo = idx_ord32(f);
	}
	if (b + 1 < IDX_BINS) {
		float f = idx_ord16_value((b + 1) << 5); /* the fp16 value just above it */
		if (!isnan(f))
			hi = idx_ord32(f);
	}
	uint32_t span = hi > lo ? hi - lo : 0xffffffffu;
	int bits = 32 - __clz((int)span);
	*base = lo;
	*shift = bits > 12 ? bits - 12 : 0;
}

__device__ __forceinline__ uint32_t idx_sub_of(uint32_t o32, uint32_t base, int shift)
{
	if (o32 <= base)
		return 0;
	uint32_t v = (o32 - base) >> shift;
	return v < IDX_BINS2 - 1 ? v : IDX_BINS2 - 1;
}
#endif

typedef struct idx_gpu_layout {
	size_t score_stride;  /* floats per row */
	size_t cand_cap;      /* candidates per row */
	size_t off_hist, off_count, off_hist2, off_flag, off_samp, off_sel, off_cand, off_scores;
	size_t total;
	size_t zero_bytes;    /* [0, zero_bytes): the counters, zero at rest (see below) */
} idx_gpu_layout;

static inline size_t idx_align(size_t x)
{
	return (x + 255) & ~(size_t)255;
}

/* The counters (hist, count, hist2, flag, samp) come first and are zero at rest: the
 * caller zeroes the scratch once after allocating it, and each call leaves them zero
 * again (the row's last filter CTA, or the select, clears what its row used; a fused FP8
 * scan's last CTA zeroes histogram copies 1 .. IDX_HCOPIES - 1; a sampled tail's
 * sampling CTA its sample, the select its bound), so no call needs a memset.
 * The rest (selected ids, candidates, scores) is written before it is read in every
 * call. */
static inline void idx_gpu_layout_of(const strata_indexer_params *p, idx_gpu_layout *l)
{
	size_t rows = (size_t)(p->n_rows > 0 ? p->n_rows : 0);
	size_t lim = (size_t)(p->max_limit > 0 ? p->max_limit : 0);
	l->score_stride = (lim + 63) & ~(size_t)63;
	l->cand_cap = lim < IDX_CAND_CAP ? lim : IDX_CAND_CAP;
	l->off_hist = 0; /* IDX_HCOPIES copies, each rows x IDX_BINS (copy 0 every path's) */
	l->off_count = idx_align(IDX_HCOPIES * rows * IDX_BINS * 4);
	l->off_hist2 = l->off_count + idx_align(rows * IDX_CNT * 4);
	l->off_flag = l->off_hist2 + idx_align(rows * IDX_BINS2 * 4);
	l->off_samp = l->off_flag + idx_align(rows * IDX_FLAGS * 4);
	l->off_sel = l->off_samp + idx_align(rows * IDX_SAMPW * 4);
	l->zero_bytes = l->off_sel;
	l->off_cand = l->off_sel + idx_align(rows * (size_t)(p->topk > 0 ? p->topk : 0) * 8);
	l->off_scores = l->off_cand + idx_align(rows * l->cand_cap * 8);
	l->total = l->off_scores + idx_align(rows * l->score_stride * 4);
}

#ifdef __cplusplus
extern "C" {
#endif
/* Checks the host fields both backends share; 0 or -EINVAL. */
int idx_check_params(const strata_indexer_params *p);
/* p->stage as the prestage parameters of this call (scores, cuts and limits are the
 * call's: placeholders until it runs), checked as strata_k_attn_prestage would: 0 or
 * -EINVAL. NULL stage: 0. */
int idx_stage_params(const strata_indexer_params *p, struct strata_attn_prestage_params *out);
#ifdef STRATA_HAVE_CUDA
int strata_k_indexer_gpu(strata_dev *dev, const strata_indexer_params *p, strata_stream *s);
int strata_k_indexer_stage_ctas_gpu(strata_dev *dev, const strata_indexer_params *p,
				    int *filter);
int strata_k_indexer_phases_gpu(strata_dev *dev, const strata_indexer_params *p, strata_stream *s,
				float ms[4]);
#endif
#ifdef __cplusplus
}
#endif

#endif
