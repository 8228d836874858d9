/* tiers: full-queue batches through the NVMe store's paced I/O path. One submit call of a
 * whole queue enters the kernel in chunks (every few ops or 256 KiB), and reap hands
 * completions back a few at a time while the device runs low, leaving the rest in the
 * CQ. Whatever the pacing, every op of a batch must come back exactly once and verified,
 * reap's min must still be honoured, and a fault at the Nth submission, completion or
 * allocation must land on exactly one op of a batch while the others read back intact.
 * The batch mixes staged (unaligned, small) and zero-copy (aligned) records, some past
 * the 256 KiB submit threshold together. */
#include "nvme_testutil.h"

#include <string.h>

enum { QD = 64, N = 64 };

typedef struct {
	strata_nvme_store *s;
	strata_nvme_op ops[N];
	strata_nvme_op *ptr[N];
	uint8_t *src_mem[N], *dst_mem[N];
	uint8_t *src[N], *dst[N];
	size_t len[N];
	strata_page_handle h[N];
} batch;

/* Four shapes: staged 1000 B at an odd address, 3000 B aligned (one block, staged
 * tail only), 12000 B aligned (two blocks direct), 70000 B aligned (17 blocks direct;
 * four of them pass the byte threshold of a submit chunk). */
static size_t len_of(int i)
{
	static const size_t lens[4] = { 1000, 3000, 12000, 70000 };
	return lens[i % 4];
}

static void batch_open(batch *b)
{
	memset(b, 0, sizeof *b);
	b->s = nt_open(64u << 20, QD, STRATA_NVME_CREATE);
	for (int i = 0; i < N; i++) {
		b->len[i] = len_of(i);
		size_t bytes = b->len[i] + 4096;
		ck_assert_int_eq(posix_memalign((void **)&b->src_mem[i], 4096, bytes), 0);
		ck_assert_int_eq(posix_memalign((void **)&b->dst_mem[i], 4096, bytes), 0);
		size_t skew = i % 4 == 0 ? 1 : 0;
		b->src[i] = b->src_mem[i] + skew;
		b->dst[i] = b->dst_mem[i] + skew;
		nt_fill(b->src[i], b->len[i], 900 + (uint64_t)i);
		b->ptr[i] = &b->ops[i];
	}
}

static void batch_close(batch *b)
{
	for (int i = 0; i < N; i++) {
		free(b->src_mem[i]);
		free(b->dst_mem[i]);
	}
	strata_nvme_destroy(b->s);
}

/* Submit the whole batch in one call (a full queue takes it all), then reap with min
 * until every op is back; each op must come back exactly once. */
static void run_batch(batch *b, int min)
{
	ck_assert_int_eq(strata_nvme_submit(b->s, b->ptr, N), N);
	int seen[N] = { 0 }, got = 0;
	strata_nvme_op *done[N];
	while (got < N) {
		int want = min < N - got ? min : N - got;
		int r = strata_nvme_reap(b->s, want, done, N);
		ck_assert_int_ge(r, want);
		ck_assert_int_ge(r, 1);
		for (int j = 0; j < r; j++)
			seen[done[j]->user]++;
		got += r;
	}
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(seen[i], 1);
	ck_assert_int_eq(strata_nvme_inflight(b->s), 0);
	ck_assert_int_eq(strata_nvme_reap(b->s, 0, done, N), 0);
}

static void write_batch(batch *b, int min)
{
	for (int i = 0; i < N; i++)
		b->ops[i] = (strata_nvme_op){ .kind = STRATA_NVME_OP_WRITE,
					      .key = { (uint64_t)i, 77 }, .buf = b->src[i],
					      .len = b->len[i], .result = 1, .user = (uint64_t)i };
	run_batch(b, min);
	for (int i = 0; i < N; i++)
		b->h[i] = b->ops[i].handle;
}

