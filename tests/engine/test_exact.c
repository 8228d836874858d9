/* Reference engine on the CPU backend: compressor known cases, chunked == one-shot
 * prefill, and HiSparse (both fetch paths) / swap-in outputs bit-identical to
 * all-resident. */
#include <check.h>
#include <errno.h>
#include <math.h>

#include "testutil.h"
#include "engine/engine.h"
#include "engine/ref_int.h"

static strata_dev *open_cpu(void)
{
	strata_dev_config c = STRATA_DEV_CONFIG_INIT;
	c.backend = STRATA_BACKEND_CPU;
	strata_dev *d = NULL;
	ck_assert_int_eq(strata_dev_open(&c, &d), 0);
	return d;
}

/* Independent C4/C128 compressor over a full history: entry p div ratio at (p+1) %
 * ratio == 0 from rows p-coff*ratio+1 .. p (C4: the older group gives dims [0,d),
 * the newer [d,2d)); rows before position 0 have score -inf. */
static void check_compressor(int ratio, int d, int n_pos)
{
	ref_comp c;
	ck_assert_int_eq(ref_comp_init(&c, ratio, d, 77), 0);
	float *state = malloc(sizeof(float) * ref_comp_state_floats(&c));
	ref_comp_state_reset(&c, state);
	int kvn = c.coff * d;
	float *hist = malloc(sizeof(float) * (size_t)n_pos * 2 * kvn);
	float *h = malloc(sizeof(float) * (size_t)n_pos * REF_HID);
	uint64_t s = 5;
	for (int i = 0; i < n_pos * REF_HID; i++)
		h[i] = tu_uniform(&s);
	double freqs[32];
	ref_rope_freqs(freqs);
	float *got = malloc(sizeof(float) * d), *want = malloc(sizeof(float) * d);
	int emitted = 0;
	for (int p = 0; p < n_pos; p++) {
		/* the row: kv = W[0:kvn] h, score = W[kvn:2kvn] h + ape[p % ratio] */
		for (int i = 0; i < 2 * kvn; i++) {
			float acc = 0.0f;
			for (int j = 0; j < REF_HID; j++)
				acc += c.w[(size_t)i * REF_HID + j] * h[p * REF_HID + j];
			hist[(size_t)p * 2 * kvn + i] = acc + (i >= kvn ? c.ape[(p % ratio) * kvn + i - kvn] : 0.0f);
		}
		int e = ref_comp_push(&c, state, h + p * REF_HID, p, freqs, got);
		ck_assert_int_eq(e, (p + 1) % ratio == 0);
		if (!e)
			continue;
		emitted++;
		for (int i = 0; i < d; i++) {
			float m = -INFINITY, z = 0.0f, acc = 0.0f;
			for (int pass = 0; pass < 2; pass++)
				for (int q = p - c.coff * ratio + 1; q <= p; q++) {
					if (q < 0)
						continue; /* score -inf: no weight */
					int off = (c.coff == 2 && q > p - ratio) ? d + i : i;
					float sc = hist[(size_t)q * 2 * kvn + kvn + off];
					if (pass == 0) {
						m = fmaxf(m, sc);
					} else {
						float w = expf(sc - m);
						z += w;
						acc += w * hist[(size_t)q * 2 * kvn + off];
					}
				}
			want[i] = acc / z;
		}
		ref_rmsnorm(want, d, c.norm_w);
		ref_rope(want + d - 64, freqs, p + 1 - ratio);
		for (int i = 0; i < d; i++)
			ck_assert_msg(fabsf(got[i] - want[i]) <= 1e-5f * (1.0f + fabsf(want[i])),
				      "ratio %d p %d dim %d: %g vs %g", ratio, p, i, got[i], want[i]);
	}
	ck_assert_int_eq(emitted, n_pos / ratio);
	free(state);
	free(hist);
	free(h);
	free(got);
	free(want);
	ref_comp_free(&c);
}

