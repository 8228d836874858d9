/* The selected-entry gather, CPU twin: every gathered entry is byte-identical to its
 * source, nothing else in the destination changes, in flat and block-table spaces,
 * with skipped items and a device-side count. */
#include <check.h>
#include <errno.h>

#include "kernels/kernels.h"
#include "testutil.h"

#define HB 64

static uint8_t *blocks_alloc(int n_blocks, int b, uint64_t *seed)
{
	size_t bytes = (size_t)n_blocks * strata_main_block_stride(b);
	uint8_t *p = aligned_alloc(256, (bytes + 255) & ~(size_t)255);
	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i + 8 <= bytes; i += 8) {
		uint64_t v = tu_next(seed);
		memcpy(p + i, &v, 8);
	}
	return p;
}

/* Entry id of a flat space of HB-entry blocks: its 576 data and 8 scale bytes. */
static const uint8_t *ent_data(const uint8_t *base, int b, int id)
{
	return base + (size_t)(id / b) * strata_main_block_stride(b) + (size_t)(id % b) * 576;
}
static const uint8_t *ent_scale(const uint8_t *base, int b, int id)
{
	return base + (size_t)(id / b) * strata_main_block_stride(b) + (size_t)b * 576 +
	       (size_t)(id % b) * 8;
}

/* Random distinct ints in [0, range). */
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

START_TEST(flat_random)
{
	uint64_t seed = 11 + (uint64_t)_i;
	const int n_src = 40 * HB, n_dst = 20 * HB, dst_B = _i % 2 ? 64 : 16;
	int n = 1 + (int)(tu_next(&seed) % (n_dst - 1));
	uint8_t *src = blocks_alloc(n_src / HB, HB, &seed);
	uint8_t *dst = blocks_alloc(n_dst / dst_B, dst_B, &seed);
	size_t dst_bytes = (size_t)(n_dst / dst_B) * strata_main_block_stride(dst_B);
	uint8_t *before = malloc(dst_bytes);
	memcpy(before, dst, dst_bytes);
	int32_t *sid = malloc((size_t)n * 4), *did = malloc((size_t)n * 4);
	for (int i = 0; i < n; i++)
		sid[i] = (int32_t)(tu_next(&seed) % n_src); /* sources may repeat */
	distinct(did, n, n_dst, &seed);
	strata_gather_params p = { 0 };
	p.n = n;
	p.src_ids = sid;
	p.src = (strata_entry_space){ src, NULL, 0, HB };
	p.dst_ids = did;
	p.dst = (strata_entry_space){ dst, NULL, 0, dst_B };
	ck_assert_int_eq(strata_k_gather_cpu(&p), 0);
	uint8_t *touched = calloc(dst_bytes, 1);
	for (int i = 0; i < n; i++) {
		ck_assert_mem_eq(ent_data(dst, dst_B, did[i]), ent_data(src, HB, sid[i]), 576);
		ck_assert_mem_eq(ent_scale(dst, dst_B, did[i]), ent_scale(src, HB, sid[i]), 8);
		memset(touched + (ent_data(dst, dst_B, did[i]) - dst), 1, 576);
		memset(touched + (ent_scale(dst, dst_B, did[i]) - dst), 1, 8);
	}
	size_t changed = 0;
	for (size_t i = 0; i < dst_bytes; i++)
		changed += !touched[i] && dst[i] != before[i];
	ck_assert_uint_eq(changed, 0);
	free(touched);
	free(sid);
	free(did);
	free(before);
	free(src);
	free(dst);
}
END_TEST

/* A packed source (entry i at i * pk: data then scales) into the block layout and back:
 * the round trip restores every byte, and a bad stride is refused. */
