/*
 * Private to kernels/indexer_wgmma.cu: the one-row scans' fused tails, the filter's work
 * done in the scan's own CTAs (a cooperative launch): the row barrier (scan_tail) and the
 * sampled bound (samp_put, samp_agg, samp_tail). Included by indexer_wgmma.cu inside its
 * anonymous namespace, after idx_wg_args's helpers, ScanCta, TailSmem, hist_copies and
 * flush_hist, which it uses; not a header of its own.
 */
#ifndef STRATA_KERNELS_INDEXER_TAIL_INT_H
#define STRATA_KERNELS_INDEXER_TAIL_INT_H

/* ---- the fused tail: the filter's work in the scan's CTAs -------------------------------
 * With idx_wg_args.fused (the launch is cooperative, so every CTA of the grid is resident
 * at once, and each CTA holds at most kHold * 128 scores), each CTA of a row, once its
 * histogram is flushed, arrives at the row's barrier (count slot 2). The last to arrive
 * finds the threshold bucket b* in the row's histogram, leaves it and the count above it
 * in count slots 3 - 4 for the select, and hands b* to every other CTA of the row in that
 * CTA's own flag word (the flag region; the CTA zeroes it on reading). Each CTA then
 * files its own scores (read back before the barrier) as the filter kernel would: bucket
 * > b* to the row's selected list, bucket b* to its candidate list and the second-level
 * histogram, with one list atomic per warp. The select kernel (indexer.cu), launched as
 * the scan's programmatic dependent, then selects each row and clears its counters. No
 * filter launch, no re-read of the scores.
 * H200, 1M keys, one row, alternated against the filter path (bench/results/
 * 2026-11-30-h200-s11): FP8 24.2 - 24.3 us against 24.5 - 24.6, MXFP4 26.1 - 26.2
 * against 26.6. One flag word polled by every CTA was 2x slower: the polls and the
 * arrivals queued on one line. Finishing the select inside this kernel instead, on the
 * last arrival's 128 threads, was correct and slower every way it was tried (per-CTA
 * records, s12; place words for contiguous id ranges, s19: 23 - 32 us): one warp a
 * scheduler runs the select's chain at a few hundred instructions a microsecond. */
constexpr int kHold = 4; /* scores per thread in the fused tail: 512 a CTA, 8 tiles */

__device__ __forceinline__ uint32_t ld_relaxed(const uint32_t *p)
{
	uint32_t v;
	asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
	return v;
}

/* Exclusive prefix sum of v over the CTA's 128 threads in thread order; ends with a
 * barrier, so wsum is free again only after the caller's next one. */
__device__ __forceinline__ uint32_t excl_scan128(uint32_t v, uint32_t (&wsum)[4])
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	uint32_t incl = v;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		const uint32_t t = __shfl_up_sync(0xffffffffu, incl, o);
		if (lane >= o)
			incl += t;
	}
	if (lane == 31)
		wsum[warp] = incl;
	__syncthreads();
	uint32_t off = 0;
#pragma unroll
	for (int w = 0; w < 3; w++)
		off += w < warp ? wsum[w] : 0u;
	return off + incl - v;
}

/* The row's threshold bucket b* (the bucket of its k-th largest score) from the sum of
 * its first `copies` histogram copies (hrow: the row's in copy 0; hcopy: words between
 * copies), into ts.bin (-1: none) and count slots 3 - 4 (b* + 1 and the count above it,
 * for the select). The row's last CTA, every thread. Out of line: inlined, its 16 loads
 * a thread in flight at once made the MXFP4 batch loop (at its 80-register cap) spill. */
