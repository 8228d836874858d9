/*
 * `strata demo`: several agents with long contexts decode with their C4 main entries
 * on the pinned host tier (HiSparse: prefetch/'s device hot cache in front), next to
 * the same agents with everything on the device. Prints bytes per tier, device bytes
 * saved, the hot-cache hit rate, the attention-side step time of both, and whether
 * every output of every step and layer is bit-identical.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ref_eng_int.h"

static const char *demo_usage =
	"usage: strata demo [--model tiny|flash|pro] [--context N] [--agents N] [--steps N]\n"
	"                   [--prefill N] [--uniform] [--seed N] [--prefix]\n"
	"\n"
	"Runs the reference V4 attention-cache engine (synthetic weights and inputs: a\n"
	"reference for the cache mechanics, not a language model) twice over the same\n"
	"agents: C4 main on the device (all-resident) and C4 main on the pinned host tier\n"
	"with a device hot cache (HiSparse). Defaults: on a GPU --model flash --context 64K\n"
	"--agents 4 --steps 16 --prefill 1K; on a CPU --model tiny --context 3K --agents 4\n"
	"--steps 24 --prefill 3K. Agent i has context N - i*N/8 tokens; the model runs over\n"
	"the last --prefill of them and a synthetic fill provides the rest. --uniform draws\n"
	"inputs from noise (the worst case for a cache) instead of drifting topics.\n"
	"--prefix: agents resending one prompt of --context tokens (default 8K on a GPU,\n"
	"2K on a CPU): the first prefills and stores it in strata's prefix store, the\n"
	"others restore it (from host copies, then from NVMe after a reopen); prints\n"
	"prefill vs restore time and whether all outputs are identical.\n";

static void human(char *buf, size_t n, double bytes)
{
	if (bytes >= 1024.0 * 1024 * 1024)
		snprintf(buf, n, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
	else if (bytes >= 1024.0 * 1024)
		snprintf(buf, n, "%.1f MiB", bytes / (1024.0 * 1024));
	else
		snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

typedef struct run_result {
	strata_ref_stats st;
	uint64_t digest, median_ns;
	double prefill_s;
} run_result;

static int run_mode(strata_dev *dev, const strata_ref_config *base, strata_ref_mode mode,
		    int context, int model_tokens, int steps, run_result *res)
{
	strata_ref_config c = *base;
	c.mode = mode;
	/* HiSparse as bench decode measured it fastest (2026-11-30, H200): misses reach
	 * attention without waiting for the hot cache, which admits them afterwards */
	if (mode == STRATA_REF_HISPARSE)
		c.direct_misses = STRATA_REF_MISS_AUTO;
	strata_ref_engine *e = NULL;
	uint64_t *t = calloc((size_t)steps, sizeof *t);
	int err = t ? strata_ref_engine_create(dev, &c, &e) : -ENOMEM;
	uint64_t t0 = strata_now_ns();
	for (int r = 0; r < c.n_req && !err; r++) {
		/* The bulk of a long context gets the synthetic fill; the model runs over
		 * the last model_tokens (compressors, windows, index keys for real). */
		int n = context - r * (context / 8), run = n < model_tokens ? n : model_tokens;
		if (n > run)
			err = strata_ref_engine_fill(e, r, n - run);
		if (!err)
			err = strata_ref_engine_prefill(e, r, run);
	}
	res->prefill_s = (double)(strata_now_ns() - t0) / 1e9;
	for (int s = 0; s < steps && !err; s++) {
		err = strata_ref_engine_decode_step(e);
		strata_ref_stats st;
		strata_ref_engine_stats(e, &st);
		t[s] = st.last_device_ns;
	}
	if (!err) {
		strata_ref_engine_stats(e, &res->st);
		res->digest = strata_ref_engine_digest(e);
		qsort(t, (size_t)steps, sizeof *t, cmp_u64);
		res->median_ns = t[steps / 2];
	}
	strata_ref_engine_destroy(e);
	free(t);
	return err;
}

