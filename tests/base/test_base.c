/* base/: model presets and schedules, the FORMATS.md section 6 size table, count
 * parsing and error names. */
#include <errno.h>

#include "testutil.h"
#include "base/base.h"

START_TEST(flash_schedule)
{
	strata_model m = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset("flash", &m), 0);
	ck_assert_int_eq(strata_model_validate(&m), 0);
	ck_assert_int_eq(m.n_layers, 43);
	ck_assert_int_eq(strata_model_count(&m, 0), 2);
	ck_assert_int_eq(strata_model_count(&m, 4), 21);
	ck_assert_int_eq(strata_model_count(&m, 128), 20);
	ck_assert_int_eq(m.ratio[2], 4);
	ck_assert_int_eq(m.ratio[41], 128);
	ck_assert_int_eq(m.ratio[42], 4);
	ck_assert_int_eq(m.index_topk, 512);
}
END_TEST

START_TEST(pro_schedule)
{
	strata_model m = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset("pro", &m), 0);
	ck_assert_int_eq(strata_model_validate(&m), 0);
	ck_assert_int_eq(m.n_layers, 61);
	ck_assert_int_eq(strata_model_count(&m, 4), 30);
	ck_assert_int_eq(strata_model_count(&m, 128), 31);
	ck_assert_int_eq(strata_model_count(&m, 0), 0);
	ck_assert_int_eq(m.index_topk, 1024);
	ck_assert_int_eq(m.n_heads, 128);
}
END_TEST

/* FORMATS.md section 6: V4-Flash at 1M tokens. */
START_TEST(flash_sizes_1m)
{
	strata_model m = STRATA_MODEL_INIT;
	strata_sizes s;
	ck_assert_int_eq(strata_model_preset("flash", &m), 0);
	strata_model_sizes(&m, 1u << 20, &s);
	ck_assert_uint_eq(s.c4_entries, 262144);
	ck_assert_uint_eq(s.c128_entries, 8192);
	ck_assert_uint_eq(s.c4_main_bytes, 3214934016ull);      /* 3.0 GiB */
	ck_assert_uint_eq(s.c4_index_bytes, 374341632ull);      /* 357 MiB */
	ck_assert_uint_eq(s.c128_main_bytes, 95682560ull);      /* 91 MiB */
	ck_assert_uint_eq(s.window_bytes, 3214336ull);          /* 3 MiB */
	ck_assert_uint_eq(s.total_bytes, 3688172544ull);        /* ~3.44 GiB */
	ck_assert_int_eq((int)(s.c4_main_bytes / (1024.0 * 1024 * 1024) * 10 + 0.5), 30);
	ck_assert_int_eq((int)(s.c4_index_bytes / (1024.0 * 1024) + 0.5), 357);
	ck_assert_int_eq((int)(s.c128_main_bytes / (1024.0 * 1024) + 0.5), 91);
	ck_assert_int_eq((int)(s.total_bytes / (1024.0 * 1024 * 1024) * 100 + 0.5), 343);
	ck_assert_uint_eq(s.device_offloaded, s.total_bytes - s.c4_main_bytes);
}
END_TEST

START_TEST(pro_sizes_1m)
{
	strata_model m = STRATA_MODEL_INIT;
	strata_sizes s;
	ck_assert_int_eq(strata_model_preset("pro", &m), 0);
	strata_model_sizes(&m, 1u << 20, &s);
	/* ~4.92 GiB by FORMATS.md section 6. */
	double gib = s.total_bytes / (1024.0 * 1024 * 1024);
	ck_assert(gib > 4.90 && gib < 4.95);
}
END_TEST

START_TEST(schedules)
{
	strata_model m = STRATA_MODEL_INIT;
	ck_assert_int_eq(strata_model_preset("flash", &m), 0);
	uint64_t f0 = strata_model_fingerprint(&m);
	ck_assert_int_eq(strata_model_set_schedule(&m, "0,4,128,4"), 0);
	ck_assert_int_eq(m.n_layers, 4);
	ck_assert_int_eq(m.ratio[2], 128);
	ck_assert_int_eq(strata_model_validate(&m), 0);
	ck_assert_uint_ne(strata_model_fingerprint(&m), f0);
	ck_assert_int_eq(strata_model_set_schedule(&m, "0,5"), -EINVAL);
	ck_assert_int_eq(strata_model_set_schedule(&m, ""), -EINVAL);
	ck_assert_int_eq(strata_model_set_schedule(&m, "4,,4"), -EINVAL);
	ck_assert_int_eq(strata_model_set_schedule(&m, "4x"), -EINVAL);
	ck_assert_int_eq(m.n_layers, 4); /* failed calls change nothing */
	ck_assert_int_eq(strata_model_preset("nope", &m), -EINVAL);
	strata_model bad = m;
	bad.index_topk = 0;
	ck_assert_int_eq(strata_model_validate(&bad), -EINVAL);
	bad = m;
	bad.size = 0;
	ck_assert_int_eq(strata_model_validate(&bad), -EINVAL);
}
END_TEST

START_TEST(parse_count)
{
	uint64_t v;
	ck_assert_int_eq(strata_parse_count("128K", &v), 0);
	ck_assert_uint_eq(v, 131072);
	ck_assert_int_eq(strata_parse_count("1M", &v), 0);
	ck_assert_uint_eq(v, 1048576);
	ck_assert_int_eq(strata_parse_count("4096", &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(strata_parse_count("2g", &v), 0);
	ck_assert_uint_eq(v, 2ull << 30);
	ck_assert_int_eq(strata_parse_count("1MB", &v), -EINVAL);
	ck_assert_int_eq(strata_parse_count("-1", &v), -EINVAL);
	ck_assert_int_eq(strata_parse_count("", &v), -EINVAL);
	ck_assert_int_eq(strata_parse_count("99999999999999999999", &v), -EINVAL);
}
END_TEST

START_TEST(errors)
{
	ck_assert_str_eq(strata_strerror(0), "success");
	ck_assert_str_eq(strata_strerror(-ENOENT), strerror(ENOENT));
	for (int e = STRATA_E_LAST; e <= STRATA_E_FIRST; e++)
		ck_assert_str_ne(strata_strerror(e), "unknown error");
	ck_assert_str_eq(strata_strerror(-123456), "unknown error");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("base");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, flash_schedule);
	tcase_add_test(tc, pro_schedule);
	tcase_add_test(tc, flash_sizes_1m);
	tcase_add_test(tc, pro_sizes_1m);
	tcase_add_test(tc, schedules);
	tcase_add_test(tc, parse_count);
	tcase_add_test(tc, errors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
