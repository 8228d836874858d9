/* tiers: the NVMe store's payload checksum runs XXH3-64 on the widest vector unit the
 * CPU has (nvme_hash.c). Records must stay bit-compatible with every other XXH3-64
 * reader, so each implementation this CPU offers must equal libxxhash's on every
 * length (the short-input branches, the stripe and block edges, odd tails) and
 * alignment; and a record the store writes carries libxxhash's XXH3-64 of its payload
 * in its handle and trailer. */
#include "nvme_testutil.h"

#include <string.h>
#include <xxhash.h>

#include "tiers/nvme_int.h"

static uint8_t *random_bytes(size_t n, uint64_t seed)
{
	uint8_t *p = NULL;
	ck_assert_int_eq(posix_memalign((void **)&p, 4096, n + 64), 0);
	nt_fill(p, n + 64, seed);
	return p;
}

START_TEST(impls_match_library)
{
	enum { MAXN = 70000 };
	uint8_t *b = random_bytes(MAXN, 11);
	nvme_hash_fn ref = nvme_hash_impl(NVME_HASH_LIB), best = nvme_hash_best();
	ck_assert_ptr_nonnull(ref);
	ck_assert_ptr_nonnull(best);
	nvme_hash_fn impls[] = { best, nvme_hash_impl(NVME_HASH_AVX2) };
	int checked = 0;
	for (size_t k = 0; k < sizeof impls / sizeof impls[0]; k++) {
		if (!impls[k])
			continue; /* this CPU lacks it */
		checked++;
		/* every length to 2 KiB (all the small-input paths, stripe edges) ... */
		for (size_t n = 0; n <= 2048; n++)
			ck_assert_uint_eq(impls[k](b + (n & 7), n), ref(b + (n & 7), n));
		/* ... then block edges and the store's record sizes, aligned or not */
		static const size_t big[] = { 4031, 4032, 4095, 4096, 8128, 16320, 16384,
					      37440, 65472, 65536, MAXN };
		for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
			for (size_t off = 0; off < 64; off += 13)
				ck_assert_uint_eq(impls[k](b + off, big[i]), ref(b + off, big[i]));
	}
	ck_assert_int_ge(checked, 1);
	/* and the hash sees every byte: flipping one bit anywhere changes it */
	uint64_t h = best(b, 65536);
	for (size_t at = 0; at < 65536; at += 4093) {
		b[at] ^= 0x10;
		ck_assert_uint_ne(best(b, 65536), h);
		b[at] ^= 0x10;
	}
	free(b);
}
END_TEST

START_TEST(store_writes_library_hash)
{
	strata_nvme_store *s = nt_open(16 << 20, 8, STRATA_NVME_CREATE);
	static const size_t lens[] = { 1, 4032, 4096, 16320, 65472, 100000 };
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		uint8_t *b = random_bytes(lens[i], 100 + i), *back = random_bytes(lens[i], 7);
		strata_page_key key = { i, 42 };
		strata_page_handle h;
		ck_assert_int_eq(strata_nvme_write(s, &key, b, lens[i], &h), 0);
		ck_assert_uint_eq(h.checksum, XXH3_64bits(b, lens[i]));
		ck_assert_int_eq(strata_nvme_read(s, &h, back, lens[i]), 0);
		ck_assert_mem_eq(back, b, lens[i]);
		/* the trailer on disk carries the same checksum */
		uint64_t rb = strata_nvme_record_bytes(lens[i]);
		nvme_rec_hdr hd;
		int fd = open(nt_path, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, &hd, sizeof hd, (off_t)(h.location + rb - sizeof hd)),
				 (ssize_t)sizeof hd);
		close(fd);
		ck_assert_uint_eq(hd.payload_xxh3, XXH3_64bits(b, lens[i]));
		free(b);
		free(back);
	}
	strata_nvme_destroy(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tiers_nvme_hash");
	TCase *t = tcase_create("hash");
	tcase_add_checked_fixture(t, nt_setup, nt_teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, impls_match_library);
	tcase_add_test(t, store_writes_library_hash);
	suite_add_tcase(s, t);
	return tu_run(s);
}