START_TEST(compressor_c4)
{
	check_compressor(4, 512, 23);
	check_compressor(4, 128, 13);
}
END_TEST

START_TEST(compressor_c128)
{
	check_compressor(128, 512, 300);
}
END_TEST

START_TEST(hadamard_and_rope)
{
	float x[128], y[128];
	uint64_t s = 3;
	for (int i = 0; i < 128; i++)
		x[i] = y[i] = tu_uniform(&s);
	ref_hadamard128(y);
	ref_hadamard128(y); /* H/sqrt(n) is its own inverse */
	for (int i = 0; i < 128; i++)
		ck_assert_float_eq_tol(y[i], x[i], 1e-5f);
	double f[32];
	ref_rope_freqs(f);
	ck_assert_double_eq(f[0], 1.0); /* highest frequency kept */
	ck_assert_double_eq_tol(f[31], pow(160000.0, -62.0 / 64.0) / 16.0, 1e-18); /* lowest / 16 */
	float r[64];
	memcpy(r, x, sizeof r);
	ref_rope(r, f, 0);
	ck_assert_mem_eq(r, x, sizeof r); /* position 0: identity */
	ref_rope(r, f, 1000);
	float n0 = 0, n1 = 0;
	for (int i = 0; i < 64; i++) {
		n0 += x[i] * x[i];
		n1 += r[i] * r[i];
	}
	ck_assert_float_eq_tol(n0, n1, 1e-4f); /* a rotation */
}
END_TEST

#define HOST_HUGE 0x100 /* make_direct: direct | HOST_HUGE: host_tier HUGE */
#define EARLY_DRY 0x200 /* EARLY with early_dry */
#define EARLY_FEW 0x400 /* EARLY with 4 early slots per request */

static strata_ref_engine *make_direct(strata_dev *d, strata_ref_mode mode, int direct, int n_req,
				      int hot, uint64_t seed, strata_ref_inputs in)
{
	strata_ref_config c = STRATA_REF_CONFIG_INIT;
	ck_assert_int_eq(strata_model_preset("tiny", &c.model), 0);
	c.mode = mode;
	c.direct_misses = direct & ~HOST_HUGE;
	c.host_tier = direct & HOST_HUGE ? STRATA_REF_HOST_HUGE : STRATA_REF_HOST_PINNED;
	c.direct_misses &= ~(EARLY_DRY | EARLY_FEW);
	c.early_dry = !!(direct & EARLY_DRY);
	c.early_slots = direct & EARLY_FEW ? 4 : 0;
	c.n_req = n_req;
	c.max_ctx = 2048;
	c.hot_slots = hot;
	c.seed = seed;
	c.inputs = in;
	strata_ref_engine *e = NULL;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), 0);
	return e;
}

static strata_ref_engine *make(strata_dev *d, strata_ref_mode mode, int n_req, int hot,
			       uint64_t seed, strata_ref_inputs in)
{
	return make_direct(d, mode, 0, n_req, hot, seed, in);
}

static void run(strata_ref_engine *e, int n_req, int steps)
{
	for (int r = 0; r < n_req; r++)
		ck_assert_int_eq(strata_ref_engine_prefill(e, r, 400 + 150 * r), 0);
	for (int i = 0; i < steps; i++)
		ck_assert_int_eq(strata_ref_engine_decode_step(e), 0);
}

