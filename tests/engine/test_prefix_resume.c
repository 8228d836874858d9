/* Reference engine + prefix store on the CPU backend: a request restored from a stored
 * prefix decodes exactly as the uninterrupted run (ALL_RESIDENT and HISPARSE, NVMe
 * store across a close / reopen, in-memory store), a DCP restore gives each rank its
 * pages, and the key chain rejects what is not the same prefix. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "engine/engine.h"

enum { N = 1280, STEPS = 8, MAX_CTX = 1536, SEED = 21 };

static strata_dev *open_cpu(void)
{
	strata_dev_config c = STRATA_DEV_CONFIG_INIT;
	c.backend = STRATA_BACKEND_CPU;
	strata_dev *d = NULL;
	ck_assert_int_eq(strata_dev_open(&c, &d), 0);
	return d;
}

static strata_ref_engine *make(strata_dev *d, strata_ref_mode mode, int n_req, uint64_t seed)
{
	strata_ref_config c = STRATA_REF_CONFIG_INIT;
	ck_assert_int_eq(strata_model_preset("tiny", &c.model), 0);
	c.mode = mode;
	c.n_req = n_req;
	c.max_ctx = MAX_CTX;
	c.hot_slots = 80; /* barely above top-k: the restored run misses and evicts */
	c.seed = seed;
	strata_ref_engine *e = NULL;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), 0);
	return e;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static char *tmpdir(void)
{
	char tmpl[] = "/tmp/strata-resume-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	return strdup(tmpl);
}

static void rmdir_all(char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

static strata_prefix *open_store(const char *dir, const strata_model *m, unsigned flags,
				 uint64_t budget_host)
{
	strata_prefix_config c = STRATA_PREFIX_CONFIG_INIT;
	c.dir = dir;
	c.model = m;
	c.checkpoint_blocks = 4;
	c.budget_host = budget_host;
	c.store_bytes = 64ull << 20;
	c.flags = flags;
	strata_prefix *p = NULL;
	ck_assert_int_eq(strata_prefix_open(&c, &p), 0);
	return p;
}

static strata_model tiny(void)
{
	strata_model m = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset("tiny", &m), 0);
	return m;
}

/* The uninterrupted run: prefill N, store the prefix into two stores (the engine is
 * then also "B"), decode STEPS. Returns the engine; *cache is its cache hash at N. */
static strata_ref_engine *reference(strata_dev *d, strata_ref_mode mode, strata_prefix *pfx,
				    strata_prefix *pfx2, uint64_t *cache)
{
	strata_ref_engine *a = make(d, mode, 1, SEED);
	ck_assert_int_eq(strata_ref_engine_prefill(a, 0, N), 0);
	*cache = strata_ref_engine_cache_hash(a, 0);
	ck_assert_uint_ne(*cache, 0);
	ck_assert_int_eq(strata_ref_engine_snapshot(a, 0, pfx), 0);
	ck_assert_int_eq(strata_ref_engine_snapshot(a, 0, pfx2), 0);
	/* Storing reads the caches and changes nothing. */
	ck_assert_uint_eq(strata_ref_engine_cache_hash(a, 0), *cache);
	for (int i = 0; i < STEPS; i++)
		ck_assert_int_eq(strata_ref_engine_decode_step(a), 0);
	return a;
}

