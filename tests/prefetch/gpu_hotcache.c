/* The hot cache on the GPU against the CPU backend, in lock step: the same steps
 * (random batches with MTP rows), predictions and appends must give identical index
 * lists, identical residency tables (map, owner, hand), identical counters, and pool
 * entries byte-identical to the host originals. Shapes cover budgets below and above
 * the kernel's 512 threads, top-k 1024, overflow, and real side streams. */
#include "hc_rig.h"

static strata_hotcache_config cfg_of(int n_rl, int me, int topk, int rpr, int budget, int bh)
{
	strata_hotcache_config c = STRATA_HOTCACHE_CONFIG_INIT;
	c.n_rl = n_rl;
	c.max_entries = me;
	c.topk = topk;
	c.rows_per_rl = rpr;
	c.budget = budget;
	c.B_hot = bh;
	c.predict_max = topk / 2;
	return c;
}

static void same_state(rig *g, rig *c)
{
	rig_dump(g);
	rig_dump(c);
	ck_assert_mem_eq(g->map, c->map, (size_t)g->c.n_rl * g->c.max_entries * 4);
	ck_assert_mem_eq(g->owner, c->owner, (size_t)g->c.n_rl * g->c.budget * 4);
	ck_assert_mem_eq(g->hand, c->hand, (size_t)g->c.n_rl * 4);
	strata_hotcache_stats a, b;
	ck_assert_int_eq(strata_hotcache_stats_get(g->hc, -1, &a), 0);
	ck_assert_int_eq(strata_hotcache_stats_get(c->hc, -1, &b), 0);
	ck_assert_mem_eq(&a, &b, sizeof a);
	/* resident entries equal host originals (on both) */
	rig_check_table(g);
	rig_check_table(c);
}

static void lockstep(const strata_hotcache_config *cfg, int steps, uint64_t seed, int kind,
		     int allow_overflow)
{
	rig g, c;
	rig_open(&g, STRATA_BACKEND_GPU, cfg, seed);
	rig_open(&c, STRATA_BACKEND_CPU, cfg, seed);
	int n_rl = g.c.n_rl, k = g.c.topk;
	strata_selgen **gg = calloc((size_t)n_rl, sizeof *gg), **gc = calloc((size_t)n_rl, sizeof *gc);
	for (int rl = 0; rl < n_rl; rl++) {
		ck_assert_int_eq(strata_selgen_create(kind, cfg->max_entries / 2, k, seed + rl, &gg[rl]), 0);
		ck_assert_int_eq(strata_selgen_create(kind, cfg->max_entries / 2, k, seed + rl, &gc[rl]), 0);
	}
	size_t cap = (size_t)g.c.max_rows * k;
	int32_t *ids = malloc(cap * 4), *rl_of = malloc((size_t)g.c.max_rows * 4);
	int32_t *out_g = malloc(cap * 4), *out_c = malloc(cap * 4);
	uint64_t sg = seed, sc = seed, sa = seed + 99;
	int next_id = cfg->max_entries / 2;
	for (int step = 0; step < steps; step++) {
		int rows = rig_batch(&g, gg, k, &sg, ids, rl_of);
		ck_assert_int_eq(rig_step(&g, rows, k, ids, rl_of, out_g), 0);
		ck_assert_int_eq(rig_batch(&c, gc, k, &sc, ids, rl_of), rows);
		ck_assert_int_eq(rig_step(&c, rows, k, ids, rl_of, out_c), 0);
		ck_assert_msg(!memcmp(out_g, out_c, (size_t)rows * k * 4), "step %d: index lists differ", step);
		rig_check_step(&g, rows, k, ids, rl_of, out_g, allow_overflow);
		if (step % 3 == 1) {
			int32_t all[64];
			for (int rl = 0; rl < n_rl; rl++)
				all[rl] = rl;
			ck_assert_int_eq(rig_predict(&g, n_rl, all), 0);
			ck_assert_int_eq(rig_predict(&c, n_rl, all), 0);
		}
		if (step % 4 == 3 && next_id < cfg->max_entries) { /* one new entry per rl */
			int n = n_rl < g.c.max_append ? n_rl : g.c.max_append;
			int32_t rls[64], nid[64];
			float *src = malloc((size_t)n * 512 * 4);
			for (int i = 0; i < n; i++) {
				rls[i] = i;
				nid[i] = next_id;
			}
			for (int i = 0; i < n * 512; i++)
				src[i] = tu_uniform(&sa) * 3.0f;
			next_id++;
			ck_assert_int_eq(rig_append(&g, n, rls, nid, src), 0);
			ck_assert_int_eq(rig_append(&c, n, rls, nid, src), 0);
			for (int i = 0; i < n; i++) { /* written back identically */
				ck_assert_mem_eq(rig_host_entry(&g, i, nid[i], 0), rig_host_entry(&c, i, nid[i], 0), 576);
				ck_assert_mem_eq(rig_host_entry(&g, i, nid[i], 1), rig_host_entry(&c, i, nid[i], 1), 8);
			}
			for (int rl = 0; rl < n_rl; rl++) {
				strata_selgen_set_n(gg[rl], next_id);
				strata_selgen_set_n(gc[rl], next_id);
			}
		}
		if (step % 5 == 4)
			same_state(&g, &c);
	}
	same_state(&g, &c);
	ck_assert_int_eq(strata_hotcache_check(g.hc), strata_hotcache_check(c.hc));
	for (int rl = 0; rl < n_rl; rl++) {
		strata_selgen_destroy(gg[rl]);
		strata_selgen_destroy(gc[rl]);
	}
	free(gg);
	free(gc);
	free(ids);
	free(rl_of);
	free(out_g);
	free(out_c);
	rig_close(&g);
	rig_close(&c);
}