static void modes_identical(strata_ref_inputs in)
{
	strata_dev *d = open_cpu();
	enum { R = 3, STEPS = 16 };
	int topk = 64;
	strata_ref_engine *a = make(d, STRATA_REF_ALL_RESIDENT, R, 0, 11, in);
	/* A hot cache barely larger than one selection: evictions every step. */
	strata_ref_engine *b = make(d, STRATA_REF_HISPARSE, R, topk + 16, 11, in);
	strata_ref_engine *c = make(d, STRATA_REF_SWAPIN, R, 0, 11, in);
	run(a, R, STEPS);
	run(b, R, STEPS);
	run(c, R, STEPS);
	/* misses read in place, staged, AUTO (the CPU plan has one head group: in
	 * place) and EARLY, admitted after attention */
	static const int paths[] = { STRATA_REF_MISS_IN_PLACE, STRATA_REF_MISS_STAGED,
				     STRATA_REF_MISS_AUTO, STRATA_REF_MISS_EARLY,
				     STRATA_REF_MISS_AUTO | HOST_HUGE,
				     STRATA_REF_MISS_EARLY | EARLY_DRY,
				     STRATA_REF_MISS_EARLY | EARLY_FEW };
	uint64_t stage_bytes[7], host_b[7];
	for (int pi = 0; pi < 7; pi++) {
		strata_ref_engine *dm =
			make_direct(d, STRATA_REF_HISPARSE, paths[pi], R, topk + 16, 11, in);
		run(dm, R, STEPS);
		ck_assert_msg(strata_ref_engine_digest(a) == strata_ref_engine_digest(dm),
			      "direct_misses %d differs from all-resident", paths[pi]);
		strata_ref_stats sd;
		strata_ref_engine_stats(dm, &sd);
		ck_assert_uint_gt(sd.misses, 0); /* entries really came from the host tier */
		ck_assert_uint_gt(sd.hits, 0);   /* and from the hot cache */
		stage_bytes[pi] = sd.hot_bytes;
		host_b[pi] = sd.host_bytes;
		/* the path taken: AUTO resolves (one head group on the CPU: in place) */
		const int base = paths[pi] & ~(HOST_HUGE | EARLY_DRY | EARLY_FEW);
		ck_assert_int_eq(sd.miss_path,
				 base == STRATA_REF_MISS_AUTO ? STRATA_REF_MISS_IN_PLACE : base);
		if (paths[pi] == (STRATA_REF_MISS_EARLY | EARLY_DRY)) {
			/* no staging kernel: the index map copies every miss */
			ck_assert_uint_eq(sd.early_misses, 0);
			ck_assert_uint_eq(sd.late_misses, sd.misses);
		} else if (paths[pi] == (STRATA_REF_MISS_EARLY | EARLY_FEW)) {
			/* 4 slots a request: the staging takes some, the map the rest */
			ck_assert_uint_gt(sd.early_misses, 0);
			ck_assert_uint_gt(sd.late_misses, 0);
			ck_assert_uint_eq(sd.early_misses + sd.late_misses, sd.misses);
		} else if (paths[pi] == STRATA_REF_MISS_EARLY) {
			/* the early staging runs in order on the CPU, from the exact cut of
			 * each row, with room for 2 x topk: it takes every miss, the index
			 * map copies none */
			ck_assert_uint_eq(sd.early_misses, sd.misses);
			ck_assert_uint_eq(sd.late_misses, 0);
		} else {
			ck_assert_uint_eq(sd.early_misses + sd.late_misses, 0);
		}
		strata_ref_engine_destroy(dm);
	}
	/* only STAGED holds a staging pool: R x topk entries */
	ck_assert_uint_eq(stage_bytes[1] - stage_bytes[0],
			  (uint64_t)((R * topk + 63) / 64) * strata_main_block_stride(64));
	ck_assert_uint_eq(stage_bytes[2], stage_bytes[0]);
	/* the host tier in tiers/ host pools holds the same bytes */
	ck_assert_uint_eq(host_b[4], host_b[2]);
	ck_assert_uint_eq(stage_bytes[4], stage_bytes[2]);
	/* EARLY: three times that (the map's entries, then 2 x topk per request for the
	 * early copies) */
	ck_assert_uint_eq(stage_bytes[3] - stage_bytes[0],
			  (uint64_t)((3 * R * topk + 63) / 64) * strata_main_block_stride(64));
	int ns, nl, ns2, nl2;
	const uint64_t *ha = strata_ref_engine_hashes(a, &ns, &nl);
	const uint64_t *hb = strata_ref_engine_hashes(b, &ns2, &nl2);
	ck_assert_int_eq(ns, STEPS);
	ck_assert_int_eq(ns2, STEPS);
	ck_assert_int_eq(nl, 6);
	for (int i = 0; i < ns * nl; i++)
		ck_assert_msg(ha[i] == hb[i], "step %d layer %d differs", i / nl, i % nl);
	ck_assert_uint_eq(strata_ref_engine_digest(a), strata_ref_engine_digest(c));
	/* Outputs change from step to step (the test is not vacuous). */
	ck_assert(ha[0 * nl + 1] != ha[1 * nl + 1]);
	/* The selection is a real top-k (fewer than the candidates) and agrees. */
	const int32_t *sa = strata_ref_engine_selection(a, 1, 0);
	const int32_t *sb = strata_ref_engine_selection(b, 1, 0);
	ck_assert_ptr_nonnull(sa);
	ck_assert_mem_eq(sa, sb, sizeof(int32_t) * topk);
	ck_assert_int_ge(sa[topk - 1], topk); /* not simply 0..k-1 */
	strata_ref_stats st;
	strata_ref_engine_stats(b, &st);
	ck_assert_uint_gt(st.misses, 0);
	ck_assert_uint_gt(st.hits, 0);
	printf("hisparse %s: hits %llu misses %llu\n", in == STRATA_REF_STRUCTURED ? "structured" : "uniform", (unsigned long long)st.hits, (unsigned long long)st.misses);
	strata_ref_stats sa_st;
	strata_ref_engine_stats(a, &sa_st);
	ck_assert_uint_lt(st.device_bytes, sa_st.device_bytes);
	ck_assert_uint_eq(sa_st.host_bytes, 0);
	if (in == STRATA_REF_STRUCTURED)
		ck_assert_msg(st.hits * 4 > st.hits + st.misses, "hit rate %.2f too low for drifting inputs",
			      (double)st.hits / (double)(st.hits + st.misses));
	strata_ref_engine_destroy(a);
	strata_ref_engine_destroy(b);
	strata_ref_engine_destroy(c);
	strata_dev_close(d);
}

