/*
 * GPU sparse MQA attention with sink, and the LSE combine (kernels.h, "attention").
 *
 * One block per (query row, group of HG heads, chunk of the entry list), 256 threads.
 * HG is 64, 32 or 16 (a template parameter; a head's arithmetic does not depend on
 * it): the largest that still gives about two waves of blocks, so at batch 32 each
 * entry is read and dequantised once per row and chunk, while at batch 1 more blocks
 * share the work. The block holds its heads' queries in shared memory (fp32) and walks
 * its chunk in tiles of 32 entries:
 *  - the raw bytes of the next tile arrive by cp.async while the current one is being
 *    computed (one raw buffer: copy issued right after the dequantisation barrier);
 *  - the tile is dequantised exactly to fp32 once into shared memory (K = V, MQA);
 *  - warp w owns heads w, w + 8, ..., (RH = HG / 8 of them) for both products, so its
 *    online softmax state (running max m, sum l) stays in registers and the P tile it
 *    writes is read back only by itself (no block barrier between the two products);
 *  - scores: lane = (entry group eq of 8, dim quarter dq of 4); each thread holds RH
 *    heads x 4 entries over the 128 dims of its quarter (float4 shared loads: queries
 *    broadcast, keys 4 wavefronts), then a 2-step shuffle sum over the quarters;
 *  - PV: each thread owns RH heads x 16 dims (4 float4, dims 4 * (lane + 32 k)) of the
 *    unnormalised output in registers; per entry 1 broadcast P load per 4 heads and 4
 *    float4 V loads feed 16 RH FMAs.
 * Every sum runs in a fixed order (shuffle trees are symmetric, so all lanes agree
 * bit for bit), no atomics: the result is deterministic and differs from the CPU
 * twin's two-pass order only by rounding (STRATA_ATTN_GPU_RTOL).
 *
 * Split over entries: with a scratch buffer, a third grid dimension cuts the list
 * (idx then win_idx) into S chunks of whole tiles; block (r, g, c) leaves its chunk's
 * max, sum and unnormalised output in the scratch and split_combine_kernel merges the
 * chunks in chunk order and applies the sink. HG, S and the chunk length come from
 * the SM count, shared memory and the shapes only.
 *
 * tensor_cores = 1 selects attn_tc_kernel (bf16 mma through WMMA, exact products; its
 * own comment below), on the same plan, scratch format and combine.
 */
#include <errno.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <math.h>
#include <stdint.h>

#include "kernels/attention_int.h"
#include "kernels/gather_int.h"
#include "kernels/kernels_int.h"