static __device__ __noinline__ void find_bstar(uint32_t *hrow, size_t hcopy, int copies,
					       uint32_t k, TailSmem &ts, uint32_t *cnt)
{
	const int tid = threadIdx.x;
	const int grp = kWgThreads - 1 - tid; /* thread t: bins 16 (127 - t) .. + 15 */
	uint32_t h[IDX_BINS / kWgThreads], sum = 0;
	uint4 *h4 = reinterpret_cast<uint4 *>(hrow + grp * (IDX_BINS / kWgThreads));
	uint4 v[IDX_HCOPIES][IDX_BINS / kWgThreads / 4]; /* every copy's, one trip */
#pragma unroll
	for (int cp = 0; cp < IDX_HCOPIES; cp++)
#pragma unroll
		for (int b = 0; b < IDX_BINS / kWgThreads / 4; b++)
			v[cp][b] = cp < copies ? __ldcg(h4 + cp * (hcopy / 4) + b) : make_uint4(0, 0, 0, 0);
#pragma unroll
	for (int b = 0; b < IDX_BINS / kWgThreads / 4; b++) {
		uint4 t = v[0][b];
#pragma unroll
		for (int cp = 1; cp < IDX_HCOPIES; cp++)
			t.x += v[cp][b].x, t.y += v[cp][b].y, t.z += v[cp][b].z, t.w += v[cp][b].w;
		h[4 * b] = t.x, h[4 * b + 1] = t.y, h[4 * b + 2] = t.z, h[4 * b + 3] = t.w;
	}
#pragma unroll
	for (int b = 0; b < IDX_BINS / kWgThreads; b++)
		sum += h[b];
	uint32_t acc = excl_scan128(sum, ts.wsum);
#pragma unroll
	for (int b = IDX_BINS / kWgThreads - 1; b >= 0; b--) {
		if (acc < k && acc + h[b] >= k) {
			ts.bin = grp * (IDX_BINS / kWgThreads) + b;
			cnt[3] = (uint32_t)ts.bin + 1u; /* for the select: no second look */
			cnt[4] = acc;
		}
		acc += h[b];
	}
}

