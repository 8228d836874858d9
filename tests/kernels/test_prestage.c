/* Early staging of hot-cache misses (strata_k_attn_prestage) on the CPU twin, the index
 * map's use of its marks (stage_map, epoch, miss_counts), and the indexer's scores
 * that feed it (strata_k_indexer_scores).
 *
 * The expected marks are derived here independently of the twin: a row with limit
 * <= topk takes every entry; otherwise t is the lowest of the row's last_scores and
 * the candidates are the entries j < limit with ord(score) + slack * 2^18 >= ord(t)
 * (ord: the order-preserving map of floats to integers), none when t is +inf. A row
 * marks exactly its non-resident candidates below map_stride when cap is large
 * enough, else exactly cap of them. Everything else (other words of stage_map, other
 * stage entries, block padding) must keep its bytes. */
#include <check.h>
#include <errno.h>
#include <float.h>
#include <math.h>

#include "kernels/attention_int.h"
#include "indexer_tdata.h"

#define TOL_REL 2e-5 /* test_indexer.c's: fp32 sums against the double reference */

enum { M_WIDE, M_CLUSTER, M_EQUAL, M_ZERO, M_NEG };
/* last_scores: the row's exact top-k scores now (a perfect guess: the candidates
 * cover the top-k), the same jittered (an imperfect one), or +inf (no last selection) */
enum { LS_EXACT, LS_JITTER, LS_NONE };

/* A prestage case on host memory. Rows map to requests r % n_maps; request m owns
 * host entries m * hs .. m * hs + hs - 1 (row_base) and map row m, whose resident ids
 * sit at hot slot m * hs + id (so a copy of the host tier serves as the hot pool). */
typedef struct pcfg {
	int n_rows, topk, map_stride, n_maps, resident_pm, host_B, stage_B, encode;
	const int *lim, *mode;
	uint64_t seed;
	int slack, last_mode;
} pcfg;

typedef struct pc {
	pcfg f;
	strata_attn_prestage_params p;
	int hs, need; /* need: the most candidate misses of any row */
	int32_t *limit, *row_map, *row_base, *map;
	float *scores, *last; /* last: [n_rows][topk] */
	uint8_t *host, *stage;
	size_t host_bytes, stage_bytes;
	int64_t n_stage;
} pc;

static size_t pool_bytes(int64_t n, int B)
{
	return (size_t)((n + B - 1) / B) * attn_block_stride(B);
}

static int entry_eq(const uint8_t *a, int Ba, int64_t ea, const uint8_t *b, int Bb, int64_t eb)
{
	return !memcmp(attn_entry_data(a, Ba, ea), attn_entry_data(b, Bb, eb), 576) &&
	       !memcmp(attn_entry_scales(a, Ba, ea), attn_entry_scales(b, Bb, eb), 8);
}

static void entry_copy(uint8_t *d, int Bd, int64_t ed, const uint8_t *s, int Bs, int64_t es)
{
	memcpy((uint8_t *)attn_entry_data(d, Bd, ed), attn_entry_data(s, Bs, es), 576);
	memcpy((uint8_t *)attn_entry_scales(d, Bd, ed), attn_entry_scales(s, Bs, es), 8);
}

static void fill_random(void *b, size_t n, uint64_t *rng)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t x = tu_next(rng);
		memcpy((uint8_t *)b + i, &x, n - i < 8 ? n - i : 8);
	}
}

static float gen_score(int mode, int j, uint64_t *rng)
{
	switch (mode) {
	case M_CLUSTER: return 1.0f + 0.05f * tu_uniform(rng); /* near-ties: many candidates */
	case M_EQUAL: return 0.75f;
	case M_ZERO: return (j & 1) ? -0.0f : 0.0f; /* every ReLU zero; both zeros */
	case M_NEG: return -ldexpf(1.0f + 0.5f * (tu_uniform(rng) + 1.0f), (int)(tu_next(rng) % 20) - 10);
	default: { /* both signs over [2^-18, 2^18), and zeros */
		float m = ldexpf(1.0f + 0.5f * (tu_uniform(rng) + 1.0f), (int)(tu_next(rng) % 36) - 18);
		if (tu_next(rng) % 32 == 0)
			m = 0.0f;
		return tu_next(rng) % 5 == 0 ? -m : m;
	}
	}
}

/* Scores: entries j >= limit hold FLT_MAX and unscored rows (limit <= topk) -inf, so a
 * kernel that read either would mark differently. */
static void pc_scores(pc *c, uint64_t *rng)
{
	for (int r = 0; r < c->f.n_rows; r++)
		for (size_t j = 0; j < c->p.score_stride; j++)
			c->scores[r * c->p.score_stride + j] =
				(int)j >= c->limit[r] ? FLT_MAX
				: c->limit[r] <= c->f.topk ? -INFINITY : gen_score(c->f.mode[r], (int)j, rng);
}

static const float *g_sc;
static int cmp_rank(const void *a, const void *b) /* score desc, then lower id */
{
	int x = *(const int *)a, y = *(const int *)b;
	if (g_sc[x] != g_sc[y])
		return g_sc[x] > g_sc[y] ? -1 : 1;
	return (x > y) - (x < y);
}

/* Row r's exact top-k (the indexer's selection rule) into top[limit]; with best, the
 * ids best first into best[topk]. */
