/* Sparse attention with sink and the LSE combine: known values on the CPU reference. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "testutil.h"

#define D 512

/* A pool of n entries (B per block) from seeded values; returns the pool and the
 * exactly dequantised entries. */
static uint8_t *make_pool(int n, int B, uint64_t seed, float amp, float **deq)
{
	int blocks = (n + B - 1) / B;
	uint8_t *pool = calloc((size_t)blocks, strata_main_block_stride(B));
	float *src = malloc(sizeof *src * (size_t)n * D);
	*deq = malloc(sizeof **deq * (size_t)n * D);
	for (size_t i = 0; i < (size_t)n * D; i++)
		src[i] = amp * tu_uniform(&seed);
	strata_main_encode_params ep = { .src = src, .n = n, .B = B, .pool = pool };
	ck_assert_int_eq(strata_k_main_encode_cpu(&ep), 0);
	strata_main_decode_params dp = { .pool = pool, .n = n, .B = B, .dst = *deq };
	ck_assert_int_eq(strata_k_main_decode_cpu(&dp), 0);
	free(src);
	return pool;
}

static float dotf(const float *a, const float *b)
{
	float s = 0.0f;
	for (int d = 0; d < D; d++)
		s += a[d] * b[d];
	return s;
}

START_TEST(single_entry_gives_v)
{
	float *deq;
	uint8_t *pool = make_pool(70, 64, 1, 2.0f, &deq);
	enum { H = 3 };
	float q[H * D], out[H * D], lse[H];
	uint64_t s = 7;
	for (int i = 0; i < H * D; i++)
		q[i] = tu_uniform(&s);
	int32_t idx[1] = { 66 }; /* second block, offset 2 */
	strata_attn_params p = { .n_rows = 1, .heads = H, .scale = 1.0f / sqrtf(512.0f), .q = q,
				 .pool = pool, .B = 64, .idx = idx, .n_idx = 1, .out = out,
				 .lse = lse };
	ck_assert_int_eq(strata_k_attn_cpu(&p), 0);
	for (int h = 0; h < H; h++) {
		for (int d = 0; d < D; d++)
			ck_assert_msg(out[h * D + d] == deq[66 * D + d], "h %d d %d: %g != %g", h, d,
				      out[h * D + d], deq[66 * D + d]);
		float want = p.scale * dotf(q + h * D, deq + 66 * D);
		ck_assert_float_eq_tol(lse[h], want, 1e-5f * fabsf(want) + 1e-6f);
	}
	free(pool);
	free(deq);
}
END_TEST

START_TEST(sink_scales_output)
{
	float *deq;
	uint8_t *pool = make_pool(4, 2, 3, 1.0f, &deq);
	enum { H = 2 };
	float q[H * D], out[H * D], out0[H * D], lse[H], lse0[H];
	uint64_t s = 9;
	for (int i = 0; i < H * D; i++)
		q[i] = tu_uniform(&s);
	float sink[H] = { 0.7f, -3.0f };
	int32_t idx[3] = { 0, 3, 1 };
	strata_attn_params p = { .n_rows = 1, .heads = H, .scale = 0.05f, .q = q, .pool = pool,
				 .B = 2, .idx = idx, .n_idx = 3, .out = out0, .lse = lse0 };
	ck_assert_int_eq(strata_k_attn_cpu(&p), 0);
	p.sink = sink;
	p.out = out;
	p.lse = lse;
	ck_assert_int_eq(strata_k_attn_cpu(&p), 0);
	for (int h = 0; h < H; h++) {
		ck_assert_float_eq(lse[h], lse0[h]); /* lse is reported without the sink */
		double f = exp((double)lse[h]) / (exp((double)lse[h]) + exp((double)sink[h]));
		ck_assert(f < 0.999); /* the sink must visibly matter in this case */
		for (int d = 0; d < D; d++)
			ck_assert_double_eq_tol(out[h * D + d], out0[h * D + d] * f, 1e-6);
	}
	/* Known two-entry softmax by hand. */
	float w[3];
	double m = -1e30, l = 0;
	for (int j = 0; j < 3; j++) {
		w[j] = p.scale * dotf(q, deq + idx[j] * D);
		m = fmax(m, w[j]);
	}
	for (int j = 0; j < 3; j++)
		l += exp(w[j] - m);
	for (int d = 0; d < D; d += 37) {
		double o = 0;
		for (int j = 0; j < 3; j++)
			o += exp(w[j] - m) / l * deq[idx[j] * D + d];
		ck_assert_double_eq_tol(out0[d], o, 1e-5);
	}
	ck_assert_double_eq_tol(lse0[0], m + log(l), 1e-5);
	free(pool);
	free(deq);
}
END_TEST

