/*
 * The reference engine and the prefix store (engine.h, cachemgr.h): synthetic token
 * streams, storing a request's context as a prefix entry, and restoring an entry into
 * an empty request so that decoding continues exactly where the stored run stopped.
 *
 * Layouts. A request's C4 main, C4 index and C128 regions are already page after page
 * in the store's page format (one 256-token block per page, FORMATS.md sections 2, 3),
 * so pages move as they are. Two things are re-laid: the engine keeps its 128-entry
 * window ring as two 64-entry blocks (the kernels' block size), while a stored ring is
 * one 128-entry block (cachemgr.h: ring slot = position mod window); and the
 * compressor rows of a ratio-4 layer are the main compressor's 8 rows followed by the
 * indexer's 8, both exactly the engine's state arrays (FORMATS.md section 5).
 *
 * Exactness. Restore puts back every byte decode reads for the request (pages, ring,
 * compressor rows) and advances the request's input process past the restored
 * positions; HISPARSE's hot cache starts cold, which changes hits but not the bytes
 * attention sees. So the outputs after a restore equal those after a prefill.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ref_eng_int.h"

#define VOCAB 129280u /* V4's vocabulary: token ids look like real ones */

/* ---- token streams ----------------------------------------------------------------- */

/* Counter-based, so any position is computed directly: splitmix64 of a per-request
 * base plus the position. The base takes the same inputs as ref_input_init(). */
static uint32_t token_at(uint64_t seed, int req, strata_ref_inputs kind, int64_t pos)
{
	uint64_t s = seed ^ 0x746f6b656e73ull /* "tokens" */ ^
		     ((uint64_t)req + 1) * 0xd6e8feb86659fd93ull ^ ((uint64_t)kind << 61);
	s += (uint64_t)pos * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(ref_rng_next(&s) % VOCAB);
}

const uint32_t *strata_ref_engine_tokens(strata_ref_engine *e, int req, int *n)
{
	if (n)
		*n = 0;
	if (!e || req < 0 || req >= e->cfg.n_req)
		return NULL;
	const size_t T = (size_t)e->cfg.max_ctx;
	if (!e->tokens) {
		e->tokens = malloc(sizeof *e->tokens * T * (size_t)e->cfg.n_req);
		if (!e->tokens)
			return NULL;
		for (int r = 0; r < e->cfg.n_req; r++)
			for (size_t p = 0; p < T; p++)
				e->tokens[T * r + p] = token_at(e->cfg.seed, r, e->cfg.inputs, (int64_t)p);
	}
	if (n)
		*n = e->cfg.max_ctx;
	return e->tokens + T * req;
}

/* ---- where a request's pages live ---------------------------------------------------- */

/* Start of request req's pages of family f in layer l (NULL where the layer has no
 * such family); *pb the page bytes, *host whether they sit in host memory. */
static uint8_t *page_base(strata_ref_engine *e, int req, int l, strata_prefix_family f,
			  size_t *pb, bool *host)
{
	ref_lay *L = &e->lay[l];
	*host = false;
	if (!strata_prefix_has(&e->m, l, f))
		return NULL;
	switch (f) {
	case STRATA_PFX_C4_MAIN:
		*pb = strata_main_block_stride(64);
		*host = e->cfg.mode != STRATA_REF_ALL_RESIDENT;
		return L->c4 + *pb * e->nblk * req;
	case STRATA_PFX_C4_INDEX:
		*pb = (size_t)64 * strata_index_entry_bytes(e->m.index_fmt);
		return L->pages + *pb * e->nblk * req;
	case STRATA_PFX_C128_MAIN:
		*pb = strata_main_block_stride(2);
		return L->c128 + *pb * e->nblk * req;
	default:
		return NULL;
	}
}

/* The engine's page sizes must be the store's (they are by construction; a mismatch
 * means the formats moved apart, and nothing may be stored or loaded). */
