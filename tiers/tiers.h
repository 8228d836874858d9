/*
 * tiers: storage for cache pages in three tiers, with one vocabulary for all three.
 *
 *   device arena   strata_arena       fixed-size pages in device memory (strata_dev_alloc;
 *                                     host memory on the CPU backend)
 *   host pool      strata_host_pool   fixed-size pages in pinned, device-mapped host memory
 *                                     (2 MiB hugetlb pages, else THP, else plain pages,
 *                                     registered with the device); the prefetch gather
 *                                     kernel reads entries straight from it by address
 *   NVMe store     strata_nvme_store  variable-size records on a preallocated file or raw
 *                                     block device, io_uring + O_DIRECT, verified reads
 *
 * A page anywhere is named by a strata_page_handle (POD, 32 bytes): tier, location (byte
 * offset in the arena, pool or store), payload length and the XXH3-64 checksum of the
 * payload. Handles are values: copy them, store them in RocksDB records, compare them.
 * Nothing here counts references (cachemgr does); freeing a page that someone still uses
 * is the caller's bug, freeing one twice is caught (-EINVAL).
 *
 * Budgets and counters. Every object has a byte budget (0 at create: its capacity) that
 * may be lowered or raised at run time; an allocation that would take the bytes in use
 * past it fails with STRATA_E_BUDGET and changes nothing. A full object fails with
 * -ENOSPC. Counters (bytes placed, bytes moved in and out, reads, writes, checksum
 * failures, I/O errors) are read with *_stats() into strata_tier_stats. Arena and pool
 * pages are moved by others (kernels, copies), so their owners report movement with
 * *_count_moved().
 *
 * NVMe record format (little-endian, all offsets 4 KiB-aligned):
 *   offset 0      superblock, 4 KiB: magic "STRATASB", version, capacity, checksum
 *   each record   [payload][zero pad][64-byte trailer], a 4 KiB multiple (version 2)
 *                 trailer: magic "STRATAPG", version, key (128 bits), payload length,
 *                 XXH3-64 of the payload, XXH3-64 of the trailer's first 56 bytes.
 * The trailer shares the record's last 4 KiB block with the payload's tail rather than
 * taking a block of its own: a 37,440 B C4 main block takes 40 KiB on disk, not 44 KiB.
 * It sits at the end so that the payload starts block-aligned: with O_DIRECT, a caller
 * buffer aligned to 4 KiB (any buffer when buffered) gets the payload's whole blocks
 * by DMA straight from or to the device (one READV/WRITEV per record), and only the
 * last block or two pass through a staging buffer (registered with io_uring). Other
 * buffers, and verify, move the whole record through staging. Every read checks the
 * trailer (magic, version, trailer checksum, length and checksum against the handle)
 * and hashes the payload; a failure is STRATA_E_CHECKSUM (or STRATA_E_CORRUPT for a
 * damaged trailer) and the caller's buffer is zeroed, never left with the suspect
 * bytes. Version 1 stores (header first) are refused as STRATA_E_FORMAT.
 *
 * Free space is a first-fit extent allocator over 4 KiB blocks (a sorted array of free
 * extents, coalesced on free). Nothing about allocation is persisted: after a crash the
 * caller reopens with STRATA_NVME_REUSE, names the records its own metadata knows with
 * strata_nvme_mark_live() and calls strata_nvme_recover_done(); every other byte of the
 * file is free again. That is how the prefix store reclaims pages written but never
 * named by a committed RocksDB record. The ordering rule that makes this safe:
 * strata_nvme_sync() (fdatasync through io_uring) after the page writes complete and
 * before the metadata naming them commits.
 *
 * Errors: 0, -errno (-EIO, -ENOSPC, -EINVAL ...), STRATA_E_BUDGET, STRATA_E_CHECKSUM,
 * STRATA_E_CORRUPT, STRATA_E_SHORTIO (a transfer moved fewer bytes than asked),
 * STRATA_E_INJECTED is never returned (an injected fault returns the error it was told
 * to). A failed write frees its extent; a failed operation never touches another
 * record, and the store stays usable.
 *
 * Fault injection (tests): strata_nvme_inject() arms one fault at a seam of the io_uring
 * wrapper (the Nth submission, the Nth completion, the Nth extent allocation) that
 * returns the chosen error or a short transfer; strata_arena_inject_alloc() and
 * strata_host_pool_inject_alloc() do the same for page allocation. Counting starts at
 * the arm call: nth = 0 is the very next event. One fault is armed at a time per object.
 *
 * Thread rules: every object is internally locked; any thread may call any function.
 * An NVMe store serialises its calls (one ring); a thread waiting in strata_nvme_reap()
 * or a synchronous read/write holds the store while it waits. Base pointers and
 * page_ptr() results stay valid until destroy.
 */