__device__ void scan_tail(const idx_wg_args &a, const ScanCta &cta, TailSmem &ts)
{
	const int tid = threadIdx.x, lane = tid & 31, row = cta.row, L = cta.L;
	const uint32_t k = (uint32_t)a.topk;
	uint32_t *cnt = a.count + (size_t)row * IDX_CNT;
	const float *sc = a.scores + (size_t)row * a.sstride;
	const int mine = cta.n * kTile; /* this CTA's score slots (its last tile's may pass L) */
	auto key_of = [&](int e) { return (cta.x + (e >> 6) * cta.G) * kTile + (e & (kTile - 1)); };
	/* its own scores (written before the flush's barrier), in flight across the grid's */
	float s[kHold];
#pragma unroll
	for (int u = 0; u < kHold; u++) {
		const int e = tid + u * kWgThreads, j = key_of(e);
		s[u] = e < mine && j < L ? sc[j] : 0.0f;
	}
	if (tid == 0)
		ts.bin = -1;
	__syncthreads(); /* every thread's histogram adds issued */
	/* The row's barrier: the last CTA to arrive finds b* and hands it to every other
	 * CTA of the row in that CTA's own flag word (one poller per word: no line is
	 * polled by the whole grid while the arrivals land on it). */
	const int tiles = (L + kTile - 1) / kTile;
	const uint32_t want = (uint32_t)(tiles < cta.G ? tiles : cta.G); /* CTAs with tiles */
	uint32_t *flag = a.flag + (size_t)row * IDX_FLAGS;
	if (tid == 0)
		ts.last = idx_arrive(cnt + 2) == want - 1;
	__syncthreads();
	if (ts.last) { /* block-uniform */
		find_bstar(a.hist + (size_t)row * IDX_BINS, a.hcopy, hist_copies(a), k, ts, cnt);
		__syncthreads();
		/* b* + 1 (none found, which cannot happen with L > k scores counted: 0x800, so
		 * that the pollers still go) */
		const uint32_t word = ts.bin < 0 ? 0x800u : (uint32_t)ts.bin + 1u;
		for (int x = tid; x < (int)want; x += kWgThreads)
			if (x != cta.x)
				*reinterpret_cast<volatile uint32_t *>(flag + x) = word;
		/* the copies past the first zero at rest again (copy 0: the select's
		 * clear_row), once the others have their b* */
		uint4 *h4 = reinterpret_cast<uint4 *>(a.hist + a.hcopy + (size_t)row * IDX_BINS) + tid;
#pragma unroll 1
		for (int cp = 1; cp < hist_copies(a); cp++, h4 += a.hcopy / 4)
#pragma unroll
			for (int i = 0; i < IDX_BINS / 4 / kWgThreads; i++)
				h4[i * kWgThreads] = make_uint4(0, 0, 0, 0);
	} else {
		if (tid == 0) {
			uint32_t word;
			while (!(word = ld_relaxed(flag + cta.x)))
				;
			flag[cta.x] = 0; /* zero at rest; nothing else reads or writes it */
			ts.bin = word == 0x800u ? -1 : (int)word - 1;
		}
		__syncthreads();
	}
	const int bs = ts.bin;
	if (tid == 0)
		idx_trace(a.trace, IDX_T_FCUT);
	if (bs < 0)
		return; /* cannot happen (L > k scores counted); the select finds none either */
	if (ts.last && tid == 0 && a.cut_out) /* top-k is far from done: early staging may start */
		*reinterpret_cast<volatile unsigned long long *>(a.cut_out + row) =
			a.cut_epoch << 12 | (unsigned long long)bs;
	const uint32_t bstar = (uint32_t)bs;
	uint32_t base;
	int shift;
	idx_sub_bounds(bstar, &base, &shift);
	unsigned long long *sel = a.sel + (size_t)row * k, *cand = a.cand + (size_t)row * a.cap;
	uint32_t *h2 = a.hist2 + (size_t)row * IDX_BINS2;
	/* every lane's kHold scores classified first, then one list atomic per warp and
	 * list (not one per round: those would queue behind each other's return) */
	unsigned ms[kHold], mc[kHold];
	uint32_t ns = 0, nc = 0;
#pragma unroll
	for (int u = 0; u < kHold; u++) {
		const int e = tid + u * kWgThreads, j = key_of(e);
		const bool in = e < mine && j < L;
		const uint32_t b = in ? idx_bucket_dev(s[u]) : 0u;
		ms[u] = __ballot_sync(0xffffffffu, in && b > bstar);
		mc[u] = __ballot_sync(0xffffffffu, in && b == bstar);
		ns += (uint32_t)__popc(ms[u]);
		nc += (uint32_t)__popc(mc[u]);
	}
	uint32_t as = 0, ac = 0; /* the warp's first places in the two lists */
	if (lane == 0 && ns)
		as = atomicAdd(cnt + 0, ns);
	if (lane == 0 && nc)
		ac = atomicAdd(cnt + 1, nc);
	as = __shfl_sync(0xffffffffu, as, 0);
	ac = __shfl_sync(0xffffffffu, ac, 0);
	const unsigned lt = (1u << lane) - 1u;
#pragma unroll
	for (int u = 0; u < kHold; u++) {
		const int j = key_of(tid + u * kWgThreads);
		if (ms[u] >> lane & 1) {
			const uint32_t at = as + (uint32_t)__popc(ms[u] & lt);
			if (at < k) /* fewer than k lie above b* */
				sel[at] = idx_key64(s[u], j);
		}
		if (mc[u] >> lane & 1) {
			const uint32_t at = ac + (uint32_t)__popc(mc[u] & lt);
			const unsigned long long key = idx_key64(s[u], j);
			if (at < a.cap)
				cand[at] = key;
			/* one add per sub-bin and warp (equal scores share one) */
			const uint32_t sb = idx_sub_of((uint32_t)(key >> 32), base, shift);
			const unsigned same = __match_any_sync(mc[u], sb);
			if (lane == __ffs(same) - 1)
				atomicAdd(h2 + sb, (uint32_t)__popc(same));
		}
		as += (uint32_t)__popc(ms[u]);
		ac += (uint32_t)__popc(mc[u]);
	}
	if (tid == 0)
		idx_trace(a.trace, IDX_T_FLOOP);
}

