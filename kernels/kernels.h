/*
 * kernels: the device runtime strata uses (GPU or CPU backend), and every compute
 * kernel with its CPU reference twin.
 *
 * Backends. strata_dev_open() picks the GPU when one is usable (or when asked for
 * one) and the CPU otherwise. On the CPU backend "device" memory is ordinary host
 * memory, streams and events are no-ops that keep their timing semantics on the host,
 * and every kernel runs its CPU reference. Every kernel has the shape
 *     int strata_k_<name>(strata_dev *, const strata_<name>_params *, strata_stream *);
 *     int strata_k_<name>_cpu(const strata_<name>_params *);
 * The first dispatches on the backend; the second is the reference, with the same
 * parameters, callable on host memory by tests and benchmarks. GPU results are
 * tested against it. Parameter structs are plain C (POD) and hold device pointers
 * for the GPU backend and host pointers for the CPU one; nothing here is owned by
 * the kernel, and no kernel synchronises with the host.
 *
 * No CUDA type appears in this header: a stream is an opaque strata_stream * (the
 * cudaStream_t underneath on the GPU; NULL is the default stream).
 *
 * Thread rules: a strata_dev may be used from several threads; streams are not
 * thread-safe objects (one owner at a time), as in CUDA.
 */
#ifndef STRATA_KERNELS_H
#define STRATA_KERNELS_H

#include "base/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== device runtime ================================================================ */

typedef struct strata_dev strata_dev;
typedef struct strata_stream strata_stream; /* cudaStream_t on the GPU; NULL = the device's
						  main stream (strata_dev_config
						  .priority_main) */
typedef struct strata_event strata_event;

typedef enum {
	STRATA_BACKEND_AUTO = 0, /* GPU when one is usable, else CPU */
	STRATA_BACKEND_CPU = 1,
	STRATA_BACKEND_GPU = 2,  /* STRATA_E_NOGPU when there is none */
} strata_backend;

typedef struct strata_dev_config {
	size_t size;             /* sizeof(strata_dev_config) */
	strata_backend backend;
	int device;              /* CUDA device ordinal */
	/* GPU: what a NULL strata_stream means. 0: CUDA's legacy default stream. 1: a
	 * non-blocking stream the device owns, at the GPU's highest priority, so that the
	 * work of strata_stream_create() streams (lowest priority: side work, write-backs)
	 * yields to it when the block scheduler chooses. Only ordering through events
	 * (or strata_dev_sync) joins it with other streams either way. */
	int priority_main;
} strata_dev_config;
#define STRATA_DEV_CONFIG_INIT { sizeof(strata_dev_config), STRATA_BACKEND_AUTO, 0, 0 }

/* Number of usable GPUs (0 without CUDA, a driver or a device). Never fails. */
int strata_gpu_count(void);

/* Open a device context. The environment variable STRATA_BACKEND=cpu|gpu overrides
 * an AUTO config. The caller owns *out and frees it with strata_dev_close(). */
int strata_dev_open(const strata_dev_config *cfg, strata_dev **out);
void strata_dev_close(strata_dev *dev); /* NULL is a no-op */
bool strata_dev_is_gpu(const strata_dev *dev);
/* "cpu" or the GPU's name; valid until strata_dev_close(). */
const char *strata_dev_name(const strata_dev *dev);

/* Device memory (host memory on the CPU backend), 256-byte aligned. */
int strata_dev_alloc(strata_dev *dev, size_t bytes, void **out);
void strata_dev_free(strata_dev *dev, void *p);
/* Pinned, device-mapped host memory (plain aligned host memory on the CPU backend).
 * The device can read it directly (zero-copy) through the same pointer (UVA). */
int strata_dev_host_alloc(strata_dev *dev, size_t bytes, void **out);
void strata_dev_host_free(strata_dev *dev, void *p);
/* Pin and map existing host memory (mmap'd huge pages, say); no-op on the CPU. */
int strata_dev_host_register(strata_dev *dev, void *p, size_t bytes);
int strata_dev_host_unregister(strata_dev *dev, void *p);

/* Copy n bytes between any two pointers this runtime knows (UVA: direction inferred),
 * ordered on stream. On the CPU backend it is a memcpy done before returning. */
int strata_dev_copy(strata_dev *dev, void *dst, const void *src, size_t n,
		    strata_stream *stream);
/* Fill device memory (GPU backend: memory from strata_dev_alloc; host memory on the
 * CPU backend). */
int strata_dev_memset(strata_dev *dev, void *dst, int byte, size_t n, strata_stream *stream);

int strata_stream_create(strata_dev *dev, strata_stream **out);
void strata_stream_destroy(strata_dev *dev, strata_stream *s);
int strata_stream_sync(strata_dev *dev, strata_stream *s);
int strata_dev_sync(strata_dev *dev); /* whole device */
/* Opens (on != 0) or closes a profiler capture range (cudaProfilerStart/Stop; a no-op
 * on the CPU backend), for `ncu --profile-from-start off` around chosen work. */
int strata_dev_profile(strata_dev *dev, int on);

/* Events: record on a stream, make another stream wait, time between two. */
int strata_event_create(strata_dev *dev, strata_event **out);
void strata_event_destroy(strata_dev *dev, strata_event *e);
int strata_event_record(strata_dev *dev, strata_event *e, strata_stream *s);
int strata_stream_wait_event(strata_dev *dev, strata_stream *s, strata_event *e);
int strata_event_sync(strata_dev *dev, strata_event *e);
/* Milliseconds from a to b; both must have completed. */
int strata_event_elapsed_ms(strata_dev *dev, strata_event *a, strata_event *b, float *ms);

/* CUDA graphs: everything issued on stream s between begin and end (kernels, copies,
 * event records and waits that stay within the capture; no host synchronisation) is
 * recorded instead of run, then replayed as one launch. strata's launch paths keep
 * fixed shapes for fixed inputs, so they capture. The CPU backend has no graphs:
 * -ENOTSUP from begin. On an error inside the capture, end still closes it. */
typedef struct strata_graph strata_graph;
int strata_graph_begin(strata_dev *dev, strata_stream *s);
int strata_graph_end(strata_dev *dev, strata_stream *s, strata_graph **out);
int strata_graph_launch(strata_dev *dev, strata_graph *g, strata_stream *s);
void strata_graph_destroy(strata_dev *dev, strata_graph *g);

