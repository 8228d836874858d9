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
 * The scan listed, in the row's bitmap, a set of ids that holds the row's top k (every id
 * whose bucket is at least a lower bound of b*), so the row's top k is the list's top k.
 * One CTA of 1024 threads a row (a one-CTA path is bound by its instructions a warp:
 * every step here is spread over all the threads, loops are not unrolled past what
 * their loads need, and the code stays small, since it runs with cold caches):
 * 1. one trip for the bitmap words (8 a thread: ids 256 t .. 256 t + 255 of a block of
 *    262,144 ids), one block scan of their bit counts, and each thread writes its listed
 *    ids, in id order, at its place in the list;
 * 2. a second trip for the listed ids' scores, counted by bucket (h1); the cut of h1 is
 *    b*, and when bucket b* holds more than the need = k - (count above it), its keys are
 *    counted by sub-bin (h2, idx_sub_of) for a second cut; the keys of that sub-bin are
 *    ranked one against another (or radix-selected, when there are many);
 * 3. one more block scan compacts the taken ids, in id order, to the output.
 * No sort: the bitmap gives the id order. A list longer than kBmCap (a sample too small
 * for a cut, a crowd of equal scores) takes bm_wide, which reads every score. */
constexpr int kBmT = 1024;                 /* threads */
constexpr int kBmW = 8;                    /* bitmap words a thread a block */
constexpr int kBmBlock = kBmW * kBmT;      /* words a block: 262,144 ids */
constexpr int kBmCap = 8192;               /* listed ids resolved in shared memory */
constexpr int kBmPer = kBmCap / kBmT;      /* list entries a thread */
constexpr int kBmRank = kBmT;              /* cut-bin keys ranked one against another */
static_assert(IDX_BINS % kBmT == 0 && IDX_BINS2 % kBmT == 0 && kBmPer <= 32, "shapes");

struct BmSmem {
	int32_t id[kBmCap];     /* the listed ids, ascending */
	union {
		float sc[kBmCap];       /* their scores */
		uint32_t wd[kBmBlock];  /* before: a block's bitmap words */
	};
	uint32_t h1[IDX_BINS];  /* the listed scores by bucket */
	uint32_t h2[IDX_BINS2]; /* bucket b*'s by sub-bin */
	unsigned long long cc[kBmRank]; /* the keys of the cut sub-bin */
	uint16_t cpos[kBmRank];  /* and their places in id[] */
	uint8_t win[kBmCap];     /* cut sub-bin entries: taken */
	uint32_t ws[kBmT / 32]; /* bm_scan's warp sums */
	uint32_t h256[256]; /* radix_cut */
	int digit, dcnt;
	uint32_t dabove;
	int bin;
	uint32_t above, at, nc;
};

/* Exclusive prefix sum of v over the block in thread order (x) and the block's total
 * (y). One copy of the code for every scan of the select: the select runs with cold
 * instruction caches, where each distinct instruction costs more than its execution.
 * Two barriers; ws is free again after it returns. */
__device__ __noinline__ uint2 bm_scan(uint32_t v, uint32_t *ws)
{
	const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
	uint32_t x = v;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		const uint32_t t = __shfl_up_sync(0xffffffffu, x, o);
		if (lane >= o)
			x += t;
	}
	if (lane == 31)
		ws[warp] = x;
	__syncthreads();
	const uint32_t y = ws[lane]; /* 32 warps: lane l holds warp l's sum */
	uint32_t z = y;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		const uint32_t t = __shfl_up_sync(0xffffffffu, z, o);
		if (lane >= o)
			z += t;
	}
	const uint32_t before = __shfl_sync(0xffffffffu, z - y, warp);
	const uint32_t total = __shfl_sync(0xffffffffu, z, 31);
	__syncthreads();
	return make_uint2(before + x - v, total);
}
static_assert(kBmT == 32 * 32, "bm_scan: 32 warps");

/* The cut of an smem histogram of nb * kBmT bins (nb <= 4): the highest bin b with
 * count(>= b) >= need to sm.bin (-1: none), count(> b) to sm.above, count(b) to sm.at.
 * The caller has synchronised after the histogram's last add and after every read of
 * the last cut's words; synchronises after. */