START_TEST(hisparse_identical_structured)
{
	modes_identical(STRATA_REF_STRUCTURED);
}
END_TEST

START_TEST(hisparse_identical_uniform)
{
	modes_identical(STRATA_REF_UNIFORM);
}
END_TEST

START_TEST(direct_misses_needs_hisparse)
{
	strata_dev *d = open_cpu();
	strata_ref_config c = STRATA_REF_CONFIG_INIT;
	ck_assert_int_eq(strata_model_preset("tiny", &c.model), 0);
	c.max_ctx = 1024;
	strata_ref_engine *e = NULL;
	c.direct_misses = 1; /* all-resident has no misses to read in place */
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), -EINVAL);
	c.mode = STRATA_REF_SWAPIN;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), -EINVAL);
	c.mode = STRATA_REF_HISPARSE;
	c.direct_misses = STRATA_REF_MISS_EARLY + 1;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), -EINVAL);
	c.direct_misses = -1;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), -EINVAL);
	ck_assert_ptr_null(e);
	c.direct_misses = 1;
	c.attn_tensor_cores = 2; /* 0 or 1 */
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), -EINVAL);
	c.attn_tensor_cores = 1; /* the CPU twin ignores it */
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), 0);
	strata_ref_engine_destroy(e);
	strata_dev_close(d);
}
END_TEST

/* The trace: every CSA layer's points in order, the other layers without indexer
 * points, the step's own row; the diagnostic host tier in "device" memory and spare
 * SMs change no output; bad values are refused. */
