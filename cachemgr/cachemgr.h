/*
 * cachemgr: the core of strata above the tiers: sequences, placement and budgets,
 * and (built so far) the durable prefix store.
 *
 * Prefix store. Coding agents resend long shared prefixes; strata keeps the attention
 * cache of a prefix so that a later request restores it instead of recomputing it.
 *
 * - Keys. A prompt is cut into 256-token blocks (one logical page per cache family).
 *   Block i's key is h_i = XXH3_128(h_(i-1) || salt || tokens of block i), h_(-1) = 0,
 *   salt = the model fingerprint (strata_model_fingerprint) and strata's prefix
 *   format version. Equal keys mean equal prefixes under the same byte formats.
 * - Entries. An entry is the chain of blocks 0..n-1 of a stored sequence. Each block
 *   has one durable RocksDB record naming its pages: per layer the C4 main, C4 index
 *   and C128 main page (those the layer's ratio has), each with its tier, location,
 *   length and XXH3-64 checksum. Blocks that end a checkpoint (every K blocks, and
 *   the end of each stored sequence) also name the residual state: per layer the
 *   window ring and the compressor rows (FORMATS.md section 5), stored as pages too
 *   (they are tens of KiB to MiB, too big to sit inline in a record). Blocks shared
 *   by two stored sequences are stored once.
 * - Hits. A hit is usable only where a checkpoint ends, since the engine needs the
 *   residual state to continue; lookup returns the deepest such block.
 * - DCP. Pages are stored once, in global logical order. Ownership is a rule: under
 *   decode context parallelism with P ranks, page p belongs to rank p mod P. An entry
 *   written by any P restores onto any P'; each rank gets exactly its pages, and the
 *   residual state (replicated in DCP) goes to every rank.
 * - Durability. Page bytes go to the tiers NVMe store and are synced before the
 *   RocksDB batch that names them commits (a synced write). On open every record is
 *   read, its pages marked live and all other pages of the store reclaimed, so a
 *   crash leaves neither a half-visible entry nor a leaked page. A page whose checksum
 *   fails is never handed out: the block and every block stored after it on that
 *   chain are dropped, and the call returns STRATA_E_CHECKSUM.
 * - Host copies. With a host budget, a store keeps the pages of its new blocks in one
 *   host run (pinned, device-mapped on the GPU), laid out per (layer, family) so that
 *   a restore moves them in a few large copies; a run's memory goes back when its last
 *   block's copy is evicted.
 * - Budgets. Each tier has a byte budget. Eviction removes least recently used leaf
 *   blocks (a block no other stored block extends), never a block pinned by a live
 *   restored sequence, so a stored chain never has a hole.
 *
 * Thread rules: a strata_prefix handle is used by one thread at a time (the caller
 * serialises: the daemon's cache thread). Snapshot and restore structures are plain
 * data owned by the caller.
 */
#ifndef STRATA_CACHEMGR_H
#define STRATA_CACHEMGR_H

#include "prefetch/prefetch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== prefix store ==================================================================== */

/* Cache families with pages per 256-token block (FORMATS.md sections 2, 3). */
typedef enum {
	STRATA_PFX_C4_MAIN = 0,   /* ratio-4 layers: 64 main entries, 37,440 B */
	STRATA_PFX_C4_INDEX = 1,  /* ratio-4 layers: 64 index keys, 4,352 B (MXFP4) */
	STRATA_PFX_C128_MAIN = 2, /* ratio-128 layers: 2 main entries, 1,728 B */
	STRATA_PFX_FAMILIES = 3,
} strata_prefix_family;

/* Where restore puts a family's pages. */
typedef enum {
	STRATA_PFX_TO_HOST = 0,   /* host memory (pinned, device-mapped on the GPU) */
	STRATA_PFX_TO_DEVICE = 1, /* device memory of the manager's strata_dev */
} strata_prefix_dest;

/* DCP ownership: page p belongs to rank p mod P. Usable from C and CUDA. */
static inline int strata_prefix_owner(uint64_t page, int P)
{
	return (int)(page % (uint64_t)P);
}
/* Global id of rank r's j-th local page under P ranks. */
static inline uint64_t strata_prefix_global_page(uint64_t j, int r, int P)
{
	return j * (uint64_t)P + (uint64_t)r;
}

typedef struct strata_prefix strata_prefix;

typedef struct strata_prefix_config {
	size_t size;                /* sizeof(strata_prefix_config) */
	const char *dir;            /* data directory (created with its parents): RocksDB and
	                               the page store */
	const strata_model *model;  /* copied at open */
	strata_dev *dev;            /* for restore's device and pinned buffers; NULL: CPU */
	int checkpoint_blocks;      /* K: residual state every K blocks (and at the end) */
	uint64_t budget_host;       /* bytes of host copies of pages; 0: none are kept */
	uint64_t budget_nvme;       /* bytes in the NVMe store; 0: unlimited */
	uint64_t store_bytes;       /* NVMe store file capacity to create (0: 4 GiB) */
	unsigned flags;             /* STRATA_PREFIX_* */
} strata_prefix_config;
#define STRATA_PREFIX_CONFIG_INIT { sizeof(strata_prefix_config), NULL, NULL, NULL, 16, 0, 0, 0, 0 }

