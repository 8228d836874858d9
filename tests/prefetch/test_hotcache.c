/* The hot cache on the CPU backend: random selections, batches (with MTP rows) and
 * budgets give byte-identical entries, selected entries are never evicted in their
 * step, budgets hold, counters add up; prediction, append + write-back, release,
 * split detection, determinism; and the bytes-moved target with the structured
 * selection generator. */
#include "hc_rig.h"

static strata_hotcache_config cfg_of(int n_rl, int max_entries, int topk, int rows_per_rl,
				     int budget)
{
	strata_hotcache_config c = STRATA_HOTCACHE_CONFIG_INIT;
	c.n_rl = n_rl;
	c.max_entries = max_entries;
	c.topk = topk;
	c.rows_per_rl = rows_per_rl;
	c.budget = budget;
	c.B_hot = 16; /* blocks smaller than a budget: slots of one rl span blocks */
	return c;
}

START_TEST(random_steps)
{
	uint64_t seed = 100 + (uint64_t)_i;
	int n_rl = 1 + (int)(tu_next(&seed) % 5), rpr = 1 + (int)(tu_next(&seed) % 3);
	int topk = 8 + (int)(tu_next(&seed) % 57), me = 200 + (int)(tu_next(&seed) % 1800);
	int budget = rpr * topk * (1 + (int)(tu_next(&seed) % 3));
	strata_hotcache_config c = cfg_of(n_rl, me, topk, rpr, budget);
	rig r;
	rig_open(&r, STRATA_BACKEND_CPU, &c, seed);
	strata_selgen **gen = calloc((size_t)n_rl, sizeof *gen);
	for (int rl = 0; rl < n_rl; rl++)
		ck_assert_int_eq(strata_selgen_create(_i % 2 ? STRATA_SELGEN_UNIFORM
							     : STRATA_SELGEN_STRUCTURED,
						      me, topk, seed + (uint64_t)rl, &gen[rl]), 0);
	size_t cap = (size_t)r.c.max_rows * topk;
	int32_t *ids = malloc(cap * 4), *rl_of = malloc((size_t)r.c.max_rows * 4);
	int32_t *out = malloc(cap * 4);
	uint64_t lookups = 0;
	for (int step = 0; step < 25; step++) {
		int rows = rig_batch(&r, gen, topk, &seed, ids, rl_of);
		for (int a = 0; a < rows * topk; a++)
			lookups += ids[a] >= 0;
		ck_assert_int_eq(rig_step(&r, rows, topk, ids, rl_of, out), 0);
		ck_assert_int_eq(rig_check_step(&r, rows, topk, ids, rl_of, out, 0), 0);
		if (step % 5 == 4)
			rig_check_table(&r);
	}
	ck_assert_int_eq(strata_hotcache_check(r.hc), 0);
	strata_hotcache_stats st;
	ck_assert_int_eq(strata_hotcache_stats_get(r.hc, -1, &st), 0);
	ck_assert_uint_eq(st.lookups, lookups);
	ck_assert_uint_eq(st.hits + st.misses, st.lookups);
	ck_assert_uint_eq(st.overflow, 0);
	ck_assert_uint_eq(st.bytes_moved, st.misses * 584);
	ck_assert_uint_gt(st.misses, 0);
	for (int rl = 0; rl < n_rl; rl++)
		strata_selgen_destroy(gen[rl]);
	free(gen);
	free(ids);
	free(rl_of);
	free(out);
	rig_close(&r);
}
END_TEST

START_TEST(repeat_is_all_hits)
{
	strata_hotcache_config c = cfg_of(2, 500, 32, 1, 64);
	rig r;
	rig_open(&r, STRATA_BACKEND_CPU, &c, 5);
	int32_t ids[64], rl_of[2] = { 0, 1 }, out[64], out2[64];
	uint64_t seed = 9;
	for (int i = 0; i < 64; i++)
		ids[i] = (int32_t)(i % 32 * 15 + (int)(tu_next(&seed) % 15));
	ck_assert_int_eq(rig_step(&r, 2, 32, ids, rl_of, out), 0);
	strata_hotcache_stats a, b;
	ck_assert_int_eq(strata_hotcache_stats_get(r.hc, -1, &a), 0);
	ck_assert_uint_eq(a.misses, 64);
	ck_assert_uint_eq(a.hits, 0);
	ck_assert_int_eq(rig_step(&r, 2, 32, ids, rl_of, out2), 0);
	ck_assert_int_eq(strata_hotcache_stats_get(r.hc, -1, &b), 0);
	ck_assert_uint_eq(b.misses, 64);
	ck_assert_uint_eq(b.hits, 64);
	ck_assert_mem_eq(out, out2, sizeof out);
	ck_assert_int_eq(strata_hotcache_stats_get(r.hc, 1, &b), 0);
	ck_assert_uint_eq(b.lookups, 64);
	ck_assert_uint_eq(b.steps, 2);
	rig_close(&r);
}
END_TEST

