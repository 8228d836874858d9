/* `strata`: the command-line tool. Subcommands: sizes, bench, demo, version, help.
 * Parsing stays here; the work is done by the libraries and bench/. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "bench/bench.h"
#include "engine/engine.h"
#include "kernels/kernels.h"
#include "strata_rev.h" /* STRATA_GIT_REV, generated at build time (cmake/strata_rev.cmake) */

/* Benchmarks and the demo arrive in separate files; a build without one says so
 * instead of failing to link. */
#pragma weak strata_bench_indexer
#pragma weak strata_bench_fetch
#pragma weak strata_bench_tiers
#pragma weak strata_bench_decode
#pragma weak strata_bench_prefix
#pragma weak strata_bench_attn
#pragma weak strata_demo_main

static const char *usage_text =
	"usage: strata [--help] [--version] COMMAND [ARGS]\n"
	"\n"
	"strata: tiered KV-cache manager for DeepSeek-V4 sparse attention.\n"
	"\n"
	"commands:\n"
	"  sizes   --model flash|pro|tiny [--schedule R,R,..] [--index mxfp4|fp8]\n"
	"          --context N [--json]   per-request attention-cache sizes\n"
	"  bench   NAME [options]         benchmarks: indexer, fetch, tiers, decode, prefix, attn\n"
	"  demo    [options]              agents decoding with C4 main on the host tier\n"
	"  info                           backend and device strata would use here\n"
	"  version                        print the version\n"
	"\n"
	"Counts accept K, M, G suffixes (binary): --context 128K, --context 1M.\n"
	"Run `strata COMMAND --help` for a command's options.\n";

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "strata: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see `strata --help`)\n");
	return 2;
}

static void print_bytes_row(const char *what, uint64_t entries, int per, uint64_t bytes)
{
	double gib = bytes / (1024.0 * 1024 * 1024), mib = bytes / (1024.0 * 1024);
	char human[32];
	if (gib >= 1.0)
		snprintf(human, sizeof human, "%.2f GiB", gib);
	else
		snprintf(human, sizeof human, "%.1f MiB", mib);
	if (per)
		printf("  %-28s %12llu %10d %16llu %12s\n", what, (unsigned long long)entries,
		       per, (unsigned long long)bytes, human);
	else
		printf("  %-28s %12s %10s %16llu %12s\n", what, "", "",
		       (unsigned long long)bytes, human);
}

static int cmd_sizes(int argc, char **argv)
{
	const char *model = "flash", *schedule = NULL, *ctx = NULL, *fmt = NULL;
	int json = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			printf("usage: strata sizes --model flash|pro|tiny [--schedule R,R,...]\n"
			       "                    [--index mxfp4|fp8] --context N [--json]\n"
			       "Prints the per-request attention cache of FORMATS.md section 6 and\n"
			       "the device bytes left when C4 main lives on the host tier.\n");
			return 0;
		} else if (!strcmp(a, "--json")) {
			json = 1;
		} else if ((!strcmp(a, "--model") || !strcmp(a, "--schedule") ||
			    !strcmp(a, "--context") || !strcmp(a, "--index"))) {
			if (!v)
				return usage_error("%s needs a value", a);
			if (a[2] == 'm')
				model = v;
			else if (a[2] == 's')
				schedule = v;
			else if (a[2] == 'c')
				ctx = v;
			else
				fmt = v;
			i++;
		} else {
			return usage_error("sizes: unknown argument '%s'", a);
		}
	}
	strata_model m = STRATA_MODEL_INIT;
	if (strata_model_preset(model, &m))
		return usage_error("unknown model '%s' (flash, pro or tiny)", model);
	if (schedule && strata_model_set_schedule(&m, schedule))
		return usage_error("bad schedule '%s' (comma-separated 0, 4 or 128)", schedule);
	if (fmt) {
		if (!strcmp(fmt, "mxfp4"))
			m.index_fmt = STRATA_INDEX_MXFP4;
		else if (!strcmp(fmt, "fp8"))
			m.index_fmt = STRATA_INDEX_FP8;
		else
			return usage_error("bad index format '%s' (mxfp4 or fp8)", fmt);
	}
	if (!ctx)
		return usage_error("sizes needs --context N%s", "");
	uint64_t tokens;
	if (strata_parse_count(ctx, &tokens) || tokens == 0)
		return usage_error("bad context '%s' (a positive count such as 128K or 1M)", ctx);
	strata_sizes s;
	strata_model_sizes(&m, tokens, &s);
	int n4 = strata_model_count(&m, 4), n128 = strata_model_count(&m, 128);
	if (json) {
		printf("{\"model\":\"%s\",\"tokens\":%llu,\"c4_layers\":%d,\"c128_layers\":%d,"
		       "\"layers\":%d,\"c4_main_bytes\":%llu,\"c4_index_bytes\":%llu,"
		       "\"c128_main_bytes\":%llu,\"window_bytes\":%llu,\"total_bytes\":%llu,"
		       "\"state_bytes\":%llu,\"device_bytes_offloaded\":%llu}\n",
		       m.name, (unsigned long long)tokens, n4, n128, m.n_layers,
		       (unsigned long long)s.c4_main_bytes, (unsigned long long)s.c4_index_bytes,
		       (unsigned long long)s.c128_main_bytes, (unsigned long long)s.window_bytes,
		       (unsigned long long)s.total_bytes, (unsigned long long)s.state_bytes,
		       (unsigned long long)s.device_offloaded);
		return 0;
	}
	printf("model %s, %llu tokens, %d layers (%d CSA, %d HCA, %d window-only), index %s\n\n",
	       m.name, (unsigned long long)tokens, m.n_layers, n4, n128,
	       strata_model_count(&m, 0), m.index_fmt == STRATA_INDEX_FP8 ? "fp8" : "mxfp4");
	printf("  %-28s %12s %10s %16s %12s\n", "component", "entries/layer", "bytes/entry",
	       "bytes", "");
	char what[64];
	snprintf(what, sizeof what, "%d CSA main caches", n4);
	print_bytes_row(what, s.c4_entries, STRATA_MAIN_ENTRY_BYTES, s.c4_main_bytes);
	snprintf(what, sizeof what, "%d CSA %s index caches", n4,
		 m.index_fmt == STRATA_INDEX_FP8 ? "FP8" : "MXFP4");
	print_bytes_row(what, s.c4_entries, (int)strata_index_entry_bytes(m.index_fmt),
			s.c4_index_bytes);
	snprintf(what, sizeof what, "%d HCA main caches", n128);
	print_bytes_row(what, s.c128_entries, STRATA_MAIN_ENTRY_BYTES, s.c128_main_bytes);
	snprintf(what, sizeof what, "%d window rings", m.n_layers);
	print_bytes_row(what, (uint64_t)m.window, STRATA_MAIN_ENTRY_BYTES, s.window_bytes);
	print_bytes_row("attention cache per request", 0, 0, s.total_bytes);
	print_bytes_row("compressor state (extra)", 0, 0, s.state_bytes);
	printf("\n");
	print_bytes_row("device, C4 main on host", 0, 0, s.device_offloaded);
	printf("  device bytes saved by offloading C4 main: %.1f%% (%.2fx more requests "
	       "per device budget)\n",
	       100.0 * s.c4_main_bytes / (double)s.total_bytes,
	       (double)s.total_bytes / (double)s.device_offloaded);
	return 0;
}

