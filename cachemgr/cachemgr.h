/*
 * cachemgr: sequences, page tables, placement and budgets, pause/resume/fork, the
 * prefix store (xxHash keys, RocksDB metadata), DCP ownership. (Being built.)
 */
#ifndef STRATA_CACHEMGR_H
#define STRATA_CACHEMGR_H

#include "prefetch/prefetch.h"

#endif
