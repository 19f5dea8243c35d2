// Compiled against the passes layer's include path by the layers.* ctest: its own and lower layers'
// headers (reference, ir) resolve.
#include "passes/passes.h"
#include "rlx/reference.h"
#include "quant/blocks.h"
