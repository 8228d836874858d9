/* GPU sparse attention and LSE combine against the CPU twins (kernels.h tolerances),
 * and run-to-run determinism, for the unsplit kernel (no scratch) and the split-over-
 * entries path (strata_k_attn_scratch() bytes). */
#include <check.h>
#include <math.h>

#include "testutil.h"

#define D 512

static strata_dev *dev;

static void *to_dev(const void *h, size_t n)
{
	void *d = NULL;
	ck_assert_int_eq(strata_dev_alloc(dev, n ? n : 1, &d), 0);
	ck_assert_int_eq(strata_dev_copy(dev, d, h, n, NULL), 0);
	return d;
}

static void check_close(const float *gpu, const float *cpu, const float *glse,
			const float *clse, int rows, int heads)
{
	for (int i = 0; i < rows * heads; i++) {
		float mx = 0;
		for (int d = 0; d < D; d++)
			mx = fmaxf(mx, fabsf(cpu[(size_t)i * D + d]));
		for (int d = 0; d < D; d++) {
			float a = gpu[(size_t)i * D + d], b = cpu[(size_t)i * D + d];
			ck_assert_msg(fabsf(a - b) <= STRATA_ATTN_GPU_RTOL * mx + 1e-30f,
				      "row/head %d dim %d: gpu %g cpu %g (max %g)", i, d, a, b, mx);
		}
		if (isinf(clse[i]))
			ck_assert(isinf(glse[i]));
		else
			ck_assert_msg(fabsf(glse[i] - clse[i]) <=
					      STRATA_ATTN_GPU_ATOL * fmaxf(1.0f, fabsf(clse[i])),
				      "lse %d: gpu %g cpu %g", i, glse[i], clse[i]);
	}
}

/* rows x heads over n_idx selected entries of a pool (-1 holes) and n_win window
 * entries; V4-Flash shapes by default. Row 0's first hole_run idx entries are -1 (a
 * whole chunk without entries on the split path). want_split: the split path must run
 * (H100/H200 SM counts). */
