/*
 * prefetch: turns selections into movement. The device hot cache of C4 main entries,
 * the miss copies from the host tier, write-back of new entries, prediction, and the
 * hit/miss/bytes counters; plus a seeded selection generator for tests and benchmarks.
 *
 * The hot cache. Every (request, layer) pair the caller numbers rl = 0..n_rl-1 owns
 * `budget` slots of one device pool laid out in FlashMLA's block layout (FORMATS.md
 * section 2) with B_hot entries per block, so the pool can be handed to FlashMLA as
 * an extra KV cache: the step's output index list holds block * B_hot + offset (the
 * global slot) or -1. The host tier is pinned, mapped host memory in 64-entry blocks
 * (block stride 37,440 B), bound per rl as a block table; the gather kernel reads it
 * directly (zero-copy).
 *
 * One decode step, one CSA layer: strata_hotcache_step() takes the batch's selected
 * ids (device int32 [rows][k], straight from the indexer) and, in one launch on the
 * caller's stream, looks every id up, gives each miss a victim slot (CLOCK, never a
 * slot holding an entry selected in this step), copies the misses from the host tier
 * and writes the index list. No host synchronisation, no per-entry copy. The budget is never exceeded: if a step selects more distinct
 * entries for one rl than it has slots, the excess gets -1, the OVERFLOW counter
 * counts it and strata_hotcache_check() reports STRATA_E_BUDGET; size the budget at
 * least rows-per-rl * topk (default 2 * topk per row).
 *
 * Determinism: victims are chosen in a fixed order (list position, then hand order),
 * so the GPU and the CPU backend make identical slot assignments and a run repeats
 * exactly. Which slot holds an entry does not change attention; the bytes do not
 * change either way.
 *
 * Side streams. strata_hotcache_predict() (layer l+1's likely selection, issued while
 * layer l computes) and the write-back of appended entries run on a side stream the
 * caller passes. The hot cache orders them with events: a predict waits for the steps
 * issued before it; a step waits for every predict and write-back issued before it.
 *
 * Usage (the reference engine's HiSparse mode):
 *     strata_hotcache_config c = STRATA_HOTCACHE_CONFIG_INIT;
 *     c.n_rl = n_req * n_csa_layers; c.max_entries = max_tokens / 4; c.topk = 512;
 *     strata_hotcache_create(dev, &c, &hc);
 *     strata_hotcache_bind_host(hc, rl, host_blocks, n_entries, stream);  // per rl
 *     per step and CSA layer l (rows of one rl adjacent; row_rl on the device):
 *         strata_hotcache_step(hc, &(strata_hotcache_batch){rows, k, sel_ids, row_rl,
 *                              out_index}, stream);
 *         strata_hotcache_predict(hc, n_next, next_rl, side);   // layer l+1, optional
 *         attention(pool.base, pool.B, out_index, ...);           // strata_hotcache_pool()
 *     every 4 tokens: strata_hotcache_append(hc, n, rl, ids, entries_f32, stream, side);
 *
 * Misses read in place (the engine's direct_misses): nothing between top-k and
 * attention but an index map. strata_hotcache_host_fence(hc, stream), then
 * strata_k_attn_map() in map mode over strata_hotcache_residency()'s map gives hits
 * their pool slots and misses their host-tier entries (attention's pool2); after the
 * layer's attention, strata_hotcache_step() with out = NULL on the side stream admits
 * the misses for the next step.
 *
 * Thread rules: one hot cache is driven from one thread (its calls enqueue work on
 * streams in order). Counters and errors are read with a synchronising call.
 */
#ifndef STRATA_PREFETCH_H
#define STRATA_PREFETCH_H

#include "kernels/kernels.h"
#include "tiers/tiers.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strata_hotcache strata_hotcache;