static void read_batch(batch *b, int min)
{
	for (int i = 0; i < N; i++) {
		memset(b->dst[i], 0xee, b->len[i]);
		b->ops[i] = (strata_nvme_op){ .kind = STRATA_NVME_OP_READ, .buf = b->dst[i],
					      .len = b->len[i], .handle = b->h[i], .result = 1,
					      .user = (uint64_t)i };
	}
	run_batch(b, min);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* Every op but those flagged in bad[] succeeded and read back its payload and key. */
static void expect_good(batch *b, const bool *bad)
{
	for (int i = 0; i < N; i++) {
		if (bad && bad[i])
			continue;
		ck_assert_msg(b->ops[i].result == 0, "op %d: %s", i,
			      strata_strerror(b->ops[i].result));
		if (b->ops[i].kind == STRATA_NVME_OP_READ) {
			ck_assert(memcmp(b->dst[i], b->src[i], b->len[i]) == 0);
			ck_assert_uint_eq(b->ops[i].key.lo, (uint64_t)i);
			ck_assert_uint_eq(b->ops[i].key.hi, 77);
		}
	}
}

START_TEST(full_queue_batches)
{
	batch b;
	batch_open(&b);
	write_batch(&b, N); /* min = the whole batch: one reap returns all of it */
	expect_good(&b, NULL);
	uint64_t used = 0;
	for (int i = 0; i < N; i++)
		used += strata_nvme_record_bytes(b.len[i]);
	ck_assert_uint_eq(nt_stats(b.s).used_bytes, used);
	read_batch(&b, 1); /* min 1: completions come back in pieces */
	expect_good(&b, NULL);
	read_batch(&b, N);
	expect_good(&b, NULL);
	read_batch(&b, 5);
	expect_good(&b, NULL);
	strata_tier_stats st = nt_stats(b.s);
	ck_assert_uint_eq(st.reads, 3 * N);
	ck_assert_uint_eq(st.writes, N);
	ck_assert_uint_eq(st.checksum_failures, 0);
	batch_close(&b);
}
END_TEST

/* The Nth submission of a batch fails before its SQE exists; nth spans the first chunk,
 * chunk boundaries and the last op. */
START_TEST(submit_fault_in_batch)
{
	batch b;
	batch_open(&b);
	write_batch(&b, 1);
	expect_good(&b, NULL);
	static const int nths[] = { 0, 1, 3, 4, 5, 17, 63 };
	for (size_t k = 0; k < sizeof nths / sizeof nths[0]; k++) {
		int nth = nths[k];
		uint64_t fired = nt_stats(b.s).faults_fired;
		ck_assert_int_eq(strata_nvme_inject(b.s, STRATA_FAULT_SUBMIT, nth, -EIO), 0);
		read_batch(&b, 1);
		bool bad[N] = { false };
		bad[nth] = true;
		ck_assert_int_eq(b.ops[nth].result, -EIO);
		ck_assert(all_zero(b.dst[nth], b.len[nth]));
		expect_good(&b, bad);
		ck_assert_uint_eq(nt_stats(b.s).faults_fired, fired + 1);
	}
	/* a write batch: the failed op holds no extent afterwards */
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(strata_nvme_free(b.s, &b.h[i]), 0);
	ck_assert_int_eq(strata_nvme_inject(b.s, STRATA_FAULT_SUBMIT, 6, -EIO), 0);
	write_batch(&b, 1);
	bool bad[N] = { false };
	bad[6] = true;
	ck_assert_int_eq(b.ops[6].result, -EIO);
	ck_assert_uint_eq(b.h[6].tier, STRATA_TIER_NONE);
	expect_good(&b, bad);
	uint64_t used = 0;
	for (int i = 0; i < N; i++)
		used += i == 6 ? 0 : strata_nvme_record_bytes(b.len[i]);
	ck_assert_uint_eq(nt_stats(b.s).used_bytes, used);
	batch_close(&b);
}
END_TEST

/* The Nth completion of a read batch reports an error or a short transfer: exactly one
 * op fails (which one depends on completion order), its buffer is zeroed. */
START_TEST(complete_fault_in_batch)
{
	batch b;
	batch_open(&b);
	write_batch(&b, 1);
	static const int nths[] = { 0, 3, 4, 5, 40, 63 };
	for (size_t k = 0; k < sizeof nths / sizeof nths[0]; k++) {
		int inj = k % 2 ? STRATA_FAULT_SHORT : -EIO;
		int want = inj == STRATA_FAULT_SHORT ? STRATA_E_SHORTIO : inj;
		ck_assert_int_eq(strata_nvme_inject(b.s, STRATA_FAULT_COMPLETE, nths[k], inj), 0);
		read_batch(&b, 1);
		bool bad[N] = { false };
		int failed = 0;
		for (int i = 0; i < N; i++) {
			if (!b.ops[i].result)
				continue;
			ck_assert_int_eq(b.ops[i].result, want);
			ck_assert(all_zero(b.dst[i], b.len[i]));
			bad[i] = true;
			failed++;
		}
		ck_assert_int_eq(failed, 1);
		expect_good(&b, bad);
	}
	/* the records themselves are fine: a clean batch reads them all */
	read_batch(&b, N);
	expect_good(&b, NULL);
	batch_close(&b);
}
END_TEST

/* The Nth allocation of a write batch fails: that op alone, with no extent held. */
START_TEST(alloc_fault_in_batch)
{
	batch b;
	batch_open(&b);
	static const int nths[] = { 0, 4, 33, 63 };
	for (size_t k = 0; k < sizeof nths / sizeof nths[0]; k++) {
		int nth = nths[k];
		ck_assert_int_eq(strata_nvme_inject(b.s, STRATA_FAULT_ALLOC, nth, -ENOSPC), 0);
		write_batch(&b, 1);
		bool bad[N] = { false };
		bad[nth] = true;
		ck_assert_int_eq(b.ops[nth].result, -ENOSPC);
		ck_assert_uint_eq(b.h[nth].tier, STRATA_TIER_NONE);
		expect_good(&b, bad);
		uint64_t used = 0;
		for (int i = 0; i < N; i++)
			used += i == nth ? 0 : strata_nvme_record_bytes(b.len[i]);
		ck_assert_uint_eq(nt_stats(b.s).used_bytes, used);
		for (int i = 0; i < N; i++)
			if (i != nth)
				ck_assert_int_eq(strata_nvme_free(b.s, &b.h[i]), 0);
		ck_assert_uint_eq(nt_stats(b.s).used_bytes, 0);
	}
	batch_close(&b);
}
END_TEST

/* Damaged records inside a full batch: a payload byte of a zero-copy record, a trailer
 * byte of another, a payload byte of a staged one. Those three fail, zeroed; the other
 * ops of the same batch are delivered intact. */
START_TEST(corrupt_in_batch)
{
	batch b;
	batch_open(&b);
	write_batch(&b, 1);
	ck_assert_int_eq(strata_nvme_sync(b.s), 0);
	nt_flip(b.h[7].location + 30000);                       /* 70000 B, direct part */
	nt_flip(b.h[10].location + strata_nvme_record_bytes(b.len[10]) - 40); /* trailer */
	nt_flip(b.h[12].location + 500);                        /* 1000 B, staged */
	read_batch(&b, 1);
	bool bad[N] = { false };
	bad[7] = bad[10] = bad[12] = true;
	ck_assert_int_eq(b.ops[7].result, STRATA_E_CHECKSUM);
	ck_assert_int_eq(b.ops[10].result, STRATA_E_CORRUPT);
	ck_assert_int_eq(b.ops[12].result, STRATA_E_CHECKSUM);
	for (int i = 0; i < N; i++)
		if (bad[i])
			ck_assert(all_zero(b.dst[i], b.len[i]));
	expect_good(&b, bad);
	ck_assert_uint_eq(nt_stats(b.s).checksum_failures, 3);
	batch_close(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tiers_nvme_batch");
	TCase *t = tcase_create("batch");
	tcase_add_checked_fixture(t, nt_setup, nt_teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, full_queue_batches);
	tcase_add_test(t, submit_fault_in_batch);
	tcase_add_test(t, complete_fault_in_batch);
	tcase_add_test(t, alloc_fault_in_batch);
	tcase_add_test(t, corrupt_in_batch);
	suite_add_tcase(s, t);
	return tu_run(s);
}
