/*
 * The reference engine's model math: seeded synthetic weights, the input process and
 * the exact cache arithmetic of FORMATS.md section 5 (compressors with their residual
 * state, RMSNorm, YaRN RoPE, the Hadamard rotation). Everything is fp32 on the host
 * in a fixed order, so it is reproducible across runs and backends.
 *
 * Synthetic weights are related on purpose: a layer's query, window and compressor
 * projections share one base matrix (plus independent noise), and so do its index
 * query and index-key projections. Then q . k is large when the two tokens' hidden
 * states are close, and the topic-drift input gives selections the step-to-step
 * locality of real traces; uniform inputs give none.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ref_int.h"

uint64_t ref_rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull); /* splitmix64 */
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

float ref_rng_uniform(uint64_t *s)
{
	return (float)((double)(ref_rng_next(s) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

static float *alloc_floats(size_t n)
{
	return calloc(n ? n : 1, sizeof(float));
}

/* w[i] = base[i % base_n] * gain + noise * u: related projections (see the top). */
static void fill_related(float *w, size_t n, const float *base, size_t base_n, float gain,
			 float noise, uint64_t *rng)
{
	for (size_t i = 0; i < n; i++)
		w[i] = (base ? base[i % base_n] * gain : 0.0f) + noise * ref_rng_uniform(rng);
}

static void matvec(const float *w, int rows, const float *h, float *out)
{
	for (int i = 0; i < rows; i++) {
		const float *wr = w + (size_t)i * REF_HID;
		float s = 0.0f;
		for (int j = 0; j < REF_HID; j++)
			s += wr[j] * h[j];
		out[i] = s;
	}
}

/* ---- RMSNorm, RoPE, Hadamard ------------------------------------------------------- */

void ref_rmsnorm(float *x, int n, const float *w)
{
	float ss = 0.0f;
	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	float r = 1.0f / sqrtf(ss / (float)n + 1e-6f);
	for (int i = 0; i < n; i++)
		x[i] = x[i] * r * w[i];
}

/* YaRN as in DeepSeek's reference precompute_freqs_cis (dim 64, theta 160000,
 * factor 16, original length 65536, beta_fast 32, beta_slow 1):
 *   f_i = theta^(-2i/64),  corr(r) = 64 ln(65536 / (2 pi r)) / (2 ln theta)
 *   lo = max(floor(corr(32)), 0),  hi = min(ceil(corr(1)), 63)
 *   ramp_i = clamp((i - lo) / (hi - lo), 0, 1),  smooth_i = 1 - ramp_i
 *   f'_i = f_i / 16 * (1 - smooth_i) + f_i * smooth_i
 * (low-frequency pairs are interpolated by the factor, high-frequency ones kept).
 * The angle of pair i at position p is p * f'_i, evaluated in double. No attention
 * mscale: the softmax scale is 512^-0.5 (FORMATS.md section 1). */
void ref_rope_freqs(double freqs[32])
{
	const double theta = 160000.0, factor = 16.0, orig = 65536.0, dim = 64.0;
	double lo = floor(dim * log(orig / (32.0 * 2.0 * M_PI)) / (2.0 * log(theta)));
	double hi = ceil(dim * log(orig / (1.0 * 2.0 * M_PI)) / (2.0 * log(theta)));
	lo = fmax(lo, 0.0);
	hi = fmin(hi, dim - 1.0);
	if (hi == lo)
		hi += 0.001;
	for (int i = 0; i < 32; i++) {
		double f = pow(theta, -2.0 * i / dim);
		double ramp = fmin(fmax((i - lo) / (hi - lo), 0.0), 1.0);
		double smooth = 1.0 - ramp;
		freqs[i] = f / factor * (1.0 - smooth) + f * smooth;
	}
}

void ref_rope(float *x, const double *freqs, int64_t pos)
{
	for (int i = 0; i < 32; i++) {
		double a = (double)pos * freqs[i];
		float c = (float)cos(a), s = (float)sin(a);
		float x0 = x[2 * i], x1 = x[2 * i + 1];
		x[2 * i] = x0 * c - x1 * s;
		x[2 * i + 1] = x0 * s + x1 * c;
	}
}

void ref_hadamard128(float *x)
{
	for (int len = 1; len < REF_ID; len <<= 1)
		for (int i = 0; i < REF_ID; i += len << 1)
			for (int j = i; j < i + len; j++) {
				float a = x[j], b = x[j + len];
				x[j] = a + b;
				x[j + len] = a - b;
			}
	const float s = 0.08838834764831845f; /* 128^-0.5 */
	for (int i = 0; i < REF_ID; i++)
		x[i] *= s;
}

/* ---- compressors ------------------------------------------------------------------ */

int ref_comp_init(ref_comp *c, int ratio, int d, uint64_t seed)
{
	memset(c, 0, sizeof *c);
	c->ratio = ratio;
	c->coff = ratio == 4 ? 2 : 1;
	c->d = d;
	size_t kvn = (size_t)c->coff * d;
	c->w = alloc_floats(2 * kvn * REF_HID);
	c->ape = alloc_floats((size_t)ratio * kvn);
	c->norm_w = alloc_floats((size_t)d);
	if (!c->w || !c->ape || !c->norm_w) {
		ref_comp_free(c);
		return -ENOMEM;
	}
	uint64_t rng = seed;
	/* kv rows: each half shares the layer's base (seeded by `seed ^ 1`) so that a
	 * compressed entry resembles its tokens; score rows are independent gates. */
	float *base = alloc_floats((size_t)d * REF_HID);
	if (!base) {
		ref_comp_free(c);
		return -ENOMEM;
	}
	uint64_t brng = seed ^ 0x5eedull;
	fill_related(base, (size_t)d * REF_HID, NULL, 1, 0.0f, 0.3f, &brng);
	fill_related(c->w, kvn * REF_HID, base, (size_t)d * REF_HID, 1.0f, 0.05f, &rng);
	fill_related(c->w + kvn * REF_HID, kvn * REF_HID, NULL, 1, 0.0f, 0.15f, &rng);
	fill_related(c->ape, (size_t)ratio * kvn, NULL, 1, 0.0f, 0.5f, &rng);
	for (int i = 0; i < d; i++)
		c->norm_w[i] = 1.0f + 0.1f * ref_rng_uniform(&rng);
	free(base);
	return 0;
}

void ref_comp_free(ref_comp *c)
{
	free(c->w);
	free(c->ape);
	free(c->norm_w);
	memset(c, 0, sizeof *c);
}

size_t ref_comp_state_floats(const ref_comp *c)
{
	return (size_t)c->coff * c->ratio * 2 * c->coff * c->d;
}

void ref_comp_state_reset(const ref_comp *c, float *state)
{
	size_t row = 2 * (size_t)c->coff * c->d, kvn = (size_t)c->coff * c->d;
	for (int r = 0; r < c->coff * c->ratio; r++) {
		float *s = state + r * row;
		for (size_t i = 0; i < kvn; i++) {
			s[i] = 0.0f;            /* kv of positions before 0 */
			s[kvn + i] = -INFINITY; /* their score: they take no weight */
		}
	}
}

/* State rows: C4 keeps 8 rows (0..3 the previous group, 4..7 the current one); C128
 * keeps 128 (the current group). Position p's row is coff == 2 ? 4 + p % 4 : p % 128.
 * At p with (p + 1) % ratio == 0 the entry is, per dim i (FORMATS.md section 5):
 *   C4:   rows 0..3 contribute kv[i] / score[i] (dims [0,d) of the previous group),
 *         rows 4..7 contribute kv[d+i] / score[d+i] (dims [d,2d) of the current one),
 *   C128: rows 0..127 contribute kv[i] / score[i],
 *   entry[i] = sum_r softmax_r(score) kv  (rows in order; max subtracted first).
 * Then C4 moves rows 4..7 to 0..3. */
int ref_comp_push(const ref_comp *c, float *state, const float *h, int64_t p,
		  const double *freqs, float *entry)
{
	const int d = c->d, kvn = c->coff * d, R = c->coff * c->ratio;
	const size_t row = 2 * (size_t)kvn;
	int cur = c->coff == 2 ? c->ratio + (int)(p % c->ratio) : (int)(p % c->ratio);
	float *s = state + cur * row;
	matvec(c->w, 2 * kvn, h, s); /* kv then score */
	const float *ape = c->ape + (size_t)(p % c->ratio) * kvn;
	for (int i = 0; i < kvn; i++)
		s[kvn + i] += ape[i];
	if ((p + 1) % c->ratio)
		return 0;
	for (int i = 0; i < d; i++) {
		float m = -INFINITY;
		for (int r = 0; r < R; r++) {
			int off = (c->coff == 2 && r >= c->ratio) ? d + i : i;
			m = fmaxf(m, state[r * row + kvn + off]);
		}
		float z = 0.0f, acc = 0.0f;
		for (int r = 0; r < R; r++) {
			int off = (c->coff == 2 && r >= c->ratio) ? d + i : i;
			float e = expf(state[r * row + kvn + off] - m);
			z += e;
			acc += e * state[r * row + off];
		}
		entry[i] = acc / z;
	}
	if (c->coff == 2)
		memcpy(state, state + (size_t)c->ratio * row, sizeof(float) * c->ratio * row);
	ref_rmsnorm(entry, d, c->norm_w);
	ref_rope(entry + d - 64, freqs, p + 1 - c->ratio);
	return 1;
}

/* ---- layers ------------------------------------------------------------------------ */

int ref_layer_init(ref_layer_w *w, const strata_model *m, int layer, uint64_t seed)
{
	memset(w, 0, sizeof *w);
	w->ratio = m->ratio[layer];
	uint64_t rng = seed * 0x100000001b3ull + (uint64_t)layer * 0x9e3779b97f4a7c15ull + 1;
	uint64_t lseed = ref_rng_next(&rng);
	size_t dn = (size_t)REF_D * REF_HID;
	w->w_win = alloc_floats(dn);
	w->win_norm = alloc_floats(REF_D);
	w->w_q = alloc_floats(dn);
	w->q_head = alloc_floats((size_t)m->n_heads * REF_D);
	w->sink = alloc_floats((size_t)m->n_heads);
	float *base = alloc_floats(dn);
	int err = -ENOMEM;
	if (!w->w_win || !w->win_norm || !w->w_q || !w->q_head || !w->sink || !base)
		goto out;
	/* The main compressor's base is seeded from lseed ^ 1 (ref_comp_init); the window
	 * and query projections reuse the same base so that q . k tracks h . h'. */
	uint64_t brng = (lseed ^ 1) ^ 0x5eedull;
	fill_related(base, dn, NULL, 1, 0.0f, 0.3f, &brng);
	fill_related(w->w_win, dn, base, dn, 1.0f, 0.05f, &rng);
	fill_related(w->w_q, dn, base, dn, 1.0f, 0.05f, &rng);
	for (int i = 0; i < m->n_heads * REF_D; i++)
		w->q_head[i] = 1.0f + 0.5f * ref_rng_uniform(&rng);
	for (int i = 0; i < REF_D; i++)
		w->win_norm[i] = 1.0f + 0.1f * ref_rng_uniform(&rng);
	for (int h = 0; h < m->n_heads; h++)
		w->sink[h] = 1.5f * ref_rng_uniform(&rng);
	if (w->ratio) {
		err = ref_comp_init(&w->main, w->ratio, REF_D, lseed ^ 1);
		if (err)
			goto out;
	}
	if (w->ratio == 4) {
		err = ref_comp_init(&w->idx, 4, REF_ID, lseed ^ 2);
		if (err)
			goto out;
		size_t in = (size_t)REF_ID * REF_HID;
		w->w_iq = alloc_floats(in);
		w->iq_head = alloc_floats((size_t)m->index_heads * REF_ID);
		w->w_iw = alloc_floats((size_t)m->index_heads * REF_HID);
		float *ibase = alloc_floats(in);
		err = -ENOMEM;
		if (!w->w_iq || !w->iq_head || !w->w_iw || !ibase) {
			free(ibase);
			goto out;
		}
		uint64_t irng = (lseed ^ 2) ^ 0x5eedull; /* the index compressor's base */
		fill_related(ibase, in, NULL, 1, 0.0f, 0.3f, &irng);
		fill_related(w->w_iq, in, ibase, in, 1.0f, 0.05f, &rng);
		free(ibase);
		for (int i = 0; i < m->index_heads * REF_ID; i++)
			w->iq_head[i] = 1.0f + 0.5f * ref_rng_uniform(&rng);
		/* zero-mean: with a bias of 1 in ref_index_query the head weights vary with
		 * the token but stay positive, so a score ranks keys by their similarity;
		 * an all-positive w_iw made every weight take the sign of sum(h), and rows
		 * with a negative sum scored every key <= 0 (top-k = the lowest ids) */
		for (int i = 0; i < m->index_heads * REF_HID; i++)
			w->w_iw[i] = 0.05f * ref_rng_uniform(&rng);
	}
	err = 0;
out:
	free(base);
	if (err)
		ref_layer_free(w);
	return err;
}

void ref_layer_free(ref_layer_w *w)
{
	free(w->w_win);
	free(w->win_norm);
	free(w->w_q);
	free(w->q_head);
	free(w->sink);
	ref_comp_free(&w->main);
	ref_comp_free(&w->idx);
	free(w->w_iq);
	free(w->iq_head);
	free(w->w_iw);
	memset(w, 0, sizeof *w);
}

void ref_window_entry(const ref_layer_w *w, const float *h, int64_t t, const double *freqs,
		      float *out)
{
	matvec(w->w_win, REF_D, h, out);
	ref_rmsnorm(out, REF_D, w->win_norm);
	ref_rope(out + REF_D - 64, freqs, t);
}

void ref_query(const ref_layer_w *w, int heads, const float *h, int64_t t,
	       const double *freqs, float *q)
{
	/* One projection, then a per-head elementwise gain: heads differ, and the cost
	 * stays 512 per head (flash: 64 heads x 43 layers per token). */
	float base[REF_D];
	matvec(w->w_q, REF_D, h, base);
	for (int k = 0; k < heads; k++) {
		float *qk = q + (size_t)k * REF_D;
		for (int i = 0; i < REF_D; i++)
			qk[i] = base[i] * w->q_head[(size_t)k * REF_D + i];
		ref_rope(qk + REF_D - 64, freqs, t);
	}
}

void ref_index_query(const ref_layer_w *w, int iheads, const float *h, int64_t t,
		     const double *freqs, float *q, float *wts)
{
	float base[REF_ID];
	matvec(w->w_iq, REF_ID, h, base);
	for (int k = 0; k < iheads; k++) {
		float *qk = q + (size_t)k * REF_ID;
		for (int i = 0; i < REF_ID; i++)
			qk[i] = base[i] * w->iq_head[(size_t)k * REF_ID + i];
		ref_rope(qk + REF_ID - 64, freqs, t);
		ref_hadamard128(qk);
	}
	matvec(w->w_iw, iheads, h, wts);
	const float c = 0.08838834764831845f * (1.0f / sqrtf((float)iheads));
	for (int k = 0; k < iheads; k++)
		wts[k] = (1.0f + wts[k]) * c; /* 128^-0.5 * heads^-0.5 (FORMATS.md section 4) */
}

/* ---- inputs ------------------------------------------------------------------------ */

void ref_input_init(ref_input *in, uint64_t seed, int req, strata_ref_inputs kind)
{
	memset(in, 0, sizeof *in);
	in->kind = kind;
	in->rng = seed ^ (0xa5a5a5a5ull + (uint64_t)req * 0x9e3779b97f4a7c15ull);
	for (int j = 0; j < REF_HID; j++)
		in->topic[j] = ref_rng_uniform(&in->rng) * 1.7f;
}

/* Structured: the topic drifts slowly (a random walk renormalised to a fixed length)
 * and jumps to a fresh one now and then (a new task); each token is the topic plus
 * noise. Uniform: independent noise per token. */
void ref_input_next(ref_input *in, float h[REF_HID])
{
	if (in->kind == STRATA_REF_UNIFORM) {
		for (int j = 0; j < REF_HID; j++)
			h[j] = 1.7f * ref_rng_uniform(&in->rng);
		return;
	}
	int jump = ref_rng_next(&in->rng) % 2048 == 0;
	float ss = 0.0f;
	for (int j = 0; j < REF_HID; j++) {
		float u = ref_rng_uniform(&in->rng);
		in->topic[j] = jump ? 1.7f * u : in->topic[j] + 0.08f * u;
		ss += in->topic[j] * in->topic[j];
	}
	float r = sqrtf((float)REF_HID) / sqrtf(ss + 1e-12f);
	for (int j = 0; j < REF_HID; j++) {
		in->topic[j] *= r;
		h[j] = in->topic[j] + 0.5f * ref_rng_uniform(&in->rng);
	}
}
