/* The device runtime: CUDA when built with it and a GPU is usable, else the host.
 * This is the one file of kernels/ that calls the CUDA runtime from C; foreign
 * errors are translated here (cuda_err) with the CUDA text kept for the log. */
#define _GNU_SOURCE
#include "kernels_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef STRATA_HAVE_CUDA
#include <cuda.h> /* CUtensorMap and its enums: types only (strata_dev_tmap_rows) */
#include <cudaTypedefs.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <pthread.h>

static int cuda_err(cudaError_t e, const char *what, const char *file, int line)
{
	if (e == cudaSuccess)
		return 0;
	if (STRATA_LOG_ON(STRATA_LOG_ERROR, STRATA_SUB_KERNELS))
		strata_log_write(STRATA_LOG_ERROR, STRATA_SUB_KERNELS, file, line,
				 "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
	return e == cudaErrorMemoryAllocation ? -ENOMEM : STRATA_E_CUDA;
}
#define CU(call) cuda_err((call), #call, __FILE__, __LINE__)
#endif

int strata_gpu_count(void)
{
#ifdef STRATA_HAVE_CUDA
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError(); /* clear the sticky "no device" error */
		return 0;
	}
	return n;
#else
	return 0;
#endif
}

int strata_dev_open(const strata_dev_config *cfg, strata_dev **out)
{
	strata_dev_config def = STRATA_DEV_CONFIG_INIT;
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!cfg)
		cfg = &def;
	if (cfg->size < sizeof *cfg)
		return -EINVAL;
	strata_backend want = cfg->backend;
	const char *env = getenv("STRATA_BACKEND");
	if (want == STRATA_BACKEND_AUTO && env && *env) {
		if (!strcmp(env, "cpu"))
			want = STRATA_BACKEND_CPU;
		else if (!strcmp(env, "gpu"))
			want = STRATA_BACKEND_GPU;
		else
			return -EINVAL;
	}
	int ngpu = want == STRATA_BACKEND_CPU ? 0 : strata_gpu_count();
	if (want == STRATA_BACKEND_GPU && cfg->device >= ngpu)
		return STRATA_E_NOGPU;
	strata_dev *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	d->device = cfg->device;
	d->gpu = ngpu > cfg->device && cfg->device >= 0;
	snprintf(d->name, sizeof d->name, "cpu");
#ifdef STRATA_HAVE_CUDA
	if (d->gpu) {
		struct cudaDeviceProp prop;
		int err = CU(cudaSetDevice(d->device));
		if (!err)
			err = CU(cudaGetDeviceProperties(&prop, d->device));
		if (err) {
			free(d);
			return err;
		}
		snprintf(d->name, sizeof d->name, "%s", prop.name);
		if (cfg->priority_main) {
			int least = 0, greatest = 0;
			cudaStream_t st = NULL;
			err = CU(cudaDeviceGetStreamPriorityRange(&least, &greatest));
			if (!err)
				err = CU(cudaStreamCreateWithPriority(&st, cudaStreamNonBlocking, greatest));
			if (err) {
				free(d);
				return err;
			}
			d->main = st;
		}
	}
#endif
	STRATA_LOG(STRATA_LOG_INFO, STRATA_SUB_KERNELS, "device: %s", d->name);
	*out = d;
	return 0;
}

void strata_dev_close(strata_dev *dev)
{
#ifdef STRATA_HAVE_CUDA
	if (dev && dev->main)
		(void)cudaStreamDestroy((cudaStream_t)dev->main);
#endif
	free(dev);
}

bool strata_dev_is_gpu(const strata_dev *dev)
{
	return dev && dev->gpu;
}

const char *strata_dev_name(const strata_dev *dev)
{
	return dev ? dev->name : "none";
}

static int host_aligned(size_t bytes, void **out)
{
	void *p = NULL;
	size_t n = (bytes + 255) & ~(size_t)255;
	if (posix_memalign(&p, 256, n ? n : 256))
		return -ENOMEM;
	*out = p;
	return 0;
}

int strata_dev_alloc(strata_dev *dev, size_t bytes, void **out)
{
	if (!dev || !out)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaMalloc(out, bytes ? bytes : 1));
