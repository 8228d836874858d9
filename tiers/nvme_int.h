/* tiers/ private: the NVMe store's object, shared by nvme.c (open, recovery, scan) and
 * nvme_io.c (the io_uring wrapper: submission, completion, the fault seams). */
#ifndef STRATA_NVME_INT_H
#define STRATA_NVME_INT_H

#include <liburing.h>
#include <sys/uio.h>

#include "tiers_int.h"

#define NVME_SB_MAGIC 0x4253415441525453ull  /* "STRATASB" little-endian */
#define NVME_REC_MAGIC 0x4750415441525453ull /* "STRATAPG" */
/* 2: the record header moved from the record's first 64 bytes to its last 64 (a
 * trailer), so that the payload starts block-aligned and can move by DMA straight
 * between the device and an aligned caller buffer. Version 1 stores are refused. */
#define NVME_VERSION 2u
#define MAX_RECORD_PAYLOAD ((uint64_t)1 << 40)

/* On-disk record trailer, the last 64 bytes of a record (host byte order: strata runs
 * on little-endian machines only, and the superblock's magic catches anything else). */
typedef struct nvme_rec_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_bytes;     /* 64 */
	uint64_t key_lo, key_hi;
	uint64_t length;        /* payload bytes */
	uint64_t payload_xxh3;
	uint64_t reserved;      /* 0 */
	uint64_t hdr_xxh3;      /* XXH3-64 of the 56 bytes above */
} nvme_rec_hdr;

typedef struct nvme_superblock {
	uint64_t magic;
	uint32_t version;
	uint32_t block;         /* 4096 */
	uint64_t capacity;      /* file bytes the store uses, superblock included */
	uint64_t created_ns;
	uint64_t reserved[3];
	uint64_t sb_xxh3;       /* of the 56 bytes above */
} nvme_superblock;

/* The payload checksum, XXH3-64, on the CPU's widest vector unit (nvme_hash.c). */
typedef uint64_t (*nvme_hash_fn)(const void *p, size_t n);
enum { NVME_HASH_LIB, NVME_HASH_AVX2 };
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define NVME_HASH_X86 1
uint64_t nvme_hash_avx2(const void *p, size_t n);
#else
#define NVME_HASH_X86 0
#endif
/* One implementation (NULL when this CPU or build lacks it); tests compare them. */
nvme_hash_fn nvme_hash_impl(int which);
/* The fastest one here, chosen once per process. */
nvme_hash_fn nvme_hash_best(void);

enum { SLOT_READ, SLOT_WRITE, SLOT_SYNC, SLOT_RAW };

/* One in-flight operation. Owned by the store's lock. */
typedef struct nvme_slot {
	int kind;
	bool busy;
	strata_nvme_op *op;     /* the caller's op (READ/WRITE) */
	int *done;              /* internal ops: set to 1 on completion (result in op) */
	uint8_t *buf;           /* aligned transfer buffer (staging slot or tmp): record
	                           bytes [head, bytes) */
	uint8_t *tmp;           /* a temporary buffer for transfers past slot_bytes */
	uint64_t head;          /* READ/WRITE: record bytes [0, head) move straight from/to
	                           the caller's buffer (0: the whole record goes via buf) */
	struct iovec iov[2];    /* head > 0: { caller, head }, { buf, bytes - head }; kept
	                           here because the kernel may read them after submission */
	uint64_t offset;
	uint64_t bytes;         /* the transfer's expected length (the whole record) */
	int *raw_res;           /* SLOT_RAW/SYNC: receives bytes moved or the error */
} nvme_slot;

struct strata_nvme_store {
	pthread_mutex_t mu;     /* guards everything below (one ring) */
	int fd;
	bool direct, blockdev, reg_bufs, reg_file, recovering;
	bool coop_taskrun;      /* ring made with COOP_TASKRUN | TASKRUN_FLAG */
	size_t dio_align;       /* caller-buffer alignment for the zero-copy path */
	bool zc_off;            /* a caller buffer gave EFAULT: stage everything */
	struct io_uring ring;
	bool ring_ok;
	unsigned qd;
	size_t slot_bytes;
	uint8_t *staging;       /* qd * slot_bytes, 4 KiB-aligned */
	nvme_slot *slots;
	int *free_slots;
	int nfree_slots;
	int in_kernel;          /* slots submitted, not completed */
	/* finished user ops not yet reaped, FIFO */
	strata_nvme_op **done;
	size_t done_head, done_n, done_cap;
	uint64_t capacity;      /* bytes, superblock included */
	extent_map ext;
	uint64_t budget;
	strata_tier_stats st;
	tier_fault fault;
	nvme_hash_fn hash;      /* payload XXH3-64 (nvme_hash_best) */
};

uint64_t nvme_hdr_checksum(const nvme_rec_hdr *h);


/* Lock held. Submit one internal op (kind SLOT_SYNC or SLOT_RAW into buf) and wait. */
int nvme_run_raw(strata_nvme_store *s, int kind, uint8_t *buf, uint64_t offset,
		 uint64_t bytes);
/* Lock held: wait until the ring is idle (destroy). */
void nvme_drain(strata_nvme_store *s);

#endif
