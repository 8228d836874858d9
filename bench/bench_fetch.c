/* `strata bench fetch`: the selected-entry gather and the hot cache.
 *
 * Part 1, gather: random 584 B main entries from pinned host memory (the host tier,
 * 64-entry blocks) into a device pool, at 512, 4K, 32K and 256K entries. Measured in
 * the same run against one contiguous pinned host->device copy of the same number of
 * bytes (the limit), and against the same copies issued as one cudaMemcpyAsync per
 * part and as one cudaMemcpyBatchAsync. Kernel variants: entries per warp 1, 2, 4, 8
 * and auto. Targets (H200, PCIe Gen5): >= 90% of the contiguous rate from 8K entries,
 * 512 entries <= 8 us, no collapse at 256K.
 *
 * Part 2, hot cache: decode steps of a batch of (request, layer) caches with the
 * structured (drifting-topic) and the uniform selection generators, with and without
 * prediction; hit rate, bytes moved per step (on demand and prefetched) beside the
 * bound (1 - measured overlap with the previous selection) x selected bytes.
 *
 * --check compares every gathered byte with the CPU twin and every resident hot-cache
 * entry with its host original. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "prefetch/prefetch.h"
#include "tiers/tiers.h"

static const char *usage =
	"usage: strata bench fetch [--sizes N,N,..] [--steps N] [--host pool|alloc]\n"
	"                          [common options]\n"
	"  gather of random 584 B entries vs a contiguous pinned copy and memcpy baselines,\n"
	"  then hot-cache hit rate and bytes per decode step (structured / uniform)\n"
	"  --host pool   gather from the host tier's pool (huge pages when the system has\n"
	"                them; the default: what strata fetches from)\n"
	"  --host alloc  gather from the device runtime's pinned allocation instead";

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

typedef bench_timer timer;

static double time_us(timer *t, int (*fn)(void *), void *ctx, int warm, int reps, bench_stats *st)
{
	return bench_timer_us(t, fn, ctx, warm, reps, st);
}

typedef struct gctx {
	timer *t;
	strata_gather_params p;      /* device ids */
	strata_gather_params hp;     /* host ids (baselines) */
	strata_gather_baseline how;
	void *dst, *src;
	size_t bytes;
} gctx;

static int run_contig(void *c)
{
	gctx *g = c;
	return strata_dev_copy(g->t->dev, g->dst, g->src, g->bytes, g->t->s);
}
static int run_kernel(void *c)
{
	gctx *g = c;
	return strata_k_gather(g->t->dev, &g->p, g->t->s);
}
static int run_baseline(void *c)
{
	gctx *g = c;
	return strata_bench_gather_baseline(g->t->dev, &g->hp, g->how, g->t->s);
}

/* Compare the device pool with the CPU twin's result for the same params. */
static int check_gather(timer *t, const strata_gather_params *hp, uint8_t *dpool, size_t dbytes)
{
	uint8_t *got = malloc(dbytes), *ref = malloc(dbytes);
	int bad = -1;
	if (!got || !ref)
		goto out;
	if (strata_dev_copy(t->dev, got, dpool, dbytes, NULL) || strata_dev_sync(t->dev))
		goto out;
	memset(ref, 0, dbytes); /* the pool was cleared before the timed runs */
	strata_gather_params q = *hp;
	q.dst.base = ref;
	strata_k_gather_cpu(&q);
	bad = memcmp(got, ref, dbytes) != 0;
out:
	free(got);
	free(ref);
	return bad;
}

/* Pinned, mapped host bytes for the gather's source: the host tier's pool (what strata
 * fetches from, huge pages where possible) or the runtime's plain pinned allocation. */
typedef struct hostsrc {
	strata_host_pool *pool;
	uint8_t *ptr;
	const char *kind;
} hostsrc;