namespace {

constexpr int kTile = 32;         /* entries per tile */
constexpr int kDim = 512;
constexpr int kKvStride = 528;    /* padded fp32 row: 8 rows of a score load hit 4 wavefronts */
constexpr int kThreads = 256;     /* 8 warps */
constexpr int kEntryData = 576;   /* data bytes of a main entry (scales apart) */
constexpr int kMaxSplit = 64;     /* chunks per list at most */
constexpr int kCombThreads = 128; /* 4 dims each */
static_assert(kMaxSplit <= kCombThreads, "one combine thread per chunk weight");
static_assert(kCombThreads * 4 == kDim, "combine: one float4 per thread");

constexpr size_t attn_smem_bytes(int hg)
{
	return sizeof(float) * ((size_t)hg * kDim + (size_t)kTile * kKvStride + (size_t)kTile * hg) +
	       (size_t)kTile * (kEntryData + 8) + kTile * sizeof(int);
}

__device__ __forceinline__ unsigned smem_addr(const void *p)
{
	return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp_async16(void *dst, const void *src)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src)
		     : "memory");
}
__device__ __forceinline__ void cp_async8(void *dst, const void *src)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(smem_addr(dst)), "l"(src)
		     : "memory");
}
__device__ __forceinline__ void cp_async4(void *dst, const void *src)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(dst)), "l"(src)
		     : "memory");
}
__device__ __forceinline__ void cp_async_commit()
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all()
{
	asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* Query dims d .. d + 3 of head h0 + hh of row r (16-byte loads when q allows), or
 * zeros for a head past the group's nh. */
__device__ __forceinline__ float4 query4(const strata_attn_params &p, int r, int h0, int nh,
					 int hh, int d)
{
	if (hh >= nh)
		return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	const float *g = p.q + ((size_t)r * p.heads + h0 + hh) * kDim + d;
	if (((uintptr_t)p.q & 15) == 0)
		return __ldg((const float4 *)g);
	return make_float4(__ldg(g), __ldg(g + 1), __ldg(g + 2), __ldg(g + 3));
}

/* Slot of list position j of row r: >= 0 in pool (win_pool for the window), <= -2
 * entry -2 - v of pool2 (selected list only, when pool2 is set), or -1 (a hole, or
 * past this block's chunk). */
__device__ __forceinline__ int entry_slot(const strata_attn_params &p, int r, int j, int c1)
{
	if (j >= c1)
		return -1;
	int v;
	if (j < p.n_idx) {
		v = __ldg(p.idx + (size_t)r * p.n_idx + j);
		if (v <= -2 && !p.pool2)
			v = -1;
	} else {
		v = __ldg(p.win_idx + (size_t)r * p.n_win + (j - p.n_idx));
		if (v < 0)
			v = -1;
	}
	return v;
}

/* Thread (le, sub) starts copying its eighth of entry le (list position j) into the
 * raw tile: 16-byte pieces where the pool allows (kernels.h: pools 4-byte aligned at
 * least; device allocations are 256-byte aligned), else 4-byte ones. */
__device__ __forceinline__ void entry_issue(const strata_attn_params &p, uint8_t *raw,
					    uint8_t *raw_sc, int le, int sub, int j, int slot)
{
	if (slot == -1)
		return;
	const bool host = slot <= -2; /* pool2: read in place from the host tier */
	const uint8_t *pool = host ? p.pool2 : j < p.n_idx ? p.pool : p.win_pool;
	const int B = host ? p.B2 : j < p.n_idx ? p.B : p.win_B;
	const int64_t e = host ? -2 - (int64_t)slot : (int64_t)slot;
	const uint8_t *data = attn_entry_data(pool, B, e);
	const uint8_t *sc = attn_entry_scales(pool, B, e);
	uint8_t *dst = raw + le * kEntryData;
	if (((uintptr_t)pool & 15) == 0) {
		for (int c = sub; c < kEntryData / 16; c += 8)
			cp_async16(dst + 16 * c, data + 16 * c);
		if (sub == 0)
			cp_async8(raw_sc + le * 8, sc);
	} else {
		for (int c = sub; c < kEntryData / 4; c += 8)
			cp_async4(dst + 4 * c, data + 4 * c);
		if (sub < 2)
			cp_async4(raw_sc + le * 8 + 4 * sub, sc + 4 * sub);
	}
}

/* Thread (le, sub) dequantises dims 4 * (sub + 8 k) of raw entry le into its fp32 row
 * (zeros for a hole: P is 0 there, and 0 * 0 adds nothing). */
__device__ __forceinline__ void entry_dequant(const uint8_t *raw, const uint8_t *raw_sc,
					      float *kvs, int *valid, int le, int sub, int slot)
{
	float *row = kvs + le * kKvStride;
	const uint8_t *src = raw + le * kEntryData;
#pragma unroll
	for (int k = 0; k < kDim / 32; k++) {
		const int d = 4 * (sub + 8 * k);
		float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		if (slot != -1) {
			if (d < 448) {
				uint32_t w = *(const uint32_t *)(src + d);
				float s = codec_ue8m0_decode(raw_sc[le * 8 + (d >> 6)]);
				v.x = codec_e4m3_decode((uint8_t)w) * s;
				v.y = codec_e4m3_decode((uint8_t)(w >> 8)) * s;
				v.z = codec_e4m3_decode((uint8_t)(w >> 16)) * s;
				v.w = codec_e4m3_decode((uint8_t)(w >> 24)) * s;
			} else {
				uint2 b = *(const uint2 *)(src + 448 + 2 * (d - 448));
				v.x = codec_bf16_decode((uint16_t)b.x);
				v.y = codec_bf16_decode((uint16_t)(b.x >> 16));
				v.z = codec_bf16_decode((uint16_t)b.y);
				v.w = codec_bf16_decode((uint16_t)(b.y >> 16));
			}
		}
		*(float4 *)(row + d) = v;
	}
	if (sub == 0)
		valid[le] = slot != -1;
}

/* kSplit: block (r, g, c) covers entries [c * chunk, (c + 1) * chunk) of the list and
 * writes its partial (m, l) and unnormalised output to part_ml / part_u
 * ([n_rows * heads][gridDim.z] and [n_rows * heads][gridDim.z][512]); otherwise the
 * whole list and the final output. */
template <int HG, bool kSplit>
__global__ void __launch_bounds__(kThreads, 1) attn_kernel(const strata_attn_params p, int chunk,
							    float2 *part_ml, float *part_u)
{
	constexpr int RH = HG / 8; /* heads per warp (and per thread) */
	static_assert(RH == 2 || RH % 4 == 0, "P rows are stored as float2 or float4");
	extern __shared__ __align__(128) unsigned char smem[];
	float *qs = (float *)smem;                     /* [HG][512] */
	float *kvs = qs + HG * kDim;                   /* [kTile][kKvStride] */
	float *ps = kvs + kTile * kKvStride;           /* [kTile][8 warps][RH] */
	uint8_t *raw = (uint8_t *)(ps + kTile * HG);   /* [kTile][576] */
	uint8_t *raw_sc = raw + kTile * kEntryData;    /* [kTile][8] */
	int *valid = (int *)(raw_sc + kTile * 8);      /* [kTile] */

	const int r = blockIdx.x, h0 = blockIdx.y * HG;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int nh = min(HG, p.heads - h0);
	const int n_tot = p.n_idx + p.n_win;
	const int c0 = kSplit ? (int)blockIdx.z * chunk : 0;
	const int c1 = kSplit ? min(n_tot, c0 + chunk) : n_tot;
	const int le = tid >> 3, sub = tid & 7; /* loader: entry of the tile, eighth */

	/* Prologue: tile 0's bytes in flight while the queries load. */
	int cur = entry_slot(p, r, c0 + le, c1);
	entry_issue(p, raw, raw_sc, le, sub, c0 + le, cur);
	cp_async_commit();
	int nxt = entry_slot(p, r, c0 + kTile + le, c1);
	if (((uintptr_t)p.q & 15) == 0) {
		/* the queries by cp.async too: all of a thread's pieces in flight at once,
		 * landing with tile 0 (the loop's first wait covers both groups) */
		for (int x = tid; x < HG * (kDim / 4); x += kThreads) {
			const int hh = x / (kDim / 4), d = 4 * (x % (kDim / 4));
			if (hh < nh)
				cp_async16(qs + hh * kDim + d,
					   p.q + ((size_t)r * p.heads + h0 + hh) * kDim + d);
			else
				*(float4 *)(qs + hh * kDim + d) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		}
		cp_async_commit();
	} else {
		for (int x = tid; x < HG * (kDim / 4); x += kThreads) {
			const int hh = x / (kDim / 4), d = 4 * (x % (kDim / 4));
			const float4 v = query4(p, r, h0, nh, hh, d);
			*(float4 *)(qs + hh * kDim + d) = v;
		}
	}

	const int dq = lane & 3, eq = lane >> 2;
	float m[RH], l[RH];
	float4 o[RH][4];
#pragma unroll
	for (int i = 0; i < RH; i++) {
		m[i] = -INFINITY;
		l[i] = 0.0f;
#pragma unroll
		for (int k = 0; k < 4; k++)
			o[i][k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	}

	for (int t0 = c0; t0 < c1; t0 += kTile) {
		cp_async_wait_all();
		__syncthreads(); /* raw holds this tile; every warp is done with the last one */
		entry_dequant(raw, raw_sc, kvs, valid, le, sub, cur);
		__syncthreads();
		cur = nxt; /* the next tile's bytes travel during this one's products */
		entry_issue(p, raw, raw_sc, le, sub, t0 + kTile + le, cur);
		cp_async_commit();
		nxt = entry_slot(p, r, t0 + 2 * kTile + le, c1);

		/* Scores: heads warp + 8 i, entries eq + 8 j, float4 dims dq + 4 k. */
		float acc[RH][4];
#pragma unroll
		for (int i = 0; i < RH; i++)
#pragma unroll
			for (int j = 0; j < 4; j++)
				acc[i][j] = 0.0f;
		{
			const float *qb = qs + warp * kDim + 4 * dq;
			const float *kb = kvs + eq * kKvStride + 4 * dq;
#pragma unroll 2
			for (int k = 0; k < kDim / 16; k++) {
				float4 kv[4];
#pragma unroll
				for (int j = 0; j < 4; j++)
					kv[j] = *(const float4 *)(kb + j * 8 * kKvStride + 16 * k);
#pragma unroll
				for (int i = 0; i < RH; i++) {
					const float4 q = *(const float4 *)(qb + i * 8 * kDim + 16 * k);
#pragma unroll
					for (int j = 0; j < 4; j++) {
						float a = acc[i][j];
						a = fmaf(q.x, kv[j].x, a);
						a = fmaf(q.y, kv[j].y, a);
						a = fmaf(q.z, kv[j].z, a);
						a = fmaf(q.w, kv[j].w, a);
						acc[i][j] = a;
					}
				}
			}
		}
		bool ok[4];
#pragma unroll
		for (int j = 0; j < 4; j++)
			ok[j] = valid[eq + 8 * j] != 0;

		/* Online softmax per head over the tile's 32 entries (all in this warp). */
		float alpha[RH];
#pragma unroll
		for (int i = 0; i < RH; i++) {
			float s[4], mx = -INFINITY;
#pragma unroll
			for (int j = 0; j < 4; j++) {
				float a = acc[i][j];
				a += __shfl_xor_sync(0xffffffffu, a, 1);
				a += __shfl_xor_sync(0xffffffffu, a, 2);
				s[j] = ok[j] ? p.scale * a : -INFINITY;
				mx = fmaxf(mx, s[j]);
			}
#pragma unroll
			for (int x = 4; x < 32; x <<= 1)
				mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
			const float mn = fmaxf(m[i], mx);
			float sum = 0.0f;
#pragma unroll
			for (int j = 0; j < 4; j++) {
				acc[i][j] = s[j] == -INFINITY ? 0.0f : expf(s[j] - mn);
				sum += acc[i][j];
			}
#pragma unroll
			for (int x = 4; x < 32; x <<= 1)
				sum += __shfl_xor_sync(0xffffffffu, sum, x);
			alpha[i] = m[i] == -INFINITY ? 0.0f : expf(m[i] - mn);
			l[i] = l[i] * alpha[i] + sum;
			m[i] = mn;
		}
		/* P of entry eq + 8 dq (this lane's j = dq), the warp's RH heads contiguous. */
		{
			float pv[RH];
#pragma unroll
			for (int i = 0; i < RH; i++)
				pv[i] = dq == 0 ? acc[i][0] : dq == 1 ? acc[i][1] : dq == 2 ? acc[i][2] : acc[i][3];
			float *pd = ps + (eq + 8 * dq) * HG + warp * RH;
			if constexpr (RH == 2) {
				*(float2 *)pd = make_float2(pv[0], pv[1]);
			} else {
#pragma unroll
				for (int i = 0; i < RH; i += 4)
					*(float4 *)(pd + i) = make_float4(pv[i], pv[i + 1], pv[i + 2], pv[i + 3]);
			}
		}
		__syncwarp();

		/* PV: o[i][k] holds dims 4 * (lane + 32 k) of head warp + 8 i. */
#pragma unroll
		for (int i = 0; i < RH; i++)
#pragma unroll
			for (int k = 0; k < 4; k++) {
				o[i][k].x *= alpha[i];
				o[i][k].y *= alpha[i];
				o[i][k].z *= alpha[i];
				o[i][k].w *= alpha[i];
			}
		{
			const float *vb = kvs + 4 * lane;
			const float *pb = ps + warp * RH;
#pragma unroll 2
			for (int e = 0; e < kTile; e++) {
				float pw[RH];
				if constexpr (RH == 2) {
					float2 t = *(const float2 *)(pb + e * HG);
					pw[0] = t.x;
					pw[1] = t.y;
				} else {
#pragma unroll
					for (int i = 0; i < RH; i += 4) {
						float4 t = *(const float4 *)(pb + e * HG + i);
						pw[i] = t.x;
						pw[i + 1] = t.y;
						pw[i + 2] = t.z;
						pw[i + 3] = t.w;
					}
				}
				float4 v[4];
#pragma unroll
				for (int k = 0; k < 4; k++)
					v[k] = *(const float4 *)(vb + e * kKvStride + 128 * k);
#pragma unroll
				for (int i = 0; i < RH; i++)
#pragma unroll
					for (int k = 0; k < 4; k++) {
						o[i][k].x = fmaf(pw[i], v[k].x, o[i][k].x);
						o[i][k].y = fmaf(pw[i], v[k].y, o[i][k].y);
						o[i][k].z = fmaf(pw[i], v[k].z, o[i][k].z);
						o[i][k].w = fmaf(pw[i], v[k].w, o[i][k].w);
					}
			}
		}
	}
	cp_async_wait_all(); /* nothing is left in flight past the chunk, but be tidy */

#pragma unroll
	for (int i = 0; i < RH; i++) {
		const int hh = warp + 8 * i;
		if (hh >= nh)
			continue;
		const size_t rh = (size_t)r * p.heads + h0 + hh;
		if constexpr (kSplit) {
			const int S = (int)gridDim.z, c = (int)blockIdx.z;
			float *u = part_u + (rh * S + c) * kDim;
#pragma unroll
			for (int k = 0; k < 4; k++)
				*(float4 *)(u + 4 * (lane + 32 * k)) = o[i][k];
			if (lane == 0)
				part_ml[rh * S + c] = make_float2(m[i], l[i]);
		} else {
			float lse = -INFINITY, f = 0.0f;
			if (l[i] > 0.0f) {
				lse = m[i] + logf(l[i]);
				f = 1.0f / l[i];
				if (p.sink)
					f *= attn_sink_factor(lse, p.sink[h0 + hh]);
			}
			float *out = p.out + rh * kDim;
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float *od = out + 4 * (lane + 32 * k);
				od[0] = o[i][k].x * f;
				od[1] = o[i][k].y * f;
				od[2] = o[i][k].z * f;
				od[3] = o[i][k].w * f;
			}
			if (lane == 0 && p.lse)
				p.lse[rh] = lse;
		}
	}
}

/* Merges the S chunk partials of one (row, head) per block, in chunk order:
 * m = max m_c, w_c = e^(m_c - m), Z = sum w_c l_c, out = sum w_c u_c / Z, then the sink
 * as in attn_kernel; lse = m + log Z without the sink. */
__global__ void __launch_bounds__(kCombThreads)
split_combine_kernel(strata_attn_params p, int S, const float2 *part_ml, const float *part_u)
{
	__shared__ float w_s[kMaxSplit];
	__shared__ float2 ml[kMaxSplit];
	__shared__ float f_s;
	const size_t i = blockIdx.x;
	const int h = (int)(i % (size_t)p.heads), tid = threadIdx.x;
	/* the chunks' (m, l) in one parallel load (the loops below would otherwise wait
	 * on global memory once per chunk) */
	if (tid < S)
		ml[tid] = part_ml[i * S + tid];
	/* and the first of this thread's output pieces on their way meanwhile */
	const float4 *u = (const float4 *)(part_u + i * S * kDim) + tid;
	float4 u0 = u[0];
	__syncthreads();
	float m = -INFINITY;
	for (int c = 0; c < S; c++)
		m = fmaxf(m, ml[c].x);
	if (tid < S) {
		float mc = ml[tid].x;
		w_s[tid] = mc == -INFINITY ? 0.0f : expf(mc - m);
	}
	__syncthreads();
	if (tid == 0) {
		float z = 0.0f;
		for (int c = 0; c < S; c++)
			z += w_s[c] * ml[c].y;
		float lse = -INFINITY, f = 0.0f;
		if (z > 0.0f) {
			lse = m + logf(z);
			f = 1.0f / z;
			if (p.sink)
				f *= attn_sink_factor(lse, p.sink[h]);
		}
		f_s = f;
		if (p.lse)
			p.lse[i] = lse;
	}
	__syncthreads();
	/* One float4 of dims per thread; the chunk sum runs in chunk order. */
	const float f = f_s;
	float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
	for (int c = 0; c < S; c++) {
		const float w = w_s[c];
		const float4 v = c ? u[(size_t)c * (kDim / 4)] : u0;
		o.x += w * v.x;
		o.y += w * v.y;
		o.z += w * v.z;
		o.w += w * v.w;
	}
	float *od = p.out + i * kDim + 4 * tid;
	od[0] = o.x * f;
	od[1] = o.y * f;
	od[2] = o.z * f;
	od[3] = o.w * f;
}

/*
 * Tensor-core path (strata_attn_params.tensor_cores = 1, sm_80+): the same blocks,
 * tiles, cp.async pipeline, split plan and partial format as attn_kernel, with both
 * products on bf16 mma (nvcuda::wmma m16n16k16, fp32 accumulators). WMMA fragments
 * are opaque, so nothing below assumes a register layout: fragments only go through
 * load/store_matrix_sync and mma_sync, and element-wise work happens in shared memory.
 *
 * Exactness: an entry dequantises exactly to bf16 (e4m3 = 4 significant bits times a
 * power of two; RoPE dims are bf16). The fp32 query is split q = q1 + q2 + q3 with
 * q1 = bf16(q), q2 = bf16(q - q1), q3 = bf16(q - q1 - q2): each rounding keeps the top
 * 8 of the remaining significant bits and the differences are exact, so 8 + 8 + 8
 * covers fp32's 24 and the sum is q exactly (normal values; the tail of a value near
 * the bottom of the range may lose bits below 2^-133, far under the tolerance). The
 * same split is applied to each unnormalised probability p = exp(s - m). A product of
 * two bf16 values has at most 16 significant bits, so every product is exact in fp32
 * and the results differ from the CPU twin only in the order (and, inside an mma, the
 * alignment) of fp32 additions, like the fp32 kernel: per score about
 * 2^-24 sqrt(512) sum|q_d k_d| (times the 0.044 scale, < 1e-6 for V4's ranges), which
 * moves exp(s - m) and hence out by a relative error of that order; lse = m + log l
 * moves by the same amount, under STRATA_ATTN_GPU_ATOL. The mma's additions truncate
 * instead of rounding, though, and over long lists that bias adds up in the PV sums:
 * on the H200 1.2e-5 of max |out| at 8192 entries, past STRATA_ATTN_GPU_RTOL (1e-5),
 * so this kernel is held to STRATA_ATTN_GPU_TC_RTOL (5e-5).
 *
 * Per tile of 32 entries (HG = 32 or 16 heads; the query takes 3 x HG x 1 KiB of
 * shared memory as bf16 terms, so 64 heads would not fit beside the tiles):
 *  - scores: the MT = HG / 16 head tiles x 2 entry tiles of S = Q K^T, with the 512
 *    dims cut into KS = 8 / MT slices, one (head tile, slice) per warp: per step one
 *    K fragment, three Q-term fragments, six mma; the KS partial sums go to shared
 *    memory and are added in slice order;
 *  - softmax: warp w owns heads w + 8 i (lane = entry), the running (m, l) in
 *    registers as in attn_kernel, p split into three bf16 terms in shared memory;
 *  - PV: warp w owns dims [64 w, 64 w + 64) of every head, O in 4 MT accumulator
 *    fragments (registers) for the whole chunk: per entry step three P-term fragments
 *    per head tile and one V fragment per dim tile.
 * O cannot be rescaled per head in registers without knowing the fragment layout, so
 * the reference m of a head moves only when a tile's max exceeds it by more than
 * kLazy (8) nats (or on the first valid entries): p = exp(s - m) stays below e^8, an
 * exact reference change for l, O and the merge (any common m gives the same softmax;
 * exp's relative rounding does not depend on the argument's size). When some head's
 * m does move, the block (one __syncthreads_or) round-trips every O fragment through
 * a per-warp shared-memory tile, scaling its rows there by exp(m_old - m_new): after
 * the first tile this is rare. The epilogue goes through the same tile.
 */
constexpr int kLdBf = 520;  /* bf16 row of a query term or entry: 1,040 B, rows 16 B apart mod 128 */
constexpr int kLdP = 40;    /* bf16 row of a P term (32 entries + pad) */
constexpr int kLdS = 36;    /* fp32 row of a score slice (32 entries + pad) */

constexpr size_t al128(size_t x)
{
	return (x + 127) / 128 * 128;
}

/* Shared-memory layout of attn_tc_kernel<HG> (byte offsets). */
template <int HG> struct tc_smem {
	static constexpr size_t q = 0;                                    /* [3][HG][kLdBf] bf16 */
	static constexpr size_t kv = al128(q + 3 * (size_t)HG * kLdBf * 2); /* [kTile][kLdBf] bf16 */
	static constexpr size_t pb = al128(kv + (size_t)kTile * kLdBf * 2);  /* [3][HG][kLdP] bf16 */
	/* [KS][HG][kLdS] fp32 score slices; also the warps' 16 x 16 staging tiles */
	static constexpr size_t sp = al128(pb + 3 * (size_t)HG * kLdP * 2);
	static constexpr size_t al = al128(sp + 128 * (size_t)kLdS * 4); /* [HG] alpha */
	static constexpr size_t fs = al + (size_t)HG * 4;                /* [HG] output factor */
	static constexpr size_t raw = al128(fs + (size_t)HG * 4);        /* [kTile][576] */
	static constexpr size_t sc = raw + (size_t)kTile * kEntryData;   /* [kTile][8] */
	static constexpr size_t valid = sc + (size_t)kTile * 8;          /* [kTile] int */
	static constexpr size_t bytes = valid + (size_t)kTile * 4;
	static_assert((HG / 16) * (8 / (HG / 16)) == 8, "8 warps over the score tiles");
	static_assert(8 * 256 <= 128 * kLdS, "staging tiles fit in the score slices");
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/* Three bf16 terms whose sum is x exactly (see above). */
__device__ __forceinline__ void split3(float x, __nv_bfloat16 *t0, __nv_bfloat16 *t1,
				       __nv_bfloat16 *t2, int i)
{
	const __nv_bfloat16 a = __float2bfloat16_rn(x);
	const float r = x - __bfloat162float(a);
	const __nv_bfloat16 b = __float2bfloat16_rn(r);
	t0[i] = a;
	t1[i] = b;
	t2[i] = __float2bfloat16_rn(r - __bfloat162float(b));
}

__device__ __forceinline__ uint32_t bf16x2(float lo, float hi)
{
	return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
	       ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}

/* entry_dequant to a bf16 row (exact: the conversions round nothing). */
__device__ __forceinline__ void entry_dequant_bf16(const uint8_t *raw, const uint8_t *raw_sc,
						   __nv_bfloat16 *kv, int *valid, int le, int sub,
						   int slot)
{
	__nv_bfloat16 *row = kv + le * kLdBf;
	const uint8_t *src = raw + le * kEntryData;
#pragma unroll
	for (int k = 0; k < kDim / 32; k++) {
		const int d = 4 * (sub + 8 * k);
		uint2 v = make_uint2(0u, 0u);
		if (slot != -1) {
			if (d < 448) {
				uint32_t w = *(const uint32_t *)(src + d);
				float s = codec_ue8m0_decode(raw_sc[le * 8 + (d >> 6)]);
				v.x = bf16x2(codec_e4m3_decode((uint8_t)w) * s,
					     codec_e4m3_decode((uint8_t)(w >> 8)) * s);
				v.y = bf16x2(codec_e4m3_decode((uint8_t)(w >> 16)) * s,
					     codec_e4m3_decode((uint8_t)(w >> 24)) * s);
			} else {
				v = *(const uint2 *)(src + 448 + 2 * (d - 448)); /* bf16 already */
			}
		}
		*(uint2 *)(row + d) = v;
	}
	if (sub == 0)
		valid[le] = slot != -1;
}
#endif

template <int HG, bool kSplit>
__global__ void __launch_bounds__(kThreads, 1) attn_tc_kernel(const strata_attn_params p, int chunk,
							       float2 *part_ml, float *part_u)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	using namespace nvcuda;
	using L = tc_smem<HG>;
	using bf = __nv_bfloat16;
	constexpr int MT = HG / 16;          /* head tiles */
	constexpr int KS = 8 / MT;           /* score slices of the 512 dims */
	constexpr int KD = kDim / 16 / KS;   /* k steps per slice */
	constexpr int RH = HG / 8;           /* softmax heads per warp */
	constexpr int NW = kDim / 16 / 8;    /* PV dim tiles per warp */
	constexpr float kLazy = 8.0f;        /* nats a max may rise before m moves */
	typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf, wmma::row_major> frag_a;
	typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf, wmma::col_major> frag_kt;
	typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf, wmma::row_major> frag_v;
	typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;
	extern __shared__ __align__(128) unsigned char smem[];
	bf *qh = (bf *)(smem + L::q);
	bf *kvb = (bf *)(smem + L::kv);
	bf *pb = (bf *)(smem + L::pb);
	float *sp = (float *)(smem + L::sp);
	float *al_s = (float *)(smem + L::al);
	float *f_s = (float *)(smem + L::fs);
	uint8_t *raw = smem + L::raw;
	uint8_t *raw_sc = smem + L::sc;
	int *valid = (int *)(smem + L::valid);

	const int r = blockIdx.x, h0 = blockIdx.y * HG;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int nh = min(HG, p.heads - h0);
	const int n_tot = p.n_idx + p.n_win;
	const int c0 = kSplit ? (int)blockIdx.z * chunk : 0;
	const int c1 = kSplit ? min(n_tot, c0 + chunk) : n_tot;
	const int le = tid >> 3, sub = tid & 7;

	int cur = entry_slot(p, r, c0 + le, c1);
	entry_issue(p, raw, raw_sc, le, sub, c0 + le, cur);
	cp_async_commit();
	int nxt = entry_slot(p, r, c0 + kTile + le, c1);
	{ /* the queries as three bf16 terms (rows past nh zero) */
		for (int x = tid; x < HG * (kDim / 4); x += kThreads) {
			const int hh = x / (kDim / 4), d = 4 * (x % (kDim / 4));
			const float4 v = query4(p, r, h0, nh, hh, d);
			bf *t0 = qh + hh * kLdBf + d, *t1 = t0 + HG * kLdBf, *t2 = t1 + HG * kLdBf;
			split3(v.x, t0, t1, t2, 0);
			split3(v.y, t0, t1, t2, 1);
			split3(v.z, t0, t1, t2, 2);
			split3(v.w, t0, t1, t2, 3);
		}
	}

	float m[RH], l[RH];
#pragma unroll
	for (int i = 0; i < RH; i++) {
		m[i] = -INFINITY;
		l[i] = 0.0f;
	}
	frag_c o[MT][NW];
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int nw = 0; nw < NW; nw++)
			wmma::fill_fragment(o[mt][nw], 0.0f);
	float *stg = sp + warp * 256; /* this warp's 16 x 16 staging tile */

	for (int t0 = c0; t0 < c1; t0 += kTile) {
		cp_async_wait_all();
		__syncthreads(); /* raw holds this tile; every warp is done with the last one */
		entry_dequant_bf16(raw, raw_sc, kvb, valid, le, sub, cur);
		__syncthreads();
		cur = nxt;
		entry_issue(p, raw, raw_sc, le, sub, t0 + kTile + le, cur);
		cp_async_commit();
		nxt = entry_slot(p, r, t0 + 2 * kTile + le, c1);

		/* Scores: head tile mt, dim slice ks, both entry tiles. */
		{
			const int mt = warp % MT, ks = warp / MT;
			frag_c acc[2];
			wmma::fill_fragment(acc[0], 0.0f);
			wmma::fill_fragment(acc[1], 0.0f);
			const bf *qa = qh + mt * 16 * kLdBf;
#pragma unroll 2
			for (int k = ks * KD; k < (ks + 1) * KD; k++) {
				frag_a a[3];
#pragma unroll
				for (int t = 0; t < 3; t++)
					wmma::load_matrix_sync(a[t], qa + t * HG * kLdBf + 16 * k, kLdBf);
#pragma unroll
				for (int n = 0; n < 2; n++) {
					frag_kt b;
					wmma::load_matrix_sync(b, kvb + n * 16 * kLdBf + 16 * k, kLdBf);
#pragma unroll
					for (int t = 0; t < 3; t++)
						wmma::mma_sync(acc[n], a[t], b, acc[n]);
				}
			}
#pragma unroll
			for (int n = 0; n < 2; n++)
				wmma::store_matrix_sync(sp + (ks * HG + mt * 16) * kLdS + 16 * n, acc[n],
							kLdS, wmma::mem_row_major);
		}
		__syncthreads();

		/* Softmax: heads warp + 8 i, lane = entry; lazy reference max. */
		int moved = 0;
		{
			const bool ok = valid[lane] != 0;
#pragma unroll
			for (int i = 0; i < RH; i++) {
				const int hh = warp + 8 * i;
				float a = 0.0f;
#pragma unroll
				for (int s = 0; s < KS; s++)
					a += sp[(s * HG + hh) * kLdS + lane];
				const float sv = ok ? p.scale * a : -INFINITY;
				float mx = sv;
#pragma unroll
				for (int x = 1; x < 32; x <<= 1)
					mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
				const float mn = (m[i] == -INFINITY || mx > m[i] + kLazy) ? mx : m[i];
				const float e = sv == -INFINITY ? 0.0f : expf(sv - mn);
				float sum = e;
#pragma unroll
				for (int x = 1; x < 32; x <<= 1)
					sum += __shfl_xor_sync(0xffffffffu, sum, x);
				const float alpha = m[i] == -INFINITY ? 0.0f : expf(m[i] - mn);
				moved |= m[i] != -INFINITY && mn != m[i];
				l[i] = l[i] * alpha + sum;
				m[i] = mn;
				bf *t0p = pb + hh * kLdP + lane;
				split3(e, t0p, t0p + HG * kLdP, t0p + 2 * HG * kLdP, 0);
				if (lane == 0)
					al_s[hh] = alpha;
			}
		}
		/* P, alpha and the decision visible to all; score slices free for staging. */
		if (__syncthreads_or(moved)) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int nw = 0; nw < NW; nw++) {
					wmma::store_matrix_sync(stg, o[mt][nw], 16, wmma::mem_row_major);
					__syncwarp();
					for (int e = lane; e < 256; e += 32)
						stg[e] *= al_s[mt * 16 + (e >> 4)];
					__syncwarp();
					wmma::load_matrix_sync(o[mt][nw], stg, 16, wmma::mem_row_major);
					__syncwarp();
				}
		}

		/* PV: O[:, dims of warp] += P V over the tile's two entry steps. */
