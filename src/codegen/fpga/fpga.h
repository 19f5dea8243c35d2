// The fpga device: an int8 MLP (quantize_affine -> qlinear(+relu) ... -> f32-out qlinear [+ bias] or
// dequantize_affine, the graph fuse-qdq makes of a QDQ model) as a pipelined SystemVerilog datapath,
// a Verilator testbench that streams inputs through it, and the host side that quantizes the
// inputs and applies the float epilogue. docs/devices/fpga.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::fpga {

// One fully connected layer: acc[n] = bias[n] + sum_k (x[k] - x_zp) * wc[n][k] (wc = w - w_zp[n]),
// then requantize(acc, m[n], shift[n]) + zp saturated (int_out) or the i32 acc itself (the host
// finishes it: f32(acc) * scale[n]).
struct Layer {
  std::string name;
  int64_t K = 0, N = 0;
  int32_t x_zp = 0;
  bool x_signed = false;
  std::vector<int32_t> wc;  // [N, K], weight minus its zero point (9 bits when a zero point is non-zero)
  int wbits = 8;
  std::vector<int32_t> bias, mul, shift;  // [N]
  bool int_out = true, out_signed = false, relu = false, half_even = true;
  int32_t zp = 0;
  std::vector<float> scale;  // f32 output: per-channel accumulator scale
};

struct Model {
  std::string input, output;  // graph value names
  float in_scale = 1;         // the graph's input quantize_affine
  int32_t in_zp = 0;
  bool in_signed = false;
  std::vector<Layer> layers;
  std::vector<float> post_bias;  // f32 bias added after a f32-out last layer (may be empty)
  bool dequant = false;          // int8 last layer followed by dequantize_affine
  float dq_scale = 1;
  int32_t dq_zp = 0;
  int64_t in_features() const { return layers.front().K; }
  int64_t out_features() const { return layers.back().N; }
};

// The plan of an int8 MLP graph (fuse-qdq applied here); throws "[fpga] ..." naming what does not fit.
Model plan_mlp(const Graph& g);

struct Options {
  int parallel = 1;  // P: output neurons computed per cycle in each layer (capped at the layer's N)
};

// The effective P of each layer.
std::vector<int> layer_parallelism(const Model& m, const Options& o);

// Writes DIR: rlx_fpga_layer.sv, rlx_fpga_top.sv, the ROM images (l<i>_{w,b,m,s}.hex), tb.cpp (the
// Verilator testbench), Makefile (sim / run / lint / synth-xilinx / synth-ice40) and model.json.
void write_project(const Model& m, const std::string& dir, const Options& o);

// Host side of one run.
std::vector<uint8_t> quantize_inputs(const Model& m, const Tensor& x);  // [rows, K] f32 -> bytes
Tensor finish_outputs(const Model& m, const std::vector<uint8_t>& raw, int64_t rows, const std::vector<int64_t>& shape);

struct SimStats {
  int64_t images = 0, cycles = 0;
  int64_t latency_first = 0, latency_max = 0;  // cycles from an image's first input byte to its last output
  double interval = 0;                         // cycles between consecutive images' last outputs (steady state)
  double build_s = 0, sim_s = 0;
  bool cached = false;  // the simulator binary came from the cache
  std::string dir;
};

// Which simulator tools are found on PATH; empty when all are there, else a sentence naming the missing one.
std::string missing_tools();

// Builds the project's simulator in DIR (make; skipped when built) and streams `bytes` through it.
std::vector<uint8_t> simulate(const std::string& dir, const std::vector<uint8_t>& bytes, int64_t rows, int64_t out_bytes,
                              SimStats* stats, int stall_percent = 0);

// The whole device: plan, write the project into the cache ($RLX_CACHE_DIR/fpga/<hash>), build,
// simulate, finish on the host. x: f32 [..., K]; returns the graph's output.
Tensor run_mlp(const Graph& g, const Tensor& x, const Options& o, SimStats* stats = nullptr);

}  // namespace rlx::fpga