START_TEST(invalid_and_empty_rows)
{
	float *deq;
	uint8_t *pool = make_pool(8, 64, 5, 1.0f, &deq);
	float q[2 * D], out[2 * D], lse[2];
	uint64_t s = 11;
	for (int i = 0; i < 2 * D; i++)
		q[i] = tu_uniform(&s);
	int32_t idx[2 * 3] = { -1, 5, -1, -1, -1, -1 };
	float sink = 0.0f;
	strata_attn_params p = { .n_rows = 2, .heads = 1, .scale = 0.1f, .q = q, .sink = &sink,
				 .pool = pool, .B = 64, .idx = idx, .n_idx = 3, .out = out,
				 .lse = lse };
	ck_assert_int_eq(strata_k_attn_cpu(&p), 0);
	float f = 1.0f / (1.0f + expf(-lse[0]));
	for (int d = 0; d < D; d++) {
		ck_assert_float_eq_tol(out[d], deq[5 * D + d] * f, 1e-6f);
		ck_assert(out[D + d] == 0.0f);
	}
	ck_assert(isinf(lse[1]) && lse[1] < 0);
	free(pool);
	free(deq);
}
END_TEST

/* The window list is the same entries continued: moving the tail of a list into
 * win_idx (same order, same bytes) changes nothing, bit for bit. */
START_TEST(window_list_is_a_continuation)
{
	float *deq;
	uint8_t *pool = make_pool(128, 64, 13, 3.0f, &deq);
	enum { H = 4, R = 2, N = 40, W = 24 };
	float q[R * H * D], out_a[R * H * D], out_b[R * H * D], la[R * H], lb[R * H];
	uint64_t s = 17;
	for (int i = 0; i < R * H * D; i++)
		q[i] = tu_uniform(&s);
	int32_t all[R * (N + W)], main_[R * N], win[R * W];
	for (int r = 0; r < R; r++)
		for (int j = 0; j < N + W; j++) {
			int32_t e = (int32_t)(tu_next(&s) % 128);
			all[r * (N + W) + j] = e;
			if (j < N)
				main_[r * N + j] = e;
			else
				win[r * W + j - N] = e;
		}
	strata_attn_params a = { .n_rows = R, .heads = H, .scale = 0.044f, .q = q, .pool = pool,
				 .B = 64, .idx = all, .n_idx = N + W, .out = out_a, .lse = la };
	strata_attn_params b = { .n_rows = R, .heads = H, .scale = 0.044f, .q = q, .pool = pool,
				 .B = 64, .idx = main_, .n_idx = N, .win_pool = pool, .win_B = 64,
				 .win_idx = win, .n_win = W, .out = out_b, .lse = lb };
	ck_assert_int_eq(strata_k_attn_cpu(&a), 0);
	ck_assert_int_eq(strata_k_attn_cpu(&b), 0);
	ck_assert_mem_eq(out_a, out_b, sizeof out_a);
	ck_assert_mem_eq(la, lb, sizeof la);
	free(pool);
	free(deq);
}
END_TEST

/* Misses read in place: a list naming some entries by -2 - e in pool2 (the host
 * tier) gives exactly the output of the same entries all in one pool, and the map
 * kernel's map mode writes such lists from a residency map; staged, it copies the
 * misses into a staging pool first, with the same result. */
