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
 * of the (unique) keys `each` enumerates. `need` >= 1. sm: SelSmem or BmSmem (h256,
 * digit, dabove, dcnt). */
template <typename E, typename S>
__device__ void radix_cut(E each, int need, S &sm, unsigned long long *prefix_out,
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

/* Sorts the row's selected ids (sm.ids[0..k), INT_MAX where unfilled) ascending and
 * writes them, -1 padded, with their scores. A counting sort on the ids' top 11 bits
 * (2048 buckets, positions by a block scan) then, inside each bucket, rank by counting
 * the bucket's smaller ids: a few barriers instead of a bitonic network's 45, and a
 * bucket spans at most max(1, L / 2048) ids, which bounds the counting loop. */
__device__ void sort_emit(const Args &a, int row, int L, SelSmem &sm, FScan::TempStorage &tmp)
{
	constexpr int NB = 2048, PER = STRATA_INDEXER_MAX_TOPK / kFThreads;
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

/* Selects row `row` (limit L > k; L < 0: read here, with the lists, and a row with L <=
 * k written 0 .. L-1) and writes the ids in ascending order, with their first-level cut
 * (b*, above1) given (cut true) or found here (a fused scan's count slots, else the
 * scan's histogram). Needs the filter's outputs (sel, cand, hist2, count) complete;
 * leaves the row's counters zero. Every read of the lists and counters is issued before
 * the first barrier, so they share one trip to L2. */
__device__ void select_row(const Args &a, int row, int L, bool cut, uint32_t bstar,
			   uint32_t above1, SelSmem &sm, FScan::TempStorage &tmp)
{
	constexpr int PER = STRATA_INDEXER_MAX_TOPK / kFThreads;
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
	uint32_t base;
	int shift;
	idx_sub_bounds(bstar, &base, &shift);
#pragma unroll
	for (int j = 0; j < PER; j++) {
		const int i = tid + j * kFThreads;
		if (i < k) {
			sm.ids[i] = i < (int)above1 ? id_of(sk[j]) : INT_MAX;
			sm.sc[i] = score_of(sk[j]);
		}
	}
	if (tid == 0) {
		sm.bin = -1, sm.above = 0, sm.n_t = 0, sm.n_c = 0;
		idx_trace(a.trace, IDX_T_SELLD);
	}
	__syncthreads();
	find_cut_of<IDX_BINS2 / kFThreads>(h2c, (uint32_t)k - above1, tmp, &sm.bin, &sm.above);
	__syncthreads();
	clear_row(a, row); /* every counter this call reads is read */
	const int b2s = sm.bin;
	if (tid == 0)
		idx_trace(a.trace, IDX_T_CUT2);
	const uint32_t above2 = b2s < 0 ? 0 : sm.above;
	const int need = k - (int)above1 - (int)above2;

	/* bin-2 winners and bin (b*, b2*) into shared memory */
	if (b2s >= 0) {
		auto classify = [&](unsigned long long key) {
			uint32_t b2 = idx_sub_of((uint32_t)(key >> 32), base, shift);
			if (b2 > (uint32_t)b2s) {
				uint32_t at = above1 + agg_inc(&sm.n_t, true);
				if (at < (uint32_t)k)
					sm.ids[at] = id_of(key), sm.sc[at] = score_of(key);
			} else if (b2 == (uint32_t)b2s) {
				uint32_t c = agg_inc(&sm.n_c, true);
				if (c < (uint32_t)kCC)
					sm.u.cc[c] = key;
			}
		};
		if (nc <= pre) {
#pragma unroll
			for (int j = 0; j < kReg; j++)
				if (tid + j * kFThreads < nc)
					classify(ck[j]);
		} else {
			for_each_cand(a, row, L, bstar, nc, classify);
		}
	}
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_CLASS);
	const uint32_t nC = sm.n_c;
	auto take = [&](unsigned long long key) {
		uint32_t at = above1 + agg_inc(&sm.n_t, true);
		if (at < (uint32_t)k)
			sm.ids[at] = id_of(key), sm.sc[at] = score_of(key);
	};
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
		} else { /* a crowded bin (many equal scores): straight from global memory */
			auto each = [&](auto f) {
				for_each_cand(a, row, L, bstar, nc, [&](unsigned long long key) {
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
	sort_emit(a, row, L, sm, tmp);
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SORT1);
	if (tid == 0)
		idx_trace(a.trace, IDX_T_END);
}

/* ---- the select after a bitmap-tailed scan (indexer_wgmma.cu bm_tail) ----------------
 * The scan listed, in the row's bitmap, a superset of the row's top k: every id whose
 * bucket is at least a lower bound of b*. One CTA a row:
 * 1. one trip: the row's histogram and bitmap words (16 a thread: ids 512 t .. 512 t +
 *    511 of a block of 262,144), then one block scan of both (the histogram's counts
 *    from the top bucket down, the words' bit counts in id order) gives b*, the count
 *    above it, and each thread's place in the list of listed ids, written in id order;
 * 2. a second trip reads the listed ids' scores: bucket > b* is taken, bucket < b* is
 *    not, and the need = k - above ids of bucket b* with the largest (score, id) keys
 *    are found by rank (each key counted against the others) or a radix select;
 * 3. one more block scan compacts the taken ids, in id order, to the output.
 * No sort: the bitmap gives the id order. Lists longer than kBmCap (a sample too small
 * for a cut, a crowd of equal scores) take bm_wide, which reads every score. */
constexpr int kBmW = 16;                   /* bitmap words a thread a block */
constexpr int kBmBlock = kBmW * kFThreads; /* words a block: 262,144 ids */
constexpr int kBmCap = 8192;               /* listed ids resolved in shared memory */
constexpr int kBmRank = kFThreads;         /* bucket-b* keys ranked one against another */
typedef cub::BlockScan<unsigned long long, kFThreads> BScan64;

struct BmSmem {
	int32_t id[kBmCap];     /* the listed ids, ascending */
	float sc[kBmCap];       /* their scores */
	unsigned long long bk[kBmRank]; /* the keys of bucket b* among them */
	uint16_t bpos[kBmRank];  /* and their places in id[] */
	uint8_t keep[kBmCap];
	union {
		BScan64::TempStorage s64;
		FScan::TempStorage s32;
	} tmp;
	uint32_t h256[256]; /* radix_cut */
	int digit, dcnt;
	uint32_t dabove;
	int bin;
	uint32_t above, hb, nb;
};

/* Zeroes the row's histograms (hist, hist0): each thread its own 4 bins of each, which it
 * has read. */
__device__ __forceinline__ void bm_clear(const Args &a, int row)
{
	const uint4 z = make_uint4(0, 0, 0, 0);
	const int at = 4 * (kFThreads - 1 - (int)threadIdx.x);
	*reinterpret_cast<uint4 *>(a.hist + (size_t)row * IDX_BINS + at) = z;
	*reinterpret_cast<uint4 *>(a.hist0 + (size_t)row * IDX_BINS + at) = z;
}

/* Writes the taken ids (this thread's n of them at this thread's place, from the block
 * scan) and returns the block's count. */
__device__ __forceinline__ uint32_t bm_emit_scan(uint32_t n, BmSmem &sm, uint32_t *at)
{
	uint32_t total;
	FScan(sm.tmp.s32).ExclusiveSum(n, *at, total);
	__syncthreads(); /* tmp is reused */
	return total;
}

/* The wide path: no list, every score read. Takes bucket > b*, and of bucket b* (hb
 * scores) the need largest keys, found by a radix select over the scores. */
__device__ void bm_wide(const Args &a, int row, int L, uint32_t bstar, int need, uint32_t hb,
			BmSmem &sm)
{
	const int k = a.topk, tid = threadIdx.x;
	const float *sc = a.scores + (size_t)row * a.sstride;
	unsigned long long prefix = 0, mask = 0; /* all of bucket b*: (key & 0) >= 0 */
	if ((uint32_t)need < hb) {
		auto each = [&](auto f) {
			for (int j = tid; j < L; j += kFThreads) {
				const float s = __ldcg(sc + j);
				if (idx_bucket_dev(s) == bstar)
					f((unsigned long long)idx_key64(s, j));
			}
		};
		radix_cut(each, need, sm, &prefix, &mask);
	}
	int32_t *oid = a.out_ids + (size_t)row * k;
	float *osc = a.out_scores ? a.out_scores + (size_t)row * k : nullptr;
	uint32_t base = 0;
	for (int j0 = 0; j0 < L; j0 += kFThreads * 16) { /* 16 consecutive ids a thread */
		const int j1 = j0 + 16 * tid;
		float s[16];
		uint32_t take = 0, n = 0;
#pragma unroll
		for (int u = 0; u < 16; u++) {
			s[u] = j1 + u < L ? __ldcg(sc + j1 + u) : 0.0f;
			const uint32_t b = idx_bucket_dev(s[u]);
			const bool t = j1 + u < L &&
				       (b > bstar || (b == bstar &&
						      ((unsigned long long)idx_key64(s[u], j1 + u) & mask) >= prefix));
			take |= (uint32_t)t << u;
			n += t;
		}
		uint32_t at;
		const uint32_t total = bm_emit_scan(n, sm, &at);
		at += base;
#pragma unroll
		for (int u = 0; u < 16; u++)
			if (take >> u & 1) {
				if (at < (uint32_t)k) {
					oid[at] = j1 + u;
					if (osc)
						osc[at] = s[u];
				}
				at++;
			}
		base += total;
	}
	for (int i = (int)base + tid; i < k; i += kFThreads) {
		oid[i] = -1;
		if (osc)
			osc[i] = 0.0f;
	}
}

/* grid n_rows: the select after a bitmap-tailed scan (its programmatic dependent). */
__global__ void __launch_bounds__(kFThreads) select_bm_kernel(Args a)
{
	extern __shared__ uint4 bm_smem_raw[];
	BmSmem &sm = *reinterpret_cast<BmSmem *>(bm_smem_raw);
	const int row = (int)blockIdx.x, tid = threadIdx.x, lane = tid & 31, k = a.topk;
	idx_pdl_wait();
	if (tid == 0) {
		idx_trace(a.trace, IDX_T_SEL0);
		sm.bin = -1, sm.above = 0, sm.hb = 0, sm.nb = 0;
	}
	const int L = row_lim(a, row);
	if (L <= k) { /* nothing scored: the row's counters are untouched */
		if (tid == 0)
			publish_cut(a, row, STRATA_INDEXER_CUT_ALL);
		write_trivial(a, row, L, false);
		return;
	}
	const int grp = kFThreads - 1 - tid; /* thread t: bins 4 (511 - t) .. + 3 */
	const uint4 hv = __ldcg(reinterpret_cast<const uint4 *>(a.hist + (size_t)row * IDX_BINS) + grp);
	const uint32_t *bm = a.bmap + (size_t)row * a.bm_stride;
	const int nw = (L + 31) >> 5;
	__syncthreads(); /* sm's words set */
	uint32_t nlist = 0; /* listed ids so far (all blocks before this one) */
	for (int w0 = 0; w0 < nw; w0 += kBmBlock) {
		const int wt = w0 + kBmW * tid; /* this thread's first word */
		uint32_t w[kBmW], pc = 0;
#pragma unroll
		for (int q = 0; q < kBmW / 4; q++) {
			uint4 v = make_uint4(0, 0, 0, 0);
			if (wt + 4 * q < nw)
				v = __ldcg(reinterpret_cast<const uint4 *>(bm + wt + 4 * q));
			w[4 * q] = v.x, w[4 * q + 1] = wt + 4 * q + 1 < nw ? v.y : 0u;
			w[4 * q + 2] = wt + 4 * q + 2 < nw ? v.z : 0u;
			w[4 * q + 3] = wt + 4 * q + 3 < nw ? v.w : 0u;
		}
#pragma unroll
		for (int q = 0; q < kBmW; q++)
			pc += (uint32_t)__popc(w[q]);
		/* block 0 scans the histogram too: counts high, bit counts low */
		const uint32_t hs = w0 ? 0u : hv.x + hv.y + hv.z + hv.w;
		unsigned long long ex, agg;
		BScan64(sm.tmp.s64).ExclusiveSum((unsigned long long)hs << 32 | pc, ex, agg);
		if (!w0) {
			uint32_t above = (uint32_t)(ex >> 32);
			const uint32_t c[4] = { hv.x, hv.y, hv.z, hv.w };
#pragma unroll
			for (int b = 3; b >= 0; b--) {
				if (above < (uint32_t)k && above + c[b] >= (uint32_t)k) {
					sm.bin = 4 * grp + b;
					sm.above = above;
					sm.hb = c[b];
				}
				above += c[b];
			}
		}
		uint32_t at = nlist + (uint32_t)ex;
#pragma unroll
		for (int q = 0; q < kBmW; q++) {
			uint32_t x = w[q];
			while (x) {
				const int b = __ffs(x) - 1;
				x &= x - 1;
				if (at < (uint32_t)kBmCap)
					sm.id[at] = 32 * (wt + q) + b;
				at++;
			}
		}
		nlist += (uint32_t)agg;
		__syncthreads(); /* tmp is reused; the list and the cut written */
	}
	const int bin = sm.bin;
	bm_clear(a, row); /* every read of the histograms is done */
	if (bin < 0) { /* an inconsistent histogram (cannot happen with L > k counted) */
		write_trivial(a, row, L, true);
		return;
	}
	const uint32_t bstar = (uint32_t)bin, above1 = sm.above;
	const int need = k - (int)above1; /* >= 1 */
	if (tid == 0) {
		publish_cut(a, row, bstar); /* top-k is far from done: early staging may start */
		idx_trace(a.trace, IDX_T_SELLD);
	}
	if (nlist > (uint32_t)kBmCap) {
		bm_wide(a, row, L, bstar, need, sm.hb, sm);
		if (tid == 0)
			idx_trace(a.trace, IDX_T_END);
		return;
	}
	const int n = (int)nlist;
	/* the listed ids' scores, in flight together */
	const float *scr = a.scores + (size_t)row * a.sstride;
	constexpr int PER = kBmCap / kFThreads;
	float s[PER];
#pragma unroll
	for (int u = 0; u < PER; u++) {
		const int i = tid + u * kFThreads;
		s[u] = i < n ? __ldcg(scr + sm.id[i]) : 0.0f;
	}
#pragma unroll
	for (int u = 0; u < PER; u++) {
		const int i = tid + u * kFThreads;
		if (i >= n)
			break;
		const uint32_t b = idx_bucket_dev(s[u]);
		sm.sc[i] = s[u];
		sm.keep[i] = b > bstar;
		if (b == bstar) {
			const uint32_t c = agg_inc(&sm.nb, true);
			if (c < (uint32_t)kBmRank) {
				sm.bk[c] = (unsigned long long)idx_key64(s[u], sm.id[i]);
				sm.bpos[c] = (uint16_t)i;
			}
		}
	}
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_CLASS);
	const uint32_t nb = sm.nb;
	if (nb <= (uint32_t)need) { /* all of bucket b* (nb == need: the list holds it all) */
		if (nb <= (uint32_t)kBmRank) {
			for (uint32_t c = tid; c < nb; c += kFThreads)
				sm.keep[sm.bpos[c]] = 1;
		} else {
			for (int i = tid; i < n; i += kFThreads)
				if (idx_bucket_dev(sm.sc[i]) == bstar)
					sm.keep[i] = 1;
		}
	} else if (nb <= (uint32_t)kBmRank) {
		/* rank: P threads a key (a power of two, lanes of one warp), each counting the
		 * keys above it in a share of the others */
		int P = 1;
		while (P < 32 && (uint32_t)(2 * P) * nb <= (uint32_t)kFThreads)
			P *= 2;
		const uint32_t c = (uint32_t)tid / (uint32_t)P, sub = (uint32_t)tid % (uint32_t)P;
		const unsigned long long key = c < nb ? sm.bk[c] : 0ull;
		uint32_t r = 0;
		if (c < nb)
			for (uint32_t j = sub; j < nb; j += (uint32_t)P)
				r += sm.bk[j] > key;
		for (int o = 1; o < P; o <<= 1)
			r += __shfl_xor_sync(0xffffffffu, r, o);
		if (c < nb && sub == 0 && r < (uint32_t)need)
			sm.keep[sm.bpos[c]] = 1;
		(void)lane;
	} else { /* a crowded bucket: a radix select over the list's bucket-b* keys */
		auto each = [&](auto f) {
			for (int i = tid; i < n; i += kFThreads)
				if (idx_bucket_dev(sm.sc[i]) == bstar)
					f((unsigned long long)idx_key64(sm.sc[i], sm.id[i]));
		};
		unsigned long long prefix, mask;
		radix_cut(each, need, sm, &prefix, &mask);
		for (int i = tid; i < n; i += kFThreads)
			if (idx_bucket_dev(sm.sc[i]) == bstar &&
			    ((unsigned long long)idx_key64(sm.sc[i], sm.id[i]) & mask) >= prefix)
				sm.keep[i] = 1;
	}
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SORT0);
	/* compaction in id order: thread t its E consecutive entries */
	const int E = (n + kFThreads - 1) / kFThreads, i0 = E * tid;
	uint32_t cnt = 0;
	for (int e = 0; e < E; e++)
		cnt += i0 + e < n ? sm.keep[i0 + e] : 0u;
	uint32_t at;
	const uint32_t total = bm_emit_scan(cnt, sm, &at);
	int32_t *oid = a.out_ids + (size_t)row * k;
	float *osc = a.out_scores ? a.out_scores + (size_t)row * k : nullptr;
	for (int e = 0; e < E; e++) {
		const int i = i0 + e;
		if (i < n && sm.keep[i]) {
			if (at < (uint32_t)k) {
				oid[at] = sm.id[i];
				if (osc)
					osc[at] = sm.sc[i];
			}
			at++;
		}
	}
	for (int i = (int)total + tid; i < k; i += kFThreads) {
		oid[i] = -1;
		if (osc)
			osc[i] = 0.0f;
	}
	if (tid == 0)
		idx_trace(a.trace, IDX_T_END);
}

#endif
