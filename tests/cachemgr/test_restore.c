/* Prefix restore: into the caller's memory (reused across restores, partly given),
 * from host runs, from the store and from both at once, under DCP, through the staging
 * window for device-bound pages, and the data directory created with its parents. */
#include "cachemgr/pfx_fixture.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>

static strata_model tiny(void)
{
	strata_model m = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset("tiny", &m), 0);
	return m;
}

static size_t blk_bytes(const strata_model *m)
{
	size_t b = 0;
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
			if (strata_prefix_has(m, l, (strata_prefix_family)f))
				b += strata_prefix_page_bytes(m, (strata_prefix_family)f);
	return b;
}

/* Caller memory for every family of every layer (CPU backend: device memory is host
 * memory), filled with junk so that a restore must overwrite all of it. */
static void give_into(const strata_model *m, uint32_t pages, strata_prefix_restored *out)
{
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			if (!strata_prefix_has(m, l, (strata_prefix_family)f))
				continue;
			size_t b = strata_prefix_page_bytes(m, (strata_prefix_family)f) * pages;
			ck_assert_int_eq(posix_memalign(&out->into[l][f], 4096, b ? b : 1), 0);
			memset(out->into[l][f], 0xee, b);
		}
	size_t sb = strata_prefix_state_bytes(m);
	ck_assert_uint_eq(sb, fx_state_bytes(m));
	ck_assert_int_eq(posix_memalign(&out->into_state, 4096, sb), 0);
	memset(out->into_state, 0xee, sb);
}

static void take_into(strata_prefix_restored *out)
{
	for (int l = 0; l < STRATA_MAX_LAYERS; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			free(out->into[l][f]);
			out->into[l][f] = NULL;
		}
	free(out->into_state);
	out->into_state = NULL;
}

/* Restore s's hit onto (P, rank) and check every byte and the byte accounting. */
static void restore_check(strata_prefix *pfx, const fx_seq *s, const strata_prefix_hit *hit,
			  int P, int rank, strata_prefix_restored *out, uint64_t *from_host)
{
	const strata_model *m = &s->m;
	ck_assert_int_eq(strata_prefix_restore(pfx, hit, P, rank, out), 0);
	ck_assert_int_eq(fx_check_restored(s, out), 0);
	ck_assert_uint_eq(out->n_pages, strata_prefix_rank_pages(hit, P, rank));
	ck_assert_uint_eq(out->bytes_from_host + out->bytes_from_nvme,
			  (uint64_t)out->n_pages * blk_bytes(m));
	if (from_host)
		*from_host = out->bytes_from_host;
}

START_TEST(rank_pages_and_state_bytes)
{
	strata_prefix_hit hit = { 10 * 256, 10, { 0 } };
	ck_assert_uint_eq(strata_prefix_rank_pages(&hit, 1, 0), 10);
	ck_assert_uint_eq(strata_prefix_rank_pages(&hit, 3, 0), 4);
	ck_assert_uint_eq(strata_prefix_rank_pages(&hit, 3, 2), 3);
	ck_assert_uint_eq(strata_prefix_rank_pages(&hit, 16, 12), 0);
	ck_assert_uint_eq(strata_prefix_rank_pages(&hit, 0, 0), 0);
	ck_assert_uint_eq(strata_prefix_rank_pages(&hit, 2, 2), 0);
	strata_model m = tiny();
	size_t want = 0;
	for (int l = 0; l < m.n_layers; l++)
		want += strata_prefix_ring_bytes(&m) + strata_prefix_comp_bytes(&m, l);
	ck_assert_uint_eq(strata_prefix_state_bytes(&m), want);
}
END_TEST

/* Into the caller's memory, from the store (host budget 0) and from host runs, P = 1
 * and P = 3; the same struct restored into again after release. */