static void row_top(const pc *c, int r, char *top, int *best)
{
	const int lim = c->limit[r], k = c->p.topk;
	memset(top, lim <= k, (size_t)lim);
	if (lim <= k)
		return;
	int *idx = malloc(sizeof *idx * (size_t)lim);
	for (int j = 0; j < lim; j++)
		idx[j] = j;
	g_sc = c->p.scores + (size_t)r * c->p.score_stride;
	qsort(idx, (size_t)lim, sizeof *idx, cmp_rank);
	for (int i = 0; i < k; i++) {
		top[idx[i]] = 1;
		if (best)
			best[i] = idx[i];
	}
	free(idx);
}

/* last_scores by the case's mode; NaN in rows with limit <= topk (never read). */
static void pc_last(pc *c, uint64_t *rng)
{
	const int k = c->p.topk;
	char *top = malloc((size_t)c->p.max_limit + 1);
	int *best = malloc(sizeof *best * (size_t)k);
	for (int r = 0; r < c->p.n_rows; r++) {
		float *ls = c->last + (size_t)r * k;
		const float *sc = c->p.scores + (size_t)r * c->p.score_stride;
		if (c->limit[r] > k)
			row_top(c, r, top, best);
		for (int i = 0; i < k; i++)
			ls[i] = c->limit[r] <= k ? NAN
				: c->f.last_mode == LS_NONE ? INFINITY
				: c->f.last_mode == LS_JITTER ? sc[best[i]] * (1.0f + 0.2f * tu_uniform(rng))
				: sc[best[i]];
	}
	free(top);
	free(best);
}

static void pc_make(pc *c, const pcfg *f)
{
	memset(c, 0, sizeof *c);
	c->f = *f;
	uint64_t rng = f->seed;
	const int R = f->n_rows, ms = f->map_stride;
	int ml = 0;
	for (int r = 0; r < R; r++)
		ml = f->lim[r] > ml ? f->lim[r] : ml;
	c->hs = ml > ms ? ml : ms;
	c->limit = malloc(sizeof(int32_t) * (size_t)(R + 1));
	c->row_map = malloc(sizeof(int32_t) * (size_t)(R + 1));
	c->row_base = malloc(sizeof(int32_t) * (size_t)(R + 1));
	for (int r = 0; r < R; r++) {
		c->limit[r] = f->lim[r];
		c->row_map[r] = r % f->n_maps;
		c->row_base[r] = c->row_map[r] * c->hs;
	}
	strata_attn_prestage_params *p = &c->p;
	p->n_rows = R;
	p->topk = f->topk;
	p->max_limit = ml;
	p->row_limit = c->limit;
	p->score_stride = (size_t)ml + 3; /* not the limit: rows must use the stride */
	p->scores = c->scores = malloc(sizeof(float) * ((size_t)R * p->score_stride + 1));
	pc_scores(c, &rng);
	p->last_scores = c->last = malloc(sizeof(float) * ((size_t)R * f->topk + 1));
	pc_last(c, &rng);
	p->slack = f->slack;
	p->map = c->map = malloc(sizeof(int32_t) * (size_t)f->n_maps * ms);
	for (int i = 0; i < f->n_maps * ms; i++)
		c->map[i] = (int)(tu_next(&rng) % 1000) < f->resident_pm ? (i / ms) * c->hs + i % ms : -1;
	const int64_t nh = (int64_t)f->n_maps * c->hs;
	c->host_bytes = pool_bytes(nh, f->host_B);
	p->host = c->host = malloc(c->host_bytes);
	fill_random(c->host, c->host_bytes, &rng);
	if (f->encode) { /* real entries, for attention over them */
		float *src = malloc(sizeof(float) * (size_t)nh * 512);
		for (size_t i = 0; i < (size_t)nh * 512; i++)
			src[i] = (i % 512 < 448 ? 3.0f : 0.5f) * tu_uniform(&rng);
		strata_main_encode_params ep = { .src = src, .n = (int)nh, .B = f->host_B, .pool = c->host };
		ck_assert_int_eq(strata_k_main_encode_cpu(&ep), 0);
		free(src);
	}
	p->row_map = c->row_map;
	p->map_stride = ms;
	p->row_base = c->row_base;
	p->host_B = f->host_B;
	p->stage_B = f->stage_B;
	p->scratch_bytes = strata_k_attn_prestage_scratch(R);
	p->scratch = calloc(1, p->scratch_bytes + 1);
}

/* Order-preserving map of floats to integers (+0 and -0 equal), as kernels.h states. */
static uint32_t ord(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if (!(u & 0x7fffffffu))
		return 0x80000000u;
	return u >> 31 ? ~u : u | 0x80000000u;
}

/* Row r's candidates into cand[limit] (the rule in the header comment); returns the
 * number of non-resident candidates below map_stride (what a large enough cap marks). */
static int pc_expect(const pc *c, int r, char *cand)
{
	const strata_attn_prestage_params *p = &c->p;
	const int lim = c->limit[r], k = p->topk;
	memset(cand, lim <= k, (size_t)lim);
	if (lim > k) {
		const float *sc = p->scores + (size_t)r * p->score_stride;
		const float *ls = p->last_scores + (size_t)r * k;
		float t = INFINITY;
		for (int i = 0; i < k; i++)
			t = ls[i] < t ? ls[i] : t;
		for (int j = 0; j < lim && t != INFINITY; j++)
			cand[j] = (uint64_t)ord(sc[j]) + ((uint64_t)p->slack << 18) >= ord(t);
	}
	int n = 0;
	for (int j = 0; j < lim && j < p->map_stride; j++)
		n += cand[j] && p->map[(size_t)c->row_map[r] * p->map_stride + j] < 0;
	return n;
}

