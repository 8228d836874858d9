/* Indexer CPU twin: hand-computed cases, the unscored path, adversarial inputs, the
 * GPU register layout (checked on the host), and random batches against an
 * independent double-precision reference.
 *
 * Tolerance: the twin sums in fp32, the reference in double. A selected set may
 * differ from the reference only by swapping entries whose reference scores lie
 * within TOL_REL * M of the k-th score, M = max_j s_j sum_h |w_h| sum_d |q_hd k_jd|
 * (the row's magnitude; fp32 summation of 128 + 64 terms errs by < 2e-5 M). Cases
 * with exact ties (all keys equal, all ReLUs zero) allow no swap at all. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "kernels/indexer_int.h"
#include "indexer_tdata.h"

#define TOL_REL 2e-5

/* Runs the twin and checks every row against the double reference. */
static int run_and_check(td *t, int strict)
{
	ck_assert_int_eq(strata_k_indexer_cpu(&t->p), 0);
	int swaps = 0;
	double *ref = malloc(sizeof(double) * (size_t)(t->p.max_limit + 1));
	for (int r = 0; r < t->p.n_rows; r++) {
		double mag = 0;
		char why[256] = "";
		int lim = t->limits[r];
		if (lim > t->p.topk)
			td_ref_scores(t, r, ref, &mag);
		int s = td_check_row(lim, t->p.topk, t->ids + (size_t)r * t->p.topk,
				     t->scores + (size_t)r * t->p.topk, ref, TOL_REL * mag + 1e-30,
				     strict, why, sizeof why);
		ck_assert_msg(s >= 0, "row %d (limit %d): %s", r, lim, why);
		swaps += s;
	}
	free(ref);
	return swaps;
}

/* Hand case: heads 2, q_0 = e_0, q_1 = e_1, keys with (dim0, dim1) = (a_j, b_j), so
 * score_j = w_0 ReLU(a_j) + w_1 ReLU(b_j). B = 4: six keys over two pages, mapped
 * through a swapped page table. */
static void hand_case(strata_index_fmt fmt, const float *wv, int topk, const int *want,
		      const float *want_sc)
{
	static const float a[6] = { 1, -2, 0.5f, 3, 0, 6 };
	static const float b[6] = { 0.5f, 1, -1, 0, 1.5f, -6 };
	int rows = 1, lim = 6;
	td t;
	td_make(&t, fmt, 2, topk, 1, &rows, &lim, 4, 1, TD_RANDOM);
	t.pt[0] = 1;
	t.pt[1] = 0;
	size_t eb = strata_index_entry_bytes(fmt);
	memset(t.pages, 0, (size_t)t.n_pages * 4 * eb);
	for (int j = 0; j < 6; j++) {
		float x[128] = { 0 };
		x[0] = a[j];
		x[1] = b[j];
		int phys = t.pt[j / 4];
		td_encode_key(fmt, x, t.pages + (size_t)phys * 4 * eb, 4, j % 4);
	}
	for (int h = 0; h < 2; h++) {
		for (int d = 0; d < 128; d++)
			t.q[h * 128 + d] = codec_bf16_encode(d == h ? 1.0f : 0.0f);
		t.w[h] = wv[h];
	}
	ck_assert_int_eq(strata_k_indexer_cpu(&t.p), 0);
	for (int i = 0; i < topk; i++) {
		ck_assert_int_eq(t.ids[i], want[i]);
		ck_assert_float_eq(t.scores[i], want_sc[i]);
	}
	td_free(&t);
}

