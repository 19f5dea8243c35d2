// Post-training static int8 quantization of ONNX models (`rlx quantize`, rlx.quantize): calibrates
// the activations feeding each MatMul with a constant f32 weight, writes a QDQ model (u8 asymmetric
// activations, i8 symmetric weights per tensor or per output channel) that ONNX Runtime and RLX's
// fuse-qdq pass both read, and measures each layer's output against float (SQNR, cosine).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::onnx {

struct QuantizeOptions {
  std::string method = "minmax";  // minmax | percentile
  double percentile = 99.99;      // percentile: the clipped share of each tail is (100 - p) / 2 %
  bool per_channel = false;
  int calib_batches = 8;          // random batches when calib_file is empty
  std::string calib_file;         // .npz: per model input an array [batches, ...input shape]
  Bindings bind;                  // symbolic input dims (unbound ones are 1)
  uint64_t seed = 0;
  std::string device = "cpu";
  std::function<void(int done, int total)> progress;
};

struct LayerError {
  std::string name;  // the MatMul node (its output name when unnamed)
  bool int8 = false;
  std::string why;   // why a layer stayed float
  double sqnr_db = 0, cosine = 0;
};

struct QuantizeReport {
  std::vector<LayerError> layers;
  double output_sqnr_db = 0, output_cosine = 0;  // the first model output, quantized vs float
  int batches = 0;
};

QuantizeReport quantize_onnx(const std::string& in_path, const std::string& out_path, const QuantizeOptions& o);

}  // namespace rlx::onnx
