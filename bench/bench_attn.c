/* `strata bench attn`: the sparse MQA attention kernel (strata_k_attn) alone.
 *
 * Rows 1, 8, 32 x lists of 512 selected entries (a CSA layer) and 8,192 C128 entries
 * (an HCA layer at 1M context), each plus a 128-entry window, 64 heads (V4-Flash;
 * --heads 128 for V4-Pro). Per point: the event-timed median of a call with the split
 * scratch (what the engine runs) and without it (unsplit), the bytes of the entries a
 * call reads (rows x entries x 584), and as the floor measured in the same run a
 * device-to-device copy of that many bytes; ratio = floor / kernel time. GFLOP/s
 * counts 4 x 512 flops per (row, head, entry): q.k and p.v.
 *
 * Both points are timed with each kernel: the fp32 one (the engine's) and the
 * tensor-core one (tensor_cores = 1: rows "attn split tc" / "attn unsplit tc").
 *
 * --check compares the first rows (up to 4) of every timed configuration with the
 * CPU twin within STRATA_ATTN_GPU_RTOL (TC_RTOL for the tensor-core rows) / ATOL
 * (kernels.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

#define D 512

static const char *usage =
	"usage: strata bench attn [--rows 1,8,32] [--lists 512,8192] [--window N]\n"
	"                         [--heads N] [common options]\n"
	"  sparse attention time per call (split and unsplit; fp32 and tensor cores) vs a\n"
	"  device-to-device copy of the entry bytes it reads; GFLOP/s.\n"
	"  --quick: rows 1,4, lists 512,1024.";

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static float rng_unit(uint64_t *s) /* [-1, 1) */
{
	return (float)((rng_next(s) >> 40) * (1.0 / (1ull << 23))) - 1.0f;
}

static int parse_ints(const char *s, int *out, int max)
{
	int n = 0;
	char buf[256];
	snprintf(buf, sizeof buf, "%s", s);
	for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
		uint64_t v;
		if (n == max || strata_parse_count(tok, &v) || v > (1u << 20))
			return -1;
		out[n++] = (int)v;
	}
	return n;
}

typedef bench_timer timer;

typedef struct actx {
	timer *t;
	strata_attn_params p;
	void *dst, *src;
	size_t bytes;
} actx;

static int run_attn(void *v)
{
	actx *c = v;
	return strata_k_attn(c->t->dev, &c->p, c->t->s);
}
static int run_copy(void *v)
{
	actx *c = v;
	return strata_dev_copy(c->t->dev, c->dst, c->src, c->bytes, c->t->s);
}

static double time_us(timer *t, int (*fn)(void *), actx *c, const bench_opts *o, bench_stats *st)
{
	return bench_timer_us(t, fn, c, o->warmup, o->reps, st);
}

/* The first n_chk rows of the device result against the CPU twin. 0 ok, 1 mismatch,
 * -1 error. */
static int check_rows(timer *t, const strata_attn_params *hp, int n_chk, const float *dout,
		      const float *dlse)
{
	size_t n = (size_t)n_chk * hp->heads;
	float *co = malloc(n * D * sizeof *co), *cl = malloc(n * sizeof *cl);
	float *go = malloc(n * D * sizeof *go), *gl = malloc(n * sizeof *gl);
	int bad = -1;
	if (!co || !cl || !go || !gl)
		goto out;
	strata_attn_params c = *hp;
	c.n_rows = n_chk;
	c.out = co;
	c.lse = cl;
	c.scratch = NULL;
	c.scratch_bytes = 0;
	if (strata_k_attn_cpu(&c) || strata_dev_copy(t->dev, go, dout, n * D * sizeof *go, NULL) ||
	    strata_dev_copy(t->dev, gl, dlse, n * sizeof *gl, NULL) || strata_dev_sync(t->dev))
		goto out;
	bad = 0;
	const float rtol = hp->tensor_cores ? STRATA_ATTN_GPU_TC_RTOL : STRATA_ATTN_GPU_RTOL;
	for (size_t i = 0; i < n; i++) {
		float mx = 0;
		for (int d = 0; d < D; d++)
			mx = fmaxf(mx, fabsf(co[i * D + d]));
		for (int d = 0; d < D; d++)
			bad |= !(fabsf(go[i * D + d] - co[i * D + d]) <= rtol * mx + 1e-30f);
		if (isinf(cl[i]))
			bad |= !(isinf(gl[i]) && gl[i] < 0);
		else
			bad |= !(fabsf(gl[i] - cl[i]) <= STRATA_ATTN_GPU_ATOL * fmaxf(1.0f, fabsf(cl[i])));
	}
out:
	free(co);
	free(cl);
	free(go);
	free(gl);
	return bad;
}

