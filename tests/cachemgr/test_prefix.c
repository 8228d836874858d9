/* Prefix store: keys, round trip across close/reopen, DCP restore for every P x P',
 * shared prefixes, a damaged page, bad input, eviction under budgets and pins. */
#include "cachemgr/pfx_fixture.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <xxhash.h>

static strata_model tiny(void)
{
	strata_model m = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset("tiny", &m), 0);
	return m;
}

static void assert_no_leak(strata_prefix *pfx)
{
	strata_prefix_stats st;
	strata_prefix_stats_get(pfx, &st);
	ck_assert_uint_eq(st.store_allocated, st.named_footprint);
}

START_TEST(keys_chain)
{
	strata_model m = tiny(), f = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset("flash", &f), 0);
	uint32_t *t = malloc(4 * 256 * 4);
	uint64_t seed = 7;
	for (int i = 0; i < 4 * 256; i++)
		t[i] = (uint32_t)fx_next(&seed);
	uint8_t a[4][16], b[4][16], c[4][16];
	strata_prefix_keys(&m, t, 4, a);
	/* h_0 by hand: XXH3_128(zeros || salt || block 0). */
	uint8_t buf[32 + 1024] = { 0 };
	uint64_t fp = strata_model_fingerprint(&m), v = 0x7374726174615066ull ^ 1u;
	for (int i = 0; i < 8; i++) {
		buf[16 + i] = (uint8_t)(fp >> (8 * i));
		buf[24 + i] = (uint8_t)(v >> (8 * i));
	}
	memcpy(buf + 32, t, 1024);
	XXH128_canonical_t h;
	XXH128_canonicalFromHash(&h, XXH3_128bits(buf, sizeof buf));
	ck_assert_mem_eq(a[0], h.digest, 16);
	/* A token changed in block 2 changes keys 2 and 3 only. */
	t[2 * 256 + 17] ^= 1;
	strata_prefix_keys(&m, t, 4, b);
	ck_assert_mem_eq(a[0], b[0], 16);
	ck_assert_mem_eq(a[1], b[1], 16);
	ck_assert(memcmp(a[2], b[2], 16) && memcmp(a[3], b[3], 16));
	/* Another model (fingerprint): every key differs. */
	strata_prefix_keys(&f, t, 4, c);
	for (int i = 0; i < 4; i++)
		ck_assert(memcmp(b[i], c[i], 16));
	free(t);
}
END_TEST

START_TEST(round_trip_reopen)
{
	strata_model m = tiny();
	char *dir = fx_tmpdir();
	fx_seq *s = fx_seq_make(&m, 10, 0, 1, 2, 4);
	strata_prefix *pfx = NULL;
	ck_assert_int_eq(fx_open(dir, &m, 0, 0, &pfx), 0);
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 10 * 256, &s->snap), 0);
	assert_no_leak(pfx);
	strata_prefix_close(pfx);

	ck_assert_int_eq(fx_open(dir, &m, 0, 0, &pfx), 0);
	strata_prefix_stats st;
	strata_prefix_stats_get(pfx, &st);
	ck_assert_uint_eq(st.blocks, 10);
	ck_assert_uint_eq(st.checkpoints, 3); /* pages 4, 8 and 10 */
	assert_no_leak(pfx);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 10 * 256 + 100, &hit), 0);
	ck_assert_uint_eq(hit.tokens, 10 * 256);
	ck_assert_mem_eq(hit.key, s->keys[9], 16);
	/* A prompt that leaves after 9 blocks: the deepest checkpoint is at 8. */
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 9 * 256 + 3, &hit), 0);
	ck_assert_uint_eq(hit.pages, 8);
	strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
	ck_assert_int_eq(strata_prefix_restore(pfx, &hit, 1, 0, &out), 0);
	ck_assert_int_eq(fx_check_restored(s, &out), 0);
	ck_assert_uint_eq(out.bytes_from_nvme, 8 * (3 * (37440 + 4352) + 2 * 1728));
	strata_prefix_restored_release(pfx, &out);
	/* The full entry too. */
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 10 * 256, &hit), 0);
	ck_assert_int_eq(strata_prefix_restore(pfx, &hit, 1, 0, &out), 0);
	ck_assert_int_eq(fx_check_restored(s, &out), 0);
	strata_prefix_restored_release(pfx, &out);
	/* A different first block: no hit. */
	s->tokens[5] ^= 1;
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 10 * 256, &hit), 0);
	ck_assert_uint_eq(hit.tokens, 0);
	strata_prefix_close(pfx);
	fx_seq_free(s);
	fx_rmdir(dir);
	free(dir);
}
END_TEST

/* Writers with P ranks list rank r's local page j at global j*P + r; every reader P'
 * gets exactly p mod P' == r, and the union over ranks is the whole entry. */