/* Sizes the stage for cap slots per row (cap < 0: exactly the most any row needs),
 * after the map's own entries [0, n_rows * topk), at an offset that is not a block
 * start. The stage starts random; stage_map holds marks of epochs below stale_below
 * (0: all zero, as a fresh one). */
static void pc_stage(pc *c, int cap, uint64_t stale_below, uint64_t *rng)
{
	strata_attn_prestage_params *p = &c->p;
	char *cand = malloc((size_t)p->max_limit + 1);
	c->need = 0;
	for (int r = 0; r < p->n_rows; r++) {
		int n = pc_expect(c, r, cand);
		c->need = n > c->need ? n : c->need;
	}
	free(cand);
	p->cap = cap < 0 ? c->need : cap;
	p->stage_first = (int64_t)p->n_rows * p->topk + 3;
	c->n_stage = p->stage_first + (int64_t)p->n_rows * p->cap;
	c->stage_bytes = pool_bytes(c->n_stage, p->stage_B);
	c->stage = malloc(c->stage_bytes);
	fill_random(c->stage, c->stage_bytes, rng);
	p->stage = c->stage;
	size_t nw = (size_t)p->n_rows * p->map_stride;
	p->stage_map = calloc(nw + 1, sizeof(uint64_t));
	for (size_t i = 0; stale_below && i < nw; i++)
		p->stage_map[i] = (tu_next(rng) % stale_below) << 24 | (tu_next(rng) & 0xffffff);
}

static void pc_free(pc *c)
{
	free(c->limit); free(c->row_map); free(c->row_base); free(c->map); free(c->scores);
	free(c->last); free(c->host); free(c->stage); free(c->p.stage_map); free(c->p.scratch);
}

/* Checks stage_map sm and stage st after a call with epoch (sm0, st0: before it):
 * (a) with full (cap >= need) the marked set is exactly the non-resident candidates
 * below map_stride, otherwise exactly min(cap, candidates) of them; (b) nothing
 * resident, >= limit or outside the candidates is marked, other words keep their
 * value; (c) entries lie in the row's slots, each used once, holding the host entry's
 * bytes; nothing else of the stage changes. Returns the number of marks. */
static long pc_check(const pc *c, const uint64_t *sm, const uint8_t *st, const uint64_t *sm0,
		     const uint8_t *st0, uint64_t epoch, int full)
{
	const strata_attn_prestage_params *p = &c->p;
	char *cand = malloc((size_t)p->max_limit + 1), *used = calloc((size_t)c->n_stage, 1);
	uint8_t *want = malloc(c->stage_bytes);
	memcpy(want, st0, c->stage_bytes);
	long total = 0;
	for (int r = 0; r < p->n_rows; r++) {
		const int lim = c->limit[r], nexp = pc_expect(c, r, cand);
		const int32_t *map = p->map + (size_t)c->row_map[r] * p->map_stride;
		const int64_t lo = p->stage_first + (int64_t)r * p->cap;
		int n = 0;
		for (int j = 0; j < p->map_stride; j++) {
			const size_t w = (size_t)r * p->map_stride + j;
			if (sm[w] >> 24 != epoch) {
				ck_assert_msg(sm[w] == sm0[w], "row %d id %d: word changed unmarked", r, j);
				continue;
			}
			const int64_t e = (int64_t)(sm[w] & 0xffffff);
			ck_assert_msg(j < lim && map[j] < 0 && cand[j],
				      "row %d id %d marked (limit %d, map %d)", r, j, lim, map[j]);
			ck_assert_msg(e >= lo && e < lo + p->cap, "row %d id %d: entry %lld", r, j,
				      (long long)e);
			ck_assert_msg(!used[e], "entry %lld given twice", (long long)e);
			used[e] = 1;
			ck_assert_msg(entry_eq(st, p->stage_B, e, p->host, p->host_B, c->row_base[r] + j),
				      "row %d id %d: staged bytes differ", r, j);
			entry_copy(want, p->stage_B, e, p->host, p->host_B, c->row_base[r] + j);
			n++;
		}
		ck_assert_msg(n == (full || nexp < p->cap ? nexp : p->cap),
			      "row %d: %d marked, %d candidates, cap %d", r, n, nexp, p->cap);
		total += n;
	}
	ck_assert_msg(!memcmp(st, want, c->stage_bytes), "stage bytes outside the marks changed");
	free(cand); free(used); free(want);
	return total;
}

/* (d) the scratch is all zero after the call. */
static void check_zero(const void *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(!((const uint8_t *)b)[i], "scratch byte %zu nonzero", i);
}

