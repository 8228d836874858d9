/* Test data for the indexer tests (test_indexer.c, gpu_indexer.c): index pages built
 * from float keys with the FORMATS.md section 3 encoders, a shuffled page table per
 * request, bf16 queries, and an independent double-precision reference that checks a
 * selection with a stated tolerance. Host memory only. */
#ifndef STRATA_TESTS_INDEXER_TDATA_H
#define STRATA_TESTS_INDEXER_TDATA_H

#include <math.h>
#include <pthread.h>
#include <unistd.h>

#include "kernels/codec.h"
#include "kernels/kernels.h"
#include "testutil.h"

enum td_mode {
	TD_RANDOM,    /* uniform keys and queries, positive weights */
	TD_EQUAL,     /* every key identical: all scores equal */
	TD_NEGATIVE,  /* every dot product negative: every ReLU zero, scores 0 */
	TD_MIXED_W,   /* weights of both signs: negative scores too */
	TD_CLUSTERED, /* a few key clusters: many near-ties */
	TD_WIDE,      /* a key's 32-dim groups 0 - 22 octaves apart (MXFP4: group scales far
		       * below the key's largest, where the e4m3 conversion goes subnormal,
		       * 12 - 14 octaves, or reads zero, beyond 14) */
};

typedef struct td {
	strata_indexer_params p; /* host pointers */
	uint8_t *pages;
	int n_pages;
	int32_t *pt, *req_rows, *limits, *ids;
	uint16_t *q;
	uint8_t *q8; /* or NULL: FP8 queries (td_use_q8); q then holds their values */
	float *w, *scores;
	float *keys; /* [n_pages * B][128] the floats that were encoded (by physical slot) */
} td;

static void td_encode_key(strata_index_fmt fmt, const float *x, uint8_t *page, int B, int off)
{
	if (fmt == STRATA_INDEX_MXFP4) {
		uint8_t *pay = page + (size_t)off * 64, *sc = page + (size_t)B * 64 + (size_t)off * 4;
		for (int g = 0; g < 4; g++) {
			float amax = 0;
			for (int d = 0; d < 32; d++)
				amax = fmaxf(amax, fabsf(x[32 * g + d]));
			int e = codec_mxfp4_scale_exp(amax);
			float s = codec_exp2i(e);
			sc[g] = codec_ue8m0_byte(e);
			for (int d = 0; d < 32; d += 2) {
				uint8_t lo = codec_e2m1_encode(x[32 * g + d] / s);
				uint8_t hi = codec_e2m1_encode(x[32 * g + d + 1] / s);
				pay[(32 * g + d) / 2] = (uint8_t)(lo | (hi << 4));
			}
		}
	} else {
		uint8_t *pay = page + (size_t)off * 128;
		float amax = 0;
		for (int d = 0; d < 128; d++)
			amax = fmaxf(amax, fabsf(x[d]));
		float s = codec_exp2i(codec_main_scale_exp(amax));
		for (int d = 0; d < 128; d++)
			pay[d] = codec_e4m3_encode(x[d] / s);
		memcpy(page + (size_t)B * 128 + (size_t)off * 4, &s, 4);
	}
}

/* Runs fn(ctx, part, i0, i1) over [0, n) split into up to TD_THREADS parts, part p in a
 * thread of its own (the last one in the caller's), when n is at least min_n; else one
 * part. The parts' work must not overlap, so the result is the same however it is split
 * up. Returns the number of parts. */
#define TD_THREADS 16
typedef void (*td_part_fn)(void *ctx, int part, int64_t i0, int64_t i1);
typedef struct td_part_arg {
	td_part_fn fn;
	void *ctx;
	int part;
	int64_t i0, i1;
} td_part_arg;
static void *td_part_run(void *arg)
{
	td_part_arg *pa = arg;
	pa->fn(pa->ctx, pa->part, pa->i0, pa->i1);
	return NULL;
}
static int td_split(int64_t n, int64_t min_n, td_part_fn fn, void *ctx)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int parts = n < min_n || cpus < 2 ? 1 : cpus > TD_THREADS ? TD_THREADS : (int)cpus;
	td_part_arg arg[TD_THREADS];
	pthread_t th[TD_THREADS];
	int started = 0;
	for (int i = 0; i < parts; i++) {
		arg[i] = (td_part_arg){ fn, ctx, i, n * i / parts, n * (i + 1) / parts };
		if (i + 1 < parts && pthread_create(&th[i], NULL, td_part_run, &arg[i]) == 0)
			started |= 1 << i;
		else
			td_part_run(&arg[i]); /* the last part, or a thread that could not start */
	}
	for (int i = 0; i < parts; i++)
		if (started >> i & 1)
			pthread_join(th[i], NULL);
	return parts;
}

