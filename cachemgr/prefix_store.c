/* The prefix store: open and recovery, store, lookup, eviction.
 *
 * Crash ordering (the design note). A store writes every new page, syncs the page
 * store, and only then commits one RocksDB batch with sync=true holding the records of
 * all new blocks. Before the commit the pages are unnamed; after it they are named. On
 * open every record is read, its pages are marked live in the reopened page store and
 * recovery then frees all the rest, so a crash at any moment leaves either the whole
 * entry or nothing, and no page leaks. Eviction runs the other way: delete the records
 * (synced) first, then free the pages; a crash between leaves unnamed pages, which the
 * next open reclaims. Blocks form a tree by their parent key; a block is only ever
 * removed together with every block that extends it, so each stored chain is whole from
 * block 0 and lookup can stop at the first missing block.
 */
#define _GNU_SOURCE /* qsort_r */
#include "cachemgr/prefix_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#define BLOCK STRATA_BLOCK_TOKENS
#define SUB STRATA_SUB_CACHEMGR

int pfx_rocks_err(char *err, const char *what)
{
	if (!err)
		return 0;
	STRATA_LOG(STRATA_LOG_ERROR, SUB, "prefix: rocksdb %s: %s", what, err);
	rocksdb_free(err);
	return STRATA_E_ROCKSDB;
}

void pfx_db_key(const uint8_t key[16], uint8_t out[17])
{
	out[0] = 'B';
	memcpy(out + 1, key, 16);
}

int pfx_get_record(strata_prefix *pfx, const uint8_t key[16], pfx_record *r)
{
	uint8_t k[17];
	char *err = NULL;
	size_t len = 0;
	pfx_db_key(key, k);
	char *v = rocksdb_get(pfx->db, pfx->ro, (const char *)k, sizeof k, &len, &err);
	int rc = pfx_rocks_err(err, "get");
	if (rc)
		return rc;
	if (!v)
		return STRATA_E_NOTFOUND;
	rc = pfx_record_decode((const uint8_t *)v, len, r);
	if (!rc)
		rc = pfx_record_check(r, &pfx->model, pfx->fp);
	rocksdb_free(v);
	return rc;
}

void pfx_host_copy_free(strata_prefix *pfx, pfx_node *nd)
{
	if (nd->hrun && --nd->hrun->refs == 0) {
		strata_dev_host_free(pfx->dev, nd->hrun->base);
		free(nd->hrun);
	}
	free(nd->hstate);
	pfx->host_bytes -= nd->host_bytes;
	nd->hrun = NULL;
	nd->hstate = NULL;
	nd->host_bytes = 0;
}

/* mkdir -p: the data directory and any missing parents. */
static int make_dirs(const char *dir)
{
	char path[4096];
	size_t n = strlen(dir);
	if (!n || n >= sizeof path)
		return -ENAMETOOLONG;
	memcpy(path, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != 0)
			continue;
		char c = path[i];
		path[i] = 0;
		if (mkdir(path, 0755) && errno != EEXIST) {
			int e = -errno;
			STRATA_LOG(STRATA_LOG_ERROR, SUB, "prefix: cannot create %s: %s", path,
				   strerror(errno));
			return e;
		}
		path[i] = c;
	}
	struct stat sb;
	if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
		STRATA_LOG(STRATA_LOG_ERROR, SUB, "prefix: %s is not a directory", dir);
		return -ENOTDIR;
	}
	return 0;
}

static void layout_init(strata_prefix *pfx)
{
	const strata_model *m = &pfx->model;
	uint32_t i = 0;
	uint64_t off = 0;
	for (int l = 0; l < m->n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			if (!strata_prefix_has(m, l, (strata_prefix_family)f))
				continue;
			pfx->lay[i].kind = (uint8_t)f;
			pfx->lay[i].layer = (uint16_t)l;
			pfx->lay[i].len = (uint32_t)strata_prefix_page_bytes(m, (strata_prefix_family)f);
			pfx->lay[i].off = off;
			off += pfx->lay[i++].len;
		}
	pfx->blk_locs = i;
	pfx->blk_bytes = off;
	for (int l = 0; l < m->n_layers; l++) {
		pfx->lay[i].kind = PFX_KIND_STATE;
		pfx->lay[i].layer = (uint16_t)l;
		pfx->lay[i].len = (uint32_t)(strata_prefix_ring_bytes(m) + strata_prefix_comp_bytes(m, l));
		pfx->lay[i].off = off;
		off += pfx->lay[i++].len;
	}
	pfx->ckpt_locs = i;
	pfx->ckpt_bytes = off;
}

/* ---- removing blocks ---------------------------------------------------------------- */

/* Delete the records of the doomed nodes (one synced batch), then free their pages and
 * forget them. Children counts of surviving parents were already adjusted. */
