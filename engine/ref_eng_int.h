/* Private to engine/: the reference engine's state (ref_engine.c, ref_step.c,
 * ref_fetch.c). */
#ifndef STRATA_ENGINE_REF_ENG_INT_H
#define STRATA_ENGINE_REF_ENG_INT_H

#include "engine/ref_int.h"

typedef struct ref_lay {
	ref_layer_w w;
	float *cstate;      /* host [n_req][main compressor state] (ratio 4, 128) */
	float *istate;      /* host [n_req][indexer compressor state] (ratio 4) */
	uint8_t *win;       /* device: n_req x 2 blocks of 64 entries */
	uint8_t *c128;      /* device: n_req x nblk blocks of 2 (ratio 128) */
	uint8_t *c4;        /* ratio 4: device (ALL_RESIDENT) or pinned host: n_req x nblk blocks */
	strata_host_pool *c4_pool; /* host_tier HUGE: the host pool c4 lives in */
	uint8_t *pages;     /* device index pages: n_req x nblk pages of 64 keys */
	float *d_sink, *d_q, *d_out, *d_iw;
	uint16_t *d_iq;     /* [n_req][index_heads][128] bf16 */
	int32_t *d_ids;     /* [n_req][topk] selected ids (a CSA layer's: its part of
			       e->d_ids_csa) */
	int32_t *d_list;    /* [n_req][topk] index list for attention */
	float *h_out;       /* [n_req][heads][512] */
	int32_t *h_ids, *h_list;
	/* HISPARSE / SWAPIN (ref_fetch.c) */
	int csa;            /* this layer's number among the CSA layers */
	int next_csa;       /* the next CSA layer's index in lay[], or -1 */
	int32_t *d_row_rl;  /* [n_req] hot-cache (request, layer) number of each row (its
			       part of e->d_rl_csa) */
	int32_t *d_src;     /* SWAPIN: [n_req][topk] host-tier slots to gather */
	/* The decode step's staging (ref_step.c): this layer's part of e->h_prep /
	 * e->d_prep, see prep_layout(). n_main / n_idx: entries completed this step. */
	int n_main, n_idx;
} ref_lay;

struct strata_ref_engine {
	/* Every CSA layer's selected ids [n_csa][n_req][topk] and (HISPARSE, SWAPIN) hot-cache
	 * rl [n_csa][n_req] in one block each, so that one call admits a whole step's
	 * misses (direct_misses: after the last layer's attention, on the side stream) */
	int32_t *d_ids_csa, *d_rl_csa;
	strata_event *ev_attended; /* direct_misses: the step's last attention is done */
	strata_dev *dev;
	strata_ref_config cfg;
	strata_model m;
	int nblk, cap4, cap128, hot_slots, stage_rows;
	double freqs[32];
	ref_input *in;
	int *len;
	ref_lay *lay;
	/* device */
	int32_t *d_pt, *d_rowreq, *d_rowlim, *d_rowbase, *d_win_idx, *d_c128_idx;
	void *d_scratch;
	size_t scratch_bytes;
	void *d_attn_scratch;   /* split-over-entries attention (small batches), or NULL */
	size_t attn_scratch_bytes;
	float *d_stage;
	int64_t *d_slots;
	strata_event *ev0, *ev1, *ev_side;
	int side_open;      /* ev_side marks side-stream work the compute stream has not
			       joined yet (ref_side_join) */
	/* cfg.trace: events [n_layers + 1][STRATA_REF_T_POINTS] (the last row: caches
	 * written, end) and their times, recorded[] where a step recorded them */
	strata_event **tev;
	float *trace_us;
	unsigned char *trecorded;
	/* decode-step staging, every layer's new entries and slots: pinned host and
	 * device, prep_layer_bytes per layer (allocated once, ref_step.c) */
	uint8_t *h_prep, *d_prep;
	size_t prep_layer_bytes;
	/* host staging */
	float *h_stage, *h_hid, *h_q;
	int64_t *h_slots;
	int32_t *h_win_idx, *h_c128_idx;
	/* results */
	uint64_t *hashes;   /* [cap_steps][n_layers] */
	int n_steps, cap_steps;
	uint64_t stamp;
	strata_ref_stats st;
	/* HISPARSE: prefetch/'s hot cache over every (request, CSA layer); SWAPIN: a
	 * staging pool of n_req x topk entries */
	strata_hotcache *hc;
	strata_stream *side;
	uint8_t *stage_pool;
	uint8_t *hot_base;      /* the pool attention reads in either mode */
	int32_t *d_rowbase_k;   /* [n_req]: r * topk */
	const int32_t *hc_map;  /* direct_misses: the hot cache's residency map */
	uint8_t *miss_stage;    /* direct_misses staged: [n_req x topk] entries, or NULL
				   (misses read in place) */
	int hc_stride;          /* its ids per rl */
	int miss_path;          /* direct_misses as resolved (AUTO: what it chose) */
	/* direct_misses EARLY (the indexer call stages the misses: its stage params):
	 * the staging's id -> entry map [n_req][cap4] (NULL otherwise), its scratch, the
	 * last call's epoch, and [early, late, staged] miss counts */
	uint64_t *d_stage_map;
	void *d_pre_scratch;
	size_t pre_scratch_bytes;
	uint64_t pre_epoch;
	unsigned long long *d_miss_counts;
	int32_t *d_ap_rl, *d_ap_ids; /* HISPARSE appends: [stage_rows] */
	int32_t *h_ap;          /* [2][stage_rows] */
	/* strata_ref_engine_fill(): template entries on the device */
	uint8_t *tmpl_c4, *tmpl_pages, *tmpl_c128;
	int tmpl_tokens;
	/* ref_prefix.c: the requests' synthetic token streams, [n_req][max_ctx], made on
	 * first use */
	uint32_t *tokens;
};

