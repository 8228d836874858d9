/* Indexer on the GPU against the CPU twin and an independent double reference.
 * Also: the scratch's counters are zero at rest (zeroed once, left zero by every call,
 * fused and phases paths), and the rest of the scratch may hold anything; the call
 * captured into a CUDA graph replays to the same result.
 *
 * Tolerance (stated): GPU and CPU sum the same exact products in different orders, so
 * their scores differ in the last bits. A selected set may differ from the reference
 * (and GPU from CPU twin) only by swapping entries whose reference scores lie within
 * TOL_REL * M of the k-th score, M = max_j s_j sum_h |w_h| sum_d |q_hd k_jd|; returned
 * scores must be within the same tolerance. Exact-tie cases (all keys equal, every
 * ReLU zero) allow no swap: the lowest ids must win, bit for bit. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/indexer_int.h"
#include "indexer_tdata.h"

#define TOL_REL 2e-5
/* The FP8 tensor-core scan (scan_wgmma) adds with about 13 mantissa bits (kernels.h):
 * its own bound, the same rule. */
#define TOL_REL_WGMMA 2e-3

static strata_dev *dev;

/* Seconds on a monotonic clock: each check prints where its time went (the test's
 * time is host work; CK_RUN_CASE runs one tcase). */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double last_check_end; /* 0 before the first check */

typedef struct dcopy {
	void *pages, *pt, *q, *q8, *w, *rr, *lim, *ids, *sc, *scratch;
} dcopy;

static void *to_dev(const void *h, size_t n)
{
	void *d = NULL;
	ck_assert_int_eq(strata_dev_alloc(dev, n ? n : 1, &d), 0);
	if (h && n)
		ck_assert_int_eq(strata_dev_copy(dev, d, h, n, NULL), 0);
	return d;
}

/* Every one of the n counter bytes at zb is zero. One assertion for the whole region:
 * Check's ck_assert_msg records its place for the parent process on every call that
 * passes, and one a byte over the megabytes of counters is the likely cause of the 6 -
 * 28 s each check spent in run_gpu (bench/results/2026-12-02-h200-s38, run 2's `gpu`
 * tcase; not yet timed with this). */
static void assert_zero(const unsigned char *zb, size_t n, const char *after)
{
	size_t i = 0;
	while (i < n && !zb[i])
		i++;
	ck_assert_msg(i == n, "scratch counter byte %zu is %u after %s", i, i < n ? zb[i] : 0u, after);
}