static int check_formats(const strata_ref_engine *e)
{
	size_t c4 = strata_main_block_stride(64);
	size_t ix = (size_t)64 * strata_index_entry_bytes(e->m.index_fmt);
	size_t c128 = strata_main_block_stride(2);
	if (strata_prefix_page_bytes(&e->m, STRATA_PFX_C4_MAIN) != c4 ||
	    strata_prefix_page_bytes(&e->m, STRATA_PFX_C4_INDEX) != ix ||
	    strata_prefix_page_bytes(&e->m, STRATA_PFX_C128_MAIN) != c128 ||
	    strata_prefix_ring_bytes(&e->m) != strata_main_block_stride(128) ||
	    REF_WIN_BLOCKS * 64 != e->m.window) {
		ELOG(STRATA_LOG_ERROR, "page formats differ from the prefix store's");
		return STRATA_E_FORMAT;
	}
	for (int l = 0; l < e->m.n_layers; l++) {
		const ref_lay *L = &e->lay[l];
		size_t comp = 0;
		if (L->w.ratio)
			comp += sizeof(float) * ref_comp_state_floats(&L->w.main);
		if (L->w.ratio == 4)
			comp += sizeof(float) * ref_comp_state_floats(&L->w.idx);
		if (comp != strata_prefix_comp_bytes(&e->m, l)) {
			ELOG(STRATA_LOG_ERROR, "layer %d compressor state is %zu B, the "
			     "prefix store's %zu B", l, comp, strata_prefix_comp_bytes(&e->m, l));
			return STRATA_E_FORMAT;
		}
	}
	return 0;
}

/* ---- the window ring: two 64-entry blocks <-> one 128-entry block -------------------- */

/* Slot s's data (576 B) and scales (8 B) in a ring of blocks of B entries. */
static size_t ring_data(int s, int B)
{
	return strata_main_block_stride(B) * (size_t)(s / B) + (size_t)(s % B) * STRATA_MAIN_DATA_BYTES;
}
static size_t ring_scale(int s, int B)
{
	return strata_main_block_stride(B) * (size_t)(s / B) + (size_t)B * STRATA_MAIN_DATA_BYTES +
	       (size_t)(s % B) * STRATA_MAIN_SCALE_BYTES;
}

/* to_store: engine layout (eng) into the store's (one block of W); else back. */
static void ring_relay(uint8_t *eng, uint8_t *pfx, int W, bool to_store)
{
	/* The padding is zeroed, so that equal rings are equal bytes. */
	if (to_store)
		memset(pfx, 0, strata_main_block_stride(W));
	else
		memset(eng, 0, REF_WIN_BLOCKS * strata_main_block_stride(64));
	for (int s = 0; s < W; s++) {
		uint8_t *ed = eng + ring_data(s, 64), *es = eng + ring_scale(s, 64);
		uint8_t *pd = pfx + ring_data(s, W), *ps = pfx + ring_scale(s, W);
		if (to_store) {
			memcpy(pd, ed, STRATA_MAIN_DATA_BYTES);
			memcpy(ps, es, STRATA_MAIN_SCALE_BYTES);
		} else {
			memcpy(ed, pd, STRATA_MAIN_DATA_BYTES);
			memcpy(es, ps, STRATA_MAIN_SCALE_BYTES);
		}
	}
}

static size_t win_bytes(void)
{
	return REF_WIN_BLOCKS * strata_main_block_stride(64);
}

/* ---- store --------------------------------------------------------------------------- */