/* The last GPU error on this thread translated to strata's codes (0 when none);
 * kernels call it after each launch. */
int strata_dev_check(strata_dev *dev, const char *what);

/* ==== V4 formats (FORMATS.md sections 2 and 3) ========================================= */

/* Main KV entries: 512 dims in, 584 bytes out, in FlashMLA's block layout of B
 * entries (data region B*576, scale region B*8, stride strata_main_block_stride(B)).
 * Entry number `slot` lives in block slot / B at offset slot % B. A negative slot
 * (FlashMLA's -1) is skipped by encode (nothing written) and decodes to zeros; block
 * padding is never written. NaN encodes as e4m3 0x7f; NaN and +-inf do not enter a
 * tile's amax (inf saturates to +-448 * s). Both backends: fp32 arrays 8-byte aligned
 * (16 for the index kernels), byte pools 4-byte aligned, else -EINVAL (the CPU path
 * refuses what the GPU would, so CPU tests catch a misaligned caller). */
typedef struct strata_main_encode_params {
	const float *src;      /* [n][512]: dims 0..447 NoPE, 448..511 RoPE */
	const int64_t *slots;  /* [n] destination slots; NULL means 0..n-1 */
	int n;
	int B;                 /* entries per block (64 for C4, 2 for C128) */
	uint8_t *pool;         /* blocks of strata_main_block_stride(B) bytes each */
} strata_main_encode_params;

typedef struct strata_main_decode_params {
	const uint8_t *pool;
	const int64_t *slots;  /* [n] source slots; NULL means 0..n-1 */
	int n;
	int B;
	float *dst;            /* [n][512] dequantised */
} strata_main_decode_params;

int strata_k_main_encode(strata_dev *dev, const strata_main_encode_params *p, strata_stream *s);
int strata_k_main_encode_cpu(const strata_main_encode_params *p);
int strata_k_main_decode(strata_dev *dev, const strata_main_decode_params *p, strata_stream *s);
int strata_k_main_decode_cpu(const strata_main_decode_params *p);

/* Index keys: 128 dims in, MXFP4 (68 B) or FP8 (132 B) out, page layout
 * [B*payload][B*4 scale bytes]: MXFP4 payload 64 B, FP8 payload 128 B. Page bytes
 * B * strata_index_entry_bytes(fmt). Entry `slot` lives in page slot / B. */
typedef struct strata_index_encode_params {
	strata_index_fmt fmt;
	const float *src;      /* [n][128] */
	const int64_t *slots;  /* NULL means 0..n-1 */
	int n;
	int B;
	uint8_t *pages;
} strata_index_encode_params;

typedef struct strata_index_decode_params {
	strata_index_fmt fmt;
	const uint8_t *pages;
	const int64_t *slots;
	int n;
	int B;
	float *dst;            /* [n][128] */
} strata_index_decode_params;

int strata_k_index_encode(strata_dev *dev, const strata_index_encode_params *p, strata_stream *s);
int strata_k_index_encode_cpu(const strata_index_encode_params *p);
int strata_k_index_decode(strata_dev *dev, const strata_index_decode_params *p, strata_stream *s);
int strata_k_index_decode_cpu(const strata_index_decode_params *p);

/* Scalar codecs, exposed for tests and tools (bit-exact with the kernels). */
uint8_t strata_e4m3_encode(float x);   /* RNE, saturating at +-448, NaN -> 0x7f */
float strata_e4m3_decode(uint8_t b);
uint8_t strata_e2m1_encode(float x);   /* RNE, saturating at +-6; 4-bit code */
float strata_e2m1_decode(uint8_t code);
uint16_t strata_bf16_encode(float x);  /* RNE */
float strata_bf16_decode(uint16_t b);

/* ==== indexer: scan + top-k (FORMATS.md section 4) ===================================== */

/* One launch scores and selects for a whole batch. Request i owns query rows
 * req_rows[i] .. req_rows[i+1]-1 (1 to max_rows of them: MTP rows share the key reads)
 * and its keys through page_table[i][*]: logical entry j lives in page
 * page_table[i][j / B] at offset j % B, page p at pages + p * B * entry_bytes(fmt).
 * Row r sees the candidates j < row_limit[r] (= (t+1) div 4) and scores them as
 *   score(r, j) = s_j * sum_h w[r][h] * ReLU(q[r][h] . k_j)
 * with q in bf16 (or FP8: q8 below) and k_j dequantised exactly (MXFP4: e2m1 x group scale folded into
 * the value; FP8: e4m3 values, s_j the key's fp32 scale; s_j = 1 for MXFP4). Products
 * are exact in fp32, so backends differ only by summation order (last bits).
 * Selection: the k = min(topk, limit) entries with the highest scores, ties broken
 * towards the lower entry id (scores compare as floats with -0 == +0).
 * Output per row: the selected ids in ASCENDING id order, then -1 up to topk.
 * out_scores (optional) holds the score of each id, 0 for -1 padding. Rows with
 * limit <= topk select 0..limit-1 without scoring (their out_scores are 0).
 * GPU limits: heads <= STRATA_INDEXER_MAX_HEADS, topk <= STRATA_INDEXER_MAX_TOPK,
 * B % 4 == 0 and pages 16-byte aligned. Device arrays are not validated on the GPU
 * (limits are clamped to max_limit and max_pages*B; extra rows of a request beyond
 * max_rows are left unscored); the CPU twin returns -EINVAL for them. Launch shapes
 * depend only on the host fields (n_req, n_rows, max_rows, max_limit, topk, heads,
 * fmt), so the call can be captured in a CUDA graph; it never synchronises. */
#define STRATA_INDEXER_MAX_ROWS 4     /* query rows per request (1 + 3 MTP drafts) */
#define STRATA_INDEXER_MAX_HEADS 128
#define STRATA_INDEXER_MAX_TOPK 2048

