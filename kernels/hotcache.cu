// Hot-cache residency and fetch kernel: one CTA per rl group of a batch (the first row of each
// run of equal row_rl leads; the others exit). The CPU twin in hotcache_cpu.c is the
// specification; this file does the same steps with the block's threads:
//   lookups in parallel (a miss is owned by its lowest list position: atomicMin on a
//   pending marker), miss ranks by a block prefix sum, victims a window of slots at a
//   time (prefix sum over "evictable" in hand order), the copy of the victims' entries
//   from the host tier (fetch_victims), then the output list.
// Everything an rl owns (its map row, its slots) is touched by one CTA only, so plain
// loads and stores ordered by __syncthreads() suffice; the pending markers and the
// shared counters (errors) use atomics.
#include "gather_int.h"
#include "kernels_int.h"

#include <climits>
#include <cuda_runtime.h>

namespace {

constexpr int HC_THREADS = 512;

constexpr int kFetchChunk = 64;  // victims whose entries are copied per round
constexpr int kFetchR = (kFetchChunk * GATHER_PIECES + HC_THREADS - 1) / HC_THREADS;

struct EntryPtrs {
	const uint8_t *sd, *ss;
	uint8_t *dd, *ds;
};

constexpr int kPer = 2;    // list positions a thread keeps in registers (k <= 2 x 512)
constexpr int kVic = 512;  // victims whose (id, slot) CLOCK hands the fetch in shared memory

struct Shared {
	int warp[32];
	int adv;
	int bad;
	EntryPtrs ep[kFetchChunk];
	int32_t vid[kVic], vg[kVic];
};

// Exclusive prefix sum of v over the block; *total gets the sum. All threads call it.
__device__ int block_scan(int v, int *total, Shared &sh)
{
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	int x = v;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		int y = __shfl_up_sync(0xffffffffu, x, o);
		if (lane >= o)
			x += y;
	}
	if (lane == 31)
		sh.warp[w] = x;
	__syncthreads();
	if (w == 0) {
		int t = lane < nw ? sh.warp[lane] : 0;
#pragma unroll
		for (int o = 1; o < 32; o <<= 1) {
			int y = __shfl_up_sync(0xffffffffu, t, o);
			if (lane >= o)
				t += y;
		}
		sh.warp[lane] = t;
	}
	__syncthreads();
	int before = w ? sh.warp[w - 1] : 0;
	*total = sh.warp[nw - 1];
	__syncthreads();
	return before + x - v;
}

__device__ int list_id(const strata_hotcache_params &p, int rl, const int32_t *row, int n_last,
		       int j)
{
	int id = row ? row[j] : hc_candidate(&p, rl, n_last, j);
	if (id >= p.max_entries) {
		atomicOr(p.err, STRATA_HC_ERR_RANGE);
		return -1;
	}
	return id;
}

// The fetch of a row's misses, inside the residency kernel (no work list, no second
// launch): victims t of miss[0..m_eff) now map to their slots. A round takes up to
// kFetchChunk victims; their pointers are computed once into shared memory, then each
// thread issues all of its 16-byte loads (zero-copy reads of the host tier, a PCIe
// round trip each) before any store, so one round costs about one round trip.
__device__ void fetch_victims(const strata_hotcache_params &p, int rl, const int32_t *map,
			      const int32_t *miss, int m_eff, Shared &sh)
{
	const int tid = threadIdx.x;
	for (int t0 = 0; t0 < m_eff; t0 += kFetchChunk) {
		const int ne = min(kFetchChunk, m_eff - t0);
		if (tid < ne) {
			const int t = t0 + tid;
			const int id = t < kVic ? sh.vid[t] : miss[t], g = t < kVic ? sh.vg[t] : map[id];
			uint8_t *sb = gather_block(&p.src, rl, id), *db = gather_block(&p.dst, 0, g);
			sh.ep[tid] = EntryPtrs{ gather_data(&p.src, sb, id), gather_scale(&p.src, sb, id),
						gather_data(&p.dst, db, g), gather_scale(&p.dst, db, g) };
		}
		__syncthreads();
		const int np = ne * GATHER_PIECES;
		uint4 v[kFetchR];
#pragma unroll
		for (int u = 0; u < kFetchR; u++) {
			const int c = tid + u * HC_THREADS;
			if (c < np) {
				const int e = c / GATHER_PIECES, pc = c - e * GATHER_PIECES;
				v[u] = gather_piece_load(sh.ep[e].sd, sh.ep[e].ss, pc);
			}
		}
#pragma unroll
		for (int u = 0; u < kFetchR; u++) {
			const int c = tid + u * HC_THREADS;
			if (c < np) {
				const int e = c / GATHER_PIECES, pc = c - e * GATHER_PIECES;
				gather_piece_store(sh.ep[e].dd, sh.ep[e].ds, pc, v[u]);
			}
		}
		__syncthreads();
	}
}

