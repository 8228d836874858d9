/* tiers: the NVMe store: write/read/verify at many sizes, batches, reopen with
 * mark_live, scan, corruption, ENOSPC and budgets, bad arguments. */
#include "nvme_testutil.h"

#define MB (1024 * 1024)

START_TEST(write_read_sizes)
{
	strata_nvme_store *s = nt_open(16 * MB, 8, STRATA_NVME_CREATE);
	strata_nvme_info info = STRATA_NVME_INFO_INIT;
	ck_assert_int_eq(strata_nvme_get_info(s, &info), 0);
	printf("store: direct %d, registered buffers %d, file %d\n", info.direct,
	       info.registered_buffers, info.registered_file);
	ck_assert_uint_eq(info.capacity_bytes, 16 * MB - 4096);
	ck_assert(!info.recovering);
	static const size_t sizes[] = { 1, 63, 64, 4031, 4032, 4033, 4096, 8192, 37440,
					256 * 1024 - 64, 256 * 1024, MB + 5000 };
	enum { N = sizeof sizes / sizeof sizes[0] };
	strata_page_handle h[N];
	uint64_t disk = 0, payload = 0;
	for (int i = 0; i < N; i++) {
		uint8_t *b = malloc(sizes[i]);
		nt_fill(b, sizes[i], 100 + i);
		strata_page_key k = { (uint64_t)i, ~(uint64_t)i };
		ck_assert_int_eq(strata_nvme_write(s, &k, b, sizes[i], &h[i]), 0);
		ck_assert_uint_eq(h[i].tier, STRATA_TIER_NVME);
		ck_assert_uint_eq(h[i].length, sizes[i]);
		ck_assert_uint_eq(h[i].location % 4096, 0);
		ck_assert_uint_eq(h[i].checksum, strata_page_checksum(b, sizes[i]));
		disk += strata_nvme_record_bytes(sizes[i]);
		payload += sizes[i];
		free(b);
	}
	ck_assert_uint_eq(strata_nvme_record_bytes(4032), 4096);
	ck_assert_uint_eq(strata_nvme_record_bytes(4033), 8192);
	ck_assert_uint_eq(strata_nvme_record_bytes(37440), 40960);
	for (int i = 0; i < N; i++) {
		nt_check(s, &h[i], 100 + i);
		strata_page_key k;
		ck_assert_int_eq(strata_nvme_verify(s, &h[i], &k), 0);
		ck_assert_uint_eq(k.lo, (uint64_t)i);
		ck_assert_uint_eq(k.hi, ~(uint64_t)i);
	}
	/* a bigger buffer than the record is fine; only length bytes are written */
	uint8_t *big = malloc(8192);
	memset(big, 0xee, 8192);
	ck_assert_int_eq(strata_nvme_read(s, &h[0], big, 8192), 0);
	ck_assert_uint_eq(big[1], 0xee);
	free(big);
	strata_tier_stats st = nt_stats(s);
	ck_assert_uint_eq(st.pages, N);
	ck_assert_uint_eq(st.writes, N);
	ck_assert_uint_eq(st.reads, 2 * N + 1);
	ck_assert_uint_eq(st.used_bytes, disk);
	ck_assert_uint_eq(st.bytes_in, payload);
	ck_assert_uint_eq(st.checksum_failures, 0);
	ck_assert_int_eq(strata_nvme_sync(s), 0);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(strata_nvme_free(s, &h[i]), 0);
	st = nt_stats(s);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_eq(st.pages, 0);
	ck_assert_uint_eq(st.frees, N);
	ck_assert_int_eq(strata_nvme_get_info(s, &info), 0);
	ck_assert_uint_eq(info.free_extents, 1); /* coalesced back into one */
	ck_assert_uint_eq(info.largest_free, 16 * MB - 4096);
	strata_nvme_destroy(s);
	strata_nvme_destroy(NULL);
}
END_TEST

START_TEST(buffered_mode)
{
	strata_nvme_store *s = nt_open(MB, 4, STRATA_NVME_CREATE | STRATA_NVME_BUFFERED |
						     STRATA_NVME_NO_REGISTER);
	strata_nvme_info info = STRATA_NVME_INFO_INIT;
	ck_assert_int_eq(strata_nvme_get_info(s, &info), 0);
	ck_assert(!info.direct && !info.registered_buffers && !info.registered_file);
	uint8_t b[5000];
	nt_fill(b, sizeof b, 9);
	strata_page_handle h;
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, sizeof b, &h), 0);
	nt_check(s, &h, 9);
	strata_nvme_destroy(s);
}
END_TEST

