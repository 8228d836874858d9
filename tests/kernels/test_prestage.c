/* Early staging of hot-cache misses (strata_k_attn_prestage) on the CPU twin, the index
 * map's use of its marks (stage_map, epoch, miss_counts), the indexer's score buckets
 * (strata_k_indexer_bucket) and the scores and cuts (strata_k_indexer_scores, cut_out)
 * that feed it.
 *
 * The expected marks are derived here independently of the library: a row with limit
 * <= topk takes every entry whatever its cut word says; otherwise the row's cut word
 * must carry the call's cut_epoch (above bit 12), else nothing is taken, and then the
 * candidates are the entries j < limit whose bucket is at least the word's low 12 bits
 * b (all of them for b = 0xfff). Buckets come from ref_bucket below: fp16 by round to
 * nearest even computed in double, -0 counted as +0 (the scores compare with -0 == +0,
 * and the bucket must be monotone in them), ordered (negative: ~h, else h | 0x8000),
 * top 11 bits. A row marks exactly its non-resident candidates below map_stride when
 * cap is large enough, else exactly cap of them. Everything else (other words of
 * stage_map, other stage entries, block padding) must keep its bytes. */
#include <check.h>
#include <errno.h>
#include <float.h>
#include <math.h>

#include "kernels/attention_int.h"
#include "indexer_tdata.h"

#define TOL_REL 2e-5 /* test_indexer.c's: fp32 sums against the double reference */
#define CUT_ALL STRATA_INDEXER_CUT_ALL

/* ---- reference fp16 and buckets ---------------------------------------------------- */

/* fp16 bits of f rounded to nearest even, in double arithmetic (nearbyint in the
 * default rounding mode), independent of the library's integer code. NaN: 0x7e00. */
static uint16_t ref_half(float f)
{
	if (isnan(f))
		return 0x7e00;
	const uint32_t sign = signbit(f) ? 0x8000u : 0u;
	const double a = fabs((double)f);
	uint32_t bits;
	if (a >= 65520.0) { /* halfway to 2^16 and up: inf */
		bits = 0x7c00;
	} else if (a < 0x1p-14) { /* subnormal steps of 2^-24; 1024 is the smallest normal */
		bits = (uint32_t)nearbyint(a * 0x1p24);
	} else {
		int ex;
		(void)frexp(a, &ex); /* a = m 2^ex, m in [0.5, 1) */
		const int e = ex - 1;
		const uint32_t n = (uint32_t)nearbyint(ldexp(a, 10 - e)); /* 1024 .. 2048 */
		bits = (uint32_t)(e + 15) * 1024u + (n - 1024u); /* 2048 carries into e */
	}
	return (uint16_t)(bits | sign);
}

/* The bucket of fp16 -0 (float -0 and the negatives that round to it). kernels.h makes
 * the bucket monotone non-decreasing in the score, and scores compare with -0 == +0
 * (the selection ties them), so -0 must share +0's bucket, 0x400. The sign-bit
 * formula alone (negative ? ~h : h | 0x8000) gives 0x3ff: set this to 0x3ffu to test
 * that convention instead (-0 then sorts below +0). */
#define NEG_ZERO_BUCKET 0x400u

static uint32_t ref_bucket(float f)
{
	const uint16_t h = ref_half(f);
	if (h == 0x8000)
		return NEG_ZERO_BUCKET;
	const uint16_t o = (h & 0x8000) ? (uint16_t)~h : (uint16_t)(h | 0x8000);
	return (uint32_t)o >> 5;
}

/* ---- prestage cases ------------------------------------------------------------------ */

enum { M_WIDE, M_CLUSTER, M_EQUAL, M_ZERO, M_NEG };
/* Cut words of rows with limit > topk: the exact bucket of the row's topk-th score (the
 * indexer's), that bucket moved by -2 .. +2 (a cut the kernel must follow anyway;
 * above the exact one it misses top-k entries), or per row one of: exact, jittered,
 * stale (epoch one off: nothing), CUT_ALL, a bucket above every score (nothing). */
enum { CUT_EXACT, CUT_JITTER, CUT_MIXED };

/* A prestage case on host memory. Rows map to requests r % n_maps; request m owns
 * host entries m * hs .. m * hs + hs - 1 (row_base) and map row m, whose resident ids
 * sit at hot slot m * hs + id (so a copy of the host tier serves as the hot pool). */
typedef struct pcfg {
	int n_rows, topk, map_stride, n_maps, resident_pm, host_B, stage_B, encode;
	const int *lim, *mode;
	uint64_t seed;
	int cut_mode;
} pcfg;