/* Exact dequantised value of physical slot's dim d and its vector scale. */
static void td_key_values(const td *t, int64_t slot, double *v, double *s)
{
	strata_index_fmt fmt = t->p.fmt;
	int B = t->p.B;
	size_t eb = strata_index_entry_bytes(fmt);
	const uint8_t *page = t->pages + (size_t)(slot / B) * B * eb;
	int off = (int)(slot % B);
	if (fmt == STRATA_INDEX_MXFP4) {
		for (int d = 0; d < 128; d++) {
			uint8_t b = page[(size_t)off * 64 + d / 2];
			uint8_t code = (d & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15);
			v[d] = (double)codec_e2m1_decode(code) *
			       codec_ue8m0_decode(page[(size_t)B * 64 + off * 4 + d / 32]);
		}
		*s = 1.0;
	} else {
		float f;
		for (int d = 0; d < 128; d++)
			v[d] = codec_e4m3_decode(page[(size_t)off * 128 + d]);
		memcpy(&f, page + (size_t)B * 128 + (size_t)off * 4, 4);
		*s = f;
	}
}

/* td_make's keys of slots [i0, i1): drawn into t->keys, then encoded into t->pages
 * (t->p.fmt and t->p.B set; each slot its own bytes). 128 draws a slot from one stream,
 * slot s starting 128 s draws after rng: the same keys however the slots are split. */
typedef struct td_gen_ctx {
	td *t;
	enum td_mode mode;
	uint64_t rng;
	const float (*centres)[128];
} td_gen_ctx;
static void td_gen_part(void *ctx, int part, int64_t i0, int64_t i1)
{
	const td_gen_ctx *g = ctx;
	(void)part;
	const int B = g->t->p.B;
	const size_t eb = strata_index_entry_bytes(g->t->p.fmt);
	uint64_t rng = tu_skip(g->rng, (uint64_t)i0 * 128);
	for (int64_t slot = i0; slot < i1; slot++) {
		float *x = g->t->keys + slot * 128;
		for (int d = 0; d < 128; d++) {
			float u = tu_uniform(&rng);
			switch (g->mode) {
			case TD_EQUAL: x[d] = (d % 7) * 0.25f - 0.7f; break;
			case TD_NEGATIVE: x[d] = -0.1f - fabsf(u); break;
			case TD_CLUSTERED: x[d] = g->centres[slot % 4][d] + u * 0.02f; break;
			case TD_WIDE: {
				static const int oct[8] = { 0, 3, 11, 12, 13, 14, 15, 22 };
				x[d] = ldexpf(u, -oct[(slot + 3 * (d >> 5)) % 8]);
				break;
			}
			default: x[d] = u * (1.0f + (float)(slot % 5)); break;
			}
		}
		td_encode_key(g->t->p.fmt, x, g->t->pages + (size_t)(slot / B) * B * eb, B,
			      (int)(slot % B));
	}
}