/* One (rows, list) point: split and unsplit kernel rows and the copy floor. */
static int run_point(bench_out *bo, const bench_opts *o, timer *t, int rows, int heads,
		     int n_idx, int n_win)
{
	const int B = 64, n_tot = n_idx + n_win;
	/* Selected entries come from a pool 4x the list (at least 16K entries), so reads
	 * scatter as top-k's do; the window ring has its own 128-entry pool per row. */
	int pool_n = n_idx * 4 < 16384 ? 16384 : n_idx * 4;
	int win_n = rows * (n_win > 0 ? n_win : 1);
	size_t pool_bytes = (size_t)((pool_n + B - 1) / B) * strata_main_block_stride(B);
	size_t win_bytes = (size_t)((win_n + B - 1) / B) * strata_main_block_stride(B);
	size_t qn = (size_t)rows * heads * D;
	size_t read_bytes = (size_t)rows * n_tot * STRATA_MAIN_ENTRY_BYTES;
	uint64_t seed = o->seed + (uint64_t)rows * 7919 + (uint64_t)n_idx;
	int fails = 0, err = 0;
	strata_dev *dev = t->dev;
	uint8_t *pool = malloc(pool_bytes), *wpool = malloc(win_bytes);
	float *src = malloc((size_t)D * 4096 * sizeof *src);
	float *q = malloc(qn * sizeof *q), *sink = malloc((size_t)heads * sizeof *sink);
	int32_t *idx = malloc(((size_t)rows * n_idx + 1) * sizeof *idx);
	int32_t *win = malloc(((size_t)rows * n_win + 1) * sizeof *win);
	void *d_pool = NULL, *d_wpool = NULL, *d_q = NULL, *d_sink = NULL, *d_idx = NULL;
	void *d_win = NULL, *d_out = NULL, *d_lse = NULL, *d_scr = NULL, *d_a = NULL, *d_b = NULL;
	if (!pool || !wpool || !src || !q || !sink || !idx || !win) {
		err = 1;
		goto out;
	}
	/* Pools encoded by the CPU twin from values of the V4 range (NoPE ~3, RoPE ~0.5),
	 * 4,096 entries at a time. */
	for (int pass = 0; pass < 2 && !err; pass++) {
		uint8_t *pb = pass ? wpool : pool;
		int n = pass ? win_n : pool_n;
		for (int e0 = 0; e0 < n; e0 += 4096) {
			int m = n - e0 < 4096 ? n - e0 : 4096;
			int64_t *slots = malloc((size_t)m * sizeof *slots);
			if (!slots) {
				err = 1;
				break;
			}
			for (int i = 0; i < m; i++)
				slots[i] = e0 + i;
			for (size_t i = 0; i < (size_t)m * D; i++)
				src[i] = (i % D < 448 ? 3.0f : 0.5f) * rng_unit(&seed);
			strata_main_encode_params ep = { .src = src, .slots = slots, .n = m, .B = B,
							 .pool = pb };
			err = strata_k_main_encode_cpu(&ep) != 0;
			free(slots);
			if (err)
				break;
		}
	}
	for (size_t i = 0; i < qn; i++)
		q[i] = rng_unit(&seed);
	for (int h = 0; h < heads; h++)
		sink[h] = rng_unit(&seed);
	for (size_t i = 0; i < (size_t)rows * n_idx; i++)
		idx[i] = (int32_t)(rng_next(&seed) % (uint64_t)pool_n);
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < n_win; j++)
			win[(size_t)r * n_win + j] = r * n_win + j;
	if (err || strata_dev_alloc(dev, pool_bytes, &d_pool) ||
	    strata_dev_alloc(dev, win_bytes, &d_wpool) || strata_dev_alloc(dev, qn * 4, &d_q) ||
	    strata_dev_alloc(dev, (size_t)heads * 4, &d_sink) ||
	    strata_dev_alloc(dev, ((size_t)rows * n_idx + 1) * 4, &d_idx) ||
	    strata_dev_alloc(dev, ((size_t)rows * n_win + 1) * 4, &d_win) ||
	    strata_dev_alloc(dev, qn * 4, &d_out) ||
	    strata_dev_alloc(dev, (size_t)rows * heads * 4, &d_lse) ||
	    strata_dev_alloc(dev, read_bytes, &d_a) || strata_dev_alloc(dev, read_bytes, &d_b) ||
	    strata_dev_copy(dev, d_pool, pool, pool_bytes, NULL) ||
	    strata_dev_copy(dev, d_wpool, wpool, win_bytes, NULL) ||
	    strata_dev_copy(dev, d_q, q, qn * 4, NULL) ||
	    strata_dev_copy(dev, d_sink, sink, (size_t)heads * 4, NULL) ||
	    strata_dev_copy(dev, d_idx, idx, ((size_t)rows * n_idx + 1) * 4, NULL) ||
	    strata_dev_copy(dev, d_win, win, ((size_t)rows * n_win + 1) * 4, NULL) ||
	    strata_dev_memset(dev, d_a, 0x3c, read_bytes, NULL) || strata_dev_sync(dev)) {
		bench_out_note(bo, "rows=%d list=%d+%d: setup failed, skipped", rows, n_idx, n_win);
		fails++;
		goto out;
	}
	actx c = { t };
	c.p = (strata_attn_params){ .n_rows = rows, .heads = heads,
				    .scale = 0.044194173824159216f, .q = d_q, .sink = d_sink,
				    .pool = d_pool, .B = B, .idx = d_idx, .n_idx = n_idx,
				    .win_pool = d_wpool, .win_B = B, .win_idx = d_win,
				    .n_win = n_win, .out = d_out, .lse = d_lse };
	c.dst = d_b;
	c.src = d_a;
	c.bytes = read_bytes;
	strata_attn_params hp = c.p; /* host twin of the inputs, for --check */
	hp.q = q;
	hp.sink = sink;
	hp.pool = pool;
	hp.idx = idx;
	hp.win_pool = wpool;
	hp.win_idx = win;
	size_t sb = strata_k_attn_scratch(dev, &c.p);
	if (sb && strata_dev_alloc(dev, sb, &d_scr))
		sb = 0;
	bench_stats st = { 0 };
	double floor_us = time_us(t, run_copy, &c, o, &st);
	double floor_min = st.min;
	double flop = 4.0 * D * (double)rows * heads * n_tot;
	char list[32];
	snprintf(list, sizeof list, "%d+%d", n_idx, n_win);
	bench_out_row(bo, "rows", bench_fmt("%.0f", rows), "list", list, "heads",
		      bench_fmt("%.0f", heads), "method", "d2d copy (floor)", "median_us",
		      bench_fmt("%.2f", floor_us), "min_us", bench_fmt("%.2f", floor_min),
		      "read_MB", bench_fmt("%.3f", read_bytes / 1e6), "GBps",
		      bench_fmt("%.1f", read_bytes / (floor_us * 1e3)), "GFLOPs", "-", "ratio",
		      "1.000", "check", "-", NULL);
	for (int k = 0; k < 4; k++) {
		const int tc = k >> 1, split = !(k & 1);
		if (split && !sb)
			continue; /* this shape never splits: the unsplit row is the engine's */
		if (tc && !strata_dev_is_gpu(dev))
			continue; /* the CPU twin has one kernel */
		const char *method = tc ? (split ? "attn split tc" : "attn unsplit tc")
				   : split ? "attn split (engine)"
				   : sb    ? "attn unsplit"
					   : "attn (engine)";
		c.p.tensor_cores = tc;
		hp.tensor_cores = tc; /* check_rows' tolerance (the CPU twin ignores it) */
		c.p.scratch = split ? d_scr : NULL;
		c.p.scratch_bytes = split ? sb : 0;
		double us = time_us(t, run_attn, &c, o, &st);
		if (us < 0) {
			bench_out_note(bo, "rows=%d list=%s: %s failed", rows, list, method);
			fails++;
			continue;
		}
		const char *chk = "-";
		if (o->check) {
			int bad = check_rows(t, &hp, rows < 4 ? rows : 4, d_out, d_lse);
			chk = bad ? "FAIL" : "ok";
			fails += bad != 0;
		}
		bench_out_row(bo, "rows", bench_fmt("%.0f", rows), "list", list, "heads",
			      bench_fmt("%.0f", heads), "method", method, "median_us",
			      bench_fmt("%.2f", us), "min_us", bench_fmt("%.2f", st.min),
			      "read_MB", bench_fmt("%.3f", read_bytes / 1e6), "GBps",
			      bench_fmt("%.1f", read_bytes / (us * 1e3)), "GFLOPs",
			      bench_fmt("%.0f", flop / (us * 1e3)), "ratio",
			      bench_fmt("%.3f", floor_us / us), "check", chk, NULL);
	}
