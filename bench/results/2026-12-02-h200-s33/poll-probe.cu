// Session 33's open question, as a probe for the next device run (not part of the build):
// why did the sampled tail's sampling CTA, one CTA of a full one-wave grid, take ~20 us to
// read ~3,000 words written by ~5 us, and as long for a pass over shared memory?
//
//   nvcc -O3 -arch=sm_90a -o /tmp/poll-probe poll-probe.cu && /tmp/poll-probe
//
// One grid of 6 CTAs an SM (as the FP8 one-row scan), 128 threads each: CTAs 0 .. G-1
// stream their share of a 34 MB buffer (the scan's key bytes at 1M keys) and, after their
// first chunk, store 4 words each (the sample); the last CTA ("sampler") reads the G x 4
// words with the load form asked for (mode 0: ld.relaxed.gpu, batched 16 a thread and read
// again all at once; 1: ld.global.cg in a volatile asm, the same batching; 2: the same
// as 0 but each word waited for in turn), then runs a fixed shared-memory loop; the
// sampler is the grid's last CTA (as in the patch: the youngest on its SM, which serves
// its older CTAs first) or its first (the oldest). Printed
// (us from the kernel's first CTA): when the last sample word was stored, when the
// sampler had them all, when its shared-memory loop ended, when the streamers ended; and
// the same shared-memory loop alone on an idle GPU. A sampler slow only while the
// streamers run points at issue priority; slow with loads only, at the loads' form.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

__device__ __forceinline__ unsigned long long gtime()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}
__device__ __forceinline__ uint32_t ld_rel(const uint32_t *p)
{
	uint32_t v;
	asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}