/* A fresh engine looks its tokens up, restores, and must match a step for step. */
static void resume_and_compare(strata_dev *d, strata_ref_mode mode, strata_prefix *pfx,
			       const strata_ref_engine *a, uint64_t cache_a)
{
	strata_ref_engine *c = make(d, mode, 1, SEED);
	int n = 0;
	const uint32_t *tok = strata_ref_engine_tokens(c, 0, &n);
	ck_assert_ptr_nonnull(tok);
	ck_assert_int_eq(n, MAX_CTX);
	strata_prefix_hit hit;
	/* The whole stream as the prompt: the deepest stored checkpoint is at N. */
	ck_assert_int_eq(strata_prefix_lookup(pfx, tok, (uint64_t)n, &hit), 0);
	ck_assert_uint_eq(hit.tokens, N);
	ck_assert_uint_eq(hit.pages, N / 256);
	uint64_t t0 = strata_now_ns();
	ck_assert_int_eq(strata_ref_engine_restore(c, 0, pfx, &hit, 1, 0), 0);
	uint64_t t1 = strata_now_ns();
	ck_assert_int_eq(strata_ref_engine_length(c, 0), N);
	/* Every cache byte and the compressor state are back. */
	ck_assert_uint_eq(strata_ref_engine_cache_hash(c, 0), cache_a);
	/* Not empty twice. */
	ck_assert_int_eq(strata_ref_engine_restore(c, 0, pfx, &hit, 1, 0), -EINVAL);
	for (int i = 0; i < STEPS; i++)
		ck_assert_int_eq(strata_ref_engine_decode_step(c), 0);
	int na, la, nc, lc;
	const uint64_t *ha = strata_ref_engine_hashes(a, &na, &la);
	const uint64_t *hc = strata_ref_engine_hashes(c, &nc, &lc);
	ck_assert_int_eq(na, STEPS);
	ck_assert_int_eq(nc, STEPS);
	ck_assert_int_eq(la, lc);
	for (int i = 0; i < na * la; i++)
		ck_assert_msg(ha[i] == hc[i], "mode %d: step %d layer %d differs after restore",
			      (int)mode, i / la, i % la);
	/* The hashes are not vacuous: they move from step to step. */
	ck_assert_uint_ne(ha[1], ha[la + 1]);
	/* The selection after the restore is a real top-k over the restored entries. */
	const int32_t *sel = strata_ref_engine_selection(c, 1, 0);
	ck_assert_ptr_nonnull(sel);
	ck_assert_int_ge(sel[63], 64);
	printf("mode %d: restore %.2f ms, outputs identical over %d steps x %d layers\n",
	       (int)mode, (double)(t1 - t0) / 1e6, nc, lc);
	strata_ref_engine_destroy(c);
}

/* The uninterrupted runs (both modes) are built once and stored into three stores:
 * - NVMe, stored from both modes (the second store finds the blocks already there:
 *   the pages do not depend on the mode), closed and reopened (no host copy survives:
 *   every page comes from the store file), resumed in both modes;
 * - in-memory pages (records are dropped at reopen, so no reopen), stored from
 *   HISPARSE, resumed in ALL_RESIDENT;
 * - NVMe with host copies, stored from ALL_RESIDENT, resumed in HISPARSE (host path,
 *   restored in place into the host tier). */
START_TEST(resume_matches_uninterrupted)
{
	strata_dev *d = open_cpu();
	strata_model m = tiny();
	char *dir[3] = { tmpdir(), tmpdir(), tmpdir() };
	strata_prefix *nv = open_store(dir[0], &m, 0, 0);
	strata_prefix *mem = open_store(dir[1], &m, STRATA_PREFIX_MEMORY, 0);
	strata_prefix *hc = open_store(dir[2], &m, 0, 64ull << 20);
	uint64_t ca, ch;
	strata_ref_engine *a = reference(d, STRATA_REF_ALL_RESIDENT, nv, hc, &ca);
	strata_ref_engine *h = reference(d, STRATA_REF_HISPARSE, nv, mem, &ch);
	ck_assert_uint_eq(ca, ch);
	ck_assert_uint_eq(strata_ref_engine_digest(a), strata_ref_engine_digest(h));
	strata_prefix_stats st;
	strata_prefix_stats_get(nv, &st);
	ck_assert_uint_eq(st.blocks, N / 256);
	ck_assert_uint_eq(st.checkpoints, 1);
	strata_prefix_close(nv);
	nv = open_store(dir[0], &m, 0, 0);
	resume_and_compare(d, STRATA_REF_ALL_RESIDENT, nv, a, ca);
	resume_and_compare(d, STRATA_REF_HISPARSE, nv, h, ch);
	strata_prefix_stats_get(nv, &st);
	ck_assert_uint_eq(st.restores, 2);
	ck_assert_uint_eq(st.host_bytes, 0);
	resume_and_compare(d, STRATA_REF_ALL_RESIDENT, mem, h, ch);
	resume_and_compare(d, STRATA_REF_HISPARSE, hc, a, ca);
	strata_prefix_stats_get(hc, &st);
	ck_assert_uint_gt(st.host_bytes, 0);
	strata_prefix_close(nv);
	strata_prefix_close(mem);
	strata_prefix_close(hc);
	strata_ref_engine_destroy(a);
	strata_ref_engine_destroy(h);
	for (int i = 0; i < 3; i++)
		rmdir_all(dir[i]);
	strata_dev_close(d);
}
END_TEST