/* ---- the sampled tail: a bound from a sample, no barrier among the scan's CTAs ----------
 * With idx_wg_args.fused == 2 (one row a CTA, one wave, a cooperative launch as above)
 * the CTAs of a row take contiguous tile ranges (ScanCta::begin, ranges 1), and one more
 * CTA a row, the grid's first column, samples instead of scanning (samp_agg); scan CTA x
 * is block x + 1. Each scan CTA, once its first tile is scored, counts IDX_SAMP_KEYS of
 * its scores (keys 0, 16, 32 and 48 of that tile: spread over the row, as the ranges
 * are) into the row's sample histogram in global memory (samp_put: an atomic add a key,
 * not waited for); the sampling CTA polls the histogram until every scan CTA's keys are
 * in, takes the bucket of the sample's r-th largest score (r about samp_x k m / L for m
 * sampled keys) and publishes its lower edge T. After its last tile each scan CTA files
 * every score of its own at or above T into the row's candidate list (one list atomic a
 * warp) and exits: no full histogram, no row barrier, no hand-back of b*. The select
 * (indexer.cu select_list) then takes the top k of the list. That is exact whenever the
 * list holds at least k keys and all of them fit (count <= cap): k scores at or above T
 * put the k-th largest there too, so every key of the row's top k is listed. Otherwise
 * (a sample that missed, a crowd of equal scores) the select takes the top k of every
 * score of the row instead (select_all: exact, ~115 us at 1M keys against ~20). With samp_x = 3 (run_indexer) the list
 * holds ~3k keys and more (T is the lower edge of the r-th's bucket); fewer than k is a
 * tail event: the keys above the r-th largest of a uniform sample of m number fewer than
 * k with probability about P(Poisson(k m / L) >= r), at most ~1e-3 a row here (a CTA
 * holds at most 512 scores, so m >= L / 128 and r >= 12 at k = 512): on an H200 at 1M
 * keys, 527 scan CTAs (m = 2,108, r = 13) ~4e-4; at 128K batch 8, 64 a row (m = 256,
 * r = 12) ~1e-3; at 128K batch 1 (m = 1,052, r = 50) ~2e-11. Such a row costs the
 * whole-row select (~95 us more at 1M), not a wrong result.
 * Measured (H200, 1M keys, one row; bench/results/2026-12-02-h200-s35, run 1): the
 * sampled keys are all added by ~4.7 - 5.4 us, T is out by ~11.4 us (FP8) / ~8.6
 * (MXFP4), before the scan's last tiles end (~13), and the call takes 20.7 - 20.9 us
 * (FP8) / 20.3 - 20.4 (MXFP4) against the row barrier's 21.8 - 22.0 / 21.9 - 22.0.
 * s33's form, the sample's own words read, bucketed and ranked by the sampling CTA,
 * took 10 - 20 us of that single CTA's time; s34's, every thread of it polling the
 * whole histogram, made one FP8 scan CTA's first tile ~6 us late. */
constexpr int kSampWords = 4096; /* sample words a row at most (its CTAs: / IDX_SAMP_KEYS) */

/* The row's sample histogram (s34's form): IDX_BINS counts by score bucket
 * (idx_bucket_dev), then one count of sampled keys past the row's limit and the count
 * of all sampled keys, in the row's sample words; one shared-memory-free atomic add a sampled key, by its warp's lane 0,
 * issued and not waited for. Zero at rest: the sampling CTA zeroes it once complete. */
__device__ __forceinline__ void samp_put(const idx_wg_args &a, int row, int warp, int lane, bool in,
					 float sc)
{
	static_assert(IDX_SAMP_KEYS == kWgThreads / 32, "a key a warp");
	static_assert(IDX_BINS + 2 <= kSampWords, "the histogram fits the sample words");
	if (lane == 0) { /* key 16 warp of the tile (score_tile: lane (g, c) = (0, 0)) */
		uint32_t *h = a.samp + (size_t)row * IDX_SAMPW + 32;
		atomicAdd(h + (in ? idx_bucket_dev(sc) : (uint32_t)IDX_BINS), 1u);
		atomicAdd(h + IDX_BINS + 1, 1u); /* the row's count, which the sampling CTA polls */
		if (warp == 0)
			idx_trace(a.trace, IDX_T_SAMPW);
	}
}

/* The staged filing's sample (samp_agg_of<true>): tile i's sampled key (lane 0's, as
 * samp_put's) as its bucket + 1 in scan CTA blockIdx.x - 1's slot of warp and tile (no
 * two writers a slot, no atomic: run 1 of bench/results/2026-12-03-h200-s42 had one
 * global atomic a key into the histogram); cnt (samp_cnt: the warp's sampled keys at its
 * last sampled tile, else 0) added to the row's count. */
__device__ __forceinline__ void samp_put_store(const idx_wg_args &a, int row, int warp, int lane,
					       bool in, float sc, int i, uint32_t cnt)
{
	if (lane == 0) {
		const uint32_t b = in ? idx_bucket_dev(sc) : (uint32_t)IDX_BINS;
		uint32_t *w = a.samp + (size_t)row * IDX_SAMPW;
		reinterpret_cast<uint16_t *>(w + IDX_SAMP_STORE)[(blockIdx.x - 1) * 64 + warp * 16 + i] =
			(uint16_t)(b + 1u);
		if (cnt)
			atomicAdd(w + 32 + IDX_BINS + 1, cnt);
		if (warp == 0 && (i == 0 || cnt)) /* traced calls: the first and last sampled tile
						  * (a trace atomic every tile slowed the traced
						  * scan several us: s42 run 1) */
			idx_trace(a.trace, IDX_T_SAMPW);
	}
}