typedef struct strata_hotcache_config {
	size_t size;           /* sizeof(strata_hotcache_config) */
	int n_rl;              /* (request, layer) caches */
	int max_entries;       /* C4 entries per rl at most (context / 4) */
	int topk;              /* ids per selection row */
	int budget;            /* slots per rl; 0 = 2 * topk * rows_per_rl */
	int rows_per_rl;       /* query rows of one rl in a step (MTP: 1..4); 0 = 1 */
	int max_rows;          /* rows per step call; 0 = n_rl * rows_per_rl */
	int B_hot;             /* entries per hot-pool block; 0 = 64 */
	int host_B;            /* entries per host-tier block; 0 = 64 */
	int max_append;        /* entries per append call; 0 = n_rl */
	int predict_max;       /* entries one predict may move per rl; 0 = topk / 2 */
	int predict_recent;    /* predict also the newest this many entries; 0 = 16 */
} strata_hotcache_config;
#define STRATA_HOTCACHE_CONFIG_INIT { sizeof(strata_hotcache_config) }

/* Allocate the pool, the residency table (n_rl * max_entries int32) and the slot
 * state on dev. The caller owns *out; destroy it before closing dev. */
int strata_hotcache_create(strata_dev *dev, const strata_hotcache_config *cfg,
			   strata_hotcache **out);
void strata_hotcache_destroy(strata_hotcache *hc); /* NULL is a no-op */

/* The pool for attention: entry index i lives in block i / B at offset i % B. Valid
 * until destroy. */
typedef struct strata_hotcache_pool_info {
	uint8_t *base;         /* device memory */
	int B;
	int n_blocks;
	size_t block_stride;   /* strata_main_block_stride(B) */
	int n_slots;           /* n_rl * budget */
} strata_hotcache_pool_info;
int strata_hotcache_pool(const strata_hotcache *hc, strata_hotcache_pool_info *out);

/* The residency map on the device, for callers that resolve ids themselves (e.g.
 * strata_k_attn_map's map mode: hits from the pool, misses read in place from the host
 * tier): map[rl * max_entries + id] is id's pool index or -1. It changes only inside
 * step, predict and append, in their streams' order. Valid until destroy. */
int strata_hotcache_residency(const strata_hotcache *hc, const int32_t **map, int *max_entries);
/* Orders stream after every write-back to the host tier enqueued so far (appends are
 * written back on the side stream), so that work on stream may read host-tier entries
 * in place: an appended entry that found no hot slot lives only there. No-op when
 * nothing was appended. */
int strata_hotcache_host_fence(strata_hotcache *hc, strata_stream *stream);
/* The caller has waited for the whole device (strata_dev_sync) since the last call on
 * hc: every write-back and prediction enqueued so far is complete, so the next calls
 * skip their waits for them (and host_fence is a no-op until the next append). A
 * wrong claim breaks the ordering; -EINVAL for NULL. */
int strata_hotcache_settled(strata_hotcache *hc);
/* The effective configuration (defaults filled in). */
int strata_hotcache_get_config(const strata_hotcache *hc, strata_hotcache_config *out);

/* Bind rl's host tier: entry id lives in host block id / host_B. bind_host takes one
 * contiguous run of blocks (base + b * stride); bind_host_blocks a table of block
 * pointers (host memory, copied). Blocks must be pinned and mapped on a GPU device
 * (strata_dev_host_alloc / strata_host_pool pages), 16-byte aligned. n_entries: ids
 * below it exist now (append raises it). Ordered on stream; the table may be freed on
 * return. Rebinding replaces the table and keeps resident entries. */
int strata_hotcache_bind_host(strata_hotcache *hc, int rl, uint8_t *base, int n_entries,
			      strata_stream *stream);
int strata_hotcache_bind_host_blocks(strata_hotcache *hc, int rl, uint8_t *const *blocks,
				     int n_blocks, int n_entries, strata_stream *stream);

/* One step of one layer for a batch. ids and row_rl are device memory (host memory on
 * the CPU backend); out receives [rows][k] pool indices (-1 for an id of -1 and for
 * overflow), or is NULL when the caller has already read the entries elsewhere and
 * only wants them admitted (counted as lookups, hits and misses all the same). Rows of
 * one rl must be adjacent (rl repeated only for MTP rows). */