typedef struct pc {
	pcfg f;
	strata_attn_prestage_params p;
	int hs, need; /* need: the most candidate misses of any row */
	int32_t *limit, *row_map, *row_base, *map;
	float *scores;
	unsigned long long *cut; /* [n_rows] */
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

static unsigned long long cut_word(uint64_t epoch, uint32_t b)
{
	return (unsigned long long)epoch << 12 | b;
}

/* Cut words by the case's mode from the exact topk-th score (sorted). Rows with limit
 * <= topk get words that would take nothing if read: the call's epoch with a bucket
 * above every score, or a stale epoch. */
static void pc_cut(pc *c, uint64_t *rng)
{
	const int k = c->p.topk;
	const uint64_t ce = c->p.cut_epoch;
	char *top = malloc((size_t)c->p.max_limit + 1);
	int *best = malloc(sizeof *best * (size_t)k);
	for (int r = 0; r < c->p.n_rows; r++) {
		if (c->limit[r] <= k) {
			c->cut[r] = r & 1 ? cut_word(ce - 1, 0) : cut_word(ce, 0x7ff);
			continue;
		}
		row_top(c, r, top, best);
		int b = (int)ref_bucket(c->p.scores[(size_t)r * c->p.score_stride + best[k - 1]]);
		uint64_t e = ce;
		int m = c->f.cut_mode == CUT_MIXED ? (int)(tu_next(rng) % 6) : c->f.cut_mode;
		switch (m) {
		case 2: e = tu_next(rng) & 1 ? ce - 1 : ce + 1; break;
		case 3: b = CUT_ALL; break;
		case 4: b = 0x7e1 + (int)(tu_next(rng) % (0xfff - 0x7e1)); break;
		case CUT_JITTER: case 5:
			b += (int)(tu_next(rng) % 5) - 2;
			b = b < 0 ? 0 : b > 0x7ff ? 0x7ff : b;
			break;
		default: break;
		}
		c->cut[r] = cut_word(e, (uint32_t)b);
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
	p->cut = c->cut = malloc(sizeof *c->cut * (size_t)(R + 1));
	p->cut_epoch = 0x1234500 + (f->seed & 0xff); /* far from the stage epochs */
	p->wait_us = 20;
	pc_cut(c, &rng);
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

/* Row r's candidates into cand[limit] (the rule in the header comment); returns the
 * number of non-resident candidates below map_stride (what a large enough cap marks). */
static int pc_expect(const pc *c, int r, char *cand)
{
	const strata_attn_prestage_params *p = &c->p;
	const int lim = c->limit[r], k = p->topk;
	memset(cand, lim <= k, (size_t)lim);
	if (lim > k && p->cut[r] >> 12 == p->cut_epoch) {
		const float *sc = p->scores + (size_t)r * p->score_stride;
		const uint32_t b = (uint32_t)(p->cut[r] & 0xfff);
		for (int j = 0; j < lim; j++)
			cand[j] = b == CUT_ALL || ref_bucket(sc[j]) >= b;
	}
	int n = 0;
	for (int j = 0; j < lim && j < p->map_stride; j++)
		n += cand[j] && p->map[(size_t)c->row_map[r] * p->map_stride + j] < 0;
	return n;
}

/* Every top-k entry of each row with an exact cut is a candidate (the superset). */
static void pc_covers(const pc *c)
{
	char *cand = malloc((size_t)c->p.max_limit + 1), *top = malloc((size_t)c->p.max_limit + 1);
	for (int r = 0; r < c->p.n_rows; r++) {
		pc_expect(c, r, cand);
		row_top(c, r, top, NULL);
		for (int j = 0; j < c->limit[r]; j++)
			ck_assert_msg(!top[j] || cand[j], "row %d: top-k id %d not a candidate", r, j);
	}
	free(cand);
	free(top);
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
	free(c->cut); free(c->host); free(c->stage); free(c->p.stage_map); free(c->p.scratch);
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
 * id 4700 would be, read without the bound) is marked. The cut words follow. */
static void force_beyond(pc *c)
{
	c->scores[6 * c->p.score_stride + 4700] = 0x1p30f;
	c->scores[7 * c->p.score_stride + 200] = 0x1p30f;
	c->map[(size_t)c->row_map[7] * c->p.map_stride + 200] = -1;
	uint64_t rng = 1;
	pc_cut(c, &rng);
}

static int cmp_float(const void *a, const void *b) /* -0 before +0 */
{
	const float x = *(const float *)a, y = *(const float *)b;
	if (x == y)
		return (signbit(y) != 0) - (signbit(x) != 0);
	return (x > y) - (x < y);
}

/* Rows with more candidate misses than cap (the rows a small cap cuts). */
static int pc_capped(const pc *c)
{
	char *cand = malloc((size_t)c->p.max_limit + 1);
	int n = 0;
	for (int r = 0; r < c->p.n_rows; r++)
		n += pc_expect(c, r, cand) > c->p.cap;
	free(cand);
	return n;
}

/* The indexer's cut words after a call (n_rows words at cut): a row with limit <= topk
 * publishes cut_epoch << 12 | CUT_ALL, another cut_epoch << 12 | the bucket of its
 * topk-th highest score, taken from the scores view by sorting and equal to the
 * lowest selected score (out_scores). sel_scores: out_scores, host. */
static void check_cut_words(const unsigned long long *cut, uint64_t ce, int n_rows, int topk,
			    const int *lim, const float *view, size_t stride,
			    const float *sel_scores)
{
	for (int r = 0; r < n_rows; r++) {
		if (lim[r] <= topk) {
			ck_assert_msg(cut[r] == cut_word(ce, CUT_ALL), "row %d: word %#llx", r, cut[r]);
			continue;
		}
		float *s = malloc(sizeof *s * (size_t)lim[r]);
		memcpy(s, view + (size_t)r * stride, sizeof *s * (size_t)lim[r]);
		qsort(s, (size_t)lim[r], sizeof *s, cmp_float);
		const float kth = s[lim[r] - topk];
		float low = INFINITY;
		uint32_t lowb = CUT_ALL; /* every selected entry's bucket is at least the cut's */
		for (int i = 0; i < topk; i++) {
			const float x = sel_scores[(size_t)r * topk + i];
			low = fminf(low, x);
			lowb = strata_k_indexer_bucket(x) < lowb ? strata_k_indexer_bucket(x) : lowb;
		}
		ck_assert_uint_eq(cut[r] & 0xfff, lowb);
		ck_assert_msg(kth == low, "row %d: topk-th score %a, lowest selected %a", r,
			      (double)kth, (double)low);
		ck_assert_uint_eq(strata_k_indexer_bucket(kth), ref_bucket(kth));
		ck_assert_msg(cut[r] == cut_word(ce, strata_k_indexer_bucket(kth)),
			      "row %d: word %#llx, want epoch %#llx bucket %#x (of %a)", r, cut[r],
			      (unsigned long long)ce, strata_k_indexer_bucket(kth), (double)kth);
		free(s);
	}
}

/* gpu_prestage.c includes the case builder and checks above, not the tests below */
/* The random cases both backends run: topk 512 (limits 0, 1, k-1, k, k+1, 4097,
 * 20000, a cluster, all equal, all zero of both signs, all negative) with exact cuts,
 * then topk 8 with map_stride below a limit, with exact and then mixed cut words. */
static const int rc_lim[11] = { 0, 1, 511, 512, 513, 4097, 20000, 3001, 2999, 1500, 2500 };
static const int rc_mode[11] = { 0, 0, 0, 0, M_WIDE, M_WIDE, M_WIDE, M_CLUSTER, M_EQUAL,
				 M_ZERO, M_NEG };
static const int rc_lim8[8] = { 0, 1, 7, 8, 9, 100, 5000, 4099 };
static const int rc_mode8[8] = { M_WIDE, M_WIDE, M_WIDE, M_WIDE, M_WIDE, M_CLUSTER, M_WIDE,
				 M_WIDE };
static const pcfg random_cases[3] = {
	{ 11, 512, 20000, 4, 400, 64, 64, 0, rc_lim, rc_mode, 11, CUT_EXACT },
	{ 8, 8, 4500, 3, 300, 64, 2, 0, rc_lim8, rc_mode8, 12, CUT_EXACT },
	{ 8, 8, 4500, 3, 300, 64, 2, 0, rc_lim8, rc_mode8, 14, CUT_MIXED }
};

#ifndef PRESTAGE_HELPERS_ONLY

#ifdef __FLT16_MANT_DIG__ /* the compiler's own fp16 conversion, a second reference */
static uint16_t f16_bits(float f)
{
	_Float16 h = (_Float16)f;
	uint16_t u;
	memcpy(&u, &h, 2);
	return u;
}
#endif

/* Buckets by hand: each row's fp16 bits worked out on paper, its bucket from them.
 * ref_half must agree (and the compiler's _Float16 where there is one), and
 * strata_k_indexer_bucket must give the bucket. */
START_TEST(bucket_known_values)
{
	static const struct {
		float f;
		uint16_t h;
		uint32_t b;
	} kv[] = {
		{ 0.0f, 0x0000, 0x400 },
		{ -0.0f, 0x8000, NEG_ZERO_BUCKET },  /* -0 == +0: one bucket */
		{ 1.0f, 0x3c00, 0x5e0 },
		{ -1.0f, 0xbc00, 0x21f },
		{ 2.0f, 0x4000, 0x600 },
		{ 0.5f, 0x3800, 0x5c0 },
		{ 1 + 0x1p-11f, 0x3c00, 0x5e0 },     /* a tie: down to the even 1 */
		{ 1 + 0x3p-11f, 0x3c02, 0x5e0 },     /* a tie: up to the even 1 + 2^-9 */
		{ 0x1.07cp0f, 0x3c1f, 0x5e0 },       /* 1 + 31 2^-10: the bucket's last fp16 */
		{ 0x1.07ep0f, 0x3c20, 0x5e1 },       /* + 2^-11, a tie: up into the next bucket */
		{ 0x1.07dffep0f, 0x3c1f, 0x5e0 },    /* just below that tie */
		{ 0x1.082p0f, 0x3c20, 0x5e1 },       /* 1 + 32 2^-10 + 2^-11: down to the even */
		{ 0x1.0fep0f, 0x3c40, 0x5e2 },       /* 1 + 63 2^-10 + 2^-11: up to the even */
		{ 0x1.ffep-1f, 0x3c00, 0x5e0 },      /* 1 - 2^-12, a tie: up to the even 1 */
		{ 0x1.ffdffep-1f, 0x3bff, 0x5df },   /* just below it */
		{ -0x1.07ep0f, 0xbc20, 0x21e },      /* negatives mirror: ~h */
		{ -0x1.07cp0f, 0xbc1f, 0x21f },
		{ 65504.0f, 0x7bff, 0x7df },         /* the largest fp16 */
		{ 65519.0f, 0x7bff, 0x7df },
		{ 0x1.ffdffep15f, 0x7bff, 0x7df },   /* just below 65520 */
		{ 65520.0f, 0x7c00, 0x7e0 },         /* halfway to 2^16, a tie: inf */
		{ -65520.0f, 0xfc00, 0x01f },
		{ -65504.0f, 0xfbff, 0x020 },
		{ 1e30f, 0x7c00, 0x7e0 },
		{ FLT_MAX, 0x7c00, 0x7e0 },
		{ INFINITY, 0x7c00, 0x7e0 },
		{ -INFINITY, 0xfc00, 0x01f },
		{ -FLT_MAX, 0xfc00, 0x01f },
		{ 0x1p-14f, 0x0400, 0x420 },         /* the smallest normal fp16 */
		{ 0x1.8p-15f, 0x0300, 0x418 },       /* fp16 subnormal 768 2^-24 */
		{ 0x1p-24f, 0x0001, 0x400 },         /* 32 subnormals share zero's bucket */
		{ 0x1.fp-20f, 0x001f, 0x400 },       /* 31 2^-24 */
		{ 0x1.f8p-20f, 0x0020, 0x401 },      /* 31.5 2^-24, a tie: up to the even 32 */
		{ 0x1p-19f, 0x0020, 0x401 },
		{ 0x1p-25f, 0x0000, 0x400 },         /* a tie: down to the even 0 */
		{ 0x1.8p-25f, 0x0001, 0x400 },       /* 0.75 2^-24 */
		{ -0x1p-24f, 0x8001, 0x3ff },
		{ -0x1.f8p-20f, 0x8020, 0x3fe },
		{ -0x1p-25f, 0x8000, NEG_ZERO_BUCKET }, /* rounds to -0 */
		{ FLT_TRUE_MIN, 0x0000, 0x400 },     /* float subnormals */
		{ -FLT_TRUE_MIN, 0x8000, NEG_ZERO_BUCKET },
		{ 0x1p-126f, 0x0000, 0x400 },
	};
	for (size_t i = 0; i < sizeof kv / sizeof *kv; i++) {
		const float f = kv[i].f;
		ck_assert_msg(ref_half(f) == kv[i].h, "%zu (%a): ref fp16 %#x, want %#x", i,
			      (double)f, ref_half(f), kv[i].h);
#ifdef __FLT16_MANT_DIG__
		ck_assert_msg(f16_bits(f) == kv[i].h, "%zu (%a): _Float16 %#x, want %#x", i,
			      (double)f, f16_bits(f), kv[i].h);
#endif
		ck_assert_msg(ref_bucket(f) == kv[i].b, "%zu: ref bucket %#x", i, ref_bucket(f));
		ck_assert_msg(strata_k_indexer_bucket(f) == kv[i].b, "%zu (%a): bucket %#x, want %#x",
			      i, (double)f, strata_k_indexer_bucket(f), kv[i].b);
	}
	ck_assert_uint_eq(STRATA_INDEXER_CUT_ALL, 0xfff);
}
END_TEST

/* Value of finite fp16 bits h. */
static double half_value(uint16_t h)
{
	const int e = (h >> 10) & 31, m = h & 1023;
	const double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
	return h & 0x8000 ? -v : v;
}

static float u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* Random floats for the bucket tests: random bit patterns (every magnitude, NaNs
 * left out), uniform over the fp16 range and past it, fp16 ties (the midpoint of two
 * neighbouring fp16 values, where even rounding decides; exact in float) and their
 * float neighbours, small values around the fp16 subnormals, both signs. */
static float sample_float(uint64_t *rng)
{
	const uint64_t x = tu_next(rng);
	float f;
	switch (x % 6) {
	case 0:
		f = u2f((uint32_t)(x >> 32));
		return isnan(f) ? 0.0f : f;
	case 1: return (float)(70000.0 * tu_uniform(rng));
	case 2: case 3: {
		const uint16_t h = (uint16_t)((x >> 8) % 0x7c00); /* h + 1 may be inf: 65520 */
		f = (float)((half_value(h) + half_value((uint16_t)(h + 1))) / 2);
		if ((x >> 30) % 3)
			f = nextafterf(f, (x >> 32) & 1 ? INFINITY : 0.0f);
		return (x >> 33) & 1 ? -f : f;
	}
	case 4: return ldexpf(tu_uniform(rng), (int)((x >> 8) % 40) - 32);
	default: return (x >> 8) & 1 ? -0.0f : 0.0f;
	}
}

/* About 1e6 floats: strata_k_indexer_bucket equals the double reference, which itself
 * equals the compiler's _Float16 rounding where there is one. Mismatches are counted
 * (an assert per value would be slow under Check) and the first one reported. */
START_TEST(bucket_random_vs_reference)
{
	uint64_t rng = 0xb0c4e7;
	long bad = 0, bad16 = 0, n = 0;
	float first = 0, first16 = 0;
	for (int i = 0; i < 1000000; i++, n++) {
		const float f = sample_float(&rng);
#ifdef __FLT16_MANT_DIG__
		if (f16_bits(f) != ref_half(f) && !bad16++)
			first16 = f;
#endif
		const uint32_t b = strata_k_indexer_bucket(f);
		if ((b != ref_bucket(f) || b > 0x7e0) && !bad++)
			first = f;
	}
	ck_assert_msg(!bad16, "%ld of %ld: ref fp16 differs from _Float16, first %a (%#x vs %#x)",
		      bad16, n, (double)first16, ref_half(first16),
#ifdef __FLT16_MANT_DIG__
		      f16_bits(first16)
#else
		      0
#endif
	);
	ck_assert_msg(!bad, "%ld of %ld buckets differ, first %a: %#x, want %#x", bad, n,
		      (double)first, strata_k_indexer_bucket(first), ref_bucket(first));
}
END_TEST

/* Monotone: over 300,000 sorted floats (the sample above plus the specials; -0 before
 * +0) the bucket never decreases, and equal floats (-0, +0) share one (unless
 * NEG_ZERO_BUCKET says otherwise). */
START_TEST(bucket_monotone)
{
	enum { N = 300000 };
	static const float sp[] = { 0.0f, -0.0f, FLT_TRUE_MIN, -FLT_TRUE_MIN, 0x1p-24f, -0x1p-24f,
				    0x1p-25f, -0x1p-25f, 65504.0f, 65520.0f, -65520.0f, INFINITY,
				    -INFINITY, FLT_MAX, -FLT_MAX, 1.0f, -1.0f, 0x1.07ep0f };
	const size_t ns = sizeof sp / sizeof *sp;
	float *v = malloc(sizeof *v * (N + ns));
	uint64_t rng = 0x3070;
	for (int i = 0; i < N; i++)
		v[i] = sample_float(&rng);
	memcpy(v + N, sp, sizeof sp);
	qsort(v, N + ns, sizeof *v, cmp_float);
	long bad = 0;
	size_t at = 0;
	for (size_t i = 0; i + 1 < N + ns; i++) {
		const uint32_t a = strata_k_indexer_bucket(v[i]), b = strata_k_indexer_bucket(v[i + 1]);
		if ((a > b || (NEG_ZERO_BUCKET == 0x400 && v[i] == v[i + 1] && a != b)) && !bad++)
			at = i;
	}
	ck_assert_msg(!bad, "%ld decreases, first %a (%#x) then %a (%#x)", bad, (double)v[at],
		      strata_k_indexer_bucket(v[at]), (double)v[at + 1],
		      strata_k_indexer_bucket(v[at + 1]));
	ck_assert_uint_eq(strata_k_indexer_bucket(v[0]), 0x01f);
	ck_assert_uint_eq(strata_k_indexer_bucket(v[N + ns - 1]), 0x7e0);
	free(v);
}
END_TEST

/* The cut rule by hand, topk 4. Row 0 (limit 12, id 5 resident) has the scores below
 * (buckets in the comments); row 1 (limit 3 <= topk, id 1 resident) takes ids 0 and 2
 * whatever its word says (pc_cut: the call's epoch with bucket 0x7ff, or a stale one).
 * Each scenario sets row 0's word: the call's cut_epoch or a stale one (one below,
 * one above, bit 39 flipped), and a bucket. An entry whose bucket equals b is taken,
 * one of b - 1 is not. The last scenario uses the largest cut_epoch. */
START_TEST(cut_by_hand)
{
	enum { OK, BELOW, ABOVE, FLIP };
	static const struct {
		int ep;
		uint32_t b;
		unsigned mask; /* expected marks of row 0, bit j */
	} sc[] = {
		{ OK, 0x5e0, 0xc5b },
		{ OK, 0x5e1, 0xc08 },
		{ OK, 0x5df, 0xc5f },
		{ OK, 0x401, 0xc5f },
		{ OK, 0x400, 0xd5f | (NEG_ZERO_BUCKET == 0x400) << 7 }, /* both zeros */
		{ OK, 0x3ff, 0xddf },
		{ OK, 0x220, 0xddf },
		{ OK, 0x21f, 0xfdf },
		{ OK, 0x7df, 0xc00 },
		{ OK, 0x7e0, 0x400 },      /* inf's bucket: 65520 only */
		{ OK, 0x7e1, 0 },
		{ OK, 0xffe, 0 },
		{ OK, 0, 0xfdf },
		{ OK, CUT_ALL, 0xfdf },
		{ BELOW, 0x5e0, 0 },       /* stale: nothing */
		{ ABOVE, CUT_ALL, 0 },
		{ FLIP, 0, 0 },
		{ OK, 0x5e0, 0xc5b },
	};
	const float row0[12] = {
		1.0f,          /* 0x5e0 */
		0x1.07cp0f,    /* 0x5e0, its last fp16 */
		0x1.ffcp-1f,   /* 0x5df: 1 - 2^-11 */
		0x1.07ep0f,    /* 0x5e1: a tie up */
		0x1.07dffep0f, /* 0x5e0 */
		2.0f,          /* resident */
		0x1.ffep-1f,   /* 0x5e0: 1 - 2^-12, a tie up to 1 */
		-0.0f,         /* NEG_ZERO_BUCKET */
		0.0f,          /* 0x400 */
		-1.0f,         /* 0x21f */
		65520.0f,      /* 0x7e0: inf */
		65519.0f,      /* 0x7df: 65504 */
	};
	int lim[2] = { 12, 3 }, mode[2] = { M_WIDE, M_WIDE };
	pcfg f = { 2, 4, 12, 2, 0, 64, 2, 0, lim, mode, 3, CUT_EXACT };
	pc c;
	pc_make(&c, &f);
	memcpy(c.scores, row0, sizeof row0);
	c.map[5] = 5;
	c.map[12 + 1] = 12 + 1;
	uint64_t rng = 5;
	pc_stage(&c, 12, 0, &rng);
	const size_t ns = sizeof sc / sizeof *sc;
	for (size_t s = 0; s < ns; s++) {
		const uint64_t ce = s + 1 == ns ? ((uint64_t)1 << 40) - 1 : 100 + s;
		const uint64_t we = sc[s].ep == OK ? ce : sc[s].ep == BELOW ? ce - 1
				    : sc[s].ep == ABOVE ? ce + 1 : ce ^ ((uint64_t)1 << 39);
		c.p.cut_epoch = ce;
		pc_cut(&c, &rng); /* row 1's word: stale; every other scenario 0x7ff */
		if (s & 1)
			c.cut[1] = cut_word(ce, 0x7ff);
		c.cut[0] = cut_word(we, sc[s].b);
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
 * equal, all zero of both signs, all negative) and topk 8 with map_stride below a
 * limit; the cut words are built from each row's exact topk-th score, so the
 * candidates cover the top-k (checked) and, with cap exactly the need, the map over
 * each row's top-k finds every miss below map_stride staged. Then the topk-8 rows with
 * mixed words (exact, jittered, stale, CUT_ALL, above every bucket) against the rule. */
START_TEST(random_rows_full_cap)
{
	const pcfg *cfgs = random_cases;
	for (int t = 0; t < 3; t++) {
		pc c;
		pc_make(&c, &cfgs[t]);
		if (t)
			force_beyond(&c);
		uint64_t rng = 100 + t;
		pc_stage(&c, -1, 5, &rng);
		if (t == 2) { /* the mixed words: stale rows stage nothing, the others by rule */
			int stale = 0;
			for (int r = 0; r < 8; r++)
				stale += rc_lim8[r] > 8 && c.cut[r] >> 12 != c.p.cut_epoch;
			ck_assert_int_gt(stale, 0);
			ck_assert_int_gt(pc_run(&c, 5, 1), 0);
			pc_free(&c);
			continue;
		}
		pc_covers(&c);
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
 * copies the rest itself; (g) a second call with epoch + 1 after the residency, the
 * scores and the cut words (a new cut_epoch) changed: the first call's marks the
 * second did not renew are stale, and the map copies those misses instead of reading
 * the old entries. Jittered cuts. The dispatcher on a CPU device runs the twin. */
START_TEST(small_cap_and_new_epoch)
{
	int lim[6] = { 513, 4097, 20000, 3001, 300, 1024 };
	int mode[6] = { M_WIDE, M_WIDE, M_WIDE, M_CLUSTER, M_WIDE, M_EQUAL };
	pcfg f = { 6, 512, 20000, 2, 500, 64, 64, 0, lim, mode, 21, CUT_JITTER };
	pc c;
	pc_make(&c, &f);
	uint64_t rng = 22;
	pc_stage(&c, 100, 0, &rng);
	ck_assert_int_gt(c.need, 100);
	ck_assert_int_ge(pc_capped(&c), 4);
	ck_assert_int_ge(pc_run(&c, 1, 0), 4 * 100);
	int32_t *ids = topk_lists(&c), *out = malloc(sizeof(int32_t) * 6 * 512);
	long cnt[3];
	map_check(&c, ids, 512, 1, out, cnt);
	ck_assert_int_gt(cnt[1], 0);
	ck_assert_int_gt(cnt[2], 0);

	/* epoch 2: flip about a third of the residency, new scores and cuts, same slots */
	for (int i = 0; i < 2 * 20000; i++)
		if (tu_next(&rng) % 3 == 0)
			c.map[i] = c.map[i] >= 0 ? -1 : (i / 20000) * c.hs + i % 20000;
	pc_scores(&c, &rng);
	c.p.cut_epoch++;
	pc_cut(&c, &rng);
	ck_assert_int_ge(pc_capped(&c), 4);
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
	ck_assert_int_ge(pc_check(&c, c.p.stage_map, c.stage, sm0, st0, 2, 0), 4 * 100);
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
 * all in the host pool. Jittered cuts and cap 40 leave misses to the map. */
START_TEST(attention_over_staged_list)
{
	enum { R = 3, H = 4, K = 64, D = 512 };
	int lim[R] = { 300, 40, 500 }, mode[R] = { M_WIDE, M_WIDE, M_CLUSTER };
	pcfg f = { R, K, 512, 2, 350, 64, 16, 1, lim, mode, 31, CUT_JITTER };
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
	pcfg f = { 2, 8, 16, 2, 200, 64, 2, 0, lim, mode, 41, CUT_EXACT };
	pc c;
	pc_make(&c, &f);
	uint64_t rng = 42;
	pc_stage(&c, 10, 0, &rng);
	c.p.epoch = 1;
	strata_attn_prestage_params b;
	ck_assert_int_eq(strata_k_attn_prestage_cpu(NULL), -EINVAL);
#define BAD(stmt) do { b = c.p; stmt; ck_assert_int_eq(strata_k_attn_prestage_cpu(&b), -EINVAL); } while (0)
	BAD(b.scores = NULL);
	BAD(b.cut = NULL); /* row 0's limit is above topk */
	BAD(b.wait_us = -1);
	BAD(b.wait_us = 1001);
	BAD(b.wait_us = -2147483647 - 1);
	BAD(b.max_ctas = -1);
	BAD(b.cut_epoch = 0);
	BAD(b.cut_epoch = (uint64_t)1 << 40);
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
	/* the largest epoch fits the 40 bits above the entry; wait_us 0 (the default) and
	 * 1000 are valid */
	c.p.wait_us = 0;
	ck_assert_int_gt(pc_run(&c, ((uint64_t)1 << 40) - 1, c.need <= c.p.cap), 0);
	c.p.wait_us = 1000;
	ck_assert_int_gt(pc_run(&c, 5, c.need <= c.p.cap), 0);
	/* the largest cut_epoch, with words of it */
	c.p.cut_epoch = ((uint64_t)1 << 40) - 1;
	pc_cut(&c, &rng);
	ck_assert_uint_eq(c.cut[0] >> 12, c.p.cut_epoch);
	ck_assert_int_gt(pc_run(&c, 6, c.need <= c.p.cap), 0);
	/* cap 0 marks nothing */
	c.p.cap = 0;
	ck_assert_int_eq(pc_run(&c, 7, 0), 0);
	/* rows all within topk read neither scores nor cut words: NULL is fine */
	c.p.cap = 10;
	c.limit[0] = c.p.max_limit = 8;
	c.p.scores = NULL;
	c.p.cut = NULL;
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

/* strata_k_indexer_scores and cut_out on the CPU: the scores of every scored row (two
 * requests, so rows of the first must survive the second) rank the row's selection on
 * top, match the returned scores exactly and the double reference within TOL_REL; the
 * cut words (junk before) carry each call's cut_epoch and the bucket of the row's
 * topk-th score (CUT_ALL for limit <= topk); a too-small scratch (the twin then scores
 * elsewhere) or none is -EINVAL for the view, and a cut_epoch of 0 or 2^40 for the
 * indexer (the words untouched). Then end to end: early staging from those scores and
 * cuts with a large cap leaves the map no miss to copy; the same staging inside the
 * indexer call (strata_indexer_params.stage, cut words of its own) makes the same
 * marks and counts them, and a bad stage is refused before anything is written. */
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
		unsigned long long cut[5];
		for (int r = 0; r < 5; r++)
			cut[r] = 0x5a5a5a5a5a5a5a5aull;
		t.p.scratch = malloc(n);
		t.p.scratch_bytes = n;
		t.p.after_scan = ev;
		t.p.cut_out = cut;
		t.p.cut_epoch = 77 + f;
		ck_assert_int_eq(strata_k_indexer(d, &t.p, NULL), 0);
		ck_assert_uint_eq(cut[4], 0x5a5a5a5a5a5a5a5aull); /* n_rows words only */
		const float *sc = NULL;
		size_t stride = 0;
		ck_assert_int_eq(strata_k_indexer_scores(d, &t.p, &sc, &stride), 0);
		check_cut_words(cut, 77 + f, 4, 512, lim, sc, stride, t.scores);
		t.p.cut_epoch = ((uint64_t)1 << 40) - 1 - f; /* the next call's words */
		ck_assert_int_eq(strata_k_indexer(d, &t.p, NULL), 0);
		ck_assert_int_eq(strata_event_sync(d, ev), 0);
		ck_assert_int_eq(strata_k_indexer_scores(d, &t.p, &sc, &stride), 0);
		ck_assert_uint_ge(stride, 3000);
		check_cut_words(cut, t.p.cut_epoch, 4, 512, lim, sc, stride, t.scores);
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

		/* end to end: prestage from the indexer's scores and cuts, the map over its ids */
		int mode[4] = { 0, 0, 0, 0 };
		pcfg pf = { 4, 512, 3000, 2, 450, 64, 64, 0, lim, mode, 61 + f, CUT_EXACT };
		pc c;
		pc_make(&c, &pf);
		c.p.scores = sc;
		c.p.score_stride = stride;
		c.p.cut = cut;
		c.p.cut_epoch = t.p.cut_epoch;
		uint64_t rng = 62;
		pc_covers(&c);
		pc_stage(&c, -1, 0, &rng);
		const long n1 = pc_run(&c, 1, 1);
		ck_assert_int_gt(n1, 0);
		int32_t *out = malloc(sizeof(int32_t) * 4 * 512);
		long cnt[3];
		map_check(&c, t.ids, 512, 1, out, cnt);
		ck_assert_int_gt(cnt[1], 0);
		ck_assert_int_eq(cnt[2], 0);
		free(out);
		{
			/* the same staging inside the indexer call (p.stage) with cut words
			 * of its own (cut_out NULL), epoch 2: the same marks, the same ids;
			 * a bad stage (epoch 0) is refused before anything is written */
			const size_t nw = (size_t)4 * c.p.map_stride;
			uint64_t *sm0 = malloc(sizeof *sm0 * nw);
			uint8_t *st0 = malloc(c.stage_bytes);
			int32_t *ids0 = malloc(sizeof(int32_t) * 4 * 512);
			memcpy(sm0, c.p.stage_map, sizeof *sm0 * nw);
			memcpy(st0, c.stage, c.stage_bytes);
			memcpy(ids0, t.ids, sizeof(int32_t) * 4 * 512);
			strata_attn_prestage_params sp = c.p;
			sp.epoch = 2;
			strata_indexer_params si = t.p;
			si.stage = &sp;
			si.cut_out = NULL;
			si.after_scan = NULL;
			unsigned long long staged = 0;
			sp.n_staged = &staged;
			ck_assert_int_eq(strata_k_indexer(d, &si, NULL), 0);
			check_zero(c.p.scratch, c.p.scratch_bytes);
			ck_assert_int_eq(pc_check(&c, c.p.stage_map, c.stage, sm0, st0, 2, 1), n1);
			ck_assert_uint_eq(staged, (unsigned long long)n1);
			ck_assert_mem_eq(t.ids, ids0, sizeof(int32_t) * 4 * 512);
			memset(t.ids, 0x7f, sizeof(int32_t) * 4 * 512);
			memcpy(sm0, c.p.stage_map, sizeof *sm0 * nw);
			sp.epoch = 0;
			ck_assert_int_eq(strata_k_indexer(d, &si, NULL), -EINVAL);
			sp.epoch = 3;
			sp.max_ctas = -1;
			ck_assert_int_eq(strata_k_indexer(d, &si, NULL), -EINVAL);
			sp.max_ctas = 0;
			si.scratch_bytes = n - 1; /* the twin would score elsewhere */
			ck_assert_int_eq(strata_k_indexer(d, &si, NULL), -EINVAL);
			si.scratch_bytes = n;
			for (int i = 0; i < 4 * 512; i++)
				ck_assert_int_eq(t.ids[i], 0x7f7f7f7f);
			ck_assert_mem_eq(sm0, c.p.stage_map, sizeof *sm0 * nw);
			memcpy(t.ids, ids0, sizeof(int32_t) * 4 * 512);
			free(sm0);
			free(st0);
			free(ids0);
		}
		pc_free(&c);

		strata_indexer_params b = t.p;
		b.scratch_bytes = n - 1;
		ck_assert_int_eq(strata_k_indexer_scores(d, &b, &sc, &stride), -EINVAL);
		b.scratch = NULL;
		b.scratch_bytes = n;
		ck_assert_int_eq(strata_k_indexer_scores(d, &b, &sc, &stride), -EINVAL);
		unsigned long long keep[4];
		memcpy(keep, cut, sizeof keep);
		b = t.p;
		b.cut_epoch = 0;
		ck_assert_int_eq(strata_k_indexer_cpu(&b), -EINVAL);
		b.cut_epoch = (uint64_t)1 << 40;
		ck_assert_int_eq(strata_k_indexer_cpu(&b), -EINVAL);
		ck_assert_mem_eq(keep, cut, sizeof keep);
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
	tcase_add_test(tc, bucket_known_values);
	tcase_add_test(tc, bucket_random_vs_reference);
	tcase_add_test(tc, bucket_monotone);
	tcase_add_test(tc, cut_by_hand);
	tcase_add_test(tc, random_rows_full_cap);
	tcase_add_test(tc, small_cap_and_new_epoch);
	tcase_add_test(tc, attention_over_staged_list);
	tcase_add_test(tc, bad_params);
	tcase_add_test(tc, indexer_scores_and_end_to_end);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
#endif /* PRESTAGE_HELPERS_ONLY */
