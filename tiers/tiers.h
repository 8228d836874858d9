/*
 * tiers: storage for cache pages: device arenas, the pinned host pool, the NVMe store
 * (io_uring, O_DIRECT), one page-handle vocabulary for all three, byte budgets and
 * counters, checksums. (Being built: see issue "Tiers and the HiSparse fetch path".)
 */
#ifndef STRATA_TIERS_H
#define STRATA_TIERS_H

#include "kernels/kernels.h"

#endif