START_TEST(hand_computed)
{
	/* w = (1, 2): scores 2, 2, 0.5, 3, 3, 6 */
	const float w12[2] = { 1, 2 }, w1m1[2] = { 1, -1 };
	for (int f = 0; f < 2; f++) {
		strata_index_fmt fmt = (strata_index_fmt)f;
		hand_case(fmt, w12, 2, (int[]){ 3, 5 }, (float[]){ 3, 6 }); /* 3 vs 4 tie: 3 */
		hand_case(fmt, w12, 3, (int[]){ 3, 4, 5 }, (float[]){ 3, 3, 6 });
		hand_case(fmt, w12, 4, (int[]){ 0, 3, 4, 5 }, (float[]){ 2, 3, 3, 6 }); /* 0 vs 1 */
		hand_case(fmt, w12, 5, (int[]){ 0, 1, 3, 4, 5 }, (float[]){ 2, 2, 3, 3, 6 });
		/* w = (1, -1): scores 0.5, -1, 0.5, 3, -1.5, 6 */
		hand_case(fmt, w1m1, 3, (int[]){ 0, 3, 5 }, (float[]){ 0.5f, 3, 6 }); /* 0 vs 2 */
		hand_case(fmt, w1m1, 5, (int[]){ 0, 1, 2, 3, 5 }, (float[]){ 0.5f, -1, 0.5f, 3, 6 });
	}
}
END_TEST

START_TEST(unscored_rows)
{
	/* limits 0, 1, k-1, k: ids 0..limit-1 then -1, scores 0, keys never read */
	int rows[2] = { 2, 2 }, lim[4] = { 0, 1, 63, 64 };
	td t;
	td_make(&t, STRATA_INDEX_MXFP4, 4, 64, 2, rows, lim, 64, 7, TD_RANDOM);
	t.p.pages = NULL;
	t.p.page_table = NULL;
	t.p.q = NULL;
	t.p.w = NULL;
	run_and_check(&t, 1);
	td_free(&t);
}
END_TEST

START_TEST(adversarial_ties)
{
	/* all keys identical (every score equal), and every dot product negative (every
	 * score 0): the lowest ids win, exactly */
	for (int f = 0; f < 2; f++)
		for (int mode = 0; mode < 2; mode++) {
			int rows = 2, lim[2] = { 3000, 1029 };
			td t;
			td_make(&t, (strata_index_fmt)f, 16, 512, 1, &rows, lim, 64, 3,
				mode ? TD_NEGATIVE : TD_EQUAL);
			run_and_check(&t, 1);
			for (int r = 0; r < 2; r++)
				for (int i = 0; i < 512; i++)
					ck_assert_int_eq(t.ids[r * 512 + i], i);
			if (mode)
				for (int i = 0; i < 1024; i++)
					ck_assert_float_eq(t.scores[i], 0.0f);
			td_free(&t);
		}
}
END_TEST

START_TEST(random_batches)
{
	/* mixed lengths around k and the block size, 1-4 rows per request, both formats,
	 * clustered keys (near-ties) and signed weights (negative scores) */
	int rows_of[4] = { 1, 4, 2, 3 };
	int lim[10] = { 5000, 513, 511, 512, 2049, 0, 1, 777, 4096, 3001 };
	enum td_mode modes[3] = { TD_RANDOM, TD_CLUSTERED, TD_MIXED_W };
	for (int f = 0; f < 2; f++)
		for (int m = 0; m < 3; m++) {
			td t;
			td_make(&t, (strata_index_fmt)f, 8, 512, 4, rows_of, lim, 64,
				100 + f * 10 + m, modes[m]);
			run_and_check(&t, 0);
			td_free(&t);
		}
	/* top-1024, 64 heads, one request with 4 rows at different limits */
	int r4 = 4, l4[4] = { 1025, 2000, 1100, 1024 };
	td t;
	td_make(&t, STRATA_INDEX_FP8, 64, 1024, 1, &r4, l4, 64, 9, TD_RANDOM);
	run_and_check(&t, 0);
	td_free(&t);
}
END_TEST

/* FP8 queries (q8): the twin scores the same values as bf16 queries holding them, so
 * ids and scores are bit-identical; neither q nor q8 is an error. */
