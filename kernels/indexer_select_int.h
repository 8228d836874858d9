/*
 * Private to kernels/indexer.cu: the select of a row once its filter is done (radix_cut,
 * sort_emit, select_row), run by the filter's last CTA or by select_kernel (phases).
 * Included by indexer.cu inside its anonymous namespace, after Args, SelSmem, the
 * filter constants, the cut helpers and for_each_cand, which it uses; not a header of
 * its own.
 */
#ifndef STRATA_KERNELS_INDEXER_SELECT_INT_H
#define STRATA_KERNELS_INDEXER_SELECT_INT_H

/* Radix select: on return (key & *mask) >= *prefix holds for exactly the `need` largest
 * of the (unique) keys `each` enumerates. `need` >= 1. */
template <typename E>
__device__ void radix_cut(E each, int need, SelSmem &sm, unsigned long long *prefix_out,
			  unsigned long long *mask_out)
{
	const int tid = threadIdx.x;
	unsigned long long prefix = 0, mask = 0;
	int remaining = need;
	for (int shift = 56; shift >= 0; shift -= 8) {
		for (int i = tid; i < 256; i += blockDim.x)
			sm.h256[i] = 0;
		if (tid == 0)
			sm.digit = -1;
		__syncthreads();
		each([&](unsigned long long key) {
			const bool in = (key & mask) == prefix;
			agg_inc(&sm.h256[in ? (key >> shift) & 255u : 0u], in);
		});
		__syncthreads();
		if (tid < 32) { /* lane l: bins 255-8l down to 248-8l */
			uint32_t cnt[8], sum = 0;
#pragma unroll
			for (int b = 0; b < 8; b++) {
				cnt[b] = sm.h256[255 - 8 * tid - b];
				sum += cnt[b];
			}
			uint32_t incl = sum;
#pragma unroll
			for (int o = 1; o < 32; o <<= 1) {
				uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
				if (tid >= o)
					incl += v;
			}
			uint32_t acc = incl - sum;
#pragma unroll
			for (int b = 0; b < 8; b++) {
				if (acc < (uint32_t)remaining && acc + cnt[b] >= (uint32_t)remaining) {
					sm.digit = 255 - 8 * tid - b;
					sm.dabove = acc;
					sm.dcnt = (int)cnt[b];
				}
				acc += cnt[b];
			}
		}
		__syncthreads();
		const int digit = sm.digit;
		bool done = digit < 0; /* fewer keys than need (cannot happen): keep the prefix */
		if (!done) {
			remaining -= (int)sm.dabove;
			prefix |= (unsigned long long)digit << shift;
			mask |= 0xffull << shift;
			done = sm.dcnt == remaining;
		}
		__syncthreads();
		if (done)
			break;
	}
	*prefix_out = prefix;
	*mask_out = mask;
}

/* The classing pass of a select over N keys a thread held in registers (ck; valid(j):
 * slot j holds one): cls_of(key) is 2 (taken: above the cut bin), 1 (the cut bin's:
 * a candidate) or 0. Each thread classes its slots first (2 bits a slot); its places
 * come from one warp scan of its two counts and one shared atomic a warp and counter,
 * then take(at, key) / cand(at, key) store the entries (at: the counter's old value
 * plus the key's rank). In place of an aggregated atomic (ballot, match, atomic,
 * shuffle) a slot in turn, a chain of dependent shared-memory round trips. Every lane
 * of the warp calls it. */
template <int N, typename Valid, typename ClassOf, typename Take, typename Cand>
__device__ __forceinline__ void class_regs(const unsigned long long (&ck)[N], Valid valid,
					   ClassOf cls_of, uint32_t *n_take, uint32_t *n_cand,
					   Take take, Cand cand)
{
	static_assert(N <= 16, "two bits a slot in one word");
	const int lane = (int)(threadIdx.x & 31);
	uint32_t cls = 0;
#pragma unroll
	for (int j = 0; j < N; j++)
		if (valid(j))
			cls |= cls_of(ck[j]) << (2 * j);
	const uint32_t v = (uint32_t)__popc(cls & 0xaaaaaaaau) | (uint32_t)__popc(cls & 0x55555555u) << 16;
	uint32_t x = v; /* inclusive: both counts at once (a warp's at most 32 N < 2^16 each) */
#pragma unroll
	for (int d = 1; d < 32; d <<= 1) {
		const uint32_t y = __shfl_up_sync(0xffffffffu, x, d);
		if (lane >= d)
			x += y;
	}
	uint32_t bt = 0, bc = 0;
	if (lane == 31) {
		if (x & 0xffffu)
			bt = atomicAdd(n_take, x & 0xffffu);
		if (x >> 16)
			bc = atomicAdd(n_cand, x >> 16);
	}
	const uint32_t ex = x - v;
	bt = __shfl_sync(0xffffffffu, bt, 31) + (ex & 0xffffu);
	bc = __shfl_sync(0xffffffffu, bc, 31) + (ex >> 16);
#pragma unroll
	for (int j = 0; j < N; j++) {
		const uint32_t c = cls >> (2 * j) & 3u;
		if (c == 2u)
			take(bt++, ck[j]);
		else if (c == 1u)
			cand(bc++, ck[j]);
	}
}