START_TEST(overflow_is_bounded)
{
	/* 40 distinct ids into 24 slots: 24 served, 16 get -1, nothing outside the rl */
	strata_hotcache_config c = cfg_of(2, 400, 40, 1, 24);
	rig r;
	rig_open(&r, STRATA_BACKEND_CPU, &c, 6);
	int32_t ids[80], rl_of[2] = { 0, 1 }, out[80];
	for (int i = 0; i < 80; i++)
		ids[i] = (int32_t)(i % 40 * 9 + i / 40);
	ck_assert_int_eq(rig_step(&r, 2, 40, ids, rl_of, out), 0);
	ck_assert_int_eq(rig_check_step(&r, 2, 40, ids, rl_of, out, 1), 32);
	for (int i = 0; i < 24; i++) /* served in position order */
		ck_assert_int_ge(out[i], 0);
	ck_assert_int_eq(strata_hotcache_check(r.hc), STRATA_E_BUDGET);
	ck_assert_int_eq(strata_hotcache_check(r.hc), 0); /* cleared */
	strata_hotcache_stats st;
	ck_assert_int_eq(strata_hotcache_stats_get(r.hc, 0, &st), 0);
	ck_assert_uint_eq(st.overflow, 16);
	ck_assert_uint_eq(st.misses, 24);
	rig_check_table(&r);
	rig_close(&r);
}
END_TEST

START_TEST(never_evicts_selected)
{
	/* budget == k: a second step selecting half new ids must evict exactly the
	 * unselected half, never a selected one */
	strata_hotcache_config c = cfg_of(1, 1000, 32, 1, 32);
	rig r;
	rig_open(&r, STRATA_BACKEND_CPU, &c, 7);
	int32_t a[32], b[32], rl0 = 0, out[32];
	for (int i = 0; i < 32; i++) {
		a[i] = i * 10;
		b[i] = i < 16 ? i * 20 : 500 + i; /* keeps a's even multiples of 20 */
	}
	ck_assert_int_eq(rig_step(&r, 1, 32, a, &rl0, out), 0);
	ck_assert_int_eq(rig_step(&r, 1, 32, b, &rl0, out), 0);
	ck_assert_int_eq(rig_check_step(&r, 1, 32, b, &rl0, out, 0), 0);
	ck_assert_int_eq(strata_hotcache_check(r.hc), 0);
	rig_close(&r);
}
END_TEST

