/*
 * Private to kernels/indexer.cu: the host side of STRATA_IDX_TRACE's diagnostic timeline
 * (trace_begin, trace_ctas, trace_end; the device side is idx_trace and idx_trace_cta in
 * indexer_int.h). Included by indexer.cu after the kernels, outside the anonymous
 * namespace, before run_indexer, which calls it; not a header of its own.
 */
#ifndef STRATA_KERNELS_INDEXER_TRACE_INT_H
#define STRATA_KERNELS_INDEXER_TRACE_INT_H

/* STRATA_IDX_TRACE=1 (a diagnostic): each uncaptured call's timeline (idx_trace) to
 * stderr, in us from the scan's first CTA; the call synchronises its stream. */
static unsigned long long *trace_begin(cudaStream_t st)
{
	static unsigned long long *buf = nullptr;
	static int on = -1;
	if (on < 0)
		on = getenv("STRATA_IDX_TRACE") &&
		     cudaMalloc(&buf, 8 * (2 * IDX_TRACE_N + 4 * (size_t)IDX_TRACE_CTAS)) == cudaSuccess;
	cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
	if (!on || cudaStreamIsCapturing(st, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone)
		return nullptr;
	static unsigned long long init[2 * IDX_TRACE_N]; /* min slots ~0, max slots 0 */
	for (int i = 0; i < IDX_TRACE_N; i++)
		init[2 * i] = ~0ull;
	cudaMemcpyAsync(buf, init, sizeof init, cudaMemcpyHostToDevice, st);
	cudaMemsetAsync(buf + 2 * IDX_TRACE_N, 0, 8 * 4 * (size_t)IDX_TRACE_CTAS, st);
	return buf;
}

/* The scan CTAs' records (idx_trace_cta), summarised: when their tile loops ended (us
 * from the first CTA's start, percentiles), by SM (the spread between an SM's first and
 * last CTA to end, and the SMs' last ends), and the latest and earliest SMs' CTAs in
 * start order, to tell an SM that is slow from CTAs that an SM serves unevenly. */
static void trace_ctas(const unsigned long long *r, unsigned long long t0)
{
	struct C {
		double s, e;
		int sm, y, tiles, id;
	};
	static C c[IDX_TRACE_CTAS];
	int n = 0, nsm = 0;
	for (int i = 0; i < IDX_TRACE_CTAS; i++) {
		const unsigned long long *q = r + 4 * i;
		if (!q[0] || !q[1])
			continue;
		c[n].s = (double)(long long)(q[0] - t0) / 1e3;
		c[n].e = (double)(long long)(q[1] - t0) / 1e3;
		c[n].sm = (int)q[2];
		c[n].tiles = (int)(q[3] & 0xffffffffu);
		c[n].y = (int)(q[3] >> 32);
		c[n].id = i;
		nsm = c[n].sm + 1 > nsm ? c[n].sm + 1 : nsm;
		n++;
	}
	if (n < 2 || nsm > 1024)
		return;
	std::sort(c, c + n, [](const C &a, const C &b) { return a.e < b.e; });
	auto at = [](int m, double p) { return (int)(p * (m - 1) + 0.5); }; /* a percentile's index */
	fprintf(stderr, "idx-cta: %d CTAs, loop end us p0 %.2f p10 %.2f p50 %.2f p90 %.2f p100 %.2f\n",
		n, c[0].e, c[at(n, 0.1)].e, c[at(n, 0.5)].e, c[at(n, 0.9)].e, c[n - 1].e);
	static double first[1024], last[1024], spread[1024], lasts[1024];
	static int cnt[1024], til[1024];
	for (int m = 0; m < nsm; m++)
		first[m] = 1e30, last[m] = -1e30, cnt[m] = 0, til[m] = 0;
	for (int i = 0; i < n; i++) {
		const int m = c[i].sm;
		first[m] = c[i].e < first[m] ? c[i].e : first[m];
		last[m] = c[i].e > last[m] ? c[i].e : last[m];
		cnt[m]++;
		til[m] += c[i].tiles;
	}
	int k = 0, cmin = 1 << 30, cmax = 0, tmin = 1 << 30, tmax = 0;
	for (int m = 0; m < nsm; m++)
		if (cnt[m]) {
			spread[k] = last[m] - first[m];
			lasts[k++] = last[m];
			cmin = cnt[m] < cmin ? cnt[m] : cmin;
			cmax = cnt[m] > cmax ? cnt[m] : cmax;
			tmin = til[m] < tmin ? til[m] : tmin;
			tmax = til[m] > tmax ? til[m] : tmax;
		}
	std::sort(spread, spread + k);
	std::sort(lasts, lasts + k);
	fprintf(stderr,
		"idx-cta: %d SMs, %d - %d CTAs and %d - %d tiles each; an SM's last end p0 %.2f p50 "
		"%.2f p100 %.2f; its first-to-last spread p0 %.2f p50 %.2f p100 %.2f\n",
		k, cmin, cmax, tmin, tmax, lasts[0], lasts[at(k, 0.5)], lasts[k - 1], spread[0],
		spread[at(k, 0.5)], spread[k - 1]);
	/* the loop ends by the CTAs' tile counts (c is in end order), then each SM's last
	 * end by its tile total: is the spread the tiles' or the SMs' service of them? */
	if (tmax > 0)
		fprintf(stderr, "idx-cta: ends by a CTA's tiles:");
	for (int t = 1; t <= 64 && tmax > 0; t++) {
		int m = 0, mid = -1, lastm = -1, ct = 0;
		for (int i = 0; i < n; i++)
			ct += c[i].tiles == t;
		if (!ct)
			continue;
		for (int i = 0; i < n; i++)
			if (c[i].tiles == t) {
				if (m == at(ct, 0.5))
					mid = i;
				lastm = i;
				m++;
			}
		fprintf(stderr, " %d: %d CTAs p50 %.2f p100 %.2f;", t, ct, c[mid].e, c[lastm].e);
	}
	if (tmax > 0)
		fprintf(stderr, "\nidx-cta: an SM's last end by its tiles:");
	for (int t = tmin; tmax > 0 && t <= tmax && t - tmin < 64; t++) {
		int m = 0;
		double sum = 0, mx = 0;
		for (int q = 0; q < nsm; q++)
			if (cnt[q] && til[q] == t) {
				sum += last[q];
				mx = last[q] > mx ? last[q] : mx;
				m++;
			}
		if (m)
			fprintf(stderr, " %d: %d SMs mean %.2f max %.2f;", t, m, sum / m, mx);
	}
	if (tmax > 0)
		fprintf(stderr, "\n");
	/* the start-to-end correlation, and where the grid's first blocks ran */
	double ms = 0, me = 0, sse = 0, sss = 0, see = 0;
	for (int i = 0; i < n; i++)
		ms += c[i].s / n, me += c[i].e / n;
	for (int i = 0; i < n; i++) {
		sse += (c[i].s - ms) * (c[i].e - me);
		sss += (c[i].s - ms) * (c[i].s - ms);
		see += (c[i].e - me) * (c[i].e - me);
	}
	static int smof[IDX_TRACE_CTAS];
	int nb = 0;
	for (int i = 0; i < IDX_TRACE_CTAS; i++)
		smof[i] = -1;
	for (int i = 0; i < n; i++)
		smof[c[i].id] = c[i].sm;
	fprintf(stderr, "idx-cta: start-end correlation %.2f; the first 24 records' SMs:",
		sss > 0 && see > 0 ? sse / sqrt(sss * see) : 0.0);
	for (int i = 0; i < IDX_TRACE_CTAS && nb < 24; i++)
		if (smof[i] >= 0)
			fprintf(stderr, " %d:%d", i, smof[i]), nb++;
	fprintf(stderr, "\n");
	/* the SMs of the latest and the earliest CTA: their CTAs' ends in start order */
	const int pick[2] = { c[n - 1].sm, c[0].sm };
	for (int j = 0; j < 2; j++) {
		C v[64];
		int m = 0;
		for (int i = 0; i < n && m < 64; i++)
			if (c[i].sm == pick[j])
				v[m++] = c[i];
		std::sort(v, v + m, [](const C &a, const C &b) { return a.s < b.s; });
		fprintf(stderr, "idx-cta: sm %d (%s), by start: ", pick[j], j ? "earliest" : "latest");
		for (int i = 0; i < m; i++) { /* the default scan records no tile count */
			fprintf(stderr, "%s%.2f->%.2f (req %d", i ? ", " : "", v[i].s, v[i].e, v[i].y);
			if (v[i].tiles)
				fprintf(stderr, ", %d tiles", v[i].tiles);
			fprintf(stderr, ")");
		}
		fprintf(stderr, "\n");
	}
}

static void trace_end(cudaStream_t st, const unsigned long long *buf)
{
	static unsigned long long t[2 * IDX_TRACE_N + 4 * (size_t)IDX_TRACE_CTAS];
	if (cudaMemcpyAsync(t, buf, sizeof t, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
	    cudaStreamSynchronize(st) != cudaSuccess)
		return;
	static const char *name[IDX_TRACE_N] = { "scan0", "filt0", "scan1", "filt1", "cut2",
						 "class", "sort0", "sort1", "end", "sel0",
						 "selld", "s_cnt", "s_scan", "s_scat", "scan2",
						 "fcut", "floop", "fh2", "selin", "agg0", "agg1",
						 "#list", "sampw", "agg2", "fp1", "fat" };
	auto us = [&](unsigned long long v) {
		return v && v != ~0ull ? (double)(long long)(v - t[0]) / 1e3 : -1.0;
	};
	fprintf(stderr, "idx-trace us (first/last CTA):");
	for (int i = 0; i < IDX_TRACE_N; i++)
		if (t[2 * i + 1] && name[i][0] == '#') /* a count */
			fprintf(stderr, " %s %llu/%llu", name[i], t[2 * i], t[2 * i + 1]);
		else if (t[2 * i + 1])
			fprintf(stderr, " %s %.2f/%.2f", name[i], us(t[2 * i]), us(t[2 * i + 1]));
	fprintf(stderr, "\n");
	trace_ctas(t + 2 * IDX_TRACE_N, t[0]);
}

#endif /* STRATA_KERNELS_INDEXER_TRACE_INT_H */