#pragma unroll
		for (int ke = 0; ke < kTile / 16; ke++) {
			frag_a a[MT][3];
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int t = 0; t < 3; t++)
					wmma::load_matrix_sync(a[mt][t],
							       pb + (t * HG + mt * 16) * kLdP + 16 * ke, kLdP);
#pragma unroll
			for (int nw = 0; nw < NW; nw++) {
				frag_v b;
				wmma::load_matrix_sync(b, kvb + 16 * ke * kLdBf + 16 * (warp * NW + nw),
						       kLdBf);
#pragma unroll
				for (int mt = 0; mt < MT; mt++)
#pragma unroll
					for (int t = 0; t < 3; t++)
						wmma::mma_sync(o[mt][nw], a[mt][t], b, o[mt][nw]);
			}
		}
	}
	cp_async_wait_all();

	/* Per-head (m, l): the partials, or lse and the output factor. */
	const int S = kSplit ? (int)gridDim.z : 1, c = kSplit ? (int)blockIdx.z : 0;
#pragma unroll
	for (int i = 0; i < RH; i++) {
		const int hh = warp + 8 * i;
		const size_t rh = (size_t)r * p.heads + h0 + hh;
		if constexpr (kSplit) {
			if (lane == 0 && hh < nh)
				part_ml[rh * S + c] = make_float2(m[i], l[i]);
		} else {
			float lse = -INFINITY, f = 0.0f;
			if (l[i] > 0.0f) {
				lse = m[i] + logf(l[i]);
				f = 1.0f / l[i];
				if (p.sink && hh < nh)
					f *= attn_sink_factor(lse, p.sink[h0 + hh]);
			}
			if (lane == 0) {
				f_s[hh] = f;
				if (p.lse && hh < nh)
					p.lse[rh] = lse;
			}
		}
	}
	__syncthreads();
	/* O through the staging tile: rows hh < nh, dims 16 n + [0, 16). */
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int nw = 0; nw < NW; nw++) {
			wmma::store_matrix_sync(stg, o[mt][nw], 16, wmma::mem_row_major);
			__syncwarp();
#pragma unroll
			for (int x = lane; x < 64; x += 32) {
				const int row = x >> 2, hh = mt * 16 + row;
				const int d = 16 * (warp * NW + nw) + 4 * (x & 3);
				if (hh < nh) {
					float4 v = *(const float4 *)(stg + 4 * x);
					const size_t rh = (size_t)r * p.heads + h0 + hh;
					if constexpr (kSplit) {
						*(float4 *)(part_u + (rh * S + c) * kDim + d) = v;
					} else {
						const float f = f_s[hh];
						float *od = p.out + rh * kDim + d;
						od[0] = v.x * f;
						od[1] = v.y * f;
						od[2] = v.z * f;
						od[3] = v.w * f;
					}
				}
			}
			__syncwarp();
		}