static long pc_run(pc *c, uint64_t epoch, int full)
{
	const size_t nw = (size_t)c->p.n_rows * c->p.map_stride;
	uint64_t *sm0 = malloc(sizeof *sm0 * (nw + 1));
	uint8_t *st0 = malloc(c->stage_bytes);
	memcpy(sm0, c->p.stage_map, sizeof *sm0 * nw);
	memcpy(st0, c->stage, c->stage_bytes);
	unsigned long long staged = 5; /* the call adds to it */
	c->p.epoch = epoch;
	c->p.n_staged = &staged;
	ck_assert_int_eq(strata_k_attn_prestage_cpu(&c->p), 0);
	c->p.n_staged = NULL;
	check_zero(c->p.scratch, c->p.scratch_bytes);
	long n = pc_check(c, c->p.stage_map, c->stage, sm0, st0, epoch, full);
	ck_assert_uint_eq(staged, 5 + (unsigned long long)n);
	free(sm0);
	free(st0);
	return n;
}

/* Each row's exact top-k as the indexer lists it: ascending ids, -1 padding. */
static int32_t *topk_lists(const pc *c)
{
	const int R = c->p.n_rows, k = c->p.topk;
	int32_t *ids = malloc(sizeof *ids * (size_t)R * k);
	char *top = malloc((size_t)c->p.max_limit + 1);
	for (int r = 0; r < R; r++) {
		row_top(c, r, top, NULL);
		int n = 0;
		for (int j = 0; j < c->limit[r]; j++)
			if (top[j])
				ids[(size_t)r * k + n++] = j;
		while (n < k)
			ids[(size_t)r * k + n++] = -1;
	}
	free(top);
	return ids;
}

/* The index map over ids (width W) in staged mode with p's stage_map and epoch:
 * hit -> its slot; marked with epoch -> -2 - entry (that entry holds the host bytes),
 * nothing written to list entry i; other miss -> -2 - i with the bytes copied there.
 * Entries [0, n_rows * W) are poisoned first. cnt: hits, early, copied. */
static void map_check(const pc *c, const int32_t *ids, int W, uint64_t epoch, int32_t *out,
		      long cnt[3])
{
	const strata_attn_prestage_params *p = &c->p;
	const int64_t nl = (int64_t)p->n_rows * W;
	ck_assert(nl <= p->stage_first);
	for (int64_t i = 0; i < nl; i++) {
		memset((uint8_t *)attn_entry_data(p->stage, p->stage_B, i), 0xee, 576);
		memset((uint8_t *)attn_entry_scales(p->stage, p->stage_B, i), 0xee, 8);
	}
	uint8_t *want = malloc(c->stage_bytes);
	memcpy(want, p->stage, c->stage_bytes);
	unsigned long long mc[2] = { 7, 11 }; /* the map adds to them */
	strata_attn_map_params mp = { .n_rows = p->n_rows, .width = W, .ids = ids,
				      .row_base = p->row_base, .out = out, .map = p->map,
				      .row_map = p->row_map, .map_stride = p->map_stride,
				      .host = p->host, .host_B = p->host_B, .stage = p->stage,
				      .stage_B = p->stage_B, .stage_map = p->stage_map,
				      .epoch = epoch, .miss_counts = mc };
	ck_assert_int_eq(strata_k_attn_map_cpu(&mp), 0);
	cnt[0] = cnt[1] = cnt[2] = 0;
	for (int64_t i = 0; i < nl; i++) {
		const int r = (int)(i / W), id = ids[i];
		const int32_t v = id >= 0 && id < p->map_stride
					  ? p->map[(size_t)p->row_map[r] * p->map_stride + id] : -1;
		const uint64_t sv = id >= 0 && id < p->map_stride
					    ? p->stage_map[(size_t)r * p->map_stride + id] : 0;
		if (id < 0) {
			ck_assert_int_eq(out[i], -1);
		} else if (v >= 0) {
			ck_assert_int_eq(out[i], v);
			cnt[0]++;
		} else if (sv >> 24 == epoch) {
			const int64_t e = (int64_t)(sv & 0xffffff);
			ck_assert_int_eq(out[i], -2 - (int32_t)e);
			ck_assert(entry_eq(p->stage, p->stage_B, e, p->host, p->host_B, p->row_base[r] + id));
			cnt[1]++;
		} else {
			ck_assert_int_eq(out[i], -2 - (int32_t)i);
			entry_copy(want, p->stage_B, i, p->host, p->host_B, p->row_base[r] + id);
			cnt[2]++;
		}
	}
	ck_assert_msg(!memcmp(p->stage, want, c->stage_bytes), "map wrote the wrong stage entries");
	ck_assert_uint_eq(mc[0], 7 + (unsigned long long)cnt[1]);
	ck_assert_uint_eq(mc[1], 11 + (unsigned long long)cnt[2]);
	free(want);
}

/* In the topk-8 case (map_stride 4500): row 6 (limit 5000) ranks id 4700 first, past
 * map_stride; row 7 ranks id 200 first, a miss, so its stage_map word (where row 6's
 * id 4700 would be, read without the bound) is marked. last_scores follow. */
static void force_beyond(pc *c)
{
	c->scores[6 * c->p.score_stride + 4700] = 0x1p30f;
	c->scores[7 * c->p.score_stride + 200] = 0x1p30f;
	c->map[(size_t)c->row_map[7] * c->p.map_stride + 200] = -1;
	uint64_t rng = 1;
	pc_last(c, &rng);
}

/* gpu_prestage.c includes the case builder and checks above, not the tests below */
#ifndef PRESTAGE_HELPERS_ONLY

