// The shape classes of a row region over [R, C], shared by the row-regions pass (rows.cpp) and
// the backends' row kernels.
#pragma once
#include <cstdint>

#include "rlx/shape.h"

namespace rlx {

// Full [R, C], Row [R] / [R, 1], Col [C] / [1, C], Scalar (one element); None otherwise.
enum class RowShape : uint8_t { Full, Row, Col, Scalar, None };
RowShape row_shape(const Shape& s, int64_t R, int64_t C);

}  // namespace rlx
