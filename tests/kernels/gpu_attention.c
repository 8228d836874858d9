/* GPU sparse attention and LSE combine against the CPU twins (kernels.h tolerances),
 * and run-to-run determinism, for the unsplit kernel (no scratch) and the split-over-
 * entries path (strata_k_attn_scratch() bytes), each with the fp32 kernel and the
 * tensor-core one (tensor_cores 0 and 1). Shapes cover each head-group width the
 * kernel picks (16, 32, 64; heads not a multiple of it; 128 heads), holes, empty rows
 * and lists, 1-entry lists, long HCA lists, no sink, and pools / queries that are not
 * 16-byte aligned (the kernel's 4-byte copy and scalar query paths). */
#include <check.h>
#include <math.h>

#include "testutil.h"

#define D 512

static strata_dev *dev;
/* the relative tolerance of the kernel under test (kernels.h: the tensor-core one
 * accumulates with truncation) */
static float cur_rtol = STRATA_ATTN_GPU_RTOL;

static void *to_dev(const void *h, size_t n)
{
	void *d = NULL;
	ck_assert_int_eq(strata_dev_alloc(dev, n ? n : 1, &d), 0);
	ck_assert_int_eq(strata_dev_copy(dev, d, h, n, NULL), 0);
	return d;
}

static void check_close(const float *gpu, const float *cpu, const float *glse,
			const float *clse, int rows, int heads)
{
	for (int i = 0; i < rows * heads; i++) {
		float mx = 0;
		for (int d = 0; d < D; d++)
			mx = fmaxf(mx, fabsf(cpu[(size_t)i * D + d]));
		for (int d = 0; d < D; d++) {
			float a = gpu[(size_t)i * D + d], b = cpu[(size_t)i * D + d];
			ck_assert_msg(fabsf(a - b) <= cur_rtol * mx + 1e-30f,
				      "row/head %d dim %d: gpu %g cpu %g (max %g)", i, d, a, b, mx);
		}
		if (isinf(clse[i]))
			ck_assert(isinf(glse[i]));
		else
			ck_assert_msg(fabsf(glse[i] - clse[i]) <=
					      STRATA_ATTN_GPU_ATOL * fmaxf(1.0f, fabsf(clse[i])),
				      "lse %d: gpu %g cpu %g", i, glse[i], clse[i]);
	}
}

/* A case: rows x heads over n_idx selected entries of a pool (idx_holes: 1 in that
 * many are -1; 0 none) and n_win window entries (win_holes likewise). Row 0's first
 * hole_run idx entries are -1 (a whole chunk without entries on the split path);
 * empty_last: the last row (rows > 1) has no valid entry at all. want_split: the
 * split path must run (H100/H200 SM counts). misalign: pool and q handed to the
 * kernel 4 bytes past a 16-byte boundary. */
typedef struct acase {
	int rows, heads, n_idx, n_win, pool_n;
	uint64_t seed;
	int hole_run, idx_holes, win_holes;
	bool want_split, empty_last, no_sink, misalign;
} acase;

/* Copy to the device at byte offset off of a fresh allocation (*base: to free). */
static void *to_dev_at(const void *h, size_t n, size_t off, void **base)
{
	ck_assert_int_eq(strata_dev_alloc(dev, n + off + 16, base), 0);
	ck_assert_int_eq(strata_dev_copy(dev, (char *)*base + off, h, n, NULL), 0);
	return (char *)*base + off;
}

