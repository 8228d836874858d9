/* Prefix restore on a GPU device, in the pattern of `strata bench prefix`: the store
 * opened on the GPU, caller arrays made once (device arrays one cudaMalloc each, as the
 * benchmark's alloc_into makes them, host arrays 4 KiB-aligned), restored into again
 * and again with release between, from the host copies and, after evicting them, from
 * the NVMe store through pinned staging; the allocate-for-me path in between. Every
 * restore is read back and compared byte for byte. Regression: host copies merged
 * across adjacent cudaMalloc's made one cudaMemcpyAsync span two allocations
 * (cudaErrorInvalidValue). Not forked: the CUDA context stays with this process. */
#include "cachemgr/pfx_fixture.h"
#include "testutil.h"

static strata_dev *dev;

static int n_arrays(const strata_model *m)
{
	int n = 0;
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
			n += strata_prefix_has(m, l, (strata_prefix_family)f);
	return n;
}

static void alloc_into(const strata_model *m, uint32_t pages, bool device,
		       strata_prefix_restored *out)
{
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			if (!strata_prefix_has(m, l, (strata_prefix_family)f))
				continue;
			size_t b = strata_prefix_page_bytes(m, (strata_prefix_family)f) * pages;
			if (device)
				ck_assert_int_eq(strata_dev_alloc(dev, b, &out->into[l][f]), 0);
			else
				ck_assert_int_eq(posix_memalign(&out->into[l][f], 4096, b), 0);
		}
	ck_assert_int_eq(posix_memalign(&out->into_state, 4096, strata_prefix_state_bytes(m)), 0);
	for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
		out->dest[f] = device ? STRATA_PFX_TO_DEVICE : STRATA_PFX_TO_HOST;
}

static void free_into(bool device, strata_prefix_restored *out)
{
	for (int l = 0; l < STRATA_MAX_LAYERS; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			if (device)
				strata_dev_free(dev, out->into[l][f]);
			else
				free(out->into[l][f]);
			out->into[l][f] = NULL;
		}
	free(out->into_state);
	out->into_state = NULL;
}

/* Junk in every destination byte, so that a restore must write all of it. */
static void junk(const strata_model *m, uint32_t pages, bool device, strata_prefix_restored *out)
{
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			if (!out->into[l][f])
				continue;
			size_t b = strata_prefix_page_bytes(m, (strata_prefix_family)f) * pages;
			if (device) /* the runtime's memset is for device memory only */
				ck_assert_int_eq(strata_dev_memset(dev, out->into[l][f], 0xee, b, NULL), 0);
			else
				memset(out->into[l][f], 0xee, b);
		}
	if (out->into_state)
		memset(out->into_state, 0xee, strata_prefix_state_bytes(m));
	ck_assert_int_eq(strata_dev_sync(dev), 0);
}

