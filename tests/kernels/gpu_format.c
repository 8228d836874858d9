/*
 * kernels/: the V4 format kernels on the GPU must write the same bytes and decode to
 * the same floats as the CPU reference (format_cpu.c), on random and adversarial
 * entries (zeros, huge, tiny and subnormal, exact ties, -0.0, NaN, inf), for several
 * block sizes and slot patterns (NULL, reversed, scattered with -1 holes).
 *
 * Floats are compared bit for bit except NaNs, whose payloads differ by design (the
 * GPU returns its canonical NaN from arithmetic on a NaN, x86 keeps the operand's).
 */
#include <errno.h>
#include <math.h>

#include "testutil.h"
#include "kernels/kernels.h"

static strata_dev *dev;

static void open_gpu(void)
{
	strata_dev_config cfg = STRATA_DEV_CONFIG_INIT;
	cfg.backend = STRATA_BACKEND_GPU;
	ck_assert_int_eq(strata_dev_open(&cfg, &dev), 0);
	ck_assert(strata_dev_is_gpu(dev));
}
static void close_gpu(void)
{
	strata_dev_close(dev);
	dev = NULL;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	ck_assert_ptr_nonnull(p);
	return p;
}
static void *dalloc(size_t n)
{
	void *p = NULL;
	ck_assert_int_eq(strata_dev_alloc(dev, n ? n : 1, &p), 0);
	return p;
}
static void *to_dev(const void *h, size_t n)
{
	void *d = dalloc(n);
	ck_assert_int_eq(strata_dev_copy(dev, d, h, n, NULL), 0);
	return d;
}
static void to_host(void *h, const void *d, size_t n)
{
	ck_assert_int_eq(strata_dev_copy(dev, h, d, n, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
}

static void same_floats(const float *a, const float *b, size_t n, const char *what)
{
	for (size_t k = 0; k < n; k++) {
		if (isnan(a[k]) && isnan(b[k]))
			continue;
		ck_assert_msg(memcmp(&a[k], &b[k], 4) == 0, "%s: element %zu: cpu %a gpu %a", what, k,
			      (double)a[k], (double)b[k]);
	}
}

/* Values exactly on rounding ties of e4m3 (relative to a tile scale of 2^t when the
 * tile's amax is 448 * 2^t) and of e2m1 (scale 2^t when amax is 6 * 2^t). */
static const float e4m3_ties[] = { 448, 0x1p-10f, 3 * 0x1p-10f, 15 * 0x1p-10f, 1.0625f,
				   1.1875f, 248, 400, 432, -1.0625f, -0x1p-10f, 17 * 0x1p-5f };
static const float e2m1_ties[] = { 6, .25f, .75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -.25f, -5 };

/* Fill n vectors of dim floats; group = the scale group size, ties = a tie table. */
static void fill(float *x, int n, int dim, int group, const float *ties, int nties,
		 uint64_t *seed)
{
	for (int i = 0; i < n; i++) {
		float *v = x + (size_t)i * dim;
		int pattern = (int)(tu_next(seed) % 10);
		for (int k = 0; k < dim; k++) {
			float u = tu_uniform(seed);
			int t = (int)(tu_next(seed) % 41) - 20;
			switch (pattern) {
			case 0: v[k] = 0.0f; break;
			case 1: v[k] = u * 3e38f; break;
			case 2: v[k] = (k & 1) ? u * 1e-30f : u * 1e-40f; break; /* subnormals */
			case 3: v[k] = ties[k % group % nties] * ldexpf(1.0f, (k / group) * 5 - 15); break;
			case 4: v[k] = -0.0f; break;
			case 5: v[k] = (k % 7 == 3) ? NAN : u; break;
			case 6: v[k] = (k % 11 == 2) ? (u < 0 ? -INFINITY : INFINITY) : u * 100; break;
			case 7: v[k] = u * ldexpf(1.0f, t); break;
			default: v[k] = u; break;
			}
		}
	}
}

/* Slot patterns: 0 NULL (0..n-1), 1 reversed, 2 scattered over 2n with -1 holes. */
static int64_t *make_slots(int n, int pattern, uint64_t *seed, int64_t *max_slot)
{
	*max_slot = n - 1;
	if (pattern == 0)
		return NULL;
	int64_t *s = xmalloc((size_t)n * sizeof *s);
	for (int i = 0; i < n; i++)
		s[i] = pattern == 1 ? n - 1 - i : 2 * i + (int64_t)(tu_next(seed) & 1);
	if (pattern == 2) {
		*max_slot = 2 * (int64_t)n - 1;
		for (int i = 0; i < n; i += 9)
			s[i] = -1;
	}
	return s;
}

START_TEST(main_matches_cpu)
{
	open_gpu();
	const struct { int B, n, pattern; } cfgs[] = {
		{ 1, 37, 0 }, { 2, 100, 1 }, { 64, 300, 2 }, { 64, 1000, 0 }, { 3, 50, 2 }, { 64, 1, 1 },
	};
	uint64_t seed = 77;
	for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
		int B = cfgs[c].B, n = cfgs[c].n;
		int64_t max_slot;
		int64_t *slots = make_slots(n, cfgs[c].pattern, &seed, &max_slot);
		size_t bytes = (size_t)(max_slot / B + 1) * strata_main_block_stride(B);
		float *x = xmalloc((size_t)n * 512 * sizeof *x);
		fill(x, n, 512, 64, e4m3_ties, sizeof e4m3_ties / sizeof e4m3_ties[0], &seed);
		uint8_t *cpu = xmalloc(bytes), *gpu = xmalloc(bytes);
		memset(cpu, 0xaa, bytes);
		strata_main_encode_params p = { .src = x, .slots = slots, .n = n, .B = B, .pool = cpu };
		ck_assert_int_eq(strata_k_main_encode_cpu(&p), 0);

		strata_stream *st = NULL;
		ck_assert_int_eq(strata_stream_create(dev, &st), 0);
		float *dx = to_dev(x, (size_t)n * 512 * sizeof *x);
		int64_t *ds = slots ? to_dev(slots, (size_t)n * sizeof *slots) : NULL;
		uint8_t *dpool = dalloc(bytes);
		ck_assert_int_eq(strata_dev_memset(dev, dpool, 0xaa, bytes, st), 0);
		strata_main_encode_params g = { .src = dx, .slots = ds, .n = n, .B = B, .pool = dpool };
		ck_assert_int_eq(strata_k_main_encode(dev, &g, st), 0);
		ck_assert_int_eq(strata_stream_sync(dev, st), 0);
		to_host(gpu, dpool, bytes);
		for (size_t k = 0; k < bytes; k++)
			ck_assert_msg(cpu[k] == gpu[k], "B=%d n=%d byte %zu: cpu 0x%02x gpu 0x%02x", B, n,
				      k, cpu[k], gpu[k]);

		/* Decode what was encoded, then random bytes (0xff scales, NaN codes...). */
		float *ycpu = xmalloc((size_t)n * 512 * sizeof *ycpu);
		float *ygpu = xmalloc((size_t)n * 512 * sizeof *ygpu);
		float *dy = dalloc((size_t)n * 512 * sizeof *dy);
		for (int round = 0; round < 2; round++) {
			if (round == 1) {
				for (size_t k = 0; k < bytes; k++)
					cpu[k] = (uint8_t)tu_next(&seed);
				ck_assert_int_eq(strata_dev_copy(dev, dpool, cpu, bytes, st), 0);
			}
			strata_main_decode_params d = { .pool = cpu, .slots = slots, .n = n, .B = B,
							.dst = ycpu };
			ck_assert_int_eq(strata_k_main_decode_cpu(&d), 0);
			d.pool = dpool;
			d.slots = ds;
			d.dst = dy;
			ck_assert_int_eq(strata_k_main_decode(dev, &d, st), 0);
			ck_assert_int_eq(strata_stream_sync(dev, st), 0);
			to_host(ygpu, dy, (size_t)n * 512 * sizeof *ygpu);
			same_floats(ycpu, ygpu, (size_t)n * 512, round ? "main decode (random)" : "main decode");
		}
		strata_dev_free(dev, dy);
		strata_dev_free(dev, dpool);
		strata_dev_free(dev, ds);
		strata_dev_free(dev, dx);
		strata_stream_destroy(dev, st);
		free(ycpu);
		free(ygpu);
		free(cpu);
		free(gpu);
		free(x);
		free(slots);
	}
	close_gpu();
}
END_TEST

START_TEST(index_matches_cpu)
{
	open_gpu();
	const struct { int B, n, pattern; } cfgs[] = {
		{ 64, 200, 0 }, { 64, 129, 2 }, { 1, 33, 1 }, { 5, 70, 2 }, { 64, 2000, 1 },
	};
	uint64_t seed = 88;
	for (int f = 0; f < 2; f++) {
		strata_index_fmt fmt = f ? STRATA_INDEX_FP8 : STRATA_INDEX_MXFP4;
		for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
			int B = cfgs[c].B, n = cfgs[c].n;
			int64_t max_slot;
			int64_t *slots = make_slots(n, cfgs[c].pattern, &seed, &max_slot);
			size_t bytes = (size_t)(max_slot / B + 1) * B * strata_index_entry_bytes(fmt);
			float *x = xmalloc((size_t)n * 128 * sizeof *x);
			if (f)
				fill(x, n, 128, 128, e4m3_ties, sizeof e4m3_ties / sizeof e4m3_ties[0], &seed);
			else
				fill(x, n, 128, 32, e2m1_ties, sizeof e2m1_ties / sizeof e2m1_ties[0], &seed);
			uint8_t *cpu = xmalloc(bytes), *gpu = xmalloc(bytes);
			memset(cpu, 0xaa, bytes);
			strata_index_encode_params p = { .fmt = fmt, .src = x, .slots = slots, .n = n,
							 .B = B, .pages = cpu };
			ck_assert_int_eq(strata_k_index_encode_cpu(&p), 0);

			float *dx = to_dev(x, (size_t)n * 128 * sizeof *x);
			int64_t *ds = slots ? to_dev(slots, (size_t)n * sizeof *slots) : NULL;
			uint8_t *dpages = dalloc(bytes);
			ck_assert_int_eq(strata_dev_memset(dev, dpages, 0xaa, bytes, NULL), 0);
			strata_index_encode_params g = p;
			g.src = dx;
			g.slots = ds;
			g.pages = dpages;
			ck_assert_int_eq(strata_k_index_encode(dev, &g, NULL), 0);
			to_host(gpu, dpages, bytes);
			for (size_t k = 0; k < bytes; k++)
				ck_assert_msg(cpu[k] == gpu[k], "fmt %d B=%d byte %zu: cpu 0x%02x gpu 0x%02x",
					      f, B, k, cpu[k], gpu[k]);

			float *ycpu = xmalloc((size_t)n * 128 * sizeof *ycpu);
			float *ygpu = xmalloc((size_t)n * 128 * sizeof *ygpu);
			float *dy = dalloc((size_t)n * 128 * sizeof *dy);
			for (int round = 0; round < 2; round++) {
				if (round == 1) {
					for (size_t k = 0; k < bytes; k++)
						cpu[k] = (uint8_t)tu_next(&seed);
					ck_assert_int_eq(strata_dev_copy(dev, dpages, cpu, bytes, NULL), 0);
				}
				strata_index_decode_params d = { .fmt = fmt, .pages = cpu, .slots = slots,
								 .n = n, .B = B, .dst = ycpu };
				ck_assert_int_eq(strata_k_index_decode_cpu(&d), 0);
				d.pages = dpages;
				d.slots = ds;
				d.dst = dy;
				ck_assert_int_eq(strata_k_index_decode(dev, &d, NULL), 0);
				to_host(ygpu, dy, (size_t)n * 128 * sizeof *ygpu);
				same_floats(ycpu, ygpu, (size_t)n * 128, "index decode");
			}
			strata_dev_free(dev, dy);
			strata_dev_free(dev, dpages);
			strata_dev_free(dev, ds);
			strata_dev_free(dev, dx);
			free(ycpu);
			free(ygpu);
			free(cpu);
			free(gpu);
			free(x);
			free(slots);
		}
	}
	close_gpu();
}
END_TEST