__device__ __forceinline__ uint32_t ld_cg(const uint32_t *p)
{
	uint32_t v;
	asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

// t[0] first CTA start (min), t[1] last sample store (max), t[2] sampler read done,
// t[3] sampler smem loop done, t[4] last streamer end (max)
__global__ void __launch_bounds__(128) probe(const float4 *buf, size_t n4, uint32_t *words,
					     unsigned long long *t, float *sink, int mode, int smem_iters,
					     int first)
{
	__shared__ uint32_t sh[4096];
	const int G = gridDim.x - 1, tid = threadIdx.x;
	/* x: the streamer's index; the sampler is block 0 (first) or block G */
	const int x = first ? (int)blockIdx.x - 1 : (int)blockIdx.x;
	if (tid == 0)
		atomicMin(t + 0, gtime());
	if (x >= 0 && x < G) { /* streamer */
		const size_t per = n4 / G, base = per * x;
		float acc = 0.0f;
		for (size_t i = tid; i < per; i += 128) {
			const float4 v = __ldcs(buf + base + i);
			acc += v.x + v.y + v.z + v.w;
			if (i == (size_t)tid && tid < 4 * 32 && (tid & 31) == 0) { /* first chunk: 4 words */
				words[x * 4 + (tid >> 5)] = 2u + (__float_as_uint(acc) & 0xffff);
				atomicMax(t + 1, gtime());
			}
		}
		if (acc == 12345.0f)
			*sink = acc;
		__syncthreads();
		if (tid == 0)
			atomicMax(t + 4, gtime());
		return;
	}
	/* sampler */
	const int nw = G * 4;
	uint32_t sum = 0;
	for (int i0 = 0; i0 < nw; i0 += 16 * 128) {
		uint32_t v[16];
#pragma unroll
		for (int u = 0; u < 16; u++) {
			const int i = i0 + u * 128 + tid;
			v[u] = i < nw ? (mode == 1 ? ld_cg(words + i) : ld_rel(words + i)) : 1u;
			if (mode == 2)
				while (!v[u])
					v[u] = ld_rel(words + i);
		}
		for (;;) {
			bool miss = false;
#pragma unroll
			for (int u = 0; u < 16; u++)
				miss |= !v[u];
			if (!miss)
				break;
#pragma unroll
			for (int u = 0; u < 16; u++)
				if (!v[u]) {
					const int i = i0 + u * 128 + tid;
					v[u] = mode == 1 ? ld_cg(words + i) : ld_rel(words + i);
				}
		}
#pragma unroll
		for (int u = 0; u < 16; u++)
			sum += v[u];
	}
	__syncthreads();
	if (tid == 0)
		t[2] = gtime();
	for (int i = tid; i < 4096; i += 128)
		sh[i] = sum + i;
	__syncthreads();
	uint32_t y = 0;
	for (int it = 0; it < smem_iters; it++) {
		y += sh[(y + it * 37 + tid) & 4095];
		if ((it & 63) == 63)
			__syncthreads();
	}
	__syncthreads();
	if (tid == 0)
		t[3] = gtime();
	if (y == 7u)
		*sink = (float)y;
	for (int i = tid; i < nw; i += 128)
		words[i] = 0;
}

// the same shared-memory loop alone (one CTA, idle GPU)
__global__ void __launch_bounds__(128) smem_alone(unsigned long long *t, float *sink, int smem_iters)
{
	__shared__ uint32_t sh[4096];
	const int tid = threadIdx.x;
	for (int i = tid; i < 4096; i += 128)
		sh[i] = i;
	__syncthreads();
	const unsigned long long t0 = gtime();
	uint32_t x = 0;
	for (int it = 0; it < smem_iters; it++) {
		x += sh[(x + it * 37 + tid) & 4095];
		if ((it & 63) == 63)
			__syncthreads();
	}
	__syncthreads();
	if (tid == 0)
		t[0] = gtime() - t0;
	if (x == 7u)
		*sink = (float)x;
}

int main()
{
	int nsm = 0, per = 0;
	cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0);
	const size_t bytes = 34u << 20, n4 = bytes / 16;
	float4 *buf;
	uint32_t *words;
	unsigned long long *t;
	float *sink;
	cudaMalloc(&buf, bytes);
	cudaMemset(buf, 0, bytes);
	cudaMalloc(&words, 1 << 16);
	cudaMemset(words, 0, 1 << 16);
	cudaMalloc(&t, 64);
	cudaMalloc(&sink, 4);
	cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, probe, 128, 0);
	per = per > 6 ? 6 : per;
	const int grid = nsm * per; /* G streamers + 1 sampler: one wave */
	const int iters = 4096;
	printf("grid %d CTAs (%d SMs x %d), 34 MiB streamed, %d sample words\n", grid, nsm, per,
	       (grid - 1) * 4);
	for (int first = 0; first < 2; first++)
	for (int mode = 0; mode < 3; mode++)
		for (int rep = 0; rep < 3; rep++) {
			unsigned long long h[5], init[5] = { ~0ull, 0, 0, 0, 0 };
			cudaMemcpy(t, init, sizeof init, cudaMemcpyHostToDevice);
			probe<<<grid, 128>>>(buf, n4, words, t, sink, mode, iters, first);
			if (cudaDeviceSynchronize() != cudaSuccess) {
				printf("error %s\n", cudaGetErrorString(cudaGetLastError()));
				return 1;
			}
			cudaMemcpy(h, t, sizeof h, cudaMemcpyDeviceToHost);
			auto us = [&](int i) { return (double)(long long)(h[i] - h[0]) / 1e3; };
			printf("sampler %s, mode %d (%s): last sample stored %.2f, sampler read done %.2f, smem loop "
			       "done %.2f, streamers done %.2f us\n",
			       first ? "first" : "last", mode,
			       mode == 0 ? "relaxed.gpu batched" : mode == 1 ? "cg batched" : "relaxed.gpu one by one",
			       us(1), us(2), us(3), us(4));
		}
	for (int rep = 0; rep < 3; rep++) {
		unsigned long long d = 0;
		smem_alone<<<1, 128>>>(t, sink, iters);
		cudaDeviceSynchronize();
		cudaMemcpy(&d, t, 8, cudaMemcpyDeviceToHost);
		printf("smem loop alone: %.2f us\n", d / 1e3);
	}
	return 0;
}
