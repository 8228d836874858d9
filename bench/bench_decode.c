/*
 * `strata bench decode`: the device phase of a decode step (new-entry writes, index
 * scan, top-k, fetch, sparse attention; every layer, no host gaps: the host model
 * math runs before it and is reported apart as host_prep_ms) of the reference
 * engine, for HiSparse (C4 main on the pinned host tier behind prefetch/'s hot
 * cache), all-resident (the limit measured in the same run) and synchronous swap-in
 * (every selected entry gathered on the compute stream right after top-k, no cache,
 * no prediction: SGLang today), and HiSparse with direct_misses (hits from the hot
 * pool, misses staged or read in place from the host tier as the engine's AUTO rule
 * picks, admission on a side stream after attention: row hisparse-direct, the demo's
 * HiSparse); --direct-all adds a row for each of in place and staged.
 * Contexts are given a synthetic fill (strata_ref_engine_fill) so that 1M tokens take
 * seconds; the decode steps are exact. Reports step time (median, p99) and its ratio
 * to all-resident, device bytes per request, the hit rate, whether the outputs of all
 * four rows are bit-identical, and how many requests of the largest context fit a
 * device budget in each mode.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "engine/engine.h"

static const char *usage =
	"usage: strata bench decode [--model flash|pro|tiny] [--contexts 128K,1M]\n"
	"                           [--batches 1,8,32] [--uniform] [--hot N]\n"
	"                           [--device-gib G] [--host-gib G] [--profile] [--direct]\n"
	"                           [--direct-all] [--rows NAME,..] [--tc]\n"
	"                           [--host-huge | --host-on-device] [--spare-sms N]\n"
	"                           [--early-ctas N] [--early-slots N] [--early-dry]\n"
	"                           [--priority-main]\n"
	"                           [--trace] [--paired | --resident-last] [--l2-scrub]\n"
	"Defaults: flash, 128K,1M, batches 1,8,32; --quick: tiny, 4K, batches 1,4.\n"
	"--hot: hot-cache entries per (request, CSA layer) (default 2 x top-k).\n"
	"--device-gib / --host-gib: budgets; a point whose caches exceed them is skipped,\n"
	"and the device budget sets the 'requests that fit' figure (default 120 / 96).\n"
	"--check: every mode's outputs must be bit-identical (exit 1 otherwise).\n"
	"--tc: attention on tensor cores (every mode; strata_attn_params.tensor_cores).\n"
	"--host-huge: the host tier on 2 MiB pages where the system has them (engine.h\n"
	"host_tier; a note says which pages each point got). --host-on-device: diagnostic,\n"
	"the host tier in device memory (the bus taken out). --spare-sms: engine.h\n"
	"attn_spare_sms (every row). --early-ctas / --early-slots: engine.h early_ctas /\n"
	"early_slots (hisparse-early rows); --early-dry: engine.h early_dry (diagnostic).\n"
	"--priority-main: kernels.h priority_main (the\n"
	"compute stream outranks the side streams; every row). --trace: device events per layer (engine.h trace),\n"
	"a note per point with where the step's time goes. --paired: every row's engine of a\n"
	"point at once, their timed steps taken in turn (each turn one step of every row,\n"
	"turn s starting at row s mod rows), so that drift over the run and the place in a\n"
	"turn fall on every row alike; a note per row gives\n"
	"the median of its per-turn ratios to all-resident (rows one after the other when\n"
	"their caches do not fit the budgets together). --resident-last: rows one after\n"
	"the other, all-resident last instead of first (to see drift over a run).\n"
	"--l2-scrub: before every timed step, write 192 MiB of scratch (32 MiB on the CPU) and\n"
	"wait, outside the timing: no step finds the previous step's data in L2, as in a\n"
	"model's decode, where every layer's weights pass through L2 between two steps.\n"
	"Rows: all-resident, hisparse (misses copied into the hot cache first, prediction\n"
	"on), swapin, hisparse-direct (engine.h direct_misses AUTO: hits from the hot pool,\n"
	"misses staged on the device or read in place from the host tier, admitted after\n"
	"the step's attention in one call on a side stream; the demo's HiSparse),\n"
	"hisparse-early (direct_misses\n"
	"EARLY: misses staged inside the indexer call while top-k runs; column early = the share\n"
	"of misses it staged in time). --direct-all: also\n"
	"hisparse-inplace and hisparse-staged (--direct: accepted, the default). --rows:\n"
	"only these rows, any of the above (all-resident always runs: the ratios need it).\n"
	"--profile: open a profiler range around each point's last timed step (for\n"
	"ncu --profile-from-start off: the kernels of exactly one decode step per mode).";

static int parse_list(const char *s, uint64_t *out, int max)
{
	int n = 0;
	char buf[256];
	snprintf(buf, sizeof buf, "%s", s);
	for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ",")) {
		if (strata_parse_count(tok, &out[n]) || !out[n])
			return -1;
		n++;
	}
	return n;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Whether the comma-separated list holds name exactly. */
