/*
 * engine: the reference DeepSeek-V4 attention-cache engine (deterministic synthetic
 * weights and inputs, the exact cache mechanics of FORMATS.md), the demo, and the
 * `strata` CLI. The engine is a reference for exactness and a workload for benchmarks,
 * not a language model.
 */
#ifndef STRATA_ENGINE_H
#define STRATA_ENGINE_H

#include "cachemgr/cachemgr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `strata demo`: returns a process exit status. */
int strata_demo_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
