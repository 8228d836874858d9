/* `strata bench prefix`: prefix lookup latency for 32K .. 1M-token prompts (beside the
 * bare XXH3 of the same tokens); store throughput (beside the NVMe store's 1 MiB-record
 * write bandwidth); restore throughput into caller memory made before timing, from the
 * host copies (pages to the device, beside contiguous copies of the same bytes) and from
 * the NVMe store (beside the store reading the same records into the same memory at the
 * same queue depth). Each limit is timed in turn with the restore's repetitions, in this
 * run. A restore's bytes are its pages plus one checkpoint's residual state. With
 * --soak, 100 SIGKILL crash trials. --check verifies restores byte for byte, through the
 * allocate-for-me path and the caller-memory path. */
#define _GNU_SOURCE
#include "bench/bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "cachemgr/cachemgr.h"
#include "tests/cachemgr/pfx_crash.h"

static const char usage[] =
	"usage: strata bench prefix [--quick] [--check] [--soak] [--model flash|pro|tiny]\n"
	"                           [--pages N] [--dir DIR]";

static double secs(uint64_t ns) { return (double)ns * 1e-9; }

/* Lookup: a one-layer window-only model keeps stored blocks free of pages, so a 1M-token
 * chain costs one checkpoint; the lookup path (hash + probe per block) is the same. */
static int bench_lookup(bench_out *out, const bench_opts *o, const char *dir)
{
	strata_model m = STRATA_MODEL_INIT;
	strata_model_preset("flash", &m);
	strata_model_set_schedule(&m, "0");
	strata_prefix_config cfg = STRATA_PREFIX_CONFIG_INIT;
	cfg.dir = dir;
	cfg.model = &m;
	cfg.checkpoint_blocks = 1 << 20;
	cfg.store_bytes = 64ull << 20;
	strata_prefix *pfx = NULL;
	int rc = strata_prefix_open(&cfg, &pfx);
	if (rc) {
		fprintf(stderr, "prefix open: %s\n", strata_strerror(rc));
		return 1;
	}
	static const uint64_t sizes[] = { 32768, 131072, 524288, 1048576 };
	uint64_t maxn = 1048576, seed = o->seed;
	uint32_t *tok = malloc(maxn * 4);
	double *t_look = malloc(sizeof(double) * (size_t)o->reps);
	double *t_hash = malloc(sizeof(double) * (size_t)o->reps);
	for (uint64_t i = 0; i < maxn; i++)
		tok[i] = (uint32_t)fx_next(&seed) % 129280u;
	for (int k = 0; k < 4; k++) {
		uint64_t n = sizes[k];
		fx_seq *s = fx_seq_make(&m, (uint32_t)(n / 256), 0, 0, 0, 1 << 20);
		memcpy(s->tokens, tok, n * 4);
		strata_prefix_keys(&m, s->tokens, (uint32_t)(n / 256), s->keys);
		if ((rc = strata_prefix_store(pfx, s->tokens, n, &s->snap))) {
			fprintf(stderr, "store: %s\n", strata_strerror(rc));
			fx_seq_free(s);
			break;
		}
		strata_prefix_hit hit = { 0 };
		for (int r = -o->warmup; r < o->reps; r++) {
			uint64_t t0 = strata_now_ns();
			strata_prefix_lookup(pfx, s->tokens, n, &hit);
			uint64_t t1 = strata_now_ns();
			/* The limit: XXH3 over the same bytes, one pass, no chain, no probes. */
			volatile uint64_t sink = XXH3_64bits(s->tokens, n * 4);
			(void)sink;
			uint64_t t2 = strata_now_ns();
			if (r >= 0) {
				t_look[r] = (double)(t1 - t0) * 1e-6;
				t_hash[r] = (double)(t2 - t1) * 1e-6;
			}
		}
		bench_stats a = bench_stats_of(t_look, o->reps), b = bench_stats_of(t_hash, o->reps);
		int ok = hit.tokens == n;
		bench_out_row(out, "what", "lookup", "tokens", bench_fmt("%.0f", (double)n),
			      "median_ms", bench_fmt("%.3f", a.median), "p99_ms", bench_fmt("%.3f", a.p99),
			      "GB/s", bench_fmt("%.2f", n * 4.0 / a.median / 1e6),
			      "limit", "xxh3", "limit_GB/s", bench_fmt("%.2f", n * 4.0 / b.median / 1e6),
			      "ratio", bench_fmt("%.2f", b.median / a.median),
			      "target", n == 1048576 ? (a.median <= 2.0 ? "<=2ms ok" : "<=2ms MISS") : "-",
			      "check", ok ? "hit" : "NO HIT", NULL);
		fx_seq_free(s);
		if (!ok) {
			rc = 1;
			break;
		}
	}
	free(t_hash);
	free(t_look);
	free(tok);
	strata_prefix_close(pfx);
	return rc ? 1 : 0;
}

