/* An engine-like program built against an installed strata. */
#include <stdio.h>

#include "base/base.h"
#include "kernels/kernels.h"

int main(void)
{
	strata_model m = STRATA_MODEL_INIT;
	strata_sizes s;
	if (strata_model_preset("flash", &m))
		return 1;
	strata_model_sizes(&m, 1u << 20, &s);
	printf("strata %s: flash 1M total %llu bytes\n", STRATA_VERSION,
	       (unsigned long long)s.total_bytes);
	return s.total_bytes == 3688172544ull ? 0 : 1;
}
