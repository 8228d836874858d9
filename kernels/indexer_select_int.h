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
	if (tid == 0)
		sm.kmin = 0xffffffffu;
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
	if (a.kth) { /* the k-th score: a warp minimum, one shared atomic per warp */
		uint32_t mn = 0xffffffffu;
#pragma unroll
		for (int j = 0; j < PER; j++)
			if (id[j] >= 0)
				mn = min(mn, idx_ord32(sv[j]));
		mn = __reduce_min_sync(0xffffffffu, mn);
		if ((tid & 31) == 0)
			atomicMin(&sm.kmin, mn);
	}
	__syncthreads();
	if (a.kth && tid == 0) /* the hint for the next call: the row's k-th score */
		a.kth[row] = score_of((unsigned long long)sm.kmin << 32);
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
#pragma unroll
	for (int j = 0; j < PER; j++)
		if (id[j] >= 0)
			by[cnt[bk[j]] + pos[j]] = id[j];
	__syncthreads();
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

/* The select's second half, common to select_row and hint_row. On entry sm.ids/sm.sc
 * [0, above1) hold the entries of buckets above b*, the rest of [0, k) INT_MAX; h2c
 * this thread's counts of bucket b*'s second-level histogram (cut_counts layout);
 * sm.bin = -1, sm.above = sm.n_t = sm.n_c = 0, published by a barrier. each_b(f) calls
 * f(key64) for every element of bucket b* (any split over the threads). done() runs
 * once the second-level cut is known (select_row clears the row's counters there). */