/* Sorts the row's selected ids (sm.ids[0..k), INT_MAX where unfilled) ascending and
 * writes them, -1 padded, with their scores. A counting sort on the ids' top 11 bits
 * (2048 buckets, positions by a block scan) then, inside each bucket, rank by counting
 * the bucket's smaller ids: a few barriers instead of a bitonic network's 45, and a
 * bucket spans at most max(1, L / 2048) ids, which bounds the counting loop. */
template <int PER = STRATA_INDEXER_MAX_TOPK / kFThreads> /* ids a thread: k <= PER kFThreads */
__device__ void sort_emit(const Args &a, int row, int L, SelSmem &sm, FScan::TempStorage &tmp)
{
	constexpr int NB = 2048;
	static_assert(NB * 8 <= (int)sizeof(sm.u), "bucket starts and ids share sm.u");
	static_assert(NB == kFThreads * 4, "4 buckets per thread");
	const int k = a.topk, tid = threadIdx.x;
	uint32_t *cnt = reinterpret_cast<uint32_t *>(&sm.u); /* [NB] counts, then starts */
	int32_t *by = reinterpret_cast<int32_t *>(cnt + NB); /* [<= k] ids grouped by bucket */
	const int nbits = 32 - __clz(L - 1);                  /* L >= 2 here */
	const int shift = nbits > 11 ? nbits - 11 : 0;
	for (int b = tid; b < NB; b += kFThreads)
		cnt[b] = 0;
	__syncthreads();
	int32_t id[PER];
	uint32_t bk[PER], pos[PER];
	float sv[PER]; /* each id's score (select_row keeps them beside the ids) */
	int32_t *oid = a.out_ids + (size_t)row * k;
	float *osc = a.out_scores ? a.out_scores + (size_t)row * k : nullptr;
#pragma unroll
	for (int j = 0; j < PER; j++) {
		const int i = tid + j * kFThreads;
		id[j] = i < k ? sm.ids[i] : -1;
		sv[j] = i < k ? sm.sc[i] : 0.0f;
		if (id[j] >= 0 && id[j] < L) {
			bk[j] = (uint32_t)id[j] >> shift;
			pos[j] = atomicAdd(&cnt[bk[j]], 1u);
		} else {
			id[j] = -1;
		}
	}
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SCNT);
	uint32_t c4[4], sum = 0, off, total;
#pragma unroll
	for (int q = 0; q < 4; q++) {
		c4[q] = cnt[4 * tid + q];
		sum += c4[q];
	}
	FScan(tmp).ExclusiveSum(sum, off, total);
#pragma unroll
	for (int q = 0; q < 4; q++) {
		cnt[4 * tid + q] = off;
		off += c4[q];
	}
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SSCAN);
#pragma unroll
	for (int j = 0; j < PER; j++)
		if (id[j] >= 0)
			by[cnt[bk[j]] + pos[j]] = id[j];
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SSCAT);
#pragma unroll
	for (int j = 0; j < PER; j++) {
		if (id[j] < 0)
			continue;
		const uint32_t s0 = cnt[bk[j]], s1 = bk[j] + 1 < (uint32_t)NB ? cnt[bk[j] + 1] : total;
		uint32_t at = s0;
		for (uint32_t q = s0; q < s1; q++)
			at += by[q] < id[j];
		oid[at] = id[j];
		if (osc)
			osc[at] = sv[j];
	}
	for (int i = (int)total + tid; i < k; i += kFThreads) {
		oid[i] = -1;
		if (osc)
			osc[i] = 0.0f;
	}
}

/* Candidate keys held in registers per select thread: lists up to kReg * kFThreads
 * long are read once, before the second-level cut is known (their latency overlaps
 * it), and classified from registers. */
constexpr int kReg = 4;

__device__ __forceinline__ bool row_cut(const Args &a, int row, SelSmem &sm,
					FScan::TempStorage &tmp, uint32_t *bstar, uint32_t *above1);
__device__ void clear_row(const Args &a, int row);