/* samp_put_store's cnt at tile i of a CTA of n tiles: its samples at its last sampled
 * tile, none before (one count add a warp, not one a key). */
__device__ __forceinline__ uint32_t samp_cnt(const idx_wg_args &a, int i, int n)
{
	const int m = n < a.samp_tiles ? n : a.samp_tiles;
	return i == m - 1 ? (uint32_t)m : 0u;
}

/* CTA x of G (ranges 1) has tiles. */
__device__ __forceinline__ bool samp_has(long long tiles, int x, int G)
{
	return tiles * (x + 1) / G > tiles * x / G;
}

/* The sampling CTA of request blockIdx.y's row: polls the row's sample histogram
 * (samp_put; a thread's 16 buckets, read at once) until its counts add up to
 * IDX_SAMP_KEYS a scan CTA with tiles (counts only grow, so a sum that complete means
 * every word read is final), zeroes it, takes the bucket of the sample's r-th largest
 * and publishes that bucket's lower edge as the bound T (an order-preserving score bits
 * value, idx_ord32) in the row's word 0 and in each scan CTA's flag word. Out of line,
 * with the fields it needs by value.
 * STORE (the staged filing, samp_staged): each scan CTA x sampled its first
 * min(n_x, samp_tiles) tiles into its own slots (samp_put_store), and added their count
 * once a warp; the count complete, the slots are read (a slot still zero, its store not
 * yet seen past the count's add, is read again), counted into the histogram in shared
 * memory hs (IDX_BINS + 1 words), and zeroed. */
