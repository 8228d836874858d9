/* Private to kernels/: the device context and the CUDA error seam. */
#ifndef STRATA_KERNELS_INT_H
#define STRATA_KERNELS_INT_H

#include "kernels/kernels.h"

struct strata_dev {
	bool gpu;
	int device;
	char name[256];
};

#define KLOG(level, ...) STRATA_LOG(level, STRATA_SUB_KERNELS, __VA_ARGS__)

#endif