static int remove_nodes(strata_prefix *pfx, const int32_t *v, uint32_t n)
{
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	pfx_record *r = malloc(sizeof *r);
	pfx_loc *locs = NULL;
	size_t n_locs = 0, cap = 0;
	char *err = NULL;
	int rc = 0;
	if (!wb || !r) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint8_t k[17];
		pfx_node *nd = &pfx->ix.nodes[v[i]];
		pfx_db_key(nd->key, k);
		rocksdb_writebatch_delete(wb, (const char *)k, sizeof k);
		/* A record we cannot read names pages we cannot free: the next open
		 * reclaims them. */
		if (pfx_get_record(pfx, nd->key, r))
			continue;
		if (n_locs + r->n_locs > cap) {
			size_t nc = (cap + r->n_locs) * 2;
			pfx_loc *nl = realloc(locs, nc * sizeof *nl);
			if (!nl) {
				rc = -ENOMEM;
				goto out;
			}
			locs = nl;
			cap = nc;
		}
		memcpy(locs + n_locs, r->loc, r->n_locs * sizeof *locs);
		n_locs += r->n_locs;
	}
	rocksdb_write(pfx->db, pfx->wsync, wb, &err);
	if ((rc = pfx_rocks_err(err, "delete")))
		goto out;
	for (size_t j = 0; j < n_locs; j++)
		pfx->ps->ops->release(pfx->ps, locs[j].addr, locs[j].len, locs[j].csum);
	for (uint32_t i = 0; i < n; i++) {
		pfx_node *nd = &pfx->ix.nodes[v[i]];
		pfx->named_bytes -= nd->bytes;
		pfx->named_footprint -= nd->footprint;
		pfx->st.blocks--;
		if (nd->ckpt)
			pfx->st.checkpoints--;
		pfx_host_copy_free(pfx, nd);
		pfx_index_remove(&pfx->ix, v[i]);
	}
out:
	free(locs);
	free(r);
	if (wb)
		rocksdb_writebatch_destroy(wb);
	return rc;
}

static int cmp_block(const void *a, const void *b, void *arg)
{
	const pfx_index *ix = arg;
	uint32_t x = ix->nodes[*(const int32_t *)a].block, y = ix->nodes[*(const int32_t *)b].block;
	return (x > y) - (x < y);
}

/* Live node indices sorted by block index: parents before children. */
static int32_t *sorted_nodes(pfx_index *ix, uint32_t *count)
{
	int32_t *v = malloc((ix->n_nodes + 1) * sizeof *v);
	uint32_t n = 0;
	if (!v)
		return NULL;
	for (uint32_t i = 0; i < ix->n_nodes; i++)
		if (ix->nodes[i].used)
			v[n++] = (int32_t)i;
	qsort_r(v, n, sizeof *v, cmp_block, ix);
	*count = n;
	return v;
}

void pfx_drop_subtree(strata_prefix *pfx, int32_t root, int why)
{
	pfx_index *ix = &pfx->ix;
	uint32_t n = 0, k = 0;
	int32_t *v = sorted_nodes(ix, &n);
	uint8_t *doom = calloc(ix->n_nodes + 1, 1);
	if (!v || !doom)
		goto out;
	doom[root] = 1;
	for (uint32_t i = 0; i < n; i++) {
		pfx_node *nd = &ix->nodes[v[i]];
		if (v[i] == root || (nd->parent >= 0 && doom[nd->parent]))
			doom[v[i]] = 1, v[k++] = v[i];
	}
	pfx_node *r = &ix->nodes[root];
	if (r->parent >= 0)
		ix->nodes[r->parent].children--;
	STRATA_LOG(STRATA_LOG_ERROR, SUB,
		   "prefix: dropping block %u and %u blocks after it: %s", r->block, k - 1,
		   strata_strerror(why));
	pfx->st.dropped_blocks += k;
	if (remove_nodes(pfx, v, k))
		STRATA_LOG(STRATA_LOG_ERROR, SUB, "prefix: could not drop damaged blocks");
out:
	free(doom);
	free(v);
}

/* ---- eviction ------------------------------------------------------------------------- */

static int evict_host(strata_prefix *pfx, uint64_t target)
{
	while (pfx->host_bytes > target) {
		int32_t best = -1;
		for (uint32_t i = 0; i < pfx->ix.n_nodes; i++) {
			pfx_node *nd = &pfx->ix.nodes[i];
			if (nd->used && nd->host_bytes && !nd->pins &&
			    (best < 0 || nd->lru < pfx->ix.nodes[best].lru))
				best = (int32_t)i;
		}
		if (best < 0)
			return STRATA_E_BUDGET;
		pfx_host_copy_free(pfx, &pfx->ix.nodes[best]);
	}
	return 0;
}

/* Doom least recently used unpinned leaves (a doomed leaf's parent may become one)
 * until the store's named footprint fits target, then remove them in one batch. */
