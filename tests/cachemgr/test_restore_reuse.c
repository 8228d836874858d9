/* Restore into the caller's memory again and again, the way `strata bench prefix`
 * does: no host copy may run from one caller array into the next, even where the
 * arrays sit back to back (as separate cudaMalloc's often do: on the GPU such a copy
 * is cudaErrorInvalidValue); restore's own buffer still takes the whole run in one
 * copy; release keeps the caller's arrays (ASan sees a double free otherwise), and the
 * same struct then restores from the NVMe store after the host copies are evicted. */
#include "cachemgr/pfx_fixture.h"
#include "testutil.h"

enum { PAGES = 8 };

static strata_model tiny(void)
{
	strata_model m = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset("tiny", &m), 0);
	return m;
}

static int n_arrays(const strata_model *m)
{
	int n = 0;
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
			n += strata_prefix_has(m, l, (strata_prefix_family)f);
	return n;
}

/* into[] carved back to back in the store's canonical (layer, family) order from one
 * buffer: every array ends where the next begins, exactly what lets a copy that
 * ignores array bounds merge them. Returns the buffer; *bytes its size. */
static uint8_t *carve_into(const strata_model *m, uint32_t pages, strata_prefix_restored *out,
			   size_t *bytes)
{
	size_t total = 0;
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
			if (strata_prefix_has(m, l, (strata_prefix_family)f))
				total += strata_prefix_page_bytes(m, (strata_prefix_family)f) * pages;
	uint8_t *buf = NULL;
	ck_assert_int_eq(posix_memalign((void **)&buf, 4096, total), 0);
	size_t off = 0;
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
			if (strata_prefix_has(m, l, (strata_prefix_family)f)) {
				out->into[l][f] = buf + off;
				off += strata_prefix_page_bytes(m, (strata_prefix_family)f) * pages;
			}
	*bytes = total;
	return buf;
}

/* The benchmark's alloc_into: one allocation per array. */
static void alloc_into(const strata_model *m, uint32_t pages, strata_prefix_restored *out)
{
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			if (!strata_prefix_has(m, l, (strata_prefix_family)f))
				continue;
			size_t b = strata_prefix_page_bytes(m, (strata_prefix_family)f) * pages;
			ck_assert_int_eq(posix_memalign(&out->into[l][f], 4096, b), 0);
			memset(out->into[l][f], 0xee, b);
		}
	ck_assert_int_eq(posix_memalign(&out->into_state, 4096, strata_prefix_state_bytes(m)), 0);
	memset(out->into_state, 0xee, strata_prefix_state_bytes(m));
}

static void free_into(strata_prefix_restored *out)
{
	for (int l = 0; l < STRATA_MAX_LAYERS; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			free(out->into[l][f]);
			out->into[l][f] = NULL;
		}
	free(out->into_state);
	out->into_state = NULL;
}

static void set_dest(strata_prefix_restored *out, strata_prefix_dest d)
{
	for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
		out->dest[f] = d;
}

typedef struct env {
	strata_model m;
	char *dir;
	fx_seq *s;
	strata_prefix *pfx;
	strata_prefix_hit hit;
} env;

static void env_open(env *e)
{
	e->m = tiny();
	e->dir = fx_tmpdir();
	ck_assert_ptr_nonnull(e->dir);
	e->s = fx_seq_make(&e->m, PAGES, 0, 81, 82, 4);
	ck_assert_int_eq(fx_open(e->dir, &e->m, 0, 64ull << 20, &e->pfx), 0);
	ck_assert_int_eq(strata_prefix_store(e->pfx, e->s->tokens, PAGES * 256ull, &e->s->snap), 0);
	ck_assert_int_eq(strata_prefix_lookup(e->pfx, e->s->tokens, PAGES * 256ull, &e->hit), 0);
	ck_assert_uint_eq(e->hit.pages, PAGES);
}

static void env_close(env *e)
{
	strata_prefix_stats st;
	strata_prefix_stats_get(e->pfx, &st);
	ck_assert_uint_eq(st.pinned_blocks, 0);
	strata_prefix_close(e->pfx);
	fx_seq_free(e->s);
	fx_rmdir(e->dir);
	free(e->dir);
}