/* ref_engine.c: write n tokens (request req[k] at position pos[k], hidden state
 * e->h_hid[k]) into every layer's caches. */
int ref_append_tokens(strata_ref_engine *e, const int *req, const int64_t *pos, int n);

int ref_fetch_init(strata_ref_engine *e);     /* after every layer is allocated */
void ref_fetch_free(strata_ref_engine *e);
int ref_fetch_layer_init(strata_ref_engine *e, ref_lay *L);
void ref_fetch_layer_free(strata_ref_engine *e, ref_lay *L);
/* Turn L->d_ids into L->d_list over L->hot (HISPARSE: cache lookup + miss gather;
 * SWAPIN: gather everything). */
int ref_fetch(strata_ref_engine *e, ref_lay *L);
/* Orders the compute stream after the side streams' work of the last step (the
 * admissions and write-backs that step left running); a no-op when none is open.
 * Every user of the compute stream after a step calls it first. */
int ref_side_join(strata_ref_engine *e);
/* direct_misses EARLY (unless early_dry): the stage parameters for layer L's indexer
 * call (strata_indexer_params.stage), with a new epoch; 0 and *use = 0 otherwise. */
int ref_fetch_early(strata_ref_engine *e, ref_lay *L, strata_attn_prestage_params *pp,
		    int *use);
/* After the layer's attention was launched: direct_misses' admission on the side
 * stream (a no-op otherwise). */
int ref_fetch_admit(strata_ref_engine *e);
/* HISPARSE: n new C4 entries of layer L (floats in e->h_stage, request / id pairs in
 * reqs / ids) into the hot cache and, written back, the host tier. */
/* HISPARSE: request req now has n_entries C4 entries on the host tier. */
int ref_fetch_filled(strata_ref_engine *e, int req, int n_entries);
/* demo_prefix.c: `strata demo --prefix` (a process exit status). */
int ref_demo_prefix(strata_dev *dev, const strata_ref_config *base, int tokens, int steps);

int ref_fetch_append(strata_ref_engine *e, ref_lay *L, const int *reqs, const int64_t *ids,
		     int n);
/* The same from device staging: rl / ids device int32 [n], src device float [n][512]. */
int ref_fetch_append_dev(strata_ref_engine *e, const int32_t *rl, const int32_t *ids,
			 const float *src, int n);
/* cfg.trace: record point pt of layer l (-1: the step's own row) on stream s. */
int ref_trace_mark(strata_ref_engine *e, int l, int pt, strata_stream *s);
/* ref_step.c: the decode step's staging buffers (create / destroy). */
int ref_step_init(strata_ref_engine *e);
void ref_step_free(strata_ref_engine *e);

#endif
