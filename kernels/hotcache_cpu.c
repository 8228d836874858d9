/* Hot-cache residency: the CPU twin of hotcache.cu and the dispatcher.
 *
 * The twin is the specification. It walks each rl group's rows in order and, per row:
 *  1. looks every id up: a resident id is a hit (claimed by this call, so that nothing
 *     in this call evicts it); the first position of a non-resident id owns its miss,
 *     later positions of the same id are duplicates (counted as hits: no bytes move);
 *  2. counts the slots this call may take (hc_protected) and serves that many misses at
 *     most, in position order (PREFETCH: at most predict_max);
 *  3. finds each miss its victim with CLOCK: from rl's hand, skip protected slots, clear
 *     and skip referenced ones, take the first other one; the hand stops after it.
 *  4. writes the output (global slot or -1) for every position.
 * The GPU kernel evaluates step 3 a window of slots at a time with a prefix sum; since
 * a window never holds a slot twice and the hand stops right after the last victim, it
 * takes the same victims in the same order, clears the same reference bits and leaves
 * the hand in the same place. Tests compare the state word for word.
 * STEP and PREFETCH copy each victim's entry (host tier -> hot pool) as they take it;
 * the GPU kernel copies a row's victims together once CLOCK is done with the row. */
#include "gather_int.h"

#include <errno.h>
#include <string.h>

static int space_ok(const strata_entry_space *sp)
{
	return (sp->base || sp->blocks) && sp->B > 0 && (!sp->blocks || sp->max_blocks > 0) &&
	       (!sp->packed || (sp->packed >= STRATA_MAIN_ENTRY_BYTES && sp->packed % 16 == 0));
}

/* Entry id of table rl in src to entry g of dst (the fetch of one miss). */
static void copy_entry(const strata_hotcache_params *p, int rl, int id, int g)
{
	uint8_t *sb = gather_block(&p->src, rl, id), *db = gather_block(&p->dst, 0, g);
	memcpy(gather_data(&p->dst, db, g), gather_data(&p->src, sb, id), STRATA_MAIN_DATA_BYTES);
	memcpy(gather_scale(&p->dst, db, g), gather_scale(&p->src, sb, id),
	       STRATA_MAIN_SCALE_BYTES);
}

static int hc_ok(const strata_hotcache_params *p)
{
	if (!p || p->op == 0 || p->op == 0xffffffffu || p->n_rows < 0 || p->n_rl <= 0 ||
	    p->max_entries <= 0 || p->budget <= 0 || !p->row_rl || !p->map || !p->owner ||
	    !p->slot_op || !p->slot_sel || !p->slot_ref || !p->slot_pf || !p->hand ||
	    !p->last_step || !p->claim || !p->last_sel || !p->last_n || !p->limit ||
	    !p->counters || !p->scratch || !p->err || p->sel_cap <= 0)
		return 0;
	switch (p->mode) {
	case STRATA_HC_STEP:
		return p->ids && p->k > 0 && p->list_cap >= p->k && space_ok(&p->src) &&
		       space_ok(&p->dst);
	case STRATA_HC_APPEND:
		return p->ids && p->out && p->k > 0 && p->list_cap >= p->k;
	case STRATA_HC_PREFETCH:
		return p->list_cap >= 2 * p->sel_cap + p->predict_recent && p->predict_max >= 0 &&
		       p->predict_recent >= 0 && space_ok(&p->src) && space_ok(&p->dst);
	}
	return 0;
}

/* The id at list position j of this row: a row of ids, or rl's PREFETCH candidates. */
static int list_id(const strata_hotcache_params *p, int rl, const int32_t *row, int n_last,
		   int j)
{
	int id = row ? row[j] : hc_candidate(p, rl, n_last, j);
	if (id >= p->max_entries) {
		*p->err |= STRATA_HC_ERR_RANGE;
		return -1;
	}
	return id;
}

