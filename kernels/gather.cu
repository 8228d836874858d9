// Selected-entry gather: moves 584-byte main entries between two block-layout spaces,
// usually from pinned, mapped host memory (read over PCIe through the UVA pointer) into
// the device hot pool, and back for write-back.
//
// Why it is shaped like this: a PCIe read is latency-bound (~1-2 us per round trip), so
// the rate is the bytes in flight. Each warp moves U entries per round as 37 pieces
// each (36 x 16 B of data, 8 B of scales): the U*37 pieces are spread over the 32 lanes,
// every lane issues all of its loads before any store (R registers of 16 B each), and
// the grid covers every SM with up to 8 CTAs of 8 warps. The entry pointers of a round
// are computed once by lanes 0..U-1 and shared through shared memory. Loads use the
// streaming hint (.cs): gathered bytes are read once.
#include "gather_int.h"
#include "kernels_int.h"

#include <cuda_runtime.h>

namespace {

constexpr int G_THREADS = 256, G_WARPS = G_THREADS / 32;

struct EntryPtrs {
	const uint8_t *sd, *ss;
	uint8_t *dd, *ds;
};

/* Source and destination addresses of item `item` (all NULL when it is past n or has
 * a negative id on either side: skipped). */
__device__ __forceinline__ EntryPtrs entry_ptrs(const strata_gather_params &p, long item, int n)
{
	EntryPtrs e = { nullptr, nullptr, nullptr, nullptr };
	if (item >= n)
		return e;
	int sid = p.src_ids ? p.src_ids[item] : (int)item;
	int did = p.dst_ids ? p.dst_ids[item] : (int)item;
	if (sid < 0 || did < 0)
		return e;
	uint8_t *sb = gather_block(&p.src, p.src_tab ? p.src_tab[item] : 0, sid);
	uint8_t *db = gather_block(&p.dst, p.dst_tab ? p.dst_tab[item] : 0, did);
	e.sd = gather_data(&p.src, sb, sid);
	e.ss = gather_scale(&p.src, sb, sid);
	e.dd = gather_data(&p.dst, db, did);
	e.ds = gather_scale(&p.dst, db, did);
	return e;
}

/* Streaming loads of 16 and 8 bytes, with an L2 prefetch size PF (0: none; 64, 128 or
 * 256 bytes: strata_gather_params.l2_prefetch). */
template <int PF> __device__ __forceinline__ uint4 ld16(const void *src)
{
	uint4 v;
	if constexpr (PF == 64)
		asm volatile("ld.global.cs.L2::64B.v4.u32 {%0, %1, %2, %3}, [%4];"
			     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(src));
	else if constexpr (PF == 128)
		asm volatile("ld.global.cs.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
			     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(src));
	else if constexpr (PF == 256)
		asm volatile("ld.global.cs.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
			     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(src));
	else
		v = __ldcs(reinterpret_cast<const uint4 *>(src));
	return v;
}
template <int PF> __device__ __forceinline__ uint2 ld8(const void *src)
{
	uint2 v;
	if constexpr (PF == 64)
		asm volatile("ld.global.cs.L2::64B.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(src));
	else if constexpr (PF == 128)
		asm volatile("ld.global.cs.L2::128B.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(src));
	else if constexpr (PF == 256)
		asm volatile("ld.global.cs.L2::256B.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(src));
	else
		v = __ldcs(reinterpret_cast<const uint2 *>(src));
	return v;
}

template <int U, int PF>
__global__ void __launch_bounds__(G_THREADS) gather_kernel(const strata_gather_params p)
{
	constexpr int R = (U * GATHER_PIECES + 31) / 32;
	__shared__ EntryPtrs ptrs[G_WARPS][U];
	int n = p.n;
	if (p.n_dev) {
		int d = *p.n_dev;
		n = d < n ? d : n;
	}
	const int lane = threadIdx.x & 31, wb = threadIdx.x >> 5;
	const long gw = (long)blockIdx.x * G_WARPS + wb, nw = (long)gridDim.x * G_WARPS;
	for (long first = gw * U; first < n; first += nw * U) {
		if (lane < U)
			ptrs[wb][lane] = entry_ptrs(p, first + lane, n);
		__syncwarp();
		uint4 v[R];
#pragma unroll
		for (int t = 0; t < R; t++) {
			const int c = lane + 32 * t;
			if (U * GATHER_PIECES % 32 == 0 || c < U * GATHER_PIECES) {
				const int e = c / GATHER_PIECES, pc = c - e * GATHER_PIECES;
				const EntryPtrs &q = ptrs[wb][e];
				if (q.sd) {
					if (pc < GATHER_PIECES - 1) {
						v[t] = ld16<PF>(q.sd + pc * 16);
					} else {
						uint2 x = ld8<PF>(q.ss);
						v[t] = make_uint4(x.x, x.y, 0u, 0u);
					}
				}
			}
		}
#pragma unroll
		for (int t = 0; t < R; t++) {
			const int c = lane + 32 * t;
			if (U * GATHER_PIECES % 32 == 0 || c < U * GATHER_PIECES) {
				const int e = c / GATHER_PIECES, pc = c - e * GATHER_PIECES;
				const EntryPtrs &q = ptrs[wb][e];
				if (q.sd) {
					if (pc < GATHER_PIECES - 1)
						*reinterpret_cast<uint4 *>(q.dd + pc * 16) = v[t];
					else
						*reinterpret_cast<uint2 *>(q.ds) = make_uint2(v[t].x, v[t].y);
				}
			}
		}
		__syncwarp();
	}
}

int sm_count(void)
{
	static int n; // one device per process in practice; a race only recomputes it
	if (!n) {
		int dev = 0, v = 0;
		if (cudaGetDevice(&dev) != cudaSuccess ||
		    cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v <= 0)
			v = 132;
		n = v;
	}
	return n;
}

template <int U, int PF> void launch(const strata_gather_params &p, cudaStream_t st)
{
	long warps = ((long)p.n + U - 1) / U;
	long grid = (warps + G_WARPS - 1) / G_WARPS, cap = (long)sm_count() * 8;
	if (grid > cap)
		grid = cap;
	if (grid < 1)
		grid = 1;
	gather_kernel<U, PF><<<(unsigned)grid, G_THREADS, 0, st>>>(p);
}

template <int U> void launch_pf(const strata_gather_params &p, cudaStream_t st)
{
	switch (p.l2_prefetch) {
	case 64: launch<U, 64>(p, st); break;
	case 128: launch<U, 128>(p, st); break;
	case 256: launch<U, 256>(p, st); break;
	default: launch<U, 0>(p, st); break;
	}
}


// ---- bulk variant (per_warp = 16): Hopper's bulk-copy engine (cp.async.bulk, "TMA")
// reads each entry's 576 data bytes from pinned host memory into shared memory in one
// request stream per entry, instead of 36 separate 16-byte loads per entry; the SMs then
// store them to the destination. Two stages per CTA: the next chunk's reads are in
// flight while the current one is written out. Scales (8 bytes, not a bulk-copy size)
// use plain loads. sm_90 only; elsewhere the launcher falls back to U = 4.
// Measured on an H200 (PCIe Gen5, strata bench fetch): slower than the plain loads
// (0.78 vs 0.84 of the contiguous copy at 256K entries; 27.6 vs 15.6 us at 512), so it
// is never chosen automatically; it stays selectable to re-measure on other hosts.
constexpr int BK_THREADS = 128, BK_E = 32, BK_STAGES = 2;

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
	return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__global__ void __launch_bounds__(BK_THREADS) gather_bulk_kernel(const strata_gather_params p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	__shared__ __align__(128) uint8_t buf[BK_STAGES][BK_E * STRATA_MAIN_DATA_BYTES];
	__shared__ __align__(8) uint64_t bar[BK_STAGES];
	__shared__ EntryPtrs ptrs[BK_STAGES][BK_E];
	int n = p.n;
	if (p.n_dev) {
		int d = *p.n_dev;
		n = d < n ? d : n;
	}
	const int nchunks = (n + BK_E - 1) / BK_E;
	if (threadIdx.x == 0) {
		for (int st = 0; st < BK_STAGES; st++)
			asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bar[st])));
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	__syncthreads();
	// Every thread calls issue() (it holds a __syncthreads).
	auto issue = [&](int chunk, int st) {
		if (threadIdx.x < BK_E)
			ptrs[st][threadIdx.x] = entry_ptrs(p, (long)chunk * BK_E + threadIdx.x, n);
		__syncthreads();
		if (threadIdx.x == 0) {
			uint32_t valid = 0;
			for (int i = 0; i < BK_E; i++)
				valid += ptrs[st][i].sd != nullptr;
			// Order earlier generic-proxy reads of this stage before the async writes.
			asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
			asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
					     smem_u32(&bar[st])),
				     "r"(valid * STRATA_MAIN_DATA_BYTES)
				     : "memory");
			for (int i = 0; i < BK_E; i++) {
				const uint8_t *src = ptrs[st][i].sd;
				if (!src)
					continue;
				asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
					     " [%0], [%1], %2, [%3];" ::"r"(
						     smem_u32(&buf[st][i * STRATA_MAIN_DATA_BYTES])),
					     "l"(src), "r"(STRATA_MAIN_DATA_BYTES), "r"(smem_u32(&bar[st]))
					     : "memory");
			}
		}
	};
	uint32_t parity[BK_STAGES] = { 0, 0 };
	int st = 0;
	int chunk = blockIdx.x;
	if (chunk < nchunks)
		issue(chunk, 0);
	for (; chunk < nchunks; chunk += gridDim.x) {
		const int next = chunk + gridDim.x;
		if (next < nchunks)
			issue(next, st ^ 1);
		asm volatile("{\n\t.reg .pred done;\n"
			     "WAIT_%=:\n\t"
			     "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
			     "@!done bra WAIT_%=;\n}" ::"r"(smem_u32(&bar[st])),
			     "r"(parity[st])
			     : "memory");
		parity[st] ^= 1u;
		for (int c = threadIdx.x; c < BK_E * GATHER_PIECES; c += BK_THREADS) {
			const int e = c / GATHER_PIECES, pc = c - e * GATHER_PIECES;
			const EntryPtrs &q = ptrs[st][e];
			if (!q.sd)
				continue;
			if (pc < GATHER_PIECES - 1)
				*reinterpret_cast<uint4 *>(q.dd + pc * 16) = *reinterpret_cast<const uint4 *>(
					&buf[st][e * STRATA_MAIN_DATA_BYTES + pc * 16]);
			else
				*reinterpret_cast<uint2 *>(q.ds) = __ldcs(reinterpret_cast<const uint2 *>(q.ss));
		}
		__syncthreads(); // the stage and its pointers are free for the issue after next
		st ^= 1;
	}