START_TEST(small_budgets)
{ /* budget 48..96 < 512 threads: the CLOCK window is the whole budget */
	strata_hotcache_config c = cfg_of(5, 3000, 24, 2, 0, 16);
	lockstep(&c, 30, 1, STRATA_SELGEN_STRUCTURED, 0);
	c.budget = 60; /* < rows x topk: also tests overflow agreement */
	lockstep(&c, 20, 2, STRATA_SELGEN_UNIFORM, 1);
}
END_TEST

START_TEST(flash_shape)
{ /* top-k 512, budget 1024: windows of 512 slots, several per step */
	strata_hotcache_config c = cfg_of(4, 32768, 512, 1, 0, 64);
	lockstep(&c, 25, 3, STRATA_SELGEN_STRUCTURED, 0);
	lockstep(&c, 10, 4, STRATA_SELGEN_UNIFORM, 0);
}
END_TEST

START_TEST(pro_shape_mtp)
{ /* top-k 1024 with 2 MTP rows: lists longer than the block, budget 4096 */
	strata_hotcache_config c = cfg_of(3, 65536, 1024, 2, 0, 64);
	lockstep(&c, 12, 5, STRATA_SELGEN_STRUCTURED, 0);
}
END_TEST

/* Steps on one stream, predictions on a side stream, appends with a side write-back:
 * the events must order them so that the results equal the synchronous CPU run. */
