/* Helpers shared by the NVMe store tests: a private temporary directory (removed
 * afterwards), a store in it, deterministic payloads. */
#ifndef STRATA_TESTS_NVME_TESTUTIL_H
#define STRATA_TESTS_NVME_TESTUTIL_H

#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"
#include "tiers/tiers.h"

static char nt_dir[256];
static char nt_path[300];

/* Make a fresh directory under $TMPDIR (or /tmp) for this test. */
static inline void nt_setup(void)
{
	const char *t = getenv("TMPDIR");
	snprintf(nt_dir, sizeof nt_dir, "%s/strata-tiers-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(nt_dir));
	snprintf(nt_path, sizeof nt_path, "%s/store", nt_dir);
}

static inline void nt_teardown(void)
{
	unlink(nt_path);
	rmdir(nt_dir);
}

static inline strata_nvme_store *nt_open(uint64_t capacity, unsigned qd, unsigned flags)
{
	strata_nvme_config c = STRATA_NVME_CONFIG_INIT;
	c.path = nt_path;
	c.capacity_bytes = capacity;
	c.queue_depth = qd;
	c.flags = flags;
	c.slot_bytes = 256 * 1024; /* small staging; bigger records take the tmp path */
	strata_nvme_store *s = NULL;
	int err = strata_nvme_open(&c, &s);
	ck_assert_msg(err == 0, "open %s: %s", nt_path, strata_strerror(err));
	return s;
}

static inline void nt_fill(void *buf, size_t n, uint64_t seed)
{
	uint8_t *b = buf;
	for (size_t i = 0; i < n; i++) {
		if (i % 8 == 0)
			seed = tu_next(&seed);
		b[i] = (uint8_t)(seed >> (8 * (i % 8)));
	}
}

static inline strata_tier_stats nt_stats(strata_nvme_store *s)
{
	strata_tier_stats st = STRATA_TIER_STATS_INIT;
	ck_assert_int_eq(strata_nvme_stats(s, &st), 0);
	return st;
}

/* Read h back and compare with the payload generated from seed. */
static inline void nt_check(strata_nvme_store *s, const strata_page_handle *h, uint64_t seed)
{
	size_t n = h->length;
	uint8_t *want = malloc(n), *got = malloc(n);
	nt_fill(want, n, seed);
	int err = strata_nvme_read(s, h, got, n);
	ck_assert_msg(err == 0, "read %llu B at %llu: %s", (unsigned long long)n,
		      (unsigned long long)h->location, strata_strerror(err));
	ck_assert(memcmp(want, got, n) == 0);
	free(want);
	free(got);
}

/* Flip one byte of the file at off, behind the store's back. */
static inline void nt_flip(uint64_t off)
{
	int fd = open(nt_path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	uint8_t b;
	ck_assert_int_eq(pread(fd, &b, 1, (off_t)off), 1);
	b ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

#endif
