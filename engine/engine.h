/*
 * engine: the reference DeepSeek-V4 attention-cache engine (deterministic synthetic
 * weights and inputs, the exact cache mechanics of FORMATS.md), the demo, and the
 * `strata` CLI. The engine is a reference for exactness and a workload for benchmarks,
 * not a language model: its "projections" are small seeded random matrices applied to
 * a low-dimensional hidden state drawn from a seeded input process, and every layer
 * reads that hidden state (not the previous layer's output). What it reproduces
 * exactly is the cache: C4 (overlapping) and C128 compressors with their residual
 * state, RMSNorm, YaRN RoPE, Hadamard-rotated index keys in MXFP4 or FP8, per-layer
 * window rings, the indexer's top-k, and sparse attention with the sink.
 *
 * Modes (where the C4 main entries live):
 *   STRATA_REF_ALL_RESIDENT  in a device pool; attention reads them in place.
 *   STRATA_REF_HISPARSE      on the pinned host tier; each step's selected entries are
 *                            looked up in a device hot cache and the misses gathered
 *                            into it; attention reads the hot pool. With
 *                            direct_misses, attention reads hits from the hot pool and
 *                            misses in place from the host tier (or from a device
 *                            staging pool the index map fills), and the step's misses
 *                            of every CSA layer are admitted in one call on a side
 *                            stream after the step's last attention.
 *   STRATA_REF_SWAPIN        on the pinned host tier; every selected entry is copied
 *                            into a staging pool right after top-k, on the compute
 *                            stream, with no cache (SGLang's HiSparse today).
 * All three hand attention the entries in the same (selected-id) order with the same
 * bytes, so their outputs are bit-identical: that is what the tests check.
 *
 * Per step and layer the fp32 attention outputs of all requests are hashed (XXH3-64)
 * and, with keep_outputs, kept for comparison (GPU vs CPU within a tolerance).
 *
 * Thread rules: one engine is used by one thread at a time.
 */
#ifndef STRATA_ENGINE_H
#define STRATA_ENGINE_H

#include "cachemgr/cachemgr.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
	STRATA_REF_ALL_RESIDENT = 0,
	STRATA_REF_HISPARSE = 1,
	STRATA_REF_SWAPIN = 2,
} strata_ref_mode;

typedef enum {
	STRATA_REF_STRUCTURED = 0, /* topic drift: selections with step-to-step locality */
	STRATA_REF_UNIFORM = 1,    /* uniform noise: the worst case for a cache */
} strata_ref_inputs;

/* strata_ref_config.direct_misses. */
typedef enum {
	STRATA_REF_MISS_COPY = 0,     /* into the hot cache before attention */
	STRATA_REF_MISS_IN_PLACE = 1, /* attention reads them from the pinned host tier
					 (zero-copy; once per head group of its plan) */
	STRATA_REF_MISS_STAGED = 2,   /* the index-map kernel copies them into a device
					 staging pool (n_req x topk entries), so each
					 crosses the bus once before attention */
	STRATA_REF_MISS_AUTO = 3,     /* STAGED when attention would read an entry more
					 than once (strata_k_attn_head_groups > 1: small
					 batches), else IN_PLACE; and EARLY instead of
					 STAGED when the indexer call would give each of
					 its filter CTAs a staging CTA in the same wave
					 (strata_k_indexer_stage_ctas: batch 1 at 1M,
					 up to about 8 at 128K on an H200). On the CPU
					 backend: IN_PLACE. strata_ref_stats.miss_path
					 says which. */
	STRATA_REF_MISS_EARLY = 4,    /* STAGED, with the copies made inside the
					 indexer call: extra CTAs of its filter launch find
					 the cut from the scan's histogram and stage the
					 misses among the entries that can still make the
					 top-k while the filter and select run
					 (strata_indexer_params.stage); the index map
					 copies only what is not staged. H200, batch 1:
					 128K 1.02 - 1.05 of all-resident against 1.09 -
					 1.10 for STAGED, 1M 1.02 - 1.03 against 1.05 -
					 1.07; with fewer staging CTAs than filter CTAs
					 (large batches) much slower: 1M batch 8 1.64
					 (bench/results/2026-11-30-h200-s6). */
} strata_ref_miss_path;

