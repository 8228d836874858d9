/* tiers on a GPU: the host pool is registered (pinned, mapped) and the device arena is
 * device memory; bytes go host page -> arena page -> another host page intact. */
#include <check.h>
#include <errno.h>

#include "testutil.h"
#include "tiers/tiers.h"

START_TEST(host_arena_roundtrip)
{
	strata_dev_config dc = STRATA_DEV_CONFIG_INIT;
	dc.backend = STRATA_BACKEND_GPU;
	strata_dev *d = NULL;
	ck_assert_int_eq(strata_dev_open(&dc, &d), 0);
	strata_pool_config c = STRATA_POOL_CONFIG_INIT;
	c.page_bytes = 37440;
	c.capacity_pages = 128; /* ~4.6 MiB: more than one 2 MiB huge page */
	strata_host_pool *hp = NULL;
	strata_arena *ar = NULL;
	ck_assert_int_eq(strata_host_pool_create(d, &c, &hp), 0);
	ck_assert(strata_host_pool_registered(hp));
	printf("host pool: %s\n", strata_host_mem_name(strata_host_pool_mem(hp)));
	ck_assert_int_eq(strata_arena_create(d, &c, &ar), 0);
	strata_page_handle src, back, dv;
	ck_assert_int_eq(strata_host_pool_alloc(hp, 1, &src), 0);
	ck_assert_int_eq(strata_host_pool_alloc(hp, 1, &back), 0);
	ck_assert_int_eq(strata_arena_alloc(ar, 1, &dv), 0);
	uint8_t *s = strata_host_pool_ptr(hp, &src), *b = strata_host_pool_ptr(hp, &back);
	uint64_t seed = 3;
	for (size_t i = 0; i < c.page_bytes; i++)
		s[i] = (uint8_t)tu_next(&seed);
	memset(b, 0, c.page_bytes);
	ck_assert_int_eq(strata_host_pool_seal(hp, &src), 0);
	ck_assert_int_eq(strata_dev_copy(d, strata_arena_ptr(ar, &dv), s, c.page_bytes, NULL), 0);
	ck_assert_int_eq(strata_dev_copy(d, b, strata_arena_ptr(ar, &dv), c.page_bytes, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(d), 0);
	back.checksum = src.checksum;
	ck_assert_int_eq(strata_host_pool_verify(hp, &back), 0);
	strata_arena_destroy(ar);
	strata_host_pool_destroy(hp);
	strata_dev_close(d);
}
END_TEST

int main(void)
{
	tu_require_gpu();
	Suite *s = suite_create("tiers_gpu");
	TCase *t = tcase_create("gpu");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, host_arena_roundtrip);
	suite_add_tcase(s, t);
	return tu_run(s);
}
