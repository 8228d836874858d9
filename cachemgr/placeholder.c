/* Placeholder so that the library exists while the folder is being built. */
#include "cachemgr/cachemgr.h"
int strata_cachemgr_placeholder_(void);
int strata_cachemgr_placeholder_(void) { return 0; }
