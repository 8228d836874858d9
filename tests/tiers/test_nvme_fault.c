/* tiers: fault injection at every seam of the NVMe store. For each seam and error, loop
 * "fail the Nth event" for N = 0, 1, 2, ... until the operation completes untouched;
 * each time check the error is the one injected, nothing leaked, and the records
 * written before (A, B) read back intact. */
#include "nvme_testutil.h"

#define A_SEED 11
#define B_SEED 12
#define C_SEED 13
#define C_LEN 37440

typedef struct {
	strata_nvme_store *s;
	strata_page_handle a, b;
	uint64_t base_used;
} world;

static void world_open(world *w)
{
	w->s = nt_open(4 << 20, 4, STRATA_NVME_CREATE);
	uint8_t buf[9000];
	nt_fill(buf, 9000, A_SEED);
	ck_assert_int_eq(strata_nvme_write(w->s, NULL, buf, 9000, &w->a), 0);
	nt_fill(buf, 5000, B_SEED);
	ck_assert_int_eq(strata_nvme_write(w->s, NULL, buf, 5000, &w->b), 0);
	ck_assert_int_eq(strata_nvme_sync(w->s), 0);
	w->base_used = nt_stats(w->s).used_bytes;
}

/* What a failed step may return under an injected err. */
static void expect_err(int got, int injected)
{
	int want = injected == STRATA_FAULT_SHORT ? STRATA_E_SHORTIO : injected;
	ck_assert_msg(got == want, "got %s, want %s", strata_strerror(got), strata_strerror(want));
}

static void check_world(world *w)
{
	nt_check(w->s, &w->a, A_SEED);
	nt_check(w->s, &w->b, B_SEED);
}

/* The operation under test: write C, sync, read C back, verify, free C. Returns 0 or the
 * first error; leaves no record of its own behind either way. */
static bool op_aligned; /* page-aligned buffers: the zero-copy path */

static int operation(world *w)
{
	uint8_t *c, *back;
	if (op_aligned) {
		ck_assert_int_eq(posix_memalign((void **)&c, 4096, C_LEN), 0);
		ck_assert_int_eq(posix_memalign((void **)&back, 4096, C_LEN), 0);
	} else {
		c = malloc(C_LEN);
		back = malloc(C_LEN);
	}
	nt_fill(c, C_LEN, C_SEED);
	strata_page_handle h;
	int err = strata_nvme_write(w->s, NULL, c, C_LEN, &h);
	if (err) {
		ck_assert_uint_eq(h.tier, STRATA_TIER_NONE);
		goto out;
	}
	if ((err = strata_nvme_sync(w->s)))
		goto out_free;
	memset(back, 0xaa, C_LEN);
	if ((err = strata_nvme_read(w->s, &h, back, C_LEN))) {
		for (int i = 0; i < C_LEN; i += 97)
			ck_assert_uint_eq(back[i], 0); /* zeroed, not the suspect bytes */
		goto out_free;
	}
	ck_assert(memcmp(c, back, C_LEN) == 0);
	err = strata_nvme_verify(w->s, &h, NULL);
out_free:
	ck_assert_int_eq(strata_nvme_free(w->s, &h), 0);
out:
	free(c);
	free(back);
	return err;
}

static void fault_loop(strata_fault_site site, int inj, int min_events)
{
	world w;
	world_open(&w);
	int n;
	for (n = 0; n < 100; n++) {
		ck_assert_int_eq(strata_nvme_inject(w.s, site, n, inj), 0);
		uint64_t fired = nt_stats(w.s).faults_fired;
		int err = operation(&w);
		bool hit = nt_stats(w.s).faults_fired != fired;
		ck_assert_int_eq(strata_nvme_inject(w.s, site, -1, 0), 0); /* disarm */
		if (err)
			expect_err(err, inj);
		ck_assert_msg(hit == (err != 0), "n=%d: fault fired %d, op returned %s", n, hit,
			      strata_strerror(err));
		ck_assert_uint_eq(nt_stats(w.s).used_bytes, w.base_used); /* no leak */
		ck_assert_int_eq(strata_nvme_inflight(w.s), 0);
		check_world(&w);
		if (!err)
			break;
	}
	ck_assert_int_ge(n, min_events); /* the loop did reach the seam */
	ck_assert_int_lt(n, 100);
	strata_tier_stats st = nt_stats(w.s);
	ck_assert_uint_eq(st.faults_fired, (uint64_t)n);
	ck_assert_int_eq(operation(&w), 0);
	strata_nvme_destroy(w.s);
}

/* write, sync, read, verify: four submissions and four completions; one allocation */
START_TEST(submit_eio) { fault_loop(STRATA_FAULT_SUBMIT, -EIO, 4); }
END_TEST
START_TEST(submit_enospc) { fault_loop(STRATA_FAULT_SUBMIT, -ENOSPC, 4); }
END_TEST
START_TEST(complete_eio) { fault_loop(STRATA_FAULT_COMPLETE, -EIO, 4); }
END_TEST
START_TEST(complete_enospc) { fault_loop(STRATA_FAULT_COMPLETE, -ENOSPC, 4); }
END_TEST
START_TEST(complete_short) { fault_loop(STRATA_FAULT_COMPLETE, STRATA_FAULT_SHORT, 4); }
END_TEST
/* the same seams on the zero-copy path (READV/WRITEV into the caller's buffer) */
START_TEST(aligned_complete_eio)
{
	op_aligned = true;
	fault_loop(STRATA_FAULT_COMPLETE, -EIO, 4);
}
END_TEST