/* strata_ref_config.host_tier. */
typedef enum {
	STRATA_REF_HOST_PINNED = 0, /* one pinned allocation (4 KiB pages) per layer */
	STRATA_REF_HOST_HUGE = 1,   /* a tiers/ host pool per layer: 2 MiB pages where the
				       system has them (hugetlb, else THP; stats.host_mem
				       says which) */
	STRATA_REF_HOST_DEVICE = 2, /* diagnostic: the "host" tier in device memory. Same
				       bytes, same kernels and streams, the bus taken out:
				       what is left of the cost is not the bus's */
} strata_ref_host_tier;

typedef struct strata_ref_config {
	size_t size;             /* sizeof(strata_ref_config) */
	strata_model model;      /* fill with strata_model_preset() */
	strata_ref_mode mode;
	int n_req;               /* requests decoded together (one query row each) */
	int max_ctx;             /* tokens per request, prefill + decode */
	int hot_slots;           /* HISPARSE: hot-cache entries per (request, CSA layer),
				    >= top-k; 0: 2 x top-k */
	uint64_t seed;           /* weights and inputs */
	strata_ref_inputs inputs;
	int keep_outputs;        /* keep the last step's outputs (strata_ref_engine_output) */
	int direct_misses;       /* HISPARSE: how a step's misses reach attention without
				    waiting for the hot cache (strata_ref_miss_path). Not
				    COPY: no residency work sits between top-k and
				    attention, the hot cache admits the step's misses (all
				    CSA layers, one call) on a side stream after the step's
				    last attention, and nothing is predicted. COPY (0): misses are copied into the hot
				    cache first (one kernel), prediction on. */
	int attn_tensor_cores;   /* GPU attention on tensor cores (strata_attn_params
				    .tensor_cores); 0: the fp32 kernel */
	int host_tier;           /* HISPARSE / SWAPIN: where the C4 host tier lives
				    (strata_ref_host_tier) */
	int attn_spare_sms;      /* GPU: SMs attention's split leaves to the side
				    streams (strata_attn_params.spare_sms), in every mode
				    alike (the split is part of the arithmetic) */
	int trace;               /* record device events per layer for
				    strata_ref_engine_trace (a few us per step) */
	int early_ctas;          /* EARLY (set, or AUTO's choice): the staging CTAs
				    per request in the indexer's filter launch
				    (strata_attn_prestage_params.max_ctas); 0: as
				    many as fit one wave beside the filter's. AUTO
				    decides on the default shape either way */
	int early_slots;         /* EARLY (set, or AUTO's choice): stage slots per
				    request; 0: 2 x top-k (fewer leave more misses
				    to the index map) */
	int early_dry;           /* EARLY (set, or AUTO's choice), diagnostic:
				    everything but the staging (the map still looks
				    up stage_map, which holds no word of the call's
				    epoch), so the index map copies every miss
				    itself */
} strata_ref_config;

#define STRATA_REF_CONFIG_INIT                                                        \
	{ sizeof(strata_ref_config), STRATA_MODEL_INIT, STRATA_REF_ALL_RESIDENT, 1, 4096, \
	  0, 1, STRATA_REF_STRUCTURED, 0 }

typedef struct strata_ref_engine strata_ref_engine;