START_TEST(batched)
{
	enum { N = 100 };
	strata_nvme_store *s = nt_open(32 * MB, 8, STRATA_NVME_CREATE);
	strata_nvme_op ops[N], *ptr[N], *done[N];
	uint8_t *bufs[N];
	for (int i = 0; i < N; i++) {
		size_t len = 1000 + (size_t)i * 997;
		bufs[i] = malloc(len);
		nt_fill(bufs[i], len, 500 + i);
		ops[i] = (strata_nvme_op){ .kind = STRATA_NVME_OP_WRITE, .key = { (uint64_t)i, 7 },
					   .buf = bufs[i], .len = len, .result = 1, .user = i };
		ptr[i] = &ops[i];
	}
	/* submit as much as the queue takes, reap, repeat */
	int sub = 0, reaped = 0, seen[N] = { 0 };
	while (reaped < N) {
		if (sub < N) {
			int r = strata_nvme_submit(s, ptr + sub, N - sub);
			ck_assert_int_ge(r, 0);
			ck_assert_int_le(strata_nvme_inflight(s), 8 + (N - reaped));
			sub += r;
		}
		int r = strata_nvme_reap(s, 1, done, N);
		ck_assert_int_ge(r, 1);
		for (int j = 0; j < r; j++) {
			ck_assert_int_eq(done[j]->result, 0);
			seen[done[j]->user]++;
		}
		reaped += r;
	}
	ck_assert_int_eq(strata_nvme_inflight(s), 0);
	ck_assert_int_eq(strata_nvme_reap(s, 0, done, N), 0);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(seen[i], 1);
	/* read them all back in one batch, into fresh buffers */
	for (int i = 0; i < N; i++) {
		strata_page_handle h = ops[i].handle;
		ops[i] = (strata_nvme_op){ .kind = STRATA_NVME_OP_READ, .buf = calloc(1, h.length),
					   .len = h.length, .handle = h, .result = 1, .user = i };
	}
	sub = reaped = 0;
	while (reaped < N) {
		if (sub < N)
			sub += strata_nvme_submit(s, ptr + sub, N - sub);
		int r = strata_nvme_reap(s, 1, done, N);
		ck_assert_int_ge(r, 1);
		for (int j = 0; j < r; j++) {
			strata_nvme_op *o = done[j];
			ck_assert_int_eq(o->result, 0);
			ck_assert_uint_eq(o->key.lo, o->user);
			ck_assert(memcmp(o->buf, bufs[o->user], o->handle.length) == 0);
		}
		reaped += r;
	}
	/* a synchronous call in the middle of a batch leaves the batch's completions queued */
	ops[0].result = 1;
	ck_assert_int_eq(strata_nvme_submit(s, ptr, 1), 1);
	nt_check(s, &ops[1].handle, 501);
	ck_assert_int_eq(strata_nvme_reap(s, 1, done, N), 1);
	ck_assert_ptr_eq(done[0], &ops[0]);
	ck_assert_int_eq(ops[0].result, 0);
	for (int i = 0; i < N; i++) {
		free(ops[i].buf);
		free(bufs[i]);
	}
	strata_nvme_destroy(s);
}
END_TEST

struct scan_seen {
	int n;
	uint64_t loc[16];
	uint64_t key[16];
};

static int scan_cb(void *arg, const strata_page_key *k, const strata_page_handle *h)
{
	struct scan_seen *ss = arg;
	if (ss->n < 16) {
		ss->loc[ss->n] = h->location;
		ss->key[ss->n] = k->lo;
	}
	ss->n++;
	return 0;
}

static int stop_cb(void *arg, const strata_page_key *k, const strata_page_handle *h)
{
	return 42;
}