int strata_ref_engine_snapshot(strata_ref_engine *e, int req, strata_prefix *pfx)
{
	if (!e || !pfx || req < 0 || req >= e->cfg.n_req)
		return -EINVAL;
	const int len = e->len[req];
	if (len <= 0 || len % STRATA_BLOCK_TOKENS) {
		ELOG(STRATA_LOG_ERROR, "request %d has %d tokens; a stored prefix ends "
		     "at a non-zero multiple of %d", req, len, STRATA_BLOCK_TOKENS);
		return -EINVAL;
	}
	int err = check_formats(e);
	if (!err)
		err = ref_side_join(e);
	if (err)
		return err;
	const strata_model *m = &e->m;
	const uint32_t np = (uint32_t)(len / STRATA_BLOCK_TOKENS);
	int n_tok;
	const uint32_t *tok = strata_ref_engine_tokens(e, req, &n_tok);
	if (!tok)
		return -ENOMEM;
	/* Host room: the device-resident families, the ring read-back, the state. */
	size_t host = 0, pb;
	int n_fam = 0;
	bool on_host;
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
			if (page_base(e, req, l, (strata_prefix_family)f, &pb, &on_host)) {
				n_fam++;
				host += on_host ? 0 : pb * np;
			}
	const size_t state = strata_prefix_state_bytes(m);
	uint8_t *buf = malloc(host + win_bytes() + state);
	const void **ptrs = malloc(sizeof *ptrs * (size_t)np * (n_fam ? n_fam : 1));
	if (!buf || !ptrs) {
		err = -ENOMEM;
		goto out;
	}
	/* Write-backs to the host tier (HISPARSE) may still be in flight. */
	if ((err = strata_dev_sync(e->dev)))
		goto out;
	strata_prefix_snapshot snap = STRATA_PREFIX_SNAPSHOT_INIT;
	strata_prefix_state ck;
	memset(&ck, 0, sizeof ck);
	snap.n_pages = np;
	ck.pages = np;
	uint8_t *hp = buf;
	const void **pp = ptrs;
	for (int l = 0; l < m->n_layers && !err; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES && !err; f++) {
			uint8_t *src = page_base(e, req, l, (strata_prefix_family)f, &pb, &on_host);
			if (!src)
				continue;
			if (!on_host) {
				if ((err = strata_dev_copy(e->dev, hp, src, pb * np, NULL)))
					break;
				src = hp;
				hp += pb * np;
			}
			for (uint32_t p = 0; p < np; p++)
				pp[p] = src + pb * p;
			snap.pages[l][f] = (const void *const *)pp;
			pp += np;
		}
	uint8_t *ring = buf + host, *sp = ring + win_bytes();
	for (int l = 0; l < m->n_layers && !err; l++) {
		ref_lay *L = &e->lay[l];
		if ((err = strata_dev_copy(e->dev, ring, L->win + win_bytes() * req, win_bytes(), NULL)) ||
		    (err = strata_dev_sync(e->dev)))
			break;
		ring_relay(ring, sp, m->window, true);
		ck.ring[l] = sp;
		sp += strata_prefix_ring_bytes(m);
		if (!L->w.ratio)
			continue;
		ck.comp[l] = sp;
		size_t sf = ref_comp_state_floats(&L->w.main);
		memcpy(sp, L->cstate + sf * req, sizeof(float) * sf);
		sp += sizeof(float) * sf;
		if (L->w.ratio == 4) {
			sf = ref_comp_state_floats(&L->w.idx);
			memcpy(sp, L->istate + sf * req, sizeof(float) * sf);
			sp += sizeof(float) * sf;
		}
	}
	if (err || (err = strata_dev_sync(e->dev)))
		goto out;
	snap.n_ckpt = 1;
	snap.ckpt = &ck;
	err = strata_prefix_store(pfx, tok, (uint64_t)len, &snap);
out:
	free(buf);
	free(ptrs);
	return err;
}

/* ---- restore ------------------------------------------------------------------------- */

/* Is hit a prefix of request req's token stream? Its last block key says. */
static int hit_matches(strata_ref_engine *e, int req, const strata_prefix_hit *hit)
{
	int n;
	const uint32_t *tok = strata_ref_engine_tokens(e, req, &n);
	uint8_t (*keys)[16] = malloc(sizeof *keys * hit->pages);
	if (!tok || !keys) {
		free(keys);
		return -ENOMEM;
	}
	strata_prefix_keys(&e->m, tok, hit->pages, keys);
	int same = !memcmp(keys[hit->pages - 1], hit->key, 16);
	free(keys);
	if (!same) {
		ELOG(STRATA_LOG_ERROR, "the hit (%llu tokens) is not a prefix of request "
		     "%d's tokens", (unsigned long long)hit->tokens, req);
		return -EINVAL;
	}
	return 0;
}

/* Move the rank's pages of one family to their global positions (runs of consecutive
 * global pages in one copy: all of them under P = 1). */
static int place_pages(strata_ref_engine *e, uint8_t *base, bool host, size_t pb,
		       const uint8_t *src, const uint32_t *ids, uint32_t n)
{
	int err = 0;
	for (uint32_t j = 0; j < n && !err;) {
		uint32_t k = j + 1;
		while (k < n && ids[k] == ids[k - 1] + 1)
			k++;
		uint8_t *dst = base + pb * ids[j];
		size_t bytes = pb * (k - j);
		if (host)
			memcpy(dst, src + pb * j, bytes);
		else
			err = strata_dev_copy(e->dev, dst, src + pb * j, bytes, NULL);
		j = k;
	}
	return err;
}