START_TEST(fp8_queries)
{
	int rows_of[3] = { 1, 4, 2 };
	int lim[7] = { 5000, 513, 2049, 777, 4096, 1, 3001 };
	for (int f = 0; f < 2; f++) {
		td t;
		td_make(&t, (strata_index_fmt)f, 64, 512, 3, rows_of, lim, 64, 60 + f, TD_CLUSTERED);
		td_use_q8(&t);
		size_t n = (size_t)t.p.n_rows * t.p.topk;
		ck_assert_int_eq(strata_k_indexer_cpu(&t.p), 0);
		int32_t *ids8 = malloc(sizeof(int32_t) * n);
		memcpy(ids8, t.ids, sizeof(int32_t) * n);
		float *sc8 = malloc(sizeof(float) * (size_t)t.p.n_rows * t.p.max_limit);
		memcpy(sc8, t.scores, sizeof(float) * (size_t)t.p.n_rows * t.p.topk);
		const uint16_t *q = t.p.q;
		t.p.q = NULL; /* q8 alone is enough */
		ck_assert_int_eq(strata_k_indexer_cpu(&t.p), 0);
		ck_assert(!memcmp(ids8, t.ids, sizeof(int32_t) * n));
		t.p.q = q;
		t.p.q8 = NULL; /* the bf16 queries with the same values */
		ck_assert_int_eq(strata_k_indexer_cpu(&t.p), 0);
		ck_assert(!memcmp(ids8, t.ids, sizeof(int32_t) * n));
		ck_assert(!memcmp(sc8, t.scores, sizeof(float) * (size_t)t.p.n_rows * t.p.topk));
		t.p.scan_wgmma = 1; /* a GPU option: the CPU scores as before, and says so */
		ck_assert_int_eq(strata_k_indexer_wgmma(NULL, &t.p), 0);
		t.p.q8 = t.q8;
		ck_assert_int_eq(strata_k_indexer_cpu(&t.p), 0);
		ck_assert(!memcmp(ids8, t.ids, sizeof(int32_t) * n));
		t.p.q = NULL;
		t.p.q8 = NULL;
		ck_assert_int_eq(strata_k_indexer_cpu(&t.p), -EINVAL);
		free(ids8);
		free(sc8);
		td_free(&t);
	}
}
END_TEST

/* The twin's scoring split over threads (STRATA_CPU_THREADS 1 and 3, p->cpu_threads 7):
 * every row's scores, ids and top-k scores are bit-identical for each count (ragged key
 * ranges over pages of 64 entries, two rows of different limits) and match the double
 * reference; a bad page in the last range is an error with any count. */
START_TEST(threads)
{
	int rows = 2, lim[2] = { 60000, 50001 };
	for (int f = 0; f < 2; f++) {
		td t;
		td_make(&t, (strata_index_fmt)f, 2, 512, 1, &rows, lim, 64, 70 + f, TD_CLUSTERED);
		const size_t n = strata_k_indexer_scratch(NULL, &t.p), k = (size_t)2 * t.p.topk;
		t.p.scratch = malloc(n);
		t.p.scratch_bytes = n;
		ck_assert_ptr_nonnull(t.p.scratch);
		const float *sc = NULL;
		size_t stride = 0;
		float *sc1 = malloc(sizeof(float) * 2 * 60000);
		int32_t *ids1 = malloc(sizeof(int32_t) * k);
		float *top1 = malloc(sizeof(float) * k);
		static const char *counts[3] = { "1", "3", "7" };
		for (int c = 0; c < 3; c++) {
			setenv("STRATA_CPU_THREADS", counts[c < 2 ? c : 0], 1);
			t.p.cpu_threads = c < 2 ? 0 : 7; /* the field over the variable */
			if (c == 0) {
				run_and_check(&t, 0); /* against the double reference */
			} else {
				memset(t.ids, 0x55, sizeof(int32_t) * k);
				memset(t.p.scratch, 0x55, n);
				ck_assert_int_eq(strata_k_indexer_cpu(&t.p), 0);
			}
			ck_assert_int_eq(strata_k_indexer_scores(NULL, &t.p, &sc, &stride), 0);
			for (int r = 0; r < 2; r++) {
				if (c == 0)
					memcpy(sc1 + (size_t)r * 60000, sc + r * stride, sizeof(float) * lim[r]);
				else
					ck_assert_msg(!memcmp(sc1 + (size_t)r * 60000, sc + r * stride,
							      sizeof(float) * lim[r]),
						      "row %d: scores differ at %s threads", r, counts[c]);
			}
			if (c == 0) {
				memcpy(ids1, t.ids, sizeof(int32_t) * k);
				memcpy(top1, t.scores, sizeof(float) * k);
			} else {
				ck_assert(!memcmp(ids1, t.ids, sizeof(int32_t) * k));
				ck_assert(!memcmp(top1, t.scores, sizeof(float) * k));
			}
		}
		const int32_t last = t.pt[(60000 - 1) / 64];
		t.pt[(60000 - 1) / 64] = -1; /* the last page: the last thread's range */
		for (int c = 0; c < 3; c++) {
			setenv("STRATA_CPU_THREADS", counts[c < 2 ? c : 0], 1);
			t.p.cpu_threads = c < 2 ? 0 : 7;
			ck_assert_int_eq(strata_k_indexer_cpu(&t.p), -EINVAL);
		}
		t.p.cpu_threads = 0;
		t.pt[(60000 - 1) / 64] = last;
		unsetenv("STRATA_CPU_THREADS");
		free(sc1);
		free(ids1);
		free(top1);
		free(t.p.scratch);
		t.p.scratch = NULL;
		td_free(&t);
	}
}
END_TEST

