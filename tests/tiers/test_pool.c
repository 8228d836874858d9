/* tiers: device arena and host pool: fixed-size pages, budgets, counters, checksums,
 * injected allocation faults, bad arguments. */
#include <check.h>
#include <errno.h>

#include "testutil.h"
#include "tiers/tiers.h"

static strata_dev *cpu_dev(void)
{
	strata_dev_config c = STRATA_DEV_CONFIG_INIT;
	c.backend = STRATA_BACKEND_CPU;
	strata_dev *d = NULL;
	ck_assert_int_eq(strata_dev_open(&c, &d), 0);
	return d;
}

static strata_tier_stats host_stats(strata_host_pool *p)
{
	strata_tier_stats st = STRATA_TIER_STATS_INIT;
	ck_assert_int_eq(strata_host_pool_stats(p, &st), 0);
	return st;
}

START_TEST(host_alloc_free)
{
	strata_dev *d = cpu_dev();
	strata_pool_config c = STRATA_POOL_CONFIG_INIT;
	c.page_bytes = 37440;
	c.capacity_pages = 64;
	strata_host_pool *p = NULL;
	ck_assert_int_eq(strata_host_pool_create(d, &c, &p), 0);
	ck_assert_ptr_nonnull(strata_host_pool_base(p));
	ck_assert_uint_eq(strata_host_pool_page_stride(p), 37440);
	printf("host pool memory: %s, registered %d\n",
	       strata_host_mem_name(strata_host_pool_mem(p)), strata_host_pool_registered(p));
	strata_page_handle h[10];
	ck_assert_int_eq(strata_host_pool_alloc(p, 10, h), 0);
	char *base = strata_host_pool_base(p);
	for (int i = 0; i < 10; i++) {
		ck_assert_uint_eq(h[i].tier, STRATA_TIER_HOST);
		ck_assert_uint_eq(h[i].length, 37440);
		ck_assert_uint_eq(h[i].location, (uint64_t)i * 37440); /* fresh pool: in order */
		ck_assert_ptr_eq(strata_host_pool_ptr(p, &h[i]), base + h[i].location);
		ck_assert_int_eq(strata_host_pool_page_index(p, &h[i]), i);
		memset(strata_host_pool_ptr(p, &h[i]), i + 1, 37440); /* the memory is usable */
	}
	strata_tier_stats st = host_stats(p);
	ck_assert_uint_eq(st.tier, STRATA_TIER_HOST);
	ck_assert_uint_eq(st.used_bytes, 10 * 37440);
	ck_assert_uint_eq(st.pages, 10);
	ck_assert_uint_eq(st.allocs, 10);
	ck_assert_uint_eq(st.capacity_bytes, 64 * 37440);
	/* free and reuse: the last freed page comes back first */
	ck_assert_int_eq(strata_host_pool_free(p, 1, &h[3]), 0);
	strata_page_handle again;
	ck_assert_int_eq(strata_host_pool_alloc(p, 1, &again), 0);
	ck_assert_uint_eq(again.location, h[3].location);
	/* double free and foreign handles: -EINVAL, nothing freed */
	ck_assert_int_eq(strata_host_pool_free(p, 10, h), 0);
	ck_assert_int_eq(strata_host_pool_free(p, 1, &h[0]), -EINVAL);
	strata_page_handle dup[2] = { again, again };
	ck_assert_int_eq(strata_host_pool_free(p, 2, dup), -EINVAL);
	st = host_stats(p);
	ck_assert_uint_eq(st.pages, 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_eq(st.peak_bytes, 10 * 37440);
	strata_page_handle bad = { .tier = STRATA_TIER_DEVICE, .location = 0, .length = 37440 };
	ck_assert_int_eq(strata_host_pool_free(p, 1, &bad), -EINVAL);
	ck_assert_ptr_null(strata_host_pool_ptr(p, &bad));
	bad.tier = STRATA_TIER_HOST;
	bad.location = 100; /* not on a page boundary */
	ck_assert_ptr_null(strata_host_pool_ptr(p, &bad));
	bad.location = 64 * 37440; /* past the end */
	ck_assert_ptr_null(strata_host_pool_ptr(p, &bad));
	strata_host_pool_destroy(p);
	strata_host_pool_destroy(NULL);
	strata_dev_close(d);
}
END_TEST

START_TEST(host_budget_capacity)
{
	strata_dev *d = cpu_dev();
	strata_pool_config c = STRATA_POOL_CONFIG_INIT;
	c.page_bytes = 1000;
	c.align = 4096;
	c.capacity_pages = 16;
	c.budget_bytes = 5 * 4096;
	c.flags = STRATA_HOST_NO_HUGE;
	strata_host_pool *p = NULL;
	ck_assert_int_eq(strata_host_pool_create(d, &c, &p), 0);
	ck_assert_int_eq(strata_host_pool_mem(p), STRATA_HOST_MEM_PLAIN);
	ck_assert_uint_eq(strata_host_pool_page_stride(p), 4096);
	strata_page_handle h[16];
	ck_assert_int_eq(strata_host_pool_alloc(p, 6, h), STRATA_E_BUDGET); /* all or nothing */
	ck_assert_uint_eq(host_stats(p).pages, 0);
	ck_assert_int_eq(strata_host_pool_alloc(p, 5, h), 0);
	ck_assert_int_eq(strata_host_pool_alloc(p, 1, h + 5), STRATA_E_BUDGET);
	strata_tier_stats st = host_stats(p);
	ck_assert_uint_eq(st.pages, 5);
	ck_assert_uint_eq(st.used_bytes, 5 * 4096);
	ck_assert_uint_eq(st.budget_failures, 2);
	ck_assert_uint_eq(st.budget_bytes, 5 * 4096);
	ck_assert_int_eq(strata_host_pool_set_budget(p, 0), 0); /* back to the capacity */
	ck_assert_int_eq(strata_host_pool_alloc(p, 12, h + 5), -ENOSPC);
	ck_assert_int_eq(strata_host_pool_alloc(p, 11, h + 5), 0);
	ck_assert_int_eq(strata_host_pool_alloc(p, 1, h), -ENOSPC);
	st = host_stats(p);
	ck_assert_uint_eq(st.full_failures, 2);
	ck_assert_uint_eq(st.pages, 16);
	/* lowering the budget below use is allowed: further allocations fail */
	ck_assert_int_eq(strata_host_pool_set_budget(p, 4096), 0);
	ck_assert_int_eq(strata_host_pool_free(p, 16, h), 0);
	ck_assert_int_eq(strata_host_pool_alloc(p, 2, h), STRATA_E_BUDGET);
	ck_assert_int_eq(strata_host_pool_alloc(p, 1, h), 0);
	strata_host_pool_count_moved(p, 100, 7);
	st = host_stats(p);
	ck_assert_uint_eq(st.bytes_in, 100);
	ck_assert_uint_eq(st.bytes_out, 7);
	strata_host_pool_destroy(p);
	strata_dev_close(d);
}
END_TEST

START_TEST(host_checksum)
{
	strata_pool_config c = STRATA_POOL_CONFIG_INIT;
	c.page_bytes = 584 * 64;
	c.capacity_pages = 4;
	c.flags = STRATA_HOST_NO_HUGETLB;
	strata_host_pool *p = NULL;
	ck_assert_int_eq(strata_host_pool_create(NULL, &c, &p), 0); /* no device: unregistered */
	ck_assert(!strata_host_pool_registered(p));
	ck_assert_int_ne(strata_host_pool_mem(p), STRATA_HOST_MEM_HUGETLB);
	strata_page_handle h;
	ck_assert_int_eq(strata_host_pool_alloc(p, 1, &h), 0);
	uint8_t *q = strata_host_pool_ptr(p, &h);
	uint64_t seed = 7;
	for (size_t i = 0; i < h.length; i++)
		q[i] = (uint8_t)tu_next(&seed);
	ck_assert_int_eq(strata_host_pool_seal(p, &h), 0);
	ck_assert_uint_eq(h.checksum, strata_page_checksum(q, h.length));
	ck_assert_int_eq(strata_host_pool_verify(p, &h), 0);
	q[1234] ^= 0x10;
	ck_assert_int_eq(strata_host_pool_verify(p, &h), STRATA_E_CHECKSUM);
	strata_tier_stats st = host_stats(p);
	ck_assert_uint_eq(st.checksum_failures, 1);
	strata_host_pool_destroy(p);
}
END_TEST

START_TEST(host_inject_loop)
{
	strata_pool_config c = STRATA_POOL_CONFIG_INIT;
	c.page_bytes = 512;
	c.capacity_pages = 8;
	c.flags = STRATA_HOST_NO_HUGE;
	strata_host_pool *p = NULL;
	ck_assert_int_eq(strata_host_pool_create(NULL, &c, &p), 0);
	int n;
	for (n = 0; n < 20; n++) {
		/* The operation: three allocations; on any failure, free what it got. */
		ck_assert_int_eq(strata_host_pool_inject_alloc(p, n, -ENOMEM), 0);
		uint64_t fired = host_stats(p).faults_fired;
		strata_page_handle h[3];
		int got = 0, err = 0;
		for (; got < 3; got++)
			if ((err = strata_host_pool_alloc(p, 1, &h[got])))
				break;
		if (err) {
			ck_assert_int_eq(err, -ENOMEM);
			ck_assert_int_eq(got, n);
		}
		if (got)
			ck_assert_int_eq(strata_host_pool_free(p, got, h), 0);
		ck_assert_uint_eq(host_stats(p).pages, 0);
		if (!err) {
			ck_assert_uint_eq(host_stats(p).faults_fired, fired);
			break;
		}
	}
	ck_assert_int_eq(n, 3);
	ck_assert_uint_eq(host_stats(p).faults_fired, 3);
	ck_assert_int_eq(strata_host_pool_inject_alloc(p, 0, 5), -EINVAL); /* not an error code */
	strata_host_pool_destroy(p);
}
END_TEST

START_TEST(arena_basics)
{
	strata_dev *d = cpu_dev();
	strata_pool_config c = STRATA_POOL_CONFIG_INIT;
	c.page_bytes = 37440;
	c.capacity_pages = 8;
	strata_arena *a = NULL;
	ck_assert_int_eq(strata_arena_create(d, &c, &a), 0);
	ck_assert_ptr_nonnull(strata_arena_base(a));
	strata_page_handle h[8];
	ck_assert_int_eq(strata_arena_alloc(a, 8, h), 0);
	for (int i = 0; i < 8; i++) {
		ck_assert_uint_eq(h[i].tier, STRATA_TIER_DEVICE);
		ck_assert_ptr_eq(strata_arena_ptr(a, &h[i]),
				 (char *)strata_arena_base(a) + (size_t)i * 37440);
		ck_assert_int_eq(strata_arena_page_index(a, &h[i]), i);
	}
	ck_assert_int_eq(strata_arena_alloc(a, 1, h), -ENOSPC);
	ck_assert_int_eq(strata_arena_free(a, 4, h + 4), 0);
	ck_assert_int_eq(strata_arena_set_budget(a, 5 * 37440), 0);
	ck_assert_int_eq(strata_arena_alloc(a, 2, h + 4), STRATA_E_BUDGET);
	ck_assert_int_eq(strata_arena_alloc(a, 1, h + 4), 0);
	ck_assert_int_eq(strata_arena_inject_alloc(a, 0, -ENOMEM), 0);
	ck_assert_int_eq(strata_arena_alloc(a, 1, h + 5), -ENOMEM);
	strata_arena_count_moved(a, 37440, 0);
	strata_tier_stats st = STRATA_TIER_STATS_INIT;
	ck_assert_int_eq(strata_arena_stats(a, &st), 0);
	ck_assert_uint_eq(st.tier, STRATA_TIER_DEVICE);
	ck_assert_uint_eq(st.pages, 5);
	ck_assert_uint_eq(st.used_bytes, 5 * 37440);
	ck_assert_uint_eq(st.peak_bytes, 8 * 37440);
	ck_assert_uint_eq(st.budget_failures, 1);
	ck_assert_uint_eq(st.full_failures, 1);
	ck_assert_uint_eq(st.faults_fired, 1);
	ck_assert_uint_eq(st.bytes_in, 37440);
	strata_page_handle host = h[0];
	host.tier = STRATA_TIER_HOST;
	ck_assert_int_eq(strata_arena_free(a, 1, &host), -EINVAL);
	strata_arena_destroy(a);
	strata_arena_destroy(NULL);
	strata_dev_close(d);
}
END_TEST

START_TEST(bad_args)
{
	strata_dev *d = cpu_dev();
	strata_pool_config c = STRATA_POOL_CONFIG_INIT;
	strata_arena *a = (strata_arena *)1;
	strata_host_pool *p = (strata_host_pool *)1;
	ck_assert_int_eq(strata_arena_create(d, &c, &a), -EINVAL); /* page_bytes 0 */
	ck_assert_ptr_null(a);
	ck_assert_int_eq(strata_host_pool_create(d, &c, &p), -EINVAL);
	ck_assert_ptr_null(p);
	c.page_bytes = 64;
	ck_assert_int_eq(strata_arena_create(d, &c, &a), -EINVAL); /* capacity 0 */
	c.capacity_pages = 4;
	ck_assert_int_eq(strata_arena_create(NULL, &c, &a), -EINVAL);
	ck_assert_int_eq(strata_arena_create(d, NULL, &a), -EINVAL);
	ck_assert_int_eq(strata_host_pool_create(d, &c, NULL), -EINVAL);
	strata_pool_config old = c;
	old.size = 8; /* an older, smaller struct */
	ck_assert_int_eq(strata_host_pool_create(d, &old, &p), -EINVAL);
	ck_assert_int_eq(strata_host_pool_create(d, &c, &p), 0);
	strata_page_handle h;
	ck_assert_int_eq(strata_host_pool_alloc(p, 0, &h), -EINVAL);
	ck_assert_int_eq(strata_host_pool_alloc(p, 1, NULL), -EINVAL);
	ck_assert_int_eq(strata_host_pool_alloc(NULL, 1, &h), -EINVAL);
	strata_tier_stats st = { .size = 4 };
	ck_assert_int_eq(strata_host_pool_stats(p, &st), -EINVAL);
	strata_host_pool_destroy(p);
	ck_assert_str_eq(strata_tier_name(STRATA_TIER_NVME), "nvme");
	ck_assert_str_eq(strata_host_mem_name(STRATA_HOST_MEM_HUGETLB), "hugetlb");
	strata_dev_close(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tiers_pool");
	TCase *t = tcase_create("pool");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, host_alloc_free);
	tcase_add_test(t, host_budget_capacity);
	tcase_add_test(t, host_checksum);
	tcase_add_test(t, host_inject_loop);
	tcase_add_test(t, arena_basics);
	tcase_add_test(t, bad_args);
	suite_add_tcase(s, t);
	return tu_run(s);
}