static int evict_nvme(strata_prefix *pfx, uint64_t target)
{
	pfx_index *ix = &pfx->ix;
	if (pfx->named_footprint <= target)
		return 0;
	int32_t *v = malloc((ix->n_nodes + 1) * sizeof *v);
	uint8_t *doom = calloc(ix->n_nodes + 1, 1);
	uint32_t k = 0;
	uint64_t left = pfx->named_footprint;
	int rc = 0;
	if (!v || !doom) {
		rc = -ENOMEM;
		goto out;
	}
	while (left > target) {
		int32_t best = -1;
		for (uint32_t i = 0; i < ix->n_nodes; i++) {
			pfx_node *nd = &ix->nodes[i];
			/* Leaves without a checkpoint first: no lookup can hit them. */
			if (nd->used && !doom[i] && !nd->pins && !nd->children &&
			    (best < 0 || nd->ckpt < ix->nodes[best].ckpt ||
			     (nd->ckpt == ix->nodes[best].ckpt && nd->lru < ix->nodes[best].lru)))
				best = (int32_t)i;
		}
		if (best < 0) {
			rc = STRATA_E_BUDGET;
			break;
		}
		doom[best] = 1;
		v[k++] = best;
		left -= ix->nodes[best].footprint;
		if (ix->nodes[best].parent >= 0)
			ix->nodes[ix->nodes[best].parent].children--;
	}
	if (k) {
		int e = remove_nodes(pfx, v, k);
		if (e) {
			/* Nothing was removed: give the parents their children back. */
			for (uint32_t i = 0; i < k; i++)
				if (ix->nodes[v[i]].parent >= 0)
					ix->nodes[ix->nodes[v[i]].parent].children++;
			rc = e;
		} else {
			pfx->st.evicted_blocks += k;
		}
	}
out:
	free(doom);
	free(v);
	return rc;
}

int strata_prefix_evict(strata_prefix *pfx, uint64_t host_bytes, uint64_t nvme_bytes)
{
	if (!pfx)
		return -EINVAL;
	int a = host_bytes == UINT64_MAX ? 0 : evict_host(pfx, host_bytes);
	int b = nvme_bytes == UINT64_MAX ? 0 : evict_nvme(pfx, nvme_bytes);
	return a ? a : b;
}

/* ---- open and recovery ------------------------------------------------------------------ */

/* Rebuild the block index from RocksDB, mark every named page live and reclaim the
 * rest. Records that cannot be used (damaged, pages missing, parent missing) are
 * deleted; records of another model are kept and their pages stay live. */