/* The threshold rule by hand, topk 4. Row 0 (limit 12, id 5 resident) has the scores
 * below; row 1 (limit 3 <= topk, id 1 resident) takes ids 0 and 2 whatever its
 * last_scores (NaN) say. Each scenario sets row 0's last selection and the slack; one
 * slack step is 1/32 of a power of two: from t = 1, slack 1 reaches 0.984375 exactly,
 * slack 32 reaches 0.5, and from t = -1, slack 32 reaches -2. */
START_TEST(threshold_by_hand)
{
	static const struct {
		float last[4];
		int slack;
		unsigned mask; /* expected marks of row 0, bit j */
	} sc[] = {
		{ { 1, 7, 9, 8 }, 0, 1u << 0 | 1u << 4 | 1u << 10 | 1u << 11 },
		{ { 7, 1, 9, 8 }, 1, 1u << 0 | 1u << 1 | 1u << 4 | 1u << 10 | 1u << 11 },
		{ { 9, 8, 7, 1 }, 32, 0xfff & ~(1u << 5 | 1u << 6 | 1u << 7 | 1u << 8) },
		{ { -1, 5, 5, 5 }, 32, 0xfff & ~(1u << 5) },                 /* down to -2 */
		{ { 0, -0.0f, 3, 3 }, 0, 0xfff & ~(1u << 5 | 1u << 6) },      /* both zeros */
		{ { -0.0f, 3, 3, 3 }, 0, 0xfff & ~(1u << 5 | 1u << 6) },
		{ { INFINITY, INFINITY, INFINITY, INFINITY }, 1024, 0 },     /* no selection */
		{ { -1e30f, 5, 5, 5 }, 1024, 0xfff & ~(1u << 5) },           /* floor at 0 */
		{ { 4, 5, 6, 4 }, 0, 1u << 11 },
		{ { FLT_TRUE_MIN, 5, 5, 5 }, 0, 0xfff & ~(1u << 5 | 1u << 6 | 1u << 7 | 1u << 8) },
		{ { -FLT_TRUE_MIN, 5, 5, 5 }, 0, 0xfff & ~(1u << 5 | 1u << 6) }, /* zeros above */
	};
	/* 1e30 lies within 1024 steps of +inf: only the no-selection rule keeps it out */
	const float row0[12] = { 1.0f, 0.984375f, nextafterf(0.984375f, 0), 0.5f, 2, 3, -1, 0,
				 -0.0f, 0.75f, 1.5f, 1e30f };
	int lim[2] = { 12, 3 }, mode[2] = { M_WIDE, M_WIDE };
	pcfg f = { 2, 4, 12, 2, 0, 64, 2, 0, lim, mode, 3, 0, LS_EXACT };
	pc c;
	pc_make(&c, &f);
	memcpy(c.scores, row0, sizeof row0);
	c.map[5] = 5;
	c.map[12 + 1] = 12 + 1;
	uint64_t rng = 5;
	pc_stage(&c, 12, 0, &rng);
	for (size_t s = 0; s < sizeof sc / sizeof *sc; s++) {
		memcpy(c.last, sc[s].last, sizeof sc[s].last);
		c.p.slack = sc[s].slack;
		const uint64_t e = s + 1;
		pc_run(&c, e, 1);
		unsigned got = 0;
		for (int j = 0; j < 12; j++)
			got |= (unsigned)(c.p.stage_map[j] >> 24 == e) << j;
		ck_assert_msg(got == sc[s].mask, "scenario %zu: marks %#x, want %#x", s, got, sc[s].mask);
		for (int j = 0; j < 3; j++)
			ck_assert_int_eq(c.p.stage_map[12 + j] >> 24 == e, j != 1);
	}
	pc_free(&c);
}
END_TEST

/* Random rows at topk 512 (limits 0, 1, k-1, k, k+1, 4097, 20000, a cluster, all
 * equal, all zero, all negative) and topk 8 with map_stride below a limit; last_scores
 * are each row's exact top-k now, so the candidates cover it: with cap exactly the
 * need, the map over each row's top-k finds every miss below map_stride staged. */
START_TEST(random_rows_full_cap)
{
	int lim[11] = { 0, 1, 511, 512, 513, 4097, 20000, 3001, 2999, 1500, 2500 };
	int mode[11] = { 0, 0, 0, 0, M_WIDE, M_WIDE, M_WIDE, M_CLUSTER, M_EQUAL, M_ZERO, M_NEG };
	int lim8[8] = { 0, 1, 7, 8, 9, 100, 5000, 4099 };
	int mode8[8] = { M_WIDE, M_WIDE, M_WIDE, M_WIDE, M_WIDE, M_CLUSTER, M_WIDE, M_WIDE };
	pcfg cfgs[2] = { { 11, 512, 20000, 4, 400, 64, 64, 0, lim, mode, 11, 6, LS_EXACT },
			 { 8, 8, 4500, 3, 300, 64, 2, 0, lim8, mode8, 12, 16, LS_EXACT } };
	for (int t = 0; t < 2; t++) {
		pc c;
		pc_make(&c, &cfgs[t]);
		if (t)
			force_beyond(&c);
		uint64_t rng = 100 + t;
		pc_stage(&c, -1, 5, &rng);
		ck_assert_int_gt(c.need, c.p.topk / 2);
		ck_assert_int_gt(pc_run(&c, 5, 1), 0);
		int32_t *ids = topk_lists(&c), *out = malloc(sizeof(int32_t) * (size_t)c.p.n_rows * c.p.topk);
		long cnt[3];
		map_check(&c, ids, c.p.topk, 5, out, cnt);
		ck_assert_int_gt(cnt[0], 0);
		ck_assert_int_gt(cnt[1], 0);
		long beyond = 0; /* top-k ids past map_stride (4700 of row 6 among them) */
		for (int i = 0; i < c.p.n_rows * c.p.topk; i++)
			beyond += ids[i] >= c.p.map_stride;
		ck_assert_int_eq(beyond > 0, t);
		ck_assert_int_eq(cnt[2], beyond); /* the map copies only those */
		free(ids);
		free(out);
		pc_free(&c);
	}
}
END_TEST

