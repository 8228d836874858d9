/* Selection generators for tests and benchmarks (prefetch.h). The structured one
 * imitates what sparse-attention traces show: selections concentrate on a few regions
 * ("topics") that move slowly, keep a good part of the previous step's choice, pick
 * neighbours of previous ids, and now and then something recent. Its parameters were
 * set so that successive selections overlap by ~40% (the published figure for mid
 * layers is 35-50%); benchmarks report the overlap they measured, not this intent. */
#include "prefetch/prefetch.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOPICS 4

struct strata_selgen {
	strata_selgen_kind kind;
	int n, k, n_prev;
	uint64_t rng;
	double keep;
	double centre[TOPICS];
	int32_t *prev, *cur;
	uint8_t *mark; /* [n]: id taken in the selection being built */
	int mark_n;
};

static uint64_t next_u64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static double unit(uint64_t *s) /* [0, 1) */
{
	return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}
static int below(uint64_t *s, int n) /* [0, n) */
{
	return (int)(unit(s) * n);
}
static double normal(uint64_t *s)
{
	double u = unit(s), v = unit(s);
	return sqrt(-2.0 * log(u > 1e-300 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

static int grow_marks(strata_selgen *g)
{
	if (g->mark_n >= g->n)
		return 0;
	uint8_t *m = realloc(g->mark, (size_t)g->n);
	if (!m)
		return -ENOMEM;
	g->mark = m;
	g->mark_n = g->n;
	return 0;
}

int strata_selgen_create(strata_selgen_kind kind, int n, int k, uint64_t seed,
			 strata_selgen **out)
{
	if (!out || n <= 0 || k <= 0 ||
	    (kind != STRATA_SELGEN_UNIFORM && kind != STRATA_SELGEN_STRUCTURED))
		return -EINVAL;
	*out = NULL;
	strata_selgen *g = calloc(1, sizeof *g);
	if (!g)
		return -ENOMEM;
	g->kind = kind;
	g->n = n;
	g->k = k;
	g->rng = seed ^ 0x5e1ec7ed5e1ec7edull;
	g->keep = 0.4;
	g->prev = malloc((size_t)k * sizeof *g->prev);
	g->cur = malloc((size_t)k * sizeof *g->cur);
	if (!g->prev || !g->cur || grow_marks(g)) {
		strata_selgen_destroy(g);
		return -ENOMEM;
	}
	memset(g->mark, 0, (size_t)g->mark_n);
	for (int t = 0; t < TOPICS; t++)
		g->centre[t] = unit(&g->rng) * n;
	*out = g;
	return 0;
}

void strata_selgen_destroy(strata_selgen *g)
{
	if (!g)
		return;
	free(g->prev);
	free(g->cur);
	free(g->mark);
	free(g);
}

void strata_selgen_set_keep(strata_selgen *g, double keep)
{
	if (g && keep >= 0.0 && keep <= 1.0)
		g->keep = keep;
}

void strata_selgen_set_n(strata_selgen *g, int n)
{
	if (!g || n < g->n)
		return;
	int old = g->mark_n;
	g->n = n;
	if (grow_marks(g)) {
		g->n = old; /* keep the old range rather than fail */
		return;
	}
	memset(g->mark + old, 0, (size_t)(g->mark_n - old));
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

static int add(strata_selgen *g, int *cnt, long id)
{
	if (id < 0 || id >= g->n || g->mark[id])
		return 0;
	g->mark[id] = 1;
	g->cur[(*cnt)++] = (int32_t)id;
	return 1;
}

int strata_selgen_next(strata_selgen *g, int32_t *out)
{
	if (!g || !out)
		return -EINVAL;
	int want = g->k < g->n ? g->k : g->n, cnt = 0;
	if (want == g->n) { /* everything fits: the indexer selects all */
		for (int i = 0; i < want; i++)
			g->cur[cnt++] = i;
	} else if (g->kind == STRATA_SELGEN_UNIFORM) {
		while (cnt < want)
			add(g, &cnt, below(&g->rng, g->n));
	} else {
		double width = 0.5 * g->k; /* each topic spreads over ~2k ids */
		for (int i = 0; i < g->n_prev && cnt < want; i++)
			if (unit(&g->rng) < g->keep)
				add(g, &cnt, g->prev[i]);
		int neigh = want / 5;
		for (int i = 0; i < 4 * neigh && neigh > 0 && g->n_prev; i++) {
			int32_t base = g->prev[below(&g->rng, g->n_prev)];
			int off = 1 + below(&g->rng, 2);
			if (add(g, &cnt, unit(&g->rng) < 0.5 ? base - off : base + off))
				neigh--;
			if (cnt >= want)
				break;
		}
		for (int i = 0; i < want / 32 && cnt < want; i++)
			add(g, &cnt, g->n - 1 - below(&g->rng, g->n < 64 ? g->n : 64));
		for (long tries = 0; cnt < want; tries++) {
			if (tries > 64L * want) { /* crowded: finish uniformly */
				add(g, &cnt, below(&g->rng, g->n));
				continue;
			}
			int t = below(&g->rng, TOPICS);
			long id = lround(g->centre[t] + normal(&g->rng) * width);
			add(g, &cnt, ((id % g->n) + g->n) % g->n);
		}
		for (int t = 0; t < TOPICS; t++) {
			if (unit(&g->rng) < 0.03)
				g->centre[t] = unit(&g->rng) * g->n;
			else
				g->centre[t] = fmod(g->centre[t] + normal(&g->rng) * 0.05 * width + g->n,
						    (double)g->n);
		}
	}
	qsort(g->cur, (size_t)cnt, sizeof *g->cur, cmp_i32);
	for (int i = 0; i < cnt; i++)
		g->mark[g->cur[i]] = 0;
	memcpy(out, g->cur, (size_t)cnt * sizeof *out);
	for (int i = cnt; i < g->k; i++)
		out[i] = -1;
	memcpy(g->prev, g->cur, (size_t)cnt * sizeof *g->prev);
	g->n_prev = cnt;
	return cnt;
}

double strata_selgen_overlap(const int32_t *prev, const int32_t *cur, int k)
{
	int i = 0, j = 0, both = 0, n = 0;
	while (j < k && cur[j] >= 0) {
		while (i < k && prev[i] >= 0 && prev[i] < cur[j])
			i++;
		if (i < k && prev[i] == cur[j])
			both++;
		n++;
		j++;
	}
	return n ? (double)both / n : 0.0;
}