START_TEST(scratch_and_errors)
{
	int rows = 2, lim[2] = { 900, 700 };
	td t;
	td_make(&t, STRATA_INDEX_MXFP4, 8, 256, 1, &rows, lim, 64, 5, TD_RANDOM);
	ck_assert_int_eq(strata_k_indexer_cpu(&t.p), 0);
	int32_t *ids0 = malloc(sizeof(int32_t) * 512);
	memcpy(ids0, t.ids, sizeof(int32_t) * 512);
	size_t n = strata_k_indexer_scratch(NULL, &t.p);
	ck_assert(n > 0);
	t.p.scratch = malloc(n);
	t.p.scratch_bytes = n;
	memset(t.ids, 0x55, sizeof(int32_t) * 512);
	ck_assert_int_eq(strata_k_indexer_cpu(&t.p), 0);
	ck_assert(!memcmp(ids0, t.ids, sizeof(int32_t) * 512));
	free(t.p.scratch);
	t.p.scratch = NULL;
	free(ids0);

	strata_indexer_params bad = t.p;
	bad.max_rows = 1; /* the request has 2 rows */
	ck_assert_int_eq(strata_k_indexer_cpu(&bad), -EINVAL);
	bad = t.p;
	bad.max_limit = 800; /* below a row limit */
	ck_assert_int_eq(strata_k_indexer_cpu(&bad), -EINVAL);
	bad = t.p;
	bad.heads = 0;
	ck_assert_int_eq(strata_k_indexer_cpu(&bad), -EINVAL);
	ck_assert_uint_eq(strata_k_indexer_scratch(NULL, &bad), 0);
	bad = t.p;
	bad.max_rows = 5;
	ck_assert_int_eq(strata_k_indexer_cpu(&bad), -EINVAL);
	bad = t.p;
	t.req_rows[1] = 1; /* does not cover n_rows */
	ck_assert_int_eq(strata_k_indexer_cpu(&bad), -EINVAL);
	td_free(&t);
}
END_TEST

/* The GPU's key fragments, emulated: for every quarter c and pair p, the shifted bits
 * times the scale must equal the dequantised value of the dim the layout says, and
 * the dims must be a permutation matching idx_kl_of_dim. */