START_TEST(packed_space)
{
	uint64_t seed = 23;
	const int pk = 640, n_blocks = 4, n = n_blocks * HB;
	size_t pbytes = (size_t)n * pk;
	uint8_t *packed = aligned_alloc(256, pbytes), *back = aligned_alloc(256, pbytes);
	ck_assert_ptr_nonnull(packed);
	ck_assert_ptr_nonnull(back);
	for (size_t i = 0; i + 8 <= pbytes; i += 8) {
		uint64_t v = tu_next(&seed);
		memcpy(packed + i, &v, 8);
	}
	memcpy(back, packed, pbytes);
	uint8_t *blk = blocks_alloc(n_blocks, HB, &seed);
	int32_t *sid = malloc((size_t)n * 4);
	distinct(sid, n, n, &seed);
	strata_gather_params p = { 0 };
	p.n = n;
	p.src_ids = sid;
	p.src = (strata_entry_space){ packed, NULL, 0, HB, pk };
	p.dst = (strata_entry_space){ blk, NULL, 0, HB };
	ck_assert_int_eq(strata_k_gather_cpu(&p), 0);
	for (int i = 0; i < n; i++) {
		const uint8_t *e = packed + (size_t)sid[i] * pk;
		ck_assert_mem_eq(ent_data(blk, HB, i), e, 576);
		ck_assert_mem_eq(ent_scale(blk, HB, i), e + 576, 8);
	}
	memset(back, 0, pbytes); /* back to the packed layout: the entry bytes return */
	strata_gather_params q = { 0 };
	q.n = n;
	q.dst_ids = sid;
	q.src = p.dst;
	q.dst = (strata_entry_space){ back, NULL, 0, HB, pk };
	ck_assert_int_eq(strata_k_gather_cpu(&q), 0);
	for (int i = 0; i < n; i++)
		ck_assert_mem_eq(back + (size_t)i * pk, packed + (size_t)i * pk, 584);
	p.src.packed = 600; /* not a multiple of 16 */
	ck_assert_int_eq(strata_k_gather_cpu(&p), -EINVAL);
	p.src.packed = 576; /* smaller than an entry */
	ck_assert_int_eq(strata_k_gather_cpu(&p), -EINVAL);
	free(sid);
	free(blk);
	free(packed);
	free(back);
}
END_TEST

START_TEST(tables_skips_count)
{
	uint64_t seed = 7;
	const int n_tab = 3, max_blocks = 8, n = 300;
	uint8_t *blocks[3 * 8];
	uint8_t *mem[3 * 8];
	for (int i = 0; i < n_tab * max_blocks; i++) /* scattered: one allocation per block */
		blocks[i] = mem[i] = blocks_alloc(1, HB, &seed);
	uint8_t *dst = blocks_alloc(8, HB, &seed);
	size_t dst_bytes = 8 * strata_main_block_stride(HB);
	uint8_t *before = malloc(dst_bytes);
	memcpy(before, dst, dst_bytes);
	int32_t sid[300], tab[300], did[300], n_dev = 250;
	distinct(did, n, 8 * HB, &seed);
	for (int i = 0; i < n; i++) {
		sid[i] = (int32_t)(tu_next(&seed) % (max_blocks * HB));
		tab[i] = (int32_t)(tu_next(&seed) % n_tab);
		if (i % 17 == 3)
			sid[i] = -1;
		if (i % 23 == 5)
			did[i] = -1;
	}
	strata_gather_params p = { 0 };
	p.n = n;
	p.n_dev = &n_dev;
	p.src_ids = sid;
	p.src_tab = tab;
	p.src = (strata_entry_space){ NULL, blocks, max_blocks, HB };
	p.dst_ids = did;
	p.dst = (strata_entry_space){ dst, NULL, 0, HB };
	ck_assert_int_eq(strata_k_gather_cpu(&p), 0);
	for (int i = 0; i < n; i++) {
		if (did[i] < 0)
			continue;
		const uint8_t *d = ent_data(dst, HB, did[i]), *ds = ent_scale(dst, HB, did[i]);
		if (sid[i] < 0 || i >= n_dev) { /* skipped or past the count: untouched */
			ck_assert_mem_eq(d, before + (d - dst), 576);
			ck_assert_mem_eq(ds, before + (ds - dst), 8);
			continue;
		}
		const uint8_t *blk = blocks[tab[i] * max_blocks + sid[i] / HB];
		ck_assert_mem_eq(d, blk + (sid[i] % HB) * 576, 576);
		ck_assert_mem_eq(ds, blk + HB * 576 + (sid[i] % HB) * 8, 8);
	}
	for (int i = 0; i < n_tab * max_blocks; i++)
		free(mem[i]);
	free(dst);
	free(before);
}
END_TEST