/* Under DCP with P' = 2 each rank's engine gets exactly the pages p with p % 2 ==
 * rank (the rest stay zero), and the two together are the P' = 1 restore. */
START_TEST(dcp_restore_splits_pages)
{
	strata_dev *d = open_cpu();
	strata_model m = tiny();
	char *dir = tmpdir();
	strata_prefix *pfx = open_store(dir, &m, STRATA_PREFIX_MEMORY, 0);
	strata_ref_engine *b = make(d, STRATA_REF_ALL_RESIDENT, 1, SEED);
	ck_assert_int_eq(strata_ref_engine_prefill(b, 0, N), 0);
	ck_assert_int_eq(strata_ref_engine_snapshot(b, 0, pfx), 0);
	const uint32_t *tok = strata_ref_engine_tokens(b, 0, NULL);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, tok, N, &hit), 0);
	ck_assert_uint_eq(hit.tokens, N);
	strata_ref_engine *one = make(d, STRATA_REF_HISPARSE, 1, SEED);
	ck_assert_int_eq(strata_ref_engine_restore(one, 0, pfx, &hit, 1, 0), 0);
	strata_ref_engine *rk[2];
	for (int r = 0; r < 2; r++) {
		/* Two requests: the second's tokens differ, so the hit is not its prefix. */
		rk[r] = make(d, r ? STRATA_REF_HISPARSE : STRATA_REF_ALL_RESIDENT, 2, SEED);
		ck_assert_int_eq(strata_ref_engine_restore(rk[r], 1, pfx, &hit, 2, r), -EINVAL);
		ck_assert_int_eq(strata_ref_engine_restore(rk[r], 0, pfx, &hit, 2, 2), -EINVAL);
		ck_assert_int_eq(strata_ref_engine_restore(rk[r], 0, pfx, &hit, 2, r), 0);
		ck_assert_int_eq(strata_ref_engine_length(rk[r], 0), N);
	}
	size_t max_pb = strata_prefix_page_bytes(&m, STRATA_PFX_C4_MAIN);
	uint8_t *want = malloc(max_pb), *got = malloc(max_pb), *zero = calloc(1, max_pb);
	int compared = 0;
	for (int l = 0; l < m.n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			size_t pb = strata_prefix_page_bytes(&m, (strata_prefix_family)f);
			if (!strata_prefix_has(&m, l, (strata_prefix_family)f)) {
				ck_assert_int_eq(strata_ref_engine_read_page(one, 0, l, (strata_prefix_family)f, 0, got), -EINVAL);
				continue;
			}
			for (uint32_t p = 0; p < hit.pages; p++) {
				ck_assert_int_eq(strata_ref_engine_read_page(b, 0, l, (strata_prefix_family)f, p, want), 0);
				ck_assert_int_eq(strata_ref_engine_read_page(one, 0, l, (strata_prefix_family)f, p, got), 0);
				ck_assert_msg(!memcmp(want, got, pb), "P=1: layer %d family %d page %u", l, f, p);
				ck_assert_msg(memcmp(want, zero, pb), "layer %d family %d page %u empty", l, f, p);
				for (int r = 0; r < 2; r++) {
					ck_assert_int_eq(strata_ref_engine_read_page(rk[r], 0, l, (strata_prefix_family)f, p, got), 0);
					const uint8_t *expect = (int)(p % 2) == r ? want : zero;
					ck_assert_msg(!memcmp(expect, got, pb), "rank %d: layer %d family %d page %u",
						      r, l, f, p);
				}
				compared++;
			}
		}
	ck_assert_int_eq(compared, (3 * 2 + 2) * (N / 256)); /* tiny: 3 CSA x 2, 2 HCA */
	free(want);
	free(got);
	free(zero);
	strata_ref_engine_destroy(rk[0]);
	strata_ref_engine_destroy(rk[1]);
	strata_ref_engine_destroy(one);
	strata_ref_engine_destroy(b);
	strata_prefix_close(pfx);
	rmdir_all(dir);
	strata_dev_close(d);
}
END_TEST

