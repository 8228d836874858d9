/* Shared benchmark plumbing: options, statistics, human table + CSV/JSON output. */
#define _GNU_SOURCE
#include "bench/bench.h"
#include <errno.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "strata_rev.h" /* STRATA_GIT_REV, generated at build time (cmake/strata_rev.cmake) */
#ifndef STRATA_BUILD_TYPE
#define STRATA_BUILD_TYPE "unknown"
#endif

int bench_parse_common(int *argc, char **argv, bench_opts *o, const char *usage)
{
	memset(o, 0, sizeof *o);
	o->reps = 20;
	o->warmup = 3;
	o->seed = 42;
	int out = 1;
	for (int i = 1; i < *argc; i++) {
		const char *a = argv[i];
		const char *next = i + 1 < *argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--quick")) {
			o->quick = 1;
		} else if (!strcmp(a, "--check")) {
			o->check = 1;
		} else if (!strcmp(a, "--csv") && next) {
			o->csv_path = next;
			i++;
		} else if (!strcmp(a, "--json") && next) {
			o->json_path = next;
			i++;
		} else if (!strcmp(a, "--reps") && next) {
			o->reps = atoi(next);
			i++;
			if (o->reps < 1) {
				fprintf(stderr, "--reps needs a positive count\n");
				return -1;
			}
		} else if (!strcmp(a, "--seed") && next) {
			o->seed = strtoull(next, NULL, 0);
			i++;
		} else if (!strcmp(a, "--backend") && next) {
			if (!strcmp(next, "cpu"))
				o->backend = STRATA_BACKEND_CPU;
			else if (!strcmp(next, "gpu"))
				o->backend = STRATA_BACKEND_GPU;
			else if (!strcmp(next, "auto"))
				o->backend = STRATA_BACKEND_AUTO;
			else {
				fprintf(stderr, "--backend: cpu, gpu or auto\n");
				return -1;
			}
			i++;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			printf("%s\ncommon options:\n"
			       "  --quick          small sweep (seconds on a CPU)\n"
			       "  --check          verify results against the CPU reference\n"
			       "  --reps N         timed repetitions per point (default 20)\n"
			       "  --seed N         input generator seed (default 42)\n"
			       "  --backend B      cpu, gpu or auto (default auto)\n"
			       "  --csv FILE       write CSV rows\n"
			       "  --json FILE      write JSON lines\n", usage);
			exit(0); /* a main's helper: only bench programs call this */
		} else {
			argv[out++] = argv[i];
		}
	}
	if (o->quick && o->reps == 20)
		o->reps = 5;
	*argc = out;
	argv[out] = NULL;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

bench_stats bench_stats_of(double *v, int n)
{
	bench_stats s = { 0 };
	if (n <= 0)
		return s;
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	s.n = n;
	s.min = v[0];
	s.max = v[n - 1];
	s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
	int k = (int)(0.99 * (n - 1) + 0.5);
	s.p99 = v[k];
	return s;
}

struct bench_out {
	FILE *csv, *json;
	int header_done;
	char name[64];
	char meta[768];
};

bench_out *bench_out_open(const bench_opts *o, const char *name, strata_dev *dev)
{
	bench_out *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	snprintf(b->name, sizeof b->name, "%s", name);
	struct utsname u;
	char host[160] = "unknown";
	if (!uname(&u))
		snprintf(host, sizeof host, "%s %s", u.nodename, u.machine);
	char when[32];
	time_t t = time(NULL);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	snprintf(b->meta, sizeof b->meta,
		 "\"bench\":\"%s\",\"host\":\"%s\",\"device\":\"%s\",\"build\":\"%s\","
		 "\"git\":\"%s\",\"time\":\"%s\"",
		 name, host, strata_dev_name(dev), STRATA_BUILD_TYPE, STRATA_GIT_REV, when);
	printf("# strata bench %s  device=%s  host=%s  build=%s  git=%s  %s\n", name,
	       strata_dev_name(dev), host, STRATA_BUILD_TYPE, STRATA_GIT_REV, when);
	if (o->csv_path && !(b->csv = fopen(o->csv_path, "w")))
		fprintf(stderr, "cannot write %s\n", o->csv_path);
	if (o->json_path && !(b->json = fopen(o->json_path, "w")))
		fprintf(stderr, "cannot write %s\n", o->json_path);
	return b;
}