static int hostsrc_open(strata_dev *dev, int use_pool, int blocks, hostsrc *h)
{
	memset(h, 0, sizeof *h);
	size_t stride = strata_main_block_stride(64);
	if (!use_pool) {
		h->kind = "runtime pinned";
		return strata_dev_host_alloc(dev, (size_t)blocks * stride, (void **)&h->ptr);
	}
	strata_pool_config c = STRATA_POOL_CONFIG_INIT;
	c.page_bytes = stride;
	c.capacity_pages = (uint64_t)blocks;
	int err = strata_host_pool_create(dev, &c, &h->pool);
	if (err)
		return err;
	h->ptr = strata_host_pool_base(h->pool);
	h->kind = strata_host_mem_name(strata_host_pool_mem(h->pool));
	return 0;
}

static void hostsrc_close(strata_dev *dev, hostsrc *h)
{
	if (h->pool)
		strata_host_pool_destroy(h->pool);
	else
		strata_dev_host_free(dev, h->ptr);
	memset(h, 0, sizeof *h);
}

/* One event-timed row of the gather kernel with g's entries into the cleared pool
 * dpool (checked against the CPU twin with --check); 1 when the check failed. */
static int kernel_row(bench_out *bo, const bench_opts *o, timer *t, gctx *g, uint8_t *dpool,
		      size_t dbytes, int n, size_t payload, double c_rate, const char *name)
{
	bench_stats st = { 0 };
	strata_dev_memset(t->dev, dpool, 0, dbytes, NULL);
	double us = time_us(t, run_kernel, g, o->warmup, o->reps, &st);
	const char *chk = "-";
	int bad = 0;
	if (o->check) {
		bad = check_gather(t, &g->hp, dpool, dbytes) != 0;
		chk = bad ? "FAIL" : "ok";
	}
	double rate = payload / (us * 1e3);
	bench_out_row(bo, "entries", bench_fmt("%.0f", n), "method", name, "median_us",
		      bench_fmt("%.2f", us), "min_us", bench_fmt("%.2f", st.min), "GBps",
		      bench_fmt("%.2f", rate), "ratio", bench_fmt("%.3f", rate / c_rate), "check", chk,
		      NULL);
	return bad;
}