#else
	(void)p;
	(void)chunk;
	(void)part_ml;
	(void)part_u;
#endif
}

__global__ void combine_kernel(strata_attn_combine_params p)
{
	const size_t rh = (size_t)p.n_rows * p.heads;
	const size_t i = blockIdx.x;
	const int h = (int)(i % (size_t)p.heads);
	float m = -INFINITY;
	for (int k = 0; k < p.n_parts; k++)
		m = fmaxf(m, p.part_lse[k * rh + i]);
	float z = 0.0f;
	if (m != -INFINITY)
		for (int k = 0; k < p.n_parts; k++) {
			float lk = p.part_lse[k * rh + i];
			if (lk != -INFINITY)
				z += expf(lk - m);
		}
	float lse = m == -INFINITY ? -INFINITY : m + logf(z);
	float f = 0.0f;
	if (m != -INFINITY) {
		f = 1.0f / z;
		if (p.sink)
			f *= attn_sink_factor(lse, p.sink[h]);
	}
	for (int d = threadIdx.x; d < p.dim; d += blockDim.x) {
		float o = 0.0f;
		if (m != -INFINITY)
			for (int k = 0; k < p.n_parts; k++) {
				float lk = p.part_lse[k * rh + i];
				if (lk != -INFINITY)
					o += expf(lk - m) * p.part_out[(k * rh + i) * p.dim + d];
			}
		p.out[i * p.dim + d] = o * f;
	}
	if (threadIdx.x == 0 && p.lse)
		p.lse[i] = lse;
}