#endif
}

bool bulk_supported(void)
{
	static int cc = -1; // benign race: every caller computes the same value
	if (cc < 0) {
		int dev = 0, major = 0;
		if (cudaGetDevice(&dev) != cudaSuccess ||
		    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
			major = 0;
		cc = major;
	}
	return cc >= 9;
}

void launch_bulk(const strata_gather_params &p, cudaStream_t st)
{
	long chunks = ((long)p.n + BK_E - 1) / BK_E;
	long grid = chunks, cap = (long)sm_count() * 4;
	if (grid > cap)
		grid = cap;
	if (grid < 1)
		grid = 1;
	gather_bulk_kernel<<<(unsigned)grid, BK_THREADS, 0, st>>>(p);
}

} // namespace

extern "C" int strata_k_gather_gpu(strata_dev *dev, const strata_gather_params *p, strata_stream *s)
{
	if (p->n == 0)
		return 0;
	int u = p->per_warp;
	if (!u)
		u = p->n < 4096 ? 1 : 2; /* H200: 2 per warp led at 32K and 256K entries */
	cudaStream_t st = (cudaStream_t)kstream(dev, s);
	if (u == 16 && !bulk_supported())
		u = 4;
	switch (u) {
	case 16: launch_bulk(*p, st); break;
	case 1: launch_pf<1>(*p, st); break;
	case 2: launch_pf<2>(*p, st); break;
	case 4: launch_pf<4>(*p, st); break;
	default: launch_pf<8>(*p, st); break;
	}
	return strata_dev_check(dev, "gather kernel");
}