START_TEST(dcp_any_to_any)
{
	strata_model m = tiny();
	static const int Ps[] = { 1, 2, 4 }, Qs[] = { 1, 2, 4, 8 };
	char *dir = fx_tmpdir();
	strata_prefix *pfx = NULL;
	ck_assert_int_eq(fx_open(dir, &m, 0, 0, &pfx), 0);
	for (int a = 0; a < 3; a++) {
		int P = Ps[a];
		fx_seq *s = fx_seq_make(&m, 7, 0, 100 + (uint64_t)a, 200 + (uint64_t)a, 4);
		/* Rank-local arrays, then the global listing the snapshot wants. */
		const void **global[STRATA_MAX_LAYERS][STRATA_PFX_FAMILIES] = { { 0 } };
		for (int l = 0; l < m.n_layers; l++)
			for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
				if (!s->ptr[l][f])
					continue;
				global[l][f] = calloc(7, sizeof(void *));
				for (int r = 0; r < P; r++)
					for (uint64_t j = 0; strata_prefix_global_page(j, r, P) < 7; j++) {
						uint64_t g = strata_prefix_global_page(j, r, P);
						const void *local = s->ptr[l][f][g]; /* rank r's j-th page */
						global[l][f][g] = local;
					}
				s->snap.pages[l][f] = (const void *const *)global[l][f];
			}
		s->snap.writer_dcp = P;
		ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 7 * 256, &s->snap), 0);
		strata_prefix_hit hit;
		ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 7 * 256, &hit), 0);
		ck_assert_uint_eq(hit.pages, 7);
		for (int b = 0; b < 4; b++) {
			int Q = Qs[b];
			uint32_t seen[7] = { 0 };
			for (int r = 0; r < Q; r++) {
				strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
				ck_assert_int_eq(strata_prefix_restore(pfx, &hit, Q, r, &out), 0);
				ck_assert_int_eq(fx_check_restored(s, &out), 0);
				ck_assert_int_eq(out.writer_dcp, P);
				for (uint32_t j = 0; j < out.n_pages; j++)
					seen[out.page_ids[j]]++;
				strata_prefix_restored_release(pfx, &out);
			}
			for (int p = 0; p < 7; p++)
				ck_assert_uint_eq(seen[p], 1);
		}
		for (int l = 0; l < m.n_layers; l++)
			for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
				free(global[l][f]);
		fx_seq_free(s);
	}
	assert_no_leak(pfx);
	strata_prefix_close(pfx);
	fx_rmdir(dir);
	free(dir);
}
END_TEST

/* Two sequences sharing 8 blocks: the shared blocks are stored once, and the shorter
 * one's hit survives the longer one's store. */
START_TEST(shared_prefix_once)
{
	strata_model m = tiny();
	char *dir = fx_tmpdir();
	fx_seq *a = fx_seq_make(&m, 8, 8, 5, 6, 4), *b = fx_seq_make(&m, 12, 8, 5, 7, 4);
	strata_prefix *pfx = NULL;
	strata_prefix_stats s0, s1;
	ck_assert_int_eq(fx_open(dir, &m, 0, 0, &pfx), 0);
	ck_assert_int_eq(strata_prefix_store(pfx, a->tokens, 8 * 256, &a->snap), 0);
	strata_prefix_stats_get(pfx, &s0);
	ck_assert_int_eq(strata_prefix_store(pfx, b->tokens, 12 * 256, &b->snap), 0);
	strata_prefix_stats_get(pfx, &s1);
	ck_assert_uint_eq(s1.blocks, 12);
	size_t blk = 3 * (37440 + 4352) + 2 * 1728;
	ck_assert_uint_eq(s1.named_bytes - s0.named_bytes, 4 * blk + 1 * fx_state_bytes(&m));
	/* Storing the same entry again adds nothing. */
	ck_assert_int_eq(strata_prefix_store(pfx, a->tokens, 8 * 256, &a->snap), 0);
	strata_prefix_stats_get(pfx, &s0);
	ck_assert_uint_eq(s0.named_bytes, s1.named_bytes);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, a->tokens, 8 * 256, &hit), 0);
	ck_assert_uint_eq(hit.pages, 8);
	strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
	ck_assert_int_eq(strata_prefix_restore(pfx, &hit, 2, 1, &out), 0);
	ck_assert_int_eq(fx_check_restored(a, &out), 0);
	strata_prefix_restored_release(pfx, &out);
	assert_no_leak(pfx);
	strata_prefix_close(pfx);
	fx_seq_free(a);
	fx_seq_free(b);
	fx_rmdir(dir);
	free(dir);
}
END_TEST