typedef struct strata_indexer_params {
	strata_index_fmt fmt;
	int heads;                  /* index heads (64); dims are STRATA_INDEX_DIM */
	int topk;                   /* 512 or 1024 */
	int n_req;
	int n_rows;                 /* == req_rows[n_req] */
	int max_rows;               /* >= rows of any request, 1..STRATA_INDEXER_MAX_ROWS */
	int max_limit;              /* >= every row_limit; fixes launch shapes / scratch */
	const uint16_t *q;          /* [n_rows][heads][128] bf16 */
	/* Or NULL: FP8 queries, [n_rows][heads][128] e4m3 bytes, used instead of q (q
	 * is then not read), as V4's indexer quantises them; the caller folds their
	 * scale into w (FORMATS.md section 4: ReLU(c z) = c ReLU(z) for c > 0).
	 * Both backends widen them to bf16 (exact), so every result is bit-identical
	 * to the call with q holding the same values. (Hopper has no FP8 mma.sync:
	 * the m16n8k32 e4m3 form is emulated through fp16 and measured slower than
	 * this; FP8 tensor cores need wgmma.) 8-byte alignment is faster; any works. */
	const uint8_t *q8;
	/* 1: score on Hopper's FP8 tensor cores (wgmma, an sm_90a kernel) where the call
	 * allows it: FP8 or MXFP4 keys, q8 16-byte aligned, 64 heads, B = 64, max_rows 1 - 4
	 * (a request's rows scored together on each key tile it reads), a compute
	 * capability 9.0 GPU (strata_k_indexer_wgmma says whether it does); the
	 * default scan elsewhere and on the CPU. MXFP4 keys are rewritten as e4m3 times a
	 * per-key power of two, exactly while a key's group scales span <= 14 octaves
	 * (groups further below its largest read as zero; indexer_int.h). These tensor
	 * cores add with about 13 mantissa bits, so scores differ from the CPU twin's by
	 * up to about 1e-3 of sum_h |w_h| sum_d |q_hd k_jd| (the same on every call, equal
	 * for equal keys), and a selected set only where entries sit that close to the
	 * k-th. */
	int scan_wgmma;
	const float *w;             /* [n_rows][heads] */
	const int32_t *req_rows;    /* [n_req + 1] row offsets, req_rows[0] == 0 */
	const int32_t *row_limit;   /* [n_rows] */
	const uint8_t *pages;
	const int32_t *page_table;  /* [n_req][max_pages] */
	int max_pages;
	int B;                      /* entries per page (64) */
	int32_t *out_ids;           /* [n_rows][topk] */
	float *out_scores;          /* [n_rows][topk], or NULL */
	void *scratch;              /* strata_k_indexer_scratch() bytes, caller-owned;
				     * GPU: zeroed once after allocation (see below) */
	size_t scratch_bytes;
	strata_event *after_scan;   /* or NULL: recorded on the stream as soon as every
				     * score of the call is written, before top-k, so that
				     * another stream can read the scores
				     * (strata_k_indexer_scores) while top-k runs. The CPU
				     * twin records it at the end of the call. */
	unsigned long long *cut_out; /* or NULL: [n_rows] each row's cut, published as
				     * soon as it is known (GPU: the filter's first step
				     * or the fused scan's barrier,
				     * long before top-k ends; CPU: at the row's end) as
				     * cut_epoch << 12 | b, b the strata_k_indexer_bucket of
				     * the row's topk-th highest score (every selected entry
				     * has a bucket >= b), or 0xfff for a row with
				     * limit <= topk (every entry below it is selected). A
				     * volatile store: another stream may poll for it. */
	uint64_t cut_epoch;          /* 1 .. 2^40 - 1, new for each call that shares
				      * cut_out */
	/* Or NULL: early staging inside the call. The call also does what
	 * strata_k_attn_prestage(stage) would with this call's rows, limits, scores and
	 * cuts (its n_rows, topk, max_limit, row_limit, scores, score_stride, cut,
	 * cut_epoch and wait_us are ignored): each row's misses among the entries that can
	 * still make the top-k are copied into the row's stage slots and published in
	 * stage_map before the call ends; the call's scratch must then be its own
	 * (strata_k_indexer_scratch bytes). GPU: by extra CTAs of the filter launch
	 * (stage->max_ctas per row; 0: as many as fit one wave beside the filter's, at
	 * most one per filter CTA, at least one), which find the cut
	 * from the scan's histogram themselves, so the copies run beside the filter and
	 * the selection, with no event or second stream. Every other rule of
	 * strata_attn_prestage_params holds (alignment, limits), but for the scratch: the
	 * GPU keeps each row's slot counter in the scratch word of the epoch's parity
	 * (words 2 and 3 of the row's 4) and zeroes the other one for the next call, so
	 * nothing has to run after the last copy. Calls with stage on one scratch must
	 * therefore alternate the parity of stage->epoch (one more each call, as the
	 * engine does), starting from a zeroed scratch; words 0 and 1 stay zero, so
	 * strata_k_attn_prestage may share it. The CPU twin leaves the scratch zero.
	 * Zero the scratch again after a call that failed or was cut short, and before a
	 * call with more rows than the one before (as for the indexer's own scratch). A
	 * stale counter (parity not alternated, a row not zeroed) never stages a wrong
	 * entry: at worst that call stages fewer or none, and the index map copies the
	 * rest.
	 * Unlike strata_k_attn_prestage, a word is only known to follow its bytes once
	 * the call has ended: read stage_map after the call (later on its stream, or
	 * after an event recorded behind it), not while it runs. */
	const struct strata_attn_prestage_params *stage;
	/* CPU twin: the threads it scores a request's keys with; 0 the default
	 * (STRATA_CPU_THREADS, else the online CPUs; at most 16, one per 8,192 keys). A
	 * caller that runs calls side by side on its own threads sets 1. GPU: ignored. */
	int cpu_threads;
} strata_indexer_params;

/* The indexer's score buckets (2048): the top 11 bits of the score's fp16 (round to
 * nearest even; -0 counted as +0) in an order-preserving encoding; monotone
 * non-decreasing in the score, equal scores in one bucket. */
uint32_t strata_k_indexer_bucket(float score);
#define STRATA_INDEXER_CUT_ALL 0xfffu