__device__ __noinline__ void bm_cut(const uint32_t *h, int nb, uint32_t need, BmSmem &sm)
{
	const int grp = kBmT - 1 - (int)threadIdx.x; /* thread t: bins nb (1023 - t) .. */
	if (threadIdx.x == 0)
		sm.bin = -1;
	uint32_t c[4], sum = 0;
#pragma unroll
	for (int b = 0; b < 4; b++) {
		c[b] = b < nb ? h[nb * grp + b] : 0u;
		sum += c[b];
	}
	uint32_t acc = bm_scan(sum, sm.ws).x; /* its barriers order sm.bin's reset */
#pragma unroll
	for (int b = 3; b >= 0; b--) {
		if (b < nb && acc < need && acc + c[b] >= need) {
			sm.bin = nb * grp + b;
			sm.above = acc;
			sm.at = c[b];
		}
		acc += c[b];
	}
	__syncthreads();
}

__device__ __forceinline__ void bm_pad(const Args &a, int row, uint32_t from)
{
	const int k = a.topk;
	int32_t *oid = a.out_ids + (size_t)row * k;
	float *osc = a.out_scores ? a.out_scores + (size_t)row * k : nullptr;
	for (int i = (int)from + (int)threadIdx.x; i < k; i += kBmT) {
		oid[i] = -1;
		if (osc)
			osc[i] = 0.0f;
	}
}

/* The wide path: no list, every score read (h1 zero, sm.bin -1 on entry): counted by
 * bucket for b*, then bucket > b* taken, and of bucket b* the need largest keys (a radix
 * select), written in id order 16 consecutive ids a thread at a time. */
__device__ __forceinline__ void bm_wide(const Args &a, int row, int L, BmSmem &sm)
{
	const int k = a.topk, tid = threadIdx.x;
	const float *sc = a.scores + (size_t)row * a.sstride;
	/* f(score, id) for every score, 8 reads a thread in flight at a time */
	auto every = [&](auto f) {
		for (int j0 = 0; j0 < L; j0 += 8 * kBmT) {
			float s[8];
#pragma unroll
			for (int u = 0; u < 8; u++) {
				const int j = j0 + u * kBmT + tid;
				s[u] = j < L ? __ldcg(sc + j) : 0.0f;
			}
#pragma unroll
			for (int u = 0; u < 8; u++)
				if (j0 + u * kBmT + tid < L)
					f(s[u], j0 + u * kBmT + tid);
		}
	};
	every([&](float s, int) { atomicAdd(&sm.h1[idx_bucket_dev(s)], 1u); });
	__syncthreads();
	bm_cut(sm.h1, IDX_BINS / kBmT, (uint32_t)k, sm);
	if (sm.bin < 0) { /* cannot happen: L > k scores counted */
		write_trivial(a, row, L, true);
		return;
	}
	const uint32_t bstar = (uint32_t)sm.bin, hb = sm.at;
	const int need = k - (int)sm.above;
	if (tid == 0)
		publish_cut(a, row, bstar);
	unsigned long long prefix = 0, mask = 0; /* all of bucket b*: (key & 0) >= 0 */
	if ((uint32_t)need < hb) {
		auto each = [&](auto f) {
			every([&](float s, int j) {
				if (idx_bucket_dev(s) == bstar)
					f((unsigned long long)idx_key64(s, j));
			});
		};
		radix_cut(each, need, sm, &prefix, &mask);
	}
	int32_t *oid = a.out_ids + (size_t)row * k;
	float *osc = a.out_scores ? a.out_scores + (size_t)row * k : nullptr;
	uint32_t base = 0;
	for (int j0 = 0; j0 < L; j0 += kBmT * 16) {
		const int j1 = j0 + 16 * tid;
		uint32_t take = 0;
		float s[16];
#pragma unroll
		for (int u = 0; u < 16; u++)
			s[u] = j1 + u < L ? __ldcg(sc + j1 + u) : 0.0f;
#pragma unroll
		for (int u = 0; u < 16; u++) {
			const uint32_t b = idx_bucket_dev(s[u]);
			take |= (uint32_t)(j1 + u < L &&
					   (b > bstar || (b == bstar &&
							  ((unsigned long long)idx_key64(s[u], j1 + u) & mask) >=
								  prefix)))
				<< u;
		}
		const uint2 sc2 = bm_scan((uint32_t)__popc(take), sm.ws);
		uint32_t at = sc2.x;
		const uint32_t total = sc2.y;
		for (at += base; take; take &= take - 1, at++) {
			const int j = j1 + __ffs(take) - 1;
			if (at < (uint32_t)k) {
				oid[at] = j;
				if (osc)
					osc[at] = __ldcg(sc + j);
			}
		}
		base += total;
	}
	bm_pad(a, row, base);
}

/* grid n_rows: the select after a bitmap-tailed scan (its programmatic dependent). Leaves
 * the row's sample words zero. */
