/*
 * Private to kernels/indexer.cu: the filter and select of a row by one thread-block
 * cluster (filter_cl_kernel), and the host's rule for when and how large
 * (filter_cluster). Included by indexer.cu inside its anonymous namespace, after
 * filter_cut, filter_rounds, select_finish, the cut helpers and samp_env, which it uses;
 * not a header of its own.
 *
 * filter_kernel's CTAs of a row meet in global memory: each takes its places in the
 * row's lists by an L2 atomic a round, writes its entries there, flushes its bin-2
 * counts by L2 atomics and arrives at the row's done counter; the last to arrive reads
 * the lists and counts back through L2 and selects. Here the row's CTAs are one cluster
 * (grid (C, n_rows), cluster (C, 1, 1)) and meet in the shared memory of its first CTA,
 * the leader: the places are atomics on its counter, the selected ids and scores go
 * straight into its select arrays, the bucket-b* keys into its candidate list (the
 * first kClLoc; past them into the row's global list, then nowhere: the select falls
 * back to the scores as filter_kernel's does), the bin-2 counts into its histogram; one
 * cluster barrier (release, acquire) then hands the leader everything, and it selects
 * without reading L2 for any of it. A first barrier, split around the cut, orders the
 * leader's set-up before everyone's adds.
 */
#ifndef STRATA_KERNELS_INDEXER_CLUSTER_INT_H
#define STRATA_KERNELS_INDEXER_CLUSTER_INT_H

constexpr int kClLoc = 1024; /* bucket-b* keys the leader holds in shared memory */
constexpr int kClMax = 16;   /* CTAs a cluster at most (above 8: a non-portable size) */

struct ClSmem {
	SelSmem s;                     /* the leader's: h2 (the row's), ids, sc; everyone's scalars */
	unsigned long long cl[kClLoc]; /* the leader's: the row's first bucket-b* keys */
	unsigned long long cnt;        /* the leader's: the lists' counts (selected low, cand high) */
};

/* Clusters are sm_90's: built for an older GPU, the kernel traps (run_indexer does not
 * launch it where the GPU cannot place a cluster). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define STRATA_CL_ASM(...) asm volatile(__VA_ARGS__)
#else
#define STRATA_CL_ASM(...) __trap()
#endif

__device__ __forceinline__ void cl_arrive(void)
{
	STRATA_CL_ASM("barrier.cluster.arrive.release;\n" ::: "memory");
}

__device__ __forceinline__ void cl_wait(void)
{
	STRATA_CL_ASM("barrier.cluster.wait.acquire;\n" ::: "memory");
}

__device__ __forceinline__ unsigned cl_rank(void)
{
	unsigned r = 0;
	STRATA_CL_ASM("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
	return r;
}

/* The generic address of *p in the shared memory of CTA `rank` of this cluster. */
template <typename T> __device__ __forceinline__ T *cl_map(T *p, unsigned rank)
{
	unsigned long long d = 0;
	STRATA_CL_ASM("mapa.u64 %0, %1, %2;\n" : "=l"(d) : "l"(p), "r"(rank));
	return reinterpret_cast<T *>(d);
}

