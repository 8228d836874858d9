/* A fuzz target: fuzz_one() takes any bytes and must neither crash nor leak nor trip a
 * sanitizer; fuzz_seed() writes one valid input (so mutations start near the format).
 * Built as a libFuzzer binary with -DSTRATA_FUZZ=ON under clang, and always as a replay
 * program (replay_main.c) that CTest runs over a seeded corpus. */
#ifndef STRATA_FUZZ_H
#define STRATA_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int fuzz_one(const uint8_t *data, size_t size);
size_t fuzz_seed(uint8_t *buf, size_t cap);

#endif
