/* Placeholder so that the library exists while the folder is being built. */
#include "engine/engine.h"
int strata_engine_placeholder_(void);
int strata_engine_placeholder_(void) { return 0; }