START_TEST(reopen_mark_live)
{
	strata_nvme_store *s = nt_open(4 * MB, 4, STRATA_NVME_CREATE);
	strata_page_handle h[4];
	uint8_t b[30000];
	for (int i = 0; i < 4; i++) {
		nt_fill(b, sizeof b, 40 + i);
		strata_page_key k = { 1000 + (uint64_t)i, 0 };
		ck_assert_int_eq(strata_nvme_write(s, &k, b, sizeof b, &h[i]), 0);
	}
	ck_assert_int_eq(strata_nvme_sync(s), 0);
	strata_nvme_destroy(s);

	/* REUSE without CREATE on a missing store fails; on this one it recovers */
	strata_nvme_config c = STRATA_NVME_CONFIG_INIT;
	c.path = nt_path;
	c.flags = STRATA_NVME_REUSE;
	c.queue_depth = 4;
	c.capacity_bytes = 8 * MB; /* not what the store was made with */
	ck_assert_int_eq(strata_nvme_open(&c, &s), STRATA_E_FORMAT);
	c.capacity_bytes = 0;
	ck_assert_int_eq(strata_nvme_open(&c, &s), 0);
	strata_nvme_info info = STRATA_NVME_INFO_INIT;
	ck_assert_int_eq(strata_nvme_get_info(s, &info), 0);
	ck_assert(info.recovering);
	ck_assert_uint_eq(info.capacity_bytes, 4 * MB - 4096);
	/* scan sees all four headers */
	struct scan_seen ss = { 0 };
	ck_assert_int_eq(strata_nvme_scan(s, scan_cb, &ss), 0);
	ck_assert_int_eq(ss.n, 4);
	for (int i = 0; i < 4; i++) {
		ck_assert_uint_eq(ss.loc[i], h[i].location);
		ck_assert_uint_eq(ss.key[i], 1000 + (uint64_t)i);
	}
	ck_assert_int_eq(strata_nvme_scan(s, stop_cb, NULL), 42);
	/* writes wait for recovery; the metadata names records 0 and 2 */
	strata_page_handle x;
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, 100, &x), -EBUSY);
	ck_assert_int_eq(strata_nvme_free(s, &h[0]), -EBUSY);
	ck_assert_int_eq(strata_nvme_verify(s, &h[0], NULL), 0);
	ck_assert_int_eq(strata_nvme_mark_live(s, &h[0]), 0);
	ck_assert_int_eq(strata_nvme_mark_live(s, &h[2]), 0);
	ck_assert_int_eq(strata_nvme_mark_live(s, &h[2]), -EINVAL); /* already live */
	ck_assert_int_eq(strata_nvme_recover_done(s), 0);
	ck_assert_int_eq(strata_nvme_mark_live(s, &h[3]), -EBUSY);
	strata_tier_stats st = nt_stats(s);
	ck_assert_uint_eq(st.pages, 2);
	ck_assert_uint_eq(st.used_bytes, 2 * strata_nvme_record_bytes(sizeof b));
	/* the unnamed extents (1 and 3) are free again: first fit reuses 1's */
	nt_fill(b, sizeof b, 77);
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, sizeof b, &x), 0);
	ck_assert_uint_eq(x.location, h[1].location);
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, sizeof b, &x), 0);
	ck_assert_uint_eq(x.location, h[3].location);
	nt_check(s, &h[0], 40);
	nt_check(s, &h[2], 42);
	nt_check(s, &x, 77);
	/* the old handle of record 1 now names someone else's bytes: refused */
	uint8_t *got = malloc(sizeof b);
	ck_assert_int_eq(strata_nvme_read(s, &h[1], got, sizeof b), STRATA_E_CHECKSUM);
	free(got);
	strata_nvme_destroy(s);

	/* REUSE | CREATE on a file that is not a store creates one */
	int fd = open(nt_path, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	close(fd);
	c.flags = STRATA_NVME_REUSE;
	ck_assert_int_eq(strata_nvme_open(&c, &s), STRATA_E_FORMAT);
	c.flags = STRATA_NVME_REUSE | STRATA_NVME_CREATE;
	c.capacity_bytes = MB;
	ck_assert_int_eq(strata_nvme_open(&c, &s), 0);
	ck_assert_int_eq(strata_nvme_get_info(s, &info), 0);
	ck_assert(!info.recovering);
	strata_nvme_destroy(s);
}
END_TEST

