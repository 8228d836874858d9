/*
 * Indexer CPU twin (FORMATS.md section 4) and the backend dispatcher.
 *
 * The twin is the reference the GPU is tested against and the path the engine takes
 * without a GPU, so it is written to be exact and reasonably fast: each key is
 * dequantised once per request and scored for all of the request's rows; selection
 * is a quickselect over unique 64-bit keys (score order, then lower id), O(n) per row,
 * followed by a sort of the k winners by id. A long request's keys are scored by up to
 * kMaxThreads threads, each a contiguous range of them (cpu_threads); every score is
 * the same code's, whichever thread runs it, so the results do not depend on the split.
 */
#include "kernels/indexer_int.h"
#include "kernels/prestage_int.h"
#include "kernels_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

int idx_check_params(const strata_indexer_params *p)
{
	if (!p || p->heads < 1 || p->heads > STRATA_INDEXER_MAX_HEADS || p->topk < 1 ||
	    p->n_req < 0 || p->n_rows < 0 || p->max_rows < 1 ||
	    p->max_rows > STRATA_INDEXER_MAX_ROWS || p->max_limit < 0 || p->B < 1 ||
	    p->max_pages < 0 || (int64_t)p->max_pages * p->B > INT32_MAX ||
	    (p->fmt != STRATA_INDEX_MXFP4 && p->fmt != STRATA_INDEX_FP8))
		return -EINVAL;
	if (p->n_rows > 0 && (!p->req_rows || !p->row_limit || !p->out_ids))
		return -EINVAL;
	if (p->n_rows > 0 && p->max_limit > p->topk &&
	    ((!p->q && !p->q8) || !p->w || !p->pages || !p->page_table))
		return -EINVAL;
	if (p->cut_out && (p->cut_epoch < 1 || p->cut_epoch >= ((uint64_t)1 << 40)))
		return -EINVAL;
	return 0;
}

uint32_t strata_k_indexer_bucket(float score)
{
	return idx_bucket(score);
}

/* Every row's scores ([rows][max_limit]: they stay for strata_k_indexer_scores), then
 * one row's selection keys. */
static size_t cpu_rows(const strata_indexer_params *p)
{
	return (size_t)(p->n_rows > p->max_rows ? p->n_rows : p->max_rows);
}

static size_t cpu_scratch(const strata_indexer_params *p)
{
	size_t lim = (size_t)(p->max_limit > 0 ? p->max_limit : 0);
	return lim * cpu_rows(p) * sizeof(float) + lim * sizeof(uint64_t) + 64;
}

size_t strata_k_indexer_scratch(const strata_dev *dev, const strata_indexer_params *p)
{
	if (!p)
		return 0;
	/* The size depends on shapes only: callers ask before the buffers exist, so the
	 * pointers are not checked here (n_rows = 0 skips those checks). */
	strata_indexer_params shape = *p;
	shape.n_rows = 0;
	if (idx_check_params(&shape))
		return 0;
	if (strata_dev_is_gpu(dev)) {
		idx_gpu_layout l;
		idx_gpu_layout_of(p, &l);
		return l.total;
	}
	return cpu_scratch(p);
}

int idx_stage_params(const strata_indexer_params *p, strata_attn_prestage_params *out)
{
	if (!p || !p->stage)
		return 0;
	static const float score_slot = 0.0f;
	static const unsigned long long cut_slot = 0;
	strata_attn_prestage_params q = *p->stage;
	q.n_rows = p->n_rows;
	q.topk = p->topk;
	q.max_limit = p->max_limit;
	q.row_limit = p->row_limit;
	q.scores = &score_slot;          /* the call's, once it has run */
	q.score_stride = (size_t)p->max_limit;
	q.cut = &cut_slot;               /* likewise */
	q.cut_epoch = 1;
	q.wait_us = 0;
	*out = q;
	return pre_check(&q);
}

/* CPU: the call, then strata_k_attn_prestage_cpu with its scores and cuts (in the
 * caller's cut_out, or in words of our own). */
static int indexer_cpu_staged(strata_dev *dev, const strata_indexer_params *p)
{
	strata_attn_prestage_params pp;
	int err = idx_stage_params(p, &pp);
	if (err)
		return err;
	/* the scores must stay in the caller's scratch for the staging: refuse a
	 * scratch the twin would replace with its own before anything is written */
	if (p->n_rows > 0 && (!p->scratch || p->scratch_bytes < cpu_scratch(p)))
		return -EINVAL;
	strata_indexer_params q = *p;
	unsigned long long *own = NULL;
	if (!q.cut_out) {
		own = calloc(p->n_rows > 0 ? (size_t)p->n_rows : 1, sizeof *own);
		if (!own)
			return -ENOMEM;
		q.cut_out = own;
		q.cut_epoch = 1;
	}
	err = strata_k_indexer_cpu(&q);
	if (!err && p->n_rows > 0)
		err = strata_k_indexer_scores(dev, &q, &pp.scores, &pp.score_stride);
	if (!err && p->n_rows > 0) {
		pp.cut = q.cut_out;
		pp.cut_epoch = q.cut_epoch;
		err = strata_k_attn_prestage_cpu(&pp);
	}
	free(own);
	return err;
}

