/* Fuzz target: V4 cache bytes from outside (a page read back from a tier, a pool handed
 * over by an engine). Decoding any bytes as main entries and MXFP4/FP8 index keys must
 * stay in bounds. Arbitrary bytes need not be canonical (a scale byte may be larger than
 * its values need, and the 1e-4 floor may not hold), so one encode makes them canonical;
 * from there the codec is a fixed point: encode(decode(b)) == b for canonical b, wherever
 * the values are finite. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kernels/kernels.h"

int fuzz_one(const uint8_t *data, size_t size)
{
	const int B = 2;
	size_t stride = strata_main_block_stride(B);
	uint8_t *pool = calloc(1, stride);
	uint8_t *pool2 = calloc(1, stride);
	uint8_t pages[2 * STRATA_INDEX_FP8_BYTES];
	float *x = malloc(sizeof(float) * B * STRATA_HEAD_DIM);
	float *y = malloc(sizeof(float) * B * STRATA_HEAD_DIM);
	if (!pool || !pool2 || !x || !y)
		abort();
	memcpy(pool, data, size < stride ? size : stride);
	strata_main_decode_params d = { .pool = pool, .n = B, .B = B, .dst = x };
	if (strata_k_main_decode_cpu(&d))
		abort();
	int finite = 1;
	for (int i = 0; i < B * STRATA_HEAD_DIM; i++)
		finite &= isfinite(x[i]) != 0;
	if (finite) {
		/* pool2 = canonical bytes; decode them to y, encode y again into pool. */
		strata_main_encode_params e = { .src = x, .n = B, .B = B, .pool = pool2 };
		strata_main_decode_params d2 = { .pool = pool2, .n = B, .B = B, .dst = y };
		strata_main_encode_params e2 = { .src = y, .n = B, .B = B, .pool = pool };
		memset(pool, 0, stride);
		if (strata_k_main_encode_cpu(&e) || strata_k_main_decode_cpu(&d2) ||
		    strata_k_main_encode_cpu(&e2))
			abort();
		if (memcmp(pool, pool2, (size_t)B * STRATA_MAIN_ENTRY_BYTES))
			abort();
	}
	for (int f = 0; f < 2; f++) {
		memset(pages, 0, sizeof pages);
		memcpy(pages, data, size < sizeof pages ? size : sizeof pages);
		strata_index_decode_params id = { .fmt = (strata_index_fmt)f, .pages = pages,
						   .n = 1, .B = 1, .dst = x };
		if (strata_k_index_decode_cpu(&id))
			abort();
	}
	free(pool);
	free(pool2);
	free(x);
	free(y);
	return 0;
}

size_t fuzz_seed(uint8_t *buf, size_t cap)
{
	const int B = 2;
	size_t stride = strata_main_block_stride(B);
	float x[2 * STRATA_HEAD_DIM];
	for (int i = 0; i < 2 * STRATA_HEAD_DIM; i++)
		x[i] = sinf((float)i * 0.37f) * (float)(1 + i % 50);
	if (cap < stride)
		return 0;
	memset(buf, 0, stride);
	strata_main_encode_params e = { .src = x, .n = B, .B = B, .pool = buf };
	return strata_k_main_encode_cpu(&e) ? 0 : stride;
}

#ifdef STRATA_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_one(data, size);
}
#endif