START_TEST(aligned_complete_short)
{
	op_aligned = true;
	fault_loop(STRATA_FAULT_COMPLETE, STRATA_FAULT_SHORT, 4);
}
END_TEST

START_TEST(aligned_submit_eio)
{
	op_aligned = true;
	fault_loop(STRATA_FAULT_SUBMIT, -EIO, 4);
}
END_TEST

START_TEST(alloc_enospc) { fault_loop(STRATA_FAULT_ALLOC, -ENOSPC, 1); }
END_TEST

/* A batch of 8 writes with the Nth completion failing: exactly one op fails, the others
 * are readable, the failed one's extent is free again. */
START_TEST(batch_faults)
{
	world w;
	world_open(&w);
	enum { N = 8 };
	static const int errs[] = { -EIO, STRATA_FAULT_SHORT, -ENOSPC };
	for (int e = 0; e < 3; e++) {
		for (int nth = 0; nth < N; nth++) {
			strata_nvme_op ops[N], *ptr[N], *done[N];
			uint8_t *bufs[N];
			strata_fault_site site = e == 2 ? STRATA_FAULT_ALLOC : STRATA_FAULT_COMPLETE;
			ck_assert_int_eq(strata_nvme_inject(w.s, site, nth, errs[e]), 0);
			for (int i = 0; i < N; i++) {
				bufs[i] = malloc(6000);
				nt_fill(bufs[i], 6000, 100 + i);
				ops[i] = (strata_nvme_op){ .kind = STRATA_NVME_OP_WRITE, .buf = bufs[i],
							   .len = 6000, .user = i };
				ptr[i] = &ops[i];
			}
			int sub = 0, got = 0, failed = 0;
			while (got < N) {
				if (sub < N) {
					int r = strata_nvme_submit(w.s, ptr + sub, N - sub);
					ck_assert_int_ge(r, 0);
					sub += r;
				}
				int r = strata_nvme_reap(w.s, 1, done, N);
				ck_assert_int_ge(r, 1);
				got += r;
			}
			for (int i = 0; i < N; i++) {
				if (ops[i].result) {
					expect_err(ops[i].result, errs[e]);
					ck_assert_uint_eq(ops[i].handle.tier, STRATA_TIER_NONE);
					failed++;
					continue;
				}
				nt_check(w.s, &ops[i].handle, 100 + i);
				ck_assert_int_eq(strata_nvme_free(w.s, &ops[i].handle), 0);
			}
			ck_assert_int_eq(failed, 1);
			ck_assert_uint_eq(nt_stats(w.s).used_bytes, w.base_used);
			check_world(&w);
			for (int i = 0; i < N; i++)
				free(bufs[i]);
		}
	}
	strata_nvme_destroy(w.s);
}
END_TEST

/* Scan with a failing read: the error comes back, the store goes on. */
START_TEST(scan_fault)
{
	world w;
	world_open(&w);
	ck_assert_int_eq(strata_nvme_inject(w.s, STRATA_FAULT_COMPLETE, 2, -EIO), 0);
	int count = 0;
	ck_assert_int_eq(strata_nvme_scan(w.s, NULL, &count), -EINVAL);
	strata_nvme_destroy(w.s);
}
END_TEST

static int count_cb(void *arg, const strata_page_key *k, const strata_page_handle *h)
{
	(*(int *)arg)++;
	return 0;
}

START_TEST(scan_fault_eio)
{
	world w;
	world_open(&w);
	ck_assert_int_eq(strata_nvme_inject(w.s, STRATA_FAULT_COMPLETE, 1, -EIO), 0);
	int count = 0;
	ck_assert_int_eq(strata_nvme_scan(w.s, count_cb, &count), -EIO);
	ck_assert_int_eq(count, 2); /* the first 1 MiB chunk held A and B */
	count = 0;
	ck_assert_int_eq(strata_nvme_scan(w.s, count_cb, &count), 0);
	ck_assert_int_eq(count, 2);
	check_world(&w);
	strata_nvme_destroy(w.s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tiers_nvme_fault");
	TCase *t = tcase_create("fault");
	tcase_add_checked_fixture(t, nt_setup, nt_teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, submit_eio);
	tcase_add_test(t, submit_enospc);
	tcase_add_test(t, complete_eio);
	tcase_add_test(t, complete_enospc);
	tcase_add_test(t, complete_short);
	tcase_add_test(t, alloc_enospc);
	tcase_add_test(t, batch_faults);
	tcase_add_test(t, aligned_complete_eio);
	tcase_add_test(t, aligned_complete_short);
	tcase_add_test(t, aligned_submit_eio);
	tcase_add_test(t, scan_fault);
	tcase_add_test(t, scan_fault_eio);
	suite_add_tcase(s, t);
	return tu_run(s);
}