static int list_has(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && !strncmp(p, name, n))
			return 1;
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

typedef struct point {
	int ok;
	double med_ms, mean_ms, p99_ms, prep_ms, launch_ms, hit;
	uint64_t dev_per_req, digest;
	double fetched_mb;  /* host -> device MB per timed step (selected entries) */
	double early;       /* EARLY: share of the misses staged while top-k ran, or -1 */
	int host_mem;       /* strata_host_mem of the C4 host tier */
	/* --trace, us, medians over the timed steps: [0] caches written, per CSA layer
	 * [1] scan + top-k, [2] index list / fetch, [3] attention, [4] from the layer
	 * before's end to this one's start; [5] the step's admission (side stream) done,
	 * after the step's end; [6] attention of the other layers; [7] the step's end
	 * after the last attention */
	double tr[8];
	double *t;          /* the timed steps' ms (run_finish; freed by the caller) */
} point;

/* The last step's trace of e into c (see point.tr); 0 or an error. */
static int trace_of(const strata_ref_engine *e, int n_layers, double c[8])
{
	float t[STRATA_REF_T_POINTS], s0[STRATA_REF_T_POINTS];
	int err = strata_ref_engine_trace(e, -1, s0);
	double n_csa = 0, n_other = 0, prev_end = s0[0], side = -1.0;
	for (int i = 0; i < 8; i++)
		c[i] = 0.0;
	c[0] = s0[0];
	for (int l = 0; l < n_layers && !err; l++) {
		if ((err = strata_ref_engine_trace(e, l, t)))
			break;
		if (t[STRATA_REF_T_INDEXED] >= 0) {
			n_csa++;
			c[1] += t[STRATA_REF_T_INDEXED] - t[STRATA_REF_T_START];
			c[2] += t[STRATA_REF_T_MAPPED] - t[STRATA_REF_T_INDEXED];
			c[3] += t[STRATA_REF_T_ATTENDED] - t[STRATA_REF_T_MAPPED];
			c[4] += t[STRATA_REF_T_START] - prev_end;
			if (t[STRATA_REF_T_SIDE] > side) /* the step's admission: one point */
				side = t[STRATA_REF_T_SIDE];
		} else {
			n_other++;
			c[6] += t[STRATA_REF_T_ATTENDED] - t[STRATA_REF_T_START];
		}
		prev_end = t[STRATA_REF_T_ATTENDED];
	}
	if (err)
		return err;
	c[7] = s0[1] - prev_end;
	c[5] = side >= 0 ? side - s0[1] : 0.0;
	for (int i = 1; i <= 4; i++)
		c[i] /= n_csa > 0 ? n_csa : 1;
	c[6] /= n_other > 0 ? n_other : 1;
	return 0;
}

/* --early-ctas / --early-slots: engine.h early_ctas / early_slots (EARLY rows) */
static int early_ctas, early_slots, early_dry;

/* --l2-scrub's scratch (NULL: off) and its size. */
static void *scrub_buf;
static size_t scrub_bytes;
static int scrub_n;