typedef struct strata_ref_stats {
	uint64_t steps;            /* decode steps run */
	/* A step is host preparation (the fp32 model math of every layer, uploaded) and
	 * then the device phase: every layer's new-entry encode / hot-cache append and
	 * write-back, scan + top-k, fetch and attention launched back to back with no host
	 * synchronisation, timed with device events around it alone. */
	uint64_t device_ns;        /* device phase, all steps */
	uint64_t last_device_ns;   /* the same, last step */
	uint64_t prep_ns;          /* host preparation (wall clock), all steps */
	uint64_t last_prep_ns;     /* the same, last step */
	/* Host wall clock spent issuing the device phase's launches, last step: near
	 * last_device_ns or above it means the device waited on launches (launch bound). */
	uint64_t last_launch_ns;
	uint64_t hits, misses;     /* hot-cache lookups (HISPARSE), all CSA layers */
	uint64_t fetched_bytes;    /* bytes moved host -> device for selected entries
				      (with direct_misses a miss counts twice: read in
				      place by attention, then copied into the hot cache) */
	uint64_t device_bytes;     /* caches allocated on the device, all requests */
	uint64_t host_bytes;       /* caches allocated on the pinned host tier */
	uint64_t c4_main_bytes;    /* C4 main capacity (wherever it lives) */
	uint64_t hot_bytes;        /* hot-cache / staging pools (part of device_bytes) */
	/* direct_misses EARLY: misses attention took from the early staging, and misses
	 * the index map still had to copy itself (both 0 in other modes) */
	uint64_t early_misses, late_misses;
	int host_mem;              /* strata_host_mem of the C4 host tier (0: plain) */
	int miss_path;             /* HISPARSE with direct_misses: the path taken
				      (strata_ref_miss_path; AUTO resolved to IN_PLACE,
				      STAGED or EARLY at create); else 0 */
} strata_ref_stats;

/* Create an engine on dev (which the caller keeps open until destroy). Allocates every
 * cache for n_req requests of max_ctx tokens. The caller owns *out. */
int strata_ref_engine_create(strata_dev *dev, const strata_ref_config *cfg,
			     strata_ref_engine **out);
void strata_ref_engine_destroy(strata_ref_engine *e); /* NULL is a no-op */

/* Append the next n_tokens of request req's input stream to its caches (windows,
 * compressor state, C4/C128 entries, index keys). Chunked prefill (several calls) is
 * identical to one call. No attention is computed. -ENOSPC past max_ctx. */
int strata_ref_engine_prefill(strata_ref_engine *e, int req, int n_tokens);

/* One decode step for every request: append one token each, then per layer scan +
 * top-k (CSA), fetch (HISPARSE, SWAPIN) and attention with the sink; hash the
 * outputs. Requests must have at least one free position. */
int strata_ref_engine_decode_step(strata_ref_engine *e);

/* Benchmarks: give request req (still empty) a context of n_tokens without running
 * the model over it: every layer gets the same synthetic template entries (C4 main,
 * index keys, C128, generated once per engine from a drifting input stream), the
 * window ring the real last 128 tokens; the compressor state stays empty. Orders of
 * magnitude faster than prefill; the decode steps after it are exact as ever (all
 * modes see the same bytes). -EINVAL unless the request is empty. */
int strata_ref_engine_fill(strata_ref_engine *e, int req, int n_tokens);

/* Tokens in request req so far (-1 for a bad req). */
int strata_ref_engine_length(const strata_ref_engine *e, int req);

/* The output hashes, [steps][n_layers] row-major; valid until the next call. */
const uint64_t *strata_ref_engine_hashes(const strata_ref_engine *e, int *n_steps,
					 int *n_layers);
/* One XXH3-64 over every hash so far. */
uint64_t strata_ref_engine_digest(const strata_ref_engine *e);

/* The last step's fp32 outputs of layer l, [n_req][n_heads][512] on the host, valid
 * until the next step (NULL unless keep_outputs). */
const float *strata_ref_engine_output(const strata_ref_engine *e, int layer);

/* The request's selected C4 ids in layer l at the last step ([top-k], -1 padded; NULL
 * for a non-CSA layer). */
const int32_t *strata_ref_engine_selection(const strata_ref_engine *e, int layer, int req);

void strata_ref_engine_stats(const strata_ref_engine *e, strata_ref_stats *st);