enum {
	/* Page bytes in process memory instead of the NVMe store (tests, and hosts without
	 * a store): records still go to RocksDB, and are dropped at the next open. */
	STRATA_PREFIX_MEMORY = 1u << 0,
};

/* Residual state at a checkpoint: per layer the window ring (strata_prefix_ring_bytes:
 * `window` main entries in the block format of FORMATS.md section 2, ring slot =
 * position mod window) and the compressor rows (strata_prefix_comp_bytes: fp32 rows
 * [kv | score], NULL for a window-only layer). */
typedef struct strata_prefix_state {
	uint32_t pages;                            /* state after this many pages (blocks) */
	const void *ring[STRATA_MAX_LAYERS];
	const void *comp[STRATA_MAX_LAYERS];
} strata_prefix_state;

/* A sequence to store, described in host memory. pages[l][f][p] is logical page p
 * (global order) of family f of layer l; pages[l][f] is NULL where the layer's ratio
 * has no such family. Under DCP with P ranks the caller lists rank r's local page j at
 * p = strata_prefix_global_page(j, r, P). Checkpoints other than every K-th page and
 * the last are ignored; the one at n_pages is required. Nothing here is retained. */
typedef struct strata_prefix_snapshot {
	size_t size;                               /* sizeof(strata_prefix_snapshot) */
	uint32_t n_pages;
	int writer_dcp;                            /* the writer's DCP size P (>= 1) */
	const void *const *pages[STRATA_MAX_LAYERS][STRATA_PFX_FAMILIES];
	int n_ckpt;
	const strata_prefix_state *ckpt;           /* n_ckpt states, any order */
} strata_prefix_snapshot;
#define STRATA_PREFIX_SNAPSHOT_INIT { sizeof(strata_prefix_snapshot), 0, 1 }

/* A lookup result: the deepest stored checkpoint on the prompt's chain. */
typedef struct strata_prefix_hit {
	uint64_t tokens;    /* usable length (a multiple of 256); 0: no hit */
	uint32_t pages;     /* tokens / 256 */
	uint8_t key[16];    /* key of the hit's last block (canonical XXH128 bytes) */
} strata_prefix_hit;

/* What one rank receives. Filled by strata_prefix_restore, freed (and the entry's
 * pin dropped) by strata_prefix_restored_release. Page j of this rank is global page
 * page_ids[j]; pages[l][f] points at n_pages * page_bytes[f] contiguous bytes (page j
 * at j * page_bytes[f]) in dest[f] memory, NULL where the layer lacks the family. The
 * residual state is host memory, given to every rank.
 *
 * Destination memory. By default restore allocates it (and release frees it). A caller
 * that restores often passes its own, so that no allocation (page faults, cudaMalloc,
 * cudaHostAlloc) sits in the restore: into[l][f], when set, is where pages[l][f] goes
 * (strata_prefix_rank_pages() * page_bytes bytes of dest[f] memory: device memory of
 * the manager's strata_dev, or any host memory for STRATA_PFX_TO_HOST; a tiers arena
 * or host pool page run works), and into_state, when set, holds the residual state
 * (strata_prefix_state_bytes() bytes of host memory; ring[l] and comp[l] are carved
 * from it). Families or state left NULL are allocated. Caller memory stays the
 * caller's: release does not free it, and the input fields survive release, so one
 * strata_prefix_restored can be restored into again and again. Host destinations
 * aligned to 4 KiB let the NVMe store read page 0 of each array without a bounce. */
typedef struct strata_prefix_restored {
	size_t size;                               /* sizeof(strata_prefix_restored) */
	strata_prefix_dest dest[STRATA_PFX_FAMILIES]; /* in: where each family goes */
	void *into[STRATA_MAX_LAYERS][STRATA_PFX_FAMILIES]; /* in, optional: see above */
	void *into_state;                          /* in, optional: see above */
	/* out: */
	uint64_t tokens;
	uint32_t total_pages;                      /* pages of the whole entry */
	int P, rank, writer_dcp;
	uint32_t n_pages;                          /* pages this rank owns */
	uint32_t *page_ids;
	size_t page_bytes[STRATA_PFX_FAMILIES];
	void *pages[STRATA_MAX_LAYERS][STRATA_PFX_FAMILIES];
	void *ring[STRATA_MAX_LAYERS];
	void *comp[STRATA_MAX_LAYERS];
	uint64_t bytes_from_host;                  /* page bytes served by host copies */
	uint64_t bytes_from_nvme;                  /* page bytes read from the NVMe store */
	uint64_t host_copies;                      /* copies that moved bytes_from_host; one
						    * never spans two into[] arrays */
	void *priv_;                               /* strata's, do not touch */
} strata_prefix_restored;
/* Default: index pages to the device, main pages to the host (the HiSparse placement). */
#define STRATA_PREFIX_RESTORED_INIT                                                  \
	{ sizeof(strata_prefix_restored),                                           \
	  { STRATA_PFX_TO_HOST, STRATA_PFX_TO_DEVICE, STRATA_PFX_TO_HOST } }