static int reload(strata_prefix *pfx)
{
	pfx_index *ix = &pfx->ix;
	pfx_record *r = malloc(sizeof *r);
	uint8_t (*parents)[16] = NULL;
	uint32_t cap_par = 0;
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	rocksdb_iterator_t *it = rocksdb_create_iterator(pfx->db, pfx->ro);
	int32_t *v = NULL;
	uint8_t *doom = NULL;
	uint32_t n = 0, n_bad = 0;
	char *err = NULL;
	int rc = 0;
	if (!r || !wb || !it) {
		rc = -ENOMEM;
		goto out;
	}
	for (rocksdb_iter_seek(it, "B", 1); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl;
		const char *k = rocksdb_iter_key(it, &kl);
		const char *val = rocksdb_iter_value(it, &vl);
		if (kl < 1 || k[0] != 'B')
			break;
		int e = kl == 17 ? pfx_record_decode((const uint8_t *)val, vl, r) : STRATA_E_CORRUPT;
		if (!e && r->fingerprint != pfx->fp) {
			/* Another model's entry: not ours to index, not ours to reclaim. */
			for (uint32_t j = 0; j < r->n_locs; j++)
				pfx->ps->ops->mark(pfx->ps, r->loc[j].addr, r->loc[j].len, r->loc[j].csum);
			continue;
		}
		if (!e)
			e = pfx_record_check(r, &pfx->model, pfx->fp);
		int32_t nd;
		if (!e && (e = pfx_index_add(ix, (const uint8_t *)k + 1, &nd)) == -ENOMEM) {
			rc = e;
			goto out;
		}
		if (e) {
			STRATA_LOG(STRATA_LOG_WARN, SUB, "prefix: dropping unreadable record: %s",
				   strata_strerror(e));
			rocksdb_writebatch_delete(wb, k, kl);
			n_bad++;
			continue;
		}
		if ((uint32_t)nd >= cap_par) {
			uint32_t c = cap_par ? cap_par * 2 : 1024;
			while (c <= (uint32_t)nd)
				c *= 2;
			void *np = realloc(parents, c * sizeof *parents);
			if (!np) {
				rc = -ENOMEM;
				goto out;
			}
			parents = np;
			cap_par = c;
		}
		memcpy(parents[nd], r->parent, 16);
		pfx_node *p = &ix->nodes[nd];
		p->block = r->block;
		p->ckpt = r->flags & 1;
	}
	rocksdb_iter_get_error(it, &err);
	if ((rc = pfx_rocks_err(err, "scan")))
		goto out;
	for (uint32_t i = 0; i < ix->n_nodes; i++)
		if (ix->nodes[i].used && ix->nodes[i].block)
			ix->nodes[i].parent = pfx_index_find(ix, parents[i]);
	/* Parents first: a block whose parent is missing or dropped goes too. */
	v = sorted_nodes(ix, &n);
	doom = calloc(ix->n_nodes + 1, 1);
	if (!v || !doom) {
		rc = -ENOMEM;
		goto out;
	}
	uint32_t n_doom = 0;
	for (uint32_t i = 0; i < n; i++) {
		pfx_node *nd = &ix->nodes[v[i]];
		int e = 0;
		if (nd->block && (nd->parent < 0 || doom[nd->parent] ||
				  ix->nodes[nd->parent].block + 1 != nd->block))
			e = STRATA_E_NOTFOUND;
		if (!e)
			e = pfx_get_record(pfx, nd->key, r);
		uint32_t j = 0;
		for (; !e && j < r->n_locs; j++)
			e = pfx->ps->ops->mark(pfx->ps, r->loc[j].addr, r->loc[j].len, r->loc[j].csum);
		if (e) {
			/* Pages marked so far are freed (they'd otherwise stay live). */
			while (j-- > 1)
				pfx->ps->ops->release(pfx->ps, r->loc[j - 1].addr, r->loc[j - 1].len,
						      r->loc[j - 1].csum);
			doom[v[i]] = 1;
			v[n_doom++] = v[i]; /* v[0..i] is done with: reuse it */
			continue;
		}
		for (j = 0; j < r->n_locs; j++) {
			nd->bytes += r->loc[j].len;
			nd->footprint += pfx->ps->ops->footprint(r->loc[j].len);
		}
		if (nd->parent >= 0)
			ix->nodes[nd->parent].children++;
		nd->lru = ++pfx->tick;
		pfx->named_bytes += nd->bytes;
		pfx->named_footprint += nd->footprint;
		pfx->st.blocks++;
		pfx->st.checkpoints += nd->ckpt;
	}
	for (uint32_t i = 0; i < n_doom; i++) {
		uint8_t k[17];
		pfx_db_key(ix->nodes[v[i]].key, k);
		rocksdb_writebatch_delete(wb, (const char *)k, sizeof k);
		pfx_index_remove(ix, v[i]);
	}
	if (n_doom + n_bad) {
		STRATA_LOG(STRATA_LOG_WARN, SUB, "prefix: open dropped %u blocks", n_doom + n_bad);
		pfx->st.dropped_blocks += n_doom + n_bad;
		rocksdb_write(pfx->db, pfx->wsync, wb, &err);
		if ((rc = pfx_rocks_err(err, "drop")))
			goto out;
	}
	rc = pfx->ps->ops->finish(pfx->ps);
out:
	free(doom);
	free(v);
	free(parents);
	free(r);
	if (it)
		rocksdb_iter_destroy(it);
	if (wb)
		rocksdb_writebatch_destroy(wb);
	return rc;
}

int strata_prefix_open(const strata_prefix_config *cfg, strata_prefix **out)
{
	if (!cfg || !out || cfg->size < sizeof *cfg || !cfg->dir || !cfg->model ||
	    cfg->checkpoint_blocks < 1)
		return -EINVAL;
	*out = NULL;
	int rc = strata_model_validate(cfg->model);
	if (rc)
		return rc;
	if (cfg->model->block_tokens != BLOCK || cfg->model->window < 1) {
		STRATA_LOG(STRATA_LOG_ERROR, SUB, "prefix: blocks of %d tokens are not supported",
			   cfg->model->block_tokens);
		return STRATA_E_FORMAT;
	}
	strata_prefix *pfx = calloc(1, sizeof *pfx);
	char path[4096];
	char *err = NULL;
	if (!pfx)
		return -ENOMEM;
	pfx->model = *cfg->model;
	pfx->fp = strata_model_fingerprint(&pfx->model);
	pfx_salt(&pfx->model, pfx->salt);
	pfx->K = cfg->checkpoint_blocks;
	pfx->flags = cfg->flags;
	pfx->budget_host = cfg->budget_host;
	pfx->budget_nvme = cfg->budget_nvme;
	layout_init(pfx);
	if ((rc = pfx_index_init(&pfx->ix)))
		goto fail;
	pfx->dev = cfg->dev;
	if (!pfx->dev) {
		strata_dev_config dc = STRATA_DEV_CONFIG_INIT;
		dc.backend = STRATA_BACKEND_CPU;
		if ((rc = strata_dev_open(&dc, &pfx->dev)))
			goto fail;
		pfx->own_dev = 1;
	}
	if ((rc = make_dirs(cfg->dir)))
		goto fail;
	if ((rc = strata_stream_create(pfx->dev, &pfx->stream)))
		goto fail;
	if (cfg->flags & STRATA_PREFIX_MEMORY) {
		rc = pfx_pages_mem_create(&pfx->ps);
	} else {
		snprintf(path, sizeof path, "%s/pages.strata", cfg->dir);
		rc = pfx_pages_nvme_create(path, cfg->store_bytes ? cfg->store_bytes : 4ull << 30,
					   pfx->dev, &pfx->ps);
	}
	if (rc)
		goto fail;
	snprintf(path, sizeof path, "%s/meta", cfg->dir);
	pfx->opt = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(pfx->opt, 1);
	rocksdb_options_set_max_open_files(pfx->opt, 64);
	rocksdb_options_set_keep_log_file_num(pfx->opt, 2);
	pfx->wsync = rocksdb_writeoptions_create();
	rocksdb_writeoptions_set_sync(pfx->wsync, 1);
	pfx->ro = rocksdb_readoptions_create();
	pfx->db = rocksdb_open(pfx->opt, path, &err);
	if ((rc = pfx_rocks_err(err, "open")))
		goto fail;
	if ((rc = reload(pfx)))
		goto fail;
	*out = pfx;
	return 0;
fail:
	strata_prefix_close(pfx);
	return rc;
}

