/* The NVMe page backend: the tiers NVMe store (io_uring, O_DIRECT, verified reads).
 * Batches go through strata_nvme_submit/reap so that a restore keeps the queue full;
 * one page at a time would run at queue depth 1. */
#include "cachemgr/prefix_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct nvme_pages {
	pfx_pages base;
	strata_nvme_store *s;
} nvme_pages;

static strata_page_handle handle_of(uint64_t addr, uint32_t len, uint64_t csum)
{
	strata_page_handle h = { STRATA_TIER_NVME, 0, addr, len, csum };
	return h;
}

/* Run n ops through the ring, keeping it full; results land in ios[op.user]. */
static int run(nvme_pages *np, pfx_io *ios, int n, strata_nvme_op_kind kind)
{
	if (n <= 0)
		return 0;
	strata_nvme_op *ops = calloc((size_t)n, sizeof *ops);
	strata_nvme_op **ptr = calloc((size_t)n, sizeof *ptr);
	strata_nvme_op *done[64];
	int err = 0, first = 0;
	if (!ops || !ptr) {
		err = -ENOMEM;
		goto out;
	}
	/* Results are -ECANCELED until an op comes back. */
	for (int i = 0; i < n; i++) {
		strata_nvme_op *op = &ops[i];
		op->kind = kind;
		op->user = (uint64_t)i;
		op->len = ios[i].len;
		if (kind == STRATA_NVME_OP_WRITE) {
			op->key.lo = pfx_le64(ios[i].key);
			op->key.hi = pfx_le64(ios[i].key + 8);
			op->buf = (void *)ios[i].src; /* the store only reads a write's buffer */
		} else {
			op->buf = ios[i].dst;
			op->handle = handle_of(ios[i].addr, ios[i].len, ios[i].csum);
		}
		ptr[i] = op;
	}
	int sub = 0, fin = 0;
	while (fin < n) {
		if (sub < n) {
			int k = strata_nvme_submit(np->s, ptr + sub, n - sub);
			if (k < 0 && strata_nvme_inflight(np->s) == 0) {
				for (int i = sub; i < n; i++)
					ios[i].result = k;
				err = first ? first : k;
				fin += n - sub;
				sub = n;
				continue;
			}
			if (k > 0)
				sub += k;
		}
		int r = strata_nvme_reap(np->s, 1, done, 64);
		if (r < 0) {
			err = r; /* the ring is broken: nothing more will come back */
			goto out; /* ops not reaped keep -ECANCELED */
		}
		for (int j = 0; j < r; j++) {
			strata_nvme_op *op = done[j];
			pfx_io *io = &ios[op->user];
			io->result = op->result;
			if (!op->result && kind == STRATA_NVME_OP_WRITE) {
				io->addr = op->handle.location;
				io->csum = op->handle.checksum;
			}
			if (op->result && !first)
				first = op->result;
		}
		fin += r;
	}
	if (!err)
		err = first;
out:
	free(ops);
	free(ptr);
	return err;
}

static int nv_write(pfx_pages *ps, pfx_io *ios, int n)
{
	for (int i = 0; i < n; i++)
		ios[i].result = -ECANCELED;
	return run((nvme_pages *)ps, ios, n, STRATA_NVME_OP_WRITE);
}

static int nv_read(pfx_pages *ps, pfx_io *ios, int n)
{
	for (int i = 0; i < n; i++)
		ios[i].result = -ECANCELED;
	return run((nvme_pages *)ps, ios, n, STRATA_NVME_OP_READ);
}

