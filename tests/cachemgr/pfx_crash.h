/* One crash trial, shared by tests/cachemgr/test_crash.c (CI) and `strata bench prefix
 * --soak`: a child process stores entries in a loop and reports each one to a pipe
 * before (begin) and after (commit) its store call; the parent SIGKILLs it at a random
 * moment (after 0 .. 4 commits, then a random delay), reopens the store and checks that every committed entry restores byte-exact,
 * that the entry in flight is either whole or absent, that the store holds exactly the
 * blocks of those entries, and that no page leaked. */
#ifndef STRATA_PFX_CRASH_H
#define STRATA_PFX_CRASH_H

#include <signal.h>
#include <sys/wait.h>

#include "pfx_fixture.h"

typedef struct fx_entry {
	uint32_t tag;      /* 0 begin, 1 commit */
	uint32_t n_pages, shared;
	uint64_t fam, own;
} fx_entry;

static inline fx_seq *fx_entry_seq(const strata_model *m, const fx_entry *e)
{
	return fx_seq_make(m, e->n_pages, e->shared, e->fam, e->own, 4);
}

static inline void fx_crash_child(const char *dir, const strata_model *m, uint64_t seed, int fd)
{
	strata_prefix *pfx = NULL;
	if (fx_open(dir, m, 0, 0, &pfx))
		_exit(3);
	for (uint32_t k = 0;; k++) {
		fx_entry e = { 0, 1 + (uint32_t)(fx_next(&seed) % 6), 0, fx_next(&seed) % 3,
			       seed ^ k };
		e.shared = (uint32_t)(fx_next(&seed) % (e.n_pages + 1));
		fx_seq *s = fx_entry_seq(m, &e);
		if (write(fd, &e, sizeof e) != sizeof e)
			_exit(4);
		if (strata_prefix_store(pfx, s->tokens, (uint64_t)e.n_pages * 256, &s->snap))
			_exit(5);
		e.tag = 1;
		if (write(fd, &e, sizeof e) != sizeof e)
			_exit(4);
		fx_seq_free(s);
	}
}

static inline int fx_has_key(uint8_t (*set)[16], size_t n, const uint8_t *k)
{
	for (size_t i = 0; i < n; i++)
		if (!memcmp(set[i], k, 16))
			return 1;
	return 0;
}

/* Returns 0, or a line number of the check that failed (msg says more). The trial
 * uses a fresh store in dir. *n_committed gets the committed entries it checked. */
static inline int fx_crash_trial(const char *dir, const strata_model *m, uint64_t seed,
				 unsigned kill_after_us, int *n_committed, char *msg, size_t msg_len)
{
	int fds[2], bad = 0, nc = 0;
	fx_entry ent[4096];
	size_t n_ent = 0, n_keys = 0;
	uint8_t (*keys)[16] = NULL;
	strata_prefix *pfx = NULL;
	fx_seq *s = NULL;
	snprintf(msg, msg_len, "ok");
	if (pipe(fds))
		return __LINE__;
	pid_t pid = fork();
	if (pid < 0)
		return __LINE__;
	if (pid == 0) {
		close(fds[0]);
		fx_crash_child(dir, m, seed, fds[1]);
	}
	close(fds[1]);
	/* Let the child commit a few entries first (0 .. 4, from the seed), so that slow
	 * builds (sanitizers) still check committed entries; then a random delay. */
	for (uint32_t want = (uint32_t)(seed % 5), got = 0; got < want && n_ent < 4096;) {
		fx_entry e;
		if (read(fds[0], &e, sizeof e) != (ssize_t)sizeof e)
			break;
		ent[n_ent++] = e;
		got += e.tag == 1;
	}
	usleep(kill_after_us);
	kill(pid, SIGKILL);
	int status = 0;
	waitpid(pid, &status, 0);
	if (!WIFSIGNALED(status)) {
		snprintf(msg, msg_len, "child exited with status %d before the kill",
			 WEXITSTATUS(status));
		close(fds[0]);
		return __LINE__;
	}
	for (fx_entry e; n_ent < 4096 && read(fds[0], &e, sizeof e) == (ssize_t)sizeof e;)
		ent[n_ent++] = e;
	close(fds[0]);
	if (fx_open(dir, m, 0, 0, &pfx)) {
		snprintf(msg, msg_len, "reopen failed");
		return __LINE__;
	}
	keys = malloc(sizeof *keys * (n_ent * 6 + 1));
	/* Committed entries: whole and byte-exact. The last begin without a commit is the
	 * one in flight: whole (it committed, the report did not) or absent. */
	for (size_t i = 0; i < n_ent && !bad; i++) {
		const fx_entry *e = &ent[i];
		bool committed = e->tag == 1;
		bool in_flight = e->tag == 0 && (i + 1 == n_ent);
		if (!committed && !in_flight)
			continue;
		s = fx_entry_seq(m, e);
		strata_prefix_hit hit;
		strata_prefix_lookup(pfx, s->tokens, (uint64_t)e->n_pages * 256, &hit);
		bool whole = hit.pages == e->n_pages;
		if (committed && !whole) {
			snprintf(msg, msg_len, "committed entry of %u pages: hit %u", e->n_pages, hit.pages);
			bad = __LINE__;
		}
		if (whole) {
			strata_prefix_restored out = STRATA_PREFIX_RESTORED_INIT;
			int rc = strata_prefix_restore(pfx, &hit, 1, 0, &out);
			int diff = rc ? 0 : fx_check_restored(s, &out);
			if (rc || diff) {
				snprintf(msg, msg_len, "restore of %u pages: %s, check line %d",
					 e->n_pages, strata_strerror(rc), diff);
				bad = __LINE__;
			}
			strata_prefix_restored_release(pfx, &out);
			for (uint32_t p = 0; p < e->n_pages; p++)
				if (!fx_has_key(keys, n_keys, s->keys[p]))
					memcpy(keys[n_keys++], s->keys[p], 16);
			nc += committed;
		}
		fx_seq_free(s);
		s = NULL;
	}
	strata_prefix_stats st;
	strata_prefix_stats_get(pfx, &st);
	if (!bad && st.blocks != n_keys) {
		snprintf(msg, msg_len, "store holds %llu blocks, entries name %zu",
			 (unsigned long long)st.blocks, n_keys);
		bad = __LINE__;
	}
	if (!bad && st.store_allocated != st.named_footprint) {
		snprintf(msg, msg_len, "page leak: %llu bytes allocated, %llu named",
			 (unsigned long long)st.store_allocated, (unsigned long long)st.named_footprint);
		bad = __LINE__;
	}
	strata_prefix_close(pfx);
	free(keys);
	*n_committed = nc;
	return bad;
}

#endif