START_TEST(trace_and_diagnostics)
{
	strata_dev *d = open_cpu();
	strata_ref_engine *a = make(d, STRATA_REF_ALL_RESIDENT, 2, 0, 9, STRATA_REF_STRUCTURED);
	float t[STRATA_REF_T_POINTS];
	ck_assert_int_eq(strata_ref_engine_trace(a, 0, t), -ENODATA);
	strata_ref_config c = STRATA_REF_CONFIG_INIT;
	ck_assert_int_eq(strata_model_preset("tiny", &c.model), 0);
	c.mode = STRATA_REF_HISPARSE;
	c.direct_misses = STRATA_REF_MISS_AUTO;
	c.n_req = 2;
	c.max_ctx = 2048;
	c.seed = 9;
	c.hot_slots = 80; /* barely more than a selection: misses every step */
	c.trace = 1;
	c.host_tier = STRATA_REF_HOST_DEVICE;
	c.attn_spare_sms = 3;
	strata_ref_engine *b = NULL;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &b), 0);
	run(a, 2, 3);
	run(b, 2, 3);
	ck_assert_uint_eq(strata_ref_engine_digest(a), strata_ref_engine_digest(b));
	float s0[STRATA_REF_T_POINTS];
	ck_assert_int_eq(strata_ref_engine_trace(b, -1, s0), 0);
	ck_assert_float_ge(s0[0], 0.0f);
	float prev = s0[0];
	int n_csa = 0;
	for (int l = 0; l < c.model.n_layers; l++) {
		ck_assert_int_eq(strata_ref_engine_trace(b, l, t), 0);
		ck_assert_float_ge(t[STRATA_REF_T_START], prev);
		if (t[STRATA_REF_T_INDEXED] >= 0) { /* a CSA layer */
			n_csa++;
			ck_assert_float_ge(t[STRATA_REF_T_INDEXED], t[STRATA_REF_T_START]);
			ck_assert_float_ge(t[STRATA_REF_T_MAPPED], t[STRATA_REF_T_INDEXED]);
			ck_assert_float_ge(t[STRATA_REF_T_ATTENDED], t[STRATA_REF_T_MAPPED]);
			ck_assert_float_ge(t[STRATA_REF_T_SIDE], t[STRATA_REF_T_ATTENDED]);
		} else {
			ck_assert_float_eq(t[STRATA_REF_T_MAPPED], -1.0f);
			ck_assert_float_eq(t[STRATA_REF_T_SIDE], -1.0f);
			ck_assert_float_ge(t[STRATA_REF_T_ATTENDED], t[STRATA_REF_T_START]);
		}
		prev = t[STRATA_REF_T_ATTENDED];
	}
	ck_assert_int_eq(n_csa, strata_model_count(&c.model, 4));
	ck_assert_float_ge(s0[1], prev);
	ck_assert_int_eq(strata_ref_engine_trace(b, c.model.n_layers, t), -EINVAL);
	ck_assert_int_eq(strata_ref_engine_trace(b, -2, t), -EINVAL);
	ck_assert_int_eq(strata_ref_engine_trace(b, 0, NULL), -EINVAL);
	strata_ref_stats st;
	strata_ref_engine_stats(b, &st);
	ck_assert_uint_gt(st.misses, 0);
	strata_ref_engine_destroy(a);
	strata_ref_engine_destroy(b);
	strata_ref_engine *e = NULL;
	c.host_tier = STRATA_REF_HOST_DEVICE + 1;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), -EINVAL);
	c.host_tier = STRATA_REF_HOST_PINNED;
	c.attn_spare_sms = -1;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), -EINVAL);
	c.attn_spare_sms = 0;
	c.early_ctas = -1;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), -EINVAL);
	c.early_ctas = 0;
	c.early_slots = -1;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), -EINVAL);
	c.early_slots = 2 * c.model.index_topk + 1; /* more than the staging holds */
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), -EINVAL);
	c.early_slots = 0;
	c.early_dry = 2;
	ck_assert_int_eq(strata_ref_engine_create(d, &c, &e), -EINVAL);
	ck_assert_ptr_null(e);
	strata_dev_close(d);
}
END_TEST