/* rows_of[i]: rows of request i; lim: one limit per row (in row order). */
static void td_make(td *t, strata_index_fmt fmt, int heads, int topk, int n_req,
		    const int *rows_of, const int *lim, int B, uint64_t seed, enum td_mode mode)
{
	memset(t, 0, sizeof *t);
	int n_rows = 0, max_rows = 1, max_limit = 0, max_pages = 1;
	for (int i = 0; i < n_req; i++) {
		n_rows += rows_of[i];
		if (rows_of[i] > max_rows)
			max_rows = rows_of[i];
	}
	for (int r = 0; r < n_rows; r++)
		if (lim[r] > max_limit)
			max_limit = lim[r];
	max_pages = (max_limit + B - 1) / B;
	if (max_pages < 1)
		max_pages = 1;
	t->n_pages = n_req * max_pages;
	size_t eb = strata_index_entry_bytes(fmt);
	t->pages = calloc((size_t)t->n_pages * B, eb);
	t->keys = calloc((size_t)t->n_pages * B * 128, sizeof(float));
	t->pt = malloc(sizeof(int32_t) * (size_t)n_req * max_pages);
	t->req_rows = malloc(sizeof(int32_t) * (size_t)(n_req + 1));
	t->limits = malloc(sizeof(int32_t) * (size_t)(n_rows ? n_rows : 1));
	t->q = malloc(sizeof(uint16_t) * (size_t)(n_rows ? n_rows : 1) * heads * 128);
	t->w = malloc(sizeof(float) * (size_t)(n_rows ? n_rows : 1) * heads);
	t->ids = malloc(sizeof(int32_t) * (size_t)(n_rows ? n_rows : 1) * topk);
	t->scores = malloc(sizeof(float) * (size_t)(n_rows ? n_rows : 1) * topk);
	uint64_t rng = seed;
	/* shuffled physical pages */
	for (int i = 0; i < t->n_pages; i++)
		t->pt[i] = i;
	for (int i = t->n_pages - 1; i > 0; i--) {
		int j = (int)(tu_next(&rng) % (uint64_t)(i + 1));
		int32_t x = t->pt[i];
		t->pt[i] = t->pt[j];
		t->pt[j] = x;
	}
	float centres[4][128];
	for (int c = 0; c < 4; c++)
		for (int d = 0; d < 128; d++)
			centres[c][d] = tu_uniform(&rng) * 2.0f;
	const int64_t slots = (int64_t)t->n_pages * B;
	td_gen_ctx gen = { t, mode, rng, centres };
	t->p.fmt = fmt;
	t->p.B = B;
	td_split(slots, 8192, td_gen_part, &gen);
	rng = tu_skip(rng, (uint64_t)slots * 128);
	for (int r = 0; r < n_rows; r++) {
		for (int h = 0; h < heads; h++) {
			float wv = 0.05f + 0.5f * fabsf(tu_uniform(&rng));
			if (mode == TD_MIXED_W && (h % 3) == 1)
				wv = -wv;
			t->w[(size_t)r * heads + h] = wv;
			for (int d = 0; d < 128; d++) {
				float v = tu_uniform(&rng);
				if (mode == TD_NEGATIVE)
					v = 0.05f + fabsf(v);
				t->q[((size_t)r * heads + h) * 128 + d] = codec_bf16_encode(v);
			}
		}
		t->limits[r] = lim[r];
	}
	t->req_rows[0] = 0;
	for (int i = 0; i < n_req; i++)
		t->req_rows[i + 1] = t->req_rows[i] + rows_of[i];
	strata_indexer_params *p = &t->p;
	p->fmt = fmt;
	p->heads = heads;
	p->topk = topk;
	p->n_req = n_req;
	p->n_rows = n_rows;
	p->max_rows = max_rows;
	p->max_limit = max_limit;
	p->q = t->q;
	p->w = t->w;
	p->req_rows = t->req_rows;
	p->row_limit = t->limits;
	p->pages = t->pages;
	p->page_table = t->pt;
	p->max_pages = max_pages;
	p->B = B;
	p->out_ids = t->ids;
	p->out_scores = t->scores;
}

static void td_free(td *t)
{
	free(t->pages);
	free(t->keys);
	free(t->pt);
	free(t->req_rows);
	free(t->limits);
	free(t->q);
	free(t->q8);
	free(t->w);
	free(t->ids);
	free(t->scores);
}

static int td_req_of_row(const td *t, int r)
{
	int i = 0;
	while (t->req_rows[i + 1] <= r)
		i++;
	return i;
}

/* Switches t to FP8 queries: each query value rounded to e4m3 (x 16 first, so typical
 * values keep their precision; the 1/16 goes into w, a power of two), and q rewritten
 * to hold exactly those values, so the bf16 path, the FP8 path and the reference all
 * score the same numbers. */
static inline void td_use_q8(td *t)
{
	size_t n = (size_t)(t->p.n_rows ? t->p.n_rows : 1) * t->p.heads * 128;
	t->q8 = malloc(n);
	for (size_t i = 0; i < n; i++) {
		t->q8[i] = codec_e4m3_encode(16.0f * codec_bf16_decode(t->q[i]));
		t->q[i] = codec_bf16_encode(codec_e4m3_decode(t->q8[i]));
	}
	for (size_t i = 0; i < (size_t)(t->p.n_rows ? t->p.n_rows : 1) * t->p.heads; i++)
		t->w[i] *= 1.0f / 16.0f;
	t->p.q8 = t->q8;
}

/* td_ref_scores' state: row r's queries and scores, each part's magnitude bound. */
typedef struct td_ref_ctx {
	const td *t;
	const double *qd; /* the row's queries, [heads][128] */
	int r, req;
	double *sc, m[TD_THREADS];
} td_ref_ctx;

static void td_ref_part(void *ctx, int part, int64_t j0, int64_t j1)
{
	td_ref_ctx *rc = ctx;
	const td *t = rc->t;
	const strata_indexer_params *p = &t->p;
	double v[128], s, m = 0;
	for (int64_t j = j0; j < j1; j++) {
		int64_t slot = (int64_t)t->pt[(size_t)rc->req * p->max_pages + j / p->B] * p->B + j % p->B;
		td_key_values(t, slot, v, &s);
		double acc = 0, am = 0;
		for (int h = 0; h < p->heads; h++) {
			double z = 0, za = 0;
			for (int d = 0; d < 128; d++) {
				z += rc->qd[h * 128 + d] * v[d];
				za += fabs(rc->qd[h * 128 + d] * v[d]);
			}
			double wv = t->w[(size_t)rc->r * p->heads + h];
			acc += wv * (z > 0 ? z : 0);
			am += fabs(wv) * za;
		}
		rc->sc[j] = acc * s;
		if (am * s > m)
			m = am * s;
	}
	rc->m[part] = m;
}