#endif
	return host_aligned(bytes, out);
}

void strata_dev_free(strata_dev *dev, void *p)
{
	if (!dev || !p)
		return;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu) {
		(void)CU(cudaFree(p));
		return;
	}
#endif
	free(p);
}

int strata_dev_host_alloc(strata_dev *dev, size_t bytes, void **out)
{
	if (!dev || !out)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaHostAlloc(out, bytes ? bytes : 1, cudaHostAllocMapped | cudaHostAllocPortable));
#endif
	return host_aligned(bytes, out);
}

void strata_dev_host_free(strata_dev *dev, void *p)
{
	if (!dev || !p)
		return;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu) {
		(void)CU(cudaFreeHost(p));
		return;
	}
#endif
	free(p);
}

int strata_dev_host_register(strata_dev *dev, void *p, size_t bytes)
{
	if (!dev || !p)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
#endif
	return 0;
}

int strata_dev_host_unregister(strata_dev *dev, void *p)
{
	if (!dev || !p)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaHostUnregister(p));
#endif
	return 0;
}

int strata_dev_copy(strata_dev *dev, void *dst, const void *src, size_t n, strata_stream *s)
{
	if (!dev || (n && (!dst || !src)))
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, (cudaStream_t)kstream(dev, s)));
#endif
	if (n)
		memmove(dst, src, n);
	return 0;
}

int strata_dev_memset(strata_dev *dev, void *dst, int byte, size_t n, strata_stream *s)
{
	if (!dev || (n && !dst))
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaMemsetAsync(dst, byte, n, (cudaStream_t)kstream(dev, s)));
#endif
	if (n)
		memset(dst, byte, n);
	return 0;
}

/* On the CPU backend a stream is a non-NULL token; work is done synchronously. */
static char cpu_stream_token;

int strata_stream_create(strata_dev *dev, strata_stream **out)
{
	if (!dev || !out)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu) {
		cudaStream_t st;
		int err = CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
		*out = err ? NULL : (strata_stream *)st;
		return err;
	}
#endif
	*out = (strata_stream *)&cpu_stream_token;
	return 0;
}

void strata_stream_destroy(strata_dev *dev, strata_stream *s)
{
	if (!dev || !s)
		return;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		(void)CU(cudaStreamDestroy((cudaStream_t)s));
#endif
}

int strata_stream_sync(strata_dev *dev, strata_stream *s)
{
	if (!dev)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaStreamSynchronize((cudaStream_t)kstream(dev, s)));
#endif
	return 0;
}

int strata_dev_sync(strata_dev *dev)
{
	if (!dev)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaDeviceSynchronize());
#endif
	return 0;
}

int strata_dev_profile(strata_dev *dev, int on)
{
	if (!dev)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(on ? cudaProfilerStart() : cudaProfilerStop());
#endif
	(void)on;
	return 0;
}

/* CPU events hold the monotonic time at which they were recorded. */
struct cpu_event {
	uint64_t ns;
};

int strata_event_create(strata_dev *dev, strata_event **out)
{
	if (!dev || !out)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu) {
		cudaEvent_t e;
		int err = CU(cudaEventCreate(&e));
		*out = err ? NULL : (strata_event *)e;
		return err;
	}
#endif
	struct cpu_event *e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	*out = (strata_event *)e;
	return 0;
}

void strata_event_destroy(strata_dev *dev, strata_event *e)
{
	if (!dev || !e)
		return;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu) {
		(void)CU(cudaEventDestroy((cudaEvent_t)e));
		return;
	}
#endif
	free(e);
}

int strata_event_record(strata_dev *dev, strata_event *e, strata_stream *s)
{
	if (!dev || !e)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)kstream(dev, s)));
#endif
	((struct cpu_event *)e)->ns = strata_now_ns();
	return 0;
}

int strata_stream_wait_event(strata_dev *dev, strata_stream *s, strata_event *e)
{
	if (!dev || !e)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaStreamWaitEvent((cudaStream_t)kstream(dev, s), (cudaEvent_t)e, 0));
#endif
	return 0;
}