#ifndef STRATA_TIERS_H
#define STRATA_TIERS_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== the common vocabulary ========================================================== */

typedef enum {
	STRATA_TIER_NONE = 0,
	STRATA_TIER_DEVICE = 1,
	STRATA_TIER_HOST = 2,
	STRATA_TIER_NVME = 3,
} strata_tier;

/* One page in one tier. For the arena and the host pool, location is the byte offset of
 * the page from the base pointer (a multiple of the page stride) and length is the page
 * size; checksum is 0 until someone computes it (strata_page_checksum()). For the NVMe
 * store, location is the byte offset of the record in the file and length the payload
 * length; checksum is always the payload's XXH3-64. */
typedef struct strata_page_handle {
	uint32_t tier;      /* strata_tier */
	uint32_t flags;     /* reserved, 0 */
	uint64_t location;
	uint64_t length;
	uint64_t checksum;
} strata_page_handle;

/* A 128-bit record key (the prefix store's XXH3-128 block hash, or any caller id). */
typedef struct strata_page_key {
	uint64_t lo, hi;
} strata_page_key;

/* XXH3-64 of n bytes: the checksum of every handle. */
uint64_t strata_page_checksum(const void *p, size_t n);
/* "device", "host", "nvme" or "none". */
const char *strata_tier_name(strata_tier t);

/* Counters of one arena, pool or store. Counters only grow; *_bytes now-values don't. */
typedef struct strata_tier_stats {
	size_t size;                 /* sizeof(strata_tier_stats), set by the caller */
	strata_tier tier;
	uint64_t capacity_bytes;     /* bytes the object can hold */
	uint64_t budget_bytes;       /* current budget */
	uint64_t used_bytes;         /* bytes placed now (pages * stride; NVMe: on-disk bytes) */
	uint64_t peak_bytes;         /* most used_bytes ever */
	uint64_t pages;              /* pages or records live now */
	uint64_t allocs, frees;
	uint64_t budget_failures;    /* STRATA_E_BUDGET returned */
	uint64_t full_failures;      /* -ENOSPC returned (no room) */
	uint64_t bytes_in;           /* bytes moved into the tier (NVMe: payload written) */
	uint64_t bytes_out;          /* bytes moved out (NVMe: payload read and verified) */
	uint64_t reads, writes;      /* NVMe: completed record reads / writes (successful) */
	uint64_t checksum_failures;  /* reads refused for a checksum or header mismatch */
	uint64_t io_errors;          /* NVMe: operations that failed with an I/O error */
	uint64_t short_io;           /* NVMe: short transfers */
	uint64_t faults_fired;       /* injected faults that fired */
} strata_tier_stats;
#define STRATA_TIER_STATS_INIT { sizeof(strata_tier_stats) }

/* ==== device arena and host pool: fixed-size pages ======================================= */

typedef struct strata_pool_config {
	size_t size;             /* sizeof(strata_pool_config) */
	size_t page_bytes;       /* bytes of one page, > 0 (e.g. 37,440 for a C4 main block) */
	size_t align;            /* page stride = page_bytes rounded up to align; 0 or 1: no
	                            padding, pages packed back to back (FlashMLA-style pools) */
	uint64_t capacity_pages; /* pages reserved at create, > 0 and < 2^32 */
	uint64_t budget_bytes;   /* 0: the capacity */
	unsigned flags;          /* STRATA_HOST_* for the host pool; 0 for the arena */
} strata_pool_config;
#define STRATA_POOL_CONFIG_INIT { sizeof(strata_pool_config) }

/* Host pool flags. */
enum {
	STRATA_HOST_NO_HUGE = 1u << 0,     /* skip hugetlb and THP: plain pages */
	STRATA_HOST_NO_HUGETLB = 1u << 1,  /* skip hugetlb, still try THP */
	STRATA_HOST_NO_REGISTER = 1u << 2, /* don't register with the device (NVMe staging) */
};