int strata_demo_main(int argc, char **argv)
{
	const char *model = NULL;
	uint64_t context = 0, agents = 4, steps = 0, seed = 1, prefill = 0;
	int uniform = 0, prefix = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(demo_usage, stdout);
			return 0;
		} else if (!strcmp(a, "--uniform")) {
			uniform = 1;
		} else if (!strcmp(a, "--prefix")) {
			prefix = 1;
		} else if (v && !strcmp(a, "--model")) {
			model = v;
			i++;
		} else if (v && (!strcmp(a, "--context") || !strcmp(a, "--agents") ||
				 !strcmp(a, "--steps") || !strcmp(a, "--seed") ||
				 !strcmp(a, "--prefill"))) {
			uint64_t *dst = a[2] == 'c' ? &context : a[2] == 'a' ? &agents
				      : a[2] == 'p' ? &prefill : a[3] == 't' ? &steps : &seed;
			if (strata_parse_count(v, dst) || (*dst == 0 && dst != &seed)) {
				fprintf(stderr, "strata demo: bad value '%s' for %s\n", v, a);
				return 2;
			}
			i++;
		} else {
			fprintf(stderr, "strata demo: unknown argument '%s'\n%s", a, demo_usage);
			return 2;
		}
	}
	strata_dev *dev = NULL;
	int err = strata_dev_open(NULL, &dev);
	if (err) {
		fprintf(stderr, "strata demo: cannot open a device: %s\n", strata_strerror(err));
		return 1;
	}
	int gpu = strata_dev_is_gpu(dev);
	if (!model)
		model = gpu ? "flash" : "tiny";
	if (!context)
		context = prefix ? (gpu ? 8192 : 2048) : gpu ? 65536 : 3072;
	if (!prefill)
		prefill = gpu ? 1024 : context;
	if (!steps)
		steps = gpu ? 16 : 24;
	strata_ref_config c = STRATA_REF_CONFIG_INIT;
	if (strata_model_preset(model, &c.model)) {
		fprintf(stderr, "strata demo: unknown model '%s' (tiny, flash or pro)\n", model);
		strata_dev_close(dev);
		return 2;
	}
	if (agents > 256 || context > (1u << 24) || steps > 100000 || prefill > context) {
		fprintf(stderr, "strata demo: at most 256 agents, 16M tokens, 100000 steps\n");
		strata_dev_close(dev);
		return 2;
	}
	c.n_req = (int)agents;
	c.max_ctx = (int)(context + steps);
	c.seed = seed;
	c.inputs = uniform ? STRATA_REF_UNIFORM : STRATA_REF_STRUCTURED;
	if (prefix) {
		int rc = ref_demo_prefix(dev, &c, (int)context, (int)steps);
		strata_dev_close(dev);
		return rc;
	}
	printf("strata demo: %d agents, model %s (%d layers: %d CSA, %d HCA), contexts %llu..%llu "
	       "tokens, %llu decode steps, %s inputs, backend %s (%s)\n",
	       c.n_req, c.model.name, c.model.n_layers, strata_model_count(&c.model, 4),
	       strata_model_count(&c.model, 128), (unsigned long long)(context - (agents - 1) * (context / 8)),
	       (unsigned long long)context, (unsigned long long)steps,
	       uniform ? "uniform-noise" : "topic-drift", gpu ? "gpu" : "cpu", strata_dev_name(dev));
	printf("(reference engine: synthetic weights, exact V4 cache mechanics; not a language model)\n\n");
	fflush(stdout);
	run_result ar = { 0 }, hs = { 0 };
	if (prefill < context)
		printf("each agent: synthetic fill of its first tokens, then the model over the last "
		       "%llu (--prefill)\n\n", (unsigned long long)prefill);
	fflush(stdout);
	err = run_mode(dev, &c, STRATA_REF_ALL_RESIDENT, (int)context, (int)prefill, (int)steps, &ar);
	if (!err)
		err = run_mode(dev, &c, STRATA_REF_HISPARSE, (int)context, (int)prefill, (int)steps, &hs);
	strata_dev_close(dev);
	if (err) {
		fprintf(stderr, "strata demo: %s\n", strata_strerror(err));
		return 1;
	}
	char b1[32], b2[32], b3[32], b4[32];
	printf("  %-34s %18s %22s\n", "", "all-resident", "HiSparse");
	human(b1, sizeof b1, (double)ar.st.device_bytes);
	human(b2, sizeof b2, (double)hs.st.device_bytes);
	printf("  %-34s %18s %22s\n", "device bytes (caches)", b1, b2);
	human(b3, sizeof b3, (double)ar.st.host_bytes);
	human(b4, sizeof b4, (double)hs.st.host_bytes);
	printf("  %-34s %18s %22s\n", "pinned host bytes (C4 main)", b3, b4);
	human(b1, sizeof b1, (double)hs.st.hot_bytes);
	printf("  %-34s %18s %22s\n", "  of device: hot cache", "-", b1);
	double saved = 1.0 - (double)hs.st.device_bytes / (double)ar.st.device_bytes;
	char pct[32];
	snprintf(pct, sizeof pct, "%.1f%% (%.2fx)", 100.0 * saved,
		 (double)ar.st.device_bytes / (double)hs.st.device_bytes);
	printf("  %-34s %18s %22s\n", "device bytes saved vs all-resident", "-", pct);
	uint64_t look = hs.st.hits + hs.st.misses;
	snprintf(pct, sizeof pct, "%.1f%%", look ? 100.0 * (double)hs.st.hits / (double)look : 0.0);
	printf("  %-34s %18s %22s\n", "hot-cache hit rate", "-", pct);
	human(b1, sizeof b1, (double)hs.st.fetched_bytes);
	printf("  %-34s %18s %22s\n", "bytes fetched host -> device", "-", b1);
	snprintf(b1, sizeof b1, "%.3f ms", (double)ar.median_ns / 1e6);
	snprintf(b2, sizeof b2, "%.3f ms (%.2fx)", (double)hs.median_ns / 1e6,
		 (double)hs.median_ns / (double)(ar.median_ns ? ar.median_ns : 1));
	printf("  %-34s %18s %22s\n", "attention-side step time (median)", b1, b2);
	snprintf(b1, sizeof b1, "%.1f s", ar.prefill_s);
	snprintf(b2, sizeof b2, "%.1f s", hs.prefill_s);
	printf("  %-34s %18s %22s\n", "prefill (host model math + writes)", b1, b2);
	int same = ar.digest == hs.digest;
	printf("\n  outputs identical to all-resident: %s (%llu steps x %d layers x %d agents, "
	       "XXH3 %016llx)\n", same ? "yes" : "NO", (unsigned long long)steps,
	       c.model.n_layers, c.n_req, (unsigned long long)hs.digest);
	return same ? 0 : 1;
}
