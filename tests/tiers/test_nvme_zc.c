/* tiers: the NVMe store's version-2 layout ([payload][pad][trailer]) and its zero-copy
 * path: page-aligned caller buffers move the payload's whole blocks by READV/WRITEV
 * straight to or from the device. Checked: the bytes on disk sit where the format says,
 * aligned and unaligned buffers read each other's records, reads never write past the
 * payload, corruption anywhere (head blocks, staged tail, trailer) is refused with the
 * buffer zeroed, batches, scan by trailers, and version-1 stores are refused. */
#include "nvme_testutil.h"

#include <string.h>

#define MB (1024 * 1024)
#define HDR STRATA_NVME_HEADER_BYTES

static uint8_t *aligned(size_t n)
{
	uint8_t *p = NULL;
	ck_assert_int_eq(posix_memalign((void **)&p, 4096, n ? n : 1), 0);
	return p;
}

/* Sizes around every block edge the trailer cares about: payload tail alone in the last
 * block, tail + trailer filling it, trailer in a block of its own (len % 4096 > 4032),
 * exact multiples, records past the 256 KiB staging slot. */
static const size_t sizes[] = { 1,    4031, 4032, 4033, 4095,  4096,  8127,
				8128, 8129, 8192, 12288, 37440, 262080, 262144,
				MB + 5000 };
enum { NS = sizeof sizes / sizeof sizes[0] };

static void pread_file(uint64_t off, void *buf, size_t n)
{
	int fd = open(nt_path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, n, (off_t)off), (ssize_t)n);
	close(fd);
}

START_TEST(layout_and_mixed_buffers)
{
	strata_nvme_store *s = nt_open(16 * MB, 8, STRATA_NVME_CREATE);
	strata_nvme_info info = STRATA_NVME_INFO_INIT;
	ck_assert_int_eq(strata_nvme_get_info(s, &info), 0);
	printf("store: direct %d\n", info.direct);
	strata_page_handle h[NS][2];
	for (int i = 0; i < NS; i++) {
		size_t n = sizes[i];
		uint8_t *a = aligned(n), *u = malloc(n + 1);
		nt_fill(a, n, 200 + i);
		nt_fill(u + 1, n, 300 + i);
		strata_page_key k = { (uint64_t)i, 5 };
		ck_assert_int_eq(strata_nvme_write(s, &k, a, n, &h[i][0]), 0); /* zero-copy */
		ck_assert_int_eq(strata_nvme_write(s, &k, u + 1, n, &h[i][1]), 0); /* staged */
		ck_assert_uint_eq(h[i][0].checksum, strata_page_checksum(a, n));
		/* on disk: the payload at the record's start, the trailer at its end */
		uint64_t rb = strata_nvme_record_bytes(n);
		ck_assert_uint_eq(rb % 4096, 0);
		ck_assert_uint_ge(rb, n + HDR);
		ck_assert_uint_lt(rb, n + HDR + 4096);
		uint8_t *disk = malloc(rb);
		pread_file(h[i][0].location, disk, rb);
		ck_assert(memcmp(disk, a, n) == 0);
		for (uint64_t j = n; j < rb - HDR; j++)
			ck_assert_uint_eq(disk[j], 0); /* zero pad */
		ck_assert(memcmp(disk + rb - HDR, "STRATAPG", 8) == 0);
		uint64_t len;
		memcpy(&len, disk + rb - HDR + 32, 8);
		ck_assert_uint_eq(len, n);
		pread_file(h[i][1].location, disk, rb); /* both paths write the same bytes */
		ck_assert(memcmp(disk, u + 1, n) == 0);
		ck_assert(memcmp(disk + rb - HDR, "STRATAPG", 8) == 0);
		free(disk);
		free(a);
		free(u);
	}
	for (int i = 0; i < NS; i++) {
		size_t n = sizes[i];
		uint64_t rb = strata_nvme_record_bytes(n);
		uint8_t *want = malloc(n), *a = aligned(rb + 8192), *u = malloc(n + 8);
		for (int w = 0; w < 2; w++) {
			nt_fill(want, n, (w ? 300 : 200) + i);
			/* an aligned buffer bigger than the record: nothing past length changes */
			memset(a, 0xee, rb + 8192);
			ck_assert_int_eq(strata_nvme_read(s, &h[i][w], a, rb + 8192), 0);
			ck_assert(memcmp(a, want, n) == 0);
			for (size_t j = n; j < rb + 8192; j++)
				ck_assert_uint_eq(a[j], 0xee);
			memset(u, 0xee, n + 8);
			ck_assert_int_eq(strata_nvme_read(s, &h[i][w], u + 3, n), 0);
			ck_assert(memcmp(u + 3, want, n) == 0);
			ck_assert_uint_eq(u[n + 3], 0xee);
			strata_page_key k;
			ck_assert_int_eq(strata_nvme_verify(s, &h[i][w], &k), 0);
			ck_assert_uint_eq(k.lo, (uint64_t)i);
		}
		free(want);
		free(a);
		free(u);
	}
	strata_tier_stats st = nt_stats(s);
	ck_assert_uint_eq(st.checksum_failures, 0);
	ck_assert_uint_eq(st.writes, 2 * NS);
	ck_assert_uint_eq(st.reads, 6 * NS);
	strata_nvme_destroy(s);
}
END_TEST