START_TEST(predict_and_use)
{
	strata_hotcache_config c = cfg_of(2, 2000, 32, 1, 128);
	c.predict_max = 64;
	c.predict_recent = 4;
	rig r;
	rig_open(&r, STRATA_BACKEND_CPU, &c, 8);
	int32_t s1[64], rl_of[2] = { 0, 1 }, out[64];
	for (int i = 0; i < 64; i++)
		s1[i] = (int32_t)((i % 32) * 50 + 10 + i / 32);
	ck_assert_int_eq(rig_step(&r, 2, 32, s1, rl_of, out), 0);
	ck_assert_int_eq(rig_predict(&r, 2, rl_of), 0);
	rig_check_table(&r);
	/* the last selection stays, neighbours and the newest entries came in */
	for (int i = 0; i < 64; i++) {
		int rl = i / 32;
		const int32_t *m = r.map + (size_t)rl * c.max_entries;
		ck_assert_int_ge(m[s1[i]], 0);
	}
	ck_assert_int_ge(r.map[1999], 0);
	strata_hotcache_stats st;
	ck_assert_int_eq(strata_hotcache_stats_get(r.hc, -1, &st), 0);
	ck_assert_uint_eq(st.prefetched, 2 * 64); /* capped at predict_max per rl */
	ck_assert_int_ge(r.map[c.max_entries + 1999 - 3], 0); /* the 4 newest, rl 1 */
	/* select right-hand neighbours: they were predicted first */
	int32_t s2[64];
	for (int i = 0; i < 64; i++)
		s2[i] = s1[i] + 1;
	uint64_t before = st.misses;
	ck_assert_int_eq(rig_step(&r, 2, 32, s2, rl_of, out), 0);
	ck_assert_int_eq(rig_check_step(&r, 2, 32, s2, rl_of, out, 0), 0);
	ck_assert_int_eq(strata_hotcache_stats_get(r.hc, -1, &st), 0);
	ck_assert_uint_gt(st.prefetch_used, 0);
	/* every selected id was either resident already (prefetched or not) or a miss */
	ck_assert_uint_le(st.misses - before + st.prefetch_used, 64);
	ck_assert_uint_eq(st.bytes_saved, st.prefetch_used * 584);
	ck_assert_uint_le(st.prefetch_used, st.prefetched);
	rig_close(&r);
}
END_TEST

START_TEST(append_writes_back)
{
	strata_hotcache_config c = cfg_of(3, 300, 16, 1, 32);
	rig r;
	rig_open(&r, STRATA_BACKEND_CPU, &c, 9);
	float src[3 * 512];
	uint64_t seed = 4;
	for (int i = 0; i < 3 * 512; i++)
		src[i] = tu_uniform(&seed) * 8.0f;
	int32_t rls[3] = { 0, 0, 2 }, ids[3] = { 250, 251, 100 };
	ck_assert_int_eq(rig_append(&r, 3, rls, ids, src), 0);
	/* reference bytes: the CPU encoder into a one-block pool */
	size_t st1 = strata_main_block_stride(64);
	uint8_t *ref = calloc(1, st1);
	int64_t slots[3] = { 0, 1, 2 };
	strata_main_encode_params e = { src, slots, 3, 64, ref };
	ck_assert_int_eq(strata_k_main_encode_cpu(&e), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_mem_eq(rig_host_entry(&r, rls[i], ids[i], 0), ref + i * 576, 576);
		ck_assert_mem_eq(rig_host_entry(&r, rls[i], ids[i], 1), ref + 64 * 576 + i * 8, 8);
	}
	rig_check_table(&r); /* hot copies equal the written-back host bytes */
	for (int i = 0; i < 3; i++)
		ck_assert_int_ge(r.map[(size_t)rls[i] * c.max_entries + ids[i]], 0);
	strata_hotcache_stats st;
	ck_assert_int_eq(strata_hotcache_stats_get(r.hc, -1, &st), 0);
	ck_assert_uint_eq(st.appended, 3);
	ck_assert_uint_eq(st.bytes_written, 3 * 584);
	/* a step selecting them is all hits */
	int32_t sel[16], rl2 = 0, out[16];
	for (int j = 0; j < 16; j++)
		sel[j] = j < 2 ? ids[j] : -1;
	ck_assert_int_eq(rig_step(&r, 1, 16, sel, &rl2, out), 0);
	ck_assert_int_eq(rig_check_step(&r, 1, 16, sel, &rl2, out, 0), 0);
	ck_assert_int_eq(strata_hotcache_stats_get(r.hc, 0, &st), 0);
	ck_assert_uint_eq(st.hits, 2);
	ck_assert_uint_eq(st.misses, 0);
	free(ref);
	rig_close(&r);
}
END_TEST

/* The residency map a caller reads (strata_hotcache_residency) agrees with the step's
 * output; a step without output (out = NULL) admits exactly what one with output does;
 * the host fence is valid before and after appends. */
