/*
 * `strata demo --prefix`: agents resending a long shared prompt. The first agent
 * prefills it and strata stores its cache as a prefix entry; the next agent sends the
 * same prompt, finds it, and restores the cache instead of running prefill; a third
 * does the same after the store has been closed and reopened (a cold restore from the
 * NVMe store). All three then decode the same steps, and every output of every step
 * and layer must be identical: a restore is exact, not an approximation.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ref_eng_int.h"

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int open_store(strata_dev *dev, const strata_model *m, const char *dir,
		      uint64_t bytes, strata_prefix **out)
{
	strata_prefix_config c = STRATA_PREFIX_CONFIG_INIT;
	c.dir = dir;
	c.model = m;
	c.dev = dev;
	c.budget_host = bytes;              /* the first restore finds host copies */
	c.store_bytes = 2 * bytes + (64u << 20);
	return strata_prefix_open(&c, out);
}

typedef struct agent {
	double prep_s;     /* prefill, or lookup + restore */
	double store_s;
	uint64_t digest;
} agent;

/* !restore: prefill and store into pfx; else look up and restore from it. */
static int run_agent(strata_dev *dev, const strata_ref_config *c, int tokens, int steps,
		     strata_prefix *pfx, bool restore, agent *a)
{
	strata_ref_engine *e = NULL;
	int err = strata_ref_engine_create(dev, c, &e);
	if (err)
		return err;
	uint64_t t0 = strata_now_ns();
	if (!restore) {
		err = strata_ref_engine_prefill(e, 0, tokens);
		a->prep_s = (double)(strata_now_ns() - t0) / 1e9;
		t0 = strata_now_ns();
		if (!err)
			err = strata_ref_engine_snapshot(e, 0, pfx);
		a->store_s = (double)(strata_now_ns() - t0) / 1e9;
	} else {
		int n;
		const uint32_t *tok = strata_ref_engine_tokens(e, 0, &n);
		strata_prefix_hit hit;
		err = tok ? strata_prefix_lookup(pfx, tok, (uint64_t)tokens, &hit) : -ENOMEM;
		if (!err && hit.tokens != (uint64_t)tokens)
			err = STRATA_E_NOTFOUND;
		if (!err)
			err = strata_ref_engine_restore(e, 0, pfx, &hit, 1, 0);
		a->prep_s = (double)(strata_now_ns() - t0) / 1e9;
	}
	for (int s = 0; s < steps && !err; s++)
		err = strata_ref_engine_decode_step(e);
	if (!err)
		a->digest = strata_ref_engine_digest(e);
	strata_ref_engine_destroy(e);
	return err;
}

int ref_demo_prefix(strata_dev *dev, const strata_ref_config *base, int tokens, int steps)
{
	tokens -= tokens % STRATA_BLOCK_TOKENS;
	if (tokens < STRATA_BLOCK_TOKENS) {
		fprintf(stderr, "strata demo --prefix: the prompt needs at least %d tokens\n",
			STRATA_BLOCK_TOKENS);
		return 2;
	}
	strata_ref_config c = *base;
	c.n_req = 1;
	c.mode = STRATA_REF_HISPARSE;
	c.max_ctx = tokens + steps;
	/* What the entry takes: every page of the prompt and one residual state. */
	uint64_t bytes = strata_prefix_state_bytes(&c.model);
	for (int l = 0; l < c.model.n_layers; l++)
		for (int f = 0; f < STRATA_PFX_FAMILIES; f++)
			if (strata_prefix_has(&c.model, l, (strata_prefix_family)f))
				bytes += strata_prefix_page_bytes(&c.model, (strata_prefix_family)f) *
					 (uint64_t)(tokens / STRATA_BLOCK_TOKENS);
	char dir[] = "/tmp/strata-demo-prefix-XXXXXX";
	if (!mkdtemp(dir)) {
		fprintf(stderr, "strata demo --prefix: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	printf("strata demo --prefix: 3 agents send the same %d-token prompt, then decode %d "
	       "steps; model %s, C4 main on the host tier (HiSparse), store in %s\n",
	       tokens, steps, c.model.name, dir);
	printf("(reference engine: synthetic weights, exact V4 cache mechanics; not a language model)\n\n");
	fflush(stdout);
	agent a[3];
	memset(a, 0, sizeof a);
	strata_prefix *pfx = NULL;
	int err = open_store(dev, &c.model, dir, bytes, &pfx);
	if (!err)
		err = run_agent(dev, &c, tokens, steps, pfx, false, &a[0]);
	if (!err)
		err = run_agent(dev, &c, tokens, steps, pfx, true, &a[1]);
	strata_prefix_close(pfx);
	pfx = NULL;
	if (!err)
		err = open_store(dev, &c.model, dir, bytes, &pfx);
	if (!err)
		err = run_agent(dev, &c, tokens, steps, pfx, true, &a[2]);
	strata_prefix_close(pfx);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	if (err) {
		fprintf(stderr, "strata demo --prefix: %s\n", strata_strerror(err));
		return 1;
	}
	char mib[32];
	snprintf(mib, sizeof mib, "%.1f MiB", (double)bytes / (1024.0 * 1024));
	printf("  %-44s %12s\n", "prefix entry (pages + residual state)", mib);
	printf("  %-44s %10.3f s\n", "agent 1: prefill (host model math + writes)", a[0].prep_s);
	printf("  %-44s %10.3f s\n", "agent 1: store (durable)", a[0].store_s);
	printf("  %-44s %10.3f s  (%.1fx faster than prefill)\n",
	       "agent 2: lookup + restore (host copies)", a[1].prep_s,
	       a[0].prep_s / (a[1].prep_s > 0 ? a[1].prep_s : 1e-9));
	printf("  %-44s %10.3f s  (%.1fx faster than prefill)\n",
	       "agent 3: lookup + restore (NVMe, reopened)", a[2].prep_s,
	       a[0].prep_s / (a[2].prep_s > 0 ? a[2].prep_s : 1e-9));
	int same = a[0].digest == a[1].digest && a[0].digest == a[2].digest;
	printf("\n  outputs identical: %s (%d steps x %d layers, XXH3 %016llx %016llx %016llx)\n",
	       same ? "yes" : "NO", steps, c.model.n_layers, (unsigned long long)a[0].digest,
	       (unsigned long long)a[1].digest, (unsigned long long)a[2].digest);
	return same ? 0 : 1;
}