/* Where list position i goes (every mode): out[i], and for a miss to be copied by
 * this call (staged), its host entry in *src (else -1). Counts early / late misses. */
__device__ __forceinline__ int64_t map_one(const strata_attn_map_params &p, size_t i,
					   bool *early, bool *late)
{
	const int32_t id = p.ids[i];
	const size_t r = i / p.width;
	*early = *late = false;
	if (id < 0) {
		p.out[i] = -1;
		return -1;
	}
	if (!p.map) {
		p.out[i] = p.row_base[r] + (p.positional ? (int32_t)(i % p.width) : id);
		return -1;
	}
	/* the stage word is read beside the residency word, not after it: a miss then
	 * costs one dependent round trip, as a hit does. volatile: early staging may
	 * publish while this runs */
	const bool in = id < p.map_stride;
	const uint64_t sv = p.stage_map && in
				    ? *reinterpret_cast<const volatile unsigned long long *>(
					      p.stage_map + r * p.map_stride + id)
				    : 0;
	const int32_t v = in ? p.map[(size_t)p.row_map[r] * p.map_stride + id] : -1;
	if (v >= 0) {
		p.out[i] = v;
		return -1;
	}
	*late = !(p.stage_map && sv >> 24 == p.epoch);
	if (!*late) {
		*early = true;
		p.out[i] = -2 - (int32_t)(sv & 0xffffffu);
		return -1;
	}
	if (p.stage) {
		p.out[i] = -2 - (int32_t)i;
		return (int64_t)p.row_base[r] + id;
	}
	p.out[i] = -2 - (p.row_base[r] + id);
	return -1;
}