/* The NVMe store's own bandwidth on this device, measured now in a store file of its
 * own: n records of len[i] bytes, written from and read back into dst[i] with the queue
 * kept full (the store's default depth, as the prefix store uses). */
typedef struct nv_lim {
	strata_nvme_store *s;
	strata_nvme_op *ops, **ptr;
	int n;
	uint64_t bytes;
	char path[8192];
} nv_lim;

/* One pass over every record (kind), queue full; seconds, or a negative error. */
static double nv_lim_pass(nv_lim *L, strata_nvme_op_kind kind, const size_t *len,
			  uint8_t *const *dst)
{
	strata_nvme_op *done[64];
	int rc = 0, n = L->n;
	for (int i = 0; i < n; i++) {
		strata_page_handle h = L->ops[i].handle;
		memset(&L->ops[i], 0, sizeof L->ops[i]);
		L->ops[i].kind = kind;
		L->ops[i].key.lo = (uint64_t)i;
		L->ops[i].buf = dst[i];
		L->ops[i].len = len[i];
		L->ops[i].handle = h;
		L->ptr[i] = &L->ops[i];
	}
	uint64_t t0 = strata_now_ns();
	int sub = 0, fin = 0;
	while (fin < n && !rc) {
		int k = sub < n ? strata_nvme_submit(L->s, L->ptr + sub, n - sub) : 0;
		if (k > 0)
			sub += k;
		int r = strata_nvme_reap(L->s, 1, done, 64);
		if (r < 0)
			rc = r;
		for (int j = 0; j < r; j++)
			if (done[j]->result && !rc)
				rc = done[j]->result;
		fin += r > 0 ? r : 0;
	}
	if (kind == STRATA_NVME_OP_WRITE && !rc)
		rc = strata_nvme_sync(L->s);
	return rc ? rc : secs(strata_now_ns() - t0);
}

static void nv_lim_close(nv_lim *L)
{
	free(L->ptr);
	free(L->ops);
	if (L->s) {
		strata_nvme_destroy(L->s);
		unlink(L->path);
	}
	memset(L, 0, sizeof *L);
}

/* Create the store and write the records; *wr gets the write bandwidth. */
static int nv_lim_open(nv_lim *L, const char *dir, const char *name, int n, const size_t *len,
		       uint8_t *const *dst, double *wr)
{
	memset(L, 0, sizeof *L);
	snprintf(L->path, sizeof L->path, "%s/%s.strata", dir, name);
	uint64_t cap = 64ull << 20;
	for (int i = 0; i < n; i++) {
		L->bytes += len[i];
		cap += strata_nvme_record_bytes(len[i]);
	}
	strata_nvme_config cfg = STRATA_NVME_CONFIG_INIT;
	cfg.path = L->path;
	cfg.capacity_bytes = cap;
	cfg.flags = STRATA_NVME_CREATE;
	int rc = strata_nvme_open(&cfg, &L->s);
	if (rc)
		return rc;
	L->n = n;
	L->ops = calloc((size_t)n, sizeof *L->ops);
	L->ptr = calloc((size_t)n, sizeof *L->ptr);
	if (!L->ops || !L->ptr) {
		nv_lim_close(L);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++)
		fx_fill(dst[i], len[i], (uint64_t)i + 1);
	double t = nv_lim_pass(L, STRATA_NVME_OP_WRITE, len, dst);
	if (t < 0) {
		nv_lim_close(L);
		return (int)t;
	}
	*wr = (double)L->bytes / t / 1e9;
	return 0;
}