START_TEST(pool2_entries_read_in_place)
{
	float *deq;
	enum { H = 4, R = 2, N = 48, NE = 192, HOT = 64 };
	uint8_t *host = make_pool(NE, 64, 29, 2.0f, &deq); /* the host tier: all entries */
	/* the hot pool holds entries 0..HOT-1 of row 1's request at slots HOT-1-e */
	uint8_t *hot = calloc(1, strata_main_block_stride(64));
	int32_t map[2 * NE];
	for (int i = 0; i < 2 * NE; i++)
		map[i] = -1;
	for (int e = 0; e < HOT; e++) {
		strata_gather_params g = { .n = 1, .src = { host, NULL, 0, 64 }, .dst = { hot, NULL, 0, 64 } };
		int32_t si = 96 + e, di = HOT - 1 - e;
		g.src_ids = &si;
		g.dst_ids = &di;
		ck_assert_int_eq(strata_k_gather_cpu(&g), 0);
		map[NE + e] = di; /* map row 1 */
	}
	float q[R * H * D], out_a[R * H * D], out_b[R * H * D], la[R * H], lb[R * H];
	uint64_t s = 31;
	for (int i = 0; i < R * H * D; i++)
		q[i] = tu_uniform(&s);
	/* row r's request owns host entries r * 96 .. r * 96 + 95; ids are per request */
	int32_t ids[R * N], direct[R * N], mapped[R * N];
	for (int r = 0; r < R; r++)
		for (int j = 0; j < N; j++) {
			int32_t id = j == 7 ? -1 : (int32_t)(tu_next(&s) % 96);
			ids[r * N + j] = id;
			direct[r * N + j] = id < 0 ? -1 : r * 96 + id;
		}
	int32_t row_base[R] = { 0, 96 }, row_map[R] = { 0, 1 };
	strata_attn_map_params mp = { .n_rows = R, .width = N, .ids = ids, .row_base = row_base,
				      .out = mapped, .map = map, .row_map = row_map, .map_stride = NE };
	ck_assert_int_eq(strata_k_attn_map_cpu(&mp), 0);
	int hits = 0, misses = 0;
	for (int i = 0; i < R * N; i++) {
		if (ids[i] < 0) {
			ck_assert_int_eq(mapped[i], -1);
		} else if (mapped[i] >= 0) {
			hits++;
			ck_assert_int_eq(mapped[i], HOT - 1 - ids[i]);
		} else {
			misses++;
			ck_assert_int_eq(-2 - mapped[i], direct[i]);
		}
	}
	ck_assert_int_gt(hits, 0);
	ck_assert_int_gt(misses, 0);
	strata_attn_params a = { .n_rows = R, .heads = H, .scale = 0.044f, .q = q, .pool = host,
				 .B = 64, .idx = direct, .n_idx = N, .out = out_a, .lse = la };
	strata_attn_params b = { .n_rows = R, .heads = H, .scale = 0.044f, .q = q, .pool = hot,
				 .B = 64, .idx = mapped, .n_idx = N, .pool2 = host, .B2 = 64,
				 .out = out_b, .lse = lb };
	ck_assert_int_eq(strata_k_attn_cpu(&a), 0);
	ck_assert_int_eq(strata_k_attn_cpu(&b), 0);
	ck_assert_mem_eq(out_a, out_b, sizeof out_a);
	ck_assert_mem_eq(la, lb, sizeof la);
	/* without pool2 the same list's host entries are holes: a different result */
	b.pool2 = NULL;
	ck_assert_int_eq(strata_k_attn_cpu(&b), 0);
	ck_assert(memcmp(out_a, out_b, sizeof out_a) != 0);
	b.pool2 = host;
	b.B2 = 0;
	ck_assert_int_eq(strata_k_attn_cpu(&b), -EINVAL);

	/* Staged: the map copies each miss into a staging pool at its list position
	 * (-2 - i), hits unchanged; attention over the staged list is the same again. */
	const size_t bs = strata_main_block_stride(64);
	uint8_t *stage = calloc((R * N + 63) / 64, bs);
	int32_t staged[R * N];
	strata_attn_map_params sp = mp;
	sp.out = staged;
	sp.host = host;
	sp.host_B = 64;
	sp.stage = stage;
	sp.stage_B = 64;
	ck_assert_int_eq(strata_k_attn_map_cpu(&sp), 0);
	for (int i = 0; i < R * N; i++) {
		if (mapped[i] > -2) {
			ck_assert_int_eq(staged[i], mapped[i]);
			continue;
		}
		ck_assert_int_eq(staged[i], -2 - i);
		const int e = direct[i];
		ck_assert_mem_eq(stage + (size_t)(i / 64) * bs + (size_t)(i % 64) * 576,
				 host + (size_t)(e / 64) * bs + (size_t)(e % 64) * 576, 576);
		ck_assert_mem_eq(stage + (size_t)(i / 64) * bs + 64 * 576 + (size_t)(i % 64) * 8,
				 host + (size_t)(e / 64) * bs + 64 * 576 + (size_t)(e % 64) * 8, 8);
	}
	b.pool2 = stage;
	b.B2 = 64;
	b.idx = staged;
	ck_assert_int_eq(strata_k_attn_cpu(&b), 0);
	ck_assert_mem_eq(out_a, out_b, sizeof out_a);
	ck_assert_mem_eq(la, lb, sizeof la);
	sp.map = NULL; /* staging needs the residency map, a host space and both B */
	ck_assert_int_eq(strata_k_attn_map_cpu(&sp), -EINVAL);
	sp.map = map;
	sp.host_B = 0;
	ck_assert_int_eq(strata_k_attn_map_cpu(&sp), -EINVAL);
	free(stage);
	free(hot);
	free(host);
	free(deq);
}
END_TEST