/* (f) a small cap: exactly cap marks in the rows with more candidates, and the map
 * copies the rest itself; (g) a second call with epoch + 1 after the residency and the
 * scores changed (last_scores: the first step's jittered): the first call's marks the
 * second did not renew are stale, and the map copies those misses instead of reading
 * the old entries. The dispatcher on a CPU device runs the twin. */
START_TEST(small_cap_and_new_epoch)
{
	int lim[6] = { 513, 4097, 20000, 3001, 300, 1024 };
	int mode[6] = { M_WIDE, M_WIDE, M_WIDE, M_CLUSTER, M_WIDE, M_EQUAL };
	pcfg f = { 6, 512, 20000, 2, 500, 64, 64, 0, lim, mode, 21, 6, LS_JITTER };
	pc c;
	pc_make(&c, &f);
	uint64_t rng = 22;
	pc_stage(&c, 100, 0, &rng);
	ck_assert_int_gt(c.need, 100);
	ck_assert_int_eq(pc_run(&c, 1, 0), 6 * 100);
	int32_t *ids = topk_lists(&c), *out = malloc(sizeof(int32_t) * 6 * 512);
	long cnt[3];
	map_check(&c, ids, 512, 1, out, cnt);
	ck_assert_int_gt(cnt[1], 0);
	ck_assert_int_gt(cnt[2], 0);

	/* epoch 2: flip about a third of the residency, new scores, the same slots */
	for (int i = 0; i < 2 * 20000; i++)
		if (tu_next(&rng) % 3 == 0)
			c.map[i] = c.map[i] >= 0 ? -1 : (i / 20000) * c.hs + i % 20000;
	pc_scores(&c, &rng);
	const size_t nw = (size_t)6 * 20000;
	uint64_t *sm0 = malloc(sizeof *sm0 * nw);
	uint8_t *st0 = malloc(c.stage_bytes);
	memcpy(sm0, c.p.stage_map, sizeof *sm0 * nw);
	memcpy(st0, c.stage, c.stage_bytes);
	strata_dev_config cfg = STRATA_DEV_CONFIG_INIT;
	cfg.backend = STRATA_BACKEND_CPU;
	strata_dev *d = NULL;
	ck_assert_int_eq(strata_dev_open(&cfg, &d), 0);
	c.p.epoch = 2;
	ck_assert_int_eq(strata_k_attn_prestage(d, &c.p, NULL), 0);
	check_zero(c.p.scratch, c.p.scratch_bytes);
	ck_assert_int_eq(pc_check(&c, c.p.stage_map, c.stage, sm0, st0, 2, 0), 6 * 100);
	long stale = 0;
	for (int i = 0; i < 6 * 512; i++) {
		int r = i / 512, id = ids[i];
		stale += id >= 0 && c.map[(size_t)c.row_map[r] * 20000 + id] < 0 &&
			 c.p.stage_map[(size_t)r * 20000 + id] >> 24 == 1;
	}
	ck_assert_int_gt(stale, 0); /* the case must exercise stale marks */
	map_check(&c, ids, 512, 2, out, cnt); /* the old lists: stale marks are copied */
	ck_assert_int_ge(cnt[2], stale);
	strata_dev_close(d);
	free(sm0); free(st0); free(ids); free(out);
	pc_free(&c);
}
END_TEST

/* Attention over the staged list (hits in the hot pool, early-staged and late-copied
 * misses in the stage as pool2) is bit-identical to attention over the same entries
 * all in the host pool. Jittered last_scores and cap 40 leave misses to the map. */
