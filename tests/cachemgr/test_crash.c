/* Crash safety of the prefix store: SIGKILL a storing child at random moments, reopen,
 * check (see pfx_crash.h). STRATA_CRASH_TRIALS overrides the trial count (default 10). */
#include "cachemgr/pfx_crash.h"
#include "testutil.h"

START_TEST(sigkill_trials)
{
	strata_model m = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset("tiny", &m), 0);
	const char *env = getenv("STRATA_CRASH_TRIALS");
	int trials = env ? atoi(env) : 10, total = 0;
	uint64_t seed = 0xc0ffee;
	for (int t = 0; t < trials; t++) {
		char *dir = fx_tmpdir(), msg[256];
		int nc = 0;
		/* 0 .. 150 ms after 0 .. 4 commits: kills land in page writes, syncs,
		 * RocksDB commits and the open itself. */
		unsigned us = (unsigned)(tu_next(&seed) % 150000);
		int bad = fx_crash_trial(dir, &m, tu_next(&seed), us, &nc, msg, sizeof msg);
		if (bad)
			ck_abort_msg("trial %d (kill after %u us): line %d: %s", t, us, bad, msg);
		total += nc;
		fx_rmdir(dir);
		free(dir);
	}
	printf("%d trials, %d committed entries checked\n", trials, total);
	ck_assert_int_gt(total, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cachemgr_crash");
	TCase *tc = tcase_create("crash");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, sigkill_trials);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