int strata_ref_engine_restore(strata_ref_engine *e, int req, strata_prefix *pfx,
			      const strata_prefix_hit *hit, int P, int rank)
{
	if (!e || !pfx || !hit || req < 0 || req >= e->cfg.n_req || P < 1 || rank < 0 ||
	    rank >= P || e->len[req] != 0 || !hit->tokens || hit->tokens % STRATA_BLOCK_TOKENS ||
	    hit->pages != hit->tokens / STRATA_BLOCK_TOKENS)
		return -EINVAL;
	if (hit->tokens > (uint64_t)e->cfg.max_ctx)
		return -ENOSPC;
	int err = check_formats(e);
	if (!err)
		err = ref_side_join(e);
	if (!err)
		err = hit_matches(e, req, hit);
	if (err)
		return err;
	const strata_model *m = &e->m;
	strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
	for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
		out.dest[f] = STRATA_PFX_TO_HOST; /* pfx may not share our device */
	size_t pb;
	bool on_host;
	/* Host-tier C4 main under P = 1 is already in the store's layout: restore there. */
	for (int l = 0; l < m->n_layers && P == 1; l++) {
		uint8_t *b = page_base(e, req, l, STRATA_PFX_C4_MAIN, &pb, &on_host);
		if (b && on_host)
			out.into[l][STRATA_PFX_C4_MAIN] = b;
	}
	uint8_t *ring = malloc(win_bytes());
	if (!ring)
		return -ENOMEM;
	if ((err = strata_dev_sync(e->dev)) || (err = strata_prefix_restore(pfx, hit, P, rank, &out)))
		goto out;
	if (out.tokens != hit->tokens) {
		err = STRATA_E_FORMAT;
		goto out;
	}
	for (int l = 0; l < m->n_layers && !err; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES && !err; f++) {
			uint8_t *base = page_base(e, req, l, (strata_prefix_family)f, &pb, &on_host);
			if (!base || out.pages[l][f] == base)
				continue; /* none, or restored in place */
			if (!out.pages[l][f] || out.page_bytes[f] != pb) {
				err = STRATA_E_FORMAT;
				break;
			}
			err = place_pages(e, base, on_host, pb, out.pages[l][f], out.page_ids, out.n_pages);
		}
	for (int l = 0; l < m->n_layers && !err; l++) {
		ref_lay *L = &e->lay[l];
		if (!out.ring[l] || (L->w.ratio && !out.comp[l])) {
			err = STRATA_E_FORMAT;
			break;
		}
		ring_relay(ring, out.ring[l], m->window, false);
		if ((err = strata_dev_copy(e->dev, L->win + win_bytes() * req, ring, win_bytes(), NULL)) ||
		    (err = strata_dev_sync(e->dev)))
			break;
		if (!L->w.ratio)
			continue;
		const uint8_t *sp = out.comp[l];
		size_t sf = ref_comp_state_floats(&L->w.main);
		memcpy(L->cstate + sf * req, sp, sizeof(float) * sf);
		sp += sizeof(float) * sf;
		if (L->w.ratio == 4) {
			size_t si = ref_comp_state_floats(&L->w.idx);
			memcpy(L->istate + si * req, sp, sizeof(float) * si);
		}
	}
	/* The copies read restore's buffers, which release frees. */
	if (err || (err = strata_dev_sync(e->dev)))
		goto out;
	float h[REF_HID];
	for (uint64_t t = 0; t < hit->tokens; t++)
		ref_input_next(&e->in[req], h);
	/* HISPARSE: the hot cache learns that the entries exist (it holds none of them). */
	if ((err = ref_fetch_filled(e, req, (int)(hit->tokens / 4))))
		goto out;
	e->len[req] = (int)hit->tokens;
out:
	strata_prefix_restored_release(pfx, &out);
	free(ring);
	return err;
}

int strata_ref_engine_read_page(strata_ref_engine *e, int req, int layer,
				strata_prefix_family f, uint32_t page, void *dst)
{
	if (!e || !dst || req < 0 || req >= e->cfg.n_req || layer < 0 || layer >= e->m.n_layers ||
	    f < 0 || f >= STRATA_PFX_FAMILIES || page >= (uint32_t)e->nblk)
		return -EINVAL;
	size_t pb;
	bool on_host;
	uint8_t *base = page_base(e, req, layer, f, &pb, &on_host);
	if (!base)
		return -EINVAL;
	int err = strata_dev_sync(e->dev); /* write-backs to the host tier */
	if (!err)
		err = strata_dev_copy(e->dev, dst, base + pb * page, pb, NULL);
	if (!err)
		err = strata_dev_sync(e->dev);
	return err;
}
