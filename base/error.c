/* Error names for strata's reserved range and for -errno. */
#include "base/base.h"

#include <string.h>

const char *strata_strerror(int err)
{
	switch (err) {
	case 0: return "success";
	case STRATA_E_CHECKSUM: return "checksum mismatch: stored bytes are damaged";
	case STRATA_E_CUDA: return "CUDA runtime error";
	case STRATA_E_NOGPU: return "no usable GPU";
	case STRATA_E_ROCKSDB: return "RocksDB error";
	case STRATA_E_FORMAT: return "format or geometry mismatch";
	case STRATA_E_NOTFOUND: return "not found";
	case STRATA_E_BUDGET: return "tier byte budget exceeded";
	case STRATA_E_CORRUPT: return "corrupt record";
	case STRATA_E_NCCL: return "NCCL error";
	case STRATA_E_SHORTIO: return "short read or write";
	case STRATA_E_INJECTED: return "injected fault";
	case STRATA_E_UNSUPPORTED: return "not supported in this build or on this system";
	default: break;
	}
	if (err < 0 && err > -4096)
		return strerror(-err); /* glibc: thread-safe, static table */
	return "unknown error";
}