/* How the host pool's memory was obtained. */
typedef enum {
	STRATA_HOST_MEM_PLAIN = 0,   /* 4 KiB pages */
	STRATA_HOST_MEM_THP = 1,     /* madvise(MADV_HUGEPAGE) on a 2 MiB-aligned mapping */
	STRATA_HOST_MEM_HUGETLB = 2, /* mmap(MAP_HUGETLB | MAP_HUGE_2MB) */
} strata_host_mem;
const char *strata_host_mem_name(strata_host_mem m); /* "plain", "thp", "hugetlb" */

typedef struct strata_arena strata_arena;
typedef struct strata_host_pool strata_host_pool;

/* Reserve cfg->capacity_pages pages of device memory on dev (host memory on the CPU
 * backend). dev must outlive the arena. *out is the caller's; free with destroy. */
int strata_arena_create(strata_dev *dev, const strata_pool_config *cfg, strata_arena **out);
void strata_arena_destroy(strata_arena *a); /* NULL is a no-op; frees the memory */

/* Allocate n pages, all or nothing: out[0..n-1] get tier DEVICE handles (checksum 0).
 * STRATA_E_BUDGET past the budget, -ENOSPC past the capacity, -EINVAL for n < 1. */
int strata_arena_alloc(strata_arena *a, int n, strata_page_handle *out);
/* Free n pages. -EINVAL (and nothing freed) when any handle is not a live page of a. */
int strata_arena_free(strata_arena *a, int n, const strata_page_handle *h);
int strata_arena_set_budget(strata_arena *a, uint64_t bytes); /* 0: the capacity */
void *strata_arena_base(const strata_arena *a);   /* device pointer of page offset 0 */
void *strata_arena_ptr(const strata_arena *a, const strata_page_handle *h); /* NULL if bad */
size_t strata_arena_page_stride(const strata_arena *a);
/* Page index of a handle (location / stride): the block number FlashMLA-style tables use. */
int64_t strata_arena_page_index(const strata_arena *a, const strata_page_handle *h);
void strata_arena_count_moved(strata_arena *a, uint64_t bytes_in, uint64_t bytes_out);
int strata_arena_stats(const strata_arena *a, strata_tier_stats *st);
/* Fail the nth page allocation from now (0 = the next) with err (e.g. -ENOMEM). */
int strata_arena_inject_alloc(strata_arena *a, int64_t nth, int err);

/* Map cfg->capacity_pages pages of host memory: hugetlb 2 MiB pages, else THP, else plain
 * (cfg->flags can skip the first two), then register it with dev (pinned and mapped, so
 * the device reads it through the same pointer). dev NULL or STRATA_HOST_NO_REGISTER:
 * not registered. dev must outlive the pool. */
int strata_host_pool_create(strata_dev *dev, const strata_pool_config *cfg,
			    strata_host_pool **out);
void strata_host_pool_destroy(strata_host_pool *p); /* NULL is a no-op */
int strata_host_pool_alloc(strata_host_pool *p, int n, strata_page_handle *out);
int strata_host_pool_free(strata_host_pool *p, int n, const strata_page_handle *h);
int strata_host_pool_set_budget(strata_host_pool *p, uint64_t bytes);
/* Host pointer of page offset 0, also valid on the device (UVA) when registered. */
void *strata_host_pool_base(const strata_host_pool *p);
void *strata_host_pool_ptr(const strata_host_pool *p, const strata_page_handle *h);
size_t strata_host_pool_page_stride(const strata_host_pool *p);
int64_t strata_host_pool_page_index(const strata_host_pool *p, const strata_page_handle *h);
strata_host_mem strata_host_pool_mem(const strata_host_pool *p);
/* True when pinned and mapped for a GPU (false on the CPU backend or unregistered). */
bool strata_host_pool_registered(const strata_host_pool *p);
/* Set h->checksum from the page's current bytes / check it (STRATA_E_CHECKSUM on a
 * mismatch, counted). Host memory only: the arena has no host-side equivalent. */
int strata_host_pool_seal(strata_host_pool *p, strata_page_handle *h);
int strata_host_pool_verify(strata_host_pool *p, const strata_page_handle *h);
void strata_host_pool_count_moved(strata_host_pool *p, uint64_t bytes_in, uint64_t bytes_out);
int strata_host_pool_stats(const strata_host_pool *p, strata_tier_stats *st);
int strata_host_pool_inject_alloc(strata_host_pool *p, int64_t nth, int err);