/* Scratch bytes dev's backend needs for p's host fields (NULL dev: the CPU twin's).
 * GPU: about 4 B per (row, max_limit) for scores plus up to ~300 KiB per row. The GPU
 * scratch must be 16-byte aligned (strata_dev_alloc's are; -EINVAL otherwise) and all
 * zero before its first use (strata_dev_memset once after allocating it): the indexer
 * keeps counters at its start that it leaves zero again at the end of every call, so
 * calls need no memset. Zero it again after a call that failed or was cut short, and
 * before a call with more rows (n_rows) than the call before it on this scratch (the
 * counters' span grows with n_rows, and other fields do not move it). Calls sharing one
 * scratch must not overlap. */
size_t strata_k_indexer_scratch(const strata_dev *dev, const strata_indexer_params *p);
/* On the GPU: the scan, then the filter with the row's select fused into its last CTA,
 * launched as the scan's programmatic dependent (its launch overlaps the scan's tail).
 * Without p->stage, where a row's filter CTAs fit one thread-block cluster (8; a CTA
 * walking at most two rounds of score chunks) and every row's cluster fits the GPU at
 * once, they are one cluster and meet in its first CTA's shared memory, which selects
 * (STRATA_IDX_FCL=n: clusters of at most n, 0 never, up to 16; STRATA_IDX_FCL_ROUNDS=r;
 * STRATA_IDX_FCL_ALL=1 on every shape, for tests; STRATA_IDX_FCL_LOC=n the first CTA's
 * room for the threshold bucket's keys, for tests).
 * With scan_wgmma and no p->stage, where each scan CTA holds at most 512 scores (one
 * request of up to ~1M tokens on an H200), the scan does the filter's work itself in
 * a cooperative launch (every CTA waits for its row's histogram, takes b* from the
 * last one to arrive and files its own scores), and a select kernel follows as its
 * programmatic dependent: no filter launch; if the GPU cannot hold the whole grid at
 * once, the filter runs as above. Where the rows may be 32,768 entries long or longer
 * (and no p->cut_out is asked for, whose early cut needs the barrier), that tail takes
 * no barrier: each scan CTA adds 4 scores of its first tile to a sample histogram, one
 * more CTA a row turns the sample into a bound T (about 3 k of the row's scores or more
 * lie above it), each CTA files its scores >= T into a list, and the select takes the top
 * k of the list; exact, since k scores >= T put the k-th there too, and where the list
 * holds fewer than k or overflows the select takes the top k of the whole row instead
 * (exact; ~115 us at 262,144 entries, against ~20 on the list). STRATA_IDX_SAMP=0 (for tests and A/Bs) keeps the barrier;
 * STRATA_IDX_SAMP_MIN=n moves the 32,768; STRATA_IDX_SAMP_X=x sets the list's expected
 * size, x k (default 3; 0: the bound of the sample's largest bucket, for tests, which
 * mostly leaves the list short of k and drives the whole-row path);
 * STRATA_IDX_SAMP_SLEEP=ns the sampling CTA's poll interval (default 100);
 * that scan runs at most 2 CTAs an SM, more where a row's scores need them (4 at
 * 262,144 entries; fewer CTAs, more tiles each: faster); STRATA_IDX_SAMP_PER_SM=n (for
 * A/Bs) sets that cap, 0 as many as fit.
 * STRATA_IDX_TRACE=1 (a diagnostic) prints each call's timeline outside graph capture
 * to stderr, in us from the scan's first CTA, as the earliest / latest CTA's time at
 * each point: filter start, scan end, filter end, second-level cut, classification,
 * sort start and end, end, and inside the select its start and list reads, inside the
 * sort its counting, scan and scatter, when the scan's histogram flush was performed
 * (fenced in traced calls only), and inside the filter (or the fused scan's tail) its
 * cut found, its scores filed and its bins flushed, and in a sampled tail the sampling
 * CTA's start, its sample complete and its bound out ("agg0" - "agg2"), the sampled keys'
 * adds ("sampw") and the list's length ("#list"); then ("idx-cta" lines) when the
 * scan CTAs' tile loops ended: percentiles, each SM's last end and the spread between
 * its first and last CTA, the ends by a CTA's tile count and by an SM's tile total, the
 * correlation of the CTAs' starts and ends, the SMs of the first 24 CTAs recorded, and
 * the CTAs of the latest and earliest SMs in start order.
 * Such calls synchronise. STRATA_IDX_WAVE_TILES=n (for tests) lowers the tiles a CTA
 * of one wave must hold before the wgmma MXFP4 batch scans (one or two rows a CTA)
 * launch more waves of CTAs (default 56; at most three waves). STRATA_IDX_RANGES=0, 1
 * or 2 (for tests) sets how the unfused wgmma batch scans (one or two rows a CTA; FP8
 * four too) split a request's tiles over its CTAs: strided, contiguous ranges,
 * contiguous ranges with the requests interleaved over the launch (default: 2 for two
 * and four FP8 rows a CTA, else 0). STRATA_IDX_SS_TMA=0 or 1 (for tests and A/Bs) makes
 * the wgmma FP8 scan copy its key tiles by per-thread cp.async, or by TMA (one tensor
 * copy a tile; a tensor map over the page pool, made on the host), at every shape
 * (default: TMA for two and four rows a CTA, cp.async for one). */
int strata_k_indexer(strata_dev *dev, const strata_indexer_params *p, strata_stream *s);
/* The CPU twin. Uses p->scratch when it is at least strata_k_indexer_scratch(NULL, p)
 * bytes of host memory, else allocates its own. A request's keys are scored by up to 16
 * threads (p->cpu_threads), each a contiguous range of keys; the results are the same
 * for any count. */
int strata_k_indexer_cpu(const strata_indexer_params *p);
/* The staging CTAs per row that a strata_k_indexer call with p's shapes (n_rows,
 * n_req, topk, max_limit; p->stage set, its max_ctas honoured, its pointers not
 * read) gets on dev, and in *filter (may be NULL) the filter CTAs per row beside
 * them; 0 and 0 on the CPU backend, which has no CTAs. When the staging CTAs are fewer than the
 * filter's, each walks several score chunks and their copies can outlast top-k
 * (bench/results/2026-11-30-h200-s6): for callers choosing whether to stage early. A
 * negative error code when the device cannot be queried. */