void strata_prefix_close(strata_prefix *pfx)
{
	if (!pfx)
		return;
	if (pfx->live_restores)
		STRATA_LOG(STRATA_LOG_WARN, SUB, "prefix: closed with %d restores unreleased",
			   pfx->live_restores);
	for (uint32_t i = 0; i < pfx->ix.n_nodes; i++)
		if (pfx->ix.nodes[i].used)
			pfx_host_copy_free(pfx, &pfx->ix.nodes[i]);
	if (pfx->db)
		rocksdb_close(pfx->db);
	if (pfx->opt)
		rocksdb_options_destroy(pfx->opt);
	if (pfx->wsync)
		rocksdb_writeoptions_destroy(pfx->wsync);
	if (pfx->ro)
		rocksdb_readoptions_destroy(pfx->ro);
	if (pfx->ps)
		pfx->ps->ops->destroy(pfx->ps);
	pfx_index_free(&pfx->ix);
	strata_dev_host_free(pfx->dev, pfx->stage);
	if (pfx->stream)
		strata_stream_destroy(pfx->dev, pfx->stream);
	if (pfx->own_dev)
		strata_dev_close(pfx->dev);
	free(pfx);
}

/* ---- store ------------------------------------------------------------------------------- */

static const strata_prefix_state *ckpt_at(const strata_prefix_snapshot *s, uint32_t pages)
{
	for (int i = 0; i < s->n_ckpt; i++)
		if (s->ckpt[i].pages == pages)
			return &s->ckpt[i];
	return NULL;
}

/* The snapshot's shape against the model: STRATA_E_FORMAT says exactly what differs. */
static int check_snapshot(const strata_prefix *pfx, const strata_prefix_snapshot *s)
{
	const strata_model *m = &pfx->model;
	for (int l = 0; l < STRATA_MAX_LAYERS; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++) {
			bool want = l < m->n_layers && strata_prefix_has(m, l, (strata_prefix_family)f);
			if (want != (s->pages[l][f] != NULL)) {
				STRATA_LOG(STRATA_LOG_ERROR, SUB,
					   "prefix: snapshot layer %d family %d: pages %s for ratio %d",
					   l, f, want ? "missing" : "given", l < m->n_layers ? m->ratio[l] : -1);
				return STRATA_E_FORMAT;
			}
			for (uint32_t p = 0; want && p < s->n_pages; p++)
				if (!s->pages[l][f][p])
					return -EINVAL;
		}
	for (int i = 0; i < s->n_ckpt; i++) {
		const strata_prefix_state *c = &s->ckpt[i];
		if (c->pages < 1 || c->pages > s->n_pages)
			return -EINVAL;
		for (int l = 0; l < m->n_layers; l++)
			if (!c->ring[l] || !c->comp[l] != !strata_prefix_comp_bytes(m, l)) {
				STRATA_LOG(STRATA_LOG_ERROR, SUB,
					   "prefix: checkpoint at %u pages: layer %d state does not fit ratio %d",
					   c->pages, l, m->ratio[l]);
				return STRATA_E_FORMAT;
			}
	}
	if (!ckpt_at(s, s->n_pages)) {
		STRATA_LOG(STRATA_LOG_ERROR, SUB, "prefix: snapshot has no state at its end");
		return -EINVAL;
	}
	return 0;
}

static void block_key_for(const uint8_t key[16], int i, uint8_t out[16])
{
	/* The page store's record key: the block key with the page's slot mixed in, so a
	 * scan of the store can tell the pages of a block apart. */
	memcpy(out, key, 16);
	out[15] ^= (uint8_t)i;
	out[14] ^= (uint8_t)(i >> 8);
}

