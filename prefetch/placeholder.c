/* Placeholder so that the library exists while the folder is being built. */
#include "prefetch/prefetch.h"
int strata_prefetch_placeholder_(void);
int strata_prefetch_placeholder_(void) { return 0; }
