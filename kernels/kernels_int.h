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

#endif