/* ==== NVMe store ======================================================================= */

#define STRATA_NVME_BLOCK 4096u        /* alignment of every offset and transfer */
#define STRATA_NVME_HEADER_BYTES 64u   /* record trailer (the name predates version 2) */

/* Open flags. */
enum {
	STRATA_NVME_CREATE = 1u << 0,   /* make a new, empty store (truncates a file) */
	STRATA_NVME_REUSE = 1u << 1,    /* open an existing store (valid superblock); with
	                                   CREATE: reuse when valid, else create */
	STRATA_NVME_BUFFERED = 1u << 2, /* no O_DIRECT (tests; tmpfs is detected anyway) */
	STRATA_NVME_NO_REGISTER = 1u << 3, /* no registered buffers or files */
};

typedef struct strata_nvme_config {
	size_t size;               /* sizeof(strata_nvme_config) */
	const char *path;          /* regular file or block device */
	uint64_t capacity_bytes;   /* CREATE: file size (fallocate'd), or for a block device
	                              0 = the whole device; REUSE: 0 = the recorded size */
	unsigned queue_depth;      /* io_uring entries and in-flight operations; 0 = 64 */
	unsigned flags;            /* STRATA_NVME_* */
	uint64_t budget_bytes;     /* 0: the capacity */
	size_t slot_bytes;         /* staging bytes per in-flight op (registered); 0 = 1 MiB
	                              + 4 KiB. Aligned caller buffers stage at most 8 KiB
	                              per record; unaligned ones and verify stage the whole
	                              record, in a temporary buffer when past this. */
} strata_nvme_config;
#define STRATA_NVME_CONFIG_INIT { sizeof(strata_nvme_config) }

typedef struct strata_nvme_store strata_nvme_store;

/* Open or create a store. *out is the caller's; close with destroy. On REUSE the store
 * starts in recovery: every byte is free, writes and frees fail with -EBUSY until
 * strata_nvme_recover_done(). Falls back to buffered I/O (with a warning) where O_DIRECT
 * is refused. */
int strata_nvme_open(const strata_nvme_config *cfg, strata_nvme_store **out);
void strata_nvme_destroy(strata_nvme_store *s); /* waits for in-flight I/O; NULL no-op */

/* Record bytes on disk for a payload of len bytes (payload + trailer, 4 KiB-rounded). */
uint64_t strata_nvme_record_bytes(uint64_t len);

/* Synchronous write: allocate an extent, write [payload][trailer], wait. On success *h is
 * the record's handle; on failure *h is all zero (tier NONE) and nothing stays
 * allocated. len 1 .. 2^40; key NULL means the zero key; buf needs no alignment (4 KiB
 * alignment makes it zero-copy). The record is durable only after a later
 * strata_nvme_sync(). */
int strata_nvme_write(strata_nvme_store *s, const strata_page_key *key, const void *buf,
		      size_t len, strata_page_handle *h);
/* Synchronous verified read of the record h into buf (buf_len >= h->length). Returns 0
 * with h->length bytes in buf, or an error: -EINVAL for a bad handle or a short buffer
 * (buf untouched); otherwise (I/O error, STRATA_E_SHORTIO, STRATA_E_CHECKSUM,
 * STRATA_E_CORRUPT) buf[0 .. h->length) is zeroed. buf needs no alignment (4 KiB
 * alignment makes it zero-copy). */
int strata_nvme_read(strata_nvme_store *s, const strata_page_handle *h, void *buf,
		     size_t buf_len);
/* Read and check a record without handing out its bytes; *key (may be NULL) receives
 * the stored key. */
int strata_nvme_verify(strata_nvme_store *s, const strata_page_handle *h, strata_page_key *key);
/* Give the record's extent back. -EINVAL when h does not name a live extent. */
int strata_nvme_free(strata_nvme_store *s, const strata_page_handle *h);
/* The ordering primitive: every write completed before this call is durable when it
 * returns 0 (fdatasync through io_uring). Call it before committing metadata that names
 * the new records. */
int strata_nvme_sync(strata_nvme_store *s);

/* ---- batched asynchronous I/O ---- */

typedef enum { STRATA_NVME_OP_READ = 0, STRATA_NVME_OP_WRITE = 1 } strata_nvme_op_kind;

/* One operation, owned by the caller and left untouched by it from submit until it comes
 * back from reap. */