/* A damaged byte in an aligned record, wherever it is, fails the read and leaves the
 * caller's buffer zeroed even though the device wrote into it directly. */
START_TEST(aligned_corruption)
{
	enum { L = 3 * 4096 + 100 }; /* three head blocks, a staged tail block */
	strata_nvme_store *s = nt_open(MB, 4, STRATA_NVME_CREATE);
	uint8_t *b = aligned(L);
	const uint64_t rb = strata_nvme_record_bytes(L);
	const uint64_t where[] = { 5, 2 * 4096 + 7, 3 * 4096 + 50, rb - HDR + 20 };
	const int want[] = { STRATA_E_CHECKSUM, STRATA_E_CHECKSUM, STRATA_E_CHECKSUM,
			     STRATA_E_CORRUPT };
	strata_page_handle h[4], ok;
	for (int i = 0; i < 4; i++) {
		nt_fill(b, L, 60 + i);
		ck_assert_int_eq(strata_nvme_write(s, NULL, b, L, &h[i]), 0);
	}
	nt_fill(b, L, 70);
	ck_assert_int_eq(strata_nvme_write(s, NULL, b, L, &ok), 0);
	ck_assert_int_eq(strata_nvme_sync(s), 0);
	for (int i = 0; i < 4; i++)
		nt_flip(h[i].location + where[i]);
	for (int i = 0; i < 4; i++) {
		memset(b, 0xaa, L);
		ck_assert_int_eq(strata_nvme_read(s, &h[i], b, L), want[i]);
		for (int j = 0; j < L; j++)
			ck_assert_uint_eq(b[j], 0);
		ck_assert_int_eq(strata_nvme_verify(s, &h[i], NULL), want[i]);
	}
	ck_assert_uint_eq(nt_stats(s).checksum_failures, 8);
	nt_check(s, &ok, 70);
	free(b);
	strata_nvme_destroy(s);
}
END_TEST

START_TEST(aligned_batched)
{
	enum { N = 48 };
	strata_nvme_store *s = nt_open(32 * MB, 8, STRATA_NVME_CREATE);
	strata_nvme_op ops[N], *ptr[N], *done[N];
	uint8_t *src[N];
	for (int i = 0; i < N; i++) {
		size_t len = 4096 * (size_t)(i % 7) + (size_t)(i * 613) % 4096 + 1;
		src[i] = aligned(len);
		nt_fill(src[i], len, 900 + i);
		ops[i] = (strata_nvme_op){ .kind = STRATA_NVME_OP_WRITE, .key = { (uint64_t)i, 9 },
					   .buf = src[i], .len = len, .result = 1, .user = i };
		ptr[i] = &ops[i];
	}
	for (int pass = 0; pass < 2; pass++) {
		int sub = 0, reaped = 0;
		while (reaped < N) {
			if (sub < N) {
				int r = strata_nvme_submit(s, ptr + sub, N - sub);
				ck_assert_int_ge(r, 0);
				sub += r;
			}
			int r = strata_nvme_reap(s, 1, done, N);
			ck_assert_int_ge(r, 1);
			for (int j = 0; j < r; j++) {
				strata_nvme_op *o = done[j];
				ck_assert_int_eq(o->result, 0);
				if (pass) {
					ck_assert_uint_eq(o->key.lo, o->user);
					ck_assert(memcmp(o->buf, src[o->user], o->handle.length) == 0);
				}
			}
			reaped += r;
		}
		ck_assert_int_eq(strata_nvme_inflight(s), 0);
		for (int i = 0; !pass && i < N; i++) { /* now read them back, aligned */
			strata_page_handle h = ops[i].handle;
			ops[i] = (strata_nvme_op){ .kind = STRATA_NVME_OP_READ,
						   .buf = aligned(h.length), .len = h.length,
						   .handle = h, .result = 1, .user = i };
			memset(ops[i].buf, 0x11, h.length);
		}
	}
	for (int i = 0; i < N; i++) {
		free(ops[i].buf);
		free(src[i]);
	}
	strata_nvme_destroy(s);
}
END_TEST

struct seen {
	int n;
	strata_page_handle h[NS];
	uint64_t key[NS];
};

static int scan_cb(void *arg, const strata_page_key *k, const strata_page_handle *h)
{
	struct seen *ss = arg;
	if (ss->n < NS) {
		ss->h[ss->n] = *h;
		ss->key[ss->n] = k->lo;
	}
	ss->n++;
	return 0;
}