/* The select's second level, once a row's first-level cut (b*, above1), its ids above b*
 * (sm.ids[0, above1), with their scores; INT_MAX past them) and its bin-2 counts (h2c, in
 * cut_counts' order) are in hand: the bin b2* holding the k-th score, the keys above it
 * taken, bin (b*, b2*) resolved by rank or radix select, then the k ids sorted and
 * written (sort_emit). regs(h): where bucket b*'s keys are in registers, calls h(ck,
 * valid) on them (the classing pass by class_regs) and returns true, else false; then
 * first(f) calls f(key) for each key of bucket b* (the classing pass a key at a time),
 * all(f) as well (a crowded bin's passes); clear() zeroes the row's counters once every
 * read of them is done. select_row's and filter_cl_kernel's. */
template <int PER, typename Regs, typename First, typename All, typename Clear>
__device__ __forceinline__ void select_finish(const Args &a, int row, int L, uint32_t bstar,
					      uint32_t above1,
					      const uint32_t (&h2c)[IDX_BINS2 / kFThreads],
					      SelSmem &sm, FScan::TempStorage &tmp, Regs regs,
					      First first, All all, Clear clear)
{
	const int k = a.topk, tid = threadIdx.x;
	uint32_t base;
	int shift;
	idx_sub_bounds(bstar, &base, &shift);
	if (tid == 0) {
		sm.bin = -1, sm.above = 0, sm.n_t = 0, sm.n_c = 0;
		idx_trace(a.trace, IDX_T_SELLD);
	}
	__syncthreads();
	find_cut_of<IDX_BINS2 / kFThreads>(h2c, (uint32_t)k - above1, tmp, &sm.bin, &sm.above);
	__syncthreads();
	clear(); /* every counter this call reads is read */
	const int b2s = sm.bin;
	if (tid == 0)
		idx_trace(a.trace, IDX_T_CUT2);
	const uint32_t above2 = b2s < 0 ? 0 : sm.above;
	const int need = k - (int)above1 - (int)above2;

	/* a taken key at place at (past the ids above b*), a candidate of bin (b*, b2*) at c */
	auto put = [&](uint32_t at, unsigned long long key) {
		at += above1;
		if (at < (uint32_t)k)
			sm.ids[at] = id_of(key), sm.sc[at] = score_of(key);
	};
	auto put_c = [&](uint32_t c, unsigned long long key) {
		if (c < (uint32_t)kCC)
			sm.u.cc[c] = key;
	};
	auto take = [&](unsigned long long key) { put(agg_inc(&sm.n_t, true), key); };
	/* bin-2 winners and bin (b*, b2*) into shared memory */
	if (b2s >= 0) {
		auto cls_of = [&](unsigned long long key) {
			const uint32_t b2 = idx_sub_of((uint32_t)(key >> 32), base, shift);
			return b2 > (uint32_t)b2s ? 2u : b2 == (uint32_t)b2s ? 1u : 0u;
		};
		/* the keys in registers (select_row's list where it fit them): classed by
		 * class_regs; else one aggregated atomic a key */
		const bool held = regs([&](const auto &ck, auto valid) {
			class_regs(ck, valid, cls_of, &sm.n_t, &sm.n_c, put, put_c);
		});
		if (!held)
			first([&](unsigned long long key) {
				const uint32_t c = cls_of(key);
				if (c == 2u)
					take(key);
				else if (c == 1u)
					put_c(agg_inc(&sm.n_c, true), key);
			});
	}
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_CLASS);
	const uint32_t nC = sm.n_c;
	if (b2s >= 0 && need > 0 && nC > 0) {
		unsigned long long prefix = 0, mask = 0; /* take all: (key & 0) >= 0 */
		if (nC <= (uint32_t)kRankMax) {
			/* the usual case, a handful of keys: rank each among them (keys are unique) */
			if (tid < (int)nC) {
				const unsigned long long key = sm.u.cc[tid];
				uint32_t rank = 0;
				if ((uint32_t)need < nC)
					for (uint32_t j = 0; j < nC; j++)
						rank += sm.u.cc[j] > key;
				if (rank < (uint32_t)need)
					take(key);
			}
		} else if (nC <= (uint32_t)kCC) {
			auto each = [&](auto f) {
				for (uint32_t i = tid; i < nC; i += blockDim.x)
					f(sm.u.cc[i]);
			};
			if ((uint32_t)need < nC)
				radix_cut(each, need, sm, &prefix, &mask);
			each([&](unsigned long long key) {
				if ((key & mask) >= prefix)
					take(key);
			});
		} else { /* a crowded bin (many equal scores): straight from the lists */
			auto each = [&](auto f) {
				all([&](unsigned long long key) {
					if (idx_sub_of((uint32_t)(key >> 32), base, shift) == (uint32_t)b2s)
						f(key);
				});
			};
			if ((uint32_t)need < nC)
				radix_cut(each, need, sm, &prefix, &mask);
			each([&](unsigned long long key) {
				if ((key & mask) >= prefix)
					take(key);
			});
		}
	}
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SORT0);
	sort_emit<PER>(a, row, L, sm, tmp);
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SORT1);
	if (tid == 0)
		idx_trace(a.trace, IDX_T_END);
}

