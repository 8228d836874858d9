/*
 * GPU sparse MQA attention with sink, and the LSE combine (kernels.h, "attention").
 *
 * One block per (query row, group of 8 heads), 8 warps, one head per warp. Entries
 * are visited in tiles of 32: the block dequantises a tile into shared memory once
 * (MQA: K = V is shared by all heads), each warp scores its head against the tile
 * (lane = entry) and keeps an online softmax (running max and sum); every thread owns
 * 2 of the 512 output dims for each of the 8 heads. No atomics and a fixed order, so
 * the result is deterministic; it differs from the CPU twin's two-pass order only by
 * rounding (STRATA_ATTN_GPU_RTOL).
 *
 * At small batch that grid is a handful of blocks on a 132-SM part, each walking the
 * whole list serially. The split path adds a third grid dimension: block (r, g, c)
 * walks only chunk c of the list and leaves its max, sum and unnormalised output in
 * the caller's scratch; split_combine_kernel merges the chunks in chunk order and
 * applies the sink. The split factor comes from the shapes and the SM count only, so a
 * given call is as deterministic as the unsplit one.
 */
#include <errno.h>
#include <cuda_runtime.h>
#include <math.h>

#include "kernels/attention_int.h"
#include "kernels/kernels_int.h"

namespace {

constexpr int kHeads = 8;        /* heads per block (= warps) */
constexpr int kTile = 32;        /* entries per tile (= lanes) */
constexpr int kDim = 512;
constexpr int kPad = kDim + 1;   /* padded K row: lane e reads row e conflict-free */
constexpr int kThreads = 256;
constexpr int kMaxSplit = 64;    /* chunks per list at most */
constexpr int kBlocksPerSm = 2;  /* ~83 KiB of shared memory per block */
constexpr int kCombThreads = 128;
static_assert(kMaxSplit <= kCombThreads, "one combine thread per chunk weight");

size_t attn_smem_bytes()
{
	return sizeof(float) * ((size_t)kHeads * kDim + (size_t)kTile * kPad + kHeads * kTile);
}

/* kSplit: block (r, g, c) covers entries [c * chunk, (c + 1) * chunk) of the list and
 * writes its partial (m, l) and unnormalised output to part_ml / part_u
 * ([n_rows * heads][gridDim.z] and [n_rows * heads][gridDim.z][512]); otherwise the
 * whole list and the final output. */
template <bool kSplit>
__global__ void __launch_bounds__(kThreads) attn_kernel(strata_attn_params p, int chunk,
							 float2 *part_ml, float *part_u)
{
	extern __shared__ float sm[];
	float *qs = sm;                       /* [kHeads][512] */
	float *ks = qs + kHeads * kDim;       /* [kTile][kPad] */
	float *ps = ks + kTile * kPad;        /* [kHeads][kTile] */
	__shared__ int valid[kTile];
	__shared__ float m_s[kHeads], l_s[kHeads], a_s[kHeads];

	const int r = blockIdx.x, h0 = blockIdx.y * kHeads;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int nh = min(kHeads, p.heads - h0);
	const int n_tot = p.n_idx + p.n_win;
	const int c0 = kSplit ? (int)blockIdx.z * chunk : 0;
	const int c1 = kSplit ? min(n_tot, c0 + chunk) : n_tot;

	for (int i = tid; i < kHeads * kDim; i += kThreads) {
		int hh = i / kDim;
		qs[i] = hh < nh ? p.q[((size_t)r * p.heads + h0 + hh) * kDim + i % kDim] : 0.0f;
	}
	if (tid < kHeads) {
		m_s[tid] = -INFINITY;
		l_s[tid] = 0.0f;
	}
	float acc[kHeads][2];
#pragma unroll
	for (int hh = 0; hh < kHeads; hh++)
		acc[hh][0] = acc[hh][1] = 0.0f;
	__syncthreads();

	for (int t0 = c0; t0 < c1; t0 += kTile) {
		/* Dequantise the tile: warp w takes entries w, w+8, w+16, w+24. */
		for (int e = warp; e < kTile; e += kThreads / 32) {
			int j = t0 + e;
			int slot = -1;
			const uint8_t *pool = p.pool;
			int B = p.B;
			if (j >= c1) {
				/* past this block's part of the list: an empty lane */
			} else if (j < p.n_idx) {
				slot = p.idx[(size_t)r * p.n_idx + j];
			} else {
				slot = p.win_idx[(size_t)r * p.n_win + (j - p.n_idx)];
				pool = p.win_pool;
				B = p.win_B;
			}
			float *row = ks + e * kPad;
			if (slot >= 0) {
				const uint8_t *data = attn_entry_data(pool, B, slot);
				const uint8_t *sc = attn_entry_scales(pool, B, slot);
				for (int d = lane; d < kDim; d += 32)
					row[d] = attn_entry_dim(data, sc, d);
			} else {
				for (int d = lane; d < kDim; d += 32)
					row[d] = 0.0f;
			}
			if (lane == 0)
				valid[e] = slot >= 0;
		}
		__syncthreads();

		/* Scores and the online softmax: warp = head, lane = entry. */
		if (warp < nh) {
			const float *q = qs + warp * kDim;
			const float *k = ks + lane * kPad;
			float s = -INFINITY;
			if (valid[lane]) {
				float dot = 0.0f;
#pragma unroll 8
				for (int d = 0; d < kDim; d++)
					dot += q[d] * k[d];
				s = p.scale * dot;
			}
			float tm = s;
			for (int o = 16; o > 0; o >>= 1)
				tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, o));
			float m_old = m_s[warp];
			float m_new = fmaxf(m_old, tm);
			float pe = (valid[lane] && m_new != -INFINITY) ? expf(s - m_new) : 0.0f;
			float sum = pe;
			for (int o = 16; o > 0; o >>= 1)
				sum += __shfl_xor_sync(0xffffffffu, sum, o);
			ps[warp * kTile + lane] = pe;
			__syncwarp();
			if (lane == 0) {
				float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
				l_s[warp] = l_s[warp] * alpha + sum;
				m_s[warp] = m_new;
				a_s[warp] = alpha;
			}
		}
		__syncthreads();