__device__ __forceinline__ void map_count(const strata_attn_map_params &p, bool early, bool late)
{
	if (!p.miss_counts)
		return;
	const unsigned ne = __ballot_sync(0xffffffffu, early);
	const unsigned nl = __ballot_sync(0xffffffffu, late);
	if ((threadIdx.x & 31) == 0 && ne)
		atomicAdd(&p.miss_counts[0], (unsigned long long)__popc(ne));
	if ((threadIdx.x & 31) == 0 && nl)
		atomicAdd(&p.miss_counts[1], (unsigned long long)__popc(nl));
}

/* Without staged copies: one thread per list position. */
__global__ void map_kernel(strata_attn_map_params p)
{
	const size_t n = (size_t)p.n_rows * p.width;
	const size_t stride = (size_t)gridDim.x * blockDim.x;
	for (size_t w = (size_t)blockIdx.x * blockDim.x; w < n; w += stride) { /* block-uniform */
		const size_t i = w + threadIdx.x;
		bool early = false, late = false;
		if (i < n)
			(void)map_one(p, i, &early, &late);
		map_count(p, early, late);
	}
}

/* Staged: a block per tile of kMapTile positions. Its first warp looks them up and
 * lists the tile's misses in shared memory; then the whole block copies them, every
 * (miss, 16-byte piece) pair its own thread, each thread's loads (up to kMapLoads)
 * issued before its stores. A tile's misses thus cost about one bus round trip after
 * the lookup, and a warp's 32 lanes read 512 contiguous bytes of one entry. */
