/* The selected-entry gather: CPU twin, dispatcher, and the CPU side of the benchmark
 * baselines. The twin moves the same bytes as gather.cu, entry by entry. */
#include "gather_int.h"

#include <errno.h>
#include <string.h>

static int space_ok(const strata_entry_space *sp)
{
	if (sp->B <= 0 || (sp->packed && (sp->packed < STRATA_MAIN_ENTRY_BYTES || sp->packed % 16)))
		return 0;
	return sp->blocks ? sp->max_blocks > 0 : sp->base != NULL;
}

static int params_ok(const strata_gather_params *p)
{
	return p && p->n >= 0 && space_ok(&p->src) && space_ok(&p->dst) &&
	       (p->per_warp == 0 || p->per_warp == 1 || p->per_warp == 2 || p->per_warp == 4 ||
		p->per_warp == 8 || p->per_warp == 16) &&
	       (p->l2_prefetch == 0 || p->l2_prefetch == 64 || p->l2_prefetch == 128 ||
		p->l2_prefetch == 256);
}

int strata_k_gather_cpu(const strata_gather_params *p)
{
	if (!params_ok(p))
		return -EINVAL;
	int n = p->n;
	if (p->n_dev && *p->n_dev < n)
		n = *p->n_dev;
	for (int i = 0; i < n; i++) {
		int sid = p->src_ids ? p->src_ids[i] : i;
		int did = p->dst_ids ? p->dst_ids[i] : i;
		if (sid < 0 || did < 0)
			continue;
		int st = p->src_tab ? p->src_tab[i] : 0, dt = p->dst_tab ? p->dst_tab[i] : 0;
		uint8_t *sb = gather_block(&p->src, st, sid), *db = gather_block(&p->dst, dt, did);
		memcpy(gather_data(&p->dst, db, did), gather_data(&p->src, sb, sid),
		       STRATA_MAIN_DATA_BYTES);
		memcpy(gather_scale(&p->dst, db, did), gather_scale(&p->src, sb, sid),
		       STRATA_MAIN_SCALE_BYTES);
	}
	return 0;
}

int strata_k_gather(strata_dev *dev, const strata_gather_params *p, strata_stream *s)
{
	if (!dev || !params_ok(p))
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_k_gather_gpu(dev, p, s);
#endif
	return strata_k_gather_cpu(p);
}

int strata_bench_gather_baseline(strata_dev *dev, const strata_gather_params *p,
				 strata_gather_baseline how, strata_stream *s)
{
	if (!dev || !params_ok(p) || p->n_dev || p->src.blocks || p->dst.blocks)
		return -EINVAL;
	if (how != STRATA_GATHER_BASELINE_EACH && how != STRATA_GATHER_BASELINE_BATCH)
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_bench_gather_baseline_gpu(dev, p, how, s);
#endif
	return strata_k_gather_cpu(p);
}