/* Writes the scrub scratch and waits (outside any timed region). */
static int l2_scrub(strata_dev *dev)
{
	if (!scrub_buf)
		return 0;
	int err = strata_dev_memset(dev, scrub_buf, scrub_n++ & 255, scrub_bytes, NULL);
	return err ? err : strata_dev_sync(dev);
}

/* One row's engine at one point: created, filled and warmed up by run_open, then
 * timed one step at a time (run_step), so that the rows of a point can run one after
 * the other or step by step in turn (--paired). */
typedef struct run {
	strata_ref_engine *e;
	int steps, reps, profile, trace, n_layers, direct;
	double *t, *tp, *tl, *trs;
	strata_ref_stats st0;
} run;

static void run_close(run *r)
{
	strata_ref_engine_destroy(r->e);
	free(r->t);
	free(r->tp);
	free(r->tl);
	free(r->trs);
	memset(r, 0, sizeof *r);
}

static int run_open(strata_dev *dev, const bench_opts *o, const strata_model *m,
		    strata_ref_mode mode, int direct, int tc, int host, int spare, int ctx,
		    int batch, int hot, int uniform, int profile, int trace, run *r)
{
	memset(r, 0, sizeof *r);
	strata_ref_config c = STRATA_REF_CONFIG_INIT;
	c.model = *m;
	c.mode = mode;
	c.direct_misses = direct;
	c.attn_tensor_cores = tc;
	c.host_tier = host;
	c.attn_spare_sms = spare;
	c.trace = trace;
	if (direct == STRATA_REF_MISS_EARLY) {
		c.early_ctas = early_ctas;
		c.early_slots = early_slots;
		c.early_dry = early_dry;
	}
	c.n_req = batch;
	c.max_ctx = ctx + o->warmup + o->reps + 1;
	c.hot_slots = hot;
	c.seed = o->seed;
	c.inputs = uniform ? STRATA_REF_UNIFORM : STRATA_REF_STRUCTURED;
	r->reps = o->reps;
	r->profile = profile;
	r->trace = trace;
	r->n_layers = m->n_layers;
	r->direct = direct;
	r->t = calloc((size_t)o->reps, sizeof *r->t);
	r->tp = calloc((size_t)o->reps, sizeof *r->tp);
	r->tl = calloc((size_t)o->reps, sizeof *r->tl);
	r->trs = calloc((size_t)o->reps * 8, sizeof *r->trs);
	int err = r->t && r->tp && r->tl && r->trs ? strata_ref_engine_create(dev, &c, &r->e)
						   : -ENOMEM;
	for (int q = 0; q < batch && !err; q++)
		err = strata_ref_engine_fill(r->e, q, ctx);
	for (int s = 0; s < o->warmup && !err; s++)
		err = strata_ref_engine_decode_step(r->e);
	if (!err)
		strata_ref_engine_stats(r->e, &r->st0);
	if (err)
		run_close(r);
	return err;
}

/* The next timed step of r (a decode step ends with the device idle: its outputs are
 * copied back behind a device-wide synchronisation, side streams included). */
static int run_step(strata_dev *dev, run *r)
{
	const int s = r->steps;
	/* --profile: the last timed step only, for ncu --profile-from-start off */
	int prof = r->profile && s == r->reps - 1;
	int err = l2_scrub(dev);
	err = err ? err : prof ? strata_dev_profile(dev, 1) : 0;
	err = err ? err : strata_ref_engine_decode_step(r->e);
	if (prof) {
		int e2 = strata_dev_profile(dev, 0);
		err = err ? err : e2;
	}
	strata_ref_stats st;
	strata_ref_engine_stats(r->e, &st);
	if (!err && r->trace)
		err = trace_of(r->e, r->n_layers, r->trs + (size_t)s * 8);
	r->t[s] = (double)st.last_device_ns / 1e6;
	r->tp[s] = (double)st.last_prep_ns / 1e6;
	r->tl[s] = (double)st.last_launch_ns / 1e6;
	r->steps++;
	return err;
}