START_TEST(into_caller_memory)
{
	strata_model m = tiny();
	for (int with_host = 0; with_host < 2; with_host++) {
		char *dir = fx_tmpdir();
		fx_seq *s = fx_seq_make(&m, 10, 0, 31, 32, 4);
		strata_prefix *pfx = NULL;
		ck_assert_int_eq(fx_open(dir, &m, 0, with_host ? 64ull << 20 : 0, &pfx), 0);
		ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 10 * 256, &s->snap), 0);
		strata_prefix_hit hit;
		ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 10 * 256, &hit), 0);
		ck_assert_uint_eq(hit.pages, 10);
		for (int P = 1; P <= 3; P += 2)
			for (int rank = 0; rank < P; rank++) {
				strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
				give_into(&m, strata_prefix_rank_pages(&hit, P, rank), &out);
				void *keep = out.into[1][STRATA_PFX_C4_MAIN], *kst = out.into_state;
				uint64_t fh = 0;
				for (int again = 0; again < 2; again++) {
					restore_check(pfx, s, &hit, P, rank, &out, &fh);
					ck_assert_uint_eq(fh, with_host ? out.bytes_from_host + out.bytes_from_nvme : 0);
					ck_assert_ptr_eq(out.pages[1][STRATA_PFX_C4_MAIN], keep);
					ck_assert_ptr_eq(out.ring[0], kst);
					strata_prefix_restored_release(pfx, &out);
					/* Release keeps the inputs, frees nothing of the caller's. */
					ck_assert_ptr_eq(out.into[1][STRATA_PFX_C4_MAIN], keep);
					ck_assert_ptr_eq(out.into_state, kst);
					ck_assert_ptr_null(out.pages[1][STRATA_PFX_C4_MAIN]);
					ck_assert_ptr_null(out.page_ids);
					memset(keep, 0xee, strata_prefix_page_bytes(&m, STRATA_PFX_C4_MAIN) *
							     strata_prefix_rank_pages(&hit, P, rank));
					memset(kst, 0xee, strata_prefix_state_bytes(&m));
				}
				take_into(&out);
			}
		strata_prefix_stats st;
		strata_prefix_stats_get(pfx, &st);
		ck_assert_uint_eq(st.pinned_blocks, 0);
		strata_prefix_close(pfx);
		fx_seq_free(s);
		fx_rmdir(dir);
		free(dir);
	}
}
END_TEST

/* Some families in the caller's memory, the rest (and the state) allocated. */
START_TEST(into_partly)
{
	strata_model m = tiny();
	char *dir = fx_tmpdir();
	fx_seq *s = fx_seq_make(&m, 6, 0, 41, 42, 4);
	strata_prefix *pfx = NULL;
	ck_assert_int_eq(fx_open(dir, &m, 0, 0, &pfx), 0);
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 6 * 256, &s->snap), 0);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 6 * 256, &hit), 0);
	int l4 = -1;
	for (int l = 0; l < m.n_layers && l4 < 0; l++)
		if (strata_prefix_has(&m, l, STRATA_PFX_C4_INDEX))
			l4 = l;
	ck_assert_int_ge(l4, 0);
	size_t b = strata_prefix_page_bytes(&m, STRATA_PFX_C4_INDEX) * 3;
	strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
	out.into[l4][STRATA_PFX_C4_INDEX] = malloc(b);
	restore_check(pfx, s, &hit, 2, 1, &out, NULL);
	ck_assert_ptr_eq(out.pages[l4][STRATA_PFX_C4_INDEX], out.into[l4][STRATA_PFX_C4_INDEX]);
	ck_assert_ptr_nonnull(out.ring[0]);
	strata_prefix_restored_release(pfx, &out);
	free(out.into[l4][STRATA_PFX_C4_INDEX]);
	strata_prefix_close(pfx);
	fx_seq_free(s);
	fx_rmdir(dir);
	free(dir);
}
END_TEST

/* Two host runs on one chain (a shared prefix, then its extension), then part of the
 * host copies evicted: restores mix host runs and store reads, under DCP too. */
START_TEST(host_runs_and_store_mixed)
{
	strata_model m = tiny();
	char *dir = fx_tmpdir();
	fx_seq *a = fx_seq_make(&m, 8, 8, 51, 52, 4), *b = fx_seq_make(&m, 13, 8, 51, 53, 4);
	strata_prefix *pfx = NULL;
	ck_assert_int_eq(fx_open(dir, &m, 0, 256ull << 20, &pfx), 0);
	ck_assert_int_eq(strata_prefix_store(pfx, a->tokens, 8 * 256, &a->snap), 0);
	ck_assert_int_eq(strata_prefix_store(pfx, b->tokens, 13 * 256, &b->snap), 0);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, b->tokens, 13 * 256, &hit), 0);
	ck_assert_uint_eq(hit.pages, 13);
	strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
	uint64_t fh;
	for (int P = 1; P <= 2; P++)
		for (int r = 0; r < P; r++) {
			restore_check(pfx, b, &hit, P, r, &out, &fh);
			ck_assert_uint_eq(out.bytes_from_nvme, 0);
			strata_prefix_restored_release(pfx, &out);
		}
	/* Keep host copies of the last 5 blocks (and the 2 states among them): the least
	 * recently used (the start of the chain) lose theirs. */
	size_t blk = blk_bytes(&m), keep = 5 * blk + 2 * fx_state_bytes(&m);
	ck_assert_int_eq(strata_prefix_evict(pfx, keep + blk / 2, UINT64_MAX), 0);
	strata_prefix_stats st;
	strata_prefix_stats_get(pfx, &st);
	ck_assert_uint_eq(st.host_bytes, keep);
	for (int P = 1; P <= 3; P++)
		for (int r = 0; r < P; r++) {
			restore_check(pfx, b, &hit, P, r, &out, &fh);
			if (P == 1) {
				ck_assert_uint_eq(out.bytes_from_host, 5 * blk);
				ck_assert_uint_eq(out.bytes_from_nvme, 8 * blk);
			}
			strata_prefix_restored_release(pfx, &out);
		}
	/* The shorter entry, whose last block has no state copy any more. */
	ck_assert_int_eq(strata_prefix_lookup(pfx, a->tokens, 8 * 256, &hit), 0);
	ck_assert_uint_eq(hit.pages, 8);
	restore_check(pfx, a, &hit, 1, 0, &out, &fh);
	strata_prefix_restored_release(pfx, &out);
	ck_assert_int_eq(strata_prefix_evict(pfx, 0, UINT64_MAX), 0);
	strata_prefix_stats_get(pfx, &st);
	ck_assert_uint_eq(st.host_bytes, 0);
	strata_prefix_close(pfx);
	fx_seq_free(a);
	fx_seq_free(b);
	fx_rmdir(dir);
	free(dir);
}
END_TEST