int strata_k_indexer(strata_dev *dev, const strata_indexer_params *p, strata_stream *s)
{
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_k_indexer_gpu(dev, p, s);
#endif
	int err = p && p->stage ? indexer_cpu_staged(dev, p) : strata_k_indexer_cpu(p);
	if (!err && p->after_scan)
		err = strata_event_record(dev, p->after_scan, s);
	return err;
}

int strata_k_indexer_stage_ctas(strata_dev *dev, const strata_indexer_params *p, int *filter)
{
	if (filter)
		*filter = 0;
	if (!p)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_k_indexer_stage_ctas_gpu(dev, p, filter);
#endif
	(void)dev;
	return 0;
}

int strata_k_indexer_wgmma(const strata_dev *dev, const strata_indexer_params *p)
{
	if (!p || !p->scan_wgmma || !p->q8 ||
	    ((uintptr_t)p->q8 & 15) || p->heads != 64 || p->B != 64 || p->max_rows < 1 ||
	    p->max_rows > STRATA_INDEXER_MAX_ROWS ||
	    !strata_dev_is_gpu(dev))
		return 0;
#ifdef STRATA_HAVE_CUDA
	return idx_wgmma_ready();
#else
	return 0;
#endif
}

int strata_k_indexer_scores(const strata_dev *dev, const strata_indexer_params *p,
			    const float **scores, size_t *stride)
{
	if (!p || !scores || !stride || !p->scratch)
		return -EINVAL;
	if (strata_dev_is_gpu(dev)) {
		idx_gpu_layout l;
		idx_gpu_layout_of(p, &l);
		if (p->scratch_bytes < l.total)
			return -EINVAL;
		*scores = (const float *)((const unsigned char *)p->scratch + l.off_scores);
		*stride = l.score_stride;
		return 0;
	}
	if (p->scratch_bytes < cpu_scratch(p))
		return -EINVAL;
	*scores = p->scratch;
	*stride = (size_t)(p->max_limit > 0 ? p->max_limit : 0);
	return 0;
}

int strata_k_indexer_phases(strata_dev *dev, const strata_indexer_params *p, strata_stream *s,
			    float ms[4])
{
	if (!ms)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_k_indexer_phases_gpu(dev, p, s, ms);
#endif
	(void)dev;
	(void)p;
	(void)s;
	return STRATA_E_UNSUPPORTED;
}

/* ---- selection ---------------------------------------------------------------------- */

static void swap64(uint64_t *a, uint64_t *b)
{
	uint64_t t = *a;
	*a = *b;
	*b = t;
}

/* Reorders v[0..n) so that v[0..k) are the k largest (unordered). Keys are unique. */
static void select_largest(uint64_t *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n; /* the k-th largest is at index k-1 of a descending order */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		/* median of three, moved to lo */
		if (v[mid] > v[lo]) swap64(&v[mid], &v[lo]);
		if (v[hi - 1] > v[lo]) swap64(&v[hi - 1], &v[lo]);
		if (v[mid] > v[lo]) swap64(&v[mid], &v[lo]);
		if (v[hi - 1] > v[mid]) swap64(&v[hi - 1], &v[mid]);
		/* now v[lo] >= v[mid] >= v[hi-1]: pivot = v[mid] */
		uint64_t piv = v[mid];
		swap64(&v[mid], &v[lo]);
		size_t store = lo + 1;
		for (size_t i = lo + 1; i < hi; i++)
			if (v[i] > piv)
				swap64(&v[i], &v[store++]);
		swap64(&v[lo], &v[store - 1]); /* pivot to its final place store-1 */
		size_t pos = store - 1;
		if (pos == k - 1)
			return;
		if (pos > k - 1)
			hi = pos;
		else
			lo = pos + 1;
	}
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

static void emit_all(const strata_indexer_params *p, int row, int lim)
{
	int32_t *ids = p->out_ids + (size_t)row * p->topk;
	for (int i = 0; i < p->topk; i++)
		ids[i] = i < lim ? i : -1;
	if (p->out_scores)
		memset(p->out_scores + (size_t)row * p->topk, 0, (size_t)p->topk * sizeof(float));
	if (p->cut_out)
		p->cut_out[row] = p->cut_epoch << 12 | STRATA_INDEXER_CUT_ALL;
}

