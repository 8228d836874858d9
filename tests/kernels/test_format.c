/*
 * kernels/: the V4 byte formats (FORMATS.md sections 2 and 3) on the CPU reference.
 *
 * Every expected byte below is derived by hand in the comment beside it, not by
 * running the code under test. e4m3fn: bias 7, code = sign | exp << 3 | mant, normal
 * value (1 + m/8) 2^(e-7), subnormal m 2^-9, max 0x7e = 448, NaN 0x7f. e2m1 codes
 * 0..7 = 0, .5, 1, 1.5, 2, 3, 4, 6, bit 3 the sign. bf16: the top half of the fp32.
 *
 * Where the engines differ (FORMATS.md section 2): vLLM rounds x/s to bf16 before the
 * e4m3 cast, and FlashMLA's test applies the 1e-4 floor to amax/448 rather than to
 * amax. strata follows DeepSeek's reference: s = 2^ceil(log2(max(amax, 1e-4) / 448)),
 * e4m3(x / s) straight from fp32. Only near-zero tiles (amax < 1e-4 * 448) tell the
 * three apart, and tile 4 of main_known_entry below is such a tile.
 */
#include <errno.h>
#include <math.h>

#include "testutil.h"
#include "kernels/codec.h"
#include "kernels/kernels.h"

static float p2(int e) { return ldexpf(1.0f, e); }

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	ck_assert_ptr_nonnull(p);
	return p;
}

/* ---- scalar codecs -------------------------------------------------------------------- */