/* Double-precision scores of row r for j < limit, and the row's magnitude bound
 * M = max_j s_j * sum_h |w_h| * sum_d |q_hd k_jd| (the scale of rounding error). Long
 * rows are split over threads (td_split; each key's sum is the same either way): the
 * reference is most of a long case's time. */
static void td_ref_scores(const td *t, int r, double *sc, double *mag)
{
	const strata_indexer_params *p = &t->p;
	double *qd = malloc(sizeof(double) * (size_t)p->heads * 128);
	for (int i = 0; i < p->heads * 128; i++)
		qd[i] = codec_bf16_decode(t->q[(size_t)r * p->heads * 128 + i]);
	td_ref_ctx rc = { .t = t, .qd = qd, .r = r, .req = td_req_of_row(t, r), .sc = sc };
	const int parts = td_split(t->limits[r], 8192, td_ref_part, &rc);
	double m = 0;
	for (int i = 0; i < parts; i++)
		m = rc.m[i] > m ? rc.m[i] : m;
	*mag = m;
	free(qd);
}

static const double *td_sort_sc;
static int td_cmp_rank(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	double sx = td_sort_sc[x] + 0.0, sy = td_sort_sc[y] + 0.0;
	if (sx != sy)
		return sx > sy ? -1 : 1;
	return (x > y) - (x < y);
}

/* Checks one row's output (ids, optional scores) against ref[] (scores for j < limit)
 * and the reference rule: when limit <= k, exactly 0..limit-1 then -1, scores 0;
 * else k ascending distinct ids < limit whose set equals the reference top-k except
 * for swaps between entries whose reference score is within tol of the k-th score;
 * returned scores within tol of the reference. strict: no swap allowed at all.
 * Returns the number of swapped entries, or -1 (and a reason in why) on a failure. */
static int td_check_row(int lim, int k, const int32_t *ids, const float *scores,
			const double *ref, double tol, int strict, char *why, size_t whylen)
{
	if (lim <= k) {
		for (int i = 0; i < k; i++) {
			int want = i < lim ? i : -1;
			if (ids[i] != want) {
				snprintf(why, whylen, "unscored row: ids[%d]=%d want %d", i, ids[i], want);
				return -1;
			}
			if (scores && scores[i] != 0.0f) {
				snprintf(why, whylen, "unscored row: score[%d]=%g", i, scores[i]);
				return -1;
			}
		}
		return 0;
	}
	for (int i = 0; i < k; i++) {
		if (ids[i] < 0 || ids[i] >= lim || (i && ids[i] <= ids[i - 1])) {
			snprintf(why, whylen, "ids[%d]=%d not ascending in [0,%d)", i, ids[i], lim);
			return -1;
		}
		if (scores && fabs((double)scores[i] - ref[ids[i]]) > tol) {
			snprintf(why, whylen, "score of id %d: %.9g want %.9g (tol %g)", ids[i],
				 scores[i], ref[ids[i]], tol);
			return -1;
		}
	}
	int *ord = malloc(sizeof(int) * (size_t)lim);
	char *in_ref = calloc((size_t)lim, 1);
	for (int j = 0; j < lim; j++)
		ord[j] = j;
	td_sort_sc = ref;
	qsort(ord, (size_t)lim, sizeof(int), td_cmp_rank);
	for (int i = 0; i < k; i++)
		in_ref[ord[i]] = 1;
	double kth = ref[ord[k - 1]];
	int swaps = 0, bad = 0;
	for (int i = 0; i < k; i++) {
		if (in_ref[ids[i]] == 1) {
			in_ref[ids[i]] = 2;
			continue;
		}
		swaps++;
		if (strict || fabs(ref[ids[i]] - kth) > tol) {
			snprintf(why, whylen, "id %d (score %.9g) selected, not in reference "
				 "(k-th score %.9g, tol %g)", ids[i], ref[ids[i]], kth, tol);
			bad = 1;
		}
	}
	for (int j = 0; j < lim && !bad; j++)
		if (in_ref[j] == 1 && (strict || fabs(ref[j] - kth) > tol)) {
			snprintf(why, whylen, "reference id %d (score %.9g) missing (k-th %.9g, tol %g)",
				 j, ref[j], kth, tol);
			bad = 1;
		}
	free(ord);
	free(in_ref);
	return bad ? -1 : swaps;
}

#endif