/* The 1 MiB-record limit: the store at its best, for the store row. */
static int nvme_limit_1m(const char *dir, uint64_t bytes, int reps, double *wr, double *rd)
{
	size_t rec = 1u << 20;
	int n = (int)((bytes + rec - 1) / rec);
	size_t *len = malloc((size_t)n * sizeof *len);
	uint8_t **dst = malloc((size_t)n * sizeof *dst);
	double *t = calloc((size_t)reps, sizeof *t);
	uint8_t *buf = NULL;
	nv_lim L;
	int rc = -ENOMEM;
	if (len && dst && t && !posix_memalign((void **)&buf, 4096, rec * (size_t)n)) {
		for (int i = 0; i < n; i++) {
			len[i] = rec;
			dst[i] = buf + rec * (size_t)i;
		}
		rc = nv_lim_open(&L, dir, "limit1m", n, len, dst, wr);
		for (int r = -1; r < reps && !rc; r++) {
			double x = nv_lim_pass(&L, STRATA_NVME_OP_READ, len, dst);
			if (x < 0)
				rc = (int)x;
			else if (r >= 0)
				t[r] = x;
		}
		if (!rc)
			*rd = (double)L.bytes / bench_stats_of(t, reps).median / 1e9;
		nv_lim_close(&L);
	}
	free(t);
	free(buf);
	free(dst);
	free(len);
	return rc;
}

/* Caller memory for a restore of `pages` pages: per (layer, family) one array, 4 KiB
 * aligned, in host memory or in device memory. Released with free_into. */
static int alloc_into(strata_dev *dev, const strata_model *m, uint32_t pages, bool device,
		      strata_prefix_restored *res)
{
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			if (!strata_prefix_has(m, l, (strata_prefix_family)f))
				continue;
			size_t b = strata_prefix_page_bytes(m, (strata_prefix_family)f) * pages;
			int rc = device ? strata_dev_alloc(dev, b, &res->into[l][f])
					: posix_memalign(&res->into[l][f], 4096, b) ? -ENOMEM : 0;
			if (rc)
				return rc;
			if (!device)
				memset(res->into[l][f], 0, b); /* fault it in now, not in the restore */
		}
	if (posix_memalign(&res->into_state, 4096, strata_prefix_state_bytes(m)))
		return -ENOMEM;
	memset(res->into_state, 0, strata_prefix_state_bytes(m));
	return 0;
}

static void free_into(strata_dev *dev, bool device, strata_prefix_restored *res)
{
	for (int l = 0; l < STRATA_MAX_LAYERS; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			if (device)
				strata_dev_free(dev, res->into[l][f]);
			else
				free(res->into[l][f]);
			res->into[l][f] = NULL;
		}
	free(res->into_state);
	res->into_state = NULL;
}