typedef struct strata_hotcache_batch {
	int rows;
	int k;                 /* row stride, <= topk */
	const int32_t *ids;    /* [rows][k], -1 = none */
	const int32_t *row_rl; /* [rows] */
	int32_t *out;          /* [rows][k], or NULL */
} strata_hotcache_batch;
int strata_hotcache_step(strata_hotcache *hc, const strata_hotcache_batch *b,
			 strata_stream *stream);

/* Bring in, on side, what the listed rl (distinct, device int32 [n]) are likely to
 * select next: the neighbours (id +- 1) of each one's last selection and its newest
 * entries, at most predict_max entries per rl, never evicting what its last step
 * selected. Counted as PREFETCHED; hits on them later as PF_USED. */
int strata_hotcache_predict(strata_hotcache *hc, int n, const int32_t *rl,
			    strata_stream *side);

/* New entries: entry ids[i] of rl[i] (device int32 [n], rows of one rl adjacent) with
 * the 512 values src[i] (device float [n][512]). They are encoded (FORMATS.md 2) into
 * the hot cache on stream and written back to the host tier on side (NULL: stream).
 * The host blocks for the ids must be bound. */
int strata_hotcache_append(strata_hotcache *hc, int n, const int32_t *rl, const int32_t *ids,
			   const float *src, strata_stream *stream, strata_stream *side);

/* Forget rl's residency (request paused or closed): its slots become free. */
int strata_hotcache_release(strata_hotcache *hc, int rl, strata_stream *stream);

typedef struct strata_hotcache_stats {
	uint64_t lookups, hits, misses, overflow;     /* entries */
	uint64_t prefetched, prefetch_used, appended, steps;
	uint64_t bytes_moved;      /* on-demand gather bytes (misses * 584) */
	uint64_t bytes_prefetched; /* prefetched * 584 */
	uint64_t bytes_saved;      /* prefetch_used * 584: demand bytes prediction saved */
	uint64_t bytes_written;    /* write-back bytes (appended * 584) */
} strata_hotcache_stats;
/* Counters of one rl, or of all when rl < 0. Synchronises the device. */
int strata_hotcache_stats_get(strata_hotcache *hc, int rl, strata_hotcache_stats *out);
int strata_hotcache_stats_reset(strata_hotcache *hc);
/* Synchronises; returns 0, STRATA_E_BUDGET (a selection overflowed its budget) or
 * -EINVAL (rows of one rl split, or an id/rl out of range) and clears the error. */
int strata_hotcache_check(strata_hotcache *hc);

/* Copy the residency state to host memory (tests: GPU vs CPU). Synchronises. map:
 * [n_rl][max_entries], owner: [n_slots]; either may be NULL. */
int strata_hotcache_dump(strata_hotcache *hc, int32_t *map, int32_t *owner, int32_t *hand);

/* ---- selection generator (tests and benchmarks) ------------------------------------
 * Seeded, identical on every machine. UNIFORM: k distinct ids uniformly from [0, n).
 * STRUCTURED ("drifting topic"): a few topics, each a centre that drifts a little per
 * step; a selection keeps about `keep` of the previous one (default 0.4), takes some
 * neighbours of previous ids and draws the rest around the topic centres, so that
 * successive selections overlap by ~35-50% as measured on real traces. Output ids
 * are distinct and ascending (as the indexer emits them). */
typedef enum { STRATA_SELGEN_UNIFORM = 0, STRATA_SELGEN_STRUCTURED = 1 } strata_selgen_kind;
typedef struct strata_selgen strata_selgen;
int strata_selgen_create(strata_selgen_kind kind, int n, int k, uint64_t seed,
			 strata_selgen **out);
void strata_selgen_destroy(strata_selgen *g);
void strata_selgen_set_keep(strata_selgen *g, double keep); /* STRUCTURED, 0..1 */
/* Grow the id range (new entries appended). */
void strata_selgen_set_n(strata_selgen *g, int n);
/* Next selection: min(k, n) ids into out[0..k), then -1 up to k. Returns the count. */
int strata_selgen_next(strata_selgen *g, int32_t *out);
/* |a & b| / |b| for two ascending id lists (-1 terminated or full): overlap measure. */
double strata_selgen_overlap(const int32_t *prev, const int32_t *cur, int k);

#ifdef __cplusplus
}
#endif
#endif
