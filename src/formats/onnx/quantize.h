// Post-training static int8 quantization of ONNX models (`rlx quantize`, rlx.quantize): calibrates
// the activations feeding each MatMul / Gemm with a constant f32 weight (clipping ranges from
// quant/calibrate.h), writes a QDQ model (u8 asymmetric activations, i8 symmetric weights per tensor
// or per output channel, 7-bit with reduce_range) that ONNX Runtime and RLX's fuse-qdq pass both
// read, and measures each layer against float: its own (local) error with float inputs, and its
// output's in the quantized model. keep_float "auto" leaves the layers with the worst local SQNR in
// float, as few as the output cosine budget allows (a bisection over how many; each step compiles
// and runs the candidate model on the first calibration batch).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::onnx {

struct QuantizeOptions {
  std::string method = "minmax";  // minmax | percentile | mse | entropy
  double percentile = 99.99;      // percentile: the clipped share of each tail is (100 - p) / 2 %
  bool per_channel = false;
  std::string reduce_range = "auto";  // on | off | auto: 7-bit weights in [-64, 64], which the AVX2
                                      // vpmaddubsw GEMM runs exactly; auto: on where the host has AVX2
                                      // but not AVX-512 VNNI (whose vpdpbusd is exact at 8 bits)
  std::string keep_float;         // "" | "auto" | comma-separated layer names left in float
  double budget = 0.99;           // keep_float auto: the output cosine to reach
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
  double sqnr_db = 0, cosine = 0;  // the layer's output in the quantized model vs float
  double local_sqnr_db = 0;        // the layer alone: quantized x and w vs float, float inputs
};

struct QuantizeReport {
  std::vector<LayerError> layers;
  double output_sqnr_db = 0, output_cosine = 0;  // the first model output, quantized vs float
  double all_int8_cosine = 0;                     // the same with every candidate in int8
  int batches = 0;
  std::vector<std::string> kept_float;            // chosen by keep_float (auto or names)
  int evaluations = 0;                            // candidate models compiled and run
  bool reduce_range = false;                      // as resolved
};

// What reduce_range "auto" means on this host.
bool reduce_range_default();

QuantizeReport quantize_onnx(const std::string& in_path, const std::string& out_path, const QuantizeOptions& o);

}  // namespace rlx::onnx