out:
	strata_dev_free(dev, d_pool);
	strata_dev_free(dev, d_wpool);
	strata_dev_free(dev, d_q);
	strata_dev_free(dev, d_sink);
	strata_dev_free(dev, d_idx);
	strata_dev_free(dev, d_win);
	strata_dev_free(dev, d_out);
	strata_dev_free(dev, d_lse);
	strata_dev_free(dev, d_scr);
	strata_dev_free(dev, d_a);
	strata_dev_free(dev, d_b);
	free(pool);
	free(wpool);
	free(src);
	free(q);
	free(sink);
	free(idx);
	free(win);
	return fails + err;
}

int strata_bench_attn(int argc, char **argv)
{
	bench_opts o;
	if (bench_parse_common(&argc, argv, &o, usage))
		return 2;
	int rows[8], lists[8], n_rows = 0, n_lists = 0, heads = 64, n_win = 128;
	for (int i = 1; i < argc; i++) {
		const char *next = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--rows") && next) {
			n_rows = parse_ints(argv[++i], rows, 8);
		} else if (!strcmp(argv[i], "--lists") && next) {
			n_lists = parse_ints(argv[++i], lists, 8);
		} else if (!strcmp(argv[i], "--heads") && next) {
			heads = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--window") && next) {
			n_win = atoi(argv[++i]);
		} else {
			fprintf(stderr, "attn: unknown argument '%s'\n%s\n", argv[i], usage);
			return 2;
		}
		if (n_rows < 0 || n_lists < 0 || heads < 1 || heads > 1024 || n_win < 0 ||
		    n_win > 65536) {
			fprintf(stderr, "attn: bad value for %s\n", argv[i - 1]);
			return 2;
		}
	}
	for (int i = 0; i < n_rows; i++)
		if (rows[i] < 1) {
			fprintf(stderr, "attn: rows must be positive\n");
			return 2;
		}
	if (!n_rows) {
		static const int full[] = { 1, 8, 32 }, quick[] = { 1, 4 };
		n_rows = o.quick ? 2 : 3;
		memcpy(rows, o.quick ? quick : full, (size_t)n_rows * sizeof *rows);
	}
	if (!n_lists) {
		lists[0] = 512;
		lists[1] = o.quick ? 1024 : 8192;
		n_lists = 2;
	}
	strata_dev_config dc = STRATA_DEV_CONFIG_INIT;
	dc.backend = o.backend;
	strata_dev *dev;
	int err = strata_dev_open(&dc, &dev);
	if (err) {
		fprintf(stderr, "attn: no device: %s\n", strata_strerror(err));
		return 2;
	}
	timer t;
	if (bench_timer_open(dev, &t)) {
		strata_dev_close(dev);
		return 2;
	}
	bench_out *bo = bench_out_open(&o, "attn", dev);
	bench_out_note(bo, "sparse MQA attention, %d heads, 512 dims, window %d; floor = "
			   "device-to-device copy of the entry bytes read (rows x entries x 584); "
			   "ratio = floor / time",
		       heads, n_win);
	int fails = 0;
	for (int li = 0; li < n_lists; li++)
		for (int ri = 0; ri < n_rows; ri++)
			fails += run_point(bo, &o, &t, rows[ri], heads, lists[li], n_win);
	bench_out_close(bo);
	bench_timer_close(&t);
	strata_dev_close(dev);
	if (fails)
		fprintf(stderr, "attn: %d check(s) failed\n", fails);
	return fails ? 1 : 0;
}