/* Selects row `row` (limit L > k; L < 0: read here, with the lists, and a row with L <=
 * k written 0 .. L-1) and writes the ids in ascending order, with their first-level cut
 * (b*, above1) given (cut true) or found here (a fused scan's count slots, else the
 * scan's histogram). Needs the filter's outputs (sel, cand, hist2, count) complete;
 * leaves the row's counters zero. Every read of the lists and counters is issued before
 * the first barrier, so they share one trip to L2. */
template <int PER = STRATA_INDEXER_MAX_TOPK / kFThreads> /* k <= PER kFThreads */
__device__ void select_row(const Args &a, int row, int L, bool cut, uint32_t bstar,
			   uint32_t above1, SelSmem &sm, FScan::TempStorage &tmp)
{
	const int k = a.topk, tid = threadIdx.x;
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SEL0);
	const uint32_t nc = __ldcg(a.count + (size_t)row * IDX_CNT + 1);
	const unsigned long long *cl = a.cand + (size_t)row * a.cap;
	const uint32_t pre = a.cap < (size_t)kReg * kFThreads ? (uint32_t)a.cap : kReg * kFThreads;
	unsigned long long ck[kReg], sk[PER];
#pragma unroll
	for (int j = 0; j < kReg; j++) {
		const uint32_t i = tid + j * kFThreads;
		ck[j] = i < pre ? __ldcg(cl + i) : 0ull;
	}
#pragma unroll
	for (int j = 0; j < PER; j++) { /* the selected list: its first above1 are valid */
		const int i = tid + j * kFThreads;
		sk[j] = i < k ? __ldcg(a.sel + (size_t)row * k + i) : 0ull;
	}
	uint32_t h2c[IDX_BINS2 / kFThreads]; /* the second-level counts, read with the rest */
	cut_counts<IDX_BINS2 / kFThreads>(a.hist2 + (size_t)row * IDX_BINS2, h2c);
	uint32_t b1 = 0, ab = 0;
	if (!cut) { /* a fused scan left the cut in count slots 3 (b* + 1) and 4 */
		b1 = __ldcg(a.count + (size_t)row * IDX_CNT + 3);
		ab = __ldcg(a.count + (size_t)row * IDX_CNT + 4);
	}
	if (L < 0) { /* the select kernel: the limit's read shares the lists' trip */
		L = row_lim(a, row);
		if (L <= k) { /* nothing scored: the row's counters are untouched */
			if (tid == 0)
				publish_cut(a, row, STRATA_INDEXER_CUT_ALL);
			write_trivial(a, row, L, false);
			return;
		}
	}
	if (b1) {
		cut = true;
		bstar = b1 - 1;
		above1 = ab;
	}
	if (!cut && !row_cut(a, row, sm, tmp, &bstar, &above1)) {
		write_trivial(a, row, L, true);
		__syncthreads();
		clear_row(a, row);
		return;
	}
#pragma unroll
	for (int j = 0; j < PER; j++) {
		const int i = tid + j * kFThreads;
		if (i < k) {
			sm.ids[i] = i < (int)above1 ? id_of(sk[j]) : INT_MAX;
			sm.sc[i] = score_of(sk[j]);
		}
	}
	auto cands = [&](auto f) { for_each_cand(a, row, L, bstar, nc, f); };
	select_finish<PER>(
		a, row, L, bstar, above1, h2c, sm, tmp,
		[&](auto h) { /* the list from registers where it fit them */
			if (nc > pre)
				return false;
			h(ck, [&](int j) { return tid + j * kFThreads < (int)nc; });
			return true;
		},
		cands, cands, [&] { clear_row(a, row); });
}