static int nv_submit(pfx_pages *ps, pfx_io *const *ios, int n)
{
	nvme_pages *np = (nvme_pages *)ps;
	strata_nvme_op *ptr[64];
	int taken = 0;
	while (taken < n) {
		int k = n - taken < 64 ? n - taken : 64;
		for (int i = 0; i < k; i++) {
			pfx_io *io = ios[taken + i];
			strata_nvme_op *op = &io->op;
			memset(op, 0, sizeof *op);
			op->kind = STRATA_NVME_OP_READ;
			op->buf = io->dst;
			op->len = io->len;
			op->handle = handle_of(io->addr, io->len, io->csum);
			op->user = (uint64_t)(uintptr_t)io;
			io->result = -ECANCELED;
			ptr[i] = op;
		}
		int r = strata_nvme_submit(np->s, ptr, k);
		if (r < 0) {
			/* A full queue is not an error while reads are in flight to reap. */
			if (taken || strata_nvme_inflight(np->s) > 0)
				break;
			return r;
		}
		taken += r;
		if (r < k)
			break;
	}
	return taken;
}

static int nv_reap(pfx_pages *ps, int min, pfx_io **done, int max)
{
	strata_nvme_op *ops[64];
	int k = max < 64 ? max : 64;
	int r = strata_nvme_reap(((nvme_pages *)ps)->s, min < k ? min : k, ops, k);
	for (int i = 0; i < r; i++) {
		pfx_io *io = (pfx_io *)(uintptr_t)ops[i]->user;
		io->result = ops[i]->result;
		done[i] = io;
	}
	return r;
}

static int nv_inflight(pfx_pages *ps) { return strata_nvme_inflight(((nvme_pages *)ps)->s); }

static int nv_sync(pfx_pages *ps) { return strata_nvme_sync(((nvme_pages *)ps)->s); }

static void nv_release(pfx_pages *ps, uint64_t addr, uint32_t len, uint64_t csum)
{
	strata_page_handle h = handle_of(addr, len, csum);
	int err = strata_nvme_free(((nvme_pages *)ps)->s, &h);
	if (err)
		STRATA_LOG(STRATA_LOG_WARN, STRATA_SUB_CACHEMGR, "prefix: freeing page at %llu: %s",
			   (unsigned long long)addr, strata_strerror(err));
}

static int nv_mark(pfx_pages *ps, uint64_t addr, uint32_t len, uint64_t csum)
{
	strata_page_handle h = handle_of(addr, len, csum);
	return strata_nvme_mark_live(((nvme_pages *)ps)->s, &h);
}

static int nv_finish(pfx_pages *ps)
{
	strata_nvme_info info = STRATA_NVME_INFO_INIT;
	nvme_pages *np = (nvme_pages *)ps;
	int err = strata_nvme_get_info(np->s, &info);
	if (err || !info.recovering)
		return err;
	return strata_nvme_recover_done(np->s);
}

static uint64_t nv_allocated(pfx_pages *ps)
{
	strata_tier_stats st = STRATA_TIER_STATS_INIT;
	if (strata_nvme_stats(((nvme_pages *)ps)->s, &st))
		return 0;
	return st.used_bytes;
}

static uint64_t nv_footprint(uint32_t len) { return strata_nvme_record_bytes(len); }

static void nv_destroy(pfx_pages *ps)
{
	nvme_pages *np = (nvme_pages *)ps;
	strata_nvme_destroy(np->s);
	free(np);
}

static const pfx_pages_ops nvme_ops = { nv_write,     nv_sync,      nv_read,    nv_submit,
					nv_reap,      nv_inflight,  nv_release, nv_mark,
					nv_finish,    nv_allocated, nv_footprint, nv_destroy };

int pfx_pages_nvme_create(const char *path, uint64_t capacity, strata_dev *dev, pfx_pages **out)
{
	nvme_pages *np = calloc(1, sizeof *np);
	if (!np)
		return -ENOMEM;
	strata_nvme_config cfg = STRATA_NVME_CONFIG_INIT;
	cfg.path = path;
	cfg.capacity_bytes = capacity;
	cfg.flags = STRATA_NVME_CREATE | STRATA_NVME_REUSE;
	int err = strata_nvme_open(&cfg, &np->s);
	if (err) {
		free(np);
		return err;
	}
	np->base.ops = &nvme_ops;
	np->base.tier = PFX_TIER_NVME;
	np->base.nvme = np->s;
	*out = &np->base;
	return 0;
}
