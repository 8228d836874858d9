/* Private to cachemgr/prefix_*.c: the page-store seam, the record format and the
 * in-memory block index. */
#ifndef STRATA_PREFIX_INT_H
#define STRATA_PREFIX_INT_H

#include <rocksdb/c.h>

#include "cachemgr/cachemgr.h"

/* Bumped when the key salt or the record layout changes. */
#define PFX_FORMAT_VERSION 1u
#define PFX_RECORD_VERSION 1u
#define PFX_KEY_BYTES 16
#define PFX_KIND_STATE 3 /* a layer's residual state: ring then compressor rows */

enum { PFX_TIER_MEM = 1, PFX_TIER_NVME = 2 };

/* ---- page store seam ------------------------------------------------------------------
 * Where page bytes live. The durable backend is the tiers NVMe store; the memory
 * backend serves tests of the store logic (and a store without a data directory's
 * file). Both check every byte they hand out against the XXH3-64 in the record. */
typedef struct pfx_io {
	uint8_t key[PFX_KEY_BYTES]; /* write: the record key (block key) */
	const void *src;            /* write: the bytes */
	void *dst;                  /* read: destination (host memory) */
	uint32_t len;
	uint64_t addr, csum;        /* write: out; read: in */
	int result;                 /* out: 0 or an error */
	/* Asynchronous reads (submit/reap): the caller's tag, and the NVMe backend's op
	 * (owned by the backend from submit until reap). */
	uint64_t tag;
	strata_nvme_op op;
} pfx_io;

typedef struct pfx_pages pfx_pages;
typedef struct pfx_pages_ops {
	/* Write n pages, each at a new location (ios[i].addr, .csum, .result). Returns 0
	 * or the first error; pages whose result is 0 are allocated even then. The bytes
	 * are durable only after sync. */
	int (*write)(pfx_pages *ps, pfx_io *ios, int n);
	int (*sync)(pfx_pages *ps);
	/* Read and verify n pages; a bad page gets STRATA_E_CHECKSUM/STRATA_E_CORRUPT in its
	 * result and a zeroed buffer. Returns 0 or the first error. */
	int (*read)(pfx_pages *ps, pfx_io *ios, int n);
	/* Asynchronous verified reads, for restores that keep the queue full: submit takes
	 * up to n reads and returns how many it took (0 when the queue is full), or a
	 * negative error when it took none and none is in flight; reap waits for at least
	 * min of them and returns up to max in done[] with their result set (a bad page as
	 * in read). Every io stays the caller's memory, untouched by it, until reaped. */
	int (*submit)(pfx_pages *ps, pfx_io *const *ios, int n);
	int (*reap)(pfx_pages *ps, int min, pfx_io **done, int max);
	int (*inflight)(pfx_pages *ps);
	void (*release)(pfx_pages *ps, uint64_t addr, uint32_t len, uint64_t csum);
	/* Reopen: mark a named page live; finish frees everything left unmarked. */
	int (*mark)(pfx_pages *ps, uint64_t addr, uint32_t len, uint64_t csum);
	int (*finish)(pfx_pages *ps);
	/* Bytes held by the store, and the bytes a page of len payload bytes holds. */
	uint64_t (*allocated)(pfx_pages *ps);
	uint64_t (*footprint)(uint32_t len);
	void (*destroy)(pfx_pages *ps);
} pfx_pages_ops;
struct pfx_pages {
	const pfx_pages_ops *ops;
	int tier;
	void *nvme; /* the strata_nvme_store of the NVMe backend, for the benchmark */
};

int pfx_pages_mem_create(pfx_pages **out);
/* The tiers NVMe store in file path (created, or reopened for recovery). */
int pfx_pages_nvme_create(const char *path, uint64_t capacity, strata_dev *dev, pfx_pages **out);

/* ---- records ----------------------------------------------------------------------------
 * RocksDB key: 'B' + h_i. Value (little-endian):
 *   u8 version, u8 flags (bit 0: checkpoint), u16 writer_dcp, u32 block index,
 *   u64 model fingerprint, 16 B parent key (zeros for block 0), u16 n_layers,
 *   u16 n_locs, then n_locs x { u64 addr, u64 csum, u32 len, u8 tier, u8 kind,
 *   u16 layer } in order: per layer its families, then (checkpoint) per layer state. */
#define PFX_REC_HEADER 36
#define PFX_LOC_BYTES 24
#define PFX_MAX_LOCS (STRATA_MAX_LAYERS * 4)

typedef struct pfx_loc {
	uint64_t addr, csum;
	uint32_t len;
	uint8_t tier, kind;
	uint16_t layer;
} pfx_loc;

typedef struct pfx_record {
	uint8_t flags;
	uint16_t writer_dcp;
	uint32_t block;
	uint64_t fingerprint;
	uint8_t parent[PFX_KEY_BYTES];
	uint16_t n_layers, n_locs;
	pfx_loc loc[PFX_MAX_LOCS];
} pfx_record;

