// The cortexm device entry and backend (backend.cpp).
#pragma once
#include "codegen/cortexm/cortexm.h"
#include "rlx/device.h"

namespace rlx {
DeviceInfo cortexm_device_info(bool probing);
cortexm::Board cortexm_board_from_env();  // RLX_CORTEXM_BOARD: m4 (default) | m55
}  // namespace rlx
