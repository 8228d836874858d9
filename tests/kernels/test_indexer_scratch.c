/* The indexer's scratch-size query depends on shapes only: an engine asks for it at
 * create time, before its query, key and output buffers exist (a GPU run once failed
 * with -EINVAL because the query returned 0 for such a call). */
#include <errno.h>

#include "testutil.h"

START_TEST(scratch_before_buffers)
{
	strata_indexer_params p = { .fmt = STRATA_INDEX_MXFP4, .heads = 64, .topk = 512,
				    .n_req = 4, .n_rows = 4, .max_rows = 1,
				    .max_limit = 65536, .max_pages = 1024, .B = 64 };
	ck_assert_uint_gt(strata_k_indexer_scratch(NULL, &p), 0);
	p.heads = 0; /* a bad shape still gets 0 */
	ck_assert_uint_eq(strata_k_indexer_scratch(NULL, &p), 0);
	ck_assert_uint_eq(strata_k_indexer_scratch(NULL, NULL), 0);
}
END_TEST

/* The early-staging shape query: no CTAs on the CPU backend, a clear error for no
 * parameters. */
START_TEST(stage_ctas_cpu)
{
	strata_attn_prestage_params st = { .max_ctas = 0 };
	strata_indexer_params p = { .fmt = STRATA_INDEX_MXFP4, .heads = 64, .topk = 512,
				    .n_req = 1, .n_rows = 1, .max_rows = 1,
				    .max_limit = 32768, .max_pages = 512, .B = 64, .stage = &st };
	int fx = -1;
	ck_assert_int_eq(strata_k_indexer_stage_ctas(NULL, &p, &fx), 0);
	ck_assert_int_eq(fx, 0);
	fx = -1;
	ck_assert_int_eq(strata_k_indexer_stage_ctas(NULL, NULL, &fx), -EINVAL);
	ck_assert_int_eq(fx, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("indexer_scratch");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, scratch_before_buffers);
	tcase_add_test(tc, stage_ctas_cpu);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