size_t pfx_record_encode(const pfx_record *r, uint8_t *buf, size_t cap);
/* STRATA_E_CORRUPT on a short or inconsistent value, STRATA_E_FORMAT on a version this
 * build does not know. */
int pfx_record_decode(const uint8_t *buf, size_t len, pfx_record *r);
/* STRATA_E_FORMAT unless r's fingerprint, layers and page lengths fit model m. */
int pfx_record_check(const pfx_record *r, const strata_model *m, uint64_t fp);

/* ---- keys -------------------------------------------------------------------------------- */
void pfx_salt(const strata_model *m, uint8_t salt[16]);
void pfx_key_next(const uint8_t prev[16], const uint8_t salt[16], const uint32_t *tokens,
		  uint8_t out[16]);

/* ---- block index --------------------------------------------------------------------------
 * One node per stored block, rebuilt from RocksDB at open. Owned by the handle's
 * thread. Open addressing on the first 8 key bytes (the keys are hashes). */
typedef struct pfx_node {
	uint8_t key[PFX_KEY_BYTES];
	int32_t parent;     /* node index, -1 for block 0 */
	uint32_t block;
	uint32_t children;  /* stored blocks extending this one */
	uint32_t pins;      /* restored sequences using it */
	uint32_t gen;       /* bumped when the slot is reused */
	uint8_t ckpt, used;
	uint64_t lru;       /* tick of last store/restore */
	uint64_t bytes;     /* payload bytes its record names */
	uint64_t footprint; /* bytes those pages hold in the page store */
	/* Host copies: its pages in a host run (slot hslot of hrun), its residual state
	 * (checkpoint blocks) on its own; host_bytes counts both. */
	struct pfx_hrun *hrun;
	uint32_t hslot;
	uint8_t *hstate;
	uint64_t host_bytes;
} pfx_node;

/* A host run: the host copies of the pages of the n new blocks of one store, laid out
 * slot-major so that consecutive blocks are adjacent per (layer, family): page q of
 * slot s sits at base + lay[q].off * n + s * lay[q].len. A restore of a chain stored in
 * one go then copies each (layer, family) in one piece, and, with destinations carved
 * in the same order, the whole run in one copy. Freed when its last block lets go. */
typedef struct pfx_hrun {
	uint8_t *base;
	uint32_t n, refs;
} pfx_hrun;

typedef struct pfx_index {
	pfx_node *nodes;
	uint32_t n_nodes, cap_nodes;
	uint32_t *free_list, n_free;
	int32_t *slots;     /* -1 empty, -2 tombstone, else node index */
	uint32_t n_slots, n_used, n_tomb;
} pfx_index;

int pfx_index_init(pfx_index *ix);
void pfx_index_free(pfx_index *ix);
int32_t pfx_index_find(const pfx_index *ix, const uint8_t key[16]);
int pfx_index_add(pfx_index *ix, const uint8_t key[16], int32_t *out);
void pfx_index_remove(pfx_index *ix, int32_t n);

/* ---- the handle ------------------------------------------------------------------------ */
struct strata_prefix {
	strata_model model;
	uint64_t fp;
	uint8_t salt[16];
	int K;
	unsigned flags;
	uint64_t budget_host, budget_nvme;
	strata_dev *dev;
	int own_dev;
	rocksdb_t *db;
	rocksdb_options_t *opt;
	rocksdb_writeoptions_t *wsync;
	rocksdb_readoptions_t *ro;
	pfx_pages *ps;
	pfx_index ix;
	uint64_t tick;
	uint64_t named_bytes, named_footprint, host_bytes;
	/* Canonical page order of a block's record: blk_locs family pages, then (at a
	 * checkpoint) n_layers state pages; lay[] gives kind, layer, length and the offset
	 * in a packed host copy. */
	uint32_t blk_locs, ckpt_locs;
	uint64_t blk_bytes, ckpt_bytes;
	struct { uint8_t kind; uint16_t layer; uint32_t len; uint64_t off; } lay[PFX_MAX_LOCS];
	strata_prefix_stats st;
	int live_restores;
	strata_stream *stream;  /* restore's copies (NULL: the default stream) */
	uint8_t *stage;         /* pinned staging of store reads bound for the device, kept */
	size_t stage_bytes;
};

/* prefix_store.c, shared with prefix_restore.c. */
int pfx_rocks_err(char *err, const char *what);
void pfx_db_key(const uint8_t key[16], uint8_t out[17]);
int pfx_get_record(strata_prefix *pfx, const uint8_t key[16], pfx_record *r);
/* Drop node n and every stored block that extends it (a damaged page). */
void pfx_drop_subtree(strata_prefix *pfx, int32_t n, int why);
void pfx_host_copy_free(strata_prefix *pfx, pfx_node *nd);
/* Host copy of page q (of blk_locs) of node nd; nd must have a host run. */
static inline const uint8_t *pfx_host_page(const strata_prefix *pfx, const pfx_node *nd,
					   uint32_t q)
{
	return nd->hrun->base + pfx->lay[q].off * nd->hrun->n + (uint64_t)nd->hslot * pfx->lay[q].len;
}

static inline uint64_t pfx_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

#endif
