/* The NVMe store's free space: a sorted array of free extents in 4 KiB blocks, first
 * fit, coalesced on free. First fit keeps live records packed towards the start of the
 * file (short seeks on disks that care, and a small free list after churn); the array
 * is O(fragments) per insert, which stays small for the store's workload (pages of a
 * few sizes, freed in runs). A buddy allocator would waste up to half of each 37,440 B
 * page's extent. */
#define _GNU_SOURCE
#include "tiers_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int extents_init(extent_map *m, uint64_t first, uint64_t blocks)
{
	memset(m, 0, sizeof *m);
	m->cap = 16;
	m->v = malloc(m->cap * sizeof *m->v);
	if (!m->v)
		return -ENOMEM;
	m->total = blocks;
	m->free = blocks;
	if (blocks)
		m->v[m->n++] = (extent){ first, blocks };
	return 0;
}

void extents_fini(extent_map *m)
{
	free(m->v);
	memset(m, 0, sizeof *m);
}

/* Index of the first free extent whose start is > b. */
static size_t upper(const extent_map *m, uint64_t b)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->v[mid].start > b)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static int grow(extent_map *m)
{
	if (m->n < m->cap)
		return 0;
	size_t cap = m->cap * 2;
	extent *v = realloc(m->v, cap * sizeof *v);
	if (!v)
		return -ENOMEM;
	m->v = v;
	m->cap = cap;
	return 0;
}

int extents_alloc(extent_map *m, uint64_t len, uint64_t *start)
{
	if (!len)
		return -EINVAL;
	for (size_t i = 0; i < m->n; i++) {
		if (m->v[i].len < len)
			continue;
		*start = m->v[i].start;
		m->v[i].start += len;
		m->v[i].len -= len;
		if (!m->v[i].len) {
			memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
			m->n--;
		}
		m->free -= len;
		return 0;
	}
	return -ENOSPC;
}

int extents_free(extent_map *m, uint64_t start, uint64_t len)
{
	if (!len || start + len < start)
		return -EINVAL;
	size_t i = upper(m, start); /* v[i-1].start <= start < v[i].start */
	extent *prev = i ? &m->v[i - 1] : NULL, *next = i < m->n ? &m->v[i] : NULL;
	if (prev && prev->start + prev->len > start)
		return -EINVAL; /* overlaps free space: a double free */
	if (next && start + len > next->start)
		return -EINVAL;
	bool join_prev = prev && prev->start + prev->len == start;
	bool join_next = next && start + len == next->start;
	if (join_prev && join_next) {
		prev->len += len + next->len;
		memmove(next, next + 1, (m->n - i - 1) * sizeof *m->v);
		m->n--;
	} else if (join_prev) {
		prev->len += len;
	} else if (join_next) {
		next->start = start;
		next->len += len;
	} else {
		int err = grow(m);
		if (err)
			return err;
		memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
		m->v[i] = (extent){ start, len };
		m->n++;
	}
	m->free += len;
	return 0;
}

int extents_take(extent_map *m, uint64_t start, uint64_t len)
{
	if (!len || start + len < start)
		return -EINVAL;
	size_t i = upper(m, start);
	if (!i)
		return -EINVAL;
	extent *e = &m->v[i - 1];
	if (e->start + e->len < start + len)
		return -EINVAL;
	uint64_t before = start - e->start, after = e->start + e->len - (start + len);
	if (before && after) {
		int err = grow(m);
		if (err)
			return err;
		e = &m->v[i - 1];
		memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
		m->v[i] = (extent){ start + len, after };
		m->n++;
		e->len = before;
	} else if (before) {
		e->len = before;
	} else if (after) {
		e->start = start + len;
		e->len = after;
	} else {
		memmove(e, e + 1, (m->n - i) * sizeof *m->v);
		m->n--;
	}
	m->free -= len;
	return 0;
}

uint64_t extents_largest(const extent_map *m)
{
	uint64_t best = 0;
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].len > best)
			best = m->v[i].len;
	return best;
}