/* A work item: block i of the snapshot is new, or gains a checkpoint. */
typedef struct work {
	uint32_t block;
	int32_t node;        /* existing node, or -1 */
	uint8_t ckpt;
	uint32_t io0, n_io;  /* its new pages in the io array */
} work;

/* Host copies of a committed store: the pages of its new blocks in one host run, and
 * the residual state of its new checkpoints. New blocks are a suffix of the chain (a
 * stored chain is whole from block 0, so w lists them last); when the budget cannot
 * hold them all, the last ones get copies, as LRU eviction would leave them. Without
 * memory a block simply has no copy: restores read the NVMe store. */
static void host_copies(strata_prefix *pfx, const strata_prefix_snapshot *snap, const work *w,
			uint32_t n_work, const int32_t *node)
{
	const strata_model *m = &pfx->model;
	uint32_t first = n_work, cnt = 0;
	for (uint32_t k = n_work; k-- > 0 && w[k].node < 0;)
		first = k, cnt++;
	uint64_t fit = pfx->blk_bytes ? pfx->budget_host / pfx->blk_bytes : 0;
	if (cnt > fit) {
		first += cnt - (uint32_t)fit;
		cnt = (uint32_t)fit;
	}
	pfx_hrun *run = cnt ? calloc(1, sizeof *run) : NULL;
	void *h = NULL;
	if (run && !strata_dev_host_alloc(pfx->dev, cnt * pfx->blk_bytes, &h)) {
		run->base = h;
		run->n = cnt;
		for (uint32_t s = 0; s < cnt; s++) {
			uint32_t i = w[first + s].block;
			pfx_node *p = &pfx->ix.nodes[node[i]];
			for (uint32_t q = 0; q < pfx->blk_locs; q++)
				memcpy(run->base + pfx->lay[q].off * cnt + (uint64_t)s * pfx->lay[q].len,
				       snap->pages[pfx->lay[q].layer][pfx->lay[q].kind][i], pfx->lay[q].len);
			p->hrun = run;
			p->hslot = s;
			run->refs++;
			p->host_bytes += pfx->blk_bytes;
			pfx->host_bytes += pfx->blk_bytes;
		}
	} else {
		free(run);
	}
	uint64_t sb = pfx->ckpt_bytes - pfx->blk_bytes;
	size_t ring = strata_prefix_ring_bytes(m);
	for (uint32_t k = 0; k < n_work; k++) {
		pfx_node *p = &pfx->ix.nodes[node[w[k].block]];
		const strata_prefix_state *c = ckpt_at(snap, w[k].block + 1);
		if (!w[k].ckpt || !c || p->hstate || sb > pfx->budget_host || !(p->hstate = malloc(sb)))
			continue;
		for (uint32_t q = pfx->blk_locs; q < pfx->ckpt_locs; q++) {
			uint8_t *dst = p->hstate + (pfx->lay[q].off - pfx->blk_bytes);
			int l = pfx->lay[q].layer;
			memcpy(dst, c->ring[l], ring);
			if (pfx->lay[q].len > ring)
				memcpy(dst + ring, c->comp[l], pfx->lay[q].len - ring);
		}
		p->host_bytes += sb;
		pfx->host_bytes += sb;
	}
}