int strata_k_indexer_stage_ctas(strata_dev *dev, const strata_indexer_params *p, int *filter);
/* 1 when a strata_k_indexer call with p on dev scores with the FP8 tensor-core scan
 * (p->scan_wgmma and its conditions), else 0. */
int strata_k_indexer_wgmma(const strata_dev *dev, const strata_indexer_params *p);
/* Where a strata_k_indexer call with p's shapes leaves its scores in p->scratch (both
 * backends): the score of entry j < limit of row r (a row with limit > topk) is
 * (*scores)[r * *stride + j]. They stay there until the next call on that scratch;
 * rows with limit <= topk are not scored. -EINVAL when p's scratch is missing or too
 * small to hold them. */
int strata_k_indexer_scores(const strata_dev *dev, const strata_indexer_params *p,
			    const float **scores, size_t *stride);
/* Benchmark aid (GPU only, STRATA_E_UNSUPPORTED on the CPU backend): runs the same
 * work as strata_k_indexer with events between its launches, synchronises s and
 * returns the milliseconds of each phase: ms[0] the former scratch memset (none runs
 * now: two back-to-back events), ms[1] scan, ms[2] filter, ms[3] select. The phases
 * run as separate launches here even where strata_k_indexer fuses them, so their sum
 * can exceed a strata_k_indexer call. Same scratch rules as strata_k_indexer. */
int strata_k_indexer_phases(strata_dev *dev, const strata_indexer_params *p, strata_stream *s,
			    float ms[4]);

/* -- benchmark baselines (GPU only; STRATA_E_UNSUPPORTED on the CPU backend) -----------
 * What `strata bench indexer` measures the indexer against, in kernels/ because bench/
 * is C: a streaming read of the same key bytes, a cuBLAS GEMM of the same shape, and a
 * naive indexer (CUDA-core score kernel + full segmented radix sort of every row). */
typedef struct strata_idxbase strata_idxbase;
int strata_idxbase_create(strata_dev *dev, strata_idxbase **out);
void strata_idxbase_destroy(strata_idxbase *b); /* NULL is a no-op */
/* Reads bytes at p (16-byte aligned) once, in full, at streaming rate. */
int strata_idxbase_stream_read(strata_idxbase *b, const void *p, size_t bytes, strata_stream *s);
/* Strided-batched C[i] = A[i] * B[i]^T: A [m][k] bf16, B [n][k] bf16 (row-major), C [m][n]
 * fp32 (row-major), batch i at offsets i*stride_{a,b,c} elements. */
int strata_idxbase_gemm(strata_idxbase *b, int batch, int m, int n, int k,
			const uint16_t *a, long long stride_a, const uint16_t *bm, long long stride_b,
			float *c, long long stride_c, strata_stream *s);
/* Naive indexer on p's inputs (p's scratch and outputs are not touched): sizes its
 * buffers for p on first use or growth (call once before timing), then one score
 * kernel and one segmented radix sort of all max_limit scores of every row. */
int strata_idxbase_naive(strata_idxbase *b, const strata_indexer_params *p, strata_stream *s);
/* After strata_idxbase_naive: row r's first n sorted ids, best first, and (scores not
 * NULL) their scores, from device memory to host out[n] / scores[n] (n <= max_limit);
 * synchronises the device. For checking the baseline (bench indexer --check). */
int strata_idxbase_naive_ids(strata_idxbase *b, int row, int32_t *out, float *scores, int n);

/* ==== hot-cache lookup and selected-entry gather (prefetch/ drives these) ============= */

/* Where main entries live, for the gather: blocks of B entries in the block layout of
 * FORMATS.md section 2 (data B*576, scales B*8, stride strata_main_block_stride(B)).
 * Either one flat run of blocks (blocks == NULL: block b at base + b * stride), or per
 * table t a row of block pointers blocks[t * max_blocks + b] (a device array of
 * pointers; each block 16-byte aligned). Host-tier blocks are pinned, mapped host
 * memory: the device reads them through their UVA pointers (zero-copy). */
typedef struct strata_entry_space {
	uint8_t *base;
	uint8_t *const *blocks;
	int max_blocks;
	int B;
	/* 0: the block layout above. Otherwise entries are packed: entry i of a block at
	 * i * packed (576 data bytes, then its 8 scale bytes), block stride B * packed;
	 * packed >= 584 and a multiple of 16. (Measured by bench fetch as a host-tier
	 * layout: one contiguous read per entry instead of two.) */
	int packed;
} strata_entry_space;

/* Copy n main entries (576 data + 8 scale bytes each), item i from entry src_ids[i] of
 * table src_tab[i] in src to entry dst_ids[i] of table dst_tab[i] in dst. A NULL id
 * array means i; a NULL table array means table 0; an item with a negative id on
 * either side is skipped. When n_dev is set, *n_dev (device memory, read by the
 * kernel: no host synchronisation) is the item count, capped at n. per_warp: entries
 * one warp moves per round (1, 2, 4 or 8; 0 = chosen from n; 16 = Hopper bulk copies
 * through shared memory, falling back to 4 before sm_90). l2_prefetch: 0 (default) or
 * 64, 128, 256: the plain kernel's source loads ask L2 to fetch that many bytes around
 * each miss (PTX .L2::64B/128B/256B; for pinned host memory, larger PCIe reads), a
 * tuning knob that bench fetch measures; it does not change what is copied. Items must
 * not overlap. */
typedef struct strata_gather_params {
	int n;
	const int32_t *n_dev;
	const int32_t *src_ids, *src_tab;
	strata_entry_space src;
	const int32_t *dst_ids, *dst_tab;
	strata_entry_space dst;
	int per_warp;
	int l2_prefetch;
} strata_gather_params;

int strata_k_gather(strata_dev *dev, const strata_gather_params *p, strata_stream *s);
int strata_k_gather_cpu(const strata_gather_params *p);

/* Benchmark baselines only (what the gather kernel is measured against): the same
 * copies as strata_k_gather, issued as one cudaMemcpyAsync per data part and per scale
 * part (EACH) or as one cudaMemcpyBatchAsync of all of them (BATCH). Here the id and
 * table arrays of p must be HOST memory (the copies are issued by the host), both
 * spaces flat, n_dev NULL. On the CPU backend both run strata_k_gather_cpu(). */