template <bool STORE>
static __device__ __noinline__ void samp_agg_of(const int32_t *req_rows, const int32_t *row_limit,
						int lim_cap, int topk, int samp_x, int samp_tiles,
						uint32_t *samp, unsigned long long *trace, uint32_t *flag,
						TailSmem &ts, uint32_t *hs, unsigned sleep_ns)
{
	constexpr int PER = IDX_BINS / kWgThreads;
	const int tid = threadIdx.x, req = (int)blockIdx.y, row = req_rows[req];
	if (tid == 0)
		idx_trace(trace, IDX_T_AGG0);
	if (req_rows[req + 1] - row < 1)
		return;
	int L = row_limit[row];
	L = L < 0 ? 0 : (L > lim_cap ? lim_cap : L);
	if (L <= topk)
		return; /* not scored (ScanCta::begin) */
	const long long tiles = ((long long)L + kTile - 1) / kTile;
	const int G = (int)gridDim.x - 1;
	const bool every = tiles >= G; /* every CTA has tiles (no 64-bit divisions) */
	uint32_t ncta = (uint32_t)G; /* STORE: the sampled tiles of all CTAs */
	auto tiles_of = [&](int x) { /* CTA x's tiles (ScanCta::begin's contiguous ranges) */
		return (int)(tiles * (x + 1) / G - tiles * x / G);
	};
	if (!every || STORE) {
		if (tid == 0)
			ts.m = 0;
		__syncthreads();
		uint32_t c = 0;
		for (int x = tid; x < G; x += kWgThreads)
			c += STORE ? (uint32_t)min(tiles_of(x), samp_tiles) : (uint32_t)samp_has(tiles, x, G);
		atomicAdd(&ts.m, c);
		__syncthreads();
		ncta = ts.m;
		__syncthreads();
	}
	const uint32_t want = ncta * IDX_SAMP_KEYS;
	uint32_t *h = samp + (size_t)row * IDX_SAMPW + 32;
	const int grp = kWgThreads - 1 - tid; /* thread t: buckets 16 (127 - t) .. + 15 */
	uint32_t c[PER], sum, acc, total, past;
	/* one thread polls the row's count of sampled keys, one word; then the histogram is
	 * read, again only where some of its adds are still on their way. (s34 run 6 had
	 * every thread poll the histogram's 2,049 words, and one FP8 scan CTA's first tile
	 * came ~6 us late; the suspect: those polls in the SM's load path, through which
	 * the one-row FP8 scan's cp.async copies go, not the MXFP4 scan's bulk copies.) */
	if (tid == 0) {
		while (ld_relaxed(h + IDX_BINS + 1) < want)
			if (sleep_ns)
				__nanosleep(sleep_ns);
		idx_trace(trace, IDX_T_AGG1);
	}
	__syncthreads();
	if constexpr (STORE) {
		for (int b = tid; b <= IDX_BINS; b += kWgThreads)
			hs[b] = 0;
		__syncthreads();
		uint4 *base = reinterpret_cast<uint4 *>(samp + (size_t)row * IDX_SAMPW + IDX_SAMP_STORE);
		for (int x = tid; x < G; x += kWgThreads) {
			const int m = min(tiles_of(x), samp_tiles); /* slots a warp filled */
			uint4 *p = base + (size_t)x * 8; /* warp w: tiles 0 - 7 at 2w, 8 - 15 at 2w + 1 */
			uint4 v[8];
#pragma unroll
			for (int j = 0; j < 8; j++) /* all in flight at once */
				v[j] = (j & 1) ? (m > 8 ? __ldcg(p + j) : make_uint4(0, 0, 0, 0))
					       : (m > 0 ? __ldcg(p + j) : make_uint4(0, 0, 0, 0));
#pragma unroll
			for (int j = 0; j < 8; j++) {
				const int need = (j & 1) ? m - 8 : min(m, 8); /* slots filled */
				if (need <= 0)
					continue;
				for (;;) {
					const uint32_t w4[4] = { v[j].x, v[j].y, v[j].z, v[j].w };
					bool all = true;
#pragma unroll
					for (int e = 0; e < 8; e++)
						all = all && (e >= need || (w4[e >> 1] >> (16 * (e & 1)) & 0xffffu));
					if (all)
						break;
					v[j] = __ldcg(p + j);
				}
				const uint32_t w4[4] = { v[j].x, v[j].y, v[j].z, v[j].w };
#pragma unroll
				for (int e = 0; e < 8; e++)
					if (e < need)
						atomicAdd(&hs[(w4[e >> 1] >> (16 * (e & 1)) & 0xffffu) - 1u], 1u);
				p[j] = make_uint4(0, 0, 0, 0); /* zero at rest again */
			}
		}
		__syncthreads();
	}
	for (;;) {
		sum = 0;
#pragma unroll
		for (int b = 0; b < PER; b++)
			c[b] = STORE ? hs[grp * PER + b] : ld_relaxed(h + grp * PER + b);
		past = tid == kWgThreads - 1 ? (STORE ? hs[IDX_BINS] : ld_relaxed(h + IDX_BINS)) : 0u;
#pragma unroll
		for (int b = 0; b < PER; b++)
			sum += c[b];
		if (tid == kWgThreads - 1)
			ts.nl = past;
		acc = excl_scan128(sum + past, ts.wsum); /* past: the last thread, after the rest */
		total = ts.wsum[0] + ts.wsum[1] + ts.wsum[2] + ts.wsum[3];
		past = ts.nl;
		__syncthreads(); /* wsum and nl are read */
		if (total >= want)
			break;
	}
	const uint32_t mt = total - past; /* sampled keys inside the limit */
	const unsigned long long r0 =
		((unsigned long long)samp_x * (unsigned long long)topk * mt + (unsigned long long)L - 1) /
		(unsigned long long)L;
	const uint32_t r = r0 < 1 ? 1u : r0 > mt ? mt : (uint32_t)r0;
	if (tid == 0)
		ts.bin = -1;
	__syncthreads();
#pragma unroll
	for (int b = PER - 1; b >= 0; b--) {
		if (mt && acc < r && acc + c[b] >= r)
			ts.bin = grp * PER + b;
		acc += c[b];
	}
	__syncthreads();
	const int bt = ts.bin; /* -1: no key sampled inside the limit: list them all */
	uint32_t t = 1u;
	if (bt > 0) {
		uint32_t base;
		int shift;
		idx_sub_bounds((uint32_t)bt, &base, &shift);
		t = base + 1u > 1u ? base + 1u : 1u;
	}
	if (tid == 0) {
		idx_trace(trace, IDX_T_AGG2);
		*reinterpret_cast<volatile uint32_t *>(h - 32) = t; /* the select's */
	}
	/* and each scan CTA's own word (one poller a word: a word polled by every CTA
	 * queues the polls behind each other, s11) */
	uint32_t *fl = flag + (size_t)row * IDX_FLAGS;
	for (int x = tid; x < G; x += kWgThreads)
		if (every || samp_has(tiles, x, G))
			*reinterpret_cast<volatile uint32_t *>(fl + x) = t;
	if (tid == 0)
		idx_trace(trace, IDX_T_FH2);
	/* zero at rest again (every count is in: the sum was complete) */
#pragma unroll
	for (int b = 0; b < PER; b++)
		h[grp * PER + b] = 0;
	if (tid == kWgThreads - 1)
		h[IDX_BINS] = 0, h[IDX_BINS + 1] = 0;
}
/* The row's sampling CTA (ring: shared memory of >= kSampWords words, free here). */
template <bool STORE = false>
__device__ __forceinline__ void samp_agg(const idx_wg_args &a, uint32_t *ring, TailSmem &ts)
{
	samp_agg_of<STORE>(a.req_rows, a.row_limit, a.lim_cap, a.topk, a.samp_x, a.samp_tiles, a.samp,
			   a.trace, a.flag, ts, ring, a.samp_sleep);
}