		/* Accumulate: thread owns dims tid and tid + 256 of every head. */
#pragma unroll
		for (int hh = 0; hh < kHeads; hh++) {
			if (hh >= nh)
				continue;
			float a = a_s[hh];
			float o0 = acc[hh][0] * a, o1 = acc[hh][1] * a;
			const float *pw = ps + hh * kTile;
			for (int e = 0; e < kTile; e++) {
				float w = pw[e];
				o0 += w * ks[e * kPad + tid];
				o1 += w * ks[e * kPad + tid + kThreads];
			}
			acc[hh][0] = o0;
			acc[hh][1] = o1;
		}
		__syncthreads();
	}

	if constexpr (kSplit) {
		const int S = (int)gridDim.z, c = (int)blockIdx.z;
#pragma unroll
		for (int hh = 0; hh < kHeads; hh++) {
			if (hh >= nh)
				continue;
			size_t i = (size_t)r * p.heads + h0 + hh;
			float *u = part_u + (i * S + c) * kDim;
			u[tid] = acc[hh][0];
			u[tid + kThreads] = acc[hh][1];
			if (tid == 0)
				part_ml[i * S + c] = make_float2(m_s[hh], l_s[hh]);
		}
	} else {
#pragma unroll
		for (int hh = 0; hh < kHeads; hh++) {
			if (hh >= nh)
				continue;
			int h = h0 + hh;
			float l = l_s[hh], m = m_s[hh];
			float *o = p.out + ((size_t)r * p.heads + h) * kDim;
			float lse = -INFINITY, f = 0.0f;
			if (l > 0.0f) {
				lse = m + logf(l);
				f = 1.0f / l;
				if (p.sink)
					f *= attn_sink_factor(lse, p.sink[h]);
			}
			o[tid] = acc[hh][0] * f;
			o[tid + kThreads] = acc[hh][1] * f;
			if (tid == 0 && p.lse)
				p.lse[(size_t)r * p.heads + h] = lse;
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
	__shared__ float f_s;
	const size_t i = blockIdx.x;
	const int h = (int)(i % (size_t)p.heads), tid = threadIdx.x;
	const float2 *ml = part_ml + i * S;
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
	const float f = f_s;
	const float *u = part_u + i * S * kDim;
	for (int d = tid; d < kDim; d += kCombThreads) {
		float o = 0.0f;
		for (int c = 0; c < S; c++)
			o += w_s[c] * u[(size_t)c * kDim + d];
		p.out[i * kDim + d] = o * f;
	}
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

__global__ void map_kernel(strata_attn_map_params p)
{
	size_t n = (size_t)p.n_rows * p.width;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		int32_t id = p.ids[i];
		p.out[i] = id < 0 ? -1 : p.row_base[i / p.width] + (p.positional ? (int32_t)(i % p.width) : id);
	}
}

int attn_sm_count(const strata_dev *dev)
{
	int v = 0;
	if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev->device) !=
		    cudaSuccess || v <= 0) {
		(void)cudaGetLastError(); /* not a launch failure: assume an H100/H200 */
		v = 132;
	}
	return v;
}

/* The most chunks a list of this call may be cut into: enough blocks for about one
 * full wave (kBlocksPerSm per SM), none where the unsplit grid already fills it. */
int attn_split_cap(const strata_dev *dev, const strata_attn_params *p)
{
	long blocks = (long)p->n_rows * ((p->heads + kHeads - 1) / kHeads);
	long slots = (long)kBlocksPerSm * attn_sm_count(dev);
	if (blocks < 1 || blocks * 2 > slots)
		return 1;
	long cap = slots / blocks;
	return (int)(cap < kMaxSplit ? cap : kMaxSplit);
}