typedef enum { STRATA_GATHER_BASELINE_EACH = 0, STRATA_GATHER_BASELINE_BATCH = 1 } strata_gather_baseline;
int strata_bench_gather_baseline(strata_dev *dev, const strata_gather_params *p,
				 strata_gather_baseline how, strata_stream *s);

/* Hot-cache residency and fetch: one launch per call for the whole batch (prefetch/hotcache.c
 * owns the state and documents the policy). Each (request, layer) "rl" owns `budget`
 * consecutive slots of the hot pool, global slot g = rl * budget + local, which is
 * also FlashMLA's index block * B_hot + offset. Replacement is CLOCK (second chance)
 * with a per-rl hand, evaluated in a fixed order so that the GPU kernel and the CPU
 * twin make the same slot assignments. Rows of one rl must be adjacent in a batch. */
typedef enum {
	STRATA_HC_STEP = 0,     /* look up selections, bring misses in, write out[] */
	STRATA_HC_PREFETCH = 1, /* bring in neighbours of rl's last selection + recent ids */
	STRATA_HC_APPEND = 2,   /* give new entries slots (data written by the caller) */
} strata_hc_mode;

enum { /* per-rl counters (uint64), in entries */
	STRATA_HC_C_LOOKUPS = 0,  /* valid selected ids looked up */
	STRATA_HC_C_HITS,         /* of which resident (or a duplicate within the row) */
	STRATA_HC_C_MISSES,       /* gathered on demand */
	STRATA_HC_C_OVERFLOW,     /* selected but no slot left (output -1): budget too small */
	STRATA_HC_C_PREFETCHED,   /* gathered by PREFETCH */
	STRATA_HC_C_PF_USED,      /* hits on prefetched entries (bytes prediction saved) */
	STRATA_HC_C_APPENDED,     /* new entries given a slot or rewritten */
	STRATA_HC_C_STEPS,        /* STEP calls that included this rl */
	STRATA_HC_NCOUNTERS = 8
};

enum { /* error bits OR-ed into *err */
	STRATA_HC_ERR_OVERFLOW = 1,  /* a selection did not fit the budget */
	STRATA_HC_ERR_SPLIT = 2,     /* rows of one rl were not adjacent */
	STRATA_HC_ERR_RANGE = 4,     /* an id >= max_entries or an rl out of range */
};

typedef struct strata_hotcache_params {
	int mode;                   /* strata_hc_mode */
	uint32_t op;                /* this call's number: >= 1, increasing, never reused */
	int n_rows, k;              /* rows of k ids (row stride k) */
	const int32_t *ids;         /* [n_rows][k] (STEP, APPEND); -1 = none */
	const int32_t *row_rl;      /* [n_rows] which (request, layer) each row belongs to */
	int32_t *out;               /* [n_rows][k] global slot or -1 (STEP, APPEND) */
	int n_rl, max_entries, budget;
	int32_t *map;               /* [n_rl][max_entries] global slot or -1 */
	int32_t *owner;             /* [n_rl * budget] entry id or -1 */
	uint32_t *slot_op;          /* last call that claimed the slot (protection) */
	uint32_t *slot_sel;         /* last STEP that selected it; 0 = none */
	uint32_t *slot_ref;         /* CLOCK reference bit */
	uint32_t *slot_pf;          /* 1 = prefetched and not used yet */
	int32_t *hand;              /* [n_rl] CLOCK hand (local slot) */
	uint32_t *last_step;        /* [n_rl] op of rl's last STEP; UINT32_MAX = none */
	uint32_t *claim;            /* [n_rl] last op that processed rl */
	int32_t *last_sel;          /* [n_rl][sel_cap] ids of rl's last STEP (all its rows) */
	int32_t *last_n;            /* [n_rl] */
	int sel_cap;
	int32_t *limit;             /* [n_rl] ids below it exist (APPEND raises it) */
	int predict_max;            /* PREFETCH: at most this many entries per rl per call */
	int predict_recent;         /* PREFETCH: also the newest this many ids */
	uint64_t *counters;         /* [n_rl][STRATA_HC_NCOUNTERS] */
	int32_t *scratch;           /* [n_rows][list_cap]: miss lists */
	int list_cap;               /* >= k and >= 2 * sel_cap + predict_recent */
	/* STEP, PREFETCH: the call itself copies every entry it brings in, entry id of
	 * table rl in src (the host tier, read zero-copy) to entry g (the global slot) of
	 * dst (the hot pool), before it returns: one launch, no work list, no second
	 * kernel. Unused by APPEND (the caller writes new entries). */
	strata_entry_space src, dst;
	int32_t *err;               /* STRATA_HC_ERR_* bits */
} strata_hotcache_params;

int strata_k_hotcache(strata_dev *dev, const strata_hotcache_params *p, strata_stream *s);
int strata_k_hotcache_cpu(const strata_hotcache_params *p);

/* ==== attention: reference sparse attention with sink, LSE combine ==================== */

