/*
 * Benchmark baselines for the indexer (not used by strata itself): what
 * `strata bench indexer` measures the real kernels against in the same run.
 *  - a streaming read of the key bytes (the memory floor),
 *  - a cuBLAS bf16 GEMM (the matrix-rate floor of the dot products),
 *  - a naive indexer: a CUDA-core score kernel and a full segmented radix sort of
 *    every row's scores (what one writes first).
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cub/device/device_segmented_radix_sort.cuh>

#include "kernels/indexer_int.h"
#include "kernels_int.h"

#include <errno.h>
#include <stdlib.h>

struct strata_idxbase {
	strata_dev *dev;
	cublasHandle_t blas;
	uint32_t *sink;
	/* naive */
	float *sc_in, *sc_out;
	int32_t *id_in, *id_out;
	int *offsets;
	void *temp;
	size_t temp_bytes, items_cap;
	int rows_cap;
	int last_limit;
};

namespace {

constexpr int kReadBlocks = 132 * 8;

__global__ void stream_read_kernel(const uint4 *p, size_t n, uint32_t *sink)
{
	uint32_t acc = 0;
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i + 3 * stride < n; i += 4 * stride) {
		uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride);
		uint4 c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
		acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^
		       d.y ^ d.z ^ d.w;
	}
	for (; i < n; i += stride) {
		uint4 a = __ldcs(p + i);
		acc ^= a.x ^ a.y ^ a.z ^ a.w;
	}
	if (acc == 0x9e3779b9u) /* keeps the loads; practically never stores */
		sink[blockIdx.x] = acc;
}

/* One warp per key: the key dequantised to smem, lane l owns heads l, l+32, ... */
__global__ void naive_score_kernel(strata_indexer_params p, float *sc, int32_t *ids)
{
	extern __shared__ float sm[];
	float *qt = sm;                                  /* [128][heads]: d-major */
	float *wv = qt + IDX_DIM * p.heads;              /* [heads] */
	float *kv = wv + p.heads;                        /* [8 warps][128] */
	const int row = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int lo = 0, hi = p.n_req - 1; /* request of the row */
	while (lo < hi) {
		int mid = (lo + hi + 1) >> 1;
		if (p.req_rows[mid] <= row)
			lo = mid;
		else
			hi = mid - 1;
	}
	const int req = lo;
	int L = p.row_limit[row];
	L = L < 0 ? 0 : (L > p.max_limit ? p.max_limit : L);
	for (int e = threadIdx.x; e < p.heads * IDX_DIM; e += blockDim.x) {
		int h = e / IDX_DIM, d = e % IDX_DIM;
		qt[d * p.heads + h] = codec_bf16_decode(p.q[(size_t)row * p.heads * IDX_DIM + e]);
	}
	for (int h = threadIdx.x; h < p.heads; h += blockDim.x)
		wv[h] = p.w[(size_t)row * p.heads + h];
	__syncthreads();
	const size_t eb = p.fmt == STRATA_INDEX_FP8 ? STRATA_INDEX_FP8_BYTES : STRATA_INDEX_MXFP4_BYTES;
	float *k = kv + warp * IDX_DIM;
	for (int t = 0; t < 8; t++) {
		const int j = blockIdx.x * 64 + warp * 8 + t;
		if (j >= p.max_limit)
			break;
		float score = -INFINITY;
		if (j < L) {
			const uint8_t *page =
				p.pages + (size_t)p.page_table[(size_t)req * p.max_pages + j / p.B] * p.B * eb;
			const int off = j % p.B;
			float ks = 1.0f;
			for (int d = lane; d < IDX_DIM; d += 32) {
				if (p.fmt == STRATA_INDEX_MXFP4) {
					uint8_t b = page[(size_t)off * 64 + d / 2];
					k[d] = codec_e2m1_decode((d & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15)) *
					       codec_ue8m0_decode(page[(size_t)p.B * 64 + off * 4 + d / 32]);
				} else {
					k[d] = codec_e4m3_decode(page[(size_t)off * 128 + d]);
				}
			}
			if (p.fmt == STRATA_INDEX_FP8)
				ks = *reinterpret_cast<const float *>(page + (size_t)p.B * 128 + off * 4);
			__syncwarp();
			float acc = 0.0f;
			for (int h = lane; h < p.heads; h += 32) {
				float z = 0.0f;
				for (int d = 0; d < IDX_DIM; d++)
					z += qt[d * p.heads + h] * k[d];
				acc += wv[h] * fmaxf(z, 0.0f);
			}
			for (int o = 16; o; o >>= 1)
				acc += __shfl_xor_sync(0xffffffffu, acc, o);
			score = acc * ks;
			__syncwarp();
		}
		if (lane == 0) {
			sc[(size_t)row * p.max_limit + j] = score;
			ids[(size_t)row * p.max_limit + j] = j;
		}
	}
}