void bench_out_row(bench_out *b, ...)
{
	va_list ap;
	const char *keys[64], *vals[64];
	int n = 0;
	va_start(ap, b);
	for (const char *k; n < 64 && (k = va_arg(ap, const char *));) {
		keys[n] = k;
		vals[n] = va_arg(ap, const char *);
		n++;
	}
	va_end(ap);
	if (!b->header_done) {
		for (int i = 0; i < n; i++)
			printf("%s%s", i ? "  " : "", keys[i]);
		printf("\n");
		if (b->csv) {
			fprintf(b->csv, "bench");
			for (int i = 0; i < n; i++)
				fprintf(b->csv, ",%s", keys[i]);
			fprintf(b->csv, "\n");
		}
		b->header_done = 1;
	}
	for (int i = 0; i < n; i++)
		printf("%s%*s", i ? "  " : "", (int)strlen(keys[i]), vals[i]);
	printf("\n");
	fflush(stdout);
	if (b->csv) {
		fprintf(b->csv, "%s", b->name);
		for (int i = 0; i < n; i++)
			fprintf(b->csv, ",%s", vals[i]);
		fprintf(b->csv, "\n");
	}
	if (b->json) {
		fprintf(b->json, "{%s", b->meta);
		for (int i = 0; i < n; i++) {
			char *end;
			strtod(vals[i], &end);
			int num = *vals[i] && !*end;
			fprintf(b->json, num ? ",\"%s\":%s" : ",\"%s\":\"%s\"", keys[i], vals[i]);
		}
		fprintf(b->json, "}\n");
	}
}

void bench_out_note(bench_out *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("# ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	b->header_done = 0; /* a note starts a new table section */
}

void bench_out_close(bench_out *b)
{
	if (!b)
		return;
	if (b->csv)
		fclose(b->csv);
	if (b->json)
		fclose(b->json);
	free(b);
}

const char *bench_fmt(const char *fmt, double v)
{
	static __thread char ring[32][48];
	static __thread int next;
	char *s = ring[next++ & 31];
	snprintf(s, 48, fmt, v);
	return s;
}

int bench_timer_open(strata_dev *dev, bench_timer *t)
{
	memset(t, 0, sizeof *t);
	t->dev = dev;
	int err = strata_stream_create(dev, &t->s);
	if (!err)
		err = strata_event_create(dev, &t->a);
	if (!err)
		err = strata_event_create(dev, &t->b);
	if (err)
		bench_timer_close(t);
	return err;
}

void bench_timer_close(bench_timer *t)
{
	if (!t || !t->dev)
		return;
	strata_event_destroy(t->dev, t->a);
	strata_event_destroy(t->dev, t->b);
	strata_stream_destroy(t->dev, t->s);
	t->a = t->b = NULL;
	t->s = NULL;
}

double bench_timer_us(bench_timer *t, int (*fn)(void *ctx), void *ctx, int warm, int reps,
		      bench_stats *st)
{
	double *v = malloc((size_t)(reps > 0 ? reps : 1) * sizeof *v);
	if (!v || reps < 1)
		goto fail;
	for (int i = 0; i < warm; i++)
		if (fn(ctx))
			goto fail;
	if (strata_stream_sync(t->dev, t->s))
		goto fail;
	for (int i = 0; i < reps; i++) {
		float ms = 0;
		if (strata_event_record(t->dev, t->a, t->s) || fn(ctx) ||
		    strata_event_record(t->dev, t->b, t->s) || strata_event_sync(t->dev, t->b) ||
		    strata_event_elapsed_ms(t->dev, t->a, t->b, &ms))
			goto fail;
		v[i] = ms * 1000.0;
	}
	*st = bench_stats_of(v, reps);
	free(v);
	return st->median;
fail:
	free(v);
	return -1;
}

typedef struct graph_run {
	bench_timer *t;
	strata_graph *g;
} graph_run;

static int launch_graph(void *c)
{
	graph_run *gr = c;
	return strata_graph_launch(gr->t->dev, gr->g, gr->t->s);
}

double bench_timer_graph_us(bench_timer *t, int (*fn)(void *ctx), void *ctx, int n, int warm,
			    int reps, bench_stats *st)
{
	if (n < 1 || reps < 1)
		return -1;
	for (int i = 0; i < (warm > 1 ? warm : 1); i++) /* launch attributes, caches */
		if (fn(ctx))
			return -1;
	if (strata_stream_sync(t->dev, t->s))
		return -1;
	int err = strata_graph_begin(t->dev, t->s);
	if (err)
		return err == -ENOTSUP ? -2 : -1;
	for (int i = 0; i < n && !err; i++)
		err = fn(ctx);
	graph_run gr = { t, NULL };
	int e2 = strata_graph_end(t->dev, t->s, &gr.g);
	double r = -1;
	if (!err && !e2 && (r = bench_timer_us(t, launch_graph, &gr, warm, reps, st)) >= 0) {
		/* per call of fn */
		st->min /= n;
		st->median /= n;
		st->max /= n;
		st->p99 /= n;
		r = st->median;
	}
	strata_graph_destroy(t->dev, gr.g);
	return r;
}