/* Runs the GPU on t's inputs; results land in gids / gsc (host, n_rows * topk). */
static void run_gpu(td *t, int32_t *gids, float *gsc, int reps)
{
	strata_indexer_params p = t->p;
	int R = p.n_rows ? p.n_rows : 1;
	size_t eb = strata_index_entry_bytes(p.fmt);
	dcopy d;
	d.pages = to_dev(t->pages, (size_t)t->n_pages * p.B * eb);
	d.pt = to_dev(t->pt, sizeof(int32_t) * (size_t)p.n_req * p.max_pages);
	d.q = to_dev(t->q, sizeof(uint16_t) * (size_t)R * p.heads * 128);
	d.q8 = to_dev(t->q8, t->q8 ? (size_t)R * p.heads * 128 : 0);
	d.w = to_dev(t->w, sizeof(float) * (size_t)R * p.heads);
	d.rr = to_dev(t->req_rows, sizeof(int32_t) * (size_t)(p.n_req + 1));
	d.lim = to_dev(t->limits, sizeof(int32_t) * (size_t)R);
	d.ids = to_dev(NULL, sizeof(int32_t) * (size_t)R * p.topk);
	d.sc = to_dev(NULL, sizeof(float) * (size_t)R * p.topk);
	p.pages = d.pages;
	p.page_table = d.pt;
	p.q = t->q8 ? NULL : d.q; /* FP8 queries: q must not be read */
	p.q8 = t->q8 ? d.q8 : NULL;
	p.w = d.w;
	p.req_rows = d.rr;
	p.row_limit = d.lim;
	p.out_ids = d.ids;
	p.out_scores = d.sc;
	p.scratch_bytes = strata_k_indexer_scratch(dev, &p);
	ck_assert(p.scratch_bytes > 0);
	d.scratch = to_dev(NULL, p.scratch_bytes);
	/* poison the scratch and outputs: the kernel must not depend on them, except that
	 * the counters at the scratch's start are zero at rest (zeroed once here) */
	idx_gpu_layout lay;
	idx_gpu_layout_of(&p, &lay);
	ck_assert(lay.zero_bytes > 0 && lay.zero_bytes <= p.scratch_bytes);
	ck_assert_int_eq(strata_dev_memset(dev, d.scratch, 0xa5, p.scratch_bytes, NULL), 0);
	ck_assert_int_eq(strata_dev_memset(dev, d.scratch, 0, lay.zero_bytes, NULL), 0);
	ck_assert_int_eq(strata_dev_memset(dev, d.ids, 0x7f, sizeof(int32_t) * (size_t)R * p.topk, NULL), 0);
	p.scratch = d.scratch;
	unsigned char *zb = malloc(lay.zero_bytes);
	ck_assert_ptr_nonnull(zb);
	size_t n = (size_t)R * p.topk;
	int32_t *prev = malloc(sizeof(int32_t) * n);
	float *prevs = malloc(sizeof(float) * n);
	for (int rep = 0; rep < reps; rep++) {
		ck_assert_int_eq(strata_k_indexer(dev, &p, NULL), 0);
		ck_assert_int_eq(strata_dev_sync(dev), 0);
		ck_assert_int_eq(strata_dev_copy(dev, gids, d.ids, sizeof(int32_t) * n, NULL), 0);
		ck_assert_int_eq(strata_dev_copy(dev, gsc, d.sc, sizeof(float) * n, NULL), 0);
		ck_assert_int_eq(strata_dev_sync(dev), 0);
		if (rep) /* deterministic run to run, scratch reused */
			ck_assert_msg(!memcmp(prev, gids, sizeof(int32_t) * n) &&
				      !memcmp(prevs, gsc, sizeof(float) * n),
				      "GPU result changed between runs");
		memcpy(prev, gids, sizeof(int32_t) * n);
		memcpy(prevs, gsc, sizeof(float) * n);
		/* each call leaves the counters zero for the next */
		ck_assert_int_eq(strata_dev_copy(dev, zb, d.scratch, lay.zero_bytes, NULL), 0);
		ck_assert_int_eq(strata_dev_sync(dev), 0);
		assert_zero(zb, lay.zero_bytes, "a call");
	}
	/* the phases benchmark aid runs filter and select as separate launches: same result,
	 * from the state the fused calls left (the rest of the scratch poisoned again) */
	float ms[4];
	ck_assert_int_eq(strata_dev_memset(dev, d.ids, 0x7f, sizeof(int32_t) * n, NULL), 0);
	ck_assert_int_eq(strata_dev_memset(dev, (unsigned char *)d.scratch + lay.zero_bytes, 0xa5,
					   p.scratch_bytes - lay.zero_bytes, NULL), 0);
	ck_assert_int_eq(strata_k_indexer_phases(dev, &p, NULL, ms), 0);
	for (int i = 0; i < 4; i++)
		ck_assert(ms[i] >= 0.0f);
	ck_assert_int_eq(strata_dev_copy(dev, gids, d.ids, sizeof(int32_t) * n, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(dev, gsc, d.sc, sizeof(float) * n, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	ck_assert_msg(!memcmp(prev, gids, sizeof(int32_t) * n) && !memcmp(prevs, gsc, sizeof(float) * n),
		      "phases path differs from strata_k_indexer");
	ck_assert_int_eq(strata_dev_copy(dev, zb, d.scratch, lay.zero_bytes, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	assert_zero(zb, lay.zero_bytes, "the phases path");
	/* captured into a CUDA graph (fixed launch shapes, no host synchronisation) and
	 * replayed twice: the same result each time, the counters zero after each */
	strata_stream *gs = NULL;
	strata_graph *g = NULL;
	ck_assert_int_eq(strata_stream_create(dev, &gs), 0);
	ck_assert_int_eq(strata_graph_begin(dev, gs), 0);
	ck_assert_int_eq(strata_k_indexer(dev, &p, gs), 0);
	ck_assert_int_eq(strata_graph_end(dev, gs, &g), 0);
	for (int rep = 0; rep < 2; rep++) {
		ck_assert_int_eq(strata_dev_memset(dev, d.ids, 0x7f, sizeof(int32_t) * n, NULL), 0);
		ck_assert_int_eq(strata_dev_sync(dev), 0);
		ck_assert_int_eq(strata_graph_launch(dev, g, gs), 0);
		ck_assert_int_eq(strata_stream_sync(dev, gs), 0);
		ck_assert_int_eq(strata_dev_copy(dev, gids, d.ids, sizeof(int32_t) * n, NULL), 0);
		ck_assert_int_eq(strata_dev_copy(dev, gsc, d.sc, sizeof(float) * n, NULL), 0);
		ck_assert_int_eq(strata_dev_copy(dev, zb, d.scratch, lay.zero_bytes, NULL), 0);
		ck_assert_int_eq(strata_dev_sync(dev), 0);
		ck_assert_msg(!memcmp(prev, gids, sizeof(int32_t) * n) &&
				      !memcmp(prevs, gsc, sizeof(float) * n),
			      "graph replay %d differs from strata_k_indexer", rep);
		assert_zero(zb, lay.zero_bytes, "a replay");
	}
	strata_graph_destroy(dev, g);
	strata_stream_destroy(dev, gs);
	free(zb);
	free(prev);
	free(prevs);
	void **all = (void **)&d;
	for (size_t i = 0; i < sizeof d / sizeof(void *); i++)
		strata_dev_free(dev, all[i]);
}

/* GPU vs reference, CPU twin vs reference, GPU vs twin. Returns GPU-twin differences. */
static int check_case(td *t, int strict, const char *what)
{
	const strata_indexer_params *p = &t->p;
	size_t n = (size_t)(p->n_rows ? p->n_rows : 1) * p->topk;
	int32_t *gids = malloc(sizeof(int32_t) * n);
	float *gsc = malloc(sizeof(float) * n);
	const double t0 = now_s();
	run_gpu(t, gids, gsc, 2);
	const double t1 = now_s();
	ck_assert_int_eq(strata_k_indexer_cpu(&t->p), 0); /* twin: t->ids, t->scores */
	const double t2 = now_s();
	double *ref = malloc(sizeof(double) * (size_t)(p->max_limit + 1));
	int diffs = 0;
	for (int r = 0; r < p->n_rows; r++) {
		int lim = t->limits[r], k = p->topk;
		double mag = 0;
		char why[256] = "";
		if (lim > k)
			td_ref_scores(t, r, ref, &mag);
		double tol = (strata_k_indexer_wgmma(dev, p) ? TOL_REL_WGMMA : TOL_REL) * mag + 1e-30;
		const int32_t *gi = gids + (size_t)r * k, *ci = t->ids + (size_t)r * k;
		int s = td_check_row(lim, k, gi, gsc + (size_t)r * k, ref, tol, strict, why, sizeof why);
		ck_assert_msg(s >= 0, "%s: GPU row %d (limit %d): %s", what, r, lim, why);
		s = td_check_row(lim, k, ci, t->scores + (size_t)r * k, ref, tol, strict, why, sizeof why);
		ck_assert_msg(s >= 0, "%s: CPU row %d (limit %d): %s", what, r, lim, why);
		/* GPU vs twin directly: every differing id sits at the k-th score (tol) */
		if (lim > k) {
			double kth = INFINITY;
			for (int i = 0; i < k; i++)
				if (ref[ci[i]] < kth)
					kth = ref[ci[i]];
			for (int i = 0, a = 0, b = 0; i < 2 * k && (a < k || b < k); i++) {
				int x = a < k ? gi[a] : INT32_MAX, y = b < k ? ci[b] : INT32_MAX;
				if (x == y) {
					a++, b++;
					continue;
				}
				int id = x < y ? x : y;
				if (x < y)
					a++;
				else
					b++;
				diffs++;
				ck_assert_msg(!strict && fabs(ref[id] - kth) <= tol,
					      "%s: row %d: GPU and CPU disagree on id %d (score %.9g, "
					      "k-th %.9g, tol %g)", what, r, id, ref[id], kth, tol);
			}
		} else {
			ck_assert(!memcmp(gi, ci, sizeof(int32_t) * (size_t)k));
		}
	}
	const double t3 = now_s();
	printf("%s: %d rows, GPU/CPU differences at the k-th score: %d (s: data %.2f, GPU %.2f, "
	       "twin %.2f, reference %.2f)\n", what, p->n_rows, diffs,
	       last_check_end > 0 ? t0 - last_check_end : 0.0, t1 - t0, t2 - t1, t3 - t2);
	last_check_end = t3;
	free(ref);
	free(gids);
	free(gsc);
	return diffs;
}

START_TEST(hand_computed)
{
	/* heads 2, q_0 = e_0, q_1 = e_1, w = (1, 2): score_j = ReLU(a_j) + 2 ReLU(b_j)
	 * = 2, 2, 0.5, 3, 3, 6 -> top-2 {3, 5} (3 beats 4 on the tie), top-4 {0, 3, 4, 5} */
	static const float a[6] = { 1, -2, 0.5f, 3, 0, 6 }, b[6] = { 0.5f, 1, -1, 0, 1.5f, -6 };
	for (int f = 0; f < 2; f++)
		for (int k = 2; k <= 4; k += 2) {
			int rows = 1, lim = 6;
			td t;
			td_make(&t, (strata_index_fmt)f, 2, k, 1, &rows, &lim, 4, 1, TD_RANDOM);
			size_t eb = strata_index_entry_bytes(t.p.fmt);
			for (int j = 0; j < 6; j++) {
				float x[128] = { 0 };
				x[0] = a[j];
				x[1] = b[j];
				td_encode_key(t.p.fmt, x, t.pages + (size_t)t.pt[j / 4] * 4 * eb, 4, j % 4);
			}
			for (int h = 0; h < 2; h++) {
				for (int d = 0; d < 128; d++)
					t.q[h * 128 + d] = codec_bf16_encode(d == h ? 1.0f : 0.0f);
				t.w[h] = (float)(h + 1);
			}
			int32_t gids[4];
			float gsc[4];
			run_gpu(&t, gids, gsc, 1);
			const int want2[2] = { 3, 5 }, want4[4] = { 0, 3, 4, 5 };
			const float sc2[2] = { 3, 6 }, sc4[4] = { 2, 3, 3, 6 };
			for (int i = 0; i < k; i++) {
				ck_assert_int_eq(gids[i], k == 2 ? want2[i] : want4[i]);
				ck_assert_float_eq(gsc[i], k == 2 ? sc2[i] : sc4[i]);
			}
			td_free(&t);
		}
}
END_TEST

START_TEST(mixed_batches)
{
	/* 1-4 rows per request; limits 0, 1, k-1, k, k+1, off-block, long, mixed */
	int rows_of[5] = { 1, 4, 2, 3, 1 };
	int lim[11] = { 20000, 513, 511, 512, 2049, 0, 1, 777, 65536, 3001, 40001 };
	enum td_mode modes[3] = { TD_RANDOM, TD_CLUSTERED, TD_MIXED_W };
	const char *names[3] = { "random", "clustered", "signed-w" };
	for (int f = 0; f < 2; f++)
		for (int m = 0; m < 3; m++) {
			td t;
			char what[64];
			snprintf(what, sizeof what, "%s %s", f ? "fp8" : "mxfp4", names[m]);
			td_make(&t, (strata_index_fmt)f, 64, 512, 5, rows_of, lim, 64, 200 + 10 * f + m,
				modes[m]);
			check_case(&t, 0, what);
			td_free(&t);
		}
}
END_TEST

START_TEST(adversarial_ties)
{
	/* all scores equal / all zero, below and above the candidate-list capacity
	 * (the second exercises the select kernel's overflow path) */
	for (int f = 0; f < 2; f++)
		for (int mode = 0; mode < 2; mode++) {
			int rows = 3, lim[3] = { 3000, 40000, 1025 };
			td t;
			td_make(&t, (strata_index_fmt)f, 64, 1024, 1, &rows, lim, 64, 3,
				mode ? TD_NEGATIVE : TD_EQUAL);
			check_case(&t, 1, mode ? "all-relu-zero" : "all-equal");
			td_free(&t);
		}
}
END_TEST

START_TEST(long_context)
{
	/* V4-Flash: 1M tokens = 262,144 C4 entries, top-512; V4-Pro-like top-1024, 2 rows */
	for (int f = 0; f < 2; f++) {
		int rows = 1, lim = 262144;
		td t;
		td_make(&t, (strata_index_fmt)f, 64, 512, 1, &rows, &lim, 64, 11 + f, TD_RANDOM);
		check_case(&t, 0, f ? "1M fp8 top-512" : "1M mxfp4 top-512");
		td_free(&t);
	}
	int rows = 2, lim[2] = { 131072, 100003 };
	td t;
	td_make(&t, STRATA_INDEX_MXFP4, 64, 1024, 1, &rows, lim, 64, 21, TD_CLUSTERED);
	check_case(&t, 0, "512K mxfp4 top-1024 2 rows");
	td_free(&t);
}
END_TEST

START_TEST(odd_geometry)
{
	/* 8 heads (tiny preset: m-tile padding), 40 heads, B = 12 (not a power of two) */
	int rows_of[2] = { 2, 1 }, lim[3] = { 5000, 64, 1000 };
	td t;
	td_make(&t, STRATA_INDEX_FP8, 8, 64, 2, rows_of, lim, 64, 31, TD_RANDOM);
	check_case(&t, 0, "8 heads top-64");
	td_free(&t);
	td_make(&t, STRATA_INDEX_MXFP4, 40, 128, 2, rows_of, lim, 12, 32, TD_MIXED_W);
	check_case(&t, 0, "40 heads B=12");
	td_free(&t);
}
END_TEST

/* FP8 queries (strata_indexer_params.q8), widened to bf16 as they are staged: the
 * result must be bit-identical to the bf16 call with the same values, for both key
 * formats, and agree with the twin and the reference as any call does; exact ties
 * still go to the lowest ids, bit for bit. */
START_TEST(fp8_queries)
{
	int rows_of[3] = { 1, 4, 2 };
	int lim[7] = { 20000, 513, 2049, 777, 65536, 1, 40001 };
	for (int f = 0; f < 2; f++)
		for (int m = 0; m < 2; m++) {
			td t;
			char what[64];
			snprintf(what, sizeof what, "q8 %s %s", f ? "fp8" : "mxfp4",
				 m ? "clustered" : "random");
			td_make(&t, (strata_index_fmt)f, 64, 512, 3, rows_of, lim, 64, 400 + 10 * f + m,
				m ? TD_CLUSTERED : TD_RANDOM);
			td_use_q8(&t);
			size_t n = (size_t)t.p.n_rows * t.p.topk;
			int32_t *g8 = malloc(sizeof(int32_t) * n), *gb = malloc(sizeof(int32_t) * n);
			float *s8 = malloc(sizeof(float) * n), *sb = malloc(sizeof(float) * n);
			run_gpu(&t, g8, s8, 1);
			{ /* the same values as bf16 queries: the same bits */
				uint8_t *keep = t.q8;
				t.q8 = NULL;
				t.p.q8 = NULL;
				run_gpu(&t, gb, sb, 1);
				t.q8 = keep;
				t.p.q8 = keep;
				ck_assert_msg(!memcmp(g8, gb, sizeof(int32_t) * n) &&
						      !memcmp(s8, sb, sizeof(float) * n),
					      "%s: FP8 queries differ from the same bf16 queries", what);
			}
			check_case(&t, 0, what);
			free(g8);
			free(gb);
			free(s8);
			free(sb);
			td_free(&t);
		}
	for (int mode = 0; mode < 2; mode++) { /* exact ties */
		int rows = 3, lt[3] = { 3000, 40000, 1025 };
		td t;
		td_make(&t, STRATA_INDEX_FP8, 64, 1024, 1, &rows, lt, 64, 5,
			mode ? TD_NEGATIVE : TD_EQUAL);
		td_use_q8(&t);
		check_case(&t, 1, mode ? "q8 fp8 all-relu-zero" : "q8 fp8 all-equal");
		td_free(&t);
	}
	int rows = 1, lim1 = 262144; /* 1M tokens */
	td t;
	td_make(&t, STRATA_INDEX_FP8, 64, 512, 1, &rows, &lim1, 64, 13, TD_RANDOM);
	td_use_q8(&t);
	check_case(&t, 0, "q8 1M fp8 top-512");
	td_free(&t);
}
END_TEST

/* The FP8 tensor-core scan (strata_indexer_params.scan_wgmma): FP8 or MXFP4 keys (the
 * latter converted to e4m3 in registers), FP8 queries, 1 - 4 rows per request, 64 heads,
 * B = 64. Within its stated tolerance of the twin and the reference; exact ties still go
 * to the lowest ids, bit for bit; fused, phases and graph paths agree bit for bit
 * (run_gpu). Hopper GPUs must run it. */
/* One wgmma case: n requests of rows_of[i] rows (NULL: one each) with limits lim (one a
 * row), FP8 queries, checked. */
static void wgmma_rows_case(strata_index_fmt fmt, int k, int n, const int *rows_of, int *lim,
			    uint64_t seed, enum td_mode kind, int strict, const char *what)
{
	int rows[16];
	char label[80];
	td t;
	ck_assert_int_le(n, 16);
	for (int i = 0; i < n; i++)
		rows[i] = rows_of ? rows_of[i] : 1;
	td_make(&t, fmt, 64, k, n, rows, lim, 64, seed, kind);
	td_use_q8(&t);
	t.p.scan_wgmma = 1;
	ck_assert_int_eq(strata_k_indexer_wgmma(dev, &t.p), 1);
	snprintf(label, sizeof label, "wgmma %s %s", fmt == STRATA_INDEX_MXFP4 ? "mxfp4" : "fp8",
		 what);
	check_case(&t, strict, label);
	td_free(&t);
}
static void wgmma_case(strata_index_fmt fmt, int k, int n, int *lim, uint64_t seed,
		       enum td_mode kind, int strict, const char *what)
{
	wgmma_rows_case(fmt, k, n, NULL, lim, seed, kind, strict, what);
}

/* Whether a one-row call with these keys runs the wgmma scan here. */
static int wgmma_available(strata_index_fmt fmt)
{
	int one[1] = { 1 }, l0 = 20000;
	td probe;
	td_make(&probe, fmt, 64, 512, 1, one, &l0, 64, 70, TD_RANDOM);
	td_use_q8(&probe);
	probe.p.scan_wgmma = 1;
	const int on = strata_k_indexer_wgmma(dev, &probe.p);
	td_free(&probe);
	return on;
}

START_TEST(wgmma_scan)
{
	int lim[5] = { 20000, 513, 65536, 300, 777 }; /* 300 <= k: left to the filter */
	const char *name = strata_dev_name(dev);
	int hopper = name && (strstr(name, "H100") || strstr(name, "H200") || strstr(name, "H800") ||
			      strstr(name, "GH200"));
	for (int f = 0; f < 2; f++) {
		const strata_index_fmt fmt = f ? STRATA_INDEX_MXFP4 : STRATA_INDEX_FP8;
		int on = wgmma_available(fmt);
		printf("wgmma scan (%s keys) on %s: %s\n", f ? "mxfp4" : "fp8", name ? name : "?",
		       on ? "used" : "not available");
		ck_assert_msg(on || !hopper, "a Hopper GPU must run the wgmma scan");
		if (!on)
			return;
		wgmma_case(fmt, 512, 5, lim, 71, TD_RANDOM, 0, "random");
		wgmma_case(fmt, 512, 5, lim, 72, TD_CLUSTERED, 0, "clustered");
		wgmma_case(fmt, 512, 5, lim, 75, TD_MIXED_W, 0, "signed-w");
		if (f) { /* the conversion's rare tables (rs_tables' warp-wide branch) */
			int lw = 131072; /* one row: the sampled tail */
			wgmma_case(fmt, 512, 5, lim, 76, TD_WIDE, 0, "wide group scales");
			wgmma_case(fmt, 512, 1, &lw, 77, TD_WIDE, 0, "wide group scales, 128K");
		}
		for (int mode = 0; mode < 2; mode++) {
			int lt[3] = { 3000, 40000, 1025 };
			wgmma_case(fmt, 1024, 3, lt, 73, mode ? TD_NEGATIVE : TD_EQUAL, 1,
				   mode ? "all-relu-zero" : "all-equal");
		}
		int l1 = 262144; /* 1M tokens */
		wgmma_case(fmt, 512, 1, &l1, 74, TD_RANDOM, 0, "1M top-512");
		/* one long row (the fused tail) whose CTAs hold unequal tile counts and whose
		 * last tile is partial (on an H200's FP8 scan: 3,126 tiles over 792 CTAs),
		 * random and all tied (each score's id must be its own) */
		int lc = 200001;
		wgmma_case(fmt, 512, 1, &lc, 81, TD_RANDOM, 0, "one row 200001");
		wgmma_case(fmt, 512, 1, &lc, 82, TD_EQUAL, 1, "one row 200001, all-equal");
		/* a batch of 16 rows of ~16K keys, mixed lengths (~49 scan CTAs a row on an
		 * H200, ~5 tiles each): random, near-ties, and the two all-tied rows */
		int lb[16];
		for (int i = 0; i < 16; i++)
			lb[i] = 16384 - 37 * i;
		wgmma_case(fmt, 512, 16, lb, 76, TD_RANDOM, 0, "batch-16 random");
		wgmma_case(fmt, 512, 16, lb, 77, TD_CLUSTERED, 0, "batch-16 clustered");
		wgmma_case(fmt, 512, 16, lb, 78, TD_EQUAL, 1, "batch-16 all-equal");
		wgmma_case(fmt, 512, 16, lb, 79, TD_NEGATIVE, 1, "batch-16 all-relu-zero");
		/* five requests, four long (~30 - 50 tiles a scan CTA on an H200, the unfused
		 * batch scan) and one below k */
		int ll[5] = { 262144, 250000, 240007, 200001, 300 };
		wgmma_case(fmt, 512, 5, ll, 80, TD_RANDOM, 0, "batch-5 long rows");
		/* several rows a request (MTP drafts: one CTA scores all of its request's rows
		 * on each key tile): 2, 4, 1 and 3 rows (a CTA of 4 row slots with 3 rows),
		 * rows at or below k among scored ones (left to the filter), limits a row
		 * apart and far apart */
		const int mr[4] = { 2, 4, 1, 3 };
		int ml[10] = { 20000, 20001, 65536, 65537, 300, 41000, 777, 513, 512, 514 };
		wgmma_rows_case(fmt, 512, 4, mr, ml, 83, TD_RANDOM, 0, "rows 2/4/1/3 random");
		wgmma_rows_case(fmt, 512, 4, mr, ml, 84, TD_CLUSTERED, 0, "rows 2/4/1/3 clustered");
		wgmma_rows_case(fmt, 512, 4, mr, ml, 85, TD_MIXED_W, 0, "rows 2/4/1/3 signed-w");
		for (int mode = 0; mode < 2; mode++) {
			const int tr[2] = { 2, 3 };
			int tl[5] = { 3000, 3001, 40000, 1025, 39999 };
			wgmma_rows_case(fmt, 1024, 2, tr, tl, 86, mode ? TD_NEGATIVE : TD_EQUAL, 1,
					mode ? "rows 2/3 all-relu-zero" : "rows 2/3 all-equal");
		}
		/* long rows: one request of 4 rows (512K tokens: ~32 tiles a CTA), then two
		 * requests of 2 */
		const int r4[1] = { 4 }, r22[2] = { 2, 2 };
		int l4[4] = { 131072, 131073, 131074, 131075 };
		wgmma_rows_case(fmt, 512, 1, r4, l4, 87, TD_RANDOM, 0, "one request, 4 long rows");
		int l22[4] = { 200001, 200002, 150000, 150001 };
		wgmma_rows_case(fmt, 512, 2, r22, l22, 88, TD_CLUSTERED, 0, "2 requests, 2 long rows");
		/* long rows all tied or all ReLU-zero at k = 1024 (every CTA of the batch scan
		 * holds more than k keys of a row, all in one bucket: each must be counted,
		 * and the ties go to the lowest ids), then near-ties at top-1024 with one row
		 * a request (the unfused one-row batch scans) */
		for (int mode = 0; mode < 2; mode++)
			wgmma_rows_case(fmt, 1024, 2, r22, l22, 89, mode ? TD_NEGATIVE : TD_EQUAL, 1,
					mode ? "2 requests, 2 long rows, all-relu-zero"
					     : "2 requests, 2 long rows, all-equal");
		int l5[4] = { 262144, 262143, 200001, 1025 };
		wgmma_case(fmt, 1024, 4, l5, 90, TD_CLUSTERED, 0, "batch-4 long rows, top-1024");
		/* the filter CTAs' filing in several rounds (the cases above give each filter
		 * CTA at most four chunks of 2,048 scores: one round): 16 requests of 4 rows,
		 * 64 rows, so on an H200 (132 SMs) 4 filter CTAs a row with ~5 chunks each,
		 * a full round and a partial one; limits not multiples of a chunk. One key
		 * format: the filter does not see it. */
		if (!f) {
			int r16[16], l64[64];
			for (int i = 0; i < 16; i++)
				r16[i] = 4;
			for (int i = 0; i < 64; i++)
				l64[i] = 40000 + 97 * i;
			wgmma_rows_case(fmt, 512, 16, r16, l64, 91, TD_RANDOM, 0,
					"16 requests of 4 rows (filter rounds)");
		}
	}
}
END_TEST

/* The MXFP4 batch scans in several waves of CTAs (wg_shape: one or two rows a CTA, from
 * 56 tiles a one-wave CTA, so at 1M keys and batch 32; here from 2,
 * STRATA_IDX_WAVE_TILES): one and two rows a CTA, long and mixed rows, random, tied and
 * signed weights; and four rows a CTA, which stay at one wave. Its own tcase
 * (CK_RUN_CASE=waves runs it alone). */
START_TEST(wgmma_waves)
{
	const strata_index_fmt fmt = STRATA_INDEX_MXFP4;
	if (!wgmma_available(fmt)) { /* wgmma_scan says whether it must */
		printf("waves: the wgmma scan is not available here\n");
		return;
	}
	setenv("STRATA_IDX_WAVE_TILES", "2", 1);
	int ll[5] = { 262144, 250000, 240007, 200001, 300 };
	wgmma_case(fmt, 512, 5, ll, 92, TD_RANDOM, 0, "waves: batch-5 long rows");
	const int r22[2] = { 2, 2 }, mr[4] = { 2, 1, 2, 2 };
	int l22[4] = { 200001, 200002, 150000, 150001 };
	wgmma_rows_case(fmt, 512, 2, r22, l22, 93, TD_CLUSTERED, 0, "waves: 2 requests, 2 long rows");
	wgmma_rows_case(fmt, 1024, 2, r22, l22, 94, TD_EQUAL, 1,
			"waves: 2 requests, 2 long rows, all-equal");
	/* two-row CTAs: a request of one row, rows at or below k, limits far apart */
	int ml[7] = { 20000, 65537, 41000, 300, 777, 513, 512 };
	wgmma_rows_case(fmt, 512, 4, mr, ml, 95, TD_MIXED_W, 0, "waves: rows 2/1/2/2 signed-w");
	/* four rows a CTA: one wave (wg_shape) whatever the threshold */
	const int r4[1] = { 4 };
	int l4[4] = { 131072, 131073, 131074, 131075 };
	wgmma_rows_case(fmt, 512, 1, r4, l4, 96, TD_RANDOM, 0, "waves: one request, 4 long rows");
	unsetenv("STRATA_IDX_WAVE_TILES");
}
END_TEST

/* The unfused batch scans in contiguous tile ranges (wg_ranges; the default for two and
 * four FP8 rows a CTA): STRATA_IDX_RANGES = 1 (a CTA scores 1 / G of its request's
 * tiles in a row) and 2 (the same, block b serving request b % n_req), with both key
 * formats: long and mixed rows (CTAs with no tiles where a row has fewer tiles than its
 * request has CTAs), rows at or below k, random, tied and signed weights, four rows (FP8
 * in ranges; MXFP4 keeps the strided tiles). Its own tcase (CK_RUN_CASE=ranges runs it
 * alone). */
START_TEST(wgmma_ranges)
{
	for (int f = 0; f < 2; f++) {
		const strata_index_fmt fmt = f ? STRATA_INDEX_MXFP4 : STRATA_INDEX_FP8;
		if (!wgmma_available(fmt)) { /* wgmma_scan says whether it must */
			printf("ranges: the wgmma scan is not available here\n");
			break;
		}
		for (int mode = 1; mode <= 2; mode++) {
			setenv("STRATA_IDX_RANGES", mode == 1 ? "1" : "2", 1);
			const uint64_t sd = 100 + 10 * (uint64_t)mode;
			int ll[5] = { 262144, 250000, 240007, 200001, 300 };
			wgmma_case(fmt, 512, 5, ll, sd, TD_RANDOM, 0, "ranges: batch-5 long rows");
			int lb[16];
			for (int i = 0; i < 16; i++)
				lb[i] = 16384 - 37 * i;
			wgmma_case(fmt, 512, 16, lb, sd + 1, TD_CLUSTERED, 0, "ranges: batch-16 clustered");
			wgmma_case(fmt, 1024, 16, lb, sd + 2, TD_EQUAL, 1, "ranges: batch-16 all-equal");
			const int r22[2] = { 2, 2 }, mr[4] = { 2, 1, 2, 2 };
			int l22[4] = { 200001, 200002, 150000, 150001 };
			wgmma_rows_case(fmt, 512, 2, r22, l22, sd + 3, TD_RANDOM, 0,
					"ranges: 2 requests, 2 long rows");
			wgmma_rows_case(fmt, 1024, 2, r22, l22, sd + 4, TD_NEGATIVE, 1,
					"ranges: 2 requests, 2 long rows, all-relu-zero");
			int ml[7] = { 20000, 65537, 41000, 300, 777, 513, 512 };
			wgmma_rows_case(fmt, 512, 4, mr, ml, sd + 5, TD_MIXED_W, 0,
					"ranges: rows 2/1/2/2 signed-w");
			const int r4[1] = { 4 };
			int l4[4] = { 131072, 131073, 131074, 131075 };
			wgmma_rows_case(fmt, 512, 1, r4, l4, sd + 6, TD_RANDOM, 0,
					"ranges: one request, 4 long rows");
			const int m4[4] = { 2, 4, 1, 3 }; /* four-row CTAs, rows of mixed lengths */
			int l10[10] = { 20000, 65537, 131072, 300, 41000, 777, 200001, 513, 512, 99999 };
			wgmma_rows_case(fmt, 512, 4, m4, l10, sd + 7, TD_MIXED_W, 0,
					"ranges: rows 2/4/1/3 signed-w");
		}
		unsetenv("STRATA_IDX_RANGES");
	}
}
END_TEST

/* The FP8 scan's two tile-copy forms where the default rule does not use them
 * (indexer_wgmma.cu ss_tma_mode: TMA for two and four rows a CTA, per-thread cp.async
 * for one): STRATA_IDX_SS_TMA=1 with one row a CTA (the fused tail at one long row, the
 * unfused batch scan), 0 with two and four rows; long, mixed and short rows, random,
 * tied and signed weights. Its own tcase (CK_RUN_CASE=copies runs it alone). */
START_TEST(wgmma_copies)
{
	const strata_index_fmt fmt = STRATA_INDEX_FP8;
	if (!wgmma_available(fmt)) { /* wgmma_scan says whether it must */
		printf("copies: the wgmma scan is not available here\n");
		return;
	}
	setenv("STRATA_IDX_SS_TMA", "1", 1);
	int l1[1] = { 262144 };
	wgmma_case(fmt, 512, 1, l1, 120, TD_RANDOM, 0, "copies: TMA, one 1M row (fused)");
	int ll[5] = { 262144, 250000, 240007, 200001, 300 };
	wgmma_case(fmt, 512, 5, ll, 121, TD_CLUSTERED, 0, "copies: TMA, batch-5 long rows");
	int lb[16];
	for (int i = 0; i < 16; i++)
		lb[i] = 16384 - 37 * i;
	wgmma_case(fmt, 1024, 16, lb, 122, TD_EQUAL, 1, "copies: TMA, batch-16 all-equal");
	setenv("STRATA_IDX_SS_TMA", "0", 1);
	const int r22[2] = { 2, 2 }, m4[4] = { 2, 4, 1, 3 };
	int l22[4] = { 200001, 200002, 150000, 150001 };
	wgmma_rows_case(fmt, 512, 2, r22, l22, 123, TD_RANDOM, 0, "copies: cp.async, 2 x 2 long rows");
	int l10[10] = { 20000, 65537, 131072, 300, 41000, 777, 200001, 513, 512, 99999 };
	wgmma_rows_case(fmt, 512, 4, m4, l10, 124, TD_MIXED_W, 0,
			"copies: cp.async, rows 2/4/1/3 signed-w");
	unsetenv("STRATA_IDX_SS_TMA");
}
END_TEST

/* The fused one-row tail's forms (indexer_wgmma.cu), each on the shapes that run fused:
 * one long row, batches of short rows, random, clustered, tied and signed weights, both
 * key formats. Mode 0: the sampled bound's select with a list too short
 * (STRATA_IDX_SAMP_X=0: the bound is the lower edge of the sample's largest bucket, so
 * the select takes the top k of every score of the row); mode 1: the row barrier
 * (STRATA_IDX_SAMP=0, scan_tail); mode 2: the sampled bound with its list on every row
 * length (STRATA_IDX_SAMP_MIN=0; by default rows shorter than 32,768 entries take the
 * row barrier). Its own tcase (CK_RUN_CASE=sampled runs it alone). */
static const char *mlabel(char (*buf)[64], const char *mode, const char *shape)
{
	snprintf(*buf, sizeof *buf, "%s: %s", mode, shape);
	return *buf;
}

START_TEST(wgmma_sampled)
{
	for (int f = 0; f < 2; f++) {
		const strata_index_fmt fmt = f ? STRATA_INDEX_MXFP4 : STRATA_INDEX_FP8;
		if (!wgmma_available(fmt)) { /* wgmma_scan says whether it must */
			printf("sampled: the wgmma scan is not available here\n");
			break;
		}
		static const char *mname[3] = { "short list", "row barrier", "sampled list" };
		for (int mode = 0; mode < 3; mode++) {
			char what[64];
			if (mode == 0)
				setenv("STRATA_IDX_SAMP_X", "0", 1);
			else if (mode == 1)
				setenv("STRATA_IDX_SAMP", "0", 1);
			if (mode != 1)
				setenv("STRATA_IDX_SAMP_MIN", "0", 1);
			const uint64_t sd = 130 + 10 * (uint64_t)mode + 20 * (uint64_t)f;
			int l1[1] = { 262144 };
			wgmma_case(fmt, 512, 1, l1, sd, TD_RANDOM, 0,
				   mlabel(&what, mname[mode], "one 1M row"));
			int lc[1] = { 200001 };
			wgmma_case(fmt, 1024, 1, lc, sd + 1, TD_CLUSTERED, 0,
				   mlabel(&what, mname[mode], "one row 200001, top-1024"));
			int lb[16];
			for (int i = 0; i < 16; i++)
				lb[i] = 16384 - 37 * i;
			wgmma_case(fmt, 512, 16, lb, sd + 2, TD_MIXED_W, 0,
				   mlabel(&what, mname[mode], "batch-16 signed-w"));
			wgmma_case(fmt, 512, 16, lb, sd + 3, TD_EQUAL, 1,
				   mlabel(&what, mname[mode], "batch-16 all-equal"));
			int lm[5] = { 20000, 513, 65536, 300, 777 };
			wgmma_case(fmt, 512, 5, lm, sd + 4, TD_RANDOM, 0,
				   mlabel(&what, mname[mode], "mixed lengths"));
			/* long rows in a batch: one wave's CTAs score ~20 tiles each, more than
			 * samp_tail holds; on an H200 the filter path (197 scan CTAs a request,
			 * more than the staged filing's sample slots hold: it runs at batch 8,
			 * below) */
			int l4[4] = { 262144, 250001, 200003, 131072 };
			wgmma_case(fmt, 512, 4, l4, sd + 5, TD_RANDOM, 0,
				   mlabel(&what, mname[mode], "batch-4 long rows"));
			if (mode == 2) {
				wgmma_case(fmt, 1024, 4, l4, sd + 6, TD_CLUSTERED, 0,
					   mlabel(&what, mname[mode], "batch-4 long rows, top-1024"));
				wgmma_case(fmt, 512, 4, l4, sd + 7, TD_EQUAL, 1,
					   mlabel(&what, mname[mode], "batch-4 long rows, all-equal"));
			}
			/* two rows a request, long (the filter path: the staged filing is one
			 * row a request; bench/results/2026-12-03-h200-s43 measured it at two):
			 * a request with one row, one whose first row is not scored (<= k),
			 * one short request; all-equal */
			const int r2[4] = { 2, 2, 1, 2 };
			int l2[7] = { 131072, 131073, 100003, 100004, 120001, 300, 9001 };
			wgmma_rows_case(fmt, 512, 4, r2, l2, sd + 8, TD_RANDOM, 0,
					mlabel(&what, mname[mode], "two rows, long"));
			if (mode == 2) {
				wgmma_rows_case(fmt, 512, 4, r2, l2, sd + 11, TD_EQUAL, 1,
						mlabel(&what, mname[mode], "two rows, long, all-equal"));
				/* one row a request at batch 8 (98 scan CTAs a request, within the
				 * sample slots: staged with FP8 keys; at batch 4, 197 are not) */
				int l8[8];
				for (int i = 0; i < 8; i++)
					l8[i] = 131072 - 4099 * i;
				wgmma_case(fmt, 512, 8, l8, sd + 13, TD_RANDOM, 0,
					   mlabel(&what, mname[mode], "batch-8 long rows"));
				wgmma_case(fmt, 512, 8, l8, sd + 14, TD_EQUAL, 1,
					   mlabel(&what, mname[mode], "batch-8 long rows, all-equal"));
			}
			unsetenv("STRATA_IDX_SAMP_X");
			unsetenv("STRATA_IDX_SAMP");
			unsetenv("STRATA_IDX_SAMP_MIN");
		}
	}
}
END_TEST

/* The filter and select as one thread-block cluster a row (indexer.cu filter_cl_kernel;
 * by default where a row's filter CTAs fit a cluster of 8, as in wgmma_scan's 64 rows):
 * here on every shape (STRATA_IDX_FCL_ALL=1), with clusters of 8, of 16 (a non-portable
 * size) and of 2, and with the leader's room for bucket-b* keys cut to 16 and to none
 * (STRATA_IDX_FCL_LOC: the rest through the global list, and past its capacity from the
 * scores). Both scans (the default and wgmma), 1 - 4 rows, limits 0, 1, k - 1, k, k + 1,
 * off-block, long and mixed; all-equal and all-ReLU-zero rows (crowded bins, the list
 * overflowing). run_gpu's phases path (filter_kernel, then select_kernel) must agree bit
 * for bit. Its own tcase (CK_RUN_CASE=cluster runs it alone). */
START_TEST(filter_cluster)
{
	static const char *size[3] = { "8", "16", "2" };
	for (int v = 0; v < 3; v++) {
		char what[96];
		setenv("STRATA_IDX_FCL_ALL", "1", 1);
		setenv("STRATA_IDX_FCL", size[v], 1);
		if (v == 1)
			setenv("STRATA_IDX_FCL_LOC", "16", 1);
		if (v == 2)
			setenv("STRATA_IDX_FCL_LOC", "0", 1);
		const uint64_t sd = 300 + 20 * (uint64_t)v;
		int rows_of[5] = { 1, 4, 2, 3, 1 };
		int lim[11] = { 20000, 513, 511, 512, 2049, 0, 1, 777, 65536, 3001, 40001 };
		for (int f = 0; f < 2; f++) {
			td t;
			snprintf(what, sizeof what, "cluster %s: %s mixed", size[v], f ? "fp8" : "mxfp4");
			td_make(&t, (strata_index_fmt)f, 64, 512, 5, rows_of, lim, 64, sd + f, TD_CLUSTERED);
			check_case(&t, 0, what);
			td_free(&t);
		}
		for (int mode = 0; mode < 2; mode++) {
			int rows = 3, lt[3] = { 3000, 40000, 1025 };
			td t;
			snprintf(what, sizeof what, "cluster %s: %s", size[v],
				 mode ? "all-relu-zero" : "all-equal");
			td_make(&t, STRATA_INDEX_FP8, 64, 1024, 1, &rows, lt, 64, sd + 2 + mode,
				mode ? TD_NEGATIVE : TD_EQUAL);
			check_case(&t, 1, what);
			td_free(&t);
		}
		if (wgmma_available(STRATA_INDEX_FP8)) {
			const int mr[4] = { 2, 4, 1, 3 };
			int ml[10] = { 20000, 20001, 65536, 65537, 300, 41000, 777, 513, 512, 514 };
			snprintf(what, sizeof what, "cluster %s: rows 2/4/1/3 signed-w", size[v]);
			wgmma_rows_case(STRATA_INDEX_FP8, 512, 4, mr, ml, sd + 4, TD_MIXED_W, 0, what);
			const int r22[2] = { 2, 2 };
			int l22[4] = { 200001, 200002, 150000, 150001 };
			snprintf(what, sizeof what, "cluster %s: 2 x 2 long rows, top-1024", size[v]);
			wgmma_rows_case(STRATA_INDEX_MXFP4, 1024, 2, r22, l22, sd + 5, TD_RANDOM, 0, what);
			int r16[16], l64[64];
			for (int i = 0; i < 16; i++)
				r16[i] = 4;
			for (int i = 0; i < 64; i++)
				l64[i] = 40000 + 97 * i;
			snprintf(what, sizeof what, "cluster %s: 16 requests of 4 rows", size[v]);
			wgmma_rows_case(STRATA_INDEX_FP8, 512, 16, r16, l64, sd + 6, TD_RANDOM, 0, what);
		}
		unsetenv("STRATA_IDX_FCL_ALL");
		unsetenv("STRATA_IDX_FCL");
		unsetenv("STRATA_IDX_FCL_LOC");
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("gpu_indexer");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 500);
	tcase_add_test(tc, hand_computed);
	tcase_add_test(tc, mixed_batches);
	tcase_add_test(tc, adversarial_ties);
	tcase_add_test(tc, odd_geometry);
	tcase_add_test(tc, long_context);
	tcase_add_test(tc, fp8_queries);
	tcase_add_test(tc, wgmma_scan);
	suite_add_tcase(s, tc);
	TCase *tw = tcase_create("waves");
	tcase_set_timeout(tw, 500);
	tcase_add_test(tw, wgmma_waves);
	suite_add_tcase(s, tw);
	TCase *tb = tcase_create("ranges");
	tcase_set_timeout(tb, 500);
	tcase_add_test(tb, wgmma_ranges);
	suite_add_tcase(s, tb);
	TCase *tp = tcase_create("copies");
	tcase_set_timeout(tp, 500);
	tcase_add_test(tp, wgmma_copies);
	suite_add_tcase(s, tp);
	TCase *tq = tcase_create("sampled");
	tcase_set_timeout(tq, 500);
	tcase_add_test(tq, wgmma_sampled);
	suite_add_tcase(s, tq);
	TCase *tk = tcase_create("cluster");
	tcase_set_timeout(tk, 500);
	tcase_add_test(tk, filter_cluster);
	suite_add_tcase(s, tk);
	return s;
}

int main(void)
{
	/* a line at a time: a run cut short (a timeout) still shows each check it passed */
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_require_gpu();
	strata_dev_config cfg = STRATA_DEV_CONFIG_INIT;
	cfg.backend = STRATA_BACKEND_GPU;
	if (strata_dev_open(&cfg, &dev)) {
		printf("cannot open the GPU\n");
		return 1;
	}
	/* No fork: the CUDA context of this process does not survive fork(). */
	SRunner *sr = srunner_create(suite());
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	strata_dev_close(dev);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