__global__ void __launch_bounds__(kBmT) select_bm_kernel(Args a)
{
	extern __shared__ uint4 bm_smem_raw[];
	BmSmem &sm = *reinterpret_cast<BmSmem *>(bm_smem_raw);
	const int row = (int)blockIdx.x, tid = threadIdx.x, k = a.topk;
	idx_pdl_wait();
	if (tid == 0) {
		idx_trace(a.trace, IDX_T_SEL0);
		sm.nc = 0;
		sm.bin = -1;
	}
	const int L = row_lim(a, row);
	if (L <= k) { /* nothing scored: the row's counters are untouched */
		if (tid == 0)
			publish_cut(a, row, STRATA_INDEXER_CUT_ALL);
		write_trivial(a, row, L, false);
		return;
	}
	{
		const uint4 z = make_uint4(0, 0, 0, 0);
		static_assert(IDX_FLAGS / 4 <= kBmT, "the sample words: one uint4 a thread");
		if (tid < IDX_FLAGS / 4) /* every scan CTA read them before the scan ended */
			reinterpret_cast<uint4 *>(a.flag + (size_t)row * IDX_FLAGS)[tid] = z;
		for (int i = tid; i < IDX_BINS / 4; i += kBmT)
			reinterpret_cast<uint4 *>(sm.h1)[i] = z;
		for (int i = tid; i < IDX_BINS2 / 4; i += kBmT)
			reinterpret_cast<uint4 *>(sm.h2)[i] = z;
	}
	const uint32_t *bm = a.bmap + (size_t)row * a.bm_stride;
	const int nw = (L + 31) >> 5;
	uint32_t nlist = 0; /* listed ids in the blocks before this one */
	for (int w0 = 0; w0 < nw; w0 += kBmBlock) {
		const int wt = w0 + kBmW * tid; /* this thread's first word */
		uint32_t pc = 0;
		uint4 *wd4 = reinterpret_cast<uint4 *>(sm.wd + kBmW * tid);
#pragma unroll
		for (int q = 0; q < kBmW / 4; q++) {
			uint4 v = make_uint4(0, 0, 0, 0);
			if (wt + 4 * q < nw)
				v = __ldcg(reinterpret_cast<const uint4 *>(bm + wt + 4 * q));
			/* past the row: a stale word of an earlier call */
			v.y = wt + 4 * q + 1 < nw ? v.y : 0u;
			v.z = wt + 4 * q + 2 < nw ? v.z : 0u;
			v.w = wt + 4 * q + 3 < nw ? v.w : 0u;
			pc += (uint32_t)(__popc(v.x) + __popc(v.y) + __popc(v.z) + __popc(v.w));
			wd4[q] = v;
		}
		const uint2 sc2 = bm_scan(pc, sm.ws);
		uint32_t at = nlist + sc2.x;
		for (int q = 0; q < kBmW; q++) /* not unrolled: a few bits a thread */
			for (uint32_t x = sm.wd[kBmW * tid + q]; x; x &= x - 1, at++)
				if (at < (uint32_t)kBmCap)
					sm.id[at] = 32 * (wt + q) + __ffs(x) - 1;
		nlist += sc2.y;
		__syncthreads(); /* the list written; wd is reused */
	}
	if (tid == 0)
		idx_count(a.trace, IDX_C_LIST, nlist);
	if (nlist > (uint32_t)kBmCap) {
		bm_wide(a, row, L, sm);
		if (tid == 0)
			idx_trace(a.trace, IDX_T_END);
		return;
	}
	const int n = (int)nlist;
	/* the listed ids' scores, in flight together, counted by bucket */
	const float *scr = a.scores + (size_t)row * a.sstride;
	for (int i = tid; i < n; i += 2 * kBmT) { /* two reads in flight */
		const int i2 = i + kBmT;
		const float s0 = __ldcg(scr + sm.id[i]);
		const float s1 = i2 < n ? __ldcg(scr + sm.id[i2]) : 0.0f;
		sm.sc[i] = s0;
		atomicAdd(&sm.h1[idx_bucket_dev(s0)], 1u);
		if (i2 < n) {
			sm.sc[i2] = s1;
			atomicAdd(&sm.h1[idx_bucket_dev(s1)], 1u);
		}
	}
	__syncthreads();
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SELLD);
	bm_cut(sm.h1, IDX_BINS / kBmT, (uint32_t)k, sm);
	const int bin = sm.bin;
	if (bin < 0) { /* cannot happen: the list holds the top k */
		write_trivial(a, row, L, true);
		return;
	}
	const uint32_t bstar = (uint32_t)bin, hb = sm.at;
	const int need = k - (int)sm.above; /* >= 1 */
	if (tid == 0) {
		publish_cut(a, row, bstar); /* top-k is far from done: early staging may start */
		idx_count(a.trace, IDX_C_NB, hb);
	}
	uint32_t base = 0;
	int shift = 0;
	idx_sub_bounds(bstar, &base, &shift);
	int b2 = -1, mode = 0; /* 0: all of bucket b*; 1: sub-bins >= b2; 2: > b2, win in b2 */
	if ((uint32_t)need < hb) {
		for (int i = tid; i < n; i += kBmT)
			if (idx_bucket_dev(sm.sc[i]) == bstar)
				atomicAdd(&sm.h2[idx_sub_of(idx_ord32(sm.sc[i]), base, shift)], 1u);
		__syncthreads();
		bm_cut(sm.h2, IDX_BINS2 / kBmT, (uint32_t)need, sm);
		b2 = sm.bin; /* >= 0: bucket b* holds more than need */
		const uint32_t n2 = sm.at;
		const int need2 = need - (int)sm.above;
		mode = 1;
		if ((uint32_t)need2 < n2) {
			mode = 2;
			auto in_cut = [&](int i) {
				return idx_bucket_dev(sm.sc[i]) == bstar &&
				       idx_sub_of(idx_ord32(sm.sc[i]), base, shift) == (uint32_t)b2;
			};
			if (n2 <= (uint32_t)kBmRank) {
				for (int i = tid; i < n; i += kBmT)
					if (in_cut(i)) {
						const uint32_t c = atomicAdd(&sm.nc, 1u);
						sm.cc[c] = (unsigned long long)idx_key64(sm.sc[i], sm.id[i]);
						sm.cpos[c] = (uint16_t)i;
					}
				__syncthreads();
				/* rank: P threads a key (a power of two, lanes of one warp), each
				 * counting the keys above it in a share of the others */
				int P = 1;
				while (P < 32 && (uint32_t)(2 * P) * n2 <= (uint32_t)kBmT)
					P *= 2;
				const uint32_t c = (uint32_t)tid / (uint32_t)P, sub = (uint32_t)tid % (uint32_t)P;
				const unsigned long long key = c < n2 ? sm.cc[c] : 0ull;
				uint32_t r = 0;
				if (c < n2)
					for (uint32_t j = sub; j < n2; j += (uint32_t)P)
						r += sm.cc[j] > key;
				for (int o = 1; o < P; o <<= 1)
					r += __shfl_xor_sync(0xffffffffu, r, o);
				if (c < n2 && sub == 0)
					sm.win[sm.cpos[c]] = r < (uint32_t)need2;
			} else { /* a crowded sub-bin: a radix select over its keys */
				auto each = [&](auto f) {
					for (int i = tid; i < n; i += kBmT)
						if (in_cut(i))
							f((unsigned long long)idx_key64(sm.sc[i], sm.id[i]));
				};
				unsigned long long prefix, mask;
				radix_cut(each, need2, sm, &prefix, &mask);
				for (int i = tid; i < n; i += kBmT)
					if (in_cut(i))
						sm.win[i] = ((unsigned long long)idx_key64(sm.sc[i], sm.id[i]) &
							     mask) >= prefix;
			}
			__syncthreads();
			if (tid == 0)
				idx_count(a.trace, IDX_C_NC, n2);
		}
	}
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SORT0);
	/* compaction in id order: thread t its E consecutive entries (every thread busy) */
	const int E = (n + kBmT - 1) / kBmT, i0 = E * tid;
	uint32_t take = 0;
	for (int u = 0; u < E && i0 + u < n; u++) {
		const float v = sm.sc[i0 + u];
		const uint32_t b = idx_bucket_dev(v);
		bool t = b > bstar;
		if (b == bstar) {
			const uint32_t q = mode ? idx_sub_of(idx_ord32(v), base, shift) : 0u;
			t = mode == 0 || q > (uint32_t)b2 ||
			    (q == (uint32_t)b2 && (mode == 1 || sm.win[i0 + u]));
		}
		take |= (uint32_t)t << u;
	}
	const uint2 sc2 = bm_scan((uint32_t)__popc(take), sm.ws);
	uint32_t at = sc2.x;
	const uint32_t total = sc2.y;
	int32_t *oid = a.out_ids + (size_t)row * k;
	float *osc = a.out_scores ? a.out_scores + (size_t)row * k : nullptr;
	for (; take; take &= take - 1, at++) {
		const int i = i0 + __ffs(take) - 1;
		if (at < (uint32_t)k) {
			oid[at] = sm.id[i];
			if (osc)
				osc[at] = sm.sc[i];
		}
	}
	bm_pad(a, row, total);
	if (tid == 0)
		idx_trace(a.trace, IDX_T_END);
}

#endif