__device__ void process_list(const strata_hotcache_params &p, int rl, int32_t *miss,
			     const int32_t *row, int n_last, int L, int32_t *out, Shared &sh)
{
	int32_t *map = p.map + (size_t)rl * p.max_entries;
	const int base = rl * p.budget, tid = threadIdx.x, nt = blockDim.x;
	int my_valid = 0, my_pf = 0, total;

	// 1. lookups. The first kPer positions of each thread keep their id and the map
	// value seen here in registers: a hit's slot cannot change during this call (it
	// is claimed, so protected), which spares phases 2 and 4 a reload per position.
	auto lookup = [&](int j, int &id_out, int &v_out) {
		const int id = list_id(p, rl, row, n_last, j);
		id_out = id;
		v_out = -1;
		if (id < 0)
			return;
		my_valid++;
		const int v = map[id];
		v_out = v;
		if (v >= 0) {
			p.slot_op[v] = p.op;
			if (p.mode == STRATA_HC_STEP) {
				p.slot_sel[v] = p.op;
				p.slot_ref[v] = 1;
				if (p.slot_pf[v] && atomicExch(&p.slot_pf[v], 0u))
					my_pf++;
			} else if (p.mode == STRATA_HC_APPEND) {
				p.slot_ref[v] = 1;
			}
		} else {
			atomicMin(&map[id], HC_PENDING(j));
		}
	};
	int cid[kPer], cv[kPer];
#pragma unroll
	for (int u = 0; u < kPer; u++) {
		cid[u] = -1;
		cv[u] = -1;
		if (tid + u * nt < L)
			lookup(tid + u * nt, cid[u], cv[u]);
	}
	for (int j = tid + kPer * nt; j < L; j += nt) {
		int id, v;
		lookup(j, id, v);
	}
	__syncthreads();
	int n_valid, pf_used;
	(void)block_scan(my_valid, &n_valid, sh);
	(void)block_scan(my_pf, &pf_used, sh);

	// 2. misses in position order (a position that hit is never a miss's owner)
	int m = 0;
#pragma unroll
	for (int u = 0; u < kPer; u++) {
		if (u * nt < L) { /* block-uniform */
			const int j = u * nt + tid, id = cid[u];
			const int own = j < L && id >= 0 && cv[u] < 0 && map[id] == HC_PENDING(j);
			int r = block_scan(own, &total, sh);
			if (own)
				miss[m + r] = id;
			m += total;
		}
	}
	for (int j0 = kPer * nt; j0 < L; j0 += nt) {
		int j = j0 + tid, own = 0, id = -1;
		if (j < L) {
			id = list_id(p, rl, row, n_last, j);
			own = id >= 0 && map[id] == HC_PENDING(j);
		}
		int r = block_scan(own, &total, sh);
		if (own)
			miss[m + r] = id;
		m += total;
	}
	int cnt = 0;
	for (int s = tid; s < p.budget; s += nt)
		cnt += !hc_protected(&p, rl, base + s);
	int free_slots;
	(void)block_scan(cnt, &free_slots, sh);
	int m_eff = m < free_slots ? m : free_slots;
	if (p.mode == STRATA_HC_PREFETCH && m_eff > p.predict_max)
		m_eff = p.predict_max;

	// 3. CLOCK, a window of W slots at a time
	const int W = nt < p.budget ? nt : p.budget;
	int h = p.hand[rl], taken = 0, rounds = 0;
	while (taken < m_eff) {
		const int i = tid;
		const bool inwin = i < W;
		int s = h + i;
		if (s >= p.budget)
			s -= p.budget;
		const int g = base + s;
		bool prot = false, ev = false;
		if (inwin) {
			prot = hc_protected(&p, rl, g);
			ev = !prot && p.slot_ref[g] == 0;
		}
		int E;
		int r = block_scan(ev, &E, sh);
		const int need = m_eff - taken;
		const bool victim = ev && r < need;
		if (ev && r == need - 1)
			sh.adv = i + 1;
		if (tid == 0 && E < need)
			sh.adv = W;
		__syncthreads();
		const int adv = sh.adv;
		if (inwin && i < adv && !prot && !victim && p.slot_ref[g])
			p.slot_ref[g] = 0;
		if (victim) {
			int id = miss[taken + r], old = p.owner[g];
			if (taken + r < kVic) {
				sh.vid[taken + r] = id;
				sh.vg[taken + r] = g;
			}
			if (old >= 0)
				map[old] = -1;
			p.owner[g] = id;
			map[id] = g;
			p.slot_op[g] = p.op;
			p.slot_sel[g] = p.mode == STRATA_HC_STEP ? p.op : 0;
			p.slot_ref[g] = p.mode != STRATA_HC_PREFETCH;
			p.slot_pf[g] = p.mode == STRATA_HC_PREFETCH;
		}
		__syncthreads();
		h += adv;
		if (h >= p.budget)
			h -= p.budget;
		taken += E < need ? E : need;
		if (++rounds > 2 * (p.budget / W + 2)) { // cannot happen: m_eff <= free slots
			if (tid == 0)
				atomicOr(p.err, STRATA_HC_ERR_OVERFLOW);
			break;
		}
	}
	if (tid == 0)
		p.hand[rl] = h;
	for (int t = m_eff + tid; t < m; t += nt)
		map[miss[t]] = -1;
	__syncthreads();
	if (p.mode != STRATA_HC_APPEND)
		fetch_victims(p, rl, map, miss, m_eff, sh);

	// 4. output
	if (out) {
#pragma unroll
		for (int u = 0; u < kPer; u++) {
			const int j = tid + u * nt;
			if (j < L) {
				const int id = cid[u];
				const int v = cv[u] >= 0 ? cv[u] : id >= 0 ? map[id] : -1;
				out[j] = v >= 0 ? v : -1;
			}
		}
		for (int j = tid + kPer * nt; j < L; j += nt) {
			int id = list_id(p, rl, row, n_last, j);
			int v = id >= 0 ? map[id] : -1;
			out[j] = v >= 0 ? v : -1;
		}
	}
	if (tid == 0) {
		uint64_t *c = p.counters + (size_t)rl * STRATA_HC_NCOUNTERS;
		if (p.mode == STRATA_HC_STEP) {
			c[STRATA_HC_C_LOOKUPS] += (uint64_t)n_valid;
			c[STRATA_HC_C_HITS] += (uint64_t)(n_valid - m);
			c[STRATA_HC_C_MISSES] += (uint64_t)m_eff;
			c[STRATA_HC_C_OVERFLOW] += (uint64_t)(m - m_eff);
			c[STRATA_HC_C_PF_USED] += (uint64_t)pf_used;
			if (m_eff < m)
				atomicOr(p.err, STRATA_HC_ERR_OVERFLOW);
		} else if (p.mode == STRATA_HC_PREFETCH) {
			c[STRATA_HC_C_PREFETCHED] += (uint64_t)m_eff;
		} else {
			c[STRATA_HC_C_APPENDED] += (uint64_t)n_valid;
		}
	}
	__syncthreads();
}