__global__ void offsets_kernel(int *off, int n, int stride)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i <= n)
		off[i] = i * stride;
}

} // namespace

extern "C" int strata_idxbase_create(strata_dev *dev, strata_idxbase **out)
{
	if (!dev || !out)
		return -EINVAL;
	*out = NULL;
	if (!strata_dev_is_gpu(dev))
		return STRATA_E_UNSUPPORTED;
	strata_idxbase *b = (strata_idxbase *)calloc(1, sizeof *b);
	if (!b)
		return -ENOMEM;
	b->dev = dev;
	if (cublasCreate(&b->blas) != CUBLAS_STATUS_SUCCESS) {
		free(b);
		return STRATA_E_CUDA;
	}
	int err = strata_dev_alloc(dev, kReadBlocks * sizeof(uint32_t), (void **)&b->sink);
	if (err) {
		cublasDestroy(b->blas);
		free(b);
		return err;
	}
	*out = b;
	return 0;
}

static void naive_free(strata_idxbase *b)
{
	strata_dev_free(b->dev, b->sc_in);
	strata_dev_free(b->dev, b->sc_out);
	strata_dev_free(b->dev, b->id_in);
	strata_dev_free(b->dev, b->id_out);
	strata_dev_free(b->dev, b->offsets);
	strata_dev_free(b->dev, b->temp);
	b->sc_in = b->sc_out = NULL;
	b->id_in = b->id_out = NULL;
	b->offsets = NULL;
	b->temp = NULL;
	b->items_cap = 0;
	b->rows_cap = 0;
	b->temp_bytes = 0;
}

extern "C" void strata_idxbase_destroy(strata_idxbase *b)
{
	if (!b)
		return;
	naive_free(b);
	strata_dev_free(b->dev, b->sink);
	cublasDestroy(b->blas);
	free(b);
}

extern "C" int strata_idxbase_stream_read(strata_idxbase *b, const void *p, size_t bytes,
					  strata_stream *s)
{
	if (!b || !p || ((uintptr_t)p & 15))
		return -EINVAL;
	stream_read_kernel<<<kReadBlocks, 256, 0, (cudaStream_t)kstream(b->dev, s)>>>((const uint4 *)p, bytes / 16,
								    b->sink);
	return strata_dev_check(b->dev, "idxbase: stream read");
}

