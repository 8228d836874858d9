/* The memory page backend: pages in process memory, gone at close. Used by tests of the
 * store logic and by a store opened without a page file. Locations are slot ids. */
#include "cachemgr/prefix_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct mem_pages {
	pfx_pages base;
	void **slot;
	uint32_t *len;
	uint64_t n, cap, bytes, hint;
	pfx_io **done;       /* reads submitted (done at once) and not yet reaped */
	int n_done, cap_done, head;
} mem_pages;

static int write_one(mem_pages *m, pfx_io *io)
{
	uint64_t s = m->hint;
	while (s < m->n && m->slot[s])
		s++;
	if (s == m->cap) {
		uint64_t cap = m->cap ? m->cap * 2 : 256;
		void **ns = realloc(m->slot, cap * sizeof *ns);
		if (ns)
			m->slot = ns;
		uint32_t *nl = realloc(m->len, cap * sizeof *nl);
		if (nl)
			m->len = nl;
		if (!ns || !nl)
			return -ENOMEM;
		m->cap = cap;
	}
	void *p = malloc(io->len ? io->len : 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, io->src, io->len);
	if (s == m->n)
		m->n++;
	m->slot[s] = p;
	m->len[s] = io->len;
	m->bytes += io->len;
	m->hint = s + 1;
	io->addr = s;
	io->csum = XXH3_64bits(io->src, io->len);
	return 0;
}

static int mem_write(pfx_pages *ps, pfx_io *ios, int n)
{
	int first = 0;
	for (int i = 0; i < n; i++)
		if ((ios[i].result = write_one((mem_pages *)ps, &ios[i])) && !first)
			first = ios[i].result;
	return first;
}

static int mem_sync(pfx_pages *ps) { return 0; }

static int mem_read(pfx_pages *ps, pfx_io *ios, int n)
{
	mem_pages *m = (mem_pages *)ps;
	int first = 0;
	for (int i = 0; i < n; i++) {
		pfx_io *io = &ios[i];
		io->result = 0;
		if (io->addr >= m->n || !m->slot[io->addr] || m->len[io->addr] != io->len)
			io->result = STRATA_E_CORRUPT;
		else if (XXH3_64bits(m->slot[io->addr], io->len) != io->csum)
			io->result = STRATA_E_CHECKSUM;
		if (io->result) {
			memset(io->dst, 0, io->len);
			if (!first)
				first = io->result;
		} else {
			memcpy(io->dst, m->slot[io->addr], io->len);
		}
	}
	return first;
}

/* Reads are done at submit; reap hands them back in order. */
static int mem_submit(pfx_pages *ps, pfx_io *const *ios, int n)
{
	mem_pages *m = (mem_pages *)ps;
	if (m->head == m->n_done)
		m->head = m->n_done = 0;
	if (m->n_done + n > m->cap_done) {
		int cap = (m->n_done + n) * 2;
		pfx_io **nd = realloc(m->done, (size_t)cap * sizeof *nd);
		if (!nd)
			return m->head < m->n_done ? 0 : -ENOMEM;
		m->done = nd;
		m->cap_done = cap;
	}
	for (int i = 0; i < n; i++) {
		mem_read(ps, ios[i], 1);
		m->done[m->n_done++] = ios[i];
	}
	return n;
}

static int mem_reap(pfx_pages *ps, int min, pfx_io **done, int max)
{
	mem_pages *m = (mem_pages *)ps;
	int k = 0;
	while (k < max && m->head < m->n_done)
		done[k++] = m->done[m->head++];
	return k;
}

static int mem_inflight(pfx_pages *ps)
{
	mem_pages *m = (mem_pages *)ps;
	return m->n_done - m->head;
}

static void mem_release(pfx_pages *ps, uint64_t addr, uint32_t len, uint64_t csum)
{
	mem_pages *m = (mem_pages *)ps;
	if (addr >= m->n || !m->slot[addr])
		return;
	free(m->slot[addr]);
	m->slot[addr] = NULL;
	m->bytes -= m->len[addr];
	if (addr < m->hint)
		m->hint = addr;
}

/* A memory store never outlives its process: nothing to recover. */
static int mem_mark(pfx_pages *ps, uint64_t addr, uint32_t len, uint64_t csum)
{
	return STRATA_E_NOTFOUND;
}
static int mem_finish(pfx_pages *ps) { return 0; }
static uint64_t mem_allocated(pfx_pages *ps) { return ((mem_pages *)ps)->bytes; }
static uint64_t mem_footprint(uint32_t len) { return len; }

static void mem_destroy(pfx_pages *ps)
{
	mem_pages *m = (mem_pages *)ps;
	for (uint64_t s = 0; s < m->n; s++)
		free(m->slot[s]);
	free(m->slot);
	free(m->len);
	free(m->done);
	free(m);
}

static const pfx_pages_ops mem_ops = { mem_write,     mem_sync,     mem_read,  mem_submit,
				       mem_reap,      mem_inflight, mem_release, mem_mark,
				       mem_finish,    mem_allocated, mem_footprint, mem_destroy };

int pfx_pages_mem_create(pfx_pages **out)
{
	mem_pages *m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	m->base.ops = &mem_ops;
	m->base.tier = PFX_TIER_MEM;
	*out = &m->base;
	return 0;
}