static int gather_part(bench_out *bo, const bench_opts *o, timer *t, const int *sizes, int n_sizes,
		       int use_pool)
{
	int fails = 0;
	bench_out_note(bo, "gather: random 584 B entries, pinned host -> device (ratio = rate / "
			   "contiguous pinned copy of the same bytes, same run)");
	for (int si = 0; si < n_sizes; si++) {
		int n = sizes[si], n_src = n * 4 < 65536 ? 65536 : n * 4;
		size_t sbytes = (size_t)(n_src / 64) * strata_main_block_stride(64);
		int dblocks = (n + 63) / 64;
		size_t dbytes = (size_t)dblocks * strata_main_block_stride(64);
		size_t payload = (size_t)n * STRATA_MAIN_ENTRY_BYTES;
		uint8_t *host = NULL, *dpool = NULL, *dcontig = NULL;
		int32_t *ids = malloc((size_t)n * 4), *d_ids = NULL;
		uint8_t *used = calloc((size_t)n_src, 1);
		hostsrc hs = { 0 };
		int herr = hostsrc_open(t->dev, use_pool, n_src / 64, &hs);
		host = hs.ptr;
		if (herr || !host ||
		    strata_dev_alloc(t->dev, dbytes, (void **)&dpool) ||
		    strata_dev_alloc(t->dev, payload, (void **)&dcontig) ||
		    strata_dev_alloc(t->dev, (size_t)n * 4, (void **)&d_ids) || !ids || !used) {
			bench_out_note(bo, "n=%d: allocation failed, skipped", n);
			goto next;
		}
		uint64_t seed = o->seed + (uint64_t)n;
		for (size_t i = 0; i < sbytes; i += 8) {
			uint64_t v = rng_next(&seed);
			memcpy(host + i, &v, 8);
		}
		for (int i = 0; i < n;) { /* distinct random entries */
			int v = (int)(rng_next(&seed) % (uint64_t)n_src);
			if (!used[v]) {
				used[v] = 1;
				ids[i++] = v;
			}
		}
		strata_dev_copy(t->dev, d_ids, ids, (size_t)n * 4, NULL);
		strata_dev_sync(t->dev);
		gctx g = { t };
		g.p.n = n;
		g.p.src_ids = d_ids;
		g.p.src = (strata_entry_space){ host, NULL, 0, 64 };
		g.p.dst = (strata_entry_space){ dpool, NULL, 0, 64 };
		g.hp = g.p;
		g.hp.src_ids = ids;
		g.src = host;
		g.dst = dcontig;
		g.bytes = payload;
		bench_stats st = { 0 };
		if (si == 0)
			bench_out_note(bo, "host memory: %s", hs.kind);
		double c_us = time_us(t, run_contig, &g, o->warmup, o->reps, &st);
		double c_rate = payload / (c_us * 1e3);
		bench_out_row(bo, "entries", bench_fmt("%.0f", n), "method", "contiguous copy",
			      "median_us", bench_fmt("%.2f", c_us), "min_us", bench_fmt("%.2f", st.min),
			      "GBps", bench_fmt("%.2f", c_rate), "ratio", "1.000", "check", "-", NULL);
		{
			/* The same kernel over entries 0..n-1 in order: every read sequential
			 * and aligned, so this is the rate SM-issued (zero-copy) PCIe reads
			 * reach on this host, apart from the randomness of the selection. */
			gctx gs = g;
			gs.p.src_ids = NULL;
			gs.hp.src_ids = NULL;
			fails += kernel_row(bo, o, t, &gs, dpool, dbytes, n, payload, c_rate,
					    "kernel sequential ids");
			/* L2 prefetch sizes (strata_gather_params.l2_prefetch): whether larger
			 * fetches per miss, so larger PCIe reads, raise the zero-copy rate, for
			 * sequential and for the random ids (auto per_warp) */
			static const int pfs[] = { 64, 128, 256 };
			for (int pi = 0; pi < 3 && !o->quick; pi++)
				for (int seq = 1; seq >= 0; seq--) {
					gctx gq = seq ? gs : g;
					gq.p.l2_prefetch = pfs[pi];
					gq.hp.l2_prefetch = pfs[pi];
					fails += kernel_row(bo, o, t, &gq, dpool, dbytes, n, payload, c_rate,
							    bench_fmt(seq ? "kernel sequential ids, L2::%.0fB"
									  : "kernel, L2::%.0fB",
								      (double)pfs[pi]));
				}
		}
		/* The same random ids from a packed copy of the entries (entry space packed:
		 * 576 data + 8 scale bytes together, stride 592 or 640): one read per entry
		 * instead of two, 128-byte aligned at 640. A host-tier layout candidate. */
		static const int packs[] = { 592, 640 };
		for (int pi = 0; pi < 2; pi++) {
			const int pk = packs[pi];
			size_t pbytes = (size_t)n_src * (size_t)pk;
			hostsrc hp2 = { 0 };
			if (hostsrc_open(t->dev, use_pool,
					 (int)((pbytes + strata_main_block_stride(64) - 1) /
					       strata_main_block_stride(64)),
					 &hp2) || !hp2.ptr) {
				bench_out_note(bo, "n=%d: packed %d source: allocation failed", n, pk);
				hostsrc_close(t->dev, &hp2);
				continue;
			}
			for (size_t i = 0; i + 8 <= pbytes; i += 8) {
				uint64_t v = rng_next(&seed);
				memcpy(hp2.ptr + i, &v, 8);
			}
			for (int seq = 0; seq < 2; seq++) {
				if (seq && pk != 640)
					continue;
				gctx gp = g;
				gp.p.src = (strata_entry_space){ hp2.ptr, NULL, 0, 64, pk };
				gp.hp.src = gp.p.src;
				if (seq) {
					gp.p.src_ids = NULL;
					gp.hp.src_ids = NULL;
				}
				fails += kernel_row(bo, o, t, &gp, dpool, dbytes, n, payload, c_rate,
						    bench_fmt(seq ? "kernel sequential, packed %.0f"
								  : "kernel packed %.0f",
							      (double)pk));
			}
			hostsrc_close(t->dev, &hp2);
		}
		if (si == 0) {
			/* The fixed cost: the same launch with a device count of 0 (the kernel
			 * exits at once), event-timed like every row here. */
			int32_t zero = 0, *d_zero = NULL;
			if (!strata_dev_alloc(t->dev, sizeof zero, (void **)&d_zero) &&
			    !strata_dev_copy(t->dev, d_zero, &zero, sizeof zero, NULL) &&
			    !strata_dev_sync(t->dev)) {
				gctx gz = g;
				gz.p.n_dev = d_zero;
				double z_us = time_us(t, run_kernel, &gz, o->warmup, o->reps, &st);
				bench_out_row(bo, "entries", "0", "method", "kernel, none (launch floor)",
					      "median_us", bench_fmt("%.2f", z_us), "min_us",
					      bench_fmt("%.2f", st.min), "GBps", "-", "ratio", "-",
					      "check", "-", NULL);
			}
			strata_dev_free(t->dev, d_zero);
		}
		static const int us[] = { 0, 1, 2, 4, 8, 16 };
		for (int ui = 0; ui < 6; ui++) {
			if (o->quick && ui > 2)
				break;
			g.p.per_warp = us[ui];
			char name[48];
			snprintf(name, sizeof name, "kernel per_warp=%s", us[ui] == 16 ? "bulk" : us[ui] ? bench_fmt("%.0f", us[ui]) : "auto");
			fails += kernel_row(bo, o, t, &g, dpool, dbytes, n, payload, c_rate, name);
		}
		{
			/* The in-step cost: the auto kernel and the contiguous copy replayed 32
			 * times from a CUDA graph (launch and event costs amortised), as a
			 * captured decode step pays them. GPU only. */
			enum { NG = 32 };
			g.p.per_warp = 0;
			strata_dev_memset(t->dev, dpool, 0, dbytes, NULL);
			bench_stats sc = { 0 };
			double gk = bench_timer_graph_us(t, run_kernel, &g, NG, o->warmup, o->reps, &st);
			double gc = gk >= 0 ? bench_timer_graph_us(t, run_contig, &g, NG, o->warmup,
								   o->reps, &sc)
					    : gk;
			if (gk >= 0 && gc > 0) {
				const char *chk = "-";
				if (o->check) {
					int bad = check_gather(t, &g.hp, dpool, dbytes);
					chk = bad ? "FAIL" : "ok";
					fails += bad != 0;
				}
				bench_out_row(bo, "entries", bench_fmt("%.0f", n), "method",
					      "contiguous copy, graph x32", "median_us",
					      bench_fmt("%.2f", gc), "min_us", bench_fmt("%.2f", sc.min),
					      "GBps", bench_fmt("%.2f", payload / (gc * 1e3)), "ratio", "-",
					      "check", "-", NULL);
				bench_out_row(bo, "entries", bench_fmt("%.0f", n), "method",
					      "kernel auto, graph x32", "median_us", bench_fmt("%.2f", gk),
					      "min_us", bench_fmt("%.2f", st.min), "GBps",
					      bench_fmt("%.2f", payload / (gk * 1e3)), "ratio",
					      bench_fmt("%.3f", gc / gk), "check", chk, NULL);
			} else if (gk == -1 || gc == -1) {
				bench_out_note(bo, "n=%d: graph replay failed", n);
			}
		}
		for (int how = 0; how < 2; how++) {
			/* per-entry copies: 2 calls per entry; keep the sweep's time bounded */
			if (how == STRATA_GATHER_BASELINE_EACH && n > (o->quick ? 4096 : 32768))
				continue;
			g.how = (strata_gather_baseline)how;
			strata_dev_memset(t->dev, dpool, 0, dbytes, NULL);
			int reps = o->reps < 3 ? o->reps : 3;
			double b_us = time_us(t, run_baseline, &g, 1, reps, &st);
			const char *chk = "-";
			if (b_us < 0) {
				bench_out_note(bo, "n=%d: baseline %s failed", n, how ? "batch" : "each");
				continue;
			}
			if (o->check) {
				int bad = check_gather(t, &g.hp, dpool, dbytes);
				chk = bad ? "FAIL" : "ok";
				fails += bad != 0;
			}
			double rate = payload / (b_us * 1e3);
			bench_out_row(bo, "entries", bench_fmt("%.0f", n), "method",
				      how ? "cudaMemcpyBatchAsync" : "cudaMemcpyAsync each",
				      "median_us", bench_fmt("%.2f", b_us), "min_us", bench_fmt("%.2f", st.min),
				      "GBps", bench_fmt("%.2f", rate), "ratio", bench_fmt("%.3f", rate / c_rate),
				      "check", chk, NULL);
		}
next:
		hostsrc_close(t->dev, &hs);
		strata_dev_free(t->dev, dpool);
		strata_dev_free(t->dev, dcontig);
		strata_dev_free(t->dev, d_ids);
		free(ids);
		free(used);
	}
	return fails;
}