constexpr int kMapTile = 32, kMapThreads = 128, kMapLoads = 4;
__global__ void __launch_bounds__(kMapThreads) map_staged_kernel(strata_attn_map_params p)
{
	__shared__ int64_t src[kMapTile], dst[kMapTile];
	__shared__ int cnt;
	const size_t n = (size_t)p.n_rows * p.width;
	for (size_t t0 = (size_t)blockIdx.x * kMapTile; t0 < n; t0 += (size_t)gridDim.x * kMapTile) {
		if (threadIdx.x < 32) {
			const size_t i = t0 + threadIdx.x;
			bool early = false, late = false;
			const int64_t s = i < n ? map_one(p, i, &early, &late) : -1;
			map_count(p, early, late);
			const unsigned mm = __ballot_sync(0xffffffffu, s >= 0);
			if (s >= 0) {
				const int m = __popc(mm & ((1u << threadIdx.x) - 1u));
				src[m] = s;
				dst[m] = (int64_t)i;
			}
			if (threadIdx.x == 0)
				cnt = __popc(mm);
		}
		__syncthreads();
		const int pieces = cnt * GATHER_PIECES;
		for (int f0 = 0; f0 < pieces; f0 += kMapThreads * kMapLoads) {
			uint4 v[kMapLoads];
#pragma unroll
			for (int u = 0; u < kMapLoads; u++) {
				const int f = f0 + u * kMapThreads + threadIdx.x;
				if (f < pieces) {
					const int m = f / GATHER_PIECES, pc = f - m * GATHER_PIECES;
					v[u] = gather_piece_load(attn_entry_data(p.host, p.host_B, src[m]),
								 attn_entry_scales(p.host, p.host_B, src[m]), pc);
				}
			}
#pragma unroll
			for (int u = 0; u < kMapLoads; u++) {
				const int f = f0 + u * kMapThreads + threadIdx.x;
				if (f < pieces) {
					const int m = f / GATHER_PIECES, pc = f - m * GATHER_PIECES;
					gather_piece_store(
						const_cast<uint8_t *>(attn_entry_data(p.stage, p.stage_B, dst[m])),
						const_cast<uint8_t *>(attn_entry_scales(p.stage, p.stage_B, dst[m])),
						pc, v[u]);
				}
			}
		}
		__syncthreads(); /* src, dst and cnt are rewritten by the next tile */
	}
}

int attn_dev_attr(const strata_dev *dev, cudaDeviceAttr a, int fallback)
{
	int v = 0;
	if (cudaDeviceGetAttribute(&v, a, dev->device) != cudaSuccess || v <= 0) {
		(void)cudaGetLastError(); /* not a launch failure: assume an H100/H200 */
		v = fallback;
	}
	return v;
}

int attn_sm_count(const strata_dev *dev)
{
	return attn_dev_attr(dev, cudaDevAttrMultiProcessorCount, 132);
}

/* The most chunks a list of this call may be cut into, whatever its length: no more
 * than one block per SM for the widest head group (64). */
int attn_split_cap(const strata_dev *dev, const strata_attn_params *p)
{
	long groups = (p->heads + 63) / 64;
	long blocks = (long)p->n_rows * groups;
	if (blocks < 1)
		return 1;
	long cap = attn_sm_count(dev) / blocks;
	return (int)(cap < 1 ? 1 : cap < kMaxSplit ? cap : kMaxSplit);
}

struct attn_plan {
	int hg;            /* heads per block: 64, 32 or 16 */
	int S, chunk;      /* S = 1: unsplit */
	size_t ml_bytes;   /* offset of the outputs in the scratch (256-aligned) */
	size_t bytes;
};

/* Heads per block: the widest group (fewest reads and dequantisations of each entry)
 * that still offers about two blocks per SM of (row, group, tile) work, or the
 * narrowest; never wider than the heads need or shared memory allows. Then the split:
 * chunks of whole tiles, as many as leave one block per SM. Only shapes, the SM count
 * and the shared-memory limit go in, so a call's arithmetic is fixed by its shapes. */
size_t attn_tc_smem_bytes(int hg)
{
	return hg >= 32 ? tc_smem<32>::bytes : tc_smem<16>::bytes;
}

/* tc: the tensor-core kernel, whose queries take 3 bf16 terms: groups of 32 at most. */
attn_plan attn_plan_for(const strata_dev *dev, const strata_attn_params *p, bool may_split,
			bool tc)
{
	const int n_tot = p->n_idx + p->n_win;
	const long tiles = (n_tot + kTile - 1) / kTile;
	const int all_sms = attn_sm_count(dev);
	const int sms = p->spare_sms < all_sms ? all_sms - p->spare_sms : 1;
	const size_t smem_max =
		(size_t)attn_dev_attr(dev, cudaDevAttrMaxSharedMemoryPerBlockOptin, 232448);
	int hg = p->heads <= 16 ? 16 : p->heads <= 32 || tc ? 32 : 64;
	while (hg > 16 && (tc ? attn_tc_smem_bytes(hg) : attn_smem_bytes(hg)) > smem_max)
		hg /= 2;
	for (; hg > 16; hg /= 2) {
		long units = (long)p->n_rows * ((p->heads + hg - 1) / hg) * tiles;
		if (units >= 2L * sms)
			break;
	}
	attn_plan pl = { hg, 1, n_tot, 0, 0 };
	if (!may_split || tiles < 2)
		return pl;
	long blocks = (long)p->n_rows * ((p->heads + hg - 1) / hg);
	long s = sms / blocks;
	long cap = attn_split_cap(dev, p);
	s = s < cap ? s : cap;
	s = s < tiles ? s : tiles;
	if (s < 2)
		return pl;
	long per = (tiles + s - 1) / s; /* tiles per chunk */
	pl.chunk = (int)(per * kTile);
	pl.S = (int)((tiles + per - 1) / per);
	size_t parts = (size_t)p->n_rows * p->heads * pl.S;
	pl.ml_bytes = (parts * sizeof(float2) + 255) / 256 * 256;
	pl.bytes = pl.ml_bytes + parts * kDim * sizeof(float);
	return pl;
}