START_TEST(chunked_prefill_identical)
{
	strata_dev *d = open_cpu();
	strata_ref_engine *a = make(d, STRATA_REF_ALL_RESIDENT, 1, 0, 5, STRATA_REF_STRUCTURED);
	strata_ref_engine *b = make(d, STRATA_REF_ALL_RESIDENT, 1, 0, 5, STRATA_REF_STRUCTURED);
	ck_assert_int_eq(strata_ref_engine_prefill(a, 0, 1000), 0);
	static const int chunks[] = { 1, 3, 100, 255, 128, 129, 384 };
	int total = 0;
	for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
		ck_assert_int_eq(strata_ref_engine_prefill(b, 0, chunks[i]), 0);
		total += chunks[i];
	}
	ck_assert_int_eq(total, 1000);
	ck_assert_int_eq(strata_ref_engine_length(b, 0), 1000);
	uint64_t ha = strata_ref_engine_cache_hash(a, 0);
	ck_assert_uint_ne(ha, 0);
	ck_assert_uint_eq(ha, strata_ref_engine_cache_hash(b, 0));
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(strata_ref_engine_decode_step(a), 0);
		ck_assert_int_eq(strata_ref_engine_decode_step(b), 0);
	}
	ck_assert_uint_eq(strata_ref_engine_digest(a), strata_ref_engine_digest(b));
	/* One more token changes the cache: the hash sees it. */
	ck_assert_int_eq(strata_ref_engine_prefill(b, 0, 1), 0);
	ck_assert_uint_ne(strata_ref_engine_cache_hash(a, 0), strata_ref_engine_cache_hash(b, 0));
	strata_ref_engine_destroy(a);
	strata_ref_engine_destroy(b);
	strata_dev_close(d);
}
END_TEST

START_TEST(seed_changes_outputs)
{
	strata_dev *d = open_cpu();
	strata_ref_engine *a = make(d, STRATA_REF_ALL_RESIDENT, 1, 0, 1, STRATA_REF_STRUCTURED);
	strata_ref_engine *b = make(d, STRATA_REF_ALL_RESIDENT, 1, 0, 2, STRATA_REF_STRUCTURED);
	run(a, 1, 2);
	run(b, 1, 2);
	ck_assert_uint_ne(strata_ref_engine_digest(a), strata_ref_engine_digest(b));
	ck_assert_int_eq(strata_ref_engine_prefill(a, 0, 4096), -ENOSPC);
	/* a full request: the step is refused and nothing changes */
	const int len = strata_ref_engine_length(a, 0);
	ck_assert_int_eq(strata_ref_engine_prefill(a, 0, 2048 - len), 0);
	int ns0, ns1;
	(void)strata_ref_engine_hashes(a, &ns0, NULL);
	ck_assert_int_eq(strata_ref_engine_decode_step(a), -ENOSPC);
	(void)strata_ref_engine_hashes(a, &ns1, NULL);
	ck_assert_int_eq(ns1, ns0);
	ck_assert_int_eq(strata_ref_engine_length(a, 0), 2048);
	strata_ref_engine_destroy(a);
	strata_ref_engine_destroy(b);
	strata_ref_engine_destroy(NULL);
	strata_dev_close(d);
}
END_TEST