/* A host budget smaller than the entry: the last blocks get copies, within budget (a
 * state, bigger than the budget here, gets none). */
START_TEST(host_budget_partial)
{
	strata_model m = tiny();
	char *dir = fx_tmpdir();
	fx_seq *s = fx_seq_make(&m, 8, 0, 61, 62, 4);
	size_t blk = blk_bytes(&m), budget = 3 * blk + blk / 2;
	ck_assert_uint_gt(fx_state_bytes(&m), budget);
	strata_prefix *pfx = NULL;
	ck_assert_int_eq(fx_open(dir, &m, 0, budget, &pfx), 0);
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 8 * 256, &s->snap), 0);
	strata_prefix_stats st;
	strata_prefix_stats_get(pfx, &st);
	ck_assert_uint_eq(st.host_bytes, 3 * blk);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 8 * 256, &hit), 0);
	strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
	restore_check(pfx, s, &hit, 1, 0, &out, NULL);
	ck_assert_uint_eq(out.bytes_from_host, 3 * blk);
	strata_prefix_restored_release(pfx, &out);
	strata_prefix_close(pfx);
	fx_seq_free(s);
	fx_rmdir(dir);
	free(dir);
}
END_TEST

/* More reads than the restore's window, all bound for the device: staging is recycled
 * several times. */
START_TEST(store_window_to_device)
{
	strata_model m = tiny();
	char *dir = fx_tmpdir();
	uint32_t n = 80;
	fx_seq *s = fx_seq_make(&m, n, 0, 71, 72, 16);
	strata_prefix *pfx = NULL;
	ck_assert_int_eq(fx_open(dir, &m, 0, 0, &pfx), 0);
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, n * 256ull, &s->snap), 0);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, n * 256ull, &hit), 0);
	ck_assert_uint_eq(hit.pages, n);
	strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
	for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
		out.dest[f] = STRATA_PFX_TO_DEVICE;
	restore_check(pfx, s, &hit, 1, 0, &out, NULL);
	ck_assert_uint_eq(out.bytes_from_nvme, (uint64_t)n * blk_bytes(&m));
	strata_prefix_restored_release(pfx, &out);
	strata_prefix_close(pfx);
	fx_seq_free(s);
	fx_rmdir(dir);
	free(dir);
}
END_TEST

/* The data directory is created with its parents; a file in the way is an error. */
START_TEST(dir_created_with_parents)
{
	strata_model m = tiny();
	char *dir = fx_tmpdir(), deep[512], bad[512];
	snprintf(deep, sizeof deep, "%s/a/b/c", dir);
	strata_prefix *pfx = NULL;
	ck_assert_int_eq(fx_open(deep, &m, 0, 0, &pfx), 0);
	strata_prefix_close(pfx);
	snprintf(bad, sizeof bad, "%s/file", dir);
	int fd = open(bad, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(bad, sizeof bad, "%s/file/x", dir);
	pfx = NULL;
	ck_assert_int_eq(fx_open(bad, &m, 0, 0, &pfx), -ENOTDIR);
	ck_assert_ptr_null(pfx);
	fx_rmdir(dir);
	free(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cachemgr_restore");
	TCase *tc = tcase_create("restore");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, rank_pages_and_state_bytes);
	tcase_add_test(tc, into_caller_memory);
	tcase_add_test(tc, into_partly);
	tcase_add_test(tc, host_runs_and_store_mixed);
	tcase_add_test(tc, host_budget_partial);
	tcase_add_test(tc, store_window_to_device);
	tcase_add_test(tc, dir_created_with_parents);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