/* filter_rounds' sink into the leader's shared memory (header comment). */
struct ClusterSink {
	const Args &a;
	int row;
	ClSmem *lead; /* the leader's shared memory, by a generic address */
	__device__ __forceinline__ unsigned long long place(unsigned long long both) const
	{
		return both ? atomicAdd(&lead->cnt, both) : 0ull;
	}
	__device__ __forceinline__ void sel(uint32_t at, float s, int j) const
	{
		if (at < (uint32_t)a.topk) {
			lead->s.ids[at] = j;
			lead->s.sc[at] = s;
		}
	}
	__device__ __forceinline__ void cand(uint32_t at, unsigned long long key) const
	{
		if (at < (uint32_t)a.cl_loc)
			lead->cl[at] = key;
		else if (at < a.cap)
			a.cand[(size_t)row * a.cap + at] = key;
	}
	__device__ __forceinline__ uint32_t *h2() const
	{
		return lead->s.u.h2;
	}
	/* a candidate's bin-2 count (on) in the leader's shared memory: a plain remote
	 * atomic whose old value nothing waits for (an aggregated one, ballot, match,
	 * atomic and shuffle, was a dependent chain a live slot; filter_kernel's counts
	 * gained so, s48 run 5). Two FP8 rows 128K batch 64 100.8 - 100.9 us against
	 * 101.8 - 102.2, batch 8 24.1 - 24.2 against 24.6, 512K batch 8 54.3 - 54.4
	 * against 54.8 - 55.2 (bench/results/2026-12-03-h200-s49, run 1) */
	__device__ __forceinline__ void count2(uint32_t b, bool on) const
	{
		if (on)
			atomicAdd(&h2()[b], 1u);
	}
};

/* grid (C, n_rows), cluster (C, 1, 1), C = a.fx (run_indexer: no staging CTAs). CTA x of
 * a row's cluster walks chunks x, x + C, ... as filter_kernel's CTAs do; the leader
 * (x = 0) then selects the row (header comment). Rows with limit <= k are written by
 * the leader, with no barrier (the limit is the same for the whole cluster). */
template <int PER> /* ids a select thread sorts: one where k <= kFThreads (run_indexer) */
__global__ void __launch_bounds__(kFThreads, 2) filter_cl_kernel(Args a)
{
	__shared__ FScan::TempStorage tmp;
	__shared__ ClSmem cs;
	SelSmem &sm = cs.s;
	const int row = blockIdx.y, tid = threadIdx.x, k = a.topk;
	const int bx = (int)cl_rank(); /* blockIdx.x: the grid is one cluster wide */
	idx_pdl_wait();                /* the scan's programmatic dependent, as filter_kernel */
	if (tid == 0)
		idx_trace(a.trace, IDX_T_FILT0);
	uint32_t hc[IDX_BINS / kFThreads];
	cut_counts<IDX_BINS / kFThreads>(a.hist + (size_t)row * IDX_BINS, hc);
	const int L = row_lim(a, row);
	if (L <= k) {
		if (bx == 0 && tid == 0)
			publish_cut(a, row, STRATA_INDEXER_CUT_ALL);
		if (bx == 0)
			write_trivial(a, row, L, false);
		return;
	}
	if (bx == 0) { /* the row's lists and counts, empty, before anyone adds to them */
		for (int i = tid; i < IDX_BINS2; i += kFThreads)
			sm.u.h2[i] = 0;
		for (int i = tid; i < k; i += kFThreads)
			sm.ids[i] = INT_MAX;
		if (tid == 0)
			cs.cnt = 0;
	}
	if (tid == 0)
		sm.bin = -1, sm.above = 0, sm.n_t = 0, sm.n_c = 0;
	__syncthreads();
	/* release: the leader's set-up. A release waits for this thread's reads in flight
	 * too, so it comes before the first round's score reads are issued, after the
	 * histogram's, which the cut needs next anyway (after the score reads, the first
	 * CTA found its cut 2.1 us after its start, against 1.4 here and in filter_kernel:
	 * bench/results/2026-12-03-h200-s45, runs 1 - 2) */
	cl_arrive();
	const float *sc = a.scores + (size_t)row * a.sstride;
	const int step = a.fx * kFChunk;
	const int start = bx * kFChunk;
	const bool work = start < L; /* block-uniform: this CTA has a chunk */
	float s[kFRound][kFPer];
	if (work) {
#pragma unroll
		for (int r = 0; r < kFRound; r++)
			load_chunk(sc, start + r * step, L, s[r]);
	}
	uint32_t bstar, above1;
	const bool cut = filter_cut(a, row, bx, hc, sm, tmp, &bstar, &above1);
	ClSmem *lead = bx == 0 ? &cs : cl_map(&cs, 0);
	cl_wait(); /* acquire: the leader's set-up seen; every CTA of the cluster is running */
	if (cut && work) {
		const ClusterSink sink{ a, row, lead };
		filter_rounds(a, row, L, start, step, s, bstar, sm, sink);
	}
	if (tid == 0)
		idx_trace(a.trace, IDX_T_FLOOP);
	cl_arrive(); /* release: this thread's entries and counts in the leader's memory */
	cl_wait();   /* acquire (the leader): everyone's; no CTA leaves before the leader reads */
	if (bx != 0)
		return;
	if (tid == 0)
		idx_trace(a.trace, IDX_T_SEL0);
	if (!cut) {
		write_trivial(a, row, L, true);
		__syncthreads(); /* this CTA's cut reads are done (every CTA's: the barrier) */
		clear_row(a, row);
		return;
	}
	uint32_t h2c[IDX_BINS2 / kFThreads]; /* the row's bin-2 counts, in cut_counts' order */
	{
		const uint32_t *h = sm.u.h2 + (kFThreads - 1 - tid) * (IDX_BINS2 / kFThreads);
#pragma unroll
		for (int b = 0; b < IDX_BINS2 / kFThreads; b++)
			h2c[b] = h[b];
	}
	const uint32_t nc = (uint32_t)(cs.cnt >> 32);
	const uint32_t loc = (uint32_t)a.cl_loc;
	/* the bucket-b* keys: the leader's list, then the global list's rest; every score
	 * of the row where the global list overflowed (as for_each_cand) */
	auto all = [&](auto f) {
		if (nc <= a.cap) {
			const uint32_t nl = nc < loc ? nc : loc;
			for (uint32_t i = tid; i < nl; i += kFThreads)
				f(cs.cl[i]);
			for (uint32_t i = loc + tid; i < nc; i += kFThreads)
				f(__ldcg(a.cand + (size_t)row * a.cap + i));
		} else {
			for_each_cand(a, row, L, bstar, nc, f);
		}
	};
	/* select_finish's first barrier orders these reads of h2 before cc (sm.u) is
	 * written; the scan's histogram is cleared there (hist2 and the count slots were
	 * not used: zero already) */
	select_finish<PER>(a, row, L, bstar, above1, h2c, sm, tmp, [](auto) { return false; }, all,
			   all, [&] { clear_row(a, row); });
}