static void run_acase(const acase *ac)
{
	const int rows = ac->rows, heads = ac->heads, n_idx = ac->n_idx, n_win = ac->n_win;
	const int pool_n = ac->pool_n, hole_run = ac->hole_run;
	uint64_t seed = ac->seed;
	int B = 64, blocks = (pool_n + B - 1) / B;
	size_t pool_bytes = (size_t)blocks * strata_main_block_stride(B);
	uint8_t *pool = calloc(1, pool_bytes);
	float *src = malloc(sizeof *src * (size_t)pool_n * D);
	for (size_t i = 0; i < (size_t)pool_n * D; i++)
		src[i] = (i % D < 448 ? 3.0f : 0.5f) * tu_uniform(&seed);
	strata_main_encode_params ep = { .src = src, .n = pool_n, .B = B, .pool = pool };
	ck_assert_int_eq(strata_k_main_encode_cpu(&ep), 0);
	size_t qn = (size_t)rows * heads * D;
	float *q = malloc(sizeof *q * qn), *sink = malloc(sizeof *sink * heads);
	for (size_t i = 0; i < qn; i++)
		q[i] = tu_uniform(&seed);
	for (int h = 0; h < heads; h++)
		sink[h] = tu_uniform(&seed);
	int32_t *idx = malloc(sizeof *idx * ((size_t)rows * n_idx + 1));
	int32_t *win = malloc(sizeof *win * ((size_t)rows * n_win + 1));
	for (int i = 0; i < rows * n_idx; i++)
		idx[i] = (ac->idx_holes && tu_next(&seed) % (uint64_t)ac->idx_holes == 0)
				 ? -1 : (int32_t)(tu_next(&seed) % (uint64_t)pool_n);
	for (int i = 0; i < rows * n_win; i++)
		win[i] = (ac->win_holes && tu_next(&seed) % (uint64_t)ac->win_holes == 0)
				 ? -1 : (int32_t)(tu_next(&seed) % (uint64_t)pool_n);
	if (rows > 1 && ac->empty_last) {
		for (int j = 0; j < n_idx; j++)
			idx[(size_t)(rows - 1) * n_idx + j] = -1;
		for (int j = 0; j < n_win; j++)
			win[(size_t)(rows - 1) * n_win + j] = -1;
	}
	for (int j = 0; j < hole_run && j < n_idx; j++)
		idx[j] = -1;
	float *co = malloc(sizeof *co * qn), *cl = malloc(sizeof *cl * rows * heads);
	strata_attn_params p = { .n_rows = rows, .heads = heads, .scale = 1.0f / sqrtf(512.0f),
				 .q = q, .sink = ac->no_sink ? NULL : sink, .pool = pool, .B = B,
				 .idx = idx, .n_idx = n_idx, .win_pool = pool, .win_B = B,
				 .win_idx = win, .n_win = n_win, .out = co, .lse = cl };
	ck_assert_int_eq(strata_k_attn_cpu(&p), 0);
	if (rows > 1 && ac->empty_last)
		for (int h = 0; h < heads; h++) {
			size_t i = (size_t)(rows - 1) * heads + h;
			ck_assert(isinf(cl[i]) && cl[i] < 0);
			for (int d = 0; d < D; d++)
				ck_assert(co[i * D + d] == 0.0f);
		}

	strata_attn_params g = p;
	void *q_base = NULL, *pool_base = NULL;
	size_t off = ac->misalign ? 4 : 0;
	g.q = to_dev_at(q, sizeof *q * qn, off, &q_base);
	g.sink = ac->no_sink ? NULL : to_dev(sink, sizeof *sink * heads);
	g.pool = to_dev_at(pool, pool_bytes, off, &pool_base);
	g.win_pool = g.pool;
	g.idx = to_dev(idx, sizeof *idx * ((size_t)rows * n_idx + 1));
	g.win_idx = to_dev(win, sizeof *win * ((size_t)rows * n_win + 1));
	void *dout, *dlse;
	ck_assert_int_eq(strata_dev_alloc(dev, sizeof *co * qn, &dout), 0);
	ck_assert_int_eq(strata_dev_alloc(dev, sizeof *cl * rows * heads, &dlse), 0);
	g.out = dout;
	g.lse = dlse;
	float *go = malloc(sizeof *go * qn), *gl = malloc(sizeof *gl * rows * heads);
	float *go2 = malloc(sizeof *go * qn);
	void *dscr = NULL;
	/* Both kernels: fp32 (tensor_cores 0) and bf16 mma (1), same checks. */
	for (int tc = 0; tc < 2; tc++) {
		g.tensor_cores = tc;
		cur_rtol = tc ? STRATA_ATTN_GPU_TC_RTOL : STRATA_ATTN_GPU_RTOL;
		ck_assert_int_eq(strata_dev_memset(dev, dout, 0xff, sizeof *co * qn, NULL), 0);
		ck_assert_int_eq(strata_k_attn(dev, &g, NULL), 0);
		ck_assert_int_eq(strata_dev_copy(dev, go, dout, sizeof *go * qn, NULL), 0);
		ck_assert_int_eq(strata_dev_copy(dev, gl, dlse, sizeof *gl * rows * heads, NULL), 0);
		ck_assert_int_eq(strata_dev_sync(dev), 0);
		check_close(go, co, gl, cl, rows, heads);
		ck_assert_int_eq(strata_k_attn(dev, &g, NULL), 0);
		ck_assert_int_eq(strata_dev_copy(dev, go2, dout, sizeof *go * qn, NULL), 0);
		ck_assert_int_eq(strata_dev_sync(dev), 0);
		ck_assert_mem_eq(go, go2, sizeof *go * qn); /* deterministic */

		/* The split path: same tolerance against the CPU twin, deterministic too. */
		size_t sb = strata_k_attn_scratch(dev, &g);
		if (ac->want_split)
			ck_assert_uint_gt(sb, 0);
		if (sb) {
			if (!dscr)
				ck_assert_int_eq(strata_dev_alloc(dev, sb, &dscr), 0);
			strata_attn_params gs = g;
			gs.scratch = dscr;
			gs.scratch_bytes = sb;
			ck_assert_int_eq(strata_dev_memset(dev, dout, 0xff, sizeof *co * qn, NULL), 0);
			ck_assert_int_eq(strata_k_attn(dev, &gs, NULL), 0);
			ck_assert_int_eq(strata_dev_copy(dev, go, dout, sizeof *go * qn, NULL), 0);
			ck_assert_int_eq(strata_dev_copy(dev, gl, dlse, sizeof *gl * rows * heads, NULL), 0);
			ck_assert_int_eq(strata_dev_sync(dev), 0);
			check_close(go, co, gl, cl, rows, heads);
			/* Scratch left dirty by the first run must not matter. */
			ck_assert_int_eq(strata_k_attn(dev, &gs, NULL), 0);
			ck_assert_int_eq(strata_dev_copy(dev, go2, dout, sizeof *go * qn, NULL), 0);
			ck_assert_int_eq(strata_dev_sync(dev), 0);
			ck_assert_mem_eq(go, go2, sizeof *go * qn);
			/* A buffer sized for longer lists serves this one. */
			strata_attn_params longer = g;
			longer.n_idx += 4096;
			ck_assert_uint_ge(strata_k_attn_scratch(dev, &longer), sb);
		}
	}
	g.tensor_cores = 0;
	cur_rtol = STRATA_ATTN_GPU_RTOL;

	/* Combine: split the rows' results into two partials (same output twice with
	 * lse, and a -inf part) and compare GPU with CPU. */
	float *pl = malloc(sizeof *pl * 3 * rows * heads);
	float *po = malloc(sizeof *po * 3 * qn);
	for (int k = 0; k < 3; k++) {
		memcpy(po + k * qn, co, sizeof *co * qn);
		for (int i = 0; i < rows * heads; i++)
			pl[k * rows * heads + i] = k == 2 ? -INFINITY : cl[i] + 0.5f * k;
	}
	float *cco = malloc(sizeof *cco * qn), *ccl = malloc(sizeof *ccl * rows * heads);
	strata_attn_combine_params c = { .n_parts = 3, .n_rows = rows, .heads = heads, .dim = D,
					 .part_out = po, .part_lse = pl, .sink = sink, .out = cco,
					 .lse = ccl };
	ck_assert_int_eq(strata_k_attn_combine_cpu(&c), 0);
	strata_attn_combine_params gc = c;
	gc.part_out = to_dev(po, sizeof *po * 3 * qn);
	gc.part_lse = to_dev(pl, sizeof *pl * 3 * rows * heads);
	gc.sink = g.sink;
	if (!gc.sink) { /* the combine's sink path is covered by the other cases */
		c.sink = NULL;
		ck_assert_int_eq(strata_k_attn_combine_cpu(&c), 0);
	}
	gc.out = dout;
	gc.lse = dlse;
	ck_assert_int_eq(strata_k_attn_combine(dev, &gc, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, go, dout, sizeof *go * qn, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, gl, dlse, sizeof *gl * rows * heads, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	check_close(go, cco, gl, ccl, rows, heads);

	strata_dev_free(dev, (void *)gc.part_out);
	strata_dev_free(dev, (void *)gc.part_lse);
	strata_dev_free(dev, q_base);
	strata_dev_free(dev, (void *)g.sink);
	strata_dev_free(dev, pool_base);
	strata_dev_free(dev, (void *)g.idx);
	strata_dev_free(dev, (void *)g.win_idx);
	strata_dev_free(dev, dout);
	strata_dev_free(dev, dlse);
	strata_dev_free(dev, dscr);
	free(pool); free(src); free(q); free(sink); free(idx); free(win); free(co); free(cl);
	free(go); free(gl); free(go2); free(pl); free(po); free(cco); free(ccl);
}

static void run_case_ex(int rows, int heads, int n_idx, int n_win, int pool_n, uint64_t seed,
			int hole_run, bool want_split)
{
	/* The original shapes: 1 in 13 idx entries a hole, the last row of a batch empty
	 * (and then no window for any row). */
	acase ac = { rows, heads, n_idx, rows > 1 ? 0 : n_win, pool_n, seed, hole_run, 13, 0,
		     want_split, true, false, false };
	run_acase(&ac);
}

static void run_case(int rows, int heads, int n_idx, int n_win, int pool_n, uint64_t seed)
{
	run_case_ex(rows, heads, n_idx, n_win, pool_n, seed, 0, false);
}

START_TEST(flash_batch1) { run_case_ex(1, 64, 512, 128, 4096, 1, 0, true); }
END_TEST
START_TEST(flash_batch8) { run_case(8, 64, 512, 128, 8192, 2); }
END_TEST
START_TEST(odd_shapes) { run_case(3, 13, 37, 5, 300, 3); }
END_TEST
START_TEST(window_only) { run_case(1, 8, 0, 128, 256, 4); }
END_TEST
/* Split path: an HCA layer at 128K (1,022 C128 entries + the window), a long list,
 * a fully empty chunk, odd head counts, and two rows (one empty). */
START_TEST(split_hca_1150) { run_case_ex(1, 64, 1022, 128, 4096, 5, 0, true); }
END_TEST
START_TEST(split_long_5000) { run_case_ex(1, 64, 4872, 128, 8192, 6, 0, true); }
END_TEST
START_TEST(split_empty_chunk) { run_case_ex(1, 64, 1022, 128, 4096, 7, 300, true); }
END_TEST
START_TEST(split_odd_heads) { run_case_ex(1, 13, 333, 37, 1000, 8, 0, true); }
END_TEST
START_TEST(split_two_rows) { run_case_ex(2, 64, 1150, 0, 4096, 9, 0, true); }
END_TEST

/* The head-group widths and their edges (132 SMs): 40 heads x 8 rows x 1,128 entries
 * (a group of 64, 24 idle), 20 heads x 9 rows x 1,000 (a group of 32, 12 idle),
 * 128 heads at batch 2 (groups of 16, wide split), batch 32 (a group of 64, split 4),
 * with windows on every row and holes in both lists. */
START_TEST(heads_40_window_holes)
{
	acase ac = { 8, 40, 1000, 128, 4000, 10, 0, 7, 5, false, true, false, false };
	run_acase(&ac);
}
END_TEST
START_TEST(heads_20_no_sink)
{
	acase ac = { 9, 20, 900, 100, 3000, 11, 0, 9, 0, false, false, true, false };
	run_acase(&ac);
}
END_TEST
START_TEST(heads_128_pro)
{
	acase ac = { 2, 128, 512, 128, 4096, 12, 0, 11, 0, true, false, false, false };
	run_acase(&ac);
}
END_TEST
START_TEST(flash_batch32)
{
	acase ac = { 32, 64, 512, 128, 16384, 13, 0, 17, 0, false, true, false, false };
	run_acase(&ac);
}
END_TEST
/* HCA at 1M context: 8,192 C128 entries + the window, batch 1 (wide split) and 2. */
START_TEST(hca_8192_batch1)
{
	acase ac = { 1, 64, 8192, 128, 16384, 14, 0, 0, 0, true, false, false, false };
	run_acase(&ac);
}
END_TEST
START_TEST(hca_8192_batch2_holes)
{
	acase ac = { 2, 64, 8192, 128, 16384, 15, 100, 29, 31, true, false, false, false };
	run_acase(&ac);
}
END_TEST
/* Tiny lists: one entry (idx or window only), a window-only batch, no entries at all. */
START_TEST(one_entry_idx)
{
	acase ac = { 2, 64, 1, 0, 64, 16, 0, 0, 0, false, false, false, false };
	run_acase(&ac);
}
END_TEST
START_TEST(one_entry_win)
{
	acase ac = { 1, 16, 0, 1, 64, 17, 0, 0, 0, false, false, true, false };
	run_acase(&ac);
}
END_TEST
START_TEST(window_only_batch)
{
	acase ac = { 5, 64, 0, 128, 512, 18, 0, 0, 9, false, true, false, false };
	run_acase(&ac);
}
END_TEST
START_TEST(no_entries)
{
	/* Every entry a hole: out 0 and lse -inf everywhere, split or not. */
	acase ac = { 2, 64, 96, 32, 256, 19, 96, 1, 1, false, true, false, false };
	run_acase(&ac);
}
END_TEST
START_TEST(empty_lists)
{
	acase ac = { 3, 24, 0, 0, 64, 20, 0, 0, 0, false, false, false, false };
	run_acase(&ac);
}
END_TEST
/* Pool and queries 4 bytes off a 16-byte boundary: the 4-byte copy and scalar query
 * paths, split and unsplit, within the same tolerance. */
START_TEST(misaligned_pool)
{
	acase ac = { 1, 64, 700, 128, 4096, 21, 0, 13, 0, true, false, false, true };
	run_acase(&ac);
}
END_TEST

/* Misses read in place: entries named -2 - e are read from a pinned host pool2 (UVA)
 * while the others come from the device pool; the map kernel's map mode writes such a
 * list. GPU output within tolerance of the CPU twin over the same entries in one pool,
 * split and unsplit; the GPU map list equal to the CPU's word for word. */
START_TEST(pool2_host_tier)
{
	enum { R = 2, H = 64, N = 512, NE = 2048, W = 128 };
	const int B = 64;
	size_t bytes = (size_t)(NE / B) * strata_main_block_stride(B);
	uint8_t *hpool = calloc(1, bytes);
	float *src = malloc(sizeof *src * (size_t)NE * D);
	uint64_t seed = 41;
	for (size_t i = 0; i < (size_t)NE * D; i++)
		src[i] = (i % D < 448 ? 3.0f : 0.5f) * tu_uniform(&seed);
	strata_main_encode_params ep = { .src = src, .n = NE, .B = B, .pool = hpool };
	ck_assert_int_eq(strata_k_main_encode_cpu(&ep), 0);
	uint8_t *pinned = NULL;
	ck_assert_int_eq(strata_dev_host_alloc(dev, bytes, (void **)&pinned), 0);
	memcpy(pinned, hpool, bytes);
	uint8_t *dpool = to_dev(hpool, bytes); /* the "hot pool": same slots as the host */
	/* residency: every third id of each request is resident (slot = its host entry) */
	int32_t *map = malloc(sizeof *map * R * (NE / R));
	for (int r = 0; r < R; r++)
		for (int id = 0; id < NE / R; id++)
			map[r * (NE / R) + id] = id % 3 ? -1 : r * (NE / R) + id;
	int32_t ids[R * N], flat[R * N], win[R * W], row_base[R], row_map[R];
	for (int r = 0; r < R; r++) {
		row_base[r] = r * (NE / R);
		row_map[r] = r;
		for (int j = 0; j < N; j++) {
			int32_t id = j % 97 == 5 ? -1 : (int32_t)(tu_next(&seed) % (NE / R));
			ids[r * N + j] = id;
			flat[r * N + j] = id < 0 ? -1 : row_base[r] + id;
		}
		for (int j = 0; j < W; j++)
			win[r * W + j] = (int32_t)(tu_next(&seed) % NE);
	}
	int32_t cmap[R * N], gmap[R * N];
	strata_attn_map_params mp = { .n_rows = R, .width = N, .ids = ids, .row_base = row_base,
				      .out = cmap, .map = map, .row_map = row_map,
				      .map_stride = NE / R };
	ck_assert_int_eq(strata_k_attn_map_cpu(&mp), 0);
	strata_attn_map_params gm = mp;
	gm.ids = to_dev(ids, sizeof ids);
	gm.row_base = to_dev(row_base, sizeof row_base);
	gm.row_map = to_dev(row_map, sizeof row_map);
	gm.map = to_dev(map, sizeof *map * R * (NE / R));
	void *dlist;
	ck_assert_int_eq(strata_dev_alloc(dev, sizeof gmap, &dlist), 0);
	gm.out = dlist;
	ck_assert_int_eq(strata_k_attn_map(dev, &gm, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, gmap, dlist, sizeof gmap, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	ck_assert_mem_eq(gmap, cmap, sizeof gmap);
	int n_host = 0;
	for (int i = 0; i < R * N; i++)
		n_host += cmap[i] <= -2;
	ck_assert_int_gt(n_host, R * N / 2);

	/* Staged: the GPU map copies the misses from the pinned host tier into a device
	 * staging pool; list and staged bytes equal to the CPU twin's, word for word. */
	const size_t sbytes = (size_t)((R * N + 63) / 64) * strata_main_block_stride(64);
	uint8_t *cstage = calloc(1, sbytes), *gstage = malloc(sbytes);
	int32_t cst[R * N], gst[R * N];
	strata_attn_map_params sp = mp;
	sp.out = cst;
	sp.host = hpool;
	sp.host_B = B;
	sp.stage = cstage;
	sp.stage_B = 64;
	ck_assert_int_eq(strata_k_attn_map_cpu(&sp), 0);
	strata_attn_map_params gs = gm;
	gs.host = pinned;
	gs.host_B = B;
	ck_assert_int_eq(strata_dev_alloc(dev, sbytes, (void **)&gs.stage), 0);
	ck_assert_int_eq(strata_dev_memset(dev, gs.stage, 0, sbytes, NULL), 0);
	gs.stage_B = 64;
	void *dstl;
	ck_assert_int_eq(strata_dev_alloc(dev, sizeof gst, &dstl), 0);
	gs.out = dstl;
	ck_assert_int_eq(strata_k_attn_map(dev, &gs, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, gst, dstl, sizeof gst, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, gstage, gs.stage, sbytes, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	ck_assert_mem_eq(gst, cst, sizeof gst);
	ck_assert_mem_eq(gstage, cstage, sbytes);

	size_t qn = (size_t)R * H * D;
	float *q = malloc(sizeof *q * qn), *sink = malloc(sizeof *sink * H);
	for (size_t i = 0; i < qn; i++)
		q[i] = tu_uniform(&seed);
	for (int h = 0; h < H; h++)
		sink[h] = tu_uniform(&seed);
	float *co = malloc(sizeof *co * qn), *cl = malloc(sizeof *cl * R * H);
	strata_attn_params p = { .n_rows = R, .heads = H, .scale = 1.0f / sqrtf(512.0f), .q = q,
				 .sink = sink, .pool = hpool, .B = B, .idx = flat, .n_idx = N,
				 .win_pool = hpool, .win_B = B, .win_idx = win, .n_win = W,
				 .out = co, .lse = cl };
	ck_assert_int_eq(strata_k_attn_cpu(&p), 0);
	strata_attn_params g = p;
	g.q = to_dev(q, sizeof *q * qn);
	g.sink = to_dev(sink, sizeof *sink * H);
	g.pool = dpool;
	g.win_pool = dpool;
	g.idx = dlist;
	g.win_idx = to_dev(win, sizeof win);
	g.pool2 = pinned;
	g.B2 = B;
	void *dout, *dlse, *dscr = NULL;
	ck_assert_int_eq(strata_dev_alloc(dev, sizeof *co * qn, &dout), 0);
	ck_assert_int_eq(strata_dev_alloc(dev, sizeof *cl * R * H, &dlse), 0);
	g.out = dout;
	g.lse = dlse;
	float *go = malloc(sizeof *go * qn), *gl = malloc(sizeof *gl * R * H);
	float *go2 = malloc(sizeof *go2 * qn);
	for (int split = 0; split < 2; split++) {
		if (split) {
			g.scratch_bytes = strata_k_attn_scratch(dev, &g);
			if (!g.scratch_bytes)
				break;
			ck_assert_int_eq(strata_dev_alloc(dev, g.scratch_bytes, &dscr), 0);
			g.scratch = dscr;
		}
		for (int tc = 0; tc < 2; tc++) { /* fp32 kernel, then bf16 mma */
			g.tensor_cores = tc;
		cur_rtol = tc ? STRATA_ATTN_GPU_TC_RTOL : STRATA_ATTN_GPU_RTOL;
			for (int rep = 0; rep < 2; rep++) {
				ck_assert_int_eq(strata_dev_memset(dev, dout, 0xff, sizeof *co * qn, NULL), 0);
				ck_assert_int_eq(strata_k_attn(dev, &g, NULL), 0);
				ck_assert_int_eq(strata_dev_copy(dev, rep ? go2 : go, dout, sizeof *go * qn,
								 NULL), 0);
				ck_assert_int_eq(strata_dev_copy(dev, gl, dlse, sizeof *gl * R * H, NULL), 0);
				ck_assert_int_eq(strata_dev_sync(dev), 0);
				check_close(rep ? go2 : go, co, gl, cl, R, H);
			}
			ck_assert_mem_eq(go, go2, sizeof *go * qn); /* deterministic */
		}
	}
	/* the staged list over the device staging pool: same output, bit for bit, as the
	 * in-place list (the same entries in the same order; the last config above) */
	g.tensor_cores = 0;
	cur_rtol = STRATA_ATTN_GPU_RTOL;
	ck_assert_int_eq(strata_k_attn(dev, &g, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, go, dout, sizeof *go * qn, NULL), 0);
	g.idx = dstl;
	g.pool2 = gs.stage;
	g.B2 = 64;
	ck_assert_int_eq(strata_k_attn(dev, &g, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, go2, dout, sizeof *go * qn, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	ck_assert_mem_eq(go, go2, sizeof *go * qn);
	/* the same call captured into a CUDA graph replays to the same bytes */
	strata_stream *cs = NULL;
	strata_graph *cg = NULL;
	ck_assert_int_eq(strata_stream_create(dev, &cs), 0);
	ck_assert_int_eq(strata_graph_begin(dev, cs), 0);
	ck_assert_int_eq(strata_k_attn(dev, &g, cs), 0);
	ck_assert_int_eq(strata_graph_end(dev, cs, &cg), 0);
	ck_assert_int_eq(strata_dev_memset(dev, dout, 0xff, sizeof *co * qn, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	ck_assert_int_eq(strata_graph_launch(dev, cg, cs), 0);
	ck_assert_int_eq(strata_stream_sync(dev, cs), 0);
	ck_assert_int_eq(strata_dev_copy(dev, go, dout, sizeof *go * qn, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	ck_assert_mem_eq(go, go2, sizeof *go * qn);
	strata_graph_destroy(dev, cg);
	strata_stream_destroy(dev, cs);
	strata_dev_free(dev, gs.stage);
	strata_dev_free(dev, dstl);
	free(cstage);
	free(gstage);
	strata_dev_free(dev, dscr);
	strata_dev_free(dev, dout);
	strata_dev_free(dev, dlse);
	strata_dev_free(dev, (void *)g.q);
	strata_dev_free(dev, (void *)g.sink);
	strata_dev_free(dev, (void *)g.win_idx);
	strata_dev_free(dev, dlist);
	strata_dev_free(dev, (void *)gm.ids);
	strata_dev_free(dev, (void *)gm.row_base);
	strata_dev_free(dev, (void *)gm.row_map);
	strata_dev_free(dev, (void *)gm.map);
	strata_dev_free(dev, dpool);
	strata_dev_host_free(dev, pinned);
	free(hpool); free(src); free(map); free(q); free(sink); free(co); free(cl);
	free(go); free(gl); free(go2);
}
END_TEST

int main(void)
{
	tu_require_gpu();
	strata_dev_config cfg = STRATA_DEV_CONFIG_INIT;
	cfg.backend = STRATA_BACKEND_GPU;
	if (strata_dev_open(&cfg, &dev))
		return 1;
	Suite *s = suite_create("gpu_attention");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, flash_batch1);
	tcase_add_test(tc, pool2_host_tier);
	tcase_add_test(tc, flash_batch8);
	tcase_add_test(tc, odd_shapes);
	tcase_add_test(tc, window_only);
	tcase_add_test(tc, split_hca_1150);
	tcase_add_test(tc, split_long_5000);
	tcase_add_test(tc, split_empty_chunk);
	tcase_add_test(tc, split_odd_heads);
	tcase_add_test(tc, split_two_rows);
	tcase_add_test(tc, heads_40_window_holes);
	tcase_add_test(tc, heads_20_no_sink);
	tcase_add_test(tc, heads_128_pro);
	tcase_add_test(tc, flash_batch32);
	tcase_add_test(tc, hca_8192_batch1);
	tcase_add_test(tc, hca_8192_batch2_holes);
	tcase_add_test(tc, one_entry_idx);
	tcase_add_test(tc, one_entry_win);
	tcase_add_test(tc, window_only_batch);
	tcase_add_test(tc, no_entries);
	tcase_add_test(tc, empty_lists);
	tcase_add_test(tc, misaligned_pool);
	suite_add_tcase(s, tc);
	/* No fork: a CUDA context does not survive fork(), and the parent has one. */
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int rc = srunner_ntests_failed(sr) ? EXIT_FAILURE : EXIT_SUCCESS;
	srunner_free(sr);
	strata_dev_close(dev);
	return rc;
}
