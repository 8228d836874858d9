/* Early staging on the GPU against the CPU twin, with test_prestage.c's cases and
 * checks (included below, its tests left out): the host tier in pinned mapped memory,
 * everything else in device memory.
 *   - prestage: the checks of pc_check (every mark a non-resident candidate below the
 *     limit, in the row's slots, each entry once, holding the host bytes, nothing
 *     else written); with a large enough cap the SET of marks per row equals the
 *     twin's (slot order may differ), with a small one exactly cap per row; the
 *     scratch is zero after every call (a second call reuses it unzeroed), and
 *     n_staged grows by the marks made.
 *   - map with stage_map: word for word the CPU map's output on the same inputs (the
 *     GPU's marks), same stage bytes and miss counts; against the all-CPU pipeline
 *     the same list up to the numbering of early-staged entries.
 *   - a cut never published (every word of a stale epoch), wait_us 5: the call
 *     returns, stages nothing, leaves the scratch zero; the same scratch then serves
 *     a call whose words are published.
 *   - indexer with after_scan and cut_out: the same ids as without; its scores (the
 *     strata_k_indexer_scores view) within test_indexer's tolerance of the twin's and
 *     ranking its own selection on top; each row's cut word carries the call's
 *     cut_epoch and strata_k_indexer_bucket (host) of the topk-th highest of the GPU's
 *     own scores (so the GPU's fp16 rounding is checked), CUT_ALL for limit <= topk;
 *     early staging polling those words on a second stream after after_scan leaves
 *     the map no miss to copy;
 *   - indexer with stage (the staging inside its filter launch): the same ids, the
 *     twin's marks from the GPU's own scores and cuts, n_staged, the scratch zero,
 *     and the map again copies no miss. */
#define PRESTAGE_HELPERS_ONLY
#include "test_prestage.c"

static strata_dev *dev;

static void *to_dev(const void *h, size_t n)
{
	void *d = NULL;
	ck_assert_int_eq(strata_dev_alloc(dev, n ? n : 1, &d), 0);
	if (h && n)
		ck_assert_int_eq(strata_dev_copy(dev, d, h, n, NULL), 0);
	return d;
}