#undef STRATA_CL_ASM

/* A launch of filter_cl_kernel: grid (c, rows) of clusters (c, 1, 1), the cluster's
 * size as attribute at[0] (cfg->attrs = at, one attribute; the caller may add more). */
static void cluster_config(cudaLaunchConfig_t *cfg, cudaLaunchAttribute *at, int c, int rows)
{
	*cfg = cudaLaunchConfig_t{};
	cfg->gridDim = dim3((unsigned)c, (unsigned)rows);
	cfg->blockDim = dim3(kFThreads);
	at[0].id = cudaLaunchAttributeClusterDimension;
	at[0].val.clusterDim.x = (unsigned)c;
	at[0].val.clusterDim.y = 1;
	at[0].val.clusterDim.z = 1;
	cfg->attrs = at;
	cfg->numAttrs = 1;
}

/* The filter and select as one cluster a row (filter_cl_kernel): its CTAs meet in the
 * leader's shared memory instead of L2 (indexer_cluster_int.h). The cluster takes the
 * row's filter_shape CTAs (fx), at most STRATA_IDX_FCL (8 by default; up to 16, a
 * non-portable size; 0: never), so long as a CTA then walks at most
 * STRATA_IDX_FCL_ROUNDS rounds of chunks (2), and only where no staging CTAs ride on the
 * launch. Every row's cluster must fit the GPU at once: a second wave of clusters cost
 * more than the cluster saves (128K batch 32, two rows, 64 clusters of 4 where 62 fit:
 * 62.8 - 63.1 us against filter_kernel's 61.5 - 61.7). Where they do not, a smaller
 * cluster, unless it walks more rounds than the first choice would have (that same
 * point as 64 clusters of 3, two rounds: 60.8 - 61.0 against 60.5 - 60.6). The
 * largest such cluster: the smallest that walks as few rounds was slower at 32K and no
 * faster elsewhere (two FP8 rows 32K batch 8, clusters of 1: 18.8 us against 16.7 as
 * clusters of 4; run 6). H200,
 * bench/results/2026-12-03-h200-s45, runs 1 - 2: two FP8 rows 128K batch 64 (clusters of
 * 2) 106.9 - 107.3 us against 112.1 - 112.4, batch 8 (of 8) 24.8 - 24.9 against 26.7 -
 * 26.8; one MXFP4 row 128K batch 32 (of 7) 49.8 against 51.7, 512K batch 8 (of 8, two
 * rounds) 48.5 - 48.6 against 49.9; as fast at two FP8 rows 512K batch 8 (of 8, two
 * rounds). STRATA_IDX_FCL_ALL=1 takes a cluster on every shape that can run one (tests);
 * STRATA_IDX_FCL_LOC: the leader's room for bucket-b* keys (kClLoc; tests lower it to
 * drive the global list). Returns the cluster size, or 0 for filter_kernel. Read at each
 * call; the GPU's room is asked once a kernel, size and device. */