static int bench_throughput(bench_out *out, const bench_opts *o, const char *dir,
			    const char *model, uint32_t pages, strata_dev *dev)
{
	strata_model m = STRATA_MODEL_INIT;
	if (strata_model_preset(model, &m))
		return 2;
	fx_seq *s = fx_seq_make(&m, pages, 0, o->seed, o->seed + 1, 16);
	uint64_t page_bytes = 0;
	int n_rec = 0;
	for (int l = 0; l < m.n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
			if (strata_prefix_has(&m, l, (strata_prefix_family)f)) {
				page_bytes += strata_prefix_page_bytes(&m, (strata_prefix_family)f) * pages;
				n_rec += (int)pages;
			}
	uint64_t state = fx_state_bytes(&m) * (uint64_t)s->n_ck;
	/* A restore moves this rank's pages and one checkpoint's state. */
	uint64_t sb = strata_prefix_state_bytes(&m);
	n_rec += m.n_layers;
	strata_prefix_config cfg = STRATA_PREFIX_CONFIG_INIT;
	cfg.dir = dir;
	cfg.model = &m;
	cfg.dev = dev;
	cfg.checkpoint_blocks = 16;
	cfg.budget_host = (page_bytes + state) * 2;
	cfg.store_bytes = (page_bytes + state) * 2 + (256ull << 20);
	strata_prefix *pfx = NULL;
	int rc = strata_prefix_open(&cfg, &pfx), bad = 0;
	if (rc) {
		fprintf(stderr, "prefix open: %s\n", strata_strerror(rc));
		fx_seq_free(s);
		return 1;
	}
	/* Destinations, the caller's, made before any timing: the device for the host-copy
	 * restore, 4 KiB-aligned host memory for the NVMe one. */
	strata_prefix_restored rdev = STRATA_PREFIX_RESTORED_INIT,
			       rhost = STRATA_PREFIX_RESTORED_INIT;
	size_t *rlen = malloc((size_t)n_rec * sizeof *rlen);
	uint8_t **rdst = malloc((size_t)n_rec * sizeof *rdst);
	nv_lim PL = { 0 };
	void *h = NULL, *d = NULL, *hs = NULL, *ds = NULL;
	double *t = malloc(sizeof(double) * (size_t)(o->reps > 5 ? o->reps : 5));
	double *tl = malloc(sizeof(double) * (size_t)o->reps);
	for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
		rdev.dest[f] = STRATA_PFX_TO_DEVICE;
		rhost.dest[f] = STRATA_PFX_TO_HOST;
	}
	if ((rc = alloc_into(dev, &m, pages, true, &rdev)) ||
	    (rc = alloc_into(dev, &m, pages, false, &rhost))) {
		fprintf(stderr, "restore buffers: %s\n", strata_strerror(rc));
		goto out;
	}
	/* Limits measured now, on this machine: the NVMe store with 1 MiB records and with
	 * the restore's own records (same sizes, same order, same destinations, same queue
	 * depth). */
	double nv_wr = 0, nv_rd = 0, pg_wr = 0;
	if ((rc = nvme_limit_1m(dir, page_bytes + state, o->reps, &nv_wr, &nv_rd)))
		fprintf(stderr, "nvme limit: %s\n", strata_strerror(rc));
	if (rlen && rdst) {
		int k = 0;
		for (int l = 0, off = 0; l < m.n_layers; l++) {
			rlen[k] = strata_prefix_ring_bytes(&m) + strata_prefix_comp_bytes(&m, l);
			rdst[k] = (uint8_t *)rhost.into_state + off;
			off += (int)rlen[k++];
		}
		for (uint32_t j = 0; j < pages; j++)
			for (int l = 0; l < m.n_layers; l++)
				for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
					if (rhost.into[l][f]) {
						rlen[k] = strata_prefix_page_bytes(&m, (strata_prefix_family)f);
						rdst[k] = (uint8_t *)rhost.into[l][f] + j * rlen[k];
						k++;
					}
		if ((rc = nv_lim_open(&PL, dir, "limitpg", n_rec, rlen, rdst, &pg_wr)))
			fprintf(stderr, "nvme page limit: %s\n", strata_strerror(rc));
	}
	/* The host-copy restore's limit: the same bytes as two contiguous copies issued
	 * the way the restore issues its own: the pages pinned host -> device (async on the
	 * GPU), the state host -> host meanwhile, then one sync. Timed in turn with the
	 * restore's repetitions below, so that both see the same machine. */
	if (strata_dev_host_alloc(dev, page_bytes, &h) || strata_dev_alloc(dev, page_bytes, &d) ||
	    posix_memalign(&hs, 4096, sb) || posix_memalign(&ds, 4096, sb) || !t || !tl) {
		rc = -ENOMEM;
		goto out;
	}
	memset(h, 1, page_bytes);
	memset(hs, 2, sb);
	memset(ds, 0, sb);
	/* Store: fresh each rep (evict all first), pages + states to NVMe, synced. */
	int reps = o->reps < 5 ? o->reps : 5;
	rc = 0;
	for (int r = 0; r < reps && !rc; r++) {
		strata_prefix_evict(pfx, 0, 0);
		uint64_t t0 = strata_now_ns();
		rc = strata_prefix_store(pfx, s->tokens, (uint64_t)pages * 256, &s->snap);
		t[r] = secs(strata_now_ns() - t0);
	}
	if (!rc) {
		bench_stats st = bench_stats_of(t, reps);
		double gbs = (double)(page_bytes + state) / st.median / 1e9;
		bench_out_row(out, "what", "store", "tokens", bench_fmt("%.0f", pages * 256.0),
			      "median_ms", bench_fmt("%.2f", st.median * 1e3),
			      "p99_ms", bench_fmt("%.2f", st.p99 * 1e3), "GB/s", bench_fmt("%.2f", gbs),
			      "limit", "nvme_write_1M", "limit_GB/s", bench_fmt("%.2f", nv_wr),
			      "ratio", bench_fmt("%.2f", nv_wr > 0 ? gbs / nv_wr : 0), "target", "-",
			      "check", "-", NULL);
	}
	/* Restore from host copies (all pages to the device), then from the NVMe store (all
	 * to the host), each into the caller's memory made above. */
	strata_prefix_hit hit;
	strata_prefix_lookup(pfx, s->tokens, (uint64_t)pages * 256, &hit);
	for (int from_nvme = 0; from_nvme < 2 && !rc; from_nvme++) {
		if (from_nvme)
			strata_prefix_evict(pfx, 0, UINT64_MAX);
		strata_prefix_restored *res = from_nvme ? &rhost : &rdev;
		uint64_t served = 0;
		for (int r = -o->warmup; r < o->reps && !rc; r++) {
			double lim_s;
			if (from_nvme) {
				lim_s = PL.s ? nv_lim_pass(&PL, STRATA_NVME_OP_READ, rlen, rdst) : 0;
			} else {
				uint64_t t0 = strata_now_ns();
				strata_dev_copy(dev, d, h, page_bytes, NULL);
				memcpy(ds, hs, sb);
				strata_dev_sync(dev);
				lim_s = secs(strata_now_ns() - t0);
			}
			if (r >= 0)
				tl[r] = lim_s;
			uint64_t t0 = strata_now_ns();
			rc = strata_prefix_restore(pfx, &hit, 1, 0, res);
			strata_dev_sync(dev);
			if (r >= 0)
				t[r] = secs(strata_now_ns() - t0);
			served = (from_nvme ? res->bytes_from_nvme : res->bytes_from_host) + sb;
			strata_prefix_restored_release(pfx, res);
		}
		if (rc)
			break;
		const char *chk = "-";
		if (o->check) {
			/* The default path (restore allocates) and, on the host, the caller's
			 * memory too. */
			strata_prefix_restored def = STRATA_PREFIX_RESTORED_INIT;
			for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
				def.dest[f] = STRATA_PFX_TO_HOST;
			rc = strata_prefix_restore(pfx, &hit, 1, 0, &def);
			int diff = rc ? -1 : fx_check_restored(s, &def);
			strata_prefix_restored_release(pfx, &def);
			if (!diff && from_nvme) {
				memset(rhost.into_state, 0, strata_prefix_state_bytes(&m));
				rc = strata_prefix_restore(pfx, &hit, 1, 0, &rhost);
				diff = rc ? -1 : fx_check_restored(s, &rhost);
				if (!diff && rhost.pages[0][0] != rhost.into[0][0])
					diff = -2;
				strata_prefix_restored_release(pfx, &rhost);
			}
			chk = diff ? "FAIL" : "ok";
			bad |= diff != 0;
		}
		bench_stats st = bench_stats_of(t, o->reps), sl = bench_stats_of(tl, o->reps);
		double gbs = (double)served / st.median / 1e9;
		double lim = sl.median > 0 ? (double)(from_nvme ? PL.bytes : page_bytes + sb) / sl.median / 1e9 : 0;
		bench_out_row(out, "what", from_nvme ? "restore_nvme" : "restore_host",
			      "tokens", bench_fmt("%.0f", pages * 256.0),
			      "median_ms", bench_fmt("%.2f", st.median * 1e3),
			      "p99_ms", bench_fmt("%.2f", st.p99 * 1e3), "GB/s", bench_fmt("%.2f", gbs),
			      "limit", from_nvme ? "nvme_read_same" : "contig_copy",
			      "limit_GB/s", bench_fmt("%.2f", lim),
			      "ratio", bench_fmt("%.2f", lim > 0 ? gbs / lim : 0),
			      "target", lim > 0 && gbs / lim >= 0.9 ? ">=0.9 ok" : ">=0.9 MISS",
			      "check", chk, NULL);
	}
	bench_out_note(out, "restores move pages + one checkpoint's state (%.1f MB); contig_copy: "
		       "pinned pages -> device with the state memcpy alongside", sb / 1e6);
	bench_out_note(out, "nvme_read_same: the store reading the restore's %d records (%.0f KiB "
		       "average) into the same memory at its queue depth; with 1 MiB records it "
		       "reads %.2f GB/s", n_rec, n_rec ? (double)(page_bytes + sb) / n_rec / 1024 : 0,
		       nv_rd);
out:
	if (rc)
		fprintf(stderr, "prefix: %s\n", strata_strerror(rc));
	nv_lim_close(&PL);
	free(rdst);
	free(rlen);
	free(tl);
	free(t);
	free(hs);
	free(ds);
	strata_dev_host_free(dev, h);
	strata_dev_free(dev, d);
	free_into(dev, true, &rdev);
	free_into(dev, false, &rhost);
	strata_prefix_close(pfx);
	fx_seq_free(s);
	return rc || bad ? 1 : 0;
}

