/* Prefix keys (the XXH3_128 chain), page and state sizes, and the in-memory block
 * index that lookup probes. */
#include "cachemgr/prefix_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define BLOCK STRATA_BLOCK_TOKENS

size_t strata_prefix_page_bytes(const strata_model *m, strata_prefix_family f)
{
	int b = m->block_tokens;
	switch (f) {
	case STRATA_PFX_C4_MAIN:
		return strata_main_block_stride(b / 4);
	case STRATA_PFX_C4_INDEX:
		return (size_t)(b / 4) * strata_index_entry_bytes(m->index_fmt);
	case STRATA_PFX_C128_MAIN:
		return strata_main_block_stride(b / 128);
	default:
		return 0;
	}
}

size_t strata_prefix_ring_bytes(const strata_model *m)
{
	return strata_main_block_stride(m->window);
}

/* FORMATS.md section 5: fp32 rows [kv (coff*d) | score (coff*d)], coff*ratio rows kept. */
size_t strata_prefix_comp_bytes(const strata_model *m, int layer)
{
	switch (m->ratio[layer]) {
	case 4: /* coff 2: 8 rows of main (d 512) and of indexer (d 128) state */
		return 8u * (2u * 2 * (size_t)m->head_dim + 2u * 2 * (size_t)m->index_dim) * 4;
	case 128: /* coff 1: 128 rows, d 512 */
		return 128u * (2u * (size_t)m->head_dim) * 4;
	default:
		return 0;
	}
}

bool strata_prefix_has(const strata_model *m, int layer, strata_prefix_family f)
{
	int r = m->ratio[layer];
	return f == STRATA_PFX_C128_MAIN ? r == 128 : r == 4;
}

/* Salt: the model fingerprint (every byte-format property of the geometry) and the
 * prefix format version, so a record written under other formats can never match. */
void pfx_salt(const strata_model *m, uint8_t salt[16])
{
	uint64_t fp = strata_model_fingerprint(m);
	uint64_t v = 0x7374726174615066ull ^ PFX_FORMAT_VERSION; /* "strataPf" */
	for (int i = 0; i < 8; i++) {
		salt[i] = (uint8_t)(fp >> (8 * i));
		salt[8 + i] = (uint8_t)(v >> (8 * i));
	}
}

/* h_i = XXH3_128(h_(i-1) || salt || tokens). One contiguous buffer and one one-shot
 * hash: cheaper than the streaming API for 1 KiB inputs. Tokens are hashed as
 * little-endian u32 so keys are the same on every host. */
void pfx_key_next(const uint8_t prev[16], const uint8_t salt[16], const uint32_t *tokens,
		  uint8_t out[16])
{
	uint8_t buf[32 + BLOCK * 4];
	memcpy(buf, prev, 16);
	memcpy(buf + 16, salt, 16);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(buf + 32, tokens, BLOCK * 4);
#else
	for (int i = 0; i < BLOCK; i++)
		for (int b = 0; b < 4; b++)
			buf[32 + 4 * i + b] = (uint8_t)(tokens[i] >> (8 * b));
#endif
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, sizeof buf));
	memcpy(out, c.digest, 16);
}

void strata_prefix_keys(const strata_model *m, const uint32_t *tokens, uint32_t n_blocks,
			uint8_t (*keys)[16])
{
	uint8_t salt[16], prev[16] = { 0 };
	pfx_salt(m, salt);
	for (uint32_t i = 0; i < n_blocks; i++) {
		pfx_key_next(prev, salt, tokens + (size_t)i * BLOCK, keys[i]);
		memcpy(prev, keys[i], 16);
	}
}

/* ---- block index ------------------------------------------------------------------- */

int pfx_index_init(pfx_index *ix)
{
	memset(ix, 0, sizeof *ix);
	ix->n_slots = 1024;
	ix->slots = malloc(ix->n_slots * sizeof *ix->slots);
	if (!ix->slots)
		return -ENOMEM;
	memset(ix->slots, 0xff, ix->n_slots * sizeof *ix->slots);
	return 0;
}

