/* (Session 12: + the gather designs' overflow counts at the end.) CPU analysis of the indexer's cut on the bench's data (bench indexer's generator, seed 1 or
 * argv[2]): 1M tokens (262144 keys), one row, FP8 or MXFP4 keys (argv[1]), FP8 queries,
 * top-512. Prints |b*|, the count above b*, and how many scores a partial cut would file.
 * Build from the repository root against a CUDA-off build (build-pre):
 *   gcc -O2 -std=c11 -I. -Ikernels cut-stats.c build-pre/kernels/libstrata_kernels.a \
 *       build-pre/base/libstrata_base.a -lm -lpthread -o cut-stats */
#include "kernels/kernels.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static uint32_t ord32(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) == 0)
		return 0x80000000u;
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
int main(int argc, char **argv)
{
	int mx = argc > 1 && !strcmp(argv[1], "mxfp4");
	uint64_t seed = argc > 2 ? strtoull(argv[2], 0, 10) : 1;
	strata_index_fmt fmt = mx ? STRATA_INDEX_MXFP4 : STRATA_INDEX_FP8;
	const int H = 64, K = 512, keys = 262144, B = 64, ppr = keys / B;
	size_t eb = strata_index_entry_bytes(fmt), pb = (size_t)B * eb;
	uint8_t *pages = malloc((size_t)ppr * pb);
	uint64_t s = seed;
	for (int p = 0; p < ppr; p++) {
		uint8_t *page = pages + (size_t)p * pb;
		size_t pay = (size_t)B * (fmt == STRATA_INDEX_FP8 ? 128 : 64);
		for (size_t i = 0; i < pay; i += 8) {
			uint64_t v = rng_next(&s);
			memcpy(page + i, &v, 8);
		}
		if (fmt == STRATA_INDEX_FP8) {
			for (size_t i = 0; i < pay; i++)
				if ((page[i] & 0x7f) == 0x7f)
					page[i] ^= 1;
			for (int k = 0; k < B; k++) {
				float sc = ldexpf(1.0f, -9 + (int)(rng_next(&s) % 3));
				memcpy(page + pay + (size_t)k * 4, &sc, 4);
			}
		} else {
			for (int k = 0; k < B * 4; k++)
				page[pay + k] = (uint8_t)(124 + rng_next(&s) % 3);
		}
	}
	uint16_t *q = malloc(2 * H * 128);
	uint8_t *q8 = malloc(H * 128);
	float *w = malloc(4 * H);
	uint64_t t = seed * 7919;
	for (int i = 0; i < H * 128; i++) {
		float v = (float)((double)(rng_next(&t) >> 11) * 0x1p-53 * 2.0 - 1.0);
		q8[i] = strata_e4m3_encode(16.0f * v);
		q[i] = strata_bf16_encode(strata_e4m3_decode(q8[i]));
	}
	for (int i = 0; i < H; i++)
		w[i] = (float)((double)(rng_next(&t) >> 11) * 0x1p-53) * 0.0125f / 16.0f;
	int32_t *pt = malloc(4 * ppr), rr[2] = { 0, 1 }, lim = keys, *ids = malloc(4 * K);
	for (int i = 0; i < ppr; i++)
		pt[i] = i;
	float *osc = malloc(4 * K);
	strata_indexer_params p = { .fmt = fmt, .heads = H, .topk = K, .n_req = 1, .n_rows = 1,
				    .max_rows = 1, .max_limit = keys, .max_pages = ppr, .B = B };
	p.q = q;
	p.q8 = q8;
	p.w = w;
	p.req_rows = rr;
	p.row_limit = &lim;
	p.pages = pages;
	p.page_table = pt;
	p.out_ids = ids;
	p.out_scores = osc;
	p.scratch_bytes = strata_k_indexer_scratch(NULL, &p);
	p.scratch = calloc(1, p.scratch_bytes);
	if (strata_k_indexer_cpu(&p)) {
		fprintf(stderr, "cpu failed\n");
		return 1;
	}
	const float *sc;
	size_t stride;
	if (strata_k_indexer_scores(NULL, &p, &sc, &stride)) {
		fprintf(stderr, "no scores\n");
		return 1;
	}
	static uint32_t hist[2048];
	for (int j = 0; j < keys; j++)
		hist[strata_k_indexer_bucket(sc[j])]++;
	int bstar = -1;
	uint32_t above = 0, acc = 0;
	for (int b = 2047; b >= 0; b--) {
		if (acc < (uint32_t)K && acc + hist[b] >= (uint32_t)K) {
			bstar = b;
			above = acc;
		}
		acc += hist[b];
	}
	/* second level: 4096 sub-bins over the bucket's ordered span, as the GPU */
	uint32_t lo = 0xffffffffu, hi = 0;
	for (int j = 0; j < keys; j++)
		if ((int)strata_k_indexer_bucket(sc[j]) == bstar) {
			uint32_t o = ord32(sc[j]);
			lo = o < lo ? o : lo;
			hi = o > hi ? o : hi;
		}
	printf("%s seed %llu: |b*| = %u (bucket %d), above b* %u, need %u; scores in [%g, %g]\n",
	       mx ? "mxfp4" : "fp8", (unsigned long long)seed, hist[bstar], bstar, above, K - above,
	       sc[0], sc[1]);
	/* the partial cut after a fraction f of the scores (a random subset: every m-th) */
	for (int pc = 25; pc <= 75; pc += 25) {
		static uint32_t ph[2048];
		memset(ph, 0, sizeof ph);
		for (int j = 0; j < keys; j++)
			if ((uint64_t)j * 100 % 100 < 0 || (j % 100) < pc)
				ph[strata_k_indexer_bucket(sc[j])]++;
		int bp = 0;
		acc = 0;
		for (int b = 2047; b >= 0; b--) {
			if (acc < (uint32_t)K && acc + ph[b] >= (uint32_t)K)
				bp = b;
			acc += ph[b];
		}
		uint32_t filed = 0;
		for (int b = bp; b < 2048; b++)
			filed += hist[b];
		printf("  partial cut at %d%% counted: bucket %d (b* %d), filed %u\n", pc, bp, bstar, filed);
	}
	/* how many distinct buckets hold the top 512 + the bucket sizes around b* */
	printf("  bucket sizes b*-2 .. b*+2: %u %u [%u] %u %u\n", hist[bstar - 2], hist[bstar - 1],
	       hist[bstar], hist[bstar + 1], hist[bstar + 2]);
	/* the gather tail's overflow: CTA x holds tiles x, x + G, ... (64 keys each); its pc is
	 * the lowest bucket with at most P of its scores at or above it; it overflows when
	 * pc > b* */
	for (int G = 528; G <= 792; G += 264)
		for (int P = 2; P <= 5; P++) {
			int nov = 0, npub = 0;
			for (int x = 0; x < G; x++) {
				static uint32_t lh[2048];
				memset(lh, 0, sizeof lh);
				for (int t = x; t < keys / 64; t += G)
					for (int e = 0; e < 64; e++)
						lh[strata_k_indexer_bucket(sc[t * 64 + e])]++;
				uint32_t c = 0;
				int pcb = 0;
				for (int b = 2047; b >= 0; b--) {
					if (c + lh[b] > (uint32_t)P) {
						pcb = b + 1;
						break;
					}
					c += lh[b];
				}
				npub += c;
				nov += pcb > bstar;
			}
			printf("  G %d, kPub %d: %d CTAs overflow, %d keys published\n", G, P, nov, npub);
		}
	return 0;
}