START_TEST(corrupt_page_detected)
{
	strata_model m = tiny();
	char *dir = fx_tmpdir(), path[512];
	fx_seq *s = fx_seq_make(&m, 4, 0, 11, 12, 4);
	strata_prefix *pfx = NULL;
	ck_assert_int_eq(fx_open(dir, &m, 0, 0, &pfx), 0);
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 4 * 256, &s->snap), 0);
	strata_prefix_close(pfx);
	/* Flip payload bytes of the first records after the superblock. */
	snprintf(path, sizeof path, "%s/pages.strata", dir);
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	for (off_t off = 4096 + 64 + 1000; off < 4096 * 64; off += 4096) {
		uint8_t x;
		ck_assert_int_eq(pread(fd, &x, 1, off), 1);
		x ^= 0x5a;
		ck_assert_int_eq(pwrite(fd, &x, 1, off), 1);
	}
	close(fd);
	ck_assert_int_eq(fx_open(dir, &m, 0, 0, &pfx), 0);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 4 * 256, &hit), 0);
	ck_assert_uint_eq(hit.pages, 4);
	strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
	ck_assert_int_eq(strata_prefix_restore(pfx, &hit, 1, 0, &out), STRATA_E_CHECKSUM);
	ck_assert_ptr_null(out.page_ids);
	ck_assert_ptr_null(out.priv_);
	strata_prefix_stats st;
	strata_prefix_stats_get(pfx, &st);
	ck_assert_uint_eq(st.checksum_failures, 1);
	ck_assert_uint_ge(st.dropped_blocks, 1);
	/* The damaged entry is gone, and so are its pages. */
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 4 * 256, &hit), 0);
	ck_assert_uint_eq(hit.pages, 0);
	assert_no_leak(pfx);
	strata_prefix_close(pfx);
	fx_seq_free(s);
	fx_rmdir(dir);
	free(dir);
}
END_TEST

START_TEST(bad_input)
{
	strata_model m = tiny(), pro = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset("pro", &pro), 0);
	char *dir = fx_tmpdir();
	fx_seq *s = fx_seq_make(&m, 4, 0, 21, 22, 4);
	strata_prefix *pfx = NULL;
	ck_assert_int_eq(fx_open(dir, &m, 0, 0, &pfx), 0);
	/* Token count not a multiple of the block. */
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 4 * 256 - 1, &s->snap), -EINVAL);
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 0, &s->snap), -EINVAL);
	/* Geometry mismatch: pages for a window-only layer, or missing for a CSA one. */
	s->snap.pages[0][STRATA_PFX_C4_MAIN] = s->snap.pages[1][STRATA_PFX_C4_MAIN];
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 4 * 256, &s->snap), STRATA_E_FORMAT);
	s->snap.pages[0][STRATA_PFX_C4_MAIN] = NULL;
	const void *const *keep = s->snap.pages[1][STRATA_PFX_C4_INDEX];
	s->snap.pages[1][STRATA_PFX_C4_INDEX] = NULL;
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 4 * 256, &s->snap), STRATA_E_FORMAT);
	s->snap.pages[1][STRATA_PFX_C4_INDEX] = keep;
	/* No state at the end. */
	s->snap.n_ckpt = 0;
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 4 * 256, &s->snap), -EINVAL);
	s->snap.n_ckpt = s->n_ck;
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, 4 * 256, &s->snap), 0);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 4 * 256, &hit), 0);
	strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
	ck_assert_int_eq(strata_prefix_restore(pfx, &hit, 0, 0, &out), -EINVAL);
	ck_assert_int_eq(strata_prefix_restore(pfx, &hit, 2, 2, &out), -EINVAL);
	ck_assert_int_eq(strata_prefix_restore(pfx, &hit, 1, -1, &out), -EINVAL);
	strata_prefix_hit bogus = hit;
	bogus.key[3] ^= 1;
	ck_assert_int_eq(strata_prefix_restore(pfx, &bogus, 1, 0, &out), STRATA_E_NOTFOUND);
	bogus = hit;
	bogus.pages = 3;
	bogus.tokens = 3 * 256;
	ck_assert_int_eq(strata_prefix_restore(pfx, &bogus, 1, 0, &out), STRATA_E_NOTFOUND);
	strata_prefix_close(pfx);
	/* Another model in the same directory: the entry is neither visible nor lost. */
	ck_assert_int_eq(fx_open(dir, &pro, 0, 0, &pfx), 0);
	uint32_t nb = 4;
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, nb * 256, &hit), 0);
	ck_assert_uint_eq(hit.tokens, 0);
	strata_prefix_close(pfx);
	ck_assert_int_eq(fx_open(dir, &m, 0, 0, &pfx), 0);
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, 4 * 256, &hit), 0);
	ck_assert_uint_eq(hit.pages, 4);
	strata_prefix_close(pfx);
	/* A model the store cannot key (blocks other than 256 tokens). */
	strata_model odd = m;
	odd.block_tokens = 128;
	strata_prefix_config cfg = STRATA_PREFIX_CONFIG_INIT;
	cfg.dir = dir;
	cfg.model = &odd;
	ck_assert_int_ne(strata_prefix_open(&cfg, &pfx), 0);
	cfg.model = &m;
	cfg.checkpoint_blocks = 0;
	ck_assert_int_eq(strata_prefix_open(&cfg, &pfx), -EINVAL);
	fx_seq_free(s);
	fx_rmdir(dir);
	free(dir);
}
END_TEST

