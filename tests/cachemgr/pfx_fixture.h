/* Shared by the prefix-store tests and the crash test: synthetic sequences whose page
 * and state bytes are a function of the prefix (the block key), so that two sequences
 * sharing a prefix carry the same bytes for it, as a real engine's would. */
#ifndef STRATA_PFX_FIXTURE_H
#define STRATA_PFX_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cachemgr/cachemgr.h"

/* splitmix64 (the same generator as tests/testutil.h; the benchmark uses this header
 * without Check). */
static inline uint64_t fx_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

typedef struct fx_seq {
	strata_model m;
	uint32_t n_pages;
	uint32_t *tokens;
	uint8_t (*keys)[16];
	uint8_t *pages[STRATA_MAX_LAYERS][STRATA_PFX_FAMILIES];
	const void **ptr[STRATA_MAX_LAYERS][STRATA_PFX_FAMILIES];
	int n_ck;
	strata_prefix_state *ck;
	uint8_t *state;               /* n_ck * per-checkpoint state bytes */
	strata_prefix_snapshot snap;
} fx_seq;

static inline void fx_fill(uint8_t *p, size_t n, uint64_t seed)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = fx_next(&seed);
		memcpy(p + i, &v, 8);
	}
	for (uint64_t v = fx_next(&seed); i < n; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

static inline uint64_t fx_seed(const uint8_t key[16], int layer, int kind)
{
	uint64_t s;
	memcpy(&s, key, 8);
	return s ^ ((uint64_t)layer << 40) ^ ((uint64_t)kind << 56);
}

static inline size_t fx_state_bytes(const strata_model *m)
{
	size_t b = 0;
	for (int l = 0; l < m->n_layers; l++)
		b += strata_prefix_ring_bytes(m) + strata_prefix_comp_bytes(m, l);
	return b;
}

/* Tokens: the first `shared` blocks from family_seed, the rest from own_seed. */
static inline fx_seq *fx_seq_make(const strata_model *m, uint32_t n_pages, uint32_t shared,
				  uint64_t family_seed, uint64_t own_seed, int K)
{
	fx_seq *s = calloc(1, sizeof *s);
	s->m = *m;
	s->n_pages = n_pages;
	s->tokens = malloc((size_t)n_pages * 256 * 4 + 4);
	s->keys = malloc((size_t)n_pages * 16 + 16);
	for (uint32_t i = 0; i < n_pages * 256u; i++)
		s->tokens[i] = (uint32_t)fx_next(i < shared * 256u ? &family_seed : &own_seed) % 129280u;
	strata_prefix_keys(m, s->tokens, n_pages, s->keys);
	strata_prefix_snapshot snap = STRATA_PREFIX_SNAPSHOT_INIT;
	s->snap = snap;
	s->snap.n_pages = n_pages;
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			if (!strata_prefix_has(m, l, (strata_prefix_family)f))
				continue;
			size_t pb = strata_prefix_page_bytes(m, (strata_prefix_family)f);
			s->pages[l][f] = malloc(pb * n_pages);
			s->ptr[l][f] = malloc(sizeof(void *) * n_pages);
			for (uint32_t p = 0; p < n_pages; p++) {
				fx_fill(s->pages[l][f] + p * pb, pb, fx_seed(s->keys[p], l, f));
				s->ptr[l][f][p] = s->pages[l][f] + p * pb;
			}
			s->snap.pages[l][f] = (const void *const *)s->ptr[l][f];
		}
	/* Checkpoints at every K pages and at the end. */
	for (uint32_t p = 1; p <= n_pages; p++)
		s->n_ck += (p % (uint32_t)K == 0 || p == n_pages);
	s->ck = calloc((size_t)s->n_ck, sizeof *s->ck);
	size_t sb = fx_state_bytes(m);
	s->state = malloc(sb * (size_t)s->n_ck);
	int c = 0;
	for (uint32_t p = 1; p <= n_pages; p++) {
		if (!(p % (uint32_t)K == 0 || p == n_pages))
			continue;
		uint8_t *b = s->state + sb * (size_t)c;
		s->ck[c].pages = p;
		for (int l = 0; l < m->n_layers; l++) {
			size_t ring = strata_prefix_ring_bytes(m), comp = strata_prefix_comp_bytes(m, l);
			fx_fill(b, ring + comp, fx_seed(s->keys[p - 1], l, 9));
			s->ck[c].ring[l] = b;
			s->ck[c].comp[l] = comp ? b + ring : NULL;
			b += ring + comp;
		}
		c++;
	}
	s->snap.n_ckpt = s->n_ck;
	s->snap.ckpt = s->ck;
	return s;
}