/* fx_check_restored on a host mirror of out (its pages may be device memory). */
static int check(const fx_seq *s, const strata_prefix_restored *out)
{
	strata_prefix_restored h = *out;
	for (int l = 0; l < s->m.n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			if (!out->pages[l][f])
				continue;
			size_t b = out->page_bytes[f] * out->n_pages;
			h.pages[l][f] = malloc(b ? b : 1);
			ck_assert_int_eq(strata_dev_copy(dev, h.pages[l][f], out->pages[l][f], b, NULL), 0);
		}
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	int diff = fx_check_restored(s, &h);
	for (int l = 0; l < STRATA_MAX_LAYERS; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
			if (h.pages[l][f] != out->pages[l][f])
				free(h.pages[l][f]);
	return diff;
}

static void run_model(const char *name, uint32_t pages)
{
	strata_model m = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset(name, &m), 0);
	char *dir = fx_tmpdir();
	ck_assert_ptr_nonnull(dir);
	fx_seq *s = fx_seq_make(&m, pages, 0, 91, 92, 4);
	strata_prefix_config cfg = STRATA_PREFIX_CONFIG_INIT;
	cfg.dir = dir;
	cfg.model = &m;
	cfg.dev = dev;
	cfg.checkpoint_blocks = 4;
	cfg.budget_host = 1ull << 30;
	cfg.store_bytes = 1ull << 30;
	strata_prefix *pfx = NULL;
	ck_assert_int_eq(strata_prefix_open(&cfg, &pfx), 0);
	ck_assert_int_eq(strata_prefix_store(pfx, s->tokens, pages * 256ull, &s->snap), 0);
	strata_prefix_hit hit;
	ck_assert_int_eq(strata_prefix_lookup(pfx, s->tokens, pages * 256ull, &hit), 0);
	ck_assert_uint_eq(hit.pages, pages);

	strata_prefix_restored rdev = STRATA_PREFIX_RESTORED_INIT, rhost = STRATA_PREFIX_RESTORED_INIT;
	alloc_into(&m, pages, true, &rdev);
	alloc_into(&m, pages, false, &rhost);
	for (int from_nvme = 0; from_nvme < 2; from_nvme++) {
		if (from_nvme)
			ck_assert_int_eq(strata_prefix_evict(pfx, 0, UINT64_MAX), 0);
		for (int which = 0; which < 2; which++) {
			strata_prefix_restored *res = which ? &rhost : &rdev;
			for (int rep = 0; rep < 4; rep++) {
				junk(&m, pages, !which, res);
				int rc = strata_prefix_restore(pfx, &hit, 1, 0, res);
				ck_assert_msg(rc == 0, "%s from_nvme %d %s rep %d: %s", name, from_nvme,
					      which ? "host" : "device", rep, strata_strerror(rc));
				ck_assert_int_eq(strata_dev_sync(dev), 0);
				ck_assert_int_eq(check(s, res), 0);
				if (from_nvme) {
					ck_assert_uint_eq(res->bytes_from_host, 0);
				} else {
					ck_assert_uint_eq(res->bytes_from_nvme, 0);
					ck_assert_uint_eq(res->host_copies, (uint64_t)n_arrays(&m));
				}
				strata_prefix_restored_release(pfx, res);
			}
		}
		/* The allocate-for-me path (default placement: index pages to the device),
		 * and a DCP rank of it, between the caller-memory ones. */
		for (int P = 1; P <= 2; P++) {
			strata_prefix_restored def = STRATA_PREFIX_RESTORED_INIT;
			ck_assert_int_eq(strata_prefix_restore(pfx, &hit, P, P - 1, &def), 0);
			ck_assert_int_eq(check(s, &def), 0);
			strata_prefix_restored_release(pfx, &def);
		}
	}
	free_into(true, &rdev);
	free_into(false, &rhost);
	strata_prefix_stats st;
	strata_prefix_stats_get(pfx, &st);
	ck_assert_uint_eq(st.pinned_blocks, 0);
	ck_assert_uint_ge(st.restores, 2 * (2 * 4 + 2));
	strata_prefix_close(pfx);
	fx_seq_free(s);
	fx_rmdir(dir);
	free(dir);
}

START_TEST(restore_tiny)
{
	run_model("tiny", 16);
}
END_TEST

START_TEST(restore_flash)
{
	run_model("flash", 16);
}
END_TEST

int main(void)
{
	tu_require_gpu();
	strata_dev_config dc = STRATA_DEV_CONFIG_INIT;
	dc.backend = STRATA_BACKEND_GPU;
	if (strata_dev_open(&dc, &dev)) {
		printf("no usable GPU: skipping\n");
		return 77;
	}
	Suite *s = suite_create("cachemgr_gpu_restore");
	TCase *tc = tcase_create("gpu_restore");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, restore_tiny);
	tcase_add_test(tc, restore_flash);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	strata_dev_close(dev);
	return failed ? 1 : 0;
}
