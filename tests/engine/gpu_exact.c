/* Reference engine on the GPU: HiSparse and swap-in bit-identical to all-resident
 * (tiny and flash presets), and GPU vs CPU within the attention tolerance. */
#include <check.h>
#include <math.h>

#include "testutil.h"
#include "engine/engine.h"

static strata_dev *open_dev(strata_backend b, int priority_main)
{
	strata_dev_config c = STRATA_DEV_CONFIG_INIT;
	c.backend = b;
	c.priority_main = priority_main;
	strata_dev *d = NULL;
	ck_assert_int_eq(strata_dev_open(&c, &d), 0);
	return d;
}

/* modes 3 - 6: HISPARSE with direct_misses, misses read in place by attention (3),
 * staged on the device by the map kernel (4), staged early, inside the indexer call
 * while top-k runs (5), or AUTO's choice among those (6) */
enum { NM = 7 };
static strata_ref_engine *make(strata_dev *d, const char *model, strata_ref_mode mode,
			       int n_req, int max_ctx, int hot, int keep)
{
	strata_ref_config c = STRATA_REF_CONFIG_INIT;
	ck_assert_int_eq(strata_model_preset(model, &c.model), 0);
	c.mode = (int)mode >= 3 ? STRATA_REF_HISPARSE : mode;
	c.direct_misses = (int)mode == 3   ? STRATA_REF_MISS_IN_PLACE
			  : (int)mode == 4 ? STRATA_REF_MISS_STAGED
			  : (int)mode == 5 ? STRATA_REF_MISS_EARLY
			  : (int)mode == 6 ? STRATA_REF_MISS_AUTO
					   : STRATA_REF_MISS_COPY;
	c.n_req = n_req;
	c.max_ctx = max_ctx;
	c.hot_slots = hot;
	c.seed = 21;
	c.keep_outputs = keep;
	strata_ref_engine *e = NULL;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), 0);
	return e;
}

/* prio: the device's NULL stream is its own high-priority stream (kernels.h
 * priority_main), so the side streams' work is scheduled behind the compute stream's */
static void modes(const char *model, int n_req, int prefill, int fill, int steps, int hot,
		  int prio)
{
	strata_dev *d = open_dev(STRATA_BACKEND_GPU, prio);
	uint64_t dg[NM];
	int ns = 0, nl = 0;
	uint64_t *h0 = NULL;
	for (int m = 0; m < NM; m++) {
		strata_ref_engine *e = make(d, model, (strata_ref_mode)m, n_req,
					    prefill + fill + steps + 8, hot, 0);
		for (int r = 0; r < n_req; r++) {
			if (fill)
				ck_assert_int_eq(strata_ref_engine_fill(e, r, fill - 64 * r), 0);
			else
				ck_assert_int_eq(strata_ref_engine_prefill(e, r, prefill - 97 * r), 0);
		}
		for (int s = 0; s < steps; s++)
			ck_assert_int_eq(strata_ref_engine_decode_step(e), 0);
		const uint64_t *h = strata_ref_engine_hashes(e, &ns, &nl);
		if (m == 0) {
			h0 = malloc(sizeof *h0 * ns * nl);
			memcpy(h0, h, sizeof *h0 * ns * nl);
		} else {
			for (int i = 0; i < ns * nl; i++)
				ck_assert_msg(h[i] == h0[i], "%s mode %d: step %d layer %d differs", model,
					      m, i / nl, i % nl);
		}
		dg[m] = strata_ref_engine_digest(e);
		strata_ref_stats st;
		strata_ref_engine_stats(e, &st);
		if (m >= 3 && m <= 5)
			ck_assert_int_eq(st.miss_path, m == 3   ? STRATA_REF_MISS_IN_PLACE
						       : m == 4 ? STRATA_REF_MISS_STAGED
								: STRATA_REF_MISS_EARLY);
		if (m == 5 && st.misses > 0) /* the early staging took misses */
			ck_assert_uint_gt(st.early_misses, 0);
		if (m == 6) { /* AUTO: staged when attention reads in several head groups,
			       * early when the staging CTAs match the filter's (engine.h) */
			strata_model mo;
			ck_assert_int_eq(strata_model_preset(model, &mo), 0);
			const int mc = prefill + fill + steps + 8;
			const int cap4 = (mc + STRATA_BLOCK_TOKENS - 1) / STRATA_BLOCK_TOKENS * 64;
			strata_attn_params ap = { .n_rows = n_req, .heads = mo.n_heads,
						  .n_idx = mo.index_topk, .n_win = 128 };
			strata_attn_prestage_params shape = { .max_ctas = 0 };
			strata_indexer_params ip = { .heads = mo.index_heads, .topk = mo.index_topk,
						     .n_req = n_req, .n_rows = n_req, .max_rows = 1,
						     .max_limit = cap4, .stage = &shape };
			int fx = 0;
			const int g = strata_k_attn_head_groups(d, &ap);
			const int sx = strata_k_indexer_stage_ctas(d, &ip, &fx);
			ck_assert_int_ge(g, 1);
			ck_assert_int_ge(sx, 1);
			ck_assert_int_eq(st.miss_path, g == 1	       ? STRATA_REF_MISS_IN_PLACE
						       : sx >= fx ? STRATA_REF_MISS_EARLY
								  : STRATA_REF_MISS_STAGED);
		}
		strata_ref_engine_destroy(e);
	}
	ck_assert_uint_eq(dg[0], dg[1]);
	ck_assert_uint_eq(dg[0], dg[2]);
	ck_assert_uint_eq(dg[0], dg[3]);
	ck_assert_uint_eq(dg[0], dg[4]);
	ck_assert_uint_eq(dg[0], dg[5]);
	ck_assert_uint_eq(dg[0], dg[6]);
	free(h0);
	strata_dev_close(d);
}