void pfx_index_free(pfx_index *ix)
{
	free(ix->nodes);
	free(ix->free_list);
	free(ix->slots);
	memset(ix, 0, sizeof *ix);
}

static uint32_t slot_of(const pfx_index *ix, const uint8_t key[16])
{
	return (uint32_t)pfx_le64(key) & (ix->n_slots - 1);
}

int32_t pfx_index_find(const pfx_index *ix, const uint8_t key[16])
{
	for (uint32_t s = slot_of(ix, key);; s = (s + 1) & (ix->n_slots - 1)) {
		int32_t v = ix->slots[s];
		if (v == -1)
			return -1;
		if (v >= 0 && !memcmp(ix->nodes[v].key, key, 16))
			return v;
	}
}

static void place(pfx_index *ix, int32_t n)
{
	uint32_t s = slot_of(ix, ix->nodes[n].key);
	while (ix->slots[s] >= 0)
		s = (s + 1) & (ix->n_slots - 1);
	if (ix->slots[s] == -2)
		ix->n_tomb--;
	ix->slots[s] = n;
}

/* Keep the table at most half full (tombstones included) so probes stay short. */
static int grow(pfx_index *ix)
{
	uint32_t want = ix->n_slots;
	while ((ix->n_used + 1) * 2 > want)
		want *= 2;
	int32_t *ns = malloc(want * sizeof *ns);
	if (!ns)
		return -ENOMEM;
	memset(ns, 0xff, want * sizeof *ns);
	free(ix->slots);
	ix->slots = ns;
	ix->n_slots = want;
	ix->n_tomb = 0;
	for (uint32_t i = 0; i < ix->n_nodes; i++)
		if (ix->nodes[i].used)
			place(ix, (int32_t)i);
	return 0;
}

int pfx_index_add(pfx_index *ix, const uint8_t key[16], int32_t *out)
{
	if ((ix->n_used + ix->n_tomb + 1) * 2 > ix->n_slots) {
		int err = grow(ix);
		if (err)
			return err;
	}
	int32_t n;
	uint32_t gen = 0;
	if (ix->n_free) {
		n = (int32_t)ix->free_list[--ix->n_free];
		gen = ix->nodes[n].gen;
	} else {
		if (ix->n_nodes == ix->cap_nodes) {
			uint32_t cap = ix->cap_nodes ? ix->cap_nodes * 2 : 256;
			pfx_node *nn = realloc(ix->nodes, cap * sizeof *nn);
			uint32_t *fl = realloc(ix->free_list, cap * sizeof *fl);
			if (nn)
				ix->nodes = nn;
			if (fl)
				ix->free_list = fl;
			if (!nn || !fl)
				return -ENOMEM;
			ix->cap_nodes = cap;
		}
		n = (int32_t)ix->n_nodes++;
	}
	pfx_node *nd = &ix->nodes[n];
	memset(nd, 0, sizeof *nd);
	nd->gen = gen;
	memcpy(nd->key, key, 16);
	nd->parent = -1;
	nd->used = 1;
	place(ix, n);
	ix->n_used++;
	*out = n;
	return 0;
}

void pfx_index_remove(pfx_index *ix, int32_t n)
{
	pfx_node *nd = &ix->nodes[n];
	for (uint32_t s = slot_of(ix, nd->key);; s = (s + 1) & (ix->n_slots - 1)) {
		if (ix->slots[s] == n) {
			ix->slots[s] = -2;
			ix->n_tomb++;
			break;
		}
	}
	uint32_t gen = nd->gen;
	memset(nd, 0, sizeof *nd);
	nd->gen = gen + 1; /* stale pins of a removed node see another generation */
	ix->n_used--;
	ix->free_list[ix->n_free++] = (uint32_t)n;
}