/* Sparse MQA attention of a batch of query rows over main entries in the 584-byte
 * format (FORMATS.md section 2), as FlashMLA's sparse decode consumes them: each row
 * names its entries by index lists of `block*B + offset` into a pool (-1 = none,
 * skipped). Two lists per row, visited in this order: `idx` into `pool` (the selected
 * C4 entries of a CSA layer, or all C128 entries of an HCA layer) and `win_idx` into
 * `win_pool` (the window ring). One shared K = V head of 512 dims (448 e4m3 NoPE x
 * UE8M0 tile scale, 64 bf16 RoPE), dequantised exactly to fp32.
 *   s_j = scale * q . k_j,  lse = log(sum_j exp(s_j)),  out = sum_j softmax_j * v_j
 * With sink != NULL the output is scaled by exp(lse) / (exp(lse) + exp(sink[h]));
 * lse is always reported without the sink, so that partial outputs (DCP) can be
 * combined first and the sink applied once (strata_k_attn_combine).
 * A row with no valid entry gives out = 0 and lse = -inf.
 *
 * Summation order (the CPU twin defines it): per row and head, scores in list order
 * (idx then win_idx), max m, l = sum exp(s_j - m) in list order, out = sum
 * (exp(s_j - m) / l) v_j in list order. The GPU kernel uses an online softmax over
 * tiles and agrees within STRATA_ATTN_GPU_RTOL (relative to max |out| of the row and
 * head) and STRATA_ATTN_GPU_ATOL on lse. Both backends are deterministic: the same
 * entries in the same order with the same bytes give bit-identical outputs.
 *
 * GPU blocks cover a row's heads in groups of 64, 32 or 16 (the widest that keeps the
 * GPU busy; a head's arithmetic does not depend on the width), so each entry is read
 * and dequantised once per row, head group and chunk. pool and win_pool must be
 * 4-byte aligned on the GPU (-EINVAL otherwise; device allocations are 256-byte
 * aligned and take the faster 16-byte copy path).
 *
 * Split over entries (GPU): when rows x head groups would leave most SMs idle
 * (small batch), the list (idx then win_idx, same global order) is cut into S chunks,
 * each block computes its chunk's max, sum and unnormalised output into p->scratch,
 * and a second kernel merges the chunks exactly (m = max m_c, Z = sum e^(m_c - m) l_c,
 * out = sum e^(m_c - m) u_c / Z, lse = m + log Z) before applying the sink. S is a
 * function of the device's SM count, n_rows, heads and n_idx + n_win only, and the
 * merge runs over chunks in order, so the determinism above holds for a fixed scratch
 * size. Without scratch (NULL or smaller than strata_k_attn_scratch()) the kernel
 * runs unsplit, within the same tolerance of the CPU twin.
 *
 * Tensor cores (opt-in, tensor_cores = 1, GPUs of sm_80 and later; ignored elsewhere
 * and by the CPU twin): the products run as bf16 mma with fp32 accumulation. Entries
 * dequantise exactly to bf16, and the fp32 query and the unnormalised probabilities
 * are each split into three bf16 terms whose sum is the fp32 value exactly, so every
 * product is exact; the accumulation is not IEEE fp32, though: the tensor cores add
 * the aligned products of an mma with truncation, so the error grows with the list
 * (1.2e-5 of max |out| seen on the H200 at 8192 entries, 1e-5 exceeded there) and the
 * tolerance is STRATA_ATTN_GPU_TC_RTOL. The same determinism, split scratch and
 * merge. Heads go in groups of 32 or 16 there. 0 (the default) keeps the fp32 kernel:
 * on the H200 the tensor-core one was only 8-18% faster (bench attn, 2026-11-30). */
#define STRATA_ATTN_GPU_RTOL 1e-5f
#define STRATA_ATTN_GPU_ATOL 1e-5f
#define STRATA_ATTN_GPU_TC_RTOL 5e-5f

typedef struct strata_attn_params {
	int n_rows;
	int heads;
	float scale;              /* softmax scale: 512^-0.5 for V4 */
	const float *q;           /* [n_rows][heads][512] */
	const float *sink;        /* [heads] fp32 sink logits, or NULL: no sink */
	const uint8_t *pool;      /* main-entry blocks of strata_main_block_stride(B) */
	int B;
	const int32_t *idx;       /* [n_rows][n_idx], block*B + offset or -1; with pool2,
				     v <= -2 names entry -2 - v of pool2 */
	int n_idx;                /* may be 0 (idx, pool unused) */
	/* Optional second pool for idx (NULL: every negative idx is a hole): entries a
	 * hot cache does not hold, read in place from the pinned host tier (zero-copy)
	 * instead of being copied in first. Flat blocks of B2 entries, UVA on a GPU. */
	const uint8_t *pool2;
	int B2;
	const uint8_t *win_pool;  /* window ring blocks, stride strata_main_block_stride(win_B) */
	int win_B;
	const int32_t *win_idx;   /* [n_rows][n_win] */
	int n_win;                /* may be 0 */
	float *out;               /* [n_rows][heads][512] */
	float *lse;               /* [n_rows][heads], natural log, without sink; or NULL */
	void *scratch;            /* device, strata_k_attn_scratch() bytes, or NULL: unsplit */
	size_t scratch_bytes;
	int tensor_cores;         /* GPU: 0 = fp32 kernel (default), 1 = bf16 mma (sm_80+) */
	int spare_sms;            /* GPU: SMs the plan leaves free (>= 0): it picks head
				   groups and chunks for the SM count less these, so that
				   work another stream keeps resident there (a CTA that
				   cannot share an SM with an attention block) holds no
				   block back. Part of the plan, so of the arithmetic:
				   calls that must agree bit for bit use one value. */
} strata_attn_params;

/* Device scratch bytes the split path needs for p's shapes (n_rows, heads, n_idx,
 * n_win; pointers not read) on dev; 0 where it never splits (CPU backend, large
 * batches, short lists). Never decreases as n_idx + n_win grow, so a buffer sized for
 * the longest lists serves every shorter call with the same n_rows and heads. */
size_t strata_k_attn_scratch(const strata_dev *dev, const strata_attn_params *p);
int strata_k_attn(strata_dev *dev, const strata_attn_params *p, strata_stream *s);
int strata_k_attn_cpu(const strata_attn_params *p);

/* Exact combine of P partial attentions of the same rows (DCP: each rank attends to
 * the entries it owns), FORMATS.md / DESIGN.md section 7: with lse_p the partials'
 * log-sum-exp and M = max_p lse_p,
 *   w_p = exp(lse_p - M),  out = sum_p w_p out_p / sum_p w_p,  lse = M + log sum_p w_p
 * (out_p normalised; equivalent to m = max m_p, Z = sum e^(m_p - m) l_p,
 * o = sum e^(m_p - m) u_p / Z). Partials with lse = -inf contribute nothing; the
 * sink (if any) is applied to the combined result. Sums run over p in order. */
typedef struct strata_attn_combine_params {
	int n_parts;
	int n_rows;
	int heads;
	int dim;                  /* 512 */
	const float *part_out;    /* [n_parts][n_rows][heads][dim], without sink */
	const float *part_lse;    /* [n_parts][n_rows][heads] */
	const float *sink;        /* [heads] or NULL */
	float *out;               /* [n_rows][heads][dim] */
	float *lse;               /* [n_rows][heads] or NULL */
} strata_attn_combine_params;

