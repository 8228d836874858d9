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

template <int U>
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
		if (lane < U) {
			EntryPtrs e = { nullptr, nullptr, nullptr, nullptr };
			long item = first + lane;
			if (item < n) {
				int sid = p.src_ids ? p.src_ids[item] : (int)item;
				int did = p.dst_ids ? p.dst_ids[item] : (int)item;
				if (sid >= 0 && did >= 0) {
					int st = p.src_tab ? p.src_tab[item] : 0;
					int dt = p.dst_tab ? p.dst_tab[item] : 0;
					uint8_t *sb = gather_block(&p.src, st, sid);
					uint8_t *db = gather_block(&p.dst, dt, did);
					e.sd = gather_data(&p.src, sb, sid);
					e.ss = gather_scale(&p.src, sb, sid);
					e.dd = gather_data(&p.dst, db, did);
					e.ds = gather_scale(&p.dst, db, did);
				}
			}
			ptrs[wb][lane] = e;
		}
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
						v[t] = __ldcs(reinterpret_cast<const uint4 *>(q.sd + pc * 16));
					} else {
						uint2 x = __ldcs(reinterpret_cast<const uint2 *>(q.ss));
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

template <int U> void launch(const strata_gather_params &p, cudaStream_t st)
{
	long warps = ((long)p.n + U - 1) / U;
	long grid = (warps + G_WARPS - 1) / G_WARPS, cap = (long)sm_count() * 8;
	if (grid > cap)
		grid = cap;
	if (grid < 1)
		grid = 1;
	gather_kernel<U><<<(unsigned)grid, G_THREADS, 0, st>>>(p);
}

} // namespace

extern "C" int strata_k_gather_gpu(strata_dev *dev, const strata_gather_params *p, strata_stream *s)
{
	if (p->n == 0)
		return 0;
	int u = p->per_warp;
	if (!u)
		u = p->n < 4096 ? 1 : p->n < 32768 ? 2 : 4;
	cudaStream_t st = (cudaStream_t)s;
	switch (u) {
	case 1: launch<1>(*p, st); break;
	case 2: launch<2>(*p, st); break;
	case 4: launch<4>(*p, st); break;
	default: launch<8>(*p, st); break;
	}
	return strata_dev_check(dev, "gather kernel");
}
