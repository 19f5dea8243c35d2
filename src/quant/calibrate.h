// Clipping ranges of u8 asymmetric activations from calibration samples (`rlx quantize --method`):
//   minmax      the observed [lo, hi];
//   percentile  the central P% of the samples;
//   mse         the [a, b] (each end a fraction of lo / hi on a 40 x 40 grid) minimizing the expected
//               squared quantization error on a 2048-bin histogram: clipped mass contributes its
//               squared distance to the clip, in-range mass the rounding error scale^2 / 12;
//   entropy     the [a, b] on the same grid minimizing KL(P || Q) (TensorRT's calibration, two-sided):
//               P the histogram inside [a, b] with the clipped mass folded into the end bins, Q the
//               same bins merged into 255 levels and spread back over each level's non-empty bins.
//               The histogram has ~32 samples per bin (256 to 2048 bins) and a window must span at
//               least 255 bins, so with few samples entropy clips little (close to minmax).
// Every range includes 0 (so zero is exact), as ONNX's QuantizeLinear needs.
#pragma once
#include <string>
#include <vector>

namespace rlx::quant {

struct ClipRange {
  double lo = 0, hi = 0;
};

bool known_calibration(const std::string& method);  // minmax | percentile | mse | entropy

// `samples` may be reordered. lo / hi: the observed extremes (samples may be a subsample).
ClipRange calibrate_range(std::vector<float>& samples, double lo, double hi, const std::string& method,
                          double percentile);

// Expected squared error of u8 asymmetric quantization with range [a, b] of a histogram over
// [lo, hi] (bins of equal width): exposed for the tests.
double histogram_mse(const std::vector<double>& hist, double lo, double hi, double a, double b);

}  // namespace rlx::quant