START_TEST(residency_without_output)
{
	strata_hotcache_config c = cfg_of(2, 400, 16, 1, 48);
	rig a, b;
	rig_open(&a, STRATA_BACKEND_CPU, &c, 21);
	rig_open(&b, STRATA_BACKEND_CPU, &c, 21);
	ck_assert_int_eq(strata_hotcache_host_fence(a.hc, NULL), 0); /* nothing appended */
	ck_assert_int_eq(strata_hotcache_host_fence(NULL, NULL), -EINVAL);
	const int32_t *map = NULL;
	int stride = 0;
	ck_assert_int_eq(strata_hotcache_residency(a.hc, &map, &stride), 0);
	ck_assert_int_eq(stride, 400);
	ck_assert_int_eq(strata_hotcache_residency(a.hc, NULL, &stride), -EINVAL);
	uint64_t seed = 5;
	int32_t ids[2 * 16], rls[2] = { 0, 1 }, out[2 * 16];
	for (int step = 0; step < 12; step++) {
		for (int i = 0; i < 2 * 16; i++)
			ids[i] = i % 7 == 3 ? -1 : (int32_t)(tu_next(&seed) % 120);
		ck_assert_int_eq(rig_step(&a, 2, 16, ids, rls, out), 0);
		for (int i = 0; i < 2 * 16; i++) /* the map names what the step returned */
			if (ids[i] >= 0)
				ck_assert_int_eq(map[(size_t)rls[i / 16] * stride + ids[i]], out[i]);
		strata_hotcache_batch nb = { 2, 16, ids, rls, NULL }; /* CPU: host pointers */
		ck_assert_int_eq(strata_hotcache_step(b.hc, &nb, NULL), 0);
	}
	const int32_t *mb = NULL;
	ck_assert_int_eq(strata_hotcache_residency(b.hc, &mb, &stride), 0);
	ck_assert_mem_eq(map, mb, sizeof *map * 2 * 400);
	rig_check_table(&b); /* admitted entries hold their host bytes */
	float src[512] = { 1.0f };
	int32_t arl = 1, aid = 300;
	ck_assert_int_eq(rig_append(&a, 1, &arl, &aid, src), 0);
	ck_assert_int_eq(strata_hotcache_host_fence(a.hc, NULL), 0);
	/* settled after a device sync: the next steps still name what they return */
	ck_assert_int_eq(strata_hotcache_settled(NULL), -EINVAL);
	ck_assert_int_eq(strata_dev_sync(a.dev), 0);
	ck_assert_int_eq(strata_hotcache_settled(a.hc), 0);
	ck_assert_int_eq(strata_hotcache_host_fence(a.hc, NULL), 0);
	for (int i = 0; i < 2 * 16; i++)
		ids[i] = i % 5 == 1 ? -1 : (int32_t)(tu_next(&seed) % 120);
	ck_assert_int_eq(rig_step(&a, 2, 16, ids, rls, out), 0);
	for (int i = 0; i < 2 * 16; i++)
		if (ids[i] >= 0)
			ck_assert_int_eq(map[(size_t)rls[i / 16] * stride + ids[i]], out[i]);
	rig_close(&a);
	rig_close(&b);
}
END_TEST

START_TEST(split_rows_and_release)
{
	strata_hotcache_config c = cfg_of(2, 100, 4, 2, 16);
	rig r;
	rig_open(&r, STRATA_BACKEND_CPU, &c, 10);
	int32_t ids[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 }, rl_of[3] = { 0, 1, 0 };
	int32_t out[12];
	ck_assert_int_eq(rig_step(&r, 3, 4, ids, rl_of, out), 0);
	ck_assert_int_eq(strata_hotcache_check(r.hc), -EINVAL);
	int32_t rl_ok[2] = { 1, 1 };
	ck_assert_int_eq(rig_step(&r, 2, 4, ids, rl_ok, out), 0);
	ck_assert_int_eq(rig_check_step(&r, 2, 4, ids, rl_ok, out, 0), 0);
	ck_assert_int_eq(strata_hotcache_check(r.hc), 0);
	ck_assert_int_eq(strata_hotcache_release(r.hc, 1, NULL), 0);
	rig_dump(&r);
	for (int id = 0; id < 100; id++)
		ck_assert_int_eq(r.map[100 + id], -1);
	for (int s = 16; s < 32; s++)
		ck_assert_int_eq(r.owner[s], -1);
	int32_t bad_id[4] = { 1, 100, 2, -1 }, rl1 = 1;
	ck_assert_int_eq(rig_step(&r, 1, 4, bad_id, &rl1, out), 0);
	ck_assert_int_eq(out[1], -1);
	ck_assert_int_eq(strata_hotcache_check(r.hc), -EINVAL);
	rig_close(&r);
}
END_TEST