START_TEST(side_streams)
{
	strata_hotcache_config cfg = cfg_of(4, 8192, 128, 1, 0, 64);
	rig g, c;
	rig_open(&g, STRATA_BACKEND_GPU, &cfg, 7);
	rig_open(&c, STRATA_BACKEND_CPU, &cfg, 7);
	strata_stream *main_s, *side;
	ck_assert_int_eq(strata_stream_create(g.dev, &main_s), 0);
	ck_assert_int_eq(strata_stream_create(g.dev, &side), 0);
	const int L = 4, steps = 12, k = 128;
	strata_selgen *gen[4];
	for (int rl = 0; rl < L; rl++)
		strata_selgen_create(STRATA_SELGEN_STRUCTURED, 4096, k, (uint64_t)rl, &gen[rl]);
	int32_t *h_ids = malloc((size_t)steps * L * k * 4), *d_ids, *d_out, *d_rl;
	int32_t rl_seq[4] = { 0, 1, 2, 3 };
	ck_assert_int_eq(strata_dev_alloc(g.dev, (size_t)steps * L * k * 4, (void **)&d_ids), 0);
	ck_assert_int_eq(strata_dev_alloc(g.dev, (size_t)steps * L * k * 4, (void **)&d_out), 0);
	ck_assert_int_eq(strata_dev_alloc(g.dev, 16, (void **)&d_rl), 0);
	for (int s = 0; s < steps; s++)
		for (int rl = 0; rl < L; rl++)
			strata_selgen_next(gen[rl], h_ids + ((size_t)s * L + rl) * k);
	rig_sync_copy(&g, d_ids, h_ids, (size_t)steps * L * k * 4);
	rig_sync_copy(&g, d_rl, rl_seq, 16);
	float *src = malloc((size_t)steps * L * 512 * 4), *d_src;
	uint64_t seed = 3;
	for (size_t i = 0; i < (size_t)steps * L * 512; i++)
		src[i] = tu_uniform(&seed);
	ck_assert_int_eq(strata_dev_alloc(g.dev, (size_t)steps * L * 512 * 4, (void **)&d_src), 0);
	rig_sync_copy(&g, d_src, src, (size_t)steps * L * 512 * 4);
	int32_t *new_ids = malloc((size_t)steps * L * 4), *d_new;
	for (int s = 0; s < steps; s++)
		for (int rl = 0; rl < L; rl++)
			new_ids[s * L + rl] = 4096 + s;
	ck_assert_int_eq(strata_dev_alloc(g.dev, (size_t)steps * L * 4, (void **)&d_new), 0);
	rig_sync_copy(&g, d_new, new_ids, (size_t)steps * L * 4);
	/* GPU: everything enqueued without a host sync; layer rl's step, then rl+1's predict */
	for (int s = 0; s < steps; s++) {
		for (int rl = 0; rl < L; rl++) {
			size_t off = ((size_t)s * L + rl) * k;
			strata_hotcache_batch b = { 1, k, d_ids + off, d_rl + rl, d_out + off };
			ck_assert_int_eq(strata_hotcache_step(g.hc, &b, main_s), 0);
			if (rl + 1 < L)
				ck_assert_int_eq(strata_hotcache_predict(g.hc, 1, d_rl + rl + 1, side), 0);
		}
		if (s % 2)
			ck_assert_int_eq(strata_hotcache_append(g.hc, L, d_rl, d_new + s * L,
								d_src + (size_t)s * L * 512, main_s, side), 0);
	}
	ck_assert_int_eq(strata_dev_sync(g.dev), 0);
	/* CPU: the same calls in the same order */
	int32_t *out_c = malloc((size_t)k * 4), *out_g = malloc((size_t)steps * L * k * 4);
	rig_sync_copy(&g, out_g, d_out, (size_t)steps * L * k * 4);
	for (int s = 0; s < steps; s++) {
		for (int rl = 0; rl < L; rl++) {
			size_t off = ((size_t)s * L + rl) * k;
			ck_assert_int_eq(rig_step(&c, 1, k, h_ids + off, &rl_seq[rl], out_c), 0);
			ck_assert_msg(!memcmp(out_c, out_g + off, (size_t)k * 4), "step %d layer %d", s, rl);
			if (rl + 1 < L)
				ck_assert_int_eq(rig_predict(&c, 1, &rl_seq[rl + 1]), 0);
		}
		if (s % 2)
			ck_assert_int_eq(rig_append(&c, L, rl_seq, new_ids + s * L, src + (size_t)s * L * 512), 0);
	}
	same_state(&g, &c);
	for (int rl = 0; rl < L; rl++)
		strata_selgen_destroy(gen[rl]);
	strata_dev_free(g.dev, d_ids);
	strata_dev_free(g.dev, d_out);
	strata_dev_free(g.dev, d_rl);
	strata_dev_free(g.dev, d_src);
	strata_dev_free(g.dev, d_new);
	strata_stream_destroy(g.dev, main_s);
	strata_stream_destroy(g.dev, side);
	free(h_ids);
	free(src);
	free(new_ids);
	free(out_c);
	free(out_g);
	rig_close(&g);
	rig_close(&c);
}
END_TEST

int main(void)
{
	tu_require_gpu();
	Suite *s = suite_create("gpu_hotcache");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, small_budgets);
	tcase_add_test(tc, flash_shape);
	tcase_add_test(tc, pro_shape_mtp);
	tcase_add_test(tc, side_streams);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK); /* CUDA contexts do not survive fork() */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