static void process_list(const strata_hotcache_params *p, int rl, int32_t *miss,
			 const int32_t *row, int n_last, int L, int32_t *out)
{
	int32_t *map = p->map + (size_t)rl * p->max_entries;
	uint64_t *c = p->counters + (size_t)rl * STRATA_HC_NCOUNTERS;
	int base = rl * p->budget, m = 0, n_valid = 0, pf_used = 0;

	for (int j = 0; j < L; j++) {
		int id = list_id(p, rl, row, n_last, j);
		if (id < 0)
			continue;
		n_valid++;
		int v = map[id];
		if (v >= 0) {
			p->slot_op[v] = p->op;
			if (p->mode == STRATA_HC_STEP) {
				p->slot_sel[v] = p->op;
				p->slot_ref[v] = 1;
				if (p->slot_pf[v]) {
					p->slot_pf[v] = 0;
					pf_used++;
				}
			} else if (p->mode == STRATA_HC_APPEND) {
				p->slot_ref[v] = 1;
			}
		} else if (v == -1) {
			map[id] = HC_PENDING(j);
			miss[m++] = id;
		}
	}
	int free_slots = 0;
	for (int s = 0; s < p->budget; s++)
		free_slots += !hc_protected(p, rl, base + s);
	int m_eff = m < free_slots ? m : free_slots;
	if (p->mode == STRATA_HC_PREFETCH && m_eff > p->predict_max)
		m_eff = p->predict_max;

	int h = p->hand[rl];
	for (int t = 0; t < m_eff; t++) {
		int g;
		for (;;) {
			g = base + h;
			h = h + 1 == p->budget ? 0 : h + 1;
			if (hc_protected(p, rl, g))
				continue;
			if (p->slot_ref[g]) {
				p->slot_ref[g] = 0;
				continue;
			}
			break;
		}
		int id = miss[t], old = p->owner[g];
		if (old >= 0)
			map[old] = -1;
		p->owner[g] = id;
		map[id] = g;
		p->slot_op[g] = p->op;
		p->slot_sel[g] = p->mode == STRATA_HC_STEP ? p->op : 0;
		p->slot_ref[g] = p->mode != STRATA_HC_PREFETCH;
		p->slot_pf[g] = p->mode == STRATA_HC_PREFETCH;
		if (p->mode != STRATA_HC_APPEND)
			copy_entry(p, rl, id, g);
	}
	p->hand[rl] = h;
	for (int t = m_eff; t < m; t++)
		map[miss[t]] = -1;
	if (out)
		for (int j = 0; j < L; j++) {
			int id = list_id(p, rl, row, n_last, j);
			out[j] = id >= 0 && map[id] >= 0 ? map[id] : -1;
		}
	switch (p->mode) {
	case STRATA_HC_STEP:
		c[STRATA_HC_C_LOOKUPS] += (uint64_t)n_valid;
		c[STRATA_HC_C_HITS] += (uint64_t)(n_valid - m);
		c[STRATA_HC_C_MISSES] += (uint64_t)m_eff;
		c[STRATA_HC_C_OVERFLOW] += (uint64_t)(m - m_eff);
		c[STRATA_HC_C_PF_USED] += (uint64_t)pf_used;
		if (m_eff < m)
			*p->err |= STRATA_HC_ERR_OVERFLOW;
		break;
	case STRATA_HC_PREFETCH:
		c[STRATA_HC_C_PREFETCHED] += (uint64_t)m_eff;
		break;
	case STRATA_HC_APPEND:
		c[STRATA_HC_C_APPENDED] += (uint64_t)n_valid;
		break;
	}
}

static void process_group(const strata_hotcache_params *p, int rl, int r0, int r1)
{
	int32_t *miss = p->scratch + (size_t)r0 * p->list_cap;
	if (p->mode == STRATA_HC_PREFETCH) {
		int n_last = p->last_n[rl];
		process_list(p, rl, miss, NULL, n_last, hc_candidates(p, n_last), NULL);
		return;
	}
	for (int r = r0; r < r1; r++)
		process_list(p, rl, miss, p->ids + (size_t)r * p->k, 0, p->k,
			     p->out ? p->out + (size_t)r * p->k : NULL);
	if (p->mode == STRATA_HC_STEP) {
		int32_t *sel = p->last_sel + (size_t)rl * p->sel_cap;
		int n = 0;
		for (int r = r0; r < r1; r++)
			for (int j = 0; j < p->k && n < p->sel_cap; j++) {
				int id = p->ids[(size_t)r * p->k + j];
				if (id >= 0 && id < p->max_entries)
					sel[n++] = id;
			}
		p->last_n[rl] = n;
		p->last_step[rl] = p->op;
		p->counters[(size_t)rl * STRATA_HC_NCOUNTERS + STRATA_HC_C_STEPS]++;
	} else {
		int lim = p->limit[rl];
		for (int r = r0; r < r1; r++)
			for (int j = 0; j < p->k; j++) {
				int id = p->ids[(size_t)r * p->k + j];
				if (id >= lim && id < p->max_entries)
					lim = id + 1;
			}
		p->limit[rl] = lim;
	}
}

int strata_k_hotcache_cpu(const strata_hotcache_params *p)
{
	if (!hc_ok(p))
		return -EINVAL;
	for (int r0 = 0, r1; r0 < p->n_rows; r0 = r1) {
		int rl = p->row_rl[r0];
		for (r1 = r0 + 1; r1 < p->n_rows && p->row_rl[r1] == rl; r1++)
			;
		int bad = 0;
		if (rl < 0 || rl >= p->n_rl) {
			*p->err |= STRATA_HC_ERR_RANGE;
			bad = 1;
		} else if (p->claim[rl] == p->op) {
			*p->err |= STRATA_HC_ERR_SPLIT;
			bad = 1;
		}
		if (bad) {
			if (p->out)
				for (size_t i = (size_t)r0 * p->k; i < (size_t)r1 * p->k; i++)
					p->out[i] = -1;
			continue;
		}
		p->claim[rl] = p->op;
		process_group(p, rl, r0, r1);
	}
	return 0;
}

int strata_k_hotcache(strata_dev *dev, const strata_hotcache_params *p, strata_stream *s)
{
	if (!dev || !hc_ok(p))
		return -EINVAL;
#ifdef STRATA_HAVE_CUDA
	if (strata_dev_is_gpu(dev))
		return strata_k_hotcache_gpu(dev, p, s);
#endif
	return strata_k_hotcache_cpu(p);
}