/* A scan CTA's filing after its last tile (samp_tail above): its scores at or above the
 * bound T into the row's candidate list. */
__device__ void samp_tail(const idx_wg_args &a, const ScanCta &cta, TailSmem &ts)
{
	const int tid = threadIdx.x, lane = tid & 31, row = cta.row, L = cta.L;
	const float *sc = a.scores + (size_t)row * a.sstride;
	const int mine = cta.n * kTile;
	auto key_of = [&](int e) { return (cta.x + (e >> 6) * cta.G) * kTile + (e & (kTile - 1)); };
	float s[kHold]; /* its own scores (written before flush_hist's barrier) */
#pragma unroll
	for (int u = 0; u < kHold; u++) {
		const int e = tid + u * kWgThreads, j = key_of(e);
		s[u] = e < mine && j < L ? sc[j] : 0.0f;
	}
	if (tid == 0) { /* this CTA's own word (samp_agg), zero at rest again once read */
		uint32_t *fl = a.flag + (size_t)row * IDX_FLAGS + (blockIdx.x - 1);
		uint32_t w;
		while (!(w = ld_relaxed(fl)))
			;
		*fl = 0;
		ts.bin = (int)w;
	}
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_FCUT);
	const uint32_t bt = (uint32_t)ts.bin; /* the bound T */
	unsigned mc[kHold];
	uint32_t nc = 0;
#pragma unroll
	for (int u = 0; u < kHold; u++) {
		const int e = tid + u * kWgThreads, j = key_of(e);
		const bool in = e < mine && j < L && idx_ord32(s[u]) >= bt;
		mc[u] = __ballot_sync(0xffffffffu, in);
		nc += (uint32_t)__popc(mc[u]);
	}
	uint32_t ac = 0;
	if (lane == 0 && nc)
		ac = atomicAdd(a.count + (size_t)row * IDX_CNT + 1, nc);
	ac = __shfl_sync(0xffffffffu, ac, 0);
	const unsigned lt = (1u << lane) - 1u;
	unsigned long long *cand = a.cand + (size_t)row * a.cap;
#pragma unroll
	for (int u = 0; u < kHold; u++) {
		if (mc[u] >> lane & 1) {
			const uint32_t at = ac + (uint32_t)__popc(mc[u] & lt);
			if (at < a.cap)
				cand[at] = idx_key64(s[u], key_of(tid + u * kWgThreads));
		}
		ac += (uint32_t)__popc(mc[u]);
	}
	if (tid == 0)
		idx_trace(a.trace, IDX_T_FLOOP);
}