/* Layer 0 of tiny is window-only: the first array is layer 1's C4 main. */
START_TEST(copies_stay_inside_into_arrays)
{
	env e;
	env_open(&e);
	int arrays = n_arrays(&e.m);
	ck_assert_int_gt(arrays, 1);
	for (int dev = 0; dev < 2; dev++) {
		strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
		set_dest(&out, dev ? STRATA_PFX_TO_DEVICE : STRATA_PFX_TO_HOST);
		size_t bytes = 0;
		uint8_t *buf = carve_into(&e.m, PAGES, &out, &bytes);
		for (int rep = 0; rep < 3; rep++) {
			memset(buf, 0xee, bytes);
			ck_assert_int_eq(strata_prefix_restore(e.pfx, &e.hit, 1, 0, &out), 0);
			ck_assert_int_eq(fx_check_restored(e.s, &out), 0);
			ck_assert_uint_eq(out.bytes_from_nvme, 0);
			/* One copy per array (the chain is one host run, P = 1), never fewer:
			 * fewer means a copy ran across two arrays. */
			ck_assert_uint_eq(out.host_copies, (uint64_t)arrays);
			ck_assert_ptr_eq(out.pages[1][STRATA_PFX_C4_MAIN], buf);
			strata_prefix_restored_release(e.pfx, &out);
			ck_assert_uint_eq(out.host_copies, 0);
			ck_assert_ptr_eq(out.into[1][STRATA_PFX_C4_MAIN], buf);
		}
		free(buf);
	}
	env_close(&e);
}
END_TEST

START_TEST(own_buffer_takes_the_run_in_one_copy)
{
	env e;
	env_open(&e);
	for (int dev = 0; dev < 2; dev++) {
		strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
		set_dest(&out, dev ? STRATA_PFX_TO_DEVICE : STRATA_PFX_TO_HOST);
		for (int rep = 0; rep < 2; rep++) {
			ck_assert_int_eq(strata_prefix_restore(e.pfx, &e.hit, 1, 0, &out), 0);
			ck_assert_int_eq(fx_check_restored(e.s, &out), 0);
			ck_assert_uint_eq(out.host_copies, 1);
			strata_prefix_restored_release(e.pfx, &out);
		}
		/* Under DCP the rank's pages are every P-th slot: one copy per page per
		 * array at most, and still every byte right. */
		ck_assert_int_eq(strata_prefix_restore(e.pfx, &e.hit, 2, 1, &out), 0);
		ck_assert_int_eq(fx_check_restored(e.s, &out), 0);
		ck_assert_uint_le(out.host_copies, (uint64_t)n_arrays(&e.m) * out.n_pages);
		strata_prefix_restored_release(e.pfx, &out);
	}
	env_close(&e);
}
END_TEST

/* bench_throughput's sequence: caller arrays made once; restores from the host copies
 * with release after each; eviction of every host copy; restores from the store into
 * the same structs; the arrays freed by the caller at the end. */
START_TEST(bench_pattern)
{
	env e;
	env_open(&e);
	strata_prefix_restored rdev = STRATA_PREFIX_RESTORED_INIT, rhost = STRATA_PREFIX_RESTORED_INIT;
	set_dest(&rdev, STRATA_PFX_TO_DEVICE);
	set_dest(&rhost, STRATA_PFX_TO_HOST);
	alloc_into(&e.m, PAGES, &rdev);
	alloc_into(&e.m, PAGES, &rhost);
	void *keep = rdev.into[1][STRATA_PFX_C4_INDEX], *kst = rhost.into_state;
	for (int from_nvme = 0; from_nvme < 2; from_nvme++) {
		if (from_nvme)
			ck_assert_int_eq(strata_prefix_evict(e.pfx, 0, UINT64_MAX), 0);
		strata_prefix_restored *res = from_nvme ? &rhost : &rdev;
		for (int rep = 0; rep < 4; rep++) {
			memset(res->into_state, 0xee, strata_prefix_state_bytes(&e.m));
			ck_assert_int_eq(strata_prefix_restore(e.pfx, &e.hit, 1, 0, res), 0);
			ck_assert_int_eq(fx_check_restored(e.s, res), 0);
			if (from_nvme) {
				ck_assert_uint_eq(res->bytes_from_host, 0);
				ck_assert_uint_eq(res->host_copies, 0);
				ck_assert_uint_gt(res->bytes_from_nvme, 0);
			} else {
				ck_assert_uint_eq(res->bytes_from_nvme, 0);
				ck_assert_uint_eq(res->host_copies, (uint64_t)n_arrays(&e.m));
			}
			strata_prefix_restored_release(e.pfx, res);
		}
		/* The allocate-for-me path between the caller-memory ones, as --check does. */
		strata_prefix_restored def = STRATA_PREFIX_RESTORED_INIT;
		ck_assert_int_eq(strata_prefix_restore(e.pfx, &e.hit, 1, 0, &def), 0);
		ck_assert_int_eq(fx_check_restored(e.s, &def), 0);
		strata_prefix_restored_release(e.pfx, &def);
	}
	ck_assert_ptr_eq(rdev.into[1][STRATA_PFX_C4_INDEX], keep);
	ck_assert_ptr_eq(rhost.into_state, kst);
	free_into(&rdev);
	free_into(&rhost);
	env_close(&e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cachemgr_restore_reuse");
	TCase *tc = tcase_create("reuse");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, copies_stay_inside_into_arrays);
	tcase_add_test(tc, own_buffer_takes_the_run_in_one_copy);
	tcase_add_test(tc, bench_pattern);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
