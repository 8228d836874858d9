/*
 * prefetch: turns selections into movement: the device hot cache, the miss gather,
 * write-back, NVMe->host staging, prediction. (Being built.)
 */
#ifndef STRATA_PREFETCH_H
#define STRATA_PREFETCH_H

#include "tiers/tiers.h"

#endif