static void emit_selected(const strata_indexer_params *p, int row, int lim, const float *sc,
			  uint64_t *keys)
{
	for (int j = 0; j < lim; j++)
		keys[j] = idx_key64(sc[j], j);
	select_largest(keys, (size_t)lim, (size_t)p->topk);
	int32_t *ids = p->out_ids + (size_t)row * p->topk;
	for (int i = 0; i < p->topk; i++)
		ids[i] = (int32_t)(0xffffffffu - (uint32_t)keys[i]);
	qsort(ids, (size_t)p->topk, sizeof *ids, cmp_i32);
	if (p->out_scores)
		for (int i = 0; i < p->topk; i++)
			p->out_scores[(size_t)row * p->topk + i] = sc[ids[i]] + 0.0f;
	if (p->cut_out) { /* the lowest bucket among the selected */
		uint32_t b = STRATA_INDEXER_CUT_ALL;
		for (int i = 0; i < p->topk; i++) {
			const uint32_t bi = idx_bucket(sc[ids[i]]);
			b = bi < b ? bi : b;
		}
		p->cut_out[row] = p->cut_epoch << 12 | b;
	}
}

/* ---- scoring ------------------------------------------------------------------------ */

static float dot128(const float *q, const float *k)
{
	float a[8] = { 0 };
	for (int d = 0; d < IDX_DIM; d += 8)
		for (int u = 0; u < 8; u++)
			a[u] += q[d + u] * k[d + u];
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

static int check_request(const strata_indexer_params *p, int req)
{
	int r0 = p->req_rows[req], r1 = p->req_rows[req + 1];
	if (r0 < 0 || r1 < r0 || r1 > p->n_rows || r1 - r0 > p->max_rows)
		return -EINVAL;
	for (int r = r0; r < r1; r++) {
		int lim = p->row_limit[r];
		if (lim < 0 || lim > p->max_limit || (int64_t)lim > (int64_t)p->max_pages * p->B)
			return -EINVAL;
	}
	return 0;
}

/* One thread's share of a request's scoring: keys [j0, j1) for every row r0 .. r0+nr-1
 * whose limit exceeds them and k. */
typedef struct score_part {
	const strata_indexer_params *p;
	const float *qf; /* the request's queries as floats, [row][head][128] */
	float *scores;   /* [rows][lim_all] */
	size_t lim_all;
	int req, r0, nr, j0, j1;
	int err;
} score_part;

static void score_keys(score_part *sp)
{
	const strata_indexer_params *p = sp->p;
	const size_t eb = strata_index_entry_bytes(p->fmt), page_bytes = (size_t)p->B * eb;
	float kv[IDX_DIM];
	for (int j = sp->j0; j < sp->j1; j++) {
		int32_t page = p->page_table[(size_t)sp->req * p->max_pages + j / p->B];
		if (page < 0) {
			sp->err = -EINVAL;
			return;
		}
		float ks;
		idx_key_dequant(p->fmt, p->pages + (size_t)page * page_bytes, p->B, j % p->B, kv, &ks);
		for (int i = 0; i < sp->nr; i++) {
			int lim = p->row_limit[sp->r0 + i];
			if (lim <= p->topk || j >= lim)
				continue;
			const float *w = p->w + (size_t)(sp->r0 + i) * p->heads;
			const float *qr = sp->qf + (size_t)i * p->heads * IDX_DIM;
			float acc = 0.0f;
			for (int h = 0; h < p->heads; h++) {
				float z = dot128(qr + (size_t)h * IDX_DIM, kv);
				acc += w[h] * (z > 0.0f ? z : 0.0f);
			}
			sp->scores[(size_t)(sp->r0 + i) * sp->lim_all + j] = acc * ks;
		}
	}
}

static void *score_thread(void *arg)
{
	score_keys(arg);
	return NULL;
}

enum { kMaxThreads = 16, kKeysPerThread = 8192 };

/* Threads for n keys: p->cpu_threads, else STRATA_CPU_THREADS, else the online CPUs (1:
 * the caller's thread only), at most kMaxThreads and one per kKeysPerThread keys. */
static int cpu_threads(const strata_indexer_params *p, int n)
{
	long t = sysconf(_SC_NPROCESSORS_ONLN);
	const char *e = getenv("STRATA_CPU_THREADS");
	if (p->cpu_threads > 0)
		t = p->cpu_threads;
	else if (e && *e && atoi(e) > 0)
		t = atoi(e);
	if (t > kMaxThreads)
		t = kMaxThreads;
	if (t > n / kKeysPerThread)
		t = n / kKeysPerThread;
	return t < 1 ? 1 : (int)t;
}

/* Scores keys [0, n) of a request, split over cpu_threads(n) threads (the last range in
 * the caller's, and in the caller's too any range whose thread could not start). */
static int score_request(score_part base, int n)
{
	score_part part[kMaxThreads];
	pthread_t th[kMaxThreads];
	const int parts = cpu_threads(base.p, n);
	unsigned started = 0;
	for (int i = 0; i < parts; i++) {
		part[i] = base;
		part[i].j0 = (int)((int64_t)n * i / parts);
		part[i].j1 = (int)((int64_t)n * (i + 1) / parts);
		part[i].err = 0;
		if (i + 1 < parts && pthread_create(&th[i], NULL, score_thread, &part[i]) == 0)
			started |= 1u << i;
		else
			score_keys(&part[i]);
	}
	int err = 0;
	for (int i = 0; i < parts; i++) {
		if (started >> i & 1)
			pthread_join(th[i], NULL);
		if (part[i].err && !err)
			err = part[i].err;
	}
	return err;
}

int strata_k_indexer_cpu(const strata_indexer_params *p)
{
	int err = idx_check_params(p);
	if (err)
		return err;
	if (p->n_rows == 0)
		return 0;
	if (p->req_rows[0] != 0 || p->req_rows[p->n_req] != p->n_rows)
		return -EINVAL;
	for (int i = 0; i < p->n_req; i++)
		if ((err = check_request(p, i)))
			return err;

	size_t need = cpu_scratch(p);
	void *mem = p->scratch, *own = NULL;
	if (!mem || p->scratch_bytes < need) {
		if (!(own = malloc(need)))
			return -ENOMEM;
		mem = own;
	}
	size_t lim_all = (size_t)p->max_limit;
	float *scores = mem; /* [rows][max_limit] */
	uint64_t *keys = (uint64_t *)(((uintptr_t)(scores + lim_all * cpu_rows(p)) + 7) & ~(uintptr_t)7);
	/* the request's queries as floats, [row][head][128] (at most 256 KiB) */
	float *qf = malloc(sizeof(float) * (size_t)p->max_rows * p->heads * IDX_DIM);
	if (!qf) {
		free(own);
		return -ENOMEM;
	}

	for (int req = 0; req < p->n_req; req++) {
		int r0 = p->req_rows[req], nr = p->req_rows[req + 1] - r0, maxlim = 0;
		for (int i = 0; i < nr; i++) {
			int lim = p->row_limit[r0 + i];
			if (lim <= p->topk)
				emit_all(p, r0 + i, lim);
			else if (lim > maxlim)
				maxlim = lim;
		}
		if (!maxlim)
			continue;
		for (size_t e = 0; e < (size_t)nr * p->heads * IDX_DIM; e++) {
			const size_t at = (size_t)r0 * p->heads * IDX_DIM + e;
			qf[e] = p->q8 ? codec_e4m3_decode(p->q8[at]) : codec_bf16_decode(p->q[at]);
		}
		/* each key is dequantised once and scored for every row of the request */
		const score_part base = { .p = p, .qf = qf, .scores = scores, .lim_all = lim_all,
					  .req = req, .r0 = r0, .nr = nr };
		if ((err = score_request(base, maxlim)))
			goto out;
		for (int i = 0; i < nr; i++) {
			int lim = p->row_limit[r0 + i];
			if (lim > p->topk)
				emit_selected(p, r0 + i, lim, scores + (size_t)(r0 + i) * lim_all, keys);
		}
	}
out:
	free(qf);
	free(own);
	return err;
}

#ifndef STRATA_HAVE_CUDA
/* The benchmark baselines are GPU kernels; without CUDA they are absent. */
int strata_idxbase_create(strata_dev *dev, strata_idxbase **out)
{
	(void)dev;
	if (out)
		*out = NULL;
	return STRATA_E_UNSUPPORTED;
}
void strata_idxbase_destroy(strata_idxbase *b)
{
	(void)b;
}
int strata_idxbase_stream_read(strata_idxbase *b, const void *p, size_t bytes, strata_stream *s)
{
	(void)b, (void)p, (void)bytes, (void)s;
	return STRATA_E_UNSUPPORTED;
}
int strata_idxbase_gemm(strata_idxbase *b, int batch, int m, int n, int k, const uint16_t *a,
			long long stride_a, const uint16_t *bm, long long stride_b, float *c,
			long long stride_c, strata_stream *s)
{
	(void)b, (void)batch, (void)m, (void)n, (void)k, (void)a, (void)stride_a, (void)bm;
	(void)stride_b, (void)c, (void)stride_c, (void)s;
	return STRATA_E_UNSUPPORTED;
}
int strata_idxbase_naive(strata_idxbase *b, const strata_indexer_params *p, strata_stream *s)
{
	(void)b, (void)p, (void)s;
	return STRATA_E_UNSUPPORTED;
}
int strata_idxbase_naive_ids(strata_idxbase *b, int row, int32_t *out, float *scores, int n)
{
	(void)b, (void)row, (void)out, (void)scores, (void)n;
	return STRATA_E_UNSUPPORTED;
}
#endif