START_TEST(e4m3_vectors)
{
	const struct { float x; uint8_t b; } v[] = {
		{ 0.0f, 0x00 }, { -0.0f, 0x80 },
		{ 0x1p-9f, 0x01 }, { -0x1p-9f, 0x81 },   /* smallest subnormal */
		{ 0x1p-10f, 0x00 },                      /* tie 0 | 1 -> even 0 */
		{ 0x1p-10f + 0x1p-20f, 0x01 },           /* just past the tie */
		{ 3 * 0x1p-10f, 0x02 },                  /* tie 1 | 2 -> 2 */
		{ 5 * 0x1p-10f, 0x02 },                  /* tie 2 | 3 -> 2 */
		{ 0x1p-12f, 0x00 }, { -0x1p-12f, 0x80 }, /* underflow keeps the sign */
		{ 15 * 0x1p-10f, 0x08 },                 /* tie 7 | 8 (= 2^-6) -> 8 */
		{ 0x1p-6f, 0x08 },                       /* smallest normal: e=1 m=0 */
		{ 1.0f, 0x38 },                          /* e=7 m=0 */
		{ 1.125f, 0x39 },
		{ 1.0625f, 0x38 },                       /* tie m 0 | 1 -> 0 */
		{ 1.1875f, 0x3a },                       /* tie m 1 | 2 -> 2 */
		{ 248.0f, 0x78 },                        /* tie 240 (0x77) | 256 (0x78) */
		{ 400.0f, 0x7c },                        /* tie 384 (0x7c) | 416 (0x7d) */
		{ 416.0f, 0x7d },
		{ 432.0f, 0x7e },                        /* tie 416 | 448 -> 0x7e */
		{ 448.0f, 0x7e }, { -448.0f, 0xfe },     /* max */
		{ 449.0f, 0x7e }, { 464.0f, 0x7e }, { 1e30f, 0x7e }, /* saturate */
		{ INFINITY, 0x7e }, { -INFINITY, 0xfe },
		{ NAN, 0x7f },
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		ck_assert_msg(strata_e4m3_encode(v[i].x) == v[i].b, "e4m3(%a) = 0x%02x, want 0x%02x",
			      (double)v[i].x, strata_e4m3_encode(v[i].x), v[i].b);
	ck_assert(strata_e4m3_decode(0x01) == 0x1p-9f);
	ck_assert(strata_e4m3_decode(0x07) == 7 * 0x1p-9f);
	ck_assert(strata_e4m3_decode(0x08) == 0x1p-6f);
	ck_assert(strata_e4m3_decode(0x38) == 1.0f);
	ck_assert(strata_e4m3_decode(0x7e) == 448.0f);
	ck_assert(strata_e4m3_decode(0xfe) == -448.0f);
	ck_assert(isnan(strata_e4m3_decode(0x7f)) && isnan(strata_e4m3_decode(0xff)));
	/* Every non-NaN code survives decode + encode. */
	for (int b = 0; b < 256; b++)
		if ((b & 0x7f) != 0x7f)
			ck_assert_int_eq(strata_e4m3_encode(strata_e4m3_decode((uint8_t)b)), b);
}
END_TEST

START_TEST(e2m1_vectors)
{
	const struct { float x; uint8_t c; } v[] = {
		{ 0.0f, 0 }, { -0.0f, 8 }, { -0.1f, 8 },
		{ 0.25f, 0 },   /* tie 0 | .5 -> code 0 */
		{ 0.26f, 1 }, { 0.5f, 1 },
		{ 0.75f, 2 },   /* tie .5 (1) | 1 (2) -> 2 */
		{ 1.0f, 2 },
		{ 1.25f, 2 },   /* tie 1 (2) | 1.5 (3) -> 2 */
		{ 1.5f, 3 },
		{ 1.75f, 4 },   /* tie 1.5 (3) | 2 (4) -> 4 */
		{ 2.0f, 4 },
		{ 2.5f, 4 },    /* tie 2 (4) | 3 (5) -> 4 */
		{ 3.0f, 5 },
		{ 3.5f, 6 },    /* tie 3 (5) | 4 (6) -> 6 */
		{ 4.0f, 6 },
		{ 5.0f, 6 },    /* tie 4 (6) | 6 (7) -> 6 */
		{ 5.01f, 7 }, { 6.0f, 7 }, { 7.0f, 7 }, { 1e30f, 7 }, { INFINITY, 7 },
		{ -6.0f, 15 }, { -0.75f, 10 }, { -1.75f, 12 }, { -INFINITY, 15 },
		{ NAN, 0 },
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		ck_assert_msg(strata_e2m1_encode(v[i].x) == v[i].c, "e2m1(%a) = %d, want %d",
			      (double)v[i].x, strata_e2m1_encode(v[i].x), v[i].c);
	const float mag[8] = { 0, .5f, 1, 1.5f, 2, 3, 4, 6 };
	for (int c = 0; c < 16; c++) {
		float want = (c & 8) ? -mag[c & 7] : mag[c & 7];
		ck_assert(strata_e2m1_decode((uint8_t)c) == want);
		ck_assert(!!signbit(strata_e2m1_decode((uint8_t)c)) == ((c & 8) != 0));
		ck_assert_int_eq(strata_e2m1_encode(want), c);
	}
}
END_TEST

START_TEST(bf16_vectors)
{
	uint32_t snan = 0x7f800001u, qnan = 0x7fc00000u;
	float fsnan, fqnan;
	memcpy(&fsnan, &snan, 4);
	memcpy(&fqnan, &qnan, 4);
	const struct { float x; uint16_t b; } v[] = {
		{ 1.0f, 0x3f80 }, { -2.0f, 0xc000 }, { 3.0f, 0x4040 },
		{ 0.0f, 0x0000 }, { -0.0f, 0x8000 },
		{ 1.0f + 0x1p-8f, 0x3f80 },              /* tie m 0 | 1 -> 0 */
		{ 1.0f + 3 * 0x1p-8f, 0x3f82 },          /* tie m 1 | 2 -> 2 */
		{ 1.0f + 0x1p-8f + 0x1p-20f, 0x3f81 },   /* past the tie */
		{ 0x1p-133f, 0x0001 },                   /* fp32 subnormal 0x00010000 */
		{ INFINITY, 0x7f80 }, { -INFINITY, 0xff80 },
		{ 3.40282347e38f, 0x7f80 },              /* FLT_MAX rounds up to inf */
		{ fqnan, 0x7fc0 },
		{ fsnan, 0x7fc0 },                       /* signalling NaN stays NaN */
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		ck_assert_msg(strata_bf16_encode(v[i].x) == v[i].b, "bf16(%a) = 0x%04x, want 0x%04x",
			      (double)v[i].x, strata_bf16_encode(v[i].x), v[i].b);
	ck_assert(strata_bf16_decode(0x3f80) == 1.0f);
	ck_assert(strata_bf16_decode(0xc040) == -3.0f);
	ck_assert(isnan(strata_bf16_decode(0x7fc0)));
}
END_TEST

/* UE8M0 exponents and their byte clamp; ceil(log2) on awkward inputs. */
START_TEST(scale_exponents)
{
	ck_assert_int_eq(codec_ceil_log2(1.0f), 0);
	ck_assert_int_eq(codec_ceil_log2(1.0000001f), 1);
	ck_assert_int_eq(codec_ceil_log2(0.75f), 0);
	ck_assert_int_eq(codec_ceil_log2(0x1p-149f), -149);     /* smallest subnormal */
	ck_assert_int_eq(codec_ceil_log2(3 * 0x1p-149f), -147);
	ck_assert_int_eq(codec_ceil_log2(0x1p-127f), -127);
	ck_assert_int_eq(codec_ceil_log2(0x1.8p-127f), -126);
	/* Main tiles: 1e-4/448 = 2.23e-7 in (2^-23, 2^-22] -> -22, byte 105. */
	ck_assert_int_eq(codec_main_scale_exp(0.0f), -22);
	ck_assert_int_eq(codec_main_scale_exp(1e-30f), -22);
	ck_assert_int_eq(codec_main_scale_exp(448.0f), 0);
	/* 3e38/448 = 6.70e35 in (2^119 = 6.65e35, 2^120] -> 120, byte 247: the largest a
	 * finite tile can get, so the [0, 255] clamp is never reached by main tiles. */
	ck_assert_int_eq(codec_main_scale_exp(3e38f), 120);
	/* MXFP4: floor 6 * 2^-126 -> -126 (byte 1); 3e38/6 = 5e37 in (2^125, 2^126]. */
	ck_assert_int_eq(codec_mxfp4_scale_exp(0.0f), -126);
	ck_assert_int_eq(codec_mxfp4_scale_exp(6.0f), 0);
	ck_assert_int_eq(codec_mxfp4_scale_exp(3e38f), 126);
	ck_assert_int_eq(codec_ue8m0_byte(-127), 0);
	ck_assert_int_eq(codec_ue8m0_byte(-300), 0);
	ck_assert_int_eq(codec_ue8m0_byte(128), 255);
	ck_assert_int_eq(codec_ue8m0_byte(300), 255);
	ck_assert(codec_ue8m0_decode(0) == 0x1p-127f);
	ck_assert(codec_ue8m0_decode(127) == 1.0f);
	ck_assert(codec_ue8m0_decode(254) == 0x1p127f);
	ck_assert(isnan(codec_ue8m0_decode(255))); /* OCP E8M0 NaN */
}
END_TEST

/* ---- main entry ----------------------------------------------------------------------- */

static void main_encode1(const float *x, int B, int64_t slot, uint8_t *pool)
{
	strata_main_encode_params p = { .src = x, .slots = &slot, .n = 1, .B = B, .pool = pool };
	ck_assert_int_eq(strata_k_main_encode_cpu(&p), 0);
}

START_TEST(main_zero_entry)
{
	float x[512] = { 0 };
	uint8_t pool[1152];
	memset(pool, 0xaa, sizeof pool);
	main_encode1(x, 1, 0, pool);
	for (int k = 0; k < 576; k++)
		ck_assert_int_eq(pool[k], 0);
	for (int t = 0; t < 7; t++)
		ck_assert_int_eq(pool[576 + t], 105); /* 2^-22: the 1e-4 floor */
	ck_assert_int_eq(pool[583], 0);               /* pad byte */
	for (int k = 584; k < 1152; k++)
		ck_assert_int_eq(pool[k], 0xaa);      /* block padding untouched */
}
END_TEST

/* One entry whose every tile exercises a different rule; bytes derived by hand. */
static void known_entry(float *x, uint8_t *want_data, uint8_t *want_scale)
{
	memset(x, 0, 512 * sizeof *x);
	memset(want_data, 0, 576);
	/* Tile 0: amax 448 -> 448/448 = 1 -> s = 1, byte 127; the scalar table at s = 1. */
	const struct { float x; uint8_t b; } t0[] = {
		{ 448, 0x7e }, { -448, 0xfe }, { -0.0f, 0x80 }, { 0x1p-9f, 0x01 },
		{ -0x1p-9f, 0x81 }, { 0x1p-10f, 0x00 }, { 3 * 0x1p-10f, 0x02 },
		{ 15 * 0x1p-10f, 0x08 }, { 1.0625f, 0x38 }, { 1.1875f, 0x3a },
		{ 248, 0x78 }, { 432, 0x7e }, { 400, 0x7c }, { 0x1p-12f, 0x00 },
	};
	for (size_t i = 0; i < sizeof t0 / sizeof t0[0]; i++) {
		x[i] = t0[i].x;
		want_data[i] = t0[i].b;
	}
	want_scale[0] = 127;
	/* Tile 1: amax 1 -> 1/448 = 2.2e-3 in (2^-9, 2^-8] -> s = 2^-8, byte 119.
	 * 1 * 2^8 = 256 -> e=15 m=0 = 0x78; 2^-17 * 2^8 = 2^-9 -> 0x01; -0.5 -> -128 = 0xf0. */
	x[64] = 1.0f; want_data[64] = 0x78;
	x[65] = 0x1p-17f; want_data[65] = 0x01;
	x[66] = -0.5f; want_data[66] = 0xf0;
	want_scale[1] = 119;
	/* Tile 2: NaN and infinities do not set the scale: amax 3 -> 3/448 = 6.7e-3 in
	 * (2^-8, 2^-7] -> byte 120; 3 * 2^7 = 384 = 0x7c; NaN -> 0x7f; +-inf clamps to
	 * +-448 -> 0x7e / 0xfe. */
	x[128] = 3.0f; want_data[128] = 0x7c;
	x[129] = NAN; want_data[129] = 0x7f;
	x[130] = INFINITY; want_data[130] = 0x7e;
	x[131] = -INFINITY; want_data[131] = 0xfe;
	want_scale[2] = 120;
	/* Tile 3: huge amax 3e38 -> byte 247 (scale_exponents); 3e38 / 2^120 = 225.7,
	 * nearest of 224 (0x76) and 240 -> 0x76; -1e38 / 2^120 = -75.2 -> -72 = 0xe9. */
	x[192] = 3e38f; want_data[192] = 0x76;
	x[193] = -1e38f; want_data[193] = 0xe9;
	want_scale[3] = 247;
	/* Tile 4: amax 2e-5 is under the 1e-4 floor -> s = 2^-22, byte 105 (FlashMLA's
	 * floor on amax/448 would give 2^-13 here; vLLM agrees with strata).
	 * 2e-5 * 2^22 = 83.9, nearest of 80 (1.25 * 2^6: e=13 m=2 = 0x6a) and 88. */
	x[256] = 2e-5f; want_data[256] = 0x6a;
	x[257] = 1e-30f; want_data[257] = 0x00;
	want_scale[4] = 105;
	/* Tile 5: all -0.0: bytes 0x80, byte 105. */
	for (int k = 320; k < 384; k++) {
		x[k] = -0.0f;
		want_data[k] = 0x80;
	}
	want_scale[5] = 105;
	/* Tile 6: amax 0.0448 -> 1.0e-4 in (2^-14, 2^-13] -> byte 114; 0.0448 * 2^13 =
	 * 367.0, nearest of 352 (e=15 m=3 = 0x7b) and 384. */
	x[384] = 0.0448f; want_data[384] = 0x7b;
	x[385] = -0.0448f; want_data[385] = 0xfb;
	want_scale[6] = 114;
	want_scale[7] = 0;
	/* RoPE: bf16 little-endian. */
	const struct { float x; uint16_t b; } r[] = {
		{ 1.0f, 0x3f80 }, { 1.0f + 0x1p-8f, 0x3f80 }, { -2.0f, 0xc000 }, { NAN, 0x7fc0 },
		{ 1.0f + 3 * 0x1p-8f, 0x3f82 }, { -0.0f, 0x8000 }, { INFINITY, 0x7f80 },
	};
	for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
		x[448 + i] = r[i].x;
		want_data[448 + 2 * i] = (uint8_t)(r[i].b & 0xff);
		want_data[448 + 2 * i + 1] = (uint8_t)(r[i].b >> 8);
	}
	x[511] = 3.0f; want_data[574] = 0x40; want_data[575] = 0x40;
}

START_TEST(main_known_entry)
{
	float x[512], y[512];
	uint8_t want[576], want_s[8], pool[1152];
	known_entry(x, want, want_s);
	memset(pool, 0xaa, sizeof pool);
	main_encode1(x, 1, 0, pool);
	for (int k = 0; k < 576; k++)
		ck_assert_msg(pool[k] == want[k], "byte %d = 0x%02x, want 0x%02x", k, pool[k], want[k]);
	for (int t = 0; t < 8; t++)
		ck_assert_msg(pool[576 + t] == want_s[t], "scale %d = %d, want %d", t, pool[576 + t],
			      want_s[t]);

	strata_main_decode_params d = { .pool = pool, .n = 1, .B = 1, .dst = y };
	ck_assert_int_eq(strata_k_main_decode_cpu(&d), 0);
	ck_assert(y[0] == 448.0f && y[1] == -448.0f);
	ck_assert(y[2] == 0.0f && signbit(y[2]));
	ck_assert(y[5] == 0.0f && y[8] == 1.0f && y[9] == 1.25f);
	ck_assert(y[64] == 1.0f && y[65] == 0x1p-17f && y[66] == -0.5f);
	ck_assert(y[128] == 3.0f && isnan(y[129]));
	ck_assert(y[130] == 3.5f && y[131] == -3.5f);        /* 448 * 2^-7 */
	ck_assert(y[192] == 224.0f * 0x1p120f);
	ck_assert(y[256] == 80.0f * 0x1p-22f && y[257] == 0.0f);
	ck_assert(y[384] == 352.0f * 0x1p-13f);
	ck_assert(y[448] == 1.0f && y[449] == 1.0f && y[450] == -2.0f && isnan(y[451]));
	ck_assert(y[454] == INFINITY && y[511] == 3.0f);
}
END_TEST

/* Entry i's data at (slot/B) * stride + (slot%B) * 576, its scales at
 * (slot/B) * stride + B*576 + (slot%B) * 8; nothing else written. */
START_TEST(main_block_layout)
{
	const int Bs[] = { 1, 2, 64, 3 };
	/* ceil(B*584 / 576) * 576: 584 -> 2 * 576; 1168 -> 3 * 576; 37376 -> 65 * 576;
	 * 1752 -> 4 * 576. */
	const size_t strides[] = { 1152, 1728, 37440, 2304 };
	for (int bi = 0; bi < 4; bi++) {
		int B = Bs[bi];
		size_t stride = strata_main_block_stride(B);
		ck_assert_uint_eq(stride, strides[bi]);
		int nblocks = 3, cap = nblocks * B, n = cap - 1; /* leave one slot empty */
		float *x = xmalloc((size_t)n * 512 * sizeof *x);
		int64_t *slots = xmalloc((size_t)n * sizeof *slots);
		uint64_t seed = 42 + (uint64_t)B;
		for (int i = 0; i < n; i++) {
			slots[i] = cap - 1 - i; /* reversed: slot 0 stays empty */
			for (int k = 0; k < 512; k++)
				x[(size_t)i * 512 + k] = tu_uniform(&seed) * (float)(i + 1);
		}
		uint8_t *pool = xmalloc(nblocks * stride);
		memset(pool, 0xaa, nblocks * stride);
		strata_main_encode_params p = { .src = x, .slots = slots, .n = n, .B = B, .pool = pool };
		ck_assert_int_eq(strata_k_main_encode_cpu(&p), 0);

		uint8_t *seen = calloc(nblocks * stride, 1);
		ck_assert_ptr_nonnull(seen);
		for (int i = 0; i < n; i++) {
			uint8_t one[1152];
			main_encode1(x + (size_t)i * 512, 1, 0, one);
			int64_t blk = slots[i] / B, off = slots[i] % B;
			size_t d = (size_t)blk * stride + (size_t)off * 576;
			size_t s = (size_t)blk * stride + (size_t)B * 576 + (size_t)off * 8;
			ck_assert_mem_eq(pool + d, one, 576);
			ck_assert_mem_eq(pool + s, one + 576, 8);
			memset(seen + d, 1, 576);
			memset(seen + s, 1, 8);
		}
		for (size_t k = 0; k < nblocks * stride; k++)
			if (!seen[k])
				ck_assert_msg(pool[k] == 0xaa, "B=%d byte %zu written", B, k);

		/* Decoding through the same slots returns each entry's own decode. */
		float *y = xmalloc((size_t)n * 512 * sizeof *y);
		strata_main_decode_params dp = { .pool = pool, .slots = slots, .n = n, .B = B, .dst = y };
		ck_assert_int_eq(strata_k_main_decode_cpu(&dp), 0);
		for (int i = 0; i < n; i += 7) {
			uint8_t one[1152];
			float y1[512];
			main_encode1(x + (size_t)i * 512, 1, 0, one);
			strata_main_decode_params d1 = { .pool = one, .n = 1, .B = 1, .dst = y1 };
			ck_assert_int_eq(strata_k_main_decode_cpu(&d1), 0);
			ck_assert_mem_eq(y + (size_t)i * 512, y1, sizeof y1);
		}
		free(y);
		free(seen);
		free(pool);
		free(slots);
		free(x);
	}
}
END_TEST

/* slots == NULL is 0..n-1, the same bytes as explicit slots. */
START_TEST(main_null_slots)
{
	const int B = 2, n = 5;
	float x[5 * 512];
	uint64_t seed = 7;
	for (int k = 0; k < n * 512; k++)
		x[k] = tu_uniform(&seed);
	int64_t slots[5] = { 0, 1, 2, 3, 4 };
	size_t bytes = 3 * strata_main_block_stride(B);
	uint8_t *a = xmalloc(bytes), *b = xmalloc(bytes);
	memset(a, 0x55, bytes);
	memset(b, 0x55, bytes);
	strata_main_encode_params p = { .src = x, .n = n, .B = B, .pool = a };
	ck_assert_int_eq(strata_k_main_encode_cpu(&p), 0);
	p.slots = slots;
	p.pool = b;
	ck_assert_int_eq(strata_k_main_encode_cpu(&p), 0);
	ck_assert_mem_eq(a, b, bytes);
	free(a);
	free(b);
}
END_TEST

/*
 * Round-trip bounds. Main tile with scale s (and the index FP8 vector): y = x/s has
 * |y| <= 448 (s >= amax/448 up to one fp32 rounding, which can only be absorbed by
 * the clamp at 448). e4m3 has 3 mantissa bits: for |y| >= 2^-6 the half-ulp error is
 * <= 2^-4 |y|; below, the subnormal step is 2^-9, so the error is <= 2^-10. Hence
 *     |x - x'| <= max(2^-4 |x|, 2^-10 s)
 * and the scale is tight: amax / s in (224, 448] whenever amax >= 1e-4.
 * RoPE bf16 (8 significant bits): |x - x'| <= 2^-8 |x|.
 * MXFP4 group: the e2m1 grid step relative to the value is at most 1/2 above 1
 * (1 -> 1.5, 2 -> 3, 4 -> 6) and the step is .5 below 1, so the error is <= 1/4 of
 * |y| above 1 and <= 1/4 absolute below: |x - x'| <= max(|x|, s) / 4, amax/s in (3, 6].
 */
static float tile_scale(int k) { return p2(k * 7 % 41 - 20); } /* 2^-20 .. 2^20 */

START_TEST(main_roundtrip_bounds)
{
	const int n = 64;
	float *x = xmalloc(n * 512 * sizeof *x), *y = xmalloc(n * 512 * sizeof *y);
	uint64_t seed = 1234;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < 512; k++)
			x[i * 512 + k] = tu_uniform(&seed) * tile_scale(i * 8 + k / 64);
	uint8_t *pool = xmalloc(strata_main_block_stride(64));
	strata_main_encode_params p = { .src = x, .n = n, .B = 64, .pool = pool };
	ck_assert_int_eq(strata_k_main_encode_cpu(&p), 0);
	strata_main_decode_params d = { .pool = pool, .n = n, .B = 64, .dst = y };
	ck_assert_int_eq(strata_k_main_decode_cpu(&d), 0);
	for (int i = 0; i < n; i++) {
		for (int t = 0; t < 7; t++) {
			float amax = 0, s = codec_ue8m0_decode(pool[64 * 576 + i * 8 + t]);
			for (int k = t * 64; k < t * 64 + 64; k++) {
				float e = fabsf(x[i * 512 + k] - y[i * 512 + k]);
				ck_assert_msg(e <= fmaxf(fabsf(x[i * 512 + k]) * 0x1p-4f, s * 0x1p-10f),
					      "entry %d dim %d: %g -> %g (s %g)", i, k,
					      (double)x[i * 512 + k], (double)y[i * 512 + k], (double)s);
				amax = fmaxf(amax, fabsf(x[i * 512 + k]));
			}
			if (amax >= 1e-4f)
				ck_assert(amax / s > 224.0f && amax / s <= 448.0f);
			else
				ck_assert(s == 0x1p-22f);
		}
		for (int k = 448; k < 512; k++)
			ck_assert(fabsf(x[i * 512 + k] - y[i * 512 + k]) <=
				  fabsf(x[i * 512 + k]) * 0x1p-8f);
	}
	free(pool);
	free(x);
	free(y);
}
END_TEST

/* ---- index keys ----------------------------------------------------------------------- */

START_TEST(index_mxfp4_known)
{
	float x[128] = { 0 }, y[128];
	/* Group 0, amax 6 -> s = 1, byte 127. Codes, element order:
	 * 6:7 -6:15 .25:0 .75:2 1.25:2 1.75:4 2.5:4 3.5:6 5:6 .26:1 -.25:8 -0:8 .5:1 1:2
	 * 1.5:3 2:4 3:5 4:6 inf:7 nan:0. Byte j = code[2j] | code[2j+1] << 4. */
	const float g0[] = { 6, -6, .25f, .75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, .26f, -.25f, -0.0f,
			     .5f, 1, 1.5f, 2, 3, 4, INFINITY, NAN };
	memcpy(x, g0, sizeof g0);
	const uint8_t want0[16] = { 0xf7, 0x20, 0x42, 0x64, 0x16, 0x88, 0x21, 0x43,
				    0x65, 0x07, 0, 0, 0, 0, 0, 0 };
	/* Group 1: zeros -> floor 6 * 2^-126 -> s = 2^-126, byte 1. */
	/* Group 2: 3e38 -> byte 253 (s = 2^126): 3e38 / 2^126 = 3.53 -> 4 (code 6);
	 * -1e38 / 2^126 = -1.18 -> -1 (code 10). Byte 32 = 0xa6. */
	x[64] = 3e38f;
	x[65] = -1e38f;
	/* Group 3: amax 1 -> 1/6 in (2^-3, 2^-2] -> s = .25, byte 125: 1 -> 4 (6),
	 * .125 -> .5 (1), -.3 -> -1.2 (10), .0625 -> .25 tie (0). */
	x[96] = 1.0f; x[97] = .125f; x[98] = -.3f; x[99] = .0625f;

	const int B = 64;
	const size_t page = (size_t)B * 68;
	ck_assert_uint_eq(strata_index_entry_bytes(STRATA_INDEX_MXFP4) * B, page);
	uint8_t *pages = xmalloc(2 * page);
	memset(pages, 0xaa, 2 * page);
	int64_t slot = 65; /* page 1, offset 1 */
	strata_index_encode_params p = { .fmt = STRATA_INDEX_MXFP4, .src = x, .slots = &slot,
					 .n = 1, .B = B, .pages = pages };
	ck_assert_int_eq(strata_k_index_encode_cpu(&p), 0);
	const uint8_t *d = pages + page + 64, *s = pages + page + (size_t)B * 64 + 4;
	ck_assert_mem_eq(d, want0, 16);
	for (int j = 16; j < 32; j++)
		ck_assert_int_eq(d[j], 0);
	ck_assert_int_eq(d[32], 0xa6);
	ck_assert_int_eq(d[48], 0x16);
	ck_assert_int_eq(d[49], 0x0a);
	ck_assert_int_eq(s[0], 127);
	ck_assert_int_eq(s[1], 1);
	ck_assert_int_eq(s[2], 253);
	ck_assert_int_eq(s[3], 125);
	/* Nothing else in the two pages was written. */
	for (size_t k = 0; k < 2 * page; k++) {
		bool mine = (k >= page + 64 && k < page + 128) ||
			    (k >= page + (size_t)B * 64 + 4 && k < page + (size_t)B * 64 + 8);
		if (!mine)
			ck_assert_int_eq(pages[k], 0xaa);
	}
	strata_index_decode_params dp = { .fmt = STRATA_INDEX_MXFP4, .pages = pages,
					  .slots = &slot, .n = 1, .B = B, .dst = y };
	ck_assert_int_eq(strata_k_index_decode_cpu(&dp), 0);
	ck_assert(y[0] == 6 && y[1] == -6 && y[7] == 4 && y[18] == 6 && y[19] == 0);
	ck_assert(y[11] == 0 && signbit(y[11]));
	ck_assert(y[32] == 0);
	ck_assert(y[64] == 4 * 0x1p126f && y[65] == -0x1p126f);
	ck_assert(y[96] == 1.0f && y[97] == .125f && y[98] == -.25f && y[99] == 0);
	free(pages);
}
END_TEST

START_TEST(index_fp8_known)
{
	float x[2][128] = { { 448, -1, 0x1p-9f, 432, NAN, -0.0f } }; /* row 1: zeros */
	const int B = 64;
	const size_t page = (size_t)B * 132;
	uint8_t *pages = xmalloc(2 * page);
	memset(pages, 0xaa, 2 * page);
	int64_t slots[2] = { 70, 3 }; /* page 1 offset 6; page 0 offset 3 */
	strata_index_encode_params p = { .fmt = STRATA_INDEX_FP8, .src = &x[0][0], .slots = slots,
					 .n = 2, .B = B, .pages = pages };
	ck_assert_int_eq(strata_k_index_encode_cpu(&p), 0);
	/* amax 448 -> scale 1.0f = 0x3f800000, little-endian 00 00 80 3f. */
	const uint8_t *d = pages + page + 6 * 128, *s = pages + page + (size_t)B * 128 + 24;
	const uint8_t want[6] = { 0x7e, 0xb8, 0x01, 0x7e, 0x7f, 0x80 };
	ck_assert_mem_eq(d, want, 6);
	for (int k = 6; k < 128; k++)
		ck_assert_int_eq(d[k], 0);
	const uint8_t one[4] = { 0, 0, 0x80, 0x3f };
	ck_assert_mem_eq(s, one, 4);
	/* Zero vector -> 2^-22 = 0x34800000 (biased exponent 105). */
	const uint8_t *d0 = pages + 3 * 128, *s0 = pages + (size_t)B * 128 + 12;
	for (int k = 0; k < 128; k++)
		ck_assert_int_eq(d0[k], 0);
	const uint8_t tiny[4] = { 0, 0, 0x80, 0x34 };
	ck_assert_mem_eq(s0, tiny, 4);
	ck_assert_int_eq(pages[page + 5 * 128], 0xaa);
	ck_assert_int_eq(pages[page + (size_t)B * 128 + 20], 0xaa);
	ck_assert_int_eq(pages[page + (size_t)B * 128 + 28], 0xaa);

	float y[2][128];
	strata_index_decode_params dp = { .fmt = STRATA_INDEX_FP8, .pages = pages, .slots = slots,
					  .n = 2, .B = B, .dst = &y[0][0] };
	ck_assert_int_eq(strata_k_index_decode_cpu(&dp), 0);
	ck_assert(y[0][0] == 448 && y[0][1] == -1 && y[0][2] == 0x1p-9f && y[0][3] == 448);
	ck_assert(isnan(y[0][4]));
	for (int k = 0; k < 128; k++)
		ck_assert(y[1][k] == 0);
	free(pages);
}
END_TEST

START_TEST(index_roundtrip_bounds)
{
	const int n = 96, B = 64;
	float *x = xmalloc(n * 128 * sizeof *x), *y = xmalloc(n * 128 * sizeof *y);
	uint64_t seed = 99;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < 128; k++)
			x[i * 128 + k] = tu_uniform(&seed) * tile_scale(i * 4 + k / 32);
	for (int f = 0; f < 2; f++) {
		strata_index_fmt fmt = f ? STRATA_INDEX_FP8 : STRATA_INDEX_MXFP4;
		size_t page = strata_index_entry_bytes(fmt) * B, pay = f ? 128 : 64;
		uint8_t *pages = xmalloc(2 * page);
		strata_index_encode_params p = { .fmt = fmt, .src = x, .n = n, .B = B, .pages = pages };
		ck_assert_int_eq(strata_k_index_encode_cpu(&p), 0);
		strata_index_decode_params d = { .fmt = fmt, .pages = pages, .n = n, .B = B, .dst = y };
		ck_assert_int_eq(strata_k_index_decode_cpu(&d), 0);
		for (int i = 0; i < n; i++) {
			const uint8_t *sc = pages + (size_t)(i / B) * page + B * pay + (size_t)(i % B) * 4;
			float vs = 0;
			if (f)
				memcpy(&vs, sc, 4);
			for (int k = 0; k < 128; k++) {
				float xv = x[i * 128 + k], e = fabsf(xv - y[i * 128 + k]);
				float s = f ? vs : codec_ue8m0_decode(sc[k / 32]);
				float bound = f ? fmaxf(fabsf(xv) * 0x1p-4f, s * 0x1p-10f)
						: fmaxf(fabsf(xv), s) * 0.25f;
				ck_assert_msg(e <= bound, "fmt %d entry %d dim %d: %g -> %g", f, i, k,
					      (double)xv, (double)y[i * 128 + k]);
			}
			if (!f) {
				for (int g = 0; g < 4; g++) {
					float amax = 0, s = codec_ue8m0_decode(sc[g]);
					for (int k = g * 32; k < g * 32 + 32; k++)
						amax = fmaxf(amax, fabsf(x[i * 128 + k]));
					ck_assert(amax / s > 3.0f && amax / s <= 6.0f);
				}
			}
		}
		free(pages);
	}
	free(x);
	free(y);
}
END_TEST

