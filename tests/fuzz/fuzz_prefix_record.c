/* Fuzz target: a prefix-store record as read back from RocksDB (outside bytes after a
 * crash, a bad disk or another build). Decoding either fails with a strata error or
 * yields a record whose re-encoding is byte-identical to the input, and the geometry
 * check never reads past the record. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "cachemgr/prefix_int.h"

static strata_model model;
static uint64_t fp;

static void init(void)
{
	if (!model.size) {
		model.size = sizeof model;
		strata_model_preset("tiny", &model);
		fp = strata_model_fingerprint(&model);
	}
}

int fuzz_one(const uint8_t *data, size_t size)
{
	init();
	pfx_record *r = malloc(sizeof *r);
	uint8_t *again = malloc(size + 1);
	if (!r || !again)
		abort(); /* a fuzz driver, not library code */
	int err = pfx_record_decode(data, size, r);
	if (!err) {
		size_t n = pfx_record_encode(r, again, size + 1);
		if (n != size || memcmp(again, data, size))
			abort(); /* decode accepted bytes it cannot reproduce */
		(void)pfx_record_check(r, &model, fp);
	} else if (err != STRATA_E_CORRUPT && err != STRATA_E_FORMAT) {
		abort();
	}
	free(again);
	free(r);
	return 0;
}

size_t fuzz_seed(uint8_t *buf, size_t cap)
{
	init();
	pfx_record *r = calloc(1, sizeof *r);
	if (!r)
		return 0;
	r->flags = 1;
	r->writer_dcp = 2;
	r->block = 7;
	r->fingerprint = fp;
	r->n_layers = (uint16_t)model.n_layers;
	for (int i = 0; i < 12; i++) {
		pfx_loc *l = &r->loc[r->n_locs++];
		l->addr = 4096u * (unsigned)i;
		l->csum = 0x1234u + (unsigned)i;
		l->len = 37440;
		l->tier = 2;
		l->kind = (uint8_t)(i % 3);
		l->layer = (uint16_t)(i / 3);
	}
	size_t n = pfx_record_encode(r, buf, cap);
	free(r);
	return n;
}

#ifdef STRATA_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_one(data, size);
}
#endif
