/* Placeholder so that the library exists while the folder is being built. */
#include "tiers/tiers.h"
int strata_tiers_placeholder_(void);
int strata_tiers_placeholder_(void) { return 0; }
