/*
 * The V4 byte formats on the CPU (FORMATS.md sections 2 and 3): the reference twins of
 * format.cu, the backend dispatchers and the public scalar codecs.
 *
 * All arithmetic is in codec.h and shared with the GPU kernels, so the two agree bit
 * for bit. The only per-backend choices are loop orders, which cannot change a result:
 * amax is an exact max, and every value is quantised on its own.
 */
#include "format_int.h"
#include "kernels_int.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* ---- public scalar codecs ------------------------------------------------------------ */

uint8_t strata_e4m3_encode(float x) { return codec_e4m3_encode(x); }
float strata_e4m3_decode(uint8_t b) { return codec_e4m3_decode(b); }
uint8_t strata_e2m1_encode(float x) { return codec_e2m1_encode(x); }
float strata_e2m1_decode(uint8_t code) { return codec_e2m1_decode(code); }
uint16_t strata_bf16_encode(float x) { return codec_bf16_encode(x); }
float strata_bf16_decode(uint16_t b) { return codec_bf16_decode(b); }

/* ---- argument checks, shared by both backends ------------------------------------- */

/* The same shape and alignment rules on both backends (kernels.h), so that a caller's
 * misaligned array fails in the CPU tests as it would on the GPU: fp32 side `fa`
 * bytes aligned (8 for main entries, 16 for index keys), byte side 4. */
static int check_main(const float *f, const void *bytes, int n, int B, uintptr_t fa)
{
	if (n < 0 || B < 1)
		return -EINVAL;
	if (n > 0 && (!f || !bytes || ((uintptr_t)f & (fa - 1)) || ((uintptr_t)bytes & 3)))
		return -EINVAL;
	return 0;
}

static int check_index(strata_index_fmt fm, const float *f, const void *bytes, int n, int B)
{
	if (fm != STRATA_INDEX_MXFP4 && fm != STRATA_INDEX_FP8)
		return -EINVAL;
	return check_main(f, bytes, n, B, 16);
}

/* ---- main entries ------------------------------------------------------------------- */

static void main_encode_one(const float *x, uint8_t *data, uint8_t *scales)
{
	for (int t = 0; t < FMT_TILES; t++) {
		const float *v = x + t * FMT_TILE;
		float amax = 0.0f;
		for (int k = 0; k < FMT_TILE; k++)
			amax = codec_amax_acc(amax, v[k]);
		int e = codec_main_scale_exp(amax);
		float s = codec_exp2i(e);
		for (int k = 0; k < FMT_TILE; k++)
			data[t * FMT_TILE + k] =
				codec_e4m3_encode(codec_clampf(v[k] / s, -448.0f, 448.0f));
		scales[t] = codec_ue8m0_byte(e);
	}
	scales[FMT_TILES] = 0;
	uint8_t *rope = data + STRATA_NOPE_DIM;
	for (int k = 0; k < STRATA_ROPE_DIM; k++) {
		uint16_t b = codec_bf16_encode(x[STRATA_NOPE_DIM + k]);
		rope[2 * k] = (uint8_t)(b & 0xff); /* little-endian on every host */
		rope[2 * k + 1] = (uint8_t)(b >> 8);
	}
}

static void main_decode_one(const uint8_t *data, const uint8_t *scales, float *y)
{
	for (int t = 0; t < FMT_TILES; t++) {
		float s = codec_ue8m0_decode(scales[t]);
		for (int k = 0; k < FMT_TILE; k++)
			y[t * FMT_TILE + k] = codec_e4m3_decode(data[t * FMT_TILE + k]) * s;
	}
	const uint8_t *rope = data + STRATA_NOPE_DIM;
	for (int k = 0; k < STRATA_ROPE_DIM; k++)
		y[STRATA_NOPE_DIM + k] =
			codec_bf16_decode((uint16_t)(rope[2 * k] | (rope[2 * k + 1] << 8)));
}

int strata_k_main_encode_cpu(const strata_main_encode_params *p)
{
	int err = p ? check_main(p->src, p->pool, p->n, p->B, 8) : -EINVAL;
	if (err)
		return err;
	for (int i = 0; i < p->n; i++) {
		int64_t slot = fmt_slot(p->slots, i);
		if (slot < 0)
			continue;
		main_encode_one(p->src + (size_t)i * STRATA_HEAD_DIM,
				p->pool + fmt_main_data_off(slot, p->B),
				p->pool + fmt_main_scale_off(slot, p->B));
	}
	return 0;
}

int strata_k_main_decode_cpu(const strata_main_decode_params *p)
{
	int err = p ? check_main(p->dst, p->pool, p->n, p->B, 8) : -EINVAL;
	if (err)
		return err;
	for (int i = 0; i < p->n; i++) {
		int64_t slot = fmt_slot(p->slots, i);
		float *y = p->dst + (size_t)i * STRATA_HEAD_DIM;
		if (slot < 0) {
			memset(y, 0, STRATA_HEAD_DIM * sizeof *y);
			continue;
		}
		main_decode_one(p->pool + fmt_main_data_off(slot, p->B),
				p->pool + fmt_main_scale_off(slot, p->B), y);
	}
	return 0;
}

/* ---- index keys ---------------------------------------------------------------------- */