START_TEST(evict_lru_and_pins)
{
	strata_model m = tiny();
	char *dir = fx_tmpdir();
	fx_seq *s[4];
	for (int i = 0; i < 4; i++)
		s[i] = fx_seq_make(&m, 4, 0, 300 + (uint64_t)i, 400 + (uint64_t)i, 4);
	/* Room for about two entries (4 blocks + one checkpoint each). */
	strata_prefix *pfx = NULL;
	ck_assert_int_eq(fx_open(dir, &m, 0, 0, &pfx), 0);
	ck_assert_int_eq(strata_prefix_store(pfx, s[0]->tokens, 1024, &s[0]->snap), 0);
	strata_prefix_stats st;
	strata_prefix_stats_get(pfx, &st);
	uint64_t one = st.named_footprint;
	strata_prefix_close(pfx);
	fx_rmdir(dir);
	ck_assert_int_eq(fx_open(dir, &m, 2 * one + one / 2, 2 * one, &pfx), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(strata_prefix_store(pfx, s[i]->tokens, 1024, &s[i]->snap), 0);
	strata_prefix_stats_get(pfx, &st);
	ck_assert_uint_le(st.named_footprint, 2 * one + one / 2);
	ck_assert_uint_le(st.host_bytes, 2 * one);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, s[0]->tokens, 1024, &hit), 0);
	ck_assert_uint_eq(hit.pages, 0); /* the least recently used went */
	/* Pin entry 1 by restoring it; storing entries 3 and 0 must evict entry 2 only. */
	ck_assert_int_eq(strata_prefix_lookup(pfx, s[1]->tokens, 1024, &hit), 0);
	ck_assert_uint_eq(hit.pages, 4);
	strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
	ck_assert_int_eq(strata_prefix_restore(pfx, &hit, 1, 0, &out), 0);
	ck_assert_uint_gt(out.bytes_from_host, 0); /* served by its host copy */
	ck_assert_int_eq(fx_check_restored(s[1], &out), 0);
	ck_assert_int_eq(strata_prefix_store(pfx, s[3]->tokens, 1024, &s[3]->snap), 0);
	/* Entry 3 is now least recently used but entry 1 is pinned: 3 goes for 0. */
	ck_assert_int_eq(strata_prefix_store(pfx, s[0]->tokens, 1024, &s[0]->snap), 0);
	ck_assert_int_eq(strata_prefix_lookup(pfx, s[1]->tokens, 1024, &hit), 0);
	ck_assert_uint_eq(hit.pages, 4);
	/* Nothing unpinned left to evict below one entry: a clear budget error. */
	ck_assert_int_eq(strata_prefix_evict(pfx, 0, one / 2), STRATA_E_BUDGET);
	ck_assert_int_eq(strata_prefix_lookup(pfx, s[1]->tokens, 1024, &hit), 0);
	ck_assert_uint_eq(hit.pages, 4);
	ck_assert_int_eq(fx_check_restored(s[1], &out), 0);
	strata_prefix_stats_get(pfx, &st);
	ck_assert_uint_eq(st.pinned_blocks, 4);
	strata_prefix_restored_release(pfx, &out);
	ck_assert_int_eq(strata_prefix_evict(pfx, 0, 0), 0);
	strata_prefix_stats_get(pfx, &st);
	ck_assert_uint_eq(st.blocks, 0);
	ck_assert_uint_eq(st.host_bytes, 0);
	assert_no_leak(pfx);
	strata_prefix_close(pfx);
	for (int i = 0; i < 4; i++)
		fx_seq_free(s[i]);
	fx_rmdir(dir);
	free(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cachemgr_prefix");
	TCase *tc = tcase_create("prefix");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, keys_chain);
	tcase_add_test(tc, round_trip_reopen);
	tcase_add_test(tc, dcp_any_to_any);
	tcase_add_test(tc, shared_prefix_once);
	tcase_add_test(tc, corrupt_page_detected);
	tcase_add_test(tc, bad_input);
	tcase_add_test(tc, evict_lru_and_pins);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