static void run_case_ex(int rows, int heads, int n_idx, int n_win, int pool_n, uint64_t seed,
			int hole_run, bool want_split)
{
	int B = 64, blocks = (pool_n + B - 1) / B;
	size_t pool_bytes = (size_t)blocks * strata_main_block_stride(B);
	uint8_t *pool = calloc(1, pool_bytes);
	float *src = malloc(sizeof *src * (size_t)pool_n * D);
	for (size_t i = 0; i < (size_t)pool_n * D; i++)
		src[i] = (i % D < 448 ? 3.0f : 0.5f) * tu_uniform(&seed);
	strata_main_encode_params ep = { .src = src, .n = pool_n, .B = B, .pool = pool };
	ck_assert_int_eq(strata_k_main_encode_cpu(&ep), 0);
	size_t qn = (size_t)rows * heads * D;
	float *q = malloc(sizeof *q * qn), *sink = malloc(sizeof *sink * heads);
	for (size_t i = 0; i < qn; i++)
		q[i] = tu_uniform(&seed);
	for (int h = 0; h < heads; h++)
		sink[h] = tu_uniform(&seed);
	int32_t *idx = malloc(sizeof *idx * ((size_t)rows * n_idx + 1));
	int32_t *win = malloc(sizeof *win * ((size_t)rows * n_win + 1));
	for (int i = 0; i < rows * n_idx; i++)
		idx[i] = (tu_next(&seed) % 13 == 0) ? -1 : (int32_t)(tu_next(&seed) % pool_n);
	for (int i = 0; i < rows * n_win; i++)
		win[i] = (int32_t)(tu_next(&seed) % pool_n);
	if (rows > 1) /* an empty row */
		for (int j = 0; j < n_idx; j++)
			idx[(size_t)(rows - 1) * n_idx + j] = -1;
	for (int j = 0; j < hole_run && j < n_idx; j++)
		idx[j] = -1;
	float *co = malloc(sizeof *co * qn), *cl = malloc(sizeof *cl * rows * heads);
	strata_attn_params p = { .n_rows = rows, .heads = heads, .scale = 1.0f / sqrtf(512.0f),
				 .q = q, .sink = sink, .pool = pool, .B = B, .idx = idx,
				 .n_idx = n_idx, .win_pool = pool, .win_B = B, .win_idx = win,
				 .n_win = rows > 1 ? 0 : n_win, .out = co, .lse = cl };
	ck_assert_int_eq(strata_k_attn_cpu(&p), 0);

	strata_attn_params g = p;
	g.q = to_dev(q, sizeof *q * qn);
	g.sink = to_dev(sink, sizeof *sink * heads);
	g.pool = to_dev(pool, pool_bytes);
	g.win_pool = g.pool;
	g.idx = to_dev(idx, sizeof *idx * ((size_t)rows * n_idx + 1));
	g.win_idx = to_dev(win, sizeof *win * ((size_t)rows * n_win + 1));
	void *dout, *dlse;
	ck_assert_int_eq(strata_dev_alloc(dev, sizeof *co * qn, &dout), 0);
	ck_assert_int_eq(strata_dev_alloc(dev, sizeof *cl * rows * heads, &dlse), 0);
	g.out = dout;
	g.lse = dlse;
	float *go = malloc(sizeof *go * qn), *gl = malloc(sizeof *gl * rows * heads);
	float *go2 = malloc(sizeof *go * qn);
	ck_assert_int_eq(strata_k_attn(dev, &g, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, go, dout, sizeof *go * qn, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, gl, dlse, sizeof *gl * rows * heads, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	check_close(go, co, gl, cl, rows, heads);
	ck_assert_int_eq(strata_k_attn(dev, &g, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, go2, dout, sizeof *go * qn, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	ck_assert_mem_eq(go, go2, sizeof *go * qn); /* deterministic */

	/* The split path: same tolerance against the CPU twin, deterministic too. */
	size_t sb = strata_k_attn_scratch(dev, &g);
	if (want_split)
		ck_assert_uint_gt(sb, 0);
	void *dscr = NULL;
	if (sb) {
		ck_assert_int_eq(strata_dev_alloc(dev, sb, &dscr), 0);
		strata_attn_params gs = g;
		gs.scratch = dscr;
		gs.scratch_bytes = sb;
		ck_assert_int_eq(strata_dev_memset(dev, dout, 0xff, sizeof *co * qn, NULL), 0);
		ck_assert_int_eq(strata_k_attn(dev, &gs, NULL), 0);
		ck_assert_int_eq(strata_dev_copy(dev, go, dout, sizeof *go * qn, NULL), 0);
		ck_assert_int_eq(strata_dev_copy(dev, gl, dlse, sizeof *gl * rows * heads, NULL), 0);
		ck_assert_int_eq(strata_dev_sync(dev), 0);
		check_close(go, co, gl, cl, rows, heads);
		/* Scratch left dirty by the first run must not matter. */
		ck_assert_int_eq(strata_k_attn(dev, &gs, NULL), 0);
		ck_assert_int_eq(strata_dev_copy(dev, go2, dout, sizeof *go * qn, NULL), 0);
		ck_assert_int_eq(strata_dev_sync(dev), 0);
		ck_assert_mem_eq(go, go2, sizeof *go * qn);
		/* A buffer sized for longer lists serves this one. */
		strata_attn_params longer = g;
		longer.n_idx += 4096;
		ck_assert_uint_ge(strata_k_attn_scratch(dev, &longer), sb);
	}

	/* Combine: split the rows' results into two partials (same output twice with
	 * lse, and a -inf part) and compare GPU with CPU. */
	float *pl = malloc(sizeof *pl * 3 * rows * heads);
	float *po = malloc(sizeof *po * 3 * qn);
	for (int k = 0; k < 3; k++) {
		memcpy(po + k * qn, co, sizeof *co * qn);
		for (int i = 0; i < rows * heads; i++)
			pl[k * rows * heads + i] = k == 2 ? -INFINITY : cl[i] + 0.5f * k;
	}
	float *cco = malloc(sizeof *cco * qn), *ccl = malloc(sizeof *ccl * rows * heads);
	strata_attn_combine_params c = { .n_parts = 3, .n_rows = rows, .heads = heads, .dim = D,
					 .part_out = po, .part_lse = pl, .sink = sink, .out = cco,
					 .lse = ccl };
	ck_assert_int_eq(strata_k_attn_combine_cpu(&c), 0);
	strata_attn_combine_params gc = c;
	gc.part_out = to_dev(po, sizeof *po * 3 * qn);
	gc.part_lse = to_dev(pl, sizeof *pl * 3 * rows * heads);
	gc.sink = g.sink;
	gc.out = dout;
	gc.lse = dlse;
	ck_assert_int_eq(strata_k_attn_combine(dev, &gc, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, go, dout, sizeof *go * qn, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, gl, dlse, sizeof *gl * rows * heads, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	check_close(go, cco, gl, ccl, rows, heads);

	strata_dev_free(dev, (void *)gc.part_out);
	strata_dev_free(dev, (void *)gc.part_lse);
	strata_dev_free(dev, (void *)g.q);
	strata_dev_free(dev, (void *)g.sink);
	strata_dev_free(dev, (void *)g.pool);
	strata_dev_free(dev, (void *)g.idx);
	strata_dev_free(dev, (void *)g.win_idx);
	strata_dev_free(dev, dout);
	strata_dev_free(dev, dlse);
	strata_dev_free(dev, dscr);
	free(pool); free(src); free(q); free(sink); free(idx); free(win); free(co); free(cl);
	free(go); free(gl); free(go2); free(pl); free(po); free(cco); free(ccl);
}

static void run_case(int rows, int heads, int n_idx, int n_win, int pool_n, uint64_t seed)
{
	run_case_ex(rows, heads, n_idx, n_win, pool_n, seed, 0, false);
}

START_TEST(flash_batch1) { run_case_ex(1, 64, 512, 128, 4096, 1, 0, true); }
END_TEST
START_TEST(flash_batch8) { run_case(8, 64, 512, 128, 8192, 2); }
END_TEST
START_TEST(odd_shapes) { run_case(3, 13, 37, 5, 300, 3); }
END_TEST
START_TEST(window_only) { run_case(1, 8, 0, 128, 256, 4); }
END_TEST
/* Split path: an HCA layer at 128K (1,022 C128 entries + the window), a long list,
 * a fully empty chunk, odd head counts, and two rows (one empty). */
START_TEST(split_hca_1150) { run_case_ex(1, 64, 1022, 128, 4096, 5, 0, true); }
END_TEST
START_TEST(split_long_5000) { run_case_ex(1, 64, 4872, 128, 8192, 6, 0, true); }
END_TEST
START_TEST(split_empty_chunk) { run_case_ex(1, 64, 1022, 128, 4096, 7, 300, true); }
END_TEST
START_TEST(split_odd_heads) { run_case_ex(1, 13, 333, 37, 1000, 8, 0, true); }
END_TEST
START_TEST(split_two_rows) { run_case_ex(2, 64, 1150, 0, 4096, 9, 0, true); }
END_TEST

int main(void)
{
	tu_require_gpu();
	strata_dev_config cfg = STRATA_DEV_CONFIG_INIT;
	cfg.backend = STRATA_BACKEND_GPU;
	if (strata_dev_open(&cfg, &dev))
		return 1;
	Suite *s = suite_create("gpu_attention");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, flash_batch1);
	tcase_add_test(tc, flash_batch8);
	tcase_add_test(tc, odd_shapes);
	tcase_add_test(tc, window_only);
	tcase_add_test(tc, split_hca_1150);
	tcase_add_test(tc, split_long_5000);
	tcase_add_test(tc, split_empty_chunk);
	tcase_add_test(tc, split_odd_heads);
	tcase_add_test(tc, split_two_rows);
	suite_add_tcase(s, tc);
	/* No fork: a CUDA context does not survive fork(), and the parent has one. */
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int rc = srunner_ntests_failed(sr) ? EXIT_FAILURE : EXIT_SUCCESS;
	srunner_free(sr);
	strata_dev_close(dev);
	return rc;
}