/* Counters (bytes and block counts are current values, the rest cumulative). */
typedef struct strata_prefix_stats {
	uint64_t blocks, checkpoints;
	uint64_t named_bytes;          /* payload bytes the records name (pages + states) */
	uint64_t named_footprint;      /* what those take in the page store (headers, pad) */
	uint64_t store_allocated;      /* what the page store holds: = named_footprint */
	uint64_t host_bytes;           /* host copies */
	uint64_t pinned_blocks;
	uint64_t stores, lookups, hits, restores;
	uint64_t evicted_blocks, dropped_blocks, checksum_failures;
} strata_prefix_stats;

/* Sizes of one page of family f, one window ring, and layer l's compressor rows. */
size_t strata_prefix_page_bytes(const strata_model *m, strata_prefix_family f);
size_t strata_prefix_ring_bytes(const strata_model *m);
size_t strata_prefix_comp_bytes(const strata_model *m, int layer);
/* Does layer l have family f (C4 families for ratio 4, C128 for ratio 128)? */
bool strata_prefix_has(const strata_model *m, int layer, strata_prefix_family f);

/* The key chain of n_blocks full blocks of tokens (n_blocks * 256 tokens) for model m:
 * keys[i] = h_i as 16 canonical bytes. Pure function; no manager needed. */
void strata_prefix_keys(const strata_model *m, const uint32_t *tokens, uint32_t n_blocks,
			uint8_t (*keys)[16]);

/* Open (creating) the store in cfg->dir. Reclaims pages no record names and drops
 * records whose pages are missing. The caller owns *out; close with
 * strata_prefix_close. -EINVAL for a bad config, STRATA_E_ROCKSDB, -errno. */
int strata_prefix_open(const strata_prefix_config *cfg, strata_prefix **out);
/* Close; every restored sequence must have been released. NULL is a no-op. */
void strata_prefix_close(strata_prefix *pfx);

/* Store a sequence of n_tokens tokens (a multiple of 256, = snap->n_pages * 256).
 * Blocks already stored are kept (and gain a checkpoint if the snapshot adds one).
 * Returns once the entry is durable. -EINVAL for bad input, STRATA_E_FORMAT when the
 * snapshot's shape does not match the model, STRATA_E_BUDGET when the NVMe budget
 * cannot be met without evicting pinned blocks. On failure nothing becomes visible. */
int strata_prefix_store(strata_prefix *pfx, const uint32_t *tokens, uint64_t n_tokens,
			const strata_prefix_snapshot *snap);

/* The deepest usable hit for a prompt of n_tokens tokens (any count; only full blocks
 * count). Touches no page data. hit->tokens = 0 when nothing is stored. */
int strata_prefix_lookup(strata_prefix *pfx, const uint32_t *tokens, uint64_t n_tokens,
			 strata_prefix_hit *hit);

/* Pages rank `rank` of P receives from hit (the length of its into[] arrays in pages);
 * 0 for a bad P or rank. */
uint32_t strata_prefix_rank_pages(const strata_prefix_hit *hit, int P, int rank);
/* Bytes of one checkpoint's residual state: every layer's ring and compressor rows
 * (the size of into_state). */
size_t strata_prefix_state_bytes(const strata_model *m);

/* Restore hit onto rank `rank` of P ranks into *out (its dest[] chosen by the caller,
 * see STRATA_PREFIX_RESTORED_INIT). The entry stays pinned until
 * strata_prefix_restored_release(pfx, out). Pages held as host copies are copied in as
 * few pieces as their layout allows (one per (layer, family) for a chain stored in one
 * go, under P = 1); the rest are read from the NVMe store with its queue kept full.
 * Returns when every byte is in place. -EINVAL for P < 1 or a bad rank,
 * STRATA_E_NOTFOUND when the hit has been evicted, STRATA_E_CHECKSUM when a page is
 * damaged (the damaged blocks are dropped; nothing is handed out). */
int strata_prefix_restore(strata_prefix *pfx, const strata_prefix_hit *hit, int P, int rank,
			  strata_prefix_restored *out);
/* Free the buffers restore allocated and unpin the entry; keeps dest, into and
 * into_state. Safe on a zeroed or failed *out. */
void strata_prefix_restored_release(strata_prefix *pfx, strata_prefix_restored *out);

/* Evict least recently used, unpinned leaf blocks until host copies fit in host_bytes
 * and the NVMe store in nvme_bytes (UINT64_MAX: leave that tier alone). Returns 0, or
 * STRATA_E_BUDGET when pinned blocks keep a tier above its target. */
int strata_prefix_evict(strata_prefix *pfx, uint64_t host_bytes, uint64_t nvme_bytes);

void strata_prefix_stats_get(const strata_prefix *pfx, strata_prefix_stats *st);

#ifdef __cplusplus
}
#endif
#endif
