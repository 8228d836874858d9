/*
 * bench: the benchmark programs behind `strata bench NAME`, and the little they share:
 * option parsing (--quick, --check, --csv FILE, --json FILE, --reps N, --backend),
 * min/median/max statistics, and output that prints each figure beside the limit
 * measured in the same run, as a human table on stdout and CSV or JSON lines with the
 * machine, GPU, build type and git revision (BENCH.md).
 */
#ifndef STRATA_BENCH_H
#define STRATA_BENCH_H

#include <stdio.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Each returns a process exit status (0 ok, 1 a --check failed, 2 bad arguments). */
int strata_bench_indexer(int argc, char **argv);
int strata_bench_fetch(int argc, char **argv);
int strata_bench_tiers(int argc, char **argv);
int strata_bench_decode(int argc, char **argv);
int strata_bench_prefix(int argc, char **argv);
int strata_bench_attn(int argc, char **argv);

typedef struct bench_opts {
	int quick;             /* small sweep, seconds on a CPU */
	int check;             /* verify every result against the CPU reference */
	int reps;              /* timed repetitions per point (after warm-up) */
	int warmup;
	const char *csv_path;  /* NULL: none */
	const char *json_path; /* NULL: none */
	strata_backend backend;
	unsigned long long seed;
} bench_opts;

/* Parses the common options, removing them from argv; leaves the rest (and returns
 * the new argc) for the benchmark's own. Returns -1 after printing an error. */
int bench_parse_common(int *argc, char **argv, bench_opts *o, const char *usage);

/* Order statistics of n samples (sorted in place). */
typedef struct bench_stats {
	double min, median, max, p99;
	int n;
} bench_stats;
bench_stats bench_stats_of(double *samples, int n);

/* Event timing on one stream of dev. */
typedef struct bench_timer {
	strata_dev *dev;
	strata_stream *s;
	strata_event *a, *b;
} bench_timer;
int bench_timer_open(strata_dev *dev, bench_timer *t); /* a stream and two events */
void bench_timer_close(bench_timer *t);
/* Median microseconds of reps runs of fn(ctx), each between two events on t->s, after
 * warm untimed runs; the order statistics to *st. -1 when fn or the device fails. */
double bench_timer_us(bench_timer *t, int (*fn)(void *ctx), void *ctx, int warm, int reps,
		      bench_stats *st);
/* The in-step cost of a captured path: microseconds per call of fn(ctx), from a CUDA
 * graph of n back-to-back calls captured on t->s (fn must issue its work there) and
 * replayed between two events, so per-launch host and event costs are amortised but
 * every kernel still runs in order. Median over reps replays (after warm untimed
 * calls and replays). -2 on the CPU backend (no graphs), -1 on failure. */
double bench_timer_graph_us(bench_timer *t, int (*fn)(void *ctx), void *ctx, int n, int warm,
			    int reps, bench_stats *st);

/* Output: one sink per run. bench_out_row() prints a table row to stdout and a CSV
 * row / JSON line to the files; fields are "name=value" pairs in a fixed order,
 * passed as alternating key, value strings, ending with NULL. */
typedef struct bench_out bench_out;
bench_out *bench_out_open(const bench_opts *o, const char *bench_name, strata_dev *dev);
void bench_out_row(bench_out *b, ...) __attribute__((sentinel));
void bench_out_note(bench_out *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void bench_out_close(bench_out *b);

/* Convenience: format a double into a per-call ring of buffers (for row fields). */
const char *bench_fmt(const char *fmt, double v);

#ifdef __cplusplus
}
#endif
#endif