/* The benchmarks' synthetic fill: the modes still agree bit for bit after it. */
START_TEST(fill_then_decode_identical)
{
	strata_dev *d = open_cpu();
	uint64_t dg[3];
	for (int m = 0; m < 3; m++) {
		strata_ref_engine *e = make(d, (strata_ref_mode)m, 2, 80, 9, STRATA_REF_STRUCTURED);
		ck_assert_int_eq(strata_ref_engine_fill(e, 0, 1500), 0);
		ck_assert_int_eq(strata_ref_engine_fill(e, 1, 1100), 0);
		ck_assert_int_eq(strata_ref_engine_fill(e, 1, 10), -EINVAL); /* not empty */
		ck_assert_int_eq(strata_ref_engine_length(e, 0), 1500);
		for (int i = 0; i < 6; i++)
			ck_assert_int_eq(strata_ref_engine_decode_step(e), 0);
		const int32_t *sel = strata_ref_engine_selection(e, 1, 0);
		ck_assert_int_ge(sel[63], 64);
		dg[m] = strata_ref_engine_digest(e);
		strata_ref_engine_destroy(e);
	}
	ck_assert_uint_eq(dg[0], dg[1]);
	ck_assert_uint_eq(dg[0], dg[2]);
	strata_dev_close(d);
}
END_TEST

/* The decode step writes its new entries from per-layer device staging in its device
 * phase, prefill through ref_append_tokens(): the caches (windows, compressor state,
 * C4 wherever it lives, C128, index pages) must end up byte-identical, in every mode,
 * for several requests at once; and the step reports its two phases. */
START_TEST(decode_writes_match_prefill)
{
	strata_dev *d = open_cpu();
	enum { R = 3, STEPS = 9 };
	for (int m = 0; m < 3; m++) {
		strata_ref_engine *a = make(d, (strata_ref_mode)m, R, 0, 21, STRATA_REF_STRUCTURED);
		strata_ref_engine *b = make(d, (strata_ref_mode)m, R, 0, 21, STRATA_REF_STRUCTURED);
		/* Lengths chosen so that the steps complete C4 groups, C128 groups and wrap
		 * the window ring at different steps for different requests. */
		static const int len0[R] = { 250, 377, 126 };
		for (int r = 0; r < R; r++) {
			ck_assert_int_eq(strata_ref_engine_prefill(a, r, len0[r]), 0);
			ck_assert_int_eq(strata_ref_engine_prefill(b, r, len0[r] + STEPS), 0);
		}
		for (int i = 0; i < STEPS; i++)
			ck_assert_int_eq(strata_ref_engine_decode_step(a), 0);
		for (int r = 0; r < R; r++) {
			ck_assert_int_eq(strata_ref_engine_length(a, r), len0[r] + STEPS);
			uint64_t h = strata_ref_engine_cache_hash(a, r);
			ck_assert_uint_ne(h, 0);
			ck_assert_msg(h == strata_ref_engine_cache_hash(b, r),
				      "mode %d request %d: decode-step caches differ from prefill", m, r);
		}
		strata_ref_stats st;
		strata_ref_engine_stats(a, &st);
		ck_assert_uint_eq(st.steps, STEPS);
		ck_assert_uint_gt(st.last_device_ns, 0);
		ck_assert_uint_ge(st.device_ns, st.last_device_ns);
		ck_assert_uint_gt(st.last_prep_ns, 0);
		ck_assert_uint_ge(st.prep_ns, st.last_prep_ns);
		ck_assert_uint_gt(st.last_launch_ns, 0);
		strata_ref_engine_destroy(a);
		strata_ref_engine_destroy(b);
	}
	strata_dev_close(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("engine_exact");
	TCase *tc = tcase_create("cpu");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, compressor_c4);
	tcase_add_test(tc, compressor_c128);
	tcase_add_test(tc, hadamard_and_rope);
	tcase_add_test(tc, hisparse_identical_structured);
	tcase_add_test(tc, hisparse_identical_uniform);
	tcase_add_test(tc, direct_misses_needs_hisparse);
	tcase_add_test(tc, trace_and_diagnostics);
	tcase_add_test(tc, chunked_prefill_identical);
	tcase_add_test(tc, seed_changes_outputs);
	tcase_add_test(tc, fill_then_decode_identical);
	tcase_add_test(tc, decode_writes_match_prefill);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