/* ---- the top k of a whole row of scores (select_list's fallback) ----------------------
 * Where the sampled list cannot be used (it holds fewer than k keys, or more than it has
 * room for: a sample that missed, a crowd of equal scores) the select reads the row's
 * scores from global memory. A radix select over the unique keys (idx_key64) with
 * 12-bit digits: the score's bits 63 - 52, 51 - 40 and 39 - 32, then the id part's low
 * bits, 12 at a time (ids are below L, so the id part's higher bits are the same for
 * every key). Each digit is one pass over the row into a shared histogram (row_hist:
 * float4 reads, four a thread in flight; a warp whose keys fall in one bin, as in a
 * crowd, adds once); once the cut digit's bin holds at most kCC keys, one more pass takes every key above it and copies
 * the bin's keys to shared memory, where the rest is ranked. Random scores take two
 * passes, a row of equal scores five. Out of line: inlined, it made the list path's
 * select spill (or, with eight reads a thread in flight, take 105 registers, which an
 * SM full of scan CTAs frees later). H200, 1M keys, batch 1, STRATA_IDX_SAMP_X=0
 * (bench/results/2026-12-02-h200-s38, runs 1 - 3): a call takes 114 us with MXFP4 keys
 * and 119 with FP8 (one key a lane and step: 148 / 152; radix_cut over the row, 8-bit
 * digits and each key's read waited for in turn: 505 - 534 / 759 - 906), against ~20 on
 * the list; 128K batch 8 40 us (121 - 167 before). */

/* f(key, in) for every score of the row, in = j < L; all threads of the CTA call it
 * the same number of times (f may use warp votes). Scores 16-byte aligned
 * (idx_gpu_layout's score_stride, a multiple of 64). */