static int soak(bench_out *out, const char *dir, int trials, uint64_t seed)
{
	strata_model m = STRATA_MODEL_INIT;
	strata_model_preset("tiny", &m);
	int failed = 0, total = 0;
	uint64_t t0 = strata_now_ns();
	for (int t = 0; t < trials; t++) {
		char sub[8192], msg[256];
		snprintf(sub, sizeof sub, "%s/soak%d", dir, t);
		int nc = 0;
		unsigned us = (unsigned)(fx_next(&seed) % 150000);
		int bad = fx_crash_trial(sub, &m, fx_next(&seed), us, &nc, msg, sizeof msg);
		if (bad) {
			fprintf(stderr, "crash trial %d (kill after %u us): line %d: %s\n", t, us, bad, msg);
			failed++;
		}
		total += nc;
		fx_rmdir(sub);
	}
	bench_out_row(out, "what", "crash_soak", "trials", bench_fmt("%.0f", trials),
		      "committed_checked", bench_fmt("%.0f", total), "failed", bench_fmt("%.0f", failed),
		      "seconds", bench_fmt("%.1f", secs(strata_now_ns() - t0)), NULL);
	return failed ? 1 : 0;
}

int strata_bench_prefix(int argc, char **argv)
{
	bench_opts o;
	if (bench_parse_common(&argc, argv, &o, usage) < 0)
		return 2;
	const char *model = "flash", *dir_arg = NULL;
	int do_soak = 0;
	uint64_t pages = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--soak"))
			do_soak = 1;
		else if (!strcmp(argv[i], "--model") && i + 1 < argc)
			model = argv[++i];
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir_arg = argv[++i];
		else if (!strcmp(argv[i], "--pages") && i + 1 < argc) {
			if (strata_parse_count(argv[++i], &pages) || !pages || pages > 65536) {
				fprintf(stderr, "--pages: 1 .. 65536\n%s\n", usage);
				return 2;
			}
		} else {
			fprintf(stderr, "unknown option %s\n%s\n", argv[i], usage);
			return 2;
		}
	}
	if (!pages)
		pages = o.quick ? 8 : 64;
	char tmpl[] = "/tmp/strata-bench-prefix-XXXXXX", dir[4096];
	if (dir_arg) {
		/* mkdir -p: the parents may not exist yet (a fresh machine's /tmp/pfx). */
		snprintf(dir, sizeof dir, "%s/strata-bench-prefix-%d", dir_arg, (int)getpid());
		for (char *p = strchr(dir + 1, '/'); p; p = strchr(p + 1, '/')) {
			*p = 0;
			if (mkdir(dir, 0755) && errno != EEXIST) {
				fprintf(stderr, "cannot create %s: %s\n", dir, strerror(errno));
				return 2;
			}
			*p = '/';
		}
		if (mkdir(dir, 0755)) {
			fprintf(stderr, "cannot create %s: %s\n", dir, strerror(errno));
			return 2;
		}
	} else if (mkdtemp(tmpl)) {
		snprintf(dir, sizeof dir, "%s", tmpl);
	} else {
		return 2;
	}
	strata_dev_config dc = STRATA_DEV_CONFIG_INIT;
	dc.backend = o.backend;
	strata_dev *dev = NULL;
	int rc = strata_dev_open(&dc, &dev);
	if (rc) {
		fprintf(stderr, "device: %s\n", strata_strerror(rc));
		return 2;
	}
	bench_out *out = bench_out_open(&o, "prefix", dev);
	char sub[4096 + 16];
	snprintf(sub, sizeof sub, "%s/lookup", dir);
	int status = bench_lookup(out, &o, sub);
	snprintf(sub, sizeof sub, "%s/tput", dir);
	status |= bench_throughput(out, &o, sub, model, (uint32_t)pages, dev);
	if (do_soak)
		status |= soak(out, dir, 100, o.seed);
	else
		bench_out_note(out, "crash soak skipped (--soak runs 100 SIGKILL trials)");
	bench_out_close(out);
	strata_dev_close(dev);
	fx_rmdir(dir);
	return status ? 1 : 0;
}