static inline void fx_seq_free(fx_seq *s)
{
	if (!s)
		return;
	for (int l = 0; l < STRATA_MAX_LAYERS; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			free(s->pages[l][f]);
			free(s->ptr[l][f]);
		}
	free(s->ck);
	free(s->state);
	free(s->keys);
	free(s->tokens);
	free(s);
}

/* 0 when out holds exactly rank's pages of the first out->total_pages pages of s, and
 * the state at that point; else a line number that names the first difference. */
static inline int fx_check_restored(const fx_seq *s, const strata_prefix_restored *out)
{
	const strata_model *m = &s->m;
	uint32_t d = out->total_pages;
	uint32_t want = (uint32_t)out->rank < d ? (d - 1 - (uint32_t)out->rank) / (uint32_t)out->P + 1 : 0;
	if (out->n_pages != want)
		return __LINE__;
	for (uint32_t j = 0; j < out->n_pages; j++) {
		uint32_t p = out->page_ids[j];
		if (p % (uint32_t)out->P != (uint32_t)out->rank || (j && p <= out->page_ids[j - 1]))
			return __LINE__;
		for (int l = 0; l < m->n_layers; l++)
			for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
				size_t pb = strata_prefix_page_bytes(m, (strata_prefix_family)f);
				if (!s->pages[l][f]) {
					if (out->pages[l][f])
						return __LINE__;
					continue;
				}
				/* CPU backend here: device memory is host memory. */
				if (memcmp((const uint8_t *)out->pages[l][f] + j * pb,
					   s->pages[l][f] + p * pb, pb))
					return __LINE__;
			}
	}
	const strata_prefix_state *ck = NULL;
	for (int c = 0; c < s->n_ck; c++)
		if (s->ck[c].pages == d)
			ck = &s->ck[c];
	if (!ck)
		return __LINE__;
	for (int l = 0; l < m->n_layers; l++) {
		size_t comp = strata_prefix_comp_bytes(m, l);
		if (memcmp(out->ring[l], ck->ring[l], strata_prefix_ring_bytes(m)) ||
		    (comp && memcmp(out->comp[l], ck->comp[l], comp)) || (!comp && out->comp[l]))
			return __LINE__;
	}
	return 0;
}

static inline char *fx_tmpdir(void)
{
	char tmpl[] = "/tmp/strata-pfx-XXXXXX";
	char *d = mkdtemp(tmpl);
	return d ? strdup(d) : NULL;
}

static inline void fx_rmdir(const char *dir)
{
	char cmd[8192];
	if (snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) >= (int)sizeof cmd)
		return;
	if (system(cmd)) {
	}
}

static inline int fx_open(const char *dir, const strata_model *m, uint64_t budget_nvme,
			  uint64_t budget_host, strata_prefix **out)
{
	strata_prefix_config cfg = STRATA_PREFIX_CONFIG_INIT;
	cfg.dir = dir;
	cfg.model = m;
	cfg.checkpoint_blocks = 4;
	cfg.budget_nvme = budget_nvme;
	cfg.budget_host = budget_host;
	cfg.store_bytes = 256ull << 20;
	return strata_prefix_open(&cfg, out);
}

#endif