int strata_prefix_store(strata_prefix *pfx, const uint32_t *tokens, uint64_t n_tokens,
			const strata_prefix_snapshot *snap)
{
	if (!pfx || !tokens || !snap || snap->size < sizeof *snap || n_tokens == 0 ||
	    n_tokens % BLOCK || snap->n_pages != n_tokens / BLOCK || snap->writer_dcp < 1 ||
	    snap->writer_dcp > 65535 || snap->n_ckpt < 1 || !snap->ckpt) {
		if (pfx && n_tokens % BLOCK)
			STRATA_LOG(STRATA_LOG_ERROR, SUB,
				   "prefix: store of %llu tokens: not a multiple of %d",
				   (unsigned long long)n_tokens, BLOCK);
		return -EINVAL;
	}
	int rc = check_snapshot(pfx, snap);
	if (rc)
		return rc;
	const strata_model *m = &pfx->model;
	uint32_t n = snap->n_pages, n_work = 0, n_io = 0;
	uint8_t (*keys)[16] = malloc((size_t)n * 16);
	int32_t *node = malloc((size_t)n * sizeof *node);
	work *w = malloc((size_t)n * sizeof *w);
	pfx_io *io = NULL;
	uint8_t **state = NULL;
	pfx_record *r = malloc(sizeof *r);
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	uint8_t *enc = malloc(PFX_REC_HEADER + PFX_MAX_LOCS * PFX_LOC_BYTES);
	uint64_t need = 0;
	int written = 0;
	char *err = NULL;
	if (!keys || !node || !w || !r || !wb || !enc) {
		rc = -ENOMEM;
		goto out;
	}
	strata_prefix_keys(m, tokens, n, keys);
	for (uint32_t i = 0; i < n; i++) {
		node[i] = pfx_index_find(&pfx->ix, keys[i]);
		bool want_ck = ((i + 1) % (uint32_t)pfx->K == 0 || i + 1 == n) && ckpt_at(snap, i + 1);
		bool have_ck = node[i] >= 0 && pfx->ix.nodes[node[i]].ckpt;
		if (node[i] >= 0 && (!want_ck || have_ck))
			continue;
		w[n_work].block = i;
		w[n_work].node = node[i];
		w[n_work].ckpt = want_ck;
		w[n_work].io0 = n_io;
		w[n_work].n_io = (node[i] < 0 ? pfx->blk_locs : 0) + (want_ck ? (uint32_t)m->n_layers : 0);
		n_io += w[n_work++].n_io;
	}
	/* The chain being stored must survive the eviction that makes room for it. */
	for (uint32_t i = 0; i < n; i++)
		if (node[i] >= 0)
			pfx->ix.nodes[node[i]].pins++;
	if (!n_work)
		goto commit;
	io = calloc(n_io, sizeof *io);
	state = calloc(n_io, sizeof *state);
	if (!io || !state) {
		rc = -ENOMEM;
		goto unpin;
	}
	for (uint32_t k = 0; k < n_work; k++) {
		uint32_t i = w[k].block, j = w[k].io0;
		if (w[k].node < 0)
			for (uint32_t q = 0; q < pfx->blk_locs; q++, j++) {
				io[j].src = snap->pages[pfx->lay[q].layer][pfx->lay[q].kind][i];
				io[j].len = pfx->lay[q].len;
			}
		if (w[k].ckpt) {
			const strata_prefix_state *c = ckpt_at(snap, i + 1);
			size_t ring = strata_prefix_ring_bytes(m);
			for (int l = 0; l < m->n_layers; l++, j++) {
				size_t comp = strata_prefix_comp_bytes(m, l);
				if (!(state[j] = malloc(ring + comp))) {
					rc = -ENOMEM;
					goto unpin;
				}
				memcpy(state[j], c->ring[l], ring);
				if (comp)
					memcpy(state[j] + ring, c->comp[l], comp);
				io[j].src = state[j];
				io[j].len = (uint32_t)(ring + comp);
			}
		}
		for (j = w[k].io0; j < w[k].io0 + w[k].n_io; j++) {
			block_key_for(keys[i], (int)(j - w[k].io0), io[j].key);
			need += pfx->ps->ops->footprint(io[j].len);
		}
	}
	if (pfx->budget_nvme && pfx->named_footprint + need > pfx->budget_nvme) {
		if (need > pfx->budget_nvme ||
		    (rc = evict_nvme(pfx, pfx->budget_nvme - need))) {
			rc = rc ? rc : STRATA_E_BUDGET;
			goto unpin;
		}
	}
	/* 1. pages, 2. sync, 3. the records (synced): see the note at the top. */
	written = 1;
	if ((rc = pfx->ps->ops->write(pfx->ps, io, (int)n_io)))
		goto unpin;
	if ((rc = pfx->ps->ops->sync(pfx->ps)))
		goto unpin;
	for (uint32_t k = 0; k < n_work; k++) {
		uint32_t i = w[k].block, j0 = w[k].io0;
		if (w[k].node >= 0) {
			if ((rc = pfx_get_record(pfx, keys[i], r)))
				goto unpin;
		} else {
			memset(r, 0, offsetof(pfx_record, loc));
			r->writer_dcp = (uint16_t)snap->writer_dcp;
			r->block = i;
			r->fingerprint = pfx->fp;
			if (i)
				memcpy(r->parent, keys[i - 1], 16);
			r->n_layers = (uint16_t)m->n_layers;
		}
		for (uint32_t q = 0; q < w[k].n_io; q++) {
			uint32_t slot = r->n_locs + q;
			pfx_loc *l = &r->loc[slot];
			l->addr = io[j0 + q].addr;
			l->csum = io[j0 + q].csum;
			l->len = io[j0 + q].len;
			l->tier = (uint8_t)pfx->ps->tier;
			l->kind = pfx->lay[slot].kind;
			l->layer = pfx->lay[slot].layer;
		}
		r->n_locs = (uint16_t)(r->n_locs + w[k].n_io);
		if (w[k].ckpt)
			r->flags |= 1;
		uint8_t dk[17];
		pfx_db_key(keys[i], dk);
		size_t len = pfx_record_encode(r, enc, PFX_REC_HEADER + PFX_MAX_LOCS * PFX_LOC_BYTES);
		rocksdb_writebatch_put(wb, (const char *)dk, sizeof dk, (const char *)enc, len);
	}
	rocksdb_write(pfx->db, pfx->wsync, wb, &err);
	if ((rc = pfx_rocks_err(err, "commit")))
		goto unpin;
	written = 0; /* named now */
	/* The entry is durable; mirror it in the index. */
	for (uint32_t k = 0; k < n_work; k++) {
		uint32_t i = w[k].block;
		int32_t nd = w[k].node;
		if (nd < 0) {
			if ((rc = pfx_index_add(&pfx->ix, keys[i], &nd))) {
				/* Durable but not indexed: the next open finds it. */
				goto unpin;
			}
			node[i] = nd;
			pfx_node *p = &pfx->ix.nodes[nd];
			p->block = i;
			p->parent = i ? node[i - 1] : -1;
			p->pins = 1; /* released with the rest of the chain below */
			if (p->parent >= 0)
				pfx->ix.nodes[p->parent].children++;
			pfx->st.blocks++;
		}
		pfx_node *p = &pfx->ix.nodes[nd];
		for (uint32_t q = 0; q < w[k].n_io; q++) {
			p->bytes += io[w[k].io0 + q].len;
			p->footprint += pfx->ps->ops->footprint(io[w[k].io0 + q].len);
		}
		if (w[k].ckpt) {
			p->ckpt = 1;
			pfx->st.checkpoints++;
		}
	}
	pfx->named_bytes = 0;
	pfx->named_footprint = 0;
	for (uint32_t i = 0; i < pfx->ix.n_nodes; i++)
		if (pfx->ix.nodes[i].used) {
			pfx->named_bytes += pfx->ix.nodes[i].bytes;
			pfx->named_footprint += pfx->ix.nodes[i].footprint;
		}
commit:
	pfx->st.stores++;
	for (uint32_t i = 0; i < n; i++)
		if (node[i] >= 0)
			pfx->ix.nodes[node[i]].lru = ++pfx->tick;
	/* Host copies of the new blocks and states, for fast restores (then the budget). */
	if (pfx->budget_host)
		host_copies(pfx, snap, w, n_work, node);
	if (pfx->host_bytes > pfx->budget_host)
		evict_host(pfx, pfx->budget_host);
unpin:
	for (uint32_t i = 0; i < n; i++)
		if (node[i] >= 0 && pfx->ix.nodes[node[i]].pins)
			pfx->ix.nodes[node[i]].pins--;
	if (written) {
		/* Not committed: these pages are nobody's. */
		for (uint32_t j = 0; j < n_io; j++)
			if (!io[j].result && io[j].src)
				pfx->ps->ops->release(pfx->ps, io[j].addr, io[j].len, io[j].csum);
	}
out:
	if (state)
		for (uint32_t j = 0; j < n_io; j++)
			free(state[j]);
	free(state);
	free(io);
	free(enc);
	free(r);
	if (wb)
		rocksdb_writebatch_destroy(wb);
	free(w);
	free(node);
	free(keys);
	return rc;
}