START_TEST(corruption)
{
	strata_nvme_store *s = nt_open(MB, 4, STRATA_NVME_CREATE);
	enum { L = 37440 };
	uint8_t *b = malloc(L);
	strata_page_handle a, c2, hd;
	nt_fill(b, L, 1);
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, L, &a), 0);
	nt_fill(b, L, 2);
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, L, &c2), 0);
	nt_fill(b, L, 3);
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, L, &hd), 0);
	ck_assert_int_eq(strata_nvme_sync(s), 0);
	nt_flip(c2.location + 20000); /* payload byte */
	nt_flip(hd.location + strata_nvme_record_bytes(L) - STRATA_NVME_HEADER_BYTES +
		10); /* trailer byte */
	memset(b, 0xaa, L);
	ck_assert_int_eq(strata_nvme_read(s, &c2, b, L), STRATA_E_CHECKSUM);
	for (int i = 0; i < L; i++)
		ck_assert_uint_eq(b[i], 0); /* the suspect bytes are not handed out */
	ck_assert_int_eq(strata_nvme_verify(s, &c2, NULL), STRATA_E_CHECKSUM);
	ck_assert_int_eq(strata_nvme_read(s, &hd, b, L), STRATA_E_CORRUPT);
	/* a handle with the wrong checksum or length is refused too */
	strata_page_handle wrong = a;
	wrong.checksum ^= 1;
	ck_assert_int_eq(strata_nvme_read(s, &wrong, b, L), STRATA_E_CHECKSUM);
	wrong = a;
	wrong.length = L - 1;
	ck_assert_int_eq(strata_nvme_read(s, &wrong, b, L), STRATA_E_CHECKSUM);
	nt_check(s, &a, 1); /* the neighbour is intact */
	strata_tier_stats st = nt_stats(s);
	ck_assert_uint_eq(st.checksum_failures, 5);
	free(b);
	strata_nvme_destroy(s);
}
END_TEST

START_TEST(full_and_budget)
{
	/* 64 KiB: the superblock and fifteen 4 KiB records */
	strata_nvme_store *s = nt_open(64 * 1024, 4, STRATA_NVME_CREATE);
	strata_page_handle h[16];
	uint8_t b[4000];
	int n = 0, err;
	while ((err = strata_nvme_write(s, NULL, b, sizeof b, &h[n])) == 0)
		n++;
	ck_assert_int_eq(err, -ENOSPC);
	ck_assert_int_eq(n, 15);
	ck_assert_uint_eq(h[n].tier, STRATA_TIER_NONE); /* the failed write's handle is empty */
	strata_tier_stats st = nt_stats(s);
	ck_assert_uint_eq(st.full_failures, 1);
	ck_assert_uint_eq(st.pages, 15);
	ck_assert_int_eq(strata_nvme_free(s, &h[7]), 0);
	ck_assert_int_eq(strata_nvme_free(s, &h[7]), -EINVAL); /* twice */
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, 5000, &h[15]), -ENOSPC); /* 8 KiB: no hole */
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, sizeof b, &h[7]), 0);
	/* budget: room for 15 records of 4 KiB; lower it to 14 */
	ck_assert_int_eq(strata_nvme_free(s, &h[0]), 0);
	ck_assert_int_eq(strata_nvme_set_budget(s, 14 * 4096), 0);
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, sizeof b, &h[0]), STRATA_E_BUDGET);
	st = nt_stats(s);
	ck_assert_uint_eq(st.budget_failures, 1);
	ck_assert_uint_eq(st.budget_bytes, 14 * 4096);
	ck_assert_uint_eq(st.pages, 14);
	ck_assert_int_eq(strata_nvme_set_budget(s, 0), 0);
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, sizeof b, &h[0]), 0);
	strata_nvme_destroy(s);
}
END_TEST