/* ---- arguments, negative slots, dispatcher ----------------------------------------- */

START_TEST(args_and_invalid_slots)
{
	float x[2 * 512] = { 1.0f }, y[2 * 512];
	uint8_t pool[1728];
	strata_main_encode_params p = { .src = x, .n = 2, .B = 0, .pool = pool };
	ck_assert_int_eq(strata_k_main_encode_cpu(&p), -EINVAL);
	p.B = 2;
	p.n = -1;
	ck_assert_int_eq(strata_k_main_encode_cpu(&p), -EINVAL);
	p.n = 2;
	p.pool = NULL;
	ck_assert_int_eq(strata_k_main_encode_cpu(&p), -EINVAL);
	ck_assert_int_eq(strata_k_main_encode_cpu(NULL), -EINVAL);
	strata_main_encode_params z = { .n = 0, .B = 2 };
	ck_assert_int_eq(strata_k_main_encode_cpu(&z), 0);
	strata_index_encode_params ip = { .fmt = (strata_index_fmt)7, .src = x, .n = 1, .B = 64,
					  .pages = pool };
	ck_assert_int_eq(strata_k_index_encode_cpu(&ip), -EINVAL);

	/* Slot -1 (FlashMLA's "invalid") writes nothing and decodes to zeros. */
	memset(pool, 0xaa, sizeof pool);
	int64_t slots[2] = { -1, 1 };
	p.pool = pool;
	p.slots = slots;
	ck_assert_int_eq(strata_k_main_encode_cpu(&p), 0);
	for (int k = 0; k < 576; k++)
		ck_assert_int_eq(pool[k], 0xaa);
	ck_assert_int_eq(pool[576], 0);      /* entry 1 = x[512..]: zeros */
	ck_assert_int_eq(pool[1152 + 8], 105);
	memset(y, 0x7f, sizeof y);
	strata_main_decode_params d = { .pool = pool, .slots = slots, .n = 2, .B = 2, .dst = y };
	ck_assert_int_eq(strata_k_main_decode_cpu(&d), 0);
	for (int k = 0; k < 1024; k++)
		ck_assert(y[k] == 0.0f);
}
END_TEST

