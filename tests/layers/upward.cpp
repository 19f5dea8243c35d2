// Compiled against the passes layer's include path by the layers.* ctest: a passes file may not
// include a backend header, so this must fail with "No such file".
#include "backends/cpu/kernels.h"