/* r's figures once its reps steps are done. */
static void run_finish(run *r, int batch, point *pt)
{
	strata_ref_stats st;
	strata_ref_engine_stats(r->e, &st);
	bench_stats bs = bench_stats_of(r->t, r->reps);
	pt->med_ms = bs.median;
	pt->mean_ms = 0.0;
	for (int i = 0; i < r->reps; i++)
		pt->mean_ms += r->t[i] / r->reps;
	pt->p99_ms = bs.p99;
	pt->prep_ms = bench_stats_of(r->tp, r->reps).median;
	pt->launch_ms = bench_stats_of(r->tl, r->reps).median;
	uint64_t h = st.hits - r->st0.hits, mi = st.misses - r->st0.misses;
	pt->hit = h + mi ? (double)h / (double)(h + mi) : 0.0;
	pt->fetched_mb = (double)(st.fetched_bytes - r->st0.fetched_bytes) / 1e6 / r->reps;
	pt->dev_per_req = st.device_bytes / (uint64_t)batch;
	uint64_t ea = st.early_misses - r->st0.early_misses,
		 la = st.late_misses - r->st0.late_misses;
	pt->early = st.miss_path == STRATA_REF_MISS_EARLY && ea + la
			    ? (double)ea / (double)(ea + la)
			    : -1.0;
	pt->digest = strata_ref_engine_digest(r->e);
	pt->host_mem = st.host_mem;
	for (int i = 0; r->trace && i < 8; i++) { /* the median step of each figure */
		double col[r->reps];
		for (int s = 0; s < r->reps; s++)
			col[s] = r->trs[(size_t)s * 8 + i];
		pt->tr[i] = bench_stats_of(col, r->reps).median;
	}
	pt->t = r->t; /* kept for --paired's per-step ratios (the caller frees it) */
	r->t = NULL;
	pt->ok = 1;
}