START_TEST(gpu_register_layout)
{
	for (int f = 0; f < 2; f++) {
		strata_index_fmt fmt = (strata_index_fmt)f;
		int seen[128] = { 0 };
		for (int c = 0; c < 4; c++)
			for (int p = 0; p < 16; p++)
				for (int h = 0; h < 2; h++) {
					int d = idx_dim_of_pair(fmt, c, p, h);
					int kl = idx_kl_of_pair(c, p, h);
					ck_assert(d >= 0 && d < 128 && kl >= 0 && kl < 128);
					ck_assert_int_eq(idx_kl_of_dim(fmt, d), kl);
					seen[kl]++;
					/* mma fragment rule: b0 = k 2c+h, b1 = k 8+2c+h of step p/2 */
					ck_assert_int_eq(kl % 16, ((p & 1) ? 8 : 0) + 2 * c + h);
				}
		for (int i = 0; i < 128; i++)
			ck_assert_int_eq(seen[i], 1);
	}
	/* every e2m1 code in both halves, every e4m3 byte in both halves */
	for (uint32_t code = 0; code < 16; code++)
		for (int i = 0; i < 4; i++) {
			uint32_t word = (code << (4 * i)) | ((15u - code) << (4 * i + 16));
			uint32_t bits = idx_fp4_pair_bits(word, i);
			float lo = codec_bf16_decode((uint16_t)bits) * codec_bf16_decode(IDX_FP4_PAIR_SCALE_BITS);
			float hi = codec_bf16_decode((uint16_t)(bits >> 16)) *
				   codec_bf16_decode(IDX_FP4_PAIR_SCALE_BITS);
			ck_assert_float_eq(lo, codec_e2m1_decode((uint8_t)code));
			ck_assert_float_eq(hi, codec_e2m1_decode((uint8_t)(15 - code)));
		}
	for (uint32_t b = 0; b < 256; b++) {
		if ((b & 0x7f) == 0x7f)
			continue; /* NaN */
		for (int sub = 0; sub < 2; sub++) {
			uint32_t other = (b * 37u + 11u) & 0xffu;
			if ((other & 0x7f) == 0x7f)
				other ^= 1;
			uint32_t word = (b << (8 * sub)) | (other << (8 * (sub + 2)));
			uint32_t bits = idx_fp8_pair_bits(word, sub);
			float s = codec_bf16_decode(IDX_FP8_PAIR_SCALE_BITS);
			ck_assert_float_eq(codec_bf16_decode((uint16_t)bits) * s,
					   codec_e4m3_decode((uint8_t)b));
			ck_assert_float_eq(codec_bf16_decode((uint16_t)(bits >> 16)) * s,
					   codec_e4m3_decode((uint8_t)other));
		}
	}
	/* whole keys: fragments assembled from the raw page words, as the kernel does */
	uint64_t rng = 77;
	for (int f = 0; f < 2; f++) {
		strata_index_fmt fmt = (strata_index_fmt)f;
		size_t eb = strata_index_entry_bytes(fmt);
		uint8_t *page = calloc(64, eb);
		float x[128], v[128], ks;
		for (int off = 0; off < 64; off++) {
			for (int d = 0; d < 128; d++)
				x[d] = tu_uniform(&rng) * (float)(1 + off % 9) * 3.0f;
			td_encode_key(fmt, x, page, 64, off);
			idx_key_dequant(fmt, page, 64, off, v, &ks);
			for (int c = 0; c < 4; c++)
				for (int p = 0; p < 16; p++) {
					uint32_t word, bits;
					float mul;
					if (fmt == STRATA_INDEX_MXFP4) {
						memcpy(&word, page + off * 64 + 16 * c + 4 * (p >> 2), 4);
						bits = idx_fp4_pair_bits(word, p & 3);
						mul = codec_bf16_decode(IDX_FP4_PAIR_SCALE_BITS);
					} else {
						memcpy(&word, page + off * 128 + 32 * c + 4 * (p >> 1), 4);
						bits = idx_fp8_pair_bits(word, p & 1);
						mul = codec_bf16_decode(IDX_FP8_PAIR_SCALE_BITS);
					}
					for (int h = 0; h < 2; h++) {
						float val = codec_bf16_decode((uint16_t)(bits >> (16 * h))) * mul;
						if (fmt == STRATA_INDEX_MXFP4) /* group scale, byte c */
							val *= codec_ue8m0_decode(page[64 * 64 + off * 4 + c]);
						ck_assert_float_eq(val, v[idx_dim_of_pair(fmt, c, p, h)]);
					}
				}
		}
		free(page);
	}
}
END_TEST

/* The wgmma scan's MXFP4 -> e4m3 conversion (indexer_int.h idx_mx_*), on the CPU: every
 * value times its key's scale equals the exact dequantised value, for group spans up to
 * 14 octaves; groups further below read as zero. All 16 codes, every span 0 .. 20. */
