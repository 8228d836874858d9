// Benchmark baselines for the gather (bench fetch measures the kernel against them):
// the same entry copies issued by the host, one cudaMemcpyAsync per part, or all of
// them through one cudaMemcpyBatchAsync (CUDA 12.8+). Not used by strata itself.
#include "gather_int.h"
#include "kernels_int.h"

#include <cerrno>
#include <cstdlib>
#include <cuda_runtime.h>

static int baseline_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	KLOG(STRATA_LOG_ERROR, "%s: %s", what, cudaGetErrorString(e));
	return e == cudaErrorMemoryAllocation ? -ENOMEM : STRATA_E_CUDA;
}

extern "C" int strata_bench_gather_baseline_gpu(strata_dev *dev, const strata_gather_params *p,
					       strata_gather_baseline how, strata_stream *s)
{
	size_t cnt = 0, n = (size_t)p->n;
	void **dsts = (void **)malloc(2 * n * sizeof(void *) + 1);
	const void **srcs = (const void **)malloc(2 * n * sizeof(void *) + 1);
	size_t *sizes = (size_t *)malloc(2 * n * sizeof(size_t) + 1);
	int err = 0;
	cudaStream_t st = s || dev->main ? (cudaStream_t)kstream(dev, s) : cudaStreamPerThread;
	if (!dsts || !srcs || !sizes) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		int sid = p->src_ids ? p->src_ids[i] : (int)i;
		int did = p->dst_ids ? p->dst_ids[i] : (int)i;
		if (sid < 0 || did < 0)
			continue;
		uint8_t *sb = gather_block(&p->src, 0, sid), *db = gather_block(&p->dst, 0, did);
		dsts[cnt] = gather_data(&p->dst, db, did);
		srcs[cnt] = gather_data(&p->src, sb, sid);
		sizes[cnt++] = STRATA_MAIN_DATA_BYTES;
		dsts[cnt] = gather_scale(&p->dst, db, did);
		srcs[cnt] = gather_scale(&p->src, sb, sid);
		sizes[cnt++] = STRATA_MAIN_SCALE_BYTES;
	}
	if (how == STRATA_GATHER_BASELINE_EACH) {
		for (size_t i = 0; i < cnt && !err; i++)
			err = baseline_err(cudaMemcpyAsync(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, st),
					   "cudaMemcpyAsync");
	} else {
		// In chunks, in case a driver caps the batch; each call is one submission.
		const size_t chunk = 65536;
		for (size_t i = 0; i < cnt && !err; i += chunk) {
			size_t c = cnt - i < chunk ? cnt - i : chunk;
			cudaMemcpyAttributes attr = {};
			attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
			size_t idx = 0;
			err = baseline_err(cudaMemcpyBatchAsync(dsts + i, srcs + i, sizes + i, c, &attr,
								&idx, 1, st),
					   "cudaMemcpyBatchAsync");
		}
	}
out:
	free(dsts);
	free((void *)srcs);
	free(sizes);
	(void)dev;
	return err;
}