struct attn_split {
	int S, chunk;      /* S = 1: unsplit */
	size_t ml_bytes;   /* offset of the outputs in the scratch (256-aligned) */
	size_t bytes;
};

/* Chunks are whole tiles (a partial tile costs a full one) of at least kTile entries. */
attn_split attn_split_for(const strata_attn_params *p, int S)
{
	attn_split sp = { 1, p->n_idx + p->n_win, 0, 0 };
	const int n_tot = p->n_idx + p->n_win;
	if (S < 2 || n_tot < 2 * kTile)
		return sp;
	int chunk = (n_tot + S - 1) / S;
	chunk = (chunk + kTile - 1) / kTile * kTile;
	sp.S = (n_tot + chunk - 1) / chunk;
	sp.chunk = chunk;
	size_t parts = (size_t)p->n_rows * p->heads * sp.S;
	sp.ml_bytes = (parts * sizeof(float2) + 255) / 256 * 256;
	sp.bytes = sp.ml_bytes + parts * kDim * sizeof(float);
	return sp;
}

} /* namespace */

extern "C" size_t strata_k_attn_scratch_gpu(const strata_dev *dev, const strata_attn_params *p)
{
	/* Sized for the cap, which the chunk count of any list length stays within. */
	int cap = attn_split_cap(dev, p);
	if (cap < 2 || p->n_idx + p->n_win < 2 * kTile)
		return 0;
	attn_split sp = { cap, kTile, 0, 0 };
	size_t parts = (size_t)p->n_rows * p->heads * cap;
	sp.ml_bytes = (parts * sizeof(float2) + 255) / 256 * 256;
	return sp.ml_bytes + parts * kDim * sizeof(float);
}

extern "C" int strata_k_attn_gpu(strata_dev *dev, const strata_attn_params *p,
				 strata_stream *s)
{
	if (!p || p->n_rows < 0 || p->heads < 1 || p->n_idx < 0 || p->n_win < 0 ||
	    (p->n_rows && (!p->q || !p->out)) || (p->n_idx && (!p->pool || !p->idx || p->B < 1)) ||
	    (p->n_win && (!p->win_pool || !p->win_idx || p->win_B < 1)))
		return -EINVAL;
	if (p->n_rows == 0)
		return 0;
	static bool attr_set; /* benign race: every caller sets the same value */
	size_t smem = attn_smem_bytes();
	if (!attr_set) {
		cudaFuncSetAttribute(attn_kernel<false>,
				     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		cudaFuncSetAttribute(attn_kernel<true>,
				     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		attr_set = true;
	}
	cudaStream_t st = (cudaStream_t)s;
	dim3 grid((unsigned)p->n_rows, (unsigned)((p->heads + kHeads - 1) / kHeads));
	attn_split sp = attn_split_for(p, p->scratch ? attn_split_cap(dev, p) : 1);
	if (sp.S < 2 || sp.bytes > p->scratch_bytes) {
		attn_kernel<false><<<grid, kThreads, smem, st>>>(*p, sp.chunk, nullptr, nullptr);
		return strata_dev_check(dev, "attention");
	}
	float2 *ml = (float2 *)p->scratch;
	float *u = (float *)((char *)p->scratch + sp.ml_bytes);
	grid.z = (unsigned)sp.S;
	attn_kernel<true><<<grid, kThreads, smem, st>>>(*p, sp.chunk, ml, u);
	int err = strata_dev_check(dev, "attention (split)");
	if (err)
		return err;
	split_combine_kernel<<<(unsigned)((size_t)p->n_rows * p->heads), kCombThreads, 0, st>>>(
		*p, sp.S, ml, u);
	return strata_dev_check(dev, "attention split combine");
}

extern "C" int strata_k_attn_combine_gpu(strata_dev *dev, const strata_attn_combine_params *p,
					 strata_stream *s)
{
	if (!p || p->n_parts < 1 || p->n_rows < 0 || p->heads < 1 || p->dim < 1 ||
	    (p->n_rows && (!p->part_out || !p->part_lse || !p->out)))
		return -EINVAL;
	if (p->n_rows == 0)
		return 0;
	combine_kernel<<<(unsigned)((size_t)p->n_rows * p->heads), 128, 0, (cudaStream_t)s>>>(*p);
	return strata_dev_check(dev, "attention combine");
}

extern "C" int strata_k_attn_map_gpu(strata_dev *dev, const strata_attn_map_params *p,
				     strata_stream *s)
{
	if (!p || p->n_rows < 0 || p->width < 0 ||
	    (p->n_rows && p->width && (!p->ids || !p->row_base || !p->out)))
		return -EINVAL;
	size_t n = (size_t)p->n_rows * p->width;
	if (!n)
		return 0;
	unsigned blocks = (unsigned)((n + 255) / 256);
	map_kernel<<<blocks < 1024 ? blocks : 1024, 256, 0, (cudaStream_t)s>>>(*p);
	return strata_dev_check(dev, "attention index map");
}
