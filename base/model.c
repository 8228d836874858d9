/* Model geometry presets, schedules, fingerprints and per-request sizes. */
#include "base/base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bumped whenever a stored byte format changes. */
#define FORMAT_VERSION 1u

static void base_geometry(strata_model *m)
{
	size_t size = m->size ? m->size : sizeof *m;
	memset(m, 0, sizeof *m);
	m->size = size;
	m->head_dim = STRATA_HEAD_DIM;
	m->rope_dim = STRATA_ROPE_DIM;
	m->index_heads = 64;
	m->index_dim = STRATA_INDEX_DIM;
	m->window = 128;
	m->block_tokens = STRATA_BLOCK_TOKENS;
	m->index_fmt = STRATA_INDEX_MXFP4;
}

int strata_model_preset(const char *name, strata_model *m)
{
	if (!name || !m)
		return -EINVAL;
	base_geometry(m);
	if (!strcmp(name, "flash")) {
		/* V4-Flash: layers 0,1 window-only; even layers from 2 CSA; odd from 3 HCA. */
		m->hidden = 4096;
		m->n_layers = 43;
		m->n_heads = 64;
		m->index_topk = 512;
		for (int l = 0; l < m->n_layers; l++)
			m->ratio[l] = l < 2 ? 0 : (l % 2 == 0 ? 4 : 128);
	} else if (!strcmp(name, "pro")) {
		/* V4-Pro: no window-only layer; even layers from 2 CSA, 0, 1 and odd HCA. */
		m->hidden = 7168;
		m->n_layers = 61;
		m->n_heads = 128;
		m->index_topk = 1024;
		for (int l = 0; l < m->n_layers; l++)
			m->ratio[l] = (l >= 2 && l % 2 == 0) ? 4 : 128;
	} else if (!strcmp(name, "tiny")) {
		/* Scaled down for CPU runs; the per-entry formats stay exactly V4's. */
		m->hidden = 256;
		m->n_layers = 6;
		m->n_heads = 8;
		m->index_heads = 8;
		m->index_topk = 64;
		static const int16_t r[] = { 0, 4, 128, 4, 128, 4 };
		memcpy(m->ratio, r, sizeof r);
	} else {
		return -EINVAL;
	}
	snprintf(m->name, sizeof m->name, "%s", name);
	return 0;
}

int strata_model_set_schedule(strata_model *m, const char *ratios)
{
	if (!m || !ratios || !*ratios)
		return -EINVAL;
	int16_t r[STRATA_MAX_LAYERS];
	int n = 0;
	const char *p = ratios;
	while (*p) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (end == p || errno || (v != 0 && v != 4 && v != 128) || n == STRATA_MAX_LAYERS)
			return -EINVAL;
		r[n++] = (int16_t)v;
		p = end;
		if (*p == ',')
			p++;
		else if (*p)
			return -EINVAL;
	}
	memcpy(m->ratio, r, sizeof r[0] * (size_t)n);
	memset(m->ratio + n, 0, sizeof r[0] * (size_t)(STRATA_MAX_LAYERS - n));
	m->n_layers = n;
	snprintf(m->name, sizeof m->name, "custom");
	return 0;
}

#define BAD(...)                                                         \
	do {                                                             \
		STRATA_LOG(STRATA_LOG_WARN, STRATA_SUB_BASE, __VA_ARGS__); \
		return -EINVAL;                                          \
	} while (0)