START_TEST(deterministic)
{
	strata_hotcache_config c = cfg_of(3, 800, 24, 2, 60);
	rig a, b;
	rig_open(&a, STRATA_BACKEND_CPU, &c, 11);
	rig_open(&b, STRATA_BACKEND_CPU, &c, 11);
	strata_selgen *ga[3], *gb[3];
	for (int rl = 0; rl < 3; rl++) {
		strata_selgen_create(STRATA_SELGEN_STRUCTURED, 800, 24, (uint64_t)rl, &ga[rl]);
		strata_selgen_create(STRATA_SELGEN_STRUCTURED, 800, 24, (uint64_t)rl, &gb[rl]);
	}
	uint64_t sa = 1, sb = 1;
	int32_t ids[6 * 24], rl_of[6], out_a[6 * 24], out_b[6 * 24];
	for (int step = 0; step < 12; step++) {
		int rows = rig_batch(&a, ga, 24, &sa, ids, rl_of);
		ck_assert_int_eq(rig_step(&a, rows, 24, ids, rl_of, out_a), 0);
		ck_assert_int_eq(rig_batch(&b, gb, 24, &sb, ids, rl_of), rows);
		ck_assert_int_eq(rig_step(&b, rows, 24, ids, rl_of, out_b), 0);
		ck_assert_mem_eq(out_a, out_b, (size_t)rows * 24 * 4);
		if (step % 3 == 2) {
			int32_t all[3] = { 0, 1, 2 };
			ck_assert_int_eq(rig_predict(&a, 3, all), 0);
			ck_assert_int_eq(rig_predict(&b, 3, all), 0);
		}
	}
	rig_dump(&a);
	rig_dump(&b);
	ck_assert_mem_eq(a.map, b.map, (size_t)3 * 800 * 4);
	ck_assert_mem_eq(a.owner, b.owner, (size_t)3 * 60 * 4);
	ck_assert_mem_eq(a.hand, b.hand, 3 * 4);
	for (int rl = 0; rl < 3; rl++) {
		strata_selgen_destroy(ga[rl]);
		strata_selgen_destroy(gb[rl]);
	}
	rig_close(&a);
	rig_close(&b);
}
END_TEST

/* The target: with the structured generator, on-demand bytes per step <=
 * (1 - overlap with the previous selection) x selected bytes. */
START_TEST(bytes_moved_target)
{
	const int k = 64, n = 4096;
	strata_hotcache_config c = cfg_of(1, n, k, 1, 0);
	rig r;
	rig_open(&r, STRATA_BACKEND_CPU, &c, 12);
	strata_selgen *g;
	ck_assert_int_eq(strata_selgen_create(STRATA_SELGEN_STRUCTURED, n, k, 3, &g), 0);
	int32_t prev[64], cur[64], out[64], rl0 = 0;
	double ov_sum = 0;
	strata_hotcache_stats st;
	uint64_t moved = 0;
	for (int step = 0; step < 40; step++) {
		int cnt = strata_selgen_next(g, cur);
		ck_assert_int_eq(cnt, k);
		ck_assert_int_eq(rig_step(&r, 1, k, cur, &rl0, out), 0);
		ck_assert_int_eq(strata_hotcache_stats_get(r.hc, -1, &st), 0);
		uint64_t step_bytes = st.bytes_moved - moved;
		moved = st.bytes_moved;
		if (step > 0) {
			double ov = strata_selgen_overlap(prev, cur, k);
			ov_sum += ov;
			ck_assert_msg((double)step_bytes <= (1.0 - ov) * k * 584 + 0.5,
				      "step %d: %llu bytes > (1 - %.2f) x %d x 584", step,
				      (unsigned long long)step_bytes, ov, k);
		}
		memcpy(prev, cur, sizeof cur);
	}
	double mean = ov_sum / 39;
	ck_assert_msg(mean >= 0.3 && mean <= 0.6, "structured overlap %.2f", mean);
	strata_selgen_destroy(g);
	rig_close(&r);
}
END_TEST

