/* Shared by the Check programs under tests/: a seeded generator, a GPU gate, and a
 * main() helper. Test files include this after <check.h>. */
#ifndef STRATA_TESTUTIL_H
#define STRATA_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"

/* liburing's T_EXIT_SKIP: CTest reports exit code 77 as "skipped". */
#define TEST_EXIT_SKIP 77

/* splitmix64: a tiny seeded generator, identical on every machine. */
#define TU_STEP 0x9e3779b97f4a7c15ull /* tu_next's state increment */
static inline uint64_t tu_next(uint64_t *s)
{
	uint64_t z = (*s += TU_STEP);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
/* The state n calls of tu_next later: streams can be split without changing them. */
static inline uint64_t tu_skip(uint64_t s, uint64_t n)
{
	return s + n * TU_STEP;
}
/* Uniform in [-1, 1). */
static inline float tu_uniform(uint64_t *s)
{
	return (float)((double)(tu_next(s) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

/* For gpu_*.c programs: exit 77 unless a GPU is usable. The probe runs in a child
 * process, because a CUDA context does not survive fork(): the parent must stay
 * CUDA-free so that Check can fork each test (which then initialises CUDA itself). */
static inline void tu_require_gpu(void)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(strata_gpu_count() > 0 ? 0 : 1);
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		printf("no usable GPU: skipping\n");
		exit(TEST_EXIT_SKIP);
	}
}

/* Run one suite (forked, with its own timeouts) and return the process status. */
static inline int tu_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