START_TEST(bad_args)
{
	strata_nvme_config c = STRATA_NVME_CONFIG_INIT;
	strata_nvme_store *s = (strata_nvme_store *)1;
	ck_assert_int_eq(strata_nvme_open(&c, &s), -EINVAL); /* no path */
	ck_assert_ptr_null(s);
	c.path = nt_path;
	ck_assert_int_eq(strata_nvme_open(&c, &s), -EINVAL); /* neither CREATE nor REUSE */
	c.flags = STRATA_NVME_CREATE;
	ck_assert_int_eq(strata_nvme_open(&c, &s), -EINVAL); /* no capacity for a file */
	c.capacity_bytes = 4096;
	ck_assert_int_eq(strata_nvme_open(&c, &s), -EINVAL); /* no room past the superblock */
	c.capacity_bytes = MB;
	c.slot_bytes = 1000;
	ck_assert_int_eq(strata_nvme_open(&c, &s), -EINVAL); /* slot not 4 KiB-aligned */
	c.slot_bytes = 0;
	c.flags = STRATA_NVME_REUSE;
	ck_assert_int_ne(strata_nvme_open(&c, &s), 0); /* no such store (ENOENT or format) */
	char missing[400];
	snprintf(missing, sizeof missing, "%s/no/such/dir", nt_dir);
	c.path = missing;
	c.flags = STRATA_NVME_CREATE;
	ck_assert_int_eq(strata_nvme_open(&c, &s), -ENOENT);
	ck_assert_int_eq(strata_nvme_open(NULL, &s), -EINVAL);

	s = nt_open(MB, 4, STRATA_NVME_CREATE);
	uint8_t b[8192];
	strata_page_handle h, bad;
	nt_fill(b, sizeof b, 3);
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, 0, &h), -EINVAL);
	ck_assert_int_eq(strata_nvme_write(s, NULL, NULL, 10, &h), -EINVAL);
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, 10, NULL), -EINVAL);
	ck_assert_int_eq(strata_nvme_write(NULL, NULL, b, 10, &h), -EINVAL);
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, 5000, &h), 0);
	ck_assert_int_eq(strata_nvme_read(s, &h, b, 4999), -EINVAL); /* buffer too small */
	ck_assert_int_eq(strata_nvme_read(s, &h, NULL, 5000), -EINVAL);
	bad = h;
	bad.location += 512;
	ck_assert_int_eq(strata_nvme_read(s, &bad, b, sizeof b), -EINVAL);
	ck_assert_int_eq(strata_nvme_free(s, &bad), -EINVAL);
	bad = h;
	bad.location = 0; /* the superblock */
	ck_assert_int_eq(strata_nvme_read(s, &bad, b, sizeof b), -EINVAL);
	bad = h;
	bad.location = MB - 4096; /* runs past the end */
	ck_assert_int_eq(strata_nvme_read(s, &bad, b, sizeof b), -EINVAL);
	bad = h;
	bad.tier = STRATA_TIER_HOST;
	ck_assert_int_eq(strata_nvme_read(s, &bad, b, sizeof b), -EINVAL);
	ck_assert_int_eq(strata_nvme_mark_live(s, &h), -EBUSY); /* not recovering */
	ck_assert_int_eq(strata_nvme_inject(s, STRATA_FAULT_SUBMIT, 0, STRATA_FAULT_SHORT), -EINVAL);
	ck_assert_int_eq(strata_nvme_inject(s, STRATA_FAULT_SUBMIT, 0, 0), -EINVAL);
	ck_assert_int_eq(strata_nvme_inject(s, (strata_fault_site)9, 0, -EIO), -EINVAL);
	ck_assert_int_eq(strata_nvme_submit(s, NULL, 1), -EINVAL);
	strata_nvme_op *none[1] = { NULL };
	ck_assert_int_eq(strata_nvme_submit(s, none, 1), -EINVAL);
	strata_nvme_op op = { .kind = STRATA_NVME_OP_READ, .buf = b, .len = 10, .handle = h,
			      .result = 1 };
	strata_nvme_op *p = &op, *done;
	ck_assert_int_eq(strata_nvme_submit(s, &p, 1), 1); /* taken, fails at once */
	ck_assert_int_eq(strata_nvme_reap(s, 1, &done, 1), 1);
	ck_assert_int_eq(op.result, -EINVAL);
	ck_assert_int_eq(strata_nvme_reap(s, 0, NULL, 1), -EINVAL);
	strata_nvme_info small = { .size = 4 };
	ck_assert_int_eq(strata_nvme_get_info(s, &small), -EINVAL);
	nt_check(s, &h, 3);
	strata_nvme_destroy(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tiers_nvme");
	TCase *t = tcase_create("nvme");
	tcase_add_checked_fixture(t, nt_setup, nt_teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, write_read_sizes);
	tcase_add_test(t, buffered_mode);
	tcase_add_test(t, batched);
	tcase_add_test(t, reopen_mark_live);
	tcase_add_test(t, corruption);
	tcase_add_test(t, full_and_budget);
	tcase_add_test(t, bad_args);
	suite_add_tcase(s, t);
	return tu_run(s);
}