START_TEST(tiny_modes_identical) { modes("tiny", 4, 1500, 0, 32, 80, 1); }
END_TEST
START_TEST(flash_modes_identical_prefill) { modes("flash", 2, 2600, 0, 8, 0, 0); }
END_TEST
START_TEST(flash_modes_identical_fill) { modes("flash", 4, 0, 32768, 16, 0, 1); }
END_TEST

/* GPU vs CPU: same caches (the host math and the format kernels are bit-exact), the
 * indexer and attention differ only in summation order. */
START_TEST(gpu_vs_cpu)
{
	strata_dev *g = open_dev(STRATA_BACKEND_GPU, 0), *c = open_dev(STRATA_BACKEND_CPU, 0);
	strata_ref_engine *eg = make(g, "tiny", STRATA_REF_HISPARSE, 2, 2048, 0, 1);
	strata_ref_engine *ec = make(c, "tiny", STRATA_REF_ALL_RESIDENT, 2, 2048, 0, 1);
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(strata_ref_engine_prefill(eg, r, 1200 + 100 * r), 0);
		ck_assert_int_eq(strata_ref_engine_prefill(ec, r, 1200 + 100 * r), 0);
	}
	ck_assert_uint_eq(strata_ref_engine_cache_hash(eg, 0), strata_ref_engine_cache_hash(ec, 0));
	int sel_diff = 0;
	for (int s = 0; s < 8; s++) {
		ck_assert_int_eq(strata_ref_engine_decode_step(eg), 0);
		ck_assert_int_eq(strata_ref_engine_decode_step(ec), 0);
		for (int l = 0; l < 6; l++) {
			const int32_t *sg = strata_ref_engine_selection(eg, l, 0);
			const int32_t *sc = strata_ref_engine_selection(ec, l, 0);
			if (sg && memcmp(sg, sc, sizeof(int32_t) * 64)) {
				sel_diff++; /* a near-tie scored in a different order */
				continue;
			}
			const float *og = strata_ref_engine_output(eg, l);
			const float *oc = strata_ref_engine_output(ec, l);
			ck_assert_ptr_nonnull(og);
			size_t n = (size_t)2 * 8 * 512;
			float mx = 0;
			for (size_t i = 0; i < n; i++)
				mx = fmaxf(mx, fabsf(oc[i]));
			for (size_t i = 0; i < n; i++)
				ck_assert_msg(fabsf(og[i] - oc[i]) <= 1e-4f * mx,
					      "step %d layer %d i %zu: gpu %g cpu %g", s, l, i, og[i], oc[i]);
		}
	}
	ck_assert_int_le(sel_diff, 2);
	strata_ref_engine_destroy(eg);
	strata_ref_engine_destroy(ec);
	strata_dev_close(g);
	strata_dev_close(c);
}
END_TEST

int main(void)
{
	tu_require_gpu();
	Suite *s = suite_create("gpu_engine_exact");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, tiny_modes_identical);
	tcase_add_test(tc, flash_modes_identical_prefill);
	tcase_add_test(tc, flash_modes_identical_fill);
	tcase_add_test(tc, gpu_vs_cpu);
	suite_add_tcase(s, tc);
	/* No fork: a CUDA context does not survive fork(), and the parent has one. */
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int rc = srunner_ntests_failed(sr) ? EXIT_FAILURE : EXIT_SUCCESS;
	srunner_free(sr);
	return rc;
}