static void mxfp4_encode_one(const float *x, uint8_t *data, uint8_t *scales)
{
	for (int g = 0; g < FMT_MX_GROUPS; g++) {
		const float *v = x + g * FMT_MX_GROUP;
		float amax = 0.0f;
		for (int k = 0; k < FMT_MX_GROUP; k++)
			amax = codec_amax_acc(amax, v[k]);
		int e = codec_mxfp4_scale_exp(amax);
		float s = codec_exp2i(e);
		for (int k = 0; k < FMT_MX_GROUP; k += 2) {
			uint8_t lo = codec_e2m1_encode(v[k] / s);
			uint8_t hi = codec_e2m1_encode(v[k + 1] / s);
			data[(g * FMT_MX_GROUP + k) / 2] = (uint8_t)(lo | (hi << 4));
		}
		scales[g] = codec_ue8m0_byte(e);
	}
}

static void mxfp4_decode_one(const uint8_t *data, const uint8_t *scales, float *y)
{
	for (int j = 0; j < FMT_MX_PAYLOAD; j++) {
		float s = codec_ue8m0_decode(scales[(2 * j) / FMT_MX_GROUP]);
		y[2 * j] = codec_e2m1_decode(data[j] & 0xf) * s;
		y[2 * j + 1] = codec_e2m1_decode(data[j] >> 4) * s;
	}
}

static void fp8_encode_one(const float *x, uint8_t *data, uint8_t *scale)
{
	float amax = 0.0f;
	for (int k = 0; k < STRATA_INDEX_DIM; k++)
		amax = codec_amax_acc(amax, x[k]);
	float s = codec_exp2i(codec_main_scale_exp(amax));
	for (int k = 0; k < STRATA_INDEX_DIM; k++)
		data[k] = codec_e4m3_encode(codec_clampf(x[k] / s, -448.0f, 448.0f));
	memcpy(scale, &s, 4); /* fp32, little-endian like the host */
}

static void fp8_decode_one(const uint8_t *data, const uint8_t *scale, float *y)
{
	float s;
	memcpy(&s, scale, 4);
	for (int k = 0; k < STRATA_INDEX_DIM; k++)
		y[k] = codec_e4m3_decode(data[k]) * s;
}

int strata_k_index_encode_cpu(const strata_index_encode_params *p)
{
	int err = p ? check_index(p->fmt, p->src, p->pages, p->n, p->B) : -EINVAL;
	if (err)
		return err;
	for (int i = 0; i < p->n; i++) {
		int64_t slot = fmt_slot(p->slots, i);
		if (slot < 0)
			continue;
		const float *x = p->src + (size_t)i * STRATA_INDEX_DIM;
		uint8_t *data = p->pages + fmt_index_data_off(p->fmt, slot, p->B);
		uint8_t *scale = p->pages + fmt_index_scale_off(p->fmt, slot, p->B);
		if (p->fmt == STRATA_INDEX_FP8)
			fp8_encode_one(x, data, scale);
		else
			mxfp4_encode_one(x, data, scale);
	}
	return 0;
}

int strata_k_index_decode_cpu(const strata_index_decode_params *p)
{
	int err = p ? check_index(p->fmt, p->dst, p->pages, p->n, p->B) : -EINVAL;
	if (err)
		return err;
	for (int i = 0; i < p->n; i++) {
		int64_t slot = fmt_slot(p->slots, i);
		float *y = p->dst + (size_t)i * STRATA_INDEX_DIM;
		if (slot < 0) {
			memset(y, 0, STRATA_INDEX_DIM * sizeof *y);
			continue;
		}
		const uint8_t *data = p->pages + fmt_index_data_off(p->fmt, slot, p->B);
		const uint8_t *scale = p->pages + fmt_index_scale_off(p->fmt, slot, p->B);
		if (p->fmt == STRATA_INDEX_FP8)
			fp8_decode_one(data, scale, y);
		else
			mxfp4_decode_one(data, scale, y);
	}
	return 0;
}

/* ---- dispatchers ---------------------------------------------------------------------- */

int strata_k_main_encode(strata_dev *d, const strata_main_encode_params *p, strata_stream *s)
{
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(d)) {
		int err = p ? check_main(p->src, p->pool, p->n, p->B, 8) : -EINVAL;
		return err ? err : strata_k_main_encode_gpu(d, p, s);
	}
#endif
	return strata_k_main_encode_cpu(p);
}

int strata_k_main_decode(strata_dev *d, const strata_main_decode_params *p, strata_stream *s)
{
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(d)) {
		int err = p ? check_main(p->dst, p->pool, p->n, p->B, 8) : -EINVAL;
		return err ? err : strata_k_main_decode_gpu(d, p, s);
	}
#endif
	return strata_k_main_decode_cpu(p);
}

int strata_k_index_encode(strata_dev *d, const strata_index_encode_params *p,
			  strata_stream *s)
{
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(d)) {
		int err = p ? check_index(p->fmt, p->src, p->pages, p->n, p->B) : -EINVAL;
		return err ? err : strata_k_index_encode_gpu(d, p, s);
	}
#endif
	return strata_k_index_encode_cpu(p);
}

int strata_k_index_decode(strata_dev *d, const strata_index_decode_params *p,
			  strata_stream *s)
{
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(d)) {
		int err = p ? check_index(p->fmt, p->dst, p->pages, p->n, p->B) : -EINVAL;
		return err ? err : strata_k_index_decode_gpu(d, p, s);
	}
#endif
	return strata_k_index_decode_cpu(p);
}