static void from_dev(void *h, const void *d, size_t n)
{
	ck_assert_int_eq(strata_dev_copy(dev, h, d, n, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
}

/* A case's inputs on the device, taken before any call changes c's stage or stage_map;
 * dscores, dcut: device scores and cut words to use instead of c's (the indexer's). */
typedef struct gcase {
	strata_attn_prestage_params g;
	void *scores, *cut; /* ours to free, or NULL */
} gcase;

static void g_make(gcase *d, const pc *c, const float *dscores, const unsigned long long *dcut)
{
	const strata_attn_prestage_params *p = &c->p;
	const int R = p->n_rows;
	d->g = *p;
	d->scores = dscores ? NULL : to_dev(p->scores, sizeof(float) * R * p->score_stride);
	d->g.scores = dscores ? dscores : d->scores;
	d->cut = dcut ? NULL : to_dev(p->cut, sizeof(unsigned long long) * R);
	d->g.cut = dcut ? dcut : d->cut;
	d->g.row_limit = to_dev(c->limit, sizeof(int32_t) * R);
	d->g.row_map = to_dev(c->row_map, sizeof(int32_t) * R);
	d->g.row_base = to_dev(c->row_base, sizeof(int32_t) * R);
	d->g.map = to_dev(c->map, sizeof(int32_t) * c->f.n_maps * p->map_stride);
	uint8_t *pinned = NULL;
	ck_assert_int_eq(strata_dev_host_alloc(dev, c->host_bytes, (void **)&pinned), 0);
	memcpy(pinned, c->host, c->host_bytes);
	d->g.host = pinned;
	d->g.stage = to_dev(c->stage, c->stage_bytes);
	d->g.stage_map = to_dev(p->stage_map, sizeof(uint64_t) * R * p->map_stride);
	d->g.scratch = to_dev(NULL, p->scratch_bytes); /* zero once; each call leaves it zero */
	ck_assert_int_eq(strata_dev_memset(dev, d->g.scratch, 0, p->scratch_bytes, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0); /* streams are non-blocking */
}

static void g_free(gcase *d)
{
	strata_dev_free(dev, d->scores);
	strata_dev_free(dev, d->cut);
	strata_dev_free(dev, (void *)d->g.row_limit);
	strata_dev_free(dev, (void *)d->g.row_map);
	strata_dev_free(dev, (void *)d->g.row_base);
	strata_dev_free(dev, (void *)d->g.map);
	strata_dev_host_free(dev, (void *)d->g.host);
	strata_dev_free(dev, d->g.stage);
	strata_dev_free(dev, d->g.stage_map);
	strata_dev_free(dev, d->g.scratch);
}

/* One GPU prestage call with epoch on stream s; gsm / gst receive the device's
 * stage_map and stage afterwards, and the scratch must be zero again. Returns what it
 * added to n_staged. */
static long g_prestage(const pc *c, gcase *d, uint64_t epoch, strata_stream *s, uint64_t *gsm,
		       uint8_t *gst)
{
	unsigned long long *dn = to_dev(NULL, sizeof *dn), staged = 0;
	ck_assert_int_eq(strata_dev_memset(dev, dn, 0, sizeof *dn, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	d->g.epoch = epoch;
	d->g.n_staged = dn;
	ck_assert_int_eq(strata_k_attn_prestage(dev, &d->g, s), 0);
	ck_assert_int_eq(strata_stream_sync(dev, s), 0);
	d->g.n_staged = NULL;
	from_dev(&staged, dn, sizeof staged);
	strata_dev_free(dev, dn);
	from_dev(gsm, d->g.stage_map, sizeof(uint64_t) * c->p.n_rows * c->p.map_stride);
	from_dev(gst, d->g.stage, c->stage_bytes);
	uint8_t *scr = malloc(c->p.scratch_bytes);
	from_dev(scr, d->g.scratch, c->p.scratch_bytes);
	check_zero(scr, c->p.scratch_bytes);
	free(scr);
	return (long)staged;
}

/* The GPU map over ids (host; dids: the same on the device, or NULL to upload them)
 * with the device's marks, on stream s, against the CPU map on the same inputs (gsm,
 * gst: host copies of the device's stage_map and stage). The list positions' entries
 * are poisoned on both sides first. Leaves gst equal to the device stage afterwards;
 * gout gets the GPU list, cnt map_check's counts. */
static void g_map(pc *c, gcase *d, const int32_t *ids, const int32_t *dids, int W,
		  uint64_t epoch, strata_stream *s, uint64_t *gsm, uint8_t *gst, int32_t *gout,
		  long cnt[3])
{
	const int R = c->p.n_rows;
	const size_t nl = (size_t)R * W;
	for (size_t i = 0; i < nl; i++) {
		memset((uint8_t *)attn_entry_data(gst, c->p.stage_B, (int64_t)i), 0xee, 576);
		memset((uint8_t *)attn_entry_scales(gst, c->p.stage_B, (int64_t)i), 0xee, 8);
	}
	ck_assert_int_eq(strata_dev_copy(dev, d->g.stage, gst, c->stage_bytes, NULL), 0);
	void *up = dids ? NULL : to_dev(ids, sizeof(int32_t) * nl);
	int32_t *dout = to_dev(NULL, sizeof(int32_t) * nl);
	unsigned long long *dmc = to_dev(NULL, 2 * sizeof(unsigned long long)), mc[2];
	ck_assert_int_eq(strata_dev_memset(dev, dmc, 0, sizeof mc, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	strata_attn_map_params mp = { .n_rows = R, .width = W, .ids = dids ? dids : up,
				      .row_base = d->g.row_base, .out = dout, .map = d->g.map,
				      .row_map = d->g.row_map, .map_stride = c->p.map_stride,
				      .host = d->g.host, .host_B = c->p.host_B, .stage = d->g.stage,
				      .stage_B = c->p.stage_B, .stage_map = d->g.stage_map,
				      .epoch = epoch, .miss_counts = dmc };
	ck_assert_int_eq(strata_k_attn_map(dev, &mp, s), 0);
	ck_assert_int_eq(strata_stream_sync(dev, s), 0);
	uint8_t *after = malloc(c->stage_bytes);
	from_dev(gout, dout, sizeof(int32_t) * nl);
	from_dev(after, d->g.stage, c->stage_bytes);
	from_dev(mc, dmc, sizeof mc);
	/* the CPU map on the GPU's marks: c's stage and stage_map swapped for the copies */
	uint8_t *keep = c->stage;
	uint64_t *keep_sm = c->p.stage_map;
	c->stage = c->p.stage = gst;
	c->p.stage_map = gsm;
	int32_t *cout = malloc(sizeof(int32_t) * nl);
	map_check(c, ids, W, epoch, cout, cnt);
	c->stage = c->p.stage = keep;
	c->p.stage_map = keep_sm;
	ck_assert_mem_eq(gout, cout, sizeof(int32_t) * nl);
	ck_assert_msg(!memcmp(after, gst, c->stage_bytes), "GPU map's stage differs from the CPU's");
	ck_assert_uint_eq(mc[0], (unsigned long long)cnt[1]);
	ck_assert_uint_eq(mc[1], (unsigned long long)cnt[2]);
	strata_dev_free(dev, up);
	strata_dev_free(dev, dout);
	strata_dev_free(dev, dmc);
	free(after);
	free(cout);
}

/* Lists of the GPU pipeline and the CPU one agree except where both name an
 * early-staged entry (at or past stage_first; the slot order may differ). */
static void same_up_to_entries(const pc *c, const int32_t *a, const int32_t *b, size_t n)
{
	const int32_t early = -2 - (int32_t)c->p.stage_first; /* out <= early: a staged slot */
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(a[i] == b[i] || (a[i] <= early && b[i] <= early),
			      "position %zu: gpu %d cpu %d", i, a[i], b[i]);
}

/* The whole comparison for one case: GPU prestage with epoch e (above the stale marks
 * pc_stage left; then again with e + 1 on the same scratch), the twin, and the maps of
 * both pipelines over each row's top-k. */
static void run_gpu_case(pc *c, int full, uint64_t e)
{
	const int R = c->p.n_rows, W = c->p.topk;
	const size_t nw = (size_t)R * c->p.map_stride, nl = (size_t)R * W;
	gcase d;
	g_make(&d, c, NULL, NULL);
	uint64_t *sm0 = malloc(sizeof(uint64_t) * nw), *gsm = malloc(sizeof(uint64_t) * nw);
	uint64_t *gsm2 = malloc(sizeof(uint64_t) * nw);
	uint8_t *st0 = malloc(c->stage_bytes), *gst = malloc(c->stage_bytes);
	uint8_t *gst2 = malloc(c->stage_bytes);
	memcpy(sm0, c->p.stage_map, sizeof(uint64_t) * nw);
	memcpy(st0, c->stage, c->stage_bytes);
	const long staged = g_prestage(c, &d, e, NULL, gsm, gst);
	long ng = pc_check(c, gsm, gst, sm0, st0, e, full);
	ck_assert_int_eq(staged, ng);
	long nc = pc_run(c, e, full);
	ck_assert_int_eq(ng, nc);
	if (full) /* the same set of marked ids, row by row */
		for (size_t w = 0; w < nw; w++)
			ck_assert_msg((gsm[w] >> 24 == e) == (c->p.stage_map[w] >> 24 == e),
				      "row %zu id %zu: gpu and twin disagree", w / c->p.map_stride,
				      w % c->p.map_stride);
	int32_t *ids = topk_lists(c), *cout = malloc(sizeof(int32_t) * nl);
	int32_t *gout = malloc(sizeof(int32_t) * nl);
	long ccnt[3], gcnt[3];
	map_check(c, ids, W, e, cout, ccnt);
	g_map(c, &d, ids, NULL, W, e, NULL, gsm, gst, gout, gcnt);
	if (full) {
		same_up_to_entries(c, gout, cout, nl);
		ck_assert(gcnt[0] == ccnt[0] && gcnt[1] == ccnt[1] && gcnt[2] == ccnt[2]);
	}
	/* again with epoch e + 1, scratch not re-zeroed: the same marks renewed */
	ck_assert_int_eq(g_prestage(c, &d, e + 1, NULL, gsm2, gst2), ng);
	ck_assert_int_eq(pc_check(c, gsm2, gst2, gsm, gst, e + 1, full), ng);
	free(sm0); free(gsm); free(gsm2); free(st0); free(gst); free(gst2);
	free(ids); free(cout); free(gout);
	g_free(&d);
}

START_TEST(random_rows_full_cap)
{
	/* test_prestage.c's three cases: exact cuts, then mixed words (exact, jittered,
	 * stale: the CTAs poll wait_us and give up, CUT_ALL, above every bucket) */
	const pcfg *cfgs = random_cases;
	for (int t = 0; t < 3; t++) {
		pc c;
		pc_make(&c, &cfgs[t]);
		if (t)
			force_beyond(&c);
		if (t < 2)
			pc_covers(&c);
		uint64_t rng = 100 + t;
		pc_stage(&c, -1, 5, &rng);
		c.p.max_ctas = t == 1 ? 1 : t == 2 ? 3 : 0; /* capped grids loop over chunks */
		run_gpu_case(&c, 1, 5);
		pc_free(&c);
	}
}
END_TEST

/* 30 rows up to 60,000 entries: fewer CTAs per row than chunks (the loop over chunks),
 * rows of one chunk beside rows of fifteen. */
START_TEST(many_rows_long_limits)
{
	int lim[30], mode[30];
	uint64_t rng = 7;
	for (int r = 0; r < 30; r++) {
		lim[r] = r == 0 ? 60000 : r == 1 ? 8000 : (int)(tu_next(&rng) % 60000);
		mode[r] = r == 1 ? M_CLUSTER : M_WIDE;
	}
	pcfg f = { 30, 512, 60000, 2, 500, 64, 64, 0, lim, mode, 13, CUT_MIXED };
	pc c;
	pc_make(&c, &f);
	pc_stage(&c, -1, 3, &rng);
	run_gpu_case(&c, 1, 3);
	pc_free(&c);
}
END_TEST

/* Cap 100, fewer than any row's candidates: exactly 100 marks a row on the GPU too. */
START_TEST(small_cap)
{
	int lim[6] = { 513, 4097, 20000, 3001, 300, 1024 };
	int mode[6] = { M_WIDE, M_WIDE, M_WIDE, M_CLUSTER, M_WIDE, M_EQUAL };
	pcfg f = { 6, 512, 20000, 2, 500, 64, 64, 0, lim, mode, 21, CUT_JITTER };
	pc c;
	pc_make(&c, &f);
	uint64_t rng = 22;
	pc_stage(&c, 100, 0, &rng);
	ck_assert_int_gt(c.need, 100);
	ck_assert_int_ge(pc_capped(&c), 4);
	run_gpu_case(&c, 0, 1);
	pc_free(&c);
}
END_TEST

/* Every row's word of the previous cut_epoch (the indexer never got to publish), wait
 * 5 us: the call returns, stages nothing (stage_map, stage and n_staged unchanged) and
 * leaves the scratch zero. Then the words published: the same scratch, unzeroed,
 * serves a call that stages what the twin does. */
START_TEST(cut_never_published)
{
	int lim[4] = { 600, 5000, 20000, 60000 }, mode[4] = { M_WIDE, M_CLUSTER, M_WIDE, M_WIDE };
	pcfg f = { 4, 512, 60000, 2, 400, 64, 64, 0, lim, mode, 81, CUT_EXACT };
	pc c;
	pc_make(&c, &f);
	uint64_t rng = 82;
	pc_stage(&c, -1, 3, &rng); /* cap for the published words */
	ck_assert_int_gt(c.need, 0);
	unsigned long long good[4];
	memcpy(good, c.cut, sizeof good);
	for (int r = 0; r < 4; r++)
		c.cut[r] = cut_word(c.p.cut_epoch - 1, (uint32_t)(good[r] & 0xfff));
	gcase d;
	g_make(&d, &c, NULL, NULL);
	d.g.wait_us = 5;
	const size_t nw = (size_t)4 * 60000;
	uint64_t *sm0 = malloc(sizeof(uint64_t) * nw), *gsm = malloc(sizeof(uint64_t) * nw);
	uint8_t *st0 = malloc(c.stage_bytes), *gst = malloc(c.stage_bytes);
	memcpy(sm0, c.p.stage_map, sizeof(uint64_t) * nw);
	memcpy(st0, c.stage, c.stage_bytes);
	const uint64_t t0 = strata_now_ns();
	ck_assert_int_eq(g_prestage(&c, &d, 3, NULL, gsm, gst), 0);
	const double ms = (double)(strata_now_ns() - t0) / 1e6;
	printf("cut never published: returned after %.3f ms (with the copies back)\n", ms);
	ck_assert_int_eq(pc_check(&c, gsm, gst, sm0, st0, 3, 1), 0);
	ck_assert_mem_eq(gsm, sm0, sizeof(uint64_t) * nw);
	ck_assert(!memcmp(gst, st0, c.stage_bytes));
	/* now published */
	memcpy(c.cut, good, sizeof good);
	ck_assert_int_eq(strata_dev_copy(dev, d.cut, good, sizeof good, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	const long ng = g_prestage(&c, &d, 4, NULL, gsm, gst);
	ck_assert_int_gt(ng, 0);
	ck_assert_int_eq(pc_check(&c, gsm, gst, sm0, st0, 4, 1), ng);
	ck_assert_int_eq(pc_run(&c, 4, 1), ng);
	free(sm0); free(gsm); free(st0); free(gst);
	g_free(&d);
	pc_free(&c);
}
END_TEST

/* Indexer with after_scan and cut_out, then prestage on a second stream after that
 * event, polling the cut words, and the map after the prestage (events both ways), as
 * the engine orders them. */
START_TEST(indexer_after_scan_end_to_end)
{
	int rows_of[2] = { 2, 2 }, lim[4] = { 3000, 700, 400, 1500 };
	td t;
	td_make(&t, STRATA_INDEX_FP8, 8, 512, 2, rows_of, lim, 64, 71, TD_MIXED_W);
	strata_indexer_params p = t.p;
	const size_t n = 4 * 512;
	p.pages = to_dev(t.pages, (size_t)t.n_pages * 64 * strata_index_entry_bytes(p.fmt));
	p.page_table = to_dev(t.pt, sizeof(int32_t) * 2 * p.max_pages);
	p.q = to_dev(t.q, sizeof(uint16_t) * 4 * 8 * 128);
	p.w = to_dev(t.w, sizeof(float) * 4 * 8);
	p.req_rows = to_dev(t.req_rows, sizeof(int32_t) * 3);
	p.row_limit = to_dev(t.limits, sizeof(int32_t) * 4);
	p.out_ids = to_dev(NULL, sizeof(int32_t) * n);
	p.out_scores = to_dev(NULL, sizeof(float) * n);
	p.scratch_bytes = strata_k_indexer_scratch(dev, &p);
	p.scratch = to_dev(NULL, p.scratch_bytes);
	ck_assert_int_eq(strata_dev_memset(dev, p.scratch, 0, p.scratch_bytes, NULL), 0);
	unsigned long long *dcut = to_dev(NULL, sizeof(unsigned long long) * 4), hcut1[4], hcut[4];
	ck_assert_int_eq(strata_dev_memset(dev, dcut, 0xff, sizeof hcut, NULL), 0);
	p.cut_out = dcut;
	p.cut_epoch = 1;
	int32_t *ids0 = malloc(sizeof(int32_t) * n), *ids1 = malloc(sizeof(int32_t) * n);
	float *gsc = malloc(sizeof(float) * n);
	ck_assert_int_eq(strata_k_indexer(dev, &p, NULL), 0);
	from_dev(ids0, p.out_ids, sizeof(int32_t) * n);
	from_dev(hcut1, dcut, sizeof hcut1);

	/* the CPU twin's scores and the reference */
	td tc;
	td_make(&tc, STRATA_INDEX_FP8, 8, 512, 2, rows_of, lim, 64, 71, TD_MIXED_W);
	tc.p.scratch_bytes = strata_k_indexer_scratch(NULL, &tc.p);
	tc.p.scratch = malloc(tc.p.scratch_bytes);
	ck_assert_int_eq(strata_k_indexer_cpu(&tc.p), 0);
	const float *csc, *dsc;
	size_t cstride, gstride;
	ck_assert_int_eq(strata_k_indexer_scores(NULL, &tc.p, &csc, &cstride), 0);
	ck_assert_int_eq(strata_k_indexer_scores(dev, &p, &dsc, &gstride), 0);
	ck_assert_uint_ge(gstride, 3000);

	strata_stream *s1 = NULL, *s2 = NULL;
	strata_event *scan = NULL, *staged = NULL;
	ck_assert_int_eq(strata_stream_create(dev, &s1), 0);
	ck_assert_int_eq(strata_stream_create(dev, &s2), 0);
	ck_assert_int_eq(strata_event_create(dev, &scan), 0);
	ck_assert_int_eq(strata_event_create(dev, &staged), 0);
	p.after_scan = scan;
	p.cut_epoch = 2;
	ck_assert_int_eq(strata_k_indexer(dev, &p, s1), 0);
	ck_assert_int_eq(strata_stream_sync(dev, s1), 0);
	from_dev(ids1, p.out_ids, sizeof(int32_t) * n);
	from_dev(gsc, p.out_scores, sizeof(float) * n);
	from_dev(hcut, dcut, sizeof hcut);
	ck_assert_mem_eq(ids0, ids1, sizeof(int32_t) * n);

	/* the case around the GPU's scores and cut words */
	int mode[4] = { 0, 0, 0, 0 };
	pcfg pf = { 4, 512, 3000, 2, 450, 64, 64, 0, lim, mode, 72, CUT_EXACT };
	pc c;
	pc_make(&c, &pf);
	float *hsc = malloc(sizeof(float) * 4 * gstride);
	for (size_t i = 0; i < 4 * gstride; i++)
		hsc[i] = NAN; /* read back for the scored rows only */
	double *ref = malloc(sizeof(double) * 3000);
	for (int r = 0; r < 4; r++) {
		if (lim[r] <= 512)
			continue;
		from_dev(hsc + r * gstride, dsc + r * gstride, sizeof(float) * lim[r]);
		double mag = 0;
		char why[256] = "";
		td_ref_scores(&tc, r, ref, &mag);
		const double tol = TOL_REL * mag + 1e-30;
		ck_assert_msg(td_check_row(lim[r], 512, ids1 + r * 512, gsc + r * 512, ref, tol, 0, why,
					   sizeof why) >= 0, "row %d: %s", r, why);
		const float *g = hsc + r * gstride, *cs = csc + r * cstride;
		char *in = calloc((size_t)lim[r], 1);
		int worst = -1; /* the GPU's selection is the top of its own scores */
		for (int i = 0; i < 512; i++) {
			int id = ids1[r * 512 + i];
			in[id] = 1;
			ck_assert(g[id] == gsc[r * 512 + i]);
			if (worst < 0 || g[id] < g[worst] || (g[id] == g[worst] && id > worst))
				worst = id;
		}
		for (int j = 0; j < lim[r]; j++) {
			ck_assert_msg(fabsf(g[j] - cs[j]) <= tol, "row %d id %d: gpu %g cpu %g", r, j,
				      g[j], cs[j]);
			if (!in[j])
				ck_assert(g[j] < g[worst] || (g[j] == g[worst] && j > worst));
		}
		free(in);
	}
	free(ref);
	/* the words against the host's bucket of the GPU's own topk-th scores */
	check_cut_words(hcut, 2, 4, 512, lim, hsc, gstride, gsc);
	for (int r = 0; r < 4; r++) /* the first call's: the same buckets, its epoch */
		ck_assert_uint_eq(hcut1[r], cut_word(1, (uint32_t)(hcut[r] & 0xfff)));
	c.p.scores = hsc;
	c.p.score_stride = gstride;
	for (int r = 0; r < 4; r++) /* what the chain's indexer call (cut_epoch 3) publishes */
		hcut[r] = cut_word(3, (uint32_t)(hcut[r] & 0xfff));
	c.p.cut = hcut;
	c.p.cut_epoch = 3;
	pc_covers(&c);
	uint64_t rng = 73;
	pc_stage(&c, -1, 0, &rng);
	gcase d;
	g_make(&d, &c, dsc, dcut);
	d.g.wait_us = 1000; /* the cut comes from the filter, on the other stream */
	const size_t nw = (size_t)4 * 3000;
	uint64_t *sm0 = malloc(sizeof(uint64_t) * nw), *gsm = malloc(sizeof(uint64_t) * nw);
	uint8_t *st0 = malloc(c.stage_bytes), *gst = malloc(c.stage_bytes);
	memcpy(sm0, c.p.stage_map, sizeof(uint64_t) * nw);
	memcpy(st0, c.stage, c.stage_bytes);
	/* the engine's order: indexer on s1, prestage on s2 after its scan (the scores stay
	 * while top-k runs), s1 on after the prestage; checked step by step here */
	p.cut_epoch = 3;
	ck_assert_int_eq(strata_k_indexer(dev, &p, s1), 0);
	ck_assert_int_eq(strata_stream_wait_event(dev, s2, scan), 0);
	d.g.epoch = 1;
	ck_assert_int_eq(strata_k_attn_prestage(dev, &d.g, s2), 0);
	ck_assert_int_eq(strata_event_record(dev, staged, s2), 0);
	ck_assert_int_eq(strata_stream_wait_event(dev, s1, staged), 0);
	ck_assert_int_eq(strata_stream_sync(dev, s1), 0);
	uint8_t *scr = malloc(c.p.scratch_bytes);
	from_dev(scr, d.g.scratch, c.p.scratch_bytes);
	check_zero(scr, c.p.scratch_bytes);
	free(scr);
	unsigned long long now[4];
	from_dev(now, dcut, sizeof now);
	ck_assert_mem_eq(now, hcut, sizeof now);
	from_dev(gsm, d.g.stage_map, sizeof(uint64_t) * nw);
	from_dev(gst, d.g.stage, c.stage_bytes);
	ck_assert_int_gt(pc_check(&c, gsm, gst, sm0, st0, 1, 1), 0);
	int32_t *gout = malloc(sizeof(int32_t) * n);
	long cnt[3];
	g_map(&c, &d, ids1, p.out_ids, 512, 1, s1, gsm, gst, gout, cnt);
	ck_assert_int_gt(cnt[1], 0);
	ck_assert_int_eq(cnt[2], 0); /* every miss of the selection was staged early */

	/* The same chain with no host synchronisation inside, epoch 2, the scores
	 * poisoned (NaN) first, cut_epoch 4 (the words hold 3 until the filter publishes):
	 * only the events and the words keep the prestage after the scan and the cut, and
	 * the map after the prestage; the result is the same list up to slot order. */
	for (int r = 0; r < 4; r++)
		if (lim[r] > 512)
			ck_assert_int_eq(strata_dev_memset(dev, (float *)dsc + r * gstride, 0xff,
							   sizeof(float) * lim[r], NULL), 0);
	int32_t *dout = to_dev(NULL, sizeof(int32_t) * n), *out2 = malloc(sizeof(int32_t) * n);
	unsigned long long *dmc = to_dev(NULL, 2 * sizeof(unsigned long long)), mc[2];
	ck_assert_int_eq(strata_dev_memset(dev, dmc, 0, sizeof mc, NULL), 0);
	ck_assert_int_eq(strata_dev_sync(dev), 0);
	strata_attn_map_params mp = { .n_rows = 4, .width = 512, .ids = p.out_ids,
				      .row_base = d.g.row_base, .out = dout, .map = d.g.map,
				      .row_map = d.g.row_map, .map_stride = 3000, .host = d.g.host,
				      .host_B = 64, .stage = d.g.stage, .stage_B = 64,
				      .stage_map = d.g.stage_map, .epoch = 2, .miss_counts = dmc };
	d.g.epoch = 2;
	d.g.cut_epoch = p.cut_epoch = 4;
	ck_assert_int_eq(strata_k_indexer(dev, &p, s1), 0);
	ck_assert_int_eq(strata_stream_wait_event(dev, s2, scan), 0);
	ck_assert_int_eq(strata_k_attn_prestage(dev, &d.g, s2), 0);
	ck_assert_int_eq(strata_event_record(dev, staged, s2), 0);
	ck_assert_int_eq(strata_stream_wait_event(dev, s1, staged), 0);
	ck_assert_int_eq(strata_k_attn_map(dev, &mp, s1), 0);
	ck_assert_int_eq(strata_stream_sync(dev, s1), 0);
	from_dev(out2, dout, sizeof(int32_t) * n);
	from_dev(mc, dmc, sizeof mc);
	from_dev(gst, d.g.stage, c.stage_bytes);
	ck_assert_uint_eq(mc[0], (unsigned long long)cnt[1]);
	ck_assert_uint_eq(mc[1], 0);
	same_up_to_entries(&c, out2, gout, n);
	for (size_t i = 0; i < n; i++)
		if (out2[i] <= -2 - (int32_t)c.p.stage_first)
			ck_assert(entry_eq(gst, 64, -2 - (int64_t)out2[i], c.host, 64,
					   c.row_base[i / 512] + ids1[i]));

	/* Staging inside the indexer call (p.stage): no second stream, no event. Epoch 5,
	 * then epoch 6 on the same scratch, unzeroed: the other parity's counter (zeroed
	 * by the call before) serves and epoch 5's is zeroed for the next call. Each: the
	 * same ids, the same marks as the twin computes from the GPU's own scores and cuts
	 * (renewed), the same count, the scratch's other words zero, and the map finds
	 * every miss staged. */
	unsigned long long *dns = to_dev(NULL, sizeof *dns), ns = 0;
	long nf = 0, taken5 = 0;
	for (int ep = 5; ep <= 6; ep++) {
		const int word = 2 + (ep & 1); /* the slot counter of this epoch's parity */
		for (int r = 0; r < 4; r++)
			hcut[r] = cut_word((uint64_t)ep, (uint32_t)(hcut[r] & 0xfff));
		c.p.cut_epoch = (uint64_t)ep;
		from_dev(sm0, d.g.stage_map, sizeof(uint64_t) * nw);
		from_dev(st0, d.g.stage, c.stage_bytes);
		ck_assert_int_eq(strata_dev_memset(dev, dns, 0, sizeof *dns, NULL), 0);
		ck_assert_int_eq(strata_dev_memset(dev, dmc, 0, sizeof mc, NULL), 0);
		ck_assert_int_eq(strata_dev_memset(dev, p.out_ids, 0xff, sizeof(int32_t) * n, NULL), 0);
		ck_assert_int_eq(strata_dev_sync(dev), 0);
		d.g.epoch = (uint64_t)ep;
		d.g.n_staged = dns;
		p.stage = &d.g;
		p.cut_epoch = (uint64_t)ep;
		ck_assert_int_eq(strata_k_indexer(dev, &p, s1), 0);
		mp.epoch = (uint64_t)ep;
		ck_assert_int_eq(strata_k_attn_map(dev, &mp, s1), 0);
		ck_assert_int_eq(strata_stream_sync(dev, s1), 0);
		p.stage = NULL;
		d.g.n_staged = NULL;
		uint32_t *scw = malloc(c.p.scratch_bytes);
		from_dev(scw, d.g.scratch, c.p.scratch_bytes);
		long taken = 0;
		for (int r = 0; r < 4; r++) {
			for (int w = 0; w < 4; w++)
				if (w != word)
					ck_assert_uint_eq(scw[r * 4 + w], 0);
			taken += scw[r * 4 + word] < (uint32_t)d.g.cap ? scw[r * 4 + word]
								       : (uint32_t)d.g.cap;
		}
		free(scw);
		from_dev(gsm, d.g.stage_map, sizeof(uint64_t) * nw);
		from_dev(gst, d.g.stage, c.stage_bytes);
		from_dev(&ns, dns, sizeof ns);
		from_dev(mc, dmc, sizeof mc);
		from_dev(out2, p.out_ids, sizeof(int32_t) * n);
		ck_assert_mem_eq(out2, ids1, sizeof(int32_t) * n);
		const long f = pc_check(&c, gsm, gst, sm0, st0, ep, 1);
		if (ep == 5) {
			ck_assert_int_gt(f, 0);
			nf = f;
			taken5 = taken;
		}
		ck_assert_int_eq(f, nf);
		ck_assert_uint_eq(ns, (unsigned long long)nf);
		ck_assert_int_eq(taken, nf); /* what each row took, up to its cap, was published */
		ck_assert_int_eq(taken, taken5);
		ck_assert_uint_eq(mc[0], (unsigned long long)cnt[1]); /* every miss, staged early */
		ck_assert_uint_eq(mc[1], 0);
	}
	strata_dev_free(dev, dns);
	strata_dev_free(dev, dout);
	strata_dev_free(dev, dmc);
	free(out2);
	free(sm0); free(gsm); free(st0); free(gst); free(gout); free(hsc);
	strata_dev_free(dev, dcut);
	g_free(&d);
	pc_free(&c);
	strata_event_destroy(dev, scan);
	strata_event_destroy(dev, staged);
	strata_stream_destroy(dev, s1);
	strata_stream_destroy(dev, s2);
	void *dp[] = { (void *)p.pages, (void *)p.page_table, (void *)p.q, (void *)p.w,
		       (void *)p.req_rows, (void *)p.row_limit, p.out_ids, p.out_scores, p.scratch };
	for (size_t i = 0; i < sizeof dp / sizeof *dp; i++)
		strata_dev_free(dev, dp[i]);
	free(ids0); free(ids1); free(gsc); free(tc.p.scratch);
	td_free(&t);
	td_free(&tc);
}
END_TEST

/* The staging shape a call gets: one staging CTA per filter CTA at batch 1 (128K:
 * 16 chunks of 2048 entries), fewer than the filter's at 1M batch 8 (the filter alone
 * fills the GPU), and max_ctas when set. */
START_TEST(stage_ctas_shape)
{
	strata_attn_prestage_params st = { .max_ctas = 0 };
	strata_indexer_params p = { .fmt = STRATA_INDEX_MXFP4, .heads = 64, .topk = 512,
				    .n_req = 1, .n_rows = 1, .max_rows = 1,
				    .max_limit = 32768, .max_pages = 512, .B = 64, .stage = &st };
	int fx = 0;
	ck_assert_int_eq(strata_k_indexer_stage_ctas(dev, &p, &fx), 16);
	ck_assert_int_eq(fx, 16);
	p.n_req = p.n_rows = 8;
	p.max_limit = 262144;
	int sx = strata_k_indexer_stage_ctas(dev, &p, &fx);
	ck_assert_int_ge(sx, 1);
	ck_assert_int_lt(sx, fx);
	st.max_ctas = 3;
	ck_assert_int_eq(strata_k_indexer_stage_ctas(dev, &p, &fx), 3);
}
END_TEST

int main(void)
{
	tu_require_gpu();
	strata_dev_config cfg = STRATA_DEV_CONFIG_INIT;
	cfg.backend = STRATA_BACKEND_GPU;
	if (strata_dev_open(&cfg, &dev))
		return 1;
	Suite *s = suite_create("gpu_prestage");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, random_rows_full_cap);
	tcase_add_test(tc, many_rows_long_limits);
	tcase_add_test(tc, small_cap);
	tcase_add_test(tc, cut_never_published);
	tcase_add_test(tc, indexer_after_scan_end_to_end);
	tcase_add_test(tc, stage_ctas_shape);
	suite_add_tcase(s, tc);
	/* No fork: a CUDA context does not survive fork(), and the parent has one. */
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int rc = srunner_ntests_failed(sr) ? EXIT_FAILURE : EXIT_SUCCESS;
	srunner_free(sr);
	strata_dev_close(dev);
	return rc;
}