template <typename F> __device__ __forceinline__ void row_keys(const float *sc, int L, F f)
{
	constexpr int U = 4;
	const int tid = threadIdx.x, n4 = L >> 2;
	const float4 *s4 = reinterpret_cast<const float4 *>(sc);
	for (int c0 = 0; c0 < n4; c0 += U * kFThreads) {
		float4 v[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int i = c0 + u * kFThreads + tid;
			v[u] = i < n4 ? __ldcg(s4 + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int i = c0 + u * kFThreads + tid;
			const bool in = i < n4;
			f((unsigned long long)idx_key64(v[u].x, 4 * i), in);
			f((unsigned long long)idx_key64(v[u].y, 4 * i + 1), in);
			f((unsigned long long)idx_key64(v[u].z, 4 * i + 2), in);
			f((unsigned long long)idx_key64(v[u].w, 4 * i + 3), in);
		}
	}
	if (tid < 32) { /* the last L % 4, by warp 0 */
		const int j = 4 * n4 + tid;
		const bool in = j < L;
		f(in ? (unsigned long long)idx_key64(__ldcg(sc + j), j) : 0ull, in);
	}
}

/* row_hist's step: a lane's four keys (scores s, ids j0 ..), the first nin of them in
 * the row; the digit: the key's half (top: the score's order bits, else 0xffffffff - id,
 * as idx_key64), shift sh, width mask wm; the prefix's halves (mh, ph), (ml, pl). */
__device__ __forceinline__ void hist_add4(uint32_t *h, const float (&s)[4], int j0, int nin, uint32_t mh,
					  uint32_t ph, uint32_t ml, uint32_t pl, bool top, int sh, uint32_t wm)
{
	uint32_t bin[4];
	bool in[4], any = false;
#pragma unroll
	for (int e = 0; e < 4; e++) {
		const uint32_t hi = idx_ord32(s[e]), lw = 0xffffffffu - (uint32_t)(j0 + e);
		in[e] = e < nin && (hi & mh) == ph && (lw & ml) == pl;
		bin[e] = ((top ? hi : lw) >> sh) & wm;
		any |= in[e];
	}
	const unsigned m = __ballot_sync(0xffffffffu, any);
	if (!m)
		return;
	const int ld = __ffs(m) - 1;
	const uint32_t mine = in[0] ? bin[0] : in[1] ? bin[1] : in[2] ? bin[2] : bin[3];
	const uint32_t b0 = __shfl_sync(0xffffffffu, mine, ld);
	bool same = true;
	uint32_t c = 0;
#pragma unroll
	for (int e = 0; e < 4; e++)
		if (in[e]) {
			same &= bin[e] == b0;
			c++;
		}
	if (__all_sync(0xffffffffu, same)) {
#pragma unroll
		for (int o = 16; o; o >>= 1)
			c += __shfl_xor_sync(0xffffffffu, c, o);
		if ((int)(threadIdx.x & 31) == ld)
			atomicAdd(h + b0, c);
	} else {
#pragma unroll
		for (int e = 0; e < 4; e++)
			if (in[e])
				atomicAdd(h + bin[e], 1u);
	}
}

/* One digit's histogram over the row: h[(key >> lo) & wm] += 1 for every key with
 * (key & mask) == prefix. A thread's four keys of a float4 at a time; where every
 * counted key of the warp falls in one bin (a crowd: equal scores, or the cut's bin
 * in a late digit) the warp adds once, else each key adds its own. */
__device__ __forceinline__ void row_hist(const float *sc, int L, uint32_t *h, int lo, uint32_t wm,
					 unsigned long long mask, unsigned long long prefix)
{
	const uint32_t mh = (uint32_t)(mask >> 32), ml = (uint32_t)mask;
	const uint32_t ph = (uint32_t)(prefix >> 32), pl = (uint32_t)prefix;
	const bool top = lo >= 32; /* a digit lies in one half of the key */
	const int sh = top ? lo - 32 : lo;
	constexpr int U = 4;
	const int tid = threadIdx.x, n4 = L >> 2;
	const float4 *s4 = reinterpret_cast<const float4 *>(sc);
	for (int c0 = 0; c0 < n4; c0 += U * kFThreads) {
		float4 v[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int i = c0 + u * kFThreads + tid;
			v[u] = i < n4 ? __ldcg(s4 + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int i = c0 + u * kFThreads + tid;
			const float s[4] = { v[u].x, v[u].y, v[u].z, v[u].w };
			hist_add4(h, s, 4 * i, i < n4 ? 4 : 0, mh, ph, ml, pl, top, sh, wm);
		}
	}
	if (tid < 32) { /* the last L % 4, by warp 0 */
		const int j = 4 * n4 + tid;
		const float s[4] = { j < L ? __ldcg(sc + j) : 0.0f, 0.0f, 0.0f, 0.0f };
		hist_add4(h, s, j, j < L ? 1 : 0, mh, ph, ml, pl, top, sh, wm);
	}
}

/* take(key) for exactly the k largest keys of the row (L > k scores at sc); inc(ctr):
 * the calling lanes' places at a shared counter (select_list's warp_inc). Uses sm.u,
 * sm.h256, sm.bin / above / n_c and radix_cut's fields; synchronises throughout. */
template <typename Take, typename Inc>
__device__ __noinline__ void select_all(const float *sc, int L, int k, SelSmem &sm, FScan::TempStorage &tmp,
			   Take take, Inc inc)
{
	constexpr int NB = IDX_BINS2 / kFThreads;
	const int tid = threadIdx.x;
	const int idb = 32 - __clz(L - 1); /* id bits: ids 0 .. L - 1 (L >= 2) */
	uint32_t *h = sm.u.h2;
	unsigned long long prefix = 0, mask = 0; /* the cut's digits so far */
	uint32_t rem = (uint32_t)k;              /* keys still to take at the prefix */
	bool gathered = false;
	for (int d = 0; !gathered; d++) {
		int lo, w;
		if (d < 3) {
			lo = d == 0 ? 52 : d == 1 ? 40 : 32;
			w = d == 2 ? 8 : 12;
		} else {
			const int left = idb - 12 * (d - 3); /* id bits not yet cut */
			if (left <= 0)
				break; /* cannot happen: the keys are unique, so a bin of one ends it */
			w = left < 12 ? left : 12;
			lo = left - w;
		}
		const uint32_t wm = (1u << w) - 1u;
		for (int i = tid; i < IDX_BINS2; i += kFThreads)
			h[i] = 0;
		if (tid == 0)
			sm.bin = -1;
		__syncthreads();
		row_hist(sc, L, h, lo, wm, mask, prefix);
		__syncthreads();
		uint32_t cnt[NB];
		const int grp = kFThreads - 1 - tid;
#pragma unroll
		for (int b = 0; b < NB; b++)
			cnt[b] = h[grp * NB + b];
		find_cut_of<NB>(cnt, rem, tmp, &sm.bin, &sm.above);
		__syncthreads();
		const int b = sm.bin;
		if (b < 0) /* fewer keys than rem at the prefix: cannot happen */
			break;
		const uint32_t dc = h[b];
		rem -= sm.above;
		prefix |= (unsigned long long)b << lo;
		mask |= (unsigned long long)wm << lo;
		__syncthreads(); /* h, bin and above read */
		if (dc == rem)
			break; /* the bin's keys are all taken: (key & mask) >= prefix */
		if (dc <= (uint32_t)kCC) { /* the bin's keys into shared memory (h is free) */
			if (tid == 0)
				sm.n_c = 0;
			__syncthreads();
			row_keys(sc, L, [&](unsigned long long key, bool in) {
				const unsigned long long km = key & mask;
				if (in && km > prefix)
					take(key);
				else if (in && km == prefix)
					sm.u.cc[inc(&sm.n_c)] = key; /* dc <= kCC of them */
			});
			__syncthreads();
			const uint32_t nC = sm.n_c;
			auto each = [&](auto f) {
				for (uint32_t i = tid; i < nC; i += blockDim.x)
					f(sm.u.cc[i]);
			};
			unsigned long long p2 = 0, m2 = 0;
			radix_cut(each, (int)rem, sm, &p2, &m2); /* rem < nC */
			each([&](unsigned long long key) {
				if ((key & m2) >= p2)
					take(key);
			});
			gathered = true;
		}
	}
	if (!gathered)
		row_keys(sc, L, [&](unsigned long long key, bool in) {
			if (in && (key & mask) >= prefix)
				take(key);
		});
}

/* The select after a sampled tail (indexer_tail_int.h samp_tail): the top k of the row's
 * candidate list, every key at or above the sample's bound T, where the list holds at
 * least k keys and all of them fit; else (a sample that missed, a crowd of equal scores)
 * the top k of every score of the row, by radix select (slower, as exact). The list's cut:
 * one histogram of its keys in shared memory, 4096 bins over eight buckets' span from the
 * lower edge of T's bucket (keys above it clamp into the last bin), then the cut bin's
 * keys ranked among themselves. A list up to kLReg * kFThreads long is read once, into
 * registers. Writes the ids in ascending order and leaves the row's count slots and
 * bound zero. */
constexpr int kLReg = 8;

/* What select_list sets up before the scan's results exist, so that select_list_kernel
 * does it (and reads the row's limit, a cold HBM trip) while it waits for the scan, where
 * it is resident before the scan's end (~1.4 us at 1M): the shared ids, counters and list
 * histogram. No barrier: select_list's first orders these stores before every use.
 * H200, same call (bench/results/2026-12-03-h200-s40, run 8): one row 1M MXFP4 18.5 us
 * against 18.7, FP8 19.3 - 19.4 against 19.6 - 19.8; 128K batch 8 MXFP4 19.8 - 19.9
 * against 20.1, FP8 18.8 against 19.0; but 128K / 256K one row 0.1 - 0.2 us slower in
 * the graph (not in a traced call, where the select itself was ~0.3 us shorter there
 * too; not explained). With a barrier here (run 7) the same. */
__device__ __forceinline__ void select_list_prep(const Args &a, SelSmem &sm)
{
	const int tid = threadIdx.x;
	for (int i = tid; i < a.topk; i += kFThreads)
		sm.ids[i] = INT_MAX;
	for (int i = tid; i < IDX_BINS2; i += kFThreads)
		sm.u.h2[i] = 0;
	if (tid == 0)
		sm.n_t = 0, sm.n_c = 0, sm.bin = -1, sm.above = 0;
}

/* L: the row's limit (row_lim; an input, read before the wait). After select_list_prep. */
template <int PER = STRATA_INDEXER_MAX_TOPK / kFThreads> /* sort_emit's; k <= PER kFThreads */
__device__ void select_list(const Args &a, int row, int L, SelSmem &sm, FScan::TempStorage &tmp)
{
	const int k = a.topk, tid = threadIdx.x;
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SEL0);
	/* every read of the counters and the list in flight at once */
	const uint32_t nc = __ldcg(a.count + (size_t)row * IDX_CNT + 1);
	const uint32_t bw = __ldcg(a.sw + (size_t)row * IDX_SAMPW);
	const unsigned long long *cl = a.cand + (size_t)row * a.cap;
	const uint32_t pre = a.cap < (size_t)kLReg * kFThreads ? (uint32_t)a.cap : kLReg * kFThreads;
	unsigned long long ck[kLReg];
#pragma unroll
	for (int j = 0; j < kLReg; j++) {
		const uint32_t i = tid + j * kFThreads;
		ck[j] = i < pre ? __ldcg(cl + i) : 0ull;
	}
	if (L <= k) { /* nothing scored: the row's counters are untouched */
		if (tid == 0)
			publish_cut(a, row, STRATA_INDEXER_CUT_ALL);
		write_trivial(a, row, L, false);
		return;
	}
	if (tid == 0) {
		idx_trace(a.trace, IDX_T_SELLD);
		idx_trace_val(a.trace, IDX_T_NLIST, nc);
	}
	/* the calling lanes' places at one counter: one atomic a warp */
	auto warp_inc = [](uint32_t *ctr) {
		const unsigned act = __activemask();
		const int lane = (int)(threadIdx.x & 31), leader = __ffs(act) - 1;
		uint32_t base = 0;
		if (lane == leader)
			base = atomicAdd(ctr, (uint32_t)__popc(act));
		return __shfl_sync(act, base, leader) + (uint32_t)__popc(act & ((1u << lane) - 1u));
	};
	auto take = [&](unsigned long long key) {
		const uint32_t at = warp_inc(&sm.n_t);
		if (at < (uint32_t)k)
			sm.ids[at] = id_of(key), sm.sc[at] = score_of(key);
	};
	if (!(bw != 0 && nc >= (uint32_t)k && nc <= a.cap)) {
		__syncthreads();
		select_all(a.scores + (size_t)row * a.sstride, L, k, sm, tmp, take, warp_inc);
	} else {
		uint32_t base;
		int shift;
		idx_sub_bounds(idx_bucket_dev(score_of((unsigned long long)bw << 32)), &base, &shift);
		shift += 3; /* eight buckets' span */
		auto sub = [&](unsigned long long key) { return idx_sub_of((uint32_t)(key >> 32), base, shift); };
		uint32_t *h = sm.u.h2; /* zeroed by select_list_prep */
		__syncthreads();
		if (nc <= pre) {
#pragma unroll
			for (int j = 0; j < kLReg; j++)
				if (tid + j * kFThreads < (int)nc)
					atomicAdd(&h[sub(ck[j])], 1u);
		} else {
			for (uint32_t i = tid; i < nc; i += kFThreads)
				atomicAdd(&h[sub(__ldcg(cl + i))], 1u);
		}
		__syncthreads();
		uint32_t hc[IDX_BINS2 / kFThreads];
		{
			const int grp = kFThreads - 1 - tid;
#pragma unroll
			for (int b = 0; b < IDX_BINS2 / kFThreads; b++)
				hc[b] = h[grp * (IDX_BINS2 / kFThreads) + b];
		}
		find_cut_of<IDX_BINS2 / kFThreads>(hc, (uint32_t)k, tmp, &sm.bin, &sm.above);
		__syncthreads(); /* every count read: the bin's keys may take sm.u */
		if (tid == 0)
			idx_trace(a.trace, IDX_T_CUT2);
		const uint32_t b2 = (uint32_t)sm.bin; /* >= 0: nc >= k keys counted */
		const int need = k - (int)sm.above;
		auto cls_of = [&](unsigned long long key) {
			const uint32_t s2 = sub(key);
			return s2 > b2 ? 2u : s2 == b2 ? 1u : 0u;
		};
		auto put = [&](uint32_t at, unsigned long long key) {
			if (at < (uint32_t)k)
				sm.ids[at] = id_of(key), sm.sc[at] = score_of(key);
		};
		auto put_c = [&](uint32_t c, unsigned long long key) {
			if (c < (uint32_t)kCC)
				sm.u.cc[c] = key;
		};
		if (nc <= pre) { /* from registers: one warp scan for every slot's place */
			class_regs(ck, [&](int j) { return tid + j * kFThreads < (int)nc; }, cls_of,
				   &sm.n_t, &sm.n_c, put, put_c);
		} else {
			for (uint32_t i = tid; i < nc; i += kFThreads) {
				const unsigned long long key = __ldcg(cl + i);
				const uint32_t c = cls_of(key);
				if (c == 2u)
					take(key);
				else if (c == 1u)
					put_c(warp_inc(&sm.n_c), key);
			}
		}
		__syncthreads();
		if (tid == 0)
			idx_trace(a.trace, IDX_T_CLASS);
		const uint32_t nC = sm.n_c;
		if (need > 0 && nC > 0) {
			unsigned long long prefix = 0, mask = 0; /* take all: (key & 0) >= 0 */
			if (nC <= (uint32_t)kRankMax) { /* the usual case: rank each among them */
				if (tid < (int)nC) {
					const unsigned long long key = sm.u.cc[tid];
					uint32_t rank = 0;
					if ((uint32_t)need < nC)
						for (uint32_t j = 0; j < nC; j++)
							rank += sm.u.cc[j] > key;
					if (rank < (uint32_t)need)
						take(key);
				}
			} else if (nC <= (uint32_t)kCC) {
				auto each = [&](auto f) {
					for (uint32_t i = tid; i < nC; i += blockDim.x)
						f(sm.u.cc[i]);
				};
				if ((uint32_t)need < nC)
					radix_cut(each, need, sm, &prefix, &mask);
				each([&](unsigned long long key) {
					if ((key & mask) >= prefix)
						take(key);
				});
			} else { /* a crowded bin (many equal scores): from the list again */
				auto each = [&](auto f) {
					for (uint32_t i = tid; i < nc; i += blockDim.x) {
						const unsigned long long key = __ldcg(cl + i);
						if (sub(key) == b2)
							f(key);
					}
				};
				if ((uint32_t)need < nC)
					radix_cut(each, need, sm, &prefix, &mask);
				each([&](unsigned long long key) {
					if ((key & mask) >= prefix)
						take(key);
				});
			}
		}
	}
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SORT0);
	sort_emit<PER>(a, row, L, sm, tmp);
	if (tid < IDX_CNT) /* zero at rest again: every read of them is done */
		a.count[(size_t)row * IDX_CNT + tid] = 0;
	if (tid == 0) {
		a.sw[(size_t)row * IDX_SAMPW] = 0;
		idx_trace(a.trace, IDX_T_SORT1);
		idx_trace(a.trace, IDX_T_END);
	}
}

#endif