/* Scan finds each record by its trailer and reports where the record starts. */
START_TEST(scan_by_trailer)
{
	strata_nvme_store *s = nt_open(8 * MB, 4, STRATA_NVME_CREATE);
	strata_page_handle h[NS];
	for (int i = 0; i < NS; i++) {
		uint8_t *b = aligned(sizes[i]);
		nt_fill(b, sizes[i], 40 + i);
		strata_page_key k = { 100 + (uint64_t)i, 0 };
		ck_assert_int_eq(strata_nvme_write(s, &k, b, sizes[i], &h[i]), 0);
		free(b);
	}
	ck_assert_int_eq(strata_nvme_sync(s), 0);
	strata_nvme_destroy(s);
	strata_nvme_config c = STRATA_NVME_CONFIG_INIT;
	c.path = nt_path;
	c.flags = STRATA_NVME_REUSE;
	c.queue_depth = 4;
	ck_assert_int_eq(strata_nvme_open(&c, &s), 0);
	struct seen ss = { 0 };
	ck_assert_int_eq(strata_nvme_scan(s, scan_cb, &ss), 0);
	ck_assert_int_eq(ss.n, NS);
	for (int i = 0; i < NS; i++) {
		ck_assert_uint_eq(ss.h[i].location, h[i].location);
		ck_assert_uint_eq(ss.h[i].length, h[i].length);
		ck_assert_uint_eq(ss.h[i].checksum, h[i].checksum);
		ck_assert_uint_eq(ss.key[i], 100 + (uint64_t)i);
		ck_assert_int_eq(strata_nvme_mark_live(s, &ss.h[i]), 0);
	}
	ck_assert_int_eq(strata_nvme_recover_done(s), 0);
	for (int i = 0; i < NS; i++)
		nt_check(s, &h[i], 40 + i);
	strata_nvme_destroy(s);
}
END_TEST

/* A zero-copy op that the kernel refuses with EFAULT (memory it can't pin) is redone
 * through staging, transparently; both a write and a read, small and past the slot. */
START_TEST(efault_restages)
{
	static const size_t lens[] = { 3 * 4096 + 10, 300000 };
	for (int k = 0; k < 2; k++) {
		size_t n = lens[k];
		uint8_t *a = aligned(n), *back = aligned(n);
		nt_fill(a, n, 80 + k);
		strata_page_handle h, h2;
		/* the write's completion reports EFAULT */
		strata_nvme_store *s = nt_open(4 * MB, 4, STRATA_NVME_CREATE);
		ck_assert_int_eq(strata_nvme_inject(s, STRATA_FAULT_COMPLETE, 0, -EFAULT), 0);
		ck_assert_int_eq(strata_nvme_write(s, NULL, a, n, &h), 0);
		ck_assert_uint_eq(nt_stats(s).faults_fired, 1);
		ck_assert_uint_eq(nt_stats(s).io_errors, 0);
		nt_check(s, &h, 80 + k);
		ck_assert_int_eq(strata_nvme_read(s, &h, back, n), 0); /* staged from now on */
		ck_assert(memcmp(a, back, n) == 0);
		strata_nvme_destroy(s);
		/* the read's completion reports EFAULT */
		s = nt_open(4 * MB, 4, STRATA_NVME_CREATE);
		ck_assert_int_eq(strata_nvme_write(s, NULL, a, n, &h2), 0);
		ck_assert_int_eq(strata_nvme_inject(s, STRATA_FAULT_COMPLETE, 0, -EFAULT), 0);
		memset(back, 0, n);
		ck_assert_int_eq(strata_nvme_read(s, &h2, back, n), 0);
		ck_assert(memcmp(a, back, n) == 0);
		ck_assert_uint_eq(nt_stats(s).faults_fired, 1);
		strata_nvme_destroy(s);
		free(a);
		free(back);
	}
}
END_TEST

/* A store whose superblock says version 1 (header-first records) is not reused. */
START_TEST(old_version_refused)
{
	strata_nvme_store *s = nt_open(MB, 4, STRATA_NVME_CREATE);
	strata_nvme_destroy(s);
	uint8_t sb[64];
	pread_file(0, sb, sizeof sb);
	uint32_t v;
	memcpy(&v, sb + 8, 4);
	ck_assert_uint_eq(v, 2);
	v = 1;
	memcpy(sb + 8, &v, 4);
	uint64_t sum = strata_page_checksum(sb, 56);
	memcpy(sb + 56, &sum, 8);
	int fd = open(nt_path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, sb, sizeof sb, 0), (ssize_t)sizeof sb);
	close(fd);
	strata_nvme_config c = STRATA_NVME_CONFIG_INIT;
	c.path = nt_path;
	c.flags = STRATA_NVME_REUSE;
	ck_assert_int_eq(strata_nvme_open(&c, &s), STRATA_E_FORMAT);
	c.flags = STRATA_NVME_REUSE | STRATA_NVME_CREATE; /* recreated, empty */
	c.capacity_bytes = MB;
	ck_assert_int_eq(strata_nvme_open(&c, &s), 0);
	ck_assert_uint_eq(nt_stats(s).pages, 0);
	strata_nvme_destroy(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tiers_nvme_zc");
	TCase *t = tcase_create("zc");
	tcase_add_checked_fixture(t, nt_setup, nt_teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, layout_and_mixed_buffers);
	tcase_add_test(t, aligned_corruption);
	tcase_add_test(t, aligned_batched);
	tcase_add_test(t, scan_by_trailer);
	tcase_add_test(t, efault_restages);
	tcase_add_test(t, old_version_refused);
	suite_add_tcase(s, t);
	return tu_run(s);
}