template <typename EachB, typename Done>
__device__ void select_tail(const Args &a, int row, int L, uint32_t bstar, uint32_t above1,
			    const uint32_t (&h2c)[IDX_BINS2 / kFThreads], SelSmem &sm,
			    FScan::TempStorage &tmp, EachB each_b, Done done)
{
	const int k = a.topk, tid = threadIdx.x;
	uint32_t base;
	int shift;
	sub_bounds(bstar, &base, &shift);
	find_cut_of<IDX_BINS2 / kFThreads>(h2c, (uint32_t)k - above1, tmp, &sm.bin, &sm.above);
	__syncthreads();
	done();
	const int b2s = sm.bin;
	if (tid == 0)
		idx_trace(a.trace, IDX_T_CUT2);
	const uint32_t above2 = b2s < 0 ? 0 : sm.above;
	const int need = k - (int)above1 - (int)above2;

	/* bin-2 winners and bin (b*, b2*) into shared memory */
	if (b2s >= 0) {
		each_b([&](unsigned long long key) {
			uint32_t b2 = sub_of((uint32_t)(key >> 32), base, shift);
			if (b2 > (uint32_t)b2s) {
				uint32_t at = above1 + agg_inc(&sm.n_t, true);
				if (at < (uint32_t)k)
					sm.ids[at] = id_of(key), sm.sc[at] = score_of(key);
			} else if (b2 == (uint32_t)b2s) {
				uint32_t c = agg_inc(&sm.n_c, true);
				if (c < (uint32_t)kCC)
					sm.u.cc[c] = key;
			}
		});
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
		} else { /* a crowded bin (many equal scores): from each_b again */
			auto each = [&](auto f) {
				each_b([&](unsigned long long key) {
					if (sub_of((uint32_t)(key >> 32), base, shift) == (uint32_t)b2s)
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

/* Selects row `row` (limit L > k) and writes the ids in ascending order, with their
 * first-level cut (b*, above1) given (cut true) or found here from the scan's histogram.
 * Needs the filter's outputs (sel, cand, hist2, count) complete; leaves the row's
 * counters zero. Every read of the lists and counters is issued before the first
 * barrier, so they share one trip to L2. */
__device__ void select_row(const Args &a, int row, int L, bool cut, uint32_t bstar,
			   uint32_t above1, SelSmem &sm, FScan::TempStorage &tmp)
{
	constexpr int PER = STRATA_INDEXER_MAX_TOPK / kFThreads;
	const int k = a.topk, tid = threadIdx.x;
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
	if (tid == 0)
		sm.bin = -1, sm.above = 0, sm.n_t = 0, sm.n_c = 0;
	__syncthreads();
	auto each_b = [&](auto f) {
		if (nc <= pre) {
#pragma unroll
			for (int j = 0; j < kReg; j++)
				if (tid + j * kFThreads < nc)
					f(ck[j]);
		} else {
			for_each_cand(a, row, L, bstar, nc, f);
		}
	};
	/* every counter this call reads is read once the cut is found */
	select_tail(a, row, L, bstar, above1, h2c, sm, tmp, each_b, [&] { clear_row(a, row); });
}

/* The select of a hint hit (filter CTA 0 of the row): the row's hint list holds n
 * (k .. STRATA_INDEXER_HINT_CAP) keys, every entry of bucket >= the hint's, so the
 * top k are among them. Both histogram levels are counted here in shared memory. The
 * row's counters are cleared by whichever of its nblk filter CTAs counts itself done
 * last (each does so once it has read them), this one included. */
__device__ void hint_row(const Args &a, int row, int L, uint32_t n, uint32_t nblk, SelSmem &sm,
			 FScan::TempStorage &tmp)
{
	constexpr int PER = STRATA_INDEXER_HINT_CAP / kFThreads;
	constexpr int NB1 = IDX_BINS / kFThreads, NB2 = IDX_BINS2 / kFThreads;
	static_assert(IDX_BINS * 4 <= sizeof(sm.ids), "the first-level counts borrow sm.ids");
	const int k = a.topk, tid = threadIdx.x, grp = kFThreads - 1 - tid;
	const unsigned long long *hl = a.hint + (size_t)row * STRATA_INDEXER_HINT_CAP;
	unsigned long long ck[PER];
	uint32_t bk[PER];
#pragma unroll
	for (int j = 0; j < PER; j++) {
		const uint32_t i = tid + j * kFThreads;
		ck[j] = i < n ? __ldcg(hl + i) : 0ull;
	}
	if (tid == 0)
		sm.last = atomicAdd(&a.count[(size_t)row * IDX_CNT + 2], 1u) == nblk - 1;
	uint32_t *h1 = reinterpret_cast<uint32_t *>(sm.ids);
	for (int i = tid; i < IDX_BINS; i += kFThreads)
		h1[i] = 0;
	for (int i = tid; i < IDX_BINS2; i += kFThreads)
		sm.u.h2[i] = 0;
	if (tid == 0)
		sm.bin = -1, sm.above = 0, sm.n_t = 0, sm.n_c = 0;
	__syncthreads();
#pragma unroll
	for (int j = 0; j < PER; j++) {
		const bool in = tid + j * kFThreads < n;
		bk[j] = in ? idx_bucket_dev(score_of(ck[j])) : 0u;
		agg_inc(&h1[bk[j]], in);
	}
	__syncthreads();
	uint32_t c1[NB1];
#pragma unroll
	for (int b = 0; b < NB1; b++)
		c1[b] = h1[grp * NB1 + b];
	find_cut_of<NB1>(c1, (uint32_t)k, tmp, &sm.bin, &sm.above);
	__syncthreads();
	const uint32_t bstar = (uint32_t)sm.bin, above1 = sm.above; /* bin >= 0: n >= k */
	if (tid == 0) {
		idx_trace(a.trace, IDX_T_FILT1);
		publish_cut(a, row, bstar); /* the row's true cut: the list holds every bucket >= it */
	}
	for (int i = tid; i < k; i += kFThreads) /* h1 is read: sm.ids is free */
		sm.ids[i] = INT_MAX;
	uint32_t base;
	int shift;
	sub_bounds(bstar, &base, &shift);
	__syncthreads();
	/* buckets above b* to [0, above1) (n_c counts them here), b*'s by second-level bin */
#pragma unroll
	for (int j = 0; j < PER; j++) {
		const bool in = tid + j * kFThreads < n;
		const bool up = in && bk[j] > bstar, eq = in && bk[j] == bstar;
		const uint32_t at = agg_inc(&sm.n_c, up);
		if (up)
			sm.ids[at] = id_of(ck[j]), sm.sc[at] = score_of(ck[j]);
		agg_inc(&sm.u.h2[eq ? sub_of((uint32_t)(ck[j] >> 32), base, shift) : 0u], eq);
	}
	__syncthreads();
	uint32_t h2c[NB2];
#pragma unroll
	for (int b = 0; b < NB2; b++)
		h2c[b] = sm.u.h2[grp * NB2 + b];
	if (tid == 0)
		sm.bin = -1, sm.above = 0, sm.n_c = 0;
	__syncthreads();
	auto each_b = [&](auto f) {
#pragma unroll
		for (int j = 0; j < PER; j++)
			if (tid + j * kFThreads < n && bk[j] == bstar)
				f(ck[j]);
	};
	select_tail(a, row, L, bstar, above1, h2c, sm, tmp, each_b, [] {});
	if (tid == 0 && a.kth_hits)
		atomicAdd(a.kth_hits, 1u);
	if (sm.last) /* every CTA of the row has read its counters */
		clear_row(a, row);
}

#endif