int strata_k_attn_combine(strata_dev *dev, const strata_attn_combine_params *p,
			  strata_stream *s);
int strata_k_attn_combine_cpu(const strata_attn_combine_params *p);

/* An index list from selected ids, on the device (no host round trip):
 *   out[r][k] = ids[r][k] < 0 ? -1 : row_base[r] + (positional ? k : ids[r][k]).
 * With row_base = the request's first slot this turns the indexer's output into
 * FlashMLA's list for a resident pool; positional lists address a staging pool that
 * holds selection k of row r at row_base[r] + k. */
typedef struct strata_attn_map_params {
	int n_rows;
	int width;
	int positional;
	const int32_t *ids;       /* [n_rows][width] */
	const int32_t *row_base;  /* [n_rows]; with map: the row's first host-tier entry */
	int32_t *out;             /* [n_rows][width] (may alias ids) */
	/* Through a hot cache's residency map instead (positional unused):
	 *   v = map[row_map[r] * map_stride + id],
	 *   out = v >= 0 ? v (the hot slot) : -2 - (row_base[r] + id) (pool2's entry: the
	 *   host tier), so attention reads hits from the hot pool and misses in place. */
	const int32_t *map;
	const int32_t *row_map;   /* [n_rows] the row's map row (the hot cache's rl) */
	int map_stride;           /* ids per map row */
	/* Staged misses (map mode only): with stage set, a miss at list position i
	 * (= r * width + k) is copied from entry row_base[r] + id of host (flat, blocks of
	 * host_B) into entry i of stage (flat, blocks of stage_B: n_rows * width entries)
	 * in the same launch, and out = -2 - i, so attention with pool2 = stage reads
	 * device memory only and each miss crosses the bus once. */
	const uint8_t *host;
	int host_B;
	uint8_t *stage;
	int stage_B;
	/* Early-staged misses (with stage; from strata_k_attn_prestage, which may still
	 * be running): a miss whose stage_map[r * map_stride + id] is published with this
	 * epoch (value >> 24 == epoch) is already in stage entry (value & 0xffffff):
	 * out = -2 - that entry, no copy. */
	const uint64_t *stage_map;
	uint64_t epoch;
	/* Or NULL: [0] += misses taken from early staging, [1] += misses this call
	 * copied itself (staged mode) or left in place. */
	unsigned long long *miss_counts;
} strata_attn_map_params;

int strata_k_attn_map(strata_dev *dev, const strata_attn_map_params *p, strata_stream *s);
int strata_k_attn_map_cpu(const strata_attn_map_params *p);

/* Early staging of a layer's misses while its top-k runs (the index map's copies,
 * moved off the critical path). Start it on another stream after the indexer's
 * after_scan event, with the scores the call leaves in its scratch
 * (strata_k_indexer_scores) and the cuts it publishes (cut_out). Per row:
 *   - the entries that can still make the top-k: every j < limit when
 *     limit <= topk, else, once the row's cut word carries cut_epoch (GPU: each CTA
 *     polls it for up to wait_us, then gives up and stages nothing), every j whose
 *     strata_k_indexer_bucket(score) >= the cut's bucket (all for
 *     STRATA_INDEXER_CUT_ALL): a superset of the row's top-k;
 *   - each of them that is not resident (map[row_map[r] * map_stride + j] < 0) is
 *     copied from host entry row_base[r] + j into one of the row's cap slots, stage
 *     entries stage_first + r * cap + [0, cap), and then published:
 *     stage_map[r * map_stride + j] = epoch << 24 | entry.
 * Publication follows the bytes (a device-scope fence between), so the index map may
 * run while this is still copying: it takes a copy whose word it finds published
 * with its epoch and copies the others itself. Nothing needs to wait for this call;
 * it only has to end before the stage entries, stage_map or scratch are used by the
 * next call. Misses beyond cap (which ones win is unspecified on the GPU) are left to
 * the map. Every stage entry must be below 2^24 and the epoch below 2^40, new for
 * each call that shares a stage_map (it starts all zero, so the first epoch is 1).
 * The scratch (strata_k_attn_prestage_scratch bytes) is zero before the first call
 * and left zero by each. GPU: n_rows <= 65535, host and stage 16-byte aligned (the
 * copies move 16-byte pieces), else -EINVAL. */
typedef struct strata_attn_prestage_params {
	int n_rows;
	int topk;
	int max_limit;            /* >= every row_limit; fixes the launch shape */
	const int32_t *row_limit; /* [n_rows] the indexer's (clamped to [0, max_limit]) */
	const float *scores;      /* scores[r * score_stride + j] */
	size_t score_stride;
	const unsigned long long *cut; /* [n_rows] the indexer's cut_out */
	uint64_t cut_epoch;       /* the indexer call's */
	int wait_us;              /* GPU: 1 .. 1000 us, how long a CTA polls for its
				     row's cut; 0: 50 */
	const int32_t *map;       /* residency, as strata_attn_map_params */
	const int32_t *row_map;
	int map_stride;           /* entries j >= map_stride are left to the map */
	const int32_t *row_base;
	const uint8_t *host;
	int host_B;
	uint8_t *stage;
	int stage_B;
	int64_t stage_first;
	int cap;                  /* slots per row */
	uint64_t *stage_map;      /* [n_rows][map_stride] */
	uint64_t epoch;
	void *scratch;
	size_t scratch_bytes;
	unsigned long long *n_staged; /* or NULL: += entries copied */
	int max_ctas;             /* GPU: at most this many CTAs per row; 0: up to one
				     CTA per SM over the batch */
} strata_attn_prestage_params;

size_t strata_k_attn_prestage_scratch(int n_rows);
int strata_k_attn_prestage(strata_dev *dev, const strata_attn_prestage_params *p,
			   strata_stream *s);
int strata_k_attn_prestage_cpu(const strata_attn_prestage_params *p);

/* Head groups the attention plan of p would use on dev (each group's blocks read every
 * entry of the list once): 1 on the CPU backend. For callers that choose between
 * reading host-tier entries in place (once per group) and staging them first. */
int strata_k_attn_head_groups(strata_dev *dev, const strata_attn_params *p);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_KERNELS_H */