/* With cfg.trace: where the last step's device phase was, in microseconds since its
 * start, at these points of layer `layer` (compute stream unless noted; -1 where the
 * layer has no such point). layer = -1: [0] every layer's caches written, [1] the
 * step's end. */
enum {
	STRATA_REF_T_START = 0,    /* the layer's first launch is reached */
	STRATA_REF_T_INDEXED = 1,  /* CSA: scan + top-k done */
	STRATA_REF_T_MAPPED = 2,   /* CSA: the index list (and any fetch) done */
	STRATA_REF_T_ATTENDED = 3, /* attention (+ split combine) done */
	STRATA_REF_T_SIDE = 4,     /* HISPARSE direct: the step's admission done (side
				      stream; one call, the same point for every
				      CSA layer) */
	STRATA_REF_T_POINTS = 5
};
int strata_ref_engine_trace(const strata_ref_engine *e, int layer,
			    float us[STRATA_REF_T_POINTS]);

/* XXH3-64 of every cache byte and the compressor state of request req (tests: chunked
 * vs one-shot prefill). The C4 main entries are hashed wherever they live. */
uint64_t strata_ref_engine_cache_hash(strata_ref_engine *e, int req);

/* ---- prefix store (ref_prefix.c) ---------------------------------------------------
 * The engine's inputs are synthetic hidden states, so each request also has a
 * synthetic token stream: token p of request r is a deterministic function of (seed,
 * r, input kind, p), as the hidden state of position p is. Equal token prefixes thus
 * mean equal inputs (up to a 2^-32-per-token coincidence), which is what lets the
 * prefix store's key chain stand for the engine's context. */

/* Request req's whole token stream, max_ctx tokens (*n = max_ctx): the first
 * strata_ref_engine_length() of them are the ones the request has seen, the rest the
 * ones prefill and decode will feed it next. Valid until destroy; NULL for a bad req
 * or no memory. */
const uint32_t *strata_ref_engine_tokens(strata_ref_engine *e, int req, int *n);

/* Store request req's context (all strata_ref_engine_length() tokens) as a prefix
 * entry: its C4 main / C4 index / C128 pages (copied off the device where they live
 * there) and, at the end, the residual state (window ring re-laid as one 128-entry
 * block, compressor rows [main | indexer]). The length must be a non-zero multiple of
 * 256 (-EINVAL otherwise): the residual state exists only for the current position,
 * so the stored length is the current one and it ends a checkpoint. Returns
 * strata_prefix_store()'s result. */
int strata_ref_engine_snapshot(strata_ref_engine *e, int req, strata_prefix *pfx);

/* Load hit (from strata_prefix_lookup on this request's tokens) into request req,
 * which must be empty (-EINVAL), as rank `rank` of P: the rank's pages go to their
 * global positions in the request's caches, the residual state (replicated) to the
 * window ring and compressors, the input stream skips hit->tokens positions and the
 * length becomes hit->tokens. With P = 1 decoding then continues exactly as after a
 * prefill of those tokens. With P > 1 the pages other ranks own stay zero: the engine
 * has no DCP attention, so such a request is for inspection
 * (strata_ref_engine_read_page), not decoding. -EINVAL when hit is not a prefix of
 * the request's token stream, -ENOSPC past max_ctx, else strata_prefix_restore()'s
 * error. pfx may have been opened on another strata_dev (or none): everything is
 * restored to host memory and copied in. */
int strata_ref_engine_restore(strata_ref_engine *e, int req, strata_prefix *pfx,
			      const strata_prefix_hit *hit, int P, int rank);

/* Copy logical page `page` (256 tokens) of family f of layer l of request req into
 * host dst (strata_prefix_page_bytes(model, f) bytes). -EINVAL where the layer lacks
 * the family or page is past max_ctx. */
int strata_ref_engine_read_page(strata_ref_engine *e, int req, int layer,
				strata_prefix_family f, uint32_t page, void *dst);

/* `strata demo`: returns a process exit status. */
int strata_demo_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