extern "C" int strata_idxbase_gemm(strata_idxbase *b, int batch, int m, int n, int k,
				   const uint16_t *a, long long stride_a, const uint16_t *bm,
				   long long stride_b, float *c, long long stride_c, strata_stream *s)
{
	if (!b || batch < 1 || m < 1 || n < 1 || k < 1)
		return -EINVAL;
	const float one = 1.0f, zero = 0.0f;
	if (cublasSetStream(b->blas, (cudaStream_t)kstream(b->dev, s)) != CUBLAS_STATUS_SUCCESS)
		return STRATA_E_CUDA;
	/* row-major C[m][n] = A[m][k] B[n][k]^T is column-major C^T = B^T' A^T' with
	 * B read transposed (k x n, ld k) and A as is (k x m, ld k) */
	cublasStatus_t st = cublasGemmStridedBatchedEx(
		b->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, bm, CUDA_R_16BF, k, stride_b, a,
		CUDA_R_16BF, k, stride_a, &zero, c, CUDA_R_32F, n, stride_c, batch,
		CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (st != CUBLAS_STATUS_SUCCESS) {
		KLOG(STRATA_LOG_ERROR, "cublasGemmStridedBatchedEx: status %d", (int)st);
		return STRATA_E_CUDA;
	}
	return strata_dev_check(b->dev, "idxbase: gemm");
}

extern "C" int strata_idxbase_naive(strata_idxbase *b, const strata_indexer_params *p,
				    strata_stream *s)
{
	int err;
	if (!b || (err = idx_check_params(p)))
		return b ? err : -EINVAL;
	if (p->n_rows == 0 || p->max_limit == 0)
		return 0;
	size_t items = (size_t)p->n_rows * p->max_limit;
	if (items > (size_t)INT32_MAX)
		return -EINVAL;
	if (items > b->items_cap || p->n_rows > b->rows_cap) {
		naive_free(b);
		size_t tb = 0;
		if (cub::DeviceSegmentedRadixSort::SortPairsDescending(
			    nullptr, tb, (const float *)nullptr, (float *)nullptr,
			    (const int32_t *)nullptr, (int32_t *)nullptr, (int)items, p->n_rows,
			    (const int *)nullptr, (const int *)nullptr) != cudaSuccess)
			return STRATA_E_CUDA;
		if ((err = strata_dev_alloc(b->dev, items * 4, (void **)&b->sc_in)) ||
		    (err = strata_dev_alloc(b->dev, items * 4, (void **)&b->sc_out)) ||
		    (err = strata_dev_alloc(b->dev, items * 4, (void **)&b->id_in)) ||
		    (err = strata_dev_alloc(b->dev, items * 4, (void **)&b->id_out)) ||
		    (err = strata_dev_alloc(b->dev, (size_t)(p->n_rows + 1) * 4, (void **)&b->offsets)) ||
		    (err = strata_dev_alloc(b->dev, tb, &b->temp))) {
			naive_free(b);
			return err;
		}
		b->temp_bytes = tb;
		b->items_cap = items;
		b->rows_cap = p->n_rows;
	}
	cudaStream_t st = (cudaStream_t)kstream(b->dev, s);
	b->last_limit = p->max_limit;
	offsets_kernel<<<(p->n_rows + 256) / 256, 256, 0, st>>>(b->offsets, p->n_rows, p->max_limit);
	size_t smem = ((size_t)IDX_DIM * p->heads + p->heads + 8 * IDX_DIM) * sizeof(float);
	if (smem > 48 * 1024 &&
	    cudaFuncSetAttribute(naive_score_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)smem) != cudaSuccess)
		return strata_dev_check(b->dev, "idxbase: naive smem");
	dim3 grid((unsigned)((p->max_limit + 63) / 64), (unsigned)p->n_rows);
	naive_score_kernel<<<grid, 256, smem, st>>>(*p, b->sc_in, b->id_in);
	if ((err = strata_dev_check(b->dev, "idxbase: naive score")))
		return err;
	size_t tb = b->temp_bytes;
	if (cub::DeviceSegmentedRadixSort::SortPairsDescending(
		    b->temp, tb, b->sc_in, b->sc_out, b->id_in, b->id_out, (int)items, p->n_rows,
		    b->offsets, b->offsets + 1, 0, 32, st) != cudaSuccess)
		return strata_dev_check(b->dev, "idxbase: naive sort");
	return strata_dev_check(b->dev, "idxbase: naive sort");
}

extern "C" int strata_idxbase_naive_ids(strata_idxbase *b, int row, int32_t *out, float *scores,
					int n)
{
	if (!b || !out || row < 0 || row >= b->rows_cap || n < 0 || n > b->last_limit)
		return -EINVAL;
	/* after the naive's launches, on whatever stream they ran */
	if (cudaDeviceSynchronize() != cudaSuccess)
		return strata_dev_check(b->dev, "idxbase: naive ids");
	const size_t at = (size_t)row * b->last_limit;
	int err = strata_dev_copy(b->dev, out, b->id_out + at, (size_t)n * sizeof(int32_t), NULL);
	if (!err && scores)
		err = strata_dev_copy(b->dev, scores, b->sc_out + at, (size_t)n * sizeof(float), NULL);
	return err ? err : strata_stream_sync(b->dev, NULL);
}
