/* Reference engine + prefix store on the GPU: a request restored from a stored prefix
 * decodes bit-identically to the uninterrupted run (tiny and flash presets,
 * ALL_RESIDENT and HISPARSE, restore from host copies and from the NVMe store after a
 * reopen; the store is opened on the engine's device, so its restore buffers are
 * pinned). */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "engine/engine.h"

enum { N = 1280, STEPS = 8, SEED = 21 };

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static strata_ref_engine *make(strata_dev *d, const char *model, strata_ref_mode mode)
{
	strata_ref_config c = STRATA_REF_CONFIG_INIT;
	ck_assert_int_eq(strata_model_preset(model, &c.model), 0);
	c.mode = mode;
	c.n_req = 1;
	c.max_ctx = N + STEPS;
	c.seed = SEED;
	strata_ref_engine *e = NULL;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), 0);
	return e;
}

static strata_prefix *open_store(strata_dev *d, const char *dir, const strata_model *m,
				 uint64_t budget_host)
{
	strata_prefix_config c = STRATA_PREFIX_CONFIG_INIT;
	c.dir = dir;
	c.model = m;
	c.dev = d;
	c.budget_host = budget_host;
	c.store_bytes = 512ull << 20;
	strata_prefix *p = NULL;
	ck_assert_int_eq(strata_prefix_open(&c, &p), 0);
	return p;
}

static void resume(strata_dev *d, const char *model, strata_ref_mode mode, strata_prefix *pfx,
		   const uint64_t *want, int nl, uint64_t cache)
{
	strata_ref_engine *c = make(d, model, mode);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, strata_ref_engine_tokens(c, 0, NULL), N, &hit), 0);
	ck_assert_uint_eq(hit.tokens, N);
	uint64_t t0 = strata_now_ns();
	ck_assert_int_eq(strata_ref_engine_restore(c, 0, pfx, &hit, 1, 0), 0);
	double ms = (double)(strata_now_ns() - t0) / 1e6;
	ck_assert_uint_eq(strata_ref_engine_cache_hash(c, 0), cache);
	for (int i = 0; i < STEPS; i++)
		ck_assert_int_eq(strata_ref_engine_decode_step(c), 0);
	int ns, l2;
	const uint64_t *h = strata_ref_engine_hashes(c, &ns, &l2);
	ck_assert_int_eq(ns, STEPS);
	ck_assert_int_eq(l2, nl);
	for (int i = 0; i < STEPS * nl; i++)
		ck_assert_msg(h[i] == want[i], "%s mode %d: step %d layer %d differs", model,
			      (int)mode, i / nl, i % nl);
	printf("%s mode %d: restore %.2f ms, identical\n", model, (int)mode, ms);
	strata_ref_engine_destroy(c);
}

static void run(const char *model)
{
	strata_dev_config dc = STRATA_DEV_CONFIG_INIT;
	dc.backend = STRATA_BACKEND_GPU;
	strata_dev *d = NULL;
	ck_assert_int_eq(strata_dev_open(&dc, &d), 0);
	strata_model m = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset(model, &m), 0);
	char dir[] = "/tmp/strata-gpu-resume-XXXXXX", dir2[] = "/tmp/strata-gpu-resume-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_ptr_nonnull(mkdtemp(dir2));
	strata_prefix *nv = open_store(d, dir, &m, 0), *hc = open_store(d, dir2, &m, 1ull << 30);
	uint64_t *want[2], cache[2];
	int nl = 0;
	for (int md = 0; md < 2; md++) {
		strata_ref_engine *a = make(d, model, (strata_ref_mode)md);
		ck_assert_int_eq(strata_ref_engine_prefill(a, 0, N), 0);
		cache[md] = strata_ref_engine_cache_hash(a, 0);
		ck_assert_int_eq(strata_ref_engine_snapshot(a, 0, nv), 0);
		ck_assert_int_eq(strata_ref_engine_snapshot(a, 0, hc), 0);
		for (int i = 0; i < STEPS; i++)
			ck_assert_int_eq(strata_ref_engine_decode_step(a), 0);
		int ns;
		const uint64_t *h = strata_ref_engine_hashes(a, &ns, &nl);
		want[md] = malloc(sizeof(uint64_t) * STEPS * nl);
		memcpy(want[md], h, sizeof(uint64_t) * STEPS * nl);
		strata_ref_engine_destroy(a);
	}
	ck_assert_uint_eq(cache[0], cache[1]);
	ck_assert_mem_eq(want[0], want[1], sizeof(uint64_t) * STEPS * nl);
	resume(d, model, STRATA_REF_ALL_RESIDENT, hc, want[0], nl, cache[0]);
	resume(d, model, STRATA_REF_HISPARSE, hc, want[1], nl, cache[1]);
	strata_prefix_close(nv);
	nv = open_store(d, dir, &m, 0);
	resume(d, model, STRATA_REF_ALL_RESIDENT, nv, want[0], nl, cache[0]);
	resume(d, model, STRATA_REF_HISPARSE, nv, want[1], nl, cache[1]);
	strata_prefix_close(nv);
	strata_prefix_close(hc);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	nftw(dir2, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(want[0]);
	free(want[1]);
	strata_dev_close(d);
}

START_TEST(resume_tiny)
{
	run("tiny");
}
END_TEST

START_TEST(resume_flash)
{
	run("flash");
}
END_TEST

int main(void)
{
	tu_require_gpu();
	Suite *s = suite_create("engine_gpu_prefix_resume");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, resume_tiny);
	tcase_add_test(tc, resume_flash);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