int strata_model_validate(const strata_model *m)
{
	if (!m)
		return -EINVAL;
	if (m->size < sizeof *m)
		BAD("model: size field %zu < %zu (use STRATA_MODEL_INIT)", m->size, sizeof *m);
	if (m->n_layers < 1 || m->n_layers > STRATA_MAX_LAYERS)
		BAD("model: %d layers (1..%d)", m->n_layers, STRATA_MAX_LAYERS);
	for (int l = 0; l < m->n_layers; l++)
		if (m->ratio[l] != 0 && m->ratio[l] != 4 && m->ratio[l] != 128)
			BAD("model: layer %d has ratio %d (0, 4 or 128)", l, m->ratio[l]);
	if (m->head_dim != STRATA_HEAD_DIM || m->rope_dim != STRATA_ROPE_DIM)
		BAD("model: head dim %d/%d, the V4 formats need 512/64", m->head_dim, m->rope_dim);
	if (m->index_dim != STRATA_INDEX_DIM)
		BAD("model: index dim %d, the V4 formats need 128", m->index_dim);
	if (m->n_heads < 1 || m->index_heads < 1 || m->index_heads > 1024)
		BAD("model: %d heads, %d index heads", m->n_heads, m->index_heads);
	if (m->index_topk < 1 || m->index_topk > 4096)
		BAD("model: index top-k %d (1..4096)", m->index_topk);
	if (m->window < 1 || m->block_tokens != STRATA_BLOCK_TOKENS)
		BAD("model: window %d, block %d tokens (need 256)", m->window, m->block_tokens);
	if (m->index_fmt != STRATA_INDEX_MXFP4 && m->index_fmt != STRATA_INDEX_FP8)
		BAD("model: unknown index format %d", (int)m->index_fmt);
	return 0;
}

int strata_model_count(const strata_model *m, int ratio)
{
	int n = 0;
	for (int l = 0; l < m->n_layers; l++)
		n += m->ratio[l] == ratio;
	return n;
}

/* FNV-1a over the fields that change bytes; the name is deliberately left out. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

uint64_t strata_model_fingerprint(const strata_model *m)
{
	uint64_t h = 0xcbf29ce484222325ull;
	int32_t f[] = { (int32_t)FORMAT_VERSION, m->n_layers, m->head_dim, m->rope_dim,
			m->index_heads, m->index_dim, m->window, m->block_tokens,
			(int32_t)m->index_fmt, m->n_heads };
	h = fnv(h, f, sizeof f);
	h = fnv(h, m->ratio, sizeof m->ratio[0] * (size_t)m->n_layers);
	return h;
}

void strata_model_sizes(const strata_model *m, uint64_t tokens, strata_sizes *s)
{
	memset(s, 0, sizeof *s);
	s->tokens = tokens;
	s->c4_entries = tokens / 4;
	s->c128_entries = tokens / 128;
	uint64_t n4 = (uint64_t)strata_model_count(m, 4);
	uint64_t n128 = (uint64_t)strata_model_count(m, 128);
	uint64_t ring = (uint64_t)m->window * STRATA_MAIN_ENTRY_BYTES;
	s->c4_main_bytes = n4 * s->c4_entries * STRATA_MAIN_ENTRY_BYTES;
	s->c4_index_bytes = n4 * s->c4_entries * strata_index_entry_bytes(m->index_fmt);
	s->c128_main_bytes = n128 * s->c128_entries * STRATA_MAIN_ENTRY_BYTES;
	s->window_bytes = (uint64_t)m->n_layers * ring;
	/* Residual state, fp32 rows [kv | score] of width 2*coff*d (FORMATS.md section 5):
	 * C4: 8 rows x 8 KiB (main) + 8 rows x 2 KiB (indexer); C128: 128 rows x 4 KiB. */
	s->state_bytes = n4 * (8ull * 8192 + 8ull * 2048) + n128 * (128ull * 4096);
	s->total_bytes = s->c4_main_bytes + s->c4_index_bytes + s->c128_main_bytes +
			 s->window_bytes;
	s->device_offloaded = s->total_bytes - s->c4_main_bytes;
}

int strata_parse_count(const char *s, uint64_t *out)
{
	if (!s || !*s || !out || *s == '-')
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || errno)
		return -EINVAL;
	unsigned shift = 0;
	switch (*end) {
	case 0: break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: return -EINVAL;
	}
	if (*end || (shift && v > (~0ull >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}