/* Every resident entry of the hot cache equals its host original. */
static int check_hot(strata_dev *dev, strata_hotcache *hc, uint8_t **host, int n_rl, int me)
{
	strata_hotcache_pool_info pi;
	strata_hotcache_config c;
	strata_hotcache_pool(hc, &pi);
	strata_hotcache_get_config(hc, &c);
	size_t pb = (size_t)pi.n_blocks * pi.block_stride;
	uint8_t *pool = malloc(pb);
	int32_t *map = malloc((size_t)n_rl * me * 4);
	int bad = -1;
	if (!pool || !map || strata_hotcache_dump(hc, map, NULL, NULL) ||
	    strata_dev_copy(dev, pool, pi.base, pb, NULL) || strata_dev_sync(dev))
		goto out;
	bad = 0;
	size_t hs = strata_main_block_stride(64);
	for (int rl = 0; rl < n_rl; rl++)
		for (int id = 0; id < me; id++) {
			int g = map[(size_t)rl * me + id];
			if (g < 0)
				continue;
			const uint8_t *pbk = pool + (size_t)(g / pi.B) * pi.block_stride;
			const uint8_t *hbk = host[rl] + (size_t)(id / 64) * hs;
			bad |= memcmp(pbk + (size_t)(g % pi.B) * 576, hbk + (size_t)(id % 64) * 576, 576) != 0;
			bad |= memcmp(pbk + (size_t)pi.B * 576 + (size_t)(g % pi.B) * 8,
				      hbk + 64 * 576 + (size_t)(id % 64) * 8, 8) != 0;
		}
out:
	free(pool);
	free(map);
	return bad;
}