static int cmd_info(void)
{
	strata_dev *dev = NULL;
	int err = strata_dev_open(NULL, &dev);
	if (err) {
		fprintf(stderr, "strata: cannot open a device: %s\n", strata_strerror(err));
		return 1;
	}
	printf("strata %s\nbackend: %s\ndevice: %s\nGPUs visible: %d\n", STRATA_VERSION,
	       strata_dev_is_gpu(dev) ? "gpu" : "cpu", strata_dev_name(dev), strata_gpu_count());
	strata_dev_close(dev);
	return 0;
}

typedef int (*bench_fn)(int, char **);

static int cmd_bench(int argc, char **argv)
{
	static const struct { const char *name; bench_fn *fn; const char *what; } benches[] = {
		{ "indexer", NULL, "index scan + top-k vs streaming read, GEMM and sort baselines" },
		{ "fetch", NULL, "selected-entry gather vs contiguous pinned copy" },
		{ "tiers", NULL, "NVMe store (io_uring) vs fio on the same file" },
		{ "decode", NULL, "attention-side decode step: HiSparse vs all-resident" },
		{ "prefix", NULL, "prefix lookup latency, store and restore throughput" },
		{ "attn", NULL, "sparse attention kernel vs a copy of the entry bytes it reads" },
	};
	bench_fn fns[] = { strata_bench_indexer, strata_bench_fetch, strata_bench_tiers,
			   strata_bench_decode, strata_bench_prefix, strata_bench_attn };
	size_t n = sizeof benches / sizeof benches[0];
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("usage: strata bench NAME [--quick] [--check] [--csv F] [--json F] ...\n\n");
		for (size_t i = 0; i < n; i++)
			printf("  %-8s %s%s\n", benches[i].name, benches[i].what,
			       fns[i] ? "" : " (not in this build)");
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(argv[1], benches[i].name))
			continue;
		if (!fns[i]) {
			fprintf(stderr, "strata: benchmark '%s' is not in this build yet\n", argv[1]);
			return 2;
		}
		return fns[i](argc - 1, argv + 1);
	}
	return usage_error("unknown benchmark '%s'", argv[1]);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage_text, stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		printf("strata %s (git %s)\n", STRATA_VERSION, STRATA_GIT_REV);
		return 0;
	}
	if (!strcmp(cmd, "sizes"))
		return cmd_sizes(argc - 1, argv + 1);
	if (!strcmp(cmd, "bench"))
		return cmd_bench(argc - 1, argv + 1);
	if (!strcmp(cmd, "info"))
		return cmd_info();
	if (!strcmp(cmd, "demo")) {
		if (!strata_demo_main) {
			fprintf(stderr, "strata: the demo is not in this build yet\n");
			return 2;
		}
		return strata_demo_main(argc - 1, argv + 1);
	}
	return usage_error("unknown command '%s'", cmd);
}