/* The filing where a scan CTA scores more tiles than samp_tail holds (kHold a thread):
 * one-row batches of long rows with FP8 keys (scan_ss_kernel's SAMP 2; wg_shape's staged
 * filing), one wave of CTAs in contiguous ranges, each CTA having sampled its first
 * samp_tiles tiles (samp_put_store). After its last tile the CTA reads
 * its range of scores back (its own stores, before flush_hist's barrier), stages those
 * at or above the bound T in shared memory (buf: nbuf keys; a warp-aggregated shared
 * counter), then reserves their places in the row's list with one atomic and copies
 * them there. No histogram, no filter kernel, no row barrier: the select (select_list)
 * follows. A CTA with more than nbuf such keys (a crowd of equal scores) adds cap + 1 to
 * the row's count instead, so the select takes the top k of every score of the row
 * (select_all): exact either way. Out of line (inlined, it made the one-set MXFP4 loop,
 * where s41 tried it, spill 60 bytes at its 80-register cap), with the fields it needs
 * by value: a reference to the kernel's parameters copies them to the stack, and the
 * loop then reads them there (s41 run 2: ~20 us slower at 1M batch 8). */
static __device__ __noinline__ void samp_staged_of(const float *sc, uint32_t *fl, uint32_t *cnt,
						   unsigned long long *cand, uint32_t cap,
						   unsigned long long *trace, int x, int n, int G, int L,
						   TailSmem &ts, unsigned long long *buf, uint32_t nbuf)
{
	const int tid = threadIdx.x, lane = tid & 31;
	/* tile i's keys (x + i G) 64 .. + 63 (ranges: G = 1); float4 v of tile v / 16 */
	const int nv = n * (kTile / 4);
	auto key4 = [&](int v) { return (x + (v >> 4) * G) * kTile + 4 * (v & 15); };
	if (tid == 0) { /* this CTA's own word (samp_agg), zero at rest again once read */
		ts.m = 0;
		uint32_t w;
		while (!(w = ld_relaxed(fl)))
			;
		*fl = 0;
		ts.bin = (int)w;
		idx_trace(trace, IDX_T_FCUT);
	}
	__syncthreads();
	const uint32_t bt = (uint32_t)ts.bin; /* the bound T */
	const unsigned lt = (1u << lane) - 1u;
	constexpr int U = 4; /* float4s a thread in flight */
	for (int v0 = 0; v0 < nv; v0 += U * kWgThreads) { /* the same trip count for all */
		float4 s[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int v = v0 + u * kWgThreads + tid;
			s[u] = v < nv && key4(v) < L ? *reinterpret_cast<const float4 *>(sc + key4(v))
						   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			const float e[4] = { s[u].x, s[u].y, s[u].z, s[u].w };
#pragma unroll
			for (int q = 0; q < 4; q++) {
				const int v = v0 + u * kWgThreads + tid, j = key4(v) + q;
				const bool in = v < nv && j < L && idx_ord32(e[q]) >= bt;
				const unsigned m = __ballot_sync(0xffffffffu, in);
				if (m) {
					const int ld = __ffs(m) - 1;
					uint32_t at = 0;
					if (lane == ld)
						at = atomicAdd(&ts.m, (uint32_t)__popc(m));
					at = __shfl_sync(0xffffffffu, at, ld) + (uint32_t)__popc(m & lt);
					if (in && at < nbuf)
						buf[at] = idx_key64(e[q], j);
				}
			}
		}
	}
	__syncthreads();
	if (tid == 0) {
		const uint32_t c = ts.m;
		if (c > nbuf) /* not all staged: the select takes the whole row */
			atomicAdd(cnt, cap + 1u);
		else if (c)
			ts.nl = atomicAdd(cnt, c);
	}
	__syncthreads();
	const uint32_t c = ts.m, base = ts.nl;
	if (c <= nbuf)
		for (uint32_t i = (uint32_t)tid; i < c; i += kWgThreads)
			if (base + i < cap)
				cand[base + i] = buf[i];
	if (tid == 0)
		idx_trace(trace, IDX_T_FLOOP);
}
__device__ __forceinline__ void samp_staged(const idx_wg_args &a, const ScanCta &cta, TailSmem &ts,
					    unsigned long long *buf, uint32_t nbuf)
{
	samp_staged_of(a.scores + (size_t)cta.row * a.sstride,
		       a.flag + (size_t)cta.row * IDX_FLAGS + (blockIdx.x - 1),
		       a.count + (size_t)cta.row * IDX_CNT + 1, a.cand + (size_t)cta.row * a.cap,
		       (uint32_t)a.cap, a.trace, cta.x, cta.n, cta.G, cta.L, ts, buf, nbuf);
}

#endif