START_TEST(cpu_dispatch)
{
	strata_dev_config cfg = STRATA_DEV_CONFIG_INIT;
	cfg.backend = STRATA_BACKEND_CPU;
	strata_dev *dev = NULL;
	ck_assert_int_eq(strata_dev_open(&cfg, &dev), 0);
	float x[512], y1[512], y2[512];
	uint8_t a[1152], b[1152];
	uint64_t seed = 5;
	for (int k = 0; k < 512; k++)
		x[k] = tu_uniform(&seed);
	memset(a, 0, sizeof a);
	memset(b, 0, sizeof b);
	strata_main_encode_params p = { .src = x, .n = 1, .B = 1, .pool = a };
	ck_assert_int_eq(strata_k_main_encode(dev, &p, NULL), 0);
	p.pool = b;
	ck_assert_int_eq(strata_k_main_encode_cpu(&p), 0);
	ck_assert_mem_eq(a, b, sizeof a);
	strata_main_decode_params d = { .pool = a, .n = 1, .B = 1, .dst = y1 };
	ck_assert_int_eq(strata_k_main_decode(dev, &d, NULL), 0);
	d.dst = y2;
	ck_assert_int_eq(strata_k_main_decode_cpu(&d), 0);
	ck_assert_mem_eq(y1, y2, sizeof y1);
	strata_dev_close(dev);
}
END_TEST

