/* The RocksDB value of one stored block (layout in prefix_int.h). Decoding treats the
 * bytes as outside input: every length is checked before it is used. */
#include "cachemgr/prefix_int.h"

#include <string.h>

static uint8_t *put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	return p + 2;
}
static uint8_t *put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return p + 4;
}
static uint8_t *put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return p + 8;
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t pfx_record_encode(const pfx_record *r, uint8_t *buf, size_t cap)
{
	size_t need = PFX_REC_HEADER + (size_t)r->n_locs * PFX_LOC_BYTES;
	if (need > cap)
		return 0;
	uint8_t *p = buf;
	*p++ = PFX_RECORD_VERSION;
	*p++ = r->flags;
	p = put16(p, r->writer_dcp);
	p = put32(p, r->block);
	p = put64(p, r->fingerprint);
	memcpy(p, r->parent, PFX_KEY_BYTES);
	p += PFX_KEY_BYTES;
	p = put16(p, r->n_layers);
	p = put16(p, r->n_locs);
	for (uint32_t i = 0; i < r->n_locs; i++) {
		const pfx_loc *l = &r->loc[i];
		p = put64(p, l->addr);
		p = put64(p, l->csum);
		p = put32(p, l->len);
		*p++ = l->tier;
		*p++ = l->kind;
		p = put16(p, l->layer);
	}
	return (size_t)(p - buf);
}

int pfx_record_decode(const uint8_t *buf, size_t len, pfx_record *r)
{
	if (len < PFX_REC_HEADER)
		return STRATA_E_CORRUPT;
	if (buf[0] != PFX_RECORD_VERSION)
		return STRATA_E_FORMAT;
	const uint8_t *p = buf + 1;
	r->flags = *p++;
	r->writer_dcp = get16(p), p += 2;
	r->block = get32(p), p += 4;
	r->fingerprint = pfx_le64(p), p += 8;
	memcpy(r->parent, p, PFX_KEY_BYTES), p += PFX_KEY_BYTES;
	r->n_layers = get16(p), p += 2;
	r->n_locs = get16(p), p += 2;
	if (r->n_locs > PFX_MAX_LOCS || len != PFX_REC_HEADER + (size_t)r->n_locs * PFX_LOC_BYTES)
		return STRATA_E_CORRUPT;
	for (uint32_t i = 0; i < r->n_locs; i++) {
		pfx_loc *l = &r->loc[i];
		l->addr = pfx_le64(p), p += 8;
		l->csum = pfx_le64(p), p += 8;
		l->len = get32(p), p += 4;
		l->tier = *p++;
		l->kind = *p++;
		l->layer = get16(p), p += 2;
		if (l->kind > PFX_KIND_STATE || l->layer >= STRATA_MAX_LAYERS)
			return STRATA_E_CORRUPT;
	}
	return 0;
}

/* The exact page list a block of model m must have, in record order. */
int pfx_record_check(const pfx_record *r, const strata_model *m, uint64_t fp)
{
	if (r->fingerprint != fp || r->n_layers != m->n_layers)
		return STRATA_E_FORMAT;
	uint32_t i = 0;
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			if (!strata_prefix_has(m, l, (strata_prefix_family)f))
				continue;
			if (i >= r->n_locs || r->loc[i].kind != f || r->loc[i].layer != l ||
			    r->loc[i].len != strata_prefix_page_bytes(m, (strata_prefix_family)f))
				return STRATA_E_FORMAT;
			i++;
		}
	if (r->flags & 1) {
		for (int l = 0; l < m->n_layers; l++, i++) {
			size_t want = strata_prefix_ring_bytes(m) + strata_prefix_comp_bytes(m, l);
			if (i >= r->n_locs || r->loc[i].kind != PFX_KIND_STATE ||
			    r->loc[i].layer != l || r->loc[i].len != want)
				return STRATA_E_FORMAT;
		}
	}
	return i == r->n_locs ? 0 : STRATA_E_FORMAT;
}
