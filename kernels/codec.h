/*
 * Private to kernels/: the scalar V4 codecs as static inline functions that compile
 * as C (CPU twins) and as CUDA device code (kernels), so both sides run the same
 * arithmetic and agree bit for bit. FORMATS.md sections 2 and 3.
 *
 * Every rounding here is round-to-nearest-even: rintf() in the default rounding mode
 * on the host, and the CUDA device rintf(), which is also RNE. Divisions by a power of
 * two are exact, so x / s is the same on both sides.
 */
#ifndef STRATA_KERNELS_CODEC_H
#define STRATA_KERNELS_CODEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define STRATA_HD __host__ __device__ __forceinline__
#else
#define STRATA_HD static inline
#endif

STRATA_HD uint32_t codec_f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}
STRATA_HD float codec_u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* ceil(log2(v)) for a finite v > 0, exactly (no libm log). Subnormals included. */
STRATA_HD int codec_ceil_log2(float v)
{
	uint32_t u = codec_f2u(v);
	int e = (int)((u >> 23) & 0xff);
	uint32_t m = u & 0x7fffff;
	if (e == 0) { /* subnormal: v = m * 2^-149 */
		int lz = 0;
		while (!(m & 0x400000u)) { m <<= 1; lz++; }
		/* v = 1.xxx * 2^(-127 - lz) after normalising the leading bit */
		int ex = -127 - lz;
		return (m & 0x3fffff) ? ex + 1 : ex;
	}
	return (e - 127) + (m ? 1 : 0);
}

/* 2^e as a float for -149 <= e <= 127. */
STRATA_HD float codec_exp2i(int e)
{
	if (e >= -126)
		return codec_u2f((uint32_t)(e + 127) << 23);
	return codec_u2f(1u << (e + 149));
}

/* ---- bf16 ---------------------------------------------------------------------- */
STRATA_HD uint16_t codec_bf16_encode(float x)
{
	uint32_t u = codec_f2u(x);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and signed */
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u); /* RNE on the dropped 16 bits */
	return (uint16_t)(u >> 16);
}
STRATA_HD float codec_bf16_decode(uint16_t b)
{
	return codec_u2f((uint32_t)b << 16);
}

/* ---- e4m3fn: bias 7, no infinities, max 448, NaN 0x7f ---------------------------- */
STRATA_HD uint8_t codec_e4m3_encode(float x)
{
	uint32_t u = codec_f2u(x);
	uint8_t sign = (uint8_t)((u >> 24) & 0x80);
	float a = fabsf(x);
	if (a != a)
		return 0x7f;
	if (a >= 448.0f) /* saturate (values in (448, 464) would round here too) */
		return (uint8_t)(sign | 0x7e);
	if (a < 0.015625f) { /* below 2^-6: subnormal steps of 2^-9; code 8 = 2^-6 */
		int q = (int)rintf(a * 512.0f);
		return (uint8_t)(sign | q);
	}
	int e = (int)((codec_f2u(a) >> 23) & 0xff) - 127; /* -6 .. 8 */
	float m = a * codec_exp2i(-e);                    /* [1, 2), exact */
	int q = (int)rintf((m - 1.0f) * 8.0f);            /* 0 .. 8 */
	int code = ((e + 7) << 3) + q;                    /* q == 8 carries into e */
	if (code > 0x7e)
		code = 0x7e;
	return (uint8_t)(sign | code);
}
STRATA_HD float codec_e4m3_decode(uint8_t b)
{
	int e = (b >> 3) & 0xf, m = b & 7;
	float v;
	if (e == 0xf && m == 7)
		v = codec_u2f(0x7fc00000u);
	else if (e == 0)
		v = (float)m * 0.001953125f; /* m * 2^-9 */
	else
		v = (1.0f + (float)m * 0.125f) * codec_exp2i(e - 7);
	return (b & 0x80) ? -v : v;
}

/* ---- e2m1 (4-bit): values 0, .5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign ------------- */
STRATA_HD uint8_t codec_e2m1_encode(float x)
{
	float a = fabsf(x);
	uint8_t c;
	/* Midpoints tie to the even code: 0.25->0, 0.75->2, 1.25->2, 1.75->4, 2.5->4,
	 * 3.5->6, 5->6. NaN maps to 0. */
	if (!(a > 0.25f)) c = 0;
	else if (a < 0.75f) c = 1;
	else if (a <= 1.25f) c = 2;
	else if (a < 1.75f) c = 3;
	else if (a <= 2.5f) c = 4;
	else if (a < 3.5f) c = 5;
	else if (a <= 5.0f) c = 6;
	else c = 7;
	/* The sign comes from the sign bit, as in e4m3 (so -0.0 and small negatives give
	 * the code 8, "-0"); NaN has no e2m1 code and becomes +0. */
	if (a != a)
		return 0;
	return (uint8_t)(c | ((codec_f2u(x) >> 28) & 8u));
}
STRATA_HD float codec_e2m1_decode(uint8_t code)
{
	/* e = code bits 2..1, m = bit 0: subnormal m/2 for e = 0, else (1 + m/2) 2^(e-1).
	 * Arithmetic rather than a table, which would sit in local memory on the GPU. */
	int e = (code >> 1) & 3, m = code & 1;
	float v = e == 0 ? 0.5f * (float)m : (1.0f + 0.5f * (float)m) * (float)(1 << (e - 1));
	return (code & 8) ? -v : v;
}

/* ---- UE8M0 scales ------------------------------------------------------------------ */
/* Main entry tile of 64 NoPE dims: s = 2^ceil(log2(max(amax, 1e-4) / 448)); returns
 * the exponent (the byte is exponent + 127 clamped to [0, 255]). */
STRATA_HD int codec_main_scale_exp(float amax)
{
	float v = fmaxf(amax, 1e-4f) / 448.0f;
	return codec_ceil_log2(v);
}
/* MXFP4 group of 32: s = 2^ceil(log2(max(amax, 6 * 2^-126) / 6)). */
STRATA_HD int codec_mxfp4_scale_exp(float amax)
{
	float v = fmaxf(amax, 6.0f * 1.17549435e-38f) / 6.0f;
	return codec_ceil_log2(v);
}
STRATA_HD uint8_t codec_ue8m0_byte(int exp)
{
	int b = exp + 127;
	return (uint8_t)(b < 0 ? 0 : (b > 255 ? 255 : b));
}
/* Byte 0xff is NaN in OCP E8M0; strata's encoders never write it (finite inputs
 * give at most 247 for main tiles and 253 for MXFP4 groups). */
STRATA_HD float codec_ue8m0_decode(uint8_t b)
{
	if (b == 0xff)
		return codec_u2f(0x7fc00000u);
	return codec_exp2i((int)b - 127);
}

STRATA_HD int codec_isfinite(float x)
{
	return (codec_f2u(x) & 0x7f800000u) != 0x7f800000u;
}
/* Running amax over a tile. Non-finite values are skipped: NaN encodes as NaN (e4m3)
 * or 0 (e2m1) and an infinity saturates, without poisoning the whole tile's scale.
 * fmaxf on finite non-negative values is exact and order-free, so a shuffle tree on
 * the GPU gets the same amax as the CPU's loop. */
STRATA_HD float codec_amax_acc(float m, float x)
{
	return codec_isfinite(x) ? fmaxf(m, fabsf(x)) : m;
}

STRATA_HD float codec_clampf(float x, float lo, float hi)
{
	return x < lo ? lo : (x > hi ? hi : x);
}

#endif