/*
 * Decoders of outside bytes (a page read back from a tier, say): random pages must
 * decode without faults, and NaN may only come out where the bytes encode it: an
 * e4m3 0x7f/0xff, a UE8M0 0xff, a bf16 NaN pattern or a non-finite fp32 scale (0 *
 * inf is NaN). Everything else is finite or, for huge scales, +-inf.
 */
START_TEST(decode_random_bytes)
{
	uint64_t seed = 2024;
	const int B = 4, n = 8;
	size_t mbytes = 2 * strata_main_block_stride(B), ibytes = 2 * (size_t)B * 132;
	uint8_t *pool = xmalloc(mbytes), *pages = xmalloc(ibytes);
	float *y = xmalloc(n * 512 * sizeof *y);
	for (int round = 0; round < 300; round++) {
		for (size_t k = 0; k < mbytes; k++)
			pool[k] = (uint8_t)tu_next(&seed);
		for (size_t k = 0; k < ibytes; k++)
			pages[k] = (uint8_t)tu_next(&seed);
		strata_main_decode_params d = { .pool = pool, .n = n, .B = B, .dst = y };
		ck_assert_int_eq(strata_k_main_decode_cpu(&d), 0);
		for (int i = 0; i < n; i++) {
			size_t off = (size_t)(i / B) * strata_main_block_stride(B);
			const uint8_t *data = pool + off + (size_t)(i % B) * 576;
			const uint8_t *sc = pool + off + (size_t)B * 576 + (size_t)(i % B) * 8;
			for (int k = 0; k < 448; k++)
				if (isnan(y[i * 512 + k]))
					ck_assert((data[k] & 0x7f) == 0x7f || sc[k / 64] == 0xff);
			for (int k = 0; k < 64; k++) {
				uint16_t b = (uint16_t)(data[448 + 2 * k] | data[449 + 2 * k] << 8);
				ck_assert(!!isnan(y[i * 512 + 448 + k]) == ((b & 0x7fff) > 0x7f80));
			}
		}
		for (int f = 0; f < 2; f++) {
			strata_index_fmt fmt = f ? STRATA_INDEX_FP8 : STRATA_INDEX_MXFP4;
			size_t page = strata_index_entry_bytes(fmt) * B, pay = f ? 128 : 64;
			strata_index_decode_params dp = { .fmt = fmt, .pages = pages, .n = n, .B = B,
							  .dst = y };
			ck_assert_int_eq(strata_k_index_decode_cpu(&dp), 0);
			for (int i = 0; i < n; i++) {
				const uint8_t *data = pages + (size_t)(i / B) * page + (size_t)(i % B) * pay;
				const uint8_t *sc = pages + (size_t)(i / B) * page + B * pay + (i % B) * 4;
				float fs;
				memcpy(&fs, sc, 4);
				for (int k = 0; k < 128; k++) {
					if (!isnan(y[i * 128 + k]))
						continue;
					if (f)
						ck_assert((data[k] & 0x7f) == 0x7f || !isfinite(fs));
					else
						ck_assert(sc[k / 32] == 0xff);
				}
			}
		}
	}
	free(y);
	free(pages);
	free(pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("kernels_format");
	TCase *tc = tcase_create("codecs");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, e4m3_vectors);
	tcase_add_test(tc, e2m1_vectors);
	tcase_add_test(tc, bf16_vectors);
	tcase_add_test(tc, scale_exponents);
	suite_add_tcase(s, tc);
	tc = tcase_create("layouts");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, main_zero_entry);
	tcase_add_test(tc, main_known_entry);
	tcase_add_test(tc, main_block_layout);
	tcase_add_test(tc, main_null_slots);
	tcase_add_test(tc, main_roundtrip_bounds);
	tcase_add_test(tc, index_mxfp4_known);
	tcase_add_test(tc, index_fp8_known);
	tcase_add_test(tc, index_roundtrip_bounds);
	tcase_add_test(tc, args_and_invalid_slots);
	tcase_add_test(tc, cpu_dispatch);
	tcase_add_test(tc, decode_random_bytes);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