int strata_event_sync(strata_dev *dev, strata_event *e)
{
	if (!dev || !e)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaEventSynchronize((cudaEvent_t)e));
#endif
	return 0;
}

int strata_event_elapsed_ms(strata_dev *dev, strata_event *a, strata_event *b, float *ms)
{
	if (!dev || !a || !b || !ms)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaEventElapsedTime(ms, (cudaEvent_t)a, (cudaEvent_t)b));
#endif
	*ms = (float)((double)(((struct cpu_event *)b)->ns - ((struct cpu_event *)a)->ns) / 1e6);
	return 0;
}

int strata_graph_begin(strata_dev *dev, strata_stream *s)
{
	if (!dev)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu) {
		if (!s) /* the legacy default stream cannot be captured */
			return -EINVAL;
		return CU(cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeThreadLocal));
	}
#endif
	(void)s;
	return -ENOTSUP;
}

int strata_graph_end(strata_dev *dev, strata_stream *s, strata_graph **out)
{
	if (!dev || !out)
		return -EINVAL;
	*out = NULL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu) {
		cudaGraph_t g = NULL;
		int err = CU(cudaStreamEndCapture((cudaStream_t)s, &g));
		cudaGraphExec_t x = NULL;
		if (!err)
			err = CU(cudaGraphInstantiate(&x, g, 0));
		if (g)
			(void)cudaGraphDestroy(g);
		*out = err ? NULL : (strata_graph *)x;
		return err;
	}
#endif
	(void)s;
	return -ENOTSUP;
}

int strata_graph_launch(strata_dev *dev, strata_graph *g, strata_stream *s)
{
	if (!dev || !g)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		return CU(cudaGraphLaunch((cudaGraphExec_t)g, (cudaStream_t)kstream(dev, s)));
#endif
	(void)s;
	return -ENOTSUP;
}

void strata_graph_destroy(strata_dev *dev, strata_graph *g)
{
	if (!dev || !g)
		return;
#ifdef STRATA_HAVE_CUDA
	if (dev->gpu)
		(void)cudaGraphExecDestroy((cudaGraphExec_t)g);
#endif
}

int strata_dev_check(strata_dev *dev, const char *what)
{
#ifdef STRATA_HAVE_CUDA
	if (dev && dev->gpu)
		return cuda_err(cudaGetLastError(), what, __FILE__, __LINE__);
#endif
	return 0;
}

#ifdef STRATA_HAVE_CUDA
static PFN_cuTensorMapEncodeTiled_v12000 tmap_enc;
static pthread_once_t tmap_once = PTHREAD_ONCE_INIT;

static void tmap_find_encoder(void)
{
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
					     &q) != cudaSuccess ||
	    q != cudaDriverEntryPointSuccess) {
		(void)cudaGetLastError();
		fn = NULL;
	}
	tmap_enc = (PFN_cuTensorMapEncodeTiled_v12000)fn;
}

int strata_dev_tmap_rows(void *tmap, const void *base, uint32_t row_bytes, uint64_t rows,
			 uint32_t box_rows)
{
	static _Thread_local struct {
		const void *base;
		uint32_t row_bytes, box_rows;
		uint64_t rows;
		CUtensorMap map;
	} last;
	pthread_once(&tmap_once, tmap_find_encoder);
	if (!tmap_enc)
		return -ENOTSUP;
	if (last.base && last.base == base && last.row_bytes == row_bytes && last.rows == rows &&
	    last.box_rows == box_rows) {
		memcpy(tmap, &last.map, sizeof last.map);
		return 0;
	}
	const cuuint64_t dims[2] = { row_bytes, rows };
	const cuuint64_t strides[1] = { row_bytes };
	const cuuint32_t box[2] = { row_bytes, box_rows };
	const cuuint32_t es[2] = { 1, 1 };
	CUtensorMap m;
	if (tmap_enc(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)base, dims, strides, box, es,
		     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
		     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
		return -EINVAL;
	memcpy(tmap, &m, sizeof m);
	last.base = base, last.row_bytes = row_bytes, last.rows = rows, last.box_rows = box_rows;
	last.map = m;
	return 0;
}
#endif
