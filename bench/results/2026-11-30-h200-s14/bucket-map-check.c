/* rs-trim-prepared.patch's idx_bucket_dev against the current one, over every non-NaN
 * fp16 value of the score (the bucket depends on the score only through it), emulating
 * the fp16 add of +0 (-0 becomes +0, everything else stays) and prmt's sign-replicate
 * selector 0x4499. Build and run: cc -O2 bucket-map-check.c && ./a.out */
#include <stdint.h>
#include <stdio.h>

static uint32_t current(uint16_t u)
{
	if (!(u & 0x7fffu))
		u = 0;
	u = (u & 0x8000u) ? (uint16_t)~u : (uint16_t)(u | 0x8000u);
	return u >> 5;
}

static uint32_t prepared(uint16_t h)
{
	const uint32_t u = h == 0x8000u ? 0u : h;           /* __hadd(h, +0) */
	const uint32_t neg = (u >> 15) & 1u ? 0xffffu : 0u; /* prmt u, 0, 0x4499 */
	return (u ^ (neg | 0x8000u)) >> 5;
}

int main(void)
{
	int bad = 0, n = 0;
	for (uint32_t u = 0; u < 65536; u++) {
		if ((u & 0x7c00u) == 0x7c00u && (u & 0x3ffu))
			continue; /* NaN */
		n++;
		bad += current((uint16_t)u) != prepared((uint16_t)u);
	}
	printf("%d of %d fp16 values map differently\n", bad, n);
	return bad != 0;
}