/* DCP: attention over A u B with the sink == combine(attn(A), attn(B)) + sink. */
START_TEST(combine_matches_whole)
{
	float *deq;
	uint8_t *pool = make_pool(256, 64, 19, 4.0f, &deq);
	enum { H = 5, R = 3, N = 96, P = 3 };
	float *q = malloc(sizeof *q * R * H * D);
	uint64_t s = 23;
	for (int i = 0; i < R * H * D; i++)
		q[i] = 2.0f * tu_uniform(&s);
	float sink[H];
	for (int h = 0; h < H; h++)
		sink[h] = 2.0f * tu_uniform(&s);
	int32_t idx[R * N];
	for (int i = 0; i < R * N; i++)
		idx[i] = (int32_t)(tu_next(&s) % 256);
	idx[5] = -1;
	float *whole = malloc(sizeof *whole * R * H * D), lw[R * H];
	strata_attn_params p = { .n_rows = R, .heads = H, .scale = 0.044f, .q = q, .sink = sink,
				 .pool = pool, .B = 64, .idx = idx, .n_idx = N, .out = whole,
				 .lse = lw };
	ck_assert_int_eq(strata_k_attn_cpu(&p), 0);
	/* Partition each row's entries by owner j % P (as DCP pages are owned). The last
	 * part gets no entries in row 0: an empty partial must contribute nothing. */
	float *po = malloc(sizeof *po * P * R * H * D), pl[P * R * H];
	for (int k = 0; k < P; k++) {
		int32_t sub[R * N];
		for (int r = 0; r < R; r++)
			for (int j = 0; j < N; j++)
				sub[r * N + j] = (j % P == k && !(r == 0 && k == P - 1))
							 ? idx[r * N + j] : -1;
		if (k == 0) /* row 0's entries of the last part go to part 0 instead */
			for (int j = 0; j < N; j++)
				if (j % P == P - 1)
					sub[j] = idx[j];
		strata_attn_params pp = p;
		pp.sink = NULL;
		pp.idx = sub;
		pp.out = po + (size_t)k * R * H * D;
		pp.lse = pl + k * R * H;
		ck_assert_int_eq(strata_k_attn_cpu(&pp), 0);
	}
	ck_assert(isinf(pl[(P - 1) * R * H]));
	float *co = malloc(sizeof *co * R * H * D), cl[R * H];
	strata_attn_combine_params c = { .n_parts = P, .n_rows = R, .heads = H, .dim = D,
					 .part_out = po, .part_lse = pl, .sink = sink,
					 .out = co, .lse = cl };
	ck_assert_int_eq(strata_k_attn_combine_cpu(&c), 0);
	for (int i = 0; i < R * H; i++)
		ck_assert_float_eq_tol(cl[i], lw[i], 1e-5f);
	float mx = 0;
	for (int i = 0; i < R * H * D; i++)
		mx = fmaxf(mx, fabsf(whole[i]));
	for (int i = 0; i < R * H * D; i++)
		ck_assert_msg(fabsf(co[i] - whole[i]) <= 1e-5f * mx, "i %d: %g vs %g", i, co[i],
			      whole[i]);
	free(q);
	free(whole);
	free(po);
	free(co);
	free(pool);
	free(deq);
}
END_TEST

START_TEST(bad_params)
{
	strata_attn_params p = { .n_rows = 1, .heads = 0 };
	ck_assert_int_lt(strata_k_attn_cpu(&p), 0);
	ck_assert_int_lt(strata_k_attn_cpu(NULL), 0);
	strata_attn_combine_params c = { .n_parts = 0, .n_rows = 1, .heads = 1, .dim = 4 };
	ck_assert_int_lt(strata_k_attn_combine_cpu(&c), 0);
}
END_TEST

/* The CPU backend never splits: no scratch, for any shape (and none for bad shapes). */
START_TEST(cpu_needs_no_scratch)
{
	strata_attn_params p = { .n_rows = 1, .heads = 64, .n_idx = 5000, .n_win = 128 };
	ck_assert_uint_eq(strata_k_attn_scratch(NULL, &p), 0);
	strata_dev_config cfg = STRATA_DEV_CONFIG_INIT;
	cfg.backend = STRATA_BACKEND_CPU;
	strata_dev *d = NULL;
	ck_assert_int_eq(strata_dev_open(&cfg, &d), 0);
	ck_assert_uint_eq(strata_k_attn_scratch(d, &p), 0);
	p.heads = 0;
	ck_assert_uint_eq(strata_k_attn_scratch(d, &p), 0);
	ck_assert_uint_eq(strata_k_attn_scratch(d, NULL), 0);
	strata_dev_close(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("attention");
	TCase *tc = tcase_create("cpu");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, single_entry_gives_v);
	tcase_add_test(tc, sink_scales_output);
	tcase_add_test(tc, invalid_and_empty_rows);
	tcase_add_test(tc, window_list_is_a_continuation);
	tcase_add_test(tc, pool2_entries_read_in_place);
	tcase_add_test(tc, combine_matches_whole);
	tcase_add_test(tc, bad_params);
	tcase_add_test(tc, cpu_needs_no_scratch);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