START_TEST(selgen_shapes)
{
	for (int kind = 0; kind < 2; kind++) {
		strata_selgen *a, *b;
		ck_assert_int_eq(strata_selgen_create(kind, 5000, 100, 77, &a), 0);
		ck_assert_int_eq(strata_selgen_create(kind, 5000, 100, 77, &b), 0);
		int32_t x[100], y[100], prev[100];
		double ov = 0;
		for (int s = 0; s < 30; s++) {
			ck_assert_int_eq(strata_selgen_next(a, x), 100);
			ck_assert_int_eq(strata_selgen_next(b, y), 100);
			ck_assert_mem_eq(x, y, sizeof x);
			for (int i = 0; i < 100; i++) {
				ck_assert_int_ge(x[i], 0);
				ck_assert_int_lt(x[i], 5000);
				if (i)
					ck_assert_int_gt(x[i], x[i - 1]);
			}
			if (s)
				ov += strata_selgen_overlap(prev, x, 100);
			memcpy(prev, x, sizeof x);
		}
		ov /= 29;
		if (kind == STRATA_SELGEN_UNIFORM)
			ck_assert_msg(ov < 0.1, "uniform overlap %.2f", ov);
		else
			ck_assert_msg(ov > 0.3 && ov < 0.6, "structured overlap %.2f", ov);
		strata_selgen_destroy(a);
		strata_selgen_destroy(b);
	}
	strata_selgen *s;
	ck_assert_int_eq(strata_selgen_create(STRATA_SELGEN_STRUCTURED, 10, 16, 1, &s), 0);
	int32_t z[16];
	ck_assert_int_eq(strata_selgen_next(s, z), 10); /* all fit: 0..9 then -1 */
	ck_assert_int_eq(z[9], 9);
	ck_assert_int_eq(z[10], -1);
	strata_selgen_destroy(s);
	ck_assert_int_eq(strata_selgen_create(STRATA_SELGEN_UNIFORM, 0, 4, 1, &s), -EINVAL);
}
END_TEST

START_TEST(bad_config)
{
	strata_dev_config dc = STRATA_DEV_CONFIG_INIT;
	dc.backend = STRATA_BACKEND_CPU;
	strata_dev *dev;
	ck_assert_int_eq(strata_dev_open(&dc, &dev), 0);
	strata_hotcache *hc = NULL;
	strata_hotcache_config c = STRATA_HOTCACHE_CONFIG_INIT;
	ck_assert_int_eq(strata_hotcache_create(dev, &c, &hc), -EINVAL);
	c = cfg_of(1, 100, 8, 1, 0);
	c.size = 4;
	ck_assert_int_eq(strata_hotcache_create(dev, &c, &hc), -EINVAL);
	ck_assert_ptr_null(hc);
	c.size = sizeof c;
	ck_assert_int_eq(strata_hotcache_create(dev, &c, &hc), 0);
	strata_hotcache_config got;
	ck_assert_int_eq(strata_hotcache_get_config(hc, &got), 0);
	ck_assert_int_eq(got.budget, 16);
	uint8_t *misaligned = (uint8_t *)8;
	ck_assert_int_eq(strata_hotcache_bind_host_blocks(hc, 0, &misaligned, 1, 10, NULL), -EINVAL);
	int32_t x;
	strata_hotcache_batch b = { 1, 9, &x, &x, &x }; /* k > topk */
	ck_assert_int_eq(strata_hotcache_step(hc, &b, NULL), -EINVAL);
	strata_hotcache_destroy(hc);
	strata_hotcache_destroy(NULL);
	strata_dev_close(dev);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hotcache");
	TCase *tc = tcase_create("cpu");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, random_steps, 0, 6);
	tcase_add_test(tc, repeat_is_all_hits);
	tcase_add_test(tc, overflow_is_bounded);
	tcase_add_test(tc, never_evicts_selected);
	tcase_add_test(tc, predict_and_use);
	tcase_add_test(tc, append_writes_back);
	tcase_add_test(tc, residency_without_output);
	tcase_add_test(tc, split_rows_and_release);
	tcase_add_test(tc, deterministic);
	tcase_add_test(tc, bytes_moved_target);
	tcase_add_test(tc, selgen_shapes);
	tcase_add_test(tc, bad_config);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