__global__ void __launch_bounds__(HC_THREADS) hotcache_kernel(const strata_hotcache_params p)
{
	__shared__ Shared sh;
	const int r0 = blockIdx.x, tid = threadIdx.x;
	const int rl = p.row_rl[r0];
	if (r0 > 0 && p.row_rl[r0 - 1] == rl)
		return; // not the first row of its group
	int r1 = r0 + 1;
	while (r1 < p.n_rows && p.row_rl[r1] == rl)
		r1++;
	if (tid == 0) {
		sh.bad = 0;
		if (rl < 0 || rl >= p.n_rl) {
			atomicOr(p.err, STRATA_HC_ERR_RANGE);
			sh.bad = 1;
		} else if (atomicExch(&p.claim[rl], p.op) == p.op) {
			atomicOr(p.err, STRATA_HC_ERR_SPLIT);
			sh.bad = 1;
		}
	}
	__syncthreads();
	if (sh.bad) {
		if (p.out)
			for (size_t i = (size_t)r0 * p.k + tid; i < (size_t)r1 * p.k; i += blockDim.x)
				p.out[i] = -1;
		return;
	}
	int32_t *miss = p.scratch + (size_t)r0 * p.list_cap;
	if (p.mode == STRATA_HC_PREFETCH) {
		int n_last = p.last_n[rl];
		process_list(p, rl, miss, nullptr, n_last, hc_candidates(&p, n_last), nullptr, sh);
		return;
	}
	for (int r = r0; r < r1; r++)
		process_list(p, rl, miss, p.ids + (size_t)r * p.k, 0, p.k,
			     p.out ? p.out + (size_t)r * p.k : nullptr,
			     sh);
	if (p.mode == STRATA_HC_STEP) {
		int32_t *sel = p.last_sel + (size_t)rl * p.sel_cap;
		int n = 0, total;
		for (int r = r0; r < r1; r++)
			for (int j0 = 0; j0 < p.k; j0 += blockDim.x) {
				int j = j0 + tid, id = -1;
				if (j < p.k)
					id = p.ids[(size_t)r * p.k + j];
				int valid = id >= 0 && id < p.max_entries;
				int rank = block_scan(valid, &total, sh);
				if (valid && n + rank < p.sel_cap)
					sel[n + rank] = id;
				n += total;
			}
		if (tid == 0) {
			p.last_n[rl] = n < p.sel_cap ? n : p.sel_cap;
			p.last_step[rl] = p.op;
			p.counters[(size_t)rl * STRATA_HC_NCOUNTERS + STRATA_HC_C_STEPS]++;
		}
	} else {
		for (int r = r0; r < r1; r++)
			for (int j = tid; j < p.k; j += blockDim.x) {
				int id = p.ids[(size_t)r * p.k + j];
				if (id >= 0 && id < p.max_entries)
					atomicMax(&p.limit[rl], id + 1);
			}
	}
}

} // namespace

extern "C" int strata_k_hotcache_gpu(strata_dev *dev, const strata_hotcache_params *p,
				     strata_stream *s)
{
	if (p->n_rows == 0)
		return 0;
	hotcache_kernel<<<p->n_rows, HC_THREADS, 0, (cudaStream_t)kstream(dev, s)>>>(*p);
	return strata_dev_check(dev, "hotcache kernel");
}