static int cluster_room(void (*kern)(Args), int c)
{
	/* per kernel and size: (device + 1) << 16 | room, 0 where not yet asked; the last
	 * device asked (as launch_scan_v's occupancy cache) */
	static std::atomic<unsigned> known[2][kClMax + 1];
	std::atomic<unsigned> &slot = known[kern == filter_cl_kernel<1> ? 0 : 1][c];
	int devi = 0;
	if (cudaGetDevice(&devi) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	const unsigned v = slot.load(std::memory_order_relaxed);
	if (v >> 16 == (unsigned)devi + 1)
		return (int)(v & 0xffff);
	int n = 0;
	if (c <= 8 || cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
			      cudaSuccess) {
		cudaLaunchConfig_t cfg;
		cudaLaunchAttribute at[1];
		cluster_config(&cfg, at, c, 1);
		if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) != cudaSuccess)
			n = 0;
	}
	(void)cudaGetLastError(); /* a GPU without clusters: filter_kernel */
	n = n < 0 ? 0 : n > 0xffff ? 0xffff : n;
	if (getenv("STRATA_IDX_TRACE"))
		fprintf(stderr, "idx-fcl: clusters of %d: %d at once\n", c, n);
	slot.store(((unsigned)devi + 1) << 16 | (unsigned)n, std::memory_order_relaxed);
	return n;
}

static int filter_cluster(void (*kern)(Args), int fx, const strata_indexer_params *p)
{
	int mx = samp_env("STRATA_IDX_FCL", 8);
	mx = mx > kClMax ? kClMax : mx;
	if (mx <= 0 || fx < 1)
		return 0;
	const bool all = samp_env("STRATA_IDX_FCL_ALL", 0) != 0;
	const long long rmax = samp_env("STRATA_IDX_FCL_ROUNDS", 2);
	const long long chunks = ((long long)p->max_limit + kFChunk - 1) / kFChunk;
	auto rounds = [&](int c) { return ((chunks + c - 1) / c + kFRound - 1) / kFRound; };
	const int c0 = fx < mx ? fx : mx;
	for (int c = c0; c >= 1; c--) {
		if (!all && (rounds(c) > rmax || rounds(c) > rounds(c0)))
			return 0; /* a smaller cluster only walks more */
		const int n = cluster_room(kern, c);
		if (n >= p->n_rows || (all && n >= 1))
			return c;
	}
	return 0;
}

#endif /* STRATA_KERNELS_INDEXER_CLUSTER_INT_H */