/* CUDA graphs are GPU-only: the CPU backend says so instead of pretending. */
START_TEST(graphs_need_a_gpu)
{
	strata_dev_config c = STRATA_DEV_CONFIG_INIT;
	c.backend = STRATA_BACKEND_CPU;
	strata_dev *d = NULL;
	ck_assert_int_eq(strata_dev_open(&c, &d), 0);
	strata_stream *s = NULL;
	ck_assert_int_eq(strata_stream_create(d, &s), 0);
	ck_assert_int_eq(strata_graph_begin(d, s), -ENOTSUP);
	strata_graph *g = (strata_graph *)&c; /* must be cleared */
	ck_assert_int_eq(strata_graph_end(d, s, &g), -ENOTSUP);
	ck_assert_ptr_null(g);
	ck_assert_int_eq(strata_graph_launch(d, NULL, s), -EINVAL);
	ck_assert_int_eq(strata_graph_begin(NULL, s), -EINVAL);
	strata_graph_destroy(d, NULL);
	strata_stream_destroy(d, s);
	strata_dev_close(d);
}
END_TEST

START_TEST(bad_params)
{
	uint8_t buf[64];
	strata_gather_params p = { 0 };
	p.n = 1;
	p.src = (strata_entry_space){ buf, NULL, 0, HB };
	p.dst = (strata_entry_space){ buf, NULL, 0, 0 }; /* HB = 0 */
	ck_assert_int_eq(strata_k_gather_cpu(&p), -EINVAL);
	p.dst.B = HB;
	p.per_warp = 3;
	ck_assert_int_eq(strata_k_gather_cpu(&p), -EINVAL);
	p.per_warp = 0;
	p.l2_prefetch = 32; /* 0, 64, 128 or 256 */
	ck_assert_int_eq(strata_k_gather_cpu(&p), -EINVAL);
	p.l2_prefetch = 256;
	p.n = 0;
	ck_assert_int_eq(strata_k_gather_cpu(&p), 0);
	p.n = 1;
	p.l2_prefetch = 0;
	p.n = 0;
	ck_assert_int_eq(strata_k_gather_cpu(&p), 0);
	ck_assert_int_eq(strata_k_gather(NULL, &p, NULL), -EINVAL);
}
END_TEST

START_TEST(dispatch_cpu_and_baselines)
{
	strata_dev_config c = STRATA_DEV_CONFIG_INIT;
	c.backend = STRATA_BACKEND_CPU;
	strata_dev *dev;
	ck_assert_int_eq(strata_dev_open(&c, &dev), 0);
	uint64_t seed = 3;
	uint8_t *src = blocks_alloc(4, HB, &seed), *d1 = blocks_alloc(2, HB, &seed);
	uint8_t *d2 = blocks_alloc(2, HB, &seed);
	int32_t sid[100], did[100];
	distinct(did, 100, 2 * HB, &seed);
	for (int i = 0; i < 100; i++)
		sid[i] = (int32_t)(tu_next(&seed) % (4 * HB));
	strata_gather_params p = { 0 };
	p.n = 100;
	p.src_ids = sid;
	p.src = (strata_entry_space){ src, NULL, 0, HB };
	p.dst_ids = did;
	p.dst = (strata_entry_space){ d1, NULL, 0, HB };
	ck_assert_int_eq(strata_k_gather(dev, &p, NULL), 0);
	p.dst.base = d2;
	ck_assert_int_eq(strata_bench_gather_baseline(dev, &p, STRATA_GATHER_BASELINE_BATCH, NULL), 0);
	for (int i = 0; i < 100; i++)
		ck_assert_mem_eq(ent_data(d1, HB, did[i]), ent_data(d2, HB, did[i]), 576);
	p.src.blocks = (uint8_t *const *)&src; /* baselines take flat spaces only */
	ck_assert_int_eq(strata_bench_gather_baseline(dev, &p, STRATA_GATHER_BASELINE_EACH, NULL),
			 -EINVAL);
	free(src);
	free(d1);
	free(d2);
	strata_dev_close(dev);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gather");
	TCase *tc = tcase_create("cpu");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, flat_random, 0, 8);
	tcase_add_test(tc, tables_skips_count);
	tcase_add_test(tc, packed_space);
	tcase_add_test(tc, bad_params);
	tcase_add_test(tc, graphs_need_a_gpu);
	tcase_add_test(tc, dispatch_cpu_and_baselines);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
