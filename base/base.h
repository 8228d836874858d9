/*
 * base: the vocabulary every strata folder shares, and nothing else.
 *
 * - Errors. Every strata function that can fail returns int: 0 on success, -errno
 *   for system and io_uring failures, or a code from strata's own reserved range
 *   (STRATA_E_FIRST down to STRATA_E_LAST, far below any errno). strata_strerror()
 *   names both. Foreign errors (cudaError_t, ncclResult_t, RocksDB errptr) are
 *   translated where they are called; the original text goes to the log.
 * - Logging by level and subsystem, configured once from the environment variable
 *   STRATA_LOG ("warn", "info", "debug:tiers,prefetch", "trace"). STRATA_LOG() checks
 *   the level before formatting anything, so a disabled message costs one load.
 * - Model geometry: the attention-cache schedule of DeepSeek-V4 (FORMATS.md section
 *   1). Presets "flash" and "pro", or a custom per-layer ratio list. No code outside
 *   this file assumes a layer count, a head count or a schedule.
 * - The byte sizes of the V4 cache formats (FORMATS.md sections 2, 3, 5) and the
 *   per-request size table of FORMATS.md section 6.
 *
 * Thread rules: everything here is reentrant; the log configuration is read once
 * (first use) and is immutable afterwards.
 */
#ifndef STRATA_BASE_H
#define STRATA_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_VERSION_MAJOR 0
#define STRATA_VERSION_MINOR 1
#define STRATA_VERSION_PATCH 0
#define STRATA_VERSION "0.1.0"

/* ---- errors -------------------------------------------------------------------- */

/* strata's own error range. errno values stay well below 4096. */
enum {
	STRATA_E_FIRST = -20000,
	STRATA_E_CHECKSUM = -20000,  /* stored bytes fail their checksum */
	STRATA_E_CUDA = -20001,      /* a CUDA runtime call failed (see the log) */
	STRATA_E_NOGPU = -20002,     /* a GPU was required and none is usable */
	STRATA_E_ROCKSDB = -20003,   /* a RocksDB call failed (see the log) */
	STRATA_E_FORMAT = -20004,    /* unknown fingerprint, version or geometry mismatch */
	STRATA_E_NOTFOUND = -20005,  /* no such key, page or sequence */
	STRATA_E_BUDGET = -20006,    /* a tier's byte budget would be exceeded */
	STRATA_E_CORRUPT = -20007,   /* a record's header or structure is damaged */
	STRATA_E_NCCL = -20008,      /* an NCCL call failed (see the log) */
	STRATA_E_SHORTIO = -20009,   /* a read or write moved fewer bytes than asked */
	STRATA_E_INJECTED = -20010,  /* an injected fault (tests only) */
	STRATA_E_UNSUPPORTED = -20011, /* not built in, or not supported on this system */
	STRATA_E_LAST = -20011,
};

/* A static string naming err (0, -errno or a STRATA_E_* code). Never NULL. */
const char *strata_strerror(int err);

/* ---- logging ------------------------------------------------------------------- */

typedef enum {
	STRATA_LOG_OFF = 0,
	STRATA_LOG_ERROR = 1,
	STRATA_LOG_WARN = 2,
	STRATA_LOG_INFO = 3,
	STRATA_LOG_DEBUG = 4,
	STRATA_LOG_TRACE = 5,
} strata_log_level;

/* Subsystems, one bit each, for STRATA_LOG's filter ("debug:tiers,prefetch"). */
typedef enum {
	STRATA_SUB_BASE = 1u << 0,
	STRATA_SUB_KERNELS = 1u << 1,
	STRATA_SUB_TIERS = 1u << 2,
	STRATA_SUB_PREFETCH = 1u << 3,
	STRATA_SUB_CACHEMGR = 1u << 4,
	STRATA_SUB_ENGINE = 1u << 5,
	STRATA_SUB_ALL = 0xffffffffu,
} strata_log_sub;

/* Current level and subsystem mask; parsed from STRATA_LOG on first call.
 * Default: warnings and errors for every subsystem. */