static int hot_part(bench_out *bo, const bench_opts *o, timer *t, int steps)
{
	const int batch = o->quick ? 2 : 8, topk = o->quick ? 64 : 512;
	const int me = o->quick ? 4096 : 32768; /* 16K or 128K tokens of context */
	int fails = 0;
	bench_out_note(bo, "hot cache: %d requests x 1 CSA layer, top-k %d, %d entries each, budget "
			   "2 x top-k, %d steps; bound = (1 - overlap) x selected bytes per step",
		       batch, topk, me, steps);
	for (int cfg = 0; cfg < 4; cfg++) {
		int kind = cfg < 2 ? STRATA_SELGEN_STRUCTURED : STRATA_SELGEN_UNIFORM, predict = cfg % 2;
		strata_hotcache_config c = STRATA_HOTCACHE_CONFIG_INIT;
		c.n_rl = batch;
		c.max_entries = me;
		c.topk = topk;
		strata_hotcache *hc = NULL;
		uint8_t **host = calloc((size_t)batch, sizeof *host);
		strata_selgen **gen = calloc((size_t)batch, sizeof *gen);
		int32_t *ids = malloc((size_t)batch * topk * 4), *prev = malloc((size_t)batch * topk * 4);
		int32_t rl_of[64], *d_ids = NULL, *d_rl = NULL, *d_out = NULL;
		double *step_us = malloc((size_t)steps * sizeof *step_us);
		size_t hb = (size_t)(me / 64) * strata_main_block_stride(64);
		strata_stream *side = NULL;
		int err = strata_hotcache_create(t->dev, &c, &hc);
		err = err ? err : strata_stream_create(t->dev, &side);
		err = err ? err : strata_dev_alloc(t->dev, (size_t)batch * topk * 4, (void **)&d_ids);
		err = err ? err : strata_dev_alloc(t->dev, (size_t)batch * topk * 4, (void **)&d_out);
		err = err ? err : strata_dev_alloc(t->dev, 64 * 4, (void **)&d_rl);
		for (int rl = 0; rl < batch && !err; rl++) {
			rl_of[rl] = rl;
			err = strata_dev_host_alloc(t->dev, hb, (void **)&host[rl]);
			if (!err) {
				uint64_t s = o->seed + (uint64_t)rl;
				for (size_t i = 0; i < hb; i += 8) {
					uint64_t v = rng_next(&s);
					memcpy(host[rl] + i, &v, 8);
				}
				err = strata_hotcache_bind_host(hc, rl, host[rl], me, NULL);
			}
			if (!err)
				err = strata_selgen_create(kind, me, topk, o->seed * 31 + (uint64_t)rl, &gen[rl]);
		}
		if (!err)
			err = strata_dev_copy(t->dev, d_rl, rl_of, (size_t)batch * 4, NULL);
		double ov_sum = 0, bound_sum = 0;
		uint64_t sel_total = 0;
		for (int s = 0; s < steps && !err; s++) {
			int sel = 0;
			for (int rl = 0; rl < batch; rl++)
				sel += strata_selgen_next(gen[rl], ids + (size_t)rl * topk);
			if (s > 0) {
				double ov = 0;
				for (int rl = 0; rl < batch; rl++)
					ov += strata_selgen_overlap(prev + (size_t)rl * topk, ids + (size_t)rl * topk, topk);
				ov /= batch;
				ov_sum += ov;
				bound_sum += (1.0 - ov) * sel * STRATA_MAIN_ENTRY_BYTES;
				sel_total += (uint64_t)sel;
			}
			memcpy(prev, ids, (size_t)batch * topk * 4);
			err = strata_dev_copy(t->dev, d_ids, ids, (size_t)batch * topk * 4, NULL);
			if (!err)
				err = strata_stream_sync(t->dev, NULL);
			strata_hotcache_batch b = { batch, topk, d_ids, d_rl, d_out };
			float ms = 0;
			err = err ? err : strata_event_record(t->dev, t->a, t->s);
			err = err ? err : strata_hotcache_step(hc, &b, t->s);
			err = err ? err : strata_event_record(t->dev, t->b, t->s);
			if (predict && !err) /* what the next step of these layers will likely need */
				err = strata_hotcache_predict(hc, batch, d_rl, side);
			err = err ? err : strata_event_sync(t->dev, t->b);
			err = err ? err : strata_event_elapsed_ms(t->dev, t->a, t->b, &ms);
			err = err ? err : strata_dev_sync(t->dev);
			step_us[s] = ms * 1000.0;
			if (s == 0 && !err) /* step 0 is the cold fill: not counted */
				err = strata_hotcache_stats_reset(hc);
		}
		strata_hotcache_stats st = { 0 };
		if (!err)
			err = strata_hotcache_stats_get(hc, -1, &st);
		if (!err)
			err = strata_hotcache_check(hc);
		const char *chk = "-";
		if (!err && o->check) {
			int bad = check_hot(t->dev, hc, host, batch, me);
			chk = bad ? "FAIL" : "ok";
			fails += bad != 0;
		}
		if (err) {
			bench_out_note(bo, "hot cache config %d failed: %s", cfg, strata_strerror(err));
		} else {
			int ns = steps - 1;
			bench_stats ts = bench_stats_of(step_us + 1, ns);
			double demand = (double)st.bytes_moved / ns, pf = (double)st.bytes_prefetched / ns;
			double bound = bound_sum / ns;
			bench_out_row(bo, "selection", kind ? "structured" : "uniform",
				      "predict", predict ? "on" : "off",
				      "overlap", bench_fmt("%.3f", ov_sum / ns),
				      "hit_rate", bench_fmt("%.3f", st.lookups ? (double)st.hits / st.lookups : 0),
				      "selected_B_step", bench_fmt("%.0f", (double)sel_total * 584 / ns),
				      "demand_B_step", bench_fmt("%.0f", demand),
				      "prefetch_B_step", bench_fmt("%.0f", pf),
				      "saved_B_step", bench_fmt("%.0f", (double)st.bytes_saved / ns),
				      "bound_B_step", bench_fmt("%.0f", bound),
				      "demand/bound", bench_fmt("%.3f", bound > 0 ? demand / bound : 0),
				      "total/bound", bench_fmt("%.3f", bound > 0 ? (demand + pf) / bound : 0),
				      "step_us_med", bench_fmt("%.2f", ts.median),
				      "check", chk, NULL);
		}
		for (int rl = 0; rl < batch; rl++) {
			strata_selgen_destroy(gen ? gen[rl] : NULL);
			if (host && host[rl])
				strata_dev_host_free(t->dev, host[rl]);
		}
		strata_hotcache_destroy(hc);
		if (side)
			strata_stream_destroy(t->dev, side);
		strata_dev_free(t->dev, d_ids);
		strata_dev_free(t->dev, d_out);
		strata_dev_free(t->dev, d_rl);
		free(host);
		free(gen);
		free(ids);
		free(prev);
		free(step_us);
		fails += err != 0;
	}
	return fails;
}