START_TEST(attention_over_staged_list)
{
	enum { R = 3, H = 4, K = 64, D = 512 };
	int lim[R] = { 300, 40, 500 }, mode[R] = { M_WIDE, M_WIDE, M_CLUSTER };
	pcfg f = { R, K, 512, 2, 350, 64, 16, 1, lim, mode, 31, 0, LS_JITTER };
	pc c;
	pc_make(&c, &f);
	uint64_t rng = 32;
	pc_stage(&c, 40, 0, &rng);
	pc_run(&c, 1, 0);
	int32_t *ids = topk_lists(&c), list[R * K], direct[R * K];
	long cnt[3];
	map_check(&c, ids, K, 1, list, cnt);
	ck_assert(cnt[0] > 0 && cnt[1] > 0 && cnt[2] > 0);
	for (int i = 0; i < R * K; i++)
		direct[i] = ids[i] < 0 ? -1 : c.row_base[i / K] + ids[i];
	float *q = malloc(sizeof(float) * R * H * D), *oa = malloc(sizeof(float) * R * H * D);
	float *ob = malloc(sizeof(float) * R * H * D), la[R * H], lb[R * H];
	for (int i = 0; i < R * H * D; i++)
		q[i] = tu_uniform(&rng);
	strata_attn_params a = { .n_rows = R, .heads = H, .scale = 0.044f, .q = q, .pool = c.host,
				 .B = 64, .idx = direct, .n_idx = K, .out = oa, .lse = la };
	strata_attn_params b = a; /* the hot pool: a copy of the host tier, same slots */
	b.idx = list;
	b.pool2 = c.stage;
	b.B2 = c.p.stage_B;
	b.out = ob;
	b.lse = lb;
	ck_assert_int_eq(strata_k_attn_cpu(&a), 0);
	ck_assert_int_eq(strata_k_attn_cpu(&b), 0);
	ck_assert_mem_eq(oa, ob, sizeof(float) * R * H * D);
	ck_assert_mem_eq(la, lb, sizeof la);
	free(q); free(oa); free(ob); free(ids);
	pc_free(&c);
}
END_TEST

START_TEST(bad_params)
{
	int lim[2] = { 16, 5 }, mode[2] = { M_WIDE, M_WIDE };
	pcfg f = { 2, 8, 16, 2, 200, 64, 2, 0, lim, mode, 41, 6, LS_EXACT };
	pc c;
	pc_make(&c, &f);
	uint64_t rng = 42;
	pc_stage(&c, 10, 0, &rng);
	c.p.epoch = 1;
	strata_attn_prestage_params b;
	ck_assert_int_eq(strata_k_attn_prestage_cpu(NULL), -EINVAL);
#define BAD(stmt) do { b = c.p; stmt; ck_assert_int_eq(strata_k_attn_prestage_cpu(&b), -EINVAL); } while (0)
	BAD(b.scores = NULL);
	BAD(b.last_scores = NULL);
	BAD(b.slack = -1);
	BAD(b.slack = 1025);
	BAD(b.row_limit = NULL);
	BAD(b.map = NULL);
	BAD(b.row_map = NULL);
	BAD(b.row_base = NULL);
	BAD(b.host = NULL);
	BAD(b.stage = NULL);
	BAD(b.stage_map = NULL);
	BAD(b.scratch = NULL);
	BAD(b.cap = -1);
	BAD(b.n_rows = -1);
	BAD(b.topk = 0);
	BAD(b.host_B = 0);
	BAD(b.stage_B = 0);
	BAD(b.map_stride = 0);
	BAD(b.stage_first = -1);
	BAD(b.stage_first = ((int64_t)1 << 24) - 2 * 10 + 1); /* last entry 2^24 */
	BAD(b.epoch = 0);
	BAD(b.epoch = (uint64_t)1 << 40);
	BAD(b.scratch_bytes = strata_k_attn_prestage_scratch(2) - 1);
	BAD(b.score_stride = 15); /* rows of 16 scores would overlap */
#undef BAD
	ck_assert_uint_gt(strata_k_attn_prestage_scratch(2), strata_k_attn_prestage_scratch(1));
	ck_assert_uint_eq(strata_k_attn_prestage_scratch(0), 0);
	/* nothing was written by the failed calls */
	for (int i = 0; i < 2 * 16; i++)
		ck_assert_uint_eq(c.p.stage_map[i], 0);
	/* the largest epoch fits the 40 bits above the entry */
	ck_assert_int_gt(pc_run(&c, ((uint64_t)1 << 40) - 1, c.need <= c.p.cap), 0);
	/* slack 1024 is the largest; cap 0 marks nothing */
	c.p.slack = 1024;
	ck_assert_int_gt(pc_run(&c, 6, 0), 0);
	c.p.cap = 0;
	ck_assert_int_eq(pc_run(&c, 7, 0), 0);
	/* rows all within topk read neither scores nor last_scores: NULL is fine */
	c.p.cap = 10;
	c.limit[0] = c.p.max_limit = 8;
	c.p.scores = c.p.last_scores = NULL;
	int want = 0;
	for (int r = 0; r < 2; r++)
		for (int j = 0; j < c.limit[r]; j++)
			want += c.map[(size_t)c.row_map[r] * 16 + j] < 0;
	ck_assert_int_eq(pc_run(&c, 8, 1), want);
	/* the map: stage_map needs a stage and an epoch */
	int32_t ids[2] = { 0, 1 }, out[2];
	strata_attn_map_params mp = { .n_rows = 1, .width = 2, .ids = ids, .row_base = c.row_base,
				      .out = out, .map = c.map, .row_map = c.row_map, .map_stride = 16,
				      .host = c.host, .host_B = 64, .stage_map = c.p.stage_map, .epoch = 1 };
	ck_assert_int_eq(strata_k_attn_map_cpu(&mp), -EINVAL);
	mp.stage = c.stage;
	mp.stage_B = 2;
	mp.epoch = 0;
	ck_assert_int_eq(strata_k_attn_map_cpu(&mp), -EINVAL);
	pc_free(&c);
}
END_TEST