/* TC: attn_tc_kernel (HG 32 or 16) instead of attn_kernel. */
template <int HG, bool TC>
int attn_launch(strata_dev *dev, const strata_attn_params *p, const attn_plan &pl, cudaStream_t st)
{
	typedef void (*kfn)(const strata_attn_params, int, float2 *, float *);
	kfn k_unsplit, k_split;
	size_t smem;
	if constexpr (TC) {
		k_unsplit = attn_tc_kernel<HG, false>;
		k_split = attn_tc_kernel<HG, true>;
		smem = tc_smem<HG>::bytes;
	} else {
		k_unsplit = attn_kernel<HG, false>;
		k_split = attn_kernel<HG, true>;
		smem = attn_smem_bytes(HG);
	}
	static bool attr_set; /* benign race: every caller sets the same value */
	if (!attr_set) {
		cudaFuncSetAttribute(k_unsplit, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		cudaFuncSetAttribute(k_split, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		attr_set = true;
	}
	dim3 grid((unsigned)p->n_rows, (unsigned)((p->heads + HG - 1) / HG));
	if (pl.S < 2) {
		k_unsplit<<<grid, kThreads, smem, st>>>(*p, pl.chunk, nullptr, nullptr);
		return strata_dev_check(dev, TC ? "attention (tensor cores)" : "attention");
	}
	float2 *ml = (float2 *)p->scratch;
	float *u = (float *)((char *)p->scratch + pl.ml_bytes);
	grid.z = (unsigned)pl.S;
	k_split<<<grid, kThreads, smem, st>>>(*p, pl.chunk, ml, u);
	int err = strata_dev_check(dev, TC ? "attention (split, tensor cores)" : "attention (split)");
	if (err)
		return err;
	split_combine_kernel<<<(unsigned)((size_t)p->n_rows * p->heads), kCombThreads, 0, st>>>(
		*p, pl.S, ml, u);
	return strata_dev_check(dev, "attention split combine");
}

} /* namespace */

extern "C" size_t strata_k_attn_scratch_gpu(const strata_dev *dev, const strata_attn_params *p)
{
	/* Sized for the cap, which the chunk count of any list length stays within. */
	int cap = attn_split_cap(dev, p);
	if (cap < 2 || p->n_idx + p->n_win < 2 * kTile)
		return 0;
	size_t parts = (size_t)p->n_rows * p->heads * cap;
	size_t ml_bytes = (parts * sizeof(float2) + 255) / 256 * 256;
	return ml_bytes + parts * kDim * sizeof(float);
}

extern "C" int strata_k_attn_gpu(strata_dev *dev, const strata_attn_params *p,
				 strata_stream *s)
{
	if (!p || p->n_rows < 0 || p->heads < 1 || p->n_idx < 0 || p->n_win < 0 ||
	    (p->n_rows && (!p->q || !p->out)) || (p->n_idx && (!p->pool || !p->idx || p->B < 1)) ||
	    (p->n_win && (!p->win_pool || !p->win_idx || p->win_B < 1)) ||
	    (p->pool2 && p->B2 < 1) || p->spare_sms < 0)
		return -EINVAL;
	/* Entries are copied in 16-byte pieces where the pool allows, 4-byte ones at least. */
	if ((p->n_idx && ((uintptr_t)p->pool & 3)) || (p->n_win && ((uintptr_t)p->win_pool & 3)) ||
	    ((uintptr_t)p->pool2 & 3))
		return -EINVAL;
	if (p->n_rows == 0)
		return 0;
	/* Tensor cores on request where the GPU has bf16 mma (sm_80+); else fp32. */
	const bool tc =
		p->tensor_cores && attn_dev_attr(dev, cudaDevAttrComputeCapabilityMajor, 9) >= 8;
	attn_plan pl = attn_plan_for(dev, p, p->scratch != nullptr, tc);
	if (pl.S > 1 && pl.bytes > p->scratch_bytes)
		pl = attn_plan_for(dev, p, false, tc);
	cudaStream_t st = (cudaStream_t)kstream(dev, s);
	if (tc)
		return pl.hg >= 32 ? attn_launch<32, true>(dev, p, pl, st)
				   : attn_launch<16, true>(dev, p, pl, st);
	switch (pl.hg) {
	case 64:
		return attn_launch<64, false>(dev, p, pl, st);
	case 32:
		return attn_launch<32, false>(dev, p, pl, st);
	default:
		return attn_launch<16, false>(dev, p, pl, st);
	}
}
extern "C" int strata_k_attn_combine_gpu(strata_dev *dev, const strata_attn_combine_params *p,
					 strata_stream *s)
{
	if (!p || p->n_parts < 1 || p->n_rows < 0 || p->heads < 1 || p->dim < 1 ||
	    (p->n_rows && (!p->part_out || !p->part_lse || !p->out)))
		return -EINVAL;
	if (p->n_rows == 0)
		return 0;
	combine_kernel<<<(unsigned)((size_t)p->n_rows * p->heads), 128, 0, (cudaStream_t)kstream(dev, s)>>>(*p);
	return strata_dev_check(dev, "attention combine");
}

extern "C" int strata_k_attn_map_gpu(strata_dev *dev, const strata_attn_map_params *p,
				     strata_stream *s)
{
	if (!p || p->n_rows < 0 || p->width < 0 ||
	    (p->n_rows && p->width && (!p->ids || !p->row_base || !p->out)) ||
	    (p->map && (!p->row_map || p->map_stride < 1)) ||
	    (p->stage && (!p->map || !p->host || p->host_B < 1 || p->stage_B < 1)) ||
	    (p->stage_map && (!p->stage || p->epoch < 1)))
		return -EINVAL;
	size_t n = (size_t)p->n_rows * p->width;
	if (!n)
		return 0;
	if (p->stage) { /* a block per 32 positions: a small batch's copies over many SMs */
		const size_t tiles = (n + kMapTile - 1) / kMapTile;
		map_staged_kernel<<<(unsigned)(tiles < 8192 ? tiles : 8192), kMapThreads, 0,
				    (cudaStream_t)kstream(dev, s)>>>(*p);
	} else {
		const size_t blocks = (n + 255) / 256;
		map_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, (cudaStream_t)kstream(dev, s)>>>(*p);
	}
	return strata_dev_check(dev, "attention index map");
}

extern "C" int strata_k_attn_head_groups_gpu(strata_dev *dev, const strata_attn_params *p)
{
	const bool tc =
		p->tensor_cores && attn_dev_attr(dev, cudaDevAttrComputeCapabilityMajor, 9) >= 8;
	const attn_plan pl = attn_plan_for(dev, p, p->scratch != nullptr, tc);
	return (p->heads + pl.hg - 1) / pl.hg;
}
