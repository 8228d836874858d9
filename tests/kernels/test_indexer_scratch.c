/* The indexer's scratch-size query depends on shapes only: an engine asks for it at
 * create time, before its query, key and output buffers exist (a GPU run once failed
 * with -EINVAL because the query returned 0 for such a call). */
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

int main(void)
{
	Suite *s = suite_create("indexer_scratch");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, scratch_before_buffers);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