/* strata_k_indexer_scores on the CPU: the scores of every scored row (two requests, so
 * rows of the first must survive the second) rank the row's selection on top, match
 * the returned scores exactly and the double reference within TOL_REL; a too-small
 * scratch (the twin then scores elsewhere) or none is -EINVAL. Then end to end: early
 * staging from those scores, its threshold from the previous call's out_scores (the
 * same inputs: the same selection), with a large cap leaves the map no miss to copy. */
START_TEST(indexer_scores_and_end_to_end)
{
	int rows_of[2] = { 2, 2 }, lim[4] = { 3000, 700, 400, 1500 };
	strata_dev_config cfg = STRATA_DEV_CONFIG_INIT;
	cfg.backend = STRATA_BACKEND_CPU;
	strata_dev *d = NULL;
	strata_event *ev = NULL;
	ck_assert_int_eq(strata_dev_open(&cfg, &d), 0);
	ck_assert_int_eq(strata_event_create(d, &ev), 0);
	for (int f = 0; f < 2; f++) {
		td t;
		td_make(&t, (strata_index_fmt)f, 8, 512, 2, rows_of, lim, 64, 51 + f,
			f ? TD_CLUSTERED : TD_MIXED_W);
		size_t n = strata_k_indexer_scratch(NULL, &t.p);
		t.p.scratch = malloc(n);
		t.p.scratch_bytes = n;
		t.p.after_scan = ev;
		ck_assert_int_eq(strata_k_indexer(d, &t.p, NULL), 0);
		float *prev = malloc(sizeof(float) * 4 * 512);
		memcpy(prev, t.scores, sizeof(float) * 4 * 512);
		ck_assert_int_eq(strata_k_indexer(d, &t.p, NULL), 0);
		ck_assert_int_eq(strata_event_sync(d, ev), 0);
		const float *sc = NULL;
		size_t stride = 0;
		ck_assert_int_eq(strata_k_indexer_scores(d, &t.p, &sc, &stride), 0);
		ck_assert_uint_ge(stride, 3000);
		double *ref = malloc(sizeof(double) * 3000);
		for (int r = 0; r < 4; r++) {
			if (lim[r] <= 512)
				continue;
			double mag = 0;
			char why[256] = "";
			td_ref_scores(&t, r, ref, &mag);
			const double tol = TOL_REL * mag + 1e-30;
			const int32_t *sel = t.ids + r * 512;
			ck_assert_msg(td_check_row(lim[r], 512, sel, t.scores + r * 512, ref, tol, 0, why,
						   sizeof why) >= 0, "row %d: %s", r, why);
			const float *rs = sc + r * stride;
			char *in = calloc((size_t)lim[r], 1);
			int worst = -1; /* lowest-ranked selected id: score asc, then id desc */
			for (int i = 0; i < 512; i++) {
				int id = sel[i];
				in[id] = 1;
				ck_assert_msg(rs[id] == t.scores[r * 512 + i], "row %d id %d", r, id);
				if (worst < 0 || rs[id] < rs[worst] || (rs[id] == rs[worst] && id > worst))
					worst = id;
			}
			for (int j = 0; j < lim[r]; j++) {
				ck_assert_msg(fabs(rs[j] - ref[j]) <= tol, "row %d id %d: %g vs %g", r, j,
					      rs[j], ref[j]);
				if (!in[j])
					ck_assert_msg(rs[j] < rs[worst] || (rs[j] == rs[worst] && j > worst),
						      "row %d: unselected %d (%g) beats %d (%g)", r, j,
						      rs[j], worst, rs[worst]);
			}
			free(in);
		}
		free(ref);

		/* end to end: prestage from the indexer's scores, the map over its ids */
		int mode[4] = { 0, 0, 0, 0 };
		pcfg pf = { 4, 512, 3000, 2, 450, 64, 64, 0, lim, mode, 61 + f, 0, LS_EXACT };
		pc c;
		pc_make(&c, &pf);
		c.p.scores = sc;
		c.p.score_stride = stride;
		c.p.last_scores = prev;
		uint64_t rng = 62;
		pc_stage(&c, -1, 0, &rng);
		ck_assert_int_gt(pc_run(&c, 1, 1), 0);
		int32_t *out = malloc(sizeof(int32_t) * 4 * 512);
		long cnt[3];
		map_check(&c, t.ids, 512, 1, out, cnt);
		ck_assert_int_gt(cnt[1], 0);
		ck_assert_int_eq(cnt[2], 0);
		free(out);
		free(prev);
		pc_free(&c);

		strata_indexer_params b = t.p;
		b.scratch_bytes = n - 1;
		ck_assert_int_eq(strata_k_indexer_scores(d, &b, &sc, &stride), -EINVAL);
		b.scratch = NULL;
		b.scratch_bytes = n;
		ck_assert_int_eq(strata_k_indexer_scores(d, &b, &sc, &stride), -EINVAL);
		free(t.p.scratch);
		td_free(&t);
	}
	strata_event_destroy(d, ev);
	strata_dev_close(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("prestage");
	TCase *tc = tcase_create("cpu");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, threshold_by_hand);
	tcase_add_test(tc, random_rows_full_cap);
	tcase_add_test(tc, small_cap_and_new_epoch);
	tcase_add_test(tc, attention_over_staged_list);
	tcase_add_test(tc, bad_params);
	tcase_add_test(tc, indexer_scores_and_end_to_end);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
#endif /* PRESTAGE_HELPERS_ONLY */
