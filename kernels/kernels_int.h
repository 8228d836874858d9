/* Private to kernels/: the device context and the CUDA error seam. */
#ifndef STRATA_KERNELS_INT_H
#define STRATA_KERNELS_INT_H

#include "kernels/kernels.h"

struct strata_dev {
	bool gpu;
	int device;
	char name[256];
	void *main; /* cudaStream_t NULL stands for: 0 (legacy) or priority_main's stream */
};

/* The CUDA stream behind s on dev (NULL: the device's main stream). */
static inline void *kstream(const strata_dev *d, strata_stream *s)
{
	return s ? (void *)s : d->main;
}

#define KLOG(level, ...) STRATA_LOG(level, STRATA_SUB_KERNELS, __VA_ARGS__)

#ifdef STRATA_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
/* A TMA tensor map (a CUtensorMap: 128 bytes, 64-byte aligned, at tmap) over the bytes at
 * base seen as `rows` rows of row_bytes (a multiple of 16), read box_rows rows at a time
 * with the 128-byte swizzle. The driver's encoder comes through the runtime (no link to
 * libcuda); the calling thread's last map is kept, so a repeated call is a copy. 0, or
 * -ENOTSUP where the encoder cannot be had, -EINVAL where it refuses the map. */
int strata_dev_tmap_rows(void *tmap, const void *base, uint32_t row_bytes, uint64_t rows,
			 uint32_t box_rows);
#ifdef __cplusplus
}
#endif
#endif

#endif
