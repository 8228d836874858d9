/*
 * The V4 byte formats on the GPU (FORMATS.md sections 2 and 3); the CPU twins are in
 * format_cpu.c and the two agree bit for bit because both run codec.h.
 *
 * One warp per entry. Each lane owns a fixed run of consecutive dims so that loads
 * and stores are contiguous across the warp (a main tile of 64 dims: 2 per lane, one
 * float2 in and one 16-bit store out; an index key: 4 dims per lane, one float4). A
 * tile's amax is a butterfly of fmaxf over shuffles; fmaxf of finite non-negative
 * values is exact, so the order of the tree cannot make it differ from the CPU loop.
 * Division by a power-of-two scale is IEEE division on both sides (nvcc's default
 * -prec-div=true, no fast math) and exact except where the quotient is far below the
 * format's resolution.
 */
#include "format_int.h"
#include "kernels_int.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <stdint.h>

namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float warp_max(float v, int width)
{
	for (int o = width / 2; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
	return v;
}

__device__ __forceinline__ int warp_entry(int n)
{
	int w = (int)(blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarp);
	return w < n ? w : -1;
}

__global__ void main_encode_kernel(const float *__restrict__ src,
				   const int64_t *__restrict__ slots, int n, int B,
				   uint8_t *__restrict__ pool)
{
	int i = warp_entry(n);
	if (i < 0)
		return;
	int64_t slot = fmt_slot(slots, i);
	if (slot < 0)
		return;
	const int lane = threadIdx.x % kWarp;
	const float *x = src + (size_t)i * STRATA_HEAD_DIM;
	uint8_t *data = pool + fmt_main_data_off(slot, B);
	uint8_t *scales = pool + fmt_main_scale_off(slot, B);

	float2 v[FMT_TILES];
#pragma unroll
	for (int t = 0; t < FMT_TILES; t++)
		v[t] = reinterpret_cast<const float2 *>(x + t * FMT_TILE)[lane];
	float2 r = reinterpret_cast<const float2 *>(x + STRATA_NOPE_DIM)[lane];

	uint8_t my_scale = 0; /* lane t keeps tile t's byte; lane 7 the zero pad */
#pragma unroll
	for (int t = 0; t < FMT_TILES; t++) {
		float amax = codec_amax_acc(codec_amax_acc(0.0f, v[t].x), v[t].y);
		amax = warp_max(amax, kWarp);
		int e = codec_main_scale_exp(amax);
		float s = codec_exp2i(e);
		uint8_t b0 = codec_e4m3_encode(codec_clampf(v[t].x / s, -448.0f, 448.0f));
		uint8_t b1 = codec_e4m3_encode(codec_clampf(v[t].y / s, -448.0f, 448.0f));
		reinterpret_cast<uint16_t *>(data + t * FMT_TILE)[lane] =
			(uint16_t)(b0 | (b1 << 8));
		if (lane == t)
			my_scale = codec_ue8m0_byte(e);
	}
	uint32_t r0 = codec_bf16_encode(r.x), r1 = codec_bf16_encode(r.y);
	reinterpret_cast<uint32_t *>(data + STRATA_NOPE_DIM)[lane] = r0 | (r1 << 16);
	if (lane < STRATA_MAIN_SCALE_BYTES)
		scales[lane] = my_scale;
}

__global__ void main_decode_kernel(const uint8_t *__restrict__ pool,
				   const int64_t *__restrict__ slots, int n, int B,
				   float *__restrict__ dst)
{
	int i = warp_entry(n);
	if (i < 0)
		return;
	const int lane = threadIdx.x % kWarp;
	float *y = dst + (size_t)i * STRATA_HEAD_DIM;
	int64_t slot = fmt_slot(slots, i);
	if (slot < 0) {
		for (int k = lane; k < STRATA_HEAD_DIM / 2; k += kWarp)
			reinterpret_cast<float2 *>(y)[k] = make_float2(0.0f, 0.0f);
		return;
	}
	const uint8_t *data = pool + fmt_main_data_off(slot, B);
	const uint8_t *scales = pool + fmt_main_scale_off(slot, B);
	uint16_t q[FMT_TILES];
#pragma unroll
	for (int t = 0; t < FMT_TILES; t++)
		q[t] = reinterpret_cast<const uint16_t *>(data + t * FMT_TILE)[lane];
	uint32_t r = reinterpret_cast<const uint32_t *>(data + STRATA_NOPE_DIM)[lane];
	/* Lane t fetches scale t and the warp shares it: one byte load per lane. */
	uint8_t my_scale = lane < FMT_TILES ? scales[lane] : 0;
#pragma unroll
	for (int t = 0; t < FMT_TILES; t++) {
		float s = codec_ue8m0_decode((uint8_t)__shfl_sync(kFull, (int)my_scale, t));
		reinterpret_cast<float2 *>(y + t * FMT_TILE)[lane] =
			make_float2(codec_e4m3_decode((uint8_t)(q[t] & 0xff)) * s,
				    codec_e4m3_decode((uint8_t)(q[t] >> 8)) * s);
	}
	reinterpret_cast<float2 *>(y + STRATA_NOPE_DIM)[lane] =
		make_float2(codec_bf16_decode((uint16_t)(r & 0xffff)),
			    codec_bf16_decode((uint16_t)(r >> 16)));
}

/* Index keys: lane l holds dims 4l..4l+3; an MXFP4 group of 32 is 8 lanes. */
__global__ void index_encode_kernel(strata_index_fmt fmt, const float *__restrict__ src,
				    const int64_t *__restrict__ slots, int n, int B,
				    uint8_t *__restrict__ pages)
{
	int i = warp_entry(n);
	if (i < 0)
		return;
	int64_t slot = fmt_slot(slots, i);
	if (slot < 0)
		return;
	const int lane = threadIdx.x % kWarp;
	float4 v = reinterpret_cast<const float4 *>(src + (size_t)i * STRATA_INDEX_DIM)[lane];
	uint8_t *data = pages + fmt_index_data_off(fmt, slot, B);
	uint8_t *scale = pages + fmt_index_scale_off(fmt, slot, B);
	float amax = codec_amax_acc(codec_amax_acc(0.0f, v.x), v.y);
	amax = codec_amax_acc(codec_amax_acc(amax, v.z), v.w);
	if (fmt == STRATA_INDEX_FP8) {
		amax = warp_max(amax, kWarp);
		float s = codec_exp2i(codec_main_scale_exp(amax));
		uint32_t b0 = codec_e4m3_encode(codec_clampf(v.x / s, -448.0f, 448.0f));
		uint32_t b1 = codec_e4m3_encode(codec_clampf(v.y / s, -448.0f, 448.0f));
		uint32_t b2 = codec_e4m3_encode(codec_clampf(v.z / s, -448.0f, 448.0f));
		uint32_t b3 = codec_e4m3_encode(codec_clampf(v.w / s, -448.0f, 448.0f));
		reinterpret_cast<uint32_t *>(data)[lane] = b0 | (b1 << 8) | (b2 << 16) | (b3 << 24);
		if (lane == 0)
			*reinterpret_cast<float *>(scale) = s;
	} else {
		amax = warp_max(amax, FMT_MX_GROUP / 4);
		int e = codec_mxfp4_scale_exp(amax);
		float s = codec_exp2i(e);
		uint32_t c0 = codec_e2m1_encode(v.x / s), c1 = codec_e2m1_encode(v.y / s);
		uint32_t c2 = codec_e2m1_encode(v.z / s), c3 = codec_e2m1_encode(v.w / s);
		reinterpret_cast<uint16_t *>(data)[lane] =
			(uint16_t)(c0 | (c1 << 4) | (c2 << 8) | (c3 << 12));
		if (lane % (FMT_MX_GROUP / 4) == 0)
			scale[lane / (FMT_MX_GROUP / 4)] = codec_ue8m0_byte(e);
	}
}

__global__ void index_decode_kernel(strata_index_fmt fmt, const uint8_t *__restrict__ pages,
				    const int64_t *__restrict__ slots, int n, int B,
				    float *__restrict__ dst)
{
	int i = warp_entry(n);
	if (i < 0)
		return;
	const int lane = threadIdx.x % kWarp;
	float4 *y = reinterpret_cast<float4 *>(dst + (size_t)i * STRATA_INDEX_DIM);
	int64_t slot = fmt_slot(slots, i);
	if (slot < 0) {
		y[lane] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		return;
	}
	const uint8_t *data = pages + fmt_index_data_off(fmt, slot, B);
	const uint8_t *scale = pages + fmt_index_scale_off(fmt, slot, B);
	if (fmt == STRATA_INDEX_FP8) {
		uint32_t q = reinterpret_cast<const uint32_t *>(data)[lane];
		float s = *reinterpret_cast<const float *>(scale);
		y[lane] = make_float4(codec_e4m3_decode((uint8_t)q) * s,
				      codec_e4m3_decode((uint8_t)(q >> 8)) * s,
				      codec_e4m3_decode((uint8_t)(q >> 16)) * s,
				      codec_e4m3_decode((uint8_t)(q >> 24)) * s);
	} else {
		uint32_t q = reinterpret_cast<const uint16_t *>(data)[lane];
		float s = codec_ue8m0_decode(scale[lane / (FMT_MX_GROUP / 4)]);
		y[lane] = make_float4(codec_e2m1_decode((uint8_t)(q & 0xf)) * s,
				      codec_e2m1_decode((uint8_t)((q >> 4) & 0xf)) * s,
				      codec_e2m1_decode((uint8_t)((q >> 8) & 0xf)) * s,
				      codec_e2m1_decode((uint8_t)(q >> 12)) * s);
	}
}

bool aligned(const void *p, uintptr_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

unsigned grid_for(int n)
{
	return (unsigned)((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

} // namespace

/* The vector loads and stores need the natural alignment of float2/float4 on the fp32
 * side and 4 bytes on the byte side; strata_dev_alloc gives 256. */
extern "C" int strata_k_main_encode_gpu(strata_dev *d, const strata_main_encode_params *p,
				       strata_stream *s)
{
	if (p->n == 0)
		return 0;
	if (!aligned(p->src, 8) || !aligned(p->pool, 4))
		return -EINVAL;
	main_encode_kernel<<<grid_for(p->n), kWarp * kWarpsPerBlock, 0, (cudaStream_t)kstream(d, s)>>>(
		p->src, p->slots, p->n, p->B, p->pool);
	return strata_dev_check(d, "main_encode_kernel");
}

extern "C" int strata_k_main_decode_gpu(strata_dev *d, const strata_main_decode_params *p,
				       strata_stream *s)
{
	if (p->n == 0)
		return 0;
	if (!aligned(p->dst, 8) || !aligned(p->pool, 4))
		return -EINVAL;
	main_decode_kernel<<<grid_for(p->n), kWarp * kWarpsPerBlock, 0, (cudaStream_t)kstream(d, s)>>>(
		p->pool, p->slots, p->n, p->B, p->dst);
	return strata_dev_check(d, "main_decode_kernel");
}

extern "C" int strata_k_index_encode_gpu(strata_dev *d, const strata_index_encode_params *p,
					strata_stream *s)
{
	if (p->n == 0)
		return 0;
	if (!aligned(p->src, 16) || !aligned(p->pages, 4))
		return -EINVAL;
	index_encode_kernel<<<grid_for(p->n), kWarp * kWarpsPerBlock, 0, (cudaStream_t)kstream(d, s)>>>(
		p->fmt, p->src, p->slots, p->n, p->B, p->pages);
	return strata_dev_check(d, "index_encode_kernel");
}

extern "C" int strata_k_index_decode_gpu(strata_dev *d, const strata_index_decode_params *p,
					strata_stream *s)
{
	if (p->n == 0)
		return 0;
	if (!aligned(p->dst, 16) || !aligned(p->pages, 4))
		return -EINVAL;
	index_decode_kernel<<<grid_for(p->n), kWarp * kWarpsPerBlock, 0, (cudaStream_t)kstream(d, s)>>>(
		p->fmt, p->pages, p->slots, p->n, p->B, p->dst);
	return strata_dev_check(d, "index_decode_kernel");
}
