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
typedef struct strata_stream strata_stream; /* cudaStream_t on the GPU; NULL = default */
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
} strata_dev_config;
#define STRATA_DEV_CONFIG_INIT { sizeof(strata_dev_config), STRATA_BACKEND_AUTO, 0 }

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
int strata_dev_memset(strata_dev *dev, void *dst, int byte, size_t n, strata_stream *stream);

int strata_stream_create(strata_dev *dev, strata_stream **out);
void strata_stream_destroy(strata_dev *dev, strata_stream *s);
int strata_stream_sync(strata_dev *dev, strata_stream *s);
int strata_dev_sync(strata_dev *dev); /* whole device */

/* Events: record on a stream, make another stream wait, time between two. */
int strata_event_create(strata_dev *dev, strata_event **out);
void strata_event_destroy(strata_dev *dev, strata_event *e);
int strata_event_record(strata_dev *dev, strata_event *e, strata_stream *s);
int strata_stream_wait_event(strata_dev *dev, strata_stream *s, strata_event *e);
int strata_event_sync(strata_dev *dev, strata_event *e);
/* Milliseconds from a to b; both must have completed. */
int strata_event_elapsed_ms(strata_dev *dev, strata_event *a, strata_event *b, float *ms);

/* The last GPU error on this thread translated to strata's codes (0 when none);
 * kernels call it after each launch. */
int strata_dev_check(strata_dev *dev, const char *what);

/* ==== V4 formats (FORMATS.md sections 2 and 3) ========================================= */

/* Main KV entries: 512 dims in, 584 bytes out, in FlashMLA's block layout of B
 * entries (data region B*576, scale region B*8, stride strata_main_block_stride(B)).
 * Entry number `slot` lives in block slot / B at offset slot % B. */
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

/* One launch scores and selects for a whole batch of query rows. Row r belongs to
 * request row_req[r] and sees candidates j < row_limit[r] (= (t+1) div 4). Keys are
 * read from index pages through the request's page table.
 *   score(r, j) = sum_h w[r][h] * ReLU(q[r][h] . k_j)
 * Output: the min(topk, limit) selected entry ids of each row in ascending id order,
 * then -1 up to topk. Ties break towards the lower id. Rows with limit <= topk select
 * 0..limit-1 without scoring (out_scores then holds 0). */
typedef struct strata_indexer_params {
	strata_index_fmt fmt;
	int heads;                  /* index heads */
	int topk;
	int n_rows;
	int max_limit;              /* >= every row_limit; fixes launch shapes / scratch */
	const float *q;             /* [n_rows][heads][128] */
	const float *w;             /* [n_rows][heads] */
	const int32_t *row_req;     /* [n_rows] */
	const int32_t *row_limit;   /* [n_rows] */
	const uint8_t *pages;       /* page p at pages + p * B * entry_bytes(fmt) */
	const int32_t *page_table;  /* [n_req][max_pages] */
	int max_pages;
	int B;                      /* entries per page (64) */
	int32_t *out_ids;           /* [n_rows][topk] */
	float *out_scores;          /* [n_rows][topk] scores of out_ids, or NULL */
	void *scratch;              /* strata_k_indexer_scratch() bytes, caller-owned */
	size_t scratch_bytes;
} strata_indexer_params;

/* Scratch bytes the backend needs for p's shapes (n_rows, max_limit, topk, heads). */
size_t strata_k_indexer_scratch(const strata_dev *dev, const strata_indexer_params *p);
int strata_k_indexer(strata_dev *dev, const strata_indexer_params *p, strata_stream *s);
int strata_k_indexer_cpu(const strata_indexer_params *p);

/* ==== hot-cache lookup and selected-entry gather (prefetch/ drives these) ============= */
/* (section owned by the prefetch work: declarations go here) */

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
 * entries in the same order with the same bytes give bit-identical outputs. */
#define STRATA_ATTN_GPU_RTOL 1e-5f
#define STRATA_ATTN_GPU_ATOL 1e-5f

typedef struct strata_attn_params {
	int n_rows;
	int heads;
	float scale;              /* softmax scale: 512^-0.5 for V4 */
	const float *q;           /* [n_rows][heads][512] */
	const float *sink;        /* [heads] fp32 sink logits, or NULL: no sink */
	const uint8_t *pool;      /* main-entry blocks of strata_main_block_stride(B) */
	int B;
	const int32_t *idx;       /* [n_rows][n_idx], block*B + offset or -1 */
	int n_idx;                /* may be 0 (idx, pool unused) */
	const uint8_t *win_pool;  /* window ring blocks, stride strata_main_block_stride(win_B) */
	int win_B;
	const int32_t *win_idx;   /* [n_rows][n_win] */
	int n_win;                /* may be 0 */
	float *out;               /* [n_rows][heads][512] */
	float *lse;               /* [n_rows][heads], natural log, without sink; or NULL */
} strata_attn_params;

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

#ifdef __cplusplus
}
#endif
#endif /* STRATA_KERNELS_H */