START_TEST(mxfp4_as_e4m3)
{
	uint64_t rs = 99;
	uint8_t page[64 * 68];
	for (uint32_t m = 0; m < 256; m++) { /* every scale byte, subnormal halves too */
		ck_assert(idx_mx_key_half_scale(m) == ldexpf(1.0f, (int)m - 134));
		ck_assert(idx_mx_key_half_scale(m) == 0.5f * idx_mx_key_scale(m));
	}
	for (int rep = 0; rep < 400; rep++) {
		for (int i = 0; i < 64 * 64; i++)
			page[i] = (uint8_t)(rep * 131 + i * 7 + (i >> 6)); /* every code pair */
		for (int key = 0; key < 64; key++) {
			rs = rs * 6364136223846793005ull + 1442695040888963407ull;
			const int m = 1 + (int)(rs >> 33) % 250, span = (rep + key) % 21;
			for (int g = 0; g < 4; g++) {
				int sg = m - (int)((rs >> (8 * g + 3)) % (uint64_t)(span + 1));
				page[64 * 64 + key * 4 + g] = (uint8_t)(g == key % 4 ? m : sg < 0 ? 0 : sg);
			}
		}
		for (int key = 0; key < 64; key++) {
			float v[128], one;
			idx_key_dequant(STRATA_INDEX_MXFP4, page, 64, key, v, &one);
			const uint8_t *sc = page + 64 * 64 + key * 4;
			uint32_t m = 0, sc32;
			for (int g = 0; g < 4; g++)
				m = sc[g] > m ? sc[g] : m;
			memcpy(&sc32, sc, 4);
			ck_assert_uint_eq(idx_mx_max_scale(sc32), m);
			const float ks = idx_mx_key_scale(m);
			ck_assert(ks == ldexpf(1.0f, (int)m - 133));
			for (int ch = 0; ch < 8; ch++) { /* dims 16ch .. 16ch + 15, as the kernel */
				uint32_t lo, hi, w[2];
				idx_mx_lut((int)sc[ch >> 1] - (int)m, &lo, &hi);
				memcpy(w, page + key * 64 + ch * 8, 8);
				uint32_t o[4];
				idx_mx_eight(w[0], lo, hi, &o[0], &o[1]);
				idx_mx_eight(w[1], lo, hi, &o[2], &o[3]);
				for (int e = 0; e < 16; e++) {
					const int d = 16 * ch + e;
					const float got = codec_e4m3_decode((uint8_t)(o[e / 4] >> (8 * (e % 4)))) * ks;
					const float want = (int)sc[ch >> 1] - (int)m < -14 ? 0.0f : v[d];
					ck_assert_msg(got == want || (got == 0 && want == 0),
						      "key %d dim %d (scale %d, max %u): %g != %g", key, d,
						      sc[ch >> 1], m, got, want);
				}
			}
		}
	}
}
END_TEST

START_TEST(ordering_keys)
{
	ck_assert_uint_eq(idx_ord32(-0.0f), idx_ord32(0.0f));
	ck_assert(idx_ord32(-1.0f) < idx_ord32(-0.5f));
	ck_assert(idx_ord32(-1e-30f) < idx_ord32(0.0f));
	ck_assert(idx_ord32(0.0f) < idx_ord32(1e-30f));
	ck_assert(idx_ord32(1.0f) < idx_ord32(1.5f));
	ck_assert(idx_key64(1.0f, 5) > idx_key64(1.0f, 6)); /* lower id wins a tie */
	ck_assert(idx_key64(1.5f, 9) > idx_key64(1.0f, 0));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("indexer");
	TCase *tc = tcase_create("cpu");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, hand_computed);
	tcase_add_test(tc, unscored_rows);
	tcase_add_test(tc, adversarial_ties);
	tcase_add_test(tc, random_batches);
	tcase_add_test(tc, scratch_and_errors);
	tcase_add_test(tc, threads);
	tcase_add_test(tc, fp8_queries);
	tcase_add_test(tc, gpu_register_layout);
	tcase_add_test(tc, ordering_keys);
	tcase_add_test(tc, mxfp4_as_e4m3);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