int strata_bench_decode(int argc, char **argv)
{
	bench_opts o;
	if (bench_parse_common(&argc, argv, &o, usage))
		return 2;
	const char *model = o.quick ? "tiny" : "flash";
	uint64_t ctxs[8], batches[8];
	int n_ctx = parse_list(o.quick ? "4K" : "128K,1M", ctxs, 8);
	int n_b = parse_list(o.quick ? "1,4" : "1,8,32", batches, 8);
	int uniform = 0, hot = 0, profile = 0, direct = 0, tc = 0, host = 0,
	    spare = 0, trace = 0, prio = 0, paired = 0, resident_last = 0, scrub = 0;
	const char *only = NULL;
	double dev_gib = 120, host_gib = 96;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		/* switches: each sets its variable (the last of --host-* wins) */
		const struct {
			const char *name;
			int *dst, val;
		} sw[] = {
			{ "--uniform", &uniform, 1 },	  { "--profile", &profile, 1 },
			{ "--direct-all", &direct, 2 },	  { "--tc", &tc, 1 },
			{ "--early-dry", &early_dry, 1 }, { "--priority-main", &prio, 1 },
			{ "--trace", &trace, 1 },	  { "--paired", &paired, 1 },
			{ "--resident-last", &resident_last, 1 }, { "--l2-scrub", &scrub, 1 },
			{ "--host-huge", &host, STRATA_REF_HOST_HUGE },
			{ "--host-on-device", &host, STRATA_REF_HOST_DEVICE },
		};
		int matched = 0;
		for (size_t k = 0; k < sizeof sw / sizeof *sw && !matched; k++)
			if (!strcmp(a, sw[k].name))
				*sw[k].dst = sw[k].val, matched = 1;
		if (!strcmp(a, "--direct")) /* does not undo --direct-all */
			direct = direct > 1 ? direct : 1, matched = 1;
		if (matched)
			continue;
		if (!v) {
			fprintf(stderr, "bench decode: unknown or incomplete argument '%s'\n%s\n", a, usage);
			return 2;
		}
		i++;
		if (!strcmp(a, "--model"))
			model = v;
		else if (!strcmp(a, "--contexts"))
			n_ctx = parse_list(v, ctxs, 8);
		else if (!strcmp(a, "--batches"))
			n_b = parse_list(v, batches, 8);
		else if (!strcmp(a, "--hot"))
			hot = atoi(v);
		else if (!strcmp(a, "--spare-sms"))
			spare = atoi(v);
		else if (!strcmp(a, "--early-ctas"))
			early_ctas = atoi(v);
		else if (!strcmp(a, "--early-slots"))
			early_slots = atoi(v);
		else if (!strcmp(a, "--rows"))
			only = v;
		else if (!strcmp(a, "--device-gib"))
			dev_gib = atof(v);
		else if (!strcmp(a, "--host-gib"))
			host_gib = atof(v);
		else {
			fprintf(stderr, "bench decode: unknown argument '%s'\n%s\n", a, usage);
			return 2;
		}
	}
	strata_model m = STRATA_MODEL_INIT;
	if (strata_model_preset(model, &m) || n_ctx < 1 || n_b < 1) {
		fprintf(stderr, "bench decode: bad --model, --contexts or --batches\n");
		return 2;
	}
	strata_dev_config dc = STRATA_DEV_CONFIG_INIT;
	dc.backend = o.backend;
	dc.priority_main = prio;
	strata_dev *dev = NULL;
	int err = strata_dev_open(&dc, &dev);
	if (err) {
		fprintf(stderr, "bench decode: %s\n", strata_strerror(err));
		return 1;
	}
	if (scrub) {
		scrub_bytes = (size_t)(strata_dev_is_gpu(dev) ? 192 : 32) << 20;
		if ((err = strata_dev_alloc(dev, scrub_bytes, &scrub_buf))) {
			fprintf(stderr, "bench decode: --l2-scrub: %s\n", strata_strerror(err));
			strata_dev_close(dev);
			return 1;
		}
	}
	bench_out *out = bench_out_open(&o, "decode", dev);
	if (scrub)
		bench_out_note(out, "L2 scrubbed before every timed step: %zu MiB written, not timed",
			       scrub_bytes >> 20);
	bench_out_note(out, "model %s, %s inputs, step_ms = the device phase of a step (cache "
		       "writes / hot-cache append + write-back, scan, top-k, fetch, attention; all "
		       "%d layers, launched back to back, event-timed); host_prep_ms = the host "
		       "model math before it (not in step_ms); launch_ms = host time issuing the "
		       "device phase (near step_ms: launch bound); step_ms and vs_resident are "
		       "medians, mean_ms the mean (every 4th step completes C4 entries and costs "
		       "more: use --reps in multiples of 4); %d warm-up + %d timed steps",
		       m.name, uniform ? "uniform" : "structured", m.n_layers, o.warmup, o.reps);
	/* rows: the three modes, HISPARSE with direct_misses AUTO and EARLY, then
	 * (--direct-all) IN_PLACE and STAGED (engine.h) */
	enum { NMODES = 7 };
	static const char *names[NMODES] = { "all-resident", "hisparse", "swapin", "hisparse-direct",
					     "hisparse-early", "hisparse-inplace",
					     "hisparse-staged" };
	static const int row_mode[NMODES] = { STRATA_REF_ALL_RESIDENT, STRATA_REF_HISPARSE,
					      STRATA_REF_SWAPIN, STRATA_REF_HISPARSE,
					      STRATA_REF_HISPARSE, STRATA_REF_HISPARSE,
					      STRATA_REF_HISPARSE };
	static const int row_direct[NMODES] = { 0, 0, 0, STRATA_REF_MISS_AUTO,
						STRATA_REF_MISS_EARLY, STRATA_REF_MISS_IN_PLACE,
						STRATA_REF_MISS_STAGED };
	const int n_rows = direct == 2 || only ? 7 : 5; /* --rows may name any row */
	int check_failed = 0;
	uint64_t dev_budget = (uint64_t)(dev_gib * 1073741824.0);
	uint64_t host_budget = (uint64_t)(host_gib * 1073741824.0);
	for (int ci = 0; ci < n_ctx; ci++)
		for (int bi = 0; bi < n_b; bi++) {
			int ctx = (int)ctxs[ci], batch = (int)batches[bi];
			strata_sizes sz;
			strata_model_sizes(&m, (uint64_t)ctx, &sz);
			point pt[NMODES] = { { 0 } };
			run rs[NMODES];
			int want[NMODES] = { 0 }, n_want = 0;
			uint64_t sum_dev = 0, sum_host = 0;
			memset(rs, 0, sizeof rs);
			for (int mode = 0; mode < n_rows; mode++) {
				if (mode && only && !list_has(only, names[mode]))
					continue;
				uint64_t need_dev = (mode == 0 ? sz.total_bytes : sz.device_offloaded) *
						    (uint64_t)batch;
				uint64_t need_host = mode == 0 ? 0 : sz.c4_main_bytes * (uint64_t)batch;
				if (need_dev > dev_budget || need_host > host_budget) {
					bench_out_note(out, "%s ctx %d batch %d: skipped (needs %.1f GiB device, "
						       "%.1f GiB host)", names[mode], ctx, batch,
						       need_dev / 1073741824.0, need_host / 1073741824.0);
					continue;
				}
				want[mode] = 1;
				n_want++;
				sum_dev += need_dev;
				sum_host += need_host;
			}
			/* --paired: every row's engine at once, their timed steps in turn */
			int pair = paired && n_want > 1;
			if (pair && (sum_dev > dev_budget || sum_host > host_budget)) {
				bench_out_note(out, "ctx %d batch %d: rows one after the other (--paired "
					       "needs %.1f GiB device, %.1f GiB host for all at once)",
					       ctx, batch, sum_dev / 1073741824.0,
					       sum_host / 1073741824.0);
				pair = 0;
			}
			for (int k = 0; k < n_rows; k++) {
				/* --resident-last: all-resident (row 0) after the others */
				const int mode = resident_last ? (k + 1) % n_rows : k;
				if (!want[mode])
					continue;
				err = run_open(dev, &o, &m, (strata_ref_mode)row_mode[mode],
					       row_direct[mode], tc, host, spare, ctx, batch, hot, uniform,
					       profile, trace, &rs[mode]);
				for (int s = 0; !pair && !err && s < o.reps; s++)
					err = run_step(dev, &rs[mode]);
				if (!err && !pair) {
					run_finish(&rs[mode], batch, &pt[mode]);
					run_close(&rs[mode]);
				}
				if (err) {
					bench_out_note(out, "%s ctx %d batch %d: failed: %s", names[mode], ctx,
						       batch, strata_strerror(err));
					want[mode] = 0;
					run_close(&rs[mode]);
				}
			}
			/* turn s starts at row s mod n_rows, so that no row always runs first */
			for (int s = 0; pair && s < o.reps; s++)
				for (int j = 0; j < n_rows; j++) {
					const int mode = (s + j) % n_rows;
					if (!want[mode] || (err = run_step(dev, &rs[mode])) == 0)
						continue;
					bench_out_note(out, "%s ctx %d batch %d: failed: %s", names[mode], ctx,
						       batch, strata_strerror(err));
					want[mode] = 0;
					run_close(&rs[mode]);
				}
			for (int mode = 0; pair && mode < n_rows; mode++) {
				if (!want[mode])
					continue;
				run_finish(&rs[mode], batch, &pt[mode]);
				run_close(&rs[mode]);
			}
			for (int mode = 0; mode < n_rows; mode++) {
				if (!pt[mode].ok)
					continue;
				if (trace) {
					const double *r = pt[mode].tr;
					bench_out_note(out, "trace %s ctx %d batch %d (us, median of timed steps): "
						       "caches written %.1f; per CSA layer: gap before %.1f, "
						       "scan+top-k %.1f, list/fetch %.1f, attention %.1f; "
						       "other layers' attention %.1f; end +%.1f after the "
						       "last; the step's hot-cache admission (side stream, "
						       "not in step_ms) done +%.1f after the end",
						       names[mode], ctx, batch, r[0], r[4], r[1], r[2], r[3],
						       r[6], r[7], r[5]);
				}
				if (host == STRATA_REF_HOST_HUGE && mode)
					bench_out_note(out, "%s ctx %d batch %d: host tier on %s pages",
						       names[mode], ctx, batch,
						       strata_host_mem_name((strata_host_mem)pt[mode].host_mem));
				if (pair && mode && pt[0].ok) {
					/* the same step's pair: drift between the rows cancels */
					double q[o.reps];
					for (int i = 0; i < o.reps; i++)
						q[i] = pt[mode].t[i] / pt[0].t[i];
					qsort(q, (size_t)o.reps, sizeof *q, cmp_d);
					bench_out_note(out, "paired %s ctx %d batch %d: step / all-resident's "
						       "step of the same turn: median %.3f (min %.3f, max %.3f)",
						       names[mode], ctx, batch,
						       o.reps % 2 ? q[o.reps / 2]
								  : 0.5 * (q[o.reps / 2 - 1] + q[o.reps / 2]),
						       q[0], q[o.reps - 1]);
				}
			}
			for (int mode = 0; mode < NMODES; mode++) {
				if (!pt[mode].ok)
					continue;
				const char *same = !pt[0].ok ? "n/a"
						   : pt[mode].digest == pt[0].digest ? "yes" : "NO";
				if (o.check && pt[0].ok && pt[mode].digest != pt[0].digest)
					check_failed = 1;
				bench_out_row(out, "context", bench_fmt("%.0f", ctx), "batch",
					      bench_fmt("%.0f", batch), "mode", names[mode],
					      "step_ms", bench_fmt("%.3f", pt[mode].med_ms),
					      "p99_ms", bench_fmt("%.3f", pt[mode].p99_ms),
					      "host_prep_ms", bench_fmt("%.3f", pt[mode].prep_ms),
					      "launch_ms", bench_fmt("%.3f", pt[mode].launch_ms),
					      "vs_resident", pt[0].ok ? bench_fmt("%.3f", pt[mode].med_ms / pt[0].med_ms) : "n/a",
					      "mean_ms", bench_fmt("%.3f", pt[mode].mean_ms),
					      "mean_vs_resident", pt[0].ok ? bench_fmt("%.3f", pt[mode].mean_ms / pt[0].mean_ms) : "n/a",
					      "dev_MiB_per_req", bench_fmt("%.1f", pt[mode].dev_per_req / 1048576.0),
					      "dev_vs_resident", pt[0].ok ? bench_fmt("%.3f", (double)pt[mode].dev_per_req / (double)pt[0].dev_per_req) : "n/a",
					      "hit_rate", row_mode[mode] == STRATA_REF_HISPARSE ? bench_fmt("%.3f", pt[mode].hit) : "-",
					      "fetch_MB_step", bench_fmt("%.2f", pt[mode].fetched_mb),
					      "early", pt[mode].early >= 0 ? bench_fmt("%.3f", pt[mode].early) : "-",
					      "identical", same, NULL);
			}
			for (int mode = 0; mode < NMODES; mode++)
				free(pt[mode].t);
		}
	/* How many requests of the largest context fit the device budget (analytic
	 * FORMATS.md sizes; the hot cache, 2 x top-k entries per CSA layer, added). */
	uint64_t big = ctxs[n_ctx - 1];
	strata_sizes sz;
	strata_model_sizes(&m, big, &sz);
	uint64_t hot_b = (uint64_t)(hot ? hot : 2 * m.index_topk) * STRATA_MAIN_ENTRY_BYTES *
			 (uint64_t)strata_model_count(&m, 4);
	bench_out_note(out, "%llu-token requests in a %.0f GiB device budget: all-resident %llu, "
		       "HiSparse %llu (device bytes per request %.1f MiB vs %.1f MiB, ratio %.3f)",
		       (unsigned long long)big, dev_gib,
		       (unsigned long long)(dev_budget / sz.total_bytes),
		       (unsigned long long)(dev_budget / (sz.device_offloaded + hot_b)),
		       sz.total_bytes / 1048576.0, (sz.device_offloaded + hot_b) / 1048576.0,
		       (double)(sz.device_offloaded + hot_b) / (double)sz.total_bytes);
	bench_out_close(out);
	strata_dev_free(dev, scrub_buf);
	strata_dev_close(dev);
	if (check_failed)
		fprintf(stderr, "bench decode: --check failed: outputs differ between modes\n");
	return check_failed ? 1 : 0;
}