/* The vector loads need aligned fp32 arrays; a misaligned one is refused, not run. */
START_TEST(misaligned_refused)
{
	open_gpu();
	float *dx = dalloc(2 * 512 * sizeof(float));
	uint8_t *dpool = dalloc(2 * strata_main_block_stride(1));
	strata_main_encode_params p = { .src = dx + 1, .n = 1, .B = 1, .pool = dpool };
	ck_assert_int_eq(strata_k_main_encode(dev, &p, NULL), -EINVAL);
	strata_index_encode_params ip = { .fmt = STRATA_INDEX_FP8, .src = dx + 2, .n = 1, .B = 1,
					  .pages = dpool };
	ck_assert_int_eq(strata_k_index_encode(dev, &ip, NULL), -EINVAL);
	p.src = dx;
	p.n = 0;
	ck_assert_int_eq(strata_k_main_encode(dev, &p, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	strata_dev_free(dev, dpool);
	strata_dev_free(dev, dx);
	close_gpu();
}
END_TEST

int main(void)
{
	tu_require_gpu();
	Suite *s = suite_create("kernels_format_gpu");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, main_matches_cpu);
	tcase_add_test(tc, index_matches_cpu);
	tcase_add_test(tc, misaligned_refused);
	suite_add_tcase(s, tc);
	/* tu_require_gpu() has initialised CUDA in this process, and CUDA cannot be used in
	 * a child forked after that, so this program runs its tests unforked. */
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