extern int strata_log_level_;
extern uint32_t strata_log_mask_;
void strata_log_init(void);
void strata_log_set(strata_log_level level, uint32_t sub_mask);
void strata_log_write(strata_log_level level, strata_log_sub sub, const char *file,
		      int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#define STRATA_LOG_ON(level, sub)                                                   \
	((strata_log_level_ < 0 ? (strata_log_init(), 0) : 0),                      \
	 (level) <= strata_log_level_ && ((sub) & strata_log_mask_))
#define STRATA_LOG(level, sub, ...)                                                 \
	do {                                                                         \
		if (STRATA_LOG_ON(level, sub))                                       \
			strata_log_write(level, sub, __FILE__, __LINE__, __VA_ARGS__); \
	} while (0)

/* ---- V4 format sizes (FORMATS.md sections 2, 3, 5) -------------------------------- */

#define STRATA_HEAD_DIM 512         /* main entry dims: 448 NoPE + 64 RoPE */
#define STRATA_NOPE_DIM 448
#define STRATA_ROPE_DIM 64
#define STRATA_MAIN_DATA_BYTES 576  /* 448 fp8 + 64 bf16 */
#define STRATA_MAIN_SCALE_BYTES 8   /* 7 UE8M0 scales + 1 pad */
#define STRATA_MAIN_ENTRY_BYTES 584
#define STRATA_INDEX_DIM 128
#define STRATA_INDEX_MXFP4_BYTES 68 /* 64 payload + 4 scales */
#define STRATA_INDEX_FP8_BYTES 132  /* 128 e4m3 + fp32 scale */
#define STRATA_BLOCK_TOKENS 256     /* one logical block (one page per cache family) */

/* Index key formats. */
typedef enum { STRATA_INDEX_MXFP4 = 0, STRATA_INDEX_FP8 = 1 } strata_index_fmt;

/* Block stride of a main-entry block of B entries: B*584 rounded up to 576. */
static inline size_t strata_main_block_stride(int B)
{
	return (((size_t)B * STRATA_MAIN_ENTRY_BYTES + STRATA_MAIN_DATA_BYTES - 1) /
		STRATA_MAIN_DATA_BYTES) * STRATA_MAIN_DATA_BYTES;
}
static inline size_t strata_index_entry_bytes(strata_index_fmt f)
{
	return f == STRATA_INDEX_FP8 ? STRATA_INDEX_FP8_BYTES : STRATA_INDEX_MXFP4_BYTES;
}

/* ---- model geometry (FORMATS.md section 1) ------------------------------------------ */

#define STRATA_MAX_LAYERS 128
#define STRATA_MODEL_NAME_MAX 32

typedef struct strata_model {
	size_t size;                 /* sizeof(strata_model), for forward compatibility */
	char name[STRATA_MODEL_NAME_MAX];
	int hidden;                  /* hidden size */
	int n_layers;
	int16_t ratio[STRATA_MAX_LAYERS]; /* per layer: 0 window-only, 4 CSA, 128 HCA */
	int n_heads;                 /* attention query heads */
	int head_dim;                /* 512 */
	int rope_dim;                /* 64 */
	int index_heads;             /* 64 */
	int index_dim;               /* 128 */
	int index_topk;              /* 512 (flash) or 1024 (pro) */
	int window;                  /* 128 raw tokens */
	int block_tokens;            /* 256 */
	strata_index_fmt index_fmt;  /* how index keys are stored */
} strata_model;

#define STRATA_MODEL_INIT { sizeof(strata_model) }

/* Fill *m with a preset: "flash" (V4-Flash), "pro" (V4-Pro) or "tiny" (a scaled-down
 * geometry for CPU runs: 6 layers, 8 heads, top-k 64). -EINVAL for an unknown name. */
int strata_model_preset(const char *name, strata_model *m);

/* Replace m's schedule with a comma-separated ratio list ("0,0,4,128,4"). -EINVAL for
 * a ratio other than 0, 4 or 128, an empty list or more than STRATA_MAX_LAYERS. */
int strata_model_set_schedule(strata_model *m, const char *ratios);

/* 0 when m is self-consistent, else -EINVAL (and a log line saying why). */
int strata_model_validate(const strata_model *m);

/* Number of layers with the given ratio (0, 4 or 128). */
int strata_model_count(const strata_model *m, int ratio);

/* 64-bit fingerprint of everything that changes cache bytes: schedule, dims, window,
 * block size, index format and the format version. Equal fingerprints = compatible. */
uint64_t strata_model_fingerprint(const strata_model *m);

/* ---- per-request sizes (FORMATS.md section 6) ----------------------------------- */

typedef struct strata_sizes {
	uint64_t tokens;
	uint64_t c4_entries;         /* per CSA layer: tokens / 4 */
	uint64_t c128_entries;       /* per HCA layer: tokens / 128 */
	uint64_t c4_main_bytes;      /* all CSA layers */
	uint64_t c4_index_bytes;     /* all CSA layers, in m->index_fmt */
	uint64_t c128_main_bytes;    /* all HCA layers */
	uint64_t window_bytes;       /* every layer's 128-entry ring */
	uint64_t state_bytes;        /* compressor residual state, all layers */
	uint64_t total_bytes;        /* attention cache: the four above, without state */
	uint64_t device_offloaded;   /* device bytes when C4 main lives on the host */
} strata_sizes;

void strata_model_sizes(const strata_model *m, uint64_t tokens, strata_sizes *s);

/* ---- small utilities -------------------------------------------------------------- */

/* Parse a count such as "131072", "128K", "1M", "2G" (binary multiples) into *out.
 * -EINVAL on anything else, including overflow and trailing junk. */
int strata_parse_count(const char *s, uint64_t *out);

/* Monotonic clock in nanoseconds. */
uint64_t strata_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_BASE_H */
