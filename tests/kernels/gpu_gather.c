/* The gather kernel on the GPU: every per_warp variant and L2 prefetch size, sizes around the warp and
 * grid edges, flat and block-table sources in pinned host memory (zero-copy reads),
 * write-back to host, a device-side count, and the memcpy baselines; all compared
 * byte for byte with the CPU twin. */
#include <check.h>
#include <errno.h>

#include "kernels/kernels.h"
#include "testutil.h"

static strata_dev *dev;

static void fill(uint8_t *p, size_t n, uint64_t *seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)tu_next(seed);
}

static void distinct(int32_t *out, int n, int range, uint64_t *seed)
{
	uint8_t *used = calloc((size_t)range, 1);
	for (int i = 0; i < n;) {
		int v = (int)(tu_next(seed) % (uint64_t)range);
		if (!used[v]) {
			used[v] = 1;
			out[i++] = v;
		}
	}
	free(used);
}

static void to_dev(void *d, const void *h, size_t n)
{
	ck_assert_int_eq(strata_dev_copy(dev, d, h, n, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
}

/* Gather n random entries from a pinned host tier into a device pool with per_warp u;
 * compare with the CPU twin on host copies. */
static void one(int n, int u, int use_table, uint64_t seed, int pf)
{
	const int B = 64, src_blocks = 64, dst_B = 64;
	const int dst_entries = n + 100;
	size_t sstride = strata_main_block_stride(B);
	size_t sbytes = (size_t)src_blocks * sstride;
	int dst_blocks = (dst_entries + dst_B - 1) / dst_B;
	size_t dbytes = (size_t)dst_blocks * strata_main_block_stride(dst_B);
	uint8_t *host, *dpool, *ref = malloc(dbytes), *got = malloc(dbytes);
	ck_assert_int_eq(strata_dev_host_alloc(dev, sbytes, (void **)&host), 0);
	ck_assert_int_eq(strata_dev_alloc(dev, dbytes, (void **)&dpool), 0);
	fill(host, sbytes, &seed);
	fill(ref, dbytes, &seed);
	to_dev(dpool, ref, dbytes);
	int32_t *sid = malloc((size_t)n * 4), *did = malloc((size_t)n * 4), *d_sid, *d_did;
	for (int i = 0; i < n; i++)
		sid[i] = (int32_t)(tu_next(&seed) % (uint64_t)(src_blocks * B));
	distinct(did, n, dst_entries, &seed);
	if (n > 3)
		sid[n / 2] = -1; /* a skipped item */
	ck_assert_int_eq(strata_dev_alloc(dev, (size_t)n * 4, (void **)&d_sid), 0);
	ck_assert_int_eq(strata_dev_alloc(dev, (size_t)n * 4, (void **)&d_did), 0);
	to_dev(d_sid, sid, (size_t)n * 4);
	to_dev(d_did, did, (size_t)n * 4);
	/* the block table: the host tier's blocks in reverse order */
	uint8_t **tab = malloc(src_blocks * sizeof *tab), **d_tab;
	for (int b = 0; b < src_blocks; b++)
		tab[b] = host + (size_t)(src_blocks - 1 - b) * sstride;
	ck_assert_int_eq(strata_dev_alloc(dev, src_blocks * sizeof *tab, (void **)&d_tab), 0);
	to_dev(d_tab, tab, src_blocks * sizeof *tab);

	strata_gather_params p = { 0 };
	p.n = n;
	p.src_ids = d_sid;
	p.dst_ids = d_did;
	p.src = use_table ? (strata_entry_space){ NULL, d_tab, src_blocks, B }
			  : (strata_entry_space){ host, NULL, 0, B };
	p.dst = (strata_entry_space){ dpool, NULL, 0, dst_B };
	p.per_warp = u;
	p.l2_prefetch = pf;
	ck_assert_int_eq(strata_k_gather(dev, &p, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	ck_assert_int_eq(strata_dev_copy(dev, got, dpool, dbytes, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);

	strata_gather_params q = p;
	q.src_ids = sid;
	q.dst_ids = did;
	q.src = use_table ? (strata_entry_space){ NULL, tab, src_blocks, B }
			  : (strata_entry_space){ host, NULL, 0, B };
	q.dst.base = ref;
	ck_assert_int_eq(strata_k_gather_cpu(&q), 0);
	ck_assert_msg(!memcmp(got, ref, dbytes), "n=%d per_warp=%d table=%d l2_prefetch=%d differs",
		      n, u, use_table, pf);

	strata_dev_free(dev, d_sid);
	strata_dev_free(dev, d_did);
	strata_dev_free(dev, d_tab);
	strata_dev_free(dev, dpool);
	strata_dev_host_free(dev, host);
	free(tab);
	free(sid);
	free(did);
	free(ref);
	free(got);
}

START_TEST(variants)
{
	static const int sizes[] = { 1, 2, 31, 32, 33, 257, 512, 4097, 40000 };
	static const int us[] = { 0, 1, 2, 4, 8, 16 };
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
		for (size_t j = 0; j < sizeof us / sizeof *us; j++)
			one(sizes[i], us[j], (int)((i + j) % 2), 1000 + i * 10 + j, 0);
	/* the L2 prefetch sizes move the same bytes */
	static const int pfs[] = { 64, 128, 256 };
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
		for (size_t j = 0; j < sizeof pfs / sizeof *pfs; j++)
			one(sizes[i], (int)(1u << (i % 4)), (int)((i + j) % 2), 2000 + i * 10 + j, pfs[j]);
}
END_TEST

/* Device -> pinned host (the write-back direction) with a device-side count. */
START_TEST(writeback_and_count)
{
	uint64_t seed = 5;
	const int n = 700, B = 64;
	size_t bytes = 16 * strata_main_block_stride(B);
	uint8_t *dsrc, *host, *ref = malloc(bytes), *src = malloc(bytes);
	ck_assert_int_eq(strata_dev_alloc(dev, bytes, (void **)&dsrc), 0);
	ck_assert_int_eq(strata_dev_host_alloc(dev, bytes, (void **)&host), 0);
	fill(src, bytes, &seed);
	fill(host, bytes, &seed);
	memcpy(ref, host, bytes);
	to_dev(dsrc, src, bytes);
	int32_t did[700], *d_did, cnt = 555, *d_cnt;
	distinct(did, n, 16 * B, &seed);
	ck_assert_int_eq(strata_dev_alloc(dev, sizeof did, (void **)&d_did), 0);
	ck_assert_int_eq(strata_dev_alloc(dev, 4, (void **)&d_cnt), 0);
	to_dev(d_did, did, sizeof did);
	to_dev(d_cnt, &cnt, 4);
	strata_gather_params p = { 0 };
	p.n = n;
	p.n_dev = d_cnt;
	p.dst_ids = d_did;
	p.src = (strata_entry_space){ dsrc, NULL, 0, B };
	p.dst = (strata_entry_space){ host, NULL, 0, B };
	ck_assert_int_eq(strata_k_gather(dev, &p, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	strata_gather_params q = p;
	q.n_dev = &cnt;
	q.dst_ids = did;
	q.src.base = src;
	q.dst.base = ref;
	ck_assert_int_eq(strata_k_gather_cpu(&q), 0);
	ck_assert(!memcmp(host, ref, bytes));
	strata_dev_free(dev, dsrc);
	strata_dev_free(dev, d_did);
	strata_dev_free(dev, d_cnt);
	strata_dev_host_free(dev, host);
	free(ref);
	free(src);
}
END_TEST

START_TEST(baselines)
{
	uint64_t seed = 6;
	const int n = 300, B = 64;
	size_t sbytes = 32 * strata_main_block_stride(B), dbytes = 8 * strata_main_block_stride(B);
	uint8_t *host, *dpool, *ref = malloc(dbytes), *got = malloc(dbytes);
	ck_assert_int_eq(strata_dev_host_alloc(dev, sbytes, (void **)&host), 0);
	ck_assert_int_eq(strata_dev_alloc(dev, dbytes, (void **)&dpool), 0);
	fill(host, sbytes, &seed);
	int32_t sid[300], did[300];
	for (int i = 0; i < n; i++)
		sid[i] = (int32_t)(tu_next(&seed) % (32 * B));
	distinct(did, n, 8 * B, &seed);
	strata_stream *st;
	ck_assert_int_eq(strata_stream_create(dev, &st), 0);
	for (int how = 0; how < 2; how++) {
		fill(ref, dbytes, &seed);
		to_dev(dpool, ref, dbytes);
		strata_gather_params p = { 0 };
		p.n = n;
		p.src_ids = sid; /* host arrays: the baselines issue copies from the host */
		p.dst_ids = did;
		p.src = (strata_entry_space){ host, NULL, 0, B };
		p.dst = (strata_entry_space){ dpool, NULL, 0, B };
		ck_assert_int_eq(strata_bench_gather_baseline(dev, &p, (strata_gather_baseline)how, st), 0);
		ck_assert_int_eq(strata_stream_sync(dev, st), 0);
		ck_assert_int_eq(strata_dev_copy(dev, got, dpool, dbytes, NULL), 0);
		ck_assert_int_eq(strata_dev_sync(dev), 0);
		p.dst.base = ref;
		ck_assert_int_eq(strata_k_gather_cpu(&p), 0);
		ck_assert_msg(!memcmp(got, ref, dbytes), "baseline %d differs", how);
	}
	strata_stream_destroy(dev, st);
	strata_dev_free(dev, dpool);
	strata_dev_host_free(dev, host);
	free(ref);
	free(got);
}
END_TEST

int main(void)
{
	tu_require_gpu();
	strata_dev_config c = STRATA_DEV_CONFIG_INIT;
	c.backend = STRATA_BACKEND_GPU;
	if (strata_dev_open(&c, &dev))
		return EXIT_FAILURE;
	Suite *s = suite_create("gpu_gather");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, variants);
	tcase_add_test(tc, writeback_and_count);
	tcase_add_test(tc, baselines);
	suite_add_tcase(s, tc);
	/* The device context must not cross fork(): run in this process. */
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	strata_dev_close(dev);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