int strata_bench_fetch(int argc, char **argv)
{
	bench_opts o;
	if (bench_parse_common(&argc, argv, &o, usage))
		return 2;
	int sizes[16], n_sizes = 0, steps = 0, use_pool = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
			char *s = argv[++i], *tok;
			while ((tok = strtok(s, ",")) && n_sizes < 16) {
				uint64_t v;
				if (strata_parse_count(tok, &v) || v == 0 || v > (1u << 26)) {
					fprintf(stderr, "bad size '%s'\n", tok);
					return 2;
				}
				sizes[n_sizes++] = (int)v;
				s = NULL;
			}
		} else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
			steps = atoi(argv[++i]);
			if (steps < 2) {
				fprintf(stderr, "--steps needs at least 2\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--host") && i + 1 < argc) {
			const char *h = argv[++i];
			if (strcmp(h, "pool") && strcmp(h, "alloc")) {
				fprintf(stderr, "--host takes pool or alloc, not '%s'\n", h);
				return 2;
			}
			use_pool = !strcmp(h, "pool");
		} else {
			fprintf(stderr, "fetch: unknown argument '%s'\n%s\n", argv[i], usage);
			return 2;
		}
	}
	if (!n_sizes) {
		static const int full[] = { 512, 4096, 32768, 262144 }, quick[] = { 512, 4096 };
		n_sizes = o.quick ? 2 : 4;
		memcpy(sizes, o.quick ? quick : full, (size_t)n_sizes * sizeof *sizes);
	}
	if (!steps)
		steps = o.quick ? 20 : 100;
	strata_dev_config dc = STRATA_DEV_CONFIG_INIT;
	dc.backend = o.backend;
	strata_dev *dev;
	int err = strata_dev_open(&dc, &dev);
	if (err) {
		fprintf(stderr, "fetch: no device: %s\n", strata_strerror(err));
		return 2;
	}
	timer t;
	if (bench_timer_open(dev, &t)) {
		strata_dev_close(dev);
		return 2;
	}
	bench_out *bo = bench_out_open(&o, "fetch", dev);
	int fails = gather_part(bo, &o, &t, sizes, n_sizes, use_pool);
	fails += hot_part(bo, &o, &t, steps);
	bench_out_close(bo);
	bench_timer_close(&t);
	strata_dev_close(dev);
	if (fails)
		fprintf(stderr, "fetch: %d check(s) failed\n", fails);
	return fails ? 1 : 0;
}