typedef struct strata_nvme_op {
	strata_nvme_op_kind kind;
	strata_page_key key;       /* WRITE: the record's key */
	void *buf;                 /* READ: destination (contents unspecified until reaped);
	                              WRITE: source (read until reaped) */
	size_t len;                /* READ: buffer capacity; WRITE: payload bytes */
	strata_page_handle handle; /* READ: the record; WRITE: set on success */
	/* READ: key receives the stored key on success. buf may be NULL (verify only). */
	int result;                /* out: 0 or an error code */
	uint64_t user;             /* the caller's, untouched */
} strata_nvme_op;

/* Submit up to n ops; returns how many were taken (0 .. n; fewer when the queue is full)
 * or a negative error when none was. An op that fails before reaching the device
 * (bad arguments, budget, no space, an injected submit fault) is taken too, and comes
 * back from reap with its result set. Writes get their extent here. */
int strata_nvme_submit(strata_nvme_store *s, strata_nvme_op *const *ops, int n);
/* Wait until at least min ops (0: don't wait) have finished, return up to max of them
 * in done[] (oldest first). Returns the count or a negative error. It may return fewer
 * than have completed (verifying large reads is bounded per call, so the caller can
 * refill the queue sooner); the others come back from the next call. */
int strata_nvme_reap(strata_nvme_store *s, int min, strata_nvme_op **done, int max);
/* Ops submitted and not yet reaped. */
int strata_nvme_inflight(const strata_nvme_store *s);

/* ---- recovery ---- */

/* Reopened store (REUSE) only, before recover_done: take h's extent out of the free space.
 * -EINVAL when it overlaps another live record or lies outside the store; -EBUSY after
 * recover_done. No I/O: pair it with strata_nvme_verify() to check the record. */
int strata_nvme_mark_live(strata_nvme_store *s, const strata_page_handle *h);
int strata_nvme_recover_done(strata_nvme_store *s);

/* Walk the file and call cb for each intact record trailer (magic, version and trailer
 * checksum valid), in record offset order; cb returns nonzero to stop (that value is
 * returned). Freed records whose trailer survived are reported too: the caller's metadata decides
 * what is live, and strata_nvme_verify() checks a payload. */
typedef int (*strata_nvme_scan_cb)(void *arg, const strata_page_key *key,
				   const strata_page_handle *h);
int strata_nvme_scan(strata_nvme_store *s, strata_nvme_scan_cb cb, void *arg);

/* ---- inspection and tests ---- */

typedef struct strata_nvme_info {
	size_t size;              /* sizeof(strata_nvme_info), set by the caller */
	uint64_t capacity_bytes;  /* bytes usable for records (after the superblock) */
	unsigned queue_depth;
	bool direct;              /* O_DIRECT in use */
	bool block_device;
	bool registered_buffers;  /* staging registered with io_uring */
	bool registered_file;
	bool recovering;
	size_t slot_bytes;
	uint64_t free_extents;    /* fragments in the free list */
	uint64_t largest_free;    /* bytes of the largest free extent */
} strata_nvme_info;
#define STRATA_NVME_INFO_INIT { sizeof(strata_nvme_info) }
int strata_nvme_get_info(const strata_nvme_store *s, strata_nvme_info *info);
int strata_nvme_stats(const strata_nvme_store *s, strata_tier_stats *st);
int strata_nvme_set_budget(strata_nvme_store *s, uint64_t bytes);

/* Fault seams of the store. */
typedef enum {
	STRATA_FAULT_SUBMIT = 0,   /* the nth operation handed to the ring (reads, writes,
	                              syncs and scan reads alike) fails before it is queued */
	STRATA_FAULT_COMPLETE = 1, /* the nth completion reports err (or a short transfer) */
	STRATA_FAULT_ALLOC = 2,    /* the nth extent allocation fails with err */
} strata_fault_site;
/* err for a short transfer instead of an error code: the completion reports half the
 * bytes it moved (STRATA_E_SHORTIO; on a sync, which moves none, STRATA_E_SHORTIO too). */
#define STRATA_FAULT_SHORT 1
/* Arm one fault: event number nth (0 = the next) at site returns err (a negative code,
 * or STRATA_FAULT_SHORT at COMPLETE). Replaces any armed fault; nth < 0 disarms. */
int strata_nvme_inject(strata_nvme_store *s, strata_fault_site site, int64_t nth, int err);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_TIERS_H */
