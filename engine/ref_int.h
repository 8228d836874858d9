/* Private to engine/: the reference engine's model math and its state. */
#ifndef STRATA_ENGINE_REF_INT_H
#define STRATA_ENGINE_REF_INT_H

#include "engine/engine.h"

#define REF_HID 32        /* hidden-state dims the synthetic projections read */
#define REF_D 512         /* main entry dims */
#define REF_ID 128        /* index dims */
#define REF_WIN_BLOCKS 2  /* a 128-entry window ring = 2 blocks of 64 */
#define ELOG(level, ...) STRATA_LOG(level, STRATA_SUB_ENGINE, __VA_ARGS__)

/* ---- ref_model.c: synthetic weights, inputs and the exact cache math ---------------- */

uint64_t ref_rng_next(uint64_t *s);
float ref_rng_uniform(uint64_t *s); /* [-1, 1) */

/* A compressor (FORMATS.md section 5): weights plus the per-request residual state. */
typedef struct ref_comp {
	int ratio, coff, d;       /* 4/2/512, 4/2/128 (indexer), 128/1/512 */
	float *w;                 /* [2 * coff * d][REF_HID]: kv rows then score rows */
	float *ape;               /* [ratio][coff * d] */
	float *norm_w;            /* [d] */
} ref_comp;

int ref_comp_init(ref_comp *c, int ratio, int d, uint64_t seed);
void ref_comp_free(ref_comp *c);
/* State floats per request: coff*ratio rows of [kv coff*d | score coff*d]. */
size_t ref_comp_state_floats(const ref_comp *c);
void ref_comp_state_reset(const ref_comp *c, float *state);
/* Feed position p's hidden state; returns 1 and writes the normalised, roped entry
 * (d floats, before quantisation; RoPE at the group's start) when p completes a group. */
int ref_comp_push(const ref_comp *c, float *state, const float *h, int64_t p,
		  const double *freqs, float *entry);

typedef struct ref_layer_w {
	int ratio;
	float *w_win;             /* [512][REF_HID] */
	float *win_norm;          /* [512] */
	float *w_q;               /* [512][REF_HID] */
	float *q_head;            /* [heads][512] per-head gains */
	float *sink;              /* [heads] */
	ref_comp main;            /* ratio 4 or 128 */
	ref_comp idx;             /* ratio 4 only: the indexer's compressor, d = 128 */
	float *w_iq;              /* [128][REF_HID] */
	float *iq_head;           /* [index_heads][128] per-head gains */
	float *w_iw;              /* [index_heads][REF_HID] */
} ref_layer_w;

int ref_layer_init(ref_layer_w *w, const strata_model *m, int layer, uint64_t seed);
void ref_layer_free(ref_layer_w *w);

/* YaRN frequencies of the 32 RoPE pairs (see ref_model.c for the formula). */
void ref_rope_freqs(double freqs[32]);
/* GPT-J (interleaved pairs) rotation of x[0..63] at position pos. */
void ref_rope(float *x, const double *freqs, int64_t pos);
void ref_rmsnorm(float *x, int n, const float *w);
void ref_hadamard128(float *x); /* in place, scale 128^-0.5 */

/* Window entry, query rows and index query rows of one token. */
void ref_window_entry(const ref_layer_w *w, const float *h, int64_t t, const double *freqs,
		      float *out /* [512] */);
void ref_query(const ref_layer_w *w, int heads, const float *h, int64_t t,
	       const double *freqs, float *q /* [heads][512] */);
void ref_index_query(const ref_layer_w *w, int iheads, const float *h, int64_t t,
		     const double *freqs, float *q /* [iheads][128] */, float *wts /* [iheads] */);

/* The input process of one request: hidden state of the next token. */
typedef struct ref_input {
	uint64_t rng;
	float topic[REF_HID];
	strata_ref_inputs kind;
} ref_input;
void ref_input_init(ref_input *in, uint64_t seed, int req, strata_ref_inputs kind);
void ref_input_next(ref_input *in, float h[REF_HID]);

#endif