/* ---- lookup --------------------------------------------------------------------------------
 * Neither a RocksDB MultiGet nor a binary search: the index of stored blocks lives in
 * memory (open rebuilds it while it marks pages live), and chains are whole from block
 * 0, so lookup hashes block after block and stops at the first key it does not hold.
 * The cost is the XXH3 of the hit plus one block, and one probe per block. */
int strata_prefix_lookup(strata_prefix *pfx, const uint32_t *tokens, uint64_t n_tokens,
			 strata_prefix_hit *hit)
{
	if (!pfx || !hit || (!tokens && n_tokens))
		return -EINVAL;
	memset(hit, 0, sizeof *hit);
	uint8_t prev[16] = { 0 }, key[16];
	uint64_t nb = n_tokens / BLOCK;
	pfx->st.lookups++;
	for (uint64_t i = 0; i < nb; i++) {
		pfx_key_next(prev, pfx->salt, tokens + i * BLOCK, key);
		int32_t nd = pfx_index_find(&pfx->ix, key);
		if (nd < 0)
			break;
		if (pfx->ix.nodes[nd].ckpt) {
			hit->pages = (uint32_t)(i + 1);
			hit->tokens = (i + 1) * BLOCK;
			memcpy(hit->key, key, 16);
		}
		memcpy(prev, key, 16);
	}
	if (hit->tokens)
		pfx->st.hits++;
	return 0;
}

void strata_prefix_stats_get(const strata_prefix *pfx, strata_prefix_stats *st)
{
	*st = pfx->st;
	st->named_bytes = pfx->named_bytes;
	st->named_footprint = pfx->named_footprint;
	st->store_allocated = pfx->ps->ops->allocated(pfx->ps);
	st->host_bytes = pfx->host_bytes;
	st->pinned_blocks = 0;
	for (uint32_t i = 0; i < pfx->ix.n_nodes; i++)
		st->pinned_blocks += pfx->ix.nodes[i].used && pfx->ix.nodes[i].pins;
}