/* Another token sequence misses; a length off the 256 grid is refused. */
START_TEST(misses_and_bad_lengths)
{
	strata_dev *d = open_cpu();
	strata_model m = tiny();
	char *dir = tmpdir();
	strata_prefix *pfx = open_store(dir, &m, STRATA_PREFIX_MEMORY, 0);
	strata_ref_engine *b = make(d, STRATA_REF_ALL_RESIDENT, 2, SEED);
	ck_assert_int_eq(strata_ref_engine_prefill(b, 0, 1000), 0);
	ck_assert_int_eq(strata_ref_engine_snapshot(b, 0, pfx), -EINVAL); /* 1000 % 256 */
	ck_assert_int_eq(strata_ref_engine_snapshot(b, 1, pfx), -EINVAL); /* empty */
	ck_assert_int_eq(strata_ref_engine_prefill(b, 0, 24), 0);         /* 1024 */
	ck_assert_int_eq(strata_ref_engine_snapshot(b, 0, pfx), 0);
	int n;
	const uint32_t *t0 = strata_ref_engine_tokens(b, 0, &n);
	const uint32_t *t1 = strata_ref_engine_tokens(b, 1, NULL);
	ck_assert_ptr_null(strata_ref_engine_tokens(b, 2, NULL));
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, t0, 1024, &hit), 0);
	ck_assert_uint_eq(hit.tokens, 1024);
	/* Request 1's stream: another sequence entirely. */
	ck_assert_int_eq(strata_prefix_lookup(pfx, t1, 1024, &hit), 0);
	ck_assert_uint_eq(hit.tokens, 0);
	/* The same engine seed and request in a fresh engine: the same tokens. */
	strata_ref_engine *c = make(d, STRATA_REF_ALL_RESIDENT, 1, SEED);
	ck_assert_mem_eq(strata_ref_engine_tokens(c, 0, NULL), t0, sizeof(uint32_t) * 1024);
	/* Another seed: other tokens, a miss. */
	strata_ref_engine *o = make(d, STRATA_REF_ALL_RESIDENT, 1, SEED + 1);
	ck_assert_int_eq(strata_prefix_lookup(pfx, strata_ref_engine_tokens(o, 0, NULL), 1024, &hit), 0);
	ck_assert_uint_eq(hit.tokens, 0);
	/* One token changed inside the last block: the only checkpoint (at 1024) is off the
	 * prompt's chain, so nothing is usable. */
	uint32_t *mod = malloc(sizeof(uint32_t) * 1024);
	memcpy(mod, t0, sizeof(uint32_t) * 1024);
	mod[900] ^= 1;
	ck_assert_int_eq(strata_prefix_lookup(pfx, mod, 1024, &hit), 0);
	ck_assert_uint_eq(hit.tokens, 0);
	/* A prompt shorter than the stored entry stops before its checkpoint: a miss. */
	ck_assert_int_eq(strata_prefix_lookup(pfx, t0, 1023, &hit), 0);
	ck_assert_uint_eq(hit.tokens, 0);
	/* The store itself refuses a count off the grid. */
	strata_prefix_snapshot snap = STRATA_PREFIX_SNAPSHOT_INIT;
	snap.n_pages = 4;
	ck_assert_int_eq(strata_prefix_store(pfx, t0, 1000, &snap), -EINVAL);
	/* A forged hit off the grid, or past max_ctx, is refused before any work. */
	ck_assert_int_eq(strata_prefix_lookup(pfx, t0, 1024, &hit), 0);
	strata_prefix_hit bad = hit;
	bad.tokens = 1000;
	ck_assert_int_eq(strata_ref_engine_restore(c, 0, pfx, &bad, 1, 0), -EINVAL);
	ck_assert_int_eq(strata_ref_engine_restore(c, 0, pfx, &hit, 0, 0), -EINVAL);
	ck_assert_int_eq(strata_ref_engine_restore(c, 0, pfx, &hit, 1, 0), 0);
	strata_ref_engine_destroy(o);
	strata_ref_engine_destroy(c);
	strata_ref_engine_destroy(b);
	free(mod);
	strata_prefix_close(pfx);
	rmdir_all(dir);
	strata_dev_close(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("engine_prefix_resume");
	TCase *tc = tcase_create("cpu");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, resume_matches_uninterrupted);
	tcase_add_test(tc, dcp_restore_splits_pages);
	tcase_add_test(tc, misses_and_bad_lengths);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
